import { NONE, cell, h } from './dom.js';
import type { Page } from './page.js';
import type { Attempt, Webhook } from './shapes.js';
import { httpStatusWords, localTime } from './words.js';

// A delivery opened to its attempt log (GET …/deliveries/{id}/attempts): status, duration, error
// and the first 1 KiB of the receiver's answer, shown as text.

export class AttemptsView {
  /** The deliveries opened, and their attempts as last read. */
  private readonly open = new Map<string, readonly Attempt[] | undefined>();

  constructor(private readonly page: () => Page) {}

  isOpen(id: string): boolean {
    return this.open.has(id);
  }

  toggle(id: string): void {
    if (this.open.has(id)) this.open.delete(id);
    else this.open.set(id, undefined);
  }

  clear(): void {
    this.open.clear();
  }

  /** Reads again the attempts of the open deliveries among those shown; the others close. */
  async load(shown: readonly string[], webhook: Webhook): Promise<void> {
    for (const id of this.open.keys()) if (!shown.includes(id)) this.open.delete(id);
    await Promise.all(
      [...this.open.keys()].map(async (id) => {
        const url = `webhooks/${encodeURIComponent(webhook.id)}/deliveries/${id}/attempts`;
        this.open.set(id, (await this.page().api.get<Attempt[]>(url)).body);
      }),
    );
  }

  /** The row under a delivery's row that holds its attempt log. */
  row(id: string, columns: number): HTMLTableRowElement {
    const attempts = this.open.get(id) ?? [];
    return h(
      'tr',
      { class: 'attempts-row' },
      h(
        'td',
        { colspan: columns, id: `attempts-${id}` },
        attempts.length === 0
          ? h('p', { class: 'muted' }, 'No attempt yet: it is waiting for its first.')
          : h(
              'table',
              { class: 'attempts' },
              h('caption', {}, `Attempts of delivery ${id}, newest first`),
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  ...['Attempt', 'Ended', 'HTTP status', 'Duration', 'Error', "Receiver's answer"].map((name) =>
                    h('th', { scope: 'col' }, name),
                  ),
                ),
              ),
              h('tbody', {}, ...attempts.map((attempt) => this.attempt(attempt))),
            ),
      ),
    );
  }

  private attempt(attempt: Attempt): HTMLTableRowElement {
    return h(
      'tr',
      {},
      cell('Attempt', attempt.attempt),
      cell('Ended', localTime(attempt.at)),
      cell('HTTP status', httpStatusWords(attempt.status)),
      cell('Duration', `${attempt.durationMs} ms`),
      cell('Error', attempt.error ?? NONE),
      cell(
        "Receiver's answer",
        attempt.response === null ? NONE : h('pre', {}, attempt.response === '' ? '(empty)' : attempt.response),
      ),
    );
  }
}
