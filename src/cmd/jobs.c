/*
 * jobs.c: `stagedoor jobs ...`: look at and repair the stream's jobs
 * (stats, ls, dead, retry, purge, prune), and control them (pause, resume,
 * limit, controls, cancel: controls.h).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "controls.h"
#include "db.h"
#include "help.h"
#include "queue.h"
#include "worker.h"

struct list_out {
	int json;
	int n;
	FILE *f;	/* the listing is built here and printed only when complete */
};

static void print_row(const struct job_row *jr, void *arg)
{
	struct list_out *lo = arg;

	if (lo->json) {
		fprintf(lo->f, "%s%s", lo->n ? ",\n " : "", jr->json);
	} else {
		if (lo->n == 0)
			fprintf(lo->f, "%-9s %-32s %-16s %4s %4s  %s\n", "STATE", "JOB_ID", "KIND",
				"DLV", "ATT", "LAST_ERROR");
		fprintf(lo->f, "%-9s %-32s %-16s %4lld %4lld  %s\n", jr->state, jr->job_id,
			jr->kind, (long long)jr->deliveries, (long long)jr->attempts,
			jr->last_error ? jr->last_error : "-");
	}
	lo->n++;
}

static int jobs_list(struct db *db, const char *state, const char *kind, int64_t limit, int json)
{
	struct list_out lo = { json, 0 };
	enum sd_result r;

	if (state && strcmp(state, "ready") && strcmp(state, "scheduled") && strcmp(state, "leased") &&
	    strcmp(state, "dead") && strcmp(state, "done") && strcmp(state, "cancelled"))
		return cli_fail(err_set(SD_INVALID, "unknown state '%.40s' (ready, scheduled, leased, "
					"dead, done, cancelled)", state));
	char *buf = NULL;
	size_t len = 0;

	if (!(lo.f = open_memstream(&buf, &len)))
		return cli_fail(err_set(SD_NOMEM, "out of memory"));
	if (json)
		fputc('[', lo.f);
	r = queue_list(db, state, kind, (int)limit, print_row, &lo);
	if (json)
		fputs("]\n", lo.f);
	fclose(lo.f);
	if (r == SD_OK)
		fwrite(buf, 1, len, stdout);
	free(buf);
	return r == SD_OK ? 0 : cli_fail(r);
}

static int jobs_stats(struct db *db, int json)
{
	struct queue_counts *rows, total;
	enum sd_result r;
	int n, i;

	if ((r = queue_stats(db, &rows, &n, &total)) != SD_OK)
		return cli_fail(r);
	if (json) {
		printf("{\"total\":{\"ready\":%lld,\"scheduled\":%lld,\"leased\":%lld,\"dead\":%lld,"
		       "\"done\":%lld},\"kinds\":{", (long long)total.ready,
		       (long long)total.scheduled, (long long)total.leased, (long long)total.dead,
		       (long long)total.done);
		/* kind names are [a-z0-9_.-]: nothing to escape */
		for (i = 0; i < n; i++)
			printf("%s\"%s\":{\"ready\":%lld,\"scheduled\":%lld,\"leased\":%lld,"
			       "\"dead\":%lld,\"done\":%lld}", i ? "," : "", rows[i].kind,
			       (long long)rows[i].ready, (long long)rows[i].scheduled,
			       (long long)rows[i].leased, (long long)rows[i].dead,
			       (long long)rows[i].done);
		printf("}}\n");
	} else {
		printf("%-20s %9s %9s %9s %9s %9s\n", "KIND", "READY", "SCHEDULED", "LEASED", "DEAD",
		       "DONE");
		for (i = 0; i < n; i++)
			printf("%-20s %9lld %9lld %9lld %9lld %9lld\n", rows[i].kind,
			       (long long)rows[i].ready, (long long)rows[i].scheduled,
			       (long long)rows[i].leased, (long long)rows[i].dead,
			       (long long)rows[i].done);
		printf("%-20s %9lld %9lld %9lld %9lld %9lld\n", "(total)", (long long)total.ready,
		       (long long)total.scheduled, (long long)total.leased, (long long)total.dead,
		       (long long)total.done);
	}
	free(rows);
	return 0;
}

/* jobs_cmd: `jobs SUB`, the words after SUB; one table for them all */
static int jobs_cmd(const char *sub, int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL, *kind = NULL;
	int64_t limit = 1000, older = QUEUE_RETENTION_MS_DEFAULT;
	int json = 0, dead = 0;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "state", ARG_STR, &state, 0, 0, 0, "STATE",
		  "ready, scheduled, leased, dead, done or cancelled", 0 },
		{ "kind", ARG_STR, &kind, 0, 0, 0, "KIND",
		  "only jobs of this kind", 0 },
		{ "limit", ARG_INT, &limit, 1, 1000000, 0, NULL,
		  "at most this many rows", 0 },
		{ "older-than-ms", ARG_INT, &older, 0, 3650LL * 24 * 3600 * 1000, 0, NULL,
		  "finished jobs older than this are deleted (default 7 days)", 0 },
		ARG_JSON(&json),
		{ "dead", ARG_FLAG, &dead, 0, 0, 0, NULL,
		  "the dead letters: say it to mean it", 0 },
		ARG_END,
	};
	/* each subcommand's own options, from the one table */
	static const struct { const char *sub, *takes; } subs[] = {
		{ "stats", " db json " },	{ "ls", " db state kind limit json " },
		{ "dead", " db kind limit json " }, { "retry", " db " },
		{ "purge", " db dead " },	{ "prune", " db older-than-ms " },
	};
	struct arg_opt mine[sizeof opts / sizeof opts[0]];
	char usage[256], *pos[ARGS_MAX_POS];
	struct db *db;
	enum sd_result r;
	int64_t n = 0;
	int npos, rc, want = strcmp(sub, "retry") == 0, k = 0, o = 0;
	size_t i, j;

	for (j = 0; j < sizeof subs / sizeof subs[0] && strcmp(subs[j].sub, sub) != 0; j++)
		;
	o = snprintf(usage, sizeof usage, "jobs %s%s", sub, want ? " JOB_ID" : "");
	for (i = 0; opts[i].name; i++) {
		char word[32];

		snprintf(word, sizeof word, " %s ", opts[i].name);
		if (j == sizeof subs / sizeof subs[0] || !strstr(subs[j].takes, word))
			continue;
		mine[k++] = opts[i];
		if (strcmp(opts[i].name, "db") != 0 && o < (int)sizeof usage)
			o += snprintf(usage + o, sizeof usage - (size_t)o, " %s--%s%s%s%s",
				      strcmp(opts[i].name, "dead") ? "[" : "", opts[i].name,
				      opts[i].metavar || opts[i].type == ARG_INT ? " " : "",
				      opts[i].metavar ? opts[i].metavar
				      : opts[i].type == ARG_INT ? "N" : "",
				      strcmp(opts[i].name, "dead") ? "]" : "");
	}
	mine[k] = opts[i];	/* the end */
	if ((rc = cli_parse(argc, argv, mine, pos, &npos, want, want, usage)) != 0)
		return rc;
	if (strcmp(sub, "purge") == 0 && !dead) {
		fprintf(stderr, "stagedoor: 'jobs purge' deletes dead jobs only: say --dead\n");
		return 2;
	}
	if (kind && (r = queue_kind_valid(kind)) != SD_OK)
		return cli_fail(r);
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	if (strcmp(sub, "stats") == 0) {
		rc = jobs_stats(db, json);
	} else if (strcmp(sub, "ls") == 0) {
		rc = jobs_list(db, state, kind, limit, json);
	} else if (strcmp(sub, "dead") == 0) {
		rc = jobs_list(db, "dead", kind, limit, json);
	} else if (strcmp(sub, "retry") == 0) {
		r = queue_dead_retry(db, pos[0], &n);
		rc = r == SD_OK ? (printf("retried %lld\n", (long long)n), 0) : cli_fail(r);
	} else if (strcmp(sub, "purge") == 0) {
		r = queue_dead_purge(db, &n);
		rc = r == SD_OK ? (printf("purged %lld\n", (long long)n), 0) : cli_fail(r);
	} else {
		int64_t total = 0;
		do {
			r = queue_prune_done(db, older, 1000, &n);
			total += n;
		} while (r == SD_OK && n == 1000);
		rc = r == SD_OK ? (printf("pruned %lld\n", (long long)total), 0) : cli_fail(r);
	}
	db_close(db);
	return rc;
}

static int jobs_stats_cmd(int argc, char **argv)
{
	return jobs_cmd("stats", argc, argv);
}

static int jobs_ls_cmd(int argc, char **argv)
{
	return jobs_cmd("ls", argc, argv);
}

static int jobs_dead_cmd(int argc, char **argv)
{
	return jobs_cmd("dead", argc, argv);
}

static int jobs_retry_cmd(int argc, char **argv)
{
	return jobs_cmd("retry", argc, argv);
}

static int jobs_purge_cmd(int argc, char **argv)
{
	return jobs_cmd("purge", argc, argv);
}

static int jobs_prune_cmd(int argc, char **argv)
{
	return jobs_cmd("prune", argc, argv);
}

/* ---- controls ------------------------------------------------------------ */

/* who: "cli:<login>", the name a pause or a cancel is recorded under */
static const char *who(char *buf, size_t size)
{
	const struct passwd *pw = getpwuid(getuid());

	snprintf(buf, size, "cli:%s", pw && pw->pw_name ? pw->pw_name : "?");
	return buf;
}

/* `jobs pause|resume KIND` */
static int pause_cmd(int pause, int argc, char **argv)
{
	const char *dbp = NULL;
	struct arg_opt opts[] = { ARG_DB(&dbp), ARG_END };
	char *pos[ARGS_MAX_POS], by[CONTROLS_WHO_MAX + 1];
	struct db *db;
	enum sd_result r;
	int npos, rc, changed = 0;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1,
			    pause ? "jobs pause KIND" : "jobs resume KIND")) != 0)
		return rc;
	if ((r = queue_kind_valid(pos[0])) != SD_OK)
		return cli_fail(r);
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = pause ? controls_pause(db, pos[0], who(by, sizeof by), &changed)
		  : controls_resume(db, pos[0], &changed);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("%s %s%s\n", pos[0], pause ? "paused" : "resumed",
	       changed ? "" : pause ? " (it already was)" : " (it was not paused)");
	return 0;
}

static int jobs_pause_cmd(int argc, char **argv)
{
	return pause_cmd(1, argc, argv);
}

static int jobs_resume_cmd(int argc, char **argv)
{
	return pause_cmd(0, argc, argv);
}

/* a limit as a table cell: "-" for none */
static const char *cell(int64_t v, char *buf, size_t size)
{
	if (v)
		snprintf(buf, size, "%lld", (long long)v);
	else
		snprintf(buf, size, "-");
	return buf;
}

/* `jobs limit KIND [--rate R] [--concurrency N] [--box-concurrency N] | --none` */
static int jobs_limit_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *rate = NULL;
	int64_t conc = 0, box = 0;
	int none = 0, npos, rc;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "rate", ARG_STR, &rate, 0, 0, 0, "RATE",
		  "N/s, N/m, N/h, N/d or N/<ms>ms, optionally \"burst B\": \"10/s burst 20\"", 0 },
		{ "concurrency", ARG_INT, &conc, 1, CONTROLS_LIMIT_MAX, 0, NULL,
		  "running jobs of the kind at most, over every box", 0 },
		{ "box-concurrency", ARG_INT, &box, 1, CONTROLS_LIMIT_MAX, 0, NULL,
		  "running jobs of the kind at most, on each box", 0 },
		{ "none", ARG_FLAG, &none, 0, 0, 0, NULL, "no limits (a pause stays)", 0 },
		ARG_END,
	};
	struct control_limits lim = { 0 };
	char *pos[ARGS_MAX_POS], text[64], c1[24], c2[24];
	struct db *db;
	enum sd_result r;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1,
			    "jobs limit KIND [--rate RATE] [--concurrency N] [--box-concurrency N] "
			    "| --none")) != 0)
		return rc;
	if (none == (rate || conc || box)) {
		fprintf(stderr, "stagedoor: jobs limit: give the limits (--rate, --concurrency, "
			"--box-concurrency), which replace the kind's, or --none\n");
		return 2;
	}
	if ((r = queue_kind_valid(pos[0])) != SD_OK ||
	    (rate && (r = controls_rate_parse(rate, &lim)) != SD_OK))
		return cli_fail(r);
	lim.concurrency = conc;
	lim.box_concurrency = box;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = controls_limit(db, pos[0], &lim);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	controls_rate_text(&lim, text, sizeof text);
	if (none)
		printf("%s: no limits\n", pos[0]);
	else
		printf("%s: rate %s, concurrency %s, per box %s\n", pos[0], text,
		       cell(conc, c1, sizeof c1), cell(box, c2, sizeof c2));
	return 0;
}

static void controls_print(const struct control *v, int n, int json)
{
	char rate[64], a[24], b[24];
	int i;

	if (json)
		fputc('[', stdout);
	else
		printf("%-24s %-7s %-20s %5s %5s %8s %7s %9s\n", "KIND", "PAUSED", "RATE", "CONC",
		       "BOX", "WAITING", "RUNNING", "WAITED_S");
	for (i = 0; i < n; i++) {
		controls_rate_text(&v[i].lim, rate, sizeof rate);
		if (json)	/* kinds are [a-z0-9_.:-]; who is "cli:<login>" or a token's name */
			printf("%s{\"kind\":\"%s\",\"paused\":%s,\"paused_at\":%lld,"
			       "\"rate\":%s%s%s,\"concurrency\":%lld,\"box_concurrency\":%lld,"
			       "\"waiting\":%lld,\"running\":%lld,\"waited_ms\":%lld}",
			       i ? "," : "", v[i].kind, v[i].paused_at ? "true" : "false",
			       (long long)v[i].paused_at, v[i].lim.rate_n ? "\"" : "",
			       v[i].lim.rate_n ? rate : "null", v[i].lim.rate_n ? "\"" : "",
			       (long long)v[i].lim.concurrency, (long long)v[i].lim.box_concurrency,
			       (long long)v[i].waiting, (long long)v[i].running,
			       (long long)v[i].waited_ms);
		else
			printf("%-24s %-7s %-20s %5s %5s %8lld %7lld %9.1f\n", v[i].kind,
			       v[i].paused_at ? "yes" : "no", rate,
			       cell(v[i].lim.concurrency, a, sizeof a),
			       cell(v[i].lim.box_concurrency, b, sizeof b), (long long)v[i].waiting,
			       (long long)v[i].running, v[i].waited_ms / 1000.0);
	}
	if (json)
		printf("]\n");
}

/* `jobs controls [--json]` */
static int jobs_controls_cmd(int argc, char **argv)
{
	const char *dbp = NULL;
	int json = 0, npos, rc, n;
	struct arg_opt opts[] = { ARG_DB(&dbp), ARG_JSON(&json), ARG_END };
	char *pos[ARGS_MAX_POS];
	struct control *v;
	struct db *db;
	enum sd_result r;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, "jobs controls [--json]")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	r = controls_list(db, &v, &n);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	controls_print(v, n, json);
	free(v);
	return 0;
}

/* `jobs cancel JOB_ID` */
static int jobs_cancel_cmd(int argc, char **argv)
{
	const char *dbp = NULL;
	struct arg_opt opts[] = { ARG_DB(&dbp), ARG_END };
	char *pos[ARGS_MAX_POS], by[CONTROLS_WHO_MAX + 1];
	int64_t n = 0, running = 0;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, "jobs cancel JOB_ID")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = controls_cancel(db, pos[0], who(by, sizeof by), &n, &running);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("cancelled %s%s\n", pos[0], running ? ": it was running; its worker finishes the "
	       "run it is in, and its ack is refused" : "");
	return 0;
}

static const struct cli_cmd jobs_subs[] = {
	{ "stats", jobs_stats_cmd, "jobs per kind: ready, scheduled, leased, dead and done", NULL,
	  0 },
	{ "ls", jobs_ls_cmd, "the jobs, oldest first", NULL, 0 },
	{ "dead", jobs_dead_cmd, "the dead letters and why each died", NULL, 0 },
	{ "retry", jobs_retry_cmd, "a dead job back on the stream (its attempts start again)", NULL,
	  0 },
	{ "purge", jobs_purge_cmd, "delete the dead letters", NULL, 0 },
	{ "prune", jobs_prune_cmd, "delete finished jobs older than the retention", NULL, 0 },
	{ "pause", jobs_pause_cmd, "stop claiming a kind (or sqs:QUEUE); running jobs finish",
	  NULL, 0 },
	{ "resume", jobs_resume_cmd, "claim a paused kind again", NULL, 0 },
	{ "limit", jobs_limit_cmd, "a kind's rate and concurrency limits, over every box", NULL,
	  0 },
	{ "controls", jobs_controls_cmd, "the paused and limited kinds, and what waits for them",
	  NULL, 0 },
	{ "cancel", jobs_cancel_cmd, "take a job that waits off the stream; one that runs is "
	  "refused its ack", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_jobs = CLI_NODE("jobs", NULL, jobs_subs,
		"look at and repair the stream's jobs");
