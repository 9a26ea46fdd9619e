import type { Migration } from './migration.js';

// Append only: a migration that has shipped is never edited.
export const postgresMigrations: readonly Migration[] = [
  {
    version: 1,
    name: 'plants and api tokens',
    sql: `
      CREATE TABLE plants (
        id    BIGINT PRIMARY KEY,
        owner TEXT NOT NULL,
        name  TEXT NOT NULL,
        tag   TEXT
      );
      CREATE INDEX plants_owner_id ON plants (owner, id);
      CREATE INDEX plants_owner_tag_id ON plants (owner, tag, id) WHERE tag IS NOT NULL;
      CREATE INDEX plants_tag_id ON plants (tag, id) WHERE tag IS NOT NULL;

      CREATE TABLE api_tokens (
        id          TEXT PRIMARY KEY,
        secret_hash BYTEA NOT NULL,
        subject     TEXT NOT NULL,
        scopes      TEXT NOT NULL,     -- space-separated, as in OAuth 2.0
        created_at  BIGINT NOT NULL,   -- milliseconds since the epoch
        expires_at  BIGINT,
        revoked_at  BIGINT
      );
    `,
  },
];
