// A PostgreSQL DATABASE_URL as libpq reads it (interface 1.3.0, "PostgreSQL with more than one
// server"), and what node-postgres needs of it. node-postgres reads one host per URL; libpq (psql,
// pg_dump), JDBC, pgx, psycopg and Npgsql read a list: hosts in the authority
// (`postgres://u@h1:5432,h2:5433/db`) or in the query (`?host=h1,h2&port=5432,5433`), tried in
// order for each new connection, keeping the first that is what `target_session_attrs` asks.

/** One server of the list. */
export interface PostgresHost {
  readonly host: string;
  readonly port: number;
}

/** What a new connection must find, as libpq names it (`target_session_attrs`). */
export type SessionAttrs = 'any' | 'read-write' | 'primary' | 'read-only' | 'standby' | 'prefer-standby';

const SESSION_ATTRS: readonly SessionAttrs[] = [
  'any',
  'read-write',
  'primary',
  'read-only',
  'standby',
  'prefer-standby',
];

/** A DATABASE_URL that names its servers in a way this service does not read. Its message never holds the password. */
export class PostgresUrlError extends Error {
  override name = 'PostgresUrlError';
}

export interface PostgresUrl {
  readonly hosts: readonly PostgresHost[];
  readonly user: string;
  readonly password: string | undefined;
  readonly database: string;
  readonly sessionAttrs: SessionAttrs;
  /** `connect_timeout`, in ms (libpq: seconds; 0 or absent, none of its own). */
  readonly connectTimeoutMs: number | undefined;
  /** The other query parameters (`sslmode`, `options`, `application_name`, …), passed to each host's URL. */
  readonly params: ReadonlyArray<readonly [string, string]>;
}

const DEFAULT_PORT = 5432;

function decode(text: string, what: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new PostgresUrlError(`DATABASE_URL: the ${what} is not valid percent-encoding`);
  }
}

function parsePort(text: string): number {
  const port = /^[0-9]{1,5}$/.test(text) ? Number(text) : 0;
  if (port < 1 || port > 65535) throw new PostgresUrlError(`DATABASE_URL: "${text}" is not a port (1 to 65535)`);
  return port;
}

/** `h1:5432,[::1]:5433,h3` (the authority's host list) as hosts; a missing port is 5432. */
function parseHostList(text: string): Array<{ host: string; port: number | undefined }> {
  if (text === '') return [];
  return text.split(',').map((entry) => {
    const m = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]]*)(?::([^:]*))?$/.exec(entry);
    if (m === null) throw new PostgresUrlError(`DATABASE_URL: "${entry}" is not a host or host:port`);
    const host = decode(m[1]!.replace(/^\[(.*)\]$/, '$1'), 'host');
    return { host, port: m[2] === undefined || m[2] === '' ? undefined : parsePort(m[2]) };
  });
}

/**
 * Reads a `postgres://` or `postgresql://` URL with one or more hosts. Throws PostgresUrlError,
 * whose message says what is wrong without repeating the URL (it may hold a password).
 */
export function parsePostgresUrl(text: string): PostgresUrl {
  const m = /^postgres(?:ql)?:\/\/([^/?#]*)(?:\/([^?#]*))?(?:\?([^#]*))?(?:#.*)?$/.exec(text);
  if (m === null) throw new PostgresUrlError('DATABASE_URL must look like postgres://user:password@host:5432/database');
  const authority = m[1]!;
  const at = authority.lastIndexOf('@');
  const userinfo = at < 0 ? '' : authority.slice(0, at);
  const colon = userinfo.indexOf(':');
  const user = decode(colon < 0 ? userinfo : userinfo.slice(0, colon), 'user');
  const password = colon < 0 ? undefined : decode(userinfo.slice(colon + 1), 'password');
  const fromAuthority = parseHostList(at < 0 ? authority : authority.slice(at + 1));
  const database = decode(m[2] ?? '', 'database name');

  let queryHosts: string[] | undefined;
  let queryPorts: string[] | undefined;
  let sessionAttrs: SessionAttrs = 'any';
  let connectTimeoutMs: number | undefined;
  const params: Array<[string, string]> = [];
  for (const [name, value] of new URLSearchParams(m[3] ?? '')) {
    if (name === 'host') queryHosts = value.split(',');
    else if (name === 'port') queryPorts = value.split(',');
    else if (name === 'target_session_attrs') {
      if (!(SESSION_ATTRS as readonly string[]).includes(value)) {
        throw new PostgresUrlError(
          `DATABASE_URL: target_session_attrs must be one of ${SESSION_ATTRS.join(', ')}; got "${value}"`,
        );
      }
      sessionAttrs = value as SessionAttrs;
    } else if (name === 'connect_timeout') {
      if (!/^[0-9]{1,6}$/.test(value)) {
        throw new PostgresUrlError(`DATABASE_URL: connect_timeout is whole seconds; got "${value}"`);
      }
      // libpq: 0 means wait for ever; a value of 1 counts as 2 seconds.
      const seconds = Number(value);
      connectTimeoutMs = seconds === 0 ? undefined : Math.max(seconds, 2) * 1000;
    } else params.push([name, value]);
  }

  let hosts: PostgresHost[];
  if (queryHosts !== undefined) {
    if (fromAuthority.length > 0 && fromAuthority.some((h) => h.host !== '')) {
      throw new PostgresUrlError('DATABASE_URL names hosts both before the path and in ?host=: name them in one place');
    }
    const ports = queryPorts ?? [];
    if (ports.length > 1 && ports.length !== queryHosts.length) {
      throw new PostgresUrlError(
        `DATABASE_URL: ?host= names ${queryHosts.length} hosts and ?port= ${ports.length} ports: give one port, or one per host`,
      );
    }
    hosts = queryHosts.map((host, i) => ({
      host,
      port: ports.length === 0 ? DEFAULT_PORT : parsePort(ports.length === 1 ? ports[0]! : ports[i]!),
    }));
  } else {
    const port = queryPorts?.length === 1 ? parsePort(queryPorts[0]!) : undefined;
    hosts = (fromAuthority.length === 0 ? [{ host: '', port: undefined }] : fromAuthority).map((h) => ({
      host: h.host,
      port: h.port ?? port ?? DEFAULT_PORT,
    }));
  }
  return { hosts, user, password, database, sessionAttrs, connectTimeoutMs, params };
}

/** How a host is written in a URL's authority: an IPv6 literal in brackets, a name percent-encoded. */
const hostText = ({ host }: PostgresHost): string =>
  host.includes(':') ? `[${host}]` : host.startsWith('/') ? '' : encodeURIComponent(host);

/** The single-host URL of one server of the list, as node-postgres reads it (with the password). */
export function hostUrl(url: PostgresUrl, host: PostgresHost): string {
  const userinfo =
    url.user === ''
      ? ''
      : `${encodeURIComponent(url.user)}${url.password === undefined ? '' : `:${encodeURIComponent(url.password)}`}@`;
  const query = new URLSearchParams(url.params as Array<[string, string]>);
  // A socket folder (host=/var/run/postgresql) goes in the query, where node-postgres reads it.
  if (host.host.startsWith('/')) query.set('host', host.host);
  const search = query.size > 0 ? `?${query.toString()}` : '';
  return `postgres://${userinfo}${hostText(host)}:${host.port}/${encodeURIComponent(url.database)}${search}`;
}

/** `host:port` of one server, for logs and metrics (`[::1]:5432`, `/var/run/postgresql:5432`). */
export const hostLabel = (host: PostgresHost): string =>
  `${host.host.includes(':') ? `[${host.host}]` : host.host || 'localhost'}:${host.port}`;

/** The URL without its password and without the query: what a log line or an error may show. */
export function describePostgresUrl(url: PostgresUrl): string {
  const user = url.user === '' ? '' : `${encodeURIComponent(url.user)}@`;
  const attrs = url.sessionAttrs === 'any' ? '' : `?target_session_attrs=${url.sessionAttrs}`;
  return `postgres://${user}${url.hosts.map(hostLabel).join(',')}/${encodeURIComponent(url.database)}${attrs}`;
}
