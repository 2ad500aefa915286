/*
 * serve.c: `stagedoor serve`: the HTTP API, dashboard and door page in one
 * process (serve.h), alone or as run's child.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "config.h"
#include "db.h"
#include "http.h"
#include "log.h"
#include "serve.h"

/* metrics_auth: the setting, else on when the listener faces a network:
 * live sales are not for anyone on the venue's Wi-Fi */
static int metrics_auth(const struct config *cfg)
{
	if (config_is_set(cfg, CONFIG_METRICS_AUTH))
		return (int)config_int(cfg, CONFIG_METRICS_AUTH);
	return !http_listen_is_loopback(config_str(cfg, CONFIG_HTTP_LISTEN));
}

static int serve_main(int argc, char **argv)
{
	int supervised = 0;
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		CLI_ARG_SUPERVISED(&supervised),
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	struct serve *sv = NULL;
	struct config cfg;
	struct db *db;
	sigset_t set;
	enum sd_result r;
	int npos, rc, sig;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0,
			    "serve [--http-listen ADDR:PORT] " CLI_CONFIG_USAGE)) != 0)
		return rc;
	if ((rc = cli_config_load(&cf, &cfg)) != 0)
		return rc;
	if ((rc = cli_open_db(config_str(&cfg, CONFIG_DB), 0, DB_SYNC_FULL, &db)) != 0) {
		config_free(&cfg);
		return rc;
	}
	db_close(db);
	/* the server's threads inherit this mask: signals come to sigwait */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((r = serve_start(&(struct serve_opts){ config_str(&cfg, CONFIG_DB),
						   config_str(&cfg, CONFIG_STATE_DIR),
						   config_str(&cfg, CONFIG_HTTP_LISTEN),
						   config_int(&cfg, CONFIG_API_KEY_TTL_MS),
						   config_int(&cfg, CONFIG_DISK_WARN_BYTES),
						   supervised,
						   config_str(&cfg, CONFIG_BACKUP_DIR),
						   config_int(&cfg, CONFIG_BACKUP_INTERVAL_MS),
						   config_str(&cfg, CONFIG_HTTP_TLS_CERT),
						   config_str(&cfg, CONFIG_HTTP_TLS_KEY),
						   config_str(&cfg, CONFIG_HTTP_HOSTS),
						   (int)config_int(&cfg, CONFIG_HTTP_PER_CLIENT_MAX),
						   metrics_auth(&cfg),
						   config_int(&cfg, CONFIG_DOORS_OPEN_BEFORE),
						   config_int(&cfg, CONFIG_DOORS_CLOSE_AFTER),
						   config_int(&cfg, CONFIG_RESEND_PER_HOUR),
						   config_int(&cfg, CONFIG_RESEND_PER_DAY),
						   config_int(&cfg, CONFIG_SCAN_RATE),
						   config_int(&cfg, CONFIG_SCAN_BURST) },
			     &sv)) != SD_OK) {
		config_free(&cfg);
		return r == SD_INVALID ? cli_cannot_start(r) : cli_fail(r);
	}
	/* http_start logged the address and the port */
	cli_ready();
	for (;;) {
		/* a box that runs for months passes its certificate's warning
		 * mark while it runs: the check again once a day */
		if ((sig = sigtimedwait(&set, NULL, &(struct timespec){ SERVE_CERT_CHECK_S, 0 })) <
		    0) {
			if (errno == EAGAIN)
				serve_renew_warn(config_str(&cfg, CONFIG_HTTP_TLS_CERT));
			continue;
		}
		if (sig == SIGHUP) {
			cli_reload_log(&cf);
			continue;
		}
		break;
	}
	log_event(LOG_INFO, "http stopping", "signal=%d", sig);
	serve_stop(sv);
	config_free(&cfg);
	return 0;
}

const struct cli_cmd cmd_serve = CLI_NODE("serve", serve_main, NULL,
		"the HTTP API, dashboard and door page alone (run starts it)");
