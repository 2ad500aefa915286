/*
 * config.h: the box's settings, from flags, the environment and one config
 * file, with where each value came from.
 *
 * Every key can be set three ways; the first that is set wins:
 *   1. a flag:                  --mail-url URL       (the key with '-' for '_')
 *   2. an environment variable: STAGEDOOR_MAIL_URL=URL (empty: unset)
 *   3. a line of the file:      mail_url = URL
 * and otherwise the key keeps its default.  The file is --config PATH, else
 * $STAGEDOOR_CONFIG, else /etc/stagedoor/stagedoor.conf when it exists.
 *
 * The file is read strictly: "key = value" lines, blank lines and lines whose
 * first non-blank character is '#'; key and value are trimmed.  An unknown
 * key, a key given twice, a line without '=', an empty or malformed value or
 * an unreadable file is an error that names the file, the line and the key.
 *
 * Invariants: no value is ever echoed in a message (a misplaced secret must
 * not reach a terminal or a log), and no key holds a secret: the SMTP
 * password is only ever named by its file (mail_password_file), or
 * $CREDENTIALS_DIRECTORY/mail_password (mail.h); `config show` prints that
 * file's name, never its contents, and masks credentials in a URL.
 */
#ifndef SD_CONFIG_H
#define SD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "controls.h"
#include "holds.h"
#include "mail.h"
#include "queue.h"
#include "result.h"
#include "stripe.h"

/* The keys, as indexes into struct config's values. */
enum config_key {
	CONFIG_DB,			/* the database file */
	CONFIG_STATE_DIR,		/* ticket.key, blobs/, maildir/; default: the db's folder */
	CONFIG_TICKET_KEY_FILE,		/* the key that signs ticket codes; default: <state>/ticket.key */
	CONFIG_BLOB_STORE,		/* files | db: where the PDFs are; default: by the engine */
	CONFIG_WORKERS,			/* worker processes under `run`; default: cores */
	CONFIG_CONCURRENCY,		/* handler threads per worker */
	CONFIG_GRACE_MS,		/* on stop: how long running handlers may finish */
	CONFIG_DURABILITY,		/* normal | full: the workers' synchronous level */
	CONFIG_BOX_NAME,		/* this box among those on one database; default: host */
	CONFIG_LEASE_MS,		/* every kind's policy, unless the kind has its own */
	CONFIG_MAX_ATTEMPTS,
	CONFIG_MAX_DELIVERIES,
	CONFIG_BACKOFF_BASE_MS,
	CONFIG_BACKOFF_CAP_MS,
	CONFIG_RENDER_LEASE_MS,		/* render_tickets_lease_ms, ... one group per kind */
	CONFIG_RENDER_MAX_ATTEMPTS,
	CONFIG_RENDER_BACKOFF_BASE_MS,
	CONFIG_RENDER_BACKOFF_CAP_MS,
	CONFIG_SEND_LEASE_MS,
	CONFIG_SEND_MAX_ATTEMPTS,
	CONFIG_SEND_BACKOFF_BASE_MS,
	CONFIG_SEND_BACKOFF_CAP_MS,
	CONFIG_COUNT_LEASE_MS,
	CONFIG_COUNT_MAX_ATTEMPTS,
	CONFIG_COUNT_BACKOFF_BASE_MS,
	CONFIG_COUNT_BACKOFF_CAP_MS,
	CONFIG_RETENTION_MS,		/* finished jobs kept this long */
	CONFIG_IDEM_RETENTION_MS,	/* processed_jobs kept this long (email_sends stay) */
	CONFIG_MAINTENANCE_MS,		/* between maintenance passes under `run` */
	CONFIG_WAL_WARN_BYTES,		/* warn when the WAL grows past this */
	CONFIG_DISK_WARN_BYTES,		/* warn, and fail /healthz, below this free space */
	CONFIG_BACKUP_DIR,		/* run's periodic backups go here; unset: none */
	CONFIG_BACKUP_INTERVAL_MS,	/* between two periodic backups */
	CONFIG_BACKUP_KEEP,		/* the newest good backups kept; older ones pruned */
	CONFIG_HTTP_LISTEN,		/* the API and dashboard under `run`; "off": none */
	CONFIG_HTTP_TLS_CERT,		/* the listener's certificate (PEM); unset: plain HTTP */
	CONFIG_HTTP_TLS_KEY,		/* its private key (PEM, mode 0600) */
	CONFIG_HTTP_HOSTS,		/* the names a request's Host may carry, by commas;
					 * default: the listener's address, localhost and
					 * the certificate's names */
	CONFIG_HTTP_PER_CLIENT_MAX,	/* open connections per client address */
	CONFIG_METRICS_AUTH,		/* on: /metrics needs a monitor token */
	CONFIG_DOORS_OPEN_BEFORE,	/* a door token scans from this long before its event */
	CONFIG_DOORS_CLOSE_AFTER,	/* until this long after it starts */
	CONFIG_API_KEY_TTL_MS,		/* how long a client Idempotency-Key is kept */
	CONFIG_RESEND_PER_HOUR,		/* resends of one order in an hour at most */
	CONFIG_RESEND_PER_DAY,		/* and in a day */
	CONFIG_SCAN_RATE,		/* scans a second one door token makes, on average */
	CONFIG_SCAN_BURST,		/* and at once */
	CONFIG_SCAN_LOG_RETENTION,	/* the scan log's rows kept this long after the event */
	CONFIG_TIMEZONE,		/* the venue's zone, an IANA name; default: the system's */
	CONFIG_START_GRACE,		/* an event may start this far in the past when set */
	CONFIG_SALES_CLOSE_AFTER,	/* an event's sales stop this long after it starts */
	CONFIG_REMIND_BEFORE,		/* a buyer's reminder this long before the start */
	CONFIG_LOCALE,			/* the shop's dates and amounts: "de-DE" */
	CONFIG_SHOP_LISTEN,		/* the public shop under `run`; "off": none */
	CONFIG_SHOP_URL,		/* the shop's address as buyers reach it */
	CONFIG_SHOP_NAME,		/* the name its pages carry */
	CONFIG_SHOP_TLS_CERT,		/* the shop listener's own certificate */
	CONFIG_SHOP_TLS_KEY,
	CONFIG_SHOP_TRUSTED_PROXIES,	/* whose X-Forwarded-For is believed */
	CONFIG_SHOP_HOLD,		/* how long seats are held while a buyer pays */
	CONFIG_SHOP_HOLD_RENEWALS,	/* renewals of one hold at most */
	CONFIG_SHOP_HOLDS_PER_CLIENT,	/* open holds from one client address */
	CONFIG_SHOP_HOLDS_PER_EMAIL,	/* open holds for one email address */
	CONFIG_SHOP_SEATS_MAX,		/* seats in one checkout */
	CONFIG_SHOP_RATE,		/* checkouts a minute from one client address */
	CONFIG_SHOP_UNPAID_SHARE,	/* % of an event's seats unpaid holds may take */
	CONFIG_SHOP_PENDING_MAX,	/* a delayed payment's seats are kept this long */
	CONFIG_SHOP_PAYMENT_METHODS,	/* Stripe's payment method types offered */
	CONFIG_SQS_LISTEN,		/* the SQS listener under `run`; "off": none */
	CONFIG_SQS_TLS_CERT,		/* its certificate */
	CONFIG_SQS_TLS_KEY,
	CONFIG_PAYMENT_PROVIDER,	/* none | stripe */
	CONFIG_STRIPE_API_URL,
	CONFIG_STRIPE_KEY_FILE,
	CONFIG_STRIPE_WEBHOOK_SECRET_FILE,
	CONFIG_STRIPE_CA_FILE,
	CONFIG_STRIPE_TIMEOUT_MS,	/* a provider request's time; its claims' and leases' floor */
	CONFIG_LOG_LEVEL,
	CONFIG_LOG_FILE,		/* append here instead of stderr; reopened on SIGHUP */
	CONFIG_MAIL_URL,
	CONFIG_MAIL_FROM,
	CONFIG_MAIL_USER,
	CONFIG_MAIL_PASSWORD_FILE,
	CONFIG_MAIL_CA_FILE,
	CONFIG_MAIL_TIMEOUT_MS,
	CONFIG_N_KEYS
};

#define CONFIG_FILE_DEFAULT "/etc/stagedoor/stagedoor.conf"
#define CONFIG_LINE_MAX 4096		/* bytes in one line of the file */
#define CONFIG_HOST_MAX 253		/* bytes of one name in http_hosts */
#define CONFIG_TIMEOUT_MS_MIN 100L
#define CONFIG_TIMEOUT_MS_MAX 3600000L	/* one hour */
#define CONFIG_LEASE_MARGIN_MS 5000L	/* send_tickets lease beyond the mail timeout */

/* A kind's limits from the file's lines `rate.KIND = 10/s [burst B]`,
 * `concurrency.KIND = N` and `box_concurrency.KIND = N` (controls.h): run
 * makes them the kind's limits at its start and at each reload. */
#define CONFIG_LIMITS_MAX 64
struct config_limit {
	char kind[QUEUE_KIND_MAX + 1];
	struct control_limits lim;	/* what the lines set; the rest 0: none */
	int line[3];			/* the lines that set the rate, concurrency,
					 * box_concurrency (0: none) */
};

/* The settings in force.  Strings are owned (config_free). */
struct config {
	struct config_limit limits[CONFIG_LIMITS_MAX];
	int n_limits;
	char *value[CONFIG_N_KEYS];		/* NULL: not set anywhere */
	int64_t num[CONFIG_N_KEYS];		/* numeric keys: the parsed value */
	char origin[CONFIG_N_KEYS][64];		/* "--mail-url", "STAGEDOOR_MAIL_URL",
						 * "FILE:LINE" (the file name shortened) */
	char file[512];				/* the file read; "" when none */
	long mail_timeout_ms;			/* parsed mail_timeout_ms; 0: not set */
};

/* config_key_name: "mail_url"; config_key_flag: "mail-url" (without "--");
 * config_key_env: "STAGEDOOR_MAIL_URL". */
const char *config_key_name(enum config_key k);
const char *config_key_flag(enum config_key k);
const char *config_key_env(enum config_key k);

/* config_key_live: 1 when `run` applies a new value on SIGHUP without
 * restarting anything; 0 when the workers must restart to take it. */
int config_key_live(enum config_key k);

/* config_key_doc: one line on what the key does (stagedoor.conf(5), the
 * flags' help); config_key_default: its default as text, NULL when the
 * module decides (the cores, the database's folder); config_key_metavar:
 * the value's name in help ("N", "FILE", "on|off"). */
const char *config_key_doc(enum config_key k);
const char *config_key_default(enum config_key k);
const char *config_key_metavar(enum config_key k);

/* config_init: every key unset.  config_free: the strings (accepts a
 * zeroed struct); the struct itself is the caller's. */
void config_init(struct config *c);
void config_free(struct config *c);


/* config_set: key k set to value, checked as the file's lines are; origin
 * names where it came from for the message ("STAGEDOOR_START_GRACE"). */
enum sd_result config_set(struct config *c, enum config_key k, const char *value,
			  const char *origin);

/* config_load_file: the keys the file at path sets (see above).  Keys
 * already set are overwritten; call it before config_load_env. */
enum sd_result config_load_file(struct config *c, const char *path);


/* config_file_path: the file to read: path (--config) when not NULL, else
 * $STAGEDOOR_CONFIG, else CONFIG_FILE_DEFAULT when it exists; NULL: none. */
const char *config_file_path(const char *path);

/*
 * config_resolve: the whole precedence in one call: c is initialised, then
 * the file (config_file_path(path)), the environment, and the flags
 * (flags[k] NULL: not given) applied in that order.  On error c is freed.
 */
enum sd_result config_resolve(struct config *c, const char *path,
			      const char *const flags[CONFIG_N_KEYS]);

/* config_is_set: 1 when a flag, the environment or the file set k. */
int config_is_set(const struct config *c, enum config_key k);

/* config_str: the value in force, or the key's default (NULL: none). */
const char *config_str(const struct config *c, enum config_key k);

/* config_int: a numeric key's value in force, or its default. */
int64_t config_int(const struct config *c, enum config_key k);

/* config_origin: where the value in force came from ("default" when unset). */
const char *config_origin(const struct config *c, enum config_key k);

/* config_show: every key, its value in force and its origin, one per line,
 * credentials in URLs masked. */
void config_show(const struct config *c, FILE *out);

/* config_mail: the mail_config for mail_open_opts; the strings stay c's. */
void config_mail(const struct config *c, struct mail_config *mc);

/* config_mail_url, config_mail_from: the values, or NULL when unset. */
const char *config_mail_url(const struct config *c);
const char *config_mail_from(const struct config *c);


/*
 * config_apply_leases: at worker start, the queue's policies from c: the
 * common keys (lease_ms, max_attempts, ...) for every kind, each kind's own
 * keys over them; base_lease_ms (> 0: a command's --lease-ms) over lease_ms.
 * send_tickets' lease is never shorter than config_send_lease_ms.
 * [out] *send_lease_ms (may be NULL): the lease set for send_tickets.
 */
enum sd_result config_apply_leases(const struct config *c, int64_t base_lease_ms,
				   int64_t *send_lease_ms);

/* config_provider: SD_OK when payment_provider names one the box knows
 * (none, stripe); [out] *stripe_on (may be NULL); sc (may be NULL) filled
 * from the stripe_ keys (its strings point into c). */
/* config_provider_stale_ms: how long a provider call's claim (a refund's)
 * is held before another run may take it over: stripe_timeout_ms plus
 * CONFIG_LEASE_MARGIN_MS, when no call of its holder can still be on its
 * way. */
int64_t config_provider_stale_ms(const struct config *c);

enum sd_result config_provider(const struct config *c, int *stripe_on,
			       struct stripe_config *sc);

/* config_hold_rules: the shop's holds, from the shop_ keys. */
void config_hold_rules(const struct config *c, struct hold_rules *h);

#endif
