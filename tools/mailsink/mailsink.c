/*
 * mailsink.c: a local HTTPS mail provider for tests and offline demos.
 *
 *   mailsink --listen 127.0.0.1:0 --cert F --key F --maildir DIR
 *            [--port-file F] [--fail-500 N] [--fail-429 N --retry-after S]
 *            [--slow-ms N] [--drop-after-accept N]
 *            [--fail-500-pct P] [--drop-pct P] [--seed S]
 *
 * It serves, over TLS 1.2 or later (mbedTLS), on loopback only:
 *
 *   POST /v1/messages   Idempotency-Key: K
 *        {"from", "to", "subject", "text",
 *         "attachments": [{"filename", "content_type", "content" (base64)}]}
 *        -> 200 {"id": "<message id>"}; a replay of a key's first answer
 *           also carries "Idempotent-Replayed: true"
 *   GET  /v1/stats      -> 200 {"messages": N, "requests": R, "replays": P,
 *                                "failed_500": F, "dropped": D,
 *                                "keys": {"K": {"messages": n, "replays": p,
 *                                               "requests": r}}}
 *
 * Per key: messages stored (never more than 1), POSTs seen, and replays: the
 * POSTs the key absorbed by answering the first answer again (a client's
 * retry after a lost answer).  Totals: every POST, the replays, the injected
 * 500s and the dropped answers.
 *
 * and keeps DIR/../counts.json equal to what GET /v1/stats answers.
 *
 * One request per connection (every answer says Connection: close); one
 * thread per connection, so a second request can arrive while a first one
 * is still being answered (that is how 409 happens).
 *
 * The idempotency table, one entry per key, is the heart of it:
 *
 *   key unknown                    -> entry IN_FLIGHT with the body's SHA-256;
 *                                     the message is stored in DIR/new/
 *                                     (temp in tmp/, fsync, link), then the
 *                                     entry becomes DONE with its answer
 *   key IN_FLIGHT                  -> 409, nothing stored
 *   key DONE, same body SHA-256    -> the first answer again, nothing stored
 *   key DONE, other body           -> 422, nothing stored
 *   storing failed                 -> the entry is removed (500): a retry
 *                                     processes the key afresh
 *
 * Invariants: a key has at most one message in new/ (the only writer runs
 * while its entry is IN_FLIGHT, which is set under the table lock); an entry
 * is DONE only after its message is durable.
 *
 * Fault injection, counted down across all POST requests in arrival order:
 * --fail-500 N and --fail-429 N answer the next N requests with that status
 * before the table is consulted (nothing stored, the key stays unknown);
 * --drop-after-accept N processes the next N requests to DONE and then closes
 * the connection without an answer; --slow-ms N holds each answer back N ms
 * (on the processing path, while the key is still IN_FLIGHT).
 *
 * Probabilistic faults, for the crash soak (tools/chaos): --fail-500-pct P
 * answers each POST 500 with probability P% before the table is consulted;
 * --drop-pct P processes each POST that stores a message to DONE and then,
 * with probability P%, closes without an answer.  The dice are one
 * xorshift64* stream seeded by --seed S (default 1), drawn under the table
 * lock in arrival order: the same seed and the same arrivals give the same
 * faults.
 *
 * Missing key or unparseable JSON: 400; a body over 10 MiB: 413.  Stops on
 * SIGTERM or SIGINT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <mbedtls/base64.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/sha256.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include "clock.h"
#include "fsio.h"
#include "mail.h"
#include "result.h"

#define SINK_BODY_MAX (10u * 1024 * 1024)	/* larger bodies get 413 */
#define SINK_HEAD_MAX (16 * 1024)		/* request line and headers */
#define SINK_KEY_MAX 180			/* longer keys get 400 */
#define SINK_MAX_CONN 64			/* more at once are closed at once */
#define SINK_IO_TIMEOUT_MS 10000		/* a silent client is dropped */

/* ======================== options and shared state ====================== */

struct sink_opts {
	const char *listen;	/* "127.0.0.1:0" or "[::1]:0" */
	const char *cert;	/* PEM certificate (chain) */
	const char *key;	/* PEM private key */
	const char *maildir;	/* holds tmp/, new/, cur/ */
	const char *port_file;	/* may be NULL */
	long fail_500;		/* answer the next N POSTs with 500 */
	long fail_429;		/* answer the next N POSTs with 429 */
	long retry_after;	/* seconds, for 429 */
	long slow_ms;		/* hold each answer back this long */
	long drop_after;	/* process the next N POSTs, then drop the connection */
	long fail_500_pct;	/* answer this % of POSTs with 500, at random */
	long drop_pct;		/* drop the answer of this % of stored POSTs */
	uint64_t seed;		/* for the dice (default 1) */
};

enum entry_state { ENTRY_IN_FLIGHT, ENTRY_DONE };

struct entry {
	struct entry *next;
	char *key;			/* the Idempotency-Key */
	unsigned char sha[32];		/* SHA-256 of the first body */
	enum entry_state state;
	char id[64];			/* the message id, once DONE */
	long messages;			/* messages stored for the key (0 or 1) */
	long requests;			/* POSTs seen with the key */
	long replays;			/* POSTs answered with the first answer again */
};

static struct sink_opts opts;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;	/* guards everything below */
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;	/* n_conn dropped */
static struct entry *entries;	/* the idempotency table */
static long n_messages;		/* messages stored in all */
static long n_requests;		/* POSTs seen in all */
static long n_replays;		/* POSTs answered with a key's first answer */
static long n_failed_500;	/* POSTs answered 500 by injection */
static long n_dropped;		/* stored POSTs left without an answer */
static uint64_t dice;		/* xorshift64* state, from --seed */
static long next_id;		/* for message ids */
static int n_conn;		/* connection threads running */
static char counts_path[PATH_MAX];	/* DIR/../counts.json */

static mbedtls_ssl_config ssl_conf;	/* read-only once set up */
static mbedtls_x509_crt ssl_cert;
static mbedtls_pk_context ssl_key;
static mbedtls_entropy_context entropy;
static mbedtls_ctr_drbg_context drbg;	/* thread-safe: MBEDTLS_THREADING_C */

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "mailsink: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ======================== the dice ====================================== */

/* One roll: 1 with probability pct%.  Call with lock held (one stream, drawn
 * in arrival order, so a seed replays the same faults). */
static int dice_roll(long pct)
{
	if (pct <= 0)
		return 0;
	dice ^= dice >> 12;
	dice ^= dice << 25;
	dice ^= dice >> 27;
	return (long)(((dice * 0x2545F4914F6CDD1DULL) >> 33) % 100) < pct;
}

/* ======================== the table ===================================== */

/* Call with lock held. */
static struct entry *entry_find(const char *key)
{
	struct entry *e;

	for (e = entries; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

/* Call with lock held. */
static void entry_remove(struct entry *gone)
{
	struct entry **p;

	for (p = &entries; *p; p = &(*p)->next) {
		if (*p == gone) {
			*p = gone->next;
			free(gone->key);
			free(gone);
			return;
		}
	}
}

/* The stats document; caller json_decref()s.  Call with lock held. */
static json_t *stats_json(void)
{
	json_t *keys = json_object(), *doc;
	struct entry *e;

	for (e = entries; e; e = e->next)
		json_object_set_new(keys, e->key, json_pack("{s:I,s:I,s:I}", "messages",
				    (json_int_t)e->messages, "replays", (json_int_t)e->replays,
				    "requests", (json_int_t)e->requests));
	doc = json_pack("{s:I,s:I,s:I,s:I,s:I,s:o}", "messages", (json_int_t)n_messages,
			"requests", (json_int_t)n_requests, "replays", (json_int_t)n_replays,
			"failed_500", (json_int_t)n_failed_500, "dropped", (json_int_t)n_dropped,
			"keys", keys);
	return doc;
}

/* Rewrite counts.json atomically.  Call with lock held. */
static void counts_write(void)
{
	json_t *doc = stats_json();
	char *text = doc ? json_dumps(doc, JSON_SORT_KEYS) : NULL;
	char head[PATH_MAX + 8];

	snprintf(head, sizeof head, "%s.", counts_path);
	if (!text || fsio_put(counts_path, text, strlen(text), head, ".tmp", 0644, FSIO_RENAME,
			      NULL) != SD_OK)
		fprintf(stderr, "mailsink: cannot write %s: %s\n", counts_path, err_msg());
	free(text);
	json_decref(doc);
}

/* ======================== one connection ================================ */

struct conn {
	mbedtls_net_context net;
	mbedtls_ssl_context ssl;
};

struct request {
	char method[8];
	char path[256];
	char key[SINK_KEY_MAX + 2];	/* "" when absent */
	int has_key;
	int key_bad;			/* too long or holds controls */
	unsigned char *body;		/* NUL-terminated; owned */
	size_t body_len;
};

static int conn_write(struct conn *c, const char *buf, size_t len)
{
	while (len > 0) {
		int n = mbedtls_ssl_write(&c->ssl, (const unsigned char *)buf, len);

		if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static void respond(struct conn *c, int status, const char *extra_headers, const char *body)
{
	const char *reason = status == 200 ? "OK" : status == 400 ? "Bad Request" :
		status == 404 ? "Not Found" : status == 405 ? "Method Not Allowed" :
		status == 409 ? "Conflict" : status == 413 ? "Payload Too Large" :
		status == 422 ? "Unprocessable Entity" : status == 429 ? "Too Many Requests" :
		status == 503 ? "Service Unavailable" : "Internal Server Error";
	char head[512];
	int n;

	n = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n%s\r\n", status, reason,
		     strlen(body), extra_headers ? extra_headers : "");
	if (n < 0 || (size_t)n >= sizeof head)
		return;
	if (conn_write(c, head, (size_t)n) == 0 && conn_write(c, body, strlen(body)) == 0)
		mbedtls_ssl_close_notify(&c->ssl);
}

static void respond_error(struct conn *c, int status, const char *extra, const char *msg)
{
	json_t *doc = json_pack("{s:s}", "error", msg);
	char *text = doc ? json_dumps(doc, 0) : NULL;

	respond(c, status, extra, text ? text : "{}");
	free(text);
	json_decref(doc);
}

/* Read until "\r\n\r\n" into buf; returns the bytes read (headers and
 * whatever body followed), *head_len the header length; -1 on error or
 * headers too large. */
static long read_head(struct conn *c, char *buf, size_t size, size_t *head_len)
{
	size_t have = 0;

	while (have < size - 1) {
		int n = mbedtls_ssl_read(&c->ssl, (unsigned char *)buf + have, size - 1 - have);
		char *end;

		if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		if (n <= 0)
			return -1;
		have += (size_t)n;
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end) {
			*head_len = (size_t)(end - buf) + 4;
			return (long)have;
		}
	}
	return -1;
}

/* 0: parsed; else the HTTP status to answer with (or -1: just close). */
static int read_request(struct conn *c, struct request *rq)
{
	char *head = malloc(SINK_HEAD_MAX + 1), *line, *save = NULL;
	size_t head_len = 0, have, content_len = 0;
	long got;
	int has_len = 0, rc = 0;

	if (!head)
		return 500;
	got = read_head(c, head, SINK_HEAD_MAX + 1, &head_len);
	if (got < 0) {
		rc = -1;
		goto out;
	}
	have = (size_t)got - head_len;
	head[head_len - 2] = '\0';	/* the headers end at the blank line */

	line = strtok_r(head, "\r\n", &save);
	if (!line || sscanf(line, "%7s %255s", rq->method, rq->path) != 2) {
		rc = 400;
		goto out;
	}
	while ((line = strtok_r(NULL, "\r\n", &save))) {
		char *colon = strchr(line, ':'), *v;
		size_t vlen;

		if (!colon)
			continue;
		*colon = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		vlen = strlen(v);
		while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
			v[--vlen] = '\0';
		if (strcasecmp(line, "Content-Length") == 0) {
			char *end;
			unsigned long long n;

			errno = 0;
			n = strtoull(v, &end, 10);
			if (errno || end == v || *end) {
				rc = 400;
				goto out;
			}
			if (n > SINK_BODY_MAX) {
				rc = 413;
				goto out;
			}
			content_len = (size_t)n;
			has_len = 1;
		} else if (strcasecmp(line, "Transfer-Encoding") == 0) {
			rc = 400;	/* chunked bodies: not supported, say so */
			goto out;
		} else if (strcasecmp(line, "Idempotency-Key") == 0 && vlen > 0) {
			size_t i;

			rq->has_key = 1;
			if (vlen > SINK_KEY_MAX)
				rq->key_bad = 1;
			for (i = 0; i < vlen && !rq->key_bad; i++)
				if ((unsigned char)v[i] < 0x21 || (unsigned char)v[i] > 0x7e)
					rq->key_bad = 1;
			if (!rq->key_bad)
				memcpy(rq->key, v, vlen + 1);
		}
	}
	if (!has_len)
		content_len = 0;
	if (have > content_len)
		have = content_len;	/* a pipelined second request: ignored */
	rq->body = malloc(content_len + 1);
	if (!rq->body) {
		rc = 500;
		goto out;
	}
	memcpy(rq->body, head + head_len, have);
	while (have < content_len) {
		int n = mbedtls_ssl_read(&c->ssl, rq->body + have, content_len - have);

		if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		if (n <= 0) {
			rc = -1;
			goto out;
		}
		have += (size_t)n;
	}
	rq->body[content_len] = '\0';
	rq->body_len = content_len;
out:
	free(head);
	return rc;
}

/* ======================== storing one message =========================== */

/* The JSON body as a mail_message; attachments decoded into *datas.
 * 0 or 400 with msg set. */
static int message_from_json(json_t *doc, const char *key, struct mail_message *m,
			     struct mail_attachment **atts, unsigned char ***datas,
			     const char **why)
{
	json_t *list, *a;
	size_t i, n = 0;

	*atts = NULL;
	*datas = NULL;
	memset(m, 0, sizeof *m);
	if (json_unpack(doc, "{s:s,s:s,s?s,s?s}", "from", &m->from, "to", &m->to,
			"subject", &m->subject, "text", &m->text) != 0) {
		*why = "from and to must be strings; subject and text strings if present";
		return 400;
	}
	if (!m->text)
		m->text = "";
	m->idempotency_key = key;
	list = json_object_get(doc, "attachments");
	if (list && !json_is_array(list)) {
		*why = "attachments must be an array";
		return 400;
	}
	n = list ? json_array_size(list) : 0;
	if (n > 0) {
		*atts = calloc(n, sizeof **atts);
		*datas = calloc(n, sizeof **datas);
		if (!*atts || !*datas) {
			*why = "out of memory";
			return 500;
		}
	}
	json_array_foreach(list, i, a) {
		const char *name = NULL, *type = NULL, *content = NULL;
		size_t clen, olen = 0;

		if (json_unpack(a, "{s:s,s?s,s:s}", "filename", &name, "content_type", &type,
				"content", &content) != 0) {
			*why = "each attachment needs filename and content (base64)";
			return 400;
		}
		clen = strlen(content);
		(*datas)[i] = malloc(clen / 4 * 3 + 3);
		if (!(*datas)[i]) {
			*why = "out of memory";
			return 500;
		}
		if (mbedtls_base64_decode((*datas)[i], clen / 4 * 3 + 3, &olen,
					  (const unsigned char *)content, clen) != 0) {
			*why = "attachment content is not base64";
			return 400;
		}
		(*atts)[i].filename = name;
		(*atts)[i].content_type = type ? type : "application/octet-stream";
		(*atts)[i].data = (*datas)[i];
		(*atts)[i].len = olen;
	}
	m->attachments = *atts;
	m->n_attachments = (int)n;
	return 0;
}

/* Format and store the message as DIR/new/<id>.eml.  0, or the status to
 * answer with and *why (which may point into whybuf). */
static int message_store(json_t *doc, const char *key, const char *id, const char **why,
			 char *whybuf, size_t whysize)
{
	struct mail_message m;
	struct mail_attachment *atts;
	unsigned char **datas;
	char path[PATH_MAX], tmp_head[PATH_MAX];
	char *text = NULL;
	size_t len = 0, i, n;
	int status, placed = 0;

	status = message_from_json(doc, key, &m, &atts, &datas, why);
	n = json_array_size(json_object_get(doc, "attachments"));
	if (status != 0)
		goto out;
	if (mail_format(&m, clock_now_ms(), &text, &len) != SD_OK) {
		/* mail_format's own words: which field, and why */
		snprintf(whybuf, whysize, "message refused: %s", err_msg());
		*why = whybuf;
		status = 400;
		goto out;
	}
	snprintf(path, sizeof path, "%s/new/%s.eml", opts.maildir, id);
	snprintf(tmp_head, sizeof tmp_head, "%s/tmp/%s.", opts.maildir, id);
	if (fsio_put(path, text, len, tmp_head, ".tmp", 0644, FSIO_LINK, &placed) != SD_OK ||
	    !placed) {
		fprintf(stderr, "mailsink: cannot store %s: %s\n", path, err_msg());
		*why = "cannot store the message";
		status = 500;
		goto out;
	}
	status = 0;
out:
	if (datas)
		for (i = 0; i < n; i++)
			free(datas[i]);
	free(datas);
	free(atts);
	free(text);
	return status;
}

/* ======================== one request =================================== */

static void handle_post(struct conn *c, struct request *rq)
{
	unsigned char sha[32];
	struct entry *e;
	json_t *doc = NULL;
	json_error_t jerr;
	char id[64], answer[128], extra[64], whybuf[300];
	const char *why = NULL;
	int status, drop = 0;

	if (!rq->has_key) {
		respond_error(c, 400, NULL, "Idempotency-Key header is required");
		return;
	}
	if (rq->key_bad) {
		respond_error(c, 400, NULL, "Idempotency-Key must be 1 to 180 printable characters");
		return;
	}
	mbedtls_sha256_ret(rq->body, rq->body_len, sha, 0);

	pthread_mutex_lock(&lock);
	n_requests++;
	if (opts.fail_500 > 0 || dice_roll(opts.fail_500_pct)) {
		if (opts.fail_500 > 0)
			opts.fail_500--;
		n_failed_500++;
		counts_write();
		pthread_mutex_unlock(&lock);
		sleep_ms(opts.slow_ms);
		respond_error(c, 500, NULL, "injected failure (--fail-500)");
		return;
	}
	if (opts.fail_429 > 0) {
		opts.fail_429--;
		pthread_mutex_unlock(&lock);
		snprintf(extra, sizeof extra, "Retry-After: %ld\r\n", opts.retry_after);
		sleep_ms(opts.slow_ms);
		respond_error(c, 429, extra, "injected rate limit (--fail-429)");
		return;
	}
	e = entry_find(rq->key);
	if (e) {
		e->requests++;
		if (e->state == ENTRY_IN_FLIGHT) {
			pthread_mutex_unlock(&lock);
			sleep_ms(opts.slow_ms);
			respond_error(c, 409, NULL, "a request with this key is in flight");
			return;
		}
		if (memcmp(e->sha, sha, sizeof sha) != 0) {
			counts_write();
			pthread_mutex_unlock(&lock);
			sleep_ms(opts.slow_ms);
			respond_error(c, 422, NULL,
				      "this key was used with a different request body");
			return;
		}
		snprintf(answer, sizeof answer, "{\"id\":\"%s\"}", e->id);
		e->replays++;
		n_replays++;
		counts_write();
		pthread_mutex_unlock(&lock);
		sleep_ms(opts.slow_ms);
		respond(c, 200, "Idempotent-Replayed: true\r\n", answer);
		return;
	}
	pthread_mutex_unlock(&lock);

	/* a new key: check the body before taking the key */
	doc = json_loadb((const char *)rq->body, rq->body_len, 0, &jerr);
	if (!doc || !json_is_object(doc)) {
		sleep_ms(opts.slow_ms);
		respond_error(c, 400, NULL, "the body is not a JSON object");
		goto out;
	}

	pthread_mutex_lock(&lock);
	if (entry_find(rq->key)) {
		/* another request took the key meanwhile: it is in flight or done;
		 * treat this one as arriving second */
		pthread_mutex_unlock(&lock);
		sleep_ms(opts.slow_ms);
		respond_error(c, 409, NULL, "a request with this key is in flight");
		goto out;
	}
	e = calloc(1, sizeof *e);
	if (!e || !(e->key = strdup(rq->key))) {
		free(e);
		pthread_mutex_unlock(&lock);
		respond_error(c, 500, NULL, "out of memory");
		goto out;
	}
	memcpy(e->sha, sha, sizeof sha);
	e->state = ENTRY_IN_FLIGHT;
	e->requests = 1;
	e->next = entries;
	entries = e;
	snprintf(id, sizeof id, "ms-%" PRId64 "-%ld", clock_now_ms(), ++next_id);
	if (opts.drop_after > 0) {
		opts.drop_after--;
		drop = 1;
	}
	pthread_mutex_unlock(&lock);

	status = message_store(doc, rq->key, id, &why, whybuf, sizeof whybuf);
	sleep_ms(opts.slow_ms);	/* the key stays in flight meanwhile: 409s */

	pthread_mutex_lock(&lock);
	if (status != 0) {
		/* nothing stored: forget the key, so a retry starts afresh */
		entry_remove(e);
		pthread_mutex_unlock(&lock);
		respond_error(c, status, NULL, why);
		goto out;
	}
	e->state = ENTRY_DONE;
	snprintf(e->id, sizeof e->id, "%s", id);
	e->messages++;
	n_messages++;
	if (!drop && dice_roll(opts.drop_pct))
		drop = 1;
	if (drop)
		n_dropped++;
	counts_write();
	pthread_mutex_unlock(&lock);
	printf("stored %s key=%s%s\n", id, rq->key, drop ? " (dropping the answer)" : "");
	fflush(stdout);
	if (drop)
		goto out;	/* the caller closes without a word */
	snprintf(answer, sizeof answer, "{\"id\":\"%s\"}", id);
	respond(c, 200, NULL, answer);
out:
	json_decref(doc);
}

static void handle(struct conn *c)
{
	struct request rq;
	int rc;

	memset(&rq, 0, sizeof rq);
	rc = read_request(c, &rq);
	if (rc < 0)
		goto out;
	if (rc == 413) {
		respond_error(c, 413, NULL, "the body is larger than 10 MiB");
		goto out;
	}
	if (rc != 0) {
		respond_error(c, rc, NULL, "bad request");
		goto out;
	}
	if (strcmp(rq.path, "/v1/stats") == 0 && strcmp(rq.method, "GET") == 0) {
		json_t *doc;
		char *text;

		pthread_mutex_lock(&lock);
		doc = stats_json();
		pthread_mutex_unlock(&lock);
		text = doc ? json_dumps(doc, JSON_SORT_KEYS) : NULL;
		respond(c, text ? 200 : 500, NULL, text ? text : "{}");
		free(text);
		json_decref(doc);
	} else if (strcmp(rq.path, "/v1/messages") == 0) {
		if (strcmp(rq.method, "POST") == 0)
			handle_post(c, &rq);
		else
			respond_error(c, 405, "Allow: POST\r\n", "use POST");
	} else {
		respond_error(c, 404, NULL, "POST /v1/messages or GET /v1/stats");
	}
out:
	free(rq.body);
}

static void *conn_run(void *arg)
{
	struct conn *c = arg;
	int rc;

	mbedtls_ssl_init(&c->ssl);
	if (mbedtls_ssl_setup(&c->ssl, &ssl_conf) != 0)
		goto out;
	mbedtls_ssl_set_bio(&c->ssl, &c->net, mbedtls_net_send, NULL, mbedtls_net_recv_timeout);
	while ((rc = mbedtls_ssl_handshake(&c->ssl)) != 0) {
		if (rc != MBEDTLS_ERR_SSL_WANT_READ && rc != MBEDTLS_ERR_SSL_WANT_WRITE) {
			char buf[160];

			/* a client that refuses our certificate ends here: normal
			 * in the tests, so one line only */
			mbedtls_strerror(rc, buf, sizeof buf);
			fprintf(stderr, "mailsink: handshake: %s\n", buf);
			goto out;
		}
	}
	handle(c);
out:
	mbedtls_ssl_free(&c->ssl);
	mbedtls_net_free(&c->net);
	free(c);
	pthread_mutex_lock(&lock);
	n_conn--;
	pthread_cond_signal(&idle);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* ======================== start-up ====================================== */

static long opt_long(const char *name, const char *v)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < 0)
		die("%s wants a non-negative integer, not '%s'", name, v);
	return n;
}

static long opt_pct(const char *name, const char *v)
{
	long n = opt_long(name, v);

	if (n > 100)
		die("%s wants a percentage, 0 to 100, not '%s'", name, v);
	return n;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: mailsink --listen 127.0.0.1:PORT --cert F --key F --maildir DIR\n"
		"                [--port-file F] [--fail-500 N] [--fail-429 N --retry-after S]\n"
		"                [--slow-ms N] [--drop-after-accept N]\n"
		"                [--fail-500-pct P] [--drop-pct P] [--seed S]\n");
	exit(2);
}

static void opts_parse(int argc, char **argv)
{
	int i;

	opts.retry_after = 1;
	opts.seed = 1;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			usage();
		if (!v)
			die("%s wants a value", a);
		i++;
		if (strcmp(a, "--listen") == 0)
			opts.listen = v;
		else if (strcmp(a, "--cert") == 0)
			opts.cert = v;
		else if (strcmp(a, "--key") == 0)
			opts.key = v;
		else if (strcmp(a, "--maildir") == 0)
			opts.maildir = v;
		else if (strcmp(a, "--port-file") == 0)
			opts.port_file = v;
		else if (strcmp(a, "--fail-500") == 0)
			opts.fail_500 = opt_long(a, v);
		else if (strcmp(a, "--fail-429") == 0)
			opts.fail_429 = opt_long(a, v);
		else if (strcmp(a, "--retry-after") == 0)
			opts.retry_after = opt_long(a, v);
		else if (strcmp(a, "--slow-ms") == 0)
			opts.slow_ms = opt_long(a, v);
		else if (strcmp(a, "--drop-after-accept") == 0)
			opts.drop_after = opt_long(a, v);
		else if (strcmp(a, "--fail-500-pct") == 0)
			opts.fail_500_pct = opt_pct(a, v);
		else if (strcmp(a, "--drop-pct") == 0)
			opts.drop_pct = opt_pct(a, v);
		else if (strcmp(a, "--seed") == 0)
			opts.seed = (uint64_t)opt_long(a, v);
		else
			die("unknown option %s", a);
	}
	if (!opts.listen || !opts.cert || !opts.key || !opts.maildir)
		usage();
	/* splitmix64 of the seed: never 0, and nearby seeds differ at once */
	dice = opts.seed + 0x9E3779B97F4A7C15ULL;
	dice = (dice ^ (dice >> 30)) * 0xBF58476D1CE4E5B9ULL;
	dice = (dice ^ (dice >> 27)) * 0x94D049BB133111EBULL;
	dice ^= dice >> 31;
	if (dice == 0)
		dice = 1;
	if (strlen(opts.maildir) > PATH_MAX - 100)
		die("--maildir is too long");
}

/* A listening socket on a loopback address only.  Returns the fd; *port. */
static int listen_loopback(const char *spec, int *port)
{
	char host[128];
	const char *colon, *portstr;
	struct addrinfo hints, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	int fd, one = 1, rc;

	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (!close || close[1] != ':' || (size_t)(close - spec - 1) >= sizeof host)
			die("--listen wants [::1]:PORT or 127.0.0.1:PORT");
		memcpy(host, spec + 1, (size_t)(close - spec - 1));
		host[close - spec - 1] = '\0';
		portstr = close + 2;
	} else {
		colon = strrchr(spec, ':');
		if (!colon || (size_t)(colon - spec) >= sizeof host)
			die("--listen wants 127.0.0.1:PORT or [::1]:PORT");
		memcpy(host, spec, (size_t)(colon - spec));
		host[colon - spec] = '\0';
		portstr = colon + 1;
	}
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, portstr, &hints, &ai);
	if (rc != 0)
		die("--listen %s: a numeric loopback address and port, please (%s)", spec,
		    gai_strerror(rc));
	if (ai->ai_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)ai->ai_addr;

		if ((ntohl(sin->sin_addr.s_addr) >> 24) != 127)
			die("--listen %s: refused, loopback (127.0.0.0/8 or ::1) only", spec);
	} else if (ai->ai_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ai->ai_addr;

		if (!IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr))
			die("--listen %s: refused, loopback (127.0.0.0/8 or ::1) only", spec);
	} else {
		die("--listen %s: not an IP address", spec);
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0)
		die("--listen %s: %s", spec, strerror(errno));
	freeaddrinfo(ai);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		die("getsockname: %s", strerror(errno));
	*port = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
		: ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static void tls_setup(void)
{
	static const char pers[] = "mailsink";
	char buf[160];
	int rc;

	mbedtls_ssl_config_init(&ssl_conf);
	mbedtls_x509_crt_init(&ssl_cert);
	mbedtls_pk_init(&ssl_key);
	mbedtls_entropy_init(&entropy);
	mbedtls_ctr_drbg_init(&drbg);
	if ((rc = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy,
					(const unsigned char *)pers, sizeof pers - 1)) != 0)
		goto fail;
	if ((rc = mbedtls_x509_crt_parse_file(&ssl_cert, opts.cert)) != 0) {
		mbedtls_strerror(rc, buf, sizeof buf);
		die("--cert %s: %s", opts.cert, buf);
	}
	if ((rc = mbedtls_pk_parse_keyfile(&ssl_key, opts.key, NULL)) != 0) {
		mbedtls_strerror(rc, buf, sizeof buf);
		die("--key %s: %s", opts.key, buf);
	}
	if ((rc = mbedtls_ssl_config_defaults(&ssl_conf, MBEDTLS_SSL_IS_SERVER,
					      MBEDTLS_SSL_TRANSPORT_STREAM,
					      MBEDTLS_SSL_PRESET_DEFAULT)) != 0)
		goto fail;
	mbedtls_ssl_conf_min_version(&ssl_conf, MBEDTLS_SSL_MAJOR_VERSION_3,
				     MBEDTLS_SSL_MINOR_VERSION_3);	/* TLS 1.2 */
	mbedtls_ssl_conf_rng(&ssl_conf, mbedtls_ctr_drbg_random, &drbg);
	mbedtls_ssl_conf_read_timeout(&ssl_conf, SINK_IO_TIMEOUT_MS);
	if ((rc = mbedtls_ssl_conf_own_cert(&ssl_conf, &ssl_cert, &ssl_key)) != 0) {
		mbedtls_strerror(rc, buf, sizeof buf);
		die("--cert and --key do not go together: %s", buf);
	}
	return;
fail:
	mbedtls_strerror(rc, buf, sizeof buf);
	die("TLS set-up: %s", buf);
}

static void tls_free(void)
{
	mbedtls_ssl_config_free(&ssl_conf);
	mbedtls_x509_crt_free(&ssl_cert);
	mbedtls_pk_free(&ssl_key);
	mbedtls_ctr_drbg_free(&drbg);
	mbedtls_entropy_free(&entropy);
}

static void maildir_setup(void)
{
	static const char *subs[] = { "tmp", "new", "cur" };
	char path[PATH_MAX], *slash;
	size_t i;

	for (i = 0; i < sizeof subs / sizeof subs[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", opts.maildir, subs[i]);
		if (fsio_mkdirs(path, 0) != SD_OK)
			die("%s", err_msg());
	}
	/* counts.json beside the maildir, not in it (readers list new/) */
	snprintf(path, sizeof path, "%s", opts.maildir);
	while (strlen(path) > 1 && path[strlen(path) - 1] == '/')
		path[strlen(path) - 1] = '\0';
	slash = strrchr(path, '/');
	if (!slash)
		snprintf(counts_path, sizeof counts_path, "counts.json");
	else if (slash == path)
		snprintf(counts_path, sizeof counts_path, "/counts.json");
	else {
		*slash = '\0';
		if (snprintf(counts_path, sizeof counts_path, "%s/counts.json", path) >=
		    (int)sizeof counts_path)
			die("the maildir's path is too long: %s", opts.maildir);
	}
}

static void port_announce(int port)
{
	char buf[32], head[PATH_MAX + 8];
	int n = snprintf(buf, sizeof buf, "%d\n", port);

	printf("%s", buf);
	fflush(stdout);
	if (!opts.port_file)
		return;
	/* renamed into place: a reader never sees half a number */
	snprintf(head, sizeof head, "%s.", opts.port_file);
	if (fsio_put(opts.port_file, buf, (size_t)n, head, ".tmp", 0644, FSIO_RENAME, NULL) !=
	    SD_OK)
		die("%s", err_msg());
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	pthread_attr_t attr;
	int lfd, port = 0;

	opts_parse(argc, argv);
	clock_real();
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	maildir_setup();
	tls_setup();
	lfd = listen_loopback(opts.listen, &port);
	pthread_mutex_lock(&lock);
	counts_write();
	pthread_mutex_unlock(&lock);
	port_announce(port);

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	while (!stopping) {
		struct pollfd pfd = { lfd, POLLIN, 0 };
		struct timeval tv = { SINK_IO_TIMEOUT_MS / 1000, 0 };
		struct conn *c;
		pthread_t th;
		int fd;

		if (poll(&pfd, 1, 200) <= 0)
			continue;
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		pthread_mutex_lock(&lock);
		if (n_conn >= SINK_MAX_CONN || !(c = calloc(1, sizeof *c))) {
			pthread_mutex_unlock(&lock);
			close(fd);
			continue;
		}
		n_conn++;
		pthread_mutex_unlock(&lock);
		mbedtls_net_init(&c->net);
		c->net.fd = fd;
		if (pthread_create(&th, &attr, conn_run, c) != 0) {
			close(fd);
			free(c);
			pthread_mutex_lock(&lock);
			n_conn--;
			pthread_mutex_unlock(&lock);
		}
	}
	pthread_attr_destroy(&attr);
	close(lfd);

	/* let running connections finish (each is bounded by the I/O timeout
	 * and --slow-ms), so no thread uses the TLS state as it is freed */
	pthread_mutex_lock(&lock);
	while (n_conn > 0)
		pthread_cond_wait(&idle, &lock);
	while (entries)
		entry_remove(entries);
	pthread_mutex_unlock(&lock);
	tls_free();
	return 0;
}
