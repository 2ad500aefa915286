/*
 * refunds.c: money owed back, once per payment (refunds.h).
 */
#include "refunds.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "idem.h"
#include "jobkinds.h"
#include "outbox.h"
#include "text.h"

static const char *const REASONS[] = { "late", "cancelled", "mismatch" };

static const char SQL_ADD[] =
	"INSERT INTO refunds (payment_ref, order_id, hold_id, amount_minor, currency, reason, "
	"via, created_at, provider_key) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
	"ON CONFLICT (payment_ref) DO NOTHING RETURNING id";

static void bind_or_null(struct db_stmt *st, int at, int64_t v)
{
	if (v)
		db_bind_int(st, at, v);
	else
		db_bind_null(st, at);
}

enum sd_result refund_add(struct db *db, const struct refund_new *n, int *added, int64_t *id)
{
	char ref[REFUND_REF_MAX], job_id[REFUND_REF_MAX + 32], payload[64];
	char key[REFUND_REF_MAX + 16];
	struct db_stmt *st;
	enum sd_result r;
	int64_t rid = 0;
	int row = 0;

	*added = 0;
	if (n->payment_ref)
		snprintf(ref, sizeof ref, "%s", n->payment_ref);
	else
		snprintf(ref, sizeof ref, "window:%s", n->order_public_id ? n->order_public_id : "");
	if (!(st = db_stmt(db, SQL_ADD)))
		return SD_DB;
	db_bind_text(st, 1, ref);
	bind_or_null(st, 2, n->order_id);
	bind_or_null(st, 3, n->hold_id);
	db_bind_int(st, 4, n->amount_minor);
	db_bind_text(st, 5, n->currency);
	db_bind_text(st, 6, REASONS[n->reason]);
	db_bind_text(st, 7, n->payment_ref ? "provider" : "window");
	db_bind_int(st, 8, clock_now_ms());
	/* a cancelled order's refund is named by the order, a late payment's
	 * by the payment (it has no order) */
	if (n->payment_ref && n->order_public_id)
		idem_provider_key(key, sizeof key, "refund", n->order_public_id);
	else
		idem_provider_key(key, sizeof key, "refund", n->payment_ref ? n->payment_ref : ref);
	db_bind_text(st, 9, n->payment_ref ? key : NULL);
	if ((r = db_step(st, &row)) == SD_OK && row)
		rid = db_col_int(st, 0);
	db_reset(st);
	if (r != SD_OK || !row)
		return r;	/* owed already: nothing new */
	*added = 1;
	if (id)
		*id = rid;
	if (!n->payment_ref || n->no_job)
		return SD_OK;	/* paid out at the window, or by the caller: no job */
	snprintf(job_id, sizeof job_id, "outbox:%s:refund", ref);
	snprintf(payload, sizeof payload, "{\"refund_id\":%lld}", (long long)rid);
	return outbox_add(db, JOB_KIND_REFUND, job_id, payload, 0, 0, NULL);
}

#define SQL_GET_HEAD \
	"SELECT id, coalesce(order_id, 0), coalesce(hold_id, 0), amount_minor, created_at, " \
	"coalesce(done_at, 0), reason, via, payment_ref, currency, " \
	"coalesce(provider_refund_id, ''), coalesce(provider_key, 'refund-' || payment_ref), " \
	"coalesce(failed_at, 0), coalesce(status, ''), coalesce(failure, '') " \
	"FROM refunds WHERE "
#define REFUND_BY_ID "id = ?1"
#define REFUND_BY_ORDER "order_id = ?1"
#define REFUND_BY_PAYMENT "payment_ref = ?1"

static enum refund_reason reason_of(const char *s)
{
	return strcmp(s, "late") == 0 ? REFUND_LATE : strcmp(s, "mismatch") == 0 ? REFUND_MISMATCH
											 : REFUND_CANCELLED;
}

static enum sd_result refund_read(struct db *db, const char *sql, int64_t id, const char *ref,
				  struct refund_view *out)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	if (ref)
		db_bind_text(st, 1, ref);
	else
		db_bind_int(st, 1, id);
	if ((r = db_step(st, &row)) == SD_OK && row) {
		memset(out, 0, sizeof *out);
		out->id = db_col_int(st, 0);
		out->order_id = db_col_int(st, 1);
		out->hold_id = db_col_int(st, 2);
		out->amount_minor = db_col_int(st, 3);
		out->created_at = db_col_int(st, 4);
		out->done_at = db_col_int(st, 5);
		out->reason = reason_of(db_col_text(st, 6));
		out->window = strcmp(db_col_text(st, 7), "window") == 0;
		text_copy(out->payment_ref, sizeof out->payment_ref, db_col_text(st, 8));
		text_copy(out->currency, sizeof out->currency, db_col_text(st, 9));
		text_copy(out->provider_refund_id, sizeof out->provider_refund_id,
			  db_col_text(st, 10));
		text_copy(out->key, sizeof out->key, db_col_text(st, 11));
		out->failed_at = db_col_int(st, 12);
		text_copy(out->status, sizeof out->status, db_col_text(st, 13));
		text_copy(out->failure, sizeof out->failure, db_col_text(st, 14));
	}
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_NOT_FOUND, "no refund %lld", (long long)id);
	return r;
}

enum sd_result refund_get(struct db *db, int64_t id, struct refund_view *out)
{
	static const char sql[] = SQL_GET_HEAD REFUND_BY_ID;

	return refund_read(db, sql, id, NULL, out);
}

enum sd_result refund_of_payment(struct db *db, const char *payment_ref, struct refund_view *out)
{
	static const char sql[] = SQL_GET_HEAD REFUND_BY_PAYMENT;

	if (!payment_ref || !*payment_ref)
		return err_set(SD_NOT_FOUND, "no refund");
	return refund_read(db, sql, 0, payment_ref, out);
}

enum sd_result refund_of_order(struct db *db, int64_t order_id, struct refund_view *out)
{
	static const char sql[] = SQL_GET_HEAD REFUND_BY_ORDER;

	return refund_read(db, sql, order_id, NULL, out);
}

static const char SQL_DONE[] =
	"UPDATE refunds SET done_at = ?2, status = 'succeeded', "
	"provider_refund_id = coalesce(?3, provider_refund_id) WHERE id = ?1 "
	"AND done_at IS NULL AND failed_at IS NULL";
static const char SQL_FAILED[] =
	"UPDATE refunds SET failed_at = ?2, status = ?4, failure = ?5, "
	"provider_refund_id = coalesce(?3, provider_refund_id) WHERE id = ?1 AND failed_at IS NULL";
static const char SQL_STILL[] =
	"UPDATE refunds SET status = ?4, provider_refund_id = coalesce(?3, provider_refund_id) "
	"WHERE id = ?1 AND done_at IS NULL AND failed_at IS NULL AND ?2 > 0";

enum sd_result refund_mark_status(struct db *db, int64_t id, const char *status,
				  const char *provider_refund_id, const char *failure, int *won)
{
	int failed = strcmp(status, "failed") == 0 || strcmp(status, "canceled") == 0;
	int done = strcmp(status, "succeeded") == 0;
	struct db_stmt *st;
	enum sd_result r;

	*won = 0;
	if (!done && !failed && strcmp(status, "pending") != 0 &&
	    strcmp(status, "requires_action") != 0)
		return err_set(SD_INVALID, "no refund status '%.30s'", status);
	if (!(st = db_stmt(db, done ? SQL_DONE : failed ? SQL_FAILED : SQL_STILL)))
		return SD_DB;
	db_bind_int(st, 1, id);
	db_bind_int(st, 2, clock_now_ms());
	db_bind_text(st, 3, provider_refund_id && *provider_refund_id ? provider_refund_id : NULL);
	if (!done) {
		db_bind_text(st, 4, status);
		if (failed)
			db_bind_text(st, 5, failure && *failure ? failure : "no reason given");
	}
	if ((r = db_run(st)) == SD_OK)
		*won = (done || failed) && db_changes(db) > 0;
	return r;
}

enum sd_result refund_mark_done(struct db *db, int64_t id, const char *provider_refund_id,
				int *won)
{
	return refund_mark_status(db, id, "succeeded", provider_refund_id, NULL, won);
}

/* the buyer of a payment that made no order is told it is refunded */
static enum sd_result notice_add(struct db *db, const struct refund_view *rf)
{
	char job_id[REFUND_REF_MAX + 32], payload[64];

	snprintf(job_id, sizeof job_id, "outbox:%s:refund-notice", rf->payment_ref);
	snprintf(payload, sizeof payload, "{\"refund_id\":%lld}", (long long)rf->id);
	return outbox_add(db, JOB_KIND_REFUND_MAIL, job_id, payload, 0, 0, NULL);
}

enum sd_result refund_record(struct db *db, const struct refund_view *rf, const char *status,
			     const char *provider_refund_id, const char *failure, int follow,
			     enum refund_now *now)
{
	char job_id[REFUND_REF_MAX + 32], payload[64];
	enum refund_now n = REFUND_NOW_PENDING;
	enum sd_result r;
	int won = 0, there = 0;

	if ((r = refund_mark_status(db, rf->id, status, provider_refund_id, failure, &won)) !=
	    SD_OK)
		return r;
	if (strcmp(status, "succeeded") == 0)
		n = REFUND_NOW_DONE;
	else if (strcmp(status, "failed") == 0 || strcmp(status, "canceled") == 0)
		n = REFUND_NOW_FAILED;
	if (now)
		*now = n;
	if (n == REFUND_NOW_DONE && won && rf->reason != REFUND_CANCELLED)
		return notice_add(db, rf);
	if (n != REFUND_NOW_PENDING || !follow)
		return SD_OK;
	snprintf(job_id, sizeof job_id, "outbox:%s:refund", rf->payment_ref);
	snprintf(payload, sizeof payload, "{\"refund_id\":%lld}", (long long)rf->id);
	if ((r = outbox_queued(db, job_id, &there)) != SD_OK || there)
		return r;	/* asked to follow before: once */
	return outbox_add(db, JOB_KIND_REFUND, job_id, payload, REFUND_POLL_MS, 0, NULL);
}
