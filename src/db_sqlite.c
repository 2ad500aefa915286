/*
 * db_sqlite.c: the SQLite engine: connections, pragmas, the schema version
 * (PRAGMA user_version), transactions, statements, the WAL hook that
 * checkpoints, backups and checks.
 *
 * Invariants:
 *  - a struct db is used by one thread at a time (SQLITE_OPEN_NOMUTEX);
 *  - the schema is never touched before its version is known to be ours or
 *    older: a newer file is refused before any pragma that writes;
 *  - migrations (db.c) run in BEGIN IMMEDIATE transactions, which the file's
 *    write lock already serialises between processes.
 */
#define _POSIX_C_SOURCE 200809L
#include "db.h"
#include "db_engine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "db_gate.h"
#include "failpoint.h"
#include "fsio.h"
#include "log.h"
#include "notify.h"

/* The engine's state of one connection (struct db's e). */
struct sq {
	sqlite3 *h;			/* the connection */
	int sync_full;			/* DB_SYNC_FULL: synchronous=FULL, durable
					 * before visible */
	struct db_gate *gate;		/* this process's writers of the file (db_gate.h) */
	int gate_held;			/* this connection holds it: from BEGIN to the
					 * commit's release of the write lock */
	int64_t busy_since;		/* when the current wait for a lock began (us) */
	int64_t busy_limit_ms;		/* how long a wait may last: the busy timeout,
					 * shorter during a blocking checkpoint */
	uint32_t busy_rng;		/* jitter for the naps while waiting */
};

struct sq_stmt {
	struct db_stmt base;
	sqlite3_stmt *st;
};

#define SQ(db) ((struct sq *)(db)->e)
#define SQ_ST(s) (((struct sq_stmt *)(s))->st)

static pthread_once_t db_once = PTHREAD_ONCE_INIT;

/* gate_leave: this connection's hold of its gate, if any, given up */
static void gate_leave(struct sq *q)
{
	if (q->gate_held) {
		q->gate_held = 0;
		db_gate_leave(q->gate);
	}
}

static enum sd_result db_fail(sqlite3 *h, int rc, const char *what)
{
	int prim = rc & 0xff;

	if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
		return err_set(SD_BUSY, "database is locked (%s): %s", what, sqlite3_errmsg(h));
	if (rc == SQLITE_CONSTRAINT_TRIGGER)	/* RAISE(ABORT, 'the rule') */
		return err_set(SD_REFUSED, "%s", sqlite3_errmsg(h));
	if (prim == SQLITE_CONSTRAINT)
		return err_set(SD_INVALID, "refused by the database (%s): %s", what, sqlite3_errmsg(h));
	if (prim == SQLITE_NOMEM)
		return err_set(SD_NOMEM, "out of memory in SQLite (%s)", what);
	/* the disk refused: nothing of the statement is stored (SQLite rolls
	 * the transaction back); callers answer "try again", not a crash */
	if (prim == SQLITE_FULL)
		return err_set(SD_IO, "the disk is full: nothing was stored (%s)", what);
	if (prim == SQLITE_IOERR)
		return err_set(SD_IO, "I/O error: nothing was stored (%s): %s", what,
			       sqlite3_errmsg(h));
	if (prim == SQLITE_NOTADB || prim == SQLITE_CORRUPT)
		return err_set(SD_DB, "not a usable Stagedoor database (%s): %s", what, sqlite3_errmsg(h));
	return err_set(SD_DB, "database error (%s): %s", what, sqlite3_errmsg(h));
}

static enum sd_result db_pragma_int(sqlite3 *h, const char *sql, int *out)
{
	sqlite3_stmt *st;
	int rc = sqlite3_prepare_v2(h, sql, -1, &st, NULL);

	if (rc != SQLITE_OK)
		return db_fail(h, rc, sql);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW)
		return db_fail(h, rc, sql);
	return SD_OK;
}

/* mkdir -p for the database's directory. */
static enum sd_result db_make_parent(const char *path)
{
	char buf[PATH_MAX];
	char *p;

	if (strlen(path) >= sizeof buf)
		return err_set(SD_INVALID, "database path too long: %s", path);
	strcpy(buf, path);
	p = strrchr(buf, '/');
	if (!p || p == buf)
		return SD_OK;
	*p = '\0';
	return fsio_mkdirs(buf, 0);
}

/*
 * The database holds buyers' names and addresses: its file is the box
 * user's alone (0600) whatever the umask.  A new one is made 0600 (and its
 * name synced into its folder) before SQLite opens it, and SQLite gives its -wal and -shm the database file's
 * mode.  An existing one readable by others is tightened, with its -wal and
 * -shm, and a log line says so.
 */
static enum sd_result db_create_private(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);

	char dir[PATH_MAX], *slash;

	if (fd < 0 && errno != EEXIST)
		return err_set(SD_IO, "cannot create %s: %s", path, strerror(errno));
	if (fd < 0)
		return SD_OK;	/* another process made it first */
	close(fd);
	/* SQLite syncs the folder when it makes a WAL, not when it makes the
	 * database: without this a power cut can take the new file's name */
	snprintf(dir, sizeof dir, "%s", path);
	if (!(slash = strrchr(dir, '/')))
		return fsio_sync_dir(".");
	*(slash == dir ? slash + 1 : slash) = '\0';
	return fsio_sync_dir(dir);
}

static void db_tighten(const char *path, const struct stat *sb)
{
	static const char *const sfx[] = { "", "-wal", "-shm" };
	char p[PATH_MAX], q[PATH_MAX + 8];
	size_t i;

	if (!(sb->st_mode & 077))
		return;
	for (i = 0; i < sizeof sfx / sizeof sfx[0]; i++) {
		struct stat fs;
		unsigned was, now;

		snprintf(p, sizeof p, "%s%s", path, sfx[i]);
		if (lstat(p, &fs) != 0 || !S_ISREG(fs.st_mode) || !(fs.st_mode & 077))
			continue;
		was = (unsigned)(fs.st_mode & 07777);
		now = was & 0700;
		if (chmod(p, now) != 0)
			log_event(LOG_WARN, "database file readable by others; cannot tighten",
				  "path=%s mode=%04o error=%s", log_quote(q, sizeof q, p), was,
				  strerror(errno));
		else
			log_event(LOG_WARN, "database file was readable by others: now the box "
				  "user's alone", "path=%s was=%04o now=%04o",
				  log_quote(q, sizeof q, p), was, now);
	}
}

/*
 * Is this file ours, and not from a newer version?  [out] *version.  A file
 * with tables but no schema version belongs to another program: we neither
 * add our tables to it nor switch it to WAL.
 */
static enum sd_result db_check_ours(sqlite3 *h, const char *path, int *version)
{
	enum sd_result r;
	int tables = 0;

	if ((r = db_pragma_int(h, "PRAGMA user_version", version)) != SD_OK)
		return err_set(r, "%s: %s", path, err_msg());
	if (*version > db_migration_count)
		return err_set(SD_SCHEMA,
			       "%s has schema version %d, newer than this program's %d: "
			       "use a newer stagedoor; nothing was changed", path, *version,
			       db_migration_count);
	if (*version == 0) {
		if ((r = db_pragma_int(h, "SELECT count(*) FROM sqlite_master", &tables)) != SD_OK)
			return err_set(r, "%s: %s", path, err_msg());
		if (tables > 0)
			return err_set(SD_SCHEMA,
				       "%s is an SQLite database of another program (tables but "
				       "no Stagedoor schema version); nothing was changed", path);
	}
	return SD_OK;
}

/*
 * A first look at the file's header (user_version is the big-endian word at
 * offset 60) before a connection opens it: refusing a newer file must not
 * even create or checkpoint a WAL.  The read goes through SQLite's VFS, never
 * through an fd of our own: closing another fd on the file would drop the
 * POSIX locks that this process's open connections hold on it.  A WAL with
 * newer frames than the header is caught by db_check_ours afterwards.
 */
static enum sd_result db_probe(const char *path)
{
	sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
	sqlite3_file *f;
	unsigned char h[100];
	int out_flags = 0, rc, version;

	if (!vfs || !(f = calloc(1, (size_t)vfs->szOsFile)))
		return SD_OK;	/* the open reports what is wrong */
	rc = vfs->xOpen(vfs, path, f, SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READONLY, &out_flags);
	if (rc != SQLITE_OK) {
		if (f->pMethods)
			f->pMethods->xClose(f);
		free(f);
		return SD_OK;
	}
	rc = f->pMethods->xRead(f, h, (int)sizeof h, 0);
	f->pMethods->xClose(f);
	free(f);
	if (rc != SQLITE_OK || memcmp(h, "SQLite format 3", 16) != 0)
		return SD_OK;
	version = (int)((uint32_t)h[60] << 24 | (uint32_t)h[61] << 16 | (uint32_t)h[62] << 8 |
			(uint32_t)h[63]);
	if (version > db_migration_count || version < 0)
		return err_set(SD_SCHEMA,
			       "%s has schema version %d, newer than this program's %d: "
			       "use a newer stagedoor; nothing was changed", path, version,
			       db_migration_count);
	return SD_OK;
}

/*
 * Process-wide SQLite settings, once, before the first connection: no memory
 * statistics (a global mutex on every allocation) and no page-cache
 * preallocation (a claim's small temporary table would otherwise take and
 * give back a large block on every call).
 */
static void db_global_init(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	sqlite3_config(SQLITE_CONFIG_PAGECACHE, NULL, 0, 0);
	sqlite3_initialize();
}


/*
 * The busy handler: nap 0.25-0.75 ms between tries, until the busy timeout.
 * SQLite's own handler backs off to 100 ms naps, and a worker that takes the
 * lock again right after each commit then shuts a napping worker out for
 * good; short naps with jitter let waiters in whenever the lock is free.
 */
static int db_busy(void *arg, int count)
{
	struct sq *db = arg;
	int64_t now = clock_mono_us();
	struct timespec ts;

	if (count == 0)
		db->busy_since = now;
	if (now - db->busy_since >= db->busy_limit_ms * 1000)
		return 0;
	db->busy_rng = db->busy_rng * 1103515245u + 12345u;
	ts.tv_sec = 0;
	ts.tv_nsec = 250000L + (long)((db->busy_rng >> 8) % 500000u);
	nanosleep(&ts, NULL);
	return 1;
}

static enum sd_result db_journal_size_limit(struct db *db)
{
	char sql[64];

	snprintf(sql, sizeof sql, "PRAGMA journal_size_limit = %lld",
		 (long long)DB_JOURNAL_SIZE_LIMIT);
	return db_exec(db, sql);
}

/* sq_open_file: the checks before SQLite sees the file, then the connection */
static enum sd_result sq_open_file(struct db *db, struct sq *q, int flags)
{
	const char *path = db->path;
	struct stat sb;
	enum sd_result r;
	int rc, exists;

	exists = stat(path, &sb) == 0;
	if (!exists && !(flags & DB_OPEN_CREATE))
		return err_set(SD_NOT_FOUND, "no database at %s (run 'stagedoor init' first)", path);
	if (exists && !S_ISREG(sb.st_mode))
		return err_set(SD_INVALID, "%s is not a regular file", path);
	if (!exists && ((r = db_make_parent(path)) != SD_OK || (r = db_create_private(path)) != SD_OK))
		return r;
	if (exists && (r = db_probe(path)) != SD_OK)
		return r;
	if (exists)
		db_tighten(path, &sb);
	rc = sqlite3_open_v2(path, &q->h,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
			     ((flags & DB_OPEN_CREATE) ? SQLITE_OPEN_CREATE : 0), NULL);
	if (rc != SQLITE_OK)
		return err_set(SD_DB, "cannot open %s: %s", path,
			       q->h ? sqlite3_errmsg(q->h) : sqlite3_errstr(rc));
	sqlite3_extended_result_codes(q->h, 1);
	if (stat(path, &sb) == 0)
		q->gate = db_gate_for(sb.st_dev, sb.st_ino);
	return SD_OK;
}

static enum sd_result sq_wal_mode(struct sq *q, const char *path)
{
	sqlite3_stmt *st;
	const unsigned char *mode = NULL;
	enum sd_result r = SD_OK;
	int rc;

	rc = sqlite3_prepare_v2(q->h, "PRAGMA journal_mode = WAL", -1, &st, NULL);
	if (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		mode = sqlite3_column_text(st, 0);
	if (!mode || strcmp((const char *)mode, "wal") != 0)
		r = err_set(SD_DB, "%s: cannot switch to WAL mode: %s", path, sqlite3_errmsg(q->h));
	sqlite3_finalize(st);
	return r;
}

static enum sd_result sq_set_sync(struct db *db, enum db_sync sync);

static enum sd_result sq_open(struct db *db, int flags, enum db_sync sync)
{
	struct sq *q;
	enum sd_result r;

	pthread_once(&db_once, db_global_init);
	if (!(q = calloc(1, sizeof *q)))
		return err_set(SD_NOMEM, "out of memory opening %s", db->path);
	db->e = q;
	if ((r = sq_open_file(db, q, flags)) != SD_OK)
		return r;
	q->busy_rng = (uint32_t)clock_mono_us() ^ (uint32_t)(uintptr_t)db;
	q->busy_limit_ms = db_busy_timeout_ms();
	sqlite3_busy_handler(q->h, db_busy, q);
	sqlite3_db_config(q->h, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);

	/* Read the version before anything can write: a newer file stays as it is. */
	if ((r = db_check_ours(q->h, db->path, &db->version)) != SD_OK ||
	    (r = sq_wal_mode(q, db->path)) != SD_OK)
		return r;
	if ((r = db_exec(db, "PRAGMA foreign_keys = ON")) != SD_OK ||
	    (r = db_journal_size_limit(db)) != SD_OK)
		return r;
	return sq_set_sync(db, sync);
}

static void sq_close(struct db *db)
{
	struct sq *q = SQ(db);

	gate_leave(q);
	sqlite3_close(q->h);
	free(q);
	db->e = NULL;
}

static enum sd_result sq_version_read(struct db *db, int *version)
{
	return db_pragma_int(SQ(db)->h, "PRAGMA user_version", version);
}

static enum sd_result sq_version_write(struct db *db, int version)
{
	char set[64];

	snprintf(set, sizeof set, "PRAGMA user_version = %d", version);
	return db_exec(db, set);
}

/* BEGIN IMMEDIATE already holds the file's write lock */
static enum sd_result sq_migration_lock(struct db *db)
{
	(void)db;
	return SD_OK;
}

static enum sd_result sq_migration_guard(struct db *db, int from, int to)
{
	return db_migrate_guard_call(db->path, from, to);
}

/* ======================== backups ========================================== */

/* check_handle: integrity_check and user_version on an open handle. */
static enum sd_result check_handle(sqlite3 *h, const char *path, int *version)
{
	sqlite3_stmt *st = NULL;
	enum sd_result r = SD_OK;
	int rc;

	if ((rc = sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL)) != SQLITE_OK)
		return db_fail(h, rc, "integrity_check");
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW)
		r = db_fail(h, rc, "integrity_check");
	else if (strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0)
		r = err_set(SD_DB, "%s fails integrity_check: %s", path,
			    (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (r == SD_OK && version)
		r = db_pragma_int(h, "PRAGMA user_version", version);
	return r;
}

static enum sd_result sq_backup(struct db *db, const char *dest)
{
	struct sq *q = SQ(db);
	sqlite3 *dh = NULL;
	sqlite3_backup *b;
	enum sd_result r = SD_OK;
	int fd, rc;


	if ((fd = open(dest, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return err_set(SD_IO, "cannot create %s: %s", dest, strerror(errno));
	close(fd);
	if ((rc = sqlite3_open_v2(dest, &dh, SQLITE_OPEN_READWRITE, NULL)) != SQLITE_OK) {
		r = err_set(SD_DB, "cannot open %s: %s", dest, dh ? sqlite3_errmsg(dh) : "");
		goto out;
	}
	if (!(b = sqlite3_backup_init(dh, "main", q->h, "main"))) {
		r = db_fail(dh, sqlite3_errcode(dh), "backup");
		goto out;
	}
	/* 256 pages a step: writers get the lock between steps; a step that
	 * finds the source locked naps and tries again */
	while ((rc = sqlite3_backup_step(b, 256)) == SQLITE_OK || rc == SQLITE_BUSY ||
	       rc == SQLITE_LOCKED)
		if (rc != SQLITE_OK)
			sqlite3_sleep(5);
	if ((rc = sqlite3_backup_finish(b)) != SQLITE_OK) {
		r = db_fail(dh, rc, "backup");
		goto out;
	}
	/* one file, no -wal beside it, whatever the source's mode */
	if ((rc = sqlite3_exec(dh, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL)) != SQLITE_OK) {
		r = db_fail(dh, rc, "journal_mode");
		goto out;
	}
	r = check_handle(dh, dest, NULL);
out:
	sqlite3_close(dh);
	if (r == SD_OK && (fd = open(dest, O_RDONLY | O_CLOEXEC)) >= 0) {
		if (fsync(fd) != 0)
			r = err_set(SD_IO, "cannot fsync %s: %s", dest, strerror(errno));
		close(fd);
	}
	if (r != SD_OK)
		unlink(dest);
	return r;
}

enum sd_result db_file_check(const char *path, int *version)
{
	sqlite3 *h = NULL;
	enum sd_result r;
	int rc;

	pthread_once(&db_once, db_global_init);
	rc = sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL);
	r = rc != SQLITE_OK ? err_set(SD_DB, "cannot open %s: %s", path,
				      h ? sqlite3_errmsg(h) : sqlite3_errstr(rc))
			    : check_handle(h, path, version);
	sqlite3_close(h);
	return r;
}

/*
 * The WAL hook, which SQLite calls after each commit that wrote to the WAL,
 * with the write lock released and before the commit's sqlite3_step
 * returns.  It lets this process's next writer in at once, then
 * checkpoints.
 *
 * It replaces SQLite's autocheckpoint hook, so it checkpoints as that one
 * does, at DB_AUTOCHECKPOINT_FRAMES, but one thread of the process at a
 * time, and not again on every commit while readers hold the WAL back
 * (db_gate_checkpoint_begin): each passive checkpoint syncs the WAL and
 * the database, and SQLite's hook, trying one per commit once the WAL is
 * past the mark, cost more flushes than the commits themselves.
 *
 * A commit at DB_SYNC_FULL is durable before any other connection can see
 * it: it runs at synchronous=FULL, where SQLite fsyncs the WAL before it
 * publishes the commit in the WAL index (the moment readers see it), with
 * the write lock held.  A flush after the commit, outside the lock, would
 * share fsyncs between concurrent committers, but for the length of that
 * flush the commit is visible and not durable: the relay and the workers
 * act on an order a power cut can still take.  Sharing happens above the
 * store instead (db_group.h): concurrent intake of one process commits as
 * one transaction, one flush.
 */
static int wal_committed(void *arg, sqlite3 *h, const char *name, int frames)
{
	struct sq *db = arg;

	gate_leave(db);
	if (frames < DB_AUTOCHECKPOINT_FRAMES)
		return SQLITE_OK;
	if (!db->gate) {
		sqlite3_wal_checkpoint_v2(h, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	} else if (db_gate_checkpoint_begin(db->gate, frames, DB_AUTOCHECKPOINT_FRAMES)) {
		sqlite3_wal_checkpoint_v2(h, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		db_gate_checkpoint_end(db->gate);
	}
	return SQLITE_OK;
}

static enum sd_result sq_set_sync(struct db *db, enum db_sync sync)
{
	struct sq *q = SQ(db);
	enum sd_result r;
	int off = failpoint_on(FP_DB_SYNC_OFF);

	q->sync_full = !off && sync == DB_SYNC_FULL;
	if ((r = db_exec(db, off ? "PRAGMA synchronous = OFF"
			     : q->sync_full ? "PRAGMA synchronous = FULL"
					    : "PRAGMA synchronous = NORMAL")) != SD_OK)
		return r;
	sqlite3_wal_hook(q->h, wal_committed, q);
	return SD_OK;
}

/* Transaction control runs on every turn of a worker: prepared once, not
 * parsed again by sqlite3_exec each time. */
static const char SQL_BEGIN[] = "BEGIN IMMEDIATE";
static const char SQL_COMMIT[] = "COMMIT";
static const char SQL_ROLLBACK[] = "ROLLBACK";

static enum sd_result db_tx_stmt(struct db *db, const char *sql)
{
	struct db_stmt *st = db_stmt(db, sql);

	return st ? db_run(st) : SD_DB;
}

static enum sd_result sq_tx_begin(struct db *db)
{
	struct sq *q = SQ(db);
	enum sd_result r;

	if (q->sync_full && q->gate && db_gate_poisoned(q->gate))
		return err_set(SD_IO, "a flush of %s failed earlier in this process: nothing more "
			       "is stored as durable until it starts again (check the disk)",
			       db->path);
	if (q->gate)
		q->gate_held = db_gate_enter(q->gate, q->busy_limit_ms);
	if ((r = db_tx_stmt(db, SQL_BEGIN)) != SD_OK)
		gate_leave(q);
	return r;
}

static enum sd_result sq_tx_commit(struct db *db)
{
	struct sq *q = SQ(db);
	enum sd_result r = db_tx_stmt(db, SQL_COMMIT);

	if (r != SD_OK && q->gate && sqlite3_extended_errcode(q->h) == SQLITE_IOERR_FSYNC)
		db_gate_poison(q->gate);
	if (r != SD_OK && !sqlite3_get_autocommit(q->h))
		db_tx_stmt(db, SQL_ROLLBACK);
	gate_leave(q);		/* a commit that wrote nothing calls no hook */
	return r;
}

static void sq_tx_rollback(struct db *db)
{
	struct sq *q = SQ(db);

	if (!sqlite3_get_autocommit(q->h))
		db_tx_stmt(db, SQL_ROLLBACK);
	gate_leave(q);
}

static enum sd_result sq_exec(struct db *db, const char *sql)
{
	sqlite3 *h = SQ(db)->h;
	int rc = sqlite3_exec(h, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK)
		return db_fail(h, rc, strncmp(sql, "PRAGMA", 6) == 0 || strlen(sql) < 40 ? sql : "schema");
	return SD_OK;
}

static struct db_stmt *sq_prepare(struct db *db, const char *sql, int persistent)
{
	struct sq_stmt *s;
	sqlite3 *h = SQ(db)->h;
	int rc;

	if (!(s = calloc(1, sizeof *s))) {
		err_set(SD_NOMEM, "out of memory preparing a statement");
		return NULL;
	}
	s->base.db = db;
	rc = sqlite3_prepare_v3(h, sql, -1, persistent ? SQLITE_PREPARE_PERSISTENT : 0, &s->st,
				NULL);
	if (rc != SQLITE_OK) {
		db_fail(h, rc, "prepare");
		free(s);
		return NULL;
	}
	return &s->base;
}

static void sq_finalize(struct db_stmt *st)
{
	if (!st)
		return;
	sqlite3_finalize(SQ_ST(st));
	free(st);
}

static void sq_reset(struct db_stmt *st)
{
	sqlite3_reset(SQ_ST(st));
	sqlite3_clear_bindings(SQ_ST(st));
}

static void sq_rewind(struct db_stmt *st)
{
	sqlite3_reset(SQ_ST(st));
}

static void sq_bind_int(struct db_stmt *st, int idx, int64_t v)
{
	sqlite3_bind_int64(SQ_ST(st), idx, v);
}

static void sq_bind_text(struct db_stmt *st, int idx, const char *s)
{
	sqlite3_bind_text(SQ_ST(st), idx, s, -1, SQLITE_TRANSIENT);
}

static void sq_bind_null(struct db_stmt *st, int idx)
{
	sqlite3_bind_null(SQ_ST(st), idx);
}

static void sq_bind_blob(struct db_stmt *st, int idx, const void *data, size_t len)
{
	sqlite3_bind_blob64(SQ_ST(st), idx, len ? data : "", (sqlite3_uint64)len, SQLITE_TRANSIENT);
}

static enum sd_result sq_step(struct db_stmt *st, int *row)
{
	sqlite3_stmt *s = SQ_ST(st);
	int rc = sqlite3_step(s);
	enum sd_result r;

	*row = rc == SQLITE_ROW;
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		return SD_OK;
	r = db_fail(sqlite3_db_handle(s), rc, "statement");
	sqlite3_reset(s);
	return r;
}

static int64_t sq_col_int(struct db_stmt *st, int col)
{
	return sqlite3_column_int64(SQ_ST(st), col);
}

static const char *sq_col_text(struct db_stmt *st, int col)
{
	return (const char *)sqlite3_column_text(SQ_ST(st), col);
}

static const void *sq_col_blob(struct db_stmt *st, int col, size_t *len)
{
	const void *p = sqlite3_column_blob(SQ_ST(st), col);

	*len = (size_t)sqlite3_column_bytes(SQ_ST(st), col);
	return p;
}

static int sq_col_is_null(struct db_stmt *st, int col)
{
	return sqlite3_column_type(SQ_ST(st), col) == SQLITE_NULL;
}

static int64_t sq_fullscan_steps(struct db *db)
{
	int64_t n = 0;
	int i;

	for (i = 0; i < db->n_cached; i++)
		n += sqlite3_stmt_status(SQ_ST(db->cache[i].st), SQLITE_STMTSTATUS_FULLSCAN_STEP, 0);
	return n;
}

static int64_t sq_changes(struct db *db)
{
	return sqlite3_changes64(SQ(db)->h);
}

static const char SQL_DATA_VERSION[] = "PRAGMA data_version";

static int64_t sq_data_version(struct db *db)
{
	struct db_stmt *st;
	int64_t v = -1;
	int row = 0;

	st = db_stmt(db, SQL_DATA_VERSION);
	if (st && db_step(st, &row) == SD_OK && row)
		v = db_col_int(st, 0);
	db_reset(st);
	return v;
}

/* ======================== checks ========================================= */

/* Both pragmas are run on a statement of their own, not the cache: they are
 * rare, and an integrity check's rows are read once. */
static enum sd_result sq_integrity_check(struct db *db, int *ok, char *problem, size_t size)
{
	struct sq *q = SQ(db);
	sqlite3_stmt *st;
	const char *text;
	int rc;

	*ok = 0;
	if (size)
		problem[0] = '\0';
	rc = sqlite3_prepare_v2(q->h, "PRAGMA integrity_check", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return db_fail(q->h, rc, "integrity_check");
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		enum sd_result r = db_fail(q->h, rc, "integrity_check");
		sqlite3_finalize(st);
		return r;
	}
	text = (const char *)sqlite3_column_text(st, 0);
	*ok = text && strcmp(text, "ok") == 0;
	if (!*ok)
		snprintf(problem, size, "integrity_check: %s", text ? text : "(no answer)");
	sqlite3_finalize(st);
	return SD_OK;
}

static enum sd_result sq_foreign_key_check(struct db *db, int *ok, char *problem,
					   size_t size)
{
	struct sq *q = SQ(db);
	sqlite3_stmt *st;
	int rc;

	*ok = 0;
	if (size)
		problem[0] = '\0';
	rc = sqlite3_prepare_v2(q->h, "PRAGMA foreign_key_check", -1, &st, NULL);
	if (rc != SQLITE_OK)
		return db_fail(q->h, rc, "foreign_key_check");
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		*ok = 1;
	} else if (rc == SQLITE_ROW) {
		/* table, rowid, parent table, index of the foreign key */
		const char *table = (const char *)sqlite3_column_text(st, 0);
		const char *parent = (const char *)sqlite3_column_text(st, 2);

		snprintf(problem, size, "foreign_key_check: %s row %lld refers to a missing %s row",
			 table ? table : "?", (long long)sqlite3_column_int64(st, 1),
			 parent ? parent : "?");
	} else {
		enum sd_result r = db_fail(q->h, rc, "foreign_key_check");
		sqlite3_finalize(st);
		return r;
	}
	sqlite3_finalize(st);
	return SD_OK;
}

/* ======================== maintenance ==================================== */

static enum sd_result sq_checkpoint(struct db *db, enum db_checkpoint_mode mode,
				    int64_t busy_ms, struct db_checkpoint_result *res)
{
	static const int modes[] = {
		[DB_CHECKPOINT_PASSIVE] = SQLITE_CHECKPOINT_PASSIVE,
		[DB_CHECKPOINT_RESTART] = SQLITE_CHECKPOINT_RESTART,
		[DB_CHECKPOINT_TRUNCATE] = SQLITE_CHECKPOINT_TRUNCATE,
	};
	struct sq *q = SQ(db);
	struct timespec nap = { 0, 200000L };
	int n_log = 0, n_ckpt = 0, rc;
	int64_t deadline, limit;

	if (res)
		memset(res, 0, sizeof *res);
	if (db->depth > 0)
		return err_set(SD_DB, "checkpoint inside a transaction");
	if (busy_ms < 0)
		busy_ms = 0;
	limit = q->busy_limit_ms;	/* this connection's own, back afterwards */
	q->busy_limit_ms = busy_ms;
	deadline = clock_mono_us() + busy_ms * 1000;
	for (;;) {
		n_log = n_ckpt = -1;
		rc = sqlite3_wal_checkpoint_v2(q->h, NULL, modes[mode], &n_log, &n_ckpt);
		/* -1 frames: another connection's checkpoint (a writer's
		 * autocheckpoint) holds the checkpoint lock, which SQLite does
		 * not wait for: wait for it here, within the same budget */
		if ((rc & 0xff) != SQLITE_BUSY || n_log >= 0 || mode == DB_CHECKPOINT_PASSIVE ||
		    clock_mono_us() >= deadline)
			break;
		nanosleep(&nap, NULL);
	}
	q->busy_limit_ms = limit;
	if (res) {
		res->wal_frames = n_log < 0 ? 0 : n_log;
		res->copied_frames = n_ckpt < 0 ? 0 : n_ckpt;
	}
	if ((rc & 0xff) == SQLITE_BUSY) {
		/* a reader stayed, or a writer held the lock: it did what a
		 * passive checkpoint does, and the next tick tries again */
		if (res)
			res->busy = 1;
		return SD_OK;
	}
	if (rc != SQLITE_OK)
		return db_fail(q->h, rc, "checkpoint");
	return SD_OK;
}

static enum sd_result sq_wal_bytes(struct db *db, int64_t *bytes)
{
	char path[PATH_MAX];
	struct stat sb;

	*bytes = 0;
	if (snprintf(path, sizeof path, "%s-wal", db->path) >= (int)sizeof path)
		return err_set(SD_INVALID, "database path too long: %s", db->path);
	if (stat(path, &sb) != 0) {
		if (errno == ENOENT)
			return SD_OK;
		return err_set(SD_IO, "stat %s: %s", path, strerror(errno));
	}
	*bytes = (int64_t)sb.st_size;
	return SD_OK;
}

static enum sd_result sq_optimize(struct db *db)
{
	enum sd_result r;

	/* analysis_limit bounds the rows ANALYZE reads per index, so the
	 * write lock it takes is short; PRAGMA optimize alone does nothing on
	 * a connection with no query history before SQLite 3.46 */
	if ((r = db_exec(db, "PRAGMA analysis_limit = 400")) != SD_OK ||
	    (r = db_exec(db, "ANALYZE")) != SD_OK)
		return r;
	return db_exec(db, "PRAGMA optimize");
}

/* one box per file: the run lock already makes this box the only one */
static enum sd_result sq_lock_try(struct db *db, int key, int *held)
{
	(void)db;
	(void)key;
	*held = 1;
	return SD_OK;
}

const struct db_engine db_engine_sqlite = {
	.kind = DB_SQLITE,
	.name = "sqlite",
	.open = sq_open,
	.close = sq_close,
	.version_read = sq_version_read,
	.version_write = sq_version_write,
	.migration_lock = sq_migration_lock,
	.migration_guard = sq_migration_guard,
	.tx_begin = sq_tx_begin,
	.tx_commit = sq_tx_commit,
	.tx_rollback = sq_tx_rollback,
	.exec = sq_exec,
	.prepare = sq_prepare,
	.finalize = sq_finalize,
	.reset = sq_reset,
	.bind_int = sq_bind_int,
	.bind_text = sq_bind_text,
	.bind_blob = sq_bind_blob,
	.col_blob = sq_col_blob,
	.bind_null = sq_bind_null,
	.step = sq_step,
	.rewind = sq_rewind,
	.col_int = sq_col_int,
	.col_text = sq_col_text,
	.col_is_null = sq_col_is_null,
	.changes = sq_changes,
	.lock_try = sq_lock_try,
	.backup = sq_backup,
	.fullscan_steps = sq_fullscan_steps,
	.data_version = sq_data_version,
	.integrity_check = sq_integrity_check,
	.foreign_key_check = sq_foreign_key_check,
	.checkpoint = sq_checkpoint,
	.wal_bytes = sq_wal_bytes,
	.optimize = sq_optimize,
};

const char *db_sqlite_lib_version(void)
{
	return sqlite3_libversion();
}
