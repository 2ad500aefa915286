-- 0010_order_changes: orders that change (resent, re-addressed, cancelled),
-- the door's scan log, and the minute-by-minute history the dashboard draws.
--
-- Orders.  An order counts its resends (resends: the n of the next resend's
-- intent, "tickets-<order id>-r<n>", is taken in the transaction that queues
-- it) and is cancelled once (cancelled_at).  Every change is a row of
-- order_changes: who made it (a token's name, or "cli") and why.
--
-- Tickets.  A cancelled ticket keeps its row (its code scans as cancelled
-- from then on) and gives its seat back: seat numbers and labels are unique
-- among the live tickets of an event only (partial unique indexes), so the
-- seat is sold again, once.  A ticket is admitted or cancelled, never both.
-- SQLite cannot drop a table's UNIQUE constraint, so the table is made again
-- (its triggers and indexes with it: 0002's capacity trigger and 0006's
-- totals triggers, unchanged).
--
-- Scans.  Every scan, admitted or not, with the door (its token's name) that
-- made it and the answer it got: a door that retries with the same nonce
-- gets the first answer again.
--
-- Totals.  event_totals also keeps admitted and cancelled tickets and
-- cancelled orders; done_totals counts failed attempts per kind;
-- queue_history keeps the last hour, one row a minute, as the maintenance
-- pass sees it (a ring of 60 rows: nothing grows).

ALTER TABLE orders ADD COLUMN resends INTEGER NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN cancelled_at INTEGER;

CREATE TABLE tickets_0010 (
    id           INTEGER PRIMARY KEY,
    order_id     INTEGER NOT NULL REFERENCES orders (id),
    event_id     INTEGER NOT NULL REFERENCES events (id),
    seat_no      INTEGER NOT NULL CHECK (seat_no >= 1),
    seat_label   TEXT    NOT NULL,
    pdf_key      TEXT,                              -- NULL until the PDF is stored
    scanned_at   INTEGER,                           -- NULL until admitted at the door
    scanned_by   TEXT,                              -- the door that admitted it
    cancelled_at INTEGER,                           -- NULL while the ticket is valid
    CHECK (scanned_at IS NULL OR cancelled_at IS NULL)
) STRICT;
INSERT INTO tickets_0010 (id, order_id, event_id, seat_no, seat_label, pdf_key, scanned_at)
    SELECT id, order_id, event_id, seat_no, seat_label, pdf_key, scanned_at FROM tickets;
DROP TABLE tickets;
ALTER TABLE tickets_0010 RENAME TO tickets;

CREATE INDEX tickets_order ON tickets (order_id);
CREATE UNIQUE INDEX tickets_live_seat ON tickets (event_id, seat_no) WHERE cancelled_at IS NULL;
CREATE UNIQUE INDEX tickets_live_label ON tickets (event_id, seat_label)
    WHERE cancelled_at IS NULL;
-- the highest seat ever given (live or not), and the seats given back
CREATE INDEX tickets_seat ON tickets (event_id, seat_no);
CREATE INDEX tickets_freed ON tickets (event_id, seat_no) WHERE cancelled_at IS NOT NULL;

CREATE TRIGGER tickets_within_capacity BEFORE INSERT ON tickets
WHEN NEW.seat_no > (SELECT capacity FROM events WHERE id = NEW.event_id)
BEGIN
    SELECT RAISE(ABORT, 'sold out');
END;

ALTER TABLE event_totals ADD COLUMN admitted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE event_totals ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE event_totals ADD COLUMN orders_cancelled INTEGER NOT NULL DEFAULT 0;
UPDATE event_totals SET admitted = (SELECT count(*) FROM tickets t
    WHERE t.event_id = event_totals.event_id AND t.scanned_at IS NOT NULL);

-- 0006's ticket triggers, and what a row inserted already admitted or
-- cancelled counts (stagedoor migrate copies such rows)
CREATE TRIGGER event_totals_ticket_in AFTER INSERT ON tickets
BEGIN
    UPDATE event_totals SET tickets = tickets + 1,
        tickets_pdf = tickets_pdf + (NEW.pdf_key IS NOT NULL),
        pdfs = pdfs + (NEW.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = NEW.order_id AND pdf_key = NEW.pdf_key AND id <> NEW.id)),
        admitted = admitted + (NEW.scanned_at IS NOT NULL),
        cancelled = cancelled + (NEW.cancelled_at IS NOT NULL)
    WHERE event_id = NEW.event_id;
END;

CREATE TRIGGER event_totals_ticket_out AFTER DELETE ON tickets
BEGIN
    UPDATE event_totals SET tickets = tickets - 1,
        tickets_pdf = tickets_pdf - (OLD.pdf_key IS NOT NULL),
        pdfs = pdfs - (OLD.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = OLD.order_id AND pdf_key = OLD.pdf_key)),
        admitted = admitted - (OLD.scanned_at IS NOT NULL),
        cancelled = cancelled - (OLD.cancelled_at IS NOT NULL)
    WHERE event_id = OLD.event_id;
END;

CREATE TRIGGER event_totals_ticket_pdf AFTER UPDATE OF pdf_key ON tickets
WHEN OLD.pdf_key IS NOT NEW.pdf_key
BEGIN
    UPDATE event_totals SET
        tickets_pdf = tickets_pdf + (NEW.pdf_key IS NOT NULL) - (OLD.pdf_key IS NOT NULL),
        pdfs = pdfs + (NEW.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = NEW.order_id AND pdf_key = NEW.pdf_key AND id <> NEW.id))
            - (OLD.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = OLD.order_id AND pdf_key = OLD.pdf_key))
    WHERE event_id = NEW.event_id;
END;

-- admitted at the door, or cancelled
CREATE TRIGGER event_totals_ticket_state AFTER UPDATE OF scanned_at, cancelled_at ON tickets
WHEN (OLD.scanned_at IS NULL) <> (NEW.scanned_at IS NULL)
  OR (OLD.cancelled_at IS NULL) <> (NEW.cancelled_at IS NULL)
BEGIN
    UPDATE event_totals SET
        admitted = admitted + (NEW.scanned_at IS NOT NULL) - (OLD.scanned_at IS NOT NULL),
        cancelled = cancelled + (NEW.cancelled_at IS NOT NULL) - (OLD.cancelled_at IS NOT NULL)
    WHERE event_id = NEW.event_id;
END;

DROP TRIGGER event_totals_order_in;
CREATE TRIGGER event_totals_order_in AFTER INSERT ON orders
BEGIN
    UPDATE event_totals SET orders = orders + 1,
        orders_cancelled = orders_cancelled + (NEW.cancelled_at IS NOT NULL)
    WHERE event_id = NEW.event_id;
END;

DROP TRIGGER event_totals_order_out;
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

-- sales per hour of an event, read by its index
CREATE INDEX orders_event_time ON orders (event_id, created_at);
-- the box office finds an order by its buyer's address, any case
CREATE INDEX orders_email ON orders (lower(buyer_email));

CREATE TABLE order_changes (
    id       INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders (id),
    at       INTEGER NOT NULL,
    kind     TEXT    NOT NULL CHECK (kind IN ('resend', 'email', 'cancel')),
    actor    TEXT    NOT NULL CHECK (length(actor) BETWEEN 1 AND 220),
    detail   TEXT                               -- resend: "r<n>"; email: the address
                                                -- before; cancel: the reason
) STRICT;
CREATE INDEX order_changes_order ON order_changes (order_id);

CREATE TABLE scans (
    id        INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    event_id  INTEGER REFERENCES events (id),   -- the door's event, else the ticket's;
                                                -- NULL: the code named no ticket
    ticket_id INTEGER REFERENCES tickets (id),
    outcome   TEXT    NOT NULL CHECK (outcome IN ('admitted', 'already_scanned', 'invalid',
                                                  'wrong_event', 'doors_closed', 'cancelled')),
    device    TEXT    NOT NULL CHECK (length(device) BETWEEN 1 AND 220),
    nonce     TEXT    CHECK (length(nonce) BETWEEN 1 AND 100),
    answer    TEXT    NOT NULL                  -- the answer as first given (JSON)
) STRICT;
CREATE UNIQUE INDEX scans_nonce ON scans (device, nonce) WHERE nonce IS NOT NULL;
CREATE INDEX scans_event ON scans (event_id, at);

-- Where an effect goes, fixed by its first attempt: an email's address.  A
-- retry of that email (its first attempt may have reached the provider,
-- unknown to the box) must send the same request under the same key, or the
-- provider refuses it; an address changed meanwhile reaches the emails
-- attempted after the change.  NULL for rows made before: the order's
-- address then.
ALTER TABLE email_sends ADD COLUMN target TEXT;

ALTER TABLE done_totals ADD COLUMN failed INTEGER NOT NULL DEFAULT 0;

CREATE TABLE queue_history (
    slot      INTEGER PRIMARY KEY CHECK (slot BETWEEN 0 AND 59),  -- the minute of the hour
    minute    INTEGER NOT NULL,                 -- ms: the start of that minute
    ready     INTEGER NOT NULL,
    scheduled INTEGER NOT NULL,
    leased    INTEGER NOT NULL,
    dead      INTEGER NOT NULL,
    done      INTEGER NOT NULL,                 -- jobs done so far (done_totals), then
    failed    INTEGER NOT NULL                  -- failed attempts so far, then
) STRICT;
