-- 0011_identities: identities that a lost commit cannot hand to another
-- (schema/sqlite/0011_identities.sql says why and how).  On PostgreSQL a
-- commit the server lost can take its identity values with it too: a
-- sequence is not rewound, but what a box told the world must not lean on
-- that.

CREATE TABLE identity_marks (
    name TEXT   PRIMARY KEY CHECK (name IN ('orders', 'tickets', 'outbox')),
    upto BIGINT NOT NULL                        -- the highest row id made before 0011
);
INSERT INTO identity_marks (name, upto) SELECT 'orders', coalesce(max(id), 0) FROM orders;
INSERT INTO identity_marks (name, upto) SELECT 'tickets', coalesce(max(id), 0) FROM tickets;
INSERT INTO identity_marks (name, upto) SELECT 'outbox', coalesce(max(id), 0) FROM outbox;

ALTER TABLE tickets ADD COLUMN code_id BIGINT;
UPDATE tickets SET code_id = id;
ALTER TABLE tickets ALTER COLUMN code_id SET NOT NULL;
CREATE UNIQUE INDEX tickets_code ON tickets (code_id);

ALTER TABLE email_sends ADD COLUMN provider_key TEXT;
UPDATE email_sends SET provider_key = CASE
    WHEN kind = 'tickets' THEN 'tickets-' || order_id
    WHEN kind = 'cancel' THEN 'cancel-' || order_id
    ELSE 'tickets-' || order_id || '-r' || substr(kind, 10) END;
CREATE UNIQUE INDEX email_sends_key ON email_sends (provider_key);

ALTER TABLE outbox ADD COLUMN job_id TEXT;
UPDATE outbox SET job_id = 'outbox:' || id;
ALTER TABLE outbox ALTER COLUMN job_id SET NOT NULL;
CREATE UNIQUE INDEX outbox_job ON outbox (job_id);
