// The usage of the plant-store command, every command's lines of it, and the limits those lines
// state, which the commands import from here to check their input: one place for each number and
// each text. This module imports only light ones (config.ts, the typed client, constants), never
// a command's module: `--help`, `--version` and a usage mistake load nothing that opens a database,
// logs, validates schemas or serves HTTP (test/cli/light-start.test.ts checks it), so they answer
// in the time Node itself takes to start.
import { DEFAULT_RETRY_POLICY, LIMIT, RETRY_STATUSES } from '@plant-store/client';
import { DEFAULT_CLIENT_URL, describeDatabase, loadConfig } from '../config.js';
import { OVERLAP_MAX_SECONDS } from '../webhooks/secret-overlap.js';

const defaults = loadConfig({});

/** `token create --expires-in`: ten years at most; without it a token never expires. */
export const MAX_EXPIRY_DAYS = 3650;

/**
 * How long a running server may still accept a revoked token: it reuses a token's record from
 * memory that long (the token cache of src/auth/authenticator.ts, `tokenCacheMs` of the config).
 */
export const REVOCATION_SECONDS = defaults.tokenCacheMs / 1000;

/** How many deliveries a page of `webhooks deliveries` shows (`--before` gives the next page). */
export const DELIVERIES = { default: 20, max: 1000 } as const;

/** `plants …`: 1 when the server refused, 3 when it could not be reached (2 stays "called wrongly"). */
export const EXIT_UNREACHABLE = 3;

/** 408, 429, 502-504: runs of consecutive statuses written as ranges. */
function statusList(statuses: Iterable<number>): string {
  const runs: number[][] = [];
  for (const s of [...statuses].sort((a, b) => a - b)) {
    const last = runs.at(-1);
    if (last !== undefined && last.at(-1) === s - 1) last.push(s);
    else runs.push([s]);
  }
  return runs.map((r) => (r.length > 2 ? `${r[0]}-${r.at(-1)}` : r.join(', '))).join(', ');
}

const TOKEN_USAGE = `  token create --subject <user> --scopes <s1,s2> [--expires-in 30d|12h|90s] [--json]
                                issue an API token; the secret is printed once. --expires-in: up to
                                ${MAX_EXPIRY_DAYS}d (s, m, h, d); without it the token never expires
  token list [--subject <user>] [--limit N] [--after <token-id>] [--json]
                                list tokens (never their secrets), oldest first: all of them, or
                                the first N with --limit; --after: those after that token (the next
                                page: after the last id printed, as stderr says when more follow);
                                --subject: that user's only; --json: one JSON array
  token revoke <token-id>       revoke a token (its id, or the whole token); running servers refuse
                                it within ${REVOCATION_SECONDS} seconds`;

const TRANSFER_USAGE = `  export                        write every plant (id, owner, name, tag) as NDJSON to stdout: the
                                store at one instant, while the server goes on writing
  import <file|->               load NDJSON plants in batched transactions; idempotent; invalid
                                lines are reported by number and nothing of them is stored`;

const BACKUP_USAGE = `  backup <file> [--force]       copy the SQLite database to <file> while the server runs: the
                                database at one instant (SQLite's online backup); refuses an existing
                                <file> unless --force. On PostgreSQL use pg_dump (docs/operations.md)`;

const WEBHOOKS_USAGE = `  webhooks list [--subject <user>] [--json]
                                every webhook (or one subject's): id, subject, URL, events,
                                status, creation; never their secrets
  webhooks add --subject <user> --url <https://…> [--events plant.created,plant.deleted]
               [--description <text>] [--all-plants] [--json]
  webhooks add --subject <user> --broker <name> (--broker-subject <s> | --routing-key <k>) [...]
                                subscribe a URL, or a destination on a broker BROKERS names (a NATS
                                subject, a RabbitMQ routing key), for a subject; the signing secret
                                is printed once.
                                --all-plants: every plant's events (as a plants:admin caller gets)
  webhooks remove <webhook-id>  delete a webhook and its delivery records
  webhooks deliveries <webhook-id> [--limit N] [--before <delivery-id>] [--json]
                                its newest N deliveries, newest first (1-${DELIVERIES.max}, default ${DELIVERIES.default});
                                --before: the page of older ones, as the last page's hint says
  webhooks retry <webhook-id> <delivery-id>
                                send a delivery again (same webhook-id), at once
  webhooks enable <webhook-id>  make a disabled webhook active again
  webhooks update <webhook-id> [--url <https://…>] [--events plant.created,…]
                  [--broker <name> (--broker-subject <s> | --routing-key <k>)]
                  [--description <text>] [--status active|disabled] [--json]
                                change a webhook (a destination's subject or key with --broker);
                                --status disabled pauses its deliveries
  webhooks rotate <webhook-id> [--overlap 24h] [--json]
                                a new signing secret, printed once; the old one signs beside it
                                for --overlap (0 to ${OVERLAP_MAX_SECONDS / 86_400}d, default 24h; 0: from now on only the new)
  webhooks ping <webhook-id> [--json]
                                send a test delivery (webhook.ping) now, whatever its status
  webhooks recover <webhook-id> --since <RFC 3339> [--json]
                                send its failed deliveries created since then again, from the
                                start of the retry schedule, and what a pause missed; a long one
                                prints its progress on stderr every 5 s, and one stopped midway
                                is finished by running it again
  webhooks attempts <webhook-id> <delivery-id> [--json]
                                a delivery's attempts, newest first: status, time, error, answer`;

const PLANTS_USAGE = `  plants list [--tag T] [--limit N] [--page-size N] [--json]
                                the plants the token can reach, in id order: all of them, or the
                                first N with --limit; fetched --page-size per request (${LIMIT.min}-${LIMIT.max},
                                default ${LIMIT.default}); a table on a terminal, else one "name<TAB>tag" line
                                each; --json: one JSON array of plants ({"name","tag"}: the API
                                returns no ids)
  plants create --id <int64> --name <name> [--tag <tag>] [--json]
                                create a plant (a negative id as it is: --id -5); --json prints
                                {"id","name","tag"} with the id exact
  plants delete --id <int64>    delete a plant (or: plants delete <int64>)`;

const PLANTS_CONNECTION_USAGE = `  These take --url <url> (or PLANT_STORE_URL; default ${DEFAULT_CLIENT_URL}) and --token <token>
  (or PLANT_STORE_TOKEN, which is better: arguments are visible to other users in ps). Failures the
  server reports as retryable (${statusList(RETRY_STATUSES)}) and lost answers are retried ${DEFAULT_RETRY_POLICY.retries} times with backoff.`;

/**
 * Lines a user can paste into a POSIX shell, in order, beside a server on the same DATABASE_URL
 * at PLANT_STORE_URL (test/cli/as-printed.test.ts runs them so, as printed). They delete what they
 * create, so that the examples after them in docs/cli.md run too (test/docs/walkthrough.test.ts).
 * The token is assigned on a line of its own: `export T="$(…)"` answers export's status, 0, when
 * the command fails, so the lines after it would go on with an empty token; `T=$(…)` answers the
 * command's.
 */
export const EXAMPLES = [
  'PLANT_STORE_TOKEN=$(plant-store token create --subject alice --scopes plants:read,plants:write)',
  'export PLANT_STORE_TOKEN',
  'plant-store plants create --id -5 --name Fern --tag shade',
  'plant-store plants create --id=9007199254740993 --name Monstera --json',
  'plant-store plants list --limit 1',
  'plant-store plants list --tag shade --json',
  'plant-store export > plants.ndjson',
  'plant-store plants delete --id -5',
  'plant-store plants delete --id=9007199254740993',
  'plant-store import plants.ndjson',
  'plant-store plants delete -5',
  'plant-store plants delete 9007199254740993',
  'plant-store token revoke "$PLANT_STORE_TOKEN"',
];

/** What makes the bare `plant-store` of the usage and the docs run in a checkout. */
export const CHECKOUT_PATH = 'export PATH="$PWD/bin:$PATH"';

export const USAGE = `Usage: plant-store <command> [options]      (plant-store <command> --help: that command alone)
In a checkout, to run it as plant-store: ${CHECKOUT_PATH}   (once per shell, in the checkout's root)

Commands:
  serve [--workers N] [--settings-file F]
                                run the HTTP service (applies migrations first); N worker processes
                                share the port (default: WORKERS, or ${defaults.workers}); settings from the
                                environment and F (NAME=value lines); with --workers, SIGHUP reloads
                                (reads F again, replaces the workers one at a time)
  migrate                       apply schema migrations
  --version, -v                 print the version (package.json's) and exit
${TOKEN_USAGE}
${TRANSFER_USAGE}
${BACKUP_USAGE}
${WEBHOOKS_USAGE}

A client of a running server (through the API, so scopes and ownership apply):
${PLANTS_USAGE}
${PLANTS_CONNECTION_USAGE}

Exit codes: 0 done; 1 it failed (for plants: the server refused, "error <status>: <message>" on
stderr); 2 the command or a setting was wrong; ${EXIT_UNREACHABLE} (plants) the server could not be reached.

Scopes: plants:read, plants:write, plants:admin, webhooks:read, webhooks:write.
The commands that open the database (all but serve and plants) first name it on stderr:
"plant-store: database ${describeDatabase(defaults.database)}" (default), or the PostgreSQL URL without its password.
Settings come from the environment (PORT, HOST, DATABASE_URL, …: every one in docs/settings.md).

Examples, in a shell beside a server that uses the same DATABASE_URL, at PLANT_STORE_URL:
${EXAMPLES.map((line) => `  ${line}`).join('\n')}`;

/** A command's own lines: each entry starts at two spaces of indent, its description deeper. */
const ENTRIES = (() => {
  const entries: string[][] = [];
  const commands = USAGE.slice(0, USAGE.indexOf('\nExamples'));
  for (const line of commands.split('\n')) {
    if (/^ {2}\S/.test(line)) entries.push([line]);
    else if (/^ {3,}\S/.test(line) && entries.length > 0) entries.at(-1)!.push(line);
    else entries.push([]);
  }
  return entries.filter((entry) => entry.length > 0).map((entry) => entry.join('\n'));
})();

/**
 * The usage of one command (`plants create`) or group (`plants`): what follows a mistake in it,
 * instead of all of USAGE, whose 30 lines would bury the one mistake. Undefined for an unknown one.
 */
export function usageFor(command: string): string | undefined {
  const own = ENTRIES.filter((entry) => entry.startsWith(`  ${command} `) || entry === `  ${command}`);
  if (own.length === 0) return undefined;
  return (command.startsWith('plants') ? [...own, PLANTS_CONNECTION_USAGE] : own).join('\n');
}
