import { accessSync, constants, realpathSync } from 'node:fs';
import { delimiter, isAbsolute, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { shellWord } from '../wire/shell.js';

// A hint that prints a command (the next page of `webhooks deliveries`) prints it the way it runs
// in the shell that started this one: a bare `plant-store` is "command not found" in
// a checkout whose bin/ is not on the PATH, so the hint says `plant-store` only when the PATH
// finds this very program, `npx plant-store` under npx, and `node <this program>` otherwise.

/** The package's own command, whichever link or path started it. */
const PROGRAM = fileURLToPath(new URL('../../bin/plant-store.js', import.meta.url));

const realOrUndefined = (path: string): string | undefined => {
  try {
    accessSync(path, constants.X_OK);
    return realpathSync(path);
  } catch {
    return undefined;
  }
};

/** How to start plant-store again from the shell that started it, with `env` and `cwd` as it had them. */
export function commandName(env: NodeJS.ProcessEnv, cwd: string = process.cwd()): string {
  // npx puts its own link on the PATH of the command only: the user's shell does not have it.
  if (env.npm_command === 'exec') return 'npx plant-store';
  const self = realOrUndefined(PROGRAM) ?? PROGRAM;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir === '' || !isAbsolute(dir)) continue; // relative entries depend on where the user stands
    const found = realOrUndefined(join(dir, 'plant-store'));
    if (found !== undefined) {
      if (found === self) return 'plant-store';
      break; // another plant-store comes first on the PATH: a bare name would run that one
    }
  }
  const inside = relative(cwd, PROGRAM);
  const path = inside.startsWith('..') || isAbsolute(inside) ? PROGRAM : inside;
  return `node ${shellWord(path)}`;
}
