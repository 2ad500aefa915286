/*
 * http.h: the box's HTTP server (libmicrohttpd; no other module sees it).
 *
 * The server does the transport and nothing else: it reads a request, hands
 * it to one handler function, and writes the handler's answer.  It knows no
 * route but the pages' files (the Makefile's ASSETS), which it serves itself
 * from assets embedded in the binary at build time (tools/embed_assets):
 *
 *   GET|HEAD /                 src/dashboard/index.html   text/html
 *   GET|HEAD /dashboard.js     src/dashboard/dashboard.js  text/javascript
 *   GET|HEAD /dashboard.css    src/dashboard/dashboard.css text/css
 *   GET|HEAD /door             src/door/door.html          text/html
 *   GET|HEAD /door.js          src/door/door.js            text/javascript
 *   GET|HEAD /door.css         src/door/door.css           text/css
 *   GET|HEAD /jsQR.js          src/door/vendor/jsQR.js     text/javascript
 *   anything else              the handler (the API: api.h)
 *
 * It is the box's front door on a venue's LAN, where any laptop and any web
 * page a box-office browser opens can reach it.  What it promises:
 *
 *   - Plain HTTP only on loopback (127.0.0.0/8, ::1).  Any other listener
 *     needs a certificate and key (TLS 1.2 or 1.3 only, nothing older); a
 *     plain-HTTP request on the TLS port gets no HTTP answer.  The key file
 *     must be the box user's alone (0600); its bytes are wiped from this
 *     process's memory once the server has started (GnuTLS keeps its parsed
 *     copy).  No Strict-Transport-Security: browsers ignore it for an IP
 *     address, and for a name it would turn a box certificate that lapses
 *     or is made again into a hard lock-out with no click-through.
 *   - DNS rebinding and CSRF are refused before the handler or an asset is
 *     reached: a Host header must name one of the box's names (else 421
 *     {"error":"the Host header names no name of this box","field":"Host"});
 *     a request without Host (HTTP/1.0) passes.  A method other than GET,
 *     HEAD or OPTIONS that carries an Origin must come from this box's
 *     origin, scheme, allowed name and the listener's port (else 403
 *     {"error":"cross-origin request refused","field":"Origin"}; "null" is
 *     foreign).
 *   - One client cannot lock out the rest:
 *       * at most per_client_max connections per client IP address (more
 *         are accepted and closed at once);
 *       * at most min(HTTP_CONN_MAX, RLIMIT_NOFILE - HTTP_FD_RESERVE)
 *         connections in all, the soft descriptor limit raised to the hard
 *         one first, so that the database, the log and the mail keep their
 *         descriptors and a new client is still accepted;
 *       * a request's line and headers must arrive within header_timeout_s
 *         of the connection's start (TLS handshake included) or of the end
 *         of the previous response on it, however steadily they trickle;
 *         a body of N bytes within header_timeout_s + N / body_min_rate
 *         after the headers (chunked: it must keep up with that rate);
 *         past either deadline the connection is cut;
 *       * a connection idle for the idle timeout (HTTP_TIMEOUT_S) is closed;
 *       * a slow client costs a socket, never a thread.
 *     A handler that runs, or a response on its way out, is never cut by
 *     the header or body deadline.
 *   - The handler is called once per request, with the whole body, and only
 *     when the body is at most HTTP_BODY_MAX bytes; a larger body gets 413
 *     and the handler never sees it (a Content-Length past
 *     HTTP_BODY_DISCARD_MAX at once, unread; a chunked body once it ends,
 *     read and thrown away, or cut past HTTP_CHUNKED_DISCARD_MAX).
 *   - The request's head is judged first (http_guard.h): control bytes,
 *     repeated or missing headers, two framings, Host and Origin.
 *   - The path is handed over as sent, percent escapes and all: the
 *     handler decodes what it reads, once.
 *   - The handler runs on the server's threads, several at once: it must be
 *     thread-safe.  It should not block long: a busy handler holds up the
 *     other connections of its thread (HTTP_THREADS threads serve them all).
 *   - Every response carries Content-Type, Content-Length and
 *     X-Content-Type-Options: nosniff; every response under /v1/ carries
 *     Cache-Control: no-store; Retry-After when the handler sets it.
 */
#ifndef SD_HTTP_H
#define SD_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

#define HTTP_BODY_MAX (64 * 1024)	/* request bytes the handler may get (= API_BODY_MAX) */
#define HTTP_BODY_DISCARD_MAX (1024 * 1024) /* a Content-Length past this: 413 unread */
#define HTTP_CHUNKED_DISCARD_MAX (64LL * 1024 * 1024) /* a chunked body past this: cut */
#define HTTP_THREADS 8			/* the server's thread pool */
#define HTTP_TIMEOUT_S 10		/* an idle connection is closed after this */
#define HTTP_CONN_MAX 1024		/* open connections at once, at most */
#define HTTP_FD_RESERVE 128		/* descriptors kept from the connections for the
					 * database, the log, the mail and the threads */
#define HTTP_PER_CLIENT_MAX 32		/* open connections per client IP address */
#define HTTP_HEADER_TIMEOUT_S 10	/* a request line and headers arrive within this */
#define HTTP_LOCATION_MAX 2048	/* a redirect's target */
#define HTTP_BODY_MIN_RATE 1024		/* bytes/s a request body must keep up, past
					 * HTTP_HEADER_TIMEOUT_S of grace */
#define HTTP_EXTRA_HEADERS 2		/* a handler's own response headers, at most */

/*
 * One request, as the handler sees it.  Every string is NUL-terminated and
 * stays valid only during the handler call.  Field by field the same as
 * struct api_request (api.h), so the glue is a copy.
 */
struct http_request {
	const char *method;		/* "GET", "POST", ... */
	const char *path;		/* "/v1/jobs": as sent (escapes kept), no query */
	const char *query;		/* "state=dead&limit=5": raw, as sent; NULL: no '?' */
	const char *authorization;	/* the header's value, or NULL */
	const char *idempotency_key;	/* the header's value, or NULL */
	const char *content_type;	/* the header's value, or NULL */
	const char *body;		/* never NULL ("" when none); a NUL follows body_len */
	size_t body_len;		/* 0 .. HTTP_BODY_MAX (or the server's body_max) */
	int64_t arrived_ms;		/* when the whole request was in (clock_now_ms):
					 * the same on each call of a resumed request */
	const char *client;		/* the peer's address ("192.0.2.1", "2001:db8::1") */
	void *conn;			/* the connection, for http_request_header */
};

/* http_request_header: the value of the request's header name (the first,
 * when it came more than once), or NULL. */
const char *http_request_header(const struct http_request *req, const char *name);

/*
 * The handler's answer; the server hands it a zeroed one.  Field by field
 * the same as struct api_response (api.h).
 *   status        0 or out of 100..599: the server answers 500
 *   content_type  "" : "application/json" when there is a body, else
 *                 "text/plain; charset=utf-8"
 *   body          malloc'd by the handler (or NULL); the server owns it once
 *                 the handler returns and frees it with free()
 *   retry_after   "" or decimal seconds, sent as Retry-After
 */
struct http_response {
	int status;
	char content_type[64];
	char *body;
	size_t body_len;
	char retry_after[16];
	/* a page's extras (the shop's; api.h has none of them): */
	char location[HTTP_LOCATION_MAX];	/* "": none; else sent as Location */
	char set_cookie[256];		/* "": none; else sent as Set-Cookie */
	char csp[512];			/* "": none; else a page: sent as
					 * Content-Security-Policy, with
					 * X-Frame-Options DENY, Referrer-Policy
					 * same-origin, Cache-Control no-store */
	/* a protocol's extras (the SQS listener's): */
	struct {
		char name[48];		/* "": none */
		char value[208];
	} extra[HTTP_EXTRA_HEADERS];
	int suspend;			/* 1: no answer yet: the connection waits,
					 * holding no thread, until http_resume (on a
					 * server started with suspend set), and the
					 * handler is called again with the same
					 * request; nothing else of res is read */
};

/* The handler: fill res for req.  [in] arg as given to http_start. */
typedef void (*http_handler_fn)(void *arg, const struct http_request *req,
				struct http_response *res);

struct http_server;

/*
 * What a server is started with; zeroed fields take the defaults.  The
 * strings are read during http_start_opts only (copied where kept).
 */
struct http_opts {
	const char *listen;		/* as http_start's listen */
	const char *tls_cert;		/* PEM file path; NULL or "": plain HTTP (loopback only) */
	const char *tls_key;		/* PEM file path; a regular file with no group or
					 * other permission bits (0600); NULL or "" with
					 * tls_cert: an error */
	const char *const *hosts;	/* the names a request's Host may carry (no port;
					 * case-insensitive; "[::1]" or "::1" for IPv6),
					 * NULL-terminated, at least one; NULL: the address
					 * the connection reached (the listener's, or for a
					 * 0.0.0.0 or [::] listener the box address the
					 * client dialled), "localhost", "127.0.0.1", "::1" */
	const char *const *hosts_extra;	/* with hosts NULL: names accepted besides the
					 * defaults (serve: the certificate's names),
					 * NULL-terminated; NULL: none; ignored when
					 * hosts is set */
	const char *origin;		/* an origin a state-changing request may also
					 * come from ("https://tickets.venue.example": a
					 * listener behind a reverse proxy); NULL: none */
	int no_assets;			/* 1: serve none of the pages' files (the shop:
					 * every request goes to the handler) */
	unsigned threads;		/* the thread pool; 0: HTTP_THREADS (the shop
					 * takes more: its handler may wait on a
					 * provider) */
	unsigned per_client_max;	/* open connections per client IP; 0: HTTP_PER_CLIENT_MAX */
	unsigned header_timeout_s;	/* 0: HTTP_HEADER_TIMEOUT_S */
	unsigned body_min_rate;		/* bytes/s; 0: HTTP_BODY_MIN_RATE */
	size_t body_max;		/* request bytes the handler may get; 0:
					 * HTTP_BODY_MAX; at most HTTP_BODY_DISCARD_MAX */
	int suspend;			/* 1: handlers may answer res->suspend */
};

/*
 * http_start_opts: listen as o says and serve until http_stop.
 * [in] o: see struct http_opts; o->listen: "127.0.0.1:8080", "[::1]:8080",
 *      "0.0.0.0:8443" (numeric addresses only, no names); ":8080" is
 *      127.0.0.1:8080 (a box exposes nothing beyond itself unless told to);
 *      port 0 picks a free port (http_port tells which).
 * [in] fn, arg: the handler and its argument; fn is called from the server's
 *      threads until http_stop returns.
 * [out] *out: the running server (http_stop frees it); NULL on failure.
 * SD_INVALID: a malformed listen address or hosts entry; a listener beyond
 * loopback without TLS; a key file that others may read or that is no
 * regular file, a certificate or key that GnuTLS refuses (the message names
 * the file).  SD_IO: a certificate or key that cannot be read, an address
 * that cannot be bound (in use, not ours); the message says which.
 * Side effect: the process's soft RLIMIT_NOFILE is raised to the hard one.
 */
enum sd_result http_start_opts(const struct http_opts *o, http_handler_fn fn, void *arg,
			       struct http_server **out);

/*
 * http_start: http_start_opts with only o->listen set: plain HTTP (so
 * loopback only), the default names, limits and deadlines.
 */
enum sd_result http_start(const char *listen, http_handler_fn fn, void *arg,
			  struct http_server **out);

/* http_stop: close the listening socket and every connection, wait for
 * running handlers to return, free s.  Accepts NULL. */
void http_stop(struct http_server *s);

/*
 * http_resume: call the handler again for the request on conn (a
 * request's conn, whose handler answered res->suspend).  From any thread;
 * each suspended request must be resumed once, before http_stop.  Resuming
 * one whose handler has not returned yet is allowed: the handler is then
 * called again at once.
 */
void http_resume(void *conn);

/* http_port: the port s listens on. */
int http_port(const struct http_server *s);

/* http_listen_is_loopback: listen ("ADDR:PORT") names a loopback address
 * (127.0.0.0/8, ::1); 0 for any other, or for one that does not parse. */
int http_listen_is_loopback(const char *listen);

/* http_tls: 1 when s serves HTTPS, else 0. */
int http_tls(const struct http_server *s);

/* http_conn_max: the connection limit s runs with (from RLIMIT_NOFILE). */
unsigned http_conn_max(const struct http_server *s);

/* http_set_timeout_s: the idle timeout for servers started after this call
 * (tests shorten it; 0: back to HTTP_TIMEOUT_S). */
void http_set_timeout_s(unsigned seconds);

/*
 * The embedded assets: build/assets.c, generated by tools/embed_assets from
 * src/dashboard/ and src/door/ (do not edit).  Sorted by nothing; a handful
 * of entries.
 */
struct http_asset {
	const char *path;		/* "/", "/dashboard.js", "/door", ... */
	const char *content_type;	/* "text/javascript; charset=utf-8" */
	const char *data;		/* the file's bytes (a NUL follows) */
	size_t len;
};

extern const struct http_asset http_assets[];
extern const int http_asset_count;

/* http_lib_version: libmicrohttpd's version as linked ("0.9.75"). */
const char *http_lib_version(void);

#endif
