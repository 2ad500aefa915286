/*
 * refunds.h: money owed back to a buyer, once per payment (the refunds
 * table, owned here).
 *
 * A refund is owed when a payment arrived after its hold ran out and its
 * seats were gone (reason "late"), when a paid order is cancelled
 * ("cancelled"), or when a payment's amount or currency was not what its
 * hold asked ("mismatch").  Through the provider it is done only once the
 * provider says it succeeded; one the provider could not pay (failed) is
 * owed at the window from then on.  The provider's payment names it: payment_ref is unique,
 * so a payment is owed back at most once whatever asks twice, and the
 * refund job gives the provider the row's key (technique 3): "refund-<order
 * public id>" for a cancelled order's, "refund-<payment_ref>" for a late
 * payment's (and for every row made before schema 15).  An order the box office took the money for is owed back at the
 * window (via "window", its payment_ref "window:<order public id>"): no
 * job, the staff pay it out and the dashboard shows it owed.
 */
#ifndef SD_REFUNDS_H
#define SD_REFUNDS_H

#include <stdint.h>

#include "db.h"
#include "result.h"

#define REFUND_REF_MAX 256
#define REFUND_FAILURE_MAX 201

enum refund_reason { REFUND_LATE, REFUND_CANCELLED, REFUND_MISMATCH };

struct refund_new {
	const char *payment_ref;	/* the provider's payment; NULL: at the window */
	const char *order_public_id;	/* at the window: names the refund */
	int64_t order_id;		/* 0: none (a late payment) */
	int64_t hold_id;		/* 0: none */
	int64_t amount_minor;
	const char *currency;
	enum refund_reason reason;
	int no_job;			/* 1: the caller pays it itself (an event's
					 * cancellation child): no refund_payment job */
};

struct refund_view {
	int64_t id, order_id, hold_id, amount_minor, created_at, done_at;
	int64_t failed_at;		/* the provider could not pay it: owed at the window */
	char status[24];		/* the provider's word when last asked; "": not yet */
	char failure[REFUND_FAILURE_MAX];	/* its reason for a failure */
	enum refund_reason reason;
	int window;			/* 1: paid out at the box office */
	char payment_ref[REFUND_REF_MAX];
	char currency[4];
	char provider_refund_id[REFUND_REF_MAX];
	char key[REFUND_REF_MAX + 16];	/* the provider's key for it */
};

/*
 * refund_add: owe a refund, in the caller's transaction, and for one through
 * the provider queue the refund_payment job (job id
 * "outbox:<payment_ref>:refund"; none with n->no_job).  A payment owed back already changes
 * nothing ([out] *added 0).  [out] *id (may be NULL): the refund's row.
 */
enum sd_result refund_add(struct db *db, const struct refund_new *n, int *added, int64_t *id);

/* refund_get: [out] *out.  SD_NOT_FOUND. */
enum sd_result refund_get(struct db *db, int64_t id, struct refund_view *out);

/* refund_mark_done: the refund is paid (the provider says "succeeded"),
 * with the provider's id for it (may be ""), in the caller's transaction,
 * by a conditional update (technique 1).  [out] *won: 1 when this call
 * marked it. */
enum sd_result refund_mark_done(struct db *db, int64_t id, const char *provider_refund_id,
				int *won);

/*
 * refund_mark_status: what the provider says of the refund now, in the
 * caller's transaction: "succeeded" is refund_mark_done; "failed" or
 * "canceled" marks it failed (owed at the window from then on, with the
 * provider's reason, failure, may be NULL), even after it was done (a
 * refund the bank sent back); "pending" or "requires_action" records the
 * word and the id while it is neither.  [out] *won: 1 when this call
 * changed it to done or failed.
 */
enum sd_result refund_mark_status(struct db *db, int64_t id, const char *status,
				  const char *provider_refund_id, const char *failure, int *won);

/* Where a refund stands after refund_record. */
enum refund_now { REFUND_NOW_PENDING, REFUND_NOW_DONE, REFUND_NOW_FAILED };

#define REFUND_POLL_MS (30 * 60000LL)	/* a pending refund is asked again after this */

/*
 * refund_record: refund_mark_status and what follows it, in the caller's
 * transaction (technique 1: only the call that changes the row queues
 * anything): the run that marks a late or mismatched payment's refund done
 * queues the buyer's email (send_refund_notice, "outbox:<payment>:refund-
 * notice"); with follow, a refund still pending at the provider gets its
 * refund_payment job ("outbox:<payment>:refund", REFUND_POLL_MS ahead) to
 * ask again, for a caller that is not that job (an event's child).
 * [out] *now (may be NULL).
 */
enum sd_result refund_record(struct db *db, const struct refund_view *rf, const char *status,
			     const char *provider_refund_id, const char *failure, int follow,
			     enum refund_now *now);

/* refund_of_payment: [out] *out, the refund of a provider's payment.
 * SD_NOT_FOUND: none. */
enum sd_result refund_of_payment(struct db *db, const char *payment_ref, struct refund_view *out);

/* refund_of_order: [out] *out, the refund an order owes.  SD_NOT_FOUND:
 * none. */
enum sd_result refund_of_order(struct db *db, int64_t order_id, struct refund_view *out);

#endif
