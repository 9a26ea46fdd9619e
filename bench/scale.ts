// Cost as the work grows: each axis at 1× (today's runs) and at 10×, on SQLite and PostgreSQL. The
// sizes are alternated and repeated (1, 10, 1, 10 by default: a size measured only once, and
// always first, reports its warm-up), each with a database of its own; every figure is printed as
// the median of its runs with their range, and a growth (10× ÷ 1×, medians) is claimed only when
// the two ranges do not overlap, "within noise" otherwise. The goal for a per-operation cost or a
// memory figure is growth ≤ 1.2; totals (an import, a `token list`, a recover of every delivery)
// must grow and are marked so.
//
//   npm run bench:scale -- --axis tokens [--axis events …] [--engine sqlite|postgres] [--quick] [--scale 1,10,1,10]
//
// --axis: plants, events, deliveries, webhooks, streams, tokens (repeat it; at least one).
// --engine: one engine (default: both). PostgreSQL: a database of its own, plant_store_scale, on
// BENCH_PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres), dropped after each size.
// SQLite: a file under /var/tmp, deleted after each size.
// --quick: sizes ÷ 100, for a small run while changing code. --scale: the multiples to run, in order.
//
// Data is seeded through SQL (a recursive CTE on SQLite, generate_series on PostgreSQL) or the
// store, never through HTTP; what is measured goes through the store in this process or through
// the service (this checkout's dist/, pinned to core 0). Each size prints its seconds, the disk
// it used and the load average before it.
import { cpus, totalmem } from 'node:os';
import { parseArgs } from 'node:util';
import { loadAverage } from './kit/process.js';
import { type Engine, type Measure, type RunDb, createRunDb } from './kit/scale.js';
import { median } from './kit/stats.js';
import { deliveriesAxis } from './scale-deliveries.js';
import { eventsAxis } from './scale-events.js';
import { plantsAxis } from './scale-plants.js';
import { streamsAxis } from './scale-streams.js';
import { tokensAxis } from './scale-tokens.js';
import { webhooksAxis } from './scale-webhooks.js';

type Axis = (db: RunDb, n: number, quick: boolean) => Promise<Measure[]>;

/** Each axis, its size at 1×, and what that size counts. */
const AXES: Record<string, { readonly base: number; readonly unit: string; readonly run: Axis }> = {
  plants: { base: 1_000_000, unit: 'plants', run: plantsAxis },
  events: { base: 1_000_000, unit: 'events in the log', run: eventsAxis },
  deliveries: { base: 100_000, unit: 'pending deliveries', run: deliveriesAxis },
  webhooks: { base: 1_000, unit: 'webhooks', run: webhooksAxis },
  streams: { base: 1_000, unit: 'SSE streams', run: streamsAxis },
  tokens: { base: 10_000, unit: 'tokens', run: tokensAxis },
};

const { values } = parseArgs({
  options: {
    axis: { type: 'string', multiple: true, default: [] },
    engine: { type: 'string' },
    quick: { type: 'boolean', default: false },
    scale: { type: 'string', default: '1,10,1,10' },
  },
});
const axes = values.axis.flatMap((a) => a.split(','));
if (axes.length === 0 || axes.some((a) => !(a in AXES))) {
  console.error(`--axis: one or more of ${Object.keys(AXES).join(', ')}`);
  process.exit(2);
}
const engines: Engine[] = values.engine === undefined ? ['sqlite', 'postgres'] : [values.engine as Engine];
const scales = values.scale.split(',').map(Number);
const fmt = (v: number): string =>
  v >= 100 ? Math.round(v).toLocaleString('en-US') : v >= 10 ? v.toFixed(1) : v.toPrecision(3);

console.log(
  `${cpus().length} × ${cpus()[0]?.model}, ${Math.round(totalmem() / 2 ** 30)} GiB, node ${process.version}, ${new Date().toISOString()}${values.quick ? ', --quick (sizes ÷ 100)' : ''}`,
);
for (const name of axes) {
  const axis = AXES[name]!;
  for (const engine of engines) {
    const results: Measure[][] = [];
    const sizes: string[] = [];
    for (const scale of scales) {
      const n = Math.round((axis.base * scale) / (values.quick ? 100 : 1));
      const load = loadAverage();
      const started = Date.now();
      const db = await createRunDb(engine);
      let disk = 0;
      try {
        results.push(await axis.run(db, n, values.quick));
        disk = await db.bytes();
      } finally {
        await db.drop();
      }
      const line = `${name}, ${engine}, ${scale}× = ${n.toLocaleString('en-US')} ${axis.unit}: ${((Date.now() - started) / 1000).toFixed(0)} s, database ${(disk / 2 ** 20).toFixed(0)} MiB at the end (deleted), load average before ${load}`;
      sizes.push(line);
      console.error(line);
    }
    console.log(`\n${sizes.map((s) => `- ${s}`).join('\n')}\n`);
    const multiples = [...new Set(scales)];
    console.log(`| ${name} (${engine}) | ${multiples.map((m) => `${m}× (median, range)`).join(' | ')} | growth |`);
    console.log(`|---|${multiples.map(() => '---|').join('')}---|`);
    for (const [i, m] of results[0]!.entries()) {
      const runsOf = (multiple: number): number[] =>
        results.filter((_, run) => scales[run] === multiple).map((r) => r[i]!.value);
      const spread = multiples.map((multiple) => {
        const values = runsOf(multiple).sort((a, b) => a - b);
        return { median: median(values), low: values[0]!, high: values.at(-1)! };
      });
      const first = spread[0]!;
      const last = spread.at(-1)!;
      const apart = last.low > first.high || last.high < first.low;
      const mark = m.perOp ? '' : ' (a total: grows)';
      const growth =
        spread.length < 2 ? '—' : apart ? `${(last.median / first.median).toFixed(2)}${mark}` : 'within noise';
      const cell = (c: { median: number; low: number; high: number }): string =>
        c.low === c.high ? `${fmt(c.median)} ${m.unit}` : `${fmt(c.median)} ${m.unit} (${fmt(c.low)}–${fmt(c.high)})`;
      console.log(`| ${m.name} | ${spread.map(cell).join(' | ')} | ${growth} |`);
    }
  }
}
