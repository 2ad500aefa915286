/*
 * event_jobs.c: the handlers of a whole event at once (event_jobs.h).
 *
 * Invariants:
 *  - no transaction is held across rendering, the provider or the mail;
 *  - a child's step moves only through event_runs.h, whose conditional
 *    updates one run wins, and the run's counts move with it;
 *  - a refund reaches the provider only from the run that owns its claim,
 *    under the refund's key (shop_jobs.h: shop_refund_pay).
 */
#define _GNU_SOURCE
#include "event_jobs.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "event_runs.h"
#include "failpoint.h"
#include "jobkinds.h"
#include "log.h"
#include "orders.h"
#include "refund_link.h"
#include "refunds.h"
#include "shop_jobs.h"
#include "stripe.h"
#include "ticket_jobs.h"
#include "tickets.h"
#include "timefmt.h"

/* batches one delivery of the parent queues before it lets other jobs run */
#define RUN_BATCHES_PER_DELIVERY 25

static enum job_outcome db_fail(struct job_result *res, const struct job *job, enum sd_result r,
				const char *what)
{
	if (r == SD_IO)
		return job_retry_io(res, job, "%s: %s", what, err_msg());
	return job_failf(res, 0, "%s: %s", what, err_msg());
}

static void absorbed(struct handler_ctx *ctx, const struct job *job, const char *subject)
{
	char q[QUEUE_JOB_ID_MAX * 2 + 8];

	handler_absorbed(ctx, METRICS_CHECK_STATE);
	log_event(LOG_INFO, "duplicate absorbed", "technique=%s job_id=%s subject=%s",
		  metrics_technique_names[METRICS_CHECK_STATE],
		  log_quote(q, sizeof q, job->job_id), subject);
}

/* the payload's run and (with order_id non-NULL) order, the run read */
static enum job_outcome load_run(struct handler_ctx *ctx, const struct job *job,
				 struct job_result *res, struct event_run_view *run,
				 int64_t *order_id)
{
	struct db *db = handler_db(ctx);
	enum sd_result r;
	int64_t run_id = 0;

	if (job_arg_int(job, "run_id", &run_id) != SD_OK || run_id < 1 ||
	    (order_id && (job_arg_int(job, "order_id", order_id) != SD_OK || *order_id < 1)))
		return job_failf(res, 1, "payload needs {\"run_id\": N%s}",
				 order_id ? ", \"order_id\": N" : "");
	if (!db)
		return db_fail(res, job, SD_DB, "open");
	if ((r = event_run_get(db, run_id, run)) != SD_OK)
		return r == SD_NOT_FOUND ? job_failf(res, 1, "%s", err_msg())
					 : db_fail(res, job, r, "load run");
	return JOB_DONE;
}

/* ======================== event_run ====================================== */

enum job_outcome event_job_run(struct handler_ctx *ctx, const struct job *job,
			       struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct event_run_view run;
	enum job_outcome out;
	enum sd_result r;
	int64_t queued = 0, total = 0;
	int enqueued = 0, i;

	if ((out = load_run(ctx, job, res, &run, NULL)) != JOB_DONE)
		return out;
	if (run.enqueued_at) {
		absorbed(ctx, job, "run");
		return JOB_DONE;
	}
	for (i = 0; i < RUN_BATCHES_PER_DELIVERY && !enqueued; i++) {
		if ((r = event_run_enqueue(db, run.id, EVENT_RUN_BATCH, &queued, &enqueued)) != SD_OK)
			return db_fail(res, job, r, "queue children");
		total += queued;
		failpoint(FP_RUN_BATCH);
	}
	log_event(LOG_INFO, "event run queued", "run=%lld event=%lld kind=%s children=%lld%s",
		  (long long)run.id, (long long)run.event_id, event_run_kind_name(run.kind),
		  (long long)total, enqueued ? "" : " more=1");
	if (enqueued)
		return JOB_DONE;
	res->delay_ms = 1;	/* more to queue: let other jobs run first */
	return JOB_RETRY_LATER;
}

/* ======================== the children's last step ======================= */

/* a URL the payload can carry as it is (no JSON escape needed) */
static int plain_url(const char *s)
{
	for (; *s; s++)
		if (*s < 0x21 || *s > 0x7e || *s == '"' || *s == '\\')
			return 0;
	return 1;
}

/*
 * The child's last step, with its email job and, for a move, the new
 * start's reminder, in one transaction.  A move's email carries the
 * refund link under this box's shop address, written into the email job's
 * payload here: whichever box sends it (or sends it again), the email is
 * the same bytes, as the mail provider's key requires.
 */
static enum sd_result finish(struct handler_ctx *ctx, const struct event_run_view *run,
			     const struct order_view *v, enum event_run_step from, int skip,
			     int *won)
{
	const struct tickets_env *env = ctx->app;
	struct event_child_jobs jobs = { 0 };
	char job_id[QUEUE_JOB_ID_MAX + 1], payload[80 + sizeof env->shop_url];
	int n;

	event_run_child_job_id(run, v->public_id, ":mail", job_id, sizeof job_id);
	n = snprintf(payload, sizeof payload, "{\"run_id\":%lld,\"order_id\":%lld",
		     (long long)run->id, (long long)v->id);
	if (run->kind == EVENT_RUN_MOVE && plain_url(env->shop_url))
		n += snprintf(payload + n, sizeof payload - (size_t)n, ",\"shop\":\"%s\"",
			      env->shop_url);
	snprintf(payload + n, sizeof payload - (size_t)n, "}");
	jobs.n = v->buyer_email[0] ? 1 : 0;	/* a walk-up buyer has no address */
	jobs.kind[0] = JOB_KIND_EVENT_NOTICE;
	jobs.job_id[0] = job_id;
	jobs.payload[0] = payload;
	jobs.public_id = v->public_id;
	/* a move: the reminder for the new start */
	if (run->kind == EVENT_RUN_MOVE && v->event_reminders)
		jobs.remind_starts_at = v->starts_at;
	return event_child_finish(handler_db(ctx), run->id, v->id, from, skip, &jobs, won);
}

/* ======================== cancel_event_order ============================= */

/* the cancelled order's refund through the provider, then its step */
static enum job_outcome child_refund(struct handler_ctx *ctx, const struct job *job,
				     struct job_result *res, const struct event_run_view *run,
				     int64_t order_id)
{
	struct db *db = handler_db(ctx);
	struct stripe_refund_view got;
	struct refund_view rf;
	enum job_outcome out;
	enum sd_result r;
	char detail[EVENT_RUN_REASON_MAX + 1];
	int64_t claimed_at = 0;
	int refused = 0;

	if ((r = refund_of_order(db, order_id, &rf)) != SD_OK)
		return db_fail(res, job, r, "load refund");
	if (rf.done_at || rf.failed_at || rf.provider_refund_id[0]) {
		/* asked by an earlier run that died before its step */
		if ((r = event_child_refunded(db, run->id, order_id, &rf, rf.status[0] ? rf.status
					      : "succeeded", rf.provider_refund_id, rf.failure, 0,
					      "refund failed at the provider")) != SD_OK)
			return db_fail(res, job, r, "record refund");
		return JOB_DONE;
	}
	if (!shop_refund_pay(ctx, job, res, &rf, &got, &claimed_at, &refused, &out)) {
		if (!refused)
			return out;
		/* refused for good: the staff make it by hand; the buyer is told */
		snprintf(detail, sizeof detail, "refund refused: %.180s", res->error);
		if ((r = event_child_refunded(db, run->id, order_id, &rf, NULL, NULL, NULL, 1,
					      detail)) != SD_OK)
			return db_fail(res, job, r, "record refusal");
		log_event(LOG_WARN, "refund refused", "order_id=%lld payment=%s: %s",
			  (long long)order_id, rf.payment_ref, res->error);
		res->error[0] = '\0';
		return JOB_DONE;
	}
	snprintf(detail, sizeof detail, "refund failed at the provider: %.150s",
		 got.failure[0] ? got.failure : "no reason given");
	if ((r = event_child_refunded(db, run->id, order_id, &rf, got.status, got.id, got.failure,
				      0, detail)) != SD_OK)
		return db_fail(res, job, r, "record refund");
	if ((r = shop_refund_settle(db, &rf, claimed_at, &got)) != SD_OK)
		return db_fail(res, job, r, "mark claim done");
	return JOB_DONE;
}

enum job_outcome event_job_cancel_order(struct handler_ctx *ctx, const struct job *job,
					struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct event_run_view run;
	struct order_view v;
	enum event_run_step step;
	enum job_outcome out;
	enum sd_result r;
	int64_t order_id = 0;
	int won = 0;

	if ((out = load_run(ctx, job, res, &run, &order_id)) != JOB_DONE)
		return out;
	if ((r = event_child_cancel(db, &run, order_id, &step)) != SD_OK)
		return r == SD_NOT_FOUND ? job_failf(res, 1, "%s", err_msg())
					 : db_fail(res, job, r, "cancel");
	failpoint(FP_RUN_CANCELLED);
	if (step == RUN_STEP_CANCELLED) {
		if ((out = child_refund(ctx, job, res, &run, order_id)) != JOB_DONE)
			return out;
		failpoint(FP_RUN_REFUNDED);
		step = RUN_STEP_REFUNDED;
	}
	if (step != RUN_STEP_REFUNDED) {	/* done, skipped or failed before */
		if (step == RUN_STEP_DONE)
			absorbed(ctx, job, "child");
		return JOB_DONE;
	}
	if ((r = tickets_load_order(db, order_id, &v)) != SD_OK)
		return db_fail(res, job, r, "load order");
	if ((r = finish(ctx, &run, &v, RUN_STEP_REFUNDED, 0, &won)) != SD_OK)
		return db_fail(res, job, r, "finish");
	if (!won)
		absorbed(ctx, job, v.public_id);
	return JOB_DONE;
}

/* ======================== move_event_order =============================== */

/* the order's tickets for the event as it is now, stored and named
 * (technique 1: the key names the change) */
static enum job_outcome rerender(struct handler_ctx *ctx, const struct job *job,
				 struct job_result *res, const struct order_view *v)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	char key[BLOB_KEY_MAX + 1];
	enum sd_result r;
	int won = 0;

	tickets_pdf_key(v, key, sizeof key);
	/* not rendered yet: render_tickets renders the event as it is */
	if (!v->pdf_key[0] || strcmp(v->pdf_key, key) == 0) {
		if (v->pdf_key[0])
			absorbed(ctx, job, v->public_id);
		return JOB_DONE;
	}
	if ((r = tickets_render_store(env, v)) != SD_OK)
		return r == SD_IO ? job_retry_io(res, job, "render: %s", err_msg())
				  : job_failf(res, r == SD_INVALID, "render: %s", err_msg());
	if ((r = tickets_pdf_replace(db, v->id, key, &won)) != SD_OK)
		return db_fail(res, job, r, "name the new PDF");
	if (!won)
		absorbed(ctx, job, v->public_id);
	failpoint(FP_RUN_RENDERED);
	return JOB_DONE;
}

enum job_outcome event_job_move_order(struct handler_ctx *ctx, const struct job *job,
				      struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct event_run_view run;
	struct order_view v;
	enum event_run_step step;
	enum job_outcome out;
	enum sd_result r;
	int64_t order_id = 0;
	int won = 0, skip;

	if ((out = load_run(ctx, job, res, &run, &order_id)) != JOB_DONE)
		return out;
	if ((r = event_child_step(db, run.id, order_id, &step, NULL)) != SD_OK)
		return r == SD_NOT_FOUND ? job_failf(res, 1, "%s", err_msg())
					 : db_fail(res, job, r, "load step");
	if (step != RUN_STEP_QUEUED) {
		absorbed(ctx, job, "child");
		return JOB_DONE;
	}
	if ((r = tickets_load_order(db, order_id, &v)) != SD_OK)
		return db_fail(res, job, r, "load order");
	/* a later move came first, or the order or its event is cancelled:
	 * the later change's own child, or the cancellation, tells the buyer */
	skip = v.change_no != run.change_no || v.cancelled_at || v.event_cancelled;
	if (!skip && (out = rerender(ctx, job, res, &v)) != JOB_DONE)
		return out;
	if ((r = finish(ctx, &run, &v, RUN_STEP_QUEUED, skip, &won)) != SD_OK)
		return db_fail(res, job, r, "finish");
	if (!won)
		absorbed(ctx, job, v.public_id);
	return JOB_DONE;
}

/* ======================== send_event_notice ============================== */

enum job_outcome event_job_notice(struct handler_ctx *ctx, const struct job *job,
				  struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct tickets_env *env = ctx->app;
	struct tickets_intent in = { 0 };
	struct event_run_view run;
	struct order_view v;
	enum job_outcome out;
	enum sd_result r;
	char was[TIMEFMT_TEXT_MAX + TEXT_FIELD_MAX + 4], link[1200];
	char shop[sizeof env->shop_url];
	int64_t order_id = 0;
	int sent = 0;

	if ((out = load_run(ctx, job, res, &run, &order_id)) != JOB_DONE)
		return out;
	if ((r = tickets_load_order(db, order_id, &v)) != SD_OK)
		return db_fail(res, job, r, "load order");
	if (run.kind == EVENT_RUN_CANCEL) {
		in.mail = TICKETS_MAIL_EVENT_CANCEL;
		in.reason = run.reason;
	} else {
		/* cancelled since (a buyer who could not come), or moved again:
		 * that change's email says what holds */
		if (v.cancelled_at || v.change_no != run.change_no)
			return JOB_DONE;
		timefmt_format(run.old_starts_at, was, sizeof was);
		snprintf(was + strlen(was), sizeof was - strlen(was), ", %s", run.old_venue);
		in.mail = TICKETS_MAIL_MOVED;
		in.change_no = run.change_no;
		in.was = was;
		/* the shop as the child that queued it saw it (finish) */
		if (job_arg_str(job, "shop", shop, sizeof shop) != SD_OK)
			snprintf(shop, sizeof shop, "%s", env->shop_url);
		refund_link_url(shop, env->key, v.public_id, run.change_no, link, sizeof link);
		in.refund_link = link;
	}
	out = ticket_send_intent(ctx, job, res, &v, &in, &sent);
	if (out == JOB_DONE && sent && (r = event_child_emailed(db, run.id, v.id)) != SD_OK)
		return db_fail(res, job, r, "count the email");
	return out;
}

/* ======================== send_reminder ================================== */

enum job_outcome event_job_reminder(struct handler_ctx *ctx, const struct job *job,
				    struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct tickets_intent in = { 0 };
	struct order_view v;
	enum sd_result r;
	int64_t order_id = 0, starts_at = 0;
	const char *why = NULL;
	char q[QUEUE_JOB_ID_MAX * 2 + 8];
	int sent = 0;

	if (job_arg_int(job, "order_id", &order_id) != SD_OK || order_id < 1 ||
	    job_arg_int(job, "starts_at", &starts_at) != SD_OK)
		return job_failf(res, 1, "payload needs {\"order_id\": N, \"starts_at\": MS}");
	if (!db)
		return db_fail(res, job, SD_DB, "open");
	if ((r = tickets_load_order(db, order_id, &v)) != SD_OK)
		return r == SD_NOT_FOUND ? job_failf(res, 1, "%s", err_msg())
					 : db_fail(res, job, r, "load order");
	if (v.cancelled_at)
		why = "the order is cancelled";
	else if (v.event_cancelled)
		why = "the event is cancelled";
	else if (v.starts_at != starts_at)
		why = "the event moved (its new start has its own reminder)";
	else if (starts_at <= clock_now_ms())
		why = "the event has started";
	else if (!v.event_reminders)
		why = "reminders are off for the event";
	if (why) {
		log_event(LOG_INFO, "no reminder owed", "job_id=%s order=%s: %s",
			  log_quote(q, sizeof q, job->job_id), v.public_id, why);
		return JOB_DONE;
	}
	in.mail = TICKETS_MAIL_REMINDER;
	in.starts_at = starts_at;
	return ticket_send_intent(ctx, job, res, &v, &in, &sent);
}
