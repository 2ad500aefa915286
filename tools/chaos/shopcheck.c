/*
 * shopcheck.c: the verdict on the shop (--buyers), from the database,
 * paysink's record, the mail provider's emails and the soak's log, never
 * from the box's own words; the money after the sale is backcheck.c's part
 * of it (shopcheck.h).
 *
 * The record is the provider's truth: who paid, how (a card, or a delayed
 * method and how its bank answered), how much, what was refunded (by the
 * box through the API, or in the dashboard; succeeded, failed), what was
 * disputed, which webhook events were made and which the box answered 2xx
 * (what the box can have heard).  The checks, in the order the first broken
 * one is named:
 *   sessions   at most one session per hold (client_reference_id), none
 *              charged twice; a session is complete exactly when it has a
 *              payment, charged exactly when that payment succeeded; every
 *              hold's session_id is its own session in the record, and
 *              every session in the record belongs to a hold
 *   payments   each paid session made exactly one order (payment_ref its
 *              payment, the amount and currency charged and its hold's, the
 *              hold 'ordered' naming it, its ticket email sent unless
 *              cancelled), or, its seats gone, exactly one refund by the
 *              box at the provider (the whole amount, key refund-<payment>),
 *              its refund row (late, the amount), the hold 'refunded', and
 *              once paid back one refund email (effects marked sent, one
 *              message under refunded-<payment>; none while a refund that
 *              failed is owed), or (backcheck.c) its delayed payment's end
 *              unheard, its hold still pending; never two, never none.  An
 *              order the box cancelled has its one refund (reason cancelled,
 *              key refund-<order>); one cancelled because its money went
 *              back has none (backcheck.c)
 *   orders     no online order without a paid session; no payment_ref on an
 *              order that is not online; no refund at the provider without
 *              a paid session, none by the box twice for one payment; no
 *              refund email for a payment not refunded late
 *   delayed, back, door, refunds   backcheck.c's
 *   holds      none open at the end, none pending but for a delayed
 *              payment; an expired hold's session (if any) expired at the
 *              provider and uncharged
 *   buyers     (the log) each buyer's session is in the record for the hold
 *              the log names; a card payment paysink acknowledged is
 *              charged, a delayed one is complete and ended as its bank
 *              answered; what a buyer gave back is in the record (a refund
 *              of it all or of the part, a dispute with the reason), and a
 *              buyer who gave nothing back gave none; a payment paysink
 *              refused, and an abandoned checkout, ended expired and
 *              uncharged; a late payment came after its hold's end; no
 *              session was paid that no buyer paid
 *   seats      the priced events' live tickets within their capacity and
 *              equal to the seats of the paid sessions that made standing
 *              orders (the amount over the price)
 *   money      the online orders' amounts = the payments that made orders;
 *              the standing ones', less what they record as refunded = the
 *              payments, less what went back at paysink (refunds that
 *              succeeded, disputes), less what the venue keeps for no
 *              standing order (refunds that failed, delayed payments whose
 *              end the box never heard), plus what went back that the box
 *              never heard of
 * A payment the record says was made before its hold's end and that was
 * refunded all the same (it reached the box after the end, and its seats
 * were gone by then) is allowed by the rule above; it is counted
 * (refunds_of_payments_made_in_time) and named on stderr.
 *   webhooks   every event of a kind the box applies (checkout.session.*,
 *              charge.refunded, charge.dispute.*, the refund updates) that
 *              it answered 2xx is in processed_jobs (stripe:<event id>),
 *              once; every such row names an event of the record
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "shopcheck.h"

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

/* one field of an object of the record: its key, where it goes, as what */
struct jfield {
	const char *key;
	size_t off, size;		/* size: a string's room */
	enum { F_STR, F_NUM, F_BOOL } kind;
};

#define J_STR(T, F, K) { K, offsetof(struct T, F), sizeof ((struct T *)0)->F, F_STR }
#define J_NUM(T, F, K) { K, offsetof(struct T, F), 0, F_NUM }
#define J_BOOL(T, F, K) { K, offsetof(struct T, F), 0, F_BOOL }

static const struct jfield session_fields[] = {
	J_STR(rsess, id, "id"), J_STR(rsess, hold, "client_reference_id"),
	J_STR(rsess, status, "status"), J_STR(rsess, pi, "payment_intent"),
	J_STR(rsess, currency, "currency"), J_STR(rsess, pi_status, "payment_intent_status"),
	J_STR(rsess, method, "payment_method"), J_STR(rsess, charge_status, "charge_status"),
	J_NUM(rsess, charges, "charges"), J_NUM(rsess, amount, "amount_total"),
	J_NUM(rsess, refunded, "amount_refunded"), J_NUM(rsess, paid_at, "paid_at"),
	J_BOOL(rsess, disputed, "disputed"), { NULL, 0, 0, F_STR }
};
static const struct jfield refund_fields[] = {
	J_STR(rref, id, "id"), J_STR(rref, pi, "payment_intent"),
	J_STR(rref, key, "idempotency_key"), J_STR(rref, session, "session"),
	J_STR(rref, status, "status"), J_STR(rref, source, "source"),
	J_NUM(rref, amount, "amount"), J_NUM(rref, settled_at, "settled_at"),
	{ NULL, 0, 0, F_STR }
};
static const struct jfield dispute_fields[] = {
	J_STR(rdisp, pi, "payment_intent"), J_STR(rdisp, reason, "reason"),
	J_STR(rdisp, status, "status"), J_NUM(rdisp, amount, "amount"), { NULL, 0, 0, F_STR }
};
static const struct jfield event_fields[] = {
	J_STR(revt, id, "id"), J_STR(revt, type, "type"), J_STR(revt, session, "session"),
	J_NUM(revt, delivered_ok, "delivered_ok"), J_NUM(revt, attempts, "attempts"),
	J_NUM(revt, gave_up, "gave_up"), J_BOOL(revt, dropped, "dropped"),
	J_BOOL(revt, duplicated, "duplicated"), { NULL, 0, 0, F_STR }
};

/* the record's list name, each object's fields into a new slot of *arrp */
static int load_list(json_t *doc, const char *name, void *arrp, long *n, size_t each,
		     const struct jfield *fields)
{
	const struct jfield *f;
	json_t *x;
	size_t i;

	json_array_foreach(json_object_get(doc, name), i, x) {
		char *obj = push(arrp, n, each);

		if (!obj)
			return -1;
		for (f = fields; f->key; f++) {
			if (f->kind == F_STR)
				copy(obj + f->off, f->size, jstr(x, f->key));
			else if (f->kind == F_NUM)
				*(long long *)(obj + f->off) = jnum(x, f->key);
			else
				*(int *)(obj + f->off) = json_is_true(json_object_get(x, f->key));
		}
	}
	return 0;
}

static int load_record(struct shop *S)
{
	struct verdict *v = S->v;
	json_error_t jerr;
	json_t *doc = json_load_file(v->record_path, 0, &jerr);
	int rc;

	if (!doc) {
		broken(v, "shop: paysink's record %s: %s", v->record_path, jerr.text);
		return -1;
	}
	rc = load_list(doc, "sessions", &S->s, &S->ns, sizeof *S->s, session_fields) == 0 &&
	     load_list(doc, "refunds", &S->r, &S->nr, sizeof *S->r, refund_fields) == 0 &&
	     load_list(doc, "disputes", &S->dp, &S->ndp, sizeof *S->dp, dispute_fields) == 0 &&
	     load_list(doc, "events", &S->e, &S->ne, sizeof *S->e, event_fields) == 0 ? 0 : -1;
	json_decref(doc);
	if (rc != 0)
		broken(v, "shop: out of memory");
	return rc;
}

/* each session's refunds, dispute and heard events added up; what went
 * back at paysink, and what the venue keeps and owes (failed refunds) */
static void derive(struct shop *S)
{
	long i, si;

	for (i = 0; i < S->ns; i++)
		S->s[i].order = S->s[i].hold_row = S->s[i].api = S->s[i].dispute = -1;

	for (i = 0; i < S->nr; i++) {
		const struct rref *r = &S->r[i];
		int failed = strcmp(r->status, "failed") == 0;
		struct rsess *s;

		if ((si = sess_by_pi(S, r->pi)) < 0)
			continue;	/* named by check_payments */
		s = &S->s[si];
		if (strcmp(r->source, "dashboard") == 0) {
			s->n_dash++;
			s->dash_sum += failed ? 0 : r->amount;
		} else {
			s->n_api++;
			s->n_api_failed += failed;
			s->api_sum += failed ? 0 : r->amount;
			s->api = i;
		}
		if (strcmp(r->status, "succeeded") == 0)
			S->gone_minor += r->amount;
	}
	for (i = 0; i < S->ndp; i++)
		if ((si = sess_by_pi(S, S->dp[i].pi)) >= 0) {
			struct rsess *s = &S->s[si];

			s->dispute = i;	/* what no refund gave back, the bank took */
			S->gone_minor += s->amount - s->api_sum - s->dash_sum;
		}
	for (i = 0; i < S->ne; i++) {
		const struct revt *e = &S->e[i];
		struct rsess *s;

		if ((si = sess_by_id(S, e->session)) < 0)
			continue;
		s = &S->s[si];
		s->n_refunded += strcmp(e->type, "charge.refunded") == 0;
		if (e->delivered_ok <= 0)
			continue;
		s->heard_ok |= strcmp(e->type, "checkout.session.async_payment_succeeded") == 0;
		s->heard_failed |= strcmp(e->type, "checkout.session.async_payment_failed") == 0;
		s->heard_dispute |= strcmp(e->type, "charge.dispute.created") == 0;
		s->heard_refunded += strcmp(e->type, "charge.refunded") == 0;
	}
	for (i = 0; i < S->ns; i++)	/* a refund the box made, failed: owed at the window */
		if (S->s[i].n_api_failed && !S->s[i].api_sum)
			S->kept_minor += S->s[i].amount;
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
	copy(h->currency, sizeof h->currency, vals[10]);
	h->mailed = num(vals[11]) != 0;
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
	o->refunded = num(vals[9]);
	o->disputed_at = num(vals[10]);
	copy(o->dispute, sizeof o->dispute, vals[11]);
	o->cancelled_at = num(vals[12]);
	o->by_stripe = (long)num(vals[13]);
	o->live_unadmitted = (long)num(vals[14]);
	o->admitted_after = (long)num(vals[15]);
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
	copy(d->status, sizeof d->status, vals[9]);
	d->failed = num(vals[10]) != 0;
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

/* the moment an order's money went back as the box knows it: the first of
 * its dispute and its cancellation */
#define BACK_AT "CASE WHEN o.disputed_at IS NOT NULL AND (o.cancelled_at IS NULL OR " \
	"o.disputed_at < o.cancelled_at) THEN o.disputed_at ELSE o.cancelled_at END"

static int load_db(struct shop *S, struct vdb *db)
{
	static const char holds[] =
		"SELECT h.id, h.public_id, h.state, coalesce(h.session_id, ''), "
		"coalesce(h.payment_ref, ''), coalesce(h.order_id, 0), h.amount_minor, h.seats, "
		"h.event_id, h.expires_at, upper(h.currency), CASE WHEN EXISTS (SELECT 1 FROM "
		"effects e WHERE e.subject = 'hold:' || h.public_id AND e.kind = 'mail' AND "
		"e.done_at IS NOT NULL) THEN 1 ELSE 0 END FROM holds h ORDER BY h.id";
	static const char orders[] =
		"SELECT o.id, o.public_id, coalesce(o.payment_ref, ''), coalesce(o.amount_minor, -1), "
		"upper(coalesce(o.currency, '')), CASE WHEN o.cancelled_at IS NULL THEN 0 ELSE 1 END, "
		"o.seats, o.event_id, CASE WHEN EXISTS (SELECT 1 FROM email_sends s WHERE "
		"s.order_id = o.id AND s.kind = 'tickets' AND s.sent_at IS NOT NULL) THEN 1 ELSE 0 "
		"END, coalesce(o.refunded_minor, -1), coalesce(o.disputed_at, 0), "
		"coalesce(o.dispute, ''), coalesce(o.cancelled_at, 0), (SELECT count(*) FROM "
		"order_changes c WHERE c.order_id = o.id AND c.kind = 'cancel' AND c.actor = "
		"'stripe'), (SELECT count(*) FROM tickets t WHERE t.order_id = o.id AND "
		"t.scanned_at IS NULL AND t.cancelled_at IS NULL), (SELECT count(*) FROM scans s "
		"JOIN tickets t ON t.id = s.ticket_id WHERE t.order_id = o.id AND s.outcome = "
		"'admitted' AND s.at >= " BACK_AT ") FROM orders o WHERE o.payment = 'online' "
		"ORDER BY o.id";
	static const char refunds[] =
		"SELECT r.payment_ref, r.reason, r.via, CASE WHEN r.done_at IS NULL THEN 0 ELSE 1 "
		"END, r.amount_minor, coalesce(r.hold_id, 0), coalesce(r.order_id, 0), CASE WHEN "
		"EXISTS (SELECT 1 FROM effects e WHERE e.subject = 'refund:' || r.payment_ref AND "
		"e.kind = 'mail' AND e.done_at IS NOT NULL) THEN 1 ELSE 0 END, upper(r.currency), "
		"coalesce(r.status, ''), CASE WHEN r.failed_at IS NULL THEN 0 ELSE 1 END "
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

long sess_by_id(const struct shop *S, const char *id)
{
	long i;

	for (i = 0; id[0] && i < S->ns; i++)
		if (strcmp(S->s[i].id, id) == 0)
			return i;
	return -1;
}

long sess_by_pi(const struct shop *S, const char *pi)
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

long order_by_pi(const struct shop *S, const char *pi, long *count)
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

long dref_by_pi(const struct shop *S, const char *pi)
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

long keys_for(const struct shop *S, const char *key)
{
	long i, c = 0;

	for (i = 0; i < S->nkeys; i++)
		c += strcmp(S->keys[i], key) == 0;
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
			broken(v, "sessions: session %s was charged %lld times", s->id, s->charges);
		/* complete: paid, or paid by a delayed method (processing, or
		 * settled); charged: its payment succeeded */
		if ((strcmp(s->status, "complete") == 0) != (s->pi[0] != '\0') ||
		    (s->charges == 1) != (strcmp(s->pi_status, "succeeded") == 0))
			broken(v, "sessions: session %s is %s with %lld charges and payment '%s' (%s)",
			       s->id, s->status, s->charges, s->pi, s->pi_status);
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

/* a paid session's order: the payment's amount, its hold's, its email; a
 * refund by the box only when the box cancelled it */
static void paid_order(struct shop *S, long i, long oi)
{
	struct verdict *v = S->v;
	struct rsess *s = &S->s[i];
	struct dorder *o = &S->o[oi];
	struct dhold *h = s->hold_row >= 0 ? &S->h[s->hold_row] : NULL;
	long di = dref_by_pi(S, s->pi);
	char key[ID_MAX + 16];

	s->order = oi;
	if (o->amount != s->amount || strcasecmp(o->currency, s->currency) != 0 ||
	    (h && (h->amount != o->amount || strcasecmp(h->currency, o->currency) != 0)))
		broken(v, "payments: order %s records %lld %s, its payment %s took %lld %s, its "
		       "hold asked %lld %s", o->pub, o->amount, o->currency, s->pi, s->amount,
		       s->currency, h ? h->amount : -1, h ? h->currency : "-");
	if (!h || strcmp(h->state, "ordered") != 0 || h->order_id != o->id ||
	    strcmp(h->pi, s->pi) != 0)
		broken(v, "payments: order %s's hold %s is %s (order %lld, payment '%s')", o->pub,
		       s->hold, h ? h->state : "missing", h ? h->order_id : 0, h ? h->pi : "");
	if (!o->cancelled && !o->mailed)
		broken(v, "payments: order %s (payment %s) has no ticket email marked sent", o->pub,
		       s->pi);
	if (!o->cancelled && s->n_api)
		broken(v, "payments: payment %s made order %s and was refunded by the box too",
		       s->pi, o->pub);
	snprintf(key, sizeof key, "refunded-%s", s->pi);
	if (keys_for(S, key))
		broken(v, "payments: payment %s made order %s, and its buyer got %ld refund emails",
		       s->pi, o->pub, keys_for(S, key));
	back_paid_order(S, i, oi);	/* the money given back outside the box */
	/* standing, or cancelled by it, or all of it back in the dashboard
	 * first (back_paid_order judged that) */
	if (!o->cancelled || o->by_stripe || (s->n_api == 0 && s->dash_sum >= s->amount))
		return;
	/* cancelled by the box: one refund of what is left of it (a part
	 * refunded in the dashboard before is gone), under refund-<order> */
	snprintf(key, sizeof key, "refund-%s", o->pub);
	s->refund_key_ok = s->api >= 0 && strcmp(S->r[s->api].key, key) == 0;
	if (s->n_api != 1 || !s->refund_key_ok ||
	    S->r[s->api].amount != s->amount - s->dash_sum)
		broken(v, "payments: order %s was cancelled; its payment %s has %ld refunds by the "
		       "box (of %lld, key %s)", o->pub, s->pi, s->n_api,
		       s->api >= 0 ? S->r[s->api].amount : 0, s->refund_key_ok ? "right" : "wrong");
	if (di < 0 || strcmp(S->d[di].reason, "cancelled") != 0)
		broken(v, "payments: cancelled order %s owes no refund of %s", o->pub, s->pi);
	v->refunds_cancelled++;
}

/* a paid session with no order: its seats were gone (or its amount not
 * its hold's), the box's refund of it all and, once paid back, one email */
static void paid_refunded(struct shop *S, long i)
{
	struct verdict *v = S->v;
	struct rsess *s = &S->s[i];
	struct dhold *h = s->hold_row >= 0 ? &S->h[s->hold_row] : NULL;
	long di = dref_by_pi(S, s->pi), msgs;
	const struct rref *r = s->api >= 0 ? &S->r[s->api] : NULL;
	int in_time = h && (s->paid_at + 1) * 1000 <= h->expires_at;
	char key[ID_MAX + 16];

	S->nonorder_minor += s->amount;
	if (!r) {
		broken(v, "payments: payment %s (session %s, hold %s) made no order and no refund",
		       s->pi, s->id, s->hold);
		return;
	}
	v->refunds_late++;
	v->refunded_minor += r->amount;
	if (in_time) {	/* the rule allows it; the buyer paid in time all the same */
		v->refunds_of_payments_in_time++;
		fprintf(stderr, "chaos: note: payment %s (hold %s) was made at %lld s, within its "
			"hold (to %lld ms), and refunded as late: no order was made in time\n",
			s->pi, s->hold, s->paid_at, h->expires_at);
	}
	snprintf(key, sizeof key, "refund-%s", s->pi);
	if (s->n_api != 1 || strcmp(r->key, key) != 0 || r->amount != s->amount)
		broken(v, "payments: late payment %s has %ld refunds by the box, the last of %lld "
		       "for %lld (key %s)", s->pi, s->n_api, r->amount, s->amount, r->key);
	if (di < 0 || (strcmp(S->d[di].reason, "late") && strcmp(S->d[di].reason, "mismatch")) ||
	    strcmp(S->d[di].via, "provider") != 0 || S->d[di].amount != s->amount ||
	    (h && S->d[di].hold_id != h->id))
		broken(v, "payments: payment %s was refunded at the provider, and the box's refund "
		       "row is %s", s->pi, di < 0 ? "missing" : "not its late refund");
	if (!h || strcmp(h->state, "refunded") != 0 || strcmp(h->pi, s->pi) != 0)
		broken(v, "payments: late payment %s's hold %s is %s, not refunded", s->pi, s->hold,
		       h ? h->state : "missing");
	/* one email once paid back; none while a refund that failed is owed */
	snprintf(key, sizeof key, "refunded-%s", s->pi);
	msgs = keys_for(S, key);
	if (msgs > 1)
		v->duplicates += msgs - 1;
	if (strcmp(r->status, "succeeded") == 0 && (msgs != 1 || di < 0 || !S->d[di].mailed))
		broken(v, "payments: late payment %s was paid back: its buyer got %ld refund emails, "
		       "not 1 marked sent", s->pi, msgs);
	if (strcmp(r->status, "succeeded") != 0 && msgs)
		broken(v, "payments: late payment %s's refund is %s at paysink, and its buyer got "
		       "%ld refund emails", s->pi, r->status, msgs);
}

/* one paid session: its order, or its refund, or (its delayed payment's
 * end unheard) its hold still pending; never two of them */
static void check_paid(struct shop *S, long i)
{
	struct verdict *v = S->v;
	struct rsess *s = &S->s[i];
	long n_orders, oi = order_by_pi(S, s->pi, &n_orders);

	v->paid++;
	v->paid_minor += s->amount;
	if (n_orders > 1)
		broken(v, "payments: payment %s made %ld orders", s->pi, n_orders);
	if (s->api_sum + s->dash_sum != s->refunded)
		broken(v, "payments: session %s counts %lld refunded, its refunds add up to %lld",
		       s->id, s->refunded, s->api_sum + s->dash_sum);
	if (oi >= 0)
		paid_order(S, i, oi);
	else if (!back_pending_paid(S, i))
		paid_refunded(S, i);
}

static void check_payments(struct shop *S)
{
	struct verdict *v = S->v;
	long i, k;

	for (i = 0; i < S->ns; i++)
		if (S->s[i].charges == 1)
			check_paid(S, i);
	/* the other way: every online order, refund and refund email has its payment */
	for (i = 0; i < S->no; i++) {
		long si = sess_by_pi(S, S->o[i].pi);

		v->online_minor += S->o[i].amount;
		if (!S->o[i].cancelled)
			v->online_live_minor += S->o[i].amount -
				(S->o[i].refunded > 0 ? S->o[i].refunded : 0);
		if (si < 0 || S->s[si].charges != 1)
			broken(v, "orders: online order %s names payment '%s', which no session of "
			       "the provider was paid with", S->o[i].pub, S->o[i].pi);
	}
	for (i = 0; i < S->nr; i++) {
		long si = sess_by_pi(S, S->r[i].pi);

		if (si < 0 || S->s[si].charges != 1)
			broken(v, "orders: the provider refunded '%s', which no paid session names",
			       S->r[i].pi);
		for (k = 0; k < i && strcmp(S->r[i].source, "api") == 0; k++)
			if (strcmp(S->r[k].pi, S->r[i].pi) == 0 && strcmp(S->r[k].source, "api") == 0)
				broken(v, "orders: the box refunded payment %s twice at the provider",
				       S->r[i].pi);
	}
	for (i = 0; i < S->nd; i++) {
		const struct dref *d = &S->d[i];
		long si = sess_by_pi(S, d->pi), n_orders;

		if (strcmp(d->via, "provider") != 0)
			continue;
		/* one the provider made, or none because the dashboard had given it
		 * all back first (the box found it refunded already) */
		if (si < 0 || (S->s[si].n_api != 1 &&
			       !(S->s[si].n_api == 0 && d->done &&
				 S->s[si].dash_sum >= S->s[si].amount)))
			broken(v, "orders: the box owes a refund of %s at the provider, and the "
			       "provider made %ld", d->pi, si < 0 ? 0 : S->s[si].n_api);
		if (strcmp(d->reason, "late") == 0 && order_by_pi(S, d->pi, &n_orders) >= 0)
			broken(v, "orders: payment %s made an order, and the box refunded it as late",
			       d->pi);
	}
	for (i = 0; i < S->nkeys; i++) {
		const char *pi = S->keys[i] + strlen("refunded-");
		long di;

		if (strncmp(S->keys[i], "refunded-", 9) != 0)
			continue;
		v->refund_msgs++;
		if ((di = dref_by_pi(S, pi)) < 0 || strcmp(S->d[di].reason, "cancelled") == 0) {
			v->duplicates++;	/* an email for an intent never made */
			broken(v, "orders: the mail provider holds a refund email %s for a payment not "
			       "refunded late", S->keys[i]);
		}
	}
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
		/* pending: a delayed payment (backcheck.c judges its end) */
		if (strcmp(h->state, "pending") == 0 &&
		    (h->sess < 0 || strcmp(S->s[h->sess].method, "card") == 0 ||
		     !S->s[h->sess].pi[0]))
			broken(v, "holds: hold %s is pending, and its session was paid by %s",
			       h->pub, h->sess < 0 ? "nobody" : S->s[h->sess].method);
		if (strcmp(h->state, "expired") != 0 || !h->session[0] || h->sess < 0)
			continue;
		if (strcmp(S->s[h->sess].status, "expired") != 0 || S->s[h->sess].charges)
			broken(v, "holds: hold %s ended expired, and its session %s is %s at the "
			       "provider (%lld charges)", h->pub, h->session, S->s[h->sess].status,
			       S->s[h->sess].charges);
	}
}

/* what a buyer did with its money after paying (the log's later=) is what
 * paysink records of the session */
static void buyer_later(struct shop *S, const char *choice, const char *later,
			const struct rsess *s)
{
	struct verdict *v = S->v;
	long long n = 0;
	int ok = 1;

	if (strncmp(choice, "delayed", 7) == 0) {	/* paid by a delayed method */
		ok = strcmp(s->status, "complete") == 0 && strcmp(s->method, "card") != 0 &&
		     (strcmp(later, "settled-succeeded") == 0 ? strcmp(s->pi_status, "succeeded") == 0
		      : strcmp(later, "settled-failed") == 0 ? strcmp(s->charge_status, "failed") == 0
		      : strcmp(s->pi_status, "processing") == 0);
	} else if (strcmp(later, "refund=all") == 0) {
		ok = s->n_dash == 1 && s->dash_sum == s->amount;
	} else if (sscanf(later, "refund-part=%lld", &n) == 1) {
		ok = s->n_dash == 1 && s->dash_sum == n && n < s->amount;
	} else if (strncmp(later, "dispute=", 8) == 0) {
		ok = s->dispute >= 0 && strcmp(S->dp[s->dispute].reason, later + 8) == 0;
	} else {	/* nothing done outside the box (skip-..., or none planned) */
		ok = s->n_dash == 0 && s->dispute < 0;
		v->back_skipped += strncmp(later, "skip-", 5) == 0;
	}
	if (!ok)
		broken(v, "buyers: the buyer of session %s (%s) did %s; paysink records it %s, "
		       "payment %s (%s, charge %s), %ld dashboard refunds of %lld, %s", s->id,
		       choice, later, s->status, s->pi_status, s->method, s->charge_status,
		       s->n_dash, s->dash_sum, s->dispute >= 0 ? "disputed" : "no dispute");
	if (strcmp(choice, "delayed_ok") == 0 || strcmp(choice, "delayed_failed") == 0)
		return;
	if (s->charges != 1)	/* a card: charged at once */
		broken(v, "buyers: the provider took the payment of session %s, and records %lld "
		       "charges", s->id, s->charges);
}

/* one buyer's line of the soak's log against the record and the database */
static void check_buyer(struct shop *S, const char *line)
{
	struct verdict *v = S->v;
	char choice[16], outcome[16], session[ID_MAX], hold[32], paid[4], ret[4], later[64];
	long si, hi;
	struct rsess *s;

	v->buyers_logged++;
	verify_field(line, "choice", choice, sizeof choice);
	verify_field(line, "outcome", outcome, sizeof outcome);
	verify_field(line, "session", session, sizeof session);
	verify_field(line, "hold", hold, sizeof hold);
	verify_field(line, "paid", paid, sizeof paid);
	verify_field(line, "returned", ret, sizeof ret);
	verify_field(line, "later", later, sizeof later);
	if (strcmp(outcome, "soldout") == 0 || strcmp(outcome, "left") == 0) {
		*(outcome[0] == 's' ? &v->buyers_soldout : &v->buyers_left) += 1;
		return;
	}
	v->returned += ret[0] == '1';
	if ((si = sess_by_id(S, session)) < 0) {
		broken(v, "buyers: a buyer was sent to session %s, which the provider never made",
		       session);
		return;
	}
	s = &S->s[si];
	if (strcmp(s->hold, hold) != 0 || (hi = hold_by_pub(S, hold)) < 0 ||
	    strcmp(S->h[hi].session, session) != 0) {
		broken(v, "buyers: the buyer of session %s was told hold %s; the provider names %s "
		       "and the database %s", session, hold, s->hold,
		       (hi = hold_by_pub(S, hold)) >= 0 ? S->h[hi].session : "no such hold");
		return;
	}
	if (S->h[hi].logged++)
		broken(v, "buyers: two buyers were given hold %s", hold);
	if (paid[0] == '1') {
		s->paid_logged = 1;
		buyer_later(S, choice, later, s);
		if (strcmp(choice, "late") == 0) {
			v->paid_late++;
			if ((s->paid_at + 1) * 1000 <= S->h[hi].expires_at)
				broken(v, "buyers: the late payment of %s came at %lld s, before its "
				       "hold's end (%lld ms)", session, s->paid_at,
				       S->h[hi].expires_at);
		}
		return;
	}
	if (strcmp(choice, "abandon") == 0)
		v->abandoned++;
	else if (paid[0] == '0')
		v->late_refused++;
	if (s->charges != 0 || strcmp(s->status, "expired") != 0 ||
	    strcmp(S->h[hi].state, "expired") != 0)
		broken(v, "buyers: session %s was never paid (%s); it is %s with %lld charges at the "
		       "provider, its hold %s", session, choice, s->status, s->charges,
		       S->h[hi].state);
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
	while (fgets(line, sizeof line, f))
		if (strncmp(line, "buyer ", 6) == 0)
			check_buyer(S, line);
	fclose(f);
	for (i = 0; i < S->ns; i++)
		if (S->s[i].pi[0] && !S->s[i].paid_logged)
			broken(v, "buyers: session %s was paid (%s), and no buyer was told it paid",
			       S->s[i].id, S->s[i].pi_status);
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

/* the online orders' amounts are the payments that made orders; the
 * standing ones', less what they record as refunded, are what the venue
 * keeps by paysink's record: the payments, less what went back (refunds,
 * disputes), less what it keeps for no standing order, plus what went back
 * that the box never heard of */
static void check_money(struct shop *S)
{
	struct verdict *v = S->v;
	long long want = v->paid_minor - S->gone_minor - S->kept_minor + S->unheard_minor;

	if (v->online_minor != v->paid_minor - S->nonorder_minor)
		broken(v, "money: the online orders add up to %lld; the payments to %lld, those "
		       "that made no order to %lld", v->online_minor, v->paid_minor,
		       S->nonorder_minor);
	if (v->online_live_minor != want)
		broken(v, "money: the standing online orders keep %lld; the payments are %lld, of "
		       "which went back %lld, kept for no order %lld, went back unheard %lld",
		       v->online_live_minor, v->paid_minor, S->gone_minor, S->kept_minor,
		       S->unheard_minor);
}

/* the events the box applies and records in processed_jobs */
static int applied_type(const char *type)
{
	static const char *const types[] = { "charge.refunded", "charge.dispute.created",
					     "charge.dispute.closed", "charge.refund.updated",
					     "refund.updated", "refund.failed", NULL };
	int i;

	if (strncmp(type, "checkout.session.", 17) == 0)
		return 1;
	for (i = 0; types[i]; i++)
		if (strcmp(type, types[i]) == 0)
			return 1;
	return 0;
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
		if (e->delivered_ok > 0 && applied_type(e->type) && !processed_has(S, e->id))
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

void shop_verify(struct verdict *v, struct vdb *db, char *const *keys, long n_keys)
{
	struct shop S;

	memset(&S, 0, sizeof S);
	S.v = v;
	S.keys = keys;
	S.nkeys = n_keys;
	if (load_record(&S) == 0 && load_db(&S, db) == 0) {
		v->shop_checked = 1;
		derive(&S);
		check_sessions(&S);
		check_payments(&S);
		back_failed(&S);
		back_orders(&S);
		back_refunds(&S);
		check_holds(&S);
		check_buyers(&S);
		check_seats(&S);
		check_money(&S);
		check_webhooks(&S);
	}
	free(S.s);
	free(S.r);
	free(S.dp);
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
	printf("buyers_left_the_line %ld\n", v->buyers_left);
	printf("delayed_succeeded %ld\n", v->delayed_ok);
	printf("delayed_failed %ld\n", v->delayed_failed);
	printf("delayed_unheard %ld\n", v->delayed_unheard);
	printf("payment_failed_emails %ld\n", v->failed_msgs);
	printf("refunded_in_dashboard %ld\n", v->back_full);
	printf("refunded_in_part %ld\n", v->back_part);
	printf("refunded_in_part_minor %lld\n", v->back_part_minor);
	printf("disputed %ld\n", v->back_disputes);
	printf("orders_cancelled_money_back %ld\n", v->back_cancelled);
	printf("money_back_unheard %ld\n", v->back_unheard);
	printf("money_back_skipped %ld\n", v->back_skipped);
	printf("box_refunds_failed %ld\n", v->box_refunds_failed);
	printf("box_refunds_kept_pending %ld\n", v->box_refunds_pending_seen);
	printf("shop_later_looks_left %ld\n", v->shop_later_looks);
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
