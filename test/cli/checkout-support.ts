import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// What the tests of the printed commands share: a shell as a checkout's user has it,
// where `plant-store` is whatever the printed lines make it, and nothing else.

export const ROOT = fileURLToPath(new URL('../../', import.meta.url)).replace(/\/$/, '');

/**
 * This process's PATH without the folders that hold a plant-store: `npm test` puts
 * node_modules/.bin first, and a developer may have the checkout's bin/ on theirs already. A bare
 * `plant-store` then runs only if the printed commands put it there.
 */
export function withoutPlantStore(path: string = process.env.PATH ?? ''): string {
  return path
    .split(delimiter)
    .filter((dir) => dir !== '' && !existsSync(join(dir, 'plant-store')))
    .join(delimiter);
}

export interface ShellResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `script` with bash in `cwd`; killed after `limitMs`, so a hung command fails its test. */
export function bash(script: string, cwd: string, env: NodeJS.ProcessEnv, limitMs = 60_000): Promise<ShellResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => void (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
