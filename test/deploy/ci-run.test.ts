import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

// .ci/run installs Debian's packages without letting them start services
// (policy-rc.d answers 101 for the install), so it never has to stop a process by name. The test
// runs .ci/run's own install step, with apt-get replaced by a script that records what it saw and
// a policy-rc.d path of its own (the machine's is left alone).

const CI_RUN = readFileSync(fileURLToPath(new URL('../../.ci/run', import.meta.url)), 'utf8');

/** .ci/run's install step, from `want=()` to the `fi` that ends it. */
function installStep(): string {
  const start = CI_RUN.indexOf('want=()');
  assert.ok(start >= 0, '.ci/run has its install step');
  const end = CI_RUN.indexOf('\nfi\n', CI_RUN.indexOf('if [ "${#want[@]}" -gt 0 ]', start));
  assert.ok(end > start);
  return CI_RUN.slice(start, end + 4);
}

interface Run {
  status: number | null;
  stdout: string;
  /** What the stand-in apt-get saw: the policy's exit code when it ran `install`, and its arguments. */
  seen: string;
}

/** `aptExit`: the stand-in's exit code, or 'killed': it sends SIGTERM to the step's shell first (an interrupted CI). */
function runInstall(dir: string, policy: string, aptExit: number | 'killed'): Run {
  const bin = join(dir, 'bin');
  const seen = join(dir, 'seen');
  mkdirSync(bin, { recursive: true });
  for (const tool of ['mktemp', 'cp', 'chmod', 'mv', 'rm']) {
    if (!existsSync(join(bin, tool))) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
  }
  // apt-get: on `install`, runs the policy as invoke-rc.d would for a package's service start.
  writeFileSync(
    join(bin, 'apt-get'),
    `#!/bin/bash\nif [ "$1" = update ]; then exit 0; fi\n` +
      `"$POLICY_RC_D" nginx start; echo "policy=$? args=$*" >> ${JSON.stringify(seen)}\n` +
      (aptExit === 'killed' ? 'kill -TERM $PPID\nexit 0\n' : `exit ${aptExit}\n`),
  );
  chmodSync(join(bin, 'apt-get'), 0o755);
  // PATH holds only the few tools the step runs and the stand-in: every package the step looks for
  // is missing but those it finds by absolute path (/usr/bin/chromium, /usr/sbin/nginx).
  const result = spawnSync('/bin/bash', ['-c', `set -euo pipefail\n${installStep()}`], {
    env: { PATH: bin, POLICY_RC_D: policy },
    encoding: 'utf8',
  });
  return { status: result.status, stdout: result.stdout, seen: existsSync(seen) ? readFileSync(seen, 'utf8') : '' };
}

test('.ci/run signals no process by name: no pkill, killall or pidof', () => {
  const code = CI_RUN.split('\n').filter((line) => !line.trim().startsWith('#'));
  assert.deepEqual(
    code.filter((line) => /\b(pkill|killall|pidof)\b/.test(line)),
    [],
  );
});

test('.ci/run installs with a policy-rc.d that forbids starting services, and puts back the one that was there', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ci-run-'));
  try {
    const policy = join(dir, 'policy-rc.d');
    const before = "#!/bin/sh\n# the machine's own\nexit 0\n";
    writeFileSync(policy, before, { mode: 0o750 });
    const run = runInstall(dir, policy, 0);
    assert.equal(run.status, 0, run.stdout);
    assert.match(run.stdout, /== installing .*stress-ng.*prometheus.*patroni.*etcd-server.*haproxy.*systemd/);
    // During the install, starting a service was forbidden (101, invoke-rc.d's "action forbidden").
    assert.match(run.seen, /^policy=101 args=install -y -qq --no-install-recommends .*stress-ng/m);
    assert.equal(readFileSync(policy, 'utf8'), before, 'the policy that was there is back, byte for byte');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('.ci/run removes its policy-rc.d after the install when there was none, and after a failed install too', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ci-run-'));
  try {
    const policy = join(dir, 'policy-rc.d');
    const ok = runInstall(dir, policy, 0);
    assert.equal(ok.status, 0, ok.stdout);
    assert.match(ok.seen, /^policy=101 /m);
    assert.equal(existsSync(policy), false, 'no policy-rc.d left behind');

    const failed = runInstall(dir, policy, 100);
    assert.equal(failed.status, 100, 'the install step fails as apt-get did');
    assert.equal(existsSync(policy), false, 'none left behind by a failed install either');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('.ci/run puts the policy back when it is interrupted during the install', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ci-run-'));
  try {
    const policy = join(dir, 'policy-rc.d');
    const before = "#!/bin/sh\n# the machine's own\nexit 0\n";
    writeFileSync(policy, before, { mode: 0o750 });
    const run = runInstall(dir, policy, 'killed');
    assert.match(run.seen, /^policy=101 /m, "the install ran under the step's policy");
    assert.equal(run.status, 130, 'the step ends as interrupted');
    assert.equal(readFileSync(policy, 'utf8'), before, 'the policy that was there is back');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
