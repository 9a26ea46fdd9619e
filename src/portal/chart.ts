import { svg } from './dom.js';
import type { Activity } from './shapes.js';

// The last 24 h of a webhook's attempts as an SVG drawn here: a bar per hour, delivered below and
// failed stacked above. 24 bars need no chart library (docs/decisions.md).

const WIDTH = 720;
const HEIGHT = 120;
const AXIS = 18; // room for the hour labels below the bars
const SLOT = WIDTH / 24;
const BAR = SLOT - 4;

const hourLabel = (iso: string): string =>
  new Date(iso).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });

/** The chart, named by its totals for a screen reader; each bar's own numbers show on hover. */
export function activityChart(activity: Activity): SVGSVGElement {
  const delivered = activity.hours.reduce((sum, hour) => sum + hour.delivered, 0);
  const failed = activity.hours.reduce((sum, hour) => sum + hour.failed, 0);
  const most = Math.max(1, ...activity.hours.map((hour) => hour.delivered + hour.failed));
  const scale = (HEIGHT - AXIS - 4) / most;
  const base = HEIGHT - AXIS;
  const bars = activity.hours.map((hour, i) => {
    const x = i * SLOT + 2;
    const ok = hour.delivered * scale;
    const bad = hour.failed * scale;
    return svg(
      'g',
      {},
      svg('title', {}, `from ${hourLabel(hour.start)}: ${hour.delivered} delivered, ${hour.failed} failed`),
      // The whole slot answers the pointer, so an hour without attempts shows its numbers too.
      svg('rect', { class: 'slot', x: i * SLOT, y: 0, width: SLOT, height: base }),
      ok > 0 && svg('rect', { class: 'delivered', x, y: base - ok, width: BAR, height: ok }),
      bad > 0 && svg('rect', { class: 'failed', x, y: base - ok - bad, width: BAR, height: bad }),
    );
  });
  const labels = [0, 6, 12, 18].map((i) =>
    svg(
      'text',
      { x: i * SLOT + 2, y: HEIGHT - 4, class: 'axis' },
      hourLabel(activity.hours[i]?.start ?? activity.from),
    ),
  );
  return svg(
    'svg',
    {
      viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
      role: 'img',
      'aria-labelledby': 'activity-title',
      class: 'chart',
    },
    svg('title', { id: 'activity-title' }, `Attempts in the last 24 hours: ${delivered} delivered, ${failed} failed`),
    svg('line', { class: 'baseline', x1: 0, y1: base, x2: WIDTH, y2: base }),
    ...bars,
    ...labels,
  );
}
