import {
  LIMIT,
  SHAPES,
  type ErrorBody,
  type FieldShape,
  type ListQueryName,
  type OperationId,
  type NewPlant,
  type ObjectShape,
  type Plant,
} from './contract.js';
import { PlantStoreError } from './errors.js';
import { toInt64 } from './int64.js';
import { nextLinkTarget } from './link.js';
import { parseRetryAfter } from './retry.js';

/** One HTTP answer, read whole. */
export interface Answer {
  readonly status: number;
  readonly statusText: string;
  readonly headers: Headers;
  readonly text: string;
  /** An earlier attempt of the same call may have been carried out, its answer lost. */
  readonly afterUnknownOutcome: boolean;
}

export interface CallOptions {
  signal?: AbortSignal;
}

export interface ListOptions extends CallOptions {
  /** Plants per page (per request), 1 to 1000; the server's default is 100. */
  limit?: number;
  /** Only plants with exactly this tag. */
  tag?: string;
  /** Start at this page: the `next` of an earlier `listPage`. */
  cursor?: string;
}

/** How a group of calls (client.webhooks) reaches the server: through the client's one send path. */
export interface Transport {
  /** Sends one call with the client's retry policy; answers the last answer, success or not. */
  send(operation: OperationId, url: URL, body: string | undefined, signal: AbortSignal | undefined): Promise<Answer>;
  /** The URL of an API path (starting with `/`) under the client's base URL. */
  url(path: string, query?: URLSearchParams): URL;
}

/**
 * The POST /plants body, written as text: JSON.stringify cannot write a bigint, and a number
 * would round ids beyond 2^53. Validates what JSON alone cannot say; the rest is the server's call.
 */
export function newPlantJson(plant: NewPlant): string {
  if (typeof plant !== 'object' || plant === null) throw new TypeError('a new plant must be an object');
  const { id, name, tag } = plant;
  const exact = toInt64(id);
  if (typeof name !== 'string') throw new TypeError('a plant name must be a string');
  if (tag !== undefined && tag !== null && typeof tag !== 'string') {
    throw new TypeError('a plant tag must be a string, null or left out');
  }
  const tagJson = tag === undefined ? '' : `,"tag":${JSON.stringify(tag)}`;
  return `{"id":${exact.toString()},"name":${JSON.stringify(name)}${tagJson}}`;
}

/** The GET /plants query; its names are the ones OPERATIONS.findPlants lists. */
export function listQuery({ limit, tag, cursor }: ListOptions): URLSearchParams {
  if (limit !== undefined && !(Number.isInteger(limit) && limit >= LIMIT.min && limit <= LIMIT.max)) {
    throw new RangeError(`limit must be an integer from ${LIMIT.min} to ${LIMIT.max}`);
  }
  if (tag !== undefined && typeof tag !== 'string') throw new TypeError('tag must be a string');
  if (cursor !== undefined && typeof cursor !== 'string') throw new TypeError('cursor must be a string');
  const values: Record<ListQueryName, string | undefined> = { limit: limit?.toString(), tag, cursor };
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(values)) if (value !== undefined) query.set(name, value);
  return query;
}

/** The plant in a success answer, exactly the fields of the Plant schema. */
export function readPlant(answer: Answer): Plant {
  return readShape<Plant>(parseJson(answer), SHAPES.Plant) ?? unexpected(answer, 'its body is not a Plant');
}

export function readPlants(answer: Answer): Plant[] {
  const body = parseJson(answer);
  if (!Array.isArray(body)) return unexpected(answer, 'its body is not an array of plants');
  return body.map((item) => readShape<Plant>(item, SHAPES.Plant) ?? unexpected(answer, 'an item is not a Plant'));
}

/**
 * The `cursor` of the `rel="next"` link, or undefined on the last page. The cursor is taken out
 * of the link rather than the link followed, so a base URL behind a path prefix keeps working.
 */
export function nextCursor(answer: Answer): string | undefined {
  const target = nextLinkTarget(answer.headers.get('link'));
  if (target === undefined) return undefined;
  const cursor = new URL(target, 'http://link.invalid/').searchParams.get('cursor');
  return cursor || unexpected(answer, 'its Link rel="next" carries no cursor');
}

/** The typed error for a failure answer: the status, and the message of its Error body. */
export function toError(answer: Answer): PlantStoreError {
  const body = readShape<ErrorBody>(tryJson(answer.text), SHAPES.Error);
  const fallback = `HTTP ${answer.status}${answer.statusText ? ` ${answer.statusText}` : ''}`;
  return new PlantStoreError(answer.status, body?.message || fallback, {
    retryAfterMs: parseRetryAfter(answer.headers.get('retry-after')),
    requestId: answer.headers.get('x-request-id') ?? undefined,
  });
}

/** A success status with a body that breaks the contract: a failure too, with that status. */
export function unexpected(answer: Answer, what: string): never {
  throw new PlantStoreError(answer.status, `unexpected answer from the server: ${what}`, {
    requestId: answer.headers.get('x-request-id') ?? undefined,
  });
}

function parseJson(answer: Answer): unknown {
  const value = tryJson(answer.text);
  return value === undefined ? unexpected(answer, 'its body is not JSON') : value;
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * A copy of `value` with exactly the fields of `shape`, or undefined when a required field is
 * missing or one has the wrong type. Unknown fields are dropped, so the result is what the type says.
 */
function readShape<T>(value: unknown, shape: ObjectShape): T | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const copy: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(shape)) {
    if (!Object.hasOwn(value, key)) {
      if (field.required) return undefined;
      continue;
    }
    const item = (value as Record<string, unknown>)[key];
    if (!fits(item, field)) return undefined;
    copy[key] = item;
  }
  return copy as T;
}

function fits(value: unknown, field: FieldShape): boolean {
  return [field.type].flat().some((type) => {
    if (type === 'string') return typeof value === 'string';
    if (type === 'null') return value === null;
    return Number.isSafeInteger(value); // no int64 is ever read: the API returns no ids
  });
}
