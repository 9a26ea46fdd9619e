import { ConfigError, loadConfig, parseWorkers } from '../config.js';
import { knockOut, knockoutRefusal } from '../knockouts.js';
import { COMMANDS, parseCommand } from './args.js';
import { io } from './io.js';
import { UsageError, err, out } from './output.js';

// The plant-store command, as a function: runCommand(argv) runs one command and answers its exit
// code, with what it says on io()'s streams (the process's, or those withIo gives: the tests run
// commands so, in their own process). src/cli.ts runs it for the process.
//
// Each command loads only what it uses (a `token create` need not load the HTTP server), and only
// once its input is read: the usage (./usage.js), the parsing and every check of a command's input
// import nothing heavy (no store, driver, logger, validator or HTTP server), so `--help`,
// `--version` and a usage mistake cost no more than Node's own start (test/cli/light-start.test.ts).

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
  const [{ isPrimary, runPrimary }, { logStartupFailure, readSettingsFile }, { serve }] = await Promise.all([
    import('../cluster.js'),
    import('../launch.js'),
    import('../server.js'),
  ]);
  const file = values['settings-file'];
  // A worker got the file's values from its primary, in its environment: it does not read the file.
  let level: string | undefined;
  try {
    const fromFile = file === undefined || !isPrimary() ? {} : readSettingsFile(file);
    const settings = { ...io().env, ...fromFile };
    const env = loadConfig(settings);
    const config = values.workers === undefined ? env : { ...env, workers: parseWorkers(values.workers) };
    level = config.logLevel;
    // A benchmark's switches, before the store and the app are made: refused unless asked for twice.
    const refusal = knockoutRefusal(settings);
    if (refusal !== undefined) throw new ConfigError(refusal);
    knockOut(settings);
    // Both return once serving, and throw only when the start fails. Workers asked for (even one,
    // by --workers or WORKERS) run under a primary, which is what reloads on SIGHUP.
    const workersAsked = values.workers !== undefined || 'WORKERS' in fromFile || io().env.WORKERS !== undefined;
    if (workersAsked && isPrimary())
      await runPrimary(config, { env: io().env, settingsFile: file, workersFlag: values.workers !== undefined });
    else await serve(config, io().env);
  } catch (error) {
    logStartupFailure(error, level); // the one JSON line naming the component that failed
    throw error;
  }
  return 0;
}

/** `plant-store <command> … --help` (before any `--`): the command's usage, or its group's. */
async function helpAsked(argv: string[]): Promise<string | undefined> {
  const [command, sub] = argv;
  const end = argv.indexOf('--');
  const options = argv.slice(1, end < 0 ? undefined : end);
  if (!options.includes('--help') && !options.includes('-h')) return undefined;
  const { USAGE, usageFor } = await import('./usage.js');
  return (sub !== undefined && usageFor(`${command} ${sub}`)) || usageFor(command!) || USAGE;
}

async function run(argv: string[]): Promise<number> {
  const [command, sub, ...rest] = argv;
  const help = await helpAsked(argv);
  if (help !== undefined) {
    out(help);
    return 0;
  }
  switch (command) {
    case 'serve':
      return serveCommand(argv.slice(1));
    case 'migrate': {
      parseCommand('migrate', argv.slice(1), {});
      const { withStore } = await import('./database.js');
      await withStore(async (_store, applied) =>
        err(applied.length > 0 ? `Applied migrations ${applied.join(', ')}.` : 'The database schema is up to date.'),
      );
      return 0;
    }
    case 'export':
      return (await import('./transfer.js')).exportCommand(argv.slice(1));
    case 'import':
      return (await import('./transfer.js')).importCommand(argv.slice(1));
    case 'backup':
      return (await import('./backup.js')).backupCommand(argv.slice(1));
    case 'plants':
      return (await import('./plants.js')).plantsCommand(sub, rest);
    case 'webhooks': {
      const [{ webhooksCommand }, { withStore }] = await Promise.all([
        import('./webhooks.js'),
        import('./database.js'),
      ]);
      return webhooksCommand(sub, rest, (work) => withStore((store) => work(store)));
    }
    case 'token':
      return (await import('./token.js')).tokenCommand(sub, rest);
    case 'help': {
      // help, or help <command> [<subcommand>]
      const { USAGE, usageFor } = await import('./usage.js');
      out((sub !== undefined && (usageFor(`${sub} ${rest[0] ?? ''}`.trim()) ?? usageFor(sub))) || USAGE);
      return 0;
    }
    case '--version':
    case '-v': {
      // package.json's version, alone on stdout (as `node --version` and `npm --version` print theirs).
      const { readFileSync } = await import('node:fs');
      const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
        version: string;
      };
      out(version);
      return 0;
    }
    case undefined:
    case '--help':
    case '-h':
      out((await import('./usage.js')).USAGE);
      return command === undefined ? 2 : 0;
    default:
      throw new UsageError(`unknown command "${command}": the commands are ${COMMANDS.join(', ')}`);
  }
}

/** A usage mistake: the message, then what the command takes (its own lines of the usage). */
async function usageMessage(error: UsageError): Promise<string> {
  const { usageFor } = await import('./usage.js');
  const usage = error.command === undefined ? undefined : usageFor(error.command);
  const more = 'plant-store --help describes every command, with examples.';
  return `plant-store: ${error.message}\n${usage === undefined ? '' : `\nUsage:\n${usage}\n\n`}${more}`;
}

/**
 * Runs one command: 0 done; 1 it failed; 2 the command or a setting was wrong (the usage's "Exit
 * codes"). Never throws: what went wrong is said on stderr. `failed` is told when it threw (a
 * serve that could not start).
 */
export async function runCommand(argv: readonly string[], failed?: () => void): Promise<number> {
  try {
    return await run([...argv]);
  } catch (error) {
    failed?.();
    if (error instanceof UsageError) {
      err(await usageMessage(error));
      return 2;
    }
    if (error instanceof ConfigError) {
      err(`plant-store: ${error.message}`);
      return 2;
    }
    err(`plant-store: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}
