/*
 * schedule.c: `stagedoor schedule add|ls|rm`: periodic jobs (schedule.h),
 * made by `run` on every box, each period once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "db.h"
#include "schedule.h"
#include "text.h"
#include "timefmt.h"

#define ADD_USAGE "schedule add NAME --every DURATION|--cron EXPR [--timezone ZONE] KIND [JSON] " \
		  "[--missed once|skip]"

/* s's when from --every or --cron and --timezone; 2 (said) when wrong */
static int add_when(struct schedule *s, const char *every, const char *cron, const char *zone)
{
	if (!every == !cron) {
		fprintf(stderr, "stagedoor: schedule add: give --every DURATION or --cron EXPR, "
			"one of them\nusage: stagedoor %s\n", ADD_USAGE);
		return 2;
	}
	if (every && text_duration_ms(every, &s->every_ms) != 0) {
		fprintf(stderr, "stagedoor: schedule add: --every takes a period such as 30s, 5m, "
			"1h or 1d\n");
		return 2;
	}
	if ((cron && strlen(cron) >= sizeof s->cron) || (zone && strlen(zone) >= sizeof s->timezone))
		return cli_fail(err_set(SD_INVALID, "%s is too long", cron && strlen(cron) >=
					sizeof s->cron ? "the cron expression" : "the zone's name"));
	snprintf(s->cron, sizeof s->cron, "%s", cron ? cron : "");
	snprintf(s->timezone, sizeof s->timezone, "%s", zone ? zone : "");
	return 0;
}

/* `schedule add NAME --every DURATION|--cron EXPR [--timezone ZONE] KIND [JSON]` */
static int schedule_add_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *every = NULL, *cron = NULL, *zone = NULL, *missed = "once";
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "every", ARG_STR, &every, 0, 0, 0, "DURATION",
		  "a period: 30s, 5m, 1h, 1d (periods start on the epoch's multiples, UTC)", 0 },
		{ "cron", ARG_STR, &cron, 0, 0, 0, "EXPR",
		  "the local times to run at: minute hour day-of-month month day-of-week, "
		  "like \"0 9 * * MON\"", 0 },
		{ "timezone", ARG_STR, &zone, 0, 0, 0, "ZONE",
		  "the zone of --cron's times (default: the venue's, the setting timezone)", 0 },
		{ "missed", ARG_STR, &missed, 0, 0, 0, "once|skip",
		  "after the box was down over periods: make one job for them (once, the "
		  "default) or none (skip)", 0 },
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], when[TIMEFMT_TEXT_MAX];
	struct schedule s;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 2, 3, ADD_USAGE)) != 0)
		return rc;
	memset(&s, 0, sizeof s);
	if ((rc = add_when(&s, every, cron, zone)) != 0)
		return rc;
	if (strcmp(missed, "once") != 0 && strcmp(missed, "skip") != 0) {
		fprintf(stderr, "stagedoor: schedule add: --missed is once or skip\n");
		return 2;
	}
	snprintf(s.name, sizeof s.name, "%.64s", pos[0]);
	snprintf(s.kind, sizeof s.kind, "%.64s", pos[1]);
	s.payload = npos > 2 ? pos[2] : NULL;
	s.skip_missed = strcmp(missed, "skip") == 0;
	if (strlen(pos[0]) > SCHEDULE_NAME_MAX)
		return cli_fail(schedule_name_valid(pos[0]));
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = schedule_add(db, &s);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	timefmt_format(s.next_at, when, sizeof when);
	if (every)
		printf("schedule %s: %s every %s, first at %s\n", s.name, s.kind, every, when);
	else
		printf("schedule %s: %s at \"%s\" in %s, first at %s\n", s.name, s.kind, s.cron,
		       s.timezone[0] ? s.timezone : timefmt_zone_name(), when);
	return 0;
}

/* a JSON string or null, for text of plain characters (a cron, a zone) */
#define Q(t) (t)[0] ? "\"" : "", (t)[0] ? (t) : "null", (t)[0] ? "\"" : ""

static void print_one(const struct schedule *s, int json, int first)
{
	char next[TIMEFMT_TEXT_MAX], last[TIMEFMT_TEXT_MAX] = "-", when[CRON_TEXT_MAX + 80];
	char every[24];

	if (json) {
		snprintf(every, sizeof every, "%lld", (long long)s->every_ms);
		/* names and kinds are [a-z0-9_.-]; the payload is stored JSON */
		printf("%s{\"name\":\"%s\",\"kind\":\"%s\",\"payload\":%s,\"every_ms\":%s,"
		       "\"cron\":%s%s%s,\"timezone\":%s%s%s,"
		       "\"missed\":\"%s\",\"next_at\":%lld,\"last_at\":%lld,\"last_job_id\":%s%s%s,"
		       "\"made\":%lld}", first ? "" : ",", s->name, s->kind, s->payload,
		       s->every_ms ? every : "null", Q(s->cron), Q(s->timezone),
		       s->skip_missed ? "skip" : "once",
		       (long long)s->next_at, (long long)s->last_at, Q(s->last_job_id),
		       (long long)s->made);
		return;
	}
	timefmt_format(s->next_at, next, sizeof next);
	if (s->last_at)
		timefmt_format(s->last_at, last, sizeof last);
	if (s->every_ms)
		snprintf(when, sizeof when, "every %llds", (long long)(s->every_ms / 1000));
	else
		snprintf(when, sizeof when, "%s%s%s", s->cron, s->timezone[0] ? " " : "",
			 s->timezone);
	printf("%-20s %-18s %-30s %-5s %-24s %-24s %6lld\n", s->name, s->kind, when,
	       s->skip_missed ? "skip" : "once", next, last, (long long)s->made);
}

/* `schedule ls [--json]` */
static int schedule_ls_cmd(int argc, char **argv)
{
	const char *dbp = NULL;
	int json = 0, npos, rc, n, i;
	struct arg_opt opts[] = { ARG_DB(&dbp), ARG_JSON(&json), ARG_END };
	char *pos[ARGS_MAX_POS];
	struct schedule *v;
	struct db *db;
	enum sd_result r;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, "schedule ls [--json]")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	r = schedule_list(db, &v, &n);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	if (json)
		fputc('[', stdout);
	else
		printf("%-20s %-18s %-30s %-5s %-24s %-24s %6s\n", "NAME", "KIND", "WHEN", "MISS",
		       "NEXT", "LAST", "MADE");
	for (i = 0; i < n; i++)
		print_one(&v[i], json, i == 0);
	if (json)
		printf("]\n");
	schedule_free_all(v, n);
	return 0;
}

/* `schedule rm NAME` */
static int schedule_rm_cmd(int argc, char **argv)
{
	const char *dbp = NULL;
	struct arg_opt opts[] = { ARG_DB(&dbp), ARG_END };
	char *pos[ARGS_MAX_POS];
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, "schedule rm NAME")) != 0)
		return rc;
	if ((r = schedule_name_valid(pos[0])) != SD_OK)
		return cli_fail(r);
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = schedule_rm(db, pos[0]);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("schedule %s removed (the jobs it made stay)\n", pos[0]);
	return 0;
}

static const struct cli_cmd schedule_subs[] = {
	{ "add", schedule_add_cmd, "a periodic job: one job of KIND (or, for sqs:QUEUE, a "
	  "message with the JSON as its body) every period, made once whatever the boxes and "
	  "restarts", NULL, 0 },
	{ "ls", schedule_ls_cmd, "the schedules, their next and last periods", NULL, 0 },
	{ "rm", schedule_rm_cmd, "remove a schedule", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_schedule = CLI_NODE("schedule", NULL, schedule_subs,
		"periodic jobs, made by run on every box, each period once");
