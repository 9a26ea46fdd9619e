import type { Migration } from '../migration.js';

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
  {
    version: 2,
    name: 'events, webhooks and deliveries',
    sql: `
      -- AUTOINCREMENT: an id is never used twice, even after the newest events are pruned, so a
      -- reader resuming after id N can trust that every later event has a larger id.
      CREATE TABLE events (
        id         INTEGER PRIMARY KEY AUTOINCREMENT,
        type       TEXT NOT NULL,            -- plant.created | plant.deleted
        owner      TEXT NOT NULL,            -- the plant's owner: who may see the event
        plant_id   INTEGER NOT NULL,
        payload    TEXT NOT NULL,            -- the JSON sent, exactly (ids beyond 2^53 as written)
        created_at INTEGER NOT NULL          -- milliseconds since the epoch
      ) STRICT;
      CREATE INDEX events_owner_id ON events (owner, id);
      CREATE INDEX events_created_at ON events (created_at);

      CREATE TABLE webhooks (
        id            TEXT PRIMARY KEY,
        owner         TEXT NOT NULL,
        all_plants    INTEGER NOT NULL,      -- 1: created with plants:admin, sees every plant's events
        url           TEXT NOT NULL,
        events        TEXT NOT NULL,         -- space-separated event types
        status        TEXT NOT NULL,         -- active | disabled
        secret        TEXT NOT NULL,         -- sealed with SECRETS_KEY when set (webhooks/secret-box.ts)
        created_at    INTEGER NOT NULL,
        failing_since INTEGER,               -- the first failed attempt since the last success
        disabled_reason TEXT
      ) STRICT;
      CREATE INDEX webhooks_owner ON webhooks (owner, created_at);

      CREATE TABLE deliveries (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        webhook_id      TEXT NOT NULL,       -- no foreign key: deleting a webhook deletes its deliveries in the same transaction, and the check cost every create 3 µs
        event_id        INTEGER NOT NULL,
        type            TEXT NOT NULL,
        status          TEXT NOT NULL,       -- pending | delivered | failed
        attempts        INTEGER NOT NULL,
        last_status     INTEGER,
        last_error      TEXT,
        next_attempt_at INTEGER,             -- null once delivered or failed
        lease_until     INTEGER,             -- a dispatcher holds it until then
        lease_owner     TEXT,
        created_at      INTEGER NOT NULL
      ) STRICT;
      -- A claim reads each webhook's earliest due deliveries through this, never the whole backlog.
      CREATE INDEX deliveries_due_by_webhook ON deliveries (webhook_id, next_attempt_at, id) WHERE status = 'pending';
      CREATE INDEX deliveries_webhook ON deliveries (webhook_id, id);
      CREATE INDEX deliveries_created_at ON deliveries (created_at);

      -- The newest event id pruned so far: resuming after an older id is a 410.
      CREATE TABLE event_horizon (one INTEGER PRIMARY KEY CHECK (one = 1), pruned_through INTEGER NOT NULL) STRICT;
      INSERT INTO event_horizon VALUES (1, 0);
    `,
  },
  {
    version: 3,
    name: 'delivery cursor',
    sql: `
      -- Deliveries are made from the event log behind a cursor (store/sqlite/deliveries.ts, fanOut),
      -- not by each create: every event through fanned_through has its deliveries. Version 2 made
      -- them in the create's transaction, so every event written so far has them already.
      CREATE TABLE delivery_cursor (one INTEGER PRIMARY KEY CHECK (one = 1), fanned_through INTEGER NOT NULL) STRICT;
      INSERT INTO delivery_cursor VALUES (1, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0));
    `,
  },
  {
    version: 4,
    name: 'webhook management (interface 1.2.0)',
    sql: `
      ALTER TABLE webhooks ADD COLUMN description TEXT NOT NULL DEFAULT '';
      -- A rotated secret (POST /webhooks/{id}/secret) signs beside the new one until then.
      ALTER TABLE webhooks ADD COLUMN previous_secret TEXT;
      ALTER TABLE webhooks ADD COLUMN previous_secret_until INTEGER;
      -- Version 2 stored a sentence; interface 1.2.0 shows one of gone, failing, manual.
      UPDATE webhooks SET disabled_reason = CASE
          WHEN status = 'active' THEN NULL
          WHEN disabled_reason = 'the receiver answered 410 Gone' THEN 'gone'
          ELSE 'failing' END;

      -- The attempts made before a recover started the schedule over: attempts keep counting
      -- (the attempt log's numbers are never reused), the schedule counts from here.
      ALTER TABLE deliveries ADD COLUMN schedule_from INTEGER NOT NULL DEFAULT 0;
      -- Pings are sent whatever the webhook's status: a claim finds those of disabled webhooks here.
      -- A ping has no event: its event_id is 0 (event ids start at 1), shown as null.
      CREATE INDEX deliveries_due_pings ON deliveries (next_attempt_at) WHERE status = 'pending' AND type = 'webhook.ping';

      -- One row per attempt, written with the attempt's record; deleted with its delivery (the
      -- pruner's and a webhook's delete remove them in the same statement or transaction).
      CREATE TABLE delivery_attempts (
        delivery_id INTEGER NOT NULL,
        attempt     INTEGER NOT NULL,      -- 1, 2, … over the delivery's whole life
        at          INTEGER NOT NULL,        -- when the attempt ended, milliseconds since the epoch
        status      INTEGER,               -- the receiver's HTTP status, if it answered
        duration_ms INTEGER NOT NULL,
        error       TEXT,
        response    TEXT,                  -- the first 1 KiB of the answer
        PRIMARY KEY (delivery_id, attempt)
      ) STRICT, WITHOUT ROWID;
    `,
  },
  {
    version: 5,
    name: 'no index on events.created_at',
    sql: `
      -- The pruner walks the log in id order from its oldest event (store/sqlite/event-log.ts), so
      -- it needs no index on created_at, and without one a create writes one index fewer for its
      -- event row.
      DROP INDEX IF EXISTS events_created_at;
    `,
  },
  {
    version: 6,
    name: "a webhook's attempts by time",
    sql: `
      -- GET /webhooks/{id}/activity counts a webhook's attempts of the last 24 hours by the hour:
      -- through this index it reads those attempts alone, however many deliveries the webhook had
      -- (through deliveries_webhook it would read every delivery kept, 7 days of them, one lookup each).
      -- Every row written from now on names its webhook; those written before get it from their delivery.
      ALTER TABLE delivery_attempts ADD COLUMN webhook_id TEXT NOT NULL DEFAULT '';
      UPDATE delivery_attempts SET webhook_id = coalesce(
        (SELECT d.webhook_id FROM deliveries d WHERE d.id = delivery_attempts.delivery_id), '');
      CREATE INDEX delivery_attempts_webhook_at ON delivery_attempts (webhook_id, at, status);
    `,
  },
  {
    version: 7,
    name: 'a retry asked for during an attempt',
    sql: `
      -- POST …/retry while the delivery's attempt is on the wire: the time it was asked, which the
      -- attempt's record then keeps (pending, due then) instead of its own outcome's.
      ALTER TABLE deliveries ADD COLUMN retry_asked_at INTEGER;
    `,
  },
  {
    version: 8,
    name: 'tickets of the change feed',
    sql: `
      -- POST /events/tickets (interface 1.3.0): a single-use ticket of 60 s that opens a stream as the
      -- token that asked for it would. The hash of the ticket, never the ticket; spent by its delete.
      CREATE TABLE event_tickets (
        hash       BLOB PRIMARY KEY,
        token_id   TEXT NOT NULL,
        subject    TEXT NOT NULL,
        scopes     TEXT NOT NULL,        -- space-separated, as api_tokens.scopes
        expires_at INTEGER NOT NULL,     -- milliseconds since the epoch
        credential_expires_at INTEGER    -- a JWT's exp; null for an API token (its record says)
      ) STRICT, WITHOUT ROWID;
      CREATE INDEX event_tickets_expires_at ON event_tickets (expires_at);
    `,
  },
  {
    version: 9,
    name: 'the token listing in pages',
    sql: `
      -- \`token list\` reads the tokens a page at a time, in creation order (then id), after the last
      -- token of the page before: through these a page costs O(log n) at any place, and
      -- a subject's tokens (--subject) are read without the others'.
      CREATE INDEX api_tokens_created ON api_tokens (created_at, id);
      CREATE INDEX api_tokens_subject ON api_tokens (subject, created_at, id);
    `,
  },
  {
    version: 10,
    name: 'pages from the index alone; the plant count kept',
    sql: `
      -- A page of one owner's plants (or of one owner's plants with a tag) is read from the index
      -- alone: an owner's rows are one in every many of the table's pages, so through an index
      -- that holds only the key each row of a page is a page read of its own, and a page asked
      -- for the first time costs more as the table outgrows the cache.
      CREATE INDEX plants_owner_page ON plants (owner, id, name, tag);
      DROP INDEX plants_owner_id;
      CREATE INDEX plants_owner_tag_page ON plants (owner, tag, id, name) WHERE tag IS NOT NULL;
      DROP INDEX plants_owner_tag_id;

      -- The plant count (the plant_store_plants gauge) without counting the plants. SQLite has one
      -- writer at a time, so one row kept by triggers is no gate; triggers see every way plants
      -- change (the service, an import, SQL by hand).
      CREATE TABLE plant_count (one INTEGER PRIMARY KEY CHECK (one = 1), n INTEGER NOT NULL) STRICT;
      INSERT INTO plant_count SELECT 1, count(*) FROM plants;
      CREATE TRIGGER plants_counted_insert AFTER INSERT ON plants BEGIN
        UPDATE plant_count SET n = n + 1;
      END;
      CREATE TRIGGER plants_counted_delete AFTER DELETE ON plants BEGIN
        UPDATE plant_count SET n = n - 1;
      END;
    `,
  },
  {
    version: 11,
    name: "each plant's deliveries to a webhook in event order",
    sql: `
      -- A delivery is not claimed while an earlier delivery of the same plant to the same webhook
      -- is pending (docs/api.md#delivery, order per plant). The plant is copied onto the delivery
      -- so that the check is one probe of deliveries_plant_order, not a join with the event log.
      -- Pings have none: they are never held back and hold nothing back.
      ALTER TABLE deliveries ADD COLUMN plant_id INTEGER;
      UPDATE deliveries SET plant_id = (SELECT plant_id FROM events e WHERE e.id = deliveries.event_id)
        WHERE type <> 'webhook.ping';
      CREATE INDEX deliveries_plant_order ON deliveries (webhook_id, plant_id, event_id)
        WHERE status = 'pending' AND plant_id IS NOT NULL;
    `,
  },
];
