// bench/scale.ts, axis `tokens`: authentication per request with `n` tokens stored, cached (the
// record reused for the token cache's time) and not (a lookup by the token's id, each token once:
// cold), and `token list`:
// the whole list and one page of 100 from the middle (--after), each as a process, its wall time
// and peak RSS (/usr/bin/time's maximum resident set). With BENCH_SCALE_CHECKOUT=<dir> (a built
// worktree of another commit, the A) the `token list` rows are measured for A and for this
// checkout (B), alternating, in one run; A runs on its own schema (B's token indexes dropped).
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { TokenAuthenticator } from '../src/auth/authenticator.js';
import { hashToken, mintToken } from '../src/auth/token.js';
import { TokenService } from '../src/auth/token.service.js';
import { type Measure, type RunDb, times } from './kit/scale.js';
import { BIN } from './kit/server.js';
import { median, percentile } from './kit/stats.js';

/** The page of `token list --limit … --after <the middle>`. */
const PAGE = 100;
/** Reads of the page in this process. */
const PAGE_IN_PROCESS = 200;
/** Runs of the page in each round. */
const PAGE_RUNS = 3;
/** Rounds of each `token list` measure (A and B alternating): the median is reported. */
const ROUNDS = 3;
/** The indexes migration 9 (SQLite) / 8 (PostgreSQL) adds: B's schema has them, A's (before) not. */
const TOKEN_INDEXES = [
  'CREATE INDEX IF NOT EXISTS api_tokens_created ON api_tokens (created_at, id)',
  'CREATE INDEX IF NOT EXISTS api_tokens_subject ON api_tokens (subject, created_at, id)',
];

interface Run {
  readonly ms: number;
  readonly rssKiB: number;
  readonly stdout: string;
}

/** `plant-store <args>` of `bin` as a process: its wall time, its peak RSS and what it printed. */
function run(db: RunDb, bin: string, args: string[]): Run {
  const rssFile = join(db.dir, 'maxrss');
  const started = performance.now();
  const stdout = execFileSync('/usr/bin/time', ['-f', '%M', '-o', rssFile, process.execPath, bin, ...args], {
    env: { ...process.env, DATABASE_URL: db.url },
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const ms = performance.now() - started;
  const rssKiB = Number(readFileSync(rssFile, 'utf8').trim().split('\n').at(-1));
  rmSync(rssFile);
  return { ms, rssKiB, stdout };
}

/** The table's cells, whatever their padding: what A and B must both print. */
const cells = (text: string): string => text.replace(/ +/g, ' ');

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
    const measure = async (
      auth: TokenAuthenticator,
      rounds: number,
      which: readonly string[] = tokens,
    ): Promise<{ cpuUs: number; p50Us: number }> => {
      const walls: number[] = [];
      const cpu = process.cpuUsage();
      for (let r = 0; r < rounds; r++)
        for (const token of which) {
          const started = performance.now();
          const principal = await auth.authenticate(token);
          walls.push((performance.now() - started) * 1000);
          if (!('subject' in principal)) throw new Error(`refused: ${principal.reason}`);
        }
      const used = process.cpuUsage(cpu);
      return { cpuUs: (used.user + used.system) / walls.length, p50Us: percentile(walls, 50) };
    };
    // Cold: each token of the second half looked up once, its rows never read before by this
    // connection; the first half only prepares the statement. (Checking the same tokens again
    // would measure the page cache, at every size alike.)
    const uncachedAuth = new TokenAuthenticator(store, Date.now, 0);
    const half = Math.floor(tokens.length / 2);
    await measure(uncachedAuth, 1, tokens.slice(0, half));
    const uncached = await measure(uncachedAuth, 1, tokens.slice(half));
    const cachedAuth = new TokenAuthenticator(store, Date.now, 1e12);
    await measure(cachedAuth, 1);
    const cached = await measure(cachedAuth, 20);

    // The middle of the listing (creation, then id): the fillers share one created_at, so by id.
    const middle = `f${String(Math.floor((n - real) / 2)).padStart(11, '0')}`;
    const pageSize = Math.min(PAGE, Math.floor((n - real) / 4)); // fewer with --quick
    const a = process.env.BENCH_SCALE_CHECKOUT;
    const bins: Array<[string, string]> =
      a === undefined
        ? [['', BIN]]
        : [
            ['A ', join(a, 'bin/plant-store.js')],
            ['B ', BIN],
          ];
    const whole = new Map<string, Run[]>();
    const json = new Map<string, Run[]>();
    const page = new Map<string, Run[]>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const [label, bin] of bins) {
        await db.sql(
          label === 'A '
            ? 'DROP INDEX IF EXISTS api_tokens_created;\nDROP INDEX IF EXISTS api_tokens_subject'
            : TOKEN_INDEXES.join(';\n'),
        );
        const listed = run(db, bin, ['token', 'list']);
        const lines = listed.stdout.split('\n').length - 2;
        if (lines < n) throw new Error(`${label}token list printed ${lines} of ${n} tokens`);
        whole.set(label, [...(whole.get(label) ?? []), listed]);
        const asJson = run(db, bin, ['token', 'list', '--json']);
        if ((JSON.parse(asJson.stdout) as unknown[]).length !== n)
          throw new Error(`${label}token list --json: not ${n}`);
        json.set(label, [...(json.get(label) ?? []), asJson]);
        if (label === 'A ') continue; // A has no --after: the whole list was the only way to that page
        // A process that prints 100 lines is mostly Node's start: more runs, for a steadier median.
        for (let i = 0; i < PAGE_RUNS; i++) {
          const one = run(db, bin, ['token', 'list', '--limit', String(pageSize), '--after', middle]);
          const rows = one.stdout.trimEnd().split('\n');
          if (
            rows.length !== pageSize + 1 ||
            !rows[1]!.startsWith(`f${String(Math.floor((n - real) / 2) + 1).padStart(11, '0')} `)
          )
            throw new Error(`${label}token list --after ${middle}: ${rows.length - 1} rows, first ${rows[1]}`);
          page.set(label, [...(page.get(label) ?? []), one]);
        }
      }
    }
    // The same page in this process, through the service (the lookup of --after, then one query),
    // on B's schema (the last of a round): what it costs without Node's start and the connection.
    const service = new TokenService(store);
    const readPage = async (): Promise<number> => {
      let count = 0;
      for await (const _token of service.list({ after: middle, limit: pageSize })) count += 1;
      if (count !== pageSize) throw new Error(`the page after ${middle} held ${count} tokens`);
      return count;
    };
    await readPage(); // warm-up: the statements prepared
    const inProcess = await times(PAGE_IN_PROCESS, readPage);
    if (a !== undefined && cells(whole.get('A ')![0]!.stdout) !== cells(whole.get('B ')![0]!.stdout))
      throw new Error('A and B printed different token lists');
    if (a !== undefined && json.get('A ')![0]!.stdout !== json.get('B ')![0]!.stdout)
      throw new Error('A and B printed different JSON');
    const listRows = [...whole].flatMap(([label, runs]): Measure[] => [
      {
        name: `${label}\`token list\` (a process, every token in one table): wall time`,
        value: median(runs.map((r) => r.ms)),
        unit: 'ms',
        perOp: false,
      },
      {
        name: `${label}\`token list\`: peak RSS of the process`,
        value: median(runs.map((r) => r.rssKiB)) / 1024,
        unit: 'MiB',
        perOp: true,
      },
      {
        name: `${label}\`token list --json\`: peak RSS of the process`,
        value: median(json.get(label)!.map((r) => r.rssKiB)) / 1024,
        unit: 'MiB',
        perOp: true,
      },
    ]);
    const pageRows = [...page].flatMap(([label, runs]): Measure[] => [
      {
        name: `${label}\`token list --limit 100 --after <the middle>\` (a process): wall time`,
        value: median(runs.map((r) => r.ms)),
        unit: 'ms',
        perOp: true,
      },
      {
        name: `${label}\`token list --limit 100 --after <the middle>\`: peak RSS`,
        value: median(runs.map((r) => r.rssKiB)) / 1024,
        unit: 'MiB',
        perOp: true,
      },
    ]);
    return [
      {
        name: 'authentication, not cached (a lookup by id): CPU per request',
        value: uncached.cpuUs,
        unit: 'µs',
        perOp: true,
      },
      { name: 'authentication, not cached: p50 wall time', value: uncached.p50Us, unit: 'µs', perOp: true },
      { name: 'authentication, cached: CPU per request', value: cached.cpuUs, unit: 'µs', perOp: true },
      ...listRows,
      {
        name: '`token list`: output',
        value: whole.get(bins.at(-1)![0])![0]!.stdout.length / 1024,
        unit: 'KiB',
        perOp: false,
      },
      ...pageRows,
      {
        name: `the same page in this process (TokenService.list: the lookup of --after, one query): p50`,
        value: percentile(inProcess, 50) * 1000,
        unit: 'µs',
        perOp: true,
      },
    ];
  } finally {
    await store.close();
  }
}
