import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
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

test('a write holds whole lines of at most 4 KiB (a pipe shared by workers takes that much atomically)', async () => {
  const { writes, stream } = collecting();
  const line = `${'x'.repeat(1023)}\n`; // 1 KiB
  for (let i = 0; i < 10; i++) stream.write(line);
  assert.deepEqual(writes, [line.repeat(4), line.repeat(4)], 'the fifth and the ninth line started a new write');
  await turnEnd();
  assert.deepEqual(writes.slice(2), [line.repeat(2)], 'the rest at the end of the turn');
});

test('4 KiB are counted in bytes, not characters, and a longer line goes alone and whole', async () => {
  const { writes, stream } = collecting();
  const wide = `${'é'.repeat(1023)}\n`; // 2,047 bytes in UTF-8
  stream.write(wide);
  stream.write(wide);
  stream.write(wide); // 6,141 bytes: this one starts a new write
  const long = `${'y'.repeat(5000)}\n`;
  stream.write(long);
  stream.write('after\n');
  await turnEnd();
  assert.deepEqual(writes, [wide + wide, wide, long, 'after\n']);
  for (const written of writes) assert.ok(written.endsWith('\n'), 'no line is cut');
});

test('flush() writes what is pending at once (the process exit calls it), then calls back as pino expects', async () => {
  const { writes, stream } = collecting();
  stream.write('last words\n');
  let calledBack = false;
  stream.flush(() => (calledBack = true));
  assert.deepEqual(writes, ['last words\n']);
  assert.ok(calledBack);
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

test("two processes logging through one pipe (the workers of --workers) never cut each other's lines", async () => {
  const module = new URL('../../src/http/log-stream.ts', import.meta.url).href;
  // Each writer logs bursts of lines in single turns; the reader drains slowly, so the pipe fills.
  const writer = `import { stdoutLogStream } from ${JSON.stringify(module)};
    import { setImmediate as turn } from 'node:timers/promises';
    const log = stdoutLogStream();
    for (let burst = 0; burst < 100; burst++) {
      for (let i = 0; i < 240; i++) log.write(JSON.stringify({ pid: process.pid, burst, i, pad: 'x'.repeat(150 + ((burst * 7 + i) % 90)) }) + '\\n');
      await turn();
    }`;
  const node = `'${process.execPath}' --import tsx --input-type=module -e "$WRITER"`;
  const child = spawn('bash', ['-c', `${node} & ${node} & wait`], {
    env: { ...process.env, WRITER: writer },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let text = '';
  child.stdout.setEncoding('utf8');
  for await (const chunk of child.stdout) {
    text += chunk as string;
    child.stdout.pause();
    await new Promise((resolve) => setTimeout(resolve, 1)); // a slow reader: the pipe stays full
    child.stdout.resume();
  }
  const lines = text.split('\n').filter(Boolean);
  const broken = lines.filter((line) => {
    try {
      JSON.parse(line);
      return false;
    } catch {
      return true;
    }
  });
  assert.deepEqual(broken.slice(0, 3), [], `${broken.length} of ${lines.length} lines were cut`);
  assert.equal(lines.length, 2 * 100 * 240);
});
