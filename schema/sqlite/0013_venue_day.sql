-- 0013_venue_day: events with a life, and sales at the window.
--
-- An event's sales can be closed (closed_at: no order is taken from then
-- on; its doors still admit the tickets sold).  An order records how it
-- was paid when the box office took the money (payment: 'cash' or 'card'
-- at the window; NULL: not recorded, as an order from another program),
-- and a walk-up buyer at the window may give no email address
-- (buyer_email NULL: the tickets are printed or shown there, and no ticket
-- email is owed until an address is given).
--
-- SQLite cannot drop a NOT NULL constraint, so orders is rebuilt under the
-- same name with the same rows, ids, indexes and triggers, by SQLite's own
-- procedure: the runner turns foreign keys off for a migration and checks
-- them all before its commit (db.c), and the rename leaves the other
-- tables' triggers as they are (legacy_alter_table, restored at the end).

ALTER TABLE events ADD COLUMN closed_at INTEGER;

PRAGMA legacy_alter_table = ON;

CREATE TABLE orders_0013 (
    id              INTEGER PRIMARY KEY,
    public_id       TEXT    NOT NULL UNIQUE,       -- what buyers and tools see
    event_id        INTEGER NOT NULL REFERENCES events (id),
    buyer_name      TEXT    NOT NULL CHECK (length(buyer_name) BETWEEN 1 AND 200),
    buyer_email     TEXT    CHECK (length(buyer_email) BETWEEN 3 AND 254),  -- NULL: walk-up
    seats           INTEGER NOT NULL CHECK (seats BETWEEN 1 AND 100),
    idempotency_key TEXT    UNIQUE,                -- the client's key, if it gave one
    created_at      INTEGER NOT NULL,
    resends         INTEGER NOT NULL DEFAULT 0,
    cancelled_at    INTEGER,
    payment         TEXT    CHECK (length(payment) BETWEEN 1 AND 32)
) STRICT;
INSERT INTO orders_0013 (id, public_id, event_id, buyer_name, buyer_email, seats,
                         idempotency_key, created_at, resends, cancelled_at)
    SELECT id, public_id, event_id, buyer_name, buyer_email, seats, idempotency_key,
           created_at, resends, cancelled_at FROM orders;
DROP TABLE orders;
ALTER TABLE orders_0013 RENAME TO orders;

CREATE INDEX orders_event_time ON orders (event_id, created_at);
CREATE INDEX orders_email ON orders (lower(buyer_email));

CREATE TRIGGER event_totals_order_in AFTER INSERT ON orders
BEGIN
    UPDATE event_totals SET orders = orders + 1,
        orders_cancelled = orders_cancelled + (NEW.cancelled_at IS NOT NULL)
    WHERE event_id = NEW.event_id;
END;
CREATE TRIGGER event_totals_order_out AFTER DELETE ON orders
BEGIN
    UPDATE event_totals SET orders = orders - 1,
        orders_cancelled = orders_cancelled - (OLD.cancelled_at IS NOT NULL)
    WHERE event_id = OLD.event_id;
END;
CREATE TRIGGER event_totals_order_cancel AFTER UPDATE OF cancelled_at ON orders
WHEN (OLD.cancelled_at IS NULL) <> (NEW.cancelled_at IS NULL)
BEGIN
    UPDATE event_totals SET orders_cancelled = orders_cancelled
        + (NEW.cancelled_at IS NOT NULL) - (OLD.cancelled_at IS NOT NULL)
    WHERE event_id = NEW.event_id;
END;

PRAGMA legacy_alter_table = OFF;
