/*
 * init.c: `stagedoor init`: a new box (the database, ticket.key and
 * api.token), or an older database migrated.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "api.h"
#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "db.h"
#include "help.h"
#include "statedir.h"
#include "text.h"

static int init_main(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_STATE_DIR(&state),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], shown[1024];
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, "init [--db PATH] [--state-dir DIR]")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, DB_OPEN_CREATE, DB_SYNC_FULL, &db)) != 0)
		return rc;
	if ((r = statedir_init(db_path(db), cli_state_dir(state))) != SD_OK ||
	    (r = token_ensure(db_path(db), cli_state_dir(state))) != SD_OK) {
		db_close(db);
		return cli_fail(r);
	}
	text_redact_url(db_path(db), shown, sizeof shown);
	printf("%s: schema version %d\n", shown, db_schema_version(db));
	db_close(db);
	return 0;
}

const struct cli_cmd cmd_init = CLI_NODE("init", init_main, NULL,
		"create the database, ticket.key and api.token, or migrate an older database");
