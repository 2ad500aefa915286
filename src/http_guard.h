/*
 * http_guard.h: what a request must be before any asset or handler sees it
 * (the HTTP server's, http.c; no libmicrohttpd here: it hands over the
 * request's headers as it received them, lengths and all).
 *
 *  - every header value free of control bytes (NUL included: a value cut
 *    at a NUL would name another key than the bytes sent), 400;
 *  - Host, Authorization, Idempotency-Key, Origin, Content-Length,
 *    Content-Type and Transfer-Encoding at most once (which of two would
 *    count is a guess a client could steer), 400;
 *  - an HTTP/1.1 request with a Host (RFC 9112 3.2), 400;
 *  - a body framed one way: Transfer-Encoding with Content-Length is
 *    refused (request smuggling, RFC 9112 6.1), 400; a transfer coding
 *    other than chunked, 501;
 *  - Host one of the box's names (DNS rebinding), else 421; on a request
 *    that changes state, an Origin that is the box's own (CSRF), else 403.
 */
#ifndef SD_HTTP_GUARD_H
#define SD_HTTP_GUARD_H

#include <stddef.h>

#include "result.h"

#define HTTP_HOST_MAX 256		/* a name in Host, Origin or the names list */
#define HTTP_GUARD_HEADERS_MAX 100	/* headers one request may carry */

/* The names a request may reach the box by. */
struct http_names {
	char **hosts;		/* the allowed names, normalized; NULL: the defaults */
	char **extra;		/* with hosts NULL: names besides the defaults, or NULL */
	int port;		/* the port the server listens on */
	int tls;		/* 1: HTTPS (the origin's scheme) */
	char *origin;		/* one more origin allowed ("https://shop.example"), or NULL */
};

/* One header as received: value_len bytes, which may hold a NUL. */
struct http_header {
	const char *name;
	const char *value;
	size_t value_len;
};

/* A request's head. */
struct http_head {
	const char *method;
	const char *version;		/* "HTTP/1.1" */
	const struct http_header *h;
	size_t n;			/* HTTP_GUARD_HEADERS_MAX + 1: there were more */
	const char *local;		/* the address the connection reached, "" unknown */
};

/* http_guard: 0 when the request may go on, else the status to answer with
 * and [out] *json its body (static). */
int http_guard(const struct http_names *names, const struct http_head *head,
	       const char **json);

/* http_names_copy: a NULL-terminated list of names, normalized, into *out
 * (NULL stays NULL; http_names_free).  [in] empty_ok: an empty list is
 * allowed.  SD_INVALID names the entry that is no name or has a port. */
enum sd_result http_names_copy(const char *const *names, int empty_ok, char ***out);
void http_names_free(char **names);

#endif
