/*
 * page.c: the hosted payment page, and the test controls.
 *
 *   GET  /pay/{id}   a small HTML page, no JavaScript, phone-sized first:
 *                    the total, each line's name, quantity and amount, a
 *                    "Pay" button (a form POST to the same URL) and a
 *                    "Cancel" link to cancel_url.  A paid or expired
 *                    session gets a page that says so instead.
 *   POST /pay/{id}   an open session is paid (one charge, a payment intent,
 *                    checkout.session.completed queued) and the answer is
 *                    303 to success_url, {CHECKOUT_SESSION_ID} replaced by
 *                    the id; a paid or expired one gets the page saying so
 *                    (409): a second click never charges twice.
 *
 *   POST /_paysink/pay/{id}      as the Pay button; 200 the session, 409
 *                                JSON when it is not open, 404 unknown
 *   POST /_paysink/expire/{id}   as POST /v1/checkout/sessions/{id}/expire
 *   GET  /_paysink/record        the record (byte for byte the file's text)
 *   POST /_paysink/clock?advance=S   the business clock S seconds on;
 *                                     sessions past expires_at expire
 *   POST /_paysink/verify        body: a payload; headers Stripe-Signature
 *                                and X-Paysink-Secret: {"ok": true|false,
 *                                "reason": ...} by sig_verify, t within
 *                                300 s of the real clock
 */
#define _GNU_SOURCE
#include <errno.h>
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
	"a.cancel{display:block;text-align:center;margin-top:1rem;color:#555}\n"
	"</style></head><body><main>\n<p class=\"mode\">paysink test mode</p>\n";

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
	fprintf(f, "</ul>\n<form method=\"post\" action=\"/pay/%s\">"
		"<button type=\"submit\">Pay</button></form>\n", s->id);
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
	if (s->status == PS_COMPLETE)
		return page_note("Already paid", "This checkout session is already paid. "
				 "Nothing more was charged.", s->success_url);
	return page_note("Expired", "This checkout session has expired. Nothing was charged.",
			 s->cancel_url);
}

void page_handle(struct ps_req *rq, const char *id, struct ps_resp *out)
{
	const char *html = "text/html; charset=utf-8";
	struct ps_session *s;
	int post = strcmp(rq->method, "POST") == 0;

	pthread_mutex_lock(&ps_lock);
	state_sweep_expiry();
	s = state_session_find(id);
	if (!s) {
		resp_text(out, 404, html, page_note("Not found", "There is no such checkout "
						    "session.", NULL));
	} else if (!post && strcmp(rq->method, "GET") != 0 && strcmp(rq->method, "HEAD") != 0) {
		resp_text(out, 405, html, page_note("Not allowed", "GET or POST only.", NULL));
	} else if (!post) {
		resp_text(out, 200, html, s->status == PS_OPEN ? page_open(s) : page_closed(s));
	} else if (state_pay(s)[0] == '\0') {
		resp_text(out, 303, html, page_note("Paid", "Paid. Back to the shop...",
						    s->success_url));
		out->location = success_location(s);
		record_write();
	} else {
		resp_text(out, 409, html, page_closed(s));
		record_write();	/* state_pay may have found it expired */
	}
	pthread_mutex_unlock(&ps_lock);
}

/* ======================== the test controls ============================== */

static void control_error(struct ps_resp *out, int status, const char *code, const char *msg)
{
	struct ps_err e = { 0 };

	err_set(&e, status, "invalid_request_error", code, NULL, "%s", msg);
	resp_json(out, status, err_json(&e));
}

/* POST /_paysink/pay/{id} and /_paysink/expire/{id} (lock held) */
static void control_change(const char *id, int pay, struct ps_resp *out)
{
	struct ps_session *s = state_session_find(id);
	const char *why;
	char msg[200];

	if (!s) {
		snprintf(msg, sizeof msg, "No such checkout.session: '%.100s'", id);
		control_error(out, 404, "resource_missing", msg);
		return;
	}
	why = pay ? state_pay(s) : state_expire(s);
	if (why[0] == '\0') {
		resp_json(out, 200, session_json(s));
		return;
	}
	snprintf(msg, sizeof msg, pay ? "Not paid: %s." : "Not expired: the session is %s.", why);
	control_error(out, 409, "session_not_open", msg);
}

static void control_clock(struct ps_req *rq, struct ps_resp *out)
{
	const char *v = req_query(rq, "advance");
	char *end;
	long long n;

	errno = 0;
	n = v ? strtoll(v, &end, 10) : -1;
	if (!v || errno || end == v || *end || n < 0 || n > 10LL * 365 * 86400) {
		control_error(out, 400, "parameter_invalid_integer",
			      "advance wants whole seconds, 0 to ten years");
		return;
	}
	ps_clock_advance(n);
	state_sweep_expiry();
	resp_json(out, 200, json_pack("{s:I,s:I}", "offset", (json_int_t)ps_clock_offset(), "now",
				      (json_int_t)ps_now()));
}

static void control_verify(struct ps_req *rq, struct ps_resp *out)
{
	const char *why;
	int ok = sig_verify(req_header(rq, "Stripe-Signature"), rq->body, rq->len,
			    req_header(rq, "X-Paysink-Secret"), ps_real_now(), PS_SIG_TOLERANCE,
			    &why);

	resp_json(out, 200, json_pack("{s:b,s:s}", "ok", ok, "reason", why));
}

void control_handle(struct ps_req *rq, struct ps_resp *out)
{
	const char *p = rq->path + strlen("/_paysink/");
	int post = strcmp(rq->method, "POST") == 0;

	if (post && strcmp(p, "verify") == 0) {
		control_verify(rq, out);
		return;
	}
	pthread_mutex_lock(&ps_lock);
	state_sweep_expiry();
	if (!post && strcmp(rq->method, "GET") == 0 && strcmp(p, "record") == 0) {
		char *text = record_text();

		resp_text(out, text ? 200 : 500, NULL, text ? text : strdup("{}"));
	} else if (post && strncmp(p, "pay/", 4) == 0) {
		control_change(p + 4, 1, out);
		record_write();
	} else if (post && strncmp(p, "expire/", 7) == 0) {
		control_change(p + 7, 0, out);
		record_write();
	} else if (post && strcmp(p, "clock") == 0) {
		control_clock(rq, out);
		record_write();
	} else {
		control_error(out, 404, NULL, "POST /_paysink/pay/{id}, /_paysink/expire/{id}, "
			      "/_paysink/clock?advance=S, /_paysink/verify or GET /_paysink/record");
	}
	pthread_mutex_unlock(&ps_lock);
}
