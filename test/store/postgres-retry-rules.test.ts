import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { NoServerError, failoverFate } from '../../src/store/postgres/errors.js';
import { HostRouter, routeThrough, throughFailover } from '../../src/store/postgres/hosts.js';
import { inTransaction } from '../../src/store/postgres/transaction.js';
import { StoreUnavailableError } from '../../src/store/store.js';
import { parsePostgresUrl } from '../../src/wire/postgres-url.js';

// The rules by which a statement or a transaction is sent again across a failover
// (docs/postgres-and-scaling.md, "When the server changes"), each tested on its own: what a
// failure says of the statement's fate, how long and when throughFailover tries again, and that a
// transaction is run again only when nothing of it can have committed.

const sqlError = (code: string): pg.DatabaseError =>
  Object.assign(new pg.DatabaseError('server says no', 0, 'error'), { code });
const systemError = (code: string): Error => Object.assign(new Error(`connect ${code}`), { code });

describe('failoverFate', () => {
  test('a statement that surely did not run is not-run: no connection, a standby refused it', () => {
    for (const error of [
      sqlError('25006'), // a write refused by a read-only server
      sqlError('57P03'), // the server cannot take connections now
      systemError('ECONNREFUSED'),
      new NoServerError('no server of DATABASE_URL is read-write'),
      new Error('timeout expired'), // a client's connect that timed out: nothing was sent
      new Error('timeout exceeded when trying to connect'), // the pool's
      new Error('Connection terminated due to connection timeout'),
    ]) {
      assert.equal(failoverFate(error), 'not-run', error.message);
    }
  });

  test('a statement whose connection went down while it ran may have run: unknown', () => {
    for (const error of [
      sqlError('57P01'), // terminated by a shutdown
      sqlError('57P02'),
      sqlError('08006'),
      systemError('ECONNRESET'),
      systemError('ETIMEDOUT'), // what a connection cut for a silent server carries
      systemError('EPIPE'),
      new Error('Connection terminated unexpectedly'),
      new Error('Query read timeout'),
    ]) {
      assert.equal(failoverFate(error), 'unknown', error.message);
    }
  });

  test('every other failure is not the failover’s: no retry cures it', () => {
    for (const error of [sqlError('23505'), sqlError('42601'), sqlError('57014'), new TypeError('bug'), 'text']) {
      assert.equal(failoverFate(error), undefined, String(error));
    }
  });
});

/** A router over two servers that nothing is asked of: throughFailover reads its wait only. */
function routerWaiting(ms: number): HostRouter {
  const router = new HostRouter(
    parsePostgresUrl('postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write'),
    2000,
  );
  router.waitMs = ms;
  return router;
}

describe('throughFailover', () => {
  test('with one server (no router) a statement runs once, whatever its failure', async () => {
    let calls = 0;
    await assert.rejects(
      throughFailover(undefined, true, () => {
        calls += 1;
        return Promise.reject(systemError('ECONNREFUSED'));
      }),
      /ECONNREFUSED/,
    );
    assert.equal(calls, 1);
  });

  test('a statement that did not run is sent again until it succeeds, within the wait', async () => {
    const seen: boolean[] = [];
    const answer = await throughFailover(routerWaiting(5000), false, (afterUnknown) => {
      seen.push(afterUnknown);
      return seen.length < 3 ? Promise.reject(sqlError('25006')) : Promise.resolve('stored');
    });
    assert.equal(answer, 'stored');
    assert.deepEqual(seen, [false, false, false]);
  });

  test('a statement that may have run is not sent again unless repeating it changes nothing', async () => {
    let calls = 0;
    await assert.rejects(
      throughFailover(routerWaiting(5000), false, () => {
        calls += 1;
        return Promise.reject(systemError('ECONNRESET'));
      }),
      /ECONNRESET/,
    );
    assert.equal(calls, 1);

    const seen: boolean[] = [];
    const answer = await throughFailover(routerWaiting(5000), true, (afterUnknown) => {
      seen.push(afterUnknown);
      return seen.length === 1 ? Promise.reject(systemError('ECONNRESET')) : Promise.resolve('read');
    });
    assert.equal(answer, 'read');
    assert.deepEqual(seen, [false, true], 'the attempt after an unknown fate is told so');
  });

  test('a failure that is not the failover’s is not retried', async () => {
    let calls = 0;
    await assert.rejects(
      throughFailover(routerWaiting(5000), true, () => {
        calls += 1;
        return Promise.reject(sqlError('23505'));
      }),
      /server says no/,
    );
    assert.equal(calls, 1);
  });

  test('once the wait is over the last failure is the answer', async () => {
    let calls = 0;
    await assert.rejects(
      throughFailover(routerWaiting(0), true, () => {
        calls += 1;
        return Promise.reject(systemError('ECONNREFUSED'));
      }),
      /ECONNREFUSED/,
    );
    assert.equal(calls, 1);
  });
});

/** A pool whose connections answer each statement as `answer` says: enough for inTransaction. */
function scriptedPool(answer: (sql: string, run: number) => Promise<unknown>): { pool: pg.Pool; runs: () => number } {
  let runs = 0;
  const pool = {
    connect: () => {
      runs += 1;
      const run = runs;
      return Promise.resolve({ query: (sql: string) => answer(sql, run), release: () => {} });
    },
  } as unknown as pg.Pool;
  routeThrough(pool, routerWaiting(5000));
  return { pool, runs: () => runs };
}

describe('inTransaction', () => {
  test('a transaction cut before its COMMIT was sent runs again, whole, and its answer is the second run’s', async () => {
    let works = 0;
    const { pool, runs } = scriptedPool((sql, run) =>
      sql === 'write' && run === 1
        ? Promise.reject(new Error('Connection terminated unexpectedly'))
        : Promise.resolve({}),
    );
    const answer = await inTransaction(pool, async (client) => {
      works += 1;
      await client.query('write');
      return `run ${runs()}`;
    });
    assert.equal(answer, 'run 2');
    assert.equal(works, 2);
  });

  test('a failure at COMMIT is a 503 and the transaction is never run again: it may have committed', async () => {
    let works = 0;
    const { pool, runs } = scriptedPool((sql) =>
      sql === 'COMMIT' ? Promise.reject(new Error('Connection terminated unexpectedly')) : Promise.resolve({}),
    );
    await assert.rejects(
      inTransaction(pool, async (client) => {
        works += 1;
        await client.query('write');
      }),
      (error: unknown) => error instanceof StoreUnavailableError && /Connection terminated/.test(error.message),
    );
    assert.equal(works, 1);
    assert.equal(runs(), 1);
  });

  test('a standby that refuses the write before COMMIT: run again on the next connection', async () => {
    let works = 0;
    const { pool } = scriptedPool((sql, run) =>
      sql === 'write' && run === 1 ? Promise.reject(sqlError('25006')) : Promise.resolve({}),
    );
    await inTransaction(pool, async (client) => {
      works += 1;
      await client.query('write');
    });
    assert.equal(works, 2);
  });
});
