/*
 * config.c: flags over environment over config file over defaults, for the
 * mail keys (see config.h for the rules and the invariants).
 *
 * Parsing never echoes a value: an error names the place (file:line or the
 * flag or variable) and the key only.
 */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queue.h"

/* ======================== the keys ======================================= */

static const struct {
	const char *name;	/* in the file */
	const char *flag;	/* without "--" */
	const char *env;
} keys[CONFIG_N_KEYS] = {
	[CONFIG_MAIL_URL] = { "mail_url", "mail-url", "STAGEDOOR_MAIL_URL" },
	[CONFIG_MAIL_FROM] = { "mail_from", "mail-from", "STAGEDOOR_MAIL_FROM" },
	[CONFIG_MAIL_USER] = { "mail_user", "mail-user", "STAGEDOOR_MAIL_USER" },
	[CONFIG_MAIL_PASSWORD_FILE] = { "mail_password_file", "mail-password-file",
					"STAGEDOOR_MAIL_PASSWORD_FILE" },
	[CONFIG_MAIL_CA_FILE] = { "mail_ca_file", "mail-ca-file", "STAGEDOOR_MAIL_CA_FILE" },
	[CONFIG_MAIL_TIMEOUT_MS] = { "mail_timeout_ms", "mail-timeout-ms",
				     "STAGEDOOR_MAIL_TIMEOUT_MS" },
};

const char *config_key_name(enum config_key k)
{
	return keys[k].name;
}

const char *config_key_flag(enum config_key k)
{
	return keys[k].flag;
}

const char *config_key_env(enum config_key k)
{
	return keys[k].env;
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
	for (k = 0; k < CONFIG_N_KEYS; k++) {
		free(c->value[k]);
		c->value[k] = NULL;
		c->origin[k][0] = '\0';
	}
	c->mail_timeout_ms = 0;
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

static int has_control(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 1;
	return 0;
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
	if (has_control(v, len) || memchr(v, '\0', len))
		return err_set(SD_INVALID, "%s: %s: the value holds a control character", origin,
			       keys[k].name);
	if (!(copy = strndup(v, len)))
		return err_set(SD_NOMEM, "out of memory");
	if (k == CONFIG_MAIL_TIMEOUT_MS) {
		char *end;
		long ms;

		errno = 0;
		ms = strtol(copy, &end, 10);
		if (errno || *end || end == copy || copy[0] == '+' || copy[0] == '-' ||
		    ms < CONFIG_TIMEOUT_MS_MIN || ms > CONFIG_TIMEOUT_MS_MAX) {
			free(copy);
			return err_set(SD_INVALID, "%s: %s must be a whole number of milliseconds "
				       "from %ld to %ld", origin, keys[k].name,
				       CONFIG_TIMEOUT_MS_MIN, CONFIG_TIMEOUT_MS_MAX);
		}
		c->mail_timeout_ms = ms;
	} else if (k == CONFIG_MAIL_FROM && mail_address_valid(copy) != SD_OK) {
		free(copy);
		return err_set(SD_INVALID, "%s: %s is not a plain address local@domain", origin,
			       keys[k].name);
	} else if (k == CONFIG_MAIL_URL && strchr(copy, ' ')) {
		free(copy);
		return err_set(SD_INVALID, "%s: %s holds a space", origin, keys[k].name);
	}
	free(c->value[k]);
	c->value[k] = copy;
	snprintf(c->origin[k], sizeof c->origin[k], "%s", origin);
	return SD_OK;
}

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

/* parse_line: one line of the file (without its LF).  [in,out] seen[k]:
 * the line that set key k, for the duplicate check. */
static enum sd_result parse_line(struct config *c, const char *path, int lineno,
				 const char *line, size_t n, int seen[CONFIG_N_KEYS])
{
	const char *eq, *key;
	char origin[64];
	size_t klen;
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
		return err_set(SD_INVALID, "%s:%d: unknown key '%.*s' (known: mail_url, "
			       "mail_from, mail_user, mail_password_file, mail_ca_file, "
			       "mail_timeout_ms)", path, lineno, (int)klen, key);
	}
	if (seen[k])
		return err_set(SD_INVALID, "%s:%d: %s is set twice (first on line %d)", path,
			       lineno, keys[k].name, seen[k]);
	seen[k] = lineno;
	snprintf(origin, sizeof origin, "%.40s:%d", path, lineno);
	if (strlen(path) > 40)
		snprintf(origin, sizeof origin, "%.40s:%d", base_name(path), lineno);
	return set_n(c, (enum config_key)k, eq + 1, n - (size_t)(eq + 1 - line), origin);
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

enum sd_result config_load_env(struct config *c)
{
	enum sd_result r;
	int k;

	for (k = 0; k < CONFIG_N_KEYS; k++) {
		const char *v = getenv(keys[k].env);

		if (v && *v && (r = config_set(c, (enum config_key)k, v, keys[k].env)) != SD_OK)
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
	if (path && (r = config_load_file(c, path)) != SD_OK)
		goto out;
	if ((r = config_load_env(c)) != SD_OK)
		goto out;
	for (k = 0; flags && k < CONFIG_N_KEYS; k++) {
		if (!flags[k])
			continue;
		snprintf(origin, sizeof origin, "--%s", keys[k].flag);
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

int64_t config_send_lease_ms(const struct config *c, int64_t base_lease_ms)
{
	int64_t need = (int64_t)(c->mail_timeout_ms > 0 ? c->mail_timeout_ms : MAIL_TIMEOUT_MS) +
		       MAIL_CONNECT_TIMEOUT_MS + CONFIG_LEASE_MARGIN_MS;

	if (base_lease_ms <= 0)
		base_lease_ms = QUEUE_LEASE_MS_DEFAULT;
	return base_lease_ms > need ? base_lease_ms : need;
}

enum sd_result config_apply_leases(const struct config *c, int64_t base_lease_ms,
				   int64_t *send_lease_ms)
{
	struct kind_policy p;
	enum sd_result r;

	if (base_lease_ms > 0) {
		/* the CLI sets no other policy: the built-in one with this lease */
		queue_policy_default(&p);
		p.lease_ms = base_lease_ms;
		if ((r = queue_policy_set(NULL, &p)) != SD_OK)
			return r;
	}
	p = *queue_policy("send_tickets");
	p.lease_ms = config_send_lease_ms(c, p.lease_ms);
	if ((r = queue_policy_set("send_tickets", &p)) != SD_OK)
		return r;
	if (send_lease_ms)
		*send_lease_ms = p.lease_ms;
	return SD_OK;
}
