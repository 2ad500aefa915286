/*
 * control.c: the test controls under /_paysink/ (loopback clients only, no
 * key), what a test does in place of a buyer, a bank, a cardholder or a
 * person in Stripe's Dashboard.  Parameters are in the query.  Answers are
 * JSON: the object changed, or a Stripe-shaped error (404 unknown id, 409
 * when the object is not in a state that allows it, 400 a bad parameter).
 *
 *   POST /_paysink/pay/{cs}[?method=TYPE|delayed]
 *        as the hosted page's button: card by default; "delayed" the first
 *        delayed method the session offers; 200 the session
 *   POST /_paysink/expire/{cs}       as POST /v1/checkout/sessions/{id}/expire
 *   POST /_paysink/settle/{pi|cs}?outcome=succeeded|failed[&failure_code=C]
 *        a delayed payment's bank answers (default failure_code
 *        insufficient_funds); 200 the payment intent
 *   POST /_paysink/refund/{pi|ch|cs}[?amount=N]
 *        a refund made in the Dashboard, of N or of what is left, with no
 *        idempotency key; 200 the refund, or Stripe's refusal
 *   POST /_paysink/refund-pending/{pi|ch|cs}?on=1|0
 *        the payment's new refunds answer "pending" (as --refund-pending
 *        does for all); 200 {"payment_intent", "refunds_pending"}
 *   POST /_paysink/refund-settle/{re}?outcome=succeeded|failed
 *        [&failure_reason=R]   a pending refund ends (default reason
 *        expired_or_canceled_card); 200 the refund
 *   POST /_paysink/dispute/{pi|ch|cs}[?reason=R&amount=N]
 *        the cardholder disputes the charge (default fraudulent, all of
 *        it); 200 the dispute
 *   POST /_paysink/dispute-close/{dp}?outcome=won|lost   200 the dispute
 *   GET  /_paysink/record        the record (byte for byte the file's text)
 *   POST /_paysink/clock?advance=S   the business clock S seconds on;
 *                                     sessions past expires_at expire
 *   POST /_paysink/verify        body: a payload; headers Stripe-Signature
 *                                and X-Paysink-Secret: {"ok": true|false,
 *                                "reason": ...} by sig_verify, t within
 *                                300 s of the real clock
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paysink.h"

static void control_error(struct ps_resp *out, int status, const char *code, const char *fmt,
			  ...) __attribute__((format(printf, 4, 5)));

static void control_error(struct ps_resp *out, int status, const char *code, const char *fmt,
			  ...)
{
	struct ps_err e = { 0 };
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	err_set(&e, status, "invalid_request_error", code, NULL, "%s", msg);
	resp_json(out, status, err_json(&e));
}

/* the query's integer name: 0 and *out, 1 when absent, -1 (answered 400)
 * when not a whole number from min to max */
static int query_int(struct ps_req *rq, const char *name, long long min, long long max,
		     long long *out, struct ps_resp *resp)
{
	const char *v = req_query(rq, name);
	char *end;
	long long n;

	if (!v)
		return 1;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno || end == v || *end || n < min || n > max) {
		control_error(resp, 400, "parameter_invalid_integer",
			      "%s wants a whole number in range", name);
		return -1;
	}
	*out = n;
	return 0;
}

/* the query's outcome: 1 for yes, 0 for no, -1 (answered 400) otherwise */
static int query_outcome(struct ps_req *rq, const char *yes, const char *no,
			 struct ps_resp *out)
{
	const char *v = req_query(rq, "outcome");

	if (v && strcmp(v, yes) == 0)
		return 1;
	if (v && strcmp(v, no) == 0)
		return 0;
	control_error(out, 400, "parameter_invalid_string", "outcome wants %s", yes);
	return -1;
}

/* the session of a checkout session, payment intent or charge id, or NULL
 * (answered 404) */
static struct ps_session *session_of(const char *id, struct ps_resp *out)
{
	struct ps_session *s = state_find(PS_SESSIONS, id);

	if (!s)
		s = state_session_by_pi(id);
	if (!s)
		control_error(out, 404, "resource_missing", "No such payment: '%.100s'", id);
	return s;
}

static void answer(struct ps_resp *out, const char *why, json_t *obj)
{
	if (why[0] == '\0') {
		resp_json(out, 200, obj);
		return;
	}
	json_decref(obj);
	control_error(out, 409, "state_invalid", "Not done: %s.", why);
}

/* the first delayed method s offers, or "" */
static const char *first_delayed(const struct ps_session *s)
{
	size_t i;
	json_t *v;

	json_array_foreach(s->pm_types, i, v)
		if (pm_type_delayed(json_string_value(v)))
			return json_string_value(v);
	return "";
}

static void ctl_pay(const char *id, struct ps_req *rq, struct ps_resp *out)
{
	struct ps_session *s = state_find(PS_SESSIONS, id);
	const char *method = req_query(rq, "method"), *why;
	int status;

	if (!s) {
		control_error(out, 404, "resource_missing", "No such checkout.session: '%.100s'", id);
		return;
	}
	if (method && strcmp(method, "delayed") == 0 && !*(method = first_delayed(s))) {
		control_error(out, 400, "payment_method_invalid",
			      "Not paid: this checkout session offers no delayed payment method.");
		return;
	}
	why = state_pay(s, method, &status);
	if (why[0] == '\0')
		resp_json(out, 200, session_json(s));
	else
		control_error(out, status,
			      status == 409 ? "session_not_open" : "payment_method_invalid",
			      "Not paid: %s.", why);
}

static void ctl_expire(const char *id, struct ps_req *rq, struct ps_resp *out)
{
	struct ps_session *s = state_find(PS_SESSIONS, id);
	const char *why;

	(void)rq;
	if (!s) {
		control_error(out, 404, "resource_missing", "No such checkout.session: '%.100s'", id);
		return;
	}
	why = state_expire(s);
	if (why[0] == '\0')
		resp_json(out, 200, session_json(s));
	else
		control_error(out, 409, "session_not_open", "Not expired: the session is %s.", why);
}

static void ctl_settle(const char *id, struct ps_req *rq, struct ps_resp *out)
{
	struct ps_session *s = session_of(id, out);
	int ok = s ? query_outcome(rq, "succeeded", "failed", out) : -1;
	const char *why;

	if (ok < 0)
		return;
	why = payment_settle(s, ok, req_query(rq, "failure_code"));
	answer(out, why, why[0] ? NULL : pi_json(s));
}

/* the payment id names and the query's amount=N (0: none): the payment,
 * or NULL (answered) */
static struct ps_session *payment_amount(const char *id, struct ps_req *rq, long long *amount,
					 struct ps_resp *out)
{
	struct ps_session *s = session_of(id, out);

	*amount = 0;
	if (!s || query_int(rq, "amount", 1, PS_AMOUNT_MAX, amount, out) < 0)
		return NULL;
	if (!s->pay.pi[0]) {
		control_error(out, 409, "state_invalid", "Not done: %s has no payment.", id);
		return NULL;
	}
	return s;
}

/* the object made, or Stripe's error e */
static void made(struct ps_resp *out, json_t *obj, const struct ps_err *e)
{
	resp_json(out, obj ? 200 : e->status, obj ? obj : err_json(e));
}

static void ctl_refund(const char *id, struct ps_req *rq, struct ps_resp *out)
{
	long long amount;
	struct ps_session *s = payment_amount(id, rq, &amount, out);
	struct ps_err e = { 0 };
	struct ps_refund *r;

	if (!s)
		return;
	/* a Dashboard request: its own id, no idempotency key */
	wh_request(out->request_id, NULL);
	r = refund_dashboard(s, amount, &e);
	wh_request(NULL, NULL);
	made(out, r ? refund_json(r) : NULL, &e);
}

static void ctl_refund_pending(const char *id, struct ps_req *rq, struct ps_resp *out)
{
	struct ps_session *s = session_of(id, out);
	long long on = 0;
	int rc = s ? query_int(rq, "on", 0, 1, &on, out) : -1;

	if (rc > 0)
		control_error(out, 400, "parameter_missing", "on wants 1 or 0");
	if (rc != 0)
		return;
	s->pay.refunds_pending_mode = (int)on;
	resp_json(out, 200, json_pack("{s:o,s:b}", "payment_intent",
				      s->pay.pi[0] ? json_string(s->pay.pi) : json_null(),
				      "refunds_pending", (int)on));
}

static void ctl_refund_settle(const char *id, struct ps_req *rq, struct ps_resp *out)
{
	static const char *const reasons[] = { "lost_or_stolen_card", "expired_or_canceled_card",
					       "charge_for_pending_refund_disputed",
					       "insufficient_funds", "declined", "merchant_request",
					       "unknown", NULL };
	struct ps_refund *r = state_find(PS_REFUNDS, id);
	const char *reason = req_query(rq, "failure_reason"), *why;
	size_t i;
	int ok;

	if (!r) {
		control_error(out, 404, "resource_missing", "No such refund: '%.100s'", id);
		return;
	}
	for (i = 0; reason && reasons[i] && strcmp(reasons[i], reason) != 0; i++)
		;
	if (reason && !reasons[i]) {
		control_error(out, 400, "parameter_invalid_string", "failure_reason wants one of "
			      "Stripe's: %s, ...", reasons[0]);
		return;
	}
	if ((ok = query_outcome(rq, "succeeded", "failed", out)) < 0)
		return;
	why = refund_settle(r, ok, reason);
	answer(out, why, why[0] ? NULL : refund_json(r));
}

static void ctl_dispute(const char *id, struct ps_req *rq, struct ps_resp *out)
{
	long long amount;
	struct ps_session *s = payment_amount(id, rq, &amount, out);
	struct ps_err e = { 0 };
	struct ps_dispute *d;

	if (!s)
		return;
	d = dispute_open(s, amount, req_query(rq, "reason"), &e);
	made(out, d ? dispute_json(d) : NULL, &e);
}

static void ctl_dispute_close(const char *id, struct ps_req *rq, struct ps_resp *out)
{
	struct ps_dispute *d = state_find(PS_DISPUTES, id);
	const char *why;
	int won;

	if (!d) {
		control_error(out, 404, "resource_missing", "No such dispute: '%.100s'", id);
		return;
	}
	if ((won = query_outcome(rq, "won", "lost", out)) < 0)
		return;
	why = dispute_close(d, won);
	answer(out, why, why[0] ? NULL : dispute_json(d));
}

static void ctl_clock(struct ps_req *rq, struct ps_resp *out)
{
	long long n = 0;
	int rc = query_int(rq, "advance", 0, 10LL * 365 * 86400, &n, out);

	if (rc != 0) {
		if (rc > 0)
			control_error(out, 400, "parameter_invalid_integer",
				      "advance wants whole seconds, 0 to ten years");
		return;
	}
	ps_clock_advance(n);
	state_sweep_expiry();
	resp_json(out, 200, json_pack("{s:I,s:I}", "offset", (json_int_t)ps_clock_offset(), "now",
				      (json_int_t)ps_now()));
}

static void ctl_verify(struct ps_req *rq, struct ps_resp *out)
{
	const char *why;
	int ok = sig_verify(req_header(rq, "Stripe-Signature"), rq->body, rq->len,
			    req_header(rq, "X-Paysink-Secret"), ps_real_now(), PS_SIG_TOLERANCE,
			    &why);

	resp_json(out, 200, json_pack("{s:b,s:s}", "ok", ok, "reason", why));
}

static const struct {
	const char *prefix;		/* "pay/": then the id */
	void (*run)(const char *id, struct ps_req *rq, struct ps_resp *out);
} posts[] = {
	{ "pay/", ctl_pay },
	{ "expire/", ctl_expire },
	{ "settle/", ctl_settle },
	{ "refund/", ctl_refund },
	{ "refund-pending/", ctl_refund_pending },
	{ "refund-settle/", ctl_refund_settle },
	{ "dispute/", ctl_dispute },
	{ "dispute-close/", ctl_dispute_close },
};

/* a POST with an id: 1 when p named one (lock held) */
static int control_post(const char *p, struct ps_req *rq, struct ps_resp *out)
{
	size_t i, n;

	for (i = 0; i < sizeof posts / sizeof posts[0]; i++) {
		n = strlen(posts[i].prefix);
		if (strncmp(p, posts[i].prefix, n) == 0 && p[n]) {
			posts[i].run(p + n, rq, out);
			return 1;
		}
	}
	return 0;
}

void control_handle(struct ps_req *rq, struct ps_resp *out)
{
	const char *p = rq->path + strlen("/_paysink/");
	int post = strcmp(rq->method, "POST") == 0;
	if (post && strcmp(p, "verify") == 0) {
		ctl_verify(rq, out);
		return;
	}
	pthread_mutex_lock(&ps_lock);
	state_sweep_expiry();
	if (!post && strcmp(rq->method, "GET") == 0 && strcmp(p, "record") == 0) {
		char *text = record_text();

		resp_text(out, text ? 200 : 500, NULL, text ? text : strdup("{}"));
	} else if (post && (control_post(p, rq, out) || strcmp(p, "clock") == 0)) {
		if (strcmp(p, "clock") == 0)
			ctl_clock(rq, out);
		record_write();
	} else {
		control_error(out, 404, NULL, "POST /_paysink/pay|expire|settle|refund|"
			      "refund-pending|refund-settle|dispute|dispute-close/{id}, "
			      "/_paysink/clock?advance=S, /_paysink/verify or GET /_paysink/record");
	}
	pthread_mutex_unlock(&ps_lock);
}
