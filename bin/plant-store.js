#!/usr/bin/env node
// The package's command. The TypeScript is compiled to dist/ by `npm ci` (the prepare script).
// Tracing (docs/tracing.md) must be set up before the server's modules load, and only when asked
// for: tracing-hooks.js imports nothing of OpenTelemetry, and the SDK comes with tracing.js alone.
const { tracingWanted } = await import('../dist/system/tracing-hooks.js');
if (process.argv[2] === 'serve' && tracingWanted(process.env)) {
  const { startTracing } = await import('../dist/system/tracing.js');
  await startTracing();
}
await import('../dist/cli.js');
