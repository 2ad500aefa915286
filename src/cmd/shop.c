/*
 * shop.c: `stagedoor shop`: the public shop in one process (shop.h), alone
 * or as run's child when shop_listen is set.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "config.h"
#include "cred.h"
#include "db.h"
#include "log.h"
#include "shop.h"

/* the options from the settings; their strings point into cfg */
static enum sd_result shop_options(const struct config *cfg, struct shop_opts *o)
{
	const char *key = config_str(cfg, CONFIG_SHOP_TLS_KEY);
	static char cred[4096];
	enum sd_result r;

	memset(o, 0, sizeof *o);
	o->db_path = config_str(cfg, CONFIG_DB);
	o->state_dir = config_str(cfg, CONFIG_STATE_DIR);
	o->listen = config_str(cfg, CONFIG_SHOP_LISTEN);
	o->url = config_str(cfg, CONFIG_SHOP_URL);
	o->name = config_str(cfg, CONFIG_SHOP_NAME);
	o->tls_cert = config_str(cfg, CONFIG_SHOP_TLS_CERT);
	if (o->tls_cert && !key && cred_find("shop_tls_key", cred, sizeof cred))
		key = cred;
	o->tls_key = key;
	o->trusted_proxies = config_str(cfg, CONFIG_SHOP_TRUSTED_PROXIES);
	o->per_client_max = (int)config_int(cfg, CONFIG_HTTP_PER_CLIENT_MAX);
	config_hold_rules(cfg, &o->holds);
	o->rate_per_min = config_int(cfg, CONFIG_SHOP_RATE);
	if ((r = config_provider(cfg, &o->stripe_on, &o->stripe)) != SD_OK)
		return r;
	o->webhook_secret_file = config_str(cfg, CONFIG_STRIPE_WEBHOOK_SECRET_FILE);
	if (strcmp(o->listen, "off") == 0)
		return err_set(SD_INVALID, "shop_listen is off: set it to ADDRESS:PORT "
			       "(127.0.0.1:8081 behind a reverse proxy)");
	return SD_OK;
}

static int shop_main(int argc, char **argv)
{
	int supervised = 0;
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		CLI_ARG_SUPERVISED(&supervised),
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	struct shop_opts so;
	struct shop *sh = NULL;
	struct config cfg;
	struct db *db;
	sigset_t set;
	enum sd_result r;
	int npos, rc, sig;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0,
			    "shop [--shop-listen ADDR:PORT] " CLI_CONFIG_USAGE)) != 0)
		return rc;
	if ((rc = cli_config_load(&cf, &cfg)) != 0)
		return rc;
	if ((r = shop_options(&cfg, &so)) != SD_OK) {
		config_free(&cfg);
		return cli_cannot_start(r);
	}
	if ((rc = cli_open_db(so.db_path, 0, DB_SYNC_FULL, &db)) != 0) {
		config_free(&cfg);
		return rc;
	}
	db_close(db);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((r = shop_start(&so, &sh)) != SD_OK) {
		config_free(&cfg);
		return r == SD_INVALID ? cli_cannot_start(r) : cli_fail(r);
	}
	(void)supervised;
	cli_ready();
	while ((sig = sigwaitinfo(&set, NULL)) < 0 || sig == SIGHUP)
		if (sig == SIGHUP)
			cli_reload_log(&cf);
	log_event(LOG_INFO, "shop stopping", "signal=%d", sig);
	shop_stop(sh);
	config_free(&cfg);
	return 0;
}

const struct cli_cmd cmd_shop = CLI_NODE("shop", shop_main, NULL,
		"the public shop alone (run starts it when shop_listen is set)");
