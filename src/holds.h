/*
 * holds.h: seats held while a buyer pays (the shop).
 *
 * A hold is a lease on seats: while it is open and its expires_at is ahead,
 * its seats count against the event's capacity, in the same transaction
 * that checks the capacity (hold_add here, order_add in orders.c through
 * holds_held); when it runs out they are free again at once, with no
 * sweeper, as a stream entry's lease is.  A hold may be renewed a few times
 * (hold_renew), never for ever.
 *
 * A hold ends one way, by a conditional update only one run can win
 * (technique 1, hold_settle): 'ordered' (its payment made an order),
 * 'refunded' (its payment came when its seats were gone) or 'expired' (its
 * session ended unpaid).  Its public id ("H" and 9 characters, as an
 * order's) names it in job ids, provider keys and the log; its link (130
 * random bits) is the buyer's address of their checkout, shown to them
 * alone and written nowhere else.
 *
 * Each hold queues, in the transaction that makes it, the reconcile job
 * that looks its payment up when it ends (payments.h): nothing depends on
 * a webhook arriving.
 */
#ifndef SD_HOLDS_H
#define SD_HOLDS_H

#include <stdint.h>

#include "db.h"
#include "result.h"
#include "text.h"

#define HOLD_ID_LEN 10			/* "H" and 9 characters, as an order's */
#define HOLD_ID_MAX 16
#define HOLD_LINK_LEN 26		/* 26 characters of base32: 130 bits */
#define HOLD_LINK_MAX (HOLD_LINK_LEN + 1)
#define HOLD_CLIENT_MAX 64		/* a client's address, as kept */
#define HOLD_URL_MAX 2048		/* a provider's payment page */
#define HOLD_SESSION_MAX 256		/* a provider's session id */
#define HOLD_RECONCILE_DELAY_MS 5000	/* the reconcile job runs this long after the end */

/* The shop's rules for holds (settings; zero fields take the defaults). */
struct hold_rules {
	int64_t ttl_ms;			/* a hold's lease; 10 minutes */
	int64_t renewals;		/* renewals at most; 1 */
	int64_t per_client;		/* open holds from one client address; 4 */
	int64_t per_email;		/* open holds for one email address; 2 */
	int64_t seats_max;		/* seats in one hold; 10 */
};

#define HOLD_TTL_MS_DEFAULT (10 * 60 * 1000LL)
#define HOLD_RENEWALS_DEFAULT 1
#define HOLD_PER_CLIENT_DEFAULT 4
#define HOLD_PER_EMAIL_DEFAULT 2
#define HOLD_SEATS_MAX_DEFAULT 10

/* hold_rules_fill: r's zero fields (renewals: a negative one) set to the
 * defaults. */
void hold_rules_fill(struct hold_rules *r);

struct hold_new {
	int64_t event_id;
	int64_t seats;
	const char *name, *email;
	const char *client;		/* the buyer's address, as the shop trusts it */
};

enum hold_state { HOLD_OPEN, HOLD_ORDERED, HOLD_REFUNDED, HOLD_EXPIRED };

struct hold_view {
	int64_t id, event_id, seats, amount_minor;
	int64_t created_at, expires_at, renewals, settled_at, order_id;
	enum hold_state state;
	char public_id[HOLD_ID_MAX];
	char link[HOLD_LINK_MAX];		/* the buyer's address: /h/<link> */
	char currency[4];
	char name[TEXT_FIELD_MAX + 1];
	char email[256];
	char session_id[HOLD_SESSION_MAX];	/* "" until the session is made */
	char pay_url[HOLD_URL_MAX];
	char payment_ref[HOLD_SESSION_MAX];	/* "" until paid */
	char order_public_id[16];		/* "" unless ordered */
};

/* hold_state_name: "open", "ordered", "refunded", "expired". */
const char *hold_state_name(enum hold_state s);

/* hold_live: h holds its seats at now (open, and its lease ahead). */
int hold_live(const struct hold_view *h, int64_t now);

/*
 * hold_add: hold n seats of an event for a buyer, in one FULL transaction:
 * the event must be on sale and priced (SD_CONFLICT), the seats free of
 * tickets and of other live holds (SD_SOLD_OUT), the client and the email
 * under their caps of open holds (SD_LIMITED); the hold's amount is the
 * event's price for the seats; the reconcile job is queued to run when it
 * ends.  Bad input: SD_INVALID.  [out] *out.
 */
enum sd_result hold_add(struct db *db, const struct hold_new *n, const struct hold_rules *rules,
			struct hold_view *out);

/* hold_get: by public id; hold_get_link: by the buyer's link;
 * hold_get_session: by the provider's session id; hold_get_id: by row id.
 * SD_NOT_FOUND. */
enum sd_result hold_get(struct db *db, const char *public_id, struct hold_view *out);
enum sd_result hold_get_link(struct db *db, const char *link, struct hold_view *out);
enum sd_result hold_get_session(struct db *db, const char *session_id, struct hold_view *out);
enum sd_result hold_get_id(struct db *db, int64_t id, struct hold_view *out);

/*
 * hold_renew: a live hold's lease made ttl long again from now, at most
 * rules->renewals times (SD_LIMITED), never for one that ran out or ended
 * (SD_CONFLICT).  [out] *out (may be NULL): the hold as it is now.
 */
enum sd_result hold_renew(struct db *db, const char *public_id, const struct hold_rules *rules,
			  struct hold_view *out);

/* hold_set_session: the provider's session for an open hold, set once
 * (technique 1: a second run finds it set and keeps the first).  [out] *out
 * (may be NULL): the hold as it is now. */
enum sd_result hold_set_session(struct db *db, int64_t id, const char *session_id,
				const char *url, struct hold_view *out);

/*
 * hold_settle: end hold id as to (HOLD_ORDERED with order, its public id;
 * HOLD_REFUNDED,
 * HOLD_EXPIRED), with payment_ref (may be NULL), in the caller's
 * transaction, by a conditional update that matches only a hold still open
 * (or, for a payment, expired: a late payment settles an expired hold).
 * [out] *won: 1 when this call ended it.
 */
enum sd_result hold_settle(struct db *db, int64_t id, enum hold_state to, const char *order,
			   const char *payment_ref, int *won);

/* holds_held: the seats event_id's live holds hold at now, but hold
 * except's (0: none), in the caller's transaction.  [out] *seats. */
enum sd_result holds_held(struct db *db, int64_t event_id, int64_t except, int64_t now,
			  int64_t *seats);

/* holds_prune: delete up to limit holds that ended (or ran out open)
 * before before_ms and made no order.  [out] *n. */
enum sd_result holds_prune(struct db *db, int64_t before_ms, int limit, int64_t *n);

#endif
