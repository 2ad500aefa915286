/*
 * http.c: the HTTP server on libmicrohttpd (see http.h for what it promises).
 *
 * Threads: libmicrohttpd's internal thread pool (HTTP_THREADS threads, epoll
 * on Linux), every connection served by one of them, event-driven: a client
 * that sends half a request holds a socket until the idle timeout, never a
 * thread.  Handlers run on those threads.
 *
 * One request, as libmicrohttpd drives it:
 *
 *   uri_log (raw URI)        -> struct conn allocated: the raw query kept
 *   access, first call       -> headers known: a Content-Length past
 *                               HTTP_BODY_DISCARD_MAX is refused at once (413)
 *   access, with body bytes  -> appended up to HTTP_BODY_MAX, then discarded
 *                               (counted) up to HTTP_BODY_DISCARD_MAX, then
 *                               the connection is dropped
 *   access, final call       -> 413 if anything was discarded, else the
 *                               dashboard asset or the handler's answer
 *   completed                -> struct conn freed
 *
 * A too-large body is read and thrown away (up to a bound) rather than
 * refused mid-stream, so that the client reads the 413 instead of a reset.
 */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "http.h"
#include "log.h"

struct http_server {
	struct MHD_Daemon *daemon;
	http_handler_fn fn;		/* the handler */
	void *arg;			/* its argument */
	int port;			/* the bound port */
};

/* One request in progress (libmicrohttpd's con_cls). */
struct conn {
	char *query;			/* raw query string, or NULL: no '?' */
	char *body;			/* accumulated body, NUL-terminated; NULL: none yet */
	size_t len;			/* bytes in body */
	size_t cap;			/* bytes allocated for body */
	size_t discarded;		/* bytes thrown away past HTTP_BODY_MAX */
	int started;			/* the access handler has seen this request */
};

static unsigned timeout_s;		/* 0: HTTP_TIMEOUT_S */

/* The last message libmicrohttpd logged on this thread: http_start names it
 * when the daemon does not start. */
static _Thread_local char mhd_last[256];

void http_set_timeout_s(unsigned seconds)
{
	timeout_s = seconds;
}

int http_port(const struct http_server *s)
{
	return s ? s->port : 0;
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
	/* Mostly clients misbehaving (resets, bad requests): debug, not noise. */
	log_event(LOG_DEBUG, "http", "detail=%s", log_quote(q, sizeof q, mhd_last));
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

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct conn *c = *con_cls;

	(void)cls;
	(void)mc;
	(void)toe;
	if (c) {
		free(c->query);
		free(c->body);
		free(c);
	}
	*con_cls = NULL;
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
static enum MHD_Result send_answer(struct MHD_Connection *mc, const char *path, int status,
				   const char *type, char *body, size_t len, int own,
				   const char *retry_after, int dashboard)
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
		/* The page talks to this box only, and nothing frames it. */
		MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
		MHD_add_response_header(r, "Content-Security-Policy",
					"default-src 'none'; script-src 'self'; style-src 'self'; "
					"connect-src 'self'; img-src 'self' data:; "
					"base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
		MHD_add_response_header(r, "X-Frame-Options", "DENY");
		MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	}
	ok = MHD_queue_response(mc, (unsigned)status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result send_error(struct MHD_Connection *mc, const char *path, int status,
				  const char *json)
{
	return send_answer(mc, path, status, "application/json", (char *)json, strlen(json), 0,
			   NULL, 0);
}

static const char TOO_LARGE[] = "{\"error\":\"request body too large (limit 65536 bytes)\"}";
static const char INTERNAL[] = "{\"error\":\"internal error\"}";

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

/* call_handler: the whole request to the handler, its answer to the client. */
static enum MHD_Result call_handler(struct http_server *s, struct MHD_Connection *mc,
				   struct conn *c, const char *method, const char *path)
{
	struct http_request req;
	struct http_response res;
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
	s->fn(s->arg, &req, &res);

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
	return send_answer(mc, path, res.status, type, res.body, res.body_len, 1,
			   valid_seconds(res.retry_after) ? res.retry_after : NULL, 0);
}

/* body_append: keep up to HTTP_BODY_MAX bytes, count the rest.  0, or -1
 * when out of memory. */
static int body_append(struct conn *c, const char *data, size_t n)
{
	if (c->discarded || c->len + n > HTTP_BODY_MAX) {
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

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url,
				 const char *method, const char *version,
				 const char *upload_data, size_t *upload_data_size,
				 void **con_cls)
{
	struct http_server *s = cls;
	struct conn *c = *con_cls;
	const struct http_asset *a;

	(void)version;
	if (!c)
		return send_error(mc, url, 500, INTERNAL);	/* on_uri had no memory */
	if (!c->started) {
		const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);
		c->started = 1;
		/* Too large to be worth reading: refuse now (the connection closes). */
		if (cl && strtoull(cl, NULL, 10) > HTTP_BODY_DISCARD_MAX)
			return send_error(mc, url, 413, TOO_LARGE);
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (body_append(c, upload_data, *upload_data_size) != 0)
			return MHD_NO;
		*upload_data_size = 0;
		if (c->discarded > HTTP_BODY_DISCARD_MAX)
			return MHD_NO;	/* a stream without end: drop it */
		return MHD_YES;
	}
	if (c->discarded)
		return send_error(mc, url, 413, TOO_LARGE);
	a = asset_find(method, url);
	if (a)
		return send_answer(mc, url, 200, a->content_type, (char *)a->data, a->len, 0, NULL,
				   1);
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

enum sd_result http_start(const char *listen, http_handler_fn fn, void *arg,
			  struct http_server **out)
{
	struct sockaddr_storage ss;
	struct http_server *s;
	const union MHD_DaemonInfo *info;
	unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
	enum sd_result r;
	int ipv6 = 0;

	*out = NULL;
	if (!fn)
		return err_set(SD_INVALID, "http: no handler");
	r = parse_listen(listen, &ss, &ipv6);
	if (r != SD_OK)
		return r;
	if (ipv6)
		flags |= MHD_USE_IPv6;
	s = calloc(1, sizeof *s);
	if (!s)
		return err_set(SD_NOMEM, "http: out of memory");
	s->fn = fn;
	s->arg = arg;
	mhd_last[0] = '\0';
	s->daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, on_access, s,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS,
		MHD_OPTION_CONNECTION_TIMEOUT, timeout_s ? timeout_s : (unsigned)HTTP_TIMEOUT_S,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_MAX,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, (void *)NULL,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, (void *)NULL,
		MHD_OPTION_EXTERNAL_LOGGER, mhd_log, (void *)NULL,
		MHD_OPTION_END);
	if (!s->daemon) {
		free(s);
		return err_set(SD_IO, "http: cannot listen on %s: %s", listen,
			       mhd_last[0] ? mhd_last : "libmicrohttpd refused to start");
	}
	info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : 0;
	log_event(LOG_INFO, "http listening", "listen=%s port=%d", listen, s->port);
	*out = s;
	return SD_OK;
}

void http_stop(struct http_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->daemon);
	free(s);
}
