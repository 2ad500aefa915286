/*
 * test_outbox.c: outbox rows commit or roll back with the caller's change;
 * the relay publishes each row into the stream exactly once, in batches.
 *
 * The "business change" is a row in a table the tests make for themselves
 * (test_orders), standing in for the orders and tickets of the real program.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "outbox.h"
#include "queue.h"
#include "testutil.h"

#define T0 1000000000LL		/* where tu_setup puts the fake clock */

/* ======================== helpers ======================================== */

static int setup(void **state)
{
	struct tu_env *env;

	tu_setup(state);
	env = *state;
	assert_int_equal(db_exec(env->db, "CREATE TABLE test_orders (id INTEGER PRIMARY KEY, "
				 "buyer TEXT NOT NULL)"), SD_OK);
	return 0;
}

static int64_t count(void **state, const char *sql)
{
	/* a fresh connection: it sees only what was committed */
	return tu_count(((struct tu_env *)*state)->db_path, sql);
}

static void add_order(struct db *db, const char *buyer_sql)
{
	assert_int_equal(db_exec(db, buyer_sql), SD_OK);
}

/* One stream entry by job_id, read on the test's connection. */
struct entry {
	int found;
	char kind[QUEUE_KIND_MAX + 1];
	char payload[256];
	int64_t priority, visible_at, created_at;
};

static const char SQL_ENTRY[] =
	"SELECT kind, payload, priority, visible_at, created_at FROM stream WHERE job_id = ?1";

static void entry_get(struct db *db, const char *job_id, struct entry *e)
{
	struct db_stmt *st = db_stmt(db, SQL_ENTRY);
	int row = 0;

	memset(e, 0, sizeof *e);
	assert_non_null(st);
	db_bind_text(st, 1, job_id);
	assert_int_equal(db_step(st, &row), SD_OK);
	if (row) {
		e->found = 1;
		snprintf(e->kind, sizeof e->kind, "%s", db_col_text(st, 0));
		snprintf(e->payload, sizeof e->payload, "%s", db_col_text(st, 1));
		e->priority = db_col_int(st, 2);
		e->visible_at = db_col_int(st, 3);
		e->created_at = db_col_int(st, 4);
		assert_int_equal(db_step(st, &row), SD_OK);
		assert_int_equal(row, 0);	/* one entry per job_id */
	}
	db_reset(st);
}

static const char SQL_PUBLISHED_AT[] = "SELECT published_at FROM outbox WHERE id = ?1";

static int64_t published_at(struct db *db, int64_t id)
{
	struct db_stmt *st = db_stmt(db, SQL_PUBLISHED_AT);
	int64_t v = -2;
	int row = 0;

	assert_non_null(st);
	db_bind_int(st, 1, id);
	assert_int_equal(db_step(st, &row), SD_OK);
	if (row)
		v = db_col_is_null(st, 0) ? -1 : db_col_int(st, 0);
	db_reset(st);
	return v;
}

/* ======================== outbox_add ===================================== */

static void test_add_outside_tx_refused(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	int64_t id = -1, n = -1;

	err_clear();
	assert_int_equal(outbox_add(db, "noop", "{}", 0, 0, &id), SD_INVALID);
	assert_non_null(strstr(err_msg(), "transaction"));
	assert_int_equal(id, -1);
	assert_false(db_in_tx(db));
	assert_int_equal(count(state, "SELECT count(*) FROM outbox"), 0);
	assert_int_equal(outbox_unpublished(db, &n), SD_OK);
	assert_int_equal(n, 0);
}

static void test_add_commits_with_caller_change(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	int64_t id1 = -1, id2 = -1, n = -1;

	assert_int_equal(db_begin(db), SD_OK);
	add_order(db, "INSERT INTO test_orders (buyer) VALUES ('ada')");
	assert_int_equal(outbox_add(db, "render_tickets", "{\"order_id\": 1}", 0, 0, &id1), SD_OK);
	assert_int_equal(outbox_add(db, "update_sales_counter", NULL, 0, 0, &id2), SD_OK);
	assert_true(id1 > 0);
	assert_true(id2 > id1);
	/* not visible to anyone else before the caller commits */
	assert_int_equal(count(state, "SELECT count(*) FROM outbox"), 0);
	assert_int_equal(count(state, "SELECT count(*) FROM test_orders"), 0);
	assert_int_equal(db_commit(db), SD_OK);

	assert_int_equal(count(state, "SELECT count(*) FROM test_orders"), 1);
	assert_int_equal(count(state, "SELECT count(*) FROM outbox WHERE published_at IS NULL"), 2);
	assert_int_equal(count(state, "SELECT count(*) FROM outbox WHERE payload = '{}' "
			       "AND kind = 'update_sales_counter'"), 1);
	assert_int_equal(outbox_unpublished(db, &n), SD_OK);
	assert_int_equal(n, 2);
	/* the outbox is not the stream: nothing runs until the relay publishes */
	assert_int_equal(count(state, "SELECT count(*) FROM stream"), 0);
}

static void test_add_rolls_back_with_caller_change(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	int64_t id = -1, n = -1;

	assert_int_equal(db_begin(db), SD_OK);
	add_order(db, "INSERT INTO test_orders (buyer) VALUES ('bob')");
	assert_int_equal(outbox_add(db, "render_tickets", "{\"order_id\": 1}", 0, 0, &id), SD_OK);
	db_rollback(db);
	assert_false(db_in_tx(db));

	assert_int_equal(count(state, "SELECT count(*) FROM test_orders"), 0);
	assert_int_equal(count(state, "SELECT count(*) FROM outbox"), 0);
	assert_int_equal(outbox_unpublished(db, &n), SD_OK);
	assert_int_equal(n, 0);
	assert_int_equal(outbox_relay_batch(db, 10, &n), SD_OK);
	assert_int_equal(n, 0);
	assert_int_equal(count(state, "SELECT count(*) FROM stream"), 0);
}

static void test_add_bad_input_refused(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	const char *bad[] = { "[1]", "\"x\"", "42", "not json", "{\"a\":", "" };
	size_t i;

	assert_int_equal(db_begin(db), SD_OK);
	add_order(db, "INSERT INTO test_orders (buyer) VALUES ('cy')");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		assert_int_equal(outbox_add(db, "noop", bad[i], 0, 0, NULL), SD_INVALID);
	assert_int_equal(outbox_add(db, "Bad Kind", "{}", 0, 0, NULL), SD_INVALID);
	assert_int_equal(outbox_add(db, "noop", "{}", -1, 0, NULL), SD_INVALID);
	/* a refused row leaves the caller's transaction usable */
	assert_true(db_in_tx(db));
	assert_int_equal(outbox_add(db, "noop", " {\"ok\": true}", 0, 0, NULL), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);
	assert_int_equal(count(state, "SELECT count(*) FROM test_orders"), 1);
	assert_int_equal(count(state, "SELECT count(*) FROM outbox"), 1);
}

/* ======================== the relay ====================================== */

static void test_relay_batches_once(void **state)
{
	struct db *db = ((struct tu_env *)*state)->db;
	int64_t ids[5], n = -1;
	char job_id[64], payload[64];
	struct entry e;
	int i;

	assert_int_equal(db_begin(db), SD_OK);
	for (i = 0; i < 5; i++) {
		snprintf(payload, sizeof payload, "{\"order_id\": %d}", i + 1);
		assert_int_equal(outbox_add(db, i == 2 ? "send_tickets" : "render_tickets", payload,
					    i == 2 ? 3000 : 0, i == 2 ? 7 : 0, &ids[i]), SD_OK);
	}
	assert_int_equal(db_commit(db), SD_OK);
	clock_fake_advance(500);	/* the relay runs later than the adds */

	assert_int_equal(outbox_relay_batch(db, 0, &n), SD_INVALID);
	assert_int_equal(outbox_relay_batch(db, 2, &n), SD_OK);
	assert_int_equal(n, 2);
	assert_int_equal(count(state, "SELECT count(*) FROM stream"), 2);
	assert_int_equal(published_at(db, ids[0]), T0 + 500);
	assert_int_equal(published_at(db, ids[1]), T0 + 500);
	assert_int_equal(published_at(db, ids[2]), -1);
	assert_int_equal(outbox_unpublished(db, &n), SD_OK);
	assert_int_equal(n, 3);

	assert_int_equal(outbox_relay_batch(db, 2, &n), SD_OK);
	assert_int_equal(n, 2);
	assert_int_equal(outbox_relay_batch(db, 2, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(outbox_relay_batch(db, 2, &n), SD_OK);
	assert_int_equal(n, 0);
	assert_int_equal(outbox_unpublished(db, &n), SD_OK);
	assert_int_equal(n, 0);

	for (i = 0; i < 5; i++) {
		snprintf(job_id, sizeof job_id, "outbox:%lld", (long long)ids[i]);
		entry_get(db, job_id, &e);
		assert_true(e.found);
		snprintf(payload, sizeof payload, "{\"order_id\": %d}", i + 1);
		assert_string_equal(e.payload, payload);
		assert_int_equal(e.created_at, T0 + 500);
		assert_true(published_at(db, ids[i]) > 0);
		if (i == 2) {
			/* the delay counts from publication */
			assert_string_equal(e.kind, "send_tickets");
			assert_int_equal(e.visible_at, T0 + 500 + 3000);
			assert_int_equal(e.priority, 7);
		} else {
			assert_string_equal(e.kind, "render_tickets");
			assert_int_equal(e.visible_at, T0 + 500);
			assert_int_equal(e.priority, 0);
		}
	}

	/* a second relay publishes nothing again */
	assert_int_equal(outbox_relay_batch(db, 100, &n), SD_OK);
	assert_int_equal(n, 0);
	assert_int_equal(count(state, "SELECT count(*) FROM stream"), 5);
	assert_int_equal(count(state, "SELECT count(DISTINCT job_id) FROM stream"), 5);
}

static void test_relay_crash_mid_batch_publishes_once(void **state)
{
	struct tu_env *env = *state;
	struct db *db = env->db;
	int64_t ids[3], n = -1;
	int i;

	assert_int_equal(db_begin(db), SD_OK);
	for (i = 0; i < 3; i++)
		assert_int_equal(outbox_add(db, "noop", NULL, 0, 0, &ids[i]), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);

	/* the relay's batch runs, then the process dies before the commit */
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(outbox_relay_batch(db, 10, &n), SD_OK);
	assert_int_equal(n, 3);
	assert_true(db_in_tx(db));
	db_rollback(db);

	assert_int_equal(count(state, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(count(state, "SELECT count(*) FROM outbox WHERE published_at IS NULL"), 3);
	for (i = 0; i < 3; i++)
		assert_int_equal(published_at(db, ids[i]), -1);

	/* the next relay publishes each row exactly once */
	assert_int_equal(outbox_relay_batch(db, 10, &n), SD_OK);
	assert_int_equal(n, 3);
	assert_int_equal(outbox_relay_batch(db, 10, &n), SD_OK);
	assert_int_equal(n, 0);
	assert_int_equal(count(state, "SELECT count(*) FROM stream"), 3);
	assert_int_equal(count(state, "SELECT count(*) FROM (SELECT job_id FROM stream "
			       "GROUP BY job_id HAVING count(*) > 1)"), 0);
	assert_int_equal(count(state, "SELECT count(*) FROM stream s JOIN outbox o "
			       "ON s.job_id = 'outbox:' || o.id"), 3);
	assert_int_equal(count(state, "SELECT count(*) FROM outbox WHERE published_at IS NULL"), 0);
}

static void test_relay_run_drains(void **state)
{
	struct tu_env *env = *state;
	struct db *db = env->db;
	int64_t published = -1, n = -1;
	enum log_level was = log_get_level();
	int i;

	assert_int_equal(db_begin(db), SD_OK);
	for (i = 0; i < 5; i++)
		assert_int_equal(outbox_add(db, "noop", NULL, 0, 0, NULL), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);
	/* a relay with its own connection, batches of 2, until none waits */
	log_set_level(LOG_WARN);
	assert_int_equal(outbox_relay_run(env->db_path, 2, 1, &published), SD_OK);
	log_set_level(was);
	assert_int_equal(published, 5);
	assert_int_equal(outbox_unpublished(db, &n), SD_OK);
	assert_int_equal(n, 0);
	assert_int_equal(count(state, "SELECT count(DISTINCT job_id) FROM stream"), 5);
}

/* What relay_seen records of the relay's progress callbacks. */
struct relay_seen {
	struct db *db;			/* the test's connection, to add rows on */
	int calls;
	int64_t published[16], total[16];
};

/* The relay's progress callback; on its first call three more rows arrive,
 * as an order placed while the relay drains would add them. */
static void relay_seen(void *arg, int64_t published, int64_t total)
{
	struct relay_seen *s = arg;
	int i;

	assert_true(s->calls < 16);
	s->published[s->calls] = published;
	s->total[s->calls] = total;
	if (s->calls++ == 0) {
		assert_int_equal(db_begin(s->db), SD_OK);
		for (i = 0; i < 3; i++)
			assert_int_equal(outbox_add(s->db, "noop", NULL, 0, 0, NULL), SD_OK);
		assert_int_equal(db_commit(s->db), SD_OK);
	}
}

/* The callback sees every batch: published so far, and the total as known
 * then; rows added mid-drain raise the total once published reaches it. */
static void test_relay_run_progress_callback(void **state)
{
	struct tu_env *env = *state;
	struct outbox_relay_opts o = { 0 };
	struct relay_seen seen = { 0 };
	int64_t published = -1;
	enum log_level was = log_get_level();
	int i;

	assert_int_equal(db_begin(env->db), SD_OK);
	for (i = 0; i < 5; i++)
		assert_int_equal(outbox_add(env->db, "noop", NULL, 0, 0, NULL), SD_OK);
	assert_int_equal(db_commit(env->db), SD_OK);
	seen.db = env->db;
	o.batch = 2;
	o.drain = 1;
	o.progress = relay_seen;
	o.arg = &seen;
	log_set_level(LOG_WARN);
	assert_int_equal(outbox_relay_run_opts(env->db_path, &o, &published), SD_OK);
	log_set_level(was);
	assert_int_equal(published, 8);
	/* batches 1-2, 3-4 (of 5 known), 5-6 (published passed 5: recounted, 8),
	 * 7-8 (recounted: none left) */
	assert_int_equal(seen.calls, 4);
	assert_int_equal(seen.published[0], 2);
	assert_int_equal(seen.total[0], 5);
	assert_int_equal(seen.published[1], 4);
	assert_int_equal(seen.total[1], 5);
	assert_int_equal(seen.published[2], 6);
	assert_int_equal(seen.total[2], 8);
	assert_int_equal(seen.published[3], 8);
	assert_int_equal(seen.total[3], 8);
	assert_int_equal(count(state, "SELECT count(DISTINCT job_id) FROM stream"), 8);
}

/* The last progress callback the relay made. */
static void relay_last(void *arg, int64_t published, int64_t total)
{
	int64_t *last = arg;

	last[0] = published;
	last[1] = total;
}

/* Draining with a progress callback, the relay itself writes nothing on
 * stderr: showing progress is its caller's (`relay --drain` draws the bar,
 * tests/test_progress.c); the callback sees every row counted. */
static void test_relay_run_shows_nothing_itself(void **state)
{
	struct tu_env *env = *state;
	struct outbox_relay_opts o = { 0 };
	int64_t published = -1, last[2] = { -1, -1 };
	enum log_level was = log_get_level();
	char buf[4096];
	ssize_t n;
	int fds[2], saved, i;

	assert_int_equal(db_begin(env->db), SD_OK);
	for (i = 0; i < 7; i++)
		assert_int_equal(outbox_add(env->db, "noop", NULL, 0, 0, NULL), SD_OK);
	assert_int_equal(db_commit(env->db), SD_OK);
	o.batch = 3;
	o.drain = 1;
	o.progress = relay_last;
	o.arg = last;
	assert_int_equal(pipe(fds), 0);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fds[1], STDERR_FILENO), STDERR_FILENO);
	log_set_level(LOG_WARN);
	i = outbox_relay_run_opts(env->db_path, &o, &published);
	log_set_level(was);
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(fds[1]);
	n = read(fds[0], buf, sizeof buf - 1);
	close(fds[0]);
	assert_int_equal(i, SD_OK);
	assert_int_equal(published, 7);
	assert_int_equal(last[0], 7);
	assert_int_equal(last[1], 7);
	assert_int_equal(n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, tu_teardown)
		T(test_add_outside_tx_refused),
		T(test_add_commits_with_caller_change),
		T(test_add_rolls_back_with_caller_change),
		T(test_add_bad_input_refused),
		T(test_relay_batches_once),
		T(test_relay_crash_mid_batch_publishes_once),
		T(test_relay_run_drains),
		T(test_relay_run_progress_callback),
		T(test_relay_run_shows_nothing_itself),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
