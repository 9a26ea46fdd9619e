// The options of every plant-store command, read the way getopt reads them (POSIX Utility Syntax
// Guidelines, 7): an option that takes a value takes the next argument even when it starts with
// '-', so `plants create --id -5` means id -5. node:util parseArgs refuses that as "ambiguous",
// which would fail the README's own example.
import { UsageError } from './output.js';

/** The commands, as the top level knows them. */
export const COMMANDS = ['serve', 'migrate', 'token', 'export', 'import', 'backup', 'webhooks', 'plants'] as const;

/** What each long option of a command is: `'string'` takes a value, `'boolean'` is a switch. */
export type OptionSpecs = Readonly<Record<string, 'string' | 'boolean'>>;

export type OptionValues<S extends OptionSpecs> = {
  -readonly [K in keyof S]?: S[K] extends 'boolean' ? boolean : string;
};

export interface Parsed<S extends OptionSpecs> {
  readonly values: OptionValues<S>;
  readonly positionals: string[];
}

/** No option is a digit, so `-5` (or `-1.5`) is a value, never a cluster of short options (as Python's argparse decides). */
const NEGATIVE_NUMBER = /^-\d/;

/**
 * Reads `args` of `command` (its name, as the usage writes it: `plants create`), given its options:
 * `--name value`, `--name=value` and `--switch`; `--` ends the options; `-` and negative numbers are
 * positionals. A value-taking option followed by another of the command's options (`--id --name x`)
 * has no value: that is the likelier slip, and `--id=--name` still says it. The last of a repeated
 * option wins. Mistakes are UsageErrors naming the command, so its usage can follow them.
 */
export function parseCommand<S extends OptionSpecs>(
  command: string,
  args: readonly string[],
  options: S,
  { positionals: allowed = false } = {},
): Parsed<S> {
  const values: Record<string, string | boolean> = {};
  const positionals: string[] = [];
  const kind = (name: string): 'string' | 'boolean' | undefined =>
    Object.hasOwn(options, name) ? options[name] : undefined;
  const isOption = (arg: string | undefined): boolean =>
    arg !== undefined && arg.startsWith('--') && kind(arg.slice(2).split('=')[0]!) !== undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === '--') {
      positionals.push(...args.slice(i + 1));
      break;
    }
    if (arg === '-' || NEGATIVE_NUMBER.test(arg) || !arg.startsWith('-')) {
      positionals.push(arg);
      continue;
    }
    const equals = arg.indexOf('=');
    const name = arg.startsWith('--') ? arg.slice(2, equals < 0 ? undefined : equals) : arg;
    const type = arg.startsWith('--') ? kind(name) : undefined;
    if (type === undefined) {
      throw new UsageError(`${command} has no option ${arg.startsWith('--') ? `--${name}` : arg}`, command);
    }
    if (type === 'boolean') {
      if (equals >= 0) throw new UsageError(`--${name} takes no value`, command);
      values[name] = true;
    } else if (equals >= 0) {
      values[name] = arg.slice(equals + 1);
    } else if (i + 1 < args.length && args[i + 1] !== '--' && !isOption(args[i + 1])) {
      values[name] = args[++i]!;
    } else {
      throw new UsageError(`--${name} needs a value`, command);
    }
  }
  if (!allowed && positionals.length > 0) {
    throw new UsageError(`${command} takes no argument "${positionals[0]}"`, command);
  }
  return { values: values as OptionValues<S>, positionals };
}
