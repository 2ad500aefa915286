/*
 * http.c: the HTTP server on libmicrohttpd (see http.h for what it promises).
 *
 * Threads: libmicrohttpd's internal thread pool (HTTP_THREADS threads, each
 * polling its sockets), every connection served by one of them, event-driven: a client
 * that sends half a request holds a socket, never a thread.  Handlers run on
 * those threads.  One more thread of ours, the sweeper, enforces deadlines.
 *
 * One connection, as libmicrohttpd drives it, and the phase we note for it
 * (struct track, under s->mu):
 *
 *   notify STARTED      -> track made, phase HEAD since now (before the TLS
 *                          handshake and the request line)
 *   uri_log (raw URI)   -> struct conn allocated: the raw query kept
 *   access, first call  -> headers known: Host and Origin checked (421/403),
 *                          a Content-Length past HTTP_BODY_DISCARD_MAX
 *                          refused at once (413); phase BODY since now
 *   access, body bytes  -> appended up to HTTP_BODY_MAX, then discarded
 *                          (counted) up to HTTP_CHUNKED_DISCARD_MAX, then the
 *                          connection is dropped; the bytes counted in track
 *   access, final call  -> phase BUSY; 413 if anything was discarded, else
 *                          the dashboard asset or the handler's answer
 *   completed           -> struct conn freed; phase HEAD since now (the next
 *                          request on a kept-alive connection)
 *   notify CLOSED       -> track unlinked and freed
 *
 * The sweeper wakes every HTTP_SWEEP_MS and shuts down (shutdown(2), never
 * close: the descriptor is libmicrohttpd's) every connection past its
 * deadline: HEAD since + header_timeout; BODY since + header_timeout +
 * N / body_min_rate (N: the Content-Length, or for a chunked body the bytes
 * so far); BUSY has none.  libmicrohttpd then sees the socket fail and
 * closes the connection itself.
 *
 * Invariants:
 *   - A track is on s->conns exactly from STARTED to CLOSED, and its fd is
 *     open all that time: libmicrohttpd 0.9.75 calls NOTIFY_CLOSED before it
 *     closes the socket (MHD_cleanup_connections, and the failure path of
 *     new_connection_process_), and the sweeper shuts sockets down only with
 *     s->mu held, so it never touches a descriptor that was closed (and
 *     perhaps reused for the database).
 *   - The sweeper never cuts a BUSY connection: a handler running or a
 *     response being written has only the idle timeout.
 *   - Host and Origin are checked before any asset or handler, once per
 *     request.
 *   - The TLS key's bytes live in this process only during
 *     http_start_opts; they are wiped (explicit_bzero) before it returns.
 *
 * A too-large body is read and thrown away (up to a bound) rather than
 * refused mid-stream, so that the client reads the 413 instead of a reset.
 * Deadlines use CLOCK_MONOTONIC, not the box's injectable clock: a fake
 * clock in a test must not cut real sockets.
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "clock.h"
#include "cred.h"
#include "http.h"
#include "http_guard.h"
#include "log.h"

#define HTTP_SWEEP_MS 250		/* the sweeper's period */
#define HTTP_PEM_MAX (1024 * 1024)	/* a certificate or key file, at most */
#define HTTP_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* A connection's phase (struct track). */
enum phase {
	PH_HEAD,	/* waiting for a request's line and headers: header deadline */
	PH_BODY,	/* headers in, the body arriving: body deadline */
	PH_BUSY,	/* the handler runs or the response goes out: no deadline */
};

#define BODY_UNKNOWN UINT64_MAX	/* track.body_want of a chunked body */

/* One open connection, from accept to close (libmicrohttpd's socket_context). */
struct track {
	struct track *prev, *next;	/* on s->conns, under s->mu */
	int fd;				/* libmicrohttpd's socket: shut down, never closed here */
	enum phase phase;		/* under s->mu */
	int64_t since_ms;		/* the phase's start, CLOCK_MONOTONIC */
	uint64_t body_want;		/* PH_BODY: the Content-Length, or BODY_UNKNOWN */
	uint64_t body_got;		/* PH_BODY: body bytes received so far */
	int cut;			/* the sweeper has shut it down */
};

struct http_server {
	struct MHD_Daemon *daemon;
	http_handler_fn fn;		/* the handler */
	void *arg;			/* its argument */
	struct http_names names;	/* the names, the bound port, HTTPS or not */
	int no_assets;			/* every request goes to the handler */
	size_t body_max;		/* request bytes a handler may get */
	int suspend;			/* handlers may suspend their requests */
	int n_suspended;		/* requests suspended now (under mu) */
	unsigned threads;		/* the pool's threads */
	unsigned conn_max;		/* connections at once */
	unsigned per_client_max;	/* connections per client address */
	int64_t header_ms;		/* header_timeout_s, in ms */
	uint64_t body_rate;		/* body_min_rate, bytes/s */
	pthread_mutex_t mu;		/* guards conns, every track's phase fields, stopping */
	pthread_cond_t wake;		/* signals the sweeper to stop */
	struct track *conns;		/* the open connections */
	int stopping;			/* the sweeper should return */
	int sweeper_running;		/* sweeper was started (join it) */
	int sync_ready;			/* mu and wake are initialized */
	pthread_t sweeper;
};

/* One request in progress (libmicrohttpd's con_cls). */
struct conn {
	char *query;			/* raw query string, or NULL: no '?' */
	char *body;			/* accumulated body, NUL-terminated; NULL: none yet */
	size_t len;			/* bytes in body */
	size_t cap;			/* bytes allocated for body */
	size_t discarded;		/* bytes thrown away past the body limit */
	int started;			/* the access handler has seen this request */
	int64_t arrived_ms;		/* the whole request was in (0: not yet) */
	int suspended;			/* its handler suspended it, not yet called again */
};

static unsigned timeout_s;		/* 0: HTTP_TIMEOUT_S */

static const char TOO_LARGE[] = "{\"error\":\"request body too large\"}";
static const char INTERNAL[] = "{\"error\":\"internal error\"}";

/* The last message libmicrohttpd logged on this thread, and the last one
 * about the certificate or key: http_start_opts names them when the daemon
 * does not start. */
static _Thread_local char mhd_last[256];
static _Thread_local char mhd_tls[256];

void http_set_timeout_s(unsigned seconds)
{
	timeout_s = seconds;
}

int http_port(const struct http_server *s)
{
	return s ? s->names.port : 0;
}

int http_tls(const struct http_server *s)
{
	return s ? s->names.tls : 0;
}

unsigned http_conn_max(const struct http_server *s)
{
	return s ? s->conn_max : 0;
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------------------
 * Deadlines: the open connections and the sweeper
 * ------------------------------------------------------------------------ */

static struct track *track_of(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* track_set: move mc's connection into phase ph, since now. */
static void track_set(struct http_server *s, struct MHD_Connection *mc, enum phase ph,
		      uint64_t body_want)
{
	struct track *t = track_of(mc);

	if (!t)
		return;
	pthread_mutex_lock(&s->mu);
	t->phase = ph;
	t->since_ms = mono_ms();
	t->body_want = body_want;
	t->body_got = 0;
	pthread_mutex_unlock(&s->mu);
}

/* track_body: n more body bytes arrived on mc's connection. */
static void track_body(struct http_server *s, struct MHD_Connection *mc, size_t n)
{
	struct track *t = track_of(mc);

	if (!t)
		return;
	pthread_mutex_lock(&s->mu);
	t->body_got += n;
	pthread_mutex_unlock(&s->mu);
}

static void on_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
		      enum MHD_ConnectionNotificationCode code)
{
	struct http_server *s = cls;
	struct track *t;

	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);

		*socket_context = NULL;
		if (!ci)
			return;
		if (!(t = calloc(1, sizeof *t))) {
			/* untracked means no deadline: refuse it instead */
			shutdown(ci->connect_fd, SHUT_RDWR);
			return;
		}
		t->fd = ci->connect_fd;
		t->phase = PH_HEAD;
		t->since_ms = mono_ms();
		pthread_mutex_lock(&s->mu);
		t->next = s->conns;
		if (s->conns)
			s->conns->prev = t;
		s->conns = t;
		pthread_mutex_unlock(&s->mu);
		*socket_context = t;
		return;
	}
	/* MHD_CONNECTION_NOTIFY_CLOSED: the socket is still open until we return */
	if (!(t = *socket_context))
		return;
	pthread_mutex_lock(&s->mu);
	if (t->prev)
		t->prev->next = t->next;
	else
		s->conns = t->next;
	if (t->next)
		t->next->prev = t->prev;
	pthread_mutex_unlock(&s->mu);
	free(t);
	*socket_context = NULL;
}

/* deadline: when t is past its time (ms, monotonic), or -1: never. */
static int64_t deadline(const struct http_server *s, const struct track *t)
{
	uint64_t n;

	switch (t->phase) {
	case PH_HEAD:
		return t->since_ms + s->header_ms;
	case PH_BODY:
		n = t->body_want != BODY_UNKNOWN ? t->body_want : t->body_got;
		return t->since_ms + s->header_ms + (int64_t)(n * 1000 / s->body_rate);
	case PH_BUSY:
		break;
	}
	return -1;
}

/* sweep: shut down every connection past its deadline; s->mu held. */
static void sweep(struct http_server *s, int64_t now)
{
	unsigned head = 0, body = 0;
	struct track *t;

	for (t = s->conns; t; t = t->next) {
		int64_t d = deadline(s, t);

		if (t->cut || d < 0 || now <= d)
			continue;
		/* the fd is open: CLOSED, which precedes its close, waits for s->mu */
		shutdown(t->fd, SHUT_RDWR);
		t->cut = 1;
		if (t->phase == PH_HEAD)
			head++;
		else
			body++;
	}
	if (head || body)
		log_event(LOG_INFO, "http connections cut", "headers_late=%u body_slow=%u", head,
			  body);
}

static void *sweeper_main(void *arg)
{
	struct http_server *s = arg;

	pthread_mutex_lock(&s->mu);
	while (!s->stopping) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += HTTP_SWEEP_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&s->wake, &s->mu, &ts);
		if (!s->stopping)
			sweep(s, mono_ms());
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---------------------------------------------------------------------------
 * The request's head, as http_guard judges it
 * ------------------------------------------------------------------------ */

/* local_name: the address the connection reached, as text ("" unknown). */
static void local_name(struct MHD_Connection *mc, char *out, size_t size)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;

	out[0] = '\0';
	if (!ci || getsockname(ci->connect_fd, (struct sockaddr *)&ss, &len) != 0)
		return;
	if (ss.ss_family == AF_INET) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)size);
	} else if (ss.ss_family == AF_INET6) {
		const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(a))
			inet_ntop(AF_INET, &a->s6_addr[12], out, (socklen_t)size);
		else
			inet_ntop(AF_INET6, a, out, (socklen_t)size);
	}
}

struct heads {
	struct http_header h[HTTP_GUARD_HEADERS_MAX];
	size_t key_len[HTTP_GUARD_HEADERS_MAX];
	size_t n;
};

static enum MHD_Result head_add(void *cls, enum MHD_ValueKind kind, const char *key,
				size_t key_size, const char *value, size_t value_size)
{
	struct heads *hs = cls;

	(void)kind;
	if (hs->n < HTTP_GUARD_HEADERS_MAX) {
		hs->h[hs->n] = (struct http_header){ key, value ? value : "", value ? value_size : 0 };
		hs->key_len[hs->n] = key_size;
	}
	hs->n++;
	return hs->n <= HTTP_GUARD_HEADERS_MAX ? MHD_YES : MHD_NO;
}

/*
 * with_hidden_bytes: libmicrohttpd 0.9 keeps a header value as a C string,
 * so a NUL in it ends the value there ("p\0first" reads "p").  The bytes
 * are still in its read buffer, where each line lies as received, in
 * order, its line end overwritten with NULs: a value is followed by one or
 * two NULs (LF, CRLF) and the next line, the last by up to four (its line
 * end and the blank line's).  Each value's length is stretched over any
 * other bytes before that, so that http_guard sees the NUL.  When the
 * buffer is not laid out so (a folded line, moved), nothing is stretched.
 * [in] start: the request line (libmicrohttpd's method string, where the
 * head starts), size: the head's bytes.
 */
static void with_hidden_bytes(struct heads *hs, const char *start, size_t size)
{
	const char *end = start + size, *next, *v, *p;
	size_t i, eol;

	if (hs->n > HTTP_GUARD_HEADERS_MAX)
		return;
	for (i = 0; i < hs->n; i++) {
		v = hs->h[i].value;
		next = i + 1 < hs->n ? hs->h[i + 1].name : end;
		eol = i + 1 < hs->n ? 2 : 4;
		if (hs->h[i].name < start || v < hs->h[i].name + hs->key_len[i] + 1 ||
		    v + hs->h[i].value_len > next || next > end)
			return;	/* not as received */
		for (p = next; p > v + hs->h[i].value_len && eol && p[-1] == '\0'; p--, eol--)
			;
		hs->h[i].value_len = (size_t)(p - v);
	}
}

/* guard: refuse a request that is malformed or comes from elsewhere (DNS
 * rebinding, CSRF) (http_guard.h).  0 when it may go on, else the status to
 * answer with [out] *json. */
static int guard(const struct http_server *s, struct MHD_Connection *mc, const char *method,
		 const char *version, const char **json)
{
	struct heads *hs = malloc(sizeof *hs);
	const union MHD_ConnectionInfo *ci;
	char local[INET6_ADDRSTRLEN];
	int status;

	if (!hs) {
		*json = INTERNAL;
		return 500;
	}
	hs->n = 0;
	MHD_get_connection_values_n(mc, MHD_HEADER_KIND, head_add, hs);
	if ((ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE)))
		with_hidden_bytes(hs, method, ci->header_size);
	local_name(mc, local, sizeof local);
	status = http_guard(&s->names,
			    &(struct http_head){ method, version, hs->h, hs->n, local }, json);
	free(hs);
	return status;
}

/* ---------------------------------------------------------------------------
 * Callbacks from libmicrohttpd
 * ------------------------------------------------------------------------ */

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char q[300];
	size_t n;

	(void)cls;
	vsnprintf(mhd_last, sizeof mhd_last, fmt, ap);
	n = strlen(mhd_last);
	while (n > 0 && (mhd_last[n - 1] == '\n' || mhd_last[n - 1] == '.'))
		mhd_last[--n] = '\0';
	if (strstr(mhd_last, "x509") || strstr(mhd_last, "certificate"))
		memcpy(mhd_tls, mhd_last, sizeof mhd_tls);
	/* Mostly clients misbehaving (resets, bad requests): debug, not noise. */
	log_event(LOG_DEBUG, "http", "detail=%s", log_quote(q, sizeof q, mhd_last));
}

/* keep_escapes: the path as sent; the handler decodes each segment once
 * (libmicrohttpd's own decoding, then the handler's, read %2532 as 2) */
static size_t keep_escapes(void *cls, struct MHD_Connection *mc, char *s)
{
	(void)cls;
	(void)mc;
	return strlen(s);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *mc)
{
	struct conn *c = calloc(1, sizeof *c);
	const char *q;

	(void)cls;
	(void)mc;
	if (!c)
		return NULL;	/* the access handler answers 500 */
	q = strchr(uri, '?');
	if (q) {
		c->query = strdup(q + 1);
		if (!c->query) {
			free(c);
			return NULL;
		}
	}
	return c;
}

static void suspended_count(struct http_server *s, int d)
{
	pthread_mutex_lock(&s->mu);
	s->n_suspended += d;
	pthread_mutex_unlock(&s->mu);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct http_server *s = cls;
	struct conn *c = *con_cls;

	(void)toe;
	if (c && c->suspended)
		suspended_count(s, -1);
	if (c) {
		free(c->query);
		free(c->body);
		free(c);
	}
	*con_cls = NULL;
	/* the response is out: the next request's headers are due */
	track_set(s, mc, PH_HEAD, 0);
}

/* ---------------------------------------------------------------------------
 * Responses
 * ------------------------------------------------------------------------ */

static int is_v1(const char *path)
{
	return strncmp(path, "/v1/", 4) == 0 || strcmp(path, "/v1") == 0;
}

/* valid_type: a Content-Type value safe to send: printable ASCII only. */
static int valid_type(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return 0;
	return 1;
}

static int valid_seconds(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/*
 * send_answer: queue status, body and the headers every response carries.
 * [in] body: freed here when own is set (also on failure); else static.
 */
/* page_headers: a handler's page (the shop): its own policy, its redirect
 * and cookie, and nothing cached, framed or referred */
static void page_headers(struct MHD_Response *r, const struct http_response *page)
{
	if (page->location[0])
		MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, page->location);
	if (page->set_cookie[0])
		MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, page->set_cookie);
	if (!page->csp[0])
		return;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(r, "Content-Security-Policy", page->csp);
	MHD_add_response_header(r, "X-Frame-Options", "DENY");
	/* same-origin, not no-referrer: under no-referrer a browser sends
	 * "Origin: null" with a form's POST, which the guard refuses; the
	 * page's address (a buyer's link) still goes to no other origin */
	MHD_add_response_header(r, "Referrer-Policy", "same-origin");
}

/* extras_valid: a handler's own headers end their strings and carry no
 * line break or colon in a name */
static int extras_valid(struct http_response *res)
{
	int i;

	for (i = 0; i < HTTP_EXTRA_HEADERS; i++) {
		res->extra[i].name[sizeof res->extra[i].name - 1] = '\0';
		res->extra[i].value[sizeof res->extra[i].value - 1] = '\0';
		if (strpbrk(res->extra[i].name, "\r\n: ") || strpbrk(res->extra[i].value, "\r\n"))
			return 0;
	}
	return 1;
}

static enum MHD_Result send_answer(struct MHD_Connection *mc, const char *path, int status,
				   const char *type, char *body, size_t len, int own,
				   const char *retry_after, int dashboard,
				   const struct http_response *page)
{
	struct MHD_Response *r;
	enum MHD_Result ok;

	r = MHD_create_response_from_buffer(len, len ? body : (void *)"",
					    own && len ? MHD_RESPMEM_MUST_FREE
						       : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		if (own)
			free(body);
		return MHD_NO;
	}
	if (own && !len)
		free(body);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (is_v1(path))
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (retry_after && *retry_after)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, retry_after);
	if (dashboard) {
		/* The page talks to this box only, and nothing frames it.  The
		 * door page's camera needs no more: a MediaStream set as a
		 * video's srcObject is no fetch, so media-src (default-src
		 * 'none') does not apply to it. */
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		MHD_add_response_header(r, "Content-Security-Policy",
					"default-src 'none'; script-src 'self'; style-src 'self'; "
					"connect-src 'self'; img-src 'self' data:; "
					"base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
		MHD_add_response_header(r, "X-Frame-Options", "DENY");
		MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	}
	if (page)
		page_headers(r, page);
	for (int i = 0; page && i < HTTP_EXTRA_HEADERS; i++)
		if (page->extra[i].name[0])
			MHD_add_response_header(r, page->extra[i].name, page->extra[i].value);
	ok = MHD_queue_response(mc, (unsigned)status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result send_error(struct MHD_Connection *mc, const char *path, int status,
				  const char *json)
{
	return send_answer(mc, path, status, "application/json", (char *)json, strlen(json), 0,
			   NULL, 0, NULL);
}


static const struct http_asset *asset_find(const char *method, const char *path)
{
	int i;

	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return NULL;
	for (i = 0; i < http_asset_count; i++)
		if (strcmp(http_assets[i].path, path) == 0)
			return &http_assets[i];
	return NULL;
}

/* peer_name: the client's address as text ("" when unknown) */
static void peer_name(struct MHD_Connection *mc, char *buf, size_t size)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	buf[0] = '\0';
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
			  (socklen_t)size);
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr,
			  buf, (socklen_t)size);
}

void http_resume(void *conn)
{
	MHD_resume_connection(conn);
}

const char *http_request_header(const struct http_request *req, const char *name)
{
	return req->conn ? MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name) : NULL;
}

/* call_handler: the whole request to the handler, its answer to the client. */
static enum MHD_Result call_handler(struct http_server *s, struct MHD_Connection *mc,
				   struct conn *c, const char *method, const char *path)
{
	struct http_request req;
	struct http_response res;
	char client[INET6_ADDRSTRLEN];
	const char *type;

	memset(&req, 0, sizeof req);
	memset(&res, 0, sizeof res);
	req.method = method;
	req.path = path;
	req.query = c->query;
	req.authorization = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
							MHD_HTTP_HEADER_AUTHORIZATION);
	req.idempotency_key = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Idempotency-Key");
	req.content_type = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_CONTENT_TYPE);
	req.body = c->body ? c->body : "";
	req.body_len = c->len;
	if (!c->arrived_ms)
		c->arrived_ms = clock_now_ms();
	req.arrived_ms = c->arrived_ms;
	peer_name(mc, client, sizeof client);
	req.client = client;
	req.conn = mc;
	s->fn(s->arg, &req, &res);
	if (res.suspend && s->suspend) {
		free(res.body);
		c->suspended = 1;
		suspended_count(s, 1);
		MHD_suspend_connection(mc);
		return MHD_YES;
	}
	res.content_type[sizeof res.content_type - 1] = '\0';
	res.retry_after[sizeof res.retry_after - 1] = '\0';
	if (!res.body)
		res.body_len = 0;
	if (res.status < 100 || res.status > 599) {
		log_event(LOG_ERROR, "http handler gave no status", "method=%s status=%d", method,
			  res.status);
		free(res.body);
		return send_error(mc, path, 500, INTERNAL);
	}
	if (valid_type(res.content_type))
		type = res.content_type;
	else
		type = res.body_len ? "application/json" : "text/plain; charset=utf-8";
	log_event(LOG_DEBUG, "http request", "method=%s status=%d bytes=%zu", method, res.status,
		  res.body_len);
	res.location[sizeof res.location - 1] = '\0';
	res.set_cookie[sizeof res.set_cookie - 1] = '\0';
	res.csp[sizeof res.csp - 1] = '\0';
	/* a header value never carries a line break (response splitting) */
	if (strpbrk(res.location, "\r\n") || strpbrk(res.set_cookie, "\r\n") ||
	    strpbrk(res.csp, "\r\n") || !extras_valid(&res)) {
		free(res.body);
		return send_error(mc, path, 500, INTERNAL);
	}
	return send_answer(mc, path, res.status, type, res.body, res.body_len, 1,
			   valid_seconds(res.retry_after) ? res.retry_after : NULL, 0, &res);
}


/* body_append: keep up to HTTP_BODY_MAX bytes, count the rest.  0, or -1
 * when out of memory. */
static int body_append(struct conn *c, const char *data, size_t n, size_t max)
{
	if (c->discarded || c->len + n > max) {
		/* Past the limit: from now on only counted. */
		c->discarded += c->len + n;
		free(c->body);
		c->body = NULL;
		c->len = c->cap = 0;
		return 0;
	}
	if (c->len + n + 1 > c->cap) {
		size_t cap = c->cap ? c->cap : 1024;
		char *b;

		while (cap < c->len + n + 1)
			cap *= 2;
		b = realloc(c->body, cap);
		if (!b)
			return -1;
		c->body = b;
		c->cap = cap;
	}
	memcpy(c->body + c->len, data, n);
	c->len += n;
	c->body[c->len] = '\0';
	return 0;
}
/* access_first: the headers are in.  Refuse a request from elsewhere or a
 * body too large to be worth reading (the connection closes); else start
 * the body's deadline. */
static enum MHD_Result access_first(struct http_server *s, struct MHD_Connection *mc,
				    const char *url, const char *method, const char *version)
{
	const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
						     MHD_HTTP_HEADER_CONTENT_LENGTH);
	const char *json;
	uint64_t want = cl ? strtoull(cl, NULL, 10) : BODY_UNKNOWN;
	int status;

	if ((status = guard(s, mc, method, version, &json)) != 0) {
		track_set(s, mc, PH_BUSY, 0);
		log_event(LOG_DEBUG, "http refused", "method=%s status=%d", method, status);
		return send_error(mc, url, status, json);
	}
	if (cl && want > HTTP_BODY_DISCARD_MAX) {
		track_set(s, mc, PH_BUSY, 0);
		return send_error(mc, url, 413, TOO_LARGE);
	}
	track_set(s, mc, PH_BODY, want);
	return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url,
				 const char *method, const char *version,
				 const char *upload_data, size_t *upload_data_size,
				 void **con_cls)
{
	struct http_server *s = cls;
	struct conn *c = *con_cls;
	const struct http_asset *a;

	if (!c) {
		track_set(s, mc, PH_BUSY, 0);
		return send_error(mc, url, 500, INTERNAL);	/* on_uri had no memory */
	}
	if (!c->started) {
		c->started = 1;
		return access_first(s, mc, url, method, version);
	}
	if (c->suspended) {	/* resumed */
		c->suspended = 0;
		suspended_count(s, -1);
	}
	if (*upload_data_size) {
		track_body(s, mc, *upload_data_size);
		if (body_append(c, upload_data, *upload_data_size, s->body_max) != 0)
			return MHD_NO;
		*upload_data_size = 0;
		/* a chunked body has no length to refuse it by before it
		 * comes, and libmicrohttpd takes an answer only once the whole
		 * request is in: it is read to its end and answered 413, unless
		 * it is a stream without end */
		if (c->discarded > HTTP_CHUNKED_DISCARD_MAX)
			return MHD_NO;
		return MHD_YES;
	}
	/* the whole request is in: from here only the idle timeout applies */
	track_set(s, mc, PH_BUSY, 0);
	if (c->discarded)
		return send_error(mc, url, 413, TOO_LARGE);
	a = s->no_assets ? NULL : asset_find(method, url);
	if (a)
		return send_answer(mc, url, 200, a->content_type, (char *)a->data, a->len, 0, NULL,
				   1, NULL);
	return call_handler(s, mc, c, method, url);
}

/* ---------------------------------------------------------------------------
 * Start and stop
 * ------------------------------------------------------------------------ */

/*
 * parse_listen: "HOST:PORT", "[V6]:PORT" or ":PORT" into ss.
 * [out] *ipv6: 1 for an IPv6 address.
 */
static enum sd_result parse_listen(const char *listen, struct sockaddr_storage *ss,
				   int *ipv6)
{
	char host[64];
	const char *port_s, *colon;
	char *end;
	size_t hl;
	long port;

	memset(ss, 0, sizeof *ss);
	if (!listen || !*listen)
		return err_set(SD_INVALID, "http: empty listen address");
	if (listen[0] == '[') {
		const char *close = strchr(listen, ']');
		if (!close || close[1] != ':')
			return err_set(SD_INVALID, "http: listen address %s: want [ADDR]:PORT",
				       listen);
		hl = (size_t)(close - listen - 1);
		if (hl == 0 || hl >= sizeof host)
			return err_set(SD_INVALID, "http: listen address %s: bad IPv6 address",
				       listen);
		memcpy(host, listen + 1, hl);
		host[hl] = '\0';
		port_s = close + 2;
		*ipv6 = 1;
	} else {
		colon = strrchr(listen, ':');
		if (!colon || strchr(listen, ':') != colon)
			return err_set(SD_INVALID, "http: listen address %s: want ADDR:PORT",
				       listen);
		hl = (size_t)(colon - listen);
		if (hl >= sizeof host)
			return err_set(SD_INVALID, "http: listen address %s: bad address", listen);
		memcpy(host, listen, hl);
		host[hl] = '\0';
		if (!hl)
			strcpy(host, "127.0.0.1");
		port_s = colon + 1;
		*ipv6 = 0;
	}
	if (*port_s < '0' || *port_s > '9')
		return err_set(SD_INVALID, "http: listen address %s: bad port", listen);
	errno = 0;
	port = strtol(port_s, &end, 10);
	if (errno || *end || port < 0 || port > 65535)
		return err_set(SD_INVALID, "http: listen address %s: bad port", listen);
	if (*ipv6) {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			return err_set(SD_INVALID, "http: listen address %s: bad IPv6 address",
				       listen);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)ss;

		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return err_set(SD_INVALID, "http: listen address %s: bad IPv4 address",
				       listen);
	}
	return SD_OK;
}


/* is_loopback: 127.0.0.0/8, ::1, or ::ffff:127.0.0.0/104. */
static int is_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) == 127;
	if (ss->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return 0;
}

int http_listen_is_loopback(const char *listen)
{
	struct sockaddr_storage ss;
	int ipv6 = 0;

	return listen && parse_listen(listen, &ss, &ipv6) == SD_OK && is_loopback(&ss);
}

/* pem_wipe: zero and free a buffer that held key bytes; accepts NULL. */
static void pem_wipe(char *buf, size_t size)
{
	if (buf) {
		explicit_bzero(buf, size);
		free(buf);
	}
}

/*
 * pem_read: a certificate (key 0) or key (key 1) file, whole, NUL-terminated,
 * read with read(2) so that no stdio buffer keeps a copy of a key.
 * [out] *out (malloc'd; the caller wipes a key with pem_wipe), *size: the
 * bytes allocated.  A key must be a regular file with no group or other
 * permission bits.
 */
static enum sd_result pem_read(const char *path, int key, char **out, size_t *size)
{
	const char *what = key ? "key" : "certificate";
	enum sd_result r = SD_OK;
	struct stat st;
	size_t len = 0, cap = 0;
	char *buf = NULL;
	int fd;

	*out = NULL;
	*size = 0;
	/* O_NONBLOCK: a FIFO in its place must not hang the start */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0)
		return err_set(SD_IO, "http: cannot read the TLS %s %s: %s", what, path,
			       strerror(errno));
	if (fstat(fd, &st) != 0) {
		r = err_set(SD_IO, "http: cannot read the TLS %s %s: %s", what, path,
			    strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = err_set(SD_INVALID, "http: the TLS %s %s is not a regular file", what, path);
		goto out;
	}
	if (key && !cred_mode_ok(path, &st)) {
		r = err_set(SD_INVALID,
			    "http: the TLS key %s may be read by others (mode %04o): chmod 600 it",
			    path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	if (st.st_size <= 0 || st.st_size > HTTP_PEM_MAX) {
		r = err_set(SD_INVALID, "http: the TLS %s %s is %s", what, path,
			    st.st_size <= 0 ? "empty" : "too large for a PEM file");
		goto out;
	}
	cap = (size_t)st.st_size + 1;
	if (!(buf = malloc(cap))) {
		r = err_set(SD_NOMEM, "http: out of memory");
		goto out;
	}
	while (len < cap - 1) {
		ssize_t n = read(fd, buf + len, cap - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = err_set(SD_IO, "http: cannot read the TLS %s %s: %s", what, path,
				    strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (!strstr(buf, key ? "PRIVATE KEY-----" : "-----BEGIN CERTIFICATE-----"))
		r = err_set(SD_INVALID, "http: the TLS %s %s holds no PEM %s", what, path,
			    key ? "private key" : "certificate");
out:
	close(fd);
	if (r != SD_OK) {
		pem_wipe(buf, cap);
		return r;
	}
	*out = buf;
	*size = cap;
	return SD_OK;
}

/*
 * conn_limit: raise the soft RLIMIT_NOFILE to the hard one, then the
 * connections we may hold and still keep HTTP_FD_RESERVE descriptors for
 * the rest of the process.  [out] *nofile: the soft limit in force.
 */
static unsigned conn_limit(unsigned long long *nofile)
{
	struct rlimit rl;
	rlim_t soft;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		*nofile = 0;
		return HTTP_CONN_MAX;	/* cannot know: libmicrohttpd copes with EMFILE */
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = { rl.rlim_max, rl.rlim_max };

		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl.rlim_cur = rl.rlim_max;
	}
	soft = rl.rlim_cur;
	*nofile = soft == RLIM_INFINITY ? ULLONG_MAX : (unsigned long long)soft;
	if (soft == RLIM_INFINITY || soft >= (rlim_t)HTTP_CONN_MAX + HTTP_FD_RESERVE)
		return HTTP_CONN_MAX;
	if (soft > 2 * HTTP_FD_RESERVE)
		return (unsigned)(soft - HTTP_FD_RESERVE);
	return soft >= 2 ? (unsigned)(soft / 2) : 1;	/* a starved process: half */
}

/*
 * listen_on: a listening socket on ss, bound here rather than by
 * libmicrohttpd, so that a refusal names the address and the reason
 * ("Address already in use", "Permission denied"): a configuration error,
 * SD_INVALID.  [out] *fd.
 */
static enum sd_result listen_on(const char *listen_text, const struct sockaddr_storage *ss,
				int ipv6, int *fd)
{
	int one = 1, e;

	*fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (*fd < 0)
		return err_set(SD_IO, "http: no socket for %s: %s", listen_text, strerror(errno));
	setsockopt(*fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ipv6)
		setsockopt(*fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(*fd, (const struct sockaddr *)ss,
		 ipv6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)) == 0 &&
	    listen(*fd, SOMAXCONN) == 0)
		return SD_OK;
	e = errno;
	close(*fd);
	*fd = -1;
	return err_set(e == EADDRINUSE || e == EACCES || e == EADDRNOTAVAIL ? SD_INVALID : SD_IO,
		       "http: cannot listen on %s: %s%s", listen_text, strerror(e),
		       e == EACCES ? " (a port below 1024 needs a privilege the box does not "
				     "take: use one above)" : "");
}

/*
 * daemon_start: libmicrohttpd on ss with s's limits and, when s->names.tls, the
 * certificate and key in memory (read at start only: the caller may wipe
 * them when this returns).
 */
static enum sd_result daemon_start(struct http_server *s, const struct http_opts *o,
				   struct sockaddr_storage *ss, int ipv6, char *cert, char *key)
{
	struct MHD_OptionItem tls[4];
	/* poll, not epoll: libmicrohttpd 0.9.75 spins a core on epoll while a TLS
	 * handshake waits for its client; poll costs nothing while it waits */
	unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;

	if (s->suspend)
		flags |= MHD_ALLOW_SUSPEND_RESUME;
	enum sd_result r;
	int n = 0, fd;

	if ((r = listen_on(o->listen, ss, ipv6, &fd)) != SD_OK)
		return r;
	if (ipv6)
		flags |= MHD_USE_IPv6;
	if (s->names.tls) {
		flags |= MHD_USE_TLS;
		tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, cert };
		tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, key };
		tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0,
						    (void *)HTTP_TLS_PRIORITIES };
	}
	tls[n] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	mhd_last[0] = mhd_tls[0] = '\0';
	s->daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, on_access, s,
		MHD_OPTION_LISTEN_SOCKET, fd,
		MHD_OPTION_THREAD_POOL_SIZE, s->threads,
		MHD_OPTION_CONNECTION_TIMEOUT, timeout_s ? timeout_s : (unsigned)HTTP_TIMEOUT_S,
		MHD_OPTION_CONNECTION_LIMIT, s->conn_max,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT, s->per_client_max,
		MHD_OPTION_NOTIFY_CONNECTION, on_notify, (void *)s,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, (void *)NULL,
		MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes, (void *)NULL,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, (void *)s,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, (void *)NULL,
		MHD_OPTION_ARRAY, tls,
		MHD_OPTION_END);
	/* the socket is the daemon's from here: it closes it at stop, and on
	 * the failures past its options (TLS included), so never here */
	if (s->daemon)
		return SD_OK;
	if (s->names.tls && mhd_tls[0])
		return err_set(SD_INVALID, "http: the TLS certificate %s with the key %s: %s",
			       o->tls_cert, o->tls_key, mhd_tls);
	return err_set(SD_IO, "http: cannot listen on %s: %s", o->listen,
		       mhd_last[0] ? mhd_last : "libmicrohttpd refused to start");
}

/* server_free: stop the sweeper, then the daemon (every CLOSED runs), free.
 * Accepts NULL and a half-made server. */
static void server_free(struct http_server *s)
{
	if (!s)
		return;
	if (s->sweeper_running) {
		pthread_mutex_lock(&s->mu);
		s->stopping = 1;
		pthread_cond_signal(&s->wake);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->sweeper, NULL);
	}
	/* libmicrohttpd stops no daemon with a request suspended: the handler
	 * has resumed every one (its owner's promise) and they finish */
	for (int i = 0; s->daemon && i < 1000; i++) {
		pthread_mutex_lock(&s->mu);
		int n = s->n_suspended;
		pthread_mutex_unlock(&s->mu);
		if (!n)
			break;
		usleep(10000);
	}
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	if (s->sync_ready) {
		pthread_cond_destroy(&s->wake);
		pthread_mutex_destroy(&s->mu);
	}
	http_names_free(s->names.hosts);
	http_names_free(s->names.extra);
	free(s->names.origin);
	free(s);
}

/* server_new: a server with o's settings and defaults, its lock made. */
static enum sd_result server_new(const struct http_opts *o, http_handler_fn fn, void *arg,
				 struct http_server **out)
{
	struct http_server *s;
	pthread_condattr_t ca;

	if (!(s = calloc(1, sizeof *s)))
		return err_set(SD_NOMEM, "http: out of memory");
	s->fn = fn;
	s->arg = arg;
	s->names.tls = o->tls_cert && *o->tls_cert;
	s->per_client_max = o->per_client_max ? o->per_client_max : HTTP_PER_CLIENT_MAX;
	s->header_ms = (int64_t)(o->header_timeout_s ? o->header_timeout_s
						     : HTTP_HEADER_TIMEOUT_S) * 1000;
	s->body_rate = o->body_min_rate ? o->body_min_rate : HTTP_BODY_MIN_RATE;
	if (pthread_condattr_init(&ca) != 0) {
		free(s);
		return err_set(SD_NOMEM, "http: no condition variable");
	}
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_mutex_init(&s->mu, NULL) != 0) {
		pthread_condattr_destroy(&ca);
		free(s);
		return err_set(SD_NOMEM, "http: no mutex");
	}
	if (pthread_cond_init(&s->wake, &ca) != 0) {
		pthread_condattr_destroy(&ca);
		pthread_mutex_destroy(&s->mu);
		free(s);
		return err_set(SD_NOMEM, "http: no condition variable");
	}
	pthread_condattr_destroy(&ca);
	s->sync_ready = 1;
	*out = s;
	return SD_OK;
}

enum sd_result http_start_opts(const struct http_opts *o, http_handler_fn fn, void *arg,
			       struct http_server **out)
{
	struct sockaddr_storage ss;
	struct http_server *s = NULL;
	const union MHD_DaemonInfo *info;
	char *cert = NULL, *key = NULL;
	size_t cert_size = 0, key_size = 0;
	unsigned long long nofile = 0;
	enum sd_result r;
	int ipv6 = 0, tls;

	*out = NULL;
	if (!o || !fn)
		return err_set(SD_INVALID, "http: no options or no handler");
	if ((r = parse_listen(o->listen, &ss, &ipv6)) != SD_OK)
		return r;
	tls = o->tls_cert && *o->tls_cert;
	if (tls != (o->tls_key && *o->tls_key))
		return err_set(SD_INVALID, "http: %s %s without %s: set both http_tls_cert and "
			       "http_tls_key, or neither", tls ? "the TLS certificate" : "the TLS key",
			       tls ? o->tls_cert : o->tls_key, tls ? "a key" : "a certificate");
	if (!tls && !is_loopback(&ss))
		return err_set(SD_INVALID, "http: listening on %s needs TLS on a venue's network: "
			       "set http_tls_cert and http_tls_key (`stagedoor tls init` makes "
			       "them)", o->listen);
	if ((r = server_new(o, fn, arg, &s)) != SD_OK)
		return r;
	s->no_assets = o->no_assets;
	s->body_max = o->body_max ? o->body_max : HTTP_BODY_MAX;
	if (s->body_max > HTTP_BODY_DISCARD_MAX)
		s->body_max = HTTP_BODY_DISCARD_MAX;
	s->suspend = o->suspend;
	s->threads = o->threads ? o->threads : HTTP_THREADS;
	if (o->origin && !(s->names.origin = strdup(o->origin)))
		r = err_set(SD_NOMEM, "out of memory");
	if (r != SD_OK || (r = http_names_copy(o->hosts, 0, &s->names.hosts)) != SD_OK ||
	    (!o->hosts && (r = http_names_copy(o->hosts_extra, 1, &s->names.extra)) != SD_OK))
		goto out;
	if (tls && ((r = pem_read(o->tls_cert, 0, &cert, &cert_size)) != SD_OK ||
		    (r = pem_read(o->tls_key, 1, &key, &key_size)) != SD_OK))
		goto out;
	s->conn_max = conn_limit(&nofile);
	/* GnuTLS has parsed the key once the daemon runs: wipe our copy now */
	r = daemon_start(s, o, &ss, ipv6, cert, key);
	pem_wipe(key, key_size);
	key = NULL;
	if (r != SD_OK)
		goto out;
	if (pthread_create(&s->sweeper, NULL, sweeper_main, s) != 0) {
		r = err_set(SD_NOMEM, "http: cannot start the deadline thread");
		goto out;
	}
	s->sweeper_running = 1;
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->names.port = info ? info->port : 0;
	log_event(LOG_INFO, "http listening",
		  "listen=%s port=%d tls=%s conn_max=%u per_client_max=%u header_timeout_s=%u "
		  "body_min_rate=%u nofile=%llu", o->listen, s->names.port, s->names.tls ? "on" : "off",
		  s->conn_max, s->per_client_max, (unsigned)(s->header_ms / 1000),
		  (unsigned)s->body_rate, nofile);
out:
	pem_wipe(key, key_size);
	free(cert);
	if (r != SD_OK) {
		server_free(s);
		return r;
	}
	*out = s;
	return SD_OK;
}

enum sd_result http_start(const char *listen, http_handler_fn fn, void *arg,
			  struct http_server **out)
{
	struct http_opts o;

	memset(&o, 0, sizeof o);
	o.listen = listen;
	return http_start_opts(&o, fn, arg, out);
}

void http_stop(struct http_server *s)
{
	server_free(s);
}

const char *http_lib_version(void)
{
	return MHD_get_version();
}
