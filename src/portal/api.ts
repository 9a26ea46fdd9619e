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

export class Api {
  constructor(readonly token: string) {}

  async get<T>(path: string): Promise<Answer<T>> {
    return this.call<T>('GET', path);
  }

  async send<T>(method: 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<Answer<T>> {
    return this.call<T>(method, path, body);
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<Answer<T>> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.token}`, accept: 'application/json' };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const url = /^https?:/.test(path) ? path : apiUrl(path);
    let response: Response;
    try {
      response = await fetch(url, { method, headers, body: body === undefined ? null : JSON.stringify(body) });
    } catch {
      throw new ApiError(0, 'The server cannot be reached. Check your connection and try again.');
    }
    const text = await response.text();
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
