import { runCommand } from './cli/main.js';
import { endQuietlyWhenStdoutCloses } from './cli/output.js';

// The plant-store command's process (bin/plant-store.js imports this): src/cli/main.ts runs the
// command on the process's environment and streams; its exit code becomes the process's.

const argv = process.argv.slice(2);
if (argv[0] !== 'serve') endQuietlyWhenStdoutCloses();
let threw = false;
const code = await runCommand(argv, () => void (threw = true));
if (code !== 0) process.exitCode = code;
// A worker that failed to start must exit, so its primary sees it.
if (threw && process.connected) (await import('./server.js')).releaseProcess();
