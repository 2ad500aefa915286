/*
 * config.c: `stagedoor config show`: the settings in force, each with
 * where it came from.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "config.h"
#include "db.h"
#include "help.h"

static int config_show_cmd(int argc, char **argv)
{
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	static const char usage[] = "config show " CLI_CONFIG_USAGE;
	char *pos[ARGS_MAX_POS];
	struct config cfg;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, usage)) != 0)
		return rc;
	if ((r = config_resolve(&cfg, cf.file, cf.value)) != SD_OK)
		return cli_fail(r);
	config_show(&cfg, stdout);
	config_free(&cfg);
	return 0;
}

static const struct cli_cmd config_subs[] = {
	{ "show", config_show_cmd, "every setting in force and where it came from (flag, "
				   "environment, file or default)", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_config = CLI_NODE("config", NULL, config_subs,
		"the settings in force");
