/*
 * test_controls.c: the queue's controls (controls.h) under the fake clock,
 * on SQLite and (the pg suite) PostgreSQL: a paused kind is not claimed
 * and stays paused across a reopen, running jobs finish; a rate holds over
 * every claimer to within 5% over a minute; a concurrency limit counts a
 * killed worker's lease until it ends, over every box and per box; a
 * cancelled job leaves the stream as history, a running one is refused its
 * ack; an SQS queue is paused and limited as a kind is; a worker waits for
 * a limited kind without spinning.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "clock.h"
#include "controls.h"
#include "outbox.h"
#include "queue.h"
#include "testutil.h"

#define MAXJ 64

static struct db *db_of(void **state)
{
	return ((struct tu_env *)*state)->db;
}

static void enq(struct db *db, const char *kind, int n, int64_t delay_ms)
{
	struct enqueue e = { 0 };
	int i;

	e.kind = kind;
	e.delay_ms = delay_ms;
	for (i = 0; i < n; i++)
		assert_int_equal(queue_enqueue(db, &e, NULL), SD_OK);
}

/* take: what a worker's claim takes (the controlled lanes, then lane 0),
 * up to n, as worker; [out] *wake the controls' next chance */
static int take(struct db *db, const char *worker, int n, int64_t lease_ms, struct job **out,
		int64_t *wake)
{
	int got = 0, more = 0;
	int64_t w;

	assert_int_equal(controls_claim(db, worker, n, lease_ms, out, &got, wake ? wake : &w),
			 SD_OK);
	if (got < n)
		assert_int_equal(queue_claim(db, worker, n - got, lease_ms, out + got, &more),
				 SD_OK);
	return got + more;
}

/* how many of out[0..n) are of kind; each acked and freed when ack */
static int settle(struct db *db, struct job **out, int n, const char *kind, int ack)
{
	int i, k = 0;

	for (i = 0; i < n; i++) {
		k += strcmp(out[i]->kind, kind) == 0;
		if (ack) {
			assert_int_equal(queue_ack(db, out[i]->id, out[i]->lease_token), SD_OK);
			job_free(out[i]);
			out[i] = NULL;
		}
	}
	return k;
}

static int64_t lane_count(void **state, const char *kind, int64_t lane)
{
	struct tu_env *e = *state;

	return tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE kind = '%s' AND queue "
			 "= %lld", kind, (long long)lane);
}

/* ======================== pause ========================================== */

static void test_pause_holds_a_kind_until_resumed(void **state)
{
	struct tu_env *e = *state;
	struct db *db = db_of(state), *again;
	struct job *out[MAXJ], *running;
	struct control c;
	int changed = -1, n;
	int64_t wake;

	enq(db, "noop", 5, 0);
	enq(db, "sleep", 3, 0);
	/* one noop runs when the pause comes: it finishes */
	assert_int_equal(take(db, "w", 1, 60000, &running, NULL), 1);
	assert_string_equal(running->kind, "noop");
	assert_int_equal(controls_pause(db, "noop", "test", &changed), SD_OK);
	assert_int_equal(changed, 1);
	assert_int_equal(controls_pause(db, "noop", "test", &changed), SD_OK);
	assert_int_equal(changed, 0);
	/* its waiting entries moved to its lane, the running one with them */
	assert_int_equal(controls_get(db, "noop", &c), SD_OK);
	assert_true(c.lane < 0);
	assert_true(c.paused_at > 0);
	assert_string_equal(c.paused_by, "test");
	assert_int_equal(lane_count(state, "noop", c.lane), 5);
	assert_int_equal(lane_count(state, "noop", 0), 0);
	n = take(db, "w", MAXJ, 60000, out, &wake);
	assert_int_equal(n, 3);
	assert_int_equal(settle(db, out, n, "sleep", 1), 3);
	assert_int_equal(wake, -1);	/* nothing to wait for: a pause has no end */
	assert_int_equal(queue_ack(db, running->id, running->lease_token), SD_OK);
	job_free(running);
	/* a new one goes to the lane at once, by any road (the relay too) */
	enq(db, "noop", 1, 0);
	assert_int_equal(lane_count(state, "noop", c.lane), 5);
	assert_int_equal(lane_count(state, "noop", 0), 0);
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(outbox_add(db, "noop", NULL, "{}", 0, 0, NULL), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);
	assert_int_equal(outbox_relay_batch(db, 10, &wake), SD_OK);
	assert_int_equal(lane_count(state, "noop", c.lane), 6);
	assert_int_equal(take(db, "w", MAXJ, 60000, out, NULL), 0);
	/* the pause is in the database: another connection (a restart) sees it */
	assert_int_equal(db_open(e->db_path, 0, DB_SYNC_NORMAL, &again), SD_OK);
	assert_int_equal(take(again, "w2", MAXJ, 60000, out, NULL), 0);
	assert_int_equal(controls_resume(again, "noop", &changed), SD_OK);
	assert_int_equal(changed, 1);
	db_close(again);
	/* the last control gone: the lane is emptied back into lane 0 */
	assert_int_equal(controls_get(db, "noop", &c), SD_NOT_FOUND);
	assert_int_equal(lane_count(state, "noop", 0), 6);
	n = take(db, "w", MAXJ, 60000, out, NULL);
	assert_int_equal(n, 6);
	assert_int_equal(settle(db, out, n, "noop", 1), 6);
	assert_int_equal(controls_resume(db, "noop", &changed), SD_OK);
	assert_int_equal(changed, 0);
}

/* a dead letter of a paused kind is retried into its lane; one that died in
 * a lane comes back to lane 0 once the control is gone */
static void test_dead_letters_follow_the_lane(void **state)
{
	struct db *db = db_of(state);
	struct job *j;
	struct control c;
	int64_t n;
	int dead = 0;

	enq(db, "noop", 1, 0);
	assert_int_equal(take(db, "w", 1, 60000, &j, NULL), 1);
	assert_int_equal(queue_fail(db, j, "boom", 1, &dead), SD_OK);
	assert_int_equal(dead, 1);
	assert_int_equal(controls_pause(db, "noop", "test", NULL), SD_OK);
	assert_int_equal(controls_get(db, "noop", &c), SD_OK);
	assert_int_equal(queue_dead_retry(db, j->job_id, &n), SD_OK);
	assert_int_equal(lane_count(state, "noop", c.lane), 1);
	assert_int_equal(take(db, "w", 1, 60000, &j + 0, NULL), 0);
	assert_int_equal(controls_resume(db, "noop", NULL), SD_OK);
	assert_int_equal(lane_count(state, "noop", 0), 1);
	job_free(j);
}

/* at most CONTROLS_MAX controls: the next is refused, and a resume makes
 * room again; the waiting entries of all of them still come out */
static void test_controls_are_capped(void **state)
{
	struct db *db = db_of(state);
	struct control c;
	char kind[32];
	int i;

	for (i = 0; i < CONTROLS_MAX; i++) {
		snprintf(kind, sizeof kind, "kind%d", i);
		assert_int_equal(controls_pause(db, kind, "test", NULL), SD_OK);
	}
	assert_int_equal(controls_pause(db, "one_more", "test", NULL), SD_LIMITED);
	assert_non_null(strstr(err_msg(), "256 controls at most"));
	assert_int_equal(controls_get(db, "one_more", &c), SD_NOT_FOUND);
	assert_int_equal(controls_resume(db, "kind7", NULL), SD_OK);
	assert_int_equal(controls_pause(db, "one_more", "test", NULL), SD_OK);
	assert_int_equal(controls_show(db, "one_more", &c), SD_OK);
	assert_true(c.lane < 0 && c.paused_at > 0);
	assert_int_equal(controls_show(db, "kind7", &c), SD_OK);
	assert_true(c.lane == 0 && c.paused_at == 0);
}

/* ======================== rate ========================================== */

/*
 * 10 a second with a burst of 10, claimed by two connections (two boxes)
 * that each look every 7 ms of fake time for a minute and take what they
 * can: after the burst, 600 in the minute, within 5%, and never more than
 * the burst ahead.
 */
static void test_rate_holds_over_a_minute(void **state)
{
	struct tu_env *e = *state;
	struct db *db = db_of(state), *other, *dbs[2];
	struct control_limits lim = { 0 };
	struct job *out[MAXJ];
	int64_t t0, wake, got = 0, burst = 0;
	int i, n;

	assert_int_equal(controls_rate_parse("10/s burst 10", &lim), SD_OK);
	assert_int_equal(controls_limit(db, "noop", &lim), SD_OK);
	enq(db, "noop", 900, 0);
	enq(db, "sleep", 50, 0);
	assert_int_equal(db_open(e->db_path, 0, DB_SYNC_NORMAL, &other), SD_OK);
	dbs[0] = db;
	dbs[1] = other;
	t0 = clock_now_ms();
	/* the burst at once, and the other kinds beside it */
	n = take(db, "a/w", MAXJ, 60000, out, &wake);
	burst = settle(db, out, n, "noop", 1);
	assert_int_equal(burst, 10);
	assert_int_equal(n, 60);
	/* nothing more until the next interval, and the worker is told when */
	n = take(other, "b/w", MAXJ, 60000, out, &wake);
	assert_int_equal(n, 0);
	assert_int_equal(wake, t0 + 100);
	for (i = 0; clock_now_ms() < t0 + 60000; i++) {
		clock_fake_advance(7);
		n = take(dbs[i % 2], i % 2 ? "b/w" : "a/w", MAXJ, 60000, out, &wake);
		got += settle(dbs[i % 2], out, n, "noop", 1);
		assert_true(n <= 1);
	}
	db_close(other);
	print_message("    rate 10/s: %lld claimed in the minute after the burst of %lld\n",
		      (long long)got, (long long)burst);
	assert_true(got >= 570 && got <= 630);
	assert_true(got <= 600);
}

static void test_rate_parse(void **state)
{
	struct control_limits l = { 0 };
	char text[64];

	(void)state;
	assert_int_equal(controls_rate_parse("10/s", &l), SD_OK);
	assert_int_equal(l.rate_n, 10);
	assert_int_equal(l.rate_ms, 1000);
	assert_int_equal(l.burst, 10);
	assert_int_equal(controls_rate_parse("600/m burst 20", &l), SD_OK);
	assert_int_equal(l.rate_ms, 60000);
	assert_int_equal(l.burst, 20);
	controls_rate_text(&l, text, sizeof text);
	assert_string_equal(text, "600/m burst 20");
	assert_int_equal(controls_rate_parse("5/250ms", &l), SD_OK);
	assert_int_equal(l.rate_ms, 250);
	controls_rate_text(&l, text, sizeof text);
	assert_string_equal(text, "5/250ms burst 5");
	assert_int_equal(controls_rate_parse("1/d", &l), SD_OK);
	assert_int_equal(l.rate_ms, 86400000);
	assert_int_equal(controls_rate_parse("0/s", &l), SD_INVALID);
	assert_int_equal(controls_rate_parse("10/sec", &l), SD_INVALID);
	assert_int_equal(controls_rate_parse("10/s burst", &l), SD_INVALID);
	assert_int_equal(controls_rate_parse("10/s burst 0", &l), SD_INVALID);
	assert_int_equal(controls_rate_parse("10/s burst 5 x", &l), SD_INVALID);
	assert_int_equal(controls_rate_parse("10/2d", &l), SD_INVALID);
	assert_int_equal(controls_rate_parse("s/10", &l), SD_INVALID);
	assert_int_equal(controls_rate_parse("", &l), SD_INVALID);
}

/* ======================== concurrency =================================== */

/* Two at once; a worker killed with two leases holds both until they end,
 * then the next claim takes them (reclaimed) */
static void test_concurrency_counts_a_killed_workers_lease(void **state)
{
	struct db *db = db_of(state);
	struct control_limits lim = { .concurrency = 2 };
	struct job *dead[MAXJ], *out[MAXJ];
	int64_t wake, t0 = clock_now_ms();
	int n, i;

	assert_int_equal(controls_limit(db, "noop", &lim), SD_OK);
	enq(db, "noop", 5, 0);
	n = take(db, "a/w1", MAXJ, 30000, dead, &wake);
	assert_int_equal(n, 2);
	/* a1 is killed now: its leases live on until t0 + 30 s */
	assert_int_equal(take(db, "a/w2", MAXJ, 30000, out, &wake), 0);
	assert_int_equal(wake, t0 + 30000);
	clock_fake_advance(29999);
	assert_int_equal(take(db, "a/w2", MAXJ, 30000, out, &wake), 0);
	clock_fake_advance(1);
	/* their time is over: two places again */
	n = take(db, "a/w2", MAXJ, 30000, out, &wake);
	assert_int_equal(n, 2);
	assert_int_equal(take(db, "a/w3", MAXJ, 30000, out + 2, &wake), 0);
	/* an ack frees a place at once */
	assert_int_equal(queue_ack(db, out[0]->id, out[0]->lease_token), SD_OK);
	job_free(out[0]);
	assert_int_equal(take(db, "a/w3", MAXJ, 30000, out, NULL), 1);
	for (i = 0; i < 2; i++)
		job_free(dead[i]);
	job_free(out[0]);
	job_free(out[1]);
}

/* Per box: each box one at a time, three over all */
static void test_concurrency_per_box(void **state)
{
	struct db *db = db_of(state);
	struct control_limits lim = { .concurrency = 3, .box_concurrency = 1 };
	struct job *out[MAXJ];
	int i, n = 0;

	assert_int_equal(controls_limit(db, "noop", &lim), SD_OK);
	enq(db, "noop", 6, 0);
	controls_box_set("alpha");
	n += take(db, "alpha/w1", MAXJ, 60000, out + n, NULL);
	assert_int_equal(n, 1);
	n += take(db, "alpha/w2", MAXJ, 60000, out + n, NULL);
	assert_int_equal(n, 1);
	/* "alph" and "alpha2" are other boxes, not prefixes of this one */
	controls_box_set("alph");
	n += take(db, "alph/w1", MAXJ, 60000, out + n, NULL);
	assert_int_equal(n, 2);
	controls_box_set("alpha2");
	n += take(db, "alpha2/w1", MAXJ, 60000, out + n, NULL);
	assert_int_equal(n, 3);
	/* the fourth box: the limit over all boxes */
	controls_box_set("delta");
	assert_int_equal(take(db, "delta/w1", MAXJ, 60000, out + n, NULL), 0);
	controls_box_set("");
	for (i = 0; i < n; i++)
		job_free(out[i]);
}

/* ======================== cancel ======================================== */

static void test_cancel_a_waiting_and_a_running_job(void **state)
{
	struct tu_env *e = *state;
	struct db *db = db_of(state);
	struct enqueue q = { 0 };
	struct job *j;
	char waiting[QUEUE_JOB_ID_MAX + 1], outboxed[QUEUE_JOB_ID_MAX + 1];
	int64_t n, running, until, id;

	q.kind = "noop";
	q.delay_ms = 3600000;
	assert_int_equal(queue_enqueue(db, &q, waiting), SD_OK);
	assert_int_equal(controls_cancel(db, waiting, "test", &n, &running), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(running, 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE job_id = '%s'",
				   waiting), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM cancelled_jobs WHERE job_id "
				   "= '%s' AND cancelled_by = 'test' AND running = 0", waiting), 1);
	/* twice: nothing waits any more */
	assert_int_equal(controls_cancel(db, waiting, "test", &n, &running), SD_NOT_FOUND);
	/* a running one runs on; its worker is told at its next extend or ack */
	enq(db, "sleep", 1, 0);
	assert_int_equal(take(db, "w", 1, 60000, &j, NULL), 1);
	assert_int_equal(controls_cancel(db, j->job_id, "test", &n, &running), SD_OK);
	assert_int_equal(running, 1);
	assert_int_equal(queue_extend(db, j->id, j->lease_token, 60000, &until), SD_STALE);
	assert_int_equal(queue_ack(db, j->id, j->lease_token), SD_STALE);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM done_jobs"), 0);
	job_free(j);
	/* one the relay has not published yet is never published */
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(outbox_add(db, "noop", "outbox:cancel-test", "{}", 0, 0, &id), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);
	snprintf(outboxed, sizeof outboxed, "outbox:cancel-test");
	assert_int_equal(controls_cancel(db, outboxed, "test", &n, &running), SD_OK);
	assert_int_equal(outbox_relay_batch(db, 10, &n), SD_OK);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM cancelled_jobs"), 3);
	/* the history is pruned with the finished jobs */
	clock_fake_advance(1000);
	assert_int_equal(controls_prune(db, clock_now_ms() - 500, 10, &n), SD_OK);
	assert_int_equal(n, 3);
	assert_int_equal(controls_cancel(db, "no-such-job", "test", &n, &running), SD_NOT_FOUND);
	assert_int_equal(controls_cancel(db, "bad id", "test", &n, &running), SD_INVALID);
}

/* ======================== SQS queues ===================================== */

static void test_an_sqs_queue_is_paused_and_limited(void **state)
{
	struct tu_env *e = *state;
	struct db *db = db_of(state);
	struct control_limits lim = { .concurrency = 1 };
	struct enqueue q = { 0 };
	struct job *out[4];
	int64_t lane;
	int n, i;

	assert_int_equal(db_exec(db, "INSERT INTO sqs_queues (name, fifo, attributes, created_at, "
				 "modified_at) VALUES ('jobs', 0, '{}', 1, 1)"), SD_OK);
	lane = tu_count(e->db_path, "SELECT id FROM sqs_queues WHERE name = 'jobs'");
	q.kind = "sqs:jobs";
	q.queue = lane;
	for (i = 0; i < 3; i++)
		assert_int_equal(queue_enqueue(db, &q, NULL), SD_OK);
	assert_int_equal(controls_pause(db, "sqs:jobs", "test", NULL), SD_OK);
	assert_int_equal(controls_claim_lane(db, lane, NULL, "r", 4, 30000, out, &n), SD_OK);
	assert_int_equal(n, 0);
	/* its messages stayed in its lane; the box's workers never see them */
	assert_int_equal(lane_count(state, "sqs:jobs", lane), 3);
	assert_int_equal(take(db, "w", 4, 30000, out, NULL), 0);
	assert_int_equal(controls_limit(db, "sqs:jobs", &lim), SD_OK);
	assert_int_equal(controls_resume(db, "sqs:jobs", NULL), SD_OK);
	assert_int_equal(controls_claim_lane(db, lane, NULL, "r", 4, 30000, out, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(controls_claim_lane(db, lane, NULL, "r", 4, 30000, out + 1, &n), SD_OK);
	assert_int_equal(n, 0);
	job_free(out[0]);
	/* a queue that does not exist has no control to take */
	assert_int_equal(controls_pause(db, "sqs:nothing", "test", NULL), SD_NOT_FOUND);
}

/* ======================== a worker process ============================== */

/* `stagedoor worker --drain` on 6 jobs at 5 a second, one at a time: about
 * one second, and the worker sleeps meanwhile (a spinning one burns the
 * second) */
static void test_worker_waits_for_a_rate_without_spinning(void **state)
{
	struct tu_env *e = *state;
	struct db *db = db_of(state);
	struct control_limits lim = { 0 };
	struct rusage ru;
	int64_t t0;
	double cpu;
	pid_t pid;
	int st;

	assert_int_equal(controls_rate_parse("5/s burst 1", &lim), SD_OK);
	assert_int_equal(controls_limit(db, "noop", &lim), SD_OK);
	enq(db, "noop", 6, 0);
	t0 = clock_mono_us();
	pid = tu_spawn((const char *const[]){ "worker", "--drain", "--db", e->db_path, NULL },
		       NULL);
	assert_int_equal(wait4(pid, &st, 0, &ru), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	      ru.ru_stime.tv_usec / 1e6;
	print_message("    6 jobs at 5/s: %.2f s, %.3f s of CPU\n",
		      (clock_mono_us() - t0) / 1e6, cpu);
	assert_true(clock_mono_us() - t0 >= 950000);
	assert_true(cpu < 0.5);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM done_jobs WHERE kind = 'noop'"),
			 6);
}

/* The config file's limit lines become the kinds' limits when run starts;
 * bad lines are refused with the file's line and nothing set. */
static void test_limits_from_the_config_file(void **state)
{
	struct tu_env *e = *state;
	static char out[32768];
	char conf[512], log[512], err[2048];
	struct control c;
	FILE *f;
	pid_t pid;

	snprintf(conf, sizeof conf, "%s/box.conf", e->dir);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	assert_non_null(f = fopen(conf, "w"));
	fprintf(f, "db = %s\nhttp_listen = off\nworkers = 1\nrate.send_tickets = 10/s burst 20\n"
		"concurrency.render_tickets = 2\nbox_concurrency.render_tickets = 1\n", e->db_path);
	if (tu_state(e))
		fprintf(f, "state_dir = %s\n", tu_state(e));
	fclose(f);
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"config", "show", "--config", conf, NULL }), 0);
	assert_non_null(strstr(out, "rate.send_tickets"));
	assert_non_null(strstr(out, "10/s burst 20"));
	pid = tu_spawn((const char *const[]){ "run", "--config", conf, NULL }, log);
	tu_wait_log(log, "msg=\"limits set from the configuration\" kind=render_tickets", 1, 15000);
	kill(pid, SIGTERM);
	assert_int_equal(tu_reap(pid, 15000, "run"), 0);
	assert_int_equal(controls_get(e->db, "send_tickets", &c), SD_OK);
	assert_int_equal(c.lim.rate_n, 10);
	assert_int_equal(c.lim.rate_ms, 1000);
	assert_int_equal(c.lim.burst, 20);
	assert_int_equal(c.lim.concurrency, 0);
	assert_int_equal(controls_get(e->db, "render_tickets", &c), SD_OK);
	assert_int_equal(c.lim.concurrency, 2);
	assert_int_equal(c.lim.box_concurrency, 1);
	assert_int_equal(c.lim.rate_n, 0);
	/* refused: a bad rate, a bad kind, a count of 0, a line twice */
	assert_non_null(f = fopen(conf, "w"));
	fprintf(f, "db = %s\nrate.noop = fast\n", e->db_path);
	fclose(f);
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"config", "show", "--config", conf, NULL }), 2);
	assert_non_null(strstr(err, ":2: rate.noop: a rate is"));
	assert_non_null(f = fopen(conf, "w"));
	fprintf(f, "db = %s\nconcurrency.noop = 0\nconcurrency.Bad = 1\n", e->db_path);
	fclose(f);
	assert_int_not_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"config", "show", "--config", conf, NULL }), 0);
	assert_non_null(f = fopen(conf, "w"));
	fprintf(f, "db = %s\nrate.noop = 1/s\nrate.noop = 2/s\n", e->db_path);
	fclose(f);
	assert_int_not_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"config", "show", "--config", conf, NULL }), 0);
	assert_non_null(strstr(err, "set twice"));
}

/* `bench claim` times the worker's claim with controls off and holding
 * entries back, and checks on the way that it never takes a held one */
static void test_bench_claim_with_controls_runs(void **state)
{
	static char out[8192];
	char err[4096];

	(void)state;
	if (tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"bench", "claim", "--scheduled", "100", "--leased", "10", "--done", "100", "--held",
		"2000", "--reps", "20", "--json", NULL }) != 0)
		fail_msg("stagedoor-bench claim: %s", err);
	assert_non_null(strstr(out, "\"held\":2000,"));
	assert_non_null(strstr(out, "\"controls_claim8_ratio\":"));
	assert_non_null(strstr(out, "\"controls_idle_full_us\":"));
	assert_non_null(strstr(out, "\"controls_enqueue_limited_ratio\":"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pause_holds_a_kind_until_resumed, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_dead_letters_follow_the_lane, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_controls_are_capped, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_rate_holds_over_a_minute, tu_setup, tu_teardown),
		cmocka_unit_test(test_rate_parse),
		cmocka_unit_test_setup_teardown(test_concurrency_counts_a_killed_workers_lease,
						tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_concurrency_per_box, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_cancel_a_waiting_and_a_running_job, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_an_sqs_queue_is_paused_and_limited, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_worker_waits_for_a_rate_without_spinning,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_limits_from_the_config_file, tu_setup_real,
						tu_teardown),
		cmocka_unit_test(test_bench_claim_with_controls_runs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
