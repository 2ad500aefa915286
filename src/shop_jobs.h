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
 *                       (refunds.done_at), a unique claim on the effect row
 *                       ("refund:<P>", "refund") with a stale-claim takeover,
 *                       and the provider key "refund-<P>"; the run that marks
 *                       it done queues the buyer's email (a late payment's).
 *   send_refund_notice  "the buyer of payment P is told it is refunded": a
 *                       unique claim ("refund:<P>", "mail") and the mail key
 *                       "refunded-<P>".
 *
 * They get a struct tickets_env as handler_ctx.app; its stripe is NULL when
 * payment_provider is none (a job of these kinds then waits with backoff).
 */
#ifndef SD_SHOP_JOBS_H
#define SD_SHOP_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "handler.h"
#include "refunds.h"

enum job_outcome shop_job_reconcile(struct handler_ctx *ctx, const struct job *job,
				    struct job_result *res);
enum job_outcome shop_job_refund(struct handler_ctx *ctx, const struct job *job,
				 struct job_result *res);
enum job_outcome shop_job_refund_notice(struct handler_ctx *ctx, const struct job *job,
					struct job_result *res);

/*
 * shop_refund_pay: techniques 2 and 3 for the refund rf, for any handler
 * that owes one: the run that owns its claim (subject "refund:<payment>")
 * asks the provider under rf->key.  1: the provider has refunded it ([out]
 * refund_id, "" when it was refunded earlier another way; *claimed_at
 * names the claim): record it in the database, then shop_refund_settle.
 * 0: the job returns *out (another run holds the claim, or the provider
 * failed: *refused 1 when it refused for good, a 4xx).
 */
int shop_refund_pay(struct handler_ctx *ctx, const struct job *job, struct job_result *res,
		    const struct refund_view *rf, char *refund_id, size_t size,
		    int64_t *claimed_at, int *refused, enum job_outcome *out);

/* shop_refund_settle: the claim of a refund recorded as paid, done. */
enum sd_result shop_refund_settle(struct db *db, const struct refund_view *rf,
				  int64_t claimed_at, const char *refund_id);

#endif
