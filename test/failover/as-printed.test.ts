import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  chownSync,
  closeSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer as createHttpServer, get } from 'node:http';
import { type AddressInfo, type Server, createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { markedBlock } from '../docs/markdown.js';
import { reapAtExit, runCliProcess } from '../process.js';
import { eventually } from '../support/eventually.js';
import { freePort } from '../support/postgres.js';
import {
  type SharedMemorySegment,
  alive,
  clusterProcesses,
  removeSharedMemory,
  sharedMemoryOf,
  signalGroup,
} from './cluster.js';

// docs/high-availability.md as an operator follows it: the blocks it marks `<!-- ha: … -->`, run
// by bash in the page's order, each on the machine the page names, up to a plant created (and
// deleted) by the service through each way of connecting: every node in a multi-host URL, then
// HAProxy. Every machine lives on this one, and the text of the blocks and of the deploy/ files is
// changed in these ways only, so that nothing of it reaches the machine's own PostgreSQL on 5432
// or its /etc:
// - addresses: 10.0.0.N becomes 127.0.0.N (loopback; Patroni refuses 127.0.0.1 itself as a
//   connect_address), and a wildcard `listen` (0.0.0.0:P) or `bind` (*:P) the machine's own;
// - ports: 5432, 8008, 2379, 2380, 5000, 5001 and 8080 become free ports of the test's own, the
//   same on every machine (each machine has an address of its own);
// - paths: /etc, /var and /run become a folder per machine, holding what the packages make there;
//   the deploy/ files are copied into a checkout per machine with the same changes;
//   /opt/plant-store is this checkout and /usr/bin/node this Node.
// What needs a real machine is stood in for, on the PATH of the blocks: `apt-get install` checks
// that the packages it names are installed; `systemctl` runs the unit's ExecStart (Debian's units
// in /lib/systemd/system, and deploy/plant-store.service) as its User, with its Environment and
// EnvironmentFile, then its ExecStartPost, waiting for a Type=notify unit to serve as systemd waits
// for its READY=1; `systemctl disable --now postgresql` closes a stand-in listener on the node's
// PostgreSQL port, where installing postgresql-15 started a cluster. The service, and the commands
// run as its user (`runuser -u plant-store`), run as root: its user and its sandbox are
// test/deploy/systemd.test.ts's, and operations.md's settings are installed without their owner.
// The copy of the password file from pg1 to pg2, which the page says in words, is a copy here.
// pg3 is not started (its steps are pg2's, with its name and address): three etcd members, two
// Patroni nodes, HAProxy and the service. Patroni's timings are the printed ones (ttl 30,
// loop_wait 10).

const ROOT = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');
const DOC = readFileSync(join(ROOT, 'docs/high-availability.md'), 'utf8');
const OPERATIONS = readFileSync(join(ROOT, 'docs/operations.md'), 'utf8');
const printed = (mark: string): string => markedBlock(DOC, 'ha', mark);

const NEEDED = [
  '/usr/bin/patroni',
  '/usr/bin/patronictl',
  '/usr/bin/etcd',
  '/usr/sbin/haproxy',
  '/usr/lib/postgresql/15/bin/postgres',
  '/usr/bin/psql',
];
const missing = NEEDED.filter((path) => !existsSync(path));
const skip =
  process.getuid?.() !== 0
    ? 'needs root: the units run as their users (postgres, etcd)'
    : missing.length > 0 && process.env.CI !== 'true'
      ? `needs ${missing.join(', ')}: apt-get install postgresql-15 patroni etcd-server haproxy`
      : false;

/** systemd's PATH for services, and the blocks' after the stand-ins. */
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/** systemd's default for a start (DefaultTimeoutStartSec) and a stop. */
const START_MS = 90_000;
const STOP_MS = 30_000;
/** The printed ports, each given a free one of the test's own. */
const PRINTED_PORTS = ['5432', '8008', '2379', '2380', '5000', '5001', '8080'];

interface Machine {
  readonly name: string;
  /** Its loopback address, standing in for 10.0.0.N. */
  readonly address: string;
  /** Its /etc, /var and /run are under this folder. */
  readonly root: string;
  /** Where its blocks run: the deploy/ files as the page names them. */
  readonly checkout: string;
}

interface Service {
  readonly unit: string;
  readonly child: ChildProcess;
  readonly exited: Promise<unknown>;
  readonly log: string;
  /** systemd's KillMode: `process` leaves the main process's children to it. */
  readonly killMode: string;
}

const dir = mkdtempSync(join(tmpdir(), 'plant-ha-'));
chmodSync(dir, 0o755); // the units' users (postgres, etcd) go through it
const ports = new Map<string, number>();
const machines = new Map<string, Machine>();
const services = new Map<string, Service>();
/** Stand-ins for the PostgreSQL cluster that installing postgresql-15 started, per node. */
const debianPostgres = new Map<string, Server>();
/** Every systemctl and apt-get the blocks ran, as `machine: command`. */
const calls: string[] = [];
let control: ReturnType<typeof createHttpServer> | undefined;

const account = (name: string): { uid: number; gid: number; home: string; shell: string } | undefined => {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith(`${name}:`));
  if (!line) return undefined;
  const [, , uid, gid, , home, shell] = line.split(':');
  return { uid: Number(uid), gid: Number(gid), home: home!, shell: shell! };
};

/** The printed text as it reads on `m`: addresses, ports and paths of the test's own (the header). */
function local(text: string, m: Machine): string {
  return text
    .replace(/\b0\.0\.0\.0:(\d+)/g, `${m.address}:$1`)
    .replace(/(\bbind\s+)\*:(\d+)/g, `$1${m.address}:$2`)
    .replace(/\b10\.0\.0\.(\d+)/g, '127.0.0.$1')
    .replace(/\b10\\\.0\\\.0\\\.(\d+)/g, '127\\.0\\.0\\.$1')
    .replace(/(:|\bport\s+|^PORT=|\s-p\s+)(\d{4})\b/gm, (all, before: string, port: string) =>
      ports.has(port) ? `${before}${ports.get(port)}` : all,
    )
    .replace(/(?<![\w./])\/(etc|var|run)\//g, `${m.root}/$1/`)
    .replaceAll('/opt/plant-store', ROOT)
    .replaceAll('/usr/bin/node', process.execPath);
}

/** The output a block prints under its commands (`# → …` and the `#   …` lines under it). */
function printedOutput(block: string): string[] {
  const found: string[] = [];
  let under = false;
  for (const line of block.split('\n')) {
    const first = /^# → (.*)$/.exec(line);
    const more = /^# {3}(.*)$/.exec(line);
    if (first) found.push(first[1]!);
    else if (more && under) found.push(more[1]!);
    under = first !== null || (more !== null && under);
  }
  return found;
}

function tail(file: string, lines = 25): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Runs `script` with bash on `m` (`set -euo pipefail`, the stand-ins first on the PATH); fails past `ms`. */
function run(m: Machine, script: string, env: NodeJS.ProcessEnv = {}, ms = 120_000): Promise<string> {
  const child = spawn('bash', ['-c', `set -euo pipefail\n${script}`], {
    cwd: m.checkout,
    env: {
      PATH: `${join(dir, 'stand-ins')}:${SYSTEM_PATH}`,
      HOME: join(m.root, 'root'),
      LANG: 'C.UTF-8',
      PLANT_MACHINE: m.name,
      ...env,
    },
    detached: true, // its own process group: a block past its time is killed whole
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  reapAtExit(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      killGroup(child.pid!);
      reject(new Error(`on ${m.name}, still running after ${ms} ms:\n${script}\n${stdout}${stderr}`));
    }, ms);
    child.once('close', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(stdout);
      else reject(new Error(`on ${m.name}, exit ${code}:\n${script}\n--- stdout:\n${stdout}--- stderr:\n${stderr}`));
    });
  });
}

/** A printed block, run on `m` as the page prints it there; its printed output must come, in order. */
async function runPrinted(m: Machine, block: string, env: NodeJS.ProcessEnv = {}): Promise<string> {
  const text = local(block, m);
  const stdout = await run(m, text, env);
  let at = 0;
  for (const want of printedOutput(text)) {
    const found = stdout.indexOf(want, at);
    assert.ok(
      found >= 0,
      `on ${m.name}:\n${text}\nshould print ${JSON.stringify(want)} (in order), printed:\n${stdout}`,
    );
    at = found + want.length;
  }
  return stdout;
}

/** A unit file's [Unit] and [Service] directives: name → values, in order. */
function directives(text: string): Map<string, string[]> {
  const found = new Map<string, string[]>();
  let section = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) section = header[1]!;
    else if (section === 'Unit' || section === 'Service') {
      const eq = line.indexOf('=');
      const key = line.slice(0, eq);
      found.set(key, [...(found.get(key) ?? []), line.slice(eq + 1)]);
    }
  }
  return found;
}

/** Words as systemd splits a command line or an Environment= line: on blanks, "…" kept whole. */
const words = (line: string): string[] =>
  [...line.matchAll(/"((?:[^"\\]|\\.)*)"|(\S+)/g)].map((m) => (m[1] !== undefined ? m[1] : m[2]!));

/** An EnvironmentFile as systemd reads it: NAME=value lines, comments and blanks skipped, quotes taken off. */
function environmentFile(path: string): Record<string, string> {
  const values: Record<string, string> = {};
  for (const raw of readFileSync(path, 'utf8').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const eq = line.indexOf('=');
    if (eq > 0) values[line.slice(0, eq).trim()] = line.slice(eq + 1).replace(/^(["'])(.*)\1$/, '$2');
  }
  return values;
}

/** A unit command line with $NAME (split into words) and ${NAME} (one word) expanded, and its prefix. */
function command(line: string, env: Record<string, string>): { argv: string[]; mayFail: boolean } {
  const prefix = /^[-@:+!]*/.exec(line)![0];
  const argv = words(line.slice(prefix.length)).flatMap((word) => {
    const whole = /^\$([A-Za-z_]\w*)$/.exec(word);
    if (whole) return (env[whole[1]!] ?? '').split(/\s+/).filter((w) => w !== '');
    return [word.replace(/\$\{([A-Za-z_]\w*)\}/g, (_, name: string) => env[name] ?? '')];
  });
  return { argv, mayFail: prefix.includes('-') };
}

/** What says a Type=notify unit is ready, as its READY=1 would (systemd's notification socket is not here). */
async function notified(m: Machine, unit: string, service: Service): Promise<void> {
  const probes: Record<string, () => Promise<boolean>> = {
    etcd: async () => {
      const answer = await fetch(`http://${m.address}:${ports.get('2379')}/health`, {
        signal: AbortSignal.timeout(1000),
      }).catch(() => undefined);
      return answer?.status === 200;
    },
    haproxy: () =>
      new Promise<boolean>((resolve) => {
        const socket = createConnection(ports.get('5000')!, m.address);
        const done = (listening: boolean): void => {
          socket.destroy();
          resolve(listening);
        };
        socket.once('connect', () => done(true)).once('error', () => done(false));
        socket.setTimeout(1000, () => done(false));
      }),
  };
  const probe = probes[unit];
  if (!probe) throw new Error(`the test knows no readiness of the notify unit ${unit}`);
  await eventually(
    async () => {
      if (service.child.exitCode !== null || service.child.signalCode !== null)
        throw new Error(`${unit} on ${m.name} exited while starting:\n${tail(service.log)}`);
      return (await probe()) ? true : undefined;
    },
    () => `${unit} on ${m.name} ready (log:\n${tail(service.log)})`,
    START_MS,
  );
}

/** `systemctl start <unit>` on `m`: the unit's ExecStart as its User, then its ExecStartPost. */
async function startUnit(m: Machine, unit: string): Promise<void> {
  const key = `${m.name}/${unit}`;
  if (services.has(key)) return;
  if (unit === 'postgresql') throw new Error('the page never starts Debian’s postgresql service');
  // deploy/plant-store.service as operations.md copies it to /etc/systemd/system; Debian's own units otherwise.
  const file =
    unit === 'plant-store' ? join(m.checkout, 'deploy/plant-store.service') : `/lib/systemd/system/${unit}.service`;
  const raw = readFileSync(file, 'utf8').replace(/%[HpNi]/g, (s) => (s === '%H' ? m.name : s === '%i' ? '' : unit));
  const unitText = unit === 'plant-store' ? raw : local(raw, m);
  const d = directives(unitText);
  const one = (key: string): string | undefined => d.get(key)?.at(-1);
  for (const path of d.get('ConditionPathExists') ?? [])
    assert.ok(
      existsSync(path),
      `${unit} on ${m.name}: ConditionPathExists=${path} is missing, systemd would not start it`,
    );

  // The service runs as root here: its own user and sandbox are test/deploy/systemd.test.ts's.
  const user = unit === 'plant-store' ? undefined : one('User');
  const who = user ? account(user) : undefined;
  const env: Record<string, string> = { PATH: SYSTEM_PATH, LANG: 'C.UTF-8' };
  if (user && who) Object.assign(env, { USER: user, LOGNAME: user, HOME: local(who.home, m), SHELL: who.shell });
  for (const line of d.get('Environment') ?? [])
    for (const assignment of words(line)) {
      const eq = assignment.indexOf('=');
      env[assignment.slice(0, eq)] = assignment.slice(eq + 1);
    }
  for (const line of d.get('EnvironmentFile') ?? []) {
    const path = line.replace(/^-/, '');
    if (existsSync(path)) Object.assign(env, environmentFile(path));
    else assert.ok(line.startsWith('-'), `${unit} on ${m.name}: EnvironmentFile=${path} is missing`);
  }
  const state = one('StateDirectory');
  if (state) {
    const path = join(m.root, 'var/lib', state);
    mkdirSync(path, { recursive: true, mode: Number.parseInt(one('StateDirectoryMode') ?? '0755', 8) });
    if (who) chownSync(path, who.uid, who.gid);
    env.STATE_DIRECTORY = path;
  }
  const options = {
    env,
    cwd: one('WorkingDirectory') ?? '/',
    ...(who ? { uid: who.uid, gid: who.gid } : {}),
  };

  const log = join(m.root, 'log', `${unit}.log`);
  const start = command(one('ExecStart')!, env);
  const fd = openSync(log, 'a');
  let child: ChildProcess;
  try {
    child = spawn(start.argv[0]!, start.argv.slice(1), { ...options, detached: true, stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd);
  }
  reapAtExit(child);
  const service: Service = {
    unit,
    child,
    exited: once(child, 'exit').catch(() => undefined),
    log,
    killMode: one('KillMode') ?? 'control-group',
  };
  services.set(key, service);
  if (one('Type') === 'notify') await notified(m, unit, service);
  for (const line of d.get('ExecStartPost') ?? []) {
    const post = command(line, env);
    const code = await new Promise<number | null>((resolve) => {
      const fd2 = openSync(log, 'a');
      const step = spawn(post.argv[0]!, post.argv.slice(1), { ...options, stdio: ['ignore', fd2, fd2] });
      closeSync(fd2);
      reapAtExit(step);
      const timer = setTimeout(() => step.kill('SIGKILL'), START_MS);
      step.once('exit', (exit) => {
        clearTimeout(timer);
        resolve(exit);
      });
    });
    assert.ok(code === 0 || post.mayFail, `${unit} on ${m.name}: ExecStartPost exited ${code}:\n${tail(log)}`);
  }
}

/**
 * SIGKILL to the process group a service was started as (spawned detached: its pid is the group's
 * id), which outlives its first process while any other is left (HAProxy's worker, Node's workers).
 */
function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // nothing left of it
  }
}

/** `systemctl stop <unit>`: SIGTERM to the main process, then (KillMode permitting) SIGKILL to what is left. */
async function stopUnit(m: Machine, unit: string): Promise<void> {
  if (unit === 'postgresql') {
    const standIn = debianPostgres.get(m.name);
    assert.ok(standIn, `there is no Debian PostgreSQL on ${m.name}`);
    await new Promise((resolve) => standIn.close(resolve));
    debianPostgres.delete(m.name);
    return;
  }
  const key = `${m.name}/${unit}`;
  const service = services.get(key);
  if (!service) return;
  const pid = service.child.pid!;
  if (service.child.exitCode === null && service.child.signalCode === null) service.child.kill('SIGTERM');
  const timer = setTimeout(() => killGroup(pid), STOP_MS);
  await service.exited;
  clearTimeout(timer);
  if (service.killMode !== 'process') killGroup(pid);
  services.delete(key);
}

/** What `systemctl <args>` does on `m` (the verbs the page uses). */
async function systemctl(m: Machine, args: string[]): Promise<void> {
  const [verb, ...rest] = args;
  const now = rest.includes('--now');
  for (const unit of rest.filter((arg) => !arg.startsWith('-')).map((name) => name.replace(/\.service$/, ''))) {
    if (verb === 'enable') {
      if (now) await startUnit(m, unit);
    } else if (verb === 'disable') {
      if (now) await stopUnit(m, unit);
    } else if (verb === 'start') await startUnit(m, unit);
    else if (verb === 'stop') await stopUnit(m, unit);
    else if (verb === 'restart') {
      await stopUnit(m, unit);
      await startUnit(m, unit);
    } else throw new Error(`systemctl ${args.join(' ')}: a verb the test does not stand in for`);
  }
}

/** `apt-get install -y <packages>`: each must be installed here (the test installs nothing). */
function aptGet(args: string[]): void {
  assert.equal(args[0], 'install', `apt-get ${args.join(' ')}`);
  for (const name of args.slice(1).filter((arg) => !arg.startsWith('-'))) {
    let status = '';
    try {
      status = execFileSync('dpkg-query', ['-W', '-f=${Status}', name], { encoding: 'utf8', stdio: 'pipe' });
    } catch {
      status = 'unknown';
    }
    assert.equal(status, 'install ok installed', `the page installs ${name}, which is not installed here`);
  }
}

/** A folder of `m`, as a package makes it (owner and mode). */
function folder(m: Machine, path: string, owner?: string, mode = 0o755): string {
  const full = join(m.root, path);
  mkdirSync(full, { recursive: true });
  chmodSync(full, mode);
  const who = owner ? account(owner) : undefined;
  if (who) chownSync(full, who.uid, who.gid);
  return full;
}

function machine(name: string, address: string): Machine {
  const root = join(dir, name);
  const m: Machine = { name, address, root, checkout: join(root, 'checkout') };
  for (const path of ['etc/default', 'var/lib', 'var/run', 'run', 'log', 'root']) folder(m, path);
  // The checkout's deploy/ files, as this machine reads them.
  const copy = (from: string, to: string): void => {
    mkdirSync(to, { recursive: true });
    for (const entry of readdirSync(from)) {
      const source = join(from, entry);
      if (statSync(source).isDirectory()) copy(source, join(to, entry));
      else writeFileSync(join(to, entry), local(readFileSync(source, 'utf8'), m));
    }
  };
  copy(join(ROOT, 'deploy'), join(m.checkout, 'deploy'));
  machines.set(name, m);
  return m;
}

/** Whether any process is left in the process group `pgid` (a postmaster leads its own). */
function groupLives(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Everything left, SIGKILLed at once (the exit's way): services, postmasters, whatever names the folder. */
function killNow(): void {
  const segments: SharedMemorySegment[] = [];
  const postmasters: number[] = [];
  for (const service of services.values()) if (service.child.pid) killGroup(service.child.pid);
  for (const m of machines.values()) {
    const data = join(m.root, 'var/lib/postgresql/15/patroni');
    try {
      const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
      const segment = sharedMemoryOf(data);
      if (pid > 0 && alive(pid)) {
        signalGroup(pid, 'SIGKILL');
        postmasters.push(pid);
        if (segment) segments.push(segment);
      }
    } catch {
      // no postmaster on this machine
    }
  }
  for (const pid of clusterProcesses(dir)) signalGroup(pid, 'SIGKILL');
  // A SIGKILLed postmaster's children, in its process group, hold its shared memory until they are gone.
  const left = (): boolean => clusterProcesses(dir).length > 0 || postmasters.some(groupLives);
  for (let i = 0; i < 100 && left(); i++) execFileSync('sleep', ['0.02']);
  for (const segment of segments) removeSharedMemory(segment);
  services.clear();
}
process.once('exit', () => {
  killNow();
  rmSync(dir, { recursive: true, force: true });
});
// Interrupted (Ctrl-C, a runner's SIGTERM), the process ends without its 'exit' event: the same,
// then the signal again, now with its default action.
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => {
    killNow();
    rmSync(dir, { recursive: true, force: true });
    process.kill(process.pid, sig);
  });

/**
 * As an operator stops it: the service, HAProxy, the replica, the leader (Patroni stops its
 * PostgreSQL), etcd. Run as the test's own after-hook, which comes before the file's: reapAtExit's
 * (test/process.ts) SIGKILLs every process the file started, Patroni too, whose PostgreSQL would
 * then be left to killNow.
 */
async function stopAll(): Promise<void> {
  const order = ['plant-store', 'haproxy', 'patroni', 'etcd'];
  const stopping = [...services.keys()].sort(
    (a, b) => order.indexOf(a.split('/')[1]!) - order.indexOf(b.split('/')[1]!) || b.localeCompare(a),
  );
  for (const key of stopping) {
    const [name, unit] = key.split('/');
    await stopUnit(machines.get(name!)!, unit!).catch(() => {});
  }
}

after(() => {
  for (const standIn of debianPostgres.values()) standIn.close();
  control?.close();
  control?.closeAllConnections();
  killNow();
  rmSync(dir, { recursive: true, force: true });
});

test(
  'docs/high-availability.md as printed: etcd, Patroni, HAProxy, the role and database, a plant created through each way of connecting',
  { skip, timeout: 600_000 },
  async (t) => {
    t.after(stopAll);
    const began = Date.now();
    const step = (what: string): void => t.diagnostic(`${((Date.now() - began) / 1000).toFixed(1)} s: ${what}`);
    for (const port of PRINTED_PORTS) {
      let free = await freePort();
      while ([...ports.values()].includes(free)) free = await freePort();
      ports.set(port, free);
    }
    t.diagnostic(`ports: ${[...ports].map(([printedPort, own]) => `${printedPort} → ${own}`).join(', ')}`);

    // The stand-ins, which ask this process (a machine's name, the command and its arguments).
    control = createHttpServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        const [name, what, ...args] = Buffer.concat(chunks).toString('utf8').replace(/\0$/, '').split('\0');
        const m = machines.get(name!);
        calls.push(`${name}: ${what} ${args.join(' ')}`);
        const done =
          m === undefined
            ? Promise.reject(new Error(`no machine ${name}`))
            : what === 'systemctl'
              ? systemctl(m, args)
              : Promise.resolve(aptGet(args));
        done.then(
          () => response.end(),
          (error: Error) => response.writeHead(500).end(`${what} ${args.join(' ')}: ${error.message}\n`),
        );
      });
    });
    control.listen(0, '127.0.0.1');
    await once(control, 'listening');
    const controlPort = (control.address() as AddressInfo).port;
    const standIns = join(dir, 'stand-ins');
    mkdirSync(standIns);
    for (const name of ['systemctl', 'apt-get'])
      writeFileSync(
        join(standIns, name),
        `#!/bin/sh\n# ${name} as test/failover/as-printed.test.ts stands in for it (its header)\n` +
          `printf '%s\\0' "$PLANT_MACHINE" ${name} "$@" | curl -sS --fail-with-body --max-time 200 --data-binary @- http://127.0.0.1:${controlPort}/\n`,
        { mode: 0o755 },
      );
    writeFileSync(
      join(standIns, 'runuser'),
      "#!/bin/sh\n# runuser -u plant-store -- …: as root, as the service runs here (the test's header)\n" +
        'if [ "$1" = -u ] && [ "$2" = plant-store ] && [ "$3" = -- ]; then shift 3; exec "$@"; fi\n' +
        'exec /usr/sbin/runuser "$@"\n',
      { mode: 0o755 },
    );

    const etcds = ['etcd1', 'etcd2', 'etcd3'].map((name, i) => machine(name, `127.0.0.${21 + i}`));
    const pg1 = machine('pg1', '127.0.0.11');
    const pg2 = machine('pg2', '127.0.0.12');
    const haproxy = machine('haproxy', '127.0.0.31');
    const app = machine('app', '127.0.0.41');
    for (const m of etcds) {
      folder(m, 'var/lib/etcd', 'etcd', 0o700);
      if (existsSync('/etc/default/etcd')) copyFileSync('/etc/default/etcd', join(m.root, 'etc/default/etcd'));
    }
    for (const m of [pg1, pg2]) {
      folder(m, 'etc/patroni');
      folder(m, 'var/lib/postgresql', 'postgres');
      folder(m, 'var/lib/postgresql/15', 'postgres');
      folder(m, 'var/run/postgresql', 'postgres', 0o2775);
      // Installing postgresql-15 started the cluster 15/main on the node's PostgreSQL port.
      const standIn = createServer((socket) => socket.destroy());
      standIn.listen(ports.get('5432'), m.address);
      await once(standIn, 'listening');
      debianPostgres.set(m.name, standIn);
    }
    folder(haproxy, 'etc/haproxy');
    folder(haproxy, 'run/haproxy', 'haproxy', 0o2775);

    // 1. The packages, and Debian's own PostgreSQL stopped.
    for (const m of [pg1, pg2]) await runPrinted(m, printed('packages pg'));
    assert.equal(debianPostgres.size, 0, 'the page stops Debian’s PostgreSQL on every node');
    for (const m of etcds) await runPrinted(m, printed('packages etcd'));
    await runPrinted(haproxy, printed('packages haproxy'));
    step('packages');

    // 2. etcd: the three members' configurations, started together.
    for (const m of etcds) await runPrinted(m, printed('etcd config'));
    await runPrinted(etcds[1]!, printed('etcd etcd2'));
    await runPrinted(
      etcds[2]!,
      printed('etcd etcd2').replaceAll('etcd2', 'etcd3').replaceAll('10.0.0.22', '10.0.0.23'),
    );
    await Promise.all(etcds.map((m) => runPrinted(m, printed('etcd start'))));
    await runPrinted(etcds[0]!, printed('etcd health'));
    step('etcd: three members');

    // 3. Patroni: the passwords made on pg1 and copied to pg2, the configurations, pg1 then pg2.
    await runPrinted(pg1, printed('patroni passwords'));
    const passwords = join(pg1.root, 'etc/patroni_env.conf');
    assert.equal(statSync(passwords).mode & 0o777, 0o600, 'the password file: root’s alone');
    copyFileSync(passwords, join(pg2.root, 'etc/patroni_env.conf'));
    chmodSync(join(pg2.root, 'etc/patroni_env.conf'), 0o600);
    for (const m of [pg1, pg2]) await runPrinted(m, printed('patroni config'));
    await runPrinted(pg2, printed('patroni pg2'));
    const list = (m: Machine): Promise<string> => runPrinted(m, printed('patroni list'));
    const row = (table: string, member: string): string =>
      table.split('\n').find((line) => line.startsWith(`| ${member} `)) ?? '';
    let table = '';
    await runPrinted(pg1, printed('patroni start'));
    await eventually(
      async () => {
        table = await list(pg1).catch((error: Error) => error.message);
        return /\| Leader\s+\| running\s+\|/.test(row(table, 'pg1')) ? true : undefined;
      },
      () => `pg1 leading (patronictl list:\n${table}\npatroni:\n${tail(join(pg1.root, 'log/patroni.log'))})`,
      180_000,
    );
    step('pg1 leads');
    await runPrinted(pg2, printed('patroni start'));
    await eventually(
      async () => {
        table = await list(pg2).catch((error: Error) => error.message);
        return /\| (Sync Standby|Replica)\s+\| (running|streaming)\s+\|/.test(row(table, 'pg2')) ? true : undefined;
      },
      () => `pg2 a replica (patronictl list:\n${table}\npatroni:\n${tail(join(pg2.root, 'log/patroni.log'))})`,
      180_000,
    );
    t.diagnostic(`patronictl list:\n${table}`);
    step('pg2 a replica');

    // 4. The role and the database, from pg1.
    const made = await runPrinted(pg1, printed('role'));
    const password = /^plant's password: ([0-9a-f]{48})$/m.exec(made)?.[1];
    assert.ok(password, `the role step prints the password:\n${made}`);
    step('role and database');

    // 5. HAProxy.
    await runPrinted(haproxy, printed('haproxy'));
    step('haproxy');

    // 6 and 7. The service's settings, installed as operations.md prints (without its owner: the
    // service runs as root here), then each URL in turn, and a plant created and deleted through it.
    const settings = markedBlock(OPERATIONS, 'install', 'settings').replaceAll(' -o root -g plant-store', '');
    await run(app, local(settings, app));
    // Each worker says which server it writes to once it has one: asked until one does, on a
    // connection closed after each answer (one kept open would hold up the next restart's drain).
    const metricsHost = (): Promise<string> =>
      eventually(async () => {
        const text = await new Promise<string>((resolve, reject) => {
          get({ host: '127.0.0.1', port: ports.get('8080'), path: '/metrics', agent: false }, (response) => {
            let body = '';
            response.setEncoding('utf8');
            response.on('data', (chunk: string) => (body += chunk));
            response.on('end', () => resolve(body));
          }).on('error', reject);
        });
        return /^plant_store_database_host\{host="([^"]+)"\} 1$/m.exec(text)?.[1];
      }, 'plant_store_database_host on /metrics');
    const ways: Array<[string, string]> = [
      ['url multi-host', local('10.0.0.11:5432', app)],
      ['url haproxy', local('10.0.0.31:5000', app)],
    ];
    for (const [way, host] of ways) {
      await runPrinted(app, printed(way), { PLANT_PASSWORD: password });
      await runPrinted(app, printed('create'));
      assert.equal(await metricsHost(), host, `${way}: the service writes through ${host}`);
      step(`${way}: a plant created and deleted`);
    }

    // The createdb the service prints for a missing database, run as printed: refused, as step 4 says.
    const multiHost = /DATABASE_URL=(postgres:[^|]+)\|/.exec(printed('url multi-host'))?.[1];
    assert.ok(multiHost, 'step 6 prints the multi-host URL');
    const missingUrl = local(multiHost, app)
      .replace('$PLANT_PASSWORD', password)
      .replace('/plants?', '/plants_missing?');
    const migrate = await runCliProcess(['migrate'], { DATABASE_URL: missingUrl });
    assert.notEqual(migrate.code, 0, migrate.stderr);
    const hint = /create it with (.+?), then run this again/.exec(migrate.stderr)?.[1];
    const printedHint = /create it with (PGTARGETSESSIONATTRS=.+?plants), …/s.exec(DOC)?.[1]?.replace(/\s+/g, ' ');
    assert.ok(printedHint, 'step 4 prints the hint');
    assert.equal(hint, `${local(printedHint, app)}_missing`, 'the hint as step 4 prints it');
    await assert.rejects(
      run(app, hint, { PGPASSWORD: password }),
      /permission denied to create database/,
      'plant has no CREATEDB',
    );
    step('the createdb hint refused');

    t.diagnostic(`stand-ins run:\n${calls.join('\n')}`);
  },
);
