/*
 * mail.c: `stagedoor mail test`: one message through the configured
 * transport, to check it before a sale needs it.
 */
#define _GNU_SOURCE
#include <limits.h>
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
#include "help.h"
#include "mail.h"
#include "queue.h"
#include "statedir.h"
#include "text.h"
#include "tickets.h"

/* mail_test_key: "mail-test-" and 16 random hex digits, so that no two
 * tests share a key (a provider would drop the second as a duplicate). */
static void mail_test_key(char *buf, size_t size)
{
	unsigned char b[8];
	FILE *f = fopen("/dev/urandom", "rb");
	size_t i, got = 0;

	if (f) {
		got = fread(b, 1, sizeof b, f);
		fclose(f);
	}
	if (got != sizeof b) {
		/* no urandom (a chroot): time and pid still tell tests apart */
		uint64_t x = (uint64_t)clock_mono_us() ^ ((uint64_t)getpid() << 40);
		for (i = 0; i < sizeof b; i++, x >>= 8)
			b[i] = (unsigned char)x;
	}
	i = (size_t)snprintf(buf, size, "mail-test-");
	for (got = 0; got < sizeof b && i + 2 < size; got++, i += 2)
		snprintf(buf + i, size - i, "%02x", b[got]);
}

/* mail_fail: the one line for a failed test, naming the transport; exit 1
 * (a failed send is a failure, never a usage error). */
static int mail_fail(const char *transport, enum sd_result r)
{
	char msg[900];

	snprintf(msg, sizeof msg, "%s", *err_msg() ? err_msg() : sd_result_name(r));
	err_set(r, "mail test via %s failed: %s", transport, msg);
	cli_fail(r);
	return 1;
}

static int mail_test_cmd(int argc, char **argv)
{
	const char *to = NULL, *from;
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		{ "to", ARG_STR, &to, 0, 0, 0, "ADDR",
		  "the address the test message goes to", 0 },
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	static const char usage[] = "mail test --to ADDR " CLI_CONFIG_USAGE;
	char *pos[ARGS_MAX_POS], url[PATH_MAX + 16], transport[256], key[64], text[512];
	struct mailer *m = NULL;
	struct mail_message msg;
	struct mail_result res;
	struct mail_config mc;
	struct config cfg;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, usage)) != 0)
		return rc;
	if (!to) {
		fprintf(stderr, "stagedoor: usage: stagedoor %s\n", usage);
		return 2;
	}
	if ((r = mail_address_valid(to)) != SD_OK)
		return cli_fail(err_set(SD_INVALID, "--to: not a plain address local@domain"));
	if ((rc = cli_config_load(&cf, &cfg)) != 0)
		return rc;
	if (config_mail_url(&cfg))
		snprintf(url, sizeof url, "%s", config_mail_url(&cfg));
	else
		statedir_mail_url(config_str(&cfg, CONFIG_DB), config_str(&cfg, CONFIG_STATE_DIR),
					 url, sizeof url);
	text_redact_url(url, transport, sizeof transport);
	from = config_mail_from(&cfg) ? config_mail_from(&cfg) : TICKETS_MAIL_FROM_DEFAULT;
	config_mail(&cfg, &mc);
	mail_test_key(key, sizeof key);
	snprintf(text, sizeof text,
		 "This is a test message from Stagedoor Box (stagedoor mail test).\n"
		 "If it reached %s, ticket emails can leave this box through\n%s.\n\n"
		 "Test key: %s\n", to, transport, key);
	memset(&msg, 0, sizeof msg);
	msg.from = from;
	msg.from_name = "Stagedoor Box";
	msg.to = to;
	msg.subject = "Stagedoor Box mail test";
	msg.text = text;
	msg.idempotency_key = key;
	memset(&res, 0, sizeof res);
	if ((r = mail_open_opts(url, &mc, &m)) != SD_OK ||
	    (r = mail_send(m, &msg, &res)) != SD_OK) {
		rc = mail_fail(transport, r);
		goto out;
	}
	printf("transport   %s\n", transport);
	printf("from        %s\n", from);
	printf("to          %s\n", to);
	printf("message id  %s\n", res.message_id);
	printf("result      sent%s\n", res.duplicate ? " (a duplicate: the provider kept the first)" : "");
	rc = 0;
out:
	mail_close(m);
	config_free(&cfg);
	return rc;
}

static const struct cli_cmd mail_subs[] = {
	{ "test", mail_test_cmd, "send one test message through the configured transport", NULL,
	  0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_mail = CLI_NODE("mail", NULL, mail_subs,
		"the mail transport");
