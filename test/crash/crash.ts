// npm run test:crash — crash safety under load, on every storage engine.
//
// Each round runs concurrent creates and deletes against the real server process, SIGKILLs it at
// a random moment, checks the database's integrity and contents directly, restarts the server on
// the same database and checks again through the API. Every acknowledged create must be stored
// as sent, every acknowledged delete must be gone, nothing never sent may exist; a request in
// flight at the kill may have happened or not, and is settled by what the restarted store holds.
// The store accumulates across rounds, so each round re-checks all earlier rounds' data.
//
// A webhook is subscribed throughout: at the end every logged event must reach its receiver, signed,
// every event must match a change the clients sent, and every acknowledged change must have one.
// On SQLite every third round another connection also holds the write lock for part of the load.
// Settings: CRASH_ROUNDS (20 per engine), CRASH_ENGINES (sqlite,postgres), CRASH_CLIENTS (16).
// PostgreSQL: a fresh database on TEST_DATABASE_URL's server, else on a throwaway server.
// What it cannot show: a power loss. The kill ends the process, not the machine, so the kernel
// still writes what was written; fsync itself is not tested, only that nothing is acknowledged
// before its commit and that the database recovers from a process dying mid-transaction.

import { once } from 'node:events';
import { runCli, startServer, type ServerProcess } from '../process.js';
import { Receiver } from '../e2e/webhook-receiver.js';
import { type CrashDatabase, postgresDatabase, sqliteDatabase } from './engines.js';
import { Ledger } from './ledger.js';
import { Client, startLoad } from './load.js';

const OWNER = 'crash-owner';

function setting(name: string, fallback: number, min: number): number {
  const text = process.env[name];
  const n = text === undefined || text === '' ? fallback : Number(text);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} must be an integer of at least ${min}; got "${text}"`);
  return n;
}

const rounds = setting('CRASH_ROUNDS', 20, 1);
const clients = setting('CRASH_CLIENTS', 16, 1);
const engines = (process.env.CRASH_ENGINES ?? 'sqlite,postgres').split(',').map((e) => e.trim());
for (const engine of engines) {
  if (engine !== 'sqlite' && engine !== 'postgres') throw new Error(`CRASH_ENGINES: unknown engine "${engine}"`);
}

interface Totals {
  engine: string;
  rounds: number;
  creates: number;
  deletes: number;
  inFlight: number;
  stored: number;
  seconds: number;
  delivered: string;
  violations: string[];
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function kill(server: ServerProcess): Promise<void> {
  const exited = once(server.child, 'exit');
  server.child.kill('SIGKILL');
  await exited;
}

async function crashRounds(db: CrashDatabase, totals: Totals): Promise<void> {
  // A webhook is subscribed for the whole run; its receiver (on 127.0.0.1) verifies each
  // delivery's signature. Retries come fast so the backlog left by each kill drains within the run.
  const env = {
    DATABASE_URL: db.url,
    RATE_LIMIT: 'off',
    LOG_LEVEL: 'info',
    WEBHOOK_ALLOW_PRIVATE: '1',
    WEBHOOK_RETRY_SCHEDULE: '0s,200ms,200ms,500ms,500ms,1s,1s,2s,2s,5s',
  };
  const minted = await runCli(
    ['token', 'create', '--subject', OWNER, '--scopes', 'plants:read,plants:write', '--json'],
    env,
  );
  if (minted.code !== 0) throw new Error(`token create failed: ${minted.stderr}`);
  const { token } = JSON.parse(minted.stdout) as { token: string };
  const ledger = new Ledger(OWNER);
  console.log(`[${db.engine}] integrity: ${db.integrityMethod}`);
  const receiver = new Receiver();
  await receiver.start();
  const subscribed = await runCli(['webhooks', 'add', '--subject', OWNER, '--url', receiver.url, '--json'], env);
  if (subscribed.code !== 0) throw new Error(`webhooks add failed: ${subscribed.stderr}`);
  receiver.secret = (JSON.parse(subscribed.stdout) as { secret: string }).secret;

  let server = await startServer(env);
  try {
    for (let round = 1; round <= rounds; round++) {
      const client = new Client(server.url, token, clients);
      const load = startLoad(client, ledger, round, clients);
      const loadMs = 50 + Math.floor(Math.random() * 350);
      // Every third SQLite round another connection takes the write lock during the load:
      // writes wait for it without freezing the server, and are acknowledged only once committed.
      // Half of those rounds release it before the kill, half hold it through the kill.
      const lock =
        db.holdWriteLock && round % 3 === 0
          ? { at: Math.floor(loadMs / 4), releaseAt: round % 2 === 0 ? Math.floor((loadMs * 3) / 4) : undefined }
          : undefined;
      let release: (() => void) | undefined;
      if (lock) {
        await sleep(lock.at);
        release = db.holdWriteLock!();
        await sleep((lock.releaseAt ?? loadMs) - lock.at);
        if (lock.releaseAt !== undefined) release();
        await sleep(loadMs - (lock.releaseAt ?? loadMs));
      } else await sleep(loadMs);
      load.stop();
      await kill(server);
      if (lock && lock.releaseAt === undefined) release?.();
      const { acked, refused, violations } = await load.done;
      client.close();
      const inFlight = { creates: ledger.count('creating'), deletes: ledger.count('deleting') };

      // The crashed database, as the next start will find it.
      await db.quiesce();
      const crashed = await db.inspect();
      // Integrity first: when the database is damaged, the rest follows from it.
      violations.unshift(...crashed.problems, ...ledger.check(crashed.plants));
      const settled = ledger.settle(crashed.plants);

      // The same, through the restarted service: an owner's listing, page by page.
      server = await startServer(env);
      const viewer = new Client(server.url, token, 1);
      const listed = await viewer.list(OWNER).finally(() => viewer.close());
      violations.push(...listed.problems, ...ledger.check(listed.plants));

      totals.rounds = round;
      totals.creates += acked.creates;
      totals.deletes += acked.deletes;
      totals.inFlight += inFlight.creates + inFlight.deletes;
      totals.stored = crashed.plants.size;
      console.log(
        `[${db.engine}] round ${String(round).padStart(2)}/${rounds}: killed after ${String(loadMs).padStart(3)} ms; ` +
          (lock
            ? `write lock held elsewhere from ${lock.at} ms ${lock.releaseAt === undefined ? 'through the kill' : `to ${lock.releaseAt} ms`}; `
            : '') +
          `acked ${acked.creates} creates, ${acked.deletes} deletes${refused > 0 ? ` (${refused} refused: 503)` : ''}; ` +
          `in flight ${inFlight.creates} creates (${settled.creates.stored} stored), ` +
          `${inFlight.deletes} deletes (${settled.deletes.done} done); ` +
          `${crashed.plants.size} plants; ${violations.length === 0 ? 'ok' : `${violations.length} VIOLATIONS`}`,
      );
      if (violations.length > 0) {
        totals.violations.push(...violations.map((v) => `${db.engine} round ${round}: ${v}`));
        return;
      }
    }
    if (totals.violations.length === 0) await checkDeliveries(db, ledger, receiver, totals);
  } finally {
    await receiver.stop();
    // A server that died (a failed round) has nothing left to stop.
    const alive = server.child.exitCode === null && server.child.signalCode === null;
    const code = alive ? await server.stop() : 0;
    if (code !== 0 && totals.violations.length === 0) {
      totals.violations.push(`${db.engine}: the last server stopped with exit code ${code}, not 0`);
    }
  }
}

/**
 * After the last round, with a server running: every event in the log reaches the receiver, at
 * least once, signed; every event matches a change the clients sent (a change killed before its
 * answer may have committed, and then has its event too); every acknowledged change has its event.
 */
async function checkDeliveries(db: CrashDatabase, ledger: Ledger, receiver: Receiver, totals: Totals): Promise<void> {
  const logged = await db.events();
  const problems: string[] = [];
  const created = new Map<bigint, string>();
  const deleted = new Set<bigint>();
  for (const event of logged) {
    const id = BigInt(/^\{"id":(-?\d+)/.exec(event.payload)?.[1] ?? 'x');
    const sent = ledger.entries.get(id);
    if (event.type === 'plant.created') {
      created.set(id, event.payload);
      const expected =
        sent &&
        JSON.stringify(
          sent.tag === null ? { id: 0, name: sent.name } : { id: 0, name: sent.name, tag: sent.tag },
        ).replace('"id":0', `"id":${id}`);
      if (event.payload !== expected)
        problems.push(`event ${event.id}: ${event.payload} matches no create the clients sent`);
    } else if (event.type === 'plant.deleted') {
      deleted.add(id);
      if (!sent) problems.push(`event ${event.id}: a delete of ${id}, a plant the clients never created`);
    } else problems.push(`event ${event.id}: unknown type ${event.type}`);
  }
  // Every fate is settled by now: created and deleted ones committed (acknowledged, or found so
  // after a kill), absent ones never did.
  for (const [id, entry] of ledger.entries) {
    const stored = entry.fate === 'created' || entry.fate === 'deleting' || entry.fate === 'deleted';
    if (stored && !created.has(id)) problems.push(`the create of ${id} committed but has no plant.created event`);
    if (entry.fate === 'deleted' && !deleted.has(id))
      problems.push(`the delete of ${id} committed but has no plant.deleted event`);
    if (entry.fate === 'absent' && created.has(id))
      problems.push(`the create of ${id} never committed, yet has an event`);
  }
  const want = new Set(logged.map((e) => `evt_${e.id}`));
  try {
    await receiver.until((r) => [...want].every((id) => r.some((x) => x.id === id)), 120_000);
  } catch (error) {
    const got = new Set(receiver.received.map((r) => r.id));
    problems.push(
      `${[...want].filter((id) => !got.has(id)).length} of ${want.size} events never delivered: ${String(error)}`,
    );
  }
  const byEvent = new Map(logged.map((e) => [`evt_${e.id}`, e]));
  for (const r of receiver.received) {
    const event = byEvent.get(r.id);
    if (!r.verified) problems.push(`delivery ${r.id}: the signature does not verify`);
    if (!event) problems.push(`delivery ${r.id}: no such event in the log`);
    else if (event.payload !== r.body || event.type !== r.type)
      problems.push(`delivery ${r.id}: ${r.body} differs from the log's ${event.payload}`);
  }
  const { duplicates } = receiver.byId();
  totals.delivered = `${want.size} events delivered, ${duplicates} duplicate deliveries`;
  console.log(
    `[${db.engine}] webhook: ${totals.delivered}; ${problems.length === 0 ? 'ok' : `${problems.length} VIOLATIONS`}`,
  );
  totals.violations.push(...problems.map((p) => `${db.engine} webhook: ${p}`));
}

async function runEngine(engine: string): Promise<Totals> {
  const started = Date.now();
  const totals: Totals = {
    engine,
    rounds: 0,
    creates: 0,
    deletes: 0,
    inFlight: 0,
    stored: 0,
    seconds: 0,
    delivered: 'no webhook check',
    violations: [],
  };
  const db = engine === 'sqlite' ? sqliteDatabase() : await postgresDatabase();
  try {
    await crashRounds(db, totals);
  } catch (error) {
    totals.violations.push(
      `${engine}: the run failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    );
  } finally {
    const kept = await db.dispose(totals.violations.length > 0);
    if (kept !== undefined) console.log(`[${engine}] the database is kept for inspection: ${kept}`);
  }
  totals.seconds = (Date.now() - started) / 1000;
  return totals;
}

// A hung run fails instead of holding CI: 20 + 20 rounds take about a minute on two cores.
const watchdog = setTimeout(() => {
  console.error('crash test: no result within 10 minutes; giving up');
  process.exit(1);
}, 10 * 60_000);
watchdog.unref();

const results: Totals[] = [];
for (const engine of engines) results.push(await runEngine(engine));

console.log('\nsummary');
for (const t of results) {
  console.log(
    `  ${t.engine.padEnd(8)} ${t.rounds}/${rounds} rounds in ${t.seconds.toFixed(1)} s: ${t.creates} acked creates, ` +
      `${t.deletes} acked deletes, ${t.inFlight} in flight at a kill, ${t.stored} plants at the end; ${t.delivered}; ` +
      `${t.violations.length === 0 ? 'no violations' : `${t.violations.length} violations`}`,
  );
}
const violations = results.flatMap((t) => t.violations);
if (violations.length > 0) {
  console.error(`\nCRASH SAFETY VIOLATED (${violations.length}):`);
  for (const v of violations.slice(0, 50)) console.error(`  ${v}`);
  if (violations.length > 50) console.error(`  … and ${violations.length - 50} more`);
  process.exit(1);
}
console.log('crash safety holds: every acknowledged write survived every kill, and nothing else appeared');
