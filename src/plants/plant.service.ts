import type { Principal } from '../auth/principal.js';
import { HttpError } from '../errors.js';
import { INT64_MAX, INT64_MIN } from '../wire/int64.js';
import { type PlantRecord, type PlantStore, samePlant } from '../store/store.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import type { NewPlant, Plant } from './plant.schema.js';

export interface ListRequest {
  readonly limit: number;
  readonly cursor?: string | undefined;
  readonly tag?: string | undefined;
}

export interface PlantList {
  /** Shared by every request answered from the same rows: never changed once made. */
  readonly plants: readonly Plant[];
  /** The cursor of the next page, when more plants follow. */
  readonly next: string | undefined;
}

const toPlant = (record: PlantRecord): Plant =>
  record.tag === null ? { name: record.name } : { name: record.name, tag: record.tag };

/** The plants a principal may see and delete: its own, or every plant for plants:admin. */
const ownerScope = (principal: Principal): string | null =>
  principal.scopes.has('plants:admin') ? null : principal.subject;

export class PlantService {
  /**
   * Each page made from a store's rows, by those rows: a store that answers again from its page
   * cache gives the same array, and then the same page is answered without being made again.
   */
  private readonly pages = new WeakMap<readonly PlantRecord[], PlantList & { readonly limit: number }>();

  constructor(private readonly store: PlantStore) {}

  /** Creates the plant; an identical retry by its owner gets the same answer, anything else 409. */
  async create(principal: Principal, input: NewPlant): Promise<Plant> {
    const plant: PlantRecord = { id: input.id, owner: principal.subject, name: input.name, tag: input.tag ?? null };
    const result = await this.store.createPlant(plant);
    if (result.created) return toPlant(plant);
    if (samePlant(result.existing, plant)) return toPlant(result.existing);
    // The message is the same whoever holds the id: it must not tell who owns it
    // (docs/api.md#create-a-plant).
    throw new HttpError(409, `a plant with id ${plant.id} already exists`);
  }

  async list(principal: Principal, request: ListRequest): Promise<PlantList> {
    let fromId = INT64_MIN;
    if (request.cursor !== undefined) {
      const last = decodeCursor(request.cursor);
      if (last === undefined) throw new HttpError(400, 'cursor is not one this service issued; follow the Link header');
      if (last === INT64_MAX) return { plants: [], next: undefined };
      fromId = last + 1n;
    }
    // One row more than asked tells whether another page follows.
    const rows = await this.store.listPlants({
      owner: ownerScope(principal),
      tag: request.tag ?? null,
      fromId,
      limit: request.limit + 1,
    });
    const made = this.pages.get(rows);
    if (made?.limit === request.limit) return made;
    const more = rows.length > request.limit;
    const page = more ? rows.slice(0, request.limit) : rows;
    const next = more ? encodeCursor(page[page.length - 1]!.id) : undefined;
    const list = { plants: page.map(toPlant), next, limit: request.limit };
    this.pages.set(rows, list);
    return list;
  }

  async delete(principal: Principal, id: bigint): Promise<void> {
    // Another user's plant gets the same 404 as a missing one: no one learns what others hold.
    if (!(await this.store.deletePlant(id, ownerScope(principal)))) {
      throw new HttpError(404, `no plant with id ${id}`);
    }
  }
}
