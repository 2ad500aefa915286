/*
 * main.c: the process's start (the log level and failpoints from the
 * environment, --version) and the command tree's dispatch (src/cmd/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd/commands.h"
#include "db.h"
#include "failpoint.h"
#include "help.h"
#include "log.h"
#include "result.h"
#include "runlock.h"
#include "version.h"

static int has_config_flag(int argc, char **argv)
{
	int i;

	for (i = 2; i < argc; i++)
		if (strcmp(argv[i], "--config") == 0 || strncmp(argv[i], "--config=", 9) == 0)
			return 1;
	return 0;
}

/* env_setup: $STAGEDOOR_LOG_LEVEL, and $STAGEDOOR_FAILPOINTS in a test build; 0 or 2 */
static int env_setup(void)
{
	int rc = log_level_from_env("stagedoor");
#ifdef STAGEDOOR_FAILPOINTS
	const char *fp = getenv("STAGEDOOR_FAILPOINTS");

	if (rc == 0 && fp && *fp && failpoint_check_spec(fp) != SD_OK) {
		fprintf(stderr, "stagedoor: %s\n", err_msg());
		return 2;
	}
#endif
	/* a product build has no failpoints and never reads them (failpoint.h) */
	return rc;
}

int main(int argc, char **argv)
{
	int rc;

	if ((rc = env_setup()) != 0)
		return rc;
	if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0))
		return version_print(stdout) == 0 ? 0 : 1;
	/* the box's files (the key, the blob store) from the environment or the
	 * config file, except for help (a broken file must not hide it), for
	 * `config` (it reports a broken file itself), and for a command given
	 * --config (it applies that file's settings when it loads it) */
	if (argc >= 2 && !help_wanted(argc - 1, argv + 1) && strcmp(argv[1], "config") != 0 &&
	    !has_config_flag(argc, argv) && (rc = cli_box_apply(NULL)) != 0)
		return rc;
	db_migrate_guard_set(runlock_guard);
	rc = help_dispatch(commands_root(), argc - 1, argv + 1);
	return rc == CLI_HELPED ? 0 : rc;
}
