/*
 * bench_api.c: `stagedoor-bench api`, the HTTP intake's benchmark: requests
 * per second and per-request latency through the real server, over TCP.
 *
 *   stagedoor-bench api [--requests N] [--clients C] [--tls] [--json] [--keep]
 *
 * On a fresh database in a temporary directory (under $TMPDIR, else /tmp;
 * removed afterwards unless --keep), made as `init` makes one (schema, ticket
 * key, api.token), with one event with room for every seat, it starts the
 * server in this process (serve_start on 127.0.0.1:0, as `serve` runs it) and
 * C client threads, each on one keep-alive HTTP/1.1 connection (plain
 * sockets: the server's library stays in http.c), take the N requests of a
 * phase in turn (client t sends requests t, t + C, ...):
 *
 *   1. orders    POST /v1/orders, a JSON body (1 to 3 seats), a bearer token
 *                from <dir>/api.token and an Idempotency-Key of its own:
 *                each a new order committed at synchronous=FULL; 201 each;
 *   2. replays   the same N requests again: each 201 with the body the first
 *                answer had, byte for byte (the stored answer), and the
 *                database still holds N orders afterwards;
 *   3. reads     GET /v1/orders/{id} for each id phase 1 returned; 200 each;
 *   4. stats     GET /v1/stats; 200 each;
 *   5. scans     POST /v1/scan of the first N tickets' codes (made with the
 *                box's ticket key, as the PDFs print them), each with a
 *                nonce of its own: each admitted, a conditional update and
 *                a row of the scan log in one FULL commit.
 *
 * An answer other than the one expected fails the command (with the request
 * and the answer named), and no figure is reported.  Each phase reports
 * requests/s (N / its wall time) and the latency p50/p90/p99 of its requests,
 * each the client's wall time from the first byte sent to the last byte of
 * the answer read (nearest rank of the sorted samples); then the peak RSS of
 * the process (server and clients together) and the WAL's size at the end.
 *
 * With --tls the run goes on to the transports, side by side: a second
 * server in this process serves the same database over HTTPS (serve_start
 * with tls_cert/tls_key: a throwaway box CA and server certificate for
 * localhost and 127.0.0.1, made by cert_init in the bench folder's tls/),
 * and the reads phase runs again over four transports, interleaved, in
 * BA_TLS_ROUNDS rounds of N requests each:
 *
 *   http_keepalive   plain HTTP, C keep-alive connections (the reads phase)
 *   http_new_conn    plain HTTP, a new TCP connection for every request
 *   https_keepalive  TLS, C keep-alive sessions: the cost of the records
 *   https_handshake  TLS, a new connection and a full handshake (no session
 *                    resumption) for every request: handshakes/s
 *
 * Then the door's scans, side by side over plain HTTP and HTTPS keep-alive,
 * interleaved, BA_TLS_ROUNDS rounds of N: the same tickets again, so each
 * answers already_scanned, still a FULL commit of its log row.
 *
 * The client is cert.h's (mbedTLS, TLS 1.2, the server's certificate
 * verified against the throwaway CA for "localhost"); each figure is the
 * median of the rounds.  A new-connection transport fails the run unless
 * it made exactly one connection per request.
 *
 * The clients send one request at a time and wait for its answer, so C is
 * also the most requests in the server at once.  No relay or worker runs:
 * the outbox rows the orders write stay unpublished, as in a box whose
 * workers are behind.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "bench.h"

#include <errno.h>
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

#include "api.h"
#include "args.h"
#include "bench_http.h"
#include "cert.h"
#include "clock.h"
#include "code.h"
#include "db.h"
#include "events.h"
#include "orders.h"
#include "progress.h"
#include "serve.h"
#include "tickets.h"

#define BA_REQUESTS_DEFAULT 2000
#define BA_CLIENTS_DEFAULT 4
#define BA_CLIENTS_MAX 64
#define BA_TLS_ROUNDS 3
/* every client's connections come from 127.0.0.1: room for all of them,
 * and for the closed ones of a new-connection transport not yet reaped */
#define BA_PER_CLIENT_MAX (8 * BA_CLIENTS_MAX)

enum { BA_ORDERS, BA_REPLAYS, BA_READS, BA_STATS, BA_SCANS, BA_PHASES };

static const char *const ba_phase_name[BA_PHASES] = { "orders", "replays", "reads", "stats",
						      "scans" };

/* --tls: the reads phase over each transport */
enum { BA_HTTP, BA_HTTP_NEW, BA_HTTPS, BA_HTTPS_NEW, BA_TRANSPORTS };

static const char *const ba_transport_name[BA_TRANSPORTS] = {
	"http_keepalive", "http_new_conn", "https_keepalive", "https_handshake"
};

/* What one phase measured. */
struct ba_phase {
	double wall_s;			/* first request sent to last answer read */
	double p50_ms, p90_ms, p99_ms;	/* per-request latency */
	double server_cpu_ms;		/* CPU time per request of all but the client
					 * threads: the server's share */
};

/* The run, shared by the client threads of a phase. */
struct ba_run {
	int port;
	char token[API_TOKEN_HEX + 1];	/* the bearer token */
	int64_t event_id;
	int64_t n;			/* requests a phase */
	int clients;
	int phase;			/* BA_*: what the clients send now */
	char **first;			/* [n] phase 1's answers, NUL-terminated */
	char (*id)[ORDER_ID_MAX];	/* [n] the order ids phase 1 returned */
	char (*code)[CODE_TEXT_MAX];	/* [n] ticket i + 1's code, for the scans */
	int scan_round;			/* 0: the scans admit; then: already scanned */
	int64_t *us;			/* [n] this phase's latencies */
	atomic_llong done;		/* requests answered this phase (progress) */
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* signalled as each client thread returns */
	int ended;			/* under mu: client threads that returned */
	atomic_int failed;		/* a client failed: the others stop too */
};

/* One client thread: its connection and what went wrong, if anything. */
struct ba_client {
	pthread_t th;
	struct ba_run *run;
	int idx;			/* sends requests idx, idx + clients, ... */
	struct bench_http conn;
	int64_t matched;		/* replays matched by this client */
	int64_t end_us;			/* its last answer read (clock_mono_us) */
	int64_t cpu_us;			/* CPU time the thread used in the phase */
	int failed;
	char err[400];
};

/* ======================== a client's failure ============================ */

static int ba_fail(struct ba_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int ba_fail(struct ba_client *c, const char *fmt, ...)
{
	va_list ap;

	if (!c->failed) {
		va_start(ap, fmt);
		vsnprintf(c->err, sizeof c->err, fmt, ap);
		va_end(ap);
		c->failed = 1;
		atomic_store(&c->run->failed, 1);
	}
	return -1;
}

/* ======================== the clients ==================================== */

/* ba_request: request i of the run's phase into buf (size bytes); its length. */
static size_t ba_request(const struct ba_run *run, int64_t i, char *buf, size_t size)
{
	char body[256];
	int n;

	if (run->phase == BA_READS)
		return (size_t)snprintf(buf, size, "GET /v1/orders/%s HTTP/1.1\r\nHost: 127.0.0.1"
					"\r\nAuthorization: Bearer %s\r\n\r\n", run->id[i],
					run->token);
	if (run->phase == BA_STATS)
		return (size_t)snprintf(buf, size, "GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n"
					"Authorization: Bearer %s\r\n\r\n", run->token);
	if (run->phase == BA_SCANS) {
		n = snprintf(body, sizeof body, "{\"code\":\"%s\",\"nonce\":\"bench-%d-%lld\"}",
			     run->code[i], run->scan_round, (long long)i);
		return (size_t)snprintf(buf, size, "POST /v1/scan HTTP/1.1\r\nHost: 127.0.0.1\r\n"
					"Authorization: Bearer %s\r\nContent-Type: application/json"
					"\r\nContent-Length: %d\r\n\r\n%s", run->token, n, body);
	}
	/* orders and replays: the same bytes for the same i, as a replay must be */
	n = snprintf(body, sizeof body, "{\"event_id\":%lld,\"name\":\"Bench Buyer %lld\","
		     "\"email\":\"buyer%lld@example.com\",\"seats\":%d}", (long long)run->event_id,
		     (long long)i + 1, (long long)i + 1, (int)(1 + i % 3));
	return (size_t)snprintf(buf, size, "POST /v1/orders HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				"Authorization: Bearer %s\r\nIdempotency-Key: bench-api-%lld\r\n"
				"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				run->token, (long long)i + 1, n, body);
}

/* ba_check: the answer to request i is the one its phase expects; phase 1
 * keeps it and the order id it names. */
static int ba_check(struct ba_client *c, int64_t i, int status, const char *body, size_t len)
{
	struct ba_run *run = c->run;
	const char *name = ba_phase_name[run->phase];
	int want = run->phase <= BA_REPLAYS ? 201 : 200;
	const char *p;

	if (status != want)
		return ba_fail(c, "%s: request %lld answered %d, not %d: %.200s", name,
			       (long long)i + 1, status, want, body);
	switch (run->phase) {
	case BA_ORDERS:
		if (!(p = strstr(body, "\"id\":\"")) ||
		    sscanf(p + 6, "%15[^\"]", run->id[i]) != 1)
			return ba_fail(c, "orders: request %lld: no order id in %.200s",
				       (long long)i + 1, body);
		if (!(run->first[i] = strndup(body, len)))
			return ba_fail(c, "out of memory");
		break;
	case BA_REPLAYS:
		if (strlen(run->first[i]) != len || memcmp(run->first[i], body, len) != 0)
			return ba_fail(c, "replays: request %lld answered %.200s, the first time "
				       "%.200s", (long long)i + 1, body, run->first[i]);
		c->matched++;
		break;
	case BA_READS:
		if (!strstr(body, run->id[i]))
			return ba_fail(c, "reads: GET /v1/orders/%s answered %.200s", run->id[i],
				       body);
		break;
	case BA_SCANS:
		if (!strstr(body, run->scan_round ? "\"result\":\"already_scanned\""
						  : "\"result\":\"admitted\""))
			return ba_fail(c, "scans: ticket %lld answered %.200s", (long long)i + 1, body);
		break;
	default:
		break;
	}
	return 0;
}

/* the CPU time of the calling thread (clk) or the process, in us */
static int64_t ba_cpu_us(clockid_t clk)
{
	struct timespec ts;

	if (clock_gettime(clk, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void *ba_client_run(void *arg)
{
	struct ba_client *c = arg;
	struct ba_run *run = c->run;
	int64_t i, cpu0 = ba_cpu_us(CLOCK_THREAD_CPUTIME_ID);
	char req[1024];

	/* a connection per phase, dialled before the first request's clock */
	if (bench_http_dial(&c->conn) != 0) {
		ba_fail(c, "%s", c->conn.err);
		goto out;
	}
	for (i = c->idx; i < run->n && !atomic_load(&run->failed); i += run->clients) {
		size_t req_len = ba_request(run, i, req, sizeof req), body_len = 0;
		const char *body = NULL;
		int64_t t0 = clock_mono_us();
		int status = 0;

		if (bench_http_call(&c->conn, req, req_len, &status, &body, &body_len) != 0) {
			ba_fail(c, "%s", c->conn.err);
			break;
		}
		run->us[i] = clock_mono_us() - t0;
		if (ba_check(c, i, status, body, body_len) != 0)
			break;
		atomic_fetch_add_explicit(&run->done, 1, memory_order_relaxed);
	}
out:
	c->end_us = clock_mono_us();
	bench_http_close(&c->conn);
	c->cpu_us = ba_cpu_us(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	pthread_mutex_lock(&run->mu);
	run->ended++;
	pthread_cond_signal(&run->cv);
	pthread_mutex_unlock(&run->mu);
	return NULL;
}

/*
 * ba_phase_run: the clients send the phase's N requests; the main thread only
 * moves the progress bar.  SD_IO with the first client's message when any
 * failed.
 */
static enum sd_result ba_phase_run(struct ba_run *run, struct ba_client *cl, int phase,
				   struct ba_phase *out)
{
	struct progress *bar;
	enum sd_result r = SD_OK;
	int64_t t0, end = 0, cpu0, client_cpu = 0;
	int i, started;

	run->phase = phase;
	atomic_store(&run->done, 0);
	atomic_store(&run->failed, 0);
	run->ended = 0;
	bar = progress_start(ba_phase_name[phase], run->n, "requests");
	t0 = clock_mono_us();
	cpu0 = ba_cpu_us(CLOCK_PROCESS_CPUTIME_ID);
	for (started = 0; started < run->clients; started++)
		if (pthread_create(&cl[started].th, NULL, ba_client_run, &cl[started]) != 0)
			break;
	for (i = started; i < run->clients; i++)
		ba_fail(&cl[i], "cannot start a client thread");
	/* wake as the last client returns, and every 100 ms for the bar */
	pthread_mutex_lock(&run->mu);
	while (run->ended < started) {
		struct timespec until;

		bench_deadline(&until, 100);
		pthread_cond_timedwait(&run->cv, &run->mu, &until);
		progress_update(bar, atomic_load(&run->done));
	}
	pthread_mutex_unlock(&run->mu);
	/* the phase ends with the last answer, not when this thread looks */
	for (i = 0; i < started; i++) {
		pthread_join(cl[i].th, NULL);
		if (cl[i].end_us > end)
			end = cl[i].end_us;
		client_cpu += cl[i].cpu_us;
	}
	out->wall_s = (double)(end - t0) / 1e6;
	/* the process less the clients: the server's threads (and this one's
	 * progress bar, which costs next to nothing) */
	out->server_cpu_ms = (double)(ba_cpu_us(CLOCK_PROCESS_CPUTIME_ID) - cpu0 - client_cpu) /
			     1000.0 / (double)run->n;
	for (i = 0; i < run->clients; i++)
		if (cl[i].failed) {
			r = err_set(SD_IO, "%s", cl[i].err);
			break;
		}
	progress_end(bar, r == SD_OK ? run->n : -1);
	if (r != SD_OK)
		return r;
	bench_sort_i64(run->us, run->n);
	out->p50_ms = bench_pct_ms(run->us, run->n, 0.50);
	out->p90_ms = bench_pct_ms(run->us, run->n, 0.90);
	out->p99_ms = bench_pct_ms(run->us, run->n, 0.99);
	return SD_OK;
}

/* ======================== the run ======================================== */

struct ba_result {
	int64_t requests;
	int clients;
	struct ba_phase ph[BA_PHASES];
	int64_t orders;			/* in the database after the replays */
	int64_t seats;
	int64_t replays_matched;
	int64_t wal_bytes;		/* <db>-wal at the end */
	long peak_rss_kb;
	int tls;			/* --tls: the transports below were measured */
	struct ba_phase tr[BA_TRANSPORTS];	/* medians of BA_TLS_ROUNDS rounds */
	struct ba_phase scan_tr[2];		/* scans: http and https keep-alive */
	char tls_version[16];		/* what the handshakes settled on */
};

/* What the command line asked for, and where the figures go. */
struct ba_args {
	int64_t n;
	int clients;
	int tls;
	struct ba_result *res;
};

/* ======================== --tls: the transports ========================== */

static int ba_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* ba_median: the median of v[0..n) (n odd; v is reordered). */
static double ba_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, ba_cmp_double);
	return v[n / 2];
}

/* ba_medians: out = each figure's median over the rounds of one transport
 * (the rate as a time for N requests, so that n / wall_s is its median). */
static void ba_medians(const struct ba_phase *rounds, int64_t n, struct ba_phase *out)
{
	double rate[BA_TLS_ROUNDS], p50[BA_TLS_ROUNDS], p90[BA_TLS_ROUNDS], p99[BA_TLS_ROUNDS];
	double cpu[BA_TLS_ROUNDS];
	int i;

	for (i = 0; i < BA_TLS_ROUNDS; i++) {
		rate[i] = (double)n / rounds[i].wall_s;
		p50[i] = rounds[i].p50_ms;
		p90[i] = rounds[i].p90_ms;
		p99[i] = rounds[i].p99_ms;
		cpu[i] = rounds[i].server_cpu_ms;
	}
	out->server_cpu_ms = ba_median(cpu, BA_TLS_ROUNDS);
	out->wall_s = (double)n / ba_median(rate, BA_TLS_ROUNDS);
	out->p50_ms = ba_median(p50, BA_TLS_ROUNDS);
	out->p90_ms = ba_median(p90, BA_TLS_ROUNDS);
	out->p99_ms = ba_median(p99, BA_TLS_ROUNDS);
}

/* ba_transport: the client connections for transport t, fresh counters. */
static void ba_transport(struct ba_client *cl, int clients, int t, int port, int tls_port,
			 struct cert_client *tls)
{
	int k;

	for (k = 0; k < clients; k++) {
		bench_http_close(&cl[k].conn);
		bench_http_init(&cl[k].conn, t >= BA_HTTPS ? tls_port : port);
		if (t >= BA_HTTPS)
			bench_http_use_tls(&cl[k].conn, tls, "localhost");
		cl[k].conn.one_shot = t == BA_HTTP_NEW || t == BA_HTTPS_NEW;
	}
}

/* ba_tls_box: the throwaway CA and server certificate in <dir>/tls, the
 * client that trusts that CA, and the HTTPS server on the same database. */
static enum sd_result ba_tls_box(const char *dir, const char *path, struct cert_client **tls,
				 struct serve **sv)
{
	struct cert_init_report rep;
	struct cert_names names;
	struct cert_paths cp;
	enum sd_result r;

	memset(&names, 0, sizeof names);
	if ((r = cert_names_add_dns(&names, "localhost")) != SD_OK ||
	    (r = cert_names_add_ip(&names, "127.0.0.1")) != SD_OK ||
	    (r = cert_init(dir, &(struct cert_init_opts){ .names = &names }, clock_now_ms(),
			    &rep)) != SD_OK ||
	    (r = cert_paths(dir, &cp)) != SD_OK || (r = cert_client_new(cp.ca_cert, tls)) != SD_OK)
		return r;
	return serve_start(&(struct serve_opts){ .db_path = path, .listen = "127.0.0.1:0",
						 .tls_cert = cp.server_cert,
						 .tls_key = cp.server_key,
						 .per_client_max = BA_PER_CLIENT_MAX }, sv);
}

/*
 * ba_transports: --tls.  The reads phase over each transport, interleaved,
 * BA_TLS_ROUNDS rounds; [out] res->tr the medians.  The plain server is
 * the one on run->port.
 */
static enum sd_result ba_transports(struct ba_run *run, struct ba_client *cl, const char *dir,
				    const char *path, struct ba_result *res)
{
	struct ba_phase rounds[BA_TRANSPORTS][BA_TLS_ROUNDS];
	struct cert_client *tls = NULL;
	struct serve *sv = NULL;
	enum sd_result r;
	long long dials;
	int round, t, k;

	if ((r = ba_tls_box(dir, path, &tls, &sv)) != SD_OK)
		goto out;
	for (round = 0; round < BA_TLS_ROUNDS; round++)
		for (t = 0; t < BA_TRANSPORTS; t++) {
			bench_progress("round %d/%d: %s: %lld reads over %d client%s to 127.0.0.1:%d",
				       round + 1, BA_TLS_ROUNDS, ba_transport_name[t],
				       (long long)run->n, run->clients, run->clients == 1 ? "" : "s",
				       t >= BA_HTTPS ? serve_port(sv) : run->port);
			ba_transport(cl, run->clients, t, run->port, serve_port(sv), tls);
			if ((r = ba_phase_run(run, cl, BA_READS, &rounds[t][round])) != SD_OK)
				goto out;
			for (dials = 0, k = 0; k < run->clients; k++)
				dials += cl[k].conn.dials;
			/* one connection per request (and one for a client that had
			 * none), or one per client */
			if (dials != (cl[0].conn.one_shot
					      ? run->n + (run->clients > run->n ? run->clients - run->n : 0)
					      : run->clients)) {
				r = err_set(SD_IO, "%s: %lld connections for %lld requests over %d "
					    "clients", ba_transport_name[t], dials,
					    (long long)run->n, run->clients);
				goto out;
			}
			if (t >= BA_HTTPS)
				snprintf(res->tls_version, sizeof res->tls_version, "%s",
					 cl[0].conn.tls_version);
		}
	for (t = 0; t < BA_TRANSPORTS; t++)
		ba_medians(rounds[t], run->n, &res->tr[t]);
	/* the door's scans, keep-alive, plain and TLS interleaved */
	for (round = 0; round < BA_TLS_ROUNDS; round++)
		for (k = 0; k < 2; k++) {
			t = k ? BA_HTTPS : BA_HTTP;
			run->scan_round++;
			bench_progress("round %d/%d: %s: %lld scans", round + 1, BA_TLS_ROUNDS,
				       ba_transport_name[t], (long long)run->n);
			ba_transport(cl, run->clients, t, run->port, serve_port(sv), tls);
			if ((r = ba_phase_run(run, cl, BA_SCANS, &rounds[k][round])) != SD_OK)
				goto out;
		}
	for (k = 0; k < 2; k++)
		ba_medians(rounds[k], run->n, &res->scan_tr[k]);
	res->tls = 1;
out:
	for (k = 0; k < run->clients; k++) {
		bench_http_close(&cl[k].conn);
		bench_http_init(&cl[k].conn, run->port);
	}
	serve_stop(sv);
	cert_client_free(tls);
	return r;
}

/* ba_codes: a code for each order phase 1 placed, its first ticket's, as
 * its PDF carries it */
static enum sd_result ba_codes(const char *path, struct db *db, struct ba_run *run)
{
	unsigned char key[CODE_KEY_LEN];
	struct order_detail *d;
	char kp[PATH_MAX];
	enum sd_result r;
	int64_t i;

	if ((r = code_key_path(path, NULL, kp, sizeof kp)) != SD_OK ||
	    (r = code_key_load(kp, key)) != SD_OK)
		return r;
	for (i = 0; i < run->n && r == SD_OK; i++) {
		if ((r = order_detail_get(db, run->id[i], &d)) != SD_OK)
			break;
		code_make(key, d->v.tickets[0].code_id, d->v.event_id, run->code[i]);
		order_detail_free(d);
	}
	memset(key, 0, sizeof key);
	return r;
}

/* ba_go (bench_in_dir's fn): the box, its server, the five phases and,
 * with --tls, the transports. */
static enum sd_result ba_go(const char *dir, const char *path, void *arg)
{
	const struct ba_args *a = arg;
	struct ba_result *res = a->res;
	int64_t n = a->n;
	int clients = a->clients;
	struct ba_client cl[BA_CLIENTS_MAX];
	struct ba_run run;
	struct serve *sv = NULL;
	struct db *db = NULL;
	struct rusage ru;
	enum sd_result r;
	int64_t i, emails = 0;
	int k, phase;

	memset(res, 0, sizeof *res);
	memset(&run, 0, sizeof run);
	memset(cl, 0, sizeof cl);
	pthread_mutex_init(&run.mu, NULL);
	pthread_cond_init(&run.cv, NULL);
	res->requests = run.n = n;
	res->clients = run.clients = clients;
	for (k = 0; k < clients; k++) {
		cl[k].run = &run;
		cl[k].idx = k;
		bench_http_init(&cl[k].conn, 0);
	}
	if (!(run.first = calloc((size_t)n, sizeof *run.first)) ||
	    !(run.id = calloc((size_t)n, sizeof *run.id)) ||
	    !(run.code = calloc((size_t)n, sizeof *run.code)) ||
	    !(run.us = calloc((size_t)n, sizeof *run.us))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	if ((r = bench_box(path, "Stagedoor Bench Night", n, &db, run.token, &run.event_id)) != SD_OK)
		goto out;
	if ((r = serve_start(&(struct serve_opts){ .db_path = path, .listen = "127.0.0.1:0",
						   .per_client_max = BA_PER_CLIENT_MAX },
			     &sv)) != SD_OK)
		goto out;
	run.port = serve_port(sv);
	for (k = 0; k < clients; k++)
		cl[k].conn.port = run.port;

	for (phase = 0; phase < BA_PHASES; phase++) {
		bench_progress("%s: %lld requests over %d keep-alive connection%s to 127.0.0.1:%d",
			       ba_phase_name[phase], (long long)n, clients, clients == 1 ? "" : "s",
			       run.port);
		if ((r = ba_phase_run(&run, cl, phase, &res->ph[phase])) != SD_OK)
			goto out;
		if (phase == BA_ORDERS && (r = ba_codes(path, db, &run)) != SD_OK)
			goto out;
		if (phase != BA_REPLAYS)
			continue;
		/* a replay writes nothing: still one order per key */
		if ((r = event_box_totals(db, &res->orders, &emails)) != SD_OK)
			goto out;
		if (res->orders != n) {
			r = err_set(SD_DB, "replays: %lld orders in the database after %lld "
				    "orders and their replays", (long long)res->orders, (long long)n);
			goto out;
		}
	}
	if (a->tls && (r = ba_transports(&run, cl, dir, path, res)) != SD_OK)
		goto out;
	for (k = 0; k < clients; k++)
		res->replays_matched += cl[k].matched;
	for (i = 0; i < n; i++)
		res->seats += 1 + i % 3;
	if ((r = db_wal_bytes(db, &res->wal_bytes)) != SD_OK)
		goto out;
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		res->peak_rss_kb = ru.ru_maxrss;
out:
	for (k = 0; k < clients; k++)
		bench_http_close(&cl[k].conn);
	serve_stop(sv);
	db_close(db);
	if (run.first)
		for (i = 0; i < n; i++)
			free(run.first[i]);
	free(run.first);
	free(run.id);
	free(run.code);
	free(run.us);
	pthread_cond_destroy(&run.cv);
	pthread_mutex_destroy(&run.mu);
	return r;
}

/* ======================== the report ===================================== */

/* ba_print_tls: --tls's transports, as JSON members or lines of text. */
static void ba_print_tls(const struct ba_result *res, int json)
{
	static const char *const what[BA_TRANSPORTS] = {
		"http  keep-alive",
		"http  new connection each",
		"https keep-alive",
		"https new connection each",
	};
	double n = (double)res->requests;
	int i;

	if (json) {
		printf(",\"transports\":");
		if (!res->tls) {
			printf("null");
			return;
		}
		printf("{\"request\":\"GET /v1/orders/{id}\",\"rounds\":%d,\"tls_version\":\"%s\"",
		       BA_TLS_ROUNDS, res->tls_version);
		for (i = 0; i < BA_TRANSPORTS; i++) {
			printf(",\"%s\":{\"requests_per_s\":%.1f,", ba_transport_name[i],
			       n / res->tr[i].wall_s);
			if (i == BA_HTTP_NEW || i == BA_HTTPS_NEW)
				printf("\"connections_per_s\":%.1f,", n / res->tr[i].wall_s);
			else
				printf("\"connections\":%d,", res->clients);
			printf("\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,"
			       "\"server_cpu_ms_per_request\":%.3f}", res->tr[i].p50_ms,
			       res->tr[i].p90_ms, res->tr[i].p99_ms, res->tr[i].server_cpu_ms);
		}
		printf(",\"handshakes_per_s\":%.1f", n / res->tr[BA_HTTPS_NEW].wall_s);
		printf(",\"scans\":{\"request\":\"POST /v1/scan\"");
		for (i = 0; i < 2; i++)
			printf(",\"%s\":{\"scans_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
			       "\"server_cpu_ms_per_request\":%.3f}", ba_transport_name[i ? BA_HTTPS :
												   BA_HTTP],
			       n / res->scan_tr[i].wall_s, res->scan_tr[i].p50_ms, res->scan_tr[i].p99_ms,
			       res->scan_tr[i].server_cpu_ms);
		printf("}}");
		return;
	}
	if (!res->tls)
		return;
	printf("  transports: GET /v1/orders/{id}, %lld requests over %d client%s, median of %d "
	       "rounds\n", (long long)res->requests, res->clients, res->clients == 1 ? "" : "s",
	       BA_TLS_ROUNDS);
	printf("  transport                  requests/s   p50 ms   p90 ms   p99 ms   server "
	       "CPU ms/request\n");
	for (i = 0; i < BA_TRANSPORTS; i++)
		printf("  %-26s %10.1f %8.3f %8.3f %8.3f %8.3f%s\n", what[i], n / res->tr[i].wall_s,
		       res->tr[i].p50_ms, res->tr[i].p90_ms, res->tr[i].p99_ms,
		       res->tr[i].server_cpu_ms, i == BA_HTTPS_NEW ? "  (= full handshakes/s)" : "");
	printf("  door scans  POST /v1/scan (already scanned: a log row, a FULL commit each), "
	       "keep-alive\n");
	for (i = 0; i < 2; i++)
		printf("  %-26s %10.1f %8.3f %8s %8.3f %8.3f\n", i ? "https keep-alive" :
		       "http  keep-alive", n / res->scan_tr[i].wall_s, res->scan_tr[i].p50_ms, "",
		       res->scan_tr[i].p99_ms, res->scan_tr[i].server_cpu_ms);
	printf("  TLS         %s, ECDHE with an ECDSA P-256 certificate, verified; a full handshake "
	       "each\n              time (no resumption); the client (mbedTLS) shares the cores "
	       "with the server,\n              whose own cost is the CPU column\n",
	       res->tls_version);
}

static void ba_print(const struct ba_result *res, int json)
{
	static const char *const what[BA_PHASES] = {
		"POST /v1/orders: a new order, one FULL commit",
		"POST /v1/orders again: the stored answer, nothing written",
		"GET /v1/orders/{id}",
		"GET /v1/stats",
		"POST /v1/scan: admitted, its log row, one FULL commit",
	};
	double n = (double)res->requests;
	int i;

	if (json) {
		printf("{\"program\":\"stagedoor\",\"bench\":\"api\",\"requests\":%lld,"
		       "\"clients\":%d,\"orders\":%lld,\"seats\":%lld,\"replays_matched\":%lld,"
		       "\"orders_per_s\":%.1f,\"phases\":{", (long long)res->requests, res->clients,
		       (long long)res->orders, (long long)res->seats,
		       (long long)res->replays_matched, n / res->ph[BA_ORDERS].wall_s);
		for (i = 0; i < BA_PHASES; i++)
			printf("%s\"%s\":{\"s\":%.6f,\"requests_per_s\":%.1f,\"p50_ms\":%.3f,"
			       "\"p90_ms\":%.3f,\"p99_ms\":%.3f}", i ? "," : "", ba_phase_name[i],
			       res->ph[i].wall_s, n / res->ph[i].wall_s, res->ph[i].p50_ms,
			       res->ph[i].p90_ms, res->ph[i].p99_ms);
		printf("},\"wal_bytes\":%lld,\"peak_rss_kb\":%ld", (long long)res->wal_bytes,
		       res->peak_rss_kb);
		ba_print_tls(res, 1);
		printf("}\n");
		return;
	}
	printf("stagedoor-bench api: %lld requests a phase, %d keep-alive client%s, "
	       "HTTP/1.1 on 127.0.0.1\n", (long long)res->requests, res->clients,
	       res->clients == 1 ? "" : "s");
	printf("  phase       requests/s   p50 ms   p90 ms   p99 ms\n");
	for (i = 0; i < BA_PHASES; i++)
		printf("  %-9s %12.1f %8.3f %8.3f %8.3f  %s\n", ba_phase_name[i],
		       n / res->ph[i].wall_s, res->ph[i].p50_ms, res->ph[i].p90_ms,
		       res->ph[i].p99_ms, what[i]);
	ba_print_tls(res, 0);
	printf("  orders      %lld in the database (%lld seats); %lld of %lld replays answered "
	       "byte for byte\n", (long long)res->orders, (long long)res->seats,
	       (long long)res->replays_matched, (long long)res->requests);
	printf("  WAL         %.1f MiB at the end\n", (double)res->wal_bytes / 1048576.0);
	printf("  peak RSS    %.1f MiB (server and clients)\n",
	       (double)res->peak_rss_kb / 1024.0);
}

int bench_api_cmd(int argc, char **argv)
{
	int64_t requests = BA_REQUESTS_DEFAULT, clients = BA_CLIENTS_DEFAULT;
	int json = 0, keep = 0, tls = 0;
	struct arg_opt opts[] = {
		{ "requests", ARG_INT, &requests, 1, 100000, 0, NULL,
		  "requests per phase (2000)", 0 },
		{ "clients", ARG_INT, &clients, 1, BA_CLIENTS_MAX, 0, NULL,
		  "client threads, each on its own keep-alive connection", 0 },
		{ "tls", ARG_FLAG, &tls, 0, 0, 0, NULL,
		  "also over HTTPS, side by side with HTTP, with a throwaway CA", 0 },
		BENCH_ARG_KEEP(&keep),
		ARG_JSON(&json),
		ARG_END,
	};
	static const char usage[] =
		"api [--requests N] [--clients C] [--tls] [--json] [--keep]";
	struct ba_result res;
	struct ba_args a = { 0, 0, 0, &res };
	int rc;

	if ((rc = bench_args(argc, argv, opts, usage)) != 0)
		return rc;
	a.n = requests;
	a.clients = (int)clients;
	a.tls = tls;
	if ((rc = bench_in_dir(keep, ba_go, &a)) != 0)
		return rc;
	ba_print(&res, json);
	return 0;
}
