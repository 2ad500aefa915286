/*
 * event_jobs.h: the handlers of a whole event at once (event_runs.h), each
 * the intent it reaches and the technique that makes its second run
 * harmless (idem.h; dist/doc/design.md §1.3):
 *
 *   event_run           "every live order of the run's event has its child
 *                       queued": check state first (the run's cursor and
 *                       enqueued_at); each batch of children commits with
 *                       the cursor it reached, and a child's id names the
 *                       event and the order, so nothing is queued twice.
 *   cancel_event_order  "order O of the cancelled event is cancelled, paid
 *                       back and told": conditional steps on its row of
 *                       event_run_orders (one run wins each); the refund
 *                       through the provider by a unique claim
 *                       ("refund:<payment>") and the key "refund-<order>";
 *                       the email queued by the run that finishes the step.
 *   move_event_order    "order O of the moved event has its tickets for the
 *                       new start, and its email and reminder are queued":
 *                       check state first (the PDF key names the change),
 *                       then a conditional update of the tickets' key; the
 *                       last step as above.
 *   send_event_notice   "the buyer of O is told of the run": a unique
 *                       email_sends row ("cancel-event", "moved-<n>") and
 *                       the key "cancel-event-<event>-<order>" or
 *                       "moved-<event>-<n>-<order>"; the run's emailed
 *                       count moves once.
 *   send_reminder       "the buyer of O is reminded of the start S": check
 *                       state first (the order stands, its event is neither
 *                       cancelled nor moved from S, S is ahead, reminders
 *                       on), then a unique email_sends row ("reminder-<S>")
 *                       and the key "reminder-<order>-<S>".
 *
 * They get a struct tickets_env as handler_ctx.app.
 */
#ifndef SD_EVENT_JOBS_H
#define SD_EVENT_JOBS_H

#include "handler.h"

enum job_outcome event_job_run(struct handler_ctx *ctx, const struct job *job,
			       struct job_result *res);
enum job_outcome event_job_cancel_order(struct handler_ctx *ctx, const struct job *job,
					struct job_result *res);
enum job_outcome event_job_move_order(struct handler_ctx *ctx, const struct job *job,
				      struct job_result *res);
enum job_outcome event_job_notice(struct handler_ctx *ctx, const struct job *job,
				  struct job_result *res);
enum job_outcome event_job_reminder(struct handler_ctx *ctx, const struct job *job,
				    struct job_result *res);

#endif
