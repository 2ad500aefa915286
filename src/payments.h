/*
 * payments.h: what a payment does to the box: a paid hold becomes its
 * order, or, when its seats were gone by the time the money came, a refund
 * owed; an unpaid session that ended ends its hold.  The same functions
 * serve both ways a payment is learnt of: a webhook (the provider calls)
 * and the reconcile job (the box asks): whichever comes first makes the
 * change, the other finds it made.
 *
 * Every change is one FULL transaction, in this order:
 *   1. a webhook's event id recorded in processed_jobs ("stripe:<evt>",
 *      technique 4): a webhook delivered twice commits nothing the second
 *      time;
 *   2. the event's row locked, then the hold read again under the lock: two
 *      deliveries of one payment (a webhook and the reconcile job) are put
 *      in line, and the second sees what the first did;
 *   3. a hold already ordered or refunded: nothing more (technique 1);
 *   4. the order, made with the key "hold-<hold>" (a replay returns the
 *      first), whose seats count the hold's own as free: a hold still live
 *      always becomes its order; a late one does when the seats are still
 *      free, in a savepoint, so that a house sold out meanwhile takes back
 *      the order's writes only;
 *   5. else a refund owed ("late", refund_payment queued under the key
 *      refund-<payment>), and the hold ends as refunded;
 *   6. the hold's ending, by a conditional update (hold_settle).
 */
#ifndef SD_PAYMENTS_H
#define SD_PAYMENTS_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "result.h"

/* A payment the provider took for a checkout session. */
struct pay_paid {
	const char *session_id;		/* the checkout session: names the hold */
	const char *payment_ref;	/* the provider's payment (pi_...) */
	int64_t amount_minor;		/* what it charged */
	const char *currency;
	const char *event_id;		/* the webhook's event id; NULL: a lookup */
};

enum pay_outcome {
	PAY_ORDERED,			/* the hold became its order */
	PAY_REFUNDING,			/* the seats were gone: a refund is owed */
	PAY_ALREADY,			/* the hold had ended that way before */
	PAY_EXPIRED,			/* pay_expire ended an open hold */
	PAY_DUPLICATE,			/* this webhook event was seen before */
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
 * pay_expire: the session ended unpaid: its hold ends as expired, if it is
 * still open (a webhook's event_id recorded first, as for pay_apply; may be
 * NULL).  [out] *out: PAY_EXPIRED, PAY_ALREADY or PAY_DUPLICATE.
 * SD_NOT_FOUND as pay_apply.
 */
enum sd_result pay_expire(struct db *db, const char *session_id, const char *event_id,
			  enum pay_outcome *out);

/*
 * pay_check: the shop's invariants (design.md I34-I38): an ordered hold's
 * order carries its payment, an online order has its hold, a refunded hold
 * its refund; with settled (a drained box: nothing scheduled in the stream)
 * also no refund owed through the provider unpaid and no hold open past its
 * end.  [out] problem: "" when they hold, else the first broken one.
 */
enum sd_result pay_check(struct db *db, int settled, char *problem, size_t size);

#endif
