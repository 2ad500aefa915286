/*
 * bench_http.c: the benchmarks' HTTP/1.1 client connection (bench_http.h),
 * plain or over cert.h's TLS client; the socket's timeouts bound both.
 */
#define _GNU_SOURCE
#include "bench_http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cert.h"

static int fail(struct bench_http *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct bench_http *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->err, sizeof c->err, fmt, ap);
	va_end(ap);
	return -1;
}

void bench_http_init(struct bench_http *c, int port)
{
	memset(c, 0, sizeof *c);
	c->port = port;
	c->fd = -1;
}

void bench_http_use_tls(struct bench_http *c, struct cert_client *tls, const char *host)
{
	c->tls = tls;
	c->tls_host = host;
}

int bench_http_from(struct bench_http *c, const char *addr)
{
	struct in_addr a4;

	if (strlen(addr) >= sizeof c->from || inet_pton(AF_INET, addr, &a4) != 1)
		return -1;
	snprintf(c->from, sizeof c->from, "%s", addr);
	return 0;
}

int bench_http_dial(struct bench_http *c)
{
	struct sockaddr_in a;
	struct timeval tv = { BENCH_HTTP_TIMEOUT_S, 0 };
	int one = 1;

	if ((c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return fail(c, "socket: %s", strerror(errno));
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	/* a request goes out in one send: nothing for Nagle to coalesce */
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	if (c->from[0]) {
		memset(&a, 0, sizeof a);
		a.sin_family = AF_INET;
		inet_pton(AF_INET, c->from, &a.sin_addr);
		if (bind(c->fd, (struct sockaddr *)&a, sizeof a) != 0) {
			fail(c, "bind to %s: %s", c->from, strerror(errno));
			goto failed;
		}
	}
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)c->port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) {
		fail(c, "connect to 127.0.0.1:%d: %s", c->port, strerror(errno));
		goto failed;
	}
	c->len = 0;
	c->dials++;
	if (c->tls && cert_conn_open(c->tls, c->fd, c->tls_host, &c->conn) != SD_OK) {
		fail(c, "127.0.0.1:%d: %s", c->port, err_msg());
		goto failed;
	}
	if (c->conn)
		snprintf(c->tls_version, sizeof c->tls_version, "%s", cert_conn_version(c->conn));
	return 0;
failed:
	/* never a half-made connection: the next call dials afresh */
	close(c->fd);
	c->fd = -1;
	return -1;
}

static void hang_up(struct bench_http *c)
{
	cert_conn_close(c->conn);
	c->conn = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->len = 0;
}

void bench_http_close(struct bench_http *c)
{
	hang_up(c);
	free(c->buf);
	c->buf = NULL;
	c->cap = 0;
}

static int send_all(struct bench_http *c, const char *p, size_t n)
{
	if (c->conn)
		return cert_conn_write(c->conn, p, n) == SD_OK ? 0 : fail(c, "%s", err_msg());
	while (n) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return fail(c, "send: %s", strerror(errno));
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* fill: read more bytes into c->buf (kept NUL-terminated). */
static int fill(struct bench_http *c)
{
	ssize_t n;

	if (c->len + 4096 > c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 16384;
		char *b;

		if (cap > BENCH_HTTP_ANSWER_MAX + 16384)
			return fail(c, "an answer longer than %d bytes", BENCH_HTTP_ANSWER_MAX);
		if (!(b = realloc(c->buf, cap)))
			return fail(c, "out of memory");
		c->buf = b;
		c->cap = cap;
	}
	if (c->conn) {
		size_t got = 0;

		if (cert_conn_read(c->conn, c->buf + c->len, c->cap - c->len - 1, &got) != SD_OK)
			return fail(c, "%s", err_msg());
		n = (ssize_t)got;
	} else {
		do
			n = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return fail(c, "recv: %s", strerror(errno));
	}
	if (n == 0)
		return fail(c, "the server closed the connection before its answer ended");
	c->len += (size_t)n;
	c->buf[c->len] = '\0';
	return 0;
}

/* header: the value of header name in the head [head, end) into v. */
static int header(const char *head, const char *end, const char *name, char *v, size_t size)
{
	size_t nl = strlen(name);
	const char *p = head, *e;

	while ((p = strstr(p, "\r\n")) && p < end) {
		p += 2;
		if (strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			p += nl + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			e = strstr(p, "\r\n");
			snprintf(v, size, "%.*s", (int)(e - p), p);
			return 1;
		}
	}
	return 0;
}

int bench_http_call(struct bench_http *c, const char *req, size_t req_len, int *status,
		    const char **body, size_t *body_len)
{
	char v[32];
	char *end = NULL;
	size_t head_len, clen;
	int close_after;

	if (c->fd < 0 && bench_http_dial(c) != 0)
		return -1;
	c->len = 0;
	if (send_all(c, req, req_len) != 0)
		return -1;
	for (;;) {
		if (c->len && (end = strstr(c->buf, "\r\n\r\n")))
			break;
		if (fill(c) != 0)
			return -1;
	}
	head_len = (size_t)(end + 4 - c->buf);
	if (sscanf(c->buf, "HTTP/1.1 %d", status) != 1)
		return fail(c, "not an HTTP/1.1 answer: %.60s", c->buf);
	if (!header(c->buf, end, "Content-Length", v, sizeof v))
		return fail(c, "an answer without Content-Length");
	clen = strtoul(v, NULL, 10);
	if (clen > BENCH_HTTP_ANSWER_MAX)
		return fail(c, "an answer of %zu bytes", clen);
	close_after = header(c->buf, end, "Connection", v, sizeof v) && strcasecmp(v, "close") == 0;
	while (c->len < head_len + clen)
		if (fill(c) != 0)
			return -1;
	/* one request at a time: nothing may follow the answer */
	c->buf[head_len + clen] = '\0';
	*body = c->buf + head_len;
	*body_len = clen;
	if (close_after || c->one_shot)
		hang_up(c);
	return 0;
}

int bench_http_header(const struct bench_http *c, const char *name, char *out, size_t size)
{
	const char *end = c->buf ? strstr(c->buf, "\r\n\r\n") : NULL;

	out[0] = '\0';
	return end ? header(c->buf, end, name, out, size) : 0;
}
