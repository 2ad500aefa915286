/*
 * refund.c: refunds, made by the API (POST /v1/refunds) or in the
 * Dashboard (the /_paysink/refund control: no idempotency key), and their
 * lives: succeeded at once, or pending and later succeeded or failed.
 *
 *   created succeeded:  refund.created, charge.refunded
 *   created pending:    refund.created (--refund-pending, or the payment's
 *                       /_paysink/refund-pending control)
 *   pending->succeeded: refund.updated, charge.refund.updated, charge.refunded
 *   pending->failed:    refund.failed, refund.updated, charge.refund.updated;
 *                       failure_reason set, and the money counts as not
 *                       refunded again (a dispute on the charge fails its
 *                       pending refunds: charge_for_pending_refund_disputed)
 *
 * At API version 2024-06-20 Stripe's list says refund.created and
 * refund.updated are for cash-balance refunds, and a card refund's change
 * comes as charge.refund.updated; since 2024-10-28 refund.created,
 * refund.updated and refund.failed come for every refund.  paysink sends
 * both, so a box that listens for either is served.
 *
 * A pending refund counts against what is left to refund, as Stripe counts
 * it in the charge's amount_refunded.  Refused as Stripe refuses them: a
 * payment whose charge has not succeeded (a delayed payment still
 * processing, or one that failed: "does not have a successful charge to
 * refund"), a disputed charge (charge_disputed; Stripe's dispute says
 * is_charge_refundable false; paysink keeps refusing after the dispute
 * closes, the strictest reading), a charge refunded in full
 * (charge_already_refunded), more than is left (amount_too_large), and an
 * amount its currency does not allow (currency.c).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paysink.h"

const char *refund_status_name(enum ps_refund_status st)
{
	return st == RE_PENDING ? "pending" : st == RE_SUCCEEDED ? "succeeded" : "failed";
}

json_t *refund_json(const struct ps_refund *r)
{
	json_t *o = json_pack("{s:s,s:s,s:I,s:n,s:s,s:I,s:s,s:O,s:s,s:o,s:n,s:n,s:s,s:n}", "id",
			      r->id, "object", "refund", "amount", (json_int_t)r->amount,
			      "balance_transaction", "charge", r->charge, "created",
			      (json_int_t)r->created, "currency", r->currency, "metadata",
			      r->metadata, "payment_intent", r->pi, "reason", str_or_null(r->reason),
			      "receipt_number", "source_transfer_reversal", "status",
			      refund_status_name(r->status), "transfer_reversal");

	if (r->status == RE_FAILED)
		json_object_set_new(o, "failure_reason", json_string(r->failure_reason));
	return o;
}

/* 0 when s's charge can be refunded amount (0: what is left), else -1 and
 * e; param names the payment as the request named it */
static int refundable(const struct ps_session *s, long long amount, const char *param,
		      struct ps_err *e)
{
	long long left = s->amount_total - s->pay.refunded;
	char a[48], b[48];

	e->store = 1;	/* refused while running: kept under the key */
	if (s->pay.charge_status != CH_SUCCEEDED) {
		err_set(e, 400, "invalid_request_error", NULL, param,
			"This PaymentIntent (%s) does not have a successful charge to refund.",
			s->pay.pi);
		return -1;
	}
	if (s->pay.disputed) {
		err_set(e, 400, "invalid_request_error", "charge_disputed", param,
			"Charge %s has been charged back; cannot issue a refund.", s->pay.charge);
		return -1;
	}
	if (left <= 0) {
		err_set(e, 400, "invalid_request_error", "charge_already_refunded", "",
			"Charge %s has already been refunded.", s->pay.charge);
		return -1;
	}
	if (amount > left) {
		amount_format(a, sizeof a, amount, s->currency);
		amount_format(b, sizeof b, left, s->currency);
		err_set(e, 400, "invalid_request_error", "amount_too_large", "amount",
			"Refund amount (%s) is greater than unrefunded amount on charge (%s)", a, b);
		return -1;
	}
	e->store = 0;
	return currency_amount_ok(s->currency, amount ? amount : left, "amount", e);
}

/* a refund of amount (0: what is left) of s's charge, made and its events
 * queued; NULL when out of memory */
static struct ps_refund *refund_make(struct ps_session *s, long long amount, const char *reason,
				     json_t *meta, const char *idem_key, int dashboard)
{
	struct ps_refund *r = state_new(PS_REFUNDS);

	if (!r)
		return NULL;
	r->amount = amount ? amount : s->amount_total - s->pay.refunded;
	snprintf(r->pi, sizeof r->pi, "%s", s->pay.pi);
	snprintf(r->charge, sizeof r->charge, "%s", s->pay.charge);
	snprintf(r->session, sizeof r->session, "%s", s->id);
	memcpy(r->currency, s->currency, sizeof r->currency);
	r->idempotency_key = idem_key ? strdup(idem_key) : NULL;
	r->reason = reason ? strdup(reason) : NULL;
	r->metadata = meta ? meta : json_object();
	r->dashboard = dashboard;
	r->status = ps_opts.refund_pending || s->pay.refunds_pending_mode ? RE_PENDING
									    : RE_SUCCEEDED;
	s->pay.refunded += r->amount;
	if (r->status == RE_PENDING)
		s->pay.refund_pending += r->amount;
	wh_event("refund.created", s->id, refund_json(r));
	if (r->status == RE_SUCCEEDED)
		wh_event("charge.refunded", s->id, charge_json(s));
	return r;
}

/* the payment a refund's parameters name, or NULL and e */
static struct ps_session *refund_target(json_t *p, struct ps_err *e)
{
	const char *pi, *charge;
	struct ps_session *s;

	if (param_str(p, "payment_intent", "payment_intent", 200, 0, &pi, e) != 0 ||
	    param_str(p, "charge", "charge", 200, 0, &charge, e) != 0)
		return NULL;
	if (!pi && !charge) {
		param_missing(e, "payment_intent");
		return NULL;
	}
	if (pi && charge) {
		err_set(e, 400, "invalid_request_error", NULL, "charge",
			"You cannot specify both charge and payment_intent.");
		return NULL;
	}
	s = state_session_by_pi(pi ? pi : charge);
	if (!s || (pi && strcmp(s->pay.pi, pi) != 0) ||
	    (charge && strcmp(s->pay.charge, charge) != 0)) {
		err_set(e, 404, "invalid_request_error", "resource_missing",
			pi ? "payment_intent" : "charge", "No such %s: '%s'",
			pi ? "payment_intent" : "charge", pi ? pi : charge);
		e->store = 1;
		return NULL;
	}
	return s;
}

struct ps_refund *refund_create(json_t *p, const char *idem_key, struct ps_err *e)
{
	static const char *const keys[] = { "payment_intent", "charge", "amount", "reason",
					    "metadata", "expand", NULL };
	struct ps_session *s;
	struct ps_refund *r;
	const char *reason;
	long long amount = 0;
	json_t *meta = NULL;
	int rc;

	if (param_allowed(p, "", keys, e) != 0 || !(s = refund_target(p, e)))
		return NULL;
	rc = param_int(p, "amount", "amount", 1, PS_AMOUNT_MAX, 0, &amount, e);
	if (rc < 0 || param_str(p, "reason", "reason", 40, 0, &reason, e) != 0)
		return NULL;
	if (reason && strcmp(reason, "duplicate") != 0 && strcmp(reason, "fraudulent") != 0 &&
	    strcmp(reason, "requested_by_customer") != 0) {
		err_set(e, 400, "invalid_request_error", NULL, "reason",
			"Invalid reason: must be one of duplicate, fraudulent, or "
			"requested_by_customer");
		return NULL;
	}
	if (refundable(s, rc == 0 ? amount : 0, json_object_get(p, "charge") ? "charge"
			: "payment_intent", e) != 0 ||
	    param_metadata(p, "metadata", "metadata", &meta, e) != 0)
		return NULL;
	r = refund_make(s, rc == 0 ? amount : 0, reason, meta, idem_key, 0);
	if (!r) {
		json_decref(meta);
		err_set(e, 500, "api_error", NULL, "", "out of memory");
	}
	return r;
}

struct ps_refund *refund_dashboard(struct ps_session *s, long long amount, struct ps_err *e)
{
	struct ps_refund *r;

	if (refundable(s, amount, "payment_intent", e) != 0)
		return NULL;
	r = refund_make(s, amount, NULL, NULL, NULL, 1);
	if (!r)
		err_set(e, 500, "api_error", NULL, "", "out of memory");
	return r;
}

const char *refund_settle(struct ps_refund *r, int ok, const char *failure_reason)
{
	struct ps_session *s = state_find(PS_SESSIONS, r->session);

	if (r->status != RE_PENDING || !s)
		return r->status == RE_SUCCEEDED ? "it has succeeded already"
						 : "it has failed already";
	r->settled_at = ps_now();
	s->pay.refund_pending -= r->amount;
	if (ok) {
		r->status = RE_SUCCEEDED;
		wh_event("refund.updated", s->id, refund_json(r));
		wh_event("charge.refund.updated", s->id, refund_json(r));
		wh_event("charge.refunded", s->id, charge_json(s));
		return "";
	}
	r->status = RE_FAILED;
	snprintf(r->failure_reason, sizeof r->failure_reason, "%s",
		 failure_reason && *failure_reason ? failure_reason : "expired_or_canceled_card");
	s->pay.refunded -= r->amount;
	wh_event("refund.failed", s->id, refund_json(r));
	wh_event("refund.updated", s->id, refund_json(r));
	wh_event("charge.refund.updated", s->id, refund_json(r));
	return "";
}
