// bench/scale.ts, axis `tokens`: authentication per request with `n` tokens stored, cached (the
// record reused for the token cache's time) and not (a lookup by the token's id), and `token list`.
import { TokenAuthenticator } from '../src/auth/authenticator.js';
import { hashToken, mintToken } from '../src/auth/token.js';
import { percentile } from './harness.js';
import { type Measure, type RunDb, cli } from './scale-kit.js';

/** The tokens really authenticated; the rest of the `n` are rows that only fill the table and its index. */
const REAL = 1000;

export async function tokensAxis(db: RunDb, n: number): Promise<Measure[]> {
  const now = Date.now();
  const real = Math.min(REAL, Math.floor(n / 10));
  const fillerId = db.engine === 'sqlite' ? `'f' || substr('00000000000' || i, -11)` : `'f' || lpad(i::text, 11, '0')`;
  const secret = db.engine === 'sqlite' ? 'randomblob(32)' : `decode(md5(i::text) || md5(i::text), 'hex')`;
  await db.sql(
    `INSERT INTO api_tokens (id, secret_hash, subject, scopes, created_at, expires_at, revoked_at)
     SELECT ${fillerId}, ${secret}, 'user' || (i % 1000), 'plants:read plants:write', ${now}, NULL, NULL
     FROM (${db.series(n - real)}) AS t`,
  );
  const store = await db.openStore();
  const tokens: string[] = [];
  try {
    for (let i = 0; i < real; i++) {
      const { id, token } = mintToken();
      await store.createToken({
        id,
        secretHash: hashToken(token),
        subject: `auth${i}`,
        scopes: ['plants:read'],
        createdAt: now,
        expiresAt: null,
        revokedAt: null,
      });
      tokens.push(token);
    }
    const measure = async (auth: TokenAuthenticator, rounds: number): Promise<{ cpuUs: number; p50Us: number }> => {
      const walls: number[] = [];
      const cpu = process.cpuUsage();
      for (let r = 0; r < rounds; r++)
        for (const token of tokens) {
          const started = performance.now();
          const principal = await auth.authenticate(token);
          walls.push((performance.now() - started) * 1000);
          if (!('subject' in principal)) throw new Error(`refused: ${principal.reason}`);
        }
      const used = process.cpuUsage(cpu);
      return { cpuUs: (used.user + used.system) / walls.length, p50Us: percentile(walls, 50) };
    };
    const uncachedAuth = new TokenAuthenticator(store, Date.now, 0);
    await measure(uncachedAuth, 1); // warm-up: the statement prepared, the pages read
    const uncached = await measure(uncachedAuth, 3);
    const cachedAuth = new TokenAuthenticator(store, Date.now, 1e12);
    await measure(cachedAuth, 1);
    const cached = await measure(cachedAuth, 20);

    const listStarted = performance.now();
    const listed = cli(db, ['token', 'list']);
    const listMs = performance.now() - listStarted;
    const lines = listed.split('\n').length - 2;
    if (lines < n) throw new Error(`token list printed ${lines} of ${n} tokens`);
    return [
      {
        name: 'authentication, not cached (a lookup by id): CPU per request',
        value: uncached.cpuUs,
        unit: 'µs',
        perOp: true,
      },
      { name: 'authentication, not cached: p50 wall time', value: uncached.p50Us, unit: 'µs', perOp: true },
      { name: 'authentication, cached: CPU per request', value: cached.cpuUs, unit: 'µs', perOp: true },
      {
        name: '`token list` (a process, every token in one table): wall time',
        value: listMs,
        unit: 'ms',
        perOp: false,
      },
      { name: '`token list`: output', value: listed.length / 1024, unit: 'KiB', perOp: false },
    ];
  } finally {
    await store.close();
  }
}
