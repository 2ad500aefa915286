-- 0011_identities: identities that a lost commit cannot hand to another.
--
-- A power cut takes the commits the disk had not flushed, and with them the
-- row ids they used: the next commit gets the same ids again.  Nothing the
-- outside world holds may be derived from such an id, or a buyer's email,
-- a provider's key or a printed ticket would name someone else's order.
-- From this schema on:
--
--   a ticket code names the ticket's code_id, a random number from 2^62 up,
--   drawn at intake (a lost ticket's number is never drawn again);
--   a provider key names the order's public id (random too): "tickets-<id>",
--   "tickets-<id>-r<n>", "cancel-<id>", fixed in email_sends.provider_key by
--   the intent's first attempt;
--   a job born in the outbox is named by its intent: "outbox:<public id>:
--   <render|count|send|send-r<n>|cancel>" (outbox.job_id).
--
-- What was made before keeps working: a ticket's code_id is its row id (the
-- codes already printed name it), an email row keeps the key its attempts
-- used ("tickets-<order row id>"), an outbox row keeps "outbox:<row id>".
-- identity_marks records where the old rule ends, for `stagedoor check`.

CREATE TABLE identity_marks (
    name TEXT    PRIMARY KEY CHECK (name IN ('orders', 'tickets', 'outbox')),
    upto INTEGER NOT NULL                       -- the highest row id made before 0011
) STRICT;
INSERT INTO identity_marks (name, upto) SELECT 'orders', coalesce(max(id), 0) FROM orders;
INSERT INTO identity_marks (name, upto) SELECT 'tickets', coalesce(max(id), 0) FROM tickets;
INSERT INTO identity_marks (name, upto) SELECT 'outbox', coalesce(max(id), 0) FROM outbox;

ALTER TABLE tickets ADD COLUMN code_id INTEGER NOT NULL DEFAULT 0;
UPDATE tickets SET code_id = id;
CREATE UNIQUE INDEX tickets_code ON tickets (code_id);

ALTER TABLE email_sends ADD COLUMN provider_key TEXT;
UPDATE email_sends SET provider_key = CASE
    WHEN kind = 'tickets' THEN 'tickets-' || order_id
    WHEN kind = 'cancel' THEN 'cancel-' || order_id
    ELSE 'tickets-' || order_id || '-r' || substr(kind, 10) END;
CREATE UNIQUE INDEX email_sends_key ON email_sends (provider_key);

ALTER TABLE outbox ADD COLUMN job_id TEXT;
UPDATE outbox SET job_id = 'outbox:' || id;
CREATE UNIQUE INDEX outbox_job ON outbox (job_id);
