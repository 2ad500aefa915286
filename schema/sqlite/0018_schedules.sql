-- 0018_schedules: periodic jobs.
--
-- schedules: one row per schedule.  A schedule makes one job of kind with
-- payload for each of its periods: every every_ms from the epoch (UTC), or
-- at each time its cron expression names in its timezone (NULL: the
-- venue's).
-- next_at is the start of the next period not yet made; `run` on every box
-- takes a due one with a conditional update (WHERE next_at = the value it
-- read), so only one box makes it, and queues its job in that transaction,
-- with the job id schedule:<name>:<period start ms>.  After the box was
-- down over several periods, missed 'once' makes one job for the latest
-- of them; 'skip' makes none for a period more than a minute late.
-- last_at, last_job_id: the last period made and its job; made: the jobs
-- made so far.

CREATE TABLE schedules (
    name        TEXT    PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64),
    kind        TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 64),
    payload     TEXT    NOT NULL CHECK (json_valid(payload)),
    every_ms    INTEGER CHECK (every_ms >= 1000),
    cron        TEXT    CHECK (length(cron) BETWEEN 9 AND 200),
    timezone    TEXT    CHECK (length(timezone) BETWEEN 1 AND 64),
    missed      TEXT    NOT NULL CHECK (missed IN ('once', 'skip')),
    next_at     INTEGER NOT NULL,
    last_at     INTEGER,
    last_job_id TEXT,
    made        INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    CHECK ((every_ms IS NULL) <> (cron IS NULL))
) STRICT;
CREATE INDEX schedules_due ON schedules (next_at);
