import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { setImmediate as turnEnd } from 'node:timers/promises';
import { test } from 'node:test';
import { TurnLogStream } from '../../src/http/log-stream.js';

// The log's destination: the lines of one event-loop turn go out in one write, at the turn's end.

function collecting(): { writes: string[]; stream: TurnLogStream } {
  const writes: string[] = [];
  return { writes, stream: new TurnLogStream({ write: (lines: string) => writes.push(lines) }) };
}

test('the lines written in one turn go out together, in order, once the turn ends', async () => {
  const { writes, stream } = collecting();
  stream.write('a\n');
  stream.write('b\n');
  stream.write('c\n');
  assert.deepEqual(writes, [], 'nothing is written during the turn');
  await turnEnd();
  assert.deepEqual(writes, ['a\nb\nc\n']);
});

test('each turn has its own write, and a turn without lines writes nothing', async () => {
  const { writes, stream } = collecting();
  stream.write('first\n');
  await turnEnd();
  await turnEnd();
  stream.write('second\n');
  await turnEnd();
  assert.deepEqual(writes, ['first\n', 'second\n']);
});

test('64 KiB pending go out at once, without waiting for the turn to end', async () => {
  const { writes, stream } = collecting();
  const line = `${'x'.repeat(1023)}\n`;
  for (let i = 0; i < 64; i++) stream.write(line);
  assert.equal(writes.length, 1, 'the 64th KiB wrote the batch');
  assert.equal(writes[0], line.repeat(64));
  stream.write('tail\n');
  await turnEnd();
  assert.deepEqual(writes.slice(1), ['tail\n']);
});

test('flush() writes what is pending at once (the process exit calls it)', async () => {
  const { writes, stream } = collecting();
  stream.write('last words\n');
  stream.flush();
  assert.deepEqual(writes, ['last words\n']);
  await turnEnd();
  assert.deepEqual(writes, ['last words\n'], 'nothing is written twice');
});

test("a process that crashes still writes the lines of the turn it crashed in (stdout's stream flushes on exit)", () => {
  const module = new URL('../../src/http/log-stream.ts', import.meta.url).href;
  const script = `import { stdoutLogStream } from ${JSON.stringify(module)};
    setTimeout(() => { stdoutLogStream().write('the last line\\n'); throw new Error('crash'); }, 1);`;
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    encoding: 'utf8',
  });
  assert.equal(run.status, 1, run.stderr);
  assert.match(run.stderr, /Error: crash/);
  assert.equal(run.stdout, 'the last line\n');
});
