/*
 * api_int.h: what the API's files share and nobody else sees (api.h is the
 * API's face).
 *
 * The API is one module in several files, one concern each:
 *   api.c         opening, the connection pool, the route table (every
 *                 route's access at a glance) and the router
 *   api_res.c     responses: JSON answers and errors
 *   api_parse.c   the pure layer: bodies, headers, queries (fuzzed)
 *   api_auth.c    who is asking: the bearer token's grant, the roles a
 *                 route admits, the door's event
 *   api_events.c  events, their sales by the hour, the door's scans
 *   api_orders.c  orders (the client Idempotency-Key, clientkey.h), the lists,
 *                 the search, an order's detail and its PDF
 *   api_changes.c an order's changes: resend, a new address, cancel
 *   api_jobs.c    the stream's jobs and the dead letters
 *   api_status.c  /v1/stats, /healthz, /metrics, /ca.pem
 */
#ifndef SD_API_INT_H
#define SD_API_INT_H

#include <jansson.h>
#include <limits.h>
#include <pthread.h>

#include "api.h"
#include "code.h"
#include "orders.h"
#include "ratelimit.h"
#include "token.h"

#define API_CA_MAX (64 * 1024)	/* bytes of ca.pem served */

struct api {
	char db_path[PATH_MAX];
	unsigned char key[CODE_KEY_LEN];	/* ticket.key, for scans */
	struct blob_store *blobs;		/* <state dir>/blobs: the PDFs */
	int64_t idem_ttl_ms;
	int (*workers_alive)(void *arg);
	void *arg;
	struct metrics *metrics;		/* the workers' counters; NULL: none */
	char state_dir[PATH_MAX];		/* as given; "": the database's folder */
	int64_t disk_warn_bytes;		/* 0: MAINT_DISK_WARN_BYTES_DEFAULT */
	char backup_dir[PATH_MAX];		/* "": no periodic backups */
	int64_t backup_interval_ms;
	int metrics_auth;			/* /metrics needs a monitor token */
	int64_t doors_open_before_ms;		/* a bound door token's window */
	int64_t doors_close_after_ms;
	char ca_path[PATH_MAX];			/* the box CA, served at /ca.pem; "": none */
	struct order_resend_limit resend_limit;	/* an order's resends at most */
	struct db_group *group;			/* orders and changes commit in groups;
						 * NULL on PostgreSQL */
	struct rate *scan_rate;			/* each token's scans (ratelimit.h) */
	int64_t scans_limited;			/* scans refused by it (atomic) */

	pthread_mutex_t mu;			/* guards idle[] and inflight[] */
	struct db *idle[API_POOL_IDLE_MAX];	/* connections not in use */
	int n_idle;
	char **inflight;			/* client keys whose request runs now */
	int n_inflight, cap_inflight;
};

/* What a handler gets: the request, the path's {id} segment, a connection,
 * and who is asking. */
struct call {
	struct api *a;
	const struct api_request *req;
	struct api_response *res;
	const char *id;		/* the decoded {id} of the route, or NULL */
	struct db *db;
	struct token_grant grant;	/* the token's; role TOKEN_NONE: no token needed */
};

/* ---- responses (api_res.c) ----------------------------------------------- */

/* api_res_set: status, type and body (malloc'd; taken). */
void api_res_set(struct api_response *res, int status, const char *type, char *body,
		 size_t len);
/* api_res_json: status with o as the body; takes o. */
void api_res_json(struct api_response *res, int status, json_t *o);
/* api_res_fail: {"error": msg, "field": field} ("field" when not NULL/""). */
void api_res_fail(struct api_response *res, int status, const char *msg, const char *field);
/* api_res_internal: a failure of the database or the system, logged once
 * (the path only), answered 503 (busy, disk) or 500 without the detail. */
void api_res_internal(struct api_response *res, const struct api_request *req,
		      enum sd_result r);
/* api_json_text: a JSON string from text that may hold broken UTF-8. */
json_t *api_json_text(const char *s);
/* api_json_take: o as compact JSON text (free()); takes o; NULL: no memory. */
char *api_json_take(json_t *o);
/* api_utc_text: ms since the epoch as "2026-12-31T20:00:00Z". */
void api_utc_text(int64_t ms, char *buf, size_t size);
/* api_bad_body: a body the parser refused: 400 naming the field (500 for memory). */
void api_bad_body(struct call *c, enum sd_result r, const struct api_error *err);
/* api_parse_id: a positive decimal id of at most 18 digits. */
int api_parse_id(const char *s, int64_t *id);

/* ---- who is asking (api_auth.c) ------------------------------------------ */

/* The roles a route admits, one bit each (token.h's roles); the operator
 * is admitted everywhere. */
#define API_PUBLIC 0
#define API_OPERATOR (1 << TOKEN_OPERATOR)
#define API_BOX_OFFICE (1 << TOKEN_BOX_OFFICE)
#define API_DOOR (1 << TOKEN_DOOR)
#define API_MONITOR (1 << TOKEN_MONITOR)
#define API_METRICS (1 << 8)	/* public unless metrics_auth: then monitor */

/* api_auth_admit: does the request's token carry one of the roles? 1, with
 * c->grant filled; 0 with the refusal (401 no or a dead token, 403 a token
 * without the role) in c->res. */
int api_auth_admit(struct call *c, int roles);

/* ---- the endpoints -------------------------------------------------------- */

void api_post_event(struct call *c);
void api_get_events(struct call *c);
void api_get_event(struct call *c);
void api_patch_event(struct call *c);
void api_post_event_close(struct call *c);
void api_post_event_cancel(struct call *c);
void api_post_scan(struct call *c);
void api_post_order(struct call *c);
void api_get_orders(struct call *c);
void api_get_order(struct call *c);
void api_get_order_pdf(struct call *c);
void api_get_jobs(struct call *c);
void api_post_retry(struct call *c);

/* ---- the queue's controls (api_controls.c) -------------------------------- */

void api_get_controls(struct call *c);
void api_post_pause(struct call *c);
void api_post_resume(struct call *c);
void api_put_limits(struct call *c);
void api_post_job_cancel(struct call *c);
void api_get_schedules(struct call *c);
void api_post_schedule(struct call *c);
void api_delete_schedule(struct call *c);
void api_get_stats(struct call *c);
void api_get_healthz(struct call *c);
void api_get_metrics(struct call *c);
void api_get_ca(struct call *c);
void api_get_whoami(struct call *c);
void api_get_event_scans(struct call *c);
void api_get_event_sales(struct call *c);
void api_post_resend(struct call *c);
void api_patch_order(struct call *c);
void api_post_cancel(struct call *c);
void api_get_history(struct call *c);

/*
 * A write made once per client key: api_keyed_write checks the
 * Idempotency-Key (required or not), holds it in flight in this process,
 * and in one transaction looks up the answer stored under it (a replay, or
 * 422 for another body), else runs write and stores its 2xx answer under
 * the key.  write fills *status and *body (malloc'd JSON); refused turns a
 * failure into the answer.  body_only: "the same request" is the same body
 * (POST /v1/orders); else the same method, path and body.
 */
struct api_keyed {
	enum sd_result (*write)(struct call *c, void *arg, int *status, char **body);
	void *arg;
	void (*refused)(struct call *c, enum sd_result r);
	int key_required;
	int body_only;
};

void api_keyed_write(struct call *c, const struct api_keyed *k);

/* api_order_json: the order as GET /v1/orders/{id} answers it. */
json_t *api_order_json(const struct order_detail *d);

/* api_order_id_valid: an {id} that can be an order's public id, in any case
 * (order_id_norm's rule). */
int api_order_id_valid(const char *s);

/* api_order_of_call: the order the route's {id} names: 1 with *d
 * (order_detail_free), 0 with the answer (404, 500) in c->res. */
int api_order_of_call(struct call *c, struct order_detail **d);

/* api_events_list: [out] *out, every event's api_event_json, by id. */
enum sd_result api_events_list(struct db *db, json_t **out);

/* api_event_json: an event with its seats sold and remaining. */
json_t *api_event_json(const struct event_view *v);

struct event_run_view;

/* api_run_json: a whole-event run (event_runs.h) and its progress. */
json_t *api_run_json(const struct event_run_view *r);

/* api_time_or_null: key in o, ms as UTC text, or null for 0.  0, or -1
 * when out of memory. */
int api_time_or_null(json_t *o, const char *key, int64_t ms);

/* api_amount_set: "amount" ("50.00"), "amount_minor" and "currency" in o,
 * what an order was charged.  0, or -1 when out of memory. */
int api_amount_set(json_t *o, int64_t minor, const char *currency);

/* api_price_set: "price" ("25.00"), "price_minor" and "currency" in o,
 * nulls when currency is "" (no price).  0, or -1 when out of memory. */
int api_price_set(json_t *o, int64_t minor, const char *currency);

/* api_pct_decode: percent-decode s[0..n) into buf; -1 when malformed, too
 * long or it holds a NUL (api_parse.c). */
int api_pct_decode(const char *s, size_t n, int plus_space, char *buf, size_t size);

#endif
