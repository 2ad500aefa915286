/*
 * event.c: `stagedoor event add`: an event on sale.  Parsing and
 * printing only; the work is in events.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "db.h"
#include "events.h"
#include "orders.h"
#include "text.h"
#include "timefmt.h"

static int event_add_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *name = NULL, *venue = NULL, *starts = NULL;
	int64_t capacity = 0, id = 0;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "name", ARG_STR, &name, 0, 0, 0, "NAME",
		  "the event's name (1 to 200 bytes of UTF-8)", 0 },
		{ "venue", ARG_STR, &venue, 0, 0, 0, "VENUE",
		  "where it is", 0 },
		{ "starts-at", ARG_STR, &starts, 0, 0, 0, "TIME",
		  "when it starts, ISO 8601 with a zone (2026-12-31T20:00Z)", 0 },
		{ "capacity", ARG_INT, &capacity, 1, 1000000, 0, NULL,
		  "seats on sale (1..1000000)", 0 },
		ARG_END,
	};
	static const char usage[] =
		"event add --name NAME --venue VENUE --starts-at ISO8601 --capacity N";
	char *pos[ARGS_MAX_POS];
	struct event_new e;
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
	    (r = text_field_valid("venue", venue)) != SD_OK)
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

static const struct cli_cmd event_subs[] = {
	{ "add", event_add_cmd, "add an event on sale (prints its id)", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_event = CLI_NODE("event", NULL, event_subs,
		"events on sale");
