/*
 * state.c: the sessions, payments, refunds and events paysink holds, their
 * Stripe-shaped JSON, the clocks, the dice, and the record file.
 *
 * Everything is in memory, in arrays that only grow (a run is a test or a
 * soak), under ps_lock.  The record file is the whole state as JSON,
 * rewritten after every change: a temp file beside it, fsync, rename, fsync
 * of the folder, so a reader (the soak's judge) never sees half of one.
 *
 * The clocks: the business clock (ps_now) is the real one plus an offset
 * that POST /_paysink/clock moves forward; sessions' created, expires_at,
 * paid_at and expired_at, refunds' and events' created are on it, so a test
 * can pass a session's expiry without waiting.  Webhook signatures carry
 * the real time (ps_real_now): the receiver checks them against its own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "paysink.h"

struct vec {
	void **v;
	size_t n, cap;
};

static struct vec sessions, refunds, events;
static int64_t clock_offset;	/* seconds added to the real clock */
static uint64_t dice;		/* xorshift64* state */
struct ps_counts ps_counts;

static int vec_push(struct vec *a, void *p)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		void **v = realloc(a->v, cap * sizeof *v);

		if (!v)
			return -1;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = p;
	return 0;
}

/* ======================== clocks, ids, dice ============================== */

int64_t ps_real_now(void)
{
	return (int64_t)time(NULL);
}

int64_t ps_now(void)
{
	return ps_real_now() + clock_offset;
}

void ps_clock_advance(int64_t seconds)
{
	clock_offset += seconds;
}

int64_t ps_clock_offset(void)
{
	return clock_offset;
}

void ps_rand_id(char *out, size_t size, const char *prefix, int n)
{
	static const char abc[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	unsigned char bytes[64];
	size_t plen = strlen(prefix), i, got = 0;

	if ((size_t)n > sizeof bytes)
		n = (int)sizeof bytes;
	if (plen + (size_t)n + 1 > size)
		n = (int)(size - plen - 1);
	while (got < (size_t)n) {
		ssize_t r = getrandom(bytes + got, (size_t)n - got, 0);

		if (r < 0 && errno != EINTR)
			abort();	/* no kernel randomness: nothing sane to do */
		if (r > 0)
			got += (size_t)r;
	}
	memcpy(out, prefix, plen);
	for (i = 0; i < (size_t)n; i++)
		out[plen + i] = abc[bytes[i] % 62];
	out[plen + (size_t)n] = '\0';
}

static uint64_t dice_next(void)
{
	dice ^= dice >> 12;
	dice ^= dice << 25;
	dice ^= dice >> 27;
	return dice * 0x2545F4914F6CDD1DULL;
}

int ps_dice_roll(long pct)
{
	if (pct <= 0)
		return 0;
	return (long)((dice_next() >> 33) % 100) < pct;
}

uint64_t ps_dice_upto(uint64_t max)
{
	if (max == 0)
		return 0;
	return (dice_next() >> 11) % (max + 1);
}

void state_init(void)
{
	/* splitmix64 of the seed: never 0, and nearby seeds differ at once */
	dice = ps_opts.seed + 0x9E3779B97F4A7C15ULL;
	dice = (dice ^ (dice >> 30)) * 0xBF58476D1CE4E5B9ULL;
	dice = (dice ^ (dice >> 27)) * 0x94D049BB133111EBULL;
	dice ^= dice >> 31;
	if (dice == 0)
		dice = 1;
}

/* ======================== the objects ==================================== */

int state_session_add(struct ps_session *s)
{
	if (vec_push(&sessions, s) != 0)
		return -1;
	ps_rand_id(s->id, sizeof s->id, "cs_test_a1", 56);
	s->status = PS_OPEN;
	s->created = ps_now();
	return 0;
}

void state_session_free(struct ps_session *s)
{
	size_t j;

	if (!s)
		return;
	for (j = 0; j < s->n_lines; j++)
		free(s->lines[j].name);
	free(s->lines);
	free(s->client_reference_id);
	free(s->customer_email);
	free(s->success_url);
	free(s->cancel_url);
	json_decref(s->metadata);
	json_decref(s->pi_metadata);
	free(s);
}

struct ps_session *state_session_find(const char *id)
{
	size_t i;

	for (i = 0; i < sessions.n; i++) {
		struct ps_session *s = sessions.v[i];

		if (strcmp(s->id, id) == 0)
			return s;
	}
	return NULL;
}

struct ps_session *state_session_by_pi(const char *pi_or_charge)
{
	size_t i;

	for (i = 0; i < sessions.n; i++) {
		struct ps_session *s = sessions.v[i];

		if (s->pi[0] && (strcmp(s->pi, pi_or_charge) == 0 ||
				 strcmp(s->charge, pi_or_charge) == 0))
			return s;
	}
	return NULL;
}

struct ps_refund *state_refund_new(void)
{
	struct ps_refund *r = calloc(1, sizeof *r);

	if (!r || vec_push(&refunds, r) != 0) {
		free(r);
		return NULL;
	}
	ps_rand_id(r->id, sizeof r->id, "re_3", 24);
	r->created = ps_now();
	return r;
}

struct ps_refund *state_refund_find(const char *id)
{
	size_t i;

	for (i = 0; i < refunds.n; i++)
		if (strcmp(((struct ps_refund *)refunds.v[i])->id, id) == 0)
			return refunds.v[i];
	return NULL;
}

size_t state_refund_count(void)
{
	return refunds.n;
}

struct ps_refund *state_refund_at(size_t i)
{
	return i < refunds.n ? refunds.v[i] : NULL;
}

struct ps_event *state_event_new(void)
{
	struct ps_event *ev = calloc(1, sizeof *ev);

	if (!ev || vec_push(&events, ev) != 0) {
		free(ev);
		return NULL;
	}
	ps_rand_id(ev->id, sizeof ev->id, "evt_1", 24);
	ev->created = ps_now();
	return ev;
}

size_t state_event_count(void)
{
	return events.n;
}

/* ======================== the changes ==================================== */

const char *state_pay(struct ps_session *s)
{
	if (s->status == PS_OPEN && ps_now() >= s->expires_at)
		state_expire(s);
	if (s->status == PS_EXPIRED)
		return "this checkout session has expired";
	if (s->status == PS_COMPLETE || s->charges > 0)
		return "this checkout session is already paid";
	s->status = PS_COMPLETE;
	s->paid_at = ps_now();
	ps_rand_id(s->pi, sizeof s->pi, "pi_3", 24);
	ps_rand_id(s->charge, sizeof s->charge, "ch_3", 24);
	s->charges = 1;
	wh_event("checkout.session.completed", s->id, session_json(s));
	return "";
}

const char *state_expire(struct ps_session *s)
{
	if (s->status != PS_OPEN)
		return s->status == PS_COMPLETE ? "complete" : "expired";
	s->status = PS_EXPIRED;
	s->expired_at = ps_now();
	wh_event("checkout.session.expired", s->id, session_json(s));
	return "";
}

void state_sweep_expiry(void)
{
	int64_t now = ps_now();
	size_t i;
	int changed = 0;

	for (i = 0; i < sessions.n; i++) {
		struct ps_session *s = sessions.v[i];

		if (s->status == PS_OPEN && now >= s->expires_at) {
			state_expire(s);
			changed = 1;
		}
	}
	if (changed)
		record_write();
}

/* ======================== JSON =========================================== */

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static const char *status_name(enum ps_status st)
{
	return st == PS_OPEN ? "open" : st == PS_COMPLETE ? "complete" : "expired";
}

static json_t *customer_details(const struct ps_session *s)
{
	if (s->status != PS_COMPLETE)
		return json_null();
	return json_pack("{s:n,s:o,s:n,s:n,s:s,s:[]}", "address", "email",
			 str_or_null(s->customer_email), "name", "phone", "tax_exempt", "none",
			 "tax_ids");
}

json_t *session_json(const struct ps_session *s)
{
	json_t *o = json_object();
	char url[400];

	snprintf(url, sizeof url, "%s/pay/%s", ps_base_url, s->id);
	json_object_set_new(o, "id", json_string(s->id));
	json_object_set_new(o, "object", json_string("checkout.session"));
	json_object_set_new(o, "after_expiration", json_null());
	json_object_set_new(o, "allow_promotion_codes", json_null());
	json_object_set_new(o, "amount_subtotal", json_integer(s->amount_total));
	json_object_set_new(o, "amount_total", json_integer(s->amount_total));
	json_object_set_new(o, "automatic_tax",
			    json_pack("{s:b,s:n,s:n}", "enabled", 0, "liability", "status"));
	json_object_set_new(o, "billing_address_collection", json_null());
	json_object_set_new(o, "cancel_url", str_or_null(s->cancel_url));
	json_object_set_new(o, "client_reference_id", str_or_null(s->client_reference_id));
	json_object_set_new(o, "created", json_integer(s->created));
	json_object_set_new(o, "currency", json_string(s->currency));
	json_object_set_new(o, "customer", json_null());
	json_object_set_new(o, "customer_creation", json_string("if_required"));
	json_object_set_new(o, "customer_details", customer_details(s));
	json_object_set_new(o, "customer_email", str_or_null(s->customer_email));
	json_object_set_new(o, "expires_at", json_integer(s->expires_at));
	json_object_set_new(o, "invoice", json_null());
	json_object_set_new(o, "livemode", json_false());
	json_object_set_new(o, "locale", json_null());
	json_object_set_new(o, "metadata", json_deep_copy(s->metadata));
	json_object_set_new(o, "mode", json_string("payment"));
	json_object_set_new(o, "payment_intent", s->pi[0] ? json_string(s->pi) : json_null());
	json_object_set_new(o, "payment_method_types", json_pack("[s]", "card"));
	json_object_set_new(o, "payment_status",
			    json_string(s->status == PS_COMPLETE ? "paid" : "unpaid"));
	json_object_set_new(o, "status", json_string(status_name(s->status)));
	json_object_set_new(o, "submit_type", json_null());
	json_object_set_new(o, "success_url", str_or_null(s->success_url));
	json_object_set_new(o, "total_details", json_pack("{s:i,s:i,s:i}", "amount_discount", 0,
							  "amount_shipping", 0, "amount_tax", 0));
	json_object_set_new(o, "ui_mode", json_string("hosted"));
	/* as Stripe: the url only while the session can still be paid */
	json_object_set_new(o, "url", s->status == PS_OPEN ? json_string(url) : json_null());
	return o;
}

json_t *refund_json(const struct ps_refund *r)
{
	return json_pack("{s:s,s:s,s:I,s:n,s:s,s:I,s:s,s:O,s:s,s:o,s:n,s:n,s:s,s:n}", "id", r->id,
			 "object", "refund", "amount", (json_int_t)r->amount,
			 "balance_transaction", "charge", r->charge, "created",
			 (json_int_t)r->created, "currency", r->currency, "metadata", r->metadata,
			 "payment_intent", r->pi, "reason", str_or_null(r->reason),
			 "receipt_number", "source_transfer_reversal", "status", "succeeded",
			 "transfer_reversal");
}

json_t *pi_json(const struct ps_session *s)
{
	return json_pack("{s:s,s:s,s:I,s:I,s:I,s:s,s:s,s:I,s:s,s:b,s:O,s:[s],s:s}", "id", s->pi,
			 "object", "payment_intent", "amount", (json_int_t)s->amount_total,
			 "amount_capturable", (json_int_t)0, "amount_received",
			 (json_int_t)s->amount_total, "capture_method", "automatic", "currency",
			 s->currency, "created", (json_int_t)s->paid_at, "latest_charge", s->charge,
			 "livemode", 0, "metadata", s->pi_metadata, "payment_method_types", "card",
			 "status", "succeeded");
}

static json_t *when(int64_t t)
{
	return t ? json_integer(t) : json_null();
}

static json_t *record_sessions(void)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < sessions.n; i++) {
		const struct ps_session *s = sessions.v[i];
		json_t *o = json_object();

		json_object_set_new(o, "id", json_string(s->id));
		json_object_set_new(o, "client_reference_id", str_or_null(s->client_reference_id));
		json_object_set_new(o, "metadata", json_deep_copy(s->metadata));
		json_object_set_new(o, "amount_total", json_integer(s->amount_total));
		json_object_set_new(o, "currency", json_string(s->currency));
		json_object_set_new(o, "status", json_string(status_name(s->status)));
		json_object_set_new(o, "payment_status",
				    json_string(s->status == PS_COMPLETE ? "paid" : "unpaid"));
		json_object_set_new(o, "payment_intent", s->pi[0] ? json_string(s->pi) : json_null());
		json_object_set_new(o, "charges", json_integer(s->charges));
		json_object_set_new(o, "amount_refunded", json_integer(s->refunded));
		json_object_set_new(o, "created", json_integer(s->created));
		json_object_set_new(o, "expires_at", json_integer(s->expires_at));
		json_object_set_new(o, "paid_at", when(s->paid_at));
		json_object_set_new(o, "expired_at", when(s->expired_at));
		json_object_set_new(o, "customer_email", str_or_null(s->customer_email));
		json_array_append_new(a, o);
	}
	return a;
}

static json_t *record_refunds(void)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < refunds.n; i++) {
		const struct ps_refund *r = refunds.v[i];

		json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:I,s:s,s:o,s:I}", "id", r->id,
						   "payment_intent", r->pi, "session", r->session,
						   "amount", (json_int_t)r->amount, "currency",
						   r->currency, "idempotency_key",
						   str_or_null(r->idempotency_key), "created",
						   (json_int_t)r->created));
	}
	return a;
}

static json_t *record_events(void)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < events.n; i++) {
		const struct ps_event *ev = events.v[i];

		json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:b,s:b,s:I}", "id",
						   ev->id, "type", ev->type, "session", ev->session,
						   "delivered_ok", (json_int_t)ev->delivered_ok,
						   "attempts", (json_int_t)ev->attempts, "gave_up",
						   (json_int_t)ev->gave_up, "dropped", ev->dropped,
						   "duplicated", ev->duplicated, "created",
						   (json_int_t)ev->created));
	}
	return a;
}

json_t *record_json(void)
{
	return json_pack("{s:o,s:o,s:o,s:{s:I,s:I,s:I,s:I},s:I,s:I,s:I}", "sessions",
			 record_sessions(), "refunds", record_refunds(), "events", record_events(),
			 "idempotency", "keys", (json_int_t)idem_stored(), "replays",
			 (json_int_t)ps_counts.idem_replays, "conflicts",
			 (json_int_t)ps_counts.idem_conflicts, "in_use",
			 (json_int_t)ps_counts.idem_in_use, "api_requests",
			 (json_int_t)ps_counts.api_requests, "injected_5xx",
			 (json_int_t)ps_counts.injected_5xx, "clock_offset", (json_int_t)clock_offset);
}

char *record_text(void)
{
	json_t *doc = record_json();
	char *text = doc ? json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
	char *line = NULL;

	json_decref(doc);
	if (text && asprintf(&line, "%s\n", text) < 0)
		line = NULL;
	free(text);
	return line;
}

/* write all of buf to fd; 0 or -1 */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

void record_write(void)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	char *text;
	int fd = -1, ok = 0;

	if (ps_opts.record_at_exit && !ps_stopping)
		return;
	if (!(text = record_text()))
		goto out;
	snprintf(tmp, sizeof tmp, "%s.tmp", ps_opts.record);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write_all(fd, text, strlen(text)) != 0 ||
	    fsync(fd) != 0)
		goto out;
	close(fd);
	fd = -1;
	if (rename(tmp, ps_opts.record) != 0)
		goto out;
	/* the new name is only as durable as its folder */
	snprintf(dir, sizeof dir, "%s", ps_opts.record);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		fsync(fd);
	ok = 1;
out:
	if (fd >= 0)
		close(fd);
	if (!ok)
		fprintf(stderr, "paysink: cannot write the record %s: %s\n", ps_opts.record,
			strerror(errno));
	free(text);
}

/* ======================== the end ======================================== */

void state_free(void)
{
	size_t i;

	for (i = 0; i < sessions.n; i++)
		state_session_free(sessions.v[i]);
	for (i = 0; i < refunds.n; i++) {
		struct ps_refund *r = refunds.v[i];

		free(r->idempotency_key);
		free(r->reason);
		json_decref(r->metadata);
		free(r);
	}
	for (i = 0; i < events.n; i++) {
		struct ps_event *ev = events.v[i];

		free(ev->payload);
		free(ev);
	}
	free(sessions.v);
	free(refunds.v);
	free(events.v);
	memset(&sessions, 0, sizeof sessions);
	memset(&refunds, 0, sizeof refunds);
	memset(&events, 0, sizeof events);
	idem_free_all();
}
