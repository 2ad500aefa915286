/*
 * api_orders.c: orders, taken under the client's Idempotency-Key, and their
 * PDFs.
 *
 * Invariants (api.h): the order, its tickets, its outbox rows and the
 * stored answer commit in one transaction; a key is in flight in this
 * process from before that transaction to after it ends, and a second
 * request with it meanwhile is 409 with Retry-After; only a 201 is stored.
 */
#define _GNU_SOURCE
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob.h"
#include "clientkey.h"
#include "clock.h"
#include "failpoint.h"
#include "tickets.h"

/* ======================== the keys in flight ============================= */

/* inflight_add: 1 when key was free and is now this request's; 0 when
 * another request holds it; -1 when out of memory. */
static int inflight_add(struct api *a, const char *key)
{
	int i, r = 1;
	char *k;

	pthread_mutex_lock(&a->mu);
	for (i = 0; i < a->n_inflight; i++)
		if (strcmp(a->inflight[i], key) == 0) {
			r = 0;
			goto out;
		}
	if (a->n_inflight == a->cap_inflight) {
		int cap = a->cap_inflight ? a->cap_inflight * 2 : 16;
		char **v = realloc(a->inflight, (size_t)cap * sizeof *v);
		if (!v) {
			r = -1;
			goto out;
		}
		a->inflight = v;
		a->cap_inflight = cap;
	}
	if (!(k = strdup(key))) {
		r = -1;
		goto out;
	}
	a->inflight[a->n_inflight++] = k;
out:
	pthread_mutex_unlock(&a->mu);
	return r;
}

static void inflight_remove(struct api *a, const char *key)
{
	int i;

	pthread_mutex_lock(&a->mu);
	for (i = 0; i < a->n_inflight; i++)
		if (strcmp(a->inflight[i], key) == 0) {
			free(a->inflight[i]);
			a->inflight[i] = a->inflight[--a->n_inflight];
			break;
		}
	pthread_mutex_unlock(&a->mu);
}

/* ======================== orders ========================================= */

/* order_add's refusal as an answer: no event 404, no seats left 422, other
 * input 400; a failure of the database is not the client's. */
static void order_refused(struct call *c, enum sd_result r)
{
	if (r == SD_NOT_FOUND)
		api_res_fail(c->res, 404, err_msg(), "event_id");
	else if (r == SD_INVALID && (strstr(err_msg(), "sold out") || strstr(err_msg(), "left")))
		api_res_fail(c->res, 422, err_msg(), "seats");
	else if (r == SD_INVALID)
		api_res_fail(c->res, 400, err_msg(), NULL);
	else
		api_res_internal(c->res, c->req, r);
}

/* the answer stored under the key, or the 422 of a key used with another
 * body, into c->res */
static void key_answer(struct call *c, struct clientkey_hit *hit)
{
	if (hit->same) {
		api_res_set(c->res, hit->status, "application/json", hit->body, strlen(hit->body));
		hit->body = NULL;
	} else {
		api_res_fail(c->res, 422, "this Idempotency-Key was used with a different "
			     "request body", "Idempotency-Key");
	}
}

/* the key in flight here, or the 409 (or 500) that says why not: 1 when held */
static int key_hold(struct call *c, const char *key)
{
	int held = inflight_add(c->a, key);

	if (held < 0)
		api_res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
	else if (!held) {
		api_res_fail(c->res, 409, "a request with this Idempotency-Key is still running",
			     "Idempotency-Key");
		snprintf(c->res->retry_after, sizeof c->res->retry_after, "%s",
			 API_RETRY_AFTER_S);
	}
	return held > 0;
}

/* the order, its stored answer and the client's key in one transaction */
void api_post_order(struct call *c)
{
	struct clientkey_hit hit = { 0 };
	struct api_order po;
	struct api_error err;
	char hash[CODE_SHA256_HEX + 1], public_id[ORDER_ID_MAX], key[TICKETS_KEY_MAX + 1];
	char *body = NULL;
	enum sd_result r;
	int64_t now;
	int replayed = 0;

	if (!c->req->idempotency_key || !*c->req->idempotency_key) {
		api_res_fail(c->res, 400, "the Idempotency-Key header is required", "Idempotency-Key");
		return;
	}
	if (!api_key_parse(c->req->idempotency_key, key)) {
		api_res_fail(c->res, 400, "the Idempotency-Key must be a string of 1 to 200 "
			     "printable ASCII characters, quoted (\"abc\") or bare (abc) without "
			     "spaces", "Idempotency-Key");
		return;
	}
	if ((r = api_parse_order(c->req->body, c->req->body_len, &po, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	code_sha256_hex(c->req->body, c->req->body_len, hash);
	if (!key_hold(c, key)) {
		api_parse_free(po.json);
		return;
	}
	now = clock_now_ms();
	if ((r = db_begin(c->db)) != SD_OK)
		goto out;
	if ((r = clientkey_lookup(c->db, key, hash, now, &hit)) != SD_OK || hit.found)
		goto end;	/* a replay or a 422: nothing to write */
	/* the client key lives in api_keys (it expires); orders.idempotency_key
	 * stays the CLI's */
	if ((r = order_add(c->db, &po.o, public_id, &replayed)) != SD_OK)
		goto end;
	failpoint(FP_API_ORDER_TX);
	body = api_json_take(json_pack("{s:s, s:I, s:s, s:s, s:I, s:I}", "id", public_id,
					"event_id", (json_int_t)po.o.event_id, "name", po.o.name,
					"email", po.o.email, "seats", (json_int_t)po.o.seats,
					"created_at", (json_int_t)now));
	if (!body) {
		r = err_set(SD_NOMEM, "out of memory");
		goto end;
	}
	r = clientkey_put(c->db, key, hash, 201, body, now, c->a->idem_ttl_ms);
end:
	r = db_end(c->db, r);
out:
	inflight_remove(c->a, key);
	api_parse_free(po.json);
	if (r != SD_OK) {
		free(body);
		free(hit.body);
		order_refused(c, r);
		return;
	}
	if (hit.found)
		key_answer(c, &hit);
	else if (body)		/* committed: the answer just stored */
		api_res_set(c->res, 201, "application/json", body, strlen(body));
	free(hit.body);
}

static void order_recent_row(const struct order_recent *o, void *arg)
{
	json_array_append_new(arg, json_pack("{s:s, s:I, s:I, s:b, s:s, s:I}", "id", o->id,
					     "event_id", (json_int_t)o->event_id, "seats",
					     (json_int_t)o->seats, "pdf", o->pdf_stored, "email",
					     o->email, "created_at", (json_int_t)o->created_at));
}

/* GET /v1/orders?recent=N (1..100, default 20): the newest orders. */
void api_get_orders(struct call *c)
{
	char buf[16];
	long n = 20;
	int has;
	json_t *orders;
	enum sd_result r;

	if ((has = api_query_get(c->req->query, "recent", buf, sizeof buf)) != 0) {
		char *end = NULL;
		n = has > 0 ? strtol(buf, &end, 10) : 0;
		if (has < 0 || !end || *end || end == buf || n < 1 || n > 100) {
			api_res_fail(c->res, 400, "recent must be between 1 and 100", "recent");
			return;
		}
	}
	orders = json_array();
	if ((r = tickets_recent_orders(c->db, (int)n, order_recent_row, orders)) != SD_OK) {
		json_decref(orders);
		api_res_internal(c->res, c->req, r);
		return;
	}
	api_res_json(c->res, 200, json_pack("{s:o}", "orders", orders));
}

static int order_id_valid(const char *s)
{
	size_t n = 0;

	if (!s)
		return 0;
	for (; s[n]; n++)
		if (!((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= '0' && s[n] <= '9') ||
		      (s[n] >= 'a' && s[n] <= 'z')))
			return 0;
	return n >= 1 && n < ORDER_ID_MAX;
}

void api_get_order(struct call *c)
{
	char *out = NULL;
	enum sd_result r;

	if (!order_id_valid(c->id)) {
		api_res_fail(c->res, 404, "no such order", NULL);
		return;
	}
	if ((r = order_show(c->db, c->id, 1, &out)) == SD_NOT_FOUND)
		api_res_fail(c->res, 404, "no such order", NULL);
	else if (r != SD_OK)
		api_res_internal(c->res, c->req, r);
	else
		api_res_set(c->res, 200, "application/json", out, strlen(out));
}

void api_get_order_pdf(struct call *c)
{
	char *out = NULL;
	unsigned char *pdf = NULL, *p;
	size_t len = 0;
	json_t *o;
	const char *key;
	enum sd_result r;

	if (!order_id_valid(c->id)) {
		api_res_fail(c->res, 404, "no such order", NULL);
		return;
	}
	if ((r = order_show(c->db, c->id, 1, &out)) == SD_NOT_FOUND) {
		api_res_fail(c->res, 404, "no such order", NULL);
		return;
	}
	if (r != SD_OK) {
		api_res_internal(c->res, c->req, r);
		return;
	}
	o = json_loads(out, 0, NULL);
	free(out);
	key = json_string_value(json_object_get(o, "pdf_key"));
	if (!json_is_true(json_object_get(o, "pdf_stored")) || !key) {
		json_decref(o);
		api_res_fail(c->res, 404, "the tickets are not rendered yet", NULL);
		return;
	}
	r = blob_get(c->a->blobs, key, &pdf, &len);
	json_decref(o);
	if (r == SD_NOT_FOUND) {
		api_res_fail(c->res, 404, "the tickets are not rendered yet", NULL);
		return;
	}
	if (r != SD_OK) {
		api_res_internal(c->res, c->req, r);
		return;
	}
	if (!(p = realloc(pdf, len + 1))) {
		free(pdf);
		api_res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	p[len] = '\0';
	api_res_set(c->res, 200, "application/pdf", (char *)p, len);
}

