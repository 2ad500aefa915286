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
#include "jobkinds.h"
#include "log.h"
#include "money.h"
#include "money_back.h"
#include "orders.h"
#include "outbox.h"
#include "refunds.h"

static const char *const OUTCOMES[] = { "ordered", "refunding", "already", "expired",
					"duplicate", "pending", "failed", "mismatch", "cancelled",
					"recorded", "ignored", "returned" };

const char *pay_outcome_name(enum pay_outcome o)
{
	return OUTCOMES[o];
}

/* the hold of session_id (or, session_id NULL, of row id), read again once
 * its event's row is locked */
static enum sd_result hold_locked(struct db *db, const char *session_id, int64_t id,
				  struct hold_view *h)
{
	enum sd_result r;

	r = session_id ? hold_get_session(db, session_id, h) : hold_get_id(db, id, h);
	if (r != SD_OK || (r = event_row_lock(db, h->event_id)) != SD_OK)
		return r;
	return session_id ? hold_get_session(db, session_id, h) : hold_get_id(db, id, h);
}

/* the transaction's start for a webhook or a lookup: the event id once,
 * then the hold under its event's lock.  [out] *dup: seen before */
static enum sd_result begin_on(struct db *db, const char *event_id, const char *session_id,
			       int64_t id, struct hold_view *h, int *dup)
{
	enum sd_result r;

	if ((r = idem_webhook_once(db, "stripe", event_id, dup)) != SD_OK || *dup)
		return r;
	return hold_locked(db, session_id, id, h);
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

/* money that came, but not what the hold asks: no order; what was taken is
 * owed back, and the hold says what came */
static enum sd_result settle_mismatch(struct db *db, const struct hold_view *h,
				      const struct pay_paid *p, int taken, enum pay_outcome *out)
{
	struct refund_new rn = { p->payment_ref, NULL, 0, h->id, p->amount_minor, p->currency,
				 REFUND_MISMATCH };
	char problem[HOLD_PROBLEM_MAX], paid[48], asked[MONEY_TEXT_MAX];
	enum sd_result r;
	int won = 0, added = 0;

	if (p->amount_minor >= 0)
		money_plain(p->amount_minor, p->currency, paid, sizeof paid);
	else
		snprintf(paid, sizeof paid, "an amount the box cannot read in");
	money_plain(h->amount_minor, h->currency, asked, sizeof asked);
	snprintf(problem, sizeof problem, "the provider took %s %s for a hold of %s %s: %s", paid,
		 p->currency, asked, h->currency, taken ? "no order, refunded" : "no order");
	log_event(LOG_WARN, "payment is not what its hold asks", "hold=%s paid=\"%s %s\" "
		  "asked=\"%s %s\"", h->public_id, paid, p->currency, asked, h->currency);
	if (taken && rn.amount_minor < 0)
		rn.amount_minor = 0;
	if (taken && (r = refund_add(db, &rn, &added, NULL)) != SD_OK)
		return r;
	r = hold_settle_why(db, h->id, taken ? HOLD_REFUNDED : HOLD_EXPIRED, NULL,
			    taken ? p->payment_ref : NULL, problem, &won);
	if (r == SD_OK)
		*out = won ? PAY_MISMATCH : PAY_ALREADY;
	return r;
}

/* the payment went back (a refund in full, a dispute) before its order was
 * made: no order, nothing owed; the hold keeps why */
static enum sd_result settle_returned(struct db *db, const struct hold_view *h,
				      const struct pay_paid *p, const struct back_report *b,
				      enum pay_outcome *out)
{
	char problem[HOLD_PROBLEM_MAX];
	enum sd_result r;
	int won = 0;

	snprintf(problem, sizeof problem, "the payment went back before its order was made (%s)",
		 b->dispute[0] ? "disputed" : "refunded at the payment provider");
	log_event(LOG_WARN, "payment went back before its order", "hold=%s payment=%s",
		  h->public_id, p->payment_ref);
	if ((r = hold_settle_why(db, h->id, HOLD_EXPIRED, NULL, p->payment_ref, problem, &won)) ==
	    SD_OK)
		*out = won ? PAY_RETURNED : PAY_ALREADY;
	return r;
}

/* the order made for the hold, and a part of its payment that went back
 * before it recorded on it */
static enum sd_result settle_ordered(struct db *db, const struct hold_view *h,
				     const struct pay_paid *p, const struct back_report *b,
				     enum pay_outcome *out, char *order)
{
	char again[ORDER_ID_MAX];
	int64_t order_id = 0;
	enum sd_result r;
	int won = 0;

	if ((r = hold_settle(db, h->id, HOLD_ORDERED, order, p->payment_ref, &won)) != SD_OK)
		return r;
	*out = won ? PAY_ORDERED : PAY_ALREADY;
	if (won && b->refunded_minor > 0)
		r = order_money_back(db, p->payment_ref, b->refunded_minor, NULL, &order_id, again);
	return r;
}

static enum sd_result settle_paid(struct db *db, const struct hold_view *h,
				  const struct pay_paid *p, enum pay_outcome *out, char *order)
{
	struct refund_new rn = { p->payment_ref, NULL, 0, h->id, p->amount_minor, p->currency,
				 REFUND_LATE };
	struct back_report b;
	enum sd_result r;
	int won = 0, added = 0;

	if (p->amount_minor != h->amount_minor || strcmp(p->currency, h->currency) != 0)
		return settle_mismatch(db, h, p, p->amount_minor != 0, out);
	if ((r = money_back_of(db, p->payment_ref, &b)) != SD_OK && r != SD_NOT_FOUND)
		return r;
	if (r == SD_OK && (b.in_full || b.dispute[0]))
		return settle_returned(db, h, p, &b, out);
	rn.amount_minor -= b.refunded_minor;	/* what is left of it to give back */
	r = order_of_hold(db, h, p, order);
	if (r == SD_OK)
		return settle_ordered(db, h, p, &b, out, order);
	if (r != SD_SOLD_OUT && r != SD_CONFLICT)
		return r;
	log_event(LOG_INFO, "payment came too late for its seats", "hold=%s why=\"%s\"",
		  h->public_id, err_msg());
	order[0] = '\0';
	if (rn.amount_minor > 0 && (r = refund_add(db, &rn, &added, NULL)) != SD_OK)
		return r;
	if ((r = hold_settle(db, h->id, HOLD_REFUNDED, NULL, p->payment_ref, &won)) != SD_OK)
		return r;
	*out = won ? PAY_REFUNDING : PAY_ALREADY;
	return SD_OK;
}

/* pay_apply and pay_free once the transaction is open: the hold found */
static enum sd_result apply_in(struct db *db, const struct pay_paid *p, int64_t hold_id,
			       enum pay_outcome *out, char *order)
{
	struct pay_paid q = *p;
	struct hold_view h;
	char ref[HOLD_SESSION_MAX + 8];
	enum sd_result r;
	int dup = 0;

	if ((r = begin_on(db, p->event_id, hold_id ? NULL : p->session_id, hold_id, &h, &dup)) !=
	    SD_OK)
		return r;
	if (dup) {
		*out = PAY_DUPLICATE;
		return SD_OK;
	}
	if (h.state == HOLD_ORDERED || h.state == HOLD_REFUNDED ||
	    (h.state == HOLD_FAILED && !(p->payment_ref && *p->payment_ref))) {
		snprintf(order, ORDER_ID_MAX, "%s", h.order_public_id);
		return SD_OK;	/* technique 1: the state is reached */
	}
	/* a failed hold whose payment came after all is a late one */
	if (!q.payment_ref || !*q.payment_ref) {	/* nothing paid: the session names it */
		snprintf(ref, sizeof ref, "%s%s", hold_id ? "free:" : "", hold_id ? h.public_id
										     : p->session_id);
		q.payment_ref = ref;
	}
	return settle_paid(db, &h, &q, out, order);
}

enum sd_result pay_apply(struct db *db, const struct pay_paid *p, enum pay_outcome *out,
			 char *order)
{
	char buf[ORDER_ID_MAX];
	enum sd_result r;

	*out = PAY_ALREADY;
	if (!order)
		order = buf;
	order[0] = '\0';
	if (!p->session_id || !p->currency)
		return err_set(SD_INVALID, "a payment needs its session and currency");
	if ((r = db_begin(db)) != SD_OK)
		return r;
	r = apply_in(db, p, 0, out, order);
	return db_end(db, r);
}

enum sd_result pay_free(struct db *db, int64_t hold_id, enum pay_outcome *out, char *order)
{
	struct hold_view h;
	struct pay_paid p = { NULL, NULL, 0, NULL, NULL };
	char buf[ORDER_ID_MAX];
	enum sd_result r;

	*out = PAY_ALREADY;
	if (!order)
		order = buf;
	order[0] = '\0';
	if ((r = hold_get_id(db, hold_id, &h)) != SD_OK)
		return r;
	if (h.amount_minor != 0)
		return err_set(SD_CONFLICT, "hold %s has %lld to pay", h.public_id,
			       (long long)h.amount_minor);
	p.currency = h.currency;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	r = apply_in(db, &p, hold_id, out, order);
	return db_end(db, r);
}

/* One change to a hold made in a transaction of its own (on_hold). */
typedef enum sd_result (*hold_step)(struct db *db, const struct hold_view *h, const void *arg,
				    enum pay_outcome *out);

/* step on the hold of session_id: the webhook's event id once, the hold
 * read under its event's lock, then step, all in one transaction */
static enum sd_result on_hold(struct db *db, const char *session_id, const char *event_id,
			      hold_step step, const void *arg, enum pay_outcome *out)
{
	struct hold_view h;
	enum sd_result r;
	int dup = 0;

	*out = PAY_ALREADY;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = begin_on(db, event_id, session_id, 0, &h, &dup)) == SD_OK) {
		if (dup)
			*out = PAY_DUPLICATE;
		else
			r = step(db, &h, arg, out);
	}
	return db_end(db, r);
}

struct pending_arg {
	const char *payment_ref;
	int64_t until;
};

static enum sd_result pending_step(struct db *db, const struct hold_view *h, const void *arg,
				   enum pay_outcome *out)
{
	const struct pending_arg *a = arg;
	enum sd_result r;
	int won = 0;

	if ((r = hold_set_pending(db, h->id, a->payment_ref, a->until, &won)) == SD_OK && won) {
		*out = PAY_PENDING;
		log_event(LOG_INFO, "hold waits for a delayed payment", "hold=%s payment=%s",
			  h->public_id, a->payment_ref ? a->payment_ref : "");
	} else if (r == SD_OK && h->state == HOLD_EXPIRED && a->payment_ref && *a->payment_ref) {
		/* it ran out first: its seats stay free, its payment is a late one */
		r = hold_note_payment(db, h->id, a->payment_ref, &won);
	}
	return r;
}

enum sd_result pay_pending(struct db *db, const char *session_id, const char *payment_ref,
			   int64_t until, const char *event_id, enum pay_outcome *out)
{
	struct pending_arg a = { payment_ref, until };

	return on_hold(db, session_id, event_id, pending_step, &a, out);
}

static enum sd_result fail_step(struct db *db, const struct hold_view *h, const void *arg,
				enum pay_outcome *out)
{
	char job_id[64], payload[64];
	enum sd_result r;
	int won = 0;

	(void)arg;
	/* a pending hold that ran out (expired with its payment) fails too */
	if ((r = hold_settle(db, h->id, HOLD_FAILED, NULL,
			     h->payment_ref[0] ? h->payment_ref : NULL, &won)) != SD_OK || !won)
		return r;
	*out = PAY_FAILED;
	log_event(LOG_INFO, "delayed payment failed", "hold=%s", h->public_id);
	snprintf(job_id, sizeof job_id, "outbox:%s:payment-failed", h->public_id);
	snprintf(payload, sizeof payload, "{\"hold_id\":%lld}", (long long)h->id);
	return outbox_add(db, JOB_KIND_PAYFAIL_MAIL, job_id, payload, 0, 0, NULL);
}

enum sd_result pay_fail(struct db *db, const char *session_id, const char *event_id,
			enum pay_outcome *out)
{
	return on_hold(db, session_id, event_id, fail_step, NULL, out);
}

static enum sd_result expire_step(struct db *db, const struct hold_view *h, const void *arg,
				  enum pay_outcome *out)
{
	enum sd_result r;
	int won = 0;

	(void)arg;
	if ((r = hold_settle(db, h->id, HOLD_EXPIRED, NULL, NULL, &won)) == SD_OK && won)
		*out = PAY_EXPIRED;
	return r;
}

enum sd_result pay_expire(struct db *db, const char *session_id, const char *event_id,
			  enum pay_outcome *out)
{
	return on_hold(db, session_id, event_id, expire_step, NULL, out);
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
	"SELECT payment_ref FROM refunds WHERE via = 'provider' AND done_at IS NULL "
	"AND failed_at IS NULL LIMIT 1";
static const char SQL_BACK_STANDING[] =
	"SELECT public_id FROM orders WHERE cancelled_at IS NULL AND (disputed_at IS NOT NULL "
	"OR (amount_minor > 0 AND refunded_minor >= amount_minor)) LIMIT 1";
static const char SQL_OPEN_PAST[] =
	"SELECT public_id FROM holds WHERE state IN ('open', 'pending') AND expires_at < ?1 "
	"LIMIT 1";

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
		{ SQL_BACK_STANDING, 0, "order %s stands though its payment went back (refunded "
					"in full or disputed)" },
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
