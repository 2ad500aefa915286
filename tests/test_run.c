/*
 * test_run.c: `stagedoor run`, the appliance, as a venue runs it: the real
 * binary ($STAGEDOOR_BIN) supervising real worker processes on one database
 * file, attacked with signals.
 *
 * Each test starts `run` in the background with its log in the test's
 * folder, waits for lines in that log, and checks the outcome in the
 * database, never in the appliance's own counters.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db.h"
#include "queue.h"
#include "testutil.h"

#define OUT_MAX (16 * 1024)

static char out[OUT_MAX], err[OUT_MAX];

#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })

static int setup(void **state)
{
	/* the HTTP child has its own tests (test_dashboard); here it would
	 * only compete for a port between tests */
	setenv("STAGEDOOR_HTTP_LISTEN", "off", 1);
	unsetenv("STAGEDOOR_FAILPOINTS");
	unsetenv("STAGEDOOR_CONFIG");
	setenv("STAGEDOOR_LOG_LEVEL", "info", 1);
	return tu_setup_real(state);
}

static int teardown(void **state)
{
	unsetenv("STAGEDOOR_FAILPOINTS");
	unsetenv("STAGEDOOR_LOG_LEVEL");
	return tu_teardown(state);
}

/* wait_sql: until the SQL's single integer equals want. */
static void wait_sql(const char *db, int64_t want, int timeout_ms, const char *sql)
{
	int waited;
	int64_t got = -1;

	for (waited = 0; waited < timeout_ms; waited += 20) {
		if ((got = tu_count(db, sql)) == want)
			return;
		tu_sleep_ms(20);
	}
	fail_msg("waited %d ms for %s = %lld; it is %lld", timeout_ms, sql, (long long)want,
		 (long long)got);
}

/* children: the pids of run's children whose command line holds word
 * (found by their parent pid in /proc/PID/stat). */
static int children(pid_t run, const char *word, pid_t *pids, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while (n < max && (de = readdir(d))) {
		char path[300], cmd[4096], comm[64];
		long pid = strtol(de->d_name, NULL, 10), ppid = 0;
		char st = 0;
		size_t len, i;
		FILE *f;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		if (!(f = fopen(path, "r")))
			continue;
		if (fscanf(f, "%*d %63s %c %ld", comm, &st, &ppid) != 3)
			ppid = 0;
		fclose(f);
		if (ppid != (long)run || st == 'Z')
			continue;
		snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
		if (!(f = fopen(path, "r")))
			continue;
		len = fread(cmd, 1, sizeof cmd - 1, f);
		fclose(f);
		for (i = 0; i < len; i++)
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		cmd[len] = '\0';
		if (strstr(cmd, word))
			pids[n++] = (pid_t)pid;
	}
	closedir(d);
	return n;
}

static int alive(pid_t pid)
{
	char path[64], state = 0;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if (!(f = fopen(path, "r")))
		return 0;
	if (fscanf(f, "%*d %*s %c", &state) != 1)
		state = 0;
	fclose(f);
	return state && state != 'Z';
}

/* start: `run` with args on the test's database, its log at e->dir/run.log. */
static pid_t start(const struct tu_env *e, char *log, size_t size, const char *const *args)
{
	const char *argv[32];
	int n = 0, before;
	pid_t pid;

	snprintf(log, size, "%s/run.log", e->dir);
	before = tu_count_in(log, "msg=\"worker started\"");
	argv[n++] = "run";
	argv[n++] = "--db";
	argv[n++] = e->db_path;
	while (*args && n < 31)
		argv[n++] = *args++;
	argv[n] = NULL;
	pid = tu_spawn(argv, log);
	tu_wait_log(log, "msg=\"worker started\"", before + 1, 10000);
	return pid;
}

#define START(e, log, ...) start(e, log, sizeof log, (const char *const[]){ __VA_ARGS__, NULL })

static void enqueue(const struct tu_env *e, const char *kind, const char *payload)
{
	assert_int_equal(RUN("enqueue", kind, payload, "--db", e->db_path), 0);
}

/* ---- one appliance per database ---------------------------------------- */

static void test_second_run_refused_plain_worker_welcome(void **state)
{
	const struct tu_env *e = *state;
	char log[512], wlog[600];
	struct db *db;
	pid_t run, w;
	int i;

	run = START(e, log, "--workers", "1", "--concurrency", "1");
	assert_int_equal(RUN("run", "--db", e->db_path, "--workers", "1"), 1);
	if (!strstr(err, "already running") || !strstr(err, "pid "))
		fail_msg("second run: %s", err);
	/* nothing of it started: still one relay and one worker under the first */
	assert_int_equal(tu_count_in(log, "msg=\"child started\""), 2);

	/* 4 s of work for the first run's one worker, visible at once (one
	 * transaction): time enough for a plain worker to start and take its
	 * share, even on a loaded machine where 40 `enqueue` processes one by
	 * one would be slower than the worker */
	assert_int_equal(db_open(e->db_path, 0, DB_SYNC_NORMAL, &db), SD_OK);
	assert_int_equal(db_begin(db), SD_OK);
	for (i = 0; i < 40; i++)
		assert_int_equal(queue_enqueue(db, &(struct enqueue){ .kind = "sleep",
								   .payload = "{\"ms\":100}" },
					       NULL), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);
	db_close(db);
	snprintf(wlog, sizeof wlog, "%s/worker.log", e->dir);
	w = tu_spawn((const char *const[]){ "worker", "--db", e->db_path, "--name", "outsider",
					    "--concurrency", "1", "--drain", NULL }, wlog);
	assert_int_equal(tu_reap(w, 30000, "plain worker"), 0);
	wait_sql(e->db_path, 40, 20000, "SELECT count(*) FROM done_jobs");
	/* both took their share */
	assert_true(tu_count(e->db_path, "SELECT count(*) FROM done_jobs WHERE worker LIKE '%/outsider'") > 0);
	assert_true(tu_count(e->db_path, "SELECT count(*) FROM done_jobs WHERE worker LIKE '%/w1'") > 0);
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
	/* the lock went with it: a new run starts */
	run = START(e, log, "--workers", "1");
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "second run"), 0);
}

/* ---- supervision -------------------------------------------------------- */

static void test_killed_worker_restarts_and_its_job_comes_back(void **state)
{
	const struct tu_env *e = *state;
	char log[512];
	pid_t run, w[4], w2[4];

	run = START(e, log, "--workers", "1", "--concurrency", "1", "--lease-ms", "600");
	enqueue(e, "sleep", "{\"ms\":1500}");
	wait_sql(e->db_path, 1, 10000, "SELECT count(*) FROM stream WHERE lease_token IS NOT NULL");
	assert_int_equal(children(run, " worker ", w, 4), 1);
	kill(w[0], SIGKILL);
	tu_wait_log(log, "restarts=1", 1, 10000);
	tu_wait_log(log, "msg=\"worker started\"", 2, 10000);	/* exec'd, not just forked */
	assert_int_equal(children(run, " worker ", w2, 4), 1);
	assert_true(w2[0] != w[0]);
	assert_true(tu_count_in(log, "signal=9") >= 1);
	/* done by the new worker, on its second delivery (the lease ran out) */
	wait_sql(e->db_path, 1, 20000, "SELECT count(*) FROM done_jobs WHERE deliveries >= 2");
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM stream"), 0);
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
}

static void test_job_that_kills_workers_goes_dead_not_round_a_loop(void **state)
{
	const struct tu_env *e = *state;
	char log[512];
	pid_t run;

	/* every worker that finishes a job dies before recording it */
	setenv("STAGEDOOR_FAILPOINTS", "after_work_before_ack=crash", 1);
	run = START(e, log, "--workers", "1", "--concurrency", "1", "--lease-ms", "300",
		    "--max-deliveries", "3");
	enqueue(e, "noop", "{}");
	wait_sql(e->db_path, 1, 30000, "SELECT count(*) FROM dead_jobs");
	assert_true(tu_count(e->db_path, "SELECT deliveries FROM dead_jobs") >= 3);
	assert_true(tu_count_in(log, "msg=\"failpoint hit\"") >= 3);
	assert_true(tu_count_in(log, "status=70") >= 3);
	/* the death is said, once, as a warning */
	tu_wait_log(log, "level=warn msg=\"job dead\" job_id=", 1, 5000);
	assert_int_equal(tu_count_in(log, "reason=poison"), 1);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM stream"), 0);
	/* the supervisor lives on and keeps its worker; a worker that had
	 * started comes back at once (the job's lease paces the crashes) */
	assert_true(alive(run));
	tu_wait_log(log, "restarts=3", 1, 10000);
	assert_int_equal(tu_count_in(log, "msg=\"child restarts\" child=w1 in_ms=100\n"),
			 tu_count_in(log, "msg=\"child restarts\" child=w1 "));
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
}

/* A worker that dies before it is ready is not restarted in a hot loop: the
 * waits double.  (A setting that would stop every worker stops `run` itself.) */
static void test_child_that_cannot_start_backs_off(void **state)
{
	const struct tu_env *e = *state;
	char log[512];
	pid_t run;

	/* a setting run cannot take stops it with 78: systemd does not restart
	 * it into the same mistake */
	assert_int_equal(RUN("run", "--db", e->db_path, "--mail-url", "gopher://mail.example"), 78);
	assert_non_null(strstr(err, "gopher"));
	assert_int_equal(RUN("run", "--db", e->db_path, "--timezone", "Mars/Olympus"), 78);
	assert_non_null(strstr(err, "Mars/Olympus"));

	setenv("STAGEDOOR_FAILPOINTS", "worker_start=crash", 1);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	run = tu_spawn((const char *const[]){ "run", "--db", e->db_path, "--workers", "1", NULL },
		       log);
	tu_wait_log(log, "child=w1 in_ms=800", 1, 15000);
	assert_int_equal(tu_count_in(log, "child=w1 in_ms=100\n"), 1);
	assert_int_equal(tu_count_in(log, "child=w1 in_ms=200\n"), 1);
	assert_int_equal(tu_count_in(log, "child=w1 in_ms=400\n"), 1);
	/* the relay, which started, never left */
	assert_int_equal(tu_count_in(log, "child=relay role=relay pid"), 1);
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
}

/* ---- stopping ----------------------------------------------------------- */

static void test_sigterm_lets_running_handlers_finish(void **state)
{
	const struct tu_env *e = *state;
	char log[512];
	pid_t run;

	run = START(e, log, "--workers", "2", "--grace-ms", "10000");
	enqueue(e, "sleep", "{\"ms\":2000}");
	wait_sql(e->db_path, 1, 10000, "SELECT count(*) FROM stream WHERE lease_token IS NOT NULL");
	/* claimed is not yet running (a job only queued is handed back at a
	 * stop): give the worker's thread time to start the handler */
	usleep(500 * 1000);
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM done_jobs"), 1);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(tu_count_in(log, "msg=\"run stopped\""), 1);
}

static void test_sigterm_past_grace_releases_the_job_ready_at_once(void **state)
{
	const struct tu_env *e = *state;
	char log[512];
	pid_t run;
	int64_t before;

	run = START(e, log, "--workers", "1", "--grace-ms", "300", "--lease-ms", "60000");
	enqueue(e, "sleep", "{\"ms\":20000}");
	wait_sql(e->db_path, 1, 10000, "SELECT count(*) FROM stream WHERE lease_token IS NOT NULL");
	before = tu_count(e->db_path, "SELECT visible_at FROM stream");
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 10000, "run"), 0);
	/* released: no lease, claimable now rather than when the 60 s lease ends */
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM stream WHERE lease_token IS NULL"), 1);
	assert_true(tu_count(e->db_path, "SELECT visible_at FROM stream") < before - 50000);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM done_jobs"), 0);
}

static void test_killed_supervisor_takes_its_children(void **state)
{
	const struct tu_env *e = *state;
	char log[512];
	pid_t run, kids[8];
	int n, i, waited;

	run = START(e, log, "--workers", "2");
	n = children(run, "stagedoor", kids, 8);
	assert_int_equal(n, 3);
	kill(run, SIGKILL);
	tu_reap(run, 5000, "run");
	for (waited = 0; waited < 10000; waited += 20) {
		int left = 0;
		for (i = 0; i < n; i++)
			left += alive(kids[i]);
		if (!left)
			break;
		tu_sleep_ms(20);
	}
	for (i = 0; i < n; i++)
		if (alive(kids[i]))
			fail_msg("child %ld outlived its supervisor", (long)kids[i]);
	/* and a new run can start at once */
	run = START(e, log, "--workers", "1");
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run after a kill"), 0);
}

/* ---- SIGHUP ------------------------------------------------------------- */

static void write_conf(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_sighup_rereads_the_configuration(void **state)
{
	const struct tu_env *e = *state;
	char conf[512], log[512], text[1024];
	pid_t run, w[8];

	snprintf(conf, sizeof conf, "%s/stagedoor.conf", e->dir);
	snprintf(text, sizeof text, "db = %s\nworkers = 1\nlog_level = info\n", e->db_path);
	write_conf(conf, text);
	unsetenv("STAGEDOOR_LOG_LEVEL");
	run = START(e, log, "--config", conf);
	assert_int_equal(children(run, " worker ", w, 8), 1);

	/* live: two workers now, and debug lines; no restart of the first */
	snprintf(text, sizeof text, "db = %s\nworkers = 2\nlog_level = debug\n", e->db_path);
	write_conf(conf, text);
	kill(run, SIGHUP);
	tu_wait_log(log, "msg=\"configuration reloaded\" changed=workers,log_level restart_workers=no",
		 1, 10000);
	tu_wait_log(log, "msg=\"worker started\" worker=w2 ", 1, 10000);
	assert_int_equal(tu_count_in(log, "restarts=1"), 0);

	/* a broken file changes nothing and says why */
	write_conf(conf, "workers = 2\nlease_ms = later\n");
	kill(run, SIGHUP);
	tu_wait_log(log, "configuration not reloaded", 1, 10000);
	assert_true(alive(run));
	assert_int_equal(children(run, " worker ", w, 8), 2);

	/* a worker setting: the workers restart one at a time to take it */
	snprintf(text, sizeof text, "db = %s\nworkers = 2\nlog_level = debug\nlease_ms = 7000\n",
		 e->db_path);
	write_conf(conf, text);
	kill(run, SIGHUP);
	tu_wait_log(log, "changed=lease_ms restart_workers=yes", 1, 10000);
	tu_wait_log(log, "msg=\"worker started\" worker=w1 ", 2, 15000);
	tu_wait_log(log, "msg=\"worker started\" worker=w2 ", 2, 15000);
	assert_int_equal(children(run, " worker ", w, 8), 2);
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
}

static void test_sighup_reopens_the_log_file(void **state)
{
	const struct tu_env *e = *state;
	char conf[512], log[512], text[1024], flog[600], moved[600];
	pid_t run;

	snprintf(conf, sizeof conf, "%s/stagedoor.conf", e->dir);
	snprintf(flog, sizeof flog, "%s/box.log", e->dir);
	snprintf(moved, sizeof moved, "%s/box.log.1", e->dir);
	snprintf(text, sizeof text, "db = %s\nworkers = 1\nlog_file = %s\n", e->db_path, flog);
	write_conf(conf, text);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	run = tu_spawn((const char *const[]){ "run", "--config", conf, NULL }, log);
	tu_wait_log(flog, "msg=\"worker started\"", 1, 10000);
	/* logrotate moves the file, then signals */
	assert_int_equal(rename(flog, moved), 0);
	kill(run, SIGHUP);
	tu_wait_log(flog, "msg=\"configuration reloaded\"", 1, 10000);
	/* the workers reopen theirs too */
	tu_wait_log(flog, "pid=", 2, 10000);
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
	assert_true(tu_count_in(flog, "msg=\"worker stopped\"") == 1);
	assert_int_equal(tu_count_in(moved, "msg=\"worker stopped\""), 0);
	assert_int_equal(tu_count_in(moved, "msg=\"run started\""), 1);
	/* the file only: nothing went to stderr */
	assert_int_equal(tu_count_in(log, "msg="), 0);
}

/* ---- logs ----------------------------------------------------------------- */

/* Orders through the appliance: one logfmt line per job with the fields an
 * operator greps for, and never a buyer's name or address. */
static void test_job_lines_carry_ids_not_buyers(void **state)
{
	const struct tu_env *e = *state;
	char log[512], ev[32];
	pid_t run;
	char *p;

	assert_int_equal(RUN("event", "add", "--name", "Gig", "--venue", "Hall", "--starts-at",
			     "2036-12-31T20:00Z", "--capacity", "10", "--db", e->db_path), 0);
	snprintf(ev, sizeof ev, "%.20s", out);
	if ((p = strchr(ev, '\n')))
		*p = '\0';
	run = START(e, log, "--workers", "1");
	assert_int_equal(RUN("order", "add", "--event", ev, "--name", "Zelda Quux", "--email",
			     "zelda.quux@example.org", "--seats", "2", "--db", e->db_path), 0);
	wait_sql(e->db_path, 3, 20000, "SELECT count(*) FROM done_jobs");
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
	assert_int_equal(tu_count_in(log, "msg=\"job finished\""), 3);
	assert_int_equal(tu_count_in(log, "kind=render_tickets attempt=1 delivery=1 outcome=done "
				  "duration_ms="), 1);
	assert_int_equal(tu_count_in(log, "outcome=done"), 3);
	assert_int_equal(tu_count_in(log, "worker=w1 job_id=outbox:"), 3);
	assert_int_equal(tu_count_in(log, "Zelda"), 0);
	assert_int_equal(tu_count_in(log, "Quux"), 0);
	assert_int_equal(tu_count_in(log, "zelda.quux"), 0);
	assert_int_equal(tu_count_in(log, "example.org"), 0);
	/* the drained box holds every invariant */
	assert_int_equal(RUN("check", "--db", e->db_path), 0);
	/* every line is one logfmt record */
	{
		size_t size;
		char *text = (char *)tu_slurp(log, &size), *line, *save = NULL;
		for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (strncmp(line, "ts=", 3) != 0 || !strstr(line, " level=") ||
			    !strstr(line, " msg="))
				fail_msg("not a logfmt line: %s", line);
		free(text);
	}
}

/* ---- maintenance ----------------------------------------------------------- */

static void test_maintenance_prunes_and_checkpoints(void **state)
{
	const struct tu_env *e = *state;
	char log[512], wal[600];
	struct stat sb;
	pid_t run;
	int i;

	run = START(e, log, "--workers", "1", "--retention-ms", "1", "--maintenance-ms", "100");
	for (i = 0; i < 5; i++)
		enqueue(e, "noop", "{}");
	/* done, then pruned into the per-kind totals */
	wait_sql(e->db_path, 5, 10000, "SELECT coalesce(sum(pruned), 0) FROM done_totals");
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM done_jobs"), 0);
	tu_wait_log(log, "msg=pruned done_jobs=", 1, 5000);
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
	/* the WAL was checkpointed and cut back, not left to grow */
	snprintf(wal, sizeof wal, "%s-wal", e->db_path);
	assert_true(stat(wal, &sb) != 0 || sb.st_size < 4 * 1024 * 1024);
}

/* Free space below disk_warn_bytes: one warning (not one per maintenance
 * tick), and a line when it is back after the threshold changed. */
static void test_low_disk_warns_once_and_says_when_back(void **state)
{
	const struct tu_env *e = *state;
	char conf[512], log[512], text[1024];
	pid_t run;

	snprintf(conf, sizeof conf, "%s/stagedoor.conf", e->dir);
	/* 2^50 bytes: more than any test machine has free */
	snprintf(text, sizeof text, "db = %s\nworkers = 1\nmaintenance_ms = 100\n"
		 "disk_warn_bytes = 1125899906842624\n", e->db_path);
	write_conf(conf, text);
	run = START(e, log, "--config", conf);
	tu_wait_log(log, "level=warn msg=\"disk space low\" db_free_bytes=", 1, 5000);
	assert_int_equal(tu_count_in(log, " warn_bytes=1125899906842624"), 1);
	tu_sleep_ms(1000);	/* ten more ticks, still low: no second line */
	assert_int_equal(tu_count_in(log, "msg=\"disk space low\""), 1);
	snprintf(text, sizeof text, "db = %s\nworkers = 1\nmaintenance_ms = 100\n"
		 "disk_warn_bytes = 1\n", e->db_path);
	write_conf(conf, text);
	kill(run, SIGHUP);
	tu_wait_log(log, "level=info msg=\"disk space back\"", 1, 10000);
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
}

/* ---- the state folder ------------------------------------------------------ */


/* state_dir puts the key, the PDFs and the default maildir in their own
 * folder, and every command that reads them follows it. */
static void test_state_dir_holds_the_files(void **state)
{
	const struct tu_env *e = *state;
	char conf[512], text[1024], log[512], path[700], sd[400], ev[32], *p;
	pid_t run;

	snprintf(sd, sizeof sd, "%s/state", e->dir);
	snprintf(conf, sizeof conf, "%s/stagedoor.conf", e->dir);
	snprintf(text, sizeof text, "db = %s\nstate_dir = %s\nworkers = 1\n", e->db_path, sd);
	write_conf(conf, text);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	run = tu_spawn((const char *const[]){ "run", "--config", conf, NULL }, log);
	tu_wait_log(log, "msg=\"worker started\"", 1, 10000);
	assert_int_equal(RUN("event", "add", "--name", "Gig", "--venue", "Hall", "--starts-at",
			     "2036-12-31T20:00Z", "--capacity", "10", "--db", e->db_path), 0);
	snprintf(ev, sizeof ev, "%.20s", out);
	if ((p = strchr(ev, '\n')))
		*p = '\0';
	assert_int_equal(RUN("order", "add", "--event", ev, "--name", "Ana", "--email",
			     "ana@example.org", "--seats", "2", "--db", e->db_path), 0);
	wait_sql(e->db_path, 3, 20000, "SELECT count(*) FROM done_jobs");
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);

	snprintf(path, sizeof path, "%s/ticket.key", sd);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(path, sizeof path, "%s/blobs", sd);
	assert_true(tu_count_files(path) > 0);
	snprintf(path, sizeof path, "%s/maildir/new", sd);
	assert_int_equal(tu_count_files(path), 1);
	/* nothing beside the database */
	snprintf(path, sizeof path, "%s/ticket.key", e->dir);
	assert_int_equal(access(path, F_OK), -1);
	snprintf(path, sizeof path, "%s/blobs", e->dir);
	assert_int_equal(access(path, F_OK), -1);
	/* check finds the PDFs where state_dir says, from the file or a flag */
	setenv("STAGEDOOR_CONFIG", conf, 1);
	assert_int_equal(RUN("check"), 0);
	unsetenv("STAGEDOOR_CONFIG");
	assert_int_equal(RUN("check", "--db", e->db_path, "--state-dir", sd), 0);
	assert_int_equal(RUN("check", "--db", e->db_path), 1);
	assert_non_null(strstr(err, "PDF"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_second_run_refused_plain_worker_welcome, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_killed_worker_restarts_and_its_job_comes_back,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_that_kills_workers_goes_dead_not_round_a_loop,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_child_that_cannot_start_backs_off, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sigterm_lets_running_handlers_finish, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sigterm_past_grace_releases_the_job_ready_at_once,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_killed_supervisor_takes_its_children, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sighup_rereads_the_configuration, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_sighup_reopens_the_log_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_lines_carry_ids_not_buyers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_low_disk_warns_once_and_says_when_back,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_maintenance_prunes_and_checkpoints, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_state_dir_holds_the_files, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
