/*
 * holds.h: seats held while a buyer pays (the shop).
 *
 * A hold is a lease on seats: while it is open (or pending) and its
 * expires_at is ahead, its seats count against the event's capacity, in the
 * same transaction that checks the capacity (hold_add_in here, order_add in
 * orders.c through holds_held); when it runs out they are free again at
 * once, with no sweeper, as a stream entry's lease is.  A hold may be
 * renewed a few times (hold_renew), never for ever.  A hold whose buyer paid
 * by a delayed method is 'pending': its lease is then the wait for the
 * money (shop_pending_max), and it no longer counts as unpaid.
 *
 * A hold ends one way, by a conditional update only one run can win
 * (technique 1, hold_settle): 'ordered' (its payment made an order),
 * 'refunded' (its payment came when its seats were gone, or was not the
 * hold's amount: then its problem says what came), 'failed' (its delayed
 * payment failed) or 'expired' (its session ended unpaid, or its wait did).
 * Its public id ("H" and 9 characters, as an order's) names it in job ids,
 * provider keys and the log; its link (130 random bits) is the buyer's
 * address of their checkout, shown to them alone and written nowhere else.
 *
 * The caps on unpaid holds count a client and its network (an IPv6 client
 * by its /64 and its /56), never an email address.  Whether a checkout gets
 * a hold at all, or a place in line, is line.h's.
 *
 * Each hold queues, in the transaction that makes it, the reconcile job
 * that looks its payment up when it ends (payments.h): nothing depends on
 * a webhook arriving.  Its provider session's expiry (pay_until) is fixed
 * when it is made, so that every attempt to make the session sends the same
 * parameters under the same key.
 */
#ifndef SD_HOLDS_H
#define SD_HOLDS_H

#include <stdint.h>

#include "db.h"
#include "events.h"
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
#define HOLD_PROBLEM_MAX 201

/* The shop's rules for holds (settings; zero fields take the defaults). */
struct hold_rules {
	int64_t ttl_ms;			/* a hold's lease; 10 minutes */
	int64_t renewals;		/* renewals at most; 1 */
	int64_t per_client;		/* open holds (and places in line) from one
					 * client, and from one client's network; 4 */
	int64_t seats_max;		/* seats in one hold; 10 */
	int64_t unpaid_share;		/* % of an event's seats open holds may take; 25 */
	int64_t pending_max_ms;		/* a delayed payment's wait; 7 days */
};

#define HOLD_TTL_MS_DEFAULT (10 * 60 * 1000LL)
#define HOLD_RENEWALS_DEFAULT 1
#define HOLD_PER_CLIENT_DEFAULT 4
#define HOLD_SEATS_MAX_DEFAULT 10
#define HOLD_UNPAID_SHARE_DEFAULT 25
#define HOLD_PENDING_MAX_MS_DEFAULT (7 * 86400000LL)
/* a provider session lives this long past the last moment a hold may ask
 * for it: Stripe's least (30 minutes from the request that makes it) and a
 * minute for clocks and the request's way */
#define HOLD_SESSION_MARGIN_MS ((30 + 1) * 60000LL)

/* hold_rules_fill: r's zero fields (renewals: a negative one) set to the
 * defaults. */
void hold_rules_fill(struct hold_rules *r);

struct hold_new {
	int64_t event_id;
	int64_t seats;
	const char *name, *email;
	const char *client;		/* the buyer's address, as the shop trusts it
					 * (an IPv6 address by its /64) */
	const char *client_net;		/* its network (IPv6: the /56; IPv4: the
					 * address); NULL: client */
};

enum hold_state { HOLD_OPEN, HOLD_PENDING, HOLD_ORDERED, HOLD_REFUNDED, HOLD_EXPIRED,
		  HOLD_FAILED };

struct hold_view {
	int64_t id, event_id, seats, amount_minor;
	int64_t created_at, expires_at, renewals, settled_at, order_id;
	int64_t pay_until;			/* the provider session's expiry, ms */
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
	char problem[HOLD_PROBLEM_MAX];		/* why money made no order; "" */
	int instant_only;			/* its session offers instant methods only:
						 * pending holds took the share when it
						 * was made */
};

/* holds_link_new: a buyer's unguessable link (/h/<link>, /w/<link>): 26
 * characters of lower-case base32, 130 bits from the kernel.  [out] link
 * (HOLD_LINK_MAX bytes). */
enum sd_result holds_link_new(char *link);

/* hold_state_name: "open", "pending", "ordered", "refunded", "expired",
 * "failed". */
const char *hold_state_name(enum hold_state s);

/* hold_live: h holds its seats at now for a buyer who may still pay (open,
 * and its lease ahead); a pending hold keeps its seats too, but its buyer
 * has paid as far as they can (hold_keeps). */
int hold_live(const struct hold_view *h, int64_t now);
int hold_keeps(const struct hold_view *h, int64_t now);

/* hold_new_valid: n's fields as a checkout may have them (SD_INVALID). */
enum sd_result hold_new_valid(const struct hold_new *n, const struct hold_rules *rules);

/* hold_event_sells: in the caller's transaction, the event's row locked
 * (so that checkouts and sales of one event are put in line), then read:
 * on sale and priced, else SD_CONFLICT.  [out] *e. */
enum sd_result hold_event_sells(struct db *db, int64_t event_id, int64_t now,
				struct event_view *e);

/*
 * hold_add_in: hold n seats of event e (hold_event_sells'), in the
 * caller's transaction: the seats free of tickets and of holds that keep
 * them (SD_SOLD_OUT), the client and its network under the cap of open
 * holds, counting others[0] and others[1] (may be NULL) more against them
 * (SD_LIMITED); the hold's amount is the event's price for the seats; its
 * provider session's expiry fixed; the reconcile job queued to run when it
 * ends.  [out] *out.
 */
enum sd_result hold_add_in(struct db *db, const struct hold_new *n, const struct hold_rules *rules,
			   const struct event_view *e, int64_t now, const int64_t others[2],
			   struct hold_view *out);

/* hold_add: hold_new_valid, hold_event_sells and hold_add_in in one FULL
 * transaction of its own (no line, no share: line.h decides those). */
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
 * (technique 1: a second run finds it set and keeps the first; a hold no
 * longer open gets none: *out's pay_url stays "").  [out] *out
 * (may be NULL): the hold as it is now. */
enum sd_result hold_set_session(struct db *db, int64_t id, const char *session_id,
				const char *url, struct hold_view *out);

/*
 * hold_settle: end hold id as to (HOLD_ORDERED with order, its public id;
 * HOLD_REFUNDED, HOLD_EXPIRED, HOLD_FAILED), with payment_ref (may be
 * NULL), in the caller's transaction, by a conditional update that matches
 * only a hold still open or pending (or, for a payment, expired: a late
 * payment settles an expired hold).  hold_settle_why: with the problem the
 * box office is shown (NULL: none).  [out] *won: 1 when this call ended it.
 */
enum sd_result hold_settle(struct db *db, int64_t id, enum hold_state to, const char *order,
			   const char *payment_ref, int *won);
enum sd_result hold_settle_why(struct db *db, int64_t id, enum hold_state to, const char *order,
			       const char *payment_ref, const char *problem, int *won);

/* hold_set_pending: an open hold whose buyer paid by a delayed method keeps
 * its seats until until (ms), its payment recorded, in the caller's
 * transaction, by a conditional update.  [out] *won. */
enum sd_result hold_set_pending(struct db *db, int64_t id, const char *payment_ref,
				int64_t until, int *won);

/* hold_note_payment: a payment on its way for a hold that ended expired
 * (its session was paid by a delayed method after all) recorded on it, in
 * the caller's transaction: its seats stay free, but the hold is kept for
 * the payment (holds_prune) and a late one finds it.  [out] *won. */
enum sd_result hold_note_payment(struct db *db, int64_t id, const char *payment_ref, int *won);

/* holds_held: the seats event_id's holds keep at now (open or pending, and
 * ahead of their end), but hold except's (0: none), in the caller's
 * transaction.  [out] *seats.  holds_unpaid: those of open holds only:
 * what buyers hold who may never pay. */
enum sd_result holds_held(struct db *db, int64_t event_id, int64_t except, int64_t now,
			  int64_t *seats);
enum sd_result holds_unpaid(struct db *db, int64_t event_id, int64_t now, int64_t *seats);

/* hold_again: in the caller's transaction, the client's newest hold of
 * n's event for n's email and seats made after since, unless it ended
 * unpaid: the same checkout sent again (a double click).  [out] *out.
 * SD_NOT_FOUND: none. */
enum sd_result hold_again(struct db *db, const struct hold_new *n, int64_t since,
			  struct hold_view *out);

/* holds_free_taken: the checkouts of event_id from network net that hold
 * or became orders (for a free event: its tickets taken).  [out] *n. */
enum sd_result holds_free_taken(struct db *db, int64_t event_id, const char *net, int64_t *n);

/* holds_share_cap: the seats open holds may take of event e at once (and
 * pending ones, on their own): rules' unpaid_share of its capacity, at
 * least 1. */
int64_t holds_share_cap(const struct event_view *e, const struct hold_rules *ru);

/* holds_of_client: open and pending holds from client, and from its network (NULL:
 * client's).  [out] *n_client, *n_net. */
enum sd_result holds_of_client(struct db *db, const char *client, const char *net, int64_t now,
			       int64_t *n_client, int64_t *n_net);

/* holds_prune: delete up to limit holds that ended before before_ms with
 * no payment ever on its way (expired unpaid): a pending hold that ran out
 * is kept, for its payment may still come, and so are failed ones (their
 * buyer's email names them) and those with a problem to show.  [out] *n. */
enum sd_result holds_prune(struct db *db, int64_t before_ms, int limit, int64_t *n);

#endif
