import Type, { type Static } from '#typebox';
import type { AttemptCounts, AttemptSpan } from '../store/webhook-store.js';

// GET /webhooks/{id}/activity (docs/api.md#webhooks): a webhook's attempts of the last 24 hours, by
// the hour, for the chart of the subscriber's page. An attempt is `delivered` when the receiver
// answered 2xx, as a delivery is; every other one (an HTTP error, no answer, a refused address)
// `failed`.

const HOUR_MS = 3_600_000;
/** The hours shown: the one under way and the 23 before it. */
export const ACTIVITY_HOURS = 24;

const at = (description: string, example: string) =>
  Type.String({ format: 'date-time', description, examples: [example] });

const EXAMPLE_HOUR = { start: '2025-03-01T09:00:00.000Z', delivered: 41, failed: 2 } as const;

export const ActivityHourSchema = Type.Object(
  {
    start: at('when the hour starts (RFC 3339, UTC); it ends when the next one starts', EXAMPLE_HOUR.start),
    delivered: Type.Integer({ minimum: 0, description: 'attempts the receiver answered with a 2xx status' }),
    failed: Type.Integer({
      minimum: 0,
      description: 'every other attempt: another HTTP status, no answer (timeout, connection), or a refused address',
    }),
  },
  {
    additionalProperties: false,
    description: "One hour of a webhook's attempts, counted by how they ended.",
    examples: [EXAMPLE_HOUR],
  },
);

/** The example: 24 hours to 09:35 on the day of the webhook story, attempts in the last two. */
const EXAMPLE_HOURS = Array.from({ length: ACTIVITY_HOURS }, (_, i) => {
  const start = new Date(Date.parse(EXAMPLE_HOUR.start) - (ACTIVITY_HOURS - 1 - i) * HOUR_MS).toISOString();
  if (i === ACTIVITY_HOURS - 2) return { start, delivered: 12, failed: 0 };
  return i === ACTIVITY_HOURS - 1 ? EXAMPLE_HOUR : { start, delivered: 0, failed: 0 };
});

export const ActivitySchema = Type.Object(
  {
    from: at('when the first hour starts (RFC 3339, UTC)', EXAMPLE_HOURS[0]!.start),
    to: at('now: the last hour is the one under way (RFC 3339, UTC)', '2025-03-01T09:35:00.000Z'),
    hours: Type.Array(ActivityHourSchema, {
      minItems: ACTIVITY_HOURS,
      maxItems: ACTIVITY_HOURS,
      description: `${ACTIVITY_HOURS} hours, oldest first, whole UTC hours, the last one the hour under way`,
    }),
  },
  {
    additionalProperties: false,
    description:
      "A webhook's attempts (its deliveries' and its pings') of the last 24 hours, by the hour: delivered (2xx) and failed (anything else).",
    examples: [{ from: EXAMPLE_HOURS[0]!.start, to: '2025-03-01T09:35:00.000Z', hours: EXAMPLE_HOURS }],
  },
);
export type ActivityBody = Static<typeof ActivitySchema>;

/** The hours that end with the one under way at `now`: whole UTC hours. */
export function activitySpan(now: number): AttemptSpan {
  const from = Math.floor(now / HOUR_MS) * HOUR_MS - (ACTIVITY_HOURS - 1) * HOUR_MS;
  return { from, bucketMs: HOUR_MS, buckets: ACTIVITY_HOURS };
}

/** Every hour of the span, those without an attempt at 0. */
export function activityBody(span: AttemptSpan, now: number, counts: readonly AttemptCounts[]): ActivityBody {
  const hours = Array.from({ length: span.buckets }, (_, i) => ({
    start: new Date(span.from + i * span.bucketMs).toISOString(),
    delivered: 0,
    failed: 0,
  }));
  for (const { bucket, delivered, failed } of counts) hours[bucket] = { ...hours[bucket]!, delivered, failed };
  return { from: new Date(span.from).toISOString(), to: new Date(now).toISOString(), hours };
}
