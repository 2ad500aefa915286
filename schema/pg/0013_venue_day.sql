-- 0013_venue_day: events with a life, and sales at the window
-- (schema/sqlite/0013_venue_day.sql says why).

ALTER TABLE events ADD COLUMN closed_at BIGINT;
ALTER TABLE orders ALTER COLUMN buyer_email DROP NOT NULL;
ALTER TABLE orders ADD COLUMN payment TEXT CHECK (length(payment) BETWEEN 1 AND 32);
