/*
 * pipeline.h: the relay and a worker in threads of this process, run until
 * the stream and the outbox are both empty (`demo`, `stagedoor-bench pipeline`), and
 * the loop thread they are built from (`stagedoor-bench queue` runs its workers in it).
 *
 * Production runs the relay and the workers as processes of their own
 * (`stagedoor relay`, `stagedoor worker`); this module is for commands that
 * want a whole pipeline inside one process and must know when it is done.
 */
#ifndef SD_PIPELINE_H
#define SD_PIPELINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "db.h"
#include "result.h"
#include "worker.h"

/* ---- one loop in a thread --------------------------------------------- */

/* The relay or a worker, in a thread of its own. */
struct pipeline_loop {
	pthread_t th;
	int is_relay;			/* [in] 1: the relay on relay_db; 0: worker_run(&wo) */
	const char *relay_db;		/* [in] the relay's database (borrowed) */
	struct worker_opts wo;		/* [in] the worker's options (pointers borrowed) */
	struct worker_stats st;		/* [out] the worker's counts */
	int64_t published;		/* [out] rows the relay published */
	int64_t cpu_us;			/* [out] the loop thread's CPU time (not its handlers') */
	int64_t ended_us;		/* [out] clock_mono_us() when the loop returned */
	enum sd_result r;		/* [out] what the loop returned */
	atomic_int ended;		/* the loop returned: the [out] fields are final */
	char err[512];			/* [out] err_msg() of the loop's thread when r != SD_OK */
};

/*
 * pipeline_loop_start: clear l's [out] fields and start its loop in a new
 * thread.  The loop runs until it drains (wo.drain) or a stop is asked for
 * (notify_request_stop / worker_stop_all).  SD_IO, message set, when the
 * thread cannot be started; then there is nothing to join.
 */
enum sd_result pipeline_loop_start(struct pipeline_loop *l);

/* pipeline_loop_join: wait for a started loop; its [out] fields are final. */
void pipeline_loop_join(struct pipeline_loop *l);

/* pipeline_thread_cpu_us: the calling thread's CPU time in microseconds (what
 * it ran on a core, as against waiting); 0 when the system cannot tell. */
int64_t pipeline_thread_cpu_us(void);

/* ---- the relay and one worker until drained ---------------------------- */

/* One snapshot of what is left, both counts read in one transaction. */
struct pipeline_counts {
	int64_t pending;		/* entries in the stream (queue_pending) */
	int64_t unpublished;		/* outbox rows waiting for the relay */
};

#define PIPELINE_POLL_MS_DEFAULT 200

struct pipeline_opts {
	struct worker_opts worker;	/* the worker; worker.db_path is the database the
					 * relay publishes in too */
	int64_t poll_ms;		/* between snapshots; 0: PIPELINE_POLL_MS_DEFAULT */
	/* wait (may be NULL: sleep poll_ms): called before each snapshot, on
	 * the calling thread; returns 1 to take the snapshot now, 0 to skip it
	 * (it is called again once the loops were checked).  Lets a caller keep
	 * its hands off the database until it knows the work is done. */
	int (*wait)(void *arg, int64_t poll_ms);
	/* progress (may be NULL): called after each snapshot with its counts,
	 * the last one included; a result other than SD_OK ends the run with
	 * it (the callback sets the message) */
	enum sd_result (*progress)(void *arg, const struct pipeline_counts *c);
	void *arg;			/* handed to wait and progress */
};

struct pipeline_stats {
	int64_t published;		/* rows the relay published */
	int64_t relay_cpu_us;		/* the relay thread's CPU time */
	int64_t worker_cpu_us;		/* the worker's loop thread's CPU time */
	struct worker_stats worker;	/* the worker's counts */
	int64_t start_us;		/* clock_mono_us() just before the threads started */
	int64_t drained_us;		/* clock_mono_us() at the drained snapshot; 0: none */
};

/*
 * pipeline_run: run the relay (on o->worker.db_path) and one worker (o->worker)
 * in threads until one snapshot on db shows the stream and the outbox empty,
 * then ask both to stop (notify_request_stop) and join them.  The relay moves
 * rows from the outbox to the stream in a transaction, so the two counts read
 * together never miss a job.  [in] db is the caller's connection, used only
 * for the snapshots.  [out] st (may be NULL).
 * Returns the first error: a loop's own failure ("relay: ..." or
 * "worker: ..."), else the snapshot's or the progress callback's, else
 * SD_TIMEOUT when a loop stopped (a stop asked elsewhere) before the drain.
 * The stop request is cleared before and after.
 */
enum sd_result pipeline_run(struct db *db, const struct pipeline_opts *o,
			    struct pipeline_stats *st);

/* ---- sample sales for the demo and the benchmark ---------------------- */

/*
 * pipeline_sample_event: an event named name, 30 days ahead at 20:00 UTC,
 * with room for 3 seats an order.  [out] *event_id.
 */
enum sd_result pipeline_sample_event(struct db *db, const char *name, int64_t orders,
				     int64_t *event_id);

/*
 * pipeline_sample_orders: n orders of 1 to 3 seats, buyers with Latin-1
 * names, idempotency keys "<prefix>-<i>", one transaction each through
 * order_add (give it a FULL connection).  progress (may be NULL) is called
 * after each order.  [out] *seats sold; first_id (may be NULL, ORDER_ID_MAX
 * bytes) the first order's public id.
 */
enum sd_result pipeline_sample_orders(struct db *db, int64_t event_id, int64_t n,
				      const char *prefix, int64_t *seats, char *first_id,
				      void (*progress)(int64_t done, int64_t n, void *arg),
				      void *arg);

#endif
