import { onPostgres } from './suites.js';

// The OpenAPI document is the same whatever the engine: the files that only read it (its shape,
// its info, the committed copy, Spectral's lint) run once, on SQLite (Spectral alone
// cost 10 s of CPU a run).
await onPostgres('http', ['openapi.test.ts', 'openapi-info.test.ts', 'openapi-file.test.ts', 'spectral.test.ts']);
