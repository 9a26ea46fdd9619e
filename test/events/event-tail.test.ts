import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventTail, type FanOut, type TailSubscriber } from '../../src/events/event-tail.js';
import type { EventRecord, EventStore } from '../../src/store/event-store.js';
import { eventually } from './stream-support.js';

// EventTail over a store in memory: what it tells of each fan-out (the debug line
// `change feed: events written to the streams` is written from it, and bench/scale-streams.ts
// measures the service's own time with that line).

test('EventTail tells of each read once every subscriber was offered its events: last id, events, streams', async () => {
  const log: EventRecord[] = [];
  let changed: () => void = () => {};
  const store = {
    watchEvents: (listener: () => void) => {
      changed = listener;
      return () => {};
    },
    lastEventId: () => Promise.resolve(0n),
    readEvents: (after: bigint, _owner: string | null, limit: number) =>
      Promise.resolve(log.filter((e) => e.id > after).slice(0, limit)),
  };
  const told: FanOut[] = [];
  const tail = new EventTail(
    store as unknown as EventStore,
    60_000,
    (error) => assert.fail(String(error)),
    (fanOut) => told.push(fanOut),
  );
  const offered: bigint[][] = [[], []];
  const subscribers: TailSubscriber[] = offered.map((ids) => ({
    offer: (event) => void ids.push(event.id),
    heartbeat: () => {},
  }));
  try {
    for (const s of subscribers) await tail.subscribe(s);
    for (const id of [1n, 2n]) log.push({ id, type: 'plant.created', owner: 'alice', payload: '{}', createdAt: 0 });
    changed();
    await eventually('the fan-out told', () => told.length > 0);
    assert.deepEqual(offered, [
      [1n, 2n],
      [1n, 2n],
    ]);
    assert.equal(told.length, 1, 'one read, one fan-out');
    const [fanOut] = told;
    assert.deepEqual(
      { ...fanOut, ms: undefined, cpuMs: undefined },
      { last: 2n, events: 2, streams: 2, ms: undefined, cpuMs: undefined },
    );
    assert.ok(fanOut!.ms >= 0 && fanOut!.cpuMs >= 0, `${fanOut!.ms} ms, ${fanOut!.cpuMs} ms of CPU`);
  } finally {
    tail.close();
  }
});
