/*
 * dispute.c: chargebacks.  A cardholder disputes a paid charge (the
 * /_paysink/dispute control): a dispute dp_... "needs_response", the
 * charge disputed=true, and charge.dispute.created with the dispute; it
 * closes won or lost (/_paysink/dispute-close): charge.dispute.closed.
 * The dispute is shaped as Stripe's of API version 2024-06-20 (stripe-node
 * v16's Dispute, and stripe/openapi's fixture); a charge has one dispute
 * at the most, as at Stripe.  While a charge is disputed it cannot be
 * refunded (refund.c), and its pending refunds fail
 * (charge_for_pending_refund_disputed).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paysink.h"

#define DUE_DAYS 7	/* evidence_details.due_by: a week to answer */

/* Stripe's dispute reasons */
static const char *const reasons[] = {
	"bank_cannot_process", "check_returned", "credit_not_processed", "customer_initiated",
	"debit_not_authorized", "duplicate", "fraudulent", "general", "incorrect_account_details",
	"insufficient_funds", "product_not_received", "product_unacceptable",
	"subscription_canceled", "unrecognized", NULL
};

const char *dispute_status_name(enum ps_dispute_status st)
{
	return st == DP_NEEDS_RESPONSE ? "needs_response" : st == DP_WON ? "won" : "lost";
}

static int reason_known(const char *reason)
{
	size_t i;

	for (i = 0; reasons[i]; i++)
		if (strcmp(reasons[i], reason) == 0)
			return 1;
	return 0;
}

/* the charge's pending refunds fail, as Stripe fails them when the charge
 * is disputed */
static void fail_pending_refunds(const struct ps_session *s)
{
	size_t i;

	for (i = 0; i < state_count(PS_REFUNDS); i++) {
		struct ps_refund *r = state_at(PS_REFUNDS, i);

		if (r->status == RE_PENDING && strcmp(r->charge, s->pay.charge) == 0)
			refund_settle(r, 0, "charge_for_pending_refund_disputed");
	}
}

struct ps_dispute *dispute_open(struct ps_session *s, long long amount, const char *reason,
				struct ps_err *e)
{
	struct ps_dispute *d;

	if (!reason || !*reason)
		reason = "fraudulent";
	if (!reason_known(reason)) {
		err_set(e, 400, "invalid_request_error", NULL, "reason",
			"Invalid reason: must be one of bank_cannot_process, check_returned, "
			"credit_not_processed, customer_initiated, debit_not_authorized, duplicate, "
			"fraudulent, general, incorrect_account_details, insufficient_funds, "
			"product_not_received, product_unacceptable, subscription_canceled, or "
			"unrecognized");
		return NULL;
	}
	if (s->pay.charge_status != CH_SUCCEEDED || s->pay.disputed) {
		err_set(e, 409, "invalid_request_error", NULL, NULL, "Charge %s %s.", s->pay.charge,
			s->pay.disputed ? "is disputed already"
					: "has not succeeded: nothing to dispute");
		return NULL;
	}
	if (amount < 0 || amount > s->amount_total) {
		err_set(e, 400, "invalid_request_error", NULL, "amount",
			"amount wants 1 to %lld, the charge's amount", s->amount_total);
		return NULL;
	}
	if (!(d = state_new(PS_DISPUTES))) {
		err_set(e, 500, "api_error", NULL, NULL, "out of memory");
		return NULL;
	}
	snprintf(d->pi, sizeof d->pi, "%s", s->pay.pi);
	snprintf(d->charge, sizeof d->charge, "%s", s->pay.charge);
	snprintf(d->session, sizeof d->session, "%s", s->id);
	memcpy(d->currency, s->currency, sizeof d->currency);
	snprintf(d->reason, sizeof d->reason, "%s", reason);
	d->amount = amount ? amount : s->amount_total;
	d->status = DP_NEEDS_RESPONSE;
	s->pay.disputed = 1;
	wh_event("charge.dispute.created", s->id, dispute_json(d));
	fail_pending_refunds(s);
	return d;
}

const char *dispute_close(struct ps_dispute *d, int won)
{
	if (d->status != DP_NEEDS_RESPONSE)
		return "it is closed already";
	d->status = won ? DP_WON : DP_LOST;
	d->closed_at = ps_now();
	wh_event("charge.dispute.closed", d->session, dispute_json(d));
	return "";
}

/* evidence: every field Stripe lists, none given yet */
static json_t *evidence(void)
{
	static const char *const fields[] = {
		"access_activity_log", "billing_address", "cancellation_policy",
		"cancellation_policy_disclosure", "cancellation_rebuttal", "customer_communication",
		"customer_email_address", "customer_name", "customer_purchase_ip",
		"customer_signature", "duplicate_charge_documentation",
		"duplicate_charge_explanation", "duplicate_charge_id", "product_description",
		"receipt", "refund_policy", "refund_policy_disclosure",
		"refund_refusal_explanation", "service_date", "service_documentation",
		"shipping_address", "shipping_carrier", "shipping_date", "shipping_documentation",
		"shipping_tracking_number", "uncategorized_file", "uncategorized_text", NULL
	};
	json_t *o = json_object();
	size_t i;

	for (i = 0; fields[i]; i++)
		json_object_set_new(o, fields[i], json_null());
	return o;
}

json_t *dispute_json(const struct ps_dispute *d)
{
	return json_pack("{s:s,s:s,s:I,s:[],s:s,s:I,s:s,s:o,s:{s:I,s:b,s:b,s:i},s:b,s:b,s:{},"
			 "s:s,s:{s:{s:s,s:s,s:s},s:s},s:s,s:s}",
			 "id", d->id, "object", "dispute", "amount", (json_int_t)d->amount,
			 "balance_transactions", "charge", d->charge, "created",
			 (json_int_t)d->created, "currency", d->currency, "evidence", evidence(),
			 "evidence_details", "due_by", (json_int_t)(d->created + DUE_DAYS * 86400),
			 "has_evidence", 0, "past_due", 0, "submission_count", 0,
			 "is_charge_refundable", 0, "livemode", 0, "metadata", "payment_intent",
			 d->pi, "payment_method_details", "card", "brand", "visa", "case_type",
			 "chargeback", "network_reason_code", "10.4", "type", "card", "reason",
			 d->reason, "status", dispute_status_name(d->status));
}
