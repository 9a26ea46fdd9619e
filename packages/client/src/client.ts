import { OPERATIONS, type NewPlant, type OperationId, type Plant } from './contract.js';
import { PlantStoreNetworkError, networkError, type PlantStoreError } from './errors.js';
import { type Int64, toInt64 } from './int64.js';
import {
  DEFAULT_RETRY_POLICY,
  OUTCOME_UNKNOWN_STATUSES,
  RETRY_STATUSES,
  type RetryPolicy,
  backoffMs,
  neverSent,
  sleep,
} from './retry.js';
import {
  type Answer,
  type CallOptions,
  type ListOptions,
  listQuery,
  newPlantJson,
  nextCursor,
  readPlant,
  readPlants,
  toError,
} from './wire.js';
import { Webhooks } from './webhooks.js';
import {
  type EventsPage,
  type EventsPageOptions,
  eventsQuery,
  nextAfter,
  readEventTicket,
  readEventsPage,
} from './events.js';
import type { EventTicket, FeedEvent } from './contract.js';

export interface PlantStoreClientOptions extends Partial<RetryPolicy> {
  /** Where the API is: `http://127.0.0.1:8080`, or `https://example.com/plant-store/` behind a prefix. */
  baseUrl: string | URL;
  /** A bearer token: an API token from `plant-store token create`, or a JWT. It is never shown. */
  token: string;
  /** How long one attempt may take, answer body included (default 30 000 ms); then it counts as lost. */
  timeoutMs?: number;
  /** Another `fetch` (default: the global one): a proxy agent, a test double. */
  fetch?: typeof fetch;
  /** Called before each retry, e.g. to log it. */
  onRetry?: (event: RetryEvent) => void;
}

export interface RetryEvent {
  readonly operation: OperationId;
  /** The attempt that failed, from 1. */
  readonly attempt: number;
  readonly delayMs: number;
  readonly error: PlantStoreError | PlantStoreNetworkError;
}

export type { CallOptions, ListOptions } from './wire.js';

export interface EventsOptions extends EventsPageOptions {
  /**
   * false (the default): the iterator ends at the first empty page, having read every event there
   * was. true: it keeps polling, waiting `pollIntervalMs` after each empty page, until `signal`
   * aborts (the iterator then throws its reason) or the loop over it ends (`break`).
   */
  follow?: boolean;
  /** With `follow`, the wait after an empty page before asking again (default 1 000 ms). */
  pollIntervalMs?: number;
}

export interface Page {
  readonly plants: Plant[];
  /** The cursor of the next page, or undefined on the last one. */
  readonly next: string | undefined;
}

// RFC 6750 §2.1: checked here so a malformed token is refused without ever being echoed in an error.
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

export class PlantStoreClient {
  /** The API's base URL, always ending in `/`. */
  readonly baseUrl: string;
  readonly #token: string;
  readonly #policy: RetryPolicy;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;
  readonly #onRetry: ((event: RetryEvent) => void) | undefined;
  /** The webhook calls: create, list, update, delete, rotateSecret, ping, recover, enable, deliveries, activity … */
  readonly webhooks: Webhooks;

  constructor(options: PlantStoreClientOptions) {
    const base = new URL(options.baseUrl);
    if (base.protocol !== 'http:' && base.protocol !== 'https:') {
      throw new TypeError('baseUrl must be an http: or https: URL');
    }
    if (base.username !== '' || base.password !== '') {
      throw new TypeError('baseUrl must not carry credentials: the token is the credential');
    }
    base.search = '';
    base.hash = '';
    if (!base.pathname.endsWith('/')) base.pathname += '/';
    this.baseUrl = base.href;
    if (typeof options.token !== 'string' || !B64TOKEN.test(options.token)) {
      throw new TypeError('token must be a bearer token (RFC 6750: letters, digits and -._~+/, then any =)');
    }
    this.#token = options.token;
    this.#policy = { ...DEFAULT_RETRY_POLICY, ...definedOnly(options) };
    if (!Number.isInteger(this.#policy.retries) || this.#policy.retries < 0 || this.#policy.retries > 10) {
      throw new RangeError('retries must be an integer from 0 to 10');
    }
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    const given = options.fetch;
    this.#fetch = given ?? ((input, init) => fetch(input, init));
    this.#onRetry = options.onRetry;
    this.webhooks = new Webhooks({
      send: (operation, url, body, signal) => this.#send(operation, url, body, signal),
      url: (path, query) => this.#url(path, query),
    });
  }

  /** POST /plants. Safe to repeat: the same plant again answers 200, so failures are retried. */
  async create(plant: NewPlant, options: CallOptions = {}): Promise<Plant> {
    const op = OPERATIONS.addPlant;
    const answer = await this.#send('addPlant', this.#url(op.path), newPlantJson(plant), options.signal);
    if (answer.status !== op.success) throw toError(answer);
    return readPlant(answer);
  }

  /**
   * DELETE /plants/{id}. Resolves once the plant is gone. A 404 is a PlantStoreError, except on a
   * retry after an attempt whose outcome is unknown (no answer, a timeout, 502, 503, 504): that
   * attempt may well have deleted it, and the server cannot tell "deleted a moment ago" from
   * "never existed", so the plant being gone is what counts.
   */
  async delete(id: Int64, options: CallOptions = {}): Promise<void> {
    const op = OPERATIONS.deletePlant;
    const path = op.path.replace('{id}', toInt64(id).toString());
    const answer = await this.#send('deletePlant', this.#url(path), undefined, options.signal);
    if (answer.status === op.success) return;
    if (answer.status === 404 && answer.afterUnknownOutcome) return;
    throw toError(answer);
  }

  /** GET /plants: one page, and the cursor of the next one. */
  async listPage(options: ListOptions = {}): Promise<Page> {
    const op = OPERATIONS.findPlants;
    const answer = await this.#send('findPlants', this.#url(op.path, listQuery(options)), undefined, options.signal);
    if (answer.status !== op.success) throw toError(answer);
    return { plants: readPlants(answer), next: nextCursor(answer) };
  }

  /** Every plant the token can reach, in ascending id order, following `Link: rel="next"` page by page. */
  async *list(options: ListOptions = {}): AsyncGenerator<Plant, void, undefined> {
    let cursor = options.cursor;
    do {
      const page = await this.listPage({ ...options, cursor });
      yield* page.plants;
      cursor = page.next;
    } while (cursor !== undefined);
  }

  /** GET /events as JSON: one page of the change feed, and where the next one starts. */
  async eventsPage(options: EventsPageOptions = {}): Promise<EventsPage> {
    const op = OPERATIONS.streamEvents;
    const url = this.#url(op.path, eventsQuery(options));
    const answer = await this.#send('streamEvents', url, undefined, options.signal);
    if (answer.status !== op.success) throw toError(answer);
    return { events: readEventsPage(answer), next: nextAfter(answer) };
  }

  /**
   * POST /events/tickets: a single-use ticket, valid 60 s, that opens one stream as this client's
   * token would: `new EventSource(\`${baseUrl}events?ticket=${ticket}\`)` in a browser, whose own
   * EventSource cannot send `Authorization`. To resume a stream after it ends, ask for a fresh one
   * and add `&after=<the last id received>`.
   */
  async eventTicket(options: CallOptions = {}): Promise<EventTicket> {
    const op = OPERATIONS.createEventTicket;
    const answer = await this.#send('createEventTicket', this.#url(op.path), undefined, options.signal);
    if (answer.status !== op.success) throw toError(answer);
    return readEventTicket(answer);
  }

  /**
   * The change feed's events the token may see, in id order, each once: page after page, following
   * `Link: rel="next"`. Without `after`, from the oldest event the server keeps; without `follow`,
   * until the first empty page. An `after` past the server's retention is a PlantStoreError 410.
   */
  async *events(options: EventsOptions = {}): AsyncGenerator<FeedEvent, void, undefined> {
    const { follow = false, pollIntervalMs = 1000, ...pageOptions } = options;
    if (!Number.isFinite(pollIntervalMs) || pollIntervalMs < 0)
      throw new RangeError('pollIntervalMs must be 0 or more');
    eventsQuery(pageOptions); // a bad option is a throw at the first next(), before any request
    let after = pageOptions.after;
    for (;;) {
      const page = await this.eventsPage({ ...pageOptions, after });
      yield* page.events;
      after = page.next;
      if (page.events.length > 0) continue;
      if (!follow) return;
      await sleep(pollIntervalMs, options.signal);
    }
  }

  #url(path: string, query?: URLSearchParams): URL {
    const url = new URL(path.slice(1), this.baseUrl);
    if (query !== undefined) url.search = query.toString();
    return url;
  }

  /**
   * Sends one call, retrying what RETRY_STATUSES and lost answers allow, and answers the last
   * answer (success or not). Throws PlantStoreNetworkError when the last attempt got no answer.
   * An operation that is not idempotent is sent again only after a failure that says it was not
   * carried out (408, 429, a refused connection): once it may have been, the failure is the
   * caller's, who can look (list) before deciding, where a retry would do it twice.
   */
  async #send(operation: OperationId, url: URL, body: string | undefined, signal?: AbortSignal): Promise<Answer> {
    const op = OPERATIONS[operation];
    const { method } = op;
    const repeatable = !('idempotent' in op) || op.idempotent;
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.#token}`,
      accept: 'application/json',
      // One id for every attempt: the server's log shows the retries of one call together.
      'x-request-id': globalThis.crypto.randomUUID(),
    };
    if (body !== undefined) headers['content-type'] = 'application/json';
    let unknownOutcome = false;
    for (let attempt = 1; ; attempt++) {
      let answer: Answer | undefined;
      let error: PlantStoreError | PlantStoreNetworkError;
      try {
        // redirect: 'manual': the API never redirects, and the token must not follow one elsewhere.
        const init = { method, headers, body, redirect: 'manual', signal: this.#attemptSignal(signal) } as const;
        const response = await this.#fetch(url, init);
        const text = await response.text();
        const { status, statusText } = response;
        answer = { status, statusText, headers: response.headers, text, afterUnknownOutcome: unknownOutcome };
        if (!RETRY_STATUSES.has(status)) return answer;
        error = toError(answer);
        if (OUTCOME_UNKNOWN_STATUSES.has(status)) {
          if (!repeatable) return answer;
          unknownOutcome = true;
        }
      } catch (cause) {
        if (signal?.aborted) throw signal.reason;
        error = networkError(method, url, cause, this.#timeoutMs);
        if (!neverSent(cause)) {
          if (!repeatable) throw error;
          unknownOutcome = true;
        }
      }
      const delayMs = this.#retryDelay(error, attempt);
      if (delayMs === undefined) {
        if (answer !== undefined) return answer;
        throw error;
      }
      this.#onRetry?.({ operation, attempt, delayMs, error });
      await sleep(delayMs, signal);
    }
  }

  /** How long to wait before the next attempt, or undefined when there is to be none. */
  #retryDelay(error: PlantStoreError | PlantStoreNetworkError, attempt: number): number | undefined {
    if (attempt > this.#policy.retries) return undefined;
    const backoff = backoffMs(this.#policy, attempt - 1);
    if (error instanceof PlantStoreNetworkError || error.retryAfterMs === undefined) return backoff;
    if (error.retryAfterMs > this.#policy.maxRetryAfterMs) return undefined;
    return Math.max(error.retryAfterMs, backoff);
  }

  #attemptSignal(signal: AbortSignal | undefined): AbortSignal {
    const timeout = AbortSignal.timeout(this.#timeoutMs);
    return signal === undefined ? timeout : AbortSignal.any([signal, timeout]);
  }
}

/** The retry settings given, without the undefined ones that would override the defaults. */
function definedOnly(options: Partial<RetryPolicy>): Partial<RetryPolicy> {
  const { retries, baseDelayMs, maxDelayMs, maxRetryAfterMs } = options;
  const given = { retries, baseDelayMs, maxDelayMs, maxRetryAfterMs };
  return Object.fromEntries(Object.entries(given).filter(([, value]) => value !== undefined));
}
