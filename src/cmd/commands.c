/*
 * commands.c: the dispatch table: every top-level command, in the order
 * `stagedoor help`, the man page and the completion list them.
 */

#include <stddef.h>

#include "cmd/commands.h"

static const struct cli_cmd *const table[] = {
	&cmd_run, &cmd_serve, &cmd_shop, &cmd_sqs, &cmd_init, &cmd_config, &cmd_enqueue, &cmd_worker, &cmd_relay,
	&cmd_jobs, &cmd_schedule, &cmd_event, &cmd_order, &cmd_scan, &cmd_token, &cmd_tls, &cmd_demo,
	&cmd_backup, &cmd_restore, &cmd_migrate, &cmd_check, &cmd_mail, &cmd_help,
};

#define N_COMMANDS (sizeof table / sizeof table[0])

/* The tree's root holds its commands by value (help.h's subs array), made
 * once from the table: C cannot copy another file's constants at compile
 * time.  main calls this before any thread starts. */
const struct cli_cmd *commands_root(void)
{
	static struct cli_cmd subs[N_COMMANDS + 1];
	static struct cli_cmd root = {
		"stagedoor", NULL,
		"Stagedoor Box runs a ticket seller's background jobs (tickets rendered, emailed "
		"and counted, each exactly once in effect) on one SQLite database in WAL mode, or "
		"on PostgreSQL.",
		NULL, 0
	};
	size_t i;

	if (!root.subs) {
		for (i = 0; i < N_COMMANDS; i++)
			subs[i] = *table[i];
		root.subs = subs;	/* subs[N_COMMANDS] stays zero: the end */
	}
	return &root;
}
