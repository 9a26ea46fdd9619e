import { onPostgres } from './suites.js';

await onPostgres('webhooks', ['address-policy.test.ts', 'sender.test.ts', 'signing.test.ts']);
