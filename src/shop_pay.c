/*
 * shop_pay.c: the provider's word applied (shop_pay.h).
 */
#include "shop_pay.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "money_back.h"

enum sd_result shop_pay_session(struct db *db, const struct stripe_session *s, const char *type,
				const char *event_id, int64_t pending_max_ms,
				enum pay_outcome *out)
{
	struct pay_paid p = { s->id, s->payment_ref, s->amount_total, s->currency, event_id };

	*out = PAY_IGNORED;
	if (type && strcmp(type, "checkout.session.async_payment_failed") == 0)
		return pay_fail(db, s->id, event_id, out);
	if (type && strcmp(type, "checkout.session.expired") == 0)
		return pay_expire(db, s->id, event_id, out);
	switch (stripe_session_pay(s)) {
	case STRIPE_PAY_PAID:
		return pay_apply(db, &p, out, NULL);
	case STRIPE_PAY_FREE:
		p.payment_ref = NULL;	/* none was made: nothing to give back */
		return pay_apply(db, &p, out, NULL);
	case STRIPE_PAY_PENDING:
		return pay_pending(db, s->id, s->payment_ref, clock_now_ms() + pending_max_ms,
				   event_id, out);
	case STRIPE_PAY_ENDED:
		return pay_expire(db, s->id, event_id, out);
	case STRIPE_PAY_OPEN:
		break;
	}
	return SD_OK;
}

static const enum pay_outcome OF_BACK[] = { PAY_CANCELLED, PAY_RECORDED, PAY_IGNORED,
					    PAY_DUPLICATE };

/* a charge's refunds, as charge.refunded reports them */
static enum sd_result charge_back(struct db *db, const struct stripe_event *ev,
				  enum pay_outcome *out)
{
	const struct stripe_charge *c = &ev->charge;
	struct pay_back b = { c->payment_ref, 0, c->amount_refunded, c->amount, c->refunded,
			      c->currency, NULL, ev->id };
	enum back_outcome o = BACK_IGNORED;
	enum sd_result r = pay_money_back(db, &b, &o, NULL);

	*out = OF_BACK[o];
	return r;
}

/* a dispute, as charge.dispute.* reports it */
static enum sd_result dispute_back(struct db *db, const struct stripe_event *ev,
				   enum pay_outcome *out)
{
	const struct stripe_dispute *d = &ev->dispute;
	char what[120];
	struct pay_back b = { d->payment_ref, 1, d->amount, -1, 1, d->currency, what, ev->id };

	enum back_outcome o = BACK_IGNORED;
	enum sd_result r;

	snprintf(what, sizeof what, "%.50s, %.50s", d->reason[0] ? d->reason : "no reason",
		 d->status[0] ? d->status : "open");
	r = pay_money_back(db, &b, &o, NULL);
	*out = OF_BACK[o];
	return r;
}

static enum sd_result refund_word(struct db *db, const struct stripe_event *ev,
				  enum pay_outcome *out)
{
	const struct stripe_refund_view *f = &ev->refund;
	struct pay_refund_word w = { f->payment_ref, f->id, f->key, f->status, f->failure, ev->id };
	enum back_outcome o = BACK_IGNORED;
	enum sd_result r = pay_refund_word(db, &w, &o);

	*out = OF_BACK[o];
	return r;
}

enum sd_result shop_pay_event(struct db *db, const struct stripe_event *ev,
			      int64_t pending_max_ms, enum pay_outcome *out)
{
	*out = PAY_IGNORED;
	switch (ev->kind) {
	case STRIPE_OBJ_SESSION:
		if (strncmp(ev->type, "checkout.session.", 17) != 0)
			return SD_OK;
		return shop_pay_session(db, &ev->session, ev->type, ev->id, pending_max_ms, out);
	case STRIPE_OBJ_CHARGE:
		return strcmp(ev->type, "charge.refunded") == 0 ? charge_back(db, ev, out) : SD_OK;
	case STRIPE_OBJ_DISPUTE:
		return strncmp(ev->type, "charge.dispute.", 15) == 0 ? dispute_back(db, ev, out)
								      : SD_OK;
	case STRIPE_OBJ_REFUND:
		if (strcmp(ev->type, "charge.refund.updated") == 0 ||
		    strcmp(ev->type, "refund.updated") == 0 || strcmp(ev->type, "refund.failed") == 0)
			return refund_word(db, ev, out);
		return SD_OK;
	case STRIPE_OBJ_OTHER:
		break;
	}
	return SD_OK;
}
