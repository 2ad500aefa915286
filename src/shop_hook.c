/*
 * shop_hook.c: the provider's webhook endpoint (shop_hook.h).
 */
#define _GNU_SOURCE
#include "shop_hook.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "shop_pay.h"
#include "stripe.h"

static void answer(struct http_response *res, int status, const char *fmt, const char *a)
{
	res->status = status;
	snprintf(res->content_type, sizeof res->content_type, "application/json");
	if (asprintf(&res->body, fmt, a ? a : "") < 0)
		res->body = NULL;
	res->body_len = res->body ? strlen(res->body) : 0;
}

/* a message's words in a JSON string: printable ASCII without quotes */
static void jsonable(char *dst, size_t size, const char *src)
{
	size_t i;

	for (i = 0; src[i] && i + 1 < size; i++)
		dst[i] = src[i] >= 0x20 && src[i] < 0x7f && src[i] != '"' && src[i] != '\\'
			? src[i] : '?';
	dst[i] = '\0';
}

/* the event applied; its outcome, or the failure as an answer */
static void apply(struct db *db, const struct stripe_event *ev, int64_t pending_max_ms,
		  struct http_response *res)
{
	enum pay_outcome out = PAY_IGNORED;
	enum sd_result r;
	char why[200];

	r = shop_pay_event(db, ev, pending_max_ms, &out);
	if (r == SD_NOT_FOUND) {
		answer(res, 200, "{\"received\":true,\"ignored\":\"%s\"}", "no hold has this session");
		return;
	}
	if (r != SD_OK) {
		jsonable(why, sizeof why, err_msg());
		log_event(LOG_WARN, "webhook not applied", "event=%s err=\"%s\"", ev->id, why);
		snprintf(res->retry_after, sizeof res->retry_after, "5");
		answer(res, 503, "{\"error\":\"%s\"}", why);
		return;
	}
	if (out == PAY_IGNORED) {
		answer(res, 200, "{\"received\":true,\"ignored\":\"%s\"}", "nothing for this box");
		return;
	}
	log_event(LOG_INFO, "webhook applied", "event=%s type=%s outcome=%s", ev->id, ev->type,
		  pay_outcome_name(out));
	answer(res, 200, "{\"received\":true,\"outcome\":\"%s\"}", pay_outcome_name(out));
}

void shop_hook(struct db *db, char *const *secrets, int n_secrets, int64_t pending_max_ms,
	       const struct http_request *req, struct http_response *res)
{
	const char *sig = http_request_header(req, "Stripe-Signature");
	struct stripe_event ev;
	char why[200];

	if (strcmp(req->method, "POST") != 0) {
		answer(res, 405, "{\"error\":\"%s\"}", "POST only");
		return;
	}
	/* first the signature, over the bytes as they came: nothing else
	 * reads the body before it passes */
	if (stripe_hook_verify((const char *const *)secrets, n_secrets, sig, req->body,
			       req->body_len, clock_now_ms() / 1000) != SD_OK) {
		jsonable(why, sizeof why, err_msg());
		log_event(LOG_WARN, "webhook refused", "client=%s why=\"%s\"", req->client, why);
		answer(res, 400, "{\"error\":\"%s\"}", why);
		return;
	}
	if (stripe_hook_event(req->body, req->body_len, &ev) != SD_OK) {
		answer(res, 400, "{\"error\":\"%s\"}", "the body is no Stripe event");
		return;
	}
	if (ev.kind == STRIPE_OBJ_OTHER) {
		answer(res, 200, "{\"received\":true,\"ignored\":\"%s\"}", "not a payment's event");
		return;
	}
	if (!db) {
		snprintf(res->retry_after, sizeof res->retry_after, "5");
		answer(res, 503, "{\"error\":\"%s\"}", "the database is out of reach");
		return;
	}
	apply(db, &ev, pending_max_ms, res);
}
