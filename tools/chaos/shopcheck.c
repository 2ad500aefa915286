/*
 * shopcheck.c: the verdict on the shop (--buyers), from the database,
 * paysink's record, the mail provider's refund emails and the soak's log,
 * never from the box's own words.
 *
 * The record is the provider's truth: who paid, how much, what was
 * refunded, which webhook events were made and which the box answered 2xx.
 * The checks, in the order the first broken one is named:
 *   sessions   at most one session per hold (client_reference_id), none
 *              charged twice; a charged session is complete and names its
 *              payment; every hold's session_id is its own session in the
 *              record, and every session in the record belongs to a hold
 *   payments   each paid session made exactly one order (payment_ref its
 *              payment, the amount and currency charged, the hold 'ordered'
 *              naming it, its ticket email sent unless cancelled) or, its
 *              seats gone, exactly one refund at the provider (the whole
 *              amount, key refund-<payment>), a late refund row done, the
 *              hold 'refunded', and one refund email (effects marked sent,
 *              one message under refunded-<payment>); never both, never
 *              neither.  A cancelled online order has its one refund
 *              (reason cancelled, key refund-<order>) and no refund email
 *   orders     no online order without a paid session; no payment_ref on an
 *              order that is not online; no refund at the provider without
 *              a paid session, none twice for one payment; no refund email
 *              for a payment not refunded late
 *   holds      none open at the end; an expired hold's session (if any)
 *              expired at the provider and uncharged
 *   buyers     (the log) each buyer's session is in the record for the hold
 *              the log names; a payment paysink acknowledged is charged; one
 *              it refused, and an abandoned checkout, ended expired and
 *              uncharged; a late payment came after its hold's end; no
 *              session was charged that no buyer paid
 *   seats      the priced events' live tickets within their capacity and
 *              equal to the seats of the paid sessions that made standing
 *              orders (the amount over the price)
 *   money      the online orders' amounts = the payments - the late refunds;
 *              the standing ones' = the payments - every refund
 * A payment the record says was made before its hold's end and that was
 * refunded all the same (it reached the box after the end, and its seats
 * were gone by then) is allowed by the rule above; it is counted
 * (refunds_of_payments_made_in_time) and named on stderr.
 *   webhooks   every checkout.session event the box answered 2xx is in
 *              processed_jobs (stripe:<event id>), once; every such row
 *              names an event of the record
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "chaos.h"

#define ID_MAX 96

struct rsess {			/* a session in paysink's record */
	char id[ID_MAX], hold[32], status[16], pi[ID_MAX], currency[8];
	long charges;
	long long amount, refunded, paid_at;
	long n_refunds;
	long long refund_sum;
	int refund_key_ok;
	char refund_key[160];
	long order, hold_row;		/* indexes, -1 none */
	int paid_logged;		/* a buyer's payment was acknowledged */
};

struct rref {			/* a refund in the record */
	char pi[ID_MAX], key[160];
	long long amount;
};

struct revt {			/* an event in the record */
	char id[ID_MAX], type[48];
	long delivered_ok, attempts, gave_up;
	int dropped, duplicated;
};

struct dhold {
	long long id, order_id, amount, seats, event, expires_at;
	char pub[32], state[16], session[ID_MAX], pi[ID_MAX];
	long sess;			/* its session in the record, -1 none */
	int logged;
};

struct dorder {
	long long id, amount, seats, event;
	char pub[32], pi[ID_MAX], currency[8];
	int cancelled, mailed;
};

struct dref {
	char pi[ID_MAX], reason[16], via[16], currency[8];
	int done, mailed;
	long long amount, hold_id, order_id;
};

struct devent {
	long long id, capacity, price, live;
};

struct shop {
	struct verdict *v;
	struct rsess *s;
	long ns;
	struct rref *r;
	long nr;
	struct revt *e;
	long ne;
	struct dhold *h;
	long nh;
	struct dorder *o;
	long no;
	struct dref *d;
	long nd;
	char (*pj)[ID_MAX + 8];
	long npj;
	struct devent *ev;
	long nev;
};

#define broken(v, ...) verify_broken(v, __VA_ARGS__)

/* ======================== growing arrays ================================ */

/* room for one more at *n (doubling from 64): its zeroed slot, or NULL */
static void *push(void *arrp, long *n, size_t each)
{
	char **arr = arrp, *a = *arr;

	if (*n == 0 || (*n >= 64 && (*n & (*n - 1)) == 0)) {
		if (!(a = realloc(a, (size_t)(*n < 64 ? 64 : *n * 2) * each)))
			return NULL;
		*arr = a;
	}
	memset(a + (size_t)*n * each, 0, each);
	return a + (size_t)(*n)++ * each;
}

#define PUSH(S, ARR, N) push(&(S)->ARR, &(S)->N, sizeof *(S)->ARR)

static void copy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

static long long num(const char *s)
{
	return s ? strtoll(s, NULL, 10) : 0;
}

/* ======================== the record ==================================== */

static long long jnum(json_t *o, const char *k)
{
	json_t *x = json_object_get(o, k);

	return json_is_integer(x) ? (long long)json_integer_value(x) : 0;
}

static const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

static int load_record(struct shop *S)
{
	struct verdict *v = S->v;
	json_error_t jerr;
	json_t *doc = json_load_file(v->record_path, 0, &jerr), *x;
	size_t i;

	if (!doc) {
		broken(v, "shop: paysink's record %s: %s", v->record_path, jerr.text);
		return -1;
	}
	json_array_foreach(json_object_get(doc, "sessions"), i, x) {
		struct rsess *s = PUSH(S, s, ns);

		if (!s)
			goto oom;
		copy(s->id, sizeof s->id, jstr(x, "id"));
		copy(s->hold, sizeof s->hold, jstr(x, "client_reference_id"));
		copy(s->status, sizeof s->status, jstr(x, "status"));
		copy(s->pi, sizeof s->pi, jstr(x, "payment_intent"));
		copy(s->currency, sizeof s->currency, jstr(x, "currency"));
		s->charges = (long)jnum(x, "charges");
		s->amount = jnum(x, "amount_total");
		s->refunded = jnum(x, "amount_refunded");
		s->paid_at = jnum(x, "paid_at");
		s->order = s->hold_row = -1;
	}
	json_array_foreach(json_object_get(doc, "refunds"), i, x) {
		struct rref *r = PUSH(S, r, nr);

		if (!r)
			goto oom;
		copy(r->pi, sizeof r->pi, jstr(x, "payment_intent"));
		copy(r->key, sizeof r->key, jstr(x, "idempotency_key"));
		r->amount = jnum(x, "amount");
	}
	json_array_foreach(json_object_get(doc, "events"), i, x) {
		struct revt *e = PUSH(S, e, ne);

		if (!e)
			goto oom;
		copy(e->id, sizeof e->id, jstr(x, "id"));
		copy(e->type, sizeof e->type, jstr(x, "type"));
		e->delivered_ok = (long)jnum(x, "delivered_ok");
		e->attempts = (long)jnum(x, "attempts");
		e->gave_up = (long)jnum(x, "gave_up");
		e->dropped = json_is_true(json_object_get(x, "dropped"));
		e->duplicated = json_is_true(json_object_get(x, "duplicated"));
	}
	json_decref(doc);
	return 0;
oom:
	json_decref(doc);
	broken(v, "shop: out of memory");
	return -1;
}

/* ======================== the database ================================== */

static int hold_row(void *arg, int ncols, const char *const *vals)
{
	struct shop *S = arg;
	struct dhold *h = PUSH(S, h, nh);

	(void)ncols;
	if (!h)
		return 1;
	h->id = num(vals[0]);
	copy(h->pub, sizeof h->pub, vals[1]);
	copy(h->state, sizeof h->state, vals[2]);
	copy(h->session, sizeof h->session, vals[3]);
	copy(h->pi, sizeof h->pi, vals[4]);
	h->order_id = num(vals[5]);
	h->amount = num(vals[6]);
	h->seats = num(vals[7]);
	h->event = num(vals[8]);
	h->expires_at = num(vals[9]);
	h->sess = -1;
	return 0;
}

static int order_row(void *arg, int ncols, const char *const *vals)
{
	struct shop *S = arg;
	struct dorder *o = PUSH(S, o, no);

	(void)ncols;
	if (!o)
		return 1;
	o->id = num(vals[0]);
	copy(o->pub, sizeof o->pub, vals[1]);
	copy(o->pi, sizeof o->pi, vals[2]);
	o->amount = num(vals[3]);
	copy(o->currency, sizeof o->currency, vals[4]);
	o->cancelled = num(vals[5]) != 0;
	o->seats = num(vals[6]);
	o->event = num(vals[7]);
	o->mailed = num(vals[8]) != 0;
	return 0;
}

static int refund_row(void *arg, int ncols, const char *const *vals)
{
	struct shop *S = arg;
	struct dref *d = PUSH(S, d, nd);

	(void)ncols;
	if (!d)
		return 1;
	copy(d->pi, sizeof d->pi, vals[0]);
	copy(d->reason, sizeof d->reason, vals[1]);
	copy(d->via, sizeof d->via, vals[2]);
	d->done = num(vals[3]) != 0;
	d->amount = num(vals[4]);
	d->hold_id = num(vals[5]);
	d->order_id = num(vals[6]);
	d->mailed = num(vals[7]) != 0;
	copy(d->currency, sizeof d->currency, vals[8]);
	return 0;
}

static int processed_row(void *arg, int ncols, const char *const *vals)
{
	struct shop *S = arg;
	char *p = PUSH(S, pj, npj);

	(void)ncols;
	if (!p)
		return 1;
	copy(p, ID_MAX + 8, vals[0]);
	return 0;
}

static int event_row(void *arg, int ncols, const char *const *vals)
{
	struct shop *S = arg;
	struct devent *e = PUSH(S, ev, nev);

	(void)ncols;
	if (!e)
		return 1;
	e->id = num(vals[0]);
	e->capacity = num(vals[1]);
	e->price = num(vals[2]);
	e->live = num(vals[3]);
	return 0;
}

static int count_row(void *arg, int ncols, const char *const *vals)
{
	*(long *)arg = ncols > 0 && vals[0] ? atol(vals[0]) : -1;
	return 1;
}

static int load_db(struct shop *S, struct vdb *db)
{
	static const char holds[] =
		"SELECT h.id, h.public_id, h.state, coalesce(h.session_id, ''), "
		"coalesce(h.payment_ref, ''), coalesce(h.order_id, 0), h.amount_minor, h.seats, "
		"h.event_id, h.expires_at FROM holds h ORDER BY h.id";
	static const char orders[] =
		"SELECT o.id, o.public_id, coalesce(o.payment_ref, ''), coalesce(o.amount_minor, -1), "
		"upper(coalesce(o.currency, '')), CASE WHEN o.cancelled_at IS NULL THEN 0 ELSE 1 END, "
		"o.seats, o.event_id, CASE WHEN EXISTS (SELECT 1 FROM email_sends s WHERE "
		"s.order_id = o.id AND s.kind = 'tickets' AND s.sent_at IS NOT NULL) THEN 1 ELSE 0 "
		"END FROM orders o WHERE o.payment = 'online' ORDER BY o.id";
	static const char refunds[] =
		"SELECT r.payment_ref, r.reason, r.via, CASE WHEN r.done_at IS NULL THEN 0 ELSE 1 "
		"END, r.amount_minor, coalesce(r.hold_id, 0), coalesce(r.order_id, 0), CASE WHEN "
		"EXISTS (SELECT 1 FROM effects e WHERE e.subject = 'refund:' || r.payment_ref AND "
		"e.kind = 'mail' AND e.done_at IS NOT NULL) THEN 1 ELSE 0 END, upper(r.currency) "
		"FROM refunds r ORDER BY r.id";
	static const char processed[] =
		"SELECT job_id FROM processed_jobs WHERE job_id LIKE 'stripe:%' ORDER BY job_id";
	static const char events[] =
		"SELECT e.id, e.capacity, e.price_minor, (SELECT count(*) FROM tickets t WHERE "
		"t.event_id = e.id AND t.cancelled_at IS NULL) FROM events e "
		"WHERE e.price_minor IS NOT NULL ORDER BY e.id";
	static const char not_online[] =
		"SELECT count(*) FROM orders WHERE payment_ref IS NOT NULL AND "
		"coalesce(payment, '') <> 'online'";
	char err[300];
	long n = -1;

	if (vdb_each(db, holds, NULL, hold_row, S, err, sizeof err) != 0 ||
	    vdb_each(db, orders, NULL, order_row, S, err, sizeof err) != 0 ||
	    vdb_each(db, refunds, NULL, refund_row, S, err, sizeof err) != 0 ||
	    vdb_each(db, processed, NULL, processed_row, S, err, sizeof err) != 0 ||
	    vdb_each(db, events, NULL, event_row, S, err, sizeof err) != 0 ||
	    vdb_each(db, not_online, NULL, count_row, &n, err, sizeof err) != 0) {
		broken(S->v, "shop: database: %s", err);
		return -1;
	}
	if (n != 0)
		broken(S->v, "orders: %ld orders carry a provider's payment and are not online", n);
	return 0;
}

/* ======================== look-ups ====================================== */

static long sess_by_id(const struct shop *S, const char *id)
{
	long i;

	for (i = 0; id[0] && i < S->ns; i++)
		if (strcmp(S->s[i].id, id) == 0)
			return i;
	return -1;
}

static long sess_by_pi(const struct shop *S, const char *pi)
{
	long i;

	for (i = 0; pi[0] && i < S->ns; i++)
		if (strcmp(S->s[i].pi, pi) == 0)
			return i;
	return -1;
}

static long hold_by_pub(const struct shop *S, const char *pub)
{
	long i;

	for (i = 0; pub[0] && i < S->nh; i++)
		if (strcmp(S->h[i].pub, pub) == 0)
			return i;
	return -1;
}

static long order_by_pi(const struct shop *S, const char *pi, long *count)
{
	long i, hit = -1;

	*count = 0;
	for (i = 0; pi[0] && i < S->no; i++)
		if (strcmp(S->o[i].pi, pi) == 0) {
			if (hit < 0)
				hit = i;
			(*count)++;
		}
	return hit;
}

static long dref_by_pi(const struct shop *S, const char *pi)
{
	long i;

	for (i = 0; pi[0] && i < S->nd; i++)
		if (strcmp(S->d[i].pi, pi) == 0)
			return i;
	return -1;
}

static int processed_has(const struct shop *S, const char *event_id)
{
	char want[ID_MAX + 8];
	long i;

	snprintf(want, sizeof want, "stripe:%s", event_id);
	for (i = 0; i < S->npj; i++)
		if (strcmp(S->pj[i], want) == 0)
			return 1;
	return 0;
}

static long keys_for(char *const *keys, long n, const char *key)
{
	long i, c = 0;

	for (i = 0; i < n; i++)
		c += strcmp(keys[i], key) == 0;
	return c;
}

/* ======================== the checks ==================================== */

static void check_sessions(struct shop *S)
{
	struct verdict *v = S->v;
	long i, j;

	for (i = 0; i < S->ns; i++) {
		struct rsess *s = &S->s[i];
		long h;

		for (j = 0; j < i; j++)
			if (s->hold[0] && strcmp(S->s[j].hold, s->hold) == 0)
				broken(v, "sessions: hold %s has two sessions at the provider, %s and %s",
				       s->hold, S->s[j].id, s->id);
		if (s->charges > 1)
			broken(v, "sessions: session %s was charged %ld times", s->id, s->charges);
		if ((s->charges == 1) != (strcmp(s->status, "complete") == 0) ||
		    (s->charges == 1) != (s->pi[0] != '\0'))
			broken(v, "sessions: session %s is %s with %ld charges and payment '%s'", s->id,
			       s->status, s->charges, s->pi);
		if (strcmp(s->status, "open") == 0)
			v->sessions_left_open++;
		if ((h = hold_by_pub(S, s->hold)) < 0) {
			broken(v, "sessions: session %s names hold '%s', which is not in the database",
			       s->id, s->hold);
			continue;
		}
		s->hold_row = h;
		if (!S->h[h].session[0]) {
			/* a session the box never recorded (killed before it could):
			 * nobody was sent to it, so nobody can have paid it */
			if (s->charges)
				broken(v, "sessions: session %s was paid, and its hold %s never "
				       "recorded it", s->id, s->hold);
			else if (strcmp(s->status, "open") == 0)
				fprintf(stderr, "chaos: note: session %s of hold %s (%s in the box, "
					"which never recorded the session) is still open at the "
					"provider\n", s->id, s->hold, S->h[h].state);
			continue;
		}
		if (strcmp(S->h[h].session, s->id) != 0)
			broken(v, "sessions: hold %s has session %s, and the provider's session %s "
			       "names it too", s->hold, S->h[h].session, s->id);
		else
			S->h[h].sess = i;
	}
	for (i = 0; i < S->nh; i++) {
		long si = S->h[i].session[0] ? sess_by_id(S, S->h[i].session) : -2;

		if (si == -1)
			broken(v, "sessions: hold %s names session %s, which the provider never made",
			       S->h[i].pub, S->h[i].session);
		else if (si >= 0 && strcmp(S->s[si].hold, S->h[i].pub) != 0)
			broken(v, "sessions: hold %s names session %s, which the provider made for "
			       "hold %s", S->h[i].pub, S->h[i].session, S->s[si].hold);
	}
	v->sessions = S->ns;
}

/* one paid session: its order, or its refund and email; never both */
static void check_paid(struct shop *S, long i, char *const *keys, long nkeys)
{
	struct verdict *v = S->v;
	struct rsess *s = &S->s[i];
	struct dhold *h = s->hold_row >= 0 ? &S->h[s->hold_row] : NULL;
	char key[ID_MAX + 16];
	long n_orders, oi = order_by_pi(S, s->pi, &n_orders), di = dref_by_pi(S, s->pi), j;
	long msgs;
	int in_time = h && (s->paid_at + 1) * 1000 <= h->expires_at;

	v->paid++;
	v->paid_minor += s->amount;
	for (j = 0; j < S->nr; j++) {
		if (strcmp(S->r[j].pi, s->pi) != 0)
			continue;
		s->n_refunds++;
		s->refund_sum += S->r[j].amount;
		copy(s->refund_key, sizeof s->refund_key, S->r[j].key);
	}
	/* a late payment's refund is keyed by the payment, a cancelled
	 * order's by the order (refunds.h) */
	if (oi >= 0)
		snprintf(key, sizeof key, "refund-%s", S->o[oi].pub);
	else
		snprintf(key, sizeof key, "refund-%s", s->pi);
	s->refund_key_ok = strcmp(s->refund_key, key) == 0;
	snprintf(key, sizeof key, "refunded-%s", s->pi);
	msgs = keys_for(keys, nkeys, key);
	if (n_orders > 1)
		broken(v, "payments: payment %s made %ld orders", s->pi, n_orders);
	if (s->refund_sum != s->refunded)
		broken(v, "payments: session %s counts %lld refunded, its refunds add up to %lld",
		       s->id, s->refunded, s->refund_sum);
	if (oi >= 0) {
		struct dorder *o = &S->o[oi];

		s->order = oi;
		if (o->amount != s->amount || strcasecmp(o->currency, s->currency) != 0)
			broken(v, "payments: order %s records %lld %s, its payment %s took %lld %s",
			       o->pub, o->amount, o->currency, s->pi, s->amount, s->currency);
		if (!h || strcmp(h->state, "ordered") != 0 || h->order_id != o->id ||
		    strcmp(h->pi, s->pi) != 0)
			broken(v, "payments: order %s's hold %s is %s (order %lld, payment '%s')",
			       o->pub, s->hold, h ? h->state : "missing", h ? h->order_id : 0,
			       h ? h->pi : "");
		if (!o->cancelled && !o->mailed)
			broken(v, "payments: order %s (payment %s) has no ticket email marked sent",
			       o->pub, s->pi);
		if (!o->cancelled && s->n_refunds)
			broken(v, "payments: payment %s made order %s and was refunded too", s->pi,
			       o->pub);
		if (o->cancelled) {
			if (s->n_refunds != 1 || !s->refund_key_ok || s->refund_sum != s->amount)
				broken(v, "payments: order %s was cancelled; its payment %s has %ld "
				       "refunds of %lld (key %s)", o->pub, s->pi, s->n_refunds,
				       s->refund_sum, s->refund_key_ok ? "right" : "wrong");
			if (di < 0 || strcmp(S->d[di].reason, "cancelled") != 0)
				broken(v, "payments: cancelled order %s owes no refund of %s", o->pub,
				       s->pi);
			v->refunds_cancelled++;
		}
		if (msgs)
			broken(v, "payments: payment %s made order %s, and its buyer got %ld refund "
			       "emails", s->pi, o->pub, msgs);
		return;
	}
	/* no order: its seats were gone, a refund */
	if (s->n_refunds == 0) {
		broken(v, "payments: payment %s (session %s, hold %s) made no order and no refund",
		       s->pi, s->id, s->hold);
		return;
	}
	v->refunds_late++;
	v->refunded_minor += s->refund_sum;
	if (in_time) {	/* the rule allows it; the buyer paid in time all the same */
		v->refunds_of_payments_in_time++;
		fprintf(stderr, "chaos: note: payment %s (hold %s) was made at %lld s, within its "
			"hold (to %lld ms), and refunded as late: no order was made in time\n",
			s->pi, s->hold, s->paid_at, h->expires_at);
	}
	if (s->n_refunds != 1 || !s->refund_key_ok || s->refund_sum != s->amount)
		broken(v, "payments: late payment %s has %ld refunds of %lld for %lld (key %s)", s->pi,
		       s->n_refunds, s->refund_sum, s->amount, s->refund_key_ok ? "right" : "wrong");
	if (di < 0 || strcmp(S->d[di].reason, "late") != 0 || strcmp(S->d[di].via, "provider") ||
	    !S->d[di].done || S->d[di].amount != s->amount ||
	    (h && S->d[di].hold_id != h->id))
		broken(v, "payments: payment %s was refunded at the provider, and the box's refund "
		       "row is %s", s->pi, di < 0 ? "missing" : "not its late refund, done");
	if (!h || strcmp(h->state, "refunded") != 0 || strcmp(h->pi, s->pi) != 0)
		broken(v, "payments: late payment %s's hold %s is %s, not refunded", s->pi, s->hold,
		       h ? h->state : "missing");
	if (di >= 0 && !S->d[di].mailed)
		broken(v, "payments: late payment %s's refund email is not marked sent", s->pi);
	if (msgs > 1)
		v->duplicates += msgs - 1;
	if (msgs != 1)
		broken(v, "payments: late payment %s: its buyer got %ld refund emails, not 1", s->pi,
		       msgs);
}

static void check_payments(struct shop *S, char *const *keys, long nkeys)
{
	struct verdict *v = S->v;
	long i, k;

	for (i = 0; i < S->ns; i++)
		if (S->s[i].charges == 1)
			check_paid(S, i, keys, nkeys);
	/* the other way: every online order, refund and refund email has its payment */
	for (i = 0; i < S->no; i++) {
		long si = sess_by_pi(S, S->o[i].pi);

		v->online_minor += S->o[i].amount;
		if (!S->o[i].cancelled)
			v->online_live_minor += S->o[i].amount;
		if (si < 0 || S->s[si].charges != 1)
			broken(v, "orders: online order %s names payment '%s', which no session of "
			       "the provider was paid with", S->o[i].pub, S->o[i].pi);
	}
	for (i = 0; i < S->nr; i++) {
		long si = sess_by_pi(S, S->r[i].pi);

		if (si < 0 || S->s[si].charges != 1)
			broken(v, "orders: the provider refunded '%s', which no paid session names",
			       S->r[i].pi);
		for (k = 0; k < i; k++)
			if (strcmp(S->r[k].pi, S->r[i].pi) == 0)
				broken(v, "orders: payment %s was refunded twice at the provider",
				       S->r[i].pi);
	}
	for (i = 0; i < S->nd; i++) {
		const struct dref *d = &S->d[i];
		long si = sess_by_pi(S, d->pi), n_orders;

		if (strcmp(d->via, "provider") != 0)
			continue;
		if (si < 0 || S->s[si].n_refunds != 1)
			broken(v, "orders: the box owes a refund of %s at the provider, and the "
			       "provider made %ld", d->pi, si < 0 ? 0 : S->s[si].n_refunds);
		if (strcmp(d->reason, "late") == 0 && order_by_pi(S, d->pi, &n_orders) >= 0)
			broken(v, "orders: payment %s made an order, and the box refunded it as late",
			       d->pi);
	}
	for (i = 0; i < nkeys; i++) {
		const char *pi = keys[i] + strlen("refunded-");
		long di = dref_by_pi(S, pi);

		if (di < 0 || strcmp(S->d[di].reason, "late") != 0) {
			v->duplicates++;	/* an email for an intent never made */
			broken(v, "orders: the mail provider holds a refund email %s for a payment not "
			       "refunded late", keys[i]);
		}
	}
	v->refund_msgs = nkeys;
}

static void check_holds(struct shop *S)
{
	struct verdict *v = S->v;
	long i;

	v->holds = S->nh;
	for (i = 0; i < S->nh; i++) {
		const struct dhold *h = &S->h[i];

		if (strcmp(h->state, "open") == 0) {
			broken(v, "holds: hold %s is still open after the drain", h->pub);
			continue;
		}
		if (strcmp(h->state, "expired") != 0 || !h->session[0] || h->sess < 0)
			continue;
		if (strcmp(S->s[h->sess].status, "expired") != 0 || S->s[h->sess].charges)
			broken(v, "holds: hold %s ended expired, and its session %s is %s at the "
			       "provider (%ld charges)", h->pub, h->session, S->s[h->sess].status,
			       S->s[h->sess].charges);
	}
}

/* the soak's log: what each buyer was told */
static void check_buyers(struct shop *S)
{
	struct verdict *v = S->v;
	FILE *f = v->actions_path ? fopen(v->actions_path, "r") : NULL;
	char line[2048];
	long i;

	if (!f) {
		if (v->actions_path)
			broken(v, "buyers: cannot read the soak's log %s: %s", v->actions_path,
			       strerror(errno));
		return;
	}
	while (fgets(line, sizeof line, f)) {
		char choice[16], outcome[16], session[ID_MAX], hold[32], paid[4], ret[4];
		long si, hi;
		struct rsess *s;

		if (strncmp(line, "buyer ", 6) != 0)
			continue;
		v->buyers_logged++;
		verify_field(line, "choice", choice, sizeof choice);
		verify_field(line, "outcome", outcome, sizeof outcome);
		verify_field(line, "session", session, sizeof session);
		verify_field(line, "hold", hold, sizeof hold);
		verify_field(line, "paid", paid, sizeof paid);
		verify_field(line, "returned", ret, sizeof ret);
		if (strcmp(outcome, "soldout") == 0) {
			v->buyers_soldout++;
			continue;
		}
		v->returned += ret[0] == '1';
		if ((si = sess_by_id(S, session)) < 0) {
			broken(v, "buyers: a buyer was sent to session %s, which the provider never "
			       "made", session);
			continue;
		}
		s = &S->s[si];
		if (strcmp(s->hold, hold) != 0 || (hi = hold_by_pub(S, hold)) < 0 ||
		    strcmp(S->h[hi].session, session) != 0) {
			broken(v, "buyers: the buyer of session %s was told hold %s; the provider names "
			       "%s and the database %s", session, hold, s->hold,
			       (hi = hold_by_pub(S, hold)) >= 0 ? S->h[hi].session : "no such hold");
			continue;
		}
		if (S->h[hi].logged++)
			broken(v, "buyers: two buyers were given hold %s", hold);
		if (paid[0] == '1') {
			s->paid_logged = 1;
			if (s->charges != 1)
				broken(v, "buyers: the provider took the payment of session %s, and "
				       "records %ld charges", session, s->charges);
			if (strcmp(choice, "late") == 0) {
				v->paid_late++;
				if ((s->paid_at + 1) * 1000 <= S->h[hi].expires_at)
					broken(v, "buyers: the late payment of %s came at %lld s, before "
					       "its hold's end (%lld ms)", session, s->paid_at,
					       S->h[hi].expires_at);
			}
		} else {
			if (strcmp(choice, "abandon") == 0)
				v->abandoned++;
			else if (paid[0] == '0')
				v->late_refused++;
			if (s->charges != 0 || strcmp(s->status, "expired") != 0 ||
			    strcmp(S->h[hi].state, "expired") != 0)
				broken(v, "buyers: session %s was never paid (%s); it is %s with %ld "
				       "charges at the provider, its hold %s", session, choice,
				       s->status, s->charges, S->h[hi].state);
		}
	}
	fclose(f);
	for (i = 0; i < S->ns; i++)
		if (S->s[i].charges && !S->s[i].paid_logged)
			broken(v, "buyers: session %s was charged, and no buyer was told it paid",
			       S->s[i].id);
	for (i = 0; i < S->nh; i++)
		v->holds_orphan += !S->h[i].logged;
}

static void check_seats(struct shop *S)
{
	struct verdict *v = S->v;
	long i, j;

	for (i = 0; i < S->nev; i++) {
		const struct devent *e = &S->ev[i];
		long long seats = 0;

		for (j = 0; j < S->ns; j++) {
			const struct rsess *s = &S->s[j];
			long hi = s->hold_row;

			if (s->order < 0 || S->o[s->order].cancelled || hi < 0 ||
			    S->h[hi].event != e->id)
				continue;
			if (e->price <= 0 || s->amount % e->price)
				broken(v, "seats: payment %s of %lld is no number of seats at %lld", s->pi,
				       s->amount, e->price);
			else
				seats += s->amount / e->price;
		}
		if (e->live > e->capacity)
			broken(v, "seats: event %lld has %lld live tickets for %lld seats", e->id,
			       e->live, e->capacity);
		if (e->live != seats)
			broken(v, "seats: event %lld has %lld live tickets; its standing orders were "
			       "paid for %lld seats", e->id, e->live, seats);
		v->shop_seats_live += e->live;
		v->shop_capacity += e->capacity;
	}
}

static void check_money(struct shop *S)
{
	struct verdict *v = S->v;
	long long all_refunds = 0;
	long i;

	for (i = 0; i < S->nr; i++)
		all_refunds += S->r[i].amount;
	if (v->online_minor != v->paid_minor - v->refunded_minor)
		broken(v, "money: the online orders add up to %lld; the payments to %lld, the late "
		       "refunds to %lld", v->online_minor, v->paid_minor, v->refunded_minor);
	if (v->online_live_minor != v->paid_minor - all_refunds)
		broken(v, "money: the standing online orders add up to %lld; the payments to %lld, "
		       "every refund to %lld", v->online_live_minor, v->paid_minor, all_refunds);
}

static void check_webhooks(struct shop *S)
{
	struct verdict *v = S->v;
	long i, j;

	for (i = 0; i < S->ne; i++) {
		const struct revt *e = &S->e[i];

		v->wh_events++;
		v->wh_duplicated += e->duplicated;
		v->wh_dropped += e->dropped;
		v->wh_gave_up += e->gave_up;
		v->wh_delivered += e->delivered_ok > 0;
		if (e->delivered_ok > 0 && strncmp(e->type, "checkout.session.", 17) == 0 &&
		    !processed_has(S, e->id))
			broken(v, "webhooks: the box answered %s (%s) 2xx and did not record it in "
			       "processed_jobs", e->id, e->type);
	}
	for (i = 0; i < S->npj; i++) {
		const char *id = S->pj[i] + strlen("stripe:");

		for (j = 0; j < S->ne && strcmp(S->e[j].id, id) != 0; j++)
			;
		if (j == S->ne)
			broken(v, "webhooks: processed_jobs holds %s, an event the provider never made",
			       S->pj[i]);
		if (i > 0 && strcmp(S->pj[i - 1], S->pj[i]) == 0)
			broken(v, "webhooks: processed_jobs holds %s twice", S->pj[i]);
	}
	v->wh_applied = S->npj;
}

void shop_verify(struct verdict *v, struct vdb *db, char *const *refund_keys, long n_refund_keys)
{
	struct shop S;

	memset(&S, 0, sizeof S);
	S.v = v;
	if (load_record(&S) == 0 && load_db(&S, db) == 0) {
		v->shop_checked = 1;
		check_sessions(&S);
		check_payments(&S, refund_keys, n_refund_keys);
		check_holds(&S);
		check_buyers(&S);
		check_seats(&S);
		check_money(&S);
		check_webhooks(&S);
	}
	free(S.s);
	free(S.r);
	free(S.e);
	free(S.h);
	free(S.o);
	free(S.d);
	free(S.pj);
	free(S.ev);
}

void shop_print_figures(const struct verdict *v)
{
	if (!v->shop_checked)
		return;
	printf("buyers %ld\n", v->buyers_logged);
	printf("buyers_sold_out %ld\n", v->buyers_soldout);
	printf("holds %ld\n", v->holds);
	printf("holds_of_checkouts_started_again %ld\n", v->holds_orphan);
	printf("sessions %ld\n", v->sessions);
	printf("sessions_left_open %ld\n", v->sessions_left_open);
	printf("paid %ld\n", v->paid);
	printf("paid_late %ld\n", v->paid_late);
	printf("late_refused %ld\n", v->late_refused);
	printf("abandoned %ld\n", v->abandoned);
	printf("returned %ld\n", v->returned);
	printf("online_orders %ld\n", v->online_orders);
	printf("refunds_late %ld\n", v->refunds_late);
	printf("refunds_of_payments_made_in_time %ld\n", v->refunds_of_payments_in_time);
	printf("refunds_cancelled %ld\n", v->refunds_cancelled);
	printf("refund_emails %ld\n", v->refund_msgs);
	printf("paid_minor %lld\n", v->paid_minor);
	printf("refunded_minor %lld\n", v->refunded_minor);
	printf("online_orders_minor %lld\n", v->online_minor);
	printf("shop_seats_live %ld\n", v->shop_seats_live);
	printf("shop_capacity %ld\n", v->shop_capacity);
	printf("webhook_events %ld\n", v->wh_events);
	printf("webhook_duplicated %ld\n", v->wh_duplicated);
	printf("webhook_dropped %ld\n", v->wh_dropped);
	printf("webhook_gave_up %ld\n", v->wh_gave_up);
	printf("webhook_delivered %ld\n", v->wh_delivered);
	printf("webhook_events_applied %ld\n", v->wh_applied);
}
