/*
 * shop_hook.h: the payment provider's webhook endpoint on the shop
 * listener (POST /stripe/webhook).
 *
 * The signature is checked before anything reads the body (stripe.h:
 * every v1, both secrets while one rotates, 300 s of tolerance): a forged or
 * replayed call gets 400 and changes nothing.  A verified event is applied
 * by shop_pay.h in one transaction that records the event's id with its
 * effect (technique 4): delivered twice, out of order or never, a payment
 * makes one order (or one refund); money that goes back cancels its order
 * once; a refund's status is recorded once.  The answer is 2xx only once that
 * transaction is committed; a busy or failing database answers 503 so that
 * the provider calls again.  Events the box has no use for, and sessions it
 * does not know (another shop on the same account), are answered 200 and
 * ignored.
 */
#ifndef SD_SHOP_HOOK_H
#define SD_SHOP_HOOK_H

#include <stdint.h>

#include "db.h"
#include "http.h"

/* shop_hook: answer req (the webhook's POST) in res, on db; a delayed
 * payment keeps its seats pending_max_ms. */
void shop_hook(struct db *db, char *const *secrets, int n_secrets, int64_t pending_max_ms,
	       const struct http_request *req, struct http_response *res);

#endif
