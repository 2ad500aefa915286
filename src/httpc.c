/*
 * httpc.c: one HTTPS request to a provider (httpc.h).
 */
#define _GNU_SOURCE
#include "httpc.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode init_rc = CURLE_FAILED_INIT;

/* One handle per thread, kept between requests: its connections (and their
 * TLS sessions) to a provider are used again, so a checkout does not pay a
 * handshake each time.  Freed when its thread ends. */
static pthread_key_t handle_key;

static void handle_free(void *h)
{
	curl_easy_cleanup(h);
}

static void global_init(void)
{
	init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (init_rc == CURLE_OK && pthread_key_create(&handle_key, handle_free) != 0)
		init_rc = CURLE_FAILED_INIT;
}

/* this thread's handle, its options reset; NULL when out of memory */
static CURL *thread_handle(void)
{
	CURL *h = pthread_getspecific(handle_key);

	if (h) {
		curl_easy_reset(h);
		return h;
	}
	if ((h = curl_easy_init()) && pthread_setspecific(handle_key, h) != 0) {
		curl_easy_cleanup(h);
		h = NULL;
	}
	return h;
}

enum sd_result httpc_init(void)
{
	pthread_once(&once, global_init);
	if (init_rc != CURLE_OK)
		return err_set(SD_IO, "libcurl cannot start: %s", curl_easy_strerror(init_rc));
	return SD_OK;
}

const char *httpc_lib_version(void)
{
	return curl_version_info(CURLVERSION_NOW)->version;
}

static int loopback(const char *host)
{
	struct in_addr a4;

	if (strcasecmp(host, "localhost") == 0 || strcmp(host, "::1") == 0)
		return 1;
	return inet_pton(AF_INET, host, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

enum sd_result httpc_url_check(const char *url, char *where, size_t size)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL, *user = NULL, *frag = NULL;
	enum sd_result r = SD_OK;

	if (!u)
		return err_set(SD_NOMEM, "out of memory");
	if (!url || strlen(url) > 2000 ||
	    curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
		r = err_set(SD_INVALID, "'%.80s' is not a URL like https://api.example.com",
			    url ? url : "");
		goto out;
	}
	curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
	if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
	    curl_url_get(u, CURLUPART_FRAGMENT, &frag, 0) == CURLUE_OK) {
		r = err_set(SD_INVALID, "a provider's URL carries no user, password or fragment");
		goto out;
	}
	if (strcmp(scheme, "https") != 0) {
		char bare[256];

		snprintf(bare, sizeof bare, "%s", host);
		if (bare[0] == '[') {	/* "[::1]" */
			memmove(bare, bare + 1, strlen(bare));
			bare[strcspn(bare, "]")] = '\0';
		}
		if (strcmp(scheme, "http") != 0 || !loopback(bare)) {
			r = err_set(SD_INVALID, "a provider's URL must be https:// (plain http:// "
				    "only to this machine, 127.0.0.1)");
			goto out;
		}
	}
	if (where)
		snprintf(where, size, "%s:%s", host, port ? port : "");
out:
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_free(user);
	curl_free(frag);
	curl_url_cleanup(u);
	return r;
}

/* CURLOPT_WRITEFUNCTION: keep the first HTTPC_BODY_MAX bytes. */
static size_t on_write(char *buf, size_t size, size_t nitems, void *arg)
{
	struct httpc_res *a = arg;
	size_t n = size * nitems, keep = n;
	char *p;

	if (a->len + keep > HTTPC_BODY_MAX)
		keep = HTTPC_BODY_MAX - a->len;
	if (keep == 0)
		return n;
	if (!(p = realloc(a->body, a->len + keep + 1)))
		return 0;	/* libcurl stops with CURLE_WRITE_ERROR */
	memcpy(p + a->len, buf, keep);
	a->body = p;
	a->len += keep;
	a->body[a->len] = '\0';
	return n;
}

/* libcurl's failure on the way as one of our results. */
static enum sd_result no_answer(const struct httpc_req *q, CURLcode rc, const char *detail)
{
	const char *why = detail[0] ? detail : curl_easy_strerror(rc);
	const char *what = q->what ? q->what : "provider";

	switch (rc) {
	case CURLE_PEER_FAILED_VERIFICATION:
		return err_set(SD_IO, "%s: the server's TLS certificate was refused: %s", what,
			       why);
	case CURLE_SSL_CONNECT_ERROR:
		return err_set(SD_IO, "%s: TLS handshake failed: %s", what, why);
	case CURLE_OPERATION_TIMEDOUT:
		return err_set(SD_IO, "%s: timed out (the request may have arrived; a retry "
			       "carries the same key): %s", what, why);
	case CURLE_GOT_NOTHING:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
		return err_set(SD_IO, "%s: the connection ended without an answer (a retry "
			       "carries the same key): %s", what, why);
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		return err_set(SD_IO, "%s: cannot connect: %s", what, why);
	default:
		return err_set(SD_IO, "%s: %s (%s)", what, why, curl_easy_strerror(rc));
	}
}

/* The options every request shares; the first failure wins. */
static CURLcode options(CURL *h, const struct httpc_req *q, struct curl_slist *hdrs,
			char *errbuf, struct httpc_res *res)
{
	CURLcode rc = CURLE_OK;

#define SET(opt, val) \
	do { \
		if (rc == CURLE_OK) \
			rc = curl_easy_setopt(h, opt, val); \
	} while (0)
	SET(CURLOPT_ERRORBUFFER, errbuf);
	SET(CURLOPT_URL, q->url);
	SET(CURLOPT_PROTOCOLS_STR, "http,https");
	SET(CURLOPT_NOSIGNAL, 1L);
	SET(CURLOPT_CONNECTTIMEOUT_MS, q->connect_timeout_ms > 0 ? q->connect_timeout_ms : 5000L);
	SET(CURLOPT_TIMEOUT_MS, q->timeout_ms > 0 ? q->timeout_ms : 30000L);
	SET(CURLOPT_SSLVERSION, (long)CURL_SSLVERSION_TLSv1_2);
	SET(CURLOPT_SSL_VERIFYPEER, 1L);
	SET(CURLOPT_SSL_VERIFYHOST, 2L);
	if (q->ca_file)
		SET(CURLOPT_CAINFO, q->ca_file);
	SET(CURLOPT_FOLLOWLOCATION, 0L);
	SET(CURLOPT_HTTPHEADER, hdrs);
	if (strcmp(q->method, "POST") == 0) {
		SET(CURLOPT_POST, 1L);
		SET(CURLOPT_POSTFIELDS, q->body ? q->body : "");
		SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(q->body ? q->body_len : 0));
	} else if (strcmp(q->method, "GET") != 0) {
		SET(CURLOPT_CUSTOMREQUEST, q->method);
	}
	SET(CURLOPT_WRITEFUNCTION, on_write);
	SET(CURLOPT_WRITEDATA, res);
#undef SET
	return rc;
}

static void answer_headers(CURL *h, struct httpc_res *res)
{
	struct curl_header *hd;
	curl_off_t retry_after = 0;

	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &res->status);
	if (curl_easy_getinfo(h, CURLINFO_RETRY_AFTER, &retry_after) == CURLE_OK &&
	    retry_after > 0)
		res->retry_after_ms = (int64_t)(retry_after > HTTPC_RETRY_AFTER_MAX_S
						? HTTPC_RETRY_AFTER_MAX_S : retry_after) * 1000;
	res->replayed = curl_easy_header(h, "Idempotent-Replayed", 0, CURLH_HEADER, -1, &hd) ==
				CURLHE_OK && strcasecmp(hd->value, "true") == 0;
}

enum sd_result httpc_do(const struct httpc_req *q, struct httpc_res *res)
{
	char errbuf[CURL_ERROR_SIZE];
	struct curl_slist *hdrs = NULL, *h2;
	const char *const *hp;
	enum sd_result r;
	CURLcode rc;
	CURL *h;

	memset(res, 0, sizeof *res);
	if ((r = httpc_init()) != SD_OK || (r = httpc_url_check(q->url, NULL, 0)) != SD_OK)
		return r;
	if (!(h = thread_handle()))
		return err_set(SD_NOMEM, "%s: cannot make a libcurl handle", q->what);
	/* no "Expect: 100-continue": a provider that does not answer it would
	 * cost every request a second */
	if (!(hdrs = curl_slist_append(NULL, "Expect:"))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	for (hp = q->headers; hp && *hp; hp++)
		if (!(h2 = curl_slist_append(hdrs, *hp))) {
			r = err_set(SD_NOMEM, "out of memory");
			goto out;
		}
	errbuf[0] = '\0';
	if ((rc = options(h, q, hdrs, errbuf, res)) != CURLE_OK) {
		r = err_set(SD_IO, "%s: libcurl refused an option: %s", q->what,
			    curl_easy_strerror(rc));
		goto out;
	}
	if ((rc = curl_easy_perform(h)) != CURLE_OK) {
		r = no_answer(q, rc, errbuf);
		goto out;
	}
	answer_headers(h, res);
	r = SD_OK;
out:
	/* the handle stays with the thread; nothing of this request is left in
	 * it that the next one's reset does not clear */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(hdrs);
	if (r != SD_OK)
		httpc_res_free(res);
	return r;
}

void httpc_res_free(struct httpc_res *res)
{
	free(res->body);
	res->body = NULL;
	res->len = 0;
}
