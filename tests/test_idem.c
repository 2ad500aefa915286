/*
 * test_idem.c: the four idempotency techniques (src/idem.h) under the races
 * that make a second run of a job (dist/doc/design.md §1.1).
 *
 * Each technique gets a scenario in which two runs of the same job race, on
 * two real threads with their own connections, and a failpoint hook that
 * blocks on a pthread barrier forces the bad interleaving: both renders past
 * the null check, one send holding its claim while the other runs, both
 * counter runs before their transactions.  Every scenario is a function of
 * the handler it runs, and runs twice: with the real handler (src/tickets.c),
 * which must leave a single effect, and with a naive variant written here
 * (read, act, write, without the technique), which must leave the duplicate.
 * The naive runs prove that the scenario can fail: if they stopped showing
 * the duplicate, the race was no longer being forced.
 *
 * Invariants of the harness:
 *  - cmocka assertions run on the main thread only; racing threads record
 *    what happened and the main thread judges it after joining them;
 *  - every racing thread meets the gate's barrier exactly once, at the
 *    failpoint or, when its run never passed it, after the handler returned,
 *    so a run that takes another path cannot leave the other waiting; tests
 *    assert which runs passed the failpoint, so the interleaving is checked,
 *    not assumed;
 *  - no sleeps: order comes from barriers alone, time from the fake clock;
 *    an alarm turns a barrier that is never met into a failed run, not a
 *    hung one.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob.h"
#include "clock.h"
#include "event_edit.h"
#include "events.h"
#include "failpoint.h"
#include "idem.h"
#include "log.h"
#include "mail.h"
#include "orders.h"
#include "outbox.h"
#include "queue.h"
#include "testutil.h"

#include "statedir.h"
#include "ticket_jobs.h"
#include "tickets.h"
#include "worker.h"

/* the first ticket email of an order: kind "tickets", key "tickets-<id>" */
static const struct tickets_intent FIRST_TICKETS = { TICKETS_MAIL_TICKETS, 0 };

#define SEATS 3			/* the fixture's order */
#define WATCHDOG_S 120		/* a test that takes longer is stuck on a barrier */

/* ======================== the fixture ==================================== */

/* One event, one order of SEATS seats (its outbox rows render_tickets and
 * update_sales_counter unpublished), the handlers' environment beside the
 * database, and two standalone handler contexts, one per racing run. */
struct fixture {
	struct tu_env *env;
	struct tickets_env *tenv;
	struct handler_ctx *ctx[2];
	int64_t event_id;
	int64_t order_id;
	char public_id[ORDER_ID_MAX];
};

static struct fixture F;

static void watchdog(int sig)
{
	static const char msg[] = "test_idem: a race never met its barrier; giving up\n";

	(void)sig;
	if (write(2, msg, sizeof msg - 1) < 0)
		_exit(125);
	_exit(124);
}

static const char SQL_ORDER_ID[] = "SELECT id FROM orders WHERE public_id = ?2";

static int64_t q_int(const char *sql, int64_t a1, const char *a2);

static int setup(void **state)
{
	struct event_new e = { "Die Zauberflöte", "Salle Zoë", 1900000000000LL, 100 };
	struct order_new o = { 0, "José Müller", "jose@example.org", SEATS, NULL };
	int replayed = -1;

	tu_setup(state);
	memset(&F, 0, sizeof F);
	F.env = *state;
	signal(SIGALRM, watchdog);
	alarm(WATCHDOG_S);
	if (statedir_init(F.env->db_path, tu_state(F.env)) != SD_OK ||
	    tickets_env_open(F.env->db_path, tu_state(F.env), NULL, NULL, NULL, &F.tenv) != SD_OK)
		fail_msg("tickets env: %s", err_msg());
	if (event_add(F.env->db, &e, &F.event_id) != SD_OK)
		fail_msg("event_add: %s", err_msg());
	o.event_id = F.event_id;
	if (order_add(F.env->db, &o, F.public_id, &replayed) != SD_OK)
		fail_msg("order_add: %s", err_msg());
	assert_int_equal(replayed, 0);
	F.order_id = q_int(SQL_ORDER_ID, 0, F.public_id);
	assert_true(F.order_id > 0);
	F.ctx[0] = handler_ctx_new(F.env->db_path, F.tenv);
	F.ctx[1] = handler_ctx_new(F.env->db_path, F.tenv);
	assert_non_null(F.ctx[0]);
	assert_non_null(F.ctx[1]);
	return 0;
}

static int teardown(void **state)
{
	failpoint_set_hook(NULL, NULL);
	alarm(0);
	handler_ctx_free(F.ctx[0]);
	handler_ctx_free(F.ctx[1]);
	tickets_env_close(F.tenv);
	memset(&F, 0, sizeof F);
	return tu_teardown(state);
}

/* ======================== reading back =================================== */

/* A single integer from sql (a static string: db_stmt keys on its address)
 * on the test's connection, ?1 bound to a1 and ?2 to a2; -1 for no row or
 * NULL. */
static int64_t q_int(const char *sql, int64_t a1, const char *a2)
{
	struct db_stmt *st = db_stmt(F.env->db, sql);
	int64_t v = -1;
	int row = 0;

	if (!st)
		fail_msg("%s: %s", sql, err_msg());
	db_bind_int(st, 1, a1);
	db_bind_text(st, 2, a2);
	if (db_step(st, &row) != SD_OK)
		fail_msg("%s: %s", sql, err_msg());
	if (row && !db_col_is_null(st, 0))
		v = db_col_int(st, 0);
	db_reset(st);
	return v;
}

/* ?1 or ?2 may go unused; binding a parameter a statement lacks is harmless */
static const char SQL_N_OUTBOX_KIND[] = "SELECT count(*) FROM outbox WHERE kind = ?2";
static const char SQL_OUTBOX_JOB[] =
	"SELECT job_id FROM outbox WHERE kind = ?1 ORDER BY id LIMIT 1";

/* outbox_job_of: the job id the outbox gave its first row of kind, into
 * buf; 0 when there is none */
static int outbox_job_of(const char *kind, char *buf, size_t size)
{
	struct db_stmt *st = db_stmt(F.env->db, SQL_OUTBOX_JOB);
	int row = 0;

	if (!st)
		fail_msg("%s: %s", SQL_OUTBOX_JOB, err_msg());
	db_bind_text(st, 1, kind);
	if (db_step(st, &row) != SD_OK)
		fail_msg("%s: %s", SQL_OUTBOX_JOB, err_msg());
	if (row)
		snprintf(buf, size, "%s", db_col_text(st, 0));
	db_reset(st);
	return row;
}
static const char SQL_N_PDF_KEY[] =
	"SELECT count(*) FROM tickets WHERE order_id = ?1 AND pdf_key = ?2";
static const char SQL_N_SENDS[] = "SELECT count(*) FROM email_sends WHERE order_id = ?1";
static const char SQL_SENT_AT[] =
	"SELECT sent_at FROM email_sends WHERE order_id = ?1 AND kind = 'tickets'";
static const char SQL_CLAIMED_AT[] =
	"SELECT claimed_at FROM email_sends WHERE order_id = ?1 AND kind = 'tickets'";
static const char SQL_PROVIDER_ID_IS[] =
	"SELECT count(*) FROM email_sends WHERE order_id = ?1 AND kind = 'tickets' "
	"AND provider_message_id = ?2";
static const char SQL_COUNTER_ORDERS[] = "SELECT orders FROM sales_counters WHERE event_id = ?1";
static const char SQL_COUNTER_SEATS[] =
	"SELECT seats_sold FROM sales_counters WHERE event_id = ?1";
static const char SQL_N_PROCESSED[] = "SELECT count(*) FROM processed_jobs WHERE job_id = ?2";

/* Files in dir/sub whose names do not start with '.' (temp files and the
 * entries . and .. do). */
static int n_files(const char *sub)
{
	char path[512];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof path, "%s/%s", F.env->dir, sub);
	if (!(dir = opendir(path)))
		return 0;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

static int file_exists(const char *sub, const char *name)
{
	char path[600];

	snprintf(path, sizeof path, "%s/%s/%s", F.env->dir, sub, name);
	return access(path, F_OK) == 0;
}

/* The PDFs the box's store holds: files under blobs/tickets, or on
 * PostgreSQL (blob_store = db) rows of the blobs table. */
static int n_pdfs(void)
{
	if (tu_pg())
		return (int)tu_countf(F.env->db_path, "SELECT count(*) FROM blobs WHERE key LIKE "
				      "'tickets/%%'");
	return n_files("blobs/tickets");
}

static int pdf_stored(const char *name)
{
	if (tu_pg())
		return tu_countf(F.env->db_path, "SELECT count(*) FROM blobs WHERE key = "
				 "'tickets/%s'", name) == 1;
	return file_exists("blobs/tickets", name);
}

/* Messages delivered into the default maildir. */
static int n_messages(void)
{
	return n_files("maildir/new");
}

/* ======================== jobs and runs ================================== */

/* A job as a claim would hand it over, with its strings inline. */
struct jobbuf {
	struct job job;
	char job_id[QUEUE_JOB_ID_MAX + 1];
	char kind[QUEUE_KIND_MAX + 1];
	char payload[200];
};

static void job_make(struct jobbuf *b, const char *kind, const char *outbox_kind,
		     int64_t deliveries, const char *payload)
{
	memset(b, 0, sizeof *b);
	/* the identity the relay gives it, or a minted one when no row exists */
	if (!outbox_job_of(outbox_kind, b->job_id, sizeof b->job_id))
		queue_mint_job_id(b->job_id);
	snprintf(b->kind, sizeof b->kind, "%s", kind);
	snprintf(b->payload, sizeof b->payload, "%s", payload);
	/* one stream entry, claimed `deliveries` times: the second run of a
	 * job is the same entry under a new lease (a reclaim) */
	b->job.id = 1;
	b->job.lease_token = deliveries;
	b->job.deliveries = deliveries;
	b->job.created_at = clock_now_ms();
	b->job.job_id = b->job_id;
	b->job.kind = b->kind;
	b->job.payload = b->payload;
}

static void render_job(struct jobbuf *b, int64_t deliveries)
{
	char p[64];

	snprintf(p, sizeof p, "{\"order_id\":%lld}", (long long)F.order_id);
	job_make(b, "render_tickets", "render_tickets", deliveries, p);
}

static void send_job(struct jobbuf *b, int64_t deliveries)
{
	char p[64];

	snprintf(p, sizeof p, "{\"order_id\":%lld}", (long long)F.order_id);
	job_make(b, "send_tickets", "send_tickets", deliveries, p);
}

static void count_payload(char *buf, size_t size)
{
	snprintf(buf, size, "{\"order_id\":%lld,\"event_id\":%lld,\"seats\":%d}",
		 (long long)F.order_id, (long long)F.event_id, SEATS);
}

static void count_job(struct jobbuf *b, int64_t deliveries)
{
	char p[160];

	count_payload(p, sizeof p);
	job_make(b, "update_sales_counter", "update_sales_counter", deliveries, p);
}

/* Run fn on ctx on this thread and expect outcome `want`. */
static struct job_result run_expect(handler_fn fn, struct handler_ctx *ctx, const struct job *job,
				    enum job_outcome want)
{
	struct job_result res;
	enum job_outcome got;

	memset(&res, 0, sizeof res);
	got = fn(ctx, job, &res);
	if (got != want)
		fail_msg("%s: outcome %d, expected %d (%s)", job->kind, (int)got, (int)want,
			 res.error);
	return res;
}

/* ======================== the gate: a barrier at a failpoint ============= */

/*
 * The first time a racing thread passes failpoint `at` it waits on the
 * barrier (2 parties); a racing thread whose run never passed `at` waits
 * after its handler returns.  So with two runs that both reach `at`, both
 * are past it before either goes on (render, count); with one run that
 * reaches it (a send that owns the claim), that run waits there until the
 * other run has finished entirely.
 */
struct gate {
	const char *at;
	pthread_barrier_t bar;
};

static _Thread_local int gate_passed;	/* this thread met the barrier at `at` */
static _Thread_local int gate_racer;	/* this thread is one of the racing runs */

static void gate_hook(const char *name, void *arg)
{
	struct gate *g = arg;

	if (!gate_racer || gate_passed || strcmp(name, g->at) != 0)
		return;
	gate_passed = 1;
	pthread_barrier_wait(&g->bar);
}

struct run {
	handler_fn fn;
	struct handler_ctx *ctx;
	const struct job *job;
	struct gate *gate;
	enum job_outcome out;
	struct job_result res;
	int passed;		/* the run passed the gate's failpoint */
};

static void *run_thread(void *arg)
{
	struct run *r = arg;

	gate_racer = 1;
	gate_passed = 0;
	memset(&r->res, 0, sizeof r->res);
	r->out = r->fn(r->ctx, r->job, &r->res);
	r->passed = gate_passed;
	if (!gate_passed) {	/* meet the other run, which may wait at the failpoint */
		gate_passed = 1;
		pthread_barrier_wait(&r->gate->bar);
	}
	return NULL;
}

/* race: run fn on job a (context 0) and job b (context 1) at once, the gate
 * at failpoint `at`.  [out] runs[0..1]. */
static void race(handler_fn fn, const char *at, const struct job *a, const struct job *b,
		 struct run runs[2])
{
	struct gate g = { .at = at };
	pthread_t t[2];
	int i;

	assert_int_equal(pthread_barrier_init(&g.bar, NULL, 2), 0);
	failpoint_set_hook(gate_hook, &g);
	for (i = 0; i < 2; i++) {
		memset(&runs[i], 0, sizeof runs[i]);
		runs[i].fn = fn;
		runs[i].ctx = F.ctx[i];
		runs[i].job = i == 0 ? a : b;
		runs[i].gate = &g;
		assert_int_equal(pthread_create(&t[i], NULL, run_thread, &runs[i]), 0);
	}
	for (i = 0; i < 2; i++)
		assert_int_equal(pthread_join(t[i], NULL), 0);
	failpoint_set_hook(NULL, NULL);
	pthread_barrier_destroy(&g.bar);
}

static void expect_run(const struct run *r, enum job_outcome want)
{
	if (r->out != want)
		fail_msg("%s: outcome %d, expected %d (%s)", r->job->kind, (int)r->out, (int)want,
			 r->res.error);
}

/* Count the passes of one failpoint (a run that went further than it should). */
struct count_passes {
	const char *at;
	atomic_int n;
};

static void count_hook(const char *name, void *arg)
{
	struct count_passes *c = arg;

	if (strcmp(name, c->at) == 0)
		atomic_fetch_add(&c->n, 1);
}

/* ======================== the naive handlers ============================= */

/* Each does what its real handler does, minus the technique: it reads, acts
 * and writes, with the same failpoints in the same windows. */

static const char SQL_NAIVE_SET_PDF[] = "UPDATE tickets SET pdf_key = ?1 WHERE order_id = ?2";

/* render_tickets without the conditional write: every run that passed the
 * null check marks the order and queues the email. */
static enum job_outcome naive_render(struct handler_ctx *ctx, const struct job *job,
				     struct job_result *res)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	struct order_view v;
	struct db_stmt *st;
	char key[BLOB_KEY_MAX], payload[64];
	int64_t order_id = 0;

	if (!db || job_arg_int(job, "order_id", &order_id) != SD_OK)
		return job_failf(res, 1, "setup: %s", err_msg());
	if (tickets_load_order(db, order_id, &v) != SD_OK)
		return job_failf(res, 0, "load: %s", err_msg());
	if (v.pdf_stored)
		return JOB_DONE;
	failpoint(FP_RENDER_CHECKED);
	if (tickets_render_store(env, &v) != SD_OK)
		return job_failf(res, 0, "render: %s", err_msg());
	failpoint(FP_RENDER_STORED);
	tickets_pdf_key(&v, key, sizeof key);
	snprintf(payload, sizeof payload, "{\"order_id\":%lld}", (long long)order_id);
	if (db_begin(db) != SD_OK)
		return job_failf(res, 0, "begin: %s", err_msg());
	if (!(st = db_stmt(db, SQL_NAIVE_SET_PDF)))
		goto fail;
	db_bind_text(st, 1, key);
	db_bind_int(st, 2, order_id);
	if (db_run(st) != SD_OK || outbox_add(db, "send_tickets", NULL, payload, 0, 0, NULL) != SD_OK)
		goto fail;
	if (db_commit(db) != SD_OK)
		return job_failf(res, 0, "commit: %s", err_msg());
	return JOB_DONE;
fail:
	db_rollback(db);
	return job_failf(res, 0, "mark: %s", err_msg());
}

/* The ticket email with a per-attempt provider key "tickets-<id>-<attempt>":
 * what tickets_send_mail does, with the key it must not use. */
static enum sd_result naive_mail(struct tickets_env *env, const struct order_view *v,
				 int64_t attempt, struct mail_result *mr)
{
	char key[BLOB_KEY_MAX], idem[64], fname[64];
	unsigned char *pdf = NULL;
	size_t len = 0;
	struct mail_attachment att;
	struct mail_message m;
	enum sd_result r;

	tickets_pdf_key(v, key, sizeof key);
	if ((r = blob_get(env->blobs, key, &pdf, &len)) != SD_OK)
		return r;
	snprintf(idem, sizeof idem, "tickets-%lld-%lld", (long long)v->id, (long long)attempt);
	snprintf(fname, sizeof fname, "tickets-%s.pdf", v->public_id);
	memset(&att, 0, sizeof att);
	att.filename = fname;
	att.content_type = "application/pdf";
	att.data = pdf;
	att.len = len;
	memset(&m, 0, sizeof m);
	m.from = env->mail_from;
	m.to = v->buyer_email;
	m.to_name = v->buyer_name;
	m.subject = "Your tickets";
	m.text = "Your tickets are attached.\n";
	m.attachments = &att;
	m.n_attachments = 1;
	m.idempotency_key = idem;
	r = mail_send(env->mail, &m, mr);
	free(pdf);
	return r;
}

static const char SQL_NAIVE_SENT[] =
	"SELECT sent_at IS NOT NULL FROM email_sends WHERE order_id = ?1 AND kind = 'tickets'";
static const char SQL_NAIVE_MARK[] =
	"INSERT INTO email_sends (order_id, kind, claimed_at, sent_at, provider_message_id) "
	"VALUES (?1, 'tickets', ?2, ?2, ?3) ON CONFLICT (order_id, kind) DO UPDATE SET "
	"sent_at = excluded.sent_at, provider_message_id = excluded.provider_message_id";

/* send_tickets without the claim and with a per-attempt key: check sent_at
 * IS NULL, send, then write sent_at; the check and the effect are apart. */
static enum job_outcome naive_send(struct handler_ctx *ctx, const struct job *job,
				   struct job_result *res)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	struct mail_result mr;
	struct order_view v;
	struct db_stmt *st;
	int64_t order_id = 0;
	int row = 0, sent = 0;

	if (!db || job_arg_int(job, "order_id", &order_id) != SD_OK)
		return job_failf(res, 1, "setup: %s", err_msg());
	if (tickets_load_order(db, order_id, &v) != SD_OK || !v.pdf_stored)
		return job_failf(res, 0, "load: %s", err_msg());
	if (!(st = db_stmt(db, SQL_NAIVE_SENT)))
		return job_failf(res, 0, "check: %s", err_msg());
	db_bind_int(st, 1, order_id);
	if (db_step(st, &row) != SD_OK)
		return job_failf(res, 0, "check: %s", err_msg());
	sent = row && db_col_int(st, 0);
	db_reset(st);
	if (sent)
		return JOB_DONE;
	failpoint(FP_SEND_CLAIMED);	/* the window between the check and the send */
	if (naive_mail(env, &v, job->deliveries, &mr) != SD_OK)
		return job_failf(res, 0, "send: %s", err_msg());
	failpoint(FP_SEND_SENT);
	if (!(st = db_stmt(db, SQL_NAIVE_MARK)))
		return job_failf(res, 0, "mark: %s", err_msg());
	db_bind_int(st, 1, order_id);
	db_bind_int(st, 2, clock_now_ms());
	db_bind_text(st, 3, mr.message_id);
	if (db_run(st) != SD_OK)
		return job_failf(res, 0, "mark: %s", err_msg());
	return JOB_DONE;
}

static const char SQL_NAIVE_COUNT[] =
	"INSERT INTO sales_counters (event_id, orders, seats_sold) VALUES (?1, 1, ?2) "
	"ON CONFLICT (event_id) DO UPDATE SET orders = sales_counters.orders + 1, "
	"seats_sold = sales_counters.seats_sold + excluded.seats_sold";

/* update_sales_counter without processed_jobs: the increment alone. */
static enum job_outcome naive_count(struct handler_ctx *ctx, const struct job *job,
				    struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct db_stmt *st;
	int64_t event_id = 0, seats = 0;

	if (!db || job_arg_int(job, "event_id", &event_id) != SD_OK ||
	    job_arg_int(job, "seats", &seats) != SD_OK)
		return job_failf(res, 1, "setup: %s", err_msg());
	failpoint(FP_COUNT_BEFORE);
	if (db_begin(db) != SD_OK)
		return job_failf(res, 0, "begin: %s", err_msg());
	if (!(st = db_stmt(db, SQL_NAIVE_COUNT))) {
		db_rollback(db);
		return job_failf(res, 0, "count: %s", err_msg());
	}
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, seats);
	if (db_run(st) != SD_OK) {
		db_rollback(db);
		return job_failf(res, 0, "count: %s", err_msg());
	}
	if (db_commit(db) != SD_OK)
		return job_failf(res, 0, "commit: %s", err_msg());
	return JOB_DONE;
}

/* ======================== the primitives ================================= */

static void test_effect_claim_as_the_clock_moves(void **state)
{
	enum idem_claim c = IDEM_DONE;
	struct db *db = F.env->db;
	int64_t t0 = clock_now_ms(), at = -1, at2 = -1;

	(void)state;
	assert_int_equal(idem_effect_claim(db, F.order_id, "tickets", IDEM_STALE_MS, &c, &at),
			 SD_OK);
	assert_int_equal(c, IDEM_CLAIMED);
	assert_int_equal(at, t0);
	assert_int_equal(q_int(SQL_CLAIMED_AT, F.order_id, NULL), t0);
	assert_int_equal(q_int(SQL_SENT_AT, F.order_id, NULL), -1);

	/* a second run at once, and up to exactly 2 minutes later: held, and
	 * told when the holder claimed it */
	assert_int_equal(idem_effect_claim(db, F.order_id, "tickets", IDEM_STALE_MS, &c, &at2),
			 SD_OK);
	assert_int_equal(c, IDEM_HELD);
	assert_int_equal(at2, t0);
	clock_fake_advance(IDEM_STALE_MS);
	at2 = -1;
	assert_int_equal(idem_effect_claim(db, F.order_id, "tickets", IDEM_STALE_MS, &c, &at2),
			 SD_OK);
	assert_int_equal(c, IDEM_HELD);
	assert_int_equal(at2, t0);
	assert_int_equal(q_int(SQL_CLAIMED_AT, F.order_id, NULL), t0);

	/* older than 2 minutes: taken over, with a fresh claim time */
	clock_fake_advance(1);
	assert_int_equal(idem_effect_claim(db, F.order_id, "tickets", IDEM_STALE_MS, &c, &at2),
			 SD_OK);
	assert_int_equal(c, IDEM_CLAIMED);
	assert_int_equal(at2, t0 + IDEM_STALE_MS + 1);
	assert_int_equal(q_int(SQL_CLAIMED_AT, F.order_id, NULL), t0 + IDEM_STALE_MS + 1);
	assert_int_equal(idem_effect_claim(db, F.order_id, "tickets", IDEM_STALE_MS, &c, NULL),
			 SD_OK);
	assert_int_equal(c, IDEM_HELD);

	/* the run whose claim was taken over can neither mark nor release it */
	assert_int_equal(idem_effect_done(db, F.order_id, "tickets", at, "m-old@x"), SD_OK);
	assert_int_equal(q_int(SQL_SENT_AT, F.order_id, NULL), -1);
	assert_int_equal(idem_effect_release(db, F.order_id, "tickets", at), SD_OK);
	assert_int_equal(q_int(SQL_CLAIMED_AT, F.order_id, NULL), t0 + IDEM_STALE_MS + 1);

	/* done by the owner: done for ever, however stale the claim */
	assert_int_equal(idem_effect_done(db, F.order_id, "tickets", at2, "m-1@x"), SD_OK);
	assert_int_equal(q_int(SQL_SENT_AT, F.order_id, NULL), t0 + IDEM_STALE_MS + 1);
	assert_int_equal(q_int(SQL_PROVIDER_ID_IS, F.order_id, "m-1@x"), 1);
	assert_int_equal(idem_effect_claim(db, F.order_id, "tickets", IDEM_STALE_MS, &c, NULL),
			 SD_OK);
	assert_int_equal(c, IDEM_DONE);
	clock_fake_advance(10 * IDEM_STALE_MS);
	assert_int_equal(idem_effect_claim(db, F.order_id, "tickets", IDEM_STALE_MS, &c, NULL),
			 SD_OK);
	assert_int_equal(c, IDEM_DONE);

	/* another kind of effect for the same subject is its own row; a
	 * released claim is claimable again at once */
	assert_int_equal(idem_effect_claim(db, F.order_id, "reminder", IDEM_STALE_MS, &c, &at),
			 SD_OK);
	assert_int_equal(c, IDEM_CLAIMED);
	assert_int_equal(q_int(SQL_N_SENDS, F.order_id, NULL), 2);
	assert_int_equal(idem_effect_claim(db, F.order_id, "reminder", IDEM_STALE_MS, &c, NULL),
			 SD_OK);
	assert_int_equal(c, IDEM_HELD);
	assert_int_equal(idem_effect_release(db, F.order_id, "reminder", at), SD_OK);
	assert_int_equal(idem_effect_claim(db, F.order_id, "reminder", IDEM_STALE_MS, &c, NULL),
			 SD_OK);
	assert_int_equal(c, IDEM_CLAIMED);
	assert_false(db_in_tx(db));
}

static void test_once_needs_tx_then_first_once(void **state)
{
	struct db *db = F.env->db;
	int first = -1;

	(void)state;
	/* outside a transaction it refuses and records nothing */
	assert_int_equal(idem_once(db, "job-1", "update_sales_counter", &first), SD_INVALID);
	assert_int_equal(first, 0);
	assert_int_equal(q_int(SQL_N_PROCESSED, 0, "job-1"), 0);

	/* a rolled-back transaction takes the record with it */
	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(idem_once(db, "job-1", "update_sales_counter", &first), SD_OK);
	assert_int_equal(first, 1);
	db_rollback(db);
	assert_int_equal(q_int(SQL_N_PROCESSED, 0, "job-1"), 0);

	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(idem_once(db, "job-1", "update_sales_counter", &first), SD_OK);
	assert_int_equal(first, 1);
	assert_int_equal(idem_once(db, "job-1", "update_sales_counter", &first), SD_OK);
	assert_int_equal(first, 0);
	assert_int_equal(db_commit(db), SD_OK);

	assert_int_equal(db_begin(db), SD_OK);
	assert_int_equal(idem_once(db, "job-1", "update_sales_counter", &first), SD_OK);
	assert_int_equal(first, 0);
	assert_int_equal(idem_once(db, "job-2", "update_sales_counter", &first), SD_OK);
	assert_int_equal(first, 1);
	assert_int_equal(db_commit(db), SD_OK);
	assert_int_equal(q_int(SQL_N_PROCESSED, 0, "job-1"), 1);
	assert_int_equal(q_int(SQL_N_PROCESSED, 0, "job-2"), 1);
}

static void test_provider_key_format(void **state)
{
	char buf[64], small[8];

	(void)state;
	idem_provider_key(buf, sizeof buf, "tickets", "TCGVUH2R8A");
	assert_string_equal(buf, "tickets-TCGVUH2R8A");
	idem_provider_key(buf, sizeof buf, "refund", "TX");
	assert_string_equal(buf, "refund-TX");
	/* a short buffer is cut, never overrun */
	memset(small, 'x', sizeof small);
	idem_provider_key(small, sizeof small, "tickets", "TCGVUH2R8A");
	assert_string_equal(small, "tickets");
}

static const char SQL_CONDITIONAL[] =
	"UPDATE tickets SET pdf_key = ?1 WHERE order_id = ?2 AND pdf_key IS NULL RETURNING id";

static void test_conditional_won_once(void **state)
{
	struct db *db = F.env->db;
	struct db_stmt *st;
	int won = -1, pass;

	(void)state;
	for (pass = 0; pass < 2; pass++) {
		assert_int_equal(db_begin(db), SD_OK);
		st = db_stmt(db, SQL_CONDITIONAL);
		assert_non_null(st);
		db_bind_text(st, 1, "tickets/x.pdf");
		db_bind_int(st, 2, F.order_id);
		assert_int_equal(idem_conditional(db, st, &won), SD_OK);
		assert_int_equal(db_commit(db), SD_OK);
		assert_int_equal(won, pass == 0);
	}
	assert_int_equal(q_int(SQL_N_PDF_KEY, F.order_id, "tickets/x.pdf"), SEATS);
}

/* ======================== 1. check state, conditional write ============= */

/* Two render_tickets runs, both past the null check before either writes.
 * [out] runs.  Returns the send_tickets rows in the outbox. */
static int64_t render_race(handler_fn fn, struct run runs[2])
{
	struct jobbuf a, b;

	render_job(&a, 1);
	render_job(&b, 2);
	race(fn, FP_RENDER_CHECKED, &a.job, &b.job, runs);
	expect_run(&runs[0], JOB_DONE);
	expect_run(&runs[1], JOB_DONE);
	/* the interleaving happened: both runs saw pdf_key null */
	assert_true(runs[0].passed && runs[1].passed);
	return q_int(SQL_N_OUTBOX_KIND, 0, "send_tickets");
}

/* The PDF as it is stored, and as a fresh render into another store. */
static void assert_pdf_is_a_fresh_render(void)
{
	struct tickets_env fresh = *F.tenv;
	struct order_view v;
	char key[BLOB_KEY_MAX], dir[400];
	unsigned char *stored = NULL, *again = NULL;
	size_t n_stored = 0, n_again = 0;

	assert_int_equal(tickets_load_order(F.env->db, F.order_id, &v), SD_OK);
	tickets_pdf_key(&v, key, sizeof key);
	assert_int_equal(blob_get(F.tenv->blobs, key, &stored, &n_stored), SD_OK);
	snprintf(dir, sizeof dir, "%s/fresh", F.env->dir);
	assert_int_equal(blob_open(dir, &fresh.blobs), SD_OK);
	assert_int_equal(tickets_render_store(&fresh, &v), SD_OK);
	assert_int_equal(blob_get(fresh.blobs, key, &again, &n_again), SD_OK);
	blob_close(fresh.blobs);
	assert_true(n_stored > 1000);
	assert_memory_equal(stored, "%PDF-", 5);
	assert_int_equal(n_stored, n_again);
	assert_memory_equal(stored, again, n_stored);
	free(stored);
	free(again);
}

static void test_render_race_queues_one_send(void **state)
{
	struct count_passes passes = { .at = FP_RENDER_CHECKED };
	struct run runs[2];
	struct jobbuf c;
	char key[BLOB_KEY_MAX], name[64];

	(void)state;
	assert_int_equal(render_race(ticket_job_render, runs), 1);
	/* one file under the order's fixed key, nothing else left behind */
	snprintf(name, sizeof name, "%s.pdf", F.public_id);
	assert_int_equal(n_pdfs(), 1);
	assert_true(pdf_stored(name));
	snprintf(key, sizeof key, "tickets/%s", name);
	assert_int_equal(q_int(SQL_N_PDF_KEY, F.order_id, key), SEATS);
	assert_pdf_is_a_fresh_render();

	/* a third delivery finds the state reached: it neither renders again
	 * (never passes the null check) nor adds anything */
	render_job(&c, 3);
	failpoint_set_hook(count_hook, &passes);
	run_expect(ticket_job_render, F.ctx[0], &c.job, JOB_DONE);
	failpoint_set_hook(NULL, NULL);
	assert_int_equal(atomic_load(&passes.n), 0);
	assert_int_equal(q_int(SQL_N_OUTBOX_KIND, 0, "send_tickets"), 1);
	assert_int_equal(n_pdfs(), 1);
}

static void test_naive_render_race_queues_two_sends(void **state)
{
	struct run runs[2];

	(void)state;
	assert_int_equal(render_race(naive_render, runs), 2);
	/* the fixed key kept the store right; the email is queued twice */
	assert_int_equal(n_pdfs(), 1);
}

/* ======================== 2 and 3. the claim and the provider's key ====== */

/* What every send scenario starts from: the PDF rendered and stored, the
 * send_tickets row queued by the render. */
static void render_first(void)
{
	struct jobbuf r;

	render_job(&r, 1);
	run_expect(ticket_job_render, F.ctx[0], &r.job, JOB_DONE);
	assert_int_equal(q_int(SQL_N_OUTBOX_KIND, 0, "send_tickets"), 1);
	assert_int_equal(n_messages(), 0);
}

/* Two send_tickets runs of the same job (the original and the reclaimed
 * entry): the run that passes FP_SEND_CLAIMED (for the real handler, the one
 * that owns the claim; for the naive one, every run past its check) waits
 * there until the other run has finished.  Returns the messages delivered. */
static int send_race(handler_fn fn, struct run runs[2])
{
	struct jobbuf a, b;

	render_first();
	send_job(&a, 1);
	send_job(&b, 2);
	race(fn, FP_SEND_CLAIMED, &a.job, &b.job, runs);
	return n_messages();
}

static void assert_sent_once(void)
{
	char name[64], id[96];

	snprintf(name, sizeof name, "tickets-%s.eml", F.public_id);
	snprintf(id, sizeof id, "tickets-%s@stagedoor.invalid", F.public_id);
	assert_int_equal(n_messages(), 1);
	assert_true(file_exists("maildir/new", name));
	/* one key was ever used: "tickets-<the order's public id>" */
	assert_int_equal(n_files("maildir/.idem"), 1);
	snprintf(name, sizeof name, "tickets-%s", F.public_id);
	assert_true(file_exists("maildir/.idem", name));
	assert_int_equal(q_int(SQL_N_SENDS, F.order_id, NULL), 1);
	assert_true(q_int(SQL_SENT_AT, F.order_id, NULL) > 0);
	assert_int_equal(q_int(SQL_PROVIDER_ID_IS, F.order_id, id), 1);
}

/* A worker sets the staleness from its send_tickets lease: the held run
 * comes back just past that, not after the 2 min default. */
static void test_send_race_claim_stale_from_env(void **state)
{
	struct run runs[2];
	int owner;

	(void)state;
	F.tenv->claim_stale_ms = 7000;
	assert_int_equal(send_race(ticket_job_send, runs), 1);
	owner = runs[0].passed ? 0 : 1;
	expect_run(&runs[owner], JOB_DONE);
	expect_run(&runs[!owner], JOB_RETRY_LATER);
	assert_int_equal(runs[!owner].res.delay_ms, 7001);
	assert_sent_once();
	F.tenv->claim_stale_ms = 0;
}

static void test_send_race_one_message(void **state)
{
	struct run runs[2];
	struct jobbuf c;
	int owner;

	(void)state;
	assert_int_equal(send_race(ticket_job_send, runs), 1);
	/* exactly one run owned the claim; the other found it fresh and held */
	assert_int_equal(runs[0].passed + runs[1].passed, 1);
	owner = runs[0].passed ? 0 : 1;
	expect_run(&runs[owner], JOB_DONE);
	expect_run(&runs[!owner], JOB_RETRY_LATER);
	/* back just past the stale limit: sent by then, or stale and ours */
	assert_int_equal(runs[!owner].res.delay_ms, IDEM_STALE_MS + 1);
	assert_int_equal(runs[!owner].res.delay_ms, 120001);
	assert_sent_once();

	/* the snoozed run comes back: the row says sent */
	clock_fake_advance(IDEM_STALE_MS);
	send_job(&c, 3);
	run_expect(ticket_job_send, F.ctx[1], &c.job, JOB_DONE);
	assert_sent_once();
}

static void test_naive_send_race_two_messages(void **state)
{
	struct run runs[2];

	(void)state;
	assert_int_equal(send_race(naive_send, runs), 2);
	/* both runs read sent_at null, both sent, both marked */
	assert_true(runs[0].passed && runs[1].passed);
	expect_run(&runs[0], JOB_DONE);
	expect_run(&runs[1], JOB_DONE);
	assert_int_equal(n_files("maildir/.idem"), 2);
}

/*
 * The slow worker: run A claims and stalls before sending (paused at
 * FP_SEND_CLAIMED); a run B meanwhile is held while the claim is fresh,
 * takes it over once it is older than 2 minutes, and sends; then A wakes and
 * sends too.  One message: the claim passed to B, and A's late send carries
 * the same provider key.
 */
struct pause {
	const char *at;
	atomic_int hit;
	pthread_barrier_t reached;	/* the paused thread is at `at` */
	pthread_barrier_t resume;	/* the main thread lets it go on */
};

static void pause_hook(const char *name, void *arg)
{
	struct pause *p = arg;
	int expected = 0;

	if (strcmp(name, p->at) != 0 || !atomic_compare_exchange_strong(&p->hit, &expected, 1))
		return;
	pthread_barrier_wait(&p->reached);
	pthread_barrier_wait(&p->resume);
}

static void *send_thread(void *arg)
{
	struct run *r = arg;

	memset(&r->res, 0, sizeof r->res);
	r->out = r->fn(r->ctx, r->job, &r->res);
	return NULL;
}

static void test_send_stale_claim_taken_over_once(void **state)
{
	struct pause p = { .at = FP_SEND_CLAIMED };
	struct jobbuf a, b1, b2;
	struct job_result res;
	struct run ra;
	pthread_t t;
	int64_t t_claim;

	(void)state;
	render_first();
	send_job(&a, 1);
	send_job(&b1, 2);
	send_job(&b2, 3);
	assert_int_equal(pthread_barrier_init(&p.reached, NULL, 2), 0);
	assert_int_equal(pthread_barrier_init(&p.resume, NULL, 2), 0);
	failpoint_set_hook(pause_hook, &p);
	memset(&ra, 0, sizeof ra);
	ra.fn = ticket_job_send;
	ra.ctx = F.ctx[0];
	ra.job = &a.job;
	assert_int_equal(pthread_create(&t, NULL, send_thread, &ra), 0);
	pthread_barrier_wait(&p.reached);	/* A owns a fresh claim, has not sent */
	t_claim = q_int(SQL_CLAIMED_AT, F.order_id, NULL);
	assert_int_equal(t_claim, clock_now_ms());

	res = run_expect(ticket_job_send, F.ctx[1], &b1.job, JOB_RETRY_LATER);
	assert_int_equal(res.delay_ms, 120001);
	clock_fake_advance(IDEM_STALE_MS);	/* exactly 2 minutes: still fresh */
	res = run_expect(ticket_job_send, F.ctx[1], &b1.job, JOB_RETRY_LATER);
	assert_int_equal(n_messages(), 0);

	clock_fake_advance(1);			/* older than 2 minutes: B takes over */
	run_expect(ticket_job_send, F.ctx[1], &b2.job, JOB_DONE);
	assert_int_equal(q_int(SQL_CLAIMED_AT, F.order_id, NULL), t_claim + IDEM_STALE_MS + 1);
	assert_sent_once();

	pthread_barrier_wait(&p.resume);	/* A wakes up and finishes its send */
	assert_int_equal(pthread_join(t, NULL), 0);
	failpoint_set_hook(NULL, NULL);
	pthread_barrier_destroy(&p.reached);
	pthread_barrier_destroy(&p.resume);
	expect_run(&ra, JOB_DONE);
	assert_sent_once();
}

/* A run that dies after its send and before sent_at, then the retry once the
 * claim is stale.  The dead run is played here step by step: fn's own claim
 * (real) or check (naive), its send, and no mark.  Returns the messages. */
static int send_die_then_retry(handler_fn fn, int with_claim)
{
	struct mail_result mr;
	struct order_view v;
	struct jobbuf retry;
	enum idem_claim c;

	render_first();
	assert_int_equal(tickets_load_order(F.env->db, F.order_id, &v), SD_OK);
	assert_true(v.pdf_stored);
	if (with_claim) {
		assert_int_equal(idem_effect_claim(F.env->db, F.order_id, "tickets",
						   IDEM_STALE_MS, &c, NULL), SD_OK);
		assert_int_equal(c, IDEM_CLAIMED);
		assert_int_equal(tickets_send_mail(F.tenv, &v, &FIRST_TICKETS, NULL, &mr), SD_OK);
	} else {
		assert_int_equal(q_int(SQL_N_SENDS, F.order_id, NULL), 0);
		assert_int_equal(naive_mail(F.tenv, &v, 1, &mr), SD_OK);
	}
	assert_int_equal(mr.duplicate, 0);
	assert_int_equal(n_messages(), 1);
	/* ... and the process dies here: the email left, sent_at is not set */
	assert_int_equal(q_int(SQL_SENT_AT, F.order_id, NULL), -1);

	clock_fake_advance(IDEM_STALE_MS + 1);
	send_job(&retry, 2);
	run_expect(fn, F.ctx[0], &retry.job, JOB_DONE);
	return n_messages();
}

static void test_send_retry_after_death_same_key(void **state)
{
	(void)state;
	assert_int_equal(send_die_then_retry(ticket_job_send, 1), 1);
	/* the retry re-claimed the stale row, sent with the same key (the
	 * provider answered with the first message's id) and marked it */
	assert_sent_once();
}

static void test_naive_send_retry_after_death_two_messages(void **state)
{
	(void)state;
	assert_int_equal(send_die_then_retry(naive_send, 0), 2);
	assert_int_equal(n_files("maildir/.idem"), 2);
	assert_true(q_int(SQL_SENT_AT, F.order_id, NULL) > 0);
}

/* ======================== 4. the job id as the key ======================= */

static void assert_counter(int64_t orders, int64_t seats)
{
	assert_int_equal(q_int(SQL_COUNTER_ORDERS, F.event_id, NULL), orders);
	assert_int_equal(q_int(SQL_COUNTER_SEATS, F.event_id, NULL), seats);
}

/* One job delivered twice, one run after the other.  Returns the orders
 * counted. */
static int64_t count_twice(handler_fn fn)
{
	struct jobbuf a, b;

	count_job(&a, 1);
	count_job(&b, 2);
	assert_string_equal(a.job_id, b.job_id);
	assert_int_equal(strncmp(a.job_id, "outbox:", 7), 0);
	run_expect(fn, F.ctx[0], &a.job, JOB_DONE);
	run_expect(fn, F.ctx[1], &b.job, JOB_DONE);
	return q_int(SQL_COUNTER_ORDERS, F.event_id, NULL);
}

/* The same job on two threads, both before their transactions. */
static int64_t count_race(handler_fn fn)
{
	struct run runs[2];
	struct jobbuf a, b;

	count_job(&a, 1);
	count_job(&b, 2);
	race(fn, FP_COUNT_BEFORE, &a.job, &b.job, runs);
	expect_run(&runs[0], JOB_DONE);
	expect_run(&runs[1], JOB_DONE);
	assert_true(runs[0].passed && runs[1].passed);
	return q_int(SQL_COUNTER_ORDERS, F.event_id, NULL);
}

/* The relay's duplicate: the outbox row published, and a second stream
 * entry with the same outbox id (a relay that crashed between publishing
 * and marking).  Both are claimed from the stream, two entries with two
 * entry ids and one job id, and run at once. */
static int64_t count_relay_duplicate(handler_fn fn)
{
	struct job *claimed[8], *mine[2];
	struct run runs[2];
	struct enqueue e;
	char job_id[QUEUE_JOB_ID_MAX + 1], payload[160];
	int64_t n = 0;
	int got = 0, i, k = 0;

	assert_int_equal(outbox_relay_batch(F.env->db, 100, &n), SD_OK);
	assert_int_equal(n, 2);		/* render_tickets and update_sales_counter */
	assert_true(outbox_job_of("update_sales_counter", job_id, sizeof job_id));
	count_payload(payload, sizeof payload);
	memset(&e, 0, sizeof e);
	e.kind = "update_sales_counter";
	e.payload = payload;
	e.job_id = job_id;
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	assert_int_equal(queue_claim(F.env->db, "w", 8, 0, claimed, &got), SD_OK);
	assert_int_equal(got, 3);
	for (i = 0; i < got; i++) {
		if (strcmp(claimed[i]->kind, "update_sales_counter") == 0 && k < 2)
			mine[k++] = claimed[i];
	}
	assert_int_equal(k, 2);
	assert_true(mine[0]->id != mine[1]->id);
	assert_string_equal(mine[0]->job_id, job_id);
	assert_string_equal(mine[1]->job_id, job_id);
	race(fn, FP_COUNT_BEFORE, mine[0], mine[1], runs);
	for (i = 0; i < got; i++)
		job_free(claimed[i]);
	expect_run(&runs[0], JOB_DONE);
	expect_run(&runs[1], JOB_DONE);
	assert_true(runs[0].passed && runs[1].passed);
	return q_int(SQL_COUNTER_ORDERS, F.event_id, NULL);
}

static void test_count_delivered_twice_counts_once(void **state)
{
	char job_id[QUEUE_JOB_ID_MAX + 1];

	(void)state;
	assert_int_equal(count_twice(ticket_job_count), 1);
	assert_counter(1, SEATS);
	assert_true(outbox_job_of("update_sales_counter", job_id, sizeof job_id));
	assert_int_equal(q_int(SQL_N_PROCESSED, 0, job_id), 1);
}

static void test_count_race_counts_once(void **state)
{
	(void)state;
	assert_int_equal(count_race(ticket_job_count), 1);
	assert_counter(1, SEATS);
}

static void test_count_relay_duplicate_counts_once(void **state)
{
	(void)state;
	assert_int_equal(count_relay_duplicate(ticket_job_count), 1);
	assert_counter(1, SEATS);
}

static void test_naive_count_delivered_twice_counts_twice(void **state)
{
	(void)state;
	assert_int_equal(count_twice(naive_count), 2);
	assert_counter(2, 2 * SEATS);
}

static void test_naive_count_race_counts_twice(void **state)
{
	(void)state;
	assert_int_equal(count_race(naive_count), 2);
	assert_counter(2, 2 * SEATS);
}

static void test_naive_count_relay_duplicate_counts_twice(void **state)
{
	(void)state;
	assert_int_equal(count_relay_duplicate(naive_count), 2);
	assert_counter(2, 2 * SEATS);
}

/* A send that fails gives its claim back: the retry follows the job's
 * backoff instead of waiting 2 minutes for the claim to go stale, and still
 * makes one message. */
static void test_failed_send_releases_claim(void **state)
{
	struct job_result res;
	struct jobbuf a, b;
	char mdir[600], hidden[640];
	enum idem_claim c;

	(void)state;
	render_first();
	send_job(&a, 1);
	snprintf(mdir, sizeof mdir, "%s/maildir/tmp", F.env->dir);
	snprintf(hidden, sizeof hidden, "%s.away", mdir);
	assert_int_equal(rename(mdir, hidden), 0);	/* the transport cannot write */
	/* the maildir's disk failed: the job waits, no attempt counted */
	res = run_expect(ticket_job_send, F.ctx[0], &a.job, JOB_RETRY_LATER);
	assert_true(res.io && res.delay_ms > 0);
	assert_int_equal(n_messages(), 0);
	assert_int_equal(q_int(SQL_CLAIMED_AT, F.order_id, NULL), 0);
	assert_int_equal(q_int(SQL_SENT_AT, F.order_id, NULL), -1);
	/* claimable at once, not held */
	assert_int_equal(idem_effect_claim(F.env->db, F.order_id, "tickets", IDEM_STALE_MS, &c,
					   NULL), SD_OK);
	assert_int_equal(c, IDEM_CLAIMED);
	assert_int_equal(idem_effect_release(F.env->db, F.order_id, "tickets", clock_now_ms()),
			 SD_OK);

	assert_int_equal(rename(hidden, mdir), 0);
	send_job(&b, 2);
	run_expect(ticket_job_send, F.ctx[1], &b.job, JOB_DONE);
	assert_int_equal(n_messages(), 1);
}

/* ======================== the "duplicate absorbed" lines ================= */

/* stderr goes to a file while a scenario runs; the lines are counted after. */
struct capture {
	char path[400];
	int saved;
};

static void capture_start(struct capture *c)
{
	int fd;

	snprintf(c->path, sizeof c->path, "%s/stderr.log", F.env->dir);
	fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	c->saved = dup(2);
	assert_true(c->saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	close(fd);
	log_set_level(LOG_INFO);
}

/* capture_end: restore stderr; [out] the captured text (free()). */
static char *capture_end(struct capture *c)
{
	size_t n;
	char *text;

	fflush(stderr);
	assert_int_equal(dup2(c->saved, 2), 2);
	close(c->saved);
	text = (char *)tu_slurp(c->path, &n);
	assert_non_null(text);
	return text;
}

/* Lines that hold both needles. */
static int n_lines_with(const char *text, const char *a, const char *b)
{
	const char *line = text;
	int n = 0;

	while (*line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[2048];

		snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1),
			 line);
		if (strstr(buf, a) && strstr(buf, b))
			n++;
		line += len + (end ? 1 : 0);
	}
	return n;
}

static int n_absorbed(const char *text, const char *technique)
{
	char t[64];

	snprintf(t, sizeof t, "technique=%s ", technique);
	return n_lines_with(text, "msg=\"duplicate absorbed\"", t);
}

static void assert_no_personal_data(const char *text)
{
	assert_null(strstr(text, "jose@example.org"));
	assert_null(strstr(text, "Müller"));
}

/* render_tickets delivered twice: the first run logs nothing, the second
 * finds pdf_key set and logs one check_state line naming the job and order. */
static void test_log_render_duplicate_once(void **state)
{
	struct jobbuf a, b;
	struct capture c;
	char *text, want[64];

	(void)state;
	render_job(&a, 1);
	render_job(&b, 2);
	capture_start(&c);
	run_expect(ticket_job_render, F.ctx[0], &a.job, JOB_DONE);
	text = capture_end(&c);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", ""), 0);
	free(text);

	capture_start(&c);
	run_expect(ticket_job_render, F.ctx[1], &b.job, JOB_DONE);
	text = capture_end(&c);
	assert_int_equal(n_absorbed(text, "check_state"), 1);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", ""), 1);
	snprintf(want, sizeof want, "order=%s", F.public_id);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", want), 1);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", b.job_id), 1);
	assert_no_personal_data(text);
	free(text);
}

/* The other check_state path: both runs passed the null check, and the one
 * that stored second lost the conditional update.  The winner runs whole
 * inside the loser's failpoint (no transaction is open there). */
static void lose_hook(const char *name, void *arg)
{
	static _Thread_local int inside;
	const struct job *winner = arg;
	struct job_result res;

	if (inside || strcmp(name, FP_RENDER_STORED) != 0)
		return;
	inside = 1;
	memset(&res, 0, sizeof res);
	if (ticket_job_render(F.ctx[1], winner, &res) != JOB_DONE)
		fail_msg("the winning render failed: %s", res.error);
	inside = 0;
}

static void test_log_render_lost_update_once(void **state)
{
	struct jobbuf a, b;
	struct capture c;
	char *text;

	(void)state;
	render_job(&a, 1);
	render_job(&b, 2);
	capture_start(&c);
	failpoint_set_hook(lose_hook, &b.job);
	run_expect(ticket_job_render, F.ctx[0], &a.job, JOB_DONE);
	failpoint_set_hook(NULL, NULL);
	text = capture_end(&c);
	assert_int_equal(q_int(SQL_N_OUTBOX_KIND, 0, "send_tickets"), 1);
	assert_int_equal(n_absorbed(text, "check_state"), 1);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", a.job_id), 1);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", ""), 1);
	free(text);
}

/* send_tickets delivered twice after the email went: one unique_claim line. */
static void test_log_send_duplicate_once(void **state)
{
	struct jobbuf a, b;
	struct capture c;
	char *text, want[64];

	(void)state;
	render_first();
	send_job(&a, 1);
	send_job(&b, 2);
	capture_start(&c);
	run_expect(ticket_job_send, F.ctx[0], &a.job, JOB_DONE);
	text = capture_end(&c);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", ""), 0);
	free(text);

	capture_start(&c);
	run_expect(ticket_job_send, F.ctx[1], &b.job, JOB_DONE);
	text = capture_end(&c);
	assert_int_equal(n_messages(), 1);
	assert_int_equal(n_absorbed(text, "unique_claim"), 1);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", ""), 1);
	snprintf(want, sizeof want, "order=%s", F.public_id);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", want), 1);
	assert_no_personal_data(text);
	free(text);
}

/* send_tickets while another run holds a fresh claim: one unique_claim line
 * for the run that backs off. */
static void test_log_send_held_once(void **state)
{
	struct jobbuf b;
	struct capture c;
	enum idem_claim claim;
	char *text;

	(void)state;
	render_first();
	assert_int_equal(idem_effect_claim(F.env->db, F.order_id, "tickets", IDEM_STALE_MS,
					   &claim, NULL), SD_OK);
	assert_int_equal(claim, IDEM_CLAIMED);
	send_job(&b, 2);
	capture_start(&c);
	run_expect(ticket_job_send, F.ctx[1], &b.job, JOB_RETRY_LATER);
	text = capture_end(&c);
	assert_int_equal(n_messages(), 0);
	assert_int_equal(n_absorbed(text, "unique_claim"), 1);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", ""), 1);
	free(text);
}

/* update_sales_counter delivered twice: one processed_jobs line. */
static void test_log_count_duplicate_once(void **state)
{
	struct jobbuf a, b;
	struct capture c;
	char *text, want[64];

	(void)state;
	count_job(&a, 1);
	count_job(&b, 2);
	capture_start(&c);
	run_expect(ticket_job_count, F.ctx[0], &a.job, JOB_DONE);
	text = capture_end(&c);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", ""), 0);
	free(text);

	capture_start(&c);
	run_expect(ticket_job_count, F.ctx[1], &b.job, JOB_DONE);
	text = capture_end(&c);
	assert_counter(1, SEATS);
	assert_int_equal(n_absorbed(text, "processed_jobs"), 1);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", ""), 1);
	snprintf(want, sizeof want, "order=%lld", (long long)F.order_id);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", want), 1);
	assert_int_equal(n_lines_with(text, "duplicate absorbed", b.job_id), 1);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_effect_claim_as_the_clock_moves),
		T(test_once_needs_tx_then_first_once),
		T(test_provider_key_format),
		T(test_conditional_won_once),
		T(test_render_race_queues_one_send),
		T(test_naive_render_race_queues_two_sends),
		T(test_send_race_one_message),
		T(test_send_race_claim_stale_from_env),
		T(test_naive_send_race_two_messages),
		T(test_send_stale_claim_taken_over_once),
		T(test_send_retry_after_death_same_key),
		T(test_failed_send_releases_claim),
		T(test_naive_send_retry_after_death_two_messages),
		T(test_count_delivered_twice_counts_once),
		T(test_count_race_counts_once),
		T(test_count_relay_duplicate_counts_once),
		T(test_naive_count_delivered_twice_counts_twice),
		T(test_naive_count_race_counts_twice),
		T(test_naive_count_relay_duplicate_counts_twice),
		T(test_log_render_duplicate_once),
		T(test_log_render_lost_update_once),
		T(test_log_send_duplicate_once),
		T(test_log_send_held_once),
		T(test_log_count_duplicate_once),
#undef T
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
