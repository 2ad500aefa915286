/*
 * api_res.c: the API's answers: JSON bodies, errors and the helpers every
 * endpoint shares (api_int.h).
 *
 * Invariants: every error is JSON {"error": "...", "field": "..."}; an
 * internal failure is logged once here with the path alone (never a body,
 * a token or buyer data) and answered without its detail.
 */
#define _GNU_SOURCE
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "event_runs.h"
#include "events.h"
#include "log.h"
#include "money.h"
#include "text.h"

void api_res_set(struct api_response *res, int status, const char *type, char *body,
		    size_t len)
{
	free(res->body);
	res->status = status;
	snprintf(res->content_type, sizeof res->content_type, "%s", type);
	res->body = body;
	res->body_len = len;
}

/* A JSON string from text that may hold broken UTF-8 (a message that cut a
 * name short, a row stored before text was checked): what text_check would
 * refuse is shown escaped (text_escape), never a 500. */
json_t *api_json_text(const char *s)
{
	json_t *j;
	char *e;

	if (text_utf8_valid(s) && (j = json_string(s)))
		return j;
	if (!(e = text_escape(s)))
		return NULL;
	j = json_string(e);
	free(e);
	return j;
}

/* json_take_text: o as compact JSON text (free()), NULL when o is NULL or
 * memory ran out; takes o. */
char *api_json_take(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	return s;
}

/* res_json: status with o as the body; takes o. */
void api_res_json(struct api_response *res, int status, json_t *o)
{
	char *s = api_json_take(o);

	if (!s) {
		if (status == 500) {	/* the fallback itself failed: a fixed body */
			static const char fixed[] = "{\"error\":\"internal error\"}";
			char *b = strdup(fixed);
			api_res_set(res, 500, "application/json", b, b ? strlen(b) : 0);
		}
		else
			api_res_fail(res, 500, "out of memory", NULL);
		return;
	}
	api_res_set(res, status, "application/json", s, strlen(s));
}

void api_res_fail(struct api_response *res, int status, const char *msg, const char *field)
{
	json_t *o = json_object();

	json_object_set_new(o, "error", api_json_text(msg));
	if (field && *field)
		json_object_set_new(o, "field", api_json_text(field));
	api_res_json(res, status, o);
}

/* A failure of the database or the system: logged here once, with no buyer
 * data (the path only), answered without the detail. */
void api_res_internal(struct api_response *res, const struct api_request *req,
			 enum sd_result r)
{
	char q[128];

	log_event(LOG_ERROR, "api request failed", "path=%s result=%s",
		  log_quote(q, sizeof q, req->path ? req->path : ""), sd_result_name(r));
	if (r == SD_BUSY || r == SD_IO) {
		api_res_fail(res, 503, r == SD_BUSY ? "the database is busy; try again"
						 : "the box cannot store this now (disk full or an I/O "
						   "error); nothing was stored; try again", NULL);
		snprintf(res->retry_after, sizeof res->retry_after, "%s", API_RETRY_AFTER_S);
		return;
	}
	api_res_fail(res, 500, "internal error", NULL);
}

void api_response_free(struct api_response *res)
{
	if (!res)
		return;
	free(res->body);
	res->body = NULL;
	res->body_len = 0;
}


/* utc_text: ms since the epoch as "2026-12-31T20:00:00Z" into buf. */
void api_utc_text(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "price": "25.00", "price_minor": 2500, "currency": "EUR"; nulls with no
 * price.  0, or -1 when out of memory. */
int api_price_set(json_t *o, int64_t minor, const char *currency)
{
	char plain[MONEY_TEXT_MAX];

	if (!currency[0])
		return json_object_set_new(o, "price", json_null()) ||
		       json_object_set_new(o, "price_minor", json_null()) ||
		       json_object_set_new(o, "currency", json_null()) ? -1 : 0;
	money_plain(minor, currency, plain, sizeof plain);
	return json_object_set_new(o, "price", json_string(plain)) ||
	       json_object_set_new(o, "price_minor", json_integer(minor)) ||
	       json_object_set_new(o, "currency", json_string(currency)) ? -1 : 0;
}

int api_amount_set(json_t *o, int64_t minor, const char *currency)
{
	char plain[MONEY_TEXT_MAX];

	money_plain(minor, currency, plain, sizeof plain);
	return json_object_set_new(o, "amount", json_string(plain)) ||
	       json_object_set_new(o, "amount_minor", json_integer(minor)) ||
	       json_object_set_new(o, "currency", json_string(currency)) ? -1 : 0;
}

int api_time_or_null(json_t *o, const char *key, int64_t ms)
{
	char when[32];

	if (!ms)
		return json_object_set_new(o, key, json_null());
	api_utc_text(ms, when, sizeof when);
	return json_object_set_new(o, key, json_string(when));
}

json_t *api_run_json(const struct event_run_view *r)
{
	json_t *o = json_pack("{s:I, s:s, s:I, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I}", "id",
			      (json_int_t)r->id, "kind", event_run_kind_name(r->kind), "change",
			      (json_int_t)r->change_no, "by", api_json_text(r->actor), "reason",
			      r->reason[0] ? api_json_text(r->reason) : json_null(), "orders",
			      (json_int_t)r->orders, "done", (json_int_t)r->done, "refunded",
			      (json_int_t)r->refunded, "at_window", (json_int_t)r->at_window,
			      "emailed", (json_int_t)r->emailed, "failed", (json_int_t)r->failed);

	if (o && (api_time_or_null(o, "created_at", r->created_at) != 0 ||
		  api_time_or_null(o, "enqueued_at", r->enqueued_at) != 0 ||
		  api_time_or_null(o, "finished_at", r->finished_at) != 0 ||
		  (r->kind == EVENT_RUN_MOVE &&
		   (api_time_or_null(o, "old_starts_at", r->old_starts_at) != 0 ||
		    json_object_set_new(o, "old_venue", api_json_text(r->old_venue)) != 0)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *api_event_json(const struct event_view *v)
{
	char when[32], closed[32];
	json_t *o;

	api_utc_text(v->starts_at, when, sizeof when);
	if (v->closed_at)
		api_utc_text(v->closed_at, closed, sizeof closed);
	o = json_pack("{s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "id",
		      (json_int_t)v->id, "name", v->name, "venue", v->venue, "starts_at", when,
		      "starts_at_ms", (json_int_t)v->starts_at, "capacity", (json_int_t)v->capacity,
		      "orders", (json_int_t)v->orders, "seats_sold", (json_int_t)v->seats_sold,
		      "seats_remaining", (json_int_t)(v->capacity - v->seats_sold), "admitted",
		      (json_int_t)v->admitted, "to_come", (json_int_t)(v->seats_sold - v->admitted),
		      "cancelled", (json_int_t)v->cancelled);
	if (o && (json_object_set_new(o, "state",
				      json_string(event_state_name(v, clock_now_ms()))) != 0 ||
		  json_object_set_new(o, "closed_at",
				      v->closed_at ? json_string(closed) : json_null()) != 0 ||
		  api_price_set(o, v->price_minor, v->currency) != 0 ||
		  api_time_or_null(o, "cancelled_at", v->cancelled_at) != 0 ||
		  json_object_set_new(o, "cancel_reason", v->cancel_reason[0] ?
				      api_json_text(v->cancel_reason) : json_null()) != 0 ||
		  json_object_set_new(o, "change", json_integer(v->change_no)) != 0 ||
		  json_object_set_new(o, "reminders", json_boolean(v->reminders)) != 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* A body the parser refused: 400 naming the field, or a 500 when it was
 * memory, not the request, that failed. */
void api_bad_body(struct call *c, enum sd_result r, const struct api_error *err)
{
	if (r == SD_NOMEM)
		api_res_internal(c->res, c->req, r);
	else
		api_res_fail(c->res, 400, err->msg, err->field);
}

int api_parse_id(const char *s, int64_t *id)
{
	int64_t v = 0;

	if (!s || !*s || strlen(s) > 18)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		v = v * 10 + (*s - '0');
	}
	*id = v;
	return v > 0;
}

