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
#include "tickets.h"

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
	struct order_view v;
	enum sd_result r;

	memset(out, 0, sizeof *out);
	if (order_id_norm(public_id, id) != SD_OK || !token ||
	    strlen(token) != REFUND_LINK_TOKEN_LEN || change_no < 1)
		return err_set(SD_NOT_FOUND, "this link is not one the box sent");
	refund_link_token(key, id, change_no, want);
	if (!code_ct_equal(want, token, REFUND_LINK_TOKEN_LEN))
		return err_set(SD_NOT_FOUND, "this link is not one the box sent");
	if ((r = order_id_get(db, id, order_id)) == SD_OK)
		r = tickets_load_order(db, *order_id, &v);
	if (r == SD_OK && change_no > v.change_no)
		r = SD_NOT_FOUND;	/* a change its event has not had */
	if (r == SD_NOT_FOUND)
		return err_set(SD_NOT_FOUND, "this link is not one the box sent");
	if (r != SD_OK)
		return r;
	text_copy(out->public_id, sizeof out->public_id, v.public_id);
	text_copy(out->event_name, sizeof out->event_name, v.event_name);
	out->starts_at = v.starts_at;
	out->seats = v.seats;
	out->amount_minor = v.amount_minor;
	text_copy(out->currency, sizeof out->currency, v.currency);
	out->online = v.payment_ref[0] != '\0';
	out->state = v.event_cancelled ? REFUND_LINK_EVENT_CANCELLED
		     : v.cancelled_at ? REFUND_LINK_CANCELLED
		     : v.starts_at <= now ? REFUND_LINK_STARTED : REFUND_LINK_OPEN;
	return SD_OK;
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
