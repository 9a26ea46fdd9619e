import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Ledger, type StoredPlant } from './ledger.js';

// The crash test's checker, fed the faults a broken store would show (npm run test:crash runs it for real).

const OWNER = 'crash-owner';

function storeOf(ledger: Ledger, ...ids: bigint[]): Map<bigint, StoredPlant> {
  return new Map(
    ids.map((id) => [id, { owner: OWNER, name: ledger.entries.get(id)!.name, tag: ledger.entries.get(id)!.tag }]),
  );
}

test('the crash checker accepts a store holding every acknowledged plant, and in-flight ones either way', () => {
  const ledger = new Ledger(OWNER);
  const kept = ledger.sendCreate(1).id;
  ledger.ackCreate(kept);
  const creating = ledger.sendCreate(1).id;
  const deleting = ledger.sendDelete()!; // the only stored plant, now with a delete in flight
  assert.equal(deleting, kept);
  assert.deepEqual(ledger.check(storeOf(ledger, kept)), []);
  assert.deepEqual(ledger.check(storeOf(ledger, kept, creating)), []);
  assert.deepEqual(ledger.check(storeOf(ledger)), []);
});

test('the crash checker reports an acknowledged create that is missing', () => {
  const ledger = new Ledger(OWNER);
  const id = ledger.sendCreate(1).id;
  ledger.ackCreate(id);
  assert.match(ledger.check(new Map()).join('\n'), /acknowledged \(200\) but it is missing/);
});

test('the crash checker reports an acknowledged delete whose plant is still stored', () => {
  const ledger = new Ledger(OWNER);
  const id = ledger.sendCreate(1).id;
  ledger.ackCreate(id);
  ledger.ackDelete(ledger.sendDelete()!);
  assert.match(ledger.check(storeOf(ledger, id)).join('\n'), /delete was acknowledged \(204\) but it is stored/);
});

test('the crash checker reports a plant that was never sent, and one stored with other fields', () => {
  const ledger = new Ledger(OWNER);
  const id = ledger.sendCreate(1).id;
  ledger.ackCreate(id);
  const stored = new Map<bigint, StoredPlant>([
    [id, { owner: 'mallory', name: ledger.entries.get(id)!.name, tag: ledger.entries.get(id)!.tag }],
    [42n, { owner: OWNER, name: 'crash 42 r1', tag: null }],
  ]);
  const violations = ledger.check(stored).join('\n');
  assert.match(violations, /id 42: stored as .* but never sent/);
  assert.match(violations, /stored as \{"owner":"mallory"/);
});

test('the crash checker holds an in-flight request to the way the store settled it, in every later round', () => {
  const ledger = new Ledger(OWNER);
  const lost = ledger.sendCreate(1).id;
  const landed = ledger.sendCreate(1).id;
  assert.deepEqual(ledger.settle(storeOf(ledger, landed)), {
    creates: { stored: 1, lost: 1 },
    deletes: { done: 0, undone: 0 },
  });
  assert.match(ledger.check(storeOf(ledger, lost, landed)).join('\n'), /absent after an earlier crash, now stored/);
  assert.match(ledger.check(new Map()).join('\n'), /acknowledged \(200\) but it is missing/);
});
