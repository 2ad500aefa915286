/*
 * bench_event.c: `stagedoor-bench event`, a whole event cancelled: how fast
 * the fan-out reaches every buyer, from the cancel to the last email, with
 * a payment provider on this machine that answers at once.
 *
 *   stagedoor-bench event [--orders N] [--online-pct P] [--concurrency C]
 *                         [--rounds R] [--paysink PATH] [--db postgresql://...]
 *                         [--keep] [--json]
 *
 * paysink runs with --record-at-exit: a fast provider, whose record is
 * read when it has stopped.  Each round makes a fresh box (as `init` makes one, SQLite in WAL mode,
 * FULL commits) with one priced event and N orders of one seat: P% paid
 * online (a Checkout Session made at tools/paysink through the box's own
 * Stripe client and paid there, the order carrying its payment), the rest
 * paid by card at the box office.  Every order's ticket jobs are run first,
 * so that the fan-out has the box to itself.  Then, timed: event_cancel
 * (the operator's transaction) and the relay and one worker of C handler
 * threads in this process (pipeline_run, as `demo` runs them) until the
 * stream is drained: the parent's batches, a child per order (cancel, the
 * refund at paysink under refund-<order> or owed at the window), the
 * cancellation emails into the maildir.
 *
 * Verified before any figure: the run finished with every order done,
 * refunded (online) or owed at the window (box office), and emailed;
 * paysink's record holds exactly one refund per online order; nothing is
 * dead or left in the stream but the orders' reminders (weeks ahead; they
 * find their orders cancelled when they come).  Figures per round, and the median over the rounds: children a
 * second (orders / the time from the cancel to the last email marked
 * sent), the parent's time to queue every child, and the time to the last
 * email.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "bench_child.h"
#include "clock.h"
#include "cli.h"
#include "db.h"
#include "event_edit.h"
#include "event_runs.h"
#include "httpc.h"
#include "orders.h"
#include "pipeline.h"
#include "statedir.h"
#include "stripe.h"
#include "ticket_jobs.h"
#include "tickets.h"

#define BE_ORDERS_DEFAULT 2000
#define BE_ROUNDS_MAX 9
#define BE_PRICE 2500
#define BE_KEY "sk_test_stagedoor_bench_event"
#define BE_SECRET "whsec_stagedoor_bench_event"

struct be_round {
	int64_t online, window;
	double children_per_s;		/* orders / cancel to the last email */
	double enqueue_ms;		/* the cancel to the parent's last batch */
	double last_email_ms;		/* the cancel to the last email marked sent */
	double drain_ms;		/* the cancel to the stream drained */
};

struct be_args {
	int64_t orders, online_pct, concurrency, rounds;
	const char *paysink;
	char paysink_buf[PATH_MAX];
	struct be_round r[BE_ROUNDS_MAX];
	int at;				/* the round running */
	const char *engine;		/* "SQLite FULL", "PostgreSQL" */
};

static int64_t be_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* a paid session at paysink: [out] its payment (STRIPE_ID_MAX bytes) */
static enum sd_result be_paid(struct stripe *st, int port, int64_t i, char *payment)
{
	char hold[32], email[64], url[STRIPE_ID_MAX + 64];
	struct stripe_checkout c = { hold, "Bench night", BE_PRICE, 1, "EUR", email,
				     "http://127.0.0.1/ok", "http://127.0.0.1/back", 0 };
	struct stripe_session s;
	struct httpc_req q = { 0 };
	struct httpc_res res = { 0 };
	enum sd_result r;

	snprintf(hold, sizeof hold, "HBENCH%06lld", (long long)i);
	snprintf(email, sizeof email, "online%lld@example.org", (long long)i);
	c.expires_at_s = be_now_ms() / 1000 + 3600;
	if ((r = stripe_checkout_create(st, &c, &s)) != SD_OK)
		return r;
	snprintf(url, sizeof url, "http://127.0.0.1:%d/_paysink/pay/%s", port, s.id);
	q.method = "POST";
	q.url = url;
	q.body = "";
	q.what = "paysink";
	if ((r = httpc_do(&q, &res)) != SD_OK)
		return r;
	r = res.status == 200 ? SD_OK : err_set(SD_IO, "paysink pay: %ld", res.status);
	httpc_res_free(&res);
	if (r == SD_OK && (r = stripe_session_get(st, s.id, &s)) == SD_OK && !s.payment_ref[0])
		r = err_set(SD_IO, "paysink: session %s paid without a payment", s.id);
	if (r == SD_OK)
		snprintf(payment, STRIPE_ID_MAX, "%s", s.payment_ref);
	return r;
}

/* the orders: online_pct of them paid at paysink, the rest by card */
static enum sd_result be_sell(const struct be_args *a, struct db *db, int64_t event_id,
			      struct stripe *st, int port, struct be_round *rd)
{
	char pid[ORDER_ID_MAX], name[32], email[64], pay[STRIPE_ID_MAX];
	enum sd_result r;
	int64_t i;
	int replayed;

	for (i = 0; i < a->orders; i++) {
		struct order_new o = { event_id, name, email, 1, NULL, "card", 0, 0, NULL, NULL };

		snprintf(name, sizeof name, "Buyer %lld", (long long)i + 1);
		snprintf(email, sizeof email, "buyer%lld@example.org", (long long)i + 1);
		if (i % 100 < a->online_pct) {
			if ((r = be_paid(st, port, i, pay)) != SD_OK)
				return r;
			o.payment = "online";
			o.payment_ref = pay;
			o.amount_minor = BE_PRICE;
			o.currency = "EUR";
			rd->online++;
		} else {
			rd->window++;
		}
		if ((r = order_add(db, &o, pid, &replayed)) != SD_OK)
			return r;
	}
	return SD_OK;
}

static enum sd_result be_drain(const struct be_args *a, struct db *db, const char *path,
			       struct tickets_env *env)
{
	struct pipeline_opts po;

	memset(&po, 0, sizeof po);
	po.worker.db_path = path;
	po.worker.name = "bench-event";
	po.worker.concurrency = (int)a->concurrency;
	po.worker.handlers = ticket_handlers;
	po.worker.app = env;
	po.poll_ms = 5;
	return pipeline_run(db, &po, NULL);
}

static enum sd_result be_one(struct db *db, const char *sql, int64_t *n)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;

	if (!st)
		return SD_DB;
	*n = db_next(st, &r) ? db_col_int(st, 0) : 0;
	db_reset(st);
	return r;
}

/* paysink's record: refunds, and those under refund-<order> keys */
static enum sd_result be_record(const char *record, int64_t *refunds, int64_t *keyed)
{
	json_t *doc = json_load_file(record, 0, NULL), *x;
	size_t i;

	*refunds = *keyed = 0;
	if (!doc)
		return err_set(SD_IO, "cannot read paysink's record %s", record);
	json_array_foreach(json_object_get(doc, "refunds"), i, x) {
		const char *k = json_string_value(json_object_get(x, "idempotency_key"));

		(*refunds)++;
		*keyed += k && strncmp(k, "refund-T", 8) == 0 &&
			  json_integer_value(json_object_get(x, "amount")) == BE_PRICE;
	}
	json_decref(doc);
	return SD_OK;
}

/* what the run did, checked; the round's figures */
static enum sd_result be_check(struct db *db, const struct event_run_view *v,
			       const struct be_round *rd, int64_t orders)
{
	int64_t dead = 0, left = 0;
	enum sd_result r;

	if ((r = be_one(db, "SELECT count(*) FROM dead_jobs", &dead)) != SD_OK ||
	    (r = be_one(db, "SELECT count(*) FROM stream WHERE kind != 'send_reminder'",
			       &left)) != SD_OK)
		return r;
	if (!v->finished_at || v->orders != orders || v->done != orders ||
	    v->refunded != rd->online || v->at_window != rd->window || v->emailed != orders ||
	    v->failed || dead || left)
		return err_set(SD_CONFLICT, "the run is not what it should be: orders %lld done %lld "
			       "refunded %lld (of %lld) at the window %lld (of %lld) emailed %lld "
			       "failed %lld; %lld dead, %lld left", (long long)v->orders,
			       (long long)v->done, (long long)v->refunded, (long long)rd->online,
			       (long long)v->at_window, (long long)rd->window,
			       (long long)v->emailed, (long long)v->failed, (long long)dead,
			       (long long)left);
	return SD_OK;
}

static enum sd_result be_go(const char *dir, const char *path, void *arg)
{
	struct be_args *a = arg;
	struct be_round *rd = &a->r[a->at];
	struct event_change price = { EVENT_SET_PRICE };
	struct stripe_config sc = { 0 };
	struct bench_child ps = { 0 };
	struct tickets_env *env = NULL;
	struct stripe *st = NULL;
	struct event_run_view run;
	struct event_view ev;
	struct db *db = NULL;
	char record[PATH_MAX + 32], keyf[PATH_MAX + 32], api[64];
	const char *more[] = { "--drop-pct", "100", "--record-at-exit", NULL };
	int64_t event_id, t0, t1, last = 0, refunds = 0, keyed = 0;
	int port = 0, already = 0;
	enum sd_result r;

	snprintf(record, sizeof record, "%s/paysink.json", dir);
	snprintf(keyf, sizeof keyf, "%s/stripe.key", dir);
	price.price_minor = BE_PRICE;
	snprintf(price.currency, sizeof price.currency, "EUR");
	/* on PostgreSQL the bench folder is the box's state folder */
	if ((r = db_open(path, DB_OPEN_CREATE, DB_SYNC_FULL, &db)) != SD_OK ||
	    (r = statedir_init(path, db_target_is_pg(path) ? dir : NULL)) != SD_OK ||
	    (r = pipeline_sample_event(db, "Bench night", a->orders, &event_id)) != SD_OK ||
	    (r = event_set(db, event_id, &price, &ev, NULL)) != SD_OK ||
	    (r = bench_write_secret(keyf, BE_KEY "\n")) != SD_OK ||
	    (r = bench_paysink_start(a->paysink, dir, "event", record, bench_free_port(), BE_KEY,
				     BE_SECRET, more, &ps, &port)) != SD_OK)
		goto out;
	snprintf(api, sizeof api, "http://127.0.0.1:%d", port);
	sc.api_url = api;
	sc.key_file = keyf;
	if ((r = stripe_open(&sc, &st)) != SD_OK ||
	    (r = tickets_env_open(path, db_target_is_pg(path) ? dir : NULL, NULL, NULL, NULL,
				  &env)) != SD_OK)
		goto out;
	env->stripe = st;
	st = NULL;
	bench_progress("round %d: %lld orders, %lld%% paid at paysink", a->at + 1,
		       (long long)a->orders, (long long)a->online_pct);
	if ((r = be_sell(a, db, event_id, env->stripe, port, rd)) != SD_OK ||
	    (r = be_drain(a, db, path, env)) != SD_OK)
		goto out;
	t0 = be_now_ms();
	if ((r = event_cancel(db, event_id, "bench", "Bench", &run, &already)) != SD_OK ||
	    (r = be_drain(a, db, path, env)) != SD_OK)
		goto out;
	t1 = be_now_ms();
	bench_child_stop(&ps);	/* its record is written as it stops */
	if ((r = event_run_get(db, run.id, &run)) != SD_OK ||
	    (r = be_one(db, "SELECT max(sent_at) FROM email_sends WHERE kind = 'cancel-event'",
			&last)) != SD_OK || (r = be_check(db, &run, rd, a->orders)) != SD_OK ||
	    (r = be_record(record, &refunds, &keyed)) != SD_OK)
		goto out;
	if (refunds != rd->online || keyed != rd->online) {
		r = err_set(SD_CONFLICT, "paysink holds %lld refunds (%lld under refund-<order> for "
			    "the price), for %lld online orders", (long long)refunds,
			    (long long)keyed, (long long)rd->online);
		goto out;
	}
	rd->enqueue_ms = (double)(run.enqueued_at - t0);
	rd->last_email_ms = (double)(last - t0);
	rd->drain_ms = (double)(t1 - t0);
	rd->children_per_s = rd->last_email_ms > 0 ? (double)a->orders * 1000.0 /
			     rd->last_email_ms : 0;
out:
	tickets_env_close(env);
	stripe_close(st);
	bench_child_stop(&ps);
	db_close(db);
	return r;
}

static int be_cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

static double be_median(const struct be_args *a, size_t off)
{
	double v[BE_ROUNDS_MAX];
	int64_t i;

	for (i = 0; i < a->rounds; i++)
		v[i] = *(const double *)((const char *)&a->r[i] + off);
	qsort(v, (size_t)a->rounds, sizeof v[0], be_cmp);
	return v[a->rounds / 2];
}

static void be_print(const struct be_args *a, int json)
{
	double cps = be_median(a, offsetof(struct be_round, children_per_s));
	double enq = be_median(a, offsetof(struct be_round, enqueue_ms));
	double last = be_median(a, offsetof(struct be_round, last_email_ms));
	int64_t i;

	if (json) {
		printf("{\"orders\":%lld,\"online\":%lld,\"window\":%lld,\"concurrency\":%lld,"
		       "\"rounds\":%lld,\"children_per_s\":%.1f,\"enqueue_ms\":%.1f,"
		       "\"last_email_ms\":%.1f}\n", (long long)a->orders, (long long)a->r[0].online,
		       (long long)a->r[0].window, (long long)a->concurrency, (long long)a->rounds,
		       cps, enq, last);
		return;
	}
	printf("event cancel: %lld orders (%lld refunded at paysink, %lld owed at the window), "
	       "%lld handler threads, %s\n", (long long)a->orders, (long long)a->r[0].online,
	       (long long)a->r[0].window, (long long)a->concurrency, a->engine);
	for (i = 0; i < a->rounds; i++)
		printf("  round %lld: %8.1f children/s  all queued %7.1f ms  last email %8.1f ms  "
		       "drained %8.1f ms\n", (long long)i + 1, a->r[i].children_per_s,
		       a->r[i].enqueue_ms, a->r[i].last_email_ms, a->r[i].drain_ms);
	printf("  median:  %8.1f children/s  all queued %7.1f ms  last email %8.1f ms\n", cps, enq,
	       last);
}

int bench_event_cmd(int argc, char **argv)
{
	struct be_args a = { BE_ORDERS_DEFAULT, 50, 4, 3, NULL, "", { { 0 } }, 0, NULL };
	const char *pg = NULL;
	int json = 0, keep = 0, rc;
	struct arg_opt opts[] = {
		{ "orders", ARG_INT, &a.orders, 1, 100000, 0, NULL, "orders of the event", 0 },
		{ "online-pct", ARG_INT, &a.online_pct, 0, 100, 0, NULL,
		  "of them paid at paysink (the rest at the box office)", 0 },
		{ "concurrency", ARG_INT, &a.concurrency, 1, 64, 0, NULL, "handler threads", 0 },
		{ "rounds", ARG_INT, &a.rounds, 1, BE_ROUNDS_MAX, 0, NULL, "fresh boxes", 0 },
		{ "paysink", ARG_STR, &a.paysink, 0, 0, 0, "PATH",
		  "tools/paysink (default: beside this program)", 0 },
		BENCH_ARG_KEEP(&keep),
		ARG_JSON(&json),
		{ "db", ARG_STR, &pg, 0, 0, 0, "URI",
		  "run on PostgreSQL, in a scratch schema of this postgresql:// database", 0 },
		ARG_END,
	};
	static const char usage[] = "event [--orders N] [--online-pct P] [--concurrency C] "
				    "[--rounds R] [--paysink PATH] [--db postgresql://...] [--keep] "
				    "[--json]";

	if ((rc = bench_args(argc, argv, opts, usage)) != 0 || (rc = bench_target_set(pg)) != 0)
		return rc;
	a.engine = pg && *pg ? "PostgreSQL" : "SQLite FULL";
	if (!a.paysink) {
		bench_beside("paysink", a.paysink_buf, sizeof a.paysink_buf);
		a.paysink = a.paysink_buf;
	}
	if (httpc_init() != SD_OK)
		return cli_fail(SD_IO);
	for (a.at = 0; a.at < a.rounds; a.at++)
		if ((rc = bench_in_dir(keep, be_go, &a)) != 0)
			return rc;
	be_print(&a, json);
	return 0;
}
