/*
 * test_frontdoor.c: the HTTP server (http.h) as the front door on a venue's
 * LAN, over real sockets on loopback (all of 127.0.0.0/8 is loopback, so a
 * client socket bound to 127.0.0.2 is a second client address):
 *   - plain HTTP only on loopback; TLS 1.2/1.3 with the certificate and key
 *     of tools/certs.sh, nothing older, no HTTP answer to plain HTTP on the
 *     TLS port; a key others may read, a missing, bad or mismatched file
 *     refused, naming it;
 *   - Host (DNS rebinding) and Origin (CSRF) refused before the handler and
 *     the dashboard, with the default names and with given ones;
 *   - the header deadline (a client that trickles a byte a second is cut
 *     though it is never idle; it restarts after each response), the body
 *     deadline (a body below the minimum rate is cut, one above it is not),
 *     a running handler and a response on its way out never cut;
 *   - the per-client cap (one address refused past it, another served), the
 *     connection limit from RLIMIT_NOFILE, and the lock-out: 1,100
 *     slow sockets from 127.0.0.1, then 200 requests from 127.0.0.2 all
 *     answered with p99 under 100 ms.
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
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "http.h"
#include "log.h"
#include "testutil.h"

#define BIG_LEN (16u * 1024 * 1024)	/* /v1/big: more than the socket buffers hold */

/* ---------------------------------------------------------------------------
 * The handler: counts calls, answers by path
 * ------------------------------------------------------------------------ */

static pthread_mutex_t calls_mu = PTHREAD_MUTEX_INITIALIZER;
static int calls;

static int calls_get(void)
{
	int n;

	pthread_mutex_lock(&calls_mu);
	n = calls;
	pthread_mutex_unlock(&calls_mu);
	return n;
}

static void handler(void *arg, const struct http_request *req, struct http_response *res)
{
	(void)arg;
	pthread_mutex_lock(&calls_mu);
	calls++;
	pthread_mutex_unlock(&calls_mu);
	if (strcmp(req->path, "/v1/echo") == 0) {
		res->status = 200;
		strcpy(res->content_type, "application/octet-stream");
		res->body = malloc(req->body_len + 1);
		memcpy(res->body, req->body, req->body_len);
		res->body_len = req->body_len;
	} else if (strcmp(req->path, "/v1/sleep") == 0) {
		tu_sleep_ms(2500);	/* past the 1 s header deadline of its test */
		res->status = 200;
		res->body = strdup("{\"slept\":true}");
		res->body_len = strlen(res->body);
	} else if (strcmp(req->path, "/v1/big") == 0) {
		res->status = 200;
		strcpy(res->content_type, "application/octet-stream");
		res->body = malloc(BIG_LEN);
		memset(res->body, 'b', BIG_LEN);
		res->body_len = BIG_LEN;
	} else {
		res->status = 404;
		res->body = strdup("{\"error\":\"not found\"}");
		res->body_len = strlen(res->body);
	}
}

/* ---------------------------------------------------------------------------
 * A raw client
 * ------------------------------------------------------------------------ */

struct reply {
	int status;
	char head[4096];
	char *body;	/* malloc'd, NUL-terminated */
	size_t body_len;
};

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* dial_from: a connection to 127.0.0.1:port from src (NULL: any). -1 when
 * connect fails. */
static int dial_from(int port, const char *src)
{
	struct sockaddr_in a;
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (src) {
		memset(&a, 0, sizeof a);
		a.sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, src, &a.sin_addr), 1);
		if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0)
			fail_msg("bind %s: %s", src, strerror(errno));
	}
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int dial(int port)
{
	int fd = dial_from(port, NULL);

	if (fd < 0)
		fail_msg("connect to port %d: %s", port, strerror(errno));
	return fd;
}

/* send_some: 0, or -1 when the server has hung up. */
static int send_some(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void send_all(int fd, const void *buf, size_t n)
{
	if (send_some(fd, buf, n) != 0)
		fail_msg("send: %s", strerror(errno));
}

/* read_one: one response (head, then Content-Length bytes unless the
 * request was HEAD) without waiting for the connection to close.  0, or -1
 * when none came. */
static int read_head_or_one(int fd, struct reply *r, int head)
{
	size_t cap = 8192, len = 0, want = SIZE_MAX, hl = 0;	/* hl: head length, 0: unseen */
	char *buf = malloc(cap), *end;

	memset(r, 0, sizeof *r);
	for (;;) {
		ssize_t n;

		if (hl && len >= want)
			break;
		if (len + 4096 > cap)
			buf = realloc(buf, cap *= 2);
		n = recv(fd, buf + len, cap - len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		if (!hl && (end = strstr(buf, "\r\n\r\n"))) {
			const char *cl = strcasestr(buf, "\r\nContent-Length:");

			hl = (size_t)(end - buf);
			want = hl + 4 + (cl && cl < end && !head ? strtoul(cl + 17, NULL, 10) : 0);
		}
	}
	buf[len] = '\0';
	if (!hl || len < want || sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1) {
		free(buf);
		return -1;
	}
	snprintf(r->head, sizeof r->head, "%.*s\r\n", (int)hl, buf);
	r->body_len = want - hl - 4;
	r->body = malloc(r->body_len + 1);
	memcpy(r->body, buf + hl + 4, r->body_len);
	r->body[r->body_len] = '\0';
	free(buf);
	return 0;
}

static int read_one(int fd, struct reply *r)
{
	return read_head_or_one(fd, r, 0);
}

static void reply_free(struct reply *r)
{
	free(r->body);
	r->body = NULL;
}

/* ask: one raw request (the whole head, blank line included, then body) on
 * a fresh connection from src; 0 and *r, or -1: no HTTP answer. */
static int ask_from(int port, const char *src, const char *raw, struct reply *r)
{
	int fd = dial_from(port, src), rc;

	if (fd < 0)
		return -1;
	if (send_some(fd, raw, strlen(raw)) != 0) {
		close(fd);
		return -1;
	}
	rc = read_head_or_one(fd, r, strncmp(raw, "HEAD ", 5) == 0);
	close(fd);
	return rc;
}

/* status_of: the status of METHOD / with these extra header lines, or -1. */
static int status_of(int port, const char *method, const char *target, const char *headers,
		     char *body, size_t size)
{
	char raw[4096];
	struct reply r;
	int st;

	snprintf(raw, sizeof raw, "%s %s HTTP/1.1\r\n%sConnection: close\r\n\r\n", method,
		 target, headers);
	if (ask_from(port, NULL, raw, &r) != 0)
		return -1;
	st = r.status;
	if (body)
		snprintf(body, size, "%s", r.body);
	reply_free(&r);
	return st;
}

/* closed_within: wait up to ms for the server to close fd (EOF or reset);
 * the elapsed ms, -1 when it stayed open, -2 when it sent something (which
 * stays to be read). */
static int64_t closed_within(int fd, int ms)
{
	int64_t t0 = now_ms();
	char buf[256];

	while (now_ms() - t0 < ms) {
		struct pollfd p = { fd, POLLIN, 0 };

		if (poll(&p, 1, 50) > 0) {
			ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK);
			if (n > 0)
				return -2;	/* an answer came: left to be read */
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				return now_ms() - t0;
		}
	}
	return -1;
}

/* is_open: the server still holds fd (nothing to read, no EOF). */
static int is_open(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* ---------------------------------------------------------------------------
 * Setup
 * ------------------------------------------------------------------------ */

static struct http_server *srv;
static int port;
static char certs[400];	/* the test dir's certs/ */

static int setup(void **state)
{
	char cmd[600];
	int rc;

	if ((rc = tu_setup_nodb(state)) != 0)
		return rc;
	calls = 0;
	srv = NULL;
	snprintf(certs, sizeof certs, "%s/certs", ((struct tu_env *)*state)->dir);
	snprintf(cmd, sizeof cmd, "sh tools/certs.sh '%s'", certs);
	return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	http_stop(srv);
	srv = NULL;
	http_set_timeout_s(0);
	return tu_teardown(state);
}

static void start(struct http_opts *o)
{
	if (!o->listen)
		o->listen = "127.0.0.1:0";
	if (http_start_opts(o, handler, NULL, &srv) != SD_OK)
		fail_msg("http_start_opts: %s", err_msg());
	port = http_port(srv);
	assert_true(port > 0);
}

static const char *cert_path(const char *name, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", certs, name);
	return buf;
}

static void start_tls(const char *listen)
{
	char c[500], k[500];
	struct http_opts o = { 0 };

	o.listen = listen;
	o.tls_cert = cert_path("server.pem", c, sizeof c);
	o.tls_key = cert_path("server.key", k, sizeof k);
	start(&o);
}

/* ---------------------------------------------------------------------------
 * TLS
 * ------------------------------------------------------------------------ */

/* Plain HTTP is for loopback only; a listener beyond needs a certificate
 * and key, both. */
static void test_plain_only_on_loopback(void **state)
{
	static const char *const wide[] = { "0.0.0.0:0", "[::]:0", "192.168.1.20:8080",
					    "10.0.0.1:0" };
	struct http_server *s = NULL;
	struct http_opts o = { 0 };
	char c[500];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof wide / sizeof wide[0]; i++) {
		assert_int_equal(http_start(wide[i], handler, NULL, &s), SD_INVALID);
		assert_null(s);
		assert_non_null(strstr(err_msg(), wide[i]));
		assert_non_null(strstr(err_msg(), "needs TLS on a venue's network: set "
						  "http_tls_cert and http_tls_key"));
	}
	assert_int_equal(http_start("127.0.0.2:0", handler, NULL, &s), SD_OK);
	assert_int_equal(http_tls(s), 0);
	http_stop(s);
	s = NULL;

	/* a certificate without a key, or the other way round */
	o.listen = "0.0.0.0:0";
	o.tls_cert = cert_path("server.pem", c, sizeof c);
	assert_int_equal(http_start_opts(&o, handler, NULL, &s), SD_INVALID);
	assert_non_null(strstr(err_msg(), c));
	o.tls_cert = "";
	o.tls_key = cert_path("server.key", c, sizeof c);
	assert_int_equal(http_start_opts(&o, handler, NULL, &s), SD_INVALID);
	assert_null(s);
}

/* The key must be the box user's alone and every file must be one that
 * GnuTLS takes; each refusal names the file. */
static void test_tls_files_checked(void **state)
{
	struct tu_env *e = *state;
	struct http_server *s = NULL;
	struct http_opts o = { 0 };
	char c[500], k[500], junk[500], mode_path[500];
	FILE *f;

	o.listen = "127.0.0.1:0";
	o.tls_cert = cert_path("server.pem", c, sizeof c);
	o.tls_key = cert_path("server.key", k, sizeof k);

	/* missing certificate: SD_IO naming it */
	o.tls_cert = "/nonexistent/box.pem";
	assert_int_equal(http_start_opts(&o, handler, NULL, &s), SD_IO);
	assert_non_null(strstr(err_msg(), "/nonexistent/box.pem"));
	o.tls_cert = c;

	/* a key the group may read */
	assert_int_equal(chmod(k, 0640), 0);
	assert_int_equal(http_start_opts(&o, handler, NULL, &s), SD_INVALID);
	assert_non_null(strstr(err_msg(), k));
	assert_non_null(strstr(err_msg(), "0640"));
	assert_int_equal(chmod(k, 0604), 0);
	assert_int_equal(http_start_opts(&o, handler, NULL, &s), SD_INVALID);
	assert_int_equal(chmod(k, 0600), 0);

	/* a key that is a folder */
	snprintf(mode_path, sizeof mode_path, "%s/keydir", e->dir);
	assert_int_equal(mkdir(mode_path, 0700), 0);
	o.tls_key = mode_path;
	assert_int_equal(http_start_opts(&o, handler, NULL, &s), SD_INVALID);
	assert_non_null(strstr(err_msg(), mode_path));
	assert_non_null(strstr(err_msg(), "regular file"));
	o.tls_key = k;

	/* a certificate that is no certificate */
	snprintf(junk, sizeof junk, "%s/junk.pem", e->dir);
	f = fopen(junk, "w");
	fputs("hello\n", f);
	fclose(f);
	o.tls_cert = junk;
	assert_int_equal(http_start_opts(&o, handler, NULL, &s), SD_INVALID);
	assert_non_null(strstr(err_msg(), junk));
	o.tls_cert = c;
	/* (PEM-shaped garbage is refused as SD_INVALID too, but GnuTLS 3.7.9
	 * leaks 168 bytes parsing it, which LeakSanitizer would count here) */

	/* a key that belongs to another certificate: GnuTLS refuses the pair */
	o.tls_key = cert_path("wrong.key", junk, sizeof junk);
	assert_int_equal(http_start_opts(&o, handler, NULL, &s), SD_INVALID);
	assert_non_null(strstr(err_msg(), junk));
	assert_null(s);

	o.tls_key = k;
	assert_int_equal(http_start_opts(&o, handler, NULL, &s), SD_OK);
	assert_int_equal(http_tls(s), 1);
	http_stop(s);
}

struct cbuf {
	char data[4096];
	size_t len;
};

static size_t cbuf_write(char *p, size_t size, size_t n, void *arg)
{
	struct cbuf *b = arg;
	size_t k = size * n;

	if (k > sizeof b->data - 1 - b->len)
		k = sizeof b->data - 1 - b->len;
	memcpy(b->data + b->len, p, k);
	b->len += k;
	b->data[b->len] = '\0';
	return size * n;
}

/*
 * https_get: one request with libcurl (the box's CA trusted), TLS versions
 * min..max (CURL_SSLVERSION_*; max 0: any).  [in] origin: an Origin to send
 * with a POST, or NULL for a GET.  The HTTP status, or -curl error code.
 */
static long https_req(const char *url, long min, long max, const char *origin)
{
	char ca[500], hdr[300];
	struct curl_slist *h = NULL;
	struct cbuf b = { .len = 0 };
	CURL *cu = curl_easy_init();
	CURLcode rc;
	long status = 0;

	assert_non_null(cu);
	curl_easy_setopt(cu, CURLOPT_URL, url);
	curl_easy_setopt(cu, CURLOPT_CAINFO, cert_path("ca.pem", ca, sizeof ca));
	curl_easy_setopt(cu, CURLOPT_SSLVERSION, min | max);
	/* OpenSSL's own floor aside, so that a refusal is the server's */
	if (max && max <= CURL_SSLVERSION_MAX_TLSv1_1)
		curl_easy_setopt(cu, CURLOPT_SSL_CIPHER_LIST, "DEFAULT:@SECLEVEL=0");
	curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, cbuf_write);
	curl_easy_setopt(cu, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(cu, CURLOPT_TIMEOUT, 10L);
	if (origin) {
		snprintf(hdr, sizeof hdr, "Origin: %s", origin);
		h = curl_slist_append(h, hdr);
		curl_easy_setopt(cu, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(cu, CURLOPT_POSTFIELDS, "{}");
	}
	rc = curl_easy_perform(cu);
	if (rc == CURLE_OK)
		curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_easy_cleanup(cu);
	return rc == CURLE_OK ? status : -(long)rc;
}

/* HTTPS with TLS 1.2 and 1.3, nothing older; the Origin must be https. */
static void test_tls_serves(void **state)
{
	char url[128], origin[128];
	long st;

	(void)state;
	start_tls("0.0.0.0:0");	/* beyond loopback: allowed with TLS */
	assert_int_equal(http_tls(srv), 1);
	snprintf(url, sizeof url, "https://127.0.0.1:%d/v1/x", port);
	assert_int_equal(https_req(url, CURL_SSLVERSION_DEFAULT, 0, NULL), 404);
	assert_int_equal(https_req(url, CURL_SSLVERSION_TLSv1_2, CURL_SSLVERSION_MAX_TLSv1_2, NULL),
			 404);
	assert_int_equal(https_req(url, CURL_SSLVERSION_TLSv1_3, CURL_SSLVERSION_MAX_TLSv1_3, NULL),
			 404);
	assert_int_equal(calls_get(), 3);
	st = https_req(url, CURL_SSLVERSION_TLSv1_0, CURL_SSLVERSION_MAX_TLSv1_1, NULL);
	printf("TLS 1.0-1.1 only: %ld (%s)\n", st,
	       st < 0 ? curl_easy_strerror((CURLcode)-st) : "answered");
	assert_true(st < 0);
	assert_int_equal(calls_get(), 3);

	/* the dashboard over TLS */
	snprintf(url, sizeof url, "https://localhost:%d/", port);
	assert_int_equal(https_req(url, CURL_SSLVERSION_DEFAULT, 0, NULL), 200);

	/* a write from this box's https origin passes; the http one is foreign */
	snprintf(url, sizeof url, "https://127.0.0.1:%d/v1/echo", port);
	snprintf(origin, sizeof origin, "https://127.0.0.1:%d", port);
	assert_int_equal(https_req(url, CURL_SSLVERSION_DEFAULT, 0, origin), 200);
	snprintf(origin, sizeof origin, "http://127.0.0.1:%d", port);
	assert_int_equal(https_req(url, CURL_SSLVERSION_DEFAULT, 0, origin), 403);
	assert_int_equal(calls_get(), 4);

	/* plain HTTP on the TLS port gets no HTTP answer */
	{
		static const char raw[] = "GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\n"
					  "Connection: close\r\n\r\n";
		char buf[2048];
		size_t len = 0;
		int fd = dial(port);

		send_some(fd, raw, strlen(raw));
		for (;;) {
			ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
			if (n <= 0 || (len += (size_t)n) >= sizeof buf - 1)
				break;
		}
		buf[len] = '\0';
		close(fd);
		assert_true(len < 5 || memcmp(buf, "HTTP/", 5) != 0);
		assert_null(strstr(buf, "404"));
	}
	assert_int_equal(calls_get(), 4);
}

/* ---------------------------------------------------------------------------
 * Host and Origin
 * ------------------------------------------------------------------------ */

static const char HOST_JSON[] =
	"{\"error\":\"the Host header names no name of this box\",\"field\":\"Host\"}";
static const char ORIGIN_JSON[] = "{\"error\":\"cross-origin request refused\",\"field\":\"Origin\"}";

static int host_status(const char *host)
{
	char h[300];

	snprintf(h, sizeof h, "Host: %s\r\n", host);
	return status_of(port, "GET", "/v1/x", h, NULL, 0);
}

/* The default names: the listener's address, localhost, 127.0.0.1, ::1;
 * anything else is 421 before the handler or an asset. */
static void test_host_default(void **state)
{
	static const char *const good[] = { "127.0.0.1", "localhost", "LocalHost:80", "[::1]",
					    "[::1]:8080", "127.0.0.1.", "[0:0:0:0:0:0:0:1]" };
	static const char *const bad[] = { "evil.example", "127.0.0.1.evil.example",
					   "localhost.evil", "box", "[::2]", "127.0.0.2", "",
					   "::1", "[localhost]", "127.0.0.1:x", "127.0.0.1:99999",
					   "local host", "127.0.0.1:8080:1" };
	char h[128], body[512];
	struct reply r;
	size_t i;
	int n = 0;

	(void)state;
	start(&(struct http_opts){ 0 });
	snprintf(h, sizeof h, "127.0.0.1:%d", port);
	assert_int_equal(host_status(h), 404);
	n++;
	for (i = 0; i < sizeof good / sizeof good[0]; i++, n++)
		if (host_status(good[i]) != 404)
			fail_msg("Host: %s refused", good[i]);
	assert_int_equal(calls_get(), n);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		snprintf(h, sizeof h, "Host: %s\r\n", bad[i]);
		if (status_of(port, "GET", "/v1/x", h, body, sizeof body) != 421)
			fail_msg("Host: %s not refused", bad[i]);
		assert_string_equal(body, HOST_JSON);
	}
	assert_int_equal(calls_get(), n);

	/* the dashboard is guarded too: no page for a rebound name */
	assert_int_equal(status_of(port, "GET", "/", "Host: evil.example:80\r\n", body, sizeof body),
			 421);
	assert_string_equal(body, HOST_JSON);
	assert_int_equal(status_of(port, "HEAD", "/dashboard.js", "Host: evil.example\r\n", NULL, 0),
			 421);
	assert_int_equal(status_of(port, "GET", "/", "Host: localhost\r\n", body, 16), 200);

	/* the refusal is JSON with the headers every answer carries */
	assert_int_equal(ask_from(port, NULL, "GET /v1/x HTTP/1.1\r\nHost: evil.example\r\n"
					      "Connection: close\r\n\r\n", &r), 0);
	assert_int_equal(r.status, 421);
	assert_non_null(strcasestr(r.head, "\r\nContent-Type: application/json"));
	assert_non_null(strcasestr(r.head, "\r\nX-Content-Type-Options: nosniff"));
	assert_non_null(strcasestr(r.head, "\r\nCache-Control: no-store"));
	reply_free(&r);

	/* HTTP/1.0 without Host passes; two Host headers do not */
	assert_int_equal(ask_from(port, NULL, "GET /v1/x HTTP/1.0\r\n\r\n", &r), 0);
	assert_int_equal(r.status, 404);
	reply_free(&r);
	n++;
	assert_int_equal(status_of(port, "GET", "/v1/x", "Host: localhost\r\nHost: evil.example\r\n",
				   NULL, 0), 400);
	assert_int_equal(calls_get(), n);

	/* on 127.0.0.2 its own address is a name of the box, 127.0.0.3 is not */
	http_stop(srv);
	srv = NULL;
	start(&(struct http_opts){ .listen = "127.0.0.2:0" });
	{
		char raw[256];

		snprintf(raw, sizeof raw, "GET /v1/x HTTP/1.1\r\nHost: 127.0.0.2:%d\r\n"
			 "Connection: close\r\n\r\n", port);
		/* dial 127.0.0.2 */
		{
			struct sockaddr_in a = { .sin_family = AF_INET };
			int fd = socket(AF_INET, SOCK_STREAM, 0);

			a.sin_port = htons((uint16_t)port);
			inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
			assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
			send_all(fd, raw, strlen(raw));
			assert_int_equal(read_one(fd, &r), 0);
			close(fd);
		}
		assert_int_equal(r.status, 404);
		reply_free(&r);
	}
}

/* Given names replace the defaults; extra names add to them; entries with
 * a port or no name are refused at start. */
static void test_host_given(void **state)
{
	static const char *const names[] = { "Box.Local", "[fe80::1]", "10.0.0.5", "::2", NULL };
	static const char *const bad1[] = { "box:80", NULL };
	static const char *const bad2[] = { NULL };
	static const char *const bad3[] = { "[nope]", NULL };
	static const char *const bad4[] = { "a/b", NULL };
	static const char *const bad5[] = { "", NULL };
	static const char *const *const bads[] = { bad1, bad2, bad3, bad4, bad5 };
	struct http_server *s = NULL;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bads / sizeof bads[0]; i++) {
		assert_int_equal(http_start_opts(&(struct http_opts){ .listen = "127.0.0.1:0",
								     .hosts = bads[i] },
						 handler, NULL, &s),
				 SD_INVALID);
		assert_null(s);
	}
	assert_non_null(strstr(err_msg(), "host name"));

	start(&(struct http_opts){ .hosts = names });
	assert_int_equal(host_status("box.local:8443"), 404);
	assert_int_equal(host_status("BOX.LOCAL."), 404);
	assert_int_equal(host_status("[FE80:0::1]:1"), 404);
	assert_int_equal(host_status("10.0.0.5"), 404);
	assert_int_equal(host_status("[::2]"), 404);
	assert_int_equal(calls_get(), 5);
	assert_int_equal(host_status("127.0.0.1"), 421);
	assert_int_equal(host_status("localhost"), 421);
	assert_int_equal(host_status("box"), 421);
	assert_int_equal(host_status("box.local.evil"), 421);
	assert_int_equal(calls_get(), 5);

	/* hosts_extra: names besides the defaults (serve: the certificate's) */
	http_stop(srv);
	srv = NULL;
	assert_int_equal(http_start_opts(&(struct http_opts){ .listen = "127.0.0.1:0",
							     .hosts_extra = bad1 },
					 handler, NULL, &s),
			 SD_INVALID);
	start(&(struct http_opts){ .hosts_extra = names });
	assert_int_equal(host_status("box.local"), 404);
	assert_int_equal(host_status("[fe80::1]"), 404);
	assert_int_equal(host_status("localhost"), 404);
	assert_int_equal(host_status("127.0.0.1"), 404);
	assert_int_equal(host_status("box"), 421);
	assert_int_equal(calls_get(), 9);
}

/* A write with an Origin must come from this box's origin: scheme, one of
 * its names, the listener's port.  GET, HEAD and OPTIONS are not checked. */
static void test_origin(void **state)
{
	static const char *const methods[] = { "POST", "PUT", "PATCH", "DELETE" };
	char ok[6][128], bad[12][128], h[512], body[512];
	size_t i, m;
	int n = 0;

	(void)state;
	start(&(struct http_opts){ 0 });
	snprintf(ok[0], 128, "http://127.0.0.1:%d", port);
	snprintf(ok[1], 128, "http://localhost:%d", port);
	snprintf(ok[2], 128, "HTTP://LOCALHOST:%d", port);
	snprintf(ok[3], 128, "http://[::1]:%d", port);
	snprintf(ok[4], 128, "http://localhost.:%d", port);
	ok[5][0] = '\0';	/* no Origin at all */
	snprintf(bad[0], 128, "https://127.0.0.1:%d", port);
	snprintf(bad[1], 128, "http://127.0.0.1:%d", port + 1);
	snprintf(bad[2], 128, "http://127.0.0.1");
	snprintf(bad[3], 128, "http://evil.example:%d", port);
	snprintf(bad[4], 128, "null");
	snprintf(bad[5], 128, "http://127.0.0.1:%d/", port);
	snprintf(bad[6], 128, "http://user@127.0.0.1:%d", port);
	snprintf(bad[7], 128, "http://127.0.0.1.evil.example:%d", port);
	snprintf(bad[8], 128, "%s", "");
	snprintf(bad[9], 128, "127.0.0.1:%d", port);
	snprintf(bad[10], 128, "http://[::1]x:%d", port);
	snprintf(bad[11], 128, "ws://127.0.0.1:%d", port);
	for (m = 0; m < sizeof methods / sizeof methods[0]; m++) {
		for (i = 0; i < 6; i++, n++) {
			snprintf(h, sizeof h, "Host: localhost\r\n%s%.127s%s", ok[i][0] ? "Origin: " : "",
				 ok[i], ok[i][0] ? "\r\n" : "");
			if (status_of(port, methods[m], "/v1/x", h, NULL, 0) != 404)
				fail_msg("%s with Origin %s refused", methods[m], ok[i]);
		}
		for (i = 0; i < 12; i++) {
			snprintf(h, sizeof h, "Host: localhost\r\nOrigin: %.127s\r\n", bad[i]);
			if (status_of(port, methods[m], "/v1/x", h, body, sizeof body) != 403)
				fail_msg("%s with Origin %s passed", methods[m], bad[i]);
			assert_string_equal(body, ORIGIN_JSON);
		}
	}
	assert_int_equal(calls_get(), n);
	/* reads are not checked: a foreign page cannot read the answer anyway */
	assert_int_equal(status_of(port, "GET", "/v1/x", "Host: localhost\r\nOrigin: null\r\n", NULL,
				   0), 404);
	assert_int_equal(status_of(port, "OPTIONS", "/v1/x",
				   "Host: localhost\r\nOrigin: http://evil.example\r\n", NULL, 0), 404);
	assert_int_equal(status_of(port, "GET", "/", "Host: localhost\r\nOrigin: null\r\n", NULL, 0),
			 200);
	assert_int_equal(calls_get(), n + 2);
}

/* ---------------------------------------------------------------------------
 * Deadlines
 * ------------------------------------------------------------------------ */

/* A client that sends one header byte every half second is never idle, and
 * is cut after header_timeout_s all the same; others are served meanwhile. */
static void test_header_deadline(void **state)
{
	static const char head[] = "GET /v1/x HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
				   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	int64_t t0, cut = -1;
	size_t i;
	int fd;

	(void)state;
	start(&(struct http_opts){ .header_timeout_s = 2 });	/* idle timeout: 10 s */
	fd = dial(port);
	t0 = now_ms();
	for (i = 0; i < sizeof head - 1 && cut < 0; i++) {
		int64_t w;

		if (send_some(fd, head + i, 1) != 0) {
			cut = now_ms() - t0;
			break;
		}
		if ((w = closed_within(fd, 500)) >= 0)
			cut = now_ms() - t0;
		assert_int_not_equal(w, -2);	/* cut, never answered */
		if (i == 2)
			assert_int_equal(host_status("localhost"), 404);	/* others go on */
	}
	close(fd);
	printf("trickling client cut after %lld ms (header_timeout_s 2)\n", (long long)cut);
	assert_true(cut >= 1900 && cut < 3500);
	assert_int_equal(calls_get(), 1);
}

/* The header deadline restarts at the end of each response: a kept-alive
 * connection is served past header_timeout_s from its start, then cut when
 * it sends nothing for that long. */
static void test_header_deadline_per_request(void **state)
{
	static const char req[] = "GET /v1/x HTTP/1.1\r\nHost: localhost\r\n\r\n";
	struct reply r;
	int64_t t0, cut;
	int fd, i;

	(void)state;
	start(&(struct http_opts){ .header_timeout_s = 2 });
	fd = dial(port);
	t0 = now_ms();
	for (i = 0; i < 3; i++) {
		if (i)
			tu_sleep_ms(1500);
		send_all(fd, req, strlen(req));
		assert_int_equal(read_one(fd, &r), 0);
		assert_int_equal(r.status, 404);
		reply_free(&r);
	}
	assert_true(now_ms() - t0 >= 3000);	/* past 2 s from the start */
	cut = closed_within(fd, 5000);
	close(fd);
	printf("kept-alive connection cut %lld ms after its last response\n", (long long)cut);
	assert_true(cut >= 1700 && cut < 3500);
	assert_int_equal(calls_get(), 3);
}

/* A running handler and a response on its way out are never cut. */
static void test_busy_not_cut(void **state)
{
	static const char sleep_req[] = "GET /v1/sleep HTTP/1.1\r\nHost: localhost\r\n"
					"Connection: close\r\n\r\n";
	static const char big_req[] = "GET /v1/big HTTP/1.1\r\nHost: localhost\r\n"
				      "Connection: close\r\n\r\n";
	struct reply r;
	size_t i;
	int fd;

	(void)state;
	start(&(struct http_opts){ .header_timeout_s = 1 });
	assert_int_equal(ask_from(port, NULL, sleep_req, &r), 0);	/* 2.5 s in the handler */
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "{\"slept\":true}");
	reply_free(&r);

	/* 16 MiB answered, read only after 2.5 s: it all comes */
	fd = dial(port);
	send_all(fd, big_req, strlen(big_req));
	tu_sleep_ms(2500);
	assert_int_equal(read_one(fd, &r), 0);
	close(fd);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, BIG_LEN);
	for (i = 0; i < BIG_LEN; i += 4096)
		assert_int_equal(r.body[i], 'b');
	reply_free(&r);
	assert_int_equal(calls_get(), 2);
}

/* slow_post: send n body bytes, k every step_ms, after head; the ms until
 * the server cut the connection, or -1 when it answered (*r). */
static int64_t slow_post(const char *head, const char *chunk_fmt, size_t n, size_t k,
			 int step_ms, struct reply *r)
{
	char piece[64], line[96];
	int64_t t0;
	size_t sent = 0;
	int fd = dial(port);

	memset(piece, 'x', sizeof piece);
	send_all(fd, head, strlen(head));
	t0 = now_ms();
	while (sent < n) {
		size_t len = k;

		if (chunk_fmt)
			len = (size_t)snprintf(line, sizeof line, chunk_fmt, (int)k, (int)k, piece);
		int64_t w;

		if (send_some(fd, chunk_fmt ? line : piece, len) != 0 ||
		    (w = closed_within(fd, step_ms)) >= 0) {
			close(fd);
			return now_ms() - t0;
		}
		sent += k;
		if (w == -2)
			break;	/* answered (early) */
	}
	if (chunk_fmt)
		send_some(fd, "0\r\n\r\n", 5);
	if (read_one(fd, r) != 0) {
		close(fd);
		return now_ms() - t0;
	}
	close(fd);
	return -1;
}

/* A body below body_min_rate is cut at header_timeout_s + N / rate (with
 * Content-Length) or as soon as it falls behind (chunked); one above it is
 * served. */
static void test_body_deadline(void **state)
{
	struct reply r;
	int64_t cut;

	(void)state;
	start(&(struct http_opts){ .header_timeout_s = 2, .body_min_rate = 1000 });

	/* 1000 bytes at 100 B/s: allowed 2 + 1 s */
	cut = slow_post("POST /v1/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n",
			NULL, 1000, 10, 100, &r);
	printf("slow body (Content-Length 1000, 100 B/s) cut after %lld ms\n", (long long)cut);
	assert_true(cut >= 2800 && cut < 4500);

	/* chunked at 100 B/s: behind 2 s + got/1000 soon after 2 s */
	cut = slow_post("POST /v1/echo HTTP/1.1\r\nHost: localhost\r\n"
			"Transfer-Encoding: chunked\r\n\r\n",
			"%x\r\n%.*s\r\n", 100000, 10, 100, &r);
	printf("slow chunked body (100 B/s) cut after %lld ms\n", (long long)cut);
	assert_true(cut >= 1900 && cut < 4000);
	assert_int_equal(calls_get(), 0);

	/* 3000 bytes at ~1200 B/s: allowed 2 + 3 s, takes 2.5 s: served */
	cut = slow_post("POST /v1/echo HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3000\r\n"
			"Connection: close\r\n\r\n",
			NULL, 3000, 60, 50, &r);
	assert_int_equal(cut, -1);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.body_len, 3000);
	reply_free(&r);
	assert_int_equal(calls_get(), 1);
}

/* ---------------------------------------------------------------------------
 * Limits
 * ------------------------------------------------------------------------ */

static const char PARTIAL[] = "GET /v1/x HTTP/1.1\r\nHost: local";
static const char WHOLE[] = "GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/* Past per_client_max, one address is refused (accepted and closed) while
 * another is served; a freed slot is usable again. */
static void test_per_client_cap(void **state)
{
	struct reply r;
	int held[4], i, fd, ok = 0;
	int64_t t0;

	(void)state;
	start(&(struct http_opts){ .per_client_max = 4 });
	for (i = 0; i < 4; i++) {
		held[i] = dial_from(port, "127.0.0.1");
		assert_true(held[i] >= 0);
		send_all(held[i], PARTIAL, strlen(PARTIAL));
	}
	tu_sleep_ms(200);
	for (i = 0; i < 4; i++)
		assert_true(is_open(held[i]));
	/* the fifth from 127.0.0.1: no answer */
	assert_int_equal(ask_from(port, "127.0.0.1", WHOLE, &r), -1);
	fd = dial_from(port, "127.0.0.1");
	if (fd >= 0) {
		assert_true(closed_within(fd, 2000) >= 0);
		close(fd);
	}
	/* 127.0.0.2 is another client */
	for (i = 0; i < 5; i++) {
		assert_int_equal(ask_from(port, "127.0.0.2", WHOLE, &r), 0);
		assert_int_equal(r.status, 404);
		reply_free(&r);
	}
	/* one of 127.0.0.1's slots freed: it is served again */
	close(held[0]);
	t0 = now_ms();
	while (!ok && now_ms() - t0 < 3000) {
		if (ask_from(port, "127.0.0.1", WHOLE, &r) == 0) {
			ok = r.status == 404;
			reply_free(&r);
		} else {
			tu_sleep_ms(50);
		}
	}
	assert_true(ok);
	for (i = 1; i < 4; i++)
		close(held[i]);
	assert_int_equal(calls_get(), 6);
}

/* conn_max_with: in a child with RLIMIT_NOFILE soft/hard, http_start's
 * connection limit; [out] *soft_after: the soft limit once it started. */
static long conn_max_with(rlim_t soft, rlim_t hard, long *soft_after)
{
	long got[2] = { -1, -1 };
	int p[2], st;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	assert_true((pid = fork()) >= 0);
	if (pid == 0) {
		struct rlimit rl = { soft, hard };
		struct http_server *s = NULL;
		long v[2] = { -1, -1 };

		close(p[0]);
		if (setrlimit(RLIMIT_NOFILE, &rl) == 0 &&
		    http_start("127.0.0.1:0", handler, NULL, &s) == SD_OK) {
			v[0] = (long)http_conn_max(s);
			getrlimit(RLIMIT_NOFILE, &rl);
			v[1] = (long)rl.rlim_cur;
			http_stop(s);
		}
		_exit(write(p[1], v, sizeof v) == sizeof v ? 0 : 1);
	}
	close(p[1]);
	assert_int_equal(read(p[0], got, sizeof got), sizeof got);
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	*soft_after = got[1];
	return got[0];
}

/* The connection limit leaves HTTP_FD_RESERVE descriptors to the rest of
 * the process, after the soft limit is raised to the hard one. */
static void test_conn_limit_from_nofile(void **state)
{
	struct rlimit rl;
	long soft;

	(void)state;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < 600)
		TU_SKIP("the hard limit of open files is under 600");
	/* hard 300: 300 - 128 = 172 */
	assert_int_equal(conn_max_with(300, 300, &soft), 172);
	assert_int_equal(soft, 300);
	/* soft 200 raised to the hard 600: 600 - 128 = 472 */
	assert_int_equal(conn_max_with(200, 600, &soft), 472);
	assert_int_equal(soft, 600);
	/* starved: half of 100 */
	assert_int_equal(conn_max_with(100, 100, &soft), 50);
	/* plenty: HTTP_CONN_MAX */
	start(&(struct http_opts){ 0 });
	if (rl.rlim_max >= HTTP_CONN_MAX + HTTP_FD_RESERVE)
		assert_int_equal(http_conn_max(srv), HTTP_CONN_MAX);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	assert_true(rl.rlim_cur == rl.rlim_max);
}

#define LOCK_SLOW 1100
#define LOCK_REQUESTS 200

struct trickle {
	int fds[LOCK_SLOW];
	int n;
	volatile int stop;
};

/* One header byte per second on every slow socket, as the attack sends. */
static void *trickle_main(void *arg)
{
	struct trickle *t = arg;

	while (!t->stop) {
		int i;

		for (i = 0; i < t->n; i++)
			if (t->fds[i] >= 0)
				send(t->fds[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		for (i = 0; i < 10 && !t->stop; i++)
			tu_sleep_ms(100);
	}
	return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The lock-out: 1,100 slow sockets from 127.0.0.1 against the
 * defaults of http_start; then 200 requests from 127.0.0.2 are all
 * answered, p99 under 100 ms. */
static void test_lockout(void **state)
{
	static struct trickle t;
	int64_t lat[LOCK_REQUESTS], t0;
	char raw[256];
	struct rlimit rl;
	pthread_t th;
	int i, held = 0, held_end = 0, okn = 0;

	(void)state;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < LOCK_SLOW + LOCK_REQUESTS + HTTP_CONN_MAX / 4)
		TU_SKIP("the hard limit of open files is too low for the connections");
	if (http_start("127.0.0.1:0", handler, NULL, &srv) != SD_OK)
		fail_msg("http_start: %s", err_msg());
	port = http_port(srv);
	memset(&t, 0, sizeof t);
	for (i = 0; i < LOCK_SLOW; i++) {
		t.fds[i] = dial_from(port, "127.0.0.1");
		if (t.fds[i] >= 0)
			send_some(t.fds[i], PARTIAL, 5);
	}
	t.n = LOCK_SLOW;
	assert_int_equal(pthread_create(&th, NULL, trickle_main, &t), 0);
	tu_sleep_ms(1000);
	for (i = 0; i < LOCK_SLOW; i++)
		held += t.fds[i] >= 0 && is_open(t.fds[i]);

	snprintf(raw, sizeof raw, "GET /v1/x HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
		 "Connection: close\r\n\r\n", port);
	for (i = 0; i < LOCK_REQUESTS; i++) {
		struct reply r;

		t0 = now_ms();
		if (ask_from(port, "127.0.0.2", raw, &r) == 0) {
			okn += r.status == 404;
			reply_free(&r);
		}
		lat[i] = now_ms() - t0;
	}
	for (i = 0; i < LOCK_SLOW; i++)
		held_end += t.fds[i] >= 0 && is_open(t.fds[i]);
	t.stop = 1;
	pthread_join(th, NULL);
	for (i = 0; i < LOCK_SLOW; i++)
		if (t.fds[i] >= 0)
			close(t.fds[i]);
	qsort(lat, LOCK_REQUESTS, sizeof lat[0], cmp_i64);
	printf("lock-out: %d slow sockets from 127.0.0.1, %d held by the server (%d at the end; "
	       "conn_max %u); %d/%d requests from 127.0.0.2 answered, median %lld ms, "
	       "p99 %lld ms, max %lld ms\n",
	       LOCK_SLOW, held, held_end, http_conn_max(srv), okn, LOCK_REQUESTS,
	       (long long)lat[LOCK_REQUESTS / 2 - 1], (long long)lat[LOCK_REQUESTS * 99 / 100 - 1],
	       (long long)lat[LOCK_REQUESTS - 1]);
	assert_true(held <= HTTP_PER_CLIENT_MAX);
	assert_int_equal(okn, LOCK_REQUESTS);
	assert_true(lat[LOCK_REQUESTS * 99 / 100 - 1] < 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_plain_only_on_loopback),
		T(test_tls_files_checked),
		T(test_tls_serves),
		T(test_host_default),
		T(test_host_given),
		T(test_origin),
		T(test_header_deadline),
		T(test_header_deadline_per_request),
		T(test_busy_not_cut),
		T(test_body_deadline),
		T(test_per_client_cap),
		T(test_conn_limit_from_nofile),
		T(test_lockout),
#undef T
	};
	int rc;

	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_WARN);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
