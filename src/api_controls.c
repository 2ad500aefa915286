/*
 * api_controls.c: the queue's controls (controls.h) and periodic jobs
 * (schedule.h) over HTTP, for the operator:
 *
 *   GET  /v1/controls                 every paused or limited kind and queue,
 *                                     with what waits for it
 *   POST /v1/kinds/{kind}/pause       claims of the kind stop; running jobs finish
 *   POST /v1/kinds/{kind}/resume
 *   PUT  /v1/kinds/{kind}/limits      {"rate", "concurrency", "box_concurrency"}:
 *                                     the kind's limits become these
 *   POST /v1/jobs/{job_id}/cancel     a waiting job leaves the stream; a
 *                                     running one is refused its ack
 *
 * {kind} is a kind of the box's own or sqs:<queue>.
 */
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controls.h"
#include "queue.h"
#include "schedule.h"

static json_t *control_json(const struct control *c)
{
	char rate[64];

	controls_rate_text(&c->lim, rate, sizeof rate);
	return json_pack("{s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:I, s:I, s:I}", "kind", c->kind,
			 "paused", c->paused_at != 0,
			 "paused_at", c->paused_at ? json_integer(c->paused_at) : json_null(),
			 "paused_by", c->paused_at ? api_json_text(c->paused_by) : json_null(),
			 "rate", c->lim.rate_n ? json_string(rate) : json_null(),
			 "concurrency", c->lim.concurrency ? json_integer(c->lim.concurrency)
							   : json_null(),
			 "box_concurrency", c->lim.box_concurrency
						    ? json_integer(c->lim.box_concurrency)
						    : json_null(),
			 "waiting", (json_int_t)c->waiting, "running", (json_int_t)c->running,
			 "waited_ms", (json_int_t)c->waited_ms);
}

void api_get_controls(struct call *c)
{
	struct control *v;
	json_t *list = json_array();
	enum sd_result r;
	int n, i, bad = !list;

	if ((r = controls_list(c->db, &v, &n)) != SD_OK) {
		json_decref(list);
		api_res_internal(c->res, c->req, r);
		return;
	}
	for (i = 0; i < n && !bad; i++)
		bad = json_array_append_new(list, control_json(&v[i])) != 0;
	free(v);
	if (bad) {
		json_decref(list);
		api_res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	api_res_json(c->res, 200, json_pack("{s:o}", "controls", list));
}

/* the {kind} of the call, or a 404 */
static int kind_of_call(struct call *c)
{
	if (!c->id || queue_kind_valid(c->id) != SD_OK) {
		api_res_fail(c->res, 404, "no such kind: a kind is a-z, 0-9, '_', '-', '.', or "
			     "sqs:<queue>", NULL);
		return 0;
	}
	return 1;
}

/* answer a change of the call's kind's control that ended in r: the
 * control as it is now, with what waits for it (none: not paused, no
 * limits) */
static void answer_control(struct call *c, enum sd_result r)
{
	struct control k;

	if (r == SD_OK)
		r = controls_show(c->db, c->id, &k);
	if (r == SD_NOT_FOUND)
		api_res_fail(c->res, 404, err_msg(), NULL);
	else if (r == SD_LIMITED)
		api_res_fail(c->res, 429, err_msg(), NULL);
	else if (r != SD_OK)
		api_res_internal(c->res, c->req, r);
	else
		api_res_json(c->res, 200, control_json(&k));
}

static void pause_call(struct call *c, int pause)
{
	enum sd_result r;
	char who[CONTROLS_WHO_MAX + 1];

	if (!kind_of_call(c))
		return;
	snprintf(who, sizeof who, "token:%.190s", c->grant.name);
	r = pause ? controls_pause(c->db, c->id, who, NULL) : controls_resume(c->db, c->id, NULL);
	answer_control(c, r);
}

void api_post_pause(struct call *c)
{
	pause_call(c, 1);
}

void api_post_resume(struct call *c)
{
	pause_call(c, 0);
}

void api_put_limits(struct call *c)
{
	struct control_limits lim;
	struct api_error err;
	enum sd_result r;

	if (!kind_of_call(c))
		return;
	if ((r = api_parse_limits(c->req->body, c->req->body_len, &lim, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	answer_control(c, controls_limit(c->db, c->id, &lim));
}

void api_post_job_cancel(struct call *c)
{
	char who[CONTROLS_WHO_MAX + 1];
	int64_t n = 0, running = 0;
	enum sd_result r;

	if (!c->id || queue_job_id_valid(c->id) != SD_OK) {
		api_res_fail(c->res, 404, "no waiting or running job with this id", NULL);
		return;
	}
	snprintf(who, sizeof who, "token:%.190s", c->grant.name);
	if ((r = controls_cancel(c->db, c->id, who, &n, &running)) == SD_NOT_FOUND)
		api_res_fail(c->res, 404, "no waiting or running job with this id (a finished or "
			     "dead job cannot be cancelled)", NULL);
	else if (r != SD_OK)
		api_res_internal(c->res, c->req, r);
	else
		api_res_json(c->res, 200, json_pack("{s:s, s:I, s:b}", "job_id", c->id,
						    "cancelled", (json_int_t)n, "was_running",
						    running > 0));
}

/* ---- periodic jobs ---------------------------------------------------------
 *
 *   GET    /v1/schedules          every schedule, its next and last period
 *   POST   /v1/schedules          {"name", "kind", "every" | "cron" [, "timezone"],
 *                                  "payload", "missed"}
 *   DELETE /v1/schedules/{name}   the schedule (the jobs it made stay)
 */

static json_t *schedule_json(const struct schedule *s)
{
	json_error_t je;
	json_t *payload = json_loads(s->payload, 0, &je);

	return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:s, s:I, s:o, s:o, s:I, s:I}",
			 "name", s->name, "kind", s->kind, "payload",
			 payload ? payload : json_object(), "every_ms",
			 s->every_ms ? json_integer(s->every_ms) : json_null(), "cron",
			 s->cron[0] ? json_string(s->cron) : json_null(), "timezone",
			 s->timezone[0] ? json_string(s->timezone) : json_null(), "missed",
			 s->skip_missed ? "skip" : "once", "next_at", (json_int_t)s->next_at,
			 "last_at", s->last_at ? json_integer(s->last_at) : json_null(),
			 "last_job_id", s->last_job_id[0] ? json_string(s->last_job_id)
							 : json_null(),
			 "made", (json_int_t)s->made, "created_at", (json_int_t)s->created_at);
}

void api_get_schedules(struct call *c)
{
	struct schedule *v;
	json_t *list = json_array();
	enum sd_result r;
	int n, i, bad = !list;

	if ((r = schedule_list(c->db, &v, &n)) != SD_OK) {
		json_decref(list);
		api_res_internal(c->res, c->req, r);
		return;
	}
	for (i = 0; i < n && !bad; i++)
		bad = json_array_append_new(list, schedule_json(&v[i])) != 0;
	schedule_free_all(v, n);
	if (bad) {
		json_decref(list);
		api_res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	api_res_json(c->res, 200, json_pack("{s:o}", "schedules", list));
}

void api_post_schedule(struct call *c)
{
	struct schedule s;
	struct api_error err;
	enum sd_result r;

	if ((r = api_parse_schedule(c->req->body, c->req->body_len, &s, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	r = schedule_add(c->db, &s);
	if (r == SD_CONFLICT)
		api_res_fail(c->res, 409, err_msg(), "name");
	else if (r == SD_INVALID || r == SD_NOT_FOUND)
		api_res_fail(c->res, 400, err_msg(), s.cron[0] && strstr(err_msg(), "cron expression")
						     ? "cron" : "kind");
	else if (r == SD_LIMITED)
		api_res_fail(c->res, 429, err_msg(), NULL);
	else if (r != SD_OK)
		api_res_internal(c->res, c->req, r);
	else
		api_res_json(c->res, 201, schedule_json(&s));
	free(s.payload);
}

void api_delete_schedule(struct call *c)
{
	enum sd_result r;

	if (!c->id || schedule_name_valid(c->id) != SD_OK) {
		api_res_fail(c->res, 404, "no such schedule", NULL);
		return;
	}
	if ((r = schedule_rm(c->db, c->id)) == SD_NOT_FOUND)
		api_res_fail(c->res, 404, "no such schedule", NULL);
	else if (r != SD_OK)
		api_res_internal(c->res, c->req, r);
	else
		api_res_json(c->res, 200, json_pack("{s:s, s:b}", "name", c->id, "removed", 1));
}
