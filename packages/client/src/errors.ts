/** The server answered, and the answer was a failure: a 4xx or 5xx status with its `Error` body. */
export class PlantStoreError extends Error {
  override readonly name = 'PlantStoreError';
  /** The HTTP status code of the answer. */
  readonly status: number;
  /** From `Retry-After` (429, 503), in milliseconds, when the server sent one. */
  readonly retryAfterMs: number | undefined;
  /** The `X-Request-Id` of the answer: the key to the server's log line. */
  readonly requestId: string | undefined;

  constructor(
    status: number,
    message: string,
    details: { retryAfterMs?: number | undefined; requestId?: string | undefined } = {},
  ) {
    super(message);
    this.status = status;
    this.retryAfterMs = details.retryAfterMs;
    this.requestId = details.requestId;
  }
}

/**
 * No answer came: the connection was refused or broke, or no answer arrived within the timeout,
 * on the last attempt. Whether an earlier attempt reached the server is unknown.
 */
export class PlantStoreNetworkError extends Error {
  override readonly name = 'PlantStoreNetworkError';
}

/** The PlantStoreNetworkError for what `fetch` rejected with. */
export function networkError(method: string, url: URL, cause: unknown, timeoutMs: number): PlantStoreNetworkError {
  // fetch rejects with TypeError('fetch failed') and the socket's error as its cause.
  const inner = (cause as { cause?: unknown } | undefined)?.cause ?? cause;
  const reason =
    cause instanceof DOMException && cause.name === 'TimeoutError'
      ? `no answer within ${timeoutMs} ms`
      : inner instanceof Error
        ? inner.message
        : String(inner);
  return new PlantStoreNetworkError(`${method} ${url.origin}${url.pathname}: ${reason}`, { cause });
}
