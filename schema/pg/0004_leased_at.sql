-- 0004_leased_at (PostgreSQL): the PostgreSQL form of schema/sqlite/0004_leased_at.sql.
--
-- When the current lease was taken, for the dashboard's lease age.  A claim
-- (and a reclaim after expiry) sets it to the claim's time; an extend keeps it
-- (the age runs from the claim); release, retry_later and a retried fail clear
-- it with the token.  NULL unless leased.

ALTER TABLE stream ADD COLUMN leased_at BIGINT;
