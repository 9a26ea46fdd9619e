// plant-store token create|list|revoke: API tokens, straight in the database.
import { once } from 'node:events';
import { TOKEN_PREFIX, isTokenId, parseToken } from '../auth/token.js';
import { LIST_BATCH, TokenInputError, TokenService, checkNewToken } from '../auth/token.service.js';
import { parseDuration } from '../config.js';
import type { TokenRecord } from '../store/store.js';
import { parseCommand } from './args.js';
import { withStore } from './database.js';
import { commandName } from './invocation.js';
import { io } from './io.js';
import { UsageError, err, out, table } from './output.js';
import { MAX_EXPIRY_DAYS, REVOCATION_SECONDS } from './usage.js';
import { shellWord } from '../wire/shell.js';

const LIST_HEADER = ['ID', 'SUBJECT', 'SCOPES', 'CREATED', 'EXPIRES', 'STATUS'];

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

function statusOf(token: TokenRecord, now: number): string {
  if (token.revokedAt !== null) return 'revoked';
  if (token.expiresAt !== null && token.expiresAt <= now) return 'expired';
  return 'active';
}

async function tokenCreate(args: string[]): Promise<number> {
  const command = 'token create';
  const { values } = parseCommand(command, args, {
    subject: 'string',
    scopes: 'string',
    'expires-in': 'string',
    json: 'boolean',
  });
  if (values.subject === undefined || values.scopes === undefined) {
    throw new UsageError('token create needs --subject <user> and --scopes <scope,...>', command);
  }
  let expiresInMs: number | undefined;
  if (values['expires-in'] !== undefined) {
    expiresInMs = parseDuration(values['expires-in']);
    if (expiresInMs === undefined || expiresInMs > MAX_EXPIRY_DAYS * 86_400_000) {
      throw new UsageError(
        `--expires-in takes a duration up to ${MAX_EXPIRY_DAYS}d, such as 30d, 12h or 90s; ` +
          'leave it out for a token that never expires',
        command,
      );
    }
  }
  const scopes = values.scopes
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  const subject = values.subject;
  checkNewToken(subject, scopes); // before the database is opened: a mistyped scope is a usage mistake
  const issued = await withStore((store) => new TokenService(store).create({ subject, scopes, expiresInMs }));
  if (values.json) {
    const { id, token, subject, scopes: granted, expiresAt } = issued;
    out(JSON.stringify({ id, token, subject, scopes: granted, expiresAt: iso(expiresAt) }));
    return 0;
  }
  // The secret alone on stdout (TOKEN=$(plant-store token create …) works); the rest on stderr.
  out(issued.token);
  err(
    `Created token ${issued.id} for ${issued.subject} (${issued.scopes.join(',')}), ` +
      `${issued.expiresAt === null ? 'no expiry' : `expires ${iso(issued.expiresAt)}`}. ` +
      'Copy the secret now: it is not stored and cannot be shown again.',
  );
  return 0;
}

/** Writes, waiting when the stream's buffer is full: a long listing must not pile up in memory. */
async function emit(text: string): Promise<void> {
  const { stdout } = io();
  if (!stdout.write(text)) await once(stdout, 'drain');
}

/**
 * The output of `token list`, written as the tokens come (LIST_BATCH at a time from the store), so
 * that nothing grows with their number. `--json`: one JSON array, byte for byte what JSON.stringify
 * of all of them printed before. The table: a column is as wide as its widest cell so far (the
 * header's and the first LIST_BATCH rows', then wider when a later batch needs it), so a listing
 * of up to LIST_BATCH tokens is aligned exactly as table() aligned it.
 */
class ListPrinter {
  private readonly widths = LIST_HEADER.map((cell) => cell.length);
  private rows: string[][] = [];
  private json: string[] = [];
  private first = true;
  private readonly now = Date.now();
  count = 0;

  constructor(private readonly asJson: boolean) {}

  async add(t: TokenRecord): Promise<void> {
    const status = statusOf(t, this.now);
    if (this.asJson) {
      const { id, subject, scopes } = t;
      const [createdAt, expiresAt, revokedAt] = [iso(t.createdAt), iso(t.expiresAt), iso(t.revokedAt)];
      this.json.push(JSON.stringify({ id, subject, scopes, createdAt, expiresAt, revokedAt, status }));
    } else {
      this.rows.push([t.id, t.subject, t.scopes.join(','), iso(t.createdAt)!, iso(t.expiresAt) ?? 'never', status]);
    }
    this.count += 1;
    if (this.count % LIST_BATCH === 0) await this.flush();
  }

  async end(): Promise<void> {
    await this.flush();
    if (this.asJson) await emit(this.count === 0 ? '[]\n' : ']\n');
  }

  /** Writes what was added since the last flush: one write a batch, not one a token. */
  private async flush(): Promise<void> {
    if (this.asJson) {
      if (this.json.length === 0) return;
      const text = `${this.first ? '[' : ','}${this.json.join(',')}`;
      this.json = [];
      this.first = false;
      await emit(text);
      return;
    }
    if (this.rows.length === 0) return; // the header alone is never printed: no tokens, nothing on stdout
    const rows = this.first ? [LIST_HEADER, ...this.rows] : this.rows;
    this.rows = [];
    this.first = false;
    for (const row of rows) row.forEach((cell, i) => (this.widths[i] = Math.max(this.widths[i]!, cell.length)));
    await emit(`${table(rows, this.widths)}\n`);
  }
}

/** A whole number, 1 or more; undefined when not given. */
function limitArg(text: string | undefined, command: string): number | undefined {
  if (text === undefined) return undefined;
  const n = /^\d{1,15}$/.test(text) ? Number(text) : 0;
  if (n < 1) throw new UsageError('--limit takes a whole number, 1 or more: the most tokens to show', command);
  return n;
}

async function tokenList(args: string[]): Promise<number> {
  const command = 'token list';
  const { values } = parseCommand(command, args, {
    limit: 'string',
    after: 'string',
    subject: 'string',
    json: 'boolean',
  });
  const limit = limitArg(values.limit, command);
  const { after, subject, json = false } = values;
  if (after !== undefined && !isTokenId(after)) {
    // Not echoed: a whole token pasted here would print its secret.
    const whole = after.startsWith(TOKEN_PREFIX) ? ', not the whole token' : '';
    throw new UsageError(
      `--after takes a token's id (12 letters and digits, as token list prints it)${whole}`,
      command,
    );
  }
  const printer = new ListPrinter(json);
  let last: string | undefined;
  let more = false;
  await withStore(async (store) => {
    // One token more than --limit: it says whether another page follows, and is not printed.
    const wanted = limit === undefined ? undefined : limit + 1;
    for await (const token of new TokenService(store).list({ after, subject, limit: wanted })) {
      if (printer.count === limit) {
        more = true;
        break;
      }
      await printer.add(token);
      last = token.id;
    }
  });
  await printer.end();
  if (printer.count === 0 && !json) {
    if (after === undefined && subject === undefined) {
      err(
        'No tokens yet. Create one with: plant-store token create --subject <user> --scopes plants:read,plants:write',
      );
    } else {
      err(`No tokens${subject === undefined ? '' : ` of ${subject}`}${after === undefined ? '' : ` after ${after}`}.`);
    }
  }
  // On stderr, so that stdout stays the table or the JSON array alone.
  if (more) {
    const options = [
      `--limit ${limit}`,
      `--after ${last!}`,
      ...(subject === undefined ? [] : [`--subject ${shellWord(subject)}`]),
      ...(json ? ['--json'] : []),
    ];
    err(`More tokens follow: ${commandName(io().env)} token list ${options.join(' ')}`);
  }
  return 0;
}

async function tokenRevoke(args: string[]): Promise<number> {
  const command = 'token revoke';
  const { positionals } = parseCommand(command, args, {}, { positionals: true });
  if (positionals.length !== 1) {
    throw new UsageError('token revoke takes one token id (plant-store token list shows them)', command);
  }
  // A whole token is accepted too (a leaked one is what people paste), and never echoed back.
  const given = positionals[0]!;
  const id = given.startsWith(TOKEN_PREFIX) ? parseToken(given) : given;
  if (id === undefined) {
    throw new UsageError(
      'that is not a whole token (its checksum does not match); give its id from `token list`',
      command,
    );
  }
  if (!(await withStore((store) => new TokenService(store).revoke(id)))) {
    err(`No token with id ${id}: plant-store token list shows the ids of this database's tokens.`);
    return 1;
  }
  err(`Revoked token ${id}. Running servers refuse it within ${REVOCATION_SECONDS} seconds.`);
  return 0;
}

/**
 * `plant-store token …`. What TokenService refuses (a subject, a scope, an --after that names no
 * token) was given on the command line: a usage mistake of that command, its usage after it.
 */
export async function tokenCommand(sub: string | undefined, args: string[]): Promise<number> {
  const commands = new Map([
    ['create', tokenCreate],
    ['list', tokenList],
    ['revoke', tokenRevoke],
  ]);
  const command = commands.get(sub ?? '');
  if (command === undefined) {
    throw new UsageError(`unknown token command "${sub ?? ''}": use create, list or revoke`, 'token');
  }
  try {
    return await command(args);
  } catch (error) {
    if (error instanceof TokenInputError) throw new UsageError(error.message, `token ${sub}`);
    throw error;
  }
}
