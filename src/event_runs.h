/*
 * event_runs.h: a whole event at once: cancelled, or moved once it sold,
 * each buyer reached exactly once however often the box dies on the way
 * (the event_runs and event_run_orders tables, owned here; schema 0015).
 *
 * A change to the whole event is one transaction that changes the event
 * (cancelled: its sales stop and its doors refuse; moved: a new start or
 * venue and its change number), adds its run and queues the run's parent
 * job through the outbox.  The parent (event_jobs.h) walks the event's
 * live orders by id in batches: each batch queues one child job per order
 * (its id "outbox:event-<event>:<cancel|move-n>:<order>") and records the
 * cursor it reached and the count, in one transaction, so a crash resumes
 * from the cursor and queues nothing twice.  Each child moves its order's
 * row of event_run_orders from step to step with conditional updates (the
 * first technique: one run wins each step), and each step's transaction
 * moves the run's counts with it, so the progress shown is what the rows
 * say, never counted afterwards.
 *
 *   cancel:  queued -> cancelled (the order and its tickets cancelled, its
 *            refund owed) -> refunded (paid back through the provider, or
 *            owed at the window, or nothing was charged) -> done (the
 *            buyer's email queued); skipped: cancelled before the child
 *            came; failed: a ticket of it was admitted at the door.
 *   move:    queued -> done (its PDF for the new start stored, the
 *            buyer's email and new reminder queued); skipped: a later move
 *            of the event came first (its own email says it all).
 */
#ifndef SD_EVENT_RUNS_H
#define SD_EVENT_RUNS_H

#include <stdint.h>

#include "db.h"
#include "events.h"
#include "refunds.h"
#include "result.h"

enum event_run_kind { EVENT_RUN_CANCEL, EVENT_RUN_MOVE };

enum event_run_step { RUN_STEP_QUEUED, RUN_STEP_CANCELLED, RUN_STEP_REFUNDED, RUN_STEP_DONE,
		      RUN_STEP_SKIPPED, RUN_STEP_FAILED };

#define EVENT_RUN_ACTOR_MAX 220
#define EVENT_RUN_REASON_MAX 200
#define EVENT_RUN_BATCH 200		/* children a parent queues per transaction */

struct event_run_view {
	int64_t id, event_id, change_no, created_at;
	enum event_run_kind kind;
	int64_t cursor;			/* the last order id queued */
	int64_t enqueued_at;		/* the parent queued its last child; 0: not yet */
	int64_t finished_at;		/* every child is done; 0: not yet */
	int64_t orders;			/* children queued */
	int64_t done, refunded, at_window, emailed, failed;
	int64_t old_starts_at;		/* a move: the start before */
	char old_venue[TEXT_FIELD_MAX + 1];
	char actor[EVENT_RUN_ACTOR_MAX + 1];
	char reason[EVENT_RUN_REASON_MAX + 1];
};

/* event_run_kind_name: "cancel", "move"; event_run_step_name: "queued", ... */
const char *event_run_kind_name(enum event_run_kind k);
const char *event_run_step_name(enum event_run_step s);

/*
 * event_cancel: in one transaction the event is cancelled (its sales
 * closed, its doors refuse its tickets from now on), its run added and
 * the run's parent job queued.  reason: 1..EVENT_RUN_REASON_MAX bytes of
 * text.  Cancelling a cancelled event changes nothing ([out] *already 1).
 * [out] *run: the run (the first one's, when already).  SD_NOT_FOUND: no
 * such event.
 */
enum sd_result event_cancel(struct db *db, int64_t event_id, const char *actor,
			    const char *reason, struct event_run_view *run, int *already);

/*
 * event_run_move_add: in the caller's transaction (event_set's, which has
 * just written the new start or venue of a sold event that before
 * describes), the event's change number goes up by one and the move's run
 * and parent job are added.  [out] *change_no: the new number.
 */
enum sd_result event_run_move_add(struct db *db, const struct event_view *before,
				  const char *actor, int64_t *change_no);

/* event_run_get: [out] *out.  SD_NOT_FOUND. */
enum sd_result event_run_get(struct db *db, int64_t run_id, struct event_run_view *out);

#define EVENT_RUNS_SHOWN 20

/* event_run_each: fn for the event's runs, the newest first, at most
 * EVENT_RUNS_SHOWN; fn must not use db. */
enum sd_result event_run_each(struct db *db, int64_t event_id,
			      void (*fn)(const struct event_run_view *r, void *arg), void *arg);

/* ---- the parent --------------------------------------------------------- */

/*
 * event_run_enqueue: one batch of the parent: in one transaction, up to
 * limit children for the live orders after the run's cursor, the cursor and
 * the count moved with them; the batch that finds fewer marks the run
 * enqueued.  [out] *queued: children queued now; *enqueued: 1 when the run
 * is (now or before) wholly enqueued.
 */
enum sd_result event_run_enqueue(struct db *db, int64_t run_id, int limit, int64_t *queued,
				 int *enqueued);

/* event_run_child_job_id: a child's job id into buf (QUEUE_JOB_ID_MAX + 1). */
void event_run_child_job_id(const struct event_run_view *run, const char *order_public_id,
			    const char *suffix, char *buf, size_t size);

/* ---- the children ------------------------------------------------------- */

/* event_child_step: [out] *step of (run, order) and its detail ("" none;
 * EVENT_RUN_REASON_MAX + 1 bytes).  SD_NOT_FOUND: no such child. */
enum sd_result event_child_step(struct db *db, int64_t run_id, int64_t order_id,
				enum event_run_step *step, char *detail);

/*
 * event_child_cancel: a cancel's first step, in one transaction: the order
 * cancelled (orders.h, ORDER_CANCEL_FOR_EVENT) when it still stands, its
 * refund owed, the step moved on from queued (cancelled when the provider
 * is owed a call; refunded when nothing is, at_window counted for a
 * box-office payment; skipped when it was cancelled before; failed when a
 * ticket was admitted).  A child past queued changes nothing.  [out] *step.
 */
enum sd_result event_child_cancel(struct db *db, const struct event_run_view *run,
				  int64_t order_id, enum event_run_step *step);

/*
 * event_child_refunded: the provider has the child's order's refund rf
 * (with status, the provider's word, its id, "" none, and failure, may be
 * NULL): in one transaction the refund recorded (refund_record, which sets
 * a still pending one's refund_payment job to follow it), the step
 * cancelled -> refunded and refunded counted (a refund that failed counts
 * as failed: owed at the window).  With refused (the provider's refusal for
 * good, detail saying it) the refund stays owed, the step moves on and
 * failed is counted: the buyer is still told, and the staff see the refund
 * to make.
 */
enum sd_result event_child_refunded(struct db *db, int64_t run_id, int64_t order_id,
				    const struct refund_view *rf, const char *status,
				    const char *provider_refund_id, const char *failure,
				    int refused, const char *detail);

/*
 * event_child_finish: the child's last step, in one transaction: from
 * from (RUN_STEP_REFUNDED for a cancel, RUN_STEP_QUEUED for a move) to
 * done, or to skipped with skip; done counted, the run finished when it
 * was its last child; and, when this run moved it to done (technique 1),
 * the jobs job_id[0..n) of kind[i] with payload[i] queued, and with
 * remind_starts_at the order's reminder for that start (orders.h:
 * order_reminder_add).  [out] *won.
 */
struct event_child_jobs {
	int n;
	const char *kind[2], *job_id[2], *payload[2];
	const char *public_id;		/* the order's, for its reminder */
	int64_t remind_starts_at;	/* 0: no reminder */
};

enum sd_result event_child_finish(struct db *db, int64_t run_id, int64_t order_id,
				  enum event_run_step from, int skip,
				  const struct event_child_jobs *jobs, int *won);

/* event_child_emailed: the child's email is marked sent: its row's emailed
 * and the run's count, once (a conditional update). */
enum sd_result event_child_emailed(struct db *db, int64_t run_id, int64_t order_id);

/* ---- invariant checks (`stagedoor check`) ------------------------------ */

/*
 * event_run_check: every run's counts are what its rows say; a finished
 * run has every child done; a finished cancel leaves its event no live
 * order but those a failed child names; no order has two children in one
 * run (the key).  [out] problem ("" when all hold).
 */
enum sd_result event_run_check(struct db *db, char *problem, size_t size);

#endif
