/*
 * shop_mail.c: the shop's emails about a payment that made no order
 * (shop_jobs.h): "your payment is refunded" (a payment that came too late
 * for its seats, or was not what its hold asked) and "your delayed payment
 * failed".  Each is sent once: technique 2's claim on its effect row, the
 * address and key fixed by the first attempt, technique 3's key at the mail
 * provider.
 */
#define _GNU_SOURCE
#include "shop_jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "events.h"
#include "holds.h"
#include "idem.h"
#include "log.h"
#include "mail.h"
#include "money.h"
#include "tickets.h"
#include "timefmt.h"

#define IN_FLIGHT_RETRY_MS 3000

/* One email about a hold: its effect row, key and words. */
struct hold_mail {
	char subject_key[REFUND_REF_MAX + 16];	/* effects.subject: "refund:<P>", "hold:<H>" */
	char key[REFUND_REF_MAX + 32];		/* the provider key it wants */
	const char *of;				/* what the log names */
	char *subject, *text;			/* the words (owned) */
};

static void hold_mail_free(struct hold_mail *m)
{
	free(m->subject);
	free(m->text);
	m->subject = m->text = NULL;
}

/* the event's name, venue and start as the emails read them */
static void event_words(const struct event_view *e, char *when, size_t size)
{
	timefmt_format(e->starts_at, when, size);
}

/* a refund's words: why it was made, what comes back */
static enum sd_result notice_words(const struct refund_view *rf, const struct hold_view *h,
				   const struct event_view *e, struct hold_mail *m)
{
	char amount[MONEY_TEXT_MAX], when[TIMEFMT_TEXT_MAX];
	const char *why = rf->reason == REFUND_MISMATCH
		? "was not the price of the seats you chose, so no tickets could be made for it"
		: "reached us only after the time we held your seats for had run out, and by then "
		  "the event had no seats left.  No tickets were made";

	money_plain(rf->amount_minor, rf->currency, amount, sizeof amount);
	event_words(e, when, sizeof when);
	if (asprintf(&m->subject, "Your payment for %s is refunded", e->name) < 0)
		m->subject = NULL;
	else if (asprintf(&m->text, "Hello %s,\n\nyour payment of %s %s for %lld seat%s at %s, %s "
			  "on %s, %s, and your payment is refunded in full: it shows on your "
			  "statement within a few days.\n\nWe are sorry.  Reference %s\n",
			  h->name, amount, rf->currency, (long long)h->seats, h->seats == 1 ? "" : "s",
			  e->name, e->venue, when, why, rf->payment_ref) < 0)
		m->text = NULL;
	return m->subject && m->text ? SD_OK : err_set(SD_NOMEM, "out of memory");
}

/* a failed delayed payment's words: the seats are free again */
static enum sd_result failed_words(const struct tickets_env *env, const struct hold_view *h,
				   const struct event_view *e, struct hold_mail *m)
{
	char when[TIMEFMT_TEXT_MAX], again[1200] = "";

	event_words(e, when, sizeof when);
	if (env->shop_url[0])
		snprintf(again, sizeof again, "  To buy them again: %s/e/%lld\n", env->shop_url,
			 (long long)e->id);
	if (asprintf(&m->subject, "Your payment for %s did not go through", e->name) < 0)
		m->subject = NULL;
	else if (asprintf(&m->text, "Hello %s,\n\nthe payment you started for %lld seat%s at %s, "
			  "%s on %s did not go through: your bank or the payment service refused "
			  "it.  No money was taken and no tickets were made, and the seats we kept "
			  "for you are on sale again.\n%s\nReference %s\n",
			  h->name, (long long)h->seats, h->seats == 1 ? "" : "s", e->name, e->venue,
			  when, again, h->public_id) < 0)
		m->text = NULL;
	return m->subject && m->text ? SD_OK : err_set(SD_NOMEM, "out of memory");
}

/* a failed send's outcome, the claim given back first */
static enum job_outcome send_failed(struct tickets_env *env, struct db *db,
				    const struct job *job, struct job_result *res,
				    const struct hold_mail *m, int64_t claimed_at,
				    const struct mail_result *mr, enum sd_result r)
{
	enum sd_result rr = idem_named_release(db, m->subject_key, "mail", claimed_at);

	(void)rr;
	if (mr->retry_later) {
		res->delay_ms = mr->retry_after_ms > 0 ? mr->retry_after_ms : IN_FLIGHT_RETRY_MS;
		return JOB_RETRY_LATER;
	}
	if (r == SD_IO && mail_is_local(env->mail))
		return job_retry_io(res, job, "send: %s", err_msg());
	res->delay_ms = mr->retry_after_ms;
	return job_failf(res, r == SD_INVALID, "send: %s", err_msg());
}

/* m sent to h's buyer once: claim, address and key fixed, send, done */
static enum job_outcome hold_mail_send(struct handler_ctx *ctx, const struct job *job,
				       struct job_result *res, const struct hold_view *h,
				       const struct hold_mail *m)
{
	struct tickets_env *env = ctx->app;
	struct db *db = handler_db(ctx);
	struct mail_message msg = { 0 };
	struct mail_result mr;
	enum job_outcome out;
	enum sd_result r;
	char key[256], to[256];
	int64_t claimed_at = 0;

	if (!shop_job_claim(ctx, job, res, m->subject_key, "mail",
			    env->claim_stale_ms > 0 ? env->claim_stale_ms : IDEM_STALE_MS,
			    &claimed_at, &out))
		return out;
	if ((r = idem_named_fix(db, m->subject_key, "mail", h->email, m->key, to, key,
				sizeof key)) != SD_OK)
		return shop_job_db_fail(res, job, r, "address and key");
	msg.from = env->mail_from;
	msg.from_name = "Box office";
	msg.to = to;
	msg.to_name = h->name;
	msg.subject = m->subject;
	msg.text = m->text;
	msg.idempotency_key = key;
	memset(&mr, 0, sizeof mr);
	if ((r = mail_send(env->mail, &msg, &mr)) != SD_OK)
		return send_failed(env, db, job, res, m, claimed_at, &mr, r);
	if (mr.duplicate)
		shop_job_absorbed(ctx, METRICS_PROVIDER_KEY, job, m->of);
	if ((r = idem_named_done(db, m->subject_key, "mail", claimed_at, mr.message_id)) != SD_OK)
		return shop_job_db_fail(res, job, r, "mark sent");
	return JOB_DONE;
}

/* "the buyer of payment P is told it is refunded" */
enum job_outcome shop_job_refund_notice(struct handler_ctx *ctx, const struct job *job,
					struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct hold_mail m = { .subject = NULL };
	struct refund_view rf;
	struct hold_view h;
	struct event_view e;
	enum job_outcome out;
	enum sd_result r;

	if (!db)
		return shop_job_db_fail(res, job, SD_DB, "open");
	if ((r = shop_job_refund_load(db, job, &rf)) != SD_OK ||
	    (r = hold_get_id(db, rf.hold_id, &h)) != SD_OK)
		return r == SD_INVALID || r == SD_NOT_FOUND ? job_failf(res, 1, "%s", err_msg())
							     : shop_job_db_fail(res, job, r, "load refund");
	if ((r = event_get(db, h.event_id, &e)) != SD_OK || (r = notice_words(&rf, &h, &e, &m)))
		return shop_job_db_fail(res, job, r, "words");
	snprintf(m.subject_key, sizeof m.subject_key, "refund:%s", rf.payment_ref);
	idem_provider_key(m.key, sizeof m.key, "refunded", rf.payment_ref);
	m.of = rf.payment_ref;
	out = hold_mail_send(ctx, job, res, &h, &m);
	hold_mail_free(&m);
	return out;
}

/* "the buyer of hold H is told its delayed payment failed" */
enum job_outcome shop_job_payment_failed(struct handler_ctx *ctx, const struct job *job,
					 struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct hold_mail m = { .subject = NULL };
	struct hold_view h;
	struct event_view e;
	enum job_outcome out;
	enum sd_result r;
	int64_t id;

	if (job_arg_int(job, "hold_id", &id) != SD_OK || id < 1)
		return job_failf(res, 1, "payload needs {\"hold_id\": N}");
	if (!db)
		return shop_job_db_fail(res, job, SD_DB, "open");
	if ((r = hold_get_id(db, id, &h)) != SD_OK)
		return r == SD_NOT_FOUND ? job_failf(res, 1, "%s", err_msg())
					 : shop_job_db_fail(res, job, r, "load hold");
	if ((r = event_get(db, h.event_id, &e)) != SD_OK ||
	    (r = failed_words(ctx->app, &h, &e, &m)) != SD_OK)
		return shop_job_db_fail(res, job, r, "words");
	snprintf(m.subject_key, sizeof m.subject_key, "hold:%s", h.public_id);
	idem_provider_key(m.key, sizeof m.key, "payment-failed", h.public_id);
	m.of = h.public_id;
	out = hold_mail_send(ctx, job, res, &h, &m);
	hold_mail_free(&m);
	return out;
}
