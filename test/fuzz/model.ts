// What the store must hold after the requests so far: the fuzzer predicts every answer from it.

export interface ModelPlant {
  readonly owner: string;
  readonly name: string;
  readonly tag: string | null;
}

export interface Caller {
  readonly subject: string;
  readonly admin: boolean;
}

export interface Page {
  readonly plants: readonly ModelPlant[];
  /** The id of the last plant of the page when more plants follow. */
  readonly lastId: bigint | undefined;
}

export class PlantModel {
  private readonly plants = new Map<bigint, ModelPlant>();

  /** 200 with the stored plant (a new one, or an identical retry by its owner), or 409. */
  create(caller: Caller, id: bigint, name: string, tag: string | null): { status: 200 | 409; plant?: ModelPlant } {
    const existing = this.plants.get(id);
    if (existing === undefined) {
      const plant = { owner: caller.subject, name, tag };
      this.plants.set(id, plant);
      return { status: 200, plant };
    }
    const same = existing.owner === caller.subject && existing.name === name && existing.tag === tag;
    return same ? { status: 200, plant: existing } : { status: 409 };
  }

  /** 204 for the caller's own plant (any plant for an admin), 404 otherwise. */
  delete(caller: Caller, id: bigint): 204 | 404 {
    const existing = this.plants.get(id);
    if (existing === undefined || (!caller.admin && existing.owner !== caller.subject)) return 404;
    this.plants.delete(id);
    return 204;
  }

  list(caller: Caller, options: { limit: number; after?: bigint | undefined; tag?: string | undefined }): Page {
    const ids = [...this.plants.keys()]
      .filter((id) => options.after === undefined || id > options.after)
      .filter((id) => {
        const plant = this.plants.get(id)!;
        return (
          (caller.admin || plant.owner === caller.subject) && (options.tag === undefined || plant.tag === options.tag)
        );
      })
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const page = ids.slice(0, options.limit);
    return {
      plants: page.map((id) => this.plants.get(id)!),
      lastId: ids.length > options.limit ? page[page.length - 1] : undefined,
    };
  }

  get(id: bigint): ModelPlant | undefined {
    return this.plants.get(id);
  }

  get size(): number {
    return this.plants.size;
  }

  /** Some ids in the store, for requests that should meet existing plants. */
  ids(): bigint[] {
    return [...this.plants.keys()];
  }
}
