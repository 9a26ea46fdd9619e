import assert from 'node:assert/strict';
import { test } from 'node:test';
import { API_DESCRIPTION } from '../../src/api-document.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { buildOpenApi } from '../../src/http/openapi.js';
import { makeApp } from '../helpers.js';

// What tools and readers expect of the document besides its operations: who it is
// from, how to get a token, its servers (PUBLIC_URL), declared tags, and a description and an
// operationId on every operation.

type Json = Record<string, unknown>;

async function served(overrides: Parameters<typeof makeApp>[0] = {}): Promise<Json> {
  const h = await makeApp(overrides);
  try {
    return (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json<Json>();
  } finally {
    await h.close();
  }
}

test('info has a contact, the MIT license, and a description that says how to get a token', async () => {
  const info = (await served()).info as Json;
  assert.equal((info.contact as Json).name, 'Plant Store maintainers');
  assert.deepEqual(info.license, { name: 'MIT', identifier: 'MIT' });
  const description = String(info.description);
  assert.match(description, /\n {4}plant-store token create --subject \S+ --scopes plants:read,plants:write\n/);
  assert.match(description, /\*\*Authorize\*\*/);
  for (const scope of ['plants:read', 'plants:write', 'plants:admin', 'webhooks:read', 'webhooks:write'])
    assert.ok(description.includes(`\`${scope}\``), `the description names ${scope}`);
});

test('by default the one server is the relative `/`: the origin the document was fetched from', async () => {
  assert.deepEqual(
    ((await served()).servers as Json[]).map((s) => s.url),
    ['/'],
  );
});

test('the served document names PUBLIC_URL as its server', async () => {
  const { publicUrl } = loadConfig({ PUBLIC_URL: 'https://plants.example.com/store/' });
  assert.deepEqual(
    ((await served({ publicUrl })).servers as Json[]).map((s) => s.url),
    ['https://plants.example.com/store'],
  );
});

test('a PUBLIC_URL becomes the server of the document', () => {
  const routes = [] as Parameters<typeof buildOpenApi>[0];
  for (const url of ['https://plants.example.com', '/plant-store']) {
    const servers = buildOpenApi(routes, API_DESCRIPTION, { publicUrl: loadConfig({ PUBLIC_URL: url }).publicUrl })
      .servers as Json[];
    assert.deepEqual(
      servers.map((s) => s.url),
      [url],
    );
    assert.equal(typeof servers[0]!.description, 'string');
  }
});

test('PUBLIC_URL takes an absolute http(s) URL or a path, without a trailing slash; empty is `/`', () => {
  const cases: Array<[string | undefined, string]> = [
    [undefined, '/'],
    ['', '/'],
    ['/', '/'],
    ['/plant-store/', '/plant-store'],
    ['/a/b%20c', '/a/b%20c'],
    ['https://Plants.Example.com/', 'https://plants.example.com'],
    ['http://127.0.0.1:8080/api/', 'http://127.0.0.1:8080/api'],
    [' https://example.com/plant-store ', 'https://example.com/plant-store'],
  ];
  for (const [text, expected] of cases) {
    assert.equal(loadConfig(text === undefined ? {} : { PUBLIC_URL: text }).publicUrl, expected, String(text));
  }
});

test('a PUBLIC_URL that is not an http(s) URL or a plain path stops the start with a message saying what to set', () => {
  for (const text of [
    'plants.example.com',
    'ftp://example.com',
    'https://example.com/?a=1',
    'https://example.com/#docs',
    'https://user:secret@example.com',
    '//example.com',
    '/a b',
    '/a?b=1',
    '/a%zz',
  ]) {
    assert.throws(
      () => loadConfig({ PUBLIC_URL: text }),
      (error: unknown) =>
        error instanceof ConfigError &&
        error.message.startsWith('PUBLIC_URL must be an absolute http(s) URL such as https://plants.example.com') &&
        // The value is repeated, except one with credentials (the message reaches the log).
        (text.includes('secret') ? !error.message.includes('secret') : error.message.includes(`"${text}"`)),
      text,
    );
  }
});

test('tags are declared with a description, and every operation has a declared tag, a description and a unique operationId', async () => {
  const document = await served();
  const tags = document.tags as Json[];
  assert.deepEqual(
    tags.map((tag) => tag.name),
    ['plants', 'webhooks', 'events', 'operations'],
  );
  for (const tag of tags) assert.ok(String(tag.description).length > 0, `${String(tag.name)} has a description`);
  const ids = new Set<string>();
  for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(item)) {
      const where = `${method.toUpperCase()} ${path}`;
      assert.ok(typeof op.description === 'string' && op.description.length > 0, `${where} has a description`);
      assert.ok(typeof op.operationId === 'string' && !ids.has(op.operationId), `${where} has its own operationId`);
      ids.add(op.operationId);
      assert.ok(
        (op.tags as string[]).every((tag) => tags.some((declared) => declared.name === tag)),
        `${where}: tags declared`,
      );
    }
  }
  // 1.2.0 added PATCH /webhooks/{id}, …/secret, …/ping, …/recover, …/attempts; the subscribers'
  // page …/activity; 1.3.0 POST /events/tickets
  assert.equal(ids.size, 19);
});

test('each operation behind a scope says which, from the route itself', async () => {
  const paths = (await served()).paths as Record<string, Record<string, Json>>;
  assert.match(
    String(paths['/plants']!.post!.description),
    /Needs a token with the scope `plants:write` \(or `plants:admin`\)\.$/,
  );
  assert.match(String(paths['/plants']!.get!.description), /`plants:read` \(or `plants:admin`\)\.$/);
  assert.match(String(paths['/webhooks']!.get!.description), /Needs a token with the scope `webhooks:read`\.$/);
  assert.doesNotMatch(String(paths['/healthz']!.get!.description), /scope/);
});
