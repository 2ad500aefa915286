-- 0012_door_log: the door's log, bounded, and its nonces tied to their codes.
--
-- A scan's nonce answers for the door that sent it (door_id: its token's
-- identity, the first 16 hex digits of the token's SHA-256, never its name,
-- which a later token may take) and for the code it was sent with
-- (code_sha: the code's SHA-256): the same nonce with another code is
-- refused, not answered with the first scan's answer.
--
-- The log keeps a row for every scan that names a ticket; a code that
-- names none (forged, mistyped, another box's) is only counted, in
-- scan_minutes, with every other scan: per event, minute and door, the
-- admitted and the refused.  The door's counts are read there.  Maintenance
-- removes the log's rows scan_log_retention after their event (30 days);
-- the counts stay.

ALTER TABLE scans ADD COLUMN door_id TEXT CHECK (length(door_id) = 16);
ALTER TABLE scans ADD COLUMN code_sha TEXT CHECK (length(code_sha) = 64);
DROP INDEX scans_nonce;
CREATE UNIQUE INDEX scans_nonce ON scans (door_id, nonce) WHERE nonce IS NOT NULL;
CREATE INDEX scans_at ON scans (at);

CREATE TABLE scan_minutes (
    event_id INTEGER NOT NULL,                   -- 0: the code named no event
    minute   INTEGER NOT NULL,                   -- ms: the start of the minute
    device   TEXT    NOT NULL CHECK (length(device) BETWEEN 1 AND 220),
    admitted INTEGER NOT NULL DEFAULT 0,
    refused  INTEGER NOT NULL DEFAULT 0,
    last_at  INTEGER NOT NULL,                   -- the minute's last scan
    PRIMARY KEY (event_id, minute, device)
) STRICT;
INSERT INTO scan_minutes (event_id, minute, device, admitted, refused, last_at)
    SELECT coalesce(event_id, 0), at - at % 60000, device,
           sum(CASE WHEN outcome = 'admitted' THEN 1 ELSE 0 END),
           sum(CASE WHEN outcome = 'admitted' THEN 0 ELSE 1 END), max(at)
    FROM scans GROUP BY 1, 2, 3;
