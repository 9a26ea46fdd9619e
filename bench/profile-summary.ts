// Summarises a V8 CPU profile (`node --cpu-prof`) by module and by function: where a request's
// time goes. The profile is of wall time on the main thread, so a synchronous fsync
// (SQLite's commit) shows as time in the function that called it; idle time is left out.
//
//   taskset -c 0 node --cpu-prof --cpu-prof-dir=/tmp/prof bin/plant-store.js serve   # then load it, then SIGTERM
//   node --import tsx bench/profile-summary.ts /tmp/prof/CPU.*.cpuprofile [rows]
import { readFileSync } from 'node:fs';

interface CallFrame {
  functionName: string;
  url: string;
}
interface Profile {
  nodes: Array<{ id: number; callFrame: CallFrame }>;
  samples: number[];
  timeDeltas: number[];
}

/** A frame's module: the package under node_modules, the project's file, or Node's own. */
function moduleOf({ url, functionName }: CallFrame): string {
  if (url.includes('node_modules/')) {
    const parts = url.split('node_modules/').at(-1)!.split('/');
    return parts[0]!.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  if (url === '') return functionName; // (garbage collector), (program), native calls such as writev
  return url.replace(/^file:\/\/.*?\/(dist|src|bench)\//, '$1/');
}

const [file, rows = '25'] = process.argv.slice(2);
if (file === undefined) {
  console.error('usage: node --import tsx bench/profile-summary.ts <file.cpuprofile> [rows]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
const frames = new Map(profile.nodes.map((node) => [node.id, node.callFrame]));
const byModule = new Map<string, number>();
const byFunction = new Map<string, number>();
let busy = 0;
let idle = 0;
profile.samples.forEach((id, i) => {
  const frame = frames.get(id)!;
  const us = profile.timeDeltas[i] ?? 0;
  if (frame.functionName === '(idle)') return void (idle += us);
  busy += us;
  const module = moduleOf(frame);
  byModule.set(module, (byModule.get(module) ?? 0) + us);
  const fn = `${frame.functionName || '(anonymous)'}  ${module}`;
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
});
const top = (counts: Map<string, number>): string =>
  [...counts]
    .sort((a, b) => b[1] - a[1])
    .slice(0, Number(rows))
    .map(([name, us]) => `${((100 * us) / busy).toFixed(1).padStart(5)} %  ${name}`)
    .join('\n');
console.log(`busy ${Math.round(busy / 1000)} ms, idle ${Math.round(idle / 1000)} ms\n\nby module\n${top(byModule)}`);
console.log(`\nby function\n${top(byFunction)}`);
