// `npm ci` runs this (the prepare script): it compiles the TypeScript to dist/, so that starting
// the server never compiles. A production install without dev dependencies
// (`npm ci --omit=dev`) has no TypeScript: it keeps the dist/ that a build made before (a
// container image's build stage, or `npm ci && npm prune --omit=dev`), and says so; with no dist/
// it stops with what to do.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import process from 'node:process';
import { URL } from 'node:url';

const say = (line) => process.stderr.write(`${line}\n`);

// `npx plant-store` in a checkout links the checkout into npx's cache, and npm runs this script
// for that link (npm_command is then `exec`): the first npx of every clone compiled again, 5 s,
// rewriting dist/ under a server or a test already running from it. npx runs the dist/ that
// `npm ci` built; only a checkout without one is built here.
const built = ['../dist/cli.js', '../packages/client/dist/index.js'].every((file) =>
  existsSync(new URL(file, import.meta.url)),
);
if (process.env.npm_command === 'exec' && built) process.exit(0);

const require = createRequire(import.meta.url);
try {
  require.resolve('typescript/bin/tsc');
} catch {
  // npx in a checkout before `npm ci`: npm hides this script's output and stops with a bare exit
  // code 1. Let npx go on to the command instead, which says in one line to run `npm ci`.
  if (process.env.npm_command === 'exec') process.exit(0);
  if (existsSync(new URL('../dist/cli.js', import.meta.url))) {
    say('plant-store: TypeScript is not installed (a production install); using the dist/ built before');
    process.exit(0);
  }
  say(
    'plant-store: dist/ is missing and TypeScript is not installed. Build first with the dev dependencies ' +
      '(`npm ci`), then drop them (`npm prune --omit=dev`): docs/operations.md, "Installing on a server".',
  );
  process.exit(1);
}
await import('./build.mjs');
