import assert from 'node:assert/strict';

// The steady load of the restart tests (SIGHUP reloads, a rolling restart behind nginx): clients
// that each create a plant and list a page, over and over, recording every create answered 200 and
// every answer or error that is anything else. The plants are named `<prefix> <id>`: a Plant
// carries no id (docs/api.md#shapes), so the name says which create it was.

export interface CreateListLoad {
  /** The ids of the creates answered 200. */
  readonly acknowledged: ReadonlySet<number>;
  /** Every other answer (status and body) or error (message and code): a failed request each. */
  readonly failures: readonly string[];
  /** Lets each client finish the request it has out, then settles. */
  stop(): Promise<void>;
}

/** Starts `clients` clients against `url` (at most 20,000 creates in all). */
export function createListLoad(url: string, token: string, prefix: string, clients = 8): CreateListLoad {
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  const acknowledged = new Set<number>();
  const failures: string[] = [];
  let running = true;
  let next = 1;
  const client = async (): Promise<void> => {
    while (running && next < 20_000) {
      const id = next++;
      try {
        const created = await fetch(`${url}/plants`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ id, name: `${prefix} ${id}` }),
        });
        const text = await created.text();
        if (created.status === 200) acknowledged.add(id);
        else failures.push(`POST ${id}: ${created.status} ${text}`);
        const listed = await fetch(`${url}/plants?limit=5`, { headers });
        await listed.text();
        if (listed.status !== 200) failures.push(`GET: ${listed.status}`);
      } catch (error) {
        const code = (error as { cause?: { code?: string } }).cause?.code ?? '';
        failures.push(`${id}: ${(error as Error).message} ${code}`);
      }
    }
  };
  const loops = Array.from({ length: clients }, client);
  return {
    acknowledged,
    failures,
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

/** The ids of the load's plants that are stored, read back page by page through `url`. */
export async function storedIds(url: string, token: string, prefix: string): Promise<Set<number>> {
  const stored = new Set<number>();
  let path: string | undefined = '/plants?limit=1000';
  while (path !== undefined) {
    const page: Response = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(page.status, 200, path);
    for (const plant of (await page.json()) as Array<{ name: string }>) {
      if (plant.name.startsWith(`${prefix} `)) stored.add(Number(plant.name.slice(prefix.length + 1)));
    }
    path = /<([^>]+)>; rel="next"/.exec(page.headers.get('link') ?? '')?.[1];
  }
  return stored;
}
