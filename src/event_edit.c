/*
 * event_edit.c: an event's life (event_edit.h).
 */
#include "event_edit.h"

#include <stddef.h>
#include <string.h>

#include "clock.h"
#include "event_runs.h"
#include "money.h"
#include "text.h"
#include "timefmt.h"

static struct event_rules rules = { 0, EVENT_SALES_CLOSE_AFTER_MS_DEFAULT,
				     EVENT_REMIND_BEFORE_MS_DEFAULT };

void event_rules_set(const struct event_rules *r)
{
	rules = *r;
}

const struct event_rules *event_rules_get(void)
{
	return &rules;
}

#define CAPACITY_MAX 1000000

enum sd_result event_start_valid(int64_t starts_at, int64_t now)
{
	char when[TIMEFMT_TEXT_MAX], nowt[TIMEFMT_TEXT_MAX];

	if (starts_at >= now - rules.start_grace_ms)
		return SD_OK;
	timefmt_format(starts_at, when, sizeof when);
	timefmt_format(now, nowt, sizeof nowt);
	return err_set(SD_INVALID, "an event cannot start in the past (%s; it is now %s)%s", when,
		       nowt, rules.start_grace_ms ? ", further back than start_grace" : "");
}

static enum sd_result capacity_check(int64_t capacity)
{
	if (capacity < 1 || capacity > CAPACITY_MAX)
		return err_set(SD_INVALID, "capacity must be between 1 and %d", CAPACITY_MAX);
	return SD_OK;
}

static enum sd_result price_valid(int64_t minor, const char *code)
{
	if (!code[0])
		return SD_OK;	/* no price, whatever minor says */
	if (minor < 0 || minor > MONEY_MINOR_MAX || money_exponent(code) < 0)
		return err_set(SD_INVALID, "a price is 0 to %lld minor units of an ISO 4217 "
			       "currency", MONEY_MINOR_MAX);
	/* a price Stripe would refuse fails at every checkout: refused here,
	 * where the one who sets it can change it */
	if (event_rules_get()->stripe_prices)
		return money_stripe_price_valid(code, minor);
	return SD_OK;
}

enum sd_result event_price_parse(const char *price, const char *currency, int64_t *minor,
				 char *code)
{
	enum sd_result r;

	*minor = -1;
	code[0] = '\0';
	if (!price != !currency)
		return err_set(SD_INVALID, "a price needs its currency, and a currency its price "
			       "(--price 25.00 --currency EUR)");
	if (!price)
		return SD_OK;
	if ((r = money_currency_norm(currency, code, NULL)) != SD_OK ||
	    (r = money_parse(price, code, minor)) != SD_OK)
		return r;
	return price_valid(*minor, code);
}


static void bind_price(struct db_stmt *st, int at, int64_t minor, const char *code)
{
	if (!code[0]) {
		db_bind_null(st, at);
		db_bind_null(st, at + 1);
	} else {
		db_bind_int(st, at, minor);
		db_bind_text(st, at + 1, code);
	}
}

static const char SQL_EVENT_ADD[] =
	"INSERT INTO events (name, venue, starts_at, capacity, created_at, price_minor, currency) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id";

enum sd_result event_add(struct db *db, const struct event_new *e, int64_t *id)
{
	struct db_stmt *st;
	enum sd_result r;
	int64_t now = clock_now_ms();

	if ((r = text_field_valid("event name", e->name)) != SD_OK ||
	    (r = text_field_valid("venue", e->venue)) != SD_OK ||
	    (r = capacity_check(e->capacity)) != SD_OK ||
	    (r = price_valid(e->price_minor, e->currency)) != SD_OK ||
	    (r = event_start_valid(e->starts_at, now)))
		return r;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_EVENT_ADD))) {
		r = SD_DB;
		goto out;
	}
	db_bind_text(st, 1, e->name);
	db_bind_text(st, 2, e->venue);
	db_bind_int(st, 3, e->starts_at);
	db_bind_int(st, 4, e->capacity);
	db_bind_int(st, 5, now);
	bind_price(st, 6, e->price_minor, e->currency);
	if (db_next(st, &r))
		*id = db_col_int(st, 0);
	db_reset(st);
out:
	return db_end(db, r);
}

/* the change's fields, checked on their own */
static enum sd_result change_valid(const struct event_change *c, int64_t now)
{
	enum sd_result r = SD_OK;

	if (!(c->set & (EVENT_SET_NAME | EVENT_SET_VENUE | EVENT_SET_STARTS | EVENT_SET_CAPACITY |
			EVENT_SET_PRICE | EVENT_SET_REMINDERS)))
		return err_set(SD_INVALID, "nothing to change: give a name, venue, start, "
			       "capacity, price or reminders");
	if (c->set & EVENT_SET_NAME)
		r = text_field_valid("event name", c->name);
	if (r == SD_OK && (c->set & EVENT_SET_VENUE))
		r = text_field_valid("venue", c->venue);
	if (r == SD_OK && (c->set & EVENT_SET_CAPACITY))
		r = capacity_check(c->capacity);
	if (r == SD_OK && (c->set & EVENT_SET_STARTS))
		r = event_start_valid(c->starts_at, now);
	if (r == SD_OK && (c->set & EVENT_SET_PRICE))
		r = price_valid(c->price_minor, c->currency);
	return r;
}

/* A PostgreSQL intake locks the event's row first (orders.c); the change
 * takes the same lock, so a capacity is never lowered under a sale in
 * flight.  SQLite's writer lock does the same. */
static const char SQL_EVENT_UPDATE[] =
	"UPDATE events SET name = coalesce(?2, name), venue = coalesce(?3, venue), "
	"starts_at = coalesce(?4, starts_at), capacity = coalesce(?5, capacity), "
	"price_minor = CASE WHEN ?6 = 1 THEN ?7 ELSE price_minor END, "
	"currency = CASE WHEN ?6 = 1 THEN ?8 ELSE currency END, "
	"reminders = coalesce(?9, reminders) WHERE id = ?1";
static const char SQL_PG_EVENT_LOCK[] = "SELECT id FROM events WHERE id = ?1 FOR NO KEY UPDATE";

enum sd_result event_row_lock(struct db *db, int64_t id)
{
	struct db_stmt *st;

	if (db_kind(db) != DB_PG)
		return SD_OK;
	if (!(st = db_stmt(db, SQL_PG_EVENT_LOCK)))
		return SD_DB;
	db_bind_int(st, 1, id);
	return db_run(st);
}

static enum sd_result event_lock(struct db *db, int64_t id, struct event_view *v)
{
	enum sd_result r;

	if ((r = event_row_lock(db, id)) != SD_OK)
		return r;
	return event_get(db, id, v);
}

static enum sd_result event_update(struct db *db, int64_t id, const struct event_change *c)
{
	struct db_stmt *st = db_stmt(db, SQL_EVENT_UPDATE);

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	if (c->set & EVENT_SET_NAME)
		db_bind_text(st, 2, c->name);
	else
		db_bind_null(st, 2);
	if (c->set & EVENT_SET_VENUE)
		db_bind_text(st, 3, c->venue);
	else
		db_bind_null(st, 3);
	if (c->set & EVENT_SET_STARTS)
		db_bind_int(st, 4, c->starts_at);
	else
		db_bind_null(st, 4);
	if (c->set & EVENT_SET_CAPACITY)
		db_bind_int(st, 5, c->capacity);
	else
		db_bind_null(st, 5);
	db_bind_int(st, 6, (c->set & EVENT_SET_PRICE) != 0);
	bind_price(st, 7, c->price_minor, c->currency);
	if (c->set & EVENT_SET_REMINDERS)
		db_bind_int(st, 9, c->reminders != 0);
	else
		db_bind_null(st, 9);
	return db_run(st);
}

/* a new start or venue that differs from what the tickets print */
static int moves(const struct event_change *c, const struct event_view *v)
{
	return ((c->set & EVENT_SET_STARTS) && c->starts_at != v->starts_at) ||
	       ((c->set & EVENT_SET_VENUE) && strcmp(c->venue, v->venue) != 0);
}

enum sd_result event_set(struct db *db, int64_t id, const struct event_change *c,
			 struct event_view *after, unsigned *refused)
{
	struct event_view v;
	enum sd_result r;
	int64_t change_no = 0;

	if (refused)
		*refused = 0;
	if ((r = change_valid(c, clock_now_ms())) != SD_OK)
		return r;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = event_lock(db, id, &v)) != SD_OK)
		goto out;
	if (v.cancelled_at) {
		r = err_set(SD_CONFLICT, "event %lld is cancelled: it changes no more", (long long)id);
		goto out;
	}
	if ((c->set & EVENT_SET_CAPACITY) && c->capacity < v.last_seat) {
		if (refused)
			*refused = EVENT_SET_CAPACITY;
		r = err_set(SD_CONFLICT, "event %lld's capacity cannot go below %lld: %lld seat%s "
			    "sold, up to seat %lld", (long long)id, (long long)v.last_seat,
			    (long long)v.seats_sold, v.seats_sold == 1 ? " is" : "s are",
			    (long long)v.last_seat);
		goto out;
	}
	if ((r = event_update(db, id, c)) != SD_OK)
		goto out;
	/* its buyers hold tickets that print its start and venue: each is told,
	 * and gets them again (event_runs.h) */
	if (moves(c, &v) && v.orders > 0 &&
	    (r = event_run_move_add(db, &v, c->actor && *c->actor ? c->actor : "cli",
				    &change_no)) != SD_OK)
		goto out;
	if (after)
		r = event_get(db, id, after);
out:
	return db_end(db, r);
}

static const char SQL_EVENT_CLOSE[] =
	"UPDATE events SET closed_at = ?2 WHERE id = ?1 AND closed_at IS NULL";

enum sd_result event_close(struct db *db, int64_t id, struct event_view *after, int *was_closed)
{
	struct event_view v;
	struct db_stmt *st;
	enum sd_result r;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = event_lock(db, id, &v)) != SD_OK)
		goto out;
	if (was_closed)
		*was_closed = v.closed_at != 0;
	if (!v.closed_at) {
		if (!(st = db_stmt(db, SQL_EVENT_CLOSE))) {
			r = SD_DB;
			goto out;
		}
		db_bind_int(st, 1, id);
		db_bind_int(st, 2, clock_now_ms());
		r = db_run(st);
	}
	if (r == SD_OK && after)
		r = event_get(db, id, after);
out:
	return db_end(db, r);
}

enum sd_result event_sale_check(int64_t id, int64_t starts_at, int64_t closed_at,
				int64_t cancelled_at, int64_t now)
{
	char when[TIMEFMT_TEXT_MAX];

	if (cancelled_at) {
		timefmt_format(cancelled_at, when, sizeof when);
		return err_set(SD_CONFLICT, "event %lld is cancelled (since %s)", (long long)id,
			       when);
	}
	if (closed_at) {
		timefmt_format(closed_at, when, sizeof when);
		return err_set(SD_CONFLICT, "sales for event %lld are closed (since %s)",
			       (long long)id, when);
	}
	if (now > starts_at + rules.sales_close_after_ms) {
		timefmt_format(starts_at + rules.sales_close_after_ms, when, sizeof when);
		return err_set(SD_CONFLICT, "sales for event %lld ended at %s (sales_close_after "
			       "its start)", (long long)id, when);
	}
	return SD_OK;
}

const char *event_state_name(const struct event_view *v, int64_t now)
{
	if (v->cancelled_at)
		return "cancelled";
	return v->closed_at || now > v->starts_at + rules.sales_close_after_ms ? "closed"
									       : "on_sale";
}
