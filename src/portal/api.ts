import { parseJson } from './json.js';

// The API as the page calls it: on this origin (no CORS needed), with the token from the sign-in
// field as a bearer token, never in a URL or a cookie.

/** A refusal, in words for the page: what went wrong and, for a 403, the scope that is missing. */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    message: string,
    /** For a 403: the scope the token lacks (WWW-Authenticate's `scope`). */
    readonly scope?: string,
  ) {
    super(message);
  }
}

/** A call ended on purpose (signed out, or a change about to be made): nothing to show for it. */
export class Cancelled extends Error {
  override name = 'Cancelled';
  constructor() {
    super('cancelled');
  }
}

export interface Answer<T> {
  readonly body: T;
  readonly headers: Headers;
}

/** The API's paths are resolved against the page's folder: /portal → /webhooks, also under a path prefix. */
export const apiUrl = (path: string): string => new URL(path, new URL('.', location.href)).href;

/** A `Link: <…>; rel="next"` target as an absolute URL, or undefined on the last page (RFC 8288). */
export function nextLink(headers: Headers): string | undefined {
  const match = /<([^>]*)>\s*;\s*rel="?next"?/.exec(headers.get('link') ?? '');
  return match ? new URL(match[1]!, location.href).href : undefined;
}

/**
 * One signed-in session's calls. Its reads end when it is closed (signing out) or when a change is
 * about to be made (`cancelReads`), so that no answer read for one person, or from before a change,
 * is drawn after it: those calls end with Cancelled, which the page does not show.
 */
export class Api {
  private readonly session = new AbortController();
  private reads = new AbortController();

  constructor(readonly token: string) {}

  /** Signing out: every call of this session still under way ends, and its answer is dropped. */
  close(): void {
    this.session.abort();
  }

  /** Ends the reads under way (not the changes): what they would show is about to change. */
  cancelReads(): void {
    this.reads.abort();
    this.reads = new AbortController();
  }

  async get<T>(path: string): Promise<Answer<T>> {
    return this.call<T>('GET', path, undefined, AbortSignal.any([this.session.signal, this.reads.signal]));
  }

  async send<T>(method: 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<Answer<T>> {
    return this.call<T>(method, path, body, this.session.signal);
  }

  private async call<T>(method: string, path: string, body: unknown, signal: AbortSignal): Promise<Answer<T>> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const url = /^https?:/.test(path) ? path : apiUrl(path);
    let response: Response;
    let text: string;
    try {
      response = await fetch(url, { method, headers, body: body === undefined ? null : JSON.stringify(body), signal });
      text = await response.text();
    } catch {
      if (signal.aborted) throw new Cancelled();
      throw new ApiError(0, 'The server cannot be reached. Check your connection and try again.');
    }
    if (signal.aborted) throw new Cancelled();
    if (response.ok) return { body: (text === '' ? null : parseJson(text)) as T, headers: response.headers };
    throw refusal(response, text);
  }
}

function refusal(response: Response, text: string): ApiError {
  const challenge = response.headers.get('www-authenticate') ?? '';
  if (response.status === 401) {
    return new ApiError(401, 'The server refused this token: it is unknown, expired or revoked. Sign in with another.');
  }
  if (response.status === 403) {
    const scope = /scope="([^"]*)"/.exec(challenge)?.[1];
    return new ApiError(
      403,
      scope ? `This token lacks the ${scope} scope, which this needs.` : 'This token may not do this.',
      scope,
    );
  }
  let message = `The server answered ${response.status}.`;
  try {
    const body = JSON.parse(text) as { message?: unknown };
    if (typeof body.message === 'string') message = `${body.message[0]?.toUpperCase() ?? ''}${body.message.slice(1)}.`;
  } catch {
    // not the Error body: the status says enough
  }
  if (response.status === 429) message = `Too many requests: ${message}`;
  return new ApiError(response.status, message);
}
