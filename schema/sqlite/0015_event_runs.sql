-- 0015_event_runs: a whole event at once.
--
-- An event may be cancelled (cancelled_at, cancel_reason: its sales stop and
-- its doors refuse) or moved (a new start or venue on a sold event:
-- change_no counts those changes, and names the PDFs and emails of each).
-- reminders: 0 when its buyers get no reminder email.
--
-- event_runs: one whole-event change and its fan-out.  The parent job walks
-- the event's live orders by id, and each batch of children it queues
-- commits with the cursor it reached (cursor_order: the last order id queued) and
-- the count (orders), so a crash resumes from the cursor and queues no
-- child twice.  The other counts move in the children's own transactions,
-- each with the row of event_run_orders it changes, so they are what the
-- rows say: done (a child finished), refunded (through the provider),
-- at_window (owed back at the box office), emailed (the buyer's email marked
-- sent), failed (a child that could not do its work: an order with a ticket
-- already admitted, a refund the provider refused).  enqueued_at: the
-- parent queued its last child; finished_at: every child is done.
--
-- event_run_orders: one row per child (run, order), its step: queued,
-- cancelled (a cancel's order is cancelled, its refund owed), refunded
-- (nothing left to pay back through the provider), done (the email is
-- queued), skipped (nothing to do: cancelled before, or superseded by a
-- later move), failed.  emailed: 1 once the child's email is marked sent.
--
-- refunds.provider_key: the key the provider gets for the refund
-- (refund-<order public id> for a cancelled order's); NULL for a row made
-- before this schema, whose key is refund-<payment_ref>.

ALTER TABLE events ADD COLUMN cancelled_at INTEGER;
ALTER TABLE events ADD COLUMN cancel_reason TEXT CHECK (length(cancel_reason) <= 200);
ALTER TABLE events ADD COLUMN change_no INTEGER NOT NULL DEFAULT 0 CHECK (change_no >= 0);
ALTER TABLE events ADD COLUMN reminders INTEGER NOT NULL DEFAULT 1 CHECK (reminders IN (0, 1));

ALTER TABLE refunds ADD COLUMN provider_key TEXT;
CREATE UNIQUE INDEX refunds_provider_key ON refunds (provider_key);
CREATE UNIQUE INDEX refunds_order ON refunds (order_id);

-- the parent's walk of an event's orders by id
CREATE INDEX orders_event_id ON orders (event_id, id);

CREATE TABLE event_runs (
    id            INTEGER PRIMARY KEY,
    event_id      INTEGER NOT NULL REFERENCES events (id),
    kind          TEXT    NOT NULL CHECK (kind IN ('cancel', 'move')),
    change_no     INTEGER NOT NULL,
    actor         TEXT    NOT NULL CHECK (length(actor) BETWEEN 1 AND 220),
    reason        TEXT    CHECK (length(reason) <= 200),
    old_starts_at INTEGER,
    old_venue     TEXT,
    created_at    INTEGER NOT NULL,
    cursor_order  INTEGER NOT NULL DEFAULT 0,
    enqueued_at   INTEGER,
    finished_at   INTEGER,
    orders        INTEGER NOT NULL DEFAULT 0,
    done          INTEGER NOT NULL DEFAULT 0,
    refunded      INTEGER NOT NULL DEFAULT 0,
    at_window     INTEGER NOT NULL DEFAULT 0,
    emailed       INTEGER NOT NULL DEFAULT 0,
    failed        INTEGER NOT NULL DEFAULT 0,
    UNIQUE (event_id, kind, change_no)
) STRICT;

CREATE TABLE event_run_orders (
    run_id        INTEGER NOT NULL REFERENCES event_runs (id),
    order_id      INTEGER NOT NULL REFERENCES orders (id),
    step          TEXT    NOT NULL DEFAULT 'queued'
                  CHECK (step IN ('queued', 'cancelled', 'refunded', 'done', 'skipped',
                                  'failed')),
    emailed       INTEGER NOT NULL DEFAULT 0 CHECK (emailed IN (0, 1)),
    detail        TEXT    CHECK (length(detail) <= 200),
    PRIMARY KEY (run_id, order_id)
) STRICT, WITHOUT ROWID;
