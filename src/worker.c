/*
 * worker.c: the claim loop, the handler pool, leases, graceful stop.
 *
 * Threads:
 *   loop     owns the queue connection and turns, one phase after another:
 *              collect    take the results the handlers finished
 *                         (loop_collect; on a stop request loop_begin_stop)
 *              commit     one transaction that extends leases that are half
 *                         used, records the finished jobs' results (ack,
 *                         retry_later, fail) and claims as many entries as
 *                         there are free handler threads (loop_commit:
 *                         loop_extend, settle_all, loop_claim); a failed one
 *                         is tried again after a wait (tx_failed)
 *              dispatch   hand the claimed jobs to the handler threads
 *                         (loop_dispatch)
 *              wait       with nothing to write, stop, drain or prune
 *                         (loop_idle), else spin or sleep in notify_wait()
 *                         until a handler finishes, work arrives, a lease
 *                         needs extending or a pending commit is due
 *                         (loop_wait)
 *              shut down  record what came in, give back every lease still
 *                         held (loop_shut_down)
 *   handler  threads take claimed jobs from the run queue and run them.  A
 *            handler thread that finds more jobs waiting wakes one more
 *            idle thread (a chain), so a batch of short jobs costs a few
 *            wake-ups, not one per job.
 *
 * A slot holds one claimed job from its claim to the commit of its result:
 *
 *     FREE       no job (its index in freel)
 *     QUEUED     claimed, in runq, waiting for a handler thread
 *     RUNNING    a handler thread runs it
 *     FINISHED   its outcome set, or marked release (give the lease back):
 *                in fin[] until the loop collects it, then in the loop's
 *                pending results until a commit records it
 *
 * Transitions, and the function that makes each:
 *
 *     FREE --loop_dispatch--> QUEUED          (claimed in the turn's
 *                                              transaction; in runq)
 *     QUEUED --handler_thread--> RUNNING      (run_one: the handler runs, no
 *                                              transaction open)
 *     RUNNING --handler_thread--> FINISHED    (its outcome set; in fin[])
 *     FINISHED --loop_collect--> FINISHED     (in the loop's pending results)
 *     FINISHED --loop_commit--> FINISHED      (the transaction failed: the
 *                                              result stays pending, tried
 *                                              again after tx_failed's wait)
 *     FINISHED --loop_commit, loop_settled--> FREE
 *                                             (ack, retry_later or fail
 *                                              committed, or refused as stale
 *                                              and not logged; slot_clear)
 *     QUEUED --loop_begin_stop--> FINISHED    (stopping: release, not run;
 *                                              the next commit gives the lease
 *                                              back)
 *     QUEUED | RUNNING --loop_shut_down--> (released)
 *                                             (the last transaction gives
 *                                              the lease back; a running
 *                                              handler past the grace period
 *                                              is abandoned)
 *     QUEUED | RUNNING --loop_extend--> same  (lease half used: pushed on; a
 *                                              lost lease is never extended
 *                                              again, and its result is
 *                                              refused as stale)
 *
 * Invariants (all under w->mu):
 *   - a slot is FREE, QUEUED (in runq), RUNNING or FINISHED (in fin[], or in
 *     the loop's pending results);
 *   - queued + running <= concurrency, so a claim asks for at most the free
 *     handler threads and no claimed entry waits long for a thread;
 *   - only the loop thread touches the database through w->db and moves a
 *     slot from FINISHED back to FREE.
 */
#define _GNU_SOURCE
#include "worker.h"

#include <assert.h>
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
#include "controls.h"
#include "db.h"
#include "episode.h"
#include "failpoint.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "text.h"

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

/* A handler thread's context: the one handlers see, and its worker. */
struct thread_ctx {
	struct handler_ctx h;		/* first: what the handler gets */
	struct worker *w;
};

struct worker {
	const struct worker_opts *o;
	char name[64];
	char name_kv[72];		/* "worker=<name>", for log lines */
	char holder[CONTROLS_BOX_MAX + 72];	/* box/name: its leases' leased_by, so a
						 * box's leases are told apart from
						 * another's (controls.h) */
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

static void run_one(struct thread_ctx *ctx, struct slot *s)
{
	struct worker *w = ctx->w;
	const struct handler *h = handler_find(w->table, s->job->kind);

	if (!h)	/* the built-in kinds are always there */
		h = handler_find(worker_builtin_handlers, s->job->kind);

	s->res.delay_ms = 0;
	s->res.error[0] = '\0';
	s->res.io = 0;
	if (w->o->on_start)
		w->o->on_start(s->job, w->o->arg);
	s->started_us = clock_mono_us();
	if (!h)
		s->outcome = job_failf(&s->res, 1, "no handler for kind '%s'", s->job->kind);
	else
		s->outcome = h->fn(&ctx->h, s->job, &s->res);
	s->duration_us = clock_mono_us() - s->started_us;
	metrics_run(w->metrics, s->job->kind, outcome_metric(s->outcome), s->duration_us);
	failpoint(FAILPOINT_JOB_DONE);	/* the work is done; the ack is not */
}

static void *handler_thread(void *arg)
{
	struct worker *w = arg;
	struct thread_ctx ctx = { .h = { .db_path = w->o->db_path, .worker = w->name,
					 .app = w->o->app, .metrics = w->metrics },
				  .w = w };

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
		assert(s->state == SLOT_QUEUED);
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
		assert(s->state == SLOT_RUNNING && w->running > 0);
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
	handler_ctx_close(&ctx.h);
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

/* ======================== the loop's state ============================== */

/* The loop's own state across turns: the loop thread's alone, on its stack,
 * away from the cache lines the handler threads write. */
struct loop {
	struct worker *w;
	struct worker_stats st;		/* the counts so far */
	int concurrency;		/* handler threads */
	int batch;			/* most entries per claim, results per commit */
	int64_t flush_us;		/* longest a result waits for its commit */
	int64_t grace_ms;		/* on stop: how long running handlers may finish */
	struct job **claimed;		/* the turn's claim, batch entries */
	int *pending;			/* FINISHED slots waiting for their commit */
	int n_pending;
	int64_t first_pending_us;	/* when the oldest of them was collected */
	unsigned char *stale;		/* per pending slot: its lease had been lost */
	int more_work;			/* the stream may hold visible entries */
	int64_t next_visible;		/* the next entry's visible_at; -1: unknown */
	int64_t control_wake;		/* a controlled lane's next chance; -1: none */
	int64_t next_prune_us;		/* when to prune finished jobs again */
	int64_t last_dv;		/* db_data_version when last looked at */
	int stopping;			/* a stop was asked for: claim no more */
	int64_t stop_deadline_us;	/* ... and the grace period ends then */
	int abandoned;			/* handlers outlived the grace period */
	int errors;			/* failed transactions in a row, other than
					 * the transient ones */
};

/* What one turn saw and decided. */
struct turn {
	int64_t now;			/* clock_now_ms() at its start */
	int64_t now_us;			/* clock_mono_us() likewise */
	int busy;			/* jobs queued or running */
	int flush;			/* commit the pending results */
	int n_claim;			/* entries to claim */
	int n_got;			/* entries the claim returned */
	int n_extend;
	int ext_idx[64];		/* slots whose leases to extend */
};

/* Add the FINISHED slot idx to the results waiting for a commit; the first
 * one marks when the wait began (first_pending_us). */
static void loop_pend(struct loop *l, int idx, int64_t now_us)
{
	if (l->n_pending == 0)
		l->first_pending_us = now_us;
	l->pending[l->n_pending++] = idx;
}

/* Take the job at the head of the run queue back before it runs: FINISHED,
 * to be released at the next commit.  Called with w->mu held. */
static int runq_take_back(struct worker *w)
{
	int idx = w->runq[w->rq_head];

	w->rq_head = (w->rq_head + 1) % w->nslots;
	w->rq_len--;
	w->slots[idx].state = SLOT_FINISHED;
	w->slots[idx].release = 1;
	return idx;
}

/* ======================== collect ======================================= */

/* Take what the handlers finished (fin[]) into the loop's pending results. */
static void loop_collect(struct loop *l, struct turn *t)
{
	struct worker *w = l->w;
	int i;

	t->now = clock_now_ms();
	t->now_us = clock_mono_us();
	pthread_mutex_lock(&w->mu);
	for (i = 0; i < w->n_fin; i++)
		loop_pend(l, w->fin[i], t->now_us);
	w->n_fin = 0;
	atomic_store_explicit(&w->fin_hint, 0, memory_order_relaxed);
	t->busy = w->running + w->rq_len;
	pthread_mutex_unlock(&w->mu);
}

/* The first turn after a stop request: claim no more, give the jobs claimed
 * but not started back at once, and let the running ones finish within the
 * grace period. */
static void loop_begin_stop(struct loop *l, struct turn *t)
{
	struct worker *w = l->w;

	l->stopping = 1;
	l->stop_deadline_us = t->now_us + l->grace_ms * 1000;
	pthread_mutex_lock(&w->mu);
	while (w->rq_len > 0)
		loop_pend(l, runq_take_back(w), t->now_us);
	t->busy = w->running;
	atomic_store_explicit(&w->rq_hint, 0, memory_order_relaxed);
	pthread_mutex_unlock(&w->mu);
	log_event(LOG_INFO, "worker stopping", "worker=%s running=%d grace_ms=%lld", w->name,
		  t->busy, (long long)l->grace_ms);
}

/* Decide this turn's transaction: flush the pending results (a full batch,
 * nothing left running, stopping, or the oldest waited flush_ms), claim,
 * extend the leases that are half used. */
static void loop_plan(struct loop *l, struct turn *t)
{
	struct worker *w = l->w;
	int i;

	t->flush = l->n_pending > 0 &&
		   (l->n_pending >= l->batch || t->busy == 0 || l->stopping ||
		    t->now_us - l->first_pending_us >= l->flush_us);
	/* Claim only together with a flush, or when nothing waits for one:
	 * a claim of its own would cost a commit that the flush can carry. */
	t->n_claim = 0;
	if (!l->stopping && l->more_work && t->busy < l->concurrency &&
	    (t->flush || l->n_pending == 0))
		t->n_claim = l->concurrency - t->busy < l->batch ? l->concurrency - t->busy
								 : l->batch;
	t->n_got = 0;
	t->n_extend = 0;
	for (i = 0; i < w->nslots && t->n_extend < 64; i++) {
		struct slot *s = &w->slots[i];
		if ((s->state == SLOT_RUNNING || s->state == SLOT_QUEUED) && t->now >= s->extend_at)
			t->ext_idx[t->n_extend++] = i;
	}
}

/* ======================== commit the turn ============================== */

/* Inside the turn's transaction: push on the leases that are half used.  A
 * lease already lost is not an error: the handler runs on, and its result
 * will be refused as stale. */
static enum sd_result loop_extend(struct loop *l, struct turn *t)
{
	struct worker *w = l->w;
	int i;

	for (i = 0; i < t->n_extend; i++) {
		struct slot *s = &w->slots[t->ext_idx[i]];
		int64_t until;
		enum sd_result r = queue_extend(w->db, s->job->id, s->job->lease_token, s->lease_ms,
						&until);

		if (r == SD_OK) {
			s->extend_at = until - s->lease_ms / 2;
			l->st.extended++;
		} else if (r == SD_STALE) {
			s->extend_at = INT64_MAX;
			log_event(LOG_WARN, "lease expired under a live worker",
				  "worker=%s job_id=%s kind=%s delivery=%lld", w->name,
				  s->job->job_id, s->job->kind, (long long)s->job->deliveries);
		} else {
			return r;
		}
	}
	return SD_OK;
}

/* Inside the turn's transaction: as many entries as there are free handler
 * threads, at most a batch, into l->claimed. */
static enum sd_result loop_claim(struct loop *l, struct turn *t)
{
	struct worker *w = l->w;
	enum sd_result r;
	int got = 0, more = 0, i;

	/* the controlled kinds' lanes first, each as far as its control lets
	 * it (controls.h), then lane 0 for the rest */
	if ((r = controls_claim(w->db, w->holder, t->n_claim, w->o->lease_ms, l->claimed, &got,
				&l->control_wake)) != SD_OK)
		return r;
	if (got < t->n_claim &&
	    (r = queue_claim(w->db, w->holder, t->n_claim - got, w->o->lease_ms, l->claimed + got,
			     &more)) != SD_OK) {
		for (i = 0; i < got; i++) {
			job_free(l->claimed[i]);
			l->claimed[i] = NULL;
		}
		return r;
	}
	t->n_got = got + more;
	return SD_OK;
}

/*
 * The turn's one transaction: extend, record the pending results (when
 * flushing), claim.  On failure nothing of it happened: the results stay
 * pending and nothing is claimed.
 */
static enum sd_result loop_commit(struct loop *l, struct turn *t)
{
	struct worker *w = l->w;
	enum sd_result r = db_begin(w->db);
	int i;

	if (r == SD_OK)
		r = loop_extend(l, t);
	if (r == SD_OK && t->flush)
		r = settle_all(w, l->pending, l->n_pending, &l->st, l->stale);
	if (r == SD_OK && t->n_claim > 0)
		r = loop_claim(l, t);
	if (r != SD_OK) {
		db_rollback(w->db);
		return r;
	}
	r = db_commit(w->db);
	if (r != SD_OK) {
		for (i = 0; i < t->n_got; i++)
			job_free(l->claimed[i]);
		t->n_got = 0;
	}
	return r;
}

/* After the commit: log what it recorded (not the stale results), free
 * their slots, tell the caller the counts. */
static void loop_settled(struct loop *l)
{
	struct worker *w = l->w;
	int i;

	for (i = 0; i < l->n_pending; i++) {
		if (!l->stale[i])
			log_settled(w, &w->slots[l->pending[i]]);
		slot_clear(w, l->pending[i]);
	}
	l->n_pending = 0;
	if (w->o->progress)
		w->o->progress(w->o->progress_arg, &l->st);
}

/* ======================== dispatch ====================================== */

/* Hand the entries the turn claimed to the handler threads: FREE slots
 * become QUEUED, their first extension due when half the lease is used. */
static void loop_dispatch(struct loop *l, const struct turn *t)
{
	struct worker *w = l->w;
	int i;

	pthread_mutex_lock(&w->mu);
	for (i = 0; i < t->n_got; i++) {
		int idx;
		struct slot *s;

		assert(w->n_free > 0);	/* room for every claimed entry: nslots */
		idx = w->freel[--w->n_free];
		s = &w->slots[idx];
		assert(s->state == SLOT_FREE);
		s->job = l->claimed[i];
		s->state = SLOT_QUEUED;
		s->lease_ms = lease_for(w, l->claimed[i]);
		s->extend_at = l->claimed[i]->lease_until - s->lease_ms / 2;
		w->runq[(w->rq_head + w->rq_len) % w->nslots] = idx;
		w->rq_len++;
	}
	/* a claim asks for the free handler threads only (the header's
	 * invariant): no claimed entry waits long for a thread */
	assert(w->running + w->rq_len <= l->concurrency);
	w->progress_us = clock_mono_us();
	atomic_store_explicit(&w->rq_hint, w->rq_len, memory_order_relaxed);
	atomic_store_explicit(&w->busy_hint, w->running + w->rq_len, memory_order_relaxed);
	if (w->idle > 0)
		pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

/* The turn committed: the transaction episode ends, the results are logged,
 * the claim is dispatched.  A claim short of what it asked for means the
 * stream has nothing more visible now; when it got nothing, the loop learns
 * when the next entry becomes visible, to wait until then. */
static void loop_committed(struct loop *l, struct turn *t)
{
	struct worker *w = l->w;

	l->errors = 0;
	episode_end(&w->tx_ep, "queue transactions succeed again", w->name_kv);
	if (t->flush)
		loop_settled(l);
	if (t->n_claim == 0)
		return;
	l->st.claimed += t->n_got;
	if (t->n_got < t->n_claim) {
		l->more_work = 0;
		/* a controlled lane held back: when it may let one through */
		l->next_visible = l->control_wake;
	}
	if (t->n_got > 0)
		loop_dispatch(l, t);
	if (t->n_got == 0 && !l->stopping) {
		int64_t at;
		if (queue_next_visible(w->db, &at) != SD_OK)
			l->next_visible = -1;
		else if (at >= 0 && (l->next_visible < 0 || at < l->next_visible))
			l->next_visible = at;
	}
}

/* ======================== nothing to write: stop, drain, prune =========== */

enum idle {
	IDLE_WAIT,	/* wait for something to happen */
	IDLE_AGAIN,	/* turn again at once */
	IDLE_END,	/* the loop ends */
};

/* Prune one batch of finished jobs older than retention_ms; 1 when the batch
 * was full (more may be due: prune again at once). */
static int loop_prune(struct loop *l, const struct turn *t)
{
	struct worker *w = l->w;
	int64_t pruned = 0;

	if (queue_prune_done(w->db, w->o->retention_ms, 1000, &pruned) == SD_OK && pruned > 0)
		log_event(LOG_INFO, "pruned finished jobs", "worker=%s n=%lld", w->name,
			  (long long)pruned);
	l->next_prune_us = t->now_us + (pruned == 1000 ? 0 : 60LL * 1000000);
	return pruned == 1000;
}

/*
 * A turn with nothing to write.  Stopping: end once nothing runs or waits
 * for a commit, or when the grace period is over (handlers abandoned).
 * Idle: with drain, end when the stream holds nothing due within
 * WORKER_DRAIN_HORIZON_MS ([out] *r: the count's
 * result, which ends the loop too when it fails); prune when due.
 */
static enum idle loop_idle(struct loop *l, const struct turn *t, enum sd_result *r)
{
	struct worker *w = l->w;

	if (l->stopping) {
		if (t->busy == 0 && l->n_pending == 0)
			return IDLE_END;
		if (t->now_us >= l->stop_deadline_us) {
			l->abandoned = 1;
			return IDLE_END;
		}
		return IDLE_WAIT;
	}
	if (t->busy > 0 || l->n_pending > 0 || l->more_work)
		return IDLE_WAIT;
	if (w->o->drain) {
		int64_t left = 0;

		/* a job scheduled further ahead (a reminder days before its
		 * event) is for the workers that run all along, not a drain's */
		if ((*r = queue_pending_due(w->db, clock_now_ms() + WORKER_DRAIN_HORIZON_MS,
					    &left)) != SD_OK || left == 0)
			return IDLE_END;
	}
	if (w->o->retention_ms > 0 && t->now_us >= l->next_prune_us && loop_prune(l, t))
		return IDLE_AGAIN;
	return IDLE_WAIT;
}

/* ======================== wait ========================================== */

/* How long the loop may sleep: until a pending result is due for its
 * commit, a lease needs extending, the next entry becomes visible, or the
 * grace period ends; at most a second, at most flush_ms while jobs run. */
static int loop_wait_ms(const struct loop *l, const struct turn *t)
{
	const struct worker *w = l->w;
	int wait_ms = 1000, i;

	if (t->busy > 0 && wait_ms > l->flush_us / 1000)
		wait_ms = (int)(l->flush_us / 1000) > 0 ? (int)(l->flush_us / 1000) : 1;
	if (l->n_pending > 0) {
		int64_t due = (l->first_pending_us + l->flush_us - t->now_us) / 1000;
		wait_ms = due < 1 ? 1 : (int)due;
	}
	for (i = 0; i < w->nslots; i++) {
		const struct slot *s = &w->slots[i];
		if ((s->state == SLOT_RUNNING || s->state == SLOT_QUEUED) &&
		    s->extend_at != INT64_MAX && s->extend_at - t->now < wait_ms)
			wait_ms = s->extend_at - t->now < 1 ? 1 : (int)(s->extend_at - t->now);
	}
	if (!l->more_work && l->next_visible >= 0 && l->next_visible - t->now < wait_ms)
		wait_ms = l->next_visible - t->now < 1 ? 1 : (int)(l->next_visible - t->now);
	if (l->stopping) {
		int64_t left = (l->stop_deadline_us - t->now_us) / 1000 + 1;
		if (left < wait_ms)
			wait_ms = (int)left;
	}
	return wait_ms;
}

/* Woken (1) or timed out (0) after wait_ms: does the stream have work for
 * us again?  Only matters while we believe it has none. */
static void loop_woken(struct loop *l, const struct turn *t, int woken, int wait_ms)
{
	if (l->more_work)
		return;
	if (woken) {
		/* by a handler, by a commit in this process, or by a write to
		 * the WAL: data_version tells another connection's commit from
		 * our own (PostgreSQL has none: a NOTIFY woke us, look) */
		int64_t dv = db_data_version(l->w->db);
		if (dv < 0 || dv != l->last_dv || t->busy == 0) {
			l->last_dv = dv;
			l->more_work = 1;
		}
	} else if (l->next_visible >= 0 && clock_now_ms() >= l->next_visible) {
		l->more_work = 1;
	} else if (wait_ms >= 1000) {
		l->more_work = 1;	/* the safety net: look at least once a second */
	}
}

/*
 * Wait until something can happen: not at all when results arrived
 * meanwhile; spinning briefly when short jobs run and a result is
 * microseconds away; else asleep in notify_wait, woken by the handlers
 * (a full batch of results, or every thread idle), a commit, or the clock.
 */
static void loop_wait(struct loop *l, const struct turn *t)
{
	struct worker *w = l->w;
	int wait_ms = loop_wait_ms(l, t);

	pthread_mutex_lock(&w->mu);
	if (w->n_fin > 0) {
		pthread_mutex_unlock(&w->mu);
		return;		/* results arrived meanwhile: collect them */
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
	 * next tick (flush_ms, above), so a batch of short jobs costs one
	 * wake-up, not one per job */
	w->loop_waiting = 1;
	w->wake_at_fin = l->batch - l->n_pending;
	if (w->wake_at_fin < 1)
		w->wake_at_fin = 1;
	if (t->busy > 0 && w->avg_run_us < WORKER_SPIN_JOB_US &&
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
		return;
	}
	pthread_mutex_unlock(&w->mu);
	loop_woken(l, t, notify_wait(w->nt, wait_ms), wait_ms);
	pthread_mutex_lock(&w->mu);
	w->loop_waiting = 0;
	pthread_mutex_unlock(&w->mu);
}

/* ======================== the loop ====================================== */

/*
 * tx_pause: wait out a failed transaction's backoff.  A stop asked for
 * meanwhile cuts it short once (the stop's grace period then starts), and
 * a stopping loop waits no later than that period's end; never less: a
 * disk that refuses every write must not spin the loop.
 */
static void tx_pause(struct loop *l, int64_t wait_ms)
{
	int64_t until = clock_mono_us() + wait_ms * 1000, left;
	int stopping = l->stopping;

	if (stopping && l->stop_deadline_us < until)
		until = l->stop_deadline_us;
	while ((left = (until - clock_mono_us()) / 1000) > 0) {
		if (!stopping && notify_stop_requested())
			return;
		notify_wait(l->w->nt, (int)(left < 100 ? left : 100));
	}
}

/* tx_gives_up: a stopping loop whose commit failed at the grace period's
 * end returns without its last results: their leases expire by themselves
 * and the jobs run again (at least once), nothing is lost. */
static int tx_gives_up(struct loop *l)
{
	if (!l->stopping || clock_mono_us() < l->stop_deadline_us)
		return 0;
	log_event(LOG_ERROR, "worker stopping without recording its last results: the "
		  "database refuses writes; their leases expire", "worker=%s results=%d",
		  l->w->name, l->n_pending);
	return 1;
}

/*
 * Turn after turn: collect, then either commit the turn (extend, record,
 * claim) and dispatch its claim, or, with nothing to write, stop, drain,
 * prune or wait.  A failed transaction is tried again (tx_failed).  Returns
 * when stopped, drained or given up, with the last turn's result.
 */
static enum sd_result loop_run(struct loop *l)
{
	enum sd_result r = SD_OK;

	for (;;) {
		struct turn t;
		int64_t wait;

		loop_collect(l, &t);
		if (!l->stopping && notify_stop_requested())
			loop_begin_stop(l, &t);
		loop_plan(l, &t);
		if (t.flush || t.n_claim > 0 || t.n_extend > 0) {
			if ((r = loop_commit(l, &t)) == SD_OK) {
				loop_committed(l, &t);
				continue;	/* look again before sleeping */
			}
			/* Nothing of this turn happened; results stay pending. */
			if ((wait = tx_failed(l->w, r, &l->errors)) < 0 || tx_gives_up(l))
				return r;
			tx_pause(l, wait);
			continue;
		}
		switch (loop_idle(l, &t, &r)) {
		case IDLE_END:
			return r;
		case IDLE_AGAIN:
			continue;
		case IDLE_WAIT:
			break;
		}
		loop_wait(l, &t);
	}
}

/* ======================== shut down ===================================== */

/*
 * Give back every lease still held: jobs not started at once, running ones
 * only when the grace period ran out (their handlers are abandoned).
 * Results that came in are recorded first, in one last transaction.
 */
static void loop_shut_down(struct loop *l)
{
	struct worker *w = l->w;
	const struct worker_stats *st = &l->st;
	int i;

	pthread_mutex_lock(&w->mu);
	w->quit = 1;
	while (w->rq_len > 0)
		l->pending[l->n_pending++] = runq_take_back(w);
	for (i = 0; i < w->n_fin; i++)
		l->pending[l->n_pending++] = w->fin[i];
	w->n_fin = 0;
	for (i = 0; i < w->nslots; i++) {
		if (w->slots[i].state == SLOT_RUNNING) {
			w->slots[i].release = 1;
			l->pending[l->n_pending++] = i;
		}
	}
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (l->n_pending > 0 && db_begin(w->db) == SD_OK) {
		enum sd_result r = settle_all(w, l->pending, l->n_pending, &l->st, l->stale);

		if (r == SD_OK)
			r = db_commit(w->db);
		else
			db_rollback(w->db);
		if (r != SD_OK)
			log_event(LOG_ERROR, "could not record the last results; their leases "
				  "will expire", "worker=%s", w->name);
	}
	log_event(LOG_INFO, "worker stopped",
		  "worker=%s done=%lld failed=%lld dead=%lld snoozed=%lld stale=%lld "
		  "released=%lld abandoned=%d", w->name, (long long)st->done,
		  (long long)st->failed, (long long)st->dead, (long long)st->snoozed,
		  (long long)st->stale, (long long)st->released, l->abandoned);
}

/* ======================== start and end ================================= */

/* Fill the worker l->w (zeroed, its lock not yet made) and the loop's state
 * from o: slots and queues, the loop's connection, wake-ups, counters. */
static enum sd_result worker_open(struct loop *l, const struct worker_opts *o)
{
	struct worker *w = l->w;
	enum sd_result r;
	size_t n;
	int i;

	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	l->concurrency = o->concurrency > 0 ? o->concurrency : WORKER_CONCURRENCY_DEFAULT;
	l->batch = o->batch > 0 ? o->batch : l->concurrency;
	l->flush_us = (o->flush_ms > 0 ? o->flush_ms : WORKER_FLUSH_MS_DEFAULT) * 1000;
	l->grace_ms = o->grace_ms > 0 ? o->grace_ms : WORKER_GRACE_MS_DEFAULT;
	l->next_visible = -1;
	l->control_wake = -1;
	l->more_work = 1;
	w->o = o;
	w->table = o->handlers ? o->handlers : worker_builtin_handlers;
	if (o->name)
		snprintf(w->name, sizeof w->name, "%s", o->name);
	else
		snprintf(w->name, sizeof w->name, "w%ld.%d", (long)getpid(),
			 atomic_fetch_add(&worker_seq, 1));
	snprintf(w->holder, sizeof w->holder, "%s%s%s", controls_box(), *controls_box() ? "/" : "",
		 w->name);
	snprintf(w->name_kv, sizeof w->name_kv, "worker=%s", w->name);
	w->nslots = l->concurrency + l->batch;
	n = (size_t)w->nslots;
	w->slots = calloc(n, sizeof *w->slots);
	w->runq = calloc(n, sizeof *w->runq);
	w->fin = calloc(n, sizeof *w->fin);
	w->freel = calloc(n, sizeof *w->freel);
	w->ack_ids = calloc(n, sizeof *w->ack_ids);
	w->ack_pos = calloc(n, sizeof *w->ack_pos);
	w->ack_ok = calloc(n, 1);
	w->grouped = calloc(n, 1);
	w->threads = calloc((size_t)l->concurrency, sizeof *w->threads);
	l->claimed = calloc((size_t)l->batch, sizeof *l->claimed);
	l->pending = calloc(n, sizeof *l->pending);
	l->stale = calloc(n, 1);
	if (!w->slots || !w->runq || !w->fin || !w->freel || !w->threads || !l->claimed ||
	    !l->pending || !l->stale || !w->ack_ids || !w->ack_pos || !w->ack_ok || !w->grouped)
		return err_set(SD_NOMEM, "out of memory");
	for (i = 0; i < w->nslots; i++)
		w->freel[w->n_free++] = w->nslots - 1 - i;
	w->wake_at_fin = l->batch;
	w->avg_run_us = WORKER_CHAIN_MIN_US;	/* chain until we know better */
	if ((r = db_open(o->db_path, 0, o->sync, &w->db)) != SD_OK ||
	    (r = notify_open(o->db_path, &w->nt)) != SD_OK)
		return r;
	db_notify_watch(w->db, w->nt);
	l->last_dv = db_data_version(w->db);
	/* counters are for /metrics: a worker without them still works */
	if (metrics_open(o->db_path, &w->metrics) != SD_OK)
		log_event(LOG_WARN, "metrics not counted", "worker=%s err=%s", w->name,
			  err_msg());
	return SD_OK;
}

/* Start the handler threads; w->nthreads counts those that started. */
static enum sd_result worker_start_threads(struct worker *w, int concurrency)
{
	enum sd_result r = SD_OK;
	pthread_attr_t attr;
	int i;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 512 * 1024);
	for (i = 0; i < concurrency; i++) {
		if (pthread_create(&w->threads[i], &attr, handler_thread, w) != 0) {
			r = err_set(SD_IO, "cannot start handler thread: %s", strerror(errno));
			break;
		}
		w->nthreads++;
	}
	pthread_attr_destroy(&attr);
	return r;
}

/* Tell the handler threads to end; wait for them unless abandoned.  Handlers
 * past the grace period still hold pointers into w: leave them and their
 * memory to the process exit. */
static void worker_end_threads(struct worker *w, int abandoned)
{
	int i;

	pthread_mutex_lock(&w->mu);
	w->quit = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (i = 0; i < w->nthreads; i++) {
		if (abandoned)
			pthread_detach(w->threads[i]);
		else
			pthread_join(w->threads[i], NULL);
	}
}

enum sd_result worker_run(const struct worker_opts *o, struct worker_stats *stats_out)
{
	struct loop l = { 0 };
	char shown[1024], quoted[1100];
	enum sd_result r;

	l.w = calloc(1, sizeof *l.w);
	if (!l.w)
		return err_set(SD_NOMEM, "out of memory");
	if ((r = worker_open(&l, o)) == SD_OK &&
	    (r = worker_start_threads(l.w, l.concurrency)) == SD_OK) {
		text_redact_url(o->db_path, shown, sizeof shown);
		log_event(LOG_INFO, "worker started", "worker=%s concurrency=%d batch=%d db=%s",
			  l.w->name, l.concurrency, l.batch, log_quote(quoted, sizeof quoted, shown));
		r = loop_run(&l);
		loop_shut_down(&l);
	}
	worker_end_threads(l.w, l.abandoned);
	if (stats_out)
		*stats_out = l.st;
	free(l.claimed);
	free(l.pending);
	free(l.stale);
	if (l.abandoned)
		return r == SD_OK ? SD_TIMEOUT : r;
	worker_free(l.w);
	return r;
}
