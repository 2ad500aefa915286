/*
 * worker.c: the claim loop, the handler pool, leases, graceful stop.
 *
 * Threads:
 *   loop     owns the queue connection.  Each turn it may open one
 *            transaction that extends leases that are half used, commits the
 *            results of finished jobs (ack, retry_later, fail), and claims as
 *            many entries as there are free handler threads; then it sleeps
 *            in notify_wait() until a handler finishes, work arrives, a lease
 *            needs extending or a pending commit is due.
 *   handler  threads take claimed jobs from the run queue and run them.  A
 *            handler thread that finds more jobs waiting wakes one more
 *            idle thread (a chain), so a batch of short jobs costs a few
 *            wake-ups, not one per job.
 *
 * Invariants (all under w->mu):
 *   - a slot is FREE, QUEUED (in runq), RUNNING or FINISHED (in fin[]);
 *   - queued + running <= concurrency, so a claim asks for at most the free
 *     handler threads and no claimed entry waits long for a thread;
 *   - only the loop thread touches the database through w->db and moves a
 *     slot from FINISHED back to FREE.
 */
#define _GNU_SOURCE
#include "worker.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "db.h"
#include "episode.h"
#include "failpoint.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"

/* A handler thread wakes another for the queued jobs only while handlers
 * run at least this long on average. */
#define WORKER_CHAIN_MIN_US 50

/* Short jobs: a handler thread that runs dry waits awake this long for the
 * loop's next claim, and the loop waits awake for short jobs to finish,
 * instead of paying a sleep and a wake-up (tens of microseconds each) per
 * turn.  One handler thread at a time spins; nothing spins for long jobs. */
#define WORKER_SPIN_JOB_US 20
/* kinds whose disk episodes a worker tells apart; more share the last */
#define WORKER_IO_KINDS 8
/* a failed queue transaction is tried again after this long, doubling to
 * the cap while the failures last */
#define WORKER_TX_RETRY_MS 100
#define WORKER_TX_RETRY_CAP_MS 2000
#define WORKER_SPIN_US 150

/* A spinning thread gives its core's other hyperthread room to run. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* ======================== results and payload fields ===================== */

enum job_outcome job_failf(struct job_result *res, int permanent, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(res->error, sizeof res->error, fmt, ap);
	va_end(ap);
	return permanent ? JOB_FAIL_PERMANENT : JOB_FAIL;
}

enum job_outcome job_retry_io(struct job_result *res, const struct job *job, const char *fmt,
			      ...)
{
	struct kind_policy p = *queue_policy(job->kind);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(res->error, sizeof res->error, fmt, ap);
	va_end(ap);
	if (p.backoff_cap_ms > WORKER_IO_RETRY_CAP_MS)
		p.backoff_cap_ms = WORKER_IO_RETRY_CAP_MS;
	if (p.backoff_base_ms > p.backoff_cap_ms)
		p.backoff_base_ms = p.backoff_cap_ms;
	/* deliveries, not attempts: every try is a claim, none a failure */
	res->delay_ms = queue_backoff_ms(&p, job->deliveries);
	res->io = 1;
	return JOB_RETRY_LATER;
}

static enum sd_result job_arg(const struct job *job, const char *key, json_t **root,
			      json_t **v)
{
	json_error_t e;

	*root = json_loads(job->payload, JSON_REJECT_DUPLICATES, &e);
	if (!*root)
		return err_set(SD_INVALID, "payload is not valid JSON: %s", e.text);
	*v = json_object_get(*root, key);
	if (!*v) {
		json_decref(*root);
		return err_set(SD_NOT_FOUND, "payload has no \"%s\"", key);
	}
	return SD_OK;
}

enum sd_result job_arg_int(const struct job *job, const char *key, int64_t *out)
{
	json_t *root, *v;
	enum sd_result r = job_arg(job, key, &root, &v);

	if (r != SD_OK)
		return r;
	if (!json_is_integer(v))
		r = err_set(SD_INVALID, "payload field \"%s\" must be an integer", key);
	else
		*out = (int64_t)json_integer_value(v);
	json_decref(root);
	return r;
}

enum sd_result job_arg_str(const struct job *job, const char *key, char *buf, size_t size)
{
	json_t *root, *v;
	enum sd_result r = job_arg(job, key, &root, &v);

	if (r != SD_OK)
		return r;
	if (!json_is_string(v))
		r = err_set(SD_INVALID, "payload field \"%s\" must be a string", key);
	else if (json_string_length(v) >= size)
		r = err_set(SD_INVALID, "payload field \"%s\" is too long", key);
	else
		memcpy(buf, json_string_value(v), json_string_length(v) + 1);
	json_decref(root);
	return r;
}

/* ======================== built-in handlers ============================== */

static enum job_outcome h_noop(struct handler_ctx *ctx, const struct job *job,
			       struct job_result *res)
{
	(void)ctx;
	(void)job;
	(void)res;
	return JOB_DONE;
}

static enum job_outcome h_sleep(struct handler_ctx *ctx, const struct job *job,
				struct job_result *res)
{
	int64_t ms = 0;
	struct timespec ts;

	(void)ctx;
	if (job_arg_int(job, "ms", &ms) != SD_OK || ms < 0 || ms > 24LL * 3600 * 1000)
		return job_failf(res, 1, "sleep needs {\"ms\": N} with 0 <= N <= 86400000");
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	return JOB_DONE;
}

static enum job_outcome h_fail(struct handler_ctx *ctx, const struct job *job,
			       struct job_result *res)
{
	int64_t times = 0;

	(void)ctx;
	if (job_arg_int(job, "times", &times) != SD_OK || times < 0)
		return job_failf(res, 1, "fail needs {\"times\": N} with N >= 0");
	if (job->attempts < times)
		return job_failf(res, 0, "failing as asked: attempt %lld of %lld failures",
				 (long long)job->attempts + 1, (long long)times);
	return JOB_DONE;
}

const struct handler worker_builtin_handlers[] = {
	{ "noop", h_noop },
	{ "sleep", h_sleep },
	{ "fail", h_fail },
	{ NULL, NULL },
};

const struct handler *worker_handler_find(const struct handler *table, const char *kind)
{
	for (; table && table->kind; table++)
		if (strcmp(table->kind, kind) == 0)
			return table;
	return NULL;
}

/* ======================== the worker ===================================== */

enum slot_state { SLOT_FREE, SLOT_QUEUED, SLOT_RUNNING, SLOT_FINISHED };

struct slot {
	enum slot_state state;
	struct job *job;		/* owned while not FREE */
	int64_t lease_ms;		/* the lease this job gets on each extension */
	int64_t extend_at;		/* extend once the clock passes this */
	int64_t started_us;		/* handler start, monotonic */
	int64_t duration_us;
	enum job_outcome outcome;
	int release;			/* give the lease back instead (stopping) */
	struct job_result res;
};

struct handler_ctx {
	struct worker *w;
	struct db *db;			/* lazily opened, this thread only */
};

struct worker {
	const struct worker_opts *o;
	char name[64];
	char name_kv[72];		/* "worker=<name>", for log lines */
	struct db *db;			/* the loop's connection */
	struct notify *nt;
	const struct handler *table;
	int nslots;			/* concurrency + batch: room for finished
					 * jobs waiting for their commit */
	struct slot *slots;
	pthread_t *threads;
	int nthreads;

	pthread_mutex_t mu;
	pthread_cond_t cv;		/* handler threads wait here for work */
	int *runq;			/* slot indexes, FIFO */
	int rq_head, rq_len;
	int *fin;			/* finished slot indexes */
	int n_fin;
	int *freel;			/* FREE slot indexes (loop thread only) */
	int n_free;
	int64_t *ack_ids;		/* scratch for batch acks (loop thread) */
	int *ack_pos;
	unsigned char *ack_ok, *grouped;
	int running;
	int idle;			/* handler threads waiting on cv */
	int64_t avg_run_us;		/* handler run time, moving average (1/8) */
	atomic_int rq_hint;		/* rq_len, readable without the lock (spinning) */
	atomic_int fin_hint;		/* n_fin, likewise */
	atomic_int busy_hint;		/* running + rq_len, likewise */
	int spinning;			/* a handler thread spins for work */
	int64_t progress_us;		/* last time a job entered or left runq */
	int quit;
	int loop_waiting;		/* the loop sleeps: wake it on progress */
	int wake_at_fin;		/* ... when n_fin reaches this */
	struct metrics *metrics;	/* the database's shared counters; NULL: none */
	struct episode tx_ep;		/* the loop's transactions failing (loop thread) */
	struct {
		char kind[QUEUE_KIND_MAX + 1];
		struct episode ep;	/* its jobs waiting out the disk (job_retry_io) */
	} io[WORKER_IO_KINDS];		/* loop thread only */
	int n_io;
};

static atomic_int worker_seq;

void worker_stop_all(void)
{
	notify_request_stop();
}

void worker_stop_reset(void)
{
	notify_stop_reset();
}

struct db *handler_db(struct handler_ctx *ctx)
{
	if (!ctx->db && db_open(ctx->w->o->db_path, 0, DB_SYNC_NORMAL, &ctx->db) != SD_OK)
		return NULL;
	return ctx->db;
}

const char *handler_worker_name(const struct handler_ctx *ctx)
{
	return ctx->w->name;
}

void *handler_app(const struct handler_ctx *ctx)
{
	return ctx->w->o->app;
}

struct metrics *handler_metrics(const struct handler_ctx *ctx)
{
	return ctx->w->metrics;
}

/* A standalone context carries a worker of its own that only handler_db,
 * handler_app and handler_worker_name read: the options and the name. */
struct standalone_ctx {
	struct handler_ctx ctx;		/* first: the pointer handed out */
	struct worker w;		/* only o and name are set */
	struct worker_opts o;		/* only db_path and app are set */
	char db_path[];			/* the copy o.db_path points to */
};

struct handler_ctx *worker_ctx_new(const char *db_path, void *app)
{
	size_t n = strlen(db_path) + 1;
	struct standalone_ctx *sc = calloc(1, sizeof *sc + n);

	if (!sc) {
		err_set(SD_NOMEM, "out of memory");
		return NULL;
	}
	memcpy(sc->db_path, db_path, n);
	sc->o.db_path = sc->db_path;
	sc->o.app = app;
	snprintf(sc->w.name, sizeof sc->w.name, "standalone");
	sc->w.o = &sc->o;
	sc->ctx.w = &sc->w;
	return &sc->ctx;
}

void worker_ctx_free(struct handler_ctx *ctx)
{
	if (!ctx)
		return;
	db_close(ctx->db);
	free((struct standalone_ctx *)ctx);
}

static enum metrics_outcome outcome_metric(enum job_outcome o)
{
	switch (o) {
	case JOB_DONE:
		return METRICS_DONE;
	case JOB_RETRY_LATER:
		return METRICS_RETRY_LATER;
	case JOB_FAIL_PERMANENT:
		return METRICS_FAILED_PERMANENT;
	case JOB_FAIL:
	default:
		return METRICS_FAILED;
	}
}

static void run_one(struct handler_ctx *ctx, struct slot *s)
{
	struct worker *w = ctx->w;
	const struct handler *h = worker_handler_find(w->table, s->job->kind);

	if (!h)	/* the built-in kinds are always there */
		h = worker_handler_find(worker_builtin_handlers, s->job->kind);

	s->res.delay_ms = 0;
	s->res.error[0] = '\0';
	s->res.io = 0;
	if (w->o->on_start)
		w->o->on_start(s->job, w->o->arg);
	s->started_us = clock_mono_us();
	if (!h)
		s->outcome = job_failf(&s->res, 1, "no handler for kind '%s'", s->job->kind);
	else
		s->outcome = h->fn(ctx, s->job, &s->res);
	s->duration_us = clock_mono_us() - s->started_us;
	metrics_run(w->metrics, s->job->kind, outcome_metric(s->outcome), s->duration_us);
	failpoint(FAILPOINT_JOB_DONE);	/* the work is done; the ack is not */
}

static void *handler_thread(void *arg)
{
	struct handler_ctx ctx = { .w = arg, .db = NULL };
	struct worker *w = ctx.w;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct slot *s;
		int idx;

		int spun = 0;

		while (w->rq_len == 0 && !w->quit) {
			if (!spun && !w->spinning && w->avg_run_us < WORKER_SPIN_JOB_US) {
				int64_t until = clock_mono_us() + WORKER_SPIN_US;

				spun = w->spinning = 1;
				pthread_mutex_unlock(&w->mu);
				while (atomic_load_explicit(&w->rq_hint, memory_order_relaxed) == 0 &&
				       clock_mono_us() < until)
					cpu_relax();
				pthread_mutex_lock(&w->mu);
				w->spinning = 0;
				continue;
			}
			w->idle++;
			pthread_cond_wait(&w->cv, &w->mu);
			w->idle--;
		}
		if (w->rq_len == 0)
			break;
		idx = w->runq[w->rq_head];
		w->rq_head = (w->rq_head + 1) % w->nslots;
		w->rq_len--;
		s = &w->slots[idx];
		s->state = SLOT_RUNNING;
		w->running++;
		atomic_store_explicit(&w->rq_hint, w->rq_len, memory_order_relaxed);
		w->progress_us = clock_mono_us();
		/* chain-wake another thread only for jobs that take a while: a
		 * thread drains a batch of short jobs alone faster than a hundred
		 * wake-ups would (the loop wakes more when the queue stalls) */
		if (w->rq_len > 0 && w->idle > 0 && w->avg_run_us >= WORKER_CHAIN_MIN_US)
			pthread_cond_signal(&w->cv);
		pthread_mutex_unlock(&w->mu);

		run_one(&ctx, s);

		pthread_mutex_lock(&w->mu);
		s->state = SLOT_FINISHED;
		w->avg_run_us += (s->duration_us - w->avg_run_us) / 8;
		w->running--;
		w->fin[w->n_fin++] = idx;
		atomic_store_explicit(&w->fin_hint, w->n_fin, memory_order_relaxed);
		atomic_store_explicit(&w->busy_hint, w->running + w->rq_len, memory_order_relaxed);
		if (w->loop_waiting && (w->n_fin >= w->wake_at_fin || (w->running == 0 && w->rq_len == 0))) {
			w->loop_waiting = 0;
			notify_wake(w->nt);
		}
	}
	pthread_mutex_unlock(&w->mu);
	db_close(ctx.db);
	return NULL;
}

static int64_t lease_for(const struct worker *w, const struct job *j)
{
	return w->o->lease_ms > 0 ? w->o->lease_ms : queue_policy(j->kind)->lease_ms;
}

static void log_outcome(const struct worker *w, const struct slot *s, const char *outcome,
			enum log_level lvl)
{
	char q[QUEUE_ERROR_MAX + 8];

	if (!log_enabled(lvl))
		return;
	log_event(lvl, "job finished",
		  "worker=%s job_id=%s kind=%s attempt=%lld delivery=%lld outcome=%s "
		  "duration_ms=%.3f%s%s",
		  w->name, s->job->job_id, s->job->kind, (long long)s->job->attempts + 1,
		  (long long)s->job->deliveries, outcome, (double)s->duration_us / 1000.0,
		  s->res.error[0] ? " err=" : "",
		  s->res.error[0] ? log_quote(q, sizeof q, s->res.error) : "");
}

/* A result refused because the lease was lost: counted and logged. */
static void note_stale(const struct worker *w, const struct job *j)
{
	metrics_stale(w->metrics, j->kind);
	log_event(LOG_WARN, "lease lost before the result was recorded",
		  "worker=%s job_id=%s kind=%s delivery=%lld outcome=stale", w->name, j->job_id,
		  j->kind, (long long)j->deliveries);
}

/* Commit-side handling of one finished slot, inside the loop's transaction. */
static enum sd_result settle(struct worker *w, struct slot *s, struct worker_stats *st)
{
	const struct job *j = s->job;
	enum sd_result r;
	int dead = 0;

	if (s->release) {
		r = queue_release(w->db, j->id, j->lease_token);
		if (r == SD_OK)
			st->released++;
		return r == SD_STALE ? SD_OK : r;
	}
	switch (s->outcome) {
	case JOB_DONE:
		r = queue_ack(w->db, j->id, j->lease_token);
		if (r == SD_OK)
			st->done++;
		break;
	case JOB_RETRY_LATER:
		r = queue_retry_later(w->db, j->id, j->lease_token,
				      s->res.delay_ms > 0 ? s->res.delay_ms : 0);
		if (r == SD_OK)
			st->snoozed++;
		break;
	case JOB_FAIL:
	case JOB_FAIL_PERMANENT:
	default:
		r = queue_fail_after(w->db, j, s->res.error, s->outcome == JOB_FAIL_PERMANENT,
				     s->res.delay_ms, &dead);
		if (r == SD_OK && dead)
			st->dead++;
		else if (r == SD_OK)
			st->failed++;
		break;
	}
	if (r == SD_STALE) {
		st->stale++;
		note_stale(w, j);
	}
	return r;
}

/*
 * Record the results of the finished slots idx[0..n), inside the loop's
 * transaction.  Acks of one claim share a token and go in one batch ack;
 * everything else goes one by one.  [out] stale[i] is 1 when slot idx[i]'s
 * lease had been lost.
 */
static enum sd_result settle_all(struct worker *w, const int *idx, int n,
				 struct worker_stats *st, unsigned char *stale)
{
	enum sd_result r = SD_OK;
	int i, k, m;

	for (i = 0; i < n; i++) {
		w->grouped[i] = 0;
		stale[i] = 0;
	}
	for (i = 0; i < n && r == SD_OK; i++) {
		struct slot *s = &w->slots[idx[i]];
		int64_t token;

		if (w->grouped[i] || s->release || s->outcome != JOB_DONE)
			continue;
		token = s->job->lease_token;
		for (k = i, m = 0; k < n; k++) {
			struct slot *o = &w->slots[idx[k]];
			if (!w->grouped[k] && !o->release && o->outcome == JOB_DONE &&
			    o->job->lease_token == token) {
				w->grouped[k] = 1;
				w->ack_ids[m] = o->job->id;
				w->ack_pos[m++] = k;
			}
		}
		r = queue_ack_many(w->db, token, w->ack_ids, m, w->ack_ok);
		for (k = 0; r == SD_OK && k < m; k++) {
			if (w->ack_ok[k]) {
				st->done++;
			} else {
				stale[w->ack_pos[k]] = 1;
				st->stale++;
				note_stale(w, w->slots[idx[w->ack_pos[k]]].job);
			}
		}
	}
	for (i = 0; i < n && r == SD_OK; i++) {
		if (w->grouped[i])
			continue;
		r = settle(w, &w->slots[idx[i]], st);
		if (r == SD_STALE) {
			stale[i] = 1;
			r = SD_OK;
		}
	}
	return r;
}

/* The disk episode of kind's jobs (loop thread), made when create; NULL
 * when there is none. */
static struct episode *io_episode(struct worker *w, const char *kind, int create, char *who,
				  size_t size)
{
	int i;

	snprintf(who, size, "worker=%s kind=%s", w->name, kind);
	for (i = 0; i < w->n_io; i++)
		if (strcmp(w->io[i].kind, kind) == 0)
			return &w->io[i].ep;
	if (!create)
		return NULL;
	if (w->n_io == WORKER_IO_KINDS)
		return &w->io[WORKER_IO_KINDS - 1].ep;
	snprintf(w->io[w->n_io].kind, sizeof w->io[w->n_io].kind, "%s", kind);
	memset(&w->io[w->n_io].ep, 0, sizeof w->io[w->n_io].ep);
	return &w->io[w->n_io++].ep;
}

/* A job of this kind waits out the disk (job_retry_io): one warning per
 * episode, each job's own line only at debug; a job of the kind that is
 * done ends the episode with one line. */
static void io_settled(struct worker *w, const struct slot *s)
{
	char who[QUEUE_KIND_MAX + 96];
	struct episode *e;

	if (s->outcome == JOB_RETRY_LATER && s->res.io) {
		e = io_episode(w, s->job->kind, 1, who, sizeof who);
		episode_fail(e, LOG_WARN, "jobs wait for the disk and retry", who, s->res.error,
			     0, 0);
	} else if (s->outcome == JOB_DONE && w->n_io > 0 &&
		   (e = io_episode(w, s->job->kind, 0, who, sizeof who))) {
		episode_end(e, "jobs write again", who);
	}
}

static void log_settled(struct worker *w, struct slot *s)
{
	if (s->release)
		return;
	io_settled(w, s);
	switch (s->outcome) {
	case JOB_DONE:
		log_outcome(w, s, "done", LOG_INFO);
		break;
	case JOB_RETRY_LATER:
		log_outcome(w, s, "retry_later", s->res.io ? LOG_DEBUG : LOG_INFO);
		break;
	default:
		if (s->outcome == JOB_FAIL_PERMANENT ||
		    s->job->attempts + 1 >= queue_policy(s->job->kind)->max_attempts)
			log_outcome(w, s, "dead", LOG_WARN);
		else
			log_outcome(w, s, "failed", LOG_WARN);
	}
}

static void slot_clear(struct worker *w, int idx)
{
	struct slot *s = &w->slots[idx];

	job_free(s->job);
	s->job = NULL;
	s->release = 0;
	s->state = SLOT_FREE;
	w->freel[w->n_free++] = idx;
}


static void worker_free(struct worker *w)
{
	int i;

	if (w->slots)
		for (i = 0; i < w->nslots; i++)
			job_free(w->slots[i].job);
	free(w->slots);
	free(w->runq);
	free(w->fin);
	free(w->freel);
	free(w->ack_ids);
	free(w->ack_pos);
	free(w->ack_ok);
	free(w->grouped);
	free(w->threads);
	notify_close(w->nt);
	db_close(w->db);
	metrics_close(w->metrics);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}

/*
 * A turn's transaction failed (r).  A full or failing disk, or a lock held
 * too long, is waited out however long it lasts, with one line per episode,
 * and the wait grows to WORKER_TX_RETRY_CAP_MS; any other error gives up
 * after 50 in a row.  [return] the wait before the next turn, in ms, or -1
 * to give up (the error set).
 */
static int64_t tx_failed(struct worker *w, enum sd_result r, int *errors)
{
	int64_t wait = episode_fail(&w->tx_ep, LOG_ERROR, "queue transaction failed", w->name_kv,
				    err_msg(), WORKER_TX_RETRY_MS, WORKER_TX_RETRY_CAP_MS);

	if (episode_transient(r))
		return wait;
	if (++*errors > 50) {
		err_set(r, "giving up after repeated database errors: %s", err_msg());
		return -1;
	}
	return WORKER_TX_RETRY_MS;
}

enum sd_result worker_run(const struct worker_opts *o, struct worker_stats *stats_out)
{
	struct worker_stats st = { 0 };
	struct worker *w;
	enum sd_result r = SD_OK;
	struct job **claimed = NULL;
	int *pending = NULL, n_pending = 0;
	int *settled = NULL;
	unsigned char *stale = NULL;
	int concurrency = o->concurrency > 0 ? o->concurrency : WORKER_CONCURRENCY_DEFAULT;
	int batch = o->batch > 0 ? o->batch : concurrency;
	int64_t flush_us = (o->flush_ms > 0 ? o->flush_ms : WORKER_FLUSH_MS_DEFAULT) * 1000;
	int64_t grace_ms = o->grace_ms > 0 ? o->grace_ms : WORKER_GRACE_MS_DEFAULT;
	int64_t first_pending_us = 0, stop_deadline_us = 0, next_visible = -1;
	int64_t next_prune_us = 0, last_dv;
	int more_work = 1, stopping = 0, i, abandoned = 0, errors = 0;

	w = calloc(1, sizeof *w);
	if (!w)
		return err_set(SD_NOMEM, "out of memory");
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->o = o;
	w->table = o->handlers ? o->handlers : worker_builtin_handlers;
	if (o->name)
		snprintf(w->name, sizeof w->name, "%s", o->name);
	else
		snprintf(w->name, sizeof w->name, "w%ld.%d", (long)getpid(),
			 atomic_fetch_add(&worker_seq, 1));
	snprintf(w->name_kv, sizeof w->name_kv, "worker=%s", w->name);
	w->nslots = concurrency + batch;
	w->slots = calloc((size_t)w->nslots, sizeof *w->slots);
	w->runq = calloc((size_t)w->nslots, sizeof *w->runq);
	w->fin = calloc((size_t)w->nslots, sizeof *w->fin);
	w->freel = calloc((size_t)w->nslots, sizeof *w->freel);
	w->ack_ids = calloc((size_t)w->nslots, sizeof *w->ack_ids);
	w->ack_pos = calloc((size_t)w->nslots, sizeof *w->ack_pos);
	w->ack_ok = calloc((size_t)w->nslots, 1);
	w->grouped = calloc((size_t)w->nslots, 1);
	w->threads = calloc((size_t)concurrency, sizeof *w->threads);
	claimed = calloc((size_t)batch, sizeof *claimed);
	pending = calloc((size_t)w->nslots, sizeof *pending);
	settled = calloc((size_t)w->nslots, sizeof *settled);
	stale = calloc((size_t)w->nslots, 1);
	if (!w->slots || !w->runq || !w->fin || !w->freel || !w->threads || !claimed || !pending ||
	    !settled || !stale || !w->ack_ids || !w->ack_pos || !w->ack_ok || !w->grouped) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < w->nslots; i++)
		w->freel[w->n_free++] = w->nslots - 1 - i;
	w->wake_at_fin = batch;
	w->avg_run_us = WORKER_CHAIN_MIN_US;	/* chain until we know better */
	if ((r = db_open(o->db_path, 0, o->sync, &w->db)) != SD_OK ||
	    (r = notify_open(o->db_path, &w->nt)) != SD_OK)
		goto out;
	last_dv = db_data_version(w->db);
	/* counters are for /metrics: a worker without them still works */
	if (metrics_open(o->db_path, &w->metrics) != SD_OK)
		log_event(LOG_WARN, "metrics not counted", "worker=%s err=%s", w->name,
			  err_msg());

	{
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, 512 * 1024);
		for (i = 0; i < concurrency; i++) {
			if (pthread_create(&w->threads[i], &attr, handler_thread, w) != 0) {
				pthread_attr_destroy(&attr);
				r = err_set(SD_IO, "cannot start handler thread: %s", strerror(errno));
				goto out_threads;
			}
			w->nthreads++;
		}
		pthread_attr_destroy(&attr);
	}
	log_event(LOG_INFO, "worker started", "worker=%s concurrency=%d batch=%d db=%s", w->name,
		  concurrency, batch, o->db_path);

	for (;;) {
		int64_t now = clock_now_ms(), now_us = clock_mono_us();
		int n_claim = 0, n_got = 0, busy, n_extend = 0, flush, wait_ms;
		int ext_idx[64];

		/* 1. Take what the handlers finished. */
		pthread_mutex_lock(&w->mu);
		for (i = 0; i < w->n_fin; i++) {
			if (n_pending == 0)
				first_pending_us = now_us;
			pending[n_pending++] = w->fin[i];
		}
		w->n_fin = 0;
		atomic_store_explicit(&w->fin_hint, 0, memory_order_relaxed);
		busy = w->running + w->rq_len;
		pthread_mutex_unlock(&w->mu);

		if (!stopping && notify_stop_requested()) {
			stopping = 1;
			stop_deadline_us = now_us + grace_ms * 1000;
			/* jobs claimed but not started go back at once */
			pthread_mutex_lock(&w->mu);
			while (w->rq_len > 0) {
				int idx = w->runq[w->rq_head];
				w->rq_head = (w->rq_head + 1) % w->nslots;
				w->rq_len--;
				w->slots[idx].state = SLOT_FINISHED;
				w->slots[idx].release = 1;
				if (n_pending == 0)
					first_pending_us = now_us;
				pending[n_pending++] = idx;
			}
			busy = w->running;
			atomic_store_explicit(&w->rq_hint, 0, memory_order_relaxed);
			pthread_mutex_unlock(&w->mu);
			log_event(LOG_INFO, "worker stopping", "worker=%s running=%d grace_ms=%lld",
				  w->name, busy, (long long)grace_ms);
		}

		/* 2. Decide this turn's transaction. */
		flush = n_pending > 0 &&
			(n_pending >= batch || busy == 0 || stopping ||
			 now_us - first_pending_us >= flush_us);
		/* Claim only together with a flush, or when nothing waits for one:
		 * a claim of its own would cost a commit that the flush can carry. */
		if (!stopping && more_work && busy < concurrency && (flush || n_pending == 0))
			n_claim = concurrency - busy < batch ? concurrency - busy : batch;
		for (i = 0; i < w->nslots && n_extend < 64; i++) {
			struct slot *s = &w->slots[i];
			if ((s->state == SLOT_RUNNING || s->state == SLOT_QUEUED) && now >= s->extend_at)
				ext_idx[n_extend++] = i;
		}

		if (flush || n_claim > 0 || n_extend > 0) {
			int n_settled = 0;

			r = db_begin(w->db);
			for (i = 0; r == SD_OK && i < n_extend; i++) {
				struct slot *s = &w->slots[ext_idx[i]];
				int64_t until;
				enum sd_result er = queue_extend(w->db, s->job->id, s->job->lease_token,
								 s->lease_ms, &until);
				if (er == SD_OK) {
					s->extend_at = until - s->lease_ms / 2;
					st.extended++;
				} else if (er == SD_STALE) {
					/* reclaimed elsewhere: the handler runs on; its
					 * result will be refused as stale */
					s->extend_at = INT64_MAX;
					log_event(LOG_WARN, "lease expired under a live worker",
						  "worker=%s job_id=%s kind=%s delivery=%lld",
						  w->name, s->job->job_id, s->job->kind,
						  (long long)s->job->deliveries);
				} else {
					r = er;
				}
			}
			if (r == SD_OK && flush) {
				r = settle_all(w, pending, n_pending, &st, stale);
				for (i = 0; i < n_pending; i++)
					settled[n_settled++] = pending[i];
			}
			if (r == SD_OK && n_claim > 0) {
				r = queue_claim(w->db, w->name, n_claim, o->lease_ms, claimed, &n_got);
			}
			if (r == SD_OK) {
				r = db_commit(w->db);
				if (r != SD_OK) {
					for (i = 0; i < n_got; i++)
						job_free(claimed[i]);
					n_got = 0;
				}
			} else {
				db_rollback(w->db);
			}
			if (r != SD_OK) {
				/* Nothing of this turn happened; results stay pending. */
				int64_t wait = tx_failed(w, r, &errors);

				if (wait < 0)
					goto out_stop;
				notify_pause(w->nt, (int)wait);
				continue;
			}
			errors = 0;
			episode_end(&w->tx_ep, "queue transactions succeed again", w->name_kv);
			if (flush) {
				for (i = 0; i < n_settled; i++) {
					if (!stale[i])
						log_settled(w, &w->slots[settled[i]]);
					slot_clear(w, settled[i]);
				}
				n_pending = 0;
				if (w->o->progress)
					w->o->progress(w->o->progress_arg, &st);
			}
			if (n_claim > 0) {
				st.claimed += n_got;
				if (n_got < n_claim)
					more_work = 0;
				if (n_got > 0) {
					pthread_mutex_lock(&w->mu);
					for (i = 0; i < n_got; i++) {
						int idx = w->freel[--w->n_free];
						struct slot *s = &w->slots[idx];
						s->job = claimed[i];
						s->state = SLOT_QUEUED;
						s->lease_ms = lease_for(w, claimed[i]);
						s->extend_at = claimed[i]->lease_until - s->lease_ms / 2;
						w->runq[(w->rq_head + w->rq_len) % w->nslots] = idx;
						w->rq_len++;
					}
					w->progress_us = clock_mono_us();
					atomic_store_explicit(&w->rq_hint, w->rq_len, memory_order_relaxed);
					atomic_store_explicit(&w->busy_hint, w->running + w->rq_len,
							      memory_order_relaxed);
					if (w->idle > 0)
						pthread_cond_signal(&w->cv);
					pthread_mutex_unlock(&w->mu);
				}
			}
			if (n_claim > 0 && n_got == 0 && !stopping) {
				r = queue_next_visible(w->db, &next_visible);
				if (r != SD_OK)
					next_visible = -1;
				r = SD_OK;
			}
			continue;	/* look again before sleeping */
		}

		/* 3. Nothing to write this turn: stop, drain, prune, or sleep. */
		if (stopping) {
			if (busy == 0 && n_pending == 0)
				break;
			if (now_us >= stop_deadline_us) {
				abandoned = 1;
				break;
			}
		}
		if (!stopping && busy == 0 && n_pending == 0 && !more_work) {
			if (o->drain) {
				int64_t left = 0;
				if ((r = queue_pending(w->db, &left)) != SD_OK)
					goto out_stop;
				if (left == 0)
					break;
			}
			if (o->retention_ms > 0 && now_us >= next_prune_us) {
				int64_t pruned = 0;
				if (queue_prune_done(w->db, o->retention_ms, 1000, &pruned) == SD_OK &&
				    pruned > 0)
					log_event(LOG_INFO, "pruned finished jobs", "worker=%s n=%lld",
						  w->name, (long long)pruned);
				next_prune_us = now_us + (pruned == 1000 ? 0 : 60LL * 1000000);
				if (pruned == 1000)
					continue;
			}
		}

		/* 4. Sleep until something can happen. */
		wait_ms = 1000;
		if (busy > 0 && wait_ms > flush_us / 1000)
			wait_ms = (int)(flush_us / 1000) > 0 ? (int)(flush_us / 1000) : 1;
		if (n_pending > 0) {
			int64_t due = (first_pending_us + flush_us - now_us) / 1000;
			wait_ms = due < 1 ? 1 : (int)due;
		}
		for (i = 0; i < w->nslots; i++) {
			struct slot *s = &w->slots[i];
			if ((s->state == SLOT_RUNNING || s->state == SLOT_QUEUED) &&
			    s->extend_at != INT64_MAX && s->extend_at - now < wait_ms)
				wait_ms = s->extend_at - now < 1 ? 1 : (int)(s->extend_at - now);
		}
		if (!more_work && next_visible >= 0 && next_visible - now < wait_ms)
			wait_ms = next_visible - now < 1 ? 1 : (int)(next_visible - now);
		if (stopping) {
			int64_t left = (stop_deadline_us - now_us) / 1000 + 1;
			if (left < wait_ms)
				wait_ms = (int)left;
		}
		pthread_mutex_lock(&w->mu);
		if (w->n_fin > 0) {
			pthread_mutex_unlock(&w->mu);
			continue;	/* results arrived meanwhile: collect them */
		}
		if (w->rq_len > 0 && w->idle > 0) {
			/* jobs wait while threads idle: the running ones did not
			 * chain (short jobs so far).  When the run queue has not
			 * moved for 1 ms (a long job among short ones), wake every
			 * idle thread; look again in 1 ms. */
			if (clock_mono_us() - w->progress_us >= 1000)
				pthread_cond_broadcast(&w->cv);
			wait_ms = 1;
		}
		/* handlers wake the loop when a batch of results is full or every
		 * thread is idle; a lone result among long jobs waits for the
		 * next tick (flush_ms, below), so a batch of short jobs costs one
		 * wake-up, not one per job */
		w->loop_waiting = 1;
		w->wake_at_fin = batch - n_pending;
		if (w->wake_at_fin < 1)
			w->wake_at_fin = 1;
		if (busy > 0 && w->avg_run_us < WORKER_SPIN_JOB_US &&
		    clock_mono_us() - w->progress_us < 2 * WORKER_SPIN_US) {
			/* short jobs running, one just started: its result is
			 * microseconds away.  A long job among short ones stops
			 * the spinning after one round: the loop then sleeps. */
			int want = w->wake_at_fin;
			int64_t until = clock_mono_us() + WORKER_SPIN_US;

			w->loop_waiting = 0;
			pthread_mutex_unlock(&w->mu);
			while (atomic_load_explicit(&w->fin_hint, memory_order_relaxed) < want &&
			       atomic_load_explicit(&w->busy_hint, memory_order_relaxed) > 0 &&
			       clock_mono_us() < until)
				cpu_relax();
			continue;
		}
		pthread_mutex_unlock(&w->mu);
		if (notify_wait(w->nt, wait_ms)) {
			/* Woken: by a handler, by a commit in this process, or by a
			 * write to the WAL.  data_version tells another connection's
			 * commit from our own; it only matters while we believe the
			 * stream has nothing for us. */
			if (!more_work) {
				int64_t dv = db_data_version(w->db);
				if (dv != last_dv || busy == 0) {
					last_dv = dv;
					more_work = 1;
				}
			}
		} else if (!more_work && next_visible >= 0 && clock_now_ms() >= next_visible) {
			more_work = 1;
		} else if (!more_work && wait_ms >= 1000) {
			more_work = 1;	/* the safety net: look at least once a second */
		}
		pthread_mutex_lock(&w->mu);
		w->loop_waiting = 0;
		pthread_mutex_unlock(&w->mu);
	}

out_stop:
	/* Give back every lease still held: jobs not started at once, running
	 * ones only when the grace period ran out (their handlers are
	 * abandoned).  Results that came in are recorded first. */
	{
		pthread_mutex_lock(&w->mu);
		w->quit = 1;
		while (w->rq_len > 0) {
			int idx = w->runq[w->rq_head];
			w->rq_head = (w->rq_head + 1) % w->nslots;
			w->rq_len--;
			w->slots[idx].state = SLOT_FINISHED;
			w->slots[idx].release = 1;
			pending[n_pending++] = idx;
		}
		for (i = 0; i < w->n_fin; i++)
			pending[n_pending++] = w->fin[i];
		w->n_fin = 0;
		for (i = 0; i < w->nslots; i++) {
			if (w->slots[i].state == SLOT_RUNNING) {
				w->slots[i].release = 1;
				pending[n_pending++] = i;
			}
		}
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		if (n_pending > 0 && db_begin(w->db) == SD_OK) {
			enum sd_result sr = SD_OK;
			sr = settle_all(w, pending, n_pending, &st, stale);
			if (sr == SD_OK)
				sr = db_commit(w->db);
			else
				db_rollback(w->db);
			if (sr != SD_OK)
				log_event(LOG_ERROR, "could not record the last results; their leases "
					  "will expire", "worker=%s", w->name);
		}
		log_event(LOG_INFO, "worker stopped",
			  "worker=%s done=%lld failed=%lld dead=%lld snoozed=%lld stale=%lld "
			  "released=%lld abandoned=%d", w->name, (long long)st.done,
			  (long long)st.failed, (long long)st.dead, (long long)st.snoozed,
			  (long long)st.stale, (long long)st.released, abandoned);
	}
out_threads:
	pthread_mutex_lock(&w->mu);
	w->quit = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (abandoned) {
		/* Handlers past the grace period still hold pointers into w: leave
		 * them and their memory to the process exit. */
		for (i = 0; i < w->nthreads; i++)
			pthread_detach(w->threads[i]);
		if (stats_out)
			*stats_out = st;
		free(claimed);
		free(pending);
		free(settled);
		free(stale);
		return r == SD_OK ? SD_TIMEOUT : r;
	}
	for (i = 0; i < w->nthreads; i++)
		pthread_join(w->threads[i], NULL);
out:
	if (stats_out)
		*stats_out = st;
	free(claimed);
	free(pending);
	free(settled);
	free(stale);
	worker_free(w);
	return r;
}
