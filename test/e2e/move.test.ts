import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { BIN, runCli, mintCliToken, startServer } from '../process.js';
import { scratchSchema, stopSharedPostgres } from '../support/postgres.js';

// Moving a store from SQLite to PostgreSQL is `plant-store export | plant-store import -`.

after(stopSharedPostgres);
const dir = mkdtempSync(join(tmpdir(), 'plant-store-move-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** `export` from one database piped into `import -` of another, as two real processes. */
async function pipeExportToImport(from: string, to: string): Promise<{ importCode: number | null; stderr: string }> {
  const exporter = spawn(process.execPath, [BIN, 'export'], {
    env: { ...process.env, DATABASE_URL: from },
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const importer = spawn(process.execPath, [BIN, 'import', '-'], {
    env: { ...process.env, DATABASE_URL: to },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  exporter.stdout.pipe(importer.stdin);
  let stderr = '';
  importer.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
  const [[exportCode], [importCode]] = (await Promise.all([once(exporter, 'exit'), once(importer, 'exit')])) as [
    [number | null],
    [number | null],
  ];
  assert.equal(exportCode, 0);
  return { importCode, stderr };
}

test('import reports invalid lines by number, stores the rest, and exits 1', async () => {
  const file = join(dir, 'mixed.ndjson');
  writeFileSync(
    file,
    '{"id":1,"owner":"alice","name":"fern"}\n{"id":2,"owner":"alice"}\n\n{"id":3,"owner":"bob","name":"rose","tag":"red"}\n[]\n',
  );
  const env = { DATABASE_URL: `sqlite:${join(dir, 'mixed.db')}` };
  const r = await runCli(['import', file], env);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^line 2: plant must have the property "name"$/m);
  assert.match(r.stderr, /^line 5: plant must be a JSON object$/m);
  assert.match(r.stderr, /^Imported 2 plants; 0 unchanged, 0 conflicting, 2 invalid \(5 lines\) in \d+\.\d s\.$/m);
  const exported = await runCli(['export'], env);
  assert.equal(
    exported.stdout,
    '{"id":1,"owner":"alice","name":"fern"}\n{"id":3,"owner":"bob","name":"rose","tag":"red"}\n',
  );
});

test('export | import moves every plant from SQLite to PostgreSQL exactly; a second run changes nothing', async (t) => {
  const rows: string[] = [];
  for (let i = 0; i < 12_000; i++) {
    const id = BigInt(i) * 768614336404564n - 2n ** 62n; // spread over the int64 range, beyond 2^53
    rows.push(
      JSON.stringify({ owner: `user${i % 7}`, name: `plant ${i} 🌱`, ...(i % 2 ? { tag: `t${i % 5}` } : {}) }).replace(
        '{',
        `{"id":${id},`,
      ),
    );
  }
  rows.push(
    '{"id":9223372036854775807,"owner":"user1","name":"last"}',
    '{"id":-9223372036854775808,"owner":"user1","name":"first"}',
  );
  const file = join(dir, 'plants.ndjson');
  writeFileSync(file, rows.join('\n') + '\n');
  const sqlite = `sqlite:${join(dir, 'from.db')}`;
  const loaded = await runCli(['import', file], { DATABASE_URL: sqlite });
  assert.equal(loaded.code, 0, loaded.stderr);
  assert.match(loaded.stderr, /Imported 12,002 plants; 0 unchanged/);

  const scratch = await scratchSchema();
  t.after(() => scratch.drop());
  const moved = await pipeExportToImport(sqlite, scratch.url);
  assert.equal(moved.importCode, 0, moved.stderr);
  assert.match(moved.stderr, /Imported 12,002 plants; 0 unchanged, 0 conflicting, 0 invalid \(12,002 lines\)/);

  const fromSqlite = (await runCli(['export'], { DATABASE_URL: sqlite })).stdout;
  const fromPostgres = (await runCli(['export'], { DATABASE_URL: scratch.url })).stdout;
  assert.equal(fromPostgres, fromSqlite, 'the same plants, ids, owners, names and tags, in the same order');
  assert.equal(fromPostgres.split('\n').length - 1, 12_002);

  const again = await pipeExportToImport(sqlite, scratch.url);
  assert.equal(again.importCode, 0);
  assert.match(again.stderr, /Imported 0 plants; 12,002 unchanged, 0 conflicting/);

  // Owners survive the move: a server on PostgreSQL shows user1 its own plants.
  const token = await mintCliToken({ DATABASE_URL: scratch.url }, 'user1', 'plants:read');
  const server = await startServer({ DATABASE_URL: scratch.url });
  t.after(() => server.stop());
  const page = await fetch(`${server.url}/plants?limit=2`, { headers: { authorization: `Bearer ${token}` } });
  assert.deepEqual(await page.json(), [{ name: 'first' }, { name: 'plant 1 🌱', tag: 't1' }]);
});
