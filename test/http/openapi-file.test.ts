import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { compileErrors, validate } from '@readme/openapi-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { makeApp } from '../helpers.js';

type Json = Record<string, unknown>;

const FILE = fileURLToPath(new URL('../../openapi.json', import.meta.url));
const REGENERATE = 'Run `npm run openapi` and commit openapi.json.';

async function served(url = '/openapi.json'): Promise<Json> {
  const h = await makeApp();
  try {
    const response = await h.app.inject({ method: 'GET', url });
    assert.equal(response.statusCode, 200, `GET ${url}`);
    return response.json<Json>();
  } finally {
    await h.close();
  }
}

const pointer = (path: readonly string[]): string =>
  path.map((key) => `/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`).join('');

/** The JSON pointer (RFC 6901) of the first place where two JSON values differ; undefined when they are equal. */
function firstDifference(a: unknown, b: unknown, path: string[] = []): string | undefined {
  if (a === b) return undefined;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return pointer(path);
  if (Array.isArray(a) !== Array.isArray(b)) return pointer(path);
  // Arrays index by index, objects key by sorted key: "first" does not depend on the key order of either side.
  const keys = Array.isArray(a)
    ? Array.from({ length: Math.max(a.length, (b as unknown[]).length) }, (_, i) => String(i))
    : [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
  for (const key of keys) {
    const found = firstDifference((a as Json)[key], (b as Json)[key], [...path, key]);
    if (found !== undefined) return found;
  }
  return undefined;
}

const at = (value: unknown, where: string): unknown =>
  where
    .split('/')
    .slice(1)
    .map((key) => key.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce<unknown>(
      (node, key) => (node !== null && typeof node === 'object' ? (node as Json)[key] : undefined),
      value,
    );

const show = (value: unknown): string => (value === undefined ? '(absent)' : JSON.stringify(value).slice(0, 200));

test('the served OpenAPI document passes @readme/openapi-parser validation with no error and no warning', async () => {
  const document = await served();
  // validate() dereferences what it is given in place: it gets a copy.
  const result = await validate(structuredClone(document) as unknown as Parameters<typeof validate>[0]);
  assert.equal(result.specification, 'OpenAPI');
  assert.ok(result.valid, compileErrors(result));
  assert.deepEqual(result.warnings, [], compileErrors(result));
});

test('the committed openapi.json is the document the server serves', async () => {
  const document = await served();
  const text = await readFile(FILE, 'utf8').catch(() => assert.fail(`${FILE} is missing. ${REGENERATE}`));
  const committed = JSON.parse(text) as unknown;
  const where = firstDifference(committed, document);
  assert.ok(
    where === undefined,
    `openapi.json differs from GET /openapi.json at ${where || 'the root'}: ` +
      `committed ${show(at(committed, where ?? ''))}, served ${show(at(document, where ?? ''))}. ${REGENERATE}`,
  );
});

test('the /docs page reads the same document as GET /openapi.json', async () => {
  const [page, document] = [await served('/docs/json'), await served()];
  const where = firstDifference(page, document);
  assert.ok(
    where === undefined,
    `GET /docs/json differs from GET /openapi.json at ${where || 'the root'}: ` +
      `${show(at(page, where ?? ''))} instead of ${show(at(document, where ?? ''))}`,
  );
});

test('the Plant, NewPlant and Error schemas compile as JSON Schema 2020-12 and accept exactly the contract shapes', async () => {
  const schemas = ((await served()).components as { schemas: Record<string, Json> }).schemas;
  // int32 and int64 are OpenAPI's formats, annotations for a JSON Schema validator.
  const ajv = new Ajv2020({ strict: true, allErrors: true, formats: { int32: true, int64: true } });
  const valid = (name: string, value: unknown): boolean => ajv.validate(schemas[name]!, value);

  assert.ok(valid('Plant', { name: 'Monstera' }));
  assert.ok(valid('Plant', { name: 'Monstera', tag: 'tropical' }));
  assert.ok(!valid('Plant', { id: 1, name: 'Monstera' }), 'a Plant has no id');
  assert.ok(!valid('Plant', { name: 'Monstera', tag: null }), 'a Plant without a tag has no tag key');
  assert.ok(!valid('Plant', { tag: 'tropical' }), 'a Plant has a name');

  assert.ok(valid('NewPlant', { id: 1, name: 'Monstera' }));
  assert.ok(valid('NewPlant', { id: -5, name: 'Monstera', tag: null }), '"tag": null means no tag');
  assert.ok(!valid('NewPlant', { id: 1.5, name: 'Monstera' }), 'a fractional id');
  assert.ok(!valid('NewPlant', { id: '1', name: 'Monstera' }), 'an id in a string');
  assert.ok(!valid('NewPlant', { name: 'Monstera' }), 'no id');
  assert.ok(!valid('NewPlant', { id: 1, name: '' }), 'an empty name');
  assert.ok(!valid('NewPlant', { id: 1, name: 'a\u0000b' }), 'a control character');
  assert.ok(!valid('NewPlant', { id: 1, name: '\ud800' }), 'a lone surrogate');
  assert.ok(!valid('NewPlant', { id: 1, name: 'x'.repeat(201) }), '201 characters');
  assert.ok(valid('NewPlant', { id: 1, name: '🌵'.repeat(200) }), '200 code points outside the BMP');
  assert.ok(!valid('NewPlant', { id: 1, name: 'Monstera', owner: 'x' }), 'an unknown property');

  assert.ok(valid('Error', { error: 404, message: 'no such plant' }));
  assert.ok(!valid('Error', { error: 404, message: '' }), 'an empty message');
  assert.ok(!valid('Error', { error: 404, message: 'x', stack: 'at …' }), 'another key');
});
