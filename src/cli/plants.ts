// plant-store plants list|create|delete: a client of a running server, through the typed client.
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import {
  LIMIT,
  type Plant,
  PlantStoreClient,
  PlantStoreError,
  PlantStoreNetworkError,
  toInt64,
} from '@plant-store/client';
import { loadClientSettings } from '../config.js';
import { UsageError, err, out, table } from './output.js';

/** `plants …`: 1 when the server refused, 3 when it could not be reached (2 stays "called wrongly"). */
const EXIT_UNREACHABLE = 3;
const CONNECTION = { url: { type: 'string' }, token: { type: 'string' } } as const;

/** A client of the server at --url / PLANT_STORE_URL, with --token / PLANT_STORE_TOKEN. */
function plantsClient(values: { url?: string | undefined; token?: string | undefined }): PlantStoreClient {
  const settings = loadClientSettings();
  const baseUrl = values.url ?? settings.url;
  const token = values.token ?? settings.token;
  if (!token) throw new UsageError('plants commands need a token: set PLANT_STORE_TOKEN, or give --token');
  if (!URL.canParse(baseUrl)) throw new UsageError('--url (or PLANT_STORE_URL) is not a URL');
  try {
    return new PlantStoreClient({
      baseUrl,
      token,
      onRetry: ({ error, delayMs }) => err(`plant-store: ${describeFailure(error)}; retrying in ${delayMs} ms`),
    });
  } catch (error) {
    // A bad URL scheme or a malformed token; the messages never repeat the token.
    throw new UsageError((error as Error).message);
  }
}

const describeFailure = (error: PlantStoreError | PlantStoreNetworkError): string =>
  error instanceof PlantStoreError ? `error ${error.status}: ${error.message}` : error.message;

function int64Arg(text: string): bigint {
  try {
    return toInt64(text);
  } catch {
    throw new UsageError('a plant id is an int64: a decimal integer from -9223372036854775808 to 9223372036854775807');
  }
}

/** Writes, waiting when the stream's buffer is full: a long listing must not pile up in memory. */
async function emit(text: string): Promise<void> {
  if (!process.stdout.write(text)) await once(process.stdout, 'drain');
}

async function plantsList(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      ...CONNECTION,
      tag: { type: 'string' },
      limit: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  const limit = values.limit === undefined ? undefined : Number(values.limit);
  if (limit !== undefined && !(/^\d+$/.test(values.limit!) && limit >= LIMIT.min && limit <= LIMIT.max)) {
    throw new UsageError(`--limit takes an integer from ${LIMIT.min} to ${LIMIT.max}: plants per request`);
  }
  const plants = plantsClient(values).list({ limit, tag: values.tag });
  if (values.json) {
    // One JSON array, a plant a line, written page by page; cut short (exit 1 or 3) it is not valid JSON.
    let first = true;
    for await (const plant of plants) {
      await emit(`${first ? '[\n' : ',\n'}${JSON.stringify(plant)}`);
      first = false;
    }
    await emit(first ? '[]\n' : '\n]\n');
  } else if (process.stdout.isTTY) {
    const rows: Plant[] = [];
    for await (const plant of plants) rows.push(plant);
    if (rows.length === 0) err('No plants.');
    else out(table([['NAME', 'TAG'], ...rows.map((p) => [p.name, p.tag ?? ''])]));
  } else {
    // Names and tags hold no control characters (the contract), so a tab and a newline delimit them.
    for await (const plant of plants) await emit(`${plant.name}\t${plant.tag ?? ''}\n`);
  }
}

async function plantsCreate(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      ...CONNECTION,
      id: { type: 'string' },
      name: { type: 'string' },
      tag: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  if (values.id === undefined || values.name === undefined) {
    throw new UsageError('plants create needs --id <int64> and --name <name>');
  }
  const id = int64Arg(values.id);
  const plant = await plantsClient(values).create({ id, name: values.name, tag: values.tag });
  if (values.json) {
    // The id as an exact JSON integer (as `export` writes it), then the plant as the server answered it.
    out(`{"id":${id},${JSON.stringify(plant).slice(1)}`);
    return;
  }
  err(`Created plant ${id}: ${plant.name}${plant.tag === undefined ? '' : ` (tag ${plant.tag})`}.`);
}

async function plantsDelete(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: CONNECTION });
  if (positionals.length !== 1) throw new UsageError('plants delete takes one plant id');
  const id = int64Arg(positionals[0]!);
  await plantsClient(values).delete(id);
  err(`Deleted plant ${id}.`);
}

export async function plantsCommand(sub: string | undefined, args: string[]): Promise<number> {
  const commands = new Map([
    ['list', plantsList],
    ['create', plantsCreate],
    ['delete', plantsDelete],
  ]);
  const command = commands.get(sub ?? '');
  if (command === undefined) throw new UsageError(`unknown plants command "${sub ?? ''}": use list, create or delete`);
  try {
    await command(args);
    return 0;
  } catch (error) {
    if (error instanceof PlantStoreError) {
      err(describeFailure(error));
      return 1;
    }
    if (error instanceof PlantStoreNetworkError) {
      err(`plant-store: cannot reach the server: ${error.message}`);
      return EXIT_UNREACHABLE;
    }
    throw error;
  }
}
