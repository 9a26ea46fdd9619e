import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import openapiTS, { type OpenAPI3, astToString } from 'openapi-typescript';
import ts from 'typescript';
import { type CliResult, type ServerProcess, runCli, startServer } from '../process.js';

// A client generated from the document the server serves (openapi-typescript
// types, driven by openapi-fetch, compiled by the repository's tsc in strict mode) creates, lists
// page by page and deletes plants on a real server, int64 ids beyond 2^53 included.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSC = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

const dir = mkdtempSync(join(tmpdir(), 'plant-store-openapi-fetch-'));
const env = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` };
const project = join(dir, 'client');
let server: ServerProcess;
let token: string;

before(async () => {
  server = await startServer(env);
  const minted = await runCli(
    ['token', 'create', '--subject', 'generated', '--scopes', 'plants:read,plants:write'],
    env,
  );
  assert.equal(minted.code, 0, minted.stderr);
  token = minted.stdout.trim();
});
after(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function run(file: string, args: string[], cwd: string, extra: NodeJS.ProcessEnv = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [file, ...args],
      { cwd, env: { ...process.env, ...extra }, timeout: 120_000 },
      (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
      },
    );
  });
}

/** int64 as `bigint`: openapi-typescript's default, `number`, silently rounds ids beyond 2^53. */
const int64AsBigint = (schema: { format?: string }): ts.TypeNode | undefined =>
  schema.format === 'int64' ? ts.factory.createKeywordTypeNode(ts.SyntaxKind.BigIntKeyword) : undefined;

// The program a user writes against the generated types. It is compiled with tsc (strict, nodenext).
const PROGRAM = String.raw`
import createClient from 'openapi-fetch';
import type { components, paths } from './plant-store.js';

type NewPlant = components['schemas']['NewPlant'];
type Plant = components['schemas']['Plant'];

/**
 * JSON with int64 ids written as exact digits. JSON.stringify throws on a bigint, and a number
 * would already have rounded 9007199254740993 to 9007199254740992.
 */
function writeJson(value: unknown): string {
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return '[' + value.map(writeJson).join(',') + ']';
  if (value !== null && typeof value === 'object') {
    const members = Object.entries(value).filter(([, v]) => v !== undefined);
    return '{' + members.map(([k, v]) => JSON.stringify(k) + ':' + writeJson(v)).join(',') + '}';
  }
  return JSON.stringify(value);
}

/** The cursor of the RFC 8288 Link rel="next", or undefined on the last page. */
function nextCursor(link: string | null): string | undefined {
  const target = /<([^>]*)>\s*;\s*rel="?next"?/.exec(link ?? '')?.[1];
  return target === undefined ? undefined : (new URL(target, 'http://link.invalid').searchParams.get('cursor') ?? undefined);
}

const baseUrl = process.env.PLANT_STORE_URL ?? 'http://127.0.0.1:8080';
const client = createClient<paths>({
  baseUrl,
  headers: { Authorization: 'Bearer ' + (process.env.PLANT_STORE_TOKEN ?? '') },
  bodySerializer: writeJson,
});

async function listAll(limit: number): Promise<Plant[][]> {
  const pages: Plant[][] = [];
  let cursor: string | undefined;
  do {
    const { data, error, response } = await client.GET('/plants', { params: { query: { limit, cursor } } });
    if (data === undefined) throw new Error('GET /plants: ' + response.status + ' ' + JSON.stringify(error));
    pages.push(data);
    cursor = nextCursor(response.headers.get('link'));
  } while (cursor !== undefined);
  return pages;
}

const plants: NewPlant[] = [
  { id: 9007199254740993n, name: 'Monstera', tag: 'tropical' },
  { id: 9007199254740992n, name: 'Ficus' },
  { id: -9223372036854775808n, name: 'Lowest', tag: null },
  { id: -5n, name: 'Fern', tag: 'shade' },
  { id: 3n, name: 'Cactus', tag: 'tropical' },
];
for (const plant of plants) {
  const { data, error, response } = await client.POST('/plants', { body: plant });
  if (data === undefined) throw new Error('POST /plants: ' + response.status + ' ' + JSON.stringify(error));
  console.log('created ' + plant.id + ' ' + JSON.stringify(data));
}

for (const page of await listAll(2)) console.log('page ' + JSON.stringify(page));
const tropical = await client.GET('/plants', { params: { query: { tag: 'tropical' } } });
console.log('tag tropical ' + JSON.stringify(tropical.data));

const deleted = await client.DELETE('/plants/{id}', { params: { path: { id: 9007199254740993n } } });
console.log('deleted 9007199254740993 ' + deleted.response.status);
const again = await client.DELETE('/plants/{id}', { params: { path: { id: 9007199254740993n } } });
console.log('deleted again ' + again.response.status + ' ' + JSON.stringify(again.error));

for (const page of await listAll(2)) console.log('page ' + JSON.stringify(page));
`;

/** The client project, generated once from the served document: its types and tsconfig (strict, nodenext). */
let generated: Promise<void> | undefined;
function generateProject(): Promise<void> {
  generated ??= (async () => {
    const served = await fetch(`${server.url}/openapi.json`);
    assert.equal(served.status, 200);
    const document = (await served.json()) as OpenAPI3;

    // What a generator gives by default: int64 becomes number, which cannot hold 9007199254740993.
    const plain = astToString(await openapiTS(document, { silent: true }));
    assert.match(plain, /NewPlant: \{[^}]*?\bid: number;/s, 'openapi-typescript maps int64 to number by default');

    const types = astToString(await openapiTS(document, { silent: true, transform: int64AsBigint }));
    assert.match(types, /NewPlant: \{[^}]*?\bid: bigint;/s);
    mkdirSync(project);
    symlinkSync(join(ROOT, 'node_modules'), join(project, 'node_modules'), 'dir');
    writeFileSync(join(project, 'package.json'), '{ "type": "module", "private": true }\n');
    const compilerOptions = {
      target: 'ES2022',
      module: 'nodenext',
      moduleResolution: 'nodenext',
      strict: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: true,
      types: ['node'],
      outDir: 'dist',
    };
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions, files: ['main.ts'] }));
    writeFileSync(join(project, 'plant-store.ts'), types);
  })();
  return generated;
}

test(
  'a client generated from the served document creates, pages through and deletes plants; ids beyond 2^53 stay exact',
  { timeout: 240_000 },
  async () => {
    await generateProject();
    writeFileSync(join(project, 'main.ts'), PROGRAM);
    const compiled = await run(TSC, ['-p', '.'], project);
    assert.equal(compiled.code, 0, `tsc:\n${compiled.stdout}${compiled.stderr}`);

    const ran = await run(join(project, 'dist', 'main.js'), [], project, {
      PLANT_STORE_URL: server.url,
      PLANT_STORE_TOKEN: token,
    });
    assert.equal(ran.code, 0, ran.stderr);
    assert.equal(ran.stderr, '');
    assert.deepEqual(ran.stdout.trimEnd().split('\n'), [
      'created 9007199254740993 {"name":"Monstera","tag":"tropical"}',
      'created 9007199254740992 {"name":"Ficus"}',
      'created -9223372036854775808 {"name":"Lowest"}',
      'created -5 {"name":"Fern","tag":"shade"}',
      'created 3 {"name":"Cactus","tag":"tropical"}',
      'page [{"name":"Lowest"},{"name":"Fern","tag":"shade"}]',
      'page [{"name":"Cactus","tag":"tropical"},{"name":"Ficus"}]',
      'page [{"name":"Monstera","tag":"tropical"}]',
      'tag tropical [{"name":"Cactus","tag":"tropical"},{"name":"Monstera","tag":"tropical"}]',
      'deleted 9007199254740993 204',
      'deleted again 404 {"error":404,"message":"no plant with id 9007199254740993"}',
      'page [{"name":"Lowest"},{"name":"Fern","tag":"shade"}]',
      'page [{"name":"Cactus","tag":"tropical"},{"name":"Ficus"}]',
    ]);

    // The server holds exactly the ids sent: 9007199254740992 survived the delete of its neighbour.
    const exported = await runCli(['export'], env);
    assert.equal(exported.code, 0, exported.stderr);
    const ids = exported.stdout
      .trim()
      .split('\n')
      .map((line) => /"id":(-?\d+)/.exec(line)?.[1]);
    assert.deepEqual(ids, ['-9223372036854775808', '-5', '3', '9007199254740992']);
  },
);

test('the generated types refuse a number where the document says int64', { timeout: 240_000 }, async () => {
  await generateProject();
  writeFileSync(
    join(project, 'wrong.ts'),
    "import type { components } from './plant-store.js';\n" +
      "export const plant: components['schemas']['NewPlant'] = { id: 9007199254740993, name: 'Monstera' };\n",
  );
  writeFileSync(
    join(project, 'tsconfig.wrong.json'),
    JSON.stringify({ extends: './tsconfig.json', compilerOptions: { noEmit: true }, files: ['wrong.ts'] }),
  );
  const compiled = await run(TSC, ['-p', 'tsconfig.wrong.json'], project);
  assert.equal(compiled.code, 2, compiled.stdout);
  assert.match(compiled.stdout, /wrong\.ts\(2,\d+\): error TS2322: Type 'number' is not assignable to type 'bigint'/);
});
