/*
 * orders.h: an order's life at the box office: intake, the changes staff
 * make to it (resend its tickets, change its email, cancel it), what it
 * looks like (order_detail_get, which the CLI prints as text and the API as
 * JSON), the lists and the search, and the checks of `stagedoor check`.
 *
 * Every change is one transaction that writes the order's rows, a row of
 * order_changes (who and why) and the outbox row of the job that follows,
 * so the job is queued exactly when the change is stored.  Each job names
 * its intent and the technique that makes its second run harmless
 * (ticket_jobs.h).
 */
#ifndef SD_ORDERS_H
#define SD_ORDERS_H

#include <stdint.h>

#include "db.h"
#include "queue.h"
#include "result.h"
#include "tickets.h"

struct order_new {
	int64_t event_id;
	const char *name;
	const char *email;		/* NULL: a walk-up buyer's, no ticket email */
	int64_t seats;
	const char *idempotency_key;	/* may be NULL */
	const char *payment;		/* "cash", "card": taken at the box office;
					 * "online": by the payment provider;
					 * NULL: not recorded */
	int64_t hold_id;		/* the shop's hold this order is made for (its
					 * seats are this order's), 0: none */
	int64_t amount_minor;		/* with currency: what was charged (the
					 * hold's amount) */
	const char *currency;		/* NULL: the event's price for the seats */
	const char *payment_ref;	/* the provider's payment; NULL: none */
};

/* order_payment_valid: SD_OK when s names a payment an order may record. */
enum sd_result order_payment_valid(const char *s);

/*
 * order_add: the order, one ticket per seat and the outbox rows for
 * render_tickets and update_sales_counter, in one transaction (the caller's
 * connection should be FULL).  Seats given back by cancelled orders are sold
 * first, the lowest first, then the seats after the highest one ever sold.
 * The same idempotency key with the same order returns the first order and
 * writes nothing ([out] *replayed = 1); with a different order it is
 * SD_INVALID.  More seats than the event has left is SD_SOLD_OUT, refused by
 * the schema inside this transaction.  [out] public_id (ORDER_ID_MAX bytes).
 */
enum sd_result order_add(struct db *db, const struct order_new *o, char *public_id,
			 int *replayed);

/*
 * order_reminder_add: in the caller's transaction, the order's reminder
 * email for an event starting at starts_at, scheduled in the stream
 * remind_before (event_edit.h) ahead of it: job "outbox:<public
 * id>:reminder-<starts_at>", kind send_reminder.  None when reminders are
 * off or the time for it has passed; one already queued for this start
 * stands.  order_add calls it; a move's child, for the new start.
 */
enum sd_result order_reminder_add(struct db *db, int64_t order_id, const char *public_id,
				  int64_t starts_at);

/* Who makes a change: a token's name, or "cli (<user>)". */
#define ORDER_ACTOR_MAX 220
#define ORDER_REASON_MAX 200

/* How often one order may be sent again (0: no limit): a resend is an email
 * with the tickets, and a button pressed in a loop must not bury a buyer. */
struct order_resend_limit {
	int64_t per_hour, per_day;
};

/*
 * order_id_norm: an order's public id as a person types it, in the
 * capitals the box made it with ("t3r9wf4j84" names T3R9WF4J84).  [out]
 * out (ORDER_ID_MAX bytes).  SD_INVALID when in cannot be a public id ("T"
 * and letters or digits).  The functions below that take a public id
 * apply it themselves: a lookup, a key or a job id never sees another case.
 */
enum sd_result order_id_norm(const char *in, char *out);

/*
 * order_resend: queue the order's tickets again, to its address as it is
 * when the email goes: a new intent, so a new key ("tickets-<id>-r<n>"),
 * n counted in the order's row in this very transaction.  [out] *n.
 * SD_NOT_FOUND: no such order; SD_CONFLICT: the order is cancelled;
 * SD_LIMITED: lim (may be NULL: none) allows no more now, [out]
 * *retry_after_ms (may be NULL) how long until it does.  Two resends at
 * once are counted one after the other (the order's row is locked first).
 */
enum sd_result order_resend(struct db *db, const char *public_id, const char *actor,
			    const struct order_resend_limit *lim, int64_t *n,
			    int64_t *retry_after_ms);

/*
 * order_set_email: the buyer's address from now on: every email whose
 * first attempt is still to come goes to it.  An email already attempted
 * keeps the address that attempt used (idem_effect_fix: a retry goes where
 * the first attempt may have gone, under its key); resend it to reach the
 * new one.  The old address is kept in the change's row.
 * [out] *changed: 0 when it was already this address (nothing written).
 */
enum sd_result order_set_email(struct db *db, const char *public_id, const char *email,
			       const char *actor, int *changed);

/* An admitted ticket that keeps an order from being cancelled. */
struct order_admitted {
	char seat[32];
	int64_t scanned_at;
	char scanned_by[ORDER_ACTOR_MAX + 1];
};

#define ORDER_ADMITTED_MAX 8

enum order_refund { ORDER_REFUND_NONE, ORDER_REFUND_PROVIDER, ORDER_REFUND_WINDOW };

struct order_cancel_result {
	int already;			/* it was cancelled before: nothing changed */
	enum order_refund refund;	/* what the cancellation owes back */
	int64_t seats_freed;
	int n_admitted;			/* SD_CONFLICT: the admitted tickets (the first few) */
	struct order_admitted admitted[ORDER_ADMITTED_MAX];
};

/*
 * order_cancel: in one transaction the order is marked cancelled, its
 * tickets cancelled (they scan as cancelled from then on) and their seats
 * given back for sale, the change recorded with who and why (reason may be
 * NULL), and a cancel_order job queued (it moves the sales counter back and
 * sends the cancellation email, once each).  Cancelling twice changes
 * nothing (res->already).  An order with a ticket already admitted at the
 * door is not cancelled: SD_CONFLICT, the tickets in res->admitted.
 */
enum sd_result order_cancel(struct db *db, const char *public_id, const char *actor,
			    const char *reason, struct order_cancel_result *res);

/*
 * order_cancel_in: order_cancel of the order with row id order_id inside
 * the caller's transaction (which it leaves to the caller to end: on
 * SD_CONFLICT it must roll back, or back to a savepoint).  flags
 * ORDER_CANCEL_FOR_EVENT: its event is cancelled (event_runs.h), whose
 * child pays the refund itself (no refund_payment job) and sends the
 * buyer's one email (the cancel_order job only moves the counter back).
 */
#define ORDER_CANCEL_FOR_EVENT 1u
/* ORDER_CANCEL_MONEY_BACK: the provider gave the payment back (a refund
 * made in its dashboard, a dispute): nothing is owed back, and tickets
 * admitted before stay admitted while the others are cancelled. */
#define ORDER_CANCEL_MONEY_BACK 2u
enum sd_result order_cancel_in(struct db *db, int64_t order_id, const char *actor,
			       const char *reason, unsigned flags, struct order_cancel_result *res);

/*
 * order_money_back: money of the order paid by payment_ref went back by
 * another way than the box's own refund, recorded on it in the caller's
 * transaction: refunded_minor (>= 0: what the provider says is refunded of
 * the payment in all, kept as the largest seen; -1: nothing new) and
 * dispute ("<reason>, <status>", NULL: none; the first one's time kept).
 * [out] *order_id, public_id (ORDER_ID_MAX).  SD_NOT_FOUND: no order was
 * paid by it.
 */
enum sd_result order_money_back(struct db *db, const char *payment_ref, int64_t refunded_minor,
				const char *dispute, int64_t *order_id, char *public_id);

/* ---- what an order looks like ------------------------------------------- */

enum ticket_state { TICKET_VALID, TICKET_ADMITTED, TICKET_CANCELLED };

#define ORDER_EMAILS_MAX 32		/* the tickets, the last resends, the cancellation */
#define ORDER_CHANGES_MAX 32		/* the newest changes */
#define ORDER_JOBS_MAX 32		/* the newest jobs */
#define ORDER_ENTRIES_MAX 4		/* entries of one job (a relay's duplicate) */

struct order_email {
	char kind[TICKETS_KIND_MAX];	/* "tickets", "tickets-r<n>", "cancel" */
	int64_t claimed_at;		/* 0: unclaimed (released) */
	int64_t sent_at;		/* 0: not sent yet */
	char message_id[128];		/* the provider's, "" when none */
	char to[256];			/* the address its first attempt used; "" none yet */
};

struct order_change {
	int64_t at;
	char kind[8];			/* "resend", "email", "cancel" */
	char actor[ORDER_ACTOR_MAX + 1];
	char detail[256];		/* "r<n>", the address before, the reason; "" */
};

struct order_job_entry {
	char state[12];			/* ready, scheduled, leased, dead, done */
	int64_t deliveries, attempts;
	char last_error[160];		/* "" when none */
};

struct order_job {
	char job_id[QUEUE_JOB_ID_MAX + 1];
	char kind[32];
	int published;
	int n_entries;
	struct order_job_entry entries[ORDER_ENTRIES_MAX];
};

struct order_detail {
	struct order_view v;		/* the order, its event and its tickets */
	int64_t created_at;
	int64_t pdf_tickets;		/* tickets whose PDF key is set */
	char pdf_key[80];
	struct {
		enum ticket_state state;
		int64_t scanned_at;	/* 0: not admitted */
		char scanned_by[ORDER_ACTOR_MAX + 1];
		int pdf_stored;
	} tickets[TICKETS_SEATS_MAX];	/* beside v.tickets[i] */
	int n_emails, n_changes, n_jobs;
	struct order_email emails[ORDER_EMAILS_MAX];
	struct order_change changes[ORDER_CHANGES_MAX];
	struct order_job jobs[ORDER_JOBS_MAX];
	struct {			/* its money owed back, when it was cancelled */
		int owed;		/* 1: a refund is owed (or was paid) */
		int window;		/* 1: at the box office; 0: through the provider */
		int64_t amount_minor, done_at;	/* done_at 0: not yet */
		int64_t failed_at;	/* the provider could not pay it: owed at the
					 * window from then on; 0: not */
		char provider_id[256];	/* the provider's refund, "" */
		char status[24];	/* the provider's word ("pending"), "" */
		char failure[201];	/* its reason for a failure, "" */
	} refund;
	struct {			/* money that went back outside the box */
		int64_t refunded_minor;	/* refunded at the provider in all; -1: none */
		int64_t disputed_at;	/* 0: never disputed */
		char dispute[121];	/* "<reason>, <status>" */
	} back;
};

/* order_id_get: [out] *id, the row id of the order public_id (in the
 * caller's transaction, if any).  SD_NOT_FOUND when there is none. */
enum sd_result order_id_get(struct db *db, const char *public_id, int64_t *id);

/* order_detail_get: [out] *out (order_detail_free) for public_id.
 * SD_NOT_FOUND when there is none. */
enum sd_result order_detail_get(struct db *db, const char *public_id, struct order_detail **out);
void order_detail_free(struct order_detail *d);

/* order_email_state: "sent", "sending" (claimed, not yet sent), "pending" */
const char *order_email_state(const struct order_email *e);

/* ---- lists -------------------------------------------------------------- */

/* One order in a list; the strings live until the callback returns. */
struct order_recent {
	char id[ORDER_ID_MAX];	/* the public id */
	int64_t event_id, seats;
	int64_t created_at;	/* ms since the epoch */
	int pdf_stored;		/* every ticket's PDF is stored */
	const char *email;	/* the tickets email: "sent", "sending" or "pending" */
	const char *name;	/* the buyer */
	const char *email_address;
	int cancelled;
};

typedef void (*order_list_fn)(const struct order_recent *o, void *arg);

/* order_recent: call fn for the limit (1..) newest orders, newest first;
 * fn must not use db. */
enum sd_result order_recent(struct db *db, int limit, order_list_fn fn, void *arg);

#define ORDER_SEARCH_MAX 20	/* orders a search returns */
#define ORDER_QUERY_MAX 200	/* bytes of a search */

/*
 * order_search: the newest ORDER_SEARCH_MAX orders whose public id starts
 * with q, whose buyer's email is q, or whose buyer's name holds q, any case
 * (ASCII); fn as order_recent.  q: 1..ORDER_QUERY_MAX bytes of text
 * (SD_INVALID otherwise).  An id or an email is found by its index; a part
 * of a name reads the orders newest first until it has found enough.
 */
enum sd_result order_search(struct db *db, const char *q, order_list_fn fn, void *arg);

/* ---- invariant checks (`stagedoor check`) ------------------------------ */

/* One order as the checks see it; strings live until the callback returns. */
struct order_check {
	int64_t id;
	const char *public_id;
	int64_t event_id;
	int64_t seats;
	int cancelled;
	int64_t tickets;		/* ticket rows */
	int64_t tickets_cancelled;	/* of which cancelled */
	int64_t tickets_admitted;	/* of which admitted at the door */
	int money_back;			/* its payment went back outside the box (a
					 * refund at the provider, a dispute): its
					 * cancellation left admitted tickets as they were */
	int64_t tickets_without_pdf;	/* of which pdf_key is NULL */
	int64_t pdf_keys;		/* distinct pdf_key values */
	const char *pdf_key;		/* the smallest of them; NULL when none */
	int64_t emails;			/* email_sends rows of kind "tickets" */
	int64_t emails_sent;		/* of which sent_at is set */
	int64_t resends;		/* resends queued */
	int64_t resends_sent;		/* email_sends rows "tickets-r<n>" with sent_at */
	int64_t cancel_sent;		/* email_sends "cancel" or "cancel-event" (its
					 * event's cancellation) with sent_at (0 or 1) */
	int no_address;			/* a walk-up order without an address: owes no email */
	int address_added;		/* a walk-up order given its address later: its
					 * tickets reach it by a resend */
};

/* Return nonzero to stop the walk.  The callback must not use db. */
typedef int (*order_check_fn)(const struct order_check *o, void *arg);

/* order_check_each: call fn for every order, by id. */
enum sd_result order_check_each(struct db *db, order_check_fn fn, void *arg);

/*
 * order_check_identities: the identities the outside world holds, as no
 * lost commit can hand them on (code.h, tickets.h): every ticket made since
 * schema 11 has a random code_id (at least CODE_ID_MIN), every one made
 * before its row id; every email's provider key is its intent's key of the
 * order's public id, or, for an order made before schema 11, of its row id;
 * an email marked sent has its key.  [out] problem ("" when all hold).
 */
enum sd_result order_check_identities(struct db *db, char *problem, size_t size);

#endif
