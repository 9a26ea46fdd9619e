import assert from 'node:assert/strict';
import { readFile, readdir } from 'node:fs/promises';
import { describe, test } from 'node:test';
import { type TestApp, makeApp } from '../helpers.js';

// GET /portal: the page and its files, their headers, no token, outside the OpenAPI
// document, and PORTAL=off. The page itself is driven in test/browser/portal.test.ts.

const CSP = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
const SOURCE = new URL('../../src/portal/', import.meta.url);

async function withApp(overrides: Parameters<typeof makeApp>[0], run: (h: TestApp) => Promise<void>): Promise<void> {
  const h = await makeApp(overrides);
  try {
    await run(h);
  } finally {
    await h.close();
  }
}

/** The page's modules, from main.js along its static imports, as a browser loads them. */
async function modules(h: TestApp): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  const queue = ['main.js'];
  for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
    if (found.has(name)) continue;
    const response = await h.app.inject({ method: 'GET', url: `/portal/${name}` });
    assert.equal(response.statusCode, 200, `/portal/${name}`);
    found.set(name, response.body);
    for (const [, imported] of response.body.matchAll(/\bfrom\s+'\.\/([\w-]+\.js)'/g)) queue.push(imported!);
  }
  return found;
}

describe('GET /portal', () => {
  test('answers the page, without a token, with the CSP, nosniff, no-referrer and no-store', () =>
    withApp({}, async (h) => {
      const response = await h.app.inject({ method: 'GET', url: '/portal' });
      assert.equal(response.statusCode, 200);
      assert.equal(response.headers['content-type'], 'text/html; charset=utf-8');
      assert.equal(response.headers['content-security-policy'], CSP);
      assert.equal(response.headers['x-content-type-options'], 'nosniff');
      assert.equal(response.headers['referrer-policy'], 'no-referrer');
      assert.equal(response.headers['cache-control'], 'no-store');
      const built = response.body === (await readFile(new URL('index.html', SOURCE), 'utf8'));
      assert.ok(built, 'the page is src/portal/index.html as the build copied it');
      const head = await h.app.inject({ method: 'HEAD', url: '/portal' });
      assert.equal(head.statusCode, 200);
      assert.equal(head.headers['content-security-policy'], CSP);
      assert.equal(head.body, '');
    }));

  test('the page has no inline script, style or event handler: the CSP would refuse them', async () => {
    const html = await readFile(new URL('index.html', SOURCE), 'utf8');
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    assert.equal(scripts.length, 1);
    assert.match(scripts[0]![1]!, /\btype="module" src="portal\/main\.js"/);
    assert.equal(scripts[0]![2], '', 'the script tag has no body');
    assert.equal(/<style\b|\sstyle=|\son[a-z]+=|="javascript:/i.exec(html)?.[0], undefined);
  });

  test('no module of the page writes markup: API values go in as text', async () => {
    for (const name of await readdir(SOURCE)) {
      if (!name.endsWith('.ts')) continue;
      const code = (await readFile(new URL(name, SOURCE), 'utf8')).replace(/\/\/.*$|\/\*[\s\S]*?\*\//gm, '');
      const found = /innerHTML|outerHTML|insertAdjacentHTML|createContextualFragment|document\.write|\beval\(/.exec(
        code,
      );
      assert.equal(found?.[0], undefined, name);
    }
  });

  test('serves every module the page imports, its style and its icon, each with its type and the same headers', () =>
    withApp({}, async (h) => {
      const found = await modules(h);
      assert.ok(found.size >= 8, [...found.keys()].join(', '));
      for (const [url, type] of [
        ...[...found.keys()].map((name) => [`/portal/${name}`, 'text/javascript; charset=utf-8']),
        ['/portal/portal.css', 'text/css; charset=utf-8'],
        ['/portal/favicon.svg', 'image/svg+xml'],
      ] as const) {
        const response = await h.app.inject({ method: 'GET', url });
        assert.equal(response.statusCode, 200, url);
        assert.equal(response.headers['content-type'], type, url);
        assert.equal(response.headers['content-security-policy'], CSP, url);
        assert.equal(response.headers['x-content-type-options'], 'nosniff', url);
        assert.equal(response.headers['referrer-policy'], 'no-referrer', url);
        assert.equal(response.headers['cache-control'], 'no-store', url);
      }
    }));

  test('an unknown file is 404 with the Error body; /portal/ is sent to /portal', () =>
    withApp({}, async (h) => {
      for (const url of ['/portal/nothing.js', '/portal/index.html', '/portal/main.ts', '/portal/tsconfig.json']) {
        const response = await h.app.inject({ method: 'GET', url });
        assert.equal(response.statusCode, 404, url);
        assert.deepEqual(response.json(), { error: 404, message: `no route GET ${url}` });
      }
      const slash = await h.app.inject({ method: 'GET', url: '/portal/' });
      assert.equal(slash.statusCode, 308);
      assert.equal(slash.headers.location, '../portal');
    }));

  test('is not an operation of the OpenAPI document', () =>
    withApp({}, async (h) => {
      const document = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json<{ paths: object }>();
      assert.deepEqual(
        Object.keys(document.paths).filter((path) => path.startsWith('/portal')),
        [],
      );
    }));

  test('PORTAL=off removes the page and its files: 404 as any unknown path', () =>
    withApp({ portal: false }, async (h) => {
      for (const url of ['/portal', '/portal/main.js', '/portal/portal.css', '/portal/']) {
        const response = await h.app.inject({ method: 'GET', url });
        assert.equal(response.statusCode, 404, url);
        assert.deepEqual(response.json(), { error: 404, message: `no route GET ${url}` });
        assert.equal(response.headers['content-security-policy'], undefined);
      }
    }));
});
