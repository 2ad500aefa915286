/*
 * bench_controls.c: the part of `stagedoor-bench claim` that times the
 * worker's claim (controls_claim, then queue_claim for the rest: what
 * worker.c does each turn) with the queue's controls off, and again with
 * `held` entries of each of three kinds held back by a control: one paused,
 * one whose rate is spent (1 a day, its one taken), one at its concurrency
 * limit (2, both leases held for an hour).  The claim takes 8 ready entries
 * of another kind, and claims once more when nothing is ready (a waiting
 * worker's turn).  Each round's enqueues are timed too: an entry of
 * another kind (the trigger stream_lane looks for its control and finds
 * none) and one of the rate-held kind (the trigger moves it to its lane).
 * On a database of its own in the bench's folder.
 */
#include "bench.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "controls.h"
#include "db.h"
#include "queue.h"

#define BK_CLAIM_N 8
#define BK_OPS BENCH_CONTROLS_OPS

static int64_t bk_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* the worker's claim of up to n, timed into *ns: [out] *got */
static enum sd_result bk_take(struct db *db, int n, struct job **out, int *got, int64_t *ns)
{
	int64_t t = bk_ns(), wake;
	enum sd_result r;
	int more = 0;

	r = controls_claim(db, "bench/w", n, 60000, out, got, &wake);
	if (r == SD_OK && *got < n)
		r = queue_claim(db, "bench/w", n - *got, 60000, out + *got, &more);
	*ns = bk_ns() - t;
	*got += more;
	return r;
}

/* one round's enqueues: 8 noop (their mean into *noop_ns) and one of the
 * kind held by a rate, for tomorrow (into *held_ns: no claim takes it) */
static enum sd_result bk_enqueue(struct db *db, int64_t *noop_ns, int64_t *held_ns)
{
	struct enqueue e = { 0 }, h = { 0 };
	enum sd_result r = SD_OK;
	int64_t t = bk_ns();
	int k;

	e.kind = "noop";
	for (k = 0; k < BK_CLAIM_N && r == SD_OK; k++)
		r = queue_enqueue(db, &e, NULL);
	*noop_ns = (bk_ns() - t) / BK_CLAIM_N;
	h.kind = "held_rate";
	h.delay_ms = 86400000;
	t = bk_ns();
	if (r == SD_OK)
		r = queue_enqueue(db, &h, NULL);
	*held_ns = bk_ns() - t;
	return r;
}

/* reps rounds of: the enqueues, the timed claim of 8 (which must take
 * exactly the noop ones), their acks, the timed claim that finds nothing;
 * [out] med[0..BK_OPS), microseconds */
static enum sd_result bk_measure(struct db *db, int64_t reps, double med[BK_OPS])
{
	struct job *jobs[BK_CLAIM_N];
	int64_t *v[BK_OPS], i;
	enum sd_result r = SD_OK;
	int k, got;

	for (k = 0; k < BK_OPS; k++)
		if (!(v[k] = malloc((size_t)reps * sizeof *v[k])))
			r = err_set(SD_NOMEM, "out of memory");
	for (i = 0; i < reps && r == SD_OK; i++) {
		if ((r = bk_enqueue(db, &v[2][i], &v[3][i])) != SD_OK ||
		    (r = bk_take(db, BK_CLAIM_N, jobs, &got, &v[0][i])) != SD_OK)
			break;
		for (k = 0; k < got; k++) {
			if (r == SD_OK && strcmp(jobs[k]->kind, "noop") != 0)
				r = err_set(SD_DB, "the claim took a held %s", jobs[k]->kind);
			if (r == SD_OK)
				r = queue_ack(db, jobs[k]->id, jobs[k]->lease_token);
			job_free(jobs[k]);
		}
		if (r == SD_OK && got != BK_CLAIM_N)
			r = err_set(SD_DB, "the claim took %d entries, not %d", got, BK_CLAIM_N);
		if (r == SD_OK && (r = bk_take(db, BK_CLAIM_N, jobs, &got, &v[1][i])) == SD_OK &&
		    got != 0)
			r = err_set(SD_DB, "a claim with nothing ready took %d", got);
	}
	for (k = 0; k < BK_OPS; k++) {
		if (r == SD_OK) {
			bench_sort_i64(v[k], reps);
			med[k] = (double)(reps % 2 ? v[k][reps / 2]
					  : (v[k][reps / 2 - 1] + v[k][reps / 2]) / 2) / 1000.0;
		}
		free(v[k]);
	}
	return r;
}

/* ?1 rows ?2 kind ?3 now: ready entries of kind, in one statement (the
 * trigger stream_lane puts them in the kind's lane) */
static const char SQL_BK_FILL[] =
	"WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < ?1) "
	"INSERT INTO stream (job_id, kind, payload, priority, visible_at, created_at) "
	"SELECT ?2 || '-' || i, ?2, '{}', 0, ?3, ?3 FROM c";

static enum sd_result bk_fill(struct db *db, const char *kind, int64_t rows)
{
	struct db_stmt *st;
	enum sd_result r;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_BK_FILL))) {
		db_rollback(db);
		return SD_DB;
	}
	db_bind_int(st, 1, rows);
	db_bind_text(st, 2, kind);
	db_bind_int(st, 3, clock_now_ms() - 1000);
	return db_end(db, db_run(st));
}

/* the three held kinds, held entries each */
static enum sd_result bk_hold(struct db *db, int64_t held)
{
	struct control_limits rate = { 0 }, conc = { .concurrency = 2 };
	struct job *jobs[2];
	enum sd_result r;
	int64_t ns;
	int got = 0, i;

	if ((r = controls_pause(db, "held_paused", "bench", NULL)) != SD_OK ||
	    (r = controls_rate_parse("1/d burst 1", &rate)) != SD_OK ||
	    (r = controls_limit(db, "held_rate", &rate)) != SD_OK ||
	    (r = controls_limit(db, "held_capped", &conc)) != SD_OK ||
	    (r = bk_fill(db, "held_paused", held)) != SD_OK ||
	    (r = bk_fill(db, "held_rate", held)) != SD_OK ||
	    (r = bk_fill(db, "held_capped", held)) != SD_OK)
		return r;
	/* the rate's one, and the two places: taken and held */
	if ((r = bk_take(db, 2, jobs, &got, &ns)) != SD_OK)
		return r;
	for (i = 0; i < got; i++)
		job_free(jobs[i]);
	if (got != 2)
		return err_set(SD_DB, "the held kinds gave %d entries, not 2", got);
	if ((r = bk_take(db, 2, jobs, &got, &ns)) != SD_OK)
		return r;
	for (i = 0; i < got; i++)
		job_free(jobs[i]);
	if (got != 1)
		return err_set(SD_DB, "the capped kind gave %d more, not 1", got);
	return db_checkpoint(db, DB_CHECKPOINT_TRUNCATE, 1000, NULL);
}

enum sd_result bench_claim_controls(const char *dir, int64_t reps, int64_t held,
				    double off[BENCH_CONTROLS_OPS], double on[BENCH_CONTROLS_OPS])
{
	char path[4096];
	struct db *db;
	enum sd_result r;

	snprintf(path, sizeof path, "%s/controls.db", dir);
	if ((r = db_open(path, DB_OPEN_CREATE, DB_SYNC_QUEUE, &db)) != SD_OK)
		return r;
	bench_progress("controls: %lld rounds with none", (long long)reps);
	if ((r = bk_measure(db, reps, off)) == SD_OK) {
		bench_progress("controls: %lld entries held by each of a pause, a spent rate and a "
			       "full concurrency limit", (long long)held);
		if ((r = bk_hold(db, held)) == SD_OK)
			r = bk_measure(db, reps, on);
	}
	db_close(db);
	return r;
}
