/*
 * jobs.c: `stagedoor jobs ...`: look at and repair the stream's jobs
 * (stats, ls, dead, retry, purge, prune).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
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
	    strcmp(state, "dead") && strcmp(state, "done"))
		return cli_fail(err_set(SD_INVALID,
					"unknown state '%.40s' (ready, scheduled, leased, dead, done)",
					state));
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
		  "ready, scheduled, leased, dead or done", 0 },
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

static const struct cli_cmd jobs_subs[] = {
	{ "stats", jobs_stats_cmd, "jobs per kind: ready, scheduled, leased, dead and done", NULL,
	  0 },
	{ "ls", jobs_ls_cmd, "the jobs, oldest first", NULL, 0 },
	{ "dead", jobs_dead_cmd, "the dead letters and why each died", NULL, 0 },
	{ "retry", jobs_retry_cmd, "a dead job back on the stream (its attempts start again)", NULL,
	  0 },
	{ "purge", jobs_purge_cmd, "delete the dead letters", NULL, 0 },
	{ "prune", jobs_prune_cmd, "delete finished jobs older than the retention", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_jobs = CLI_NODE("jobs", NULL, jobs_subs,
		"look at and repair the stream's jobs");
