/*
 * test_upgrade.c: a box made by the previous release (tests/fixtures: the
 * database tools/upgrade_fixture.sh made with v0.1.0, its jobs not yet run)
 * is migrated by this version once and finishes every in-flight job once;
 * no version migrates a database under a running box; and a running box's
 * children stay on the binary it started from when a package replaces it.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "code.h"
#include "db.h"
#include "testutil.h"

#define FIXTURE "tests/fixtures/v0.1.0-box.sql"
#define FIXTURE_ORDERS 12
#define FIXTURE_VERSION 4

/* raw_version: the file's user_version read by SQLite itself (the store
 * would migrate it on open) */
static int raw_version(const char *path)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	int v = -1;

	assert_int_equal(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

/* load_fixture: the previous release's box as e->db_path */
static void load_fixture(struct tu_env *e)
{
	size_t len;
	unsigned char *sql = tu_slurp(FIXTURE, &len);
	sqlite3 *h;
	char *err = NULL;

	assert_non_null(sql);
	assert_int_equal(sqlite3_open(e->db_path, &h), SQLITE_OK);
	if (sqlite3_exec(h, (const char *)sql, NULL, NULL, &err) != SQLITE_OK ||
	    sqlite3_exec(h, "PRAGMA journal_mode = WAL", NULL, NULL, &err) != SQLITE_OK)
		fail_msg("loading %s: %s", FIXTURE, err);	/* as the old box kept it: WAL */
	assert_int_equal(sqlite3_close(h), SQLITE_OK);
	free(sql);
	chmod(e->db_path, 0600);
	assert_int_equal(raw_version(e->db_path), FIXTURE_VERSION);
}

static void write_conf(const struct tu_env *e, char *conf, size_t size)
{
	FILE *f;

	snprintf(conf, size, "%s/stagedoor.conf", e->dir);
	assert_non_null(f = fopen(conf, "w"));
	fprintf(f, "db = %s\nstate_dir = %s\nmail_url = maildir:%s/maildir\nworkers = 1\n"
		   "http_listen = off\nlease_ms = 2000\nbackoff_base_ms = 50\n", e->db_path,
		e->dir, e->dir);
	fclose(f);
}

/* each_buyer_once: every fixture buyer has exactly one message in maildir */
static void each_buyer_once(const struct tu_env *e)
{
	char dir[400], path[700], needle[64];
	int i, total = 0;

	snprintf(dir, sizeof dir, "%s/maildir/new", e->dir);
	for (i = 1; i <= FIXTURE_ORDERS; i++) {
		DIR *d = opendir(dir);
		struct dirent *de;
		int n = 0;

		assert_non_null(d);
		snprintf(needle, sizeof needle, " <buyer%d@example.org>\r\n", i);
		while ((de = readdir(d)))
			if (de->d_name[0] != '.') {
				snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
				n += tu_count_in(path, needle) > 0;
			}
		closedir(d);
		if (n != 1)
			fail_msg("buyer%d@example.org has %d messages, not 1", i, n);
		total += n;
	}
	assert_int_equal(tu_count_files(dir), total);
}

/* run_until_mailed: `run` on the box until every fixture order's email is
 * in the maildir and the stream is empty, then its stop (exit 0) */
static void run_until_mailed(const struct tu_env *e, const char *conf)
{
	char log[400], dir[400];
	pid_t run;
	int i;

	snprintf(log, sizeof log, "%s/run.log", e->dir);
	snprintf(dir, sizeof dir, "%s/maildir/new", e->dir);
	run = tu_spawn((const char *const[]){ "run", "--config", conf, NULL }, log);
	for (i = 0; i < 600 && tu_count_files(dir) < FIXTURE_ORDERS; i++)
		tu_sleep_ms(100);
	tu_wait_log(log, "run started", 1, 10000);
	/* what is still queued (the counter) finishes before the stop */
	for (i = 0; i < 300 && tu_count(e->db_path, "SELECT count(*) FROM stream") > 0; i++)
		tu_sleep_ms(100);
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 60000, "run"), 0);
}

/* The previous release's box: this version's `run` migrates it once (every
 * migration, in order) and renders, sends and counts each order once. */
static void test_a_box_of_the_previous_release_upgrades(void **state)
{
	struct tu_env *e = *state;
	char conf[400], out[256];
	int64_t seats;

	load_fixture(e);
	seats = tu_count(e->db_path, "SELECT sum(seats) FROM orders");
	write_conf(e, conf, sizeof conf);
	run_until_mailed(e, conf);
	assert_int_equal(raw_version(e->db_path), db_migration_count);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM orders"), FIXTURE_ORDERS);
	each_buyer_once(e);
	assert_int_equal(tu_count(e->db_path, "SELECT sum(seats_sold) FROM sales_counters"), seats);
	/* the box passes its own check, and a second open migrates nothing */
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "check", "--db", e->db_path, NULL }), 0);
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "init", "--db", e->db_path, "--state-dir",
						       e->dir, NULL }), 0);
	assert_non_null(strstr(out, "schema version"));
	assert_int_equal(raw_version(e->db_path), db_migration_count);
}

/* code_of: the code the previous release printed for ticket id (its codes
 * named the ticket's row id), with the box's key */
static void code_of(const struct tu_env *e, int64_t id, int64_t event_id, char *code)
{
	unsigned char key[CODE_KEY_LEN];
	char path[600];

	assert_int_equal(code_key_path(e->db_path, e->dir, path, sizeof path), SD_OK);
	assert_int_equal(code_key_load(path, key), SD_OK);
	code_make(key, id, event_id, code);
}

/*
 * What the outside world holds from the previous release stays valid after
 * the migration: an email whose first attempt the old box claimed (it may
 * have reached the provider) goes under the key that attempt used,
 * "tickets-<row id>"; the codes it printed, which name the tickets' row
 * ids, admit their seats.  What is new gets the new names: the other
 * orders' emails go under "tickets-<public id>", and an order taken after
 * the migration has tickets whose codes name random numbers.
 */
static void test_identities_of_the_previous_release_stay(void **state)
{
	struct tu_env *e = *state;
	char conf[400], dir[400], out[256], err[256], code[CODE_TEXT_MAX], pub[16];
	char path[600];
	int64_t ev, tid;
	sqlite3 *h;
	int i;

	load_fixture(e);
	/* the old box claimed order 1's email and died: the send may have left */
	assert_int_equal(sqlite3_open(e->db_path, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, "INSERT INTO email_sends (order_id, kind, claimed_at) "
				      "VALUES (1, 'tickets', 1)", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
	write_conf(e, conf, sizeof conf);
	run_until_mailed(e, conf);
	each_buyer_once(e);
	snprintf(dir, sizeof dir, "%s/maildir/new", e->dir);

	/* order 1's email under the key its first attempt used */
	snprintf(path, sizeof path, "%s/tickets-1.eml", dir);
	assert_int_equal(access(path, F_OK), 0);
	assert_int_equal(tu_count_in(path, " <buyer1@example.org>\r\n"), 1);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM email_sends WHERE order_id = 1 "
				  "AND provider_key = 'tickets-1' AND sent_at IS NOT NULL"), 1);
	/* every other under its order's public id */
	for (i = 2; i <= FIXTURE_ORDERS; i++) {
		char sql[160];

		snprintf(sql, sizeof sql, "SELECT count(*) FROM email_sends s JOIN orders o ON "
			 "o.id = s.order_id WHERE o.id = %d AND s.provider_key = 'tickets-' || "
			 "o.public_id AND s.sent_at IS NOT NULL", i);
		assert_int_equal(tu_count(e->db_path, sql), 1);
	}
	assert_int_equal(tu_count_files(dir), FIXTURE_ORDERS);

	/* a code the previous release printed admits its own seat */
	ev = tu_count(e->db_path, "SELECT event_id FROM tickets WHERE id = 1");
	code_of(e, 1, ev, code);
	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "scan", code, "--db", e->db_path, "--state-dir", e->dir,
					  NULL }) != 0)
		fail_msg("a code of the previous release: %s%s", out, err);
	snprintf(pub, sizeof pub, "%s", "");
	{
		sqlite3_stmt *st;

		assert_int_equal(sqlite3_open_v2(e->db_path, &h, SQLITE_OPEN_READONLY, NULL),
				 SQLITE_OK);
		assert_int_equal(sqlite3_prepare_v2(h, "SELECT o.public_id FROM orders o JOIN "
						    "tickets t ON t.order_id = o.id WHERE t.id = 1",
						    -1, &st, NULL), SQLITE_OK);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		snprintf(pub, sizeof pub, "%s", (const char *)sqlite3_column_text(st, 0));
		sqlite3_finalize(st);
		sqlite3_close(h);
	}
	assert_non_null(strstr(out, pub));

	/* an order taken now: its codes name random numbers, never a row id */
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "order", "add", "--db", e->db_path,
						       "--event", "1", "--name",
						       "New Buyer", "--email", "new@example.org",
						       "--seats", "1", NULL }), 0);
	tid = tu_count(e->db_path, "SELECT max(id) FROM tickets");
	assert_true(tu_countf(e->db_path, "SELECT code_id FROM tickets WHERE id = %lld",
			      (long long)tid) >= CODE_ID_MIN);
	/* the code its row id would make admits nobody */
	code_of(e, tid, ev, code);
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "scan", code, "--db", e->db_path,
						       "--state-dir", e->dir, NULL }), 4);
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "check", "--db", e->db_path, "--state-dir",
						       e->dir, NULL }), 1);	/* its job waits */
	assert_null(strstr(out, "identities"));
}

/* A box runs on the old file (its run lock held): a newer stagedoor does not
 * migrate the file under it, says what to do, and changes nothing. */
static void test_no_migration_under_a_running_box(void **state)
{
	struct tu_env *e = *state;
	char lock[400], err[1024];
	size_t n1, n2;
	unsigned char *before, *after;
	int fd;

	load_fixture(e);
	snprintf(lock, sizeof lock, "%s-run.lock", e->db_path);
	assert_true((fd = open(lock, O_RDWR | O_CREAT, 0600)) >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	assert_int_equal(write(fd, "4242\n", 5), 5);
	before = tu_slurp(e->db_path, &n1);
	assert_int_equal(tu_run(NULL, 0, err, sizeof err,
				(const char *const[]){ "order", "find", "Buyer 1", "--db", e->db_path,
						       NULL }), 1);
	if (!strstr(err, "a box is running on it (stagedoor run, pid 4242)") ||
	    !strstr(err, "nothing was changed"))
		fail_msg("order find under a running box: %s", err);
	assert_int_equal(tu_run(NULL, 0, err, sizeof err,
				(const char *const[]){ "init", "--db", e->db_path, NULL }), 1);
	after = tu_slurp(e->db_path, &n2);
	assert_true(n1 == n2 && memcmp(before, after, n1) == 0);
	free(before);
	free(after);
	assert_int_equal(raw_version(e->db_path), FIXTURE_VERSION);
	/* the box stopped: the next command migrates */
	close(fd);
	assert_int_equal(tu_run(NULL, 0, err, sizeof err,
				(const char *const[]){ "order", "find", "Buyer 1", "--db", e->db_path,
						       NULL }), 0);
	assert_int_equal(raw_version(e->db_path), db_migration_count);
}

/* worker_of: a worker child of run (from /proc), 0 when none yet */
static pid_t worker_of(pid_t run)
{
	char path[64], kids[512], cmd[256];
	FILE *f;
	char *p, *end;

	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)run, (int)run);
	if (!(f = fopen(path, "r")))
		return 0;
	kids[fread(kids, 1, sizeof kids - 1, f)] = '\0';
	fclose(f);
	for (p = kids; *p; p = end) {
		long pid = strtol(p, &end, 10);
		size_t n;

		if (end == p)
			break;
		snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
		if (!(f = fopen(path, "r")))
			continue;
		n = fread(cmd, 1, sizeof cmd - 1, f);
		fclose(f);
		cmd[n] = '\0';
		/* argv[1] after the program's NUL */
		if (strlen(cmd) + 1 < n && strcmp(cmd + strlen(cmd) + 1, "worker") == 0)
			return (pid_t)pid;
	}
	return 0;
}

/* A package upgrade replaces the program's file under a running box: a child
 * that dies after that is started again from the file run started from, so
 * one box never runs two versions, and it goes on with the jobs. */
static void test_children_run_the_binary_run_started_from(void **state)
{
	struct tu_env *e = *state;
	char conf[400], old[400], fresh[400], log[400], exe[64], link[512], out[256];
	char cmd[2000];
	pid_t run, w1 = 0, w2 = 0;
	ssize_t n;
	int i;

	write_conf(e, conf, sizeof conf);
	snprintf(old, sizeof old, "%s/stagedoor", e->dir);
	snprintf(fresh, sizeof fresh, "%s/stagedoor.new", e->dir);
	snprintf(cmd, sizeof cmd, "cp %s %s", tu_bin(), old);
	assert_int_equal(system(cmd), 0);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	if ((run = fork()) == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(old, old, "run", "--config", conf, (char *)NULL);
		_exit(127);
	}
	assert_true(run > 0);
	tu_wait_log(log, "run started", 1, 20000);
	for (i = 0; i < 200 && !(w1 = worker_of(run)); i++)
		tu_sleep_ms(50);
	assert_true(w1 > 0);
	/* what dpkg does: the new file under a temporary name, renamed over */
	assert_non_null(fopen(fresh, "w"));
	snprintf(cmd, sizeof cmd, "printf '#!/bin/sh\\nexit 99\\n' > %s && chmod 755 %s && mv %s %s",
		 fresh, fresh, fresh, old);
	assert_int_equal(system(cmd), 0);
	kill(w1, SIGKILL);
	for (i = 0; i < 200 && ((w2 = worker_of(run)) == 0 || w2 == w1); i++)
		tu_sleep_ms(50);
	assert_true(w2 > 0 && w2 != w1);
	snprintf(exe, sizeof exe, "/proc/%d/exe", (int)w2);
	assert_true((n = readlink(exe, link, sizeof link - 1)) > 0);
	link[n] = '\0';
	if (!strstr(link, " (deleted)"))
		fail_msg("the restarted worker runs %s, not the file run started from", link);
	/* and it works: an order placed now is sent */
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "init", "--db", e->db_path, "--state-dir",
						       e->dir, NULL }), 0);
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "event", "add", "--db", e->db_path, "--name",
						       "N", "--venue", "V", "--starts-at",
						       "2030-01-01T20:00Z", "--capacity", "9",
						       NULL }), 0);
	out[strcspn(out, "\n")] = '\0';
	{
		char ev[32];

		snprintf(ev, sizeof ev, "%.20s", out);
		assert_int_equal(tu_run(out, sizeof out, NULL, 0,
					(const char *const[]){ "order", "add", "--db", e->db_path,
							       "--event", ev,
							       "--name", "A", "--email",
							       "a@example.org", "--seats", "1",
							       NULL }), 0);
	}
	snprintf(cmd, sizeof cmd, "%s/maildir/new", e->dir);
	for (i = 0; i < 300 && tu_count_files(cmd) < 1; i++)
		tu_sleep_ms(100);
	assert_int_equal(tu_count_files(cmd), 1);
	kill(run, SIGTERM);
	assert_true(tu_wait(run, 60000) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_box_of_the_previous_release_upgrades,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_identities_of_the_previous_release_stay,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_no_migration_under_a_running_box,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_children_run_the_binary_run_started_from,
						tu_setup_real_nodb, tu_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
