/*
 * httpc.h: one HTTPS request to a provider (libcurl; with mail_curl.c, the
 * only files that see it: that one speaks SMTP, this one HTTP).
 *
 * Every request: TLS 1.2 or later with the peer and its name verified (a
 * CA file of the box's own, or the system's store), no redirect followed,
 * no signal, a connect and a total timeout, an answer kept up to
 * HTTPC_BODY_MAX bytes.  Plain http:// only to a loopback address (a
 * provider run on the box itself for tests and offline demos, such as
 * tools/paysink): a key never crosses a network in the clear.
 */
#ifndef SD_HTTPC_H
#define SD_HTTPC_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

#define HTTPC_BODY_MAX (1024 * 1024)	/* an answer's bytes kept at most */
#define HTTPC_RETRY_AFTER_MAX_S 3600	/* a longer Retry-After is capped */
#define HTTPC_WHERE_MAX 300

struct httpc_req {
	const char *method;		/* "GET", "POST" */
	const char *url;		/* checked by httpc_url_check */
	const char *const *headers;	/* "Name: value" each, NULL-terminated; may be NULL */
	const char *body;		/* POST: body_len bytes; may be NULL */
	size_t body_len;
	const char *ca_file;		/* PEM; NULL: the system's store */
	long connect_timeout_ms;	/* 0: 5000 */
	long timeout_ms;		/* the whole request; 0: 30000 */
	const char *what;		/* "mail API mail.example:443", for messages */
};

struct httpc_res {
	long status;			/* the HTTP status */
	char *body;			/* NUL-terminated (httpc_res_free); may be NULL */
	size_t len;
	int64_t retry_after_ms;		/* from Retry-After; 0: none */
	int replayed;			/* "Idempotent-Replayed: true": an earlier
					 * request's answer, for the same key */
};

/* httpc_init: libcurl's global set-up, once per process (thread-safe).
 * SD_IO when libcurl cannot start. */
enum sd_result httpc_init(void);

/*
 * httpc_url_check: url is https://, or http:// to a loopback address
 * (127.0.0.0/8, [::1], localhost), with no user, password or fragment.
 * [out] where (may be NULL; HTTPC_WHERE_MAX): "host:port" for messages.
 * SD_INVALID saying what is wrong.
 */
enum sd_result httpc_url_check(const char *url, char *where, size_t size);

/*
 * httpc_do: one request.  SD_OK for any HTTP answer, whatever its status
 * ([out] *res; httpc_res_free).  SD_IO when no answer came: cannot connect,
 * a certificate refused, a TLS failure, a timeout, the connection cut (a
 * POST may then have reached the provider: a retry must carry the same
 * idempotency key).  SD_NOMEM.  The message names q->what.
 */
enum sd_result httpc_do(const struct httpc_req *q, struct httpc_res *res);

void httpc_res_free(struct httpc_res *res);

/* httpc_lib_version: libcurl's version as linked ("7.88.1"). */
const char *httpc_lib_version(void);

#endif
