import assert from 'node:assert/strict';
import { type ChildProcess, type ChildProcessByStdio, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { type TestContext, after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { readSettingsFile } from '../../src/launch.js';
import { markedBlock } from '../docs/markdown.js';
import { reapAtExit } from '../process.js';
import { eventually } from '../support/eventually.js';
import { folder, linkOrCopy, mirror } from '../support/mirror.js';
import { freePort } from '../support/postgres.js';

// deploy/plant-store.service and deploy/plant-store.env. systemd checks the unit (`systemd-analyze
// verify`, and `security --offline` for its hardening), then the service is started as the unit
// would start it, without systemd (none runs on the test machines): the settings installed by
// docs/operations.md's printed commands, the unit's ExecStart as the unit's user (plant-store when
// it exists, else nobody), with the unit's environment (systemd's own variables and the
// EnvironmentFile's), in its WorkingDirectory, without new privileges or capabilities, from a copy
// of this checkout as a server holds it at /opt/plant-store (the checkout may sit in a folder that
// user cannot enter, and is hidden from it). As root, a mount namespace stands in for
// ProtectSystem=strict (every mount read-only but the StateDirectory), PrivateTmp= and
// ProtectHome=. Its ExecStartPost returns once /readyz answers 200; the service serves, reloads the
// settings file on ExecReload's SIGHUP, and exits 0 on SIGTERM (KillMode=mixed: to the main process
// alone). Not proven here: systemd's own parsing of the EnvironmentFile (the file keeps to lines
// both parsers read alike, which is checked), the system call filter, RestrictAddressFamilies=,
// PrivateDevices=, ProtectProc= and the Protect{Kernel,Clock,Hostname,ControlGroups} directives.

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
  // systemctl start returns once the service is ready; a start slower than the wait goes on ("-").
  const wait = /^-\/usr\/bin\/node \/opt\/plant-store\/scripts\/wait-ready\.mjs --timeout ([0-9]+)s$/.exec(
    one('ExecStartPost'),
  );
  assert.ok(wait, `ExecStartPost=${one('ExecStartPost')}`);
  const startTimeout = /^([0-9]+)s$/.exec(one('TimeoutStartSec'));
  assert.ok(
    startTimeout && Number(wait[1]) < Number(startTimeout[1]),
    'the wait gives up before systemd stops the unit',
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

/**
 * What a server holds at /opt/plant-store after docs/operations.md's `git clone`, `npm ci` and
 * `npm prune --omit=dev`, made at `to` from this checkout: its files as `git ls-files` names them
 * (committed or not), the build's dist/ folders, and package-lock.json's production dependencies.
 * The unit's user runs the service from there, never from the checkout: a checkout may sit in a
 * private folder (0700: any under /root, or one made by `mktemp -d`) that no other user may enter,
 * which a server's install never does. Files are hard-linked (mirror.ts), so the copy is cheap.
 */
async function installedCopy(to: string): Promise<void> {
  for (const built of ['dist/cli.js', 'packages/client/dist/index.js'])
    assert.ok(existsSync(join(ROOT, built)), `${built} is built (npm run build)`);
  const { stdout } = await exec('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    maxBuffer: 64 << 20,
  });
  const copy = (path: string): void => {
    const source = join(ROOT, path);
    const found = lstatSync(source, { throwIfNoEntry: false });
    if (found === undefined) return; // deleted in the working tree, not committed yet
    folder(dirname(join(to, path)));
    if (found.isSymbolicLink()) symlinkSync(readlinkSync(source), join(to, path));
    else linkOrCopy(source, join(to, path));
  };
  for (const path of stdout.split('\0')) if (path !== '') copy(path);
  for (const built of ['dist', 'packages/client/dist']) mirror(join(ROOT, built), join(to, built));
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean; link?: boolean }>;
  };
  for (const [path, entry] of Object.entries(lock.packages)) {
    // Not installed here: an optional package of another platform.
    if (!path.startsWith('node_modules/') || entry.dev === true || !existsSync(join(ROOT, path))) continue;
    // A workspace is a link to its folder, copied above. A package's own node_modules/ holds
    // packages with entries of their own, or nothing to keep.
    if (entry.link === true) copy(path);
    else mirror(join(ROOT, path), join(to, path), (name) => name === 'node_modules');
  }
}

// As root, a mount namespace (unshare) stands in for the unit's file-system directives before the
// program is run as the user (setpriv execs it: its pid is the service's $MAINPID, as under
// systemd). This checkout is hidden there (an empty folder no one may enter is mounted on it,
// when /tmp's or the home folders' did not already hide it): the service must run from its
// installed copy alone, wherever the checkout sits.
const HIDE_CHECKOUT = `if [ -d "$checkout" ]; then mount -t tmpfs -o mode=000 tmpfs "$checkout"; fi`;
const SANDBOX = `set -e
data=$1 checkout=$2 user=$3 group=$4; shift 4
mount --bind "$data" "$data"
for m in $(awk '{print $5}' /proc/self/mountinfo); do
  case "$m" in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*|"$data") ;; *) mount -o remount,bind,ro "$m" ;; esac
done
for d in /tmp /var/tmp; do mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$d"; done
for d in /home /root /run/user; do
  [ -d "$d" ] || continue
  mount -t tmpfs -o mode=000 tmpfs "$d"
done
${HIDE_CHECKOUT}
cd "$data"
exec setpriv --reuid="$user" --regid="$group" --init-groups --no-new-privs --bounding-set=-all --inh-caps=-all -- "$@"`;

/** `argv` as root with this checkout hidden, as the service's user sees the machine; as it is otherwise. */
function withoutCheckout(argv: string[]): string[] {
  if (!isRoot) return argv;
  const hide = `set -e\ncheckout=$1; shift\n${HIDE_CHECKOUT}\ncd /\nexec "$@"`;
  return ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', hide, 'sh', ROOT, ...argv];
}

const running: ChildProcess[] = [];
const scratch: string[] = [];
after(() => {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
});

/** A line of the unit with the server's paths replaced by `places`' (this test's). */
function localized(text: string, places: Record<string, string>): string {
  return text.replace(
    /\/etc\/plant-store\/plant-store\.env|\/var\/lib\/plant-store|\/opt\/plant-store/g,
    (path) => places[path] ?? path,
  );
}

/** The unit's `key` command as argv, with this test's paths (systemd's "-" prefix is not part of it). */
function unitCommand(key: string, places: Record<string, string>, t?: TestContext): string[] {
  const argv = localized(one(key).replace(/^-/, ''), places).split(' ');
  if (!existsSync(argv[0]!)) {
    t?.diagnostic(`${argv[0]} is missing: ${process.execPath} runs instead`);
    argv[0] = process.execPath;
  }
  return argv;
}

/** A child whose stdout and stderr are read here. */
type Piped = ChildProcessByStdio<null, Readable, Readable>;

interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** `child` followed to its end: its exit and what it wrote. */
async function finished(child: Piped): Promise<Finished> {
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const [code, signal] = (await once(child, 'exit')) as [number | null, NodeJS.Signals | null];
  return { code, signal, stdout, stderr };
}

test(
  'the unit’s ExecStart and ExecStartPost, run as its user with its environment: ExecStartPost returns once the service is ready; it serves; ExecReload rereads the settings; SIGTERM exits 0',
  { timeout: 180_000 },
  async (t) => {
    const user = isRoot ? await account() : undefined;
    if (user === undefined) t.diagnostic('not root: run as this user, without the mount namespace');
    else if (user.name !== 'plant-store') t.diagnostic(`no plant-store user here: run as ${user.name}`);
    // Under /var/lib as the unit's data folder is (PrivateTmp= hides /tmp); elsewhere without root.
    const top = mkdtempSync(join(isRoot ? '/var/lib' : tmpdir(), 'test-plant-store-unit-'));
    scratch.push(top);
    chmodSync(top, 0o755);
    const opt = join(top, 'opt/plant-store');
    const etc = join(top, 'etc/plant-store');
    const data = join(top, 'lib/plant-store');
    const envFile = join(etc, 'plant-store.env');
    // docs/operations.md's step 2: the code, built and pruned, where every user may read it.
    await installedCopy(opt);
    mkdirSync(join(top, 'etc'), { mode: 0o755 });
    // StateDirectory=plant-store, StateDirectoryMode=0750: made for the user before the start.
    mkdirSync(join(top, 'lib'), { mode: 0o755 });
    mkdirSync(data, { mode: 0o750 });
    if (user) chownSync(data, user.uid, user.gid);

    // The settings, installed by docs/operations.md's printed commands, in the installed code's
    // folder as printed: the paths and group are this test's.
    const printed = markedBlock(readFileSync(join(ROOT, 'docs/operations.md'), 'utf8'), 'install', 'settings');
    const owner = user ? `-o root -g ${user.group}` : '';
    await exec(
      'bash',
      ['-ec', printed.replaceAll('/etc/plant-store', etc).replaceAll('-o root -g plant-store', owner)],
      { cwd: opt },
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
      '/opt/plant-store': opt,
    };
    const argv = unitCommand('ExecStart', places, t);
    const workingDirectory = localized(one('WorkingDirectory'), places);
    assert.equal(workingDirectory, data);
    // systemd.exec(5), "Environment Variables in Spawned Processes": its own, then EnvironmentFile=.
    const env: Record<string, string> = {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      INVOCATION_ID: 'a'.repeat(32),
      STATE_DIRECTORY: data,
      ...(user ? { USER: user.name, LOGNAME: user.name, HOME: user.home, SHELL: user.shell } : {}),
      ...settings,
    };
    /** A command of the unit, spawned as systemd would: as its user, in its sandbox and folder. */
    const asUnit = (command: string[], extra: Record<string, string> = {}): Piped => {
      const options = { env: { ...env, ...extra }, stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'] };
      const spawned = user
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
              ...command,
            ],
            options,
          )
        : spawn(command[0]!, command.slice(1), { ...options, cwd: workingDirectory });
      running.push(spawned);
      reapAtExit(spawned);
      return spawned;
    };
    const child = asUnit(argv);
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

    // `systemctl start` (and `enable --now`): ExecStartPost once ExecStart's process runs, with
    // $MAINPID; systemctl returns when it has. The service exiting first would fail the start.
    const post = finished(asUnit(unitCommand('ExecStartPost', places), { MAINPID: String(child.pid) }));
    const first = await Promise.race([
      post.then((result) => ({ post: result })),
      exited.then(([code, signal]) => ({ service: code ?? signal })),
    ]);
    if (!('post' in first))
      assert.fail(
        `the service exited (${String(first.service)}) before ExecStartPost returned: ${stderr}${lines.join('\n')}`,
      );
    assert.deepEqual({ code: first.post.code, stderr: first.post.stderr }, { code: 0, stderr: '' });
    // docs/operations.md's next step, `curl -fsS http://127.0.0.1:8080/readyz`, at once.
    const base = `http://127.0.0.1:${port}`;
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    const ready = JSON.parse(first.post.stdout) as Record<string, unknown>;
    assert.deepEqual([ready.level, ready.url], [30, `${base}/readyz`], first.post.stdout);

    const started = await logged('started workers');
    assert.equal(started.port, port);
    // The database is the user's, in the data folder.
    assert.equal(statSync(join(data, 'plant-store.db')).uid, user?.uid ?? process.getuid?.());

    // A plant-store command as printed: as the service's user, with its settings, on its database.
    const command = localized(
      markedBlock(readFileSync(join(ROOT, 'docs/operations.md'), 'utf8'), 'install', 'command'),
      places,
    )
      .replaceAll('/usr/bin/node', argv[0]!)
      .replace('runuser -u plant-store -- ', user ? `runuser -u ${user.name} -- ` : '');
    const [shell, ...shellArgs] = withoutCheckout(['bash', '-ec', command]);
    const token = (await exec(shell!, shellArgs, { cwd: '/', env: { PATH: env.PATH } })).stdout.trim();
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

/** The unit's ExecStartPost run from this checkout on `env`'s HOST and PORT, its wait bounded by `timeout`. */
function waitForReady(env: Record<string, string>, timeout: string): Promise<Finished> {
  const argv = unitCommand('ExecStartPost', { '/opt/plant-store': ROOT });
  assert.match(argv.at(-1)!, /^[0-9]+s$/);
  argv[argv.length - 1] = timeout;
  const child = spawn(argv[0]!, argv.slice(1), {
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  reapAtExit(child);
  return finished(child);
}

/** A stand-in for the service's /readyz on 127.0.0.1: `status(n)` is the n-th answer's (from 0). */
async function readyz(status: (n: number) => number): Promise<{ port: number; answers: number[]; close(): void }> {
  const answers: number[] = [];
  const server = createServer((request, response) => {
    const code = status(answers.length);
    answers.push(code);
    const body = code === 200 ? { status: 'ready' } : { error: code, message: 'the database is unreachable' };
    response.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  return { port, answers, close: () => server.close() };
}

test('ExecStartPost’s wait asks /readyz again through 503s and exits 0 once it answered 200, asking loopback for HOST=0.0.0.0', async () => {
  const service = await readyz((n) => (n < 3 ? 503 : 200));
  try {
    // $MAINPID names a process that runs (this one): the wait goes on.
    const result = await waitForReady(
      { HOST: '0.0.0.0', PORT: String(service.port), MAINPID: String(process.pid) },
      '60s',
    );
    assert.deepEqual({ code: result.code, stderr: result.stderr }, { code: 0, stderr: '' });
    assert.deepEqual(service.answers, [503, 503, 503, 200]);
    const line = JSON.parse(result.stdout) as Record<string, unknown>;
    assert.deepEqual(
      [line.level, line.msg, line.url],
      [30, 'the service is ready: /readyz answered 200', `http://127.0.0.1:${service.port}/readyz`],
    );
  } finally {
    service.close();
  }
});

test('ExecStartPost’s wait exits 1 when its bound has passed without a 200, or the service has exited, saying what /readyz answered last', async (t) => {
  await t.test('a service that answers 503', async () => {
    const service = await readyz(() => 503);
    try {
      const result = await waitForReady({ PORT: String(service.port) }, '1s');
      const url = `http://127.0.0.1:${service.port}/readyz`;
      assert.equal(result.code, 1, result.stderr);
      assert.ok(service.answers.length > 0);
      assert.equal(
        result.stderr,
        `plant-store wait-ready: GET ${url} did not answer 200 within 1 s; its last answer: 503 the database is unreachable\n`,
      );
      const line = JSON.parse(result.stdout) as Record<string, unknown>;
      assert.deepEqual([line.level, line.url, line.last], [50, url, '503 the database is unreachable']);
    } finally {
      service.close();
    }
  });
  await t.test('nothing listening', async () => {
    const port = await freePort();
    const result = await waitForReady({ HOST: '127.0.0.1', PORT: String(port) }, '1s');
    assert.equal(result.code, 1, result.stderr);
    assert.match(
      result.stderr,
      new RegExp(`within 1 s; its last answer: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}\\n$`),
    );
  });
  await t.test('the main process gone ($MAINPID) while /readyz answers 503: at once, not after the bound', async () => {
    const service = await readyz(() => 503);
    const gone = spawn(process.execPath, ['-e', ''], { stdio: 'ignore' });
    await once(gone, 'exit');
    try {
      const result = await waitForReady({ PORT: String(service.port), MAINPID: String(gone.pid) }, '600s');
      assert.equal(result.code, 1, result.stderr);
      assert.equal(
        result.stderr,
        `plant-store wait-ready: the service (pid ${gone.pid}) exited before GET http://127.0.0.1:${service.port}/readyz answered 200; its own lines say why\n`,
      );
      const line = JSON.parse(result.stdout) as Record<string, unknown>;
      assert.deepEqual([line.level, line.msg, line.mainPid], [50, 'the service exited before it was ready', gone.pid]);
    } finally {
      service.close();
    }
  });
  await t.test('settings that do not parse (the service does not start either)', async () => {
    const result = await waitForReady({ PORT: 'eighty' }, '1s');
    assert.equal(result.code, 2);
    assert.match(result.stderr, /the settings do not parse .*PORT must be a number/);
  });
});
