// plant-store plants list|create|delete: a client of a running server, through the typed client.
import { once } from 'node:events';
import { LIMIT, type Plant, type PlantStoreClient, toInt64 } from '@plant-store/client';
import { parseCommand } from './args.js';
import { io } from './io.js';
import { UsageError, err, out, table } from './output.js';
import { CONNECTION, exitForFailure, plantsClient } from './plants-connection.js';

function int64Arg(text: string, command: string): bigint {
  try {
    return toInt64(text);
  } catch {
    throw new UsageError(
      'a plant id is an int64: a decimal integer from -9223372036854775808 to 9223372036854775807',
      command,
    );
  }
}

/** A whole number from 1 to `max` (Infinity: no bound). */
function countArg(text: string | undefined, name: string, max: number, what: string, command: string) {
  if (text === undefined) return undefined;
  const n = /^\d{1,15}$/.test(text) ? Number(text) : 0;
  if (n < 1 || n > max) {
    const range = max === Infinity ? 'a whole number, 1 or more' : `a whole number from 1 to ${max}`;
    throw new UsageError(`--${name} takes ${range}: ${what}`, command);
  }
  return n;
}

/** Writes, waiting when the stream's buffer is full: a long listing must not pile up in memory. */
async function emit(text: string): Promise<void> {
  const { stdout } = io();
  if (!stdout.write(text)) await once(stdout, 'drain');
}

/**
 * The first `limit` plants (all without one), `pageSize` per request (the server's default without
 * one): `--limit` is what the user sees, the page size only how it is fetched (`--limit 1` prints
 * one plant, whatever the page size). The last request asks for no more than are still wanted.
 */
async function* firstPlants(
  client: PlantStoreClient,
  { tag, limit, pageSize }: { tag?: string | undefined; limit?: number | undefined; pageSize?: number | undefined },
): AsyncGenerator<Plant> {
  let remaining = limit ?? Infinity;
  let cursor: string | undefined;
  do {
    const size = limit === undefined ? pageSize : Math.min(pageSize ?? LIMIT.default, remaining);
    const page = await client.listPage({ tag, cursor, limit: size });
    const wanted = page.plants.slice(0, remaining);
    yield* wanted;
    remaining -= wanted.length;
    cursor = page.next;
  } while (cursor !== undefined && remaining > 0);
}

async function plantsList(args: string[]): Promise<void> {
  const command = 'plants list';
  const { values } = parseCommand(command, args, {
    ...CONNECTION,
    tag: 'string',
    limit: 'string',
    'page-size': 'string',
    json: 'boolean',
  });
  const limit = countArg(values.limit, 'limit', Infinity, 'the most plants to show', command);
  const pageSize = countArg(values['page-size'], 'page-size', LIMIT.max, 'plants per request', command);
  const plants = firstPlants(plantsClient(values, command), { tag: values.tag, limit, pageSize });
  if (values.json) {
    // One JSON array, a plant a line, written page by page; cut short (exit 1 or 3) it is not valid JSON.
    let first = true;
    for await (const plant of plants) {
      await emit(`${first ? '[\n' : ',\n'}${JSON.stringify(plant)}`);
      first = false;
    }
    await emit(first ? '[]\n' : '\n]\n');
  } else if (io().stdout.isTTY) {
    const rows: Plant[] = [];
    for await (const plant of plants) rows.push(plant);
    if (rows.length === 0) err('No plants.');
    else out(table([['NAME', 'TAG'], ...rows.map((p) => [p.name, p.tag ?? ''])]));
  } else {
    // Names and tags hold no control characters (docs/api.md#shapes), so a tab and a newline delimit them.
    for await (const plant of plants) await emit(`${plant.name}\t${plant.tag ?? ''}\n`);
  }
}

async function plantsCreate(args: string[]): Promise<void> {
  const command = 'plants create';
  const { values } = parseCommand(command, args, {
    ...CONNECTION,
    id: 'string',
    name: 'string',
    tag: 'string',
    json: 'boolean',
  });
  if (values.id === undefined || values.name === undefined) {
    throw new UsageError('plants create needs --id <int64> and --name <name>', command);
  }
  const id = int64Arg(values.id, command);
  const plant = await plantsClient(values, command).create({ id, name: values.name, tag: values.tag });
  if (values.json) {
    // The id as an exact JSON integer (as `export` writes it), then the plant as the server answered it.
    out(`{"id":${id},${JSON.stringify(plant).slice(1)}`);
    return;
  }
  err(`Created plant ${id}: ${plant.name}${plant.tag === undefined ? '' : ` (tag ${plant.tag})`}.`);
}

async function plantsDelete(args: string[]): Promise<void> {
  const command = 'plants delete';
  const { values, positionals } = parseCommand(command, args, { ...CONNECTION, id: 'string' }, { positionals: true });
  const given = values.id === undefined ? positionals : [values.id, ...positionals];
  if (given.length !== 1) throw new UsageError('plants delete takes one plant id: --id <int64>', command);
  const id = int64Arg(given[0]!, command);
  await plantsClient(values, command).delete(id);
  err(`Deleted plant ${id}.`);
}

export async function plantsCommand(sub: string | undefined, args: string[]): Promise<number> {
  const commands = new Map([
    ['list', plantsList],
    ['create', plantsCreate],
    ['delete', plantsDelete],
  ]);
  const command = commands.get(sub ?? '');
  if (command === undefined) {
    throw new UsageError(`unknown plants command "${sub ?? ''}": use list, create or delete`, 'plants');
  }
  try {
    await command(args);
    return 0;
  } catch (error) {
    return exitForFailure(error);
  }
}
