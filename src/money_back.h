/*
 * money_back.h: money that goes back to a buyer, as the provider reports
 * it: a refund made in the provider's own dashboard (in full or in part), a
 * dispute (the buyer's bank took the payment back), and the provider's
 * word on a refund the box asked for (pending, then succeeded or failed).
 * This module owns payment_backs.
 *
 * Each report is one FULL transaction that records the webhook's event id
 * with its effect (technique 4, idem_webhook_once):
 *   - a payment given back in full, or disputed, cancels its order as the
 *     box office would (its tickets no longer admit, the cancellation's
 *     job moves the count back and sends the buyer's one email), with no
 *     refund owed (the money is back already), the change's row saying why
 *     (actor "stripe"); a second report finds the order cancelled;
 *   - a part given back is recorded on the order (orders.refunded_minor,
 *     the largest total reported, so reports out of order change nothing);
 *   - a report for a payment no order carries yet (the provider's reports
 *     come in any order) is kept (payment_backs) for the payment to find
 *     when it is applied (payments.h): then it makes no order, or its order
 *     records the part given back;
 *   - a refund the box made is done when the provider says succeeded, and
 *     owed at the window when it says failed (refunds.h, refund_record).
 */
#ifndef SD_MONEY_BACK_H
#define SD_MONEY_BACK_H

#include <stdint.h>

#include "db.h"
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

enum back_outcome {
	BACK_CANCELLED,			/* its order cancelled now */
	BACK_RECORDED,			/* recorded: on its order, or kept for its payment */
	BACK_IGNORED,			/* about nothing of this box's */
	BACK_DUPLICATE,			/* this webhook event was seen before */
};

/* back_outcome_name: "cancelled", "recorded", "ignored", "duplicate". */
const char *back_outcome_name(enum back_outcome o);

/*
 * pay_money_back: b applied, as above.  [out] *out; order (ORDER_ID_MAX,
 * may be NULL): its order's public id, "" when none carries it yet.
 */
enum sd_result pay_money_back(struct db *db, const struct pay_back *b, enum back_outcome *out,
			      char *order);

/* What went back of a payment no order carried when it was reported. */
struct back_report {
	int64_t refunded_minor;		/* refunded in all */
	int in_full;			/* all of it went back (a refund in full) */
	char dispute[121];		/* "<reason>, <status>"; "": none */
};

/* money_back_of: in the caller's transaction, the report kept for
 * payment_ref.  SD_NOT_FOUND: none. */
enum sd_result money_back_of(struct db *db, const char *payment_ref, struct back_report *out);

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
 * pay_money_back's (its charge's report).  [out] *out: BACK_RECORDED,
 * BACK_IGNORED or BACK_DUPLICATE.
 */
enum sd_result pay_refund_word(struct db *db, const struct pay_refund_word *w,
			       enum back_outcome *out);

/* money_back_prune: delete up to limit reports kept since before
 * before_ms.  [out] *n. */
enum sd_result money_back_prune(struct db *db, int64_t before_ms, int limit, int64_t *n);

#endif
