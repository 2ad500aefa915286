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
#include "stripe.h"
#include "tickets.h"
#include "timefmt.h"

#define IN_FLIGHT_RETRY_MS 3000

static enum job_outcome db_fail(struct job_result *res, const struct job *job, enum sd_result r,
				const char *what)
{
	if (r == SD_IO)
		return job_retry_io(res, job, "%s: %s", what, err_msg());
	return job_failf(res, 0, "%s: %s", what, err_msg());
}

static void absorbed(struct handler_ctx *ctx, enum metrics_technique t, const struct job *job,
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
static int claim(struct handler_ctx *ctx, const struct job *job, struct job_result *res,
		 const char *subject, const char *kind, int64_t stale_ms, int64_t *claimed_at,
		 enum job_outcome *out)
{
	struct db *db = handler_db(ctx);
	enum idem_claim c;
	enum sd_result r;

	if ((r = idem_named_claim(db, subject, kind, stale_ms, &c, claimed_at)) != SD_OK) {
		*out = db_fail(res, job, r, "claim");
		return 0;
	}
	if (c == IDEM_CLAIMED)
		return 1;
	absorbed(ctx, METRICS_UNIQUE_CLAIM, job, subject);
	*out = JOB_DONE;
	if (c == IDEM_HELD) {
		res->delay_ms = idem_held_delay_ms(*claimed_at, stale_ms);
		*out = JOB_RETRY_LATER;
	}
	return 0;
}

/* ======================== reconcile_hold ================================= */

/* what the provider says of a session, applied (payments.h) */
static enum job_outcome reconcile_apply(struct handler_ctx *ctx, const struct job *job,
					struct job_result *res, const struct hold_view *h,
					const struct stripe_session *s)
{
	struct db *db = handler_db(ctx);
	struct pay_paid p = { s->id, s->payment_ref, s->amount_total, s->currency, NULL };
	enum pay_outcome out;
	enum sd_result r;

	if (stripe_session_paid(s))
		r = pay_apply(db, &p, &out, NULL);
	else
		r = pay_expire(db, s->id, NULL, &out);
	if (r != SD_OK)
		return db_fail(res, job, r, "apply");
	if (out == PAY_ALREADY)	/* a webhook did it first */
		absorbed(ctx, METRICS_CHECK_STATE, job, h->public_id);
	log_event(LOG_INFO, "hold reconciled", "hold=%s session=%s outcome=%s", h->public_id,
		  s->status, pay_outcome_name(out));
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
	enum pay_outcome out;
	enum sd_result r;
	int64_t id, now = clock_now_ms();
	int won = 0;

	if (job_arg_int(job, "hold_id", &id) != SD_OK || id < 1)
		return job_failf(res, 1, "payload needs {\"hold_id\": N}");
	if (!db)
		return db_fail(res, job, SD_DB, "open");
	if ((r = hold_get_id(db, id, &h)) != SD_OK)
		return r == SD_NOT_FOUND ? JOB_DONE : db_fail(res, job, r, "load hold");
	if (h.state != HOLD_OPEN) {
		absorbed(ctx, METRICS_CHECK_STATE, job, h.public_id);
		return JOB_DONE;	/* a webhook settled it */
	}
	if (h.expires_at > now) {	/* renewed: look again when it ends */
		res->delay_ms = h.expires_at - now + HOLD_RECONCILE_DELAY_MS;
		return JOB_RETRY_LATER;
	}
	if (!h.session_id[0]) {		/* no session was ever made: nothing to pay */
		if ((r = db_begin(db)) != SD_OK ||
		    (r = db_end(db, hold_settle(db, h.id, HOLD_EXPIRED, NULL, NULL, &won))) != SD_OK)
			return db_fail(res, job, r, "end hold");
		return JOB_DONE;
	}
	if (!env->stripe)
		return job_failf(res, 0, "hold %s has a session, and payment_provider is none: "
				 "set it back to look the payment up", h.public_id);
	if ((r = stripe_session_get(env->stripe, h.session_id, &s)) != SD_OK)
		return provider_fail(res, r, "look the session up");
	if (strcmp(s.status, "open") == 0) {
		/* no longer payable from here on; paid meanwhile: read it again */
		r = stripe_session_expire(env->stripe, h.session_id);
		if (r == SD_CONFLICT) {
			res->delay_ms = IN_FLIGHT_RETRY_MS;
			return JOB_RETRY_LATER;
		}
		if (r != SD_OK)
			return provider_fail(res, r, "expire the session");
		if ((r = pay_expire(db, h.session_id, NULL, &out)) != SD_OK)
			return db_fail(res, job, r, "end hold");
		return JOB_DONE;
	}
	return reconcile_apply(ctx, job, res, &h, &s);
}

/* ======================== refund_payment ================================= */

static enum sd_result refund_load(struct db *db, const struct job *job, struct refund_view *rf)
{
	int64_t id;

	if (job_arg_int(job, "refund_id", &id) != SD_OK || id < 1)
		return err_set(SD_INVALID, "payload needs {\"refund_id\": N}");
	return refund_get(db, id, rf);
}

/* refunded: one transaction marks it (technique 1) and, from the run that
 * marks it, queues the buyer's email for a late payment */
static enum sd_result refund_record(struct db *db, const struct refund_view *rf,
				    const char *refund_id)
{
	char job_id[REFUND_REF_MAX + 32], payload[64];
	enum sd_result r;
	int won = 0;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = refund_mark_done(db, rf->id, refund_id, &won)) == SD_OK && won &&
	    rf->reason == REFUND_LATE) {
		snprintf(job_id, sizeof job_id, "outbox:%s:refund-notice", rf->payment_ref);
		snprintf(payload, sizeof payload, "{\"refund_id\":%lld}", (long long)rf->id);
		r = outbox_add(db, JOB_KIND_REFUND_MAIL, job_id, payload, 0, 0, NULL);
	}
	return db_end(db, r);
}

int shop_refund_pay(struct handler_ctx *ctx, const struct job *job, struct job_result *res,
		    const struct refund_view *rf, char *refund_id, size_t size,
		    int64_t *claimed_at, int *refused, enum job_outcome *out)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	enum sd_result r;
	char subject[REFUND_REF_MAX + 16];

	*refused = 0;
	refund_id[0] = '\0';
	if (!env->stripe) {
		*out = job_failf(res, 0, "refund of %s waits for payment_provider", rf->payment_ref);
		return 0;
	}
	snprintf(subject, sizeof subject, "refund:%s", rf->payment_ref);
	/* the provider's call times out inside the claim's stale limit and
	 * the lease (config_provider_stale_ms) */
	if (!claim(ctx, job, res, subject, "refund", env->provider_stale_ms > 0 ?
		   env->provider_stale_ms : IDEM_STALE_MS, claimed_at, out))
		return 0;
	failpoint(FP_REFUND_CLAIMED);
	r = stripe_refund(env->stripe, rf->payment_ref, rf->key, rf->amount_minor, refund_id, size);
	if (r != SD_OK && r != SD_CONFLICT) {	/* SD_CONFLICT: refunded already */
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
				  int64_t claimed_at, const char *refund_id)
{
	char subject[REFUND_REF_MAX + 16];

	snprintf(subject, sizeof subject, "refund:%s", rf->payment_ref);
	log_event(LOG_INFO, "payment refunded", "payment=%s refund=%s", rf->payment_ref,
		  refund_id[0] ? refund_id : "(earlier)");
	return idem_named_done(db, subject, "refund", claimed_at, refund_id);
}

/* "payment P is refunded, once" */
enum job_outcome shop_job_refund(struct handler_ctx *ctx, const struct job *job,
				 struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct refund_view rf;
	enum job_outcome out;
	enum sd_result r;
	char refund_id[STRIPE_ID_MAX];
	int64_t claimed_at = 0;
	int refused = 0;

	if (!db)
		return db_fail(res, job, SD_DB, "open");
	if ((r = refund_load(db, job, &rf)) != SD_OK)
		return r == SD_INVALID || r == SD_NOT_FOUND ? job_failf(res, 1, "%s", err_msg())
							     : db_fail(res, job, r, "load refund");
	if (rf.done_at || rf.window) {
		if (rf.done_at)
			absorbed(ctx, METRICS_CHECK_STATE, job, rf.payment_ref);
		return JOB_DONE;
	}
	if (!shop_refund_pay(ctx, job, res, &rf, refund_id, sizeof refund_id, &claimed_at,
			     &refused, &out))
		return out;
	if ((r = refund_record(db, &rf, refund_id)) != SD_OK)
		return db_fail(res, job, r, "mark refunded");
	if ((r = shop_refund_settle(db, &rf, claimed_at, refund_id)) != SD_OK)
		return db_fail(res, job, r, "mark claim done");
	return JOB_DONE;
}

/* ======================== send_refund_notice ============================= */

static enum sd_result notice_text(const struct refund_view *rf, const struct hold_view *h,
				  const struct event_view *e, char **subject, char **text)
{
	char amount[MONEY_TEXT_MAX], when[TIMEFMT_TEXT_MAX];

	money_plain(rf->amount_minor, rf->currency, amount, sizeof amount);
	timefmt_format(e->starts_at, when, sizeof when);
	*subject = *text = NULL;
	if (asprintf(subject, "Your payment for %s is refunded", e->name) < 0)
		*subject = NULL;
	else if (asprintf(text, "Hello %s,\n\nyour payment of %s %s for %lld seat%s at %s, %s "
			  "on %s, reached us only after the time we held your seats for had run "
			  "out, and by then the event had no seats left.  No tickets were made, and "
			  "your payment is refunded in full: it shows on your statement within a "
			  "few days.\n\nWe are sorry.  Reference %s\n",
			  h->name, amount, rf->currency, (long long)h->seats, h->seats == 1 ? "" : "s",
			  e->name, e->venue, when, rf->payment_ref) < 0)
		*text = NULL;
	if (!*subject || !*text) {
		free(*subject);
		return err_set(SD_NOMEM, "out of memory");
	}
	return SD_OK;
}

/* the email, sent under its key; [out] mr */
static enum sd_result notice_send(struct tickets_env *env, struct db *db,
				  const struct refund_view *rf, const char *to, const char *key,
				  struct mail_result *mr)
{
	struct hold_view h;
	struct event_view e;
	struct mail_message m = { 0 };
	char *subject = NULL, *text = NULL;
	enum sd_result r;

	if ((r = hold_get_id(db, rf->hold_id, &h)) != SD_OK ||
	    (r = event_get(db, h.event_id, &e)) != SD_OK ||
	    (r = notice_text(rf, &h, &e, &subject, &text)) != SD_OK)
		return r;
	m.from = env->mail_from;
	m.from_name = "Box office";
	m.to = to;
	m.to_name = h.name;
	m.subject = subject;
	m.text = text;
	m.idempotency_key = key;
	r = mail_send(env->mail, &m, mr);
	free(subject);
	free(text);
	return r;
}

/* "the buyer of payment P is told it is refunded" */
enum job_outcome shop_job_refund_notice(struct handler_ctx *ctx, const struct job *job,
					struct job_result *res)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	struct refund_view rf;
	struct hold_view h;
	struct mail_result mr;
	enum job_outcome out;
	enum sd_result r;
	char subject[REFUND_REF_MAX + 16], want[REFUND_REF_MAX + 16], key[256], to[256];
	int64_t claimed_at = 0;

	if (!db)
		return db_fail(res, job, SD_DB, "open");
	if ((r = refund_load(db, job, &rf)) != SD_OK || (r = hold_get_id(db, rf.hold_id, &h)))
		return r == SD_INVALID || r == SD_NOT_FOUND ? job_failf(res, 1, "%s", err_msg())
							     : db_fail(res, job, r, "load refund");
	snprintf(subject, sizeof subject, "refund:%s", rf.payment_ref);
	if (!claim(ctx, job, res, subject, "mail",
		   env->claim_stale_ms > 0 ? env->claim_stale_ms : IDEM_STALE_MS, &claimed_at, &out))
		return out;
	idem_provider_key(want, sizeof want, "refunded", rf.payment_ref);
	if ((r = idem_named_fix(db, subject, "mail", h.email, want, to, key, sizeof key)) != SD_OK)
		return db_fail(res, job, r, "address and key");
	memset(&mr, 0, sizeof mr);
	if ((r = notice_send(env, db, &rf, to, key, &mr)) != SD_OK) {
		enum sd_result rr = idem_named_release(db, subject, "mail", claimed_at);

		(void)rr;
		if (mr.retry_later) {
			res->delay_ms = mr.retry_after_ms > 0 ? mr.retry_after_ms : IN_FLIGHT_RETRY_MS;
			return JOB_RETRY_LATER;
		}
		if (r == SD_IO && mail_is_local(env->mail))
			return job_retry_io(res, job, "send: %s", err_msg());
		res->delay_ms = mr.retry_after_ms;
		return job_failf(res, r == SD_INVALID, "send: %s", err_msg());
	}
	if (mr.duplicate)
		absorbed(ctx, METRICS_PROVIDER_KEY, job, rf.payment_ref);
	if ((r = idem_named_done(db, subject, "mail", claimed_at, mr.message_id)) != SD_OK)
		return db_fail(res, job, r, "mark sent");
	return JOB_DONE;
}
