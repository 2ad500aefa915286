/*
 * cli.c: what every command (src/cmd/) shares: where the database and the
 * state folder are, option parsing with the usage, one-line errors and
 * their exit statuses, the settings with their flags, signals, and the
 * ready pipe and SIGHUP of run's children.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "blob.h"
#include "code.h"
#include "config.h"
#include "controls.h"
#include "db.h"
#include "event_edit.h"
#include "help.h"
#include "lang.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "queue.h"
#include "stripe.h"
#include "timefmt.h"
#include "worker.h"

/* from_file: key k of the config file ($STAGEDOOR_CONFIG, else the default
 * file when it exists), read once; NULL when not set.  A box set up with
 * /etc/stagedoor/stagedoor.conf must not have `order show` look at ./var. */
static const char *from_file(enum config_key k)
{
	static struct config c;
	static int looked;

	if (!looked) {
		looked = 1;
		config_init(&c);
		if (config_file_path(NULL) && config_load_file(&c, config_file_path(NULL)) != SD_OK)
			exit(cli_fail(SD_INVALID));
	}
	return c.value[k];
}

const char *cli_db_path(const char *flag)
{
	const char *env = getenv("STAGEDOOR_DB"), *f;

	if (flag)
		return flag;
	if (env && *env)
		return env;
	return (f = from_file(CONFIG_DB)) ? f : CLI_DB_DEFAULT;
}

const char *cli_state_dir(const char *flag)
{
	const char *env = getenv("STAGEDOOR_STATE_DIR");

	if (flag)
		return flag;
	if (env && *env)
		return env;
	return from_file(CONFIG_STATE_DIR);
}

/* setting: key k from the environment, else the config file */
static const char *setting(enum config_key k)
{
	const char *env = getenv(config_key_env(k));

	return env && *env ? env : from_file(k);
}

void cli_actor(char *buf, size_t size)
{
	struct passwd *pw = getpwuid(geteuid());

	snprintf(buf, size, "cli (%s)", pw && pw->pw_name ? pw->pw_name : "unknown");
}

/* rules_of: the events' rules (event_edit.h) from cfg, else from the
 * environment and the config file, as the box's other files are */
static enum sd_result rules_of(const struct config *cfg, struct event_rules *rules)
{
	static const enum config_key ks[] = { CONFIG_START_GRACE, CONFIG_SALES_CLOSE_AFTER,
					      CONFIG_REMIND_BEFORE, CONFIG_PAYMENT_PROVIDER };
	struct config own;
	enum sd_result r = SD_OK;
	const char *v, *env;
	size_t i;

	if (!cfg) {
		config_init(&own);
		for (i = 0; i < sizeof ks / sizeof ks[0] && r == SD_OK; i++) {
			env = getenv(config_key_env(ks[i]));
			if ((v = setting(ks[i])))
				r = config_set(&own, ks[i], v, env && *env ? config_key_env(ks[i])
									   : config_key_name(ks[i]));
		}
	}
	rules->start_grace_ms = config_int(cfg ? cfg : &own, CONFIG_START_GRACE);
	rules->sales_close_after_ms = config_int(cfg ? cfg : &own, CONFIG_SALES_CLOSE_AFTER);
	rules->remind_before_ms = config_int(cfg ? cfg : &own, CONFIG_REMIND_BEFORE);
	v = config_str(cfg ? cfg : &own, CONFIG_PAYMENT_PROVIDER);
	rules->stripe_prices = v && strcmp(v, "stripe") == 0;
	if (!cfg)
		config_free(&own);
	return r;
}

/* box_name_apply: the box's name (controls.h): box_name, else the host's
 * name up to its first dot, else "box" */
static enum sd_result box_name_apply(const char *name)
{
	char host[256] = "";
	size_t i;

	if (!name || !*name) {
		if (gethostname(host, sizeof host - 1) != 0 || !host[0])
			snprintf(host, sizeof host, "box");
		host[strcspn(host, ".")] = '\0';
		host[CONTROLS_BOX_MAX] = '\0';
		for (i = 0; host[i]; i++)
			if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-",
				    host[i]))
				host[i] = '-';
		controls_box_set(host[0] ? host : "box");
		return SD_OK;
	}
	if (strlen(name) > CONTROLS_BOX_MAX ||
	    strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
		    strlen(name))
		return err_set(SD_INVALID, "box_name: 1 to %d of A-Z a-z 0-9 . _ -",
			       CONTROLS_BOX_MAX);
	controls_box_set(name);
	return SD_OK;
}

int cli_box_apply(const struct config *cfg)
{
	const char *key = cfg ? cfg->value[CONFIG_TICKET_KEY_FILE] : setting(CONFIG_TICKET_KEY_FILE);
	const char *blobs = cfg ? cfg->value[CONFIG_BLOB_STORE] : setting(CONFIG_BLOB_STORE);
	const char *state = cfg ? cfg->value[CONFIG_STATE_DIR] : setting(CONFIG_STATE_DIR);

	const char *zone = cfg ? cfg->value[CONFIG_TIMEZONE] : setting(CONFIG_TIMEZONE);
	const char *locale = cfg ? cfg->value[CONFIG_LOCALE] : setting(CONFIG_LOCALE);
	const char *box = cfg ? cfg->value[CONFIG_BOX_NAME] : setting(CONFIG_BOX_NAME);
	struct event_rules rules;
	enum sd_result r;

	metrics_home_set(state);
	if ((r = code_key_file_set(key)) != SD_OK || (r = blob_where_set(blobs)) != SD_OK ||
	    (r = timefmt_zone_set(zone)) != SD_OK || (r = lang_set(locale)) != SD_OK ||
	    (r = rules_of(cfg, &rules)) != SD_OK || (r = box_name_apply(box)) != SD_OK)
		return cli_fail(r);
	event_rules_set(&rules);
	return 0;
}

void cli_reload_log(const struct cli_config_flags *cf)
{
	struct config nc;

	if (config_resolve(&nc, cf->file, cf->value) != SD_OK)
		return;
	if (log_open_file(nc.value[CONFIG_LOG_FILE]) != SD_OK)
		log_event(LOG_ERROR, "log not reopened", NULL);
	log_set_level((enum log_level)log_level_parse(config_str(&nc, CONFIG_LOG_LEVEL)));
	config_free(&nc);
}

enum sd_result cli_provider_open(const struct config *cfg, struct stripe **out)
{
	struct stripe_config sc;
	enum sd_result r;
	int on = 0;

	*out = NULL;
	if ((r = config_provider(cfg, &on, &sc)) != SD_OK || !on)
		return r;
	return stripe_open(&sc, out);
}

void cli_shop_base(const struct config *cfg, char *buf, size_t size)
{
	const char *url = config_str(cfg, CONFIG_SHOP_URL);
	const char *listen = config_str(cfg, CONFIG_SHOP_LISTEN);
	size_t n;

	if (url && *url)
		snprintf(buf, size, "%s", url);
	else if (listen && *listen && strcmp(listen, "off") != 0)
		snprintf(buf, size, "%s://%s%s", config_str(cfg, CONFIG_SHOP_TLS_CERT) ? "https"
			 : "http", listen[0] == ':' ? "127.0.0.1" : "", listen);
	else
		buf[0] = '\0';
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '/')
		buf[--n] = '\0';
}

int cli_fail(int r)
{
	const char *m = err_msg();
	char line[1024];
	size_t o = 0;

	if (!*m)
		m = sd_result_name((enum sd_result)r);
	/* Messages may quote the input; a CR or LF in it must not split the
	 * one line into two (or forge a second one in a log). */
	for (; *m && o + 5 < sizeof line; m++) {
		unsigned char c = (unsigned char)*m;
		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(line + o, sizeof line - o, "\\x%02x", c);
		else
			line[o++] = (char)c;
	}
	line[o] = '\0';
	fprintf(stderr, "%s: %s\n", help_program(), line);
	return r == SD_INVALID || r == SD_SOLD_OUT ? 2 : r == SD_CONFLICT ? 3 : 1;
}

static void on_stop_signal(int sig)
{
	(void)sig;
	notify_request_stop();
}

void cli_install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int cli_parse(int argc, char **argv, struct arg_opt *opts, char **pos, int *npos,
		 int min_pos, int max_pos, const char *usage)
{
	enum sd_result r;

	if (args_wants_help(argc, argv, opts))
		return help_leaf(usage, opts);
	if ((r = args_parse(argc, argv, opts, pos, npos)) != SD_OK)
		return cli_fail(r);
	if (*npos < min_pos || *npos > max_pos) {
		fprintf(stderr, "%s: usage: %s %s\n", help_program(), help_program(), usage);
		return 2;
	}
	return 0;
}

int cli_open_db(const char *flag, int flags, int sync, struct db **db)
{
	enum sd_result r = db_open(cli_db_path(flag), flags, sync, db);

	return r == SD_OK ? 0 : cli_fail(r == SD_NOT_FOUND || r == SD_SCHEMA ? SD_DB : r);
}

/* ---- settings, and run's children ------------------------------------ */

int cli_config_load(const struct cli_config_flags *f, struct config *cfg)
{
	enum sd_result r = config_resolve(cfg, f->file, f->value);

	if (r != SD_OK)
		return cli_fail(r);
	if (cli_box_apply(cfg) != 0) {
		config_free(cfg);
		return 2;
	}
	if (cfg->value[CONFIG_LOG_LEVEL])
		log_set_level((enum log_level)log_level_parse(cfg->value[CONFIG_LOG_LEVEL]));
	if ((r = log_open_file(cfg->value[CONFIG_LOG_FILE])) != SD_OK) {
		config_free(cfg);
		return cli_fail(r);
	}
	return 0;
}

/* ---- a child of `run` ----------------------------------------------------- */

/* ready_say: what into $STAGEDOOR_READY_FD, once; 0 when there is none */
static int ready_say(const char *what, size_t len)
{
	const char *s = getenv("STAGEDOOR_READY_FD");
	char *end;
	long fd;
	int ok;

	if (!s || !*s)
		return 0;
	fd = strtol(s, &end, 10);
	unsetenv("STAGEDOOR_READY_FD");
	if (*end || fd < 3 || fd > 65535)
		return 0;
	ok = write((int)fd, what, len) == (ssize_t)len;
	close((int)fd);
	return ok;
}

void cli_ready(void)
{
	if (getenv("STAGEDOOR_READY_FD") && !ready_say("1", 1))
		log_event(LOG_WARN, "could not tell the supervisor this process started", NULL);
}

int cli_cannot_start(int r)
{
	char why[CLI_WHY_MAX];

	snprintf(why, sizeof why, "!%s", err_msg());
	cli_fail(r);
	ready_say(why, strlen(why));
	return CLI_EXIT_CONFIG;
}

/* ---- SIGHUP in a worker or relay process -------------------------------- */

struct hup_ctx {
	struct cli_config_flags cf;
	sigset_t set;
};

/* The thread that takes SIGHUP: the log reopened (logrotate) and the live
 * settings read again; a bad file keeps the old ones with an error line. */
static void *hup_thread(void *arg)
{
	struct hup_ctx *h = arg;
	int sig;

	for (;;) {
		struct config c;

		if (sigwait(&h->set, &sig) != 0)
			continue;
		if (config_resolve(&c, h->cf.file, h->cf.value) != SD_OK) {
			log_event(LOG_ERROR, "configuration not reloaded", "err=\"%s\"", err_msg());
			continue;
		}
		if (log_open_file(c.value[CONFIG_LOG_FILE]) != SD_OK)
			log_event(LOG_ERROR, "log not reopened", NULL);
		log_set_level((enum log_level)log_level_parse(config_str(&c, CONFIG_LOG_LEVEL)));
		log_event(LOG_INFO, "configuration reloaded", "pid=%ld", (long)getpid());
		config_free(&c);
	}
	return NULL;
}

void cli_hup_start(const struct cli_config_flags *cf)
{
	static struct hup_ctx h;
	pthread_t th;

	h.cf = *cf;
	sigemptyset(&h.set);
	sigaddset(&h.set, SIGHUP);
	/* blocked here, before any other thread starts, so every thread inherits it */
	pthread_sigmask(SIG_BLOCK, &h.set, NULL);
	if (pthread_create(&th, NULL, hup_thread, &h) == 0)
		pthread_detach(th);
}

/* listener_wait: the signal that stops a listener, SIGHUP and ticks handled */
static int listener_wait(const sigset_t *set, const struct cli_listener *l,
			 const struct config *cfg, const struct cli_config_flags *cf)
{
	struct timespec t = { l->tick_s > 0 ? l->tick_s : 3600, 0 };
	int sig;

	for (;;) {
		if ((sig = sigtimedwait(set, NULL, &t)) < 0) {
			if (errno == EAGAIN && l->tick)
				l->tick(cfg);
			continue;
		}
		if (sig != SIGHUP)
			return sig;
		cli_reload_log(cf);
	}
}

int cli_listener_main(int argc, char **argv, const struct cli_listener *l)
{
	int supervised = 0;
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		CLI_ARG_SUPERVISED(&supervised),
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	void *server = NULL;
	struct config cfg;
	struct db *db;
	sigset_t set;
	enum sd_result r;
	int npos, rc, sig;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, l->usage)) != 0)
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
	if ((r = l->start(&cfg, supervised, &server)) != SD_OK) {
		config_free(&cfg);
		return r == SD_INVALID ? cli_cannot_start(r) : cli_fail(r);
	}
	cli_ready();
	sig = listener_wait(&set, l, &cfg, &cf);
	log_event(LOG_INFO, "listener stopping", "listener=%s signal=%d", l->name, sig);
	l->stop(server);
	config_free(&cfg);
	return 0;
}
