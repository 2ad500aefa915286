/*
 * money_back.h: money that goes back to a buyer after their order was made,
 * as the provider reports it: a refund made in the provider's own dashboard
 * (in full or in part), a dispute (the buyer's bank took the payment back),
 * and the provider's word on a refund the box asked for (pending, then
 * succeeded or failed).
 *
 * Each is one FULL transaction that records the webhook's event id
 * (technique 4, payments.h's pay_event_once) with its effect:
 *   - a payment given back in full, or disputed, cancels its order as the
 *     box office would (its tickets no longer admit, the cancellation's
 *     job moves the count back and sends the buyer's one email), with no
 *     refund owed (the money is back already), the change's row saying why
 *     (actor "stripe"); a second report finds the order cancelled;
 *   - a part given back is recorded on the order (orders.refunded_minor,
 *     the largest total reported, so reports out of order change nothing);
 *   - a refund the box made is done when the provider says succeeded, and
 *     owed at the window when it says failed (refunds.h, refund_record).
 */
#ifndef SD_MONEY_BACK_H
#define SD_MONEY_BACK_H

#include <stdint.h>

#include "db.h"
#include "payments.h"
#include "result.h"

/* Money of one payment gone back, as the provider reports it. */
struct pay_back {
	const char *payment_ref;	/* the provider's payment (pi_...) */
	int dispute;			/* 1: a dispute; 0: a refund */
	int64_t amount_minor;		/* refunded in all so far, or disputed; -1: unknown */
	int64_t charged_minor;		/* what the payment was; -1: unknown */
	int full;			/* the provider says all of it went back */
	const char *currency;
	const char *what;		/* a dispute's "<reason>, <status>"; NULL */
	const char *event_id;		/* the webhook's event id (NULL: none) */
};

/*
 * pay_money_back: b applied, as above.  [out] *out: PAY_CANCELLED (the
 * order cancelled now), PAY_RECORDED (recorded; the order stands, or was
 * cancelled before), PAY_IGNORED (no order of the box's was paid by it),
 * PAY_DUPLICATE; order (ORDER_ID_MAX, may be NULL): its public id.
 */
enum sd_result pay_money_back(struct db *db, const struct pay_back *b, enum pay_outcome *out,
			      char *order);

/* The provider's word on a refund. */
struct pay_refund_word {
	const char *payment_ref;	/* the payment it gives back */
	const char *refund_id;		/* the provider's id for the refund (re_...) */
	const char *key;		/* the key the box gave it, "" or NULL: none */
	const char *status;		/* "pending", "succeeded", "failed", ... */
	const char *failure;		/* its reason for a failure, or NULL */
	const char *event_id;
};

/*
 * pay_refund_word: w applied to the box's refund of w->payment_ref, when
 * it is that refund (the same provider id, or none recorded yet and the
 * box's key in it): refund_record.  A refund made elsewhere is
 * pay_money_back's (its charge's report).  [out] *out: PAY_RECORDED,
 * PAY_IGNORED or PAY_DUPLICATE.
 */
enum sd_result pay_refund_word(struct db *db, const struct pay_refund_word *w,
			       enum pay_outcome *out);

#endif
