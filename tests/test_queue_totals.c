/*
 * test_queue_totals.c: the counts the queue keeps as it goes (done_totals,
 * done_times: schema/sqlite/0005_totals.sql) against a full count of the tables,
 * after every kind of change, after a migration of a database that already
 * held rows; and the claim's order across priority levels, taken a level at
 * a time.
 *
 * The full count is the SQL the queue ran before it kept totals: every
 * answer of queue_stats, queue_count_by_state, queue_reclaims,
 * queue_done_since and queue_next_visible must equal it, row for row.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "db.h"
#include "queue.h"
#include "testutil.h"

/* ======================== the full count ================================= */

static const char SQL_FULL_STATS[] =
	"SELECT kind, sum(r), sum(s), sum(l), sum(d), sum(f) FROM ("
	" SELECT kind, visible_at <= ?1 AS r,"
	"  lease_token IS NULL AND visible_at > ?1 AS s,"
	"  lease_token IS NOT NULL AND visible_at > ?1 AS l, 0 AS d, 0 AS f FROM stream"
	" UNION ALL SELECT kind, 0, 0, 0, count(*), 0 FROM dead_jobs GROUP BY kind"
	" UNION ALL SELECT kind, 0, 0, 0, 0, count(*) FROM done_jobs GROUP BY kind"
	" UNION ALL SELECT kind, 0, 0, 0, 0, pruned FROM done_totals WHERE pruned > 0"
	") GROUP BY kind ORDER BY kind";
static const char SQL_FULL_RECLAIMS[] =
	"SELECT (SELECT coalesce(sum(expiries), 0) FROM stream) + "
	"(SELECT coalesce(sum(expiries), 0) FROM dead_jobs) + "
	"(SELECT coalesce(sum(max(deliveries - 1 - attempts, 0)), 0) FROM done_jobs)";
static const char SQL_FULL_DONE_SINCE[] = "SELECT count(*) FROM done_jobs WHERE finished_at > ?1";
static const char SQL_FULL_DEAD[] = "SELECT count(*) FROM dead_jobs";
static const char SQL_FULL_NEXT[] = "SELECT coalesce(min(visible_at), -1) FROM stream";
static const char SQL_TIMES_BAD[] =
	"SELECT (SELECT count(*) FROM done_times WHERE n <= 0) + "
	"abs((SELECT coalesce(sum(n), 0) FROM done_times) - (SELECT count(*) FROM done_jobs))";

static int64_t full_int(struct db *db, const char *sql, int64_t a1)
{
	struct db_stmt *st = db_stmt(db, sql);
	int64_t v = -1;
	int row = 0;

	assert_non_null(st);
	db_bind_int(st, 1, a1);
	assert_int_equal(db_step(st, &row), SD_OK);
	if (row)
		v = db_col_int(st, 0);
	db_reset(st);
	return v;
}

/* Every kept count equals its full count; `where` names the step. */
static void check_totals(struct db *db, const char *where)
{
	struct queue_counts *rows = NULL, total, c;
	struct db_stmt *st = db_stmt(db, SQL_FULL_STATS);
	int64_t now = clock_now_ms(), v, since[] = { 0, now - 60000, now - 1500, now - 1, now };
	int n = 0, i = 0, row = 0;
	size_t k;

	assert_int_equal(queue_stats(db, &rows, &n, &total), SD_OK);
	assert_non_null(st);
	db_bind_int(st, 1, now);
	for (;;) {
		assert_int_equal(db_step(st, &row), SD_OK);
		if (!row)
			break;
		if (i >= n)
			fail_msg("%s: queue_stats lists %d kinds, the full count more", where, n);
		if (strcmp(rows[i].kind, db_col_text(st, 0)) != 0 || rows[i].ready != db_col_int(st, 1) ||
		    rows[i].scheduled != db_col_int(st, 2) || rows[i].leased != db_col_int(st, 3) ||
		    rows[i].dead != db_col_int(st, 4) || rows[i].done != db_col_int(st, 5))
			fail_msg("%s: kind %s: kept r%lld s%lld l%lld dead %lld done %lld, counted "
				 "%s r%lld s%lld l%lld dead %lld done %lld", where, rows[i].kind,
				 (long long)rows[i].ready, (long long)rows[i].scheduled,
				 (long long)rows[i].leased, (long long)rows[i].dead,
				 (long long)rows[i].done, db_col_text(st, 0),
				 (long long)db_col_int(st, 1), (long long)db_col_int(st, 2),
				 (long long)db_col_int(st, 3), (long long)db_col_int(st, 4),
				 (long long)db_col_int(st, 5));
		i++;
	}
	db_reset(st);
	if (i != n)
		fail_msg("%s: queue_stats lists %d kinds, the full count %d", where, n, i);
	free(rows);

	assert_int_equal(queue_count_by_state(db, &c), SD_OK);
	if (c.dead != full_int(db, SQL_FULL_DEAD, 0) || c.dead != total.dead)
		fail_msg("%s: dead %lld kept, %lld counted", where, (long long)c.dead,
			 (long long)full_int(db, SQL_FULL_DEAD, 0));
	assert_int_equal(queue_reclaims(db, &v), SD_OK);
	if (v != full_int(db, SQL_FULL_RECLAIMS, 0))
		fail_msg("%s: reclaims %lld kept, %lld counted", where, (long long)v,
			 (long long)full_int(db, SQL_FULL_RECLAIMS, 0));
	for (k = 0; k < sizeof since / sizeof since[0]; k++) {
		assert_int_equal(queue_done_since(db, since[k], &v), SD_OK);
		if (v != full_int(db, SQL_FULL_DONE_SINCE, since[k]))
			fail_msg("%s: done since %lld: %lld kept, %lld counted", where,
				 (long long)since[k], (long long)v,
				 (long long)full_int(db, SQL_FULL_DONE_SINCE, since[k]));
	}
	if (full_int(db, SQL_TIMES_BAD, 0) != 0)
		fail_msg("%s: done_times holds empty rows or does not add up to done_jobs", where);
	assert_int_equal(queue_next_visible(db, &v), SD_OK);
	if (v != full_int(db, SQL_FULL_NEXT, 0))
		fail_msg("%s: next visible %lld, counted %lld", where, (long long)v,
			 (long long)full_int(db, SQL_FULL_NEXT, 0));
}

/* ======================== helpers ======================================== */

static void enq(struct db *db, const char *kind, const char *job_id, int64_t delay_ms,
		int64_t priority)
{
	struct enqueue e = { kind, NULL, job_id, delay_ms, priority };

	assert_int_equal(queue_enqueue(db, &e, NULL), SD_OK);
}

static int claim(struct db *db, int n, int64_t lease_ms, struct job **out)
{
	int got = -1;

	assert_int_equal(queue_claim(db, "w", n, lease_ms, out, &got), SD_OK);
	return got;
}

static void free_jobs(struct job **j, int n)
{
	int i;

	for (i = 0; i < n; i++)
		job_free(j[i]);
}

/* ======================== the totals ===================================== */

/* enqueue, claim, single and batch acks (one of them stale), a stale single
 * ack, snooze and release (they count as reclaims once done), fail. */
static void test_totals_follow_acks(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	struct job *j[8], *k[8];
	unsigned char acked[8];
	int64_t ids[8];
	int n, i;

	check_totals(db, "empty");
	enq(db, "a", "a1", 0, 0);
	enq(db, "a", "a2", 0, 0);
	enq(db, "b", "b1", 0, 0);
	enq(db, "b", "b2", 5000, 0);
	check_totals(db, "enqueued");
	n = claim(db, 3, 1000, j);
	assert_int_equal(n, 3);
	check_totals(db, "claimed");
	assert_int_equal(queue_ack(db, j[0]->id, j[0]->lease_token), SD_OK);
	check_totals(db, "acked one");
	assert_int_equal(queue_ack(db, j[0]->id, j[0]->lease_token), SD_STALE);
	check_totals(db, "acked twice");

	/* j[1] expires and is taken again: the batch ack of the first claim
	 * finishes j[2] alone */
	clock_fake_advance(1001);
	for (i = 0; i < 2; i++)
		ids[i] = j[i + 1]->id;
	assert_int_equal(queue_release(db, j[2]->id, j[2]->lease_token), SD_OK);
	n = claim(db, 8, 60000, k);
	assert_int_equal(n, 2);	/* j[1] expired, j[2] released */
	check_totals(db, "reclaimed");
	assert_int_equal(queue_ack_many(db, j[1]->lease_token, ids, 2, acked), SD_OK);
	assert_int_equal(acked[0] + acked[1], 0);	/* both leased again since */
	check_totals(db, "stale batch");
	for (i = 0; i < n; i++)
		ids[i] = k[i]->id;
	/* one id in the batch names a stale lease: the others are acked */
	ids[n] = j[0]->id;
	assert_int_equal(queue_ack_many(db, k[0]->lease_token, ids, n + 1, acked), SD_OK);
	assert_int_equal(acked[0] + acked[1], 2);
	assert_int_equal(acked[2], 0);
	check_totals(db, "batch with a stale id");
	free_jobs(j, 3);
	free_jobs(k, n);

	/* a snooze, then a transient failure, then done at another time */
	clock_fake_advance(5000);
	n = claim(db, 1, 0, j);
	assert_int_equal(n, 1);
	assert_int_equal(queue_retry_later(db, j[0]->id, j[0]->lease_token, 10), SD_OK);
	clock_fake_advance(10);
	job_free(j[0]);
	assert_int_equal(claim(db, 1, 0, j), 1);
	assert_int_equal(queue_fail(db, j[0], "flaky", 0, NULL), SD_OK);
	check_totals(db, "failed once");
	job_free(j[0]);
	clock_fake_advance(QUEUE_BACKOFF_CAP_MS_DEFAULT);
	assert_int_equal(claim(db, 1, 0, j), 1);
	assert_int_equal(queue_ack(db, j[0]->id, j[0]->lease_token), SD_OK);
	job_free(j[0]);
	check_totals(db, "all done");
}

/* fail to dead, poison, retry from dead, purge, and prune in batches. */
static void test_totals_follow_dead_retry_prune(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	struct kind_policy p;
	struct job *j[4];
	int64_t n;
	int i, dead = 0;

	queue_policy_default(&p);
	p.max_deliveries = 1;
	assert_int_equal(queue_policy_set("poison", &p), SD_OK);
	enq(db, "a", "perm", 0, 0);
	enq(db, "poison", "p1", 0, 1);
	assert_int_equal(claim(db, 1, 0, j), 1);
	assert_int_equal(queue_fail(db, j[0], "broken", 1, &dead), SD_OK);
	assert_int_equal(dead, 1);
	job_free(j[0]);
	check_totals(db, "failed permanently");
	assert_int_equal(claim(db, 1, 100, j), 1);	/* p1, left to expire */
	job_free(j[0]);
	clock_fake_advance(101);
	assert_int_equal(claim(db, 1, 0, j), 0);	/* poison: dead, not handed out */
	check_totals(db, "poison");

	assert_int_equal(queue_dead_retry(db, "p1", &n), SD_OK);
	assert_int_equal(n, 1);
	check_totals(db, "retried");
	assert_int_equal(claim(db, 1, 0, j), 1);
	assert_int_equal(queue_ack(db, j[0]->id, j[0]->lease_token), SD_OK);
	job_free(j[0]);
	check_totals(db, "retried and done");
	assert_int_equal(queue_dead_purge(db, &n), SD_OK);
	assert_int_equal(n, 1);
	check_totals(db, "purged");

	/* finished jobs at three times, pruned two at a time */
	for (i = 0; i < 6; i++) {
		char id[16];

		snprintf(id, sizeof id, "d%d", i);
		enq(db, i % 2 ? "a" : "b", id, 0, 0);
		assert_int_equal(claim(db, 1, 0, j), 1);
		assert_int_equal(queue_ack(db, j[0]->id, j[0]->lease_token), SD_OK);
		job_free(j[0]);
		if (i % 2)
			clock_fake_advance(1000);
	}
	check_totals(db, "history");
	do {
		assert_int_equal(queue_prune_done(db, 1500, 2, &n), SD_OK);
		check_totals(db, "pruned");
	} while (n > 0);
	clock_fake_advance(1);
	assert_int_equal(queue_prune_done(db, 0, 100, &n), SD_OK);
	assert_true(n > 0);
	check_totals(db, "pruned all");
}

/* A database made before 0005 holds rows: the migration counts them. */
static void test_migration_seeds_totals_from_rows(void **state)
{
	struct tu_env *e = *state;
	static const char rows[] =
		"INSERT INTO stream (job_id, kind, payload, priority, visible_at, lease_token, "
		" deliveries, expiries, created_at) VALUES"
		" ('s1', 'a', '{}', 0, 0, NULL, 2, 1, 0), ('s2', 'b', '{}', 2, 2000000000, 9, 3, 2, 0);"
		"INSERT INTO done_jobs (job_id, kind, payload, deliveries, attempts, created_at, "
		" finished_at) VALUES ('d1', 'a', '{}', 1, 0, 0, 10), ('d2', 'a', '{}', 4, 1, 0, 10),"
		" ('d3', 'c', '{}', 2, 0, 0, 999999999), ('d4', 'c', '{}', 1, 3, 0, 1000000000);"
		"INSERT INTO dead_jobs (job_id, kind, payload, priority, deliveries, expiries, "
		" attempts, last_error, created_at, died_at) VALUES"
		" ('x1', 'b', '{}', 0, 5, 5, 0, 'poison', 0, 1), ('x2', 'e', '{}', 0, 1, 0, 1, 'no', 0, 1);"
		"INSERT INTO done_totals (kind, pruned) VALUES ('a', 3), ('f', 7);"
		"PRAGMA user_version = 4;";
	struct job *j[4];
	sqlite3 *h;
	int64_t m;
	int i, n;

	assert_int_equal(sqlite3_open(e->db_path, &h), SQLITE_OK);
	for (i = 0; i < db_migration_count && db_migrations[i].version <= 4; i++)
		assert_int_equal(sqlite3_exec(h, db_migrations[i].sql, NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, rows, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);

	assert_int_equal(db_open(e->db_path, 0, DB_SYNC_NORMAL, &e->db), SD_OK);
	assert_true(db_schema_version(e->db) >= 5);
	check_totals(e->db, "migrated");
	/* and they go on from there */
	n = claim(e->db, 4, 0, j);
	assert_int_equal(n, 1);	/* s1 (s2 is leased) */
	assert_int_equal(queue_ack(e->db, j[0]->id, j[0]->lease_token), SD_OK);
	free_jobs(j, n);
	assert_int_equal(queue_dead_retry(e->db, "x1", &m), SD_OK);
	assert_int_equal(m, 1);
	check_totals(e->db, "migrated, then used");
}

/* ======================== the claim across levels ======================== */

/* The batch j[0..n) holds exactly want[0..n), with levels ascending. */
static void assert_batch(struct job **j, int n, const char *const *want)
{
	int k, w, found;

	for (k = 0; k < n; k++) {
		if (k > 0)
			assert_true(j[k - 1]->priority <= j[k]->priority);
		for (w = found = 0; w < n; w++)
			found += strcmp(j[k]->job_id, want[w]) == 0;
		if (found != 1)
			fail_msg("claimed %s, not among the first %d", j[k]->job_id, n);
	}
}

/* Entries at three priorities, ready and scheduled, taken in batches and
 * one at a time: always (priority, visible_at, id), scheduled work at a
 * lower level never in the way. */
static void test_claim_levels_keep_order(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	/* job_id, delay, priority; the expected order after 100 ms */
	static const struct { const char *id; int64_t delay, prio; } in[] = {
		{ "p5-late", 100, 5 }, { "m3-sched", 100000, -3 }, { "p0-b", 50, 0 },
		{ "p0-a", 0, 0 }, { "p5-early", 0, 5 }, { "m3-a", 10, -3 },
		{ "p0-sched", 200000, 0 }, { "p0-c", 50, 0 }, { "p9-sched", 300000, 9 },
	};
	static const char *const want[] = { "m3-a", "p0-a", "p0-b", "p0-c", "p5-early", "p5-late" };
	struct job *j[8];
	size_t i;
	int n, got = 0, k;

	for (i = 0; i < sizeof in / sizeof in[0]; i++)
		enq(db, "noop", in[i].id, in[i].delay, in[i].prio);
	clock_fake_advance(100);
	/* batches of 4 then 4: the first spans two levels, the second two
	 * more; each takes the first entries in order (out[] holds them level
	 * by level, in no promised order within a level) */
	n = claim(db, 4, 0, j);
	assert_int_equal(n, 4);
	assert_batch(j, n, want + got);
	got += n;
	free_jobs(j, n);
	n = claim(db, 4, 0, j);
	assert_int_equal(n, 2);
	assert_batch(j, n, want + got);
	free_jobs(j, n);
	assert_int_equal(claim(db, 4, 0, j), 0);
	check_totals(db, "levels claimed");

	/* one at a time, the order itself */
	for (i = 0; i < sizeof in / sizeof in[0]; i++) {
		char id[32];

		snprintf(id, sizeof id, "again-%s", in[i].id);
		enq(db, "noop", id, in[i].delay, in[i].prio);
	}
	clock_fake_advance(100);
	for (k = 0; k < 6; k++) {
		char id[32];

		snprintf(id, sizeof id, "again-%s", want[k]);
		assert_int_equal(claim(db, 1, 0, j), 1);
		assert_string_equal(j[0]->job_id, id);
		job_free(j[0]);
	}
	assert_int_equal(claim(db, 1, 0, j), 0);

	/* an expired lease is ready at its level again, ahead of higher ones */
	enq(db, "noop", "p7", 0, 7);
	enq(db, "noop", "p1", 0, 1);
	assert_int_equal(claim(db, 1, 10, j), 1);
	assert_string_equal(j[0]->job_id, "p1");
	job_free(j[0]);
	clock_fake_advance(11);
	n = claim(db, 8, 0, j);
	assert_int_equal(n, 2);
	assert_string_equal(j[0]->job_id, "p1");
	assert_int_equal(j[0]->expiries, 1);
	assert_string_equal(j[1]->job_id, "p7");
	free_jobs(j, n);
}

/* ======================== lookups by identity ============================ */

static void count_row(const struct job_row *row, void *arg)
{
	int *n = arg;

	(void)row;
	(*n)++;
}

/* queue_find_job (order show's lookup) walks no table: with 300 finished
 * jobs, 100 scheduled and one dead it finds each of a job's entries by index */
static void test_find_job_uses_indexes(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	struct job *j[100];
	int64_t ids[100], before;
	unsigned char acked[100];
	char id[32];
	int n, i, round, found;

	for (round = 0; round < 3; round++) {
		for (i = 0; i < 100; i++) {
			snprintf(id, sizeof id, "outbox:%d", round * 100 + i);
			enq(db, "noop", id, 0, 0);
		}
		n = claim(db, 100, 60000, j);
		assert_int_equal(n, 100);
		for (i = 0; i < n; i++)
			ids[i] = j[i]->id;
		assert_int_equal(queue_ack_many(db, j[0]->lease_token, ids, n, acked), SD_OK);
		free_jobs(j, n);
	}
	for (i = 0; i < 100; i++) {
		snprintf(id, sizeof id, "later:%d", i);
		enq(db, "noop", id, 3600000, 0);
	}
	enq(db, "noop", "outbox:150", 0, 0);	/* delivered twice: a second entry */
	before = db_fullscan_steps(db);
	found = 0;
	assert_int_equal(queue_find_job(db, "outbox:150", count_row, &found), SD_OK);
	assert_int_equal(found, 2);	/* done once, ready once */
	found = 0;
	assert_int_equal(queue_find_job(db, "later:7", count_row, &found), SD_OK);
	assert_int_equal(found, 1);
	found = 0;
	assert_int_equal(queue_find_job(db, "none", count_row, &found), SD_OK);
	assert_int_equal(found, 0);
	assert_int_equal(db_fullscan_steps(db) - before, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_totals_follow_acks, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_totals_follow_dead_retry_prune, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_migration_seeds_totals_from_rows, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_claim_levels_keep_order, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_find_job_uses_indexes, tu_setup, tu_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
