-- 0008_shared_files (PostgreSQL): the PostgreSQL form of
-- schema/sqlite/0008_shared_files.sql.
--
-- What one box kept in files beside the database, kept in the database, so
-- that several boxes sharing one database share it: the file store's keys
-- and bytes (blob_store = db, the default here) and the SHA-256 of each API
-- token, never the token itself.

CREATE TABLE blobs (
    key        TEXT    NOT NULL PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 200),
    data       BYTEA   NOT NULL,
    bytes      BIGINT  NOT NULL CHECK (bytes >= 0),
    created_at BIGINT  NOT NULL
);

CREATE TABLE api_tokens (
    sha256     TEXT    NOT NULL PRIMARY KEY CHECK (length(sha256) = 64),
    name       TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    role       TEXT    NOT NULL DEFAULT 'operator' CHECK (role = 'operator'),
    created_at BIGINT  NOT NULL
);
