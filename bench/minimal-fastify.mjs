// What the framework itself costs: a minimal Fastify 5 app doing the service's three plant
// operations with the service's SQLite statements and durability (WAL, synchronous=FULL, group
// commit), and nothing else: one bearer token compared in constant time, no logging, metrics, ETag,
// compression, CORS or OpenAPI, and no event log unless MINIMAL_EVENTS=1 (then each create and
// delete also writes its events row, in the same transaction, as the service always does). With
// MINIMAL_PAGE_CACHE=1 a list is read as the service's store reads it (src/store/sqlite/plants.ts):
// from the pages it read before, kept until a write and checked against PRAGMA data_version, so a
// GET in a steady state runs that pragma rather than the SELECT.
// Started by bench/cost.ts beside the service and bench/bare-server.mjs; plain JavaScript, as the
// bare server, so that nothing stands between it and Fastify.
//
//   DATABASE_PATH=/tmp/m.db PORT=0 TOKEN=secret [MINIMAL_EVENTS=1] [MINIMAL_PAGE_CACHE=1] \
//     node bench/minimal-fastify.mjs
import { createHash, timingSafeEqual } from 'node:crypto';
import { setImmediate } from 'node:timers';
import Database from 'better-sqlite3';
import Fastify from 'fastify';

const { DATABASE_PATH, TOKEN } = process.env;
if (!DATABASE_PATH || !TOKEN) throw new Error('DATABASE_PATH and TOKEN must be set');
const EVENTS = process.env.MINIMAL_EVENTS === '1';
const PAGE_CACHE = process.env.MINIMAL_PAGE_CACHE === '1';
/** The owner of every plant: the one token's subject (bench/cost.ts creates it for `bench`). */
const OWNER = 'bench';
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

// The connection as src/store/sqlite/connection.ts opens a server's, and the tables and indexes of
// src/store/sqlite/migrations.ts that the three operations touch.
const db = new Database(DATABASE_PATH);
db.pragma('busy_timeout = 0'); // the server's: no statement waits inside SQLite (no other writer here)
db.pragma('journal_mode = WAL');
if (db.pragma('journal_mode', { simple: true }) !== 'wal')
  throw new Error(`could not put ${DATABASE_PATH} in WAL mode`);
db.pragma('synchronous = FULL'); // every commit fsynced before it returns: a 200 survives power loss
if (db.pragma('synchronous', { simple: true }) !== 2) throw new Error('could not set synchronous=FULL');
db.exec(`
  CREATE TABLE IF NOT EXISTS plants (
    id    INTEGER PRIMARY KEY,
    owner TEXT NOT NULL,
    name  TEXT NOT NULL,
    tag   TEXT
  ) STRICT;
  CREATE INDEX IF NOT EXISTS plants_owner_id ON plants (owner, id);
  CREATE INDEX IF NOT EXISTS plants_owner_tag_id ON plants (owner, tag, id) WHERE tag IS NOT NULL;
  CREATE INDEX IF NOT EXISTS plants_tag_id ON plants (tag, id) WHERE tag IS NOT NULL;
  CREATE TABLE IF NOT EXISTS events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    type       TEXT NOT NULL,
    owner      TEXT NOT NULL,
    plant_id   INTEGER NOT NULL,
    payload    TEXT NOT NULL,
    created_at INTEGER NOT NULL
  ) STRICT;
  CREATE INDEX IF NOT EXISTS events_owner_id ON events (owner, id);
`);

// The service's statements (src/store/sqlite/plants.ts, sqlite/event-log.ts), ids as bigints.
/** @param {string} sql */
const q = (sql) => db.prepare(sql).safeIntegers(true);
const sql = {
  listOwner: q('SELECT id, owner, name, tag FROM plants WHERE owner = ? AND id >= ? ORDER BY id LIMIT ?'),
  insert: q('INSERT INTO plants (id, owner, name, tag) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING'),
  byId: q('SELECT id, owner, name, tag FROM plants WHERE id = ?'),
  deleteOwn: q('DELETE FROM plants WHERE id = ? AND owner = ? RETURNING owner').pluck(),
  insertEvent: q('INSERT INTO events (type, owner, plant_id, payload, created_at) VALUES (?, ?, ?, ?, ?)'),
  dataVersion: db.prepare('PRAGMA data_version').pluck(),
};

// Group commit (src/store/sqlite/group-commit.ts, without its wait for another connection's lock): the
// writes of one event-loop turn share one transaction and one fsync, and each is answered only
// after the COMMIT. As the service's plant writes, a batch runs in one savepoint; only when a write
// throws is it rolled back and each write run again in a savepoint of its own, to fail alone.
/** @type {Array<{ write: () => unknown, resolve: (value: unknown) => void, reject: (error: unknown) => void }>} */
let queue = [];
const begin = db.prepare('BEGIN IMMEDIATE');
const commit = db.prepare('COMMIT');
const rollback = db.prepare('ROLLBACK');
const savepoint = db.transaction((/** @type {() => unknown} */ write) => write());

function flush() {
  const batch = queue;
  queue = [];
  /** @type {Array<{ ok: boolean, value?: unknown, error?: unknown }>} */
  let outcomes;
  try {
    begin.run();
    try {
      outcomes = /** @type {typeof outcomes} */ (savepoint(() => batch.map((p) => ({ ok: true, value: p.write() }))));
    } catch {
      if (!db.inTransaction) throw new Error('the transaction ended under a write');
      outcomes = batch.map((p) => {
        try {
          return { ok: true, value: savepoint(p.write) };
        } catch (error) {
          return { ok: false, error }; // this write alone fails
        }
      });
    }
    commit.run();
  } catch (error) {
    if (db.inTransaction) rollback.run();
    for (const p of batch) p.reject(error);
    return;
  }
  batch.forEach((p, i) => (outcomes[i]?.ok ? p.resolve(outcomes[i].value) : p.reject(outcomes[i]?.error)));
}

/**
 * @template T
 * @param {() => T} write
 * @returns {Promise<T>}
 */
const inCommit = (write) =>
  new Promise((resolve, reject) => {
    if (queue.push({ write, resolve: /** @type {(value: unknown) => void} */ (resolve), reject }) === 1)
      setImmediate(flush);
  });

const app = Fastify({ logger: false });

// One token, compared in constant time (as digests, so that its length does not show either).
const expected = createHash('sha256').update(`Bearer ${TOKEN}`).digest();
app.addHook('onRequest', (request, reply, done) => {
  const given = request.headers.authorization;
  if (given !== undefined && timingSafeEqual(createHash('sha256').update(given).digest(), expected)) return done();
  void reply.code(401).header('www-authenticate', 'Bearer realm="plant-store"').send({ message: 'unauthorized' });
});

// JSON.parse with the body's id quoted first, so that an id beyond 2^53 stays exact.
app.removeContentTypeParser('application/json');
app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
  try {
    done(null, JSON.parse(String(body).replace(/("id"\s*:\s*)(-?\d+)/, '$1"$2"')));
  } catch (error) {
    const bad = /** @type {Error & { statusCode?: number }} */ (error);
    bad.statusCode = 400;
    done(bad, undefined);
  }
});

/** A decimal int64 as a bigint, or undefined. @param {string} text */
function int64(text) {
  if (!/^-?\d{1,19}$/.test(text)) return undefined;
  const id = BigInt(text);
  return id < INT64_MIN || id > INT64_MAX ? undefined : id;
}

// A plant on the wire, as the contract has it: name, and tag only when there is one (no id).
const plant = { type: 'object', properties: { name: { type: 'string' }, tag: { type: 'string' } } };
/** @param {{ name: string, tag: string | null }} row */
const toPlant = (row) => (row.tag === null ? { name: row.name } : { name: row.name, tag: row.tag });

/** MINIMAL_PAGE_CACHE=1: the pages read so far, by limit; dropped by a write or another connection's commit. */
const pages = new Map();
let seenVersion = -1n;
/** This connection's own commits leave data_version as it is: its writes drop the pages themselves. */
const wrote = () => pages.clear();

/** @param {number} limit */
function readPage(limit) {
  const read = () =>
    /** @type {Array<{ name: string, tag: string | null }>} */ (sql.listOwner.all(OWNER, INT64_MIN, limit)).map(
      toPlant,
    );
  if (!PAGE_CACHE) return read();
  const version = sql.dataVersion.get();
  if (version !== seenVersion) {
    pages.clear();
    seenVersion = version;
  }
  let page = pages.get(limit);
  if (page === undefined) pages.set(limit, (page = read()));
  return page;
}

app.get(
  '/plants',
  {
    schema: {
      querystring: {
        type: 'object',
        properties: { limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
      },
      response: { 200: { type: 'array', items: plant } },
    },
  },
  async (request) => readPage(/** @type {{ limit: number }} */ (request.query).limit),
);

app.post(
  '/plants',
  {
    schema: {
      body: {
        type: 'object',
        required: ['id', 'name'],
        additionalProperties: false,
        properties: {
          id: { type: 'string', pattern: '^-?[0-9]{1,19}$' },
          name: { type: 'string', minLength: 1, maxLength: 200 },
          tag: { type: ['string', 'null'], minLength: 1, maxLength: 100 },
        },
      },
      response: { 200: plant },
    },
  },
  async (request, reply) => {
    const body = /** @type {{ id: string, name: string, tag?: string | null }} */ (request.body);
    const id = int64(body.id);
    if (id === undefined) return reply.code(400).send({ message: 'body.id must be an int64' });
    const { name } = body;
    const tag = body.tag ?? null;
    const existing = await inCommit(() => {
      if (sql.insert.run(id, OWNER, name, tag).changes === 1) {
        wrote();
        if (EVENTS) {
          const payload = `{"id":${id},"name":${JSON.stringify(name)}${tag === null ? '' : `,"tag":${JSON.stringify(tag)}`}}`;
          sql.insertEvent.run('plant.created', OWNER, id, payload, Date.now());
        }
        return undefined;
      }
      return /** @type {{ owner: string, name: string, tag: string | null }} */ (sql.byId.get(id));
    });
    if (existing === undefined) return toPlant({ name, tag });
    // An identical retry by its owner is a 200 with the same plant; anything else a 409.
    if (existing.owner === OWNER && existing.name === name && existing.tag === tag) return toPlant(existing);
    return reply.code(409).send({ message: `a plant with id ${id} already exists` });
  },
);

app.delete('/plants/:id', async (request, reply) => {
  const id = int64(/** @type {{ id: string }} */ (request.params).id);
  if (id === undefined) return reply.code(400).send({ message: 'id must be an int64' });
  const deleted = await inCommit(() => {
    if (sql.deleteOwn.get(id, OWNER) === undefined) return false;
    wrote();
    if (EVENTS) sql.insertEvent.run('plant.deleted', OWNER, id, `{"id":${id}}`, Date.now());
    return true;
  });
  return deleted ? reply.code(204).send() : reply.code(404).send({ message: `no plant with id ${id}` });
});

await app.listen({ port: Number(process.env.PORT ?? 0), host: '127.0.0.1' });
const address = app.server.address();
process.stdout.write(`listening ${typeof address === 'object' && address ? address.port : 0}\n`);
process.once('SIGTERM', () => {
  void app.close().then(() => {
    db.close();
    process.exit(0);
  });
});
