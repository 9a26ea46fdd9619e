// Times and states in words, not codes, as a subscriber reads them (docs/portal.md).
// Pure: the page's modules and the unit tests (test/portal/) share it.

export type DisabledReason = 'gone' | 'failing' | 'manual' | null;

const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? '' : 's'}`;

/** A date and time in the reader's own zone and language, to the second. */
export function localTime(iso: string): string {
  return new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/** The clock time alone, for events of the last day. */
export function clockTime(iso: string): string {
  return new Date(iso).toLocaleTimeString(undefined, { timeStyle: 'medium' });
}

/** "5 hours ago", "12 minutes ago", "3 days ago", "just now". */
export function ago(iso: string, now: number): string {
  const seconds = Math.max(0, Math.floor((now - Date.parse(iso)) / 1000));
  if (seconds < 60) return 'just now';
  if (seconds < 3600) return `${plural(Math.floor(seconds / 60), 'minute')} ago`;
  if (seconds < 3 * 86_400) return `${plural(Math.floor(seconds / 3600), 'hour')} ago`;
  return `${plural(Math.floor(seconds / 86_400), 'day')} ago`;
}

/** "in 5 seconds", "in 3 minutes", "now" (a time already past is due). */
export function fromNow(iso: string, now: number): string {
  const seconds = Math.ceil((Date.parse(iso) - now) / 1000);
  if (seconds <= 0) return 'now';
  if (seconds < 60) return `in ${plural(seconds, 'second')}`;
  if (seconds < 3600) return `in ${plural(Math.round(seconds / 60), 'minute')}`;
  return `in ${plural(Math.round(seconds / 3600), 'hour')}`;
}

/** A webhook's `failingSince`: "failing since 3 Mar 2026, 14:02:11 (5 hours ago)". */
export function failingSince(iso: string, now: number): string {
  return `failing since ${localTime(iso)} (${ago(iso, now)})`;
}

/** A webhook's status and `disabledReason` (docs/api.md#webhooks). */
export function statusWords(status: 'active' | 'disabled', reason: DisabledReason): string {
  if (status === 'active') return 'active';
  switch (reason) {
    case 'gone':
      return 'disabled: the receiver answered 410 Gone';
    case 'failing':
      return 'disabled after 5 days of failed deliveries';
    case 'manual':
      return 'disabled by you';
    default:
      return 'disabled';
  }
}

/** An attempt's or delivery's HTTP status, or what stood in for it. */
export function httpStatusWords(status: number | null): string {
  return status === null ? 'no answer' : String(status);
}

/** "1 failed delivery is pending again", "no failed delivery since then". */
export function requeuedWords(n: number): string {
  if (n === 0) return 'No failed delivery since then: nothing to send again.';
  return n === 1 ? '1 failed delivery is pending again.' : `${n} failed deliveries are pending again.`;
}

/** What a recover did, in words: the failed deliveries sent again, and the events of a pause now sent. */
export function recoveredWords({ requeued, created }: { requeued: number; created: number }): string {
  if (created === 0) return requeuedWords(requeued);
  const made = created === 1 ? '1 event of the pause is sent' : `${created} events of the pause are sent`;
  if (requeued === 0) return `${made}.`;
  return `${made}, and ${requeuedWords(requeued).charAt(0).toLowerCase()}${requeuedWords(requeued).slice(1)}`;
}

/** A datetime-local field's value for `date`, in the reader's zone, to the second. */
export function localInputValue(date: Date): string {
  const two = (n: number): string => String(n).padStart(2, '0');
  return (
    `${date.getFullYear()}-${two(date.getMonth() + 1)}-${two(date.getDate())}` +
    `T${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}`
  );
}
