/*
 * test_http.c: the HTTP server (http.h) on a free loopback port with a fake
 * handler, spoken to over raw sockets so that every byte on the wire is the
 * test's: routing between the embedded dashboard and the handler, the query
 * split from the path, the headers passed through, the 64 KiB body limit
 * (413 without calling the handler), the headers every response carries, a
 * client that sends half a request while others are served, and many
 * requests at once.  The server is told its name is "box" (http_opts.hosts),
 * the Host every request here sends.  What guards the front door on a LAN
 * (TLS, Host and Origin, deadlines, per-client and global limits) is
 * tests/test_frontdoor.c.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "log.h"
#include "testutil.h"

/* ---------------------------------------------------------------------------
 * The fake handler: records the last request, answers by path
 * ------------------------------------------------------------------------ */

struct seen {
	pthread_mutex_t mu;
	int calls;
	char *method, *path, *query, *authorization, *idempotency_key, *content_type, *body;
	size_t body_len;
	int body_terminated;	/* body[body_len] was NUL */
};

static struct seen seen = { .mu = PTHREAD_MUTEX_INITIALIZER };

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void seen_reset(void)
{
	pthread_mutex_lock(&seen.mu);
	free(seen.method);
	free(seen.path);
	free(seen.query);
	free(seen.authorization);
	free(seen.idempotency_key);
	free(seen.content_type);
	free(seen.body);
	seen.method = seen.path = seen.query = seen.authorization = NULL;
	seen.idempotency_key = seen.content_type = seen.body = NULL;
	seen.calls = 0;
	seen.body_len = 0;
	seen.body_terminated = 0;
	pthread_mutex_unlock(&seen.mu);
}

static int seen_calls(void)
{
	int n;

	pthread_mutex_lock(&seen.mu);
	n = seen.calls;
	pthread_mutex_unlock(&seen.mu);
	return n;
}

static void fake_handler(void *arg, const struct http_request *req, struct http_response *res)
{
	assert_ptr_equal(arg, &seen);
	assert_non_null(req->body);
	pthread_mutex_lock(&seen.mu);
	seen.calls++;
	free(seen.method);
	free(seen.path);
	free(seen.query);
	free(seen.authorization);
	free(seen.idempotency_key);
	free(seen.content_type);
	free(seen.body);
	seen.method = dup_or_null(req->method);
	seen.path = dup_or_null(req->path);
	seen.query = dup_or_null(req->query);
	seen.authorization = dup_or_null(req->authorization);
	seen.idempotency_key = dup_or_null(req->idempotency_key);
	seen.content_type = dup_or_null(req->content_type);
	seen.body = malloc(req->body_len + 1);
	memcpy(seen.body, req->body, req->body_len + 1);
	seen.body_len = req->body_len;
	seen.body_terminated = req->body[req->body_len] == '\0';
	pthread_mutex_unlock(&seen.mu);

	if (strcmp(req->path, "/v1/echo") == 0) {
		/* the body back, as is */
		res->status = 200;
		strcpy(res->content_type, "application/octet-stream");
		res->body = malloc(req->body_len ? req->body_len : 1);
		memcpy(res->body, req->body, req->body_len);
		res->body_len = req->body_len;
	} else if (strcmp(req->path, "/v1/busy") == 0) {
		res->status = 503;
		strcpy(res->retry_after, "7");
		res->body = strdup("{\"error\":\"busy\"}");
		res->body_len = strlen(res->body);
	} else if (strcmp(req->path, "/v1/nostatus") == 0) {
		res->body = strdup("lost");
		res->body_len = 4;
	} else if (strcmp(req->path, "/v1/notype") == 0) {
		res->status = 200;
		res->body = strdup("{}");
		res->body_len = 2;
	} else if (strcmp(req->path, "/v1/empty") == 0) {
		res->status = 204;
	} else {
		res->status = 404;
		strcpy(res->content_type, "application/json");
		res->body = strdup("{\"error\":\"not found\"}");
		res->body_len = strlen(res->body);
	}
}

/* ---------------------------------------------------------------------------
 * A raw HTTP/1.1 client
 * ------------------------------------------------------------------------ */

struct reply {
	int status;
	char head[8192];	/* status line and headers */
	char *body;		/* malloc'd, NUL-terminated */
	size_t body_len;
};

static int dial(int port)
{
	struct sockaddr_in a;
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
		fail_msg("connect to port %d: %s", port, strerror(errno));
	return fd;
}

static void send_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fail_msg("send: %s", strerror(errno));
		p += w;
		n -= (size_t)w;
	}
}

/* read_reply: read until the server closes (requests say Connection: close). */
static int read_reply(int fd, struct reply *r)
{
	size_t cap = 16384, len = 0;
	char *buf = malloc(cap), *end;

	memset(r, 0, sizeof *r);
	for (;;) {
		ssize_t n;

		if (len + 4096 > cap)
			buf = realloc(buf, cap *= 2);
		n = recv(fd, buf + len, cap - len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && len == 0) {
			free(buf);
			return -1;
		}
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	end = strstr(buf, "\r\n\r\n");
	if (!end || sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1) {
		free(buf);
		return -1;
	}
	snprintf(r->head, sizeof r->head, "%.*s\r\n", (int)(end - buf), buf);
	r->body_len = len - (size_t)(end + 4 - buf);
	r->body = malloc(r->body_len + 1);
	memcpy(r->body, end + 4, r->body_len);
	r->body[r->body_len] = '\0';
	free(buf);
	return 0;
}

/* request: one raw request (header block without the blank line) plus a
 * body, on a fresh connection. */
static void request(int port, const char *head, const char *body, size_t body_len,
		    struct reply *r)
{
	int fd = dial(port);

	send_all(fd, head, strlen(head));
	send_all(fd, "\r\n", 2);
	if (body_len)
		send_all(fd, body, body_len);
	if (read_reply(fd, r) != 0)
		fail_msg("no HTTP reply to %.40s", head);
	close(fd);
}

static void get(int port, const char *method, const char *target, struct reply *r)
{
	char head[1024];

	snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: box\r\nConnection: close\r\n",
		 method, target);
	request(port, head, NULL, 0, r);
}

static void reply_free(struct reply *r)
{
	free(r->body);
	r->body = NULL;
}

/* header: the value of a response header (copied into buf), or NULL. */
static const char *header(const struct reply *r, const char *name, char *buf, size_t size)
{
	char pat[128];
	const char *p, *e;

	snprintf(pat, sizeof pat, "\r\n%s:", name);
	p = strcasestr(r->head, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	e = strstr(p, "\r\n");
	snprintf(buf, size, "%.*s", (int)(e - p), p);
	return buf;
}

/* check_common: what every response carries. */
static void check_common(const struct reply *r)
{
	char v[256];

	assert_non_null(header(r, "Content-Type", v, sizeof v));
	assert_non_null(header(r, "Content-Length", v, sizeof v));
	assert_int_equal(strtoul(v, NULL, 10), r->body_len);
	assert_non_null(header(r, "X-Content-Type-Options", v, sizeof v));
	assert_string_equal(v, "nosniff");
}

/* ---------------------------------------------------------------------------
 * Setup: a server on 127.0.0.1:0 per test
 * ------------------------------------------------------------------------ */

static struct http_server *srv;
static int port;

/* The requests below name the box "box" (Host: box): the name it is given. */
static const char *const box_hosts[] = { "box", NULL };

static enum sd_result start_box(void)
{
	struct http_opts o;

	memset(&o, 0, sizeof o);
	o.listen = "127.0.0.1:0";
	o.hosts = box_hosts;
	return http_start_opts(&o, fake_handler, &seen, &srv);
}

static int setup(void **state)
{
	(void)state;
	seen_reset();
	if (start_box() != SD_OK) {
		fprintf(stderr, "http_start_opts: %s\n", err_msg());
		return -1;
	}
	port = http_port(srv);
	return port > 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	http_stop(srv);
	srv = NULL;
	http_set_timeout_s(0);
	seen_reset();
	return 0;
}

/* ---------------------------------------------------------------------------
 * The tests
 * ------------------------------------------------------------------------ */

/* The pages' files come from the binary, byte for byte the files in
 * src/dashboard/ and src/door/, with their types; the handler never sees
 * them. */
static void test_dashboard_served(void **state)
{
	static const struct {
		const char *target, *file, *type;
	} want[] = {
		{ "/", "src/dashboard/index.html", "text/html; charset=utf-8" },
		{ "/dashboard.js", "src/dashboard/dashboard.js", "text/javascript; charset=utf-8" },
		{ "/charts.js", "src/dashboard/charts.js", "text/javascript; charset=utf-8" },
		{ "/boxoffice.js", "src/dashboard/boxoffice.js", "text/javascript; charset=utf-8" },
		{ "/dashboard.css", "src/dashboard/dashboard.css", "text/css; charset=utf-8" },
		{ "/door", "src/door/door.html", "text/html; charset=utf-8" },
		{ "/door.js", "src/door/door.js", "text/javascript; charset=utf-8" },
		{ "/door.css", "src/door/door.css", "text/css; charset=utf-8" },
		{ "/jsQR.js", "src/door/vendor/jsQR.js", "text/javascript; charset=utf-8" },
	};
	struct reply r;
	char v[512];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof want / sizeof want[0]; i++) {
		size_t size;
		unsigned char *file = tu_slurp(want[i].file, &size);

		assert_non_null(file);
		get(port, "GET", want[i].target, &r);
		assert_int_equal(r.status, 200);
		check_common(&r);
		assert_string_equal(header(&r, "Content-Type", v, sizeof v), want[i].type);
		assert_int_equal(r.body_len, size);
		assert_memory_equal(r.body, file, size);
		assert_non_null(header(&r, "Content-Security-Policy", v, sizeof v));
		assert_non_null(strstr(v, "connect-src 'self'"));
		assert_null(strstr(r.head, "no-store"));
		reply_free(&r);

		get(port, "HEAD", want[i].target, &r);
		assert_int_equal(r.status, 200);
		assert_int_equal(r.body_len, 0);
		assert_int_equal(strtoul(header(&r, "Content-Length", v, sizeof v), NULL, 10), size);
		reply_free(&r);
		free(file);
	}
	/* The page names its script and style by the paths served above. */
	get(port, "GET", "/", &r);
	assert_non_null(strstr(r.body, "src=\"/dashboard.js\""));
	assert_non_null(strstr(r.body, "src=\"/charts.js\""));
	assert_non_null(strstr(r.body, "src=\"/boxoffice.js\""));
	assert_non_null(strstr(r.body, "href=\"/dashboard.css\""));
	reply_free(&r);
	get(port, "GET", "/door", &r);
	assert_non_null(strstr(r.body, "src=\"/door.js\""));
	assert_non_null(strstr(r.body, "href=\"/door.css\""));
	reply_free(&r);
	assert_int_equal(seen_calls(), 0);
	get(port, "GET", "/door.html", &r);	/* the page is /door: this is the handler's */
	assert_int_equal(seen_calls(), 1);
	assert_string_equal(seen.path, "/door.html");
	reply_free(&r);
}

/* Everything but GET/HEAD of the pages' files goes to the handler. */
static void test_routing(void **state)
{
	struct reply r;
	char v[256];

	(void)state;
	get(port, "GET", "/v1/stats", &r);
	assert_int_equal(r.status, 404);
	check_common(&r);
	assert_string_equal(header(&r, "Content-Type", v, sizeof v), "application/json");
	assert_string_equal(header(&r, "Cache-Control", v, sizeof v), "no-store");
	assert_string_equal(r.body, "{\"error\":\"not found\"}");
	assert_null(header(&r, "Retry-After", v, sizeof v));
	assert_int_equal(seen_calls(), 1);
	assert_string_equal(seen.method, "GET");
	assert_string_equal(seen.path, "/v1/stats");
	assert_null(seen.query);
	assert_int_equal(seen.body_len, 0);
	reply_free(&r);

	get(port, "POST", "/", &r);		/* not the dashboard: the handler's */
	assert_int_equal(seen_calls(), 2);
	assert_string_equal(seen.method, "POST");
	assert_string_equal(seen.path, "/");
	assert_null(strstr(r.head, "no-store"));	/* not under /v1/ */
	check_common(&r);
	reply_free(&r);

	get(port, "DELETE", "/dashboard.js", &r);
	assert_int_equal(seen_calls(), 3);
	assert_string_equal(seen.method, "DELETE");
	reply_free(&r);

	get(port, "GET", "/dashboard.jsx", &r);
	reply_free(&r);
	get(port, "GET", "/v1", &r);
	assert_int_equal(seen_calls(), 5);
	assert_string_equal(header(&r, "Cache-Control", v, sizeof v), "no-store");
	reply_free(&r);
}

/* The query string is split from the path and passed raw. */
static void test_query_split(void **state)
{
	struct reply r;

	(void)state;
	get(port, "GET", "/v1/jobs?state=dead&limit=5&x=a%20b", &r);
	assert_string_equal(seen.path, "/v1/jobs");
	assert_string_equal(seen.query, "state=dead&limit=5&x=a%20b");
	reply_free(&r);

	get(port, "GET", "/v1/jobs?", &r);
	assert_string_equal(seen.path, "/v1/jobs");
	assert_string_equal(seen.query, "");
	reply_free(&r);

	get(port, "GET", "/v1/orders?recent=20", &r);
	assert_string_equal(seen.path, "/v1/orders");
	assert_string_equal(seen.query, "recent=20");
	reply_free(&r);

	/* The path is passed as sent: the handler decodes each segment once
	 * (a job id with ':' as the page sends it; %2532 is "%32", never 2). */
	get(port, "POST", "/v1/jobs/outbox%3A12/retry", &r);
	assert_string_equal(seen.path, "/v1/jobs/outbox%3A12/retry");
	reply_free(&r);
	get(port, "GET", "/v1/events/%2532", &r);
	assert_string_equal(seen.path, "/v1/events/%2532");
	assert_null(seen.query);
	reply_free(&r);

	/* The dashboard is found with a query too ("/?x" is still "/"). */
	get(port, "GET", "/?from=phone", &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "<!doctype html>"));
	reply_free(&r);
	assert_int_equal(seen_calls(), 5);
}

/* raw: one request of exactly len bytes (NULs and all) on a fresh
 * connection; the reply's status, its body in *r */
static int raw(const char *req, size_t len, struct reply *r)
{
	int fd = dial(port);

	send_all(fd, req, len);
	if (read_reply(fd, r) != 0)
		fail_msg("no HTTP reply to %.40s", req);
	close(fd);
	return r->status;
}

#define RAW(lit, r) raw(lit, sizeof(lit) - 1, r)

/* refused: the request gets status with field (NULL: none) and the
 * handler never sees it */
static void refused(const char *req, size_t len, int status, const char *field)
{
	struct reply r;
	char want[96];
	int calls = seen_calls();

	if (raw(req, len, &r) != status)
		fail_msg("%.60s: %d, not %d: %s", req, r.status, status, r.body);
	if (field) {
		snprintf(want, sizeof want, "\"field\":\"%s\"", field);
		if (!strstr(r.body, want))
			fail_msg("%.60s: no %s in %s", req, want, r.body);
	}
	assert_int_equal(seen_calls(), calls);
	reply_free(&r);
}

#define REFUSED(lit, status, field) refused(lit, sizeof(lit) - 1, status, field)

/* A request's head is judged before the handler: control bytes, a header
 * that may come once sent twice, HTTP/1.1 without Host, two framings of
 * one body. */
static void test_head_refused(void **state)
{
	struct reply r;

	(void)state;
	/* p\0first and p\0second were one key, "p" */
	REFUSED("POST /v1/orders HTTP/1.1\r\nHost: box\r\nIdempotency-Key: \"p\0first\"\r\n"
		"Content-Length: 0\r\nConnection: close\r\n\r\n", 400, "Idempotency-Key");
	REFUSED("GET /v1/stats HTTP/1.1\r\nHost: box\r\nAuthorization: Bearer a\x01b\r\n"
		"Connection: close\r\n\r\n", 400, "Authorization");
	REFUSED("GET /v1/stats HTTP/1.1\r\nHost: box\r\nX-Note: a\0b\r\n"
		"Connection: close\r\n\r\n", 400, NULL);
	/* once only */
	REFUSED("GET /v1/stats HTTP/1.1\r\nHost: box\r\nAuthorization: Bearer a\r\n"
		"Authorization: Bearer b\r\nConnection: close\r\n\r\n", 400, "Authorization");
	REFUSED("POST /v1/orders HTTP/1.1\r\nHost: box\r\nIdempotency-Key: \"a\"\r\n"
		"idempotency-key: \"b\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		400, "Idempotency-Key");
	REFUSED("POST /v1/orders HTTP/1.1\r\nHost: box\r\nOrigin: http://box\r\n"
		"Origin: http://elsewhere.example\r\nContent-Length: 0\r\n"
		"Connection: close\r\n\r\n", 400, "Origin");
	/* HTTP/1.1 needs Host; HTTP/1.0 has none to send */
	REFUSED("GET /v1/stats HTTP/1.1\r\nConnection: close\r\n\r\n", 400, "Host");
	assert_int_equal(RAW("GET /v1/stats HTTP/1.0\r\n\r\n", &r), 404);
	reply_free(&r);
	assert_string_equal(seen.path, "/v1/stats");
	/* one framing */
	REFUSED("POST /v1/echo HTTP/1.1\r\nHost: box\r\nContent-Length: 3\r\n"
		"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		400, "Transfer-Encoding");
	REFUSED("POST /v1/echo HTTP/1.1\r\nHost: box\r\nTransfer-Encoding: gzip\r\n"
		"Connection: close\r\n\r\n", 501, "Transfer-Encoding");
	/* and a clean request still passes */
	assert_int_equal(RAW("POST /v1/echo HTTP/1.1\r\nHost: box\r\nIdempotency-Key: \"k\"\r\n"
			     "Content-Length: 3\r\nConnection: close\r\n\r\nabc", &r), 200);
	assert_string_equal(seen.idempotency_key, "\"k\"");
	reply_free(&r);
}

/* Authorization, Idempotency-Key and Content-Type reach the handler. */
static void test_headers_passed(void **state)
{
	static const char body[] = "{\"event\":1,\"seats\":2}";
	char head[512];
	struct reply r;

	(void)state;
	snprintf(head, sizeof head,
		 "POST /v1/orders HTTP/1.1\r\nHost: box\r\nConnection: close\r\n"
		 "authorization: Bearer s3cret\r\nIdempotency-Key: order-42\r\n"
		 "Content-Type: application/json\r\nContent-Length: %zu\r\n",
		 strlen(body));
	request(port, head, body, strlen(body), &r);
	assert_int_equal(seen_calls(), 1);
	assert_string_equal(seen.method, "POST");
	assert_string_equal(seen.authorization, "Bearer s3cret");
	assert_string_equal(seen.idempotency_key, "order-42");
	assert_string_equal(seen.content_type, "application/json");
	assert_int_equal(seen.body_len, strlen(body));
	assert_string_equal(seen.body, body);
	assert_true(seen.body_terminated);
	reply_free(&r);

	get(port, "GET", "/v1/stats", &r);
	assert_null(seen.authorization);
	assert_null(seen.idempotency_key);
	assert_null(seen.content_type);
	assert_string_equal(seen.body, "");
	assert_true(seen.body_terminated);
	reply_free(&r);
}

/* The handler's status, type, body and Retry-After, and what the server
 * does when the handler leaves them out. */
static void test_response_fields(void **state)
{
	struct reply r;
	char v[256];

	(void)state;
	get(port, "GET", "/v1/busy", &r);
	assert_int_equal(r.status, 503);
	check_common(&r);
	assert_string_equal(header(&r, "Retry-After", v, sizeof v), "7");
	assert_string_equal(header(&r, "Cache-Control", v, sizeof v), "no-store");
	reply_free(&r);

	get(port, "GET", "/v1/nostatus", &r);	/* no status: 500, never "lost" */
	assert_int_equal(r.status, 500);
	check_common(&r);
	assert_null(strstr(r.body, "lost"));
	reply_free(&r);

	get(port, "GET", "/v1/notype", &r);
	assert_int_equal(r.status, 200);
	check_common(&r);
	assert_string_equal(header(&r, "Content-Type", v, sizeof v), "application/json");
	reply_free(&r);

	get(port, "DELETE", "/v1/empty", &r);
	assert_int_equal(r.status, 204);
	assert_int_equal(r.body_len, 0);
	assert_non_null(header(&r, "Content-Type", v, sizeof v));
	assert_non_null(header(&r, "X-Content-Type-Options", v, sizeof v));
	reply_free(&r);
}

static void post_sized(size_t n, int chunked, struct reply *r)
{
	char head[512];
	char *body = malloc(n + 1);
	size_t i;

	for (i = 0; i < n; i++)
		body[i] = (char)('a' + i % 26);
	body[n] = '\0';
	if (!chunked) {
		snprintf(head, sizeof head,
			 "POST /v1/echo HTTP/1.1\r\nHost: box\r\nConnection: close\r\n"
			 "Content-Type: text/plain\r\nContent-Length: %zu\r\n", n);
		request(port, head, body, n, r);
	} else {
		/* chunks of 4000 bytes, then the last chunk */
		int fd = dial(port);
		char line[32];

		snprintf(head, sizeof head,
			 "POST /v1/echo HTTP/1.1\r\nHost: box\r\nConnection: close\r\n"
			 "Transfer-Encoding: chunked\r\n\r\n");
		send_all(fd, head, strlen(head));
		for (i = 0; i < n; i += 4000) {
			size_t k = n - i < 4000 ? n - i : 4000;
			snprintf(line, sizeof line, "%zx\r\n", k);
			send_all(fd, line, strlen(line));
			send_all(fd, body + i, k);
			send_all(fd, "\r\n", 2);
		}
		send_all(fd, "0\r\n\r\n", 5);
		assert_int_equal(read_reply(fd, r), 0);
		close(fd);
	}
	if (r->status == 200) {
		assert_int_equal(r->body_len, n);
		assert_memory_equal(r->body, body, n);
	}
	free(body);
}

/* Up to 64 KiB reaches the handler; one byte more is 413 and the handler
 * is never called, with Content-Length or chunked; a Content-Length far
 * past the limit is refused before any body is sent. */
static void test_body_limit(void **state)
{
	struct reply r;
	char v[256];
	int fd;

	(void)state;
	post_sized(HTTP_BODY_MAX, 0, &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(seen_calls(), 1);
	assert_int_equal(seen.body_len, HTTP_BODY_MAX);
	assert_true(seen.body_terminated);
	reply_free(&r);

	post_sized(HTTP_BODY_MAX + 1, 0, &r);
	assert_int_equal(r.status, 413);
	check_common(&r);
	assert_string_equal(header(&r, "Content-Type", v, sizeof v), "application/json");
	assert_int_equal(seen_calls(), 1);
	reply_free(&r);

	post_sized(HTTP_BODY_MAX, 1, &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(seen_calls(), 2);
	reply_free(&r);

	post_sized(HTTP_BODY_MAX + 1, 1, &r);
	assert_int_equal(r.status, 413);
	reply_free(&r);
	post_sized(300000, 1, &r);
	assert_int_equal(r.status, 413);
	reply_free(&r);
	assert_int_equal(seen_calls(), 2);

	/* 50 MB announced, nothing sent: the answer comes at once. */
	fd = dial(port);
	{
		static const char big[] =
			"POST /v1/echo HTTP/1.1\r\nHost: box\r\nContent-Length: 50000000\r\n\r\n";
		send_all(fd, big, strlen(big));
	}
	assert_int_equal(read_reply(fd, &r), 0);
	assert_int_equal(r.status, 413);
	close(fd);
	reply_free(&r);
	assert_int_equal(seen_calls(), 2);

	/* A chunked body past the limit is read to its end and answered 413
	 * (3 MB: past what a Content-Length may announce) */
	post_sized(3000000, 1, &r);
	assert_int_equal(r.status, 413);
	reply_free(&r);
	assert_int_equal(seen_calls(), 2);

	/* A chunked stream past HTTP_CHUNKED_DISCARD_MAX is cut off; the
	 * server goes on serving. */
	{
		static const char head[] = "POST /v1/echo HTTP/1.1\r\nHost: box\r\n"
					   "Transfer-Encoding: chunked\r\n\r\n";
		static char chunk[8192 + 16];
		size_t sent = 0, k;

		k = (size_t)snprintf(chunk, sizeof chunk, "2000\r\n");
		memset(chunk + k, 'z', 8192);
		memcpy(chunk + k + 8192, "\r\n", 2);
		k += 8192 + 2;
		fd = dial(port);
		send_all(fd, head, strlen(head));
		while (sent < 2 * HTTP_CHUNKED_DISCARD_MAX) {
			ssize_t w = send(fd, chunk, k, MSG_NOSIGNAL);
			if (w <= 0)
				break;	/* the server hung up: what we want */
			sent += (size_t)w;
		}
		assert_true(sent < 2 * HTTP_CHUNKED_DISCARD_MAX);
		close(fd);
	}
	get(port, "GET", "/v1/after", &r);
	assert_int_equal(r.status, 404);
	reply_free(&r);
	assert_int_equal(seen_calls(), 3);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A client that sends half a request holds nobody up, and is dropped after
 * the idle timeout. */
static void test_slow_client(void **state)
{
	struct reply r;
	int slow[4], i;
	int64_t t0;
	char c;

	(void)state;
	http_stop(srv);
	http_set_timeout_s(2);
	assert_int_equal(start_box(), SD_OK);
	port = http_port(srv);

	for (i = 0; i < 4; i++) {
		slow[i] = dial(port);
		send_all(slow[i], "POST /v1/echo HTTP/1.1\r\nHost: box\r\nContent-Len", 46);
	}
	t0 = now_ms();
	for (i = 0; i < 40; i++) {
		get(port, "GET", i % 2 ? "/v1/stats" : "/", &r);
		assert_true(r.status == 404 || r.status == 200);
		reply_free(&r);
	}
	assert_true(now_ms() - t0 < 1500);
	assert_int_equal(seen_calls(), 20);

	/* The half requests are closed by the server within the timeout (+ slack). */
	for (i = 0; i < 4; i++) {
		ssize_t n = recv(slow[i], &c, 1, 0);	/* SO_RCVTIMEO 10 s */
		assert_true(n <= 0);
		assert_true(n == 0 || errno == ECONNRESET);
		close(slow[i]);
	}
	assert_true(now_ms() - t0 < 6000);
	assert_int_equal(seen_calls(), 20);
}

#define CONC_THREADS 16
#define CONC_EACH 25

static void *conc_worker(void *arg)
{
	int id = (int)(intptr_t)arg, i, bad = 0;

	for (i = 0; i < CONC_EACH; i++) {
		char head[256], body[64];
		struct reply r;
		int fd;

		snprintf(body, sizeof body, "thread %d request %d", id, i);
		snprintf(head, sizeof head,
			 "POST /v1/echo HTTP/1.1\r\nHost: box\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n\r\n", strlen(body));
		fd = dial(port);
		send_all(fd, head, strlen(head));
		send_all(fd, body, strlen(body));
		if (read_reply(fd, &r) != 0 || r.status != 200 || r.body_len != strlen(body) ||
		    memcmp(r.body, body, r.body_len) != 0)
			bad++;
		close(fd);
		free(r.body);
	}
	return (void *)(intptr_t)bad;
}

/* 16 clients at once, 400 requests: every answer is the right one. */
static void test_concurrent(void **state)
{
	pthread_t t[CONC_THREADS];
	int i, bad = 0;

	(void)state;
	for (i = 0; i < CONC_THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, conc_worker, (void *)(intptr_t)i), 0);
	for (i = 0; i < CONC_THREADS; i++) {
		void *ret;

		pthread_join(t[i], &ret);
		bad += (int)(intptr_t)ret;
	}
	assert_int_equal(bad, 0);
	assert_int_equal(seen_calls(), CONC_THREADS * CONC_EACH);
}

/* Keep-alive: several requests on one connection, each answered in turn. */
static void test_keep_alive(void **state)
{
	static const char two[] =
		"GET /v1/a?x=1 HTTP/1.1\r\nHost: box\r\n\r\n"
		"GET /v1/b HTTP/1.1\r\nHost: box\r\nConnection: close\r\n\r\n";
	struct reply r;
	int fd;

	(void)state;
	fd = dial(port);
	send_all(fd, two, strlen(two));
	assert_int_equal(read_reply(fd, &r), 0);
	close(fd);
	assert_int_equal(r.status, 404);
	assert_non_null(strstr(r.body, "HTTP/1.1 404"));	/* the second reply follows */
	reply_free(&r);
	assert_int_equal(seen_calls(), 2);
	assert_string_equal(seen.path, "/v1/b");
	assert_null(seen.query);
}

/* Listen addresses: the forms we take, and the errors. */
static void test_listen(void **state)
{
	static const char *const bad[] = { "", "8080", "localhost:80", "127.0.0.1", "127.0.0.1:",
					   "127.0.0.1:x", "127.0.0.1:65536", "1.2.3.4.5:80",
					   "[::1]", "[::1]80", "[nope]:80", "::1:80",
					   "127.0.0.1:-1" };
	struct http_server *s2 = NULL;
	char listen[64];
	size_t i;
	int fd;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(http_start(bad[i], fake_handler, &seen, &s2), SD_INVALID);
		assert_null(s2);
	}
	/* The same port twice: a configuration error, naming the address
	 * (not port 0) and the reason. */
	snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
	assert_int_equal(http_start(listen, fake_handler, &seen, &s2), SD_INVALID);
	assert_null(s2);
	assert_non_null(strstr(err_msg(), listen));
	assert_non_null(strstr(err_msg(), "Address already in use"));

	/* ":0" is loopback. */
	assert_int_equal(http_start(":0", fake_handler, &seen, &s2), SD_OK);
	assert_true(http_port(s2) > 0 && http_port(s2) != port);
	http_stop(s2);
	s2 = NULL;

	/* IPv6 loopback, when this machine has it. */
	fd = socket(AF_INET6, SOCK_STREAM, 0);
	if (fd >= 0) {
		struct sockaddr_in6 a;

		memset(&a, 0, sizeof a);
		a.sin6_family = AF_INET6;
		a.sin6_addr = in6addr_loopback;
		if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0) {
			assert_int_equal(http_start("[::1]:0", fake_handler, &seen, &s2), SD_OK);
			assert_true(http_port(s2) > 0);
			http_stop(s2);
		}
		close(fd);
	}
	http_stop(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_dashboard_served),
		T(test_routing),
		T(test_query_split),
		T(test_head_refused),
		T(test_headers_passed),
		T(test_response_fields),
		T(test_body_limit),
		T(test_slow_client),
		T(test_concurrent),
		T(test_keep_alive),
		T(test_listen),
#undef T
	};

	log_set_level(LOG_WARN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
