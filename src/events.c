/*
 * events.c: events and what they sold (events.h).
 *
 * Every count a page shows comes from event_totals, kept by triggers in the
 * very transactions that change the rows (schema 0006, 0010): the reads
 * here cost one row per event, whatever the number of orders.  Only the
 * checks at the end count rows, for `stagedoor check`.
 *
 * Live and cancelled: an order or a ticket stays in its table when it is
 * cancelled (its code must scan as cancelled); "orders" and "seats sold"
 * are the live ones, event_totals' counts minus the cancelled ones.
 */
#include "events.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "text.h"

/* ======================== an event's summary ============================= */

/* The counts come from event_totals (schema 0006), kept by triggers in the
 * transactions that change the rows: no count of orders or tickets here. */
static const char SQL_SUMMARY[] =
	"SELECT coalesce(t.orders, 0), coalesce(t.tickets, 0), "
	"coalesce(t.tickets - t.tickets_pdf, 0), coalesce(t.pdfs, 0), coalesce(t.emails_sent, 0), "
	"coalesce(c.orders, 0), coalesce(c.seats_sold, 0), coalesce(t.orders_cancelled, 0), "
	"coalesce(t.cancelled, 0), coalesce(t.admitted, 0) FROM (SELECT ?1 AS id) e "
	"LEFT JOIN event_totals t ON t.event_id = e.id "
	"LEFT JOIN sales_counters c ON c.event_id = e.id";
/* each order's PDF as its tickets name it (a moved event's names its
 * version) */
static const char SQL_EVENT_ORDERS[] =
	"SELECT DISTINCT order_id, pdf_key FROM tickets WHERE event_id = ?1 AND pdf_key IS NOT NULL";

enum sd_result event_summary(struct db *db, struct blob_store *blobs, int64_t event_id,
				     struct event_summary *s)
{
	struct db_stmt *st;
	enum sd_result r;
	char key[BLOB_KEY_MAX + 1];
	int row = 0;

	memset(s, 0, sizeof *s);
	if ((r = db_begin_snapshot(db)) != SD_OK)	/* one snapshot for every count */
		return r;
	if (!(st = db_stmt(db, SQL_SUMMARY))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, event_id);
	if ((r = db_step(st, &row)) != SD_OK)
		goto out;
	if (row) {
		s->orders = db_col_int(st, 0);
		s->tickets = db_col_int(st, 1);
		s->tickets_without_pdf = db_col_int(st, 2);
		s->pdfs = db_col_int(st, 3);
		s->emails_sent = db_col_int(st, 4);
		s->counted_orders = db_col_int(st, 5);
		s->counted_seats = db_col_int(st, 6);
		s->orders_cancelled = db_col_int(st, 7);
		s->cancelled = db_col_int(st, 8);
		s->admitted = db_col_int(st, 9);
	}
	db_reset(st);
	if (!blobs)
		goto out;
	if (!(st = db_stmt(db, SQL_EVENT_ORDERS))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, event_id);
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK || !row)
			break;
		snprintf(key, sizeof key, "%s", db_col_text(st, 1));
		s->pdfs_missing += !blob_exists(blobs, key);
	}
	db_reset(st);
out:
	return db_end(db, r);
}

/* ======================== events as the API shows them ================== */

/* Orders and seats sold from event_totals, and the box's totals as their
 * sum: one row per event, whatever the number of orders. */
#define EVENT_VIEW_SQL \
	"SELECT e.id, e.name, e.venue, e.starts_at, e.capacity, e.created_at, " \
	"coalesce(t.orders - t.orders_cancelled, 0), coalesce(t.tickets - t.cancelled, 0), " \
	"coalesce(t.admitted, 0), coalesce(t.cancelled, 0), coalesce(e.closed_at, 0), " \
	"(SELECT coalesce(max(seat_no), 0) FROM tickets k WHERE k.event_id = e.id " \
	"AND k.cancelled_at IS NULL), coalesce(e.price_minor, -1), coalesce(e.currency, ''), " \
	"coalesce(e.cancelled_at, 0), coalesce(e.cancel_reason, ''), e.change_no, e.reminders " \
	"FROM events e " \
	"LEFT JOIN event_totals t ON t.event_id = e.id "
static const char SQL_EVENT_GET[] = EVENT_VIEW_SQL "WHERE e.id = ?1";
static const char SQL_EVENT_EACH[] = EVENT_VIEW_SQL "ORDER BY e.id";
static const char SQL_TOTALS[] =
	"SELECT coalesce(sum(orders - orders_cancelled), 0), coalesce(sum(emails_sent), 0) "
	"FROM event_totals";

static void event_view_read(struct db_stmt *st, struct event_view *v)
{
	memset(v, 0, sizeof *v);
	v->id = db_col_int(st, 0);
	text_copy(v->name, sizeof v->name, db_col_text(st, 1));
	text_copy(v->venue, sizeof v->venue, db_col_text(st, 2));
	v->starts_at = db_col_int(st, 3);
	v->capacity = db_col_int(st, 4);
	v->created_at = db_col_int(st, 5);
	v->orders = db_col_int(st, 6);
	v->seats_sold = db_col_int(st, 7);
	v->admitted = db_col_int(st, 8);
	v->cancelled = db_col_int(st, 9);
	v->closed_at = db_col_int(st, 10);
	v->last_seat = db_col_int(st, 11);
	v->price_minor = db_col_int(st, 12);
	text_copy(v->currency, sizeof v->currency, db_col_text(st, 13));
	v->cancelled_at = db_col_int(st, 14);
	text_copy(v->cancel_reason, sizeof v->cancel_reason, db_col_text(st, 15));
	v->change_no = db_col_int(st, 16);
	v->reminders = (int)db_col_int(st, 17);
}

enum sd_result event_get(struct db *db, int64_t id, struct event_view *v)
{
	struct db_stmt *st = db_stmt(db, SQL_EVENT_GET);
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (row)
		event_view_read(st, v);
	db_reset(st);
	return row ? SD_OK : err_set(SD_NOT_FOUND, "no event %lld", (long long)id);
}

enum sd_result event_each(struct db *db, void (*fn)(const struct event_view *v, void *arg),
			  void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_EVENT_EACH);
	struct event_view v;
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			break;
		if (!row)
			break;
		event_view_read(st, &v);
		fn(&v, arg);
	}
	db_reset(st);
	return r;
}

/* the events a shop lists: priced, not closed, starting after since (the
 * sales of those that started before it are over), the soonest first */
static const char SQL_EVENT_SELLING[] = EVENT_VIEW_SQL
	"WHERE e.currency IS NOT NULL AND e.closed_at IS NULL AND e.starts_at > ?1 "
	"ORDER BY e.starts_at, e.id LIMIT ?2";

enum sd_result event_each_selling(struct db *db, int64_t since, int limit,
				  void (*fn)(const struct event_view *v, void *arg), void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_EVENT_SELLING);
	struct event_view v;
	enum sd_result r = SD_OK;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, since);
	db_bind_int(st, 2, limit);
	while (db_next(st, &r)) {
		event_view_read(st, &v);
		fn(&v, arg);
	}
	db_reset(st);
	return r;
}

enum sd_result event_box_totals(struct db *db, int64_t *orders, int64_t *emails_sent)
{
	struct db_stmt *st = db_stmt(db, SQL_TOTALS);
	enum sd_result r;
	int row = 0;

	*orders = *emails_sent = 0;
	if (!st)
		return SD_DB;
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (row) {
		*orders = db_col_int(st, 0);
		*emails_sent = db_col_int(st, 1);
	}
	db_reset(st);
	return SD_OK;
}

/* ======================== sales by the hour ============================== */

/* the newest hours first (the LIMIT keeps them), turned oldest first below */
static const char SQL_SALES[] =
	"SELECT created_at - created_at % 3600000 AS h, count(*), sum(seats) FROM orders "
	"WHERE event_id = ?1 GROUP BY h ORDER BY h DESC LIMIT ?2";

enum sd_result event_sales(struct db *db, int64_t event_id, struct event_hour *out, int *n)
{
	struct db_stmt *st = db_stmt(db, SQL_SALES);
	enum sd_result r;
	int row = 0, i;

	*n = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, EVENT_HOURS_MAX);
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK) {
			db_reset(st);
			return r;
		}
		if (!row || *n == EVENT_HOURS_MAX)
			break;
		out[*n].hour = db_col_int(st, 0);
		out[*n].orders = db_col_int(st, 1);
		out[*n].seats = db_col_int(st, 2);
		(*n)++;
	}
	db_reset(st);
	for (i = 0; i < *n / 2; i++) {
		struct event_hour t = out[i];
		out[i] = out[*n - 1 - i];
		out[*n - 1 - i] = t;
	}
	return SD_OK;
}

/* ======================== invariant checks =============================== */

/* One grouped pass over the live orders, not a subquery per event: a
 * cancelled order's job moved the counter back. */
static const char SQL_CHECK_COUNTERS[] =
	"SELECT e.id, coalesce(c.orders, 0), coalesce(c.seats_sold, 0), "
	"coalesce(a.n, 0), coalesce(a.s, 0) FROM events e "
	"LEFT JOIN sales_counters c ON c.event_id = e.id "
	"LEFT JOIN (SELECT event_id, count(*) AS n, sum(seats) AS s FROM orders "
	" WHERE cancelled_at IS NULL GROUP BY event_id) a ON a.event_id = e.id ORDER BY e.id";

enum sd_result event_check_counters(struct db *db, event_counter_fn fn, void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_CHECK_COUNTERS);
	struct counter_check c;
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		c.event_id = db_col_int(st, 0);
		c.counted_orders = db_col_int(st, 1);
		c.counted_seats = db_col_int(st, 2);
		c.orders = db_col_int(st, 3);
		c.seats = db_col_int(st, 4);
		if (fn(&c, arg))
			break;
	}
	db_reset(st);
	return SD_OK;
}

/* The full count that event_totals stands for: one grouped pass over each
 * table, as the migration that seeded it. */
static const char SQL_CHECK_TOTALS[] =
	"SELECT e.id, coalesce(k.orders, 0), coalesce(k.tickets, 0), coalesce(k.tickets_pdf, 0), "
	"coalesce(k.pdfs, 0), coalesce(k.emails_sent, 0), coalesce(k.admitted, 0), "
	"coalesce(k.cancelled, 0), coalesce(k.orders_cancelled, 0), coalesce(o.n, 0), "
	"coalesce(t.n, 0), coalesce(t.pdf, 0), coalesce(p.n, 0), coalesce(s.n, 0), "
	"coalesce(t.adm, 0), coalesce(t.can, 0), coalesce(o.can, 0) FROM events e "
	"LEFT JOIN event_totals k ON k.event_id = e.id "
	"LEFT JOIN (SELECT event_id, count(*) AS n, count(cancelled_at) AS can FROM orders "
	" GROUP BY event_id) o ON o.event_id = e.id "
	"LEFT JOIN (SELECT event_id, count(*) AS n, count(pdf_key) AS pdf, count(scanned_at) AS adm, "
	" count(cancelled_at) AS can FROM tickets GROUP BY event_id) t ON t.event_id = e.id "
	"LEFT JOIN (SELECT event_id, count(*) AS n FROM (SELECT DISTINCT event_id, order_id, "
	" pdf_key FROM tickets WHERE pdf_key IS NOT NULL) AS d GROUP BY event_id) p "
	" ON p.event_id = e.id "
	"LEFT JOIN (SELECT o.event_id, count(*) AS n FROM email_sends es JOIN orders o "
	" ON o.id = es.order_id WHERE es.kind = ?1 AND es.sent_at IS NOT NULL "
	" GROUP BY o.event_id) s ON s.event_id = e.id ORDER BY e.id";

/* eight counts from col on, in struct event_totals' order */
static void totals_read(struct db_stmt *st, int col, struct event_totals *t)
{
	t->orders = db_col_int(st, col);
	t->tickets = db_col_int(st, col + 1);
	t->tickets_pdf = db_col_int(st, col + 2);
	t->pdfs = db_col_int(st, col + 3);
	t->emails_sent = db_col_int(st, col + 4);
	t->admitted = db_col_int(st, col + 5);
	t->cancelled = db_col_int(st, col + 6);
	t->orders_cancelled = db_col_int(st, col + 7);
}

enum sd_result event_check_totals(struct db *db, event_totals_fn fn, void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_CHECK_TOTALS);
	struct totals_check c;
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, "tickets");
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		c.event_id = db_col_int(st, 0);
		totals_read(st, 1, &c.kept);
		totals_read(st, 9, &c.rows);
		if (fn(&c, arg))
			break;
	}
	db_reset(st);
	return SD_OK;
}
