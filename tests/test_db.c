/*
 * test_db.c: opening, migrating and refusing database files; nested
 * transactions; the prepared-statement cache.
 *
 * A raw SQLite connection (not db.h) makes the files db_open must refuse and
 * reads them back, so the checks do not trust the code under test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "queue.h"
#include "testutil.h"
#include "worker.h"

/* ======================== helpers ======================================== */

static int exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}


static void raw_exec(const char *path, const char *sql)
{
	sqlite3 *h = NULL;

	assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
					 NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_close(h), SQLITE_OK);
}

/* One integer or text value read on a raw, read-only connection. */
static void raw_value(const char *path, const char *sql, int64_t *i, char *text, size_t size)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;

	assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	if (i)
		*i = sqlite3_column_int64(st, 0);
	if (text)
		snprintf(text, size, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	assert_int_equal(sqlite3_close(h), SQLITE_OK);
}

static int64_t raw_int(const char *path, const char *sql)
{
	int64_t v = -1;

	raw_value(path, sql, &v, NULL, 0);
	return v;
}

static const char SQL_USER_VERSION[] = "PRAGMA user_version";
static const char SQL_JOURNAL_MODE[] = "PRAGMA journal_mode";
static const char SQL_FOREIGN_KEYS[] = "PRAGMA foreign_keys";
static const char SQL_SYNCHRONOUS[] = "PRAGMA synchronous";
static const char SQL_TABLES[] =
	"SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
	"('stream', 'done_jobs', 'dead_jobs', 'done_totals', 'outbox')";
static const char SQL_N_TOTALS[] = "SELECT count(*) FROM done_totals";

static int64_t one_int(struct db *db, const char *sql)
{
	struct db_stmt *st = db_stmt(db, sql);
	int64_t v;
	int row = 0;

	assert_non_null(st);
	assert_int_equal(db_step(st, &row), SD_OK);
	assert_int_equal(row, 1);
	v = db_col_int(st, 0);
	db_reset(st);
	return v;
}

/* ======================== opening and migrating ========================== */

static void test_migrate_from_empty(void **state)
{
	struct tu_env *env = *state;
	struct db *db = NULL, *full = NULL;
	char path[400], mode[16];
	struct db_stmt *st;
	int row = 0;

	TU_SQLITE_ONLY();
	/* the directory is made too */
	snprintf(path, sizeof path, "%s/var/lib/sd.db", env->dir);
	assert_int_equal(db_open(path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &db), SD_OK);
	assert_non_null(db);
	assert_true(db_migration_count >= 1);
	assert_int_equal(db_migrations[db_migration_count - 1].version, db_migration_count);
	assert_int_equal(db_schema_version(db), db_migration_count);
	assert_string_equal(db_path(db), path);
	assert_int_equal(one_int(db, SQL_USER_VERSION), db_migration_count);
	assert_int_equal(one_int(db, SQL_TABLES), 5);
	assert_int_equal(one_int(db, SQL_FOREIGN_KEYS), 1);
	assert_int_equal(one_int(db, SQL_SYNCHRONOUS), 1);	/* NORMAL */
	st = db_stmt(db, SQL_JOURNAL_MODE);
	assert_non_null(st);
	assert_int_equal(db_step(st, &row), SD_OK);
	assert_int_equal(row, 1);
	assert_string_equal(db_col_text(st, 0), "wal");
	db_reset(st);
	assert_false(db_in_tx(db));

	/* the file itself says so, read without db.h */
	assert_int_equal(raw_int(path, "PRAGMA user_version"), db_migration_count);
	raw_value(path, "PRAGMA journal_mode", NULL, mode, sizeof mode);
	assert_string_equal(mode, "wal");

	/* FULL commits at synchronous=FULL, durable before any reader sees
	 * them (test_durable slows the flush, test_powercut cuts the power
	 * under it); the rest at NORMAL */
	assert_int_equal(db_open(path, 0, DB_SYNC_FULL, &full), SD_OK);
	assert_int_equal(one_int(full, SQL_SYNCHRONOUS), 2);
	assert_int_equal(one_int(db, SQL_SYNCHRONOUS), 1);
	db_close(full);
	db_close(db);
	db_close(NULL);
}

static void test_reopen_keeps_data(void **state)
{
	struct tu_env *env = *state;
	struct enqueue e = { "noop", "{\"n\": 1}", "survivor", 0, 0 };
	struct db *again = NULL, *second = NULL;
	int64_t n = -1;

	assert_int_equal(queue_enqueue(env->db, &e, NULL), SD_OK);
	db_close(env->db);
	env->db = NULL;

	/* "init" twice: open with create on an existing file */
	assert_int_equal(db_open(env->db_path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &env->db), SD_OK);
	assert_int_equal(db_schema_version(env->db), tu_pg() ? db_migration_count_pg :
			 db_migration_count);
	if (!tu_pg())
		assert_int_equal(one_int(env->db, SQL_TABLES), 5);
	assert_int_equal(queue_pending(env->db, &n), SD_OK);
	assert_int_equal(n, 1);

	/* and a second connection while the first is open */
	assert_int_equal(db_open(env->db_path, 0, DB_SYNC_FULL, &second), SD_OK);
	assert_int_equal(queue_pending(second, &n), SD_OK);
	assert_int_equal(n, 1);
	db_close(second);
	assert_int_equal(db_open(env->db_path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &again), SD_OK);
	db_close(again);
	assert_int_equal(tu_count(env->db_path,
				  "SELECT count(*) FROM stream WHERE job_id = 'survivor'"), 1);
	if (!tu_pg())
		assert_int_equal(raw_int(env->db_path, "PRAGMA user_version"), db_migration_count);
}

/* db_open on a file of a newer schema: SD_SCHEMA, and not one byte changed. */
static void assert_newer_refused(const char *path, int64_t version)
{
	unsigned char *before, *after;
	size_t nb, na;
	struct db *db = NULL;
	char want[64], wal[400];
	int flags;

	snprintf(wal, sizeof wal, "%s-wal", path);
	assert_false(exists(wal));
	before = tu_slurp(path, &nb);
	for (flags = 0; flags <= DB_OPEN_CREATE; flags += DB_OPEN_CREATE) {
		err_clear();
		assert_int_equal(db_open(path, flags, DB_SYNC_FULL, &db), SD_SCHEMA);
		assert_null(db);
		/* the message names the file's version and ours */
		snprintf(want, sizeof want, "schema version %lld", (long long)version);
		assert_non_null(strstr(err_msg(), want));
		snprintf(want, sizeof want, "program's %d", db_migration_count);
		assert_non_null(strstr(err_msg(), want));
		assert_non_null(strstr(err_msg(), path));
		after = tu_slurp(path, &na);
		assert_int_equal(na, nb);
		assert_memory_equal(after, before, nb);
		free(after);
		assert_false(exists(wal));
	}
	free(before);
	assert_int_equal(raw_int(path, "PRAGMA user_version"), version);
}

static void test_newer_schema_refused_unchanged(void **state)
{
	struct tu_env *env = *state;
	char sql[64];

	TU_SQLITE_ONLY();
	/* a file of ours (WAL mode) that a newer program moved on */
	db_close(env->db);
	env->db = NULL;
	snprintf(sql, sizeof sql, "PRAGMA user_version = %d", db_migration_count + 1);
	raw_exec(env->db_path, sql);
	assert_newer_refused(env->db_path, db_migration_count + 1);
}

static void test_newer_schema_not_switched_to_wal(void **state)
{
	struct tu_env *env = *state;
	char sql[200], mode[16];

	TU_SQLITE_ONLY();
	/* a rollback-journal file: opening must not even turn on WAL, which
	 * would rewrite the header's file-format bytes */
	snprintf(sql, sizeof sql,
		 "CREATE TABLE future (x INTEGER); INSERT INTO future VALUES (1); "
		 "PRAGMA user_version = %d", db_migration_count + 5);
	raw_exec(env->db_path, sql);
	raw_value(env->db_path, "PRAGMA journal_mode", NULL, mode, sizeof mode);
	assert_string_equal(mode, "delete");
	assert_newer_refused(env->db_path, db_migration_count + 5);
	raw_value(env->db_path, "PRAGMA journal_mode", NULL, mode, sizeof mode);
	assert_string_equal(mode, "delete");
	assert_int_equal(raw_int(env->db_path, "SELECT count(*) FROM future"), 1);
	assert_int_equal(raw_int(env->db_path, "SELECT count(*) FROM sqlite_schema "
				 "WHERE name = 'stream'"), 0);
}

/* Another program's SQLite file: refused, not adopted, not switched to WAL. */
static void test_foreign_sqlite_file_refused(void **state)
{
	struct tu_env *env = *state;
	struct db *db = NULL;
	unsigned char *before, *after;
	size_t nb, na;
	char mode[16];

	TU_SQLITE_ONLY();
	raw_exec(env->db_path, "CREATE TABLE customers (name TEXT); "
			       "INSERT INTO customers VALUES ('kept')");
	before = tu_slurp(env->db_path, &nb);
	err_clear();
	assert_int_equal(db_open(env->db_path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &db), SD_SCHEMA);
	assert_null(db);
	assert_non_null(strstr(err_msg(), "another program"));
	assert_non_null(strstr(err_msg(), env->db_path));
	after = tu_slurp(env->db_path, &na);
	assert_int_equal(na, nb);
	assert_memory_equal(after, before, nb);
	free(before);
	free(after);
	raw_value(env->db_path, "PRAGMA journal_mode", NULL, mode, sizeof mode);
	assert_string_equal(mode, "delete");
	assert_int_equal(raw_int(env->db_path, "SELECT count(*) FROM sqlite_schema "
				 "WHERE name = 'stream'"), 0);
}

static void test_missing_file_not_found(void **state)
{
	struct tu_env *env = *state;
	struct db *db = NULL;
	char path[400];

	TU_SQLITE_ONLY();
	err_clear();
	assert_int_equal(db_open(env->db_path, 0, DB_SYNC_NORMAL, &db), SD_NOT_FOUND);
	assert_null(db);
	assert_non_null(strstr(err_msg(), env->db_path));
	assert_false(exists(env->db_path));

	snprintf(path, sizeof path, "%s/no/such/dir/x.db", env->dir);
	assert_int_equal(db_open(path, 0, DB_SYNC_NORMAL, &db), SD_NOT_FOUND);
	snprintf(path, sizeof path, "%s/no", env->dir);
	assert_false(exists(path));

	assert_int_equal(db_open("", DB_OPEN_CREATE, DB_SYNC_NORMAL, &db), SD_INVALID);
	assert_int_equal(db_open(env->dir, DB_OPEN_CREATE, DB_SYNC_NORMAL, &db), SD_INVALID);
	assert_non_null(strstr(err_msg(), "not a regular file"));
	assert_null(db);
}

static void test_not_a_database(void **state)
{
	struct tu_env *env = *state;
	struct db *db = NULL;
	unsigned char *before, *after;
	size_t nb, na;
	char wal[400];
	FILE *f;
	int i;

	TU_SQLITE_ONLY();
	f = fopen(env->db_path, "w");
	assert_non_null(f);
	for (i = 0; i < 100; i++)
		fprintf(f, "this is a ticket list, not a database: line %d\n", i);
	fclose(f);
	before = tu_slurp(env->db_path, &nb);

	err_clear();
	assert_int_equal(db_open(env->db_path, 0, DB_SYNC_NORMAL, &db), SD_DB);
	assert_null(db);
	assert_non_null(strstr(err_msg(), env->db_path));
	assert_non_null(strstr(err_msg(), "not a usable Stagedoor database"));
	assert_int_equal(db_open(env->db_path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &db), SD_DB);
	assert_null(db);

	after = tu_slurp(env->db_path, &na);
	assert_int_equal(na, nb);
	assert_memory_equal(after, before, nb);
	snprintf(wal, sizeof wal, "%s-wal", env->db_path);
	assert_false(exists(wal));
	free(before);
	free(after);
}

/* ======================== transactions =================================== */

static void test_nested_begin_joins_outer(void **state)
{
	struct tu_env *env = *state;
	struct db *db = env->db;

	assert_false(db_in_tx(db));
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(db_exec(db, "INSERT INTO done_totals (kind, pruned) VALUES ('a', 1)"), SD_OK);
	assert_int_equal(db_begin(db), SD_OK);	/* joins */
	assert_int_equal(db_exec(db, "INSERT INTO done_totals (kind, pruned) VALUES ('b', 1)"), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);	/* inner: nothing committed yet */
	assert_true(db_in_tx(db));
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM done_totals"), 0);
	assert_int_equal(one_int(db, SQL_N_TOTALS), 2);
	assert_int_equal(db_commit(db), SD_OK);
	assert_false(db_in_tx(db));
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM done_totals"), 2);
	assert_int_equal(db_commit(db), SD_DB);	/* no transaction open */

	/* an outer rollback takes the committed inner level with it */
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(db_exec(db, "INSERT INTO done_totals (kind, pruned) VALUES ('c', 1)"), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);
	db_rollback(db);
	assert_false(db_in_tx(db));
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM done_totals"), 2);
	db_rollback(db);	/* harmless with nothing open */
}

static void test_inner_rollback_dooms_outer(void **state)
{
	struct tu_env *env = *state;
	struct db *db = env->db;

	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(db_exec(db, "INSERT INTO done_totals (kind, pruned) VALUES ('a', 1)"), SD_OK);
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(db_exec(db, "INSERT INTO done_totals (kind, pruned) VALUES ('b', 1)"), SD_OK);
	db_rollback(db);	/* inner failure */
	assert_true(db_in_tx(db));
	/* the outer level goes on, but its commit cannot succeed */
	assert_int_equal(db_exec(db, "INSERT INTO done_totals (kind, pruned) VALUES ('c', 1)"), SD_OK);
	err_clear();
	assert_int_not_equal(db_commit(db), SD_OK);
	assert_true(strlen(err_msg()) > 0);
	assert_false(db_in_tx(db));
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM done_totals"), 0);
	assert_int_equal(one_int(db, SQL_N_TOTALS), 0);

	/* the doom ends with that transaction */
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(db_exec(db, "INSERT INTO done_totals (kind, pruned) VALUES ('d', 1)"), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM done_totals"), 1);
}

/* ======================== the statement cache ============================ */

static const char SQL_ECHO_A[] = "SELECT ?1";
static const char SQL_ECHO_B[] = "SELECT ?1";
static const char SQL_BAD[] = "SELEKT nothing FROM nowhere";

static void test_stmt_cache_by_address(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	struct db_stmt *a, *a2, *b;
	int row = 0;

	a = db_stmt(db, SQL_ECHO_A);
	assert_non_null(a);
	db_bind_int(a, 1, 42);
	assert_int_equal(db_step(a, &row), SD_OK);
	assert_int_equal(row, 1);
	assert_int_equal(db_col_int(a, 0), 42);
	/* left mid-result on purpose: the next db_stmt must hand it back reset */

	a2 = db_stmt(db, SQL_ECHO_A);
	assert_ptr_equal(a2, a);
	assert_int_equal(db_step(a2, &row), SD_OK);
	assert_int_equal(row, 1);	/* reset: the row comes again */
	assert_true(db_col_is_null(a2, 0));	/* and the binding was cleared */
	db_reset(a2);

	/* the key is the address, not the text */
	b = db_stmt(db, SQL_ECHO_B);
	assert_non_null(b);
	assert_ptr_not_equal(b, a);
	assert_ptr_equal(db_stmt(db, SQL_ECHO_B), b);
	assert_ptr_equal(db_stmt(db, SQL_ECHO_A), a);

	err_clear();
	if (tu_pg()) {
		/* PostgreSQL prepares at the first step, typed by the bindings */
		assert_non_null(b = db_stmt(db, SQL_BAD));
		assert_int_equal(db_step(b, &row), SD_DB);
		assert_int_equal(row, 0);
	} else {
		assert_null(db_stmt(db, SQL_BAD));
	}
	assert_true(strlen(err_msg()) > 0);
	db_reset(NULL);
}

/* ---- file modes: buyers' data is the box user's alone ------------------- */

static unsigned mode_of(const char *path)
{
	struct stat sb;

	if (stat(path, &sb) != 0)
		fail_msg("stat %s failed", path);
	return (unsigned)(sb.st_mode & 07777);
}

static void test_new_database_is_private_whatever_the_umask(void **state)
{
	struct tu_env *e = *state;
	char path[400], wal[410], shm[410], sub[300];
	struct db *db = NULL;
	mode_t old = umask(0);

	TU_SQLITE_ONLY();
	snprintf(sub, sizeof sub, "%s/box", e->dir);
	snprintf(path, sizeof path, "%s/stagedoor.db", sub);
	snprintf(wal, sizeof wal, "%s-wal", path);
	snprintf(shm, sizeof shm, "%s-shm", path);
	assert_int_equal(db_open(path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &db), SD_OK);
	umask(old);
	assert_int_equal(db_exec(db, "INSERT INTO stream (job_id, kind, payload, visible_at, "
				 "created_at) VALUES ('j', 'k', '{}', 0, 0)"), SD_OK);
	assert_int_equal(mode_of(path), 0600);
	assert_int_equal(mode_of(wal), 0600);
	assert_int_equal(mode_of(shm), 0600);
	assert_int_equal(mode_of(sub), 0700);	/* the folder made for it */
	db_close(db);
}

static void test_existing_database_is_tightened_with_a_log_line(void **state)
{
	struct tu_env *e = *state;
	char wal[310], logp[310];
	struct db *db = NULL;
	int saved, fd;
	char *text;
	size_t size;

	TU_SQLITE_ONLY();
	snprintf(wal, sizeof wal, "%s-wal", e->db_path);
	snprintf(logp, sizeof logp, "%s/log", e->dir);
	assert_int_equal(db_open(e->db_path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &db), SD_OK);
	db_close(db);
	assert_int_equal(chmod(e->db_path, 0644), 0);
	if (access(wal, F_OK) == 0)
		assert_int_equal(chmod(wal, 0664), 0);
	/* the warning goes to stderr: catch it in a file */
	fflush(stderr);
	saved = dup(2);
	fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(saved >= 0 && fd >= 0);
	dup2(fd, 2);
	close(fd);
	assert_int_equal(db_open(e->db_path, 0, DB_SYNC_NORMAL, &db), SD_OK);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	assert_int_equal(mode_of(e->db_path), 0600);
	if (access(wal, F_OK) == 0)
		assert_int_equal(mode_of(wal), 0600);
	text = (char *)tu_slurp(logp, &size);
	if (!strstr(text, "now the box user's alone") || !strstr(text, "was=0644 now=0600"))
		tu_fail_free(text, NULL, "no tightening line in: %s", text);
	free(text);
	db_close(db);
	/* a private one is left as it is, silently */
	assert_int_equal(chmod(e->db_path, 0400 | 0200), 0);
	assert_int_equal(db_open(e->db_path, 0, DB_SYNC_NORMAL, &db), SD_OK);
	assert_int_equal(mode_of(e->db_path), 0600);
	db_close(db);
}

/* ======================== PostgreSQL ====================================== */


static const char SQL_PG_VERSION[] = "SELECT version FROM stagedoor_schema";
static const char SQL_PG_VERSION_ROWS[] = "SELECT count(*) FROM stagedoor_schema";
static const char SQL_PG_TABLES[] =
	"SELECT count(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename IN "
	"('stream', 'done_jobs', 'dead_jobs', 'done_totals', 'outbox')";

/* Both engines' migrations carry the same numbers and names. */
static void test_engines_share_migrations(void **state)
{
	int i;

	(void)state;
	assert_int_equal(db_migration_count_pg, db_migration_count);
	for (i = 0; i < db_migration_count; i++) {
		assert_int_equal(db_migrations_pg[i].version, db_migrations[i].version);
		assert_string_equal(db_migrations_pg[i].name, db_migrations[i].name);
	}
}

static void test_pg_migrated_and_versioned(void **state)
{
	struct tu_env *env = *state;
	struct db *again = NULL;

	TU_PG_ONLY();
	assert_int_equal(db_kind(env->db), DB_PG);
	assert_int_equal(db_schema_version(env->db), db_migration_count_pg);
	assert_int_equal(one_int(env->db, SQL_PG_VERSION), db_migration_count_pg);
	assert_int_equal(one_int(env->db, SQL_PG_TABLES), 5);
	/* a second box opening the same database migrates nothing */
	assert_int_equal(db_open(env->db_path, 0, DB_SYNC_FULL, &again), SD_OK);
	assert_int_equal(db_schema_version(again), db_migration_count_pg);
	db_close(again);
	assert_int_equal(one_int(env->db, SQL_PG_VERSION_ROWS), 1);
}

static void test_pg_newer_schema_refused(void **state)
{
	struct tu_env *env = *state;
	struct db *db = NULL;
	char sql[80], want[64];

	TU_PG_ONLY();
	snprintf(sql, sizeof sql, "UPDATE stagedoor_schema SET version = %d",
		 db_migration_count_pg + 1);
	assert_int_equal(db_exec(env->db, sql), SD_OK);
	err_clear();
	assert_int_equal(db_open(env->db_path, 0, DB_SYNC_FULL, &db), SD_SCHEMA);
	assert_null(db);
	snprintf(want, sizeof want, "schema version %d", db_migration_count_pg + 1);
	assert_non_null(strstr(err_msg(), want));
	assert_non_null(strstr(err_msg(), "nothing was changed"));
	assert_int_equal(one_int(env->db, SQL_PG_VERSION), db_migration_count_pg + 1);
}

/* A box holds the shared box lock (run does, for its life): an open that
 * would migrate the database refuses, says why and changes nothing; once
 * the box is gone the guard lets it through. */
static void test_pg_no_migration_under_a_running_box(void **state)
{
	struct tu_env *env = *state;
	struct db *box = NULL, *db = NULL;
	char sql[80];

	TU_PG_ONLY();
	assert_int_equal(db_open(env->db_path, 0, DB_SYNC_FULL, &box), SD_OK);
	assert_int_equal(db_box_lock_hold(box), SD_OK);
	/* the database as the version before the last migration left it */
	snprintf(sql, sizeof sql, "UPDATE stagedoor_schema SET version = %d",
		 db_migration_count_pg - 1);
	assert_int_equal(db_exec(env->db, sql), SD_OK);
	err_clear();
	assert_int_equal(db_open(env->db_path, 0, DB_SYNC_FULL, &db), SD_BUSY);
	assert_null(db);
	assert_non_null(strstr(err_msg(), "boxes are running on it"));
	assert_non_null(strstr(err_msg(), "nothing was changed"));
	assert_int_equal(one_int(env->db, SQL_PG_VERSION), db_migration_count_pg - 1);
	db_close(box);
	/* no box now: the guard passes (the migration itself then finds its
	 * objects there, since only the version was turned back) */
	err_clear();
	assert_int_not_equal(db_open(env->db_path, 0, DB_SYNC_FULL, &db), SD_BUSY);
	db_close(db);
	snprintf(sql, sizeof sql, "UPDATE stagedoor_schema SET version = %d",
		 db_migration_count_pg);
	assert_int_equal(db_exec(env->db, sql), SD_OK);
}

static void test_pg_foreign_schema_refused(void **state)
{
	struct tu_env *env = *state;
	struct db *db = NULL;
	char sql[160];

	TU_PG_ONLY();
	snprintf(sql, sizeof sql, "CREATE TABLE %s.future (x BIGINT)", env->pg_schema);
	tu_pg_admin(sql);
	err_clear();
	assert_int_equal(db_open(env->db_path, DB_OPEN_CREATE, DB_SYNC_FULL, &db), SD_SCHEMA);
	assert_non_null(strstr(err_msg(), "another program"));
	/* nothing of ours was added */
	snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_tables WHERE schemaname = '%s'",
		 env->pg_schema);
	assert_int_equal(tu_pg_int(sql), 1);
}

static const char SQL_PG_PARAMS[] =
	"SELECT CAST(?2 AS TEXT) || '?x' || CAST(?1 AS TEXT), ?3 + 1, ? * 2, \"?column?\" "
	"FROM (SELECT 5 AS \"?column?\") AS q";

/* ?NNN and ? become $NNN outside quotes; ints are int8, text is text. */
static void test_pg_parameters(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	struct db_stmt *st;
	int row = 0;

	TU_PG_ONLY();
	assert_non_null(st = db_stmt(db, SQL_PG_PARAMS));
	db_bind_text(st, 1, "a");
	db_bind_text(st, 2, "b");
	db_bind_int(st, 3, 9007199254740993LL);
	db_bind_int(st, 4, 21);
	assert_int_equal(db_step(st, &row), SD_OK);
	assert_int_equal(row, 1);
	assert_string_equal(db_col_text(st, 0), "b?xa");
	assert_int_equal(db_col_int(st, 1), 9007199254740994LL);
	assert_int_equal(db_col_int(st, 2), 42);
	assert_int_equal(db_col_int(st, 3), 5);
	assert_int_equal(db_step(st, &row), SD_OK);
	assert_int_equal(row, 0);
	db_reset(st);
}

/* The maintenance lock: on PostgreSQL one connection (one box) at a time,
 * let go when that connection ends; on SQLite always this box's. */
static void test_lock_try_one_box_at_a_time(void **state)
{
	struct tu_env *env = *state;
	struct db *other = NULL;
	int held = -1, i;

	assert_int_equal(db_lock_try(env->db, DB_LOCK_MAINT, &held), SD_OK);
	assert_int_equal(held, 1);
	assert_int_equal(db_lock_try(env->db, DB_LOCK_MAINT, &held), SD_OK);	/* again: still */
	assert_int_equal(held, 1);
	assert_int_equal(db_open(env->db_path, 0, DB_SYNC_NORMAL, &other), SD_OK);
	assert_int_equal(db_lock_try(other, DB_LOCK_MAINT, &held), SD_OK);
	assert_int_equal(held, tu_pg() ? 0 : 1);
	db_close(env->db);	/* the first box goes: its lock with it, once the
				 * server has seen its connection end */
	env->db = NULL;
	for (i = 0; i < 200; i++) {
		assert_int_equal(db_lock_try(other, DB_LOCK_MAINT, &held), SD_OK);
		if (held)
			break;
		tu_sleep_ms(10);
	}
	assert_int_equal(held, 1);
	db_close(other);
}

static const char SQL_PG_PID[] = "SELECT pg_backend_pid()";

/* A connection the server drops: the transaction at hand fails with SD_IO
 * and stores nothing; the next one connects again by itself. */
static void test_pg_reconnects(void **state)
{
	struct tu_env *env = *state;
	struct db *db = env->db;
	char sql[80];

	TU_PG_ONLY();
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(db_exec(db, "INSERT INTO done_totals (kind, pruned) VALUES ('a', 1)"), SD_OK);
	snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%lld)",
		 (long long)one_int(db, SQL_PG_PID));
	tu_pg_admin(sql);
	tu_sleep_ms(100);
	err_clear();
	assert_int_equal(db_commit(db), SD_IO);
	assert_non_null(strstr(err_msg(), "connection"));
	assert_false(db_in_tx(db));
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM done_totals"), 0);
	/* again, through a connection of its own */
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(db_exec(db, "INSERT INTO done_totals (kind, pruned) VALUES ('b', 1)"), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM done_totals"), 1);
	assert_int_equal(one_int(db, SQL_N_TOTALS), 1);
}

/* One snapshot: inside db_begin_snapshot a count does not move while
 * another connection commits; inside db_begin on PostgreSQL (READ
 * COMMITTED) it does, which is why counts that must agree use the first. */
static void test_snapshot_reads_one_moment(void **state)
{
	struct tu_env *env = *state;
	struct db *other;

	/* nested in an open transaction it joins it (either engine) */
	assert_int_equal(db_begin(env->db), SD_OK);
	assert_int_equal(db_begin_snapshot(env->db), SD_OK);
	assert_int_equal(db_commit(env->db), SD_OK);
	assert_true(db_in_tx(env->db));
	assert_int_equal(db_commit(env->db), SD_OK);
	TU_PG_ONLY();	/* an SQLite transaction reads one snapshot by itself */
	assert_int_equal(db_open(env->db_path, 0, DB_SYNC_NORMAL, &other), SD_OK);
	assert_int_equal(db_begin_snapshot(env->db), SD_OK);
	assert_int_equal(one_int(env->db, SQL_N_TOTALS), 0);
	assert_int_equal(db_exec(other, "INSERT INTO done_totals (kind, pruned) VALUES ('a', 1)"),
			 SD_OK);
	assert_int_equal(one_int(env->db, SQL_N_TOTALS), 0);
	assert_int_equal(db_commit(env->db), SD_OK);
	/* READ COMMITTED: the second read sees the second commit */
	assert_int_equal(db_begin(env->db), SD_OK);
	assert_int_equal(one_int(env->db, SQL_N_TOTALS), 1);
	assert_int_equal(db_exec(other, "INSERT INTO done_totals (kind, pruned) VALUES ('b', 1)"),
			 SD_OK);
	assert_int_equal(one_int(env->db, SQL_N_TOTALS), 2);
	assert_int_equal(db_commit(env->db), SD_OK);
	db_close(other);
}

/* The server's synchronous_commit of a connection, as text. */
static void sync_setting(struct db *db, char *buf, size_t size)
{
	struct db_stmt *st = db_stmt(db, "SELECT current_setting('synchronous_commit')");
	int row = 0;

	assert_non_null(st);
	assert_int_equal(db_step(st, &row), SD_OK);
	assert_int_equal(row, 1);
	snprintf(buf, size, "%s", db_col_text(st, 0));
	db_reset(st);
}

/* PostgreSQL: only the queue's own bookkeeping commits without waiting for
 * the server's flush (and the standby's); a handler's connection, whose
 * writes the worker's ack leans on, waits.  A connection made again after
 * the server dropped it keeps its level. */
static void test_pg_sync_levels(void **state)
{
	struct tu_env *env = *state;
	static const struct {
		enum db_sync level;
		const char *want;
	} levels[] = { { DB_SYNC_QUEUE, "off" }, { DB_SYNC_NORMAL, "on" }, { DB_SYNC_FULL, "on" } };
	struct handler_ctx *ctx;
	char got[16], sql[80];
	struct db *db;
	size_t i;

	TU_PG_ONLY();
	for (i = 0; i < sizeof levels / sizeof levels[0]; i++) {
		assert_int_equal(db_open(env->db_path, 0, levels[i].level, &db), SD_OK);
		sync_setting(db, got, sizeof got);
		assert_string_equal(got, levels[i].want);
		snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%lld)",
			 (long long)one_int(db, SQL_PG_PID));
		tu_pg_admin(sql);
		tu_sleep_ms(100);
		assert_int_equal(db_begin(db), SD_OK);	/* connects again */
		sync_setting(db, got, sizeof got);
		assert_int_equal(db_commit(db), SD_OK);
		assert_string_equal(got, levels[i].want);
		db_close(db);
	}
	assert_non_null(ctx = handler_ctx_new(env->db_path, NULL));
	assert_non_null(db = handler_db(ctx));
	sync_setting(db, got, sizeof got);
	assert_string_equal(got, "on");
	handler_ctx_free(ctx);
}

/* What a person is told is taken waits for the flush however the server,
 * the role or the connection weakens synchronous_commit (off, local,
 * remote_write); a stronger setting (remote_apply) is kept.  The other
 * levels keep theirs. */
static void test_pg_full_never_weaker_than_on(void **state)
{
	struct tu_env *env = *state;
	static const struct {
		const char *server;
		enum db_sync level;
		const char *want;
	} cases[] = {
		{ "off", DB_SYNC_FULL, "on" }, { "local", DB_SYNC_FULL, "on" },
		{ "remote_write", DB_SYNC_FULL, "on" },
		{ "remote_apply", DB_SYNC_FULL, "remote_apply" },
		{ "off", DB_SYNC_NORMAL, "off" }, { "remote_apply", DB_SYNC_QUEUE, "off" },
	};
	char uri[512], got[32];
	struct db *db;
	size_t i;

	TU_PG_ONLY();
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		/* the connection's own default, as a role's or the server's */
		snprintf(uri, sizeof uri, "%s%%20-csynchronous_commit%%3D%s", env->db_path,
			 cases[i].server);
		assert_int_equal(db_open(uri, 0, cases[i].level, &db), SD_OK);
		sync_setting(db, got, sizeof got);
		assert_string_equal(got, cases[i].want);
		db_close(db);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_migrate_from_empty, tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_reopen_keeps_data, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_newer_schema_refused_unchanged, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_newer_schema_not_switched_to_wal, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_foreign_sqlite_file_refused, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_missing_file_not_found, tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_not_a_database, tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_nested_begin_joins_outer, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_inner_rollback_dooms_outer, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_stmt_cache_by_address, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_new_database_is_private_whatever_the_umask,
						tu_setup_nodb, tu_teardown),
		cmocka_unit_test(test_engines_share_migrations),
		cmocka_unit_test_setup_teardown(test_pg_migrated_and_versioned, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_pg_newer_schema_refused, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_pg_no_migration_under_a_running_box, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_pg_foreign_schema_refused, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_pg_parameters, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_pg_reconnects, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_pg_sync_levels, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_pg_full_never_weaker_than_on, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_reads_one_moment, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_lock_try_one_box_at_a_time, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_existing_database_is_tightened_with_a_log_line,
						tu_setup_nodb, tu_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
