/*
 * api_parse.c: the API's pure layer: request bodies, the Idempotency-Key
 * header, the Content-Type and query strings, checked without a database
 * and keeping no allocation (tests/fuzz/fuzz_api.c drives it).
 */
#define _GNU_SOURCE
#include "api.h"
#include "api_int.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "controls.h"
#include "mail.h"
#include "queue.h"
#include "cron.h"
#include "tz.h"
#include "schedule.h"
#include "money.h"
#include "scans.h"
#include "text.h"
#include "timefmt.h"

static enum sd_result perr(struct api_error *err, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum sd_result perr(struct api_error *err, const char *field, const char *fmt, ...)
{
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	/* a field name from the request (an unknown key) is shown as ASCII */
	snprintf(err->field, sizeof err->field, "%s", field ? field : "");
	for (i = 0; err->field[i]; i++)
		if ((unsigned char)err->field[i] < 0x20 || (unsigned char)err->field[i] >= 0x7f)
			err->field[i] = '?';
	return SD_INVALID;
}

/* The body as a JSON object holding only the allowed keys. */
static enum sd_result parse_object(const char *body, size_t len, const char *const *allowed,
				   json_t **out, struct api_error *err)
{
	json_error_t je;
	json_t *o;
	const char *k;
	json_t *v;
	int i, ok;

	*out = NULL;
	if (!body || !len)
		return perr(err, NULL, "the body is empty; a JSON object is expected");
	if (!(o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je))) {
		if (json_error_code(&je) == json_error_out_of_memory) {
			perr(err, NULL, "out of memory");
			return err_set(SD_NOMEM, "out of memory reading the request");
		}
		return perr(err, NULL, "malformed JSON at line %d column %d: %.120s", je.line,
			    je.column, je.text);
	}
	if (!json_is_object(o)) {
		json_decref(o);
		return perr(err, NULL, "the body must be a JSON object");
	}
	json_object_foreach(o, k, v) {
		for (i = 0, ok = 0; allowed[i]; i++)
			ok |= strcmp(k, allowed[i]) == 0;
		if (!ok) {
			perr(err, k, "unknown field");
			json_decref(o);
			return SD_INVALID;
		}
	}
	*out = o;
	return SD_OK;
}

static enum sd_result get_string(json_t *o, const char *f, const char **s, struct api_error *err)
{
	json_t *v = json_object_get(o, f);

	if (!v)
		return perr(err, f, "%s is missing", f);
	if (!json_is_string(v))
		return perr(err, f, "%s must be a string", f);
	*s = json_string_value(v);
	return SD_OK;
}

static enum sd_result get_int(json_t *o, const char *f, int64_t *n, struct api_error *err)
{
	json_t *v = json_object_get(o, f);

	if (!v)
		return perr(err, f, "%s is missing", f);
	if (!json_is_integer(v))
		return perr(err, f, "%s must be an integer", f);
	*n = (int64_t)json_integer_value(v);
	return SD_OK;
}

/* an optional string field: *s NULL when absent or null */
static enum sd_result get_opt_string(json_t *o, const char *f, const char **s,
				     struct api_error *err)
{
	json_t *v = json_object_get(o, f);

	*s = NULL;
	if (!v || json_is_null(v))
		return SD_OK;
	return get_string(o, f, s, err);
}

/* text_field_valid, its message moved into err. */
static enum sd_result text_field(const char *f, const char *s, struct api_error *err)
{
	if (text_field_valid(f, s) != SD_OK)
		return perr(err, f, "%s", err_msg());
	return SD_OK;
}

void api_parse_free(void *json)
{
	json_decref(json);
}

enum sd_result api_parse_order(const char *body, size_t len, struct api_order *out,
			       struct api_error *err)
{
	static const char *const allowed[] = { "event_id", "name", "email", "seats", "payment",
					       NULL };
	json_t *o;
	enum sd_result r;

	memset(out, 0, sizeof *out);
	memset(err, 0, sizeof *err);
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if ((r = get_int(o, "event_id", &out->o.event_id, err)) != SD_OK ||
	    (r = get_string(o, "name", &out->o.name, err)) != SD_OK ||
	    (r = get_opt_string(o, "email", &out->o.email, err)) != SD_OK ||
	    (r = get_opt_string(o, "payment", &out->o.payment, err)) != SD_OK ||
	    (r = get_int(o, "seats", &out->o.seats, err)) != SD_OK)
		goto fail;
	if (out->o.event_id < 1) {
		r = perr(err, "event_id", "event_id must be a positive number");
		goto fail;
	}
	if ((r = text_field("name", out->o.name, err)) != SD_OK)
		goto fail;
	if (out->o.email &&
	    (strlen(out->o.email) > 254 || mail_address_valid(out->o.email) != SD_OK)) {
		r = perr(err, "email", "email must be an address like name@example.com (or "
			 "absent: a walk-up buyer's tickets are printed)");
		goto fail;
	}
	if (out->o.payment && order_payment_valid(out->o.payment) != SD_OK) {
		r = perr(err, "payment", "%s", err_msg());
		goto fail;
	}
	if (out->o.seats < 1 || out->o.seats > TICKETS_SEATS_MAX) {
		r = perr(err, "seats", "seats must be between 1 and %d", TICKETS_SEATS_MAX);
		goto fail;
	}
	out->json = o;
	return SD_OK;
fail:
	json_decref(o);
	memset(&out->o, 0, sizeof out->o);
	return r;
}

/* a time a person gives (timefmt_parse), its message moved into err */
static enum sd_result get_time(json_t *o, const char *f, int64_t *ms, struct api_error *err)
{
	const char *s;
	enum sd_result r;

	if ((r = get_string(o, f, &s, err)) != SD_OK)
		return r;
	if (timefmt_parse(s, ms) != SD_OK)
		return perr(err, f, "%s", err_msg());
	return SD_OK;
}

static enum sd_result capacity_field(json_t *o, int64_t *n, struct api_error *err)
{
	enum sd_result r;

	if ((r = get_int(o, "capacity", n, err)) != SD_OK)
		return r;
	if (*n < 1 || *n > 1000000)
		return perr(err, "capacity", "capacity must be between 1 and 1000000");
	return SD_OK;
}

/* price_fields: "price" ("25.00": a string, as a person writes it; null:
 * none) and "currency" ("EUR"), both or neither.  [out] *present: either
 * was given. */
static enum sd_result price_fields(json_t *o, int64_t *minor, char *code, int *present,
				   struct api_error *err)
{
	json_t *p = json_object_get(o, "price"), *cur = json_object_get(o, "currency");

	*present = p || cur;
	*minor = 0;
	code[0] = '\0';
	if (!*present)
		return SD_OK;
	if (p && json_is_null(p) && (!cur || json_is_null(cur)))
		return SD_OK;	/* no price: the shop does not sell it */
	if (!p || !json_is_string(p))
		return perr(err, "price", "price must be a string of digits like \"25.00\", with "
			    "its currency (or null: no price)");
	if (!cur || !json_is_string(cur))
		return perr(err, "currency", "currency must be an ISO 4217 code like \"EUR\", "
			    "with the price");
	if (event_price_parse(json_string_value(p), json_string_value(cur), minor, code) != SD_OK)
		return perr(err, money_exponent(code) < 0 || strstr(err_msg(), "no payments in")
			    ? "currency" : "price", "%s", err_msg());
	return SD_OK;
}

enum sd_result api_parse_event(const char *body, size_t len, struct api_event *out,
			       struct api_error *err)
{
	static const char *const allowed[] = { "name", "venue", "starts_at", "capacity", "price",
					       "currency", NULL };
	int priced;
	json_t *o;
	enum sd_result r;

	memset(out, 0, sizeof *out);
	memset(err, 0, sizeof *err);
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if ((r = get_string(o, "name", &out->e.name, err)) != SD_OK ||
	    (r = text_field("name", out->e.name, err)) != SD_OK ||
	    (r = get_string(o, "venue", &out->e.venue, err)) != SD_OK ||
	    (r = text_field("venue", out->e.venue, err)) != SD_OK ||
	    (r = get_time(o, "starts_at", &out->e.starts_at, err)) != SD_OK ||
	    (r = capacity_field(o, &out->e.capacity, err)) != SD_OK ||
	    (r = price_fields(o, &out->e.price_minor, out->e.currency, &priced, err)) != SD_OK) {
		json_decref(o);
		memset(&out->e, 0, sizeof out->e);
		return r;
	}
	out->json = o;
	return SD_OK;
}

enum sd_result api_parse_event_change(const char *body, size_t len,
				      struct api_event_change *out, struct api_error *err)
{
	static const char *const allowed[] = { "name", "venue", "starts_at", "capacity", "price",
					       "currency", "reminders", NULL };
	struct event_change *c = &out->c;
	json_t *rem;
	json_t *o;
	enum sd_result r = SD_OK;
	int priced = 0;

	memset(out, 0, sizeof *out);
	memset(err, 0, sizeof *err);
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if (json_object_get(o, "name") && (r = get_string(o, "name", &c->name, err)) == SD_OK &&
	    (r = text_field("name", c->name, err)) == SD_OK)
		c->set |= EVENT_SET_NAME;
	if (r == SD_OK && json_object_get(o, "venue") &&
	    (r = get_string(o, "venue", &c->venue, err)) == SD_OK &&
	    (r = text_field("venue", c->venue, err)) == SD_OK)
		c->set |= EVENT_SET_VENUE;
	if (r == SD_OK && json_object_get(o, "starts_at") &&
	    (r = get_time(o, "starts_at", &c->starts_at, err)) == SD_OK)
		c->set |= EVENT_SET_STARTS;
	if (r == SD_OK && json_object_get(o, "capacity") &&
	    (r = capacity_field(o, &c->capacity, err)) == SD_OK)
		c->set |= EVENT_SET_CAPACITY;
	if (r == SD_OK && (r = price_fields(o, &c->price_minor, c->currency, &priced, err)) == SD_OK &&
	    priced)
		c->set |= EVENT_SET_PRICE;
	if (r == SD_OK && (rem = json_object_get(o, "reminders"))) {
		if (!json_is_boolean(rem))
			r = perr(err, "reminders", "reminders must be true or false");
		c->reminders = json_is_true(rem);
		c->set |= EVENT_SET_REMINDERS;
	}
	if (r == SD_OK && !c->set)
		r = perr(err, NULL, "nothing to change: give name, venue, starts_at, capacity, "
			 "price or reminders");
	if (r != SD_OK) {
		json_decref(o);
		memset(c, 0, sizeof *c);
		return r;
	}
	out->json = o;
	return SD_OK;
}

enum sd_result api_parse_scan(const char *body, size_t len, struct api_scan *out,
			      struct api_error *err)
{
	static const char *const allowed[] = { "code", "nonce", NULL };
	const char *s = NULL, *nonce = NULL;
	const unsigned char *p;
	json_t *o;
	enum sd_result r;

	memset(out, 0, sizeof *out);
	memset(err, 0, sizeof *err);
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if ((r = get_string(o, "code", &s, err)) == SD_OK && strlen(s) < CODE_TEXT_MAX)
		memcpy(out->code, s, strlen(s) + 1);	/* a longer one stays "": invalid */
	if (r == SD_OK && (r = get_opt_string(o, "nonce", &nonce, err)) == SD_OK && nonce) {
		for (p = (const unsigned char *)nonce; *p; p++)
			if (*p <= ' ' || *p >= 127)
				break;
		if (!*nonce || *p || strlen(nonce) > SCAN_NONCE_MAX)
			r = perr(err, "nonce", "nonce must be 1 to %d printable ASCII characters "
				 "without spaces", SCAN_NONCE_MAX);
		else
			memcpy(out->nonce, nonce, strlen(nonce) + 1);
	}
	json_decref(o);
	return r;
}

enum sd_result api_parse_email(const char *body, size_t len, char email[256],
			       struct api_error *err)
{
	static const char *const allowed[] = { "email", NULL };
	const char *s = NULL;
	json_t *o;
	enum sd_result r;

	email[0] = '\0';
	memset(err, 0, sizeof *err);
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if ((r = get_string(o, "email", &s, err)) == SD_OK) {
		if (strlen(s) >= 256 || mail_address_valid(s) != SD_OK)
			r = perr(err, "email", "email is not an address like name@example.com");
		else
			memcpy(email, s, strlen(s) + 1);
	}
	json_decref(o);
	return r;
}

enum sd_result api_parse_cancel(const char *body, size_t len,
				char reason[ORDER_REASON_MAX + 1], struct api_error *err)
{
	static const char *const allowed[] = { "reason", NULL };
	const char *s = NULL;
	json_t *o;
	enum sd_result r;

	reason[0] = '\0';
	memset(err, 0, sizeof *err);
	if (!body || !len)	/* no body: no reason */
		return SD_OK;
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if ((r = get_opt_string(o, "reason", &s, err)) == SD_OK && s && *s &&
	    (r = text_field("reason", s, err)) == SD_OK) {
		if (strlen(s) > ORDER_REASON_MAX)
			r = perr(err, "reason", "reason must be at most %d bytes", ORDER_REASON_MAX);
		else
			memcpy(reason, s, strlen(s) + 1);
	}
	json_decref(o);
	return r;
}

enum sd_result api_parse_resend(const char *body, size_t len, struct api_error *err)
{
	static const char *const allowed[] = { NULL };
	json_t *o;
	enum sd_result r;

	memset(err, 0, sizeof *err);
	if (!body || !len)
		return SD_OK;
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	json_decref(o);
	return SD_OK;
}

int api_key_valid(const char *key)
{
	size_t n = 0;

	if (!key)
		return 0;
	for (; key[n]; n++)
		if ((unsigned char)key[n] <= ' ' || (unsigned char)key[n] >= 127)
			return 0;
	return n >= 1 && n <= TICKETS_KEY_MAX;
}

/* sf_token: s[0..n) is an sf-token (RFC 8941 3.3.4): ALPHA or "*", then
 * tchar, ":" or "/" */
static int sf_token(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '*'))
		return 0;
	for (i = 1; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("!#$%&'*+-.^_`|~:/", s[i]))
			return 0;
	return 1;
}

/*
 * The Idempotency-Key header is an Item Structured Header holding an
 * sf-string (RFC 8941 3.3.3; draft-ietf-httpapi-idempotency-key-header):
 * "abc", with \" and \\ the only escapes.  A bare sf-token (abc) is taken
 * as the same key, as clients have sent it before: both name key abc.  Any
 * other item (a byte sequence :YWJj:, a boolean ?1, a number, parameters)
 * is no key.
 */
int api_key_parse(const char *hdr, char key[TICKETS_KEY_MAX + 1])
{
	size_t n = 0;
	const char *p = hdr;

	key[0] = '\0';
	if (!hdr)
		return 0;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p != '"') {
		size_t len = strlen(p);

		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		if (len > TICKETS_KEY_MAX || !sf_token(p, len))
			return 0;
		memcpy(key, p, len);
		key[len] = '\0';
		return api_key_valid(key);
	}
	for (p++; *p != '"'; p++) {
		unsigned char ch = (unsigned char)*p;

		if (ch == '\\') {
			p++;
			if (*p != '"' && *p != '\\')
				return 0;	/* an escape of anything else, or the end */
			ch = (unsigned char)*p;
		} else if (ch < 0x20 || ch > 0x7e) {
			return 0;		/* the end before the closing quote, or not ASCII */
		}
		if (n == TICKETS_KEY_MAX)
			return 0;
		key[n++] = (char)ch;
	}
	key[n] = '\0';
	for (p++; *p == ' ' || *p == '\t'; p++)
		;
	/* a space inside the key is allowed by sf-string; the stored key is
	 * what the client meant, but keys with spaces stay refused as before */
	return *p == '\0' && api_key_valid(key);
}

int api_content_type_json(const char *ct)
{
	size_t n = strlen("application/json");

	if (!ct)
		return 0;
	while (*ct == ' ')
		ct++;
	if (strncasecmp(ct, "application/json", n) != 0)
		return 0;
	ct += n;
	while (*ct == ' ')
		ct++;
	return *ct == '\0' || *ct == ';';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode s[0..n) into buf; -1 when malformed, too long or it holds a NUL. */
int api_pct_decode(const char *s, size_t n, int plus_space, char *buf, size_t size)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		int c = (unsigned char)s[i];
		if (c == '%') {
			int hi, lo;
			if (i + 2 >= n)
				return -1;
			hi = hexval(s[i + 1]);
			lo = hexval(s[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			c = hi * 16 + lo;
			i += 2;
		} else if (c == '+' && plus_space) {
			c = ' ';
		}
		if (c == 0 || o + 1 >= size)
			return -1;
		buf[o++] = (char)c;
	}
	buf[o] = '\0';
	return 0;
}

int api_query_get(const char *query, const char *name, char *buf, size_t size)
{
	const char *p = query;
	size_t nlen = strlen(name);

	while (p && *p) {
		const char *end = strchr(p, '&'), *eq;
		size_t len = end ? (size_t)(end - p) : strlen(p);

		eq = memchr(p, '=', len);
		if (eq && (size_t)(eq - p) == nlen && strncmp(p, name, nlen) == 0)
			return api_pct_decode(eq + 1, len - nlen - 1, 1, buf, size) ? -1 : 1;
		if (!eq && len == nlen && strncmp(p, name, nlen) == 0) {
			buf[0] = '\0';
			return 1;
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}


/* an optional integer 0..max: *n 0 when absent or null */
static enum sd_result get_opt_limit(json_t *o, const char *f, int64_t max, int64_t *n,
				    struct api_error *err)
{
	json_t *v = json_object_get(o, f);
	enum sd_result r;

	*n = 0;
	if (!v || json_is_null(v))
		return SD_OK;
	if ((r = get_int(o, f, n, err)) != SD_OK)
		return r;
	if (*n < 0 || *n > max)
		return perr(err, f, "%s must be 0 (none) to %lld", f, (long long)max);
	return SD_OK;
}

enum sd_result api_parse_limits(const char *body, size_t len, struct control_limits *l,
				struct api_error *err)
{
	static const char *const allowed[] = { "rate", "concurrency", "box_concurrency", NULL };
	const char *rate = NULL;
	json_t *o;
	enum sd_result r;

	memset(l, 0, sizeof *l);
	memset(err, 0, sizeof *err);
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if ((r = get_opt_string(o, "rate", &rate, err)) == SD_OK && rate &&
	    controls_rate_parse(rate, l) != SD_OK)
		r = perr(err, "rate", "%s", err_msg());
	if (r == SD_OK)
		r = get_opt_limit(o, "concurrency", CONTROLS_LIMIT_MAX, &l->concurrency, err);
	if (r == SD_OK)
		r = get_opt_limit(o, "box_concurrency", CONTROLS_LIMIT_MAX, &l->box_concurrency, err);
	json_decref(o);
	return r;
}

/* schedule_when: "every" or "cron" (with "timezone") of o into s */
static enum sd_result schedule_when(json_t *o, struct schedule *s, struct api_error *err)
{
	const char *every = NULL, *cron = NULL, *zone = NULL;
	struct tz *z = NULL;
	enum sd_result r;

	if ((r = get_opt_string(o, "every", &every, err)) != SD_OK ||
	    (r = get_opt_string(o, "cron", &cron, err)) != SD_OK ||
	    (r = get_opt_string(o, "timezone", &zone, err)) != SD_OK)
		return r;
	if (!every == !cron)
		return perr(err, every ? "cron" : "every", "give every (a period: 30s, 5m, 1h, "
			    "1d) or cron (\"0 9 * * MON\"), one of them");
	if (every && (text_duration_ms(every, &s->every_ms) != 0 ||
		      s->every_ms < SCHEDULE_EVERY_MIN_MS || s->every_ms > SCHEDULE_EVERY_MAX_MS))
		return perr(err, "every", "every is a period from 1s to 366d: 30s, 5m, 1h, 1d");
	if (cron && (strlen(cron) >= sizeof s->cron || cron_parse(cron, &(struct cron){ 0 })))
		return perr(err, "cron", "%s", strlen(cron) >= sizeof s->cron ?
			    "a cron expression is at most 200 bytes" : err_msg());
	if (zone && (!cron || strlen(zone) >= sizeof s->timezone))
		return perr(err, "timezone", "%s", cron ? "a zone's name is at most 64 bytes" :
			    "a timezone goes with cron; every runs on the epoch's multiples, UTC");
	if (zone && tz_load(zone, &z) != SD_OK)
		return perr(err, "timezone", "%s", err_msg());
	tz_free(z);
	snprintf(s->cron, sizeof s->cron, "%s", cron ? cron : "");
	snprintf(s->timezone, sizeof s->timezone, "%s", zone ? zone : "");
	return SD_OK;
}

enum sd_result api_parse_schedule(const char *body, size_t len, struct schedule *s,
				  struct api_error *err)
{
	static const char *const allowed[] = { "name", "kind", "payload", "every", "cron",
					       "timezone", "missed", NULL };
	const char *name = NULL, *kind = NULL, *missed = NULL;
	json_t *o, *payload;
	enum sd_result r;

	memset(s, 0, sizeof *s);
	memset(err, 0, sizeof *err);
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if ((r = get_string(o, "name", &name, err)) == SD_OK && schedule_name_valid(name) != SD_OK)
		r = perr(err, "name", "%s", err_msg());
	if (r == SD_OK && (r = get_string(o, "kind", &kind, err)) == SD_OK &&
	    queue_kind_valid(kind) != SD_OK)
		r = perr(err, "kind", "%s", err_msg());
	if (r == SD_OK)
		r = schedule_when(o, s, err);
	if (r == SD_OK && (r = get_opt_string(o, "missed", &missed, err)) == SD_OK && missed &&
	    strcmp(missed, "once") != 0 && strcmp(missed, "skip") != 0)
		r = perr(err, "missed", "missed is once or skip");
	payload = json_object_get(o, "payload");
	if (r == SD_OK && payload && !json_is_object(payload))
		r = perr(err, "payload", "payload must be a JSON object");
	if (r == SD_OK && payload &&
	    !(s->payload = json_dumps(payload, JSON_COMPACT | JSON_ENSURE_ASCII)))
		r = err_set(SD_NOMEM, "out of memory");
	if (r == SD_OK) {
		snprintf(s->name, sizeof s->name, "%s", name);
		snprintf(s->kind, sizeof s->kind, "%s", kind);
		s->skip_missed = missed && strcmp(missed, "skip") == 0;
	}
	json_decref(o);
	return r;
}
