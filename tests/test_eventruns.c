/*
 * test_eventruns.c: a whole event at once (event_runs.h, event_jobs.h), on
 * SQLite and (in the pg suite) PostgreSQL.
 *
 * A cancelled event: each live order cancelled, paid back (at the window
 * here; through the provider in test_shop) and told exactly once, the run's
 * counts what its rows say, however the work is cut: a worker process
 * killed at each step of the parent and of a child (a failpoint that ends
 * it as SIGKILL would), then run again; a parent stopped between batches.
 * A moved event: one email per change and order, the PDF rendered again
 * under a key that names the change, the old code still admitting.
 * Reminders under a fake clock: one per order before the start it is for,
 * none for the start it moved from, a cancelled order or event, or an
 * event with reminders off.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "clock.h"
#include "code.h"
#include "db.h"
#include "event_edit.h"
#include "event_jobs.h"
#include "event_runs.h"
#include "events.h"
#include "idem.h"
#include "jobkinds.h"
#include "log.h"
#include "orders.h"
#include "pipeline.h"
#include "scans.h"
#include "statedir.h"
#include "testutil.h"
#include "ticket_jobs.h"
#include "tickets.h"

#define OUT_MAX (64 * 1024)
#define DAY_MS (24 * 3600 * 1000LL)

static char out[OUT_MAX], err[OUT_MAX];

#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })

struct fixture {
	struct tu_env *env;
	struct tickets_env *tenv;
	struct db *full;
	int64_t event_id, starts_at;
};

static struct fixture F;

static int setup(void **state)
{
	struct event_new e = { "Whole Night", "Hall", 0, 40, 2000, "EUR" };

	tu_setup_real(state);	/* the worker processes of cut_at keep the real time */
	memset(&F, 0, sizeof F);
	F.env = *state;
	log_set_level(LOG_WARN);
	if (statedir_init(F.env->db_path, tu_state(F.env)) != SD_OK ||
	    tickets_env_open(F.env->db_path, tu_state(F.env), NULL, NULL, NULL, &F.tenv) != SD_OK)
		fail_msg("tickets env: %s", err_msg());
	assert_int_equal(db_open(F.env->db_path, 0, DB_SYNC_FULL, &F.full), SD_OK);
	F.starts_at = e.starts_at = clock_now_ms() + 10 * DAY_MS;
	assert_int_equal(event_add(F.full, &e, &F.event_id), SD_OK);
	return 0;
}

static int teardown(void **state)
{
	db_close(F.full);
	tickets_env_close(F.tenv);
	memset(&F, 0, sizeof F);
	return tu_teardown(state);
}

/* ======================== helpers ======================================== */

static void order(const char *name, const char *email, const char *payment, char *id)
{
	struct order_new o = { F.event_id, name, email, 2, NULL, payment };
	int replayed = 0;

	if (order_add(F.full, &o, id, &replayed) != SD_OK)
		fail_msg("order_add: %s", err_msg());
}

static void drain(void)
{
	struct pipeline_opts po;

	memset(&po, 0, sizeof po);
	po.worker.db_path = F.env->db_path;
	po.worker.name = "eventruns-test";
	po.worker.concurrency = 2;
	po.worker.handlers = ticket_handlers;
	po.worker.app = F.tenv;
	po.poll_ms = 20;
	if (pipeline_run(F.env->db, &po, NULL) != SD_OK)
		fail_msg("pipeline: %s", err_msg());
}

static void expect_checks_hold(void)
{
	struct check_report rep;

	assert_int_equal(check_db(F.env->db, tu_state(F.env), &rep), SD_OK);
	if (!rep.ok)
		fail_msg("check (%s): %s", check_name(rep.failed), rep.problem);
}

static int64_t count(const char *fmt, const char *a)
{
	return tu_countf(F.env->db_path, fmt, a);
}

/* messages in the maildir whose file name starts with prefix */
static int mails(const char *prefix)
{
	char dir[400];
	struct dirent *d;
	DIR *dp;
	int n = 0;

	snprintf(dir, sizeof dir, "%s/maildir/new", F.env->dir);
	if (!(dp = opendir(dir)))
		return 0;
	while ((d = readdir(dp)))
		n += strncmp(d->d_name, prefix, strlen(prefix)) == 0;
	closedir(dp);
	return n;
}

static void run_of(struct event_run_view *run, const char *kind)
{
	int64_t id = tu_countf(F.env->db_path, "SELECT id FROM event_runs WHERE event_id = %lld AND "
			       "kind = '%s' ORDER BY id DESC LIMIT 1", (long long)F.event_id, kind);

	assert_int_equal(event_run_get(F.env->db, id, run), SD_OK);
}

static void first_code(const char *public_id, char *code)
{
	unsigned char key[CODE_KEY_LEN];
	char path[600];
	int64_t ticket = count("SELECT t.code_id FROM tickets t JOIN orders o ON o.id = t.order_id "
			       "WHERE o.public_id = '%s' ORDER BY t.id LIMIT 1", public_id);

	assert_int_equal(code_key_path(F.env->db_path, tu_state(F.env), path, sizeof path), SD_OK);
	assert_int_equal(code_key_load(path, key), SD_OK);
	code_make(key, ticket, F.event_id, code);
}

static enum scan_outcome scan(const char *code)
{
	unsigned char key[CODE_KEY_LEN];
	struct scan_result sr;
	char path[600];

	assert_int_equal(code_key_path(F.env->db_path, tu_state(F.env), path, sizeof path), SD_OK);
	assert_int_equal(code_key_load(path, key), SD_OK);
	assert_int_equal(scan_ticket(F.full, key, code, NULL, &(struct scan_by){ "test", NULL, NULL },
				     &sr), SD_OK);
	return sr.outcome;
}

/* ======================== cancel ========================================= */

/* Five orders: three with an address (cash, card, none recorded), a
 * walk-up buyer's without one, one admitted at the door. */
struct five {
	char cash[16], card[16], free[16], walkup[16], in[16];
};

static void sell_five(struct five *o)
{
	char code[CODE_TEXT_MAX];

	order("Ana", "ana@example.org", "cash", o->cash);
	order("Bo", "bo@example.org", "card", o->card);
	order("Cy", "cy@example.org", NULL, o->free);
	order("Walk Up", NULL, "cash", o->walkup);
	order("Di", "di@example.org", "card", o->in);
	drain();
	first_code(o->in, code);
	assert_int_equal(scan(code), SCAN_ADMITTED);
}

/* what a finished cancellation of sell_five's orders leaves */
static void expect_cancelled(const struct five *o)
{
	struct event_run_view run;
	const char *gone[] = { o->cash, o->card, o->free, o->walkup };
	int i;

	run_of(&run, "cancel");
	assert_int_equal(run.orders, 5);
	assert_int_equal(run.done, 5);
	assert_true(run.enqueued_at > 0 && run.finished_at > 0);
	assert_int_equal(run.at_window, 3);	/* cash, card, the walk-up's cash */
	assert_int_equal(run.refunded, 0);
	assert_int_equal(run.emailed, 3);	/* not the walk-up, not the admitted */
	assert_int_equal(run.failed, 1);
	for (i = 0; i < 4; i++) {
		assert_int_equal(count("SELECT count(*) FROM orders WHERE public_id = '%s' AND "
				       "cancelled_at IS NOT NULL", gone[i]), 1);
		assert_int_equal(count("SELECT count(*) FROM order_changes c JOIN orders o ON "
				       "o.id = c.order_id WHERE o.public_id = '%s' AND c.kind = "
				       "'cancel'", gone[i]), 1);
	}
	assert_int_equal(count("SELECT count(*) FROM orders WHERE public_id = '%s' AND "
			       "cancelled_at IS NULL", o->in), 1);
	assert_int_equal(count("SELECT count(*) FROM event_run_orders x JOIN orders o ON o.id = "
			       "x.order_id WHERE o.public_id = '%s' AND x.step = 'failed' AND "
			       "x.detail LIKE '%%admitted%%'", o->in), 1);
	assert_int_equal(count("SELECT count(*) FROM refunds WHERE via = 'window' AND %s",
			       "amount_minor = 4000"), 3);
	assert_int_equal(count("SELECT count(*) FROM email_sends WHERE kind = '%s' AND sent_at "
			       "IS NOT NULL", "cancel-event"), 3);
	assert_int_equal(count("SELECT count(*) FROM email_sends WHERE kind = '%s'", "cancel"), 0);
	assert_int_equal(mails("cancel-event-"), 3);
	assert_int_equal(mails("cancel-T"), 0);
	/* the counter went back by the four cancelled orders */
	assert_int_equal(tu_countf(F.env->db_path, "SELECT orders FROM sales_counters WHERE "
				   "event_id = %lld", (long long)F.event_id), 1);
	expect_checks_hold();
}

static void test_cancel_reaches_each_buyer_once(void **state)
{
	struct event_run_view run;
	struct event_view v;
	struct five o;
	char code[CODE_TEXT_MAX], id[16];
	struct order_new late = { 0 };
	int already = 0, replayed = 0;

	(void)state;
	sell_five(&o);
	assert_int_equal(event_cancel(F.full, F.event_id, "test", "The band is ill", &run,
				      &already), SD_OK);
	assert_int_equal(already, 0);
	assert_int_equal(run.kind, EVENT_RUN_CANCEL);
	/* at once, before any job ran: no sale, the door refuses */
	assert_int_equal(event_get(F.full, F.event_id, &v), SD_OK);
	assert_true(v.cancelled_at > 0 && v.closed_at > 0);
	assert_string_equal(event_state_name(&v, clock_now_ms()), "cancelled");
	late = (struct order_new){ F.event_id, "Late", NULL, 1, NULL, "cash" };
	assert_int_equal(order_add(F.full, &late, id, &replayed), SD_CONFLICT);
	assert_non_null(strstr(err_msg(), "cancelled"));
	first_code(o.cash, code);
	assert_int_equal(scan(code), SCAN_EVENT_CANCELLED);
	snprintf(id, sizeof id, "%lld", (long long)F.event_id);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM outbox WHERE job_id = "
				   "'outbox:event-%s:cancel' AND kind = 'event_run'", id), 1);
	drain();
	expect_cancelled(&o);
	/* twice: nothing new */
	assert_int_equal(event_cancel(F.full, F.event_id, "test", "again", &run, &already), SD_OK);
	assert_int_equal(already, 1);
	drain();
	assert_int_equal(count("SELECT count(*) FROM event_runs WHERE kind = '%s'", "cancel"), 1);
	expect_cancelled(&o);
	first_code(o.cash, code);
	assert_int_equal(scan(code), SCAN_EVENT_CANCELLED);
	/* a cancelled event changes no more */
	assert_int_equal(event_set(F.full, F.event_id,
				   &(struct event_change){ EVENT_SET_NAME, "x" }, &v, NULL),
			 SD_CONFLICT);
}

/* A worker process killed at one step (exit 70, no clean-up), then the
 * box's relay and a worker again: the same end as an uncut run. */
static void cut_at(const char *failpoint)
{
	char fp[160];
	struct event_run_view run;
	struct five o;
	int already = 0, rc, round;

	sell_five(&o);
	assert_int_equal(event_cancel(F.full, F.event_id, "test", "Flooded", &run, &already),
			 SD_OK);
	snprintf(fp, sizeof fp, "%s=crash:1", failpoint);
	setenv("STAGEDOOR_FAILPOINTS", fp, 1);
	/* short leases: the dead worker's lease ends soon for the next one */
	setenv("STAGEDOOR_LEASE_MS", "1000", 1);
	setenv("STAGEDOOR_MAIL_TIMEOUT_MS", "1000", 1);
	/* the parent queues the children through the outbox: relay, work, again */
	for (round = 0, rc = 0; round < 4 && rc != 70; round++) {
		assert_int_equal(RUN("relay", "--drain", "--db", F.env->db_path), 0);
		rc = RUN("worker", "--drain", "--concurrency", "1", "--db", F.env->db_path);
	}
	unsetenv("STAGEDOOR_FAILPOINTS");
	unsetenv("STAGEDOOR_LEASE_MS");
	unsetenv("STAGEDOOR_MAIL_TIMEOUT_MS");
	if (rc != 70)
		fail_msg("the worker was to die at %s (exit 70), got %d: %s", failpoint, rc, err);
	/* the dead worker's lease and its claims on effects go stale: their
	 * time passes on the fake clock, not the test's */
	clock_fake_set(clock_now_ms() + IDEM_STALE_MS + 1000);
	drain();
	expect_cancelled(&o);
}

static void test_cut_after_a_batch(void **state)
{
	(void)state;
	cut_at("event_run_after_batch");
}

static void test_cut_after_a_child_cancelled(void **state)
{
	(void)state;
	cut_at("event_child_after_cancel");
}

static void test_cut_after_the_email_left(void **state)
{
	(void)state;
	cut_at("after_send_before_mark");
}

static void test_cut_before_the_ack(void **state)
{
	(void)state;
	cut_at("after_work_before_ack");
}

/* the parent stopped between batches (each its own transaction) resumes
 * from its cursor and queues no child twice */
static void test_parent_resumes_from_its_cursor(void **state)
{
	struct event_run_view run;
	struct five o;
	int64_t queued = 0, first_cursor;
	int already = 0, enqueued = 0;

	(void)state;
	sell_five(&o);
	assert_int_equal(event_cancel(F.full, F.event_id, "test", "Storm", &run, &already), SD_OK);
	assert_int_equal(event_run_enqueue(F.full, run.id, 2, &queued, &enqueued), SD_OK);
	assert_int_equal(queued, 2);
	assert_int_equal(enqueued, 0);
	assert_int_equal(event_run_get(F.full, run.id, &run), SD_OK);
	assert_int_equal(run.orders, 2);
	first_cursor = run.cursor;
	assert_true(first_cursor > 0);
	/* "a crash": the next delivery starts over from the row */
	assert_int_equal(event_run_enqueue(F.full, run.id, 2, &queued, &enqueued), SD_OK);
	assert_int_equal(event_run_get(F.full, run.id, &run), SD_OK);
	assert_true(run.cursor > first_cursor);
	assert_int_equal(event_run_enqueue(F.full, run.id, 2, &queued, &enqueued), SD_OK);
	assert_int_equal(queued, 1);
	assert_int_equal(enqueued, 1);
	assert_int_equal(event_run_enqueue(F.full, run.id, 2, &queued, &enqueued), SD_OK);
	assert_int_equal(queued, 0);
	assert_int_equal(enqueued, 1);
	assert_int_equal(count("SELECT count(*) FROM outbox WHERE kind = '%s'",
			       "cancel_event_order"), 5);
	assert_int_equal(count("SELECT count(DISTINCT job_id) FROM outbox WHERE kind = '%s'",
			       "cancel_event_order"), 5);
	drain();
	expect_cancelled(&o);
}

/* ======================== move =========================================== */

static void test_move_tells_each_buyer_once_per_change(void **state)
{
	char a[16], b[16], c[16], old_code[CODE_TEXT_MAX], key[128];
	struct event_change ch = { EVENT_SET_STARTS };
	struct event_run_view run;
	struct event_view v;

	(void)state;
	order("Ana", "ana@example.org", "cash", a);
	order("Bo", "bo@example.org", "card", b);
	order("Walk Up", NULL, "cash", c);
	drain();
	first_code(a, old_code);
	ch.starts_at = F.starts_at + 7 * DAY_MS;
	ch.actor = "test";
	assert_int_equal(event_set(F.full, F.event_id, &ch, &v, NULL), SD_OK);
	assert_int_equal(v.change_no, 1);
	drain();
	run_of(&run, "move");
	assert_int_equal(run.change_no, 1);
	assert_int_equal(run.old_starts_at, F.starts_at);
	assert_int_equal(run.orders, 3);
	assert_int_equal(run.done, 3);
	assert_int_equal(run.emailed, 2);
	assert_true(run.finished_at > 0);
	/* each PDF again, under the change's key, and stored */
	snprintf(key, sizeof key, "tickets/%s-c1.pdf", a);
	assert_int_equal(count("SELECT count(*) FROM tickets WHERE pdf_key = '%s'", key), 2);
	assert_int_equal(count("SELECT count(*) FROM tickets WHERE pdf_key NOT LIKE '%s'",
			       "%-c1.pdf"), 0);
	assert_int_equal(mails("moved-"), 2);
	/* the code on the first PDF still admits */
	assert_int_equal(scan(old_code), SCAN_ADMITTED);
	/* a second move is a second change: one more email each */
	ch.starts_at += DAY_MS;
	assert_int_equal(event_set(F.full, F.event_id, &ch, &v, NULL), SD_OK);
	assert_int_equal(v.change_no, 2);
	drain();
	assert_int_equal(mails("moved-"), 4);
	snprintf(key, sizeof key, "tickets/%s-c2.pdf", b);
	assert_int_equal(count("SELECT count(*) FROM tickets WHERE pdf_key = '%s'", key), 2);
	expect_checks_hold();
}

/* the move's emails sent by "box B" (another shop address) while "box A"
 * ran the children: each carries box A's link, the one its job was queued
 * with, so that a resend by either box is the same email */
static enum job_outcome notice_on_box_b(struct handler_ctx *ctx, const struct job *job,
					struct job_result *res)
{
	enum job_outcome o;

	snprintf(F.tenv->shop_url, sizeof F.tenv->shop_url, "https://b.example");
	o = event_job_notice(ctx, job, res);
	snprintf(F.tenv->shop_url, sizeof F.tenv->shop_url, "https://a.example");
	return o;
}

static void test_move_email_same_whichever_box_sends_it(void **state)
{
	struct handler two_boxes[32];
	struct event_change ch = { EVENT_SET_STARTS };
	struct event_view v;
	struct pipeline_opts po;
	char a[16], path[600], *text;
	size_t size;
	int i;

	(void)state;
	order("Ana", "ana@example.org", "cash", a);
	drain();
	for (i = 0; ticket_handlers[i].kind; i++) {
		two_boxes[i] = ticket_handlers[i];
		if (strcmp(two_boxes[i].kind, JOB_KIND_EVENT_NOTICE) == 0)
			two_boxes[i].fn = notice_on_box_b;
	}
	two_boxes[i] = ticket_handlers[i];
	snprintf(F.tenv->shop_url, sizeof F.tenv->shop_url, "https://a.example");
	ch.starts_at = F.starts_at + DAY_MS;
	ch.actor = "test";
	assert_int_equal(event_set(F.full, F.event_id, &ch, &v, NULL), SD_OK);
	memset(&po, 0, sizeof po);
	po.worker.db_path = F.env->db_path;
	po.worker.name = "two-boxes";
	po.worker.concurrency = 1;	/* one thread: the address flips in turn */
	po.worker.handlers = two_boxes;
	po.worker.app = F.tenv;
	po.poll_ms = 20;
	assert_int_equal(pipeline_run(F.env->db, &po, NULL), SD_OK);
	assert_int_equal(mails("moved-"), 1);
	snprintf(path, sizeof path, "%s/maildir/new/moved-%lld-1-%s.eml", F.env->dir,
		 (long long)F.event_id, a);
	text = (char *)tu_slurp(path, &size);
	assert_non_null(text);
	if (!strstr(text, "https://a.example/r/") || strstr(text, "https://b.example"))
		fail_msg("the moved email's link is not box A's: %s", text);
	free(text);
}

/* ======================== reminders ====================================== */

static void test_reminders_once_for_the_start_they_are_for(void **state)
{
	char a[16], b[16], c[16], subject[64];
	struct event_change ch = { EVENT_SET_STARTS };
	struct order_cancel_result cr;
	struct event_view v;
	int64_t moved_to;

	(void)state;
	clock_fake_set(clock_now_ms());
	tu_reminders(DAY_MS);
	order("Ana", "ana@example.org", "cash", a);
	order("Bo", "bo@example.org", "card", b);
	order("Cy", "cy@example.org", "card", c);
	drain();
	/* scheduled in the stream, one per order, a day before the start */
	assert_int_equal(count("SELECT count(*) FROM stream WHERE kind = '%s'", "send_reminder"), 3);
	assert_int_equal(order_cancel(F.full, c, "test", NULL, &cr), SD_OK);
	moved_to = F.starts_at + 3 * DAY_MS;
	ch.starts_at = moved_to;
	ch.actor = "test";
	assert_int_equal(event_set(F.full, F.event_id, &ch, &v, NULL), SD_OK);
	drain();
	/* the day before the old start: nothing is owed for it */
	clock_fake_advance(F.starts_at - DAY_MS - clock_now_ms() + 1000);
	drain();
	assert_int_equal(mails("reminder-"), 0);
	/* the day before the new one: one each for the two standing orders */
	clock_fake_advance(moved_to - DAY_MS - clock_now_ms() + 1000);
	drain();
	assert_int_equal(mails("reminder-"), 2);
	snprintf(subject, sizeof subject, "reminder-%s-%lld", a, (long long)moved_to);
	assert_int_equal(mails(subject), 1);
	assert_int_equal(count("SELECT count(*) FROM email_sends WHERE kind LIKE '%s' AND "
			       "sent_at IS NOT NULL", "reminder-%"), 2);
	/* once: the reminders are gone from the stream, none left to come */
	assert_int_equal(count("SELECT count(*) FROM stream WHERE kind = '%s'", "send_reminder"), 0);
	expect_checks_hold();
}

static void test_reminders_off_for_an_event(void **state)
{
	char a[16];
	struct event_change ch = { EVENT_SET_REMINDERS };
	struct event_view v;

	(void)state;
	clock_fake_set(clock_now_ms());
	tu_reminders(DAY_MS);
	order("Ana", "ana@example.org", "cash", a);
	ch.reminders = 0;
	assert_int_equal(event_set(F.full, F.event_id, &ch, &v, NULL), SD_OK);
	assert_int_equal(v.reminders, 0);
	drain();
	clock_fake_advance(F.starts_at - DAY_MS - clock_now_ms() + 1000);
	drain();
	assert_int_equal(mails("reminder-"), 0);
	assert_int_equal(count("SELECT count(*) FROM stream WHERE kind = '%s'", "send_reminder"), 0);
	/* an order made once reminders are off gets none queued */
	order("Bo", "bo@example.org", "cash", a);
	assert_int_equal(count("SELECT count(*) FROM outbox WHERE kind = '%s'", "send_reminder"), 1);
}

/* ======================== the command line ================================ */

static void test_cancel_from_the_command_line(void **state)
{
	char a[16], ev[24];

	(void)state;
	order("Ana", "ana@example.org", "cash", a);
	snprintf(ev, sizeof ev, "%lld", (long long)F.event_id);
	assert_int_equal(RUN("event", "cancel", ev, "--db", F.env->db_path), 2);
	assert_non_null(strstr(err, "--reason is missing"));
	assert_int_equal(RUN("event", "cancel", "99999", "--reason", "x", "--db", F.env->db_path),
			 1);
	assert_int_equal(count("SELECT count(*) FROM event_runs WHERE kind = '%s'", "cancel"), 0);
	assert_int_equal(RUN("event", "cancel", ev, "--reason", "Flooded", "--db",
			     F.env->db_path), 0);
	assert_non_null(strstr(out, "is cancelled"));
	assert_non_null(strstr(out, "CANCELLED at"));
	drain();
	assert_int_equal(RUN("event", "show", ev, "--db", F.env->db_path), 0);
	assert_non_null(strstr(out, "1 of 1 order done: 0 refunded, 1 owed at the window, "
				    "1 emailed, 0 failed"));
	assert_non_null(strstr(out, "finished"));
	assert_int_equal(RUN("event", "show", ev, "--json", "--db", F.env->db_path), 0);
	assert_non_null(strstr(out, "\"state\": \"cancelled\""));
	assert_non_null(strstr(out, "\"cancel_reason\": \"Flooded\""));
	assert_non_null(strstr(out, "\"at_window\": 1"));
	assert_int_equal(RUN("event", "cancel", ev, "--reason", "again", "--db", F.env->db_path),
			 0);
	assert_non_null(strstr(err, "cancelled already"));
	assert_int_equal(RUN("event", "set", ev, "--starts-at", "2040-01-01 20:00", "--db",
			     F.env->db_path), 3);
	assert_int_equal(RUN("event", "set", ev, "--reminders", "maybe", "--db", F.env->db_path),
			 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_cancel_reaches_each_buyer_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cut_after_a_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cut_after_a_child_cancelled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cut_after_the_email_left, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cut_before_the_ack, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parent_resumes_from_its_cursor, setup, teardown),
		cmocka_unit_test_setup_teardown(test_move_email_same_whichever_box_sends_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_move_tells_each_buyer_once_per_change, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reminders_once_for_the_start_they_are_for, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reminders_off_for_an_event, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_from_the_command_line, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
