/*
 * api.c: the Stripe API under /v1/: authentication, errors, routes, the
 * injected 5xx, and the idempotency of POSTs (idem.c holds the table).
 *
 *   POST /v1/checkout/sessions            create (checkout.c checks it)
 *   GET  /v1/checkout/sessions/{id}       retrieve
 *   POST /v1/checkout/sessions/{id}/expire
 *   POST /v1/refunds                      create
 *   GET  /v1/refunds[?payment_intent=&charge=&limit=]   newest first
 *   GET  /v1/refunds/{id}
 *   GET  /v1/payment_intents/{id}
 *   GET  /v1/charges/{id}
 *   GET  /v1/disputes/{id}
 *
 * Anything else under /v1/ is 404 "Unrecognized request URL", as Stripe
 * answers.  The order of checks is Stripe's: the API key first (401), then
 * the route, then for a POST: its body's names, the injected 5xx (nothing
 * stored, the key stays unknown), the idempotency table, and the handler.
 * Every request is first written to the --request-log, as it came.  The
 * events a request makes name it (request.id, request.idempotency_key).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <mbedtls/base64.h>
#include <mbedtls/sha256.h>

#include "paysink.h"

enum ep {
	EP_NONE,
	EP_SESSION_CREATE,
	EP_SESSION_GET,
	EP_SESSION_EXPIRE,
	EP_REFUND_CREATE,
	EP_REFUND_LIST,
	EP_REFUND_GET,
	EP_PI_GET,
	EP_CHARGE_GET,
	EP_DISPUTE_GET,
};

/* ======================== errors ========================================= */

void err_set(struct ps_err *e, int status, const char *type, const char *code, const char *param,
	     const char *fmt, ...)
{
	va_list ap;

	e->status = status;
	e->type = type;
	e->code = code;
	snprintf(e->param, sizeof e->param, "%s", param ? param : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof e->message, fmt, ap);
	va_end(ap);
}

json_t *err_json(const struct ps_err *e)
{
	json_t *o = json_object();

	if (e->code) {
		char url[160];
		size_t i;

		json_object_set_new(o, "code", json_string(e->code));
		snprintf(url, sizeof url, "https://stripe.com/docs/error-codes/%s", e->code);
		for (i = 0; url[i]; i++)
			if (url[i] == '_')
				url[i] = '-';
		json_object_set_new(o, "doc_url", json_string(url));
	}
	json_object_set_new(o, "message", json_string(e->message));
	if (e->param[0])
		json_object_set_new(o, "param", json_string(e->param));
	json_object_set_new(o, "type", json_string(e->type));
	return json_pack("{s:o}", "error", o);
}

static void resp_err(struct ps_resp *out, const struct ps_err *e)
{
	resp_json(out, e->status, err_json(e));
}

/* ======================== the API key ==================================== */

/* "sk_test_****wxyz": the prefix up to its second '_', the last four */
static void key_redact(char *out, size_t size, const char *key)
{
	const char *u = strchr(key, '_');
	size_t len = strlen(key), pre = 0;

	if (u && (u = strchr(u + 1, '_')))
		pre = (size_t)(u - key) + 1;
	if (len <= pre + 4 || len > 200)
		snprintf(out, size, "%.*s****", (int)(pre < 40 ? pre : 40), key);
	else
		snprintf(out, size, "%.*s****%s", (int)pre, key, key + len - 4);
}

/* The key an Authorization header gives (Bearer KEY, or Basic with KEY as
 * the user), into key; 0, or -1 when there is none. */
static int auth_key(const char *h, char *key, size_t size)
{
	unsigned char dec[300];
	size_t n = 0;

	if (!h)
		return -1;
	if (strncasecmp(h, "Bearer ", 7) == 0) {
		for (h += 7; *h == ' '; h++)
			;
		if (!*h || strlen(h) >= size)
			return -1;
		memcpy(key, h, strlen(h) + 1);
		return 0;
	}
	if (strncasecmp(h, "Basic ", 6) == 0) {
		char *colon;

		for (h += 6; *h == ' '; h++)
			;
		if (mbedtls_base64_decode(dec, sizeof dec - 1, &n, (const unsigned char *)h,
					  strlen(h)) != 0)
			return -1;
		dec[n] = '\0';
		colon = strchr((char *)dec, ':');
		if (colon)
			*colon = '\0';
		if (!dec[0] || strlen((char *)dec) >= size)
			return -1;
		memcpy(key, dec, strlen((char *)dec) + 1);
		return 0;
	}
	return -1;
}

static int auth_check(const struct ps_req *rq, char *key, size_t size, struct ps_err *e)
{
	char shown[80];

	if (auth_key(req_header(rq, "Authorization"), key, size) != 0) {
		err_set(e, 401, "invalid_request_error", NULL, NULL,
			"You did not provide an API key. You need to provide your API key in the "
			"Authorization header, using Bearer auth (e.g. 'Authorization: Bearer "
			"YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for "
			"details, or we can help at https://support.stripe.com/.");
		return -1;
	}
	if (strcmp(key, ps_opts.api_key) != 0) {
		key_redact(shown, sizeof shown, key);
		err_set(e, 401, "invalid_request_error", NULL, NULL,
			"Invalid API Key provided: %s", shown);
		return -1;
	}
	return 0;
}

/* ======================== routes ========================================= */

/* rest is "ID" or "ID/tail": the id into id, the tail (or "") returned */
static const char *path_id(const char *rest, char *id, size_t size)
{
	const char *slash = strchr(rest, '/');
	size_t n = slash ? (size_t)(slash - rest) : strlen(rest);

	if (n == 0 || n >= size)
		return NULL;
	memcpy(id, rest, n);
	id[n] = '\0';
	return slash ? slash + 1 : "";
}

static enum ep route(const char *method, const char *path, char *id, size_t size)
{
	int post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0;
	const char *tail;

	if (strcmp(path, "/v1/checkout/sessions") == 0)
		return post ? EP_SESSION_CREATE : EP_NONE;
	if (strncmp(path, "/v1/checkout/sessions/", 22) == 0 &&
	    (tail = path_id(path + 22, id, size))) {
		if (get && !*tail)
			return EP_SESSION_GET;
		if (post && strcmp(tail, "expire") == 0)
			return EP_SESSION_EXPIRE;
		return EP_NONE;
	}
	if (strcmp(path, "/v1/refunds") == 0)
		return post ? EP_REFUND_CREATE : get ? EP_REFUND_LIST : EP_NONE;
	if (strncmp(path, "/v1/refunds/", 12) == 0 && (tail = path_id(path + 12, id, size)) &&
	    !*tail && get)
		return EP_REFUND_GET;
	if (strncmp(path, "/v1/payment_intents/", 20) == 0 &&
	    (tail = path_id(path + 20, id, size)) && !*tail && get)
		return EP_PI_GET;
	if (strncmp(path, "/v1/charges/", 12) == 0 && (tail = path_id(path + 12, id, size)) &&
	    !*tail && get)
		return EP_CHARGE_GET;
	if (strncmp(path, "/v1/disputes/", 13) == 0 && (tail = path_id(path + 13, id, size)) &&
	    !*tail && get)
		return EP_DISPUTE_GET;
	return EP_NONE;
}

static void no_such(struct ps_err *e, const char *what, const char *param, const char *id)
{
	err_set(e, 404, "invalid_request_error", "resource_missing", param, "No such %s: '%s'",
		what, id);
	e->store = 1;
}

/* ======================== the handlers =================================== */

static json_t *refund_list(const struct ps_req *rq, struct ps_err *e)
{
	const char *pi = req_query(rq, "payment_intent"), *ch = req_query(rq, "charge");
	const char *lim = req_query(rq, "limit");
	long limit = lim ? strtol(lim, NULL, 10) : 10;
	json_t *data = json_array();
	size_t i = state_count(PS_REFUNDS);
	int more = 0;

	if (limit < 1 || limit > 100) {
		json_decref(data);
		err_set(e, 400, "invalid_request_error", "parameter_invalid_integer", "limit",
			"This value must be between 1 and 100.");
		return NULL;
	}
	while (i-- > 0) {
		const struct ps_refund *r = state_at(PS_REFUNDS, i);

		if ((pi && *pi && strcmp(r->pi, pi) != 0) || (ch && *ch && strcmp(r->charge, ch) != 0))
			continue;
		if ((long)json_array_size(data) == limit) {
			more = 1;
			break;
		}
		json_array_append_new(data, refund_json(r));
	}
	return json_pack("{s:s,s:o,s:b,s:s}", "object", "list", "data", data, "has_more", more,
			 "url", "/v1/refunds");
}

/* the object a GET found, or (NULL) Stripe's 404 for what with param */
static json_t *found(json_t *obj, struct ps_err *e, const char *what, const char *param,
		     const char *id)
{
	if (!obj)
		no_such(e, what, param, id);
	return obj;
}

static json_t *run_get(const struct ps_req *rq, enum ep ep, const char *id, struct ps_err *e)
{
	void *o;
	struct ps_session *s = ep == EP_PI_GET || ep == EP_CHARGE_GET ? state_session_by_pi(id)
								       : NULL;

	switch (ep) {
	case EP_SESSION_GET:
		o = state_find(PS_SESSIONS, id);
		return found(o ? session_json(o) : NULL, e, "checkout.session", "session", id);
	case EP_REFUND_GET:
		o = state_find(PS_REFUNDS, id);
		return found(o ? refund_json(o) : NULL, e, "refund", "id", id);
	case EP_PI_GET:
		return found(s && strcmp(s->pay.pi, id) == 0 ? pi_json(s) : NULL, e,
			     "payment_intent", "intent", id);
	case EP_CHARGE_GET:
		return found(s && strcmp(s->pay.charge, id) == 0 ? charge_json(s) : NULL, e,
			     "charge", "id", id);
	case EP_DISPUTE_GET:
		o = state_find(PS_DISPUTES, id);
		return found(o ? dispute_json(o) : NULL, e, "dispute", "dispute", id);
	case EP_REFUND_LIST:
		return refund_list(rq, e);
	default:
		err_set(e, 500, "api_error", NULL, NULL, "no such route");
		return NULL;
	}
}

static json_t *run_expire(json_t *p, const char *id, struct ps_err *e)
{
	static const char *const keys[] = { "expand", NULL };
	struct ps_session *s;

	if (param_allowed(p, "", keys, e) != 0)
		return NULL;
	s = state_find(PS_SESSIONS, id);
	if (!s) {
		no_such(e, "checkout.session", "session", id);
		return NULL;
	}
	if (s->status != PS_OPEN) {
		err_set(e, 400, "invalid_request_error", NULL, NULL,
			"Only Checkout Sessions with a status in [\"open\"] can be expired. This "
			"Checkout Session has a status of `%s`.",
			s->status == PS_COMPLETE ? "complete" : "expired");
		e->store = 1;
		return NULL;
	}
	state_expire(s);
	return session_json(s);
}

/* run a POST; came: when it came, on the business clock (a session's
 * creation) */
static json_t *run_post(json_t *p, enum ep ep, const char *id, const char *idem_key,
			int64_t came, struct ps_err *e)
{
	struct ps_session *s;
	struct ps_refund *r;

	switch (ep) {
	case EP_SESSION_CREATE:
		s = checkout_create(p, came, e);
		return s ? session_json(s) : NULL;
	case EP_SESSION_EXPIRE:
		return run_expire(p, id, e);
	case EP_REFUND_CREATE:
		r = refund_create(p, idem_key, e);
		return r ? refund_json(r) : NULL;
	default:
		err_set(e, 500, "api_error", NULL, NULL, "no such route");
		return NULL;
	}
}

/* ======================== a POST ========================================= */

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (ms > 0 && nanosleep(&ts, &ts) != 0)
		;
}

/* Answer a key the table already knows (lock held). */
static void idem_answer(enum idem_look look, struct ps_idem *ent, const char *key,
			const char *endpoint, struct ps_resp *out)
{
	struct ps_err e = { 0 };

	if (look == IDEM_IN_USE) {
		ps_counts.idem_in_use++;
		err_set(&e, 409, "idempotency_error", "idempotency_key_in_use", NULL,
			"There is currently another in-progress request using this Idempotent Key "
			"(that probably means you submitted twice, and the other request is still "
			"going through): %.255s. Please try again later.", key);
	} else if (look == IDEM_OTHER_ENDPOINT) {
		ps_counts.idem_conflicts++;
		err_set(&e, 400, "idempotency_error", NULL, NULL,
			"Keys for idempotent requests can only be used for the same endpoint they "
			"were first used for ('%s' vs '%s'). Try using a key other than '%.255s' if "
			"you meant to execute a different request.", idem_endpoint(ent), endpoint,
			key);
	} else if (look == IDEM_OTHER_PARAMS) {
		ps_counts.idem_conflicts++;
		err_set(&e, 400, "idempotency_error", NULL, NULL,
			"Keys for idempotent requests can only be used with the same parameters "
			"they were first used with. Try using a key other than '%.255s' if you "
			"meant to execute a different request.", key);
	} else {
		ps_counts.idem_replays++;
		resp_text(out, idem_status(ent), NULL, strdup(idem_body(ent)));
		snprintf(out->original, sizeof out->original, "%s", idem_request_id(ent));
		out->replayed = 1;
		return;
	}
	resp_err(out, &e);
}

/* The 500 that --fail-5xx-pct and --refund-fail-pct inject (lock held): 1
 * when this request gets it. */
static int injected(enum ep ep, struct ps_resp *out)
{
	struct ps_err e = { 0 };
	int hit = ps_dice_roll(ps_opts.fail_5xx_pct);

	if (!hit && ep == EP_REFUND_CREATE)
		hit = ps_dice_roll(ps_opts.refund_fail_pct);
	if (!hit)
		return 0;
	ps_counts.injected_5xx++;
	err_set(&e, 500, "api_error", NULL, NULL,
		"An unknown error occurred (injected by paysink's --fail-5xx-pct or "
		"--refund-fail-pct)");
	resp_err(out, &e);
	return 1;
}

/* SHA-256 of the endpoint and the parameters in one canonical form */
static int params_sha(json_t *p, const char *endpoint, unsigned char sha[32])
{
	char *canon = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
	mbedtls_sha256_context c;

	if (!canon)
		return -1;
	mbedtls_sha256_init(&c);
	mbedtls_sha256_starts_ret(&c, 0);
	mbedtls_sha256_update_ret(&c, (const unsigned char *)endpoint, strlen(endpoint) + 1);
	mbedtls_sha256_update_ret(&c, (const unsigned char *)canon, strlen(canon));
	mbedtls_sha256_finish_ret(&c, sha);
	mbedtls_sha256_free(&c);
	free(canon);
	return 0;
}

static void api_post(struct ps_req *rq, enum ep ep, const char *id, const char *api_key,
		     struct ps_resp *out)
{
	const char *key = req_header(rq, "Idempotency-Key");
	char bad[200], endpoint[600];
	unsigned char sha[32];
	struct ps_err e = { 0 };
	struct ps_idem *ent = NULL;
	json_t *p, *obj;
	int64_t came;

	if (key && !*key)
		key = NULL;
	if (key && strlen(key) > 255) {
		err_set(&e, 400, "invalid_request_error", NULL, NULL,
			"Idempotency-Key must be at most 255 characters long.");
		resp_err(out, &e);
		return;
	}
	if (key)
		snprintf(out->idem_key, sizeof out->idem_key, "%s", key);
	snprintf(endpoint, sizeof endpoint, "POST %s", rq->path);
	p = form_parse(rq->body, rq->len, bad, sizeof bad);
	if (!p || params_sha(p, endpoint, sha) != 0) {
		err_set(&e, 400, "invalid_request_error", "parameter_invalid_string", bad,
			"Invalid parameter name: %s", bad);
		resp_err(out, &e);
		json_decref(p);
		return;
	}
	pthread_mutex_lock(&ps_lock);
	came = ps_now();
	state_sweep_expiry();
	if (injected(ep, out))
		goto done;
	if (key) {
		enum idem_look look = idem_begin(api_key, key, endpoint, sha, &ent);

		if (look != IDEM_NEW) {
			idem_answer(look, ent, key, endpoint, out);
			goto done;
		}
	}
	if (ps_opts.slow_ms > 0) {
		/* held with the key in flight: a second request meets 409 */
		pthread_mutex_unlock(&ps_lock);
		sleep_ms(ps_opts.slow_ms);
		pthread_mutex_lock(&ps_lock);
		state_sweep_expiry();
	}
	wh_request(out->request_id, key);
	obj = run_post(p, ep, id, key, came, &e);
	wh_request(NULL, NULL);
	if (obj)
		resp_json(out, 200, obj);
	else
		resp_err(out, &e);
	/* kept: what ran (a 2xx, or an error met while executing); not kept: a
	 * 5xx, or parameters that failed validation before anything ran */
	if (ent && (out->status < 300 || (out->status < 500 && e.store))) {
		idem_finish(ent, out->status, out->body, out->request_id);
		snprintf(out->original, sizeof out->original, "%s", out->request_id);
	} else {
		idem_forget(ent);
	}
done:
	record_write();
	pthread_mutex_unlock(&ps_lock);
	json_decref(p);
}

/* the request as it came, into the --request-log (lock held) */
static void api_log(const struct ps_req *rq)
{
	const char *uri = rq->uri ? rq->uri : rq->path, *q = strchr(uri, '?');
	char path[sizeof rq->path];

	snprintf(path, sizeof path, "%.*s", (int)(q ? q - uri : (long)strlen(uri)), uri);
	reqlog_line(rq->method, path, q ? q + 1 : "", rq->body, rq->len);
}

void api_handle(struct ps_req *rq, struct ps_resp *out)
{
	char id[PS_ID_MAX + 40], key[256];
	struct ps_err e = { 0 };
	enum ep ep;
	json_t *obj;

	out->api = 1;
	pthread_mutex_lock(&ps_lock);
	ps_counts.api_requests++;
	api_log(rq);
	pthread_mutex_unlock(&ps_lock);
	if (auth_check(rq, key, sizeof key, &e) != 0)
		goto fail;
	ep = route(rq->method, rq->path, id, sizeof id);
	if (ep == EP_NONE) {
		err_set(&e, 404, "invalid_request_error", NULL, NULL,
			"Unrecognized request URL (%s: %.300s). Please see https://stripe.com/docs "
			"or we can help at https://support.stripe.com/.", rq->method, rq->path);
		goto fail;
	}
	if (strcmp(rq->method, "POST") == 0) {
		api_post(rq, ep, id, key, out);
		return;
	}
	pthread_mutex_lock(&ps_lock);
	state_sweep_expiry();
	obj = run_get(rq, ep, id, &e);
	if (obj)
		resp_json(out, 200, obj);
	else
		resp_err(out, &e);
	record_write();
	pthread_mutex_unlock(&ps_lock);
	return;
fail:
	resp_err(out, &e);
	pthread_mutex_lock(&ps_lock);
	record_write();
	pthread_mutex_unlock(&ps_lock);
}
