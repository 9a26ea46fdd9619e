import assert from 'node:assert/strict';
import { test } from 'node:test';
import { markDraining } from '../../src/http/draining.js';
import { makeApp } from '../helpers.js';

// /readyz answers 503 from the moment the process starts draining (server.ts marks the
// app on SIGTERM), so a load balancer stops sending it new work while open connections finish.

test('/readyz: 200 while serving, 503 with Retry-After once draining; /healthz stays 200', async (t) => {
  const subject = await makeApp();
  t.after(() => subject.close());
  const { app } = subject;
  assert.equal((await app.inject({ url: '/readyz' })).statusCode, 200);
  markDraining(app);
  const answer = await app.inject({ url: '/readyz' });
  assert.equal(answer.statusCode, 503);
  assert.equal(answer.headers['retry-after'], '1');
  assert.deepEqual(answer.json(), { error: 503, message: 'this server is shutting down' });
  assert.equal((await app.inject({ url: '/healthz' })).statusCode, 200);
});
