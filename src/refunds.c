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
	db_bind_text(st, 6, n->reason == REFUND_LATE ? "late" : "cancelled");
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
	"coalesce(provider_refund_id, ''), coalesce(provider_key, 'refund-' || payment_ref) " \
	"FROM refunds WHERE "
#define REFUND_BY_ID "id = ?1"
#define REFUND_BY_ORDER "order_id = ?1"

static enum sd_result refund_read(struct db *db, const char *sql, int64_t id,
				  struct refund_view *out)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	if ((r = db_step(st, &row)) == SD_OK && row) {
		memset(out, 0, sizeof *out);
		out->id = db_col_int(st, 0);
		out->order_id = db_col_int(st, 1);
		out->hold_id = db_col_int(st, 2);
		out->amount_minor = db_col_int(st, 3);
		out->created_at = db_col_int(st, 4);
		out->done_at = db_col_int(st, 5);
		out->reason = strcmp(db_col_text(st, 6), "late") == 0 ? REFUND_LATE
								       : REFUND_CANCELLED;
		out->window = strcmp(db_col_text(st, 7), "window") == 0;
		text_copy(out->payment_ref, sizeof out->payment_ref, db_col_text(st, 8));
		text_copy(out->currency, sizeof out->currency, db_col_text(st, 9));
		text_copy(out->provider_refund_id, sizeof out->provider_refund_id,
			  db_col_text(st, 10));
		text_copy(out->key, sizeof out->key, db_col_text(st, 11));
	}
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_NOT_FOUND, "no refund %lld", (long long)id);
	return r;
}

enum sd_result refund_get(struct db *db, int64_t id, struct refund_view *out)
{
	static const char sql[] = SQL_GET_HEAD REFUND_BY_ID;

	return refund_read(db, sql, id, out);
}

enum sd_result refund_of_order(struct db *db, int64_t order_id, struct refund_view *out)
{
	static const char sql[] = SQL_GET_HEAD REFUND_BY_ORDER;

	return refund_read(db, sql, order_id, out);
}

static const char SQL_DONE[] =
	"UPDATE refunds SET done_at = ?2, provider_refund_id = ?3 WHERE id = ?1 "
	"AND done_at IS NULL";

enum sd_result refund_mark_done(struct db *db, int64_t id, const char *provider_refund_id,
				int *won)
{
	struct db_stmt *st = db_stmt(db, SQL_DONE);
	enum sd_result r;

	*won = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	db_bind_int(st, 2, clock_now_ms());
	db_bind_text(st, 3, provider_refund_id && *provider_refund_id ? provider_refund_id : NULL);
	if ((r = db_run(st)) == SD_OK)
		*won = db_changes(db) > 0;
	return r;
}
