-- 0001_stream: the job stream, its finished and dead entries, and the outbox.
--
-- The stream is one hot table.  An entry is claimable when visible_at <= now;
-- a claim pushes visible_at forward by the lease and sets a fresh lease_token,
-- so an expired lease makes the entry claimable again (the reclaim) without a
-- sweeper.  Finished entries leave the hot table for done_jobs, dead ones for
-- dead_jobs, so the claim index stays small.  All times are integer ms from
-- the program's clock; SQL never reads the time itself.

CREATE TABLE stream (
    id          INTEGER PRIMARY KEY,   -- entry id: a delivery slot, never an identity
    job_id      TEXT    NOT NULL CHECK (length(job_id) BETWEEN 1 AND 200),
                                       -- identity: survives redelivery and retry
    kind        TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
    payload     TEXT    NOT NULL CHECK (json_valid(payload)),
    priority    INTEGER NOT NULL DEFAULT 0,     -- lower runs first
    visible_at  INTEGER NOT NULL,               -- claimable from this time on
    lease_token INTEGER,                        -- NULL unless leased: the fencing token
    leased_by   TEXT,                           -- the worker holding the lease
    deliveries  INTEGER NOT NULL DEFAULT 0,     -- claims, all of them
    expiries    INTEGER NOT NULL DEFAULT 0,     -- claims that ended by lease expiry
    attempts    INTEGER NOT NULL DEFAULT 0,     -- failed attempts reported by fail
    last_error  TEXT,
    created_at  INTEGER NOT NULL
) STRICT;

-- The claim walks this index in its ORDER BY and stops after n visible rows.
CREATE INDEX stream_claim ON stream (priority, visible_at, id);

CREATE TABLE done_jobs (
    id          INTEGER PRIMARY KEY,   -- grows with finishing order: pruning walks it
    job_id      TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    payload     TEXT    NOT NULL,
    deliveries  INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    worker      TEXT
) STRICT;

CREATE TABLE dead_jobs (
    id          INTEGER PRIMARY KEY,
    job_id      TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    payload     TEXT    NOT NULL,
    priority    INTEGER NOT NULL,
    deliveries  INTEGER NOT NULL,
    expiries    INTEGER NOT NULL,
    attempts    INTEGER NOT NULL,
    last_error  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    died_at     INTEGER NOT NULL
) STRICT;
CREATE INDEX dead_jobs_job_id ON dead_jobs (job_id);

-- Finished jobs already pruned from done_jobs, per kind: done = this + rows.
CREATE TABLE done_totals (
    kind   TEXT    PRIMARY KEY,
    pruned INTEGER NOT NULL DEFAULT 0
) STRICT, WITHOUT ROWID;

-- The transactional outbox: written in the same transaction as the business
-- change it announces; the relay copies unpublished rows into the stream as
-- job_id 'outbox:<id>' and marks them published in the same transaction.
CREATE TABLE outbox (
    id           INTEGER PRIMARY KEY,
    kind         TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
    payload      TEXT    NOT NULL CHECK (json_valid(payload)),
    priority     INTEGER NOT NULL DEFAULT 0,
    delay_ms     INTEGER NOT NULL DEFAULT 0 CHECK (delay_ms >= 0),
    created_at   INTEGER NOT NULL,
    published_at INTEGER
) STRICT;
CREATE INDEX outbox_unpublished ON outbox (id) WHERE published_at IS NULL;
