import assert from 'node:assert/strict';
import { test } from 'node:test';
import { StoreUnavailableError, failureFields } from '../../src/store/store.js';

// Background loops (dispatcher, pruner, change feed) log through failureFields: in a database
// outage a reason without a stack (a CI run caught the dispatcher's stack in the
// outage test's log), anything unexpected with its stack.
test('an unavailable database is logged by its reason alone, not doubled and without a stack', () => {
  const cause = new Error('terminating connection due to administrator command');
  const fields = failureFields(new StoreUnavailableError(cause.message, { cause }));
  assert.deepEqual(fields, { reason: 'terminating connection due to administrator command' });
});

test('any other failure keeps the error itself, for its stack', () => {
  const error = new TypeError('a bug');
  assert.deepEqual(failureFields(error), { err: error });
});
