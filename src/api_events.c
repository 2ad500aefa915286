/*
 * api_events.c: the events, their sales by the hour, and the door: its
 * scans and what the night looked like at it.
 *
 * A door token bound to an event reads and admits that event alone, and
 * admits only while its doors are open (api.h); the check, the admission
 * and the scan's log row are scans.c's, in one transaction.
 */
#define _GNU_SOURCE
#include "api_int.h"

#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "event_edit.h"
#include "event_runs.h"
#include "events.h"
#include "scans.h"

/* an event's write answered: 2xx with the event as it is now, or the
 * refusal (404 no such event; 409 a capacity below a seat sold; 400) */
static void event_answer(struct call *c, enum sd_result r, int status, char *body)
{
	if (r == SD_OK) {
		api_res_set(c->res, status, "application/json", body, strlen(body));
		return;
	}
	free(body);
	if (r == SD_NOT_FOUND)
		api_res_fail(c->res, 404, "no such event", NULL);
	else if (r == SD_CONFLICT)
		api_res_fail(c->res, 409, err_msg(), "capacity");
	else if (r == SD_INVALID)
		api_res_fail(c->res, 400, err_msg(), NULL);
	else
		api_res_internal(c->res, c->req, r);
}

/* the event's JSON as *body, or SD_NOMEM */
static enum sd_result event_body(const struct event_view *v, char **body)
{
	if (!(*body = api_json_take(api_event_json(v))))
		return err_set(SD_NOMEM, "out of memory");
	return SD_OK;
}

/* The event, and the answer built before the commit: a 500 never follows a
 * stored event, so a client that retries after one makes no second event. */
void api_post_event(struct call *c)
{
	struct api_event ev;
	struct api_error err;
	struct event_view v;
	enum sd_result r;
	char *body = NULL;
	int64_t id = 0;

	if ((r = api_parse_event(c->req->body, c->req->body_len, &ev, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	if (event_start_valid(ev.e.starts_at, clock_now_ms()) != SD_OK) {
		api_parse_free(ev.json);
		api_res_fail(c->res, 400, err_msg(), "starts_at");
		return;
	}
	if ((r = db_begin(c->db)) != SD_OK) {
		api_parse_free(ev.json);
		api_res_internal(c->res, c->req, r);
		return;
	}
	if ((r = event_add(c->db, &ev.e, &id)) == SD_OK && (r = event_get(c->db, id, &v)) == SD_OK)
		r = event_body(&v, &body);
	r = db_end(c->db, r);
	api_parse_free(ev.json);
	event_answer(c, r, 201, body);
}

/* the {id} of an event route: 1 with *id, 0 with the refusal in c->res
 * (404 no such id, 403 a door token bound to another event) */
static int event_of_call(struct call *c, int64_t *id)
{
	if (!api_parse_id(c->id, id)) {
		api_res_fail(c->res, 404, "no such event", NULL);
		return 0;
	}
	if (c->grant.role == TOKEN_DOOR && c->grant.event_id && c->grant.event_id != *id) {
		api_res_fail(c->res, 403, "this door token is for another event", "Authorization");
		return 0;
	}
	return 1;
}

struct run_list {
	json_t *runs;
	int short_of;		/* runs that could not be added (memory) */
};

static void run_row(const struct event_run_view *r, void *arg)
{
	struct run_list *l = arg;
	json_t *o = api_run_json(r);

	if (!o || json_array_append_new(l->runs, o) != 0)
		l->short_of++;
}

/* the event with its runs (their progress), newest first: [out] *o */
static enum sd_result event_with_runs(struct db *db, int64_t id, json_t **o)
{
	struct run_list l = { json_array(), 0 };
	struct event_view v;
	enum sd_result r;

	*o = NULL;
	if (!l.runs)
		return err_set(SD_NOMEM, "out of memory");
	if ((r = db_begin_snapshot(db)) != SD_OK) {
		json_decref(l.runs);
		return r;
	}
	if ((r = event_get(db, id, &v)) == SD_OK &&
	    (r = event_run_each(db, id, run_row, &l)) == SD_OK &&
	    (l.short_of || !(*o = api_event_json(&v))))
		r = err_set(SD_NOMEM, "out of memory");
	if (r == SD_OK && json_object_set_new(*o, "runs", l.runs) != 0)
		r = err_set(SD_NOMEM, "out of memory");
	else if (r != SD_OK)
		json_decref(l.runs);
	if (r != SD_OK) {
		json_decref(*o);
		*o = NULL;
	}
	return db_end(db, r);
}

enum sd_result api_event_runs_text(struct db *db, int64_t id, char **out)
{
	enum sd_result r;
	json_t *o;

	*out = NULL;
	if ((r = event_with_runs(db, id, &o)) != SD_OK)
		return r;
	*out = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(o);
	return *out ? SD_OK : err_set(SD_NOMEM, "out of memory");
}

/* a door token bound to an event sees that event alone */
void api_get_event(struct call *c)
{
	enum sd_result r;
	json_t *o;
	int64_t id;

	if (!event_of_call(c, &id))
		return;
	if ((r = event_with_runs(c->db, id, &o)) == SD_NOT_FOUND)
		api_res_fail(c->res, 404, "no such event", NULL);
	else if (r != SD_OK)
		api_res_internal(c->res, c->req, r);
	else
		api_res_json(c->res, 200, o);
}

/* POST /v1/events/{id}/cancel {"reason"}: the event cancelled, its run
 * started (202); a cancelled event answers with its run as it is (200) */
void api_post_event_cancel(struct call *c)
{
	struct event_run_view run;
	struct api_error err;
	char reason[ORDER_REASON_MAX + 1];
	enum sd_result r;
	int already = 0;
	json_t *o;
	int64_t id;

	if (!event_of_call(c, &id))
		return;
	if ((r = api_parse_cancel(c->req->body, c->req->body_len, reason, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	if (!reason[0]) {
		api_res_fail(c->res, 400, "reason is missing: buyers are told why", "reason");
		return;
	}
	if ((r = event_cancel(c->db, id, c->grant.name, reason, &run, &already)) == SD_NOT_FOUND) {
		api_res_fail(c->res, 404, "no such event", NULL);
		return;
	}
	if (r == SD_OK)
		r = event_with_runs(c->db, id, &o);
	if (r != SD_OK) {
		api_res_internal(c->res, c->req, r);
		return;
	}
	api_res_json(c->res, already ? 200 : 202, o);
}

/* PATCH /v1/events/{id}: name, venue, capacity (never below a seat sold),
 * start (never in the past); the event as it is after */
void api_patch_event(struct call *c)
{
	struct api_event_change ch;
	struct api_error err;
	struct event_view v;
	enum sd_result r;
	char *body = NULL;
	unsigned refused = 0;
	int64_t id;

	if (!event_of_call(c, &id))
		return;
	if ((r = api_parse_event_change(c->req->body, c->req->body_len, &ch, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	if ((ch.c.set & EVENT_SET_STARTS) &&
	    event_start_valid(ch.c.starts_at, clock_now_ms()) != SD_OK) {
		api_parse_free(ch.json);
		api_res_fail(c->res, 400, err_msg(), "starts_at");
		return;
	}
	ch.c.actor = c->grant.name;
	if ((r = event_set(c->db, id, &ch.c, &v, &refused)) == SD_OK)
		r = event_body(&v, &body);
	api_parse_free(ch.json);
	if (r == SD_CONFLICT && !(refused & EVENT_SET_CAPACITY)) {
		api_res_fail(c->res, 409, err_msg(), "id");	/* a cancelled event */
		return;
	}
	event_answer(c, r, 200, body);
}

/* POST /v1/events/{id}/close: its sales stop (its doors still admit); a
 * closed event answers as it is */
void api_post_event_close(struct call *c)
{
	struct event_view v;
	enum sd_result r;
	char *body = NULL;
	int64_t id;

	if (!event_of_call(c, &id))
		return;
	if ((r = event_close(c->db, id, &v, NULL)) == SD_OK)
		r = event_body(&v, &body);
	event_answer(c, r, 200, body);
}

struct event_list {
	json_t *events;
	int short_of;		/* events that could not be added (memory) */
};

static void event_row(const struct event_view *v, void *arg)
{
	struct event_list *l = arg;

	if (json_array_append_new(l->events, api_event_json(v)) != 0)
		l->short_of++;
}

enum sd_result api_events_list(struct db *db, json_t **out)
{
	struct event_list l = { json_array(), 0 };
	enum sd_result r;

	*out = NULL;
	if ((r = event_each(db, event_row, &l)) == SD_OK && (l.short_of || !l.events))
		r = err_set(SD_NOMEM, "out of memory");
	if (r != SD_OK) {
		json_decref(l.events);
		return r;
	}
	*out = l.events;
	return SD_OK;
}

char *api_event_json_text(const struct event_view *v)
{
	json_t *o = api_event_json(v);
	char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	return s;
}

enum sd_result api_events_text(struct db *db, char **out)
{
	json_t *events, *o;
	enum sd_result r;

	*out = NULL;
	if ((r = api_events_list(db, &events)) != SD_OK)
		return r;
	o = json_pack("{s:o}", "events", events);
	*out = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	return *out ? SD_OK : err_set(SD_NOMEM, "out of memory");
}

/* GET /v1/events: every event with its seats, by id */
void api_get_events(struct call *c)
{
	json_t *events;
	enum sd_result r;

	if ((r = api_events_list(c->db, &events)) != SD_OK) {
		api_res_internal(c->res, c->req, r);
		return;
	}
	api_res_json(c->res, 200, json_pack("{s:o}", "events", events));
}

/* ======================== the door ======================================= */

static json_t *scan_event_json(const struct scan_result *sr)
{
	char when[32];

	api_utc_text(sr->event_starts_at, when, sizeof when);
	return json_pack("{s:I, s:o, s:s, s:I}", "id", (json_int_t)sr->event_id, "name",
			 api_json_text(sr->event_name), "starts_at", when, "starts_at_ms",
			 (json_int_t)sr->event_starts_at);
}

static json_t *scan_json(const struct scan_result *sr)
{
	char opens[32], closes[32];

	switch (sr->outcome) {
	case SCAN_ADMITTED:
	case SCAN_ALREADY:
		return json_pack("{s:s, s:I, s:s, s:s, s:o}", "result", scan_outcome_name(sr->outcome),
				 "scanned_at", (json_int_t)sr->scanned_at, "seat", sr->seat_label,
				 "order_id", sr->order_id, "scanned_by", api_json_text(sr->scanned_by));
	case SCAN_CANCELLED:
		return json_pack("{s:s, s:s, s:s}", "result", "cancelled", "seat", sr->seat_label,
				 "order_id", sr->order_id);
	case SCAN_WRONG_EVENT:
	case SCAN_EVENT_CANCELLED:
		return json_pack("{s:s, s:o}", "result", scan_outcome_name(sr->outcome), "event",
				 scan_event_json(sr));
	case SCAN_DOORS_CLOSED:
		api_utc_text(sr->opens_at, opens, sizeof opens);
		api_utc_text(sr->closes_at, closes, sizeof closes);
		return json_pack("{s:s, s:o, s:s, s:s}", "result", "doors_closed", "event",
				 scan_event_json(sr), "doors_open_at", opens, "doors_close_at",
				 closes);
	case SCAN_INVALID:
	default:
		return json_pack("{s:s}", "result", "invalid");
	}
}

/* scan_limited: the token's scans past its rate (scan_rate, scan_burst):
 * 1 with the 429 and its Retry-After.  A door scans about a ticket a
 * second; a stolen phone's flood is held to the rate before it reads a
 * byte of the database. */
static int scan_limited(struct call *c)
{
	int64_t wait_ms = 0, s;

	if (rate_take(c->a->scan_rate, c->grant.id, clock_now_ms(), &wait_ms))
		return 0;
	__atomic_add_fetch(&c->a->scans_limited, 1, __ATOMIC_RELAXED);
	api_res_fail(c->res, 429, "too many scans from this token: wait and scan again", NULL);
	s = (wait_ms + 999) / 1000;
	snprintf(c->res->retry_after, sizeof c->res->retry_after, "%d",
		 (int)(s < 1 ? 1 : s > 3600 ? 3600 : s));
	return 1;
}

/* POST /v1/scan: a door token bound to an event admits that event's
 * tickets, while its doors are open; the operator's and an unbound door
 * token's admit any event's, at any time.  The token's name is the door in
 * the scan log; its nonces are its own (the token's identity, not its
 * name), and the same nonce with the same code again gets the first answer,
 * with another code 422. */
void api_post_scan(struct call *c)
{
	struct api_scan in;
	struct api_error err;
	struct scan_result sr;
	struct scan_door door = { c->grant.event_id, c->a->doors_open_before_ms,
				  c->a->doors_close_after_ms };
	struct scan_by by = { c->grant.name, c->grant.id, NULL };
	enum sd_result r;

	if (scan_limited(c))
		return;
	if ((r = api_parse_scan(c->req->body, c->req->body_len, &in, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	by.nonce = in.nonce[0] ? in.nonce : NULL;
	r = scan_ticket(c->db, c->a->key, in.code, c->grant.role == TOKEN_DOOR ? &door : NULL,
			&by, &sr);
	if (r == SD_CONFLICT)
		api_res_fail(c->res, 422, err_msg(), "nonce");
	else if (r != SD_OK)
		api_res_internal(c->res, c->req, r);
	else
		api_res_json(c->res, 200, scan_json(&sr));
}

/* GET /v1/events/{id}/scans: the door's night, the last six hours by the
 * minute and every door's counts */
void api_get_event_scans(struct call *c)
{
	struct scan_stats *st;
	struct event_view v;
	json_t *minutes, *doors;
	enum sd_result r;
	int64_t id;
	int i;

	if (!event_of_call(c, &id))
		return;
	if (!(st = malloc(sizeof *st))) {
		api_res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	if ((r = event_get(c->db, id, &v)) != SD_OK ||
	    (r = scan_stats_get(c->db, id, clock_now_ms() - SCAN_MINUTES_MAX * 60000LL, st)) !=
		    SD_OK) {
		free(st);
		if (r == SD_NOT_FOUND)
			api_res_fail(c->res, 404, "no such event", NULL);
		else
			api_res_internal(c->res, c->req, r);
		return;
	}
	minutes = json_array();
	doors = json_array();
	for (i = 0; i < st->n_minutes; i++)
		json_array_append_new(minutes, json_pack("{s:I, s:I, s:I}", "minute",
				(json_int_t)st->minutes[i].minute, "admitted",
				(json_int_t)st->minutes[i].admitted, "refused",
				(json_int_t)st->minutes[i].refused));
	for (i = 0; i < st->n_doors; i++)
		json_array_append_new(doors, json_pack("{s:o, s:I, s:I, s:I}", "door",
				api_json_text(st->doors[i].door), "admitted",
				(json_int_t)st->doors[i].admitted, "refused",
				(json_int_t)st->doors[i].refused, "last_at",
				(json_int_t)st->doors[i].last_at));
	free(st);
	api_res_json(c->res, 200, json_pack("{s:I, s:I, s:I, s:o, s:o}", "event_id", (json_int_t)id,
					    "admitted", (json_int_t)v.admitted, "to_come",
					    (json_int_t)(v.seats_sold - v.admitted), "per_minute",
					    minutes, "per_door", doors));
}

/* GET /v1/events/{id}/sales: what the event sold, hour by hour */
void api_get_event_sales(struct call *c)
{
	struct event_hour *h;
	struct event_view v;
	json_t *hours;
	enum sd_result r;
	int64_t id;
	int n = 0, i;

	if (!event_of_call(c, &id))
		return;
	if (!(h = malloc(sizeof *h * EVENT_HOURS_MAX))) {
		api_res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	if ((r = event_get(c->db, id, &v)) != SD_OK || (r = event_sales(c->db, id, h, &n)) != SD_OK) {
		free(h);
		if (r == SD_NOT_FOUND)
			api_res_fail(c->res, 404, "no such event", NULL);
		else
			api_res_internal(c->res, c->req, r);
		return;
	}
	hours = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(hours, json_pack("{s:I, s:I, s:I}", "hour",
				(json_int_t)h[i].hour, "orders", (json_int_t)h[i].orders, "seats",
				(json_int_t)h[i].seats));
	free(h);
	api_res_json(c->res, 200, json_pack("{s:I, s:I, s:I, s:o}", "event_id", (json_int_t)id,
					    "capacity", (json_int_t)v.capacity, "sold",
					    (json_int_t)v.seats_sold, "hours", hours));
}
