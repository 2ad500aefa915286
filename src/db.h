/*
 * db.h: the only door to the database, SQLite or PostgreSQL.
 *
 * db_open's target names the engine: a path is an SQLite file (the default
 * box), a postgresql:// or postgres:// URI (any libpq connection URI) a
 * PostgreSQL 15 database that several boxes may share.  One interface for
 * both (statements, bindings, steps, columns, transactions); the engines sit
 * behind it in db_sqlite.c and db_pg.c, and no other module includes either
 * library.  SQL that both accept is written once; a statement that differs
 * by dialect is given in both, side by side, to db_stmt_for().  Parameters
 * are ?NNN (or ?) in both: the PostgreSQL engine numbers them $NNN.
 *
 * SQLite: a struct db is one connection, used by one thread.  Opening it sets WAL mode,
 * foreign keys, SQLITE_DBCONFIG_DEFENSIVE, a busy timeout and the connection's
 * synchronous level (dist/doc/design.md §5.1: FULL where an order is
 * accepted, NORMAL for the queue's bookkeeping), then brings the schema up to
 * date.  Other modules keep their SQL as static const char next to the
 * function that runs it and reach it through db_stmt(), which caches one
 * prepared statement per SQL string.
 *
 * Transactions: db_begin() is BEGIN IMMEDIATE; called while a transaction is
 * open it joins it, so a function may open "its own" transaction and still
 * compose into a caller's.  A rollback at an inner level dooms the whole
 * transaction.  No transaction is ever held across file or network I/O.
 */
#ifndef SD_DB_H
#define SD_DB_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

struct db;
struct db_stmt;

enum db_kind {
	DB_SQLITE,		/* one file in WAL mode: one box */
	DB_PG,			/* PostgreSQL through libpq: one or several boxes */
};

/* db_target_is_pg: target is a PostgreSQL URI (postgresql:// or postgres://). */
int db_target_is_pg(const char *target);

/* db_kind: the engine of an open connection. */
enum db_kind db_kind(const struct db *db);

/*
 * How durable a connection's commits are.  A level is a promise about what
 * a crash may take, and which commits may lean on a commit that was taken:
 *   QUEUE   the queue's own bookkeeping (claims, acks, retries, the relay):
 *           a lost commit only makes an entry claimable, published or run
 *           again, which idempotent handlers absorb, even when commits made
 *           after it stay.  SQLite: synchronous=NORMAL; PostgreSQL:
 *           synchronous_commit = off.
 *   NORMAL  everything else that need not survive a power cut on SQLite
 *           (a handler's effects, maintenance, the jobs commands' repairs,
 *           check and backup's reads), but must
 *           never be lost while commits made after it stay.  SQLite:
 *           synchronous=NORMAL (a power cut takes the WAL's tail, and every
 *           process that could have leaned on it); PostgreSQL: the server's
 *           synchronous_commit (on), since a server can crash or fail over
 *           while its clients live on.
 *   FULL    what a person is told is taken (an order, a change to it, a
 *           scan, a token): on disk before any other connection, process
 *           or box can see it, so nothing acts on a commit a power cut can
 *           still take.  SQLite: synchronous=FULL, the WAL fsynced before
 *           the commit is published in the WAL index, with the write lock
 *           held (writers of one process share the flush through a group
 *           commit, db_group.h).  PostgreSQL: synchronous_commit never
 *           weaker than on, so on both machines with a synchronous standby
 *           before the server shows the commit to another session.
 * QUEUE is 0: a zeroed worker_opts runs its loop at the queue's level.
 */
enum db_sync {
	DB_SYNC_QUEUE,
	DB_SYNC_NORMAL,
	DB_SYNC_FULL,
};

enum db_open_flags {
	DB_OPEN_CREATE = 1,	/* create the file (and its directory) when missing */
};

/* One embedded migration, generated from schema/<engine>/NNNN_name.sql at build time. */
struct db_migration {
	int version;		/* NNNN: the PRAGMA user_version it leads to */
	const char *name;	/* file name without .sql */
	const char *sql;	/* the file's text */
};

extern const struct db_migration db_migrations[];	/* schema/sqlite */
extern const int db_migration_count;
extern const struct db_migration db_migrations_pg[];	/* schema/pg: the same numbers */
extern const int db_migration_count_pg;

/* Busy timeout: how long a writer waits for the lock before SD_BUSY. */
#define DB_BUSY_TIMEOUT_MS 10000

/* db_busy_timeout_set: the busy timeout of connections opened from now on
 * (ms <= 0: DB_BUSY_TIMEOUT_MS again).  The program keeps the default; a
 * test sets a short one to see SD_BUSY without waiting 10 s. */
void db_busy_timeout_set(int64_t ms);

/* PRAGMA journal_size_limit, set at open: when a checkpoint lets the WAL
 * start over, the file is cut back to this size instead of keeping its
 * largest size for ever. */
#define DB_JOURNAL_SIZE_LIMIT (4LL * 1024 * 1024)

/*
 * db_open: open the database at path and migrate it to this program's schema.
 * [out] *out gets a connection the caller frees with db_close().
 * Fails with SD_NOT_FOUND when the file is missing and DB_OPEN_CREATE is not
 * given, and with SD_SCHEMA, changing nothing, when the file was made by a
 * newer version of the program.
 */
enum sd_result db_open(const char *path, int flags, enum db_sync sync, struct db **out);

/* db_close: close the connection; accepts NULL. */
void db_close(struct db *db);

/* db_path: the path the connection was opened with. */
const char *db_path(const struct db *db);

/*
 * db_backup: a consistent copy of the whole database into dest (a new file,
 * made 0600; an existing one is refused) with SQLite's online backup API,
 * while other connections go on writing; the copy is then made a single
 * file (journal_mode DELETE), checked (integrity_check) and fsynced.  Its
 * folder is the caller's to sync.  SD_IO / SD_DB naming what failed; a
 * failed copy is removed.
 */
enum sd_result db_backup(struct db *db, const char *dest);

/*
 * db_file_check: open the database file at path read-only (no WAL, no
 * change), run integrity_check and read its schema version.  [out]
 * *version.  SD_DB naming the first problem.
 */
enum sd_result db_file_check(const char *path, int *version);

/* db_schema_version: PRAGMA user_version as read at open or after migrating. */
int db_schema_version(const struct db *db);


/* SQLite's default autocheckpoint, kept by DB_SYNC_FULL's own WAL hook. */
#define DB_AUTOCHECKPOINT_FRAMES 1000

enum sd_result db_begin(struct db *db);

/*
 * db_begin_snapshot: a transaction whose statements all read one snapshot
 * (PostgreSQL: REPEATABLE READ; an SQLite transaction always does), for
 * counts read together that must agree.  Called inside a transaction it
 * joins it, whatever that one is.  Writes in it may fail with SD_BUSY on
 * PostgreSQL when another commit changed their rows: read only.
 */
enum sd_result db_begin_snapshot(struct db *db);
enum sd_result db_commit(struct db *db);
void db_rollback(struct db *db);
int db_in_tx(const struct db *db);

/* db_end: close the level db_begin opened: commit when r is SD_OK, roll back
 * otherwise.  Returns r, or the commit's failure. */
enum sd_result db_end(struct db *db, enum sd_result r);

/*
 * db_savepoint: inside an open transaction, a level whose failure takes
 * back its own writes only (an SQL SAVEPOINT): the db_begin levels opened
 * inside it join it as they join a transaction, and their rollback dooms
 * the savepoint, not the transaction.  db_savepoint_end(db, r) closes it:
 * its writes stay when r is SD_OK and nothing inside rolled back, else they
 * are rolled back, and the transaction goes on, unless the engine lost it
 * whole with the failure (SQLite does on a full disk): then it is doomed,
 * as by an inner rollback.  Returns r, or SD_DB when an inner level rolled
 * back or was left open.  At most DB_SAVEPOINTS_MAX open at once.
 */
enum sd_result db_savepoint(struct db *db);
enum sd_result db_savepoint_end(struct db *db, enum sd_result r);

/*
 * db_lock_try: take the box-wide lock `key` for this connection, without
 * waiting: PostgreSQL's session advisory lock, held until the connection
 * ends (a box that dies lets it go with its connection); SQLite has one
 * box per file (the run lock), so it is always held there.  [out] *held 1
 * when this connection holds it now.  Asking again while it is held takes
 * it once only.
 */
enum db_lock { DB_LOCK_MAINT = 1 };	/* maintenance: one box at a time */
enum sd_result db_lock_try(struct db *db, enum db_lock key, int *held);

/* db_notify_on_commit: wake waiting workers and relays (this process through
 * notify, others through the WAL) when the open transaction commits. */
void db_notify_on_commit(struct db *db);



/* db_notify_watch: make n wait on db's wake-ups too (PostgreSQL; nothing
 * on SQLite).  db is then read by notify_wait: the same thread's. */
struct notify;
void db_notify_watch(struct db *db, struct notify *n);

/* db_exec: run SQL text with no parameters and no result rows. */
enum sd_result db_exec(struct db *db, const char *sql);

/*
 * db_stmt: the cached prepared statement for sql, reset and with no bindings.
 * sql must be a string that lives as long as the connection (a static const
 * char): the cache is keyed by its address.  Returns NULL and sets the error
 * when the SQL does not compile.  Call db_reset() when done with the rows.
 */
struct db_stmt *db_stmt(struct db *db, const char *sql);

/* db_stmt_for: db_stmt with the statement of the connection's dialect: the
 * SQLite text or the PostgreSQL one (both static, as for db_stmt). */
struct db_stmt *db_stmt_for(struct db *db, const char *sqlite_sql, const char *pg_sql);

void db_bind_int(struct db_stmt *st, int idx, int64_t v);
void db_bind_text(struct db_stmt *st, int idx, const char *s);	/* NULL binds NULL */
/* db_bind_blob: bytes (a BLOB in SQLite, bytea in PostgreSQL), copied */
void db_bind_blob(struct db_stmt *st, int idx, const void *data, size_t len);
void db_bind_null(struct db_stmt *st, int idx);

/*
 * db_step: step the statement.  [out] *row (may be NULL for statements that
 * return no rows) is 1 when a row is ready, 0 when done.  Errors: SD_BUSY,
 * SD_INVALID for a constraint that refused the write, SD_DB otherwise; the
 * statement is reset on error.
 */
enum sd_result db_step(struct db_stmt *st, int *row);

/*
 * db_next: step st; 1 while it stands on a row.  0 at the end or on an
 * error, with [out] *r SD_OK at the end, the error otherwise.  The reading
 * of rows, one or many:
 *
 *	while (db_next(st, &r))
 *		... db_col_int(st, 0) ...
 *	db_reset(st);	(r: SD_OK, or why the rows stopped)
 */
int db_next(struct db_stmt *st, enum sd_result *r);

/* db_run: bind nothing more, step to the end, reset; for writes. */
enum sd_result db_run(struct db_stmt *st);

/* db_run_changes: db_run, then [out] *n the rows it changed; st NULL (a
 * db_stmt that failed) is SD_DB. */
enum sd_result db_run_changes(struct db *db, struct db_stmt *st, int64_t *n);

/* db_prune: a maintenance delete sql (?1 the time before which rows go,
 * ?2 how many at most) run once.  [out] *n the rows it deleted. */
enum sd_result db_prune(struct db *db, const char *sql, int64_t before_ms, int limit,
			int64_t *n);

void db_reset(struct db_stmt *st);

int64_t db_col_int(struct db_stmt *st, int col);
const char *db_col_text(struct db_stmt *st, int col);	/* NULL for SQL NULL */
/* db_col_blob: a BLOB column's bytes and [out] *len, valid until the next
 * step or reset (NULL, *len 0 for SQL NULL) */
const void *db_col_blob(struct db_stmt *st, int col, size_t *len);
int db_col_is_null(struct db_stmt *st, int col);
/* db_col_int0: db_col_int, 0 for SQL NULL */
int64_t db_col_int0(struct db_stmt *st, int col);

/* db_one_int: step st (NULL: a db_stmt that failed, SD_DB), its parameters
 * bound, for the first column of its first row, and reset it.  [out]
 * *found 0 when there is no row or the value is NULL (*v is then left as
 * it was). */
enum sd_result db_one_int(struct db_stmt *st, int *found, int64_t *v);

/* db_fullscan_steps: the steps the connection's cached statements have taken
 * through full table scans so far (SQLITE_STMTSTATUS_FULLSCAN_STEP): what a
 * test reads to hold a lookup to its index. */
int64_t db_fullscan_steps(struct db *db);

/* db_changes: rows changed by the last write statement on this connection. */
int64_t db_changes(struct db *db);

/* db_data_version: PRAGMA data_version: changes when another connection commits. */
int64_t db_data_version(struct db *db);

/* ---- checks and maintenance ------------------------------------------- */

/*
 * db_integrity_check: PRAGMA integrity_check.  [out] *ok 1 when it says
 * "ok"; otherwise 0 and problem (size bytes) gets its first finding.
 */
enum sd_result db_integrity_check(struct db *db, int *ok, char *problem, size_t size);

/*
 * db_foreign_key_check: PRAGMA foreign_key_check.  [out] *ok 1 when no row
 * refers to a missing parent; otherwise 0 and problem names the first one.
 */
enum sd_result db_foreign_key_check(struct db *db, int *ok, char *problem, size_t size);

enum db_checkpoint_mode {
	DB_CHECKPOINT_PASSIVE,	/* copy what no reader needs; never waits */
	DB_CHECKPOINT_RESTART,	/* copy all, then wait for readers to leave the WAL
				 * so the next writer starts it over */
	DB_CHECKPOINT_TRUNCATE,	/* RESTART, then truncate the WAL file to 0 bytes */
};

struct db_checkpoint_result {
	int busy;		/* RESTART/TRUNCATE gave up waiting (it still copied
				 * what it could, like PASSIVE) */
	int64_t wal_frames;	/* frames in the WAL after the checkpoint */
	int64_t copied_frames;	/* of which are in the database file */
};

/*
 * db_checkpoint: checkpoint the WAL in mode.  RESTART and TRUNCATE hold the
 * writer lock while they wait for readers, so they wait at most busy_ms
 * (instead of DB_BUSY_TIMEOUT_MS) and then give up, res->busy = 1, which is
 * not an error.  Must be called outside a transaction.  [out] res (may be NULL).
 */
enum sd_result db_checkpoint(struct db *db, enum db_checkpoint_mode mode, int64_t busy_ms,
			     struct db_checkpoint_result *res);

/*
 * db_wal_bytes: the size of "<path>-wal" ([out] *bytes, 0 when there is
 * none).  A stat(2), never an open(2): closing an fd of our own on a file
 * SQLite has open would drop this process's POSIX locks on it.
 */
enum sd_result db_wal_bytes(struct db *db, int64_t *bytes);

/* db_optimize: refresh the planner's statistics (a bounded ANALYZE, then
 * PRAGMA optimize); minutes apart, not on every turn. */
enum sd_result db_optimize(struct db *db);

/* The engines' client libraries as linked: SQLite's "3.40.1", libpq's
 * number (150018: 15.18); for --version. */
const char *db_sqlite_lib_version(void);
int db_pg_lib_version(void);



/*
 * Migrations under a running box.  An existing database is migrated only
 * when no box runs on it: on SQLite the guard set here decides (runlock.h:
 * the run lock is held by another process), on PostgreSQL the store refuses
 * while any box holds the shared box lock that db_box_lock_hold takes (a
 * no-op on SQLite).  Either refusal is SD_BUSY, and nothing was changed.
 */
typedef enum sd_result (*db_migrate_guard)(const char *path, int from, int to);
void db_migrate_guard_set(db_migrate_guard guard);
enum sd_result db_box_lock_hold(struct db *db);

#endif
