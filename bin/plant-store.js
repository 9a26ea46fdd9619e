#!/usr/bin/env node
// The package's command. The TypeScript is compiled to dist/ by `npm ci` (the prepare script).
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// Before `npm ci` (node_modules missing) or after a clean (dist/ missing), one line says what to
// run, instead of node's ERR_MODULE_NOT_FOUND stack. In a checkout this costs two file checks; an
// install whose dependencies sit higher up (hoisted) asks node's resolver.
const here = (path) => new URL(path, import.meta.url);
const installed = (name) => {
  if (existsSync(here(`../node_modules/${name}/package.json`))) return true;
  try {
    import.meta.resolve(name);
    return true;
  } catch {
    return false;
  }
};
const root = fileURLToPath(here('..')).replace(/[\\/]$/, '');
const missing = !installed('fastify')
  ? `the dependencies are not installed: run \`npm ci\` in ${root} first (it also builds dist/)`
  : existsSync(here('../dist/cli.js')) && existsSync(here('../dist/vendor/typebox.js'))
    ? undefined
    : installed('typescript')
      ? `dist/ (the compiled TypeScript) is missing: run \`npm run build\` in ${root} first`
      : `dist/ (the compiled TypeScript) is missing and TypeScript is not installed: run \`npm ci\` in ${root} first (docs/operations.md: a production install)`;
if (missing !== undefined) {
  process.stderr.write(`plant-store: ${missing}\n`);
  process.exit(1);
}

// Tracing (docs/tracing.md) must be set up before the server's modules load, and only when asked
// for: tracing-hooks.js imports nothing of OpenTelemetry, and the SDK comes with tracing.js alone.
// The SDK, its exporters and the instrumentations are package.json's optionalDependencies: an
// install made with --omit=optional has none of them, and a server asked to trace says so.
const { tracingWanted } = await import('../dist/tracing-hooks.js');
if (process.argv[2] === 'serve' && tracingWanted(process.env)) {
  const manifest = JSON.parse(readFileSync(here('../package.json'), 'utf8'));
  const absent = Object.keys(manifest.optionalDependencies ?? {}).filter((name) => !installed(name));
  if (absent.length > 0) {
    const which = absent.length > 1 ? `${absent[0]} and ${absent.length - 1} more` : absent[0];
    process.stderr.write(
      `plant-store: tracing is on (an OTLP endpoint is set: docs/tracing.md) but OpenTelemetry is not installed ` +
        `(${which}: an install made with --omit=optional): run \`npm ci\`, then \`npm prune --omit=dev\`, in ${root}, ` +
        `or unset the endpoint\n`,
    );
    process.exit(1);
  }
  const { startTracing } = await import('../dist/system/tracing.js');
  await startTracing(process.env);
}
await import('../dist/cli.js');
