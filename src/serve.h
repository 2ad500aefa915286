/*
 * serve.h: the HTTP API and dashboard (http.h in front of api.h) in this
 * process, for `stagedoor serve` (a child of `run`) and `stagedoor demo`.
 */
#ifndef SD_SERVE_H
#define SD_SERVE_H

#include <stdint.h>

#include "result.h"

struct serve;

struct serve_opts {
	const char *db_path;
	const char *state_dir;		/* NULL or "": the database's folder */
	const char *listen;		/* "127.0.0.1:8080", ":0" */
	int64_t key_ttl_ms;		/* client Idempotency-Keys kept; 0: the default */
	int64_t disk_warn_bytes;	/* /healthz fails below this free; 0: the default */
	int supervised;			/* /healthz counts the worker processes beside
					 * this one (children of the same `run`); 0:
					 * it reports them unknown */
	const char *backup_dir;		/* run's periodic backups; NULL: none */
	int64_t backup_interval_ms;
	const char *tls_cert;		/* http_tls_cert; NULL: plain HTTP (loopback only) */
	const char *tls_key;		/* http_tls_key */
	const char *hosts;		/* http_hosts, by commas; NULL: the listener's address,
					 * localhost and the certificate's names */
	int per_client_max;		/* 0: the server's default */
	int metrics_auth;		/* 1: /metrics needs a monitor token */
	int64_t doors_open_before_ms;	/* 0: the API's default */
	int64_t doors_close_after_ms;
	int64_t resend_per_hour;	/* an order's resends at most; 0: no limit */
	int64_t resend_per_day;
	int64_t scan_rate;		/* one door token's scans a second; 0: no limit */
	int64_t scan_burst;
};

/*
 * serve_start: make the API token when missing (<state dir>/api.token), open
 * the API on the database and listen.  [out] *out (serve_stop).
 */
enum sd_result serve_start(const struct serve_opts *o, struct serve **out);

/* serve_port: the port it listens on. */
int serve_port(const struct serve *s);

/* serve_stop: finish the requests in progress, close; accepts NULL. */
void serve_stop(struct serve *s);

/* serve_renew_warn: a warning in the log from CERT_RENEW_WARN_DAYS before
 * the certificate expires: serve_start says it, and `serve` again every
 * SERVE_CERT_CHECK_S */
#define SERVE_CERT_CHECK_S 86400
void serve_renew_warn(const char *cert);

#endif
