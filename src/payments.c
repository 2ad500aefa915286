/*
 * payments.c: a payment made into an order or a refund (payments.h).
 */
#include "payments.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "event_edit.h"
#include "holds.h"
#include "idem.h"
#include "log.h"
#include "orders.h"
#include "refunds.h"

static const char *const OUTCOMES[] = { "ordered", "refunding", "already", "expired",
					"duplicate" };

const char *pay_outcome_name(enum pay_outcome o)
{
	return OUTCOMES[o];
}

/* the webhook's event id, recorded with the effect; *dup when seen before */
static enum sd_result event_once(struct db *db, const char *event_id, int *dup)
{
	char job_id[300];
	enum sd_result r;
	int first = 0;

	*dup = 0;
	if (!event_id)
		return SD_OK;
	snprintf(job_id, sizeof job_id, "stripe:%s", event_id);
	if ((r = idem_once(db, job_id, "stripe_webhook", &first)) == SD_OK)
		*dup = !first;
	return r;
}

/* the hold of session_id, read again once its event's row is locked */
static enum sd_result hold_locked(struct db *db, const char *session_id, struct hold_view *h)
{
	enum sd_result r;

	if ((r = hold_get_session(db, session_id, h)) != SD_OK ||
	    (r = event_row_lock(db, h->event_id)) != SD_OK)
		return r;
	return hold_get_session(db, session_id, h);
}

/* the order for a paid hold, in a savepoint; SD_SOLD_OUT or SD_CONFLICT
 * (sales closed) when it cannot be made, with nothing of it left */
static enum sd_result order_of_hold(struct db *db, const struct hold_view *h,
				    const struct pay_paid *p, char *order)
{
	char key[HOLD_ID_MAX + 8];
	struct order_new o = { h->event_id, h->name, h->email, h->seats, key, "online",
			       h->id, p->amount_minor, p->currency, p->payment_ref };
	enum sd_result r;
	int replayed = 0;

	snprintf(key, sizeof key, "hold-%s", h->public_id);
	if ((r = db_savepoint(db)) != SD_OK)
		return r;
	r = order_add(db, &o, order, &replayed);
	return db_savepoint_end(db, r);
}

static enum sd_result settle_paid(struct db *db, const struct hold_view *h,
				  const struct pay_paid *p, enum pay_outcome *out, char *order)
{
	struct refund_new rn = { p->payment_ref, NULL, 0, h->id, p->amount_minor, p->currency,
				 REFUND_LATE };
	enum sd_result r;
	int won = 0, added = 0;

	r = order_of_hold(db, h, p, order);
	if (r == SD_OK) {
		if ((r = hold_settle(db, h->id, HOLD_ORDERED, order, p->payment_ref, &won)) == SD_OK)
			*out = won ? PAY_ORDERED : PAY_ALREADY;
		return r;
	}
	if (r != SD_SOLD_OUT && r != SD_CONFLICT)
		return r;
	log_event(LOG_INFO, "payment came too late for its seats", "hold=%s why=\"%s\"",
		  h->public_id, err_msg());
	order[0] = '\0';
	if ((r = refund_add(db, &rn, &added, NULL)) != SD_OK ||
	    (r = hold_settle(db, h->id, HOLD_REFUNDED, NULL, p->payment_ref, &won)) != SD_OK)
		return r;
	*out = won ? PAY_REFUNDING : PAY_ALREADY;
	return SD_OK;
}

enum sd_result pay_apply(struct db *db, const struct pay_paid *p, enum pay_outcome *out,
			 char *order)
{
	struct hold_view h;
	char buf[ORDER_ID_MAX];
	enum sd_result r;
	int dup = 0;

	*out = PAY_ALREADY;
	if (!order)
		order = buf;
	order[0] = '\0';
	if (!p->payment_ref || !*p->payment_ref || !p->currency)
		return err_set(SD_INVALID, "a payment needs its reference and currency");
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = event_once(db, p->event_id, &dup)) != SD_OK)
		goto out;
	if (dup) {
		*out = PAY_DUPLICATE;
		goto out;
	}
	if ((r = hold_locked(db, p->session_id, &h)) != SD_OK)
		goto out;
	if (h.state == HOLD_ORDERED || h.state == HOLD_REFUNDED) {
		snprintf(order, ORDER_ID_MAX, "%s", h.order_public_id);
		goto out;	/* technique 1: the state is reached */
	}
	r = settle_paid(db, &h, p, out, order);
out:
	return db_end(db, r);
}

enum sd_result pay_expire(struct db *db, const char *session_id, const char *event_id,
			  enum pay_outcome *out)
{
	struct hold_view h;
	enum sd_result r;
	int dup = 0, won = 0;

	*out = PAY_ALREADY;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = event_once(db, event_id, &dup)) != SD_OK)
		goto out;
	if (dup) {
		*out = PAY_DUPLICATE;
		goto out;
	}
	if ((r = hold_locked(db, session_id, &h)) != SD_OK)
		goto out;
	if ((r = hold_settle(db, h.id, HOLD_EXPIRED, NULL, NULL, &won)) == SD_OK && won)
		*out = PAY_EXPIRED;
out:
	return db_end(db, r);
}

/* ---- the checks of a drained box (`stagedoor check`) --------------------- */

/* Each query returns the first row that breaks its rule, with one text. */
static const char SQL_ORDERED_WITHOUT[] =
	"SELECT h.public_id FROM holds h LEFT JOIN orders o ON o.id = h.order_id "
	"WHERE h.state = 'ordered' AND (o.id IS NULL OR o.payment_ref IS NULL OR "
	"o.payment_ref <> h.payment_ref OR o.payment <> 'online') LIMIT 1";
static const char SQL_ONLINE_WITHOUT[] =
	"SELECT o.public_id FROM orders o WHERE o.payment = 'online' AND NOT EXISTS "
	"(SELECT 1 FROM holds h WHERE h.order_id = o.id AND h.payment_ref = o.payment_ref) "
	"LIMIT 1";
static const char SQL_REFUNDED_WITHOUT[] =
	"SELECT h.public_id FROM holds h WHERE h.state = 'refunded' AND NOT EXISTS "
	"(SELECT 1 FROM refunds r WHERE r.payment_ref = h.payment_ref AND r.hold_id = h.id) "
	"LIMIT 1";
static const char SQL_REFUND_UNPAID[] =
	"SELECT payment_ref FROM refunds WHERE via = 'provider' AND done_at IS NULL LIMIT 1";
static const char SQL_OPEN_PAST[] =
	"SELECT public_id FROM holds WHERE state = 'open' AND expires_at < ?1 LIMIT 1";

static enum sd_result first_row(struct db *db, const char *sql, int64_t arg, char *out,
				size_t size)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;

	out[0] = '\0';
	if (!st)
		return SD_DB;
	if (strstr(sql, "?1"))
		db_bind_int(st, 1, arg);
	if (db_next(st, &r))
		snprintf(out, size, "%s", db_col_text(st, 0));
	db_reset(st);
	return r;
}

enum sd_result pay_check(struct db *db, int settled, char *problem, size_t size)
{
	static const struct {
		const char *sql;
		int settled_only;
		const char *fmt;
	} rules[] = {
		{ SQL_ORDERED_WITHOUT, 0, "hold %s is ordered, but no online order carries its "
					  "payment" },
		{ SQL_ONLINE_WITHOUT, 0, "order %s was paid online, but no hold names it with its "
					 "payment" },
		{ SQL_REFUNDED_WITHOUT, 0, "hold %s is refunded, but no refund of its payment is "
					   "owed" },
		{ SQL_REFUND_UNPAID, 1, "the refund of payment %s is owed and no job is left to "
					"pay it" },
		{ SQL_OPEN_PAST, 1, "hold %s ran out and was never reconciled" },
	};
	char id[300];
	enum sd_result r;
	size_t i;

	problem[0] = '\0';
	for (i = 0; i < sizeof rules / sizeof rules[0]; i++) {
		if (rules[i].settled_only && !settled)
			continue;
		if ((r = first_row(db, rules[i].sql, clock_now_ms(), id, sizeof id)) != SD_OK)
			return r;
		if (id[0]) {
			snprintf(problem, size, rules[i].fmt, id);
			return SD_OK;
		}
	}
	return SD_OK;
}
