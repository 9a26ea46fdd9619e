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
  /**
   * Runs a change with no read under way or started meanwhile (a read sent before a delete would
   * ask the server for what the delete removed), then reads again.
   */
  quietly<T>(change: () => Promise<T>): Promise<T>;
}
