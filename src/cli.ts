import { TokenInputError } from './auth/token.service.js';
import { isPrimary, runPrimary } from './cluster.js';
import { parseCommand } from './cli/args.js';
import { backupCommand } from './cli/backup.js';
import { withStore } from './cli/database.js';
import { UsageError, endQuietlyWhenStdoutCloses, err, out } from './cli/output.js';
import { plantsCommand } from './cli/plants.js';
import { tokenCommand } from './cli/token.js';
import { exportCommand, importCommand } from './cli/transfer.js';
import { COMMANDS, USAGE, usageFor } from './cli/usage.js';
import { webhooksCommand } from './cli/webhooks.js';
import { ConfigError, loadConfig, parseWorkers } from './config.js';
import { logStartupFailure, readSettingsFile } from './launch.js';
import { releaseProcess, serve } from './server.js';

async function serveCommand(args: string[]): Promise<number> {
  const { values, positionals } = parseCommand(
    'serve',
    args,
    { workers: 'string', 'settings-file': 'string' },
    { positionals: true },
  );
  if (positionals.length > 0) {
    throw new UsageError('serve takes only --workers and --settings-file; settings come from the environment', 'serve');
  }
  const file = values['settings-file'];
  // A worker got the file's values from its primary, in its environment: it does not read the file.
  let level: string | undefined;
  try {
    const fromFile = file === undefined || !isPrimary() ? {} : readSettingsFile(file);
    const env = loadConfig({ ...process.env, ...fromFile });
    const config = values.workers === undefined ? env : { ...env, workers: parseWorkers(values.workers) };
    level = config.logLevel;
    // Both return once serving, and throw only when the start fails. Workers asked for (even one,
    // by --workers or WORKERS) run under a primary, which is what reloads on SIGHUP.
    const workersAsked = values.workers !== undefined || 'WORKERS' in fromFile || process.env.WORKERS !== undefined;
    if (workersAsked && isPrimary()) await runPrimary(config, file);
    else await serve(config);
  } catch (error) {
    logStartupFailure(error, level); // the one JSON line naming the component that failed (issue 16)
    throw error;
  }
  return 0;
}

/** `plant-store <command> … --help` (before any `--`): the command's usage, or its group's. */
function helpAsked(argv: string[]): string | undefined {
  const [command, sub] = argv;
  const end = argv.indexOf('--');
  const options = argv.slice(1, end < 0 ? undefined : end);
  if (!options.includes('--help') && !options.includes('-h')) return undefined;
  return (sub !== undefined && usageFor(`${command} ${sub}`)) || usageFor(command!) || USAGE;
}

async function run(argv: string[]): Promise<number> {
  const [command, sub, ...rest] = argv;
  if (command !== 'serve') endQuietlyWhenStdoutCloses();
  const help = helpAsked(argv);
  if (help !== undefined) {
    out(help);
    return 0;
  }
  switch (command) {
    case 'serve':
      return serveCommand(argv.slice(1));
    case 'migrate':
      parseCommand('migrate', argv.slice(1), {});
      await withStore(async (_store, applied) =>
        err(applied.length > 0 ? `Applied migrations ${applied.join(', ')}.` : 'The database schema is up to date.'),
      );
      return 0;
    case 'export':
      return exportCommand(argv.slice(1));
    case 'import':
      return importCommand(argv.slice(1));
    case 'backup':
      return backupCommand(argv.slice(1));
    case 'plants':
      return plantsCommand(sub, rest);
    case 'webhooks':
      return webhooksCommand(sub, rest, (work) => withStore((store) => work(store)));
    case 'token':
      return tokenCommand(sub, rest);
    case 'help': // help, or help <command> [<subcommand>]
      out((sub !== undefined && (usageFor(`${sub} ${rest[0] ?? ''}`.trim()) ?? usageFor(sub))) || USAGE);
      return 0;
    case undefined:
    case '--help':
    case '-h':
      out(USAGE);
      return command === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown command "${command}": the commands are ${COMMANDS.join(', ')}`);
  }
}

/** A usage mistake: the message, then what the command takes (its own lines of the usage). */
function usageMessage(error: UsageError): string {
  const usage = error.command === undefined ? undefined : usageFor(error.command);
  const more = 'plant-store --help describes every command, with examples.';
  return `plant-store: ${error.message}\n${usage === undefined ? '' : `\nUsage:\n${usage}\n\n`}${more}`;
}

run(process.argv.slice(2)).then(
  (code) => {
    if (code !== 0) process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof UsageError) {
      err(usageMessage(error));
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
