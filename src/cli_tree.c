/*
 * cli_tree.c: the commands, as one tree (help.h).  Each summary is the line
 * `stagedoor help`, the man page and the completion show; each function
 * parses its own options from its own table.
 */
#include "cli.h"
#include "cli_backup.h"
#include "cli_check.h"
#include "cli_migrate.h"
#include "cli_tls.h"
#include "cli_token.h"
#include "help.h"

static const struct cli_cmd commands[] = {
	{ "run", cli_run, "the whole appliance: relay, workers, HTTP API, maintenance and backups, "
			  "supervised (what the systemd unit starts)", NULL, 0 },
	{ "serve", cli_serve, "the HTTP API, dashboard and door page alone (run starts it)", NULL,
	  0 },
	{ "init", cli_init, "create the database, ticket.key and api.token, or migrate an older "
			    "database", NULL, 0 },
	{ "config", NULL, "the settings in force", cli_config_subs, 0 },
	{ "enqueue", cli_enqueue, "add a job to the stream", NULL, 0 },
	{ "worker", cli_worker, "run jobs (run starts these)", NULL, 0 },
	{ "relay", cli_relay, "publish outbox rows to the stream (run starts it)", NULL, 0 },
	{ "jobs", NULL, "look at and repair the stream's jobs", cli_jobs_subs, 0 },
	{ "event", NULL, "events on sale", cli_event_subs, 0 },
	{ "order", NULL, "sell, find and change orders", cli_order_subs, 0 },
	{ "scan", cli_scan, "admit a ticket at the door (exit 0 admitted, 3 already scanned, "
			    "4 invalid, 5 cancelled)", NULL, 0 },
	{ "token", NULL, "the API's tokens with roles", cli_token_subs, 0 },
	{ "tls", NULL, "the box CA and the HTTPS certificate", cli_tls_subs, 0 },
	{ "demo", cli_demo, "the whole pipeline on a fresh ./var/demo, mail into a maildir: no "
			    "network", NULL, 0 },
	{ "backup", cli_backup, "a consistent copy of a running box into a new folder",
	  cli_backup_subs, 0 },
	{ "restore", cli_restore, "a new box from a backup", NULL, 0 },
	{ "migrate", cli_migrate, "copy a box to an empty PostgreSQL database", NULL, 0 },
	{ "check", cli_check, "the invariants of a drained box; the first broken one named", NULL,
	  0 },
	{ "mail", NULL, "the mail transport", cli_mail_subs, 0 },
	{ "bench", NULL, "measure the box on this machine", cli_bench_subs, 0 },
	{ "help", cli_help_cmd, "help for a command, the man pages and the bash completion", NULL,
	  0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cli_root = {
	"stagedoor", NULL,
	"Stagedoor Box runs a ticket seller's background jobs (tickets rendered, emailed and "
	"counted, each exactly once in effect) on one SQLite database in WAL mode, or on "
	"PostgreSQL.",
	commands, 0
};
