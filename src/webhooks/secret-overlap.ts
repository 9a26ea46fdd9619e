// How long the old signing secret may go on signing beside a rotation's new one: the API's bound
// (webhook.schema.ts) and the CLI's (`webhooks rotate --overlap`). A module of its own, importing
// nothing, so that the command line checks its option without loading the schemas.

/** The longest overlap of two secrets a rotation may ask for: 7 days. */
export const OVERLAP_MAX_SECONDS = 604_800;
