/*
 * bench.c: `stagedoor-bench queue`, the queue's benchmark.
 *
 *   stagedoor-bench queue --jobs N --workers W --batch B --sync normal|full
 *                         [--enqueue-batch E] [--latency-jobs M] [--json]
 *
 * On a fresh database in a temporary directory (under $TMPDIR, else /tmp;
 * removed afterwards) it runs N `noop` jobs through the real code paths:
 *
 *   1. enqueue    N x queue_enqueue, E per transaction (default B), one
 *                 connection at the chosen synchronous level;
 *   2. claim+ack  W workers (worker_run, each in its own thread, concurrency =
 *                 batch = B, drain) until the stream is empty;
 *   3. latency    W workers running (no drain) while one producer enqueues M
 *                 jobs (default min(N, 20000)) in transactions of B, paced at
 *                 half the lifecycle rate of 1+2; each payload carries its
 *                 enqueue time {"t": <clock_mono_us>} and worker_opts.on_start
 *                 records start - t.
 *
 * It prints jobs/s for enqueue, for claim+ack and for the lifecycle
 * (N / (t_enqueue + t_claim_ack)), p50/p99 enqueue-to-start latency and the
 * peak RSS, as text or as one JSON object (--json).  Progress goes to stderr:
 * a "bench: ..." line as each phase begins, then its progress (progress.h:
 * a bar on a terminal, plain lines elsewhere); phase 2's counts jobs as they
 * start (worker_opts.on_start), read by the main thread every 100 ms.
 * tools/bench/sqlbench.c runs the same SQL with nothing around it; `make
 * bench` compares the two.
 *
 * Invariants: every figure comes from a run in which every job was acked
 * exactly once and the stream ended empty; otherwise the command fails.
 *
 * `stagedoor-bench pipeline` (the ticket pipeline end to end) lives in
 * bench_pipeline.c, `stagedoor-bench api` (the HTTP intake) in bench_api.c;
 * cli_bench hands each the words after its name.
 */
#define _XOPEN_SOURCE 700		/* nftw */
#include "cli.h"
#include "bench.h"

#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "args.h"
#include "clock.h"
#include "db.h"
#include "help.h"
#include "log.h"
#include "metrics.h"
#include "pipeline.h"
#include "progress.h"
#include "queue.h"
#include "statedir.h"
#include "worker.h"

#define BENCH_WORKERS_MAX 32		/* each worker holds a notify slot */
#define BENCH_LATENCY_JOBS 20000	/* phase 3 size unless told */
#define BENCH_LATENCY_WAIT_S 60		/* longest phase 3 waits for stragglers */

/* What one run measures. */
struct bench_result {
	double enqueue_s;		/* phase 1 wall time */
	double claim_ack_s;		/* phase 2 wall time */
	int64_t latency_jobs;		/* phase 3 jobs whose start was seen */
	double latency_rate;		/* phase 3 offered rate (jobs/s) */
	double p50_ms, p99_ms;		/* enqueue-to-start latency */
	long peak_rss_kb;		/* getrusage ru_maxrss */
};

/* --boxes B (PostgreSQL): phase 2 in B processes, each a box with W workers */
static int bench_boxes = 1;

/* The latency recorder, shared by the handler threads of phase 3. */
struct bench_lat {
	int64_t *us;			/* start - enqueue, one per started job */
	int64_t cap;			/* room in us[] */
	atomic_int_fast64_t n;		/* jobs seen (may pass cap on a redelivery) */
};

/* One worker thread (pipeline_loop) and the name it leases under. */
struct bench_worker {
	struct pipeline_loop l;		/* wo in; r, st, ended, err out */
	char name[32];
};

/* ======================== workers in threads ============================= */

/* bench_workers_start: start n workers on path; o_tmpl gives every option but
 * the name.  Returns the number started (the rest failed to start). */
static int bench_workers_start(struct bench_worker *bw, int n, const struct worker_opts *o_tmpl,
			       const char *phase)
{
	int i;

	for (i = 0; i < n; i++) {
		memset(&bw[i], 0, sizeof bw[i]);
		bw[i].l.wo = *o_tmpl;
		snprintf(bw[i].name, sizeof bw[i].name, "bench-%s-%d", phase, i);
		bw[i].l.wo.name = bw[i].name;
		if (pipeline_loop_start(&bw[i].l) != SD_OK)
			break;
	}
	return i;
}

/* bench_workers_join: wait for n workers; the first failure, if any, with its
 * message set on this thread. */
static enum sd_result bench_workers_join(struct bench_worker *bw, int n, int64_t *done)
{
	enum sd_result r = SD_OK;
	int i;

	*done = 0;
	for (i = 0; i < n; i++) {
		pipeline_loop_join(&bw[i].l);
		*done += bw[i].l.st.done;
		if (bw[i].l.r != SD_OK && r == SD_OK) {
			r = bw[i].l.r;
			err_set(r, "worker %s: %s", bw[i].name, bw[i].l.err);
		}
	}
	return r;
}

/* ======================== other boxes in processes ======================= */

struct bench_box {
	pid_t pid;
	int fd;				/* its pipe: the jobs it did, then EOF */
};

/*
 * bench_boxes_fork: boxes 2..B as child processes (forked before any thread
 * of this one starts), each running n workers of o until the stream is
 * drained and writing how many jobs it did into its pipe.
 */
static enum sd_result bench_boxes_fork(struct bench_box *bx, int n_boxes, int n,
				       const struct worker_opts *o)
{
	int b;

	for (b = 0; b < n_boxes; b++) {
		int fds[2];

		bx[b].pid = -1;
		if (pipe(fds) != 0)
			return err_set(SD_IO, "pipe: %s", strerror(errno));
		fflush(NULL);
		if ((bx[b].pid = fork()) < 0)
			return err_set(SD_IO, "fork: %s", strerror(errno));
		if (bx[b].pid == 0) {
			struct bench_worker bw[BENCH_WORKERS_MAX];
			struct worker_opts co = *o;
			int64_t done = 0;
			int started;
			enum sd_result r;
			ssize_t w;

			close(fds[0]);
			co.on_start = NULL;
			co.arg = NULL;
			started = bench_workers_start(bw, n, &co, b ? "box3" : "box2");
			r = bench_workers_join(bw, started, &done);
			w = write(fds[1], &done, sizeof done);
			_exit(r == SD_OK && started == n && w == (ssize_t)sizeof done ? 0 : 1);
		}
		close(fds[1]);
		bx[b].fd = fds[0];
	}
	return SD_OK;
}

/* bench_boxes_wait: every child box's jobs added to *done; the end time of
 * the last into *t1 (as the parent saw it) */
static enum sd_result bench_boxes_wait(struct bench_box *bx, int n_boxes, int64_t *done,
				       int64_t *t1)
{
	enum sd_result r = SD_OK;
	int b, status;

	for (b = 0; b < n_boxes; b++) {
		int64_t got = 0;

		if (bx[b].pid <= 0)
			continue;
		if (read(bx[b].fd, &got, sizeof got) != (ssize_t)sizeof got)
			got = 0;
		close(bx[b].fd);
		waitpid(bx[b].pid, &status, 0);
		if (clock_mono_us() > *t1)
			*t1 = clock_mono_us();
		*done += got;
		if ((!WIFEXITED(status) || WEXITSTATUS(status) != 0) && r == SD_OK)
			r = err_set(SD_IO, "box %d of the benchmark failed", b + 2);
	}
	return r;
}

/* bench_count_start (worker_opts.on_start, phase 2): one more job started,
 * counted for the progress bar only; one relaxed add on a handler thread. */
static void bench_count_start(const struct job *job, void *arg)
{
	(void)job;
	atomic_fetch_add_explicit((atomic_int_fast64_t *)arg, 1, memory_order_relaxed);
}

/* bench_workers_watch: until all n workers ended, show the jobs started so
 * far every 100 ms.  The main thread only reads a counter: it stays off the
 * database, so the figures are the workers' alone. */
static void bench_workers_watch(struct bench_worker *bw, int n, struct progress *bar,
				atomic_int_fast64_t *n_started)
{
	struct timespec ts = { 0, 100 * 1000000L };
	int ended, i;

	for (;;) {
		for (ended = 0, i = 0; i < n; i++)
			ended += atomic_load(&bw[i].l.ended);
		if (ended == n)
			return;
		progress_update(bar, atomic_load(n_started));
		nanosleep(&ts, NULL);
	}
}

/* ======================== phase 3: latency =============================== */

/* on_start: the payload is {"t":<enqueue time in µs>}, written by
 * bench_latency below; parsed by hand to keep JSON out of the measurement. */
static void bench_on_start(const struct job *job, void *arg)
{
	struct bench_lat *lat = arg;
	int64_t now = clock_mono_us(), i;
	const char *p = strstr(job->payload, "\"t\":");

	if (!p)
		return;
	i = atomic_fetch_add(&lat->n, 1);
	if (i < lat->cap)
		lat->us[i] = now - strtoll(p + 4, NULL, 10);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

void bench_sort_i64(int64_t *v, int64_t n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_i64);
}

double bench_pct_ms(const int64_t *v, int64_t n, double p)
{
	int64_t k = (int64_t)(p * (double)n + 0.999999);

	if (n == 0)
		return 0;
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return (double)v[k - 1] / 1000.0;
}

static void sleep_until_us(int64_t t)
{
	int64_t d;

	while ((d = t - clock_mono_us()) > 0) {
		struct timespec ts = { (time_t)(d / 1000000), (long)(d % 1000000) * 1000 };
		nanosleep(&ts, NULL);
	}
}

/*
 * bench_latency: phase 3.  Workers run (no drain) while jobs are enqueued on
 * db at rate jobs/s, in transactions of batch; every job's enqueue-to-start
 * time lands in res.
 */
static enum sd_result bench_latency(struct db *db, const struct worker_opts *o_tmpl, int workers,
				    int64_t m, int batch, double rate, struct bench_result *res)
{
	struct bench_worker bw[BENCH_WORKERS_MAX];
	struct worker_opts o = *o_tmpl;
	struct bench_lat lat;
	struct enqueue e = { "noop", NULL, NULL, 0, 0 };
	struct progress *bar = NULL;
	char payload[64];
	enum sd_result r = SD_OK, jr;
	int64_t i, k, t0, deadline, done;
	int started;

	memset(&lat, 0, sizeof lat);
	lat.cap = m;
	atomic_init(&lat.n, 0);
	if (!(lat.us = calloc((size_t)m, sizeof *lat.us)))
		return err_set(SD_NOMEM, "out of memory");
	o.drain = 0;
	o.on_start = bench_on_start;
	o.arg = &lat;
	worker_stop_reset();
	started = bench_workers_start(bw, workers, &o, "lat");
	if (started < workers) {
		r = SD_IO;
		goto stop;
	}

	e.payload = payload;
	bar = progress_start("latency", m, "jobs");
	t0 = clock_mono_us();
	for (i = 0; i < m && r == SD_OK; i += batch) {
		progress_update(bar, atomic_load(&lat.n));
		/* each transaction starts when the offered rate says so */
		sleep_until_us(t0 + (int64_t)((double)i * 1e6 / rate));
		if ((r = db_begin(db)) != SD_OK)
			break;
		for (k = i; k < i + batch && k < m && r == SD_OK; k++) {
			snprintf(payload, sizeof payload, "{\"t\":%lld}", (long long)clock_mono_us());
			r = queue_enqueue(db, &e, NULL);
		}
		if (r == SD_OK)
			r = db_commit(db);
		else
			db_rollback(db);
	}
	/* wait until every job started, the workers died, or too long passed */
	deadline = clock_mono_us() + BENCH_LATENCY_WAIT_S * 1000000LL;
	while (r == SD_OK && atomic_load(&lat.n) < m) {
		int ended = 0, w;

		for (w = 0; w < started; w++)
			ended += atomic_load(&bw[w].l.ended);
		if (ended > 0 || clock_mono_us() > deadline)
			break;
		progress_update(bar, atomic_load(&lat.n));
		sleep_until_us(clock_mono_us() + 1000);
	}
stop:
	/* jobs started (a redelivery may count one twice: capped at m) */
	progress_end(bar, atomic_load(&lat.n) < m ? atomic_load(&lat.n) : m);
	{
		char keep[512];

		snprintf(keep, sizeof keep, "%s", err_msg());
		worker_stop_all();
		jr = bench_workers_join(bw, started, &done);
		worker_stop_reset();
		if (r != SD_OK)
			err_set(r, "%s", keep);		/* the first failure's message */
		else if (jr != SD_OK)
			r = jr;
		else if (atomic_load(&lat.n) < m)
			r = err_set(SD_TIMEOUT, "latency phase: only %lld of %lld jobs started",
				    (long long)atomic_load(&lat.n), (long long)m);
	}
	if (r == SD_OK) {
		int64_t n = atomic_load(&lat.n) < m ? atomic_load(&lat.n) : m;

		bench_sort_i64(lat.us, n);
		res->latency_jobs = n;
		res->latency_rate = rate;
		res->p50_ms = bench_pct_ms(lat.us, n, 0.50);
		res->p99_ms = bench_pct_ms(lat.us, n, 0.99);
	}
	free(lat.us);
	return r;
}

/* ======================== the run ======================================== */

/* One progress line on stderr: stdout stays one report (or one JSON object). */
void bench_beside(const char *rel, char *out, size_t size)
{
	char exe[PATH_MAX - 64], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

	if (n <= 0) {
		snprintf(out, size, "%s", rel);
		return;
	}
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')))
		*slash = '\0';
	snprintf(out, size, "%s/%s", exe, rel);
}

int bench_default(const char **path, const char *rel, char *buf, size_t size)
{
	if (!*path) {
		bench_beside(rel, buf, size);
		*path = buf;
	}
	return access(*path, X_OK) == 0 ? 0 : -1;
}

void bench_fail(struct bench_failure *f, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&f->mu);
	if (!atomic_load(&f->failed)) {
		va_start(ap, fmt);
		vsnprintf(f->err, sizeof f->err, fmt, ap);
		va_end(ap);
		atomic_store(&f->failed, 1);
	}
	pthread_mutex_unlock(&f->mu);
}

void bench_progress(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* bench_dir_make: a fresh folder "stagedoor-bench.XXXXXX" under $TMPDIR,
 * else /tmp, into dir (size bytes); 0, or 1 with the message printed. */
static int bench_dir_make(char *dir, size_t size)
{
	const char *tmp = getenv("TMPDIR");

	if ((size_t)snprintf(dir, size, "%s/stagedoor-bench.XXXXXX",
			     tmp && *tmp ? tmp : "/tmp") >= size) {
		fprintf(stderr, "stagedoor-bench: TMPDIR is too long\n");
		return 1;
	}
	if (!mkdtemp(dir)) {
		fprintf(stderr, "stagedoor-bench: cannot make a temporary directory %s: %s\n", dir,
			strerror(errno));
		return 1;
	}
	return 0;
}

enum sd_result bench_token(const char *path, char *token)
{
	char file[1200];
	size_t n;
	FILE *f;
	enum sd_result r;

	if ((r = token_path(path, NULL, file, sizeof file)) != SD_OK)
		return r;
	if (!(f = fopen(file, "r")))
		return err_set(SD_IO, "cannot read %s: %s", file, strerror(errno));
	n = fread(token, 1, API_TOKEN_HEX, f);
	fclose(f);
	token[n] = '\0';
	if (n != API_TOKEN_HEX)
		return err_set(SD_IO, "%s holds %zu characters, not a token", file, n);
	return SD_OK;
}

enum sd_result bench_box(const char *path, const char *event_name, int64_t orders,
			 struct db **db, char *token, int64_t *event_id)
{
	enum sd_result r;

	if ((r = db_open(path, DB_OPEN_CREATE, DB_SYNC_FULL, db)) != SD_OK ||
	    (r = statedir_init(path, NULL)) != SD_OK ||
	    (r = token_ensure(path, NULL)) != SD_OK ||
	    (r = bench_token(path, token)) != SD_OK)
		return r;
	return pipeline_sample_event(*db, event_name, orders, event_id);
}

int bench_args(int argc, char **argv, struct arg_opt *opts, const char *usage)
{
	char *pos[ARGS_MAX_POS];
	enum sd_result r;
	int npos;

	if (args_wants_help(argc, argv, opts))
		return help_leaf(usage, opts);
	if ((r = args_parse(argc, argv, opts, pos, &npos)) != SD_OK) {
		char why[512];

		snprintf(why, sizeof why, "%s", err_msg());
		return cli_fail(err_set(r, "%s; usage: stagedoor-bench %s", why, usage));
	}
	if (npos != 0) {
		fprintf(stderr, "stagedoor-bench: usage: stagedoor-bench %s\n", usage);
		return 2;
	}
	return 0;
}

void bench_deadline(struct timespec *until, int64_t ms)
{
	clock_gettime(CLOCK_REALTIME, until);
	until->tv_sec += (time_t)(ms / 1000);
	until->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until->tv_nsec >= 1000000000L) {
		until->tv_sec++;
		until->tv_nsec -= 1000000000L;
	}
}

static const char *bench_pg;

int bench_target_set(const char *uri)
{
	if (uri && *uri && !db_target_is_pg(uri))
		return cli_fail(err_set(SD_INVALID, "--db takes a postgresql:// URI (SQLite "
					"benchmarks make their own file)"));
	bench_pg = uri && *uri ? uri : NULL;
	return 0;
}

static const char *bench_target(void)
{
	return bench_pg;
}

static int bench_rm(const char *f, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(f);
	return 0;
}

/* bench_dir_remove: dir and everything in it (a bench_dir_make folder). */
static void bench_dir_remove(const char *dir)
{
	nftw(dir, bench_rm, 16, FTW_DEPTH | FTW_PHYS);	/* no link is followed out of it */
}

int bench_in_dir(int keep, enum sd_result (*fn)(const char *dir, const char *path, void *arg),
		 void *arg)
{
	/* dir leaves room in PATH_MAX for the names made under it */
	char dir[1024], path[1100], schema[64] = "";
	enum log_level level = log_get_level();
	enum sd_result r;

	if (bench_dir_make(dir, sizeof dir) != 0)
		return 1;
	snprintf(path, sizeof path, "%s/stagedoor.db", dir);
	if (bench_pg) {
		if ((r = bench_scratch_make(bench_pg, path, sizeof path, schema, sizeof schema)) !=
		    SD_OK) {
			bench_dir_remove(dir);
			return cli_fail(r);
		}
		metrics_home_set(dir);
	}
	/* info lines would interleave with the progress and cost time */
	if (level < LOG_WARN)
		log_set_level(LOG_WARN);
	r = fn(dir, path, arg);
	log_set_level(level);
	if (schema[0] && !keep && bench_scratch_drop(bench_pg, schema) != SD_OK)
		bench_progress("could not drop the scratch schema %s: %s", schema, err_msg());
	if (keep)
		bench_progress("kept %s", dir);
	else
		bench_dir_remove(dir);
	return r == SD_OK ? 0 : cli_fail(r);
}

static enum sd_result bench_queue(const char *path, int64_t jobs, int workers, int batch,
				  int ebatch, enum db_sync sync, int64_t lat_jobs,
				  struct bench_result *res)
{
	struct bench_worker bw[BENCH_WORKERS_MAX];
	struct bench_box bx[1];
	struct worker_opts o;
	struct enqueue e = { "noop", "{}", NULL, 0, 0 };
	struct db *db = NULL;
	struct progress *bar = NULL;
	struct rusage ru;
	enum sd_result r;
	int64_t i, k, t0, t1, done = 0, left = -1;
	atomic_int_fast64_t n_started;
	int started;

	atomic_init(&n_started, 0);

	memset(res, 0, sizeof *res);
	if ((r = db_open(path, DB_OPEN_CREATE, sync, &db)) != SD_OK)
		return r;

	/* 1. enqueue, E per transaction */
	bench_progress("enqueue %lld noop jobs, %d per transaction", (long long)jobs, ebatch);
	bar = progress_start("enqueue", jobs, "jobs");
	t0 = clock_mono_us();
	for (i = 0; i < jobs && r == SD_OK; i += ebatch) {
		if ((r = db_begin(db)) != SD_OK)
			break;
		for (k = i; k < i + ebatch && k < jobs && r == SD_OK; k++)
			r = queue_enqueue(db, &e, NULL);
		if (r == SD_OK)
			r = db_commit(db);
		else
			db_rollback(db);
		if (r == SD_OK)
			progress_update(bar, k);
	}
	res->enqueue_s = (double)(clock_mono_us() - t0) / 1e6;
	progress_end(bar, r == SD_OK ? jobs : -1);
	bar = NULL;
	if (r != SD_OK)
		goto out;

	/* 2. claim + ack: W workers drain the stream */
	memset(&o, 0, sizeof o);
	o.db_path = path;
	o.concurrency = batch;
	o.batch = batch;
	o.drain = 1;
	o.retention_ms = 0;
	o.sync = sync;
	o.handlers = NULL;
	o.on_start = bench_count_start;
	o.arg = &n_started;
	bench_progress("claim+ack with %d worker%s, batch %d%s", workers,
		       workers == 1 ? "" : "s", batch, bench_boxes > 1 ? ", in each of 2 boxes" : "");
	worker_stop_reset();
	bar = progress_start("claim+ack", jobs, "jobs");
	t0 = clock_mono_us();
	if (bench_boxes > 1 && (r = bench_boxes_fork(bx, bench_boxes - 1, workers, &o)) != SD_OK)
		goto out;
	started = bench_workers_start(bw, workers, &o, "drain");
	if (started < workers) {
		char keep[512];

		snprintf(keep, sizeof keep, "%s", err_msg());
		worker_stop_all();
		bench_workers_join(bw, started, &done);
		worker_stop_reset();
		r = err_set(SD_IO, "%s", keep);
		goto out;
	}
	bench_workers_watch(bw, started, bar, &n_started);
	r = bench_workers_join(bw, started, &done);
	/* until the last worker returned, not until the watcher's next look */
	for (i = 0, t1 = t0; i < started; i++)
		if (bw[i].l.ended_us > t1)
			t1 = bw[i].l.ended_us;
	if (bench_boxes > 1 && (r == SD_OK ? (r = bench_boxes_wait(bx, bench_boxes - 1, &done,
								   &t1)) : r) != SD_OK)
		goto out;
	res->claim_ack_s = (double)(t1 - t0) / 1e6;
	progress_end(bar, done);
	bar = NULL;
	o.on_start = NULL;
	o.arg = NULL;
	if (r != SD_OK)
		goto out;
	if ((r = queue_pending(db, &left)) != SD_OK)
		goto out;
	if (done != jobs || left != 0) {
		r = err_set(SD_DB, "claim+ack: %lld of %lld jobs acked, %lld left in the stream",
			    (long long)done, (long long)jobs, (long long)left);
		goto out;
	}

	/* 3. latency at half the lifecycle rate */
	if (lat_jobs > 0) {
		double rate = (double)jobs / (res->enqueue_s + res->claim_ack_s) / 2;

		bench_progress("latency: %lld jobs offered at %.0f jobs/s", (long long)lat_jobs,
			       rate);
		if ((r = bench_latency(db, &o, workers, lat_jobs, batch, rate, res)) != SD_OK)
			goto out;
	}
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		res->peak_rss_kb = ru.ru_maxrss;
out:
	progress_end(bar, -1);		/* a phase that failed half way */
	db_close(db);
	return r;
}

static void bench_print(const struct bench_result *res, int64_t jobs, int workers, int batch,
			int ebatch, const char *sync, int json)
{
	double r_enq = (double)jobs / res->enqueue_s, r_ca = (double)jobs / res->claim_ack_s;
	double r_life = (double)jobs / (res->enqueue_s + res->claim_ack_s);

	if (json) {
		printf("{\"program\":\"stagedoor\",\"engine\":\"%s\",\"boxes\":%d,"
		       "\"jobs\":%lld,\"workers\":%d,\"batch\":%d,"
		       "\"enqueue_batch\":%d,\"sync\":\"%s\",\"enqueue_s\":%.6f,\"claim_ack_s\":%.6f,"
		       "\"enqueue_jobs_per_s\":%.0f,\"claim_ack_jobs_per_s\":%.0f,"
		       "\"lifecycle_jobs_per_s\":%.0f,\"latency_jobs\":%lld,"
		       "\"latency_offered_jobs_per_s\":%.0f,\"latency_p50_ms\":%.3f,"
		       "\"latency_p99_ms\":%.3f,\"peak_rss_kb\":%ld}\n",
		       bench_target() ? "postgresql" : "sqlite", bench_boxes,
		       (long long)jobs, workers, batch, ebatch, sync, res->enqueue_s, res->claim_ack_s, r_enq,
		       r_ca, r_life, (long long)res->latency_jobs, res->latency_rate, res->p50_ms,
		       res->p99_ms, res->peak_rss_kb);
		return;
	}
	printf("stagedoor-bench queue: %lld noop jobs, %d worker%s%s, batch %d, synchronous=%s, "
	       "%s\n", (long long)jobs, workers, workers == 1 ? "" : "s",
	       bench_boxes > 1 ? " in each of 2 boxes" : "", batch, sync,
	       bench_target() ? "PostgreSQL" : "SQLite");
	printf("  enqueue     %10.0f jobs/s  (%.3f s, %d per transaction)\n", r_enq,
	       res->enqueue_s, ebatch);
	printf("  claim+ack   %10.0f jobs/s  (%.3f s)\n", r_ca, res->claim_ack_s);
	printf("  lifecycle   %10.0f jobs/s\n", r_life);
	if (res->latency_jobs > 0)
		printf("  latency     p50 %.3f ms  p99 %.3f ms  (enqueue to start; %lld jobs "
		       "offered at %.0f jobs/s)\n", res->p50_ms, res->p99_ms,
		       (long long)res->latency_jobs, res->latency_rate);
	printf("  peak RSS    %.1f MiB\n", (double)res->peak_rss_kb / 1024.0);
}

static int bench_queue_cmd(int argc, char **argv)
{
	int64_t jobs = 100000, workers = 1, batch = 100, ebatch = -1, lat_jobs = -1;
	const char *sync_s = "normal";
	int64_t boxes = 1;
	const char *pg = NULL;
	int json = 0;
	struct arg_opt opts[] = {
		{ "jobs", ARG_INT, &jobs, 1, 100000000, 0, NULL,
		  "noop jobs to enqueue, then claim and acknowledge (100000)", 0 },
		{ "workers", ARG_INT, &workers, 1, BENCH_WORKERS_MAX, 0, NULL,
		  "worker threads, each with its own connection (1)", 0 },
		{ "batch", ARG_INT, &batch, 1, 10000, 0, NULL,
		  "jobs claimed and acknowledged per transaction (100)", 0 },
		{ "enqueue-batch", ARG_INT, &ebatch, 1, 10000, 0, NULL,
		  "jobs enqueued per transaction (default: --batch)", 0 },
		{ "sync", ARG_STR, &sync_s, 0, 0, 0, "normal|full",
		  "the queue's commit level: normal (the queue's own) or full (fsync each commit)", 0 },
		{ "latency-jobs", ARG_INT, &lat_jobs, 0, 100000000, 0, NULL,
		  "jobs offered at a steady rate to measure enqueue-to-start latency (0: none)", 0 },
		ARG_JSON(&json),
		{ "db", ARG_STR, &pg, 0, 0, 0, "URI",
		  "run on PostgreSQL, in a scratch schema of this postgresql:// database (default: "
		  "SQLite in a temp folder)", 0 },
		{ "boxes", ARG_INT, &boxes, 1, 2, 0, NULL,
		  "with --db: 2 runs the workers as two boxes sharing the database", 0 },
		ARG_END,
	};
	static const char usage[] =
		"queue [--jobs N] [--workers W] [--batch B] [--sync normal|full] "
		"[--enqueue-batch E] [--latency-jobs M] [--db postgresql://... [--boxes 2]] "
		"[--json]";
	char dir[4096], path[4200], schema[64] = "";
	struct bench_result res;
	enum log_level level = log_get_level();
	enum db_sync sync;
	enum sd_result r;
	int rc;

	if ((rc = bench_args(argc, argv, opts, usage)) != 0)
		return rc;
	if (strcmp(sync_s, "normal") == 0) {
		sync = DB_SYNC_QUEUE;	/* the queue's own level */
	} else if (strcmp(sync_s, "full") == 0) {
		sync = DB_SYNC_FULL;
	} else {
		fprintf(stderr, "stagedoor-bench: --sync must be normal or full, not '%s'\n", sync_s);
		return 2;
	}
	if (lat_jobs < 0)
		lat_jobs = jobs < BENCH_LATENCY_JOBS ? jobs : BENCH_LATENCY_JOBS;
	if (ebatch < 0)
		ebatch = batch;		/* phase 1 commits as the workers claim */

	if (bench_target_set(pg) != 0)
		return 2;
	if (boxes > 1 && !pg) {
		fprintf(stderr, "stagedoor-bench: bench queue --boxes 2 shares a PostgreSQL database: "
				"give --db postgresql://...\n");
		return 2;
	}
	bench_boxes = (int)boxes;
	if (bench_dir_make(dir, sizeof dir) != 0)
		return 1;
	snprintf(path, sizeof path, "%s/bench.db", dir);
	if (pg && (r = bench_scratch_make(pg, path, sizeof path, schema, sizeof schema)) != SD_OK) {
		bench_dir_remove(dir);
		return cli_fail(r);
	}
	if (level < LOG_WARN)
		log_set_level(LOG_WARN);
	r = bench_queue(path, jobs, (int)workers, (int)batch, (int)ebatch, sync, lat_jobs, &res);
	log_set_level(level);
	bench_dir_remove(dir);
	if (schema[0])
		bench_scratch_drop(pg, schema);
	if (r != SD_OK)
		return cli_fail(r);
	bench_print(&res, jobs, (int)workers, (int)batch, (int)ebatch, sync_s, json);
	return 0;
}

const struct cli_cmd bench_commands[] = {
	{ "queue", bench_queue_cmd, "the stream alone: enqueue, then claim and acknowledge noop "
				   "jobs; jobs/s and latency", NULL, 0 },
	{ "pipeline", bench_pipeline_cmd, "orders through render, send and count on a real box: "
					  "orders/s and each stage", NULL, 0 },
	{ "api", bench_api_cmd, "the HTTP API through the real server: orders, replays, reads and "
				"scans per second (--tls: HTTP and HTTPS side by side)", NULL, 0 },
	{ "claim", bench_claim_cmd, "a claim's cost on a stream with a long history", NULL, 0 },
	{ "scale", bench_scale_cmd, "the costs that must not grow with history, at several sizes",
	  NULL, 0 },
	{ "intake", bench_intake_cmd, "order intake by many clients over HTTP and the command "
				      "line", NULL, 0 },
	{ "shop", bench_shop_cmd, "the public shop against paysink: checkouts/s, and a paid "
				  "hold's way to its order by webhook, return and reconcile", NULL, 0 },
	{ "event", bench_event_cmd, "a whole event cancelled: children/s from the cancel to the "
				    "last email, refunds at paysink", NULL, 0 },
	{ "line", bench_line_cmd, "the shop's waiting line: its pages' refreshes under hundreds of "
				  "waiters (latency, the shop's CPU), then grants as seats come free",
	  NULL, 0 },
	{ "hoard", bench_hoard_cmd, "attackers from 8 addresses holding an event's seats unpaid: "
				    "what they get from this box and from an older release's",
	  NULL, 0 },
	{ "sqs", bench_sqs_cmd, "the SQS listener with signed requests: batched and single "
				"messages/s, latency to a long poll, boto3 and the AWS SDK beside",
	  NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};
