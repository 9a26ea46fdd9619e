// The usage of the plant-store command: every number in it comes from the code that decides it.
import { loadConfig } from '../config.js';
import { describeDatabase } from '../launch.js';
import { BACKUP_USAGE } from './backup.js';
import { EXIT_UNREACHABLE, PLANTS_CONNECTION_USAGE } from './plants-connection.js';
import { PLANTS_USAGE } from './plants.js';
import { TOKEN_USAGE } from './token.js';
import { TRANSFER_USAGE } from './transfer.js';
import { WEBHOOKS_USAGE } from './webhooks.js';

const defaults = loadConfig({});

/**
 * Lines a user can paste into a POSIX shell, in order, beside a server on the same DATABASE_URL
 * at PLANT_STORE_URL (test/cli/as-printed.test.ts runs them so, as printed). They delete what they
 * create, so that the examples after them in docs/cli.md run too (test/docs/walkthrough.test.ts).
 * The token is assigned on a line of its own: `export T="$(…)"` answers export's status, 0, when
 * the command fails, and went on with an empty token (issue 35, 3); `T=$(…)` answers the command's.
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

/** What makes the bare `plant-store` of the usage and the docs run in a checkout (issue 35, 3). */
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
 * instead of all of USAGE (issue 17: one wrong option printed 30 lines). Undefined for an unknown one.
 */
export function usageFor(command: string): string | undefined {
  const own = ENTRIES.filter((entry) => entry.startsWith(`  ${command} `) || entry === `  ${command}`);
  if (own.length === 0) return undefined;
  return (command.startsWith('plants') ? [...own, PLANTS_CONNECTION_USAGE] : own).join('\n');
}
