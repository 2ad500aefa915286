/*
 * bench_shop.c: `stagedoor-bench shop`, the public shop against a local
 * Stripe-like provider: checkouts per second through the shop's listener,
 * and how long a paid hold takes to become its order, each way the box
 * learns of the payment.
 *
 *   stagedoor-bench shop [--rounds R] [--buyers B] [--checkouts N] [--alone M]
 *                        [--pays P] [--pay-rate R] [--returns Q] [--reconciles K]
 *                        [--unpaid-share PCT] [--paysink PATH] [--paysink-dir DIR]
 *                        [--paysink-slow-ms N] [--stagedoor PATH] [--json] [--keep]
 *
 * Each round makes two fresh boxes (as `init` makes one, one priced event
 * with room for every seat), each with the product's own parts around it:
 * the shop listening in this process (shop_start on 127.0.0.1, as
 * tests/test_shop.c and `stagedoor shop` start it), tools/paysink as the
 * provider, reached over HTTP by the shop's own client (stripe.c), and
 * `stagedoor relay` and `stagedoor worker` as processes of their own (the
 * release binary, configured by the environment: payment_provider =
 * stripe, paysink's URL and key), so that the reconcile jobs the holds
 * queue are published and run as a box runs them.  The database is a
 * SQLite file in WAL mode; holds, sessions and orders commit FULL.
 *
 * The buyers come through the shop's trusted reverse proxy (127.0.0.1):
 * each buyer has an X-Forwarded-For address and an email of its own, as
 * buyers on the internet do, so the per-client and per-email caps (the
 * defaults, 4 and 2) never stop one; the checkout rate limit is off
 * (shop_rate 0).  B client threads, each on a keep-alive connection, take
 * the buyers of a phase in turn.
 *
 * Box A: webhooks on time (paysink without faults), holds of 10 minutes.
 *
 *   alone      M/2 before and M/2 after the checkouts, one at a time on
 *              this thread, the three steps of a checkout without HTTP,
 *              each timed: hold_add (the hold's FULL transaction), the
 *              provider's session (stripe_checkout_create, the shop's
 *              client, paysink over HTTP), hold_set_session (the second
 *              FULL transaction);
 *   checkouts  N buyers: GET /e/{id} (the form token and its cookie), then
 *              POST /e/{id}/checkout (csrf, seats, name, email), each
 *              answered 303 to paysink's payment page.  checkouts/s = N /
 *              wall time; a checkout's latency is both requests; CPU time
 *              per checkout of the shop (this process less the client
 *              threads), the clients, paysink, the relay and the worker;
 *   webhooks   P of those sessions paid (POST /_paysink/pay/{session}),
 *              one at a time, paced at R a second; paysink delivers
 *              checkout.session.completed at once and the shop's webhook
 *              makes the order.  Latency: from the pay call's return until
 *              this thread sees the hold ordered (a look every 0.1 ms on
 *              its own connection; 0 when it was ordered already), and
 *              from the pay call's start to the order row's created_at
 *              (the real clock, 1 ms steps, taken before the commit).
 *
 * Box B: webhooks never (paysink --drop-pct 100), holds of 1 second (set
 * in the shop's rules directly: the settings' least is a minute).
 *
 *   returns    Q buyers check out, pay on paysink's page (POST /pay/{id},
 *              303 back to the shop) and follow it: GET /h/{link}?paid=1
 *              looks the session up at the provider and makes the order;
 *              its latency, each answered 200 "Thank you";
 *   reconcile  K buyers check out and pay (POST /_paysink/pay/{session});
 *              no webhook comes, so the order waits for the hold's
 *              reconcile job (shop_jobs.h), queued HOLD_RECONCILE_DELAY_MS
 *              after the hold's end and run by the worker process.
 *              Latency: the order's created_at less the hold's expires_at.
 *
 * The shop's unpaid holds may take only shop_unpaid_share of an event's
 * seats (--unpaid-share, the box's default 25 %); a buyer past it waits in
 * line (line.h), which would leave this bench's buyers waiting for holds
 * that last 10 minutes.  So each event has as many seats again as keep
 * every hold of the round inside the share (4 times the holds' seats at
 * 25 %, as many at 100 %): the checkout does all the line's counting, no
 * buyer waits.  `bench line` measures the waiting.
 *
 * --paysink-slow-ms N has paysink hold each API POST N ms (a provider far
 * away): the shop makes its provider call on the HTTP server's threads.
 *
 * Every figure comes from a run in which every answer was the one
 * expected, every paid hold became its order (within BS_WAIT_MS) and
 * pay_check found the shop's invariants intact; else the command fails.
 * Reported: the median over the rounds of each round's figure, with the
 * range.  The machine's facts (cores, the engine, the durability, an
 * fsync's cost in the bench folder) come first.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "bench.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "bench_shopbox.h"
#include "bench_http.h"
#include "clock.h"
#include "db.h"
#include "event_edit.h"
#include "events.h"
#include "holds.h"
#include "payments.h"
#include "pipeline.h"
#include "stripe.h"

#define BS_ROUNDS_DEFAULT 5
#define BS_ROUNDS_MAX 9
#define BS_BUYERS_DEFAULT 8
#define BS_BUYERS_MAX 32
#define BS_CHECKOUTS_DEFAULT 400
#define BS_ALONE_DEFAULT 100
#define BS_PAYS_DEFAULT 200
#define BS_PAY_RATE_DEFAULT 100
#define BS_RETURNS_DEFAULT 100
#define BS_RECONCILES_DEFAULT 100
#define BS_TTL_B_MS 1000		/* box B's holds */
#define BS_WAIT_MS 60000		/* the longest wait for paid holds' orders */
#define BS_SESSION_MAX 128
#define BS_FSYNCS 20

/* ======================== what a round measures ========================== */

struct bs_round {
	/* box A */
	double co_per_s, co_p50, co_p99;	/* a checkout: GET + POST */
	double get_p50, post_p50, post_p99;
	double cpu_shop, cpu_clients, cpu_paysink, cpu_relay, cpu_worker;	/* ms/checkout */
	double cpu_total, busy_cores;
	double hold_p50, hold_p99;		/* hold_add alone */
	double prov_p50, prov_p99;		/* stripe_checkout_create alone */
	double prov_first_p50, prov_last_p50;	/* before and after the checkouts */
	double sess_p50;			/* hold_set_session alone */
	double alone_sum;			/* the three p50s */
	double pay_p50;				/* the pay call */
	double hook_p50, hook_p99, hook_max;	/* pay's return to the order seen */
	double hook_seen_ret;			/* orders already there at the return, % */
	double hook_c50, hook_c99;		/* pay's start to the order's created_at */
	/* box B */
	double ret_p50, ret_p99;		/* GET /h/...?paid=1 */
	double rec_p50, rec_p99, rec_min;	/* the hold's end to the order */
	double rec_over_p50, rec_over_p99;	/* less HOLD_RECONCILE_DELAY_MS */
};

struct bs_args {
	int64_t rounds, buyers, checkouts, alone, pays, pay_rate, returns, reconciles, slow_ms;
	int64_t unpaid_share;			/* the shop's; 0: the box's default */
	const char *paysink, *stagedoor, *paysink_dir;
	char paysink_buf[PATH_MAX], stagedoor_buf[PATH_MAX];
	struct bs_round r[BS_ROUNDS_MAX];
	int64_t orders, holds;			/* in all the rounds' boxes */
	double fsync_p50_ms;
	char journal[16];
};

/* a fresh box in parent/tag: paysink (drop: every webhook dropped), the
 * relay, a worker and the shop with hold rules ru, its event of capacity
 * seats */
static enum sd_result bs_box_start(const struct bs_args *a, const char *parent, const char *tag,
				   int drop, const struct hold_rules *ru, int64_t capacity,
				   struct bench_shopbox *b)
{
	char slow[24];
	const char *more[8];
	struct bench_shopbox_opts o = { a->paysink, a->paysink_dir, more, a->stagedoor, *ru,
					capacity, 2 * BS_BUYERS_MAX + 16 };
	int n = 0;

	if (drop) {
		more[n++] = "--drop-pct";
		more[n++] = "100";
	}
	if (a->slow_ms > 0) {
		snprintf(slow, sizeof slow, "%lld", (long long)a->slow_ms);
		more[n++] = "--slow-ms";
		more[n++] = slow;
	}
	more[n] = NULL;
	return bench_shopbox_start(parent, tag, &o, b);
}

/* the event's seats for a round whose holds take seats: all of them, and
 * with the share under 100 % as many more as keep those holds inside it (a
 * buyer past the share waits in line, which `bench line` measures) */
static int64_t bs_share(const struct bs_args *a)
{
	return a->unpaid_share ? a->unpaid_share : HOLD_UNPAID_SHARE_DEFAULT;
}

static int64_t bs_capacity(const struct bs_args *a, int64_t seats)
{
	return (seats * 100 + bs_share(a) - 1) / bs_share(a);
}

/* ======================== the buyers ===================================== */

enum { BS_CHECKOUT, BS_RETURN, BS_PAID };

/* One phase, shared by its client threads. */
struct bs_run {
	const struct bench_shopbox *box;
	int kind;			/* BS_*: what each buyer does */
	int64_t n;			/* buyers this phase */
	int64_t base;			/* the first buyer's number (unique in the box) */
	int clients;
	atomic_llong next;		/* the next buyer to take */
	int64_t *co_us, *get_us, *post_us, *ret_us;	/* [n] */
	char (*session)[BS_SESSION_MAX];		/* [n] */
	struct bench_failure fail;	/* the first failure of its threads */
};

struct bs_client {
	pthread_t th;
	struct bs_run *run;
	int64_t cpu_us;			/* the thread's CPU time in the phase */
	int64_t end_us;
};

/* one request to c; 0 with *status and *body, or -1 (failed named) */
static int bs_call(struct bs_run *run, struct bench_http *c, const char *what, const char *req,
		   int *status, const char **body)
{
	size_t len = 0;

	if (bench_http_call(c, req, strlen(req), status, body, &len) != 0) {
		bench_fail(&run->fail, "%s: %s", what, c->err);
		return -1;
	}
	return 0;
}

/* buyer k's address behind the proxy: 10.x.y.z, one each */
static void bs_xff(int64_t k, char *out, size_t size)
{
	snprintf(out, size, "10.%d.%d.%d", (int)((k >> 16) & 255), (int)((k >> 8) & 255),
		 (int)(k & 255));
}

/* buyer no's checkout: the event page, then the form; [out] session, the
 * path of paysink's page; timings into run's arrays at i */
static int bs_checkout(struct bs_run *run, struct bench_http *shop, int64_t i, int64_t no)
{
	char fields[256], tok[BENCH_SHOP_TOKEN_LEN + 1], xff[32], loc[HOLD_URL_MAX], pay[64];
	int status, port = run->box->shop_port;
	int64_t t0, t1, t2, ev = run->box->event_id;

	bs_xff(no, xff, sizeof xff);
	t0 = clock_mono_us();
	if (bench_buyer_token(shop, port, ev, xff, tok) != 0) {
		bench_fail(&run->fail, "buyer %lld: %s", (long long)no, shop->err);
		return -1;
	}
	t1 = clock_mono_us();
	snprintf(fields, sizeof fields, "seats=%d&name=Bench+Buyer+%lld&email=buyer%lld"
		 "%%40example.com", (int)(no % 3) + 1, (long long)no, (long long)no);
	if (bench_buyer_checkout(shop, port, ev, xff, tok, fields, &status, loc,
				 sizeof loc) != 0) {
		bench_fail(&run->fail, "buyer %lld: POST /e/%lld/checkout: %s", (long long)no,
			   (long long)ev, shop->err);
		return -1;
	}
	t2 = clock_mono_us();
	snprintf(pay, sizeof pay, "http://127.0.0.1:%d/pay/", run->box->ps_port);
	if (status != 303 || strncmp(loc, pay, strlen(pay)) != 0 ||
	    strlen(loc + strlen(pay)) >= BS_SESSION_MAX) {
		bench_fail(&run->fail, "buyer %lld: POST /e/%lld/checkout answered %d, not 303 to "
			   "paysink's page: %.200s", (long long)no, (long long)ev, status, loc);
		return -1;
	}
	snprintf(run->session[i], BS_SESSION_MAX, "%s", loc + strlen(pay));
	run->get_us[i] = t1 - t0;
	run->post_us[i] = t2 - t1;
	run->co_us[i] = t2 - t0;
	return 0;
}

/* pay session at paysink: the test control (200), or with page the
 * buyer's Pay button (303 back to the shop: [out] back, its path) */
static int bs_pay(struct bs_run *run, struct bench_http *ps, const char *session, int page,
		  char *back, size_t size)
{
	char req[512], loc[HOLD_URL_MAX], what[BS_SESSION_MAX + 32], origin[64];
	const char *body;
	int status;

	snprintf(req, sizeof req, "POST /%s/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
		 "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 0\r\n\r\n",
		 page ? "pay" : "_paysink/pay", session, run->box->ps_port);
	snprintf(what, sizeof what, "pay %s", session);
	if (bs_call(run, ps, what, req, &status, &body) != 0)
		return -1;
	if (!page) {
		if (status == 200)
			return 0;
		bench_fail(&run->fail, "%s answered %d: %.200s", what, status, body);
		return -1;
	}
	snprintf(origin, sizeof origin, "http://127.0.0.1:%d/h/", run->box->shop_port);
	if (status != 303 || !bench_http_header(ps, "Location", loc, sizeof loc) ||
	    strncmp(loc, origin, strlen(origin)) != 0) {
		bench_fail(&run->fail,
			   "%s (the page's button) answered %d, not 303 back to the shop: %.200s",
			   what, status, body);
		return -1;
	}
	snprintf(back, size, "%s", loc + strlen(origin) - 3);
	return 0;
}

/* the buyer's return: GET /h/{link}?paid=1, the order made by it */
static int bs_return(struct bs_run *run, struct bench_http *shop, int64_t i, int64_t no,
		     const char *path)
{
	char req[HOLD_URL_MAX + 256], xff[32];
	const char *body;
	int status;
	int64_t t0;

	bs_xff(no, xff, sizeof xff);
	snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Forwarded-For: %s\r\n"
		 "Accept: text/html\r\n\r\n", path, run->box->shop_port, xff);
	t0 = clock_mono_us();
	if (bs_call(run, shop, "the return", req, &status, &body) != 0)
		return -1;
	run->ret_us[i] = clock_mono_us() - t0;
	if (status != 200 || !strstr(body, "<h1>Thank you</h1>")) {
		bench_fail(&run->fail, "buyer %lld: GET %s answered %d without its order: %.300s",
			   (long long)no, path, status, body);
		return -1;
	}
	return 0;
}

static void *bs_client_main(void *arg)
{
	struct bs_client *c = arg;
	struct bs_run *run = c->run;
	struct bench_http shop, ps;
	char back[HOLD_URL_MAX];
	int64_t i, cpu0 = pipeline_thread_cpu_us();

	bench_http_init(&shop, run->box->shop_port);
	bench_http_init(&ps, run->box->ps_port);
	while (!atomic_load(&run->fail.failed) &&
	       (i = atomic_fetch_add(&run->next, 1)) < run->n) {
		int64_t no = run->base + i;

		if (bs_checkout(run, &shop, i, no) != 0)
			break;
		if (run->kind == BS_PAID && bs_pay(run, &ps, run->session[i], 0, NULL, 0) != 0)
			break;
		if (run->kind == BS_RETURN &&
		    (bs_pay(run, &ps, run->session[i], 1, back, sizeof back) != 0 ||
		     bs_return(run, &shop, i, no, back) != 0))
			break;
	}
	c->end_us = clock_mono_us();
	c->cpu_us = pipeline_thread_cpu_us() - cpu0;
	bench_http_close(&shop);
	bench_http_close(&ps);
	return NULL;
}

/* bs_phase: n buyers of kind over run->clients threads; [out] *wall_us,
 * *client_cpu_us */
static enum sd_result bs_phase(struct bs_run *run, int kind, int64_t n, int64_t *wall_us,
			       int64_t *client_cpu_us)
{
	struct bs_client cl[BS_BUYERS_MAX];
	int64_t t0, end = 0;
	int k, started;

	memset(cl, 0, sizeof cl);
	run->kind = kind;
	run->n = n;
	atomic_store(&run->next, 0);
	atomic_store(&run->fail.failed, 0);
	*client_cpu_us = 0;
	t0 = clock_mono_us();
	for (started = 0; started < run->clients; started++) {
		cl[started].run = run;
		if (pthread_create(&cl[started].th, NULL, bs_client_main, &cl[started]) != 0) {
			bench_fail(&run->fail, "cannot start a client thread");
			break;
		}
	}
	for (k = 0; k < started; k++) {
		pthread_join(cl[k].th, NULL);
		if (cl[k].end_us > end)
			end = cl[k].end_us;
		*client_cpu_us += cl[k].cpu_us;
	}
	*wall_us = end - t0;
	if (atomic_load(&run->fail.failed))
		return err_set(SD_IO, "%s", run->fail.err);
	run->base += n;
	return SD_OK;
}

/* ======================== the database's side ============================ */

static enum sd_result bs_count(struct db *db, const char *sql, int64_t *n)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r = SD_OK;

	*n = 0;
	if (!st)
		return SD_DB;
	if (db_next(st, &r))
		*n = db_col_int(st, 0);
	db_reset(st);
	return r;
}

/* [out] *ordered: session's hold has its order (committed) */
static enum sd_result bs_hold_ordered(struct db *db, const char *session, int *ordered)
{
	static const char sql[] = "SELECT state FROM holds WHERE session_id = ?1";
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r = SD_OK;

	*ordered = 0;
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, session);
	*ordered = db_next(st, &r) && strcmp(db_col_text(st, 0), "ordered") == 0;
	db_reset(st);
	return r;
}

/* wait until the holds of sessions[0..n) are all ordered */
static enum sd_result bs_wait_ordered(struct db *db, char (*session)[BS_SESSION_MAX], int64_t n,
				      const char *what)
{
	int64_t deadline = clock_mono_us() + BS_WAIT_MS * 1000LL, i = 0;
	enum sd_result r;
	int ordered;

	while (i < n) {
		if ((r = bs_hold_ordered(db, session[i], &ordered)) != SD_OK)
			return r;
		if (ordered) {
			i++;
			continue;
		}
		if (clock_mono_us() > deadline)
			return err_set(SD_TIMEOUT, "%s: the hold of session %s has no order after %d s "
				       "(%lld of %lld ordered)", what, session[i], BS_WAIT_MS / 1000,
				       (long long)i, (long long)n);
		usleep(20000);
	}
	return SD_OK;
}

/* [out] *created: session's order's created_at; *expires: its hold's end */
static enum sd_result bs_order_times(struct db *db, const char *session, int64_t *created,
				     int64_t *expires)
{
	static const char sql[] = "SELECT o.created_at, h.expires_at FROM holds h JOIN orders o "
				  "ON o.id = h.order_id WHERE h.session_id = ?1";
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r = SD_OK;
	int row;

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, session);
	row = db_next(st, &r);
	if (row) {
		*created = db_col_int(st, 0);
		*expires = db_col_int(st, 1);
	}
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_DB, "session %s: no order", session);
	return r;
}

static int64_t bs_real_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ======================== box A ========================================== */

/* the checkout's three steps without HTTP, m times, at no; into us[0..m)
 * of each */
static enum sd_result bs_alone(struct bench_shopbox *b, int64_t m, int64_t no, int64_t *hold_us,
			       int64_t *prov_us, int64_t *sess_us)
{
	char name[64], email[64], client[32], item[128], ok[256], back[256];
	struct stripe_session ss;
	struct hold_view h;
	enum sd_result r;
	int64_t i, t0, t1, t2, t3;

	for (i = 0; i < m; i++, no++) {
		struct hold_new hn = { b->event_id, no % 3 + 1, name, email, client };
		struct hold_rules ru = { .renewals = -1 };
		struct stripe_checkout c;

		snprintf(name, sizeof name, "Alone Buyer %lld", (long long)no);
		snprintf(email, sizeof email, "alone%lld@example.com", (long long)no);
		bs_xff(no, client, sizeof client);
		t0 = clock_mono_us();
		if ((r = hold_add(b->db, &hn, &ru, &h)) != SD_OK)
			return r;
		t1 = clock_mono_us();
		/* what the shop's session_for sends */
		snprintf(item, sizeof item, "Stagedoor Shop Night, a date");
		snprintf(ok, sizeof ok, "http://127.0.0.1:%d/h/%s?paid=1", b->shop_port, h.link);
		snprintf(back, sizeof back, "http://127.0.0.1:%d/h/%s", b->shop_port, h.link);
		c = (struct stripe_checkout){ h.public_id, item, h.amount_minor / h.seats, h.seats,
					      h.currency, h.email, ok, back,
					      h.created_at / 1000 + STRIPE_SESSION_MIN_S + 60 };
		if ((r = stripe_checkout_create(b->stripe, &c, &ss)) != SD_OK)
			return r;
		t2 = clock_mono_us();
		if ((r = hold_set_session(b->db, h.id, ss.id, ss.url, &h)) != SD_OK)
			return r;
		t3 = clock_mono_us();
		hold_us[i] = t1 - t0;
		prov_us[i] = t2 - t1;
		sess_us[i] = t3 - t2;
	}
	return SD_OK;
}

static double bs_p(int64_t *v, int64_t n, double p)
{
	bench_sort_i64(v, n);
	return bench_pct_ms(v, n, p);
}

/* webhooks on time: p of box A's sessions paid, paced at a->pay_rate; each
 * order's latency from its payment (pay_us, back_us, seen_us, lat: p each) */
static enum sd_result bs_hooks_on_time(struct bs_args *a, struct bs_run *run,
				       struct bench_shopbox *b, struct bench_http *ps, int64_t p,
				       int64_t *pay_us, int64_t *back_us, int64_t *seen_us,
				       int64_t *lat, struct bs_round *res)
{
	int64_t t0 = clock_mono_us(), tp, tr, seen_at_return = 0, i, k, created, expires;
	enum sd_result r;
	int ordered;

	for (i = 0; i < p; i++) {
		int64_t due = t0 + i * 1000000 / a->pay_rate, now;

		while ((now = clock_mono_us()) < due)
			usleep((useconds_t)(due - now));
		back_us[i] = bs_real_us();	/* the pay's start, real clock */
		tp = clock_mono_us();
		if (bs_pay(run, ps, run->session[i], 0, NULL, 0) != 0)
			return err_set(SD_IO, "%s", run->fail.err);
		tr = clock_mono_us();
		pay_us[i] = tr - tp;
		/* until the order is visible: a look every 100 us */
		for (k = 0;; k++) {
			if ((r = bs_hold_ordered(b->db, run->session[i], &ordered)) != SD_OK)
				return r;
			if (ordered || clock_mono_us() - tr > BS_WAIT_MS * 1000LL)
				break;
			usleep(100);
		}
		if (!ordered)
			return err_set(SD_TIMEOUT, "webhooks: session %s has no order %d s after its "
				       "payment", run->session[i], BS_WAIT_MS / 1000);
		seen_us[i] = k ? clock_mono_us() - tr : 0;
		seen_at_return += k == 0;
	}
	res->hook_seen_ret = 100.0 * (double)seen_at_return / (double)p;
	for (i = 0; i < p; i++) {
		if ((r = bs_order_times(b->db, run->session[i], &created, &expires)) != SD_OK)
			return r;
		lat[i] = created * 1000 - back_us[i];
	}
	res->pay_p50 = bs_p(pay_us, p, 0.5);
	res->hook_c50 = bs_p(lat, p, 0.5);
	res->hook_c99 = bs_p(lat, p, 0.99);
	res->hook_p50 = bs_p(seen_us, p, 0.5);
	res->hook_p99 = bs_p(seen_us, p, 0.99);
	res->hook_max = bs_p(seen_us, p, 1.0);
	return SD_OK;
}

/* what box A holds: every hold (n + m) with its session, p orders, the
 * shop's invariants */
static enum sd_result bs_box_a_holds(struct bs_args *a, struct bench_shopbox *b, int64_t n,
				     int64_t m, int64_t p)
{
	char problem[512];
	enum sd_result r;
	int64_t k;

	if ((r = bs_count(b->db, "SELECT count(*) FROM holds WHERE session_id IS NOT NULL",
			  &k)) != SD_OK)
		return r;
	if (k != n + m)
		return err_set(SD_DB, "box A: %lld holds with a session, not %lld", (long long)k,
			       (long long)(n + m));
	if ((r = bs_count(b->db, "SELECT count(*) FROM orders", &k)) != SD_OK)
		return r;
	if (k != p)
		return err_set(SD_DB, "box A: %lld orders, not %lld", (long long)k, (long long)p);
	if ((r = pay_check(b->db, 0, problem, sizeof problem)) != SD_OK)
		return r;
	if (problem[0])
		return err_set(SD_DB, "box A: %s", problem);
	a->orders += p;
	a->holds += n + m;
	return SD_OK;
}

/* box A: alone, checkouts, alone again, webhooks; into *res */
static enum sd_result bs_box_a(struct bs_args *a, const char *parent, int round,
			       struct bs_round *res)
{
	int64_t n = a->checkouts, m = a->alone, p = a->pays < a->checkouts ? a->pays : a->checkouts;
	int64_t m1 = m / 2, m2 = m - m / 2, wall = 0, ccpu = 0;
	int64_t *hold_us = NULL, *prov_us = NULL, *sess_us = NULL, *pay_us = NULL, *back_us = NULL;
	int64_t *lat = NULL, *seen_us = NULL;
	/* the defaults (10 minutes, 4), but the share as told */
	struct hold_rules ru = { .renewals = -1, .unpaid_share = a->unpaid_share };
	struct bs_run run;
	struct bench_shopbox b;
	struct bench_http ps;
	double c0[5], c1[5];
	enum sd_result r;
	char tag[16];

	memset(&b, 0, sizeof b);
	memset(&run, 0, sizeof run);
	pthread_mutex_init(&run.fail.mu, NULL);
	bench_http_init(&ps, 0);
	run.clients = (int)a->buyers;
	run.base = 1;
	if (!(run.co_us = calloc((size_t)n, sizeof *run.co_us)) ||
	    !(run.get_us = calloc((size_t)n, sizeof *run.get_us)) ||
	    !(run.post_us = calloc((size_t)n, sizeof *run.post_us)) ||
	    !(run.ret_us = calloc((size_t)n, sizeof *run.ret_us)) ||
	    !(run.session = calloc((size_t)n, sizeof *run.session)) ||
	    !(hold_us = calloc((size_t)m + 1, sizeof *hold_us)) ||
	    !(prov_us = calloc((size_t)m + 1, sizeof *prov_us)) ||
	    !(sess_us = calloc((size_t)m + 1, sizeof *sess_us)) ||
	    !(pay_us = calloc((size_t)p + 1, sizeof *pay_us)) ||
	    !(back_us = calloc((size_t)p + 1, sizeof *back_us)) ||
	    !(lat = calloc((size_t)p + 1, sizeof *lat)) ||
	    !(seen_us = calloc((size_t)p + 1, sizeof *seen_us))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	snprintf(tag, sizeof tag, "r%d-a", round + 1);
	if ((r = bs_box_start(a, parent, tag, 0, &ru, bs_capacity(a, 3 * (n + m) + 10),
			      &b)) != SD_OK)
		goto out;
	run.box = &b;

	/* the checkout's steps alone, before */
	bench_progress("round %d: box A: %lld checkouts' steps alone (hold, provider, session)",
		       round + 1, (long long)m1);
	if ((r = bs_alone(&b, m1, 1000000, hold_us, prov_us, sess_us)) != SD_OK)
		goto out;
	res->prov_first_p50 = bs_p(prov_us, m1, 0.5);

	/* the checkouts */
	bench_progress("round %d: box A: %lld checkouts by %d buyers to 127.0.0.1:%d (paysink "
		       "127.0.0.1:%d)", round + 1, (long long)n, run.clients, b.shop_port,
		       b.ps_port);
	c0[0] = bench_cpu_ms(0);
	c0[1] = bench_cpu_ms(b.paysink.pid);
	c0[2] = bench_cpu_ms(b.relay.pid);
	c0[3] = bench_cpu_ms(b.worker.pid);
	if ((r = bs_phase(&run, BS_CHECKOUT, n, &wall, &ccpu)) != SD_OK)
		goto out;
	c1[0] = bench_cpu_ms(0);
	c1[1] = bench_cpu_ms(b.paysink.pid);
	c1[2] = bench_cpu_ms(b.relay.pid);
	c1[3] = bench_cpu_ms(b.worker.pid);
	res->co_per_s = (double)n / ((double)wall / 1e6);
	res->cpu_clients = (double)ccpu / 1000.0 / (double)n;
	res->cpu_shop = (c1[0] - c0[0]) / (double)n - res->cpu_clients;
	res->cpu_paysink = (c1[1] - c0[1]) / (double)n;
	res->cpu_relay = (c1[2] - c0[2]) / (double)n;
	res->cpu_worker = (c1[3] - c0[3]) / (double)n;
	res->cpu_total = res->cpu_shop + res->cpu_clients + res->cpu_paysink + res->cpu_relay +
			 res->cpu_worker;
	res->busy_cores = res->cpu_total * (double)n / ((double)wall / 1000.0);
	res->co_p50 = bs_p(run.co_us, n, 0.5);
	res->co_p99 = bs_p(run.co_us, n, 0.99);
	res->get_p50 = bs_p(run.get_us, n, 0.5);
	res->post_p50 = bs_p(run.post_us, n, 0.5);
	res->post_p99 = bs_p(run.post_us, n, 0.99);

	/* the steps alone, after */
	bench_progress("round %d: box A: %lld checkouts' steps alone again", round + 1,
		       (long long)m2);
	if ((r = bs_alone(&b, m2, 2000000, hold_us + m1, prov_us + m1, sess_us + m1)) != SD_OK)
		goto out;
	res->prov_last_p50 = bs_p(prov_us + m1, m2, 0.5);
	res->hold_p50 = bs_p(hold_us, m, 0.5);
	res->hold_p99 = bs_p(hold_us, m, 0.99);
	res->prov_p50 = bs_p(prov_us, m, 0.5);
	res->prov_p99 = bs_p(prov_us, m, 0.99);
	res->sess_p50 = bs_p(sess_us, m, 0.5);
	res->alone_sum = res->hold_p50 + res->prov_p50 + res->sess_p50;

	/* webhooks on time: p of the sessions paid, paced */
	bench_progress("round %d: box A: %lld payments at %lld/s, each order made by its webhook",
		       round + 1, (long long)p, (long long)a->pay_rate);
	ps.port = b.ps_port;
	if ((r = bs_hooks_on_time(a, &run, &b, &ps, p, pay_us, back_us, seen_us, lat, res)) !=
	    SD_OK)
		goto out;
	r = bs_box_a_holds(a, &b, n, m, p);
out:
	bench_http_close(&ps);
	bench_shopbox_stop(&b);
	free(run.co_us);
	free(run.get_us);
	free(run.post_us);
	free(run.ret_us);
	free(run.session);
	free(hold_us);
	free(prov_us);
	free(sess_us);
	free(pay_us);
	free(back_us);
	free(lat);
	free(seen_us);
	pthread_mutex_destroy(&run.fail.mu);
	return r;
}

/* ======================== box B ========================================== */

static enum sd_result bs_box_b(struct bs_args *a, const char *parent, int round,
			       struct bs_round *res)
{
	int64_t q = a->returns, k = a->reconciles, n = q > k ? q : k, wall = 0, ccpu = 0, i, c;
	int64_t created, expires, *lat = NULL;
	struct hold_rules ru = { .ttl_ms = BS_TTL_B_MS, .renewals = -1,
				 .unpaid_share = a->unpaid_share };
	struct bs_run run;
	struct bench_shopbox b;
	enum sd_result r;
	char tag[16], problem[512];

	memset(&b, 0, sizeof b);
	memset(&run, 0, sizeof run);
	pthread_mutex_init(&run.fail.mu, NULL);
	run.clients = (int)a->buyers;
	run.base = 1;
	if (!(run.co_us = calloc((size_t)n + 1, sizeof *run.co_us)) ||
	    !(run.get_us = calloc((size_t)n + 1, sizeof *run.get_us)) ||
	    !(run.post_us = calloc((size_t)n + 1, sizeof *run.post_us)) ||
	    !(run.ret_us = calloc((size_t)n + 1, sizeof *run.ret_us)) ||
	    !(run.session = calloc((size_t)n + 1, sizeof *run.session)) ||
	    !(lat = calloc((size_t)n + 1, sizeof *lat))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	snprintf(tag, sizeof tag, "r%d-b", round + 1);
	if ((r = bs_box_start(a, parent, tag, 1, &ru, bs_capacity(a, 3 * (q + k) + 10),
			      &b)) != SD_OK)
		goto out;
	run.box = &b;

	/* the buyer's return makes the order */
	bench_progress("round %d: box B (no webhooks, holds of %d ms): %lld buyers pay and "
		       "return", round + 1, BS_TTL_B_MS, (long long)q);
	if ((r = bs_phase(&run, BS_RETURN, q, &wall, &ccpu)) != SD_OK)
		goto out;
	res->ret_p50 = bs_p(run.ret_us, q, 0.5);
	res->ret_p99 = bs_p(run.ret_us, q, 0.99);

	/* the reconcile job makes the order */
	bench_progress("round %d: box B: %lld buyers pay and never return: the reconcile job "
		       "(the worker process) makes each order", round + 1, (long long)k);
	if ((r = bs_phase(&run, BS_PAID, k, &wall, &ccpu)) != SD_OK)
		goto out;
	if ((r = bs_wait_ordered(b.db, run.session, k, "reconcile")) != SD_OK)
		goto out;
	for (i = 0; i < k; i++) {
		if ((r = bs_order_times(b.db, run.session[i], &created, &expires)) != SD_OK)
			goto out;
		lat[i] = (created - expires) * 1000;
	}
	res->rec_p50 = bs_p(lat, k, 0.5);
	res->rec_p99 = bs_p(lat, k, 0.99);
	res->rec_min = bs_p(lat, k, 0.0);
	res->rec_over_p50 = res->rec_p50 - HOLD_RECONCILE_DELAY_MS;
	res->rec_over_p99 = res->rec_p99 - HOLD_RECONCILE_DELAY_MS;
	if ((r = bs_count(b.db, "SELECT count(*) FROM orders", &c)) != SD_OK)
		goto out;
	if (c != q + k) {
		r = err_set(SD_DB, "box B: %lld orders, not %lld", (long long)c, (long long)(q + k));
		goto out;
	}
	if ((r = pay_check(b.db, 0, problem, sizeof problem)) != SD_OK)
		goto out;
	if (problem[0]) {
		r = err_set(SD_DB, "box B: %s", problem);
		goto out;
	}
	a->orders += q + k;
	a->holds += q + k;
out:
	bench_shopbox_stop(&b);
	free(run.co_us);
	free(run.get_us);
	free(run.post_us);
	free(run.ret_us);
	free(run.session);
	free(lat);
	pthread_mutex_destroy(&run.fail.mu);
	return r;
}

/* ======================== the machine ==================================== */

/* an fsync's cost in the bench folder: the p50 of BS_FSYNCS 4 KiB writes */
static double bs_fsync_ms(const char *dir)
{
	char path[PATH_MAX + 16], block[4096];
	int64_t us[BS_FSYNCS];
	int fd, i;

	snprintf(path, sizeof path, "%s/fsync.probe", dir);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
		return 0;
	memset(block, 'x', sizeof block);
	for (i = 0; i < BS_FSYNCS; i++) {
		int64_t t0 = clock_mono_us();

		if (pwrite(fd, block, sizeof block, (off_t)i * 4096) != (ssize_t)sizeof block ||
		    fdatasync(fd) != 0)
			break;
		us[i] = clock_mono_us() - t0;
	}
	close(fd);
	unlink(path);
	return i ? bs_p(us, i, 0.5) : 0;
}

static enum sd_result bs_go(const char *dir, const char *path, void *arg)
{
	struct bs_args *a = arg;
	enum sd_result r;
	struct db *db = NULL;
	struct db_stmt *st;
	int round;

	a->fsync_p50_ms = bs_fsync_ms(dir);
	/* the engine as the shop's connections have it */
	if ((r = db_open(path, DB_OPEN_CREATE, DB_SYNC_FULL, &db)) != SD_OK)
		return r;
	snprintf(a->journal, sizeof a->journal, "?");
	if ((st = db_stmt(db, "PRAGMA journal_mode"))) {
		if (db_next(st, &r))
			snprintf(a->journal, sizeof a->journal, "%s", db_col_text(st, 0));
		db_reset(st);
	}
	db_close(db);
	for (round = 0; round < a->rounds; round++) {
		if ((r = bs_box_a(a, dir, round, &a->r[round])) != SD_OK ||
		    (r = bs_box_b(a, dir, round, &a->r[round])) != SD_OK)
			return r;
		bench_progress("round %d: %.1f checkouts/s, checkout p50 %.1f ms, webhook p50 %.1f "
			       "ms, return p50 %.1f ms, reconcile p50 %.0f ms", round + 1,
			       a->r[round].co_per_s, a->r[round].co_p50, a->r[round].hook_p50,
			       a->r[round].ret_p50, a->r[round].rec_p50);
	}
	return SD_OK;
}

/* ======================== the report ===================================== */

struct bs_metric {
	const char *name, *unit;
	size_t off;
	const char *what;
};

#define M(n, u, f, w) { n, u, offsetof(struct bs_round, f), w }

static const struct bs_metric bs_metrics[] = {
	M("checkouts_per_s", "/s", co_per_s, "GET /e/{id} + POST /e/{id}/checkout to the 303"),
	M("checkout_p50_ms", "ms", co_p50, "one checkout, both requests"),
	M("checkout_p99_ms", "ms", co_p99, ""),
	M("event_page_p50_ms", "ms", get_p50, "GET /e/{id} alone"),
	M("checkout_post_p50_ms", "ms", post_p50, "POST /e/{id}/checkout alone"),
	M("checkout_post_p99_ms", "ms", post_p99, ""),
	M("cpu_shop_ms_per_checkout", "ms", cpu_shop, "the shop's threads (this process less "
	  "the clients)"),
	M("cpu_clients_ms_per_checkout", "ms", cpu_clients, "the bench's client threads"),
	M("cpu_paysink_ms_per_checkout", "ms", cpu_paysink, "paysink's process"),
	M("cpu_relay_ms_per_checkout", "ms", cpu_relay, "stagedoor relay"),
	M("cpu_worker_ms_per_checkout", "ms", cpu_worker, "stagedoor worker"),
	M("cpu_total_ms_per_checkout", "ms", cpu_total, ""),
	M("cores_busy_during_checkouts", "cores", busy_cores, "CPU time / wall time"),
	M("alone_hold_tx_p50_ms", "ms", hold_p50, "hold_add: one FULL transaction"),
	M("alone_hold_tx_p99_ms", "ms", hold_p99, ""),
	M("alone_provider_session_p50_ms", "ms", prov_p50, "stripe_checkout_create to paysink"),
	M("alone_provider_session_p99_ms", "ms", prov_p99, ""),
	M("alone_provider_first_p50_ms", "ms", prov_first_p50, "before the checkouts (paysink "
	  "nearly empty)"),
	M("alone_provider_last_p50_ms", "ms", prov_last_p50, "after them (paysink holding every "
	  "session)"),
	M("alone_session_tx_p50_ms", "ms", sess_p50, "hold_set_session: the second FULL "
	  "transaction"),
	M("alone_steps_sum_p50_ms", "ms", alone_sum, "the three, against checkout_post_p50_ms"),
	M("pay_call_p50_ms", "ms", pay_p50, "POST /_paysink/pay/{session}"),
	M("webhook_order_p50_ms", "ms", hook_p50, "the pay call's return to the order seen "
	  "committed (a look every 0.1 ms; 0: there already)"),
	M("webhook_order_p99_ms", "ms", hook_p99, ""),
	M("webhook_order_max_ms", "ms", hook_max, ""),
	M("webhook_order_at_return_pct", "%", hook_seen_ret, "orders committed before the pay "
	  "call returned"),
	M("webhook_created_p50_ms", "ms", hook_c50, "the pay call's start to the order's "
	  "created_at (1 ms steps; before its commit)"),
	M("webhook_created_p99_ms", "ms", hook_c99, ""),
	M("return_order_p50_ms", "ms", ret_p50, "GET /h/{link}?paid=1, the order made by it"),
	M("return_order_p99_ms", "ms", ret_p99, ""),
	M("reconcile_order_p50_ms", "ms", rec_p50, "the hold's end to the order (no webhook)"),
	M("reconcile_order_p99_ms", "ms", rec_p99, ""),
	M("reconcile_order_min_ms", "ms", rec_min, ""),
	M("reconcile_beyond_delay_p50_ms", "ms", rec_over_p50, "less HOLD_RECONCILE_DELAY_MS: the "
	  "relay, the worker's wake-up, the look-up, the commit"),
	M("reconcile_beyond_delay_p99_ms", "ms", rec_over_p99, ""),
};

#define BS_N_METRICS (sizeof bs_metrics / sizeof bs_metrics[0])

static int bs_cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* the median over the rounds of metric k, and the range */
static double bs_median(const struct bs_args *a, size_t k, double *lo, double *hi)
{
	double v[BS_ROUNDS_MAX];
	int i, n = (int)a->rounds;

	for (i = 0; i < n; i++)
		v[i] = *(const double *)((const char *)&a->r[i] + bs_metrics[k].off);
	qsort(v, (size_t)n, sizeof v[0], bs_cmp_double);
	*lo = v[0];
	*hi = v[n - 1];
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void bs_print(const struct bs_args *a, int json)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	double med, lo, hi;
	size_t k;

	if (json) {
		printf("{\"program\":\"stagedoor\",\"bench\":\"shop\",\"rounds\":%lld,\"buyers\":%lld,"
		       "\"checkouts\":%lld,\"alone\":%lld,\"pays\":%lld,\"pay_rate\":%lld,"
		       "\"returns\":%lld,\"reconciles\":%lld,\"paysink_slow_ms\":%lld,"
		       "\"unpaid_share\":%lld,\"cores\":%ld,"
		       "\"engine\":\"sqlite\","
		       "\"sqlite\":\"%s\",\"journal_mode\":\"%s\",\"durability\":\"full\","
		       "\"fsync_p50_ms\":%.3f,\"hold_reconcile_delay_ms\":%d,\"hold_ttl_b_ms\":%d,"
		       "\"orders\":%lld,\"holds\":%lld", (long long)a->rounds, (long long)a->buyers,
		       (long long)a->checkouts, (long long)a->alone, (long long)a->pays,
		       (long long)a->pay_rate, (long long)a->returns, (long long)a->reconciles,
		       (long long)a->slow_ms, (long long)bs_share(a), cores,
		       db_sqlite_lib_version(), a->journal, a->fsync_p50_ms,
		       HOLD_RECONCILE_DELAY_MS, BS_TTL_B_MS, (long long)a->orders,
		       (long long)a->holds);
		for (k = 0; k < BS_N_METRICS; k++) {
			med = bs_median(a, k, &lo, &hi);
			printf(",\"%s\":%.3f", bs_metrics[k].name, med);
		}
		printf(",\"ranges\":{");
		for (k = 0; k < BS_N_METRICS; k++) {
			bs_median(a, k, &lo, &hi);
			printf("%s\"%s\":[%.3f,%.3f]", k ? "," : "", bs_metrics[k].name, lo, hi);
		}
		printf("}}\n");
		return;
	}
	printf("stagedoor-bench shop: medians of %lld rounds (range), %lld buyers; a fresh box "
	       "each round\n", (long long)a->rounds, (long long)a->buyers);
	printf("  cores %ld; engine SQLite %s, journal_mode %s; holds, sessions and orders "
	       "commit FULL (fsync), the queue at the box's default (normal); fsync in the "
	       "bench folder p50 %.2f ms\n", cores, db_sqlite_lib_version(), a->journal,
	       a->fsync_p50_ms);
	if (a->slow_ms > 0)
		printf("  paysink --slow-ms %lld: each API POST held that long (a provider far "
		       "away)\n", (long long)a->slow_ms);
	printf("  the shop's unpaid share %lld%%; each event's seats are its holds' x 100 / %lld, "
	       "so that every hold fits in the share and no buyer waits in line\n",
	       (long long)bs_share(a), (long long)bs_share(a));
	printf("  box A: paysink with webhooks on time, holds of 10 min, %lld checkouts, %lld "
	       "steps alone, %lld payments at %lld/s\n", (long long)a->checkouts,
	       (long long)a->alone, (long long)(a->pays < a->checkouts ? a->pays : a->checkouts),
	       (long long)a->pay_rate);
	printf("  box B: paysink --drop-pct 100, holds of %d ms, %lld returns, %lld reconciles "
	       "(HOLD_RECONCILE_DELAY_MS %d)\n", BS_TTL_B_MS, (long long)a->returns,
	       (long long)a->reconciles, HOLD_RECONCILE_DELAY_MS);
	for (k = 0; k < BS_N_METRICS; k++) {
		med = bs_median(a, k, &lo, &hi);
		printf("  %-32s %10.2f %-5s (%.2f..%.2f)%s%s\n", bs_metrics[k].name, med,
		       bs_metrics[k].unit, lo, hi, bs_metrics[k].what[0] ? "  " : "",
		       bs_metrics[k].what);
	}
	printf("  verified: %lld holds, %lld orders, every paid hold ordered once, pay_check "
	       "clean\n", (long long)a->holds, (long long)a->orders);
}

/* ======================== the command ==================================== */

int bench_shop_cmd(int argc, char **argv)
{
	static struct bs_args a;
	int json = 0, keep = 0, rc;
	struct arg_opt opts[] = {
		{ "rounds", ARG_INT, &a.rounds, 1, BS_ROUNDS_MAX, 0, NULL,
		  "rounds, each on fresh boxes; the median is reported (5)", 0 },
		{ "buyers", ARG_INT, &a.buyers, 1, BS_BUYERS_MAX, 0, NULL,
		  "client threads, each a keep-alive connection (8)", 0 },
		{ "checkouts", ARG_INT, &a.checkouts, 10, 100000, 0, NULL,
		  "checkouts a round (400)", 0 },
		{ "alone", ARG_INT, &a.alone, 2, 10000, 0, NULL,
		  "checkouts' steps timed alone, without HTTP (100)", 0 },
		{ "pays", ARG_INT, &a.pays, 1, 100000, 0, NULL,
		  "payments whose webhook makes the order (200, at most --checkouts)", 0 },
		{ "pay-rate", ARG_INT, &a.pay_rate, 1, 10000, 0, NULL,
		  "their pace, payments a second (100)", 0 },
		{ "returns", ARG_INT, &a.returns, 1, 100000, 0, NULL,
		  "buyers whose return makes the order (100)", 0 },
		{ "reconciles", ARG_INT, &a.reconciles, 1, 100000, 0, NULL,
		  "buyers whose order the reconcile job makes (100)", 0 },
		{ "unpaid-share", ARG_INT, &a.unpaid_share, 1, 100, 0, NULL,
		  "the shop's shop_unpaid_share, % of the seats unpaid holds may take (the box's "
		  "default, 25); the event is made large enough that every hold fits in it", 0 },
		BENCH_ARG_PAYSINK(&a.paysink),
		{ "paysink-dir", ARG_STR, &a.paysink_dir, 0, 0, 0, "DIR",
		  "where paysink keeps its record (default: the bench folder; /dev/shm makes its "
		  "fsyncs free)", 0 },
		{ "paysink-slow-ms", ARG_INT, &a.slow_ms, 0, 60000, 0, NULL,
		  "paysink holds each API POST this long, as a provider far away does (0)", 0 },
		{ "stagedoor", ARG_STR, &a.stagedoor, 0, 0, 0, "PATH",
		  "the box's binary for the relay and worker (default: ../bin/stagedoor from this "
		  "program)", 0 },
		BENCH_ARG_KEEP(&keep),
		ARG_JSON(&json),
		ARG_END,
	};
	static const char usage[] =
		"shop [--rounds R] [--buyers B] [--checkouts N] [--alone M] [--pays P] "
		"[--pay-rate R] [--returns Q] [--reconciles K] [--unpaid-share PCT] "
		"[--paysink PATH] [--paysink-dir DIR] "
		"[--paysink-slow-ms N] [--stagedoor PATH] [--json] [--keep]";

	a.rounds = BS_ROUNDS_DEFAULT;
	a.buyers = BS_BUYERS_DEFAULT;
	a.checkouts = BS_CHECKOUTS_DEFAULT;
	a.alone = BS_ALONE_DEFAULT;
	a.pays = BS_PAYS_DEFAULT;
	a.pay_rate = BS_PAY_RATE_DEFAULT;
	a.returns = BS_RETURNS_DEFAULT;
	a.reconciles = BS_RECONCILES_DEFAULT;
	if ((rc = bench_args(argc, argv, opts, usage)) != 0)
		return rc;
	if (bench_default(&a.paysink, "paysink", a.paysink_buf, sizeof a.paysink_buf) != 0 ||
	    bench_default(&a.stagedoor, "../bin/stagedoor", a.stagedoor_buf,
			  sizeof a.stagedoor_buf) != 0) {
		fprintf(stderr, "stagedoor-bench: shop needs %s (make build/paysink) and %s (make "
			"bin/stagedoor)\n", a.paysink, a.stagedoor);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if ((rc = bench_in_dir(keep, bs_go, &a)) != 0)
		return rc;
	bs_print(&a, json);
	return 0;
}
