import type { PlantRecord } from './store.js';

// The events' payloads (docs/api.md#events), as the JSON text stored and sent: ids are written from
// the bigint, so ids beyond 2^53 stay exact (never through a JS number).

/** plant.created: exactly a NewPlant, `tag` only when the plant has one. */
export const createdPayload = ({ id, name, tag }: PlantRecord): string =>
  `{"id":${id},"name":${JSON.stringify(name)}${tag === null ? '' : `,"tag":${JSON.stringify(tag)}`}}`;

/** plant.deleted: `{"id": <int64>}`. */
export const deletedPayload = (id: bigint): string => `{"id":${id}}`;

/** webhook.ping (POST /webhooks/{id}/ping): `{"webhookId": "<id>"}`, made when it is sent. */
export const pingPayload = (webhookId: string): string => JSON.stringify({ webhookId });
