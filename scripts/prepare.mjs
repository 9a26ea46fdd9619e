// `npm ci` runs this (the prepare script): it compiles the TypeScript to dist/, so that starting
// the server never compiles (issue 16). A production install without dev dependencies
// (`npm ci --omit=dev`) has no TypeScript: it keeps the dist/ that a build made before (a
// container image's build stage, or `npm ci && npm prune --omit=dev`), and says so; with no dist/
// it stops with what to do.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import process from 'node:process';
import { URL } from 'node:url';

const say = (line) => process.stderr.write(`${line}\n`);

const require = createRequire(import.meta.url);
let tsc;
try {
  tsc = require.resolve('typescript/bin/tsc');
} catch {
  if (existsSync(new URL('../dist/cli.js', import.meta.url))) {
    say('plant-store: TypeScript is not installed (a production install); using the dist/ built before');
    process.exit(0);
  }
  say(
    'plant-store: dist/ is missing and TypeScript is not installed. Build first with the dev dependencies ' +
      '(`npm ci`), then drop them (`npm prune --omit=dev`); see docs/operations.md.',
  );
  process.exit(1);
}
for (const project of ['packages/client/tsconfig.build.json', 'tsconfig.build.json']) {
  const result = spawnSync(process.execPath, [tsc, '-p', project], { stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
