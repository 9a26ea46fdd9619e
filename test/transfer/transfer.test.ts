import assert from 'node:assert/strict';
import { Readable, Writable } from 'node:stream';
import { after, test } from 'node:test';
import Database from 'better-sqlite3';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { exportPlants } from '../../src/transfer/export.js';
import { importPlants } from '../../src/transfer/import.js';
import { formatLine, parseLine } from '../../src/transfer/plant-line.js';
import { Progress } from '../../src/transfer/progress.js';
import { openTestStore } from '../helpers.js';
import { openScratchPostgres, stopSharedPostgres } from '../support/postgres.js';
import { underTest } from '../support/engines.js';

after(stopSharedPostgres);

const lines = (...rows: string[]): Readable => Readable.from([rows.join('\n') + '\n']);

class Collect extends Writable {
  text = '';
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: () => void): void {
    this.text += chunk.toString();
    done();
  }
}

test('a plant line keeps int64 ids exactly and leaves out a missing tag', () => {
  const plant = { id: 9223372036854775807n, owner: 'ålice', name: 'Fern 🌿', tag: null };
  const line = formatLine(plant);
  assert.equal(line, '{"id":9223372036854775807,"owner":"ålice","name":"Fern 🌿"}\n');
  assert.deepEqual(parseLine(line.trimEnd()), plant);
  const tagged = { id: -9223372036854775808n, owner: 'bob', name: 'Rose', tag: 'red "ish"' };
  assert.deepEqual(parseLine(formatLine(tagged).trimEnd()), tagged);
});

test('a line that is not a valid plant says why', () => {
  const cases: Array<[string, RegExp]> = [
    ['{"id":1,"owner":"a","name":"x"', /not valid JSON/],
    ['{"id":"1","owner":"a","name":"x"}', /plant\.id/],
    ['{"id":9223372036854775808,"owner":"a","name":"x"}', /plant\.id/],
    ['{"id":1,"name":"x"}', /must have the property "owner"/],
    ['{"id":1,"owner":"a","name":"x","color":"red"}', /unknown property "color"/],
    ['{"id":1,"owner":"a","name":"\\u0000"}', /plant\.name must be text of 1 to 200/],
    ['{"id":1,"owner":"","name":"x"}', /plant\.owner/],
    ['{"id":1,"owner":"a","name":"x","id":2}', /duplicate key/],
  ];
  for (const [text, reason] of cases) {
    const parsed = parseLine(text);
    assert.ok('error' in parsed, text);
    assert.match(parsed.error, reason, text);
  }
});

test('import refuses invalid UTF-8 by line number, and reads CRLF lines and a leading byte-order mark', async (t) => {
  const store = await openTestStore();
  t.after(() => store.close());
  await store.migrate();
  const input = Readable.from([
    Buffer.concat([
      Buffer.from('\uFEFF{"id":1,"owner":"a","name":"fern"}\r\n'),
      Buffer.from('{"id":2,"owner":"a","name":"f'),
      Buffer.from([0xff]),
      Buffer.from('rn"}\n{"id":3,"owner":"a","name":"ros'),
    ]),
    Buffer.from('e"}'), // a line split across chunks, with no final newline
  ]);
  const summary = await importPlants(input, store);
  assert.deepEqual(
    { imported: summary.imported, invalid: summary.invalid, problems: summary.problems },
    { imported: 2, invalid: 1, problems: [{ line: 2, kind: 'invalid', message: 'not valid UTF-8' }] },
  );
  const page = await store.listPlants({ owner: null, tag: null, fromId: 0n, limit: 10 });
  assert.deepEqual(
    page.map((p) => p.name),
    ['fern', 'rose'],
  );
});

// A line without end was copied on every chunk (quadratic) and kept whole in memory.
test('import reports an over-long line once, by number and the cap, and still imports the lines after it', async (t) => {
  const store = await openTestStore();
  t.after(() => store.close());
  await store.migrate();
  const piece = Buffer.alloc(64 * 1024, 'x');
  const input = Readable.from([
    Buffer.from('{"id":1,"owner":"a","name":"fern"}\n'),
    ...Array.from({ length: 16 }, () => piece), // a 1 MiB line, in 64 KiB chunks
    Buffer.from('\n{"id":2,"owner":"a","name":"rose"}\n'),
    Buffer.from(`{"id":3,"owner":"a","name":"aloe","tag":"${'t'.repeat(100)}"}`),
  ]);
  const summary = await importPlants(input, store);
  assert.deepEqual(
    { lines: summary.lines, imported: summary.imported, invalid: summary.invalid, problems: summary.problems },
    {
      lines: 4,
      imported: 3,
      invalid: 1,
      problems: [{ line: 2, kind: 'invalid', message: 'too long (1,048,576 bytes; a line may have at most 65,536)' }],
    },
  );

  const capped = await importPlants(lines('{"id":4,"owner":"a","name":"cactus"}', 'y'.repeat(41)), store, {
    maxLineBytes: 40,
  });
  assert.deepEqual(
    { imported: capped.imported, problems: capped.problems },
    {
      imported: 1,
      problems: [{ line: 2, kind: 'invalid', message: 'too long (41 bytes; a line may have at most 40)' }],
    },
  );
});

test('import counts every problem but keeps only the first ones by line number, so memory stays bounded', async (t) => {
  const store = await openTestStore();
  t.after(() => store.close());
  await store.migrate();
  await store.insertBatch([{ id: 1n, owner: 'b', name: 'x', tag: null }]);
  // The conflict on line 1 is found only when the batch is stored, after 100,000 invalid lines.
  const input = Readable.from([`{"id":1,"owner":"a","name":"x"}\n${'junk\n'.repeat(100_000)}`]);
  const summary = await importPlants(input, store);
  assert.deepEqual(
    { lines: summary.lines, invalid: summary.invalid, conflicts: summary.conflicts, kept: summary.problems.length },
    { lines: 100_001, invalid: 100_000, conflicts: 1, kept: 50 },
  );
  assert.deepEqual(summary.problems[0], { line: 1, kind: 'conflict', message: 'another plant already has the id 1' });
  assert.deepEqual(
    summary.problems.slice(1).map((p) => [p.line, p.kind]),
    Array.from({ length: 49 }, (_, i) => [i + 2, 'invalid']),
  );
  const few = await importPlants(lines('junk', 'junk', 'junk'), store, { maxProblems: 2 });
  assert.deepEqual({ invalid: few.invalid, lines: few.problems.map((p) => p.line) }, { invalid: 3, lines: [1, 2] });
});

const engines: Array<[string, () => Promise<Store>]> = [
  ['SQLite', openTestStore],
  ['PostgreSQL', openScratchPostgres],
];

for (const [engine, open] of underTest(engines)) {
  test(`${engine}: import stores valid lines in batches, reports invalid ones by number, and stores nothing of them`, async (t) => {
    const store = await open();
    t.after(() => store.close());
    await store.migrate();
    const input = lines(
      '{"id":3,"owner":"alice","name":"fern","tag":"green"}',
      '{"id":1,"owner":"bob","name":"rose"}',
      '',
      '{"id":2,"owner":"alice","name":""}',
      'not json',
      '{"id":9007199254740993,"owner":"carol","name":"cactus"}',
      '{"id":9007199254740992,"owner":"carol","name":"aloe"}',
    );
    const summary = await importPlants(input, store, { batchSize: 2 });
    assert.deepEqual(
      { lines: summary.lines, imported: summary.imported, unchanged: summary.unchanged },
      { lines: 7, imported: 4, unchanged: 0 },
    );
    assert.deepEqual({ invalid: summary.invalid, conflicts: summary.conflicts }, { invalid: 2, conflicts: 0 });
    assert.deepEqual(
      summary.problems.map((p) => [p.line, p.kind]),
      [
        [4, 'invalid'],
        [5, 'invalid'],
      ],
    );
    assert.match(summary.problems[0]!.message, /plant\.name/);
    const out = new Collect();
    assert.equal(await exportPlants(store, out), 4);
    assert.equal(
      out.text,
      [
        '{"id":1,"owner":"bob","name":"rose"}',
        '{"id":3,"owner":"alice","name":"fern","tag":"green"}',
        '{"id":9007199254740992,"owner":"carol","name":"aloe"}',
        '{"id":9007199254740993,"owner":"carol","name":"cactus"}',
        '',
      ].join('\n'),
    );
  });

  test(`${engine}: a second import of the same lines changes nothing; a different plant with a taken id is a conflict`, async (t) => {
    const store = await open();
    t.after(() => store.close());
    await store.migrate();
    const rows = ['{"id":1,"owner":"a","name":"x"}', '{"id":2,"owner":"b","name":"y","tag":"t"}'];
    assert.equal((await importPlants(lines(...rows), store)).imported, 2);
    const again = await importPlants(lines(...rows), store);
    assert.deepEqual(
      { imported: again.imported, unchanged: again.unchanged, conflicts: again.conflicts },
      { imported: 0, unchanged: 2, conflicts: 0 },
    );
    const clash = await importPlants(
      lines(
        '{"id":2,"owner":"b","name":"y"}',
        '{"id":5,"owner":"c","name":"z"}',
        '{"id":5,"owner":"c","name":"z"}',
        '{"id":5,"owner":"d","name":"z"}',
      ),
      store,
      { batchSize: 10 },
    );
    assert.deepEqual(
      { imported: clash.imported, unchanged: clash.unchanged, conflicts: clash.conflicts },
      { imported: 1, unchanged: 1, conflicts: 2 },
    );
    assert.deepEqual(
      clash.problems.map((p) => [p.line, p.kind]),
      [
        [1, 'conflict'],
        [4, 'conflict'],
      ],
    );
    assert.match(clash.problems[0]!.message, /another plant already has the id 2/);
    const page = await store.listPlants({ owner: null, tag: null, fromId: -(2n ** 63n), limit: 10 });
    assert.deepEqual(page, [
      { id: 1n, owner: 'a', name: 'x', tag: null },
      { id: 2n, owner: 'b', name: 'y', tag: 't' },
      { id: 5n, owner: 'c', name: 'z', tag: null },
    ]);
  });
}

test('export pages through the whole store, across page boundaries and up to the largest id', async (t) => {
  const store = await openTestStore();
  t.after(() => store.close());
  await store.migrate();
  const ids = Array.from({ length: 12_001 }, (_, i) => BigInt(i) * 3n - 10n);
  ids.push(2n ** 63n - 1n);
  const result = await store.insertBatch(ids.map((id) => ({ id, owner: 'o', name: `n${id}`, tag: null })));
  assert.equal(result.inserted, ids.length);
  const out = new Collect();
  assert.equal(await exportPlants(store, out), ids.length);
  const exported = out.text
    .trimEnd()
    .split('\n')
    .map((l) => /"id":(-?\d+)/.exec(l)![1]);
  assert.deepEqual(exported, ids.map(String));
});

test("a SQLite import has a larger page cache while it stores its batches, and the connection's own after", async (t) => {
  const db = new Database(':memory:');
  const store = new SqliteStore(db);
  t.after(() => store.close());
  await store.migrate();
  db.pragma('cache_size = -3000');
  const during: unknown[] = [];
  const insertBatch = store.insertBatch.bind(store);
  store.insertBatch = (plants) => {
    during.push(db.pragma('cache_size', { simple: true }));
    return insertBatch(plants);
  };
  const ok = lines('{"id":1,"owner":"a","name":"fern"}', '{"id":2,"owner":"a","name":"rose"}');
  assert.equal((await importPlants(ok, store, { batchSize: 1 })).imported, 2);
  assert.deepEqual(during, [-128 * 1024, -128 * 1024]);
  assert.equal(db.pragma('cache_size', { simple: true }), -3000);

  // An input that fails half-way (a file that cannot be read on) restores it too.
  const failing = Readable.from(
    (async function* () {
      yield '{"id":3,"owner":"a","name":"moss"}\n';
      throw new Error('the disk went away');
    })(),
  );
  await assert.rejects(importPlants(failing, store, { batchSize: 1 }), /the disk went away/);
  assert.equal(db.pragma('cache_size', { simple: true }), -3000);
  assert.equal(await store.countPlants(), 3);
});

test('progress draws a bar on a terminal and plain lines elsewhere', () => {
  let now = 0;
  const tty = Object.assign(new Collect(), { isTTY: true });
  const bar = new Progress(tty, 'lines', { totalBytes: 1000, now: () => now });
  now = 1000;
  bar.update(500, 500);
  bar.finish('Imported 500 plants');
  assert.match(
    tty.text,
    /^\r\x1b\[K\[#{15}\.{15}\] {2}50% 500 lines 500\/s\r\x1b\[KImported 500 plants in 1\.0 s\.\n$/,
  );

  const pipe = new Collect();
  now = 0;
  const plain = new Progress(pipe, 'lines', { totalBytes: 1000, lineEvery: 200, now: () => now });
  now = 1000;
  for (const done of [100, 200, 300, 400]) plain.update(done, done);
  assert.equal(pipe.text, 'progress: 200 lines (20%), 200/s\nprogress: 400 lines (40%), 400/s\n');
});
