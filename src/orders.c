/*
 * orders.c: an order's life at the box office (orders.h): intake, its
 * changes, what it looks like, the lists, the checks.
 *
 * Invariants:
 *  - an order, its tickets and its first outbox rows commit together
 *    (order_add), in the intake's FULL-durability transaction;
 *  - a seat is held by at most one live ticket of its event, and never
 *    above the event's capacity (schema: a partial unique index and a
 *    trigger); a cancelled ticket keeps its row and gives its seat back,
 *    which intake sells again, once;
 *  - every change (resend, email, cancel) writes its order_changes row and
 *    the outbox row of its job in the transaction that makes it;
 *  - a ticket is admitted or cancelled, never both (schema CHECK): an order
 *    with an admitted ticket is not cancelled.
 */
#define _GNU_SOURCE
#include "orders.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "event_edit.h"
#include "holds.h"
#include "refunds.h"
#include "code.h"
#include "jobkinds.h"
#include "outbox.h"
#include "queue.h"
#include "text.h"
#include "timefmt.h"

/* ======================== intake ========================================= */

/* Public ids: "T" and 9 characters without the look-alikes 0 O 1 I L. */
static void order_public_id(char *buf)
{
	static const char alphabet[] = "23456789ABCDEFGHJKMNPQRSTUVWXYZ";
	unsigned char rnd[9];
	int i;

	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		for (i = 0; i < 9; i++)
			rnd[i] = (unsigned char)(clock_mono_us() >> (i * 3));
	buf[0] = 'T';
	for (i = 0; i < 9; i++)
		buf[i + 1] = alphabet[rnd[i] % (sizeof alphabet - 1)];
	buf[10] = '\0';
}

/* Seat 1 is A-1, seat 21 is B-1: rows of 20 named A..Z, AA, AB ... */
static void seat_label(int64_t seat_no, char *buf, size_t size)
{
	int64_t row = (seat_no - 1) / 20, num = (seat_no - 1) % 20 + 1;
	char letters[16];
	int n = 0, i;

	do {
		letters[n++] = (char)('A' + row % 26);
		row = row / 26 - 1;
	} while (row >= 0 && n < 15);
	for (i = 0; i < n / 2; i++) {
		char t = letters[i];
		letters[i] = letters[n - 1 - i];
		letters[n - 1 - i] = t;
	}
	letters[n] = '\0';
	snprintf(buf, size, "%s-%lld", letters, (long long)num);
}

static const char SQL_ORDER_BY_KEY[] =
	"SELECT public_id, event_id, buyer_name, coalesce(buyer_email, ''), seats, "
	"coalesce(payment, '') FROM orders WHERE idempotency_key = ?1";
/* The event's capacity, the highest seat ever sold (live or not), and
 * whether it sells (event_edit.h). */
static const char SQL_EVENT_SEATS[] =
	"SELECT e.capacity, (SELECT coalesce(max(seat_no), 0) FROM tickets WHERE event_id = e.id), "
	"e.starts_at, coalesce(e.closed_at, 0), "
	"coalesce((SELECT tickets - cancelled FROM event_totals WHERE event_id = e.id), 0), "
	"coalesce(e.price_minor, 0), coalesce(e.currency, ''), coalesce(e.cancelled_at, 0), "
	"e.reminders FROM events e WHERE e.id = ?1";
/* Seats cancelled tickets gave back and no live ticket holds again, the
 * lowest first (the partial index tickets_freed). */
static const char SQL_FREED_SEATS[] =
	"SELECT DISTINCT c.seat_no FROM tickets c WHERE c.event_id = ?1 "
	"AND c.cancelled_at IS NOT NULL AND c.seat_no <= ?3 AND NOT EXISTS (SELECT 1 FROM tickets l "
	"WHERE l.event_id = ?1 AND l.seat_no = c.seat_no AND l.cancelled_at IS NULL) "
	"ORDER BY c.seat_no LIMIT ?2";
/* A public id that is taken returns no row (draw again); any other
 * refusal (the idempotency key's UNIQUE) is an error, as it must be on
 * PostgreSQL, where a failed statement ends the transaction. */
static const char SQL_ORDER_INSERT[] =
	"INSERT INTO orders (public_id, event_id, buyer_name, buyer_email, seats, idempotency_key, "
	"created_at, payment, amount_minor, currency, payment_ref) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) "
	"ON CONFLICT (public_id) DO NOTHING "
	"RETURNING id";
/* PostgreSQL, where writers do not queue for one lock as in SQLite: the
 * order's event row is locked first, so that intake for one event runs one
 * transaction at a time (its replay check and its highest seat are then
 * read by statements that start after the lock, and see every order
 * committed before it).  NO KEY UPDATE, not UPDATE: it still queues
 * intake behind intake, but lets the foreign-key checks of other
 * transactions (FOR KEY SHARE of the event row) through.  A render's
 * second update of an event_totals row in one transaction checks its key
 * again; with FOR UPDATE here, that check waited for this intake while this
 * intake's own totals update waited for the render: a deadlock, one in a
 * few hundred orders on a busy event. */
/* A code_id that is taken returns no row (draw again), as a public id. */
static const char SQL_TICKET_INSERT[] =
	"INSERT INTO tickets (order_id, event_id, seat_no, seat_label, code_id) "
	"VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (code_id) DO NOTHING RETURNING id";

enum sd_result order_payment_valid(const char *s)
{
	if (s && (strcmp(s, "cash") == 0 || strcmp(s, "card") == 0))
		return SD_OK;
	return err_set(SD_INVALID, "payment must be cash or card (taken at the box office)");
}

static enum sd_result order_validate(const struct order_new *o)
{
	enum sd_result r;
	const char *k;

	if ((r = text_field_valid("buyer name", o->name)) != SD_OK)
		return r;
	if (o->email && mail_address_valid(o->email) != SD_OK)
		return err_set(SD_INVALID, "'%.80s' is not an email address like name@example.com",
			       o->email);
	/* "online" only with the provider's payment, which the shop gives */
	if (o->payment && !(o->payment_ref && strcmp(o->payment, "online") == 0) &&
	    (r = order_payment_valid(o->payment)) != SD_OK)
		return r;
	if (o->seats < 1 || o->seats > TICKETS_SEATS_MAX)
		return err_set(SD_INVALID, "seats must be between 1 and %d", TICKETS_SEATS_MAX);
	if (o->event_id < 1)
		return err_set(SD_INVALID, "event id must be a positive number");
	if ((k = o->idempotency_key)) {
		if (!*k || strlen(k) > TICKETS_KEY_MAX)
			return err_set(SD_INVALID, "idempotency key must be 1 to %d characters",
				       TICKETS_KEY_MAX);
		for (; *k; k++)
			if ((unsigned char)*k <= ' ' || (unsigned char)*k >= 127)
				return err_set(SD_INVALID, "idempotency key may hold only printable "
					       "ASCII without spaces");
	}
	return SD_OK;
}

/* A key seen before: the same order again is a replay, another is an error. */
static enum sd_result order_replay(struct db *db, const struct order_new *o, char *public_id,
				   int *found)
{
	struct db_stmt *st = db_stmt(db, SQL_ORDER_BY_KEY);
	enum sd_result r;
	int row = 0;

	*found = 0;
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, o->idempotency_key);
	if ((r = db_step(st, &row)) != SD_OK || !row)
		goto out;
	*found = 1;
	snprintf(public_id, ORDER_ID_MAX, "%s", db_col_text(st, 0));
	if (db_col_int(st, 1) != o->event_id || strcmp(db_col_text(st, 2), o->name) != 0 ||
	    strcmp(db_col_text(st, 3), o->email ? o->email : "") != 0 ||
	    db_col_int(st, 4) != o->seats ||
	    strcmp(db_col_text(st, 5), o->payment ? o->payment : "") != 0)
		r = err_set(SD_INVALID, "idempotency key '%s' was used for a different order (%s)",
			    o->idempotency_key, public_id);
out:
	db_reset(st);
	return r;
}

/* What an order is charged: the shop's hold says (o->currency), else the
 * event's price for its seats, else nothing (an event with no price). */
struct order_charge {
	int64_t amount_minor;
	char currency[4];		/* "": none recorded */
	int64_t starts_at;		/* the event's start, for the reminder */
	int reminders;			/* the event sends reminders */
};

/* seats_left: the event has n seats free for o of tickets and of the live
 * holds but o's own hold (holds.h), else SD_SOLD_OUT saying how many. */
static enum sd_result seats_left(struct db *db, const struct order_new *o, int64_t capacity,
				 int64_t live, int64_t now)
{
	enum sd_result r;
	int64_t held = 0, left;

	if ((r = holds_held(db, o->event_id, o->hold_id, now, &held)) != SD_OK)
		return r;
	left = capacity - live - held;
	if (left >= o->seats)
		return SD_OK;
	if (left <= 0)
		return err_set(SD_SOLD_OUT, "event %lld is sold out%s", (long long)o->event_id,
			       held ? " for now (buyers are paying for the last seats)" : "");
	return err_set(SD_SOLD_OUT, "event %lld has only %lld seat%s left, not %lld",
		       (long long)o->event_id, (long long)left, left == 1 ? "" : "s",
		       (long long)o->seats);
}

/*
 * order_seats: the n seats an order of event_id gets, read inside its write
 * transaction: the seats given back first, then those after the highest one
 * ever sold.  [out] seats[0..n), *left: the seats the event has left (for
 * the message when the schema refuses one past the capacity), *charge.
 * SD_NOT_FOUND when there is no such event.
 */
static enum sd_result order_seats(struct db *db, const struct order_new *o, int64_t *seats,
				  int64_t *left, struct order_charge *charge)
{
	struct db_stmt *st;
	enum sd_result r;
	int64_t capacity = 0, last = 0, got = 0, starts_at = 0, closed_at = 0, live = 0, price = 0;
	int64_t cancelled_at = 0;
	int64_t event_id = o->event_id, n = o->seats, now = clock_now_ms();
	int row = 0;

	if (!(st = db_stmt(db, SQL_EVENT_SEATS)))
		return SD_DB;
	db_bind_int(st, 1, event_id);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (row) {
		capacity = db_col_int(st, 0);
		last = db_col_int(st, 1);
		starts_at = db_col_int(st, 2);
		closed_at = db_col_int(st, 3);
		live = db_col_int(st, 4);
		price = db_col_int(st, 5);
		text_copy(charge->currency, sizeof charge->currency, db_col_text(st, 6));
		cancelled_at = db_col_int(st, 7);
		charge->reminders = (int)db_col_int(st, 8);
		charge->starts_at = starts_at;
	}
	db_reset(st);
	if (!row)
		return err_set(SD_NOT_FOUND, "no event %lld", (long long)event_id);
	if ((r = event_sale_check(event_id, starts_at, closed_at, cancelled_at, now)) != SD_OK ||
	    (r = seats_left(db, o, capacity, live, now)) != SD_OK)
		return r;
	charge->amount_minor = charge->currency[0] ? price * n : 0;
	if (o->currency && *o->currency) {
		charge->amount_minor = o->amount_minor;
		text_copy(charge->currency, sizeof charge->currency, o->currency);
	}
	if (!(st = db_stmt(db, SQL_FREED_SEATS)))
		return SD_DB;
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, n);
	db_bind_int(st, 3, capacity);
	while (db_next(st, &r) && got < n)
		seats[got++] = db_col_int(st, 0);
	db_reset(st);
	if (r != SD_OK)
		return r;
	*left = got + (capacity > last ? capacity - last : 0);
	while (got < n)
		seats[got++] = ++last;
	return SD_OK;
}

/* order_ticket: one ticket on seat_no, under a code_id drawn afresh (code.h:
 * its code never names a ticket a lost commit made).  [out] *made 0 when the
 * number drawn was taken. */
static enum sd_result order_ticket(struct db *db, const struct order_new *o, int64_t order_id,
				   int64_t seat_no, int *made)
{
	struct db_stmt *st;
	enum sd_result r;
	int64_t code_id;
	char label[32];

	*made = 0;
	if ((r = code_id_new(&code_id)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_TICKET_INSERT)))
		return SD_DB;
	seat_label(seat_no, label, sizeof label);
	db_bind_int(st, 1, order_id);
	db_bind_int(st, 2, o->event_id);
	db_bind_int(st, 3, seat_no);
	db_bind_text(st, 4, label);
	db_bind_int(st, 5, code_id);
	r = db_step(st, made);
	db_reset(st);
	return r;
}

/* order_tickets: one ticket per seat; the schema refuses a seat past the
 * capacity (SD_REFUSED), which is the event's being sold out. */
static enum sd_result order_tickets(struct db *db, const struct order_new *o, int64_t order_id,
				    const int64_t *seats, int64_t left)
{
	enum sd_result r = SD_OK;
	int64_t i;
	int made = 0, tries;

	for (i = 0; i < o->seats; i++) {
		for (tries = 0; tries < 5 && r == SD_OK && !made; tries++)
			r = order_ticket(db, o, order_id, seats[i], &made);
		if (r == SD_REFUSED) {
			if (left <= 0)
				return err_set(SD_SOLD_OUT, "event %lld is sold out",
					       (long long)o->event_id);
			return err_set(SD_SOLD_OUT, "event %lld has only %lld seat%s left, not %lld",
				       (long long)o->event_id, (long long)left,
				       left == 1 ? "" : "s", (long long)o->seats);
		}
		if (r != SD_OK)
			return r;
		if (!made)
			return err_set(SD_DB, "no free ticket code in 5 draws");
		made = 0;
	}
	return SD_OK;
}

/* order_insert: the order's row under a fresh public id.  [out] *order_id. */
static enum sd_result order_insert(struct db *db, const struct order_new *o,
				   const struct order_charge *charge, char *public_id,
				   int64_t *order_id)
{
	struct db_stmt *st;
	enum sd_result r = SD_OK;
	int row = 0, tries;

	*order_id = 0;
	for (tries = 0; tries < 5; tries++) {
		order_public_id(public_id);
		if (!(st = db_stmt(db, SQL_ORDER_INSERT)))
			return SD_DB;
		db_bind_text(st, 1, public_id);
		db_bind_int(st, 2, o->event_id);
		db_bind_text(st, 3, o->name);
		db_bind_text(st, 4, o->email);
		db_bind_int(st, 5, o->seats);
		db_bind_text(st, 6, o->idempotency_key);
		db_bind_int(st, 7, clock_now_ms());
		db_bind_text(st, 8, o->payment);
		if (charge->currency[0]) {
			db_bind_int(st, 9, charge->amount_minor);
			db_bind_text(st, 10, charge->currency);
		} else {
			db_bind_null(st, 9);
			db_bind_null(st, 10);
		}
		db_bind_text(st, 11, o->payment_ref);
		r = db_step(st, &row);
		if (r == SD_OK && row)
			*order_id = db_col_int(st, 0);
		db_reset(st);
		if (r != SD_OK || *order_id)	/* no row: the public id is taken, draw again */
			break;
	}
	if (r == SD_OK && !*order_id)
		r = err_set(SD_DB, "no free order id in 5 draws");
	return r;
}

enum sd_result order_add(struct db *db, const struct order_new *o, char *public_id,
			 int *replayed)
{
	struct order_charge charge = { 0, "", 0, 0 };
	enum sd_result r;
	int64_t order_id = 0, left = 0, seats[TICKETS_SEATS_MAX];
	char payload[160], job_id[QUEUE_JOB_ID_MAX + 1];
	int found = 0;

	*replayed = 0;
	if ((r = order_validate(o)) != SD_OK)
		return r;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = event_row_lock(db, o->event_id)) != SD_OK)
		goto out;
	if (o->idempotency_key) {
		if ((r = order_replay(db, o, public_id, &found)) != SD_OK)
			goto out;
		if (found) {
			*replayed = 1;
			goto out;
		}
	}
	if ((r = order_seats(db, o, seats, &left, &charge)) != SD_OK ||
	    (r = order_insert(db, o, &charge, public_id, &order_id)) != SD_OK ||
	    (r = order_tickets(db, o, order_id, seats, left)) != SD_OK)
		goto out;
	snprintf(payload, sizeof payload, "{\"order_id\":%lld}", (long long)order_id);
	tickets_job_id(public_id, "render", job_id, sizeof job_id);
	if ((r = outbox_add(db, JOB_KIND_RENDER, job_id, payload, 0, 0, NULL)) != SD_OK)
		goto out;
	snprintf(payload, sizeof payload, "{\"order_id\":%lld,\"event_id\":%lld,\"seats\":%lld}",
		 (long long)order_id, (long long)o->event_id, (long long)o->seats);
	tickets_job_id(public_id, "count", job_id, sizeof job_id);
	if ((r = outbox_add(db, JOB_KIND_COUNT, job_id, payload, 0, 0, NULL)) == SD_OK &&
	    charge.reminders)
		r = order_reminder_add(db, order_id, public_id, charge.starts_at);
out:
	return db_end(db, r);
}

enum sd_result order_reminder_add(struct db *db, int64_t order_id, const char *public_id,
				  int64_t starts_at)
{
	int64_t before = event_rules_get()->remind_before_ms, at = starts_at - before;
	int64_t now = clock_now_ms();
	char payload[96], intent[40], job_id[QUEUE_JOB_ID_MAX + 1];
	enum sd_result r;
	int there = 0;

	if (before <= 0 || at <= now)	/* none, or it would come with the tickets */
		return SD_OK;
	snprintf(intent, sizeof intent, "reminder-%lld", (long long)starts_at);
	tickets_job_id(public_id, intent, job_id, sizeof job_id);
	/* an event moved back to a start it had: that start's reminder stands */
	if ((r = outbox_queued(db, job_id, &there)) != SD_OK || there)
		return r;
	snprintf(payload, sizeof payload, "{\"order_id\":%lld,\"starts_at\":%lld}",
		 (long long)order_id, (long long)starts_at);
	return outbox_add(db, JOB_KIND_REMINDER, job_id, payload, at - now, 0, NULL);
}

/* ======================== changes ======================================== */

enum sd_result order_id_norm(const char *in, char *out)
{
	size_t i, n = in ? strlen(in) : 0;

	out[0] = '\0';
	if (n < 2 || n >= ORDER_ID_MAX || (in[0] != 'T' && in[0] != 't'))
		goto bad;
	for (i = 0; i < n; i++) {
		char c = in[i];

		if (c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
			goto bad;
		out[i] = c;
	}
	out[n] = '\0';
	return SD_OK;
bad:
	out[0] = '\0';
	return err_set(SD_INVALID, "'%.40s' is not an order id (T and 9 letters or digits, as "
		       "order add prints)", in ? in : "");
}

/* norm_or_missing: public_id in capitals into buf, or NULL with "no order"
 * (SD_NOT_FOUND: a text that cannot be an id names no order) */
static const char *norm_or_missing(const char *public_id, char *buf)
{
	if (order_id_norm(public_id, buf) == SD_OK)
		return buf;
	err_set(SD_NOT_FOUND, "no order '%.40s'", public_id ? public_id : "");
	return NULL;
}

#define SQL_ORDER_STATE_HEAD \
	"SELECT id, event_id, seats, coalesce(cancelled_at, 0), coalesce(buyer_email, ''), " \
	"coalesce(payment, ''), coalesce(amount_minor, 0), coalesce(currency, ''), payment_ref, " \
	"public_id, coalesce(refunded_minor, 0) FROM orders WHERE "
static const char SQL_ORDER_STATE[] = SQL_ORDER_STATE_HEAD "public_id = ?1";
static const char SQL_ORDER_STATE_ID[] = SQL_ORDER_STATE_HEAD "id = ?1";
static const char SQL_CHANGE_ADD[] =
	"INSERT INTO order_changes (order_id, at, kind, actor, detail) VALUES (?1, ?2, ?3, ?4, ?5)";

/* An order as its changes start from, read inside their transaction. */
struct order_state {
	int64_t id, event_id, seats, cancelled_at, amount_minor;
	int64_t refunded_minor;		/* given back outside the box already */
	char email[256];
	char payment[33];		/* "cash", "card", "online"; "": not recorded */
	char currency[4];		/* "": no charge recorded */
	char payment_ref[REFUND_REF_MAX];	/* the provider's payment; "": none */
	char public_id[ORDER_ID_MAX];
};

/* the order named by public_id, or (public_id NULL) by its row id */
static enum sd_result order_state_get(struct db *db, const char *public_id, int64_t id,
				      struct order_state *o)
{
	struct db_stmt *st = db_stmt(db, public_id ? SQL_ORDER_STATE : SQL_ORDER_STATE_ID);
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	if (public_id)
		db_bind_text(st, 1, public_id);
	else
		db_bind_int(st, 1, id);
	if ((row = db_next(st, &r))) {
		o->id = db_col_int(st, 0);
		o->event_id = db_col_int(st, 1);
		o->seats = db_col_int(st, 2);
		o->cancelled_at = db_col_int(st, 3);
		snprintf(o->email, sizeof o->email, "%s", db_col_text(st, 4));
		text_copy(o->payment, sizeof o->payment, db_col_text(st, 5));
		o->amount_minor = db_col_int(st, 6);
		text_copy(o->currency, sizeof o->currency, db_col_text(st, 7));
		text_copy(o->payment_ref, sizeof o->payment_ref,
			  db_col_is_null(st, 8) ? "" : db_col_text(st, 8));
		text_copy(o->public_id, sizeof o->public_id, db_col_text(st, 9));
		o->refunded_minor = db_col_int(st, 10);
	}
	db_reset(st);
	if (r == SD_OK && !row)
		r = public_id ? err_set(SD_NOT_FOUND, "no order '%.40s'", public_id)
			      : err_set(SD_NOT_FOUND, "no order %lld", (long long)id);
	return r;
}

static enum sd_result order_state_read(struct db *db, const char *public_id,
				       struct order_state *o)
{
	return order_state_get(db, public_id, 0, o);
}

/* refund_owed: a cancelled order's money owed back, in the cancellation's
 * transaction: through the provider (refund_payment, queued before the
 * cancellation's email job) when the provider took it, at the window when
 * the box office did; nothing for an order that recorded no charge. */
static enum sd_result refund_owed(struct db *db, const char *public_id,
				  const struct order_state *o, unsigned flags,
				  struct order_cancel_result *res)
{
	/* what is left of the payment: a part refunded at the provider is gone */
	struct refund_new rn = { o->payment_ref[0] ? o->payment_ref : NULL, public_id, o->id, 0,
				 o->amount_minor - o->refunded_minor, o->currency, REFUND_CANCELLED,
				 (flags & ORDER_CANCEL_FOR_EVENT) != 0 };
	int added = 0;

	if (!o->currency[0] || rn.amount_minor <= 0 ||
	    (!o->payment_ref[0] && strcmp(o->payment, "cash") != 0 &&
	     strcmp(o->payment, "card") != 0))
		return SD_OK;
	res->refund = o->payment_ref[0] ? ORDER_REFUND_PROVIDER : ORDER_REFUND_WINDOW;
	return refund_add(db, &rn, &added, NULL);
}

/* change_add: the change's row (who, what, why), in the caller's
 * transaction; detail may be NULL */
static enum sd_result change_add(struct db *db, int64_t order_id, const char *kind,
				 const char *actor, const char *detail)
{
	struct db_stmt *st = db_stmt(db, SQL_CHANGE_ADD);

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, order_id);
	db_bind_int(st, 2, clock_now_ms());
	db_bind_text(st, 3, kind);
	db_bind_text(st, 4, actor);
	db_bind_text(st, 5, detail);
	return db_run(st);
}

static enum sd_result actor_valid(const char *actor)
{
	return text_check("who", actor, ORDER_ACTOR_MAX);
}

static const char SQL_RESEND_COUNT[] =
	"UPDATE orders SET resends = resends + 1 WHERE id = ?1 RETURNING resends";

static const char SQL_RESEND_NTH[] =
	"SELECT at FROM order_changes WHERE order_id = ?1 AND kind = 'resend' ORDER BY at DESC "
	"LIMIT 1 OFFSET ?2";

/* resend_wait: how long until one more resend fits `max` in window_ms (0:
 * now): the max-th newest resend must have left the window */
static enum sd_result resend_wait(struct db *db, int64_t order_id, int64_t max,
				  int64_t window_ms, int64_t now, int64_t *wait)
{
	struct db_stmt *st;
	enum sd_result r;

	*wait = 0;
	if (max <= 0)
		return SD_OK;
	if (!(st = db_stmt(db, SQL_RESEND_NTH)))
		return SD_DB;
	db_bind_int(st, 1, order_id);
	db_bind_int(st, 2, max - 1);
	if (db_next(st, &r) && db_col_int(st, 0) > now - window_ms)
		*wait = db_col_int(st, 0) + window_ms - now;
	db_reset(st);
	return r;
}

/* resend_limited: SD_LIMITED with what to say when lim allows no resend of
 * the order now; [out] *retry_after_ms */
static enum sd_result resend_limited(struct db *db, const char *public_id, int64_t order_id,
				     const struct order_resend_limit *lim,
				     int64_t *retry_after_ms)
{
	int64_t now = clock_now_ms(), wait_h = 0, wait_d = 0, wait;
	enum sd_result r;

	*retry_after_ms = 0;
	if (!lim)
		return SD_OK;
	if ((r = resend_wait(db, order_id, lim->per_hour, 3600000, now, &wait_h)) != SD_OK ||
	    (r = resend_wait(db, order_id, lim->per_day, 86400000, now, &wait_d)) != SD_OK)
		return r;
	if (!wait_h && !wait_d)
		return SD_OK;
	wait = wait_h > wait_d ? wait_h : wait_d;
	*retry_after_ms = wait;
	return err_set(SD_LIMITED, "order %s was sent again %lld times in the last %s "
		       "(resend_per_%s): the next resend in %lld min", public_id,
		       (long long)(wait_h >= wait_d ? lim->per_hour : lim->per_day),
		       wait_h >= wait_d ? "hour" : "day", wait_h >= wait_d ? "hour" : "day",
		       (long long)((wait + 59999) / 60000));
}

enum sd_result order_resend(struct db *db, const char *public_id, const char *actor,
			    const struct order_resend_limit *lim, int64_t *n,
			    int64_t *retry_after_ms)
{
	struct order_state o;
	struct db_stmt *st;
	enum sd_result r;
	char payload[96], detail[32], intent[32], job_id[QUEUE_JOB_ID_MAX + 1];
	char idn[ORDER_ID_MAX];
	int64_t wait = 0;

	*n = 0;
	if (!(public_id = norm_or_missing(public_id, idn)))
		return SD_NOT_FOUND;
	if ((r = actor_valid(actor)) != SD_OK || (r = db_begin(db)) != SD_OK)
		return r;
	if ((r = order_state_read(db, public_id, &o)) != SD_OK)
		goto out;
	if (o.cancelled_at) {
		r = err_set(SD_CONFLICT, "order %s is cancelled: its tickets are not sent again",
			    public_id);
		goto out;
	}
	if (!o.email[0]) {
		r = err_set(SD_CONFLICT, "order %s has no email address (sold at the window): give "
			    "it one first", public_id);
		goto out;
	}
	/* n is taken from the order's own row in this transaction: two resends
	 * at once get two numbers, two intents, two keys */
	if (!(st = db_stmt(db, SQL_RESEND_COUNT))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, o.id);
	if (db_next(st, &r))
		*n = db_col_int(st, 0);
	db_reset(st);
	/* after the row's update: a second resend at once waits for it here */
	if (r != SD_OK || (r = resend_limited(db, public_id, o.id, lim, &wait)) != SD_OK)
		goto out;
	snprintf(detail, sizeof detail, "r%lld", (long long)*n);
	snprintf(payload, sizeof payload, "{\"order_id\":%lld,\"resend\":%lld}", (long long)o.id,
		 (long long)*n);
	snprintf(intent, sizeof intent, "send-r%lld", (long long)*n);
	tickets_job_id(public_id, intent, job_id, sizeof job_id);
	if ((r = change_add(db, o.id, "resend", actor, detail)) == SD_OK)
		r = outbox_add(db, JOB_KIND_SEND, job_id, payload, 0, 0, NULL);
out:
	if (retry_after_ms)
		*retry_after_ms = wait;
	return db_end(db, r);
}

static const char SQL_SET_EMAIL[] = "UPDATE orders SET buyer_email = ?2 WHERE id = ?1";

enum sd_result order_set_email(struct db *db, const char *public_id, const char *email,
			       const char *actor, int *changed)
{
	struct order_state o;
	struct db_stmt *st;
	enum sd_result r;
	char idn[ORDER_ID_MAX];

	*changed = 0;
	if (!(public_id = norm_or_missing(public_id, idn)))
		return SD_NOT_FOUND;
	if (!email || mail_address_valid(email) != SD_OK)
		return err_set(SD_INVALID, "'%.80s' is not an email address like name@example.com",
			       email ? email : "");
	if ((r = actor_valid(actor)) != SD_OK || (r = db_begin(db)) != SD_OK)
		return r;
	if ((r = order_state_read(db, public_id, &o)) != SD_OK || strcmp(o.email, email) == 0)
		goto out;
	if (!(st = db_stmt(db, SQL_SET_EMAIL))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, o.id);
	db_bind_text(st, 2, email);
	if ((r = db_run(st)) == SD_OK && (r = change_add(db, o.id, "email", actor, o.email[0] ? o.email : NULL)) == SD_OK)
		*changed = 1;
out:
	return db_end(db, r);
}

static const char SQL_CANCEL_ORDER[] =
	"UPDATE orders SET cancelled_at = ?2 WHERE id = ?1 AND cancelled_at IS NULL";
/* a ticket admitted meanwhile (another box's door) is left as it is, and
 * the count of what changed tells */
static const char SQL_CANCEL_TICKETS[] =
	"UPDATE tickets SET cancelled_at = ?2 WHERE order_id = ?1 AND scanned_at IS NULL "
	"AND cancelled_at IS NULL";
static const char SQL_ADMITTED[] =
	"SELECT seat_label, scanned_at, coalesce(scanned_by, '') FROM tickets "
	"WHERE order_id = ?1 AND scanned_at IS NOT NULL ORDER BY seat_no";

/* the order's admitted tickets into res; SD_CONFLICT naming the first */
static enum sd_result cancel_refused(struct db *db, const char *public_id, int64_t order_id,
				     struct order_cancel_result *res)
{
	struct db_stmt *st = db_stmt(db, SQL_ADMITTED);
	struct order_admitted *a;
	enum sd_result r;
	char when[64];

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, order_id);
	while (db_next(st, &r) && res->n_admitted < ORDER_ADMITTED_MAX) {
		a = &res->admitted[res->n_admitted++];
		snprintf(a->seat, sizeof a->seat, "%s", db_col_text(st, 0));
		a->scanned_at = db_col_int(st, 1);
		text_copy(a->scanned_by, sizeof a->scanned_by, db_col_text(st, 2));
	}
	db_reset(st);
	if (r != SD_OK)
		return r;
	if (!res->n_admitted)	/* cannot be: the counts disagreed for another reason */
		return err_set(SD_DB, "order %s: its tickets changed while it was cancelled",
			       public_id);
	timefmt_format(res->admitted[0].scanned_at, when, sizeof when);
	return err_set(SD_CONFLICT, "seat %s of order %s was admitted at %s%s%s: the order is not "
		       "cancelled", res->admitted[0].seat, public_id, when,
		       res->admitted[0].scanned_by[0] ? " by " : "", res->admitted[0].scanned_by);
}

/* the cancellation of o, in the caller's transaction */
static enum sd_result cancel_in(struct db *db, const struct order_state *o, const char *actor,
				const char *reason, unsigned flags, struct order_cancel_result *res)
{
	const char *public_id = o->public_id;
	struct db_stmt *st;
	enum sd_result r;
	int64_t now = clock_now_ms(), n = 0;
	char payload[160], job_id[QUEUE_JOB_ID_MAX + 1];

	if (!(st = db_stmt(db, SQL_CANCEL_ORDER)))
		return SD_DB;
	db_bind_int(st, 1, o->id);
	db_bind_int(st, 2, now);
	if ((r = db_run_changes(db, st, &n)) != SD_OK)
		return r;
	if (n == 0) {		/* cancelled before: cancelling again changes nothing */
		res->already = 1;
		return SD_OK;
	}
	if (!(st = db_stmt(db, SQL_CANCEL_TICKETS)))
		return SD_DB;
	db_bind_int(st, 1, o->id);
	db_bind_int(st, 2, now);
	if ((r = db_run_changes(db, st, &n)) != SD_OK)
		return r;
	/* a ticket was admitted: nothing of this stays, unless the money went
	 * back (the admitted tickets stay admitted, the others no longer do) */
	if (n != o->seats && !(flags & ORDER_CANCEL_MONEY_BACK))
		return cancel_refused(db, public_id, o->id, res);
	res->seats_freed = n;
	if (!(flags & ORDER_CANCEL_MONEY_BACK) &&
	    (r = refund_owed(db, public_id, o, flags, res)) != SD_OK)
		return r;
	/* for an event's cancellation the counter goes back here too, and the
	 * buyer's one email is the event's (event_runs.h), not this one */
	/* the order leaves the count whole, whatever its tickets did */
	snprintf(payload, sizeof payload, "{\"order_id\":%lld,\"event_id\":%lld,\"seats\":%lld%s}",
		 (long long)o->id, (long long)o->event_id, (long long)o->seats,
		 flags & ORDER_CANCEL_FOR_EVENT ? ",\"mail\":0" : "");
	tickets_job_id(public_id, "cancel", job_id, sizeof job_id);
	if ((r = change_add(db, o->id, "cancel", actor, reason && *reason ? reason : NULL)) ==
	    SD_OK)
		r = outbox_add(db, JOB_KIND_CANCEL, job_id, payload, 0, 0, NULL);
	return r;
}

static enum sd_result cancel_args_valid(const char *actor, const char *reason)
{
	enum sd_result r;

	if ((r = actor_valid(actor)) != SD_OK ||
	    (reason && *reason && (r = text_check("reason", reason, ORDER_REASON_MAX)) != SD_OK))
		return r;
	return SD_OK;
}

enum sd_result order_cancel(struct db *db, const char *public_id, const char *actor,
			    const char *reason, struct order_cancel_result *res)
{
	struct order_state o;
	enum sd_result r;
	char idn[ORDER_ID_MAX];

	memset(res, 0, sizeof *res);
	if (!(public_id = norm_or_missing(public_id, idn)))
		return SD_NOT_FOUND;
	if ((r = cancel_args_valid(actor, reason)) != SD_OK || (r = db_begin(db)) != SD_OK)
		return r;
	if ((r = order_state_read(db, public_id, &o)) == SD_OK)
		r = cancel_in(db, &o, actor, reason, 0, res);
	return db_end(db, r);
}

enum sd_result order_cancel_in(struct db *db, int64_t order_id, const char *actor,
			       const char *reason, unsigned flags, struct order_cancel_result *res)
{
	struct order_state o;
	enum sd_result r;

	memset(res, 0, sizeof *res);
	if ((r = cancel_args_valid(actor, reason)) != SD_OK ||
	    (r = order_state_get(db, NULL, order_id, &o)) != SD_OK)
		return r;
	return cancel_in(db, &o, actor, reason, flags, res);
}

static const char SQL_BY_PAYMENT[] =
	"SELECT id, public_id FROM orders WHERE payment_ref = ?1";
static const char SQL_MONEY_BACK[] =
	"UPDATE orders SET refunded_minor = CASE WHEN ?2 < 0 THEN refunded_minor "
	"ELSE max(coalesce(refunded_minor, 0), ?2) END, "
	"disputed_at = CASE WHEN ?3 IS NULL THEN disputed_at ELSE coalesce(disputed_at, ?4) END, "
	"dispute = coalesce(?3, dispute) WHERE id = ?1";
static const char SQL_MONEY_BACK_PG[] =
	"UPDATE orders SET refunded_minor = CASE WHEN ?2 < 0 THEN refunded_minor "
	"ELSE greatest(coalesce(refunded_minor, 0), ?2) END, "
	"disputed_at = CASE WHEN ?3::text IS NULL THEN disputed_at ELSE coalesce(disputed_at, ?4) END, "
	"dispute = coalesce(?3, dispute) WHERE id = ?1";

enum sd_result order_money_back(struct db *db, const char *payment_ref, int64_t refunded_minor,
				const char *dispute, int64_t *order_id, char *public_id)
{
	struct db_stmt *st = db_stmt(db, SQL_BY_PAYMENT);
	enum sd_result r;
	int row = 0;

	*order_id = 0;
	public_id[0] = '\0';
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, payment_ref);
	if ((row = db_next(st, &r))) {
		*order_id = db_col_int(st, 0);
		text_copy(public_id, ORDER_ID_MAX, db_col_text(st, 1));
	}
	db_reset(st);
	if (r != SD_OK)
		return r;
	if (!row)
		return err_set(SD_NOT_FOUND, "no order was paid by %.60s", payment_ref);
	if (!(st = db_stmt_for(db, SQL_MONEY_BACK, SQL_MONEY_BACK_PG)))
		return SD_DB;
	db_bind_int(st, 1, *order_id);
	db_bind_int(st, 2, refunded_minor);
	db_bind_text(st, 3, dispute && *dispute ? dispute : NULL);
	db_bind_int(st, 4, clock_now_ms());
	return db_run(st);
}

/* ======================== what an order looks like ======================= */

static const char SQL_DETAIL_HEAD[] =
	"SELECT id, created_at FROM orders WHERE public_id = ?1";
static const char SQL_DETAIL_TICKETS[] =
	"SELECT pdf_key, coalesce(scanned_at, 0), coalesce(scanned_by, ''), "
	"coalesce(cancelled_at, 0) FROM tickets WHERE order_id = ?1 ORDER BY seat_no";
/* the tickets first, then the resends in their order, the cancellation last */
static const char SQL_DETAIL_EMAILS[] =
	"SELECT kind, claimed_at, coalesce(sent_at, 0), coalesce(provider_message_id, ''), "
	"coalesce(target, '') FROM email_sends WHERE order_id = ?1 ORDER BY CASE WHEN kind = 'tickets' THEN 0 "
	"WHEN kind = 'cancel' THEN 2 ELSE 1 END, length(kind), kind";
static const char SQL_DETAIL_REFUND[] =
	"SELECT via = 'window', amount_minor, coalesce(done_at, 0), "
	"coalesce(provider_refund_id, ''), coalesce(failed_at, 0), coalesce(status, ''), "
	"coalesce(failure, '') FROM refunds WHERE order_id = ?1";
static const char SQL_DETAIL_BACK[] =
	"SELECT coalesce(refunded_minor, -1), coalesce(disputed_at, 0), coalesce(dispute, '') "
	"FROM orders WHERE id = ?1";
static const char SQL_DETAIL_CHANGES[] =
	"SELECT at, kind, actor, coalesce(detail, '') FROM order_changes WHERE order_id = ?1 "
	"ORDER BY id DESC LIMIT ?2";

const char *order_email_state(const struct order_email *e)
{
	return e->sent_at ? "sent" : e->claimed_at ? "sending" : "pending";
}

static enum sd_result detail_tickets(struct db *db, struct order_detail *d)
{
	struct db_stmt *st = db_stmt(db, SQL_DETAIL_TICKETS);
	enum sd_result r;
	int i = 0;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, d->v.id);
	while (db_next(st, &r) && i < d->v.n_tickets) {
		d->tickets[i].pdf_stored = !db_col_is_null(st, 0);
		d->pdf_tickets += d->tickets[i].pdf_stored;
		d->tickets[i].scanned_at = db_col_int(st, 1);
		text_copy(d->tickets[i].scanned_by, sizeof d->tickets[i].scanned_by,
			  db_col_text(st, 2));
		d->tickets[i].state = db_col_int(st, 3) ? TICKET_CANCELLED :
				      d->tickets[i].scanned_at ? TICKET_ADMITTED : TICKET_VALID;
		i++;
	}
	db_reset(st);
	return r;
}

static enum sd_result detail_emails(struct db *db, struct order_detail *d)
{
	struct db_stmt *st = db_stmt(db, SQL_DETAIL_EMAILS);
	struct order_email *e;
	enum sd_result r;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, d->v.id);
	while (db_next(st, &r) && d->n_emails < ORDER_EMAILS_MAX) {
		e = &d->emails[d->n_emails++];
		snprintf(e->kind, sizeof e->kind, "%s", db_col_text(st, 0));
		e->claimed_at = db_col_int(st, 1);
		e->sent_at = db_col_int(st, 2);
		text_copy(e->message_id, sizeof e->message_id, db_col_text(st, 3));
		text_copy(e->to, sizeof e->to, db_col_text(st, 4));
	}
	db_reset(st);
	return r;
}

/* the newest changes, turned oldest first */
static enum sd_result detail_refund(struct db *db, struct order_detail *d)
{
	struct db_stmt *st = db_stmt(db, SQL_DETAIL_REFUND);
	enum sd_result r;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, d->v.id);
	if (db_next(st, &r)) {
		d->refund.owed = 1;
		d->refund.window = (int)db_col_int(st, 0);
		d->refund.amount_minor = db_col_int(st, 1);
		d->refund.done_at = db_col_int(st, 2);
		text_copy(d->refund.provider_id, sizeof d->refund.provider_id,
			  db_col_text(st, 3));
		d->refund.failed_at = db_col_int(st, 4);
		text_copy(d->refund.status, sizeof d->refund.status, db_col_text(st, 5));
		text_copy(d->refund.failure, sizeof d->refund.failure, db_col_text(st, 6));
	}
	db_reset(st);
	if (r != SD_OK || !(st = db_stmt(db, SQL_DETAIL_BACK)))
		return r != SD_OK ? r : SD_DB;
	db_bind_int(st, 1, d->v.id);
	if (db_next(st, &r)) {
		d->back.refunded_minor = db_col_int(st, 0);
		d->back.disputed_at = db_col_int(st, 1);
		text_copy(d->back.dispute, sizeof d->back.dispute, db_col_text(st, 2));
	}
	db_reset(st);
	return r;
}

static enum sd_result detail_changes(struct db *db, struct order_detail *d)
{
	struct db_stmt *st = db_stmt(db, SQL_DETAIL_CHANGES);
	struct order_change *c, t;
	enum sd_result r;
	int i;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, d->v.id);
	db_bind_int(st, 2, ORDER_CHANGES_MAX);
	while (db_next(st, &r) && d->n_changes < ORDER_CHANGES_MAX) {
		c = &d->changes[d->n_changes++];
		c->at = db_col_int(st, 0);
		snprintf(c->kind, sizeof c->kind, "%s", db_col_text(st, 1));
		text_copy(c->actor, sizeof c->actor, db_col_text(st, 2));
		text_copy(c->detail, sizeof c->detail, db_col_text(st, 3));
	}
	db_reset(st);
	for (i = 0; i < d->n_changes / 2; i++) {
		t = d->changes[i];
		d->changes[i] = d->changes[d->n_changes - 1 - i];
		d->changes[d->n_changes - 1 - i] = t;
	}
	return r;
}

struct detail_jobs {
	struct db *db;
	struct order_detail *d;
	enum sd_result r;
};

static void job_entry(const struct job_row *jr, void *arg)
{
	struct order_job *j = arg;
	struct order_job_entry *e;

	if (j->n_entries == ORDER_ENTRIES_MAX)
		return;
	e = &j->entries[j->n_entries++];
	snprintf(e->state, sizeof e->state, "%s", jr->state);
	e->deliveries = jr->deliveries;
	e->attempts = jr->attempts;
	text_copy(e->last_error, sizeof e->last_error, jr->last_error ? jr->last_error : "");
}

/* one outbox row of the order and its entries; past ORDER_JOBS_MAX the
 * oldest make room for the newest */
static void job_of_order(const struct outbox_row *o, void *arg)
{
	struct detail_jobs *dj = arg;
	struct order_detail *d = dj->d;
	struct order_job *j;

	if (dj->r != SD_OK)
		return;
	if (d->n_jobs == ORDER_JOBS_MAX)
		memmove(&d->jobs[0], &d->jobs[1], sizeof d->jobs[0] * (ORDER_JOBS_MAX - 1));
	else
		d->n_jobs++;
	j = &d->jobs[d->n_jobs - 1];
	memset(j, 0, sizeof *j);
	text_copy(j->job_id, sizeof j->job_id, o->job_id);
	snprintf(j->kind, sizeof j->kind, "%s", o->kind);
	j->published = o->published_at != 0;
	dj->r = queue_find_job(dj->db, j->job_id, job_entry, j);
}

enum sd_result order_id_get(struct db *db, const char *public_id, int64_t *id)
{
	struct db_stmt *st;
	enum sd_result r;
	char idn[ORDER_ID_MAX];
	int row;

	*id = 0;
	if (!(public_id = norm_or_missing(public_id, idn)))
		return err_set(SD_NOT_FOUND, "no such order");
	if (!(st = db_stmt(db, SQL_DETAIL_HEAD)))
		return SD_DB;
	db_bind_text(st, 1, public_id);
	if ((row = db_next(st, &r)))
		*id = db_col_int(st, 0);
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_NOT_FOUND, "no such order");
	return r;
}

enum sd_result order_detail_get(struct db *db, const char *public_id, struct order_detail **out)
{
	struct db_stmt *st;
	struct order_detail *d;
	struct detail_jobs dj;
	enum sd_result r;
	int64_t id = 0;
	int row = 0;
	char idn[ORDER_ID_MAX];

	*out = NULL;
	if (!(public_id = norm_or_missing(public_id, idn)))
		return SD_NOT_FOUND;
	if (!(d = calloc(1, sizeof *d)))
		return err_set(SD_NOMEM, "out of memory");
	if ((r = db_begin_snapshot(db)) != SD_OK)	/* one snapshot for the whole order */
		goto fail;
	if (!(st = db_stmt(db, SQL_DETAIL_HEAD))) {
		r = SD_DB;
		goto end;
	}
	db_bind_text(st, 1, public_id);
	if ((row = db_next(st, &r))) {
		id = db_col_int(st, 0);
		d->created_at = db_col_int(st, 1);
	}
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_NOT_FOUND, "no order '%.40s'", public_id);
	if (r != SD_OK || (r = tickets_load_order(db, id, &d->v)) != SD_OK ||
	    (r = detail_tickets(db, d)) != SD_OK || (r = detail_emails(db, d)) != SD_OK ||
	    (r = detail_changes(db, d)) != SD_OK || (r = detail_refund(db, d)) != SD_OK)
		goto end;
	tickets_pdf_key(&d->v, d->pdf_key, sizeof d->pdf_key);
	dj = (struct detail_jobs){ db, d, SD_OK };
	if ((r = outbox_list_for_order(db, id, job_of_order, &dj)) == SD_OK)
		r = dj.r;
end:
	if ((r = db_end(db, r)) == SD_OK) {
		*out = d;
		return SD_OK;
	}
fail:
	free(d);
	return r;
}

void order_detail_free(struct order_detail *d)
{
	free(d);
}

/* ======================== lists ========================================== */

#define ORDER_LIST_SQL                                                                      \
	"SELECT o.public_id, o.event_id, o.seats, o.created_at, "                            \
	"(SELECT count(*) > 0 AND count(*) = count(t.pdf_key) FROM tickets t "              \
	" WHERE t.order_id = o.id), "                                                       \
	"CASE WHEN o.buyer_email IS NULL THEN 'none' WHEN s.sent_at IS NOT NULL THEN 'sent' " \
	"WHEN s.claimed_at IS NOT NULL "                                                    \
	"THEN 'sending' ELSE 'pending' END, o.buyer_name, coalesce(o.buyer_email, ''), "     \
	"o.cancelled_at IS NOT NULL "                                                       \
	"FROM orders o LEFT JOIN email_sends s ON s.order_id = o.id AND s.kind = 'tickets' "
static const char SQL_ORDERS_RECENT[] = ORDER_LIST_SQL "ORDER BY o.id DESC LIMIT ?1";
/* an id's prefix by the public id's index, an address by orders_email, a
 * part of a name by reading the newest orders until enough are found */
static const char SQL_SEARCH_ID[] =
	ORDER_LIST_SQL "WHERE o.public_id >= ?1 AND o.public_id < ?2 ORDER BY o.id DESC LIMIT ?3";
static const char SQL_SEARCH_EMAIL[] =
	ORDER_LIST_SQL "WHERE lower(o.buyer_email) = ?1 ORDER BY o.id DESC LIMIT ?3";
static const char SQL_SEARCH_NAME[] =
	ORDER_LIST_SQL "WHERE lower(o.buyer_name) LIKE ?1 ESCAPE '\\' ORDER BY o.id DESC LIMIT ?3";

/* every row of st (bound) to fn */
static enum sd_result order_list(struct db_stmt *st, order_list_fn fn, void *arg)
{
	struct order_recent o;
	enum sd_result r;

	while (db_next(st, &r)) {
		memset(&o, 0, sizeof o);
		snprintf(o.id, sizeof o.id, "%s", db_col_text(st, 0));
		o.event_id = db_col_int(st, 1);
		o.seats = db_col_int(st, 2);
		o.created_at = db_col_int(st, 3);
		o.pdf_stored = db_col_int(st, 4) != 0;
		o.email = db_col_text(st, 5);
		o.name = db_col_text(st, 6);
		o.email_address = db_col_text(st, 7);
		o.cancelled = db_col_int(st, 8) != 0;
		fn(&o, arg);
	}
	db_reset(st);
	return r;
}

enum sd_result order_recent(struct db *db, int limit, order_list_fn fn, void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_ORDERS_RECENT);

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, limit > 0 ? limit : 1);
	return order_list(st, fn, arg);
}

/* "T3X" or "t3x": an order id's first characters (the id's alphabet) */
static int looks_like_id(const char *q)
{
	size_t n = strlen(q), i;

	if (n < 2 || n > ORDER_ID_MAX - 1 || (q[0] != 'T' && q[0] != 't'))
		return 0;
	for (i = 1; i < n; i++)
		if (!strchr("23456789ABCDEFGHJKMNPQRSTUVWXYZabcdefghjkmnpqrstuvwxyz", q[i]))
			return 0;
	return 1;
}

enum sd_result order_search(struct db *db, const char *q, order_list_fn fn, void *arg)
{
	struct db_stmt *st;
	enum sd_result r;
	char a[ORDER_QUERY_MAX * 2 + 3], b[ORDER_ID_MAX + 1] = "";
	size_t i, n = 0;
	int id = looks_like_id(q), whole = strchr(q, '@') != NULL;

	if ((r = text_check("search", q, ORDER_QUERY_MAX)) != SD_OK)
		return r;
	if (!id && !whole)
		a[n++] = '%';
	for (i = 0; q[i]; i++) {
		char c = q[i];
		if (id && c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');	/* ids are upper case */
		else if (!id && c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');	/* the rest is compared lower case */
		if (!id && !whole && (c == '%' || c == '_' || c == '\\'))
			a[n++] = '\\';
		a[n++] = c;
	}
	if (!id && !whole)
		a[n++] = '%';
	a[n] = '\0';
	if (id) {
		memcpy(b, a, n);	/* n < ORDER_ID_MAX: looks_like_id */
		b[n] = '~';		/* '~' sorts after the alphabet */
		b[n + 1] = '\0';
		st = db_stmt(db, SQL_SEARCH_ID);
	} else {
		st = db_stmt(db, whole ? SQL_SEARCH_EMAIL : SQL_SEARCH_NAME);
	}
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, a);
	db_bind_text(st, 2, b);
	db_bind_int(st, 3, ORDER_SEARCH_MAX);
	return order_list(st, fn, arg);
}

/* ======================== invariant checks =============================== */

static const char SQL_CHECK_ORDERS[] =
	"SELECT o.id, o.public_id, o.event_id, o.seats, o.cancelled_at IS NOT NULL, count(t.id), "
	"count(t.cancelled_at), "
	"coalesce(sum(CASE WHEN t.pdf_key IS NULL THEN 1 ELSE 0 END), 0), "
	"count(DISTINCT t.pdf_key), min(t.pdf_key), "
	"(SELECT count(*) FROM email_sends s WHERE s.order_id = o.id AND s.kind = 'tickets'), "
	"(SELECT count(*) FROM email_sends s WHERE s.order_id = o.id AND s.kind = 'tickets' "
	" AND s.sent_at IS NOT NULL), o.resends, "
	"(SELECT count(*) FROM email_sends s WHERE s.order_id = o.id AND s.kind LIKE 'tickets-r%' "
	" AND s.sent_at IS NOT NULL), "
	"(SELECT count(*) FROM email_sends s WHERE s.order_id = o.id "
	" AND s.kind IN ('cancel', 'cancel-event') AND s.sent_at IS NOT NULL), "
	"o.buyer_email IS NULL, "
	"EXISTS (SELECT 1 FROM order_changes c WHERE c.order_id = o.id AND c.kind = 'email' "
	" AND c.detail IS NULL), count(t.scanned_at), "
	"o.refunded_minor IS NOT NULL OR o.disputed_at IS NOT NULL "
	"FROM orders o LEFT JOIN tickets t ON t.order_id = o.id GROUP BY o.id ORDER BY o.id";

enum sd_result order_check_each(struct db *db, order_check_fn fn, void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_CHECK_ORDERS);
	struct order_check o;
	enum sd_result r;

	if (!st)
		return SD_DB;
	while (db_next(st, &r)) {
		o.id = db_col_int(st, 0);
		o.public_id = db_col_text(st, 1);
		o.event_id = db_col_int(st, 2);
		o.seats = db_col_int(st, 3);
		o.cancelled = db_col_int(st, 4) != 0;
		o.tickets = db_col_int(st, 5);
		o.tickets_cancelled = db_col_int(st, 6);
		o.tickets_without_pdf = db_col_int(st, 7);
		o.pdf_keys = db_col_int(st, 8);
		o.pdf_key = db_col_text(st, 9);
		o.emails = db_col_int(st, 10);
		o.emails_sent = db_col_int(st, 11);
		o.resends = db_col_int(st, 12);
		o.resends_sent = db_col_int(st, 13);
		o.cancel_sent = db_col_int(st, 14);
		o.no_address = db_col_int(st, 15) != 0;
		o.address_added = db_col_int(st, 16) != 0;
		o.tickets_admitted = db_col_int(st, 17);
		o.money_back = db_col_int(st, 18) != 0;
		if (fn(&o, arg))
			break;
	}
	db_reset(st);
	return r;
}

/* The key an email row must carry, of the order's public id or row id (X). */
#define KEY_OF(X)                                                                              \
	"CASE WHEN s.kind = 'tickets' THEN 'tickets-' || " X " WHEN s.kind = 'cancel' THEN "      \
	"'cancel-' || " X " WHEN s.kind = 'cancel-event' THEN 'cancel-event-' || o.event_id || "  \
	"'-' || " X " WHEN s.kind LIKE 'moved-%' THEN 'moved-' || o.event_id || '-' || "          \
	"substr(s.kind, 7) || '-' || " X " WHEN s.kind LIKE 'reminder-%' THEN 'reminder-' || " X  \
	" || '-' || substr(s.kind, 10) ELSE 'tickets-' || " X " || '-r' || substr(s.kind, 10) END"
static const char SQL_CHECK_CODES[] =
	"SELECT t.id, t.code_id FROM tickets t, identity_marks m WHERE m.name = 'tickets' AND "
	"CASE WHEN t.id <= m.upto THEN t.code_id <> t.id ELSE t.code_id < ?1 END "
	"ORDER BY t.id LIMIT 1";
static const char SQL_CHECK_KEYS[] =
	"SELECT o.public_id, s.kind, coalesce(s.provider_key, '') FROM email_sends s "
	"JOIN orders o ON o.id = s.order_id, identity_marks m WHERE m.name = 'orders' AND "
	"CASE WHEN s.provider_key IS NULL THEN s.sent_at IS NOT NULL "
	"ELSE s.provider_key <> " KEY_OF("o.public_id") " AND NOT (o.id <= m.upto AND "
	"s.provider_key = " KEY_OF("o.id") ") END ORDER BY o.id LIMIT 1";

enum sd_result order_check_identities(struct db *db, char *problem, size_t size)
{
	struct db_stmt *st;
	enum sd_result r;
	int row = 0;

	problem[0] = '\0';
	if (!(st = db_stmt(db, SQL_CHECK_CODES)))
		return SD_DB;
	db_bind_int(st, 1, CODE_ID_MIN);
	if ((row = db_next(st, &r)))
		snprintf(problem, size, "ticket %lld's code names %lld: a ticket made before schema "
			 "11 keeps its row id, one made since has a random number of at least 2^62",
			 (long long)db_col_int(st, 0), (long long)db_col_int(st, 1));
	db_reset(st);
	if (r != SD_OK || row)
		return r;
	if (!(st = db_stmt(db, SQL_CHECK_KEYS)))
		return SD_DB;
	if (db_next(st, &r))
		snprintf(problem, size, "order %s's %s email %s '%s': its key names the order's "
			 "public id (or, for an order made before schema 11, its row id)",
			 db_col_text(st, 0), db_col_text(st, 1),
			 db_col_text(st, 2)[0] ? "goes under" : "was sent with no key", db_col_text(st, 2));
	db_reset(st);
	return r;
}
