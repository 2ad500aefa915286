/*
 * ticket_jobs.c: the handlers that follow an order (ticket_jobs.h).
 *
 * Invariants:
 *  - handlers never hold a transaction across rendering, file or mail I/O;
 *  - render_tickets queues send_tickets only from the run whose conditional
 *    update set pdf_key; send_tickets sends only from the run that owns the
 *    intent's email_sends claim, with the intent's key; update_sales_counter
 *    and cancel_order move the counter only with a first-time
 *    processed_jobs row;
 *  - a write that the box's own disk refuses (the PDF, the maildir, the
 *    database: SD_IO) is waited out with job_retry_io, never a failed
 *    attempt; a mail provider's failure over the network stays one.
 */
#define _GNU_SOURCE
#include "ticket_jobs.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "event_jobs.h"
#include "failpoint.h"
#include "idem.h"
#include "jobkinds.h"
#include "log.h"
#include "mail.h"
#include "outbox.h"
#include "shop_jobs.h"
#include "tickets.h"

/* ======================== the handlers =================================== */

static enum job_outcome job_order(const struct job *job, struct job_result *res, int64_t *id)
{
	if (job_arg_int(job, "order_id", id) != SD_OK || *id < 1)
		return job_failf(res, 1, "payload needs {\"order_id\": N}: %s", err_msg());
	return JOB_DONE;
}

/* A failure of the box's own disk (full, or an I/O error), whichever file
 * it hit: the job waits it out, no attempt counted; anything else is a
 * failed attempt, permanent when permanent. */
static enum job_outcome disk_or_fail(struct job_result *res, const struct job *job,
				     enum sd_result r, int permanent, const char *what)
{
	if (r == SD_IO)
		return job_retry_io(res, job, "%s: %s", what, err_msg());
	return job_failf(res, permanent, "%s: %s", what, err_msg());
}

static enum job_outcome db_failure(struct job_result *res, const struct job *job,
				   enum sd_result r, const char *what)
{
	/* a database error may pass (busy, disk full): retry with backoff */
	return disk_or_fail(res, job, r, 0, what);
}

/* One info line per duplicate run a handler absorbed, for the crash harness
 * to count: the technique that absorbed it, the job and the order, by ids
 * only (never a name or an address). */
static void dup_absorbed(struct handler_ctx *ctx, enum metrics_technique t,
			 const struct job *job, const char *order)
{
	char q[QUEUE_JOB_ID_MAX * 2 + 8];

	handler_absorbed(ctx, t);
	log_event(LOG_INFO, "duplicate absorbed", "technique=%s job_id=%s order=%s",
		  metrics_technique_names[t], log_quote(q, sizeof q, job->job_id), order);
}

static const char SQL_SET_PDF[] =
	"UPDATE tickets SET pdf_key = ?1 WHERE order_id = ?2 AND pdf_key IS NULL RETURNING id";

/* Technique 1: "make sure the order's tickets are rendered and queued to send". */
enum job_outcome ticket_job_render(struct handler_ctx *ctx, const struct job *job,
				   struct job_result *res)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	struct order_view v;
	struct db_stmt *st;
	enum sd_result r;
	char key[BLOB_KEY_MAX + 1], payload[64], job_id[QUEUE_JOB_ID_MAX + 1];
	int64_t order_id;
	int won = 0;

	if (job_order(job, res, &order_id) != JOB_DONE)
		return JOB_FAIL_PERMANENT;
	if (!db)
		return db_failure(res, job, SD_DB, "open");
	if ((r = tickets_load_order(db, order_id, &v)) != SD_OK)
		return job_failf(res, r == SD_NOT_FOUND, "load order: %s", err_msg());
	if (v.cancelled_at)
		return JOB_DONE;	/* a cancelled order needs no tickets */
	if (v.pdf_stored) {
		dup_absorbed(ctx, METRICS_CHECK_STATE, job, v.public_id);
		return JOB_DONE;	/* the state is reached: nothing to do */
	}
	failpoint(FP_RENDER_CHECKED);
	/* render and store with no transaction open; the key is fixed, so a
	 * second run overwrites the file with the same bytes */
	if ((r = tickets_render_store(env, &v)) != SD_OK)
		return disk_or_fail(res, job, r, r == SD_INVALID, "render");
	failpoint(FP_RENDER_STORED);
	tickets_pdf_key(&v, key, sizeof key);
	if ((r = db_begin(db)) != SD_OK)
		return db_failure(res, job, r, "begin");
	if (!(st = db_stmt(db, SQL_SET_PDF))) {
		r = SD_DB;
		goto fail;
	}
	db_bind_text(st, 1, key);
	db_bind_int(st, 2, order_id);
	if ((r = idem_conditional(db, st, &won)) != SD_OK)
		goto fail;
	if (won) {	/* this run reached the state: it alone queues the email */
		snprintf(payload, sizeof payload, "{\"order_id\":%lld}", (long long)order_id);
		tickets_job_id(v.public_id, "send", job_id, sizeof job_id);
		if ((r = outbox_add(db, JOB_KIND_SEND, job_id, payload, 0, 0, NULL)) != SD_OK)
			goto fail;
	}
	if ((r = db_commit(db)) != SD_OK)
		return db_failure(res, job, r, "commit");
	if (!won)	/* another run set pdf_key first: its send is queued */
		dup_absorbed(ctx, METRICS_CHECK_STATE, job, v.public_id);
	return JOB_DONE;
fail:
	db_rollback(db);
	return db_failure(res, job, r, "mark rendered");
}

/* A provider's 409 without Retry-After: ask again after this long. */
#define TICKETS_IN_FLIGHT_RETRY_MS 3000


/*
 * Techniques 2 and 3: the intent's email is sent.  The run that claims the
 * intent's email_sends row sends it with the intent's key and marks it; a
 * run that finds it done is done, one that finds a fresh claim looks again
 * once that claim would be stale.
 */
enum job_outcome ticket_send_intent(struct handler_ctx *ctx, const struct job *job,
				    struct job_result *res, const struct order_view *v,
				    const struct tickets_intent *in, int *sent)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	struct mail_result mr;
	enum idem_claim claim;
	enum sd_result r;
	char kind[TICKETS_KIND_MAX], want[TICKETS_KEY_MAX + 1], key[256];
	int64_t claimed_at = 0;
	struct order_view to = *v;	/* the order, to the intent's address */
	int64_t stale_ms = env->claim_stale_ms > 0 ? env->claim_stale_ms : IDEM_STALE_MS;

	*sent = 0;
	/* a walk-up buyer's order (sold at the window without an address) owes
	 * no email: its tickets were printed there; an address given later is
	 * reached by a resend */
	if (!v->buyer_email[0]) {
		char q[QUEUE_JOB_ID_MAX * 2 + 8];

		log_event(LOG_INFO, "no email owed", "job_id=%s order=%s: it has no address",
			  log_quote(q, sizeof q, job->job_id), v->public_id);
		return JOB_DONE;
	}
	tickets_intent_kind(in, kind, sizeof kind);
	if ((r = idem_effect_claim(db, v->id, kind, stale_ms, &claim, &claimed_at)) != SD_OK)
		return db_failure(res, job, r, "claim");
	if (claim == IDEM_DONE) {
		dup_absorbed(ctx, METRICS_UNIQUE_CLAIM, job, v->public_id);
		*sent = 1;
		return JOB_DONE;
	}
	if (claim == IDEM_HELD) {
		dup_absorbed(ctx, METRICS_UNIQUE_CLAIM, job, v->public_id);
		/* another run sends right now; just past its claim's stale limit
		 * it is sent, or the claim is ours to take */
		res->delay_ms = idem_held_delay_ms(claimed_at, stale_ms);
		return JOB_RETRY_LATER;
	}
	/* the address this email goes to, and its key, are the ones its first
	 * attempt used: a retry after an address change resends that request,
	 * which the provider's key turns into the first one's answer */
	tickets_intent_key(in, v, want, sizeof want);
	if ((r = idem_effect_fix(db, v->id, kind, v->buyer_email, want, to.buyer_email, key,
				 sizeof key)) != SD_OK)
		return db_failure(res, job, r, "address and key");
	failpoint(FP_SEND_CLAIMED);
	memset(&mr, 0, sizeof mr);
	if ((r = tickets_send_mail(env, &to, in, key, &mr)) != SD_OK) {
		/* the send may or may not have left; the retry follows the
		 * backoff, not the 2-minute claim, and carries the same key */
		enum sd_result rr = idem_effect_release(db, v->id, kind, claimed_at);
		(void)rr;
		if (mr.retry_later) {
			/* the provider holds our key in flight (an earlier attempt
			 * that timed out, or a run that took over a stale claim):
			 * it ends as one message either way; ask again soon.  The
			 * claim is given back too, or the next run would wait for
			 * it to go stale: the key, not the claim, guards the
			 * provider. */
			res->delay_ms = mr.retry_after_ms > 0 ? mr.retry_after_ms
							      : TICKETS_IN_FLIGHT_RETRY_MS;
			return JOB_RETRY_LATER;
		}
		/* the maildir is this box's own disk: a full or failing one is
		 * waited out; a provider's failure is a failed attempt */
		if (mail_is_local(env->mail))
			return disk_or_fail(res, job, r, r == SD_INVALID, "send");
		/* never back sooner than the provider asked (429, 503) */
		res->delay_ms = mr.retry_after_ms;
		return job_failf(res, r == SD_INVALID, "send: %s", err_msg());
	}
	failpoint(FP_SEND_SENT);
	if (mr.duplicate)	/* an earlier run's send: the provider's key held */
		dup_absorbed(ctx, METRICS_PROVIDER_KEY, job, v->public_id);
	/* send, then mark: a crash between them makes a second send, which
	 * the provider's key turns into the first one's answer */
	if ((r = idem_effect_done(db, v->id, kind, claimed_at, mr.message_id)) != SD_OK)
		return db_failure(res, job, r, "mark sent");
	*sent = 1;
	return JOB_DONE;
}

static enum job_outcome send_intent(struct handler_ctx *ctx, const struct job *job,
				    struct job_result *res, const struct order_view *v,
				    const struct tickets_intent *in)
{
	int sent = 0;

	return ticket_send_intent(ctx, job, res, v, in, &sent);
}

/*
 * pdf_wait: the order's PDF is not stored yet.  While its render job is
 * still to run (in the stream, or in the outbox for the relay), the send
 * waits for it without spending an attempt: a render held back by a pause
 * or a concurrency limit, or behind a backlog, must not send a resend to
 * the dead letters.  With no render coming (dead, or gone), it is a failed
 * attempt as before.
 */
static enum job_outcome pdf_wait(struct db *db, struct job_result *res, const struct job *job,
				 const struct order_view *v)
{
	char render[QUEUE_JOB_ID_MAX + 1];
	enum sd_result r;
	int waiting = 0;

	tickets_job_id(v->public_id, "render", render, sizeof render);
	if ((r = queue_job_waiting(db, render, &waiting)) == SD_OK && !waiting)
		r = outbox_waiting(db, render, &waiting);
	if (r != SD_OK)
		return db_failure(res, job, r, "find the render job");
	if (!waiting)
		return job_failf(res, 0, "order %s has no stored PDF yet", v->public_id);
	res->delay_ms = TICKETS_PDF_WAIT_MS;
	snprintf(res->error, sizeof res->error, "order %s: its PDF is still to be rendered",
		 v->public_id);
	return JOB_RETRY_LATER;
}

/* "order N's ticket email (its nth resend: {"resend": n}) has been sent" */
enum job_outcome ticket_job_send(struct handler_ctx *ctx, const struct job *job,
				 struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct tickets_intent in = { TICKETS_MAIL_TICKETS, 0 };
	struct order_view v;
	enum sd_result r;
	int64_t order_id;

	if (job_order(job, res, &order_id) != JOB_DONE)
		return JOB_FAIL_PERMANENT;
	if ((r = job_arg_int(job, "resend", &in.resend)) != SD_OK && r != SD_NOT_FOUND)
		return job_failf(res, 1, "payload: %s", err_msg());
	if (in.resend < 0)
		return job_failf(res, 1, "payload: resend must be 1 or more");
	if (!db)
		return db_failure(res, job, SD_DB, "open");
	if ((r = tickets_load_order(db, order_id, &v)) != SD_OK)
		return job_failf(res, r == SD_NOT_FOUND, "load order: %s", err_msg());
	if (v.cancelled_at)
		return JOB_DONE;	/* a cancelled order's tickets are not sent */
	if (!v.pdf_stored)
		return pdf_wait(db, res, job, &v);
	return send_intent(ctx, job, res, &v, &in);
}

static const char SQL_COUNT[] =
	"INSERT INTO sales_counters (event_id, orders, seats_sold) VALUES (?1, ?2, ?3) "
	"ON CONFLICT (event_id) DO UPDATE SET orders = sales_counters.orders + excluded.orders, "
	"seats_sold = sales_counters.seats_sold + excluded.seats_sold";

/*
 * Technique 4: the counter has no state to read; the job id is the key.
 * Moves the event's counter by orders and seats (an order: +1 and its
 * seats; a cancellation: -1 and the seats it gave back), once.  [out]
 * *first: 0 when an earlier run did it.
 */
static enum sd_result count_once(struct db *db, const struct job *job, int64_t event_id,
				 int64_t orders, int64_t seats, int *first)
{
	struct db_stmt *st;
	enum sd_result r;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	/* the job's identity and its effect commit together or not at all */
	if ((r = idem_once(db, job->job_id, job->kind, first)) != SD_OK || !*first)
		goto out;
	if (!(st = db_stmt(db, SQL_COUNT))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, orders);
	db_bind_int(st, 3, seats);
	r = db_run(st);
out:
	return db_end(db, r);
}

/* the payload's order_id as text for the log, "-" when it has none */
static void order_of(const struct job *job, char *buf, size_t size)
{
	int64_t order_id = 0;

	if (job_arg_int(job, "order_id", &order_id) == SD_OK)
		snprintf(buf, size, "%lld", (long long)order_id);
	else
		snprintf(buf, size, "-");
}

/* "order N is counted": {"event_id": E, "seats": S} */
enum job_outcome ticket_job_count(struct handler_ctx *ctx, const struct job *job,
				  struct job_result *res)
{
	struct db *db = handler_db(ctx);
	enum sd_result r;
	int64_t event_id = 0, seats = 0;
	int first = 0;
	char order[24];

	if (job_arg_int(job, "event_id", &event_id) != SD_OK ||
	    job_arg_int(job, "seats", &seats) != SD_OK || event_id < 1 || seats < 1)
		return job_failf(res, 1, "payload needs {\"event_id\": N, \"seats\": N}");
	if (!db)
		return db_failure(res, job, SD_DB, "open");
	failpoint(FP_COUNT_BEFORE);
	if ((r = count_once(db, job, event_id, 1, seats, &first)) != SD_OK)
		return db_failure(res, job, r, "count");
	if (!first) {
		order_of(job, order, sizeof order);
		dup_absorbed(ctx, METRICS_PROCESSED_JOBS, job, order);
	}
	return JOB_DONE;
}

/*
 * "order N's cancellation is counted and announced":
 * {"order_id": N, "event_id": E, "seats": S}.  The counter goes back by the
 * order and the seats it gave back (technique 4, as the count), then the
 * cancellation email goes out (techniques 2 and 3, as the tickets' email):
 * each once, whichever run of the job gets there.
 */
enum job_outcome ticket_job_cancel(struct handler_ctx *ctx, const struct job *job,
				   struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct tickets_intent in = { TICKETS_MAIL_CANCEL, 0 };
	struct order_view v;
	enum sd_result r;
	int64_t order_id, event_id = 0, seats = 0, mail = 1;
	int first = 0;

	if (job_order(job, res, &order_id) != JOB_DONE)
		return JOB_FAIL_PERMANENT;
	if (job_arg_int(job, "event_id", &event_id) != SD_OK ||
	    job_arg_int(job, "seats", &seats) != SD_OK || event_id < 1 || seats < 1)
		return job_failf(res, 1, "payload needs {\"order_id\": N, \"event_id\": N, "
				 "\"seats\": N}");
	if (!db)
		return db_failure(res, job, SD_DB, "open");
	if ((r = tickets_load_order(db, order_id, &v)) != SD_OK)
		return job_failf(res, r == SD_NOT_FOUND, "load order: %s", err_msg());
	if (!v.cancelled_at)
		return job_failf(res, 1, "order %s is not cancelled", v.public_id);
	if ((r = count_once(db, job, event_id, -1, -seats, &first)) != SD_OK)
		return db_failure(res, job, r, "count back");
	if (!first)
		dup_absorbed(ctx, METRICS_PROCESSED_JOBS, job, v.public_id);
	/* an event's cancellation: its child sends the buyer's one email */
	if (job_arg_int(job, "mail", &mail) == SD_OK && mail == 0)
		return JOB_DONE;
	return send_intent(ctx, job, res, &v, &in);
}

const struct handler ticket_handlers[] = {
	{ JOB_KIND_RENDER, ticket_job_render },
	{ JOB_KIND_SEND, ticket_job_send },
	{ JOB_KIND_COUNT, ticket_job_count },
	{ JOB_KIND_CANCEL, ticket_job_cancel },
	{ JOB_KIND_RECONCILE, shop_job_reconcile },
	{ JOB_KIND_REFUND, shop_job_refund },
	{ JOB_KIND_REFUND_MAIL, shop_job_refund_notice },
	{ JOB_KIND_PAYFAIL_MAIL, shop_job_payment_failed },
	{ JOB_KIND_EVENT_RUN, event_job_run },
	{ JOB_KIND_EVENT_CANCEL_ORDER, event_job_cancel_order },
	{ JOB_KIND_EVENT_MOVE_ORDER, event_job_move_order },
	{ JOB_KIND_EVENT_NOTICE, event_job_notice },
	{ JOB_KIND_REMINDER, event_job_reminder },
	{ NULL, NULL },
};
