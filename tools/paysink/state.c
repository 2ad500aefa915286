/*
 * state.c: the sessions, refunds, disputes and events paysink holds, the
 * session's Stripe-shaped JSON, its expiry, the clocks and the dice.
 *
 * Everything is in memory, in arrays that only grow (a run is a test or a
 * soak), under ps_lock; record.c writes it all out.
 *
 * The clocks: the business clock (ps_now) is the real one plus an offset
 * that POST /_paysink/clock moves forward; sessions' created, expires_at,
 * paid_at and expired_at, refunds' and events' created are on it, so a test
 * can pass a session's expiry without waiting.  Webhook signatures carry
 * the real time (ps_real_now): the receiver checks them against its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "paysink.h"

struct vec {
	void **v;
	size_t n, cap;
};

static struct vec vecs[PS_KINDS];	/* the objects, by kind */
static int64_t clock_offset;	/* seconds added to the real clock */
static uint64_t dice;		/* xorshift64* state */
struct ps_counts ps_counts;

static int vec_push(struct vec *a, void *p)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		void **v = realloc(a->v, cap * sizeof *v);

		if (!v)
			return -1;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = p;
	return 0;
}

/* ======================== clocks, ids, dice ============================== */

int64_t ps_real_now(void)
{
	return (int64_t)time(NULL);
}

int64_t ps_now(void)
{
	return ps_real_now() + clock_offset;
}

void ps_clock_advance(int64_t seconds)
{
	clock_offset += seconds;
}

int64_t ps_clock_offset(void)
{
	return clock_offset;
}

void ps_rand_id(char *out, size_t size, const char *prefix, int n)
{
	static const char abc[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	unsigned char bytes[64];
	size_t plen = strlen(prefix), i, got = 0;

	if ((size_t)n > sizeof bytes)
		n = (int)sizeof bytes;
	if (plen + (size_t)n + 1 > size)
		n = (int)(size - plen - 1);
	while (got < (size_t)n) {
		ssize_t r = getrandom(bytes + got, (size_t)n - got, 0);

		if (r < 0 && errno != EINTR)
			abort();	/* no kernel randomness: nothing sane to do */
		if (r > 0)
			got += (size_t)r;
	}
	memcpy(out, prefix, plen);
	for (i = 0; i < (size_t)n; i++)
		out[plen + i] = abc[bytes[i] % 62];
	out[plen + (size_t)n] = '\0';
}

static uint64_t dice_next(void)
{
	dice ^= dice >> 12;
	dice ^= dice << 25;
	dice ^= dice >> 27;
	return dice * 0x2545F4914F6CDD1DULL;
}

int ps_dice_roll(long pct)
{
	if (pct <= 0)
		return 0;
	return (long)((dice_next() >> 33) % 100) < pct;
}

uint64_t ps_dice_upto(uint64_t max)
{
	if (max == 0)
		return 0;
	return (dice_next() >> 11) % (max + 1);
}

void state_init(void)
{
	/* splitmix64 of the seed: never 0, and nearby seeds differ at once */
	dice = ps_opts.seed + 0x9E3779B97F4A7C15ULL;
	dice = (dice ^ (dice >> 30)) * 0xBF58476D1CE4E5B9ULL;
	dice = (dice ^ (dice >> 27)) * 0x94D049BB133111EBULL;
	dice ^= dice >> 31;
	if (dice == 0)
		dice = 1;
}

/* ======================== the objects ==================================== */

/* how each kind but the sessions (which checkout.c makes) is made */
static const struct {
	size_t size;
	const char *prefix;		/* of its id */
	size_t created;			/* offset of its int64_t created */
} kinds[PS_KINDS] = {
	[PS_REFUNDS] = { sizeof(struct ps_refund), "re_3", offsetof(struct ps_refund, created) },
	[PS_DISPUTES] = { sizeof(struct ps_dispute), "dp_1", offsetof(struct ps_dispute, created) },
	[PS_EVENTS] = { sizeof(struct ps_event), "evt_1", offsetof(struct ps_event, created) },
};

void *state_new(enum ps_kind kind)
{
	char *o = kinds[kind].size ? calloc(1, kinds[kind].size) : NULL;

	if (!o || vec_push(&vecs[kind], o) != 0) {
		free(o);
		return NULL;
	}
	/* every struct kept starts with its id */
	ps_rand_id(o, PS_ID_MAX, kinds[kind].prefix, 24);
	*(int64_t *)(o + kinds[kind].created) = ps_now();
	return o;
}

void *state_find(enum ps_kind kind, const char *id)
{
	const struct vec *a = &vecs[kind];
	size_t i;

	for (i = 0; i < a->n; i++)
		if (strcmp((const char *)a->v[i], id) == 0)
			return a->v[i];
	return NULL;
}

size_t state_count(enum ps_kind kind)
{
	return vecs[kind].n;
}

void *state_at(enum ps_kind kind, size_t i)
{
	return i < vecs[kind].n ? vecs[kind].v[i] : NULL;
}

int state_session_add(struct ps_session *s, int64_t created)
{
	if (vec_push(&vecs[PS_SESSIONS], s) != 0)
		return -1;
	ps_rand_id(s->id, sizeof s->id, "cs_test_a1", 56);
	s->status = PS_OPEN;
	s->created = created;
	return 0;
}

void state_session_free(struct ps_session *s)
{
	size_t j;

	if (!s)
		return;
	for (j = 0; j < s->n_lines; j++)
		free(s->lines[j].name);
	free(s->lines);
	free(s->client_reference_id);
	free(s->customer_email);
	free(s->success_url);
	free(s->cancel_url);
	json_decref(s->metadata);
	json_decref(s->pi_metadata);
	json_decref(s->pm_types);
	free(s);
}

struct ps_session *state_session_by_pi(const char *pi_or_charge)
{
	size_t i;

	for (i = 0; i < state_count(PS_SESSIONS); i++) {
		struct ps_session *s = state_at(PS_SESSIONS, i);

		if (s->pay.pi[0] && (strcmp(s->pay.pi, pi_or_charge) == 0 ||
				     strcmp(s->pay.charge, pi_or_charge) == 0))
			return s;
	}
	return NULL;
}

/* ======================== the changes ==================================== */

const char *state_expire(struct ps_session *s)
{
	if (s->status != PS_OPEN)
		return s->status == PS_COMPLETE ? "complete" : "expired";
	s->status = PS_EXPIRED;
	s->expired_at = ps_now();
	wh_event("checkout.session.expired", s->id, session_json(s));
	return "";
}

void state_sweep_expiry(void)
{
	int64_t now = ps_now();
	size_t i;
	int changed = 0;

	for (i = 0; i < state_count(PS_SESSIONS); i++) {
		struct ps_session *s = state_at(PS_SESSIONS, i);

		if (s->status == PS_OPEN && now >= s->expires_at) {
			state_expire(s);
			changed = 1;
		}
	}
	if (changed)
		record_write();
}

/* ======================== the session as Stripe shapes it ================ */

json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

const char *session_status_name(const struct ps_session *s)
{
	return s->status == PS_OPEN ? "open" : s->status == PS_COMPLETE ? "complete" : "expired";
}

const char *session_payment_status(const struct ps_session *s)
{
	if (s->status == PS_COMPLETE && s->amount_total == 0)
		return "no_payment_required";
	return s->charges > 0 ? "paid" : "unpaid";
}

static json_t *customer_details(const struct ps_session *s)
{
	if (s->status != PS_COMPLETE)
		return json_null();
	return json_pack("{s:n,s:o,s:n,s:n,s:s,s:[]}", "address", "email",
			 str_or_null(s->customer_email), "name", "phone", "tax_exempt", "none",
			 "tax_ids");
}

json_t *session_json(const struct ps_session *s)
{
	json_t *o = json_object();
	char url[400];

	snprintf(url, sizeof url, "%s/pay/%s", ps_base_url, s->id);
	json_object_set_new(o, "id", json_string(s->id));
	json_object_set_new(o, "object", json_string("checkout.session"));
	json_object_set_new(o, "after_expiration", json_null());
	json_object_set_new(o, "allow_promotion_codes", json_null());
	json_object_set_new(o, "amount_subtotal", json_integer(s->amount_total));
	json_object_set_new(o, "amount_total", json_integer(s->amount_total));
	json_object_set_new(o, "automatic_tax",
			    json_pack("{s:b,s:n,s:n}", "enabled", 0, "liability", "status"));
	json_object_set_new(o, "billing_address_collection", json_null());
	json_object_set_new(o, "cancel_url", str_or_null(s->cancel_url));
	json_object_set_new(o, "client_reference_id", str_or_null(s->client_reference_id));
	json_object_set_new(o, "created", json_integer(s->created));
	json_object_set_new(o, "currency", json_string(s->currency));
	/* a no-cost order makes a Customer (no-cost-orders: "guest customers
	 * aren't supported") */
	json_object_set_new(o, "customer", s->customer[0] ? json_string(s->customer) : json_null());
	json_object_set_new(o, "customer_creation", json_string("if_required"));
	json_object_set_new(o, "customer_details", customer_details(s));
	json_object_set_new(o, "customer_email", str_or_null(s->customer_email));
	json_object_set_new(o, "expires_at", json_integer(s->expires_at));
	json_object_set_new(o, "invoice", json_null());
	json_object_set_new(o, "livemode", json_false());
	json_object_set_new(o, "locale", json_null());
	json_object_set_new(o, "metadata", json_deep_copy(s->metadata));
	json_object_set_new(o, "mode", json_string("payment"));
	/* since 2022-08-01 the payment intent is made when the buyer pays, and
	 * a no-cost order never has one */
	json_object_set_new(o, "payment_intent",
			    s->pay.pi[0] ? json_string(s->pay.pi) : json_null());
	json_object_set_new(o, "payment_method_types", json_deep_copy(s->pm_types));
	json_object_set_new(o, "payment_status", json_string(session_payment_status(s)));
	json_object_set_new(o, "status", json_string(session_status_name(s)));
	json_object_set_new(o, "submit_type", json_null());
	json_object_set_new(o, "success_url", str_or_null(s->success_url));
	json_object_set_new(o, "total_details", json_pack("{s:i,s:i,s:i}", "amount_discount", 0,
							  "amount_shipping", 0, "amount_tax", 0));
	json_object_set_new(o, "ui_mode", json_string("hosted"));
	/* as Stripe: the url only while the session can still be paid */
	json_object_set_new(o, "url", s->status == PS_OPEN ? json_string(url) : json_null());
	return o;
}

/* ======================== the end ======================================== */

static void vec_free(struct vec *a, void (*free_one)(void *))
{
	size_t i;

	for (i = 0; i < a->n; i++)
		free_one(a->v[i]);
	free(a->v);
	memset(a, 0, sizeof *a);
}

static void session_free_one(void *p)
{
	state_session_free(p);
}

static void refund_free_one(void *p)
{
	struct ps_refund *r = p;

	free(r->idempotency_key);
	free(r->reason);
	json_decref(r->metadata);
	free(r);
}

static void event_free_one(void *p)
{
	struct ps_event *ev = p;

	free(ev->payload);
	free(ev);
}

void state_free(void)
{
	vec_free(&vecs[PS_SESSIONS], session_free_one);
	vec_free(&vecs[PS_REFUNDS], refund_free_one);
	vec_free(&vecs[PS_DISPUTES], free);
	vec_free(&vecs[PS_EVENTS], event_free_one);
	idem_free_all();
}
