import fc from 'fast-check';
import { type Notation, NOTATIONS, idArb, writeId } from './int64.arb.js';
import type { Mutation } from './mutation.arb.js';
import { STRING_STYLES, type StringStyle, tagArb, validTextArb, writeString } from './text.arb.js';

// POST /plants bodies: a valid NewPlant, written in one of many equivalent ways, and then perhaps
// broken in exactly one way (mutation.arb.ts) whose answer the contract fixes (400, or 413 by size).

export interface NewPlantDraft {
  readonly id: bigint;
  readonly notation: Notation;
  readonly name: string;
  /** undefined: no `tag` key; null: `"tag": null`. */
  readonly tag: string | null | undefined;
  readonly keyStyle: StringStyle;
  readonly valueStyle: StringStyle;
  readonly ws: string;
  readonly order: number;
}

const NAME_POOL = ['fern', 'monstera', '🌵 cactus', 'x'.repeat(200)];

export const draftArb: fc.Arbitrary<NewPlantDraft> = fc.record({
  id: idArb,
  notation: fc.oneof({ weight: 4, arbitrary: fc.constant<Notation>('plain') }, fc.constantFrom(...NOTATIONS)),
  name: fc.oneof(fc.constantFrom(...NAME_POOL), validTextArb(200)),
  tag: fc.oneof(fc.constant(undefined), fc.constant(null), tagArb),
  keyStyle: fc.oneof({ weight: 4, arbitrary: fc.constant<StringStyle>('json') }, fc.constantFrom(...STRING_STYLES)),
  valueStyle: fc.constantFrom(...STRING_STYLES),
  ws: fc.constantFrom('', '', ' ', '\n', '\t', '\r\n', ' \t\n\r '),
  order: fc.nat(5),
});

const ORDERS = [
  ['id', 'name', 'tag'],
  ['id', 'tag', 'name'],
  ['name', 'id', 'tag'],
  ['name', 'tag', 'id'],
  ['tag', 'id', 'name'],
  ['tag', 'name', 'id'],
] as const;

export interface BodyCase {
  readonly bytes: Buffer;
  /** The plant a valid body asks for; undefined when the body itself earns a 400 (or 413 by size). */
  readonly plant: { readonly id: bigint; readonly name: string; readonly tag: string | null } | undefined;
}

const SPLIT = '\u0000split\u0000'; // never in a rendered body: JSON escapes U+0000

/** The body of `draft` with `mutation` applied, and whether it still is a valid NewPlant. */
export function renderBody(draft: NewPlantDraft, mutation: Mutation): BodyCase {
  const { ws, keyStyle, valueStyle } = draft;
  const values: Record<string, string | undefined> = {
    id: writeId(draft.id, draft.notation),
    name: writeString(draft.name, valueStyle),
    tag: draft.tag === undefined ? undefined : draft.tag === null ? 'null' : writeString(draft.tag, valueStyle),
  };
  let entries: Array<[string, string]> = ORDERS[draft.order % ORDERS.length]!.flatMap((key) =>
    values[key] === undefined ? [] : [[key, values[key]] as [string, string]],
  );
  const deep = (m: Extract<Mutation, { kind: 'deep' }>): string =>
    m.arrays ? '['.repeat(m.depth) + ']'.repeat(m.depth) : '{"a":'.repeat(m.depth) + '1' + '}'.repeat(m.depth);
  const set = (key: string, literal: string): void => {
    entries = entries.some(([k]) => k === key)
      ? entries.map(([k, v]) => [k, k === key ? literal : v])
      : [...entries, [key, literal]];
  };
  let space = ws;
  switch (mutation.kind) {
    case 'bad-id':
      set('id', mutation.literal);
      break;
    case 'missing':
      entries = entries.filter(([k]) => k !== mutation.key);
      break;
    case 'bad-name':
    case 'bad-tag':
      set(mutation.kind === 'bad-name' ? 'name' : 'tag', mutation.literal);
      break;
    case 'extra-key':
      entries.splice(mutation.at % (entries.length + 1), 0, [mutation.key, mutation.literal]);
      break;
    case 'duplicate': {
      const other = mutation.key === 'id' ? String(draft.id + 1n) : '"other"';
      const value = values[mutation.key];
      if (value === undefined) entries.push([mutation.key, 'null']);
      entries.push([mutation.key, mutation.same ? (value ?? 'null') : other]);
      break;
    }
    case 'deep':
      if (mutation.where !== 'body') set(mutation.where === 'tag' ? 'tag' : 'nested', deep(mutation));
      break;
    case 'bad-space':
      space = `${ws}${mutation.ws}`;
      break;
    case 'in-name':
      set('name', SPLIT);
      break;
    case 'huge-name':
      set('name', `"${'n'.repeat(mutation.length)}"`);
      break;
  }
  const object = `{${space}${entries.map(([k, v]) => `${writeString(k, keyStyle)}${space}:${space}${v}`).join(`${space},${space}`)}${space}}`;
  const plant = { id: draft.id, name: draft.name, tag: draft.tag ?? null };
  switch (mutation.kind) {
    case 'none':
      return { bytes: Buffer.from(object), plant };
    case 'pad': {
      const padding = ' '.repeat(Math.max(0, mutation.size - Buffer.byteLength(object)));
      return { bytes: Buffer.from(mutation.atStart ? padding + object : object + padding), plant };
    }
    case 'not-object': {
      const shapes: Record<string, string> = { array: `[${object}]`, string: JSON.stringify(object), id: values.id! };
      return { bytes: Buffer.from(shapes[mutation.shape] ?? mutation.shape), plant: undefined };
    }
    case 'trailing':
      return { bytes: Buffer.from(`${object}${ws}${mutation.garbage}`), plant: undefined };
    case 'truncate':
      return { bytes: Buffer.from(object.slice(0, mutation.at % object.length)), plant: undefined };
    case 'deep':
      return { bytes: Buffer.from(mutation.where === 'body' ? deep(mutation) : object), plant: undefined };
    case 'in-name': {
      const name = [...draft.name];
      const cut = mutation.at % (name.length + 1);
      const escaped = (text: string): string => writeString(text, valueStyle).slice(1, -1);
      const [before, after] = object.split(SPLIT) as [string, string];
      const head = Buffer.from(`${before}"${escaped(name.slice(0, cut).join(''))}`);
      const tail = Buffer.from(`${escaped(name.slice(cut).join(''))}"${after}`);
      return { bytes: Buffer.concat([head, Buffer.from(mutation.bytes), tail]), plant: undefined };
    }
    default:
      return { bytes: Buffer.from(object), plant: undefined };
  }
}
