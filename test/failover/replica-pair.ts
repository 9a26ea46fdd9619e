import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { type AddressInfo, type Socket, connect, createServer as createNetServer } from 'node:net';
import pg from 'pg';
import { freePort } from '../support/postgres.js';

// Two PostgreSQL 15 servers of this machine's own binaries, a primary and a streaming standby, in
// a temporary folder, on ports of their own: what the multi-host URL's tests connect to. A
// failover here is done by hand (stop the primary, promote the standby), the moves a failover
// manager makes; test/failover/cluster.ts runs the same under Patroni. PostgreSQL refuses to run
// as root, so as root every command runs as the `postgres` user (runuser), in a folder it owns.

const BIN = '/usr/lib/postgresql/15/bin';
const run = promisify(execFile);
const asRoot = process.getuid?.() === 0;

function command(tool: string, args: string[]): [string, string[]] {
  return asRoot ? ['runuser', ['-u', 'postgres', '--', join(BIN, tool), ...args]] : [join(BIN, tool), args];
}

async function tool(name: string, args: string[]): Promise<string> {
  const [file, all] = command(name, args);
  return (await run(file, all, { timeout: 60_000 })).stdout;
}

export interface Server {
  readonly port: number;
  readonly dir: string;
  child: ChildProcess | undefined;
}

export interface ReplicaPair {
  readonly primary: Server;
  readonly standby: Server;
  /** `postgres://postgres@127.0.0.1:<a>,127.0.0.1:<b>/postgres?…`, the hosts in the order given. */
  url(order: ReadonlyArray<Server>, query?: string): string;
  /** Runs SQL on one server (autocommit). */
  sql(server: Server, text: string): Promise<pg.QueryResult>;
  /** Stops a server: `fast` as a switchover does, `kill` (SIGKILL) as a crash. */
  stop(server: Server, how: 'fast' | 'kill'): Promise<void>;
  /** Makes the standby a primary (pg_ctl promote), waiting until it accepts writes. */
  promote(server: Server): Promise<void>;
  /** Starts a stopped server again, as it was left: an old primary restarted without being rewound. */
  restart(server: Server): Promise<void>;
  /** SIGSTOP (or SIGCONT) to the server's postmaster and every process of it: a frozen host. */
  freeze(server: Server, frozen: boolean): Promise<void>;
  /** The standby stops receiving WAL (primary_conninfo emptied): what it has not received is lost to it. */
  stopReceiving(server: Server): Promise<void>;
  /** Everything stopped and removed. */
  close(): Promise<void>;
}

async function startServer(server: Server): Promise<void> {
  const [file, args] = command('postgres', ['-D', server.dir, '-p', String(server.port), '-k', server.dir]);
  const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let errors = '';
  child.stderr.on('data', (chunk: Buffer) => void (errors += chunk.toString()));
  server.child = child;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`postgres on ${server.port} exited: ${errors}`);
    const client = new pg.Client({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres' });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.end();
      return;
    } catch {
      await client.end().catch(() => {});
      if (Date.now() > deadline) throw new Error(`postgres on ${server.port} did not answer: ${errors}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/**
 * `synchronous`: the primary waits for its standby's flush before a COMMIT answers (set on the
 * primary alone, after the base backup, so the standby once promoted does not wait for a standby
 * it lacks). Without it, replication is asynchronous: an acknowledged tail may be lost.
 */
export async function startReplicaPair(options: { synchronous?: boolean } = {}): Promise<ReplicaPair> {
  const root = mkdtempSync(join(tmpdir(), 'plant-store-pair-'));
  if (asRoot) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(root, Number(stdout.trim()), Number(gid.trim()));
  }
  const primary: Server = { port: await freePort(), dir: join(root, 'primary'), child: undefined };
  const standby: Server = { port: await freePort(), dir: join(root, 'standby'), child: undefined };
  const settings = [
    ['listen_addresses', "'127.0.0.1'"],
    ['wal_level', 'replica'],
    ['max_wal_senders', '5'],
    ['hot_standby', 'on'],
    ['fsync', 'on'],
    ['shared_buffers', '32MB'],
  ];
  await tool('initdb', ['-D', primary.dir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-instructions']);
  await run(asRoot ? 'runuser' : 'sh', [
    ...(asRoot ? ['-u', 'postgres', '--', 'sh'] : []),
    '-c',
    `printf '%s\\n' ${settings.map(([k, v]) => `"${k} = ${v}"`).join(' ')} >> ${primary.dir}/postgresql.conf && ` +
      `printf '%s\\n' "host replication all 127.0.0.1/32 trust" >> ${primary.dir}/pg_hba.conf`,
  ]);
  await startServer(primary);
  // The standby: a base backup of the primary, told to follow it (-R writes primary_conninfo).
  await tool('pg_basebackup', [
    '-h',
    '127.0.0.1',
    '-p',
    String(primary.port),
    '-U',
    'postgres',
    '-D',
    standby.dir,
    '-R',
    '-X',
    'stream',
  ]);
  await startServer(standby);

  const sql = async (server: Server, text: string): Promise<pg.QueryResult> => {
    const client = new pg.Client({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres' });
    await client.connect();
    try {
      return await client.query(text);
    } finally {
      await client.end();
    }
  };
  // Streaming before anyone relies on it.
  for (let i = 0; ; i++) {
    const rows = (await sql(primary, 'SELECT count(*)::int AS n FROM pg_stat_replication')).rows as Array<{
      n: number;
    }>;
    if (rows[0]!.n === 1) break;
    if (i > 600) throw new Error('the standby never streamed from the primary');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  if (options.synchronous === true) {
    await sql(primary, "ALTER SYSTEM SET synchronous_standby_names = '*'");
    await sql(primary, 'SELECT pg_reload_conf()');
    for (let i = 0; ; i++) {
      const rows = (await sql(primary, "SELECT count(*)::int AS n FROM pg_stat_replication WHERE sync_state = 'sync'"))
        .rows as Array<{ n: number }>;
      if (rows[0]!.n === 1) break;
      if (i > 600) throw new Error('the standby never became synchronous');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** The postmaster (its pid is postmaster.pid's first line) and every process it started. */
  const processesOf = async (server: Server): Promise<number[]> => {
    const pid = Number(readFileSync(join(server.dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const { stdout } = await run('ps', ['-eo', 'pid=,ppid=']);
    const children = stdout
      .split('\n')
      .map((line) => line.trim().split(/\s+/).map(Number))
      .filter(([, parent]) => parent === pid)
      .map(([child]) => child!);
    return [pid, ...children];
  };

  const freeze = async (server: Server, frozen: boolean): Promise<void> => {
    const wrapper = server.child?.pid;
    if (wrapper === undefined) return;
    for (const pid of await processesOf(server)) process.kill(pid, frozen ? 'SIGSTOP' : 'SIGCONT');
    // runuser stops itself when the postmaster it waits for stops, and is not continued with it.
    if (!frozen) process.kill(wrapper, 'SIGCONT');
  };

  const stop = async (server: Server, how: 'fast' | 'kill'): Promise<void> => {
    const child = server.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    // The postmaster itself (runuser does not pass every signal on).
    const [pid, ...children] = await processesOf(server);
    if (how === 'kill') {
      // The postmaster and every backend at once: a crash leaves no process behind to answer.
      for (const each of [pid!, ...children]) {
        try {
          process.kill(each, 'SIGKILL');
        } catch {
          // gone already
        }
      }
    } else process.kill(pid!, 'SIGINT'); // PostgreSQL's fast shutdown
    // A runuser stopped with its frozen postmaster reaps it and exits only once continued.
    if (child.pid !== undefined) process.kill(child.pid, 'SIGCONT');
    await exited;
    server.child = undefined;
  };

  return {
    primary,
    standby,
    url: (order, query = '') =>
      `postgres://postgres@${order.map((s) => `127.0.0.1:${s.port}`).join(',')}/postgres${query === '' ? '' : `?${query}`}`,
    sql,
    stop,
    async promote(server) {
      await tool('pg_ctl', ['promote', '-w', '-D', server.dir]);
      for (let i = 0; ; i++) {
        const rows = (await sql(server, 'SELECT pg_is_in_recovery() AS r')).rows as Array<{ r: boolean }>;
        if (rows[0]!.r === false) return;
        if (i > 600) throw new Error('the standby was not promoted');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    restart: (server) => startServer(server),
    freeze,
    async stopReceiving(server) {
      await sql(server, "ALTER SYSTEM SET primary_conninfo = ''");
      await sql(server, 'SELECT pg_reload_conf()');
      for (let i = 0; ; i++) {
        const rows = (await sql(server, 'SELECT count(*)::int AS n FROM pg_stat_wal_receiver')).rows as Array<{
          n: number;
        }>;
        if (rows[0]!.n === 0) return;
        if (i > 600) throw new Error('the standby kept receiving');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    async close() {
      for (const server of [standby, primary]) await freeze(server, false).catch(() => {});
      await stop(standby, 'kill');
      await stop(primary, 'kill');
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * A TCP proxy on 127.0.0.1 in front of one server that can go silent without a reset, as a host
 * that vanished from the network does: `vanish()` leaves its connections open carrying nothing, and
 * new ones are accepted and carry nothing; `moveTo(port)` leaves the connections made so far silent
 * the same way and sends every new one to `port`, as a DNS name or proxy that moves does.
 */
export async function silentProxy(
  first: number,
): Promise<{ port: number; vanish(): void; moveTo(port: number): void; close(): void }> {
  let target: number | undefined = first;
  const sockets = new Set<Socket>();
  const silence = (): void => {
    for (const socket of sockets) {
      socket.unpipe();
      socket.pause(); // nothing more is read, so nothing more is passed on either way
    }
  };
  const server = createNetServer((client) => {
    sockets.add(client);
    client.on('error', () => {});
    if (target === undefined) return; // accepted, never answered
    const upstream = connect(target, '127.0.0.1');
    sockets.add(upstream);
    upstream.on('error', () => client.destroy());
    client.pipe(upstream);
    upstream.pipe(client);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as AddressInfo).port,
    vanish() {
      target = undefined;
      silence();
    },
    moveTo(port) {
      silence();
      target = port;
    },
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}
