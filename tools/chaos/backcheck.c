/*
 * backcheck.c: the shop's verdict on the money after the sale
 * (shopcheck.h), from paysink's record and the database alone:
 *   delayed   a delayed payment that succeeded made its order (or, its
 *             seats gone, its refund: shopcheck.c's rule); one that failed
 *             made none, its hold 'failed' and its buyer one email
 *             (payment-failed-<hold>, marked sent); no hold failed, and no
 *             such email, without a failed payment.  A hold still 'pending'
 *             is allowed only when no event that ended its payment reached
 *             the box (its webhook dropped: the box looks again in 6 hours);
 *             counted and named
 *   back      a payment given back in full in paysink's dashboard, or
 *             disputed, cancelled its order (cancelled_at, the tickets not
 *             admitted cancelled, one change by actor 'stripe', the dispute
 *             recorded, no refund row: the money is gone already); a part
 *             given back is recorded (refunded_minor, paysink's total) and
 *             the order stands; no order records money back paysink never
 *             gave.  When every event that told it was lost, the order
 *             stands: counted and named
 *   door      no ticket of such an order admitted at or after the moment
 *             its money went back (the scans table)
 *   refunds   each refund the box made is as paysink ended it: succeeded
 *             and done (done_at), or failed and owed at the window
 *             (failed_at, never done); none still pending after the drain;
 *             its amount the payment's
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "shopcheck.h"

/* the hold a session's payment was for, or NULL */
static struct dhold *hold_of(struct shop *S, const struct rsess *s)
{
	return s->hold_row >= 0 ? &S->h[s->hold_row] : NULL;
}

int back_pending_paid(struct shop *S, long si)
{
	struct verdict *v = S->v;
	const struct rsess *s = &S->s[si];
	const struct dhold *h = hold_of(S, s);

	if (!h || strcmp(h->state, "pending") != 0)
		return 0;
	S->nonorder_minor += s->amount;	/* the venue has it, the box does not know */
	S->kept_minor += s->amount;
	if (s->heard_ok) {
		broken(v, "delayed: payment %s succeeded, the box answered its event 2xx, and its "
		       "hold %s is still pending", s->pi, h->pub);
		return 1;
	}
	v->delayed_unheard++;
	fprintf(stderr, "chaos: note: delayed payment %s (hold %s) succeeded at paysink, no "
		"event that said so reached the box, and its hold waits pending for the box's "
		"next look\n", s->pi, h->pub);
	return 1;
}

/* what the payment of session s gave back outside the box (paysink) */
static long long gone_of(const struct rsess *s)
{
	long long given = s->api_sum + s->dash_sum;

	return s->dispute >= 0 ? s->amount : given;
}

/* a standing order whose money went back and the box never heard: allowed,
 * counted, named; unheard: what went back that the order does not record */
static void unheard(struct shop *S, const struct rsess *s, const struct dorder *o,
		    const char *what)
{
	long long net = o->amount - (o->refunded > 0 ? o->refunded : 0);

	S->v->back_unheard++;
	S->unheard_minor += net - (s->amount - gone_of(s));
	fprintf(stderr, "chaos: note: order %s (payment %s) was %s at paysink, no event that "
		"said so reached the box, and the order stands\n", o->pub, s->pi, what);
}

/* an order the box cancelled itself (an event's cancel, the box office)
 * while the report of its dashboard refund never reached it: its refund
 * found the payment refunded already (charge_already_refunded), made none
 * and was marked done.  Allowed, counted, named. */
static int already_back(struct shop *S, const struct rsess *s, const struct dorder *o)
{
	long di = dref_by_pi(S, s->pi);

	if (s->dispute >= 0 || o->by_stripe || s->heard_refunded || s->n_api || di < 0 ||
	    !S->d[di].done || S->d[di].failed)
		return 0;
	S->v->back_unheard++;
	fprintf(stderr, "chaos: note: order %s (payment %s) was refunded in full at paysink, no "
		"event that said so reached the box, and the box's own refund of it found it "
		"refunded already\n", o->pub, s->pi);
	return 1;
}

/* money back in full, or a dispute: the order cancelled for it */
static void back_all(struct shop *S, const struct rsess *s, const struct dorder *o)
{
	struct verdict *v = S->v;
	int dispute = s->dispute >= 0;
	const char *what = dispute ? "disputed" : "refunded in full";

	*(dispute ? &v->back_disputes : &v->back_full) += 1;
	if (!o->cancelled) {
		if (dispute ? s->heard_dispute : s->heard_refunded > 0)
			broken(v, "back: order %s was %s at paysink, the box answered the event 2xx, "
			       "and the order stands", o->pub, what);
		else
			unheard(S, s, o, what);
		return;
	}
	v->back_cancelled += o->by_stripe > 0;
	if (already_back(S, s, o))
		return;
	if (o->by_stripe != 1 || dref_by_pi(S, s->pi) >= 0)
		broken(v, "back: order %s was %s at paysink; it has %ld cancellations by stripe and "
		       "%s refund row", o->pub, what, o->by_stripe,
		       dref_by_pi(S, s->pi) >= 0 ? "a" : "no");
	if (dispute && (!o->disputed_at || !strstr(o->dispute, S->dp[s->dispute].reason)))
		broken(v, "back: order %s was disputed (%s) at paysink, and records dispute '%s' "
		       "at %lld", o->pub, S->dp[s->dispute].reason, o->dispute, o->disputed_at);
	if (!dispute && o->refunded != s->refunded && s->heard_refunded == s->n_refunded)
		broken(v, "back: order %s was refunded %lld at paysink, and records %lld", o->pub,
		       s->refunded, o->refunded);
}

void back_paid_order(struct shop *S, long si, long oi)
{
	struct verdict *v = S->v;
	const struct rsess *s = &S->s[si];
	const struct dorder *o = &S->o[oi];

	if (s->dispute >= 0 || s->dash_sum >= s->amount) {
		back_all(S, s, o);
		return;
	}
	if (o->by_stripe || o->disputed_at)
		broken(v, "back: order %s was cancelled for its money back (disputed at %lld), and "
		       "paysink gave back %lld of %lld, undisputed", o->pub, o->disputed_at,
		       s->dash_sum, s->amount);
	if (!s->n_dash) {	/* the box's own refund counts too: a cancelled order's */
		if (o->refunded > 0 && o->refunded != s->api_sum)
			broken(v, "back: order %s records %lld refunded, and paysink refunded %lld",
			       o->pub, o->refunded, s->api_sum);
		return;
	}
	v->back_part++;
	v->back_part_minor += s->dash_sum;
	if (s->heard_refunded == s->n_refunded ? o->refunded != s->refunded
					       : o->refunded > s->refunded)
		broken(v, "back: order %s records %lld refunded; paysink refunded %lld of it in its "
		       "dashboard (the box answered %ld of %ld such events 2xx)", o->pub, o->refunded,
		       s->refunded, s->heard_refunded, s->n_refunded);
	if (s->heard_refunded < s->n_refunded && !o->cancelled)
		unheard(S, s, o, "refunded in part");
}

/* one delayed payment that failed: its hold failed, one email; no order */
static void failed_one(struct shop *S, const struct rsess *s)
{
	struct verdict *v = S->v;
	const struct dhold *h = hold_of(S, s);
	char key[64];
	long msgs, n;

	v->delayed_failed++;
	if (order_by_pi(S, s->pi, &n) >= 0)
		broken(v, "delayed: payment %s failed, and made an order", s->pi);
	snprintf(key, sizeof key, "payment-failed-%s", h ? h->pub : "");
	msgs = h ? keys_for(S, key) : 0;
	if (msgs > 1)
		v->duplicates += msgs - 1;
	if (h && strcmp(h->state, "failed") == 0) {
		if (msgs != 1 || !h->mailed)
			broken(v, "delayed: payment %s failed; its hold %s's buyer got %ld emails "
			       "(%s marked sent)", s->pi, h->pub, msgs, h->mailed ? "one" : "none");
		return;
	}
	if (h && strcmp(h->state, "pending") == 0 && !s->heard_failed && !msgs) {
		v->delayed_unheard++;
		fprintf(stderr, "chaos: note: delayed payment %s (hold %s) failed at paysink, no "
			"event that said so reached the box, and its hold waits pending\n", s->pi,
			h->pub);
		return;
	}
	broken(v, "delayed: payment %s failed, and its hold %s is %s (the box answered the "
	       "event %s; %ld emails)", s->pi, h ? h->pub : "-", h ? h->state : "missing",
	       s->heard_failed ? "2xx" : "never", msgs);
}

void back_failed(struct shop *S)
{
	struct verdict *v = S->v;
	long i, hi;

	for (i = 0; i < S->ns; i++) {
		const struct rsess *s = &S->s[i];

		if (!s->pi[0] || strcmp(s->method, "card") == 0)
			continue;
		v->delayed_ok += strcmp(s->pi_status, "succeeded") == 0;
		if (strcmp(s->charge_status, "failed") == 0)
			failed_one(S, s);
	}
	for (i = 0; i < S->nh; i++) {
		const struct dhold *h = &S->h[i];

		if (strcmp(h->state, "failed") == 0 &&
		    (h->sess < 0 || strcmp(S->s[h->sess].charge_status, "failed") != 0))
			broken(v, "delayed: hold %s failed, and its payment did not", h->pub);
	}
	for (i = 0; i < S->nkeys; i++) {
		const char *pub = S->keys[i] + strlen("payment-failed-");

		if (strncmp(S->keys[i], "payment-failed-", 15) != 0)
			continue;
		v->failed_msgs++;
		for (hi = 0; hi < S->nh && strcmp(S->h[hi].pub, pub) != 0; hi++)
			;
		if (hi == S->nh || strcmp(S->h[hi].state, "failed") != 0) {
			v->duplicates++;	/* an email for an intent never made */
			broken(v, "delayed: the mail provider holds %s, and that hold's payment did "
			       "not fail", S->keys[i]);
		}
	}
}

void back_orders(struct shop *S)
{
	struct verdict *v = S->v;
	long i;

	for (i = 0; i < S->no; i++) {
		const struct dorder *o = &S->o[i];

		if (o->admitted_after)
			broken(v, "door: order %s's tickets were admitted %ld times after its money "
			       "went back", o->pub, o->admitted_after);
		if (o->cancelled && o->live_unadmitted)
			broken(v, "back: order %s is cancelled, and %ld of its tickets neither admitted "
			       "nor cancelled", o->pub, o->live_unadmitted);
		if (!o->by_stripe)
			continue;
		if (!o->cancelled || (!o->disputed_at && o->refunded < o->amount))
			broken(v, "back: order %s has a change by stripe; it is %scancelled, refunded "
			       "%lld of %lld, %sdisputed", o->pub, o->cancelled ? "" : "not ",
			       o->refunded, o->amount, o->disputed_at ? "" : "not ");
	}
}

void back_refunds(struct shop *S)
{
	struct verdict *v = S->v;
	long i, si;

	for (i = 0; i < S->nr; i++)
		v->box_refunds_pending_seen += strcmp(S->r[i].source, "api") == 0 &&
					       S->r[i].settled_at != 0;
	for (i = 0; i < S->nd; i++) {
		const struct dref *d = &S->d[i];
		const struct rref *r;
		int ok;

		if (strcmp(d->via, "provider") != 0 || (si = sess_by_pi(S, d->pi)) < 0 ||
		    S->s[si].api < 0)
			continue;	/* named by check_payments */
		r = &S->r[S->s[si].api];
		if (strcmp(r->status, "succeeded") == 0) {
			ok = d->done && !d->failed && strcmp(d->status, "succeeded") == 0;
		} else if (strcmp(r->status, "failed") == 0) {
			ok = d->failed && !d->done && strcmp(d->status, "failed") == 0;
			v->box_refunds_failed++;
		} else {
			ok = 0;	/* pending: the drain waits for the bank */
		}
		/* of it all, less what the dashboard gave back before */
		if (!ok || d->amount != r->amount ||
		    r->amount != S->s[si].amount - S->s[si].dash_sum)
			broken(v, "refunds: paysink's refund %s of %s (%lld) is %s; the box's is %s "
			       "(%s%s, %lld)", r->id, d->pi, r->amount, r->status, d->status,
			       d->done ? "done" : "not done", d->failed ? ", failed" : "",
			       d->amount);
	}
}
