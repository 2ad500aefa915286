/*
 * test_queue.c: the stream's state diagram (see the top of src/queue.c), one
 * transition at a time, on the fake clock.
 *
 * Every test starts from an empty database with the clock at T0 and the
 * built-in policy (60 s lease, 10 attempts, 5 deliveries).  Rows are read back
 * with SQL on the test's own connection, so each assertion checks what was
 * stored, not only what a call returned.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "queue.h"
#include "testutil.h"

#define T0 1000000000LL		/* where tu_setup puts the fake clock */

static struct db *db_of(void **state)
{
	return ((struct tu_env *)*state)->db;
}

/* ======================== helpers ======================================== */

static enum sd_result enq(struct db *db, const char *kind, const char *payload,
			  const char *job_id, int64_t delay_ms, int64_t priority, char *id_out)
{
	struct enqueue e = { kind, payload, job_id, delay_ms, priority };

	return queue_enqueue(db, &e, id_out);
}

/* Claim up to n; asserts success and returns how many were claimed. */
static int claim(struct db *db, const char *worker, int n, int64_t lease_ms, struct job **out)
{
	int got = -1;

	assert_int_equal(queue_claim(db, worker, n, lease_ms, out, &got), SD_OK);
	assert_true(got >= 0 && got <= n);
	return got;
}

/* One claimed job, or NULL when nothing is claimable. */
static struct job *claim1(struct db *db, const char *worker, int64_t lease_ms)
{
	struct job *j = NULL;

	return claim(db, worker, 1, lease_ms, &j) == 1 ? j : NULL;
}

/* enqueue + claim + ack: one finished job of kind, finished now. */
static void make_done(struct db *db, const char *kind, const char *job_id)
{
	struct job *j;

	assert_int_equal(enq(db, kind, NULL, job_id, 0, 0, NULL), SD_OK);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, job_id);
	assert_int_equal(queue_ack(db, j->id, j->lease_token), SD_OK);
	job_free(j);
}

/* A single integer from sql (a static string: db_stmt keys on its address),
 * with ?1 bound to a1 and ?2 to a2 when the statement names them. */
static int64_t q_int(struct db *db, const char *sql, int64_t a1, const char *a2)
{
	struct db_stmt *st = db_stmt(db, sql);
	int64_t v = -1;
	int row = 0;

	assert_non_null(st);
	db_bind_int(st, 1, a1);
	db_bind_text(st, 2, a2);
	assert_int_equal(db_step(st, &row), SD_OK);
	if (row && !db_col_is_null(st, 0))
		v = db_col_int(st, 0);
	db_reset(st);
	return v;
}

/* ?1 is unused in these; binding a parameter a statement lacks is harmless */
static const char SQL_N_STREAM[] = "SELECT count(*) FROM stream";
static const char SQL_N_DONE[] = "SELECT count(*) FROM done_jobs WHERE CAST(?2 AS TEXT) IS NULL OR job_id = ?2";
static const char SQL_N_DEAD[] = "SELECT count(*) FROM dead_jobs WHERE CAST(?2 AS TEXT) IS NULL OR job_id = ?2";
static const char SQL_N_TOTALS[] =
	"SELECT coalesce(sum(pruned), 0) FROM done_totals WHERE ?2 IS NULL OR kind = ?2";

static int64_t n_stream(struct db *db)
{
	return q_int(db, SQL_N_STREAM, 0, NULL);
}

static int64_t n_done(struct db *db, const char *job_id)
{
	return q_int(db, SQL_N_DONE, 0, job_id);
}

static int64_t n_dead(struct db *db, const char *job_id)
{
	return q_int(db, SQL_N_DEAD, 0, job_id);
}

/* One stream row as stored; zero-filled so two snapshots compare with memcmp. */
struct srow {
	int found;
	int64_t visible_at, token, deliveries, expiries, attempts, priority, created_at;
	int64_t leased_at;	/* -1: NULL */
	int token_null;
	char job_id[QUEUE_JOB_ID_MAX + 1];
	char kind[QUEUE_KIND_MAX + 1];
	char payload[256];
	char leased_by[64];
	char last_error[QUEUE_ERROR_MAX + 1];
	int64_t n_stream, n_done, n_dead;	/* the other tables, for "changes nothing" */
};

static const char SQL_ROW[] =
	"SELECT visible_at, lease_token, deliveries, expiries, attempts, priority, created_at, "
	"job_id, kind, payload, leased_by, last_error, leased_at FROM stream WHERE id = ?1";

static void cpy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "(null)");
}

static void stream_row(struct db *db, int64_t id, struct srow *r)
{
	struct db_stmt *st = db_stmt(db, SQL_ROW);
	int row = 0;

	memset(r, 0, sizeof *r);
	assert_non_null(st);
	db_bind_int(st, 1, id);
	assert_int_equal(db_step(st, &row), SD_OK);
	if (row) {
		r->found = 1;
		r->visible_at = db_col_int(st, 0);
		r->token_null = db_col_is_null(st, 1);
		r->token = db_col_int(st, 1);
		r->deliveries = db_col_int(st, 2);
		r->expiries = db_col_int(st, 3);
		r->attempts = db_col_int(st, 4);
		r->priority = db_col_int(st, 5);
		r->created_at = db_col_int(st, 6);
		cpy(r->job_id, sizeof r->job_id, db_col_text(st, 7));
		cpy(r->kind, sizeof r->kind, db_col_text(st, 8));
		cpy(r->payload, sizeof r->payload, db_col_text(st, 9));
		cpy(r->leased_by, sizeof r->leased_by, db_col_text(st, 10));
		cpy(r->last_error, sizeof r->last_error, db_col_text(st, 11));
		r->leased_at = db_col_is_null(st, 12) ? -1 : db_col_int(st, 12);
	}
	db_reset(st);
	r->n_stream = n_stream(db);
	r->n_done = n_done(db, NULL);
	r->n_dead = n_dead(db, NULL);
}

static void assert_same_row(const struct srow *a, const struct srow *b)
{
	assert_int_equal(a->found, b->found);
	assert_int_equal(a->visible_at, b->visible_at);
	assert_int_equal(a->token, b->token);
	assert_int_equal(a->token_null, b->token_null);
	assert_int_equal(a->deliveries, b->deliveries);
	assert_int_equal(a->expiries, b->expiries);
	assert_int_equal(a->attempts, b->attempts);
	assert_string_equal(a->leased_by, b->leased_by);
	assert_string_equal(a->last_error, b->last_error);
	assert_int_equal(a->leased_at, b->leased_at);
	assert_int_equal(a->n_stream, b->n_stream);
	assert_int_equal(a->n_done, b->n_done);
	assert_int_equal(a->n_dead, b->n_dead);
	assert_memory_equal(a, b, sizeof *a);
}

/* Rows handed to a queue_list callback, copied out of the statement. */
#define LISTED_MAX 16
struct listed {
	int n;
	struct {
		char state[16];
		char job_id[QUEUE_JOB_ID_MAX + 1];
		char kind[QUEUE_KIND_MAX + 1];
		char last_error[QUEUE_ERROR_MAX + 1];
		int64_t attempts, deliveries, finished_at;
	} r[LISTED_MAX];
};

static void collect(const struct job_row *row, void *arg)
{
	struct listed *l = arg;

	assert_true(l->n < LISTED_MAX);
	cpy(l->r[l->n].state, sizeof l->r[l->n].state, row->state);
	cpy(l->r[l->n].job_id, sizeof l->r[l->n].job_id, row->job_id);
	cpy(l->r[l->n].kind, sizeof l->r[l->n].kind, row->kind);
	cpy(l->r[l->n].last_error, sizeof l->r[l->n].last_error, row->last_error);
	l->r[l->n].attempts = row->attempts;
	l->r[l->n].deliveries = row->deliveries;
	l->r[l->n].finished_at = row->finished_at;
	l->n++;
}

static const struct queue_counts *stats_kind(const struct queue_counts *rows, int n,
					     const char *kind)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(rows[i].kind, kind) == 0)
			return &rows[i];
	return NULL;
}

/* ======================== enqueue ======================================== */

static void test_enqueue_mints_or_keeps_job_id(void **state)
{
	struct db *db = db_of(state);
	char a[QUEUE_JOB_ID_MAX + 1] = "", b[QUEUE_JOB_ID_MAX + 1] = "",
	     c[QUEUE_JOB_ID_MAX + 1] = "";
	struct job *j;

	assert_int_equal(enq(db, "noop", NULL, NULL, 0, 0, a), SD_OK);
	assert_int_equal(enq(db, "noop", NULL, NULL, 0, 0, b), SD_OK);
	assert_true(strlen(a) > 0);
	assert_int_equal(queue_job_id_valid(a), SD_OK);
	assert_string_not_equal(a, b);
	assert_int_equal(enq(db, "noop", "{\"x\": 1}", "order-42/render", 0, 0, c), SD_OK);
	assert_string_equal(c, "order-42/render");

	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, a);
	assert_string_equal(j->payload, "{}");	/* payload NULL means {} */
	job_free(j);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, b);
	job_free(j);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, "order-42/render");
	assert_string_equal(j->kind, "noop");
	assert_string_equal(j->payload, "{\"x\": 1}");
	assert_int_equal(j->created_at, T0);
	job_free(j);

	/* a given id that is not a valid id is refused, not stored */
	assert_int_equal(enq(db, "noop", NULL, "has space", 0, 0, NULL), SD_INVALID);
	assert_int_equal(n_stream(db), 3);
}

static void test_enqueue_delay_schedules_until_clock_passes(void **state)
{
	struct db *db = db_of(state);
	struct queue_counts *rows, total;
	struct job *j;
	int n;

	assert_int_equal(enq(db, "noop", NULL, "later", 5000, 0, NULL), SD_OK);
	assert_int_equal(queue_stats(db, &rows, &n, &total), SD_OK);
	assert_int_equal(total.scheduled, 1);
	assert_int_equal(total.ready, 0);
	free(rows);
	assert_null(claim1(db, "w", 0));
	clock_fake_advance(4999);
	assert_null(claim1(db, "w", 0));
	clock_fake_advance(1);
	assert_int_equal(queue_stats(db, &rows, &n, &total), SD_OK);
	assert_int_equal(total.scheduled, 0);
	assert_int_equal(total.ready, 1);
	free(rows);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, "later");
	job_free(j);

	assert_int_equal(enq(db, "noop", NULL, NULL, -1, 0, NULL), SD_INVALID);
}

static void test_claim_order_priority_visible_time_id(void **state)
{
	struct db *db = db_of(state);
	const char *want[] = { "e", "c", "d", "b", "a" };
	struct job *j;
	int i;

	/* ids a=1 .. e=5; the expected order is none of id order, enqueue order
	 * or visible order alone */
	assert_int_equal(enq(db, "noop", NULL, "a", 0, 5, NULL), SD_OK);
	assert_int_equal(enq(db, "noop", NULL, "b", 10, 0, NULL), SD_OK);
	assert_int_equal(enq(db, "noop", NULL, "c", 0, 0, NULL), SD_OK);
	assert_int_equal(enq(db, "noop", NULL, "d", 0, 0, NULL), SD_OK);
	assert_int_equal(enq(db, "noop", NULL, "e", 20, -1, NULL), SD_OK);
	clock_fake_advance(20);
	for (i = 0; i < 5; i++) {
		j = claim1(db, "w", 0);
		assert_non_null(j);
		assert_string_equal(j->job_id, want[i]);
		job_free(j);
	}
	assert_null(claim1(db, "w", 0));
}

static void test_enqueue_bad_payload_writes_nothing(void **state)
{
	struct db *db = db_of(state);
	const char *bad[] = { "not json", "[1]", "1", "\"s\"", "null", "{\"a\":", "{} x", "" };
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err_clear();
		assert_int_equal(enq(db, "noop", bad[i], NULL, 0, 0, NULL), SD_INVALID);
		assert_true(strlen(err_msg()) > 0);
		assert_int_equal(n_stream(db), 0);
	}
	assert_false(db_in_tx(db));
	assert_int_equal(tu_count(((struct tu_env *)*state)->db_path,
				  "SELECT count(*) FROM stream"), 0);
	/* whitespace before the object is fine */
	assert_int_equal(enq(db, "noop", " \n{\"a\": [1]}", NULL, 0, 0, NULL), SD_OK);
	assert_int_equal(n_stream(db), 1);
}

/* Inside a caller's transaction a refused payload is refused alone: the
 * caller's other writes still commit, whichever check caught it. */
static void test_enqueue_bad_payload_in_caller_tx(void **state)
{
	struct tu_env *env = *state;
	struct db *db = env->db;

	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(enq(db, "noop", NULL, "kept-1", 0, 0, NULL), SD_OK);
	assert_int_equal(enq(db, "noop", "[1]", NULL, 0, 0, NULL), SD_INVALID);
	assert_int_equal(enq(db, "noop", "{\"a\":", NULL, 0, 0, NULL), SD_INVALID);
	assert_true(db_in_tx(db));
	assert_int_equal(enq(db, "noop", NULL, "kept-2", 0, 0, NULL), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM stream"), 2);
}

static void test_enqueue_bad_kind_refused(void **state)
{
	struct db *db = db_of(state);
	char long_kind[QUEUE_KIND_MAX + 2];
	const char *bad[] = { "", "Upper", "has space", "semi;colon", "tab\t", "é", long_kind };
	size_t i;

	memset(long_kind, 'k', sizeof long_kind - 1);
	long_kind[sizeof long_kind - 1] = '\0';
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(queue_kind_valid(bad[i]), SD_INVALID);
		assert_int_equal(enq(db, bad[i], NULL, NULL, 0, 0, NULL), SD_INVALID);
	}
	assert_int_equal(enq(db, NULL, NULL, NULL, 0, 0, NULL), SD_INVALID);
	assert_int_equal(n_stream(db), 0);
	long_kind[QUEUE_KIND_MAX] = '\0';	/* exactly the longest allowed */
	assert_int_equal(enq(db, long_kind, NULL, NULL, 0, 0, NULL), SD_OK);
	assert_int_equal(enq(db, "a-b_c.9", NULL, NULL, 0, 0, NULL), SD_OK);
	assert_int_equal(n_stream(db), 2);
}

/* ======================== claim ========================================== */

static void test_claim_up_to_n_in_one_call(void **state)
{
	struct db *db = db_of(state);
	struct job *out[3];
	struct srow r;
	int64_t token;
	int i, got;

	for (i = 0; i < 5; i++)
		assert_int_equal(enq(db, "noop", NULL, NULL, 0, 0, NULL), SD_OK);
	got = claim(db, "w1", 3, 0, out);
	assert_int_equal(got, 3);
	token = out[0]->lease_token;
	for (i = 0; i < got; i++) {
		/* one claim, one token; the stored row carries it */
		assert_int_equal(out[i]->lease_token, token);
		assert_int_equal(out[i]->lease_until, T0 + QUEUE_LEASE_MS_DEFAULT);
		stream_row(db, out[i]->id, &r);
		assert_int_equal(r.token, token);
		assert_string_equal(r.leased_by, "w1");
		assert_int_equal(r.visible_at, T0 + QUEUE_LEASE_MS_DEFAULT);
		job_free(out[i]);
	}
	got = claim(db, "w1", 3, 0, out);
	assert_int_equal(got, 2);
	for (i = 0; i < got; i++)
		job_free(out[i]);
	assert_int_equal(claim(db, "w1", 3, 0, out), 0);
	assert_int_equal(queue_claim(db, "w1", 0, 0, out, &got), SD_INVALID);
	assert_int_equal(got, 0);
}

static void test_claim_new_token_and_delivery_each_time(void **state)
{
	struct db *db = db_of(state);
	struct job *j;
	int64_t tokens[4];
	struct srow r;
	int i, k;

	assert_int_equal(enq(db, "noop", NULL, "x", 0, 0, NULL), SD_OK);
	for (i = 0; i < 4; i++) {
		j = claim1(db, "w", 0);
		assert_non_null(j);
		assert_int_equal(j->deliveries, i + 1);
		assert_true(j->lease_token > 0);
		stream_row(db, j->id, &r);
		assert_int_equal(r.deliveries, i + 1);
		assert_int_equal(r.token, j->lease_token);
		tokens[i] = j->lease_token;
		for (k = 0; k < i; k++)
			assert_true(tokens[k] != tokens[i]);
		/* give it back so the next claim is a new one on the same entry */
		assert_int_equal(queue_release(db, j->id, j->lease_token), SD_OK);
		job_free(j);
	}
}

static void test_claim_lease_from_kind_policy_and_argument(void **state)
{
	struct db *db = db_of(state);
	struct kind_policy p;
	struct job *out[2];
	struct job *j;
	struct srow r;
	int i;

	queue_policy_default(&p);
	p.lease_ms = 5000;
	assert_int_equal(queue_policy_set("slow", &p), SD_OK);
	assert_int_equal(enq(db, "slow", NULL, "s", 0, 0, NULL), SD_OK);
	assert_int_equal(enq(db, "noop", NULL, "n", 0, 0, NULL), SD_OK);

	/* lease_ms 0: each kind's own lease, in one claim */
	assert_int_equal(claim(db, "w", 2, 0, out), 2);
	for (i = 0; i < 2; i++) {
		int64_t want = strcmp(out[i]->kind, "slow") == 0 ? 5000 : QUEUE_LEASE_MS_DEFAULT;
		assert_int_equal(out[i]->lease_until, T0 + want);
		stream_row(db, out[i]->id, &r);
		assert_int_equal(r.visible_at, T0 + want);
		job_free(out[i]);
	}
	clock_fake_advance(4999);
	assert_null(claim1(db, "w2", 0));
	clock_fake_advance(1);
	j = claim1(db, "w2", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, "s");

	/* the argument overrides the kind's policy */
	assert_int_equal(queue_release(db, j->id, j->lease_token), SD_OK);
	job_free(j);
	j = claim1(db, "w3", 1234);
	assert_non_null(j);
	assert_string_equal(j->job_id, "s");
	assert_int_equal(j->lease_until, clock_now_ms() + 1234);
	stream_row(db, j->id, &r);
	assert_int_equal(r.visible_at, clock_now_ms() + 1234);
	job_free(j);
}

/* ======================== lease expiry and fencing ======================= */

static void test_lease_expiry_reclaim_and_stale_calls(void **state)
{
	struct db *db = db_of(state);
	struct job *j1, *j2;
	struct srow before, after;
	int64_t until = -7;
	int dead = -1;

	assert_int_equal(enq(db, "noop", NULL, "job-1", 0, 0, NULL), SD_OK);
	j1 = claim1(db, "w1", 0);
	assert_non_null(j1);
	assert_int_equal(j1->deliveries, 1);
	assert_int_equal(j1->lease_until, T0 + 60000);

	clock_fake_advance(59999);
	assert_null(claim1(db, "w2", 0));
	clock_fake_advance(1);
	j2 = claim1(db, "w2", 0);	/* the reclaim */
	assert_non_null(j2);
	assert_int_equal(j2->id, j1->id);
	assert_string_equal(j2->job_id, "job-1");
	assert_true(j2->lease_token != j1->lease_token);
	assert_int_equal(j2->deliveries, 2);
	assert_int_equal(j2->expiries, 1);
	assert_int_equal(j2->lease_until, T0 + 120000);

	/* the first worker wakes up: everything it says is stale */
	stream_row(db, j1->id, &before);
	assert_true(before.found);
	assert_string_equal(before.leased_by, "w2");

	assert_int_equal(queue_ack(db, j1->id, j1->lease_token), SD_STALE);
	stream_row(db, j1->id, &after);
	assert_same_row(&before, &after);

	assert_int_equal(queue_extend(db, j1->id, j1->lease_token, 600000, &until), SD_STALE);
	assert_int_equal(until, -7);
	stream_row(db, j1->id, &after);
	assert_same_row(&before, &after);

	assert_int_equal(queue_retry_later(db, j1->id, j1->lease_token, 1000), SD_STALE);
	stream_row(db, j1->id, &after);
	assert_same_row(&before, &after);

	assert_int_equal(queue_fail(db, j1, "late", 0, &dead), SD_STALE);
	assert_int_equal(dead, 0);
	stream_row(db, j1->id, &after);
	assert_same_row(&before, &after);

	assert_int_equal(queue_fail(db, j1, "late", 1, &dead), SD_STALE);
	assert_int_equal(dead, 0);
	stream_row(db, j1->id, &after);
	assert_same_row(&before, &after);

	assert_int_equal(queue_release(db, j1->id, j1->lease_token), SD_STALE);
	stream_row(db, j1->id, &after);
	assert_same_row(&before, &after);
	assert_false(db_in_tx(db));

	/* the second worker's ack lands, once */
	assert_int_equal(queue_ack(db, j2->id, j2->lease_token), SD_OK);
	assert_int_equal(n_stream(db), 0);
	assert_int_equal(n_done(db, "job-1"), 1);
	assert_int_equal(queue_ack(db, j2->id, j2->lease_token), SD_STALE);
	assert_int_equal(queue_ack(db, j1->id, j1->lease_token), SD_STALE);
	assert_int_equal(n_done(db, "job-1"), 1);
	assert_int_equal(n_dead(db, NULL), 0);
	job_free(j1);
	job_free(j2);
}

/* ======================== ack, extend, retry_later, release ============== */

static const char SQL_DONE_ROW[] =
	"SELECT finished_at FROM done_jobs WHERE job_id = ?2 AND worker = 'w1' AND deliveries = ?1 "
	"AND kind = 'noop' AND payload = '{\"k\": 2}' AND created_at = 1000000000";

static void test_ack_moves_to_done(void **state)
{
	struct db *db = db_of(state);
	struct job *j;

	assert_int_equal(enq(db, "noop", "{\"k\": 2}", "acked", 0, 0, NULL), SD_OK);
	j = claim1(db, "w1", 0);
	assert_non_null(j);
	clock_fake_advance(250);
	assert_int_equal(queue_ack(db, j->id, j->lease_token), SD_OK);
	assert_int_equal(n_stream(db), 0);
	assert_int_equal(n_done(db, NULL), 1);
	assert_int_equal(q_int(db, SQL_DONE_ROW, 1, "acked"), T0 + 250);
	job_free(j);
	/* the entry is gone: nothing comes back after the old lease would end */
	clock_fake_advance(10 * 60000);
	assert_null(claim1(db, "w2", 0));
}

static void test_extend_pushes_lease(void **state)
{
	struct db *db = db_of(state);
	struct job *j, *j2;
	int64_t until = 0;
	struct srow r;

	assert_int_equal(enq(db, "noop", NULL, "long", 0, 0, NULL), SD_OK);
	j = claim1(db, "w1", 0);
	assert_non_null(j);
	clock_fake_advance(50000);
	assert_int_equal(queue_extend(db, j->id, j->lease_token, 60000, &until), SD_OK);
	assert_int_equal(until, T0 + 110000);
	stream_row(db, j->id, &r);
	assert_int_equal(r.visible_at, T0 + 110000);
	assert_int_equal(r.token, j->lease_token);

	clock_fake_advance(10000);	/* where the first lease would have ended */
	assert_null(claim1(db, "w2", 0));
	clock_fake_advance(49999);
	assert_null(claim1(db, "w2", 0));
	clock_fake_advance(1);
	j2 = claim1(db, "w2", 0);
	assert_non_null(j2);
	assert_string_equal(j2->job_id, "long");
	assert_int_equal(queue_extend(db, j2->id, j2->lease_token, 0, NULL), SD_INVALID);
	job_free(j);
	job_free(j2);
}

static void test_retry_later_snoozes_without_attempt(void **state)
{
	struct db *db = db_of(state);
	struct queue_counts *rows, total;
	struct job *j;
	struct srow r;
	int n;

	assert_int_equal(enq(db, "noop", NULL, "snooze", 0, 0, NULL), SD_OK);
	j = claim1(db, "w1", 0);
	assert_non_null(j);
	assert_int_equal(queue_retry_later(db, j->id, j->lease_token, -1), SD_INVALID);
	assert_int_equal(queue_retry_later(db, j->id, j->lease_token, 30000), SD_OK);
	stream_row(db, j->id, &r);
	assert_int_equal(r.visible_at, T0 + 30000);
	assert_true(r.token_null);
	assert_int_equal(r.attempts, 0);
	assert_int_equal(queue_stats(db, &rows, &n, &total), SD_OK);
	assert_int_equal(total.scheduled, 1);
	assert_int_equal(total.leased, 0);
	free(rows);
	/* the old token no longer names a lease */
	assert_int_equal(queue_ack(db, j->id, j->lease_token), SD_STALE);
	job_free(j);

	clock_fake_advance(29999);
	assert_null(claim1(db, "w1", 0));
	clock_fake_advance(1);
	j = claim1(db, "w1", 0);
	assert_non_null(j);
	assert_int_equal(j->attempts, 0);
	assert_int_equal(j->expiries, 0);	/* a snooze is not an expired lease */
	assert_int_equal(j->deliveries, 2);
	job_free(j);
}

static void test_release_ready_now(void **state)
{
	struct db *db = db_of(state);
	struct job *j, *j2;

	assert_int_equal(enq(db, "noop", NULL, "given-back", 0, 0, NULL), SD_OK);
	j = claim1(db, "w1", 0);
	assert_non_null(j);
	clock_fake_advance(100);
	assert_int_equal(queue_release(db, j->id, j->lease_token), SD_OK);
	j2 = claim1(db, "w2", 0);	/* no clock movement needed */
	assert_non_null(j2);
	assert_string_equal(j2->job_id, "given-back");
	assert_int_equal(j2->attempts, 0);
	assert_int_equal(j2->expiries, 0);
	assert_int_equal(j2->deliveries, 2);
	assert_int_equal(queue_release(db, j->id, j->lease_token), SD_STALE);
	job_free(j);
	job_free(j2);
}

/* leased_at: the claim's time while leased (the dashboard's lease age), set
 * again by a reclaim, kept by extend, NULL once the lease is given up. */
static void collect_leased_at(const struct job_row *row, void *arg)
{
	int64_t *v = arg;

	*v = row->leased_at;
}

static int64_t leased_at(struct db *db, int64_t id)
{
	struct srow r;

	stream_row(db, id, &r);
	assert_true(r.found);
	return r.leased_at;
}

/* After ms, claim the one entry; its leased_at is the claim's time. */
static struct job *claim_after(struct db *db, int64_t ms)
{
	struct job *j;

	clock_fake_advance(ms);
	j = claim1(db, "w1", 0);
	assert_non_null(j);
	assert_int_equal(leased_at(db, j->id), clock_now_ms());
	return j;
}

static void test_leased_at_claim_to_unlease(void **state)
{
	struct db *db = db_of(state);
	struct job *j, *j2;
	struct srow r;
	int64_t listed = -7;
	int dead = -1;

	assert_int_equal(enq(db, "noop", NULL, "aged", 0, 0, NULL), SD_OK);
	assert_int_equal(leased_at(db, 1), -1);	/* never leased */
	j = claim_after(db, 500);
	assert_int_equal(leased_at(db, j->id), T0 + 500);
	assert_int_equal(queue_list(db, "leased", NULL, 0, collect_leased_at, &listed), SD_OK);
	assert_int_equal(listed, T0 + 500);

	/* extend moves the lease's end, not its start */
	clock_fake_advance(30000);
	assert_int_equal(queue_extend(db, j->id, j->lease_token, 60000, NULL), SD_OK);
	stream_row(db, j->id, &r);
	assert_int_equal(r.visible_at, T0 + 90500);
	assert_int_equal(r.leased_at, T0 + 500);

	/* expired: listed as ready with no lease time; the reclaim sets it anew */
	clock_fake_advance(60000);
	listed = -7;
	assert_int_equal(queue_list(db, "ready", NULL, 0, collect_leased_at, &listed), SD_OK);
	assert_int_equal(listed, 0);
	j2 = claim_after(db, 0);
	assert_int_equal(j2->expiries, 1);
	assert_int_equal(leased_at(db, j2->id), T0 + 90500);
	job_free(j);

	/* release, retry_later and a retried fail each clear it */
	assert_int_equal(queue_release(db, j2->id, j2->lease_token), SD_OK);
	assert_int_equal(leased_at(db, j2->id), -1);
	job_free(j2);

	j = claim_after(db, 100);
	assert_int_equal(queue_retry_later(db, j->id, j->lease_token, 1000), SD_OK);
	assert_int_equal(leased_at(db, j->id), -1);
	job_free(j);

	j = claim_after(db, 1000);
	assert_int_equal(queue_fail(db, j, "flaky", 0, &dead), SD_OK);
	assert_int_equal(dead, 0);
	stream_row(db, j->id, &r);
	assert_true(r.token_null);
	assert_int_equal(r.leased_at, -1);
	job_free(j);
}

/* ======================== fail =========================================== */

static void test_fail_transient_backoff_then_dead(void **state)
{
	struct db *db = db_of(state);
	struct kind_policy p;
	struct listed l = { 0 };
	struct job *j;
	struct srow r;
	int64_t base = 1000, cap = 3000, d;
	int attempt, dead = -1;
	char err[32];

	queue_policy_default(&p);
	p.backoff_base_ms = base;
	p.backoff_cap_ms = cap;
	p.max_attempts = 4;
	assert_int_equal(queue_policy_set("flaky", &p), SD_OK);
	assert_int_equal(enq(db, "flaky", NULL, "f", 0, 0, NULL), SD_OK);

	j = claim1(db, "w", 0);
	assert_non_null(j);
	for (attempt = 1; attempt < 4; attempt++) {
		int64_t now = clock_now_ms();

		assert_int_equal(j->attempts, attempt - 1);
		assert_int_equal(j->expiries, 0);
		snprintf(err, sizeof err, "error %d", attempt);
		assert_int_equal(queue_fail(db, j, err, 0, &dead), SD_OK);
		assert_int_equal(dead, 0);
		stream_row(db, j->id, &r);
		d = base << (attempt - 1);
		if (d > cap)
			d = cap;
		assert_true(r.visible_at - now >= d / 2);
		assert_true(r.visible_at - now <= d);
		assert_int_equal(r.attempts, attempt);
		assert_true(r.token_null);
		assert_string_equal(r.last_error, err);
		job_free(j);

		clock_fake_advance(r.visible_at - now - 1);
		assert_null(claim1(db, "w", 0));
		clock_fake_advance(1);
		j = claim1(db, "w", 0);
		assert_non_null(j);
	}
	assert_int_equal(j->attempts, 3);
	assert_int_equal(queue_fail(db, j, "error 4", 0, &dead), SD_OK);
	assert_int_equal(dead, 1);
	assert_int_equal(n_stream(db), 0);
	assert_int_equal(queue_list(db, "dead", NULL, 0, collect, &l), SD_OK);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.r[0].job_id, "f");
	assert_string_equal(l.r[0].state, "dead");
	assert_non_null(strstr(l.r[0].last_error, "error 4"));
	assert_int_equal(l.r[0].attempts, 4);
	assert_int_equal(l.r[0].finished_at, clock_now_ms());
	job_free(j);
}

static void test_fail_permanent_dead_at_once(void **state)
{
	struct db *db = db_of(state);
	struct listed l = { 0 };
	struct job *j;
	int dead = -1;

	assert_int_equal(enq(db, "noop", NULL, "p", 0, 0, NULL), SD_OK);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_int_equal(queue_fail(db, j, "bad address", 1, &dead), SD_OK);
	assert_int_equal(dead, 1);
	assert_int_equal(n_stream(db), 0);
	assert_int_equal(queue_list(db, "dead", NULL, 0, collect, &l), SD_OK);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.r[0].job_id, "p");
	assert_string_equal(l.r[0].last_error, "bad address");
	assert_int_equal(l.r[0].attempts, 1);
	assert_int_equal(queue_ack(db, j->id, j->lease_token), SD_STALE);
	clock_fake_advance(24LL * 3600 * 1000);
	assert_null(claim1(db, "w", 0));
	job_free(j);
}

/* ======================== poison ========================================= */

static void test_poison_after_max_deliveries(void **state)
{
	struct db *db = db_of(state);
	struct kind_policy p;
	struct listed l = { 0 };
	struct job *j;
	int i;

	queue_policy_default(&p);
	p.max_deliveries = 3;
	p.lease_ms = 1000;
	assert_int_equal(queue_policy_set("crashy", &p), SD_OK);
	assert_int_equal(enq(db, "crashy", NULL, "poison-pill", 0, 0, NULL), SD_OK);

	/* three workers take it and die holding it */
	for (i = 0; i < 3; i++) {
		j = claim1(db, "w", 0);
		assert_non_null(j);
		assert_int_equal(j->deliveries, i + 1);
		assert_int_equal(j->expiries, i);
		job_free(j);
		clock_fake_advance(1000);
	}
	assert_null(claim1(db, "w", 0));
	assert_int_equal(n_stream(db), 0);
	assert_int_equal(queue_list(db, "dead", NULL, 0, collect, &l), SD_OK);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.r[0].job_id, "poison-pill");
	assert_non_null(strstr(l.r[0].last_error, "poison"));
	assert_int_equal(l.r[0].attempts, 0);
}

/* A claim that fails part-way (here a trigger refuses the per-kind lease of
 * one entry) rolls the whole claim back and frees each job once. */
static void test_failed_claim_changes_nothing(void **state)
{
	struct db *db = db_of(state);
	struct kind_policy p;
	struct srow before[3], after[3];
	struct job *out[3] = { NULL, NULL, NULL };
	struct job *j;
	int i, got = -1;

	queue_policy_default(&p);
	p.max_deliveries = 1;
	assert_int_equal(queue_policy_set("pois", &p), SD_OK);
	p.lease_ms = 5000;
	assert_int_equal(queue_policy_set("slow", &p), SD_OK);

	assert_int_equal(enq(db, "pois", NULL, "p", 0, 0, NULL), SD_OK);
	j = claim1(db, "w", 1000);
	assert_non_null(j);
	job_free(j);
	clock_fake_advance(1000);	/* p's lease expired once: poison at the next claim */
	assert_int_equal(enq(db, "slow", NULL, "a", 0, 0, NULL), SD_OK);
	assert_int_equal(enq(db, "slow", NULL, "b", 0, 0, NULL), SD_OK);
	if (tu_pg())
		assert_int_equal(db_exec(db, "CREATE FUNCTION test_refuse() RETURNS trigger "
					 "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION "
					 "'test: lease refused'; END $$; "
					 "CREATE TRIGGER test_refuse_lease BEFORE UPDATE OF visible_at "
					 "ON stream FOR EACH ROW WHEN (NEW.job_id = 'b' AND "
					 "NEW.lease_token IS NOT DISTINCT FROM OLD.lease_token) "
					 "EXECUTE FUNCTION test_refuse()"), SD_OK);
	else
		assert_int_equal(db_exec(db, "CREATE TRIGGER test_refuse_lease BEFORE UPDATE OF "
					 "visible_at ON stream WHEN NEW.job_id = 'b' AND "
					 "NEW.lease_token IS OLD.lease_token "
					 "BEGIN SELECT RAISE(ABORT, 'test: lease refused'); END"), SD_OK);
	for (i = 0; i < 3; i++)
		stream_row(db, i + 1, &before[i]);

	assert_int_not_equal(queue_claim(db, "w", 3, 0, out, &got), SD_OK);
	assert_int_equal(got, 0);
	assert_false(db_in_tx(db));
	for (i = 0; i < 3; i++) {
		assert_null(out[i]);
		stream_row(db, i + 1, &after[i]);
		assert_same_row(&before[i], &after[i]);
	}

	assert_int_equal(db_exec(db, tu_pg() ? "DROP TRIGGER test_refuse_lease ON stream" :
				 "DROP TRIGGER test_refuse_lease"), SD_OK);
	assert_int_equal(claim(db, "w", 3, 0, out), 2);
	for (i = 0; i < 2; i++) {
		assert_string_equal(out[i]->kind, "slow");
		job_free(out[i]);
	}
	assert_int_equal(n_dead(db, "p"), 1);
}

/* An ack whose second statement fails leaves no copy in done_jobs: the
 * copy and the delete commit together or not at all. */
static void test_failed_ack_changes_nothing(void **state)
{
	struct db *db = db_of(state);
	struct srow before, after;
	struct job *j;

	assert_int_equal(enq(db, "noop", NULL, "half-acked", 0, 0, NULL), SD_OK);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	if (tu_pg())
		assert_int_equal(db_exec(db, "CREATE FUNCTION test_refuse() RETURNS trigger "
					 "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION "
					 "'test: delete refused'; END $$; "
					 "CREATE TRIGGER test_refuse_delete BEFORE DELETE ON stream "
					 "FOR EACH ROW EXECUTE FUNCTION test_refuse()"), SD_OK);
	else
		assert_int_equal(db_exec(db, "CREATE TRIGGER test_refuse_delete BEFORE DELETE ON "
					 "stream BEGIN SELECT RAISE(ABORT, 'test: delete refused'); "
					 "END"), SD_OK);
	stream_row(db, j->id, &before);
	assert_int_not_equal(queue_ack(db, j->id, j->lease_token), SD_OK);
	assert_false(db_in_tx(db));
	stream_row(db, j->id, &after);
	assert_same_row(&before, &after);
	assert_int_equal(n_done(db, NULL), 0);

	assert_int_equal(db_exec(db, tu_pg() ? "DROP TRIGGER test_refuse_delete ON stream" :
				 "DROP TRIGGER test_refuse_delete"), SD_OK);
	assert_int_equal(queue_ack(db, j->id, j->lease_token), SD_OK);
	assert_int_equal(n_done(db, "half-acked"), 1);
	job_free(j);
}

/* ======================== backoff ======================================== */

static void test_backoff_grows_capped_jittered(void **state)
{
	struct kind_policy p;
	int64_t a, d, v, lo, hi;
	int i;

	(void)state;
	queue_policy_default(&p);
	p.backoff_base_ms = 1000;
	p.backoff_cap_ms = 60000;
	for (a = 1; a <= 70; a++) {
		d = a <= 7 ? 1000LL << (a - 1) : 60000;
		if (d > 60000)
			d = 60000;
		lo = INT64_MAX;
		hi = INT64_MIN;
		for (i = 0; i < 200; i++) {
			v = queue_backoff_ms(&p, a);
			assert_true(v >= d / 2);
			assert_true(v <= d);
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
		/* jitter: 200 draws over [d/2, d] do not all land on one value */
		assert_true(hi > lo);
	}
	/* no overflow for absurd attempt counts */
	v = queue_backoff_ms(&p, INT64_MAX);
	assert_true(v >= 30000 && v <= 60000);

	p.backoff_base_ms = 0;
	p.backoff_cap_ms = 0;
	assert_int_equal(queue_backoff_ms(&p, 3), 0);
}

/* ======================== dead letters =================================== */

static void test_dead_list_retry_purge(void **state)
{
	struct db *db = db_of(state);
	struct kind_policy p;
	struct listed l = { 0 };
	struct job *j;
	int64_t n = -1;
	int dead = -1;

	queue_policy_default(&p);
	p.max_attempts = 2;
	p.backoff_base_ms = 10;
	p.backoff_cap_ms = 10;
	assert_int_equal(queue_policy_set("mail", &p), SD_OK);

	/* x1 dies after two failed attempts, x2 at once */
	assert_int_equal(enq(db, "mail", NULL, "x1", 0, 0, NULL), SD_OK);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_int_equal(queue_fail(db, j, "smtp 451", 0, &dead), SD_OK);
	assert_int_equal(dead, 0);
	job_free(j);
	clock_fake_advance(10);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_int_equal(queue_fail(db, j, "smtp 451", 0, &dead), SD_OK);
	assert_int_equal(dead, 1);
	job_free(j);
	assert_int_equal(enq(db, "render", NULL, "x2", 0, 0, NULL), SD_OK);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_int_equal(queue_fail(db, j, "no template", 1, &dead), SD_OK);
	job_free(j);

	assert_int_equal(queue_list(db, "dead", NULL, 0, collect, &l), SD_OK);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.r[0].job_id, "x1");
	assert_int_equal(l.r[0].attempts, 2);
	assert_non_null(strstr(l.r[0].last_error, "smtp 451"));
	assert_string_equal(l.r[1].job_id, "x2");
	assert_string_equal(l.r[1].last_error, "no template");
	memset(&l, 0, sizeof l);
	assert_int_equal(queue_list(db, "dead", "render", 0, collect, &l), SD_OK);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.r[0].job_id, "x2");
	memset(&l, 0, sizeof l);
	assert_int_equal(queue_list(db, "ready", NULL, 0, collect, &l), SD_OK);
	assert_int_equal(l.n, 0);

	/* retry: the same job, ready now, a fresh count of attempts */
	assert_int_equal(queue_dead_retry(db, "x1", &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(n_dead(db, "x1"), 0);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, "x1");
	assert_string_equal(j->kind, "mail");
	assert_int_equal(j->attempts, 0);
	assert_int_equal(j->expiries, 0);
	assert_int_equal(queue_ack(db, j->id, j->lease_token), SD_OK);
	assert_int_equal(n_done(db, "x1"), 1);
	job_free(j);

	/* purge: the rest are gone */
	assert_int_equal(queue_dead_purge(db, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(n_dead(db, NULL), 0);
	memset(&l, 0, sizeof l);
	assert_int_equal(queue_list(db, "dead", NULL, 0, collect, &l), SD_OK);
	assert_int_equal(l.n, 0);
	assert_int_equal(queue_dead_purge(db, &n), SD_OK);
	assert_int_equal(n, 0);
}

static void test_dead_retry_unknown_not_found(void **state)
{
	struct db *db = db_of(state);
	int64_t n = -1;

	assert_int_equal(enq(db, "noop", NULL, "alive", 0, 0, NULL), SD_OK);
	assert_int_equal(queue_dead_retry(db, "nobody", &n), SD_NOT_FOUND);
	assert_int_equal(n, 0);
	/* a job that is in the stream is not a dead letter either */
	assert_int_equal(queue_dead_retry(db, "alive", &n), SD_NOT_FOUND);
	assert_int_equal(n_stream(db), 1);
	assert_false(db_in_tx(db));
	assert_int_equal(queue_dead_retry(db, "", &n), SD_INVALID);
}

/* ======================== prune ========================================== */

static const char SQL_N_OLDER[] = "SELECT count(*) FROM done_jobs WHERE finished_at < ?1";

static void test_prune_done_batches_keeps_totals(void **state)
{
	struct db *db = db_of(state);
	struct queue_counts *rows, total;
	const int64_t hour = 3600 * 1000;
	int64_t n = -1, cutoff;
	int nrows;

	make_done(db, "a", "a1");
	make_done(db, "b", "b1");
	make_done(db, "a", "a2");
	make_done(db, "b", "b2");
	make_done(db, "a", "a3");
	clock_fake_advance(hour);
	make_done(db, "a", "a4");
	make_done(db, "a", "a5");
	cutoff = clock_now_ms() - hour / 2;

	assert_int_equal(queue_prune_done(db, hour / 2, 0, &n), SD_INVALID);
	assert_int_equal(queue_prune_done(db, -1, 10, &n), SD_INVALID);

	assert_int_equal(queue_prune_done(db, hour / 2, 2, &n), SD_OK);
	assert_int_equal(n, 2);
	assert_int_equal(n_done(db, NULL), 5);
	/* the oldest go first */
	assert_int_equal(n_done(db, "a1"), 0);
	assert_int_equal(n_done(db, "b1"), 0);
	assert_int_equal(n_done(db, "a2"), 1);
	assert_int_equal(q_int(db, SQL_N_TOTALS, 0, "a"), 1);
	assert_int_equal(q_int(db, SQL_N_TOTALS, 0, "b"), 1);

	assert_int_equal(queue_stats(db, &rows, &nrows, &total), SD_OK);
	assert_int_equal(total.done, 7);
	assert_int_equal(stats_kind(rows, nrows, "a")->done, 5);
	assert_int_equal(stats_kind(rows, nrows, "b")->done, 2);
	free(rows);

	assert_int_equal(queue_prune_done(db, hour / 2, 2, &n), SD_OK);
	assert_int_equal(n, 2);
	assert_int_equal(queue_prune_done(db, hour / 2, 2, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(queue_prune_done(db, hour / 2, 2, &n), SD_OK);
	assert_int_equal(n, 0);
	/* only the young ones are left, and none older than the cut-off */
	assert_int_equal(n_done(db, NULL), 2);
	assert_int_equal(n_done(db, "a4"), 1);
	assert_int_equal(n_done(db, "a5"), 1);
	assert_int_equal(q_int(db, SQL_N_OLDER, cutoff, NULL), 0);
	assert_int_equal(q_int(db, SQL_N_TOTALS, 0, NULL), 5);

	assert_int_equal(queue_stats(db, &rows, &nrows, &total), SD_OK);
	assert_int_equal(total.done, 7);
	assert_int_equal(stats_kind(rows, nrows, "a")->done, 5);
	assert_int_equal(stats_kind(rows, nrows, "b")->done, 2);
	free(rows);

	/* pruning everything still leaves the counts */
	assert_int_equal(queue_prune_done(db, 0, 100, &n), SD_OK);
	assert_int_equal(n, 0);	/* finished_at == now is not older than now */
	clock_fake_advance(1);
	assert_int_equal(queue_prune_done(db, 0, 100, &n), SD_OK);
	assert_int_equal(n, 2);
	assert_int_equal(queue_stats(db, &rows, &nrows, &total), SD_OK);
	assert_int_equal(total.done, 7);
	assert_int_equal(stats_kind(rows, nrows, "a")->done, 5);
	free(rows);
}

/* ======================== stats ========================================== */

static void test_stats_by_state_and_kind(void **state)
{
	struct db *db = db_of(state);
	struct queue_counts *rows, total;
	const struct queue_counts *c;
	struct job *j;
	int64_t n;
	int nrows, dead;

	/* beta: one dead; gamma: two done, one of them pruned */
	assert_int_equal(enq(db, "beta", NULL, "b-dead", 0, 0, NULL), SD_OK);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_int_equal(queue_fail(db, j, "x", 1, &dead), SD_OK);
	job_free(j);
	make_done(db, "gamma", "g1");
	clock_fake_advance(1);
	assert_int_equal(queue_prune_done(db, 0, 10, &n), SD_OK);
	assert_int_equal(n, 1);
	make_done(db, "gamma", "g2");
	/* alpha: two ready, one leased; beta: one scheduled */
	assert_int_equal(enq(db, "alpha", NULL, "a1", 0, 0, NULL), SD_OK);
	assert_int_equal(enq(db, "alpha", NULL, "a2", 0, 0, NULL), SD_OK);
	assert_int_equal(enq(db, "alpha", NULL, "a3", 0, -1, NULL), SD_OK);
	assert_int_equal(enq(db, "beta", NULL, "b-later", 5000, 0, NULL), SD_OK);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, "a3");
	job_free(j);

	assert_int_equal(queue_stats(db, &rows, &nrows, &total), SD_OK);
	assert_int_equal(nrows, 3);
	assert_string_equal(rows[0].kind, "alpha");
	assert_string_equal(rows[1].kind, "beta");
	assert_string_equal(rows[2].kind, "gamma");
	c = &rows[0];
	assert_int_equal(c->ready, 2);
	assert_int_equal(c->scheduled, 0);
	assert_int_equal(c->leased, 1);
	assert_int_equal(c->dead, 0);
	assert_int_equal(c->done, 0);
	c = &rows[1];
	assert_int_equal(c->ready, 0);
	assert_int_equal(c->scheduled, 1);
	assert_int_equal(c->leased, 0);
	assert_int_equal(c->dead, 1);
	assert_int_equal(c->done, 0);
	c = &rows[2];
	assert_int_equal(c->ready + c->scheduled + c->leased + c->dead, 0);
	assert_int_equal(c->done, 2);
	assert_string_equal(total.kind, "");
	assert_int_equal(total.ready, 2);
	assert_int_equal(total.scheduled, 1);
	assert_int_equal(total.leased, 1);
	assert_int_equal(total.dead, 1);
	assert_int_equal(total.done, 2);
	free(rows);
	assert_int_equal(queue_pending(db, &n), SD_OK);
	assert_int_equal(n, 4);

	/* the state follows the clock: the lease and the delay run out */
	clock_fake_advance(60000);
	assert_int_equal(queue_stats(db, &rows, &nrows, &total), SD_OK);
	assert_int_equal(stats_kind(rows, nrows, "alpha")->ready, 3);
	assert_int_equal(stats_kind(rows, nrows, "alpha")->leased, 0);
	assert_int_equal(stats_kind(rows, nrows, "beta")->ready, 1);
	assert_int_equal(stats_kind(rows, nrows, "beta")->scheduled, 0);
	assert_int_equal(total.ready, 4);
	free(rows);
}

/* ======================== composing with the caller's transaction ======== */

static void test_calls_commit_with_caller_tx(void **state)
{
	struct tu_env *env = *state;
	struct db *db = env->db;
	struct job *j;
	int64_t n;

	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(enq(db, "noop", NULL, "t1", 0, 0, NULL), SD_OK);
	assert_int_equal(enq(db, "noop", NULL, "t2", 0, 1, NULL), SD_OK);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, "t1");
	assert_int_equal(queue_ack(db, j->id, j->lease_token), SD_OK);
	job_free(j);
	assert_true(db_in_tx(db));
	/* nothing is visible to another connection before the commit */
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM done_jobs"), 0);
	assert_int_equal(db_commit(db), SD_OK);
	assert_false(db_in_tx(db));
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM stream WHERE job_id = 't2'"), 1);
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM done_jobs WHERE job_id = 't1'"), 1);
	assert_int_equal(queue_pending(db, &n), SD_OK);
	assert_int_equal(n, 1);
}

static void test_calls_roll_back_with_caller_tx(void **state)
{
	struct tu_env *env = *state;
	struct db *db = env->db;
	struct job *j;
	int64_t n;
	int dead;

	assert_int_equal(enq(db, "noop", NULL, "before", 0, 0, NULL), SD_OK);
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(enq(db, "noop", NULL, "inside", 0, 0, NULL), SD_OK);
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, "before");
	assert_int_equal(queue_fail(db, j, "x", 1, &dead), SD_OK);
	assert_int_equal(dead, 1);
	job_free(j);
	db_rollback(db);
	assert_false(db_in_tx(db));

	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM stream"), 1);
	assert_int_equal(tu_count(env->db_path, "SELECT count(*) FROM dead_jobs"), 0);
	assert_int_equal(queue_pending(db, &n), SD_OK);
	assert_int_equal(n, 1);
	/* "before" is untouched: ready, never delivered */
	j = claim1(db, "w", 0);
	assert_non_null(j);
	assert_string_equal(j->job_id, "before");
	assert_int_equal(j->deliveries, 1);
	job_free(j);
	assert_null(claim1(db, "w", 0));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup, tu_teardown)
		T(test_enqueue_mints_or_keeps_job_id),
		T(test_enqueue_delay_schedules_until_clock_passes),
		T(test_claim_order_priority_visible_time_id),
		T(test_enqueue_bad_payload_writes_nothing),
		T(test_enqueue_bad_payload_in_caller_tx),
		T(test_enqueue_bad_kind_refused),
		T(test_claim_up_to_n_in_one_call),
		T(test_claim_new_token_and_delivery_each_time),
		T(test_claim_lease_from_kind_policy_and_argument),
		T(test_lease_expiry_reclaim_and_stale_calls),
		T(test_ack_moves_to_done),
		T(test_extend_pushes_lease),
		T(test_retry_later_snoozes_without_attempt),
		T(test_release_ready_now),
		T(test_leased_at_claim_to_unlease),
		T(test_fail_transient_backoff_then_dead),
		T(test_fail_permanent_dead_at_once),
		T(test_poison_after_max_deliveries),
		T(test_failed_claim_changes_nothing),
		T(test_failed_ack_changes_nothing),
		T(test_backoff_grows_capped_jittered),
		T(test_dead_list_retry_purge),
		T(test_dead_retry_unknown_not_found),
		T(test_prune_done_batches_keeps_totals),
		T(test_stats_by_state_and_kind),
		T(test_calls_commit_with_caller_tx),
		T(test_calls_roll_back_with_caller_tx),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
