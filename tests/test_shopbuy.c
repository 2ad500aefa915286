/*
 * test_shopbuy.c: a ticket bought in the public shop on a phone, end to end,
 * with the real box running.  tools/paysink (a Stripe-like provider on
 * loopback) and `stagedoor run` ($STAGEDOOR_BIN) with its shop, one worker,
 * a Berlin venue in de-DE and one priced event; then
 * tests/browser/shop.mjs drives Debian's headless chromium (playwright-core
 * from tests/browser/node_modules) at 390x844, touch, scale 2:
 *
 *  - the list and the event's page show "Do., 1. Mai 2036, 20:00 CEST" and
 *    "25,00 €"; no page scrolls sideways; the form's fields and buttons are
 *    at least 44 px tall;
 *  - 2 seats bought with JavaScript on: the form, paysink's hosted page
 *    ("50.00 EUR"), Pay, "Thank you" with the order id and the email;
 *  - a checkout left unpaid by paysink's Cancel link: its countdown reads
 *    "m:ss left" and changes within 2 s;
 *  - 2 seats bought again with JavaScript off, another buyer and email;
 *  - the form sent after deleting the sd_csrf cookie: 403, the page again
 *    with its message, and no hold.
 *
 * Then what the box and the provider recorded: 2 online orders of 5000
 * (EUR cents), each with its payment's reference, the ones the pages showed;
 * their holds 'ordered'; the unpaid checkout's hold still open; no hold for
 * the refused form; one ticket email per order in the maildir (the worker
 * renders and sends them); paysink's record: those 2 sessions complete with
 * one charge each, the unpaid one open with none.
 *
 * The test runs from the repository root (make runs tools/run_tests.sh
 * there).  It keeps the screenshots as build/test-output/shop-phone-*.png
 * (shop-phone-*-san.png under the sanitizer build's binary).
 */
#define _GNU_SOURCE
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
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define NODE_MODULES "tests/browser/node_modules/playwright-core"
#define SCRIPT "tests/browser/shop.mjs"
#define CHROMIUM "/usr/bin/chromium"
#define OUT_DIR "build/test-output"
#define KEY "sk_test_shopbuy"
#define SECRET "whsec_shopbuy"

/* Generous: the sanitizer build and a shared two-core machine are slow. */
#define START_MS 60000
#define MAIL_MS 120000
#define BROWSER_MS 300000
#define BROWSER_STEP_MS "30000"

/* what shop.mjs buys: its BUYERS (the emails) and the event it expects */
#define PHONE_EMAIL "ada.phone@example.org"
#define NOJS_EMAIL "bea.nojs@example.org"
#define HELD_EMAIL "cy.held@example.org"
#define REFUSED_EMAIL "eve.stale@example.org"

static const char *const SHOTS[] = { "event", "pay", "done", "hold", "nojs-done", "refused" };
#define SHOTS_N ((int)(sizeof SHOTS / sizeof SHOTS[0]))

/* what the browser reported: "order ID EMAIL SEATS", "held LINK EMAIL SEATS" */
struct bought {
	char id[64], email[128];
	int seats;
};

static int setup(void **state)
{
	static const char *const vars[] = {
		"STAGEDOOR_FAILPOINTS", "STAGEDOOR_CONFIG", "STAGEDOOR_HTTP_LISTEN", "STAGEDOOR_DB",
		"STAGEDOOR_STATE_DIR", "STAGEDOOR_TIMEZONE", "STAGEDOOR_LOCALE", "STAGEDOOR_WORKERS",
		"STAGEDOOR_MAIL_URL", "STAGEDOOR_SHOP_LISTEN", "STAGEDOOR_SHOP_URL",
		"STAGEDOOR_PAYMENT_PROVIDER", "STAGEDOOR_STRIPE_API_URL", "STAGEDOOR_SHOP_RATE",
	};
	size_t i;

	for (i = 0; i < sizeof vars / sizeof vars[0]; i++)
		unsetenv(vars[i]);
	setenv("STAGEDOOR_LOG_LEVEL", "info", 1);
	return tu_setup_real_nodb(state);
}

static int teardown(void **state)
{
	unsetenv("STAGEDOOR_LOG_LEVEL");
	unsetenv("STAGEDOOR_CONFIG");
	return tu_teardown(state);
}

/* the file at path, or "(none)"; the caller frees. */
static char *text_of(const char *path)
{
	size_t size;

	if (access(path, F_OK) != 0)
		return strdup("(none)");
	return (char *)tu_slurp(path, &size);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	if (!f)
		fail_msg("cannot write %s: %s", path, strerror(errno));
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
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

/* name is an executable file in a folder of $PATH */
static int on_path(const char *name)
{
	const char *path = getenv("PATH");
	char *copy, *dir, *save = NULL, file[4096];
	int found = 0;

	copy = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	assert_non_null(copy);
	for (dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
		snprintf(file, sizeof file, "%s/%s", dir, name);
		found = access(file, X_OK) == 0;
	}
	free(copy);
	return found;
}

/* What the test needs beside the box; missing: the test fails saying how
 * to install it (never a silent skip). */
static void need_browser(void)
{
	const char *chromium = getenv("CHROMIUM") && *getenv("CHROMIUM") ? getenv("CHROMIUM")
									 : CHROMIUM;

	if (access(NODE_MODULES, F_OK) != 0)
		fail_msg("%s is missing (cwd must be the repository root): run `make deps` "
			 "(npm ci in tests/browser) first", NODE_MODULES);
	if (!on_path("node"))
		fail_msg("node is not on PATH: `make deps` installs it (apt-get install nodejs)");
	if (access(chromium, X_OK) != 0)
		fail_msg("%s is missing: `make deps` installs it (apt-get install chromium)",
			 chromium);
}

/* node: run `node argv...` with its output in log_path; its exit status,
 * or -1 when it died by a signal.  Killed (and the test failed) past
 * timeout_ms. */
static int node(const char *const *argv, const char *log_path, int timeout_ms)
{
	pid_t pid;
	int st = 0, waited;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		setenv("SHOP_TIMEOUT_MS", BROWSER_STEP_MS, 1);
		execvp("node", (char *const *)argv);
		fprintf(stderr, "exec node: %s\n", strerror(errno));
		_exit(127);
	}
	for (waited = 0; waited < timeout_ms; waited += 100) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		tu_sleep_ms(100);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	{
		char *text = text_of(log_path);
		tu_fail_free(text, NULL, "node %s ran past %d ms:\n%s", argv[1], timeout_ms, text);
	}
	return -1;
}

static void copy_file(const char *from, const char *to)
{
	size_t size = 0;
	unsigned char *data = tu_slurp(from, &size);
	FILE *f = fopen(to, "wb");

	if (!f)
		tu_fail_free(data, NULL, "cannot write %s: %s", to, strerror(errno));
	assert_int_equal(fwrite(data, 1, size, f), size);
	assert_int_equal(fclose(f), 0);
	free(data);
}

/* kept_as: where keep_shot keeps name: OUT_DIR/name with -san (ASan) or -pg
 * (on PostgreSQL) before the ".png" */
static void kept_as(const char *name, char *keep, size_t size)
{
	size_t n = strlen(name) - 4;
	const char *tag = strstr(tu_bin(), "/san/") ? "-san" : tu_pg() ? "-pg" : "";

	snprintf(keep, size, "%s/%.*s%s.png", OUT_DIR, (int)n, name, tag);
}

/* keep_shot: the PNG at path kept as test output (kept_as) */
static void keep_shot(const char *path, const char *name)
{
	char keep[200];
	size_t size = 0;
	unsigned char *png = tu_slurp(path, &size);

	if (size < 8 || memcmp(png, "\x89PNG\r\n\x1a\n", 8) != 0)
		tu_fail_free(png, NULL, "%s is no PNG (%zu bytes)", path, size);
	free(png);
	if (mkdir("build", 0755) != 0 && errno != EEXIST)
		fail_msg("mkdir build: %s", strerror(errno));
	if (mkdir(OUT_DIR, 0755) != 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", OUT_DIR, strerror(errno));
	kept_as(name, keep, sizeof keep);
	copy_file(path, keep);
}

/* the browser's report: its "order" lines into orders (2), its "held" line
 * into held; its "note:" lines printed into this test's log */
static void read_report(const char *log_path, struct bought *orders, int *n_orders,
			struct bought *held)
{
	char *text = text_of(log_path), *line, *save = NULL;

	*n_orders = 0;
	memset(held, 0, sizeof *held);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct bought b = { 0 };

		if (strncmp(line, "note: ", 6) == 0)
			print_message("# shop.mjs %s\n", line);
		else if (sscanf(line, "order %63s %127s %d", b.id, b.email, &b.seats) == 3 &&
			 *n_orders < 2)
			orders[(*n_orders)++] = b;
		else if (sscanf(line, "held %63s %127s %d", b.id, b.email, &b.seats) == 3)
			*held = b;
	}
	free(text);
}

/* ---- paysink's record ---------------------------------------------------------- */

struct body {
	char *p;
	size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	char *q = realloc(b->p, b->len + size * n + 1);

	if (!q)
		return 0;
	memcpy(q + b->len, p, size * n);
	b->p = q;
	b->len += size * n;
	b->p[b->len] = '\0';
	return size * n;
}

/* GET /_paysink/record, parsed */
static json_t *record(int ps_port)
{
	char url[96];
	struct body b = { NULL, 0 };
	long status = 0;
	CURL *c = curl_easy_init();
	json_t *j;

	assert_non_null(c);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/_paysink/record", ps_port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
	if (curl_easy_perform(c) != CURLE_OK) {
		curl_easy_cleanup(c);
		free(b.p);
		fail_msg("GET %s: no answer", url);
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	j = b.p ? json_loads(b.p, 0, NULL) : NULL;
	if (status != 200 || !j)
		tu_fail_free(b.p, NULL, "GET %s: %ld, not a record", url, status);
	free(b.p);
	return j;
}

/* the record's session for the buyer's email (exactly one) */
static json_t *session_of(json_t *rec, const char *email)
{
	json_t *s, *found = NULL;
	size_t i;
	int n = 0;

	json_array_foreach(json_object_get(rec, "sessions"), i, s) {
		const char *e = json_string_value(json_object_get(s, "customer_email"));

		if (e && strcmp(e, email) == 0) {
			found = s;
			n++;
		}
	}
	if (n != 1)
		fail_msg("paysink's record has %d sessions for %s, not 1", n, email);
	return found;
}

static const char *str_of(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : "";
}

/* ---- the test ----------------------------------------------------------------- */

static void test_buy_on_a_phone(void **state)
{
	const struct tu_env *e = *state;
	char conf[512], key[512], whsec[512], rec_path[512], port_file[512], pslog[512], log[512];
	char nlog[512], prefix[512], hook[96], url[64], text[4096], path[300];
	struct bought orders[2], held;
	int shop_port, ps_port = 0, n_orders = 0, waited, i, rc;
	pid_t ps, run;
	json_t *rec;
	FILE *f;

	need_browser();
	snprintf(conf, sizeof conf, "%s/stagedoor.conf", e->dir);
	snprintf(key, sizeof key, "%s/stripe.key", e->dir);
	snprintf(whsec, sizeof whsec, "%s/stripe.whsec", e->dir);
	snprintf(rec_path, sizeof rec_path, "%s/paysink.json", e->dir);
	snprintf(port_file, sizeof port_file, "%s/paysink.port", e->dir);
	snprintf(pslog, sizeof pslog, "%s/paysink.log", e->dir);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	snprintf(nlog, sizeof nlog, "%s/browser.log", e->dir);
	snprintf(prefix, sizeof prefix, "%s/shop-phone", e->dir);

	/* the provider's key and the webhook's secret, the user's alone */
	write_file(key, KEY "\n", 0600);
	write_file(whsec, SECRET "\n", 0600);

	/* paysink first, its webhook aimed at the port the shop will take */
	shop_port = free_port();
	snprintf(hook, sizeof hook, "http://127.0.0.1:%d/stripe/webhook", shop_port);
	ps = tu_spawn((const char *const[]){ "paysink", "--listen", "127.0.0.1:0",
					     "--api-key-file", key, "--webhook-secret-file", whsec,
					     "--webhook-url", hook, "--record", rec_path,
					     "--port-file", port_file, NULL }, pslog);
	for (waited = 0; waited < START_MS && !ps_port; waited += 20) {
		if ((f = fopen(port_file, "r"))) {
			if (fscanf(f, "%d", &ps_port) != 1)
				ps_port = 0;
			fclose(f);
		}
		if (!ps_port)
			tu_sleep_ms(20);
	}
	if (!ps_port) {
		char *t = text_of(pslog);
		tu_fail_free(t, NULL, "paysink did not start (make build/paysink):\n%s", t);
	}

	/* the box: a Berlin venue selling in de-DE, one worker, the shop */
	snprintf(text, sizeof text,
		 "db = %s\nstate_dir = %s\nhttp_listen = off\nworkers = 1\n"
		 "locale = de-DE\ntimezone = Europe/Berlin\n"
		 "shop_listen = 127.0.0.1:%d\nshop_name = Test Hall\n"
		 "payment_provider = stripe\nstripe_api_url = http://127.0.0.1:%d\n"
		 "stripe_key_file = %s\nstripe_webhook_secret_file = %s\n",
		 e->db_path, e->dir, shop_port, ps_port, key, whsec);
	write_file(conf, text, 0600);
	setenv("STAGEDOOR_CONFIG", conf, 1);	/* for the commands below */
	if (tu_run(NULL, 0, text, sizeof text, (const char *const[]){ "init", NULL }) != 0)
		fail_msg("init: %s", text);
	if (tu_run(NULL, 0, text, sizeof text,
		   (const char *const[]){ "event", "add", "--name", "Late Show", "--venue",
					  "Main Hall", "--starts-at", "2036-05-01 20:00",
					  "--capacity", "20", "--price", "25.00", "--currency",
					  "EUR", NULL }) != 0)
		fail_msg("event add: %s", text);
	run = tu_spawn((const char *const[]){ "run", "--config", conf, NULL }, log);
	tu_wait_log(log, "msg=\"shop listening\"", 1, START_MS);
	tu_wait_log(log, "msg=\"run ready\"", 1, START_MS);
	snprintf(text, sizeof text, "url=http://127.0.0.1:%d ", shop_port);
	if (tu_count_in(log, text) != 1) {
		char *t = text_of(log);
		tu_fail_free(t, NULL, "the shop does not listen on port %d:\n%s", shop_port, t);
	}

	/* the buyers, in the browser; an earlier run's screenshots gone first */
	for (i = 0; i < SHOTS_N; i++) {
		char name[64], keep[200];

		snprintf(name, sizeof name, "shop-phone-%s.png", SHOTS[i]);
		kept_as(name, keep, sizeof keep);
		if (unlink(keep) != 0 && errno != ENOENT)
			fail_msg("rm %s: %s", keep, strerror(errno));
	}
	snprintf(url, sizeof url, "http://127.0.0.1:%d/", shop_port);
	rc = node((const char *const[]){ "node", SCRIPT, url, prefix, NULL }, nlog, BROWSER_MS);
	/* the screenshots it took, kept as test output (a failed run's too) */
	for (i = 0; i < SHOTS_N; i++) {
		char from[600], name[64];

		snprintf(from, sizeof from, "%s-%s.png", prefix, SHOTS[i]);
		snprintf(name, sizeof name, "shop-phone-%s.png", SHOTS[i]);
		if (access(from, F_OK) == 0)
			keep_shot(from, name);
		else if (rc == 0)
			fail_msg("shop.mjs passed but took no %s", from);
	}
	if (rc != 0) {
		char *t = text_of(nlog), *rlog = text_of(log), *plog = text_of(pslog);

		print_message("--- paysink.log:\n%s\n", plog);
		free(plog);
		tu_fail_free(t, rlog, "node %s exited %d:\n%s\n--- run.log:\n%s", SCRIPT, rc, t,
			     rlog);
	}
	read_report(nlog, orders, &n_orders, &held);
	if (n_orders != 2 || !held.id[0]) {
		char *t = text_of(nlog);
		tu_fail_free(t, NULL, "shop.mjs reported %d orders and %s held checkout:\n%s",
			     n_orders, held.id[0] ? "a" : "no", t);
	}
	assert_string_equal(orders[0].email, PHONE_EMAIL);
	assert_string_equal(orders[1].email, NOJS_EMAIL);
	assert_string_equal(held.email, HELD_EMAIL);
	assert_string_not_equal(orders[0].id, orders[1].id);

	/* the box: two online orders, the ones the pages showed, each paid
	 * 2 x 25.00 EUR with its provider's payment; their holds ordered */
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM orders"), 2);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM orders WHERE payment = "
				  "'online' AND payment_ref IS NOT NULL AND amount_minor = 5000 "
				  "AND currency = 'EUR' AND seats = 2"), 2);
	for (i = 0; i < 2; i++) {
		if (tu_countf(e->db_path, "SELECT count(*) FROM orders WHERE public_id = '%s' AND "
			      "buyer_email = '%s' AND payment = 'online' AND amount_minor = 5000 "
			      "AND payment_ref LIKE 'pi_%%' AND seats = %d", orders[i].id,
			      orders[i].email, orders[i].seats) != 1)
			fail_msg("no online order %s for %s of %d seats paid 5000 with a payment "
				 "reference", orders[i].id, orders[i].email, orders[i].seats);
		assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM holds h JOIN orders o "
					   "ON o.id = h.order_id WHERE o.public_id = '%s' AND "
					   "h.state = 'ordered' AND h.payment_ref = o.payment_ref AND "
					   "h.buyer_email = o.buyer_email AND h.amount_minor = 5000",
					   orders[i].id), 1);
		assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM tickets t JOIN orders o "
					   "ON o.id = t.order_id WHERE o.public_id = '%s'",
					   orders[i].id), 2);
	}
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM holds WHERE state = "
				  "'ordered'"), 2);
	/* the checkout left unpaid still holds its seat; the refused form made
	 * no hold at all */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM holds WHERE link = '%s' AND "
				   "state = 'open' AND order_id IS NULL AND buyer_email = '%s' AND "
				   "seats = 1", held.id, HELD_EMAIL), 1);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM holds"), 3);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM holds WHERE buyer_email = '"
				  REFUSED_EMAIL "'"), 0);

	/* the worker renders and sends: one ticket email per order, to its
	 * buyer, naming the order, its PDF attached */
	snprintf(path, sizeof path, "%s/maildir/new", e->dir);
	for (waited = 0; waited < MAIL_MS && tu_count_files(path) < 2; waited += 100)
		tu_sleep_ms(100);
	if (tu_count_files(path) != 2) {
		char *rlog = text_of(log);
		tu_fail_free(rlog, NULL, "%d emails in %s after %d ms, not 2:\n--- run.log:\n%s",
			     tu_count_files(path), path, waited, rlog);
	}
	for (i = 0; i < 2; i++) {
		char file[512], want[200];
		char *mail;
		size_t size;

		snprintf(file, sizeof file, "%s/tickets-%.63s.eml", path, orders[i].id);
		if (access(file, F_OK) != 0)
			fail_msg("no ticket email %s for order %s", file, orders[i].id);
		mail = (char *)tu_slurp(file, &size);
		snprintf(want, sizeof want, "<%.127s>\r\n", orders[i].email);
		if (!strstr(mail, want) || !strstr(mail, "\r\nSubject: Your tickets for Late Show") ||
		    !strstr(mail, "Content-Type: application/pdf"))
			tu_fail_free(mail, NULL, "the email for %s:\n%.1500s", orders[i].id, mail);
		snprintf(want, sizeof want, "Order %.63s", orders[i].id);
		if (!strstr(mail, want))
			tu_fail_free(mail, NULL, "the email names no \"%s\":\n%.1500s", want, mail);
		free(mail);
	}

	/* the provider: the two sessions paid once each, for the payments the
	 * orders carry; the unpaid one open, uncharged */
	rec = record(ps_port);
	for (i = 0; i < 2; i++) {
		json_t *s = session_of(rec, orders[i].email);

		if (strcmp(str_of(s, "status"), "complete") != 0 ||
		    json_integer_value(json_object_get(s, "charges")) != 1 ||
		    json_integer_value(json_object_get(s, "amount_total")) != 5000 ||
		    strcmp(str_of(s, "currency"), "eur") != 0) {
			char *dump = json_dumps(s, JSON_COMPACT);

			json_decref(rec);
			tu_fail_free(dump, NULL, "paysink's session for %s: %s", orders[i].email,
				     dump);
		}
		assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM orders WHERE public_id "
					   "= '%s' AND payment_ref = '%s'", orders[i].id,
					   str_of(s, "payment_intent")), 1);
		assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM holds WHERE public_id "
					   "= '%s' AND session_id = '%s' AND state = 'ordered'",
					   str_of(s, "client_reference_id"), str_of(s, "id")), 1);
	}
	{
		json_t *s = session_of(rec, HELD_EMAIL);

		assert_string_equal(str_of(s, "status"), "open");
		assert_int_equal(json_integer_value(json_object_get(s, "charges")), 0);
	}
	assert_int_equal(json_array_size(json_object_get(rec, "sessions")), 3);
	json_decref(rec);

	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 60000, "run"), 0);
	kill(ps, SIGTERM);
	assert_int_equal(tu_reap(ps, 10000, "paysink"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_buy_on_a_phone, setup, teardown),
	};

	curl_global_init(CURL_GLOBAL_DEFAULT);
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
