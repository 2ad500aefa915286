/*
 * restore.c: `stagedoor restore DEST --db PATH`: a new box from a backup
 * (backup.h), which takes over from the box that was backed up.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "args.h"
#include "backup.h"
#include "backup_sched.h"
#include "cli.h"
#include "clock.h"
#include "cmd/commands.h"
#include "db.h"

static int restore_main(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_STATE_DIR(&state),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], line[160];
	struct backup_info info;
	struct db *db;
	enum sd_result r;
	int npos, rc;
	int64_t t0 = clock_mono_us(), leases, claims;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1,
			    "restore DEST --db PATH [--state-dir DIR]")) != 0)
		return rc;
	if (!dbp || !*dbp)
		return cli_fail(err_set(SD_INVALID, "restore needs --db PATH: the new box's "
					"database (it must not exist)"));
	if ((r = backup_restore(pos[0], dbp, cli_state_dir(state), &info)) != SD_OK)
		return cli_fail(r);
	/* the new box opens as any other: its schema is this program's */
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = backup_take_over(db, &leases, &claims);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	backup_info_format(&info, line, sizeof line);
	printf("restored %s: %s, %.2f s\n", dbp, line, (double)(clock_mono_us() - t0) / 1e6);
	printf("taken over from the backed-up box: %lld lease%s ended, %lld mail claim%s "
	       "released\n", (long long)leases, leases == 1 ? "" : "s", (long long)claims,
	       claims == 1 ? "" : "s");
	return 0;
}

const struct cli_cmd cmd_restore = CLI_NODE("restore", restore_main, NULL,
		"a new box from a backup");
