import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, describeDatabase, loadConfig } from '../../src/config.js';
import { databaseIdentity } from '../../src/launch.js';
import { fits } from '../../src/store/postgres/hosts.js';
import { PostgresUrlError, describePostgresUrl, hostUrl, parsePostgresUrl } from '../../src/wire/postgres-url.js';

// Interface 1.3.0, "PostgreSQL with more than one server": DATABASE_URL in libpq's multi-host
// forms, as psql, JDBC, pgx, psycopg and Npgsql read it; what node-postgres is given for each host;
// and no password in any message or description.

describe('parsePostgresUrl: libpq’s forms', () => {
  test('hosts in the authority, in order, each with its port (5432 when none), and target_session_attrs', () => {
    const url = parsePostgresUrl(
      'postgres://app:s3cr%40t@db1.example:5432,db2.example,[::1]:5433/plants?target_session_attrs=read-write&connect_timeout=5&sslmode=require',
    );
    assert.deepEqual(url.hosts, [
      { host: 'db1.example', port: 5432 },
      { host: 'db2.example', port: 5432 },
      { host: '::1', port: 5433 },
    ]);
    assert.equal(url.user, 'app');
    assert.equal(url.password, 's3cr@t');
    assert.equal(url.database, 'plants');
    assert.equal(url.sessionAttrs, 'read-write');
    assert.equal(url.connectTimeoutMs, 5000);
    assert.deepEqual(url.params, [['sslmode', 'require']]);
  });

  test('hosts and ports in the query (?host=a,b&port=1,2), one port for all, and socket folders', () => {
    assert.deepEqual(parsePostgresUrl('postgresql://u@/db?host=h1,h2&port=6001,6002').hosts, [
      { host: 'h1', port: 6001 },
      { host: 'h2', port: 6002 },
    ]);
    assert.deepEqual(parsePostgresUrl('postgres:///db?host=h1,h2&port=6001').hosts, [
      { host: 'h1', port: 6001 },
      { host: 'h2', port: 6001 },
    ]);
    assert.deepEqual(parsePostgresUrl('postgres://u@/db?host=/var/run/postgresql').hosts, [
      { host: '/var/run/postgresql', port: 5432 },
    ]);
    assert.deepEqual(parsePostgresUrl('postgres://u@h/db?port=6432').hosts, [{ host: 'h', port: 6432 }]);
  });

  test('every value of target_session_attrs that libpq knows; connect_timeout as libpq counts it', () => {
    for (const attrs of ['any', 'read-write', 'primary', 'read-only', 'standby', 'prefer-standby']) {
      assert.equal(parsePostgresUrl(`postgres://h/db?target_session_attrs=${attrs}`).sessionAttrs, attrs);
    }
    assert.equal(parsePostgresUrl('postgres://h/db').sessionAttrs, 'any');
    assert.equal(parsePostgresUrl('postgres://h/db?connect_timeout=1').connectTimeoutMs, 2000); // libpq: at least 2 s
    assert.equal(parsePostgresUrl('postgres://h/db?connect_timeout=0').connectTimeoutMs, undefined); // none
  });

  test('a URL it cannot read is refused with what is wrong, never with the password', () => {
    const cases: Array<[string, RegExp]> = [
      ['postgres://u:hunter2@h1:5432,h2:99999/db', /"99999" is not a port/],
      ['postgres://u:hunter2@h1/db?target_session_attrs=master', /target_session_attrs must be one of any, read-write/],
      ['postgres://u:hunter2@h1/db?connect_timeout=soon', /connect_timeout is whole seconds/],
      ['postgres://u:hunter2@h1/db?host=h2', /both before the path and in \?host=/],
      ['postgres://u:hunter2@/db?host=a,b,c&port=1,2', /3 hosts and \?port= 2 ports/],
      ['postgres://u:hunter2@h1:x:y/db', /is not a host or host:port/],
    ];
    for (const [text, message] of cases) {
      assert.throws(
        () => parsePostgresUrl(text),
        (error: Error) =>
          error instanceof PostgresUrlError && message.test(error.message) && !error.message.includes('hunter2'),
        text,
      );
      assert.throws(
        () => loadConfig({ DATABASE_URL: text }),
        (error: Error) => error instanceof ConfigError && !error.message.includes('hunter2'),
      );
    }
  });

  test('each host’s URL is what node-postgres reads: one host, the password kept, libpq-only parameters left out', () => {
    const url = parsePostgresUrl(
      'postgres://app:p%40ss@10.0.0.1:5432,[fd00::2]:5433/plants?target_session_attrs=primary&application_name=ps',
    );
    assert.equal(hostUrl(url, url.hosts[0]!), 'postgres://app:p%40ss@10.0.0.1:5432/plants?application_name=ps');
    assert.equal(hostUrl(url, url.hosts[1]!), 'postgres://app:p%40ss@[fd00::2]:5433/plants?application_name=ps');
    const socket = parsePostgresUrl('postgres://u@/db?host=/run/pg');
    assert.equal(hostUrl(socket, socket.hosts[0]!), 'postgres://u@:5432/db?host=%2Frun%2Fpg');
  });

  test('the descriptions a log line or the CLI prints name every host, never the password', () => {
    const text = 'postgres://app:hunter2@127.0.0.1:5432,127.0.0.1:5433/plants?target_session_attrs=read-write';
    assert.equal(
      describePostgresUrl(parsePostgresUrl(text)),
      'postgres://app@127.0.0.1:5432,127.0.0.1:5433/plants?target_session_attrs=read-write',
    );
    const database = loadConfig({ DATABASE_URL: text }).database;
    assert.equal(
      describeDatabase(database),
      'postgres://app@127.0.0.1:5432,127.0.0.1:5433/plants?target_session_attrs=read-write',
    );
    assert.equal(databaseIdentity(database), 'postgres://127.0.0.1:5432,127.0.0.1:5433/plants');
  });
});

describe('target_session_attrs: which server fits (libpq’s rules)', () => {
  const primary = { inRecovery: false, readOnly: false };
  const standby = { inRecovery: true, readOnly: true };
  const readOnlyPrimary = { inRecovery: false, readOnly: true }; // default_transaction_read_only = on
  test('read-write and primary, read-only and standby, any, and prefer-standby’s two passes', () => {
    assert.deepEqual(
      (['any', 'read-write', 'primary', 'read-only', 'standby'] as const).map((a) => [
        fits(a, primary, 'first'),
        fits(a, standby, 'first'),
        fits(a, readOnlyPrimary, 'first'),
      ]),
      [
        [true, true, true],
        [true, false, false],
        [true, false, true],
        [false, true, true],
        [false, true, false],
      ],
    );
    assert.equal(fits('prefer-standby', primary, 'first'), false);
    assert.equal(fits('prefer-standby', primary, 'second'), true);
    assert.equal(fits('prefer-standby', standby, 'first'), true);
  });
});
