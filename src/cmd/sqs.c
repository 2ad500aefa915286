/*
 * sqs.c: `stagedoor sqs`: the SQS listener in one process (sqs.h), alone
 * or as run's child when sqs_listen is set.
 */
#define _GNU_SOURCE
#include <string.h>

#include "cli.h"
#include "cmd/commands.h"
#include "config.h"
#include "cred.h"
#include "log.h"
#include "sqs.h"

/* the options from the settings; their strings point into cfg */
static enum sd_result sqs_options(const struct config *cfg, struct sqs_opts *o)
{
	const char *key = config_str(cfg, CONFIG_SQS_TLS_KEY);
	static char cred[4096];

	memset(o, 0, sizeof *o);
	o->db_path = config_str(cfg, CONFIG_DB);
	o->state_dir = config_str(cfg, CONFIG_STATE_DIR);
	o->listen = config_str(cfg, CONFIG_SQS_LISTEN);
	o->tls_cert = config_str(cfg, CONFIG_SQS_TLS_CERT);
	o->tls_key = cred_tls_key(o->tls_cert, key, "sqs_tls_key", cred, sizeof cred);
	o->per_client_max = (int)config_int(cfg, CONFIG_HTTP_PER_CLIENT_MAX);
	if (strcmp(o->listen, "off") == 0)
		return err_set(SD_INVALID, "sqs_listen is off: set it to ADDRESS:PORT "
			       "(127.0.0.1:9324 for workers on this machine)");
	return SD_OK;
}

static enum sd_result sqs_begin(const struct config *cfg, int supervised, void **server)
{
	struct sqs_opts so;
	enum sd_result r;

	(void)supervised;
	if ((r = sqs_options(cfg, &so)) != SD_OK || (r = sqs_start(&so,
					(struct sqs_server **)server)) != SD_OK)
		return r;
	log_event(LOG_INFO, "sqs listening", "listen=%s port=%d", so.listen,
		  sqs_port(*server));
	return SD_OK;
}

static void sqs_end(void *server)
{
	sqs_stop(server);
}

static int sqs_main(int argc, char **argv)
{
	static const struct cli_listener l = {
		"sqs", "sqs [--sqs-listen ADDR:PORT] " CLI_CONFIG_USAGE, sqs_begin, sqs_end, NULL,
		0,
	};

	return cli_listener_main(argc, argv, &l);
}

const struct cli_cmd cmd_sqs = CLI_NODE("sqs", sqs_main, NULL,
		"the SQS listener alone (run starts it when sqs_listen is set)");
