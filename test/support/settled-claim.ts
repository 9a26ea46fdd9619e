import type { Store } from '../../src/store/store.js';
import type { ClaimRequest } from '../../src/store/webhook-store.js';

/**
 * A claim after every event written so far is published: the fan-out of a claim reads published
 * events only (on PostgreSQL a few ms after their commit; the dispatchers are woken then), and a
 * test that wrote just before means to claim what it wrote.
 */
export async function claimSettled(store: Store, request: ClaimRequest): ReturnType<Store['claimDeliveries']> {
  await store.eventsSettled();
  return store.claimDeliveries(request);
}
