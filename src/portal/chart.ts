import { h, svg } from './dom.js';
import type { Activity } from './shapes.js';

// The last 24 h of a webhook's attempts as an SVG drawn here: a bar per hour, delivered below and
// failed stacked above. 24 bars need no chart library (docs/decisions.md).
//
// The bars stretch to the panel's width (preserveAspectRatio none), and the hour labels are HTML
// under them, sized in CSS pixels: as SVG text they would shrink with the drawing, to 5 px on a
// phone.

const WIDTH = 720;
const HEIGHT = 100;
const SLOT = WIDTH / 24;
const BAR = SLOT - 4;
/** The hours labelled: one every six, each at the start of its quarter of the axis. */
const LABELLED = [0, 6, 12, 18];

const hourLabel = (iso: string): string =>
  new Date(iso).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });

/** The chart, named by its totals for a screen reader; each bar's own numbers show on hover. */
export function activityChart(activity: Activity): HTMLDivElement {
  const delivered = activity.hours.reduce((sum, hour) => sum + hour.delivered, 0);
  const failed = activity.hours.reduce((sum, hour) => sum + hour.failed, 0);
  const most = Math.max(1, ...activity.hours.map((hour) => hour.delivered + hour.failed));
  const scale = (HEIGHT - 4) / most;
  const bars = activity.hours.map((hour, i) => {
    const x = i * SLOT + 2;
    const ok = hour.delivered * scale;
    const bad = hour.failed * scale;
    return svg(
      'g',
      {},
      svg('title', {}, `from ${hourLabel(hour.start)}: ${hour.delivered} delivered, ${hour.failed} failed`),
      // The whole slot answers the pointer, so an hour without attempts shows its numbers too.
      svg('rect', { class: 'slot', x: i * SLOT, y: 0, width: SLOT, height: HEIGHT }),
      ok > 0 && svg('rect', { class: 'delivered', x, y: HEIGHT - ok, width: BAR, height: ok }),
      bad > 0 && svg('rect', { class: 'failed', x, y: HEIGHT - ok - bad, width: BAR, height: bad }),
    );
  });
  return h(
    'div',
    { class: 'chart' },
    svg(
      'svg',
      {
        viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
        preserveAspectRatio: 'none',
        role: 'img',
        'aria-labelledby': 'activity-title',
      },
      svg('title', { id: 'activity-title' }, `Attempts in the last 24 hours: ${delivered} delivered, ${failed} failed`),
      ...bars,
    ),
    // The bars' baseline, and the hours under it; the image's name already says what they add up to.
    h(
      'div',
      { class: 'axis', 'aria-hidden': 'true' },
      ...LABELLED.map((i) => h('span', {}, hourLabel(activity.hours[i]?.start ?? activity.from))),
    ),
  );
}
