/*
 * shop_pay.h: what the payment provider says, applied to the box: a
 * Checkout Session's state for its hold (payments.h), money going back and
 * a refund's status (money_back.h).  The one place that reads Stripe's
 * objects for their meaning; the webhook (shop_hook.c), the reconcile job
 * (shop_jobs.c) and the buyer's return (shop.c) all come through here, so
 * that whichever learns of a payment first makes its change, the same way.
 */
#ifndef SD_SHOP_PAY_H
#define SD_SHOP_PAY_H

#include <stdint.h>

#include "db.h"
#include "payments.h"
#include "result.h"
#include "stripe.h"

/*
 * shop_pay_session: the session s's state for its hold: paid -> pay_apply;
 * complete with nothing to pay -> pay_apply with no payment; complete and
 * paid by a delayed method -> pay_pending, its seats kept pending_max_ms
 * from now; expired -> pay_expire; open -> nothing (PAY_IGNORED).  type: the
 * webhook's event type, NULL for a lookup: "...async_payment_failed" is
 * pay_fail and "...expired" pay_expire whatever else the object says.
 * event_id: the webhook's (NULL: a lookup).  [out] *out.  SD_NOT_FOUND: no
 * hold has this session.
 */
enum sd_result shop_pay_session(struct db *db, const struct stripe_session *s, const char *type,
				const char *event_id, int64_t pending_max_ms,
				enum pay_outcome *out);

/*
 * shop_pay_event: a verified webhook event applied: a checkout session's
 * (shop_pay_session), a charge refunded (charge.refunded), a dispute
 * (charge.dispute.created, .closed, ...), a refund's status
 * (charge.refund.updated, refund.updated, refund.failed).  [out] *out:
 * PAY_IGNORED for an event the box does not act on.  SD_NOT_FOUND as
 * shop_pay_session.
 */
enum sd_result shop_pay_event(struct db *db, const struct stripe_event *ev,
			      int64_t pending_max_ms, enum pay_outcome *out);

#endif
