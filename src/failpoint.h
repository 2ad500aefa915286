/*
 * failpoint.h: named places in the handlers, the worker, the relay, the
 * API's intake, the backup and the database's open where a test or the
 * crash harness can step in: the windows where a second run is born ("after
 * the send, before sent_at"; dist/doc/design.md §1.1).
 *
 * Off unless set.  $STAGEDOOR_FAILPOINTS names the armed ones, read once at
 * the first pass:
 *
 *   STAGEDOOR_FAILPOINTS="after_send_before_mark=crash:3,relay_publish_twice=on:50"
 *
 *   name=crash     end the process (exit status 70, no clean-up, as SIGKILL
 *                  would) at every pass;
 *   name=crash:N   end it at the Nth pass, counted in this process: a worker
 *                  restarted by its supervisor crashes again N passes later;
 *   name=on        failpoint_on() answers 1 at every pass (a behaviour such as
 *                  the relay's duplicate publish, not a crash);
 *   name=on:N      ... at every Nth pass.
 *
 * A pass that acts logs one warning line "failpoint hit" with the name, so a
 * harness can count them.  Unarmed, a failpoint costs one relaxed load and a
 * branch.  Tests install a hook instead (failpoint_set_hook) that blocks on a
 * barrier to force a bad interleaving.
 *
 * Only a build made for tests has them (STAGEDOOR_FAILPOINTS defined: the
 * Makefile's build/test and build/san).  In the product every call below is
 * nothing, its name is never compiled in, and $STAGEDOOR_FAILPOINTS is not
 * read: no environment can make a venue's box crash on purpose or write at
 * synchronous=OFF.
 */
#ifndef SD_FAILPOINT_H
#define SD_FAILPOINT_H

/* The names, one per window (dist/doc/jobs.md, "Testing a kind"). */
#define FP_RENDER_CHECKED "render_after_check"		/* passed the null check */
#define FP_RENDER_STORED "after_render_before_update"	/* PDF stored, before the update */
#define FP_SEND_CLAIMED "send_after_claim"		/* owns the claim, before sending */
#define FP_SEND_SENT "after_send_before_mark"		/* sent, before sent_at */
#define FP_COUNT_BEFORE "count_before_tx"		/* before the counter transaction */
#define FP_REFUND_CLAIMED "refund_after_claim"		/* owns a refund's claim, before the
							 * provider */
#define FP_REFUND_CALLED "refund_after_call"		/* the provider refunded, not marked */
#define FP_RUN_BATCH "event_run_after_batch"		/* a parent queued a batch of children */
#define FP_RUN_CANCELLED "event_child_after_cancel"	/* a child cancelled its order */
#define FP_RUN_REFUNDED "event_child_after_refund"	/* a child recorded its refund */
#define FP_RUN_RENDERED "event_child_after_render"	/* a move's child stored its new PDF */
#define FAILPOINT_JOB_DONE "after_work_before_ack"	/* handler returned, result not
							 * committed */
#define FP_RELAY_TWICE "relay_publish_twice"		/* the relay publishes a row twice */
#define FP_WORKER_START "worker_start"			/* a worker process, before it is ready */
#define FP_DB_SYNC_OFF "db_synchronous_off"		/* every connection at synchronous=OFF:
							 * the power-cut soak's proof that it
							 * sees what an unsynced commit loses */

typedef void (*failpoint_fn)(const char *name, void *arg);

#ifdef STAGEDOOR_FAILPOINTS
/* failpoint_set_hook: call fn at every failpoint (NULL: none). */
void failpoint_set_hook(failpoint_fn fn, void *arg);

/* failpoint: pass the named place: call the hook, crash when armed so. */
void failpoint(const char *name);

/* failpoint_on: pass the named place; 1 when it is armed "on" for this pass. */
int failpoint_on(const char *name);

/* failpoint_check_spec: is spec ($STAGEDOOR_FAILPOINTS) well formed?
 * SD_INVALID naming the bad entry; lets a command refuse a typo at start
 * instead of silently running without the crash it was asked for. */
int failpoint_check_spec(const char *spec);

#else
#define failpoint_set_hook(fn, arg) ((void)(fn), (void)(arg))
#define failpoint(name) ((void)0)
#define failpoint_on(name) 0
#endif

#endif
