/*
 * test_procs.c: several stagedoor processes on one database file.
 *
 * Workers and relays run as real child processes ($STAGEDOOR_BIN) and are
 * killed, stopped and raced against each other; the test process fills the
 * database through the library on the real clock and checks the rows.
 *
 * tu_spawn tracks the children; tu_teardown SIGKILLs any still running, so
 * a failed assertion never leaves a worker behind.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "db.h"
#include "outbox.h"
#include "queue.h"
#include "testutil.h"

#define ARGV(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* ---- helpers ------------------------------------------------------------- */


static double ms_since(int64_t t0_us)
{
	return (double)(clock_mono_us() - t0_us) / 1000.0;
}

/* Poll SQL until it returns want, up to timeout_ms; fail otherwise. */
static void await_count(const struct tu_env *e, int64_t want, int timeout_ms, const char *sql)
{
	int64_t t0 = clock_mono_us(), v = -1;

	while (ms_since(t0) < timeout_ms) {
		if ((v = tu_count(e->db_path, sql)) == want)
			return;
		tu_sleep_ms(5);
	}
	fail_msg("after %d ms, %s gave %lld, not %lld", timeout_ms, sql, (long long)v,
		 (long long)want);
}

/* Wait until the child's log holds text (it logs "worker started" and
 * "relay started" once its loop is ready). */
static void await_log(const char *log, const char *text, int timeout_ms)
{
	int64_t t0 = clock_mono_us();
	char buf[16384];

	while (ms_since(t0) < timeout_ms) {
		FILE *f = fopen(log, "r");
		if (f) {
			size_t n = fread(buf, 1, sizeof buf - 1, f);
			buf[n] = '\0';
			fclose(f);
			if (strstr(buf, text))
				return;
		}
		tu_sleep_ms(5);
	}
	fail_msg("%s: no '%s' after %d ms", log, text, timeout_ms);
}

static void put(const struct tu_env *e, const char *kind, const char *payload, const char *job_id)
{
	struct enqueue q = { kind, payload, job_id, 0, 0 };

	assert_int_equal(queue_enqueue(e->db, &q, NULL), SD_OK);
}

/* utime + stime of a process, in clock ticks. */
static long long cpu_ticks(pid_t pid)
{
	char path[64], buf[2048], *p;
	unsigned long long ut = 0, stt = 0;
	FILE *f;
	size_t n;
	int field;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* the command name may hold spaces: fields restart after the last ')' */
	p = strrchr(buf, ')');
	assert_non_null(p);
	p += 2;	/* field 3, state */
	for (field = 3; field < 14 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	assert_non_null(p);
	assert_int_equal(sscanf(p, "%llu %llu", &ut, &stt), 2);
	return (long long)(ut + stt);
}

/* ========================= two workers, 10,000 jobs ======================= */

#define N_JOBS 10000
/* on PostgreSQL each of the 10,000 enqueues is a round trip to the server */
#define VISIBLE_AFTER_MS (tu_pg() ? 8000 : 1500)

static void test_two_workers_share_10k_jobs_exactly_once(void **state)
{
	struct tu_env *e = *state;
	char id[32], log_a[400], log_b[400];
	int64_t t0, in_a, in_b, visible_at;
	pid_t a, b;
	int i, ra, rb;

	t0 = clock_mono_us();

	/* The jobs become visible 1.5 s after their commit, once both workers
	 * are up and waiting for them: neither gets a head start, both claim
	 * from the same 10,000 entries from the same moment. */
	assert_int_equal(db_begin(e->db), SD_OK);
	for (i = 0; i < N_JOBS; i++) {
		struct enqueue q = { "noop", "{}", id, VISIBLE_AFTER_MS, 0 };
		snprintf(id, sizeof id, "n%05d", i);
		assert_int_equal(queue_enqueue(e->db, &q, NULL), SD_OK);
	}
	assert_int_equal(db_commit(e->db), SD_OK);
	print_message("    %d jobs enqueued in one transaction: %.0f ms\n", N_JOBS, ms_since(t0));
	visible_at = tu_countf(e->db_path, "SELECT min(visible_at) FROM stream");
	snprintf(log_a, sizeof log_a, "%s/a.log", e->dir);
	snprintf(log_b, sizeof log_b, "%s/b.log", e->dir);
	a = tu_spawn(ARGV("worker", "--drain", "--concurrency", "4", "--batch", "50", "--name", "a",
		       "--db", e->db_path), log_a);
	b = tu_spawn(ARGV("worker", "--drain", "--concurrency", "4", "--batch", "50", "--name", "b",
		       "--db", e->db_path), log_b);
	await_log(log_a, "worker started", VISIBLE_AFTER_MS);
	await_log(log_b, "worker started", VISIBLE_AFTER_MS);
	if (clock_now_ms() >= visible_at - 100)
		fail_msg("the workers took too long to start: the race this test needs did not "
			 "happen");
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE lease_token IS NULL"), N_JOBS);
	while (clock_now_ms() < visible_at)
		tu_sleep_ms(1);
	t0 = clock_mono_us();
	ra = tu_reap(a, 60000, "worker a");
	rb = tu_reap(b, 60000, "worker b");
	assert_int_equal(ra, 0);
	assert_int_equal(rb, 0);

	in_a = tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE worker LIKE '%%/a'");
	in_b = tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE worker LIKE '%%/b'");
	print_message("    two workers: %d jobs in %.0f ms (a %lld, b %lld)\n", N_JOBS, ms_since(t0),
		      (long long)in_a, (long long)in_b);

	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs"), N_JOBS);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(DISTINCT job_id) FROM done_jobs"), N_JOBS);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE job_id LIKE 'n%%'"),
			 N_JOBS);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM dead_jobs"), 0);
	/* one delivery each: no entry was ever held by two live leases */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE deliveries <> 1"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE attempts <> 0"), 0);
	assert_int_equal(in_a + in_b, N_JOBS);
	/* Both must have worked: a worker that waits for the write lock in
	 * SQLite's default busy handler backs off to 100 ms naps and can be
	 * shut out for the whole run while the other re-takes the lock right
	 * after each commit (see the report with this test). */
	if (in_a == 0 || in_b == 0)
		fail_msg("one worker did none of the %d jobs (a %lld, b %lld): it never got the "
			 "write lock", N_JOBS, (long long)in_a, (long long)in_b);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(DISTINCT worker) FROM done_jobs"), 2);
}

/* ========================= sharing the write lock ========================= */

#define LOCK_ROUNDS 6
#define LOCK_JOBS 1500

/*
 * Two workers that had to wait for the write lock (held here for 0.5 s, as
 * any long write would) must both get work once it is free.  A regression
 * test: with SQLite's default busy handler (sqlite3_busy_timeout) a waiter
 * naps 100 ms between tries once it has waited ~300 ms, while the worker that
 * got the lock takes it again right after each commit; the other one then
 * found it taken at every try and did nothing at all in about half the
 * rounds.  db.c's short-nap busy handler lets it in.
 */
static void test_workers_that_waited_for_the_lock_both_get_work(void **state)
{
	struct tu_env *e = *state;
	char id[32], log_a[400], log_b[400];
	int64_t in_a[LOCK_ROUNDS], in_b[LOCK_ROUNDS];
	int round, i, starved = 0;
	pid_t a, b;

	TU_SQLITE_ONLY();	/* a PostgreSQL transaction holds no lock on the queue */
	for (round = 0; round < LOCK_ROUNDS; round++) {
		snprintf(log_a, sizeof log_a, "%s/a%d.log", e->dir, round);
		snprintf(log_b, sizeof log_b, "%s/b%d.log", e->dir, round);
		assert_int_equal(db_begin(e->db), SD_OK);
		for (i = 0; i < LOCK_JOBS; i++) {
			snprintf(id, sizeof id, "r%d-%d", round, i);
			put(e, "noop", "{}", id);
		}
		a = tu_spawn(ARGV("worker", "--drain", "--concurrency", "4", "--batch", "50", "--name",
			       "a", "--db", e->db_path), log_a);
		b = tu_spawn(ARGV("worker", "--drain", "--concurrency", "4", "--batch", "50", "--name",
			       "b", "--db", e->db_path), log_b);
		await_log(log_a, "worker started", 5000);
		await_log(log_b, "worker started", 5000);
		tu_sleep_ms(500);	/* both wait in BEGIN IMMEDIATE */
		assert_int_equal(db_commit(e->db), SD_OK);
		assert_int_equal(tu_reap(a, 30000, "worker a"), 0);
		assert_int_equal(tu_reap(b, 30000, "worker b"), 0);
		in_a[round] = tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE worker LIKE '%%/a' AND "
				    "job_id LIKE 'r%d-%%'", round);
		in_b[round] = tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE worker LIKE '%%/b' AND "
				    "job_id LIKE 'r%d-%%'", round);
		print_message("    round %d: a %lld, b %lld of %d jobs\n", round,
			      (long long)in_a[round], (long long)in_b[round], LOCK_JOBS);
		assert_int_equal(in_a[round] + in_b[round], LOCK_JOBS);
		if (in_a[round] == 0 || in_b[round] == 0)
			starved++;
	}
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE deliveries <> 1"), 0);
	if (starved)
		fail_msg("in %d of %d rounds one worker never got the write lock and did no job",
			 starved, LOCK_ROUNDS);
}

/* ========================= SIGKILL mid-job ================================ */

static void test_sigkill_mid_job_redelivered_after_lease_expiry(void **state)
{
	struct tu_env *e = *state;
	char log[400];
	int64_t lease_end, killed_at, t0;
	pid_t a, b;

	snprintf(log, sizeof log, "%s/workers.log", e->dir);
	put(e, "sleep", "{\"ms\":3000}", "slow");
	a = tu_spawn(ARGV("worker", "--lease-ms", "1000", "--name", "A", "--db", e->db_path), log);
	await_count(e, 1, 5000, "SELECT count(*) FROM stream WHERE lease_token IS NOT NULL");
	tu_sleep_ms(100);	/* well inside the 3 s handler */
	assert_int_equal(kill(a, SIGKILL), 0);
	assert_int_equal(tu_reap(a, 5000, "worker A after SIGKILL"), -1);
	killed_at = clock_now_ms();
	/* A held the lease (extended every half lease) until it died */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE job_id = 'slow' AND "
			      "leased_by LIKE '%%/A' AND deliveries = 1"), 1);
	lease_end = tu_countf(e->db_path, "SELECT visible_at FROM stream WHERE job_id = 'slow'");
	assert_true(lease_end > killed_at - 50);
	assert_true(lease_end <= killed_at + 1000);

	t0 = clock_mono_us();
	b = tu_spawn(ARGV("worker", "--drain", "--name", "B", "--db", e->db_path), log);
	assert_int_equal(tu_reap(b, 15000, "worker B --drain"), 0);
	print_message("    B finished the job %.0f ms after A was killed (lease ended %lld ms "
		      "after the kill)\n", ms_since(t0), (long long)(lease_end - killed_at));

	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM dead_jobs"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs"), 1);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE job_id = 'slow' AND "
			      "worker LIKE '%%/B' AND deliveries = 2 AND attempts = 0"), 1);
	/* B claimed only once A's lease ran out, then slept 3 s */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE job_id = 'slow' AND "
			      "finished_at >= %lld", (long long)(lease_end + 3000)), 1);
}

/* ========================= a job that kills its worker ==================== */

/* Five workers in turn claim the job and are SIGKILLed while it runs; at the
 * sixth claim the job has had five leases expire (max_deliveries) and goes to
 * the dead letters as poison instead of being run again. */
static void test_job_killing_its_workers_goes_dead_as_poison(void **state)
{
	struct tu_env *e = *state;
	char log[400], name[16], sql[256];
	pid_t w;
	int k;

	snprintf(log, sizeof log, "%s/workers.log", e->dir);
	put(e, "sleep", "{\"ms\":20000}", "poison");
	for (k = 1; k <= QUEUE_MAX_DELIVERIES_DEFAULT; k++) {
		snprintf(name, sizeof name, "k%d", k);
		w = tu_spawn(ARGV("worker", "--lease-ms", "100", "--name", name, "--db", e->db_path), log);
		snprintf(sql, sizeof sql, "SELECT count(*) FROM stream WHERE leased_by LIKE '%%/%s' AND "
			 "deliveries = %d AND expiries = %d", name, k, k - 1);
		await_count(e, 1, 5000, sql);
		assert_int_equal(kill(w, SIGKILL), 0);
		assert_int_equal(tu_reap(w, 5000, "worker after SIGKILL"), -1);
	}
	w = tu_spawn(ARGV("worker", "--drain", "--name", "last", "--db", e->db_path), log);
	assert_int_equal(tu_reap(w, 10000, "worker --drain after five deaths"), 0);

	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM dead_jobs WHERE job_id = 'poison' AND "
			      "expiries = %d AND last_error LIKE 'poison%%'",
			      QUEUE_MAX_DELIVERIES_DEFAULT), 1);
}

/* ========================= short leases, extended ========================= */

static void test_live_workers_keep_short_leases_by_extending(void **state)
{
	struct tu_env *e = *state;
	char log[400], id[32], buf[65536];
	size_t n;
	FILE *f;
	pid_t a, b;
	int i;

	/* jobs five times longer than the lease: only extensions keep them from
	 * being claimed a second time by the other, live, worker */
	snprintf(log, sizeof log, "%s/workers.log", e->dir);
	for (i = 0; i < 6; i++) {
		snprintf(id, sizeof id, "long-%d", i);
		put(e, "sleep", "{\"ms\":1500}", id);
	}
	a = tu_spawn(ARGV("worker", "--drain", "--concurrency", "2", "--lease-ms", "300", "--name",
		       "a", "--db", e->db_path), log);
	b = tu_spawn(ARGV("worker", "--drain", "--concurrency", "2", "--lease-ms", "300", "--name",
		       "b", "--db", e->db_path), log);
	assert_int_equal(tu_reap(a, 15000, "worker a"), 0);
	assert_int_equal(tu_reap(b, 15000, "worker b"), 0);

	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM dead_jobs"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs"), 6);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(DISTINCT job_id) FROM done_jobs"), 6);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE deliveries <> 1"), 0);
	f = fopen(log, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	if (strstr(buf, "lease expired") || strstr(buf, "lease lost"))
		fail_msg("a live worker lost a lease:\n%s", buf);
}

/* ========================= SIGTERM ======================================== */

static void test_sigterm_lets_running_job_finish(void **state)
{
	struct tu_env *e = *state;
	char log[400];
	int64_t t0;
	double took;
	pid_t w;

	snprintf(log, sizeof log, "%s/worker.log", e->dir);
	put(e, "sleep", "{\"ms\":500}", "short");
	w = tu_spawn(ARGV("worker", "--name", "T", "--db", e->db_path), log);
	await_count(e, 1, 5000, "SELECT count(*) FROM stream WHERE lease_token IS NOT NULL");
	/* claimed is not yet running: a stop that comes between the claim's
	 * commit and a handler thread taking the job gives it back unrun (by
	 * design); on a loaded machine that gap can last milliseconds */
	tu_sleep_ms(150);
	t0 = clock_mono_us();
	assert_int_equal(kill(w, SIGTERM), 0);
	assert_int_equal(tu_reap(w, 10000, "worker after SIGTERM"), 0);
	took = ms_since(t0);
	print_message("    SIGTERM to exit: %.0f ms (job of 500 ms)\n", took);
	assert_true(took < 5000);

	/* done, not released */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE job_id = 'short' AND "
			      "worker LIKE '%%/T' AND deliveries = 1"), 1);
}

static void test_sigterm_past_grace_releases_job(void **state)
{
	struct tu_env *e = *state;
	char log[400];
	int64_t t0, now;
	double took;
	pid_t w;

	snprintf(log, sizeof log, "%s/worker.log", e->dir);
	put(e, "sleep", "{\"ms\":5000}", "long");
	w = tu_spawn(ARGV("worker", "--grace-ms", "200", "--name", "G", "--db", e->db_path), log);
	await_count(e, 1, 5000, "SELECT count(*) FROM stream WHERE lease_token IS NOT NULL");
	t0 = clock_mono_us();
	assert_int_equal(kill(w, SIGTERM), 0);
	assert_int_equal(tu_reap(w, 5000, "worker after SIGTERM"), 0);
	took = ms_since(t0);
	now = clock_now_ms();
	print_message("    SIGTERM to exit with --grace-ms 200: %.0f ms\n", took);
	assert_true(took < 1000);

	/* given back: ready now, no lease, the one delivery it had */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM dead_jobs"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE job_id = 'long' AND "
			      "lease_token IS NULL AND leased_by IS NULL AND visible_at <= %lld "
			      "AND deliveries = 1 AND expiries = 0 AND attempts = 0", (long long)now),
			 1);
}

/* ========================= wake-up across processes ======================= */

#define WAKE_TRIALS 5

static void test_idle_worker_wakes_at_once_without_busy_waiting(void **state)
{
	struct tu_env *e = *state;
	char log[400], id[32];
	long long c0, c1, hz = sysconf(_SC_CLK_TCK);
	double seen[WAKE_TRIALS], best = 1e9, pct;
	int64_t t0, inside[WAKE_TRIALS];
	pid_t w;
	int i;

	snprintf(log, sizeof log, "%s/worker.log", e->dir);
	w = tu_spawn(ARGV("worker", "--name", "idle", "--db", e->db_path), log);
	await_log(log, "worker started", 5000);
	tu_sleep_ms(200);

	/* idle: no busy waiting */
	c0 = cpu_ticks(w);
	t0 = clock_mono_us();
	tu_sleep_ms(2000);
	c1 = cpu_ticks(w);
	pct = 100.0 * (double)(c1 - c0) / (double)hz / (ms_since(t0) / 1000.0);
	print_message("    idle worker: %lld ticks (%.1f%% of a core) over %.0f ms\n", c1 - c0, pct,
		      ms_since(t0));
	assert_true(pct < 5.0);

	/* enqueue in this process, commit, and time until the row is done */
	for (i = 0; i < WAKE_TRIALS; i++) {
		snprintf(id, sizeof id, "wake-%d", i);
		t0 = clock_mono_us();
		put(e, "noop", "{}", id);
		for (;;) {
			if (tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE job_id = '%s'", id) == 1)
				break;
			if (ms_since(t0) > 3000)
				fail_msg("job %s not done 3 s after its commit", id);
			tu_sleep_ms(1);
		}
		seen[i] = ms_since(t0);
		inside[i] = tu_countf(e->db_path, "SELECT finished_at - created_at FROM done_jobs WHERE "
				  "job_id = '%s'", id);
		tu_sleep_ms(150 + 97 * i);	/* land at different points of any poll cycle */
	}
	for (i = 0; i < WAKE_TRIALS; i++)
		print_message("    wake-up %d: done %.1f ms after commit (created_at to "
			      "finished_at %lld ms)\n", i, seen[i], (long long)inside[i]);
	for (i = 0; i < WAKE_TRIALS; i++) {
		assert_true(seen[i] < 500);
		if (seen[i] < best)
			best = seen[i];
	}
	/* the promise is 50 ms; the fastest of a few trials must keep it even on
	 * a loaded machine */
	assert_true(best < 50);

	/* enqueued by a separate process */
	{
		char out[256];
		int64_t lat;
		assert_int_equal(tu_run(out, sizeof out, NULL, 0,
					ARGV("enqueue", "noop", "{}", "--job-id", "by-cli", "--db",
					     e->db_path)), 0);
		await_count(e, 1, 3000, "SELECT count(*) FROM done_jobs WHERE job_id = 'by-cli'");
		lat = tu_countf(e->db_path, "SELECT finished_at - created_at FROM done_jobs WHERE job_id = 'by-cli'");
		print_message("    enqueue process to done: %lld ms\n", (long long)lat);
		assert_true(lat < 500);
	}

	/* an idle worker stops at once */
	t0 = clock_mono_us();
	assert_int_equal(kill(w, SIGTERM), 0);
	assert_int_equal(tu_reap(w, 5000, "idle worker after SIGTERM"), 0);
	print_message("    idle worker: SIGTERM to exit %.0f ms\n", ms_since(t0));
	assert_true(ms_since(t0) < 1000);
}

/* ========================= relay and worker running ======================= */

#define RELAY_TRIALS 5

static void test_relay_and_worker_publish_and_run_at_once(void **state)
{
	struct tu_env *e = *state;
	char log_r[400], log_w[400];
	double seen[RELAY_TRIALS];
	int64_t t0, oid;
	pid_t r, w;
	int i;

	snprintf(log_r, sizeof log_r, "%s/relay.log", e->dir);
	snprintf(log_w, sizeof log_w, "%s/worker.log", e->dir);
	r = tu_spawn(ARGV("relay", "--db", e->db_path), log_r);
	w = tu_spawn(ARGV("worker", "--name", "rw", "--db", e->db_path), log_w);
	await_log(log_r, "relay started", 5000);
	await_log(log_w, "worker started", 5000);
	tu_sleep_ms(200);

	/* both idle: neither polls */
	{
		long long r0 = cpu_ticks(r), w0 = cpu_ticks(w), hz = sysconf(_SC_CLK_TCK);
		tu_sleep_ms(1000);
		r0 = cpu_ticks(r) - r0;
		w0 = cpu_ticks(w) - w0;
		print_message("    idle for 1 s: relay %lld ticks, worker %lld ticks (%lld a second)\n",
			      r0, w0, hz);
		assert_true(r0 * 20 < hz);	/* under 5% of a core */
		assert_true(w0 * 20 < hz);
	}

	for (i = 0; i < RELAY_TRIALS; i++) {
		t0 = clock_mono_us();
		assert_int_equal(db_begin(e->db), SD_OK);
		assert_int_equal(outbox_add(e->db, "noop", NULL, "{}", 0, 0, &oid), SD_OK);
		assert_int_equal(db_commit(e->db), SD_OK);
		for (;;) {
			if (tu_countf(e->db_path, "SELECT count(*) FROM done_jobs d JOIN outbox o ON "
				      "d.job_id = o.job_id WHERE o.id = %lld", (long long)oid) == 1)
				break;
			if (ms_since(t0) > 5000)
				fail_msg("outbox row %lld not done 5 s after its commit", (long long)oid);
			tu_sleep_ms(1);
		}
		seen[i] = ms_since(t0);
		tu_sleep_ms(150 + 97 * i);
	}
	for (i = 0; i < RELAY_TRIALS; i++)
		print_message("    outbox row %d: published and done %.1f ms after commit\n", i,
			      seen[i]);
	for (i = 0; i < RELAY_TRIALS; i++)
		assert_true(seen[i] < 500);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM outbox WHERE published_at IS NULL"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE worker LIKE '%%/rw'"), RELAY_TRIALS);

	assert_int_equal(kill(r, SIGTERM), 0);
	assert_int_equal(kill(w, SIGTERM), 0);
	assert_int_equal(tu_reap(r, 5000, "relay after SIGTERM"), 0);
	assert_int_equal(tu_reap(w, 5000, "worker after SIGTERM"), 0);
}

/*
 * A worker that ran many short jobs, then runs a long one, must not spin
 * through it: the short-job spin is bounded to one round after a job starts.
 */
static void test_long_job_after_short_ones_does_not_spin(void **state)
{
	struct tu_env *e = *state;
	char log[400];
	long long c0, c1, hz = sysconf(_SC_CLK_TCK);
	pid_t w;
	int i;

	snprintf(log, sizeof log, "%s/spin.log", e->dir);
	for (i = 0; i < 200; i++)
		put(e, "noop", "{}", NULL);
	put(e, "sleep", "{\"ms\":2500}", "long-one");
	w = tu_spawn(ARGV("worker", "--concurrency", "1", "--drain", "--db", e->db_path), log);
	await_count(e, 1, 5000,
		    "SELECT count(*) FROM stream WHERE job_id = 'long-one' AND lease_token IS NOT NULL");
	tu_sleep_ms(300);		/* past any spin round */
	c0 = cpu_ticks(w);
	tu_sleep_ms(1500);
	c1 = cpu_ticks(w);
	print_message("    during a long job: %lld ticks (%.1f%% of a core) over 1500 ms\n",
		      c1 - c0, 100.0 * (double)(c1 - c0) / (1.5 * (double)hz));
	assert_true((double)(c1 - c0) < 0.10 * 1.5 * (double)hz);
	assert_int_equal(tu_reap(w, 10000, "worker --drain"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs"), 201);
}

/* ========================= bench on PostgreSQL ============================ */

/* bench queue --db URI runs in a scratch schema of its own, dropped after;
 * --boxes 2 drains the stream from two processes sharing the database; and
 * --boxes needs a server's database. */
static void test_bench_queue_on_postgresql_in_two_boxes(void **state)
{
	static char out[8192], err[8192];
	int rc;

	(void)state;
	if (!tu_pg())
		TU_SKIP("needs PostgreSQL: the pg suite runs it");
	rc = tu_run(out, sizeof out, err, sizeof err,
		    ARGV("bench", "queue", "--jobs", "600", "--workers", "2", "--batch", "20",
			 "--latency-jobs", "60", "--db", tu_pg_base(), "--boxes", "2", "--json"));
	if (rc != 0)
		fail_msg("bench queue --db --boxes 2: exit %d: %s", rc, err);
	assert_non_null(strstr(out, "\"engine\":\"postgresql\",\"boxes\":2,"));
	assert_non_null(strstr(out, "\"jobs\":600,"));
	assert_int_equal(tu_pg_int("SELECT count(*) FROM pg_namespace WHERE nspname LIKE "
				   "'stagedoor_scratch_%'"), 0);
	rc = tu_run(out, sizeof out, err, sizeof err,
		    ARGV("bench", "queue", "--jobs", "10", "--boxes", "2"));
	assert_int_equal(rc, 2);
	assert_non_null(strstr(err, "--db postgresql://"));
	rc = tu_run(out, sizeof out, err, sizeof err,
		    ARGV("bench", "queue", "--jobs", "10", "--db", "/tmp/x.db"));
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(err, "postgresql:// URI"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_two_workers_share_10k_jobs_exactly_once, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_workers_that_waited_for_the_lock_both_get_work,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_sigkill_mid_job_redelivered_after_lease_expiry,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_job_killing_its_workers_goes_dead_as_poison,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_live_workers_keep_short_leases_by_extending,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_sigterm_lets_running_job_finish, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_sigterm_past_grace_releases_job, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_long_job_after_short_ones_does_not_spin,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_idle_worker_wakes_at_once_without_busy_waiting,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_relay_and_worker_publish_and_run_at_once, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_bench_queue_on_postgresql_in_two_boxes,
						tu_setup_real_nodb, tu_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
