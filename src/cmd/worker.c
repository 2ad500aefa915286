/*
 * worker.c: `stagedoor worker`: a process that claims and runs jobs (run
 * starts these; more may run beside it on the same database).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "clock.h"
#include "cmd/commands.h"
#include "config.h"
#include "db.h"
#include "failpoint.h"
#include "help.h"
#include "log.h"
#include "mail.h"
#include "progress.h"
#include "queue.h"
#include "statedir.h"
#include "ticket_jobs.h"
#include "tickets.h"
#include "worker.h"

/* worker --drain: a bar of the jobs finished against those there were */
struct drain_progress {
	struct progress *p;
	int64_t total;
};

static void worker_progress(void *arg, const struct worker_stats *st)
{
	struct drain_progress *d = arg;
	int64_t n = st->done + st->dead;

	if (n > d->total)
		progress_set_total(d->p, d->total = n);
	progress_update(d->p, n);
}

static int worker_main(int argc, char **argv)
{
	const char *name = NULL;
	int64_t batch = 0, send_lease = 0;
	int drain = 0, supervised = 0;
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		{ "name", ARG_STR, &name, 0, 0, 0, "NAME",
		  "this worker's name in logs and leases", 0 },
		{ "batch", ARG_INT, &batch, 1, 10000, 0, NULL,
		  "rows per transaction", 0 },
		{ "drain", ARG_FLAG, &drain, 0, 0, 0, NULL,
		  "stop when nothing is left to do in the next 10 minutes (a job scheduled "
		  "later, such as a reminder, waits for the workers of run)", 0 },
		/* started by `run`: its maintenance loop prunes, not each worker */
		CLI_ARG_SUPERVISED(&supervised),
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	const char *dbp;
	struct tickets_env *env = NULL;
	struct mail_config mc;
	struct config cfg;
	struct worker_opts o;
	struct worker_stats st;
	struct drain_progress dp = { NULL, 0 };
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0,
			"worker [--name NAME] [--batch N] [--drain] [--concurrency N] "
			"[--lease-ms N] [--grace-ms N] " CLI_CONFIG_USAGE)) != 0)
		return rc;
	if ((rc = cli_config_load(&cf, &cfg)) != 0)
		return rc;
	dbp = config_str(&cfg, CONFIG_DB);
	/* fail fast, with the usual message, on a missing or newer database */
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0) {
		config_free(&cfg);
		return rc;
	}
	if (drain &&
	    queue_pending_due(db, clock_now_ms() + WORKER_DRAIN_HORIZON_MS, &dp.total) != SD_OK)
		dp.total = 0;
	db_close(db);
	config_mail(&cfg, &mc);
	/* a database made before tickets existed gets its key now, as init would */
	if ((r = statedir_init(dbp, config_str(&cfg, CONFIG_STATE_DIR))) != SD_OK ||
	    (r = tickets_env_open(dbp, config_str(&cfg, CONFIG_STATE_DIR), config_mail_url(&cfg),
				  config_mail_from(&cfg), &mc, &env)) != SD_OK ||
	    (r = cli_provider_open(&cfg, &env->stripe)) != SD_OK ||
	    (r = config_apply_leases(&cfg, 0, &send_lease)) != SD_OK) {
		config_free(&cfg);
		tickets_env_close(env);
		return cli_fail(r);
	}
	cli_shop_base(&cfg, env->shop_url, sizeof env->shop_url);
	env->provider_stale_ms = config_provider_stale_ms(&cfg);
	env->pending_max_ms = config_int(&cfg, CONFIG_SHOP_PENDING_MAX);
	/* a claim older than the lease can have no send of its holder left */
	env->claim_stale_ms = send_lease;
	log_event(LOG_INFO, "mail settings", "send_tickets_lease_ms=%lld mail_timeout_ms=%ld "
		  "claim_stale_ms=%lld", (long long)send_lease,
		  cfg.mail_timeout_ms > 0 ? cfg.mail_timeout_ms : MAIL_TIMEOUT_MS,
		  (long long)env->claim_stale_ms);
	memset(&o, 0, sizeof o);
	o.db_path = dbp;
	o.handlers = ticket_handlers;
	o.app = env;
	o.name = name;
	o.concurrency = (int)config_int(&cfg, CONFIG_CONCURRENCY);
	o.batch = (int)batch;
	o.lease_ms = 0;		/* each kind's policy, set above */
	o.grace_ms = config_int(&cfg, CONFIG_GRACE_MS);
	o.drain = drain;
	o.retention_ms = supervised ? 0 : config_int(&cfg, CONFIG_RETENTION_MS);
	o.sync = strcmp(config_str(&cfg, CONFIG_DURABILITY), "full") == 0 ? DB_SYNC_FULL
									    : DB_SYNC_QUEUE;
	if (drain) {
		dp.p = progress_start("drain", dp.total, "jobs");
		o.progress = worker_progress;
		o.progress_arg = &dp;
	}
	cli_install_signals();
	cli_hup_start(&cf);
	failpoint(FP_WORKER_START);
	cli_ready();
	r = worker_run(&o, &st);
	if (dp.p)
		progress_end(dp.p, st.done + st.dead);
	if (r == SD_TIMEOUT) {
		/* handlers outlived the grace period and their leases were
		 * released; they still run and still use env and the worker's
		 * memory, so end the process here, at once, as a stop must */
		fflush(stdout);
		fflush(stderr);
		_exit(0);
	}
	tickets_env_close(env);
	if (r != SD_OK)
		rc = cli_fail(r);
	config_free(&cfg);	/* o.db_path pointed into it */
	return rc;
}

const struct cli_cmd cmd_worker = CLI_NODE("worker", worker_main, NULL,
		"run jobs (run starts these)");
