/*
 * test_check.c: `stagedoor check` (src/check.h, src/cli_check.c).
 *
 * Each test builds a clean, drained database with the real pipeline (orders
 * through order_add, then the relay and a worker in threads until the stream
 * and the outbox are empty, pipeline_run), checks that it passes, then
 * breaks one invariant and asserts that check exits 1 naming exactly that
 * one.  The command runs as the binary under test ($STAGEDOOR_BIN).
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
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "event_edit.h"
#include "events.h"
#include "log.h"
#include "orders.h"
#include "outbox.h"
#include "pipeline.h"
#include "queue.h"
#include "statedir.h"
#include "testutil.h"
#include "ticket_jobs.h"
#include "tickets.h"

#define N_ORDERS 3

static char out[64 * 1024], err[64 * 1024];

struct fixture {
	struct tu_env *env;
	int64_t event_id;
	char ids[N_ORDERS][ORDER_ID_MAX];
};

static struct fixture F;

/* ======================== running check ================================== */

/* run_check: `stagedoor check ARGS...`; stdout in out, stderr in err. */
static int run_check(const char *const *argv)
{
	const char *full[16];
	int i, rc;

	full[0] = "check";
	for (i = 0; argv[i] && i < 14; i++)
		full[i + 1] = argv[i];
	full[i + 1] = NULL;
	rc = tu_run(out, sizeof out, err, sizeof err, full);
	return rc;
}

#define CHECK(...) run_check((const char *const[]){ __VA_ARGS__, NULL })

/* check --json on the fixture: expect exit 1, the named check and a line on
 * stderr holding `needle`. */
static void expect_broken(const char *check, const char *needle)
{
	char want[64];
	int rc = CHECK("--db", F.env->db_path, "--json");

	if (rc != 1)
		fail_msg("check: rc %d, expected 1; stdout '%s' stderr '%s'", rc, out, err);
	snprintf(want, sizeof want, "\"failed\":\"%s\"", check);
	if (!strstr(out, want))
		fail_msg("check: expected %s in '%s' (stderr '%s')", want, out, err);
	if (strncmp(err, "stagedoor: check failed: ", 25) != 0 || !strstr(err, needle))
		fail_msg("check: stderr '%s' does not name '%s'", err, needle);
	/* one line */
	assert_non_null(strchr(err, '\n'));
	assert_int_equal(strchr(err, '\n')[1], '\0');
}

static void expect_clean(void)
{
	int rc = CHECK("--db", F.env->db_path);

	if (rc != 0)
		fail_msg("check: rc %d on a clean database: stdout '%s' stderr '%s'", rc, out, err);
	assert_non_null(strstr(out, "ok: 3 orders"));
	assert_string_equal(err, "");
}

/* ======================== the fixture ==================================== */

static int setup(void **state)
{
	struct event_new e = { "Check Night", "Hall", 1900000000000LL, 100 };
	struct tickets_env *tenv = NULL;
	struct pipeline_opts po;
	struct db *full;
	int i, replayed;

	tu_setup_real(state);
	memset(&F, 0, sizeof F);
	F.env = *state;
	log_set_level(LOG_WARN);
	if (statedir_init(F.env->db_path, NULL) != SD_OK ||
	    tickets_env_open(F.env->db_path, NULL, NULL, NULL, NULL, &tenv) != SD_OK)
		fail_msg("tickets env: %s", err_msg());
	assert_int_equal(db_open(F.env->db_path, 0, DB_SYNC_FULL, &full), SD_OK);
	assert_int_equal(event_add(full, &e, &F.event_id), SD_OK);
	for (i = 0; i < N_ORDERS; i++) {
		struct order_new o = { F.event_id, "Ana", "ana@example.org", i + 1, NULL };

		if (order_add(full, &o, F.ids[i], &replayed) != SD_OK)
			fail_msg("order_add: %s", err_msg());
	}
	db_close(full);
	memset(&po, 0, sizeof po);
	po.worker.db_path = F.env->db_path;
	po.worker.name = "check-test";
	po.worker.concurrency = 2;
	po.worker.handlers = ticket_handlers;
	po.worker.app = tenv;
	po.poll_ms = 20;
	if (pipeline_run(F.env->db, &po, NULL) != SD_OK)
		fail_msg("pipeline: %s", err_msg());
	tickets_env_close(tenv);
	expect_clean();
	return 0;
}

static int teardown(void **state)
{
	memset(&F, 0, sizeof F);
	return tu_teardown(state);
}

/* Run a static SQL write on the test's connection, ?1 bound to a1. */
static void sql_write(const char *sql, const char *a1)
{
	struct db_stmt *st = db_stmt(F.env->db, sql);

	if (!st)
		fail_msg("%s: %s", sql, err_msg());
	db_bind_text(st, 1, a1);
	if (db_run(st) != SD_OK)
		fail_msg("%s: %s", sql, err_msg());
	assert_true(db_changes(F.env->db) > 0);
}

static void pdf_path(int i, char *buf, size_t size)
{
	snprintf(buf, size, "%s/blobs/tickets/%s.pdf", F.env->dir, F.ids[i]);
}

/* ======================== the tests ====================================== */

static void test_clean_database_passes(void **state)
{
	(void)state;
	assert_int_equal(CHECK("--db", F.env->db_path, "--json"), 0);
	assert_non_null(strstr(out, "\"ok\":true"));
	assert_non_null(strstr(out, "\"orders\":3,\"tickets\":6,\"pdfs\":3,\"emails_sent\":3"));
	/* the library entry agrees */
	{
		struct check_report rep;

		assert_int_equal(check_run(F.env->db_path, NULL, &rep), SD_OK);
		assert_true(rep.ok);
		assert_int_equal(rep.failed, CHECK_NONE);
		assert_int_equal(rep.events, 1);
	}
}

static void test_deleted_pdf(void **state)
{
	char path[600], want[64];

	(void)state;
	pdf_path(1, path, sizeof path);
	assert_int_equal(unlink(path), 0);
	snprintf(want, sizeof want, "order %s has no stored PDF", F.ids[1]);
	expect_broken("pdfs", want);
}

static void test_corrupt_pdf(void **state)
{
	char path[600], want[64];
	unsigned char *pdf;
	size_t n;
	FILE *f;

	(void)state;
	/* truncated: the start is right, the end is gone */
	pdf_path(2, path, sizeof path);
	pdf = tu_slurp(path, &n);
	assert_non_null(pdf);
	assert_true(n > 100);
	assert_int_equal(memcmp(pdf, "%PDF-", 5), 0);
	assert_non_null(f = fopen(path, "wb"));
	assert_int_equal(fwrite(pdf, 1, n / 2, f), n / 2);
	fclose(f);
	free(pdf);
	snprintf(want, sizeof want, "order %s: its PDF", F.ids[2]);
	expect_broken("pdfs", want);
	assert_non_null(strstr(err, "is not a valid PDF"));
}

static void test_pdf_key_null(void **state)
{
	static const char sql[] =
		"UPDATE tickets SET pdf_key = NULL WHERE id = (SELECT min(t.id) FROM tickets t "
		"JOIN orders o ON o.id = t.order_id WHERE o.public_id = ?1)";
	char want[64];

	(void)state;
	sql_write(sql, F.ids[2]);
	snprintf(want, sizeof want, "order %s has no stored PDF", F.ids[2]);
	expect_broken("pdfs", want);
}

static void test_sent_at_null(void **state)
{
	static const char sql[] =
		"UPDATE email_sends SET sent_at = NULL WHERE order_id = "
		"(SELECT id FROM orders WHERE public_id = ?1)";
	char want[96];

	(void)state;
	sql_write(sql, F.ids[0]);
	snprintf(want, sizeof want, "order %s has its ticket email claimed but never sent",
		 F.ids[0]);
	expect_broken("emails", want);
}

static void test_email_row_missing(void **state)
{
	static const char sql[] =
		"DELETE FROM email_sends WHERE order_id = (SELECT id FROM orders WHERE public_id = ?1)";
	char want[96];

	(void)state;
	sql_write(sql, F.ids[1]);
	snprintf(want, sizeof want, "order %s has no ticket email recorded", F.ids[1]);
	expect_broken("emails", want);
}

static void test_counter_bumped(void **state)
{
	static const char sql[] =
		"UPDATE sales_counters SET seats_sold = seats_sold + 1 WHERE ?1 IS NOT NULL";
	char want[96];

	(void)state;
	sql_write(sql, "x");
	snprintf(want, sizeof want, "event %lld: its sales counter says 3 orders and 7 seats, "
		 "its orders come to 3 and 6", (long long)F.event_id);
	expect_broken("counters", want);
}

static void test_ready_job(void **state)
{
	struct enqueue e = { "noop", NULL, "left-behind", 0, 0 };

	(void)state;
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	expect_broken("stream", "the stream holds 1 ready job (first: noop, job_id left-behind)");
}

static void test_scheduled_job_is_fine(void **state)
{
	struct enqueue e = { "noop", NULL, "later", 3600 * 1000, 0 };

	(void)state;
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	assert_int_equal(CHECK("--db", F.env->db_path), 0);
	assert_non_null(strstr(out, "scheduled jobs wait"));
}

/* a reminder waits for its day: the box is drained, and says so */
static void test_scheduled_reminder_is_drained(void **state)
{
	struct enqueue e = { "send_reminder", "{\"order_id\":1}", "reminder-later", 3600 * 1000,
			     0 };

	(void)state;
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	assert_int_equal(CHECK("--db", F.env->db_path), 0);
	assert_null(strstr(out, "scheduled jobs wait"));
	assert_non_null(strstr(out, "1 reminder waits for its day"));
	assert_int_equal(CHECK("--db", F.env->db_path, "--json"), 0);
	assert_non_null(strstr(out, "\"scheduled\":0,\"reminders\":1}"));
}

static void test_leased_job(void **state)
{
	struct enqueue e = { "noop", NULL, "held", 0, 0 };
	struct job *j[1];
	int n = 0;

	(void)state;
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	assert_int_equal(queue_claim(F.env->db, "t", 1, 60000, j, &n), SD_OK);
	assert_int_equal(n, 1);
	job_free(j[0]);
	expect_broken("stream", "1 leased job (first: noop, job_id held)");
}

static void test_dead_job(void **state)
{
	struct enqueue e = { "noop", NULL, "doomed", 0, 0 };
	struct job *j[1];
	int n = 0, dead = 0;

	(void)state;
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	assert_int_equal(queue_claim(F.env->db, "t", 1, 60000, j, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(queue_fail(F.env->db, j[0], "broken on purpose", 1, &dead), SD_OK);
	assert_int_equal(dead, 1);
	job_free(j[0]);
	expect_broken("stream", "the stream holds 1 dead job (first: noop, job_id doomed)");
}

static void test_unpublished_outbox_row(void **state)
{
	(void)state;
	assert_int_equal(db_begin(F.env->db), SD_OK);
	assert_int_equal(outbox_add(F.env->db, "noop", NULL, "{}", 0, 0, NULL), SD_OK);
	assert_int_equal(db_commit(F.env->db), SD_OK);
	expect_broken("outbox", "the outbox holds 1 unpublished row");
}

static void test_foreign_key_broken(void **state)
{
	static const char sql[] =
		"INSERT INTO email_sends (order_id, kind, claimed_at, sent_at) "
		"VALUES (999999, ?1, 1, 1)";

	(void)state;
	assert_int_equal(db_exec(F.env->db, "PRAGMA foreign_keys = OFF"), SD_OK);
	sql_write(sql, "tickets");
	assert_int_equal(db_exec(F.env->db, "PRAGMA foreign_keys = ON"), SD_OK);
	expect_broken("foreign_keys", "foreign_key_check: email_sends row");
}

/* The first broken invariant is the one named, in check.h's order. */
static void test_first_broken_is_named(void **state)
{
	char path[600];

	(void)state;
	pdf_path(0, path, sizeof path);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(db_begin(F.env->db), SD_OK);
	assert_int_equal(outbox_add(F.env->db, "noop", NULL, "{}", 0, 0, NULL), SD_OK);
	assert_int_equal(db_commit(F.env->db), SD_OK);
	expect_broken("outbox", "unpublished");
}

static void test_missing_database(void **state)
{
	char path[400];

	(void)state;
	snprintf(path, sizeof path, "%s/nothing.db", F.env->dir);
	assert_int_equal(CHECK("--db", path), 1);
	assert_non_null(strstr(err, "no database at"));
	assert_int_equal(access(path, F_OK), -1);	/* not created */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_clean_database_passes),
		T(test_deleted_pdf),
		T(test_corrupt_pdf),
		T(test_pdf_key_null),
		T(test_sent_at_null),
		T(test_email_row_missing),
		T(test_counter_bumped),
		T(test_ready_job),
		T(test_scheduled_job_is_fine),
		T(test_scheduled_reminder_is_drained),
		T(test_leased_job),
		T(test_dead_job),
		T(test_unpublished_outbox_row),
		T(test_foreign_key_broken),
		T(test_first_broken_is_named),
		T(test_missing_database),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
