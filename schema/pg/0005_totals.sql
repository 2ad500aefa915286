-- 0005_totals (PostgreSQL): the PostgreSQL form of schema/sqlite/0005_totals.sql.
--
-- The stream's counts kept as it changes, so that no read walks the history.
-- done_jobs and dead_jobs grow with every finished and dead job; the
-- dashboard, /v1/stats, /metrics and `jobs stats` read these instead.
--
-- done_totals gains, per kind (written in the same transaction as the change
-- it counts, by queue.c only):
--   done           finished jobs, kept and pruned: + at the ack; a prune moves
--                  rows from done_jobs into `pruned` and leaves `done` as it is
--   done_reclaims  sum(max(deliveries - 1 - attempts, 0)) over done_jobs: the
--                  reclaims a kept finished job stands for; + at the ack,
--                  - at the prune (pruned jobs no longer count)
--   dead           rows in dead_jobs: + at the move to dead, - at a retry,
--                  0 at a purge
--   dead_expiries  sum(expiries) over dead_jobs, moved likewise
-- The stream's own share of the reclaims (its entries' expiries) is read
-- through stream_expired, which holds only the entries that ever expired.
--
-- done_times: finished jobs still kept, per finishing time (ms): + at the ack
-- (one row per ack statement: a batch shares its time), - at the prune, the
-- row gone at 0.  "Done since T" sums the rows after T, however long the
-- history.
--
-- An existing database is counted once, here, from the rows it holds.
-- (SQLite's scalar max(a, b) is GREATEST here; sum() of BIGINT is numeric and
-- stored back as BIGINT.)

ALTER TABLE done_totals ADD COLUMN done BIGINT NOT NULL DEFAULT 0;
ALTER TABLE done_totals ADD COLUMN done_reclaims BIGINT NOT NULL DEFAULT 0;
ALTER TABLE done_totals ADD COLUMN dead BIGINT NOT NULL DEFAULT 0;
ALTER TABLE done_totals ADD COLUMN dead_expiries BIGINT NOT NULL DEFAULT 0;

-- finished_at is a time given by value, not a generated id: a plain BIGINT
-- PRIMARY KEY, no identity.
CREATE TABLE done_times (
    finished_at BIGINT  PRIMARY KEY,   -- ms, as done_jobs.finished_at
    n           BIGINT  NOT NULL       -- rows of done_jobs finished then
);

CREATE INDEX stream_expired ON stream (expiries) WHERE expiries > 0;

INSERT INTO done_totals (kind, done, done_reclaims)
    SELECT kind, count(*), sum(GREATEST(deliveries - 1 - attempts, 0)) FROM done_jobs
    GROUP BY kind
    ON CONFLICT (kind) DO UPDATE SET done = excluded.done, done_reclaims = excluded.done_reclaims;
UPDATE done_totals SET done = done + pruned;
INSERT INTO done_totals (kind, dead, dead_expiries)
    SELECT kind, count(*), sum(expiries) FROM dead_jobs GROUP BY kind
    ON CONFLICT (kind) DO UPDATE SET dead = excluded.dead, dead_expiries = excluded.dead_expiries;
INSERT INTO done_times (finished_at, n)
    SELECT finished_at, count(*) FROM done_jobs GROUP BY finished_at;
