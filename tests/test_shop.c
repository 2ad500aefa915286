/*
 * test_shop.c: the shop and its payments against tools/paysink (a
 * Stripe-like provider run here), on either engine (tools/pg_tests.sh).
 * The shop listens in this process, under the fake clock set to the real
 * time; the shop's jobs (reconcile, refund, its email) run here too, one
 * call each, as a worker would run them.
 *
 *  - the webhook's signature, made by the official stripe package's own
 *    test-header generator: accepted with either secret while one rotates,
 *    refused with a byte changed, an old timestamp, an unknown secret or no
 *    header, and a refused one changes nothing;
 *  - a webhook delivered twice makes one order (its event id recorded
 *    with the effect);
 *  - a webhook never delivered: the reconcile job looks the payment up when
 *    the hold ends and makes the order; an unpaid session is expired at the
 *    provider and its hold ends;
 *  - out of order: the buyer's return makes the order first, the delayed
 *    webhook then finds it made;
 *  - a payment after its hold ran out: an order when the seats are free,
 *    else one refund under refund-<payment> and one email, however often the
 *    jobs run;
 *  - cancelling a paid order refunds it once; a box-office order is owed
 *    back at the window;
 *  - a hold's seats are free again when its lease runs out;
 *  - what strangers get: no form without its token, the caps, the rate
 *    limit, bad input refused with nothing written, no staff page on the
 *    shop's listener, X-Forwarded-For believed from a trusted proxy only.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "code.h"
#include "event_edit.h"
#include "event_runs.h"
#include "handler.h"
#include "holds.h"
#include "jobkinds.h"
#include "orders.h"
#include "payments.h"
#include "scans.h"
#include "pipeline.h"
#include "shop.h"
#include "shop_jobs.h"
#include "statedir.h"
#include "stripe.h"
#include "testutil.h"
#include "ticket_jobs.h"
#include "tickets.h"

#define KEY "sk_test_shop"
#define SECRET "whsec_shop_current"
#define OLD_SECRET "whsec_shop_previous"
#define SIGN_SCRIPT "tests/browser/stripe_sign.mjs"
#define MIN_MS (60 * 1000LL)
#define WAIT_MS 15000

struct fx {
	const struct tu_env *e;
	pid_t ps;
	int ps_port, port;
	char ps_url[64], url[64], record[400], key_file[400], secret_file[400], maildir[400];
	char certs[400], ca[420];		/* a TLS shop's: its test CA */
	struct shop *shop;
	struct tickets_env *tenv;
	struct handler_ctx *ctx;
	int64_t event_id;
};

static struct fx F;

/* What a test's shop and provider are started with. */
struct variant {
	const char *faults[6];		/* paysink's fault options */
	int64_t rate_per_min;		/* 0: 100 */
	const char *proxies;		/* shop_trusted_proxies */
	int capacity;			/* 0: 4 */
	int no_provider;		/* payment_provider = none */
	int tls;			/* the shop with its own certificate */
};

/* ---- set-up ------------------------------------------------------------------ */

static int64_t real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void write_secret(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, 0600), 0);
}

/* a port free now (the shop takes it a moment later) */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t n = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &n), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static void paysink_start(const struct variant *v)
{
	char port_file[400], log[400], hook[96];
	const char *args[24] = { "paysink", "--listen", "127.0.0.1:0", "--api-key", KEY,
				 "--record", F.record, "--port-file", port_file, "--webhook-url",
				 hook, "--webhook-secret", SECRET, "--retry-base-ms", "200" };
	int n = 15, i, waited;
	FILE *f;

	snprintf(port_file, sizeof port_file, "%s/paysink.port", F.e->dir);
	snprintf(log, sizeof log, "%s/paysink.log", F.e->dir);
	snprintf(hook, sizeof hook, "%s://127.0.0.1:%d/stripe/webhook", v->tls ? "https" : "http",
		 F.port);
	for (i = 0; v->faults[i]; i++)
		args[n++] = v->faults[i];
	if (v->tls) {
		args[n++] = "--webhook-ca";
		args[n++] = F.ca;
	}
	args[n] = NULL;
	F.ps = tu_spawn(args, log);
	for (waited = 0; waited < 5000 && !F.ps_port; waited += 10) {
		if ((f = fopen(port_file, "r"))) {
			if (fscanf(f, "%d", &F.ps_port) != 1)
				F.ps_port = 0;
			fclose(f);
		}
		if (!F.ps_port)
			tu_sleep_ms(10);
	}
	if (!F.ps_port)
		fail_msg("paysink did not start (make build/paysink); see %s", log);
	snprintf(F.ps_url, sizeof F.ps_url, "http://127.0.0.1:%d", F.ps_port);
}

static int setup_with(void **state, const struct variant *v)
{
	struct stripe_config sc = { 0 };
	struct shop_opts so = { 0 };
	struct event_new ev = { "Late Show", "Main Hall", 0, v->capacity ? v->capacity : 4, 0,
				"" };
	char listen[64], cert[450], key[450];

	tu_setup(state);
	memset(&F, 0, sizeof F);
	F.e = *state;
	clock_fake_set(real_ms());	/* signatures are dated by the real clock */
	snprintf(F.record, sizeof F.record, "%s/paysink.json", F.e->dir);
	snprintf(F.key_file, sizeof F.key_file, "%s/stripe.key", F.e->dir);
	snprintf(F.secret_file, sizeof F.secret_file, "%s/stripe.whsec", F.e->dir);
	write_secret(F.key_file, KEY "\n");
	write_secret(F.secret_file, SECRET "\n" OLD_SECRET "\n");
	F.port = free_port();
	if (v->tls) {
		char cmd[500];

		snprintf(F.certs, sizeof F.certs, "%s/certs", F.e->dir);
		snprintf(F.ca, sizeof F.ca, "%s/ca.pem", F.certs);
		snprintf(cmd, sizeof cmd, "sh tools/certs.sh '%s'", F.certs);
		assert_int_equal(system(cmd), 0);
	}
	paysink_start(v);
	sc.api_url = F.ps_url;
	sc.key_file = F.key_file;
	snprintf(listen, sizeof listen, "127.0.0.1:%d", F.port);
	so.db_path = F.e->db_path;
	so.listen = listen;
	so.name = "Test Hall";
	so.trusted_proxies = v->proxies;
	so.holds = (struct hold_rules){ 10 * MIN_MS, 1, 4, 2, 10 };
	so.rate_per_min = v->rate_per_min ? v->rate_per_min : 100;
	so.stripe_on = !v->no_provider;
	so.stripe = sc;
	so.webhook_secret_file = F.secret_file;
	if (v->tls) {
		snprintf(cert, sizeof cert, "%s/server.pem", F.certs);
		snprintf(key, sizeof key, "%s/server.key", F.certs);
		so.tls_cert = cert;
		so.tls_key = key;
	}
	so.state_dir = tu_state(F.e);
	assert_int_equal(statedir_init(F.e->db_path, tu_state(F.e)), SD_OK);
	if (shop_start(&so, &F.shop) != SD_OK)
		fail_msg("shop_start: %s", err_msg());
	snprintf(F.url, sizeof F.url, "%s://127.0.0.1:%d", v->tls ? "https" : "http", F.port);
	if (tickets_env_open(F.e->db_path, tu_state(F.e), NULL, NULL, NULL, &F.tenv) != SD_OK ||
	    stripe_open(&sc, &F.tenv->stripe) != SD_OK)
		fail_msg("tickets env: %s", err_msg());
	F.ctx = handler_ctx_new(F.e->db_path, F.tenv);
	assert_non_null(F.ctx);
	snprintf(F.maildir, sizeof F.maildir, "%s/maildir/new", F.e->dir);
	ev.starts_at = clock_now_ms() + 30 * 24 * 3600 * 1000LL;
	assert_int_equal(event_price_parse("12.50", "EUR", &ev.price_minor, ev.currency), SD_OK);
	assert_int_equal(event_add(F.e->db, &ev, &F.event_id), SD_OK);
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, &(struct variant){ { NULL }, 0, NULL, 0 });
}

static int setup_dup(void **state)
{
	return setup_with(state, &(struct variant){ { "--dup-pct", "100", NULL }, 0, NULL, 0 });
}

static int setup_drop(void **state)
{
	return setup_with(state, &(struct variant){ { "--drop-pct", "100", NULL }, 0, NULL, 0 });
}

static int setup_delay(void **state)
{
	return setup_with(state, &(struct variant){ { "--delay-ms-max", "1500", "--seed", "7",
						     NULL }, 0, NULL, 0 });
}

static int setup_strict(void **state)
{
	return setup_with(state, &(struct variant){ { NULL }, 2, "127.0.0.1", 20 });
}

static int setup_none(void **state)
{
	return setup_with(state, &(struct variant){ { NULL }, 0, NULL, 0, 1, 0 });
}

static int setup_tls(void **state)
{
	return setup_with(state, &(struct variant){ { NULL }, 0, NULL, 0, 0, 1 });
}

static int teardown(void **state)
{
	handler_ctx_free(F.ctx);
	tickets_env_close(F.tenv);
	shop_stop(F.shop);
	if (F.ps > 0) {
		kill(F.ps, SIGTERM);
		tu_wait(F.ps, 5000);
	}
	return tu_teardown(state);
}

/* ---- HTTP ------------------------------------------------------------------- */

struct resp {
	long status;
	char *body;
	size_t len;
	char location[2048];
	char cookie[128];		/* sd_csrf=... from Set-Cookie */
	char cookie_line[256];		/* the whole Set-Cookie, attributes and all */
	char retry_after[16];
	char referrer_policy[32];
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct resp *r = arg;
	char *b = realloc(r->body, r->len + size * n + 1);

	if (!b)
		return 0;
	memcpy(b + r->len, p, size * n);
	r->body = b;
	r->len += size * n;
	r->body[r->len] = '\0';
	return size * n;
}

static void take(const char *p, size_t len, const char *name, char *out, size_t size)
{
	size_t nl = strlen(name), v;

	if (len <= nl || strncasecmp(p, name, nl) != 0)
		return;
	p += nl;
	len -= nl;
	while (len && *p == ' ') {
		p++;
		len--;
	}
	for (v = 0; v < len && p[v] != '\r' && p[v] != '\n' && p[v] != ';'; v++)
		;
	snprintf(out, size, "%.*s", (int)v, p);
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct resp *r = arg;

	take(p, size * n, "Location:", r->location, sizeof r->location);
	take(p, size * n, "Set-Cookie:", r->cookie, sizeof r->cookie);
	if (size * n > 11 && strncasecmp(p, "Set-Cookie:", 11) == 0)
		snprintf(r->cookie_line, sizeof r->cookie_line, "%.*s", (int)strcspn(p, "\r\n"), p);
	take(p, size * n, "Retry-After:", r->retry_after, sizeof r->retry_after);
	take(p, size * n, "Referrer-Policy:", r->referrer_policy, sizeof r->referrer_policy);
	return size * n;
}

/* one request; headers NULL-terminated "Name: value" (may be NULL) */
static void http(const char *method, const char *url, const char *body,
		 const char *const *headers, struct resp *r)
{
	struct curl_slist *h = NULL;
	CURL *c = curl_easy_init();
	int i;

	memset(r, 0, sizeof *r);
	assert_non_null(c);
	for (i = 0; headers && headers[i]; i++)
		h = curl_slist_append(h, headers[i]);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
	if (F.ca[0])
		curl_easy_setopt(c, CURLOPT_CAINFO, F.ca);
	if (curl_easy_perform(c) != CURLE_OK)
		fail_msg("%s %s: no answer", method, url);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
	if (!r->body)
		r->body = strdup("");
}

static void resp_free(struct resp *r)
{
	free(r->body);
	r->body = NULL;
}

static void get(const char *path, const char *const *headers, struct resp *r)
{
	char url[2200];

	snprintf(url, sizeof url, "%s%s", F.url, path);
	http("GET", url, NULL, headers, r);
}

/* ---- a buyer ------------------------------------------------------------------ */

/* the event page's form token and its cookie ("Cookie: sd_csrf=...") */
static void form_token(char *tok, size_t size, char *cookie, size_t csize)
{
	struct resp r;
	char path[64];
	const char *v;

	snprintf(path, sizeof path, "/e/%lld", (long long)F.event_id);
	get(path, NULL, &r);
	assert_int_equal(r.status, 200);
	v = strstr(r.body, "name=\"csrf\" value=\"");
	assert_non_null(v);
	snprintf(tok, size, "%.26s", v + 19);
	assert_non_null(strstr(r.cookie, tok));
	snprintf(cookie, csize, "Cookie: %s", r.cookie);
	resp_free(&r);
}

/* POST the checkout form; [out] r */
static void checkout_as(int seats, const char *name, const char *email, const char *xff,
			struct resp *r)
{
	char tok[32], cookie[160], body[600], url[128], x[128], origin[96];
	const char *headers[4] = { cookie, origin, NULL, NULL };

	form_token(tok, sizeof tok, cookie, sizeof cookie);
	snprintf(origin, sizeof origin, "Origin: %s", F.url);	/* as a browser sends it */
	if (xff) {
		snprintf(x, sizeof x, "X-Forwarded-For: %s", xff);
		headers[2] = x;
	}
	snprintf(body, sizeof body, "csrf=%s&seats=%d&name=%s&email=%s", tok, seats, name, email);
	snprintf(url, sizeof url, "%s/e/%lld/checkout", F.url, (long long)F.event_id);
	http("POST", url, body, headers, r);
}

/* POST the checkout form with its token and these fields as they are */
static void checkout_raw(const char *fields, struct resp *r)
{
	char tok[32], cookie[160], body[600], url[128], origin[96];
	const char *headers[] = { cookie, origin, NULL };

	form_token(tok, sizeof tok, cookie, sizeof cookie);
	snprintf(origin, sizeof origin, "Origin: %s", F.url);
	snprintf(body, sizeof body, "csrf=%s&%s", tok, fields);
	snprintf(url, sizeof url, "%s/e/%lld/checkout", F.url, (long long)F.event_id);
	http("POST", url, body, headers, r);
}

/* a checkout that reaches the payment page; [out] hold (HOLD_ID_MAX) and
 * the session id (STRIPE_ID_MAX) */
static void checkout(int seats, const char *email, char *hold, char *session)
{
	struct resp r;
	const char *p;
	struct hold_view h;

	checkout_as(seats, "Ada+Lovelace", email, NULL, &r);
	if (r.status != 303)
		fail_msg("checkout: %ld %s", r.status, r.body);
	p = strstr(r.location, "/pay/");
	assert_non_null(p);
	assert_int_equal(strncmp(r.location, F.ps_url, strlen(F.ps_url)), 0);
	snprintf(session, STRIPE_ID_MAX, "%s", p + 5);
	resp_free(&r);
	assert_int_equal(hold_get_session(F.e->db, session, &h), SD_OK);
	snprintf(hold, HOLD_ID_MAX, "%s", h.public_id);
}

/* the buyer pays on the provider's page (its test control) */
static void pay(const char *session)
{
	char url[400];
	struct resp r;

	snprintf(url, sizeof url, "%s/_paysink/pay/%s", F.ps_url, session);
	http("POST", url, "", NULL, &r);
	if (r.status != 200)
		fail_msg("paysink pay: %ld %s", r.status, r.body);
	resp_free(&r);
}

static json_t *record(void)
{
	char url[128];
	struct resp r;
	json_t *j;

	snprintf(url, sizeof url, "%s/_paysink/record", F.ps_url);
	http("GET", url, NULL, NULL, &r);
	j = json_loads(r.body, 0, NULL);
	resp_free(&r);
	assert_non_null(j);
	return j;
}

/* the record's events of type, delivered (2xx) how often in all */
static int delivered(const char *type)
{
	json_t *rec = record(), *ev;
	size_t i;
	int n = 0;

	json_array_foreach(json_object_get(rec, "events"), i, ev)
		if (strcmp(json_string_value(json_object_get(ev, "type")), type) == 0)
			n += (int)json_integer_value(json_object_get(ev, "delivered_ok"));
	json_decref(rec);
	return n;
}

static int64_t count(const char *sql)
{
	return tu_count(F.e->db_path, sql);
}

static void wait_count(const char *sql, int64_t want)
{
	int waited;

	for (waited = 0; waited < WAIT_MS && count(sql) != want; waited += 50)
		tu_sleep_ms(50);
	if (count(sql) != want)
		fail_msg("waited %d ms for %lld from %s, got %lld", WAIT_MS, (long long)want, sql,
			 (long long)count(sql));
}

static void wait_delivered(const char *type, int want)
{
	int waited;

	for (waited = 0; waited < WAIT_MS && delivered(type) < want; waited += 50)
		tu_sleep_ms(50);
	assert_true(delivered(type) >= want);
}

/* ---- the shop's jobs, run here ------------------------------------------------- */

static enum job_outcome run_job(handler_fn fn, const char *kind, const char *key, int64_t id)
{
	char job_id[128], payload[64];
	struct job job = { 0 };
	struct job_result res;

	snprintf(job_id, sizeof job_id, "outbox:test:%s", kind);
	snprintf(payload, sizeof payload, "{\"%s\":%lld}", key, (long long)id);
	job.job_id = job_id;
	job.kind = (char *)kind;
	job.payload = payload;
	memset(&res, 0, sizeof res);
	return fn(F.ctx, &job, &res);
}

/* the buyer's address of the hold's page: /h/<its link> */
static void hold_path(const char *hold, const char *query, char *path, size_t size)
{
	struct hold_view h;

	assert_int_equal(hold_get(F.e->db, hold, &h), SD_OK);
	snprintf(path, size, "/h/%s%s", h.link, query);
}

static enum job_outcome reconcile(const char *hold)
{
	struct hold_view h;

	assert_int_equal(hold_get(F.e->db, hold, &h), SD_OK);
	return run_job(shop_job_reconcile, JOB_KIND_RECONCILE, "hold_id", h.id);
}

static int64_t refund_of(const char *hold)
{
	return tu_countf(F.e->db_path, "SELECT r.id FROM refunds r JOIN holds h ON h.id = "
			 "r.hold_id WHERE h.public_id = '%s'", hold);
}

/* ---- the webhook's signature ------------------------------------------------ */

/* the header the official package makes for payload, signed with secret at
 * ts (0: now) */
static void package_header(const char *payload, const char *secret, long long ts, char *out,
			   size_t size)
{
	char file[400], outp[400], tss[32];
	size_t n;
	char *text;
	int rc;

	snprintf(file, sizeof file, "%s/payload.json", F.e->dir);
	snprintf(outp, sizeof outp, "%s/sig.out", F.e->dir);
	write_secret(file, payload);
	snprintf(tss, sizeof tss, "%lld", ts);
	rc = tu_exec((const char *const[]){ "node", SIGN_SCRIPT, secret, file, ts ? tss : NULL,
					    NULL }, outp, NULL, 20000);
	if (rc != 0)
		fail_msg("node %s exited %d (tests/browser/node_modules: make deps-test)",
			 SIGN_SCRIPT, rc);
	text = (char *)tu_slurp(outp, &n);
	snprintf(out, size, "Stripe-Signature: %.*s", (int)strcspn(text, "\n"), text);
	free(text);
}

static void hook_post(const char *payload, const char *sig_header, struct resp *r)
{
	char url[128];
	const char *headers[] = { "Content-Type: application/json; charset=utf-8", sig_header,
				  NULL };

	snprintf(url, sizeof url, "%s/stripe/webhook", F.url);
	http("POST", url, payload, sig_header ? headers : headers + 1, r);
}

/* a checkout.session.completed event for the session as paysink has it */
static char *completed_event(const char *session, const char *event_id)
{
	char url[400], auth[64];
	const char *headers[] = { auth, NULL };
	struct resp r;
	json_t *ev;
	char *text;

	snprintf(url, sizeof url, "%s/v1/checkout/sessions/%s", F.ps_url, session);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", KEY);
	http("GET", url, NULL, headers, &r);
	assert_int_equal(r.status, 200);
	ev = json_pack("{s:s, s:s, s:s, s:I, s:b, s:{s:o}}", "id", event_id, "object", "event",
		       "type", "checkout.session.completed", "created", (json_int_t)(real_ms() / 1000),
		       "livemode", 0, "data", "object", json_loads(r.body, 0, NULL));
	resp_free(&r);
	text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	return text;
}

static void test_signatures_from_the_official_package(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], sig[512], *ev, *bad;
	struct resp r;

	(void)state;
	checkout(2, "ada%40example.org", hold, session);
	pay(session);	/* paysink drops its own webhook in this set-up */
	ev = completed_event(session, "evt_test_signed_1");

	/* a byte changed, an old timestamp, a secret not ours, no header:
	 * refused before the body is read, and nothing changes */
	package_header(ev, SECRET, 0, sig, sizeof sig);
	bad = strdup(ev);
	bad[strlen(bad) - 3] = bad[strlen(bad) - 3] == '1' ? '2' : '1';
	hook_post(bad, sig, &r);
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(r.body, "no v1 signature matches"));
	resp_free(&r);
	free(bad);
	package_header(ev, SECRET, real_ms() / 1000 - 400, sig, sizeof sig);
	hook_post(ev, sig, &r);
	assert_int_equal(r.status, 400);
	assert_non_null(strstr(r.body, "timestamp"));
	resp_free(&r);
	package_header(ev, "whsec_not_this_box", 0, sig, sizeof sig);
	hook_post(ev, sig, &r);
	assert_int_equal(r.status, 400);
	resp_free(&r);
	hook_post(ev, NULL, &r);
	assert_int_equal(r.status, 400);
	resp_free(&r);
	assert_int_equal(count("SELECT count(*) FROM orders"), 0);
	assert_int_equal(count("SELECT count(*) FROM processed_jobs WHERE job_id LIKE 'stripe:%'"),
			 0);

	/* signed with the secret being retired: still accepted while it rotates */
	package_header(ev, OLD_SECRET, 0, sig, sizeof sig);
	hook_post(ev, sig, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"outcome\":\"ordered\""));
	resp_free(&r);
	/* the same event again, freshly signed: recorded, so it makes nothing;
	 * a header of several v1 passes when one of them matches */
	package_header(ev, SECRET, 0, sig, sizeof sig);
	{
		char both[600], *v1 = strstr(sig, ",v1=");

		assert_non_null(v1);
		snprintf(both, sizeof both, "%.*s,v1=%064d%s", (int)(v1 - sig), sig, 0, v1);
		hook_post(ev, both, &r);
	}
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "\"outcome\":\"duplicate\""));
	resp_free(&r);
	free(ev);
	assert_int_equal(count("SELECT count(*) FROM orders"), 1);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM holds WHERE public_id = "
				   "'%s' AND state = 'ordered'", hold), 1);
	assert_int_equal(count("SELECT count(*) FROM processed_jobs WHERE job_id = "
			       "'stripe:evt_test_signed_1'"), 1);
	assert_int_equal(count("SELECT amount_minor FROM orders WHERE payment = 'online'"), 2500);
}

static void test_webhook_twice_makes_one_order(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];

	(void)state;
	checkout(3, "bo%40example.org", hold, session);
	pay(session);
	wait_delivered("checkout.session.completed", 2);	/* both copies answered 2xx */
	assert_int_equal(count("SELECT count(*) FROM orders"), 1);
	assert_int_equal(count("SELECT count(*) FROM tickets"), 3);
	assert_int_equal(count("SELECT count(*) FROM outbox WHERE kind = 'render_tickets'"), 1);
	assert_int_equal(count("SELECT count(*) FROM processed_jobs WHERE job_id LIKE 'stripe:%'"),
			 1);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM holds h JOIN orders o ON "
				   "o.id = h.order_id WHERE h.public_id = '%s' AND o.payment_ref = "
				   "h.payment_ref AND o.amount_minor = 3750", hold), 1);
}

static void test_webhook_never_the_reconcile_makes_the_order(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], unpaid[HOLD_ID_MAX], s2[STRIPE_ID_MAX];
	json_t *rec, *s;
	size_t i;

	(void)state;
	checkout(2, "cy%40example.org", hold, session);
	checkout(1, "di%40example.org", unpaid, s2);
	pay(session);
	/* while the hold runs, the job waits for its end */
	assert_int_equal(reconcile(hold), JOB_RETRY_LATER);
	assert_int_equal(count("SELECT count(*) FROM orders"), 0);
	clock_fake_advance(10 * MIN_MS + 1);
	assert_int_equal(reconcile(hold), JOB_DONE);
	assert_int_equal(count("SELECT count(*) FROM orders"), 1);
	assert_int_equal(reconcile(hold), JOB_DONE);	/* again: the state is reached */
	assert_int_equal(count("SELECT count(*) FROM orders"), 1);
	/* the unpaid one: expired at the provider, its hold ended */
	assert_int_equal(reconcile(unpaid), JOB_DONE);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM holds WHERE public_id = "
				   "'%s' AND state = 'expired'", unpaid), 1);
	rec = record();
	json_array_foreach(json_object_get(rec, "sessions"), i, s)
		if (strcmp(json_string_value(json_object_get(s, "id")), s2) == 0)
			assert_string_equal(json_string_value(json_object_get(s, "status")),
					    "expired");
	json_decref(rec);
	assert_int_equal(delivered("checkout.session.completed"), 0);	/* all dropped */
}

static void test_out_of_order_the_return_first(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], path[64];
	struct resp r;

	(void)state;
	checkout(1, "ed%40example.org", hold, session);
	pay(session);
	hold_path(hold, "?paid=1", path, sizeof path);
	get(path, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "Thank you"));
	assert_null(strstr(r.body, "other"));
	resp_free(&r);
	assert_int_equal(count("SELECT count(*) FROM orders"), 1);
	/* the delayed webhook comes after: recorded, and no second order */
	wait_count("SELECT count(*) FROM processed_jobs WHERE job_id LIKE 'stripe:%'", 1);
	assert_int_equal(count("SELECT count(*) FROM orders"), 1);
}

static void test_late_payment_order_or_one_refund(void **state)
{
	char a[HOLD_ID_MAX], sa[STRIPE_ID_MAX], b[HOLD_ID_MAX], sb[STRIPE_ID_MAX], pid[16];
	struct order_new o = { F.event_id, "Window", NULL, 2, NULL, "cash", 0, 0, NULL, NULL };
	int replayed = 0, mails;
	char problem[512];
	json_t *rec, *rf;

	(void)state;
	/* late, seats still free: the order is made */
	checkout(2, "fa%40example.org", a, sa);
	clock_fake_advance(10 * MIN_MS + 1);
	pay(sa);
	assert_int_equal(reconcile(a), JOB_DONE);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM holds WHERE public_id = "
				   "'%s' AND state = 'ordered'", a), 1);
	/* late, seats gone meanwhile: one refund and one email */
	checkout(2, "gu%40example.org", b, sb);
	clock_fake_advance(10 * MIN_MS + 1);
	assert_int_equal(order_add(F.e->db, &o, pid, &replayed), SD_OK);	/* the window sells them */
	pay(sb);
	assert_int_equal(reconcile(b), JOB_DONE);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM holds WHERE public_id = "
				   "'%s' AND state = 'refunded'", b), 1);
	assert_int_equal(count("SELECT count(*) FROM orders"), 2);
	assert_true(refund_of(b) > 0);
	assert_int_equal(run_job(shop_job_refund, JOB_KIND_REFUND, "refund_id", refund_of(b)),
			 JOB_DONE);
	assert_int_equal(run_job(shop_job_refund, JOB_KIND_REFUND, "refund_id", refund_of(b)),
			 JOB_DONE);
	rec = record();
	rf = json_object_get(rec, "refunds");
	assert_int_equal(json_array_size(rf), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(rf, 0), "amount")),
			 2500);
	assert_int_equal(strncmp(json_string_value(json_object_get(json_array_get(rf, 0),
								   "idempotency_key")),
				 "refund-pi_", 10), 0);
	json_decref(rec);
	assert_int_equal(count("SELECT count(*) FROM refunds WHERE done_at IS NOT NULL"), 1);
	assert_int_equal(count("SELECT count(*) FROM outbox WHERE kind = 'send_refund_notice'"), 1);
	assert_int_equal(run_job(shop_job_refund_notice, JOB_KIND_REFUND_MAIL, "refund_id",
				 refund_of(b)), JOB_DONE);
	mails = tu_count_files(F.maildir);
	assert_int_equal(run_job(shop_job_refund_notice, JOB_KIND_REFUND_MAIL, "refund_id",
				 refund_of(b)), JOB_DONE);
	assert_int_equal(tu_count_files(F.maildir), mails);
	assert_int_equal(mails, 1);
	/* the shop's invariants hold; an online order that loses its payment's
	 * trace breaks them */
	assert_int_equal(pay_check(F.e->db, 0, problem, sizeof problem), SD_OK);
	assert_string_equal(problem, "");
	assert_int_equal(db_begin(F.e->db), SD_OK);
	assert_int_equal(db_exec(F.e->db, "UPDATE holds SET order_id = NULL WHERE state = "
				 "'ordered'"), SD_OK);
	assert_int_equal(pay_check(F.e->db, 0, problem, sizeof problem), SD_OK);
	db_rollback(F.e->db);
	assert_non_null(strstr(problem, "is ordered, but no online order carries its payment"));
}

static void test_cancel_refunds_once(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], order[16], pid[16];
	struct order_new o = { F.event_id, "Window", NULL, 1, NULL, "card", 0, 0, NULL, NULL };
	struct order_cancel_result cr;
	struct order_detail *d = NULL;
	struct hold_view h;
	int replayed = 0;
	json_t *rec;

	(void)state;
	checkout(2, "ha%40example.org", hold, session);
	pay(session);
	wait_count("SELECT count(*) FROM orders", 1);
	assert_int_equal(hold_get(F.e->db, hold, &h), SD_OK);
	snprintf(order, sizeof order, "%s", h.order_public_id);
	assert_int_equal(order_cancel(F.e->db, order, "test", "the buyer asked", &cr), SD_OK);
	assert_int_equal(cr.refund, ORDER_REFUND_PROVIDER);
	assert_int_equal(order_cancel(F.e->db, order, "test", "again", &cr), SD_OK);
	assert_int_equal(cr.already, 1);
	assert_int_equal(count("SELECT count(*) FROM refunds WHERE reason = 'cancelled' AND "
			       "via = 'provider' AND amount_minor = 2500"), 1);
	/* the refund is queued before the cancellation's email */
	assert_true(count("SELECT min(id) FROM outbox WHERE kind = 'refund_payment'") <
		    count("SELECT min(id) FROM outbox WHERE kind = 'cancel_order'"));
	assert_int_equal(run_job(shop_job_refund, JOB_KIND_REFUND, "refund_id",
				 count("SELECT id FROM refunds")), JOB_DONE);
	rec = record();
	assert_int_equal(json_array_size(json_object_get(rec, "refunds")), 1);
	json_decref(rec);
	/* what the order shows: paid online, refunded with the provider's id */
	assert_int_equal(order_detail_get(F.e->db, order, &d), SD_OK);
	assert_string_equal(d->v.payment, "online");
	assert_int_equal(d->v.amount_minor, 2500);
	assert_int_equal(strncmp(d->v.payment_ref, "pi_", 3), 0);
	assert_int_equal(d->refund.owed, 1);
	assert_int_equal(d->refund.window, 0);
	assert_true(d->refund.done_at > 0);
	assert_int_equal(strncmp(d->refund.provider_id, "re_", 3), 0);
	order_detail_free(d);
	/* paid at the window: owed back there, no provider */
	assert_int_equal(order_add(F.e->db, &o, pid, &replayed), SD_OK);
	assert_int_equal(order_cancel(F.e->db, pid, "test", NULL, &cr), SD_OK);
	assert_int_equal(cr.refund, ORDER_REFUND_WINDOW);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM refunds WHERE via = 'window' "
				   "AND payment_ref = 'window:%s' AND amount_minor = 1250", pid), 1);
	assert_int_equal(count("SELECT count(*) FROM outbox WHERE kind = 'refund_payment'"), 1);
}

static void test_held_seats_come_free(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], path[64];
	struct resp r;

	(void)state;
	checkout(4, "ia%40example.org", hold, session);
	snprintf(path, sizeof path, "/e/%lld", (long long)F.event_id);
	get(path, NULL, &r);
	assert_non_null(strstr(r.body, "Sold out for now"));
	/* not no-referrer: a browser would send its forms with "Origin: null" */
	assert_string_equal(r.referrer_policy, "same-origin");
	assert_null(strstr(r.body, "<form"));
	resp_free(&r);
	snprintf(path, sizeof path, "/h/%s", hold);	/* its public id opens nothing */
	get(path, NULL, &r);
	assert_int_equal(r.status, 404);
	resp_free(&r);
	hold_path(hold, "", path, sizeof path);
	get(path, NULL, &r);
	assert_non_null(strstr(r.body, "data-left=\"600\""));
	resp_free(&r);
	clock_fake_advance(10 * MIN_MS);
	snprintf(path, sizeof path, "/e/%lld", (long long)F.event_id);
	get(path, NULL, &r);
	assert_non_null(strstr(r.body, "4 seats left"));
	resp_free(&r);
	checkout(4, "jo%40example.org", hold, session);
	assert_int_equal(count("SELECT count(*) FROM holds"), 2);
}

static void test_what_strangers_get(void **state)
{
	static const char *const staff[] = { "/v1/events", "/door", "/dashboard.js", "/metrics",
					      "/v1/orders", "/index.html" };
	char url[128], tok[32], cookie[160];
	const char *headers[] = { cookie, NULL };
	struct resp r;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof staff / sizeof staff[0]; i++) {
		get(staff[i], NULL, &r);
		assert_int_equal(r.status, 404);
		resp_free(&r);
	}
	/* no token, or another one: refused */
	snprintf(url, sizeof url, "%s/e/%lld/checkout", F.url, (long long)F.event_id);
	http("POST", url, "seats=1&name=A&email=a%40example.org", NULL, &r);
	assert_int_equal(r.status, 403);
	resp_free(&r);
	form_token(tok, sizeof tok, cookie, sizeof cookie);
	http("POST", url, "csrf=aaaaaaaaaaaaaaaaaaaaaaaaaa&seats=1&name=A&email=a%40example.org",
	     headers, &r);
	assert_int_equal(r.status, 403);
	resp_free(&r);
	/* a form posted from another site: the right token, a foreign Origin */
	{
		char body[200];
		const char *foreign[] = { cookie, "Origin: https://evil.example", NULL };

		snprintf(body, sizeof body, "csrf=%s&seats=1&name=A&email=a%%40example.org", tok);
		http("POST", url, body, foreign, &r);
		assert_int_equal(r.status, 403);
		assert_non_null(strstr(r.body, "cross-origin"));
		resp_free(&r);
	}
	/* bad input: refused with the form again, nothing written; each try
	 * counts against the address's rate, 2 a minute here */
	checkout_as(1, "%01Ada", "a%40example.org", NULL, &r);
	assert_int_equal(r.status, 422);
	assert_non_null(strstr(r.body, "control"));
	resp_free(&r);
	checkout_as(11, "Ada", "a%40example.org", NULL, &r);
	assert_int_equal(r.status, 422);
	assert_non_null(strstr(r.body, "seats must be between 1 and 10"));
	resp_free(&r);
	checkout_as(1, "Ada", "a%40example.org", NULL, &r);
	assert_int_equal(r.status, 429);
	assert_true(atoi(r.retry_after) >= 1);
	resp_free(&r);
	assert_int_equal(count("SELECT count(*) FROM holds"), 0);
	/* from a trusted proxy, X-Forwarded-For's last address is the buyer:
	 * another address, its own rate */
	checkout_as(1, "Ada", "a%40example.org", "198.51.100.1, 203.0.113.9", &r);
	assert_int_equal(r.status, 303);
	resp_free(&r);
	checkout_as(1, "Ada", "not-an-address", "203.0.113.9", &r);
	assert_int_equal(r.status, 422);
	resp_free(&r);
	assert_int_equal(count("SELECT count(*) FROM holds"), 1);
	assert_int_equal(count("SELECT count(*) FROM holds WHERE client = '203.0.113.9'"), 1);
}

static void test_caps_per_email(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];
	struct resp r;

	(void)state;
	checkout(1, "ka%40example.org", hold, session);
	checkout(1, "KA%40example.org", hold, session);
	checkout_as(1, "Ka", "ka%40example.org", NULL, &r);
	assert_int_equal(r.status, 429);
	assert_non_null(strstr(r.body, "this email"));
	resp_free(&r);
	/* seats are digits, and nothing else */
	checkout_raw("seats=1e9&name=Lu&email=lu%40example.org", &r);
	assert_int_equal(r.status, 422);
	resp_free(&r);
	checkout_raw("seats=+1&name=Lu&email=lu%40example.org", &r);
	assert_int_equal(r.status, 422);
	resp_free(&r);
	checkout_raw("name=Lu&email=lu%40example.org", &r);
	assert_int_equal(r.status, 422);
	resp_free(&r);
	assert_int_equal(count("SELECT count(*) FROM holds"), 2);
}

/* payment_provider = none: the events show, the window sells, the shop
 * takes no checkout and has no webhook */
static void test_no_provider_sells_at_the_window(void **state)
{
	char path[64], url[128];
	struct resp r;

	(void)state;
	snprintf(path, sizeof path, "/e/%lld", (long long)F.event_id);
	get(path, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "sold at the box office"));
	assert_null(strstr(r.body, "<form"));
	resp_free(&r);
	snprintf(url, sizeof url, "%s/e/%lld/checkout", F.url, (long long)F.event_id);
	http("POST", url, "seats=1&name=Ada&email=a%40example.org", NULL, &r);
	assert_int_equal(r.status, 409);
	resp_free(&r);
	snprintf(url, sizeof url, "%s/stripe/webhook", F.url);
	http("POST", url, "{}", NULL, &r);
	assert_int_equal(r.status, 404);
	resp_free(&r);
	assert_int_equal(count("SELECT count(*) FROM holds"), 0);
}

/* the shop with its own certificate: HTTPS only, its cookie Secure, a
 * whole sale through it (paysink's webhook over HTTPS too) */
static void test_own_certificate(void **state)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX], url[128];
	struct resp r;
	CURL *c;

	(void)state;
	get("/", NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "Late Show"));
	resp_free(&r);
	snprintf(url, sizeof url, "/e/%lld", (long long)F.event_id);
	get(url, NULL, &r);
	assert_non_null(strstr(r.cookie_line, "; Secure"));
	assert_non_null(strstr(r.cookie_line, "; HttpOnly"));
	assert_non_null(strstr(r.cookie_line, "; SameSite=Lax"));
	resp_free(&r);
	checkout(1, "tls%40example.org", hold, session);
	pay(session);
	wait_count("SELECT count(*) FROM orders", 1);
	/* plain HTTP on its port gets no HTTP answer */
	snprintf(url, sizeof url, "http://127.0.0.1:%d/", F.port);
	c = curl_easy_init();
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	assert_int_not_equal(curl_easy_perform(c), CURLE_OK);
	curl_easy_cleanup(c);
}

/* stagedoor demo --shop: the demo's event priced, its provider's key and
 * secret made for it (files the user alone may read, out of any command
 * line), a configuration the box takes, and the script that runs the box
 * with paysink beside it, printed when there is no terminal */
static void test_demo_prepares_its_shop(void **state)
{
	char bin[PATH_MAX], ps[PATH_MAX], script[PATH_MAX * 3], out[400], path[600];
	char *text;
	struct stat st;
	size_t n;
	const char *files[] = { "stripe.key", "stripe.whsec", "stagedoor.conf" };
	size_t i;

	(void)state;
	TU_SQLITE_ONLY();
	assert_non_null(realpath(tu_bin(), bin));
	assert_non_null(realpath(getenv("PAYSINK_BIN") ? getenv("PAYSINK_BIN") : "build/paysink",
				 ps));
	snprintf(script, sizeof script, "cd '%s' && exec '%s' demo --orders 5 --shop '%s'",
		 F.e->dir, bin, ps);
	snprintf(out, sizeof out, "%s/demo.out", F.e->dir);
	assert_int_equal(tu_exec((const char *const[]){ "/bin/sh", "-c", script, NULL }, out, NULL,
				 60000), 0);
	text = (char *)tu_slurp(out, &n);
	snprintf(path, sizeof path, "box and shop: sh %s/var/demo/run.sh", F.e->dir);
	if (!strstr(text, path))
		tu_fail_free(text, NULL, "demo printed no script line:\n%s", text);
	free(text);
	for (i = 0; i < sizeof files / sizeof files[0]; i++) {
		snprintf(path, sizeof path, "%s/var/demo/%s", F.e->dir, files[i]);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
	}
	snprintf(path, sizeof path, "%s/var/demo/run.sh", F.e->dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	text = (char *)tu_slurp(path, &n);
	/* the key and the secret are read from their files, never on a command line */
	if (strstr(text, "sk_test") || strstr(text, "whsec_") || !strstr(text, "--api-key-file") ||
	    !strstr(text, " run --config "))
		tu_fail_free(text, NULL, "run.sh:\n%s", text);
	free(text);
	/* the box takes its configuration; the event is priced */
	snprintf(path, sizeof path, "%s/var/demo/stagedoor.conf", F.e->dir);
	assert_int_equal(tu_exec((const char *const[]){ bin, "config", "show", "--config", path,
						       NULL }, out, NULL, 20000), 0);
	snprintf(script, sizeof script, "'%s' event show 1 --json --db '%s/var/demo/stagedoor.db'",
		 bin, F.e->dir);
	assert_int_equal(tu_exec((const char *const[]){ "/bin/sh", "-c", script, NULL }, out, NULL,
				 20000), 0);
	text = (char *)tu_slurp(out, &n);
	if (!strstr(text, "\"price\": \"25.00\"") || !strstr(text, "\"currency\": \"EUR\""))
		tu_fail_free(text, NULL, "the demo's event has no price:\n%s", text);
	free(text);
}

/* ---- a whole event at once ----------------------------------------------------- */

#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })
static char out[16384], err[16384];

/* the box's jobs, run to the end in this process (the provider is paysink) */
static void drain(void)
{
	struct pipeline_opts po;

	memset(&po, 0, sizeof po);
	po.worker.db_path = F.e->db_path;
	po.worker.name = "shop-test";
	po.worker.concurrency = 2;
	po.worker.handlers = ticket_handlers;
	po.worker.app = F.tenv;
	po.poll_ms = 20;
	if (pipeline_run(F.e->db, &po, NULL) != SD_OK)
		fail_msg("pipeline: %s", err_msg());
}

/* the refunds in paysink's record under key */
static int refunds_keyed(const char *key, int64_t *amount)
{
	json_t *rec = record(), *x;
	size_t i;
	int n = 0;

	json_array_foreach(json_object_get(rec, "refunds"), i, x)
		if (strcmp(json_string_value(json_object_get(x, "idempotency_key")), key) == 0) {
			n++;
			*amount = json_integer_value(json_object_get(x, "amount"));
		}
	json_decref(rec);
	return n;
}

/* a paid shop order of one seat; [out] its public id (16 bytes) */
static void paid_order(const char *email, char *pid)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];
	struct hold_view h;

	checkout(1, email, hold, session);
	pay(session);
	for (int waited = 0; waited < WAIT_MS; waited += 50) {
		assert_int_equal(hold_get(F.e->db, hold, &h), SD_OK);
		if (h.order_public_id[0])
			break;
		tu_sleep_ms(50);
	}
	assert_true(h.order_public_id[0] != '\0');
	snprintf(pid, 16, "%s", h.order_public_id);
}

/* a cancelled event refunds each payment once under refund-<order>, even
 * when the worker dies between the provider's refund and its record */
static void test_event_cancel_refunds_each_payment_once(void **state)
{
	char a[16], b[16], w[16], key[40];
	struct order_new o = { F.event_id, "Window", NULL, 1, NULL, "card", 0, 0, NULL, NULL };
	struct event_run_view run;
	int already = 0, replayed = 0, rc = 0, round;
	int64_t amount = 0;
	json_t *rec;

	(void)state;
	paid_order("a%40example.org", a);
	paid_order("b%40example.org", b);
	assert_int_equal(order_add(F.e->db, &o, w, &replayed), SD_OK);
	/* the holds' look-ups, due when their holds would have run out, done
	 * now: the workers below, on the real clock, find nothing else ahead */
	drain();
	clock_fake_set(real_ms() + 11 * MIN_MS);
	drain();
	clock_fake_set(real_ms());
	assert_int_equal(count("SELECT count(*) FROM stream"), 0);
	assert_int_equal(event_cancel(F.e->db, F.event_id, "test", "Storm", &run, &already),
			 SD_OK);
	/* a worker of its own, with the provider, killed after paysink refunded */
	setenv("STAGEDOOR_PAYMENT_PROVIDER", "stripe", 1);
	setenv("STAGEDOOR_STRIPE_API_URL", F.ps_url, 1);
	setenv("STAGEDOOR_STRIPE_KEY_FILE", F.key_file, 1);
	setenv("STAGEDOOR_LEASE_MS", "1000", 1);
	setenv("STAGEDOOR_STRIPE_TIMEOUT_MS", "1000", 1);	/* a refund's claim: stale in 6 s */
	setenv("STAGEDOOR_FAILPOINTS", "refund_after_call=crash:1", 1);
	for (round = 0; round < 4 && rc != 70; round++) {
		assert_int_equal(RUN("relay", "--drain", "--db", F.e->db_path), 0);
		rc = RUN("worker", "--drain", "--concurrency", "1", "--db", F.e->db_path);
	}
	unsetenv("STAGEDOOR_FAILPOINTS");
	if (rc != 70)
		fail_msg("the worker was to die after the refund call (exit 70), got %d: %s", rc,
			 err);
	/* the next worker takes the job over when the dead one's lease ends, and
	 * its refund claim once that is stale (the provider's timeout + 5 s) */
	for (round = 0; round < 4 && count("SELECT count(*) FROM stream") +
		    count("SELECT count(*) FROM outbox WHERE published_at IS NULL") > 0; round++) {
		assert_int_equal(RUN("relay", "--drain", "--db", F.e->db_path), 0);
		assert_int_equal(RUN("worker", "--drain", "--db", F.e->db_path), 0);
	}
	assert_int_equal(count("SELECT count(*) FROM stream") +
			 count("SELECT count(*) FROM outbox WHERE published_at IS NULL"), 0);
	unsetenv("STAGEDOOR_LEASE_MS");
	unsetenv("STAGEDOOR_STRIPE_TIMEOUT_MS");
	unsetenv("STAGEDOOR_PAYMENT_PROVIDER");
	unsetenv("STAGEDOOR_STRIPE_API_URL");
	unsetenv("STAGEDOOR_STRIPE_KEY_FILE");
	/* each payment refunded once, in full, under its order's key */
	snprintf(key, sizeof key, "refund-%s", a);
	assert_int_equal(refunds_keyed(key, &amount), 1);
	assert_int_equal(amount, 1250);
	snprintf(key, sizeof key, "refund-%s", b);
	assert_int_equal(refunds_keyed(key, &amount), 1);
	rec = record();
	assert_int_equal(json_array_size(json_object_get(rec, "refunds")), 2);
	/* the dead worker's call was asked again under the same key: replayed */
	assert_true(json_integer_value(json_object_get(json_object_get(rec, "idempotency"),
						       "replays")) >= 1);
	json_decref(rec);
	assert_int_equal(count("SELECT count(*) FROM refunds WHERE via = 'provider' AND "
			       "done_at IS NOT NULL AND provider_refund_id LIKE 're_%'"), 2);
	assert_int_equal(count("SELECT count(*) FROM refunds WHERE via = 'window'"), 1);
	assert_int_equal(count("SELECT count(*) FROM outbox WHERE kind = 'refund_payment'"), 0);
	assert_int_equal(count("SELECT refunded FROM event_runs"), 2);
	assert_int_equal(count("SELECT at_window FROM event_runs"), 1);
	assert_int_equal(count("SELECT count(*) FROM event_runs WHERE finished_at IS NOT NULL"), 1);
	/* the buyers with an address: one email each (the window's buyer gave none) */
	assert_int_equal(count("SELECT count(*) FROM email_sends WHERE kind = 'cancel-event' AND "
			       "sent_at IS NOT NULL"), 2);
}

/* the message in the maildir whose name starts with prefix, its quoted-
 * printable text flattened; malloc'd */
static char *mail_text(const char *prefix)
{
	char path[800], *buf = NULL, *o;
	const char *p;
	struct dirent *d;
	DIR *dp = opendir(F.maildir);
	FILE *f = NULL;
	long n;

	assert_non_null(dp);
	while ((d = readdir(dp)) && !f)
		if (strncmp(d->d_name, prefix, strlen(prefix)) == 0) {
			snprintf(path, sizeof path, "%s/%s", F.maildir, d->d_name);
			f = fopen(path, "rb");
		}
	closedir(dp);
	if (!f)
		fail_msg("no message %s* in %s", prefix, F.maildir);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	for (p = buf, o = buf; *p; p++) {
		if (p[0] == '=' && p[1] == '\r' && p[2] == '\n')
			p += 2;
		else if (p[0] == '=' && p[1] == '3' && p[2] == 'D')
			*o++ = '=', p += 2;
		else
			*o++ = *p;
	}
	*o = '\0';
	return buf;
}

/* a buyer who cannot come on a moved event's new date cancels from the
 * email's link, once, however often they press, and is refunded once */
/* a paid order for address a (into pub), its event moved 40 days on: the
 * link in its moved email (its path into path), the form's CSRF token and
 * cookie from the page the link opens */
static void moved_order_link(const char *address, char *pub, char *link, size_t lsize,
			     char *path, size_t psize, char *tok, char *cookie, size_t csize)
{
	struct event_change ch = { EVENT_SET_STARTS };
	struct event_view v;
	struct resp r;
	char prefix[48], *text, *p, *q;

	snprintf(F.tenv->shop_url, sizeof F.tenv->shop_url, "%s", F.url);
	paid_order(address, pub);
	drain();
	ch.starts_at = clock_now_ms() + 40 * 24 * 3600 * 1000LL;
	ch.actor = "test";
	assert_int_equal(event_set(F.e->db, F.event_id, &ch, &v, NULL), SD_OK);
	drain();
	snprintf(prefix, sizeof prefix, "moved-%lld-1-%s", (long long)F.event_id, pub);
	text = mail_text(prefix);
	p = strstr(text, F.url);
	if (!p)
		fail_msg("no link to the shop in the moved email: %s", text);
	q = p + strcspn(p, "\r\n ");
	snprintf(link, lsize, "%.*s", (int)(q - p), p);
	free(text);
	snprintf(path, psize, "%s", link + strlen(F.url));
	assert_int_equal(strncmp(path, "/r/", 3), 0);
	/* the page offers the refund, with its form */
	get(path, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "Cancel my order and pay me back"));
	p = strstr(r.body, "name=\"csrf\" value=\"");
	assert_non_null(p);
	snprintf(tok, 32, "%.26s", p + 19);
	snprintf(cookie, csize, "Cookie: %s", r.cookie);
	resp_free(&r);
}

static void test_moved_event_refund_link(void **state)
{
	char a[16], prefix[48], link[400], path[400], tok[32], cookie[160], body[200];
	char bad[400], url[440];
	const char *headers[] = { cookie, NULL };
	struct resp r;
	int64_t amount = 0;
	char *p;

	(void)state;
	moved_order_link("mover%40example.org", a, link, sizeof link, path, sizeof path, tok,
			 cookie, sizeof cookie);
	/* a link for another order, a changed token, a change that never was */
	snprintf(bad, sizeof bad, "%s", path);
	bad[strlen(bad) - 1] = bad[strlen(bad) - 1] == '0' ? '1' : '0';
	get(bad, NULL, &r);
	assert_int_equal(r.status, 404);
	resp_free(&r);
	snprintf(bad, sizeof bad, "%s", path);
	p = strstr(bad, "c=1");
	assert_non_null(p);
	p[2] = '2';
	get(bad, NULL, &r);
	assert_int_equal(r.status, 404);
	resp_free(&r);
	/* the form without its token changes nothing */
	snprintf(url, sizeof url, "%s/r/%s", F.url, a);
	p = strstr(link, "t=");
	snprintf(body, sizeof body, "c=1&%s&csrf=%s", p, "aaaaaaaaaaaaaaaaaaaaaaaaaa");
	http("POST", url, body, headers, &r);
	assert_int_equal(r.status, 403);
	resp_free(&r);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM orders WHERE public_id = "
				   "'%s' AND cancelled_at IS NULL", a), 1);
	/* pressed twice: one cancellation, one refund */
	snprintf(body, sizeof body, "c=1&%s&csrf=%s", p, tok);
	http("POST", url, body, headers, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "Your order is cancelled"));
	resp_free(&r);
	http("POST", url, body, headers, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "Your order is cancelled"));
	resp_free(&r);
	drain();
	snprintf(prefix, sizeof prefix, "refund-%s", a);
	assert_int_equal(refunds_keyed(prefix, &amount), 1);
	assert_int_equal(amount, 1250);
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM order_changes c JOIN orders "
				   "o ON o.id = c.order_id WHERE o.public_id = '%s' AND c.kind = "
				   "'cancel' AND c.actor = 'buyer'", a), 1);
	assert_int_equal(count("SELECT count(*) FROM email_sends WHERE kind = 'cancel' AND "
			       "sent_at IS NOT NULL"), 1);
}

/* a ticket admitted at the door: the link cancels nothing and says why */
static void test_refund_link_after_admission(void **state)
{
	char a[16], link[400], path[400], tok[32], cookie[160], body[200], url[440];
	char key_path[600], code[CODE_TEXT_MAX];
	const char *headers[] = { cookie, NULL };
	unsigned char key[CODE_KEY_LEN];
	struct scan_result sr;
	struct resp r;

	(void)state;
	moved_order_link("admitted%40example.org", a, link, sizeof link, path, sizeof path, tok,
			 cookie, sizeof cookie);
	assert_int_equal(code_key_path(F.e->db_path, tu_state(F.e), key_path, sizeof key_path),
			 SD_OK);
	assert_int_equal(code_key_load(key_path, key), SD_OK);
	code_make(key, tu_countf(F.e->db_path, "SELECT t.code_id FROM tickets t JOIN orders o ON "
				 "o.id = t.order_id WHERE o.public_id = '%s' ORDER BY t.id LIMIT 1",
				 a), F.event_id, code);
	assert_int_equal(scan_ticket(F.e->db, key, code, NULL,
				     &(struct scan_by){ "front-door", NULL, NULL }, &sr), SD_OK);
	assert_int_equal(sr.outcome, SCAN_ADMITTED);
	snprintf(url, sizeof url, "%s/r/%s", F.url, a);
	snprintf(body, sizeof body, "c=1&%s&csrf=%s", strstr(link, "t="), tok);
	http("POST", url, body, headers, &r);
	assert_int_equal(r.status, 409);
	assert_non_null(strstr(r.body, "was admitted at"));
	assert_non_null(strstr(r.body, "the order is not cancelled"));
	resp_free(&r);
	drain();
	assert_int_equal(tu_countf(F.e->db_path, "SELECT count(*) FROM orders WHERE public_id = "
				   "'%s' AND cancelled_at IS NULL", a), 1);
	assert_int_equal(count("SELECT count(*) FROM refunds"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_signatures_from_the_official_package,
						setup_drop, teardown),
		cmocka_unit_test_setup_teardown(test_webhook_twice_makes_one_order, setup_dup,
						teardown),
		cmocka_unit_test_setup_teardown(test_webhook_never_the_reconcile_makes_the_order,
						setup_drop, teardown),
		cmocka_unit_test_setup_teardown(test_out_of_order_the_return_first, setup_delay,
						teardown),
		cmocka_unit_test_setup_teardown(test_late_payment_order_or_one_refund, setup_drop,
						teardown),
		cmocka_unit_test_setup_teardown(test_cancel_refunds_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_seats_come_free, setup, teardown),
		cmocka_unit_test_setup_teardown(test_what_strangers_get, setup_strict, teardown),
		cmocka_unit_test_setup_teardown(test_caps_per_email, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_provider_sells_at_the_window, setup_none,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_certificate, setup_tls, teardown),
		cmocka_unit_test_setup_teardown(test_demo_prepares_its_shop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_event_cancel_refunds_each_payment_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_moved_event_refund_link, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refund_link_after_admission, setup, teardown),
	};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
