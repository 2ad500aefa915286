/*
 * bench_pipeline.c: `stagedoor-bench pipeline`, the ticket pipeline's
 * benchmark: orders per second end to end, and where an order's time goes.
 *
 *   stagedoor-bench pipeline [--orders N] [--concurrency C] [--alone K]
 *                            [--keep] [--json]
 *
 * On a fresh database in a temporary directory (under $TMPDIR, else /tmp;
 * removed afterwards unless --keep), with the ticket key and the default
 * maildir beside it, and one event with room for every seat:
 *
 *   1. intake     N x order_add on a FULL connection, one transaction each
 *                 (1 to 3 seats, a client idempotency key): the money side;
 *   2. pipeline   the relay (outbox_relay_run) and one worker (worker_run,
 *                 C handler threads, default 1) in threads of this process,
 *                 through pipeline_run as `demo` runs them, until every
 *                 handler has finished its jobs and one snapshot shows the
 *                 stream and the outbox empty.
 *                 The worker's handler table wraps ticket_job_render,
 *                 ticket_job_send and ticket_job_count unchanged and times each run;
 *   3. verify     every order has its PDF, one maildir message each, the
 *                 sales counter equals the seats sold, nothing is dead:
 *                 otherwise the command fails and reports no figure;
 *   4. alone      on K orders (default min(N, 100)), each step timed by
 *                 itself: tickets_render_pdf (the rendering half of
 *                 tickets_render_store: codes, pdf_render), blob_put of those
 *                 bytes into a scratch store, and tickets_send_mail into a
 *                 scratch maildir.
 *
 * The split of an order's time (ms per order), measured inside the run:
 *
 *   intake          phase 1 / N
 *   render_tickets  the handler's wall time; "on CPU" is its thread's CPU
 *                   time (mostly rendering), "waiting" the rest (mostly the
 *                   PDF's fsyncs, also SQLite lock waits and, with more
 *                   handler threads than cores, the scheduler)
 *   send_tickets    the same; waiting is mostly the maildir's fsyncs
 *   update_sales_counter
 *   queue           phase 2 wall - handler runs that finished their job: the
 *                   relay's publishing, the worker's claims and acks, runs
 *                   that did not finish (retries), and any wait in between
 *
 * ticket_job_render renders and stores in one call and the handler is not to
 * be changed for a benchmark, so render vs store inside the run is the CPU
 * vs waiting split above; phase 4 gives each step's cost alone.  Phase 4
 * runs later, under other disk conditions (the run's dirty pages are still
 * being written back), so its figures are not subtracted from the run's.
 *
 * The queue's figure is exact only with one handler thread (the default):
 * then handler runs and the worker loop follow each other and their sum is
 * the phase's wall time.  With C > 1 handler runs overlap; the handler
 * figures are still per-order costs, but the queue's share is not reported.
 * The relay runs in its own thread and overlaps the handlers on a second
 * core; its CPU time and the worker loop thread's CPU time are reported
 * beside the wall figures.
 *
 * Invariants: the handlers run exactly as in production (same functions,
 * same env, same connections); timing lives only in the wrappers.  This is
 * a benchmark: one run per process, its timers are file-level statics.
 */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "bench.h"

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "blob.h"
#include "clock.h"
#include "db.h"
#include "events.h"
#include "jobkinds.h"
#include "pipeline.h"
#include "progress.h"
#include "queue.h"
#include "statedir.h"
#include "ticket_jobs.h"
#include "tickets.h"
#include "worker.h"

#define PL_ORDERS_DEFAULT 500
#define PL_ALONE_DEFAULT 100	/* orders timed step by step unless told */
#define PL_CONCURRENCY_MAX 32
#define PL_STALL_S 60			/* phase 2 fails after this long without progress */

/* ======================== timing the handlers ============================ */

enum { PL_RENDER, PL_SEND, PL_COUNT, PL_KINDS };

static const char *const pl_kind_name[PL_KINDS] = { JOB_KIND_RENDER, JOB_KIND_SEND,
						    JOB_KIND_COUNT };

/* What the wrappers saw of one kind. */
struct pl_kind {
	atomic_llong done_us;		/* wall time of runs that returned JOB_DONE */
	atomic_llong done_cpu_us;	/* their handler thread's CPU time */
	atomic_llong done;		/* such runs */
	atomic_llong other_us;		/* wall time of the rest (retry, fail) */
	atomic_llong other;		/* such runs */
};

/* The wrappers' shared state: one benchmark per process. */
static struct {
	struct pl_kind k[PL_KINDS];
	int64_t want;			/* JOB_DONE runs per kind that end phase 2 */
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* signalled when every kind reached want */
	int64_t last_progress_us;	/* under mu: the latest finished run */
	int64_t settled_us;		/* every kind done (or stalled): polling began; 0 before */
	/* With one handler thread, the time between one run's end and the next
	 * run's start is the worker's turn (ack, claim, hand-off) or a wait for
	 * the relay: the queue's time, seen job by job. */
	atomic_llong first_start_us;	/* the first run's start; 0 before */
	atomic_llong last_end_us;	/* the latest run's end; 0 before */
	int64_t *gap_us;		/* start - previous end, one per run after the first */
	int64_t gap_cap;
	atomic_llong n_gap;
	struct progress *bar;		/* phase 2's, moved by pl_wait; NULL outside it */
} pl = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static enum job_outcome pl_timed(int kind, handler_fn fn, struct handler_ctx *ctx,
				 const struct job *job, struct job_result *res)
{
	int64_t c0 = pipeline_thread_cpu_us(), t0 = clock_mono_us();
	int64_t t1, dt, dc, done, prev, zero = 0;
	enum job_outcome o;
	int i, all = 1;

	prev = atomic_load(&pl.last_end_us);
	if (prev == 0) {
		atomic_compare_exchange_strong(&pl.first_start_us, &zero, t0);
	} else {
		int64_t g = atomic_fetch_add(&pl.n_gap, 1);
		if (g < pl.gap_cap)
			pl.gap_us[g] = t0 - prev;
	}
	o = fn(ctx, job, res);
	t1 = clock_mono_us();
	dt = t1 - t0;
	dc = pipeline_thread_cpu_us() - c0;
	atomic_store(&pl.last_end_us, t1);
	if (o == JOB_DONE) {
		atomic_fetch_add(&pl.k[kind].done_us, dt);
		atomic_fetch_add(&pl.k[kind].done_cpu_us, dc);
		done = atomic_fetch_add(&pl.k[kind].done, 1) + 1;
	} else {
		atomic_fetch_add(&pl.k[kind].other_us, dt);
		atomic_fetch_add(&pl.k[kind].other, 1);
		done = 0;
	}
	pthread_mutex_lock(&pl.mu);
	pl.last_progress_us = clock_mono_us();
	if (done >= pl.want) {
		for (i = 0; i < PL_KINDS; i++)
			all &= atomic_load(&pl.k[i].done) >= pl.want;
		if (all)
			pthread_cond_signal(&pl.cv);
	}
	pthread_mutex_unlock(&pl.mu);
	return o;
}

static enum job_outcome pl_render(struct handler_ctx *ctx, const struct job *job,
				  struct job_result *res)
{
	return pl_timed(PL_RENDER, ticket_job_render, ctx, job, res);
}

static enum job_outcome pl_send(struct handler_ctx *ctx, const struct job *job,
				struct job_result *res)
{
	return pl_timed(PL_SEND, ticket_job_send, ctx, job, res);
}

static enum job_outcome pl_count(struct handler_ctx *ctx, const struct job *job,
				 struct job_result *res)
{
	return pl_timed(PL_COUNT, ticket_job_count, ctx, job, res);
}

/* ticket_handlers, each entry timed. */
static const struct handler pl_handlers[] = {
	{ JOB_KIND_RENDER, pl_render },
	{ JOB_KIND_SEND, pl_send },
	{ JOB_KIND_COUNT, pl_count },
	{ NULL, NULL },
};

/* ======================== what one run measures ========================== */

struct pl_result {
	int64_t orders, seats;
	int concurrency;
	double intake_s;		/* phase 1 wall time */
	double pipeline_s;		/* phase 2 wall time */
	double handler_ms[PL_KINDS];	/* per order: runs that finished their job */
	double handler_cpu_ms[PL_KINDS];	/* the same runs' CPU time, per order */
	int64_t handler_other_runs;	/* runs that did not (retries, failures) */
	double handler_other_ms;	/* their time, per order */
	int64_t alone_orders;		/* K */
	double render_ms, store_ms, mail_ms;	/* each step alone, per order */
	double relay_cpu_ms, loop_cpu_ms;	/* per order */
	int64_t relay_published;
	/* one handler thread: the queue's time between runs, ms per order */
	double head_ms;			/* phase start to the first run */
	double tail_ms;			/* the last run's end to the drained snapshot */
	double gaps_ms;			/* between runs, summed */
	int64_t n_gaps;
	double gap_p50_us, gap_p99_us, gap_max_us;
	long peak_rss_kb;
};


/* ======================== phase 2: relay and worker ====================== */

static int pl_all_done(void)
{
	int i;

	for (i = 0; i < PL_KINDS; i++)
		if (atomic_load(&pl.k[i].done) < pl.want)
			return 0;
	return 1;
}

/* pl_jobs_done: handler runs that finished their job, all kinds. */
static int64_t pl_jobs_done(void)
{
	int64_t n = 0;
	int i;

	for (i = 0; i < PL_KINDS; i++)
		n += atomic_load(&pl.k[i].done);
	return n;
}

static void sleep_us(int64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/*
 * pl_wait (pipeline_opts.wait): first wait, without touching the database,
 * until every kind finished N jobs (the wrappers signal) or nothing finished
 * for PL_STALL_S; the last acks are a flush away by then.  From then on take
 * a snapshot at once, then one every poll_ms.  Waits in slices of 100 ms so
 * that pipeline_run sees a loop that ended early and the progress bar moves
 * (from the wrappers' counters: still no database).
 */
static int pl_wait(void *arg, int64_t poll_ms)
{
	int ready;

	(void)arg;
	if (pl.settled_us) {
		sleep_us(poll_ms * 1000);
		return 1;
	}
	progress_update(pl.bar, pl_jobs_done());
	pthread_mutex_lock(&pl.mu);
	ready = pl_all_done() || clock_mono_us() - pl.last_progress_us > PL_STALL_S * 1000000LL;
	if (!ready) {
		struct timespec until;

		bench_deadline(&until, 100);
		pthread_cond_timedwait(&pl.cv, &pl.mu, &until);
		ready = pl_all_done();
	}
	pthread_mutex_unlock(&pl.mu);
	if (ready)
		pl.settled_us = clock_mono_us();
	return ready;
}

/* pl_check (pipeline_opts.progress): after each snapshot; a stall, before or
 * after every kind was done, ends the phase as "did not drain". */
static enum sd_result pl_check(void *arg, const struct pipeline_counts *c)
{
	char seen[200];
	size_t n = 0;
	int i;

	(void)arg;
	if (pl_all_done()) {
		if (c->pending == 0 && c->unpublished == 0)
			return SD_OK;
		if (clock_mono_us() - pl.settled_us <= PL_STALL_S * 1000000LL)
			return SD_OK;
	}
	for (i = 0; i < PL_KINDS; i++)
		n += (size_t)snprintf(seen + n, sizeof seen - n, "%s%s %lld", i ? ", " : "",
				      pl_kind_name[i], (long long)atomic_load(&pl.k[i].done));
	return err_set(SD_TIMEOUT, "the pipeline did not drain (finished jobs: %s of %lld each)",
		       seen, (long long)pl.want);
}

/* pl_gaps: the queue's time between handler runs, from t0 (phase start) to
 * end (drained); meaningful with one handler thread. */
static void pl_gaps(int64_t t0, int64_t end, struct pl_result *res)
{
	int64_t n = atomic_load(&pl.n_gap), sum = 0, i;
	double per = 1000.0 * (double)res->orders;

	if (n > pl.gap_cap)
		n = pl.gap_cap;
	res->head_ms = (double)(atomic_load(&pl.first_start_us) - t0) / per;
	res->tail_ms = (double)(end - atomic_load(&pl.last_end_us)) / per;
	for (i = 0; i < n; i++)
		sum += pl.gap_us[i];
	res->gaps_ms = (double)sum / per;
	res->n_gaps = n;
	if (n == 0)
		return;
	bench_sort_i64(pl.gap_us, n);
	res->gap_p50_us = (double)pl.gap_us[(n - 1) / 2];
	res->gap_p99_us = (double)pl.gap_us[(int64_t)((double)(n - 1) * 0.99)];
	res->gap_max_us = (double)pl.gap_us[n - 1];
}

/*
 * pl_pipeline: phase 2, pipeline_run with the timed handler table: pl_wait
 * keeps off the database until every kind finished N jobs, then polls every
 * millisecond for the drained snapshot that ends the phase.
 */
static enum sd_result pl_pipeline(struct db *db, const char *path, struct tickets_env *env,
				  int concurrency, struct pl_result *res)
{
	struct pipeline_opts po;
	struct pipeline_stats ps;
	enum sd_result r;

	memset(&po, 0, sizeof po);
	po.worker.db_path = path;
	po.worker.name = "bench-pipeline";
	po.worker.concurrency = concurrency;
	po.worker.handlers = pl_handlers;
	po.worker.app = env;
	po.poll_ms = 1;
	po.wait = pl_wait;
	po.progress = pl_check;
	pl.want = res->orders;
	/* room for every run and a few reruns */
	pl.gap_cap = 3 * res->orders + 1000;
	if (!(pl.gap_us = calloc((size_t)pl.gap_cap, sizeof *pl.gap_us)))
		return err_set(SD_NOMEM, "out of memory");
	pl.settled_us = 0;
	pl.last_progress_us = clock_mono_us();

	pl.bar = progress_start("pipeline", PL_KINDS * res->orders, "jobs");
	r = pipeline_run(db, &po, &ps);
	progress_end(pl.bar, pl_jobs_done());
	pl.bar = NULL;
	if (r == SD_OK) {
		res->pipeline_s = (double)(ps.drained_us - ps.start_us) / 1e6;
		res->relay_published = ps.published;
		res->relay_cpu_ms = (double)ps.relay_cpu_us / 1000.0 / (double)res->orders;
		res->loop_cpu_ms = (double)ps.worker_cpu_us / 1000.0 / (double)res->orders;
		pl_gaps(ps.start_us, ps.drained_us, res);
	}
	free(pl.gap_us);
	pl.gap_us = NULL;
	return r;
}

/* ======================== phase 3: verify ================================ */

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* pl_verify: every order has its PDF, one maildir message each, the counter
 * equals the seats sold and nothing went dead; SD_DB saying what is not. */
static enum sd_result pl_verify(struct db *db, const char *dir, struct tickets_env *env,
				int64_t event_id, const struct pl_result *res)
{
	struct queue_counts *rows = NULL, total;
	struct event_summary es;
	enum sd_result r;
	int64_t v[7], missing;
	char path[PATH_MAX];
	int n, msgs;

	if ((r = event_summary(db, env->blobs, event_id, &es)) != SD_OK)
		return r;
	v[0] = es.orders;
	v[1] = es.tickets;
	v[2] = es.tickets_without_pdf;
	v[3] = es.pdfs;
	v[4] = es.emails_sent;
	v[5] = es.counted_orders;
	v[6] = es.counted_seats;
	missing = es.pdfs_missing;

	snprintf(path, sizeof path, "%s/maildir/new", dir);
	msgs = count_files(path);
	if ((r = queue_stats(db, &rows, &n, &total)) != SD_OK)
		return r;
	free(rows);

	if (v[0] != res->orders || v[1] != res->seats)
		return err_set(SD_DB, "verify: %lld orders and %lld tickets, expected %lld and "
			       "%lld", (long long)v[0], (long long)v[1], (long long)res->orders,
			       (long long)res->seats);
	if (v[2] != 0 || v[3] != res->orders || missing != 0)
		return err_set(SD_DB, "verify: %lld tickets without pdf_key, %lld distinct PDF "
			       "keys for %lld orders, %lld PDF files missing", (long long)v[2],
			       (long long)v[3], (long long)res->orders, (long long)missing);
	if (v[4] != res->orders || msgs != res->orders)
		return err_set(SD_DB, "verify: %lld emails marked sent and %d maildir "
			       "messages for %lld orders", (long long)v[4], msgs,
			       (long long)res->orders);
	if (v[5] != res->orders || v[6] != res->seats)
		return err_set(SD_DB, "verify: the sales counter says %lld orders, %lld seats; "
			       "sold %lld orders, %lld seats", (long long)v[5], (long long)v[6],
			       (long long)res->orders, (long long)res->seats);
	if (total.dead != 0)
		return err_set(SD_DB, "verify: %lld dead jobs", (long long)total.dead);
	return SD_OK;
}

/* ======================== phase 4: each step alone ======================= */

/* the state folder: beside an SQLite file (NULL), the bench folder on
 * PostgreSQL */
static const char *pl_state(const char *dir, const char *path)
{
	return db_target_is_pg(path) ? dir : NULL;
}

/*
 * pl_alone: render, store and mail k orders, each step timed by itself:
 * tickets_render_pdf, as tickets_render_store renders; blob_put of
 * those bytes under the same key in a scratch store on the same file system;
 * tickets_send_mail through a second env whose maildir is a scratch one (its
 * PDFs come from the real store).
 */
static enum sd_result pl_alone(struct db *db, const char *path, const char *dir,
			       struct tickets_env *env, int64_t k, struct pl_result *res)
{
	struct tickets_env *cenv = NULL;
	struct blob_store *cblobs = NULL;
	struct progress *bar = NULL;
	struct order_view *v = NULL;
	enum sd_result r;
	int64_t *ids = NULL, n = 0, i, t_render = 0, t_store = 0, t_mail = 0;
	char sub[PATH_MAX], url[PATH_MAX + 16];

	if (!(ids = calloc((size_t)k, sizeof *ids)) || !(v = malloc(sizeof *v))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	/* the benchmark's fresh database numbered its orders 1, 2, ... as it
	 * placed them (INTEGER PRIMARY KEY, nothing deleted) */
	for (n = 0; n < k && n < res->orders; n++)
		ids[n] = n + 1;

	snprintf(sub, sizeof sub, "%s/alone-blobs", dir);
	if ((r = blob_open(sub, &cblobs)) != SD_OK)
		goto out;
	snprintf(url, sizeof url, "maildir:%s/alone-maildir", dir);
	if ((r = tickets_env_open(path, pl_state(dir, path), url, NULL, NULL, &cenv)) != SD_OK)
		goto out;

	bar = progress_start("alone", n, "orders");
	for (i = 0; i < n; i++) {
		char key[BLOB_KEY_MAX + 1];
		struct mail_result mr;
		unsigned char *pdf = NULL;
		size_t len = 0;
		int64_t t0;

		if ((r = tickets_load_order(db, ids[i], v)) != SD_OK)
			goto out;
		t0 = clock_mono_us();
		if ((r = tickets_render_pdf(env, v, &pdf, &len)) != SD_OK)
			goto out;
		t_render += clock_mono_us() - t0;

		tickets_pdf_key(v, key, sizeof key);
		t0 = clock_mono_us();
		r = blob_put(cblobs, key, pdf, len);
		t_store += clock_mono_us() - t0;
		free(pdf);
		if (r != SD_OK)
			goto out;

		t0 = clock_mono_us();
		r = tickets_send_mail(cenv, v, &(struct tickets_intent){ TICKETS_MAIL_TICKETS, 0 }, NULL,
				      &mr);
		t_mail += clock_mono_us() - t0;
		if (r != SD_OK)
			goto out;
		if (mr.duplicate) {
			r = err_set(SD_DB, "alone: the scratch maildir saw order %s before",
				    v->public_id);
			goto out;
		}
		progress_update(bar, i + 1);	/* outside the timed steps */
	}
	res->alone_orders = n;
	if (n > 0) {
		res->render_ms = (double)t_render / 1000.0 / (double)n;
		res->store_ms = (double)t_store / 1000.0 / (double)n;
		res->mail_ms = (double)t_mail / 1000.0 / (double)n;
	}
	r = SD_OK;
out:
	progress_end(bar, r == SD_OK ? n : -1);
	tickets_env_close(cenv);
	blob_close(cblobs);
	free(v);
	free(ids);
	return r;
}

/* ======================== the run ======================================== */

/* pl_placed (pipeline_sample_orders' progress): one more order taken. */
static void pl_placed(int64_t done, int64_t n, void *arg)
{
	(void)n;
	progress_update(arg, done);
}

/* What the command line asked for, and where the figures go. */
struct pl_args {
	int64_t orders, alone;
	int concurrency;
	struct pl_result *res;
};

/* pl_run (bench_in_dir's fn): the four phases on a fresh database. */
static enum sd_result pl_run(const char *dir, const char *path, void *arg)
{
	const struct pl_args *a = arg;
	struct pl_result *res = a->res;
	int64_t orders = a->orders, alone = a->alone;
	int concurrency = a->concurrency;
	struct tickets_env *env = NULL;
	struct progress *bar;
	struct db *db = NULL;
	struct rusage ru;
	enum sd_result r;
	int64_t event_id = 0, t0;
	int k;

	memset(res, 0, sizeof *res);
	res->orders = orders;
	res->concurrency = concurrency;
	/* the box office's connection: orders commit at FULL; on PostgreSQL
	 * the bench folder is the box's state folder */
	if ((r = db_open(path, DB_OPEN_CREATE, DB_SYNC_FULL, &db)) != SD_OK ||
	    (r = statedir_init(path, pl_state(dir, path))) != SD_OK ||
	    (r = tickets_env_open(path, pl_state(dir, path), NULL, NULL, NULL, &env)) != SD_OK)
		goto out;
	if ((r = pipeline_sample_event(db, "Stagedoor Bench Night", orders, &event_id)) != SD_OK)
		goto out;

	/* 1. intake: one FULL transaction per order */
	bench_progress("intake: %lld orders, one FULL transaction each", (long long)orders);
	bar = progress_start("intake", orders, "orders");
	t0 = clock_mono_us();
	r = pipeline_sample_orders(db, event_id, orders, "bench", &res->seats, NULL, pl_placed,
				   bar);
	res->intake_s = (double)(clock_mono_us() - t0) / 1e6;
	progress_end(bar, r == SD_OK ? orders : -1);
	if (r != SD_OK)
		goto out;

	/* 2. relay and worker until the stream and the outbox drain */
	bench_progress("pipeline: relay and one worker with %d handler thread%s, maildir transport",
		    concurrency, concurrency == 1 ? "" : "s");
	if ((r = pl_pipeline(db, path, env, concurrency, res)) != SD_OK)
		goto out;
	for (k = 0; k < PL_KINDS; k++) {
		res->handler_ms[k] = (double)atomic_load(&pl.k[k].done_us) / 1000.0 /
				     (double)orders;
		res->handler_cpu_ms[k] = (double)atomic_load(&pl.k[k].done_cpu_us) / 1000.0 /
					 (double)orders;
		res->handler_other_runs += atomic_load(&pl.k[k].other);
		res->handler_other_ms += (double)atomic_load(&pl.k[k].other_us) / 1000.0 /
					 (double)orders;
	}

	/* 3. the work is all there, once */
	bench_progress("verify: PDFs, maildir messages, sales counter");
	if ((r = pl_verify(db, dir, env, event_id, res)) != SD_OK)
		goto out;

	/* 4. render, store and mail, each alone */
	if (alone > orders)
		alone = orders;
	if (alone > 0) {
		bench_progress("alone: render, store and mail %lld orders, each step by itself",
			    (long long)alone);
		if ((r = pl_alone(db, path, dir, env, alone, res)) != SD_OK)
			goto out;
	}
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		res->peak_rss_kb = ru.ru_maxrss;
out:
	tickets_env_close(env);
	db_close(db);
	return r;
}

/* ======================== the report ===================================== */

/* One line of the split; share 0 leaves the share out (overlapping runs
 * have no share of the wall time). */
static void pl_row(const char *name, double v, double total, int share, const char *what)
{
	char pct[16] = "";

	if (share)
		snprintf(pct, sizeof pct, "%5.1f%%", 100.0 * v / total);
	printf("  %-21s %8.3f  %6s  %s\n", name, v, pct, what);
}

static void pl_print(const struct pl_result *res, int json)
{
	const double *h = res->handler_ms, *c = res->handler_cpu_ms;
	double n = (double)res->orders, rate = n / (res->intake_s + res->pipeline_s);
	double intake = res->intake_s * 1000.0 / n, total = intake + res->pipeline_s * 1000.0 / n;
	/* serial handlers: the phase's wall time is handler runs plus the rest */
	double queue = res->pipeline_s * 1000.0 / n - h[PL_RENDER] - h[PL_SEND] - h[PL_COUNT];
	int serial = res->concurrency == 1;

	if (json) {
		printf("{\"program\":\"stagedoor\",\"bench\":\"pipeline\",\"transport\":\"maildir\","
		       "\"orders\":%lld,\"seats\":%lld,\"concurrency\":%d,\"intake_s\":%.6f,"
		       "\"pipeline_s\":%.6f,\"orders_per_s\":%.1f,\"intake_orders_per_s\":%.1f,"
		       "\"pipeline_orders_per_s\":%.1f,",
		       (long long)res->orders, (long long)res->seats, res->concurrency,
		       res->intake_s, res->pipeline_s, rate, n / res->intake_s,
		       n / res->pipeline_s);
		printf("\"ms_per_order\":{\"intake\":%.4f,\"render_tickets\":%.4f,"
		       "\"render_tickets_cpu\":%.4f,\"render_tickets_wait\":%.4f,"
		       "\"send_tickets\":%.4f,\"send_tickets_cpu\":%.4f,\"send_tickets_wait\":%.4f,"
		       "\"update_sales_counter\":%.4f,",
		       intake, h[PL_RENDER], c[PL_RENDER], h[PL_RENDER] - c[PL_RENDER], h[PL_SEND],
		       c[PL_SEND], h[PL_SEND] - c[PL_SEND], h[PL_COUNT]);
		if (serial)
			printf("\"queue\":%.4f,\"total\":%.4f},\"queue_share_pct\":%.2f,"
			       "\"queue_ms_per_order\":{\"head\":%.4f,\"between_runs\":%.4f,"
			       "\"tail\":%.4f,\"runs_not_done\":%.4f},\"between_runs_us\":{"
			       "\"n\":%lld,\"p50\":%.0f,\"p99\":%.0f,\"max\":%.0f},", queue, total,
			       100.0 * queue / total, res->head_ms, res->gaps_ms, res->tail_ms,
			       res->handler_other_ms, (long long)res->n_gaps, res->gap_p50_us,
			       res->gap_p99_us, res->gap_max_us);
		else
			printf("\"queue\":null,\"total\":%.4f},\"queue_share_pct\":null,"
			       "\"queue_ms_per_order\":null,\"between_runs_us\":null,", total);
		printf("\"alone_ms_per_order\":{\"pdf_render\":%.4f,\"blob_put\":%.4f,"
		       "\"tickets_send_mail\":%.4f},\"alone_orders\":%lld,"
		       "\"handler_runs_not_done\":%lld,\"handler_not_done_ms_per_order\":%.4f,"
		       "\"relay_published\":%lld,\"relay_cpu_ms_per_order\":%.4f,"
		       "\"worker_loop_cpu_ms_per_order\":%.4f,\"peak_rss_kb\":%ld}\n",
		       res->render_ms, res->store_ms, res->mail_ms, (long long)res->alone_orders,
		       (long long)res->handler_other_runs, res->handler_other_ms,
		       (long long)res->relay_published, res->relay_cpu_ms, res->loop_cpu_ms,
		       res->peak_rss_kb);
		return;
	}
	printf("stagedoor-bench pipeline: %lld orders (%lld seats), maildir, %d handler thread%s\n",
	       (long long)res->orders, (long long)res->seats, res->concurrency,
	       serial ? "" : "s");
	printf("  end to end    %8.1f orders/s  (intake %.3f s + pipeline %.3f s)\n", rate,
	       res->intake_s, res->pipeline_s);
	printf("  intake        %8.1f orders/s    pipeline %.1f orders/s\n", n / res->intake_s,
	       n / res->pipeline_s);
	printf("  ms per order             ms   share\n");
#define ROW(name, v, what) pl_row(name, v, total, serial, what)
#define SUB(name, v, what) printf("    %-19s %8.3f          %s\n", name, v, what)
	pl_row("intake", intake, total, 1, "order_add: order, tickets, 2 outbox rows, one FULL "
	       "commit");
	ROW(JOB_KIND_RENDER, h[PL_RENDER], "load, render, store the PDF, mark, queue the email");
	SUB("on CPU", c[PL_RENDER], "mostly rendering: codes, pages, QR");
	SUB("waiting", h[PL_RENDER] - c[PL_RENDER], "mostly the PDF's fsyncs (file, folder)");
	ROW(JOB_KIND_SEND, h[PL_SEND], "load, claim, read the PDF, write the message, mark");
	SUB("on CPU", c[PL_SEND], "formatting the message (base64 PDF), SQL");
	SUB("waiting", h[PL_SEND] - c[PL_SEND], "mostly the maildir's fsyncs (message, key)");
	ROW(JOB_KIND_COUNT, h[PL_COUNT], "one transaction");
	if (serial)
		ROW("queue", queue, "relay, claims, acks, retries, waits: wall - handler runs");
	else
		printf("  %-21s %8s  %6s  %s\n", "queue", "n/a", "",
		       "handler runs overlap: measure with --concurrency 1");
	printf("  %-21s %8.3f  %5.1f%%\n", "total", total, 100.0);
#undef SUB
#undef ROW
	if (serial) {
		printf("  queue's own work: %.1f%% of an order's time (target: at most 15%%)\n",
		       100.0 * queue / total);
		printf("  queue, where  start to first run %.3f ms, between runs %.3f ms, last run "
		       "to drained %.3f ms per order\n", res->head_ms, res->gaps_ms, res->tail_ms);
		printf("  between runs  %lld gaps (ack, claim, hand-off, or waiting for the relay): "
		       "p50 %.0f us, p99 %.0f us, max %.0f us\n", (long long)res->n_gaps,
		       res->gap_p50_us, res->gap_p99_us, res->gap_max_us);
	}
	if (res->alone_orders > 0)
		printf("  alone         pdf_render %.3f ms, blob_put %.3f ms, tickets_send_mail "
		       "%.3f ms (%lld orders, after the run)\n", res->render_ms, res->store_ms,
		       res->mail_ms, (long long)res->alone_orders);
	printf("  CPU           relay %.3f ms, worker loop %.3f ms per order (the relay overlaps "
	       "the handlers)\n", res->relay_cpu_ms, res->loop_cpu_ms);
	printf("  retries       %lld handler runs that did not finish their job (%.3f ms per "
	       "order, counted in queue)\n", (long long)res->handler_other_runs,
	       res->handler_other_ms);
	printf("  peak RSS      %.1f MiB\n", (double)res->peak_rss_kb / 1024.0);
}

int bench_pipeline_cmd(int argc, char **argv)
{
	int64_t orders = PL_ORDERS_DEFAULT, concurrency = 1, alone = -1;
	const char *pg = NULL;
	int json = 0, keep = 0;
	struct arg_opt opts[] = {
		{ "orders", ARG_INT, &orders, 1, 100000, 0, NULL,
		  "orders sold, rendered, emailed and counted", 0 },
		{ "concurrency", ARG_INT, &concurrency, 1, PL_CONCURRENCY_MAX, 0, NULL,
		  "handler threads", 0 },
		{ "alone", ARG_INT, &alone, 0, 100000, 0, NULL,
		  "also time K orders through each stage alone", 0 },
		BENCH_ARG_KEEP(&keep),
		ARG_JSON(&json),
		{ "db", ARG_STR, &pg, 0, 0, 0, "URI",
		  "run on PostgreSQL, in a scratch schema of this postgresql:// database", 0 },
		ARG_END,
	};
	static const char usage[] = "pipeline [--orders N] [--concurrency C] "
				    "[--alone K] [--db postgresql://...] [--keep] [--json]";
	struct pl_result res;
	struct pl_args a = { 0, 0, 0, &res };
	int rc;

	if ((rc = bench_args(argc, argv, opts, usage)) != 0 || (rc = bench_target_set(pg)) != 0)
		return rc;
	if (alone < 0)
		alone = orders < PL_ALONE_DEFAULT ? orders : PL_ALONE_DEFAULT;

	a.orders = orders;
	a.alone = alone;
	a.concurrency = (int)concurrency;
	if ((rc = bench_in_dir(keep, pl_run, &a)) != 0)
		return rc;
	pl_print(&res, json);
	return 0;
}
