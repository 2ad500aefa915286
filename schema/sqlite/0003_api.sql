-- 0003_api: the HTTP intake's client idempotency keys (POST /v1/orders).
--
-- One row per Idempotency-Key, written in the same transaction as the order,
-- its tickets and its outbox rows, so a key is stored exactly when its order
-- is.  A request with a stored key is answered from status and body, byte for
-- byte, when its body's SHA-256 equals request_hash, and refused otherwise.
-- Rows past expires_at are ignored and pruned (api_prune_keys).  The body is
-- the answer the client already received: buyer data, no secret.

CREATE TABLE api_keys (
    id           INTEGER PRIMARY KEY,
    key          TEXT    NOT NULL UNIQUE CHECK (length(key) BETWEEN 1 AND 200),
    request_hash TEXT    NOT NULL CHECK (length(request_hash) = 64),
    status       INTEGER NOT NULL CHECK (status BETWEEN 100 AND 599),
    body         TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX api_keys_expires ON api_keys (expires_at);
