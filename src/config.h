/*
 * config.h: the settings a command takes from its flags, the environment and
 * a config file, today the mail transport's.
 *
 * Each key (mail_url, mail_from, mail_user, mail_password_file, mail_ca_file,
 * mail_timeout_ms) can be set three ways; the first that is set wins:
 *   1. a flag:                 --mail-url URL
 *   2. an environment variable: STAGEDOOR_MAIL_URL=URL (empty: unset)
 *   3. a line in the file --config names: mail_url = URL
 * and otherwise the key keeps its default (NULL/0: the module's own).
 *
 * The file is read strictly: "key = value" lines, blank lines and lines whose
 * first non-blank character is '#'; key and value are trimmed.  An unknown
 * key, a key given twice, a line without '=', an empty or malformed value or
 * an unreadable file is an error that names the file, the line and the key.
 *
 * Invariants: no value is ever echoed in a message (a misplaced secret must
 * not reach a terminal or a log), and the SMTP password is never a config
 * value: only the name of the file that holds it (mail_password_file), or
 * $CREDENTIALS_DIRECTORY/mail_password (mail.h).
 */
#ifndef SD_CONFIG_H
#define SD_CONFIG_H

#include <stdint.h>

#include "mail.h"
#include "result.h"

/* The keys, as indexes into struct config's values. */
enum config_key {
	CONFIG_MAIL_URL,
	CONFIG_MAIL_FROM,
	CONFIG_MAIL_USER,
	CONFIG_MAIL_PASSWORD_FILE,
	CONFIG_MAIL_CA_FILE,
	CONFIG_MAIL_TIMEOUT_MS,
	CONFIG_N_KEYS
};

#define CONFIG_LINE_MAX 4096		/* bytes in one line of the file */
#define CONFIG_TIMEOUT_MS_MIN 100L
#define CONFIG_TIMEOUT_MS_MAX 3600000L	/* one hour */
#define CONFIG_LEASE_MARGIN_MS 30000L	/* send_tickets lease beyond the mail timeouts */

/* The settings in force.  Strings are owned (config_free). */
struct config {
	char *value[CONFIG_N_KEYS];		/* NULL: not set anywhere */
	char origin[CONFIG_N_KEYS][64];		/* "--mail-url", "STAGEDOOR_MAIL_URL",
						 * "FILE:LINE" (the file name shortened) */
	long mail_timeout_ms;			/* parsed mail_timeout_ms; 0: not set */
};

/* config_key_name: "mail_url"; config_key_flag: "mail-url" (without "--");
 * config_key_env: "STAGEDOOR_MAIL_URL". */
const char *config_key_name(enum config_key k);
const char *config_key_flag(enum config_key k);
const char *config_key_env(enum config_key k);

/* config_init: every key unset.  config_free: the strings (accepts a
 * zeroed struct); the struct itself is the caller's. */
void config_init(struct config *c);
void config_free(struct config *c);

/*
 * config_set: set key k to value (trimmed here), checked for its key.
 * [in] origin names where the value came from, for the message on error
 * ("--mail-from", "stagedoor.conf:3").  SD_INVALID names origin and key,
 * never the value.
 */
enum sd_result config_set(struct config *c, enum config_key k, const char *value,
			  const char *origin);

/* config_load_file: the keys the file at path sets (see above).  Keys
 * already set are overwritten; call it before config_load_env. */
enum sd_result config_load_file(struct config *c, const char *path);

/* config_load_env: the keys whose STAGEDOOR_* variables are set and not empty. */
enum sd_result config_load_env(struct config *c);

/*
 * config_resolve: the whole precedence in one call: c is initialised, then
 * the file (path may be NULL: none), the environment, and the flags
 * (flags[k] NULL: not given) applied in that order.  On error c is freed.
 */
enum sd_result config_resolve(struct config *c, const char *path,
			      const char *const flags[CONFIG_N_KEYS]);

/* config_mail: the mail_config for mail_open_opts; the strings stay c's. */
void config_mail(const struct config *c, struct mail_config *mc);

/* config_mail_url, config_mail_from: the values, or NULL when unset. */
const char *config_mail_url(const struct config *c);
const char *config_mail_from(const struct config *c);

/*
 * config_send_lease_ms: the lease send_tickets needs: the larger of
 * base_lease_ms and the mail total timeout + the connect timeout +
 * CONFIG_LEASE_MARGIN_MS, so that a send that runs to its timeout still
 * ends inside its lease and never overlaps a second delivery of the job.
 */
int64_t config_send_lease_ms(const struct config *c, int64_t base_lease_ms);

/*
 * config_apply_leases: at worker start: base_lease_ms (0: the queue's
 * default) becomes the lease of every kind without its own policy, and
 * send_tickets gets config_send_lease_ms on the default policy otherwise.
 * [out] *send_lease_ms (may be NULL): the lease set for send_tickets.
 */
enum sd_result config_apply_leases(const struct config *c, int64_t base_lease_ms,
				   int64_t *send_lease_ms);

#endif
