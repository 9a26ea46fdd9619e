import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { BIN } from '../process.js';

// `--help`, `--version` and a usage mistake answer in Node's own start-up time: they load none of
// the packages a command needs only to do its work (the database drivers, the logger, the schema
// validator, the HTTP server and client, the schema builder, OpenTelemetry). Each command runs as a
// process of its own, as users run it, under an --import that records every module the process
// resolves (a loader hook: ES modules, and the CommonJS packages they import), every CommonJS
// module it required, and node's own modules it loaded (the global fetch's undici is one of them).
// What is checked is what loads, never a time.

const dir = mkdtempSync(join(tmpdir(), 'plant-store-light-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The loader hooks, in a thread of their own: each URL resolved, appended to the log. */
const HOOKS = `
import { appendFileSync } from 'node:fs';
let log;
export function initialize(data) { log = data.log; }
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(log, resolved.url + '\\n');
  return resolved;
}`;

/** What --import runs first: registers HOOKS, and at exit adds what the hooks do not see. */
const RECORDER = `
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
const log = process.env.PLANT_STORE_LOAD_LOG;
register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(HOOKS)}`)}, { data: { log } });
process.on('exit', () => {
  const required = Object.keys(createRequire(process.execPath).cache);
  appendFileSync(log, [...required, ...process.moduleLoadList].join('\\n') + '\\n');
});`;

/** The packages none of these commands may load, each with what shows it loaded. */
const HEAVY: ReadonlyArray<readonly [string, RegExp]> = [
  ['better-sqlite3', /node_modules\/better-sqlite3\//],
  ['pg', /node_modules\/pg(-[a-z]+)?\//],
  ['undici', /node_modules\/undici\/|internal\/deps\/undici\//],
  ['pino', /node_modules\/pino\//],
  ['ajv', /node_modules\/ajv\//],
  ['fastify', /node_modules\/(@fastify\/|fastify\/)/],
  ['typebox', /node_modules\/typebox\/|\/dist\/vendor\/typebox\.js/],
  ['@opentelemetry', /node_modules\/@opentelemetry\//],
];

let runs = 0;
const database = join(dir, 'plants.db');

/** The heavy packages `plant-store <args>` loaded, its exit code, and how many modules were recorded. */
function loadedBy(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; heavy: string[]; seen: number }> {
  const log = join(dir, `loads-${runs++}.txt`);
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', `data:text/javascript,${encodeURIComponent(RECORDER)}`, BIN, ...args],
      { env: { ...process.env, DATABASE_URL: `sqlite:${database}`, ...env, PLANT_STORE_LOAD_LOG: log }, cwd: dir },
      (error) => {
        const lines = existsSync(log) ? readFileSync(log, 'utf8').split('\n') : [];
        const heavy = HEAVY.filter(([, shows]) => lines.some((line) => shows.test(line))).map(([name]) => name);
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, heavy, seen: lines.filter((line) => line.includes('/dist/cli/')).length });
      },
    );
  });
}

const LIGHT: Array<[args: string[], code: number]> = [
  [['--help'], 0],
  [['-h'], 0],
  [['help', 'webhooks'], 0],
  [['token', 'create', '--help'], 0],
  [['--version'], 0],
  [['-v'], 0],
  [['token', 'create', '--scopes', 'plants:bogus', '--subject', 'a'], 2],
  [['token', 'create', '--subject', 'a', '--scopes', 'plants:read', '--expires-in', 'soon'], 2],
  [['token', 'list', '--after', 'nope'], 2],
  [['token', 'revoke'], 2],
  [['webhooks', 'add', '--subject', 'a', '--url', 'https://example.com/h', '--events', 'plant.eaten'], 2],
  [['webhooks', 'rotate', 'wh_5Hc2vKQ9XyPz3mTb', '--overlap', '8d'], 2],
  [['webhooks', 'deliveries', 'wh_5Hc2vKQ9XyPz3mTb', '--before', 'x'], 2],
  [['webhooks', 'frobnicate'], 2],
  [['plants', 'create', '--id', '1.5', '--name', 'Fern'], 2],
  [['plants', 'list', '--limit', '0'], 2],
  [['export', 'extra'], 2],
  [['import'], 2],
  [['backup'], 2],
  [['migrate', '--force'], 2],
  [['serve', 'now'], 2],
  [['launch'], 2],
];

test('--help, --version and usage mistakes load no database driver, logger, validator or HTTP package', async () => {
  for (const [args, code] of LIGHT) {
    const run = await loadedBy(args);
    assert.equal(run.code, code, args.join(' '));
    assert.ok(run.seen > 0, `${args.join(' ')}: the recorder saw the command's modules`);
    assert.deepEqual(run.heavy, [], `${args.join(' ')} loaded ${run.heavy.join(', ')}`);
  }
  assert.ok(!existsSync(database), 'none of them opened the database');
});

test('the recorder sees those packages when a command loads them to do its work (an import)', async () => {
  const empty = join(dir, 'empty.ndjson');
  writeFileSync(empty, '');
  const run = await loadedBy(['import', empty], { DATABASE_URL: `sqlite:${join(dir, 'imported.db')}` });
  assert.equal(run.code, 0);
  assert.deepEqual(run.heavy, ['better-sqlite3', 'pg', 'undici', 'ajv', 'typebox']);
});
