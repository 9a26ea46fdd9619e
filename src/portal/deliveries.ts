import { nextLink } from './api.js';
import { activityChart } from './chart.js';
import { FormDialog } from './dialogs.js';
import { NONE, button, byId, cell, h, replaceKeepingFocus } from './dom.js';
import { idText } from './json.js';
import type { Page } from './page.js';
import { type Activity, type Delivery, type Webhook, targetText } from './shapes.js';
import { AttemptsView } from './attempts.js';
import { fromNow, localInputValue, localTime, recoveredWords } from './words.js';

// The Deliveries panel: one webhook's deliveries, newest first and paged by the `Link` header,
// each opening to its attempt log; the last 24 h as a chart; Retry and Recover.

const PAGE_SIZE = 20;

export class DeliveriesPanel {
  private webhook: Webhook | undefined;
  /** The pages walked so far: the first (newest) is the list's own URL, each next one its `Link`. */
  private pages: string[] = [];
  private next: string | undefined;
  private readonly attempts = new AttemptsView(() => this.page());
  private readonly rows = byId('delivery-rows', HTMLTableSectionElement);
  private readonly body = byId('deliveries-body', HTMLDivElement);
  private readonly of = byId('deliveries-of', HTMLParagraphElement);
  private readonly older = byId('older', HTMLButtonElement);
  private readonly newer = byId('newer', HTMLButtonElement);
  private readonly recover = new FormDialog(byId('recover-dialog', HTMLDialogElement));
  /** When a delivery shown is next due (ms since the epoch): the page looks again then. */
  nextDue: number | undefined;

  constructor(private readonly page: () => Page) {
    this.older.addEventListener('click', () => this.turn(this.next));
    this.newer.addEventListener('click', () => this.turn(undefined));
    byId('refresh', HTMLButtonElement).addEventListener('click', () => this.page().refresh());
    byId('recover', HTMLButtonElement).addEventListener('click', () => this.openRecover());
  }

  /** Shows this webhook's deliveries from the newest, or none; the same webhook keeps its page. */
  show(webhook: Webhook | undefined): void {
    if (webhook?.id !== this.webhook?.id) {
      this.pages = webhook ? [`webhooks/${encodeURIComponent(webhook.id)}/deliveries?limit=${PAGE_SIZE}`] : [];
      this.attempts.clear();
      this.rows.replaceChildren();
    }
    this.webhook = webhook;
    this.of.textContent = webhook ? `of ${targetText(webhook)}` : 'Add a webhook to see its deliveries here.';
    this.body.hidden = webhook === undefined;
  }

  clear(): void {
    this.show(undefined);
    this.nextDue = undefined;
  }

  async refresh(): Promise<void> {
    const webhook = this.webhook;
    const url = this.pages.at(-1);
    if (webhook === undefined || url === undefined) return;
    const api = this.page().api;
    const [list, activity] = await Promise.all([
      api.get<Delivery[]>(url),
      this.pages.length === 1 ? this.activity(webhook) : undefined,
    ]);
    if (webhook !== this.webhook) return; // another was chosen meanwhile
    const deliveries = list.body;
    this.next = nextLink(list.headers);
    const due = deliveries
      .filter((delivery) => delivery.status === 'pending')
      .map((delivery) => (delivery.nextAttemptAt === null ? Date.now() : Date.parse(delivery.nextAttemptAt)));
    this.nextDue = due.length === 0 ? undefined : Math.min(...due);
    await this.attempts.load(
      deliveries.map((delivery) => idText(delivery.id)),
      webhook,
    );
    const now = Date.now();
    replaceKeepingFocus(
      this.rows,
      ...(deliveries.length === 0
        ? [h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No deliveries yet.'))]
        : deliveries.flatMap((delivery) => this.row(webhook, delivery, now))),
    );
    this.older.hidden = this.next === undefined;
    this.newer.hidden = this.pages.length === 1;
    if (activity !== undefined) this.showActivity(activity);
  }

  private async activity(webhook: Webhook): Promise<Activity> {
    return (await this.page().api.get<Activity>(`webhooks/${encodeURIComponent(webhook.id)}/activity`)).body;
  }

  private showActivity(activity: Activity): void {
    const chart = byId('activity', HTMLDivElement);
    const summary = byId('activity-summary', HTMLSpanElement);
    const delivered = activity.hours.reduce((sum, hour) => sum + hour.delivered, 0);
    const failed = activity.hours.reduce((sum, hour) => sum + hour.failed, 0);
    chart.replaceChildren(activityChart(activity));
    summary.textContent = `Last 24 hours: ${delivered} delivered, ${failed} failed attempts.`;
  }

  private row(webhook: Webhook, delivery: Delivery, now: number): HTMLTableRowElement[] {
    const id = idText(delivery.id);
    const key = (action: string): string => `${action}:${id}`;
    const open = this.attempts.isOpen(id);
    const next =
      delivery.status === 'pending' && delivery.nextAttemptAt !== null
        ? `${fromNow(delivery.nextAttemptAt, now)} (${localTime(delivery.nextAttemptAt)})`
        : NONE;
    const row = h(
      'tr',
      { class: 'delivery' },
      cell(
        'Status',
        h('span', { class: `status-${delivery.status}` }, delivery.status),
        delivery.lastError !== null && h('div', { class: 'muted' }, delivery.lastError),
      ),
      cell('Type', h('code', {}, delivery.type)),
      cell('Event', delivery.eventId === null ? NONE : idText(delivery.eventId)),
      cell('Attempts', delivery.attempts, delivery.lastStatus !== null && ` (HTTP ${delivery.lastStatus})`),
      cell('Next attempt', next),
      cell('Created', localTime(delivery.createdAt)),
      h(
        'td',
        { class: 'actions-cell' },
        button(open ? 'Hide attempts' : 'Show attempts', () => this.toggle(id), {
          'aria-expanded': String(open),
          'aria-controls': open ? `attempts-${id}` : undefined,
          'data-key': key('attempts'),
        }),
        ' ',
        delivery.status !== 'pending' &&
          button('Retry', () => void this.retry(webhook, id), { 'data-key': key('retry') }),
      ),
    );
    return open ? [row, this.attempts.row(id, 7)] : [row];
  }

  private toggle(id: string): void {
    this.attempts.toggle(id);
    this.page().refresh();
  }

  private turn(url: string | undefined): void {
    if (url === undefined) this.pages.pop();
    else this.pages.push(url);
    this.attempts.clear();
    this.page().refresh();
  }

  private async retry(webhook: Webhook, id: string): Promise<void> {
    try {
      await this.page().api.send('POST', `webhooks/${encodeURIComponent(webhook.id)}/deliveries/${id}/retry`);
      this.page().notify(`Delivery ${id} is sent again.`);
    } catch (error) {
      this.page().fail(error);
    }
    this.page().refresh();
  }

  private openRecover(): void {
    const webhook = this.webhook;
    if (webhook === undefined) return;
    const field = byId('recover-since', HTMLInputElement);
    field.value = localInputValue(new Date(Date.now() - 86_400_000));
    this.recover.open(async () => {
      const since = new Date(field.value); // the reader's local time, as the picker shows it
      if (Number.isNaN(since.getTime())) throw new Error('Choose a date and time.');
      const { body } = await this.page().api.send<{ requeued: number; created: number }>(
        'POST',
        `webhooks/${encodeURIComponent(webhook.id)}/recover`,
        { since: since.toISOString() },
      );
      this.page().notify(recoveredWords(body));
      this.page().refresh();
    });
  }
}
