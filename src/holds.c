/*
 * holds.c: seats held while a buyer pays (holds.h).  This module owns the
 * holds table.
 */
#define _GNU_SOURCE
#include "holds.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "event_edit.h"
#include "events.h"
#include "jobkinds.h"
#include "mail.h"
#include "money.h"
#include "outbox.h"

static const char *const STATE_NAMES[] = { "open", "pending", "ordered", "refunded", "expired",
					   "failed" };
#define N_STATES ((int)(sizeof STATE_NAMES / sizeof STATE_NAMES[0]))

const char *hold_state_name(enum hold_state s)
{
	return STATE_NAMES[s];
}

static enum hold_state state_of(const char *s)
{
	int i;

	for (i = 0; i < N_STATES; i++)
		if (s && strcmp(s, STATE_NAMES[i]) == 0)
			return (enum hold_state)i;
	return HOLD_EXPIRED;
}

int hold_live(const struct hold_view *h, int64_t now)
{
	return h->state == HOLD_OPEN && h->expires_at > now;
}

int hold_keeps(const struct hold_view *h, int64_t now)
{
	return (h->state == HOLD_OPEN || h->state == HOLD_PENDING) && h->expires_at > now;
}

void hold_rules_fill(struct hold_rules *r)
{
	if (r->ttl_ms <= 0)
		r->ttl_ms = HOLD_TTL_MS_DEFAULT;
	if (r->renewals < 0)
		r->renewals = HOLD_RENEWALS_DEFAULT;
	if (r->per_client <= 0)
		r->per_client = HOLD_PER_CLIENT_DEFAULT;
	if (r->seats_max <= 0)
		r->seats_max = HOLD_SEATS_MAX_DEFAULT;
	if (r->unpaid_share <= 0 || r->unpaid_share > 100)
		r->unpaid_share = HOLD_UNPAID_SHARE_DEFAULT;
	if (r->pending_max_ms <= 0)
		r->pending_max_ms = HOLD_PENDING_MAX_MS_DEFAULT;
}

enum sd_result holds_link_new(char *link)
{
	static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";
	unsigned char rnd[HOLD_LINK_LEN];
	int i;

	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return err_set(SD_IO, "no random bytes for a buyer's link");
	for (i = 0; i < HOLD_LINK_LEN; i++)
		link[i] = b32[rnd[i] & 31];
	link[HOLD_LINK_LEN] = '\0';
	explicit_bzero(rnd, sizeof rnd);
	return SD_OK;
}

/* A hold's names, from the kernel's random bytes, never from a clock: its
 * public id, "H" and 9 characters without look-alikes, and the buyer's
 * link (holds_link_new: a link that could be guessed would show a buyer's
 * name). */
static enum sd_result hold_names(char *public_id, char *link)
{
	static const char ids[] = "23456789ABCDEFGHJKMNPQRSTUVWXYZ";
	unsigned char rnd[HOLD_ID_LEN - 1];
	int i;

	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return err_set(SD_IO, "no random bytes for a hold's names");
	public_id[0] = 'H';
	for (i = 0; i < HOLD_ID_LEN - 1; i++)
		public_id[i + 1] = ids[rnd[i] % (sizeof ids - 1)];
	public_id[HOLD_ID_LEN] = '\0';
	return holds_link_new(link);
}

/* ======================== reading ======================================== */

#define HOLD_SQL \
	"SELECT h.id, h.public_id, h.event_id, h.seats, h.buyer_name, h.buyer_email, " \
	"h.amount_minor, h.currency, h.created_at, h.expires_at, h.renewals, h.state, " \
	"coalesce(h.session_id, ''), coalesce(h.pay_url, ''), coalesce(h.payment_ref, ''), " \
	"coalesce(h.order_id, 0), coalesce(h.settled_at, 0), coalesce(o.public_id, ''), " \
	"h.link, h.pay_until, coalesce(h.problem, ''), h.instant_only FROM holds h " \
	"LEFT JOIN orders o ON o.id = h.order_id "
static const char SQL_HOLD_BY_PUBLIC[] = HOLD_SQL "WHERE h.public_id = ?1";
static const char SQL_HOLD_BY_LINK[] = HOLD_SQL "WHERE h.link = ?1";
static const char SQL_HOLD_BY_SESSION[] = HOLD_SQL "WHERE h.session_id = ?1";
static const char SQL_HOLD_BY_ID[] = HOLD_SQL "WHERE h.id = ?1";

static void hold_read(struct db_stmt *st, struct hold_view *h)
{
	memset(h, 0, sizeof *h);
	h->id = db_col_int(st, 0);
	text_copy(h->public_id, sizeof h->public_id, db_col_text(st, 1));
	h->event_id = db_col_int(st, 2);
	h->seats = db_col_int(st, 3);
	text_copy(h->name, sizeof h->name, db_col_text(st, 4));
	text_copy(h->email, sizeof h->email, db_col_text(st, 5));
	h->amount_minor = db_col_int(st, 6);
	text_copy(h->currency, sizeof h->currency, db_col_text(st, 7));
	h->created_at = db_col_int(st, 8);
	h->expires_at = db_col_int(st, 9);
	h->renewals = db_col_int(st, 10);
	h->state = state_of(db_col_text(st, 11));
	text_copy(h->session_id, sizeof h->session_id, db_col_text(st, 12));
	text_copy(h->pay_url, sizeof h->pay_url, db_col_text(st, 13));
	text_copy(h->payment_ref, sizeof h->payment_ref, db_col_text(st, 14));
	h->order_id = db_col_int(st, 15);
	h->settled_at = db_col_int(st, 16);
	text_copy(h->order_public_id, sizeof h->order_public_id, db_col_text(st, 17));
	text_copy(h->link, sizeof h->link, db_col_text(st, 18));
	h->pay_until = db_col_int(st, 19);
	text_copy(h->problem, sizeof h->problem, db_col_text(st, 20));
	h->instant_only = (int)db_col_int(st, 21);
}

static enum sd_result hold_find(struct db *db, const char *sql, const char *text, int64_t id,
				struct hold_view *out)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	if (text)
		db_bind_text(st, 1, text);
	else
		db_bind_int(st, 1, id);
	if ((r = db_step(st, &row)) == SD_OK && row)
		hold_read(st, out);
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_NOT_FOUND, "no such hold");
	return r;
}

enum sd_result hold_get(struct db *db, const char *public_id, struct hold_view *out)
{
	if (!public_id || strlen(public_id) != HOLD_ID_LEN || public_id[0] != 'H')
		return err_set(SD_NOT_FOUND, "no such hold");
	return hold_find(db, SQL_HOLD_BY_PUBLIC, public_id, 0, out);
}

enum sd_result hold_get_link(struct db *db, const char *link, struct hold_view *out)
{
	if (!link || strlen(link) != HOLD_LINK_LEN)
		return err_set(SD_NOT_FOUND, "no such hold");
	return hold_find(db, SQL_HOLD_BY_LINK, link, 0, out);
}

enum sd_result hold_get_session(struct db *db, const char *session_id, struct hold_view *out)
{
	if (!session_id || !*session_id || strlen(session_id) >= HOLD_SESSION_MAX)
		return err_set(SD_NOT_FOUND, "no such hold");
	return hold_find(db, SQL_HOLD_BY_SESSION, session_id, 0, out);
}

enum sd_result hold_get_id(struct db *db, int64_t id, struct hold_view *out)
{
	return hold_find(db, SQL_HOLD_BY_ID, NULL, id, out);
}

/* ======================== counting ======================================= */

/* the seats a hold keeps: open ones and pending ones (their money is on
 * its way); holds_event_live is their index */
static const char SQL_HELD[] =
	"SELECT coalesce(sum(seats), 0) FROM holds WHERE event_id = ?1 "
	"AND state IN ('open', 'pending') AND expires_at > ?2 AND id <> ?3";
/* the seats of open holds, or of pending ones: the buyers who may still
 * not pay, and those whose money takes days (the IN term is the index's) */
static const char SQL_UNPAID[] =
	"SELECT coalesce(sum(seats), 0) FROM holds WHERE event_id = ?1 "
	"AND state IN ('open', 'pending') AND expires_at > ?2 AND state = 'open' AND id <> ?3";
static const char SQL_PENDING_SEATS[] =
	"SELECT coalesce(sum(seats), 0) FROM holds WHERE event_id = ?1 "
	"AND state IN ('open', 'pending') AND expires_at > ?2 AND state = 'pending' AND id <> ?3";

static enum sd_result seats_sum(struct db *db, const char *sql, int64_t event_id,
				int64_t except, int64_t now, int64_t *seats)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;

	*seats = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, now);
	db_bind_int(st, 3, except);
	if (db_next(st, &r))
		*seats = db_col_int(st, 0);
	db_reset(st);
	return r;
}

enum sd_result holds_held(struct db *db, int64_t event_id, int64_t except, int64_t now,
			  int64_t *seats)
{
	return seats_sum(db, SQL_HELD, event_id, except, now, seats);
}

enum sd_result holds_unpaid(struct db *db, int64_t event_id, int64_t now, int64_t *seats)
{
	return seats_sum(db, SQL_UNPAID, event_id, 0, now, seats);
}

int64_t holds_share_cap(const struct event_view *e, const struct hold_rules *ru)
{
	int64_t cap = e->capacity * ru->unpaid_share / 100;

	return cap > 1 ? cap : 1;
}

/* open and pending holds both: a delayed payment that may never come keeps
 * its seats for days, so it takes its client's cap as an open one does */
static const char SQL_BY_CLIENT[] =
	"SELECT count(*) FROM holds WHERE client = ?1 AND state IN ('open', 'pending') "
	"AND expires_at > ?2";
static const char SQL_BY_NET[] =
	"SELECT count(*) FROM holds WHERE client_net = ?1 AND state IN ('open', 'pending') "
	"AND expires_at > ?2";

static enum sd_result count_open(struct db *db, const char *sql, const char *who, int64_t now,
				 int64_t *n)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;

	*n = 0;
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, who);
	db_bind_int(st, 2, now);
	if (db_next(st, &r))
		*n = db_col_int(st, 0);
	db_reset(st);
	return r;
}

enum sd_result holds_of_client(struct db *db, const char *client, const char *net, int64_t now,
			       int64_t *n_client, int64_t *n_net)
{
	enum sd_result r;

	if ((r = count_open(db, SQL_BY_CLIENT, client, now, n_client)) != SD_OK)
		return r;
	return count_open(db, SQL_BY_NET, net && *net ? net : client, now, n_net);
}

/* ======================== a client's checkouts of an event ============== */

/* the same checkout again, a moment later (a double click, a form sent
 * twice): the newest of the client's holds of the event for the same
 * email and seats, but those that ended unpaid */
static const char SQL_AGAIN[] =
	"SELECT id FROM holds WHERE event_id = ?1 AND client_net = ?2 AND created_at > ?3 "
	"AND client = ?4 AND lower(buyer_email) = lower(?5) AND seats = ?6 "
	"AND state NOT IN ('expired', 'failed') ORDER BY id DESC LIMIT 1";
/* a free event's checkouts of a network: each became its order at once */
static const char SQL_FREE_TAKEN[] =
	"SELECT count(*) FROM holds WHERE event_id = ?1 AND client_net = ?2 "
	"AND state IN ('open', 'pending', 'ordered')";

enum sd_result hold_again(struct db *db, const struct hold_new *n, int64_t since,
			  struct hold_view *out)
{
	struct db_stmt *st = db_stmt(db, SQL_AGAIN);
	enum sd_result r;
	int64_t id = 0;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, n->event_id);
	db_bind_text(st, 2, n->client_net && *n->client_net ? n->client_net : n->client);
	db_bind_int(st, 3, since);
	db_bind_text(st, 4, n->client);
	db_bind_text(st, 5, n->email);
	db_bind_int(st, 6, n->seats);
	if (db_next(st, &r))
		id = db_col_int(st, 0);
	db_reset(st);
	if (r != SD_OK)
		return r;
	return id ? hold_get_id(db, id, out) : err_set(SD_NOT_FOUND, "no such checkout");
}

enum sd_result holds_free_taken(struct db *db, int64_t event_id, const char *net, int64_t *n)
{
	struct db_stmt *st = db_stmt(db, SQL_FREE_TAKEN);
	enum sd_result r;

	*n = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, event_id);
	db_bind_text(st, 2, net);
	if (db_next(st, &r))
		*n = db_col_int(st, 0);
	db_reset(st);
	return r;
}

/* ======================== a new hold ===================================== */

enum sd_result hold_new_valid(const struct hold_new *n, const struct hold_rules *rules)
{
	enum sd_result r;

	if ((r = text_field_valid("name", n->name)) != SD_OK)
		return r;
	if (!n->email || strlen(n->email) > 254 || mail_address_valid(n->email) != SD_OK)
		return err_set(SD_INVALID, "email must be an address like name@example.com");
	if (n->seats < 1 || n->seats > rules->seats_max)
		return err_set(SD_INVALID, "seats must be between 1 and %lld",
			       (long long)rules->seats_max);
	if (!n->client || !*n->client || strlen(n->client) >= HOLD_CLIENT_MAX ||
	    (n->client_net && strlen(n->client_net) >= HOLD_CLIENT_MAX))
		return err_set(SD_INVALID, "no client address");
	return SD_OK;
}

enum sd_result hold_event_sells(struct db *db, int64_t event_id, int64_t now,
				struct event_view *e)
{
	enum sd_result r;

	if ((r = event_row_lock(db, event_id)) != SD_OK || (r = event_get(db, event_id, e)) != SD_OK ||
	    (r = event_sale_check(e->id, e->starts_at, e->closed_at, e->cancelled_at, now)) != SD_OK)
		return r;
	if (!e->currency[0])
		return err_set(SD_CONFLICT, "event %lld is not sold online (it has no price)",
			       (long long)e->id);
	return SD_OK;
}

/* the seats are free of tickets and of holds that keep them */
static enum sd_result seats_free(struct db *db, const struct hold_new *n, int64_t now,
				 const struct event_view *e)
{
	enum sd_result r;
	int64_t held = 0, left;

	if ((r = holds_held(db, e->id, 0, now, &held)) != SD_OK)
		return r;
	left = e->capacity - e->seats_sold - held;
	if (left >= n->seats)
		return SD_OK;
	if (left <= 0)
		return err_set(SD_SOLD_OUT, "event %lld is sold out%s", (long long)e->id,
			       held ? " for now: other buyers are paying for the last seats" : "");
	return err_set(SD_SOLD_OUT, "event %lld has only %lld seat%s left, not %lld",
		       (long long)e->id, (long long)left, left == 1 ? "" : "s", (long long)n->seats);
}

/* the cap on open holds per client and per client network; others: places
 * in line the caller counts against the same caps (0, 0 without a line) */
static enum sd_result caps_check(struct db *db, const struct hold_new *n,
				 const struct hold_rules *rules, int64_t now,
				 const int64_t others[2])
{
	enum sd_result r;
	int64_t k = 0, kn = 0;

	if ((r = holds_of_client(db, n->client, n->client_net, now, &k, &kn)) != SD_OK)
		return r;
	k += others ? others[0] : 0;
	kn += others ? others[1] : 0;
	if (k >= rules->per_client || kn >= rules->per_client)
		return err_set(SD_LIMITED, "your %s holds %lld unpaid checkout%s already: pay or "
			       "wait for one to end", k >= rules->per_client ? "address" : "network",
			       (long long)(k >= rules->per_client ? k : kn),
			       (k >= rules->per_client ? k : kn) == 1 ? "" : "s");
	return SD_OK;
}

static const char SQL_HOLD_INSERT[] =
	"INSERT INTO holds (public_id, event_id, seats, buyer_name, buyer_email, client, "
	"client_net, amount_minor, currency, created_at, expires_at, link, pay_until, "
	"instant_only) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) "
	"ON CONFLICT DO NOTHING RETURNING id";

/* the provider session's expiry: past the last moment this hold may ask
 * for it (its lease renewed as often as it may be) by Stripe's least, so
 * that every attempt in the hold's life sends this same value */
static int64_t pay_until_of(const struct hold_rules *ru, int64_t now)
{
	return now + ru->ttl_ms * (ru->renewals + 1) + HOLD_SESSION_MARGIN_MS;
}

static enum sd_result hold_insert(struct db *db, const struct hold_new *n,
				  const struct event_view *e, int64_t now,
				  const struct hold_rules *ru, char *public_id, int64_t *id)
{
	char link[HOLD_LINK_MAX];
	struct db_stmt *st;
	enum sd_result r;
	int64_t amount, pending = 0;
	int row = 0, tries;

	*id = 0;
	if ((r = money_total(e->price_minor, n->seats, &amount)) != SD_OK ||
	    (r = seats_sum(db, SQL_PENDING_SEATS, e->id, 0, now, &pending)) != SD_OK)
		return r;
	for (tries = 0; tries < 3 && !*id; tries++) {
		if ((r = hold_names(public_id, link)) != SD_OK)
			return r;
		if (!(st = db_stmt(db, SQL_HOLD_INSERT)))
			return SD_DB;
		db_bind_text(st, 1, public_id);
		db_bind_int(st, 2, n->event_id);
		db_bind_int(st, 3, n->seats);
		db_bind_text(st, 4, n->name);
		db_bind_text(st, 5, n->email);
		db_bind_text(st, 6, n->client);
		db_bind_text(st, 7, n->client_net && *n->client_net ? n->client_net : n->client);
		db_bind_int(st, 8, amount);
		db_bind_text(st, 9, e->currency);
		db_bind_int(st, 10, now);
		db_bind_int(st, 11, now + ru->ttl_ms);
		db_bind_text(st, 12, link);
		db_bind_int(st, 13, pay_until_of(ru, now));
		/* payments that take days keep at most the unpaid share */
		db_bind_int(st, 14, pending + n->seats > holds_share_cap(e, ru));
		r = db_step(st, &row);
		if (r == SD_OK && row)
			*id = db_col_int(st, 0);
		db_reset(st);
		if (r != SD_OK)
			return r;
	}
	explicit_bzero(link, sizeof link);
	return *id ? SD_OK : err_set(SD_DB, "no free hold id in 3 draws");
}

enum sd_result hold_add_in(struct db *db, const struct hold_new *n, const struct hold_rules *rules,
			   const struct event_view *e, int64_t now, const int64_t others[2],
			   struct hold_view *out)
{
	struct hold_rules ru = *rules;
	enum sd_result r;
	int64_t id = 0;
	char public_id[HOLD_ID_MAX], job_id[64], payload[64];

	hold_rules_fill(&ru);
	if ((r = seats_free(db, n, now, e)) != SD_OK ||
	    (r = caps_check(db, n, &ru, now, others)) != SD_OK ||
	    (r = hold_insert(db, n, e, now, &ru, public_id, &id)) != SD_OK)
		return r;
	/* the reconcile job: looks the payment up when the hold ends */
	snprintf(job_id, sizeof job_id, "outbox:%s:reconcile", public_id);
	snprintf(payload, sizeof payload, "{\"hold_id\":%lld}", (long long)id);
	if ((r = outbox_add(db, JOB_KIND_RECONCILE, job_id, payload,
			    ru.ttl_ms + HOLD_RECONCILE_DELAY_MS, 0, NULL)) != SD_OK)
		return r;
	return hold_get_id(db, id, out);
}

enum sd_result hold_add(struct db *db, const struct hold_new *n, const struct hold_rules *rules,
			struct hold_view *out)
{
	struct hold_rules ru = *rules;
	struct event_view e;
	enum sd_result r;
	int64_t now = clock_now_ms();

	hold_rules_fill(&ru);
	if ((r = hold_new_valid(n, &ru)) != SD_OK)
		return r;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = hold_event_sells(db, n->event_id, now, &e)) == SD_OK)
		r = hold_add_in(db, n, &ru, &e, now, NULL, out);
	return db_end(db, r);
}

/* ======================== changes ======================================== */

static const char SQL_RENEW[] =
	"UPDATE holds SET expires_at = ?2, renewals = renewals + 1 WHERE public_id = ?1 "
	"AND state = 'open' AND expires_at > ?3 AND renewals < ?4";

enum sd_result hold_renew(struct db *db, const char *public_id, const struct hold_rules *rules,
			  struct hold_view *out)
{
	struct hold_rules ru = *rules;
	struct hold_view h;
	struct db_stmt *st;
	enum sd_result r;
	int64_t now = clock_now_ms();
	int won = 0;

	hold_rules_fill(&ru);
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = hold_get(db, public_id, &h)) != SD_OK)
		goto out;
	if (!hold_live(&h, now)) {
		r = err_set(SD_CONFLICT, "this hold has ended: its seats are no longer kept");
		goto out;
	}
	if (h.renewals >= ru.renewals) {
		r = err_set(SD_LIMITED, "this hold was renewed %lld time%s already, as often as it "
			    "may be", (long long)h.renewals, h.renewals == 1 ? "" : "s");
		goto out;
	}
	if (!(st = db_stmt(db, SQL_RENEW))) {
		r = SD_DB;
		goto out;
	}
	db_bind_text(st, 1, public_id);
	db_bind_int(st, 2, now + ru.ttl_ms);
	db_bind_int(st, 3, now);
	db_bind_int(st, 4, ru.renewals);
	if ((r = db_run(st)) != SD_OK)
		goto out;
	won = db_changes(db) > 0;
	if (!won)
		r = err_set(SD_CONFLICT, "this hold has ended: its seats are no longer kept");
	else if (out)
		r = hold_get(db, public_id, out);
out:
	return db_end(db, r);
}

/* an open hold's only: a session made for one that ended meanwhile is never
 * its, and no buyer is sent to it */
static const char SQL_SET_SESSION[] =
	"UPDATE holds SET session_id = ?2, pay_url = ?3 WHERE id = ?1 AND session_id IS NULL "
	"AND state = 'open'";

enum sd_result hold_set_session(struct db *db, int64_t id, const char *session_id,
				const char *url, struct hold_view *out)
{
	struct db_stmt *st;
	enum sd_result r;

	if (!session_id || !*session_id || strlen(session_id) >= HOLD_SESSION_MAX || !url ||
	    strlen(url) >= HOLD_URL_MAX)
		return err_set(SD_INVALID, "a provider's session id or page is too long");
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_SET_SESSION))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, id);
	db_bind_text(st, 2, session_id);
	db_bind_text(st, 3, url);
	if ((r = db_run(st)) == SD_OK && out)
		r = hold_get_id(db, id, out);
out:
	return db_end(db, r);
}

/* from open or pending; from expired only for a payment (a late one, or a
 * pending one's failure); from failed only to its order or refund (a
 * payment that came after all) */
static const char SQL_SETTLE[] =
	"UPDATE holds SET state = ?2, order_id = (SELECT id FROM orders WHERE public_id = ?3), "
	"payment_ref = coalesce(?4, payment_ref), settled_at = ?5, problem = ?7 "
	"WHERE id = ?1 AND (state IN ('open', 'pending') OR (state = 'expired' AND ?6 = 1) OR "
	"(state = 'failed' AND ?6 = 1 AND ?2 IN ('ordered', 'refunded')))";

enum sd_result hold_settle(struct db *db, int64_t id, enum hold_state to, const char *order,
			   const char *payment_ref, int *won)
{
	return hold_settle_why(db, id, to, order, payment_ref, NULL, won);
}

enum sd_result hold_settle_why(struct db *db, int64_t id, enum hold_state to, const char *order,
			       const char *payment_ref, const char *problem, int *won)
{
	struct db_stmt *st = db_stmt(db, SQL_SETTLE);
	enum sd_result r;

	*won = 0;
	assert(to != HOLD_OPEN && to != HOLD_PENDING);
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	db_bind_text(st, 2, STATE_NAMES[to]);
	db_bind_text(st, 3, order);
	db_bind_text(st, 4, payment_ref);
	db_bind_int(st, 5, clock_now_ms());
	db_bind_int(st, 6, payment_ref && *payment_ref);
	db_bind_text(st, 7, problem && *problem ? problem : NULL);
	if ((r = db_run(st)) == SD_OK)
		*won = db_changes(db) > 0;
	return r;
}

static const char SQL_NOTE_PAYMENT[] =
	"UPDATE holds SET payment_ref = ?2 WHERE id = ?1 AND state = 'expired' "
	"AND payment_ref IS NULL";

enum sd_result hold_note_payment(struct db *db, int64_t id, const char *payment_ref, int *won)
{
	struct db_stmt *st = db_stmt(db, SQL_NOTE_PAYMENT);
	enum sd_result r;

	*won = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	db_bind_text(st, 2, payment_ref);
	if ((r = db_run(st)) == SD_OK)
		*won = db_changes(db) > 0;
	return r;
}

static const char SQL_PENDING[] =
	"UPDATE holds SET state = 'pending', payment_ref = ?2, expires_at = ?3 "
	"WHERE id = ?1 AND state = 'open'";

enum sd_result hold_set_pending(struct db *db, int64_t id, const char *payment_ref,
				int64_t until, int *won)
{
	struct db_stmt *st = db_stmt(db, SQL_PENDING);
	enum sd_result r;

	*won = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	db_bind_text(st, 2, payment_ref && *payment_ref ? payment_ref : NULL);
	db_bind_int(st, 3, until);
	if ((r = db_run(st)) == SD_OK)
		*won = db_changes(db) > 0;
	return r;
}

static const char SQL_PRUNE[] =
	"DELETE FROM holds WHERE id IN (SELECT id FROM holds WHERE "
	"state = 'expired' AND payment_ref IS NULL AND problem IS NULL "
	"AND settled_at < ?1 ORDER BY id LIMIT ?2)";

enum sd_result holds_prune(struct db *db, int64_t before_ms, int limit, int64_t *n)
{
	return db_prune(db, SQL_PRUNE, before_ms, limit, n);
}
