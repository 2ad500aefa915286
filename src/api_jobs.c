/*
 * api_jobs.c: the stream's jobs and the dead letters, for the operator.
 */
#define _GNU_SOURCE
#include "api_int.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "queue.h"

struct job_list {
	json_t *jobs;
	int64_t now;
	int nomem;		/* a row could not be added: no partial list */
};

/* Would jansson refuse this valid JSON (SQLite made it) again?  SQLite keeps
 * what jansson refuses: integers past 64 bits, bad UTF-8, \u0000.  Any other
 * failure is out of memory, which jansson may report as a syntax error. */
static int json_refused(const json_error_t *je)
{
	enum json_error_code e = json_error_code(je);

	return e == json_error_numeric_overflow || e == json_error_invalid_utf8 ||
	       e == json_error_null_character;
}

/* A leased entry also says how long its lease has left (visible_at is the
 * lease's end) and how long ago it was claimed (leased_at), both on the
 * server's clock, so a browser's clock does not matter.  A row jansson
 * refuses goes out as its text. */
static void job_row(const struct job_row *row, void *arg)
{
	struct job_list *l = arg;
	json_error_t je;
	json_t *j = json_loads(row->json, 0, &je);
	int bad = 0;

	if (!j && json_refused(&je))
		j = api_json_text(row->json);
	if (json_is_object(j) && strcmp(row->state, "leased") == 0) {
		bad |= json_object_set_new(j, "lease_expires_in_ms",
					   json_integer((json_int_t)(row->visible_at - l->now)));
		if (row->leased_at > 0)	/* a lease taken before 0004 has no time */
			bad |= json_object_set_new(j, "lease_age_ms",
						   json_integer((json_int_t)(l->now - row->leased_at)));
	}
	if (!j || bad) {
		json_decref(j);
		l->nomem = 1;
		return;
	}
	if (json_array_append_new(l->jobs, j))	/* takes j, even when it fails */
		l->nomem = 1;
}

void api_get_jobs(struct call *c)
{
	static const char *const states[] = { "ready", "scheduled", "leased", "dead", "done",
					      "cancelled", NULL };
	char state[16], kind[QUEUE_KIND_MAX + 1], lim[16];
	int has_state, has_kind, has_lim, i, ok = 0;
	long limit = API_JOBS_LIMIT_DEFAULT;
	struct job_list list;
	json_t *jobs;
	enum sd_result r;

	has_state = api_query_get(c->req->query, "state", state, sizeof state);
	has_kind = api_query_get(c->req->query, "kind", kind, sizeof kind);
	has_lim = api_query_get(c->req->query, "limit", lim, sizeof lim);
	for (i = 0; has_state == 1 && states[i]; i++)
		ok |= strcmp(state, states[i]) == 0;
	if (has_state < 0 || (has_state == 1 && !ok)) {
		api_res_fail(c->res, 400, "state must be ready, scheduled, leased, dead, done or "
			     "cancelled", "state");
		return;
	}
	if (has_kind < 0 || (has_kind == 1 && queue_kind_valid(kind) != SD_OK)) {
		api_res_fail(c->res, 400, "kind is not a job kind", "kind");
		return;
	}
	if (has_lim) {
		char *end = NULL;
		limit = has_lim > 0 ? strtol(lim, &end, 10) : 0;
		if (has_lim < 0 || !end || *end || end == lim || limit < 1 ||
		    limit > API_JOBS_LIMIT_MAX) {
			api_res_fail(c->res, 400, "limit must be between 1 and 10000", "limit");
			return;
		}
	}
	jobs = json_array();
	list.jobs = jobs;
	list.now = clock_now_ms();
	list.nomem = 0;
	r = queue_list(c->db, has_state == 1 ? state : NULL, has_kind == 1 ? kind : NULL,
		       (int)limit, job_row, &list);
	if (r == SD_OK && (list.nomem || !jobs))
		r = err_set(SD_NOMEM, "out of memory listing jobs");
	if (r != SD_OK) {
		json_decref(jobs);
		api_res_internal(c->res, c->req, r);
		return;
	}
	api_res_json(c->res, 200, json_pack("{s:o}", "jobs", jobs));
}

void api_post_retry(struct call *c)
{
	enum sd_result r;
	int64_t n = 0;

	if (!c->id || queue_job_id_valid(c->id) != SD_OK) {
		api_res_fail(c->res, 404, "no dead job with this id", NULL);
		return;
	}
	if ((r = queue_dead_retry(c->db, c->id, &n)) == SD_NOT_FOUND)
		api_res_fail(c->res, 404, "no dead job with this id", NULL);
	else if (r != SD_OK)
		api_res_internal(c->res, c->req, r);
	else
		api_res_json(c->res, 200, json_pack("{s:s, s:I}", "job_id", c->id, "retried",
						(json_int_t)n));
}

