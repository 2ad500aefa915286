-- 0008_shared_files: what one box kept in files beside the database, kept
-- in the database, so that several boxes sharing one database share it.
--
-- blobs: the file store's keys and bytes (blob_store = db; the default on
-- PostgreSQL).  A key is written once with its bytes; a second put of the
-- same key writes the same bytes (the render's second run), so the row is
-- replaced, never appended to.
--
-- api_tokens: the SHA-256 of each API token, never the token itself.  The
-- token file <state dir>/api.token is the operator's copy of one of them;
-- any box that shares the database admits it.

CREATE TABLE blobs (
    key        TEXT    NOT NULL PRIMARY KEY CHECK (length(key) BETWEEN 1 AND 200),
    data       BLOB    NOT NULL,
    bytes      INTEGER NOT NULL CHECK (bytes >= 0),
    created_at INTEGER NOT NULL
);

CREATE TABLE api_tokens (
    sha256     TEXT    NOT NULL PRIMARY KEY CHECK (length(sha256) = 64),
    name       TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    role       TEXT    NOT NULL DEFAULT 'operator' CHECK (role = 'operator'),
    created_at INTEGER NOT NULL
);
