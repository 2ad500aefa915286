/*
 * shop_html.c: the shop's pages (shop_html.h).
 */
#define _GNU_SOURCE
#include "shop_html.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lang.h"

/* ---- the page buffer ----------------------------------------------------- */

static void page_put(struct page *pg, const char *s, size_t n)
{
	char *p;
	size_t cap;

	if (pg->oom)
		return;
	if (pg->len + n + 1 > pg->cap) {
		cap = pg->cap ? pg->cap : 4096;
		while (cap < pg->len + n + 1)
			cap *= 2;
		if (!(p = realloc(pg->p, cap))) {
			pg->oom = 1;
			return;
		}
		pg->p = p;
		pg->cap = cap;
	}
	memcpy(pg->p + pg->len, s, n);
	pg->len += n;
	pg->p[pg->len] = '\0';
}

void page_add(struct page *pg, const char *s)
{
	page_put(pg, s, strlen(s));
}

void page_text(struct page *pg, const char *s)
{
	const char *run = s;

	for (; s && *s; s++) {
		const char *esc = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;"
				: *s == '"' ? "&quot;" : *s == '\'' ? "&#39;" : NULL;

		if (!esc)
			continue;
		page_put(pg, run, (size_t)(s - run));
		page_add(pg, esc);
		run = s + 1;
	}
	if (run)
		page_put(pg, run, strlen(run));
}

void page_fmt(struct page *pg, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0) {
		pg->oom = 1;
		return;
	}
	page_put(pg, s, (size_t)n);
	free(s);
}

/* ---- around every page --------------------------------------------------- */

void page_open(struct page *pg, const struct shop_look *look, const char *title)
{
	/* the pages' words are English; their dates and amounts carry the
	 * venue's locale (when_where, money) */
	page_add(pg, "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
		 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
	if (look->refresh_s > 0)
		page_fmt(pg, "<meta http-equiv=\"refresh\" content=\"%d\">\n", look->refresh_s);
	page_add(pg, "<title>");
	page_text(pg, title);
	page_add(pg, " · ");
	page_text(pg, look->name);
	page_add(pg, "</title>\n<link rel=\"stylesheet\" href=\"/shop.css\">\n"
		 "<script src=\"/shop.js\" defer></script>\n</head>\n<body>\n<header><a href=\"/\">");
	page_text(pg, look->name);
	page_add(pg, "</a></header>\n<main>\n");
}

void page_close(struct page *pg)
{
	page_add(pg, "</main>\n</body>\n</html>\n");
}

static void csrf_field(struct page *pg, const struct shop_look *look)
{
	page_add(pg, "<input type=\"hidden\" name=\"csrf\" value=\"");
	page_text(pg, look->csrf);
	page_add(pg, "\">\n");
}

/* a machine's reading of ms: "2036-05-01T20:00+02:00", in the venue's zone */
static void iso_time(struct page *pg, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char buf[40];
	long off;

	if (!localtime_r(&t, &tm))
		gmtime_r(&t, &tm);
	off = tm.tm_gmtoff;
	strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M", &tm);
	page_add(pg, buf);
	page_fmt(pg, "%c%02ld:%02ld", off < 0 ? '-' : '+', labs(off) / 3600, labs(off) / 60 % 60);
}

/* "Fri 4 Dec 2026, 20:00 CET · Main Hall" */
static void when_where(struct page *pg, const struct event_view *e)
{
	char when[LANG_TEXT_MAX];

	lang_when(e->starts_at, when, sizeof when);
	page_fmt(pg, "<p class=\"when\"><time lang=\"%s\" datetime=\"", lang_tag());
	iso_time(pg, e->starts_at);
	page_add(pg, "\">");
	page_text(pg, when);
	page_add(pg, "</time> · ");
	page_text(pg, e->venue);
	page_add(pg, "</p>\n");
}

static void money(struct page *pg, int64_t minor, const char *currency)
{
	char m[LANG_TEXT_MAX];

	if (minor == 0) {	/* a free event's seats */
		page_add(pg, "<span class=\"free\">Free</span>");
		return;
	}
	lang_money(minor, currency, m, sizeof m);
	page_fmt(pg, "<span lang=\"%s\">", lang_tag());
	page_text(pg, m);
	page_add(pg, "</span>");
}

/* a time as the venue reads it: "Fri 4 Dec 2026, 20:00 CET" */
static void page_when(struct page *pg, int64_t ms)
{
	char when[LANG_TEXT_MAX];

	lang_when(ms, when, sizeof when);
	page_fmt(pg, "<time lang=\"%s\" datetime=\"", lang_tag());
	iso_time(pg, ms);
	page_add(pg, "\">");
	page_text(pg, when);
	page_add(pg, "</time>");
}

void shop_page_line(struct page *pg, const struct shop_look *look, const struct line_place *p,
		    const struct event_view *e)
{
	static const char *const heads[] = { "You are in line", "Your turn", "Sold out",
					     "Sales have closed", "You left the line",
					     "You left the line" };

	page_open(pg, look, heads[p->state]);
	page_fmt(pg, "<h1>%s</h1>\n<p class=\"summary\">%lld seat%s for <strong>", heads[p->state],
		 (long long)p->seats, p->seats == 1 ? "" : "s");
	page_text(pg, e->name);
	page_add(pg, "</strong></p>\n");
	when_where(pg, e);
	if (p->state == LINE_WAITING) {
		page_fmt(pg, "<p class=\"line\">Many buyers came at once, so you wait in line: "
			 "<strong data-ahead=\"%lld\">%lld</strong> %s before you.</p>\n"
			 "<p>Keep this page open: it looks again every few seconds, and takes you to "
			 "the payment when it is your turn. Buyers are served in the order they "
			 "came; closing the page gives up your place.</p>\n", (long long)p->ahead,
			 (long long)p->ahead, p->ahead == 1 ? "buyer is" : "buyers are");
	} else if (p->state == LINE_SOLD_OUT) {
		page_add(pg, "<p>The last seats were sold while you waited. We are sorry.</p>\n");
	} else if (p->state == LINE_CLOSED) {
		page_add(pg, "<p>This event no longer sells tickets here.</p>\n");
	} else if (p->state == LINE_LIMITED) {
		page_add(pg, "<p>When it was your turn, your address already held as many unpaid "
			 "checkouts as it may. Pay for one of them, or wait for one to end, then "
			 "join the line again.</p>\n");
	} else if (p->state == LINE_GONE) {
		page_fmt(pg, "<p>This page was closed for too long, and your place went to the "
			 "buyers behind you.</p>\n<p><a href=\"/e/%lld\">Join the line again</a></p>"
			 "\n", (long long)e->id);
	}
	page_close(pg);
}

/* ---- the pages ----------------------------------------------------------- */

void shop_page_list(struct page *pg, const struct shop_look *look,
		    const struct event_view *ev, const int64_t *left, int n)
{
	int i;

	page_open(pg, look, "Events");
	page_add(pg, "<h1>On sale</h1>\n");
	if (!n)
		page_add(pg, "<p>Nothing is on sale right now.</p>\n");
	for (i = 0; i < n; i++) {
		page_fmt(pg, "<article class=\"event\">\n<h2><a href=\"/e/%lld\">",
			 (long long)ev[i].id);
		page_text(pg, ev[i].name);
		page_add(pg, "</a></h2>\n");
		when_where(pg, &ev[i]);
		page_add(pg, "<p class=\"price\">");
		money(pg, ev[i].price_minor, ev[i].currency);
		if (left[i] > 0)
			page_fmt(pg, " · %lld seat%s left</p>\n", (long long)left[i],
				 left[i] == 1 ? "" : "s");
		else
			page_add(pg, " · <strong>sold out</strong></p>\n");
		page_add(pg, "</article>\n");
	}
	page_close(pg);
}

static void event_form(struct page *pg, const struct shop_look *look,
		       const struct event_view *e, const struct event_offer *o)
{
	/* seats held by others may come free: the line waits for them */
	int64_t unsold = o->left + o->held, i, max = unsold < o->seats_max ? unsold : o->seats_max;

	page_fmt(pg, "<form method=\"post\" action=\"/e/%lld/checkout\">\n", (long long)e->id);
	csrf_field(pg, look);
	if (o->error) {
		page_add(pg, "<p class=\"error\" id=\"form-error\" role=\"alert\">");
		page_text(pg, o->error);
		page_add(pg, "</p>\n");
	}
	page_add(pg, "<label>Seats <select name=\"seats\">");
	for (i = 1; i <= max; i++)
		page_fmt(pg, "<option%s>%lld</option>", i == o->seats ? " selected" : "",
			 (long long)i);
	page_add(pg, "</select></label>\n<label>Name <input name=\"name\" required "
		 "maxlength=\"200\" autocomplete=\"name\" value=\"");
	page_text(pg, o->name ? o->name : "");
	page_add(pg, "\"></label>\n<label>Email <input name=\"email\" type=\"email\" required "
		 "maxlength=\"254\" autocomplete=\"email\" value=\"");
	page_text(pg, o->email ? o->email : "");
	if (e->price_minor == 0)
		page_add(pg, "\"></label>\n<p class=\"note\">The seats are free: your tickets are "
			 "emailed at once.</p>\n<button type=\"submit\">Get tickets</button>\n"
			 "</form>\n");
	else
		page_add(pg, "\"></label>\n<p class=\"note\">Your seats are held while you "
			 "pay.</p>\n<button type=\"submit\">Continue to payment</button>\n"
			 "</form>\n");
}

void shop_page_event(struct page *pg, const struct shop_look *look, const struct event_view *e,
		     const struct event_offer *o)
{
	page_open(pg, look, e->name);
	page_add(pg, "<h1>");
	page_text(pg, e->name);
	page_add(pg, "</h1>\n");
	when_where(pg, e);
	page_add(pg, "<p class=\"price\">");
	money(pg, e->price_minor, e->currency);
	if (e->price_minor > 0)
		page_add(pg, " a seat");
	if (o->left > 0)
		page_fmt(pg, " · %lld seat%s left", (long long)o->left, o->left == 1 ? "" : "s");
	page_add(pg, "</p>\n");
	if (o->left <= 0 && o->held > 0)
		page_add(pg, "<p class=\"soldout\"><strong>Sold out for now:</strong> buyers are "
			 "paying for the last seats. Some may come free again in a few minutes: "
			 "wait in line for them below.</p>\n");
	else if (o->waiting > 0)
		page_fmt(pg, "<p class=\"line\">%lld buyer%s in line: you join the line after "
			 "them.</p>\n", (long long)o->waiting, o->waiting == 1 ? " is" : "s are");
	if (o->left <= 0 && o->held <= 0)
		page_add(pg, "<p class=\"soldout\"><strong>Sold out</strong></p>\n");
	else if (!o->selling)
		page_add(pg, "<p>Tickets for this event are sold at the box office.</p>\n");
	else
		event_form(pg, look, e, o);
	page_add(pg, "<p><a href=\"/\">All events</a></p>\n");
	page_close(pg);
}

static void hold_summary(struct page *pg, const struct hold_view *h, const struct event_view *e)
{
	page_add(pg, "<p class=\"summary\">");
	page_fmt(pg, "%lld seat%s for <strong>", (long long)h->seats, h->seats == 1 ? "" : "s");
	page_text(pg, e->name);
	page_add(pg, "</strong>: ");
	money(pg, h->amount_minor, h->currency);
	page_add(pg, "</p>\n");
	when_where(pg, e);
}

static void hold_open(struct page *pg, const struct shop_look *look, const struct hold_view *h,
		      int64_t now, int64_t renewals_max, const char *problem)
{
	time_t t = (time_t)(h->expires_at / 1000);
	struct tm tm;
	char until[16];
	int64_t left_s = (h->expires_at - now + 999) / 1000;

	if (!localtime_r(&t, &tm))
		gmtime_r(&t, &tm);
	strftime(until, sizeof until, "%H:%M", &tm);
	page_add(pg, "<p class=\"held\">Your seats are held until ");
	page_text(pg, until);
	page_fmt(pg, " (<span data-left=\"%lld\">%lld min</span>).</p>\n", (long long)left_s,
		 (long long)((left_s + 59) / 60));
	if (problem) {
		page_add(pg, "<p class=\"error\" role=\"alert\">");
		page_text(pg, problem);
		page_add(pg, "</p>\n");
	}
	if (h->pay_url[0] && !problem) {
		page_add(pg, "<p><a class=\"button\" href=\"");
		page_text(pg, h->pay_url);
		page_add(pg, "\">Pay ");
		money(pg, h->amount_minor, h->currency);
		page_add(pg, "</a></p>\n");
	} else {
		page_fmt(pg, "<form method=\"post\" action=\"/h/%s/pay\">\n", h->link);
		csrf_field(pg, look);
		page_add(pg, "<button type=\"submit\">Go to payment</button>\n</form>\n");
	}
	if (h->renewals < renewals_max) {
		page_fmt(pg, "<form class=\"more\" method=\"post\" action=\"/h/%s/renew\">\n",
			 h->link);
		csrf_field(pg, look);
		page_add(pg, "<button type=\"submit\" class=\"quiet\">I need more time</button>\n"
			 "</form>\n");
	}
}

void shop_page_hold(struct page *pg, const struct shop_look *look, const struct hold_view *h,
		    const struct event_view *e, int64_t now, int64_t renewals_max,
		    const char *problem)
{
	page_open(pg, look, h->state == HOLD_ORDERED ? "Thank you" : "Your checkout");
	if (h->state == HOLD_ORDERED) {
		page_add(pg, "<h1>Thank you</h1>\n");
		hold_summary(pg, h, e);
		page_add(pg, h->amount_minor ? "<p>Your payment is received and your tickets are on "
			 "their way to <b>" : "<p>Your tickets are on their way to <b>");
		page_text(pg, h->email);
		page_add(pg, "</b>. Show the code on each page at the door.</p>\n<p>Order <b>");
		page_text(pg, h->order_public_id);
		page_add(pg, "</b></p>\n");
	} else if (h->state == HOLD_REFUNDED) {
		page_add(pg, "<h1>Your payment is refunded</h1>\n");
		hold_summary(pg, h, e);
		if (h->problem[0])
			page_add(pg, "<p>The amount your payment service took was not the price of "
				 "your seats, so no tickets were made, and what it took is refunded "
				 "in full. An email says so.</p>\n");
		else
			page_add(pg, "<p>Your payment reached us only after the time we held your "
				 "seats for had run out, and the event had no seats left by then. No "
				 "tickets were made, and your payment is refunded in full. An email "
				 "says so.</p>\n");
	} else if (h->state == HOLD_PENDING) {
		page_add(pg, "<h1>Your payment is on its way</h1>\n");
		hold_summary(pg, h, e);
		page_add(pg, "<p>You paid with a method that takes a few days (a direct debit or a "
			 "bank transfer). We keep your seats until ");
		page_when(pg, h->expires_at);
		page_add(pg, ", and your tickets are emailed to <b>");
		page_text(pg, h->email);
		page_add(pg, "</b> as soon as the money arrives.</p>\n");
	} else if (h->state == HOLD_FAILED) {
		page_add(pg, "<h1>Your payment did not go through</h1>\n");
		hold_summary(pg, h, e);
		page_fmt(pg, "<p>Your bank or the payment service refused it. No money was taken, "
			 "and the seats are on sale again.</p>\n<p><a href=\"/e/%lld\">Back to the "
			 "event</a></p>\n", (long long)e->id);
	} else if (h->state == HOLD_EXPIRED) {
		page_add(pg, "<h1>This checkout has ended</h1>\n");
		hold_summary(pg, h, e);
		page_fmt(pg, "<p>It ended without a payment, and its seats are free again.</p>\n"
			 "<p><a href=\"/e/%lld\">Back to the event</a></p>\n", (long long)e->id);
	} else if (!hold_live(h, now)) {
		page_add(pg, "<h1>Your hold has run out</h1>\n");
		hold_summary(pg, h, e);
		page_fmt(pg, "<p>The seats are no longer kept for you. If you paid, we make your "
			 "order if the seats are still free, or refund you in full; an email "
			 "tells you which.</p>\n<p><a href=\"/e/%lld\">Back to the event</a></p>\n",
			 (long long)e->id);
	} else if (look->refresh_s > 0) {
		page_add(pg, "<h1>Confirming your payment…</h1>\n");
		hold_summary(pg, h, e);
		page_add(pg, "<p>This page shows your order as soon as the payment is confirmed.</p>"
			 "\n");
	} else {
		page_add(pg, "<h1>Your checkout</h1>\n");
		hold_summary(pg, h, e);
		hold_open(pg, look, h, now, renewals_max, problem);
	}
	page_close(pg);
}

void shop_page_refund(struct page *pg, const struct shop_look *look,
		      const struct refund_link_view *v, const char *action, int64_t change_no,
		      const char *token, const char *problem)
{
	static const char *const heads[] = {
		[REFUND_LINK_OPEN] = "Cannot come on the new date?",
		[REFUND_LINK_CANCELLED] = "Your order is cancelled",
		[REFUND_LINK_EVENT_CANCELLED] = "The event is cancelled",
		[REFUND_LINK_STARTED] = "The event has started",
	};

	page_open(pg, look, heads[v->state]);
	page_fmt(pg, "<h1>%s</h1>\n<p class=\"summary\">Order <b>", heads[v->state]);
	page_text(pg, v->public_id);
	page_fmt(pg, "</b>: %lld seat%s for <strong>", (long long)v->seats,
		 v->seats == 1 ? "" : "s");
	page_text(pg, v->event_name);
	page_add(pg, "</strong>, now on ");
	iso_time(pg, v->starts_at);
	page_add(pg, "</p>\n");
	if (problem) {
		page_add(pg, "<p class=\"error\" role=\"alert\">");
		page_text(pg, problem);
		page_add(pg, "</p>\n");
	}
	if (v->state == REFUND_LINK_OPEN) {
		page_add(pg, "<p>Cancel your order and be paid back ");
		money(pg, v->amount_minor, v->currency);
		page_add(pg, v->online ? " to the card you paid with." : " at the box office.");
		page_add(pg, " Your tickets stop admitting anyone at once.</p>\n");
		page_add(pg, "<form method=\"post\" action=\"");
		page_text(pg, action);
		page_fmt(pg, "\">\n<input type=\"hidden\" name=\"c\" value=\"%lld\">\n"
			 "<input type=\"hidden\" name=\"t\" value=\"", (long long)change_no);
		page_text(pg, token);
		page_add(pg, "\">\n");
		csrf_field(pg, look);
		page_add(pg, "<button type=\"submit\">Cancel my order and pay me back</button>\n"
			 "</form>\n");
	} else if (v->state == REFUND_LINK_CANCELLED) {
		page_add(pg, v->online ? "<p>Your payment is refunded to the card you paid with: "
			 "an email says so, and it shows on your statement within a few days.</p>\n"
			 : "<p>Bring your order number to the box office: it pays you back.</p>\n");
	} else if (v->state == REFUND_LINK_EVENT_CANCELLED) {
		page_add(pg, "<p>The whole event is cancelled: every order is paid back, and an "
			 "email tells you how.</p>\n");
	} else {
		page_add(pg, "<p>It is too late to cancel online: the box office can help.</p>\n");
	}
	page_close(pg);
}

void shop_page_error(struct page *pg, const struct shop_look *look, int status,
		     const char *what)
{
	page_open(pg, look, status == 404 ? "Not found" : "Sorry");
	page_add(pg, status == 404 ? "<h1>Not found</h1>\n" : "<h1>Sorry</h1>\n<p>");
	if (status != 404) {
		page_text(pg, what);
		page_add(pg, "</p>\n");
	}
	page_add(pg, "<p><a href=\"/\">All events</a></p>\n");
	page_close(pg);
}

/* ---- the script and the style ------------------------------------------- */

/* A hold's end, counted down where the page says how long is left; the
 * page reloads when it is up (and works the same without it). */
const char shop_js[] =
	"'use strict';\n"
	"document.querySelectorAll('[data-left]').forEach(function (el) {\n"
	"  var end = Date.now() + 1000 * Number(el.dataset.left);\n"
	"  function tick() {\n"
	"    var s = Math.max(0, Math.round((end - Date.now()) / 1000));\n"
	"    el.textContent = s > 0 ? Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0')"
	" + ' left' : 'time is up';\n"
	"    if (s > 0) setTimeout(tick, 1000); else setTimeout(function () { location.reload(); },"
	" 1500);\n"
	"  }\n"
	"  tick();\n"
	"});\n";

const char shop_css[] =
	"*{box-sizing:border-box}body{margin:0;font:16px/1.5 system-ui,sans-serif;color:#1b1b1f;"
	"background:#f6f5f2}header{background:#1b1b1f;padding:.8rem 1rem}header a{color:#fff;"
	"text-decoration:none;font-weight:600}main{max-width:40rem;margin:0 auto;padding:1rem}"
	"h1{font-size:1.6rem;margin:.5rem 0}h2{font-size:1.2rem;margin:0 0 .2rem}"
	".event{background:#fff;border-radius:.5rem;padding:1rem;margin:0 0 .8rem;"
	"box-shadow:0 1px 2px #0002}.when,.price{margin:.2rem 0;color:#444}"
	"form{display:grid;gap:.8rem;background:#fff;border-radius:.5rem;padding:1rem;"
	"margin:1rem 0}label{display:grid;gap:.2rem;font-weight:600}"
	"input,select{font:inherit;padding:.6rem;border:1px solid #999;border-radius:.3rem;"
	"width:100%;min-height:44px}button,.button{display:block;font:inherit;font-weight:600;"
	"padding:.8rem 1.2rem;border:0;border-radius:.4rem;background:#0b57d0;color:#fff;"
	"text-decoration:none;text-align:center;cursor:pointer;min-height:44px;width:100%}"
	"form.more{background:none;padding:0;margin:.5rem 0}"
	"button.quiet{background:#e4e2dd;color:#1b1b1f}.error{color:#a00;font-weight:600}"
	".note{color:#555;margin:0}.held{font-size:1.1rem}"
	"header a,main>p>a{display:inline-block;min-height:44px;line-height:44px}\n";
