import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { classifyPostgresError } from '../../src/store/postgres/errors.js';
import { StoreUnavailableError } from '../../src/store/store.js';

const sqlError = (code: string): pg.DatabaseError => {
  const error = new pg.DatabaseError('server says no', 0, 'error');
  error.code = code;
  return error;
};

const systemError = (code: string): Error => Object.assign(new Error(`connect ${code}`), { code });

test('errors a retry may cure become StoreUnavailableError (503)', () => {
  for (const error of [
    sqlError('08006'), // connection failure
    sqlError('08001'),
    sqlError('53300'), // too many connections
    sqlError('57P01'), // admin shutdown
    sqlError('57P03'), // cannot connect now
    sqlError('57014'), // statement cancelled or timed out
    sqlError('25006'), // read-only server after a failover
    sqlError('40001'), // serialization failure
    sqlError('40P01'), // deadlock
    systemError('ECONNREFUSED'),
    systemError('ECONNRESET'),
    systemError('ETIMEDOUT'),
    new Error('Connection terminated unexpectedly'),
    new Error('timeout exceeded when trying to connect'),
  ]) {
    const classified = classifyPostgresError(error);
    assert.ok(classified instanceof StoreUnavailableError, `${(error as { code?: string }).code ?? error.message}`);
    assert.equal(classified.cause, error);
  }
});

test('errors that a retry cannot cure stay what they are (500, and logged)', () => {
  for (const error of [
    sqlError('08P01'), // protocol violation: a bug of ours
    sqlError('42601'), // syntax error
    sqlError('23505'), // unique violation
    sqlError('22P02'), // invalid text representation
    new TypeError('Cannot read properties of undefined'),
    new RangeError('out of range'),
    systemError('ERR_SOMETHING_ELSE'),
  ]) {
    assert.equal(classifyPostgresError(error), error);
  }
});
