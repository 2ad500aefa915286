/*
 * mail_curl.c: the SMTP transports over TLS, the only file that uses
 * libcurl.
 *
 *   smtp://host[:port]    plain connection upgraded by STARTTLS, which is
 *                         required (CURLUSESSL_ALL): when the server does not
 *                         offer it libcurl stops after EHLO, so neither the
 *                         login nor the message is ever sent in clear
 *   smtps://host[:port]   TLS from the first byte
 *   https://host[:port]/path  a JSON mail API: one POST per attempt with the
 *                         header Idempotency-Key, so the provider turns a
 *                         retry into the first attempt's answer
 *
 * Invariants:
 *  - TLS peer and host verification are always on; nothing here or in
 *    struct mail_config can switch them off.  A private CA is trusted by
 *    naming its file (ca_file), never by trusting everything.
 *  - The password is read once, at open, from a file no group or other may
 *    read, and lives only in this struct until mail_curl_close zeroes it.
 *    It is never logged, never in an error message, and a URL that holds
 *    a user or password is refused without being echoed.
 *  - Only the transport's own protocol is allowed to the handle (smtp and
 *    smtps, or https alone), and redirects are never followed: the URL we
 *    build is the one we use.
 *  - Each send is one easy handle, made and cleaned up inside the call:
 *    mail_curl_send may run on several threads at once.
 *  - The envelope (MAIL FROM, RCPT TO) comes from addresses that
 *    mail_address_valid accepted: no CR, LF, NUL, space or <>.
 *  - Errors name the host:port and libcurl's detail; they map to SD_IO
 *    (may pass: retry) except a permanent rejection of the recipient
 *    (5xx on RCPT), which is SD_INVALID.  Over HTTPS: 2xx is sent, 409 is
 *    SD_BUSY (the key is in flight at the provider), 429, 5xx and no
 *    answer are SD_IO with the provider's Retry-After, other 4xx are
 *    SD_INVALID with the provider's own message.  A 2xx marked
 *    "Idempotent-Replayed: true" is an earlier attempt's send answered
 *    again: res->duplicate.
 */
#define _GNU_SOURCE
#include "mail_curl.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cred.h"
#include "httpc.h"

#define MAIL_CURL_HOST_MAX 255
#define MAIL_CURL_PASSWORD_MAX 1024
#define MAIL_CURL_CRED_NAME "mail_password"
#define MAIL_CURL_PATH_MAX 1024

struct mail_curl {
	int implicit_tls;	/* 1: smtps://, TLS from the first byte */
	int https;		/* 1: https://, the JSON mail API */
	char url[MAIL_CURL_HOST_MAX + MAIL_CURL_PATH_MAX + 32];	/* "smtp://host:port/" or
								 * "https://host:port/path",
								 * as given to libcurl */
	char where[MAIL_CURL_HOST_MAX + 16];	/* "host:port" for messages */
	char *ca_file;		/* a PEM CA file, or NULL: the system's store */
	char *user;		/* the SMTP AUTH user, or NULL: no AUTH */
	char *password;		/* with user; zeroed before it is freed */
	long connect_timeout_ms;
	long timeout_ms;
};

/* ======================== opening ======================================= */

/*
 * Split "smtp://host[:port][/]" into the parts we rebuild the URL from.
 * Refuses userinfo, paths, queries and fragments: the URL names a server,
 * and a password in it would end up in configs and process lists.
 */
static enum sd_result mail_curl_parse(struct mail_curl *c, const char *url)
{
	const char *p, *host, *host_end, *port = NULL, *path = "/";
	size_t scheme_len;
	long port_no;

	if (strncmp(url, "https://", 8) == 0) {
		c->https = 1;
		scheme_len = 8;
		port_no = 443;
	} else if (strncmp(url, "smtps://", 8) == 0) {
		c->implicit_tls = 1;
		scheme_len = 8;
		port_no = 465;
	} else if (strncmp(url, "smtp://", 7) == 0) {
		scheme_len = 7;
		port_no = 587;
	} else {
		return err_set(SD_INVALID, "mail URL must start with smtp://, smtps:// or https://");
	}
	host = url + scheme_len;
	/* never echo the URL from here on: it may hold a password */
	if (strchr(host, '@'))
		return err_set(SD_INVALID, "mail URL may not hold a user or password: set "
			       "mail_user and mail_password_file instead");
	if (*host == '[') {
		host_end = strchr(host, ']');
		if (!host_end)
			return err_set(SD_INVALID, "mail URL has an unclosed '[' in its host");
		for (p = host + 1; p < host_end; p++)
			if (!strchr("0123456789abcdefABCDEF:.", *p))
				return err_set(SD_INVALID, "mail URL's bracketed host is not an "
					       "IPv6 address");
		host_end++;
	} else {
		host_end = host + strspn(host, "abcdefghijklmnopqrstuvwxyz"
					      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-");
	}
	if (host_end == host)
		return err_set(SD_INVALID, "mail URL has no host (expected smtp://host:port)");
	if ((size_t)(host_end - host) > MAIL_CURL_HOST_MAX)
		return err_set(SD_INVALID, "mail URL's host is longer than %d characters",
			       MAIL_CURL_HOST_MAX);
	p = host_end;
	if (*p == ':') {
		char *end;

		port = p + 1;
		errno = 0;
		port_no = strtol(port, &end, 10);
		if (end == port || errno || port_no < 1 || port_no > 65535 || *port == '+' ||
		    *port == '-')
			return err_set(SD_INVALID, "mail URL's port is not a number from 1 to 65535");
		p = end;
	}
	if (c->https && *p == '/') {
		/* the API's path: printable ASCII, no query or fragment, which
		 * the URL would otherwise carry into logs unchecked */
		path = p;
		for (; *p; p++)
			if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f ||
			    *p == '?' || *p == '#' || *p == '\\')
				return err_set(SD_INVALID, "mail API URL's path may hold only "
					       "printable ASCII, without ?, # or \\");
		if ((size_t)(p - path) > MAIL_CURL_PATH_MAX)
			return err_set(SD_INVALID, "mail API URL's path is longer than %d "
				       "characters", MAIL_CURL_PATH_MAX);
	}
	if (*p == '/')
		p++;
	if (*p)
		return err_set(SD_INVALID, "mail URL may hold only scheme://host:port (no path, "
			       "query or fragment)");
	snprintf(c->where, sizeof c->where, "%.*s:%ld", (int)(host_end - host), host, port_no);
	if (c->https)
		snprintf(c->url, sizeof c->url, "https://%s%s", c->where, path);
	else
		snprintf(c->url, sizeof c->url, "%s://%s/", c->implicit_tls ? "smtps" : "smtp",
			 c->where);
	return SD_OK;
}

enum sd_result mail_curl_open(const char *url, const struct mail_config *cfg,
			      struct mail_curl **out)
{
	static const struct mail_config defaults = { 0 };
	struct mail_curl *c;
	char cred[4096];
	const char *pw_path = NULL;
	enum sd_result r;

	*out = NULL;
	if (!cfg)
		cfg = &defaults;
	if ((r = httpc_init()) != SD_OK)	/* curl_global_init, once per process */
		return r;
	if (!(c = calloc(1, sizeof *c)))
		return err_set(SD_NOMEM, "out of memory opening the SMTP mailer");
	if ((r = mail_curl_parse(c, url)) != SD_OK)
		goto out;
	if (cfg->connect_timeout_ms < 0 || cfg->timeout_ms < 0) {
		r = err_set(SD_INVALID, "mail timeouts may not be negative");
		goto out;
	}
	c->connect_timeout_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms
							: MAIL_CONNECT_TIMEOUT_MS;
	c->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : MAIL_TIMEOUT_MS;
	if (cfg->ca_file && *cfg->ca_file) {
		/* a typo here would only show at the first send: say it now */
		if (access(cfg->ca_file, R_OK) != 0) {
			r = err_set(SD_INVALID, "mail CA file %s: %s", cfg->ca_file,
				    strerror(errno));
			goto out;
		}
		if (!(c->ca_file = strdup(cfg->ca_file))) {
			r = err_set(SD_NOMEM, "out of memory opening the SMTP mailer");
			goto out;
		}
	}
	if (c->https && ((cfg->user && *cfg->user) ||
			 (cfg->password_file && *cfg->password_file))) {
		/* better refused than silently sent without credentials */
		r = err_set(SD_INVALID, "mail_user and mail_password_file are for SMTP AUTH; "
			    "the https:// mail API transport does not use them");
		goto out;
	}
	if (cfg->user && *cfg->user) {
		const char *dir = getenv("CREDENTIALS_DIRECTORY");

		if (strpbrk(cfg->user, "\r\n")) {
			r = err_set(SD_INVALID, "mail user holds a line break");
			goto out;
		}
		if (cfg->password_file && *cfg->password_file) {
			pw_path = cfg->password_file;
		} else if (dir && *dir) {
			snprintf(cred, sizeof cred, "%s/" MAIL_CURL_CRED_NAME, dir);
			pw_path = cred;
		} else {
			r = err_set(SD_INVALID, "mail user is set but there is no password: set "
				    "mail_password_file or $CREDENTIALS_DIRECTORY/"
				    MAIL_CURL_CRED_NAME);
			goto out;
		}
		if (!(c->user = strdup(cfg->user))) {
			r = err_set(SD_NOMEM, "out of memory opening the SMTP mailer");
			goto out;
		}
		if ((r = cred_read(pw_path, "mail password file", MAIL_CURL_PASSWORD_MAX, 1,
				   &c->password)) != SD_OK)
			goto out;
	} else if (cfg->password_file && *cfg->password_file) {
		r = err_set(SD_INVALID, "mail password file is set but mail user is not");
		goto out;
	}
	*out = c;
	c = NULL;
	r = SD_OK;
out:
	mail_curl_close(c);
	return r;
}

void mail_curl_close(struct mail_curl *c)
{
	if (!c)
		return;
	if (c->password) {
		explicit_bzero(c->password, strlen(c->password));
		free(c->password);
	}
	free(c->user);
	free(c->ca_file);
	free(c);
}

/* ======================== sending ======================================= */

struct mail_curl_upload {
	const char *p;	/* the next byte to hand to libcurl */
	size_t left;	/* bytes not yet handed over */
};

/* CURLOPT_READFUNCTION: the message, in pieces; 0 at the end. */
static size_t mail_curl_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct mail_curl_upload *u = arg;
	size_t n = size * nitems;

	if (n > u->left)
		n = u->left;
	memcpy(buf, u->p, n);
	u->p += n;
	u->left -= n;
	return n;
}

/* libcurl's code and its detail as one of our results, the message once. */
/*
 * The settings every send shares, SMTP or HTTPS: the URL and the protocols
 * it may use, no signals (threads), the timeouts, TLS 1.2 at least, and peer
 * and host verification on, said here so that nobody needs to know
 * libcurl's defaults.  Each setopt can fail only on a bad option or out of
 * memory: they are checked together, the first failure wins.
 */
static CURLcode mail_curl_common(CURL *h, const struct mail_curl *c, char *errbuf,
				 const char *protocols)
{
	CURLcode rc = CURLE_OK;

#define SET(opt, val) \
	do { \
		if (rc == CURLE_OK) \
			rc = curl_easy_setopt(h, opt, val); \
	} while (0)
	SET(CURLOPT_ERRORBUFFER, errbuf);
	SET(CURLOPT_URL, c->url);
	SET(CURLOPT_PROTOCOLS_STR, protocols);
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, c->connect_timeout_ms);
	SET(CURLOPT_TIMEOUT_MS, c->timeout_ms);
	SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	SET(CURLOPT_SSL_VERIFYPEER, 1L);
	SET(CURLOPT_SSL_VERIFYHOST, 2L);
	if (c->ca_file)
		SET(CURLOPT_CAINFO, c->ca_file);
#undef SET
	return rc;
}

static enum sd_result mail_curl_error(struct mail_curl *c, CURL *h, CURLcode rc,
				      const char *detail)
{
	const char *why = detail[0] ? detail : curl_easy_strerror(rc);
	long code = 0;

	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	switch (rc) {
	case CURLE_USE_SSL_FAILED:
		return err_set(SD_IO, "smtp %s does not offer STARTTLS: nothing was sent "
			       "(TLS is required) (%s)", c->where, why);
	case CURLE_PEER_FAILED_VERIFICATION:
		return err_set(SD_IO, "smtp %s: the server's TLS certificate was refused: %s",
			       c->where, why);
	case CURLE_SSL_CONNECT_ERROR:
		return err_set(SD_IO, "smtp %s: TLS handshake failed: %s", c->where, why);
	case CURLE_OPERATION_TIMEDOUT:
		return err_set(SD_IO, "smtp %s: timed out: %s", c->where, why);
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		return err_set(SD_IO, "smtp %s: cannot connect: %s", c->where, why);
	case CURLE_LOGIN_DENIED:
		return err_set(SD_IO, "smtp %s: login refused for the configured user: %s",
			       c->where, why);
	default:
		break;
	}
	/* libcurl 7.88 reports a refused recipient as "RCPT failed: <code>" */
	if (code >= 500 && code < 600 && strncmp(detail, "RCPT failed", 11) == 0)
		return err_set(SD_INVALID, "smtp %s refused the recipient for good: %s",
			       c->where, why);
	return err_set(SD_IO, "smtp %s: %s (%s)", c->where, why, curl_easy_strerror(rc));
}

enum sd_result mail_curl_send(struct mail_curl *c, const char *from, const char *to,
			      const char *text, size_t len)
{
	char errbuf[CURL_ERROR_SIZE], env_from[300], env_to[300];
	struct mail_curl_upload up = { text, len };
	struct curl_slist *rcpt = NULL;
	enum sd_result r = SD_OK;
	CURLcode rc = CURLE_OK;
	CURL *h;

	snprintf(env_from, sizeof env_from, "<%s>", from);
	snprintf(env_to, sizeof env_to, "<%s>", to);
	if (!(h = curl_easy_init()))
		return err_set(SD_NOMEM, "smtp %s: cannot make a libcurl handle", c->where);
	if (!(rcpt = curl_slist_append(NULL, env_to))) {
		r = err_set(SD_NOMEM, "out of memory sending mail");
		goto out;
	}
	errbuf[0] = '\0';
	rc = mail_curl_common(h, c, errbuf, "smtp,smtps");
#define SET(opt, val) \
	do { \
		if (rc == CURLE_OK) \
			rc = curl_easy_setopt(h, opt, val); \
	} while (0)
	/* STARTTLS or nothing */
	if (!c->implicit_tls)
		SET(CURLOPT_USE_SSL, (long)CURLUSESSL_ALL);
	if (c->user) {
		SET(CURLOPT_USERNAME, c->user);
		SET(CURLOPT_PASSWORD, c->password);
	}
	SET(CURLOPT_MAIL_FROM, env_from);
	SET(CURLOPT_MAIL_RCPT, rcpt);
	/* the message is already CRLF; libcurl dot-stuffs the upload */
	SET(CURLOPT_UPLOAD, 1L);
	SET(CURLOPT_READFUNCTION, mail_curl_read);
	SET(CURLOPT_READDATA, &up);
	SET(CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
#undef SET
	if (rc != CURLE_OK) {
		r = err_set(SD_IO, "smtp %s: libcurl refused an option: %s", c->where,
			    curl_easy_strerror(rc));
		goto out;
	}
	rc = curl_easy_perform(h);
	if (rc != CURLE_OK)
		r = mail_curl_error(c, h, rc, errbuf);
out:
	/* the handle holds a copy of the password */
	curl_easy_cleanup(h);
	curl_slist_free_all(rcpt);
	return r;
}


/* ======================== the HTTPS mail API ============================ */

/* The answer's string field `field`, or NULL. */
static const char *mail_curl_answer_str(json_t *doc, const char *field)
{
	json_t *v = doc ? json_object_get(doc, field) : NULL;

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A provider's text for a message: printable ASCII kept, the rest '?'. */
static void mail_curl_clean(char *dst, size_t size, const char *src)
{
	size_t i;

	for (i = 0; src && src[i] && i + 1 < size; i++)
		dst[i] = ((unsigned char)src[i] >= 0x20 && (unsigned char)src[i] < 0x7f)
			? src[i] : '?';
	dst[i] = '\0';
}

/* The answer's status and body as one of our results and res. */
static enum sd_result mail_curl_api_answer(struct mail_curl *c, const struct httpc_res *a,
					   const char *key, struct mail_result *res)
{
	json_t *doc = a->body ? json_loads(a->body, 0, NULL) : NULL;
	const char *why = mail_curl_answer_str(doc, "error");
	const char *id = mail_curl_answer_str(doc, "id");
	long status = a->status;
	char said[240];
	enum sd_result r;

	if (!why)
		why = mail_curl_answer_str(doc, "message");
	mail_curl_clean(said, sizeof said, why ? why : (a->body && a->len < 200 ? a->body : ""));
	res->retry_after_ms = a->retry_after_ms;
	if (status >= 200 && status < 300) {
		/* sent; an answer without an id still means sent: keep the key */
		if (id && *id && strlen(id) <= MAIL_ID_MAX)
			mail_curl_clean(res->message_id, sizeof res->message_id, id);
		else
			snprintf(res->message_id, sizeof res->message_id, "%s", key);
		res->duplicate = a->replayed;
		r = SD_OK;
	} else if (status == 409) {
		res->retry_later = 1;
		r = err_set(SD_BUSY, "mail API %s: another request with key %s is in flight "
			    "(409): retry later", c->where, key);
	} else if (status == 429 || status >= 500) {
		r = err_set(SD_IO, "mail API %s answered %ld%s%s%s", c->where, status,
			    said[0] ? ": " : "", said,
			    status == 429 ? " (rate limited)" : "");
	} else if (status >= 400) {
		r = err_set(SD_INVALID, "mail API %s refused the message (%ld): %s", c->where,
			    status, said[0] ? said : "no reason given");
	} else {
		r = err_set(SD_IO, "mail API %s answered %ld, not a success or an error",
			    c->where, status);
	}
	json_decref(doc);
	return r;
}

int mail_curl_is_api(const struct mail_curl *c)
{
	return c && c->https;
}

enum sd_result mail_curl_post(struct mail_curl *c, const char *key, const char *body,
			      size_t len, struct mail_result *res)
{
	char keyhdr[MAIL_ID_MAX + 32], what[MAIL_CURL_HOST_MAX + 32];
	const char *hdrs[] = { "Content-Type: application/json", "Accept: application/json",
			       keyhdr, NULL };
	struct httpc_req q = { "POST", c->url, hdrs, body, len, c->ca_file,
			       c->connect_timeout_ms, c->timeout_ms, what };
	struct httpc_res a;
	enum sd_result r;

	snprintf(keyhdr, sizeof keyhdr, "Idempotency-Key: %s", key);
	snprintf(what, sizeof what, "mail API %s", c->where);
	if ((r = httpc_do(&q, &a)) != SD_OK)
		return r;
	r = mail_curl_api_answer(c, &a, key, res);
	httpc_res_free(&a);
	return r;
}

const char *mail_curl_lib_version(void)
{
	return httpc_lib_version();
}
