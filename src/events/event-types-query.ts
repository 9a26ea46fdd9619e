import { HttpError } from '../errors.js';
import { EVENT_TYPES, type EventType } from '../store/event-store.js';

/** Which event types a reader of the feed asked for; null: every type. */
export type TypeFilter = ReadonlySet<EventType> | null;

/**
 * `?types=plant.created,plant.deleted` (interface 1.2.0; docs/api.md#the-change-feed): the types,
 * comma-separated, spaces around each allowed; an unknown or empty one is a 400 that names the known
 * ones. Asking for every type is no filter at all (null), so the store reads every type unfiltered.
 */
export function parseTypesQuery(text: string | undefined): TypeFilter {
  if (text === undefined) return null;
  const types = new Set<EventType>();
  for (const part of text.split(',')) {
    const name = part.trim();
    if (!(EVENT_TYPES as readonly string[]).includes(name)) {
      const shown = name === '' ? 'an empty type' : `the unknown type ${JSON.stringify(name.slice(0, 40))}`;
      throw new HttpError(
        400,
        `?types= has ${shown}; it takes event types separated by commas: ${EVENT_TYPES.join(', ')}`,
      );
    }
    types.add(name as EventType);
  }
  return types.size === EVENT_TYPES.length ? null : types;
}

/** The filter as the query text of a link: the types in their canonical order; undefined for none. */
export function typesQueryText(types: TypeFilter): string | undefined {
  return types === null ? undefined : EVENT_TYPES.filter((t) => types.has(t)).join(',');
}
