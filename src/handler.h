/*
 * handler.h: what a job handler gets and what it gives back.
 *
 * The interface between the worker (Runtime), which claims jobs and records
 * their outcomes, and the handlers (Domain), which do the work: the context
 * a handler runs in, its outcome and result, the helpers that fill a result,
 * read the payload and count what a handler absorbed.  It sits below both:
 * a handler includes this header and never worker.h, and nothing here calls
 * up into the worker.
 *
 * A context belongs to one handler thread (or to one caller outside any
 * worker: handler_ctx_new) and is used by one thread at a time.
 */
#ifndef SD_HANDLER_H
#define SD_HANDLER_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "metrics.h"
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

/* What a handler may use besides its job.  The worker fills one per handler
 * thread; handlers read the fields and open the connection with handler_db. */
struct handler_ctx {
	const char *db_path;		/* the database handler_db opens (borrowed) */
	const char *worker;		/* the worker's name, for log lines */
	void *app;			/* the application's context (worker_opts.app) */
	struct metrics *metrics;	/* the worker's shared counters; NULL: not counted */
	struct db *db;			/* handler_db's connection; NULL until first use */
};

/*
 * handler_db: this context's own connection (DB_SYNC_NORMAL, not the
 * loop's QUEUE: a handler's writes are the job's effects, which the loop's
 * ack leans on; see db.h), opened on first use; NULL with the error set when
 * it cannot be opened.
 */
struct db *handler_db(struct handler_ctx *ctx);

/* handler_ctx_close: close the context's connection (the worker's handler
 * threads, as they end).  The context itself is the caller's. */
void handler_ctx_close(struct handler_ctx *ctx);

/*
 * handler_ctx_new: a context outside any worker, for calling a handler
 * directly (tests, one-off tools): worker "standalone", no metrics.  [in]
 * db_path is copied; app is borrowed.  NULL when out of memory.
 * handler_ctx_free closes its connection and frees it; accepts NULL.
 */
struct handler_ctx *handler_ctx_new(const char *db_path, void *app);
void handler_ctx_free(struct handler_ctx *ctx);

typedef enum job_outcome (*handler_fn)(struct handler_ctx *ctx, const struct job *job,
				       struct job_result *res);

/* A kind and its handler; a table ends with { NULL, NULL }. */
struct handler {
	const char *kind;
	handler_fn fn;
};

/* handler_find: the handler for kind in table, or NULL. */
const struct handler *handler_find(const struct handler *table, const char *kind);

/* handler_absorbed: count a second run the technique t absorbed (nothing
 * when the context counts nothing). */
void handler_absorbed(struct handler_ctx *ctx, enum metrics_technique t);

/* job_failf: fill res->error and return JOB_FAIL or JOB_FAIL_PERMANENT. */
enum job_outcome job_failf(struct job_result *res, int permanent, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * job_retry_io: the box's own disk or database refused a write (full, or an
 * I/O error; the message is in fmt): not the job's fault, so not a failed
 * attempt, and never a step toward the dead letters, however long the disk
 * stays full.  The job snoozes (JOB_RETRY_LATER) for its kind's backoff
 * grown with its deliveries, at most HANDLER_IO_RETRY_CAP_MS, so that it is
 * tried again soon after the disk takes writes again; res->error says why
 * and the worker logs it once per episode.
 */
enum job_outcome job_retry_io(struct job_result *res, const struct job *job, const char *fmt,
			      ...) __attribute__((format(printf, 3, 4)));

/* A job waiting out a full or failing disk is tried at least this often. */
#define HANDLER_IO_RETRY_CAP_MS 60000

/* job_arg_int: read integer field key of the job's payload.  SD_NOT_FOUND when
 * missing, SD_INVALID (message set) when not an integer. */
enum sd_result job_arg_int(const struct job *job, const char *key, int64_t *v);

/* job_arg_str: string field key of the job's payload into buf (size bytes).
 * SD_NOT_FOUND when missing, SD_INVALID (message set) when not a string or
 * longer than fits. */
enum sd_result job_arg_str(const struct job *job, const char *key, char *buf, size_t size);


/* handler_json_lib_version: jansson's version as linked ("2.14"). */
const char *handler_json_lib_version(void);

#endif
