/*
 * test_metrics.c: the counters worker processes share with the HTTP server
 * through "<db>-metrics": what they count, that processes add up, that the
 * file survives restarts and starts again for another database, and that
 * GET /metrics shows what workers in other processes counted.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "clock.h"
#include "event_edit.h"
#include "events.h"
#include "metrics.h"
#include "queue.h"
#include "statedir.h"
#include "testutil.h"
#include "ticket_jobs.h"
#include "worker.h"

#define ARGV(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* ---- helpers ------------------------------------------------------------- */

static const struct metrics_kind_counts *kind_of(const struct metrics_snapshot *s,
						 const char *kind)
{
	int i;

	for (i = 0; i < s->n_kinds; i++)
		if (strcmp(s->kinds[i].kind, kind) == 0)
			return &s->kinds[i];
	return NULL;
}

static uint64_t runs_of(const struct metrics_kind_counts *k)
{
	uint64_t n = 0;
	int o;

	for (o = 0; o < METRICS_OUTCOMES; o++)
		n += k->runs[o];
	return n;
}

static struct metrics *open_m(const struct tu_env *e)
{
	struct metrics *m = NULL;

	assert_int_equal(metrics_open(e->db_path, &m), SD_OK);
	assert_non_null(m);
	return m;
}

static void snap(const struct tu_env *e, struct metrics_snapshot *s)
{
	struct metrics *m = open_m(e);

	metrics_read(m, s);
	metrics_close(m);
}

static void put(const struct tu_env *e, const char *kind, const char *payload, const char *job_id)
{
	struct enqueue q = { kind, payload, job_id, 0, 0 };

	assert_int_equal(queue_enqueue(e->db, &q, NULL), SD_OK);
}

struct absorbed {
	json_int_t check_state, unique_claim, provider_key, processed_jobs, stale_acks;
};

/* GET /v1/stats through the API: its duplicates_absorbed and stale_acks. */
static void stats_absorbed(const struct tu_env *e, struct absorbed *out)
{
	struct api_opts ao = { e->db_path, NULL, 0, NULL, NULL };
	struct api_request rq = { "GET", "/v1/stats", NULL, NULL, NULL, NULL, NULL, 0 };
	struct api_response res;
	struct api *api = NULL;
	char path[400], auth[128];
	unsigned char *tok;
	size_t len = 0;
	json_t *doc;

	assert_int_equal(statedir_init(e->db_path, NULL), SD_OK);
	assert_int_equal(token_ensure(e->db_path, NULL), SD_OK);
	assert_int_equal(token_path(e->db_path, NULL, path, sizeof path), SD_OK);
	tok = tu_slurp(path, &len);
	snprintf(auth, sizeof auth, "Bearer %.*s", (int)len, tok);
	free(tok);
	rq.authorization = auth;
	assert_int_equal(api_open(&ao, &api), SD_OK);
	memset(&res, 0, sizeof res);
	api_handle(api, &rq, &res);
	assert_int_equal(res.status, 200);
	doc = json_loads(res.body, 0, NULL);
	assert_non_null(doc);
	assert_int_equal(json_unpack(doc, "{s:{s:I, s:I, s:I, s:I}, s:I}", "duplicates_absorbed",
				     "check_state", &out->check_state, "unique_claim",
				     &out->unique_claim, "provider_key", &out->provider_key,
				     "processed_jobs", &out->processed_jobs, "stale_acks",
				     &out->stale_acks), 0);
	json_decref(doc);
	api_response_free(&res);
	api_close(api);
}

/* The value of one sample line "name{labels} value" in a Prometheus text. */
static double sample(const char *text, const char *series)
{
	size_t n = strlen(series);
	const char *p = text;

	while ((p = strstr(p, series))) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p += n;
	}
	fail_msg("no sample %s in:\n%s", series, text);
	return -1;
}

/* ---- the file ------------------------------------------------------------- */

static void test_counts_runs_buckets_stale_and_duplicates(void **state)
{
	struct tu_env *e = *state;
	struct metrics_snapshot s;
	const struct metrics_kind_counts *k;
	struct metrics *m = open_m(e);
	char path[400];
	struct stat st;

	metrics_read(m, &s);
	assert_int_equal(s.n_kinds, 0);
	metrics_run(m, "render_tickets", METRICS_DONE, 500);	/* <= 1 ms */
	metrics_run(m, "render_tickets", METRICS_DONE, 1000);	/* the bound itself */
	metrics_run(m, "render_tickets", METRICS_FAILED, 1001);	/* <= 5 ms */
	metrics_run(m, "render_tickets", METRICS_RETRY_LATER, 70 * 1000000LL); /* +Inf */
	metrics_run(m, "send_tickets", METRICS_FAILED_PERMANENT, -5);	/* a clock step: 0 */
	metrics_stale(m, "send_tickets");
	metrics_stale(m, "send_tickets");
	metrics_duplicate(m, METRICS_UNIQUE_CLAIM);
	metrics_duplicate(m, METRICS_PROCESSED_JOBS);
	metrics_duplicate(m, METRICS_PROCESSED_JOBS);
	metrics_read(m, &s);
	metrics_close(m);

	assert_int_equal(s.n_kinds, 2);
	assert_string_equal(s.kinds[0].kind, "render_tickets");	/* first counted, first row */
	k = kind_of(&s, "render_tickets");
	assert_int_equal(k->runs[METRICS_DONE], 2);
	assert_int_equal(k->runs[METRICS_FAILED], 1);
	assert_int_equal(k->runs[METRICS_RETRY_LATER], 1);
	assert_int_equal(k->runs[METRICS_FAILED_PERMANENT], 0);
	assert_int_equal(k->buckets[0], 2);
	assert_int_equal(k->buckets[1], 1);
	assert_int_equal(k->buckets[METRICS_BUCKETS], 1);
	assert_int_equal(k->sum_us, 500 + 1000 + 1001 + 70 * 1000000LL);
	assert_int_equal(k->stale, 0);
	k = kind_of(&s, "send_tickets");
	assert_int_equal(k->runs[METRICS_FAILED_PERMANENT], 1);
	assert_int_equal(k->buckets[0], 1);
	assert_int_equal(k->sum_us, 0);
	assert_int_equal(k->stale, 2);
	assert_int_equal(s.duplicates[METRICS_CHECK_STATE], 0);
	assert_int_equal(s.duplicates[METRICS_UNIQUE_CLAIM], 1);
	assert_int_equal(s.duplicates[METRICS_PROVIDER_KEY], 0);
	assert_int_equal(s.duplicates[METRICS_PROCESSED_JOBS], 2);

	/* beside the database, for its owner only */
	assert_int_equal(metrics_path(e->db_path, path, sizeof path), SD_OK);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	/* a NULL handle (a process that could not open the file) counts nothing */
	metrics_run(NULL, "x", METRICS_DONE, 1);
	metrics_stale(NULL, "x");
	metrics_duplicate(NULL, METRICS_CHECK_STATE);
	metrics_read(NULL, &s);
	assert_int_equal(s.n_kinds, 0);
}

static void test_kept_across_reopen_and_new_for_another_database(void **state)
{
	struct tu_env *e = *state;
	struct metrics_snapshot s;
	struct metrics *m = open_m(e);
	char other[400];

	metrics_run(m, "noop", METRICS_DONE, 10);
	metrics_duplicate(m, METRICS_CHECK_STATE);
	metrics_close(m);
	snap(e, &s);		/* a restarted process keeps counting on */
	assert_int_equal(kind_of(&s, "noop")->runs[METRICS_DONE], 1);
	assert_int_equal(s.duplicates[METRICS_CHECK_STATE], 1);

	/* another database file at the same path (made while the first still
	 * exists, so its inode differs): the counters start again */
	snprintf(other, sizeof other, "%s/other.db", e->dir);
	assert_int_equal(tu_run(NULL, 0, NULL, 0, ARGV("init", "--db", other)), 0);
	db_close(e->db);
	e->db = NULL;
	assert_int_equal(rename(other, e->db_path), 0);
	snap(e, &s);
	assert_int_equal(s.n_kinds, 0);
	assert_int_equal(s.duplicates[METRICS_CHECK_STATE], 0);
}

static void test_foreign_or_short_file_is_started_again_and_a_symlink_refused(void **state)
{
	struct tu_env *e = *state;
	struct metrics_snapshot s;
	struct metrics *m = NULL;
	char path[400], target[400];
	int fd;

	assert_int_equal(metrics_path(e->db_path, path, sizeof path), SD_OK);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "not ours!", 9), 9);
	close(fd);
	m = open_m(e);
	metrics_run(m, "noop", METRICS_DONE, 10);
	metrics_read(m, &s);
	metrics_close(m);
	assert_int_equal(s.n_kinds, 1);
	assert_int_equal(kind_of(&s, "noop")->runs[METRICS_DONE], 1);

	/* a symlink planted at the path is not followed */
	snprintf(target, sizeof target, "%s/elsewhere", e->dir);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(symlink(target, path), 0);
	assert_int_equal(metrics_open(e->db_path, &m), SD_IO);
	assert_null(m);
	assert_non_null(strstr(err_msg(), "-metrics"));
	assert_int_equal(access(target, F_OK), -1);
}

static void test_kinds_past_the_table_count_as_other(void **state)
{
	struct tu_env *e = *state;
	struct metrics_snapshot s;
	struct metrics *m = open_m(e);
	char kind[32];
	int i;

	for (i = 0; i < METRICS_KINDS + 3; i++) {
		snprintf(kind, sizeof kind, "kind-%02d", i);
		metrics_run(m, kind, METRICS_DONE, 10);
	}
	metrics_run(m, "kind-00", METRICS_DONE, 10);	/* a named kind keeps its row */
	metrics_read(m, &s);
	metrics_close(m);
	assert_int_equal(s.n_kinds, METRICS_KINDS + 1);
	assert_int_equal(kind_of(&s, "kind-00")->runs[METRICS_DONE], 2);
	assert_null(kind_of(&s, "kind-16"));
	assert_int_equal(kind_of(&s, "(other)")->runs[METRICS_DONE], 3);
}

/* Processes at once: every add lands, and a kind is named once. */
static void test_processes_add_up_without_losing_counts(void **state)
{
	struct tu_env *e = *state;
	struct metrics_snapshot s;
	const struct metrics_kind_counts *k;
	enum { PROCS = 4, EACH = 20000 };
	pid_t kids[PROCS];
	int i, n, status, named = 0;

	for (i = 0; i < PROCS; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			struct metrics *m = NULL;

			if (metrics_open(e->db_path, &m) != SD_OK)
				_exit(3);
			for (n = 0; n < EACH; n++) {
				metrics_run(m, "shared", METRICS_DONE, 2000);
				metrics_duplicate(m, METRICS_PROVIDER_KEY);
			}
			metrics_stale(m, i % 2 ? "odd" : "even");
			metrics_close(m);
			_exit(0);
		}
	}
	for (i = 0; i < PROCS; i++) {
		assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	snap(e, &s);
	k = kind_of(&s, "shared");
	assert_non_null(k);
	assert_int_equal(k->runs[METRICS_DONE], PROCS * EACH);
	assert_int_equal(k->buckets[1], PROCS * EACH);
	assert_int_equal(k->sum_us, 2000ULL * PROCS * EACH);
	assert_int_equal(s.duplicates[METRICS_PROVIDER_KEY], PROCS * EACH);
	assert_int_equal(kind_of(&s, "odd")->stale + kind_of(&s, "even")->stale, PROCS);
	for (i = 0; i < s.n_kinds; i++)
		named += strcmp(s.kinds[i].kind, "shared") == 0;
	assert_int_equal(named, 1);
	assert_int_equal(s.n_kinds, 3);
}

struct namer {
	struct metrics *m;
	int i;
};

static void *name_kind(void *arg)
{
	struct namer *n = arg;
	char kind[32];
	int k;

	snprintf(kind, sizeof kind, "kind-%d", n->i);
	for (k = 0; k < 100; k++)
		metrics_run(n->m, kind, METRICS_DONE, 10);
	return NULL;
}

/* The handler threads of one worker share its handle: new kinds named by
 * all of them at once each get a row of their own, none lost or doubled
 * (flock alone excludes other open files, not threads on this one). */
static void test_threads_on_one_handle_name_their_kinds_once(void **state)
{
	struct tu_env *e = *state;
	enum { THREADS = 8, ROUNDS = 50 };
	struct namer n[THREADS];
	pthread_t th[THREADS];
	struct metrics_snapshot s;
	char kind[32];
	int round, i, j;

	for (round = 0; round < ROUNDS; round++) {
		struct metrics *m;
		char path[400];

		assert_int_equal(metrics_path(e->db_path, path, sizeof path), SD_OK);
		unlink(path);	/* every round names its kinds afresh */
		m = open_m(e);
		for (i = 0; i < THREADS; i++) {
			n[i].m = m;
			n[i].i = i;
			assert_int_equal(pthread_create(&th[i], NULL, name_kind, &n[i]), 0);
		}
		for (i = 0; i < THREADS; i++)
			assert_int_equal(pthread_join(th[i], NULL), 0);
		metrics_read(m, &s);
		metrics_close(m);
		assert_int_equal(s.n_kinds, THREADS);
		for (i = 0; i < THREADS; i++) {
			snprintf(kind, sizeof kind, "kind-%d", i);
			for (j = 0; j < s.n_kinds && strcmp(s.kinds[j].kind, kind) != 0; j++)
				;
			assert_true(j < s.n_kinds);
			assert_int_equal(s.kinds[j].runs[METRICS_DONE], 100);
		}
	}
}

/* ---- what workers count ---------------------------------------------------- */

/* A worker counts each handler run by outcome, and the handlers count the
 * duplicate runs they absorb: the same job delivered twice is counted once
 * by the sales counter and once as absorbed by processed_jobs. */
static void test_worker_counts_runs_and_absorbed_duplicates(void **state)
{
	struct tu_env *e = *state;
	struct event_new ev = { "Gig", "Hall", 1900000000000LL, 100 };
	struct worker_opts o = { 0 };
	struct worker_stats st;
	struct metrics_snapshot s;
	const struct metrics_kind_counts *k;
	struct absorbed dup;
	char payload[128];
	int64_t event_id;

	assert_int_equal(event_add(e->db, &ev, &event_id), SD_OK);
	snprintf(payload, sizeof payload, "{\"event_id\":%lld,\"seats\":2,\"order_id\":7}",
		 (long long)event_id);
	put(e, "update_sales_counter", payload, "outbox:41");
	put(e, "update_sales_counter", payload, "outbox:41");	/* published twice */
	put(e, "noop", "{}", NULL);
	put(e, "fail", "{\"times\":1}", "f1");
	o.db_path = e->db_path;
	o.drain = 1;
	o.concurrency = 1;
	o.handlers = ticket_handlers;
	assert_int_equal(worker_run(&o, &st), SD_OK);

	snap(e, &s);
	k = kind_of(&s, "update_sales_counter");
	assert_non_null(k);
	assert_int_equal(k->runs[METRICS_DONE], 2);
	assert_int_equal(runs_of(k), 2);
	assert_int_equal(s.duplicates[METRICS_PROCESSED_JOBS], 1);
	assert_int_equal(s.duplicates[METRICS_CHECK_STATE] + s.duplicates[METRICS_UNIQUE_CLAIM] +
			 s.duplicates[METRICS_PROVIDER_KEY], 0);
	assert_int_equal(kind_of(&s, "noop")->runs[METRICS_DONE], 1);
	k = kind_of(&s, "fail");
	assert_int_equal(k->runs[METRICS_FAILED], 1);
	assert_int_equal(k->runs[METRICS_DONE], 1);
	assert_int_equal(tu_countf(e->db_path, "SELECT orders FROM sales_counters WHERE "
				   "event_id = %lld", (long long)event_id), 1);

	/* the dashboard's /v1/stats says the same */
	stats_absorbed(e, &dup);
	assert_int_equal(dup.processed_jobs, 1);
	assert_int_equal(dup.check_state + dup.unique_claim + dup.provider_key, 0);
	assert_int_equal(dup.stale_acks, 0);
}

/* A worker stopped past its lease finishes a job another worker took: its
 * ack is refused as stale, and counted as such. */
static void test_stale_ack_counted_by_the_worker_that_lost_its_lease(void **state)
{
	struct tu_env *e = *state;
	struct metrics_snapshot s;
	const struct metrics_kind_counts *k;
	char log[400];
	uint64_t slow;
	int64_t t0;
	pid_t a, b;
	int i;

	snprintf(log, sizeof log, "%s/workers.log", e->dir);
	put(e, "sleep", "{\"ms\":1500}", "long");
	a = tu_spawn(ARGV("worker", "--drain", "--concurrency", "1", "--lease-ms", "300", "--name",
		       "a", "--db", e->db_path), log);
	t0 = clock_mono_us();
	while (tu_count(e->db_path, "SELECT count(*) FROM stream WHERE leased_by LIKE '%/a'") != 1 &&
	       clock_mono_us() - t0 < 5000000)
		tu_sleep_ms(5);
	assert_int_equal(kill(a, SIGSTOP), 0);
	tu_sleep_ms(700);	/* a's lease ends; it cannot extend it */
	b = tu_spawn(ARGV("worker", "--drain", "--concurrency", "1", "--lease-ms", "300", "--name",
		       "b", "--db", e->db_path), log);
	t0 = clock_mono_us();
	while (tu_count(e->db_path, "SELECT count(*) FROM stream WHERE leased_by LIKE '%/b'") != 1 &&
	       clock_mono_us() - t0 < 5000000)
		tu_sleep_ms(5);
	assert_int_equal(kill(a, SIGCONT), 0);
	assert_int_equal(tu_reap(b, 15000, "worker b"), 0);
	assert_int_equal(tu_reap(a, 15000, "worker a"), 0);

	snap(e, &s);
	k = kind_of(&s, "sleep");
	assert_non_null(k);
	assert_int_equal(k->runs[METRICS_DONE], 2);	/* both handlers finished */
	assert_int_equal(k->stale, 1);			/* one result refused */
	for (i = 0, slow = 0; i <= METRICS_BUCKETS; i++)	/* both runs took over 1 s */
		if (i == METRICS_BUCKETS || metrics_bounds_us[i] > 1000000)
			slow += k->buckets[i];
	assert_int_equal(slow, 2);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE "
				   "job_id = 'long' AND worker LIKE '%%/b'"), 1);
}

/* ---- GET /metrics ------------------------------------------------------------ */

/* Workers in other processes count; the API, in this one, shows it. */
static void test_get_metrics_shows_what_worker_processes_counted(void **state)
{
	struct tu_env *e = *state;
	struct api_opts ao = { e->db_path, NULL, 0, NULL, NULL };
	struct api_request rq = { "GET", "/metrics", NULL, NULL, NULL, NULL, NULL, 0 };
	struct api_response res;
	struct api *api = NULL;
	double count, inf, prev = 0;
	char series[200];
	int b;

	assert_int_equal(tu_run(NULL, 0, NULL, 0, ARGV("init", "--db", e->db_path)), 0);
	put(e, "noop", "{}", "n1");
	put(e, "noop", "{}", "n2");
	put(e, "noop", "{}", "n3");
	put(e, "fail", "{\"times\":1}", "f1");
	assert_int_equal(tu_run(NULL, 0, NULL, 0, ARGV("worker", "--drain", "--db", e->db_path)),
			 0);
	assert_int_equal(api_open(&ao, &api), SD_OK);
	memset(&res, 0, sizeof res);
	api_handle(api, &rq, &res);
	assert_int_equal(res.status, 200);
	assert_string_equal(res.content_type, "text/plain; version=0.0.4");
	assert_int_equal(sample(res.body, "stagedoor_handler_runs_total{kind=\"noop\","
				"outcome=\"done\"}"), 3);
	assert_int_equal(sample(res.body, "stagedoor_handler_runs_total{kind=\"fail\","
				"outcome=\"failed\"}"), 1);
	assert_int_equal(sample(res.body, "stagedoor_handler_runs_total{kind=\"fail\","
				"outcome=\"done\"}"), 1);
	assert_int_equal(sample(res.body, "stagedoor_stale_acks_total{kind=\"noop\"}"), 0);
	assert_int_equal(sample(res.body, "stagedoor_duplicates_absorbed_total{technique="
				"\"processed_jobs\"}"), 0);
	assert_non_null(strstr(res.body, "# TYPE stagedoor_handler_duration_seconds histogram\n"));
	/* the buckets are cumulative and end at the count */
	for (b = 0; b < METRICS_BUCKETS; b++) {
		double v;

		snprintf(series, sizeof series, "stagedoor_handler_duration_seconds_bucket{kind="
			 "\"fail\",le=\"%g\"}", (double)metrics_bounds_us[b] / 1e6);
		v = sample(res.body, series);
		assert_true(v >= prev);
		prev = v;
	}
	inf = sample(res.body, "stagedoor_handler_duration_seconds_bucket{kind=\"fail\","
			       "le=\"+Inf\"}");
	count = sample(res.body, "stagedoor_handler_duration_seconds_count{kind=\"fail\"}");
	assert_true(inf >= prev);
	assert_int_equal(inf, 2);
	assert_int_equal(count, 2);
	assert_true(sample(res.body, "stagedoor_handler_duration_seconds_sum{kind=\"fail\"}") >= 0);
	api_response_free(&res);
	api_close(api);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_counts_runs_buckets_stale_and_duplicates,
						tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_kept_across_reopen_and_new_for_another_database,
						tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(
			test_foreign_or_short_file_is_started_again_and_a_symlink_refused, tu_setup,
			tu_teardown),
		cmocka_unit_test_setup_teardown(test_kinds_past_the_table_count_as_other, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_processes_add_up_without_losing_counts,
						tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_threads_on_one_handle_name_their_kinds_once,
						tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_worker_counts_runs_and_absorbed_duplicates,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(
			test_stale_ack_counted_by_the_worker_that_lost_its_lease, tu_setup_real,
			tu_teardown),
		cmocka_unit_test_setup_teardown(test_get_metrics_shows_what_worker_processes_counted,
						tu_setup_real, tu_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
