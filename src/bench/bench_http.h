/*
 * bench_http.h: one keep-alive HTTP/1.1 client connection to 127.0.0.1 over
 * a plain socket or TLS, for the benchmarks that drive the real server
 * (bench api, bench intake); the server's own library stays in http.c, and
 * TLS is cert.h's client (mbedTLS stays in the cert module).
 */
#ifndef SD_BENCH_HTTP_H
#define SD_BENCH_HTTP_H

#include <stddef.h>

#define BENCH_HTTP_TIMEOUT_S 30			/* a read or write stuck this long fails */
#define BENCH_HTTP_ANSWER_MAX (1024 * 1024)	/* a longer answer is refused */

struct cert_client;
struct cert_conn;

struct bench_http {
	int port;
	int fd;			/* -1: not connected (bench_http_init) */
	char *buf;		/* the answer being read, NUL-terminated */
	size_t len, cap;
	struct cert_client *tls;	/* NULL: plain HTTP; else TLS, verified by it */
	const char *tls_host;	/* the name the server's certificate must hold */
	struct cert_conn *conn;	/* the TLS session on fd, when tls */
	int one_shot;		/* hang up after each answer: a new connection (and
				 * with tls a full handshake) for every request */
	long long dials;	/* connections made (= TLS handshakes when tls) */
	char from[16];		/* the source address it binds ("": the kernel's) */
	char tls_version[16];	/* the last handshake's protocol ("TLSv1.2") */
	char err[400];		/* what failed, when a call returned -1 */
};

/* bench_http_init: a connection to 127.0.0.1:port, not dialled yet. */
void bench_http_init(struct bench_http *c, int port);

/*
 * bench_http_use_tls: make c speak TLS (before it dials): every connection
 * is a TLS 1.2+ session whose server certificate must chain to tls's CA and
 * name host ("localhost").  [in] tls and host outlive c's connections; tls
 * may be shared by connections on several threads.
 */
void bench_http_use_tls(struct bench_http *c, struct cert_client *tls, const char *host);

/*
 * bench_http_from: make c's connections come from addr, an IPv4 address of
 * this machine (Linux routes all of 127/8 to lo, so 127.0.0.2 is one): a
 * client of its own to the server, with no proxy to trust.  0, or -1 for an
 * address that is not IPv4.
 */
int bench_http_from(struct bench_http *c, const char *addr);

/* bench_http_dial: connect now; 0, or -1 with c->err. */
int bench_http_dial(struct bench_http *c);

/* bench_http_close: hang up (if connected) and free the buffer. */
void bench_http_close(struct bench_http *c);

/*
 * bench_http_call: send one request (head and body in one buffer), dialling
 * first when not connected, and read its answer.  [out] *status, *body (in
 * c->buf, NUL-terminated, valid until the next call), *body_len.  The server
 * answers with a Content-Length; "Connection: close" makes the next call
 * dial again.  0, or -1 with c->err.
 */
int bench_http_call(struct bench_http *c, const char *req, size_t req_len, int *status,
		    const char **body, size_t *body_len);

/* bench_http_header: the value of header name in the answer c last read,
 * into out (size bytes); 1 when there, else 0. */
int bench_http_header(const struct bench_http *c, const char *name, char *out, size_t size);

#endif
