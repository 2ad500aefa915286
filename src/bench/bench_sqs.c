/*
 * bench_sqs.c: `stagedoor-bench sqs`, the SQS listener's benchmark: messages
 * per second through the listener as an SQS client drives it, and how soon a
 * waiting long poll has a message sent to its queue.
 *
 *   stagedoor-bench sqs [--messages N] [--clients C] [--singles S]
 *                       [--latency M] [--ref-messages K] [--no-refs]
 *                       [--rounds R] [--db postgresql://...] [--json] [--keep]
 *
 * On a fresh box in a temporary directory (under $TMPDIR, else /tmp; removed
 * afterwards unless --keep): the schema, the ticket key (code_key_ensure),
 * one worker token (token_add, role worker) and its credentials made from
 * the key as `token add --sqs` makes them (sqs_cred.h).  The listener runs
 * in this process (sqs_start on 127.0.0.1:0), as `stagedoor sqs` runs it:
 * the clients and the server share the machine's cores either way, and in
 * one process the CPU each side used can be told apart (the clients'
 * threads' own clocks; the rest is the server's).
 *
 * The native client is C threads, each on one keep-alive HTTP/1.1
 * connection (bench_http.h), sending AWS JSON 1.0 requests (X-Amz-Target:
 * AmazonSQS.<Action>), each signed with the token's credentials
 * (sigv4_sign, SigV4 over content-type, host, x-amz-date and x-amz-target,
 * the body hashed) and so authenticated by the listener as any SDK's.
 * Each round, on a queue of its own per phase (VisibilityTimeout 300 s, so
 * no message comes back during a phase):
 *
 *   1. batched     each client sends its share of N messages,
 *                  SendMessageBatch of 10, then ReceiveMessage (up to 10)
 *                  and DeleteMessageBatch of what came, in turn;
 *   2. singles     the same with S messages one at a time: SendMessage,
 *                  ReceiveMessage (1), DeleteMessage;
 *   3. latency     one receiver holds a waiting long poll (WaitTimeSeconds
 *                  20) while one sender sends M messages one at a time,
 *                  each BS_GAP_US after the receiver's poll went out (so the
 *                  poll is parked in the listener when the message comes);
 *                  the time from the send's start to the receiver holding
 *                  the message's answer: p50, p99 and the largest;
 *   4. references  tools/bench/sqs_clients.py (Debian's python3-boto3,
 *                  the query protocol) and tools/bench/sqs_clients.mjs (the
 *                  AWS SDK for JavaScript from tests/browser/node_modules,
 *                  JSON 1.0) run phase 1's lifecycle with K messages and C
 *                  clients against the same listener with the same token;
 *                  each times its own loop, reports its own CPU over it and
 *                  checks its own run.  A
 *                  missing python3 or boto3, node or the SDK is said and
 *                  skipped, not a failure.
 *
 * Phases 1 and 2 end when every client has sent its share and then found
 * the queue empty (a message in flight is held by a client that deletes it
 * before it looks again); the main thread only moves the progress bar.
 * Phases 1 and 2 also report the CPU per message of the server (the
 * process less the client threads) and of the native client.
 *
 * Invariants: every figure comes from a phase in which every message sent
 * was received once and deleted once (the bodies carry their numbers), every
 * answer was 200 with no failed batch entry, and the queue's counts
 * (GetQueueAttributes: visible, in flight, delayed) ended at 0; otherwise the
 * command fails.  Rates are messages over the phase's wall time (first
 * request to the last client's last answer); each figure is reported per
 * round and as the median of the rounds, beside the aims the issue states
 * (met or not, never an error).
 */
#define _GNU_SOURCE
#include "cli.h"
#include "bench.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "args.h"
#include "bench_child.h"
#include "bench_http.h"
#include "clock.h"
#include "code.h"
#include "db.h"
#include "pipeline.h"
#include "progress.h"
#include "sigv4.h"
#include "sqs.h"
#include "sqs_cred.h"
#include "sqs_store.h"
#include "sqs_wire.h"
#include "token.h"

#define BS_MESSAGES 20000		/* phase 1 unless told */
#define BS_SINGLES 5000			/* phase 2 */
#define BS_LATENCY 1000			/* phase 3 */
#define BS_REF_MESSAGES 2000		/* phase 4, each reference client */
#define BS_CLIENTS 4
#define BS_CLIENTS_MAX 32
#define BS_ROUNDS_MAX 9
#define BS_GAP_US 2000			/* latency: the send waits this long after the poll */
#define BS_LAT_WAIT_MS 30000		/* latency: the longest wait for the receiver */
#define BS_REQ_MAX 16384		/* a request, head and body */
#define BS_REGION "eu-west-1"
#define BS_SIGNED "content-type;host;x-amz-date;x-amz-target"
#define BS_BODY_PAD "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

enum { BS_PY, BS_JS, BS_REFS };
enum { BS_BATCHED, BS_ONE };		/* phases 1 and 2 */

static const char *const bs_ref_name[BS_REFS] = { "boto3", "aws_sdk_js" };

/* The listener and the token's credentials, shared by every client. */
struct bs_box {
	int port;
	char host[32];			/* the Host header: "127.0.0.1:PORT" */
	char key_id[SQS_KEY_ID_LEN + 1];
	char secret[SQS_SECRET_LEN + 1];	/* never printed */
	const char *dir;		/* the bench folder: the children's logs */
};

/* One client connection: every request signed. */
struct bs_conn {
	struct bench_http http;
	const struct bs_box *box;
	char req[BS_REQ_MAX];
	char err[600];
};

/* What one round measured. */
struct bs_round {
	double life_s[2];		/* phases 1 and 2 (BS_BATCHED, BS_ONE): wall time */
	double srv_us[2], cli_us[2];	/* and CPU per message: server, clients */
	double p50_ms, p99_ms, max_ms;	/* phase 3 */
	double ref_per_s[BS_REFS];	/* phase 4; 0 when skipped */
	double ref_cpu_us[BS_REFS];	/* its own CPU per message, over its loop */
};

/* What the command line asked for, and the figures. */
struct bs_args {
	int64_t messages, singles, latency, ref_messages, clients, rounds;
	int no_refs;
	struct bs_round round[BS_ROUNDS_MAX];
	char ref_skip[BS_REFS][200];	/* why a reference client was not run, or "" */
	char ref_version[BS_REFS][64];
	const char *engine;
};

/* ======================== a signed request =============================== */

static void bs_conn_init(struct bs_conn *c, const struct bs_box *box)
{
	memset(c, 0, sizeof *c);
	c->box = box;
	bench_http_init(&c->http, box->port);
}

static int bs_fail(char *err, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bs_fail(char *err, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, size, fmt, ap);
	va_end(ap);
	return -1;
}

/* bs_amz_date: now as X-Amz-Date wants it, YYYYMMDDTHHMMSSZ */
static void bs_amz_date(char out[17])
{
	time_t t = (time_t)(clock_now_ms() / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/*
 * bs_call: action with the JSON body, signed as an SDK signs it; the
 * answer must be 200.  [out] *ans, *ans_len (valid until the next call).
 * 0, or -1 with c->err.
 */
static int bs_call(struct bs_conn *c, const char *action, const char *body, size_t len,
		   const char **ans, size_t *ans_len)
{
	char target[64], date[17], auth[512];
	struct sigv4_header h[4] = { { "content-type", SQS_TYPE_JSON },
				     { "host", c->box->host },
				     { "x-amz-date", date },
				     { "x-amz-target", target } };
	struct sigv4_request rq = { "POST", "/", "", h, 4, body, len };
	int n, status = 0;

	snprintf(target, sizeof target, "AmazonSQS.%s", action);
	bs_amz_date(date);
	if (sigv4_sign(&rq, c->box->key_id, c->box->secret, BS_REGION, "sqs", date, BS_SIGNED,
		       auth, sizeof auth) != SD_OK)
		return bs_fail(c->err, sizeof c->err, "%s: cannot sign: %s", action, err_msg());
	n = snprintf(c->req, sizeof c->req, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\n"
		     "X-Amz-Date: %s\r\nX-Amz-Target: %s\r\nAuthorization: %s\r\n"
		     "Content-Length: %zu\r\n\r\n", c->box->host, SQS_TYPE_JSON, date, target, auth,
		     len);
	if (n < 0 || (size_t)n + len > sizeof c->req)
		return bs_fail(c->err, sizeof c->err, "%s: a request too long", action);
	memcpy(c->req + n, body, len);
	if (bench_http_call(&c->http, c->req, (size_t)n + len, &status, ans, ans_len) != 0)
		return bs_fail(c->err, sizeof c->err, "%s: %s", action, c->http.err);
	if (status != 200)
		return bs_fail(c->err, sizeof c->err, "%s answered %d: %.300s", action, status,
			       *ans);
	return 0;
}

/* bs_count: how often needle is in s */
static int bs_count(const char *s, const char *needle)
{
	int n = 0;

	while ((s = strstr(s, needle))) {
		n++;
		s += strlen(needle);
	}
	return n;
}

/* ======================== queues ========================================= */

/* bs_queue_new: a new queue named name; [out] url */
static enum sd_result bs_queue_new(struct bs_conn *c, const char *name, char *url, size_t size)
{
	char body[256];
	const char *ans;
	size_t len;
	int n = snprintf(body, sizeof body, "{\"QueueName\":\"%s\",\"Attributes\":"
			 "{\"VisibilityTimeout\":\"300\"}}", name);

	bench_http_close(&c->http);	/* a connection of its own, dialled now */
	if (bs_call(c, "CreateQueue", body, (size_t)n, &ans, &len) != 0)
		return err_set(SD_IO, "%s", c->err);
	if (sscanf(ans, "{\"QueueUrl\":\"%511[^\"]\"", url) != 1 || strlen(url) >= size)
		return err_set(SD_IO, "CreateQueue answered %.200s", ans);
	return SD_OK;
}

/* bs_empty: the queue's visible, in-flight and delayed counts are all 0 */
static int bs_empty(struct bs_conn *c, const char *url)
{
	static const char *const names[] = { "ApproximateNumberOfMessages",
					      "ApproximateNumberOfMessagesNotVisible",
					      "ApproximateNumberOfMessagesDelayed" };
	char body[768], want[96];
	const char *ans, *p;
	size_t len, i;
	int n = snprintf(body, sizeof body, "{\"QueueUrl\":\"%s\",\"AttributeNames\":[\"%s\","
			 "\"%s\",\"%s\"]}", url, names[0], names[1], names[2]);

	bench_http_close(&c->http);	/* idle through a phase: the server may have hung up */
	if (bs_call(c, "GetQueueAttributes", body, (size_t)n, &ans, &len) != 0)
		return -1;
	for (i = 0; i < 3; i++) {
		snprintf(want, sizeof want, "\"%s\":\"", names[i]);
		if (!(p = strstr(ans, want)) || strncmp(p + strlen(want), "0\"", 2) != 0)
			return bs_fail(c->err, sizeof c->err, "the queue %s is not empty at the "
				       "end: %.300s", url, ans);
	}
	return 0;
}

/* ======================== phases 1 and 2: the lifecycle ================== */

/* One phase of the lifecycle, shared by its client threads. */
struct bs_life {
	const struct bs_box *box;
	char url[512];
	int64_t n;			/* messages */
	int clients;
	int single;			/* 1: one at a time, else batches of 10 */
	atomic_uchar *got, *gone;	/* [n] times each message was received, deleted */
	atomic_llong done;		/* messages deleted (the progress bar's) */
	atomic_int failed;
	pthread_mutex_t mu;		/* err */
	char err[600];
};

struct bs_client {
	pthread_t th;
	struct bs_life *ph;
	int idx;			/* sends messages [n*idx/C, n*(idx+1)/C) */
	struct bs_conn conn;
	int64_t end_us, cpu_us;		/* its last answer; its thread's CPU time */
};

static void bs_life_fail(struct bs_life *ph, const char *why)
{
	pthread_mutex_lock(&ph->mu);
	if (!atomic_load(&ph->failed))
		snprintf(ph->err, sizeof ph->err, "%s", why);
	atomic_store(&ph->failed, 1);
	pthread_mutex_unlock(&ph->mu);
}

/* bs_body: message i's body: its number, padded to a small message's size */
static int bs_body(char *buf, size_t size, int64_t i)
{
	return snprintf(buf, size, "bench-%08lld-%s", (long long)i, BS_BODY_PAD);
}

/* bs_one: action on the queue at url with the one member key: val */
static int bs_one(struct bs_conn *c, const char *url, const char *action, const char *key,
		  const char *val, const char **ans)
{
	char body[1024];
	size_t len;
	int n = snprintf(body, sizeof body, "{\"QueueUrl\":\"%s\",\"%s\":\"%s\"}", url, key, val);

	return bs_call(c, action, body, (size_t)n, ans, &len);
}

/* bs_batch: action on the queue at url with the entries {Id, key: vals[j]};
 * every entry must be answered done (done appears n times, nothing failed) */
static int bs_batch(struct bs_conn *c, const char *url, const char *action, const char *key,
		    const char *const *vals, int n, const char *done)
{
	char body[4096];
	const char *ans;
	size_t len;
	int k, j;

	k = snprintf(body, sizeof body, "{\"QueueUrl\":\"%s\",\"Entries\":[", url);
	for (j = 0; j < n; j++)
		k += snprintf(body + k, sizeof body - (size_t)k, "%s{\"Id\":\"e%d\",\"%s\":\"%s\"}",
			      j ? "," : "", j, key, vals[j]);
	k += snprintf(body + k, sizeof body - (size_t)k, "]}");
	if (bs_call(c, action, body, (size_t)k, &ans, &len) != 0)
		return -1;
	if (!strstr(ans, "\"Failed\":[]") || bs_count(ans, done) != n)
		return bs_fail(c->err, sizeof c->err, "%s of %d answered %.300s", action, n, ans);
	return 0;
}

/* bs_send: messages [i, i + k) in one SendMessageBatch, or one SendMessage */
static int bs_send(struct bs_client *c, int64_t i, int k)
{
	char msg[SQS_BATCH_MAX][128];
	const char *v[SQS_BATCH_MAX], *ans;
	int j;

	for (j = 0; j < k; j++) {
		bs_body(msg[j], sizeof msg[j], i + j);
		v[j] = msg[j];
	}
	if (!c->ph->single)
		return bs_batch(&c->conn, c->ph->url, "SendMessageBatch", "MessageBody", v, k,
				"\"MessageId\":");
	if (bs_one(&c->conn, c->ph->url, "SendMessage", "MessageBody", v[0], &ans) != 0)
		return -1;
	return bs_count(ans, "\"MessageId\":") == 1 ? 0 :
	       bs_fail(c->conn.err, sizeof c->conn.err, "SendMessage answered %.300s", ans);
}

/*
 * bs_messages: a ReceiveMessage answer's messages: [out] their numbers
 * idx[] and receipt handles h[], *n of them (max at most).  The bodies are this
 * benchmark's own (no escapes), so the answer is read without a parser.
 */
static int bs_messages(struct bs_conn *c, const char *ans, int max, int64_t *idx,
		       char h[][SQS_HANDLE_MAX + 1], int *n)
{
	const char *p = ans, *b = ans;
	int k = 0;

	while ((p = strstr(p, "\"ReceiptHandle\":\"")) && k < max) {
		p += 17;
		if (sscanf(p, "%96[^\"]", h[k]) != 1 || !(b = strstr(b, "\"Body\":\"bench-")))
			break;
		b += 14;
		idx[k++] = strtoll(b, NULL, 10);
	}
	*n = k;
	if (k != bs_count(ans, "\"MessageId\":"))
		return bs_fail(c->err, sizeof c->err, "ReceiveMessage answered %.300s", ans);
	return 0;
}

/* bs_delete: the received messages h[0..n), in one DeleteMessageBatch, or
 * one DeleteMessage each */
static int bs_delete(struct bs_client *c, char h[][SQS_HANDLE_MAX + 1], int n)
{
	const char *v[SQS_BATCH_MAX], *ans;
	int j;

	for (j = 0; j < n; j++)
		v[j] = h[j];
	if (!c->ph->single)
		return bs_batch(&c->conn, c->ph->url, "DeleteMessageBatch", "ReceiptHandle", v, n,
				"\"Id\":");
	for (j = 0; j < n; j++)
		if (bs_one(&c->conn, c->ph->url, "DeleteMessage", "ReceiptHandle", v[j], &ans) != 0)
			return -1;
	return 0;
}

/* bs_take: one ReceiveMessage and the delete of what it got; [out] *got */
static int bs_take(struct bs_client *c, int *got)
{
	struct bs_life *ph = c->ph;
	char body[640], h[SQS_BATCH_MAX][SQS_HANDLE_MAX + 1];
	int64_t idx[SQS_BATCH_MAX];
	const char *ans;
	size_t len;
	int n, j;

	n = snprintf(body, sizeof body, "{\"QueueUrl\":\"%s\",\"MaxNumberOfMessages\":%d,"
		     "\"WaitTimeSeconds\":0}", ph->url, ph->single ? 1 : SQS_BATCH_MAX);
	if (bs_call(&c->conn, "ReceiveMessage", body, (size_t)n, &ans, &len) != 0 ||
	    bs_messages(&c->conn, ans, SQS_BATCH_MAX, idx, h, got) != 0)
		return -1;
	for (j = 0; j < *got; j++) {
		if (idx[j] < 0 || idx[j] >= ph->n)
			return bs_fail(c->conn.err, sizeof c->conn.err, "a message numbered %lld, "
				       "not one this phase sent", (long long)idx[j]);
		atomic_fetch_add(&ph->got[idx[j]], 1);
	}
	if (*got && bs_delete(c, h, *got) != 0)
		return -1;
	for (j = 0; j < *got; j++)
		atomic_fetch_add(&ph->gone[idx[j]], 1);
	atomic_fetch_add_explicit(&ph->done, *got, memory_order_relaxed);
	return 0;
}

/* bs_process_cpu_us: the CPU time of the whole process (server and clients) */
static int64_t bs_process_cpu_us(void)
{
	return (int64_t)((double)clock() * (1e6 / CLOCKS_PER_SEC));
}

/* bs_life_run: one client: send a share, take what is there, until its
 * share is sent and the queue had nothing for it */
static void *bs_life_run(void *arg)
{
	struct bs_client *c = arg;
	struct bs_life *ph = c->ph;
	int64_t cpu0 = pipeline_thread_cpu_us();
	int64_t next = ph->n * c->idx / ph->clients, end = ph->n * (c->idx + 1) / ph->clients;
	int batch = ph->single ? 1 : SQS_BATCH_MAX, got = 0;

	while (!atomic_load(&ph->failed)) {
		int k = end - next < batch ? (int)(end - next) : batch;

		if (k > 0 && bs_send(c, next, k) != 0)
			break;
		next += k;
		if (bs_take(c, &got) != 0)
			break;
		if (!got && next >= end) {
			c->end_us = clock_mono_us();
			c->cpu_us = pipeline_thread_cpu_us() - cpu0;
			return NULL;
		}
	}
	if (c->conn.err[0])
		bs_life_fail(ph, c->conn.err);
	c->end_us = clock_mono_us();
	c->cpu_us = pipeline_thread_cpu_us() - cpu0;
	return NULL;
}

/* bs_life_check: every message received once and deleted once */
static enum sd_result bs_life_check(const struct bs_life *ph, const char *what)
{
	int64_t i;

	for (i = 0; i < ph->n; i++)
		if (atomic_load(&ph->got[i]) != 1 || atomic_load(&ph->gone[i]) != 1)
			return err_set(SD_IO, "%s: message %lld was received %d times and deleted "
				       "%d times, not once each", what, (long long)i,
				       (int)atomic_load(&ph->got[i]),
				       (int)atomic_load(&ph->gone[i]));
	return SD_OK;
}

/* bs_life_threads: the phase's clients, started and joined; [out] the
 * phase's wall time and the clients' CPU time */
static void bs_life_threads(struct bs_life *ph, struct bs_client *cl, const char *what,
			    int64_t *wall_us, int64_t *cli_cpu_us)
{
	struct progress *bar = progress_start(what, ph->n, "messages");
	int64_t t0 = clock_mono_us(), end = t0;
	int i, started;

	for (started = 0; started < ph->clients; started++) {
		cl[started].ph = ph;
		cl[started].idx = started;
		if (pthread_create(&cl[started].th, NULL, bs_life_run, &cl[started]) != 0) {
			bs_life_fail(ph, "cannot start a client thread");
			break;
		}
	}
	/* the bar every 100 ms until the last message is deleted or a client failed */
	while (atomic_load(&ph->done) < ph->n && !atomic_load(&ph->failed)) {
		struct timespec ts = { 0, 100 * 1000000L };

		nanosleep(&ts, NULL);
		progress_update(bar, atomic_load(&ph->done));
	}
	*cli_cpu_us = 0;
	for (i = 0; i < started; i++) {
		pthread_join(cl[i].th, NULL);
		if (cl[i].end_us > end)
			end = cl[i].end_us;
		*cli_cpu_us += cl[i].cpu_us;
	}
	*wall_us = end - t0;
	progress_end(bar, atomic_load(&ph->failed) ? -1 : ph->n);
}

/*
 * bs_life: phase 1 (single 0) or 2 (single 1) on a new queue named name:
 * [out] *wall_s, and the server's and the clients' CPU per message (us).
 */
static enum sd_result bs_life(const struct bs_box *box, const char *name, int64_t n, int clients,
			      int single, double *wall_s, double *srv_us, double *cli_us)
{
	struct bs_client cl[BS_CLIENTS_MAX];
	struct bs_life ph;
	struct bs_conn admin;
	int64_t wall = 0, cli_cpu = 0, cpu0;
	enum sd_result r = SD_OK;
	int i;

	memset(&ph, 0, sizeof ph);
	pthread_mutex_init(&ph.mu, NULL);
	ph.box = box;
	ph.n = n;
	ph.clients = clients;
	ph.single = single;
	bs_conn_init(&admin, box);
	for (i = 0; i < clients; i++)
		bs_conn_init(&cl[i].conn, box);
	if (!(ph.got = calloc(2 * (size_t)n, sizeof *ph.got))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	ph.gone = ph.got + n;
	if ((r = bs_queue_new(&admin, name, ph.url, sizeof ph.url)) != SD_OK)
		goto out;
	/* each client's connection dialled before the clock starts */
	for (i = 0; i < clients; i++)
		if (bench_http_dial(&cl[i].conn.http) != 0) {
			r = err_set(SD_IO, "%s", cl[i].conn.http.err);
			goto out;
		}
	cpu0 = bs_process_cpu_us();
	bs_life_threads(&ph, cl, name, &wall, &cli_cpu);
	*wall_s = (double)wall / 1e6;
	*cli_us = (double)cli_cpu / (double)n;
	*srv_us = (double)(bs_process_cpu_us() - cpu0 - cli_cpu) / (double)n;
	if (atomic_load(&ph.failed))
		r = err_set(SD_IO, "%s: %s", name, ph.err);
	else if ((r = bs_life_check(&ph, name)) == SD_OK && bs_empty(&admin, ph.url) != 0)
		r = err_set(SD_IO, "%s: %s", name, admin.err);
out:
	for (i = 0; i < clients; i++)
		bench_http_close(&cl[i].conn.http);
	bench_http_close(&admin.http);
	free(ph.got);
	pthread_mutex_destroy(&ph.mu);
	return r;
}

/* ======================== phase 3: latency =============================== */

struct bs_lat {
	struct bs_conn rx;		/* the receiver's connection */
	char url[512];
	int64_t m;
	_Atomic int64_t *sent_us;	/* [m] each send's start (clock_mono_us) */
	int64_t *us;			/* [m] send start to the receiver holding it */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int64_t polling;		/* under mu: the receiver's poll for this one is out */
	int stop;			/* under mu: the sender gave up */
	int failed;			/* under mu: the receiver failed (rx.err) */
};

/* bs_lat_poll: announce that the poll for message i goes out (the sender
 * waits for it); 0 when the receiver should stop instead */
static int bs_lat_poll(struct bs_lat *l, int64_t i)
{
	int go;

	pthread_mutex_lock(&l->mu);
	l->polling = i;
	go = !l->stop;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return go;
}

/* bs_lat_rx: the receiver: a long poll, the message, its delete, again */
static void *bs_lat_rx(void *arg)
{
	struct bs_lat *l = arg;
	char body[768], h[1][SQS_HANDLE_MAX + 1];
	const char *ans;
	size_t len;
	int64_t i = 0, idx, t;
	int n, got;

	while (i < l->m && bs_lat_poll(l, i)) {
		n = snprintf(body, sizeof body, "{\"QueueUrl\":\"%s\",\"MaxNumberOfMessages\":1,"
			     "\"WaitTimeSeconds\":20}", l->url);
		if (bs_call(&l->rx, "ReceiveMessage", body, (size_t)n, &ans, &len) != 0)
			break;
		t = clock_mono_us();
		if (bs_messages(&l->rx, ans, 1, &idx, h, &got) != 0)
			break;
		if (!got)
			continue;	/* the wait ended empty: poll again */
		if (idx != i) {
			bs_fail(l->rx.err, sizeof l->rx.err, "latency: message %lld came when %lld "
				"was sent", (long long)idx, (long long)i);
			break;
		}
		l->us[i] = t - atomic_load(&l->sent_us[i]);
		if (bs_one(&l->rx, l->url, "DeleteMessage", "ReceiptHandle", h[0], &ans) != 0)
			break;
		i++;
	}
	pthread_mutex_lock(&l->mu);
	l->polling = i;		/* i == m: the last one taken */
	l->failed = i < l->m;
	pthread_cond_signal(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* bs_lat_wait: until the receiver's poll for message i is out; 0, or -1
 * when it failed or took too long */
static int bs_lat_wait(struct bs_lat *l, int64_t i)
{
	struct timespec until;
	int ok;

	bench_deadline(&until, BS_LAT_WAIT_MS);
	pthread_mutex_lock(&l->mu);
	while (l->polling < i && !l->failed)
		if (pthread_cond_timedwait(&l->cv, &l->mu, &until) != 0)
			break;
	ok = l->polling >= i && !l->failed;
	pthread_mutex_unlock(&l->mu);
	return ok ? 0 : -1;
}

/* bs_lat_send: the sender (this thread): message i after the receiver's
 * poll for it is out and BS_GAP_US has passed */
static enum sd_result bs_lat_send(struct bs_lat *l, struct bs_conn *tx, struct progress *bar)
{
	char msg[128];
	const char *ans;
	int64_t i;

	for (i = 0; i < l->m; i++) {
		struct timespec gap = { 0, BS_GAP_US * 1000L };

		if (bs_lat_wait(l, i) != 0)
			return err_set(SD_TIMEOUT, "latency: the receiver did not take message "
				       "%lld%s%s", (long long)i, l->rx.err[0] ? ": " : " in time",
				       l->rx.err);
		nanosleep(&gap, NULL);
		bs_body(msg, sizeof msg, i);
		atomic_store(&l->sent_us[i], clock_mono_us());
		if (bs_one(tx, l->url, "SendMessage", "MessageBody", msg, &ans) != 0)
			return err_set(SD_IO, "latency: %s", tx->err);
		progress_update(bar, i);
	}
	return bs_lat_wait(l, l->m) == 0 ? SD_OK
	       : err_set(SD_TIMEOUT, "latency: the last message was not taken%s%s",
			 l->rx.err[0] ? ": " : "", l->rx.err);
}

/* bs_latency: phase 3 on a new queue named name; [out] r's p50/p99/max */
static enum sd_result bs_latency(const struct bs_box *box, const char *name, int64_t m,
				 struct bs_round *out)
{
	struct bs_lat l;
	struct bs_conn tx;
	struct progress *bar = NULL;
	pthread_t th;
	enum sd_result r = SD_OK;
	int started = 0;

	memset(&l, 0, sizeof l);
	pthread_mutex_init(&l.mu, NULL);
	pthread_cond_init(&l.cv, NULL);
	l.m = m;
	l.polling = -1;
	bs_conn_init(&l.rx, box);
	bs_conn_init(&tx, box);
	if (!(l.sent_us = calloc((size_t)m, sizeof *l.sent_us)) ||
	    !(l.us = calloc((size_t)m, sizeof *l.us))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	if ((r = bs_queue_new(&tx, name, l.url, sizeof l.url)) != SD_OK)
		goto out;
	if (pthread_create(&th, NULL, bs_lat_rx, &l) != 0) {
		r = err_set(SD_IO, "cannot start the receiver thread");
		goto out;
	}
	started = 1;
	bar = progress_start(name, m, "messages");
	r = bs_lat_send(&l, &tx, bar);
	progress_end(bar, r == SD_OK ? m : -1);
	if (r == SD_OK && bs_empty(&tx, l.url) != 0)
		r = err_set(SD_IO, "%s: %s", name, tx.err);
out:
	if (started) {
		pthread_mutex_lock(&l.mu);
		l.stop = 1;
		pthread_mutex_unlock(&l.mu);
		if (r != SD_OK && l.rx.http.fd >= 0)
			shutdown(l.rx.http.fd, SHUT_RDWR);	/* a poll still waiting ends */
		pthread_join(th, NULL);
	}
	if (r == SD_OK) {
		bench_sort_i64(l.us, m);
		out->p50_ms = bench_pct_ms(l.us, m, 0.50);
		out->p99_ms = bench_pct_ms(l.us, m, 0.99);
		out->max_ms = (double)l.us[m - 1] / 1000.0;
	}
	bench_http_close(&l.rx.http);
	bench_http_close(&tx.http);
	free(l.sent_us);
	free(l.us);
	pthread_cond_destroy(&l.cv);
	pthread_mutex_destroy(&l.mu);
	return r;
}

/* ======================== phase 4: the reference clients ================= */

/* bs_which: prog on $PATH into out; 0, or -1 when it is not there */
static int bs_which(const char *prog, char *out, size_t size)
{
	const char *path = getenv("PATH"), *p, *e;

	for (p = path ? path : "/usr/bin:/bin"; *p; p = *e ? e + 1 : e) {
		e = p + strcspn(p, ":");
		if ((size_t)snprintf(out, size, "%.*s/%s", (int)(e - p), p, prog) < size &&
		    access(out, X_OK) == 0)
			return 0;
	}
	return -1;
}

/* bs_in_tree: rel, a path in the repository, from this program's folder
 * (build/, or build/san/ for the sanitized build) into out */
static void bs_in_tree(const char *rel, char out[PATH_MAX])
{
	char up[PATH_MAX];

	snprintf(up, sizeof up, "../%s", rel);
	bench_beside(up, out, PATH_MAX);
	if (access(out, F_OK) != 0) {
		snprintf(up, sizeof up, "../../%s", rel);
		bench_beside(up, out, PATH_MAX);
	}
}

/* bs_ref_argv: reference client k's program, or why it cannot run (skip) */
static int bs_ref_argv(int k, char prog[PATH_MAX], char script[PATH_MAX], char sdk[PATH_MAX],
		       char *skip, size_t size)
{
	char mod[PATH_MAX + 64];

	bs_in_tree(k == BS_PY ? "tools/bench/sqs_clients.py" : "tools/bench/sqs_clients.mjs",
		   script);
	bs_in_tree("tests/browser", sdk);
	if (access(script, R_OK) != 0)
		return bs_fail(skip, size, "%s is not there", script);
	if (k == BS_PY) {
		snprintf(prog, PATH_MAX, "/usr/bin/python3");
		return access(prog, X_OK) == 0 ? 0 : bs_fail(skip, size, "no /usr/bin/python3 "
							      "(apt-get install python3-boto3)");
	}
	if (bs_which("node", prog, PATH_MAX) != 0)
		return bs_fail(skip, size, "no node on PATH (apt-get install nodejs)");
	snprintf(mod, sizeof mod, "%s/node_modules/@aws-sdk/client-sqs", sdk);
	if (access(mod, R_OK) != 0)
		return bs_fail(skip, size, "no %s (make deps: npm ci in tests/browser)", mod);
	return 0;
}

/* bs_ref_read: the client's JSON line from its log: its rate and its CPU
 * per message, or why it skipped (boto3 missing: skip set, SD_OK) */
static enum sd_result bs_ref_read(const char *log, int k, struct bs_args *a, double *per_s,
				  double *cpu_us)
{
	char line[1024], last[1024] = "";
	json_t *o;
	FILE *f = fopen(log, "r");

	if (!f)
		return err_set(SD_IO, "cannot read %s", log);
	while (fgets(line, sizeof line, f))
		if (line[0] == '{')
			snprintf(last, sizeof last, "%s", line);
	fclose(f);
	if (!(o = json_loads(last, 0, NULL)))
		return err_set(SD_IO, "%s printed no result (see %s)", bs_ref_name[k], log);
	if (json_is_string(json_object_get(o, "skipped")))
		snprintf(a->ref_skip[k], sizeof a->ref_skip[k], "%s",
			 json_string_value(json_object_get(o, "skipped")));
	snprintf(a->ref_version[k], sizeof a->ref_version[k], "%s",
		 json_string_value(json_object_get(o, "version")) ?
		 json_string_value(json_object_get(o, "version")) : "");
	*per_s = json_number_value(json_object_get(o, "msgs_per_s"));
	*cpu_us = json_number_value(json_object_get(o, "cpu_seconds")) * 1e6 /
		  (double)a->ref_messages;
	json_decref(o);
	return a->ref_skip[k][0] || *per_s > 0 ? SD_OK
	       : err_set(SD_IO, "%s printed no rate: %.200s", bs_ref_name[k], last);
}

/*
 * bs_ref: reference client k's batched lifecycle on the queue url (made
 * for it), run to its end; [out] its rate, its own CPU per message.  A
 * client that cannot run sets a->ref_skip[k] and is no failure.
 */
static enum sd_result bs_ref(const struct bs_box *box, struct bs_args *a, int k, const char *url,
			     struct bs_round *out)
{
	char prog[PATH_MAX], script[PATH_MAX], sdk[PATH_MAX], n[24], c[16], endpoint[64];
	char kid[64], sec[80], tail[300];
	char *extra[] = { kid, sec, NULL };
	const char *argv[] = { prog, script, "--endpoint", endpoint, "--queue-url", url,
			       "--messages", n, "--clients", c, "--sdk", sdk, NULL };
	struct bench_child ch = { 0, bs_ref_name[k], "" };
	char **env;
	enum sd_result r;
	int st = 0;

	if (bs_ref_argv(k, prog, script, sdk, a->ref_skip[k], sizeof a->ref_skip[k]) != 0)
		return SD_OK;
	snprintf(endpoint, sizeof endpoint, "http://%s", box->host);
	snprintf(n, sizeof n, "%lld", (long long)a->ref_messages);
	snprintf(c, sizeof c, "%d", (int)a->clients);
	snprintf(kid, sizeof kid, "BENCH_SQS_KEY_ID=%s", box->key_id);
	snprintf(sec, sizeof sec, "BENCH_SQS_SECRET=%s", box->secret);
	snprintf(ch.log, sizeof ch.log, "%s/%s.log", box->dir, bs_ref_name[k]);
	env = bench_child_env(extra);
	r = env ? bench_child_spawn(&ch, argv, env, -1) : err_set(SD_NOMEM, "out of memory");
	free(env);
	explicit_bzero(sec, sizeof sec);
	if (r != SD_OK)
		return r;
	while (waitpid(ch.pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		bench_child_log_tail(ch.log, tail, sizeof tail);
		return err_set(SD_IO, "%s ended with status %d: %s", bs_ref_name[k], st, tail);
	}
	return bs_ref_read(ch.log, k, a, &out->ref_per_s[k], &out->ref_cpu_us[k]);
}

/* bs_refs: phase 4, each reference client on a queue of its own */
static enum sd_result bs_refs(const struct bs_box *box, struct bs_args *a, int round,
			      struct bs_round *out)
{
	struct bs_conn admin;
	char name[64], url[512], *p;
	enum sd_result r = SD_OK;
	int k;

	bs_conn_init(&admin, box);
	for (k = 0; k < BS_REFS && r == SD_OK; k++) {
		if (a->ref_skip[k][0])
			continue;	/* said once, in the first round */
		snprintf(name, sizeof name, "bench-%s-r%d", k == BS_PY ? "boto3" : "sdkjs", round);
		bench_progress("round %d/%d: %s: %lld messages, %d clients, batches of 10",
			       round, (int)a->rounds, bs_ref_name[k], (long long)a->ref_messages,
			       (int)a->clients);
		if ((r = bs_queue_new(&admin, name, url, sizeof url)) != SD_OK ||
		    (r = bs_ref(box, a, k, url, out)) != SD_OK)
			break;
		if (a->ref_skip[k][0]) {
			/* plain words, as a JSON string takes them */
			for (p = a->ref_skip[k]; *p; p++)
				if (*p == '"' || *p == '\\' || (unsigned char)*p < ' ')
					*p = '\'';
			bench_progress("%s skipped: %s", bs_ref_name[k], a->ref_skip[k]);
		} else if (bs_empty(&admin, url) != 0) {
			r = err_set(SD_IO, "%s: %s", bs_ref_name[k], admin.err);
		}
	}
	bench_http_close(&admin.http);
	return r;
}

/* ======================== the run ======================================== */

/* bs_box_make: the box's key, the worker token and its credentials */
static enum sd_result bs_box_make(const char *dir, const char *path, struct bs_box *box)
{
	unsigned char key[CODE_KEY_LEN];
	char keypath[PATH_MAX], token[TOKEN_HEX + 1], id[TOKEN_ID_LEN + 1];
	const char *state = db_target_is_pg(path) ? dir : NULL;
	struct token_new t = { .name = "bench-sqs", .role = TOKEN_WORKER };
	struct db *db = NULL;
	enum sd_result r;
	int created = 0;

	if ((r = db_open(path, DB_OPEN_CREATE, DB_SYNC_FULL, &db)) != SD_OK ||
	    (r = code_key_path(path, state, keypath, sizeof keypath)) != SD_OK ||
	    (r = code_key_ensure(keypath, &created)) != SD_OK ||
	    (r = code_key_load(keypath, key)) != SD_OK ||
	    (r = token_add(db, &t, clock_now_ms(), token)) != SD_OK)
		goto out;
	token_id_of(token, id);
	sqs_cred_key_id(id, box->key_id);
	sqs_cred_secret(key, id, box->secret);
out:
	explicit_bzero(key, sizeof key);
	explicit_bzero(token, sizeof token);
	db_close(db);
	return r;
}

/* bs_round_run: one round's four phases, each on queues of the round's */
static enum sd_result bs_round_run(const struct bs_box *box, struct bs_args *a, int round)
{
	static const char *const what[2] = { "batched", "singles" };
	struct bs_round *o = &a->round[round - 1];
	char name[64];
	enum sd_result r;
	int p;

	for (p = BS_BATCHED; p <= BS_ONE; p++) {
		int64_t n = p == BS_ONE ? a->singles : a->messages;

		bench_progress("round %d/%d: %s: %lld messages, %d clients, %s", round,
			       (int)a->rounds, what[p], (long long)n, (int)a->clients,
			       p == BS_ONE ? "one at a time" : "batches of 10");
		snprintf(name, sizeof name, "bench-%s-r%d", what[p], round);
		if ((r = bs_life(box, name, n, (int)a->clients, p == BS_ONE, &o->life_s[p],
				 &o->srv_us[p], &o->cli_us[p])) != SD_OK)
			return r;
	}
	bench_progress("round %d/%d: latency: %lld messages to a waiting long poll", round,
		       (int)a->rounds, (long long)a->latency);
	snprintf(name, sizeof name, "bench-latency-r%d", round);
	if ((r = bs_latency(box, name, a->latency, o)) != SD_OK)
		return r;
	return a->no_refs ? SD_OK : bs_refs(box, a, round, o);
}

/* bs_go (bench_in_dir's fn): the box, its listener, the rounds */
static enum sd_result bs_go(const char *dir, const char *path, void *arg)
{
	struct bs_args *a = arg;
	struct bs_box box;
	struct sqs_server *sv = NULL;
	enum sd_result r;
	int round;

	memset(&box, 0, sizeof box);
	box.dir = dir;
	a->engine = db_target_is_pg(path) ? "postgresql" : "sqlite";
	if ((r = bs_box_make(dir, path, &box)) != SD_OK ||
	    (r = sqs_start(&(struct sqs_opts){ .db_path = path,
					       .state_dir = db_target_is_pg(path) ? dir : NULL,
					       .listen = "127.0.0.1:0",
					       .per_client_max = 4 * BS_CLIENTS_MAX },
			   &sv)) != SD_OK)
		goto out;
	box.port = sqs_port(sv);
	snprintf(box.host, sizeof box.host, "127.0.0.1:%d", box.port);
	for (round = 1; round <= (int)a->rounds && r == SD_OK; round++)
		r = bs_round_run(&box, a, round);
out:
	sqs_stop(sv);
	explicit_bzero(box.secret, sizeof box.secret);
	return r;
}

/* ======================== the report ===================================== */

static int bs_cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* bs_med: the median over the rounds of one figure (offset into bs_round);
 * rate: n over the field, a wall time */
static double bs_med(const struct bs_args *a, size_t off, double rate)
{
	double v[BS_ROUNDS_MAX];
	int k, n = (int)a->rounds;

	for (k = 0; k < n; k++) {
		double x = *(const double *)((const char *)&a->round[k] + off);
		v[k] = rate > 0 ? rate / x : x;
	}
	qsort(v, (size_t)n, sizeof v[0], bs_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MED(a, f) bs_med((a), offsetof(struct bs_round, f), 0)
#define RATE(a, f, n) bs_med((a), offsetof(struct bs_round, f), (double)(n))

/* bs_rounds_of: each round's figure, comma-separated, into out */
static void bs_rounds_of(const struct bs_args *a, size_t off, double rate, const char *fmt,
			 char *out, size_t size)
{
	size_t n = 0;
	int k;

	out[0] = '\0';
	for (k = 0; k < (int)a->rounds && n < size; k++) {
		double x = *(const double *)((const char *)&a->round[k] + off);
		n += (size_t)snprintf(out + n, size - n, k ? "," : "");
		n += (size_t)snprintf(out + n, size - n, fmt, rate > 0 ? rate / x : x);
	}
}

#define ROUNDS(a, f, n, fmt, buf) \
	bs_rounds_of((a), offsetof(struct bs_round, f), (double)(n), (fmt), (buf), sizeof(buf))

/* bs_print_refs: the reference clients' figures, as JSON members or lines */
static void bs_print_refs(const struct bs_args *a, double native, int json)
{
	static const char *const what[BS_REFS] = { "boto3 (query protocol)",
						   "AWS SDK for JS (JSON 1.0)" };
	char r[256];
	int k;

	for (k = 0; k < BS_REFS; k++) {
		const char *why = a->no_refs ? "--no-refs"
				  : a->ref_skip[k][0] ? a->ref_skip[k] : NULL;
		double rate = why ? 0 : MED(a, ref_per_s[k]), cpu = why ? 0 : MED(a, ref_cpu_us[k]);

		if (why) {
			printf(json ? ",\"%s\":{\"skipped\":\"%s\"}" : "  %-26s skipped: %s\n",
			       json ? bs_ref_name[k] : what[k], why);
			continue;
		}
		bs_rounds_of(a, offsetof(struct bs_round, ref_per_s) + (size_t)k * sizeof(double),
			     0, "%.0f", r, sizeof r);
		if (json)
			printf(",\"%s\":{\"version\":\"%s\",\"messages\":%lld,\"msgs_per_s\":%.1f,"
			       "\"rounds_msgs_per_s\":[%s],\"client_cpu_us_per_msg\":%.1f,"
			       "\"native_ratio\":%.2f}", bs_ref_name[k], a->ref_version[k],
			       (long long)a->ref_messages, rate, r, cpu, native / rate);
		else
			printf("  %-26s %9.0f msgs/s  (%s %s, batched, %lld messages; rounds %s; "
			       "its CPU %.0f us/msg; native %.1fx)\n", what[k], rate,
			       k == BS_PY ? "boto3" : "@aws-sdk/client-sqs", a->ref_version[k],
			       (long long)a->ref_messages, r, cpu, native / rate);
	}
}

static void bs_print_json(const struct bs_args *a)
{
	double batched = RATE(a, life_s[BS_BATCHED], a->messages);
	char r1[256], r2[256], r3[256], r4[256];

	ROUNDS(a, life_s[BS_BATCHED], a->messages, "%.0f", r1);
	ROUNDS(a, life_s[BS_ONE], a->singles, "%.0f", r2);
	ROUNDS(a, p50_ms, 0, "%.3f", r3);
	ROUNDS(a, p99_ms, 0, "%.3f", r4);
	printf("{\"program\":\"stagedoor\",\"bench\":\"sqs\",\"engine\":\"%s\",\"protocol\":"
	       "\"json1.0\",\"rounds\":%d,\"clients\":%d,\"batched\":{\"messages\":%lld,"
	       "\"msgs_per_s\":%.1f,\"rounds_msgs_per_s\":[%s],\"server_cpu_us_per_msg\":%.1f,"
	       "\"client_cpu_us_per_msg\":%.1f},", a->engine, (int)a->rounds, (int)a->clients,
	       (long long)a->messages, batched, r1, MED(a, srv_us[BS_BATCHED]),
	       MED(a, cli_us[BS_BATCHED]));
	printf("\"singles\":{\"messages\":%lld,\"msgs_per_s\":%.1f,\"rounds_msgs_per_s\":[%s],"
	       "\"server_cpu_us_per_msg\":%.1f,\"client_cpu_us_per_msg\":%.1f},",
	       (long long)a->singles, RATE(a, life_s[BS_ONE], a->singles), r2,
	       MED(a, srv_us[BS_ONE]), MED(a, cli_us[BS_ONE]));
	printf("\"latency\":{\"messages\":%lld,\"gap_us\":%d,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
	       "\"max_ms\":%.3f,\"rounds_p50_ms\":[%s],\"rounds_p99_ms\":[%s]}",
	       (long long)a->latency, BS_GAP_US, MED(a, p50_ms), MED(a, p99_ms), MED(a, max_ms), r3,
	       r4);
	bs_print_refs(a, batched, 1);
	printf("}\n");
}

static void bs_print(const struct bs_args *a, int json)
{
	double batched = RATE(a, life_s[BS_BATCHED], a->messages), p50 = MED(a, p50_ms);
	char r1[256], r2[256], r3[256];

	if (json) {
		bs_print_json(a);
		return;
	}
	ROUNDS(a, life_s[BS_BATCHED], a->messages, "%.0f", r1);
	ROUNDS(a, life_s[BS_ONE], a->singles, "%.0f", r2);
	ROUNDS(a, p50_ms, 0, "%.2f", r3);
	printf("stagedoor-bench sqs: the SQS listener on 127.0.0.1, %s, every request signed "
	       "(SigV4); medians of %d round%s\n", a->engine, (int)a->rounds,
	       a->rounds == 1 ? "" : "s");
	printf("  %-26s %9.0f msgs/s  (%lld messages, %d clients, SendMessageBatch 10, "
	       "ReceiveMessage 10, DeleteMessageBatch; rounds %s)\n", "batched lifecycle", batched,
	       (long long)a->messages, (int)a->clients, r1);
	printf("  %-26s CPU per message: server %.0f us, native client %.0f us\n", "",
	       MED(a, srv_us[BS_BATCHED]), MED(a, cli_us[BS_BATCHED]));
	printf("  %-26s %9.0f msgs/s  (%lld messages, %d clients, SendMessage, ReceiveMessage, "
	       "DeleteMessage; rounds %s)\n", "one at a time", RATE(a, life_s[BS_ONE], a->singles),
	       (long long)a->singles, (int)a->clients, r2);
	printf("  %-26s CPU per message: server %.0f us, native client %.0f us\n", "",
	       MED(a, srv_us[BS_ONE]), MED(a, cli_us[BS_ONE]));
	printf("  %-26s p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%lld messages, send start to the "
	       "waiting receiver's answer; p50 rounds %s)\n", "latency to a long poll", p50,
	       MED(a, p99_ms), MED(a, max_ms), (long long)a->latency, r3);
	bs_print_refs(a, batched, 0);
	printf("  aims: batched >= 10000 msgs/s %s; latency p50 < 5 ms %s\n",
	       batched >= 10000 ? "met" : "MISSED", p50 < 5 ? "met" : "MISSED");
}

/* ======================== the command ==================================== */

int bench_sqs_cmd(int argc, char **argv)
{
	static struct bs_args a = { .messages = BS_MESSAGES, .singles = BS_SINGLES,
				    .latency = BS_LATENCY, .ref_messages = BS_REF_MESSAGES,
				    .clients = BS_CLIENTS, .rounds = 3 };
	const char *pg = NULL;
	int json = 0, keep = 0, rc;
	struct arg_opt opts[] = {
		{ "messages", ARG_INT, &a.messages, 10, 10000000, 0, NULL,
		  "messages of the batched lifecycle, per round (20000)", 0 },
		{ "clients", ARG_INT, &a.clients, 1, BS_CLIENTS_MAX, 0, NULL,
		  "client threads, each on its own keep-alive connection (4)", 0 },
		{ "singles", ARG_INT, &a.singles, 1, 10000000, 0, NULL,
		  "messages sent, received and deleted one at a time, per round (5000)", 0 },
		{ "latency", ARG_INT, &a.latency, 1, 1000000, 0, NULL,
		  "messages sent to a waiting long poll, per round (1000)", 0 },
		{ "ref-messages", ARG_INT, &a.ref_messages, 10, 10000000, 0, NULL,
		  "messages of each reference client's batched lifecycle (2000)", 0 },
		{ "no-refs", ARG_FLAG, &a.no_refs, 0, 0, 0, NULL,
		  "leave out the reference clients (boto3, the AWS SDK for JavaScript)", 0 },
		{ "rounds", ARG_INT, &a.rounds, 1, BS_ROUNDS_MAX, 0, NULL,
		  "rounds; each figure is the median (3)", 0 },
		{ "db", ARG_STR, &pg, 0, 0, 0, "URI",
		  "run on PostgreSQL, in a scratch schema of this postgresql:// database "
		  "(default: SQLite in a temp folder)", 0 },
		BENCH_ARG_KEEP(&keep),
		ARG_JSON(&json),
		ARG_END,
	};
	static const char usage[] = "sqs [--messages N] [--clients C] [--singles S] [--latency M] "
				    "[--ref-messages K] [--no-refs] [--rounds R] "
				    "[--db postgresql://...] [--json] [--keep]";

	if ((rc = bench_args(argc, argv, opts, usage)) != 0 || (rc = bench_target_set(pg)) != 0 ||
	    (rc = bench_in_dir(keep, bs_go, &a)) != 0)
		return rc;
	bs_print(&a, json);
	return 0;
}
