/*
 * shop_jobs.c: the handlers that follow the shop's holds and payments
 * (shop_jobs.h).
 *
 * Invariants:
 *  - no transaction is held across a call to the provider or the mail;
 *  - a provider's answer that something is paid is applied only through
 *    payments.h, whose conditional ending one run wins;
 *  - a refund reaches the provider only from the run that owns its claim,
 *    always under the key refund-<payment>;
 *  - the provider out of reach is a failed attempt with the queue's backoff
 *    (these kinds have many attempts, config_apply_leases): never a lost
 *    payment, never a second charge.
 */
#define _GNU_SOURCE
#include "shop_jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "events.h"
#include "failpoint.h"
#include "holds.h"
#include "idem.h"
#include "jobkinds.h"
#include "log.h"
#include "mail.h"
#include "money.h"
#include "outbox.h"
#include "payments.h"
#include "refunds.h"
#include "shop_pay.h"
#include "stripe.h"
#include "tickets.h"
#include "timefmt.h"

#define IN_FLIGHT_RETRY_MS 3000

enum job_outcome shop_job_db_fail(struct job_result *res, const struct job *job,
				  enum sd_result r, const char *what)
{
	if (r == SD_IO)
		return job_retry_io(res, job, "%s: %s", what, err_msg());
	return job_failf(res, 0, "%s: %s", what, err_msg());
}

void shop_job_absorbed(struct handler_ctx *ctx, enum metrics_technique t, const struct job *job,
		       const char *subject)
{
	char q[QUEUE_JOB_ID_MAX * 2 + 8];

	handler_absorbed(ctx, t);
	log_event(LOG_INFO, "duplicate absorbed", "technique=%s job_id=%s subject=%s",
		  metrics_technique_names[t], log_quote(q, sizeof q, job->job_id), subject);
}

/* a provider's failure: SD_IO is a failed attempt (backoff), a refusal for
 * good is permanent */
static enum job_outcome provider_fail(struct job_result *res, enum sd_result r, const char *what)
{
	return job_failf(res, r == SD_INVALID || r == SD_NOT_FOUND, "%s: %s", what, err_msg());
}

/* technique 2: the claim on the effect (subject, kind).  1: this run holds
 * it; 0: it does not, and *out says what the job does (done, or look again
 * when the holder's claim goes stale). */
int shop_job_claim(struct handler_ctx *ctx, const struct job *job, struct job_result *res,
		   const char *subject, const char *kind, int64_t stale_ms, int64_t *claimed_at,
		   enum job_outcome *out)
{
	struct db *db = handler_db(ctx);
	enum idem_claim c;
	enum sd_result r;

	if ((r = idem_named_claim(db, subject, kind, stale_ms, &c, claimed_at)) != SD_OK) {
		*out = shop_job_db_fail(res, job, r, "claim");
		return 0;
	}
	if (c == IDEM_CLAIMED)
		return 1;
	shop_job_absorbed(ctx, METRICS_UNIQUE_CLAIM, job, subject);
	*out = JOB_DONE;
	if (c == IDEM_HELD) {
		res->delay_ms = idem_held_delay_ms(*claimed_at, stale_ms);
		*out = JOB_RETRY_LATER;
	}
	return 0;
}

/* ======================== reconcile_hold ================================= */

#define PENDING_POLL_MS (6 * 3600000LL)	/* a delayed payment is asked after this */

static int64_t pending_max(const struct tickets_env *env)
{
	return env->pending_max_ms > 0 ? env->pending_max_ms : HOLD_PENDING_MAX_MS_DEFAULT;
}

/* what the provider says of a session, applied (shop_pay.h) */
static enum job_outcome reconcile_apply(struct handler_ctx *ctx, const struct job *job,
					struct job_result *res, const struct hold_view *h,
					const struct stripe_session *s)
{
	struct tickets_env *env = ctx->app;
	enum pay_outcome out;
	enum sd_result r;

	if ((r = shop_pay_session(handler_db(ctx), s, NULL, NULL, pending_max(env), &out)) !=
	    SD_OK)
		return shop_job_db_fail(res, job, r, "apply");
	if (out == PAY_ALREADY)	/* a webhook did it first */
		shop_job_absorbed(ctx, METRICS_CHECK_STATE, job, h->public_id);
	log_event(LOG_INFO, "hold reconciled", "hold=%s session=%s outcome=%s", h->public_id,
		  s->status, pay_outcome_name(out));
	if (out == PAY_PENDING) {	/* look again while its money is on its way */
		res->delay_ms = PENDING_POLL_MS;
		return JOB_RETRY_LATER;
	}
	return JOB_DONE;
}

/* a pending hold: its payment intent tells whether the money came, failed,
 * or is still on its way (then asked again, until the wait is over) */
static enum job_outcome reconcile_pending(struct handler_ctx *ctx, const struct job *job,
					  struct job_result *res, const struct hold_view *h,
					  const struct stripe_session *s)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	struct stripe_payment pi;
	enum pay_outcome out;
	enum sd_result r;
	int64_t now = clock_now_ms();

	if (stripe_session_pay(s) != STRIPE_PAY_PENDING || !s->payment_ref[0])
		return reconcile_apply(ctx, job, res, h, s);
	if ((r = stripe_payment_get(env->stripe, s->payment_ref, &pi)) != SD_OK)
		return provider_fail(res, r, "look the payment up");
	if (strcmp(pi.status, "requires_payment_method") == 0 || strcmp(pi.status, "canceled") == 0)
		r = pay_fail(db, s->id, NULL, &out);
	else if (h->expires_at <= now)	/* the wait is over: the seats go back on sale */
		r = pay_expire(db, s->id, NULL, &out);
	else {
		res->delay_ms = h->expires_at - now < PENDING_POLL_MS ? h->expires_at - now +
			HOLD_RECONCILE_DELAY_MS : PENDING_POLL_MS;
		return JOB_RETRY_LATER;
	}
	if (r != SD_OK)
		return shop_job_db_fail(res, job, r, "apply");
	log_event(LOG_INFO, "hold reconciled", "hold=%s payment=%s outcome=%s", h->public_id,
		  pi.status, pay_outcome_name(out));
	return JOB_DONE;
}

/* an open hold at its end: its session expired at the provider so that it
 * can no longer be paid (paid meanwhile: read again), then applied */
static enum job_outcome reconcile_open(struct handler_ctx *ctx, const struct job *job,
				       struct job_result *res, const struct hold_view *h,
				       const struct stripe_session *s)
{
	struct tickets_env *env = ctx->app;
	enum pay_outcome out;
	enum sd_result r;

	r = stripe_session_expire(env->stripe, h->session_id);
	if (r == SD_CONFLICT) {
		res->delay_ms = IN_FLIGHT_RETRY_MS;
		return JOB_RETRY_LATER;
	}
	if (r != SD_OK)
		return provider_fail(res, r, "expire the session");
	if ((r = pay_expire(handler_db(ctx), s->id, NULL, &out)) != SD_OK)
		return shop_job_db_fail(res, job, r, "end hold");
	return JOB_DONE;
}

/* "hold H's payment is known" */
enum job_outcome shop_job_reconcile(struct handler_ctx *ctx, const struct job *job,
				    struct job_result *res)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	struct stripe_session s;
	struct hold_view h;
	enum sd_result r;
	int64_t id, now = clock_now_ms();
	int won = 0;

	if (job_arg_int(job, "hold_id", &id) != SD_OK || id < 1)
		return job_failf(res, 1, "payload needs {\"hold_id\": N}");
	if (!db)
		return shop_job_db_fail(res, job, SD_DB, "open");
	if ((r = hold_get_id(db, id, &h)) != SD_OK)
		return r == SD_NOT_FOUND ? JOB_DONE : shop_job_db_fail(res, job, r, "load hold");
	if (h.state != HOLD_OPEN && h.state != HOLD_PENDING) {
		shop_job_absorbed(ctx, METRICS_CHECK_STATE, job, h.public_id);
		return JOB_DONE;	/* a webhook settled it */
	}
	if (h.state == HOLD_OPEN && h.expires_at > now) {	/* renewed: look again at its end */
		res->delay_ms = h.expires_at - now + HOLD_RECONCILE_DELAY_MS;
		return JOB_RETRY_LATER;
	}
	if (!h.session_id[0]) {		/* no session was ever made: nothing to pay */
		if ((r = db_begin(db)) != SD_OK ||
		    (r = db_end(db, hold_settle(db, h.id, HOLD_EXPIRED, NULL, NULL, &won))) != SD_OK)
			return shop_job_db_fail(res, job, r, "end hold");
		return JOB_DONE;
	}
	if (!env->stripe)
		return job_failf(res, 0, "hold %s has a session, and payment_provider is none: "
				 "set it back to look the payment up", h.public_id);
	if ((r = stripe_session_get(env->stripe, h.session_id, &s)) != SD_OK)
		return provider_fail(res, r, "look the session up");
	if (stripe_session_pay(&s) == STRIPE_PAY_OPEN)
		return reconcile_open(ctx, job, res, &h, &s);
	if (h.state == HOLD_PENDING)
		return reconcile_pending(ctx, job, res, &h, &s);
	return reconcile_apply(ctx, job, res, &h, &s);
}

/* ======================== refund_payment ================================= */

enum sd_result shop_job_refund_load(struct db *db, const struct job *job, struct refund_view *rf)
{
	int64_t id;

	if (job_arg_int(job, "refund_id", &id) != SD_OK || id < 1)
		return err_set(SD_INVALID, "payload needs {\"refund_id\": N}");
	return refund_get(db, id, rf);
}

int shop_refund_pay(struct handler_ctx *ctx, const struct job *job, struct job_result *res,
		    const struct refund_view *rf, struct stripe_refund_view *got,
		    int64_t *claimed_at, int *refused, enum job_outcome *out)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	enum sd_result r;
	char subject[REFUND_REF_MAX + 16];

	*refused = 0;
	memset(got, 0, sizeof *got);
	if (!env->stripe) {
		*out = job_failf(res, 0, "refund of %s waits for payment_provider", rf->payment_ref);
		return 0;
	}
	snprintf(subject, sizeof subject, "refund:%s", rf->payment_ref);
	/* the provider's call times out inside the claim's stale limit and
	 * the lease (config_provider_stale_ms) */
	if (!shop_job_claim(ctx, job, res, subject, "refund", env->provider_stale_ms > 0 ?
		   env->provider_stale_ms : IDEM_STALE_MS, claimed_at, out))
		return 0;
	failpoint(FP_REFUND_CLAIMED);
	/* a payment that was not its hold's amount goes back whole, whatever
	 * the report of it said */
	r = stripe_refund(env->stripe, rf->payment_ref, rf->key,
			  rf->reason == REFUND_MISMATCH ? -1 : rf->amount_minor, rf->currency, got);
	if (r == SD_CONFLICT) {		/* refunded already, another way */
		memset(got, 0, sizeof *got);
		snprintf(got->status, sizeof got->status, "succeeded");
	} else if (r != SD_OK) {
		enum sd_result rr = idem_named_release(db, subject, "refund", *claimed_at);

		(void)rr;
		*refused = r == SD_INVALID || r == SD_NOT_FOUND;
		*out = provider_fail(res, r, "refund");
		return 0;
	}
	failpoint(FP_REFUND_CALLED);
	return 1;
}

enum sd_result shop_refund_settle(struct db *db, const struct refund_view *rf,
				  int64_t claimed_at, const struct stripe_refund_view *got)
{
	char subject[REFUND_REF_MAX + 16];

	snprintf(subject, sizeof subject, "refund:%s", rf->payment_ref);
	log_event(LOG_INFO, "payment refunded", "payment=%s refund=%s status=%s", rf->payment_ref,
		  got->id[0] ? got->id : "(earlier)", got->status);
	return idem_named_done(db, subject, "refund", claimed_at, got->id);
}

/* what the provider says of the refund, recorded in one transaction */
static enum sd_result refund_note(struct db *db, const struct refund_view *rf,
				  const struct stripe_refund_view *got, enum refund_now *now)
{
	enum sd_result r;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	r = refund_record(db, rf, got->status, got->id, got->failure, 0, now);
	return db_end(db, r);
}

/* the refund's outcome as a job's: done, or asked again while pending */
static enum job_outcome refund_outcome(struct job_result *res, const struct refund_view *rf,
				       const struct stripe_refund_view *got, enum refund_now now)
{
	if (now == REFUND_NOW_PENDING) {
		res->delay_ms = REFUND_POLL_MS;
		return JOB_RETRY_LATER;
	}
	if (now == REFUND_NOW_FAILED)
		log_event(LOG_WARN, "refund failed at the provider: owed at the window",
			  "payment=%s refund=%s failure=%s", rf->payment_ref, got->id,
			  got->failure[0] ? got->failure : "none given");
	return JOB_DONE;
}

/* a refund made at the provider and pending there: how it stands now */
static enum job_outcome refund_follow(struct handler_ctx *ctx, const struct job *job,
				      struct job_result *res, const struct refund_view *rf)
{
	struct tickets_env *env = ctx->app;
	struct stripe_refund_view got;
	enum refund_now now;
	enum sd_result r;

	if (!env->stripe)
		return job_failf(res, 0, "refund of %s waits for payment_provider", rf->payment_ref);
	if ((r = stripe_refund_get(env->stripe, rf->provider_refund_id, &got)) != SD_OK)
		return provider_fail(res, r, "look the refund up");
	if ((r = refund_note(handler_db(ctx), rf, &got, &now)) != SD_OK)
		return shop_job_db_fail(res, job, r, "record refund");
	return refund_outcome(res, rf, &got, now);
}

/* "payment P is refunded, once" */
enum job_outcome shop_job_refund(struct handler_ctx *ctx, const struct job *job,
				 struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct stripe_refund_view got;
	struct refund_view rf;
	enum job_outcome out;
	enum refund_now now;
	enum sd_result r;
	int64_t claimed_at = 0;
	int refused = 0;

	if (!db)
		return shop_job_db_fail(res, job, SD_DB, "open");
	if ((r = shop_job_refund_load(db, job, &rf)) != SD_OK)
		return r == SD_INVALID || r == SD_NOT_FOUND ? job_failf(res, 1, "%s", err_msg())
							     : shop_job_db_fail(res, job, r, "load refund");
	if (rf.done_at || rf.failed_at || rf.window) {
		if (rf.done_at)
			shop_job_absorbed(ctx, METRICS_CHECK_STATE, job, rf.payment_ref);
		return JOB_DONE;
	}
	if (rf.provider_refund_id[0])	/* made, and pending at the provider */
		return refund_follow(ctx, job, res, &rf);
	if (!shop_refund_pay(ctx, job, res, &rf, &got, &claimed_at, &refused, &out))
		return out;
	if ((r = refund_note(db, &rf, &got, &now)) != SD_OK)
		return shop_job_db_fail(res, job, r, "record refund");
	if ((r = shop_refund_settle(db, &rf, claimed_at, &got)) != SD_OK)
		return shop_job_db_fail(res, job, r, "mark claim done");
	return refund_outcome(res, &rf, &got, now);
}
