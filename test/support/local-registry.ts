import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, isAbsolute, join } from 'node:path';
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

/**
 * Serves `names` (and, by name, their dependencies: list them too, or pass dependencyFolders'
 * answer) from `nodeModules`. A name may be a package's folder (absolute), to serve that copy.
 */
export async function startLocalRegistry(
  nodeModules: string,
  names: string[],
  scratch: string,
): Promise<LocalRegistry> {
  const packages = new Map<string, Served>();
  for (const entry of names) {
    const folder = isAbsolute(entry) ? entry : join(nodeModules, entry);
    const manifest = JSON.parse(await readFile(join(folder, 'package.json'), 'utf8')) as Record<string, unknown>;
    const name = manifest.name as string;
    const file = join(scratch, `${name.replace('/', '-')}.tgz`);
    // npm's tarball layout: everything under package/. A folder given by its path is served with
    // its dependencies (dependencyFolders), so its own node_modules is left out.
    const nested = isAbsolute(entry) ? ['--exclude=./node_modules'] : [];
    await exec('tar', ['-czf', file, '-C', folder, ...nested, '--transform', 's,^\\.,package,', '.']);
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

/**
 * The folders of `names` and of everything they depend on (dependencies, installed optional and
 * peer dependencies), found as Node finds them from each package: its own node_modules first,
 * then its parents'. One folder a name: a name installed at two versions is an error.
 */
export function dependencyFolders(nodeModules: string, names: string[]): string[] {
  const root = dirname(nodeModules);
  const found = new Map<string, string>();
  const locate = (from: string, name: string): string | undefined => {
    for (let dir = from; ; dir = dirname(dir)) {
      const folder = join(dir, 'node_modules', name);
      if (existsSync(join(folder, 'package.json'))) return folder;
      if (dir === root || dir === dirname(dir)) return undefined;
    }
  };
  const visit = (folder: string): void => {
    const manifest = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as {
      name: string;
      dependencies?: Record<string, string>;
      optionalDependencies?: Record<string, string>;
      peerDependencies?: Record<string, string>;
    };
    const seen = found.get(manifest.name);
    if (seen === folder) return;
    if (seen !== undefined) throw new Error(`${manifest.name} is installed twice: ${seen} and ${folder}`);
    found.set(manifest.name, folder);
    const wanted = { ...manifest.peerDependencies, ...manifest.optionalDependencies, ...manifest.dependencies };
    for (const name of Object.keys(wanted)) {
      const dependency = locate(folder, name);
      if (dependency !== undefined) visit(dependency);
      else if (manifest.dependencies?.[name] !== undefined)
        throw new Error(`${manifest.name} needs ${name}, not installed`);
    }
  };
  for (const name of names) visit(join(nodeModules, name));
  return [...found.values()];
}
