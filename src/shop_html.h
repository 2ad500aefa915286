/*
 * shop_html.h: the shop's pages as HTML, for buyers (shop.c routes to
 * them).  Plain server-rendered pages that work without JavaScript and on a
 * phone; one small script (shop.js) turns a hold's end into a countdown.
 * Every text from the database or a request is escaped here, once.  Dates
 * and amounts are written in the venue's locale (lang.h).
 */
#ifndef SD_SHOP_HTML_H
#define SD_SHOP_HTML_H

#include <stddef.h>
#include <stdint.h>

#include "events.h"
#include "holds.h"
#include "line.h"
#include "refund_link.h"

/* A page being written; out of memory is remembered and reported at the end. */
struct page {
	char *p;
	size_t len, cap;
	int oom;
};

void page_add(struct page *pg, const char *s);			/* as is */
void page_text(struct page *pg, const char *s);			/* HTML-escaped */
void page_fmt(struct page *pg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What every page shows around its body. */
struct shop_look {
	const char *name;		/* shop_name */
	const char *csrf;		/* the form token */
	int refresh_s;			/* > 0: the page reloads itself after this */
};

/* page_open / page_close: the document around a page's main part. */
void page_open(struct page *pg, const struct shop_look *look, const char *title);
void page_close(struct page *pg);

/* What an event page offers. */
struct event_offer {
	int64_t left;			/* seats free of tickets and live holds */
	int64_t held;			/* seats in live holds */
	int64_t waiting;		/* buyers present in the line */
	int64_t seats_max;		/* in one checkout */
	int selling;			/* the provider takes payments */
	const char *error;		/* the form's refusal, or NULL */
	const char *name, *email;	/* the form's values again, or NULL */
	int64_t seats;
};

/* The list of events on sale; the event page with its form; a hold's page
 * (its countdown, its payment, its ending); a refusal. */
void shop_page_list(struct page *pg, const struct shop_look *look,
		    const struct event_view *ev, const int64_t *left, int n);
void shop_page_event(struct page *pg, const struct shop_look *look, const struct event_view *e,
		     const struct event_offer *offer);
void shop_page_hold(struct page *pg, const struct shop_look *look, const struct hold_view *h,
		    const struct event_view *e, int64_t now, int64_t renewals_max,
		    const char *problem);
void shop_page_error(struct page *pg, const struct shop_look *look, int status,
		     const char *what);

/* A place in the waiting line (line.h): its number, and why it left. */
void shop_page_line(struct page *pg, const struct shop_look *look, const struct line_place *p,
		    const struct event_view *e);

/* A moved event's refund link (refund_link.h): what it may do, and its
 * form (posted to action, with the link's c and t) while it is open. */
void shop_page_refund(struct page *pg, const struct shop_look *look,
		      const struct refund_link_view *v, const char *action, int64_t change_no,
		      const char *token, const char *problem);

/* The script and the style sheet, served as they are. */
extern const char shop_js[];
extern const char shop_css[];

#endif
