/*
 * stripe.h: the payment provider, Stripe: its Checkout Sessions and
 * refunds (stripe.c), and its webhooks (stripe_hook.c).  Nothing else in the
 * box speaks Stripe's API.
 *
 * The key: the secret key is read from a file (stripe_key_file, a file only
 * the box user may read) or the systemd credential "stripe_key", when the
 * provider is opened, and lives in this process's memory only: never in
 * the database, a log line or a message.
 *
 * Every request that changes something carries an Idempotency-Key derived
 * from its intent (technique 3): "checkout-<hold>", "expire-<hold>",
 * "refund-<payment>".  Stripe keeps one result per key for at least a day,
 * and answers a retry with the same parameters by the first result: a
 * request whose answer was lost is sent again with the same key and makes
 * nothing twice.  Stripe refuses the same key with other parameters
 * (idempotency_error), so what a request sends is derived from the intent
 * too: a session's expiry from its hold's creation, never from the clock
 * of the attempt.
 *
 * Results: SD_OK; SD_IO when the provider could not be asked or asks to be
 * asked later (no answer, 409 for a key in flight, 429, 5xx): try again
 * with the same key; SD_INVALID when it refused the request for good (with
 * its words); SD_CONFLICT as each function says.
 */
#ifndef SD_STRIPE_H
#define SD_STRIPE_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

#define STRIPE_API_DEFAULT "https://api.stripe.com"
#define STRIPE_API_VERSION "2024-06-20"
#define STRIPE_KEY_MAX 256
#define STRIPE_ID_MAX 256		/* an id of Stripe's: cs_..., pi_..., evt_... */
#define STRIPE_URL_MAX 2048
#define STRIPE_SESSION_MIN_S 1800	/* Stripe's least lifetime of a session */
#define STRIPE_TOLERANCE_S 300		/* a webhook's timestamp, at most this far off */

struct stripe_config {
	const char *api_url;		/* NULL: STRIPE_API_DEFAULT */
	const char *key_file;		/* NULL: the credential "stripe_key" */
	const char *ca_file;		/* NULL: the system's store */
	long timeout_ms;		/* 0: 20000 */
};

struct stripe;

/* stripe_open: check the URL, read the key.  [out] *out (stripe_close). */
enum sd_result stripe_open(const struct stripe_config *cfg, struct stripe **out);

/* stripe_close: the key wiped, then freed; accepts NULL. */
void stripe_close(struct stripe *s);

/*
 * Amounts: the box gives and takes ISO 4217 minor units (money.h); this
 * module turns them into Stripe's units per currency on the way out and back
 * on the way in.  An amount Stripe reports that is no whole number of minor
 * units is read as -1 (never equal to what a hold asks).
 */

/* A Checkout Session as the box reads it. */
struct stripe_session {
	char id[STRIPE_ID_MAX];
	char url[STRIPE_URL_MAX];		/* the payment page ("" once it ended) */
	char status[16];			/* "open", "complete", "expired" */
	char payment_status[24];		/* "paid", "unpaid", "no_payment_required" */
	char payment_ref[STRIPE_ID_MAX];	/* its payment intent, "" until there is
						 * one (none for no_payment_required) */
	char client_reference_id[64];		/* the hold's public id */
	char currency[4];			/* upper case */
	int64_t amount_total;			/* ISO minor units; -1: not a whole number */
};

/* What a session's state means for its hold. */
enum stripe_pay {
	STRIPE_PAY_OPEN,		/* the buyer may still pay */
	STRIPE_PAY_PAID,		/* the money is taken */
	STRIPE_PAY_FREE,		/* complete with nothing to pay (no_payment_required) */
	STRIPE_PAY_PENDING,		/* complete, paid by a delayed method: on its way */
	STRIPE_PAY_ENDED,		/* expired unpaid */
};

/* stripe_session_pay: the session's state for its hold. */
enum stripe_pay stripe_session_pay(const struct stripe_session *s);

/* stripe_session_paid: the session's money is taken (STRIPE_PAY_PAID). */
int stripe_session_paid(const struct stripe_session *s);

/* What a checkout is for: one line, quantity seats at unit_amount each. */
struct stripe_checkout {
	const char *hold;		/* the hold's public id: the key, the reference */
	const char *item;		/* "Gig, Fri 4 Dec 2026, 20:00 CET" */
	int64_t unit_amount, quantity;	/* ISO minor units */
	const char *currency;		/* ISO 4217 */
	const char *email;		/* the buyer's, filled in on the page */
	const char *success_url, *cancel_url;
	int64_t expires_at_s;		/* unix seconds: at least STRIPE_SESSION_MIN_S
					 * after every attempt, fixed by the hold */
	const char *methods;		/* "card,link": Stripe's payment method types
					 * offered; NULL or "": the account's own */
};

/* stripe_checkout_create: the session for a hold, under the key
 * "checkout-<hold>": the same hold gets the same session however often it
 * is asked.  [out] *out. */
enum sd_result stripe_checkout_create(struct stripe *s, const struct stripe_checkout *c,
				      struct stripe_session *out);

/* stripe_session_get: the session as Stripe has it now (the source of
 * truth: "look the payment up").  SD_NOT_FOUND when Stripe knows no such
 * session. */
enum sd_result stripe_session_get(struct stripe *s, const char *id, struct stripe_session *out);

/* stripe_session_expire: end an open session so that it can no longer be
 * paid, under the key "expire-<id>".  SD_CONFLICT: it is not open (paid or
 * ended meanwhile: read it again). */
enum sd_result stripe_session_expire(struct stripe *s, const char *id);

/* A payment intent as the box reads it: for a delayed method, whether its
 * money came. */
struct stripe_payment {
	char id[STRIPE_ID_MAX];
	char status[32];		/* "processing", "succeeded",
					 * "requires_payment_method", "canceled", ... */
	char currency[4];
	int64_t amount;			/* ISO minor units */
};

/* stripe_payment_get: the payment intent id as Stripe has it now.
 * SD_NOT_FOUND. */
enum sd_result stripe_payment_get(struct stripe *s, const char *id, struct stripe_payment *out);

/* A refund as the box reads it. */
struct stripe_refund_view {
	char id[STRIPE_ID_MAX];		/* re_... */
	char status[24];		/* "pending", "requires_action", "succeeded",
					 * "failed", "canceled" */
	char failure[64];		/* failure_reason, "" when none */
	char payment_ref[STRIPE_ID_MAX];
	char key[STRIPE_ID_MAX];	/* metadata[refund_key]: the box's own refund's
					 * key, "" for one made elsewhere */
	char currency[4];
	int64_t amount;			/* ISO minor units */
};

/* stripe_refund: give back amount (ISO minor units of currency; -1: all
 * that is left of it) of payment_ref under key (the refund's own,
 * refunds.h: one refund per payment), the key in its metadata too.  [out] *out: the refund, whose
 * status may be "pending" (done only once Stripe says "succeeded").
 * SD_CONFLICT: the payment is refunded already (by another way than this
 * key; out->id is then ""). */
enum sd_result stripe_refund(struct stripe *s, const char *payment_ref, const char *key,
			     int64_t amount, const char *currency, struct stripe_refund_view *out);

/* stripe_refund_get: a refund as Stripe has it now.  SD_NOT_FOUND. */
enum sd_result stripe_refund_get(struct stripe *s, const char *id, struct stripe_refund_view *out);

/* ---- webhooks (stripe_hook.c) ------------------------------------------ */

#define STRIPE_SECRETS_MAX 2		/* the current and, while rotating, the old */

/*
 * stripe_hook_verify: the Stripe-Signature header (t=...,v1=...[,v1=...])
 * signs body (len bytes) with one of the secrets ("whsec_...", the whole
 * string is the HMAC key), and its t is within STRIPE_TOLERANCE_S of now_s.
 * Any v1 matching any secret passes; v0 and unknown schemes are ignored.
 * Checked before anything reads the body.  SD_OK, or SD_INVALID saying
 * which rule failed (never a secret or a signature).
 */
enum sd_result stripe_hook_verify(const char *const *secrets, int n, const char *header,
				  const char *body, size_t len, int64_t now_s);

/* A charge, as charge.refunded carries it: how much of it went back. */
struct stripe_charge {
	char id[STRIPE_ID_MAX];		/* ch_... */
	char payment_ref[STRIPE_ID_MAX];	/* its payment intent */
	char currency[4];
	int64_t amount, amount_refunded;	/* ISO minor units */
	int refunded;			/* Stripe's word: refunded in full */
};

/* A dispute (a chargeback), as charge.dispute.* carries it. */
struct stripe_dispute {
	char id[STRIPE_ID_MAX];		/* dp_... */
	char payment_ref[STRIPE_ID_MAX];
	char currency[4];
	int64_t amount;			/* ISO minor units */
	char reason[40];		/* "fraudulent", "product_not_received", ... */
	char status[32];		/* "needs_response", "lost", "won", ... */
};

/* One webhook event, as the box reads it: data.object by its kind. */
enum stripe_object { STRIPE_OBJ_OTHER, STRIPE_OBJ_SESSION, STRIPE_OBJ_CHARGE,
		     STRIPE_OBJ_DISPUTE, STRIPE_OBJ_REFUND };

struct stripe_event {
	char id[STRIPE_ID_MAX];		/* evt_...: recorded with its effect (technique 4) */
	char type[64];			/* "checkout.session.completed", ... */
	enum stripe_object kind;
	struct stripe_session session;	/* STRIPE_OBJ_SESSION */
	struct stripe_charge charge;	/* STRIPE_OBJ_CHARGE */
	struct stripe_dispute dispute;	/* STRIPE_OBJ_DISPUTE */
	struct stripe_refund_view refund;	/* STRIPE_OBJ_REFUND */
};

/* stripe_session_from_json: a session object (a jansson json_t *, as
 * void * so that this header needs no jansson) read into *x. */
void stripe_session_from_json(const void *obj, struct stripe_session *x);

/* stripe_refund_from_json, stripe_charge_from_json,
 * stripe_dispute_from_json: the same for the other objects. */
void stripe_refund_from_json(const void *obj, struct stripe_refund_view *x);
void stripe_payment_from_json(const void *obj, struct stripe_payment *x);
void stripe_charge_from_json(const void *obj, struct stripe_charge *x);
void stripe_dispute_from_json(const void *obj, struct stripe_dispute *x);

/* stripe_hook_event: parse a verified body.  SD_INVALID when it is no
 * event. */
enum sd_result stripe_hook_event(const char *body, size_t len, struct stripe_event *ev);

/* stripe_secrets_read: the webhook secrets, one a line (the current first),
 * from path (a file only the box user may read), or the credential
 * "stripe_webhook_secret" when path is NULL.  [out] secrets[0..*n)
 * (stripe_secrets_free). */
enum sd_result stripe_secrets_read(const char *path, char **secrets, int *n);
void stripe_secrets_free(char **secrets, int n);

#endif
