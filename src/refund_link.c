/*
 * refund_link.c: a moved event's refund link, its token and its one use
 * (refund_link.h).
 */
#define _GNU_SOURCE
#include "refund_link.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "text.h"

static const char SQL_LINK_ORDER[] =
	"SELECT o.id, o.public_id, e.name, e.starts_at, o.seats, coalesce(o.amount_minor, 0), "
	"coalesce(o.currency, ''), o.payment_ref IS NOT NULL, coalesce(o.cancelled_at, 0), "
	"coalesce(e.cancelled_at, 0), e.change_no FROM orders o JOIN events e ON e.id = o.event_id "
	"WHERE o.public_id = ?1";

void refund_link_token(const unsigned char key[CODE_KEY_LEN], const char *public_id,
		       int64_t change_no, char *out)
{
	char data[ORDER_ID_MAX + 32], mac[CODE_SHA256_HEX + 1];
	int n = snprintf(data, sizeof data, "%s:%" PRId64, public_id, change_no);

	code_hmac_sha256_hex(key, CODE_KEY_LEN, "refund-link:", data, (size_t)n, mac);
	memcpy(out, mac, REFUND_LINK_TOKEN_LEN);
	out[REFUND_LINK_TOKEN_LEN] = '\0';
}

void refund_link_url(const char *base, const unsigned char key[CODE_KEY_LEN],
		     const char *public_id, int64_t change_no, char *buf, size_t size)
{
	char tok[REFUND_LINK_TOKEN_LEN + 1];

	buf[0] = '\0';
	if (!base || !*base)
		return;
	refund_link_token(key, public_id, change_no, tok);
	snprintf(buf, size, "%s/r/%s?c=%" PRId64 "&t=%s", base, public_id, change_no, tok);
}

/* the order the link names, when the token is right; [out] *order_id */
static enum sd_result look_in(struct db *db, const unsigned char key[CODE_KEY_LEN],
			      const char *public_id, int64_t change_no, const char *token,
			      int64_t now, struct refund_link_view *out, int64_t *order_id)
{
	char id[ORDER_ID_MAX], want[REFUND_LINK_TOKEN_LEN + 1];
	struct db_stmt *st;
	enum sd_result r;
	int row;

	memset(out, 0, sizeof *out);
	if (order_id_norm(public_id, id) != SD_OK || !token ||
	    strlen(token) != REFUND_LINK_TOKEN_LEN || change_no < 1)
		return err_set(SD_NOT_FOUND, "this link is not one the box sent");
	refund_link_token(key, id, change_no, want);
	if (!code_ct_equal(want, token, REFUND_LINK_TOKEN_LEN))
		return err_set(SD_NOT_FOUND, "this link is not one the box sent");
	if (!(st = db_stmt(db, SQL_LINK_ORDER)))
		return SD_DB;
	db_bind_text(st, 1, id);
	if ((row = db_next(st, &r))) {
		*order_id = db_col_int(st, 0);
		text_copy(out->public_id, sizeof out->public_id, db_col_text(st, 1));
		text_copy(out->event_name, sizeof out->event_name, db_col_text(st, 2));
		out->starts_at = db_col_int(st, 3);
		out->seats = db_col_int(st, 4);
		out->amount_minor = db_col_int(st, 5);
		text_copy(out->currency, sizeof out->currency, db_col_text(st, 6));
		out->online = (int)db_col_int(st, 7);
		out->state = db_col_int(st, 9) ? REFUND_LINK_EVENT_CANCELLED
			     : db_col_int(st, 8) ? REFUND_LINK_CANCELLED
			     : out->starts_at <= now ? REFUND_LINK_STARTED : REFUND_LINK_OPEN;
		if (change_no > db_col_int(st, 10))
			row = 0;
	}
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_NOT_FOUND, "this link is not one the box sent");
	return r;
}

enum sd_result refund_link_look(struct db *db, const unsigned char key[CODE_KEY_LEN],
				const char *public_id, int64_t change_no, const char *token,
				int64_t now, struct refund_link_view *out)
{
	int64_t order_id;

	return look_in(db, key, public_id, change_no, token, now, out, &order_id);
}

enum sd_result refund_link_use(struct db *db, const unsigned char key[CODE_KEY_LEN],
			       const char *public_id, int64_t change_no, const char *token,
			       int64_t now, struct refund_link_view *out)
{
	struct order_cancel_result res;
	int64_t order_id = 0;
	enum sd_result r;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	r = look_in(db, key, public_id, change_no, token, now, out, &order_id);
	if (r == SD_OK && out->state == REFUND_LINK_OPEN) {
		r = order_cancel_in(db, order_id, "buyer", "cannot come after the event moved", 0,
				    &res);
		if (r == SD_OK)
			out->state = REFUND_LINK_CANCELLED;
	} else if (r == SD_OK && out->state != REFUND_LINK_CANCELLED) {
		r = err_set(SD_CONFLICT, out->state == REFUND_LINK_STARTED
			    ? "the event has started: the box office can help"
			    : "the event is cancelled: its refund is on its way");
	}
	return db_end(db, r);
}
