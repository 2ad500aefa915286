-- 0020_shop_line: the shop's waiting line.
--
-- Unpaid holds may take only a share of an event's seats (shop_unpaid_share);
-- a buyer who comes when that share is taken, or while others wait, gets a
-- place in line instead of a hold, and places are served in the order they
-- came (id).  A place is a lease, as a hold is: the buyer's page renews it
-- (present_until) while it is open, and a place whose lease ran out counts
-- for nothing from that millisecond on, with no sweeper.  The place at the
-- head of the line gets its hold, in the transaction that finds it at the
-- head with room, when its page comes back (hold_id: the hold it got;
-- left_at: it got one, or left: sold out, sales closed, its lease ran out,
-- or its client's holds elsewhere took the cap it needed).
-- link is the buyer's unguessable address of their place (/w/<link>), as a
-- hold's is; client and client_net count against the caps on unpaid holds.
-- hold_id names a hold without a foreign key: maintenance prunes holds and
-- places on their own.

CREATE TABLE shop_line (
    id            INTEGER PRIMARY KEY,
    event_id      INTEGER NOT NULL REFERENCES events (id),
    link          TEXT    NOT NULL UNIQUE,
    seats         INTEGER NOT NULL CHECK (seats BETWEEN 1 AND 100),
    buyer_name    TEXT    NOT NULL CHECK (length(buyer_name) BETWEEN 1 AND 200),
    buyer_email   TEXT    NOT NULL CHECK (length(buyer_email) BETWEEN 3 AND 254),
    client        TEXT    NOT NULL CHECK (length(client) BETWEEN 1 AND 64),
    client_net    TEXT    NOT NULL CHECK (length(client_net) BETWEEN 1 AND 64),
    joined_at     INTEGER NOT NULL,
    present_until INTEGER NOT NULL,
    hold_id       INTEGER UNIQUE,
    left_at       INTEGER,
    left_why      TEXT    CHECK (left_why IN ('hold', 'sold_out', 'closed', 'gone', 'limited'))
) STRICT;
-- the places ahead of one, and the line's length: present ones only
CREATE INDEX shop_line_waiting ON shop_line (event_id, id, present_until, seats) WHERE left_at IS NULL;
CREATE INDEX shop_line_client ON shop_line (client, present_until) WHERE left_at IS NULL;
CREATE INDEX shop_line_net ON shop_line (client_net, present_until) WHERE left_at IS NULL;
CREATE INDEX shop_line_joined ON shop_line (joined_at);
