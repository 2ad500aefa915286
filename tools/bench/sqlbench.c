/*
 * sqlbench.c: the benchmark's minimal program.  It issues the stream's hot
 * statements (src/queue_sql.h, the very strings queue.c runs) in the worker's
 * transaction pattern and nothing else: no job structs, no handler threads,
 * no policies, no logging.  Its rate is the floor against which
 * `stagedoor-bench queue` measures the queue's own overhead.
 *
 *   enqueue    BEGIN IMMEDIATE; E x ENQUEUE; COMMIT  (E: --enqueue-batch,
 *              default B)
 *   claim+ack  each turn: BEGIN IMMEDIATE; ACK_MANY_COPY + DONE_TIME +
 *              ACK_MANY_DELETE + ACK_MANY_TOTALS (the counts) for the
 *              previous claim; CLAIM up to B, and while that comes back
 *              short a CLAIM_ABOVE, as queue.c's claim_levels (the turn
 *              that finds the stream empty runs one); COMMIT -- what
 *              worker.c's loop does when it merges the ack flush with the
 *              next claim.  The turn whose claim comes back empty ends the
 *              run.
 *
 * db_open() makes the file and its schema (embedded migrations, WAL); the hot
 * path then runs on a plain sqlite3 connection with statements prepared once
 * and bound without copies, so that nothing but SQLite is measured.
 *
 * usage: sqlbench --jobs N --batch B [--enqueue-batch E] --sync normal|full [--json]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "clock.h"
#include "db.h"
#include "queue_sql.h"

#define LEASE_MS 60000

static const char *me = "sqlbench";

static void die(const char *what, sqlite3 *h)
{
	fprintf(stderr, "%s: %s%s%s\n", me, what, h ? ": " : "", h ? sqlite3_errmsg(h) : "");
	exit(1);
}

static void usage(void)
{
	fprintf(stderr, "usage: %s --jobs N --batch B [--enqueue-batch E] --sync normal|full "
		"[--json]\n", me);
	exit(2);
}

static long long num(const char *s, long long min, long long max, const char *what)
{
	char *end;
	long long v;

	errno = 0;
	v = s ? strtoll(s, &end, 10) : 0;
	if (!s || errno || *end || end == s || v < min || v > max) {
		fprintf(stderr, "%s: %s must be a whole number in [%lld, %lld]\n", me, what, min, max);
		exit(2);
	}
	return v;
}

static sqlite3_stmt *prep(sqlite3 *h, const char *sql)
{
	sqlite3_stmt *st;

	if (sqlite3_prepare_v3(h, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK)
		die("prepare", h);
	return st;
}

/* Step a statement that returns no rows, then reset it. */
static void run(sqlite3 *h, sqlite3_stmt *st, const char *what)
{
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE)
		die(what, h);
	sqlite3_reset(st);
}

static int64_t one_int(sqlite3 *h, const char *sql)
{
	sqlite3_stmt *st = prep(h, sql);
	int64_t v;

	if (sqlite3_step(st) != SQLITE_ROW)
		die(sql, h);
	v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

static uint64_t rng_state;

static int64_t token_next(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	x = (x * 0x2545F4914F6CDD1DULL) >> 1;
	return x ? (int64_t)x : 1;
}

/* The enqueue phase: jobs rows, ebatch per transaction.  Returns its wall
 * time in microseconds. */
static int64_t enqueue_all(sqlite3 *h, sqlite3_stmt *begin, sqlite3_stmt *commit,
			   sqlite3_stmt *enq, long long jobs, long long ebatch)
{
	char job_id[32];
	int64_t t0 = clock_mono_us(), now;
	long long n, k;

	sqlite3_bind_text(enq, 2, "noop", -1, SQLITE_STATIC);
	sqlite3_bind_text(enq, 3, "{}", -1, SQLITE_STATIC);
	sqlite3_bind_int64(enq, 4, 0);
	sqlite3_bind_int64(enq, 7, 0);	/* the box's own lane */
	for (n = 0; n < jobs; n += ebatch) {
		run(h, begin, "begin");
		now = clock_now_ms();
		sqlite3_bind_int64(enq, 5, now);
		sqlite3_bind_int64(enq, 6, now);
		for (k = n; k < n + ebatch && k < jobs; k++) {
			/* an id of the queue's shape and length: j + 23 hex digits */
			snprintf(job_id, sizeof job_id, "j%011llx%012llx",
				 (unsigned long long)now & 0xfffffffffffULL, (unsigned long long)k);
			sqlite3_bind_text(enq, 1, job_id, -1, SQLITE_STATIC);
			run(h, enq, "enqueue");
		}
		run(h, commit, "commit");
	}
	return clock_mono_us() - t0;
}

/* The claim+ack phase's statements and buffers. */
struct turns {
	sqlite3 *h;
	sqlite3_stmt *claim, *begin, *commit, *copy, *del, *copy1, *del1;
	sqlite3_stmt *above, *totals, *totals1, *times;
	int64_t *ids, *prev;		/* this claim's ids, the previous claim's */
	char *list;			/* the previous claim's ids as a JSON array */
	long long batch;
	const char *worker;
	int64_t prio;			/* priority of the last entry claimed */
	int64_t us;			/* [out] wall time */
};

/* After an ack's copy (bound, already run): its row in done_times, as
 * queue.c's ack_time adds it; [out] how many it copied. */
static int64_t ack_time(struct turns *t, int64_t now)
{
	int64_t n = sqlite3_changes(t->h);

	if (n == 0)
		return 0;
	sqlite3_bind_int64(t->times, 3, now);
	sqlite3_bind_int64(t->times, 4, n);
	run(t->h, t->times, "ack times");
	return n;
}

/* One claim of up to B - *got: CLAIM (the lowest level), or CLAIM_ABOVE
 * (the lowest level above the last one claimed, any when *got is 0). */
static void claim_level(struct turns *t, sqlite3_stmt *st, int *got)
{
	int rc;

	sqlite3_bind_int64(st, 5, t->batch - *got);
	sqlite3_bind_int64(st, 7, 0);	/* the box's own lane */
	if (st == t->above && *got > 0)
		sqlite3_bind_int64(st, 6, t->prio);
	else if (st == t->above)
		sqlite3_bind_null(st, 6);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && *got < t->batch) {
		t->ids[*got] = sqlite3_column_int64(st, 0);
		t->prio = sqlite3_column_int64(st, 4);
		(*got)++;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		die("claim", t->h);
	sqlite3_reset(st);
}

/* The claim, level by level, as queue.c's claim_levels. */
static int claim_levels(struct turns *t)
{
	int got = 0, before;

	claim_level(t, t->claim, &got);
	while (got < t->batch) {
		before = got;
		claim_level(t, t->above, &got);
		if (got == before)
			break;
	}
	return got;
}

/* Until a claim comes back empty: BEGIN; ack the previous claim; claim the
 * next batch; COMMIT. */
static void *claim_ack(void *arg)
{
	struct turns *t = arg;
	sqlite3 *h = t->h;
	int64_t t0 = clock_mono_us(), now, token, prev_token = 0, acked, reclaims;
	int n_prev = 0, got, i, rc;

	for (i = 0; i < 2; i++) {
		sqlite3_stmt *st = i ? t->above : t->claim;

		sqlite3_bind_int64(st, 2, LEASE_MS);
		sqlite3_bind_text(st, 4, t->worker, -1, SQLITE_STATIC);
	}
	for (;;) {
		now = clock_now_ms();
		token = token_next();
		run(h, t->begin, "begin");
		if (n_prev == 1) {
			/* as queue_ack_many: one job takes the per-row statements */
			sqlite3_bind_int64(t->copy1, 1, t->prev[0]);
			sqlite3_bind_int64(t->copy1, 2, prev_token);
			sqlite3_bind_int64(t->copy1, 3, now);
			run(h, t->copy1, "ack copy");
			ack_time(t, now);
			sqlite3_bind_int64(t->totals1, 1, t->prev[0]);
			sqlite3_bind_int64(t->totals1, 2, prev_token);
			run(h, t->totals1, "ack totals");
			sqlite3_bind_int64(t->del1, 1, t->prev[0]);
			sqlite3_bind_int64(t->del1, 2, prev_token);
			run(h, t->del1, "ack delete");
		} else if (n_prev > 0) {
			char *p = t->list;

			*p++ = '[';
			for (i = 0; i < n_prev; i++)
				p += sprintf(p, "%s%lld", i ? "," : "", (long long)t->prev[i]);
			*p++ = ']';
			*p = '\0';
			sqlite3_bind_text(t->copy, 1, t->list, (int)(p - t->list), SQLITE_STATIC);
			sqlite3_bind_int64(t->copy, 2, prev_token);
			sqlite3_bind_int64(t->copy, 3, now);
			run(h, t->copy, "ack copy");
			ack_time(t, now);
			sqlite3_bind_text(t->del, 1, t->list, (int)(p - t->list), SQLITE_STATIC);
			sqlite3_bind_int64(t->del, 2, prev_token);
			/* as queue_ack_many: the rows it returns, added up per kind
			 * (one kind here) into one ACK_MANY_TOTALS */
			acked = reclaims = 0;
			while ((rc = sqlite3_step(t->del)) == SQLITE_ROW) {
				acked++;
				reclaims += sqlite3_column_int64(t->del, 2);
			}
			if (rc != SQLITE_DONE)
				die("ack delete", h);
			sqlite3_reset(t->del);
			sqlite3_bind_text(t->totals, 1, "noop", -1, SQLITE_STATIC);
			sqlite3_bind_int64(t->totals, 2, acked);
			sqlite3_bind_int64(t->totals, 3, reclaims);
			run(h, t->totals, "ack totals");
		}
		sqlite3_bind_int64(t->claim, 1, now);
		sqlite3_bind_int64(t->claim, 3, token);
		sqlite3_bind_int64(t->above, 1, now);
		sqlite3_bind_int64(t->above, 3, token);
		got = claim_levels(t);
		run(h, t->commit, "commit");
		if (got == 0)
			break;
		memcpy(t->prev, t->ids, (size_t)got * sizeof *t->ids);
		n_prev = got;
		prev_token = token;
	}
	t->us = clock_mono_us() - t0;
	return NULL;
}

/* The figures of the run (microseconds in), as text or as one JSON line. */
static void report(long long jobs, long long batch, long long ebatch, const char *sync,
		   int64_t t_enq, int64_t t_ca, int json)
{
	double te = (double)t_enq / 1e6, tc = (double)t_ca / 1e6;
	double r_enq = (double)jobs / te, r_ca = (double)jobs / tc;
	double r_life = (double)jobs / (te + tc);

	if (json)
		printf("{\"program\":\"sqlbench\",\"jobs\":%lld,\"batch\":%lld,"
		       "\"enqueue_batch\":%lld,\"sync\":\"%s\",\"enqueue_s\":%.6f,"
		       "\"claim_ack_s\":%.6f,\"enqueue_jobs_per_s\":%.0f,"
		       "\"claim_ack_jobs_per_s\":%.0f,\"lifecycle_jobs_per_s\":%.0f}\n",
		       jobs, batch, ebatch, sync, te, tc, r_enq, r_ca, r_life);
	else
		printf("sqlbench: %lld jobs, batch %lld, enqueue batch %lld, synchronous=%s\n"
		       "  enqueue     %10.0f jobs/s  (%.3f s)\n"
		       "  claim+ack   %10.0f jobs/s  (%.3f s)\n"
		       "  lifecycle   %10.0f jobs/s\n",
		       jobs, batch, ebatch, sync, r_enq, te, r_ca, tc, r_life);
}

int main(int argc, char **argv)
{
	long long jobs = -1, batch = -1, ebatch = -1;
	const char *sync = NULL, *tmp = getenv("TMPDIR");
	int json = 0, i;
	char dir[4096], path[4200], file[4300], worker[32];
	struct db *db;
	sqlite3 *h;
	sqlite3_stmt *begin, *commit, *enq, *claim, *copy, *del, *copy1, *del1;
	sqlite3_stmt *above, *totals, *totals1, *times;
	int64_t *ids, *prev, t_enq, t_ca, done, left;
	char *list;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--json") == 0)
			json = 1;
		else if (i + 1 < argc && strcmp(a, "--jobs") == 0)
			jobs = num(argv[++i], 1, 100000000, "--jobs");
		else if (i + 1 < argc && strcmp(a, "--batch") == 0)
			batch = num(argv[++i], 1, 10000, "--batch");
		else if (i + 1 < argc && strcmp(a, "--enqueue-batch") == 0)
			ebatch = num(argv[++i], 1, 10000, "--enqueue-batch");
		else if (i + 1 < argc && strcmp(a, "--sync") == 0)
			sync = argv[++i];
		else
			usage();
	}
	if (jobs < 0 || batch < 0 || !sync ||
	    (strcmp(sync, "normal") != 0 && strcmp(sync, "full") != 0))
		usage();
	if (ebatch < 0)
		ebatch = batch;
	if (getrandom(&rng_state, sizeof rng_state, 0) != sizeof rng_state)
		rng_state = (uint64_t)clock_mono_us();
	rng_state |= 1;

	snprintf(dir, sizeof dir, "%s/sqlbench.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		die("cannot make a temporary directory", NULL);
	snprintf(path, sizeof path, "%s/bench.db", dir);
	if (db_open(path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &db) != SD_OK) {
		fprintf(stderr, "%s: %s\n", me, err_msg());
		return 1;
	}
	db_close(db);

	/* The file is in WAL mode now (persistent); the level is per connection. */
	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
		die("open", h);
	sqlite3_busy_timeout(h, DB_BUSY_TIMEOUT_MS);
	if (sqlite3_exec(h, "PRAGMA foreign_keys = ON", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_exec(h, strcmp(sync, "full") == 0 ? "PRAGMA synchronous = FULL"
						      : "PRAGMA synchronous = NORMAL",
			 NULL, NULL, NULL) != SQLITE_OK)
		die("pragma", h);
	begin = prep(h, "BEGIN IMMEDIATE");
	commit = prep(h, "COMMIT");
	enq = prep(h, QUEUE_SQL_ENQUEUE);
	claim = prep(h, QUEUE_SQL_CLAIM);
	above = prep(h, QUEUE_SQL_CLAIM_ABOVE);
	copy = prep(h, QUEUE_SQL_ACK_MANY_COPY);
	del = prep(h, QUEUE_SQL_ACK_MANY_DELETE);
	copy1 = prep(h, QUEUE_SQL_ACK_COPY);
	del1 = prep(h, QUEUE_SQL_ACK_DELETE);
	totals = prep(h, QUEUE_SQL_ACK_MANY_TOTALS);
	totals1 = prep(h, QUEUE_SQL_ACK_TOTALS);
	times = prep(h, QUEUE_SQL_DONE_TIME);
	ids = calloc((size_t)batch, sizeof *ids);
	prev = calloc((size_t)batch, sizeof *prev);
	list = malloc((size_t)batch * 21 + 3);
	if (!ids || !prev || !list)
		die("out of memory", NULL);
	snprintf(worker, sizeof worker, "w%ld.0", (long)getpid());

	/* ---- enqueue: E per transaction ---------------------------------- */
	t_enq = enqueue_all(h, begin, commit, enq, jobs, ebatch);

	/* ---- claim + ack: one transaction per turn, on a thread of its own,
	 * as worker.c's loop runs (glibc gives a thread its own malloc arena,
	 * and SQLite allocates per claim: on the main arena the heap is trimmed
	 * and faulted in again every turn, which would make this floor lower
	 * than the queue's) */
	{
		struct turns t = { h, claim, begin, commit, copy, del, copy1, del1,
				   above, totals, totals1, times, ids, prev, list, batch, worker, 0, 0 };
		pthread_t th;

		if (pthread_create(&th, NULL, claim_ack, &t) != 0)
			die("cannot start a thread", NULL);
		pthread_join(th, NULL);
		t_ca = t.us;
	}

	/* Every job went through, or the figures mean nothing. */
	done = one_int(h, "SELECT count(*) FROM done_jobs");
	left = one_int(h, "SELECT count(*) FROM stream");
	sqlite3_finalize(begin);
	sqlite3_finalize(commit);
	sqlite3_finalize(enq);
	sqlite3_finalize(claim);
	sqlite3_finalize(above);
	sqlite3_finalize(copy);
	sqlite3_finalize(del);
	sqlite3_finalize(copy1);
	sqlite3_finalize(del1);
	sqlite3_finalize(totals);
	sqlite3_finalize(totals1);
	sqlite3_finalize(times);
	sqlite3_close(h);
	free(ids);
	free(prev);
	free(list);
	snprintf(file, sizeof file, "%s-wal", path);
	unlink(file);
	snprintf(file, sizeof file, "%s-shm", path);
	unlink(file);
	unlink(path);
	rmdir(dir);
	if (done != jobs || left != 0) {
		fprintf(stderr, "%s: expected %lld done and 0 left, found %lld done and %lld left\n",
			me, jobs, (long long)done, (long long)left);
		return 1;
	}

	report(jobs, batch, ebatch, sync, t_enq, t_ca, json);
	return 0;
}
