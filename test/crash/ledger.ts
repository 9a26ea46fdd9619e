import { randomBytes } from 'node:crypto';

/**
 * What the clients know about every id they sent, and so what a store that survived a crash may,
 * must and must not hold. A request that was sent but not answered may have happened or not; once
 * a restarted store has been read, every such id is settled one way and must stay that way.
 */

/** creating/deleting: sent, not answered; absent: a create never answered and not stored after a crash. */
export type Fate = 'creating' | 'created' | 'deleting' | 'deleted' | 'absent';

export interface Entry {
  readonly name: string;
  readonly tag: string | null;
  /** The round whose load sent the create. */
  readonly round: number;
  fate: Fate;
}

export interface StoredPlant {
  readonly owner: string;
  readonly name: string;
  readonly tag: string | null;
}

export interface Settled {
  /** Unanswered creates found stored, and unanswered deletes found done. */
  readonly creates: { readonly stored: number; readonly lost: number };
  readonly deletes: { readonly done: number; readonly undone: number };
}

export class Ledger {
  readonly entries = new Map<bigint, Entry>();
  /** Ids whose plant is known to be stored and that no delete has been sent for: what a delete may pick. */
  private readonly deletable: bigint[] = [];

  constructor(readonly owner: string) {}

  /** Registers a create about to be sent, with an id never used before (any int64, beyond 2^53 too). */
  sendCreate(round: number): { id: bigint; name: string; tag: string | null } {
    let id = randomBytes(8).readBigInt64BE();
    while (this.entries.has(id)) id = randomBytes(8).readBigInt64BE();
    const name = `crash ${id} r${round}`;
    const tag = id % 2n === 0n ? null : `r${round}`;
    this.entries.set(id, { name, tag, round, fate: 'creating' });
    return { id, name, tag };
  }

  ackCreate(id: bigint): void {
    this.move(id, 'creating', 'created');
    this.deletable.push(id);
  }

  /** A random stored plant to delete, now marked as being deleted; undefined when there is none. */
  sendDelete(): bigint | undefined {
    if (this.deletable.length === 0) return undefined;
    const at = Math.floor(Math.random() * this.deletable.length);
    const id = this.deletable[at]!;
    this.deletable[at] = this.deletable[this.deletable.length - 1]!;
    this.deletable.pop();
    this.move(id, 'created', 'deleting');
    return id;
  }

  ackDelete(id: bigint): void {
    this.move(id, 'deleting', 'deleted');
  }

  get canDelete(): boolean {
    return this.deletable.length > 0;
  }

  count(fate: Fate): number {
    let n = 0;
    for (const entry of this.entries.values()) if (entry.fate === fate) n += 1;
    return n;
  }

  /** Every way `stored` (the whole store after a crash) breaks what the clients were told. */
  check(stored: ReadonlyMap<bigint, StoredPlant>): string[] {
    const violations: string[] = [];
    for (const [id, entry] of this.entries) {
      const plant = stored.get(id);
      const sent = `id ${id} (sent in round ${entry.round})`;
      if (plant === undefined) {
        if (entry.fate === 'created') violations.push(`${sent}: its create was acknowledged (200) but it is missing`);
        continue;
      }
      if (entry.fate === 'deleted') violations.push(`${sent}: its delete was acknowledged (204) but it is stored`);
      else if (entry.fate === 'absent') violations.push(`${sent}: it was absent after an earlier crash, now stored`);
      else if (plant.owner !== this.owner || plant.name !== entry.name || plant.tag !== entry.tag) {
        violations.push(`${sent}: stored as ${describe(plant)}, sent as ${describe({ ...entry, owner: this.owner })}`);
      }
    }
    for (const [id, plant] of stored) {
      if (!this.entries.has(id)) violations.push(`id ${id}: stored as ${describe(plant)} but never sent`);
    }
    return violations;
  }

  /** Settles every unanswered request by what `stored` holds; call after check() found nothing wrong. */
  settle(stored: ReadonlyMap<bigint, StoredPlant>): Settled {
    const settled = { creates: { stored: 0, lost: 0 }, deletes: { done: 0, undone: 0 } };
    for (const [id, entry] of this.entries) {
      const present = stored.has(id);
      if (entry.fate === 'creating') {
        entry.fate = present ? 'created' : 'absent';
        settled.creates[present ? 'stored' : 'lost'] += 1;
      } else if (entry.fate === 'deleting') {
        entry.fate = present ? 'created' : 'deleted';
        settled.deletes[present ? 'undone' : 'done'] += 1;
      } else continue;
      if (present) this.deletable.push(id);
    }
    return settled;
  }

  private move(id: bigint, from: Fate, to: Fate): void {
    const entry = this.entries.get(id);
    if (entry?.fate !== from) throw new Error(`ledger: id ${id} is ${entry?.fate ?? 'unknown'}, not ${from}`);
    entry.fate = to;
  }
}

const describe = (plant: StoredPlant): string =>
  JSON.stringify({ owner: plant.owner, name: plant.name, tag: plant.tag });
