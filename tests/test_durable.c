/*
 * test_durable.c: durable before visible.  What a FULL connection commits
 * (an order, a change a person was told of) is seen by no other connection,
 * process or box before the disk has it: a power cut can take only what
 * nobody has acted on yet.
 *
 * On SQLite the disk is made slow to flush: a VFS in front of the default
 * one, installed in a child process only, holds every sync of a -wal file
 * for a while and tells the test, through a pipe, when a sync begins ('S')
 * and when it has returned ('E').  The test reads the database on its own
 * raw connection meanwhile, through the default VFS, as the relay and the
 * workers would.  On PostgreSQL the server's own setting is made weaker for
 * the session, and FULL must not inherit it.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "db_group.h"
#include "testutil.h"

/* ======================== a disk slow to flush ========================== */

/* The slow VFS's file: its own header, then the real file's bytes. */
struct slow_file {
	sqlite3_file base;
	sqlite3_file *real;
	int wal;			/* a -wal file: its syncs are slow */
};

static sqlite3_vfs slow_vfs;
static sqlite3_vfs *slow_under;
static sqlite3_io_methods slow_methods;
static int slow_ms;
static int slow_fd = -1;		/* where 'S' and 'E' go; -1: nowhere */
static _Atomic int slow_syncs;		/* WAL syncs so far */

#define REAL(f) (((struct slow_file *)(f))->real)

static void slow_tell(char c)
{
	if (slow_fd >= 0 && write(slow_fd, &c, 1) != 1)
		_exit(9);
}

static int slow_sync(sqlite3_file *f, int flags)
{
	int rc;

	if (!((struct slow_file *)f)->wal)
		return REAL(f)->pMethods->xSync(REAL(f), flags);
	slow_syncs++;
	slow_tell('S');
	tu_sleep_ms(slow_ms);
	rc = REAL(f)->pMethods->xSync(REAL(f), flags);
	slow_tell('E');
	return rc;
}

static int slow_close(sqlite3_file *f)
{
	return REAL(f)->pMethods->xClose(REAL(f));
}

static int slow_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o)
{
	return REAL(f)->pMethods->xRead(REAL(f), b, n, o);
}

static int slow_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
	return REAL(f)->pMethods->xWrite(REAL(f), b, n, o);
}

static int slow_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int slow_size(sqlite3_file *f, sqlite3_int64 *size)
{
	return REAL(f)->pMethods->xFileSize(REAL(f), size);
}

static int slow_lock(sqlite3_file *f, int l)
{
	return REAL(f)->pMethods->xLock(REAL(f), l);
}

static int slow_unlock(sqlite3_file *f, int l)
{
	return REAL(f)->pMethods->xUnlock(REAL(f), l);
}

static int slow_reserved(sqlite3_file *f, int *out)
{
	return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}

static int slow_control(sqlite3_file *f, int op, void *arg)
{
	return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int slow_sector(sqlite3_file *f)
{
	return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int slow_caps(sqlite3_file *f)
{
	return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int slow_shm_map(sqlite3_file *f, int pg, int sz, int ext, void volatile **p)
{
	return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, ext, p);
}

static int slow_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
	return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}

static void slow_shm_barrier(sqlite3_file *f)
{
	REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int slow_shm_unmap(sqlite3_file *f, int del)
{
	return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

static int slow_fetch(sqlite3_file *f, sqlite3_int64 o, int n, void **p)
{
	return REAL(f)->pMethods->xFetch(REAL(f), o, n, p);
}

static int slow_unfetch(sqlite3_file *f, sqlite3_int64 o, void *p)
{
	return REAL(f)->pMethods->xUnfetch(REAL(f), o, p);
}

static int slow_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
	struct slow_file *s = (struct slow_file *)f;
	int rc;

	(void)vfs;
	s->real = (sqlite3_file *)(s + 1);
	s->wal = (flags & SQLITE_OPEN_WAL) != 0;
	rc = slow_under->xOpen(slow_under, name, s->real, flags, out);
	s->base.pMethods = s->real->pMethods ? &slow_methods : NULL;
	return rc;
}

static int slow_delete(sqlite3_vfs *v, const char *n, int sync)
{
	(void)v;
	return slow_under->xDelete(slow_under, n, sync);
}

static int slow_access(sqlite3_vfs *v, const char *n, int flags, int *out)
{
	(void)v;
	return slow_under->xAccess(slow_under, n, flags, out);
}

static int slow_full(sqlite3_vfs *v, const char *n, int size, char *out)
{
	(void)v;
	return slow_under->xFullPathname(slow_under, n, size, out);
}

static int slow_random(sqlite3_vfs *v, int n, char *out)
{
	(void)v;
	return slow_under->xRandomness(slow_under, n, out);
}

static int slow_nap(sqlite3_vfs *v, int us)
{
	(void)v;
	return slow_under->xSleep(slow_under, us);
}

static int slow_time(sqlite3_vfs *v, sqlite3_int64 *out)
{
	(void)v;
	return slow_under->xCurrentTimeInt64(slow_under, out);
}

static int slow_last_error(sqlite3_vfs *v, int n, char *out)
{
	(void)v;
	return slow_under->xGetLastError(slow_under, n, out);
}

/* slow_install: from now on, in this process, every connection opened
 * with the default VFS waits ms in each sync of a WAL file, telling fd. */
static void slow_install(int ms, int fd)
{
	static const sqlite3_io_methods m = {
		3, slow_close, slow_read, slow_write, slow_truncate, slow_sync, slow_size,
		slow_lock, slow_unlock, slow_reserved, slow_control, slow_sector, slow_caps,
		slow_shm_map, slow_shm_lock, slow_shm_barrier, slow_shm_unmap, slow_fetch,
		slow_unfetch,
	};

	slow_ms = ms;
	slow_fd = fd;
	slow_methods = m;
	slow_under = sqlite3_vfs_find(NULL);
	slow_vfs.iVersion = 2;
	slow_vfs.szOsFile = (int)sizeof(struct slow_file) + slow_under->szOsFile;
	slow_vfs.mxPathname = slow_under->mxPathname;
	slow_vfs.zName = "slow-flush";
	slow_vfs.xOpen = slow_open;
	slow_vfs.xDelete = slow_delete;
	slow_vfs.xAccess = slow_access;
	slow_vfs.xFullPathname = slow_full;
	slow_vfs.xRandomness = slow_random;
	slow_vfs.xSleep = slow_nap;
	slow_vfs.xGetLastError = slow_last_error;
	slow_vfs.xCurrentTimeInt64 = slow_time;
	assert_int_equal(sqlite3_vfs_register(&slow_vfs, 1), SQLITE_OK);
}

/* ======================== watching from outside ========================= */

/* What a reader in another process saw of the writer's commits. */
struct watch {
	int syncs_begun, syncs_ended, committed;
	int seen_during_sync;		/* reads that saw the row while a sync was held */
	int reads;
};

/* Take the child's news ('S', 'E', 'C') without waiting. */
static void watch_drain(struct watch *w, int fd)
{
	char buf[64];
	ssize_t n, i;

	while ((n = read(fd, buf, sizeof buf)) > 0)
		for (i = 0; i < n; i++) {
			w->syncs_begun += buf[i] == 'S';
			w->syncs_ended += buf[i] == 'E';
			w->committed += buf[i] == 'C';
		}
}

/* One count on a raw connection of the default VFS, as another process of
 * the box reads: -1 when it cannot be read. */
static int raw_count(const char *path, const char *sql)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	int n = -1;

	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, "unix") == SQLITE_OK &&
	    sqlite3_busy_timeout(h, 2000) == SQLITE_OK &&
	    sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return n;
}

/*
 * Read the row's count until the child has committed (and ended): a read
 * that sees the row counts against the writer when, both before and after
 * it, the child had begun more syncs than it had ended: the row was
 * visible while the flush that makes it durable was still running.
 */
static void watch_child(struct watch *w, int fd, const char *path, const char *sql, pid_t kid)
{
	int64_t until = clock_mono_us() + 20 * 1000000LL;
	int status = 0;

	memset(w, 0, sizeof *w);
	while (clock_mono_us() < until) {
		int in_sync, seen;

		watch_drain(w, fd);
		in_sync = w->syncs_begun > w->syncs_ended;
		seen = raw_count(path, sql) > 0;
		w->reads++;
		watch_drain(w, fd);
		if (seen && in_sync && w->syncs_begun > w->syncs_ended)
			w->seen_during_sync++;
		if (w->committed && waitpid(kid, &status, WNOHANG) == kid)
			break;
		tu_sleep_ms(2);
	}
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	watch_drain(w, fd);
}

/* ======================== SQLite ======================================== */

static const char SQL_ROW_IN[] =
	"INSERT INTO done_totals (kind, pruned) VALUES ('durable', 1)";
static const char SQL_ROW_COUNT[] = "SELECT count(*) FROM done_totals WHERE kind = 'durable'";

/* The child: a FULL connection on a disk that takes ms to flush commits
 * one row, then says 'C'. */
static void __attribute__((noreturn)) full_writer(const char *path, int ms, int fd)
{
	struct db *db;

	slow_install(ms, fd);
	if (db_open(path, 0, DB_SYNC_FULL, &db) != SD_OK || db_exec(db, SQL_ROW_IN) != SD_OK)
		_exit(3);
	slow_tell('C');
	db_close(db);
	_exit(0);
}

/* A FULL commit is visible to no other connection before its WAL's sync
 * has returned: a reader in another process that polls the table while the
 * disk holds the flush for 400 ms never sees the row, and sees it once the
 * commit has returned. */
static void test_full_commit_unseen_until_flushed(void **state)
{
	struct tu_env *env = *state;
	struct watch w;
	int p[2];
	pid_t kid;

	TU_SQLITE_ONLY();
	db_close(env->db);
	env->db = NULL;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_true((kid = fork()) >= 0);
	if (kid == 0) {
		close(p[0]);
		full_writer(env->db_path, 400, p[1]);
	}
	close(p[1]);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	watch_child(&w, p[0], env->db_path, SQL_ROW_COUNT, kid);
	close(p[0]);
	print_message("    %d reads, %d WAL syncs held, the row seen while one was held: %d\n",
		      w.reads, w.syncs_begun, w.seen_during_sync);
	assert_true(w.syncs_begun >= 1);	/* the commit was flushed, slowly */
	assert_int_equal(w.syncs_begun, w.syncs_ended);
	assert_true(w.reads > 50);		/* the reader looked all the while */
	assert_int_equal(w.seen_during_sync, 0);
	assert_int_equal(raw_count(env->db_path, SQL_ROW_COUNT), 1);
}

/* ======================== group commit ================================== */

#define GROUP_WRITERS 12

/* One thread's write: its row, refused afterwards when odd. */
struct gw {
	struct db_group *g;
	const char *path;
	pthread_barrier_t *start;
	int i;
	int hold_ms;			/* sleep inside the write (a leader holding a commit) */
	int lose;			/* end the transaction behind the store's back */
	enum sd_result r;
	char err[200];
	int seen_after;			/* its row, read on a raw connection after it returned */
};

static enum sd_result gw_write(struct db *db, void *arg)
{
	struct gw *w = arg;
	char sql[128];
	enum sd_result r;

	snprintf(sql, sizeof sql, "INSERT INTO done_totals (kind, pruned) VALUES ('g%d', 1)", w->i);
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = db_exec(db, sql)) == SD_OK && w->hold_ms)
		tu_sleep_ms(w->hold_ms);
	if (r == SD_OK && w->lose) {
		/* as SQLite does by itself on a full disk */
		assert_int_equal(db_exec(db, "ROLLBACK"), SD_OK);
		r = err_set(SD_IO, "the disk is full: nothing was stored (write %d)", w->i);
	} else if (r == SD_OK && w->i % 2) {
		r = err_set(SD_INVALID, "write %d refused after its insert", w->i);
	}
	return db_end(db, r);
}

static void *gw_thread(void *arg)
{
	struct gw *w = arg;
	struct db *own;
	char sql[96];

	assert_int_equal(db_open(w->path, 0, DB_SYNC_FULL, &own), SD_OK);
	if (w->start)
		pthread_barrier_wait(w->start);
	err_clear();
	w->r = db_group_run(w->g, own, gw_write, w);
	snprintf(w->err, sizeof w->err, "%s", err_msg());
	snprintf(sql, sizeof sql, "SELECT count(*) FROM done_totals WHERE kind = 'g%d'", w->i);
	w->seen_after = raw_count(w->path, sql);
	db_close(own);
	return NULL;
}

/* Writes of many threads at once: each thread's write commits with others
 * in far fewer flushes than writes, each returns only once its row is
 * stored and visible, and a write refused after its insert takes back its
 * own row only, with its own message. */
static void test_group_each_write_its_own(void **state)
{
	struct tu_env *env = *state;
	struct gw w[GROUP_WRITERS];
	pthread_t t[GROUP_WRITERS];
	pthread_barrier_t start;
	struct db_group *g = NULL;
	int i, syncs;

	TU_SQLITE_ONLY();
	slow_install(50, -1);
	assert_int_equal(db_group_new(env->db_path, &g), SD_OK);
	assert_non_null(g);
	pthread_barrier_init(&start, NULL, GROUP_WRITERS);
	syncs = slow_syncs;
	for (i = 0; i < GROUP_WRITERS; i++) {
		w[i] = (struct gw){ g, env->db_path, &start, i, 0, 0, SD_OK, "", -1 };
		assert_int_equal(pthread_create(&t[i], NULL, gw_thread, &w[i]), 0);
	}
	for (i = 0; i < GROUP_WRITERS; i++)
		pthread_join(t[i], NULL);
	syncs = slow_syncs - syncs;
	db_group_free(g);
	assert_int_equal(sqlite3_vfs_unregister(&slow_vfs), SQLITE_OK);
	pthread_barrier_destroy(&start);
	print_message("    %d writes, %d WAL flushes\n", GROUP_WRITERS, syncs);
	assert_true(syncs >= 1);
	assert_true(syncs <= GROUP_WRITERS / 3);
	for (i = 0; i < GROUP_WRITERS; i++) {
		if (i % 2) {
			char want[80];

			snprintf(want, sizeof want, "write %d refused after its insert", i);
			assert_int_equal(w[i].r, SD_INVALID);
			assert_string_equal(w[i].err, want);
			assert_int_equal(w[i].seen_after, 0);
		} else {
			assert_int_equal(w[i].r, SD_OK);
			assert_int_equal(w[i].seen_after, 1);
		}
	}
	assert_int_equal(raw_count(env->db_path, "SELECT count(*) FROM done_totals WHERE kind "
				   "GLOB 'g*'"), GROUP_WRITERS / 2);
}

/* A write whose failure takes the whole transaction with it (SQLite rolls
 * back by itself on a full disk) fails every write of its commit, with its
 * own message, and stores none; the group goes on afterwards. */
static void test_group_write_losing_the_transaction(void **state)
{
	struct tu_env *env = *state;
	struct gw hold, a, b, after;
	pthread_t th, ta, tb;
	struct db_group *g = NULL;

	TU_SQLITE_ONLY();
	assert_int_equal(db_group_new(env->db_path, &g), SD_OK);
	/* the holder leads a commit for 300 ms; a and b join the line meanwhile
	 * and are committed together by the next leader */
	hold = (struct gw){ g, env->db_path, NULL, 0, 300, 0, SD_OK, "", -1 };
	a = (struct gw){ g, env->db_path, NULL, 2, 0, 0, SD_OK, "", -1 };
	b = (struct gw){ g, env->db_path, NULL, 4, 0, 1, SD_OK, "", -1 };
	assert_int_equal(pthread_create(&th, NULL, gw_thread, &hold), 0);
	tu_sleep_ms(100);
	assert_int_equal(pthread_create(&ta, NULL, gw_thread, &a), 0);
	tu_sleep_ms(20);
	assert_int_equal(pthread_create(&tb, NULL, gw_thread, &b), 0);
	pthread_join(th, NULL);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	assert_int_equal(hold.r, SD_OK);
	assert_int_equal(hold.seen_after, 1);
	assert_int_equal(a.r, SD_IO);
	assert_int_equal(b.r, SD_IO);
	assert_string_equal(a.err, "the disk is full: nothing was stored (write 4)");
	assert_string_equal(b.err, a.err);
	assert_int_equal(a.seen_after, 0);
	assert_int_equal(b.seen_after, 0);
	after = (struct gw){ g, env->db_path, NULL, 6, 0, 0, SD_OK, "", -1 };
	gw_thread(&after);
	assert_int_equal(after.r, SD_OK);
	assert_int_equal(after.seen_after, 1);
	db_group_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_full_commit_unseen_until_flushed, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_group_each_write_its_own, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_group_write_losing_the_transaction, tu_setup,
						tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
