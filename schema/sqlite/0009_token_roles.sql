-- 0009_token_roles: API tokens with a role, a name to revoke them by, an
-- optional event (a door's), an expiry, and when each was last used.
--
-- Roles: operator (everything), box_office (events read, orders, PDFs),
-- door (scans, and its event's counts), monitor (/metrics, /healthz,
-- /v1/stats).  Only a door token may be bound to an event.  A revoked token
-- keeps its row (token ls --all shows it) and its name is free again: the
-- names of live tokens are unique.  The bootstrap tokens (api.token on each
-- box) get their SHA-256's first 8 digits in their names, so that two boxes
-- on one host keep two names.

CREATE TABLE api_tokens_0009 (
    sha256       TEXT    NOT NULL PRIMARY KEY CHECK (length(sha256) = 64),
    name         TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    role         TEXT    NOT NULL CHECK (role IN ('operator', 'box_office', 'door', 'monitor')),
    event_id     INTEGER REFERENCES events (id),
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    last_used_at INTEGER,
    revoked_at   INTEGER,
    CHECK (event_id IS NULL OR role = 'door')
);

INSERT INTO api_tokens_0009 (sha256, name, role, created_at)
    SELECT sha256, substr(name, 1, 190) || ' ' || substr(sha256, 1, 8), role, created_at
    FROM api_tokens;

DROP TABLE api_tokens;
ALTER TABLE api_tokens_0009 RENAME TO api_tokens;

CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;
