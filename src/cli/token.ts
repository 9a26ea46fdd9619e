// plant-store token create|list|revoke: API tokens, straight in the database.
import { TOKEN_PREFIX, parseToken } from '../auth/token.js';
import { TokenService } from '../auth/token.service.js';
import { loadConfig, parseDuration } from '../config.js';
import type { TokenRecord } from '../store/store.js';
import { parseCommand } from './args.js';
import { withStore } from './database.js';
import { UsageError, err, out, table } from './output.js';

const MAX_EXPIRY_DAYS = 3650; // ten years; omit --expires-in for a token that never expires

/**
 * How long a running server may still accept a revoked token: it reuses a token's record from
 * memory that long (the token cache of src/auth/authenticator.ts, `tokenCacheMs` of the config).
 */
export const REVOCATION_SECONDS = loadConfig({}).tokenCacheMs / 1000;

export const TOKEN_USAGE = `  token create --subject <user> --scopes <s1,s2> [--expires-in 30d|12h|90s] [--json]
                                issue an API token; the secret is printed once. --expires-in: up to
                                ${MAX_EXPIRY_DAYS}d (s, m, h, d); without it the token never expires
  token list [--json]           list tokens (never their secrets)
  token revoke <token-id>       revoke a token (its id, or the whole token); running servers refuse
                                it within ${REVOCATION_SECONDS} seconds`;

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

function status(token: TokenRecord, now: number): string {
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

async function tokenList(args: string[]): Promise<number> {
  const { values } = parseCommand('token list', args, { json: 'boolean' });
  const tokens = await withStore((store) => new TokenService(store).list());
  const now = Date.now();
  if (values.json) {
    const rows = tokens.map((t) => ({
      id: t.id,
      subject: t.subject,
      scopes: t.scopes,
      createdAt: iso(t.createdAt),
      expiresAt: iso(t.expiresAt),
      revokedAt: iso(t.revokedAt),
      status: status(t, now),
    }));
    out(JSON.stringify(rows));
    return 0;
  }
  if (tokens.length === 0) {
    err('No tokens yet. Create one with: plant-store token create --subject <user> --scopes plants:read,plants:write');
    return 0;
  }
  const header = ['ID', 'SUBJECT', 'SCOPES', 'CREATED', 'EXPIRES', 'STATUS'];
  const rows = tokens.map((t) => [
    t.id,
    t.subject,
    t.scopes.join(','),
    iso(t.createdAt)!,
    iso(t.expiresAt) ?? 'never',
    status(t, now),
  ]);
  out(table([header, ...rows]));
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

/** `plant-store token …`. */
export function tokenCommand(sub: string | undefined, args: string[]): Promise<number> {
  if (sub === 'create') return tokenCreate(args);
  if (sub === 'list') return tokenList(args);
  if (sub === 'revoke') return tokenRevoke(args);
  throw new UsageError(`unknown token command "${sub ?? ''}": use create, list or revoke`, 'token');
}
