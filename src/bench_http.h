/*
 * bench_http.h: one keep-alive HTTP/1.1 client connection to 127.0.0.1 over
 * a plain socket, for the benchmarks that drive the real server (bench api,
 * bench intake); the server's own library stays in http.c.
 */
#ifndef SD_BENCH_HTTP_H
#define SD_BENCH_HTTP_H

#include <stddef.h>

#define BENCH_HTTP_TIMEOUT_S 30			/* a read or write stuck this long fails */
#define BENCH_HTTP_ANSWER_MAX (1024 * 1024)	/* a longer answer is refused */

struct bench_http {
	int port;
	int fd;			/* -1: not connected (bench_http_init) */
	char *buf;		/* the answer being read, NUL-terminated */
	size_t len, cap;
	char err[400];		/* what failed, when a call returned -1 */
};

/* bench_http_init: a connection to 127.0.0.1:port, not dialled yet. */
void bench_http_init(struct bench_http *c, int port);

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

#endif
