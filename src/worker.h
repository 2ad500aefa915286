/*
 * worker.h: the claim loop, the handler table, leases and graceful stop.
 *
 * One worker is one loop thread that owns the queue's connection and a pool
 * of handler threads.  The loop claims as many entries as there are free
 * handler slots (at most a batch) in one statement, hands them to the pool,
 * and commits the finished jobs' acks, retries and failures together with the
 * next claim in one short transaction: the batch completer.  A crash before
 * that commit only re-runs jobs that were done, which idempotent handlers
 * absorb.
 */
#ifndef SD_WORKER_H
#define SD_WORKER_H

/* a drain waits for entries due this soon (a retry's backoff), not for
 * those scheduled further ahead (a reminder) */
#define WORKER_DRAIN_HORIZON_MS (10 * 60 * 1000LL)

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "handler.h"
#include "queue.h"
#include "result.h"

/* The built-in kinds: noop; sleep {"ms":N}; fail {"times":N}.  A table ends
 * with a { NULL, NULL } entry; a worker with its own table still runs these. */
extern const struct handler worker_builtin_handlers[];

struct worker_stats;

struct worker_opts {
	const char *db_path;
	const char *name;		/* leased_by; NULL: "w<pid>.<n>" */
	int concurrency;		/* handler threads; default 4 */
	int batch;			/* most entries per claim and acks per commit;
					 * default = concurrency */
	int64_t lease_ms;		/* 0: each kind's policy */
	int drain;			/* exit when the stream holds nothing due
					 * within WORKER_DRAIN_HORIZON_MS */
	int64_t grace_ms;		/* on stop: how long running handlers may finish */
	int64_t flush_ms;		/* longest a finished job waits for its commit */
	int64_t retention_ms;		/* prune done jobs older than this; 0: never */
	enum db_sync sync;		/* the loop connection's level; default QUEUE */
	const struct handler *handlers;	/* NULL: the built-in table */
	void *app;			/* handed to handlers as handler_ctx.app */
	/* called on the handler thread just before a handler runs: an observer
	 * (stagedoor-bench queue times a job from enqueue to start with it) */
	void (*on_start)(const struct job *job, void *arg);
	void *arg;
	/* called on the loop thread after each commit that recorded results,
	 * with the counts so far (`worker --drain` draws its progress) */
	void (*progress)(void *arg, const struct worker_stats *st);
	void *progress_arg;
};

#define WORKER_CONCURRENCY_DEFAULT 4
#define WORKER_GRACE_MS_DEFAULT 30000
#define WORKER_FLUSH_MS_DEFAULT 5

struct worker_stats {
	int64_t claimed;	/* entries leased */
	int64_t done;		/* acked */
	int64_t snoozed;	/* retry_later */
	int64_t failed;		/* transient failures */
	int64_t dead;		/* sent to the dead letters by this worker */
	int64_t stale;		/* calls refused because the lease was lost */
	int64_t extended;	/* lease extensions */
	int64_t released;	/* given back on stop */
};

/*
 * worker_run: run until stopped, or with drain until nothing is due soon.
 * [out] stats (may be NULL) gets the counts.  Returns SD_OK after a clean
 * stop or drain.
 */
enum sd_result worker_run(const struct worker_opts *o, struct worker_stats *stats);

/* worker_stop_all: ask every worker in this process to stop; async-signal-safe. */
void worker_stop_all(void);

/* worker_stop_reset: clear the stop request (tests that run workers again). */
void worker_stop_reset(void);


#endif
