/*
 * cli.h: what the commands (src/cmd/, one file each) share.  Each command
 * takes the words after its name and returns the process exit status: 0
 * success, 1 failure, 2 bad usage.  Errors are printed once, as one line
 * "stagedoor: ..." on stderr.
 */
#ifndef SD_CLI_H
#define SD_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "help.h"
#include "result.h"

#define CLI_DB_DEFAULT "./var/stagedoor.db"
/* The exit status of a child of `run` that cannot start because of its
 * configuration (sysexits' EX_CONFIG): an address in use or not allowed, a
 * bad certificate.  run stops at once with it instead of starting the child
 * again and again; the unit's RestartPreventExitStatus names it. */
#define CLI_EXIT_CONFIG 78
#define CLI_WHY_MAX 256		/* the reason a child gives for it, at most */

/* cli_db_path: --db, else $STAGEDOOR_DB, else ./var/stagedoor.db. */
const char *cli_db_path(const char *flag);

/* cli_state_dir: --state-dir, else $STAGEDOOR_STATE_DIR, else the config
 * file's state_dir, else NULL (the database's folder; tickets.h). */
const char *cli_state_dir(const char *flag);

/* cli_box_apply: this process's ticket_key_file, blob_store and the state
 * folder its /metrics counters live in on PostgreSQL, from cfg
 * (NULL: the environment, else the config file), before any command opens
 * a box's files.  0, or cli_fail's exit code. */
struct config;
int cli_box_apply(const struct config *cfg);

/* cli_fail: print "stagedoor: <err_msg()>" and return the exit status for r. */
int cli_fail(int r);

/* cli_install_signals: SIGINT and SIGTERM ask every loop to stop. */
void cli_install_signals(void);

struct arg_opt;
struct db;

/* cli_parse: parse options, then refuse a count of words outside
 * [min_pos, max_pos] with the usage line.  0 or the exit status. */
int cli_parse(int argc, char **argv, struct arg_opt *opts, char **pos, int *npos, int min_pos,
	      int max_pos, const char *usage);

/* cli_actor: who makes a change from the command line, "cli (<user>)",
 * into buf. */
void cli_actor(char *buf, size_t size);

/* cli_open_db: open --db / $STAGEDOOR_DB; 0 or the exit status (printed). */
int cli_open_db(const char *flag, int flags, int sync, struct db **db);

/*
 * The settings (config.h) every long-running command takes: --config FILE
 * and one flag per key (--db, --workers, --mail-url, ...).  CLI_CONFIG_OPTS(f)
 * expands to the arg_opt entries that fill a struct cli_config_flags (one
 * per key, in enum config_key order: a test checks the two agree);
 * cli_config_load then resolves flags over environment over file.
 */
struct cli_config_flags {
	const char *file;			/* --config; NULL: the default file */
	const char *value[CONFIG_N_KEYS];	/* by enum config_key; NULL: not given */
};

#define CLI_KEY(f, k) { config_key_flag(k), ARG_STR, &(f)->value[k], 0, 0, 0, \
			config_key_metavar(k), config_key_doc(k), 1 }
#define CLI_CONFIG_OPTS(f) \
	{ "config", ARG_STR, &(f)->file, 0, 0, 0, "FILE", \
	  "the configuration file (default $STAGEDOOR_CONFIG, else /etc/stagedoor/stagedoor.conf " \
	  "when it exists)", 0 }, \
	CLI_KEY(f, CONFIG_DB), \
	CLI_KEY(f, CONFIG_STATE_DIR), \
	CLI_KEY(f, CONFIG_TICKET_KEY_FILE), \
	CLI_KEY(f, CONFIG_BLOB_STORE), \
	CLI_KEY(f, CONFIG_WORKERS), \
	CLI_KEY(f, CONFIG_CONCURRENCY), \
	CLI_KEY(f, CONFIG_GRACE_MS), \
	CLI_KEY(f, CONFIG_DURABILITY), \
	CLI_KEY(f, CONFIG_BOX_NAME), \
	CLI_KEY(f, CONFIG_LEASE_MS), \
	CLI_KEY(f, CONFIG_MAX_ATTEMPTS), \
	CLI_KEY(f, CONFIG_MAX_DELIVERIES), \
	CLI_KEY(f, CONFIG_BACKOFF_BASE_MS), \
	CLI_KEY(f, CONFIG_BACKOFF_CAP_MS), \
	CLI_KEY(f, CONFIG_RENDER_LEASE_MS), \
	CLI_KEY(f, CONFIG_RENDER_MAX_ATTEMPTS), \
	CLI_KEY(f, CONFIG_RENDER_BACKOFF_BASE_MS), \
	CLI_KEY(f, CONFIG_RENDER_BACKOFF_CAP_MS), \
	CLI_KEY(f, CONFIG_SEND_LEASE_MS), \
	CLI_KEY(f, CONFIG_SEND_MAX_ATTEMPTS), \
	CLI_KEY(f, CONFIG_SEND_BACKOFF_BASE_MS), \
	CLI_KEY(f, CONFIG_SEND_BACKOFF_CAP_MS), \
	CLI_KEY(f, CONFIG_COUNT_LEASE_MS), \
	CLI_KEY(f, CONFIG_COUNT_MAX_ATTEMPTS), \
	CLI_KEY(f, CONFIG_COUNT_BACKOFF_BASE_MS), \
	CLI_KEY(f, CONFIG_COUNT_BACKOFF_CAP_MS), \
	CLI_KEY(f, CONFIG_RETENTION_MS), \
	CLI_KEY(f, CONFIG_IDEM_RETENTION_MS), \
	CLI_KEY(f, CONFIG_MAINTENANCE_MS), \
	CLI_KEY(f, CONFIG_WAL_WARN_BYTES), \
	CLI_KEY(f, CONFIG_DISK_WARN_BYTES), \
	CLI_KEY(f, CONFIG_BACKUP_DIR), \
	CLI_KEY(f, CONFIG_BACKUP_INTERVAL_MS), \
	CLI_KEY(f, CONFIG_BACKUP_KEEP), \
	CLI_KEY(f, CONFIG_HTTP_LISTEN), \
	CLI_KEY(f, CONFIG_HTTP_TLS_CERT), \
	CLI_KEY(f, CONFIG_HTTP_TLS_KEY), \
	CLI_KEY(f, CONFIG_HTTP_HOSTS), \
	CLI_KEY(f, CONFIG_HTTP_PER_CLIENT_MAX), \
	CLI_KEY(f, CONFIG_METRICS_AUTH), \
	CLI_KEY(f, CONFIG_DOORS_OPEN_BEFORE), \
	CLI_KEY(f, CONFIG_DOORS_CLOSE_AFTER), \
	CLI_KEY(f, CONFIG_API_KEY_TTL_MS), \
	CLI_KEY(f, CONFIG_RESEND_PER_HOUR), \
	CLI_KEY(f, CONFIG_RESEND_PER_DAY), \
	CLI_KEY(f, CONFIG_SCAN_RATE), \
	CLI_KEY(f, CONFIG_SCAN_BURST), \
	CLI_KEY(f, CONFIG_SCAN_LOG_RETENTION), \
	CLI_KEY(f, CONFIG_TIMEZONE), \
	CLI_KEY(f, CONFIG_START_GRACE), \
	CLI_KEY(f, CONFIG_SALES_CLOSE_AFTER), \
	CLI_KEY(f, CONFIG_REMIND_BEFORE), \
	CLI_KEY(f, CONFIG_LOCALE), \
	CLI_KEY(f, CONFIG_SHOP_LISTEN), \
	CLI_KEY(f, CONFIG_SHOP_URL), \
	CLI_KEY(f, CONFIG_SHOP_NAME), \
	CLI_KEY(f, CONFIG_SHOP_TLS_CERT), \
	CLI_KEY(f, CONFIG_SHOP_TLS_KEY), \
	CLI_KEY(f, CONFIG_SHOP_TRUSTED_PROXIES), \
	CLI_KEY(f, CONFIG_SHOP_HOLD), \
	CLI_KEY(f, CONFIG_SHOP_HOLD_RENEWALS), \
	CLI_KEY(f, CONFIG_SHOP_HOLDS_PER_CLIENT), \
	CLI_KEY(f, CONFIG_SHOP_HOLDS_PER_EMAIL), \
	CLI_KEY(f, CONFIG_SHOP_SEATS_MAX), \
	CLI_KEY(f, CONFIG_SHOP_RATE), \
	CLI_KEY(f, CONFIG_SHOP_UNPAID_SHARE), \
	CLI_KEY(f, CONFIG_SHOP_PENDING_MAX), \
	CLI_KEY(f, CONFIG_SHOP_PAYMENT_METHODS), \
	CLI_KEY(f, CONFIG_SQS_LISTEN), \
	CLI_KEY(f, CONFIG_SQS_TLS_CERT), \
	CLI_KEY(f, CONFIG_SQS_TLS_KEY), \
	CLI_KEY(f, CONFIG_PAYMENT_PROVIDER), \
	CLI_KEY(f, CONFIG_STRIPE_API_URL), \
	CLI_KEY(f, CONFIG_STRIPE_KEY_FILE), \
	CLI_KEY(f, CONFIG_STRIPE_WEBHOOK_SECRET_FILE), \
	CLI_KEY(f, CONFIG_STRIPE_CA_FILE), \
	CLI_KEY(f, CONFIG_STRIPE_TIMEOUT_MS), \
	CLI_KEY(f, CONFIG_LOG_LEVEL), \
	CLI_KEY(f, CONFIG_LOG_FILE), \
	CLI_KEY(f, CONFIG_MAIL_URL), \
	CLI_KEY(f, CONFIG_MAIL_FROM), \
	CLI_KEY(f, CONFIG_MAIL_USER), \
	CLI_KEY(f, CONFIG_MAIL_PASSWORD_FILE), \
	CLI_KEY(f, CONFIG_MAIL_CA_FILE), \
	CLI_KEY(f, CONFIG_MAIL_TIMEOUT_MS)

/* CLI_ARG_SUPERVISED: --supervised, a child of run (cli_ready) */
#define CLI_ARG_SUPERVISED(v) { "supervised", ARG_FLAG, (v), 0, 0, 0, NULL, \
				"started by run (it reports ready through a pipe)", 0 }

#define CLI_CONFIG_USAGE "[--config FILE] [--KEY VALUE ...]"

/* cli_config_load: resolve f into *cfg (config_free after) and apply its
 * log settings (log_level, log_file); 0 or the exit status (printed). */
int cli_config_load(const struct cli_config_flags *f, struct config *cfg);

/* cli_hup_start: a thread that takes SIGHUP for a worker or relay process:
 * reopens the log and applies the live settings of cf's configuration.
 * Call before starting any other thread. */
void cli_hup_start(const struct cli_config_flags *cf);

/* cli_ready: under `run`, tell the supervisor this child passed its start-up
 * checks (a byte into $STAGEDOOR_READY_FD); otherwise nothing. */
void cli_ready(void);

/* cli_cannot_start: under `run`, tell the supervisor why this child cannot
 * start as configured ("!" and the message into $STAGEDOOR_READY_FD), so
 * that it can say it where systemd shows it; then exit CLI_EXIT_CONFIG.
 * Prints the message as cli_fail does and returns CLI_EXIT_CONFIG. */
int cli_cannot_start(int r);


/*
 * A listener's command (serve, shop, sqs): alone, or as run's child.
 * cli_listener_main parses --supervised and the settings, checks the
 * database opens, blocks SIGTERM, SIGINT and SIGHUP for every thread,
 * starts the server (start: with the settings and --supervised; [out]
 * *server), says ready, and waits: SIGHUP reopens the log, tick (may be
 * NULL) runs every tick_s seconds, SIGTERM or SIGINT stops the server.
 * start's SD_INVALID is a setting that cannot work (cli_cannot_start's
 * exit status).  Returns the exit status.
 */
struct cli_listener {
	const char *name;		/* "shop": its log lines */
	const char *usage;		/* "shop [--shop-listen ADDR:PORT] " CLI_CONFIG_USAGE */
	enum sd_result (*start)(const struct config *cfg, int supervised, void **server);
	void (*stop)(void *server);
	void (*tick)(const struct config *cfg);
	int tick_s;
};
int cli_listener_main(int argc, char **argv, const struct cli_listener *l);

/* cli_reload_log: SIGHUP in a listener (serve, shop): the settings read
 * again for the log's file (reopened) and level; a bad file changes
 * nothing. */
void cli_reload_log(const struct cli_config_flags *cf);

/* cli_provider_open: the payment provider the settings name: [out] *out
 * NULL for none; for stripe, its key read now (stripe.h).  SD_INVALID for
 * a provider the box does not know or a key it cannot use. */
enum sd_result cli_provider_open(const struct config *cfg, struct stripe **out);

/* cli_shop_base: the shop as buyers reach it, no trailing '/': shop_url,
 * else http(s)://<shop_listen> (127.0.0.1 for a listen without a host),
 * else "" (no shop). */
void cli_shop_base(const struct config *cfg, char *buf, size_t size);

#endif
