import type { Migration } from './migration.js';

// Append only: a migration that has shipped is never edited.
export const sqliteMigrations: readonly Migration[] = [
  {
    version: 1,
    name: 'plants and api tokens',
    sql: `
      CREATE TABLE plants (
        id    INTEGER PRIMARY KEY,   -- the rowid: a signed 64-bit integer, exact
        owner TEXT NOT NULL,
        name  TEXT NOT NULL,
        tag   TEXT
      ) STRICT;
      CREATE INDEX plants_owner_id ON plants (owner, id);
      CREATE INDEX plants_owner_tag_id ON plants (owner, tag, id) WHERE tag IS NOT NULL;
      CREATE INDEX plants_tag_id ON plants (tag, id) WHERE tag IS NOT NULL;

      CREATE TABLE api_tokens (
        id          TEXT PRIMARY KEY,
        secret_hash BLOB NOT NULL,
        subject     TEXT NOT NULL,
        scopes      TEXT NOT NULL,     -- space-separated, as in OAuth 2.0
        created_at  INTEGER NOT NULL,  -- milliseconds since the epoch
        expires_at  INTEGER,
        revoked_at  INTEGER
      ) STRICT;
    `,
  },
];
