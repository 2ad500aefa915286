/*
 * shop.c: `stagedoor shop`: the public shop in one process (shop.h), alone
 * or as run's child when shop_listen is set.
 */
#define _GNU_SOURCE
#include <string.h>

#include "cli.h"
#include "cmd/commands.h"
#include "config.h"
#include "cred.h"
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
	o->tls_key = cred_tls_key(o->tls_cert, key, "shop_tls_key", cred, sizeof cred);
	o->trusted_proxies = config_str(cfg, CONFIG_SHOP_TRUSTED_PROXIES);
	o->per_client_max = (int)config_int(cfg, CONFIG_HTTP_PER_CLIENT_MAX);
	config_hold_rules(cfg, &o->holds);
	o->rate_per_min = config_int(cfg, CONFIG_SHOP_RATE);
	if ((r = config_provider(cfg, &o->stripe_on, &o->stripe)) != SD_OK)
		return r;
	o->webhook_secret_file = config_str(cfg, CONFIG_STRIPE_WEBHOOK_SECRET_FILE);
	o->payment_methods = config_str(cfg, CONFIG_SHOP_PAYMENT_METHODS);
	if (strcmp(o->listen, "off") == 0)
		return err_set(SD_INVALID, "shop_listen is off: set it to ADDRESS:PORT "
			       "(127.0.0.1:8081 behind a reverse proxy)");
	return SD_OK;
}

static enum sd_result shop_begin(const struct config *cfg, int supervised, void **server)
{
	static struct shop_opts so;
	enum sd_result r;

	(void)supervised;
	if ((r = shop_options(cfg, &so)) != SD_OK)
		return r;
	return shop_start(&so, (struct shop **)server);
}

static void shop_end(void *server)
{
	shop_stop(server);
}

static int shop_main(int argc, char **argv)
{
	static const struct cli_listener l = {
		"shop", "shop [--shop-listen ADDR:PORT] " CLI_CONFIG_USAGE, shop_begin, shop_end,
		NULL, 0,
	};

	return cli_listener_main(argc, argv, &l);
}

const struct cli_cmd cmd_shop = CLI_NODE("shop", shop_main, NULL,
		"the public shop alone (run starts it when shop_listen is set)");
