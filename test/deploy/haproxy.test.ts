import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { haproxyConfig } from '../failover/cluster.js';

// deploy/haproxy.cfg: the file operators copy is the one the failover tests run. Its
// read-write listener's checks and timeouts are those test/failover/cluster.ts writes for the
// Patroni cluster it starts (only the addresses differ), and HAProxy itself accepts the file.

const CFG = readFileSync(fileURLToPath(new URL('../../deploy/haproxy.cfg', import.meta.url)), 'utf8');
const HAPROXY = '/usr/sbin/haproxy';

/** The lines of a section that say how it behaves: every line but comments, `bind` and `server`, and the stats socket. */
function behaviour(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.replace(/#.*$/, '').trim())
    .filter((line) => line !== '' && !/^(bind|server|stats socket)\b/.test(line));
}

const section = (text: string, name: string): string => {
  const start = text.indexOf(name);
  assert.ok(start >= 0, `a section ${name}`);
  const next = text.slice(start + name.length).search(/^(listen|global|defaults|frontend|backend)\b/m);
  return next < 0 ? text.slice(start) : text.slice(start, start + name.length + next);
};

test('deploy/haproxy.cfg routes to the leader as the failover tests’ HAProxy does: GET /primary, every second, down after 2, sessions shut', () => {
  const tested = haproxyConfig(6000, [{ name: 'node1', port: 6001, restPort: 6002 }], '/tmp/s');
  for (const name of ['defaults', 'listen postgres_primary']) {
    assert.deepEqual(behaviour(section(CFG, name)), behaviour(section(tested, name)), name);
  }
  assert.match(section(CFG, 'listen postgres_primary'), /^\s+server pg1 \S+:5432 maxconn 500 check port 8008$/m);
});

test(
  'HAProxy accepts deploy/haproxy.cfg (haproxy -c)',
  { skip: !existsSync(HAPROXY) && process.env.CI !== 'true' ? 'needs Debian’s haproxy' : false },
  async () => {
    // The stats socket's folder is the package's; elsewhere a folder of the test's own stands in.
    const dir = mkdtempSync(join(tmpdir(), 'plant-store-haproxy-'));
    try {
      const file = join(dir, 'haproxy.cfg');
      writeFileSync(file, CFG.replace('/run/haproxy/admin.sock', join(dir, 'admin.sock')));
      const { stdout } = await promisify(execFile)(HAPROXY, ['-c', '-f', file]);
      assert.match(stdout, /Configuration file is valid/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
