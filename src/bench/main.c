/*
 * main.c: stagedoor-bench's start: the log level from the environment,
 * --version, and its commands (bench.h) under the help module's dispatch,
 * so each has --help as the product's commands do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "help.h"
#include "log.h"
#include "version.h"

static const struct cli_cmd bench_root = {
	"stagedoor-bench", NULL,
	"Stagedoor Box's benchmarks: each measures the box's own code on this machine and prints "
	"its figures (dist/doc/testing.md says what each measures).",
	bench_commands, 0
};

int main(int argc, char **argv)
{
	int rc;

	if ((rc = log_level_from_env("stagedoor-bench")) != 0)
		return rc;
	if (argc >= 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0))
		return version_print(stdout) == 0 ? 0 : 1;
	if ((rc = cli_box_apply(NULL)) != 0)
		return rc;
	rc = help_dispatch(&bench_root, argc - 1, argv + 1);
	return rc == CLI_HELPED ? 0 : rc;
}
