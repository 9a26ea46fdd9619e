// The service unit's ExecStartPost= (deploy/plant-store.service): returns once this machine's
// server answers GET /readyz with 200, so that `systemctl start` (and `enable --now`, `restart`)
// returns when the service is ready to serve, not when node has merely been started. The unit
// cannot be Type=notify: systemd's notification socket is a unix datagram socket, which Node
// cannot write to without a native addon.
//
//   node scripts/wait-ready.mjs --timeout 60s
//
// HOST and PORT are read from the environment as the server reads them: systemd gives both
// processes the same EnvironmentFile=. A server listening on every address (0.0.0.0, ::) is asked
// on loopback. systemd waits for ExecStartPost= even when the service's main process has exited
// meanwhile (a setting that does not parse, a database it cannot reach), so this stops waiting as
// soon as $MAINPID (which systemd sets for it) has gone: a failed start fails at once, not after
// the timeout.
//
// Exit 0 once /readyz has answered 200. Exit 1 when it has not within the timeout, or when the
// main process has exited first: one JSON line on stdout in the log's shape (level 50) and one line
// on stderr say which, and what /readyz answered last. Exit 2 when the command line or the settings
// do not parse.
import { performance } from 'node:perf_hooks';
import process from 'node:process';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { loadConfig } from '../dist/config.js';

// Node's own (undici), without a dependency.
const { fetch, AbortSignal } = globalThis;
/** Between two asks; an answer that does not come within ASK_MS is counted as none. */
const PAUSE_MS = 250;
const ASK_MS = 2000;
const USAGE = 'usage: node scripts/wait-ready.mjs --timeout <seconds>s';

function fail(code, line) {
  process.stderr.write(`plant-store wait-ready: ${line}\n`);
  process.exit(code);
}

const args = process.argv.slice(2);
const timeout = args.length === 2 && args[0] === '--timeout' ? /^([1-9][0-9]{0,4})s$/.exec(args[1]) : null;
if (timeout === null) fail(2, USAGE);
const timeoutMs = Number(timeout[1]) * 1000;

let config;
try {
  config = loadConfig(process.env);
} catch (error) {
  fail(2, `the settings do not parse (the server will not start either): ${error.message}`);
}
if (config.port === 0) fail(2, 'PORT=0 listens on a port chosen at each start: there is no address to wait on');

/** Where this machine reaches the server: loopback for an address that means every interface. */
function reachAt(host) {
  if (host === '' || host === '0.0.0.0') return '127.0.0.1';
  if (host === '::' || host === '[::]') return '[::1]';
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}
const url = `http://${reachAt(config.host)}:${config.port}/readyz`;

/** What one GET said: 'ready', or how it fell short, for the line that reports a timeout. */
async function ask(limitMs) {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(limitMs) });
    const body = await response.text();
    if (response.status === 200) return 'ready';
    let message = body.slice(0, 200);
    try {
      message = JSON.parse(body).message ?? message;
    } catch {
      // not JSON: the body's start as it is
    }
    return `${response.status} ${message}`.trim();
  } catch (error) {
    if (error.name === 'TimeoutError') return `no answer within ${limitMs} ms`;
    // fetch's own 'fetch failed' hides the reason in its cause: `connect ECONNREFUSED 127.0.0.1:8080`.
    return error.cause?.message || error.cause?.code || error.message;
  }
}

/** The service's main process, when systemd names it; signal 0 tests that it still runs. */
const mainPid = /^[1-9][0-9]*$/.test(process.env.MAINPID ?? '') ? Number(process.env.MAINPID) : undefined;
function running(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM'; // there, but another user's
  }
}

const log = pino({ level: config.logLevel }, pino.destination({ fd: 1, sync: true }));
const started = performance.now();
let last = 'not asked';
for (;;) {
  if (mainPid !== undefined && !running(mainPid)) {
    log.error({ url, mainPid, last }, 'the service exited before it was ready');
    fail(1, `the service (pid ${mainPid}) exited before GET ${url} answered 200; its own lines say why`);
  }
  const left = timeoutMs - (performance.now() - started);
  last = await ask(Math.max(1, Math.min(ASK_MS, Math.floor(left))));
  const waitedMs = Math.round(performance.now() - started);
  if (last === 'ready') {
    log.info({ url, waitedMs }, 'the service is ready: /readyz answered 200');
    process.exit(0);
  }
  if (waitedMs + PAUSE_MS >= timeoutMs) break;
  await sleep(PAUSE_MS);
}
log.error({ url, timeoutMs, last }, 'the service was not ready in time: /readyz did not answer 200');
fail(1, `GET ${url} did not answer 200 within ${timeoutMs / 1000} s; its last answer: ${last}`);
