import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, readFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { reapAtExit } from '../process.js';
import { freePort } from '../support/postgres.js';

// Brokers of a test's own, on ports of its own, that it kills (SIGKILL) and starts again on the same
// data: Debian's nats-server, and a RabbitMQ node of its own (run as the rabbitmq user, as the
// machine's is, its Mnesia in the test's folder). The machine's brokers are never touched.

const NATS_SERVER = '/usr/sbin/nats-server';
const RABBITMQ_SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server';

/** Whether this machine can run them: the binaries, and root (to start RabbitMQ as its user). */
export function ownBrokersPossible(): string | undefined {
  try {
    execFileSync(NATS_SERVER, ['--version'], { stdio: 'ignore' });
    execFileSync(RABBITMQ_SERVER.replace('rabbitmq-server', 'rabbitmq-env'), [], { stdio: 'ignore' });
    execFileSync('id', ['rabbitmq'], { stdio: 'ignore' });
  } catch {
    return `needs ${NATS_SERVER}, ${RABBITMQ_SERVER} and the rabbitmq user (Debian's nats-server and rabbitmq-server)`;
  }
  return process.getuid?.() === 0 ? undefined : 'starts a RabbitMQ node as the rabbitmq user: run as root';
}

/** Resolves once something accepts connections on 127.0.0.1:`port`, at most `ms`. */
export async function listening(port: number, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = netConnect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port} after ${ms} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface OwnBroker {
  readonly port: number;
  readonly url: string;
  start(): Promise<void>;
  /** SIGKILL, no shutdown: what is not on disk is lost, as in a crash. */
  kill(): void;
}

export async function ownNats(dir: string): Promise<OwnBroker> {
  const port = await freePort();
  const store = join(dir, 'jetstream');
  let child: ChildProcess | undefined;
  return {
    port,
    url: `nats://127.0.0.1:${port}`,
    async start() {
      child = spawn(NATS_SERVER, ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', store], { stdio: 'ignore' });
      reapAtExit(child);
      await listening(port, 30_000);
    },
    kill() {
      child?.kill('SIGKILL');
    },
  };
}

export async function ownRabbit(dir: string): Promise<OwnBroker> {
  const port = await freePort();
  const distPort = await freePort();
  const home = join(dir, 'rabbitmq');
  mkdirSync(home, { recursive: true });
  // The rabbitmq user runs the node: it may enter the test's folder and owns its own.
  for (let at = dir; at !== '/' && at !== '/tmp'; at = join(at, '..')) chmodSync(at, 0o755);
  const uid = Number(execFileSync('id', ['-u', 'rabbitmq'], { encoding: 'utf8' }));
  const gid = Number(execFileSync('id', ['-g', 'rabbitmq'], { encoding: 'utf8' }));
  chownSync(home, uid, gid);
  const node = `plantstore${port}@localhost`;
  const env = {
    RABBITMQ_NODENAME: node,
    RABBITMQ_NODE_PORT: String(port),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_MNESIA_BASE: join(home, 'mnesia'),
    RABBITMQ_LOG_BASE: join(home, 'log'),
    RABBITMQ_PID_FILE: join(home, 'pid'),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(home, 'plugins'),
    RABBITMQ_CONFIG_FILE: join(home, 'rabbitmq'),
    HOME: home,
  };
  /** The node's pid, read once it listens: kill() needs no file, even after its folder is gone. */
  let running: number | undefined;
  const pid = (): number | undefined => {
    try {
      return Number(readFileSync(env.RABBITMQ_PID_FILE, 'utf8').trim());
    } catch {
      return undefined;
    }
  };
  const broker: OwnBroker & { stop(): void } = {
    port,
    url: `amqp://guest:guest@127.0.0.1:${port}`,
    async start() {
      execFileSync(
        'runuser',
        [
          '-u',
          'rabbitmq',
          '--',
          'env',
          ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
          RABBITMQ_SERVER,
          '-detached',
        ],
        { stdio: 'ignore', cwd: home },
      );
      await listening(port, 60_000);
      running = pid();
    },
    kill() {
      const at = running ?? pid();
      running = undefined;
      if (at !== undefined) {
        try {
          process.kill(at, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
    stop() {
      broker.kill();
    },
  };
  // A node left behind by a failed test would hold its ports: killed when this process exits.
  process.once('exit', () => broker.kill());
  return broker;
}
