/*
 * test_shop.c: the shop and its payments against tools/paysink (a
 * Stripe-like provider run here), on either engine (tools/pg_tests.sh).
 * The shop listens in this process, under the fake clock set to the real
 * time; the shop's jobs (reconcile, refund, its email) run here too, one
 * call each, as a worker would run them.
 *
 *  - the webhook's signature, made by the official stripe package's own
 *    test-header generator: accepted with either secret while one rotates,
 *    refused with a byte changed, an old timestamp, an unknown secret or no
 *    header, and a refused one changes nothing;
 *  - a webhook delivered twice makes one order (its event id recorded
 *    with the effect);
 *  - a webhook never delivered: the reconcile job looks the payment up when
 *    the hold ends and makes the order; an unpaid session is expired at the
 *    provider and its hold ends;
 *  - out of order: the buyer's return makes the order first, the delayed
 *    webhook then finds it made;
 *  - a payment after its hold ran out: an order when the seats are free,
 *    else one refund under refund-<payment> and one email, however often the
 *    jobs run;
 *  - cancelling a paid order refunds it once; a box-office order is owed
 *    back at the window;
 *  - a hold's seats are free again when its lease runs out;
 *  - what strangers get: no form without its token, the caps, the rate
 *    limit, bad input refused with nothing written, no staff page on the
 *    shop's listener, X-Forwarded-For believed from a trusted proxy only.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "code.h"
#include "event_edit.h"
#include "event_runs.h"
#include "handler.h"
#include "holds.h"
#include "jobkinds.h"
#include "line.h"
#include "orders.h"
#include "payments.h"
#include "scans.h"
#include "pipeline.h"
#include "shop.h"
#include "shop_jobs.h"
#include "statedir.h"
#include "stripe.h"
#include "shopfix.h"
#include "testutil.h"
#include "ticket_jobs.h"
#include "tickets.h"

static int setup(void **state)
{
	return sf_setup_with(state, &(struct variant){ { NULL }, 0, NULL, 0 });
}

static int setup_dup(void **state)
{
	return sf_setup_with(state, &(struct variant){ { "--dup-pct", "100", NULL }, 0, NULL, 0 });
}

static int setup_drop(void **state)
{
	return sf_setup_with(state, &(struct variant){ { "--drop-pct", "100", NULL }, 0, NULL, 0 });
}

static int setup_delay(void **state)
{
	return sf_setup_with(state, &(struct variant){ { "--delay-ms-max", "1500", "--seed", "7",
						     NULL }, 0, NULL, 0 });
}

static int setup_strict(void **state)
{
	return sf_setup_with(state, &(struct variant){ { NULL }, 2, "127.0.0.1", 20 });
}

static int setup_none(void **state)
{
	return sf_setup_with(state, &(struct variant){ { NULL }, 0, NULL, 0, 1, 0 });
}

static int setup_tls(void **state)
{
	return sf_setup_with(state, &(struct variant){ { NULL }, 0, NULL, 0, 0, 1 });
}

static void test_signatures_from_the_official_package(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], sig[512], *ev, *bad;
	struct resp r;

	(void)state;
	sf_checkout(2, "ada%40example.org", hold, session);
	sf_pay(session);	/* paysink drops its own webhook in this set-up */
	ev = sf_completed_event(session, "evt_test_signed_1");

	/* a byte changed, an old timestamp, a secret not ours, no header:
	 * refused before the body is read, and nothing changes */
	sf_package_header(ev, SECRET, 0, sig, sizeof sig);
	bad = strdup(ev);
	bad[strlen(bad) - 3] = bad[strlen(bad) - 3] == '1' ? '2' : '1';
	sf_hook_post(bad, sig, &r);
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(r.body, "no v1 signature matches"));
	sf_resp_free(&r);
	free(bad);
	sf_package_header(ev, SECRET, sf_real_ms() / 1000 - 400, sig, sizeof sig);
	sf_hook_post(ev, sig, &r);
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(r.body, "timestamp"));
	sf_resp_free(&r);
	sf_package_header(ev, "whsec_not_this_box", 0, sig, sizeof sig);
	sf_hook_post(ev, sig, &r);
	assert_int_equal(r.status, 400);
	sf_resp_free(&r);
	sf_hook_post(ev, NULL, &r);
	assert_int_equal(r.status, 400);
	sf_resp_free(&r);
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 0);
	assert_int_equal(sf_count("SELECT count(*) FROM processed_jobs WHERE job_id LIKE 'stripe:%'"),
			 0);

	/* signed with the secret being retired: still accepted while it rotates */
	sf_package_header(ev, OLD_SECRET, 0, sig, sizeof sig);
	sf_hook_post(ev, sig, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"outcome\":\"ordered\""));
	sf_resp_free(&r);
	/* the same event again, freshly signed: recorded, so it makes nothing;
	 * a header of several v1 passes when one of them matches */
	sf_package_header(ev, SECRET, 0, sig, sizeof sig);
	{
		char both[600], *v1 = strstr(sig, ",v1=");

		assert_non_null(v1);
		snprintf(both, sizeof both, "%.*s,v1=%064d%s", (int)(v1 - sig), sig, 0, v1);
		sf_hook_post(ev, both, &r);
	}
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"outcome\":\"duplicate\""));
	sf_resp_free(&r);
	free(ev);
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 1);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM holds WHERE public_id = "
				   "'%s' AND state = 'ordered'", hold), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM processed_jobs WHERE job_id = "
			       "'stripe:evt_test_signed_1'"), 1);
	assert_int_equal(sf_count("SELECT amount_minor FROM orders WHERE payment = 'online'"), 2500);
}

static void test_webhook_twice_makes_one_order(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];

	(void)state;
	sf_checkout(3, "bo%40example.org", hold, session);
	sf_pay(session);
	sf_wait_delivered("checkout.session.completed", 2);	/* both copies answered 2xx */
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM tickets"), 3);
	assert_int_equal(sf_count("SELECT count(*) FROM outbox WHERE kind = 'render_tickets'"), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM processed_jobs WHERE job_id LIKE 'stripe:%'"),
			 1);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM holds h JOIN orders o ON "
				   "o.id = h.order_id WHERE h.public_id = '%s' AND o.payment_ref = "
				   "h.payment_ref AND o.amount_minor = 3750", hold), 1);
}

static void test_webhook_never_the_reconcile_makes_the_order(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], unpaid[HOLD_ID_MAX], s2[STRIPE_ID_MAX];
	json_t *rec, *s;
	size_t i;

	(void)state;
	sf_checkout(2, "cy%40example.org", hold, session);
	sf_checkout(1, "di%40example.org", unpaid, s2);
	sf_pay(session);
	/* while the hold runs, the job waits for its end */
	assert_int_equal(sf_reconcile(hold), JOB_RETRY_LATER);
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 0);
	clock_fake_advance(10 * MIN_MS + 1);
	assert_int_equal(sf_reconcile(hold), JOB_DONE);
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 1);
	assert_int_equal(sf_reconcile(hold), JOB_DONE);	/* again: the state is reached */
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 1);
	/* the unpaid one: expired at the provider, its hold ended */
	assert_int_equal(sf_reconcile(unpaid), JOB_DONE);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM holds WHERE public_id = "
				   "'%s' AND state = 'expired'", unpaid), 1);
	rec = sf_record();
	json_array_foreach(json_object_get(rec, "sessions"), i, s)
		if (strcmp(json_string_value(json_object_get(s, "id")), s2) == 0)
			assert_string_equal(json_string_value(json_object_get(s, "status")),
					    "expired");
	json_decref(rec);
	assert_int_equal(sf_delivered("checkout.session.completed"), 0);	/* all dropped */
}

static void test_out_of_order_the_return_first(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], path[64];
	struct resp r;

	(void)state;
	sf_checkout(1, "ed%40example.org", hold, session);
	sf_pay(session);
	sf_hold_path(hold, "?paid=1", path, sizeof path);
	sf_get(path, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "Thank you"));
	assert_null(strstr(r.body, "other"));
	sf_resp_free(&r);
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 1);
	/* the delayed webhook comes after: recorded, and no second order */
	sf_wait_count("SELECT count(*) FROM processed_jobs WHERE job_id LIKE 'stripe:%'", 1);
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 1);
}

static void test_late_payment_order_or_one_refund(void **state)
{
	char a[HOLD_ID_MAX], sa[STRIPE_ID_MAX], b[HOLD_ID_MAX], sb[STRIPE_ID_MAX], pid[16];
	struct order_new o = { F.event_id, "Window", NULL, 2, NULL, "cash", 0, 0, NULL, NULL };
	int replayed = 0, mails;
	char problem[512];
	json_t *rec, *rf;

	(void)state;
	/* late, seats still free: the order is made */
	sf_checkout(2, "fa%40example.org", a, sa);
	clock_fake_advance(10 * MIN_MS + 1);
	sf_pay(sa);
	assert_int_equal(sf_reconcile(a), JOB_DONE);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM holds WHERE public_id = "
				   "'%s' AND state = 'ordered'", a), 1);
	/* late, seats gone meanwhile: one refund and one email */
	sf_checkout(2, "gu%40example.org", b, sb);
	clock_fake_advance(10 * MIN_MS + 1);
	assert_int_equal(order_add(F.e->db, &o, pid, &replayed), SD_OK);	/* the window sells them */
	sf_pay(sb);
	assert_int_equal(sf_reconcile(b), JOB_DONE);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM holds WHERE public_id = "
				   "'%s' AND state = 'refunded'", b), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM orders"), 2);
	assert_true(sf_refund_of(b) > 0);
	assert_int_equal(sf_run_job(shop_job_refund, JOB_KIND_REFUND, "refund_id", sf_refund_of(b)),
			 JOB_DONE);
	assert_int_equal(sf_run_job(shop_job_refund, JOB_KIND_REFUND, "refund_id", sf_refund_of(b)),
			 JOB_DONE);
	rec = sf_record();
	rf = json_object_get(rec, "refunds");
	assert_int_equal(json_array_size(rf), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(rf, 0), "amount")),
			 2500);
	assert_int_equal(strncmp(json_string_value(json_object_get(json_array_get(rf, 0),
								   "idempotency_key")),
				 "refund-pi_", 10), 0);
	json_decref(rec);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds WHERE done_at IS NOT NULL"), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM outbox WHERE kind = 'send_refund_notice'"), 1);
	assert_int_equal(sf_run_job(shop_job_refund_notice, JOB_KIND_REFUND_MAIL, "refund_id",
				 sf_refund_of(b)), JOB_DONE);
	mails = tu_count_files(F.maildir);
	assert_int_equal(sf_run_job(shop_job_refund_notice, JOB_KIND_REFUND_MAIL, "refund_id",
				 sf_refund_of(b)), JOB_DONE);
	assert_int_equal(tu_count_files(F.maildir), mails);
	assert_int_equal(mails, 1);
	/* the shop's invariants hold; an online order that loses its payment's
	 * trace breaks them */
	assert_int_equal(pay_check(F.e->db, 0, problem, sizeof problem), SD_OK);
	assert_string_equal(problem, "");
	assert_int_equal(db_begin(F.e->db), SD_OK);
	assert_int_equal(db_exec(F.e->db, "UPDATE holds SET order_id = NULL WHERE state = "
				 "'ordered'"), SD_OK);
	assert_int_equal(pay_check(F.e->db, 0, problem, sizeof problem), SD_OK);
	db_rollback(F.e->db);
	assert_non_null(strstr(problem, "is ordered, but no online order carries its payment"));
}

static void test_cancel_refunds_once(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], order[16], pid[16];
	struct order_new o = { F.event_id, "Window", NULL, 1, NULL, "card", 0, 0, NULL, NULL };
	struct order_cancel_result cr;
	struct order_detail *d = NULL;
	struct hold_view h;
	int replayed = 0;
	json_t *rec;

	(void)state;
	sf_checkout(2, "ha%40example.org", hold, session);
	sf_pay(session);
	sf_wait_count("SELECT count(*) FROM orders", 1);
	assert_int_equal(hold_get(F.e->db, hold, &h), SD_OK);
	snprintf(order, sizeof order, "%s", h.order_public_id);
	assert_int_equal(order_cancel(F.e->db, order, "test", "the buyer asked", &cr), SD_OK);
	assert_int_equal(cr.refund, ORDER_REFUND_PROVIDER);
	assert_int_equal(order_cancel(F.e->db, order, "test", "again", &cr), SD_OK);
	assert_int_equal(cr.already, 1);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds WHERE reason = 'cancelled' AND "
			       "via = 'provider' AND amount_minor = 2500"), 1);
	/* the refund is queued before the cancellation's email */
	assert_true(sf_count("SELECT min(id) FROM outbox WHERE kind = 'refund_payment'") <
		    sf_count("SELECT min(id) FROM outbox WHERE kind = 'cancel_order'"));
	assert_int_equal(sf_run_job(shop_job_refund, JOB_KIND_REFUND, "refund_id",
				 sf_count("SELECT id FROM refunds")), JOB_DONE);
	rec = sf_record();
	assert_int_equal(json_array_size(json_object_get(rec, "refunds")), 1);
	json_decref(rec);
	/* what the order shows: paid online, refunded with the provider's id */
	assert_int_equal(order_detail_get(F.e->db, order, &d), SD_OK);
	assert_string_equal(d->v.payment, "online");
	assert_int_equal(d->v.amount_minor, 2500);
	assert_int_equal(strncmp(d->v.payment_ref, "pi_", 3), 0);
	assert_int_equal(d->refund.owed, 1);
	assert_int_equal(d->refund.window, 0);
	assert_true(d->refund.done_at > 0);
	assert_int_equal(strncmp(d->refund.provider_id, "re_", 3), 0);
	order_detail_free(d);
	/* paid at the window: owed back there, no provider */
	assert_int_equal(order_add(F.e->db, &o, pid, &replayed), SD_OK);
	assert_int_equal(order_cancel(F.e->db, pid, "test", NULL, &cr), SD_OK);
	assert_int_equal(cr.refund, ORDER_REFUND_WINDOW);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM refunds WHERE via = 'window' "
				   "AND payment_ref = 'window:%s' AND amount_minor = 1250", pid), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM outbox WHERE kind = 'refund_payment'"), 1);
}

static void test_held_seats_come_free(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], path[64];
	struct resp r;

	(void)state;
	sf_checkout(4, "ia%40example.org", hold, session);
	snprintf(path, sizeof path, "/e/%lld", (long long)F.event_id);
	sf_get(path, NULL, &r);
	assert_non_null(strstr(r.body, "Sold out for now"));
	/* not no-referrer: a browser would send its forms with "Origin: null" */
	assert_string_equal(r.referrer_policy, "same-origin");
	/* the seats held may come free: the form puts a buyer in line for them */
	assert_non_null(strstr(r.body, "wait in line"));
	assert_non_null(strstr(r.body, "<form"));
	sf_resp_free(&r);
	snprintf(path, sizeof path, "/h/%s", hold);	/* its public id opens nothing */
	sf_get(path, NULL, &r);
	assert_int_equal(r.status, 404);
	sf_resp_free(&r);
	sf_hold_path(hold, "", path, sizeof path);
	sf_get(path, NULL, &r);
	assert_non_null(strstr(r.body, "data-left=\"600\""));
	sf_resp_free(&r);
	clock_fake_advance(10 * MIN_MS);
	snprintf(path, sizeof path, "/e/%lld", (long long)F.event_id);
	sf_get(path, NULL, &r);
	assert_non_null(strstr(r.body, "4 seats left"));
	sf_resp_free(&r);
	sf_checkout(4, "jo%40example.org", hold, session);
	assert_int_equal(sf_count("SELECT count(*) FROM holds"), 2);
}

static void test_what_strangers_get(void **state)
{
	static const char *const staff[] = { "/v1/events", "/door", "/dashboard.js", "/metrics",
					      "/v1/orders", "/index.html" };
	char url[128], tok[32], cookie[160];
	const char *headers[] = { cookie, NULL };
	struct resp r;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof staff / sizeof staff[0]; i++) {
		sf_get(staff[i], NULL, &r);
		assert_int_equal(r.status, 404);
		sf_resp_free(&r);
	}
	/* no token, or another one: refused */
	snprintf(url, sizeof url, "%s/e/%lld/checkout", F.url, (long long)F.event_id);
	sf_http("POST", url, "seats=1&name=A&email=a%40example.org", NULL, &r);
	assert_int_equal(r.status, 403);
	sf_resp_free(&r);
	sf_form_token(tok, sizeof tok, cookie, sizeof cookie);
	sf_http("POST", url, "csrf=aaaaaaaaaaaaaaaaaaaaaaaaaa&seats=1&name=A&email=a%40example.org",
	     headers, &r);
	assert_int_equal(r.status, 403);
	sf_resp_free(&r);
	/* a form posted from another site: the right token, a foreign Origin */
	{
		char body[200];
		const char *foreign[] = { cookie, "Origin: https://evil.example", NULL };

		snprintf(body, sizeof body, "csrf=%s&seats=1&name=A&email=a%%40example.org", tok);
		sf_http("POST", url, body, foreign, &r);
		assert_int_equal(r.status, 403);
		assert_non_null(strstr(r.body, "cross-origin"));
		sf_resp_free(&r);
	}
	/* bad input: refused with the form again, nothing written; each try
	 * counts against the address's rate, 2 a minute here */
	sf_checkout_as(1, "%01Ada", "a%40example.org", NULL, &r);
	assert_int_equal(r.status, 422);
	assert_non_null(strstr(r.body, "control"));
	sf_resp_free(&r);
	sf_checkout_as(11, "Ada", "a%40example.org", NULL, &r);
	assert_int_equal(r.status, 422);
	assert_non_null(strstr(r.body, "seats must be between 1 and 10"));
	sf_resp_free(&r);
	sf_checkout_as(1, "Ada", "a%40example.org", NULL, &r);
	assert_int_equal(r.status, 429);
	assert_true(atoi(r.retry_after) >= 1);
	sf_resp_free(&r);
	assert_int_equal(sf_count("SELECT count(*) FROM holds"), 0);
	/* from a trusted proxy, X-Forwarded-For's last address is the buyer:
	 * another address, its own rate */
	sf_checkout_as(1, "Ada", "a%40example.org", "198.51.100.1, 203.0.113.9", &r);
	assert_int_equal(r.status, 303);
	sf_resp_free(&r);
	sf_checkout_as(1, "Ada", "not-an-address", "203.0.113.9", &r);
	assert_int_equal(r.status, 422);
	sf_resp_free(&r);
	assert_int_equal(sf_count("SELECT count(*) FROM holds"), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM holds WHERE client = '203.0.113.9'"), 1);
}

/* An email address locks nobody out: a stranger's checkouts under it count
 * against the stranger's address, not the address typed. */
static void test_an_email_locks_nobody_out(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];
	struct resp r;

	(void)state;
	/* (each a while after the last: the same checkout at once is a double click) */
	sf_checkout(1, "ka%40example.org", hold, session);
	clock_fake_advance(LINE_AGAIN_MS);
	sf_checkout(1, "KA%40example.org", hold, session);
	clock_fake_advance(LINE_AGAIN_MS);
	sf_checkout_as(1, "Ka", "ka%40example.org", "198.51.100.1, 203.0.113.50", &r);
	assert_int_equal(r.status, 303);
	sf_resp_free(&r);
	/* seats are digits, and nothing else */
	sf_checkout_raw("seats=1e9&name=Lu&email=lu%40example.org", &r);
	assert_int_equal(r.status, 422);
	sf_resp_free(&r);
	sf_checkout_raw("seats=+1&name=Lu&email=lu%40example.org", &r);
	assert_int_equal(r.status, 422);
	sf_resp_free(&r);
	sf_checkout_raw("name=Lu&email=lu%40example.org", &r);
	assert_int_equal(r.status, 422);
	sf_resp_free(&r);
	assert_int_equal(sf_count("SELECT count(*) FROM holds"), 3);
}

/* payment_provider = none: the events show, the window sells, the shop
 * takes no checkout and has no webhook */
static void test_no_provider_sells_at_the_window(void **state)
{
	char path[64], url[128];
	struct resp r;

	(void)state;
	snprintf(path, sizeof path, "/e/%lld", (long long)F.event_id);
	sf_get(path, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "sold at the box office"));
	assert_null(strstr(r.body, "<form"));
	sf_resp_free(&r);
	snprintf(url, sizeof url, "%s/e/%lld/checkout", F.url, (long long)F.event_id);
	sf_http("POST", url, "seats=1&name=Ada&email=a%40example.org", NULL, &r);
	assert_int_equal(r.status, 409);
	sf_resp_free(&r);
	snprintf(url, sizeof url, "%s/stripe/webhook", F.url);
	sf_http("POST", url, "{}", NULL, &r);
	assert_int_equal(r.status, 404);
	sf_resp_free(&r);
	assert_int_equal(sf_count("SELECT count(*) FROM holds"), 0);
}

/* the shop with its own certificate: HTTPS only, its cookie Secure, a
 * whole sale through it (paysink's webhook over HTTPS too) */
static void test_own_certificate(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], url[128];
	struct resp r;
	CURL *c;

	(void)state;
	sf_get("/", NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "Late Show"));
	sf_resp_free(&r);
	snprintf(url, sizeof url, "/e/%lld", (long long)F.event_id);
	sf_get(url, NULL, &r);
	assert_non_null(strstr(r.cookie_line, "; Secure"));
	assert_non_null(strstr(r.cookie_line, "; HttpOnly"));
	assert_non_null(strstr(r.cookie_line, "; SameSite=Lax"));
	sf_resp_free(&r);
	sf_checkout(1, "tls%40example.org", hold, session);
	sf_pay(session);
	sf_wait_count("SELECT count(*) FROM orders", 1);
	/* plain HTTP on its port gets no HTTP answer */
	snprintf(url, sizeof url, "http://127.0.0.1:%d/", F.port);
	c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	assert_int_not_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
}

/* stagedoor demo --shop: the demo's event priced, its provider's key and
 * secret made for it (files the user alone may read, out of any command
 * line), a configuration the box takes, and the script that runs the box
 * with paysink beside it, printed when there is no terminal */
static void test_demo_prepares_its_shop(void **state)
{
	char bin[PATH_MAX], ps[PATH_MAX], script[PATH_MAX * 3], out[400], path[600];
	char *text;
	struct stat st;
	size_t n;
	const char *files[] = { "stripe.key", "stripe.whsec", "stagedoor.conf" };
	size_t i;

	(void)state;
	TU_SQLITE_ONLY();
	assert_non_null(realpath(tu_bin(), bin));
	assert_non_null(realpath(getenv("PAYSINK_BIN") ? getenv("PAYSINK_BIN") : "build/paysink",
				 ps));
	snprintf(script, sizeof script, "cd '%s' && exec '%s' demo --orders 5 --shop '%s'",
		 F.e->dir, bin, ps);
	snprintf(out, sizeof out, "%s/demo.out", F.e->dir);
	assert_int_equal(tu_exec((const char *const[]){ "/bin/sh", "-c", script, NULL }, out, NULL,
				 60000), 0);
	text = (char *)tu_slurp(out, &n);
	snprintf(path, sizeof path, "box and shop: sh %s/var/demo/run.sh", F.e->dir);
	if (!strstr(text, path))
		tu_fail_free(text, NULL, "demo printed no script line:\n%s", text);
	free(text);
	for (i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(path, sizeof path, "%s/var/demo/%s", F.e->dir, files[i]);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
	}
	snprintf(path, sizeof path, "%s/var/demo/run.sh", F.e->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	text = (char *)tu_slurp(path, &n);
	/* the key and the secret are read from their files, never on a command line */
	if (strstr(text, "sk_test") || strstr(text, "whsec_") || !strstr(text, "--api-key-file") ||
	    !strstr(text, " run --config "))
		tu_fail_free(text, NULL, "run.sh:\n%s", text);
	free(text);
	/* the box takes its configuration; the event is priced */
	snprintf(path, sizeof path, "%s/var/demo/stagedoor.conf", F.e->dir);
	assert_int_equal(tu_exec((const char *const[]){ bin, "config", "show", "--config", path,
						       NULL }, out, NULL, 20000), 0);
	snprintf(script, sizeof script, "'%s' event show 1 --json --db '%s/var/demo/stagedoor.db'",
		 bin, F.e->dir);
	assert_int_equal(tu_exec((const char *const[]){ "/bin/sh", "-c", script, NULL }, out, NULL,
				 20000), 0);
	text = (char *)tu_slurp(out, &n);
	if (!strstr(text, "\"price\": \"25.00\"") || !strstr(text, "\"currency\": \"EUR\""))
		tu_fail_free(text, NULL, "the demo's event has no price:\n%s", text);
	free(text);
}

/* ---- a whole event at once ----------------------------------------------------- */

#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })
static char out[16384], err[16384];


/* the refunds in paysink's record under key */
static int refunds_keyed(const char *key, int64_t *amount)
{
	json_t *rec = sf_record(), *x;
	size_t i;
	int n = 0;

	json_array_foreach(json_object_get(rec, "refunds"), i, x)
		if (strcmp(json_string_value(json_object_get(x, "idempotency_key")), key) == 0) {
			n++;
			*amount = json_integer_value(json_object_get(x, "amount"));
		}
	json_decref(rec);
	return n;
}

/* a cancelled event refunds each payment once under refund-<order>, even
 * when the worker dies between the provider's refund and its record */
static void test_event_cancel_refunds_each_payment_once(void **state)
{
	char a[16], b[16], w[16], key[40];
	struct order_new o = { F.event_id, "Window", NULL, 1, NULL, "card", 0, 0, NULL, NULL };
	struct event_run_view run;
	int already = 0, replayed = 0, rc = 0, round;
	int64_t amount = 0;
	json_t *rec;

	(void)state;
	sf_paid_order("a%40example.org", a);
	sf_paid_order("b%40example.org", b);
	assert_int_equal(order_add(F.e->db, &o, w, &replayed), SD_OK);
	/* the holds' look-ups, due when their holds would have run out, done
	 * now: the workers below, on the real clock, find nothing else ahead */
	sf_drain();
	clock_fake_set(sf_real_ms() + 11 * MIN_MS);
	sf_drain();
	clock_fake_set(sf_real_ms());
	assert_int_equal(sf_count("SELECT count(*) FROM stream"), 0);
	assert_int_equal(event_cancel(F.e->db, F.event_id, "test", "Storm", &run, &already),
			 SD_OK);
	/* a worker of its own, with the provider, killed after paysink refunded */
	setenv("STAGEDOOR_PAYMENT_PROVIDER", "stripe", 1);
	setenv("STAGEDOOR_STRIPE_API_URL", F.ps_url, 1);
	setenv("STAGEDOOR_STRIPE_KEY_FILE", F.key_file, 1);
	setenv("STAGEDOOR_LEASE_MS", "1000", 1);
	setenv("STAGEDOOR_STRIPE_TIMEOUT_MS", "1000", 1);	/* a refund's claim: stale in 6 s */
	setenv("STAGEDOOR_FAILPOINTS", "refund_after_call=crash:1", 1);
	for (round = 0; round < 4 && rc != 70; round++) {
		assert_int_equal(RUN("relay", "--drain", "--db", F.e->db_path), 0);
		rc = RUN("worker", "--drain", "--concurrency", "1", "--db", F.e->db_path);
	}
	unsetenv("STAGEDOOR_FAILPOINTS");
	if (rc != 70)
		fail_msg("the worker was to die after the refund call (exit 70), got %d: %s", rc,
			 err);
	/* the next worker takes the job over when the dead one's lease ends, and
	 * its refund claim once that is stale (the provider's timeout + 5 s) */
	for (round = 0; round < 4 && sf_count("SELECT count(*) FROM stream") +
		    sf_count("SELECT count(*) FROM outbox WHERE published_at IS NULL") > 0; round++) {
		assert_int_equal(RUN("relay", "--drain", "--db", F.e->db_path), 0);
		assert_int_equal(RUN("worker", "--drain", "--db", F.e->db_path), 0);
	}
	assert_int_equal(sf_count("SELECT count(*) FROM stream") +
			 sf_count("SELECT count(*) FROM outbox WHERE published_at IS NULL"), 0);
	unsetenv("STAGEDOOR_LEASE_MS");
	unsetenv("STAGEDOOR_STRIPE_TIMEOUT_MS");
	unsetenv("STAGEDOOR_PAYMENT_PROVIDER");
	unsetenv("STAGEDOOR_STRIPE_API_URL");
	unsetenv("STAGEDOOR_STRIPE_KEY_FILE");
	/* each payment refunded once, in full, under its order's key */
	snprintf(key, sizeof key, "refund-%s", a);
	assert_int_equal(refunds_keyed(key, &amount), 1);
	assert_int_equal(amount, 1250);
	snprintf(key, sizeof key, "refund-%s", b);
	assert_int_equal(refunds_keyed(key, &amount), 1);
	rec = sf_record();
	assert_int_equal(json_array_size(json_object_get(rec, "refunds")), 2);
	/* the dead worker's call was asked again under the same key: replayed */
	assert_true(json_integer_value(json_object_get(json_object_get(rec, "idempotency"),
						       "replays")) >= 1);
	json_decref(rec);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds WHERE via = 'provider' AND "
			       "done_at IS NOT NULL AND provider_refund_id LIKE 're_%'"), 2);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds WHERE via = 'window'"), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM outbox WHERE kind = 'refund_payment'"), 0);
	assert_int_equal(sf_count("SELECT refunded FROM event_runs"), 2);
	assert_int_equal(sf_count("SELECT at_window FROM event_runs"), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM event_runs WHERE finished_at IS NOT NULL"), 1);
	/* the buyers with an address: one email each (the window's buyer gave none) */
	assert_int_equal(sf_count("SELECT count(*) FROM email_sends WHERE kind = 'cancel-event' AND "
			       "sent_at IS NOT NULL"), 2);
}

/* the message in the maildir whose name starts with prefix, its quoted-
 * printable text flattened; malloc'd */
static char *mail_text(const char *prefix)
{
	char path[800], *buf = NULL, *o;
	const char *p;
	struct dirent *d;
	DIR *dp = opendir(F.maildir);
	FILE *f = NULL;
	long n;

	assert_non_null(dp);
	while ((d = readdir(dp)) && !f)
		if (strncmp(d->d_name, prefix, strlen(prefix)) == 0) {
			snprintf(path, sizeof path, "%s/%s", F.maildir, d->d_name);
			f = fopen(path, "rb");
		}
	closedir(dp);
	if (!f)
		fail_msg("no message %s* in %s", prefix, F.maildir);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	for (p = buf, o = buf; *p; p++) {
		if (p[0] == '=' && p[1] == '\r' && p[2] == '\n')
			p += 2;
		else if (p[0] == '=' && p[1] == '3' && p[2] == 'D')
			*o++ = '=', p += 2;
		else
			*o++ = *p;
	}
	*o = '\0';
	return buf;
}

/* a buyer who cannot come on a moved event's new date cancels from the
 * email's link, once, however often they press, and is refunded once */
/* a paid order for address a (into pub), its event moved 40 days on: the
 * link in its moved email (its path into path), the form's CSRF token and
 * cookie from the page the link opens */
static void moved_order_link(const char *address, char *pub, char *link, size_t lsize,
			     char *path, size_t psize, char *tok, char *cookie, size_t csize)
{
	struct event_change ch = { EVENT_SET_STARTS };
	struct event_view v;
	struct resp r;
	char prefix[48], *text, *p, *q;

	snprintf(F.tenv->shop_url, sizeof F.tenv->shop_url, "%s", F.url);
	sf_paid_order(address, pub);
	sf_drain();
	ch.starts_at = clock_now_ms() + 40 * 24 * 3600 * 1000LL;
	ch.actor = "test";
	assert_int_equal(event_set(F.e->db, F.event_id, &ch, &v, NULL), SD_OK);
	sf_drain();
	snprintf(prefix, sizeof prefix, "moved-%lld-1-%s", (long long)F.event_id, pub);
	text = mail_text(prefix);
	p = strstr(text, F.url);
	if (!p)
		fail_msg("no link to the shop in the moved email: %s", text);
	q = p + strcspn(p, "\r\n ");
	snprintf(link, lsize, "%.*s", (int)(q - p), p);
	free(text);
	snprintf(path, psize, "%s", link + strlen(F.url));
	assert_int_equal(strncmp(path, "/r/", 3), 0);
	/* the page offers the refund, with its form */
	sf_get(path, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "Cancel my order and pay me back"));
	p = strstr(r.body, "name=\"csrf\" value=\"");
	assert_non_null(p);
	snprintf(tok, 32, "%.26s", p + 19);
	snprintf(cookie, csize, "Cookie: %s", r.cookie);
	sf_resp_free(&r);
}

static void test_moved_event_refund_link(void **state)
{
	char a[16], prefix[48], link[400], path[400], tok[32], cookie[160], body[200];
	char bad[400], url[440];
	const char *headers[] = { cookie, NULL };
	struct resp r;
	int64_t amount = 0;
	char *p;

	(void)state;
	moved_order_link("mover%40example.org", a, link, sizeof link, path, sizeof path, tok,
			 cookie, sizeof cookie);
	/* a link for another order, a changed token, a change that never was */
	snprintf(bad, sizeof bad, "%s", path);
	bad[strlen(bad) - 1] = bad[strlen(bad) - 1] == '0' ? '1' : '0';
	sf_get(bad, NULL, &r);
	assert_int_equal(r.status, 404);
	sf_resp_free(&r);
	snprintf(bad, sizeof bad, "%s", path);
	p = strstr(bad, "c=1");
	assert_non_null(p);
	p[2] = '2';
	sf_get(bad, NULL, &r);
	assert_int_equal(r.status, 404);
	sf_resp_free(&r);
	/* the form without its token changes nothing */
	snprintf(url, sizeof url, "%s/r/%s", F.url, a);
	p = strstr(link, "t=");
	snprintf(body, sizeof body, "c=1&%s&csrf=%s", p, "aaaaaaaaaaaaaaaaaaaaaaaaaa");
	sf_http("POST", url, body, headers, &r);
	assert_int_equal(r.status, 403);
	sf_resp_free(&r);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM orders WHERE public_id = "
				   "'%s' AND cancelled_at IS NULL", a), 1);
	/* pressed twice: one cancellation, one refund */
	snprintf(body, sizeof body, "c=1&%s&csrf=%s", p, tok);
	sf_http("POST", url, body, headers, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "Your order is cancelled"));
	sf_resp_free(&r);
	sf_http("POST", url, body, headers, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "Your order is cancelled"));
	sf_resp_free(&r);
	sf_drain();
	snprintf(prefix, sizeof prefix, "refund-%s", a);
	assert_int_equal(refunds_keyed(prefix, &amount), 1);
	assert_int_equal(amount, 1250);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM order_changes c JOIN orders "
				   "o ON o.id = c.order_id WHERE o.public_id = '%s' AND c.kind = "
				   "'cancel' AND c.actor = 'buyer'", a), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM email_sends WHERE kind = 'cancel' AND "
			       "sent_at IS NOT NULL"), 1);
}

/* a ticket admitted at the door: the link cancels nothing and says why */
static void test_refund_link_after_admission(void **state)
{
	char a[16], link[400], path[400], tok[32], cookie[160], body[200], url[440];
	char key_path[600], code[CODE_TEXT_MAX];
	const char *headers[] = { cookie, NULL };
	unsigned char key[CODE_KEY_LEN];
	struct scan_result sr;
	struct resp r;

	(void)state;
	moved_order_link("admitted%40example.org", a, link, sizeof link, path, sizeof path, tok,
			 cookie, sizeof cookie);
	assert_int_equal(code_key_path(F.e->db_path, tu_state(F.e), key_path, sizeof key_path),
			 SD_OK);
	assert_int_equal(code_key_load(key_path, key), SD_OK);
	code_make(key, tu_countf(F.e->db_path, "SELECT t.code_id FROM tickets t JOIN orders o ON "
				 "o.id = t.order_id WHERE o.public_id = '%s' ORDER BY t.id LIMIT 1",
				 a), F.event_id, code);
	assert_int_equal(scan_ticket(F.e->db, key, code, NULL,
				     &(struct scan_by){ "front-door", NULL, NULL }, &sr), SD_OK);
	assert_int_equal(sr.outcome, SCAN_ADMITTED);
	snprintf(url, sizeof url, "%s/r/%s", F.url, a);
	snprintf(body, sizeof body, "c=1&%s&csrf=%s", strstr(link, "t="), tok);
	sf_http("POST", url, body, headers, &r);
	assert_int_equal(r.status, 409);
	assert_non_null(strstr(r.body, "was admitted at"));
	assert_non_null(strstr(r.body, "the order is not cancelled"));
	sf_resp_free(&r);
	sf_drain();
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM orders WHERE public_id = "
				   "'%s' AND cancelled_at IS NULL", a), 1);
	assert_int_equal(sf_count("SELECT count(*) FROM refunds"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_signatures_from_the_official_package,
						setup_drop, sf_teardown),
		cmocka_unit_test_setup_teardown(test_webhook_twice_makes_one_order, setup_dup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_webhook_never_the_reconcile_makes_the_order,
						setup_drop, sf_teardown),
		cmocka_unit_test_setup_teardown(test_out_of_order_the_return_first, setup_delay,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_late_payment_order_or_one_refund, setup_drop,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_cancel_refunds_once, setup, sf_teardown),
		cmocka_unit_test_setup_teardown(test_held_seats_come_free, setup, sf_teardown),
		cmocka_unit_test_setup_teardown(test_what_strangers_get, setup_strict, sf_teardown),
		cmocka_unit_test_setup_teardown(test_an_email_locks_nobody_out, setup, sf_teardown),
		cmocka_unit_test_setup_teardown(test_no_provider_sells_at_the_window, setup_none,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_own_certificate, setup_tls, sf_teardown),
		cmocka_unit_test_setup_teardown(test_demo_prepares_its_shop, setup, sf_teardown),
		cmocka_unit_test_setup_teardown(test_event_cancel_refunds_each_payment_once, setup,
						sf_teardown),
		cmocka_unit_test_setup_teardown(test_moved_event_refund_link, setup, sf_teardown),
		cmocka_unit_test_setup_teardown(test_refund_link_after_admission, setup, sf_teardown),
	};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
