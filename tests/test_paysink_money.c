/*
 * test_paysink_money.c: tools/paysink as strict as Stripe (API version
 * 2024-06-20) about money, so that a box that gets it wrong fails: Stripe's
 * currency units and their refusals, minimum and maximum charges, no-cost
 * orders, expires_at measured from the session's creation, idempotency keys
 * forgotten at 24 hours, delayed payment methods that settle later (or
 * fail), payment_method_types, pending refunds that succeed or fail,
 * Dashboard refunds, disputes, the events' envelope, and the request log.
 * test_paysink.c tests the rest; paysink_harness.h is what both share.
 */
#define _GNU_SOURCE
#include "paysink_harness.h"

/* ---- helpers ------------------------------------------------------------------- */

/* a session of one line of unit Stripe units of cur, and more parameters */
static void line_create(struct ps *s, const char *cur, long long unit, const char *more,
			struct reply *r)
{
	char form[1500];

	snprintf(form, sizeof form, "mode=payment&line_items[0][price_data][currency]=%s"
		 "&line_items[0][price_data][unit_amount]=%lld"
		 "&line_items[0][price_data][product_data][name]=Seat&line_items[0][quantity]=1"
		 "&success_url=https%%3A%%2F%%2Fshop.example%%2Fok%s", cur, unit, more ? more : "");
	call(s, "POST", "/v1/checkout/sessions", NULL, form, r);
}

/* the same, which must be refused: 400 invalid_request_error naming param
 * (NULL: none), its message starting with msg (NULL: any) */
static void line_refused(struct ps *s, const char *cur, long long unit, const char *more,
			 const char *param, const char *msg)
{
	struct reply r;

	line_create(s, cur, unit, more, &r);
	if (r.status != 400)
		fail_msg("%s %lld: %ld %s", cur, unit, r.status, r.body);
	assert_string_equal(js(r.doc, "error.type"), "invalid_request_error");
	assert_string_equal(js(r.doc, "error.param"), param ? param : "(none)");
	if (msg && strncmp(js(r.doc, "error.message"), msg, strlen(msg)) != 0)
		fail_msg("%s %lld: '%s' does not start '%s'", cur, unit, js(r.doc, "error.message"),
			 msg);
	reply_free(&r);
}

/* the same, which must be made: its id into id */
static void line_made(struct ps *s, const char *cur, long long unit, const char *more, char *id,
		      size_t size)
{
	struct reply r;

	line_create(s, cur, unit, more, &r);
	if (r.status != 200)
		fail_msg("%s %lld: %ld %s", cur, unit, r.status, r.body);
	snprintf(id, size, "%s", js(r.doc, "id"));
	reply_free(&r);
}

/* the hosted page of session id holds text */
static void page_has(struct ps *s, const char *id, const char *text)
{
	char path[200];
	struct reply r;

	snprintf(path, sizeof path, "/pay/%s", id);
	call_h(s, "GET", path, NULL, NULL, NULL, NULL, &r);
	if (!r.body || !strstr(r.body, text))
		fail_msg("the page of %s does not say '%s':\n%s", id, text, r.body);
	reply_free(&r);
}

/* a request (method, path formatted) whose status must be want; its reply
 * into *r (reply_free); API paths get the key, controls none */
static void vreq(struct ps *s, struct reply *r, const char *method, long want, const char *fmt,
		 va_list ap)
{
	char path[600];

	vsnprintf(path, sizeof path, fmt, ap);
	call_h(s, method, path, strncmp(path, "/v1/", 4) == 0 ? "Bearer " KEY : NULL, NULL,
	       strcmp(method, "POST") == 0 ? "" : NULL, NULL, r);
	if (r->status != want)
		fail_msg("%s %s: %ld, not %ld: %s", method, path, r->status, want, r->body);
}

static void req(struct ps *s, struct reply *r, const char *method, long want, const char *fmt,
		...) __attribute__((format(printf, 5, 6)));

static void req(struct ps *s, struct reply *r, const char *method, long want, const char *fmt,
		...)
{
	va_list ap;

	va_start(ap, fmt);
	vreq(s, r, method, want, fmt, ap);
	va_end(ap);
}

/* a control POST whose status must be want, its answer not read further */
static void ctl(struct ps *s, long want, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void ctl(struct ps *s, long want, const char *fmt, ...)
{
	struct reply r;
	va_list ap;

	va_start(ap, fmt);
	vreq(s, &r, "POST", want, fmt, ap);
	va_end(ap);
	reply_free(&r);
}

/* GET the payment intent pi: its status must be status; its latest charge's
 * status into charge_status */
static void pi_check(struct ps *s, const char *pi, const char *status, long long received,
		     char *charge_status, size_t size)
{
	char ch[64];
	struct reply r;

	req(s, &r, "GET", 200, "/v1/payment_intents/%s", pi);
	assert_string_equal(js(r.doc, "status"), status);
	assert_int_equal(ji(r.doc, "amount"), 5000);
	assert_int_equal(ji(r.doc, "amount_received"), received);
	assert_string_equal(js(r.doc, "currency"), "eur");
	assert_string_equal(js(r.doc, "metadata.order"), "order-1");
	snprintf(ch, sizeof ch, "%s", js(r.doc, "latest_charge"));
	reply_free(&r);
	req(s, &r, "GET", 200, "/v1/charges/%s", ch);
	snprintf(charge_status, size, "%s", js(r.doc, "status"));
	assert_true(json_is_boolean(jget(r.doc, "paid")));
	assert_int_equal(json_is_true(jget(r.doc, "paid")), strcmp(charge_status, "succeeded") == 0);
	reply_free(&r);
}

/* a refund by the API of the payment intent pi (amount 0: no amount) */
static void refund_api(struct ps *s, const char *pi, long long amount, const char *key,
		       struct reply *r)
{
	char form[200];

	if (amount)
		snprintf(form, sizeof form, "payment_intent=%s&amount=%lld", pi, amount);
	else
		snprintf(form, sizeof form, "payment_intent=%s", pi);
	call(s, "POST", "/v1/refunds", key, form, r);
}

/* the first event of type about object_id that reached the receiver,
 * waited for up to 10 s, parsed; caller json_decref()s */
static json_t *hit_wait(struct ps *s, const char *type, const char *object_id)
{
	int waited, i, n;

	for (waited = 0; waited < 10000; waited += 50) {
		pthread_mutex_lock(&s->hook.mu);
		n = s->hook.n < HITS_MAX ? s->hook.n : HITS_MAX;
		for (i = 0; i < n; i++) {
			const struct hit *h = &s->hook.hits[i];

			if (strcmp(h->type, type) == 0 && strcmp(h->object_id, object_id) == 0) {
				json_t *doc = json_loads(h->body, 0, NULL);

				pthread_mutex_unlock(&s->hook.mu);
				assert_non_null(doc);
				return doc;
			}
		}
		pthread_mutex_unlock(&s->hook.mu);
		tu_sleep_ms(50);
	}
	fail_msg("no %s about %s reached the receiver", type, object_id);
	return NULL;
}

/* paysink started with the receiver and extra options, and a session of
 * SESSION_FORM paid by card; its payment intent into pi */
static void start_paid(struct ps *s, const char *const *extra, char *pi, size_t size)
{
	char id[128];

	hook_start(&s->hook, NULL, 0);
	ps_start(s, 1, extra);
	session_new(s, NULL, NULL, id, sizeof id);
	session_pay(s, id, pi, size);
}

/* ---- currencies and amounts ---------------------------------------------------- */

/* amounts in Stripe's units: zero-decimal, ISK and UGX in whole units
 * written as cents, three-decimal with a last 0, HUF two-decimal; the page
 * shows each as it reads; a currency Stripe does not take refused */
static void test_currency_units(void **state)
{
	struct ps *s = *state;
	const char *unit = "line_items[0][price_data][unit_amount]";
	char id[128];

	ps_start(s, 0, NULL);
	line_made(s, "jpy", 500, NULL, id, sizeof id);
	page_has(s, id, "500 JPY");
	line_refused(s, "isk", 550, NULL, unit, "Invalid amount: 550.");
	line_made(s, "isk", 50000, NULL, id, sizeof id);
	page_has(s, id, "500 ISK");
	line_refused(s, "ugx", 150050, NULL, unit, "Invalid amount");
	line_made(s, "ugx", 150000, NULL, id, sizeof id);
	page_has(s, id, "1500 UGX");
	line_refused(s, "kwd", 5125, NULL, unit, "Invalid amount: 5125.");
	line_made(s, "kwd", 5120, NULL, id, sizeof id);
	page_has(s, id, "5.120 KWD");
	line_made(s, "huf", 17550, NULL, id, sizeof id);
	page_has(s, id, "175.50 HUF");
	line_refused(s, "xyz", 1000, NULL, "line_items[0][price_data][currency]",
		     "Invalid currency: xyz. Stripe currently supports these currencies: usd, aed,");
	line_refused(s, "iqd", 100000, NULL, "line_items[0][price_data][currency]",
		     "Invalid currency: iqd.");
	ps_stop(s);
}

/* a refund's amount follows the same rules: 1.50 ISK refused, 1 ISK taken */
static void test_currency_refund_units(void **state)
{
	struct ps *s = *state;
	char id[128], pi[64];
	struct reply r;

	ps_start(s, 0, NULL);
	line_made(s, "isk", 50000, NULL, id, sizeof id);
	session_pay(s, id, pi, sizeof pi);
	refund_api(s, pi, 150, NULL, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.param"), "amount");
	reply_free(&r);
	refund_api(s, pi, 100, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(ji(r.doc, "amount"), 100);
	reply_free(&r);
	ps_stop(s);
}

/* Stripe's minimum charges, its maximum, and a total of 0: a no-cost order
 * that completes without a payment intent, a Customer made */
static void test_minimum_and_no_cost(void **state)
{
	struct ps *s = *state;
	const char *small = "The Checkout Session's total amount due must add up to at least ";
	char id[128], msg[200], path[200];
	struct reply r;
	json_t *rec;

	ps_start(s, 0, NULL);
	snprintf(msg, sizeof msg, "%s€0.50 eur", small);
	line_refused(s, "eur", 49, NULL, NULL, msg);
	snprintf(msg, sizeof msg, "%s£0.30 gbp", small);
	line_refused(s, "gbp", 29, NULL, NULL, msg);
	snprintf(msg, sizeof msg, "%s$0.50 usd", small);
	line_refused(s, "usd", 49, NULL, NULL, msg);
	line_refused(s, "jpy", 49, NULL, NULL, small);
	line_refused(s, "huf", 17499, NULL, NULL, small);
	line_made(s, "eur", 25, "&line_items[0][quantity]=2", id, sizeof id);
	line_refused(s, "eur", 99999999, "&line_items[0][quantity]=2", "line_items", NULL);
	/* no-cost */
	line_made(s, "eur", 0, NULL, id, sizeof id);
	page_has(s, id, "Complete order");
	snprintf(path, sizeof path, "/_paysink/pay/%s", id);
	call_h(s, "POST", path, NULL, NULL, NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(js(r.doc, "status"), "complete");
	assert_string_equal(js(r.doc, "payment_status"), "no_payment_required");
	assert_string_equal(js(r.doc, "payment_intent"), "(null)");
	assert_memory_equal(js(r.doc, "customer"), "cus_", 4);
	reply_free(&r);
	rec = record_get(s);
	assert_string_equal(js(rec, "sessions.1.payment_status"), "no_payment_required");
	assert_int_equal(ji(rec, "sessions.1.charges"), 0);
	json_decref(rec);
	ps_stop(s);
}

/* ---- expires_at and idempotency keys -------------------------------------------- */

/* a session with expires_at = at, within one second of the clock: the
 * status (or -1 when the clock's second turned meanwhile) */
static long expires_try(struct ps *s, long long ahead)
{
	char more[64];
	long long t0 = (long long)time(NULL);
	struct reply r;
	long status;

	snprintf(more, sizeof more, "&expires_at=%lld", t0 + ahead);
	line_create(s, "eur", 1000, more, &r);
	status = (long long)time(NULL) == t0 ? r.status : -1;
	if (status == 200 && ji(r.doc, "created") != t0)
		fail_msg("created %lld, the request came at %lld", ji(r.doc, "created"), t0);
	reply_free(&r);
	return status;
}

/* 30 minutes after the creation at the least, less than 24 hours at the
 * most, to the second, on the business clock */
static void test_expires_at_exact(void **state)
{
	struct ps *s = *state;
	const long long ahead[] = { 1799, 1800, 86399, 86400 };
	const long want[] = { 400, 200, 200, 400 };
	char more[64];
	struct reply r;
	size_t i;
	int tries;

	ps_start(s, 0, NULL);
	for (i = 0; i < sizeof ahead / sizeof ahead[0]; i++) {
		long got = -1;

		for (tries = 0; tries < 10 && got < 0; tries++)
			got = expires_try(s, ahead[i]);
		if (got != want[i])
			fail_msg("expires_at %lld s ahead: %ld, not %ld", ahead[i], got, want[i]);
	}
	/* the business clock two hours on: the real clock's +1 h is too soon */
	ctl(s, 200, "/_paysink/clock?advance=7200");
	snprintf(more, sizeof more, "&expires_at=%lld", (long long)time(NULL) + 3600);
	line_create(s, "eur", 1000, more, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.param"), "expires_at");
	reply_free(&r);
	snprintf(more, sizeof more, "&expires_at=%lld", (long long)time(NULL) + 7200 + 1900);
	line_create(s, "eur", 1000, more, &r);
	assert_int_equal(r.status, 200);
	assert_true(ji(r.doc, "created") >= (long long)time(NULL) + 7199);
	reply_free(&r);
	ps_stop(s);
}

/* a replay within 24 hours answers the stored session even though its
 * expires_at has passed since; at 24 hours the key is forgotten and the
 * request runs afresh */
static void test_idempotent_replay_24h(void **state)
{
	struct ps *s = *state;
	char form[2048], first[128];
	struct reply r;
	json_t *rec;

	ps_start(s, 0, NULL);
	snprintf(form, sizeof form, "%s&expires_at=%lld", SESSION_FORM, (long long)time(NULL) + 1900);
	call(s, "POST", "/v1/checkout/sessions", "k-24h", form, &r);
	assert_int_equal(r.status, 200);
	snprintf(first, sizeof first, "%s", js(r.doc, "id"));
	reply_free(&r);
	ctl(s, 200, "/_paysink/clock?advance=3600");
	call(s, "POST", "/v1/checkout/sessions", "k-24h", form, &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.replayed, "true");
	assert_string_equal(js(r.doc, "id"), first);
	reply_free(&r);
	ctl(s, 200, "/_paysink/clock?advance=86400");
	call(s, "POST", "/v1/checkout/sessions", "k-24h", form, &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(js(r.doc, "error.param"), "expires_at");
	assert_string_equal(r.replayed, "");
	reply_free(&r);
	rec = record_get(s);
	assert_int_equal(ji(rec, "idempotency.pruned"), 1);
	json_decref(rec);
	ps_stop(s);
}

/* ---- delayed payments and payment_method_types ----------------------------------- */

/* a session paid with SEPA Direct Debit: complete and unpaid, its payment
 * intent processing with a pending charge, not refundable; pay-by-control
 * with method=delayed; into pi */
static void delayed_paid(struct ps *s, char *id, size_t id_size, char *pi, size_t pi_size)
{
	char status[32];
	struct reply r;

	session_new(s, NULL, NULL, id, id_size);
	page_has(s, id, "value=\"sepa_debit\"> SEPA Direct Debit");
	req(s, &r, "POST", 200, "/_paysink/pay/%s?method=delayed", id);
	assert_string_equal(js(r.doc, "status"), "complete");
	assert_string_equal(js(r.doc, "payment_status"), "unpaid");
	snprintf(pi, pi_size, "%s", js(r.doc, "payment_intent"));
	reply_free(&r);
	pi_check(s, pi, "processing", 0, status, sizeof status);
	assert_string_equal(status, "pending");
	refund_api(s, pi, 0, NULL, &r);
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(js(r.doc, "error.message"), "does not have a successful charge"));
	reply_free(&r);
}

/* the bank says yes later: succeeded, paid, a charge; its events */
static void test_delayed_payment_succeeds(void **state)
{
	struct ps *s = *state;
	char id[128], pi[64], status[32];
	struct reply r;
	json_t *ev, *rec;

	hook_start(&s->hook, NULL, 0);
	ps_start(s, 1, NULL);
	delayed_paid(s, id, sizeof id, pi, sizeof pi);
	ev = hit_wait(s, "checkout.session.completed", id);
	assert_string_equal(js(ev, "data.object.payment_status"), "unpaid");
	json_decref(ev);
	req(s, &r, "POST", 200, "/_paysink/settle/%s?outcome=succeeded", pi);
	assert_string_equal(js(r.doc, "status"), "succeeded");
	reply_free(&r);
	pi_check(s, pi, "succeeded", 5000, status, sizeof status);
	assert_string_equal(status, "succeeded");
	ev = hit_wait(s, "checkout.session.async_payment_succeeded", id);
	assert_string_equal(js(ev, "data.object.payment_status"), "paid");
	json_decref(ev);
	ctl(s, 409, "/_paysink/settle/%s?outcome=succeeded", pi);
	rec = record_get(s);
	assert_string_equal(js(rec, "sessions.0.payment_intent_status"), "succeeded");
	assert_string_equal(js(rec, "sessions.0.payment_method"), "sepa_debit");
	assert_int_equal(ji(rec, "sessions.0.charges"), 1);
	assert_true(ji(rec, "sessions.0.paid_at") >= ji(rec, "sessions.0.submitted_at"));
	json_decref(rec);
	ps_stop(s);
}

/* the bank says no: requires_payment_method, the session complete and
 * unpaid, a failed charge, nothing to refund; its event */
static void test_delayed_payment_fails(void **state)
{
	struct ps *s = *state;
	char id[128], pi[64];
	struct reply r;
	json_t *ev, *rec;

	hook_start(&s->hook, NULL, 0);
	ps_start(s, 1, NULL);
	delayed_paid(s, id, sizeof id, pi, sizeof pi);
	req(s, &r, "POST", 200,
	    "/_paysink/settle/%s?outcome=failed&failure_code=debit_not_authorized", pi);
	assert_string_equal(js(r.doc, "status"), "requires_payment_method");
	assert_string_equal(js(r.doc, "last_payment_error.code"), "debit_not_authorized");
	assert_string_equal(js(r.doc, "payment_method"), "(null)");
	reply_free(&r);
	req(s, &r, "GET", 200, "/v1/checkout/sessions/%s", id);
	assert_string_equal(js(r.doc, "status"), "complete");
	assert_string_equal(js(r.doc, "payment_status"), "unpaid");
	reply_free(&r);
	ev = hit_wait(s, "checkout.session.async_payment_failed", id);
	assert_string_equal(js(ev, "data.object.payment_status"), "unpaid");
	json_decref(ev);
	refund_api(s, pi, 0, NULL, &r);
	assert_int_equal(r.status, 400);
	reply_free(&r);
	rec = record_get(s);
	assert_int_equal(ji(rec, "sessions.0.charges"), 0);
	assert_string_equal(js(rec, "sessions.0.charge_status"), "failed");
	assert_string_equal(js(rec, "sessions.0.failure_code"), "debit_not_authorized");
	json_decref(rec);
	ps_stop(s);
}

/* payment_method_types: Stripe's values only, each in a currency it
 * takes; a session for card alone offers and takes no delayed method */
static void test_payment_method_types(void **state)
{
	struct ps *s = *state;
	char id[128], path[200];
	struct reply r;

	ps_start(s, 0, NULL);
	line_refused(s, "eur", 1000, "&payment_method_types[0]=bitcoin", "payment_method_types[0]",
		     "Invalid payment_method_types[0]: must be one of acss_debit, affirm,");
	line_refused(s, "usd", 1000, "&payment_method_types[0]=card&payment_method_types[1]="
		     "sepa_debit", "payment_method_types", "The currency provided (usd) is invalid.");
	line_made(s, "usd", 1000, NULL, id, sizeof id);
	page_has(s, id, "value=\"us_bank_account\"> US bank account");
	line_made(s, "eur", 1000, "&payment_method_types[0]=card", id, sizeof id);
	req(s, &r, "GET", 200, "/v1/checkout/sessions/%s", id);
	assert_int_equal(jn(r.doc, "payment_method_types"), 1);
	reply_free(&r);
	ctl(s, 400, "/_paysink/pay/%s?method=sepa_debit", id);
	ctl(s, 400, "/_paysink/pay/%s?method=delayed", id);
	snprintf(path, sizeof path, "/pay/%s", id);
	call_h(s, "POST", path, NULL, NULL, "method=sepa_debit", NULL, &r);
	assert_int_equal(r.status, 400);
	reply_free(&r);
	req(s, &r, "POST", 200, "/_paysink/pay/%s", id);
	assert_string_equal(js(r.doc, "payment_status"), "paid");
	reply_free(&r);
	ps_stop(s);
}

/* ---- refunds, Dashboard refunds, disputes ---------------------------------------- */

/* --refund-pending: pending counts against what is left; it succeeds
 * later with refund.updated and charge.refunded */
static void test_pending_refund_succeeds(void **state)
{
	struct ps *s = *state;
	const char *extra[] = { "--refund-pending", NULL };
	char pi[64], re[64];
	struct reply r;
	json_t *ev, *rec;

	start_paid(s, extra, pi, sizeof pi);
	refund_api(s, pi, 2000, "pend-1", &r);
	assert_int_equal(r.status, 200);
	assert_string_equal(js(r.doc, "status"), "pending");
	snprintf(re, sizeof re, "%s", js(r.doc, "id"));
	reply_free(&r);
	req(s, &r, "GET", 200, "/v1/refunds/%s", re);
	assert_string_equal(js(r.doc, "status"), "pending");
	reply_free(&r);
	refund_api(s, pi, 3500, NULL, &r);
	assert_string_equal(js(r.doc, "error.code"), "amount_too_large");
	reply_free(&r);
	ctl(s, 200, "/_paysink/refund-settle/%s?outcome=succeeded", re);
	req(s, &r, "GET", 200, "/v1/refunds/%s", re);
	assert_string_equal(js(r.doc, "status"), "succeeded");
	reply_free(&r);
	ev = hit_wait(s, "refund.updated", re);
	assert_string_equal(js(ev, "data.object.status"), "succeeded");
	json_decref(ev);
	/* as Stripe sent a card refund's change at 2024-06-20 */
	json_decref(hit_wait(s, "charge.refund.updated", re));
	rec = record_get(s);
	ev = hit_wait(s, "charge.refunded", js(rec, "sessions.0.charge"));
	assert_int_equal(ji(ev, "data.object.amount_refunded"), 2000);
	assert_string_equal(js(rec, "refunds.0.status"), "succeeded");
	assert_int_equal(ji(rec, "sessions.0.amount_refund_pending"), 0);
	json_decref(ev);
	json_decref(rec);
	ps_stop(s);
}

/* a payment's refunds made pending by its control; one fails: refund.failed
 * and refund.updated with failure_reason, the money not refunded again */
static void test_pending_refund_fails(void **state)
{
	struct ps *s = *state;
	char pi[64], re[64];
	struct reply r;
	json_t *ev, *rec;

	start_paid(s, NULL, pi, sizeof pi);
	ctl(s, 200, "/_paysink/refund-pending/%s?on=1", pi);
	refund_api(s, pi, 0, NULL, &r);
	assert_string_equal(js(r.doc, "status"), "pending");
	assert_int_equal(ji(r.doc, "amount"), 5000);
	snprintf(re, sizeof re, "%s", js(r.doc, "id"));
	reply_free(&r);
	refund_api(s, pi, 0, NULL, &r);
	assert_string_equal(js(r.doc, "error.code"), "charge_already_refunded");
	reply_free(&r);
	ctl(s, 400, "/_paysink/refund-settle/%s?outcome=failed&failure_reason=bored", re);
	ctl(s, 200,
	    "/_paysink/refund-settle/%s?outcome=failed&failure_reason=lost_or_stolen_card", re);
	req(s, &r, "GET", 200, "/v1/refunds/%s", re);
	assert_string_equal(js(r.doc, "status"), "failed");
	assert_string_equal(js(r.doc, "failure_reason"), "lost_or_stolen_card");
	reply_free(&r);
	ev = hit_wait(s, "refund.failed", re);
	assert_string_equal(js(ev, "data.object.failure_reason"), "lost_or_stolen_card");
	json_decref(ev);
	json_decref(hit_wait(s, "refund.updated", re));
	ctl(s, 409, "/_paysink/refund-settle/%s?outcome=succeeded", re);
	ctl(s, 200, "/_paysink/refund-pending/%s?on=0", pi);
	refund_api(s, pi, 0, NULL, &r);
	assert_string_equal(js(r.doc, "status"), "succeeded");
	assert_int_equal(ji(r.doc, "amount"), 5000);
	reply_free(&r);
	rec = record_get(s);
	assert_string_equal(js(rec, "refunds.0.failure_reason"), "lost_or_stolen_card");
	assert_int_equal(ji(rec, "sessions.0.amount_refunded"), 5000);
	json_decref(rec);
	ps_stop(s);
}

/* a refund in the Dashboard: no key, its events refund.created and
 * charge.refunded with the charge as of 2024-06-20 (no refunds list) */
static void test_dashboard_refund(void **state)
{
	struct ps *s = *state;
	char pi[64], ch[64];
	struct reply r;
	json_t *ev, *rec;

	start_paid(s, NULL, pi, sizeof pi);
	req(s, &r, "POST", 200, "/_paysink/refund/%s?amount=1000", pi);
	assert_string_equal(js(r.doc, "status"), "succeeded");
	snprintf(ch, sizeof ch, "%s", js(r.doc, "charge"));
	json_decref(hit_wait(s, "refund.created", js(r.doc, "id")));
	reply_free(&r);
	ev = hit_wait(s, "charge.refunded", ch);
	assert_string_equal(js(ev, "data.object.object"), "charge");
	assert_int_equal(ji(ev, "data.object.amount"), 5000);
	assert_int_equal(ji(ev, "data.object.amount_captured"), 5000);
	assert_int_equal(ji(ev, "data.object.amount_refunded"), 1000);
	assert_true(json_is_false(jget(ev, "data.object.refunded")));
	assert_true(json_is_false(jget(ev, "data.object.disputed")));
	assert_string_equal(js(ev, "data.object.currency"), "eur");
	assert_string_equal(js(ev, "data.object.payment_intent"), pi);
	assert_string_equal(js(ev, "data.object.status"), "succeeded");
	assert_string_equal(js(ev, "data.object.refunds"), "(none)");
	assert_string_equal(js(ev, "request.idempotency_key"), "(null)");
	json_decref(ev);
	req(s, &r, "POST", 200, "/_paysink/refund/%s", ch);
	assert_int_equal(ji(r.doc, "amount"), 4000);
	reply_free(&r);
	req(s, &r, "POST", 400, "/_paysink/refund/%s", pi);
	assert_string_equal(js(r.doc, "error.code"), "charge_already_refunded");
	reply_free(&r);
	rec = record_get(s);
	assert_string_equal(js(rec, "refunds.0.source"), "dashboard");
	assert_string_equal(js(rec, "refunds.0.idempotency_key"), "(null)");
	assert_int_equal(ji(rec, "sessions.0.amount_refunded"), 5000);
	json_decref(rec);
	ps_stop(s);
}

/* a dispute: charge.dispute.created with Stripe's dispute, the charge
 * disputed and no longer refundable, its pending refund failed; closed
 * lost: charge.dispute.closed */
static void test_dispute(void **state)
{
	struct ps *s = *state;
	char pi[64], dp[64], ch[64], re[64];
	struct reply r;
	json_t *ev, *rec;

	start_paid(s, NULL, pi, sizeof pi);
	ctl(s, 200, "/_paysink/refund-pending/%s?on=1", pi);
	refund_api(s, pi, 1000, NULL, &r);
	assert_string_equal(js(r.doc, "status"), "pending");
	snprintf(re, sizeof re, "%s", js(r.doc, "id"));
	reply_free(&r);
	ctl(s, 400, "/_paysink/dispute/%s?reason=bored", pi);
	req(s, &r, "POST", 200, "/_paysink/dispute/%s?reason=fraudulent", pi);
	snprintf(dp, sizeof dp, "%s", js(r.doc, "id"));
	snprintf(ch, sizeof ch, "%s", js(r.doc, "charge"));
	reply_free(&r);
	assert_memory_equal(dp, "dp_", 3);
	ev = hit_wait(s, "charge.dispute.created", dp);
	assert_string_equal(js(ev, "data.object.object"), "dispute");
	assert_int_equal(ji(ev, "data.object.amount"), 5000);
	assert_string_equal(js(ev, "data.object.currency"), "eur");
	assert_string_equal(js(ev, "data.object.charge"), ch);
	assert_string_equal(js(ev, "data.object.payment_intent"), pi);
	assert_string_equal(js(ev, "data.object.reason"), "fraudulent");
	assert_string_equal(js(ev, "data.object.status"), "needs_response");
	assert_true(ji(ev, "data.object.created") > 0);
	json_decref(ev);
	req(s, &r, "GET", 200, "/v1/charges/%s", ch);
	assert_true(json_is_true(jget(r.doc, "disputed")));
	assert_int_equal(ji(r.doc, "amount_refunded"), 0);
	reply_free(&r);
	ev = hit_wait(s, "refund.failed", re);
	assert_string_equal(js(ev, "data.object.failure_reason"),
			    "charge_for_pending_refund_disputed");
	json_decref(ev);
	refund_api(s, pi, 0, NULL, &r);
	assert_string_equal(js(r.doc, "error.code"), "charge_disputed");
	reply_free(&r);
	ctl(s, 409, "/_paysink/dispute/%s", pi);
	ctl(s, 200, "/_paysink/dispute-close/%s?outcome=lost", dp);
	json_decref(hit_wait(s, "charge.dispute.closed", dp));
	req(s, &r, "GET", 200, "/v1/disputes/%s", dp);
	assert_string_equal(js(r.doc, "status"), "lost");
	reply_free(&r);
	ctl(s, 409, "/_paysink/dispute-close/%s?outcome=won", dp);
	rec = record_get(s);
	assert_string_equal(js(rec, "disputes.0.status"), "lost");
	assert_true(json_is_true(jget(rec, "sessions.0.disputed")));
	json_decref(rec);
	ps_stop(s);
}

/* ---- events and the request log ------------------------------------------------- */

/* an event's envelope: the API request that made it, or none; the session
 * in it as a careful client reads it */
static void test_event_envelope(void **state)
{
	struct ps *s = *state;
	char id[128], pi[64], re[64], request_id[64];
	struct reply r;
	json_t *ev;

	hook_start(&s->hook, NULL, 0);
	ps_start(s, 1, NULL);
	session_new(s, NULL, NULL, id, sizeof id);
	session_pay(s, id, pi, sizeof pi);
	refund_api(s, pi, 700, "env-r1", &r);
	snprintf(re, sizeof re, "%s", js(r.doc, "id"));
	snprintf(request_id, sizeof request_id, "%s", r.request_id);
	reply_free(&r);
	ev = hit_wait(s, "refund.created", re);
	assert_string_equal(js(ev, "object"), "event");
	assert_string_equal(js(ev, "api_version"), "2024-06-20");
	assert_true(json_is_false(jget(ev, "livemode")));
	assert_int_equal(ji(ev, "pending_webhooks"), 1);
	assert_true(ji(ev, "created") > 0);
	assert_string_equal(js(ev, "request.id"), request_id);
	assert_string_equal(js(ev, "request.idempotency_key"), "env-r1");
	json_decref(ev);
	ev = hit_wait(s, "checkout.session.completed", id);
	assert_string_equal(js(ev, "request.id"), "(null)");
	assert_string_equal(js(ev, "data.object.object"), "checkout.session");
	assert_int_equal(ji(ev, "data.object.amount_subtotal"), 5000);
	assert_int_equal(ji(ev, "data.object.amount_total"), 5000);
	assert_string_equal(js(ev, "data.object.payment_intent"), pi);
	assert_string_equal(js(ev, "data.object.customer_details.email"), "ada@example.org");
	assert_string_equal(js(ev, "data.object.url"), "(null)");
	assert_string_equal(js(ev, "data.object.client_reference_id"), "order-1");
	assert_string_equal(js(ev, "data.object.metadata.hold"), "H1");
	assert_true(ji(ev, "data.object.expires_at") > ji(ev, "data.object.created"));
	json_decref(ev);
	ps_stop(s);
}

/* --request-log: one JSON line a /v1/ request, raw path, query and body,
 * the refused ones too, nothing else; a byte that is not UTF-8 as U+FFFD */
static void test_request_log(void **state)
{
	struct ps *s = *state;
	char log[400], *text, *line, *save = NULL;
	const char *extra[] = { "--request-log", log, NULL };
	const char *want_path[] = { "/v1/checkout/sessions", "/v1/refunds", "/v1/refunds",
				    "/v1/checkout/sessions/cs_nosuch" };
	struct reply r;
	size_t size;
	int n = 0;

	snprintf(log, sizeof log, "%s/requests.jsonl", s->env->dir);
	ps_start(s, 0, extra);
	call(s, "POST", "/v1/checkout/sessions", "log-1", SESSION_FORM, &r);
	reply_free(&r);
	call(s, "GET", "/v1/refunds?payment_intent=pi_x&limit=3", NULL, NULL, &r);
	reply_free(&r);
	call(s, "POST", "/v1/refunds", NULL, "metadata[a]=\xff", &r);
	reply_free(&r);
	call_h(s, "GET", "/v1/checkout/sessions/cs_nosuch", NULL, NULL, NULL, NULL, &r);
	assert_int_equal(r.status, 401);
	reply_free(&r);
	req(s, &r, "GET", 200, "/_paysink/record");
	reply_free(&r);
	ps_stop(s);
	text = (char *)tu_slurp(log, &size);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
		json_t *doc = json_loads(line, 0, NULL);

		if (!doc || n >= 4)
			tu_fail_free(text, NULL, "request log line %d: %s", n, line);
		assert_string_equal(js(doc, "path"), want_path[n]);
		if (n == 0)
			assert_string_equal(js(doc, "body"), SESSION_FORM);
		if (n == 1)
			assert_string_equal(js(doc, "query"), "payment_intent=pi_x&limit=3");
		if (n == 2)
			assert_string_equal(js(doc, "body"), "metadata[a]=\xef\xbf\xbd");
		assert_string_equal(js(doc, "method"), n % 2 ? "GET" : "POST");
		json_decref(doc);
	}
	free(text);
	assert_int_equal(n, 4);
}

#define T(f) cmocka_unit_test_setup_teardown(f, ps_setup, ps_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_currency_units),
		T(test_currency_refund_units),
		T(test_minimum_and_no_cost),
		T(test_expires_at_exact),
		T(test_idempotent_replay_24h),
		T(test_delayed_payment_succeeds),
		T(test_delayed_payment_fails),
		T(test_payment_method_types),
		T(test_pending_refund_succeeds),
		T(test_pending_refund_fails),
		T(test_dashboard_refund),
		T(test_dispute),
		T(test_event_envelope),
		T(test_request_log),
	};
	int rc;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
