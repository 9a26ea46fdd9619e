// `npm run build`, and `npm ci` through the prepare script: tsc compiles packages/client to its
// dist/, then src/ to dist/, then the portal page's browser modules (src/portal/, a project of
// their own) to dist/portal/, beside which its HTML and CSS are copied as they are. The server's build is incremental (dist/.tsbuildinfo): with nothing
// changed it takes 2 s instead of 5. tsc then trusts that what it wrote before is still there, so a
// dist/ that lost the JavaScript of a source file is first forgotten, and built whole.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import process from 'node:process';
import { URL, fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');

/** Whether some src/**.ts of the server has no .js in dist/ (src/portal/ is built whole each time, below). */
function lostOutput(dir = '') {
  return readdirSync(join(root, 'src', dir), { withFileTypes: true }).some((entry) => {
    const path = join(dir, entry.name);
    if (path === 'portal') return false;
    if (entry.isDirectory()) return lostOutput(path);
    return /(?<!\.d)\.ts$/.test(entry.name) && !existsSync(join(root, 'dist', path.replace(/\.ts$/, '.js')));
  });
}

if (lostOutput()) rmSync(join(root, 'dist/.tsbuildinfo'), { force: true });
// The page is built whole each time (1 s): a module removed from src/portal/ is not served on.
rmSync(join(root, 'dist/portal'), { recursive: true, force: true });
for (const project of ['packages/client/tsconfig.build.json', 'tsconfig.build.json', 'src/portal/tsconfig.json']) {
  const result = spawnSync(process.execPath, [tsc, '-p', project], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
}
for (const name of readdirSync(join(root, 'src/portal'))) {
  if (/\.(html|css)$/.test(name)) copyFileSync(join(root, 'src/portal', name), join(root, 'dist/portal', name));
}
