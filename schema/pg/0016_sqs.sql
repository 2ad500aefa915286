-- 0016_sqs: queues of one's own, reached through the SQS listener.
--
-- stream.queue: the lane an entry waits in.  0 is the box's own lane, which
-- its workers claim; an SQS queue is a lane of its own (sqs_queues.id), which
-- only its receivers claim, so a message never reaches a built-in handler
-- and a box job never reaches an outside worker.  A queue's messages are
-- entries of kind 'sqs:<name>' with the same leases, fencing tokens, claim
-- order and poison rule as every other entry.  grp: a FIFO queue's
-- MessageGroupId (NULL elsewhere): the claim takes only the oldest entry of
-- each group, so one message per group is in flight and order is kept.
-- first_leased_at: the first claim's time (ApproximateFirstReceiveTimestamp).
-- dead_jobs.queue: the lane a dead letter goes back to on a retry.
--
-- sqs_queues: one row per queue.  attributes: the settable attributes as
-- SQS names them (a JSON object of strings).  purged_at: the last purge (one
-- a minute).
--
-- sqs_dedup: a FIFO queue's deduplication ids, each for five minutes from
-- the send that first used it; a send with a live id is taken and answered
-- with the first send's MessageId, enqueueing nothing.
--
-- api_tokens: the worker role (SQS only) and token_queues: the queues a
-- worker token may use, each a name or a prefix ending in '*'.

ALTER TABLE stream ADD COLUMN queue BIGINT NOT NULL DEFAULT 0;
ALTER TABLE stream ADD COLUMN grp TEXT CHECK (length(grp) <= 128);
ALTER TABLE stream ADD COLUMN first_leased_at BIGINT;
ALTER TABLE dead_jobs ADD COLUMN queue BIGINT NOT NULL DEFAULT 0;

DROP INDEX stream_claim;
CREATE INDEX stream_claim ON stream (queue, priority, visible_at, id);
CREATE INDEX stream_group ON stream (queue, grp, id) WHERE grp IS NOT NULL;

CREATE TABLE sqs_queues (
    id          BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,   -- the lane; never reused
    name        TEXT    NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 60),
    fifo        INTEGER NOT NULL CHECK (fifo IN (0, 1)),
    attributes  TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL,
    modified_at BIGINT  NOT NULL,
    purged_at   BIGINT
);

CREATE TABLE sqs_dedup (
    queue      BIGINT  NOT NULL,
    dedup_id   TEXT    NOT NULL CHECK (length(dedup_id) BETWEEN 1 AND 128),
    message_id TEXT    NOT NULL,
    expires_at BIGINT  NOT NULL,
    PRIMARY KEY (queue, dedup_id)
);

ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check
    CHECK (role IN ('operator', 'box_office', 'door', 'monitor', 'worker'));

CREATE TABLE token_queues (
    sha256  TEXT NOT NULL REFERENCES api_tokens (sha256),
    pattern TEXT NOT NULL CHECK (length(pattern) BETWEEN 1 AND 61),
    PRIMARY KEY (sha256, pattern)
);
