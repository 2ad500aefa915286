/*
 * enqueue.c: `stagedoor enqueue KIND JSON`: one job onto the stream.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "db.h"
#include "help.h"
#include "queue.h"
#include "worker.h"

static int enqueue_main(int argc, char **argv)
{
	const char *dbp = NULL, *job_id = NULL;
	int64_t delay = 0, prio = 0;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "job-id", ARG_STR, &job_id, 0, 0, 0, "ID",
		  "the job's id (default: a new one); a handler's technique keys its effect by it, "
		  "so two entries with one id do their work once", 0 },
		{ "delay-ms", ARG_INT, &delay, 0, 366LL * 24 * 3600 * 1000, 0, NULL,
		  "run no sooner than this many ms from now", 0 },
		{ "priority", ARG_INT, &prio, -1000000, 1000000, 0, NULL,
		  "lower runs first (-1000000..1000000)", 0 },
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], out[QUEUE_JOB_ID_MAX + 1];
	struct enqueue e = { 0 };
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 2, 2,
			"enqueue KIND JSON [--job-id ID] [--delay-ms N] [--priority N]")) != 0)
		return rc;
	/* check what needs no database first: bad input never touches the file */
	if ((r = queue_kind_valid(pos[0])) != SD_OK ||
	    (job_id && (r = queue_job_id_valid(job_id)) != SD_OK))
		return cli_fail(r);
	/* the relay's ids name outbox rows; a hand-made one could pose as one */
	if (job_id && strncmp(job_id, "outbox:", 7) == 0)
		return cli_fail(err_set(SD_INVALID, "job ids starting with 'outbox:' belong to the "
					"relay; choose another --job-id"));
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	e.kind = pos[0];
	e.payload = pos[1];
	e.job_id = job_id;
	e.delay_ms = delay;
	e.priority = prio;
	r = queue_enqueue(db, &e, out);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("%s\n", out);
	return 0;
}

const struct cli_cmd cmd_enqueue = CLI_NODE("enqueue", enqueue_main, NULL,
		"add a job to the stream");
