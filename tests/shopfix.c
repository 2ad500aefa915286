/*
 * shopfix.c: the shop's test fixture (shopfix.h).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "event_edit.h"
#include "holds.h"
#include "jobkinds.h"
#include "pipeline.h"
#include "shop_jobs.h"
#include "shopfix.h"
#include "statedir.h"
#include "stripe.h"
#include "ticket_jobs.h"

struct fx F;

/* ---- set-up ------------------------------------------------------------------ */

int64_t sf_real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sf_write_secret(const char *path, const char *text)
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
	const char *args[26] = { "paysink", "--listen", "127.0.0.1:0", "--api-key", KEY,
				 "--record", F.record, "--port-file", port_file, "--webhook-url",
				 hook, "--webhook-secret", SECRET, "--retry-base-ms", "200",
				 "--request-log", F.requests };
	int n = 17, i, waited;
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

int sf_setup_with(void **state, const struct variant *v)
{
	struct stripe_config sc = { 0 };
	struct shop_opts so = { 0 };
	struct event_new ev = { "Late Show", "Main Hall", 0, v->capacity ? v->capacity : 4, 0,
				"" };
	char listen[64], cert[450], key[450];

	tu_setup(state);
	memset(&F, 0, sizeof F);
	F.e = *state;
	clock_fake_set(sf_real_ms());	/* signatures are dated by the real clock */
	snprintf(F.record, sizeof F.record, "%s/paysink.json", F.e->dir);
	snprintf(F.requests, sizeof F.requests, "%s/stripe-requests.jsonl", F.e->dir);
	snprintf(F.key_file, sizeof F.key_file, "%s/stripe.key", F.e->dir);
	snprintf(F.secret_file, sizeof F.secret_file, "%s/stripe.whsec", F.e->dir);
	sf_write_secret(F.key_file, KEY "\n");
	sf_write_secret(F.secret_file, SECRET "\n" OLD_SECRET "\n");
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
	so.holds = (struct hold_rules){ .ttl_ms = 10 * MIN_MS, .renewals = 1, .per_client = 4,
					.seats_max = 10,
					.unpaid_share = v->unpaid_share ? v->unpaid_share : 100 };
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

int sf_teardown(void **state)
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
void sf_http(const char *method, const char *url, const char *body,
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

void sf_resp_free(struct resp *r)
{
	free(r->body);
	r->body = NULL;
}

void sf_get(const char *path, const char *const *headers, struct resp *r)
{
	char url[2200];

	snprintf(url, sizeof url, "%s%s", F.url, path);
	sf_http("GET", url, NULL, headers, r);
}

/* ---- a buyer ------------------------------------------------------------------ */

/* the event page's form token and its cookie ("Cookie: sd_csrf=...") */
void sf_form_token(char *tok, size_t size, char *cookie, size_t csize)
{
	struct resp r;
	char path[64];
	const char *v;

	snprintf(path, sizeof path, "/e/%lld", (long long)F.event_id);
	sf_get(path, NULL, &r);
	assert_int_equal(r.status, 200);
	v = strstr(r.body, "name=\"csrf\" value=\"");
	assert_non_null(v);
	snprintf(tok, size, "%.26s", v + 19);
	assert_non_null(strstr(r.cookie, tok));
	snprintf(cookie, csize, "Cookie: %s", r.cookie);
	sf_resp_free(&r);
}

/* POST the checkout form; [out] r */
void sf_checkout_as(int seats, const char *name, const char *email, const char *xff,
			struct resp *r)
{
	char tok[32], cookie[160], body[600], url[128], x[128], origin[96];
	const char *headers[4] = { cookie, origin, NULL, NULL };

	sf_form_token(tok, sizeof tok, cookie, sizeof cookie);
	snprintf(origin, sizeof origin, "Origin: %s", F.url);	/* as a browser sends it */
	if (xff) {
		snprintf(x, sizeof x, "X-Forwarded-For: %s", xff);
		headers[2] = x;
	}
	snprintf(body, sizeof body, "csrf=%s&seats=%d&name=%s&email=%s", tok, seats, name, email);
	snprintf(url, sizeof url, "%s/e/%lld/checkout", F.url, (long long)F.event_id);
	sf_http("POST", url, body, headers, r);
}

/* POST the checkout form with its token and these fields as they are */
void sf_checkout_raw(const char *fields, struct resp *r)
{
	char tok[32], cookie[160], body[600], url[128], origin[96];
	const char *headers[] = { cookie, origin, NULL };

	sf_form_token(tok, sizeof tok, cookie, sizeof cookie);
	snprintf(origin, sizeof origin, "Origin: %s", F.url);
	snprintf(body, sizeof body, "csrf=%s&%s", tok, fields);
	snprintf(url, sizeof url, "%s/e/%lld/checkout", F.url, (long long)F.event_id);
	sf_http("POST", url, body, headers, r);
}

/* a checkout that reaches the payment page; [out] hold (HOLD_ID_MAX) and
 * the session id (STRIPE_ID_MAX) */
void sf_checkout(int seats, const char *email, char *hold, char *session)
{
	struct resp r;
	const char *p;
	struct hold_view h;

	sf_checkout_as(seats, "Ada+Lovelace", email, NULL, &r);
	if (r.status != 303)
		fail_msg("checkout: %ld %s", r.status, r.body);
	p = strstr(r.location, "/pay/");
	assert_non_null(p);
	assert_int_equal(strncmp(r.location, F.ps_url, strlen(F.ps_url)), 0);
	snprintf(session, STRIPE_ID_MAX, "%s", p + 5);
	sf_resp_free(&r);
	assert_int_equal(hold_get_session(F.e->db, session, &h), SD_OK);
	snprintf(hold, HOLD_ID_MAX, "%s", h.public_id);
}

/* the buyer pays on the provider's page (its test control) */
void sf_pay(const char *session)
{
	char url[400];
	struct resp r;

	snprintf(url, sizeof url, "%s/_paysink/pay/%s", F.ps_url, session);
	sf_http("POST", url, "", NULL, &r);
	if (r.status != 200)
		fail_msg("paysink pay: %ld %s", r.status, r.body);
	sf_resp_free(&r);
}

json_t *sf_record(void)
{
	char url[128];
	struct resp r;
	json_t *j;

	snprintf(url, sizeof url, "%s/_paysink/record", F.ps_url);
	sf_http("GET", url, NULL, NULL, &r);
	j = json_loads(r.body, 0, NULL);
	sf_resp_free(&r);
	assert_non_null(j);
	return j;
}

/* the record's events of type, delivered (2xx) how often in all */
int sf_delivered(const char *type)
{
	json_t *rec = sf_record(), *ev;
	size_t i;
	int n = 0;

	json_array_foreach(json_object_get(rec, "events"), i, ev)
		if (strcmp(json_string_value(json_object_get(ev, "type")), type) == 0)
			n += (int)json_integer_value(json_object_get(ev, "delivered_ok"));
	json_decref(rec);
	return n;
}

int64_t sf_count(const char *sql)
{
	return tu_count(F.e->db_path, sql);
}

void sf_wait_count(const char *sql, int64_t want)
{
	int waited;

	for (waited = 0; waited < WAIT_MS && sf_count(sql) != want; waited += 50)
		tu_sleep_ms(50);
	if (sf_count(sql) != want)
		fail_msg("waited %d ms for %lld from %s, got %lld", WAIT_MS, (long long)want, sql,
			 (long long)sf_count(sql));
}

void sf_wait_delivered(const char *type, int want)
{
	int waited;

	for (waited = 0; waited < WAIT_MS && sf_delivered(type) < want; waited += 50)
		tu_sleep_ms(50);
	assert_true(sf_delivered(type) >= want);
}

/* ---- the shop's jobs, run here ------------------------------------------------- */

enum job_outcome sf_run_job(handler_fn fn, const char *kind, const char *key, int64_t id)
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
void sf_hold_path(const char *hold, const char *query, char *path, size_t size)
{
	struct hold_view h;

	assert_int_equal(hold_get(F.e->db, hold, &h), SD_OK);
	snprintf(path, size, "/h/%s%s", h.link, query);
}

enum job_outcome sf_reconcile(const char *hold)
{
	struct hold_view h;

	assert_int_equal(hold_get(F.e->db, hold, &h), SD_OK);
	return sf_run_job(shop_job_reconcile, JOB_KIND_RECONCILE, "hold_id", h.id);
}

int64_t sf_refund_of(const char *hold)
{
	return tu_countf(F.e->db_path, "SELECT r.id FROM refunds r JOIN holds h ON h.id = "
			 "r.hold_id WHERE h.public_id = '%s'", hold);
}

/* ---- the webhook's signature ------------------------------------------------ */

/* the header the official package makes for payload, signed with secret at
 * ts (0: now) */
void sf_package_header(const char *payload, const char *secret, long long ts, char *out,
			   size_t size)
{
	char file[400], outp[400], tss[32];
	size_t n;
	char *text;
	int rc;

	snprintf(file, sizeof file, "%s/payload.json", F.e->dir);
	snprintf(outp, sizeof outp, "%s/sig.out", F.e->dir);
	sf_write_secret(file, payload);
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

void sf_hook_post(const char *payload, const char *sig_header, struct resp *r)
{
	char url[128];
	const char *headers[] = { "Content-Type: application/json; charset=utf-8", sig_header,
				  NULL };

	snprintf(url, sizeof url, "%s/stripe/webhook", F.url);
	sf_http("POST", url, payload, sig_header ? headers : headers + 1, r);
}

/* a checkout.session.completed event for the session as paysink has it */
char *sf_completed_event(const char *session, const char *event_id)
{
	char url[400], auth[64];
	const char *headers[] = { auth, NULL };
	struct resp r;
	json_t *ev;
	char *text;

	snprintf(url, sizeof url, "%s/v1/checkout/sessions/%s", F.ps_url, session);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", KEY);
	sf_http("GET", url, NULL, headers, &r);
	assert_int_equal(r.status, 200);
	ev = json_pack("{s:s, s:s, s:s, s:I, s:b, s:{s:o}}", "id", event_id, "object", "event",
		       "type", "checkout.session.completed", "created", (json_int_t)(sf_real_ms() / 1000),
		       "livemode", 0, "data", "object", json_loads(r.body, 0, NULL));
	sf_resp_free(&r);
	text = json_dumps(ev, JSON_COMPACT);
	json_decref(ev);
	return text;
}

/* the box's jobs, run to the end in this process (the provider is paysink) */
void sf_drain(void)
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

/* a paid shop order of one seat; [out] its public id (16 bytes) */
void sf_paid_order(const char *email, char *pid)
{
	char hold[HOLD_ID_MAX], session[STRIPE_ID_MAX];
	struct hold_view h;

	sf_checkout(1, email, hold, session);
	sf_pay(session);
	for (int waited = 0; waited < WAIT_MS; waited += 50) {
		assert_int_equal(hold_get(F.e->db, hold, &h), SD_OK);
		if (h.order_public_id[0])
			break;
		tu_sleep_ms(50);
	}
	assert_true(h.order_public_id[0] != '\0');
	snprintf(pid, 16, "%s", h.order_public_id);
}
