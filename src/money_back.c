/*
 * money_back.c: money going back after an order, as the provider reports
 * it (money_back.h).
 */
#include "money_back.h"

#include <stdio.h>
#include <string.h>

#include "text.h"

#include "clock.h"
#include "idem.h"
#include "log.h"
#include "money.h"
#include "orders.h"
#include "refunds.h"

static const char *const OUTCOMES[] = { "cancelled", "recorded", "ignored", "duplicate" };

const char *back_outcome_name(enum back_outcome o)
{
	return OUTCOMES[o];
}

/* ======================== reports for a payment no order carries ======== */

static const char SQL_KEEP[] =
	"INSERT INTO payment_backs (payment_ref, refunded_minor, in_full, dispute, at) "
	"VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (payment_ref) DO UPDATE SET "
	"refunded_minor = CASE WHEN excluded.refunded_minor > payment_backs.refunded_minor "
	"THEN excluded.refunded_minor ELSE payment_backs.refunded_minor END, "
	"in_full = CASE WHEN excluded.in_full = 1 THEN 1 ELSE payment_backs.in_full END, "
	"dispute = coalesce(excluded.dispute, payment_backs.dispute)";

/* b kept for its payment, to be applied with it */
static enum sd_result keep(struct db *db, const struct pay_back *b)
{
	struct db_stmt *st = db_stmt(db, SQL_KEEP);
	int full = b->dispute || b->full ||
		   (b->charged_minor > 0 && b->amount_minor >= b->charged_minor);

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, b->payment_ref);
	db_bind_int(st, 2, !b->dispute && b->amount_minor > 0 ? b->amount_minor : 0);
	db_bind_int(st, 3, full);
	db_bind_text(st, 4, b->dispute ? (b->what && *b->what ? b->what : "disputed") : NULL);
	db_bind_int(st, 5, clock_now_ms());
	return db_run(st);
}

static const char SQL_REPORT[] =
	"SELECT refunded_minor, in_full, coalesce(dispute, '') FROM payment_backs "
	"WHERE payment_ref = ?1";

enum sd_result money_back_of(struct db *db, const char *payment_ref, struct back_report *out)
{
	struct db_stmt *st = db_stmt(db, SQL_REPORT);
	enum sd_result r;
	int row;

	memset(out, 0, sizeof *out);
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, payment_ref ? payment_ref : "");
	if ((row = db_next(st, &r))) {
		out->refunded_minor = db_col_int(st, 0);
		out->in_full = (int)db_col_int(st, 1);
		text_copy(out->dispute, sizeof out->dispute, db_col_text(st, 2));
	}
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_NOT_FOUND, "nothing went back of %.60s", payment_ref);
	return r;
}

static const char SQL_PRUNE[] =
	"DELETE FROM payment_backs WHERE payment_ref IN (SELECT payment_ref FROM payment_backs "
	"WHERE at < ?1 ORDER BY at LIMIT ?2)";

enum sd_result money_back_prune(struct db *db, int64_t before_ms, int limit, int64_t *n)
{
	return db_prune(db, SQL_PRUNE, before_ms, limit, n);
}

/* ======================== reports of an order's payment =================== */

/* why the order is cancelled, for its change row and the box office */
static void why_of(const struct pay_back *b, char *out, size_t size)
{
	char amount[MONEY_TEXT_MAX];

	if (b->dispute) {
		snprintf(out, size, "the buyer's bank disputed the payment (%.100s)",
			 b->what && *b->what ? b->what : "no reason given");
		return;
	}
	money_plain(b->amount_minor < 0 ? 0 : b->amount_minor, b->currency, amount,
		    sizeof amount);
	snprintf(out, size, "the payment was refunded at the payment provider (%s %s)", amount,
		 b->currency);
}

/* the order's money back recorded, and the order cancelled when it all
 * went back; a payment no order carries yet: the report kept for it */
static enum sd_result back_in(struct db *db, const struct pay_back *b, enum back_outcome *out,
			      char *order)
{
	struct order_cancel_result cr;
	char why[ORDER_REASON_MAX + 1];
	int64_t order_id = 0;
	enum sd_result r;
	int all;

	r = order_money_back(db, b->payment_ref, b->dispute ? -1 : b->amount_minor,
			     b->dispute ? (b->what && *b->what ? b->what : "disputed") : NULL,
			     &order_id, order);
	if (r == SD_NOT_FOUND) {	/* its order still to come, or none ever */
		*out = BACK_RECORDED;
		return keep(db, b);
	}
	if (r != SD_OK)
		return r;
	*out = BACK_RECORDED;
	all = b->dispute || b->full ||
	      (b->charged_minor > 0 && b->amount_minor >= b->charged_minor);
	if (!all)
		return SD_OK;
	why_of(b, why, sizeof why);
	if ((r = order_cancel_in(db, order_id, "stripe", why, ORDER_CANCEL_MONEY_BACK, &cr)) !=
	    SD_OK)
		return r;
	if (!cr.already) {
		*out = BACK_CANCELLED;
		log_event(LOG_WARN, "order cancelled: its money went back", "order=%s why=\"%s\"",
			  order, why);
	}
	return SD_OK;
}

enum sd_result pay_money_back(struct db *db, const struct pay_back *b, enum back_outcome *out,
			      char *order)
{
	char buf[ORDER_ID_MAX];
	enum sd_result r;
	int dup = 0;

	*out = BACK_IGNORED;
	if (!order)
		order = buf;
	order[0] = '\0';
	if (!b->payment_ref || !*b->payment_ref || !b->currency)
		return SD_OK;	/* a payment not made through a payment intent: none of ours */
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = idem_webhook_once(db, "stripe", b->event_id, &dup)) == SD_OK) {
		if (dup)
			*out = BACK_DUPLICATE;
		else
			r = back_in(db, b, out, order);
	}
	return db_end(db, r);
}

/* w is the box's refund rf: its provider id, or (none recorded yet) its key */
static int ours(const struct refund_view *rf, const struct pay_refund_word *w)
{
	if (rf->window)
		return 0;
	if (rf->provider_refund_id[0])
		return w->refund_id && strcmp(rf->provider_refund_id, w->refund_id) == 0;
	return w->key && strcmp(rf->key, w->key) == 0;
}

enum sd_result pay_refund_word(struct db *db, const struct pay_refund_word *w,
			       enum back_outcome *out)
{
	struct refund_view rf;
	enum refund_now now;
	enum sd_result r;
	int dup = 0;

	*out = BACK_IGNORED;
	if (!w->payment_ref || !*w->payment_ref || !w->status || !*w->status)
		return SD_OK;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = idem_webhook_once(db, "stripe", w->event_id, &dup)) != SD_OK || dup) {
		*out = dup ? BACK_DUPLICATE : BACK_IGNORED;
		goto out;
	}
	if ((r = refund_of_payment(db, w->payment_ref, &rf)) == SD_NOT_FOUND || (r == SD_OK &&
										  !ours(&rf, w))) {
		r = SD_OK;
		goto out;
	}
	if (r != SD_OK)
		goto out;
	r = refund_record(db, &rf, w->status, w->refund_id, w->failure, 0, &now);
	if (r == SD_INVALID) {	/* a status this box does not know: nothing to do */
		r = SD_OK;
		goto out;
	}
	if (r == SD_OK) {
		*out = BACK_RECORDED;
		if (now == REFUND_NOW_FAILED)
			log_event(LOG_WARN, "refund failed at the provider: owed at the window",
				  "payment=%s refund=%s", w->payment_ref, w->refund_id);
	}
out:
	return db_end(db, r);
}
