import type { Api } from './api.js';

/** What the panels share: the signed-in API, the page's messages, and a refresh of what is shown. */
export interface Page {
  readonly api: Api;
  /** A sentence in the page's status line (read out by a screen reader, politely). */
  notify(message: string): void;
  /** An error in the page's alert line; a refused token signs out. */
  fail(error: unknown): void;
  /** Reads the webhooks and deliveries again soon. */
  refresh(delayMs?: number): void;
}
