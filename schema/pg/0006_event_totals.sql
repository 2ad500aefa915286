-- 0006_event_totals (PostgreSQL): the PostgreSQL form of schema/sqlite/0006_event_totals.sql.
--
-- What the reads count, kept as the rows change.
--
-- GET /v1/stats, /metrics, the event views and an event's summary used to
-- count orders, tickets and email_sends on every request, so their cost grew
-- with every order ever sold.  They read this table instead: one row per
-- event, moved by the triggers below in the very statement (so the very
-- transaction) that makes the change it counts, whichever code path makes it.
-- The box's totals are the sum over its events.  Seeded here from the rows
-- that exist; `stagedoor check` holds it against a full count.
--
-- An order's and a ticket's event_id and an email_sends row's order_id and
-- kind never change after the insert, so no trigger follows them.
--
-- Dialect.  Each SQLite trigger is a plpgsql function of the same name and a
-- FOR EACH ROW trigger; a 0/1 from (x IS NOT NULL) is a CASE, IS NOT is IS
-- DISTINCT FROM, a WHEN with a subquery (not allowed here) is an IF in the
-- body.  The functions' search_path is the schema they were made in, as a
-- SQLite trigger reads its own database.
--
-- The three ticket triggers fire BEFORE the row changes, not AFTER as in
-- SQLite.  A SQLite row trigger runs as each row changes, so it sees the rows
-- its statement changed before this one and not those after it: that is how
-- "the others of one UPDATE already see" the first ticket of an order to get
-- a PDF key, and how a DELETE of an order's tickets takes the key away once.
-- A PostgreSQL AFTER row trigger runs when its whole statement is done and
-- sees every row of it (each of two tickets would see the other's key: no
-- pdf counted at all), while a BEFORE row trigger sees the rows changed
-- before this one and this row still unchanged: SQLite's view, but for this
-- row, which the tests below leave out by id.  (Caveat: a BEFORE INSERT
-- trigger also runs for a row that INSERT ... ON CONFLICT then skips; nothing
-- inserts tickets with ON CONFLICT.)  The orders, events and email_sends
-- triggers read no table they count, so they stay AFTER, where a row an
-- ON CONFLICT skips or turns into an update fires only what it became.
--
-- Boxes share a PostgreSQL database and write at once (READ COMMITTED), which
-- a SQLite file never does: two transactions giving one order's tickets the
-- same key, or deleting them, would each miss the other's uncommitted row.  A
-- ticket trigger that tests for other holders of a key therefore locks the
-- event's event_totals row first (as its UPDATE would anyway), and tests in
-- the next statement, whose snapshot has every transaction that held it.

CREATE TABLE event_totals (
    event_id    BIGINT  PRIMARY KEY REFERENCES events (id),
                                          -- an event's id given by value: no identity
    orders      BIGINT  NOT NULL DEFAULT 0,   -- orders rows
    tickets     BIGINT  NOT NULL DEFAULT 0,   -- tickets rows
    tickets_pdf BIGINT  NOT NULL DEFAULT 0,   -- of which pdf_key is set
    pdfs        BIGINT  NOT NULL DEFAULT 0,   -- distinct (order, pdf_key): the key names its order
    emails_sent BIGINT  NOT NULL DEFAULT 0    -- email_sends of kind tickets with sent_at set
);

INSERT INTO event_totals (event_id, orders, tickets, tickets_pdf, pdfs, emails_sent)
SELECT e.id, coalesce(o.n, 0), coalesce(t.n, 0), coalesce(t.pdf, 0), coalesce(p.n, 0),
       coalesce(s.n, 0)
FROM events e
LEFT JOIN (SELECT event_id, count(*) AS n FROM orders GROUP BY event_id) o ON o.event_id = e.id
LEFT JOIN (SELECT event_id, count(*) AS n, count(pdf_key) AS pdf FROM tickets
           GROUP BY event_id) t ON t.event_id = e.id
LEFT JOIN (SELECT event_id, count(*) AS n FROM (SELECT DISTINCT event_id, order_id, pdf_key
           FROM tickets WHERE pdf_key IS NOT NULL) d GROUP BY event_id) p ON p.event_id = e.id
LEFT JOIN (SELECT o.event_id, count(*) AS n FROM email_sends es JOIN orders o ON o.id = es.order_id
           WHERE es.kind = 'tickets' AND es.sent_at IS NOT NULL GROUP BY o.event_id) s
       ON s.event_id = e.id;

CREATE FUNCTION event_totals_event() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO event_totals (event_id) VALUES (NEW.id);
    RETURN NULL;
END;
$$;
CREATE TRIGGER event_totals_event AFTER INSERT ON events
FOR EACH ROW EXECUTE FUNCTION event_totals_event();

CREATE FUNCTION event_totals_order_in() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE event_totals SET orders = orders + 1 WHERE event_id = NEW.event_id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER event_totals_order_in AFTER INSERT ON orders
FOR EACH ROW EXECUTE FUNCTION event_totals_order_in();

CREATE FUNCTION event_totals_order_out() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE event_totals SET orders = orders - 1 WHERE event_id = OLD.event_id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER event_totals_order_out AFTER DELETE ON orders
FOR EACH ROW EXECUTE FUNCTION event_totals_order_out();

-- A PDF key counts once per order: the first of the order's tickets to get it
-- adds it (the others of one UPDATE already see that one), the last to lose
-- it takes it away.  (BEFORE triggers: see the top of this file.)
CREATE FUNCTION event_totals_ticket_in() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.pdf_key IS NOT NULL THEN
        PERFORM 1 FROM event_totals WHERE event_id = NEW.event_id FOR UPDATE;
    END IF;
    UPDATE event_totals SET tickets = tickets + 1,
        tickets_pdf = tickets_pdf + CASE WHEN NEW.pdf_key IS NOT NULL THEN 1 ELSE 0 END,
        pdfs = pdfs + CASE WHEN NEW.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = NEW.order_id AND pdf_key = NEW.pdf_key AND id <> NEW.id)
            THEN 1 ELSE 0 END
    WHERE event_id = NEW.event_id;
    RETURN NEW;
END;
$$;
CREATE TRIGGER event_totals_ticket_in BEFORE INSERT ON tickets
FOR EACH ROW EXECUTE FUNCTION event_totals_ticket_in();

-- The deleted row is still there: it is left out by id.
CREATE FUNCTION event_totals_ticket_out() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF OLD.pdf_key IS NOT NULL THEN
        PERFORM 1 FROM event_totals WHERE event_id = OLD.event_id FOR UPDATE;
    END IF;
    UPDATE event_totals SET tickets = tickets - 1,
        tickets_pdf = tickets_pdf - CASE WHEN OLD.pdf_key IS NOT NULL THEN 1 ELSE 0 END,
        pdfs = pdfs - CASE WHEN OLD.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = OLD.order_id AND pdf_key = OLD.pdf_key AND id <> OLD.id)
            THEN 1 ELSE 0 END
    WHERE event_id = OLD.event_id;
    RETURN OLD;
END;
$$;
CREATE TRIGGER event_totals_ticket_out BEFORE DELETE ON tickets
FOR EACH ROW EXECUTE FUNCTION event_totals_ticket_out();

-- The updated row still holds its old key: the old key's test leaves it out
-- by id (its old key is not its new one, so the new key's test never sees it).
CREATE FUNCTION event_totals_ticket_pdf() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM 1 FROM event_totals WHERE event_id = NEW.event_id FOR UPDATE;
    UPDATE event_totals SET
        tickets_pdf = tickets_pdf + CASE WHEN NEW.pdf_key IS NOT NULL THEN 1 ELSE 0 END
            - CASE WHEN OLD.pdf_key IS NOT NULL THEN 1 ELSE 0 END,
        pdfs = pdfs + CASE WHEN NEW.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = NEW.order_id AND pdf_key = NEW.pdf_key AND id <> NEW.id)
            THEN 1 ELSE 0 END
            - CASE WHEN OLD.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = OLD.order_id AND pdf_key = OLD.pdf_key AND id <> OLD.id)
            THEN 1 ELSE 0 END
    WHERE event_id = NEW.event_id;
    RETURN NEW;
END;
$$;
CREATE TRIGGER event_totals_ticket_pdf BEFORE UPDATE OF pdf_key ON tickets
FOR EACH ROW WHEN (OLD.pdf_key IS DISTINCT FROM NEW.pdf_key)
EXECUTE FUNCTION event_totals_ticket_pdf();

CREATE FUNCTION event_totals_email_in() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE event_totals SET emails_sent = emails_sent + 1
    WHERE event_id = (SELECT event_id FROM orders WHERE id = NEW.order_id);
    RETURN NULL;
END;
$$;
CREATE TRIGGER event_totals_email_in AFTER INSERT ON email_sends
FOR EACH ROW WHEN (NEW.kind = 'tickets' AND NEW.sent_at IS NOT NULL)
EXECUTE FUNCTION event_totals_email_in();

CREATE FUNCTION event_totals_email_sent() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE event_totals SET emails_sent = emails_sent
        + CASE WHEN NEW.sent_at IS NOT NULL THEN 1 ELSE 0 END
        - CASE WHEN OLD.sent_at IS NOT NULL THEN 1 ELSE 0 END
    WHERE event_id = (SELECT event_id FROM orders WHERE id = NEW.order_id);
    RETURN NULL;
END;
$$;
CREATE TRIGGER event_totals_email_sent AFTER UPDATE OF sent_at ON email_sends
FOR EACH ROW WHEN (NEW.kind = 'tickets' AND (OLD.sent_at IS NULL) <> (NEW.sent_at IS NULL))
EXECUTE FUNCTION event_totals_email_sent();

CREATE FUNCTION event_totals_email_out() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE event_totals SET emails_sent = emails_sent - 1
    WHERE event_id = (SELECT event_id FROM orders WHERE id = OLD.order_id);
    RETURN NULL;
END;
$$;
CREATE TRIGGER event_totals_email_out AFTER DELETE ON email_sends
FOR EACH ROW WHEN (OLD.kind = 'tickets' AND OLD.sent_at IS NOT NULL)
EXECUTE FUNCTION event_totals_email_out();
