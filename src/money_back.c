/*
 * money_back.c: money going back after an order, as the provider reports
 * it (money_back.h).
 */
#include "money_back.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "money.h"
#include "orders.h"
#include "refunds.h"

/* why the order is cancelled, for its change row and the box office */
static void why_of(const struct pay_back *b, char *out, size_t size)
{
	char amount[MONEY_TEXT_MAX];

	if (b->dispute) {
		snprintf(out, size, "the buyer's bank disputed the payment (%.100s)",
			 b->what && *b->what ? b->what : "no reason given");
		return;
	}
	money_plain(b->amount_minor < 0 ? 0 : b->amount_minor, b->currency, amount,
		    sizeof amount);
	snprintf(out, size, "the payment was refunded at the payment provider (%s %s)", amount,
		 b->currency);
}

/* the order's money back recorded, and the order cancelled when it all went back */
static enum sd_result back_in(struct db *db, const struct pay_back *b, enum pay_outcome *out,
			      char *order)
{
	struct order_cancel_result cr;
	char why[ORDER_REASON_MAX + 1];
	int64_t order_id = 0;
	enum sd_result r;
	int all;

	r = order_money_back(db, b->payment_ref, b->dispute ? -1 : b->amount_minor,
			     b->dispute ? (b->what && *b->what ? b->what : "disputed") : NULL,
			     &order_id, order);
	if (r == SD_NOT_FOUND) {	/* a late payment's refund, another shop's payment */
		*out = PAY_IGNORED;
		return SD_OK;
	}
	if (r != SD_OK)
		return r;
	*out = PAY_RECORDED;
	all = b->dispute || b->full ||
	      (b->charged_minor > 0 && b->amount_minor >= b->charged_minor);
	if (!all)
		return SD_OK;
	why_of(b, why, sizeof why);
	if ((r = order_cancel_in(db, order_id, "stripe", why, ORDER_CANCEL_MONEY_BACK, &cr)) !=
	    SD_OK)
		return r;
	if (!cr.already) {
		*out = PAY_CANCELLED;
		log_event(LOG_WARN, "order cancelled: its money went back", "order=%s why=\"%s\"",
			  order, why);
	}
	return SD_OK;
}

enum sd_result pay_money_back(struct db *db, const struct pay_back *b, enum pay_outcome *out,
			      char *order)
{
	char buf[ORDER_ID_MAX];
	enum sd_result r;
	int dup = 0;

	*out = PAY_IGNORED;
	if (!order)
		order = buf;
	order[0] = '\0';
	if (!b->payment_ref || !*b->payment_ref || !b->currency)
		return SD_OK;	/* a payment not made through a payment intent: none of ours */
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = pay_event_once(db, b->event_id, &dup)) == SD_OK) {
		if (dup)
			*out = PAY_DUPLICATE;
		else
			r = back_in(db, b, out, order);
	}
	return db_end(db, r);
}

/* w is the box's refund rf: its provider id, or (none recorded yet) its key */
static int ours(const struct refund_view *rf, const struct pay_refund_word *w)
{
	if (rf->window)
		return 0;
	if (rf->provider_refund_id[0])
		return w->refund_id && strcmp(rf->provider_refund_id, w->refund_id) == 0;
	return w->key && strcmp(rf->key, w->key) == 0;
}

enum sd_result pay_refund_word(struct db *db, const struct pay_refund_word *w,
			       enum pay_outcome *out)
{
	struct refund_view rf;
	enum refund_now now;
	enum sd_result r;
	int dup = 0;

	*out = PAY_IGNORED;
	if (!w->payment_ref || !*w->payment_ref || !w->status || !*w->status)
		return SD_OK;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = pay_event_once(db, w->event_id, &dup)) != SD_OK || dup) {
		*out = dup ? PAY_DUPLICATE : PAY_IGNORED;
		goto out;
	}
	if ((r = refund_of_payment(db, w->payment_ref, &rf)) == SD_NOT_FOUND || (r == SD_OK &&
										  !ours(&rf, w))) {
		r = SD_OK;
		goto out;
	}
	if (r != SD_OK)
		goto out;
	r = refund_record(db, &rf, w->status, w->refund_id, w->failure, 0, &now);
	if (r == SD_INVALID) {	/* a status this box does not know: nothing to do */
		r = SD_OK;
		goto out;
	}
	if (r == SD_OK) {
		*out = PAY_RECORDED;
		if (now == REFUND_NOW_FAILED)
			log_event(LOG_WARN, "refund failed at the provider: owed at the window",
				  "payment=%s refund=%s", w->payment_ref, w->refund_id);
	}
out:
	return db_end(db, r);
}
