/*
 * test_paysink.c: the local Stripe-like payment provider (tools/paysink),
 * driven over HTTP by libcurl as the box will drive it, its webhooks taken
 * by a small receiver (paysink_harness.h) that checks each Stripe-Signature
 * with its own HMAC-SHA256, and once by the official stripe npm package
 * (tests/browser/paysink_stripe.mjs).  test_paysink_money.c tests the money:
 * currencies, delayed payments, refunds' lives, disputes.
 *
 * Each test starts build/paysink ($PAYSINK_BIN) on a free loopback port,
 * waits for its port file, and stops it with SIGTERM after (it must exit 0).
 * What is checked is the provider's promise: Stripe's shapes and errors,
 * one answer per idempotency key, no payment charged twice, refunds never
 * beyond the charge, and every event delivered, duplicated, dropped or
 * retried exactly as the options order, as its record file says.
 */
#define _GNU_SOURCE
#include "paysink_harness.h"

/* ---- tests: the API ------------------------------------------------------------ */

/* a session is created with Stripe's fields and read back; unknown ids,
 * missing and out-of-range parameters answered as Stripe answers them */
static void test_session_create_and_read(void **state)
{
	struct ps *s = *state;
	char form[2048], path[200], id[128], url[300];
	long long exp = (long long)time(NULL) + 3600;
	struct reply r;

	ps_start(s, 0, NULL);
	snprintf(form, sizeof form, "%s&expires_at=%lld", SESSION_FORM, exp);
	call(s, "POST", "/v1/checkout/sessions", NULL, form, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.ctype, "application/json");
	assert_memory_equal(r.request_id, "req_", 4);
	assert_non_null(r.doc);
	snprintf(id, sizeof id, "%s", js(r.doc, "id"));
	assert_memory_equal(id, "cs_test_", 8);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/pay/%s", s->port, id);
	assert_string_equal(js(r.doc, "object"), "checkout.session");
	assert_string_equal(js(r.doc, "url"), url);
	assert_string_equal(js(r.doc, "status"), "open");
	assert_string_equal(js(r.doc, "payment_status"), "unpaid");
	assert_string_equal(js(r.doc, "mode"), "payment");
	assert_string_equal(js(r.doc, "currency"), "eur");	/* sent as EUR */
	assert_int_equal(ji(r.doc, "amount_total"), 5000);
	assert_int_equal(ji(r.doc, "amount_subtotal"), 5000);
	assert_int_equal(ji(r.doc, "expires_at"), exp);
	assert_string_equal(js(r.doc, "client_reference_id"), "order-1");
	assert_string_equal(js(r.doc, "customer_email"), "ada@example.org");
	assert_string_equal(js(r.doc, "metadata.hold"), "H1");
	assert_string_equal(js(r.doc, "payment_intent"), "(null)");
	assert_string_equal(js(r.doc, "success_url"),
			    "https://shop.example/ok?s={CHECKOUT_SESSION_ID}");
	assert_true(json_is_false(jget(r.doc, "livemode")));
	reply_free(&r);

	snprintf(path, sizeof path, "/v1/checkout/sessions/%s", id);
	call(s, "GET", path, NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(js(r.doc, "id"), id);
	assert_int_equal(ji(r.doc, "amount_total"), 5000);
	reply_free(&r);

	call(s, "GET", "/v1/checkout/sessions/cs_test_nosuch", NULL, NULL, &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(js(r.doc, "error.type"), "invalid_request_error");
	assert_string_equal(js(r.doc, "error.code"), "resource_missing");
	assert_string_equal(js(r.doc, "error.message"), "No such checkout.session: 'cs_test_nosuch'");
	reply_free(&r);

	/* no success_url; expires_at 10 minutes ahead; a bad integer */
	call(s, "POST", "/v1/checkout/sessions", NULL,
	     "mode=payment&line_items[0][price_data][currency]=eur"
	     "&line_items[0][price_data][unit_amount]=100"
	     "&line_items[0][price_data][product_data][name]=x&line_items[0][quantity]=1", &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.code"), "parameter_missing");
	assert_string_equal(js(r.doc, "error.param"), "success_url");
	reply_free(&r);
	snprintf(form, sizeof form, "%s&expires_at=%lld", SESSION_FORM, (long long)time(NULL) + 600);
	call(s, "POST", "/v1/checkout/sessions", NULL, form, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.param"), "expires_at");
	reply_free(&r);
	snprintf(form, sizeof form, "%s&line_items[0][quantity]=two", SESSION_FORM);
	call(s, "POST", "/v1/checkout/sessions", NULL, form, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.code"), "parameter_invalid_integer");
	assert_string_equal(js(r.doc, "error.param"), "line_items[0][quantity]");
	reply_free(&r);
	snprintf(form, sizeof form, "%s&colour=red", SESSION_FORM);
	call(s, "POST", "/v1/checkout/sessions", NULL, form, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.code"), "parameter_unknown");
	reply_free(&r);
	ps_stop(s);
}

/* the same key and parameters: the first answer again, nothing new */
static void test_idempotent_replay(void **state)
{
	struct ps *s = *state;
	struct reply r1, r2;
	json_t *rec;

	ps_start(s, 0, NULL);
	call(s, "POST", "/v1/checkout/sessions", "order-1-checkout", SESSION_FORM, &r1);
	assert_int_equal(r1.status, 200);
	assert_string_equal(r1.replayed, "");
	call(s, "POST", "/v1/checkout/sessions", "order-1-checkout", SESSION_FORM, &r2);
	assert_int_equal(r2.status, 200);
	assert_string_equal(r2.replayed, "true");
	assert_string_equal(js(r2.doc, "id"), js(r1.doc, "id"));
	assert_string_equal(r2.body, r1.body);
	/* a request of its own, naming the first */
	assert_string_not_equal(r2.request_id, r1.request_id);
	assert_string_equal(r1.original, r1.request_id);
	assert_string_equal(r2.original, r1.request_id);
	reply_free(&r1);
	reply_free(&r2);
	rec = record_get(s);
	assert_int_equal(jn(rec, "sessions"), 1);
	assert_int_equal(ji(rec, "idempotency.keys"), 1);
	assert_int_equal(ji(rec, "idempotency.replays"), 1);
	json_decref(rec);
	ps_stop(s);
}

/* the same key with other parameters: 400 idempotency_error, nothing new */
static void test_same_key_other_params(void **state)
{
	struct ps *s = *state;
	char form[2048];
	struct reply r;
	json_t *rec;

	ps_start(s, 0, NULL);
	call(s, "POST", "/v1/checkout/sessions", "k-1", SESSION_FORM, &r);
	assert_int_equal(r.status, 200);
	reply_free(&r);
	snprintf(form, sizeof form, "%s&metadata[extra]=1", SESSION_FORM);
	call(s, "POST", "/v1/checkout/sessions", "k-1", form, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.type"), "idempotency_error");
	assert_string_equal(js(r.doc, "error.message"),
			    "Keys for idempotent requests can only be used with the same parameters "
			    "they were first used with. Try using a key other than 'k-1' if you "
			    "meant to execute a different request.");
	assert_string_equal(r.replayed, "");
	reply_free(&r);
	/* and on another endpoint */
	call(s, "POST", "/v1/refunds", "k-1", "payment_intent=pi_x", &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.type"), "idempotency_error");
	reply_free(&r);
	rec = record_get(s);
	assert_int_equal(jn(rec, "sessions"), 1);
	assert_int_equal(ji(rec, "idempotency.conflicts"), 2);
	json_decref(rec);
	ps_stop(s);
}

/* a wrong or missing key: 401, the key shown redacted; Basic works too */
static void test_wrong_key_401(void **state)
{
	struct ps *s = *state;
	struct reply r;
	char basic[200];
	unsigned char b64[100];
	size_t olen = 0;

	ps_start(s, 0, NULL);
	call_h(s, "GET", "/v1/refunds", "Bearer sk_test_wrongKey1234", NULL, NULL, NULL, &r);
	assert_int_equal(r.status, 401);
	assert_string_equal(js(r.doc, "error.type"), "invalid_request_error");
	assert_string_equal(js(r.doc, "error.message"),
			    "Invalid API Key provided: sk_test_****1234");
	reply_free(&r);
	call_h(s, "POST", "/v1/checkout/sessions", NULL, NULL, SESSION_FORM, NULL, &r);
	assert_int_equal(r.status, 401);
	assert_non_null(strstr(js(r.doc, "error.message"), "You did not provide an API key"));
	reply_free(&r);
	/* HTTP Basic, the key as the user, as Stripe takes it */
	assert_int_equal(mbedtls_base64_encode(b64, sizeof b64, &olen, (const unsigned char *)KEY ":",
					       strlen(KEY ":")), 0);
	snprintf(basic, sizeof basic, "Basic %.*s", (int)olen, (char *)b64);
	call_h(s, "GET", "/v1/refunds", basic, NULL, NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(js(r.doc, "object"), "list");
	reply_free(&r);
	ps_stop(s);
}

/* paid through the control: complete, paid, a payment intent, one charge;
 * paying again refused */
static void test_pay_once(void **state)
{
	struct ps *s = *state;
	char id[128], pi[64], path[200];
	struct reply r;
	json_t *rec;

	ps_start(s, 0, NULL);
	session_new(s, NULL, NULL, id, sizeof id);
	session_pay(s, id, pi, sizeof pi);
	assert_memory_equal(pi, "pi_", 3);
	snprintf(path, sizeof path, "/v1/checkout/sessions/%s", id);
	call(s, "GET", path, NULL, NULL, &r);
	assert_string_equal(js(r.doc, "status"), "complete");
	assert_string_equal(js(r.doc, "payment_status"), "paid");
	assert_string_equal(js(r.doc, "payment_intent"), pi);
	assert_string_equal(js(r.doc, "url"), "(null)");
	reply_free(&r);
	snprintf(path, sizeof path, "/_paysink/pay/%s", id);
	call_h(s, "POST", path, NULL, NULL, NULL, NULL, &r);
	assert_int_equal(r.status, 409);
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/payment_intents/%s", pi);
	call(s, "GET", path, NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(js(r.doc, "status"), "succeeded");
	assert_int_equal(ji(r.doc, "amount_received"), 5000);
	assert_string_equal(js(r.doc, "metadata.order"), "order-1");
	reply_free(&r);
	rec = record_get(s);
	assert_string_equal(js(rec, "sessions.0.status"), "complete");
	assert_string_equal(js(rec, "sessions.0.payment_status"), "paid");
	assert_string_equal(js(rec, "sessions.0.payment_intent"), pi);
	assert_int_equal(ji(rec, "sessions.0.charges"), 1);
	assert_true(ji(rec, "sessions.0.paid_at") > 0);
	json_decref(rec);
	ps_stop(s);
}

/* the hosted page: the amount, the line, Pay and Cancel; its Pay button
 * redirects to success_url with the id; a second press charges nothing */
static void test_hosted_page(void **state)
{
	struct ps *s = *state;
	char id[128], path[200], want[400];
	struct reply r;
	json_t *rec;

	ps_start(s, 0, NULL);
	session_new(s, NULL, NULL, id, sizeof id);
	snprintf(path, sizeof path, "/pay/%s", id);
	call_h(s, "GET", path, NULL, NULL, NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.ctype, "text/html; charset=utf-8");
	assert_non_null(strstr(r.body, "name=\"viewport\""));
	assert_non_null(strstr(r.body, "50.00 EUR"));
	assert_non_null(strstr(r.body, "Concert, stalls &times; 2"));
	assert_non_null(strstr(r.body, "<form method=\"post\" action=\"/pay/"));
	assert_non_null(strstr(r.body, ">Pay</button>"));
	assert_non_null(strstr(r.body, "href=\"https://shop.example/no\">Cancel</a>"));
	assert_null(strstr(r.body, "<script"));
	reply_free(&r);
	call_h(s, "POST", path, NULL, NULL, "", NULL, &r);
	assert_int_equal(r.status, 303);
	snprintf(want, sizeof want, "https://shop.example/ok?s=%s", id);
	assert_string_equal(r.location, want);
	reply_free(&r);
	/* a double click */
	call_h(s, "POST", path, NULL, NULL, "", NULL, &r);
	assert_int_equal(r.status, 409);
	assert_non_null(strstr(r.body, "already paid"));
	reply_free(&r);
	call_h(s, "GET", path, NULL, NULL, NULL, NULL, &r);
	assert_non_null(strstr(r.body, "already paid"));
	assert_null(strstr(r.body, ">Pay</button>"));
	reply_free(&r);
	rec = record_get(s);
	assert_int_equal(ji(rec, "sessions.0.charges"), 1);
	json_decref(rec);
	ps_stop(s);
}

/* expire: an open session expires (its url gone); an expired or paid one
 * is refused as Stripe refuses it */
static void test_expire(void **state)
{
	struct ps *s = *state;
	char a[128], b[128], path[200];
	struct reply r;

	ps_start(s, 0, NULL);
	session_new(s, NULL, NULL, a, sizeof a);
	session_new(s, NULL, NULL, b, sizeof b);
	snprintf(path, sizeof path, "/v1/checkout/sessions/%s/expire", a);
	call(s, "POST", path, NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(js(r.doc, "status"), "expired");
	assert_string_equal(js(r.doc, "url"), "(null)");
	reply_free(&r);
	call(s, "POST", path, NULL, NULL, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.type"), "invalid_request_error");
	assert_string_equal(js(r.doc, "error.message"),
			    "Only Checkout Sessions with a status in [\"open\"] can be expired. "
			    "This Checkout Session has a status of `expired`.");
	reply_free(&r);
	/* an expired session cannot be paid */
	snprintf(path, sizeof path, "/_paysink/pay/%s", a);
	call_h(s, "POST", path, NULL, NULL, NULL, NULL, &r);
	assert_int_equal(r.status, 409);
	reply_free(&r);
	session_pay(s, b, NULL, 0);
	snprintf(path, sizeof path, "/v1/checkout/sessions/%s/expire", b);
	call(s, "POST", path, NULL, NULL, &r);
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(js(r.doc, "error.message"), "has a status of `complete`"));
	reply_free(&r);
	ps_stop(s);
}

/* refunds: once in full; again refused charge_already_refunded; the first
 * replayed under its key answers the same refund; partial beyond what is
 * left refused; an unknown payment intent 404 */
static void test_refunds(void **state)
{
	struct ps *s = *state;
	char id[128], id2[128], pi[64], pi2[64], form[200], re[64];
	struct reply r;
	json_t *rec;

	ps_start(s, 0, NULL);
	session_new(s, NULL, NULL, id, sizeof id);
	session_pay(s, id, pi, sizeof pi);
	snprintf(form, sizeof form, "payment_intent=%s&reason=requested_by_customer", pi);
	call(s, "POST", "/v1/refunds", "refund-order-1", form, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(js(r.doc, "object"), "refund");
	assert_string_equal(js(r.doc, "status"), "succeeded");
	assert_string_equal(js(r.doc, "payment_intent"), pi);
	assert_string_equal(js(r.doc, "currency"), "eur");
	assert_int_equal(ji(r.doc, "amount"), 5000);
	snprintf(re, sizeof re, "%s", js(r.doc, "id"));
	assert_memory_equal(re, "re_", 3);
	reply_free(&r);
	call(s, "POST", "/v1/refunds", "refund-order-1-again", form, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.code"), "charge_already_refunded");
	reply_free(&r);
	call(s, "POST", "/v1/refunds", "refund-order-1", form, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.replayed, "true");
	assert_string_equal(js(r.doc, "id"), re);
	reply_free(&r);

	session_new(s, NULL, NULL, id2, sizeof id2);
	session_pay(s, id2, pi2, sizeof pi2);
	snprintf(form, sizeof form, "payment_intent=%s&amount=4000", pi2);
	call(s, "POST", "/v1/refunds", NULL, form, &r);
	assert_int_equal(r.status, 200);
	reply_free(&r);
	call(s, "POST", "/v1/refunds", NULL, form, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.code"), "amount_too_large");
	assert_string_equal(js(r.doc, "error.param"), "amount");
	reply_free(&r);
	call(s, "POST", "/v1/refunds", NULL, "payment_intent=pi_nosuch", &r);
	assert_int_equal(r.status, 404);
	assert_string_equal(js(r.doc, "error.code"), "resource_missing");
	assert_string_equal(js(r.doc, "error.param"), "payment_intent");
	reply_free(&r);
	snprintf(form, sizeof form, "/v1/refunds?payment_intent=%s", pi2);
	call(s, "GET", form, NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(jn(r.doc, "data"), 1);
	assert_true(json_is_false(jget(r.doc, "has_more")));
	reply_free(&r);

	rec = record_get(s);
	assert_int_equal(jn(rec, "refunds"), 2);
	assert_string_equal(js(rec, "refunds.0.payment_intent"), pi);
	assert_string_equal(js(rec, "refunds.0.idempotency_key"), "refund-order-1");
	assert_int_equal(ji(rec, "refunds.0.amount"), 5000);
	assert_int_equal(ji(rec, "sessions.0.amount_refunded"), 5000);
	assert_int_equal(ji(rec, "sessions.1.amount_refunded"), 4000);
	json_decref(rec);
	ps_stop(s);
}

/* a session expires by itself at its expires_at (the clock moved on) */
static void test_expires_by_itself(void **state)
{
	struct ps *s = *state;
	char id[128], more[64], path[200];
	struct reply r;
	json_t *rec;

	ps_start(s, 0, NULL);
	snprintf(more, sizeof more, "&expires_at=%lld", (long long)time(NULL) + 1800);
	session_new(s, NULL, more, id, sizeof id);
	call_h(s, "POST", "/_paysink/clock?advance=1700", NULL, NULL, NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	reply_free(&r);
	snprintf(path, sizeof path, "/v1/checkout/sessions/%s", id);
	call(s, "GET", path, NULL, NULL, &r);
	assert_string_equal(js(r.doc, "status"), "open");
	reply_free(&r);
	call_h(s, "POST", "/_paysink/clock?advance=200", NULL, NULL, NULL, NULL, &r);
	reply_free(&r);
	call(s, "GET", path, NULL, NULL, &r);
	assert_string_equal(js(r.doc, "status"), "expired");
	reply_free(&r);
	rec = record_get(s);
	assert_true(ji(rec, "sessions.0.expired_at") >= ji(rec, "sessions.0.expires_at"));
	assert_string_equal(js(rec, "events.0.type"), "checkout.session.expired");
	assert_string_equal(js(rec, "events.0.session"), id);
	json_decref(rec);
	ps_stop(s);
}

struct slow_post {
	struct ps *s;
	struct reply r;
};

static void *slow_post_run(void *arg)
{
	struct slow_post *p = arg;

	call(p->s, "POST", "/v1/checkout/sessions", "slow-key", SESSION_FORM, &p->r);
	return NULL;
}

/* a second request while the key's first runs: 409 idempotency_key_in_use */
static void test_in_flight_409(void **state)
{
	struct ps *s = *state;
	const char *extra[] = { "--slow-ms", "1500", NULL };
	struct slow_post first = { .s = s };
	struct reply r;
	pthread_t th;
	json_t *rec;

	ps_start(s, 0, extra);
	assert_int_equal(pthread_create(&th, NULL, slow_post_run, &first), 0);
	tu_sleep_ms(500);
	call(s, "POST", "/v1/checkout/sessions", "slow-key", SESSION_FORM, &r);
	assert_int_equal(r.status, 409);
	assert_string_equal(js(r.doc, "error.type"), "idempotency_error");
	assert_string_equal(js(r.doc, "error.code"), "idempotency_key_in_use");
	reply_free(&r);
	pthread_join(th, NULL);
	assert_int_equal(first.r.status, 200);
	reply_free(&first.r);
	rec = record_get(s);
	assert_int_equal(jn(rec, "sessions"), 1);
	assert_int_equal(ji(rec, "idempotency.in_use"), 1);
	json_decref(rec);
	ps_stop(s);
}

/* --fail-5xx-pct: 500 api_error with nothing stored, so each key's retry
 * runs afresh and ends with one session; the same seed, the same faults */
static void test_injected_5xx(void **state)
{
	struct ps *s = *state;
	const char *extra[] = { "--fail-5xx-pct", "50", "--seed", "9", NULL };
	char pattern[2][121];
	int run;

	for (run = 0; run < 2; run++) {
		long posts = 0;
		int i, n = 0;
		json_t *rec;

		ps_start(s, 0, extra);
		for (i = 0; i < 20; i++) {
			char key[32];
			struct reply r;

			long st;

			snprintf(key, sizeof key, "key-%d", i);
			do {
				call(s, "POST", "/v1/checkout/sessions", key, SESSION_FORM, &r);
				posts++;
				st = r.status;
				assert_true(st == 200 || st == 500);
				if (st == 500)
					assert_string_equal(js(r.doc, "error.type"), "api_error");
				assert_string_equal(r.replayed, "");
				if (n < 120)
					pattern[run][n++] = st == 200 ? '.' : 'x';
				reply_free(&r);
			} while (st == 500 && posts < 400);
		}
		pattern[run][n] = '\0';
		rec = record_get(s);
		assert_int_equal(jn(rec, "sessions"), 20);
		assert_int_equal(ji(rec, "idempotency.keys"), 20);
		assert_int_equal(ji(rec, "injected_5xx"), posts - 20);
		assert_true(ji(rec, "injected_5xx") >= 5);
		json_decref(rec);
		ps_stop(s);
	}
	assert_string_equal(pattern[0], pattern[1]);
}

/* --refund-fail-pct 100: refunds fail, sessions do not */
static void test_refund_fail(void **state)
{
	struct ps *s = *state;
	const char *extra[] = { "--refund-fail-pct", "100", NULL };
	char id[128], pi[64], form[120];
	struct reply r;
	json_t *rec;

	ps_start(s, 0, extra);
	session_new(s, "s-1", NULL, id, sizeof id);
	session_pay(s, id, pi, sizeof pi);
	snprintf(form, sizeof form, "payment_intent=%s", pi);
	call(s, "POST", "/v1/refunds", "r-1", form, &r);
	assert_int_equal(r.status, 500);
	assert_string_equal(js(r.doc, "error.type"), "api_error");
	reply_free(&r);
	rec = record_get(s);
	assert_int_equal(jn(rec, "refunds"), 0);
	assert_int_equal(ji(rec, "injected_5xx"), 1);
	assert_int_equal(ji(rec, "sessions.0.amount_refunded"), 0);
	json_decref(rec);
	ps_stop(s);
}

/* ---- tests: webhooks ------------------------------------------------------------ */

/* paid sessions' events reach the receiver, each signed as Stripe signs
 * (checked here with this test's own HMAC), with both secrets while one
 * rotates; the record counts one attempt and one 2xx for each */
static void test_webhook_signed(void **state)
{
	struct ps *s = *state;
	const char *extra[] = { "--webhook-secret-2", SECRET2, NULL };
	char a[128], b[128];
	struct hit hits[HITS_MAX];
	json_t *rec;
	int n, i;

	hook_start(&s->hook, NULL, 0);
	ps_start(s, 1, extra);
	session_new(s, NULL, NULL, a, sizeof a);
	session_new(s, NULL, NULL, b, sizeof b);
	session_pay(s, a, NULL, 0);
	session_pay(s, b, NULL, 0);
	hook_wait(&s->hook, 2, 10000);
	tu_sleep_ms(300);	/* nothing more comes */
	n = hook_hits(s, hits, HITS_MAX);
	assert_int_equal(n, 2);
	assert_string_not_equal(hits[0].id, hits[1].id);
	rec = record_get(s);
	for (i = 0; i < n; i++) {
		json_t *ev = record_event(rec, hits[i].id);

		assert_memory_equal(hits[i].id, "evt_", 4);
		assert_string_equal(hits[i].type, "checkout.session.completed");
		assert_true(strcmp(hits[i].object_id, a) == 0 || strcmp(hits[i].object_id, b) == 0);
		assert_string_equal(hits[i].payment_status, "paid");
		assert_true(hits[i].sig_ok);
		assert_true(hits[i].sig_ok2);
		assert_int_equal(hits[i].n_v1, 2);
		assert_string_equal(hits[i].ua, "Stripe/1.0 (+https://stripe.com/docs/webhooks)");
		assert_int_equal(ji(ev, "delivered_ok"), 1);
		assert_int_equal(ji(ev, "attempts"), 1);
		assert_true(json_is_false(jget(ev, "dropped")));
	}
	json_decref(rec);
	ps_stop(s);
}

/* --dup-pct 100: each event twice, the same event id both times */
static void test_webhook_dup(void **state)
{
	struct ps *s = *state;
	const char *extra[] = { "--dup-pct", "100", "--delay-ms-max", "200", NULL };
	char a[128], b[128];
	struct hit hits[HITS_MAX];
	json_t *rec;
	int n, i, j;

	hook_start(&s->hook, NULL, 0);
	ps_start(s, 1, extra);
	session_new(s, NULL, NULL, a, sizeof a);
	session_new(s, NULL, NULL, b, sizeof b);
	session_pay(s, a, NULL, 0);
	session_pay(s, b, NULL, 0);
	hook_wait(&s->hook, 4, 10000);
	tu_sleep_ms(500);
	n = hook_hits(s, hits, HITS_MAX);
	assert_int_equal(n, 4);
	rec = record_get(s);
	for (i = 0; i < n; i++) {
		int same = 0;

		assert_true(hits[i].sig_ok);
		for (j = 0; j < n; j++)
			same += strcmp(hits[i].id, hits[j].id) == 0;
		assert_int_equal(same, 2);
		assert_true(json_is_true(jget(record_event(rec, hits[i].id), "duplicated")));
		assert_int_equal(ji(record_event(rec, hits[i].id), "delivered_ok"), 2);
	}
	json_decref(rec);
	ps_stop(s);
}

/* --drop-pct 100: nothing arrives, and the record says each was dropped */
static void test_webhook_drop(void **state)
{
	struct ps *s = *state;
	const char *extra[] = { "--drop-pct", "100", NULL };
	char a[128];
	json_t *rec;

	hook_start(&s->hook, NULL, 0);
	ps_start(s, 1, extra);
	session_new(s, NULL, NULL, a, sizeof a);
	session_pay(s, a, NULL, 0);
	tu_sleep_ms(1500);
	assert_int_equal(hook_count(&s->hook), 0);
	rec = record_get(s);
	assert_int_equal(jn(rec, "events"), 1);
	assert_string_equal(js(rec, "events.0.type"), "checkout.session.completed");
	assert_string_equal(js(rec, "events.0.session"), a);
	assert_true(json_is_true(jget(rec, "events.0.dropped")));
	assert_int_equal(ji(rec, "events.0.attempts"), 0);
	assert_int_equal(ji(rec, "events.0.delivered_ok"), 0);
	json_decref(rec);
	ps_stop(s);
}

/* a receiver answering 500 and then 503 gets the event again, the same
 * event, signed again, until its 200; then no more */
static void test_webhook_retry(void **state)
{
	struct ps *s = *state;
	const int script[] = { 500, 503 };
	const char *extra[] = { "--retry-base-ms", "100", NULL };
	char a[128];
	struct hit hits[HITS_MAX];
	json_t *rec, *ev;
	int n;

	hook_start(&s->hook, script, 2);
	ps_start(s, 1, extra);
	session_new(s, NULL, NULL, a, sizeof a);
	session_pay(s, a, NULL, 0);
	hook_wait(&s->hook, 3, 10000);
	tu_sleep_ms(600);
	n = hook_hits(s, hits, HITS_MAX);
	assert_int_equal(n, 3);
	assert_int_equal(hits[0].status, 500);
	assert_int_equal(hits[1].status, 503);
	assert_int_equal(hits[2].status, 200);
	assert_string_equal(hits[1].id, hits[0].id);
	assert_string_equal(hits[2].id, hits[0].id);
	assert_true(hits[0].sig_ok && hits[1].sig_ok && hits[2].sig_ok);
	rec = record_get(s);
	ev = record_event(rec, hits[0].id);
	assert_int_equal(ji(ev, "attempts"), 3);
	assert_int_equal(ji(ev, "delivered_ok"), 1);
	json_decref(rec);
	ps_stop(s);
}

/* --webhook-attempts 2 against a receiver that always fails: two attempts,
 * then the copy gives up, counted */
static void test_webhook_gives_up(void **state)
{
	struct ps *s = *state;
	const int script[] = { 500, 500, 500, 500 };
	const char *extra[] = { "--retry-base-ms", "50", "--webhook-attempts", "2", NULL };
	char a[128];
	json_t *rec;

	hook_start(&s->hook, script, 4);
	ps_start(s, 1, extra);
	session_new(s, NULL, NULL, a, sizeof a);
	session_pay(s, a, NULL, 0);
	hook_wait(&s->hook, 2, 10000);
	tu_sleep_ms(500);
	assert_int_equal(hook_count(&s->hook), 2);
	rec = record_get(s);
	assert_int_equal(ji(rec, "events.0.attempts"), 2);
	assert_int_equal(ji(rec, "events.0.gave_up"), 1);
	assert_int_equal(ji(rec, "events.0.delivered_ok"), 0);
	json_decref(rec);
	ps_stop(s);
}

/* a receiver that does not answer within --webhook-timeout-ms: the attempt
 * counts as failed and the event comes again */
static void test_webhook_timeout_retried(void **state)
{
	struct ps *s = *state;
	const int script[] = { 0 };
	const char *extra[] = { "--webhook-timeout-ms", "300", "--retry-base-ms", "500", NULL };
	char a[128];
	struct hit hits[HITS_MAX];
	json_t *rec;

	hook_start(&s->hook, script, 1);
	ps_start(s, 1, extra);
	session_new(s, NULL, NULL, a, sizeof a);
	session_pay(s, a, NULL, 0);
	hook_wait(&s->hook, 2, 10000);
	tu_sleep_ms(HOOK_HANG_MS);
	assert_int_equal(hook_hits(s, hits, HITS_MAX), 2);
	assert_string_equal(hits[1].id, hits[0].id);
	assert_int_equal(hits[1].status, 200);
	rec = record_get(s);
	assert_int_equal(ji(rec, "events.0.attempts"), 2);
	assert_int_equal(ji(rec, "events.0.delivered_ok"), 1);
	json_decref(rec);
	ps_stop(s);
}

/* nobody listening at the webhook URL: each attempt is a connection error,
 * retried with backoff */
static void test_webhook_connection_refused(void **state)
{
	struct ps *s = *state;
	const char *extra[] = { "--retry-base-ms", "50", "--retry-cap-ms", "100", NULL };
	char a[128];
	json_t *rec;
	int waited;

	hook_start(&s->hook, NULL, 0);
	hook_stop(&s->hook);	/* its port is closed now */
	ps_start(s, 1, extra);
	session_new(s, NULL, NULL, a, sizeof a);
	session_pay(s, a, NULL, 0);
	for (waited = 0;; waited += 100) {
		rec = record_get(s);
		if (ji(rec, "events.0.attempts") >= 4 || waited > 5000)
			break;
		json_decref(rec);
		tu_sleep_ms(100);
	}
	assert_true(ji(rec, "events.0.attempts") >= 4);
	assert_int_equal(ji(rec, "events.0.delivered_ok"), 0);
	assert_int_equal(ji(rec, "events.0.gave_up"), 0);
	json_decref(rec);
	ps_stop(s);
}

/* --reorder: the session's refund event arrives before its completed one
 * (charge.refunded, which Stripe sends beside refund.created, left out: two
 * events show the order) */
static void test_webhook_reorder(void **state)
{
	struct ps *s = *state;
	const char *extra[] = { "--reorder", "--delay-ms-max", "300", "--webhook-events",
				"checkout.session.completed,refund.created", NULL };
	char a[128], pi[64], form[120];
	struct hit hits[HITS_MAX];
	struct reply r;

	hook_start(&s->hook, NULL, 0);
	ps_start(s, 1, extra);
	session_new(s, NULL, NULL, a, sizeof a);
	session_pay(s, a, pi, sizeof pi);
	snprintf(form, sizeof form, "payment_intent=%s", pi);
	call(s, "POST", "/v1/refunds", NULL, form, &r);
	assert_int_equal(r.status, 200);
	reply_free(&r);
	hook_wait(&s->hook, 2, 10000);
	assert_int_equal(hook_hits(s, hits, HITS_MAX), 2);
	assert_string_equal(hits[0].type, "refund.created");
	assert_string_equal(hits[1].type, "checkout.session.completed");
	assert_string_equal(hits[1].object_id, a);
	ps_stop(s);
}

/* ---- tests: the record, the controls, the options, TLS, the npm package -------- */

/* the record file holds exactly what GET /_paysink/record answers, after
 * each change and after SIGTERM */
static void test_record_file_equals_get(void **state)
{
	struct ps *s = *state;
	char a[128], pi[64], form[120];
	unsigned char *file;
	struct reply r, g;
	size_t size;

	hook_start(&s->hook, NULL, 0);
	ps_start(s, 1, NULL);
	session_new(s, "rec-1", NULL, a, sizeof a);
	session_pay(s, a, pi, sizeof pi);
	snprintf(form, sizeof form, "payment_intent=%s&amount=700", pi);
	call(s, "POST", "/v1/refunds", "rec-r1", form, &r);
	assert_int_equal(r.status, 200);
	reply_free(&r);
	hook_wait(&s->hook, 3, 10000);
	tu_sleep_ms(300);
	call_h(s, "GET", "/_paysink/record", NULL, NULL, NULL, NULL, &g);
	assert_int_equal(g.status, 200);
	file = tu_slurp(s->record, &size);
	assert_int_equal(size, g.len);
	assert_memory_equal(file, g.body, size);
	free(file);
	/* what it says */
	assert_int_equal(jn(g.doc, "sessions"), 1);
	assert_int_equal(jn(g.doc, "refunds"), 1);
	/* completed; refund.created and charge.refunded, as Stripe sends both */
	assert_int_equal(jn(g.doc, "events"), 3);
	assert_int_equal(ji(g.doc, "api_requests"), 2);
	assert_int_equal(ji(g.doc, "idempotency.keys"), 2);
	assert_int_equal(ji(g.doc, "injected_5xx"), 0);
	assert_string_equal(js(g.doc, "sessions.0.client_reference_id"), "order-1");
	assert_string_equal(js(g.doc, "sessions.0.metadata.hold"), "H1");
	assert_string_equal(js(g.doc, "sessions.0.customer_email"), "ada@example.org");
	ps_stop(s);
	file = tu_slurp(s->record, &size);
	assert_int_equal(size, g.len);
	assert_memory_equal(file, g.body, size);
	free(file);
	reply_free(&g);
}

/* POST /_paysink/verify: a header made here is accepted (an unknown v0
 * beside it ignored); a stale one, one for another payload or under
 * another secret refused */
static void test_verify_rule(void **state)
{
	struct ps *s = *state;
	const char *payload = "{\"id\":\"evt_1\",\"object\":\"event\"}";
	long long now = (long long)time(NULL);
	char hex[65], old[65], sig[300], secret[100];
	const char *hdrs[] = { sig, secret, NULL };
	struct reply r;

	ps_start(s, 0, NULL);
	snprintf(secret, sizeof secret, "X-Paysink-Secret: %s", SECRET);
	hmac_hex(SECRET, now, payload, strlen(payload), hex);
	snprintf(sig, sizeof sig, "Stripe-Signature: t=%lld,v1=%s,v0=abc", now, hex);
	call_h(s, "POST", "/_paysink/verify", NULL, NULL, payload, hdrs, &r);
	assert_int_equal(r.status, 200);
	assert_true(json_is_true(jget(r.doc, "ok")));
	reply_free(&r);
	call_h(s, "POST", "/_paysink/verify", NULL, NULL, "{\"id\":\"evt_2\"}", hdrs, &r);
	assert_true(json_is_false(jget(r.doc, "ok")));
	reply_free(&r);
	hmac_hex(SECRET, now - 400, payload, strlen(payload), old);
	snprintf(sig, sizeof sig, "Stripe-Signature: t=%lld,v1=%s", now - 400, old);
	call_h(s, "POST", "/_paysink/verify", NULL, NULL, payload, hdrs, &r);
	assert_true(json_is_false(jget(r.doc, "ok")));
	assert_non_null(strstr(js(r.doc, "reason"), "tolerance"));
	reply_free(&r);
	snprintf(sig, sizeof sig, "Stripe-Signature: t=%lld,v1=%s", now, hex);
	snprintf(secret, sizeof secret, "X-Paysink-Secret: %s", SECRET2);
	call_h(s, "POST", "/_paysink/verify", NULL, NULL, payload, hdrs, &r);
	assert_true(json_is_false(jget(r.doc, "ok")));
	reply_free(&r);
	ps_stop(s);
}

/* a value missing, out of range or unknown, plain HTTP off loopback, or a
 * required option missing: refused with exit 2 */
static void test_bad_options(void **state)
{
	struct ps *s = *state;
	const char *no_value[] = { "--dup-pct", NULL };
	const char *over[] = { "--drop-pct", "101", NULL };
	const char *neg[] = { "--delay-ms-max", "-1", NULL };
	const char *word[] = { "--webhook-attempts", "many", NULL };
	const char *unknown[] = { "--colour", "red", NULL };
	const char *half[] = { "--webhook-url", "http://127.0.0.1:9/x", NULL };
	const char *cap[] = { "--retry-base-ms", "5000", "--retry-cap-ms", "100", NULL };

	assert_int_equal(ps_run(s, "127.0.0.1:0", 0, no_value), 2);
	assert_int_equal(ps_run(s, "127.0.0.1:0", 0, over), 2);
	assert_int_equal(ps_run(s, "127.0.0.1:0", 0, neg), 2);
	assert_int_equal(ps_run(s, "127.0.0.1:0", 0, word), 2);
	assert_int_equal(ps_run(s, "127.0.0.1:0", 0, unknown), 2);
	assert_int_equal(ps_run(s, "127.0.0.1:0", 0, half), 2);
	assert_int_equal(ps_run(s, "127.0.0.1:0", 0, cap), 2);
	assert_int_equal(ps_run(s, "0.0.0.0:0", 0, NULL), 2);
	assert_int_equal(ps_run(s, "192.0.2.1:0", 0, NULL), 2);
	assert_int_equal(tu_count_in(s->log, "paysink: --drop-pct wants a whole number from 0 to "
				     "100, not '101'"), 1);
	assert_int_equal(tu_count_in(s->log, "paysink: --dup-pct wants a value"), 1);
	/* 127.0.0.0/8 is all loopback */
	assert_int_equal(ps_run(s, "127.0.0.2:0", 0, NULL), 0);
	ps_stop(s);
}

/* with --cert and --key: HTTPS, verified against the test CA, and the
 * session urls on https */
static void test_https(void **state)
{
	struct ps *s = *state;
	char cmd[500], cert[400], key[400], url[300];
	const char *extra[] = { "--cert", cert, "--key", key, NULL };
	struct reply r;

	snprintf(cmd, sizeof cmd, "sh tools/certs.sh '%s'", s->certs);
	assert_int_equal(system(cmd), 0);
	snprintf(cert, sizeof cert, "%s/server.pem", s->certs);
	snprintf(key, sizeof key, "%s/server.key", s->certs);
	ps_start(s, 0, extra);
	s->tls = 1;
	call(s, "POST", "/v1/checkout/sessions", "tls-1", SESSION_FORM, &r);
	assert_int_equal(r.status, 200);
	snprintf(url, sizeof url, "https://127.0.0.1:%d/pay/%s", s->port, js(r.doc, "id"));
	assert_string_equal(js(r.doc, "url"), url);
	reply_free(&r);
	ps_stop(s);
}

/* run the node script; its output on failure */
static void node_run(struct ps *s, const char *certs)
{
	char out[400], err[400], *text, *etext;
	const char *argv[] = { "node", NODE_SCRIPT, ps_bin(), s->env->dir, certs, NULL };
	int rc;
	size_t size;

	snprintf(out, sizeof out, "%s/node.out", s->env->dir);
	snprintf(err, sizeof err, "%s/node.err", s->env->dir);
	rc = tu_exec(argv, out, err, 120000);
	text = (char *)tu_slurp(out, &size);
	etext = (char *)tu_slurp(err, &size);
	if (rc != 0 || !strstr(text, "paysink_stripe: ") || !strstr(text, " passed (stripe "))
		tu_fail_free(text, etext, "node %s exited %d:\n%s%s", NODE_SCRIPT, rc, text, etext);
	print_message("# %s", text);
	free(text);
	free(etext);
}

/* the official stripe package accepts paysink's answers, errors and webhook
 * signatures, over plain HTTP and over HTTPS (tests/browser/paysink_stripe.mjs) */
static void test_stripe_package(void **state)
{
	struct ps *s = *state;
	char cmd[500];

	if (access(NODE_MODULES, F_OK) != 0)
		fail_msg("%s is missing: run `sh tools/npm_deps.sh tests/browser` (make deps) first",
			 NODE_MODULES);
	node_run(s, NULL);
	snprintf(cmd, sizeof cmd, "sh tools/certs.sh '%s'", s->certs);
	assert_int_equal(system(cmd), 0);
	node_run(s, s->certs);
}

#define T(f) cmocka_unit_test_setup_teardown(f, ps_setup, ps_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_session_create_and_read),
		T(test_idempotent_replay),
		T(test_same_key_other_params),
		T(test_wrong_key_401),
		T(test_pay_once),
		T(test_hosted_page),
		T(test_expire),
		T(test_refunds),
		T(test_expires_by_itself),
		T(test_in_flight_409),
		T(test_injected_5xx),
		T(test_refund_fail),
		T(test_webhook_signed),
		T(test_webhook_dup),
		T(test_webhook_drop),
		T(test_webhook_retry),
		T(test_webhook_gives_up),
		T(test_webhook_timeout_retried),
		T(test_webhook_connection_refused),
		T(test_webhook_reorder),
		T(test_record_file_equals_get),
		T(test_verify_rule),
		T(test_bad_options),
		T(test_https),
		T(test_stripe_package),
	};
	int rc;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
