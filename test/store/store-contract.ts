import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { PlantRecord, Store, TokenRecord } from '../../src/store/store.js';

const MIN = -(2n ** 63n);
const MAX = 2n ** 63n - 1n;

const plant = (id: bigint, owner = 'alice', name = `plant ${id}`, tag: string | null = null): PlantRecord => ({
  id,
  owner,
  name,
  tag,
});

const page = (over: Partial<{ owner: string | null; tag: string | null; fromId: bigint; limit: number }> = {}) => ({
  owner: null,
  tag: null,
  fromId: MIN,
  limit: 1000,
  ...over,
});

/** The storage contract: every engine's adapter must pass these, unchanged (docs/conventions.md#tests). */
export function storeContract(engine: string, open: () => Promise<Store>): void {
  describe(`${engine} store`, () => {
    const withStore = (name: string, body: (store: Store) => Promise<void>): void => {
      test(name, async (t) => {
        const store = await open();
        t.after(() => store.close());
        await store.migrate();
        await body(store);
      });
    };

    withStore('migrate is idempotent: a second run applies nothing', async (store) => {
      assert.deepEqual(await store.migrate(), []);
    });

    withStore('keeps int64 ids exactly across the whole range', async (store) => {
      const ids = [MIN, -5n, 0n, 3n, 2n ** 53n, 2n ** 53n + 1n, MAX];
      for (const id of ids) assert.deepEqual(await store.createPlant(plant(id)), { created: true });
      const rows = await store.listPlants(page());
      assert.deepEqual(
        rows.map((r) => r.id),
        ids,
      );
    });

    withStore('round-trips text exactly, emoji and combining marks included', async (store) => {
      const name = '🌵 Kaktus — naïve 日本 e\u0301 ' + '😀'.repeat(50);
      await store.createPlant(plant(1n, 'ålice', name, '🏷️'));
      assert.deepEqual(await store.listPlants(page()), [{ id: 1n, owner: 'ålice', name, tag: '🏷️' }]);
    });

    withStore('answers the holder of a taken id instead of inserting', async (store) => {
      await store.createPlant(plant(7n, 'alice', 'fern', 'green'));
      const again = await store.createPlant(plant(7n, 'bob', 'rose', null));
      assert.deepEqual(again, { created: false, existing: plant(7n, 'alice', 'fern', 'green') });
      assert.equal((await store.listPlants(page())).length, 1);
    });

    withStore('concurrent creates of one id: exactly one is created', async (store) => {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.createPlant(plant(42n, `u${i}`))));
      assert.equal(results.filter((r) => r.created).length, 1);
      assert.equal((await store.listPlants(page())).length, 1);
    });

    withStore('many concurrent creates: each gets the answer it would get alone', async (store) => {
      await store.createPlant(plant(1000n, 'zoe', 'old'));
      const asked = [
        ...Array.from({ length: 40 }, (_, i) => plant(BigInt(i), 'alice')),
        plant(500n, 'bob', 'same'),
        plant(500n, 'bob', 'same'),
        plant(600n, 'bob', 'first'),
        plant(600n, 'carol', 'second'),
        plant(1000n, 'zoe', 'old'),
        plant(1000n, 'alice', 'new'),
      ];
      const results = await Promise.all(asked.map((p) => store.createPlant(p)));
      for (let i = 0; i < 40; i++) assert.deepEqual(results[i], { created: true });
      // An identical pair: one stores it, the other is answered with the same plant.
      const same = results.slice(40, 42);
      assert.equal(same.filter((r) => r.created).length, 1);
      assert.deepEqual(
        same.find((r) => !r.created),
        { created: false, existing: plant(500n, 'bob', 'same') },
      );
      // Two different plants for one id: one wins, the other is answered with the winner.
      const [a, b] = results.slice(42, 44);
      assert.equal([a, b].filter((r) => r!.created).length, 1);
      const winner = a!.created ? asked[42]! : asked[43]!;
      assert.deepEqual((a!.created ? b : a)!, { created: false, existing: winner });
      assert.deepEqual(results.slice(44), [
        { created: false, existing: plant(1000n, 'zoe', 'old') },
        { created: false, existing: plant(1000n, 'zoe', 'old') },
      ]);
      const stored = await store.listPlants(page());
      assert.deepEqual(
        stored.map((r) => r.id),
        [...Array.from({ length: 40 }, (_, i) => BigInt(i)), 500n, 600n, 1000n],
      );
      assert.deepEqual(
        stored.find((r) => r.id === 600n),
        winner,
      );
    });

    withStore(
      'a read that starts after a create was answered sees it, while many reads of its page run',
      async (store) => {
        const reads: Array<Promise<unknown>> = [];
        for (let i = 1n; i <= 30n; i++) {
          for (let r = 0; r < 10; r++) reads.push(store.listPlants(page({ owner: 'alice' })));
          await store.createPlant(plant(i, 'alice'));
          const after = await store.listPlants(page({ owner: 'alice' }));
          assert.equal(after.length, Number(i), `the read after create ${i} saw ${after.length} plants`);
        }
        await Promise.all(reads);
      },
    );

    withStore('a create that is answered is stored, and a delete of it is seen by the next read', async (store) => {
      const reads: Array<Promise<unknown>> = [];
      for (let i = 1n; i <= 20n; i++) {
        reads.push(store.listPlants(page()), store.listPlants(page()));
        await store.createPlant(plant(i, 'alice'));
        reads.push(store.listPlants(page()));
        assert.equal(await store.deletePlant(i, 'alice'), true);
        assert.deepEqual(await store.listPlants(page()), [], `plant ${i} is still listed after its delete`);
      }
      await Promise.all(reads);
    });

    withStore('lists by owner, tag and position, in ascending id order, up to the limit', async (store) => {
      await store.createPlant(plant(5n, 'alice', 'a', 'x'));
      await store.createPlant(plant(-1n, 'bob', 'b', 'x'));
      await store.createPlant(plant(3n, 'alice', 'c', null));
      await store.createPlant(plant(9n, 'alice', 'd', 'X'));
      const ids = async (over: Parameters<typeof page>[0]) => (await store.listPlants(page(over))).map((r) => r.id);
      assert.deepEqual(await ids({}), [-1n, 3n, 5n, 9n]);
      assert.deepEqual(await ids({ owner: 'alice' }), [3n, 5n, 9n]);
      assert.deepEqual(await ids({ tag: 'x' }), [-1n, 5n]);
      assert.deepEqual(await ids({ owner: 'alice', tag: 'x' }), [5n]);
      assert.deepEqual(await ids({ fromId: 4n }), [5n, 9n]);
      assert.deepEqual(await ids({ fromId: 5n, limit: 1 }), [5n]);
      assert.deepEqual(await ids({ owner: 'carol' }), []);
    });

    withStore("deletes by id, and with an owner only that owner's plant", async (store) => {
      await store.createPlant(plant(1n, 'alice'));
      assert.equal(await store.deletePlant(1n, 'bob'), false);
      assert.equal(await store.deletePlant(1n, 'alice'), true);
      assert.equal(await store.deletePlant(1n, null), false);
      await store.createPlant(plant(MAX, 'bob'));
      assert.equal(await store.deletePlant(MAX, null), true);
      assert.deepEqual(await store.listPlants(page()), []);
    });

    withStore('stores tokens, finds them by id, lists and revokes them once', async (store) => {
      const token: TokenRecord = {
        id: 'abc123def456',
        secretHash: Buffer.alloc(32, 7),
        subject: 'alice',
        scopes: ['plants:read', 'plants:write'],
        createdAt: 1_700_000_000_000,
        expiresAt: 1_800_000_000_000,
        revokedAt: null,
      };
      await store.createToken(token);
      const found = await store.findToken(token.id);
      assert.ok(found);
      const { createdAt, expiresAt, readAt: _readAt, ...rest } = found;
      const { createdAt: _c, expiresAt: _e, ...given } = token;
      assert.deepEqual(rest, given);
      // The times may be the store's own clock (PostgreSQL stamps them), but the lifetime asked for is kept.
      assert.equal(expiresAt! - createdAt, token.expiresAt! - token.createdAt);
      assert.equal(await store.findToken('missing'), undefined);
      assert.equal(await store.revokeToken(token.id, 1_750_000_000_000), true);
      const revokedAt = (await store.findToken(token.id))?.revokedAt;
      assert.equal(typeof revokedAt, 'number');
      assert.equal(await store.revokeToken(token.id, 1_760_000_000_000), true);
      assert.equal((await store.findToken(token.id))?.revokedAt, revokedAt, 'the first revocation time is kept');
      assert.equal(await store.revokeToken('missing', 1), false);
      assert.deepEqual(
        (await store.listTokens({ after: null, subject: null, limit: 10 })).map((t) => t.id),
        [token.id],
      );
    });

    withStore(
      'lists tokens in pages by creation, then id, after a given token, of one subject or all',
      async (store) => {
        // PostgreSQL stamps creation with its own clock: the order is checked, not assumed.
        for (let i = 0; i < 7; i++) {
          await store.createToken({
            id: `tok${String(i).padStart(9, '0')}`,
            secretHash: Buffer.alloc(32, i),
            subject: i % 2 === 0 ? 'alice' : 'bob',
            scopes: ['plants:read'],
            createdAt: 1_700_000_000_000 + (i % 3), // three alike: the id orders them
            expiresAt: null,
            revokedAt: null,
          });
        }
        const all = await store.listTokens({ after: null, subject: null, limit: 100 });
        assert.equal(all.length, 7);
        const key = (t: TokenRecord): [number, string] => [t.createdAt, t.id];
        for (const [i, t] of all.slice(1).entries()) {
          const [a, b] = [key(all[i]!), key(t)];
          assert.ok(a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]), `${a.join()} before ${b.join()}`);
        }
        const pages: string[][] = [];
        for (let after: TokenRecord | null = null; ;) {
          const page = await store.listTokens({ after, subject: null, limit: 3 });
          if (page.length === 0) break;
          pages.push(page.map((t) => t.id));
          after = page.at(-1)!;
        }
        assert.deepEqual(
          pages.map((p) => p.length),
          [3, 3, 1],
        );
        assert.deepEqual(
          pages.flat(),
          all.map((t) => t.id),
        );
        const alice = all.filter((t) => t.subject === 'alice').map((t) => t.id);
        assert.deepEqual(
          (await store.listTokens({ after: null, subject: 'alice', limit: 100 })).map((t) => t.id),
          alice,
        );
        const afterSecond = await store.listTokens({ after: all[1]!, subject: 'alice', limit: 100 });
        assert.deepEqual(
          afterSecond.map((t) => t.id),
          all
            .slice(2)
            .filter((t) => t.subject === 'alice')
            .map((t) => t.id),
        );
        assert.deepEqual(await store.listTokens({ after: all[6]!, subject: null, limit: 100 }), []);
        assert.deepEqual(await store.listTokens({ after: null, subject: 'carol', limit: 100 }), []);
      },
    );

    withStore('reports nothing that weakens durability on a database with default settings', async (store) => {
      assert.deepEqual(await store.durabilityWarnings(), []);
    });

    withStore('stores a batch, counting what was new, what was already there, and what clashes', async (store) => {
      await store.createPlant(plant(2n, 'bob', 'rose', 'red'));
      const result = await store.insertBatch([
        plant(1n, 'alice', 'fern'),
        plant(2n, 'bob', 'rose', 'red'),
        plant(3n, 'carol', 'aloe'),
        plant(3n, 'carol', 'aloe'),
        plant(3n, 'dave', 'aloe'),
        plant(2n, 'eve', 'rose', 'red'),
      ]);
      assert.equal(result.inserted, 2);
      assert.equal(result.unchanged, 2);
      assert.deepEqual(result.conflicts, [plant(3n, 'dave', 'aloe'), plant(2n, 'eve', 'rose', 'red')]);
      assert.deepEqual(
        (await store.listPlants(page())).map((r) => r.owner),
        ['alice', 'bob', 'carol'],
      );
    });

    withStore(
      'counts the plants through every change: creates, a batch with repeats and clashes, deletes',
      async (store) => {
        assert.equal(await store.countPlants(), 0);
        await store.createPlant(plant(1n, 'alice'));
        await store.createPlant(plant(1n, 'bob')); // taken: not counted
        await Promise.all([2n, 3n, 4n].map((id) => store.createPlant(plant(id, 'bob'))));
        assert.equal(await store.countPlants(), 4);
        const batch = await store.insertBatch([
          plant(4n, 'bob'),
          plant(5n, 'carol'),
          plant(6n, 'carol'),
          plant(5n, 'dave'),
        ]);
        assert.equal(batch.inserted, 2);
        assert.equal(await store.countPlants(), 6);
        assert.equal(await store.deletePlant(2n, 'bob'), true);
        assert.equal(await store.deletePlant(2n, 'bob'), false); // gone already: not counted again
        assert.equal(await store.deletePlant(5n, 'alice'), false); // not alice's
        assert.equal(await store.deletePlant(6n, null), true);
        assert.equal(await store.countPlants(), 4);
        assert.equal(await store.countPlants(), 4, 'a second count reads the same');
        assert.equal((await store.listPlants(page())).length, 4);
      },
    );

    withStore('is ready while open and not after close', async (store) => {
      assert.equal(await store.isReady(), true);
      await store.close();
      assert.equal(await store.isReady(), false);
    });
  });
}
