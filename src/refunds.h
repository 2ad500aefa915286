/*
 * refunds.h: money owed back to a buyer, once per payment (the refunds
 * table, owned here).
 *
 * A refund is owed when a payment arrived after its hold ran out and its
 * seats were gone (reason "late"), or when a paid order is cancelled
 * ("cancelled").  The provider's payment names it: payment_ref is unique,
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

enum refund_reason { REFUND_LATE, REFUND_CANCELLED };

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

/* refund_mark_done: the refund is paid, with the provider's id for it (may
 * be ""), in the caller's transaction, by a conditional update (technique
 * 1).  [out] *won: 1 when this call marked it. */
enum sd_result refund_mark_done(struct db *db, int64_t id, const char *provider_refund_id,
				int *won);

/* refund_of_order: [out] *out, the refund an order owes.  SD_NOT_FOUND:
 * none. */
enum sd_result refund_of_order(struct db *db, int64_t order_id, struct refund_view *out);

#endif
