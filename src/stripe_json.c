/*
 * stripe_json.c: Stripe's objects as the box reads them (stripe.h): a
 * Checkout Session, a payment intent, a refund, a charge, a dispute, from
 * an API answer or a webhook's data.object, by the same code.
 *
 * Every amount Stripe reports is in its units for the currency; it is read
 * back into ISO minor units here (money.h), and an amount that is no whole
 * number of them, or a currency Stripe does not take, reads as -1, which no
 * hold asks for.
 */
#include "stripe.h"

#include <jansson.h>
#include <string.h>

#include "money.h"
#include "text.h"

static const char *str_of(json_t *o, const char *f)
{
	json_t *v = o ? json_object_get(o, f) : NULL;

	return json_is_string(v) ? json_string_value(v) : "";
}

/* an id field that may be expanded into its object */
static void id_of(json_t *o, const char *f, char *out, size_t size)
{
	json_t *v = json_object_get(o, f);

	if (json_is_string(v))
		text_copy(out, size, json_string_value(v));
	else if (json_is_object(v))
		text_copy(out, size, str_of(v, "id"));
	else
		out[0] = '\0';
}

/* Stripe's currency ("eur") as ISO's ("EUR") */
static void currency_of(json_t *o, char *out)
{
	size_t i;

	text_copy(out, 4, str_of(o, "currency"));
	for (i = 0; out[i]; i++)
		if (out[i] >= 'a' && out[i] <= 'z')
			out[i] = (char)(out[i] - 'a' + 'A');
}

/* an amount field in ISO minor units of cur; -1 when it is none */
static int64_t amount_of(json_t *o, const char *f, const char *cur)
{
	json_t *v = json_object_get(o, f);
	int64_t minor;

	if (!json_is_integer(v) ||
	    money_stripe_minor(cur, (int64_t)json_integer_value(v), &minor) != SD_OK)
		return -1;
	return minor;
}

void stripe_session_from_json(const void *obj, struct stripe_session *x)
{
	json_t *o = (json_t *)obj;

	memset(x, 0, sizeof *x);
	text_copy(x->id, sizeof x->id, str_of(o, "id"));
	text_copy(x->url, sizeof x->url, str_of(o, "url"));
	text_copy(x->status, sizeof x->status, str_of(o, "status"));
	text_copy(x->payment_status, sizeof x->payment_status, str_of(o, "payment_status"));
	text_copy(x->client_reference_id, sizeof x->client_reference_id,
		  str_of(o, "client_reference_id"));
	currency_of(o, x->currency);
	id_of(o, "payment_intent", x->payment_ref, sizeof x->payment_ref);
	x->amount_total = amount_of(o, "amount_total", x->currency);
}

enum stripe_pay stripe_session_pay(const struct stripe_session *x)
{
	if (strcmp(x->status, "complete") == 0) {
		if (strcmp(x->payment_status, "paid") == 0)
			return STRIPE_PAY_PAID;
		if (strcmp(x->payment_status, "no_payment_required") == 0)
			return STRIPE_PAY_FREE;
		return STRIPE_PAY_PENDING;
	}
	return strcmp(x->status, "expired") == 0 ? STRIPE_PAY_ENDED : STRIPE_PAY_OPEN;
}

int stripe_session_paid(const struct stripe_session *x)
{
	return stripe_session_pay(x) == STRIPE_PAY_PAID;
}

void stripe_payment_from_json(const void *obj, struct stripe_payment *x)
{
	json_t *o = (json_t *)obj;

	memset(x, 0, sizeof *x);
	text_copy(x->id, sizeof x->id, str_of(o, "id"));
	text_copy(x->status, sizeof x->status, str_of(o, "status"));
	currency_of(o, x->currency);
	x->amount = amount_of(o, "amount", x->currency);
}

void stripe_refund_from_json(const void *obj, struct stripe_refund_view *x)
{
	json_t *o = (json_t *)obj;

	memset(x, 0, sizeof *x);
	text_copy(x->id, sizeof x->id, str_of(o, "id"));
	text_copy(x->status, sizeof x->status, str_of(o, "status"));
	text_copy(x->failure, sizeof x->failure, str_of(o, "failure_reason"));
	id_of(o, "payment_intent", x->payment_ref, sizeof x->payment_ref);
	text_copy(x->key, sizeof x->key, str_of(json_object_get(o, "metadata"), "refund_key"));
	currency_of(o, x->currency);
	x->amount = amount_of(o, "amount", x->currency);
}

void stripe_charge_from_json(const void *obj, struct stripe_charge *x)
{
	json_t *o = (json_t *)obj;

	memset(x, 0, sizeof *x);
	text_copy(x->id, sizeof x->id, str_of(o, "id"));
	id_of(o, "payment_intent", x->payment_ref, sizeof x->payment_ref);
	currency_of(o, x->currency);
	x->amount = amount_of(o, "amount", x->currency);
	x->amount_refunded = amount_of(o, "amount_refunded", x->currency);
	x->refunded = json_is_true(json_object_get(o, "refunded"));
}

void stripe_dispute_from_json(const void *obj, struct stripe_dispute *x)
{
	json_t *o = (json_t *)obj;

	memset(x, 0, sizeof *x);
	text_copy(x->id, sizeof x->id, str_of(o, "id"));
	id_of(o, "payment_intent", x->payment_ref, sizeof x->payment_ref);
	currency_of(o, x->currency);
	x->amount = amount_of(o, "amount", x->currency);
	text_copy(x->reason, sizeof x->reason, str_of(o, "reason"));
	text_copy(x->status, sizeof x->status, str_of(o, "status"));
}
