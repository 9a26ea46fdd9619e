import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createdbCommand } from '../../src/store/postgres/connection.js';

// The second walkthrough, point 4: the createdb command that a missing database's error names (the
// e2e proof is test/e2e/startup-failure.test.ts; with several servers, run as printed:
// test/failover/multi-host.test.ts).

test('createdbCommand: the server, port, user and name of the URL, never its password, quoted for a shell when needed', () => {
  assert.equal(
    createdbCommand('postgres://postgres:secret@127.0.0.1:5432/plants_x'),
    'createdb -h 127.0.0.1 -p 5432 -U postgres plants_x',
  );
  assert.equal(createdbCommand('postgresql://app@db.example/plants'), 'createdb -h db.example -p 5432 -U app plants');
  assert.equal(createdbCommand('postgres://app@[::1]:5433/my%20plants'), "createdb -h ::1 -p 5433 -U app 'my plants'");
  assert.equal(
    createdbCommand('postgres:///plants?host=/var/run/postgresql'),
    'createdb -h /var/run/postgresql -p 5432 plants',
  );
  assert.equal(
    createdbCommand('postgres://app@/plants?host=/var/run/postgresql&port=5433'),
    'createdb -h /var/run/postgresql -p 5433 -U app plants',
  );
  assert.equal(createdbCommand("postgres://app@db/it's"), "createdb -h db -p 5432 -U app 'it'\\''s'");
});

// Every command takes the multi-host URL, the createdb hint too. createdb (libpq)
// reads a list in -h and -p, one port for all or one per host; it has no option for
// target_session_attrs, which libpq reads from PGTARGETSESSIONATTRS: without it, a standby named
// first answers the CREATE DATABASE with "cannot execute CREATE DATABASE in a read-only transaction".
test('createdbCommand with several servers: every host, their ports, the URL’s target_session_attrs; never the password', () => {
  assert.equal(
    createdbCommand('postgres://app:secret@db1.example:5432,db2.example:5433/plants?target_session_attrs=read-write'),
    'PGTARGETSESSIONATTRS=read-write createdb -h db1.example,db2.example -p 5432,5433 -U app plants',
  );
  assert.equal(
    createdbCommand('postgres://app:secret@db1.example,db2.example/plants?target_session_attrs=primary'),
    'PGTARGETSESSIONATTRS=primary createdb -h db1.example,db2.example -p 5432 -U app plants',
    'one port when they share it',
  );
  assert.equal(
    createdbCommand('postgres://app:s3cr%40t@/plants?host=db1,db2&port=6432,6433&target_session_attrs=read-write'),
    'PGTARGETSESSIONATTRS=read-write createdb -h db1,db2 -p 6432,6433 -U app plants',
  );
  assert.equal(
    createdbCommand('postgres://app@[::1]:5432,127.0.0.1:5433/plants'),
    'createdb -h ::1,127.0.0.1 -p 5432,5433 -U app plants',
    'target_session_attrs any (the default): as libpq, the first server that answers',
  );
  for (const url of [
    'postgres://app:hunter2@h1:5432,h2:5432/plants?target_session_attrs=read-write',
    'postgres://app:hunter2@/plants?host=h1,h2&target_session_attrs=read-write&sslmode=require',
  ])
    assert.doesNotMatch(createdbCommand(url), /hunter2/);
});
