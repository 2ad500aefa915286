/*
 * bench_shopbox.c: the shop's benchmarks' fresh box (bench_shopbox.h).
 */
#define _GNU_SOURCE
#include "bench_shopbox.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "db.h"
#include "event_edit.h"
#include "events.h"
#include "shop.h"
#include "statedir.h"
#include "stripe.h"

/* `stagedoor <role>` on b's database, paying at b's paysink, until stopped */
static enum sd_result box_process(const struct bench_shopbox_opts *o, struct bench_shopbox *b,
				  const char *role, struct bench_child *c)
{
	char db[PATH_MAX + 16], api[64], key[PATH_MAX + 32];
	char *env[] = { "STAGEDOOR_CONFIG=/dev/null", db, "STAGEDOOR_PAYMENT_PROVIDER=stripe", api,
			key, NULL };
	const char *argv[] = { o->stagedoor, role, NULL };

	snprintf(db, sizeof db, "STAGEDOOR_DB=%s", b->path);
	snprintf(api, sizeof api, "STAGEDOOR_STRIPE_API_URL=http://127.0.0.1:%d", b->ps_port);
	snprintf(key, sizeof key, "STAGEDOOR_STRIPE_KEY_FILE=%s/stripe.key", b->dir);
	snprintf(c->log, sizeof c->log, "%s/%s.log", b->dir, role);
	c->what = role;
	return bench_stagedoor_start(argv, env, c);
}

/* the shop in this process, on b's port, paying at b's paysink */
static enum sd_result box_shop(const struct bench_shopbox_opts *o, struct bench_shopbox *b,
			       const char *keyf, const char *secf)
{
	char listen[64], api[64];
	struct stripe_config sc = { 0 };
	struct shop_opts so = { 0 };
	enum sd_result r;

	snprintf(api, sizeof api, "http://127.0.0.1:%d", b->ps_port);
	sc.api_url = api;
	sc.key_file = keyf;
	snprintf(listen, sizeof listen, "127.0.0.1:%d", b->shop_port);
	so.db_path = b->path;
	so.listen = listen;
	so.name = "Stagedoor Bench Hall";
	so.trusted_proxies = "127.0.0.1";
	so.per_client_max = o->per_client_max;
	so.holds = o->rules;
	so.rate_per_min = 0;
	so.stripe_on = 1;
	so.stripe = sc;
	so.webhook_secret_file = secf;
	if ((r = shop_start(&so, &b->shop)) != SD_OK)
		return r;
	return stripe_open(&sc, &b->stripe);
}

enum sd_result bench_shopbox_start(const char *parent, const char *tag,
				   const struct bench_shopbox_opts *o, struct bench_shopbox *b)
{
	char keyf[PATH_MAX + 16], secf[PATH_MAX + 16];
	struct event_new ev = { "Stagedoor Shop Night", "Théâtre du Parc", 0, 0, 0, "" };
	enum sd_result r;

	memset(b, 0, sizeof *b);
	snprintf(b->dir, sizeof b->dir, "%s/%s", parent, tag);
	snprintf(b->path, sizeof b->path, "%s/stagedoor.db", b->dir);
	if (mkdir(b->dir, 0700) != 0)
		return err_set(SD_IO, "cannot make %s: %s", b->dir, strerror(errno));
	snprintf(keyf, sizeof keyf, "%s/stripe.key", b->dir);
	snprintf(secf, sizeof secf, "%s/stripe.whsec", b->dir);
	if ((r = db_open(b->path, DB_OPEN_CREATE, DB_SYNC_FULL, &b->db)) != SD_OK ||
	    (r = statedir_init(b->path, NULL)) != SD_OK ||
	    (r = bench_write_secret(keyf, BENCH_SHOP_KEY "\n")) != SD_OK ||
	    (r = bench_write_secret(secf, BENCH_SHOP_SECRET "\n")) != SD_OK)
		return r;
	ev.starts_at = (clock_now_ms() / 86400000 + 30) * 86400000 + 20 * 3600000;
	ev.capacity = o->capacity < 1000000 ? o->capacity : 1000000;
	if ((r = event_price_parse("25.00", "EUR", &ev.price_minor, ev.currency)) != SD_OK ||
	    (r = event_add(b->db, &ev, &b->event_id)) != SD_OK)
		return r;
	if (!(b->shop_port = bench_free_port()))
		return err_set(SD_IO, "no free loopback port");
	b->outside = o->paysink_dir != NULL;
	snprintf(b->record, sizeof b->record, "%s/paysink-%s-%d.json",
		 o->paysink_dir ? o->paysink_dir : b->dir, tag, (int)getpid());
	if ((r = bench_paysink_start(o->paysink, b->dir, tag, b->record, b->shop_port,
				     BENCH_SHOP_KEY, BENCH_SHOP_SECRET, o->paysink_more, &b->paysink,
				     &b->ps_port)) != SD_OK)
		return r;
	if (o->stagedoor && ((r = box_process(o, b, "relay", &b->relay)) != SD_OK ||
			     (r = box_process(o, b, "worker", &b->worker)) != SD_OK))
		return r;
	return box_shop(o, b, keyf, secf);
}

void bench_shopbox_stop(struct bench_shopbox *b)
{
	shop_stop(b->shop);
	b->shop = NULL;
	bench_child_stop(&b->worker);
	bench_child_stop(&b->relay);
	bench_child_stop(&b->paysink);
	if (b->outside && b->record[0]) {
		char tmp[PATH_MAX + 80];

		snprintf(tmp, sizeof tmp, "%s.tmp", b->record);
		unlink(b->record);
		unlink(tmp);
	}
	stripe_close(b->stripe);
	b->stripe = NULL;
	db_close(b->db);
	b->db = NULL;
}

/* ======================== a buyer ======================================== */

/* the X-Forwarded-For line for xff ("" for none), into out */
static void xff_line(const char *xff, char *out, size_t size)
{
	if (xff)
		snprintf(out, size, "X-Forwarded-For: %s\r\n", xff);
	else
		out[0] = '\0';
}

int bench_buyer_token(struct bench_http *c, int port, int64_t event, const char *xff, char *tok)
{
	char req[512], fwd[96];
	const char *body, *v;
	size_t len;
	int status;

	xff_line(xff, fwd, sizeof fwd);
	snprintf(req, sizeof req, "GET /e/%lld HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s"
		 "Accept: text/html\r\n\r\n", (long long)event, port, fwd);
	if (bench_http_call(c, req, strlen(req), &status, &body, &len) != 0)
		return -1;
	if (status != 200 || !(v = strstr(body, "name=\"csrf\" value=\"")) ||
	    strspn(v + 19, "abcdefghijklmnopqrstuvwxyz234567") != BENCH_SHOP_TOKEN_LEN) {
		snprintf(c->err, sizeof c->err, "GET /e/%lld answered %d without a form token: "
			 "%.200s", (long long)event, status, body);
		return -1;
	}
	snprintf(tok, BENCH_SHOP_TOKEN_LEN + 1, "%s", v + 19);
	return 0;
}

int bench_buyer_checkout(struct bench_http *c, int port, int64_t event, const char *xff,
			 const char *tok, const char *fields, int *status, char *loc, size_t size)
{
	char req[2048], form[1024], fwd[96];
	const char *body;
	size_t len;
	int n;

	xff_line(xff, fwd, sizeof fwd);
	n = snprintf(form, sizeof form, "csrf=%s&%s", tok, fields);
	snprintf(req, sizeof req, "POST /e/%lld/checkout HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s"
		 "Cookie: sd_csrf=%s\r\nContent-Type: application/x-www-form-urlencoded\r\n"
		 "Content-Length: %d\r\n\r\n%s", (long long)event, port, fwd, tok, n, form);
	if (bench_http_call(c, req, strlen(req), status, &body, &len) != 0)
		return -1;
	bench_http_header(c, "Location", loc, size);
	return 0;
}
