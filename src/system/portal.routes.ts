import { readFile, readdir } from 'node:fs/promises';
import { extname } from 'node:path';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';

// GET /portal: the subscribers' page (docs/portal.md). Its files are built from
// src/portal/ into dist/portal/ by `npm run build` (run by `npm ci`), read once here at start and
// served from memory: nothing is built or read from disk when a request comes. The page asks for
// a token itself and calls the API on this origin, so its routes need none.

// dist/portal/ and assets/ sit beside src/ and dist/: these paths hold from both.
const PAGE = new URL('../../dist/portal/', import.meta.url);
const FAVICON = new URL('../../assets/favicon.svg', import.meta.url);

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/**
 * On the page and its files. The page's scripts and styles are files of this origin, so the policy
 * needs no 'unsafe-inline': an API value that slipped into the page as markup could not run.
 * frame-ancestors: no other site can frame the page to trick a click (clickjacking).
 */
export const PORTAL_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'referrer-policy': 'no-referrer',
};

interface Asset {
  readonly type: string;
  readonly body: Buffer;
}

/** The page's files by name: what the build wrote to dist/portal/ (scripts, styles, the page), and the icon. */
async function loadAssets(): Promise<Map<string, Asset>> {
  let names: string[];
  try {
    names = await readdir(PAGE);
  } catch {
    throw new Error(
      'the portal page is not built (dist/portal/ is missing): run `npm run build`, or set PORTAL=off to serve without it',
    );
  }
  const assets = new Map<string, Asset>();
  for (const name of names.sort()) {
    const type = TYPES[extname(name)];
    if (type !== undefined) assets.set(name, { type, body: await readFile(new URL(name, PAGE)) });
  }
  if (!assets.has('index.html')) throw new Error('the portal page is incomplete: dist/portal/index.html is missing');
  assets.set('favicon.svg', { type: TYPES['.svg']!, body: await readFile(FAVICON) });
  return assets;
}

/**
 * The files, read by the first app of the process and kept for every later one (tests build about
 * a thousand apps; each read them again, which doubled the time to build one). A failed read is
 * not kept: the next app tries again and says why.
 */
let loaded: Promise<Map<string, Asset>> | undefined;

/** The page at /portal and its files at /portal/<name>; outside the OpenAPI document, as /docs is. */
export function portalRoutes(): FastifyPluginAsync {
  return async (app) => {
    loaded ??= loadAssets().catch((error: unknown) => {
      loaded = undefined;
      throw error;
    });
    const assets = await loaded;
    const hidden = { schema: { hide: true } };
    const serve = (asset: Asset) => async (_request: unknown, reply: FastifyReply) =>
      reply.headers(PORTAL_HEADERS).type(asset.type).send(asset.body);
    app.get('/portal', hidden, serve(assets.get('index.html')!));
    for (const [name, asset] of assets) if (name !== 'index.html') app.get(`/portal/${name}`, hidden, serve(asset));
    // The page's relative links need /portal without the slash; a slash typed by hand is sent there.
    app.get('/portal/', hidden, async (_request, reply) => reply.headers(PORTAL_HEADERS).redirect('../portal', 308));
  };
}
