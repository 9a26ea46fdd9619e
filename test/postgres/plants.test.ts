import { onPostgres } from './suites.js';

await onPostgres('plants');
