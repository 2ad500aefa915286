/*
 * test_changes.c: orders that change (orders.h) and the door's log
 * (scans.h), in process, on SQLite and (in the pg suite) PostgreSQL.
 *
 * Each change is checked for the promise its intent makes: a resend is a
 * new email once, however often its job runs (its own email_sends row and
 * provider key); a new address gets every email not yet sent and the old
 * one nothing more; a cancellation frees its seats (sold again once), makes
 * its tickets scan as cancelled, moves the counter back once and sends one
 * cancellation email, is harmless twice and refused for an admitted ticket.
 * Second runs are made the way the queue makes them: the same job (same
 * job_id) run again by a standalone handler context.  `stagedoor check`'s
 * checks hold at the end of each.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "code.h"
#include "db.h"
#include "event_edit.h"
#include "events.h"
#include "idem.h"
#include "jobkinds.h"
#include "log.h"
#include "orders.h"
#include "outbox.h"
#include "pipeline.h"
#include "queue.h"
#include "queue_history.h"
#include "scans.h"
#include "statedir.h"
#include "testutil.h"
#include "ticket_jobs.h"
#include "tickets.h"
#include "token.h"

#define CAPACITY 4

struct fixture {
	struct tu_env *env;
	struct tickets_env *tenv;
	struct handler_ctx *ctx;
	struct db *full;		/* a FULL connection, as intake and changes use */
	int64_t event_id;
};

static struct fixture F;

static int setup(void **state)
{
	struct event_new e = { "Changing Night", "Hall", 0, CAPACITY };

	tu_setup_real(state);
	memset(&F, 0, sizeof F);
	F.env = *state;
	log_set_level(LOG_WARN);
	if (statedir_init(F.env->db_path, tu_state(F.env)) != SD_OK ||
	    tickets_env_open(F.env->db_path, tu_state(F.env), NULL, NULL, NULL, &F.tenv) != SD_OK)
		fail_msg("tickets env: %s", err_msg());
	assert_int_equal(db_open(F.env->db_path, 0, DB_SYNC_FULL, &F.full), SD_OK);
	e.starts_at = clock_now_ms() + 3600 * 1000;	/* tonight: the doors are open */
	assert_int_equal(event_add(F.full, &e, &F.event_id), SD_OK);
	assert_non_null(F.ctx = handler_ctx_new(F.env->db_path, F.tenv));
	return 0;
}

static int teardown(void **state)
{
	handler_ctx_free(F.ctx);
	db_close(F.full);
	tickets_env_close(F.tenv);
	memset(&F, 0, sizeof F);
	return tu_teardown(state);
}

/* ======================== helpers ======================================== */

static void order(const char *name, const char *email, int64_t seats, char *id)
{
	struct order_new o = { F.event_id, name, email, seats, NULL };
	int replayed = 0;

	if (order_add(F.full, &o, id, &replayed) != SD_OK)
		fail_msg("order_add: %s", err_msg());
}

/* the relay and a worker until the outbox and the stream are empty */
static void drain(void)
{
	struct pipeline_opts po;

	memset(&po, 0, sizeof po);
	po.worker.db_path = F.env->db_path;
	po.worker.name = "changes-test";
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
		fail_msg("check: %s", rep.problem);
}

/* messages in the box's maildir whose text holds every needle (NULL ends) */
static int messages_with(const char *n1, const char *n2)
{
	char dir[400], path[700];
	struct dirent *d;
	DIR *dp;
	int n = 0;

	snprintf(dir, sizeof dir, "%s/maildir/new", F.env->dir);
	if (!(dp = opendir(dir)))
		return 0;
	while ((d = readdir(dp))) {
		unsigned char *text;
		size_t size;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, d->d_name);
		if (!(text = tu_slurp(path, &size)))
			continue;
		n += strstr((char *)text, n1) && (!n2 || strstr((char *)text, n2));
		free(text);
	}
	closedir(dp);
	return n;
}

static int64_t order_key(const char *public_id)
{
	return tu_countf(F.env->db_path, "SELECT id FROM orders WHERE public_id = '%s'", public_id);
}

/* A job as the relay would publish the order's newest outbox row of kind. */
struct jobbuf {
	struct job job;
	char job_id[64], kind[32], payload[200];
};

static const char SQL_OUTBOX_NEWEST[] =
	"SELECT job_id, payload FROM outbox WHERE kind = ?1 AND (payload = ?2 OR payload LIKE ?3) "
	"ORDER BY id DESC";

static void outbox_job(struct jobbuf *b, const char *kind, int64_t order_id)
{
	struct db_stmt *st;
	char whole[64], more[64];
	int row = 0;

	memset(b, 0, sizeof *b);
	snprintf(whole, sizeof whole, "{\"order_id\":%lld}", (long long)order_id);
	snprintf(more, sizeof more, "{\"order_id\":%lld,%%", (long long)order_id);
	assert_non_null(st = db_stmt(F.env->db, SQL_OUTBOX_NEWEST));
	db_bind_text(st, 1, kind);
	db_bind_text(st, 2, whole);
	db_bind_text(st, 3, more);
	assert_int_equal(db_step(st, &row), SD_OK);
	assert_int_equal(row, 1);
	snprintf(b->job_id, sizeof b->job_id, "%s", db_col_text(st, 0));
	snprintf(b->payload, sizeof b->payload, "%s", db_col_text(st, 1));
	db_reset(st);
	snprintf(b->kind, sizeof b->kind, "%s", kind);
	b->job.id = 1;
	b->job.lease_token = 1;
	b->job.deliveries = 1;
	b->job.job_id = b->job_id;
	b->job.kind = b->kind;
	b->job.payload = b->payload;
}

static void run_done(handler_fn fn, const struct job *job)
{
	struct job_result res;
	enum job_outcome got;

	memset(&res, 0, sizeof res);
	if ((got = fn(F.ctx, job, &res)) != JOB_DONE)
		fail_msg("%s: outcome %d, not done (%s)", job->kind, (int)got, res.error);
}

/* ======================== resend ========================================= */

/* The day's limit: two resends a day, the third refused until the first
 * has left the day; a refused one writes nothing. */
static void test_resend_limit_per_day(void **state)
{
	struct order_resend_limit lim = { 0, 2 };
	char id[ORDER_ID_MAX];
	int64_t n = 0, wait = 0;

	(void)state;
	clock_fake_set(clock_now_ms());	/* the day passes in a moment */
	order("Bo Berg", "bo@example.org", 1, id);
	assert_int_equal(order_resend(F.full, id, "cli (ops)", &lim, &n, &wait), SD_OK);
	clock_fake_advance(5 * 3600 * 1000LL);
	assert_int_equal(order_resend(F.full, id, "cli (ops)", &lim, &n, &wait), SD_OK);
	assert_int_equal(n, 2);
	assert_int_equal(order_resend(F.full, id, "cli (ops)", &lim, &n, &wait), SD_LIMITED);
	assert_int_equal(wait, 19 * 3600 * 1000LL);
	assert_non_null(strstr(err_msg(), "in the last day (resend_per_day)"));
	assert_int_equal(tu_countf(F.env->db_path, "SELECT resends FROM orders WHERE public_id = "
				   "'%s'", id), 2);
	clock_fake_advance(wait);
	assert_int_equal(order_resend(F.full, id, "cli (ops)", &lim, &n, &wait), SD_OK);
	assert_int_equal(n, 3);
	clock_real();
}

/* A resend made before the order's PDF: its send waits, without spending
 * an attempt, while the render job is still to run (in the outbox, then
 * in the stream, say held back by a pause); once rendered it sends; with
 * no render coming (its entry dead) it is a failed attempt. */
static void test_resend_waits_for_a_coming_pdf(void **state)
{
	char id[ORDER_ID_MAX], id2[ORDER_ID_MAX], render[QUEUE_JOB_ID_MAX + 1];
	struct job_result res;
	struct jobbuf j;
	int64_t n = 0;

	(void)state;
	order("Cy Diaz", "cy@example.org", 1, id);
	assert_int_equal(order_resend(F.full, id, "cli (ops)", NULL, &n, NULL), SD_OK);
	outbox_job(&j, JOB_KIND_SEND, order_key(id));
	memset(&res, 0, sizeof res);
	assert_int_equal(ticket_job_send(F.ctx, &j.job, &res), JOB_RETRY_LATER);	/* in the outbox */
	assert_int_equal(res.delay_ms, TICKETS_PDF_WAIT_MS);
	assert_non_null(strstr(res.error, "still to be rendered"));
	assert_int_equal(outbox_relay_batch(F.env->db, 100, &n), SD_OK);	/* in the stream */
	memset(&res, 0, sizeof res);
	assert_int_equal(ticket_job_send(F.ctx, &j.job, &res), JOB_RETRY_LATER);
	drain();
	assert_int_equal(messages_with("cy@example.org", NULL), 2);
	/* no render coming: the render's entry is not in the stream nor the outbox */
	order("Di Eng", "di@example.org", 1, id2);
	tickets_job_id(id2, "render", render, sizeof render);
	assert_int_equal(db_exec(F.env->db, "UPDATE outbox SET published_at = 1 WHERE "
				 "published_at IS NULL"), SD_OK);
	assert_int_equal(order_resend(F.full, id2, "cli (ops)", NULL, &n, NULL), SD_OK);
	outbox_job(&j, JOB_KIND_SEND, order_key(id2));
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM stream WHERE job_id = '%s'",
				   render), 0);
	memset(&res, 0, sizeof res);
	assert_int_equal(ticket_job_send(F.ctx, &j.job, &res), JOB_FAIL);
	assert_non_null(strstr(res.error, "has no stored PDF yet"));
}

/* Each resend is its own intent: its own n, row and key, one message each
 * however often its job runs; the first email is not sent again. */
static void test_resend_is_a_new_intent_sent_once(void **state)
{
	char id[ORDER_ID_MAX], key1[64], key2[64];
	struct jobbuf j;
	int64_t n = 0, oid;

	(void)state;
	order("Ana Lima", "ana@example.org", 2, id);
	drain();
	oid = order_key(id);
	snprintf(key1, sizeof key1, "<tickets-%s-r1@", id);
	snprintf(key2, sizeof key2, "<tickets-%s-r2@", id);
	assert_int_equal(messages_with("ana@example.org", NULL), 1);

	assert_int_equal(order_resend(F.full, id, "Box office laptop", NULL, &n, NULL), SD_OK);
	assert_int_equal(n, 1);
	outbox_job(&j, JOB_KIND_SEND, oid);
	assert_non_null(strstr(j.payload, "\"resend\":1"));
	run_done(ticket_job_send, &j.job);
	run_done(ticket_job_send, &j.job);	/* the same job again: nothing new */
	assert_int_equal(messages_with(key1, NULL), 1);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM email_sends WHERE "
				   "order_id = %lld AND kind = 'tickets-r1' AND sent_at IS NOT NULL",
				   (long long)oid), 1);

	assert_int_equal(order_resend(F.full, id, "Box office laptop", NULL, &n, NULL), SD_OK);
	assert_int_equal(n, 2);
	drain();
	assert_int_equal(messages_with(key1, NULL), 1);
	assert_int_equal(messages_with(key2, NULL), 1);
	assert_int_equal(messages_with("ana@example.org", NULL), 3);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM order_changes WHERE "
				   "order_id = %lld AND kind = 'resend' AND actor = "
				   "'Box office laptop'", (long long)oid), 2);
	assert_int_equal(order_resend(F.full, "TNOSUCH22", "x", NULL, &n, NULL), SD_NOT_FOUND);
	expect_checks_hold();
}

/* ======================== a new address ================================== */

static void test_new_address_gets_what_is_not_sent_yet(void **state)
{
	char id[ORDER_ID_MAX];
	struct order_detail *d;
	int changed = -1;
	int64_t n = 0;

	(void)state;
	order("Bo Berg", "old@example.org", 1, id);
	/* a mistyped address, fixed before the pipeline runs: the tickets go
	 * to the new one */
	assert_int_equal(order_set_email(F.full, id, "new@example.org", "cli (ops)", &changed),
			 SD_OK);
	assert_int_equal(changed, 1);
	drain();
	assert_int_equal(messages_with("old@example.org", NULL), 0);
	assert_int_equal(messages_with("new@example.org", NULL), 1);
	/* and again, then a resend: the new address only */
	assert_int_equal(order_set_email(F.full, id, "newer@example.org", "cli (ops)", &changed),
			 SD_OK);
	assert_int_equal(order_resend(F.full, id, "cli (ops)", NULL, &n, NULL), SD_OK);
	drain();
	assert_int_equal(messages_with("newer@example.org", NULL), 1);
	assert_int_equal(messages_with("new@example.org", NULL), 1);
	assert_int_equal(messages_with("old@example.org", NULL), 0);
	/* the same address again changes nothing */
	assert_int_equal(order_set_email(F.full, id, "newer@example.org", "cli (ops)", &changed),
			 SD_OK);
	assert_int_equal(changed, 0);
	assert_int_equal(order_set_email(F.full, id, "not an address", "x", &changed), SD_INVALID);
	/* the history: who, and the address before */
	assert_int_equal(order_detail_get(F.env->db, id, &d), SD_OK);
	assert_int_equal(d->n_changes, 3);
	assert_string_equal(d->changes[0].kind, "email");
	assert_string_equal(d->changes[0].detail, "old@example.org");
	assert_string_equal(d->changes[1].detail, "new@example.org");
	assert_string_equal(d->changes[2].kind, "resend");
	assert_string_equal(d->changes[2].actor, "cli (ops)");
	assert_string_equal(d->v.buyer_email, "newer@example.org");
	order_detail_free(d);
	expect_checks_hold();
}

/*
 * An email's first attempt reached the provider but its answer was lost
 * (the box gave its claim back, as a failed send does), then the address
 * changed: the retry goes where the first attempt went, the same request
 * under the same key (a provider refuses a key with another body), and the
 * new address gets the emails first attempted after the change.
 */
static void test_retry_after_a_new_address_goes_where_the_first_went(void **state)
{
	char id[ORDER_ID_MAX], to[256], key[256], want[64];
	struct order_detail *d;
	struct jobbuf j;
	int64_t oid, at = 0, n = 0;
	enum idem_claim claim;
	int changed = 0;

	(void)state;
	order("Nia Ness", "nia@example.org", 1, id);
	oid = order_key(id);
	/* render, then the first attempt of the tickets email, cut short */
	outbox_job(&j, JOB_KIND_RENDER, oid);
	run_done(ticket_job_render, &j.job);
	assert_int_equal(idem_effect_claim(F.env->db, oid, "tickets", IDEM_STALE_MS, &claim, &at),
			 SD_OK);
	assert_int_equal(claim, IDEM_CLAIMED);
	snprintf(want, sizeof want, "tickets-%s", id);
	assert_int_equal(idem_effect_fix(F.env->db, oid, "tickets", "nia@example.org", want, to,
					 key, sizeof to), SD_OK);
	assert_string_equal(to, "nia@example.org");
	assert_string_equal(key, want);
	assert_int_equal(idem_effect_release(F.env->db, oid, "tickets", at), SD_OK);

	assert_int_equal(order_set_email(F.full, id, "nia.new@example.org", "cli (ops)", &changed),
			 SD_OK);
	outbox_job(&j, JOB_KIND_SEND, oid);
	run_done(ticket_job_send, &j.job);
	assert_int_equal(messages_with("To: \"Nia Ness\" <nia@example.org>", NULL), 1);
	assert_int_equal(messages_with("nia.new@example.org", NULL), 0);
	/* a resend after the change is a new email: the new address */
	assert_int_equal(order_resend(F.full, id, "cli (ops)", NULL, &n, NULL), SD_OK);
	drain();
	assert_int_equal(messages_with("To: \"Nia Ness\" <nia.new@example.org>", NULL), 1);
	assert_int_equal(order_detail_get(F.env->db, id, &d), SD_OK);
	assert_int_equal(d->n_emails, 2);
	assert_string_equal(d->emails[0].to, "nia@example.org");
	assert_string_equal(d->emails[1].to, "nia.new@example.org");
	order_detail_free(d);
	expect_checks_hold();
}

/* ======================== cancel ========================================= */

static void test_cancel_frees_seats_counts_back_and_mails_once(void **state)
{
	char a[ORDER_ID_MAX], b[ORDER_ID_MAX], c[ORDER_ID_MAX], cancel_key[64];
	struct order_cancel_result res;
	struct order_detail *d;
	struct jobbuf j;
	int64_t oid;
	int replayed = 0;

	(void)state;
	order("Cy Cole", "cy@example.org", 2, a);	/* seats 1, 2 */
	order("Di Dahl", "di@example.org", 2, b);	/* seats 3, 4: sold out */
	{
		struct order_new o = { F.event_id, "Ed", "ed@example.org", 1, NULL };
		assert_int_equal(order_add(F.full, &o, c, &replayed), SD_SOLD_OUT);
		assert_non_null(strstr(err_msg(), "sold out"));
	}
	drain();
	oid = order_key(a);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT seats_sold FROM sales_counters"), 4);

	assert_int_equal(order_cancel(F.full, a, "Box office laptop", "double booking", &res),
			 SD_OK);
	assert_int_equal(res.already, 0);
	assert_int_equal(res.seats_freed, 2);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM tickets WHERE order_id "
				   "= %lld AND cancelled_at IS NOT NULL", (long long)oid), 2);
	/* twice: nothing changes, no second job */
	assert_int_equal(order_cancel(F.full, a, "Box office laptop", NULL, &res), SD_OK);
	assert_int_equal(res.already, 1);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM outbox WHERE kind = "
				   "'cancel_order'"), 1);

	/* its job, run twice: the counter back once, one cancellation email */
	outbox_job(&j, JOB_KIND_CANCEL, oid);
	run_done(ticket_job_cancel, &j.job);
	run_done(ticket_job_cancel, &j.job);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT seats_sold FROM sales_counters"), 2);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT orders FROM sales_counters"), 1);
	snprintf(cancel_key, sizeof cancel_key, "<cancel-%s@", a);
	assert_int_equal(messages_with(cancel_key, "cy@example.org"), 1);
	assert_int_equal(messages_with("cy@example.org", NULL), 2);	/* tickets, cancel */

	/* the freed seats are sold again, once: the lowest first */
	order("Fay Fox", "fay@example.org", 1, c);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT seat_no FROM tickets t JOIN orders o "
				   "ON o.id = t.order_id WHERE o.public_id = '%s'", c), 1);
	order("Gus Gray", "gus@example.org", 1, c);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT seat_no FROM tickets t JOIN orders o "
				   "ON o.id = t.order_id WHERE o.public_id = '%s'", c), 2);
	{
		struct order_new o = { F.event_id, "Hal", "hal@example.org", 1, NULL };
		assert_int_equal(order_add(F.full, &o, c, &replayed), SD_SOLD_OUT);
	}
	drain();
	assert_int_equal(tu_countf(F.env->db_path, "SELECT seats_sold FROM sales_counters"), 4);
	/* who and why */
	assert_int_equal(order_detail_get(F.env->db, a, &d), SD_OK);
	assert_true(d->v.cancelled_at > 0);
	assert_int_equal(d->tickets[0].state, TICKET_CANCELLED);
	assert_int_equal(d->n_changes, 1);
	assert_string_equal(d->changes[0].actor, "Box office laptop");
	assert_string_equal(d->changes[0].detail, "double booking");
	order_detail_free(d);
	expect_checks_hold();
}

/* code of the order's first ticket, as its PDF carries it */
static void first_code(const char *public_id, char *code)
{
	unsigned char key[CODE_KEY_LEN];
	char path[600];
	int64_t ticket = tu_countf(F.env->db_path, "SELECT t.code_id FROM tickets t JOIN orders o "
				   "ON o.id = t.order_id WHERE o.public_id = '%s' ORDER BY t.id "
				   "LIMIT 1", public_id);

	assert_int_equal(code_key_path(F.env->db_path, tu_state(F.env), path, sizeof path), SD_OK);
	assert_int_equal(code_key_load(path, key), SD_OK);
	code_make(key, ticket, F.event_id, code);
}

/* scan_as: a scan by the door named door whose token's identity is
 * door_id; the result of scan_ticket */
static enum sd_result scan_as(const char *code, const char *door, const char *door_id,
			      const char *nonce, struct scan_result *r)
{
	unsigned char key[CODE_KEY_LEN];
	char path[600];
	struct scan_door sd = { F.event_id, 3 * 3600 * 1000LL, 6 * 3600 * 1000LL };

	assert_int_equal(code_key_path(F.env->db_path, tu_state(F.env), path, sizeof path), SD_OK);
	assert_int_equal(code_key_load(path, key), SD_OK);
	return scan_ticket(F.full, key, code, &sd, &(struct scan_by){ door, door_id, nonce }, r);
}

/* scan: a scan by door, whose token's identity follows from its name */
static void scan(const char *code, const char *door, const char *nonce, struct scan_result *r)
{
	char sha[CODE_SHA256_HEX + 1];

	code_sha256_hex(door, strlen(door), sha);
	sha[TOKEN_ID_LEN] = '\0';
	if (scan_as(code, door, sha, nonce, r) != SD_OK)
		fail_msg("scan_ticket: %s", err_msg());
}

/* An admitted ticket keeps its order from being cancelled; a cancelled
 * ticket scans as cancelled. */
static void test_cancel_and_the_door(void **state)
{
	char a[ORDER_ID_MAX], b[ORDER_ID_MAX], code_a[CODE_TEXT_MAX], code_b[CODE_TEXT_MAX];
	struct order_cancel_result res;
	struct scan_result sr;

	(void)state;
	order("Ida Isle", "ida@example.org", 2, a);
	order("Jo Jung", "jo@example.org", 1, b);
	drain();
	first_code(a, code_a);
	first_code(b, code_b);
	scan(code_a, "North door", NULL, &sr);
	assert_int_equal(sr.outcome, SCAN_ADMITTED);
	assert_int_equal(order_cancel(F.full, a, "Box office laptop", NULL, &res), SD_CONFLICT);
	assert_int_equal(res.n_admitted, 1);
	assert_string_equal(res.admitted[0].scanned_by, "North door");
	assert_non_null(strstr(err_msg(), "admitted"));
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM orders WHERE "
				   "cancelled_at IS NOT NULL"), 0);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM tickets WHERE "
				   "cancelled_at IS NOT NULL"), 0);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM outbox WHERE kind = "
				   "'cancel_order'"), 0);

	assert_int_equal(order_cancel(F.full, b, "Box office laptop", NULL, &res), SD_OK);
	scan(code_b, "North door", NULL, &sr);
	assert_int_equal(sr.outcome, SCAN_CANCELLED);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM tickets WHERE "
				   "scanned_at IS NOT NULL"), 1);
	drain();
	expect_checks_hold();
}

/* ======================== the door's log ================================= */

/* The same nonce again gets the first answer and writes nothing; every scan
 * is logged with its door; the night reads back per minute and per door. */
static void test_scan_nonce_log_and_stats(void **state)
{
	char a[ORDER_ID_MAX], code[CODE_TEXT_MAX];
	struct scan_result first, again, other;
	struct scan_stats *st = malloc(sizeof *st);

	(void)state;
	assert_non_null(st);
	order("Kit Kern", "kit@example.org", 1, a);
	drain();
	first_code(a, code);
	scan(code, "North door", "n-1", &first);
	assert_int_equal(first.outcome, SCAN_ADMITTED);
	assert_int_equal(first.replayed, 0);
	scan(code, "North door", "n-1", &again);	/* a retry: the first answer */
	assert_int_equal(again.outcome, SCAN_ADMITTED);
	assert_int_equal(again.replayed, 1);
	assert_int_equal(again.scanned_at, first.scanned_at);
	assert_string_equal(again.seat_label, first.seat_label);
	scan(code, "South door", "n-1", &other);	/* another door's nonce is its own */
	assert_int_equal(other.outcome, SCAN_ALREADY);
	assert_string_equal(other.scanned_by, "North door");
	scan("not a code", "South door", NULL, &other);
	assert_int_equal(other.outcome, SCAN_INVALID);
	/* a code that is none of the box's is counted, not logged */
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM scans"), 2);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM scans WHERE outcome = "
				   "'admitted' AND device = 'North door'"), 1);
	{
		unsigned char key[CODE_KEY_LEN] = { 0 };
		assert_int_equal(scan_ticket(F.full, key, code, NULL,
					     &(struct scan_by){ "x", "0123456789abcdef",
								"has space" }, &other),
				 SD_INVALID);
		/* a nonce answers for a door's token: none, none */
		assert_int_equal(scan_ticket(F.full, key, code, NULL,
					     &(struct scan_by){ "x", NULL, "n-1" }, &other),
				 SD_INVALID);
	}

	assert_int_equal(scan_stats_get(F.env->db, F.event_id, 0, st), SD_OK);
	assert_int_equal(st->n_minutes, 1);
	assert_int_equal(st->minutes[0].admitted, 1);
	/* the door's event holds what its doors refused: one already scanned,
	 * one invalid code */
	assert_int_equal(st->minutes[0].refused, 2);
	assert_int_equal(st->n_doors, 2);
	assert_string_equal(st->doors[0].door, "North door");
	assert_int_equal(st->doors[0].admitted, 1);
	assert_string_equal(st->doors[1].door, "South door");
	assert_int_equal(st->doors[1].admitted, 0);
	assert_int_equal(st->doors[1].refused, 2);
	free(st);
	expect_checks_hold();
}

/* A nonce names one code: the same nonce with another code, a forged one
 * included, is refused and admits nothing; a token made later under the
 * door's name has none of the first token's answers. */
static void test_scan_nonce_is_tied_to_its_code_and_token(void **state)
{
	char a[ORDER_ID_MAX], b[ORDER_ID_MAX], code_a[CODE_TEXT_MAX], code_b[CODE_TEXT_MAX];
	struct scan_result r;

	(void)state;
	order("Nia Nord", "nia@example.org", 1, a);
	order("Olu Ost", "olu@example.org", 1, b);
	drain();
	first_code(a, code_a);
	first_code(b, code_b);
	assert_int_equal(scan_as(code_a, "East door", "aaaaaaaaaaaaaaaa", "n-7", &r), SD_OK);
	assert_int_equal(r.outcome, SCAN_ADMITTED);
	/* another ticket's code under the same nonce: refused, b not admitted */
	assert_int_equal(scan_as(code_b, "East door", "aaaaaaaaaaaaaaaa", "n-7", &r),
			 SD_CONFLICT);
	assert_non_null(strstr(err_msg(), "nonce"));
	assert_int_equal(scan_as("forged-code", "East door", "aaaaaaaaaaaaaaaa", "n-7", &r),
			 SD_CONFLICT);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM tickets WHERE "
				   "scanned_at IS NOT NULL"), 1);
	/* the door's token revoked, a new one under the same name: its n-7
	 * is a new scan of b's code (admitted), not a's stored answer */
	assert_int_equal(scan_as(code_b, "East door", "bbbbbbbbbbbbbbbb", "n-7", &r), SD_OK);
	assert_int_equal(r.outcome, SCAN_ADMITTED);
	assert_int_equal(r.replayed, 0);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM tickets WHERE "
				   "scanned_at IS NOT NULL"), 2);
	expect_checks_hold();
}

/* Forged codes grow one count a door a minute, not a row each; the log's
 * rows go scan_log_retention after their event starts, the counts stay. */
static void test_scan_flood_counted_and_log_pruned(void **state)
{
	char a[ORDER_ID_MAX], code[CODE_TEXT_MAX], nonce[32];
	struct scan_result r;
	struct scan_stats *st = malloc(sizeof *st);
	int64_t n = -1, now = clock_now_ms();
	int i;

	(void)state;
	assert_non_null(st);
	order("Pia Pohl", "pia@example.org", 1, a);
	drain();
	first_code(a, code);
	scan(code, "West door", "w-0", &r);
	for (i = 1; i <= 500; i++) {
		snprintf(nonce, sizeof nonce, "w-%d", i);
		scan("forged-code-of-a-flood", "West door", nonce, &r);
		assert_int_equal(r.outcome, SCAN_INVALID);
	}
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM scans"), 1);
	assert_true(tu_countf(F.env->db_path, "SELECT count(*) FROM scan_minutes") <= 2);
	assert_int_equal(scan_stats_get(F.env->db, F.event_id, 0, st), SD_OK);
	assert_int_equal(st->n_doors, 1);
	assert_int_equal(st->doors[0].admitted, 1);
	assert_int_equal(st->doors[0].refused, 500);

	/* the event starts within the hour: a day's retention keeps its log */
	assert_int_equal(scan_log_prune(F.full, 24 * 3600 * 1000LL, now, 100, &n), SD_OK);
	assert_int_equal(n, 0);
	/* 31 days on, 30 days' retention: the row goes, the counts stay */
	assert_int_equal(scan_log_prune(F.full, 30 * 24 * 3600 * 1000LL,
					 now + 31 * 24 * 3600 * 1000LL, 100, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM scans"), 0);
	assert_int_equal(scan_stats_get(F.env->db, F.event_id, 0, st), SD_OK);
	assert_int_equal(st->doors[0].admitted, 1);
	assert_int_equal(st->doors[0].refused, 500);
	free(st);
	expect_checks_hold();
}

/* ======================== the pictures' data ============================= */

static void test_sales_by_the_hour_and_the_queue_history(void **state)
{
	struct event_hour h[EVENT_HOURS_MAX];
	struct queue_minute m[QUEUE_HISTORY_MINUTES];
	char id[ORDER_ID_MAX];
	int n = 0, written = 0;
	int64_t now = clock_now_ms();

	(void)state;
	order("Lu Lund", "lu@example.org", 2, id);
	order("Mo Mark", "mo@example.org", 1, id);
	assert_int_equal(event_sales(F.env->db, F.event_id, h, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(h[0].orders, 2);
	assert_int_equal(h[0].seats, 3);
	assert_int_equal(h[0].hour % 3600000, 0);

	assert_int_equal(queue_history_record(F.env->db, now - 60000, &written), SD_OK);
	assert_int_equal(written, 1);
	drain();
	assert_int_equal(queue_history_record(F.env->db, now, &written), SD_OK);
	assert_int_equal(written, 1);
	assert_int_equal(queue_history_record(F.env->db, now, &written), SD_OK);
	assert_int_equal(written, 0);	/* once a minute */
	assert_int_equal(queue_history_read(F.env->db, now, m, &n), SD_OK);
	assert_int_equal(n, 2);
	assert_int_equal(m[0].done, 0);	/* the first row of the hour */
	assert_int_equal(m[1].done, 6);	/* 2 orders x render, send, count */
	assert_int_equal(m[1].ready + m[1].leased + m[1].scheduled, 0);
	assert_true(m[1].minute > m[0].minute);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM queue_history"), 2);
}

/* ======================== ids as a person types them ===================== */

/* An order's public id names it in any case: a lookup, a resend, a new
 * address and a cancellation by "t..." reach order T..., and what they
 * make (the resend's job id, the change's row) names it as it was made;
 * a text that cannot be an id is no order. */
/* A walk-up buyer at the window: no address, the payment recorded; the
 * tickets are rendered and no email is owed, a resend is refused until an
 * address is given, then it reaches the buyer once.  A key sells once. */
static void test_walk_up_sale(void **state)
{
	struct order_new o = { F.event_id, "Wanda Walkup", NULL, 2, NULL, "cash" };
	struct order_detail *d = NULL;
	char id[ORDER_ID_MAX], again[ORDER_ID_MAX], keyed[ORDER_ID_MAX];
	int64_t n = 0;
	int replayed = 0, changed = 0;

	(void)state;
	assert_int_equal(order_add(F.full, &o, id, &replayed), SD_OK);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM orders WHERE public_id "
				   "= '%s' AND buyer_email IS NULL AND payment = 'cash'", id), 1);
	drain();
	assert_int_equal(order_detail_get(F.full, id, &d), SD_OK);
	assert_true(d->v.pdf_stored);
	assert_string_equal(d->v.buyer_email, "");
	assert_string_equal(d->v.payment, "cash");
	assert_int_equal(d->n_emails, 0);
	order_detail_free(d);
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM email_sends"), 0);
	assert_int_equal(messages_with("Wanda", NULL), 0);
	/* nothing to send to */
	assert_int_equal(order_resend(F.full, id, "cli (ops)", NULL, &n, NULL), SD_CONFLICT);
	assert_non_null(strstr(err_msg(), "no email address"));

	/* a key sells once; the same key with another payment is refused */
	o.seats = 1;
	o.idempotency_key = "window-1";
	assert_int_equal(order_add(F.full, &o, keyed, &replayed), SD_OK);
	assert_int_equal(replayed, 0);
	assert_int_equal(order_add(F.full, &o, again, &replayed), SD_OK);
	assert_int_equal(replayed, 1);
	assert_string_equal(again, keyed);
	o.payment = "card";
	assert_int_equal(order_add(F.full, &o, again, &replayed), SD_INVALID);
	o.idempotency_key = NULL;
	o.payment = "cheque";
	assert_int_equal(order_add(F.full, &o, again, &replayed), SD_INVALID);
	o.payment = "cash";
	o.email = "";
	assert_int_equal(order_add(F.full, &o, again, &replayed), SD_INVALID);
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM orders"), 2);

	/* an address given later: a resend reaches it, once */
	assert_int_equal(order_set_email(F.full, id, "wanda@example.org", "cli (ops)", &changed),
			 SD_OK);
	assert_int_equal(changed, 1);
	assert_int_equal(order_resend(F.full, id, "cli (ops)", NULL, &n, NULL), SD_OK);
	drain();
	assert_int_equal(messages_with("wanda@example.org", NULL), 1);
	expect_checks_hold();
	/* check counts the emails sent, not one per order: the resend alone */
	{
		struct check_report rep;

		assert_int_equal(check_db(F.env->db, tu_state(F.env), &rep), SD_OK);
		assert_int_equal(rep.emails_sent, 1);
	}
}

/* An event's life: moved while unsold, its start and venue kept once
 * sold, a capacity never below a seat sold, sales closed (no order from
 * then on, written or not), its doors still admitting. */
static void test_event_capacity_and_close(void **state)
{
	struct event_change c;
	char a[ORDER_ID_MAX], b[ORDER_ID_MAX], code[CODE_TEXT_MAX];
	struct event_view v;
	struct scan_result sr;
	int was = 0, replayed = 0;
	struct order_new late = { F.event_id, "Late", "late@example.org", 1, NULL, NULL };

	unsigned refused = 0;
	int64_t starts;

	(void)state;
	/* unsold, it moves: a new start and venue */
	starts = clock_now_ms() + 7200 * 1000;
	c = (struct event_change){ EVENT_SET_STARTS | EVENT_SET_VENUE, NULL, "Studio", starts, 0 };
	assert_int_equal(event_set(F.full, F.event_id, &c, &v, &refused), SD_OK);
	assert_int_equal(v.starts_at, starts);
	assert_string_equal(v.venue, "Studio");
	/* a start in the past is refused */
	c = (struct event_change){ EVENT_SET_STARTS, NULL, NULL, clock_now_ms() - 60000, 0 };
	assert_int_equal(event_set(F.full, F.event_id, &c, &v, NULL), SD_INVALID);
	assert_non_null(strstr(err_msg(), "past"));

	order("Ann", "ann@example.org", 1, a);
	order("Bob", "bob@example.org", 2, b);	/* seats 1..3 of 4 */
	c = (struct event_change){ EVENT_SET_CAPACITY, NULL, NULL, 0, 2 };
	assert_int_equal(event_set(F.full, F.event_id, &c, &v, &refused), SD_CONFLICT);
	assert_non_null(strstr(err_msg(), "cannot go below 3"));
	assert_int_equal(refused, EVENT_SET_CAPACITY);
	c.capacity = 3;
	assert_int_equal(event_set(F.full, F.event_id, &c, &v, NULL), SD_OK);
	assert_int_equal(v.capacity, 3);
	assert_int_equal(order_add(F.full, &late, b, &replayed), SD_SOLD_OUT);
	/* sold, a new start or venue is a move, each its own change, whose run
	 * tells the buyers (test_eventruns) */
	c = (struct event_change){ EVENT_SET_STARTS, NULL, NULL, starts + 3600 * 1000, 0 };
	assert_int_equal(event_set(F.full, F.event_id, &c, &v, &refused), SD_OK);
	assert_int_equal(refused, 0);
	assert_int_equal(v.change_no, 1);
	c = (struct event_change){ EVENT_SET_VENUE, NULL, "Garden", 0, 0 };
	assert_int_equal(event_set(F.full, F.event_id, &c, &v, &refused), SD_OK);
	assert_int_equal(v.change_no, 2);
	/* a name changes nothing else */
	c = (struct event_change){ EVENT_SET_NAME, "Renamed Night", NULL, 0, 0 };
	assert_int_equal(event_set(F.full, F.event_id, &c, &v, NULL), SD_OK);
	assert_int_equal(v.change_no, 2);
	assert_string_equal(v.name, "Renamed Night");
	assert_string_equal(v.venue, "Garden");
	assert_int_equal(v.starts_at, starts + 3600 * 1000);
	assert_int_equal(v.capacity, 3);
	assert_int_equal(v.seats_sold, 3);
	c = (struct event_change){ EVENT_SET_CAPACITY, NULL, NULL, 0, 4 };
	assert_int_equal(event_set(F.full, F.event_id, &c, &v, NULL), SD_OK);

	drain();
	assert_int_equal(event_close(F.full, F.event_id, &v, &was), SD_OK);
	assert_int_equal(was, 0);
	assert_true(v.closed_at > 0);
	assert_string_equal(event_state_name(&v, clock_now_ms()), "closed");
	assert_int_equal(event_close(F.full, F.event_id, &v, &was), SD_OK);
	assert_int_equal(was, 1);
	late.idempotency_key = "late-1";
	assert_int_equal(order_add(F.full, &late, b, &replayed), SD_CONFLICT);
	assert_non_null(strstr(err_msg(), "closed"));
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM orders"), 2);
	/* the doors still admit what was sold */
	first_code(a, code);
	scan(code, "Door A", NULL, &sr);
	assert_int_equal(sr.outcome, SCAN_ADMITTED);
	assert_int_equal(event_get(F.full, F.event_id, &v), SD_OK);
	assert_int_equal(v.admitted, 1);
	assert_int_equal(event_close(F.full, 999999, &v, &was), SD_NOT_FOUND);
	expect_checks_hold();
}

static void test_ids_in_any_case(void **state)
{
	char id[ORDER_ID_MAX], lower[ORDER_ID_MAX], norm[ORDER_ID_MAX], job[64];
	struct order_detail *d = NULL;
	struct order_cancel_result res;
	int64_t n = 0, oid;
	int changed = 0;
	size_t i;

	(void)state;
	order("Ida Wolf", "ida@example.org", 1, id);
	oid = order_key(id);
	for (i = 0; id[i]; i++)
		lower[i] = (char)tolower((unsigned char)id[i]);
	lower[i] = '\0';
	assert_string_not_equal(lower, id);
	assert_int_equal(order_id_norm(lower, norm), SD_OK);
	assert_string_equal(norm, id);
	assert_int_equal(order_id_norm("x123", norm), SD_INVALID);
	assert_int_equal(order_id_norm("t12 4", norm), SD_INVALID);
	assert_int_equal(order_id_norm("T", norm), SD_INVALID);

	assert_int_equal(order_detail_get(F.full, lower, &d), SD_OK);
	assert_string_equal(d->v.public_id, id);
	order_detail_free(d);
	assert_int_equal(order_resend(F.full, lower, "cli (ops)", NULL, &n, NULL), SD_OK);
	assert_int_equal(n, 1);
	snprintf(job, sizeof job, "outbox:%s:send-r1", id);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM outbox WHERE job_id = "
				   "'%s'", job), 1);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM outbox WHERE job_id = "
				   "'outbox:%s:send-r1'", lower), 0);
	assert_int_equal(order_set_email(F.full, lower, "ida2@example.org", "cli (ops)",
					 &changed), SD_OK);
	assert_int_equal(changed, 1);
	assert_int_equal(order_cancel(F.full, lower, "cli (ops)", NULL, &res), SD_OK);
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM order_changes WHERE "
				   "order_id = %lld", (long long)oid), 3);
	assert_int_equal(order_resend(F.full, "t!x", "x", NULL, &n, NULL), SD_NOT_FOUND);
	assert_int_equal(order_detail_get(F.full, "tnosuch22", &d), SD_NOT_FOUND);
	drain();
	expect_checks_hold();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_resend_waits_for_a_coming_pdf, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resend_is_a_new_intent_sent_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_resend_limit_per_day, setup, teardown),
		cmocka_unit_test_setup_teardown(test_new_address_gets_what_is_not_sent_yet, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_retry_after_a_new_address_goes_where_the_first_went, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_frees_seats_counts_back_and_mails_once,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_cancel_and_the_door, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_nonce_log_and_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_nonce_is_tied_to_its_code_and_token,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_flood_counted_and_log_pruned, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ids_in_any_case, setup, teardown),
		cmocka_unit_test_setup_teardown(test_walk_up_sale, setup, teardown),
		cmocka_unit_test_setup_teardown(test_event_capacity_and_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sales_by_the_hour_and_the_queue_history, setup,
						teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
