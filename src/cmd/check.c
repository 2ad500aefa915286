/*
 * check.c: `stagedoor check [--db PATH] [--json]`: the invariant checks of
 * check.h.  Exit 0 with a short summary on stdout when they hold; 1 with
 * "stagedoor: check failed: <problem>" on stderr naming the first broken
 * one.  --json also prints the report as one JSON object on stdout.
 *
 * Exit statuses: 0 every invariant holds; 1 one is broken (named on stderr,
 * one line) or the database cannot be read; 2 bad usage.  The database is
 * opened as every command opens it (cli_open_db), so a missing, foreign or
 * newer file gets the same one-line error as elsewhere.
 */
#include <stdio.h>

#include "args.h"
#include "check.h"
#include "cli.h"
#include "cmd/commands.h"
#include "db.h"

/* s as a JSON string body (quotes and backslashes escaped, control
 * characters as \u00XX). */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void print_json(const struct check_report *rep)
{
	printf("{\"ok\":%s,\"failed\":", rep->ok ? "true" : "false");
	if (rep->ok)
		printf("null,\"problem\":null");
	else {
		json_str(stdout, check_name(rep->failed));
		printf(",\"problem\":");
		json_str(stdout, rep->problem);
	}
	printf(",\"orders\":%lld,\"tickets\":%lld,\"pdfs\":%lld,\"emails_sent\":%lld,"
	       "\"events\":%lld,\"scheduled\":%lld,\"reminders\":%lld}\n",
	       (long long)rep->orders, (long long)rep->tickets, (long long)rep->pdfs,
	       (long long)rep->emails_sent, (long long)rep->events, (long long)rep->scheduled,
	       (long long)rep->reminders);
}

static int check_main(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL;
	int json = 0;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_STATE_DIR(&state),
		ARG_JSON(&json),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	struct check_report rep;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, "check [--db PATH] [--state-dir DIR] [--json]")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	r = check_db(db, cli_state_dir(state), &rep);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	if (json)
		print_json(&rep);
	if (!rep.ok) {
		fflush(stdout);
		fprintf(stderr, "stagedoor: check failed: %s\n", rep.problem);
		return 1;
	}
	if (json)
		return 0;
	printf("ok: %lld order%s, %lld ticket%s, %lld PDF%s, %lld email%s sent, "
	       "%lld event counter%s; outbox and stream drained%s",
	       (long long)rep.orders, rep.orders == 1 ? "" : "s", (long long)rep.tickets,
	       rep.tickets == 1 ? "" : "s", (long long)rep.pdfs, rep.pdfs == 1 ? "" : "s",
	       (long long)rep.emails_sent, rep.emails_sent == 1 ? "" : "s",
	       (long long)rep.events, rep.events == 1 ? "" : "s",
	       rep.scheduled ? " (scheduled jobs wait)" : "");
	if (rep.reminders)	/* they wait for their day: nothing is owed yet */
		printf("; %lld reminder%s wait%s for %s day", (long long)rep.reminders,
		       rep.reminders == 1 ? "" : "s", rep.reminders == 1 ? "s" : "",
		       rep.reminders == 1 ? "its" : "their");
	printf("\n");
	return 0;
}

const struct cli_cmd cmd_check = CLI_NODE("check", check_main, NULL,
		"the invariants of a drained box; the first broken one named");
