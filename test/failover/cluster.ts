import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, chownSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync } from 'node:fs';
import { readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../support/postgres.js';

/**
 * A real highly available PostgreSQL on this machine, for the failover tests and benchmarks: one
 * etcd, two or three PostgreSQL 15 nodes each run by Patroni, and (optionally) HAProxy in front
 * routing to the leader only, as deploy/haproxy.cfg does for operators. Everything lives in one
 * temporary folder under /tmp and binds to 127.0.0.1 on ports of its own; `stop()` (also run on
 * process exit and on SIGINT/SIGTERM) ends every process it started, SIGKILLs stragglers (a
 * frozen node's among them) and deletes the folder.
 *
 *     const cluster = await startCluster({ nodes: 2, synchronous: 'on' });
 *     t.after(() => cluster.stop());
 *     await cluster.psql('haproxy', 'CREATE TABLE t (id int)');
 *     const { node } = await cluster.killPrimary();
 *     const leader = await cluster.waitForLeader(30_000, { not: node.name });
 *     await cluster.restartNode(node.name);
 *     await cluster.waitForReplicaStreaming(node.name, 60_000);
 *
 * Needs the Debian packages patroni (3.0), etcd-server (3.4) and haproxy, and PostgreSQL 15 in
 * /usr/lib/postgresql/15/bin. PostgreSQL refuses to run as root, so when this process is root
 * Patroni (and with it PostgreSQL) runs as the `postgres` user, which owns the temporary folder.
 * Patroni talks to etcd over the v3 API (its `etcd3:` section: etcd 3.4 serves /v3 through its
 * gRPC gateway; the v2 API stays off).
 */

export type SynchronousMode = 'off' | 'on' | 'strict';

export interface ClusterOptions {
  /** PostgreSQL nodes, each with its own Patroni (default 2). */
  nodes?: 2 | 3;
  /**
   * Patroni's synchronous replication: 'off' (asynchronous), 'on' (`synchronous_mode`: a commit
   * waits for the sync standby while one is there; with none left the primary goes on alone),
   * 'strict' (`synchronous_mode_strict` too: with no sync standby, commits wait). Default 'on'.
   */
  synchronous?: SynchronousMode;
  /** Start HAProxy in front, routing to the node whose Patroni answers `GET /primary` 200 (default true). */
  haproxy?: boolean;
  /** Patroni's leader key TTL, seconds (default 10; Patroni's own default is 30). */
  ttl?: number;
  /** Patroni's loop_wait, seconds (default 1; Patroni's default 10). */
  loopWait?: number;
  /** Patroni's retry_timeout, seconds (default 4; Patroni's default 10). loop_wait + 2 × retry_timeout must stay ≤ ttl. */
  retryTimeout?: number;
  /** Extra PostgreSQL parameters for every node (bootstrap DCS configuration). */
  parameters?: Record<string, string | number | boolean>;
  /** How long the start may take before it fails, ms (default 120 000). */
  startTimeout?: number;
  /** Called with each timeline event as it happens (e.g. `console.log`). */
  onEvent?: (event: TimelineEvent) => void;
}

export interface ClusterNode {
  /** Patroni member name, also the replica's application_name in pg_stat_replication. */
  readonly name: string;
  /** PostgreSQL port on 127.0.0.1. */
  readonly port: number;
  /** Patroni REST API port on 127.0.0.1. */
  readonly restPort: number;
  /** Patroni's pid (its process group's id), undefined while the node is down. */
  readonly pid: number | undefined;
  /** The running postmaster's pid (from postmaster.pid), undefined when there is none. */
  postmasterPid(): number | undefined;
  readonly dataDir: string;
  /** This node's Patroni YAML configuration. */
  readonly configFile: string;
  /** Patroni's (and PostgreSQL's) output. */
  readonly logFile: string;
  /** Whether Patroni runs (it was not killed or stopped); a frozen node is up. */
  readonly up: boolean;
  /** Whether freezeNode stopped it and nothing continued or killed it since. */
  readonly frozen: boolean;
}

/** One member as Patroni's REST `GET /cluster` lists it. */
export interface MemberStatus {
  name: string;
  role: string;
  state: string;
  host?: string;
  port?: number;
  timeline?: number;
  lag?: number | string;
}

export interface TimelineEvent {
  /** Date.now() when it happened. */
  at: number;
  /** ms since the cluster's start began. */
  sinceStart: number;
  event: string;
  node?: string;
  detail?: string;
}

export interface ClusterSettings {
  nodes: number;
  synchronous: SynchronousMode;
  ttl: number;
  loopWait: number;
  retryTimeout: number;
  haproxy: boolean;
}

export interface Cluster {
  /** The temporary folder holding every node's data, configuration and log. */
  readonly dir: string;
  /** Patroni's scope (the cluster's name, also PostgreSQL's cluster_name). */
  readonly scope: string;
  readonly settings: ClusterSettings;
  readonly nodes: readonly ClusterNode[];
  /** http://127.0.0.1:<port> of the etcd Patroni uses. */
  readonly etcdUrl: string;
  /** HAProxy's port (undefined without HAProxy). */
  readonly haproxyPort: number | undefined;
  /** Every node, the client picking the writable one: `postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/db?target_session_attrs=read-write`. */
  multiHostUrl(database?: string): string;
  /** The leader through HAProxy: `postgres://postgres@127.0.0.1:<haproxyPort>/db`. */
  haproxyUrl(database?: string): string;
  /** One node directly. */
  nodeUrl(name: string, database?: string): string;
  node(name: string): ClusterNode;
  /** Every member as Patroni sees it (REST `GET /cluster` of the first node that answers). */
  members(): Promise<MemberStatus[]>;
  /** The node that holds the leader key and runs as primary, per Patroni; undefined during an election. */
  leader(): Promise<ClusterNode | undefined>;
  /** HAProxy's view of each node ('UP', 'DOWN', …, from its stats socket); {} without HAProxy. */
  haproxyServers(): Promise<Record<string, string>>;
  /** Waits until HAProxy marks the leader, and only the leader, UP; answers the leader. */
  waitForHaproxyOnLeader(ms: number): Promise<ClusterNode>;
  /** Waits for a running leader (other than `not`), answers it; fails after `ms`. */
  waitForLeader(ms: number, options?: { not?: string }): Promise<ClusterNode>;
  /**
   * Waits until `name` streams from the leader (pg_stat_replication on the leader says 'streaming'
   * for that application_name) and, with `sync`, until the leader also replicates to it
   * synchronously and Patroni names it sync standby.
   */
  waitForReplicaStreaming(name: string, ms: number, options?: { sync?: boolean }): Promise<void>;
  /** The sync standby Patroni chose (role 'sync_standby'), undefined when there is none. */
  syncStandby(): Promise<string | undefined>;
  /**
   * Kills the leader for real: every process of its node (nodeProcesses) is stopped, Patroni
   * first, then all are SIGKILLed, so nothing restarts PostgreSQL, no backend lives on, and the
   * leader key stays until the TTL ends; answers once none is left. Records 'kill'.
   */
  killPrimary(): Promise<{ node: ClusterNode; at: number }>;
  /** The same for any node. */
  killNode(name: string): Promise<{ node: ClusterNode; at: number }>;
  /**
   * A silent node: SIGSTOP to every process of it (Patroni, the postmaster, each of its children,
   * a runuser wrapping one), answered once all are stopped. Its connections stay open and carry nothing; a leader's key
   * expires after the TTL. Records 'freeze'. The stop kills a node still frozen.
   */
  freezeNode(name: string): Promise<{ node: ClusterNode; at: number; pids: number[] }>;
  /** SIGCONT to every process of the node, and to a runuser wrapper stopped with it. Records 'thaw'. */
  thawNode(name: string): Promise<{ node: ClusterNode; at: number }>;
  /**
   * The node's live processes: Patroni and what it started (pg_rewind, pg_basebackup, …), the
   * postmaster and every child of it; never this process's own tools.
   */
  nodeProcesses(name: string): number[];
  /** `patronictl switchover --leader <leader> --candidate <candidate> --force`, then waits for the candidate to lead. */
  switchover(candidate?: string, ms?: number): Promise<ClusterNode>;
  /** Starts a killed node's Patroni again; it rejoins as a replica (pg_rewind, or a new base backup). */
  restartNode(name: string): Promise<ClusterNode>;
  /**
   * Tries a write (`CREATE TABLE IF NOT EXISTS failover_probe …; INSERT …`) on `target` (a node
   * name, 'haproxy' or a URL) until one commits; answers when (Date.now()). Records `label`.
   */
  waitForWrite(target: string, ms: number, label?: string): Promise<number>;
  /** Runs `sql` on a node ('haproxy' for the leader through HAProxy, or a URL), answers the rows. */
  psql<Row extends Record<string, unknown> = Record<string, unknown>>(
    target: string,
    sql: string,
    params?: unknown[],
  ): Promise<Row[]>;
  /** The events so far (start, kill, leader changes seen, writes, …), oldest first. */
  timeline(): TimelineEvent[];
  /** Adds an event of the caller's. */
  mark(event: string, detail?: string, node?: string): TimelineEvent;
  /** The timeline as lines, times relative to the first event named `from` (default: the start). */
  formatTimeline(from?: string): string;
  /** `patronictl list` as printed. */
  patronictl(...args: string[]): Promise<string>;
  /**
   * Stops everything and deletes the folder; safe to call twice. A frozen node is continued and
   * SIGKILLed at once. Graceful (the default): SIGTERM to Patroni (which stops its PostgreSQL),
   * then etcd, then SIGKILL to whatever is left. With `graceful: false`, SIGKILL at once (the
   * shared memory of the killed postmasters is removed).
   */
  stop(options?: { graceful?: boolean }): Promise<void>;
  /** The dynamic configuration Patroni applies (REST `GET /config`): ttl, loop_wait, synchronous_mode, … */
  effectiveConfig(): Promise<Record<string, unknown>>;
}

const PG_BIN = '/usr/lib/postgresql/15/bin';
const PATRONI = '/usr/bin/patroni';
const PATRONICTL = '/usr/bin/patronictl';
const ETCD = '/usr/bin/etcd';
const HAPROXY = '/usr/sbin/haproxy';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The uid and gid of `postgres` when this process is root (PostgreSQL refuses root), else undefined: run as ourselves. */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((entry) => entry.startsWith('postgres:'));
  if (!line) throw new Error('running as root, but there is no postgres user to run PostgreSQL as');
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** A minimal YAML writer (block style; strings quoted JSON-style, which YAML reads alike). */
export function toYaml(value: unknown, indent = ''): string {
  const scalar = (v: unknown): string =>
    typeof v === 'string' ? JSON.stringify(v) : v === null || v === undefined ? 'null' : JSON.stringify(v);
  if (Array.isArray(value)) {
    if (value.length === 0) return `${indent}[]\n`;
    return value
      .map((item) =>
        item !== null && typeof item === 'object'
          ? `${indent}-\n${toYaml(item, indent + '  ')}`
          : `${indent}- ${scalar(item)}\n`,
      )
      .join('');
  }
  if (value !== null && typeof value === 'object') {
    return Object.entries(value)
      .map(([key, v]) =>
        v !== null && typeof v === 'object' && (!Array.isArray(v) || v.length > 0)
          ? `${indent}${key}:\n${toYaml(v, indent + '  ')}`
          : `${indent}${key}: ${Array.isArray(v) ? '[]' : scalar(v)}\n`,
      )
      .join('');
  }
  return `${indent}${scalar(value)}\n`;
}

/** Reads /proc/<pid>/stat: the parent, process group and session, or undefined when it is gone. */
function procStat(pid: number): { ppid: number; pgrp: number; session: number; state: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid pgrp session …"; comm may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: fields[0] ?? '?', ppid: Number(fields[1]), pgrp: Number(fields[2]), session: Number(fields[3]) };
  } catch {
    return undefined;
  }
}

export function alive(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== undefined && stat.state !== 'Z';
}

function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

/**
 * The live processes of this cluster: those whose command line names its folder (Patroni, the
 * postmasters, etcd, HAProxy, pg_rewind, pg_basebackup) or, given one, its scope (PostgreSQL's
 * children show `postgres: <cluster_name>: …`). A scope names this cluster's processes only when it
 * is its own (a random one, as startCluster's); without one, the folder alone decides.
 */
export function clusterProcesses(dir: string, scope?: string): number[] {
  return processesWhose((line) => line.includes(dir) || (scope !== undefined && line.includes(`postgres: ${scope}:`)));
}

/** The live processes (this one aside) whose command line passes `test`. */
function processesWhose(test: (line: string) => boolean): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    if (test(cmdline(pid)) && alive(pid)) found.push(pid);
  }
  return found;
}

/** A postmaster's System V shared memory segment, as its postmaster.pid records it (line 7: key and id). */
export interface SharedMemorySegment {
  key: number;
  id: number;
}

export function sharedMemoryOf(dataDir: string): SharedMemorySegment | undefined {
  try {
    const [key, id] = (readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[6] ?? '')
      .trim()
      .split(/\s+/)
      .map(Number);
    return key && id !== undefined && Number.isInteger(id) ? { key, id } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Removes a SIGKILLed postmaster's small System V segment, which outlives it (a clean shutdown
 * removes its own): only when /proc/sysvipc/shm still shows that key and id, attached by no one.
 */
export function removeSharedMemory(segment: SharedMemorySegment): void {
  try {
    const found = readFileSync('/proc/sysvipc/shm', 'utf8')
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/).map(Number))
      .some(([key, id, , , , , nattch]) => key === segment.key && id === segment.id && nattch === 0);
    if (found) execFileSync('ipcrm', ['-m', String(segment.id)], { stdio: 'ignore' });
  } catch {
    // gone already, or no ipcrm: a 56-byte leak at worst
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

/** Signals a process's whole group (when it leads one) and the process itself. */
export function signalGroup(pid: number, sig: NodeJS.Signals): void {
  const stat = procStat(pid);
  if (stat && stat.pgrp > 1 && stat.pgrp !== process.pid) signal(-stat.pgrp, sig);
  signal(pid, sig);
}

/** One live process as `ps -eo pid=,ppid=,pgid=,stat=,comm=` prints it. */
interface ProcessRow {
  pid: number;
  ppid: number;
  pgid: number;
  comm: string;
}

/** Every live process (zombies left out: they are gone, only not yet reaped), by ps. */
function processTable(): ProcessRow[] {
  let listing: string;
  try {
    listing = execFileSync('ps', ['-eo', 'pid=,ppid=,pgid=,stat=,comm='], { encoding: 'utf8' });
  } catch {
    return [];
  }
  const rows: ProcessRow[] = [];
  for (const line of listing.split('\n')) {
    const match = /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line);
    if (!match || match[4]!.startsWith('Z')) continue;
    rows.push({ pid: Number(match[1]), ppid: Number(match[2]), pgid: Number(match[3]), comm: match[5]!.trim() });
  }
  return rows;
}

/** Commands that run another as a user and stop themselves when it stops: they go on only when sent SIGCONT. */
const WRAPPERS = new Set(['runuser', 'su', 'sudo']);

/**
 * `roots` and everything that belongs to them: every process descended from one by ppid, and
 * every member of a process group one of them leads. Neither a group nor a session holds all of a
 * PostgreSQL node: the postmaster runs in the session of the helper Patroni starts it from, and
 * each of its children calls setsid(), so a backend is tied to the postmaster by its ppid alone
 * (and only while the postmaster lives: an orphan is adopted by init). `wrappers` are the runuser
 * (or su, sudo) parents of a root: stopped with it, they must be sent SIGCONT to go on, or to reap
 * it and exit.
 */
export function processTree(roots: readonly number[], table = processTable()): { pids: number[]; wrappers: number[] } {
  const children = new Map<number, number[]>();
  const groups = new Map<number, number[]>();
  const byPid = new Map<number, ProcessRow>();
  for (const row of table) {
    byPid.set(row.pid, row);
    children.set(row.ppid, [...(children.get(row.ppid) ?? []), row.pid]);
    groups.set(row.pgid, [...(groups.get(row.pgid) ?? []), row.pid]);
  }
  const ours = (pid: number) => pid > 1 && pid !== process.pid;
  const found: number[] = [];
  const seen = new Set<number>();
  const queue = roots.filter((pid) => byPid.has(pid));
  while (queue.length > 0) {
    const pid = queue.shift()!;
    if (seen.has(pid) || !ours(pid)) continue;
    seen.add(pid);
    found.push(pid);
    queue.push(...(children.get(pid) ?? []), ...(groups.get(pid) ?? []));
  }
  const wrappers = roots
    .map((pid) => byPid.get(byPid.get(pid)?.ppid ?? 0))
    .filter((row): row is ProcessRow => row !== undefined && ours(row.pid) && WRAPPERS.has(row.comm))
    .map((row) => row.pid);
  return { pids: found, wrappers: [...new Set(wrappers)] };
}

/** Whether a process is stopped (SIGSTOP: state T, or t when traced); a process gone counts as stopped. */
function stoppedOrGone(pid: number): boolean {
  const state = procStat(pid)?.state;
  return state === undefined || state === 'T' || state === 't' || state === 'Z';
}

/** Clusters not yet stopped, for the exit and signal handlers. */
const live = new Set<{ killNow(): void }>();
let handlersInstalled = false;

function onSignal(sig: NodeJS.Signals): void {
  for (const cluster of live) cluster.killNow();
  process.removeListener('SIGINT', onSignal);
  process.removeListener('SIGTERM', onSignal);
  process.kill(process.pid, sig);
}

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', () => {
    for (const cluster of live) cluster.killNow();
  });
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

async function httpGet(url: string, timeoutMs = 1000): Promise<{ status: number; body: string } | undefined> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    return { status: response.status, body: await response.text() };
  } catch {
    return undefined;
  }
}

/** Sends one command to HAProxy's stats socket, answers its reply. */
function haproxyCommand(socket: string, command: string, timeoutMs = 1000): Promise<string> {
  return new Promise((resolve, reject) => {
    let reply = '';
    const connection = createConnection(socket, () => connection.end(`${command}\n`));
    connection.setTimeout(timeoutMs, () => connection.destroy(new Error('HAProxy stats socket: timeout')));
    connection.on('data', (chunk: Buffer) => (reply += chunk.toString('utf8')));
    connection.on('error', reject);
    connection.on('close', () => resolve(reply));
  });
}

function run(file: string, args: string[], timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: timeoutMs, encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')}: ${error.message}\n${stdout}${stderr}`));
      else resolve(stdout + stderr);
    });
  });
}

/** Polls `check` every `every` ms until it answers something other than undefined; fails after `ms`. */
async function poll<T>(check: () => Promise<T | undefined>, ms: number, what: () => string, every = 100): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await check().catch(() => undefined);
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`${what()}: not within ${ms} ms`);
    await sleep(every);
  }
}

interface NodeState {
  name: string;
  port: number;
  restPort: number;
  dir: string;
  dataDir: string;
  configFile: string;
  logFile: string;
  child: ChildProcess | undefined;
  pid: number | undefined;
  /** freezeNode stopped it, and nothing has continued or killed it since. */
  frozen: boolean;
}

/** Starts etcd, the Patroni nodes and HAProxy; answers once a leader accepts writes and every replica streams. */
export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const settings: ClusterSettings = {
    nodes: options.nodes ?? 2,
    synchronous: options.synchronous ?? 'on',
    ttl: options.ttl ?? 10,
    loopWait: options.loopWait ?? 1,
    retryTimeout: options.retryTimeout ?? 4,
    haproxy: options.haproxy ?? true,
  };
  if (settings.loopWait + 2 * settings.retryTimeout > settings.ttl)
    throw new Error(
      `loop_wait (${settings.loopWait}) + 2 × retry_timeout (${settings.retryTimeout}) must be ≤ ttl (${settings.ttl}), as Patroni's documentation asks`,
    );
  for (const binary of [PATRONI, PATRONICTL, ETCD, join(PG_BIN, 'postgres'), ...(settings.haproxy ? [HAPROXY] : [])])
    if (!existsSync(binary)) throw new Error(`${binary} is missing (apt-get install patroni etcd-server haproxy)`);

  const started = Date.now();
  const events: TimelineEvent[] = [];
  const mark = (event: string, detail?: string, node?: string): TimelineEvent => {
    const at = Date.now();
    const entry: TimelineEvent = { at, sinceStart: at - started, event };
    if (node !== undefined) entry.node = node;
    if (detail !== undefined) entry.detail = detail;
    events.push(entry);
    options.onEvent?.(entry);
    return entry;
  };

  const user = postgresUser();
  const scope = `plant-failover-${randomBytes(4).toString('hex')}`;
  const dir = mkdtempSync(join(tmpdir(), 'plant-failover-'));
  chmodSync(dir, 0o755);
  const own = (path: string) => {
    if (user) chownSync(path, user.uid, user.gid);
  };
  own(dir);

  let etcd: ChildProcess | undefined;
  let haproxy: ChildProcess | undefined;
  const nodes: NodeState[] = [];
  /** The shared memory of every postmaster SIGKILLed, removed at the stop once nothing holds it. */
  const segments: SharedMemorySegment[] = [];
  let stopped = false;
  let watcher: Promise<void> | undefined;

  const postmasterPid = (state: NodeState): number | undefined => {
    try {
      const pid = Number(readFileSync(join(state.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      return pid > 0 && alive(pid) ? pid : undefined;
    } catch {
      return undefined;
    }
  };

  /**
   * Every process of a node, now: its Patroni, whatever names the node's folder on its command
   * line (the postmaster's `-D <node>/data`, pg_rewind, pg_basebackup), and all that descends from
   * them (processTree); not this process's own tools, though (patronictl names a node's
   * configuration file), which are no part of the node.
   */
  const nodeProcesses = (state: NodeState): { pids: number[]; wrappers: number[] } => {
    const named = processesWhose((line) => line.includes(`${state.dir}/`)).filter(
      (pid) => pid === state.pid || procStat(pid)?.ppid !== process.pid,
    );
    return processTree([...(state.pid ? [state.pid] : []), ...named]);
  };

  /**
   * SIGSTOP to every process of a node, in nodeProcesses' order: Patroni first (nothing starts
   * PostgreSQL again meanwhile), the postmaster before its children. The node is listed again once
   * every process listed so far has stopped, until a listing finds none new: a stopped process
   * forks no child, so then nothing of the node runs and none of it can appear. `stuck`: those not
   * stopped within `ms` (a process in uninterruptible sleep stops only once it wakes).
   */
  const stopEverything = async (
    state: NodeState,
    ms = 10_000,
  ): Promise<{ pids: number[]; wrappers: number[]; stuck: number[] }> => {
    const stopped = new Set<number>();
    const wrappers = new Set<number>();
    const deadline = Date.now() + ms;
    for (;;) {
      const listed = nodeProcesses(state);
      for (const pid of listed.wrappers) wrappers.add(pid);
      const fresh = listed.pids.filter((pid) => !stopped.has(pid));
      if (fresh.length === 0) return { pids: [...stopped], wrappers: [...wrappers], stuck: [] };
      for (const pid of fresh) {
        signal(pid, 'SIGSTOP');
        stopped.add(pid);
      }
      while (![...stopped].every(stoppedOrGone)) {
        if (Date.now() > deadline)
          return {
            pids: [...stopped],
            wrappers: [...wrappers],
            stuck: [...stopped].filter((pid) => !stoppedOrGone(pid)),
          };
        await sleep(5);
      }
    }
  };

  /**
   * SIGCONT then SIGKILL to every process of a node, back to back, synchronously (the exit
   * handler's way, and the stop's for a frozen node: stopped, it cannot shut down). The SIGCONT
   * first lets a runuser wrapper go on, to reap its child and exit once that is killed; a stopped
   * process is killed all the same.
   */
  const killTree = (state: NodeState): number[] => {
    const { pids, wrappers } = nodeProcesses(state);
    const postmaster = postmasterPid(state);
    const segment = sharedMemoryOf(state.dataDir);
    if (postmaster && segment) segments.push(segment);
    for (const pid of [...pids, ...wrappers]) signal(pid, 'SIGCONT');
    if (state.pid) signalGroup(state.pid, 'SIGKILL');
    if (postmaster) signalGroup(postmaster, 'SIGKILL');
    for (const pid of pids) signal(pid, 'SIGKILL');
    state.frozen = false;
    return pids;
  };

  /** SIGKILL to everything of this cluster, synchronously (the exit handler's way). */
  const killNow = () => {
    for (const state of nodes) killTree(state);
    for (const child of [haproxy, etcd]) if (child?.pid) signalGroup(child.pid, 'SIGKILL');
    for (const pid of clusterProcesses(dir, scope)) signal(pid, 'SIGKILL');
    // A SIGKILLed postmaster's children hold its segment until they are gone: wait a little for them.
    for (let i = 0; i < 50 && clusterProcesses(dir, scope).length > 0; i++) execFileSync('sleep', ['0.02']);
    for (const segment of segments.splice(0)) removeSharedMemory(segment);
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // a process still writing there: nothing more to do at exit
    }
  };
  const registration = { killNow };
  live.add(registration);
  installHandlers();

  const spawnLogged = (
    file: string,
    args: string[],
    logFile: string,
    extra: { uid?: number; gid?: number; env?: NodeJS.ProcessEnv; cwd?: string } = {},
  ): ChildProcess => {
    const fd = openSync(logFile, 'a');
    try {
      const child = spawn(file, args, { ...extra, detached: true, stdio: ['ignore', fd, fd] });
      child.on('error', (error) => mark('spawn error', `${file}: ${error.message}`));
      return child;
    } finally {
      closeSync(fd);
    }
  };

  const tail = (file: string, lines = 30) => {
    try {
      return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '(no log)';
    }
  };

  const startPatroni = (state: NodeState) => {
    const child = spawnLogged(PATRONI, [state.configFile], state.logFile, {
      ...(user ?? {}),
      cwd: state.dir,
      env: { PATH: `${PG_BIN}:/usr/bin:/bin`, HOME: state.dir, LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', TZ: 'UTC' },
    });
    state.child = child;
    state.pid = child.pid;
    child.on('exit', (code, sig) => {
      if (state.child === child) {
        state.pid = undefined;
        state.child = undefined;
      }
      if (!stopped && sig !== 'SIGKILL') mark('patroni exited', `code ${code} signal ${sig}`, state.name);
    });
    mark('patroni started', `pid ${child.pid}`, state.name);
  };

  const api = (state: NodeState): ClusterNode => ({
    name: state.name,
    port: state.port,
    restPort: state.restPort,
    get pid() {
      return state.pid;
    },
    postmasterPid: () => postmasterPid(state),
    dataDir: state.dataDir,
    configFile: state.configFile,
    logFile: state.logFile,
    get up() {
      return state.pid !== undefined;
    },
    get frozen() {
      return state.frozen;
    },
  });
  const views = new Map<string, ClusterNode>();
  const view = (name: string): ClusterNode => {
    const found = views.get(name);
    if (!found) throw new Error(`no node ${name} (nodes: ${nodes.map((n) => n.name).join(', ')})`);
    return found;
  };
  const stateOf = (name: string): NodeState => {
    const found = nodes.find((n) => n.name === name);
    if (!found) throw new Error(`no node ${name}`);
    return found;
  };

  const members = async (): Promise<MemberStatus[]> => {
    for (const state of nodes) {
      if (!state.pid) continue;
      const answer = await httpGet(`http://127.0.0.1:${state.restPort}/cluster`);
      if (answer?.status === 200) return (JSON.parse(answer.body) as { members?: MemberStatus[] }).members ?? [];
    }
    throw new Error('no Patroni REST API answers');
  };

  const leader = async (): Promise<ClusterNode | undefined> => {
    const list = await members().catch(() => []);
    const found = list.find((m) => (m.role === 'leader' || m.role === 'master') && m.state === 'running');
    if (!found) return undefined;
    // The DCS may still name a dead leader until its key expires: ask the node itself too.
    const state = stateOf(found.name);
    if (!state.pid) return undefined;
    const primary = await httpGet(`http://127.0.0.1:${state.restPort}/primary`);
    return primary?.status === 200 ? view(found.name) : undefined;
  };

  const url = (port: number, database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`;
  const resolveTarget = (target: string): string => {
    if (target.startsWith('postgres://') || target.startsWith('postgresql://')) return target;
    if (target === 'haproxy') {
      if (!haproxyPort) throw new Error('this cluster runs without HAProxy');
      return url(haproxyPort);
    }
    return url(stateOf(target).port);
  };

  const psql = async <Row extends Record<string, unknown>>(
    target: string,
    sql: string,
    params?: unknown[],
  ): Promise<Row[]> => {
    const client = new pg.Client({
      connectionString: resolveTarget(target),
      connectionTimeoutMillis: 3000,
      query_timeout: 10_000,
    });
    client.on('error', () => {}); // a node killed under an open connection
    try {
      await client.connect();
      const result = await client.query<Row>(sql, params);
      return result.rows;
    } finally {
      await client.end().catch(() => {});
    }
  };

  const waitForWrite = async (target: string, ms: number, label = `write via ${target}`): Promise<number> => {
    let last = '';
    await poll(
      async () => {
        try {
          await psql(
            target,
            `CREATE TABLE IF NOT EXISTS failover_probe (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(), label text);
             INSERT INTO failover_probe (label) VALUES ('${label.replaceAll("'", "''")}')`,
          );
          return true;
        } catch (error) {
          last = (error as Error).message;
          return undefined;
        }
      },
      ms,
      () => `a write through ${target} (last error: ${last})`,
      50,
    );
    return mark(label, undefined, target).at;
  };

  const haproxySocket = join(dir, 'haproxy', 'admin.sock');
  const haproxyServers = async (): Promise<Record<string, string>> => {
    if (!haproxy) return {};
    const csv = await haproxyCommand(haproxySocket, 'show stat');
    const [header, ...lines] = csv.trim().split('\n');
    const columns = (header ?? '').replace(/^# /, '').split(',');
    const [proxy, server, status] = ['pxname', 'svname', 'status'].map((c) => columns.indexOf(c));
    const servers: Record<string, string> = {};
    for (const line of lines) {
      const fields = line.split(',');
      const name = fields[server ?? -1] ?? '';
      if (fields[proxy ?? -1] === 'postgres_primary' && name !== 'FRONTEND' && name !== 'BACKEND')
        servers[name] = fields[status ?? -1] ?? '?';
    }
    return servers;
  };

  const waitForHaproxyOnLeader = (ms: number) => {
    let seen = '';
    return poll(
      async () => {
        const primary = await leader();
        const servers = await haproxyServers();
        seen = `leader ${primary?.name}, HAProxy ${JSON.stringify(servers)}`;
        if (!primary) return undefined;
        const ok = nodes.every((n) => (servers[n.name] === 'UP') === (n.name === primary.name));
        return ok ? primary : undefined;
      },
      ms,
      () => `HAProxy routing to the leader only (${seen})`,
    );
  };

  const syncStandby = async (): Promise<string | undefined> =>
    (await members()).find((m) => m.role === 'sync_standby')?.name;

  const waitForLeader = (ms: number, opts: { not?: string } = {}) =>
    poll(
      async () => {
        const found = await leader();
        return found && found.name !== opts.not ? found : undefined;
      },
      ms,
      () =>
        `a leader${opts.not ? ` other than ${opts.not}` : ''} (log tail:\n${nodes.map((n) => `${n.name}:\n${tail(n.logFile, 8)}`).join('\n')})`,
    );

  const waitForReplicaStreaming = async (name: string, ms: number, opts: { sync?: boolean } = {}) => {
    let seen = 'nothing yet';
    await poll(
      async () => {
        const primary = await leader();
        if (!primary) {
          seen = 'no leader';
          return undefined;
        }
        if (primary.name === name) {
          seen = `${name} is the leader`;
          return undefined;
        }
        const rows = await psql<{ state: string; sync_state: string }>(
          primary.name,
          'SELECT state, sync_state FROM pg_stat_replication WHERE application_name = $1',
          [name],
        );
        seen = rows.length ? `state ${rows[0]?.state}, sync_state ${rows[0]?.sync_state}` : 'not connected';
        if (rows[0]?.state !== 'streaming') return undefined;
        if (opts.sync) {
          if (rows[0].sync_state !== 'sync') return undefined;
          const standby = await syncStandby();
          seen += `, Patroni's sync standby ${standby}`;
          if (standby !== name) return undefined;
        }
        return true;
      },
      ms,
      () => `${name} streaming${opts.sync ? ' synchronously' : ''} (${seen})`,
      200,
    );
    mark(opts.sync ? 'sync standby streaming' : 'replica streaming', undefined, name);
  };

  const killNode = async (name: string) => {
    const state = stateOf(name);
    const postmaster = postmasterPid(state);
    const segment = sharedMemoryOf(state.dataDir);
    const patroni = state.pid;
    if (!patroni) throw new Error(`${name} is not running`);
    if (postmaster && segment) segments.push(segment);
    // Everything stopped first, Patroni before PostgreSQL: a stopped Patroni starts no PostgreSQL
    // and a stopped postmaster forks no backend, so the list is whole when the SIGKILLs go, and
    // a backend (its own process group and session) cannot outlive its postmaster unseen.
    const { pids, wrappers } = await stopEverything(state);
    for (const pid of pids) signal(pid, 'SIGKILL');
    // A runuser stopped with its child reaps it, and exits, only once continued.
    for (const pid of wrappers) signal(pid, 'SIGCONT');
    const { at } = mark(
      'kill',
      `SIGKILL patroni ${patroni}, postmaster ${postmaster ?? 'none'}, ${pids.length} processes in all`,
      name,
    );
    state.pid = undefined;
    state.child = undefined;
    state.frozen = false;
    await poll(
      async () => {
        // A process that was starting as the list was taken (none should be) is killed too.
        const left = [...new Set([...pids, ...nodeProcesses(state).pids])].filter(alive);
        for (const pid of left) signal(pid, 'SIGKILL');
        return left.length > 0 ? undefined : true;
      },
      10_000,
      () => `${name}'s processes gone (left: ${pids.filter(alive).join(', ')})`,
      20,
    );
    return { node: view(name), at };
  };

  const freezeNode = async (name: string) => {
    const state = stateOf(name);
    if (!state.pid) throw new Error(`${name} is not running`);
    state.frozen = true; // before the first SIGSTOP: a stop from here on continues whatever was stopped
    const { pids, wrappers, stuck } = await stopEverything(state);
    if (stuck.length > 0) throw new Error(`${name}: processes ${stuck.join(', ')} did not stop`);
    // A runuser stops itself once its child has stopped; stopped here too, it is so at once.
    for (const pid of wrappers) signal(pid, 'SIGSTOP');
    const postmaster = postmasterPid(state);
    const { at } = mark(
      'freeze',
      `SIGSTOP patroni ${state.pid}, postmaster ${postmaster ?? 'none'}, ${pids.length} processes in all` +
        (wrappers.length > 0 ? ` (wrappers ${wrappers.join(', ')})` : ''),
      name,
    );
    return { node: view(name), at, pids };
  };

  const thawNode = async (name: string) => {
    const state = stateOf(name);
    const { pids, wrappers } = nodeProcesses(state);
    // The postmaster's children before it, Patroni last: each finds what it serves running again.
    for (const pid of [...pids].reverse()) signal(pid, 'SIGCONT');
    for (const pid of wrappers) signal(pid, 'SIGCONT');
    state.frozen = false;
    const { at } = mark('thaw', `SIGCONT to ${pids.length} processes`, name);
    await poll(
      async () => (pids.some((pid) => procStat(pid)?.state === 'T') ? undefined : true),
      5000,
      () => `${name}'s processes running again`,
      10,
    );
    return { node: view(name), at };
  };

  const killPrimary = async () => {
    const primary = await leader();
    if (!primary) throw new Error('no leader to kill');
    return killNode(primary.name);
  };

  const patronictl = (...args: string[]) => {
    const someNode = nodes.find((n) => n.pid) ?? nodes[0];
    if (!someNode) throw new Error('no node');
    return run(PATRONICTL, ['-c', someNode.configFile, ...args]);
  };

  const switchover = async (candidate?: string, ms = 60_000) => {
    const current = await waitForLeader(ms);
    const target = candidate ?? nodes.find((n) => n.name !== current.name && n.pid)?.name;
    if (!target) throw new Error('no candidate for a switchover');
    mark('switchover requested', `${current.name} → ${target}`);
    await patronictl('switchover', '--leader', current.name, '--candidate', target, '--force');
    const next = await poll(
      async () => {
        const found = await leader();
        return found?.name === target ? found : undefined;
      },
      ms,
      () => `${target} leading after the switchover`,
    );
    mark('leader after switchover', undefined, target);
    return next;
  };

  const restartNode = async (name: string) => {
    const state = stateOf(name);
    if (state.pid) throw new Error(`${name} is running`);
    startPatroni(state);
    return view(name);
  };

  /**
   * Records each change of leader Patroni reports as 'leader seen' (or 'no leader'), and each
   * change of a server's state in HAProxy as 'haproxy <state>', polling every 100 ms.
   */
  const watch = async () => {
    let previous: string | undefined = '(none yet)';
    let previousServers: Record<string, string> = {};
    while (!stopped) {
      const found = await leader().catch(() => undefined);
      const name = found?.name;
      if (name !== previous && !stopped) {
        if (name) mark('leader seen', previous === '(none yet)' ? 'when the watch began' : undefined, name);
        else if (previous !== '(none yet)') mark('no leader');
        previous = name;
      }
      const servers = await haproxyServers().catch(() => previousServers);
      for (const [server, state] of Object.entries(servers))
        if (previousServers[server] !== undefined && previousServers[server] !== state && !stopped)
          mark(`haproxy ${state}`, undefined, server);
      previousServers = servers;
      await sleep(100);
    }
  };

  // Ports and folders.
  const etcdClientPort = await freePort();
  let etcdPeerPort = await freePort();
  while (etcdPeerPort === etcdClientPort) etcdPeerPort = await freePort();
  const taken = new Set([etcdClientPort, etcdPeerPort]);
  const fresh = async () => {
    for (;;) {
      const port = await freePort();
      if (!taken.has(port)) {
        taken.add(port);
        return port;
      }
    }
  };
  for (let i = 1; i <= settings.nodes; i++) {
    const nodeDir = join(dir, `node${i}`);
    mkdirSync(nodeDir);
    own(nodeDir);
    const state: NodeState = {
      name: `node${i}`,
      port: await fresh(),
      restPort: await fresh(),
      dir: nodeDir,
      dataDir: join(nodeDir, 'data'),
      configFile: join(nodeDir, 'patroni.yml'),
      logFile: join(nodeDir, 'patroni.log'),
      child: undefined,
      pid: undefined,
      frozen: false,
    };
    nodes.push(state);
    views.set(state.name, api(state));
  }
  const haproxyPort = settings.haproxy ? await fresh() : undefined;
  const etcdUrl = `http://127.0.0.1:${etcdClientPort}`;

  const multiHostUrl = (database = 'postgres') =>
    `postgres://postgres@${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}/${database}?target_session_attrs=read-write`;

  const stop = async ({ graceful = true }: { graceful?: boolean } = {}) => {
    if (stopped) return;
    stopped = true;
    mark('stop', graceful ? 'graceful' : 'SIGKILL');
    // A frozen node is killed at once: stopped, it would never answer the SIGTERM, and a Patroni
    // left stopped keeps this process from exiting.
    for (const state of nodes) if (state.frozen) killTree(state);
    await watcher;
    if (graceful) {
      // Patroni stops its PostgreSQL on SIGTERM (a fast shutdown, which removes its shared memory).
      for (const state of nodes) if (state.pid) signal(state.pid, 'SIGTERM');
      if (haproxy?.pid) signal(haproxy.pid, 'SIGTERM');
      const patronis = nodes.map((n) => n.pid).filter((pid): pid is number => pid !== undefined);
      await poll(
        async () => (patronis.some(alive) || nodes.some((n) => postmasterPid(n)) ? undefined : true),
        15_000,
        () => 'Patroni and PostgreSQL stopped',
      ).catch(() => {});
      mark('patroni stopped');
      if (etcd?.pid) signal(etcd.pid, 'SIGTERM');
      await poll(
        async () => (etcd?.pid && alive(etcd.pid) ? undefined : true),
        5000,
        () => 'etcd stopped',
      ).catch(() => {});
    }
    killNow(); // whatever is left, SIGKILL (and shared memory removed), and the folder goes
    await poll(
      async () => (clusterProcesses(dir, scope).length ? undefined : true),
      5000,
      () => `the processes of ${dir} gone (${clusterProcesses(dir, scope).join(', ')})`,
      50,
    );
    if (existsSync(dir)) rmSync(dir, { recursive: true, force: true });
    live.delete(registration);
    mark('stopped');
  };

  const cluster: Cluster = {
    dir,
    scope,
    settings,
    nodes: nodes.map((n) => view(n.name)),
    etcdUrl,
    haproxyPort,
    multiHostUrl,
    haproxyUrl: (database = 'postgres') => {
      if (!haproxyPort) throw new Error('this cluster runs without HAProxy');
      return url(haproxyPort, database);
    },
    nodeUrl: (name, database = 'postgres') => url(stateOf(name).port, database),
    node: view,
    members,
    leader,
    haproxyServers,
    waitForHaproxyOnLeader,
    waitForLeader,
    waitForReplicaStreaming,
    syncStandby,
    killPrimary,
    killNode,
    freezeNode,
    thawNode,
    nodeProcesses: (name) => nodeProcesses(stateOf(name)).pids,
    switchover,
    restartNode,
    waitForWrite,
    psql,
    timeline: () => events.map((e) => ({ ...e })),
    mark,
    formatTimeline: (from?: string) => {
      const origin = (from ? events.find((e) => e.event === from)?.at : undefined) ?? started;
      return events
        .map(
          (e) =>
            `${((e.at - origin) / 1000).toFixed(3).padStart(9)} s  ${e.event}${e.node ? ` [${e.node}]` : ''}${e.detail ? `: ${e.detail}` : ''}`,
        )
        .join('\n');
    },
    patronictl,
    stop,
    effectiveConfig: async () => {
      for (const state of nodes) {
        if (!state.pid) continue;
        const answer = await httpGet(`http://127.0.0.1:${state.restPort}/config`);
        if (answer?.status === 200) return JSON.parse(answer.body) as Record<string, unknown>;
      }
      throw new Error('no Patroni REST API answers');
    },
  };

  try {
    mark('start', `${dir}, scope ${scope}`);
    // etcd: one member, v3 API only.
    const etcdDir = join(dir, 'etcd');
    mkdirSync(etcdDir, { mode: 0o700 });
    etcd = spawnLogged(
      ETCD,
      [
        '--name=etcd1',
        `--data-dir=${join(etcdDir, 'data')}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
        `--initial-cluster=etcd1=http://127.0.0.1:${etcdPeerPort}`,
        `--initial-cluster-token=${scope}`,
        '--initial-cluster-state=new',
        '--enable-v2=false',
        '--log-level=warn',
      ],
      join(etcdDir, 'etcd.log'),
    );
    await poll(
      async () => {
        const answer = await httpGet(`${etcdUrl}/health`);
        return answer?.status === 200 && answer.body.includes('true') ? true : undefined;
      },
      30_000,
      () => `etcd healthy (log: ${tail(join(etcdDir, 'etcd.log'))})`,
    );
    mark('etcd up', etcdUrl);

    // Patroni's configuration, one file per node.
    const parameters: Record<string, string | number | boolean> = {
      wal_level: 'replica',
      hot_standby: 'on',
      max_wal_senders: 10,
      max_replication_slots: 10,
      wal_log_hints: 'on',
      wal_keep_size: '64MB',
      max_connections: 100,
      shared_buffers: '32MB',
      logging_collector: 'off',
      log_line_prefix: '%m [%p] ',
      ...options.parameters,
    };
    for (const state of nodes) {
      const config = {
        scope,
        namespace: '/plant-store/',
        name: state.name,
        log: { level: 'INFO', format: '%(asctime)s %(levelname)s: %(message)s' },
        restapi: { listen: `127.0.0.1:${state.restPort}`, connect_address: `127.0.0.1:${state.restPort}` },
        etcd3: { hosts: [`127.0.0.1:${etcdClientPort}`], protocol: 'http' },
        bootstrap: {
          dcs: {
            ttl: settings.ttl,
            loop_wait: settings.loopWait,
            retry_timeout: settings.retryTimeout,
            maximum_lag_on_failover: 1048576,
            synchronous_mode: settings.synchronous !== 'off',
            synchronous_mode_strict: settings.synchronous === 'strict',
            postgresql: { use_pg_rewind: true, use_slots: true, parameters },
          },
          initdb: [{ encoding: 'UTF8' }, { locale: 'C.UTF-8' }, 'data-checksums'],
        },
        postgresql: {
          listen: `127.0.0.1:${state.port}`,
          connect_address: `127.0.0.1:${state.port}`,
          data_dir: state.dataDir,
          bin_dir: PG_BIN,
          pgpass: join(state.dir, 'pgpass'),
          authentication: {
            superuser: { username: 'postgres' },
            replication: { username: 'replicator' },
            rewind: { username: 'postgres' },
          },
          parameters: { unix_socket_directories: state.dir },
          pg_hba: ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host replication all 127.0.0.1/32 trust'],
          use_unix_socket: false,
          remove_data_directory_on_rewind_failure: true,
          remove_data_directory_on_diverged_timelines: true,
        },
        watchdog: { mode: 'off' },
        tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false },
      };
      writeFileSync(
        state.configFile,
        `# Patroni for ${state.name} of ${scope} (test/failover/cluster.ts)\n${toYaml(config)}`,
      );
      own(state.configFile);
    }

    // The first node bootstraps (initdb); the others clone it once it leads.
    const [first, ...rest] = nodes;
    if (!first) throw new Error('no node');
    startPatroni(first);
    await waitForLeader(options.startTimeout ?? 120_000);
    for (const state of rest) startPatroni(state);

    if (haproxyPort) {
      const haproxyDir = join(dir, 'haproxy');
      mkdirSync(haproxyDir);
      const configFile = join(haproxyDir, 'haproxy.cfg');
      writeFileSync(configFile, haproxyConfig(haproxyPort, nodes, haproxySocket));
      haproxy = spawnLogged(HAPROXY, ['-db', '-f', configFile], join(haproxyDir, 'haproxy.log'));
    }

    for (const state of rest) await waitForReplicaStreaming(state.name, options.startTimeout ?? 120_000);
    if (settings.synchronous !== 'off')
      await poll(
        async () => ((await syncStandby()) ? true : undefined),
        30_000,
        () => 'Patroni choosing a sync standby',
      );
    if (haproxyPort) {
      await waitForHaproxyOnLeader(30_000);
      await waitForWrite('haproxy', 30_000, 'first write via haproxy');
    }
    mark('cluster ready', `${Date.now() - started} ms`);
    watcher = watch();
    return cluster;
  } catch (error) {
    const logs = nodes.map((n) => `--- ${n.name} (${n.logFile}):\n${tail(n.logFile)}`).join('\n');
    await stop().catch(() => {});
    throw new Error(`the cluster did not start: ${(error as Error).message}\n${logs}`, { cause: error });
  }
}

/** HAProxy in front of the nodes: TCP to whichever node's Patroni answers `GET /primary` with 200 (as deploy/haproxy.cfg). */
export function haproxyConfig(
  port: number,
  nodes: ReadonlyArray<{ name: string; port: number; restPort: number }>,
  statsSocket?: string,
) {
  return [
    'global',
    '    maxconn 1000',
    ...(statsSocket ? [`    stats socket ${statsSocket} mode 600 level admin`] : []),
    '',
    'defaults',
    '    mode tcp',
    '    retries 2',
    '    timeout connect 2s',
    '    timeout client 30m',
    '    timeout server 30m',
    '    timeout check 2s',
    '',
    'listen postgres_primary',
    `    bind 127.0.0.1:${port}`,
    '    option httpchk GET /primary',
    '    http-check expect status 200',
    '    default-server inter 1s fall 2 rise 1 on-marked-down shutdown-sessions',
    ...nodes.map((n) => `    server ${n.name} 127.0.0.1:${n.port} maxconn 500 check port ${n.restPort}`),
    '',
  ].join('\n');
}

/**
 * A test's `skip` when Debian's packages it drives are missing: the reason, naming what to install;
 * false when they are there, and always false under CI, which installs them (.ci/run), so a missing
 * package fails there instead of passing unseen.
 */
export function skipWithout(binaries: readonly string[], packages: string): string | false {
  const missing = binaries.filter((path) => !existsSync(path));
  return missing.length > 0 && process.env.CI !== 'true'
    ? `needs ${missing.join(', ')}: apt-get install ${packages} (Debian's packages)`
    : false;
}
