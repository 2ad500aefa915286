/*
 * payment.c: a session's payment, as Stripe runs one made through Checkout
 * (API version 2024-06-20): its payment method types, the payment intent
 * and the charge, instant or delayed, and their JSON.
 *
 *   card and the other instant methods: the session completes paid, the
 *       payment intent "succeeded", its charge "succeeded";
 *   a delayed method (SEPA Direct Debit, ACH, Bacs, BECS, ... Stripe's
 *       "delayed notification" methods): the session completes "unpaid",
 *       the payment intent is "processing" with a "pending" charge
 *       (checkout.session.completed says so); later it settles:
 *         succeeded: payment intent "succeeded", charge "succeeded",
 *                    session "paid", checkout.session.async_payment_succeeded
 *         failed:    payment intent "requires_payment_method" (as Stripe
 *                    does: the intent could be paid again, the session
 *                    cannot), charge "failed", the session stays
 *                    complete and unpaid, checkout.session.async_payment_failed
 *   a total of 0 (a no-cost order, API version 2023-08-16 and later): no
 *       payment method is asked for, no payment intent is made, a Customer
 *       is, and the session completes "no_payment_required".
 *
 * payment_method_types takes Stripe's values of 2024-06-20 (stripe-node
 * v16's SessionCreateParams.PaymentMethodType) and refuses a method whose
 * currencies, where Stripe's payment method pages name them, do not include
 * the session's.  Without it, Stripe offers what the Dashboard enables;
 * paysink offers card and, where the currency has one, its bank debit, so
 * that delayed payments can be tested without asking for them.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paysink.h"

static const struct pm_type {
	const char *name;
	const char *label;		/* on the hosted page */
	int delayed;			/* settles later */
	const char *currencies;		/* those Stripe names, or "" for not checked */
} pm_types[] = {
	{ "acss_debit", "Canadian pre-authorized debit", 1, "cad usd" },
	{ "affirm", "Affirm", 0, "" },
	{ "afterpay_clearpay", "Afterpay", 0, "" },
	{ "alipay", "Alipay", 0, "" },
	{ "amazon_pay", "Amazon Pay", 0, "" },
	{ "au_becs_debit", "BECS Direct Debit", 1, "aud" },
	{ "bacs_debit", "Bacs Direct Debit", 1, "gbp" },
	{ "bancontact", "Bancontact", 0, "eur" },
	{ "blik", "BLIK", 0, "pln" },
	{ "boleto", "Boleto", 1, "brl" },
	{ "card", "Card", 0, "" },
	{ "cashapp", "Cash App Pay", 0, "usd" },
	{ "customer_balance", "Bank transfer", 1, "" },
	{ "eps", "EPS", 0, "eur" },
	{ "fpx", "FPX", 0, "myr" },
	{ "giropay", "giropay", 0, "eur" },
	{ "grabpay", "GrabPay", 0, "myr sgd" },
	{ "ideal", "iDEAL", 0, "eur" },
	{ "klarna", "Klarna", 0, "" },
	{ "konbini", "Konbini", 1, "jpy" },
	{ "link", "Link", 0, "" },
	{ "mobilepay", "MobilePay", 0, "dkk eur nok sek" },
	{ "multibanco", "Multibanco", 1, "eur" },
	{ "oxxo", "OXXO", 1, "mxn" },
	{ "p24", "Przelewy24", 0, "eur pln" },
	{ "paynow", "PayNow", 0, "sgd" },
	{ "paypal", "PayPal", 0, "" },
	{ "pix", "Pix", 0, "brl" },
	{ "promptpay", "PromptPay", 0, "thb" },
	{ "revolut_pay", "Revolut Pay", 0, "" },
	{ "sepa_debit", "SEPA Direct Debit", 1, "eur" },
	{ "sofort", "Sofort", 1, "eur" },
	{ "swish", "Swish", 0, "sek" },
	{ "twint", "TWINT", 0, "chf" },
	{ "us_bank_account", "US bank account (ACH Direct Debit)", 1, "usd" },
	{ "wechat_pay", "WeChat Pay", 0, "" },
	{ "zip", "Zip", 0, "" },
};

#define N_PM_TYPES (sizeof pm_types / sizeof pm_types[0])

static const struct pm_type *pm_find(const char *name)
{
	size_t i;

	for (i = 0; i < N_PM_TYPES; i++)
		if (strcmp(pm_types[i].name, name) == 0)
			return &pm_types[i];
	return NULL;
}

int pm_type_delayed(const char *type)
{
	const struct pm_type *t = pm_find(type);

	return t && t->delayed;
}

const char *pm_type_label(const char *type)
{
	const struct pm_type *t = pm_find(type);

	return t ? t->label : type;
}

/* "acss_debit, affirm, ..., or zip", as Stripe lists an enum's values */
static const char *pm_names(void)
{
	static char list[1024];
	size_t i, n = 0;

	if (list[0])
		return list;
	for (i = 0; i < N_PM_TYPES; i++)
		n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
				      i == 0 ? "" : i + 1 == N_PM_TYPES ? ", or " : ", ",
				      pm_types[i].name);
	return list;
}

/* cur is one of t's currencies (or t names none) */
static int pm_takes(const struct pm_type *t, const char *cur)
{
	const char *p = t->currencies;

	if (!*p)
		return 1;
	for (; (p = strstr(p, cur)); p += 3)
		if ((p == t->currencies || p[-1] == ' ') && (p[3] == ' ' || p[3] == '\0'))
			return 1;
	return 0;
}

static json_t *pm_default(const char *currency)
{
	static const char *const debit[][2] = { { "eur", "sepa_debit" }, { "usd", "us_bank_account" },
						{ "gbp", "bacs_debit" }, { "aud", "au_becs_debit" },
						{ "cad", "acss_debit" } };
	json_t *a = json_pack("[s]", "card");
	size_t i;

	for (i = 0; i < sizeof debit / sizeof debit[0]; i++)
		if (strcmp(debit[i][0], currency) == 0)
			json_array_append_new(a, json_string(debit[i][1]));
	return a;
}

/* one value of payment_method_types, checked, appended to out */
static int pm_one(json_t *v, const char *label, const char *currency, json_t *out,
		  struct ps_err *e)
{
	const struct pm_type *t = json_is_string(v) ? pm_find(json_string_value(v)) : NULL;
	size_t i;
	json_t *have;

	if (!t) {
		err_set(e, 400, "invalid_request_error", NULL, label,
			"Invalid %s: must be one of %s", label, pm_names());
		return -1;
	}
	if (!pm_takes(t, currency)) {
		/* the wording of Stripe's payment intents; unconfirmed for Checkout */
		err_set(e, 400, "invalid_request_error", NULL, "payment_method_types",
			"The currency provided (%s) is invalid. Payments with %s support the "
			"following currencies: %s.", currency, t->name, t->currencies);
		return -1;
	}
	json_array_foreach(out, i, have)
		if (strcmp(json_string_value(have), t->name) == 0)
			return 0;
	json_array_append_new(out, json_string(t->name));
	return 0;
}

int pm_types_parse(json_t *p, const char *currency, json_t **out, struct ps_err *e)
{
	json_t *v = json_object_get(p, "payment_method_types"), *x;
	char label[64];
	size_t n, i;

	*out = NULL;
	if (!v || (json_is_string(v) && json_string_length(v) == 0)) {
		*out = pm_default(currency);
		return 0;
	}
	/* "a[]=x" makes an array, "a[0]=x" (as stripe-node sends) an object */
	n = json_is_array(v) ? json_array_size(v) : json_is_object(v) ? json_object_size(v) : 0;
	if (n == 0) {
		err_set(e, 400, "invalid_request_error", NULL, "payment_method_types",
			"Invalid array: payment_method_types must be an array of strings");
		return -1;
	}
	*out = json_array();
	for (i = 0; i < n; i++) {
		char idx[24];

		snprintf(idx, sizeof idx, "%zu", i);
		x = json_is_array(v) ? json_array_get(v, i) : json_object_get(v, idx);
		snprintf(label, sizeof label, "payment_method_types[%zu]", i);
		if (pm_one(x, label, currency, *out, e) != 0) {
			json_decref(*out);
			*out = NULL;
			return -1;
		}
	}
	return 0;
}

/* ======================== paying ========================================= */

static int offered(const struct ps_session *s, const char *type)
{
	size_t i;
	json_t *v;

	json_array_foreach(s->pm_types, i, v)
		if (strcmp(json_string_value(v), type) == 0)
			return 1;
	return 0;
}

/* a no-cost order: nothing to pay, a Customer made, complete */
static void pay_nothing(struct ps_session *s)
{
	ps_rand_id(s->customer, sizeof s->customer, "cus_", 14);
	s->status = PS_COMPLETE;
	s->completed_at = ps_now();
	wh_event("checkout.session.completed", s->id, session_json(s));
}

const char *state_pay(struct ps_session *s, const char *method, int *status)
{
	struct ps_payment *p = &s->pay;

	*status = 409;
	if (s->status == PS_OPEN && ps_now() >= s->expires_at)
		state_expire(s);
	if (s->status == PS_EXPIRED)
		return "this checkout session has expired";
	if (s->status == PS_COMPLETE || s->charges > 0 || p->pi[0])
		return "this checkout session is already paid";
	if (s->amount_total == 0) {
		pay_nothing(s);
		return "";
	}
	if (!method || !*method)
		method = "card";
	if (!offered(s, method)) {
		*status = 400;
		return pm_find(method) ? "this checkout session does not offer that payment method"
				       : "no such payment method type";
	}
	s->status = PS_COMPLETE;
	s->completed_at = p->created = ps_now();
	snprintf(p->method, sizeof p->method, "%s", method);
	ps_rand_id(p->pi, sizeof p->pi, "pi_3", 24);
	ps_rand_id(p->charge, sizeof p->charge, "ch_3", 24);
	ps_rand_id(p->pm, sizeof p->pm, "pm_1", 24);
	if (pm_type_delayed(method)) {
		p->status = PI_PROCESSING;
		p->charge_status = CH_PENDING;
	} else {
		p->status = PI_SUCCEEDED;
		p->charge_status = CH_SUCCEEDED;
		s->charges = 1;
		s->paid_at = p->created;
	}
	wh_event("checkout.session.completed", s->id, session_json(s));
	return "";
}

const char *payment_settle(struct ps_session *s, int ok, const char *failure_code)
{
	struct ps_payment *p = &s->pay;

	if (p->status != PI_PROCESSING)
		return p->pi[0] ? "its payment is not processing" : "it has no payment";
	p->settled_at = ps_now();
	if (ok) {
		p->status = PI_SUCCEEDED;
		p->charge_status = CH_SUCCEEDED;
		s->charges = 1;
		s->paid_at = p->settled_at;
		wh_event("checkout.session.async_payment_succeeded", s->id, session_json(s));
	} else {
		p->status = PI_REQUIRES_PM;
		p->charge_status = CH_FAILED;
		snprintf(p->failure_code, sizeof p->failure_code, "%s",
			 failure_code && *failure_code ? failure_code : "insufficient_funds");
		wh_event("checkout.session.async_payment_failed", s->id, session_json(s));
	}
	return "";
}

/* ======================== JSON =========================================== */

const char *pi_status_name(enum ps_pi_status st)
{
	static const char *const names[] = { "requires_payment_method", "processing", "succeeded",
					     "requires_payment_method", "canceled" };

	return names[st];
}

const char *charge_status_name(enum ps_charge_status st)
{
	static const char *const names[] = { "pending", "pending", "succeeded", "failed" };

	return names[st];
}

static json_t *null_fields(json_t *o, const char *const *names)
{
	for (; *names; names++)
		json_object_set_new(o, *names, json_null());
	return o;
}

/* the failure Stripe reports of a failed payment (its exact message for a
 * bank debit's failure is not published) */
static json_t *payment_error(const struct ps_session *s)
{
	if (s->pay.charge_status != CH_FAILED)
		return json_null();
	return json_pack("{s:s,s:s,s:s,s:s}", "charge", s->pay.charge, "code",
			 s->pay.failure_code, "message", "The payment failed.", "type",
			 "card_error");
}

json_t *pi_json(const struct ps_session *s)
{
	static const char *const nulls[] = { "application", "application_fee_amount",
					     "automatic_payment_methods", "canceled_at",
					     "cancellation_reason", "customer", "description",
					     "invoice", "next_action", "on_behalf_of",
					     "payment_method_configuration_details", "processing",
					     "receipt_email", "review", "setup_future_usage",
					     "shipping", "statement_descriptor",
					     "statement_descriptor_suffix", "transfer_data",
					     "transfer_group", NULL };
	const struct ps_payment *p = &s->pay;
	json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:{s:{}},s:I,s:s,s:s,s:I,s:s}", "id", p->pi,
			      "object", "payment_intent", "amount", (json_int_t)s->amount_total,
			      "amount_capturable", (json_int_t)0, "amount_details", "tip",
			      "amount_received",
			      (json_int_t)(p->status == PI_SUCCEEDED ? s->amount_total : 0),
			      "capture_method", "automatic", "confirmation_method", "automatic",
			      "created", (json_int_t)p->created, "currency", s->currency);

	null_fields(o, nulls);
	json_object_set_new(o, "last_payment_error", payment_error(s));
	json_object_set_new(o, "latest_charge", json_string(p->charge));
	json_object_set_new(o, "livemode", json_false());
	json_object_set_new(o, "metadata", json_deep_copy(s->pi_metadata));
	/* a failed payment's method is taken off the intent, which waits for
	 * another */
	json_object_set_new(o, "payment_method",
			    p->status == PI_REQUIRES_PM ? json_null() : json_string(p->pm));
	json_object_set_new(o, "payment_method_options", json_object());
	json_object_set_new(o, "payment_method_types", json_deep_copy(s->pm_types));
	json_object_set_new(o, "status", json_string(pi_status_name(p->status)));
	return o;
}

static json_t *charge_method(const struct ps_session *s)
{
	json_t *details = strcmp(s->pay.method, "card") == 0
		? json_pack("{s:s,s:s,s:i,s:i,s:s,s:s,s:s}", "brand", "visa", "country", "US",
			    "exp_month", 12, "exp_year", 2034, "funding", "credit", "last4", "4242",
			    "network", "visa")
		: json_pack("{s:s}", "last4", "3000");

	return json_pack("{s:o,s:s}", s->pay.method, details, "type", s->pay.method);
}

json_t *charge_json(const struct ps_session *s)
{
	static const char *const nulls[] = { "application", "application_fee",
					     "application_fee_amount", "customer", "description",
					     "failure_balance_transaction", "invoice", "on_behalf_of",
					     "receipt_email", "receipt_number", "receipt_url",
					     "review", "shipping", "source", "source_transfer",
					     "statement_descriptor", "statement_descriptor_suffix",
					     "transfer_data", "transfer_group", NULL };
	const struct ps_payment *p = &s->pay;
	int failed = p->charge_status == CH_FAILED, ok = p->charge_status == CH_SUCCEEDED;
	/* the refunds list is not there unless expanded, since 2022-11-15 */
	json_t *o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:o,s:b,s:I,s:s,s:b}", "id", p->charge,
			      "object", "charge", "amount", (json_int_t)s->amount_total,
			      "amount_captured", (json_int_t)(failed ? 0 : s->amount_total),
			      "amount_refunded", (json_int_t)p->refunded, "billing_details",
			      json_pack("{s:n,s:o,s:n,s:n}", "address", "email",
					str_or_null(s->customer_email), "name", "phone"),
			      "captured", !failed, "created", (json_int_t)p->created, "currency",
			      s->currency, "disputed", p->disputed);

	null_fields(o, nulls);
	json_object_set_new(o, "balance_transaction", json_null());
	json_object_set_new(o, "calculated_statement_descriptor", json_string("PAYSINK"));
	json_object_set_new(o, "failure_code", failed ? json_string(p->failure_code) : json_null());
	json_object_set_new(o, "failure_message",
			    failed ? json_string("The payment failed.") : json_null());
	json_object_set_new(o, "fraud_details", json_object());
	json_object_set_new(o, "livemode", json_false());
	json_object_set_new(o, "metadata", json_deep_copy(s->pi_metadata));
	json_object_set_new(o, "outcome", !ok ? json_null() :
			    json_pack("{s:s,s:n,s:s,s:s,s:s}", "network_status",
				      "approved_by_network", "reason", "risk_level", "normal",
				      "seller_message", "Payment complete.", "type", "authorized"));
	json_object_set_new(o, "paid", json_boolean(ok));
	json_object_set_new(o, "payment_intent", json_string(p->pi));
	json_object_set_new(o, "payment_method", json_string(p->pm));
	json_object_set_new(o, "payment_method_details", charge_method(s));
	json_object_set_new(o, "refunded",
			    json_boolean(p->refunded > 0 && p->refunded >= s->amount_total));
	json_object_set_new(o, "status", json_string(charge_status_name(p->charge_status)));
	return o;
}
