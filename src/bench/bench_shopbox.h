/*
 * bench_shopbox.h: a fresh box for the shop's benchmarks (bench shop, bench
 * line): a database as `init` makes one, one priced event, tools/paysink
 * as the payment provider on a loopback port, the shop listening in this
 * process (shop_start, as `stagedoor shop` starts it) behind its trusted
 * proxy 127.0.0.1, and on request `stagedoor relay` and `stagedoor worker`
 * as processes of their own; and a buyer's two requests of a checkout,
 * to this shop or a box's of another release.  One place, so that the
 * benchmarks measure one and the same shop.
 */
#ifndef SD_BENCH_SHOPBOX_H
#define SD_BENCH_SHOPBOX_H

#include <limits.h>
#include <stdint.h>

#include "bench_child.h"
#include "bench_http.h"
#include "holds.h"
#include "result.h"

#define BENCH_SHOP_KEY "sk_test_stagedoor_bench"
#define BENCH_SHOP_SECRET "whsec_stagedoor_bench"

struct db;
struct shop;
struct stripe;

struct bench_shopbox_opts {
	const char *paysink;		/* tools/paysink's binary */
	const char *paysink_dir;	/* its record's folder; NULL: the box's */
	const char *const *paysink_more;	/* more of its options, NULL-ended; may be NULL */
	const char *stagedoor;		/* the box's binary for its relay and worker;
					 * NULL: neither runs */
	struct hold_rules rules;	/* the shop's */
	int64_t capacity;		/* the event's seats (at most 1,000,000) */
	int per_client_max;		/* connections from one address (all come
					 * through the proxy, 127.0.0.1) */
};

struct bench_shopbox {
	char dir[1100], path[1200];
	struct db *db;			/* this thread's, FULL */
	int64_t event_id;
	int shop_port, ps_port;
	struct shop *shop;
	struct stripe *stripe;		/* the bench's own client, as the shop's */
	struct bench_child paysink, relay, worker;
	char record[PATH_MAX + 64];	/* paysink's */
	int outside;			/* record outside the box's folder: removed at the end */
};

/* bench_shopbox_start: a fresh box in parent/tag as o says; [out] *b,
 * zeroed first (bench_shopbox_stop it whatever this returns). */
enum sd_result bench_shopbox_start(const char *parent, const char *tag,
				   const struct bench_shopbox_opts *o, struct bench_shopbox *b);

/* bench_shopbox_stop: the shop, the processes, paysink's record when it was
 * kept elsewhere, the connections. */
void bench_shopbox_stop(struct bench_shopbox *b);

#define BENCH_SHOP_TOKEN_LEN 26		/* the form's token, as its cookie's */

/*
 * bench_buyer_token: a buyer's GET /e/{event} on c, to the shop at port,
 * with xff as its X-Forwarded-For (NULL: none): [out] tok, the form's token
 * (BENCH_SHOP_TOKEN_LEN + 1 bytes), which its cookie holds too.  0, or -1
 * with c->err.
 */
int bench_buyer_token(struct bench_http *c, int port, int64_t event, const char *xff, char *tok);

/*
 * bench_buyer_checkout: the buyer's POST /e/{event}/checkout on c with the
 * form token tok and fields ("seats=1&name=...&email=...", encoded): [out]
 * *status, and loc its Location ("" when none; size bytes).  0, or -1 with
 * c->err.
 */
int bench_buyer_checkout(struct bench_http *c, int port, int64_t event, const char *xff,
			 const char *tok, const char *fields, int *status, char *loc, size_t size);

#endif
