import { isIPv4, isIPv6 } from 'node:net';

/**
 * How many lookups of tokens this process does not know each client may cause: a token bucket per
 * client, `capacity` deep, refilled at `perSecond`. Anyone can make a token whose checksum passes,
 * so without it every forged token would be one query of the token store; with it a flood from
 * one client reaches the store at most `capacity + perSecond × seconds` times, and is then
 * answered 429 without a query. Lookups that find a token are given back: only unknown tokens
 * spend. Clients are IPv4 addresses, or IPv6 /64 networks (one host usually holds a whole /64).
 * At most `maxClients` are remembered, the least recently seen forgotten first: a forgotten client
 * starts again with a full bucket, which bounds memory, not the flood of a client with more
 * addresses than that (the proxy or firewall in front is the place for those).
 */
export class UnknownTokenBudget {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly clock: () => number,
    readonly capacity = 100,
    readonly perSecond = 20,
    private readonly maxClients = 10_000,
  ) {}

  /** Takes one lookup for `address`: 0 when taken, else the milliseconds until one is there again. */
  take(address: string): number {
    const key = clientKey(address);
    const now = this.clock();
    const bucket = this.buckets.get(key);
    const tokens = bucket
      ? Math.min(this.capacity, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond)
      : this.capacity;
    this.buckets.delete(key); // re-inserted last: the map's order is the order of last use
    if (this.buckets.size >= this.maxClients) this.buckets.delete(this.buckets.keys().next().value!);
    if (tokens < 1) {
      this.buckets.set(key, { tokens, at: now });
      return Math.ceil(((1 - tokens) / this.perSecond) * 1000);
    }
    this.buckets.set(key, { tokens: tokens - 1, at: now });
    return 0;
  }

  /** Gives back the lookup `take` took: it found a token. */
  giveBack(address: string): void {
    const bucket = this.buckets.get(clientKey(address));
    if (bucket) bucket.tokens = Math.min(this.capacity, bucket.tokens + 1);
  }
}

/** An IPv4 address as it is (IPv4-mapped IPv6 too), an IPv6 address as its /64 network. */
export function clientKey(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped && isIPv4(mapped[1]!)) return mapped[1]!;
  if (!isIPv6(address)) return address;
  const [head = '', tail = ''] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = address.includes('::') ? (tail === '' ? [] : tail.split(':')) : [];
  const groups = address.includes('::')
    ? [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right]
    : left;
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
