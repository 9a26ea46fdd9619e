import { createReadStream, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { TOKEN_PREFIX, parseToken } from './auth/token.js';
import { TokenInputError, TokenService } from './auth/token.service.js';
import { isPrimary, runPrimary } from './cluster.js';
import { plantsCommand } from './cli/plants.js';
import { UsageError, err, out, table } from './cli/output.js';
import { ConfigError, DEFAULT_CLIENT_URL, loadConfig, parseDuration, parseWorkers } from './config.js';
import { releaseProcess, serve } from './server.js';
import { openStore } from './store/open-store.js';
import type { Store, TokenRecord } from './store/store.js';
import { exportPlants } from './transfer/export.js';
import { importPlants } from './transfer/import.js';
import { Progress, formatCount } from './transfer/progress.js';

const USAGE = `Usage: plant-store <command>

Commands:
  serve [--workers N]           run the HTTP service (applies migrations first); N worker processes
                                share the port (default: WORKERS, or 1)
  migrate                       apply schema migrations
  token create --subject <user> --scopes <s1,s2> [--expires-in 30d|12h|90s] [--json]
                                issue an API token; the secret is printed once
  token list [--json]           list tokens (never their secrets)
  token revoke <token-id>       revoke a token (its id, or the whole token); servers refuse it within 5 seconds
  export                        write every plant (id, owner, name, tag) as NDJSON to stdout
  import <file|->               load NDJSON plants in batched transactions; idempotent; invalid
                                lines are reported by number and nothing of them is stored

A client of a running server (through the API, so scopes and ownership apply):
  plants list [--tag T] [--limit N] [--json]
                                every plant the token can reach, in id order, fetched N per request
                                (1-1000, default 100): a table on a terminal, else one "name<TAB>tag"
                                line each; --json: one JSON array of plants ({"name","tag"}: the API
                                returns no ids)
  plants create --id <int64> --name <name> [--tag <tag>] [--json]
                                create a plant; --json prints {"id","name","tag"} with the id exact
  plants delete <id>            delete a plant (a negative id: --id=-5, or delete -- -5)
  These take --url <url> (or PLANT_STORE_URL; default ${DEFAULT_CLIENT_URL}) and --token <token>
  (or PLANT_STORE_TOKEN, which is better: arguments are visible to other users in ps). Failures the
  server reports as retryable (408, 429, 502-504) and lost answers are retried 3 times with backoff.

Exit codes: 0 done; 1 it failed (for plants: the server refused, "error <status>: <message>" on
stderr); 2 the command or a setting was wrong; 3 (plants) the server could not be reached.

Scopes: plants:read, plants:write, plants:admin.
Settings come from the environment: PORT, HOST, DATABASE_URL, LOG_LEVEL, RATE_LIMIT, BODY_LIMIT,
WORKERS, REDIS_URL (see the README).`;

const MAX_EXPIRY_MS = 3650 * 86_400_000; // ten years; omit --expires-in for a token that never expires

/** Opens the configured store, brought up to date, for one command. */
async function withStore<T>(run: (store: Store, applied: number[]) => Promise<T>): Promise<T> {
  const config = loadConfig();
  const store = await openStore(config.database, { poolSize: config.databasePoolSize });
  try {
    return await run(store, await store.migrate());
  } finally {
    await store.close();
  }
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

function status(token: TokenRecord, now: number): string {
  if (token.revokedAt !== null) return 'revoked';
  if (token.expiresAt !== null && token.expiresAt <= now) return 'expired';
  return 'active';
}

async function tokenCreate(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      subject: { type: 'string' },
      scopes: { type: 'string' },
      'expires-in': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  if (values.subject === undefined || values.scopes === undefined) {
    throw new UsageError('token create needs --subject <user> and --scopes <scope,...>');
  }
  let expiresInMs: number | undefined;
  if (values['expires-in'] !== undefined) {
    expiresInMs = parseDuration(values['expires-in']);
    if (expiresInMs === undefined || expiresInMs > MAX_EXPIRY_MS) {
      throw new UsageError('--expires-in takes a duration up to 3650d, such as 30d, 12h or 90s');
    }
  }
  const scopes = values.scopes
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const issued = await withStore((store) =>
    new TokenService(store).create({ subject: values.subject!, scopes, expiresInMs }),
  );
  if (values.json) {
    const { id, token, subject, scopes: granted, expiresAt } = issued;
    out(JSON.stringify({ id, token, subject, scopes: granted, expiresAt: iso(expiresAt) }));
    return;
  }
  // The secret alone on stdout (TOKEN=$(plant-store token create …) works); the rest on stderr.
  out(issued.token);
  err(
    `Created token ${issued.id} for ${issued.subject} (${issued.scopes.join(',')}), ` +
      `${issued.expiresAt === null ? 'no expiry' : `expires ${iso(issued.expiresAt)}`}. ` +
      'Copy the secret now: it is not stored and cannot be shown again.',
  );
}

async function tokenList(args: string[]): Promise<void> {
  const { values } = parseArgs({ args, options: { json: { type: 'boolean', default: false } } });
  const tokens = await withStore((store) => new TokenService(store).list());
  const now = Date.now();
  if (values.json) {
    const rows = tokens.map((t) => ({
      id: t.id,
      subject: t.subject,
      scopes: t.scopes,
      createdAt: iso(t.createdAt),
      expiresAt: iso(t.expiresAt),
      revokedAt: iso(t.revokedAt),
      status: status(t, now),
    }));
    out(JSON.stringify(rows));
    return;
  }
  if (tokens.length === 0) {
    err('No tokens yet. Create one with: plant-store token create --subject <user> --scopes plants:read,plants:write');
    return;
  }
  const header = ['ID', 'SUBJECT', 'SCOPES', 'CREATED', 'EXPIRES', 'STATUS'];
  const rows = tokens.map((t) => [
    t.id,
    t.subject,
    t.scopes.join(','),
    iso(t.createdAt)!,
    iso(t.expiresAt) ?? 'never',
    status(t, now),
  ]);
  out(table([header, ...rows]));
}

async function tokenRevoke(args: string[]): Promise<number> {
  const { positionals } = parseArgs({ args, allowPositionals: true, options: {} });
  if (positionals.length !== 1) throw new UsageError('token revoke takes one token id (see plant-store token list)');
  // A whole token is accepted too (a leaked one is what people paste), and never echoed back.
  const given = positionals[0]!;
  const id = given.startsWith(TOKEN_PREFIX) ? parseToken(given) : given;
  if (id === undefined) {
    throw new UsageError('that is not a whole token (its checksum does not match); give its id from `token list`');
  }
  if (!(await withStore((store) => new TokenService(store).revoke(id)))) {
    err(`No token with id ${id}.`);
    return 1;
  }
  err(`Revoked token ${id}. Running servers refuse it within 5 seconds.`);
  return 0;
}

async function exportCommand(args: string[]): Promise<number> {
  parseArgs({ args, options: {} });
  const written = await withStore((store) =>
    exportPlants(store, process.stdout, new Progress(process.stderr, 'plants', { lineEvery: 100_000 })),
  );
  err(`Exported ${formatCount(written)} plants.`);
  return 0;
}

const MAX_PROBLEMS_SHOWN = 50;

async function importCommand(args: string[]): Promise<number> {
  const { positionals } = parseArgs({ args, allowPositionals: true, options: {} });
  if (positionals.length !== 1) throw new UsageError('import takes one file of NDJSON plants, or - for stdin');
  const source = positionals[0]!;
  let totalBytes: number | undefined;
  if (source !== '-') {
    try {
      totalBytes = statSync(source).size;
    } catch {
      throw new UsageError(`cannot read ${source}`);
    }
  }
  const input = source === '-' ? process.stdin : createReadStream(source);
  const progress = new Progress(process.stderr, 'lines', { totalBytes });
  const summary = await withStore((store) => importPlants(input, store, { progress }));
  const problems = [...summary.invalid, ...summary.conflicts].sort((a, b) => a.line - b.line);
  for (const problem of problems.slice(0, MAX_PROBLEMS_SHOWN)) err(`line ${problem.line}: ${problem.message}`);
  if (problems.length > MAX_PROBLEMS_SHOWN) err(`… and ${problems.length - MAX_PROBLEMS_SHOWN} more problems`);
  progress.finish(
    `Imported ${formatCount(summary.imported)} plants; ${formatCount(summary.unchanged)} unchanged, ` +
      `${formatCount(summary.conflicts.length)} conflicting, ${formatCount(summary.invalid.length)} invalid ` +
      `(${formatCount(summary.lines)} lines)`,
  );
  return problems.length > 0 ? 1 : 0;
}

async function run(argv: string[]): Promise<number> {
  const [command, sub, ...rest] = argv;
  switch (command) {
    case 'serve': {
      const { values, positionals } = parseArgs({
        args: argv.slice(1),
        allowPositionals: true,
        options: { workers: { type: 'string' } },
      });
      if (positionals.length > 0)
        throw new UsageError('serve takes only --workers; settings come from the environment');
      const env = loadConfig();
      const config = values.workers === undefined ? env : { ...env, workers: parseWorkers(values.workers) };
      if (config.workers > 1 && isPrimary()) await runPrimary(config);
      else await serve(config);
      return 0;
    }
    case 'migrate':
      await withStore(async (_store, applied) =>
        err(applied.length > 0 ? `Applied migrations ${applied.join(', ')}.` : 'The database schema is up to date.'),
      );
      return 0;
    case 'export':
      return exportCommand(argv.slice(1));
    case 'import':
      return importCommand(argv.slice(1));
    case 'plants':
      return plantsCommand(sub, rest);
    case 'token':
      if (sub === 'create') return tokenCreate(rest).then(() => 0);
      if (sub === 'list') return tokenList(rest).then(() => 0);
      if (sub === 'revoke') return tokenRevoke(rest);
      throw new UsageError(`unknown token command "${sub ?? ''}": use create, list or revoke`);
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      out(USAGE);
      return command === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown command "${command}"`);
  }
}

run(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (error: unknown) => {
    const usage = error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
    if (usage) {
      err(`plant-store: ${(error as Error).message}\n\n${USAGE}`);
      process.exitCode = 2;
    } else if (error instanceof ConfigError || error instanceof TokenInputError) {
      err(`plant-store: ${error.message}`);
      process.exitCode = 2;
    } else {
      err(`plant-store: ${error instanceof Error ? error.message : String(error)}`);
      process.exitCode = 1;
    }
    releaseProcess(); // a worker that failed to start must exit, so its primary sees it
  },
);
