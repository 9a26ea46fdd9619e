import { onPostgres } from './suites.js';

await onPostgres('events');
