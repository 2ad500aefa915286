-- 0010_order_changes (PostgreSQL): the PostgreSQL form of
-- schema/sqlite/0010_order_changes.sql (orders that change, the scan log,
-- the minute-by-minute history); see that file for what each part is for.
--
-- Dialect.  PostgreSQL drops a UNIQUE constraint in place, so the tickets
-- table keeps its rows and gains its columns; the totals triggers are
-- plpgsql functions, AFTER row triggers: they read no table they count.
-- The capacity trigger now raises the generic raise_exception (P0001), which
-- db_pg.c reports as SD_REFUSED, as SQLite's RAISE(ABORT) is.

ALTER TABLE orders ADD COLUMN resends BIGINT NOT NULL DEFAULT 0;
ALTER TABLE orders ADD COLUMN cancelled_at BIGINT;

ALTER TABLE tickets ADD COLUMN scanned_by TEXT;
ALTER TABLE tickets ADD COLUMN cancelled_at BIGINT;
ALTER TABLE tickets ADD CONSTRAINT tickets_admitted_or_cancelled
    CHECK (scanned_at IS NULL OR cancelled_at IS NULL);
ALTER TABLE tickets DROP CONSTRAINT tickets_event_id_seat_no_key;
ALTER TABLE tickets DROP CONSTRAINT tickets_event_id_seat_label_key;
CREATE UNIQUE INDEX tickets_live_seat ON tickets (event_id, seat_no) WHERE cancelled_at IS NULL;
CREATE UNIQUE INDEX tickets_live_label ON tickets (event_id, seat_label)
    WHERE cancelled_at IS NULL;
CREATE INDEX tickets_seat ON tickets (event_id, seat_no);
CREATE INDEX tickets_freed ON tickets (event_id, seat_no) WHERE cancelled_at IS NOT NULL;

CREATE OR REPLACE FUNCTION tickets_within_capacity() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.seat_no > (SELECT capacity FROM events WHERE id = NEW.event_id) THEN
        RAISE EXCEPTION 'sold out' USING ERRCODE = 'raise_exception';
    END IF;
    RETURN NEW;
END;
$$;

ALTER TABLE event_totals ADD COLUMN admitted BIGINT NOT NULL DEFAULT 0;
ALTER TABLE event_totals ADD COLUMN cancelled BIGINT NOT NULL DEFAULT 0;
ALTER TABLE event_totals ADD COLUMN orders_cancelled BIGINT NOT NULL DEFAULT 0;
UPDATE event_totals SET admitted = (SELECT count(*) FROM tickets t
    WHERE t.event_id = event_totals.event_id AND t.scanned_at IS NOT NULL);

-- a ticket inserted admitted or cancelled (stagedoor migrate copies such
-- rows) counts as such; a deleted one takes its admission and its
-- cancellation with it
CREATE OR REPLACE FUNCTION event_totals_ticket_in() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.pdf_key IS NOT NULL THEN
        PERFORM 1 FROM event_totals WHERE event_id = NEW.event_id FOR UPDATE;
    END IF;
    UPDATE event_totals SET tickets = tickets + 1,
        tickets_pdf = tickets_pdf + CASE WHEN NEW.pdf_key IS NOT NULL THEN 1 ELSE 0 END,
        pdfs = pdfs + CASE WHEN NEW.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = NEW.order_id AND pdf_key = NEW.pdf_key AND id <> NEW.id)
            THEN 1 ELSE 0 END,
        admitted = admitted + CASE WHEN NEW.scanned_at IS NOT NULL THEN 1 ELSE 0 END,
        cancelled = cancelled + CASE WHEN NEW.cancelled_at IS NOT NULL THEN 1 ELSE 0 END
    WHERE event_id = NEW.event_id;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE FUNCTION event_totals_order_in() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE event_totals SET orders = orders + 1,
        orders_cancelled = orders_cancelled
            + CASE WHEN NEW.cancelled_at IS NOT NULL THEN 1 ELSE 0 END
    WHERE event_id = NEW.event_id;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION event_totals_order_out() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE event_totals SET orders = orders - 1,
        orders_cancelled = orders_cancelled
            - CASE WHEN OLD.cancelled_at IS NOT NULL THEN 1 ELSE 0 END
    WHERE event_id = OLD.event_id;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE FUNCTION event_totals_ticket_out() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF OLD.pdf_key IS NOT NULL THEN
        PERFORM 1 FROM event_totals WHERE event_id = OLD.event_id FOR UPDATE;
    END IF;
    UPDATE event_totals SET tickets = tickets - 1,
        tickets_pdf = tickets_pdf - CASE WHEN OLD.pdf_key IS NOT NULL THEN 1 ELSE 0 END,
        pdfs = pdfs - CASE WHEN OLD.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = OLD.order_id AND pdf_key = OLD.pdf_key AND id <> OLD.id)
            THEN 1 ELSE 0 END,
        admitted = admitted - CASE WHEN OLD.scanned_at IS NOT NULL THEN 1 ELSE 0 END,
        cancelled = cancelled - CASE WHEN OLD.cancelled_at IS NOT NULL THEN 1 ELSE 0 END
    WHERE event_id = OLD.event_id;
    RETURN OLD;
END;
$$;

CREATE FUNCTION event_totals_ticket_state() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE event_totals SET
        admitted = admitted + CASE WHEN NEW.scanned_at IS NOT NULL THEN 1 ELSE 0 END
            - CASE WHEN OLD.scanned_at IS NOT NULL THEN 1 ELSE 0 END,
        cancelled = cancelled + CASE WHEN NEW.cancelled_at IS NOT NULL THEN 1 ELSE 0 END
            - CASE WHEN OLD.cancelled_at IS NOT NULL THEN 1 ELSE 0 END
    WHERE event_id = NEW.event_id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER event_totals_ticket_state AFTER UPDATE OF scanned_at, cancelled_at ON tickets
FOR EACH ROW WHEN ((OLD.scanned_at IS NULL) <> (NEW.scanned_at IS NULL)
                   OR (OLD.cancelled_at IS NULL) <> (NEW.cancelled_at IS NULL))
EXECUTE FUNCTION event_totals_ticket_state();

CREATE FUNCTION event_totals_order_cancel() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE event_totals SET orders_cancelled = orders_cancelled
        + CASE WHEN NEW.cancelled_at IS NOT NULL THEN 1 ELSE 0 END
        - CASE WHEN OLD.cancelled_at IS NOT NULL THEN 1 ELSE 0 END
    WHERE event_id = NEW.event_id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER event_totals_order_cancel AFTER UPDATE OF cancelled_at ON orders
FOR EACH ROW WHEN ((OLD.cancelled_at IS NULL) <> (NEW.cancelled_at IS NULL))
EXECUTE FUNCTION event_totals_order_cancel();

CREATE INDEX orders_event_time ON orders (event_id, created_at);
-- the box office finds an order by its buyer's address, any case
CREATE INDEX orders_email ON orders (lower(buyer_email));

CREATE TABLE order_changes (
    id       BIGINT  GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    order_id BIGINT  NOT NULL REFERENCES orders (id),
    at       BIGINT  NOT NULL,
    kind     TEXT    NOT NULL CHECK (kind IN ('resend', 'email', 'cancel')),
    actor    TEXT    NOT NULL CHECK (length(actor) BETWEEN 1 AND 220),
    detail   TEXT
);
CREATE INDEX order_changes_order ON order_changes (order_id);

CREATE TABLE scans (
    id        BIGINT  GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    at        BIGINT  NOT NULL,
    event_id  BIGINT  REFERENCES events (id),
    ticket_id BIGINT  REFERENCES tickets (id),
    outcome   TEXT    NOT NULL CHECK (outcome IN ('admitted', 'already_scanned', 'invalid',
                                                  'wrong_event', 'doors_closed', 'cancelled')),
    device    TEXT    NOT NULL CHECK (length(device) BETWEEN 1 AND 220),
    nonce     TEXT    CHECK (length(nonce) BETWEEN 1 AND 100),
    answer    TEXT    NOT NULL
);
CREATE UNIQUE INDEX scans_nonce ON scans (device, nonce) WHERE nonce IS NOT NULL;
CREATE INDEX scans_event ON scans (event_id, at);

-- Where an effect goes, fixed by its first attempt: an email's address.  A
-- retry of that email (its first attempt may have reached the provider,
-- unknown to the box) must send the same request under the same key, or the
-- provider refuses it; an address changed meanwhile reaches the emails
-- attempted after the change.  NULL for rows made before: the order's
-- address then.
ALTER TABLE email_sends ADD COLUMN target TEXT;

ALTER TABLE done_totals ADD COLUMN failed BIGINT NOT NULL DEFAULT 0;

CREATE TABLE queue_history (
    slot      BIGINT  PRIMARY KEY CHECK (slot BETWEEN 0 AND 59),
    minute    BIGINT  NOT NULL,
    ready     BIGINT  NOT NULL,
    scheduled BIGINT  NOT NULL,
    leased    BIGINT  NOT NULL,
    dead      BIGINT  NOT NULL,
    done      BIGINT  NOT NULL,
    failed    BIGINT  NOT NULL
);
