import { promises as dns } from 'node:dns';
import type { LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * Where a webhook may be delivered (docs/api.md#webhooks, docs/api.md#delivery): private, loopback,
 * link-local and unique-local targets are refused, at registration when the host is a literal
 * address (400) and at every attempt after DNS resolution. Everything that is not plainly a public
 * unicast address is refused: a webhook receiver never legitimately lives in a documentation or
 * benchmark range, and a server-side request forgery only needs one forgotten range.
 */
export type AddressClass =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'unique-local'
  | 'cgnat'
  | 'multicast'
  | 'broadcast'
  | 'reserved'
  | 'documentation'
  | 'benchmarking'
  | 'invalid';

type Rule = readonly [AddressClass, string, number];

// RFC 6890 special-purpose registry. Order matters: the first matching rule names the class.
const V4_RULES: readonly Rule[] = [
  ['unspecified', '0.0.0.0', 32],
  ['reserved', '0.0.0.0', 8], // "this network", RFC 1122 §3.2.1.3
  ['private', '10.0.0.0', 8], // RFC 1918
  ['cgnat', '100.64.0.0', 10], // RFC 6598 shared address space
  ['loopback', '127.0.0.0', 8],
  ['link-local', '169.254.0.0', 16], // RFC 3927; cloud metadata lives at 169.254.169.254
  ['private', '172.16.0.0', 12],
  ['reserved', '192.0.0.0', 24], // IETF protocol assignments
  ['documentation', '192.0.2.0', 24], // RFC 5737
  ['reserved', '192.88.99.0', 24], // 6to4 relay anycast, deprecated by RFC 7526
  ['private', '192.168.0.0', 16],
  ['benchmarking', '198.18.0.0', 15], // RFC 2544
  ['documentation', '198.51.100.0', 24],
  ['documentation', '203.0.113.0', 24],
  ['multicast', '224.0.0.0', 4], // RFC 5771
  ['broadcast', '255.255.255.255', 32], // RFC 919
  ['reserved', '240.0.0.0', 4], // RFC 1112 §4
];

const V6_RULES: readonly Rule[] = [
  ['unspecified', '::', 128],
  ['loopback', '::1', 128],
  ['reserved', '100::', 64], // discard-only, RFC 6666
  ['benchmarking', '2001:2::', 48], // RFC 5180
  ['documentation', '2001:db8::', 32], // RFC 3849
  // IETF protocol assignments, including Teredo 2001::/32 (RFC 4380): a tunnel whose embedded
  // addresses would need parsing by hand; no webhook receiver lives there, so refuse it whole.
  ['reserved', '2001::', 23],
  ['documentation', '3fff::', 20], // RFC 9637
  ['reserved', '5f00::', 16], // SRv6 segment identifiers, RFC 9602
  ['unique-local', 'fc00::', 7], // RFC 4193
  ['link-local', 'fe80::', 10], // RFC 4291 §2.5.6
  ['private', 'fec0::', 10], // site-local, the old private range (deprecated by RFC 3879)
  ['multicast', 'ff00::', 8],
];

/** 16 bits of a dotted IPv4 address as one IPv6 hex group (for the 6to4 prefix, RFC 3056). */
function hexGroups(v4: string): string {
  const [a = 0, b = 0, c = 0, d = 0] = v4.split('.').map(Number);
  return `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
}

// IPv6 prefixes that embed an IPv4 address reach it (through a translator or a tunnel), so each
// non-public IPv4 range is refused inside them too: IPv4-compatible ::/96 (deprecated, RFC 4291
// §2.5.5.1), NAT64 64:ff9b::/96 (RFC 6052) and 6to4 2002::/16 (RFC 3056).
const EMBEDDED_RULES: readonly Rule[] = V4_RULES.flatMap(([kind, v4, prefix]): Rule[] => [
  [kind, `::${v4}`, 96 + prefix],
  [kind, `64:ff9b::${v4}`, 96 + prefix],
  [kind, `2002:${hexGroups(v4)}::`, 16 + prefix],
]);

function compile(rules: readonly Rule[], type: 'ipv4' | 'ipv6'): [AddressClass, BlockList][] {
  return rules.map(([kind, network, prefix]) => {
    const list = new BlockList();
    list.addSubnet(network, prefix, type);
    return [kind, list];
  });
}

const V4 = compile(V4_RULES, 'ipv4');
// BlockList matches an IPv4-mapped IPv6 address (::ffff:a.b.c.d, in any spelling) against IPv4
// rules, so the IPv4 table also covers the mapped forms without parsing them by hand.
const V6 = [...compile(V6_RULES, 'ipv6'), ...V4, ...compile(EMBEDDED_RULES, 'ipv6')];

// Global unicast (RFC 4291 §2.4), plus the mapped and NAT64 forms of the public IPv4 addresses
// left over once every rule above has been tried; anything else in IPv6 is unassigned: reserved.
const PUBLIC_V6 = new BlockList();
PUBLIC_V6.addSubnet('2000::', 3, 'ipv6');
PUBLIC_V6.addSubnet('::ffff:0:0', 96, 'ipv6');
PUBLIC_V6.addSubnet('64:ff9b::', 96, 'ipv6');

/** The class of an IP address given as text (IPv4 dotted quad or IPv6, with or without a zone). */
export function classifyAddress(ip: string): AddressClass {
  const address = ip.split('%', 1)[0] ?? '';
  // An IPv4 address is tried against IPv4 rules only: BlockList would also match it, mapped, against
  // IPv6 rules, which is the wrong way round for this table.
  switch (isIP(address)) {
    case 4:
      return V4.find(([, list]) => list.check(address, 'ipv4'))?.[0] ?? 'public';
    case 6:
      return (
        V6.find(([, list]) => list.check(address, 'ipv6'))?.[0] ??
        (PUBLIC_V6.check(address, 'ipv6') ? 'public' : 'reserved')
      );
    default:
      return 'invalid';
  }
}

export interface AddressPolicyOptions {
  /** WEBHOOK_ALLOW_PRIVATE=1: development and tests only (docs/api.md#webhooks). */
  readonly allowPrivate: boolean;
}

export type PolicyResult = { ok: true } | { ok: false; reason: string };

// RFC 6761 §6.3: these names are loopback by definition, so they can be refused at registration.
const LOOPBACK_NAME = /(^|\.)localhost\.?$/i;

/**
 * Checks a URL hostname (`example.com`, `10.0.0.1`, `[::1]`) that needs no DNS: a literal IP
 * address, which `net.connect` never passes to `lookup`, or a name that is loopback by definition.
 * Other names pass here and are checked after resolution by `checkedLookup`.
 */
export function checkLiteralHost(
  hostname: string,
  { allowPrivate }: AddressPolicyOptions,
): { ok: true } | { ok: false; reason: string; address: string; kind: AddressClass } {
  if (allowPrivate) return { ok: true };
  const address = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  const kind = LOOPBACK_NAME.test(address) ? 'loopback' : isIP(address) === 0 ? 'public' : classifyAddress(address);
  return kind === 'public'
    ? { ok: true }
    : { ok: false, reason: `refused address ${address} (${kind})`, address, kind };
}

export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * What lifts a refusal marked `privateOnly` (an http:// URL, a literal non-public host), said after
 * the rule by the registration's 400 and by `plant-store webhooks` (`setting`: where the setting
 * must be). The rule stays: only the setting lifts it.
 */
export const allowPrivateHint = (setting: string): string =>
  `${setting} allows http:// and private addresses, for development only`;

/**
 * Validates a webhook URL at registration (a failure is a 400 with `reason` as its message) and
 * again before each delivery (`reason` is the attempt's error). `privateOnly`: a refusal that
 * WEBHOOK_ALLOW_PRIVATE=1 would lift. WHATWG parsing normalises numeric hosts (`http://2130706433/`,
 * `http://0x7f.1/`, `http://127.1/` all become 127.0.0.1), so the literal check sees the address
 * the connection would use.
 */
export function checkWebhookUrl(
  raw: string,
  options: AddressPolicyOptions,
): { ok: true; url: URL } | (Extract<PolicyResult, { ok: false }> & { readonly privateOnly?: true }) {
  const tooLong = {
    ok: false,
    reason: `the webhook URL must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`,
  } as const;
  if (raw.length > MAX_WEBHOOK_URL_LENGTH) return tooLong;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'the webhook URL must be an absolute URL' };
  }
  const schemes = options.allowPrivate ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(url.protocol)) {
    const reason = `the webhook URL must use ${options.allowPrivate ? 'http or https' : 'https'}`;
    return url.protocol === 'http:' ? { ok: false, reason, privateOnly: true } : { ok: false, reason };
  }
  if (url.username !== '' || url.password !== '') {
    return { ok: false, reason: 'the webhook URL must not contain a user name or password' };
  }
  // `#` always starts a fragment; an empty one (`https://x/#`) leaves url.hash empty.
  if (raw.includes('#')) return { ok: false, reason: 'the webhook URL must not contain a fragment' };
  if (url.hostname === '') return { ok: false, reason: 'the webhook URL must name a host' };
  // IDNA and percent-encoding can lengthen the URL that is stored and sent.
  if (url.href.length > MAX_WEBHOOK_URL_LENGTH) return tooLong;
  const host = checkLiteralHost(url.hostname, options);
  if (!host.ok) {
    return {
      ok: false,
      reason: `the webhook URL must point at a public address, not ${host.address} (${host.kind})`,
      privateOnly: true,
    };
  }
  return { ok: true, url };
}

export interface ResolvedAddress {
  readonly address: string;
  readonly family: number;
}
export type Resolve = (hostname: string) => Promise<readonly ResolvedAddress[]>;

const systemResolve: Resolve = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

/** An error a delivery reports as its `lastError`; `code` lets callers tell it from network failures. */
export class WebhookAddressError extends Error {
  readonly code = 'EWEBHOOKADDRESS';
  constructor(
    readonly hostname: string,
    readonly address: string,
    readonly kind: AddressClass,
  ) {
    super(`refused address ${address} for host ${hostname} (${kind})`);
    this.name = 'WebhookAddressError';
  }
}

/**
 * A `lookup` for `net.connect`/`tls.connect` (and so for the sender's node:http Agents) that resolves once,
 * refuses the host when ANY of its addresses is not public, and hands the socket exactly the
 * addresses it checked: nothing resolves the name a second time, so DNS rebinding between check and
 * connect has nothing to exploit. Every address is checked, not only the one Happy Eyeballs would try
 * first, because a fallback attempt would otherwise reach the unchecked one.
 */
export function checkedLookup(options: AddressPolicyOptions & { readonly resolve?: Resolve }): LookupFunction {
  const resolve = options.resolve ?? systemResolve;
  return (hostname, lookupOptions, callback) => {
    const answer = async (): Promise<LookupAddress[]> => {
      const resolved = await resolve(hostname);
      for (const { address } of resolved) {
        const kind = classifyAddress(address);
        if (kind === 'public') continue;
        if (!options.allowPrivate || kind === 'invalid') throw new WebhookAddressError(hostname, address, kind);
      }
      const family = lookupOptions.family === 'IPv4' ? 4 : lookupOptions.family === 'IPv6' ? 6 : lookupOptions.family;
      const wanted = resolved.filter((r) => !family || r.family === family);
      if (wanted.length === 0) {
        throw Object.assign(new Error(`no address found for host ${hostname}`), { code: 'ENOTFOUND', hostname });
      }
      return wanted.map(({ address, family }) => ({ address, family }));
    };
    answer().then(
      (addresses) => {
        const [first] = addresses;
        if (lookupOptions.all === true) callback(null, addresses);
        else if (first !== undefined) callback(null, first.address, first.family);
      },
      (error: unknown) => callback(error instanceof Error ? error : new Error(String(error)), ''),
    );
  };
}
