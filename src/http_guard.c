/*
 * http_guard.c: a request's head judged before any asset or handler
 * (http_guard.h).
 *
 * Invariants: a request any check refuses reaches no handler; the checks
 * read the header values by their lengths, never as C strings, until a
 * value is known to hold no NUL.
 */
#define _GNU_SOURCE
#include "http_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * host_split: the name of a Host value ("box:8080", "[::1]:8080", "Box.")
 * into out (size HTTP_HOST_MAX): lowercased, IPv6 brackets and one trailing
 * dot off.  [in] bare6: a bare IPv6 address ("::1") is a name, not
 * name:port (opts->hosts entries).  [out] *port: the port, -1 when none.
 * 0, or -1 when v is no name.
 */
static int host_split(const char *v, char *out, int bare6, long *port)
{
	struct in6_addr a6;
	const char *end, *rest;
	int bracket = v[0] == '[';
	size_t n, i;

	*port = -1;
	if (bracket) {
		if (!(end = strchr(v, ']')))
			return -1;
		v++;
		rest = end + 1;
	} else if (bare6 && strchr(v, ':') != strrchr(v, ':')) {
		end = rest = v + strlen(v);
	} else {
		end = rest = v + strcspn(v, ":");
	}
	n = (size_t)(end - v);
	if (n == 0 || n >= HTTP_HOST_MAX)
		return -1;
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)v[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == ':'))
			return -1;
		out[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
	}
	out[n] = '\0';
	if (n > 1 && out[n - 1] == '.')
		out[--n] = '\0';
	if ((bracket || strchr(out, ':')) && inet_pton(AF_INET6, out, &a6) != 1)
		return -1;	/* brackets and ':' only for an IPv6 address */
	if (*rest) {
		char *e;

		if (rest[0] != ':' || rest[1] < '0' || rest[1] > '9' || strlen(rest) > 6)
			return -1;
		*port = strtol(rest + 1, &e, 10);
		if (*e || *port > 65535)
			return -1;
	}
	return 0;
}

/* host_equal: two normalized names; IP addresses compared as addresses. */
static int host_equal(const char *a, const char *b)
{
	unsigned char x[16], y[16];

	if (inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, b, y) == 1)
		return memcmp(x, y, 16) == 0;
	if (inet_pton(AF_INET, a, x) == 1 && inet_pton(AF_INET, b, y) == 1)
		return memcmp(x, y, 4) == 0;
	return strcmp(a, b) == 0;
}

/* host_allowed: name (normalized) is one of this box's names for a
 * connection that reached local */
static int host_allowed(const struct http_names *s, const char *local, const char *name)
{
	static const char *const defaults[] = { "localhost", "127.0.0.1", "::1", NULL };
	const char *const *h = s->hosts ? (const char *const *)s->hosts : defaults;

	for (; *h; h++)
		if (host_equal(name, *h))
			return 1;
	if (s->hosts)
		return 0;
	for (h = (const char *const *)s->extra; h && *h; h++)
		if (host_equal(name, *h))
			return 1;
	return local && local[0] && host_equal(name, local);
}

/* origin_allowed: an Origin value is this box's own origin. */
static int origin_allowed(const struct http_names *s, const char *local, const char *origin)
{
	const char *scheme = s->tls ? "https://" : "http://";
	size_t sl = strlen(scheme);
	char name[HTTP_HOST_MAX];
	long port;

	if (s->origin && strcasecmp(origin, s->origin) == 0)
		return 1;	/* the public origin of a listener behind a proxy */
	if (strncasecmp(origin, scheme, sl) != 0)
		return 0;	/* "null", the other scheme, anything else */
	origin += sl;
	if (strpbrk(origin, "/?#@ ") || host_split(origin, name, 0, &port) != 0)
		return 0;
	if (port < 0)
		port = s->tls ? 443 : 80;
	return port == s->port && host_allowed(s, local, name);
}

/* ---- the head's syntax ---------------------------------------------------- */

#define ONCE(h) { h, "{\"error\":\"more than one " h " header\",\"field\":\"" h "\"}", \
		  "{\"error\":\"the " h " header holds a control byte\",\"field\":\"" h "\"}" }
enum { H_HOST, H_AUTHORIZATION, H_IDEMPOTENCY_KEY, H_ORIGIN, H_CONTENT_LENGTH, H_CONTENT_TYPE,
       H_TRANSFER_ENCODING, H_ONCE };
static const struct {
	const char *name, *twice, *control;
} once[H_ONCE] = {
	ONCE("Host"), ONCE("Authorization"), ONCE("Idempotency-Key"), ONCE("Origin"),
	ONCE("Content-Length"), ONCE("Content-Type"), ONCE("Transfer-Encoding"),
};
#undef ONCE

static const char CONTROL[] = "{\"error\":\"a header holds a control byte\"}";
static const char TOO_MANY[] = "{\"error\":\"too many header fields\"}";
static const char HOST_MISSING[] =
	"{\"error\":\"an HTTP/1.1 request needs a Host header\",\"field\":\"Host\"}";
static const char HOST_BAD[] =
	"{\"error\":\"the Host header names no name of this box\",\"field\":\"Host\"}";
static const char ORIGIN_BAD[] = "{\"error\":\"cross-origin request refused\",\"field\":\"Origin\"}";
static const char FRAMED_TWICE[] =
	"{\"error\":\"Transfer-Encoding and Content-Length together: send one\","
	"\"field\":\"Transfer-Encoding\"}";
static const char CODING_UNKNOWN[] =
	"{\"error\":\"only the chunked transfer coding is understood\","
	"\"field\":\"Transfer-Encoding\"}";

/* has_control: bytes below 0x20 but a tab, and DEL (RFC 9110 5.5) */
static int has_control(const char *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (((unsigned char)v[i] < 0x20 && v[i] != '\t') || (unsigned char)v[i] == 0x7f)
			return 1;
	return 0;
}

/* syntax: control bytes and repeated headers; [out] at[k]: the once-only
 * header k's value (NULL: absent).  0, or the status with *json. */
static int syntax(const struct http_head *head, const char *at[H_ONCE], const char **json)
{
	int count[H_ONCE] = { 0 };
	size_t i;
	int k;

	if (head->n > HTTP_GUARD_HEADERS_MAX) {
		*json = TOO_MANY;
		return 431;
	}
	for (i = 0; i < head->n; i++) {
		const struct http_header *h = &head->h[i];

		for (k = 0; k < H_ONCE && strcasecmp(h->name, once[k].name) != 0; k++)
			;
		if (has_control(h->value, h->value_len) || has_control(h->name, strlen(h->name))) {
			*json = k < H_ONCE ? once[k].control : CONTROL;
			return 400;
		}
		if (k == H_ONCE)
			continue;
		if (++count[k] > 1) {
			*json = once[k].twice;
			return 400;
		}
		at[k] = h->value;
	}
	return 0;
}

/* framing: one way to find the body's end */
static int framing(const char *te, const char *cl, const char **json)
{
	if (!te)
		return 0;
	if (cl) {
		*json = FRAMED_TWICE;
		return 400;
	}
	if (strcasecmp(te, "chunked") != 0) {
		*json = CODING_UNKNOWN;
		return 501;
	}
	return 0;
}

int http_guard(const struct http_names *names, const struct http_head *head,
	       const char **json)
{
	const char *at[H_ONCE] = { NULL };
	char name[HTTP_HOST_MAX];
	long port;
	int status;

	if ((status = syntax(head, at, json)) != 0 ||
	    (status = framing(at[H_TRANSFER_ENCODING], at[H_CONTENT_LENGTH], json)) != 0)
		return status;
	/* HTTP/1.0 has no Host to send */
	if (!at[H_HOST] && strcmp(head->version, "HTTP/1.0") != 0) {
		*json = HOST_MISSING;
		return 400;
	}
	if (at[H_HOST] && (host_split(at[H_HOST], name, 0, &port) != 0 ||
			   !host_allowed(names, head->local, name))) {
		*json = HOST_BAD;
		return 421;
	}
	if (strcmp(head->method, "GET") == 0 || strcmp(head->method, "HEAD") == 0 ||
	    strcmp(head->method, "OPTIONS") == 0)
		return 0;
	if (at[H_ORIGIN] && !origin_allowed(names, head->local, at[H_ORIGIN])) {
		*json = ORIGIN_BAD;
		return 403;
	}
	return 0;
}

/* ---- the names list ---------------------------------------------------- */

enum sd_result http_names_copy(const char *const *names, int empty_ok, char ***out)
{
	size_t n = 0, i;

	if (!names)
		return SD_OK;
	while (names[n])
		n++;
	if (n == 0 && !empty_ok)
		return err_set(SD_INVALID, "http: the list of host names is empty");
	if (!(*out = calloc(n + 1, sizeof **out)))
		return err_set(SD_NOMEM, "http: out of memory");
	for (i = 0; i < n; i++) {
		char name[HTTP_HOST_MAX];
		long port;

		if (host_split(names[i], name, 1, &port) != 0 || port >= 0)
			return err_set(SD_INVALID,
				       "http: host name \"%s\": want a name or an address, no port",
				       names[i]);
		if (!((*out)[i] = strdup(name)))
			return err_set(SD_NOMEM, "http: out of memory");
	}
	return SD_OK;
}

void http_names_free(char **names)
{
	size_t i;

	for (i = 0; names && names[i]; i++)
		free(names[i]);
	free(names);
}

