/*
 * serve.c: `stagedoor serve`: the HTTP API, dashboard and door page in one
 * process (serve.h), alone or as run's child.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "cmd/commands.h"
#include "config.h"
#include "http.h"
#include "serve.h"

/* metrics_auth: the setting, else on when the listener faces a network:
 * live sales are not for anyone on the venue's Wi-Fi */
static int metrics_auth(const struct config *cfg)
{
	if (config_is_set(cfg, CONFIG_METRICS_AUTH))
		return (int)config_int(cfg, CONFIG_METRICS_AUTH);
	return !http_listen_is_loopback(config_str(cfg, CONFIG_HTTP_LISTEN));
}

static enum sd_result serve_begin(const struct config *cfg, int supervised, void **server)
{
	return serve_start(&(struct serve_opts){ config_str(cfg, CONFIG_DB),
						 config_str(cfg, CONFIG_STATE_DIR),
						 config_str(cfg, CONFIG_HTTP_LISTEN),
						 config_int(cfg, CONFIG_API_KEY_TTL_MS),
						 config_int(cfg, CONFIG_DISK_WARN_BYTES),
						 supervised,
						 config_str(cfg, CONFIG_BACKUP_DIR),
						 config_int(cfg, CONFIG_BACKUP_INTERVAL_MS),
						 config_str(cfg, CONFIG_HTTP_TLS_CERT),
						 config_str(cfg, CONFIG_HTTP_TLS_KEY),
						 config_str(cfg, CONFIG_HTTP_HOSTS),
						 (int)config_int(cfg, CONFIG_HTTP_PER_CLIENT_MAX),
						 metrics_auth(cfg),
						 config_int(cfg, CONFIG_DOORS_OPEN_BEFORE),
						 config_int(cfg, CONFIG_DOORS_CLOSE_AFTER),
						 config_int(cfg, CONFIG_RESEND_PER_HOUR),
						 config_int(cfg, CONFIG_RESEND_PER_DAY),
						 config_int(cfg, CONFIG_SCAN_RATE),
						 config_int(cfg, CONFIG_SCAN_BURST) },
			   (struct serve **)server);
}

static void serve_end(void *server)
{
	serve_stop(server);
}

/* a box that runs for months passes its certificate's warning mark while
 * it runs: the check again once a day */
static void serve_tick(const struct config *cfg)
{
	serve_renew_warn(config_str(cfg, CONFIG_HTTP_TLS_CERT));
}

static int serve_main(int argc, char **argv)
{
	static const struct cli_listener l = {
		"http", "serve [--http-listen ADDR:PORT] " CLI_CONFIG_USAGE, serve_begin,
		serve_end, serve_tick, SERVE_CERT_CHECK_S,
	};

	return cli_listener_main(argc, argv, &l);
}

const struct cli_cmd cmd_serve = CLI_NODE("serve", serve_main, NULL,
		"the HTTP API, dashboard and door page alone (run starts it)");
