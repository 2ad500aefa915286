/*
 * events.h: events, and what each has sold, read from the totals the
 * database keeps (event_totals, schema 0006 and 0010) so that no read
 * counts orders or tickets; the sales per hour; the checks that hold the
 * kept counts against a full count (`stagedoor check`).
 */
#ifndef SD_EVENTS_H
#define SD_EVENTS_H

#include <stdint.h>

#include "blob.h"
#include "db.h"
#include "result.h"
#include "text.h"

/* One event with what it has sold, in one statement from the kept totals. */
struct event_view {
	int64_t id, starts_at, capacity, created_at;
	int64_t orders;			/* live orders (not cancelled) */
	int64_t seats_sold;		/* live tickets */
	int64_t admitted;		/* tickets admitted at the door */
	int64_t cancelled;		/* tickets cancelled */
	int64_t closed_at;		/* ms: its sales were closed; 0: on sale */
	int64_t last_seat;		/* the highest seat a live ticket holds */
	int64_t price_minor;		/* a seat's price in currency's minor units;
					 * -1: no price (the shop does not sell it) */
	char currency[4];		/* ISO 4217; "" with no price */
	int64_t cancelled_at;		/* ms: the event was cancelled; 0: it was not */
	int64_t change_no;		/* its moves so far (a new start or venue once
					 * it sold: event_runs.h) */
	int reminders;			/* 1: its buyers get a reminder email */
	char cancel_reason[201];	/* "" when none */
	char name[TEXT_FIELD_MAX + 1];
	char venue[TEXT_FIELD_MAX + 1];
};

/* event_get: [out] *v.  SD_NOT_FOUND when there is no such event. */
enum sd_result event_get(struct db *db, int64_t id, struct event_view *v);

/* event_each: call fn for every event, by id; fn must not use db. */
enum sd_result event_each(struct db *db, void (*fn)(const struct event_view *v, void *arg),
			  void *arg);

/* event_each_selling: fn for at most limit priced events not closed that
 * start after since, the soonest first (the shop's list; a scan of the
 * events table that computes the counts of those alone). */
enum sd_result event_each_selling(struct db *db, int64_t since, int limit,
				  void (*fn)(const struct event_view *v, void *arg), void *arg);

/* event_box_totals: [out] *orders: every live order; *emails_sent: orders
 * whose ticket email is marked sent. */
enum sd_result event_box_totals(struct db *db, int64_t *orders, int64_t *emails_sent);

/* What one event's sales came to, in one statement from the kept totals. */
struct event_summary {
	int64_t orders;			/* every order, cancelled or not */
	int64_t tickets;		/* every ticket row */
	int64_t tickets_without_pdf;	/* pdf_key still NULL */
	int64_t pdfs;			/* distinct PDF keys */
	int64_t pdfs_missing;		/* orders whose PDF file is not in the store */
	int64_t emails_sent;		/* the event's orders with the ticket email sent */
	int64_t orders_cancelled, cancelled, admitted;
	int64_t counted_orders;		/* sales_counters */
	int64_t counted_seats;
};

/* event_summary: [out] *s for event_id; blobs (may be NULL) also checks that
 * each order's PDF file exists. */
enum sd_result event_summary(struct db *db, struct blob_store *blobs, int64_t event_id,
			     struct event_summary *s);

/* One hour of an event's sales: orders placed in it and their seats, as
 * sold (a later cancellation does not move them). */
struct event_hour {
	int64_t hour;			/* ms: the start of the hour */
	int64_t orders, seats;
};

#define EVENT_HOURS_MAX 720		/* a sale of a month, hour by hour */

/* event_sales: the event's sales by the hour, the oldest first, hours with no
 * sale left out; at most EVENT_HOURS_MAX, the newest.  Read by the index
 * (event_id, created_at): the cost is the event's orders, not the box's.
 * [out] out[0..*n). */
enum sd_result event_sales(struct db *db, int64_t event_id, struct event_hour *out, int *n);

/* ---- invariant checks (`stagedoor check`) ------------------------------ */

/* One event's sales counter beside what its live orders add up to. */
struct counter_check {
	int64_t event_id;
	int64_t counted_orders, counted_seats;	/* sales_counters (0 when no row) */
	int64_t orders, seats;			/* the event's live orders */
};

typedef int (*event_counter_fn)(const struct counter_check *c, void *arg);

/* event_check_counters: call fn for every event, by id. */
enum sd_result event_check_counters(struct db *db, event_counter_fn fn, void *arg);

/* What event_totals keeps for one event, or what its rows come to. */
struct event_totals {
	int64_t orders, tickets;
	int64_t tickets_pdf;		/* tickets with a pdf_key */
	int64_t pdfs;			/* distinct (order, pdf_key) */
	int64_t emails_sent;		/* ticket emails with sent_at */
	int64_t admitted;		/* tickets with scanned_at */
	int64_t cancelled;		/* tickets with cancelled_at */
	int64_t orders_cancelled;	/* orders with cancelled_at */
};

/* One event's kept totals beside a full count of its rows. */
struct totals_check {
	int64_t event_id;
	struct event_totals kept, rows;
};

typedef int (*event_totals_fn)(const struct totals_check *c, void *arg);

/* event_check_totals: call fn for every event, by id (a full count: for
 * `stagedoor check` and the tests, never for a page). */
enum sd_result event_check_totals(struct db *db, event_totals_fn fn, void *arg);

#endif
