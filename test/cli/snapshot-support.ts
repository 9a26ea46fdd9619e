import type { PlantRecord, Store } from '../../src/store/store.js';
import type { EventRecord } from '../../src/store/event-store.js';

// What the backup and export-snapshot tests share: a write load through a real server with a
// ledger of what it acknowledged, and a check that a copy is the store at one instant.

export const SEED_OWNER = 'seed';
/** Seeded plant i: ids spread out and below every id the load creates; long names make pages big. */
export const seedId = (i: number): bigint => BigInt(i) * 1000n;
export const seedPlants = (count: number): PlantRecord[] =>
  Array.from({ length: count }, (_, i) => ({
    id: seedId(i),
    owner: SEED_OWNER,
    name: `${i} ${'fern '.repeat(40)}`.slice(0, 200),
    tag: i % 3 === 0 ? null : `tag ${i % 7}`,
  }));

export interface Ack {
  readonly op: 'create' | 'delete';
  readonly id: bigint;
}

/**
 * Creates and deletes through the HTTP API, from a few concurrent clients, until stopped. Every id
 * is written at most once: creates take new ids (from 10^15 up), deletes take seeded plants, in
 * turn, from `deletable`. `acks` lists the writes the server answered 200 or 204, in the order the
 * answers arrived; a 503 (the database busy) is neither acknowledged nor retried; anything else
 * is a failure of the test.
 */
export class WriteLoad {
  readonly acks: Ack[] = [];
  readonly failures: string[] = [];
  private running = true;
  private nextCreate = 10n ** 15n;
  private nextDelete = 0;
  private readonly waiters: Array<{ count: number; resolve: () => void }> = [];
  private readonly clients: Array<Promise<void>> = [];

  constructor(
    private readonly url: string,
    private readonly token: string,
    private readonly deletable: readonly bigint[],
    clients = 4,
  ) {
    for (let c = 0; c < clients; c++) this.clients.push(this.client(c));
  }

  /** Resolves once at least `count` writes were acknowledged (or the load failed). */
  acknowledged(count: number): Promise<void> {
    if (this.acks.length >= count || this.failures.length > 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ count, resolve }));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.clients);
  }

  private ack(op: Ack['op'], id: bigint): void {
    this.acks.push({ op, id });
    for (const waiter of [...this.waiters]) {
      if (this.acks.length < waiter.count) continue;
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  }

  private fail(message: string): void {
    this.failures.push(message);
    this.running = false;
    for (const waiter of this.waiters.splice(0)) waiter.resolve();
  }

  private async client(n: number): Promise<void> {
    const headers = { authorization: `Bearer ${this.token}`, 'content-type': 'application/json' };
    for (let i = 0; this.running; i++) {
      const remove = (i + n) % 2 === 1 && this.nextDelete < this.deletable.length;
      const id = remove ? this.deletable[this.nextDelete++]! : this.nextCreate++;
      try {
        const response = remove
          ? await fetch(`${this.url}/plants/${id}`, { method: 'DELETE', headers })
          : await fetch(`${this.url}/plants`, {
              method: 'POST',
              headers,
              body: `{"id":${id},"name":"load ${id}","tag":"load"}`,
            });
        await response.arrayBuffer();
        if (response.status === (remove ? 204 : 200)) this.ack(remove ? 'delete' : 'create', id);
        else if (response.status !== 503) this.fail(`${remove ? 'DELETE' : 'POST'} ${id}: ${response.status}`);
      } catch (error) {
        this.fail(`${remove ? 'DELETE' : 'POST'} ${id}: ${(error as Error).message}`);
      }
    }
  }
}

/** A plant as one comparable string. */
export const plantKey = (p: Pick<PlantRecord, 'owner' | 'name' | 'tag'>): string =>
  JSON.stringify([p.owner, p.name, p.tag]);

/** Every event of the store, in id order. */
export async function allEvents(store: Store): Promise<EventRecord[]> {
  const events: EventRecord[] = [];
  for (;;) {
    const page = await store.readEvents(events.at(-1)?.id ?? 0n, null, 1000);
    if (page.length === 0) return events;
    events.push(...page);
  }
}

/** Every plant of the store, by id. */
export async function allPlants(store: Store): Promise<Map<bigint, string>> {
  const plants = new Map<bigint, string>();
  for await (const page of store.snapshotPlants(5000)) for (const p of page) plants.set(p.id, plantKey(p));
  return plants;
}

const eventPlantId = (event: EventRecord): bigint => BigInt(/^\{"id":(-?\d+)/.exec(event.payload)![1]!);

/**
 * The positions in the event log at which the store held exactly `plants`: replaying the events
 * up to and including position i gives `plants` (-1: before the first event). Every change writes
 * its event in its own transaction, in commit order, so a copy that is the store at one instant
 * matches the log at some position; a copy read across several instants (a page before a commit,
 * the next page after it) matches none.
 */
export function instantsOf(events: readonly EventRecord[], plants: ReadonlyMap<bigint, string>): number[] {
  const replay = new Map<bigint, string>();
  let differences = plants.size;
  const instants = differences === 0 ? [-1] : [];
  events.forEach((event, i) => {
    const id = eventPlantId(event);
    const before = replay.get(id) !== plants.get(id);
    if (event.type === 'plant.created') {
      const { name, tag } = JSON.parse(event.payload) as { name: string; tag?: string };
      replay.set(id, plantKey({ owner: event.owner, name, tag: tag ?? null }));
    } else replay.delete(id);
    const after = replay.get(id) !== plants.get(id);
    differences += Number(after) - Number(before);
    if (differences === 0) instants.push(i);
  });
  return instants;
}

/** The writes of `acks` that `plants` does not reflect (a created plant missing, a deleted one there). */
export function missedWrites(acks: readonly Ack[], plants: ReadonlyMap<bigint, string>): Ack[] {
  return acks.filter((ack) => plants.has(ack.id) !== (ack.op === 'create'));
}
