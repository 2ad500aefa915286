/*
 * relay.c: `stagedoor relay`: the outbox published to the stream (run
 * starts it).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "config.h"
#include "db.h"
#include "help.h"
#include "outbox.h"
#include "progress.h"
#include "queue.h"

/* relay --drain: a bar of the rows published against those there were */
struct drain_progress {
	struct progress *p;
	int64_t total;
};


/* relay --drain (outbox_relay_opts.progress): the relay counts the rows
 * again as it goes, so its total replaces ours */
static void relay_progress(void *arg, int64_t published, int64_t total)
{
	struct drain_progress *d = arg;

	if (total != d->total)
		progress_set_total(d->p, d->total = total);
	progress_update(d->p, published);
}

static int relay_main(int argc, char **argv)
{
	int64_t batch = OUTBOX_BATCH_DEFAULT, n = 0;
	int drain = 0;
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		{ "batch", ARG_INT, &batch, 1, 100000, 0, NULL,
		  "rows per transaction", 0 },
		{ "drain", ARG_FLAG, &drain, 0, 0, 0, NULL,
		  "stop when nothing is left to do", 0 },
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	struct outbox_relay_opts ro = { 0 };
	struct drain_progress dp = { NULL, 0 };
	struct config cfg;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0,
			    "relay [--batch N] [--drain] " CLI_CONFIG_USAGE)) != 0)
		return rc;
	if ((rc = cli_config_load(&cf, &cfg)) != 0)
		return rc;
	if ((rc = cli_open_db(config_str(&cfg, CONFIG_DB), 0, DB_SYNC_NORMAL, &db)) != 0) {
		config_free(&cfg);
		return rc;
	}
	if (drain && outbox_unpublished(db, &dp.total) != SD_OK)
		dp.total = 0;
	db_close(db);
	cli_install_signals();
	cli_hup_start(&cf);
	cli_ready();
	ro.batch = (int)batch;
	ro.drain = drain;
	if (drain) {
		/* a bar or plain lines on stderr while draining */
		dp.p = progress_start("relay", dp.total, "rows");
		ro.progress = relay_progress;
		ro.arg = &dp;
	}
	r = outbox_relay_run_opts(config_str(&cfg, CONFIG_DB), &ro, &n);
	/* the bar's last line also when the relay gave up */
	if (dp.p)
		progress_end(dp.p, n);
	config_free(&cfg);
	if (r != SD_OK)
		return cli_fail(r);
	if (drain)
		printf("published %lld\n", (long long)n);
	return 0;
}

const struct cli_cmd cmd_relay = CLI_NODE("relay", relay_main, NULL,
		"publish outbox rows to the stream (run starts it)");
