/*
 * shop.c: the public shop (shop.h): its listener, its routes, the buyer's
 * address, the forms' tokens and limits.  The pages are shop_html.c's; the
 * webhook, shop_hook.c's; holds, payments and orders, the domain's.
 */
#define _GNU_SOURCE
#include "shop.h"

#include <arpa/inet.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "api.h"
#include "clock.h"
#include "code.h"
#include "db.h"
#include "event_edit.h"
#include "events.h"
#include "http.h"
#include "httpc.h"
#include "lang.h"
#include "line.h"
#include "log.h"
#include "money.h"
#include "payments.h"
#include "ratelimit.h"
#include "refund_link.h"
#include "shop_hook.h"
#include "shop_html.h"
#include "shop_pay.h"
#include "text.h"

#define POOL_MAX 8
/* A checkout waits on the provider (Stripe: a few hundred ms) on one of the
 * server's threads, and the connections that thread serves wait with it:
 * more threads than the API's keep a slow provider from stalling the pages. */
#define SHOP_THREADS 32
#define PROXIES_MAX 16
#define EVENTS_SHOWN 200		/* the list shows at most this many */
#define CSRF_LEN 26
#define LOOKUP_PER_MIN 30		/* a hold's provider look-ups on return */
/* a place's page comes back every LINE_REFRESH_S (12 a minute): a client
 * may look at a few places, and no faster */
#define LINE_LOOKS_PER_MIN 60
#define LINE_LOOKS_BURST 20
#define HTML "text/html; charset=utf-8"

/* A buyer's address as the caps count it, and its network (client_of) */
struct who {
	char client[INET6_ADDRSTRLEN + 8];
	char net[INET6_ADDRSTRLEN + 8];
};

struct shop {
	struct http_server *http;
	char db_path[PATH_MAX];
	char url[1024];			/* the public base, no trailing '/' */
	char origin[512];		/* its scheme://host[:port] */
	char csp[512];
	char name[TEXT_FIELD_MAX + 1];
	int secure;			/* the public base is https */
	struct hold_rules holds;
	struct rate *rate;		/* checkouts, per client */
	struct rate *lookups;		/* provider look-ups, per hold */
	struct rate *looks;		/* places' pages, per client: each a transaction */
	struct stripe *stripe;		/* NULL: the shop takes no payments */
	char methods[256];		/* shop_payment_methods, "" for the account's */
	char *secrets[STRIPE_SECRETS_MAX];
	int n_secrets;
	unsigned char key[CODE_KEY_LEN];	/* the ticket key: signs refund links */
	char proxies[PROXIES_MAX][INET6_ADDRSTRLEN];
	int n_proxies;
	pthread_mutex_t mu;		/* guards idle[] */
	struct db *idle[POOL_MAX];
	int n_idle;
};

/* ======================== the pool ======================================= */

static struct db *pool_get(struct shop *s)
{
	struct db *db = NULL;

	pthread_mutex_lock(&s->mu);
	if (s->n_idle)
		db = s->idle[--s->n_idle];
	pthread_mutex_unlock(&s->mu);
	if (!db && db_open(s->db_path, 0, DB_SYNC_FULL, &db) != SD_OK) {
		log_event(LOG_WARN, "shop: database out of reach", "err=\"%s\"", err_msg());
		return NULL;
	}
	return db;
}

static void pool_put(struct shop *s, struct db *db)
{
	if (!db)
		return;
	if (db_in_tx(db))
		db_rollback(db);
	pthread_mutex_lock(&s->mu);
	if (s->n_idle < POOL_MAX) {
		s->idle[s->n_idle++] = db;
		db = NULL;
	}
	pthread_mutex_unlock(&s->mu);
	db_close(db);
}

/* ======================== the request's parts ============================ */

/* an address as the caps count it: IPv4 as it is, IPv6 by its /64 (a
 * device's or a home's), and its network: IPv4 the same, IPv6 by its /56
 * (what one home line gets: 256 /64s) */
static int client_key(const char *addr, char *out, char *net, size_t size)
{
	struct in6_addr a6;
	struct in_addr a4;

	if (inet_pton(AF_INET, addr, &a4) == 1) {
		inet_ntop(AF_INET, &a4, out, (socklen_t)size);
		snprintf(net, size, "%s", out);
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &a6) != 1)
		return -1;
	if (IN6_IS_ADDR_V4MAPPED(&a6)) {	/* ::ffff:a.b.c.d, as some proxies write */
		memcpy(&a4, a6.s6_addr + 12, 4);
		inet_ntop(AF_INET, &a4, out, (socklen_t)size);
		snprintf(net, size, "%s", out);
		return 0;
	}
	memset(a6.s6_addr + 8, 0, 8);
	inet_ntop(AF_INET6, &a6, out, (socklen_t)size);
	snprintf(out + strlen(out), size - strlen(out), "/64");
	a6.s6_addr[7] = 0;
	inet_ntop(AF_INET6, &a6, net, (socklen_t)size);
	snprintf(net + strlen(net), size - strlen(net), "/56");
	return 0;
}

/* the buyer's address: the peer's, or from a trusted proxy the last
 * address X-Forwarded-For names (the one that proxy added); [out] net its
 * network (size bytes each) */
static void client_of(const struct shop *s, const struct http_request *req, char *out,
		      char *net, size_t size)
{
	const char *xff = http_request_header(req, "X-Forwarded-For"), *last;
	char addr[INET6_ADDRSTRLEN + 1];
	int i, trusted = 0;

	for (i = 0; i < s->n_proxies && !trusted; i++)
		trusted = strcmp(s->proxies[i], req->client) == 0;
	if (trusted && xff && *xff) {
		last = strrchr(xff, ',');
		last = last ? last + 1 : xff;
		while (*last == ' ')
			last++;
		snprintf(addr, sizeof addr, "%.*s", (int)strcspn(last, " "), last);
		if (client_key(addr, out, net, size) == 0)
			return;
	}
	if (client_key(req->client, out, net, size) != 0) {
		snprintf(out, size, "%s", req->client[0] ? req->client : "unknown");
		snprintf(net, size, "%s", out);
	}
}

/* the form token from the request's cookie, "" when none */
static void csrf_cookie(const struct http_request *req, char *out)
{
	const char *c = http_request_header(req, "Cookie"), *p;
	size_t n;

	out[0] = '\0';
	for (p = c; p && (p = strstr(p, "sd_csrf=")); p += 8) {
		if (p != c && p[-1] != ' ' && p[-1] != ';')
			continue;
		n = strspn(p + 8, "abcdefghijklmnopqrstuvwxyz234567");
		if (n == CSRF_LEN) {
			memcpy(out, p + 8, CSRF_LEN);
			out[CSRF_LEN] = '\0';
		}
		return;
	}
}

/* the request's form token, made afresh (and set as a cookie) when it has
 * none */
static void csrf_token(const struct shop *s, const struct http_request *req,
		       struct http_response *res, char *tok)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
	unsigned char rnd[CSRF_LEN];
	int i;

	csrf_cookie(req, tok);
	if (tok[0])
		return;
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return;	/* no token: the form is refused, never guessable */
	for (i = 0; i < CSRF_LEN; i++)
		tok[i] = alphabet[rnd[i] & 31];
	tok[CSRF_LEN] = '\0';
	snprintf(res->set_cookie, sizeof res->set_cookie,
		 "sd_csrf=%s; Path=/; HttpOnly; SameSite=Lax%s", tok, s->secure ? "; Secure" : "");
}

/* a form's token matches its cookie's */
static int csrf_ok(const struct http_request *req)
{
	char cookie[CSRF_LEN + 1], field[64];

	csrf_cookie(req, cookie);
	return cookie[0] && api_query_get(req->body, "csrf", field, sizeof field) == 1 &&
	       strlen(field) == CSRF_LEN && code_ct_equal(cookie, field, CSRF_LEN);
}

/* ======================== answers ======================================== */

static void page_answer(const struct shop *s, struct http_response *res, int status,
			struct page *pg)
{
	if (pg->oom) {
		free(pg->p);
		pg->p = NULL;
		status = 500;
		pg->len = 0;
	}
	res->status = status;
	snprintf(res->content_type, sizeof res->content_type, HTML);
	snprintf(res->csp, sizeof res->csp, "%s", s->csp);
	res->body = pg->p;
	res->body_len = pg->len;
}

static void error_page(const struct shop *s, struct http_response *res, int status,
		       const char *what)
{
	struct page pg = { 0 };
	struct shop_look look = { s->name, "", 0 };

	shop_page_error(&pg, &look, status, what);
	page_answer(s, res, status, &pg);
}

static void redirect(struct http_response *res, const char *to)
{
	res->status = 303;
	snprintf(res->location, sizeof res->location, "%s", to);
}

/* ======================== the pages ====================================== */

struct listing {
	struct shop *s;
	struct db *db;
	struct event_view ev[EVENTS_SHOWN];
	int64_t left[EVENTS_SHOWN];
	int n;
	int64_t now;
};

static void list_one(const struct event_view *v, void *arg)
{
	struct listing *l = arg;

	if (l->n >= EVENTS_SHOWN || !v->currency[0] ||
	    event_sale_check(v->id, v->starts_at, v->closed_at, v->cancelled_at, l->now) != SD_OK)
		return;
	l->ev[l->n++] = *v;
}

/* seats free of tickets and of live holds; [out] *held (may be NULL) */
static int64_t seats_left(struct db *db, const struct event_view *e, int64_t now, int64_t *held)
{
	int64_t h = 0;

	if (holds_held(db, e->id, 0, now, &h) != SD_OK)
		h = 0;
	if (held)
		*held = h;
	return e->capacity - e->seats_sold - h > 0 ? e->capacity - e->seats_sold - h : 0;
}

static void list_page(struct shop *s, struct db *db, const struct http_request *req,
		      struct http_response *res)
{
	struct listing *l = calloc(1, sizeof *l);
	struct shop_look look = { s->name, "", 0 };
	struct page pg = { 0 };
	int i;

	(void)req;
	if (!l) {
		error_page(s, res, 503, "The shop is busy: try again in a moment.");
		return;
	}
	l->now = clock_now_ms();
	if (event_each_selling(db, l->now - event_rules_get()->sales_close_after_ms, EVENTS_SHOWN,
			       list_one, l) != SD_OK) {
		free(l);
		error_page(s, res, 503, "The shop is busy: try again in a moment.");
		return;
	}
	for (i = 0; i < l->n; i++)
		l->left[i] = seats_left(db, &l->ev[i], l->now, NULL);
	shop_page_list(&pg, &look, l->ev, l->left, l->n);
	free(l);
	page_answer(s, res, 200, &pg);
}

/* the event {id} names, on sale and priced; else the answer is in res */
static int event_of(struct shop *s, struct db *db, const char *id_text, struct event_view *e,
		    struct http_response *res)
{
	char *end;
	long long id = strtoll(id_text, &end, 10);

	if (id_text[0] < '1' || id_text[0] > '9' || (*end && *end != '/') ||
	    strlen(id_text) > 18 || event_get(db, id, e) != SD_OK || !e->currency[0]) {
		error_page(s, res, 404, NULL);
		return 0;
	}
	return 1;
}

static void event_page(struct shop *s, struct db *db, const struct event_view *e,
		       const struct http_request *req, struct http_response *res,
		       struct event_offer *o, int status)
{
	char tok[CSRF_LEN + 1];
	struct shop_look look = { s->name, tok, 0 };
	struct page pg = { 0 };
	int64_t now = clock_now_ms();

	csrf_token(s, req, res, tok);
	o->left = event_sale_check(e->id, e->starts_at, e->closed_at, e->cancelled_at, now) == SD_OK
		? seats_left(db, e, now, &o->held) : 0;
	if (line_waiting(db, e->id, now, &o->waiting) != SD_OK)
		o->waiting = 0;
	o->seats_max = s->holds.seats_max;
	o->selling = s->stripe != NULL || e->price_minor == 0;
	shop_page_event(&pg, &look, e, o);
	page_answer(s, res, status, &pg);
}

/* ======================== checkout ======================================= */

/* the provider's session for hold h (the same one however often asked:
 * every parameter is the hold's, its expiry too) */
static enum sd_result session_for(struct shop *s, struct db *db, struct hold_view *h,
				  const struct event_view *e)
{
	char item[TEXT_FIELD_MAX + LANG_TEXT_MAX + 8], when[LANG_TEXT_MAX];
	char ok[1200], back[1200];
	/* the venue's methods; else the account's, but instant ones only once
	 * the payments that take days took their share (fixed on the hold) */
	struct stripe_checkout c = { h->public_id, item, h->amount_minor / h->seats, h->seats,
				     h->currency, h->email, ok, back, h->pay_until / 1000,
				     s->methods[0] ? s->methods : h->instant_only ? "card" : NULL };
	struct stripe_session ss;
	enum sd_result r;

	if (h->pay_url[0])
		return SD_OK;
	lang_when(e->starts_at, when, sizeof when);
	snprintf(item, sizeof item, "%s, %s", e->name, when);
	snprintf(ok, sizeof ok, "%s/h/%s?paid=1", s->url, h->link);
	snprintf(back, sizeof back, "%s/h/%s", s->url, h->link);
	if ((r = stripe_checkout_create(s->stripe, &c, &ss)) != SD_OK)
		return r;
	/* the buyer is sent there: https (or a provider on this machine) only */
	if (!ss.url[0] || httpc_url_check(ss.url, NULL, 0) != SD_OK)
		return err_set(SD_IO, "the provider's session has no payment page the shop may "
			       "send a buyer to");
	if ((r = hold_set_session(db, h->id, ss.id, ss.url, h)) == SD_OK && !h->pay_url[0])
		r = err_set(SD_CONFLICT, "the hold ended while its session was made");
	return r;
}

/* the hold's page again, with a problem to say */
static void hold_page_with(struct shop *s, struct db *db, const struct http_request *req,
			   struct http_response *res, struct hold_view *h, const char *problem,
			   int status);

/* the form's fields into o (name and email: buffers of 801 and 512 bytes);
 * seats 0 when they are no number: digits only ("1e9" or "+1" is none) */
static void form_values(const struct http_request *req, struct event_offer *o, char *name,
			char *email)
{
	char seats[16];

	if (api_query_get(req->body, "name", name, TEXT_FIELD_MAX * 4 + 1) != 1)
		name[0] = '\0';
	if (api_query_get(req->body, "email", email, 512) != 1)
		email[0] = '\0';
	if (api_query_get(req->body, "seats", seats, sizeof seats) != 1 || !seats[0] ||
	    strspn(seats, "0123456789") != strlen(seats) || strlen(seats) > 3 ||
	    (o->seats = strtoll(seats, NULL, 10)) < 1)
		o->seats = 0;
	o->name = name;
	o->email = email;
}

/* a hold the provider refused for good: its seats free again at once */
static void hold_refused(struct db *db, const struct hold_view *h)
{
	enum sd_result r;
	int won = 0;

	if ((r = db_begin(db)) == SD_OK)
		r = db_end(db, hold_settle(db, h->id, HOLD_EXPIRED, NULL, NULL, &won));
	if (r != SD_OK)
		log_event(LOG_WARN, "refused hold not ended", "hold=%s err=\"%s\"", h->public_id,
			  err_msg());
}

/* the payment page for hold h (303), or the page that says why not */
static void to_payment(struct shop *s, struct db *db, const struct http_request *req,
		       struct http_response *res, struct hold_view *h, const struct event_view *e)
{
	char to[HTTP_LOCATION_MAX], why[320];
	enum pay_outcome out;
	enum sd_result r;

	if (!hold_live(h, clock_now_ms())) {	/* ended (an old page): its page says how */
		snprintf(to, sizeof to, "%s/h/%s", s->url, h->link);
		redirect(res, to);
		return;
	}
	if (h->amount_minor == 0) {	/* nothing to pay: the order at once */
		if (pay_free(db, h->id, &out, NULL) != SD_OK || hold_get_id(db, h->id, h) != SD_OK) {
			hold_page_with(s, db, req, res, h, "The box is busy: try again in a "
				       "moment.", 503);
			return;
		}
		snprintf(to, sizeof to, "%s/h/%s", s->url, h->link);
		redirect(res, to);
		return;
	}
	if ((r = session_for(s, db, h, e)) == SD_OK) {
		snprintf(to, sizeof to, "%s", h->pay_url);
		redirect(res, to);
		return;
	}
	log_event(LOG_WARN, "no payment session", "hold=%s err=\"%s\"", h->public_id, err_msg());
	if (r == SD_CONFLICT) {
		hold_page_with(s, db, req, res, h, NULL, 409);
		return;
	}
	if (r != SD_INVALID && r != SD_NOT_FOUND) {
		hold_page_with(s, db, req, res, h, "The payment service did not answer. Your seats "
			       "are held: try again in a moment.", 503);
		return;
	}
	/* refused for good: saying "try again" would not be true */
	hold_refused(db, h);
	hold_get_id(db, h->id, h);
	snprintf(why, sizeof why, "The payment service refused this payment, so your seats are "
		 "no longer held.  Please ask the box office.  (%.200s)", err_msg());
	hold_page_with(s, db, req, res, h, why, 502);
}

static void checkout(struct shop *s, struct db *db, const struct event_view *e,
		     const struct http_request *req, struct http_response *res,
		     const struct who *w)
{
	char name[TEXT_FIELD_MAX * 4 + 1], email[512], to[HTTP_LOCATION_MAX];
	struct event_offer o = { 0 };
	struct hold_new n = { e->id, 0, name, email, w->client, w->net };
	struct hold_view h;
	struct line_place p;
	enum line_got got;
	enum sd_result r;
	int64_t total = 0;

	form_values(req, &o, name, email);
	n.seats = o.seats;
	if (e->price_minor > 0 && (money_stripe_price_valid(e->currency, e->price_minor) != SD_OK ||
				   (n.seats >= 1 && n.seats <= s->holds.seats_max &&
				    (money_total(e->price_minor, n.seats, &total) != SD_OK ||
				     money_stripe_units(e->currency, total, &total) != SD_OK)))) {
		o.error = err_msg();	/* a price set before the provider was, or too many seats */
		event_page(s, db, e, req, res, &o, 409);
		return;
	}
	if ((r = line_checkout(db, &n, &s->holds, &got, &h, &p)) != SD_OK) {
		o.error = err_msg();
		event_page(s, db, e, req, res, &o,
				  r == SD_INVALID ? 422 : r == SD_LIMITED ? 429
				  : r == SD_SOLD_OUT || r == SD_CONFLICT ? 409 : 503);
		return;
	}
	if (got == LINE_GOT_PLACE) {	/* wait in line: its page takes it on */
		log_event(LOG_INFO, "place in line", "event=%lld seats=%lld ahead=%lld",
			  (long long)e->id, (long long)p.seats, (long long)p.ahead);
		snprintf(to, sizeof to, "%s/w/%s", s->url, p.link);
		redirect(res, to);
		return;
	}
	log_event(LOG_INFO, "hold made", "hold=%s event=%lld seats=%lld", h.public_id,
		  (long long)e->id, (long long)h.seats);
	to_payment(s, db, req, res, &h, e);
}

/* a place in line, as its page sees it: its number, or its hold's payment
 * once it is its turn */
static void line_route(struct shop *s, struct db *db, const struct http_request *req,
		       struct http_response *res, const char *link, const struct who *w)
{
	struct shop_look look = { s->name, "", 0 };
	struct line_place p;
	struct hold_view h;
	struct event_view e;
	struct page pg = { 0 };
	enum sd_result r;
	int64_t wait = 0;

	if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
		error_page(s, res, 405, "This address takes GET only.");
		return;
	}
	if (!rate_take(s->looks, w->client, clock_now_ms(), &wait)) {
		/* the page asks again by itself, as the line's page does: the
		 * place's lease outlives the wait */
		look.refresh_s = (int)((wait + 999) / 1000 < LINE_REFRESH_S ? LINE_REFRESH_S
					: (wait + 999) / 1000 < 15 ? (wait + 999) / 1000 : 15);
		snprintf(res->retry_after, sizeof res->retry_after, "%d", look.refresh_s);
		shop_page_error(&pg, &look, 429, "This page was asked for too often: it looks "
				"again by itself in a few seconds.");
		page_answer(s, res, 429, &pg);
		return;
	}
	if ((r = line_look(db, link, &s->holds, &p, &h)) != SD_OK) {
		if (r == SD_NOT_FOUND)
			error_page(s, res, 404, NULL);
		else {
			snprintf(res->retry_after, sizeof res->retry_after, "%d", LINE_REFRESH_S);
			error_page(s, res, 503, "The shop is busy: this page looks again in a "
				   "moment.");
		}
		return;
	}
	if (event_get(db, p.event_id, &e) != SD_OK) {
		error_page(s, res, 503, "The shop is busy: try again in a moment.");
		return;
	}
	if (p.state == LINE_GRANTED) {	/* its turn: the hold, paid as any other */
		to_payment(s, db, req, res, &h, &e);
		return;
	}
	look.refresh_s = p.state == LINE_WAITING ? LINE_REFRESH_S : 0;
	shop_page_line(&pg, &look, &p, &e);
	page_answer(s, res, 200, &pg);
}

/* ======================== a hold's page ================================== */

static void hold_page_with(struct shop *s, struct db *db, const struct http_request *req,
			   struct http_response *res, struct hold_view *h, const char *problem,
			   int status)
{
	char tok[CSRF_LEN + 1], paid[8];
	struct shop_look look = { s->name, tok, 0 };
	struct event_view e;
	struct page pg = { 0 };
	int64_t now = clock_now_ms();

	if (event_get(db, h->event_id, &e) != SD_OK) {
		error_page(s, res, 503, "The shop is busy: try again in a moment.");
		return;
	}
	csrf_token(s, req, res, tok);
	/* back from the payment page while the hold is still open: the page
	 * looks again in a few seconds, until a webhook or a look-up ends it */
	if (h->state == HOLD_OPEN && !problem && req->query &&
	    api_query_get(req->query, "paid", paid, sizeof paid) == 1 && hold_live(h, now))
		look.refresh_s = 3;
	shop_page_hold(&pg, &look, h, &e, now, s->holds.renewals, problem);
	page_answer(s, res, status, &pg);
}

/* back from the payment page, or looking again at a payment on its way:
 * ask the provider at once (rate-limited per hold), and apply what it says:
 * the order need not wait for a webhook */
static void look_up(struct shop *s, struct db *db, struct hold_view *h)
{
	struct stripe_session ss;
	enum pay_outcome out;

	if (!s->stripe || (h->state != HOLD_OPEN && h->state != HOLD_PENDING) || !h->session_id[0] ||
	    !rate_take(s->lookups, h->public_id, clock_now_ms(), NULL) ||
	    stripe_session_get(s->stripe, h->session_id, &ss) != SD_OK ||
	    stripe_session_pay(&ss) == STRIPE_PAY_OPEN)
		return;
	if (shop_pay_session(db, &ss, NULL, NULL, s->holds.pending_max_ms, &out) == SD_OK)
		hold_get_id(db, h->id, h);
}

static void hold_route(struct shop *s, struct db *db, const struct http_request *req,
		       struct http_response *res, const char *rest)
{
	char id[HOLD_LINK_MAX + 1], paid[8], to[HTTP_LOCATION_MAX];
	const char *action = strchr(rest, '/');
	struct hold_view h;
	struct event_view e;
	enum sd_result r;
	int post = strcmp(req->method, "POST") == 0;

	snprintf(id, sizeof id, "%.*s", (int)(action ? (size_t)(action - rest) : strlen(rest)),
		 rest);
	if (hold_get_link(db, id, &h) != SD_OK || (post != (action != NULL)) ||
	    (action && strcmp(action, "/pay") != 0 && strcmp(action, "/renew") != 0)) {
		error_page(s, res, 404, NULL);
		return;
	}
	if (!post) {
		if (h.state == HOLD_PENDING ||
		    (req->query && api_query_get(req->query, "paid", paid, sizeof paid) == 1))
			look_up(s, db, &h);
		hold_page_with(s, db, req, res, &h, NULL, 200);
		return;
	}
	if (!csrf_ok(req)) {
		hold_page_with(s, db, req, res, &h, "This page was out of date: try again.", 403);
		return;
	}
	snprintf(to, sizeof to, "%s/h/%s", s->url, h.link);
	if (strcmp(action, "/renew") == 0) {
		if ((r = hold_renew(db, h.public_id, &s->holds, &h)) != SD_OK) {
			hold_page_with(s, db, req, res, &h, err_msg(), r == SD_LIMITED ? 429 : 409);
			return;
		}
		redirect(res, to);
		return;
	}
	if (!hold_live(&h, clock_now_ms()) || (!s->stripe && h.amount_minor > 0)) {
		hold_page_with(s, db, req, res, &h, NULL, 409);
		return;
	}
	if (event_get(db, h.event_id, &e) != SD_OK) {
		hold_page_with(s, db, req, res, &h, "The box is busy: try again in a moment.", 503);
		return;
	}
	to_payment(s, db, req, res, &h, &e);
}

/* ======================== a moved event's refund link ==================== */

static void refund_route(struct shop *s, struct db *db, const struct http_request *req,
			 struct http_response *res, const char *id)
{
	const char *args = strcmp(req->method, "POST") == 0 ? req->body : req->query;
	char c[24] = "", t[REFUND_LINK_TOKEN_LEN + 2] = "", tok[CSRF_LEN + 1];
	char action[ORDER_ID_MAX + 8];
	struct shop_look look = { s->name, tok, 0 };
	struct refund_link_view v;
	struct page pg = { 0 };
	const char *problem = NULL;
	enum sd_result r;
	int64_t change_no = 0, now = clock_now_ms();
	int status = 200;

	if (args && api_query_get(args, "c", c, sizeof c) == 1)
		change_no = strtoll(c, NULL, 10);
	if (args)
		api_query_get(args, "t", t, sizeof t);
	if (strlen(id) >= ORDER_ID_MAX ||
	    refund_link_look(db, s->key, id, change_no, t, now, &v) != SD_OK) {
		error_page(s, res, 404, NULL);
		return;
	}
	csrf_token(s, req, res, tok);
	if (strcmp(req->method, "POST") == 0 && !csrf_ok(req)) {
		problem = "This page was out of date: try again.";
		status = 403;
	} else if (strcmp(req->method, "POST") == 0) {
		int was_open = v.state == REFUND_LINK_OPEN;

		r = refund_link_use(db, s->key, id, change_no, t, now, &v);
		if (r == SD_OK && was_open)
			log_event(LOG_INFO, "order cancelled by its buyer", "order=%s", v.public_id);
		else if (r == SD_CONFLICT) {	/* started, cancelled, or a ticket admitted */
			status = 409;
			if (v.state == REFUND_LINK_OPEN)
				problem = err_msg();
		} else if (r != SD_OK) {
			log_event(LOG_WARN, "refund link not used", "order=%s err=\"%s\"",
				  v.public_id, err_msg());
			problem = "The box is busy: try again in a moment.";
			status = 503;
		}
	}
	snprintf(action, sizeof action, "/r/%s", v.public_id);
	shop_page_refund(&pg, &look, &v, action, change_no, t, problem);
	page_answer(s, res, status, &pg);
}

/* ======================== the router ===================================== */

static void static_file(struct http_response *res, const char *type, const char *text)
{
	res->status = 200;
	snprintf(res->content_type, sizeof res->content_type, "%s", type);
	res->body = strdup(text);
	res->body_len = res->body ? strlen(res->body) : 0;
	if (!res->body)
		res->status = 500;
}

static void event_route(struct shop *s, struct db *db, const struct http_request *req,
			struct http_response *res, const char *rest, const struct who *w)
{
	struct event_view e;
	struct event_offer o = { 0 };
	const char *action = strchr(rest, '/');
	char name[TEXT_FIELD_MAX * 4 + 1], email[512];
	int64_t wait = 0;

	if (!event_of(s, db, rest, &e, res))
		return;
	o.seats = 1;
	if (!action && strcmp(req->method, "GET") == 0) {
		event_page(s, db, &e, req, res, &o, 200);
		return;
	}
	if (!action || strcmp(action, "/checkout") != 0 || strcmp(req->method, "POST") != 0) {
		error_page(s, res, 404, NULL);
		return;
	}
	if (!s->stripe && e.price_minor > 0) {	/* a free event sells without one */
		event_page(s, db, &e, req, res, &o, 409);
		return;
	}
	if (!csrf_ok(req)) {
		form_values(req, &o, name, email);	/* what the buyer typed, kept */
		o.error = "This page was out of date: check the form and send it again.";
		event_page(s, db, &e, req, res, &o, 403);
		return;
	}
	if (!rate_take(s->rate, w->client, clock_now_ms(), &wait)) {
		snprintf(res->retry_after, sizeof res->retry_after, "%d",
			 (int)((wait + 999) / 1000 < 3600 ? (wait + 999) / 1000 : 3600));
		o.error = "Too many checkouts from your address: wait a minute and try again.";
		event_page(s, db, &e, req, res, &o, 429);
		return;
	}
	checkout(s, db, &e, req, res, w);
}

static void shop_handle(void *arg, const struct http_request *req, struct http_response *res)
{
	struct shop *s = arg;
	struct who w;
	const char *p = req->path;
	int get = strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0;
	struct db *db;

	if (get && strcmp(p, "/shop.js") == 0)
		return static_file(res, "text/javascript; charset=utf-8", shop_js);
	if (get && strcmp(p, "/shop.css") == 0)
		return static_file(res, "text/css; charset=utf-8", shop_css);
	if (get && strcmp(p, "/favicon.ico") == 0) {	/* none: no 404 in a buyer's console */
		res->status = 204;
		return;
	}
	if (get && strcmp(p, "/healthz") == 0)
		return static_file(res, "text/plain; charset=utf-8", "ok\n");
	if (!get && strcmp(req->method, "POST") != 0) {
		error_page(s, res, 405, "This address takes GET and POST only.");
		return;
	}
	if (!(db = pool_get(s))) {
		snprintf(res->retry_after, sizeof res->retry_after, "5");
		error_page(s, res, 503, "The shop is busy: try again in a moment.");
		return;
	}
	client_of(s, req, w.client, w.net, sizeof w.client);
	if (strcmp(p, "/stripe/webhook") == 0 && s->stripe)
		shop_hook(db, s->secrets, s->n_secrets, s->holds.pending_max_ms, req, res);
	else if (get && strcmp(p, "/") == 0)
		list_page(s, db, req, res);
	else if (strncmp(p, "/e/", 3) == 0)
		event_route(s, db, req, res, p + 3, &w);
	else if (strncmp(p, "/h/", 3) == 0)
		hold_route(s, db, req, res, p + 3);
	else if (strncmp(p, "/w/", 3) == 0)
		line_route(s, db, req, res, p + 3, &w);
	else if (strncmp(p, "/r/", 3) == 0)
		refund_route(s, db, req, res, p + 3);
	else
		error_page(s, res, 404, NULL);
	pool_put(s, db);
}

/* ======================== start and stop ================================= */

/* the public base: shop_url, else the listener's own address */
static enum sd_result base_url(struct shop *s, const struct shop_opts *o, int port)
{
	const char *u = o->url, *host;
	size_t n;

	if (u && *u) {
		if (strncmp(u, "https://", 8) != 0 && strncmp(u, "http://", 7) != 0)
			return err_set(SD_INVALID, "shop_url must be https://host (or http:// for a "
				       "shop on this machine only)");
		snprintf(s->url, sizeof s->url, "%s", u);
	} else {
		snprintf(s->url, sizeof s->url, "%s://%s", o->tls_cert ? "https" : "http",
			 o->listen[0] == ':' ? "127.0.0.1" : o->listen);
		if (port > 0 && strrchr(s->url, ':') > s->url + 6)
			snprintf(strrchr(s->url, ':'), sizeof s->url - (size_t)(strrchr(s->url, ':') -
				 s->url), ":%d", port);
	}
	n = strlen(s->url);
	while (n > 0 && s->url[n - 1] == '/')
		s->url[--n] = '\0';
	s->secure = strncmp(s->url, "https://", 8) == 0;
	host = strstr(s->url, "://") + 3;
	snprintf(s->origin, sizeof s->origin, "%.*s", (int)(host - s->url + strcspn(host, "/?#")),
		 s->url);
	if (strchr(s->origin, '@') || strlen(host) < 1)
		return err_set(SD_INVALID, "shop_url names no host");
	return SD_OK;
}

/* the page's policy: this origin, and forms that go on to the provider's
 * payment page (Stripe's checkout, or a provider on this machine) */
static void policy(struct shop *s, const struct shop_opts *o)
{
	char pay[512] = "";
	const char *api = o->stripe.api_url;

	if (o->stripe_on && api && *api && strcmp(api, STRIPE_API_DEFAULT) != 0) {
		const char *h = strstr(api, "://");

		if (h)
			snprintf(pay, sizeof pay, " %.*s", (int)(h + 3 - api + strcspn(h + 3, "/?#")),
				 api);
	} else if (o->stripe_on) {
		snprintf(pay, sizeof pay, " https://checkout.stripe.com");
	}
	snprintf(s->csp, sizeof s->csp, "default-src 'none'; script-src 'self'; style-src 'self'; "
		 "img-src 'self'; form-action 'self'%s; base-uri 'none'; frame-ancestors 'none'",
		 pay);
}

static enum sd_result proxies_parse(struct shop *s, const char *list)
{
	char buf[1024], *save = NULL, *t;
	struct in6_addr a6;
	struct in_addr a4;

	snprintf(buf, sizeof buf, "%s", list ? list : "");
	for (t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		if (s->n_proxies >= PROXIES_MAX)
			return err_set(SD_INVALID, "shop_trusted_proxies: at most %d", PROXIES_MAX);
		if (inet_pton(AF_INET, t, &a4) == 1)
			inet_ntop(AF_INET, &a4, s->proxies[s->n_proxies++], INET6_ADDRSTRLEN);
		else if (inet_pton(AF_INET6, t, &a6) == 1)
			inet_ntop(AF_INET6, &a6, s->proxies[s->n_proxies++], INET6_ADDRSTRLEN);
		else
			return err_set(SD_INVALID, "shop_trusted_proxies: '%.60s' is no IP address",
				       t);
	}
	return SD_OK;
}

/* shop_payment_methods: Stripe's payment method types, a-z and '_', by
 * commas */
static enum sd_result methods_parse(struct shop *s, const char *list)
{
	size_t n = list ? strlen(list) : 0;

	if (n >= sizeof s->methods || (list && strspn(list, "abcdefghijklmnopqrstuvwxyz_, ") != n))
		return err_set(SD_INVALID, "shop_payment_methods: Stripe's payment method types "
			       "(card, link, sepa_debit, ...) by commas, at most %zu characters",
			       sizeof s->methods - 1);
	snprintf(s->methods, sizeof s->methods, "%s", list ? list : "");
	return SD_OK;
}

static enum sd_result provider_open(struct shop *s, const struct shop_opts *o)
{
	enum sd_result r;

	if (!o->stripe_on)
		return SD_OK;
	if ((r = stripe_open(&o->stripe, &s->stripe)) != SD_OK)
		return r;
	return stripe_secrets_read(o->webhook_secret_file, s->secrets, &s->n_secrets);
}

/* open connections one peer may hold: behind a trusted proxy on loopback
 * every buyer's connection is the proxy's, so the cap per address would be
 * one for all buyers together: it is lifted (limit connections per buyer at
 * the proxy; the caps and rates per buyer still count X-Forwarded-For's) */
static unsigned per_client_max(const struct shop *s, const struct shop_opts *o)
{
	if (s->n_proxies > 0 && (strncmp(o->listen, "127.", 4) == 0 ||
				 strncmp(o->listen, "[::1]", 5) == 0 ||
				 strncmp(o->listen, "localhost:", 10) == 0))
		return HTTP_CONN_MAX;
	return (unsigned)o->per_client_max;
}

static enum sd_result listen_on(struct shop *s, const struct shop_opts *o)
{
	const char *extra[2] = { NULL, NULL };
	char host[256];
	const char *h = strstr(s->url, "://") + 3;
	enum sd_result r;

	snprintf(host, sizeof host, "%.*s", (int)strcspn(h, ":/?#"), h);
	if (host[0] == '[')	/* [::1]:8443 */
		snprintf(host, sizeof host, "%.*s", (int)strcspn(h, "]") + 1, h);
	extra[0] = host;
	r = http_start_opts(&(struct http_opts){ .listen = o->listen, .tls_cert = o->tls_cert,
				  .tls_key = o->tls_key, .hosts_extra = extra,
				  .origin = s->origin, .no_assets = 1, .threads = SHOP_THREADS,
				  .per_client_max = per_client_max(s, o) },
			    shop_handle, s, &s->http);
	return r;
}

enum sd_result shop_start(const struct shop_opts *o, struct shop **out)
{
	struct shop *s;
	enum sd_result r;
	char path[PATH_MAX + 16];

	*out = NULL;
	if (!(s = calloc(1, sizeof *s)))
		return err_set(SD_NOMEM, "out of memory");
	pthread_mutex_init(&s->mu, NULL);
	snprintf(s->db_path, sizeof s->db_path, "%s", o->db_path);
	snprintf(s->name, sizeof s->name, "%s", o->name && *o->name ? o->name : "Tickets");
	s->holds = o->holds;
	hold_rules_fill(&s->holds);
	if ((r = methods_parse(s, o->payment_methods)) != SD_OK)
		goto fail;
	if ((r = code_key_path(o->db_path, o->state_dir, path, sizeof path)) != SD_OK ||
	    (r = code_key_load(path, s->key)) != SD_OK)
		goto fail;
	if ((r = base_url(s, o, 0)) != SD_OK || (r = proxies_parse(s, o->trusted_proxies)) ||
	    (r = rate_new_per_min(o->rate_per_min, o->rate_per_min > 1 ? o->rate_per_min : 1,
				  &s->rate)) != SD_OK ||
	    (r = rate_new_per_min(LOOKUP_PER_MIN, 2, &s->lookups)) != SD_OK ||
	    (r = rate_new_per_min(LINE_LOOKS_PER_MIN, LINE_LOOKS_BURST, &s->looks)) != SD_OK ||
	    (r = provider_open(s, o)) != SD_OK)
		goto fail;
	policy(s, o);
	if ((r = listen_on(s, o)) != SD_OK)
		goto fail;
	if (!(o->url && *o->url))	/* port 0: the port it got */
		base_url(s, o, http_port(s->http));
	log_event(LOG_INFO, "shop listening", "url=%s payments=%s", s->url,
		  s->stripe ? "stripe" : "none");
	*out = s;
	return SD_OK;
fail:
	shop_stop(s);
	return r;
}

int shop_port(const struct shop *s)
{
	return s ? http_port(s->http) : 0;
}

void shop_stop(struct shop *s)
{
	if (!s)
		return;
	http_stop(s->http);
	while (s->n_idle)
		db_close(s->idle[--s->n_idle]);
	rate_free(s->rate);
	rate_free(s->lookups);
	rate_free(s->looks);
	stripe_secrets_free(s->secrets, s->n_secrets);
	stripe_close(s->stripe);
	explicit_bzero(s->key, sizeof s->key);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
