-- 0006_event_totals: what the reads count, kept as the rows change.
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

CREATE TABLE event_totals (
    event_id    INTEGER PRIMARY KEY REFERENCES events (id),
    orders      INTEGER NOT NULL DEFAULT 0,   -- orders rows
    tickets     INTEGER NOT NULL DEFAULT 0,   -- tickets rows
    tickets_pdf INTEGER NOT NULL DEFAULT 0,   -- of which pdf_key is set
    pdfs        INTEGER NOT NULL DEFAULT 0,   -- distinct (order, pdf_key): the key names its order
    emails_sent INTEGER NOT NULL DEFAULT 0    -- email_sends of kind tickets with sent_at set
) STRICT;

INSERT INTO event_totals (event_id, orders, tickets, tickets_pdf, pdfs, emails_sent)
SELECT e.id, coalesce(o.n, 0), coalesce(t.n, 0), coalesce(t.pdf, 0), coalesce(p.n, 0),
       coalesce(s.n, 0)
FROM events e
LEFT JOIN (SELECT event_id, count(*) AS n FROM orders GROUP BY event_id) o ON o.event_id = e.id
LEFT JOIN (SELECT event_id, count(*) AS n, count(pdf_key) AS pdf FROM tickets
           GROUP BY event_id) t ON t.event_id = e.id
LEFT JOIN (SELECT event_id, count(*) AS n FROM (SELECT DISTINCT event_id, order_id, pdf_key
           FROM tickets WHERE pdf_key IS NOT NULL) GROUP BY event_id) p ON p.event_id = e.id
LEFT JOIN (SELECT o.event_id, count(*) AS n FROM email_sends es JOIN orders o ON o.id = es.order_id
           WHERE es.kind = 'tickets' AND es.sent_at IS NOT NULL GROUP BY o.event_id) s
       ON s.event_id = e.id;

CREATE TRIGGER event_totals_event AFTER INSERT ON events
BEGIN
    INSERT INTO event_totals (event_id) VALUES (NEW.id);
END;

CREATE TRIGGER event_totals_order_in AFTER INSERT ON orders
BEGIN
    UPDATE event_totals SET orders = orders + 1 WHERE event_id = NEW.event_id;
END;

CREATE TRIGGER event_totals_order_out AFTER DELETE ON orders
BEGIN
    UPDATE event_totals SET orders = orders - 1 WHERE event_id = OLD.event_id;
END;

-- A PDF key counts once per order: the first of the order's tickets to get it
-- adds it (the others of one UPDATE already see that one), the last to lose
-- it takes it away.
CREATE TRIGGER event_totals_ticket_in AFTER INSERT ON tickets
BEGIN
    UPDATE event_totals SET tickets = tickets + 1,
        tickets_pdf = tickets_pdf + (NEW.pdf_key IS NOT NULL),
        pdfs = pdfs + (NEW.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = NEW.order_id AND pdf_key = NEW.pdf_key AND id <> NEW.id))
    WHERE event_id = NEW.event_id;
END;

CREATE TRIGGER event_totals_ticket_out AFTER DELETE ON tickets
BEGIN
    UPDATE event_totals SET tickets = tickets - 1,
        tickets_pdf = tickets_pdf - (OLD.pdf_key IS NOT NULL),
        pdfs = pdfs - (OLD.pdf_key IS NOT NULL AND NOT EXISTS (SELECT 1 FROM tickets
            WHERE order_id = OLD.order_id AND pdf_key = OLD.pdf_key))
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

CREATE TRIGGER event_totals_email_in AFTER INSERT ON email_sends
WHEN NEW.kind = 'tickets' AND NEW.sent_at IS NOT NULL
BEGIN
    UPDATE event_totals SET emails_sent = emails_sent + 1
    WHERE event_id = (SELECT event_id FROM orders WHERE id = NEW.order_id);
END;

CREATE TRIGGER event_totals_email_sent AFTER UPDATE OF sent_at ON email_sends
WHEN NEW.kind = 'tickets' AND (OLD.sent_at IS NULL) <> (NEW.sent_at IS NULL)
BEGIN
    UPDATE event_totals SET emails_sent = emails_sent + (NEW.sent_at IS NOT NULL)
        - (OLD.sent_at IS NOT NULL)
    WHERE event_id = (SELECT event_id FROM orders WHERE id = NEW.order_id);
END;

CREATE TRIGGER event_totals_email_out AFTER DELETE ON email_sends
WHEN OLD.kind = 'tickets' AND OLD.sent_at IS NOT NULL
BEGIN
    UPDATE event_totals SET emails_sent = emails_sent - 1
    WHERE event_id = (SELECT event_id FROM orders WHERE id = OLD.order_id);
END;
