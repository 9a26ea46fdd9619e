import assert from 'node:assert/strict';
import { EVENT_SHAPES, OPERATIONS, type FieldShape, type ObjectShape, SHAPES } from '../src/contract.js';
import { WEBHOOK_SHAPES } from '../src/webhook-contract.js';
import { type TestServer, startTestServer } from './support.js';

// The OpenAPI document a running server serves, and how the drift checks (contract*.test.ts)
// compare the client's OPERATIONS and shapes with it.

export type Json = Record<string, unknown>;

/** A server (webhook targets on 127.0.0.1 allowed: nothing is ever sent elsewhere) and its document. */
export async function served(): Promise<{ server: TestServer; document: Json }> {
  const server = await startTestServer({ env: { WEBHOOK_ALLOW_PRIVATE: '1' } });
  const response = await fetch(`${server.url}/openapi.json`);
  assert.equal(response.status, 200);
  return { server, document: (await response.json()) as Json };
}

export const at = (value: unknown, ...path: string[]): Json => {
  let node = value;
  for (const key of path) {
    assert.ok(node !== null && typeof node === 'object' && key in node, `the document has ${path.join(' → ')}`);
    node = (node as Json)[key];
  }
  return node as Json;
};

export const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
/** The operation and the parameters of an operationId, in `document`. */
export const lookups = (document: () => Json) => {
  const operation = (id: keyof typeof OPERATIONS): Json =>
    at(document(), 'paths', OPERATIONS[id].path, OPERATIONS[id].method.toLowerCase());
  const parameters = (id: keyof typeof OPERATIONS): Json[] => (operation(id).parameters as Json[] | undefined) ?? [];
  return { operation, parameters };
};

/**
 * Shapes the server declares inline, under their operation (or, for WebhookActivityHour, as the
 * items of WebhookActivity.hours), rather than in components.schemas.
 */
export const INLINE: Readonly<Record<string, ObjectShape>> = {
  PingDelivery: WEBHOOK_SHAPES.PingDelivery,
  WebhookActivityHour: WEBHOOK_SHAPES.WebhookActivityHour,
  Recovered: WEBHOOK_SHAPES.Recovered,
  RotateSecret: WEBHOOK_SHAPES.RotateSecret,
  Recover: WEBHOOK_SHAPES.Recover,
  EventTicket: EVENT_SHAPES.EventTicket,
};
/** The shapes the server names in components.schemas. */
export const COMPONENTS: Readonly<Record<string, ObjectShape>> = Object.fromEntries(
  Object.entries<ObjectShape>({ ...SHAPES, ...WEBHOOK_SHAPES }).filter(([name]) => !(name in INLINE)),
);

/** A body named in OPERATIONS (`Webhook`, `Delivery[]`, an inline one) matches the document's schema. */
export function assertBody(where: string, schema: Json, name: string): void {
  const item = name.replace(/\[\]$/, '');
  const expected = item in INLINE ? undefined : ref(item);
  const single = name.endsWith('[]') ? (assert.equal(schema.type, 'array', where), at(schema, 'items')) : schema;
  if (expected === undefined) assertShape(`${where} ${item}`, single, INLINE[item]!);
  else assert.deepEqual(single, expected, where);
}

interface Described {
  types: string[];
  format?: unknown;
  values?: unknown[];
  items?: Described;
}

/**
 * What a field's schema admits, however the document spells it: `type` (one or a list), `enum`,
 * `const`, or `anyOf` of those (TypeBox writes a union of literals and a nullable field that way).
 */
function described(schema: Json): Described {
  if (Array.isArray(schema.anyOf)) {
    const members = (schema.anyOf as Json[]).map(described);
    const valued = members.filter((m) => !(m.types.length === 1 && m.types[0] === 'null'));
    const format = members.find((m) => m.format !== undefined)?.format;
    return tidy({
      types: [...new Set(members.flatMap((m) => m.types))],
      format,
      values: valued.every((m) => m.values !== undefined) ? valued.flatMap((m) => m.values!) : undefined,
    });
  }
  const values = Array.isArray(schema.enum) ? schema.enum : 'const' in schema ? [schema.const] : undefined;
  const items = schema.items === undefined ? undefined : described(schema.items as Json);
  return tidy({ types: [schema.type as string | string[]].flat(), format: schema.format, values, items });
}

function expectedOf(field: Omit<FieldShape, 'required'>): Described {
  return tidy({
    types: [field.type].flat(),
    format: field.format,
    values: field.values === undefined ? undefined : [...field.values],
    items: field.items === undefined ? undefined : expectedOf(field.items),
  });
}

/** Sorted, and without the keys that say nothing, so that two descriptions compare with deepEqual. */
function tidy(d: Described): Described {
  const out: Described = { types: [...d.types].sort() };
  if (d.format !== undefined) out.format = d.format;
  if (d.values !== undefined) out.values = [...d.values].sort();
  if (d.items !== undefined) out.items = d.items;
  return out;
}

/** A schema has exactly the fields, types, formats, allowed values and required list of a shape. */
export function assertShape(name: string, schema: Json, shape: ObjectShape): void {
  assert.equal(schema.type, 'object');
  assert.equal(schema.additionalProperties, false, `${name} allows no other field`);
  const properties = at(schema, 'properties');
  assert.deepEqual(Object.keys(properties).sort(), Object.keys(shape).sort(), `${name}: fields`);
  for (const [field, expected] of Object.entries(shape)) {
    assert.deepEqual(described(at(properties, field)), expectedOf(expected), `${name}.${field}`);
  }
  const required = Object.entries(shape)
    .filter(([, field]) => field.required)
    .map(([field]) => field);
  assert.deepEqual([...((schema.required as string[] | undefined) ?? [])].sort(), required.sort(), `${name}: required`);
}
