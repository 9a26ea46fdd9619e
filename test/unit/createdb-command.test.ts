import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createdbCommand } from '../../src/store/postgres/connection.js';

// The second walkthrough, point 4: the createdb command that a missing database's error names (the
// e2e proof is test/e2e/startup-failure.test.ts).

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
  assert.equal(createdbCommand("postgres://app@db/it's"), "createdb -h db -p 5432 -U app 'it'\\''s'");
});
