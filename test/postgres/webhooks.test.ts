import { onPostgres } from './suites.js';

// api-pressure.test.ts reads no store, and reads this process's event-loop busy share, which the
// other files' tests here (servers, dispatchers draining) share with it: it runs on its own only.
await onPostgres('webhooks', ['address-policy.test.ts', 'api-pressure.test.ts', 'sender.test.ts', 'signing.test.ts']);
