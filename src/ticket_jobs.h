/*
 * ticket_jobs.h: the handlers that follow an order, each the intent it
 * reaches and the technique that makes its second run harmless (idem.h;
 * dist/doc/design.md §1.3):
 *
 *   render_tickets        "order N's tickets are rendered and queued to send":
 *                         check state first (tickets.pdf_key), then a
 *                         conditional update that one run wins; only the
 *                         winner queues send_tickets
 *   send_tickets          "order N's ticket email (or its nth resend) is sent":
 *                         a unique row per email (email_sends) claimed with a
 *                         stale-claim takeover, and the provider key of the
 *                         intent ("tickets-<id>", "tickets-<id>-r<n>")
 *   update_sales_counter  "order N is counted": the job's identity in
 *                         processed_jobs, in the counter's transaction
 *   cancel_order          "order N's cancellation is counted and announced":
 *                         processed_jobs with the counter moved back, then
 *                         its own email row and key ("cancel-<id>"); with
 *                         {"mail": 0} (its event's cancellation) the counter
 *                         only: the event's child sends the one email
 *
 * A cancelled order needs no tickets: render and send reach their state by
 * doing nothing.  Handlers get a struct tickets_env as handler_ctx.app.
 */
#ifndef SD_TICKET_JOBS_H
#define SD_TICKET_JOBS_H

#include "handler.h"

/* A send whose order's PDF is still to be rendered waits this long between
 * looks, without spending an attempt (ticket_job_send). */
#define TICKETS_PDF_WAIT_MS 2000

/* The four handlers, by kind (jobkinds.h); the worker adds its built-ins. */
extern const struct handler ticket_handlers[];

enum job_outcome ticket_job_render(struct handler_ctx *ctx, const struct job *job,
				   struct job_result *res);
enum job_outcome ticket_job_send(struct handler_ctx *ctx, const struct job *job,
				 struct job_result *res);
enum job_outcome ticket_job_count(struct handler_ctx *ctx, const struct job *job,
				  struct job_result *res);
enum job_outcome ticket_job_cancel(struct handler_ctx *ctx, const struct job *job,
				   struct job_result *res);

struct order_view;
struct tickets_intent;

/*
 * ticket_send_intent: techniques 2 and 3 for one email of order v: the run
 * that claims the intent's email_sends row sends it with the intent's key
 * (tickets.h) and marks it; a run that finds it done is done ([out]
 * *sent 1 in both cases), one that finds a fresh claim looks again once it
 * would be stale.  For any handler that owes a buyer an email.
 */
enum job_outcome ticket_send_intent(struct handler_ctx *ctx, const struct job *job,
				    struct job_result *res, const struct order_view *v,
				    const struct tickets_intent *in, int *sent);

#endif
