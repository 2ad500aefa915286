/*
 * bench_intake.c: `stagedoor-bench intake`, durable order intake under
 * concurrency: how many orders a second one client and many clients get
 * accepted, each answer meaning the order is on disk.
 *
 *   stagedoor-bench intake [--orders N] [--clients A,B] [--via http,cli]
 *                          [--rounds R] [--json] [--keep]
 *
 * On a fresh box in a temporary directory (as `init` makes one, with one
 * event with room for every order), for each round, each way in and each
 * client count in turn (alternating, so a noisy moment hits all of them):
 *
 *   http  C client threads, each on one keep-alive connection to the real
 *         server (serve_start on 127.0.0.1:0, in this process), send
 *         POST /v1/orders with a key of its own, one request at a time;
 *         each answer must be 201;
 *   cli   C client threads, each running `stagedoor order add ... --db`
 *         (this program, a process per order) one after another; each must
 *         exit 0.
 *
 * N orders a measurement, shared by its clients.  Afterwards the database
 * must hold every order answered.  A latency is one order's wall time: the
 * request's first byte to its answer's last, or the process's start to its
 * exit.  Reported per way and client count: the medians over the rounds of
 * orders/s, p50 and p99, and the ratio of the largest count's orders/s to
 * the smallest's (the share of fsyncs: the server's concurrent orders
 * commit in groups, one flush each, db_group.h; each `order add` is a
 * process of its own and pays its own flush).
 */
#define _GNU_SOURCE
#include "cli.h"
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "args.h"
#include "bench_http.h"
#include "clock.h"
#include "db.h"
#include "events.h"
#include "serve.h"

#define BI_COUNTS_MAX 4
#define BI_ROUNDS_MAX 9
#define BI_CLIENTS_MAX 64

enum { BI_HTTP, BI_CLI, BI_WAYS };

static const char *const bi_way_name[BI_WAYS] = { "http", "cli" };

extern char **environ;

/* What one measurement (a way, a client count, a round) found. */
struct bi_cell {
	double per_s, p50_ms, p99_ms;
};

struct bi_args {
	int64_t orders;			/* a measurement */
	int counts[BI_COUNTS_MAX], n_counts;
	int ways[BI_WAYS];		/* 1: measured */
	int rounds;
	struct bi_cell cell[BI_WAYS][BI_COUNTS_MAX][BI_ROUNDS_MAX];
	int64_t stored;			/* orders in the database at the end */
	int64_t answered;		/* orders answered 201 or exit 0 */
};

/* One measurement, shared by its client threads. */
struct bi_run {
	const char *db_path;
	char exe[PATH_MAX];		/* this program, for cli */
	char token[API_TOKEN_HEX + 1];
	char event[24];
	int port;
	int way, clients;
	int64_t n, base;		/* orders, and the first one's number */
	int64_t *us;			/* [n] latencies */
	struct bench_failure fail;	/* the first failure of its threads */
};

struct bi_client {
	pthread_t th;
	struct bi_run *run;
	int idx;
	int64_t end_us;
};

/* order k (0..n) of the measurement over HTTP: 201 or a failure */
static int bi_http_order(struct bi_run *run, struct bench_http *c, int64_t k)
{
	char body[256], req[1024];
	const char *ans = NULL;
	size_t len = 0;
	int n, status = 0;
	long long no = (long long)(run->base + k);

	n = snprintf(body, sizeof body, "{\"event_id\":%s,\"name\":\"Intake Buyer %lld\","
		     "\"email\":\"buyer%lld@example.com\",\"seats\":1}", run->event, no, no);
	n = snprintf(req, sizeof req, "POST /v1/orders HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		     "Authorization: Bearer %s\r\nIdempotency-Key: bench-intake-%lld\r\n"
		     "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		     run->token, no, n, body);
	if (bench_http_call(c, req, (size_t)n, &status, &ans, &len) != 0) {
		bench_fail(&run->fail, "http: order %lld: %s", no, c->err);
		return -1;
	}
	if (status != 201) {
		bench_fail(&run->fail, "http: order %lld answered %d, not 201: %.200s", no, status,
			   ans);
		return -1;
	}
	return 0;
}

/* order k over the CLI: a process of this program, exit 0 or a failure */
static int bi_cli_order(struct bi_run *run, int64_t k)
{
	char name[64], email[64], key[64], errp[PATH_MAX + 32];
	long long no = (long long)(run->base + k);
	const char *argv[] = { run->exe, "order", "add", "--event", run->event, "--name", name,
			       "--email", email, "--seats", "1", "--idempotency-key", key,
			       "--db", run->db_path, NULL };
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int st = 0, rc;

	snprintf(name, sizeof name, "Intake Buyer %lld", no);
	snprintf(email, sizeof email, "buyer%lld@example.com", no);
	snprintf(key, sizeof key, "bench-intake-%lld", no);
	snprintf(errp, sizeof errp, "%s.err-%lld", run->db_path, no);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	rc = posix_spawn(&pid, run->exe, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		bench_fail(&run->fail, "cli: cannot start %s: %s", run->exe, strerror(rc));
		return -1;
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char msg[300] = "";
		FILE *f = fopen(errp, "r");

		if (f) {
			if (!fgets(msg, sizeof msg, f))
				msg[0] = '\0';
			fclose(f);
		}
		msg[strcspn(msg, "\n")] = '\0';
		bench_fail(&run->fail, "cli: order add %lld ended with status %d: %s", no, st, msg);
		return -1;
	}
	unlink(errp);
	return 0;
}

static void *bi_client_run(void *arg)
{
	struct bi_client *c = arg;
	struct bi_run *run = c->run;
	struct bench_http conn;
	int64_t k;

	bench_http_init(&conn, run->port);
	if (run->way == BI_HTTP && bench_http_dial(&conn) != 0)
		bench_fail(&run->fail, "http: %s", conn.err);
	for (k = c->idx; k < run->n && !atomic_load(&run->fail.failed); k += run->clients) {
		int64_t t0 = clock_mono_us();

		if ((run->way == BI_HTTP ? bi_http_order(run, &conn, k) : bi_cli_order(run, k)) != 0)
			break;
		run->us[k] = clock_mono_us() - t0;
	}
	c->end_us = clock_mono_us();
	bench_http_close(&conn);
	return NULL;
}

/* bi_measure: one way at one client count; [out] *cell */
static enum sd_result bi_measure(struct bi_run *run, struct bi_cell *cell)
{
	struct bi_client cl[BI_CLIENTS_MAX];
	int64_t t0, end = 0;
	int i, started;

	memset(cl, 0, sizeof cl);
	atomic_store(&run->fail.failed, 0);
	t0 = clock_mono_us();
	for (started = 0; started < run->clients; started++) {
		cl[started].run = run;
		cl[started].idx = started;
		if (pthread_create(&cl[started].th, NULL, bi_client_run, &cl[started]) != 0) {
			bench_fail(&run->fail, "cannot start a client thread");
			break;
		}
	}
	for (i = 0; i < started; i++) {
		pthread_join(cl[i].th, NULL);
		if (cl[i].end_us > end)
			end = cl[i].end_us;
	}
	if (atomic_load(&run->fail.failed))
		return err_set(SD_IO, "%s", run->fail.err);
	bench_sort_i64(run->us, run->n);
	cell->per_s = (double)run->n / ((double)(end - t0) / 1e6);
	cell->p50_ms = bench_pct_ms(run->us, run->n, 0.50);
	cell->p99_ms = bench_pct_ms(run->us, run->n, 0.99);
	return SD_OK;
}

/* bi_rounds: every round, way and client count, in that nesting */
static enum sd_result bi_rounds(struct bi_args *a, struct bi_run *run)
{
	enum sd_result r;
	int round, way, i;

	for (round = 0; round < a->rounds; round++)
		for (way = 0; way < BI_WAYS; way++)
			for (i = 0; a->ways[way] && i < a->n_counts; i++) {
				struct bi_cell *cell = &a->cell[way][i][round];

				run->way = way;
				run->clients = a->counts[i];
				bench_progress("round %d of %d: %s, %d client%s, %lld orders", round + 1,
					       a->rounds, bi_way_name[way], run->clients,
					       run->clients == 1 ? "" : "s", (long long)run->n);
				if ((r = bi_measure(run, cell)) != SD_OK)
					return r;
				a->answered += run->n;
				run->base += run->n;
			}
	return SD_OK;
}

/* bi_go (bench_in_dir's fn): the box, its server, the measurements */
static enum sd_result bi_go(const char *dir, const char *path, void *arg)
{
	struct bi_args *a = arg;
	struct bi_run run;
	struct serve *sv = NULL;
	struct db *db = NULL;
	enum sd_result r;
	int64_t id, emails = 0, total = a->orders * a->rounds * a->n_counts * BI_WAYS;

	(void)dir;
	memset(&run, 0, sizeof run);
	pthread_mutex_init(&run.fail.mu, NULL);
	run.db_path = path;
	run.n = a->orders;
	run.base = 1;
	/* `order add` is the product's command: bin/stagedoor beside build/ */
	bench_beside("../bin/stagedoor", run.exe, sizeof run.exe);
	if (access(run.exe, X_OK) != 0) {
		r = err_set(SD_IO, "--via cli needs %s (make bin/stagedoor)", run.exe);
		goto out;
	}
	if (!(run.us = calloc((size_t)a->orders, sizeof *run.us))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	if ((r = bench_box(path, "Stagedoor Intake Night", total, &db, run.token, &id)) != SD_OK)
		goto out;
	snprintf(run.event, sizeof run.event, "%lld", (long long)id);
	if (a->ways[BI_HTTP]) {
		if ((r = serve_start(&(struct serve_opts){ .db_path = path, .listen = "127.0.0.1:0",
							   .per_client_max = BI_CLIENTS_MAX + 8 },
				     &sv)) != SD_OK)
			goto out;
		run.port = serve_port(sv);
	}
	if ((r = bi_rounds(a, &run)) != SD_OK)
		goto out;
	if ((r = event_box_totals(db, &a->stored, &emails)) == SD_OK && a->stored != a->answered)
		r = err_set(SD_DB, "%lld orders answered, %lld in the database",
			    (long long)a->answered, (long long)a->stored);
out:
	serve_stop(sv);
	db_close(db);
	free(run.us);
	pthread_mutex_destroy(&run.fail.mu);
	return r;
}

/* ======================== the report ===================================== */

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* the median over the rounds of one field (offset into bi_cell) */
static double bi_median(const struct bi_args *a, int way, int i, size_t field)
{
	double v[BI_ROUNDS_MAX];
	int k;

	for (k = 0; k < a->rounds; k++)
		v[k] = *(const double *)((const char *)&a->cell[way][i][k] + field);
	qsort(v, (size_t)a->rounds, sizeof v[0], cmp_double);
	return a->rounds % 2 ? v[a->rounds / 2] : (v[a->rounds / 2 - 1] + v[a->rounds / 2]) / 2;
}

#define MED(a, w, i, f) bi_median((a), (w), (i), offsetof(struct bi_cell, f))

static void bi_print(const struct bi_args *a, int json)
{
	int way, i, last = a->n_counts - 1;

	if (json) {
		printf("{\"program\":\"stagedoor\",\"bench\":\"intake\",\"orders\":%lld,"
		       "\"rounds\":%d,\"stored\":%lld", (long long)a->orders, a->rounds,
		       (long long)a->stored);
		for (way = 0; way < BI_WAYS; way++) {
			if (!a->ways[way])
				continue;
			printf(",\"%s\":{\"clients\":[", bi_way_name[way]);
			for (i = 0; i < a->n_counts; i++)
				printf("%s{\"clients\":%d,\"orders_per_s\":%.1f,\"p50_ms\":%.3f,"
				       "\"p99_ms\":%.3f}", i ? "," : "", a->counts[i],
				       MED(a, way, i, per_s), MED(a, way, i, p50_ms),
				       MED(a, way, i, p99_ms));
			printf("],\"ratio\":%.2f}", MED(a, way, last, per_s) / MED(a, way, 0, per_s));
		}
		printf("}\n");
		return;
	}
	printf("stagedoor-bench intake: %lld orders a measurement, medians of %d rounds, "
	       "each answer after its commit's fsync\n", (long long)a->orders, a->rounds);
	printf("  way   clients    orders/s   p50 ms   p99 ms\n");
	for (way = 0; way < BI_WAYS; way++) {
		if (!a->ways[way])
			continue;
		for (i = 0; i < a->n_counts; i++)
			printf("  %-5s %7d %11.1f %8.2f %8.2f\n", bi_way_name[way], a->counts[i],
			       MED(a, way, i, per_s), MED(a, way, i, p50_ms), MED(a, way, i, p99_ms));
		printf("  %-5s %d clients / %d: %.2fx the orders/s\n", bi_way_name[way],
		       a->counts[last], a->counts[0],
		       MED(a, way, last, per_s) / MED(a, way, 0, per_s));
	}
	printf("  orders      %lld answered, %lld in the database\n", (long long)a->answered,
	       (long long)a->stored);
}

/* ======================== the command ==================================== */

static int bi_counts(const char *s, struct bi_args *a)
{
	char *end;
	long v;

	a->n_counts = 0;
	while (*s && a->n_counts < BI_COUNTS_MAX) {
		v = strtol(s, &end, 10);
		if (end == s || v < 1 || v > BI_CLIENTS_MAX ||
		    (a->n_counts && v <= a->counts[a->n_counts - 1]) || (*end && *end != ','))
			return -1;
		a->counts[a->n_counts++] = (int)v;
		s = *end ? end + 1 : end;
	}
	return *s || a->n_counts == 0 ? -1 : 0;
}

static int bi_ways(const char *s, struct bi_args *a)
{
	memset(a->ways, 0, sizeof a->ways);
	if (!strcmp(s, "http") || !strcmp(s, "http,cli") || !strcmp(s, "cli,http"))
		a->ways[BI_HTTP] = 1;
	if (!strcmp(s, "cli") || !strcmp(s, "http,cli") || !strcmp(s, "cli,http"))
		a->ways[BI_CLI] = 1;
	return a->ways[BI_HTTP] || a->ways[BI_CLI] ? 0 : -1;
}

int bench_intake_cmd(int argc, char **argv)
{
	static struct bi_args a;
	const char *counts = "1,16", *ways = "http,cli";
	int64_t orders = 400, rounds = 3;
	int json = 0, keep = 0, rc;
	struct arg_opt opts[] = {
		{ "orders", ARG_INT, &orders, 16, 100000, 0, NULL,
		  "orders per round", 0 },
		{ "clients", ARG_STR, &counts, 0, 0, 0, "A,B",
		  "the client counts to measure, comma-separated", 0 },
		{ "via", ARG_STR, &ways, 0, 0, 0, "http,cli",
		  "the ways in: http, cli or both", 0 },
		{ "rounds", ARG_INT, &rounds, 1, BI_ROUNDS_MAX, 0, NULL,
		  "rounds per setting; the median is reported", 0 },
		BENCH_ARG_KEEP(&keep),
		ARG_JSON(&json),
		ARG_END,
	};
	static const char usage[] = "intake [--orders N] [--clients A,B] [--via http,cli] "
				    "[--rounds R] [--json] [--keep]";

	if ((rc = bench_args(argc, argv, opts, usage)) != 0)
		return rc;
	if (bi_counts(counts, &a) != 0 || bi_ways(ways, &a) != 0) {
		fprintf(stderr, "stagedoor-bench: usage: stagedoor-bench %s (clients: ascending, 1 to %d, at "
			"most %d; via: http, cli or both)\n", usage, BI_CLIENTS_MAX, BI_COUNTS_MAX);
		return 2;
	}
	a.orders = orders;
	a.rounds = (int)rounds;
	if ((rc = bench_in_dir(keep, bi_go, &a)) != 0)
		return rc;
	bi_print(&a, json);
	return 0;
}
