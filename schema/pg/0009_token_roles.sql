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

ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens ALTER COLUMN role DROP DEFAULT;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check
    CHECK (role IN ('operator', 'box_office', 'door', 'monitor'));
ALTER TABLE api_tokens ADD COLUMN event_id BIGINT REFERENCES events (id);
ALTER TABLE api_tokens ADD COLUMN expires_at BIGINT;
ALTER TABLE api_tokens ADD COLUMN last_used_at BIGINT;
ALTER TABLE api_tokens ADD COLUMN revoked_at BIGINT;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_event_door
    CHECK (event_id IS NULL OR role = 'door');

UPDATE api_tokens SET name = substr(name, 1, 190) || ' ' || substr(sha256, 1, 8);

CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;
