/*
 * bench_hoard.c: `stagedoor-bench hoard`, the hoarding attack on the shop:
 * a stranger with a few addresses checks out as many seats as the box lets
 * them hold without paying, and a buyer comes after them.  Run against
 * this tree's box and, with --before, an older release's side by side, so
 * that the same attack measures a change of the shop's caps.
 *
 *   stagedoor-bench hoard [--before DIR] [--rounds R] [--seats N] [--attackers A]
 *                         [--seconds S] [--probe-s P] [--stagedoor PATH] [--paysink PATH]
 *                         [--json] [--keep]
 *
 * Each box is its binaries run as processes, nothing of this tree in them:
 * `stagedoor init` and `stagedoor event add` (one event of N seats,
 * --seats, 300, at 25.00 EUR), tools/paysink as its payment provider and
 * `stagedoor shop` on a loopback port, its settings by the environment
 * (the caps and limits at their defaults, shop_trusted_proxies 127.0.0.1);
 * --before DIR takes DIR/bin/stagedoor and DIR/build/paysink for the older
 * box.  A fresh box for every attack, in three ways:
 *
 *   ipv4        A attackers (--attackers, 8) from real source addresses
 *               127.0.0.2, 127.0.0.3, ... (Linux routes all of 127/8 to lo;
 *               each client socket is bound to its address): no proxy,
 *               nothing to trust;
 *   ipv6-56s    A attackers as one /64 in each of A /56s
 *               (2001:db8:0:100::1, 2001:db8:0:200::1, ...), named by
 *               X-Forwarded-For from the trusted proxy 127.0.0.1 (the box
 *               listens on 127.0.0.1: a /64 of its own would need routes
 *               this bench does not make);
 *   ipv6-one56  the same with A /64s of one /56 (one home line's).
 *
 * Each attacker, on a keep-alive connection of its own, loads the event's
 * page once (the form's token) and then for S seconds (--seconds, 1) posts
 * checkouts of 10 seats back to back, a new name and email each (the older
 * box capped holds per email too); each answer counted: a hold (303 to
 * paysink), a place in line (303 to /w/), refused (429: a cap or the rate
 * of checkouts), sold out (409).  Then, from the box's database (read only,
 * with SQLite itself: the box's schema is its release's), the seats in open
 * holds that have not run out, and the present places in line.  "Took": from
 * the attack's start to the answer of the last hold it got.
 *
 * Then a buyer (from the next address, one seat) checks out while the
 * attackers keep their places in line alive (each page looked at every
 * LINE_REFRESH_S, as their browsers would): a hold at once, sold out, or a
 * place in line, looked at every LINE_REFRESH_S for P seconds (--probe-s,
 * 20; 0: no buyer) to see whether its turn comes.
 *
 * Rounds (--rounds, 3) alternate which box goes first; the medians are
 * printed, each run's figures in --json lines.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "bench.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "args.h"
#include "bench_shopbox.h"
#include "clock.h"
#include "holds.h"
#include "line.h"

#define HH_ROUNDS_DEFAULT 3
#define HH_ROUNDS_MAX 9
#define HH_SEATS_DEFAULT 300
#define HH_ATTACKERS_DEFAULT 8
#define HH_ATTACKERS_MAX 64
#define HH_SECONDS_DEFAULT 1
#define HH_PROBE_S_DEFAULT 20
#define HH_CHECKOUT_SEATS 10		/* what each attacker's checkout asks for */
#define HH_PLACES_MAX 64		/* an attacker's places kept alive */
#define HH_RUN_MS 30000			/* the longest a command of the box may take */

enum hh_way { HH_IPV4, HH_V6_56S, HH_V6_ONE56, HH_WAYS };
static const char *const hh_way_name[HH_WAYS] = { "ipv4", "ipv6-56s", "ipv6-one56" };

enum hh_buyer { HH_BUYER_NONE, HH_BUYER_HOLD, HH_BUYER_LINE_HOLD, HH_BUYER_WAITING,
		HH_BUYER_SOLD_OUT, HH_BUYER_REFUSED, HH_BUYER_OTHER };
static const char *const hh_buyer_name[] = { "none", "hold", "hold-after-line", "waiting",
					     "sold-out", "refused", "other" };

struct hh_args {
	int64_t rounds, seats, attackers, seconds, probe_s;
	const char *before, *stagedoor, *paysink;
	char stagedoor_buf[PATH_MAX], paysink_buf[PATH_MAX];
	char old_stagedoor[PATH_MAX + 16], old_paysink[PATH_MAX + 16];
};

/* What one attack on one box got. */
struct hh_result {
	int64_t holds, places, refused, sold_out, other;	/* the answers */
	int64_t db_holds, db_seats, db_places;		/* open and live, present */
	double took_ms;				/* the attack's start to its last hold */
	enum hh_buyer buyer;
	int64_t buyer_ahead;			/* in line: places before it, last seen */
	double buyer_ms;			/* to its hold, or waited in vain */
	int64_t granted_later;			/* attackers' places granted meanwhile */
};

/* A box under attack: its processes and where they listen. */
struct hh_box {
	const char *stagedoor, *paysink;
	char dir[PATH_MAX], path[PATH_MAX + 32];
	int64_t event_id;
	int port, ps_port;
	struct bench_child paysink_c, shop_c;
};

/* ======================== a box of any release =========================== */

/* `stagedoor args...` run to its end, its output into log; 0 when it
 * exited 0 */
static enum sd_result hh_command(struct hh_box *b, const char *const *argv, const char *log)
{
	char *env[] = { "STAGEDOOR_CONFIG=/dev/null", NULL };
	struct bench_child c = { 0 };
	char **all = bench_child_env(env), why[300];
	enum sd_result r;
	int st = 0, waited;

	if (!all)
		return err_set(SD_NOMEM, "out of memory");
	snprintf(c.log, sizeof c.log, "%s", log);
	c.what = argv[1];
	r = bench_child_spawn(&c, argv, all, -1);
	free(all);
	if (r != SD_OK)
		return r;
	for (waited = 0; waitpid(c.pid, &st, WNOHANG) != c.pid; waited += 10) {
		if (waited > HH_RUN_MS) {
			bench_child_stop(&c);
			return err_set(SD_TIMEOUT, "%s %s took over %d s", b->stagedoor, argv[1],
				       HH_RUN_MS / 1000);
		}
		usleep(10000);
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return SD_OK;
	bench_child_log_tail(log, why, sizeof why);
	return err_set(SD_IO, "%s %s failed: %s", b->stagedoor, argv[1], why);
}

/* the database, its event of seats, the provider's key and secret */
static enum sd_result hh_box_make(struct hh_box *b, int64_t seats)
{
	char log[PATH_MAX + 32], cap[24], when[32], f[PATH_MAX + 32];
	const char *init[] = { b->stagedoor, "init", "--db", b->path, NULL };
	const char *ev[] = { b->stagedoor, "event", "add", "--db", b->path, "--name",
			     "Stagedoor Hoard Night", "--venue", "Salle des Fêtes", "--starts-at",
			     when, "--capacity", cap, "--price", "25.00", "--currency", "EUR", NULL };
	time_t t = time(NULL) + 30 * 86400;
	struct tm tm;
	FILE *out;
	enum sd_result r;

	gmtime_r(&t, &tm);
	strftime(when, sizeof when, "%Y-%m-%d 20:00", &tm);
	snprintf(cap, sizeof cap, "%lld", (long long)seats);
	snprintf(log, sizeof log, "%s/init.log", b->dir);
	if ((r = hh_command(b, init, log)) != SD_OK)
		return r;
	snprintf(log, sizeof log, "%s/event.log", b->dir);
	if ((r = hh_command(b, ev, log)) != SD_OK)
		return r;
	/* event add prints the event's id */
	if (!(out = fopen(log, "r")) || fscanf(out, "%lld", (long long *)&b->event_id) != 1 ||
	    b->event_id < 1) {
		if (out)
			fclose(out);
		return err_set(SD_IO, "%s event add printed no event id (%s)", b->stagedoor, log);
	}
	fclose(out);
	snprintf(f, sizeof f, "%s/stripe.key", b->dir);
	if ((r = bench_write_secret(f, BENCH_SHOP_KEY "\n")) != SD_OK)
		return r;
	snprintf(f, sizeof f, "%s/stripe.whsec", b->dir);
	return bench_write_secret(f, BENCH_SHOP_SECRET "\n");
}

/* paysink and `stagedoor shop` for b */
static enum sd_result hh_box_start(struct hh_box *b, int64_t seats)
{
	char db[PATH_MAX + 48], listen[64], api[64], key[PATH_MAX + 48], sec[PATH_MAX + 64];
	char rec[PATH_MAX + 32];
	char *env[] = { "STAGEDOOR_CONFIG=/dev/null", db, listen, "STAGEDOOR_PAYMENT_PROVIDER=stripe",
			api, key, sec, "STAGEDOOR_SHOP_TRUSTED_PROXIES=127.0.0.1", NULL };
	const char *argv[] = { b->stagedoor, "shop", NULL };
	enum sd_result r;

	if ((r = hh_box_make(b, seats)) != SD_OK)
		return r;
	if (!(b->port = bench_free_port()))
		return err_set(SD_IO, "no free loopback port");
	snprintf(rec, sizeof rec, "%s/paysink.json", b->dir);
	if ((r = bench_paysink_start(b->paysink, b->dir, "hoard", rec, b->port, BENCH_SHOP_KEY,
				     BENCH_SHOP_SECRET, NULL, &b->paysink_c, &b->ps_port)) != SD_OK)
		return r;
	snprintf(db, sizeof db, "STAGEDOOR_DB=%s", b->path);
	snprintf(listen, sizeof listen, "STAGEDOOR_SHOP_LISTEN=127.0.0.1:%d", b->port);
	snprintf(api, sizeof api, "STAGEDOOR_STRIPE_API_URL=http://127.0.0.1:%d", b->ps_port);
	snprintf(key, sizeof key, "STAGEDOOR_STRIPE_KEY_FILE=%s/stripe.key", b->dir);
	snprintf(sec, sizeof sec, "STAGEDOOR_STRIPE_WEBHOOK_SECRET_FILE=%s/stripe.whsec", b->dir);
	snprintf(b->shop_c.log, sizeof b->shop_c.log, "%s/shop.log", b->dir);
	b->shop_c.what = "shop";
	return bench_stagedoor_start(argv, env, &b->shop_c);
}

static void hh_box_stop(struct hh_box *b)
{
	bench_child_stop(&b->shop_c);
	bench_child_stop(&b->paysink_c);
}

/* what the box's database holds for its event now: seats in open holds
 * that have not run out, and present places in line (none before the line
 * came); read with SQLite alone, read only, so that no migration of this
 * tree's touches an older release's file */
static enum sd_result hh_held(const struct hh_box *b, struct hh_result *res)
{
	static const char q_holds[] = "SELECT count(*), coalesce(sum(seats), 0) FROM holds "
		"WHERE event_id = ?1 AND state = 'open' AND expires_at > ?2";
	static const char q_line[] = "SELECT count(*) FROM shop_line WHERE event_id = ?1 "
		"AND left_at IS NULL AND present_until > ?2";
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t now = clock_now_ms();
	int rc;

	if ((rc = sqlite3_open_v2(b->path, &db, SQLITE_OPEN_READONLY, NULL)) != SQLITE_OK)
		goto fail;
	sqlite3_busy_timeout(db, 5000);
	if ((rc = sqlite3_prepare_v2(db, q_holds, -1, &st, NULL)) != SQLITE_OK)
		goto fail;
	sqlite3_bind_int64(st, 1, b->event_id);
	sqlite3_bind_int64(st, 2, now);
	if ((rc = sqlite3_step(st)) != SQLITE_ROW)
		goto fail;
	res->db_holds = sqlite3_column_int64(st, 0);
	res->db_seats = sqlite3_column_int64(st, 1);
	sqlite3_finalize(st);
	st = NULL;
	res->db_places = 0;
	/* an older release has no line: no such table */
	if (sqlite3_prepare_v2(db, q_line, -1, &st, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, b->event_id);
		sqlite3_bind_int64(st, 2, now);
		if ((rc = sqlite3_step(st)) != SQLITE_ROW)
			goto fail;
		res->db_places = sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return SD_OK;
fail:
	err_set(SD_DB, "%s: %s", b->path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
	sqlite3_finalize(st);
	sqlite3_close(db);
	return SD_DB;
}

/* ======================== the attack ===================================== */

/* The attack on one box, shared by its attackers and the buyer. */
struct hh_attack {
	const struct hh_args *a;
	const struct hh_box *box;
	enum hh_way way;
	int64_t t0, t_end;		/* mono us: the attack's window */
	atomic_int over;		/* attackers done attacking */
	atomic_int probe_done;
	atomic_llong granted_later;
	struct bench_failure fail;
};

struct hh_attacker {
	pthread_t th;
	int started;
	struct hh_attack *at;
	int idx;
	struct bench_http c;
	char xff[48];			/* "": its own source address */
	int64_t holds, places, refused, sold_out, other, last_hold_us;
	char link[HH_PLACES_MAX][LINE_LINK_LEN + 1];
	int64_t due[HH_PLACES_MAX];
	int n_links;
};

/* client i's address (i = attackers: the buyer's): c bound to a source of
 * its own, or xff its X-Forwarded-For through the proxy */
static void hh_address(struct hh_attack *at, int i, struct bench_http *c, char *xff, size_t size)
{
	char from[16];
	int buyer = i == (int)at->a->attackers;

	bench_http_init(c, at->box->port);
	xff[0] = '\0';
	if (at->way == HH_IPV4) {
		snprintf(from, sizeof from, "127.0.0.%d", (2 + i) & 255);
		bench_http_from(c, from);
	} else if (buyer) {
		snprintf(xff, size, "2001:db8:1:100::1");	/* a /56 of its own */
	} else if (at->way == HH_V6_56S) {
		snprintf(xff, size, "2001:db8:0:%x00::1", i + 1);
	} else {
		snprintf(xff, size, "2001:db8:0:1%02x::1", i);
	}
}

/* what a checkout's answer was: [out] *place (303 to /w/: its link) */
enum hh_got { HH_GOT_HOLD, HH_GOT_PLACE, HH_GOT_REFUSED, HH_GOT_SOLD_OUT, HH_GOT_OTHER };

static enum hh_got hh_got(const struct hh_box *b, int status, const char *loc, char *link)
{
	char pay[64], line[64];

	snprintf(pay, sizeof pay, "http://127.0.0.1:%d/pay/", b->ps_port);
	snprintf(line, sizeof line, "http://127.0.0.1:%d/w/", b->port);
	if (status == 303 && strncmp(loc, pay, strlen(pay)) == 0)
		return HH_GOT_HOLD;
	if (status == 303 && strncmp(loc, line, strlen(line)) == 0 &&
	    strlen(loc + strlen(line)) == LINE_LINK_LEN) {
		snprintf(link, LINE_LINK_LEN + 1, "%s", loc + strlen(line));
		return HH_GOT_PLACE;
	}
	return status == 429 ? HH_GOT_REFUSED : status == 409 ? HH_GOT_SOLD_OUT : HH_GOT_OTHER;
}

/* a place's page looked at, as its browser does: 1 its hold came (303 to
 * paysink), 0 still waiting ([out] *ahead), -1 anything else */
static int hh_look(struct bench_http *c, const struct hh_box *b, const char *link,
		   const char *xff, int64_t *ahead)
{
	char req[256], fwd[80] = "", loc[HOLD_URL_MAX], dummy[LINE_LINK_LEN + 1];
	const char *body, *p;
	size_t len;
	int status;

	if (xff[0])
		snprintf(fwd, sizeof fwd, "X-Forwarded-For: %s\r\n", xff);
	snprintf(req, sizeof req, "GET /w/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sAccept: "
		 "text/html\r\n\r\n", link, b->port, fwd);
	if (bench_http_call(c, req, strlen(req), &status, &body, &len) != 0) {
		bench_http_close(c);	/* dialled again next time */
		return -1;
	}
	if (status == 303) {
		bench_http_header(c, "Location", loc, sizeof loc);
		return hh_got(b, status, loc, dummy) == HH_GOT_HOLD ? 1 : -1;
	}
	if (status != 200 || !(p = strstr(body, "data-ahead=\"")))
		return -1;
	*ahead = atoll(p + strlen("data-ahead=\""));
	return 0;
}

/* one checkout of the attacker's, counted */
static void hh_strike(struct hh_attacker *m, const char *tok, int64_t n)
{
	struct hh_attack *at = m->at;
	char fields[200], loc[HOLD_URL_MAX], link[LINE_LINK_LEN + 1];
	int status;

	snprintf(fields, sizeof fields, "seats=%d&name=Hoarder+%d+%lld&email=hoard%d-%lld%%40"
		 "example.com", HH_CHECKOUT_SEATS, m->idx, (long long)n, m->idx, (long long)n);
	if (bench_buyer_checkout(&m->c, at->box->port, at->box->event_id, m->xff[0] ? m->xff : NULL,
				 tok, fields, &status, loc, sizeof loc) != 0) {
		m->other++;
		bench_http_close(&m->c);
		return;
	}
	switch (hh_got(at->box, status, loc, link)) {
	case HH_GOT_HOLD:
		m->holds++;
		m->last_hold_us = clock_mono_us() - at->t0;
		break;
	case HH_GOT_PLACE:
		m->places++;
		if (m->n_links < HH_PLACES_MAX) {
			snprintf(m->link[m->n_links], sizeof m->link[0], "%s", link);
			m->due[m->n_links++] = clock_mono_us() + LINE_REFRESH_S * 1000000LL;
		}
		break;
	case HH_GOT_REFUSED:
		m->refused++;
		break;
	case HH_GOT_SOLD_OUT:
		m->sold_out++;
		break;
	default:
		m->other++;
	}
}

/* the attacker's places kept in line: each page looked at when due */
static void hh_keep_places(struct hh_attacker *m)
{
	struct hh_attack *at = m->at;
	int64_t ahead;
	int i, got;

	while (!atomic_load(&at->probe_done) && !atomic_load(&at->fail.failed)) {
		for (i = 0; i < m->n_links; i++) {
			if (clock_mono_us() < m->due[i])
				continue;
			got = hh_look(&m->c, at->box, m->link[i], m->xff, &ahead);
			if (got == 0) {
				m->due[i] = clock_mono_us() + LINE_REFRESH_S * 1000000LL;
				continue;
			}
			if (got == 1)
				atomic_fetch_add(&at->granted_later, 1);
			m->link[i][0] = '\0';
			m->due[i] = INT64_MAX;
		}
		usleep(50000);
	}
}

static void *hh_attacker_main(void *arg)
{
	struct hh_attacker *m = arg;
	struct hh_attack *at = m->at;
	char tok[BENCH_SHOP_TOKEN_LEN + 1];
	int64_t n = 0, now;

	if (bench_buyer_token(&m->c, at->box->port, at->box->event_id, m->xff[0] ? m->xff : NULL,
			      tok) != 0) {
		bench_fail(&at->fail, "attacker %d: %s", m->idx, m->c.err);
		atomic_fetch_add(&at->over, 1);
		return NULL;
	}
	while ((now = clock_mono_us()) < at->t0)
		usleep((useconds_t)(at->t0 - now));
	while (clock_mono_us() < at->t_end && !atomic_load(&at->fail.failed))
		hh_strike(m, tok, n++);
	atomic_fetch_add(&at->over, 1);
	hh_keep_places(m);
	return NULL;
}

/* the buyer after the attack: one seat; a place in line is looked at every
 * LINE_REFRESH_S until its hold comes or --probe-s ran out */
static enum sd_result hh_buyer(struct hh_attack *at, struct hh_result *res)
{
	const struct hh_box *b = at->box;
	struct bench_http c;
	char xff[48], tok[BENCH_SHOP_TOKEN_LEN + 1], loc[HOLD_URL_MAX], link[LINE_LINK_LEN + 1];
	int64_t t0 = clock_mono_us(), end = t0 + at->a->probe_s * 1000000;
	int status, got;
	enum sd_result r = SD_OK;

	hh_address(at, (int)at->a->attackers, &c, xff, sizeof xff);
	if (bench_buyer_token(&c, b->port, b->event_id, xff[0] ? xff : NULL, tok) != 0) {
		/* no form: every seat sold or held ("Sold out for now") */
		if (c.buf && strstr(c.buf, "class=\"soldout\""))
			res->buyer = HH_BUYER_SOLD_OUT;
		else
			r = err_set(SD_IO, "the buyer: %s", c.err);
		goto out;
	}
	if (bench_buyer_checkout(&c, b->port, b->event_id, xff[0] ? xff : NULL, tok,
				 "seats=1&name=Real+Buyer&email=buyer%40example.com", &status, loc,
				 sizeof loc) != 0) {
		r = err_set(SD_IO, "the buyer: %s", c.err);
		goto out;
	}
	switch (hh_got(b, status, loc, link)) {
	case HH_GOT_HOLD:
		res->buyer = HH_BUYER_HOLD;
		break;
	case HH_GOT_PLACE:
		res->buyer = HH_BUYER_WAITING;
		while (clock_mono_us() + LINE_REFRESH_S * 1000000LL <= end) {
			usleep(LINE_REFRESH_S * 1000000);
			if ((got = hh_look(&c, b, link, xff, &res->buyer_ahead)) != 0) {
				res->buyer = got == 1 ? HH_BUYER_LINE_HOLD : HH_BUYER_OTHER;
				break;
			}
		}
		break;
	case HH_GOT_SOLD_OUT:
		res->buyer = HH_BUYER_SOLD_OUT;
		break;
	case HH_GOT_REFUSED:
		res->buyer = HH_BUYER_REFUSED;
		break;
	default:
		res->buyer = HH_BUYER_OTHER;
	}
out:
	res->buyer_ms = (double)(clock_mono_us() - t0) / 1000.0;
	bench_http_close(&c);
	return r;
}

/* the attackers' answers, summed into res */
static void hh_sum(const struct hh_attacker *m, int n, struct hh_result *res)
{
	int i;

	for (i = 0; i < n; i++) {
		res->holds += m[i].holds;
		res->places += m[i].places;
		res->refused += m[i].refused;
		res->sold_out += m[i].sold_out;
		res->other += m[i].other;
		if ((double)m[i].last_hold_us / 1000.0 > res->took_ms)
			res->took_ms = (double)m[i].last_hold_us / 1000.0;
	}
}

/* the attack on box b the way way: [out] *res */
static enum sd_result hh_attack_run(const struct hh_args *a, struct hh_box *b, enum hh_way way,
				    struct hh_result *res)
{
	struct hh_attacker *m = calloc((size_t)a->attackers, sizeof *m);
	struct hh_attack at;
	enum sd_result r = SD_OK;
	int i, n = (int)a->attackers;

	if (!m)
		return err_set(SD_NOMEM, "out of memory");
	memset(&at, 0, sizeof at);
	memset(res, 0, sizeof *res);
	pthread_mutex_init(&at.fail.mu, NULL);
	at.a = a;
	at.box = b;
	at.way = way;
	at.t0 = clock_mono_us() + 300000;	/* every attacker has its form by then */
	at.t_end = at.t0 + a->seconds * 1000000;
	for (i = 0; i < n; i++) {
		m[i].at = &at;
		m[i].idx = i;
		hh_address(&at, i, &m[i].c, m[i].xff, sizeof m[i].xff);
		if (pthread_create(&m[i].th, NULL, hh_attacker_main, &m[i]) != 0) {
			r = err_set(SD_IO, "cannot start an attacker's thread");
			bench_fail(&at.fail, "%s", err_msg());
			break;
		}
		m[i].started = 1;
	}
	while (r == SD_OK && atomic_load(&at.over) < n)
		usleep(10000);
	if (r == SD_OK && atomic_load(&at.fail.failed))
		r = err_set(SD_IO, "%s", at.fail.err);
	if (r == SD_OK && (r = hh_held(b, res)) == SD_OK && a->probe_s > 0)
		r = hh_buyer(&at, res);
	atomic_store(&at.probe_done, 1);
	for (i = 0; i < n; i++) {
		if (m[i].started)
			pthread_join(m[i].th, NULL);
		bench_http_close(&m[i].c);
	}
	hh_sum(m, n, res);
	res->granted_later = atomic_load(&at.granted_later);
	free(m);
	pthread_mutex_destroy(&at.fail.mu);
	return r;
}

/* ======================== the rounds ===================================== */

#define HH_BOXES 2			/* this tree's, and --before's */
static const char *const hh_box_name[HH_BOXES] = { "this", "before" };

struct hh_ctx {
	struct hh_args a;
	struct hh_result r[HH_BOXES][HH_WAYS][HH_ROUNDS_MAX];
	int boxes;
};

/* one attack on a fresh box of box k's binaries in parent */
static enum sd_result hh_one(struct hh_ctx *x, const char *parent, int k, enum hh_way way,
			     int round)
{
	struct hh_result *res = &x->r[k][way][round];
	struct hh_box b;
	enum sd_result r;

	memset(&b, 0, sizeof b);
	b.stagedoor = k ? x->a.old_stagedoor : x->a.stagedoor;
	b.paysink = k ? x->a.old_paysink : x->a.paysink;
	snprintf(b.dir, sizeof b.dir, "%s/%s-%s-r%d", parent, hh_box_name[k], hh_way_name[way],
		 round + 1);
	snprintf(b.path, sizeof b.path, "%s/stagedoor.db", b.dir);
	if (mkdir(b.dir, 0700) != 0)
		return err_set(SD_IO, "cannot make %s: %s", b.dir, strerror(errno));
	if ((r = hh_box_start(&b, x->a.seats)) == SD_OK)
		r = hh_attack_run(&x->a, &b, way, res);
	hh_box_stop(&b);
	if (r != SD_OK)
		return r;
	bench_progress("round %d, %s, %s box: %lld seats held (%lld holds), %lld places in line, "
		       "%lld refused, %lld sold out; the last hold after %.0f ms; the buyer: %s%s",
		       round + 1, hh_way_name[way], hh_box_name[k], (long long)res->db_seats,
		       (long long)res->db_holds, (long long)res->db_places, (long long)res->refused,
		       (long long)res->sold_out, res->took_ms, hh_buyer_name[res->buyer],
		       res->buyer == HH_BUYER_WAITING ? " (still in line)" : "");
	return SD_OK;
}

static enum sd_result hh_go(const char *dir, const char *path, void *arg)
{
	struct hh_ctx *x = arg;
	enum sd_result r;
	int round, way, i, k;

	(void)path;
	for (round = 0; round < x->a.rounds; round++)
		for (way = 0; way < HH_WAYS; way++)
			for (i = 0; i < x->boxes; i++) {
				/* the boxes alternate, round by round */
				k = x->boxes == 1 ? 0 : (i + round) % 2;
				if ((r = hh_one(x, dir, k, (enum hh_way)way, round)) != SD_OK)
					return r;
			}
	return SD_OK;
}

/* ======================== the report ===================================== */

static int hh_cmp(const void *p, const void *q)
{
	double a = *(const double *)p, b = *(const double *)q;

	return (a > b) - (a < b);
}

/* the median over the rounds of the field at off of box k's results */
static double hh_median(const struct hh_ctx *x, int k, int way, size_t off, int is_int)
{
	double v[HH_ROUNDS_MAX];
	int i, n = (int)x->a.rounds;

	for (i = 0; i < n; i++) {
		const char *p = (const char *)&x->r[k][way][i] + off;

		v[i] = is_int ? (double)*(const int64_t *)p : *(const double *)p;
	}
	qsort(v, (size_t)n, sizeof v[0], hh_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define HH_MED_I(x, k, w, f) hh_median(x, k, w, offsetof(struct hh_result, f), 1)
#define HH_MED_D(x, k, w, f) hh_median(x, k, w, offsetof(struct hh_result, f), 0)

/* the buyer's outcome each round, by commas, into out */
static void hh_buyers(const struct hh_ctx *x, int k, int way, char *out, size_t size)
{
	size_t n = 0;
	int i;

	out[0] = '\0';
	for (i = 0; i < x->a.rounds && n < size; i++)
		n += (size_t)snprintf(out + n, size - n, "%s%s", i ? "," : "",
				      hh_buyer_name[x->r[k][way][i].buyer]);
}

static void hh_print_json(const struct hh_ctx *x)
{
	char buyers[256];
	int k, w;

	printf("{\"program\":\"stagedoor\",\"bench\":\"hoard\",\"rounds\":%lld,\"seats\":%lld,"
	       "\"attackers\":%lld,\"seconds\":%lld,\"probe_s\":%lld,\"checkout_seats\":%d",
	       (long long)x->a.rounds, (long long)x->a.seats, (long long)x->a.attackers,
	       (long long)x->a.seconds, (long long)x->a.probe_s, HH_CHECKOUT_SEATS);
	for (k = 0; k < x->boxes; k++) {
		printf(",\"%s\":{\"stagedoor\":\"%s\"", hh_box_name[k],
		       k ? x->a.old_stagedoor : x->a.stagedoor);
		for (w = 0; w < HH_WAYS; w++) {
			hh_buyers(x, k, w, buyers, sizeof buyers);
			printf(",\"%s\":{\"held_seats\":%.0f,\"holds\":%.0f,\"places\":%.0f,"
			       "\"refused\":%.0f,\"sold_out\":%.0f,\"other\":%.0f,\"took_ms\":%.1f,"
			       "\"buyer\":\"%s\","
			       "\"buyer_ahead\":%.0f,\"granted_later\":%.0f}", hh_way_name[w],
			       HH_MED_I(x, k, w, db_seats), HH_MED_I(x, k, w, db_holds),
			       HH_MED_I(x, k, w, db_places), HH_MED_I(x, k, w, refused),
			       HH_MED_I(x, k, w, sold_out), HH_MED_I(x, k, w, other),
			       HH_MED_D(x, k, w, took_ms), buyers,
			       HH_MED_I(x, k, w, buyer_ahead), HH_MED_I(x, k, w, granted_later));
		}
		printf("}");
	}
	printf("}\n");
}

static void hh_print(const struct hh_ctx *x)
{
	char buyers[256];
	int k, w;

	printf("stagedoor-bench hoard: %lld attackers, checkouts of %d seats for %lld s, an event "
	       "of %lld seats; medians of %lld rounds, a fresh box each attack\n",
	       (long long)x->a.attackers, HH_CHECKOUT_SEATS, (long long)x->a.seconds,
	       (long long)x->a.seats, (long long)x->a.rounds);
	printf("  %-7s %-11s %6s %6s %7s %8s %9s %6s %9s  %s\n", "box", "attackers", "held", "holds",
	       "places", "refused", "sold out", "other", "took ms",
	       "the buyer after them (each round)");
	for (w = 0; w < HH_WAYS; w++)
		for (k = 0; k < x->boxes; k++) {
			hh_buyers(x, k, w, buyers, sizeof buyers);
			printf("  %-7s %-11s %6.0f %6.0f %7.0f %8.0f %9.0f %6.0f %9.1f  %s\n",
			       hh_box_name[k], hh_way_name[w], HH_MED_I(x, k, w, db_seats),
			       HH_MED_I(x, k, w, db_holds), HH_MED_I(x, k, w, db_places),
			       HH_MED_I(x, k, w, refused), HH_MED_I(x, k, w, sold_out),
			       HH_MED_I(x, k, w, other), HH_MED_D(x, k, w, took_ms), buyers);
		}
	printf("  held: seats in open holds that have not run out, from the box's database; "
	       "took: the attack's start to its last hold\n");
	for (k = 0; k < x->boxes; k++)
		printf("  %s: %s\n", hh_box_name[k], k ? x->a.old_stagedoor : x->a.stagedoor);
	printf("summary: hoard ipv4:");
	for (k = 0; k < x->boxes; k++)
		printf("%s %s box %.0f of %lld seats held in %.0f ms", k ? ";" : "", hh_box_name[k],
		       HH_MED_I(x, k, HH_IPV4, db_seats), (long long)x->a.seats,
		       HH_MED_D(x, k, HH_IPV4, took_ms));
	printf("\n");
}

/* ======================== the command ==================================== */

int bench_hoard_cmd(int argc, char **argv)
{
	static struct hh_ctx x;
	struct hh_args *a = &x.a;
	int json = 0, keep = 0, rc;
	struct arg_opt opts[] = {
		{ "before", ARG_STR, &a->before, 0, 0, 0, "DIR",
		  "an older release's tree (DIR/bin/stagedoor, DIR/build/paysink), attacked side "
		  "by side", 0 },
		{ "rounds", ARG_INT, &a->rounds, 1, HH_ROUNDS_MAX, 0, NULL,
		  "rounds, the boxes alternating; the median is reported (3)", 0 },
		{ "seats", ARG_INT, &a->seats, 10, 1000000, 0, NULL, "the event's seats (300)", 0 },
		{ "attackers", ARG_INT, &a->attackers, 1, HH_ATTACKERS_MAX, 0, NULL,
		  "the attacker's addresses (8)", 0 },
		{ "seconds", ARG_INT, &a->seconds, 1, 600, 0, NULL,
		  "how long they check out (1)", 0 },
		{ "probe-s", ARG_INT, &a->probe_s, 0, 3600, 0, NULL,
		  "how long the buyer after them waits in line for its turn (20; 0: no buyer)", 0 },
		{ "stagedoor", ARG_STR, &a->stagedoor, 0, 0, 0, "PATH",
		  "this box's binary (default: ../bin/stagedoor from this program)", 0 },
		BENCH_ARG_PAYSINK(&a->paysink),
		BENCH_ARG_KEEP(&keep),
		ARG_JSON(&json),
		ARG_END,
	};
	static const char usage[] =
		"hoard [--before DIR] [--rounds R] [--seats N] [--attackers A] [--seconds S] "
		"[--probe-s P] [--stagedoor PATH] [--paysink PATH] [--json] [--keep]";

	a->rounds = HH_ROUNDS_DEFAULT;
	a->seats = HH_SEATS_DEFAULT;
	a->attackers = HH_ATTACKERS_DEFAULT;
	a->seconds = HH_SECONDS_DEFAULT;
	a->probe_s = HH_PROBE_S_DEFAULT;
	if ((rc = bench_args(argc, argv, opts, usage)) != 0)
		return rc;
	x.boxes = a->before ? 2 : 1;
	snprintf(a->old_stagedoor, sizeof a->old_stagedoor, "%s/bin/stagedoor",
		 a->before ? a->before : "");
	snprintf(a->old_paysink, sizeof a->old_paysink, "%s/build/paysink",
		 a->before ? a->before : "");
	if (bench_default(&a->stagedoor, "../bin/stagedoor", a->stagedoor_buf,
			  sizeof a->stagedoor_buf) != 0 ||
	    bench_default(&a->paysink, "paysink", a->paysink_buf, sizeof a->paysink_buf) != 0 ||
	    (a->before && (access(a->old_stagedoor, X_OK) != 0 ||
			   access(a->old_paysink, X_OK) != 0))) {
		fprintf(stderr, "stagedoor-bench: hoard needs %s and %s (make bin/stagedoor "
			"build/paysink)%s%s%s%s\n", a->stagedoor, a->paysink, a->before ? ", " : "",
			a->before ? a->old_stagedoor : "", a->before ? " and " : "",
			a->before ? a->old_paysink : "");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if ((rc = bench_in_dir(keep, hh_go, &x)) != 0)
		return rc;
	if (json)
		hh_print_json(&x);
	else
		hh_print(&x);
	return 0;
}
