-- 0014_shop: the public shop, its holds and its payments.
--
-- An event has a price per seat and its currency (price_minor in the
-- currency's minor units, ISO 4217 currency; NULL: the shop does not sell
-- it).  An order records what was charged for it (amount_minor, currency)
-- and, when a payment provider took the money, the provider's payment
-- (payment_ref, unique: one payment makes at most one order).
--
-- A hold is a lease on seats while a buyer pays: its seats count against
-- the event's capacity while state is 'open' and expires_at is ahead, in the
-- transaction that checks the capacity (orders.c, holds.c), and are free
-- again the moment it runs out, with no sweeper (as the stream's leases).
-- public_id names it in job ids, provider keys and logs; link is the
-- buyer's unguessable address of their checkout, and appears nowhere
-- else.  A paid hold becomes an order
-- ('ordered') or, when its seats were gone by the time the payment came, a
-- refund ('refunded'); a hold whose session ended unpaid is 'expired'.
--
-- refunds: one per payment (payment_ref unique: a payment is refunded at
-- most once, under the provider key refund-<payment_ref>), for a late
-- payment whose seats were gone or a paid order cancelled; via 'window'
-- for an order the box office took the money for.
--
-- effects: technique 2's claim rows for effects whose subject is no order
-- (a refund at the provider, a hold's email), as email_sends is for an
-- order's emails; owned by idem.c.

ALTER TABLE events ADD COLUMN price_minor INTEGER CHECK (price_minor BETWEEN 0 AND 99999999);
ALTER TABLE events ADD COLUMN currency TEXT CHECK (length(currency) = 3);

ALTER TABLE orders ADD COLUMN amount_minor INTEGER CHECK (amount_minor >= 0);
ALTER TABLE orders ADD COLUMN currency TEXT CHECK (length(currency) = 3);
ALTER TABLE orders ADD COLUMN payment_ref TEXT;
CREATE UNIQUE INDEX orders_payment_ref ON orders (payment_ref);

CREATE TABLE holds (
    id            INTEGER PRIMARY KEY,
    public_id     TEXT    NOT NULL UNIQUE,
    link          TEXT    NOT NULL UNIQUE,
    event_id      INTEGER NOT NULL REFERENCES events (id),
    seats         INTEGER NOT NULL CHECK (seats BETWEEN 1 AND 100),
    buyer_name    TEXT    NOT NULL CHECK (length(buyer_name) BETWEEN 1 AND 200),
    buyer_email   TEXT    NOT NULL CHECK (length(buyer_email) BETWEEN 3 AND 254),
    client        TEXT    NOT NULL CHECK (length(client) BETWEEN 1 AND 64),
    amount_minor  INTEGER NOT NULL CHECK (amount_minor >= 0),
    currency      TEXT    NOT NULL CHECK (length(currency) = 3),
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    renewals      INTEGER NOT NULL DEFAULT 0,
    state         TEXT    NOT NULL DEFAULT 'open'
                  CHECK (state IN ('open', 'ordered', 'refunded', 'expired')),
    session_id    TEXT    UNIQUE,
    pay_url       TEXT    CHECK (length(pay_url) <= 2048),
    payment_ref   TEXT    UNIQUE,
    order_id      INTEGER UNIQUE REFERENCES orders (id),
    settled_at    INTEGER
) STRICT;
CREATE INDEX holds_event_open ON holds (event_id, expires_at) WHERE state = 'open';
CREATE INDEX holds_client_open ON holds (client, expires_at) WHERE state = 'open';
CREATE INDEX holds_email_open ON holds (lower(buyer_email), expires_at) WHERE state = 'open';
CREATE INDEX holds_created ON holds (created_at);

CREATE TABLE refunds (
    id            INTEGER PRIMARY KEY,
    payment_ref   TEXT    NOT NULL UNIQUE,
    order_id      INTEGER REFERENCES orders (id),
    hold_id       INTEGER REFERENCES holds (id),
    amount_minor  INTEGER NOT NULL CHECK (amount_minor >= 0),
    currency      TEXT    NOT NULL CHECK (length(currency) = 3),
    reason        TEXT    NOT NULL CHECK (reason IN ('late', 'cancelled')),
    via           TEXT    NOT NULL CHECK (via IN ('provider', 'window')),
    created_at    INTEGER NOT NULL,
    done_at       INTEGER,
    provider_refund_id TEXT
) STRICT;

CREATE TABLE effects (
    subject       TEXT    NOT NULL,
    kind          TEXT    NOT NULL,
    claimed_at    INTEGER NOT NULL,
    done_at       INTEGER,
    target        TEXT,
    provider_key  TEXT    UNIQUE,
    provider_id   TEXT,
    PRIMARY KEY (subject, kind)
) STRICT, WITHOUT ROWID;
