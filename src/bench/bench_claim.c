/*
 * bench_claim.c: `stagedoor-bench claim`, what the stream's own calls cost
 * when work waits behind them and history piles up.
 *
 *   stagedoor-bench claim [--scheduled N] [--leased M] [--done K] [--held H]
 *                         [--reps R] [--json] [--keep]
 *
 * On a fresh database in a temporary directory (bench_in_dir), through the
 * real calls of queue.h, R times each (default 200), the median of each:
 *
 *   claim 8        queue_claim of 8 when 8 entries are ready (priority 0)
 *   claim idle     queue_claim of 8 when nothing is ready: a waiting
 *                  worker's poll
 *   enqueue        queue_enqueue of one ready entry
 *   ack            queue_ack of one claimed entry
 *   reclaim        queue_claim that takes one entry whose lease expired
 *
 * first on the empty stream, then with a backlog: N scheduled entries
 * (default 1,000,000; visible in an hour or later, at priorities -1, 0 and
 * 1, so the waiting work sits below, beside and above the ready work) and M
 * leased ones (default 100,000, priority 0, leases of an hour).  The reads
 * (queue_stats, queue_count_by_state, queue_reclaims, queue_done_since for
 * the last minute, queue_pending) are timed on the empty box and again with
 * K finished jobs in done_jobs (default 1,000,000, finished before the last
 * minute), before the backlog is added: they answer for history, while the
 * stream's counts are the work itself.
 *
 * Then the worker's own claim (the controlled kinds' lanes, then lane 0)
 * with the queue's controls off, and with H entries (default 100,000)
 * behind each of a pause, a spent rate and a full concurrency limit
 * (bench_controls.c): what a control holds back must not cost the claims of
 * other kinds.
 *
 * The backlog and the history go in by one INSERT ... SELECT each over a
 * counting CTE, in one transaction, with their counts added to done_totals
 * and done_times as the queue's own calls would have added them, and the
 * WAL checkpointed, as the box's maintenance keeps it.  Each
 * figure is printed for both states with the ratio backlog / empty and
 * whether it meets 1.5; a miss is reported, not an error.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "bench.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "clock.h"
#include "db.h"
#include "queue.h"

#define BC_TARGET 1.5			/* backlog / empty, at most */
#define BC_CLAIM_N 8			/* entries per timed claim */
#define BC_HOUR_MS 3600000LL

/* The timed calls, in report order. */
enum bc_op { BC_CLAIM, BC_IDLE, BC_ENQUEUE, BC_ACK, BC_RECLAIM, BC_STATS, BC_COUNT,
	     BC_RECLAIMS, BC_DONE_SINCE, BC_PENDING, BC_CTL_CLAIM, BC_CTL_IDLE, BC_CTL_ENQ,
	     BC_CTL_ENQ_HELD, BC_N_OPS };

static const char *const bc_names[BC_N_OPS] = {
	"claim 8 ready", "claim, nothing ready", "enqueue one", "ack one",
	"reclaim an expired lease", "queue_stats", "queue_count_by_state", "queue_reclaims",
	"queue_done_since (1 min)", "queue_pending", "worker's claim of 8",
	"worker's claim, none ready", "enqueue, another kind", "enqueue, a limited kind",
};
static const char *const bc_keys[BC_N_OPS] = {
	"claim8", "claim_idle", "enqueue", "ack", "reclaim", "stats", "count_by_state",
	"reclaims", "done_since", "pending", "controls_claim8", "controls_idle",
	"controls_enqueue", "controls_enqueue_limited",
};

/* What one run measures. */
struct bc_args {
	int64_t scheduled, leased, done;	/* backlog and history sizes */
	int64_t held;				/* entries of each controlled kind */
	int64_t reps;
	double empty_us[BC_N_OPS];		/* medians on the empty box */
	double full_us[BC_N_OPS];		/* with the backlog (calls) or history (reads) */
	double build_s;				/* wall time of the inserts */
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The median of v[0..n) nanoseconds, in microseconds (v is sorted). */
static double median_us(int64_t *v, int64_t n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_i64);
	return n == 0 ? 0 : (double)(n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) / 1000.0;
}

/* ======================== the calls ====================================== */

/* Samples: R per call, BC_CLAIM_N per rep for enqueue and ack. */
struct bc_samples {
	int64_t *v[BC_N_OPS];
	int64_t n[BC_N_OPS];
};

static enum sd_result bc_enqueue(struct db *db, struct bc_samples *s)
{
	struct enqueue e = { "noop", "{}", NULL, 0, 0 };
	int64_t t = now_ns();
	enum sd_result r = queue_enqueue(db, &e, NULL);

	s->v[BC_ENQUEUE][s->n[BC_ENQUEUE]++] = now_ns() - t;
	return r;
}

/* A timed claim of BC_CLAIM_N that must take exactly want entries. */
static enum sd_result bc_claim(struct db *db, enum bc_op op, int want, int64_t lease_ms,
			       struct job **jobs, struct bc_samples *s)
{
	int64_t t = now_ns();
	enum sd_result r;
	int got = 0, i;

	r = queue_claim(db, "bench-claim", BC_CLAIM_N, lease_ms, jobs, &got);
	s->v[op][s->n[op]++] = now_ns() - t;
	if (r == SD_OK && got != want) {
		for (i = 0; i < got; i++)
			job_free(jobs[i]);
		return err_set(SD_DB, "%s took %d entries, not %d", bc_names[op], got, want);
	}
	return r;
}

/* One round of the five calls; the stream ends as it began. */
static enum sd_result bc_round(struct db *db, struct bc_samples *s)
{
	struct job *jobs[BC_CLAIM_N];
	struct enqueue e = { "noop", "{}", NULL, 0, 0 };
	enum sd_result r = SD_OK;
	int64_t t, until;
	int i, got = 0;

	for (i = 0; i < BC_CLAIM_N && r == SD_OK; i++)
		r = bc_enqueue(db, s);
	if (r != SD_OK || (r = bc_claim(db, BC_CLAIM, BC_CLAIM_N, 60000, jobs, s)) != SD_OK)
		return r;
	for (i = 0; i < BC_CLAIM_N; i++) {
		t = now_ns();
		if (r == SD_OK)
			r = queue_ack(db, jobs[i]->id, jobs[i]->lease_token);
		s->v[BC_ACK][s->n[BC_ACK]++] = now_ns() - t;
		job_free(jobs[i]);
	}
	if (r != SD_OK || (r = bc_claim(db, BC_IDLE, 0, 60000, jobs, s)) != SD_OK)
		return r;
	/* the reclaim: a 1 ms lease left to run out */
	if ((r = queue_enqueue(db, &e, NULL)) != SD_OK ||
	    (r = queue_claim(db, "bench-lost", 1, 1, jobs, &got)) != SD_OK)
		return r;
	if (got != 1)
		return err_set(SD_DB, "the entry to reclaim was not claimed");
	until = jobs[0]->lease_until;
	job_free(jobs[0]);
	while (clock_now_ms() <= until) {
		struct timespec ts = { 0, 200000 };
		nanosleep(&ts, NULL);
	}
	if ((r = bc_claim(db, BC_RECLAIM, 1, 60000, jobs, s)) != SD_OK)
		return r;
	r = queue_ack(db, jobs[0]->id, jobs[0]->lease_token);
	job_free(jobs[0]);
	return r;
}

/* One round of the reads. */
static enum sd_result bc_reads(struct db *db, struct bc_samples *s)
{
	struct queue_counts *rows = NULL, total;
	enum sd_result r;
	int64_t t, v;
	int n;

	t = now_ns();
	r = queue_stats(db, &rows, &n, &total);
	s->v[BC_STATS][s->n[BC_STATS]++] = now_ns() - t;
	free(rows);
	if (r != SD_OK)
		return r;
	t = now_ns();
	r = queue_count_by_state(db, &total);
	s->v[BC_COUNT][s->n[BC_COUNT]++] = now_ns() - t;
	if (r != SD_OK)
		return r;
	t = now_ns();
	r = queue_reclaims(db, &v);
	s->v[BC_RECLAIMS][s->n[BC_RECLAIMS]++] = now_ns() - t;
	if (r != SD_OK)
		return r;
	t = now_ns();
	r = queue_done_since(db, clock_now_ms() - 60000, &v);
	s->v[BC_DONE_SINCE][s->n[BC_DONE_SINCE]++] = now_ns() - t;
	if (r != SD_OK)
		return r;
	t = now_ns();
	r = queue_pending(db, &v);
	s->v[BC_PENDING][s->n[BC_PENDING]++] = now_ns() - t;
	return r;
}

/* Time the five calls (reads 0) or the five reads (reads 1), reps rounds;
 * [out] med[] gets the median of each of them. */
static enum sd_result bc_measure(struct db *db, int64_t reps, int reads, double *med)
{
	struct bc_samples s;
	enum sd_result r = SD_OK;
	int64_t i;
	int k;

	memset(&s, 0, sizeof s);
	for (k = 0; k < BC_N_OPS; k++)
		if (!(s.v[k] = malloc((size_t)(reps * BC_CLAIM_N) * sizeof *s.v[k])))
			r = err_set(SD_NOMEM, "out of memory");
	for (i = 0; i < reps && r == SD_OK; i++)
		r = reads ? bc_reads(db, &s) : bc_round(db, &s);
	for (k = 0; k < BC_N_OPS; k++) {
		if (s.n[k] > 0)
			med[k] = median_us(s.v[k], s.n[k]);
		free(s.v[k]);
	}
	return r;
}

/* ======================== backlog and history ============================ */

/* ?1 rows ?2 now: N scheduled at -1, 0, 1 from an hour on; M leased at 0. */
static const char SQL_BC_SCHEDULED[] =
	"WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < ?1) "
	"INSERT INTO stream (job_id, kind, payload, priority, visible_at, created_at) "
	"SELECT 'sched-' || i, 'noop', '{}', i % 3 - 1, ?2 + ?3 + i, ?2 FROM c";
static const char SQL_BC_LEASED[] =
	"WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < ?1) "
	"INSERT INTO stream (job_id, kind, payload, priority, visible_at, lease_token, leased_by, "
	"leased_at, deliveries, created_at) "
	"SELECT 'leased-' || i, 'noop', '{}', 0, ?2 + ?3, i + 1, 'bench-holder', ?2, 1, ?2 FROM c";
/* K finished, 100 per ms, the last one more than a minute ago; every 50th
 * was reclaimed once.  Then their counts, as the acks would have kept them. */
static const char SQL_BC_DONE[] =
	"WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < ?1) "
	"INSERT INTO done_jobs (job_id, kind, payload, deliveries, attempts, created_at, "
	"finished_at, worker) SELECT 'done-' || i, 'noop', '{}', 1 + (i % 50 = 0), 0, ?2 - ?3, "
	"?2 - ?3 + i / 100, 'bench' FROM c";
static const char SQL_BC_DONE_TOTALS[] =
	"INSERT INTO done_totals (kind, done, done_reclaims) SELECT kind, count(*), "
	"sum(max(deliveries - 1 - attempts, 0)) FROM done_jobs WHERE job_id GLOB 'done-*' "
	"GROUP BY kind ON CONFLICT (kind) DO UPDATE SET done = done_totals.done + excluded.done, "
	"done_reclaims = done_totals.done_reclaims + excluded.done_reclaims";
static const char SQL_BC_DONE_TIMES[] =
	"INSERT INTO done_times (finished_at, n) SELECT finished_at, count(*) FROM done_jobs "
	"WHERE job_id GLOB 'done-*' GROUP BY finished_at "
	"ON CONFLICT (finished_at) DO UPDATE SET n = done_times.n + excluded.n";

/* Run the statements sql[0..n), each bound ?1 rows ?2 now ?3 offset, in one
 * transaction (statements that name fewer parameters ignore the rest). */
static enum sd_result bc_insert(struct db *db, const char *const *sql, int n, int64_t rows,
				int64_t offset)
{
	enum sd_result r;
	int i;

	if (rows < 1)
		return SD_OK;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	for (i = 0; i < n && r == SD_OK; i++) {
		struct db_stmt *st = db_stmt(db, sql[i]);

		if (!st) {
			r = SD_DB;
			break;
		}
		db_bind_int(st, 1, rows);
		db_bind_int(st, 2, clock_now_ms());
		db_bind_int(st, 3, offset);
		r = db_run(st);
	}
	if ((r = db_end(db, r)) != SD_OK)
		return r;
	/* the box checkpoints its WAL itself (maint.c): time the calls on a
	 * database in that state, not behind a WAL of a million rows */
	return db_checkpoint(db, DB_CHECKPOINT_TRUNCATE, 1000, NULL);
}

static enum sd_result bc_go(const char *dir, const char *path, void *arg)
{
	static const char *const history[] = { SQL_BC_DONE, SQL_BC_DONE_TOTALS, SQL_BC_DONE_TIMES };
	static const char *const scheduled[] = { SQL_BC_SCHEDULED };
	static const char *const leased[] = { SQL_BC_LEASED };
	struct bc_args *a = arg;
	struct db *db = NULL;
	enum sd_result r;
	int64_t t0, build = 0;

	if ((r = db_open(path, DB_OPEN_CREATE, DB_SYNC_QUEUE, &db)) != SD_OK)
		return r;
	bench_progress("empty stream: %lld rounds of the calls and the reads", (long long)a->reps);
	if ((r = bc_measure(db, a->reps, 0, a->empty_us)) != SD_OK ||
	    (r = bc_measure(db, a->reps, 1, a->empty_us)) != SD_OK)
		goto out;
	bench_progress("history: %lld finished jobs", (long long)a->done);
	t0 = clock_mono_us();
	if ((r = bc_insert(db, history, 3, a->done, 60001 + a->done / 100)) != SD_OK)
		goto out;
	build += clock_mono_us() - t0;
	if ((r = bc_measure(db, a->reps, 1, a->full_us)) != SD_OK)
		goto out;
	bench_progress("backlog: %lld scheduled, %lld leased", (long long)a->scheduled,
		       (long long)a->leased);
	t0 = clock_mono_us();
	if ((r = bc_insert(db, scheduled, 1, a->scheduled, BC_HOUR_MS)) != SD_OK ||
	    (r = bc_insert(db, leased, 1, a->leased, BC_HOUR_MS)) != SD_OK)
		goto out;
	build += clock_mono_us() - t0;
	if ((r = bc_measure(db, a->reps, 0, a->full_us)) != SD_OK)
		goto out;
	/* the worker's claim with the controls off, then holding entries back */
	r = bench_claim_controls(dir, a->reps, a->held, &a->empty_us[BC_CTL_CLAIM],
				 &a->full_us[BC_CTL_CLAIM]);
out:
	a->build_s = (double)build / 1e6;
	db_close(db);
	return r;
}

/* ======================== the report ===================================== */

static void bc_print(const struct bc_args *a, int json)
{
	int k;

	if (json) {
		printf("{\"program\":\"stagedoor-bench claim\",\"scheduled\":%lld,\"leased\":%lld,"
		       "\"done\":%lld,\"held\":%lld,\"reps\":%lld,\"build_s\":%.3f,"
		       "\"target\":%.1f", (long long)a->scheduled, (long long)a->leased,
		       (long long)a->done, (long long)a->held, (long long)a->reps, a->build_s,
		       BC_TARGET);
		for (k = 0; k < BC_N_OPS; k++) {
			double q = a->empty_us[k] > 0 ? a->full_us[k] / a->empty_us[k] : 0;
			printf(",\"%s_empty_us\":%.2f,\"%s_full_us\":%.2f,\"%s_ratio\":%.3f,"
			       "\"%s_met\":%s", bc_keys[k], a->empty_us[k], bc_keys[k], a->full_us[k],
			       bc_keys[k], q, bc_keys[k], q <= BC_TARGET ? "true" : "false");
		}
		printf("}\n");
		return;
	}
	printf("stagedoor-bench claim: medians of %lld rounds (us); backlog %lld scheduled "
	       "(priorities -1, 0, 1) + %lld leased; history %lld finished (built in %.1f s)\n",
	       (long long)a->reps, (long long)a->scheduled, (long long)a->leased,
	       (long long)a->done, a->build_s);
	printf("  %-26s %10s %10s %7s  %s\n", "call", "empty", "backlog", "ratio", "<= 1.5");
	for (k = 0; k < BC_N_OPS; k++) {
		double q = a->empty_us[k] > 0 ? a->full_us[k] / a->empty_us[k] : 0;
		if (k == BC_STATS)
			printf("  %-26s %10s %10s %7s  %s\n", "read", "empty", "history", "ratio",
			       "<= 1.5");
		if (k == BC_CTL_CLAIM)
			printf("  %-26s %10s %10s %7s  %s\n", "with controls", "none", "held", "ratio",
			       "<= 1.5");
		printf("  %-26s %10.1f %10.1f %7.2f  %s\n", bc_names[k], a->empty_us[k],
		       a->full_us[k], q, q <= BC_TARGET ? "met" : "MISSED");
	}
}

int bench_claim_cmd(int argc, char **argv)
{
	struct bc_args a;
	int json = 0, keep = 0, rc;
	struct arg_opt opts[] = {
		{ "scheduled", ARG_INT, &a.scheduled, 0, 100000000, 0, NULL,
		  "jobs scheduled for later in the stream", 0 },
		{ "leased", ARG_INT, &a.leased, 0, 100000000, 0, NULL,
		  "jobs leased by others", 0 },
		{ "done", ARG_INT, &a.done, 0, 100000000, 0, NULL,
		  "finished jobs in the history", 0 },
		{ "reps", ARG_INT, &a.reps, 1, 1000000, 0, NULL,
		  "claims timed", 0 },
		{ "held", ARG_INT, &a.held, 1, 100000000, 0, NULL,
		  "entries of each kind a control holds back (paused, rate, concurrency)", 0 },
		BENCH_ARG_KEEP(&keep),
		ARG_JSON(&json),
		ARG_END,
	};
	static const char usage[] =
		"claim [--scheduled N] [--leased M] [--done K] [--held H] [--reps R] [--json] "
		"[--keep]";

	memset(&a, 0, sizeof a);
	a.scheduled = 1000000;
	a.leased = 100000;
	a.done = 1000000;
	a.held = 100000;
	a.reps = 200;
	if ((rc = bench_args(argc, argv, opts, usage)) != 0)
		return rc;
	if ((rc = bench_in_dir(keep, bc_go, &a)) != 0)
		return rc;
	bc_print(&a, json);
	return 0;
}
