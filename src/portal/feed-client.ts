import { EventStreamParser, type StreamEvent } from './sse.js';

// The live feed's connection: GET /events read with fetch, which can send the Authorization header
// that EventSource cannot. It resumes as EventSource does: after a drop it waits the server's
// `retry:` time and reconnects with `Last-Event-ID`, so no event is missed or seen twice
// (docs/events.md, "The feed across deploys"). Pure: no DOM, so the unit tests run it under Node.

export type FeedState =
  | { readonly kind: 'connecting' }
  | { readonly kind: 'open' }
  /** Dropped (or refused for now): reconnecting after `ms`; `gap` when events were lost (410). */
  | { readonly kind: 'waiting'; readonly ms: number; readonly why: string; readonly gap?: boolean }
  /** Refused for good (the token, its scope, the request): a new start is needed. */
  | { readonly kind: 'stopped'; readonly why: string; readonly status: number };

export interface FeedOptions {
  /** The feed's URL, with `?types=` when filtered. */
  readonly url: string;
  readonly token: string;
  readonly onEvent: (event: StreamEvent) => void;
  readonly onState: (state: FeedState) => void;
  /** Where to resume: the last event id seen by an earlier feed, when there is one. */
  readonly lastEventId?: string;
  readonly fetch?: typeof fetch;
}

/** Before the server has said (`retry:`), the wait before a reconnect; EventSource's usual few seconds. */
const DEFAULT_RETRY_MS = 2000;

export class FeedClient {
  private readonly abort = new AbortController();
  private readonly parser: EventStreamParser;
  private wake: (() => void) | undefined;

  constructor(private readonly options: FeedOptions) {
    this.parser = new EventStreamParser(options.onEvent);
    this.parser.lastEventId = options.lastEventId ?? '';
  }

  /** The last event id seen, to resume a later feed from. */
  get lastEventId(): string {
    return this.parser.lastEventId;
  }

  /** Follows the feed until stop() or a refusal for good; settles then. */
  async run(): Promise<void> {
    while (!this.abort.signal.aborted) {
      const wait = await this.connect();
      if (wait === undefined) return;
      this.options.onState({ kind: 'waiting', ...wait });
      await this.sleep(wait.ms);
    }
  }

  stop(): void {
    this.abort.abort();
    this.wake?.();
  }

  /** One connection, read to its end: how long to wait before the next, or undefined to stop. */
  private async connect(): Promise<{ ms: number; why: string; gap?: boolean } | undefined> {
    const { token, url } = this.options;
    const retry = (): number => this.parser.retryMs ?? DEFAULT_RETRY_MS;
    this.options.onState({ kind: 'connecting' });
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'text/event-stream' };
    if (this.parser.lastEventId !== '') headers['last-event-id'] = this.parser.lastEventId;
    let response: Response;
    try {
      response = await (this.options.fetch ?? fetch)(url, { headers, signal: this.abort.signal });
    } catch {
      return this.abort.signal.aborted ? undefined : { ms: retry(), why: 'the server cannot be reached' };
    }
    if (response.status === 410) {
      // The event to resume after is past the retention: follow from now on (the page says so).
      await response.body?.cancel();
      this.parser.lastEventId = '';
      return { ms: 0, why: 'the events since are past the retention', gap: true };
    }
    if (response.status === 429 || response.status >= 500) {
      await response.body?.cancel();
      const after = Number(response.headers.get('retry-after'));
      return {
        ms: Number.isFinite(after) && after > 0 ? after * 1000 : retry(),
        why: `the server answered ${response.status}`,
      };
    }
    if (response.status !== 200 || response.body === null) {
      const why = await refusal(response);
      this.options.onState({ kind: 'stopped', why, status: response.status });
      return undefined;
    }
    this.options.onState({ kind: 'open' });
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (let read = await reader.read(); !read.done; read = await reader.read()) this.parser.push(read.value);
    } catch {
      // A dropped connection, or stop(): either way this stream is over.
    }
    this.parser.reset();
    return this.abort.signal.aborted ? undefined : { ms: retry(), why: 'the stream ended' };
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/** What a refused request's Error body says, or its status. */
async function refusal(response: Response): Promise<string> {
  try {
    const body = (await response.json()) as { message?: unknown };
    if (typeof body.message === 'string') return body.message;
  } catch {
    // not the Error body
  }
  return `the server answered ${response.status}`;
}
