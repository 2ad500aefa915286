/*
 * http.c: libmicrohttpd, one thread per connection (so a second request
 * can arrive while a first is still held: that is how 409 happens), plain
 * HTTP on loopback or HTTPS with GnuTLS (TLS 1.2 and 1.3, as src/http.c).
 * Each request's target is kept as it came (the request log wants the raw
 * query), its body gathered (up to 1 MiB, else 413), and it is handed to:
 *
 *   /v1/...        api.c       the Stripe API
 *   /pay/{id}      page.c      the hosted payment page
 *   /_paysink/...  control.c   the test controls (loopback clients only)
 *
 * Every answer carries Request-Id: req_..., and Cache-Control: no-store.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "paysink.h"

#define PS_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

static struct MHD_Daemon *daemon_h;

const char *req_header(const struct ps_req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, name);
}

const char *req_query(const struct ps_req *rq, const char *name)
{
	return MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, name);
}

void resp_json(struct ps_resp *out, int status, json_t *doc)
{
	char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

	json_decref(doc);
	resp_text(out, text ? status : 500, NULL, text ? text : strdup("{}"));
}

void resp_text(struct ps_resp *out, int status, const char *type, char *body)
{
	free(out->body);
	out->status = status;
	out->type = type;
	out->body = body;
}

static int is_loopback(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	if (!sa)
		return 0;
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		if (IN6_IS_ADDR_LOOPBACK(a))
			return 1;
		return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
	}
	return 0;
}

static enum MHD_Result send_resp(struct MHD_Connection *mc, struct ps_resp *out)
{
	struct MHD_Response *r;
	enum MHD_Result ok;
	size_t len = out->body ? strlen(out->body) : 0;

	r = MHD_create_response_from_buffer(len, len ? out->body : (void *)"",
					    len ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	if (len)
		out->body = NULL;	/* the response owns it now */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				out->type ? out->type : "application/json");
	MHD_add_response_header(r, "Request-Id", out->request_id);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache, no-store");
	if (out->api)
		MHD_add_response_header(r, "Stripe-Version", PS_API_VERSION);
	if (out->idem_key[0])
		MHD_add_response_header(r, "Idempotency-Key", out->idem_key);
	if (out->replayed)
		MHD_add_response_header(r, "Idempotent-Replayed", "true");
	if (out->original[0])
		MHD_add_response_header(r, "Original-Request", out->original);
	if (out->location)
		MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, out->location);
	ok = MHD_queue_response(mc, (unsigned)out->status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result dispatch(struct MHD_Connection *mc, struct ps_req *rq)
{
	struct ps_resp out;
	struct ps_err e = { 0 };
	enum MHD_Result ok;

	memset(&out, 0, sizeof out);
	ps_rand_id(out.request_id, sizeof out.request_id, "req_", 14);
	if (!rq->body)
		rq->body = strdup("");
	if (rq->too_big || !rq->body) {
		err_set(&e, 413, "invalid_request_error", NULL, NULL,
			"The request body is larger than 1 MiB.");
		resp_json(&out, 413, err_json(&e));
	} else if (strncmp(rq->path, "/v1/", 4) == 0) {
		api_handle(rq, &out);
	} else if (strncmp(rq->path, "/pay/", 5) == 0) {
		page_handle(rq, rq->path + 5, &out);
	} else if (strncmp(rq->path, "/_paysink/", 10) == 0) {
		if (rq->loopback) {
			control_handle(rq, &out);
		} else {
			err_set(&e, 403, "invalid_request_error", NULL, NULL,
				"/_paysink/ answers loopback clients only");
			resp_json(&out, 403, err_json(&e));
		}
	} else {
		err_set(&e, 404, "invalid_request_error", NULL, NULL,
			"Unrecognized request URL (%s: %.300s). paysink serves /v1/, /pay/ and "
			"/_paysink/.", rq->method, rq->path);
		resp_json(&out, 404, err_json(&e));
	}
	ok = send_resp(mc, &out);
	free(out.body);
	free(out.location);
	return ok;
}

/* a request's start: its target as it came (the request log wants the raw
 * query, which libmicrohttpd parses away); becomes the request's *con_cls */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *mc)
{
	struct ps_req *rq = calloc(1, sizeof *rq);

	(void)cls;
	(void)mc;
	if (rq)
		rq->uri = strdup(uri ? uri : "");
	return rq;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *mc, const char *url,
				 const char *method, const char *version, const char *upload,
				 size_t *upload_size, void **con_cls)
{
	struct ps_req *rq = *con_cls;

	(void)cls;
	(void)version;
	if (!rq)
		return MHD_NO;	/* on_uri found no memory */
	if (!rq->conn) {
		rq->conn = mc;
		rq->method = method;
		snprintf(rq->path, sizeof rq->path, "%s", url);
		rq->loopback = is_loopback(mc);
		*con_cls = rq;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;

		*upload_size = 0;
		if (rq->too_big || rq->len + n > PS_BODY_MAX) {
			rq->too_big = 1;
			return MHD_YES;
		}
		if (rq->len + n + 1 > rq->cap) {
			size_t cap = rq->cap ? rq->cap : 4096;
			char *b;

			while (cap < rq->len + n + 1)
				cap *= 2;
			b = realloc(rq->body, cap);
			if (!b)
				return MHD_NO;
			rq->body = b;
			rq->cap = cap;
		}
		memcpy(rq->body + rq->len, upload, n);
		rq->len += n;
		rq->body[rq->len] = '\0';
		return MHD_YES;
	}
	return dispatch(mc, rq);
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct ps_req *rq = *con_cls;

	(void)cls;
	(void)mc;
	(void)toe;
	if (rq) {
		free(rq->body);
		free(rq->uri);
		free(rq);
		*con_cls = NULL;
	}
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	fprintf(stderr, "paysink: libmicrohttpd: ");
	vfprintf(stderr, fmt, ap);
}

int http_start(int fd, int ipv6, char *cert, char *key)
{
	struct MHD_OptionItem tls[4];
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
			 MHD_USE_POLL | MHD_USE_ERROR_LOG;
	int n = 0;

	if (ipv6)
		flags |= MHD_USE_IPv6;
	if (cert) {
		flags |= MHD_USE_TLS;
		tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, cert };
		tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, key };
		tls[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_PRIORITIES, 0,
						    (void *)PS_TLS_PRIORITIES };
	}
	tls[n] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
	daemon_h = MHD_start_daemon(flags, 0, NULL, NULL, on_access, NULL,
				    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, (void *)NULL,
				    MHD_OPTION_LISTEN_SOCKET, fd,
				    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
				    MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
				    MHD_OPTION_NOTIFY_COMPLETED, on_completed, (void *)NULL,
				    MHD_OPTION_URI_LOG_CALLBACK, on_uri, (void *)NULL,
				    MHD_OPTION_ARRAY, tls,
				    MHD_OPTION_END);
	return daemon_h ? 0 : -1;
}

void http_stop(void)
{
	if (daemon_h)
		MHD_stop_daemon(daemon_h);
	daemon_h = NULL;
}
