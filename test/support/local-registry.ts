import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';

// An npm registry on 127.0.0.1 that serves packages from this project's node_modules, so that a
// test can run a printed `npm install <name>` in a fresh project as a user does, with no network
// and whatever the npm cache holds (a fresh CI machine's holds no package documents after
// `npm ci`). Each package is served at the version installed here, its folder packed by tar.

const exec = promisify(execFile);

export interface LocalRegistry {
  /** For npm_config_registry. */
  readonly url: string;
  close(): Promise<void>;
}

interface Served {
  readonly manifest: Record<string, unknown>;
  readonly tarball: Buffer;
}

/** Serves `names` (and, by name, their dependencies: list them too) from `nodeModules`. */
export async function startLocalRegistry(
  nodeModules: string,
  names: string[],
  scratch: string,
): Promise<LocalRegistry> {
  const packages = new Map<string, Served>();
  for (const name of names) {
    const folder = join(nodeModules, name);
    const manifest = JSON.parse(await readFile(join(folder, 'package.json'), 'utf8')) as Record<string, unknown>;
    const file = join(scratch, `${name.replace('/', '-')}.tgz`);
    // npm's tarball layout: everything under package/.
    await exec('tar', ['-czf', file, '-C', folder, '--transform', 's,^\\.,package,', '.']);
    packages.set(name, { manifest, tarball: await readFile(file) });
  }
  let base = '';
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname.slice(1));
    const tarball = /^-\/tarballs\/(.+)\.tgz$/.exec(path);
    const served = packages.get(tarball ? tarball[1]! : path);
    if (!served) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
    } else if (tarball) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(served.tarball);
    } else {
      const { name, version } = served.manifest as { name: string; version: string };
      const integrity = `sha512-${createHash('sha512').update(served.tarball).digest('base64')}`;
      const document = {
        name,
        'dist-tags': { latest: version },
        versions: {
          [version]: { ...served.manifest, dist: { tarball: `${base}-/tarballs/${name}.tgz`, integrity } },
        },
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(document));
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return {
    url: base,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
