// npm run openapi: writes the OpenAPI document the server serves to openapi.json at the repository
// root, for clients that generate code from it without running the server. test/http/openapi-file.test.ts
// fails when the committed copy drifts from what the server serves.
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { buildApp } from '../src/app.js';
import { testConfig } from '../src/config.js';
import { openSqlite } from '../src/store/sqlite/store.js';

const FILE = fileURLToPath(new URL('../openapi.json', import.meta.url));

// The OpenAPI Object's fields in the specification's order; everything below them is sorted, so a
// reordering in the generator changes nothing here and a diff shows only what really changed.
const TOP_LEVEL = ['openapi', 'info', 'jsonSchemaDialect', 'servers', 'security', 'tags', 'paths', 'webhooks'];

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted); // array order carries meaning (parameters, enum)
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries.map(([key, child]) => [key, sorted(child)]));
}

function canonical(document: Record<string, unknown>): Record<string, unknown> {
  const rest = sorted(document) as Record<string, unknown>;
  const first = TOP_LEVEL.filter((key) => key in rest).map((key): [string, unknown] => [key, rest[key]]);
  return { ...Object.fromEntries(first), ...rest };
}

// The same constructor and options as the server (docs/conventions.md#layout: buildApp() never
// listens); the document does not depend on the store's contents, so an empty in-memory one serves.
// The portal is outside the document: without it, this needs no built dist/portal/.
const store = openSqlite(':memory:');
const app = await buildApp({ config: testConfig({ portal: false }), store });
try {
  const response = await app.inject({ method: 'GET', url: '/openapi.json' });
  if (response.statusCode !== 200)
    throw new Error(`GET /openapi.json answered ${response.statusCode}: ${response.body}`);
  const text = JSON.stringify(canonical(response.json<Record<string, unknown>>()), null, 2);
  // Formatted as `npm run lint` (prettier --check .) expects: 2 spaces, short arrays on one line, a final newline.
  await writeFile(FILE, await format(text, { ...(await resolveConfig(FILE)), filepath: FILE }));
  console.log(`wrote ${FILE}`);
} finally {
  await app.close();
  await store.close();
}
