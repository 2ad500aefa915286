-- 0017_controls: the queue's controls: a kind or an SQS queue paused, held
-- to a rate, held to a number of running jobs; and jobs cancelled.
--
-- controls: one row per kind under a control (an SQS queue's kind is
-- sqs:<name>).  lane: where its entries wait.  A kind of the box's own gets
-- a lane of its own below 0, so the claim of lane 0 never walks past the
-- backlog of a paused or limited kind, and the claim of its lane happens
-- only when the control lets one through: the cost of a claim does not grow
-- with what a control holds back.  An SQS queue keeps its lane (above 0).
-- The trigger stream_lane puts each new entry of such a kind in its lane,
-- whichever way it was written (an enqueue, the relay, a dead letter's
-- retry).  A row whose controls are all off stays, with its lane, until no
-- entry waits in it.
--   paused_at:   NULL unless paused; nothing of the lane is claimed.
--   rate_n per rate_ms, burst: a rate shared by every box, as a generic
--                cell rate: rate_tat (microseconds) is the theoretical time
--                of the next entry; a claim of k moves it k intervals on, and
--                it may run up to burst intervals ahead of now.
--   concurrency: leases of the lane live at once, over every box; a lease
--                counts until it ends, so a killed worker's still counts.
--   box_concurrency: the same for the workers of each box (leased_by begins
--                with the box's name and '/').
--
-- stream_leases: the live leases of a controlled lane, counted by the claim.
--
-- cancelled_jobs: an entry taken out of the stream by `jobs cancel`, kept as
-- history (pruned with the finished jobs).  running: it was under a live
-- lease; its worker's next extend or ack is refused.

CREATE TABLE controls (
    lane            INTEGER PRIMARY KEY CHECK (lane <> 0),
    kind            TEXT    NOT NULL UNIQUE CHECK (length(kind) BETWEEN 1 AND 64),
    paused_at       INTEGER,
    paused_by       TEXT    CHECK (length(paused_by) <= 200),
    rate_n          INTEGER CHECK (rate_n >= 1),
    rate_ms         INTEGER CHECK (rate_ms >= 1),
    burst           INTEGER CHECK (burst >= 1),
    rate_tat        INTEGER NOT NULL DEFAULT 0,
    concurrency     INTEGER CHECK (concurrency >= 1),
    box_concurrency INTEGER CHECK (box_concurrency >= 1),
    CHECK ((rate_n IS NULL) = (rate_ms IS NULL) AND (rate_n IS NULL) = (burst IS NULL))
) STRICT;

CREATE TRIGGER stream_lane AFTER INSERT ON stream
WHEN NEW.queue = 0 AND EXISTS (SELECT 1 FROM controls WHERE kind = NEW.kind)
BEGIN
    UPDATE stream SET queue = (SELECT lane FROM controls WHERE kind = NEW.kind)
    WHERE id = NEW.id;
END;

CREATE INDEX stream_leases ON stream (queue, visible_at)
    WHERE lease_token IS NOT NULL AND queue <> 0;

CREATE TABLE cancelled_jobs (
    id           INTEGER PRIMARY KEY,
    job_id       TEXT    NOT NULL,
    kind         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    priority     INTEGER NOT NULL,
    deliveries   INTEGER NOT NULL,
    attempts     INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    cancelled_at INTEGER NOT NULL,
    cancelled_by TEXT    NOT NULL CHECK (length(cancelled_by) BETWEEN 1 AND 200),
    running      INTEGER NOT NULL CHECK (running IN (0, 1)),
    queue        INTEGER NOT NULL
) STRICT;
CREATE INDEX cancelled_jobs_job_id ON cancelled_jobs (job_id);
