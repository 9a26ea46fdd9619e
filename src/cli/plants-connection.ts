// How the plants commands reach a running server: --url and --token (or the environment) made into
// a typed client, and its failures said in the command's words, with the exit code they end in.
import { PlantStoreClient, PlantStoreError, PlantStoreNetworkError } from '@plant-store/client';
import { DEFAULT_CLIENT_URL, loadClientSettings } from '../config.js';
import { httpFetch } from './http-fetch.js';
import { io } from './io.js';
import { UsageError, err } from './output.js';
import { EXIT_UNREACHABLE } from './usage.js';

/** The options by which every plants command reaches the server. */
export const CONNECTION = { url: 'string', token: 'string' } as const;

/** A client of the server at --url / PLANT_STORE_URL, with --token / PLANT_STORE_TOKEN. */
export function plantsClient(values: { url?: string | undefined; token?: string | undefined }, command: string) {
  const settings = loadClientSettings(io().env);
  const baseUrl = values.url ?? settings.url;
  const token = values.token ?? settings.token;
  if (!token) {
    throw new UsageError(
      'plants commands need a token: set PLANT_STORE_TOKEN, or give --token (plant-store token create makes one)',
      command,
    );
  }
  if (!URL.canParse(baseUrl)) {
    throw new UsageError(`--url (or PLANT_STORE_URL) is not a URL; give one such as ${DEFAULT_CLIENT_URL}`, command);
  }
  try {
    return new PlantStoreClient({
      baseUrl,
      token,
      fetch: httpFetch,
      onRetry: ({ error, delayMs }) => err(`plant-store: ${describeFailure(error)}; retrying in ${delayMs} ms`),
    });
  } catch (error) {
    // A bad URL scheme or a malformed token, in the command's words; the messages never repeat the token.
    const message = (error as Error).message
      .replace(/^baseUrl\b/, '--url (or PLANT_STORE_URL)')
      .replace(/^token\b/, '--token (or PLANT_STORE_TOKEN)');
    throw new UsageError(message, command);
  }
}

const describeFailure = (error: PlantStoreError | PlantStoreNetworkError): string =>
  error instanceof PlantStoreError ? `error ${error.status}: ${error.message}` : error.message;

/** What to do about a refusal, where the server's message alone does not say it to a CLI user. */
const NEXT_STEP: Readonly<Record<number, string>> = {
  401: 'give a valid token with --token or PLANT_STORE_TOKEN (plant-store token create makes one)',
  403: 'use a token that has it (plant-store token create --scopes …)',
  409: 'choose another --id',
};

/** The server's refusal, with the option to change in place of the request's field (`body.name`: `--name`). */
function describeRefusal(error: PlantStoreError): string {
  const message = error.message.replace(/^(?:body|querystring)\.(id|name|tag)\b/, '--$1');
  const next = NEXT_STEP[error.status];
  return `error ${error.status}: ${message}${next === undefined ? '' : `; ${next}`}`;
}

/** The exit code of a command that failed with `error`, said on stderr; anything but the server's answer is thrown on. */
export function exitForFailure(error: unknown): number {
  if (error instanceof PlantStoreError) {
    err(describeRefusal(error));
    return 1;
  }
  if (error instanceof PlantStoreNetworkError) {
    err(
      `plant-store: cannot reach the server: ${error.message}; ` +
        'check --url (or PLANT_STORE_URL) and that the server is running',
    );
    return EXIT_UNREACHABLE;
  }
  throw error;
}
