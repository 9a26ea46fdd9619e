import type { Migration } from '../migration.js';

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
  {
    version: 2,
    name: 'events, webhooks and deliveries',
    sql: `
      -- Event ids are taken while holding an advisory lock that the transaction keeps until it
      -- commits (postgres/statements.ts), so events commit in id order: a bigserial alone hands out
      -- ids before commit, and a reader could pass an id whose transaction commits later.
      CREATE TABLE events (
        id         BIGSERIAL PRIMARY KEY,
        type       TEXT NOT NULL,
        owner      TEXT NOT NULL,
        plant_id   BIGINT NOT NULL,
        payload    TEXT NOT NULL,
        created_at BIGINT NOT NULL
      );
      CREATE INDEX events_owner_id ON events (owner, id);
      CREATE INDEX events_created_at ON events (created_at);

      CREATE TABLE webhooks (
        id              TEXT PRIMARY KEY,
        owner           TEXT NOT NULL,
        all_plants      BOOLEAN NOT NULL,
        url             TEXT NOT NULL,
        events          TEXT NOT NULL,
        status          TEXT NOT NULL,
        secret          TEXT NOT NULL,
        created_at      BIGINT NOT NULL,
        failing_since   BIGINT,
        disabled_reason TEXT
      );
      CREATE INDEX webhooks_owner ON webhooks (owner, created_at);

      CREATE TABLE deliveries (
        id              BIGSERIAL PRIMARY KEY,
        webhook_id      TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
        event_id        BIGINT NOT NULL,
        type            TEXT NOT NULL,
        status          TEXT NOT NULL,
        attempts        INTEGER NOT NULL,
        last_status     INTEGER,
        last_error      TEXT,
        next_attempt_at BIGINT,
        lease_until     BIGINT,
        lease_owner     TEXT,
        created_at      BIGINT NOT NULL
      );
      CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
      CREATE INDEX deliveries_due_by_webhook ON deliveries (webhook_id, next_attempt_at, id) WHERE status = 'pending';
      CREATE INDEX deliveries_webhook ON deliveries (webhook_id, id);
      CREATE INDEX deliveries_created_at ON deliveries (created_at);

      CREATE TABLE event_horizon (one INTEGER PRIMARY KEY CHECK (one = 1), pruned_through BIGINT NOT NULL);
      INSERT INTO event_horizon VALUES (1, 0);
    `,
  },
  {
    version: 3,
    name: 'delivery cursor',
    sql: `
      -- Deliveries are made from the event log behind a cursor (store/postgres/deliveries.ts, fanOut),
      -- not by each create: every event through fanned_through has its deliveries. Version 2 made
      -- them in the create's transaction, so every event committed so far has them already.
      CREATE TABLE delivery_cursor (one INTEGER PRIMARY KEY CHECK (one = 1), fanned_through BIGINT NOT NULL);
      INSERT INTO delivery_cursor SELECT 1, greatest(coalesce(max(id), 0), (SELECT pruned_through FROM event_horizon)) FROM events;
    `,
  },
  {
    version: 4,
    name: 'webhook management (interface 1.2.0)',
    sql: `
      ALTER TABLE webhooks ADD COLUMN description TEXT NOT NULL DEFAULT '';
      -- A rotated secret (POST /webhooks/{id}/secret) signs beside the new one until then.
      ALTER TABLE webhooks ADD COLUMN previous_secret TEXT;
      ALTER TABLE webhooks ADD COLUMN previous_secret_until BIGINT;
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
      CREATE INDEX deliveries_due_pings ON deliveries (webhook_id, next_attempt_at, id) WHERE status = 'pending' AND type = 'webhook.ping';

      -- One row per attempt, written with the attempt's record; deleted with its delivery (the
      -- pruner's and a webhook's delete remove them in the same statement or transaction).
      CREATE TABLE delivery_attempts (
        delivery_id BIGINT NOT NULL,
        attempt     INTEGER NOT NULL,      -- 1, 2, … over the delivery's whole life
        at          BIGINT NOT NULL,        -- when the attempt ended, milliseconds since the epoch
        status      INTEGER,               -- the receiver's HTTP status, if it answered
        duration_ms INTEGER NOT NULL,
        error       TEXT,
        response    TEXT,                  -- the first 1 KiB of the answer
        PRIMARY KEY (delivery_id, attempt)
      );
    `,
  },
  {
    version: 5,
    name: "a webhook's attempts by time",
    sql: `
      -- GET /webhooks/{id}/activity counts a webhook's attempts of the last 24 hours by the hour:
      -- through this index it reads those attempts alone, however many deliveries the webhook had
      -- (through deliveries_webhook it would read every delivery kept, 7 days of them, one lookup each).
      -- Every row written from now on names its webhook; those written before get it from their delivery.
      ALTER TABLE delivery_attempts ADD COLUMN webhook_id TEXT NOT NULL DEFAULT '';
      UPDATE delivery_attempts a SET webhook_id = d.webhook_id FROM deliveries d WHERE d.id = a.delivery_id;
      -- No default from here on: a write that forgets the webhook fails instead of counting nowhere.
      ALTER TABLE delivery_attempts ALTER COLUMN webhook_id DROP DEFAULT;
      CREATE INDEX delivery_attempts_webhook_at ON delivery_attempts (webhook_id, at) INCLUDE (status);
    `,
  },
  {
    version: 6,
    name: 'a retry asked for during an attempt',
    sql: `
      -- POST …/retry while the delivery's attempt is on the wire: the time it was asked, which the
      -- attempt's record then keeps (pending, due then) instead of its own outcome's.
      ALTER TABLE deliveries ADD COLUMN retry_asked_at BIGINT;
    `,
  },
  {
    version: 7,
    name: 'tickets of the change feed',
    sql: `
      -- POST /events/tickets (interface 1.3.0): a single-use ticket of 60 s that opens a stream as the
      -- token that asked for it would. The hash of the ticket, never the ticket; spent by its delete.
      -- Times are the database's clock, as the tokens' are: any instance may spend what another made.
      CREATE TABLE event_tickets (
        hash       BYTEA PRIMARY KEY,
        token_id   TEXT NOT NULL,
        subject    TEXT NOT NULL,
        scopes     TEXT NOT NULL,        -- space-separated, as api_tokens.scopes
        expires_at BIGINT NOT NULL,      -- milliseconds since the epoch
        credential_expires_at BIGINT     -- a JWT's exp; null for an API token (its record says)
      );
      CREATE INDEX event_tickets_expires_at ON event_tickets (expires_at);
    `,
  },
  {
    version: 8,
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
    version: 9,
    name: 'ids that name something outside the database start each timeline higher',
    sql: `
      -- An event's id is what readers resume after and what webhook-ids carry; a delivery's is what
      -- a ping's webhook-id carries. After an asynchronous failover the promoted server resumes its
      -- sequences from what it had received, so the ids its old primary handed out but never sent
      -- would be handed out again, for other content. Each timeline (a promotion starts a new one)
      -- therefore hands out ids 2^32 above the one before: no failover loses 2^32 of them, so no id
      -- is ever given twice, and a reader past the lost ones still receives every later event. Ids
      -- stay below 2^53, exact in any JSON reader, up to timeline 2^20.
      CREATE FUNCTION timeline_id_base() RETURNS bigint LANGUAGE sql VOLATILE AS $$
        SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint << 32
      $$;
      ALTER TABLE events ALTER COLUMN id SET DEFAULT timeline_id_base() + nextval('events_id_seq');
      ALTER TABLE deliveries ALTER COLUMN id SET DEFAULT timeline_id_base() + nextval('deliveries_id_seq');
    `,
  },
  {
    version: 10,
    name: 'pages from the index alone; the plant count kept',
    sql: `
      -- A page of one owner's plants (or of one owner's plants with a tag) is read from the index
      -- alone: an owner's rows are one in every many of the table's pages, so through an index
      -- that holds only the key each row of a page is a page read of its own, and a page asked
      -- for the first time costs more as the table outgrows memory. The index-only scan needs the
      -- visibility map, which autovacuum keeps (insert-only tables too, since PostgreSQL 13).
      CREATE INDEX plants_owner_page ON plants (owner, id) INCLUDE (name, tag);
      DROP INDEX plants_owner_id;
      CREATE INDEX plants_owner_tag_page ON plants (owner, tag, id) INCLUDE (name) WHERE tag IS NOT NULL;
      DROP INDEX plants_owner_tag_id;

      -- The plant count (the plant_store_plants gauge) without counting the plants: a total, and
      -- per server process (backend) the change it made since the total was last brought up to
      -- date. A backend runs one transaction at a time, so a writer only ever waits for its own
      -- row, never for another instance's: the count is no gate on writes. A statement trigger
      -- sees every way plants change (the service's batches, an import, SQL by hand).
      CREATE TABLE plant_count (one INTEGER PRIMARY KEY CHECK (one = 1), n BIGINT NOT NULL);
      CREATE TABLE plant_count_changes (backend INTEGER PRIMARY KEY, n BIGINT NOT NULL);
      CREATE FUNCTION plant_count_add() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        delta BIGINT;
      BEGIN
        IF TG_OP = 'INSERT' THEN
          SELECT count(*) INTO delta FROM changed_rows;
        ELSE
          SELECT -count(*) INTO delta FROM changed_rows;
        END IF;
        IF delta <> 0 THEN
          INSERT INTO plant_count_changes AS c (backend, n) VALUES (pg_backend_pid(), delta)
            ON CONFLICT (backend) DO UPDATE SET n = c.n + excluded.n;
        END IF;
        RETURN NULL;
      END
      $$;
      CREATE TRIGGER plants_counted_insert AFTER INSERT ON plants
        REFERENCING NEW TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION plant_count_add();
      CREATE TRIGGER plants_counted_delete AFTER DELETE ON plants
        REFERENCING OLD TABLE AS changed_rows FOR EACH STATEMENT EXECUTE FUNCTION plant_count_add();
      -- TRUNCATE fires no delete trigger; it holds every writer off while it runs, so none is lost.
      CREATE FUNCTION plant_count_empty() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE plant_count SET n = 0;
        DELETE FROM plant_count_changes;
        RETURN NULL;
      END
      $$;
      CREATE TRIGGER plants_counted_truncate AFTER TRUNCATE ON plants
        FOR EACH STATEMENT EXECUTE FUNCTION plant_count_empty();
      -- Counted after the triggers exist, in their transaction: their lock on plants holds writers
      -- off until this commits, so no change is missed or counted twice.
      INSERT INTO plant_count SELECT 1, count(*) FROM plants;
    `,
  },
  {
    version: 11,
    name: 'events published below a watermark, writers never waiting for each other',
    sql: `
      -- Event ids come from a sequence before commit, so they may commit out of id order; a reader
      -- that resumes after N must still never miss a smaller id that commits later. Readers read
      -- only up to event_watermark.through: every event with an id at or below it that will ever
      -- commit has committed. Writers of events do not wait for each other: each holds the
      -- event-order lock SHARED until its end (a change to the set of active webhooks takes it
      -- EXCLUSIVE, so that it waits for the writers in flight and none starts meanwhile), and has
      -- its transaction id (xid) before it takes an event id. A statement trigger makes both true
      -- of every insert, the service's and SQL by hand alike.
      CREATE FUNCTION events_writer_first() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_advisory_xact_lock_shared(7316002);
        PERFORM pg_current_xact_id();
        RETURN NULL;
      END
      $$;
      CREATE TRIGGER events_writer_first BEFORE INSERT ON events
        FOR EACH STATEMENT EXECUTE FUNCTION events_writer_first();

      -- A round (advance_event_watermark) reads the newest id handed out, then takes an xid of
      -- its own: every transaction that held an id up to that newest one had a smaller xid. That
      -- pair is a mark (ids[i], xids[i], made at ats[i]). Once no transaction with an xid below
      -- xids[i] is running, every event up to ids[i] has committed or never will, and a later
      -- round moves through to ids[i].
      CREATE TABLE event_watermark (
        one     INTEGER PRIMARY KEY CHECK (one = 1),
        through BIGINT NOT NULL,
        ids     BIGINT[] NOT NULL DEFAULT '{}',
        xids    XID8[] NOT NULL DEFAULT '{}',
        ats     TIMESTAMPTZ[] NOT NULL DEFAULT '{}',
        base    BIGINT,      -- the timeline (timeline_id_base) the marks were made on
        round_at TIMESTAMPTZ -- when a round last changed the row
      );
      -- Every writer of before this migration has ended once the lock is granted: the newest id is
      -- committed, and no older one is still to come.
      SELECT pg_advisory_xact_lock(7316002);
      INSERT INTO event_watermark (one, through) SELECT 1, coalesce(max(id), 0) FROM events;

      -- One round, in a transaction of its own (one autocommitted SELECT); several instances'
      -- rounds never wait for each other (SKIP LOCKED: the one under way does the work). Answers
      -- the watermark and how many marks still wait; no row when another round was under way;
      -- waiting NULL when a paced round finds the row changed less than 5 ms ago (the fleet's
      -- rounds, and so its wakes, are at most one per 5 ms whatever the number of instances and
      -- commits); a reader waiting for what it wrote asks for an unpaced one (paced false).
      -- A mark passes when the oldest running xid (the xmin of a snapshot taken after it) is
      -- above its xid; one that has not passed within 20 ms (a long transaction, of any database
      -- of the server, holds xmin back) passes when no holder of the event-order lock is older.
      -- When the watermark moves, a NOTIFY wakes every instance's readers: at most one per round,
      -- whatever the number of commits it covers. Its payload is the new watermark, and
      -- ' webhooks' after it while a webhook is active (else no dispatcher need look). The round's
      -- own commit waits for no standby: the events are durable by their own commits, and a
      -- watermark lost in a crash or a failover is only lower, which is safe.
      CREATE FUNCTION advance_event_watermark(paced BOOLEAN DEFAULT true) RETURNS TABLE (through BIGINT, waiting INTEGER)
      LANGUAGE plpgsql AS $$
      DECLARE
        here    BIGINT := timeline_id_base();
        taken   BIGINT;
        w       event_watermark;
        horizon XID8;
        oldest  INTEGER;
        upto    BIGINT;
        keep    INTEGER := 0;
        n       INTEGER;
        marked  BOOLEAN := false;
      BEGIN
        IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
          RAISE EXCEPTION 'advance_event_watermark() runs in a transaction of its own';
        END IF;
        SELECT * INTO w FROM event_watermark;
        IF paced AND w.round_at > clock_timestamp() - interval '5 milliseconds' THEN
          through := w.through;
          RETURN NEXT;
          RETURN;
        END IF;
        -- The newest id handed out (none yet: NULL), read while this transaction has no xid yet.
        taken := here + pg_sequence_last_value('events_id_seq');
        -- Locking the row gives this transaction its xid, after the read above.
        SELECT * INTO w FROM event_watermark FOR UPDATE SKIP LOCKED;
        IF NOT FOUND THEN RETURN; END IF;
        PERFORM set_config('synchronous_commit', 'off', true);
        -- A new timeline (a promotion) ended every transaction of the old one: its marks go.
        IF w.base IS DISTINCT FROM here THEN
          w.ids := '{}'; w.xids := '{}'; w.ats := '{}';
        END IF;
        n := coalesce(array_length(w.ids, 1), 0);
        horizon := pg_snapshot_xmin(pg_current_snapshot());
        upto := w.through;
        WHILE keep < n AND w.xids[keep + 1] < horizon LOOP
          keep := keep + 1;
          upto := greatest(upto, w.ids[keep]);
        END LOOP;
        IF keep < n AND w.ats[keep + 1] < clock_timestamp() - interval '20 milliseconds' THEN
          -- The oldest holder of the event-order lock, by its age (age() counts from this
          -- transaction's xid): a mark passes if no holder is older than it.
          SELECT max(age(x.transactionid)) INTO oldest
          FROM pg_locks l JOIN pg_locks x ON x.virtualtransaction = l.virtualtransaction
            AND x.locktype = 'transactionid' AND x.mode = 'ExclusiveLock' AND x.granted
          WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 0 AND l.objid = 7316002 AND l.objsubid = 1
            AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database());
          WHILE keep < n AND (oldest IS NULL OR oldest < age(w.xids[keep + 1]::xid)) LOOP
            keep := keep + 1;
            upto := greatest(upto, w.ids[keep]);
          END LOOP;
        END IF;
        w.ids := w.ids[keep + 1 :];
        w.xids := w.xids[keep + 1 :];
        w.ats := w.ats[keep + 1 :];
        n := n - keep;
        -- A new mark when ids were handed out past the last one (at most 64 wait: the newest
        -- covers what the ones it could not add would have).
        IF taken > greatest(upto, coalesce(w.ids[n], 0)) THEN  -- false while taken is NULL
          IF n = 64 THEN
            w.ids[64] := taken; w.xids[64] := pg_current_xact_id(); w.ats[64] := clock_timestamp();
          ELSE
            w.ids := w.ids || taken;
            w.xids := w.xids || pg_current_xact_id();
            w.ats := w.ats || clock_timestamp();
            n := n + 1;
          END IF;
          marked := true;
        END IF;
        IF keep > 0 OR marked OR w.base IS DISTINCT FROM here THEN
          UPDATE event_watermark e
            SET through = upto, ids = w.ids, xids = w.xids, ats = w.ats, base = here, round_at = clock_timestamp();
        END IF;
        IF upto > w.through THEN
          PERFORM pg_notify('plant_store_events', upto::text ||
            CASE WHEN EXISTS (SELECT 1 FROM webhooks WHERE status = 'active') THEN ' webhooks' ELSE '' END);
        END IF;
        through := upto;
        waiting := n;
        RETURN NEXT;
      END
      $$;
    `,
  },
  {
    version: 12,
    name: "each plant's deliveries to a webhook in event order",
    sql: `
      -- A delivery is not claimed while an earlier delivery of the same plant to the same webhook
      -- is pending (docs/api.md#delivery, order per plant). The plant is copied onto the delivery
      -- so that the check is one probe of deliveries_plant_order, not a join with the event log.
      -- Pings have none: they are never held back and hold nothing back.
      ALTER TABLE deliveries ADD COLUMN plant_id BIGINT;
      UPDATE deliveries d SET plant_id = e.plant_id FROM events e WHERE e.id = d.event_id AND d.type <> 'webhook.ping';
      CREATE INDEX deliveries_plant_order ON deliveries (webhook_id, plant_id, event_id)
        WHERE status = 'pending' AND plant_id IS NOT NULL;
    `,
  },
];
