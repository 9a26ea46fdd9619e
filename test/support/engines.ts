/**
 * The storage engines a run covers, from TEST_ENGINES (comma-separated: `sqlite`, `postgres`).
 * `npm test` covers the embedded default (TEST_ENGINES=sqlite) and needs no PostgreSQL at all;
 * `npm run test:postgres` covers the PostgreSQL side (TEST_ENGINES=postgres). A file run on its
 * own, with TEST_ENGINES unset, covers both. A file that loops over the engines keeps only these,
 * so that each engine's half of it runs in one suite and nowhere twice.
 */

export type EngineName = 'sqlite' | 'postgres';

const ALL: readonly EngineName[] = ['sqlite', 'postgres'];

function covered(): readonly EngineName[] {
  const given = process.env.TEST_ENGINES;
  if (given === undefined || given.trim() === '') return ALL;
  const names = given.split(',').map((name) => name.trim().toLowerCase());
  for (const name of names) {
    if (!ALL.includes(name as EngineName)) throw new Error(`TEST_ENGINES: unknown engine "${name}" (sqlite, postgres)`);
  }
  return names as EngineName[];
}

/** The engine a name means: `postgres`, `PostgreSQL` → postgres; `sqlite`, `SQLite` → sqlite. */
function engineOf(name: string): EngineName {
  if (/^postgres/i.test(name)) return 'postgres';
  if (/^sqlite/i.test(name)) return 'sqlite';
  throw new Error(`not an engine name: "${name}"`);
}

/** Whether this run covers the engine named (`sqlite`, `SQLite`, `postgres`, `PostgreSQL`). */
export function runsOn(name: string): boolean {
  return covered().includes(engineOf(name));
}

type Named = readonly [string, ...unknown[]] | { readonly name: string };

/** The entries of a file's list of engines (`[name, open]` pairs or `{ name, … }`) this run covers. */
export function underTest<T extends Named>(engines: readonly T[]): T[] {
  return engines.filter((engine) => runsOn('name' in engine ? engine.name : engine[0]));
}
