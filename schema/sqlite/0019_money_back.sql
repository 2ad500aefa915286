-- 0019_money_back: payments as a real provider makes them: paid later,
-- paid for nothing, paid wrong, and given back outside the box.
--
-- holds.state gains two values.  'pending': the buyer finished the
-- provider's page with a delayed method (a direct debit, a bank transfer):
-- the money is on its way, and the hold keeps its seats until the payment
-- succeeds (its order), fails, or expires_at (moved to the end of the wait,
-- shop_pending_max, when it became pending) passes.  'failed': a delayed
-- payment failed; its seats are free and its buyer is told once.
-- holds.pay_until: the provider session's expiry (ms), fixed when the hold
-- is made, so that every attempt to make the session sends the same value
-- and a late retry is still far enough from it (rows made before this
-- schema keep the value their first attempt sent: creation + 31 minutes).
-- holds.client_net: the client's wider network, counted as client is
-- (an IPv6 client is its /64, its network the /56 a home line gets; an IPv4
-- client is its address, and so is its network).  The caps on unpaid holds
-- count clients and their networks, never an email address: a stranger
-- who types someone else's address cannot lock them out of buying.
-- holds.instant_only: the hold's session offers instant payment methods only
-- (card), because when it was made the event's pending holds took the
-- unpaid share: payments that take days may keep at most that share of the
-- seats for their days; fixed at the hold's making, as pay_until is, so
-- every attempt sends the same parameters.
-- holds.problem: why money that came made no order though the seats were
-- there (an amount or currency other than the hold's); such a hold is
-- 'refunded' with a refund of reason 'mismatch', or 'expired' when no money
-- was taken (a session the provider closed with nothing to pay).
--
-- refunds: reason 'mismatch'; status, the provider's word for the refund
-- when last asked (NULL: not asked yet; 'pending', 'requires_action',
-- 'succeeded', 'failed', 'canceled'); done_at is set only once it says
-- 'succeeded'.  failed_at and failure (the provider's reason): the provider
-- could not pay it back, so it is owed at the window from then on.
--
-- orders: money that went back by another way than the box's own refund:
-- refunded_minor, what the provider says is refunded of the order's payment
-- in all (a refund made in its dashboard, partly or in full; the box's own
-- refund counts too); disputed_at and dispute ("<reason>, <status>"): the
-- buyer's bank took the payment back.  A payment given back in full or
-- disputed cancels its order (its change row says why).
--
-- SQLite cannot change a CHECK constraint, so holds and refunds are made
-- again by its own procedure, as 0013 made orders again: the runner turns
-- foreign keys off for the migration and checks them before its commit.

PRAGMA legacy_alter_table = ON;

CREATE TABLE holds_0019 (
    id            INTEGER PRIMARY KEY,
    public_id     TEXT    NOT NULL UNIQUE,
    link          TEXT    NOT NULL UNIQUE,
    event_id      INTEGER NOT NULL REFERENCES events (id),
    seats         INTEGER NOT NULL CHECK (seats BETWEEN 1 AND 100),
    buyer_name    TEXT    NOT NULL CHECK (length(buyer_name) BETWEEN 1 AND 200),
    buyer_email   TEXT    NOT NULL CHECK (length(buyer_email) BETWEEN 3 AND 254),
    client        TEXT    NOT NULL CHECK (length(client) BETWEEN 1 AND 64),
    client_net    TEXT    NOT NULL CHECK (length(client_net) BETWEEN 1 AND 64),
    amount_minor  INTEGER NOT NULL CHECK (amount_minor >= 0),
    currency      TEXT    NOT NULL CHECK (length(currency) = 3),
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    renewals      INTEGER NOT NULL DEFAULT 0,
    state         TEXT    NOT NULL DEFAULT 'open'
                  CHECK (state IN ('open', 'pending', 'ordered', 'refunded', 'expired',
                                   'failed')),
    session_id    TEXT    UNIQUE,
    pay_url       TEXT    CHECK (length(pay_url) <= 2048),
    payment_ref   TEXT    UNIQUE,
    order_id      INTEGER UNIQUE REFERENCES orders (id),
    settled_at    INTEGER,
    pay_until     INTEGER NOT NULL,
    problem       TEXT    CHECK (length(problem) <= 200),
    instant_only  INTEGER NOT NULL DEFAULT 0 CHECK (instant_only IN (0, 1))
) STRICT;
INSERT INTO holds_0019 (id, public_id, link, event_id, seats, buyer_name, buyer_email, client,
                        client_net, amount_minor, currency, created_at, expires_at, renewals, state,
                        session_id, pay_url, payment_ref, order_id, settled_at, pay_until)
    SELECT id, public_id, link, event_id, seats, buyer_name, buyer_email, client, client,
           amount_minor, currency, created_at, expires_at, renewals, state, session_id,
           pay_url, payment_ref, order_id, settled_at, created_at + 1860000 FROM holds;
DROP TABLE holds;
ALTER TABLE holds_0019 RENAME TO holds;
-- the seats a hold keeps: open ones, and pending ones (their money is on its way)
CREATE INDEX holds_event_live ON holds (event_id, expires_at) WHERE state IN ('open', 'pending');
CREATE INDEX holds_client_live ON holds (client, expires_at) WHERE state IN ('open', 'pending');
CREATE INDEX holds_net_live ON holds (client_net, expires_at) WHERE state IN ('open', 'pending');
-- a client's checkouts of one event, whatever became of them: a double click
-- finds the first, and a free event's are counted
CREATE INDEX holds_event_net ON holds (event_id, client_net, created_at);
CREATE INDEX holds_created ON holds (created_at);

CREATE TABLE refunds_0019 (
    id            INTEGER PRIMARY KEY,
    payment_ref   TEXT    NOT NULL UNIQUE,
    order_id      INTEGER REFERENCES orders (id),
    hold_id       INTEGER REFERENCES holds (id),
    amount_minor  INTEGER NOT NULL CHECK (amount_minor >= 0),
    currency      TEXT    NOT NULL CHECK (length(currency) = 3),
    reason        TEXT    NOT NULL CHECK (reason IN ('late', 'cancelled', 'mismatch')),
    via           TEXT    NOT NULL CHECK (via IN ('provider', 'window')),
    created_at    INTEGER NOT NULL,
    done_at       INTEGER,
    provider_refund_id TEXT,
    provider_key  TEXT,
    status        TEXT    CHECK (status IN ('pending', 'requires_action', 'succeeded',
                                            'failed', 'canceled')),
    failed_at     INTEGER,
    failure       TEXT    CHECK (length(failure) <= 200)
) STRICT;
INSERT INTO refunds_0019 (id, payment_ref, order_id, hold_id, amount_minor, currency, reason,
                          via, created_at, done_at, provider_refund_id, provider_key, status)
    SELECT id, payment_ref, order_id, hold_id, amount_minor, currency, reason, via,
           created_at, done_at, provider_refund_id, provider_key,
           CASE WHEN done_at IS NOT NULL AND via = 'provider' THEN 'succeeded' END
    FROM refunds;
DROP TABLE refunds;
ALTER TABLE refunds_0019 RENAME TO refunds;
CREATE UNIQUE INDEX refunds_provider_key ON refunds (provider_key);
CREATE UNIQUE INDEX refunds_order ON refunds (order_id);

PRAGMA legacy_alter_table = OFF;

-- payment_backs: money going back reported for a payment no order carries
-- yet (the provider's reports come in any order: a refund or dispute may
-- come before the payment's own report that makes the order); the payment
-- applied later finds it and makes no order, or records it on the order.
-- Kept until its payment's hold is pruned, or a month.
CREATE TABLE payment_backs (
    payment_ref    TEXT    PRIMARY KEY CHECK (length(payment_ref) BETWEEN 1 AND 255),
    refunded_minor INTEGER NOT NULL DEFAULT 0 CHECK (refunded_minor >= 0),
    in_full        INTEGER NOT NULL DEFAULT 0 CHECK (in_full IN (0, 1)),
    dispute        TEXT    CHECK (length(dispute) <= 120),
    at             INTEGER NOT NULL
) STRICT;
CREATE INDEX payment_backs_at ON payment_backs (at);

ALTER TABLE orders ADD COLUMN refunded_minor INTEGER CHECK (refunded_minor >= 0);
ALTER TABLE orders ADD COLUMN disputed_at INTEGER;
ALTER TABLE orders ADD COLUMN dispute TEXT CHECK (length(dispute) <= 120);
