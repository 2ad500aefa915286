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

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "queue.h"
#include "result.h"

/* What a handler decided. */
enum job_outcome {
	JOB_DONE,		/* ack */
	JOB_RETRY_LATER,	/* snooze for res->delay_ms; not a failed attempt */
	JOB_FAIL,		/* a transient failure: back off, dead after max attempts */
	JOB_FAIL_PERMANENT,	/* dead at once */
};

struct job_result {
	int64_t delay_ms;			/* JOB_RETRY_LATER: how long; JOB_FAIL: the
						 * shortest backoff (a provider's
						 * Retry-After); 0: the kind's backoff */
	char error[QUEUE_ERROR_MAX + 1];	/* JOB_FAIL*, and JOB_RETRY_LATER from
						 * job_retry_io: why, one line */
	int io;					/* JOB_RETRY_LATER from job_retry_io: the
						 * box's own disk or database failed */
};

/* Per handler thread: what a handler may use besides its job. */
struct handler_ctx;

/* handler_db: this thread's own connection (NORMAL), opened on first use;
 * NULL with the error set when it cannot be opened. */
struct db *handler_db(struct handler_ctx *ctx);

/* handler_worker_name: the name of the worker running the handler. */
const char *handler_worker_name(const struct handler_ctx *ctx);

/* handler_app: worker_opts.app, the application's context for handlers. */
void *handler_app(const struct handler_ctx *ctx);

/* handler_metrics: the worker's shared counters (metrics.h), for a handler
 * to count what it absorbed; NULL outside a worker or when not counted. */
struct metrics *handler_metrics(const struct handler_ctx *ctx);

/*
 * worker_ctx_new: a handler context outside any worker, for calling a handler
 * directly (tests, one-off tools): handler_db() lazily opens its own NORMAL
 * connection to db_path, handler_app() returns app, handler_worker_name() is
 * "standalone".  Like a handler thread's context it is used by one thread at
 * a time.  [in] db_path is copied; app is borrowed.  NULL when out of memory.
 * worker_ctx_free closes the connection and frees the context; accepts NULL.
 */
struct handler_ctx *worker_ctx_new(const char *db_path, void *app);
void worker_ctx_free(struct handler_ctx *ctx);

typedef enum job_outcome (*handler_fn)(struct handler_ctx *ctx, const struct job *job,
				       struct job_result *res);

struct handler {
	const char *kind;
	handler_fn fn;
};

/* The built-in kinds: noop; sleep {"ms":N}; fail {"times":N}.  A table ends
 * with a { NULL, NULL } entry; a worker with its own table still runs these. */
extern const struct handler worker_builtin_handlers[];

/* job_failf: fill res->error and return JOB_FAIL or JOB_FAIL_PERMANENT. */
enum job_outcome job_failf(struct job_result *res, int permanent, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * job_retry_io: the box's own disk or database refused a write (full, or an
 * I/O error; the message is in fmt): not the job's fault, so not a failed
 * attempt, and never a step toward the dead letters, however long the disk
 * stays full.  The job snoozes (JOB_RETRY_LATER) for its kind's backoff
 * grown with its deliveries, at most WORKER_IO_RETRY_CAP_MS, so that it is
 * tried again soon after the disk takes writes again; res->error says why
 * and the worker logs it once per episode.
 */
enum job_outcome job_retry_io(struct job_result *res, const struct job *job, const char *fmt,
			      ...) __attribute__((format(printf, 3, 4)));

/* A job waiting out a full or failing disk is tried at least this often. */
#define WORKER_IO_RETRY_CAP_MS 60000

/* job_arg_int: read integer field key of the job's payload.  SD_NOT_FOUND when
 * missing, SD_INVALID (message set) when not an integer. */
enum sd_result job_arg_int(const struct job *job, const char *key, int64_t *v);

/* job_arg_str: copy string field key of the payload into buf. */
enum sd_result job_arg_str(const struct job *job, const char *key, char *buf, size_t size);

struct worker_stats;

struct worker_opts {
	const char *db_path;
	const char *name;		/* leased_by; NULL: "w<pid>.<n>" */
	int concurrency;		/* handler threads; default 4 */
	int batch;			/* most entries per claim and acks per commit;
					 * default = concurrency */
	int64_t lease_ms;		/* 0: each kind's policy */
	int drain;			/* exit when the stream holds nothing */
	int64_t grace_ms;		/* on stop: how long running handlers may finish */
	int64_t flush_ms;		/* longest a finished job waits for its commit */
	int64_t retention_ms;		/* prune done jobs older than this; 0: never */
	enum db_sync sync;		/* the loop connection's level; default QUEUE */
	const struct handler *handlers;	/* NULL: the built-in table */
	void *app;			/* handed to handlers by handler_app() */
	/* called on the handler thread just before a handler runs (benchmarks) */
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
 * worker_run: run until stopped, or with drain until the stream is empty.
 * [out] stats (may be NULL) gets the counts.  Returns SD_OK after a clean
 * stop or drain.
 */
enum sd_result worker_run(const struct worker_opts *o, struct worker_stats *stats);

/* worker_stop_all: ask every worker in this process to stop; async-signal-safe. */
void worker_stop_all(void);

/* worker_stop_reset: clear the stop request (tests that run workers again). */
void worker_stop_reset(void);

/* worker_handler_find: the handler for kind in table, or NULL. */
const struct handler *worker_handler_find(const struct handler *table, const char *kind);

#endif
