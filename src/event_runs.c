/*
 * event_runs.c: a whole event at once (event_runs.h).
 *
 * Invariants:
 *  - the event's change, its run and the parent's outbox row commit
 *    together; each batch of children commits with the cursor it reached;
 *  - a child's step moves only by a conditional update on its row (one run
 *    wins it), and the run's counts move in that same transaction;
 *  - the first statement of each transaction here writes the row it is
 *    about (the run's, the child's), so that on PostgreSQL two deliveries
 *    of one job queue one behind the other instead of both reading the same
 *    step (SQLite's writer lock does that already).
 */
#include "event_runs.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "event_edit.h"
#include "jobkinds.h"
#include "orders.h"
#include "outbox.h"
#include "queue.h"
#include "refunds.h"
#include "text.h"
#include "tickets.h"

static const char *const kind_names[] = { "cancel", "move" };
static const char *const step_names[] = { "queued", "cancelled", "refunded", "done", "skipped",
					   "failed" };

const char *event_run_kind_name(enum event_run_kind k)
{
	return kind_names[k];
}

const char *event_run_step_name(enum event_run_step s)
{
	return step_names[s];
}

static enum event_run_step step_of(const char *s)
{
	int i;

	for (i = 0; i < (int)(sizeof step_names / sizeof step_names[0]); i++)
		if (strcmp(s, step_names[i]) == 0)
			return (enum event_run_step)i;
	return RUN_STEP_FAILED;
}

/* ======================== reading a run ================================== */

#define RUN_COLS \
	"SELECT id, event_id, kind, change_no, created_at, cursor_order, " \
	"coalesce(enqueued_at, 0), coalesce(finished_at, 0), orders, done, refunded, at_window, " \
	"emailed, failed, coalesce(old_starts_at, 0), coalesce(old_venue, ''), actor, " \
	"coalesce(reason, '') FROM event_runs "
static const char SQL_RUN_GET[] = RUN_COLS "WHERE id = ?1";
static const char SQL_RUN_OF[] = RUN_COLS "WHERE event_id = ?1 AND kind = ?2 AND change_no = ?3";
static const char SQL_RUN_EACH[] = RUN_COLS "WHERE event_id = ?1 ORDER BY id DESC LIMIT ?2";

static void run_read(struct db_stmt *st, struct event_run_view *v)
{
	memset(v, 0, sizeof *v);
	v->id = db_col_int(st, 0);
	v->event_id = db_col_int(st, 1);
	v->kind = strcmp(db_col_text(st, 2), "move") == 0 ? EVENT_RUN_MOVE : EVENT_RUN_CANCEL;
	v->change_no = db_col_int(st, 3);
	v->created_at = db_col_int(st, 4);
	v->cursor = db_col_int(st, 5);
	v->enqueued_at = db_col_int(st, 6);
	v->finished_at = db_col_int(st, 7);
	v->orders = db_col_int(st, 8);
	v->done = db_col_int(st, 9);
	v->refunded = db_col_int(st, 10);
	v->at_window = db_col_int(st, 11);
	v->emailed = db_col_int(st, 12);
	v->failed = db_col_int(st, 13);
	v->old_starts_at = db_col_int(st, 14);
	text_copy(v->old_venue, sizeof v->old_venue, db_col_text(st, 15));
	text_copy(v->actor, sizeof v->actor, db_col_text(st, 16));
	text_copy(v->reason, sizeof v->reason, db_col_text(st, 17));
}

static enum sd_result run_one(struct db *db, const char *sql, int64_t a, const char *b,
			      int64_t c, struct event_run_view *out)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, a);
	if (b) {
		db_bind_text(st, 2, b);
		db_bind_int(st, 3, c);
	}
	if ((row = db_next(st, &r)))
		run_read(st, out);
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_NOT_FOUND, "no such run of event %lld", (long long)a);
	return r;
}

enum sd_result event_run_get(struct db *db, int64_t run_id, struct event_run_view *out)
{
	return run_one(db, SQL_RUN_GET, run_id, NULL, 0, out);
}

enum sd_result event_run_each(struct db *db, int64_t event_id,
			      void (*fn)(const struct event_run_view *r, void *arg), void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_RUN_EACH);
	struct event_run_view v;
	enum sd_result r;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, EVENT_RUNS_SHOWN);
	while (db_next(st, &r)) {
		run_read(st, &v);
		fn(&v, arg);
	}
	db_reset(st);
	return r;
}

/* ======================== starting a run ================================= */

static const char SQL_RUN_ADD[] =
	"INSERT INTO event_runs (event_id, kind, change_no, actor, reason, old_starts_at, "
	"old_venue, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id";

static void parent_job_id(int64_t event_id, enum event_run_kind kind, int64_t change_no,
			  char *buf, size_t size)
{
	if (kind == EVENT_RUN_CANCEL)
		snprintf(buf, size, "outbox:event-%lld:cancel", (long long)event_id);
	else
		snprintf(buf, size, "outbox:event-%lld:move-%lld", (long long)event_id,
			 (long long)change_no);
}

void event_run_child_job_id(const struct event_run_view *run, const char *order_public_id,
			    const char *suffix, char *buf, size_t size)
{
	char parent[QUEUE_JOB_ID_MAX + 1];

	parent_job_id(run->event_id, run->kind, run->change_no, parent, sizeof parent);
	snprintf(buf, size, "%s:%s%s", parent, order_public_id, suffix ? suffix : "");
}

/* the run's row and its parent's outbox row, in the caller's transaction */
static enum sd_result run_add(struct db *db, const struct event_view *e, enum event_run_kind kind,
			      int64_t change_no, const char *actor, const char *reason)
{
	struct db_stmt *st = db_stmt(db, SQL_RUN_ADD);
	char job_id[QUEUE_JOB_ID_MAX + 1], payload[48];
	enum sd_result r;
	int64_t id = 0;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, e->id);
	db_bind_text(st, 2, kind_names[kind]);
	db_bind_int(st, 3, change_no);
	db_bind_text(st, 4, actor);
	db_bind_text(st, 5, reason && *reason ? reason : NULL);
	if (kind == EVENT_RUN_MOVE) {
		db_bind_int(st, 6, e->starts_at);
		db_bind_text(st, 7, e->venue);
	} else {
		db_bind_null(st, 6);
		db_bind_null(st, 7);
	}
	db_bind_int(st, 8, clock_now_ms());
	if (db_next(st, &r))
		id = db_col_int(st, 0);
	db_reset(st);
	if (r != SD_OK)
		return r;
	parent_job_id(e->id, kind, change_no, job_id, sizeof job_id);
	snprintf(payload, sizeof payload, "{\"run_id\":%lld}", (long long)id);
	return outbox_add(db, JOB_KIND_EVENT_RUN, job_id, payload, 0, 0, NULL);
}

static const char SQL_EVENT_CANCEL[] =
	"UPDATE events SET cancelled_at = ?2, cancel_reason = ?3, "
	"closed_at = coalesce(closed_at, ?2) WHERE id = ?1 AND cancelled_at IS NULL";

enum sd_result event_cancel(struct db *db, int64_t event_id, const char *actor,
			    const char *reason, struct event_run_view *run, int *already)
{
	struct event_view e;
	struct db_stmt *st;
	enum sd_result r;

	*already = 0;
	if ((r = text_check("who", actor, EVENT_RUN_ACTOR_MAX)) != SD_OK ||
	    (r = text_check("reason", reason ? reason : "", EVENT_RUN_REASON_MAX)) != SD_OK)
		return r;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = event_row_lock(db, event_id)) != SD_OK || (r = event_get(db, event_id, &e)) != SD_OK)
		goto out;
	if (e.cancelled_at) {
		*already = 1;
		r = run_one(db, SQL_RUN_OF, event_id, "cancel", 0, run);
		goto out;
	}
	if (!(st = db_stmt(db, SQL_EVENT_CANCEL))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, clock_now_ms());
	db_bind_text(st, 3, reason);
	if ((r = db_run(st)) != SD_OK ||
	    (r = run_add(db, &e, EVENT_RUN_CANCEL, 0, actor, reason)) != SD_OK)
		goto out;
	r = run_one(db, SQL_RUN_OF, event_id, "cancel", 0, run);
out:
	return db_end(db, r);
}

static const char SQL_CHANGE_NO[] =
	"UPDATE events SET change_no = change_no + 1 WHERE id = ?1 RETURNING change_no";

enum sd_result event_run_move_add(struct db *db, const struct event_view *before,
				  const char *actor, int64_t *change_no)
{
	struct db_stmt *st = db_stmt(db, SQL_CHANGE_NO);
	enum sd_result r;

	*change_no = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, before->id);
	if (db_next(st, &r))
		*change_no = db_col_int(st, 0);
	db_reset(st);
	if (r != SD_OK)
		return r;
	return run_add(db, before, EVENT_RUN_MOVE, *change_no, actor, NULL);
}

/* ======================== the parent ===================================== */

/* the first write of the batch: the run's row, locked on PostgreSQL */
static const char SQL_RUN_LOCK[] =
	"UPDATE event_runs SET cursor_order = cursor_order WHERE id = ?1 RETURNING id";
static const char SQL_NEXT_ORDERS[] =
	"SELECT id, public_id FROM orders WHERE event_id = ?1 AND id > ?2 AND cancelled_at IS NULL "
	"ORDER BY id LIMIT ?3";
static const char SQL_CHILD_ADD[] =
	"INSERT INTO event_run_orders (run_id, order_id) VALUES (?1, ?2)";
static const char SQL_RUN_MOVED[] =
	"UPDATE event_runs SET cursor_order = ?2, orders = orders + ?3, "
	"enqueued_at = CASE WHEN ?4 = 1 THEN ?5 ELSE NULL END, "
	"finished_at = CASE WHEN ?4 = 1 AND done >= orders + ?3 THEN ?5 ELSE NULL END "
	"WHERE id = ?1";

struct batch_order {
	int64_t id;
	char public_id[ORDER_ID_MAX];
};

static enum sd_result batch_read(struct db *db, const struct event_run_view *run, int limit,
				 struct batch_order *out, int *n)
{
	struct db_stmt *st = db_stmt(db, SQL_NEXT_ORDERS);
	enum sd_result r;

	*n = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, run->event_id);
	db_bind_int(st, 2, run->cursor);
	db_bind_int(st, 3, limit);
	while (db_next(st, &r) && *n < limit) {
		out[*n].id = db_col_int(st, 0);
		text_copy(out[*n].public_id, sizeof out[*n].public_id, db_col_text(st, 1));
		(*n)++;
	}
	db_reset(st);
	return r;
}

static enum sd_result child_add(struct db *db, const struct event_run_view *run,
				const struct batch_order *o)
{
	struct db_stmt *st = db_stmt(db, SQL_CHILD_ADD);
	char job_id[QUEUE_JOB_ID_MAX + 1], payload[80];
	enum sd_result r;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, run->id);
	db_bind_int(st, 2, o->id);
	if ((r = db_run(st)) != SD_OK)
		return r;
	event_run_child_job_id(run, o->public_id, NULL, job_id, sizeof job_id);
	snprintf(payload, sizeof payload, "{\"run_id\":%lld,\"order_id\":%lld}",
		 (long long)run->id, (long long)o->id);
	return outbox_add(db, run->kind == EVENT_RUN_CANCEL ? JOB_KIND_EVENT_CANCEL_ORDER
							    : JOB_KIND_EVENT_MOVE_ORDER,
			  job_id, payload, 0, 0, NULL);
}

static enum sd_result run_lock(struct db *db, int64_t run_id, struct event_run_view *run)
{
	struct db_stmt *st = db_stmt(db, SQL_RUN_LOCK);
	enum sd_result r;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, run_id);
	if ((r = db_run(st)) != SD_OK)
		return r;
	return event_run_get(db, run_id, run);
}

enum sd_result event_run_enqueue(struct db *db, int64_t run_id, int limit, int64_t *queued,
				 int *enqueued)
{
	struct batch_order batch[EVENT_RUN_BATCH];
	struct event_run_view run;
	struct db_stmt *st;
	enum sd_result r;
	int i, n = 0, last;

	*queued = 0;
	*enqueued = 0;
	if (limit < 1 || limit > EVENT_RUN_BATCH)
		limit = EVENT_RUN_BATCH;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = run_lock(db, run_id, &run)) != SD_OK)
		goto out;
	if (run.enqueued_at) {		/* check state first: an earlier run finished it */
		*enqueued = 1;
		goto out;
	}
	if ((r = batch_read(db, &run, limit, batch, &n)) != SD_OK)
		goto out;
	for (i = 0; i < n && r == SD_OK; i++)
		r = child_add(db, &run, &batch[i]);
	if (r != SD_OK)
		goto out;
	last = n < limit;
	if (!(st = db_stmt(db, SQL_RUN_MOVED))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, run.id);
	db_bind_int(st, 2, n ? batch[n - 1].id : run.cursor);
	db_bind_int(st, 3, n);
	db_bind_int(st, 4, last);
	db_bind_int(st, 5, clock_now_ms());
	if ((r = db_run(st)) == SD_OK) {
		*queued = n;
		*enqueued = last;
	}
out:
	return db_end(db, r);
}

/* ======================== the children =================================== */

/* the first write of a child's step: its row, locked on PostgreSQL */
static const char SQL_CHILD_LOCK[] =
	"UPDATE event_run_orders SET step = step WHERE run_id = ?1 AND order_id = ?2 "
	"RETURNING step, coalesce(detail, '')";
static const char SQL_CHILD_MOVE[] =
	"UPDATE event_run_orders SET step = ?3, detail = coalesce(?5, detail) "
	"WHERE run_id = ?1 AND order_id = ?2 AND step = ?4";
static const char SQL_RUN_COUNT[] =
	"UPDATE event_runs SET done = done + ?2, refunded = refunded + ?3, "
	"at_window = at_window + ?4, emailed = emailed + ?5, failed = failed + ?6, "
	"finished_at = CASE WHEN finished_at IS NULL AND enqueued_at IS NOT NULL "
	"AND done + ?2 >= orders THEN ?7 ELSE finished_at END WHERE id = ?1";

struct run_counts {
	int64_t done, refunded, at_window, emailed, failed;
};

static enum sd_result run_count(struct db *db, int64_t run_id, const struct run_counts *c)
{
	struct db_stmt *st = db_stmt(db, SQL_RUN_COUNT);

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, run_id);
	db_bind_int(st, 2, c->done);
	db_bind_int(st, 3, c->refunded);
	db_bind_int(st, 4, c->at_window);
	db_bind_int(st, 5, c->emailed);
	db_bind_int(st, 6, c->failed);
	db_bind_int(st, 7, clock_now_ms());
	return db_run(st);
}

static enum sd_result child_lock(struct db *db, int64_t run_id, int64_t order_id,
				 enum event_run_step *step, char *detail)
{
	struct db_stmt *st = db_stmt(db, SQL_CHILD_LOCK);
	enum sd_result r;
	int row;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, run_id);
	db_bind_int(st, 2, order_id);
	if ((row = db_next(st, &r))) {
		*step = step_of(db_col_text(st, 0));
		if (detail)
			text_copy(detail, EVENT_RUN_REASON_MAX + 1, db_col_text(st, 1));
	}
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_NOT_FOUND, "order %lld is no child of run %lld", (long long)order_id,
			    (long long)run_id);
	return r;
}

/* technique 1: the step from -> to, [out] *won when this call moved it */
static enum sd_result child_move(struct db *db, int64_t run_id, int64_t order_id,
				 enum event_run_step from, enum event_run_step to,
				 const char *detail, int *won)
{
	struct db_stmt *st = db_stmt(db, SQL_CHILD_MOVE);
	enum sd_result r;
	int64_t n = 0;

	*won = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, run_id);
	db_bind_int(st, 2, order_id);
	db_bind_text(st, 3, step_names[to]);
	db_bind_text(st, 4, step_names[from]);
	db_bind_text(st, 5, detail);
	if ((r = db_run_changes(db, st, &n)) == SD_OK)
		*won = n > 0;
	return r;
}

enum sd_result event_child_step(struct db *db, int64_t run_id, int64_t order_id,
				enum event_run_step *step, char *detail)
{
	enum sd_result r;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	return db_end(db, child_lock(db, run_id, order_id, step, detail));
}

/* what the cancellation came to, as the child's next step and its counts */
static enum event_run_step cancel_outcome(const struct order_cancel_result *res,
					  struct run_counts *c)
{
	if (res->already) {
		c->done = 1;
		return RUN_STEP_SKIPPED;
	}
	if (res->refund == ORDER_REFUND_PROVIDER)
		return RUN_STEP_CANCELLED;
	c->at_window = res->refund == ORDER_REFUND_WINDOW;
	return RUN_STEP_REFUNDED;
}

enum sd_result event_child_cancel(struct db *db, const struct event_run_view *run,
				  int64_t order_id, enum event_run_step *step)
{
	struct order_cancel_result res;
	struct run_counts c = { 0 };
	char reason[EVENT_RUN_REASON_MAX + 40], detail[EVENT_RUN_REASON_MAX + 1] = "";
	enum sd_result r, rc;
	int won = 0;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = child_lock(db, run->id, order_id, step, NULL)) != SD_OK || *step != RUN_STEP_QUEUED)
		goto out;
	snprintf(reason, sizeof reason, "event cancelled%s%.200s", run->reason[0] ? ": " : "",
		 run->reason);
	reason[ORDER_REASON_MAX] = '\0';
	/* a savepoint: a refused cancellation takes back its own writes only */
	if ((r = db_savepoint(db)) != SD_OK)
		goto out;
	rc = order_cancel_in(db, order_id, run->actor, reason, ORDER_CANCEL_FOR_EVENT, &res);
	if ((r = db_savepoint_end(db, rc)) != SD_OK && rc != SD_CONFLICT)
		goto out;
	if (rc == SD_CONFLICT) {	/* a ticket was admitted: the staff decide */
		text_copy(detail, sizeof detail, err_msg());
		*step = RUN_STEP_FAILED;
		c.done = c.failed = 1;
	} else {
		*step = cancel_outcome(&res, &c);
	}
	if ((r = child_move(db, run->id, order_id, RUN_STEP_QUEUED, *step,
			    detail[0] ? detail : NULL, &won)) == SD_OK && won)
		r = run_count(db, run->id, &c);
out:
	return db_end(db, r);
}

enum sd_result event_child_refunded(struct db *db, int64_t run_id, int64_t order_id,
				    const struct refund_view *rf, const char *status,
				    const char *provider_refund_id, const char *failure,
				    int refused, const char *detail)
{
	struct run_counts c = { 0 };
	enum event_run_step step;
	enum refund_now now = REFUND_NOW_DONE;
	enum sd_result r;
	int won = 0;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = child_lock(db, run_id, order_id, &step, NULL)) != SD_OK || step != RUN_STEP_CANCELLED)
		goto out;
	if (!refused && (r = refund_record(db, rf, status, provider_refund_id, failure, 1, &now)) !=
	    SD_OK)
		goto out;
	refused = refused || now == REFUND_NOW_FAILED;
	if ((r = child_move(db, run_id, order_id, RUN_STEP_CANCELLED, RUN_STEP_REFUNDED,
			    refused ? detail : NULL, &won)) != SD_OK || !won)
		goto out;
	c.refunded = !refused;
	c.failed = refused != 0;
	r = run_count(db, run_id, &c);
out:
	return db_end(db, r);
}

enum sd_result event_child_finish(struct db *db, int64_t run_id, int64_t order_id,
				  enum event_run_step from, int skip,
				  const struct event_child_jobs *jobs, int *won)
{
	struct run_counts c = { 0 };
	enum event_run_step step;
	enum sd_result r;
	int i;

	*won = 0;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = child_lock(db, run_id, order_id, &step, NULL)) != SD_OK || step != from)
		goto out;
	if ((r = child_move(db, run_id, order_id, from, skip ? RUN_STEP_SKIPPED : RUN_STEP_DONE,
			    NULL, won)) != SD_OK || !*won)
		goto out;
	for (i = 0; !skip && jobs && i < jobs->n && r == SD_OK; i++) {
		int there = 0;

		if ((r = outbox_queued(db, jobs->job_id[i], &there)) == SD_OK && !there)
			r = outbox_add(db, jobs->kind[i], jobs->job_id[i], jobs->payload[i], 0, 0,
				       NULL);
	}
	if (r == SD_OK && !skip && jobs && jobs->remind_starts_at)
		r = order_reminder_add(db, order_id, jobs->public_id, jobs->remind_starts_at);
	c.done = 1;
	if (r == SD_OK)
		r = run_count(db, run_id, &c);
out:
	return db_end(db, r);
}

static const char SQL_EMAILED[] =
	"UPDATE event_run_orders SET emailed = 1 WHERE run_id = ?1 AND order_id = ?2 "
	"AND emailed = 0";

enum sd_result event_child_emailed(struct db *db, int64_t run_id, int64_t order_id)
{
	struct run_counts c = { 0 };
	struct db_stmt *st;
	enum sd_result r;
	int won = 0;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_EMAILED))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, run_id);
	db_bind_int(st, 2, order_id);
	if ((r = db_run(st)) == SD_OK && db_changes(db) > 0) {
		won = 1;
		c.emailed = 1;
		r = run_count(db, run_id, &c);
	}
	(void)won;
out:
	return db_end(db, r);
}

/* ======================== invariant checks =============================== */

static const char SQL_CHECK_COUNTS[] =
	"SELECT r.id, r.event_id, r.orders, r.done, r.emailed, coalesce(r.finished_at, 0), "
	"coalesce(r.enqueued_at, 0), "
	"(SELECT count(*) FROM event_run_orders x WHERE x.run_id = r.id), "
	"(SELECT count(*) FROM event_run_orders x WHERE x.run_id = r.id "
	"AND x.step IN ('done', 'skipped', 'failed')), "
	"(SELECT count(*) FROM event_run_orders x WHERE x.run_id = r.id AND x.emailed = 1), "
	"CASE WHEN r.kind = 'cancel' AND r.finished_at IS NOT NULL THEN "
	"(SELECT count(*) FROM orders o WHERE o.event_id = r.event_id AND o.cancelled_at IS NULL "
	"AND NOT EXISTS (SELECT 1 FROM event_run_orders x WHERE x.run_id = r.id "
	"AND x.order_id = o.id AND x.step = 'failed')) ELSE 0 END "
	"FROM event_runs r ORDER BY r.id";

static int run_problem(struct db_stmt *st, char *problem, size_t size)
{
	long long id = db_col_int(st, 0), ev = db_col_int(st, 1), orders = db_col_int(st, 2);
	long long done = db_col_int(st, 3), emailed = db_col_int(st, 4);
	long long rows = db_col_int(st, 7), rows_done = db_col_int(st, 8);
	long long rows_emailed = db_col_int(st, 9), live = db_col_int(st, 10);
	int64_t finished = db_col_int(st, 5), enqueued = db_col_int(st, 6);

	if (orders != rows)
		snprintf(problem, size, "run %lld of event %lld counts %lld children, its rows %lld",
			 id, ev, orders, rows);
	else if (done != rows_done)
		snprintf(problem, size, "run %lld of event %lld counts %lld done, its rows %lld", id,
			 ev, done, rows_done);
	else if (emailed != rows_emailed)
		snprintf(problem, size, "run %lld of event %lld counts %lld emailed, its rows %lld",
			 id, ev, emailed, rows_emailed);
	else if (finished && (!enqueued || done != orders))
		snprintf(problem, size, "run %lld of event %lld is finished with %lld of %lld "
			 "children done", id, ev, done, orders);
	else if (live)
		snprintf(problem, size, "event %lld's cancellation (run %lld) is finished, and it "
			 "has %lld live order%s", ev, id, live, live == 1 ? "" : "s");
	else
		return 0;
	return 1;
}

enum sd_result event_run_check(struct db *db, char *problem, size_t size)
{
	struct db_stmt *st = db_stmt(db, SQL_CHECK_COUNTS);
	enum sd_result r;

	problem[0] = '\0';
	if (!st)
		return SD_DB;
	while (db_next(st, &r))
		if (run_problem(st, problem, size))
			break;
	db_reset(st);
	return r;
}
