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
#include "db_group.h"
#include "failpoint.h"
#include "money.h"
#include "orders.h"
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

/* ======================== writes under a client key ====================== */

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

/* One keyed write as the group commits it (db_group.h): the key's lookup,
 * the write and the stored answer, on the group's connection. */
struct keyed_tx {
	struct call *c;
	const struct api_keyed *k;
	const char *key, *hash;		/* NULL: no key */
	int64_t now;
	struct clientkey_hit hit;
	int status;
	char *body;			/* the answer, when the write made one */
};

static enum sd_result keyed_tx(struct db *db, void *arg)
{
	struct keyed_tx *t = arg;
	struct call *c = t->c;
	struct db *own = c->db;
	enum sd_result r;

	c->db = db;
	if ((r = db_begin(db)) != SD_OK)
		goto out;
	if (t->key && ((r = clientkey_lookup(db, t->key, t->hash, t->now, &t->hit)) != SD_OK ||
		       t->hit.found))
		goto end;	/* a replay or a 422: nothing to write */
	if ((r = t->k->write(c, t->k->arg, &t->status, &t->body)) != SD_OK)
		goto end;
	if (!t->body)
		r = err_set(SD_NOMEM, "out of memory");
	else if (t->key && t->status >= 200 && t->status < 300)
		r = clientkey_put(db, t->key, t->hash, t->status, t->body, t->now,
				  c->a->idem_ttl_ms);
end:
	r = db_end(db, r);
out:
	c->db = own;
	return r;
}

/* keyed_hash: the SHA-256 that says "the same request" under a key: the
 * same body bytes, and for any route but POST /v1/orders (whose stored keys
 * hash the body alone) the same method and path.  0, or -1 when out of
 * memory (answered). */
static int keyed_hash(struct call *c, const struct api_keyed *k, char *hash)
{
	char *all = NULL;
	int n;

	if (k->body_only) {
		code_sha256_hex(c->req->body, c->req->body_len, hash);
		return 0;
	}
	n = asprintf(&all, "%s %s\n%.*s", c->req->method, c->req->path, (int)c->req->body_len,
		     c->req->body ? c->req->body : "");
	if (n < 0) {
		api_res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return -1;
	}
	code_sha256_hex(all, (size_t)n, hash);
	free(all);
	return 0;
}

void api_keyed_write(struct call *c, const struct api_keyed *k)
{
	char hash[CODE_SHA256_HEX + 1], key[TICKETS_KEY_MAX + 1];
	const char *hdr = c->req->idempotency_key;
	struct keyed_tx t = { c, k, NULL, NULL, clock_now_ms(), { 0 }, 0, NULL };
	enum sd_result r;
	int keyed = hdr && *hdr;

	if (!keyed && k->key_required) {
		api_res_fail(c->res, 400, "the Idempotency-Key header is required", "Idempotency-Key");
		return;
	}
	if (keyed && !api_key_parse(hdr, key)) {
		api_res_fail(c->res, 400, "the Idempotency-Key must be a string of 1 to 200 "
			     "printable ASCII characters, quoted (\"abc\") or bare (abc) without "
			     "spaces", "Idempotency-Key");
		return;
	}
	if (keyed) {
		if (keyed_hash(c, k, hash) != 0 || !key_hold(c, key))
			return;
		t.key = key;
		t.hash = hash;
	}
	/* answered only once the commit that holds it has returned */
	r = db_group_run(c->a->group, c->db, keyed_tx, &t);
	if (keyed)
		inflight_remove(c->a, key);
	if (r != SD_OK) {
		free(t.body);
		free(t.hit.body);
		k->refused(c, r);
		return;
	}
	if (t.hit.found)
		key_answer(c, &t.hit);
	else		/* committed: the answer just stored */
		api_res_set(c->res, t.status, "application/json", t.body, strlen(t.body));
	free(t.hit.body);
}

/* ======================== orders ========================================= */

/* order_add's refusal as an answer: no event 404, no seats left 422, other
 * input 400; a failure of the database is not the client's. */
static void order_refused(struct call *c, enum sd_result r)
{
	if (r == SD_NOT_FOUND)
		api_res_fail(c->res, 404, err_msg(), "event_id");
	else if (r == SD_SOLD_OUT)
		api_res_fail(c->res, 422, err_msg(), "seats");
	else if (r == SD_CONFLICT)	/* its sales are closed */
		api_res_fail(c->res, 409, err_msg(), "event_id");
	else if (r == SD_INVALID)
		api_res_fail(c->res, 400, err_msg(), NULL);
	else
		api_res_internal(c->res, c->req, r);
}

/* the order and its answer, inside api_keyed_write's transaction */
static enum sd_result order_write(struct call *c, void *arg, int *status, char **body)
{
	struct api_order *po = arg;
	char public_id[ORDER_ID_MAX];
	enum sd_result r;
	int replayed = 0;

	/* the client key lives in api_keys (it expires); orders.idempotency_key
	 * stays the CLI's */
	if ((r = order_add(c->db, &po->o, public_id, &replayed)) != SD_OK)
		return r;
	failpoint(FP_API_ORDER_TX);
	*status = 201;
	*body = api_json_take(json_pack("{s:s, s:I, s:s, s:o, s:I, s:I, s:o}", "id", public_id,
					 "event_id", (json_int_t)po->o.event_id, "name", po->o.name,
					 "email", po->o.email ? json_string(po->o.email) : json_null(),
					 "seats", (json_int_t)po->o.seats,
					 "created_at", (json_int_t)clock_now_ms(), "payment",
					 po->o.payment ? json_string(po->o.payment) : json_null()));
	return SD_OK;
}

/* the order, its stored answer and the client's key in one transaction */
void api_post_order(struct call *c)
{
	struct api_order po;
	struct api_error err;
	struct api_keyed k = { order_write, &po, order_refused, 1, 1 };
	enum sd_result r;

	if (!c->req->idempotency_key || !*c->req->idempotency_key) {
		api_res_fail(c->res, 400, "the Idempotency-Key header is required", "Idempotency-Key");
		return;
	}
	if ((r = api_parse_order(c->req->body, c->req->body_len, &po, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	api_keyed_write(c, &k);
	api_parse_free(po.json);
}

/* ======================== lists and the search =========================== */

static void order_recent_row(const struct order_recent *o, void *arg)
{
	json_array_append_new(arg, json_pack("{s:s, s:I, s:I, s:b, s:s, s:I, s:o, s:o, s:b}", "id",
					     o->id, "event_id", (json_int_t)o->event_id, "seats",
					     (json_int_t)o->seats, "pdf", o->pdf_stored, "email",
					     o->email, "created_at", (json_int_t)o->created_at,
					     "name", api_json_text(o->name), "email_address",
					     o->email_address[0] ? api_json_text(o->email_address)
								 : json_null(), "cancelled",
					     o->cancelled));
}

/* GET /v1/orders?recent=N (1..100, default 20): the newest orders;
 * ?q=TEXT: the orders an id, an address or a part of a name finds. */
void api_get_orders(struct call *c)
{
	char buf[ORDER_QUERY_MAX * 3 + 1];
	long n = 20;
	int has, q;
	json_t *orders;
	enum sd_result r;

	if ((q = api_query_get(c->req->query, "q", buf, sizeof buf)) != 0) {
		if (q < 0 || !*buf) {
			api_res_fail(c->res, 400, "q must be 1 to 200 bytes of text", "q");
			return;
		}
	} else if ((has = api_query_get(c->req->query, "recent", buf, sizeof buf)) != 0) {
		char *end = NULL;
		n = has > 0 ? strtol(buf, &end, 10) : 0;
		if (has < 0 || !end || *end || end == buf || n < 1 || n > 100) {
			api_res_fail(c->res, 400, "recent must be between 1 and 100", "recent");
			return;
		}
	}
	orders = json_array();
	r = q ? order_search(c->db, buf, order_recent_row, orders)
	      : order_recent(c->db, (int)n, order_recent_row, orders);
	if (r != SD_OK) {
		json_decref(orders);
		if (r == SD_INVALID)
			api_res_fail(c->res, 400, err_msg(), "q");
		else
			api_res_internal(c->res, c->req, r);
		return;
	}
	api_res_json(c->res, 200, json_pack("{s:o}", "orders", orders));
}

/* ======================== one order ====================================== */

int api_order_id_valid(const char *s)
{
	char id[ORDER_ID_MAX];

	return order_id_norm(s, id) == SD_OK;	/* the one rule, in any case */
}

static const char *const ticket_states[] = { "valid", "admitted", "cancelled" };

static json_t *ms_or_null(int64_t ms)
{
	return ms ? json_integer(ms) : json_null();
}


/* the refund an order owes, or null: status is the provider's word
 * ("pending"), failed_at set when it could not pay it (owed at the window
 * from then on) */
static json_t *refund_json(const struct order_detail *d)
{
	if (!d->refund.owed)
		return json_null();
	return json_pack("{s:I, s:s, s:o, s:o, s:o, s:o, s:o}", "amount_minor",
			 (json_int_t)d->refund.amount_minor, "via",
			 d->refund.window || d->refund.failed_at ? "window" : "provider", "done_at",
			 ms_or_null(d->refund.done_at), "provider_id",
			 d->refund.provider_id[0] ? api_json_text(d->refund.provider_id)
						  : json_null(),
			 "status", d->refund.status[0] ? json_string(d->refund.status) : json_null(),
			 "failed_at", ms_or_null(d->refund.failed_at), "failure",
			 d->refund.failure[0] ? api_json_text(d->refund.failure) : json_null());
}

/* money that went back outside the box, or null: refunded_minor and
 * refunded (decimal text) what the provider says is refunded in all */
static json_t *back_json(const struct order_detail *d)
{
	char text[MONEY_TEXT_MAX];
	int refunded = d->back.refunded_minor >= 0;

	if (!refunded && !d->back.disputed_at)
		return json_null();
	money_plain(refunded ? d->back.refunded_minor : 0, d->v.currency, text, sizeof text);
	return json_pack("{s:o, s:o, s:o, s:o}", "refunded_minor",
			 refunded ? json_integer(d->back.refunded_minor) : json_null(), "refunded",
			 refunded ? json_string(text) : json_null(), "disputed_at",
			 ms_or_null(d->back.disputed_at), "dispute",
			 d->back.dispute[0] ? api_json_text(d->back.dispute) : json_null());
}

static json_t *order_jobs_json(const struct order_detail *d)
{
	json_t *jobs = json_array(), *entries;
	const struct order_job *j;
	int i, k;

	for (i = 0; i < d->n_jobs; i++) {
		j = &d->jobs[i];
		entries = json_array();
		for (k = 0; k < j->n_entries; k++)
			json_array_append_new(entries, json_pack("{s:s, s:I, s:I, s:o}", "state",
					j->entries[k].state, "deliveries",
					(json_int_t)j->entries[k].deliveries, "attempts",
					(json_int_t)j->entries[k].attempts, "last_error",
					j->entries[k].last_error[0] ?
						api_json_text(j->entries[k].last_error) : json_null()));
		json_array_append_new(jobs, json_pack("{s:s, s:s, s:b, s:o}", "job_id", j->job_id,
						      "kind", j->kind, "published", j->published,
						      "entries", entries));
	}
	return jobs;
}

json_t *api_order_json(const struct order_detail *d)
{
	const struct order_view *v = &d->v;
	json_t *o, *tickets = json_array(), *emails = json_array(), *changes = json_array();
	const struct order_email *tk = NULL;
	char when[32];
	int i;

	for (i = 0; i < v->n_tickets; i++)
		json_array_append_new(tickets, json_pack("{s:I, s:s, s:s, s:o, s:o, s:b}", "id",
				(json_int_t)v->tickets[i].id, "seat", v->tickets[i].seat_label,
				"state", ticket_states[d->tickets[i].state], "scanned_at",
				ms_or_null(d->tickets[i].scanned_at), "scanned_by",
				d->tickets[i].scanned_by[0] ? api_json_text(d->tickets[i].scanned_by)
							    : json_null(),
				"pdf_stored", d->tickets[i].pdf_stored));
	for (i = 0; i < d->n_emails; i++) {
		if (strcmp(d->emails[i].kind, "tickets") == 0)
			tk = &d->emails[i];
		json_array_append_new(emails, json_pack("{s:s, s:s, s:o, s:o}", "kind",
				d->emails[i].kind, "state", order_email_state(&d->emails[i]),
				"sent_at", ms_or_null(d->emails[i].sent_at), "to",
				d->emails[i].to[0] ? api_json_text(d->emails[i].to) : json_null()));
	}
	for (i = 0; i < d->n_changes; i++)
		json_array_append_new(changes, json_pack("{s:I, s:s, s:o, s:o}", "at",
				(json_int_t)d->changes[i].at, "kind", d->changes[i].kind, "by",
				api_json_text(d->changes[i].actor), "detail",
				d->changes[i].detail[0] ? api_json_text(d->changes[i].detail)
							: json_null()));
	api_utc_text(v->starts_at, when, sizeof when);
	o = json_pack("{s:s, s:I, s:o, s:o, s:s, s:o, s:o, s:o, s:I, s:I, s:b, s:o}", "id",
		      v->public_id, "event_id", (json_int_t)v->event_id, "event",
		      api_json_text(v->event_name), "venue", api_json_text(v->venue), "starts_at",
		      when, "name", api_json_text(v->buyer_name), "email",
		      v->buyer_email[0] ? api_json_text(v->buyer_email) : json_null(), "payment",
		      v->payment[0] ? json_string(v->payment) : json_null(), "seats",
		      (json_int_t)v->seats, "created_at", (json_int_t)d->created_at, "pdf_stored",
		      v->pdf_stored, "pdf_key",
		      d->pdf_tickets ? json_string(d->pdf_key) : json_null());
	if (v->currency[0] && api_amount_set(o, v->amount_minor, v->currency) == 0) {
		json_object_set_new(o, "payment_ref", v->payment_ref[0]
						       ? api_json_text(v->payment_ref) : json_null());
		json_object_set_new(o, "refund", refund_json(d));
		json_object_set_new(o, "money_back", back_json(d));
	}
	json_object_set_new(o, "cancelled_at", ms_or_null(v->cancelled_at));
	json_object_set_new(o, "resends", json_integer(v->resends));
	/* the first email's state, as before the emails list */
	json_object_set_new(o, "email_claimed_at", tk && tk->claimed_at ?
						   json_integer(tk->claimed_at) : json_null());
	json_object_set_new(o, "email_sent", json_boolean(tk && tk->sent_at));
	json_object_set_new(o, "email_sent_at", ms_or_null(tk ? tk->sent_at : 0));
	json_object_set_new(o, "email_message_id", tk && tk->message_id[0] ?
						   api_json_text(tk->message_id) : json_null());
	json_object_set_new(o, "tickets", tickets);
	json_object_set_new(o, "emails", emails);
	json_object_set_new(o, "changes", changes);
	json_object_set_new(o, "jobs", order_jobs_json(d));
	return o;
}

char *api_order_json_text(const struct order_detail *d)
{
	json_t *o = api_order_json(d);
	char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	return s;
}

/* the order an {id} names: 1 with *d (order_detail_free), 0 with the
 * answer (404 or 500) in c->res */
int api_order_of_call(struct call *c, struct order_detail **d)
{
	enum sd_result r;

	*d = NULL;
	if (!api_order_id_valid(c->id)) {
		api_res_fail(c->res, 404, "no such order", NULL);
		return 0;
	}
	if ((r = order_detail_get(c->db, c->id, d)) == SD_NOT_FOUND)
		api_res_fail(c->res, 404, "no such order", NULL);
	else if (r != SD_OK)
		api_res_internal(c->res, c->req, r);
	return r == SD_OK;
}

void api_get_order(struct call *c)
{
	struct order_detail *d;

	if (!api_order_of_call(c, &d))
		return;
	api_res_json(c->res, 200, api_order_json(d));
	order_detail_free(d);
}

void api_get_order_pdf(struct call *c)
{
	struct order_detail *d;
	unsigned char *pdf = NULL, *p;
	size_t len = 0;
	enum sd_result r;

	if (!api_order_of_call(c, &d))
		return;
	r = d->v.pdf_stored ? blob_get(c->a->blobs, d->pdf_key, &pdf, &len) : SD_NOT_FOUND;
	order_detail_free(d);
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
