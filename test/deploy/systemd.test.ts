import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { readSettingsFile } from '../../src/launch.js';
import { markedBlock } from '../docs/markdown.js';
import { reapAtExit } from '../process.js';
import { eventually } from '../support/eventually.js';
import { freePort } from '../support/postgres.js';

// deploy/plant-store.service and deploy/plant-store.env (issue 35, point 1). systemd checks the
// unit (`systemd-analyze verify`, and `security --offline` for its hardening), then the service is
// started as the unit would start it, without systemd (none runs on the test machines): the
// settings installed by docs/operations.md's printed commands, the unit's ExecStart as the unit's
// user (plant-store when it exists, else nobody), with the unit's environment (systemd's own
// variables and the EnvironmentFile's), in its WorkingDirectory, without new privileges or
// capabilities. As root, a mount namespace stands in for ProtectSystem=strict (every mount read-only
// but the StateDirectory), PrivateTmp= and ProtectHome=. It serves, reloads the settings file on
// ExecReload's SIGHUP, and exits 0 on SIGTERM (KillMode=mixed: to the main process alone). Not
// proven here: systemd's own parsing of the EnvironmentFile (the file keeps to lines both parsers
// read alike, which is checked), the system call filter, RestrictAddressFamilies=, PrivateDevices=,
// ProtectProc= and the Protect{Kernel,Clock,Hostname,ControlGroups} directives.

const ROOT = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');
const UNIT_TEXT = readFileSync(join(ROOT, 'deploy/plant-store.service'), 'utf8');
const ENV_TEXT = readFileSync(join(ROOT, 'deploy/plant-store.env'), 'utf8');
const SYSTEMD_ANALYZE = '/usr/bin/systemd-analyze';
const exec = promisify(execFile);
const isRoot = process.getuid?.() === 0;

/** The unit's `Key=value` lines of `section`, in order (a key may repeat). */
function directives(section: string): [string, string][] {
  const found: [string, string][] = [];
  let current = '';
  for (const raw of UNIT_TEXT.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) current = header[1]!;
    else if (current === section) {
      const eq = line.indexOf('=');
      found.push([line.slice(0, eq), line.slice(eq + 1)]);
    }
  }
  return found;
}
const service = directives('Service');
/** The one value of `key` in [Service]. */
function one(key: string): string {
  const values = service.filter(([name]) => name === key).map(([, value]) => value);
  assert.equal(values.length, 1, `one ${key}= in [Service]`);
  return values[0]!;
}

/** NAME=value as systemd and readSettingsFile both read it: no quotes, `$`, spaces or backslashes. */
const PLAIN = /^([A-Z_][A-Z0-9_]*)=([^\s"'$\\]*)$/;
function parseEnvironmentFile(text: string): Record<string, string> {
  const values: Record<string, string> = {};
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = PLAIN.exec(line);
    assert.ok(m, `a line both systemd and --settings-file read alike: ${line.replace(/=.*/, '=…')}`);
    values[m[1]!] = m[2]!;
  }
  return values;
}

const needsSystemd = !existsSync(SYSTEMD_ANALYZE) && process.env.CI !== 'true' ? 'needs Debian’s systemd' : false;

test(
  'systemd-analyze verify accepts deploy/plant-store.service, without a warning',
  { skip: needsSystemd },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'plant-store-unit-'));
    try {
      writeFileSync(join(dir, 'plant-store.service'), UNIT_TEXT);
      // verify warns (exit 0) of an unknown or misplaced directive, and fails on a missing program.
      const { stdout, stderr } = await exec(SYSTEMD_ANALYZE, ['verify', '--man=no', join(dir, 'plant-store.service')]);
      assert.equal(`${stdout}${stderr}`, '');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test('systemd-analyze security rates the unit’s exposure 2.0 or less (of 10)', { skip: needsSystemd }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-unit-'));
  try {
    writeFileSync(join(dir, 'plant-store.service'), UNIT_TEXT);
    const run = exec(SYSTEMD_ANALYZE, [
      'security',
      '--offline=true',
      '--threshold=20',
      join(dir, 'plant-store.service'),
    ]);
    const { stdout } = await run.catch((error: { stdout: string }) =>
      assert.fail(error.stdout.split('\n').slice(-3).join('\n')),
    );
    assert.match(stdout, /Overall exposure level for plant-store\.service: [0-2]\.\d OK/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the unit runs as its own user, reads the settings file, reloads with SIGHUP and writes only its data folder', () => {
  assert.equal(one('User'), 'plant-store');
  assert.equal(one('EnvironmentFile'), '/etc/plant-store/plant-store.env');
  assert.match(
    one('ExecStart'),
    /^\/usr\/bin\/node \/opt\/plant-store\/bin\/plant-store\.js serve --settings-file \/etc\/plant-store\/plant-store\.env$/,
  );
  assert.equal(one('ExecReload'), '/bin/kill -HUP $MAINPID');
  assert.equal(one('KillMode'), 'mixed');
  assert.equal(one('StateDirectory'), 'plant-store');
  assert.equal(one('WorkingDirectory'), '/var/lib/plant-store');
  for (const [key, value] of Object.entries({
    NoNewPrivileges: 'yes',
    ProtectSystem: 'strict',
    PrivateTmp: 'yes',
    ProtectHome: 'yes',
    StandardOutput: 'journal',
  })) {
    assert.equal(one(key), value, key);
  }
  assert.equal(one('CapabilityBoundingSet'), '');
  // V8 writes the machine code it compiles, then runs it.
  assert.ok(!service.some(([key]) => key === 'MemoryDenyWriteExecute'));
  assert.deepEqual(directives('Install'), [['WantedBy', 'multi-user.target']]);

  const settings = parseEnvironmentFile(ENV_TEXT);
  assert.equal(
    settings.DATABASE_URL,
    'sqlite:/var/lib/plant-store/plant-store.db',
    'the database in the StateDirectory',
  );
  assert.ok(settings.WORKERS !== undefined, 'WORKERS set: a primary, which reloads on SIGHUP');
});

test('deploy/plant-store.env names every setting of docs/settings.md', () => {
  const doc = readFileSync(join(ROOT, 'docs/settings.md'), 'utf8');
  const server = doc.slice(0, doc.indexOf('## The command-line client'));
  const names = [...server.matchAll(/^\| `([A-Z][A-Z0-9_]+)` /gm)].map((m) => m[1]!);
  names.push('OTEL_EXPORTER_OTLP_ENDPOINT');
  assert.ok(names.length > 20, names.join(' '));
  for (const name of names) assert.match(ENV_TEXT, new RegExp(`^#?${name}=`, 'm'), name);
  // readSettingsFile (reload) reads the file as the test's own parser (systemd's subset) does.
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-env-'));
  try {
    writeFileSync(join(dir, 'plant-store.env'), ENV_TEXT);
    assert.deepEqual(readSettingsFile(join(dir, 'plant-store.env')), parseEnvironmentFile(ENV_TEXT));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('npm ci --omit=dev in a fresh clone stops with what docs/operations.md prints, naming the order that works', async () => {
  // The prepare step as npm runs it at the end of `npm ci --omit=dev`: no TypeScript, no dist/.
  const dir = mkdtempSync(join(tmpdir(), 'plant-store-omit-dev-'));
  scratch.push(dir);
  for (const part of ['scripts', 'package.json']) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
  const run = exec(process.execPath, ['scripts/prepare.mjs'], {
    cwd: dir,
    env: { PATH: process.env.PATH, npm_command: 'ci', npm_config_omit: 'dev' },
  });
  const failed = await run.then(
    () => assert.fail('prepare succeeded without TypeScript or dist/'),
    (error: { code: number; stderr: string }) => error,
  );
  const doc = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
  const printed = /it stops with\s+``(.+?)``/s.exec(doc);
  assert.ok(printed, 'docs/operations.md prints the message');
  assert.deepEqual({ code: failed.code, stderr: failed.stderr }, { code: 1, stderr: `${printed[1]!.trim()}\n` });
  assert.match(failed.stderr, /`npm ci`.*then.*`npm prune --omit=dev`/);
});

/** Who the service runs as here: the unit's user if this machine has it, else nobody. */
interface Account {
  name: string;
  uid: number;
  gid: number;
  group: string;
  home: string;
  shell: string;
}
async function account(): Promise<Account> {
  for (const name of ['plant-store', 'nobody']) {
    const found = await exec('getent', ['passwd', name]).catch(() => undefined);
    if (found === undefined) continue;
    const [, , uid, gid, , home, shell] = found.stdout.trim().split(':');
    const { stdout } = await exec('getent', ['group', gid!]);
    return { name, uid: Number(uid), gid: Number(gid), group: stdout.split(':')[0]!, home: home!, shell: shell! };
  }
  throw new Error('neither plant-store nor nobody is a user here');
}

// As root, a mount namespace (unshare) stands in for the unit's file-system directives before the
// program is run as the user (setpriv execs it: its pid is the service's $MAINPID, as under
// systemd). A folder that holds this checkout is left visible (a checkout in /home or /tmp).
const SANDBOX = `set -e
data=$1 keep=$2 user=$3 group=$4; shift 4
mount --bind "$data" "$data"
for m in $(awk '{print $5}' /proc/self/mountinfo); do
  case "$m" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*|"$data") ;; *) mount -o remount,bind,ro "$m" ;; esac
done
for d in /tmp /var/tmp; do case "$keep" in "$d"|"$d"/*) ;; *) mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$d" ;; esac; done
for d in /home /root /run/user; do
  [ -d "$d" ] || continue
  case "$keep" in "$d"|"$d"/*) ;; *) mount -t tmpfs -o mode=000 tmpfs "$d" ;; esac
done
cd "$data"
exec setpriv --reuid="$user" --regid="$group" --init-groups --no-new-privs --bounding-set=-all --inh-caps=-all -- "$@"`;

const running: ChildProcess[] = [];
const scratch: string[] = [];
after(() => {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

test(
  'the unit’s ExecStart, run as its user with its environment, serves; ExecReload rereads the settings; SIGTERM exits 0',
  { timeout: 120_000 },
  async (t) => {
    const user = isRoot ? await account() : undefined;
    if (user === undefined) t.diagnostic('not root: run as this user, without the mount namespace');
    else if (user.name !== 'plant-store') t.diagnostic(`no plant-store user here: run as ${user.name}`);
    // Under /var/lib as the unit's data folder is (PrivateTmp= hides /tmp); elsewhere without root.
    const top = mkdtempSync(join(isRoot ? '/var/lib' : tmpdir(), 'test-plant-store-unit-'));
    scratch.push(top);
    chmodSync(top, 0o755);
    const etc = join(top, 'etc/plant-store');
    const data = join(top, 'lib/plant-store');
    const envFile = join(etc, 'plant-store.env');
    mkdirSync(join(top, 'etc'), { mode: 0o755 });
    // StateDirectory=plant-store, StateDirectoryMode=0750: made for the user before the start.
    mkdirSync(join(top, 'lib'), { mode: 0o755 });
    mkdirSync(data, { mode: 0o750 });
    if (user) chownSync(data, user.uid, user.gid);

    // The settings, installed by docs/operations.md's printed commands: the paths and group are this test's.
    const printed = markedBlock(readFileSync(join(ROOT, 'docs/operations.md'), 'utf8'), 'install', 'settings');
    const owner = user ? `-o root -g ${user.group}` : '';
    await exec(
      'bash',
      ['-ec', printed.replaceAll('/etc/plant-store', etc).replaceAll('-o root -g plant-store', owner)],
      {
        cwd: ROOT,
      },
    );
    const installed = statSync(envFile);
    assert.equal(installed.mode & 0o777, 0o640, 'the settings file: readable by its group only');
    if (user) assert.deepEqual([installed.uid, installed.gid], [0, user.gid]);
    const port = await freePort();
    const settingsText = readFileSync(envFile, 'utf8')
      .replaceAll('/var/lib/plant-store', data)
      .replace(/^PORT=.*$/m, `PORT=${port}`);
    writeFileSync(envFile, settingsText); // the file stays as installed: root's, mode 0640
    const settings = parseEnvironmentFile(settingsText);
    assert.match(settings.SECRETS_KEY ?? '', /^[A-Za-z0-9+/]{43}=$/, 'the printed command adds a SECRETS_KEY');

    // The unit's lines, with this test's paths in place of the server's.
    const places: Record<string, string> = {
      '/etc/plant-store/plant-store.env': envFile,
      '/var/lib/plant-store': data,
      '/opt/plant-store': ROOT,
    };
    const local = (text: string): string =>
      text.replace(
        /\/etc\/plant-store\/plant-store\.env|\/var\/lib\/plant-store|\/opt\/plant-store/g,
        (path) => places[path]!,
      );
    const argv = local(one('ExecStart')).split(' ');
    if (!existsSync(argv[0]!)) {
      t.diagnostic(`${argv[0]} is missing: ${process.execPath} runs instead`);
      argv[0] = process.execPath;
    }
    const workingDirectory = local(one('WorkingDirectory'));
    assert.equal(workingDirectory, data);
    // systemd.exec(5), "Environment Variables in Spawned Processes": its own, then EnvironmentFile=.
    const env = {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      INVOCATION_ID: 'a'.repeat(32),
      STATE_DIRECTORY: data,
      ...(user ? { USER: user.name, LOGNAME: user.name, HOME: user.home, SHELL: user.shell } : {}),
      ...settings,
    };
    const child = user
      ? spawn(
          'unshare',
          [
            '--mount',
            '--propagation',
            'private',
            'sh',
            '-c',
            SANDBOX,
            'sh',
            data,
            ROOT,
            user.name,
            user.group,
            ...argv,
          ],
          {
            env,
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        )
      : spawn(argv[0]!, argv.slice(1), { cwd: workingDirectory, env, stdio: ['ignore', 'pipe', 'pipe'] });
    running.push(child);
    reapAtExit(child);
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const lines: string[] = [];
    createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
    const logged = (msg: string): Promise<Record<string, unknown>> =>
      eventually(
        async () => {
          if (child.exitCode !== null)
            throw new Error(`the service exited ${child.exitCode}: ${stderr}${lines.join('\n')}`);
          return lines.map((line) => JSON.parse(line) as Record<string, unknown>).find((entry) => entry.msg === msg);
        },
        () => `a "${msg}" line; stderr: ${stderr}`,
        60_000,
      );

    const started = await logged('started workers');
    assert.equal(started.port, port);
    const base = `http://127.0.0.1:${port}`;
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    // The database is the user's, in the data folder.
    assert.equal(statSync(join(data, 'plant-store.db')).uid, user?.uid ?? process.getuid?.());

    // A plant-store command as printed: as the service's user, with its settings, on its database.
    const command = local(markedBlock(readFileSync(join(ROOT, 'docs/operations.md'), 'utf8'), 'install', 'command'))
      .replaceAll('/usr/bin/node', argv[0]!)
      .replace('runuser -u plant-store -- ', user ? `runuser -u ${user.name} -- ` : '');
    const token = (await exec('bash', ['-ec', command], { env: { PATH: env.PATH } })).stdout.trim();
    const plants = await fetch(`${base}/plants`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(plants.status, 200);

    // A settings change, applied by `systemctl reload`: ExecReload with the service's pid.
    writeFileSync(envFile, settingsText.replace(/^#PUBLIC_URL=(.*)$/m, 'PUBLIC_URL=https://plants.example.com'));
    const [kill, ...killArgs] = one('ExecReload').replace('$MAINPID', String(child.pid)).split(' ');
    await exec(kill!, killArgs);
    await logged('reload done');
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const document = (await (await fetch(`${base}/openapi.json`)).json()) as { servers: { url: string }[] };
    assert.deepEqual(
      document.servers.map((server) => server.url),
      ['https://plants.example.com'],
    );

    // `systemctl stop`: SIGTERM to the main process (KillMode=mixed); it stops its workers and exits 0.
    child.kill('SIGTERM');
    const [code, signal] = await exited;
    assert.deepEqual({ code, signal, stderr }, { code: 0, signal: null, stderr: '' });
    // What the journal gets: JSON lines, without the secrets of the settings file.
    for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), line);
    assert.ok(!lines.join('\n').includes(settings.SECRETS_KEY!));
    assert.ok(lines.some((line) => line.includes('"msg":"all workers stopped"')));
  },
);
