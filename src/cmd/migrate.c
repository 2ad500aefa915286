/*
 * migrate.c: `stagedoor migrate`: a box copied to an empty PostgreSQL database.
 */
#include <stdio.h>

#include "args.h"
#include "boxmove.h"
#include "check.h"
#include "cli.h"
#include "cmd/commands.h"
#include "db.h"

/* the verdict in one line: "ok" or "<check>: <problem>" */
static void verdict(const struct check_report *rep, char *buf, size_t size)
{
	if (rep->ok)
		snprintf(buf, size, "ok");
	else
		snprintf(buf, size, "%s: %s", check_name(rep->failed), rep->problem);
}

static int migrate_main(int argc, char **argv)
{
	const char *from = NULL, *to = NULL, *state = NULL;
	struct arg_opt opts[] = {
		{ "from", ARG_STR, &from, 0, 0, 0, "PATH",
		  "the SQLite box to copy", 0 },
		{ "to", ARG_STR, &to, 0, 0, 0, "URI",
		  "the empty PostgreSQL database, postgresql://...", 0 },
		ARG_STATE_DIR(&state),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], before[CHECK_PROBLEM_MAX + 64], after[CHECK_PROBLEM_MAX + 64];
	struct check_report src_rep, dst_rep;
	struct boxmove_report rep;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0,
			    "migrate --from PATH --to postgresql://... [--state-dir DIR]")) != 0)
		return rc;
	if (!from || !to) {
		fprintf(stderr, "stagedoor: migrate needs --from (the box's SQLite file) and --to "
				"(a postgresql:// URI of an empty database)\n");
		return 2;
	}
	state = cli_state_dir(state);
	if ((r = check_run(from, state, &src_rep)) != SD_OK)
		return cli_fail(r);
	printf("copying %s into PostgreSQL\n", from);
	fflush(stdout);
	if ((r = boxmove_run(from, state, to, stdout, &rep)) != SD_OK)
		return cli_fail(r);
	printf("copied %d tables in %lld ms (%lld PDFs from the state folder's blobs/); "
	       "row counts match\n", rep.n_tables, (long long)rep.ms,
	       (long long)rep.pdfs_from_files);
	if ((r = check_run(to, state, &dst_rep)) != SD_OK)
		return cli_fail(r);
	verdict(&src_rep, before, sizeof before);
	verdict(&dst_rep, after, sizeof after);
	printf("check of the source: %s\ncheck of the target: %s\n", before, after);
	if (src_rep.ok != dst_rep.ok || src_rep.failed != dst_rep.failed) {
		fprintf(stderr, "stagedoor: migrate: the target does not check as the source "
				"does\n");
		return 1;
	}
	printf("every box on PostgreSQL needs ticket_key_file = the box's ticket.key and a "
	       "state_dir of its own; in-flight jobs finish there once\n");
	return 0;
}

const struct cli_cmd cmd_migrate = CLI_NODE("migrate", migrate_main, NULL,
		"copy a box to an empty PostgreSQL database");
