/*
 * db_engine.h: what db.c asks of an engine (db_sqlite.c, db_pg.c).  Only the
 * store's own files include it.
 *
 * db.c owns what both engines share: the nesting of db_begin levels, the
 * statement cache, the wake-up after a commit and the migration runner's
 * order.  An engine owns its connection, its statements and the meaning of
 * BEGIN, COMMIT and a schema version on its side.
 *
 * A statement is engine-specific memory that starts with struct db_stmt, so
 * db.c can find the engine of any statement it is handed.
 */
#ifndef SD_DB_ENGINE_H
#define SD_DB_ENGINE_H

#include "db.h"

#define DB_STMT_CACHE 96
#define DB_SAVEPOINTS_MAX 4

struct db_stmt {
	struct db *db;			/* the connection it belongs to */
};

struct db_engine {
	enum db_kind kind;
	const char *name;		/* "sqlite", "postgresql" */
	/* open the connection into db->e (db->path is set); migrations are
	 * db.c's, after this returns */
	enum sd_result (*open)(struct db *db, int flags, enum db_sync sync);
	void (*close)(struct db *db);
	/* the engine's schema version, read inside the migration's transaction */
	enum sd_result (*version_read)(struct db *db, int *version);
	enum sd_result (*version_write)(struct db *db, int version);
	/* serialise migrations between processes: called right after BEGIN */
	enum sd_result (*migration_lock)(struct db *db);
	/* no box runs on the database at version `from` that is about to be
	 * migrated to `to` (inside the migration's transaction) */
	enum sd_result (*migration_guard)(struct db *db, int from, int to);
	/* a running box's mark on the database for its life; NULL: none */
	enum sd_result (*box_lock_hold)(struct db *db);
	enum sd_result (*tx_begin)(struct db *db);
	/* a transaction whose reads all see one snapshot; NULL: tx_begin's
	 * already do (SQLite) */
	enum sd_result (*tx_begin_snapshot)(struct db *db);
	enum sd_result (*tx_commit)(struct db *db);
	void (*tx_rollback)(struct db *db);
	enum sd_result (*exec)(struct db *db, const char *sql);
	/* a new statement for sql (NULL and the error set when it does not
	 * compile); persistent: the cache keeps it for the connection */
	struct db_stmt *(*prepare)(struct db *db, const char *sql, int persistent);
	void (*finalize)(struct db_stmt *st);
	void (*reset)(struct db_stmt *st);	/* and clear the bindings */
	void (*bind_int)(struct db_stmt *st, int idx, int64_t v);
	void (*bind_text)(struct db_stmt *st, int idx, const char *s);
	void (*bind_null)(struct db_stmt *st, int idx);
	void (*bind_blob)(struct db_stmt *st, int idx, const void *data, size_t len);
	enum sd_result (*step)(struct db_stmt *st, int *row);
	void (*rewind)(struct db_stmt *st);	/* reset, keeping the bindings */
	int64_t (*col_int)(struct db_stmt *st, int col);
	const char *(*col_text)(struct db_stmt *st, int col);
	int (*col_is_null)(struct db_stmt *st, int col);
	/* the bytes of a BLOB/bytea column, valid until the next step */
	const void *(*col_blob)(struct db_stmt *st, int col, size_t *len);
	int64_t (*changes)(struct db *db);
	enum sd_result (*lock_try)(struct db *db, int key, int *held);
	/* wake-ups between processes sent through the database, or NULL
	 * (SQLite: the WAL file tells, notify.c watches it): commit_notify
	 * commits the open transaction and tells the listeners; listen_fd
	 * starts listening and gives the socket to poll (-1: none now);
	 * heard drains what arrived: 1 when anything did */
	enum sd_result (*commit_notify)(struct db *db);
	int (*listen_fd)(struct db *db);
	int (*heard)(struct db *db);
	/* The operator's checks and the maintenance, db.h's calls of the same
	 * names; each engine says what its own server does for itself. */
	enum sd_result (*backup)(struct db *db, const char *dest);
	int64_t (*fullscan_steps)(struct db *db);
	int64_t (*data_version)(struct db *db);
	enum sd_result (*integrity_check)(struct db *db, int *ok, char *problem, size_t size);
	enum sd_result (*foreign_key_check)(struct db *db, int *ok, char *problem, size_t size);
	enum sd_result (*checkpoint)(struct db *db, enum db_checkpoint_mode mode, int64_t busy_ms,
				     struct db_checkpoint_result *res);
	enum sd_result (*wal_bytes)(struct db *db, int64_t *bytes);
	enum sd_result (*optimize)(struct db *db);
};

struct db {
	const struct db_engine *eng;
	void *e;			/* the engine's connection state */
	char *path;			/* as given to db_open (a path or a URI) */
	int version;			/* the schema version, as read or migrated */
	int depth;			/* db_begin nesting; 0 = autocommit */
	int doomed;			/* an inner level rolled back */
	int n_sp;			/* savepoints open (db_savepoint) */
	struct {
		int depth;		/* the level the savepoint opened */
		int doomed;		/* doomed as it was before it */
	} sp[DB_SAVEPOINTS_MAX];
	int notify;			/* wake waiters after the commit */
	int n_cached;
	struct {
		const char *sql;	/* cache key: the address of the SQL text */
		struct db_stmt *st;
	} cache[DB_STMT_CACHE];
};

extern const struct db_engine db_engine_sqlite;
extern const struct db_engine db_engine_pg;

/* db_busy_timeout_ms: the busy timeout connections open with (db.h). */
int64_t db_busy_timeout_ms(void);

/* db_migrate_guard_call: the guard db_migrate_guard_set registered (the
 * SQLite engine's migration_guard asks it); SD_OK when none. */
enum sd_result db_migrate_guard_call(const char *path, int from, int to);

/* db_newer_error: the refusal of a database whose version is newer than
 * this program's (both engines word it the same). */
enum sd_result db_newer_error(const char *where, int version, int ours);

#endif
