/*
 * checkout.c: the parameters of POST /v1/checkout/sessions, checked as
 * Stripe checks them (the same error type, code, param and, where known,
 * message), the session they make, and the parameter helpers the other
 * endpoints share.
 *
 * Parameters paysink does not know are refused as Stripe refuses them
 * ("Received unknown parameter: x", code parameter_unknown), but for a few
 * that change nothing here and that clients commonly send (expand, locale,
 * submit_type): those are accepted and ignored.  Only mode=payment and
 * line_items with price_data are served.  Amounts follow currency.c: a
 * currency Stripe takes, amounts its rules allow, a total of 0 (a no-cost
 * order) or at least Stripe's minimum charge and at most 99999999;
 * payment_method_types as payment.c checks them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paysink.h"

#define META_KEYS_MAX 50
#define META_KEY_MAX 40
#define META_VALUE_MAX 500

/* ======================== parameter helpers ============================== */

int param_allowed(json_t *obj, const char *prefix, const char *const *names, struct ps_err *e)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v) {
		size_t i;
		int known = 0;

		for (i = 0; names[i] && !known; i++)
			known = strcmp(names[i], k) == 0;
		if (!known) {
			char label[200];

			if (*prefix)
				snprintf(label, sizeof label, "%s[%s]", prefix, k);
			else
				snprintf(label, sizeof label, "%s", k);
			err_set(e, 400, "invalid_request_error", "parameter_unknown", label,
				"Received unknown parameter: %s", label);
			return -1;
		}
	}
	return 0;
}

void param_missing(struct ps_err *e, const char *label)
{
	err_set(e, 400, "invalid_request_error", "parameter_missing", label,
		"Missing required param: %s.", label);
}

int param_str(json_t *obj, const char *name, const char *label, size_t max, int required,
	      const char **out, struct ps_err *e)
{
	json_t *v = json_object_get(obj, name);

	*out = NULL;
	if (!v) {
		if (required)
			param_missing(e, label);
		return required ? -1 : 0;
	}
	if (!json_is_string(v)) {
		err_set(e, 400, "invalid_request_error", "parameter_invalid_string", label,
			"Invalid string: %s must be a string, not a hash or an array", label);
		return -1;
	}
	if (json_string_length(v) == 0) {
		if (!required)
			return 0;	/* an empty optional value: not given */
		err_set(e, 400, "invalid_request_error", "parameter_invalid_empty", label,
			"You passed an empty string for '%s'. We assume empty values are an "
			"attempt to unset a parameter; however '%s' cannot be unset. You should "
			"remove '%s' from your request or supply a non-empty value.", label,
			label, label);
		return -1;
	}
	if (json_string_length(v) > max) {
		err_set(e, 400, "invalid_request_error", "string_length_exceeds_maximum", label,
			"Invalid string: %.40s...; must be at most %zu characters", json_string_value(v),
			max);
		return -1;
	}
	*out = json_string_value(v);
	return 0;
}

int param_int(json_t *obj, const char *name, const char *label, long long min, long long max,
	      int required, long long *out, struct ps_err *e)
{
	const char *s;
	char *end;
	long long n;

	if (param_str(obj, name, label, 40, required, &s, e) != 0)
		return -1;
	if (!s)
		return 1;	/* absent */
	errno = 0;
	n = strtoll(s, &end, 10);
	if (errno || end == s || *end || !((s[0] >= '0' && s[0] <= '9') || s[0] == '-')) {
		err_set(e, 400, "invalid_request_error", "parameter_invalid_integer", label,
			"Invalid integer: %.40s", s);
		return -1;
	}
	if (n < min) {
		err_set(e, 400, "invalid_request_error", "parameter_invalid_integer", label,
			"This value must be greater than or equal to %lld.", min);
		return -1;
	}
	if (n > max) {
		err_set(e, 400, "invalid_request_error", "parameter_invalid_integer", label,
			"This value must be less than or equal to %lld (it currently is '%lld').",
			max, n);
		return -1;
	}
	*out = n;
	return 0;
}

int param_metadata(json_t *obj, const char *name, const char *label, json_t **out,
		   struct ps_err *e)
{
	json_t *m = json_object_get(obj, name), *v;
	const char *k;

	*out = NULL;
	if (m && json_is_string(m) && json_string_length(m) == 0)
		m = NULL;	/* metadata= : none */
	if (m && !json_is_object(m)) {
		err_set(e, 400, "invalid_request_error", "parameter_invalid_string", label,
			"Invalid hash: %s must be a hash of keys and string values", label);
		return -1;
	}
	if (m && json_object_size(m) > META_KEYS_MAX) {
		err_set(e, 400, "invalid_request_error", NULL, label,
			"You can have at most %d keys in metadata.", META_KEYS_MAX);
		return -1;
	}
	json_object_foreach(m, k, v) {
		if (strlen(k) > META_KEY_MAX || !json_is_string(v) ||
		    json_string_length(v) > META_VALUE_MAX) {
			err_set(e, 400, "invalid_request_error", NULL, label,
				"Invalid metadata[%.40s]: keys can have up to %d characters and "
				"string values up to %d characters", k, META_KEY_MAX, META_VALUE_MAX);
			return -1;
		}
	}
	*out = m ? json_deep_copy(m) : json_object();
	/* an empty value unsets a key: at creation, it is simply not there */
	json_object_foreach(m, k, v)
		if (json_string_length(v) == 0)
			json_object_del(*out, k);
	return 0;
}

/* a URL Stripe would take: http(s)://host... */
static int url_ok(const char *u)
{
	return (strncmp(u, "https://", 8) == 0 && u[8]) || (strncmp(u, "http://", 7) == 0 && u[7]);
}

/* ======================== one line item ================================== */

/* a currency parameter, lower-cased into currency: one Stripe takes (it
 * takes upper case too, and answers in lower case) */
static int currency_param(json_t *obj, const char *label, char currency[4], struct ps_err *e)
{
	const char *cur;
	size_t k;

	if (param_str(obj, "currency", label, 3, 1, &cur, e) != 0)
		return -1;
	for (k = 0; k < 3 && cur[k]; k++)
		currency[k] = (char)(cur[k] >= 'A' && cur[k] <= 'Z' ? cur[k] + 32 : cur[k]);
	currency[k] = '\0';
	if (!currency_supported(currency)) {
		err_set(e, 400, "invalid_request_error", NULL, label,
			"Invalid currency: %s. Stripe currently supports these currencies: %s",
			currency, currency_list());
		return -1;
	}
	return 0;
}

static int line_parse(json_t *item, size_t i, struct ps_line *line, char currency[4],
		      struct ps_err *e)
{
	static const char *const item_keys[] = { "price_data", "quantity", "price", NULL };
	static const char *const price_keys[] = { "currency", "unit_amount", "product_data", NULL };
	static const char *const product_keys[] = { "name", "description", NULL };
	char pre[64], label[160];
	json_t *pd, *prod;
	const char *name;

	snprintf(pre, sizeof pre, "line_items[%zu]", i);
	if (!json_is_object(item)) {
		param_missing(e, pre);
		return -1;
	}
	if (param_allowed(item, pre, item_keys, e) != 0)
		return -1;
	if (json_object_get(item, "price")) {
		snprintf(label, sizeof label, "%s[price]", pre);
		err_set(e, 400, "invalid_request_error", "resource_missing", label,
			"No such price: '%s'", json_string_value(json_object_get(item, "price")) ?
			json_string_value(json_object_get(item, "price")) : "");
		return -1;
	}
	snprintf(label, sizeof label, "%s[quantity]", pre);
	if (param_int(item, "quantity", label, 1, 999999, 1, &line->quantity, e) != 0)
		return -1;
	snprintf(label, sizeof label, "%s[price_data]", pre);
	pd = json_object_get(item, "price_data");
	if (!json_is_object(pd)) {
		param_missing(e, label);
		return -1;
	}
	if (param_allowed(pd, label, price_keys, e) != 0)
		return -1;
	snprintf(label, sizeof label, "%s[price_data][currency]", pre);
	if (currency_param(pd, label, currency, e) != 0)
		return -1;
	snprintf(label, sizeof label, "%s[price_data][unit_amount]", pre);
	if (param_int(pd, "unit_amount", label, 0, PS_AMOUNT_MAX, 1, &line->unit_amount, e) != 0 ||
	    currency_amount_ok(currency, line->unit_amount, label, e) != 0)
		return -1;
	snprintf(label, sizeof label, "%s[price_data][product_data]", pre);
	prod = json_object_get(pd, "product_data");
	if (!json_is_object(prod)) {
		param_missing(e, label);
		return -1;
	}
	if (param_allowed(prod, label, product_keys, e) != 0)
		return -1;
	snprintf(label, sizeof label, "%s[price_data][product_data][name]", pre);
	if (param_str(prod, "name", label, 250, 1, &name, e) != 0)
		return -1;
	line->name = strdup(name);
	return 0;
}

/* Stripe's minimum charge for the total: 0 is a no-cost order (API version
 * 2023-08-16 and later), anything else must reach the minimum.  The code
 * and param of Stripe's answer are not published: amount_too_small is the
 * code its error-code list has for "less than the minimum amount allowed",
 * and no param is given. */
static int total_ok(const struct ps_session *s, struct ps_err *e)
{
	long long min = currency_minimum(s->currency);
	char at_least[64];

	if (s->amount_total == 0 || s->amount_total >= min)
		return 0;
	amount_format_stripe(at_least, sizeof at_least, min, s->currency);
	err_set(e, 400, "invalid_request_error", "amount_too_small", NULL,
		"The Checkout Session's total amount due must add up to at least %s", at_least);
	return -1;
}

/* line_items[0..n) into s: the lines, the currency and the total */
static int lines_parse(json_t *items, struct ps_session *s, struct ps_err *e)
{
	size_t n = json_is_object(items) ? json_object_size(items) : 0, i;

	if (n == 0 || n > 100) {
		if (n == 0)
			param_missing(e, "line_items");
		else
			err_set(e, 400, "invalid_request_error", NULL, "line_items",
				"You may only specify up to 100 line items.");
		return -1;
	}
	s->lines = calloc(n, sizeof *s->lines);
	if (!s->lines) {
		err_set(e, 500, "api_error", NULL, "", "out of memory");
		return -1;
	}
	for (i = 0; i < n; i++) {
		char idx[24], cur[4];
		json_t *item;

		snprintf(idx, sizeof idx, "%zu", i);
		item = json_object_get(items, idx);
		s->n_lines = i + 1;
		if (line_parse(item, i, &s->lines[i], cur, e) != 0)
			return -1;
		if (i == 0) {
			memcpy(s->currency, cur, sizeof cur);
		} else if (strcmp(cur, s->currency) != 0) {
			err_set(e, 400, "invalid_request_error", NULL, "line_items",
				"All line items must have the same currency (got %s and %s).",
				s->currency, cur);
			return -1;
		}
		s->amount_total += s->lines[i].unit_amount * s->lines[i].quantity;
		if (s->lines[i].unit_amount * s->lines[i].quantity > PS_AMOUNT_MAX ||
		    s->amount_total > PS_AMOUNT_MAX) {
			err_set(e, 400, "invalid_request_error", "amount_too_large", "line_items",
				"The Checkout Session's total amount due must be no more than "
				"%lld in minor units.", PS_AMOUNT_MAX);
			return -1;
		}
	}
	return total_ok(s, e);
}

/* ======================== the session ==================================== */

/* expires_at, if given, into s: from 30 minutes to 24 hours after the
 * session's creation, the time its create request came on the business
 * clock.  Stripe says "must be at least 30 minutes" and "must be less than
 * 24 hours" from creation; read to the letter (the strictest reading), the
 * second excludes 24 hours itself, the default. */
static int expires_field(json_t *p, struct ps_session *s, int64_t created, struct ps_err *e)
{
	long long exp = 0;
	int rc = param_int(p, "expires_at", "expires_at", 0, INT64_MAX / 2, 0, &exp, e);

	if (rc < 0)
		return -1;
	if (rc == 0 && (exp < created + 1800 || exp >= created + 86400)) {
		err_set(e, 400, "invalid_request_error", NULL, "expires_at",
			exp < created + 1800 ? "The `expires_at` timestamp must be at least 30 "
			"minutes from Checkout Session creation." : "The `expires_at` timestamp "
			"must be less than 24 hours from Checkout Session creation.");
		return -1;
	}
	s->expires_at = rc == 0 ? exp : created + 86400;
	return 0;
}

/* the scalar parameters of a session into s */
static int session_fields(json_t *p, struct ps_session *s, int64_t created, struct ps_err *e)
{
	const char *mode, *ok_url, *cancel, *ref, *email;

	if (param_str(p, "mode", "mode", 20, 1, &mode, e) != 0)
		return -1;
	if (strcmp(mode, "payment") != 0) {
		err_set(e, 400, "invalid_request_error", "parameter_invalid_string", "mode",
			strcmp(mode, "subscription") == 0 || strcmp(mode, "setup") == 0
			? "paysink serves mode=payment only, not %s." :
			"Invalid mode: must be one of payment, setup, or subscription (got %s).",
			mode);
		return -1;
	}
	if (param_str(p, "success_url", "success_url", 5000, 1, &ok_url, e) != 0 ||
	    param_str(p, "cancel_url", "cancel_url", 5000, 0, &cancel, e) != 0 ||
	    param_str(p, "client_reference_id", "client_reference_id", 200, 0, &ref, e) != 0 ||
	    param_str(p, "customer_email", "customer_email", 800, 0, &email, e) != 0)
		return -1;
	if (!url_ok(ok_url) || (cancel && !url_ok(cancel))) {
		const char *which = url_ok(ok_url) ? "cancel_url" : "success_url";

		err_set(e, 400, "invalid_request_error", "url_invalid", which, "Not a valid URL");
		return -1;
	}
	if (email && (!strchr(email, '@') || strchr(email, ' '))) {
		err_set(e, 400, "invalid_request_error", "email_invalid", "customer_email",
			"Invalid email address: %s", email);
		return -1;
	}
	if (expires_field(p, s, created, e) != 0)
		return -1;
	s->success_url = strdup(ok_url);
	s->cancel_url = cancel ? strdup(cancel) : NULL;
	s->client_reference_id = ref ? strdup(ref) : NULL;
	s->customer_email = email ? strdup(email) : NULL;
	return 0;
}

struct ps_session *checkout_create(json_t *p, int64_t created, struct ps_err *e)
{
	static const char *const keys[] = { "mode", "line_items", "success_url", "cancel_url",
					    "client_reference_id", "customer_email", "expires_at",
					    "metadata", "payment_intent_data", "expand",
					    "payment_method_types", "locale", "submit_type", NULL };
	static const char *const pid_keys[] = { "metadata", "description", NULL };
	struct ps_session *s = calloc(1, sizeof *s);
	json_t *pid = json_object_get(p, "payment_intent_data");

	if (!s) {
		err_set(e, 500, "api_error", NULL, "", "out of memory");
		return NULL;
	}
	if (param_allowed(p, "", keys, e) != 0 || session_fields(p, s, created, e) != 0 ||
	    lines_parse(json_object_get(p, "line_items"), s, e) != 0 ||
	    pm_types_parse(p, s->currency, &s->pm_types, e) != 0 ||
	    param_metadata(p, "metadata", "metadata", &s->metadata, e) != 0)
		goto fail;
	if (pid && !json_is_object(pid)) {
		err_set(e, 400, "invalid_request_error", "parameter_invalid_string",
			"payment_intent_data", "Invalid hash: payment_intent_data must be a hash");
		goto fail;
	}
	if ((pid && param_allowed(pid, "payment_intent_data", pid_keys, e) != 0) ||
	    param_metadata(pid, "metadata",
			   "payment_intent_data[metadata]", &s->pi_metadata, e) != 0)
		goto fail;
	if (state_session_add(s, created) != 0) {
		err_set(e, 500, "api_error", NULL, "", "out of memory");
		goto fail;
	}
	return s;
fail:
	state_session_free(s);
	return NULL;
}
