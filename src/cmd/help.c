/*
 * help.c: `stagedoor help`: help for a command, and the man pages and the
 * bash completion made from the command tree (help.h).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "help.h"
#include "version.h"

/* ---- the command ----------------------------------------------------------- */

/* today: YYYY-MM-DD of $SOURCE_DATE_EPOCH (reproducible builds), else now */
static void today(char *buf, size_t size)
{
	const char *sde = getenv("SOURCE_DATE_EPOCH");
	time_t t = sde && *sde ? (time_t)strtoll(sde, NULL, 10) : time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%d", &tm);
}

static int help_main(int argc, char **argv)
{
	int64_t man = 0;
	const char *comp = NULL;
	struct arg_opt opts[] = {
		{ "man", ARG_INT, &man, 1, 5, 0, "1|5",
		  "print a man page in roff: 1 for stagedoor(1), 5 for stagedoor.conf(5)", 0 },
		{ "completion", ARG_STR, &comp, 0, 0, 0, "bash",
		  "print the bash completion script (commands, subcommands, flags)", 0 },
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], err[256] = "", date[16];
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0,
			    "help [COMMAND [SUBCOMMAND]] | help --man 1|5 | help --completion bash"))
	    != 0)
		return rc;
	if (opts[0].seen == opts[1].seen) {
		fprintf(stderr, "stagedoor: usage: stagedoor help COMMAND, or exactly one of "
				"--man 1|5 and --completion bash\n");
		return 2;
	}
	today(date, sizeof date);
	if (opts[0].seen)
		rc = help_man(help_root(), stdout, (int)man, STAGEDOOR_VERSION, date, err, sizeof err);
	else if (strcmp(comp, "bash") == 0)
		rc = help_completion(help_root(), stdout, err, sizeof err);
	else
		return fprintf(stderr, "stagedoor: --completion knows bash, not '%s'\n", comp), 2;
	if (rc != 0) {
		fprintf(stderr, "stagedoor: %s%s\n", opts[0].seen && man != 1 ? "" :
			"this command did not answer --help before doing its work: ", err);
		return 1;
	}
	return fflush(stdout) == 0 ? 0 : 1;
}

const struct cli_cmd cmd_help = CLI_NODE("help", help_main, NULL,
		"help for a command, the man pages and the bash completion");
