-- 0019_money_back: payments as a real provider makes them: paid later,
-- paid for nothing, paid wrong, and given back outside the box
-- (schema/sqlite/0019_money_back.sql says why).

ALTER TABLE holds DROP CONSTRAINT holds_state_check;
ALTER TABLE holds ADD CONSTRAINT holds_state_check
    CHECK (state IN ('open', 'pending', 'ordered', 'refunded', 'expired', 'failed'));
ALTER TABLE holds ADD COLUMN client_net TEXT CHECK (length(client_net) BETWEEN 1 AND 64);
ALTER TABLE holds ADD COLUMN pay_until BIGINT;
ALTER TABLE holds ADD COLUMN problem TEXT CHECK (length(problem) <= 200);
ALTER TABLE holds ADD COLUMN instant_only BIGINT NOT NULL DEFAULT 0 CHECK (instant_only IN (0, 1));
UPDATE holds SET client_net = client, pay_until = created_at + 1860000;
ALTER TABLE holds ALTER COLUMN client_net SET NOT NULL;
ALTER TABLE holds ALTER COLUMN pay_until SET NOT NULL;
DROP INDEX holds_event_open;
DROP INDEX holds_email_open;
DROP INDEX holds_client_open;
CREATE INDEX holds_event_live ON holds (event_id, expires_at) WHERE state IN ('open', 'pending');
CREATE INDEX holds_client_live ON holds (client, expires_at) WHERE state IN ('open', 'pending');
CREATE INDEX holds_net_live ON holds (client_net, expires_at) WHERE state IN ('open', 'pending');
-- a client's checkouts of one event, whatever became of them: a double click
-- finds the first, and a free event's are counted
CREATE INDEX holds_event_net ON holds (event_id, client_net, created_at);

ALTER TABLE refunds DROP CONSTRAINT refunds_reason_check;
ALTER TABLE refunds ADD CONSTRAINT refunds_reason_check
    CHECK (reason IN ('late', 'cancelled', 'mismatch'));
ALTER TABLE refunds ADD COLUMN status TEXT
    CHECK (status IN ('pending', 'requires_action', 'succeeded', 'failed', 'canceled'));
ALTER TABLE refunds ADD COLUMN failed_at BIGINT;
ALTER TABLE refunds ADD COLUMN failure TEXT CHECK (length(failure) <= 200);
UPDATE refunds SET status = 'succeeded' WHERE done_at IS NOT NULL AND via = 'provider';

CREATE TABLE payment_backs (
    payment_ref    TEXT    PRIMARY KEY CHECK (length(payment_ref) BETWEEN 1 AND 255),
    refunded_minor BIGINT  NOT NULL DEFAULT 0 CHECK (refunded_minor >= 0),
    in_full        BIGINT  NOT NULL DEFAULT 0 CHECK (in_full IN (0, 1)),
    dispute        TEXT    CHECK (length(dispute) <= 120),
    at             BIGINT  NOT NULL
);
CREATE INDEX payment_backs_at ON payment_backs (at);

ALTER TABLE orders ADD COLUMN refunded_minor BIGINT CHECK (refunded_minor >= 0);
ALTER TABLE orders ADD COLUMN disputed_at BIGINT;
ALTER TABLE orders ADD COLUMN dispute TEXT CHECK (length(dispute) <= 120);
