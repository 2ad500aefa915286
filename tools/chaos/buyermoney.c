/*
 * buyermoney.c: the buyers' money after the checkout (buyers.h), done at
 * paysink as the world outside the box does it: a delayed payment's bank
 * answers days later (here seconds), a person in Stripe's dashboard gives
 * the money back in full or in part, a cardholder's bank disputes the
 * charge, and a bank pays out, or fails to pay out, a refund that paysink
 * kept pending.  None of it goes through the box: the box must learn it
 * from paysink's webhooks (or its own look-ups), and the verdict
 * (shopcheck.c) judges what it made of it from the database and paysink's
 * record.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "buyers.h"
#include "chaos.h"

#define PAGE_LOOK_MS 1000	/* the buyer's page looked at this often */
#define BANK_EVERY_MS 1000	/* the bank reads paysink's record this often */
#define BANK_DELAY_MS 4000	/* ... and ends a refund up to this long after seeing it */
#define BANK_MAX 4096		/* pending refunds it follows at most */

/* POST /_paysink/<path> (a test control: no key, no body); its status */
static int control(const char *path, struct resp *r)
{
	buyer_http(buyer_paysink_port(), "POST", path,
		   "Content-Type: application/x-www-form-urlencoded\r\n", "", r);
	return r->status;
}

static int refused(const char *what, const char *session, const struct resp *r, char *why,
		   size_t wsize)
{
	snprintf(why, wsize, "paysink answered the %s of %s with %d: %.200s", what, session,
		 r->status, r->body ? r->body : "");
	return -1;
}

int buyer_settle(const char *session, int succeed, char *later, size_t size, char *why,
		 size_t wsize)
{
	char path[200];
	struct resp r;

	snprintf(path, sizeof path, "/_paysink/settle/%s?outcome=%s", session,
		 succeed ? "succeeded" : "failed");
	if (control(path, &r) != 200)
		return refused("settling", session, &r, why, wsize);
	snprintf(later, size, "settled-%s", succeed ? "succeeded" : "failed");
	return 0;
}

int buyer_refunds_pending(const char *session, char *why, size_t wsize)
{
	char path[200];
	struct resp r;

	snprintf(path, sizeof path, "/_paysink/refund-pending/%s?on=1", session);
	return control(path, &r) == 200 ? 0 : refused("pending refunds", session, &r, why, wsize);
}

/* what the buyer's page says of its checkout: "ordered", another end
 * ("refunded", "failed", "expired", "pending"), or "" (not yet, or no answer) */
static const char *page_says(int port, const char *path)
{
	static const struct says says[] = {
		{ "<h1>Thank you</h1>", "ordered" },
		{ "<h1>Your payment is refunded</h1>", "refunded" },
		{ "<h1>Your payment did not go through</h1>", "failed" },
		{ "<h1>This checkout has ended</h1>", "expired" },
		{ "<h1>Your payment is on its way</h1>", "pending" },
	};
	const char *state;
	struct resp r;

	buyer_http(port, "GET", path, NULL, NULL, &r);
	state = r.status == 200 ? buyer_says(r.body, says, sizeof says / sizeof says[0]) : NULL;
	return state ? state : "";
}

int buyer_money_back(const char *session, const char *success, long long part,
		     const char *reason, int64_t give_up, char *later, size_t size, char *why,
		     size_t wsize)
{
	char page[1024], path[200];
	const char *p, *state = "";
	struct resp r;
	int port;

	/* the page without ?paid=1: the buyer looks, the box need not ask */
	if (buyer_url_split(success, &port, &p) != 0) {
		snprintf(why, wsize, "paysink sent the buyer to '%.200s'", success);
		return -1;
	}
	snprintf(page, sizeof page, "%.*s", (int)strcspn(p, "?#"), p);
	while (now_ms() < give_up && !*(state = page_says(port, page)))
		sleep_ms(PAGE_LOOK_MS);
	if (strcmp(state, "ordered") != 0) {	/* no order to give the money back for */
		snprintf(later, size, "skip-%s", *state ? state : "timeout");
		return 0;
	}
	if (reason)
		snprintf(path, sizeof path, "/_paysink/dispute/%s?reason=%s", session, reason);
	else if (part > 0)
		snprintf(path, sizeof path, "/_paysink/refund/%s?amount=%lld", session, part);
	else
		snprintf(path, sizeof path, "/_paysink/refund/%s", session);
	if (control(path, &r) != 200)
		return refused(reason ? "dispute" : "dashboard refund", session, &r, why, wsize);
	if (reason)
		snprintf(later, size, "dispute=%s", reason);
	else if (part > 0)
		snprintf(later, size, "refund-part=%lld", part);
	else
		snprintf(later, size, "refund=all");
	return 0;
}

/* ======================== the bank ====================================== */

static struct bank_refund {
	char id[96], session[96];
	int64_t due;			/* it ends from then on */
	int done;
} bank[BANK_MAX];
static long n_bank, n_done, n_failed;

/* FNV-1a of s */
static uint64_t id_hash(const char *s)
{
	uint64_t h = 0xCBF29CE484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001B3ULL;
	return h;
}

static struct bank_refund *bank_find(const char *id, const char *session)
{
	long i;

	for (i = 0; i < n_bank; i++)
		if (strcmp(bank[i].id, id) == 0)
			return &bank[i];
	if (n_bank == BANK_MAX)
		return NULL;
	snprintf(bank[n_bank].id, sizeof bank[n_bank].id, "%s", id);
	snprintf(bank[n_bank].session, sizeof bank[n_bank].session, "%s", session);
	/* a moment after it was seen (the box records the refund's pending
	 * answer first, most of the time), as the id's bytes say */
	bank[n_bank].due = now_ms() + (int64_t)(id_hash(id) % BANK_DELAY_MS);
	return &bank[n_bank++];
}

/* one pending refund ended at paysink as fails says */
static void bank_end(struct bank_refund *b, int (*fails)(const char *session))
{
	int fail_it = fails(b->session);
	char path[200];
	struct resp r;

	snprintf(path, sizeof path, "/_paysink/refund-settle/%s?outcome=%s", b->id,
		 fail_it ? "failed" : "succeeded");
	control(path, &r);
	if (r.status != 200 && r.status != 409)
		return;	/* tried again at the next step */
	b->done = 1;
	n_done++;
	n_failed += fail_it && r.status == 200;
	/* 409: it ended before (a dispute fails a charge's pending refunds) */
	actions_log("bank refund=%s session=%s outcome=%s t=%lld", b->id, b->session,
		    r.status == 409 ? "ended-before" : fail_it ? "failed" : "succeeded",
		    (long long)(now_ms() - soak.t0));
}

void bank_step(const char *record, int (*fails)(const char *session))
{
	static int64_t last;
	json_t *doc, *x;
	size_t i;
	long k;

	if (!record || now_ms() - last < BANK_EVERY_MS)
		return;
	last = now_ms();
	if (!(doc = json_load_file(record, 0, NULL)))
		return;	/* not written yet */
	json_array_foreach(json_object_get(doc, "refunds"), i, x) {
		const char *id = json_string_value(json_object_get(x, "id"));
		const char *st = json_string_value(json_object_get(x, "status"));
		const char *ses = json_string_value(json_object_get(x, "session"));

		if (id && st && ses && strcmp(st, "pending") == 0)
			bank_find(id, ses);
	}
	json_decref(doc);
	for (k = 0; k < n_bank; k++)
		if (!bank[k].done && now_ms() >= bank[k].due)
			bank_end(&bank[k], fails);
}

long bank_pending(void)
{
	return n_bank - n_done;
}

long bank_settled(int failed)
{
	return failed ? n_failed : n_done;
}
