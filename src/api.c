/*
 * api.c: the intake API without HTTP (see api.h for the endpoints and the
 * invariants, api_int.h for the module's files): opening, the connection
 * pool, the route table and the router.
 *
 * A request runs on the calling server thread with a connection borrowed
 * from the pool (FULL durability: orders are accepted on it) and returned
 * outside any transaction.  The route table below is the one place that
 * says who may call what: each route names the roles it admits
 * (api_auth.c checks them), and the operator is admitted everywhere.
 */
#define _GNU_SOURCE
#include "api.h"
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backup_sched.h"
#include "blob.h"
#include "db_group.h"
#include "log.h"
#include "metrics.h"
#include "statedir.h"

/* ======================== the pool ======================================= */

static enum sd_result pool_get(struct api *a, struct db **db)
{
	*db = NULL;
	pthread_mutex_lock(&a->mu);
	if (a->n_idle)
		*db = a->idle[--a->n_idle];
	pthread_mutex_unlock(&a->mu);
	if (*db)
		return SD_OK;
	return db_open(a->db_path, 0, DB_SYNC_FULL, db);
}

static void pool_put(struct api *a, struct db *db)
{
	if (!db)
		return;
	if (db_in_tx(db))	/* never happens on a clean path; never reuse one */
		db_rollback(db);
	pthread_mutex_lock(&a->mu);
	if (a->n_idle < API_POOL_IDLE_MAX) {
		a->idle[a->n_idle++] = db;
		db = NULL;
	}
	pthread_mutex_unlock(&a->mu);
	db_close(db);
}

/* ======================== open and close ================================= */

enum sd_result api_open(const struct api_opts *o, struct api **out)
{
	struct api *a;
	struct db *db = NULL;
	char path[PATH_MAX + 16];
	enum sd_result r;

	*out = NULL;
	if (!o || !o->db_path)
		return err_set(SD_INVALID, "api_open: no database path");
	if (!(a = calloc(1, sizeof *a)))
		return err_set(SD_NOMEM, "out of memory");
	pthread_mutex_init(&a->mu, NULL);
	if ((size_t)snprintf(a->db_path, sizeof a->db_path, "%s", o->db_path) >=
	    sizeof a->db_path) {
		r = err_set(SD_INVALID, "database path too long");
		goto fail;
	}
	a->idem_ttl_ms = o->idem_ttl_ms > 0 ? o->idem_ttl_ms : API_IDEM_TTL_MS_DEFAULT;
	a->workers_alive = o->workers_alive;
	a->arg = o->arg;
	a->disk_warn_bytes = o->disk_warn_bytes;
	snprintf(a->backup_dir, sizeof a->backup_dir, "%s", o->backup_dir ? o->backup_dir : "");
	a->backup_interval_ms = o->backup_interval_ms > 0 ? o->backup_interval_ms
				: BACKUP_SCHED_INTERVAL_MS_DEFAULT;
	snprintf(a->state_dir, sizeof a->state_dir, "%s", o->state_dir ? o->state_dir : "");
	snprintf(a->ca_path, sizeof a->ca_path, "%s", o->ca_file ? o->ca_file : "");
	a->metrics_auth = o->metrics_auth;
	a->resend_limit.per_hour = o->resend_per_hour;
	a->resend_limit.per_day = o->resend_per_day;
	a->doors_open_before_ms = o->doors_open_before_ms > 0 ? o->doors_open_before_ms
				  : API_DOORS_OPEN_BEFORE_MS_DEFAULT;
	a->doors_close_after_ms = o->doors_close_after_ms > 0 ? o->doors_close_after_ms
				  : API_DOORS_CLOSE_AFTER_MS_DEFAULT;
	if ((r = code_key_path(o->db_path, o->state_dir, path, sizeof path)) != SD_OK ||
	    (r = code_key_load(path, a->key)) != SD_OK)
		goto fail;
	if ((r = statedir_blobs_open(o->db_path, o->state_dir, &a->blobs)) != SD_OK ||
	    (r = db_group_new(o->db_path, &a->group)) != SD_OK ||
	    (r = rate_new(o->scan_rate, o->scan_burst > 0 ? o->scan_burst : API_SCAN_BURST_DEFAULT,
			  &a->scan_rate)) != SD_OK)
		goto fail;
	/* the first connection: the database exists and its schema is ours */
	if ((r = pool_get(a, &db)) != SD_OK)
		goto fail;
	pool_put(a, db);
	/* without the workers' counters /metrics still answers the rest */
	if (metrics_open(o->db_path, &a->metrics) != SD_OK)
		log_event(LOG_WARN, "metrics not read", "err=%s", err_msg());
	*out = a;
	return SD_OK;
fail:
	api_close(a);
	return r;
}

void api_close(struct api *a)
{
	int i;

	if (!a)
		return;
	for (i = 0; i < a->n_idle; i++)
		db_close(a->idle[i]);
	for (i = 0; i < a->n_inflight; i++)
		free(a->inflight[i]);
	free(a->inflight);
	blob_close(a->blobs);
	db_group_free(a->group);
	rate_free(a->scan_rate);
	metrics_close(a->metrics);
	pthread_mutex_destroy(&a->mu);
	explicit_bzero(a->key, sizeof a->key);
	free(a);
}

/* ======================== the router ===================================== */

enum route_flags {
	R_BODY = 1,	/* takes a JSON body */
	R_NODB = 2,	/* a failing database is this handler's answer, not a 500 */
	R_OPT_BODY = 4,	/* takes a JSON body, or none */
};

struct route {
	const char *method;
	const char *pattern;	/* segments; "*" matches one {id} */
	int roles;		/* API_PUBLIC, or the roles admitted (operator: always) */
	int flags;
	void (*fn)(struct call *c);
};

#define BO API_BOX_OFFICE
#define DOOR API_DOOR
#define MON API_MONITOR
#define OP API_OPERATOR

/* Every route and who may call it.  A door token sees its own event only
 * (api_get_event); /metrics is public unless metrics_auth = on. */
static const struct route routes[] = {
	{ "GET", "/healthz", API_PUBLIC, R_NODB, api_get_healthz },
	{ "GET", "/metrics", API_METRICS, 0, api_get_metrics },
	{ "GET", "/ca.pem", API_PUBLIC, R_NODB, api_get_ca },
	{ "GET", "/v1/whoami", OP | BO | DOOR | MON, 0, api_get_whoami },
	{ "POST", "/v1/events", OP, R_BODY, api_post_event },
	{ "GET", "/v1/events", OP | BO | MON, 0, api_get_events },
	{ "GET", "/v1/events/*", OP | BO | DOOR | MON, 0, api_get_event },
	{ "PATCH", "/v1/events/*", OP, R_BODY, api_patch_event },
	{ "POST", "/v1/events/*/close", OP, 0, api_post_event_close },
	{ "POST", "/v1/events/*/cancel", OP, R_BODY, api_post_event_cancel },
	{ "GET", "/v1/events/*/sales", OP | BO, 0, api_get_event_sales },
	{ "GET", "/v1/events/*/scans", OP | BO | DOOR, 0, api_get_event_scans },
	{ "POST", "/v1/orders", OP | BO, R_BODY, api_post_order },
	{ "GET", "/v1/orders", OP | BO, 0, api_get_orders },
	{ "GET", "/v1/orders/*", OP | BO, 0, api_get_order },
	{ "PATCH", "/v1/orders/*", OP | BO, R_BODY, api_patch_order },
	{ "GET", "/v1/orders/*/tickets.pdf", OP | BO, 0, api_get_order_pdf },
	{ "POST", "/v1/orders/*/resend", OP | BO, R_OPT_BODY, api_post_resend },
	{ "POST", "/v1/orders/*/cancel", OP | BO, R_OPT_BODY, api_post_cancel },
	{ "POST", "/v1/scan", OP | DOOR, R_BODY, api_post_scan },
	{ "GET", "/v1/jobs", OP, 0, api_get_jobs },
	{ "POST", "/v1/jobs/*/retry", OP, 0, api_post_retry },
	{ "POST", "/v1/jobs/*/cancel", OP, 0, api_post_job_cancel },
	{ "GET", "/v1/controls", OP | MON, 0, api_get_controls },
	{ "POST", "/v1/kinds/*/pause", OP, 0, api_post_pause },
	{ "POST", "/v1/kinds/*/resume", OP, 0, api_post_resume },
	{ "PUT", "/v1/kinds/*/limits", OP, R_BODY, api_put_limits },
	{ "GET", "/v1/schedules", OP | MON, 0, api_get_schedules },
	{ "POST", "/v1/schedules", OP, R_BODY, api_post_schedule },
	{ "DELETE", "/v1/schedules/*", OP, 0, api_delete_schedule },
	{ "GET", "/v1/stats", OP | MON, 0, api_get_stats },
	{ "GET", "/v1/stats/history", OP | MON, 0, api_get_history },
	{ NULL, NULL, 0, 0, NULL },
};

#undef BO
#undef DOOR
#undef MON
#undef OP

#define SEG_MAX 512	/* a decoded {id}: job ids are 200 bytes at most */

/* Does path match pattern?  [out] id: the decoded "*" segment. */
static int route_match(const char *pattern, const char *path, char id[SEG_MAX])
{
	const char *p = pattern, *q = path;

	id[0] = '\0';
	while (*p && *q) {
		if (*p == '*') {
			size_t n = strcspn(q, "/");
			if (n == 0 || api_pct_decode(q, n, 0, id, SEG_MAX) != 0)
				return 0;
			p++;
			q += n;
			continue;
		}
		if (*p != *q)
			return 0;
		p++;
		q++;
	}
	return *p == '\0' && *q == '\0';
}

/* the token and its role (api_auth.c), then the body's size and type;
 * 0 with the refusal in c->res */
static int request_admitted(struct call *c, const struct route *rt)
{
	const struct api_request *req = c->req;
	int roles = rt->roles;

	if (roles == API_METRICS)
		roles = c->a->metrics_auth ? API_MONITOR : API_PUBLIC;
	if (roles != API_PUBLIC && !api_auth_admit(c, roles))
		return 0;
	if (req->body_len > API_BODY_MAX) {
		api_res_fail(c->res, 413, "the body is larger than 64 KiB", NULL);
		return 0;
	}
	if (((rt->flags & R_BODY) || ((rt->flags & R_OPT_BODY) && req->body_len)) &&
	    !api_content_type_json(req->content_type)) {
		api_res_fail(c->res, 415, "the body must be application/json", NULL);
		return 0;
	}
	return 1;
}

void api_handle(struct api *a, const struct api_request *req, struct api_response *res)
{
	const struct route *rt, *hit = NULL;
	char id[SEG_MAX];
	struct call c = { a, req, res, NULL, NULL, { TOKEN_NONE, 0, "" } };
	enum sd_result r;
	int path_known = 0;

	memset(res, 0, sizeof *res);
	if (!req->method || !req->path) {
		api_res_fail(res, 400, "no method or path", NULL);
		return;
	}
	for (rt = routes; rt->pattern && !hit; rt++) {
		if (!route_match(rt->pattern, req->path, id))
			continue;
		path_known = 1;
		if (strcmp(rt->method, req->method) == 0)
			hit = rt;
	}
	if (!hit) {
		if (path_known)
			api_res_fail(res, 405, "method not allowed", NULL);
		else
			api_res_fail(res, 404, "not found", NULL);
		return;
	}
	/* routes are tried in order; the one that matched last filled id */
	route_match(hit->pattern, req->path, id);
	c.id = strchr(hit->pattern, '*') ? id : NULL;
	err_clear();
	if ((r = pool_get(a, &c.db)) != SD_OK && !(hit->flags & R_NODB)) {
		api_res_internal(res, req, r);
		return;
	}
	if (request_admitted(&c, hit))
		hit->fn(&c);
	pool_put(a, c.db);
}

