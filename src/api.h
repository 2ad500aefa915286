/*
 * api.h: the HTTP intake API without HTTP: one request in, one response out.
 *
 * The server (http.c, libmicrohttpd) turns each request into a struct
 * api_request and sends back the struct api_response that api_handle fills;
 * this module owns routing, who may call what, body checks and the JSON,
 * and reaches the domain through events, orders, scans, queue, token,
 * clientkey (the client Idempotency-Keys) and db.  api_int.h lists its
 * files.
 *
 * Invariants:
 *  - every route names the roles it admits (the table in api.c): a request
 *    to one needs "Authorization: Bearer <token>", a live token whose
 *    SHA-256 the database records (token.h), of one of those roles; the
 *    operator's is admitted everywhere; a refused request writes nothing;
 *  - a door token bound to an event reads and scans that event alone, and
 *    scans only from doors_open_before before it starts to
 *    doors_close_after after;
 *  - POST /v1/orders: the order, its tickets, its outbox rows and the stored
 *    answer (status, body, SHA-256 of the request body) commit in one
 *    transaction; a key is in flight in this process from before that
 *    transaction to after it ends, and a second request with it meanwhile is
 *    409 with Retry-After; "the same request" is the same body bytes;
 *  - only a 201 is stored: a refused order writes nothing, so a client may
 *    fix it and send it again under the same key;
 *  - the token and the ticket key are never logged, stored in the database
 *    or put into a response.
 *
 * Endpoints (roles: O operator, B box_office, D door, M monitor, - public):
 *   POST /v1/events                      O  {"name","venue","starts_at","capacity"} -> 201
 *   GET  /v1/events                      OBM {"events":[...]}
 *   GET  /v1/events/{id}                 OBDM the event with seats sold and remaining,
 *                                           admitted, to come, cancelled
 *   GET  /v1/events/{id}/sales           OB  seats sold hour by hour, and the capacity
 *   GET  /v1/events/{id}/scans           OBD admissions per minute and per door
 *   POST /v1/orders                      OB {"event_id","name","email","seats"} +
 *                                           Idempotency-Key ("abc" or abc: one key)
 *   GET  /v1/orders?recent=N | ?q=TEXT   OB the newest orders, or those an id, an
 *                                           address or a part of a name finds
 *   GET  /v1/orders/{id}                 OB the order: tickets, emails, changes, jobs
 *   PATCH /v1/orders/{id}                OB {"email"}: the buyer's address from now on
 *   POST /v1/orders/{id}/resend          OB the tickets again (Idempotency-Key optional)
 *   POST /v1/orders/{id}/cancel          OB {"reason"}: cancelled once; 409 when a
 *                                           ticket was admitted
 *   GET  /v1/orders/{id}/tickets.pdf     OB the stored PDF (404 until rendered)
 *   POST /v1/scan                        OD {"code","nonce"} -> {"result": admitted|
 *                                           already_scanned|invalid|wrong_event|
 *                                           doors_closed|cancelled, ...}
 *   GET  /v1/jobs?state=&kind=&limit=    O  {"jobs":[...]}
 *   POST /v1/jobs/{job_id}/retry         O  a dead job back (404 when not dead)
 *   GET  /v1/stats                       OM jobs by state and kind, orders, emails, events
 *   GET  /v1/stats/history               OM the queue's last hour, a row a minute
 *   GET  /v1/whoami                      OBDM the token's role, name and event
 *   GET  /healthz                        -  {"ok","db","workers_alive","wal_bytes","disk",
 *                                            "backup"} or 503
 *   GET  /metrics                        -  Prometheus text format 0.0.4 (OM with
 *                                           metrics_auth = on)
 *   GET  /ca.pem                         -  the box CA's certificate (404: none)
 * Errors are JSON {"error": "...", "field": "..."} ("field" only when one
 * input field is at fault).
 */
#ifndef SD_API_H
#define SD_API_H

#include <stddef.h>
#include <stdint.h>

#include "controls.h"
#include "db.h"
#include "event_edit.h"
#include "events.h"
#include "orders.h"
#include "result.h"
#include "scans.h"
#include "schedule.h"
#include "tickets.h"
#include "token.h"

#define API_BODY_MAX (64 * 1024)
#define API_TOKEN_HEX TOKEN_HEX		/* token.h */
#define API_IDEM_TTL_MS_DEFAULT (24LL * 3600 * 1000)
#define API_JOBS_LIMIT_DEFAULT 500		/* GET /v1/jobs rows without ?limit= */
#define API_JOBS_LIMIT_MAX 10000
#define API_RETRY_AFTER_S "1"			/* a key in flight: ask again in 1 s */
#define API_POOL_IDLE_MAX 8			/* idle connections kept for reuse */
#define API_DOORS_OPEN_BEFORE_MS_DEFAULT (3LL * 3600 * 1000)
#define API_SCAN_BURST_DEFAULT 30	/* scans one token may make at once */
#define API_DOORS_CLOSE_AFTER_MS_DEFAULT (6LL * 3600 * 1000)

/* The failpoint passed inside the order transaction, after the order and
 * before its answer is stored: tests hold a request there (failpoint.h). */
#define FP_API_ORDER_TX "api_order_in_tx"

struct api;

struct api_request {
	const char *method;		/* "GET", "POST", ... */
	const char *path;		/* "/v1/orders/T123", without the query */
	const char *query;		/* "state=dead&kind=x", or NULL */
	const char *authorization;	/* the Authorization header, or NULL */
	const char *idempotency_key;	/* the Idempotency-Key header, or NULL */
	const char *content_type;	/* the Content-Type header, or NULL */
	const char *body;		/* body_len bytes, not NUL-terminated; may be NULL */
	size_t body_len;
};

struct api_response {
	int status;
	char content_type[64];		/* "application/json", "application/pdf",
					 * "text/plain; version=0.0.4" */
	char *body;			/* malloc'd (api_response_free); NUL after body_len */
	size_t body_len;
	char retry_after[16];		/* "" or seconds, for 409 */
};

struct api_opts {
	const char *db_path;
	const char *state_dir;		/* NULL or "": the database's folder */
	int64_t idem_ttl_ms;		/* how long a key is kept; 0: 24 h */
	int (*workers_alive)(void *arg);/* for /healthz; NULL: unknown */
	void *arg;
	int64_t disk_warn_bytes;	/* /healthz fails below this free; 0: 512 MiB */
	const char *backup_dir;		/* run's periodic backups; NULL or "": none */
	int64_t backup_interval_ms;	/* between them (backup_sched.h: when stale) */
	int metrics_auth;		/* 1: /metrics needs a monitor (or operator) token */
	int64_t doors_open_before_ms;	/* a bound door token scans from this long before
					 * its event starts; 0: 3 h */
	int64_t doors_close_after_ms;	/* until this long after; 0: 6 h */
	const char *ca_file;		/* the box CA served at /ca.pem; NULL or "": 404 */
	int64_t resend_per_hour;	/* an order's resends at most (429 past it); 0: no limit */
	int64_t resend_per_day;
	int64_t scan_rate;		/* scans a second one token makes, on average (429
					 * past it); 0: no limit */
	int64_t scan_burst;		/* and at once; 0: API_SCAN_BURST_DEFAULT */
};

/*
 * api_open: the API on an existing database: loads ticket.key (made by
 * init) and opens the first pooled connection; requests are admitted by the
 * tokens the database records (token.h).
 * [out] *out (api_close).
 */
enum sd_result api_open(const struct api_opts *o, struct api **out);
void api_close(struct api *a);

/*
 * api_handle: answer one request.  Thread-safe: each call borrows its own
 * connection from a pool.  [out] res is always filled (an internal failure is
 * a 500 JSON error); release it with api_response_free.
 */
void api_handle(struct api *a, const struct api_request *req, struct api_response *res);
void api_response_free(struct api_response *res);

/* api_order_json_text: the order as GET /v1/orders/{id} answers it, indented
 * (`order show --json` prints the same).  [out] malloc'd; NULL: no memory. */
char *api_order_json_text(const struct order_detail *d);

/* api_event_json_text: the event as GET /v1/events/{id} answers it;
 * api_events_text: every event as GET /v1/events does (the caller frees
 * both; `event show --json`, `event ls --json`). */
char *api_event_json_text(const struct event_view *v);

/* api_event_runs_text: the event with its runs, as GET /v1/events/{id}
 * answers it, into [out] *out (free()). */
enum sd_result api_event_runs_text(struct db *db, int64_t id, char **out);
enum sd_result api_events_text(struct db *db, char **out);


/* ---- the pure layer: no database, no allocation kept (fuzzed) --------- */

/* What a parse refused: a message and the field at fault ("" when none). */
struct api_error {
	char msg[256];
	char field[32];
};

/* An order as parsed; strings point into json, which the caller frees
 * (json_decref) when done with them. */
struct api_order {
	struct order_new o;	/* idempotency_key left NULL */
	void *json;		/* json_t * holding the strings */
};

struct api_event {
	struct event_new e;
	void *json;
};

/* PATCH /v1/events/{id}: the fields given, their strings in json. */
struct api_event_change {
	struct event_change c;
	void *json;
};

/* A scan as parsed: the code ("" when too long: it scans as invalid) and
 * the door's nonce ("" when none). */
struct api_scan {
	char code[CODE_TEXT_MAX];
	char nonce[SCAN_NONCE_MAX + 1];
};

/*
 * api_parse_order / api_parse_event / api_parse_scan: check a request body
 * (len bytes, need not be NUL-terminated) field by field as order_add,
 * event_add and ticket_scan would, without a database.  SD_INVALID with err
 * naming the field (SD_NOMEM when memory ran out); on success release
 * out->json with api_parse_free.
 * api_parse_scan copies the code and the nonce ("" when none) into out.
 */
enum sd_result api_parse_order(const char *body, size_t len, struct api_order *out,
			       struct api_error *err);
enum sd_result api_parse_event(const char *body, size_t len, struct api_event *out,
			       struct api_error *err);
enum sd_result api_parse_event_change(const char *body, size_t len,
				      struct api_event_change *out, struct api_error *err);
enum sd_result api_parse_scan(const char *body, size_t len, struct api_scan *out,
			      struct api_error *err);
/* api_parse_email: PATCH /v1/orders/{id}'s {"email"}, an address. */
enum sd_result api_parse_email(const char *body, size_t len, char email[256],
			       struct api_error *err);
/* api_parse_resend: no body, or a JSON object with no field (a resend takes
 * none); anything else is SD_INVALID naming what. */
enum sd_result api_parse_resend(const char *body, size_t len, struct api_error *err);

/* api_parse_cancel: {"reason"} (optional, and so is the body) into reason
 * ("" when none). */
enum sd_result api_parse_cancel(const char *body, size_t len,
				char reason[ORDER_REASON_MAX + 1], struct api_error *err);
/* api_parse_limits: PUT /v1/kinds/{kind}/limits's {"rate": "10/s burst 20",
 * "concurrency": N, "box_concurrency": N}, each optional (absent, null or
 * 0: none), into l. */
enum sd_result api_parse_limits(const char *body, size_t len, struct control_limits *l,
				struct api_error *err);
/* api_parse_schedule: POST /v1/schedules's {"name", "kind", "every": "5m",
 * "payload": {...} (optional), "missed": "once|skip" (optional)} into s;
 * s->payload is malloc'd (free()) or NULL. */
enum sd_result api_parse_schedule(const char *body, size_t len, struct schedule *s,
				  struct api_error *err);
void api_parse_free(void *json);

/* api_key_valid: an Idempotency-Key: 1..TICKETS_KEY_MAX printable ASCII, no space. */
int api_key_valid(const char *key);

/* api_key_parse: the key an Idempotency-Key header names, as a structured
 * field string ("abc", \" and \\ escaped) or bare (abc): both give abc.
 * 1 with the key in key, 0 when the header is malformed or the key is not
 * api_key_valid. */
int api_key_parse(const char *hdr, char key[TICKETS_KEY_MAX + 1]);

/* api_content_type_json: 1 for "application/json", any case, parameters allowed. */
int api_content_type_json(const char *content_type);

/* api_query_get: the percent-decoded value of name in query ("a=1&b=2") into
 * buf; 1 when found, 0 when absent, -1 when malformed or too long. */
int api_query_get(const char *query, const char *name, char *buf, size_t size);


#endif
