/*
 * event.c: `stagedoor event add | ls | show | set | close | cancel`: events and
 * their life.  Parsing and printing only; the work is in event_edit and
 * events.  Times are read and shown in the venue's zone (timefmt.h); --json
 * prints what the API answers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "args.h"
#include "clock.h"
#include "cli.h"
#include "cmd/commands.h"
#include "db.h"
#include "event_edit.h"
#include "event_runs.h"
#include "events.h"
#include "money.h"
#include "text.h"
#include "timefmt.h"

static int event_add_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *name = NULL, *venue = NULL, *starts = NULL, *price = NULL,
		   *currency = NULL;
	int64_t capacity = 0, id = 0;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "name", ARG_STR, &name, 0, 0, 0, "NAME",
		  "the event's name (1 to 200 bytes of UTF-8)", 0 },
		{ "venue", ARG_STR, &venue, 0, 0, 0, "VENUE",
		  "where it is", 0 },
		{ "starts-at", ARG_STR, &starts, 0, 0, 0, "TIME",
		  "when it starts: the venue's time (2026-12-31 20:00) or with an offset "
		  "(2026-12-31T20:00+01:00)", 0 },
		{ "capacity", ARG_INT, &capacity, 1, 1000000, 0, NULL,
		  "seats on sale (1..1000000)", 0 },
		{ "price", ARG_STR, &price, 0, 0, 0, "AMOUNT",
		  "a seat's price (25.00), with --currency: the shop sells only priced events", 0 },
		{ "currency", ARG_STR, &currency, 0, 0, 0, "CODE",
		  "the price's ISO 4217 currency (EUR, GBP, USD)", 0 },
		ARG_END,
	};
	static const char usage[] =
		"event add --name NAME --venue VENUE --starts-at TIME --capacity N "
		"[--price AMOUNT --currency CODE]";
	char *pos[ARGS_MAX_POS];
	struct event_new e = { 0 };
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, usage)) != 0)
		return rc;
	if (!name || !venue || !starts || !opts[4].seen) {
		fprintf(stderr, "stagedoor: usage: stagedoor %s\n", usage);
		return 2;
	}
	e.name = name;
	e.venue = venue;
	e.capacity = capacity;
	if ((r = timefmt_parse(starts, &e.starts_at)) != SD_OK ||
	    (r = text_field_valid("event name", name)) != SD_OK ||
	    (r = text_field_valid("venue", venue)) != SD_OK ||
	    (r = event_start_valid(e.starts_at, clock_now_ms())) != SD_OK ||
	    (r = event_price_parse(price, currency, &e.price_minor, e.currency)) != SD_OK)
		return cli_fail(r);
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = event_add(db, &e, &id);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("%lld\n", (long long)id);
	return 0;
}

/* "on sale", "sales closed", "sold out", "cancelled" */
static const char *state_text(const struct event_view *v)
{
	if (v->cancelled_at)
		return "cancelled";
	if (event_state_name(v, clock_now_ms())[0] == 'c')
		return "sales closed";
	return v->seats_sold >= v->capacity ? "sold out" : "on sale";
}

static void ls_row(const struct event_view *v, void *arg)
{
	char when[TIMEFMT_TEXT_MAX], sold[48];

	(void)arg;
	timefmt_format(v->starts_at, when, sizeof when);
	snprintf(sold, sizeof sold, "%lld/%lld", (long long)v->seats_sold, (long long)v->capacity);
	printf("%-6lld %-22s %-13s %-9lld %-13s %s, %s\n", (long long)v->id, when, sold,
	       (long long)v->admitted, state_text(v), v->name, v->venue);
}

static int event_ls_cmd(int argc, char **argv)
{
	const char *dbp = NULL;
	int json = 0, npos, rc;
	struct arg_opt opts[] = { ARG_DB(&dbp), ARG_JSON(&json), ARG_END };
	char *pos[ARGS_MAX_POS], *out = NULL;
	struct db *db;
	enum sd_result r;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, "event ls [--json]")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	if (json) {
		if ((r = api_events_text(db, &out)) == SD_OK)
			printf("%s\n", out);
		free(out);
	} else {
		printf("%-6s %-22s %-13s %-9s %-13s %s\n", "id", "starts", "sold", "admitted",
		       "state", "event");
		r = event_each(db, ls_row, NULL);
	}
	db_close(db);
	return r == SD_OK ? 0 : cli_fail(r);
}

static void show_text(const struct event_view *v)
{
	char when[TIMEFMT_TEXT_MAX], price[MONEY_TEXT_MAX];

	timefmt_format(v->starts_at, when, sizeof when);
	printf("event     %lld: %s\n", (long long)v->id, v->name);
	printf("venue     %s\n", v->venue);
	printf("starts    %s\n", when);
	printf("sold      %lld of %lld seats (%lld order%s), %lld left\n",
	       (long long)v->seats_sold, (long long)v->capacity, (long long)v->orders,
	       v->orders == 1 ? "" : "s", (long long)(v->capacity - v->seats_sold));
	if (v->currency[0]) {
		money_plain(v->price_minor, v->currency, price, sizeof price);
		printf("price     %s %s a seat\n", price, v->currency);
	} else {
		printf("price     none (the shop does not sell it)\n");
	}
	printf("admitted  %lld, to come %lld\n", (long long)v->admitted,
	       (long long)(v->seats_sold - v->admitted));
	if (v->cancelled)
		printf("cancelled %lld tickets\n", (long long)v->cancelled);
	if (v->cancelled_at) {
		timefmt_format(v->cancelled_at, when, sizeof when);
		printf("CANCELLED at %s: %s\n", when, v->cancel_reason);
	} else if (v->closed_at) {
		timefmt_format(v->closed_at, when, sizeof when);
		printf("sales     closed at %s (the doors still admit)\n", when);
	} else {
		printf("sales     %s\n", state_text(v));
	}
	printf("reminders %s\n", v->reminders ? "on" : "off");
}

/* one run and its progress, as `event show` prints it */
static void run_text(const struct event_run_view *r, void *arg)
{
	char when[TIMEFMT_TEXT_MAX], was[TIMEFMT_TEXT_MAX];

	(void)arg;
	timefmt_format(r->created_at, when, sizeof when);
	if (r->kind == EVENT_RUN_CANCEL) {
		printf("run %-5lld cancel, %s by %s\n", (long long)r->id, when, r->actor);
		printf("          %lld of %lld order%s done: %lld refunded, %lld owed at the "
		       "window, %lld emailed, %lld failed%s\n", (long long)r->done,
		       (long long)r->orders, r->orders == 1 ? "" : "s", (long long)r->refunded,
		       (long long)r->at_window, (long long)r->emailed, (long long)r->failed,
		       r->enqueued_at ? "" : " (still queueing)");
	} else {
		timefmt_format(r->old_starts_at, was, sizeof was);
		printf("run %-5lld move %lld, %s by %s (was %s, %s)\n", (long long)r->id,
		       (long long)r->change_no, when, r->actor, was, r->old_venue);
		printf("          %lld of %lld order%s done, %lld emailed, %lld failed%s\n",
		       (long long)r->done, (long long)r->orders, r->orders == 1 ? "" : "s",
		       (long long)r->emailed, (long long)r->failed,
		       r->enqueued_at ? "" : " (still queueing)");
	}
	if (r->finished_at) {
		timefmt_format(r->finished_at, when, sizeof when);
		printf("          finished %s\n", when);
	}
}

/* the event's id from the one positional argument */
static int event_id_arg(const char *s, int64_t *id)
{
	char *end;
	long long n;

	errno = 0;
	n = strtoll(s, &end, 10);
	if (s[0] >= '1' && s[0] <= '9' && !*end && errno == 0) {
		*id = n;
		return 0;
	}
	fprintf(stderr, "stagedoor: '%.40s' is not an event id (event ls lists them)\n", s);
	return 2;
}

/* print the event as text, or as the API's JSON (with db: its runs too) */
static int event_print(struct db *db, const struct event_view *v, int json)
{
	enum sd_result r = SD_OK;
	char *out;

	if (!json) {
		show_text(v);
		if (db)
			r = event_run_each(db, v->id, run_text, NULL);
		return r == SD_OK ? 0 : cli_fail(r);
	}
	if (db)
		r = api_event_runs_text(db, v->id, &out);
	else if (!(out = api_event_json_text(v)))
		r = err_set(SD_NOMEM, "out of memory");
	if (r != SD_OK)
		return cli_fail(r);
	printf("%s\n", out);
	free(out);
	return 0;
}

/* event show ID / event close ID: one event read, or its sales closed */
static int event_one(int argc, char **argv, int close)
{
	const char *dbp = NULL;
	int json = 0, npos, rc, was = 0;
	struct arg_opt opts[] = { ARG_DB(&dbp), ARG_JSON(&json), ARG_END };
	char *pos[ARGS_MAX_POS];
	struct event_view v;
	struct db *db;
	enum sd_result r;
	int64_t id;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1,
			    close ? "event close ID [--json]" : "event show ID [--json]")) != 0 ||
	    (rc = event_id_arg(pos[0], &id)) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, close ? DB_SYNC_FULL : DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	r = close ? event_close(db, id, &v, &was) : event_get(db, id, &v);
	if (r != SD_OK) {
		db_close(db);
		return cli_fail(r);
	}
	if (was && !json)
		fprintf(stderr, "stagedoor: event %lld's sales were closed already\n", (long long)id);
	rc = event_print(close ? NULL : db, &v, json);
	db_close(db);
	return rc;
}

static int event_cancel_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *reason = NULL;
	int json = 0, npos, rc, already = 0;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "reason", ARG_STR, &reason, 0, 0, 0, "TEXT",
		  "why, in words for the buyers: their email says it (1 to 200 bytes)", 0 },
		ARG_JSON(&json),
		ARG_END,
	};
	static const char usage[] = "event cancel ID --reason TEXT [--json]";
	char *pos[ARGS_MAX_POS], actor[EVENT_RUN_ACTOR_MAX];
	struct event_run_view run;
	struct event_view v;
	struct db *db;
	enum sd_result r;
	int64_t id;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, usage)) != 0 ||
	    (rc = event_id_arg(pos[0], &id)) != 0)
		return rc;
	if (!reason) {
		fprintf(stderr, "stagedoor: --reason is missing: every buyer's email says why\n"
			"stagedoor: usage: stagedoor %s\n", usage);
		return 2;
	}
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	cli_actor(actor, sizeof actor);
	if ((r = event_cancel(db, id, actor, reason, &run, &already)) == SD_OK)
		r = event_get(db, id, &v);
	if (r != SD_OK) {
		db_close(db);
		return cli_fail(r);
	}
	if (!json && already)
		fprintf(stderr, "stagedoor: event %lld was cancelled already; its run:\n",
			(long long)id);
	else if (!json)
		printf("event %lld is cancelled: its sales are closed, its doors refuse its "
		       "tickets, and each of its %lld live order%s is cancelled, paid back and "
		       "told by the workers (`event show %lld` follows them)\n", (long long)id,
		       (long long)v.orders, v.orders == 1 ? "" : "s", (long long)id);
	rc = event_print(db, &v, json);
	db_close(db);
	return rc;
}

static int event_show_cmd(int argc, char **argv)
{
	return event_one(argc, argv, 0);
}

static int event_close_cmd(int argc, char **argv)
{
	return event_one(argc, argv, 1);
}

static int event_set_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *starts = NULL, *price = NULL, *currency = NULL, *rem = NULL;
	struct event_change c = { 0 };
	char actor[EVENT_RUN_ACTOR_MAX];
	int json = 0, npos, rc;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "name", ARG_STR, &c.name, 0, 0, 0, "NAME", "a new name", 0 },
		{ "venue", ARG_STR, &c.venue, 0, 0, 0, "VENUE", "a new venue", 0 },
		{ "starts-at", ARG_STR, &starts, 0, 0, 0, "TIME",
		  "a new start: the venue's time (2026-12-31 20:00) or with an offset", 0 },
		{ "capacity", ARG_INT, &c.capacity, 1, 1000000, 0, NULL,
		  "seats on sale (never below a seat sold)", 0 },
		{ "price", ARG_STR, &price, 0, 0, 0, "AMOUNT",
		  "a new price for the seats sold from now on, with --currency; \"none\": no "
		  "price (the shop stops selling it)", 0 },
		{ "currency", ARG_STR, &currency, 0, 0, 0, "CODE", "the price's ISO 4217 currency",
		  0 },
		{ "reminders", ARG_STR, &rem, 0, 0, 0, "on|off",
		  "whether its buyers get a reminder email (remind_before) ahead of it", 0 },
		ARG_JSON(&json),
		ARG_END,
	};
	static const char usage[] = "event set ID [--name NAME] [--venue VENUE] [--starts-at TIME] "
				    "[--capacity N] [--price AMOUNT|none --currency CODE] "
				    "[--reminders on|off] [--json]";
	char *pos[ARGS_MAX_POS];
	struct event_view v;
	struct db *db;
	enum sd_result r;
	int64_t id;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, usage)) != 0 ||
	    (rc = event_id_arg(pos[0], &id)) != 0)
		return rc;
	c.set = (c.name ? EVENT_SET_NAME : 0) | (c.venue ? EVENT_SET_VENUE : 0) |
		(starts ? EVENT_SET_STARTS : 0) | (opts[4].seen ? EVENT_SET_CAPACITY : 0);
	if (starts && (r = timefmt_parse(starts, &c.starts_at)) != SD_OK)
		return cli_fail(r);
	if (price || currency) {
		c.set |= EVENT_SET_PRICE;
		if (!(price && strcmp(price, "none") == 0 && !currency) &&
		    (r = event_price_parse(price, currency, &c.price_minor, c.currency)) != SD_OK)
			return cli_fail(r);
	}
	if (rem) {
		if (strcmp(rem, "on") != 0 && strcmp(rem, "off") != 0)
			return cli_fail(err_set(SD_INVALID, "--reminders is on or off, not '%.20s'",
						rem));
		c.set |= EVENT_SET_REMINDERS;
		c.reminders = strcmp(rem, "on") == 0;
	}
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	cli_actor(actor, sizeof actor);
	c.actor = actor;
	if ((r = event_set(db, id, &c, &v, NULL)) != SD_OK) {
		db_close(db);
		return cli_fail(r);
	}
	rc = event_print(db, &v, json);
	db_close(db);
	return rc;
}

static const struct cli_cmd event_subs[] = {
	{ "add", event_add_cmd, "add an event on sale (prints its id)", NULL, 0 },
	{ "ls", event_ls_cmd, "list the events: start, sold, admitted, state", NULL, 0 },
	{ "show", event_show_cmd, "one event: its start, seats sold and admitted, its sales",
	  NULL, 0 },
	{ "set", event_set_cmd, "change an event's name, venue, start, capacity, price or "
	  "reminders (a sold event's new start or venue: each buyer told, once)", NULL, 0 },
	{ "close", event_close_cmd, "stop an event's sales (its doors still admit)", NULL, 0 },
	{ "cancel", event_cancel_cmd, "cancel an event: every order cancelled, paid back and "
	  "told, once", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_event = CLI_NODE("event", NULL, event_subs,
		"events: add, list, show, change, close their sales, cancel");
