import { after } from 'node:test';
import { openScratchPostgres, stopSharedPostgres } from '../support/postgres.js';
import { storeContract } from './store-contract.js';

after(stopSharedPostgres);
storeContract('postgres', openScratchPostgres);
