/*
 * test_maint.c: the maintenance pass (src/maint.h).
 *
 * On the fake clock: pruning respects each retention and the "still
 * deliverable" rule (a processed_jobs record whose job sits in the stream or
 * the dead letters is kept), email_sends rows are never pruned, and every
 * step is one bounded batch.  On real threads: the WAL stays bounded while a writer
 * commits constantly and two readers run short read transactions
 * constantly, with maint_tick every ~50 ms.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "event_edit.h"
#include "events.h"
#include "idem.h"
#include "log.h"
#include "maint.h"
#include "orders.h"
#include "queue.h"
#include "testutil.h"
#include "tickets.h"

#define HOUR (3600LL * 1000)
#define DAY (24 * HOUR)

static struct maint_opts opts(int batch)
{
	struct maint_opts o;

	maint_opts_default(&o);
	o.done_retention_ms = HOUR;
	o.idem_retention_ms = DAY;
	o.batch = batch;
	return o;
}

static struct maint_stats tick(struct db *db, const struct maint_opts *o)
{
	struct maint_stats st;

	if (maint_tick(db, o, &st) != SD_OK)
		fail_msg("maint_tick: %s", err_msg());
	return st;
}

/* A job that finished now: enqueued, claimed and acked. */
static void done_job(struct db *db, const char *job_id)
{
	struct enqueue e = { "noop", NULL, job_id, 0, 0 };
	struct job *j[1];
	int n = 0;

	assert_int_equal(queue_enqueue(db, &e, NULL), SD_OK);
	assert_int_equal(queue_claim(db, "t", 1, 60000, j, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(queue_ack(db, j[0]->id, j[0]->lease_token), SD_OK);
	job_free(j[0]);
}

/* A job left in the dead letters. */
static void dead_job(struct db *db, const char *kind, const char *job_id, const char *payload)
{
	struct enqueue e = { kind, payload, job_id, 0, 0 };
	struct job *j[1];
	int n = 0, dead = 0;

	assert_int_equal(queue_enqueue(db, &e, NULL), SD_OK);
	assert_int_equal(queue_claim(db, "t", 1, 60000, j, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(queue_fail(db, j[0], "on purpose", 1, &dead), SD_OK);
	assert_int_equal(dead, 1);
	job_free(j[0]);
}

static void processed(struct db *db, const char *job_id)
{
	int first = 0;

	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(idem_once(db, job_id, "update_sales_counter", &first), SD_OK);
	assert_int_equal(db_commit(db), SD_OK);
	assert_int_equal(first, 1);
}

static int64_t n_processed(const struct tu_env *e, const char *job_id)
{
	return tu_countf(e->db_path, "SELECT count(*) FROM processed_jobs WHERE job_id = '%s'",
			 job_id);
}

/* ======================== done jobs ====================================== */

static void test_done_jobs_respect_retention(void **state)
{
	struct tu_env *e = *state;
	struct maint_opts o = opts(1000);
	struct maint_stats st;

	done_job(e->db, "d1");
	done_job(e->db, "d2");
	clock_fake_advance(HOUR - 1);
	st = tick(e->db, &o);
	assert_int_equal(st.done_pruned, 0);
	clock_fake_advance(2);
	st = tick(e->db, &o);
	assert_int_equal(st.done_pruned, 2);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM done_jobs"), 0);
	/* counted, not lost */
	assert_int_equal(tu_count(e->db_path, "SELECT pruned FROM done_totals WHERE kind = 'noop'"),
			 2);
	/* a negative retention never prunes */
	done_job(e->db, "d3");
	clock_fake_advance(30 * DAY);
	o.done_retention_ms = -1;
	st = tick(e->db, &o);
	assert_int_equal(st.done_pruned, 0);
}

/* ======================== the scan log =================================== */

/* The scan log's rows go scan_log_retention after their event starts (a
 * row of no event: after it was made); the per-minute counts stay. */
static void test_scan_log_respects_retention(void **state)
{
	struct tu_env *e = *state;
	struct maint_opts o = opts(1000);
	struct event_new ev = { "Night", "Hall", clock_now_ms(), 10 };
	struct maint_stats st;
	int64_t id = 0;
	char sql[512];

	assert_int_equal(event_add(e->db, &ev, &id), SD_OK);
	snprintf(sql, sizeof sql, "INSERT INTO scans (at, event_id, outcome, device, answer) "
		 "VALUES (%lld, %lld, 'wrong_event', 'North', '{}'), (%lld, NULL, 'invalid', "
		 "'North', '{}'); INSERT INTO scan_minutes VALUES (%lld, 0, 'North', 0, 2, 0)",
		 (long long)clock_now_ms(), (long long)id, (long long)clock_now_ms(),
		 (long long)id);
	assert_int_equal(db_exec(e->db, sql), SD_OK);
	o.scan_log_retention_ms = DAY;
	clock_fake_advance(DAY - 1);
	st = tick(e->db, &o);
	assert_int_equal(st.scans_pruned, 0);
	clock_fake_advance(2);
	st = tick(e->db, &o);
	assert_int_equal(st.scans_pruned, 2);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM scans"), 0);
	assert_int_equal(tu_count(e->db_path, "SELECT refused FROM scan_minutes"), 2);
	/* a negative retention never prunes */
	assert_int_equal(db_exec(e->db, "INSERT INTO scans (at, outcome, device, answer) "
				 "VALUES (0, 'invalid', 'North', '{}')"), SD_OK);
	o.scan_log_retention_ms = -1;
	st = tick(e->db, &o);
	assert_int_equal(st.scans_pruned, 0);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM scans"), 1);
}

/* ======================== processed_jobs ================================= */

static void test_processed_jobs_respect_retention_and_delivery(void **state)
{
	struct tu_env *e = *state;
	struct maint_opts o = opts(1000);
	struct maint_stats st;
	struct enqueue again = { "update_sales_counter", "{}", "outbox:2", 0, 0 };
	struct job *j[1];
	int n = 0;

	processed(e->db, "outbox:1");		/* done and gone: may go */
	processed(e->db, "outbox:2");		/* a second entry still in the stream */
	processed(e->db, "outbox:3");		/* a second entry dead: may be retried */
	/* the dead one first: dead_job claims the stream's first entry */
	dead_job(e->db, "update_sales_counter", "outbox:3", "{}");
	assert_int_equal(queue_enqueue(e->db, &again, NULL), SD_OK);

	clock_fake_advance(DAY - 1);
	st = tick(e->db, &o);
	assert_int_equal(st.processed_pruned, 0);	/* too young */
	assert_int_equal(st.idem_kept, 0);

	clock_fake_advance(2);
	processed(e->db, "outbox:4");		/* recorded just now */
	st = tick(e->db, &o);
	assert_int_equal(st.processed_pruned, 1);
	assert_int_equal(st.idem_pruned, 1);
	assert_int_equal(st.idem_kept, 2);
	assert_int_equal(n_processed(e, "outbox:1"), 0);
	assert_int_equal(n_processed(e, "outbox:2"), 1);
	assert_int_equal(n_processed(e, "outbox:3"), 1);
	assert_int_equal(n_processed(e, "outbox:4"), 1);

	/* the stream's entry finishes: now nothing can deliver outbox:2 */
	assert_int_equal(queue_claim(e->db, "t", 1, 60000, j, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(queue_ack(e->db, j[0]->id, j[0]->lease_token), SD_OK);
	job_free(j[0]);
	st = tick(e->db, &o);
	assert_int_equal(st.processed_pruned, 1);
	assert_int_equal(st.idem_kept, 1);
	assert_int_equal(n_processed(e, "outbox:2"), 0);
	assert_int_equal(n_processed(e, "outbox:3"), 1);

	/* the dead one is purged by the operator: it goes too */
	{
		int64_t purged = 0;

		assert_int_equal(queue_dead_purge(e->db, &purged), SD_OK);
		assert_int_equal(purged, 1);
	}
	st = tick(e->db, &o);
	assert_int_equal(st.processed_pruned, 1);
	assert_int_equal(n_processed(e, "outbox:3"), 0);
	assert_int_equal(n_processed(e, "outbox:4"), 1);
}

/* ======================== email_sends ==================================== */

static int64_t order_id_of(const struct tu_env *e, const char *public_id)
{
	return tu_countf(e->db_path, "SELECT id FROM orders WHERE public_id = '%s'", public_id);
}

static void sent(struct db *db, int64_t order_id, int done)
{
	enum idem_claim c;
	int64_t at = 0;

	assert_int_equal(idem_effect_claim(db, order_id, "tickets", IDEM_STALE_MS, &c, &at), SD_OK);
	assert_int_equal(c, IDEM_CLAIMED);
	if (done)
		assert_int_equal(idem_effect_done(db, order_id, "tickets", at, "msg"), SD_OK);
}

static int64_t n_sends(const struct tu_env *e, int64_t order_id)
{
	return tu_countf(e->db_path, "SELECT count(*) FROM email_sends WHERE order_id = %lld",
			 (long long)order_id);
}

/* email_sends rows are the orders' email state (`order show`, `check`):
 * never pruned, sent or not, however old; processed_jobs rows of the same
 * age with no live entry go. */
static void test_email_sends_survive_retention(void **state)
{
	struct tu_env *e = *state;
	struct event_new ev = { "Night", "Hall", 1900000000000LL, 100 };
	struct maint_opts o = opts(1000);
	struct maint_stats st;
	char pub[3][ORDER_ID_MAX];
	int64_t event_id = 0, id[3], sends0;
	int i, replayed = 0;

	assert_int_equal(event_add(e->db, &ev, &event_id), SD_OK);
	for (i = 0; i < 3; i++) {
		struct order_new on = { event_id, "Ana", "ana@example.org", 1, NULL };

		assert_int_equal(order_add(e->db, &on, pub[i], &replayed), SD_OK);
		id[i] = order_id_of(e, pub[i]);
	}
	sent(e->db, id[0], 1);		/* sent */
	sent(e->db, id[1], 1);		/* sent */
	sent(e->db, id[2], 0);		/* claimed, never marked sent */
	processed(e->db, "outbox:1");	/* the same age, nothing can deliver it */
	processed(e->db, "outbox:2");
	sends0 = tu_count(e->db_path, "SELECT count(*) FROM email_sends");
	assert_int_equal(sends0, 3);

	clock_fake_advance(DAY + 1);
	st = tick(e->db, &o);
	assert_int_equal(st.processed_pruned, 2);
	assert_int_equal(st.idem_pruned, 2);
	assert_int_equal(n_processed(e, "outbox:1"), 0);
	assert_int_equal(n_processed(e, "outbox:2"), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(n_sends(e, id[i]), 1);

	/* far past the retention, tick after tick: still there, unchanged */
	for (i = 0; i < 5; i++) {
		clock_fake_advance(365 * DAY);
		st = tick(e->db, &o);
		assert_int_equal(st.idem_pruned, 0);
		assert_int_equal(st.idem_kept, 0);
	}
	for (i = 0; i < 3; i++)
		assert_int_equal(n_sends(e, id[i]), 1);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM email_sends "
					      "WHERE sent_at IS NOT NULL"), 2);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM email_sends "
					       "WHERE order_id = %lld AND sent_at IS NULL",
				   (long long)id[2]), 1);
}

/* ======================== bounded batches ================================= */

static void test_batches_bounded(void **state)
{
	struct tu_env *e = *state;
	struct maint_opts o = opts(1000);
	struct maint_stats st;
	char id[32];
	int i;

	assert_int_equal(db_begin(e->db), SD_OK);
	for (i = 0; i < 2500; i++) {
		int first = 0;

		snprintf(id, sizeof id, "job-%d", i);
		assert_int_equal(idem_once(e->db, id, "update_sales_counter", &first), SD_OK);
	}
	assert_int_equal(db_commit(e->db), SD_OK);
	for (i = 0; i < 2500; i++) {
		snprintf(id, sizeof id, "done-%d", i);
		done_job(e->db, id);
	}
	clock_fake_advance(2 * DAY);
	st = tick(e->db, &o);
	assert_int_equal(st.processed_pruned, 1000);
	assert_int_equal(st.done_pruned, 1000);
	st = tick(e->db, &o);
	assert_int_equal(st.processed_pruned, 1000);
	assert_int_equal(st.done_pruned, 1000);
	st = tick(e->db, &o);
	assert_int_equal(st.processed_pruned, 500);
	assert_int_equal(st.done_pruned, 500);
	st = tick(e->db, &o);
	assert_int_equal(st.processed_pruned, 0);
	assert_int_equal(st.done_pruned, 0);
	/* a batch of 0 takes the default */
	o.batch = 0;
	st = tick(e->db, &o);
	assert_int_equal(st.processed_pruned, 0);
}

/* ======================== the WAL ========================================= */

/*
 * Measured here (2 cores, release build): the writer commits ~12,000 times a
 * second, ~85 MB/s of WAL frames.  With no maintenance the two readers keep
 * the WAL from ever starting over and it reaches ~150 MB in 3 s.  With a
 * tick every 50 ms it reaches 10-25 MB between ticks (the writer outruns
 * the ticks); a tick whose TRUNCATE got the readers out leaves it empty, and
 * one that gave up after MAINT_CHECKPOINT_BUSY_MS (1 to 3 of 40 here) leaves
 * what it could not cut, under ~20 MB.  The bounds below hold that with room for a slow,
 * noisy machine and stay far below the unmaintained growth.
 */
#define WAL_RUN_MS 3000
#define WAL_TICK_MS 50
#define WAL_WARN (4LL * 1024 * 1024)
#define WAL_BOUND (48LL * 1024 * 1024)		/* after any tick */
#define WAL_BOUND_DONE DB_JOURNAL_SIZE_LIMIT	/* after a tick that was not busy */

struct load {
	const char *path;
	atomic_int stop;
	atomic_llong commits, reads;
	enum sd_result r;
	char err[256];
};

static void *writer(void *arg)
{
	struct load *l = arg;
	char payload[600];
	struct db *db;

	/* ~500 bytes a row: a few pages a commit */
	snprintf(payload, sizeof payload, "{\"pad\":\"%0500d\"}", 0);
	if ((l->r = db_open(l->path, 0, DB_SYNC_NORMAL, &db)) != SD_OK) {
		snprintf(l->err, sizeof l->err, "%s", err_msg());
		return NULL;
	}
	while (!atomic_load(&l->stop)) {
		struct enqueue e = { "noop", payload, NULL, 3600 * 1000, 0 };

		if ((l->r = queue_enqueue(db, &e, NULL)) != SD_OK) {
			snprintf(l->err, sizeof l->err, "writer: %s", err_msg());
			break;
		}
		atomic_fetch_add(&l->commits, 1);
	}
	db_close(db);
	return NULL;
}

static void *reader(void *arg)
{
	struct load *l = arg;
	struct db *db;

	if (db_open(l->path, 0, DB_SYNC_NORMAL, &db) != SD_OK)
		return NULL;
	while (!atomic_load(&l->stop)) {
		int64_t n = 0;

		/* a short read transaction: its snapshot pins the WAL while open */
		if (db_exec(db, "BEGIN") != SD_OK)
			break;
		queue_pending(db, &n);
		queue_pending(db, &n);
		db_exec(db, "COMMIT");
		atomic_fetch_add(&l->reads, 1);
	}
	db_close(db);
	return NULL;
}

static void test_wal_stays_bounded_under_load(void **state)
{
	struct tu_env *e = *state;
	struct maint_opts o = opts(1000);
	struct maint_stats st;
	struct load l;
	pthread_t w, r[2];
	int64_t t0, max_after = 0, max_done = 0, max_before = 0, wal_end = 0;
	int ticks = 0, truncates = 0, busy = 0, i;

	memset(&l, 0, sizeof l);
	l.path = e->db_path;
	l.r = SD_OK;
	o.wal_warn_bytes = WAL_WARN;
	log_set_level(LOG_ERROR);	/* no "wal large" lines while it catches up */
	assert_int_equal(pthread_create(&w, NULL, writer, &l), 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&r[i], NULL, reader, &l), 0);
	t0 = clock_mono_us();
	while (clock_mono_us() - t0 < WAL_RUN_MS * 1000LL) {
		tu_sleep_ms(WAL_TICK_MS);
		st = tick(e->db, &o);
		ticks++;
		truncates += st.checkpoint_truncate;
		busy += st.checkpoint_busy;
		if (st.wal_bytes_after > max_after)
			max_after = st.wal_bytes_after;
		if (!st.checkpoint_busy && st.wal_bytes_after > max_done)
			max_done = st.wal_bytes_after;
		if (st.wal_bytes_before > max_before)
			max_before = st.wal_bytes_before;
	}
	atomic_store(&l.stop, 1);
	pthread_join(w, NULL);
	for (i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	log_set_level(LOG_INFO);
	st = tick(e->db, &o);		/* the load is gone: one tick brings it back */
	wal_end = st.wal_bytes_after;
	print_message("wal: %d ticks, %d truncate, %d busy; %lld commits, %lld reads; "
		      "max before %lld, max after %lld (not busy: %lld), end %lld bytes\n", ticks,
		      truncates, busy, (long long)atomic_load(&l.commits),
		      (long long)atomic_load(&l.reads), (long long)max_before, (long long)max_after,
		      (long long)max_done, (long long)wal_end);
	if (l.r != SD_OK)
		fail_msg("%s", l.err);
	assert_true(atomic_load(&l.commits) > 200);	/* the writer really wrote */
	assert_true(atomic_load(&l.reads) > 200);
	assert_true(ticks >= 10);
	assert_true(truncates > 0);
	assert_true(busy * 2 < ticks);		/* most ticks got the readers out */
	assert_true(max_after < WAL_BOUND);
	assert_true(max_done < WAL_BOUND_DONE);
	assert_true(wal_end < WAL_BOUND_DONE);
}

/* ======================== the rest ========================================= */

static void test_open_sets_journal_size_limit(void **state)
{
	struct tu_env *e = *state;

	assert_int_equal(tu_count(e->db_path, "PRAGMA journal_size_limit"), DB_JOURNAL_SIZE_LIMIT);
}

static void test_checkpoint_truncate_empties_wal(void **state)
{
	struct tu_env *e = *state;
	struct db_checkpoint_result cr;
	int64_t bytes = -1;
	int i;

	for (i = 0; i < 50; i++)
		done_job(e->db, NULL);
	assert_int_equal(db_wal_bytes(e->db, &bytes), SD_OK);
	assert_true(bytes > 0);
	assert_int_equal(db_checkpoint(e->db, DB_CHECKPOINT_TRUNCATE, 100, &cr), SD_OK);
	assert_int_equal(cr.busy, 0);
	assert_int_equal(db_wal_bytes(e->db, &bytes), SD_OK);
	assert_int_equal(bytes, 0);
	/* not inside a transaction */
	assert_int_equal(db_begin(e->db), SD_OK);
	assert_int_equal(db_checkpoint(e->db, DB_CHECKPOINT_PASSIVE, 0, &cr), SD_DB);
	db_rollback(e->db);
}

static void test_optimize_writes_statistics(void **state)
{
	struct tu_env *e = *state;
	int i;

	for (i = 0; i < 20; i++)
		done_job(e->db, NULL);
	assert_int_equal(maint_optimize(e->db), SD_OK);
	assert_int_equal(tu_count(e->db_path,
				  "SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_stat1'"), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, tu_setup, tu_teardown)
		T(test_done_jobs_respect_retention),
		T(test_scan_log_respects_retention),
		T(test_processed_jobs_respect_retention_and_delivery),
		T(test_email_sends_survive_retention),
		T(test_batches_bounded),
		T(test_wal_stays_bounded_under_load),
		T(test_open_sets_journal_size_limit),
		T(test_checkpoint_truncate_empties_wal),
		T(test_optimize_writes_statistics),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
