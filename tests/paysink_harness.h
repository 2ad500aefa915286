/*
 * paysink_harness.h: what the tests of tools/paysink share (test_paysink.c,
 * test_paysink_money.c): each test's provider (build/paysink, or
 * $PAYSINK_BIN, on a free loopback port, stopped with SIGTERM), a webhook
 * receiver that checks every Stripe-Signature with its own HMAC-SHA256 and
 * keeps what came, one HTTP request by libcurl, and reading JSON by dotted
 * paths.  Included once by each test program (the Makefile builds every
 * tests/test_*.c on its own), so its functions are static; PH_FN marks
 * them, some unused by one program or the other.
 */
#ifndef PAYSINK_HARNESS_H
#define PAYSINK_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <mbedtls/base64.h>
#include <mbedtls/md.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define PH_FN static __attribute__((unused))

extern char **environ;

#define KEY "sk_test_paysinkCtest42"
#define SECRET "whsec_paysinkCtestSecret"
#define SECRET2 "whsec_paysinkRotatedSecret"
#define NODE_MODULES "tests/browser/node_modules/stripe"
#define NODE_SCRIPT "tests/browser/paysink_stripe.mjs"
#define HITS_MAX 64
#define HOOK_HANG_MS 600	/* a scripted 0: hold the request this long, answer nothing */

/* a session's form body: 2 x 25.00 EUR, and what else is given */
#define SESSION_FORM "mode=payment&line_items[0][price_data][currency]=EUR" \
	"&line_items[0][price_data][unit_amount]=2500" \
	"&line_items[0][price_data][product_data][name]=Concert%2C+stalls" \
	"&line_items[0][quantity]=2&success_url=https%3A%2F%2Fshop.example%2Fok%3Fs%3D" \
	"%7BCHECKOUT_SESSION_ID%7D&cancel_url=https%3A%2F%2Fshop.example%2Fno" \
	"&client_reference_id=order-1&customer_email=ada%40example.org&metadata[hold]=H1" \
	"&payment_intent_data[metadata][order]=order-1"

/* ---- the webhook receiver ------------------------------------------------- */

struct hit {
	char id[64];			/* the event's id */
	char type[64];
	char object_id[128];		/* data.object.id */
	char payment_status[16];	/* data.object.payment_status, if any */
	int sig_ok;			/* t within 300 s, a v1 matching SECRET */
	int sig_ok2;			/* a v1 matching SECRET2 */
	int n_v1;
	int status;			/* what the receiver answered */
	char ua[80];
	char body[8192];		/* the event as sent (cut at this size) */
};

struct hook {
	int fd, port;
	pthread_t th;
	int started;
	atomic_int stop;
	pthread_mutex_t mu;
	int script[8];			/* the first answers' statuses (0: none); then 200 */
	int n_script;
	int n;
	struct hit hits[HITS_MAX];
};

/* one test's provider */
struct ps {
	struct tu_env *env;
	char record[350], port_file[350], log[350], certs[350], ca[400];
	pid_t pid;
	int port;
	int tls;
	struct hook hook;
};

PH_FN const char *ps_bin(void)
{
	const char *b = getenv("PAYSINK_BIN");

	return b && *b ? b : "build/paysink";
}

/* hex HMAC-SHA256 keyed with secret over "t.body", into hex[65] */
PH_FN void hmac_hex(const char *secret, long long t, const char *body, size_t len, char hex[65])
{
	char head[32];
	size_t hl = (size_t)snprintf(head, sizeof head, "%lld.", t);
	unsigned char *msg = malloc(hl + len), mac[32];
	int i;

	assert_non_null(msg);
	memcpy(msg, head, hl);
	memcpy(msg + hl, body, len);
	assert_int_equal(mbedtls_md_hmac(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256),
					 (const unsigned char *)secret, strlen(secret), msg, hl + len,
					 mac), 0);
	free(msg);
	for (i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}

/* the receiver's own check of a Stripe-Signature header */
PH_FN void hit_verify(struct hit *h, const char *sig, const char *body, size_t len)
{
	char buf[600], *save = NULL, *part, want1[65], want2[65];
	long long t = -1;

	snprintf(buf, sizeof buf, "%s", sig);
	for (part = strtok_r(buf, ",", &save); part; part = strtok_r(NULL, ",", &save))
		if (strncmp(part, "t=", 2) == 0)
			t = atoll(part + 2);
	if (t < 0 || llabs((long long)time(NULL) - t) > 300)
		return;
	hmac_hex(SECRET, t, body, len, want1);
	hmac_hex(SECRET2, t, body, len, want2);
	snprintf(buf, sizeof buf, "%s", sig);
	for (part = strtok_r(buf, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
		if (strncmp(part, "v1=", 3) != 0)
			continue;
		h->n_v1++;
		h->sig_ok |= strcmp(part + 3, want1) == 0;
		h->sig_ok2 |= strcmp(part + 3, want2) == 0;
	}
}

/* a JSON string's value, or "" */
PH_FN const char *jstr0(json_t *v)
{
	return json_is_string(v) ? json_string_value(v) : "";
}

/* what an event body says, into h */
PH_FN void hit_read(struct hit *h, const char *body, size_t len)
{
	json_t *doc = json_loadb(body, len, 0, NULL), *obj;

	obj = json_object_get(json_object_get(doc, "data"), "object");
	snprintf(h->id, sizeof h->id, "%s", jstr0(json_object_get(doc, "id")));
	snprintf(h->type, sizeof h->type, "%s", jstr0(json_object_get(doc, "type")));
	snprintf(h->object_id, sizeof h->object_id, "%s", jstr0(json_object_get(obj, "id")));
	snprintf(h->payment_status, sizeof h->payment_status, "%s",
		 jstr0(json_object_get(obj, "payment_status")));
	snprintf(h->body, sizeof h->body, "%.*s", (int)len, body);
	json_decref(doc);
}

/* a header's value in head (NUL-terminated, lines "Name: value\r\n") */
PH_FN void head_value(const char *head, const char *name, char *out, size_t size)
{
	const char *p = head;
	size_t n = strlen(name);

	out[0] = '\0';
	while ((p = strstr(p, "\r\n"))) {
		p += 2;
		if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
			const char *v = p + n + 1, *end = strstr(v, "\r\n");

			while (*v == ' ')
				v++;
			snprintf(out, size, "%.*s", (int)(end ? end - v : (long)strlen(v)), v);
			return;
		}
	}
}

/* take one request on fd and answer it */
PH_FN void hook_serve(struct hook *k, int fd)
{
	char head[8192], sig[600], clen[32], *body;
	size_t have = 0, hlen, blen, got;
	struct hit h;
	char *end = NULL;
	int status;

	memset(&h, 0, sizeof h);
	while (have < sizeof head - 1 && !end) {
		ssize_t n = recv(fd, head + have, sizeof head - 1 - have, 0);

		if (n <= 0)
			return;
		have += (size_t)n;
		head[have] = '\0';
		end = strstr(head, "\r\n\r\n");
	}
	if (!end)
		return;
	hlen = (size_t)(end - head) + 4;
	end[2] = '\0';
	head_value(head, "Content-Length", clen, sizeof clen);
	head_value(head, "Stripe-Signature", sig, sizeof sig);
	head_value(head, "User-Agent", h.ua, sizeof h.ua);
	blen = (size_t)atol(clen);
	body = malloc(blen + 1);
	if (!body)
		return;
	got = have - hlen < blen ? have - hlen : blen;
	memcpy(body, head + hlen, got);
	while (got < blen) {
		ssize_t n = recv(fd, body + got, blen - got, 0);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	body[got] = '\0';
	hit_verify(&h, sig, body, got);
	hit_read(&h, body, got);
	free(body);
	pthread_mutex_lock(&k->mu);
	status = k->n < k->n_script ? k->script[k->n] : 200;
	h.status = status;
	if (k->n < HITS_MAX)
		k->hits[k->n] = h;
	k->n++;
	pthread_mutex_unlock(&k->mu);
	if (status == 0) {
		tu_sleep_ms(HOOK_HANG_MS);	/* no answer at all: the sender times out */
		return;
	}
	snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
		 status);
	if (send(fd, head, strlen(head), MSG_NOSIGNAL) < 0)
		return;
}

PH_FN void *hook_run(void *arg)
{
	struct hook *k = arg;

	while (!k->stop) {
		struct pollfd pfd = { k->fd, POLLIN, 0 };
		struct timeval tv = { 5, 0 };
		int fd;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		fd = accept4(k->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		hook_serve(k, fd);
		close(fd);
	}
	return NULL;
}

/* start the receiver on 127.0.0.1, answering the statuses in script first */
PH_FN void hook_start(struct hook *k, const int *script, int n_script)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof sin;
	int one = 1, i;

	pthread_mutex_init(&k->mu, NULL);
	for (i = 0; i < n_script && i < 8; i++)
		k->script[i] = script[i];
	k->n_script = i;
	k->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(k->fd >= 0);
	setsockopt(k->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(k->fd, (struct sockaddr *)&sin, sizeof sin), 0);
	assert_int_equal(listen(k->fd, 16), 0);
	assert_int_equal(getsockname(k->fd, (struct sockaddr *)&sin, &sl), 0);
	k->port = ntohs(sin.sin_port);
	assert_int_equal(pthread_create(&k->th, NULL, hook_run, k), 0);
	k->started = 1;
}

PH_FN void hook_stop(struct hook *k)
{
	if (!k->started)
		return;
	k->stop = 1;
	pthread_join(k->th, NULL);
	close(k->fd);
	pthread_mutex_destroy(&k->mu);
	k->started = 0;
}

PH_FN int hook_count(struct hook *k)
{
	int n;

	pthread_mutex_lock(&k->mu);
	n = k->n;
	pthread_mutex_unlock(&k->mu);
	return n;
}

/* wait until the receiver has taken n requests; fail after timeout_ms */
PH_FN void hook_wait(struct hook *k, int n, int timeout_ms)
{
	int waited;

	for (waited = 0; hook_count(k) < n && waited < timeout_ms; waited += 20)
		tu_sleep_ms(20);
	if (hook_count(k) < n)
		fail_msg("the receiver took %d requests in %d ms, not %d", hook_count(k), timeout_ms,
			 n);
}

/* ---- the provider ------------------------------------------------------------ */

PH_FN int ps_setup(void **state)
{
	struct ps *s = calloc(1, sizeof *s);

	assert_non_null(s);
	tu_setup_real_nodb((void **)&s->env);
	snprintf(s->record, sizeof s->record, "%s/record.json", s->env->dir);
	snprintf(s->port_file, sizeof s->port_file, "%s/port", s->env->dir);
	snprintf(s->log, sizeof s->log, "%s/paysink.log", s->env->dir);
	snprintf(s->certs, sizeof s->certs, "%s/certs", s->env->dir);
	snprintf(s->ca, sizeof s->ca, "%s/ca.pem", s->certs);
	*state = s;
	return 0;
}

PH_FN int ps_teardown(void **state)
{
	struct ps *s = *state;

	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		tu_wait(s->pid, 5000);
	}
	hook_stop(&s->hook);
	tu_teardown((void **)&s->env);
	free(s);
	return 0;
}

/* SIGTERM, and paysink must exit 0 within 5 s */
PH_FN void ps_stop(struct ps *s)
{
	int rc;

	if (s->pid <= 0)
		return;
	kill(s->pid, SIGTERM);
	rc = tu_wait(s->pid, 5000);
	if (rc == -2) {
		kill(s->pid, SIGKILL);
		tu_wait(s->pid, 5000);
	}
	s->pid = 0;
	if (rc != 0)
		fail_msg("paysink did not stop cleanly on SIGTERM (%d)", rc);
}

/*
 * ps_run: start paysink on listen with the usual options and extra ones
 * (NULL-terminated); with_hook points --webhook-url at s->hook (started
 * before).  Returns the exit status when it ends by itself within 5 s (as
 * when it refuses its arguments), else 0 once its port file is there.
 */
PH_FN int ps_run(struct ps *s, const char *listen, int with_hook, const char *const *extra)
{
	const char *args[48];
	char url[100];
	posix_spawn_file_actions_t fa;
	int n = 0, i, waited;

	unlink(s->port_file);
	args[n++] = ps_bin();
	args[n++] = "--listen";
	args[n++] = listen;
	args[n++] = "--api-key";
	args[n++] = KEY;
	args[n++] = "--record";
	args[n++] = s->record;
	args[n++] = "--port-file";
	args[n++] = s->port_file;
	if (with_hook) {
		snprintf(url, sizeof url, "http://127.0.0.1:%d/stripe/webhook", s->hook.port);
		args[n++] = "--webhook-url";
		args[n++] = url;
		args[n++] = "--webhook-secret";
		args[n++] = SECRET;
	}
	for (i = 0; extra && extra[i] && n < 47; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, s->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (posix_spawn(&s->pid, args[0], &fa, NULL, (char *const *)args, environ) != 0)
		fail_msg("cannot run %s (make build/paysink)", args[0]);
	posix_spawn_file_actions_destroy(&fa);
	for (waited = 0; waited < 5000; waited += 10) {
		FILE *f = fopen(s->port_file, "r");
		int rc;

		if (f) {
			int ok = fscanf(f, "%d", &s->port) == 1;

			fclose(f);
			if (ok && s->port > 0)
				return 0;
		}
		rc = tu_wait(s->pid, 0);
		if (rc != -2) {
			s->pid = 0;
			return rc;
		}
		tu_sleep_ms(10);
	}
	fail_msg("paysink wrote no port file within 5 s");
	return -1;
}

PH_FN void ps_start(struct ps *s, int with_hook, const char *const *extra)
{
	assert_int_equal(ps_run(s, "127.0.0.1:0", with_hook, extra), 0);
}

/* ---- one HTTP request ---------------------------------------------------------- */

struct reply {
	long status;
	char *body;
	size_t len;
	json_t *doc;			/* the body parsed, or NULL */
	char replayed[16];		/* Idempotent-Replayed */
	char request_id[64];		/* Request-Id */
	char original[64];		/* Original-Request */
	char ctype[128];		/* Content-Type */
	char location[600];		/* Location */
};

PH_FN size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;
	size_t len = size * n;
	char *b = realloc(r->body, r->len + len + 1);

	if (!b)
		return 0;
	memcpy(b + r->len, p, len);
	r->body = b;
	r->len += len;
	r->body[r->len] = '\0';
	return len;
}

PH_FN void header_take(const char *p, size_t len, const char *name, char *out, size_t size)
{
	size_t n = strlen(name);

	if (len > n + 1 && strncasecmp(p, name, n) == 0 && p[n] == ':') {
		const char *v = p + n + 1;
		size_t vlen = len - n - 1;

		while (vlen > 0 && *v == ' ') {
			v++;
			vlen--;
		}
		while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n'))
			vlen--;
		snprintf(out, size, "%.*s", (int)vlen, v);
	}
}

PH_FN size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;
	size_t len = size * n;

	header_take(p, len, "Idempotent-Replayed", r->replayed, sizeof r->replayed);
	header_take(p, len, "Request-Id", r->request_id, sizeof r->request_id);
	header_take(p, len, "Original-Request", r->original, sizeof r->original);
	header_take(p, len, "Content-Type", r->ctype, sizeof r->ctype);
	header_take(p, len, "Location", r->location, sizeof r->location);
	return len;
}

PH_FN void reply_free(struct reply *r)
{
	free(r->body);
	json_decref(r->doc);
	memset(r, 0, sizeof *r);
}

/*
 * call: method path on paysink, with the Authorization header authz (NULL:
 * none), the Idempotency-Key key (NULL: none) and the form body (NULL: none;
 * a POST without one sends an empty body); extra more header lines
 * (NULL-terminated) or NULL.  [out] *r (reply_free).
 */
PH_FN void call_h(struct ps *s, const char *method, const char *path, const char *authz,
		   const char *key, const char *form, const char *const *extra, struct reply *r)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[700], line[400];
	CURLcode rc;
	int i;

	assert_non_null(h);
	memset(r, 0, sizeof *r);
	snprintf(url, sizeof url, "%s://127.0.0.1:%d%s", s->tls ? "https" : "http", s->port, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	if (s->tls) {
		curl_easy_setopt(h, CURLOPT_CAINFO, s->ca);
		curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	}
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (authz) {
		snprintf(line, sizeof line, "Authorization: %s", authz);
		hdrs = curl_slist_append(hdrs, line);
	}
	if (key) {
		snprintf(line, sizeof line, "Idempotency-Key: %s", key);
		hdrs = curl_slist_append(hdrs, line);
	}
	for (i = 0; extra && extra[i]; i++)
		hdrs = curl_slist_append(hdrs, extra[i]);
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (form || strcmp(method, "POST") == 0)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, form ? form : "");
	rc = curl_easy_perform(h);
	if (rc != CURLE_OK)
		fail_msg("%s %s: %s", method, path, curl_easy_strerror(rc));
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	if (r->body && strncmp(r->ctype, "application/json", 16) == 0)
		r->doc = json_loads(r->body, 0, NULL);
}

PH_FN void call(struct ps *s, const char *method, const char *path, const char *key,
		 const char *form, struct reply *r)
{
	call_h(s, method, path, "Bearer " KEY, key, form, NULL, r);
}

/* a value in doc by a dotted path ("error.type", "sessions.0.id") */
PH_FN json_t *jget(json_t *doc, const char *path)
{
	char buf[200], *save = NULL, *part;
	json_t *v = doc;

	snprintf(buf, sizeof buf, "%s", path);
	for (part = strtok_r(buf, ".", &save); part && v; part = strtok_r(NULL, ".", &save))
		v = json_is_array(v) ? json_array_get(v, (size_t)atol(part))
				     : json_object_get(v, part);
	return v;
}

PH_FN const char *js(json_t *doc, const char *path)
{
	json_t *v = jget(doc, path);

	return json_is_string(v) ? json_string_value(v) : json_is_null(v) ? "(null)" : "(none)";
}

PH_FN long long ji(json_t *doc, const char *path)
{
	json_t *v = jget(doc, path);

	if (!json_is_integer(v))
		fail_msg("%s is not a number", path);
	return json_integer_value(v);
}

PH_FN size_t jn(json_t *doc, const char *path)
{
	return json_array_size(jget(doc, path));
}

/* GET /_paysink/record, parsed; caller json_decref()s */
PH_FN json_t *record_get(struct ps *s)
{
	struct reply r;
	json_t *doc;

	call_h(s, "GET", "/_paysink/record", NULL, NULL, NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(r.doc);
	doc = json_incref(r.doc);
	reply_free(&r);
	return doc;
}

/* create a session (SESSION_FORM and more), its id into id */
PH_FN void session_new(struct ps *s, const char *key, const char *more, char *id, size_t size)
{
	char form[2048];
	struct reply r;

	snprintf(form, sizeof form, "%s%s", SESSION_FORM, more ? more : "");
	call(s, "POST", "/v1/checkout/sessions", key, form, &r);
	if (r.status != 200)
		fail_msg("create: %ld %s", r.status, r.body);
	snprintf(id, size, "%s", js(r.doc, "id"));
	reply_free(&r);
}

/* POST /_paysink/pay/{id}: 200 expected; the payment intent into pi */
PH_FN void session_pay(struct ps *s, const char *id, char *pi, size_t size)
{
	char path[200];
	struct reply r;

	snprintf(path, sizeof path, "/_paysink/pay/%s", id);
	call_h(s, "POST", path, NULL, NULL, NULL, NULL, &r);
	if (r.status != 200)
		fail_msg("pay: %ld %s", r.status, r.body);
	if (pi)
		snprintf(pi, size, "%s", js(r.doc, "payment_intent"));
	reply_free(&r);
}

/* ---- the receiver's hits and the record's events --------------------------- */

/* the receiver's hits, copied out under its lock */
PH_FN int hook_hits(struct ps *s, struct hit *out, int max)
{
	int n;

	pthread_mutex_lock(&s->hook.mu);
	n = s->hook.n < max ? s->hook.n : max;
	memcpy(out, s->hook.hits, (size_t)n * sizeof *out);
	pthread_mutex_unlock(&s->hook.mu);
	return n;
}

/* the record's entry for event id */
PH_FN json_t *record_event(json_t *rec, const char *id)
{
	json_t *ev;
	size_t i;

	json_array_foreach(json_object_get(rec, "events"), i, ev)
		if (strcmp(js(ev, "id"), id) == 0)
			return ev;
	fail_msg("event %s is not in the record", id);
	return NULL;
}

#endif
