/*
 * event_edit.h: an event's life: added, changed (name, venue, capacity,
 * start), its sales closed; and the rules that say when an event may start
 * and until when it sells.
 *
 * An event may not start in the past, but for start_grace (a show already
 * running, added late); its capacity never goes below a seat a live ticket
 * holds; once closed, or sales_close_after past its start, it takes no
 * order (orders.c asks event_sale_check in the order's own transaction),
 * while its doors still admit the tickets it sold.
 */
#ifndef SD_EVENT_EDIT_H
#define SD_EVENT_EDIT_H

#include <stdint.h>

#include "db.h"
#include "events.h"
#include "result.h"

struct event_rules {
	int64_t start_grace_ms;		/* a start this far in the past is accepted */
	int64_t sales_close_after_ms;	/* sales stop this long after the start */
	int64_t remind_before_ms;	/* a buyer's reminder this long before it; 0: none */
	int stripe_prices;		/* the shop takes payments through Stripe: a price
					 * must be one Stripe can charge (money.h), or 0 */
};

#define EVENT_SALES_CLOSE_AFTER_MS_DEFAULT (2 * 3600000LL)
#define EVENT_REMIND_BEFORE_MS_DEFAULT (24 * 3600000LL)

/* event_rules_set: the box's rules (cli_box_apply); event_rules_get: them,
 * or the defaults (no grace; sales until 2 h after the start; reminders a
 * day before). */
void event_rules_set(const struct event_rules *r);
const struct event_rules *event_rules_get(void);

struct event_new {
	const char *name;
	const char *venue;
	int64_t starts_at;	/* ms */
	int64_t capacity;
	int64_t price_minor;	/* a seat's price in minor units */
	char currency[4];	/* its ISO 4217 code; "": no price (the shop does
				 * not sell it) */
};

/*
 * event_price_parse: a price as a person writes it ("25.00") in currency
 * ("EUR", any case) into [out] *minor and code (4 bytes, capitals).  A price
 * without a currency, or a currency without a price, is SD_INVALID; so is,
 * with the rules' stripe_prices, a price Stripe cannot charge.
 */
enum sd_result event_price_parse(const char *price, const char *currency, int64_t *minor,
				 char *code);

/* event_start_valid: SD_OK when an event may start at starts_at (not
 * further in the past than the grace); SD_INVALID saying why not. */
enum sd_result event_start_valid(int64_t starts_at, int64_t now);

/* event_add: a new event, starting no earlier than now less the grace.
 * [out] *id. */
enum sd_result event_add(struct db *db, const struct event_new *e, int64_t *id);

/* A change to an event: the fields whose bit is in set. */
enum { EVENT_SET_NAME = 1, EVENT_SET_VENUE = 2, EVENT_SET_STARTS = 4, EVENT_SET_CAPACITY = 8,
       EVENT_SET_PRICE = 16, EVENT_SET_REMINDERS = 32 };

/* A new price (EVENT_SET_PRICE) is for the seats sold from then on: an
 * order keeps what it was charged. */
struct event_change {
	unsigned set;
	const char *name, *venue;
	int64_t starts_at, capacity;
	int64_t price_minor;
	char currency[4];	/* "": no price any more (the shop stops selling it) */
	int reminders;		/* EVENT_SET_REMINDERS: 1 on, 0 off (for orders that have
				 * one queued too: it finds them off when it comes) */
	const char *actor;	/* who changes it (a move's run records it); NULL: "cli" */
};

/* event_set: the change, in one transaction with the checks it needs
 * (SD_CONFLICT: a capacity below a seat sold, a cancelled event;
 * SD_INVALID: a start in the past, an empty change).  A new start or venue
 * for an event with live orders moves it: its change number goes up and a
 * run tells each buyer and renders their tickets again (event_runs.h), in
 * this same transaction.  [out] *after (may be NULL): the event as it is
 * now; *refused (may be NULL): the EVENT_SET_ bits of a conflict.
 * SD_NOT_FOUND when there is no such event. */
enum sd_result event_set(struct db *db, int64_t id, const struct event_change *c,
			 struct event_view *after, unsigned *refused);

/* event_close: the event's sales stop now (a closed one stays as it was).
 * [out] *after (may be NULL); *was_closed (may be NULL): 1 when it was. */
enum sd_result event_close(struct db *db, int64_t id, struct event_view *after, int *was_closed);

/* event_row_lock: in the caller's transaction, the lock that puts every
 * write that counts an event's seats (an order, a hold, a change) in line:
 * on PostgreSQL its row FOR NO KEY UPDATE; on SQLite the writer's lock,
 * which BEGIN IMMEDIATE took, so nothing more. */
enum sd_result event_row_lock(struct db *db, int64_t id);

/* event_sale_check: SD_OK when event id (starting at starts_at, closed at
 * closed_at, 0: open, cancelled at cancelled_at, 0: not) takes an order at
 * now; SD_CONFLICT with why not. */
enum sd_result event_sale_check(int64_t id, int64_t starts_at, int64_t closed_at,
				int64_t cancelled_at, int64_t now);

/* event_state_name: "on_sale", "closed" (closed by hand or past its
 * sales' end), "cancelled", as the API and the command line show it. */
const char *event_state_name(const struct event_view *v, int64_t now);

#endif
