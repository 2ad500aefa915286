/*
 * api_changes.c: an order's changes at the box office: resend its tickets,
 * give it a new address, cancel it (orders.h does each in one transaction
 * with its job).  The token's name is who made the change.
 *
 * A resend is a new intent each time: a client that retries one (a lost
 * answer) sends the same Idempotency-Key, and the first answer comes back
 * instead of a second resend; the key is optional, as a person who presses
 * the button twice means it.  A new address and a cancellation reach a
 * state, so a second one changes nothing by itself.
 */
#define _GNU_SOURCE
#include "api_int.h"

#include <stdlib.h>
#include <string.h>

#include "orders.h"

/* a change's refusal: no order 404, a state that forbids it 409, bad
 * input 400, a limit 429, the database's failure 500/503 */
static void change_refused(struct call *c, enum sd_result r)
{
	if (r == SD_LIMITED)
		api_res_fail(c->res, 429, err_msg(), "id");
	else if (r == SD_NOT_FOUND)
		api_res_fail(c->res, 404, "no such order", NULL);
	else if (r == SD_CONFLICT)
		api_res_fail(c->res, 409, err_msg(), "id");
	else if (r == SD_INVALID)
		api_res_fail(c->res, 400, err_msg(), NULL);
	else
		api_res_internal(c->res, c->req, r);
}

static enum sd_result resend_write(struct call *c, void *arg, int *status, char **body)
{
	int64_t *retry_after_ms = arg, n = 0;
	char id[ORDER_ID_MAX];
	enum sd_result r;

	if ((r = order_resend(c->db, c->id, c->grant.name, &c->a->resend_limit, &n,
			      retry_after_ms)) != SD_OK)
		return r;
	order_id_norm(c->id, id);	/* the order as made, whatever case was typed */
	*status = 202;
	*body = api_json_take(json_pack("{s:s, s:I}", "id", id, "resend", (json_int_t)n));
	return SD_OK;
}

/* POST /v1/orders/{id}/resend: the tickets again, to the order's address
 * as it is when the email goes */
void api_post_resend(struct call *c)
{
	int64_t retry_after_ms = 0;
	struct api_keyed k = { resend_write, &retry_after_ms, change_refused, 0, 0 };
	struct api_error err;
	enum sd_result r;

	if (!api_order_id_valid(c->id)) {
		api_res_fail(c->res, 404, "no such order", NULL);
		return;
	}
	/* no body, or an object with nothing a resend does not know */
	if ((r = api_parse_resend(c->req->body, c->req->body_len, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	api_keyed_write(c, &k);
	if (c->res->status == 429 && retry_after_ms > 0)
		snprintf(c->res->retry_after, sizeof c->res->retry_after, "%d",
			 (int)((retry_after_ms + 999) / 1000 % 100000000));
}

/* PATCH /v1/orders/{id} {"email"}: the address from now on; the order as
 * it then is */
void api_patch_order(struct call *c)
{
	struct api_error err;
	struct order_detail *d;
	char email[256];
	enum sd_result r;
	int changed = 0;

	if (!api_order_id_valid(c->id)) {
		api_res_fail(c->res, 404, "no such order", NULL);
		return;
	}
	if ((r = api_parse_email(c->req->body, c->req->body_len, email, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	if ((r = order_set_email(c->db, c->id, email, c->grant.name, &changed)) != SD_OK) {
		change_refused(c, r);
		return;
	}
	if (!api_order_of_call(c, &d))
		return;
	api_res_json(c->res, 200, api_order_json(d));
	order_detail_free(d);
}

/* POST /v1/orders/{id}/cancel {"reason"}: cancelled once; an order with an
 * admitted ticket is not (409, the tickets named) */
void api_post_cancel(struct call *c)
{
	struct order_cancel_result res;
	struct api_error err;
	char reason[ORDER_REASON_MAX + 1];
	char id[ORDER_ID_MAX];
	json_t *o, *admitted;
	enum sd_result r;
	int i;

	if (!api_order_id_valid(c->id)) {
		api_res_fail(c->res, 404, "no such order", NULL);
		return;
	}
	if ((r = api_parse_cancel(c->req->body, c->req->body_len, reason, &err)) != SD_OK) {
		api_bad_body(c, r, &err);
		return;
	}
	r = order_cancel(c->db, c->id, c->grant.name, reason[0] ? reason : NULL, &res);
	if (r == SD_CONFLICT) {
		admitted = json_array();
		for (i = 0; i < res.n_admitted; i++)
			json_array_append_new(admitted, json_pack("{s:s, s:I, s:o}", "seat",
					res.admitted[i].seat, "scanned_at",
					(json_int_t)res.admitted[i].scanned_at, "scanned_by",
					api_json_text(res.admitted[i].scanned_by)));
		o = json_pack("{s:s, s:s, s:o}", "error", err_msg(), "field", "id", "admitted",
			      admitted);
		api_res_json(c->res, 409, o);
		return;
	}
	if (r != SD_OK) {
		change_refused(c, r);
		return;
	}
	order_id_norm(c->id, id);	/* the order as made, whatever case was typed */
	api_res_json(c->res, 200, json_pack("{s:s, s:b, s:b, s:I, s:o}", "id", id, "cancelled", 1,
					    "already", res.already, "seats_freed",
					    (json_int_t)res.seats_freed, "refund",
					    res.refund == ORDER_REFUND_PROVIDER ? json_string("provider")
					    : res.refund == ORDER_REFUND_WINDOW ? json_string("window")
					    : json_null()));
}
