/*
 * config.c: flags over environment over config file over defaults, for the
 * mail keys (see config.h for the rules and the invariants).
 *
 * Parsing never echoes a value: an error names the place (file:line or the
 * flag or variable) and the key only.
 */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jobkinds.h"
#include "log.h"
#include "queue.h"
#include "text.h"

/* ======================== the keys ======================================= */

enum ktype { K_STR, K_PATH, K_INT, K_LEVEL, K_DURABILITY, K_ADDR, K_URL, K_BLOB, K_DUR, K_BOOL,
	     K_HOSTS };

#define DAY_MS (24LL * 3600 * 1000)

static const struct keydef {
	const char *name;	/* in the file; the flag and variable derive from it */
	enum ktype type;
	int64_t min, max;	/* K_INT */
	const char *def;	/* the default as text; NULL: none (the module's own) */
	int live;		/* SIGHUP applies it without a restart */
	const char *doc;	/* one line for stagedoor.conf(5) and the flags' help */
} keys[CONFIG_N_KEYS] = {
	[CONFIG_DB] = { "db", K_PATH, 0, 0, "./var/stagedoor.db", 0,
		"the database: a file path (SQLite, WAL mode) or a postgresql:// URI" },
	[CONFIG_STATE_DIR] = { "state_dir", K_PATH, 0, 0, NULL, 0,
		"the box's own files: ticket.key, api.token, blobs/ (PDFs), maildir/, tls/ "
		  "(default: the database's folder; required with PostgreSQL)" },
	[CONFIG_TICKET_KEY_FILE] = { "ticket_key_file", K_PATH, 0, 0, NULL, 0,
		"the key that signs ticket codes (default: <state_dir>/ticket.key); boxes "
		  "sharing one PostgreSQL database need the same file" },
	[CONFIG_BLOB_STORE] = { "blob_store", K_BLOB, 0, 0, NULL, 0,
		"where ticket PDFs live: files (in state_dir) or db (in the database); default "
		  "files on SQLite, db on PostgreSQL" },
	[CONFIG_WORKERS] = { "workers", K_INT, 1, 256, NULL, 1,
		"worker processes run starts (default: the number of cores)" },
	[CONFIG_CONCURRENCY] = { "concurrency", K_INT, 1, 1024, "4", 0,
		"handler threads in each worker" },
	[CONFIG_GRACE_MS] = { "grace_ms", K_INT, 1, 3600000, "30000", 0,
		"on stop, how long running jobs may finish before the rest are handed back" },
	[CONFIG_DURABILITY] = { "durability", K_DURABILITY, 0, 0, "normal", 0,
		"normal, or full to fsync every queue commit (orders are always committed in "
		  "full)" },
	[CONFIG_BOX_NAME] = { "box_name", K_STR, 0, 0, NULL, 0,
		"this box's name among the boxes of one database, 1 to 64 of A-Z a-z 0-9 . _ - "
		  "(default: the host's name); its workers' leases carry it, for the limits per "
		  "box" },
	[CONFIG_LEASE_MS] = { "lease_ms", K_INT, 100, 7 * DAY_MS, "60000", 0,
		"a job's lease: a job not acknowledged in this time is claimed again" },
	[CONFIG_MAX_ATTEMPTS] = { "max_attempts", K_INT, 1, 1000, "10", 0,
		"failed attempts before a job goes to the dead letters" },
	[CONFIG_MAX_DELIVERIES] = { "max_deliveries", K_INT, 1, 1000, "5", 0,
		"lease expiries before a job is poison (dead letters)" },
	[CONFIG_BACKOFF_BASE_MS] = { "backoff_base_ms", K_INT, 1, DAY_MS, "1000", 0,
		"the first retry's delay; it doubles each attempt, with jitter" },
	[CONFIG_BACKOFF_CAP_MS] = { "backoff_cap_ms", K_INT, 1, 7 * DAY_MS, "600000", 0,
		"the longest retry delay" },
	[CONFIG_RENDER_LEASE_MS] = { "render_tickets_lease_ms", K_INT, 100, 7 * DAY_MS, NULL, 0,
		"render_tickets jobs' lease (default: lease_ms)" },
	[CONFIG_RENDER_MAX_ATTEMPTS] = { "render_tickets_max_attempts", K_INT, 1, 1000, NULL, 0,
		"render_tickets jobs' attempts (default: max_attempts)" },
	[CONFIG_RENDER_BACKOFF_BASE_MS] = { "render_tickets_backoff_base_ms", K_INT, 1, DAY_MS,
					     NULL, 0,
		"render_tickets jobs' first retry delay (default: backoff_base_ms)" },
	[CONFIG_RENDER_BACKOFF_CAP_MS] = { "render_tickets_backoff_cap_ms", K_INT, 1, 7 * DAY_MS,
					    NULL, 0,
		"render_tickets jobs' longest retry delay (default: backoff_cap_ms)" },
	[CONFIG_SEND_LEASE_MS] = { "send_tickets_lease_ms", K_INT, 100, 7 * DAY_MS, NULL, 0,
		"send_tickets jobs' lease (default: lease_ms, and at least the mail timeout and "
		  "a margin)" },
	[CONFIG_SEND_MAX_ATTEMPTS] = { "send_tickets_max_attempts", K_INT, 1, 1000, NULL, 0,
		"send_tickets jobs' attempts (default: max_attempts)" },
	[CONFIG_SEND_BACKOFF_BASE_MS] = { "send_tickets_backoff_base_ms", K_INT, 1, DAY_MS, NULL,
					   0,
		"send_tickets jobs' first retry delay (default: backoff_base_ms)" },
	[CONFIG_SEND_BACKOFF_CAP_MS] = { "send_tickets_backoff_cap_ms", K_INT, 1, 7 * DAY_MS,
					  NULL, 0,
		"send_tickets jobs' longest retry delay (default: backoff_cap_ms)" },
	[CONFIG_COUNT_LEASE_MS] = { "update_sales_counter_lease_ms", K_INT, 100, 7 * DAY_MS, NULL,
				    0,
		"update_sales_counter jobs' lease (default: lease_ms)" },
	[CONFIG_COUNT_MAX_ATTEMPTS] = { "update_sales_counter_max_attempts", K_INT, 1, 1000, NULL,
					0,
		"update_sales_counter jobs' attempts (default: max_attempts)" },
	[CONFIG_COUNT_BACKOFF_BASE_MS] = { "update_sales_counter_backoff_base_ms", K_INT, 1,
					   DAY_MS, NULL, 0,
		"update_sales_counter jobs' first retry delay (default: backoff_base_ms)" },
	[CONFIG_COUNT_BACKOFF_CAP_MS] = { "update_sales_counter_backoff_cap_ms", K_INT, 1,
					  7 * DAY_MS, NULL, 0,
		"update_sales_counter jobs' longest retry delay (default: backoff_cap_ms)" },
	[CONFIG_RETENTION_MS] = { "retention_ms", K_INT, 0, 3650 * DAY_MS, "604800000", 1,
		"how long finished jobs are kept before maintenance prunes them" },
	[CONFIG_IDEM_RETENTION_MS] = { "idem_retention_ms", K_INT, 0, 3650 * DAY_MS,
				       "2592000000", 1,
		"how long the handlers' idempotency records are kept" },
	[CONFIG_MAINTENANCE_MS] = { "maintenance_ms", K_INT, 50, 3600000, "1000", 1,
		"how often run's maintenance pass runs (checkpoints, pruning, statistics)" },
	[CONFIG_WAL_WARN_BYTES] = { "wal_warn_bytes", K_INT, 65536, 1LL << 40, "67108864", 1,
		"a WAL file larger than this is logged as a warning" },
	[CONFIG_DISK_WARN_BYTES] = { "disk_warn_bytes", K_INT, 1, 1LL << 50, "536870912", 0,
		"free space below which the box warns and /healthz answers 503" },
	[CONFIG_BACKUP_DIR] = { "backup_dir", K_PATH, 0, 0, NULL, 0,
		"run's periodic backups go here (unset: none)" },
	[CONFIG_BACKUP_INTERVAL_MS] = { "backup_interval_ms", K_INT, 1000, 30 * DAY_MS, "3600000",
					0,
		"time between periodic backups" },
	[CONFIG_BACKUP_KEEP] = { "backup_keep", K_INT, 1, 10000, "24", 0,
		"the newest good backups kept" },
	[CONFIG_HTTP_LISTEN] = { "http_listen", K_STR, 0, 0, "127.0.0.1:8080", 0,
		"ADDRESS:PORT of the HTTP API, dashboard and door page, or off; anything but "
		  "loopback needs http_tls_cert and http_tls_key" },
	[CONFIG_HTTP_TLS_CERT] = { "http_tls_cert", K_PATH, 0, 0, NULL, 0,
		"the server certificate (PEM) that makes the listener speak HTTPS only "
		  "(stagedoor tls init makes one)" },
	[CONFIG_HTTP_TLS_KEY] = { "http_tls_key", K_PATH, 0, 0, NULL, 0,
		"its private key (PEM, mode 0600); also read from "
		  "$CREDENTIALS_DIRECTORY/http_tls_key" },
	[CONFIG_HTTP_HOSTS] = { "http_hosts", K_HOSTS, 0, 0, NULL, 0,
		"the Host names accepted, comma-separated (default: the listener's address, "
		  "localhost and the certificate's names)" },
	[CONFIG_HTTP_PER_CLIENT_MAX] = { "http_per_client_max", K_INT, 1, 1024, "32", 0,
		"open connections one client address may hold" },
	[CONFIG_METRICS_AUTH] = { "metrics_auth", K_BOOL, 0, 0, "off", 0,
		"on: /metrics needs a monitor token (default: on when http_listen is not "
		  "loopback, off on loopback)" },
	[CONFIG_DOORS_OPEN_BEFORE] = { "doors_open_before", K_DUR, 0, 7 * DAY_MS, "3h", 0,
		"a door token bound to an event scans from this long before it starts (90m, 3h, "
		  "2d)" },
	[CONFIG_DOORS_CLOSE_AFTER] = { "doors_close_after", K_DUR, 0, 7 * DAY_MS, "6h", 0,
		"until this long after it starts" },
	[CONFIG_API_KEY_TTL_MS] = { "api_key_ttl_ms", K_INT, 1000, 3650 * DAY_MS, "86400000", 0,
		"how long clients' Idempotency-Keys are kept" },
	[CONFIG_RESEND_PER_HOUR] = { "resend_per_hour", K_INT, 0, 1000, "3", 0,
		"an order's tickets sent again at most this often in an hour (0: no limit)" },
	[CONFIG_RESEND_PER_DAY] = { "resend_per_day", K_INT, 0, 10000, "10", 0,
		"and in a day (0: no limit)" },
	[CONFIG_SCAN_RATE] = { "scan_rate", K_INT, 0, 1000, "2", 0,
		"scans a second one door token may make, on average (0: no limit); more are "
		  "refused with 429" },
	[CONFIG_SCAN_BURST] = { "scan_burst", K_INT, 1, 100000, "30", 0,
		"and at once, after a quiet while (a group at the door)" },
	[CONFIG_SCAN_LOG_RETENTION] = { "scan_log_retention", K_DUR, 0, 3650 * DAY_MS, "30d", 1,
		"the scan log's rows are kept this long after their event starts (0: for ever); "
		  "the per-minute counts stay" },
	[CONFIG_TIMEZONE] = { "timezone", K_STR, 0, 0, NULL, 0,
		"the venue's time zone, a name of the tz database such as Europe/Berlin (default: "
		  "the system's); every time a person reads is in it" },
	[CONFIG_START_GRACE] = { "start_grace", K_DUR, 0, 7 * DAY_MS, "0", 0,
		"how far in the past an event's start may be when it is added or moved (for a show "
		  "already running; 0: not at all)" },
	[CONFIG_SALES_CLOSE_AFTER] = { "sales_close_after", K_DUR, 0, 7 * DAY_MS, "2h", 0,
		"an event's sales stop this long after it starts (at the window, a late-comer)" },
	[CONFIG_REMIND_BEFORE] = { "remind_before", K_DUR, 0, 30 * DAY_MS, "24h", 0,
		"each buyer gets a reminder email this long before the event starts (0: none; "
		  "set for orders made from then on; `event set ID --reminders off` for one "
		  "event)" },
	[CONFIG_LOCALE] = { "locale", K_STR, 0, 0, "en-GB", 0,
		"how the shop writes dates and amounts for buyers: en-GB, en-US, de-DE, fr-FR, "
		  "nl-NL, es-ES, it-IT, ..." },
	[CONFIG_SHOP_LISTEN] = { "shop_listen", K_STR, 0, 0, "off", 0,
		"ADDRESS:PORT of the public shop (its own listener; never the API or the "
		  "dashboard), or off; anything but loopback needs shop_tls_cert and shop_tls_key" },
	[CONFIG_SHOP_URL] = { "shop_url", K_STR, 0, 0, NULL, 0,
		"the shop's address as buyers reach it, https://tickets.venue.example (behind a "
		  "reverse proxy); default: the listener's own" },
	[CONFIG_SHOP_NAME] = { "shop_name", K_STR, 0, 0, "Tickets", 0,
		"the name at the top of the shop's pages (the venue's)" },
	[CONFIG_SHOP_TLS_CERT] = { "shop_tls_cert", K_PATH, 0, 0, NULL, 0,
		"the shop listener's certificate (PEM), when it faces the internet itself" },
	[CONFIG_SHOP_TLS_KEY] = { "shop_tls_key", K_PATH, 0, 0, NULL, 0,
		"its private key (PEM, mode 0600); also read from "
		  "$CREDENTIALS_DIRECTORY/shop_tls_key" },
	[CONFIG_SHOP_TRUSTED_PROXIES] = { "shop_trusted_proxies", K_HOSTS, 0, 0, NULL, 0,
		"addresses of reverse proxies in front of the shop, comma-separated: their "
		  "X-Forwarded-For names the buyer (default: none, the peer is the buyer)" },
	[CONFIG_SHOP_HOLD] = { "shop_hold", K_DUR, 60000, 3600000, "10m", 0,
		"how long seats are held while a buyer pays (1m to 1h)" },
	[CONFIG_SHOP_HOLD_RENEWALS] = { "shop_hold_renewals", K_INT, 0, 5, "1", 0,
		"how often a buyer may ask for that time again" },
	[CONFIG_SHOP_HOLDS_PER_CLIENT] = { "shop_holds_per_client", K_INT, 1, 1000, "4", 0,
		"unpaid checkouts one client address may hold at once" },
	[CONFIG_SHOP_HOLDS_PER_EMAIL] = { "shop_holds_per_email", K_INT, 1, 100, "2", 0,
		"no longer used: the caps count client addresses and their networks, never an "
		  "email address a stranger could type (accepted so that older files load)" },
	[CONFIG_SQS_LISTEN] = { "sqs_listen", K_STR, 0, 0, "off", 0,
		"ADDRESS:PORT of the SQS listener (queues of one's own for any SQS client; its "
		  "own listener), or off; anything but loopback needs sqs_tls_cert and sqs_tls_key" },
	[CONFIG_SQS_TLS_CERT] = { "sqs_tls_cert", K_PATH, 0, 0, NULL, 0,
		"the SQS listener's certificate (PEM)" },
	[CONFIG_SQS_TLS_KEY] = { "sqs_tls_key", K_PATH, 0, 0, NULL, 0,
		"its private key (PEM, mode 0600); also read from "
		  "$CREDENTIALS_DIRECTORY/sqs_tls_key" },
	[CONFIG_SHOP_SEATS_MAX] = { "shop_seats_max", K_INT, 1, 100, "10", 0,
		"seats one checkout may take" },
	[CONFIG_SHOP_RATE] = { "shop_rate", K_INT, 0, 100000, "10", 0,
		"checkouts a minute one client address may start (0: no limit); more are "
		  "refused with 429" },
	[CONFIG_SHOP_UNPAID_SHARE] = { "shop_unpaid_share", K_INT, 1, 100, "25", 0,
		"the percentage of an event's seats that unpaid checkouts may hold at once; more "
		  "buyers wait in line, served in the order they came" },
	[CONFIG_SHOP_PENDING_MAX] = { "shop_pending_max", K_DUR, 3600000, 30 * DAY_MS, "7d", 0,
		"how long seats paid by a delayed method (a direct debit, a bank transfer) are kept "
		  "while the money is on its way; then they go back on sale" },
	[CONFIG_SHOP_PAYMENT_METHODS] = { "shop_payment_methods", K_STR, 0, 0, NULL, 0,
		"Stripe's payment method types the shop offers, comma-separated (card, link, "
		  "sepa_debit, ...); default: those the Stripe account enables; card alone takes no "
		  "delayed payment" },
	[CONFIG_PAYMENT_PROVIDER] = { "payment_provider", K_STR, 0, 0, "none", 0,
		"none (orders at the window and through the API only) or stripe (the shop takes "
		  "payments)" },
	[CONFIG_STRIPE_API_URL] = { "stripe_api_url", K_STR, 0, 0, "https://api.stripe.com", 0,
		"Stripe's API (another only for a provider run on this machine, tools/paysink)" },
	[CONFIG_STRIPE_KEY_FILE] = { "stripe_key_file", K_PATH, 0, 0, NULL, 0,
		"a file holding the Stripe secret key, sk_... (mode 0600; or "
		  "$CREDENTIALS_DIRECTORY/stripe_key)" },
	[CONFIG_STRIPE_WEBHOOK_SECRET_FILE] = { "stripe_webhook_secret_file", K_PATH, 0, 0, NULL, 0,
		"a file holding the webhook endpoint's secret, whsec_..., and while rotating the "
		  "old one on a second line (mode 0600; or "
		  "$CREDENTIALS_DIRECTORY/stripe_webhook_secret)" },
	[CONFIG_STRIPE_CA_FILE] = { "stripe_ca_file", K_PATH, 0, 0, NULL, 0,
		"the CA certificates Stripe's certificate is checked against (default: the "
		  "system's)" },
	[CONFIG_STRIPE_TIMEOUT_MS] = { "stripe_timeout_ms", K_INT, 1000, 120000, "20000", 0,
		"a request to the payment provider gives up after this; the provider's jobs "
		  "hold their lease, and a refund its claim, at least this + 5 s" },
	[CONFIG_LOG_LEVEL] = { "log_level", K_LEVEL, 0, 0, "info", 1,
		"debug, info, warn, error or off" },
	[CONFIG_LOG_FILE] = { "log_file", K_PATH, 0, 0, NULL, 1,
		"the log's file (default: stderr, which systemd sends to the journal); reopened "
		  "on SIGHUP" },
	[CONFIG_MAIL_URL] = { "mail_url", K_URL, 0, 0, NULL, 0,
		"where ticket emails go: smtp://, smtps://, an https:// mail API, or maildir:DIR "
		  "(default: <state_dir>/maildir)" },
	[CONFIG_MAIL_FROM] = { "mail_from", K_ADDR, 0, 0, NULL, 0,
		"the sender's address" },
	[CONFIG_MAIL_USER] = { "mail_user", K_STR, 0, 0, NULL, 0,
		"the SMTP AUTH user" },
	[CONFIG_MAIL_PASSWORD_FILE] = { "mail_password_file", K_PATH, 0, 0, NULL, 0,
		"a file holding the SMTP password (mode 0600; or "
		  "$CREDENTIALS_DIRECTORY/mail_password)" },
	[CONFIG_MAIL_CA_FILE] = { "mail_ca_file", K_PATH, 0, 0, NULL, 0,
		"the CA certificates the mail server's certificate is checked against (default: "
		  "the system's)" },
	[CONFIG_MAIL_TIMEOUT_MS] = { "mail_timeout_ms", K_INT, CONFIG_TIMEOUT_MS_MIN,
				     CONFIG_TIMEOUT_MS_MAX, "60000", 0,
		"one mail attempt's time limit" },
};

/* special_parse: a duration ("3h"), a switch (on/off) or a list of host
 * names ("box.local, 192.0.2.10") into *num (the list: its length). */
static enum sd_result special_parse(enum config_key k, const char *v, const char *origin,
				    int64_t *num)
{
	if (keys[k].type == K_DUR) {
		if (text_duration_ms(v, num) != 0 || *num < keys[k].min || *num > keys[k].max)
			return err_set(SD_INVALID, "%s: %s must be a duration like 90m, 3h or 2d, "
				       "at most %lldd", origin, keys[k].name,
				       (long long)(keys[k].max / DAY_MS));
		return SD_OK;
	}
	if (keys[k].type == K_BOOL) {
		if (strcmp(v, "on") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "true") == 0)
			*num = 1;
		else if (strcmp(v, "off") == 0 || strcmp(v, "no") == 0 || strcmp(v, "false") == 0)
			*num = 0;
		else
			return err_set(SD_INVALID, "%s: %s must be on or off", origin, keys[k].name);
		return SD_OK;
	}
	*num = 0;
	for (; *v; (*num)++) {
		size_t n = strcspn(v, ", ");

		if (n == 0 || n > CONFIG_HOST_MAX)
			return err_set(SD_INVALID, "%s: %s must be host names or addresses "
				       "separated by commas", origin, keys[k].name);
		v += n;
		v += strspn(v, ", ");
	}
	return *num ? SD_OK : err_set(SD_INVALID, "%s: %s names no host", origin, keys[k].name);
}

/* The flag ("mail-url") and the variable ("STAGEDOOR_MAIL_URL"), derived
 * from the name once. */
static char flag_names[CONFIG_N_KEYS][48], envs[CONFIG_N_KEYS][56];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void names_make(void)
{
	int k;
	size_t i;

	for (k = 0; k < CONFIG_N_KEYS; k++) {
		const char *n = keys[k].name;
		snprintf(envs[k], sizeof envs[k], "STAGEDOOR_");
		for (i = 0; n[i] && i + 1 < sizeof flag_names[k]; i++) {
			flag_names[k][i] = n[i] == '_' ? '-' : n[i];
			envs[k][10 + i] = (char)toupper((unsigned char)n[i]);
		}
		flag_names[k][i] = '\0';
		envs[k][10 + i] = '\0';
	}
}

const char *config_key_name(enum config_key k)
{
	return keys[k].name;
}

const char *config_key_flag(enum config_key k)
{
	pthread_once(&names_once, names_make);
	return flag_names[k];
}

const char *config_key_env(enum config_key k)
{
	pthread_once(&names_once, names_make);
	return envs[k];
}

int config_key_live(enum config_key k)
{
	return keys[k].live;
}

const char *config_key_doc(enum config_key k)
{
	return keys[k].doc;
}

const char *config_key_default(enum config_key k)
{
	return keys[k].def;
}

const char *config_key_metavar(enum config_key k)
{
	switch (keys[k].type) {
	case K_INT: return "N";
	case K_PATH: return k == CONFIG_DB ? "PATH|URI" : k == CONFIG_STATE_DIR ||
					    k == CONFIG_BACKUP_DIR ? "DIR" : "FILE";
	case K_URL: return "URL";
	case K_ADDR: return "ADDR";
	case K_DUR: return "DURATION";
	case K_BOOL: return "on|off";
	case K_LEVEL: return "LEVEL";
	case K_DURABILITY: return "normal|full";
	case K_BLOB: return "files|db";
	case K_HOSTS: return "HOSTS";
	default: return "VALUE";
	}
}

void config_init(struct config *c)
{
	memset(c, 0, sizeof *c);
}

void config_free(struct config *c)
{
	int k;

	if (!c)
		return;
	for (k = 0; k < CONFIG_N_KEYS; k++)
		free(c->value[k]);
	memset(c, 0, sizeof *c);
}

/* ======================== values ======================================== */

static int is_blank(int ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\v' || ch == '\f';
}

/* trim: [in] s, n bytes; [out] *start, *len without surrounding blanks. */
static void trim(const char *s, size_t n, const char **start, size_t *len)
{
	while (n && is_blank((unsigned char)*s)) {
		s++;
		n--;
	}
	while (n && is_blank((unsigned char)s[n - 1]))
		n--;
	*start = s;
	*len = n;
}

/* set_n: config_set on n bytes that need not be terminated. */
static enum sd_result set_n(struct config *c, enum config_key k, const char *value, size_t n,
			    const char *origin)
{
	const char *v;
	size_t len;
	char *copy;

	trim(value, n, &v, &len);
	if (len == 0)
		return err_set(SD_INVALID, "%s: %s needs a value", origin, keys[k].name);
	if (memchr(v, '\0', len))
		return err_set(SD_INVALID, "%s: %s: the value holds a control character", origin,
			       keys[k].name);
	if (!(copy = strndup(v, len)))
		return err_set(SD_NOMEM, "out of memory");
	{
		char what[160];

		snprintf(what, sizeof what, "%s: %s: the value", origin, keys[k].name);
		if (text_check(what, copy, SIZE_MAX) != SD_OK) {
			free(copy);
			return SD_INVALID;
		}
	}
	if (keys[k].type == K_INT) {
		char *end;
		long long num;

		errno = 0;
		num = strtoll(copy, &end, 10);
		if (errno || *end || end == copy || copy[0] == '+' || copy[0] == '-' ||
		    num < keys[k].min || num > keys[k].max) {
			free(copy);
			return err_set(SD_INVALID, "%s: %s must be a whole number from %lld to %lld",
				       origin, keys[k].name, (long long)keys[k].min,
				       (long long)keys[k].max);
		}
		c->num[k] = num;
		if (k == CONFIG_MAIL_TIMEOUT_MS)
			c->mail_timeout_ms = (long)num;
	} else if (keys[k].type == K_DUR || keys[k].type == K_BOOL || keys[k].type == K_HOSTS) {
		enum sd_result r = special_parse(k, copy, origin, &c->num[k]);

		if (r != SD_OK) {
			free(copy);
			return r;
		}
	} else if (keys[k].type == K_LEVEL && log_level_parse(copy) < 0) {
		free(copy);
		return err_set(SD_INVALID, "%s: %s must be debug, info, warn, error or off", origin,
			       keys[k].name);
	} else if (keys[k].type == K_DURABILITY && strcmp(copy, "normal") != 0 &&
		   strcmp(copy, "full") != 0) {
		free(copy);
		return err_set(SD_INVALID, "%s: %s must be normal or full", origin, keys[k].name);
	} else if (keys[k].type == K_BLOB && strcmp(copy, "files") != 0 &&
		   strcmp(copy, "db") != 0) {
		free(copy);
		return err_set(SD_INVALID, "%s: %s must be files or db", origin, keys[k].name);
	} else if (keys[k].type == K_ADDR && mail_address_valid(copy) != SD_OK) {
		free(copy);
		return err_set(SD_INVALID, "%s: %s is not a plain address local@domain", origin,
			       keys[k].name);
	} else if (keys[k].type == K_URL && strchr(copy, ' ')) {
		free(copy);
		return err_set(SD_INVALID, "%s: %s holds a space", origin, keys[k].name);
	}
	free(c->value[k]);
	c->value[k] = copy;
	snprintf(c->origin[k], sizeof c->origin[k], "%s", origin);
	return SD_OK;
}

/*
 * config_set: set key k to value (trimmed here), checked for its key.
 * [in] origin names where the value came from, for the message on error
 * ("--mail-from", "stagedoor.conf:3").  SD_INVALID names origin and key,
 * never the value.
 */
enum sd_result config_set(struct config *c, enum config_key k, const char *value,
			  const char *origin)
{
	if (!value)
		return err_set(SD_INVALID, "%s: %s needs a value", origin, keys[k].name);
	return set_n(c, k, value, strlen(value), origin);
}

/* ======================== the file ======================================= */

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* value_of: a file line's value (n bytes after its '=') without its
 * comment: a '#' after a space or a tab starts one, as in most config
 * formats, so an example line uncommented keeps its note; "\#" is a '#' of
 * the value.  A '#' inside a word (a URL's fragment, a password) is the
 * value's.  [out] buf (n bytes at most).  Returns the value's length. */
static size_t value_of(const char *v, size_t n, char *buf)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		if (v[i] == '\\' && i + 1 < n && v[i + 1] == '#') {
			buf[o++] = v[++i];
			continue;
		}
		if (v[i] == '#' && i > 0 && is_blank((unsigned char)v[i - 1]))
			break;
		buf[o++] = v[i];
	}
	return o;
}

/* limit_line: `rate.KIND = ...`, `concurrency.KIND = N` or
 * `box_concurrency.KIND = N` into c->limits; SD_NOT_FOUND when key is none
 * of them */
static enum sd_result limit_line(struct config *c, const char *path, int lineno, const char *key,
				 size_t klen, const char *value)
{
	static const char *const pre[3] = { "rate.", "concurrency.", "box_concurrency." };
	char kind[QUEUE_KIND_MAX + 1];
	struct config_limit *l = NULL;
	long long v = 0;
	int t, i, used = 0;

	for (t = 0; t < 3 && !(klen > strlen(pre[t]) && memcmp(key, pre[t], strlen(pre[t])) == 0);
	     t++)
		;
	if (t == 3)
		return SD_NOT_FOUND;
	snprintf(kind, sizeof kind, "%.*s", (int)(klen - strlen(pre[t])), key + strlen(pre[t]));
	if (klen - strlen(pre[t]) > QUEUE_KIND_MAX || queue_kind_valid(kind) != SD_OK)
		return err_set(SD_INVALID, "%s:%d: %s takes a job kind after the dot", path, lineno,
			       pre[t]);
	for (i = 0; i < c->n_limits && !l; i++)
		if (strcmp(c->limits[i].kind, kind) == 0)
			l = &c->limits[i];
	if (!l && c->n_limits == CONFIG_LIMITS_MAX)
		return err_set(SD_INVALID, "%s:%d: limits for %d kinds at most", path, lineno,
			       CONFIG_LIMITS_MAX);
	if (!l) {
		l = &c->limits[c->n_limits++];
		memset(l, 0, sizeof *l);
		snprintf(l->kind, sizeof l->kind, "%s", kind);
	}
	if (l->line[t])
		return err_set(SD_INVALID, "%s:%d: %s%s is set twice (first on line %d)", path,
			       lineno, pre[t], kind, l->line[t]);
	l->line[t] = lineno;
	if (t == 0) {
		char why[300];

		if (controls_rate_parse(value, &l->lim) == SD_OK)
			return SD_OK;
		snprintf(why, sizeof why, "%s", err_msg());
		return err_set(SD_INVALID, "%s:%d: rate.%s: %s", path, lineno, kind, why);
	}
	if (sscanf(value, "%lld%n", &v, &used) != 1 || value[used] || v < 1 ||
	    v > CONTROLS_LIMIT_MAX)
		return err_set(SD_INVALID, "%s:%d: %s%s takes a number of jobs, 1 to %d", path,
			       lineno, pre[t], kind, CONTROLS_LIMIT_MAX);
	if (t == 1)
		l->lim.concurrency = v;
	else
		l->lim.box_concurrency = v;
	return SD_OK;
}

/* parse_line: one line of the file (without its LF).  [in,out] seen[k]:
 * the line that set key k, for the duplicate check. */
static enum sd_result parse_line(struct config *c, const char *path, int lineno,
				 const char *line, size_t n, int seen[CONFIG_N_KEYS])
{
	const char *eq, *key;
	char origin[64], value[CONFIG_LINE_MAX + 1];
	size_t klen, vlen;
	int k;

	trim(line, n, &key, &klen);
	if (klen == 0 || key[0] == '#')
		return SD_OK;
	if (memchr(line, '\0', n))
		return err_set(SD_INVALID, "%s:%d: the line holds a NUL byte", path, lineno);
	if (!(eq = memchr(line, '=', n)))
		return err_set(SD_INVALID, "%s:%d: not a 'key = value' line", path, lineno);
	trim(line, (size_t)(eq - line), &key, &klen);
	if (klen == 0)
		return err_set(SD_INVALID, "%s:%d: a line with no key before '='", path, lineno);
	for (k = 0; k < CONFIG_N_KEYS; k++)
		if (strlen(keys[k].name) == klen && memcmp(keys[k].name, key, klen) == 0)
			break;
	if (k == CONFIG_N_KEYS) {
		int i, ok = 1;
		enum sd_result r;

		vlen = value_of(eq + 1, n - (size_t)(eq + 1 - line), value);
		value[vlen] = '\0';
		if ((r = limit_line(c, path, lineno, key, klen, value)) != SD_NOT_FOUND)
			return r;

		/* the key is named only when it looks like one: a line that is
		 * a stray secret must not be echoed */
		for (i = 0; i < (int)klen && ok; i++)
			ok = (key[i] >= 'a' && key[i] <= 'z') || (key[i] >= 'A' && key[i] <= 'Z') ||
			     (key[i] >= '0' && key[i] <= '9') || key[i] == '_' || key[i] == '-' ||
			     key[i] == '.';
		if (!ok || klen > 40)
			return err_set(SD_INVALID, "%s:%d: not a 'key = value' line", path, lineno);
		if (klen == 13 && memcmp(key, "mail_password", 13) == 0)
			return err_set(SD_INVALID, "%s:%d: mail_password: a password is never a "
				       "config value; name its file (mode 0600) with "
				       "mail_password_file, or use $CREDENTIALS_DIRECTORY/"
				       "mail_password", path, lineno);
		return err_set(SD_INVALID, "%s:%d: unknown key '%.*s' ('stagedoor config "
			       "show' lists the keys)", path, lineno, (int)klen, key);
	}
	if (seen[k])
		return err_set(SD_INVALID, "%s:%d: %s is set twice (first on line %d)", path,
			       lineno, keys[k].name, seen[k]);
	seen[k] = lineno;
	snprintf(origin, sizeof origin, "%.40s:%d", path, lineno);
	if (strlen(path) > 40)
		snprintf(origin, sizeof origin, "%.40s:%d", base_name(path), lineno);
	vlen = value_of(eq + 1, n - (size_t)(eq + 1 - line), value);
	return set_n(c, (enum config_key)k, value, vlen, origin);
}

enum sd_result config_load_file(struct config *c, const char *path)
{
	int seen[CONFIG_N_KEYS] = { 0 };
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	enum sd_result r = SD_OK;
	int lineno = 0;
	FILE *f;

	if (!path || !*path)
		return err_set(SD_INVALID, "--config needs a file name");
	if (!(f = fopen(path, "r")))
		return err_set(SD_IO, "config file %s: cannot read it: %s", path, strerror(errno));
	snprintf(c->file, sizeof c->file, "%s", path);
	while ((n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		if (n > CONFIG_LINE_MAX) {
			r = err_set(SD_INVALID, "%s:%d: the line is longer than %d bytes", path,
				    lineno, CONFIG_LINE_MAX);
			goto out;
		}
		if (n > 0 && line[n - 1] == '\n')
			n--;
		if ((r = parse_line(c, path, lineno, line, (size_t)n, seen)) != SD_OK)
			goto out;
	}
	if (ferror(f))
		r = err_set(SD_IO, "config file %s: read error after line %d", path, lineno);
out:
	free(line);
	fclose(f);
	return r;
}

/* ======================== environment, flags ============================= */

static enum sd_result config_load_env(struct config *c)
{
	enum sd_result r;
	int k;

	for (k = 0; k < CONFIG_N_KEYS; k++) {
		const char *env = config_key_env((enum config_key)k), *v = getenv(env);

		if (v && *v && (r = config_set(c, (enum config_key)k, v, env)) != SD_OK)
			return r;
	}
	return SD_OK;
}

enum sd_result config_resolve(struct config *c, const char *path,
			      const char *const flags[CONFIG_N_KEYS])
{
	enum sd_result r = SD_OK;
	char origin[64];
	int k;

	config_init(c);
	if ((path = config_file_path(path)) && (r = config_load_file(c, path)) != SD_OK)
		goto out;
	if ((r = config_load_env(c)) != SD_OK)
		goto out;
	for (k = 0; flags && k < CONFIG_N_KEYS; k++) {
		if (!flags[k])
			continue;
		snprintf(origin, sizeof origin, "--%.48s", config_key_flag((enum config_key)k));
		if ((r = config_set(c, (enum config_key)k, flags[k], origin)) != SD_OK)
			goto out;
	}
out:
	if (r != SD_OK)
		config_free(c);
	return r;
}

/* ======================== what the modules get =========================== */

void config_mail(const struct config *c, struct mail_config *mc)
{
	memset(mc, 0, sizeof *mc);
	mc->ca_file = c->value[CONFIG_MAIL_CA_FILE];
	mc->user = c->value[CONFIG_MAIL_USER];
	mc->password_file = c->value[CONFIG_MAIL_PASSWORD_FILE];
	mc->connect_timeout_ms = 0;
	mc->timeout_ms = c->mail_timeout_ms;
}

const char *config_mail_url(const struct config *c)
{
	return c->value[CONFIG_MAIL_URL];
}

const char *config_mail_from(const struct config *c)
{
	return c->value[CONFIG_MAIL_FROM];
}

const char *config_file_path(const char *path)
{
	const char *env = getenv("STAGEDOOR_CONFIG");

	if (path)
		return path;
	if (env && *env)
		return env;
	return access(CONFIG_FILE_DEFAULT, F_OK) == 0 ? CONFIG_FILE_DEFAULT : NULL;
}

const char *config_str(const struct config *c, enum config_key k)
{
	return c->value[k] ? c->value[k] : keys[k].def;
}

static int64_t cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > 256 ? 256 : n;
}

int64_t config_int(const struct config *c, enum config_key k)
{
	if (c->value[k])
		return c->num[k];
	if (k == CONFIG_WORKERS)
		return cores();
	if (keys[k].def && (keys[k].type == K_DUR || keys[k].type == K_BOOL)) {
		int64_t v = 0;

		special_parse(k, keys[k].def, "default", &v);
		return v;
	}
	return keys[k].def ? strtoll(keys[k].def, NULL, 10) : 0;
}

int config_is_set(const struct config *c, enum config_key k)
{
	return c->value[k] != NULL;
}

const char *config_origin(const struct config *c, enum config_key k)
{
	return c->value[k] ? c->origin[k] : "default";
}

/* the file's limit lines, as the kinds' limits run sets from them */
static void limits_show(const struct config *c, FILE *out)
{
	char key[96], v[64];
	int i;

	for (i = 0; i < c->n_limits; i++) {
		const struct config_limit *l = &c->limits[i];

		if (l->line[0]) {
			snprintf(key, sizeof key, "rate.%s", l->kind);
			controls_rate_text(&l->lim, v, sizeof v);
			fprintf(out, "%-38s = %-40s # %.40s:%d\n", key, v, c->file, l->line[0]);
		}
		if (l->line[1]) {
			snprintf(key, sizeof key, "concurrency.%s", l->kind);
			snprintf(v, sizeof v, "%lld", (long long)l->lim.concurrency);
			fprintf(out, "%-38s = %-40s # %.40s:%d\n", key, v, c->file, l->line[1]);
		}
		if (l->line[2]) {
			snprintf(key, sizeof key, "box_concurrency.%s", l->kind);
			snprintf(v, sizeof v, "%lld", (long long)l->lim.box_concurrency);
			fprintf(out, "%-38s = %-40s # %.40s:%d\n", key, v, c->file, l->line[2]);
		}
	}
}

void config_show(const struct config *c, FILE *out)
{
	char v[1024];
	int k;

	fprintf(out, "# config file: %s\n", c->file[0] ? c->file : "(none)");
	for (k = 0; k < CONFIG_N_KEYS; k++) {
		const char *s = config_str(c, (enum config_key)k);

		if (k == CONFIG_WORKERS && !c->value[k])
			snprintf(v, sizeof v, "%lld", (long long)cores());
		else if (k == CONFIG_STATE_DIR && !s)
			snprintf(v, sizeof v, "(the database's folder)");
		else if (k == CONFIG_MAIL_URL && !s)
			snprintf(v, sizeof v, "(maildir in the state folder)");
		else if (k == CONFIG_TICKET_KEY_FILE && !s)
			snprintf(v, sizeof v, "(ticket.key in the state folder)");
		else if (k == CONFIG_BLOB_STORE && !s)
			snprintf(v, sizeof v, "(files on SQLite, db on PostgreSQL)");
		else if ((keys[k].type == K_URL || k == CONFIG_DB) && s)
			text_redact_url(s, v, sizeof v);
		else
			snprintf(v, sizeof v, "%s", s ? s : "(unset)");
		fprintf(out, "%-38s = %-40s # %s\n", keys[k].name, v,
			config_origin(c, (enum config_key)k));
	}
	limits_show(c, out);
}

/*
 * config_send_lease_ms: the lease send_tickets needs: the larger of
 * base_lease_ms and the mail total timeout + CONFIG_LEASE_MARGIN_MS, so that
 * a send that runs to its timeout still ends inside its lease and never
 * overlaps a second delivery of the job.
 */
static int64_t config_send_lease_ms(const struct config *c, int64_t base_lease_ms)
{
	int64_t need = (int64_t)(c->mail_timeout_ms > 0 ? c->mail_timeout_ms : MAIL_TIMEOUT_MS) +
		       CONFIG_LEASE_MARGIN_MS;

	if (base_lease_ms <= 0)
		base_lease_ms = QUEUE_LEASE_MS_DEFAULT;
	return base_lease_ms > need ? base_lease_ms : need;
}

/* The kinds with keys of their own, and their first key (lease_ms; then
 * max_attempts, backoff_base_ms, backoff_cap_ms follow in that order).
 * cancel_order sends an email too: it takes send_tickets' keys and lease. */
static const struct {
	const char *kind;
	enum config_key first;
} kind_keys[] = {
	{ JOB_KIND_RENDER, CONFIG_RENDER_LEASE_MS },
	{ JOB_KIND_SEND, CONFIG_SEND_LEASE_MS },
	{ JOB_KIND_COUNT, CONFIG_COUNT_LEASE_MS },
	{ JOB_KIND_CANCEL, CONFIG_SEND_LEASE_MS },
	{ JOB_KIND_EVENT_NOTICE, CONFIG_SEND_LEASE_MS },
	{ JOB_KIND_REMINDER, CONFIG_SEND_LEASE_MS },
};

/* The payment provider's jobs wait out an outage of days: a payment must
 * become its order or its refund, however long the provider is away (the
 * queue's backoff, capped at an hour, for some 20 days of attempts). */
#define PROVIDER_ATTEMPTS 500
#define PROVIDER_BACKOFF_CAP_MS 3600000

static enum sd_result provider_policies(const struct config *c, const struct kind_policy *common)
{
	static const char *const kinds[] = { JOB_KIND_RECONCILE, JOB_KIND_REFUND,
					     JOB_KIND_REFUND_MAIL, JOB_KIND_EVENT_CANCEL_ORDER };
	struct kind_policy p;
	enum sd_result r;
	size_t i;

	for (i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
		p = *common;
		p.max_attempts = PROVIDER_ATTEMPTS;
		if (p.backoff_cap_ms < PROVIDER_BACKOFF_CAP_MS)
			p.backoff_cap_ms = PROVIDER_BACKOFF_CAP_MS;
		/* the refund's email: a send that runs to its timeout ends inside
		 * its lease, as send_tickets' (its claim's stale limit is that
		 * lease too: tickets_env.claim_stale_ms) */
		if (strcmp(kinds[i], JOB_KIND_REFUND_MAIL) == 0)
			p.lease_ms = config_send_lease_ms(c, p.lease_ms);
		else if (p.lease_ms < config_provider_stale_ms(c))	/* a call ends inside it */
			p.lease_ms = config_provider_stale_ms(c);
		if ((r = queue_policy_set(kinds[i], &p)) != SD_OK)
			return r;
	}
	return SD_OK;
}

enum sd_result config_apply_leases(const struct config *c, int64_t base_lease_ms,
				   int64_t *send_lease_ms)
{
	struct kind_policy common, p;
	enum sd_result r;
	size_t i;

	queue_policy_default(&common);
	common.lease_ms = base_lease_ms > 0 ? base_lease_ms : config_int(c, CONFIG_LEASE_MS);
	common.max_attempts = (int)config_int(c, CONFIG_MAX_ATTEMPTS);
	common.max_deliveries = (int)config_int(c, CONFIG_MAX_DELIVERIES);
	common.backoff_base_ms = config_int(c, CONFIG_BACKOFF_BASE_MS);
	common.backoff_cap_ms = config_int(c, CONFIG_BACKOFF_CAP_MS);
	if (common.backoff_cap_ms < common.backoff_base_ms)
		return err_set(SD_INVALID, "backoff_cap_ms (%s) is below backoff_base_ms (%s)",
			       config_origin(c, CONFIG_BACKOFF_CAP_MS),
			       config_origin(c, CONFIG_BACKOFF_BASE_MS));
	if ((r = queue_policy_set(NULL, &common)) != SD_OK)
		return r;
	for (i = 0; i < sizeof kind_keys / sizeof kind_keys[0]; i++) {
		enum config_key f = kind_keys[i].first;

		p = common;
		if (c->value[f] && base_lease_ms <= 0)
			p.lease_ms = c->num[f];
		if (c->value[f + 1])
			p.max_attempts = (int)c->num[f + 1];
		if (c->value[f + 2])
			p.backoff_base_ms = c->num[f + 2];
		if (c->value[f + 3])
			p.backoff_cap_ms = c->num[f + 3];
		if (p.backoff_cap_ms < p.backoff_base_ms)
			return err_set(SD_INVALID, "%s: the backoff cap is below its base",
				       kind_keys[i].kind);
		if (f == CONFIG_SEND_LEASE_MS) {
			/* a lease that ran out mid-send would hand the job to a
			 * second worker while the first may still deliver */
			p.lease_ms = config_send_lease_ms(c, p.lease_ms);
			if (send_lease_ms)
				*send_lease_ms = p.lease_ms;
		}
		if ((r = queue_policy_set(kind_keys[i].kind, &p)) != SD_OK)
			return r;
	}
	return provider_policies(c, &common);
}

enum sd_result config_provider(const struct config *c, int *stripe_on, struct stripe_config *sc)
{
	const char *p = config_str(c, CONFIG_PAYMENT_PROVIDER);
	int on = strcmp(p, "stripe") == 0;

	if (!on && strcmp(p, "none") != 0)
		return err_set(SD_INVALID, "%s: payment_provider must be none or stripe",
			       config_origin(c, CONFIG_PAYMENT_PROVIDER));
	if (stripe_on)
		*stripe_on = on;
	if (sc) {
		memset(sc, 0, sizeof *sc);
		sc->api_url = config_str(c, CONFIG_STRIPE_API_URL);
		sc->key_file = config_str(c, CONFIG_STRIPE_KEY_FILE);
		sc->ca_file = config_str(c, CONFIG_STRIPE_CA_FILE);
		sc->timeout_ms = (long)config_int(c, CONFIG_STRIPE_TIMEOUT_MS);
	}
	return SD_OK;
}

int64_t config_provider_stale_ms(const struct config *c)
{
	return config_int(c, CONFIG_STRIPE_TIMEOUT_MS) + CONFIG_LEASE_MARGIN_MS;
}

void config_hold_rules(const struct config *c, struct hold_rules *h)
{
	h->ttl_ms = config_int(c, CONFIG_SHOP_HOLD);
	h->renewals = config_int(c, CONFIG_SHOP_HOLD_RENEWALS);
	h->per_client = config_int(c, CONFIG_SHOP_HOLDS_PER_CLIENT);
	h->unpaid_share = config_int(c, CONFIG_SHOP_UNPAID_SHARE);
	h->pending_max_ms = config_int(c, CONFIG_SHOP_PENDING_MAX);
	h->seats_max = config_int(c, CONFIG_SHOP_SEATS_MAX);
}
