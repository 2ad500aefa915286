/*
 * test_workfaults.c: the workers under a failing disk and a full one, on a
 * real mount: `stagedoor run` with its ticket PDFs, its maildir or its
 * database on tools/powercut (FUSE), whose EIO and ENOSPC faults are
 * switched on and off at run time through its control socket.
 *
 * What the box promises: a job whose PDF, mail or database write failed
 * waits and is retried with backoff, never counted toward going dead; the
 * workers live on (no exit, no crash loop); nothing half-written is taken
 * as done (no pdf_key without its whole file, no message in new/ that is
 * not whole); the log says so once per episode; and once the disk takes
 * writes again every job completes by itself: a valid PDF per order
 * (qpdf --check), exactly one message per order, integrity_check ok and
 * `stagedoor check` passing.
 *
 * Needs root and /dev/fuse, as make test has them (skipped otherwise).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "orders.h"
#include "testutil.h"
#include "tickets.h"

#define OUT_MAX 8192
#define ORDERS 8

/* where each part of the box lives: on the mount or beside it */
enum on_mount { ON_BLOBS = 1, ON_MAIL = 2, ON_DB = 4 };

static struct {
	struct tu_env *env;
	struct tu_powercut pc;
	char conf[300], db[340], state[340], mail[360], log[300];
	int64_t event_id;
	pid_t run;
} F;

static char out[OUT_MAX], err[OUT_MAX];

static int setup(void **state)
{
	memset(&F, 0, sizeof F);
	return tu_setup_real_nodb(state);
}

static int teardown(void **state)
{
	tu_kill_spawned();
	tu_powercut_unmount(&F.pc);
	return tu_teardown(state);
}

/* ---- the box ------------------------------------------------------------------ */

/* box_up: the mount (or a skip), and a box with the parts named by where on
 * it; short backoffs, so that a retry after the fault is quick. */
static void box_up(void **state, int where)
{
	const char *dir, *mnt;
	FILE *f;

	F.env = *state;
	dir = F.env->dir;
	tu_powercut_mount(&F.pc, dir, NULL);
	mnt = F.pc.mnt;
	snprintf(F.db, sizeof F.db, "%s/stagedoor.db", where & ON_DB ? mnt : dir);
	snprintf(F.state, sizeof F.state, "%s/state", where & ON_BLOBS ? mnt : dir);
	snprintf(F.mail, sizeof F.mail, "%s/maildir", where & ON_MAIL ? mnt : dir);
	snprintf(F.conf, sizeof F.conf, "%s/stagedoor.conf", dir);
	snprintf(F.log, sizeof F.log, "%s/run.log", dir);
	assert_non_null(f = fopen(F.conf, "w"));
	fprintf(f, "db = %s\nstate_dir = %s\nmail_url = maildir:%s\nworkers = 1\n"
		"concurrency = 2\nhttp_listen = off\nbackoff_base_ms = 200\n"
		"backoff_cap_ms = 1000\nmaintenance_ms = 200\nlog_level = info\n",
		F.db, F.state, F.mail);
	fclose(f);
	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "init", "--db", F.db, "--state-dir", F.state, NULL }) != 0)
		fail_msg("init: %s", err);
	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "event", "add", "--name", "Gig", "--venue", "Hall",
					  "--starts-at", "2036-12-31T20:00Z", "--capacity", "1000",
					  "--db", F.db, NULL }) != 0)
		fail_msg("event add: %s", err);
	F.event_id = strtoll(out, NULL, 10);
}

/* orders: n orders of two seats, taken as the intake takes them */
static void orders(int n)
{
	struct order_new o = { F.event_id, "Ana Lima", "ana@example.com", 2, NULL };
	char id[ORDER_ID_MAX];
	struct db *db = NULL;
	int i, replayed;

	assert_int_equal(db_open(F.db, 0, DB_SYNC_FULL, &db), SD_OK);
	for (i = 0; i < n; i++)
		assert_int_equal(order_add(db, &o, id, &replayed), SD_OK);
	db_close(db);
}

static int alive(pid_t pid)
{
	return kill(pid, 0) == 0 && tu_wait(pid, 0) == -2;
}

static void run_start(void)
{
	int i;

	F.run = tu_spawn((const char *const[]){ "run", "--config", F.conf, NULL }, F.log);
	for (i = 0; i < 500 && tu_count_in(F.log, "msg=\"worker started\"") == 0; i++)
		tu_sleep_ms(20);
	if (i == 500)
		fail_msg("run did not start a worker; see %s", F.log);
}

static void run_stop(void)
{
	kill(F.run, SIGTERM);
	assert_int_equal(tu_reap(F.run, 20000, "run"), 0);
}

/* show_log: the run's log lines other than finished jobs, on stderr, for a
 * failure's reader */
static void show_log(void)
{
	size_t size;
	char *text, *line, *next;

	if (access(F.log, R_OK) != 0)
		return;
	text = (char *)tu_slurp(F.log, &size);
	for (line = text; *line; line = next) {
		next = line + strcspn(line, "\n");
		if (*next)
			*next++ = '\0';
		if (!strstr(line, "msg=\"job finished\" ") || !strstr(line, "outcome=done"))
			fprintf(stderr, "  | %.300s\n", line);
	}
	free(text);
}

/* the supervisor and its one worker live: no child exited, none restarted */
static void workers_alive(const char *when)
{
	if (!alive(F.run) || tu_count_in(F.log, "msg=\"child exited\"") != 0 ||
	    tu_count_in(F.log, "msg=\"worker started\"") != 1) {
		show_log();
		fail_msg("%s: run alive %d, child exits %d, worker starts %d; see %s", when,
			 alive(F.run), tu_count_in(F.log, "msg=\"child exited\""),
			 tu_count_in(F.log, "msg=\"worker started\""), F.log);
	}
}

static int64_t q(const char *sql)
{
	return tu_count(F.db, sql);
}

/* no job dead, and none with a failed attempt counted */
static void nothing_dead(const char *when)
{
	int64_t dead = q("SELECT count(*) FROM dead_jobs");
	int64_t tried = q("SELECT max((SELECT coalesce(max(attempts), 0) FROM stream), "
			  "(SELECT coalesce(max(attempts), 0) FROM done_jobs))");

	if (dead != 0 || tried != 0) {
		show_log();
		fail_msg("%s: %lld dead jobs, attempts up to %lld; see %s", when, (long long)dead,
			 (long long)tried, F.log);
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* drained: every order sent, nothing left in the stream or the outbox;
 * [return] how long it took, in ms */
static int64_t wait_drained(int n, int timeout_ms)
{
	int64_t t0 = now_ms(), sent = 0, left = 0;

	while (now_ms() - t0 < timeout_ms) {
		sent = q("SELECT count(*) FROM email_sends WHERE sent_at IS NOT NULL");
		left = q("SELECT (SELECT count(*) FROM stream) + "
			 "(SELECT count(*) FROM outbox WHERE published_at IS NULL)");
		if (sent == n && left == 0)
			return now_ms() - t0;
		tu_sleep_ms(50);
	}
	fail_msg("not drained in %d ms: %lld of %d sent, %lld jobs or rows left; see %s",
		 timeout_ms, (long long)sent, n, (long long)left, F.log);
	return -1;
}

/* the entries of dir (temp files too) whose names end with tail */
static int files_ending(const char *dir, const char *tail)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;
	size_t t = strlen(tail), l;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    (l = strlen(de->d_name)) >= t && strcmp(de->d_name + l - t, tail) == 0)
			n++;
	closedir(d);
	return n;
}

/* entries of dir whose name starts with prefix (or, when !with, does not),
 * counted in one pass of the folder */
static int files_prefixed(const char *dir, const char *prefix, int with)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
		    (strncmp(de->d_name, prefix, strlen(prefix)) == 0) == with)
			n++;
	closedir(d);
	return n;
}

static int files_starting(const char *dir, const char *prefix)
{
	return files_prefixed(dir, prefix, 1);
}

/* every stored PDF is whole (qpdf --check), one per order */
static void pdfs_valid(int n)
{
	char dir[400], path[700], o[420];
	struct dirent *de;
	DIR *d;
	int seen = 0;

	snprintf(dir, sizeof dir, "%s/blobs/tickets", F.state);
	snprintf(o, sizeof o, "%s/qpdf.out", F.env->dir);
	assert_non_null(d = opendir(dir));
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		if (tu_exec((const char *const[]){ "qpdf", "--check", path, NULL }, o, NULL,
			    30000) != 0)
			fail_msg("qpdf --check %s failed", path);
		seen++;
	}
	closedir(d);
	assert_int_equal(seen, n);
	assert_int_equal(q("SELECT count(*) FROM tickets WHERE pdf_key IS NULL"), 0);
	/* and no temp file of a failed put left behind */
	assert_int_equal(files_starting(dir, ".tmp-"), 0);
}

/* the end state: n orders done, each once, all of it whole */
static void all_done(int n)
{
	char newdir[400];

	snprintf(newdir, sizeof newdir, "%s/new", F.mail);
	assert_int_equal(files_ending(newdir, ".eml"), n);
	/* and no message of a failed write left half-made in tmp/ */
	snprintf(newdir, sizeof newdir, "%s/tmp", F.mail);
	assert_int_equal(files_ending(newdir, ""), 0);
	pdfs_valid(n);
	nothing_dead("after the fault");
	tu_integrity_ok(F.db);
	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "check", "--db", F.db, "--state-dir", F.state, NULL }) != 0)
		fail_msg("stagedoor check: %s%s", out, err);
}

/* ---- the tests ---------------------------------------------------------------- */

/* Every 3rd write to the PDFs and the maildir fails: jobs are retried, none
 * dies, and all complete. */
static void test_eio_every_n_writes(void **state)
{
	char stats[256];
	int64_t ms;

	box_up(state, ON_BLOBS | ON_MAIL);
	orders(ORDERS);
	tu_powercut_ctl(&F.pc, "eio every 3", NULL, 0);
	run_start();
	tu_sleep_ms(2500);
	workers_alive("eio every 3");
	nothing_dead("eio every 3");
	tu_powercut_ctl(&F.pc, "stats", stats, sizeof stats);
	fprintf(stderr, "while faulted: %s\n", stats);
	tu_powercut_ctl(&F.pc, "eio off", NULL, 0);
	ms = wait_drained(ORDERS, 20000);
	fprintf(stderr, "drained %lld ms after eio off\n", (long long)ms);
	workers_alive("after eio off");
	/* the faults met some jobs, which came back */
	assert_true(q("SELECT count(*) FROM done_jobs WHERE deliveries >= 2") >= 1);
	run_stop();
	all_done(ORDERS);
}

/* One fault on from the start, then off: the jobs wait, retried with
 * backoff and never counted toward going dead, then complete by
 * themselves.  [in] where: what lives on the mount; which: the jobs that
 * hit the fault. */
static void fault_then_resume(void **state, int where, const char *on, const char *off,
			      const char *which)
{
	char stats[256], sql[400];
	int64_t ms, retried;

	box_up(state, where);
	orders(ORDERS);
	tu_powercut_ctl(&F.pc, on, NULL, 0);
	run_start();
	tu_sleep_ms(3000);
	workers_alive(on);
	nothing_dead(on);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM stream WHERE kind = '%s' AND "
		 "deliveries >= 2", which);
	retried = q(sql);
	if (retried < 1)
		fail_msg("with '%s': no %s job was retried; see %s", on, which, F.log);
	/* nothing half-written taken for done: no PDF recorded, no message in
	 * new/, no temp file left behind */
	assert_int_equal(q("SELECT count(*) FROM email_sends WHERE sent_at IS NOT NULL"), 0);
	if (where & ON_BLOBS) {
		assert_int_equal(q("SELECT count(*) FROM tickets WHERE pdf_key IS NOT NULL"), 0);
		/* no PDF; a put that is failing right now may hold its temp
		 * file for a moment (all_done checks none is left) */
		snprintf(sql, sizeof sql, "%s/blobs/tickets", F.state);
		assert_int_equal(files_prefixed(sql, ".tmp-", 0), 0);
	} else {
		/* no message delivered; a write that is failing right now may
		 * hold its file in tmp/ for a moment (all_done checks none is
		 * left) */
		snprintf(sql, sizeof sql, "%s/new", F.mail);
		assert_int_equal(files_ending(sql, ""), 0);
	}
	/* said once for the episode, not once per try */
	snprintf(sql, sizeof sql, "msg=\"jobs wait for the disk and retry\" worker=w1 kind=%s ",
		 which);
	assert_int_equal(tu_count_in(F.log, sql), 1);
	tu_powercut_ctl(&F.pc, "stats", stats, sizeof stats);
	fprintf(stderr, "while '%s': %lld %s jobs retried; %s\n", on, (long long)retried, which,
		stats);
	tu_powercut_ctl(&F.pc, off, NULL, 0);
	ms = wait_drained(ORDERS, 20000);
	fprintf(stderr, "drained %lld ms after '%s'\n", (long long)ms, off);
	workers_alive(off);
	snprintf(sql, sizeof sql, "msg=\"jobs write again\" worker=w1 kind=%s ", which);
	assert_int_equal(tu_count_in(F.log, sql), 1);
	run_stop();
	all_done(ORDERS);
}

static void test_full_disk_under_pdfs(void **state)
{
	fault_then_resume(state, ON_BLOBS, "enospc on", "enospc off", "render_tickets");
}

static void test_failing_disk_under_maildir(void **state)
{
	fault_then_resume(state, ON_MAIL, "eio on", "eio off", "send_tickets");
}

static void test_full_disk_under_maildir(void **state)
{
	fault_then_resume(state, ON_MAIL, "enospc on", "enospc off", "send_tickets");
}

/* The database itself on the failing disk: the relay's batches, claims, acks
 * and the handlers' transactions fail for longer than a worker used to bear
 * (50 tries 100 ms apart), then resume. */
static void test_failing_disk_under_database(void **state)
{
	char stats[256];
	int64_t ms, sent;

	box_up(state, ON_BLOBS | ON_MAIL | ON_DB);
	orders(4 * ORDERS);
	/* the jobs in the stream, so that the worker meets the fault first */
	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "relay", "--drain", "--db", F.db, NULL }) != 0)
		fail_msg("relay: %s", err);
	run_start();
	tu_powercut_ctl(&F.pc, "eio every 2", NULL, 0);
	tu_sleep_ms(2000);
	tu_powercut_ctl(&F.pc, "eio on", NULL, 0);
	sent = q("SELECT count(*) FROM email_sends WHERE sent_at IS NOT NULL");
	tu_sleep_ms(6000);
	workers_alive("eio on, database");
	nothing_dead("eio on, database");
	assert_int_equal(q("SELECT count(*) FROM email_sends WHERE sent_at IS NOT NULL"), sent);
	assert_true(sent < 4 * ORDERS);
	tu_powercut_ctl(&F.pc, "stats", stats, sizeof stats);
	fprintf(stderr, "while 'eio on' (database, %lld of %d sent): %s\n", (long long)sent,
		4 * ORDERS, stats);
	tu_powercut_ctl(&F.pc, "eio off", NULL, 0);
	ms = wait_drained(4 * ORDERS, 30000);
	fprintf(stderr, "drained %lld ms after 'eio off'\n", (long long)ms);
	workers_alive("eio off, database");
	run_stop();
	all_done(4 * ORDERS);
}

/* A worker asked to stop while the disk refuses every write (ENOSPC on the
 * database) ends within its grace period, without spinning on its failed
 * commit; its results were not recorded, so their leases expire and the
 * jobs run again once the disk takes writes: nothing is lost. */
static void test_worker_stops_on_a_full_disk(void **state)
{
	struct rusage before, after;
	char wlog[400];
	double cpu_s, ms;
	int64_t t0;
	pid_t w;
	int i, rc;

	box_up(state, ON_DB);
	for (i = 0; i < 2; i++)
		if (tu_run(out, sizeof out, err, sizeof err,
			   (const char *const[]){ "enqueue", "sleep", "{\"ms\":1000}", "--db", F.db,
						  NULL }) != 0)
			fail_msg("enqueue: %s", err);
	snprintf(wlog, sizeof wlog, "%s/worker.log", F.env->dir);
	w = tu_spawn((const char *const[]){ "worker", "--db", F.db, "--concurrency", "2",
					    "--lease-ms", "3000", "--grace-ms", "3000", NULL },
		     wlog);
	for (i = 0; i < 500 && q("SELECT count(*) FROM stream WHERE lease_token IS NOT NULL") < 2;
	     i++)
		tu_sleep_ms(20);
	assert_int_equal(q("SELECT count(*) FROM stream WHERE lease_token IS NOT NULL"), 2);
	tu_powercut_ctl(&F.pc, "enospc on", NULL, 0);
	/* the jobs end, and their commit fails */
	tu_wait_log(wlog, "msg=\"queue transaction failed\"", 1, 15000);
	getrusage(RUSAGE_CHILDREN, &before);
	t0 = clock_mono_us();
	kill(w, SIGTERM);
	rc = tu_reap(w, 20000, "worker");
	ms = (double)(clock_mono_us() - t0) / 1000;
	getrusage(RUSAGE_CHILDREN, &after);
	cpu_s = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec + after.ru_stime.tv_sec -
			 before.ru_stime.tv_sec) +
		(double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec + after.ru_stime.tv_usec -
			 before.ru_stime.tv_usec) / 1e6;
	fprintf(stderr, "stopped %.0f ms after SIGTERM on a full disk (grace 3000 ms), exit %d, "
		"%.2f s of CPU in all\n", ms, rc, cpu_s);
	assert_true(ms < 3000 + 2000);
	assert_true(cpu_s < 1.0);	/* a spinning retry burns a core */
	assert_int_not_equal(rc, 0);	/* its last results were not recorded */
	assert_true(tu_count_in(wlog, "without recording its last results") == 1);

	/* the disk takes writes again: the jobs run again and finish */
	tu_powercut_ctl(&F.pc, "enospc off", NULL, 0);
	tu_sleep_ms(3000);	/* the leases expire */
	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "worker", "--drain", "--db", F.db, NULL }) != 0)
		fail_msg("worker --drain: %s", err);
	assert_int_equal(q("SELECT count(*) FROM stream"), 0);
	assert_int_equal(q("SELECT count(*) FROM done_jobs WHERE kind = 'sleep'"), 2);
	tu_integrity_ok(F.db);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_eio_every_n_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_disk_under_pdfs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failing_disk_under_maildir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_disk_under_maildir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failing_disk_under_database, setup, teardown),
		cmocka_unit_test_setup_teardown(test_worker_stops_on_a_full_disk, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
