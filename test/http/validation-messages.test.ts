import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type TestApp, makeApp } from '../helpers.js';

// Every 400 a schema answers is a sentence naming the field and its rule, built from the schema's
// keywords: never the field's description spliced in ("querystring.limit must be how many
// deliveries, newest first"). Walks every parameter and body field of the served OpenAPI document
// (made from the routes' own schemas), sends one bad value for each, and reads the Error body.

type Json = Record<string, unknown>;
interface Operation {
  readonly operationId: string;
  readonly parameters?: Json[];
  readonly requestBody?: { content: Record<string, Json> };
}

/**
 * Request headers the document declares that no value makes a 400: any If-None-Match is taken (one
 * that matches no entity tag answers 200). Every other declared header is checked like a field; a
 * new one must be put in one place or the other.
 */
const UNCHECKED_HEADERS = ['If-None-Match'];

const ALL_SCOPES = ['plants:read', 'plants:write', 'plants:admin', 'webhooks:read', 'webhooks:write'];

let h: TestApp;
let token: string;
let document: Json;
before(async () => {
  h = await makeApp();
  token = await h.token('alice', ALL_SCOPES);
  document = (await h.app.inject({ method: 'GET', url: '/openapi.json' })).json<Json>();
});
after(() => h.close());

function resolved(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(resolved);
  if (schema === null || typeof schema !== 'object') return schema;
  const ref = (schema as Json).$ref;
  if (typeof ref === 'string') {
    return resolved(((document.components as Json).schemas as Json)[ref.replace('#/components/schemas/', '')]);
  }
  return Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, resolved(value)]));
}

/** Every description anywhere in a schema (a union's branches have their own). */
function descriptions(schema: unknown): string[] {
  if (schema === null || typeof schema !== 'object') return [];
  const own = typeof (schema as Json).description === 'string' ? [(schema as Json).description as string] : [];
  return [...own, ...Object.values(schema).flatMap(descriptions)];
}

/** A value the schema refuses: as text for a path, query or header, as JSON in a body. */
function badValue(schema: Json, asText: boolean): unknown {
  const types = ([] as unknown[]).concat(schema.type ?? []);
  if (schema.const !== undefined || schema.enum !== undefined || schema.anyOf !== undefined) return 'nope';
  if (types.includes('integer')) return asText ? '1x' : 'one';
  if (types.includes('array')) return [badValue(schema.items as Json, asText)];
  if (schema.format === 'date-time') return 'yesterday';
  if (typeof schema.maxLength === 'number') return 'x'.repeat(schema.maxLength + 1);
  if (typeof schema.pattern === 'string') return 'x!';
  return asText ? 'x' : 12;
}

interface Case {
  readonly where: string;
  readonly field: string;
  readonly named: RegExp;
  readonly descriptions: string[];
  readonly request: Parameters<TestApp['call']>[1];
}

function cases(): Case[] {
  const out: Case[] = [];
  for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, Operation>>)) {
    for (const [method, op] of Object.entries(item)) {
      const parameters = op.parameters ?? [];
      const media = op.requestBody?.content['application/json'];
      const bodySchema = media === undefined ? undefined : (resolved(media.schema) as Json);
      const example = (media?.example ?? (bodySchema?.examples as unknown[] | undefined)?.[0]) as Json | undefined;
      const build = (bad: { in: string; name: string; value: unknown }) => {
        let url = path;
        const query: Record<string, string> = {};
        const headers: Record<string, string> = {};
        for (const p of parameters) {
          const value = p.name === bad.name && p.in === bad.in ? bad.value : p.example;
          if (p.in === 'path') url = url.replace(`{${String(p.name)}}`, encodeURIComponent(String(value)));
          else if (p.name === bad.name && p.in === bad.in && p.in === 'query') query[p.name] = String(value);
          else if (p.name === bad.name && p.in === bad.in && p.in === 'header') headers[p.name] = String(value);
        }
        const body = bad.in === 'body' ? { ...example, [bad.name]: bad.value } : example;
        return {
          method: method.toUpperCase() as 'GET',
          url,
          query,
          headers: { ...headers, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
        };
      };
      for (const p of parameters) {
        const schema = resolved(p.schema) as Json;
        const part = { query: 'querystring.', path: 'params.', header: '' }[p.in as string];
        const name = String(p.name);
        if (part === undefined || (p.in === 'header' && UNCHECKED_HEADERS.includes(name))) continue;
        out.push({
          where: `${method.toUpperCase()} ${path} ${String(p.in)} ${name}`,
          field: `${part}${name}`,
          // A header is checked by the route's code, not a schema: it says its name as HTTP writes it.
          named:
            p.in === 'header' ? new RegExp(name, 'i') : new RegExp(`^${part.replace('.', '\\.')}${name} (must|has) `),
          descriptions: [...(typeof p.description === 'string' ? [p.description] : []), ...descriptions(schema)],
          request: build({ in: String(p.in), name, value: badValue(schema, true) }),
        });
      }
      for (const [name, schema] of Object.entries((bodySchema?.properties ?? {}) as Record<string, Json>)) {
        out.push({
          where: `${method.toUpperCase()} ${path} body ${name}`,
          field: `body.${name}`,
          named: new RegExp(`^body\\.${name}(\\.\\d+)? (must|has) `),
          descriptions: descriptions(schema),
          request: build({ in: 'body', name, value: badValue(schema, false) }),
        });
      }
    }
  }
  return out;
}

test('every 400 from a schema names the field and its rule, and quotes no description', async () => {
  const all = cases();
  // The walk reached every kind of field: a path id, query limits, a header, body fields.
  for (const field of ['params.id', 'params.deliveryId', 'querystring.limit', 'Last-Event-ID', 'body.url']) {
    assert.ok(
      all.some((c) => c.field === field),
      `a case for ${field}`,
    );
  }
  assert.ok(all.length >= 25, `${all.length} cases`);
  const wrong: string[] = [];
  for (const c of all) {
    const res = await h.call(token, c.request);
    const { message } = res.json<{ message: string }>();
    if (res.statusCode !== 400) wrong.push(`${c.where}: ${res.statusCode} ${message}`);
    else if (!c.named.test(message)) wrong.push(`${c.where}: does not name ${c.field}: ${message}`);
    else {
      const quoted = c.descriptions.find((d) => message.includes(d));
      if (quoted !== undefined) wrong.push(`${c.where}: quotes its description "${quoted}": ${message}`);
    }
  }
  assert.deepEqual(wrong, []);
});

test('the sentences say the rule', async () => {
  const message = async (url: string, payload?: unknown, method = 'GET'): Promise<string> => {
    const res = await h.call(token, {
      method: method,
      url,
      ...(payload === undefined
        ? {}
        : { payload: JSON.stringify(payload), headers: { 'content-type': 'application/json' } }),
    });
    assert.equal(res.statusCode, 400, url);
    return res.json<{ message: string }>().message;
  };
  assert.equal(
    await message('/webhooks/wh_x/deliveries?limit=0'),
    'querystring.limit must be an integer from 1 to 1000',
  );
  assert.equal(await message('/events?after=x'), 'querystring.after must be 1 to 19 digits (0-9)');
  assert.equal(
    await message('/plants/0x10', undefined, 'DELETE'),
    'params.id must be a 64-bit integer in decimal digits (-9223372036854775808 to 9223372036854775807)',
  );
  assert.equal(
    await message('/webhooks', { url: 'https://example.com/', events: ['plant.moved'] }, 'POST'),
    'body.events.0 must be one of "plant.created", "plant.deleted"',
  );
  assert.equal(
    await message('/webhooks', { url: 'https://example.com/', events: [] }, 'POST'),
    'body.events must have at least 1 item',
  );
  assert.equal(
    await message('/plants', { id: 1, name: 'a\u0000' }, 'POST'),
    'body.name must be text of 1 to 200 Unicode code points, none of them a control character (U+0000–U+001F, U+007F) or a lone surrogate',
  );
  assert.equal(
    await message('/plants', { id: '1', name: 'Fern' }, 'POST'),
    'body.id must be a 64-bit integer (-9223372036854775808 to 9223372036854775807)',
  );
  assert.equal(
    await message('/webhooks/wh_x/recover', { since: 'yesterday' }, 'POST'),
    'body.since must be an RFC 3339 date-time such as 2025-03-01T06:00:00Z',
  );
  assert.equal(
    await message('/webhooks/wh_x', {}, 'PATCH'),
    'body must have at least 1 of the properties url, destination, events, description, status',
  );
});
