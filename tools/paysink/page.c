/*
 * page.c: the hosted payment page.
 *
 *   GET  /pay/{id}   a small HTML page, no JavaScript, phone-sized first:
 *                    the total, each line's name, quantity and amount, as
 *                    Stripe's Checkout a choice of the payment method types
 *                    the session offers ("Card", "SEPA Direct Debit", ...;
 *                    radio buttons named method, the first chosen) and one
 *                    "Pay" button (a form POST to the same URL); "Complete
 *                    order" alone for a total of 0; and a "Cancel" link to
 *                    cancel_url.  A paid or expired session gets a page that
 *                    says so instead.
 *   POST /pay/{id}   method=TYPE (default card): an open session is paid
 *                    with it (payment.c: at once, or processing for a
 *                    delayed method; checkout.session.completed queued) and
 *                    the answer is 303 to success_url, {CHECKOUT_SESSION_ID}
 *                    replaced by the id; a paid or expired one gets the page
 *                    saying so (409): a second click never charges twice; a
 *                    method the session does not offer, 400.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paysink.h"

/* ======================== HTML =========================================== */

/* s with &<>"' escaped, appended to f */
static void html_put(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
	}
}

static const char page_head[] =
	"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
	"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
	"<title>%s</title>\n<style>\n"
	"body{font:16px/1.45 system-ui,-apple-system,sans-serif;margin:0;background:#f6f8fa;"
	"color:#1a1f36}\n"
	"main{max-width:26rem;margin:0 auto;padding:1.5rem 1rem}\n"
	".mode{display:inline-block;font-size:.8rem;background:#ffde92;color:#5c3b00;"
	"border-radius:4px;padding:.1rem .4rem}\n"
	".total{font-size:2rem;font-weight:600;margin:.3rem 0 1.2rem}\n"
	"ul{list-style:none;padding:0;margin:0 0 1.5rem;border-top:1px solid #dde}\n"
	"li{display:flex;justify-content:space-between;gap:1rem;padding:.7rem 0;"
	"border-bottom:1px solid #dde}\n"
	"button{width:100%%;padding:.9rem;font-size:1.1rem;border:0;border-radius:6px;"
	"background:#635bff;color:#fff}\n"
	"fieldset{border:0;padding:0;margin:0 0 1rem}legend{font-weight:600;margin-bottom:.4rem}\n"
	"label{display:block;padding:.6rem .2rem;border-bottom:1px solid #dde}\n"
	"a.cancel{display:block;text-align:center;margin-top:1rem;color:#555}\n"
	"</style></head><body><main>\n<p class=\"mode\">paysink test mode</p>\n";

/* the payment form: as Stripe's Checkout, a choice of the methods the
 * session offers (the first chosen already) and one "Pay"
 * button; a no-cost order asks for no method at all */
static void page_buttons(FILE *f, const struct ps_session *s)
{
	size_t i;
	json_t *v;

	fprintf(f, "<form method=\"post\" action=\"/pay/%s\">\n", s->id);
	if (s->amount_total == 0) {
		fputs("<p>Nothing will be charged.</p>\n<button type=\"submit\">Complete order"
		      "</button></form>\n", f);
		return;
	}
	fputs("<fieldset><legend>Payment method</legend>\n", f);
	json_array_foreach(s->pm_types, i, v) {
		const char *type = json_string_value(v);

		fprintf(f, "<label><input type=\"radio\" name=\"method\" value=\"%s\"%s> ", type,
			i == 0 ? " checked" : "");
		html_put(f, pm_type_label(type));
		if (pm_type_delayed(type))
			fputs(" <small>(confirmed in a few days)</small>", f);
		fputs("</label>\n", f);
	}
	fputs("</fieldset>\n<button type=\"submit\">Pay</button></form>\n", f);
}

static char *page_open(const struct ps_session *s)
{
	char total[48], each[48], *text = NULL;
	size_t len = 0, i;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	amount_format(total, sizeof total, s->amount_total, s->currency);
	fprintf(f, page_head, "Pay");
	fputs("<h1>Pay</h1>\n<p class=\"total\">", f);
	html_put(f, total);
	fputs("</p>\n<ul>\n", f);
	for (i = 0; i < s->n_lines; i++) {
		amount_format(each, sizeof each, s->lines[i].unit_amount * s->lines[i].quantity,
			      s->currency);
		fputs("<li><span>", f);
		html_put(f, s->lines[i].name);
		fprintf(f, " &times; %lld</span><span>", s->lines[i].quantity);
		html_put(f, each);
		fputs("</span></li>\n", f);
	}
	fputs("</ul>\n", f);
	page_buttons(f, s);
	if (s->cancel_url) {
		fputs("<a class=\"cancel\" href=\"", f);
		html_put(f, s->cancel_url);
		fputs("\">Cancel</a>\n", f);
	}
	fputs("</main></body></html>\n", f);
	fclose(f);
	return text;
}

/* a page that only says what, with a link back (may be NULL) */
static char *page_note(const char *title, const char *what, const char *link)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	fprintf(f, page_head, title);
	fputs("<h1>", f);
	html_put(f, title);
	fputs("</h1>\n<p>", f);
	html_put(f, what);
	fputs("</p>\n", f);
	if (link) {
		fputs("<a class=\"cancel\" href=\"", f);
		html_put(f, link);
		fputs("\">Back to the shop</a>\n", f);
	}
	fputs("</main></body></html>\n", f);
	fclose(f);
	return text;
}

/* success_url with every {CHECKOUT_SESSION_ID} replaced by the id */
static char *success_location(const struct ps_session *s)
{
	static const char mark[] = "{CHECKOUT_SESSION_ID}";
	const char *p = s->success_url, *hit;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	while ((hit = strstr(p, mark))) {
		fwrite(p, 1, (size_t)(hit - p), f);
		fputs(s->id, f);
		p = hit + sizeof mark - 1;
	}
	fputs(p, f);
	fclose(f);
	return text;
}

static char *page_closed(const struct ps_session *s)
{
	if (s->status == PS_COMPLETE && s->amount_total == 0)
		return page_note("Already complete", "This order is already complete. Nothing "
				 "was charged.", s->success_url);
	if (s->status == PS_COMPLETE && s->pay.status == PI_PROCESSING)
		return page_note("Already paid", "This checkout session is already paid; the "
				 "payment is processing. Nothing more was charged.",
				 s->success_url);
	if (s->status == PS_COMPLETE)
		return page_note("Already paid", "This checkout session is already paid. "
				 "Nothing more was charged.", s->success_url);
	return page_note("Expired", "This checkout session has expired. Nothing was charged.",
			 s->cancel_url);
}

/* the method=TYPE of a POST's form body, or NULL (card) */
static char *page_method(const struct ps_req *rq)
{
	char bad[200];
	json_t *form = form_parse(rq->body, rq->len, bad, sizeof bad);
	const char *m = json_string_value(json_object_get(form, "method"));
	char *method = m && *m ? strdup(m) : NULL;

	json_decref(form);
	return method;
}

/* POST /pay/{id}: pay s with method (lock held) */
static void page_pay(struct ps_session *s, const char *method, struct ps_resp *out)
{
	const char *html = "text/html; charset=utf-8";
	int status;
	const char *why = state_pay(s, method, &status);

	if (why[0] == '\0') {
		resp_text(out, 303, html, page_note("Paid", "Paid. Back to the shop...",
						    s->success_url));
		out->location = success_location(s);
	} else if (status == 400) {
		resp_text(out, 400, html, page_note("Not offered", why, s->cancel_url));
	} else {
		resp_text(out, 409, html, page_closed(s));
	}
	record_write();	/* state_pay may have found it expired */
}

void page_handle(struct ps_req *rq, const char *id, struct ps_resp *out)
{
	const char *html = "text/html; charset=utf-8";
	struct ps_session *s;
	int post = strcmp(rq->method, "POST") == 0;
	char *method = post ? page_method(rq) : NULL;

	pthread_mutex_lock(&ps_lock);
	state_sweep_expiry();
	s = state_find(PS_SESSIONS, id);
	if (!s) {
		resp_text(out, 404, html, page_note("Not found", "There is no such checkout "
						    "session.", NULL));
	} else if (!post && strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0) {
		resp_text(out, 405, html, page_note("Not allowed", "GET or POST only.", NULL));
	} else if (!post) {
		resp_text(out, 200, html, s->status == PS_OPEN ? page_open(s) : page_closed(s));
	} else {
		page_pay(s, method, out);
	}
	pthread_mutex_unlock(&ps_lock);
	free(method);
}
