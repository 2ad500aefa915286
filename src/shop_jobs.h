/*
 * shop_jobs.h: the handlers that follow the shop's holds and payments, each
 * the intent it reaches and the technique that makes its second run
 * harmless (idem.h; dist/doc/design.md §1.3):
 *
 *   reconcile_hold      "hold H's payment is known: it became its order or
 *                       its refund, or its session ended unpaid": check state
 *                       first (holds.state); then the provider is asked (the
 *                       source of truth) and what it says is applied by the
 *                       conditional ending of payments.h, which a webhook may
 *                       have won already.  An open session is expired at the
 *                       provider (key "expire-<session>") so that it can no
 *                       longer be paid; a provider out of reach is asked
 *                       again with the queue's backoff, for days.
 *   refund_payment      "payment P is refunded, once": check state first
 *                       (refunds.done_at, failed_at), a unique claim on the
 *                       effect row ("refund:<P>", "refund") with a stale-
 *                       claim takeover, and the provider key refunds.h names;
 *                       a refund the provider keeps pending is asked again
 *                       (GET, no claim needed) until it succeeds or fails;
 *                       the run that marks it done queues the buyer's email
 *                       (a payment that made no order).
 *   send_refund_notice  "the buyer of payment P is told it is refunded": a
 *                       unique claim ("refund:<P>", "mail") and the mail key
 *                       "refunded-<P>".
 *   send_payment_failed "the buyer of hold H is told its delayed payment
 *                       failed": a unique claim ("hold:<H>", "mail") and the
 *                       mail key "payment-failed-<H>".
 *
 * They get a struct tickets_env as handler_ctx.app; its stripe is NULL when
 * payment_provider is none (a job of these kinds then waits with backoff).
 */
#ifndef SD_SHOP_JOBS_H
#define SD_SHOP_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "handler.h"
#include "metrics.h"
#include "refunds.h"
#include "stripe.h"

enum job_outcome shop_job_reconcile(struct handler_ctx *ctx, const struct job *job,
				    struct job_result *res);
enum job_outcome shop_job_refund(struct handler_ctx *ctx, const struct job *job,
				 struct job_result *res);
/* shop_mail.c: the buyer's emails about a payment */
enum job_outcome shop_job_refund_notice(struct handler_ctx *ctx, const struct job *job,
					struct job_result *res);
enum job_outcome shop_job_payment_failed(struct handler_ctx *ctx, const struct job *job,
					 struct job_result *res);

/*
 * shop_refund_pay: techniques 2 and 3 for the refund rf, for any handler
 * that owes one: the run that owns its claim (subject "refund:<payment>")
 * asks the provider under rf->key.  1: the provider has the refund ([out]
 * *got: its id and status, "pending" until the money has gone back; an id
 * of "" and "succeeded" when it was refunded earlier another way;
 * *claimed_at names the claim): record it in the database (refund_record),
 * then shop_refund_settle.  0: the job returns *out (another run holds the
 * claim, or the provider failed: *refused 1 when it refused for good, a
 * 4xx).
 */
int shop_refund_pay(struct handler_ctx *ctx, const struct job *job, struct job_result *res,
		    const struct refund_view *rf, struct stripe_refund_view *got,
		    int64_t *claimed_at, int *refused, enum job_outcome *out);

/* shop_refund_settle: the claim of a refund recorded, done. */
enum sd_result shop_refund_settle(struct db *db, const struct refund_view *rf,
				  int64_t claimed_at, const struct stripe_refund_view *got);

/* ---- shared by the shop's handlers (shop_jobs.c, shop_mail.c) ---------- */

/* shop_job_db_fail: a database failure as the job's outcome (SD_IO: a
 * failed attempt with backoff; else permanent). */
enum job_outcome shop_job_db_fail(struct job_result *res, const struct job *job,
				  enum sd_result r, const char *what);

/* shop_job_absorbed: a duplicate the technique t absorbed, counted and
 * logged. */
void shop_job_absorbed(struct handler_ctx *ctx, enum metrics_technique t, const struct job *job,
		       const char *subject);

/* shop_job_claim: technique 2's claim on the effect (subject, kind).  1:
 * this run holds it; 0: it does not, and *out says what the job does (done,
 * or look again when the holder's claim goes stale). */
int shop_job_claim(struct handler_ctx *ctx, const struct job *job, struct job_result *res,
		   const char *subject, const char *kind, int64_t stale_ms, int64_t *claimed_at,
		   enum job_outcome *out);

/* shop_job_refund_load: the refund a job's payload names. */
enum sd_result shop_job_refund_load(struct db *db, const struct job *job, struct refund_view *rf);

#endif
