-- 0002_tickets: events, orders, tickets, and the tables of the idempotency
-- techniques (email_sends, processed_jobs) with the sales counters they
-- protect.  Money-side facts (orders, tickets) are written in FULL-durability
-- transactions by the intake; handlers only fill in pdf_key, email_sends and
-- the counters.

CREATE TABLE events (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    venue       TEXT    NOT NULL CHECK (length(venue) BETWEEN 1 AND 200),
    starts_at   INTEGER NOT NULL,                  -- ms since the epoch, UTC
    capacity    INTEGER NOT NULL CHECK (capacity BETWEEN 1 AND 1000000),
    created_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE orders (
    id              INTEGER PRIMARY KEY,
    public_id       TEXT    NOT NULL UNIQUE,       -- what buyers and tools see
    event_id        INTEGER NOT NULL REFERENCES events (id),
    buyer_name      TEXT    NOT NULL CHECK (length(buyer_name) BETWEEN 1 AND 200),
    buyer_email     TEXT    NOT NULL CHECK (length(buyer_email) BETWEEN 3 AND 254),
    seats           INTEGER NOT NULL CHECK (seats BETWEEN 1 AND 100),
    idempotency_key TEXT    UNIQUE,                -- the client's key, if it gave one
    created_at      INTEGER NOT NULL
) STRICT;

-- One row per seat.  Seat numbers are unique per event and bounded by the
-- event's capacity (the trigger), so overselling fails inside the order's own
-- write transaction, whatever any earlier read said.
CREATE TABLE tickets (
    id          INTEGER PRIMARY KEY,
    order_id    INTEGER NOT NULL REFERENCES orders (id),
    event_id    INTEGER NOT NULL REFERENCES events (id),
    seat_no     INTEGER NOT NULL CHECK (seat_no >= 1),
    seat_label  TEXT    NOT NULL,
    pdf_key     TEXT,                              -- NULL until the PDF is stored
    scanned_at  INTEGER,                           -- NULL until admitted at the door
    UNIQUE (event_id, seat_no),
    UNIQUE (event_id, seat_label)
) STRICT;
CREATE INDEX tickets_order ON tickets (order_id);

CREATE TRIGGER tickets_within_capacity BEFORE INSERT ON tickets
WHEN NEW.seat_no > (SELECT capacity FROM events WHERE id = NEW.event_id)
BEGIN
    SELECT RAISE(ABORT, 'sold out');
END;

-- Technique 2: one row per effect; the primary key is the unique constraint
-- that lets exactly one run own the send.
CREATE TABLE email_sends (
    order_id            INTEGER NOT NULL REFERENCES orders (id),
    kind                TEXT    NOT NULL,
    claimed_at          INTEGER NOT NULL,
    sent_at             INTEGER,
    provider_message_id TEXT,
    PRIMARY KEY (order_id, kind)
) STRICT;

-- Technique 4: the identity of each job whose effects are committed.
CREATE TABLE processed_jobs (
    job_id       TEXT    PRIMARY KEY,
    kind         TEXT    NOT NULL,
    processed_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE sales_counters (
    event_id   INTEGER PRIMARY KEY REFERENCES events (id),
    orders     INTEGER NOT NULL DEFAULT 0,
    seats_sold INTEGER NOT NULL DEFAULT 0
) STRICT;

-- An order's jobs are found through its outbox rows.
CREATE INDEX outbox_order ON outbox (json_extract(payload, '$.order_id'));
