/*
 * payments.h: what a payment does to the box: a paid hold becomes its
 * order, or, when its seats were gone by the time the money came or the
 * money was not what the hold asked, a refund owed; a payment by a delayed
 * method keeps its hold's seats while the money is on its way, and one that
 * fails frees them; an unpaid session that ended ends its hold.  The same
 * functions serve every way a payment is learnt of: a webhook (the
 * provider calls), the reconcile job and the buyer's return (the box asks):
 * whichever comes first makes the change, the others find it made.
 *
 * Every change is one FULL transaction, in this order:
 *   1. a webhook's event id recorded in processed_jobs ("stripe:<evt>",
 *      technique 4): a webhook delivered twice commits nothing the second
 *      time;
 *   2. the event's row locked, then the hold read again under the lock: two
 *      deliveries of one payment (a webhook and the reconcile job) are put
 *      in line, and the second sees what the first did;
 *   3. a hold already ordered, refunded or failed: nothing more (technique
 *      1);
 *   4. the amount and currency the provider took compared with the hold's:
 *      another amount makes no order, and what was taken is owed back
 *      ("mismatch", the hold's problem saying what came); money the
 *      provider reported gone back before (money_back.h: in full, or
 *      disputed) makes no order either, and owes nothing;
 *   5. the order, made with the key "hold-<hold>" (a replay returns the
 *      first), whose seats count the hold's own as free: a hold that still
 *      keeps its seats always becomes its order; a late one does when the
 *      seats are still free, in a savepoint, so that a house sold out
 *      meanwhile takes back the order's writes only;
 *   6. else a refund owed ("late", refund_payment queued), and the hold ends
 *      as refunded;
 *   7. the hold's ending, by a conditional update (hold_settle).
 *
 * Money that goes back afterwards (a refund made in the provider's
 * dashboard, a dispute) and the provider's word on a refund are
 * money_back.h's.
 */
#ifndef SD_PAYMENTS_H
#define SD_PAYMENTS_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "result.h"

/* A payment the provider took (or did not need) for a checkout session. */
struct pay_paid {
	const char *session_id;		/* the checkout session: names the hold */
	const char *payment_ref;	/* the provider's payment (pi_...); NULL or "":
					 * none, a session with nothing to pay (its
					 * session id then names the payment) */
	int64_t amount_minor;		/* what it charged; -1: no amount the box reads */
	const char *currency;
	const char *event_id;		/* the webhook's event id; NULL: a lookup */
};

enum pay_outcome {
	PAY_ORDERED,			/* the hold became its order */
	PAY_REFUNDING,			/* the seats were gone: a refund is owed */
	PAY_ALREADY,			/* the hold had ended that way before */
	PAY_EXPIRED,			/* pay_expire ended a hold */
	PAY_DUPLICATE,			/* this webhook event was seen before */
	PAY_PENDING,			/* a delayed payment on its way: seats kept */
	PAY_FAILED,			/* a delayed payment failed: seats free */
	PAY_MISMATCH,			/* not the hold's amount: no order, money owed back */
	PAY_CANCELLED,			/* money went back: its order cancelled */
	PAY_RECORDED,			/* money back or a refund's word, recorded */
	PAY_IGNORED,			/* about nothing of this box's */
	PAY_RETURNED,			/* the money went back before its order was made */
};

/* pay_outcome_name: "ordered", "refunding", ... for logs and answers. */
const char *pay_outcome_name(enum pay_outcome o);

/*
 * pay_apply: the payment p, as above.  [out] *out; order (ORDER_ID_MAX,
 * may be NULL): the order's public id when ordered.  SD_NOT_FOUND: no hold
 * has this session (another shop's, or one pruned long ago).
 */
enum sd_result pay_apply(struct db *db, const struct pay_paid *p, enum pay_outcome *out,
			 char *order);

/*
 * pay_free: a hold with nothing to pay (a free event's) made into its order
 * at once, as pay_apply makes a paid one (its payment named "free:<hold>").
 * [out] *out, order as pay_apply.  SD_NOT_FOUND: no such hold.
 */
enum sd_result pay_free(struct db *db, int64_t hold_id, enum pay_outcome *out, char *order);

/*
 * pay_pending: the session was finished with a delayed method
 * (payment_ref, its payment, is on its way): an open hold keeps its seats
 * until until (ms).  [out] *out: PAY_PENDING, PAY_ALREADY or PAY_DUPLICATE.
 * SD_NOT_FOUND as pay_apply.
 */
enum sd_result pay_pending(struct db *db, const char *session_id, const char *payment_ref,
			   int64_t until, const char *event_id, enum pay_outcome *out);

/*
 * pay_fail: the session's delayed payment failed: its hold (open, pending,
 * or run out while pending) ends as failed, its seats free, and the run
 * that ends it queues the buyer's one email (send_payment_failed, job
 * "outbox:<hold>:payment-failed").  [out] *out: PAY_FAILED, PAY_ALREADY or
 * PAY_DUPLICATE.  SD_NOT_FOUND as pay_apply.
 */
enum sd_result pay_fail(struct db *db, const char *session_id, const char *event_id,
			enum pay_outcome *out);

/*
 * pay_expire: the session ended unpaid, or a pending payment's wait is
 * over: its hold ends as expired (its seats free; a payment that still
 * comes is a late one), if it is still open or pending (a webhook's
 * event_id recorded first, as for pay_apply; may be NULL).  [out] *out:
 * PAY_EXPIRED, PAY_ALREADY or PAY_DUPLICATE.  SD_NOT_FOUND as pay_apply.
 */
enum sd_result pay_expire(struct db *db, const char *session_id, const char *event_id,
			  enum pay_outcome *out);

/*
 * pay_check: the shop's invariants (design.md I34-I38, I56): an ordered
 * hold's order carries its payment, an online order has its hold, a
 * refunded hold its refund, no order stands whose payment went back in full
 * or was disputed; with settled (a drained box: nothing scheduled in the stream)
 * also no refund owed through the provider unpaid (neither done nor
 * failed) and no hold open past its end.  [out] problem: "" when they
 * hold, else the first broken one.
 */
enum sd_result pay_check(struct db *db, int settled, char *problem, size_t size);

#endif
