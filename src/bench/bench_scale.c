/*
 * bench_scale.c: `stagedoor-bench scale`, what the box's reads and writes
 * cost as its history grows.
 *
 *   stagedoor-bench scale [--sizes A,B,C] [--intake N] [--backlog N] [--json] [--keep]
 *
 * One database in a temporary directory (made as `init` makes one), with
 * BS_EVENTS events, grows through the sizes (default 10,000, 100,000 and
 * 1,000,000 orders).  The history is filled by batched inserts that leave
 * what the pipeline leaves for a finished order: the order (2 seats), its
 * tickets with their PDF key, its sent ticket email, its three outbox rows
 * (published), their three done_jobs rows and the counter's processed_jobs
 * row, and the sales counters; nothing is pruned.  Before the first size,
 * --backlog entries (default 100,000) are scheduled a week ahead and stay.
 * At each size it measures, each figure the median of its samples:
 *
 *   intake     order_add on a synchronous=FULL connection, --intake orders
 *              (default 300) in three rounds, one transaction each: orders/s;
 *   claim      queue_claim of 10 ready entries in front of the backlog;
 *   show       order_show (the CLI's and GET /v1/orders/{id}'s function) of
 *              orders spread over the whole history;
 *   reads      api_handle in this process (no HTTP): GET /v1/stats,
 *              /metrics, /healthz and the dashboard's refresh (stats,
 *              leased, dead, recent orders); queue_stats (`jobs stats`); and
 *              the part of /v1/stats that tickets.c answers (totals, events);
 *   sizes      the database file, and the largest WAL seen while growing to
 *              and measuring this size.
 *
 * Then for each cost the ratio of the largest size to the smallest, against
 * the goal of 1.5.  A read's samples stop after BS_READ_BUDGET_US once there
 * are three, so a read that scans history does not hold the run for long.
 *
 * Invariants: the fill keeps every schema rule (unique seats and labels, the
 * capacity trigger, the totals' triggers); fill orders have public ids
 * "F<9 digits>" and seat labels "F<seat>", which real ones never are.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api.h"
#include "args.h"
#include "clock.h"
#include "db.h"
#include "event_edit.h"
#include "events.h"
#include "orders.h"
#include "outbox.h"
#include "progress.h"
#include "queue.h"
#include "statedir.h"
#include "tickets.h"

#define BS_SIZES_MAX 8
#define BS_EVENTS 10			/* every size has the same events */
#define BS_BATCH 10000			/* fill orders per transaction */
#define BS_CLAIM_N 10			/* entries a measured claim takes */
#define BS_CLAIMS 31
#define BS_SHOWS 51
#define BS_READS 11
#define BS_READ_BUDGET_US 3000000LL	/* per read and size, once 3 samples are in */
#define BS_GOAL 1.5

enum { BS_INTAKE, BS_CLAIM, BS_SHOW, BS_FIND, BS_STATS, BS_METRICS, BS_HEALTHZ, BS_DASH, BS_JOBS,
       BS_DOMAIN, BS_COSTS };

static const char *const bs_name[BS_COSTS] = {
	"intake", "claim", "order_show", "order_show_find_jobs", "stats", "metrics", "healthz", "dashboard",
	"jobs_stats", "stats_domain",
};
static const char *const bs_label[BS_COSTS] = {
	"intake ms/order (FULL)", "claim 10, backlog", "order show", "  its queue_find_job",
	"GET /v1/stats",
	"GET /metrics", "GET /healthz", "dashboard refresh", "jobs stats", "  tickets.c's part",
};

/* One size's figures. */
struct bs_step {
	int64_t orders;			/* in the database when measured */
	double ms[BS_COSTS];		/* median cost; intake: ms per order */
	double intake_per_s;		/* orders/s of the median round */
	int64_t db_bytes, wal_peak;
	double fill_s;			/* growing to this size */
};

struct bs_args {
	int64_t sizes[BS_SIZES_MAX];
	int n_sizes;
	int64_t intake, backlog;
	struct bs_step steps[BS_SIZES_MAX];
};

/* The run: connections, the API, and what the fill has done so far. */
struct bs_run {
	const char *path;
	struct db *fill;		/* NORMAL: the history */
	struct db *full;		/* FULL: the intake, as the CLI and API take orders */
	struct api *api;
	char auth[API_TOKEN_HEX + 16];
	int64_t events[BS_EVENTS];
	int64_t orders;			/* in the database */
	int64_t wal_peak;		/* this step's */
	int64_t intake_seq;		/* idempotency keys of the measured intake */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n ? v[n / 2] : 0;
}

static void wal_sample(struct bs_run *run)
{
	int64_t wal = 0;

	if (db_wal_bytes(run->fill, &wal) == SD_OK && wal > run->wal_peak)
		run->wal_peak = wal;
}

/* ======================== the history ==================================== */

/* Each statement makes ?2 orders' rows for event ?3 with order ids from ?1,
 * seats from ?4 + 1, outbox ids from ?5, at time ?6; every one gets all six
 * values, and SQLite refuses (harmlessly) those a statement does not name. */
#define BS_SERIES "WITH RECURSIVE n(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM n WHERE k + 1 < ?2) "
static const char *const SQL_FILL[] = {
	BS_SERIES "INSERT INTO orders (id, public_id, event_id, buyer_name, buyer_email, seats, "
	"idempotency_key, created_at) SELECT ?1 + k, printf('F%09d', ?1 + k), ?3, 'Bench Buyer', "
	"'buyer@example.com', 2, printf('fill-%d', ?1 + k), ?6 FROM n",
	BS_SERIES "INSERT INTO tickets (order_id, event_id, seat_no, seat_label, pdf_key, code_id) "
	"SELECT ?1 + k, ?3, ?4 + 2 * k + s, 'F' || (?4 + 2 * k + s), "
	"printf('tickets/F%09d.pdf', ?1 + k), 4611686018427387904 + 2 * (?1 + k) + s "
	"FROM n, (SELECT 1 AS s UNION ALL SELECT 2)",
	BS_SERIES "INSERT INTO email_sends (order_id, kind, claimed_at, sent_at, "
	"provider_message_id, provider_key) SELECT ?1 + k, 'tickets', ?6, ?6, "
	"printf('<F%09d@bench>', ?1 + k), printf('tickets-F%09d', ?1 + k) FROM n",
	BS_SERIES "INSERT INTO outbox (id, kind, payload, created_at, published_at, job_id) "
	"SELECT ?5 + 3 * k + j, CASE j WHEN 0 THEN 'render_tickets' WHEN 1 THEN "
	"'update_sales_counter' ELSE 'send_tickets' END, CASE j WHEN 1 THEN "
	"printf('{\"order_id\":%d,\"event_id\":%d,\"seats\":2}', ?1 + k, ?3) ELSE "
	"printf('{\"order_id\":%d}', ?1 + k) END, ?6, ?6, printf('outbox:F%09d:%s', ?1 + k, "
	"CASE j WHEN 0 THEN 'render' WHEN 1 THEN 'count' ELSE 'send' END) FROM n, "
	"(SELECT 0 AS j UNION ALL SELECT 1 UNION ALL SELECT 2)",
	"INSERT INTO done_jobs (job_id, kind, payload, deliveries, attempts, created_at, "
	"finished_at, worker) SELECT job_id, kind, payload, 1, 0, created_at, ?6, "
	"'bench-fill' FROM outbox WHERE id BETWEEN ?5 AND ?5 + 3 * ?2 - 1",
	"INSERT INTO processed_jobs (job_id, kind, processed_at) SELECT job_id, kind, ?6 "
	"FROM outbox WHERE id BETWEEN ?5 AND ?5 + 3 * ?2 - 1 AND kind = 'update_sales_counter'",
	"INSERT INTO sales_counters (event_id, orders, seats_sold) VALUES (?3, ?2, 2 * ?2) "
	"ON CONFLICT (event_id) DO UPDATE SET orders = sales_counters.orders + excluded.orders, "
	"seats_sold = sales_counters.seats_sold + excluded.seats_sold",
};
static const char SQL_FILL_NEXT[] =
	"SELECT (SELECT coalesce(max(id), 0) + 1 FROM orders), "
	"(SELECT coalesce(max(id), 0) + 1 FROM outbox), "
	"(SELECT coalesce(max(seat_no), 0) FROM tickets WHERE event_id = ?1)";

/* One event's share of a batch: c orders, each statement of SQL_FILL. */
static enum sd_result bs_fill_event(struct db *db, int64_t event_id, int64_t c, int64_t now)
{
	struct db_stmt *st;
	enum sd_result r;
	int64_t p[7] = { 0 };
	size_t i;
	int row = 0, k;

	if (!(st = db_stmt(db, SQL_FILL_NEXT)))
		return SD_DB;
	db_bind_int(st, 1, event_id);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	p[1] = db_col_int(st, 0);
	p[5] = db_col_int(st, 1);
	p[4] = db_col_int(st, 2);
	db_reset(st);
	p[2] = c;
	p[3] = event_id;
	p[6] = now;
	for (i = 0; i < sizeof SQL_FILL / sizeof SQL_FILL[0]; i++) {
		if (!(st = db_stmt(db, SQL_FILL[i])))
			return SD_DB;
		for (k = 1; k <= 6; k++)
			db_bind_int(st, k, p[k]);
		while (db_next(st, &r))
			;
		db_reset(st);
		if (r != SD_OK)
			return r;
	}
	return SD_OK;
}

/* bs_fill: grow the history to `to` orders, BS_BATCH a transaction. */
static enum sd_result bs_fill(struct bs_run *run, int64_t to)
{
	struct progress *bar = progress_start("fill", to - run->orders, "orders");
	int64_t start = run->orders, now = clock_now_ms() - 3600000, n, share;
	enum sd_result r = SD_OK;
	int e;

	while (run->orders < to) {
		n = to - run->orders < BS_BATCH ? to - run->orders : BS_BATCH;
		if ((r = db_begin(run->fill)) != SD_OK)
			break;
		for (e = 0; e < BS_EVENTS && r == SD_OK; e++) {
			share = n / BS_EVENTS + (e < n % BS_EVENTS);
			if (share > 0)
				r = bs_fill_event(run->fill, run->events[e], share, now);
		}
		if ((r = db_end(run->fill, r)) != SD_OK)
			break;
		run->orders += n;
		wal_sample(run);
		progress_update(bar, run->orders - start);
	}
	progress_end(bar, run->orders - start);
	return r;
}

/* ======================== the measurements =============================== */

/* bs_intake: n real orders in three rounds; [out] ms per order and orders/s
 * of the median round. */
static enum sd_result bs_intake(struct bs_run *run, int64_t n, struct bs_step *s)
{
	double per[3];
	char key[48], id[ORDER_ID_MAX];
	struct order_new o = { 0, "Intake Buyer", "intake@example.com", 2, key };
	enum sd_result r;
	int64_t t0, i, each = n / 3 > 0 ? n / 3 : 1;
	int round, replayed = 0;

	for (round = 0; round < 3; round++) {
		t0 = clock_mono_us();
		for (i = 0; i < each; i++) {
			o.event_id = run->events[(run->intake_seq + i) % BS_EVENTS];
			snprintf(key, sizeof key, "scale-intake-%lld", (long long)run->intake_seq++);
			if ((r = order_add(run->full, &o, id, &replayed)) != SD_OK)
				return r;
		}
		per[round] = (double)(clock_mono_us() - t0) / 1000.0 / (double)each;
		run->orders += each;
		wal_sample(run);
	}
	s->ms[BS_INTAKE] = median(per, 3);
	s->intake_per_s = 1000.0 / s->ms[BS_INTAKE];
	return SD_OK;
}

/* bs_backlog: n entries scheduled a week ahead, 1000 a transaction. */
static enum sd_result bs_backlog(struct bs_run *run, int64_t n)
{
	struct enqueue e = { "bench_backlog", "{}", NULL, 7 * 86400000LL, 0 };
	enum sd_result r = SD_OK;
	int64_t i;

	bench_progress("backlog: %lld entries scheduled a week ahead", (long long)n);
	for (i = 0; i < n && r == SD_OK; i += 1000) {
		int64_t k;

		if ((r = db_begin(run->fill)) != SD_OK)
			return r;
		for (k = i; k < n && k < i + 1000 && r == SD_OK; k++)
			r = queue_enqueue(run->fill, &e, NULL);
		r = db_end(run->fill, r);
		wal_sample(run);
	}
	return r;
}

/* bs_claim: BS_CLAIMS claims of BS_CLAIM_N ready entries in front of the
 * backlog, each acked after (not timed). */
static enum sd_result bs_claim(struct bs_run *run, struct bs_step *s)
{
	struct enqueue e = { "bench_claim", "{}", NULL, 0, 0 };
	struct job *jobs[BS_CLAIM_N];
	int64_t ids[BS_CLAIM_N], t0;
	unsigned char acked[BS_CLAIM_N];
	double v[BS_CLAIMS];
	enum sd_result r = SD_OK;
	int i, k, got = 0;

	for (i = 0; i < BS_CLAIMS; i++) {
		if ((r = db_begin(run->fill)) != SD_OK)
			return r;
		for (k = 0; k < BS_CLAIM_N && r == SD_OK; k++)
			r = queue_enqueue(run->fill, &e, NULL);
		if ((r = db_end(run->fill, r)) != SD_OK)
			return r;
		t0 = clock_mono_us();
		if ((r = queue_claim(run->fill, "bench-scale", BS_CLAIM_N, 60000, jobs, &got)) !=
		    SD_OK)
			return r;
		v[i] = (double)(clock_mono_us() - t0) / 1000.0;
		for (k = 0; k < got; k++)
			ids[k] = jobs[k]->id;
		if (got > 0)
			r = queue_ack_many(run->fill, jobs[0]->lease_token, ids, got, acked);
		for (k = 0; k < got; k++)
			job_free(jobs[k]);
		if (r != SD_OK)
			return r;
		if (got != BS_CLAIM_N)
			return err_set(SD_DB, "claim: %d entries, not %d", got, BS_CLAIM_N);
	}
	s->ms[BS_CLAIM] = median(v, BS_CLAIMS);
	wal_sample(run);
	return SD_OK;
}

static const char SQL_ORDER_AT[] =
	"SELECT public_id, id FROM orders WHERE id >= ?1 ORDER BY id LIMIT 1";

/* An order's job ids, as order_show finds them. */
struct bs_jobs {
	char id[8][QUEUE_JOB_ID_MAX + 1];
	int n;
};

static void bs_job(const struct outbox_row *o, void *arg)
{
	struct bs_jobs *j = arg;

	if (j->n < 8)
		snprintf(j->id[j->n++], sizeof j->id[0], "%s", o->job_id);
}

static void bs_entry(const struct job_row *jr, void *arg)
{
	(void)jr;
	(void)arg;
}

/* The queue's part of order_show: queue_find_job for each of its jobs. */
static enum sd_result bs_find(struct bs_run *run, int64_t order_id, double *ms)
{
	struct bs_jobs j = { { "" }, 0 };
	enum sd_result r;
	int64_t t0;
	int k;

	if ((r = outbox_list_for_order(run->full, order_id, bs_job, &j)) != SD_OK)
		return r;
	t0 = clock_mono_us();
	for (k = 0; k < j.n; k++)
		if ((r = queue_find_job(run->full, j.id[k], bs_entry, NULL)) != SD_OK)
			return r;
	*ms = (double)(clock_mono_us() - t0) / 1000.0;
	return SD_OK;
}

/* bs_show: order_show of orders spread evenly over the history, and the
 * queue's part of it. */
static enum sd_result bs_show(struct bs_run *run, struct bs_step *s)
{
	double v[BS_SHOWS], f[BS_SHOWS];
	char id[ORDER_ID_MAX];
	struct db_stmt *st;
	enum sd_result r;
	int64_t t0, spent = 0, order_id;
	struct order_detail *d;
	int i, n = 0, row = 0;

	for (i = 0; i < BS_SHOWS && (n < 3 || spent < BS_READ_BUDGET_US); i++) {
		if (!(st = db_stmt(run->full, SQL_ORDER_AT)))
			return SD_DB;
		db_bind_int(st, 1, 1 + (run->orders - 1) * i / (BS_SHOWS - 1));
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		snprintf(id, sizeof id, "%s", row ? db_col_text(st, 0) : "");
		order_id = row ? db_col_int(st, 1) : 0;
		db_reset(st);
		t0 = clock_mono_us();
		if ((r = order_detail_get(run->full, id, &d)) != SD_OK)
			return r;
		order_detail_free(d);
		v[n] = (double)(clock_mono_us() - t0) / 1000.0;
		spent += clock_mono_us() - t0;
		if ((r = bs_find(run, order_id, &f[n])) != SD_OK)
			return r;
		n++;
	}
	s->ms[BS_SHOW] = median(v, n);
	s->ms[BS_FIND] = median(f, n);
	return SD_OK;
}

/* One API call, in process; anything but a 200 fails. */
static enum sd_result bs_get(struct bs_run *run, const char *path, const char *query)
{
	struct api_request q = { "GET", path, query, run->auth, NULL, NULL, NULL, 0 };
	struct api_response res;
	enum sd_result r = SD_OK;

	api_handle(run->api, &q, &res);
	if (res.status != 200)
		r = err_set(SD_DB, "GET %s%s%s: %d %.200s", path, query ? "?" : "",
			    query ? query : "", res.status, res.body ? res.body : "");
	api_response_free(&res);
	return r;
}

static void no_event(const struct event_view *v, void *arg)
{
	(void)v;
	(void)arg;
}

/* One sample of read `which`. */
static enum sd_result bs_read_once(struct bs_run *run, int which)
{
	struct queue_counts *rows = NULL, total;
	int64_t orders, emails;
	enum sd_result r;
	int n;

	switch (which) {
	case BS_STATS:
		return bs_get(run, "/v1/stats", NULL);
	case BS_METRICS:
		return bs_get(run, "/metrics", NULL);
	case BS_HEALTHZ:
		return bs_get(run, "/healthz", NULL);
	case BS_DASH:
		if ((r = bs_get(run, "/v1/stats", NULL)) != SD_OK ||
		    (r = bs_get(run, "/v1/jobs", "state=leased")) != SD_OK ||
		    (r = bs_get(run, "/v1/jobs", "state=dead")) != SD_OK)
			return r;
		return bs_get(run, "/v1/orders", "recent=20");
	case BS_JOBS:
		r = queue_stats(run->full, &rows, &n, &total);
		free(rows);
		return r;
	default:
		if ((r = event_box_totals(run->full, &orders, &emails)) != SD_OK)
			return r;
		return event_each(run->full, no_event, NULL);
	}
}

static enum sd_result bs_reads(struct bs_run *run, struct bs_step *s)
{
	double v[BS_READS];
	enum sd_result r;
	int64_t t0, spent;
	int which, n;

	for (which = BS_STATS; which < BS_COSTS; which++) {
		for (n = 0, spent = 0; n < BS_READS && (n < 3 || spent < BS_READ_BUDGET_US); n++) {
			t0 = clock_mono_us();
			if ((r = bs_read_once(run, which)) != SD_OK)
				return r;
			v[n] = (double)(clock_mono_us() - t0) / 1000.0;
			spent += clock_mono_us() - t0;
		}
		s->ms[which] = median(v, n);
	}
	wal_sample(run);
	return SD_OK;
}

/* ======================== the run ======================================== */

static enum sd_result bs_open(struct bs_run *run, const char *path)
{
	struct api_opts o = { path, NULL, 0, NULL, NULL, 1, NULL, 0 };
	struct event_new ev = { "Stagedoor Scale Night", "Bench Hall", 0, 1000000 };
	char token[API_TOKEN_HEX + 1];
	enum sd_result r;
	int e;

	run->path = path;
	ev.starts_at = clock_now_ms() + 30 * 86400000LL;
	if ((r = db_open(path, DB_OPEN_CREATE, DB_SYNC_FULL, &run->full)) != SD_OK ||
	    (r = db_open(path, 0, DB_SYNC_NORMAL, &run->fill)) != SD_OK ||
	    (r = statedir_init(path, NULL)) != SD_OK ||
	    (r = token_ensure(path, NULL)) != SD_OK || (r = bench_token(path, token)) != SD_OK ||
	    (r = api_open(&o, &run->api)) != SD_OK)
		return r;
	snprintf(run->auth, sizeof run->auth, "Bearer %s", token);
	for (e = 0; e < BS_EVENTS; e++)
		if ((r = event_add(run->full, &ev, &run->events[e])) != SD_OK)
			return r;
	return SD_OK;
}

static enum sd_result bs_go(const char *dir, const char *path, void *arg)
{
	struct bs_args *a = arg;
	struct bs_run run;
	struct stat st;
	enum sd_result r;
	int64_t t0;
	int i;

	(void)dir;
	memset(&run, 0, sizeof run);
	if ((r = bs_open(&run, path)) != SD_OK || (r = bs_backlog(&run, a->backlog)) != SD_OK)
		goto out;
	for (i = 0; i < a->n_sizes; i++) {
		struct bs_step *s = &a->steps[i];

		run.wal_peak = 0;
		t0 = clock_mono_us();
		bench_progress("size %lld: fill", (long long)a->sizes[i]);
		if ((r = bs_fill(&run, a->sizes[i])) != SD_OK)
			goto out;
		s->fill_s = (double)(clock_mono_us() - t0) / 1e6;
		bench_progress("size %lld: measure", (long long)a->sizes[i]);
		s->orders = run.orders;
		if ((r = bs_intake(&run, a->intake, s)) != SD_OK || (r = bs_claim(&run, s)) != SD_OK ||
		    (r = bs_show(&run, s)) != SD_OK || (r = bs_reads(&run, s)) != SD_OK)
			goto out;
		s->db_bytes = stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
		s->wal_peak = run.wal_peak;
	}
out:
	api_close(run.api);
	db_close(run.fill);
	db_close(run.full);
	return r;
}

/* ======================== the report ===================================== */

static double bs_ratio(const struct bs_args *a, int cost)
{
	double lo = a->steps[0].ms[cost], hi = a->steps[a->n_sizes - 1].ms[cost];

	return lo > 0 ? hi / lo : 0;
}

static void bs_print_json(const struct bs_args *a)
{
	int i, c;

	printf("{\"program\":\"stagedoor\",\"bench\":\"scale\",\"events\":%d,\"backlog\":%lld,"
	       "\"intake_orders\":%lld,\"goal\":%.1f,\"steps\":[", BS_EVENTS,
	       (long long)a->backlog, (long long)a->intake, BS_GOAL);
	for (i = 0; i < a->n_sizes; i++) {
		const struct bs_step *s = &a->steps[i];

		printf("%s{\"size\":%lld,\"orders\":%lld,\"intake_orders_per_s\":%.1f", i ? "," : "",
		       (long long)a->sizes[i], (long long)s->orders, s->intake_per_s);
		for (c = 0; c < BS_COSTS; c++)
			printf(",\"%s_ms\":%.4f", bs_name[c], s->ms[c]);
		printf(",\"db_bytes\":%lld,\"wal_peak_bytes\":%lld,\"fill_s\":%.2f}",
		       (long long)s->db_bytes, (long long)s->wal_peak, s->fill_s);
	}
	printf("],\"ratios\":{");
	for (c = 0; c < BS_COSTS; c++)
		printf("%s\"%s\":%.3f", c ? "," : "", bs_name[c], bs_ratio(a, c));
	printf("},\"meets\":{");
	for (c = 0; c < BS_COSTS; c++)
		printf("%s\"%s\":%s", c ? "," : "", bs_name[c],
		       bs_ratio(a, c) <= BS_GOAL ? "true" : "false");
	printf("}}\n");
}

static void bs_print(const struct bs_args *a)
{
	int i, c;

	printf("stagedoor-bench scale: %d events, %lld entries scheduled behind, history of "
	       "finished orders (2 tickets, 1 email, 3 done jobs each); medians\n", BS_EVENTS,
	       (long long)a->backlog);
	printf("  %-24s", "orders");
	for (i = 0; i < a->n_sizes; i++)
		printf(" %12lld", (long long)a->sizes[i]);
	printf("   ratio  <= %.1f\n", BS_GOAL);
	for (c = 0; c < BS_COSTS; c++) {
		printf("  %-24s", bs_label[c]);
		for (i = 0; i < a->n_sizes; i++)
			printf(" %12.3f", a->steps[i].ms[c]);
		printf(" %7.2f  %s\n", bs_ratio(a, c), bs_ratio(a, c) <= BS_GOAL ? "yes" : "no");
	}
	printf("  %-24s", "intake orders/s");
	for (i = 0; i < a->n_sizes; i++)
		printf(" %12.1f", a->steps[i].intake_per_s);
	printf("\n  %-24s", "database MiB");
	for (i = 0; i < a->n_sizes; i++)
		printf(" %12.1f", (double)a->steps[i].db_bytes / 1048576.0);
	printf("\n  %-24s", "peak WAL MiB");
	for (i = 0; i < a->n_sizes; i++)
		printf(" %12.1f", (double)a->steps[i].wal_peak / 1048576.0);
	printf("\n  %-24s", "fill s");
	for (i = 0; i < a->n_sizes; i++)
		printf(" %12.1f", a->steps[i].fill_s);
	printf("\n  costs in ms; intake: %lld real orders (order_add, one FULL commit each) at "
	       "each size\n", (long long)a->intake);
}

/* "10000,100000": ascending sizes of 100 to 10,000,000 orders. */
static int bs_sizes(const char *s, struct bs_args *a)
{
	char *end;
	long long v;

	a->n_sizes = 0;
	while (*s && a->n_sizes < BS_SIZES_MAX) {
		v = strtoll(s, &end, 10);
		if (end == s || v < 100 || v > 10000000 ||
		    (a->n_sizes && v <= a->sizes[a->n_sizes - 1]) || (*end && *end != ','))
			return -1;
		a->sizes[a->n_sizes++] = v;
		s = *end ? end + 1 : end;
	}
	return *s || a->n_sizes == 0 ? -1 : 0;
}

int bench_scale_cmd(int argc, char **argv)
{
	static struct bs_args a;
	const char *sizes = "10000,100000,1000000";
	int64_t intake = 300, backlog = 100000;
	int json = 0, keep = 0, rc;
	struct arg_opt opts[] = {
		{ "sizes", ARG_STR, &sizes, 0, 0, 0, "A,B,C",
		  "history sizes in finished orders, comma-separated", 0 },
		{ "intake", ARG_INT, &intake, 3, 100000, 0, NULL,
		  "orders timed at each size", 0 },
		{ "backlog", ARG_INT, &backlog, 0, 10000000, 0, NULL,
		  "jobs waiting in the stream at each size", 0 },
		BENCH_ARG_KEEP(&keep),
		ARG_JSON(&json),
		ARG_END,
	};
	static const char usage[] =
		"scale [--sizes A,B,C] [--intake N] [--backlog N] [--json] [--keep]";

	if ((rc = bench_args(argc, argv, opts, usage)) != 0)
		return rc;
	if (bs_sizes(sizes, &a) != 0) {
		fprintf(stderr, "stagedoor-bench: usage: stagedoor-bench %s (sizes: ascending, 100 to "
			"10000000 orders, at most %d)\n", usage, BS_SIZES_MAX);
		return 2;
	}
	a.intake = intake;
	a.backlog = backlog;
	if ((rc = bench_in_dir(keep, bs_go, &a)) != 0)
		return rc;
	if (json)
		bs_print_json(&a);
	else
		bs_print(&a);
	return 0;
}
