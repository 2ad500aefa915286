/*
 * refund_link.h: the link in a moved event's email that lets a buyer who
 * cannot come on the new date cancel their order and be paid back, without
 * an account: "<shop>/r/<order>?c=<change>&t=<token>".
 *
 * The token is HMAC-SHA256 under the ticket key (code.h; every box of one
 * database holds the same key) over "refund-link:<order>:<change>",
 * truncated to 128 bits, in hex: the link names one order and the move that
 * sent it, cannot be made for another order, and is checked in constant
 * time.  No token is stored.
 *
 * Intent and technique: the buyer's "pay me back" is an order cancellation
 * (orders.h), checked state first inside its transaction, so a double
 * click, a reload or a second box cancels once and queues one refund under
 * the provider key refund-<order> (refunds.h).
 */
#ifndef SD_REFUND_LINK_H
#define SD_REFUND_LINK_H

#include <stddef.h>
#include <stdint.h>

#include "code.h"
#include "db.h"
#include "orders.h"
#include "result.h"

#define REFUND_LINK_TOKEN_LEN 32	/* hex digits */

/* refund_link_token: the token for order public_id and change change_no,
 * into out (REFUND_LINK_TOKEN_LEN + 1 bytes). */
void refund_link_token(const unsigned char key[CODE_KEY_LEN], const char *public_id,
		       int64_t change_no, char *out);

/* refund_link_url: "<base>/r/<public_id>?c=<change_no>&t=<token>" into buf;
 * "" when base is NULL or "" (the email then sends the buyer to the box
 * office). */
void refund_link_url(const char *base, const unsigned char key[CODE_KEY_LEN],
		     const char *public_id, int64_t change_no, char *buf, size_t size);

/* what a link may still do */
enum refund_link_state {
	REFUND_LINK_OPEN,		/* the order can be cancelled and paid back */
	REFUND_LINK_CANCELLED,		/* the order is cancelled already */
	REFUND_LINK_EVENT_CANCELLED,	/* the whole event is: its refund is on its way */
	REFUND_LINK_STARTED,		/* the event has started: too late */
};

struct refund_link_view {
	enum refund_link_state state;
	char public_id[ORDER_ID_MAX];
	char event_name[256];
	int64_t starts_at, seats, amount_minor;
	char currency[8];
	int online;			/* paid through the provider (else at the window) */
};

/*
 * refund_link_look: what the link (public_id, change_no, token) may do at
 * now.  SD_NOT_FOUND when the token is wrong, the order unknown or the
 * change is not one its event has had (no link names an order it was not
 * sent for).
 */
enum sd_result refund_link_look(struct db *db, const unsigned char key[CODE_KEY_LEN],
				const char *public_id, int64_t change_no, const char *token,
				int64_t now, struct refund_link_view *out);

/*
 * refund_link_use: cancel the order the link names, in one transaction with
 * the look that allows it (state first: a second use finds it cancelled and
 * changes nothing, out->state REFUND_LINK_CANCELLED).  SD_CONFLICT when
 * the event has started or is cancelled; SD_NOT_FOUND as refund_link_look.
 */
enum sd_result refund_link_use(struct db *db, const unsigned char key[CODE_KEY_LEN],
			       const char *public_id, int64_t change_no, const char *token,
			       int64_t now, struct refund_link_view *out);

#endif
