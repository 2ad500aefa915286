/*
 * main.c: stagedoor's subcommand dispatch, and nothing else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_backup.h"
#include "cli_check.h"
#include "cli_migrate.h"
#include "cli_tls.h"
#include "cli_token.h"
#include "failpoint.h"
#include "result.h"
#include "log.h"

#define STAGEDOOR_VERSION "0.1.0"

static const struct {
	const char *name;
	int (*fn)(int, char **);
	const char *help;
} commands[] = {
	{ "run", cli_run, "the whole appliance: relay, workers, maintenance, supervision:\n"
			 "           run [--workers N] [--config FILE] [--KEY VALUE ...]" },
	{ "serve", cli_serve, "the HTTP API and dashboard alone (run starts it): serve [--http-listen A:P]" },
	{ "init", cli_init, "create or upgrade the database" },
	{ "config", cli_config, "the settings in force and where each came from: config show" },
	{ "enqueue", cli_enqueue, "add a job: enqueue KIND JSON [--job-id ID] [--delay-ms N] [--priority N]" },
	{ "worker", cli_worker, "run jobs: worker [--concurrency N] [--batch N] [--lease-ms N] [--drain]\n"
			       "           [--config FILE] [--mail-url URL] [--mail-from ADDR] ..." },
	{ "relay", cli_relay, "publish outbox rows to the stream: relay [--drain]" },
	{ "jobs", cli_jobs, "look at and repair jobs: jobs stats|ls|dead|retry ID|purge --dead|prune" },
	{ "event", cli_event, "add an event: event add --name N --venue V --starts-at ISO8601 --capacity N" },
	{ "order", cli_order, "sell tickets: order add --event ID --name N --email A --seats N;\n"
			   "           order show ID [--json]; order find TEXT; order pdf ID --out FILE;\n"
			   "           order resend ID; order set-email ID ADDRESS;\n"
			   "           order cancel ID [--reason TEXT]" },
	{ "scan", cli_scan, "admit a ticket at the door: scan CODE (exit 0 admitted, 3 already\n"
			   "           scanned, 4 invalid, 5 cancelled)" },
	{ "token", cli_token, "the API's tokens with roles: token add --role ROLE --name NAME\n"
			   "           [--event ID] [--expires-in 12h] [--qr]; token ls [--all] [--json];\n"
			   "           token revoke NAME" },
	{ "demo", cli_demo, "the whole pipeline on a fresh ./var/demo: demo [--orders N]\n"
			   "           [--config FILE] [--mail-url URL] ..." },
	{ "backup", cli_backup, "a consistent copy of a running box: backup DEST;\n"
			       "           backup verify DEST; backup --scheduled (run starts it:\n"
			       "           one periodic backup into backup_dir)" },
	{ "restore", cli_restore, "a new box from a backup: restore DEST --db PATH" },
	{ "migrate", cli_migrate, "move a box to PostgreSQL: migrate --from PATH --to postgresql://...\n"
				   "           [--state-dir DIR] (an empty target; every table, the PDFs)" },
	{ "tls", cli_tls, "the box CA and the HTTPS certificate in <state dir>/tls:\n"
			 "           tls init [--name HOST]... [--ip ADDR]... [--renew]; tls show [--json]" },
	{ "check", cli_check, "the invariants of a drained box, first broken one named: check [--json]" },
	{ "mail", cli_mail, "send one test message: mail test --to ADDR [--config FILE]\n"
			   "           [--mail-url URL] [--mail-from ADDR] [--mail-user USER]\n"
			   "           [--mail-password-file F] [--mail-ca-file F] [--mail-timeout-ms N]" },
	{ "bench", cli_bench, "measure: bench queue --jobs N --workers W --batch B --sync normal|full;\n"
			      "           bench pipeline --orders N [--json];\n"
			      "           bench api --requests N --clients C [--tls] [--json];\n"
			      "           bench claim --scheduled N --leased M --done K [--reps R] [--json];\n"
			      "           bench scale --sizes A,B,C [--json];\n"
			      "           bench intake --orders N --clients A,B --via http,cli [--json]" },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: stagedoor COMMAND [options]   (every command takes --db PATH;\n"
		   "       default $STAGEDOOR_DB, else %s)\n\ncommands:\n", CLI_DB_DEFAULT);
	for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
}

static int has_config_flag(int argc, char **argv)
{
	int i;

	for (i = 2; i < argc; i++)
		if (strcmp(argv[i], "--config") == 0 || strncmp(argv[i], "--config=", 9) == 0)
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *lvl = getenv("STAGEDOOR_LOG_LEVEL");
	size_t i;

	if (lvl && *lvl) {
		int l = log_level_parse(lvl);
		if (l < 0) {
			fprintf(stderr, "stagedoor: STAGEDOOR_LOG_LEVEL must be debug, info, warn, "
					"error or off, not '%s'\n", lvl);
			return 2;
		}
		log_set_level((enum log_level)l);
	}
	{
		const char *fp = getenv("STAGEDOOR_FAILPOINTS");
		if (fp && *fp && failpoint_check_spec(fp) != SD_OK) {
			fprintf(stderr, "stagedoor: %s\n", err_msg());
			return 2;
		}
	}
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("stagedoor %s\n", STAGEDOOR_VERSION);
		return 0;
	}
	for (i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		int rc;

		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		/* `config` reports a broken file itself, and a command given
		 * --config applies that file's settings when it loads it */
		if (strcmp(argv[1], "config") != 0 && !has_config_flag(argc, argv) &&
		    (rc = cli_box_apply(NULL)) != 0)
			return rc;
		return commands[i].fn(argc - 2, argv + 2);
	}
	fprintf(stderr, "stagedoor: unknown command '%s' (try 'stagedoor help')\n", argv[1]);
	return 2;
}
