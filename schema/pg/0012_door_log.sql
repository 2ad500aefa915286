-- 0012_door_log: the door's log, bounded, and its nonces tied to their codes
-- (schema/sqlite/0012_door_log.sql says why and how).

ALTER TABLE scans ADD COLUMN door_id TEXT CHECK (length(door_id) = 16);
ALTER TABLE scans ADD COLUMN code_sha TEXT CHECK (length(code_sha) = 64);
DROP INDEX scans_nonce;
CREATE UNIQUE INDEX scans_nonce ON scans (door_id, nonce) WHERE nonce IS NOT NULL;
CREATE INDEX scans_at ON scans (at);

CREATE TABLE scan_minutes (
    event_id BIGINT  NOT NULL,
    minute   BIGINT  NOT NULL,
    device   TEXT    NOT NULL CHECK (length(device) BETWEEN 1 AND 220),
    admitted BIGINT  NOT NULL DEFAULT 0,
    refused  BIGINT  NOT NULL DEFAULT 0,
    last_at  BIGINT  NOT NULL,
    PRIMARY KEY (event_id, minute, device)
);
INSERT INTO scan_minutes (event_id, minute, device, admitted, refused, last_at)
    SELECT coalesce(event_id, 0), at - at % 60000, device,
           sum(CASE WHEN outcome = 'admitted' THEN 1 ELSE 0 END),
           sum(CASE WHEN outcome = 'admitted' THEN 0 ELSE 1 END), max(at)
    FROM scans GROUP BY 1, 2, 3;
