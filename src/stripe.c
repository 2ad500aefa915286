/*
 * stripe.c: Stripe's Checkout Sessions and refunds (stripe.h), over one
 * HTTPS request each (httpc.h).
 */
#define _GNU_SOURCE
#include "stripe.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred.h"
#include "httpc.h"
#include "money.h"
#include "text.h"

#define FORM_MAX 8192

struct stripe {
	char api[STRIPE_URL_MAX];
	char where[HTTPC_WHERE_MAX + 32];	/* "Stripe api.stripe.com:443" */
	char *key;				/* wiped before it is freed */
	char *ca_file;
	long timeout_ms;
};

enum sd_result stripe_open(const struct stripe_config *cfg, struct stripe **out)
{
	char where[HTTPC_WHERE_MAX], cred[4096];
	const char *api = cfg->api_url && *cfg->api_url ? cfg->api_url : STRIPE_API_DEFAULT;
	const char *path = cfg->key_file;
	struct stripe *s;
	enum sd_result r;

	*out = NULL;
	if ((r = httpc_url_check(api, where, sizeof where)) != SD_OK)
		return err_set(r, "stripe_api_url: %s", err_msg());
	if (!path && cred_find("stripe_key", cred, sizeof cred))
		path = cred;
	if (!path)
		return err_set(SD_INVALID, "payment_provider = stripe needs its secret key: "
			       "stripe_key_file, or the systemd credential stripe_key");
	if (!(s = calloc(1, sizeof *s)))
		return err_set(SD_NOMEM, "out of memory");
	snprintf(s->api, sizeof s->api, "%s", api);
	if (s->api[0] && s->api[strlen(s->api) - 1] == '/')
		s->api[strlen(s->api) - 1] = '\0';
	snprintf(s->where, sizeof s->where, "Stripe %s", where);
	s->timeout_ms = cfg->timeout_ms > 0 ? cfg->timeout_ms : 20000;
	if ((r = cred_read(path, "Stripe key file", STRIPE_KEY_MAX, 1, &s->key)) != SD_OK ||
	    (cfg->ca_file && *cfg->ca_file && !(s->ca_file = strdup(cfg->ca_file)))) {
		if (r == SD_OK)
			r = err_set(SD_NOMEM, "out of memory");
		stripe_close(s);
		return r;
	}
	if (strncmp(s->key, "sk_", 3) != 0 && strncmp(s->key, "rk_", 3) != 0) {
		stripe_close(s);
		return err_set(SD_INVALID, "the Stripe key file %s holds no secret key (sk_... or "
			       "rk_...; a publishable pk_ key cannot take payments)", path);
	}
	*out = s;
	return SD_OK;
}

void stripe_close(struct stripe *s)
{
	if (!s)
		return;
	if (s->key) {
		explicit_bzero(s->key, strlen(s->key));
		free(s->key);
	}
	free(s->ca_file);
	free(s);
}

/* ---- the form a request sends ------------------------------------------ */

struct form {
	char buf[FORM_MAX];
	size_t len;
	int full;
};

static void form_put(struct form *f, const char *s, int raw)
{
	static const char hex[] = "0123456789ABCDEF";

	for (; *s && !f->full; s++) {
		unsigned char c = (unsigned char)*s;

		if (f->len + 4 >= sizeof f->buf) {
			f->full = 1;
			break;
		}
		if (raw || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~') {
			f->buf[f->len++] = (char)c;
		} else {
			f->buf[f->len++] = '%';
			f->buf[f->len++] = hex[c >> 4];
			f->buf[f->len++] = hex[c & 15];
		}
	}
	f->buf[f->len] = '\0';
}

static void form_add(struct form *f, const char *key, const char *value)
{
	if (f->len)
		form_put(f, "&", 1);
	form_put(f, key, 0);
	form_put(f, "=", 1);
	form_put(f, value, 0);
}

static void form_int(struct form *f, const char *key, int64_t v)
{
	char n[24];

	snprintf(n, sizeof n, "%lld", (long long)v);
	form_add(f, key, n);
}

/* ---- one request --------------------------------------------------------- */

static const char *str_of(json_t *o, const char *f)
{
	json_t *v = o ? json_object_get(o, f) : NULL;

	return json_is_string(v) ? json_string_value(v) : "";
}

/* A provider's words for a message: printable ASCII kept, at most 200. */
static void clean(char *dst, size_t size, const char *src)
{
	size_t i;

	for (i = 0; src[i] && i + 1 < size && i < 200; i++)
		dst[i] = ((unsigned char)src[i] >= 0x20 && (unsigned char)src[i] < 0x7f) ? src[i]
											 : '?';
	dst[i] = '\0';
}

/* refused: a 4xx as one of our results, with Stripe's type, code, words */
static enum sd_result refused(const struct stripe *s, long status, json_t *doc, const char *key)
{
	json_t *e = json_object_get(doc, "error");
	char words[240], code[64];

	clean(words, sizeof words, str_of(e, "message"));
	clean(code, sizeof code, str_of(e, "code"));
	if (status == 409 || strcmp(code, "idempotency_key_in_use") == 0 || status == 429)
		return err_set(SD_IO, "%s: %s (%ld): try again later", s->where,
			       status == 429 ? "rate limited" : "a request with this key is in flight",
			       status);
	if (status == 404)
		return err_set(SD_NOT_FOUND, "%s: no such object (404): %s", s->where, words);
	if (status == 401 || status == 403)
		return err_set(SD_INVALID, "%s refused the key (%ld): %s", s->where, status,
			       words);
	if (strcmp(code, "charge_already_refunded") == 0)
		return err_set(SD_CONFLICT, "%s: the payment is refunded already", s->where);
	return err_set(SD_INVALID, "%s refused the request%s%s (%ld, %s%s%s): %s", s->where,
		       key ? " under key " : "", key ? key : "", status,
		       str_of(e, "type")[0] ? str_of(e, "type") : "no type", code[0] ? ", " : "",
		       code, words[0] ? words : "no reason given");
}

/*
 * call: method on path (under the API's base), with the form (POST) and
 * the key (may be NULL).  [out] *doc the answer's JSON on SD_OK (2xx).
 */
static enum sd_result call(struct stripe *s, const char *method, const char *path,
			   const struct form *f, const char *key, json_t **doc)
{
	char url[STRIPE_URL_MAX + 256], auth[STRIPE_KEY_MAX + 32], keyhdr[STRIPE_ID_MAX + 32];
	const char *hdrs[6];
	struct httpc_req q = { method, url, hdrs, f ? f->buf : NULL, f ? f->len : 0, s->ca_file,
			       5000, s->timeout_ms, s->where };
	struct httpc_res a;
	enum sd_result r;
	int n = 0;

	*doc = NULL;
	if (f && f->full)
		return err_set(SD_INVALID, "%s: the request is longer than %d bytes", s->where,
			       FORM_MAX);
	snprintf(url, sizeof url, "%s%s", s->api, path);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", s->key);
	hdrs[n++] = auth;
	hdrs[n++] = "Stripe-Version: " STRIPE_API_VERSION;
	hdrs[n++] = "Accept: application/json";
	if (f)
		hdrs[n++] = "Content-Type: application/x-www-form-urlencoded";
	if (key) {
		snprintf(keyhdr, sizeof keyhdr, "Idempotency-Key: %s", key);
		hdrs[n++] = keyhdr;
	}
	hdrs[n] = NULL;
	r = httpc_do(&q, &a);
	explicit_bzero(auth, sizeof auth);
	if (r != SD_OK)
		return r;
	*doc = a.body ? json_loads(a.body, 0, NULL) : NULL;
	if (a.status >= 200 && a.status < 300 && json_is_object(*doc))
		r = SD_OK;
	else if (a.status >= 500 || (a.status >= 200 && a.status < 300))
		r = err_set(SD_IO, "%s answered %ld%s", s->where, a.status,
			    a.status < 300 ? " without a JSON object" : ": try again later");
	else
		r = refused(s, a.status, *doc, key);
	if (r != SD_OK) {
		json_decref(*doc);
		*doc = NULL;
	}
	httpc_res_free(&a);
	return r;
}

/* session_answer: a session object, or SD_IO when the answer is none */
static enum sd_result session_answer(struct stripe *s, json_t *doc, struct stripe_session *out)
{
	stripe_session_from_json(doc, out);
	json_decref(doc);
	if (!out->id[0] || strncmp(out->id, "cs_", 3) != 0)
		return err_set(SD_IO, "%s answered a session without an id", s->where);
	return SD_OK;
}

/* ---- the calls ----------------------------------------------------------- */

/* the payment method types a checkout offers, "card,link" as
 * payment_method_types[0]=card&payment_method_types[1]=link */
static void form_methods(struct form *f, const char *methods)
{
	char name[48], one[64];
	const char *p = methods;
	size_t n;
	int i = 0;

	while (p && *p) {
		n = strcspn(p, ", ");
		if (n > 0 && n < sizeof one) {
			snprintf(one, sizeof one, "%.*s", (int)n, p);
			snprintf(name, sizeof name, "payment_method_types[%d]", i++);
			form_add(f, name, one);
		}
		p += n;
		p += strspn(p, ", ");
	}
}

enum sd_result stripe_checkout_create(struct stripe *s, const struct stripe_checkout *c,
				      struct stripe_session *out)
{
	struct form f = { .len = 0 };
	char key[STRIPE_ID_MAX], cur[4];
	int64_t unit;
	json_t *doc;
	enum sd_result r;
	int i;

	if ((r = money_stripe_units(c->currency, c->unit_amount, &unit)) != SD_OK)
		return r;
	for (i = 0; i < 3 && c->currency[i]; i++)	/* Stripe's codes are lower case */
		cur[i] = (char)(c->currency[i] >= 'A' && c->currency[i] <= 'Z'
				? c->currency[i] - 'A' + 'a' : c->currency[i]);
	cur[i] = '\0';
	form_add(&f, "mode", "payment");
	form_add(&f, "line_items[0][price_data][currency]", cur);
	form_int(&f, "line_items[0][price_data][unit_amount]", unit);
	form_add(&f, "line_items[0][price_data][product_data][name]", c->item);
	form_int(&f, "line_items[0][quantity]", c->quantity);
	form_add(&f, "success_url", c->success_url);
	form_add(&f, "cancel_url", c->cancel_url);
	form_add(&f, "client_reference_id", c->hold);
	form_add(&f, "customer_email", c->email);
	form_int(&f, "expires_at", c->expires_at_s);
	form_add(&f, "metadata[hold]", c->hold);
	form_add(&f, "payment_intent_data[metadata][hold]", c->hold);
	form_methods(&f, c->methods);
	snprintf(key, sizeof key, "checkout-%s", c->hold);
	if ((r = call(s, "POST", "/v1/checkout/sessions", &f, key, &doc)) != SD_OK)
		return r;
	return session_answer(s, doc, out);
}

/* an id of Stripe's, as it may stand in a path */
static enum sd_result id_ok(const char *id)
{
	const char *p;

	if (!id || !*id || strlen(id) >= STRIPE_ID_MAX)
		return err_set(SD_INVALID, "no Stripe id");
	for (p = id; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return err_set(SD_INVALID, "'%.40s' is not a Stripe id", id);
	return SD_OK;
}

/* GET of the object id under prefix ("/v1/refunds/"): [out] *doc */
static enum sd_result get_object(struct stripe *s, const char *prefix, const char *id,
				 json_t **doc)
{
	char path[STRIPE_ID_MAX + 48];
	enum sd_result r;

	*doc = NULL;
	if ((r = id_ok(id)) != SD_OK)
		return r;
	snprintf(path, sizeof path, "%s%s", prefix, id);
	return call(s, "GET", path, NULL, NULL, doc);
}

enum sd_result stripe_session_get(struct stripe *s, const char *id, struct stripe_session *out)
{
	json_t *doc;
	enum sd_result r;

	if ((r = get_object(s, "/v1/checkout/sessions/", id, &doc)) != SD_OK)
		return r;
	return session_answer(s, doc, out);
}

enum sd_result stripe_session_expire(struct stripe *s, const char *id)
{
	char path[STRIPE_ID_MAX + 48], key[STRIPE_ID_MAX + 16];
	struct form f = { .len = 0 };
	json_t *doc;
	enum sd_result r;

	if ((r = id_ok(id)) != SD_OK)
		return r;
	snprintf(path, sizeof path, "/v1/checkout/sessions/%s/expire", id);
	snprintf(key, sizeof key, "expire-%s", id);
	r = call(s, "POST", path, &f, key, &doc);
	json_decref(doc);
	if (r == SD_INVALID)	/* not open: paid or ended meanwhile */
		return err_set(SD_CONFLICT, "%s", err_msg());
	return r;
}

enum sd_result stripe_payment_get(struct stripe *s, const char *id, struct stripe_payment *out)
{
	json_t *doc;
	enum sd_result r;

	memset(out, 0, sizeof *out);
	if ((r = get_object(s, "/v1/payment_intents/", id, &doc)) != SD_OK)
		return r;
	stripe_payment_from_json(doc, out);
	json_decref(doc);
	if (strncmp(out->id, "pi_", 3) != 0)
		return err_set(SD_IO, "%s answered a payment without an id", s->where);
	return SD_OK;
}

/* a refund object, or SD_IO when the answer is none */
static enum sd_result refund_answer(struct stripe *s, json_t *doc, struct stripe_refund_view *out)
{
	stripe_refund_from_json(doc, out);
	json_decref(doc);
	if (strncmp(out->id, "re_", 3) != 0 && strncmp(out->id, "pyr_", 4) != 0)
		return err_set(SD_IO, "%s answered a refund without an id", s->where);
	return SD_OK;
}

enum sd_result stripe_refund(struct stripe *s, const char *payment_ref, const char *key,
			     int64_t amount, const char *currency, struct stripe_refund_view *out)
{
	struct form f = { .len = 0 };
	int64_t units;
	json_t *doc;
	enum sd_result r;

	memset(out, 0, sizeof *out);
	if ((r = id_ok(payment_ref)) != SD_OK ||
	    (amount >= 0 && (r = money_stripe_units(currency, amount, &units)) != SD_OK))
		return r;
	form_add(&f, "payment_intent", payment_ref);
	if (amount >= 0)
		form_int(&f, "amount", units);
	form_add(&f, "metadata[refund_key]", key);
	if ((r = call(s, "POST", "/v1/refunds", &f, key, &doc)) != SD_OK)
		return r;
	return refund_answer(s, doc, out);
}

enum sd_result stripe_refund_get(struct stripe *s, const char *id, struct stripe_refund_view *out)
{
	json_t *doc;
	enum sd_result r;

	memset(out, 0, sizeof *out);
	if ((r = get_object(s, "/v1/refunds/", id, &doc)) != SD_OK)
		return r;
	return refund_answer(s, doc, out);
}
