/*
 * shop.h: the public shop, a listener of its own (`stagedoor shop`, a child
 * of `run` when shop_listen is set), for buyers on the internet.  It never
 * serves the staff API, the dashboard or the door page: its routes are
 *
 *   GET  /                      the events on sale (priced, open for sales)
 *   GET  /e/{id}                an event: when, where, price, seats left, the form
 *   POST /e/{id}/checkout       seats, name, email: a hold, then the provider's
 *                               payment page (303 to it)
 *   GET  /h/{hold}              the buyer's checkout by its unguessable link:
 *                               the countdown and the payment, or the order
 *   POST /h/{hold}/pay          the payment page again (the same session)
 *   POST /h/{hold}/renew        the hold's time again, while renewals last
 *   POST /stripe/webhook        the provider's calls (shop_hook.c)
 *   GET  /shop.js, /shop.css    the page's script and style
 *   GET  /healthz               "ok": for the reverse proxy
 *
 * What it promises a stranger's requests: every form carries a CSRF token
 * (a cookie and a field that must match, besides the server's Origin
 * check); holds are capped per client address and per client network
 * (holds.h), never per email, and their making is rate-limited per client
 * address (429 with Retry-After); every input passes text.c and the
 * intake's rules; the client address is the peer's, or, from a trusted
 * reverse proxy only, the last address of X-Forwarded-For (an IPv6 client
 * counts by its /64, its network by the /56).  A free event (price 0) sells
 * without the provider: its checkout makes the order at once.
 */
#ifndef SD_SHOP_H
#define SD_SHOP_H

#include <stdint.h>

#include "holds.h"
#include "result.h"
#include "stripe.h"

struct shop_opts {
	const char *db_path;
	const char *state_dir;		/* where the ticket key is (code.h); NULL: beside db_path */
	const char *listen;		/* "127.0.0.1:8081" */
	const char *url;		/* as buyers reach it; NULL: http://<listen> */
	const char *name;		/* shop_name */
	const char *tls_cert, *tls_key;	/* NULL: plain HTTP (loopback only) */
	const char *trusted_proxies;	/* by commas; NULL: none */
	int per_client_max;		/* open connections per client address; 0: default */
	struct hold_rules holds;
	int64_t rate_per_min;		/* checkouts a minute per client; 0: no limit */
	int stripe_on;			/* payment_provider = stripe */
	const char *payment_methods;	/* shop_payment_methods: "card,link"; NULL: the
					 * Stripe account's own */
	struct stripe_config stripe;
	const char *webhook_secret_file;	/* NULL: the credential */
};

struct shop;

/* shop_start: open the database, read the provider's key and secrets,
 * listen.  [out] *out (shop_stop). */
enum sd_result shop_start(const struct shop_opts *o, struct shop **out);

/* shop_port: the port it listens on. */
int shop_port(const struct shop *s);

/* shop_stop: finish the requests in progress, close; accepts NULL. */
void shop_stop(struct shop *s);

#endif
