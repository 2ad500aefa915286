/*
 * db.c: what both engines share: choosing the engine, the nesting of
 * db_begin levels, the statement cache, the migration runner and the
 * statement calls, each handed to the connection's engine (db_engine.h).
 *
 * Invariants:
 *  - a struct db is used by one thread at a time;
 *  - the schema is never touched before its version is known to be ours or
 *    older (each engine refuses a newer one in its open);
 *  - every migration runs in one transaction that takes the engine's
 *    migration lock and re-reads the version first, so two processes
 *    opening one old database migrate it once.
 */
#define _POSIX_C_SOURCE 200809L
#include "db.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_engine.h"
#include "notify.h"

int db_target_is_pg(const char *target)
{
	return target && (strncmp(target, "postgresql://", 13) == 0 ||
			  strncmp(target, "postgres://", 11) == 0);
}

enum db_kind db_kind(const struct db *db)
{
	return db->eng->kind;
}

/* The wait of connections opened from now on (db_busy_timeout_set). */
static _Atomic int64_t busy_timeout_ms = DB_BUSY_TIMEOUT_MS;

void db_busy_timeout_set(int64_t ms)
{
	atomic_store(&busy_timeout_ms, ms > 0 ? ms : DB_BUSY_TIMEOUT_MS);
}

int64_t db_busy_timeout_ms(void)
{
	return atomic_load(&busy_timeout_ms);
}

enum sd_result db_newer_error(const char *where, int version, int ours)
{
	return err_set(SD_SCHEMA,
		       "%s has schema version %d, newer than this program's %d: "
		       "use a newer stagedoor; nothing was changed", where, version, ours);
}

static db_migrate_guard migrate_guard;

void db_migrate_guard_set(db_migrate_guard guard)
{
	migrate_guard = guard;
}

enum sd_result db_migrate_guard_call(const char *path, int from, int to)
{
	return migrate_guard ? migrate_guard(path, from, to) : SD_OK;
}

enum sd_result db_box_lock_hold(struct db *db)
{
	return db->eng->box_lock_hold ? db->eng->box_lock_hold(db) : SD_OK;
}

/* SQLite: a migration may rebuild a table by SQLite's own procedure, with
 * foreign keys off while it runs and every one checked before its commit */
static enum sd_result fk_enforce(struct db *db, int on)
{
	if (db->eng->kind != DB_SQLITE)
		return SD_OK;
	return db_exec(db, on ? "PRAGMA foreign_keys = ON" : "PRAGMA foreign_keys = OFF");
}

static enum sd_result fk_hold(struct db *db)
{
	char problem[256];
	enum sd_result r;
	int ok = 0;

	if (db->eng->kind != DB_SQLITE)
		return SD_OK;
	if ((r = db_foreign_key_check(db, &ok, problem, sizeof problem)) != SD_OK)
		return r;
	return ok ? SD_OK : err_set(SD_DB, "%s", problem);
}

static enum sd_result db_migrate_steps(struct db *db);

static enum sd_result db_migrate(struct db *db)
{
	enum sd_result r, r2;

	if ((r = fk_enforce(db, 0)) != SD_OK)
		return r;
	r = db_migrate_steps(db);
	r2 = fk_enforce(db, 1);
	return r != SD_OK ? r : r2;
}

static enum sd_result db_migrate_steps(struct db *db)
{
	const struct db_migration *ms = db->eng->kind == DB_PG ? db_migrations_pg : db_migrations;
	int count = db->eng->kind == DB_PG ? db_migration_count_pg : db_migration_count;
	enum sd_result r;
	int i;

	for (i = 0; i < count; i++) {
		const struct db_migration *m = &ms[i];
		int v = 0;

		if (m->version <= db->version)
			continue;
		if ((r = db_begin(db)) != SD_OK)
			return r;
		/* another process may have migrated while we waited for the lock */
		if ((r = db->eng->migration_lock(db)) != SD_OK ||
		    (r = db->eng->version_read(db, &v)) != SD_OK)
			goto fail;
		if (v >= m->version) {
			db->version = v;
			db_rollback(db);
			continue;
		}
		/* a database in use is migrated only when no box runs on it */
		if (v > 0 && (r = db->eng->migration_guard(db, v, count)) != SD_OK)
			goto fail;
		if ((r = db_exec(db, m->sql)) != SD_OK || (r = fk_hold(db)) != SD_OK) {
			err_set(r, "migration %s failed: %s", m->name, err_msg());
			goto fail;
		}
		if ((r = db->eng->version_write(db, m->version)) != SD_OK)
			goto fail;
		if ((r = db_commit(db)) != SD_OK)
			return r;
		db->version = m->version;
	}
	return SD_OK;
fail:
	db_rollback(db);
	return r;
}

enum sd_result db_open(const char *path, int flags, enum db_sync sync, struct db **out)
{
	struct db *db;
	enum sd_result r;

	*out = NULL;
	if (!path || !*path)
		return err_set(SD_INVALID, "no database path given");
	db = calloc(1, sizeof *db);
	if (!db || !(db->path = strdup(path))) {
		free(db);
		return err_set(SD_NOMEM, "out of memory opening %s", path);
	}
	db->eng = db_target_is_pg(path) ? &db_engine_pg : &db_engine_sqlite;
	if ((r = db->eng->open(db, flags, sync)) != SD_OK || (r = db_migrate(db)) != SD_OK) {
		db_close(db);
		return r;
	}
	*out = db;
	return SD_OK;
}

void db_close(struct db *db)
{
	int i;

	if (!db)
		return;
	for (i = 0; i < db->n_cached; i++)
		db->eng->finalize(db->cache[i].st);
	db->n_cached = 0;
	if (db->e)
		db->eng->close(db);
	free(db->path);
	free(db);
}

const char *db_path(const struct db *db)
{
	return db->path;
}

int db_schema_version(const struct db *db)
{
	return db->version;
}

/* ======================== transactions ==================================== */

/*
 * The nesting's invariants, checked on the way in and out of every call
 * that changes it: depth counts the open levels; a savepoint exists only
 * inside a transaction; each savepoint opened its level above the one
 * before it, and the levels opened inside it are still counted in depth.
 */
static void tx_check(const struct db *db)
{
	int i;

	assert(db->depth >= 0);
	assert(db->n_sp >= 0 && db->n_sp <= DB_SAVEPOINTS_MAX);
	assert(db->depth > 0 || (db->n_sp == 0 && !db->doomed));
	for (i = 0; i < db->n_sp; i++) {
		assert(db->sp[i].depth <= db->depth);
		assert(i == 0 || db->sp[i].depth > db->sp[i - 1].depth);
	}
	(void)db;
	(void)i;
}

enum sd_result db_begin(struct db *db)
{
	enum sd_result r;

	tx_check(db);
	if (db->depth > 0) {
		db->depth++;
		return SD_OK;
	}
	if ((r = db->eng->tx_begin(db)) != SD_OK)
		return r;
	db->depth = 1;
	db->doomed = 0;
	db->n_sp = 0;
	db->notify = 0;
	return SD_OK;
}

enum sd_result db_begin_snapshot(struct db *db)
{
	enum sd_result r;

	if (db->depth > 0) {	/* joined: the outer level chose its kind */
		db->depth++;
		return SD_OK;
	}
	if (!db->eng->tx_begin_snapshot)
		return db_begin(db);
	if ((r = db->eng->tx_begin_snapshot(db)) != SD_OK)
		return r;
	db->depth = 1;
	db->doomed = 0;
	db->n_sp = 0;
	db->notify = 0;
	return SD_OK;
}

enum sd_result db_commit(struct db *db)
{
	enum sd_result r;

	tx_check(db);
	if (db->depth == 0)
		return err_set(SD_DB, "commit without a transaction");
	if (--db->depth > 0)
		return SD_OK;
	db->n_sp = 0;
	if (db->doomed) {
		db->eng->tx_rollback(db);
		db->doomed = 0;
		return err_set(SD_DB, "transaction rolled back by an inner failure");
	}
	if (db->notify && db->eng->commit_notify)
		r = db->eng->commit_notify(db);
	else
		r = db->eng->tx_commit(db);
	if (r != SD_OK)
		return r;
	if (db->notify) {
		db->notify = 0;
		notify_broadcast();
	}
	return SD_OK;
}

void db_rollback(struct db *db)
{
	char keep[512];

	tx_check(db);
	if (db->depth == 0)
		return;
	if (--db->depth > 0) {
		db->doomed = 1;
		return;
	}
	db->doomed = 0;
	db->notify = 0;
	db->n_sp = 0;
	/* keep the message of the failure that led here */
	snprintf(keep, sizeof keep, "%s", err_msg());
	db->eng->tx_rollback(db);
	err_set(SD_OK, "%s", keep);
}

enum sd_result db_end(struct db *db, enum sd_result r)
{
	if (r != SD_OK) {
		db_rollback(db);
		return r;
	}
	return db_commit(db);
}

/* The savepoints' names: one per nesting level, so an inner one never
 * shadows an outer one. */
static const char *const SQL_SAVEPOINT[DB_SAVEPOINTS_MAX] = {
	"SAVEPOINT sd_sp0", "SAVEPOINT sd_sp1", "SAVEPOINT sd_sp2", "SAVEPOINT sd_sp3",
};
static const char *const SQL_RELEASE[DB_SAVEPOINTS_MAX] = {
	"RELEASE sd_sp0", "RELEASE sd_sp1", "RELEASE sd_sp2", "RELEASE sd_sp3",
};
static const char *const SQL_ROLLBACK_TO[DB_SAVEPOINTS_MAX] = {
	"ROLLBACK TO sd_sp0", "ROLLBACK TO sd_sp1", "ROLLBACK TO sd_sp2", "ROLLBACK TO sd_sp3",
};

enum sd_result db_savepoint(struct db *db)
{
	enum sd_result r;
	int n = db->n_sp;

	tx_check(db);
	if (db->depth == 0)
		return err_set(SD_DB, "a savepoint needs an open transaction");
	if (n >= DB_SAVEPOINTS_MAX)
		return err_set(SD_DB, "more than %d savepoints open", DB_SAVEPOINTS_MAX);
	if ((r = db_exec(db, SQL_SAVEPOINT[n])) != SD_OK)
		return r;
	db->sp[n].depth = ++db->depth;
	db->sp[n].doomed = db->doomed;
	db->doomed = 0;
	db->n_sp = n + 1;
	return SD_OK;
}

enum sd_result db_savepoint_end(struct db *db, enum sd_result r)
{
	enum sd_result rb;
	int n = db->n_sp - 1;
	char keep[512];

	tx_check(db);
	if (n < 0)
		return err_set(SD_DB, "no savepoint open");
	if (db->depth != db->sp[n].depth && r == SD_OK)	/* a level left open inside */
		r = err_set(SD_DB, "a transaction level inside a savepoint was left open");
	if (r == SD_OK && db->doomed)
		r = err_set(SD_DB, "savepoint rolled back by an inner failure");
	db->depth = db->sp[n].depth - 1;
	db->doomed = db->sp[n].doomed;
	db->n_sp = n;
	if (r == SD_OK) {
		if ((rb = db_exec(db, SQL_RELEASE[n])) != SD_OK)
			db->doomed = 1;
		return rb;
	}
	/* SQLite rolls a whole transaction back by itself on some failures
	 * (a full disk, an I/O error): then there is no savepoint to go back
	 * to, the transaction is doomed, and the failure is still r */
	snprintf(keep, sizeof keep, "%s", err_msg());
	if ((rb = db_exec(db, SQL_ROLLBACK_TO[n])) == SD_OK)
		rb = db_exec(db, SQL_RELEASE[n]);
	if (rb != SD_OK)
		db->doomed = 1;
	err_set(r, "%s", keep);
	return r;
}

int db_in_tx(const struct db *db)
{
	return db->depth > 0;
}

void db_notify_on_commit(struct db *db)
{
	db->notify = 1;
}

/*
 * db_wake_fd: on PostgreSQL, LISTEN on this connection for the commits of
 * every box (db_notify_on_commit sends a NOTIFY in the transaction) and
 * return the connection's socket, for a poll loop (notify_watch); again
 * after a reconnect.  -1 on SQLite (notify.c watches the WAL file) or
 * while the connection is down.
 */
static int db_wake_fd(struct db *db)
{
	return db->eng->listen_fd ? db->eng->listen_fd(db) : -1;
}

/* db_wake_heard: read what arrived on db_wake_fd's socket; 1 when a
 * wake-up did (or the connection broke: look again), else 0. */
static int db_wake_heard(struct db *db)
{
	return db->eng->heard ? db->eng->heard(db) : 0;
}

static int wake_fd_of(void *db)
{
	return db_wake_fd(db);
}

static int wake_heard_of(void *db)
{
	return db_wake_heard(db);
}

void db_notify_watch(struct db *db, struct notify *n)
{
	if (db->eng->listen_fd)
		notify_watch(n, wake_fd_of, wake_heard_of, db);
}

enum sd_result db_exec(struct db *db, const char *sql)
{
	return db->eng->exec(db, sql);
}

/* ======================== statements ====================================== */

struct db_stmt *db_stmt(struct db *db, const char *sql)
{
	struct db_stmt *st;
	int i;

	for (i = 0; i < db->n_cached; i++) {
		if (db->cache[i].sql == sql) {
			st = db->cache[i].st;
			db->eng->reset(st);
			return st;
		}
	}
	/* The cache is sized for every statement the program has; running out
	 * means a bug that would leak statements, so refuse loudly. */
	if (db->n_cached >= DB_STMT_CACHE) {
		err_set(SD_DB, "statement cache full");
		return NULL;
	}
	if (!(st = db->eng->prepare(db, sql, 1)))
		return NULL;
	db->cache[db->n_cached].sql = sql;
	db->cache[db->n_cached].st = st;
	db->n_cached++;
	return st;
}

struct db_stmt *db_stmt_for(struct db *db, const char *sqlite_sql, const char *pg_sql)
{
	return db_stmt(db, db->eng->kind == DB_PG ? pg_sql : sqlite_sql);
}

void db_bind_int(struct db_stmt *st, int idx, int64_t v)
{
	st->db->eng->bind_int(st, idx, v);
}

void db_bind_text(struct db_stmt *st, int idx, const char *s)
{
	if (s)
		st->db->eng->bind_text(st, idx, s);
	else
		st->db->eng->bind_null(st, idx);
}

void db_bind_null(struct db_stmt *st, int idx)
{
	st->db->eng->bind_null(st, idx);
}

void db_bind_blob(struct db_stmt *st, int idx, const void *data, size_t len)
{
	st->db->eng->bind_blob(st, idx, data, len);
}

enum sd_result db_step(struct db_stmt *st, int *row)
{
	int got = 0;
	enum sd_result r = st->db->eng->step(st, &got);

	if (row)
		*row = r == SD_OK && got;
	return r;
}

int db_next(struct db_stmt *st, enum sd_result *r)
{
	int row = 0;

	*r = db_step(st, &row);
	return *r == SD_OK && row;
}

enum sd_result db_run(struct db_stmt *st)
{
	enum sd_result r;
	int row = 1;

	while (row)
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
	st->db->eng->rewind(st);
	return SD_OK;
}

enum sd_result db_run_changes(struct db *db, struct db_stmt *st, int64_t *n)
{
	enum sd_result r;

	*n = 0;
	if (!st)
		return SD_DB;
	if ((r = db_run(st)) == SD_OK)
		*n = db_changes(db);
	return r;
}

enum sd_result db_prune(struct db *db, const char *sql, int64_t before_ms, int limit,
			int64_t *n)
{
	struct db_stmt *st = db_stmt(db, sql);

	*n = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, before_ms);
	db_bind_int(st, 2, limit);
	return db_run_changes(db, st, n);
}

void db_reset(struct db_stmt *st)
{
	if (st)
		st->db->eng->rewind(st);
}

int64_t db_col_int(struct db_stmt *st, int col)
{
	return st->db->eng->col_int(st, col);
}

const char *db_col_text(struct db_stmt *st, int col)
{
	return st->db->eng->col_text(st, col);
}

const void *db_col_blob(struct db_stmt *st, int col, size_t *len)
{
	return st->db->eng->col_blob(st, col, len);
}

int db_col_is_null(struct db_stmt *st, int col)
{
	return st->db->eng->col_is_null(st, col);
}

int64_t db_col_int0(struct db_stmt *st, int col)
{
	return db_col_is_null(st, col) ? 0 : db_col_int(st, col);
}

enum sd_result db_one_int(struct db_stmt *st, int *found, int64_t *v)
{
	enum sd_result r;
	int row = 0;

	*found = 0;
	if (!st)
		return SD_DB;
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	*found = row && !db_col_is_null(st, 0);
	if (*found)
		*v = db_col_int(st, 0);
	db_reset(st);
	return SD_OK;
}

enum sd_result db_lock_try(struct db *db, enum db_lock key, int *held)
{
	*held = 0;
	return db->eng->lock_try(db, (int)key, held);
}

int64_t db_changes(struct db *db)
{
	return db->eng->changes(db);
}

/* ======================== checks and maintenance (the engine's) =========== */

enum sd_result db_backup(struct db *db, const char *dest)
{
	return db->eng->backup(db, dest);
}

int64_t db_fullscan_steps(struct db *db)
{
	return db->eng->fullscan_steps(db);
}

int64_t db_data_version(struct db *db)
{
	return db->eng->data_version(db);
}

enum sd_result db_integrity_check(struct db *db, int *ok, char *problem, size_t size)
{
	return db->eng->integrity_check(db, ok, problem, size);
}

enum sd_result db_foreign_key_check(struct db *db, int *ok, char *problem, size_t size)
{
	return db->eng->foreign_key_check(db, ok, problem, size);
}

enum sd_result db_checkpoint(struct db *db, enum db_checkpoint_mode mode, int64_t busy_ms,
			     struct db_checkpoint_result *res)
{
	return db->eng->checkpoint(db, mode, busy_ms, res);
}

enum sd_result db_wal_bytes(struct db *db, int64_t *bytes)
{
	return db->eng->wal_bytes(db, bytes);
}

enum sd_result db_optimize(struct db *db)
{
	return db->eng->optimize(db);
}
