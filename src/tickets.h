/*
 * tickets.h: events, orders, tickets and door scans, and the three handlers
 * that follow an order (seed: render_tickets, send_tickets,
 * update_sales_counter), each idempotent by the technique that closes its
 * failure (see idem.h).
 *
 * Domain code: it knows tables and handlers; PDFs, mail, codes and files go
 * through pdf, mail, code and blob.
 */
#ifndef SD_TICKETS_H
#define SD_TICKETS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "blob.h"
#include "code.h"
#include "db.h"
#include "failpoint.h"
#include "mail.h"
#include "result.h"
#include "worker.h"

#define ORDER_ID_MAX 16		/* public id "T" + 9 characters, with room */
#define TICKETS_TEXT_MAX 200	/* names, venues: bytes of UTF-8 */
#define TICKETS_SEATS_MAX 100	/* seats in one order */
#define TICKETS_KEY_MAX 200	/* client idempotency keys */
#define TICKETS_MAIL_FROM_DEFAULT "box-office@stagedoor.invalid"

/* What the handlers need besides the database; one per worker process. */
struct tickets_env {
	char db_path[PATH_MAX];
	struct blob_store *blobs;		/* <state folder>/blobs */
	struct mailer *mail;
	unsigned char key[CODE_KEY_LEN];	/* signs ticket codes */
	char mail_from[256];
	/* send_tickets: an unsent email_sends claim older than this is taken
	 * over (0: IDEM_STALE_MS).  Safe from the send_tickets lease on: a
	 * holder's send times out within its lease, so after it no send of
	 * that holder can still be on its way (config_send_lease_ms). */
	int64_t claim_stale_ms;
};

/*
 * The state folder holds the box's files: ticket.key, blobs/ (the PDFs) and
 * maildir/ (the default mail transport).  It is the state_dir setting, or,
 * when that is NULL or "", the database's own folder.  Every function below
 * takes db_path and state_dir and works that out the same way.
 */

/* tickets_state_dir: [out] buf = the state folder. */
enum sd_result tickets_state_dir(const char *db_path, const char *state_dir, char *buf,
				 size_t size);

/* tickets_files_init: what `init` makes in the state folder: the folder
 * itself and the ticket key. */
enum sd_result tickets_files_init(const char *db_path, const char *state_dir);

/* tickets_blobs_open: the box's PDF store: the database (blob_store = db,
 * the default on PostgreSQL) or <state folder>/blobs. */
enum sd_result tickets_blobs_open(const char *db_path, const char *state_dir,
				  struct blob_store **out);

/* tickets_default_mail_url: "maildir:<state folder>/maildir". */
void tickets_default_mail_url(const char *db_path, const char *state_dir, char *buf, size_t size);

/*
 * tickets_env_open: the handlers' context for the database at db_path.
 * mail_url NULL: the default maildir; mail_from NULL: the default sender;
 * mail_cfg (may be NULL: the defaults) is passed to mail_open_opts and need
 * not outlive the call.
 */
enum sd_result tickets_env_open(const char *db_path, const char *state_dir, const char *mail_url,
				const char *mail_from, const struct mail_config *mail_cfg,
				struct tickets_env **out);
void tickets_env_close(struct tickets_env *env);

/* ---- intake ---------------------------------------------------------- */

/* tickets_text_valid: 1..TICKETS_TEXT_MAX bytes of UTF-8, no control characters. */
enum sd_result tickets_text_valid(const char *what, const char *s);

/* tickets_time_parse: ISO 8601 "YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM]" (no zone:
 * UTC) to ms.  tickets_time_format: "YYYY-MM-DD HH:MM UTC". */
enum sd_result tickets_time_parse(const char *s, int64_t *ms);
void tickets_time_format(int64_t ms, char *buf, size_t size);

struct event_new {
	const char *name;
	const char *venue;
	int64_t starts_at;	/* ms */
	int64_t capacity;
};

enum sd_result event_add(struct db *db, const struct event_new *e, int64_t *id);

struct order_new {
	int64_t event_id;
	const char *name;
	const char *email;
	int64_t seats;
	const char *idempotency_key;	/* may be NULL */
};

/*
 * order_add: the order, one ticket per seat and the outbox rows for
 * render_tickets and update_sales_counter, in one transaction (the caller's
 * connection should be FULL).  The same idempotency key with the same order
 * returns the first order and writes nothing ([out] *replayed = 1); with a
 * different order it is SD_INVALID.  Selling past capacity is refused by the
 * schema inside this transaction.  [out] public_id (ORDER_ID_MAX bytes).
 */
enum sd_result order_add(struct db *db, const struct order_new *o, char *public_id,
			 int *replayed);

/* order_show: the order, its tickets, PDF and email state and its jobs, as
 * text or JSON.  [out] *out (free()). */
enum sd_result order_show(struct db *db, const char *public_id, int json, char **out);

enum scan_outcome { SCAN_ADMITTED, SCAN_ALREADY, SCAN_INVALID, SCAN_WRONG_EVENT,
		    SCAN_DOORS_CLOSED };

/* Where a scan happens: a door bound to one event, open from open_before_ms
 * before it starts until close_after_ms after.  NULL or event_id 0: any
 * event, any time (the operator's scans). */
struct scan_door {
	int64_t event_id;
	int64_t open_before_ms, close_after_ms;
};

struct scan_result {
	enum scan_outcome outcome;
	int64_t scanned_at;		/* when admitted (now, or the first time) */
	char seat_label[32];
	char order_id[ORDER_ID_MAX];
	/* SCAN_WRONG_EVENT: the ticket's event; SCAN_DOORS_CLOSED: the door's,
	 * with the window */
	int64_t event_id, event_starts_at, opens_at, closes_at;
	char event_name[TICKETS_TEXT_MAX + 1];
};

/*
 * ticket_scan: admit the ticket a code names, once (a conditional update),
 * at door (NULL: anywhere).  A ticket of another event than the door's is
 * SCAN_WRONG_EVENT, and any ticket outside the door's window is
 * SCAN_DOORS_CLOSED: neither is marked scanned.
 */
enum sd_result ticket_scan(struct db *db, const unsigned char key[CODE_KEY_LEN],
			   const char *code, const struct scan_door *door,
			   struct scan_result *res);

/* What one event's sales came to, read in one statement from the kept
 * totals (schema 0006_event_totals), whatever the number of orders. */
struct event_summary {
	int64_t orders;
	int64_t tickets;
	int64_t tickets_without_pdf;	/* pdf_key still NULL */
	int64_t pdfs;			/* distinct PDF keys */
	int64_t pdfs_missing;		/* orders whose PDF file is not in the store */
	int64_t emails_sent;		/* the event's orders with the ticket email sent */
	int64_t counted_orders;		/* sales_counters */
	int64_t counted_seats;
};

/* tickets_event_summary: [out] *s for event_id; blobs (may be NULL) also
 * checks that each order's PDF file exists. */
enum sd_result tickets_event_summary(struct db *db, struct blob_store *blobs, int64_t event_id,
				     struct event_summary *s);

/* One event with what it has sold, read in one statement from the kept
 * totals. */
struct event_view {
	int64_t id, starts_at, capacity, created_at;
	int64_t orders;			/* orders for it */
	int64_t seats_sold;		/* ticket rows */
	char name[TICKETS_TEXT_MAX + 1];
	char venue[TICKETS_TEXT_MAX + 1];
};

/* event_get: [out] *v.  SD_NOT_FOUND when there is no such event. */
enum sd_result event_get(struct db *db, int64_t id, struct event_view *v);

/* tickets_each_event: call fn for every event, by id; fn must not use db. */
enum sd_result tickets_each_event(struct db *db, void (*fn)(const struct event_view *v,
							     void *arg), void *arg);

/* tickets_totals: [out] *orders: every order; *emails_sent: orders whose
 * ticket email is marked sent. */
enum sd_result tickets_totals(struct db *db, int64_t *orders, int64_t *emails_sent);

/* One recent order, as the dashboard lists it. */
struct order_recent {
	char id[ORDER_ID_MAX];	/* the public id */
	int64_t event_id, seats;
	int64_t created_at;	/* ms since the epoch */
	int pdf_stored;		/* every ticket's PDF is stored */
	const char *email;	/* "sent", "sending" (claimed, not yet sent) or "pending" */
};

/* tickets_recent_orders: call fn for the limit (1..) newest orders, newest
 * first; fn must not use db. */
enum sd_result tickets_recent_orders(struct db *db, int limit,
				     void (*fn)(const struct order_recent *o, void *arg),
				     void *arg);

/* ---- invariant checks (`stagedoor check`) ------------------------------ */

/* One order as the checks see it; strings live until the callback returns. */
struct order_check {
	int64_t id;
	const char *public_id;
	int64_t event_id;
	int64_t seats;
	int64_t tickets;		/* ticket rows */
	int64_t tickets_without_pdf;	/* of which pdf_key is NULL */
	int64_t pdf_keys;		/* distinct pdf_key values */
	const char *pdf_key;		/* the smallest of them; NULL when none */
	int64_t emails;			/* email_sends rows of kind "tickets" */
	int64_t emails_sent;		/* of which sent_at is set */
};

/* Return nonzero to stop the walk.  The callback must not use db. */
typedef int (*tickets_order_fn)(const struct order_check *o, void *arg);

/* tickets_check_orders: call fn for every order, by id. */
enum sd_result tickets_check_orders(struct db *db, tickets_order_fn fn, void *arg);

/* One event's sales counter beside what its orders add up to. */
struct counter_check {
	int64_t event_id;
	int64_t counted_orders, counted_seats;	/* sales_counters (0 when no row) */
	int64_t orders, seats;			/* the event's orders */
};

typedef int (*tickets_counter_fn)(const struct counter_check *c, void *arg);

/* tickets_check_counters: call fn for every event, by id. */
enum sd_result tickets_check_counters(struct db *db, tickets_counter_fn fn, void *arg);

/* What event_totals keeps for one event, or what its rows come to. */
struct event_totals {
	int64_t orders, tickets;
	int64_t tickets_pdf;		/* tickets with a pdf_key */
	int64_t pdfs;			/* distinct (order, pdf_key) */
	int64_t emails_sent;		/* ticket emails with sent_at */
};

/* One event's kept totals beside a full count of its rows. */
struct totals_check {
	int64_t event_id;
	struct event_totals kept, rows;
};

typedef int (*tickets_totals_fn)(const struct totals_check *c, void *arg);

/* tickets_check_totals: call fn for every event, by id (a full count: for
 * `stagedoor check` and the tests, never for a page). */
enum sd_result tickets_check_totals(struct db *db, tickets_totals_fn fn, void *arg);

/* ---- the handlers ------------------------------------------------------ */

/* The three ticket handlers (the worker adds its built-in kinds);
 * worker_opts.app must be a struct tickets_env. */
extern const struct handler tickets_handlers[];

enum job_outcome tickets_render(struct handler_ctx *ctx, const struct job *job,
				struct job_result *res);
enum job_outcome tickets_send(struct handler_ctx *ctx, const struct job *job,
			      struct job_result *res);
enum job_outcome tickets_count(struct handler_ctx *ctx, const struct job *job,
			       struct job_result *res);

/* ---- building blocks, shared with the tests' naive handlers ----------- */

struct order_view {
	int64_t id, event_id, seats, starts_at;
	char public_id[ORDER_ID_MAX];
	char buyer_name[TICKETS_TEXT_MAX + 1];
	char buyer_email[256];
	char event_name[TICKETS_TEXT_MAX + 1];
	char venue[TICKETS_TEXT_MAX + 1];
	int pdf_stored;				/* every ticket has its pdf_key */
	int n_tickets;
	struct {
		int64_t id;
		char seat_label[32];
	} tickets[TICKETS_SEATS_MAX];
};

/* tickets_load_order: read an order (no transaction held after).
 * SD_NOT_FOUND when there is none. */
enum sd_result tickets_load_order(struct db *db, int64_t order_id, struct order_view *v);

/* tickets_pdf_key: "tickets/<public id>.pdf", the order's fixed key. */
void tickets_pdf_key(const struct order_view *v, char *buf, size_t size);

/* tickets_render_pdf: the order's PDF with its signed ticket codes, rendered
 * only (no file, no database).  [out] *pdf (free()) and *len: the bytes. */
enum sd_result tickets_render_pdf(const struct tickets_env *env, const struct order_view *v,
				  unsigned char **pdf, size_t *len);

/* tickets_render_store: tickets_render_pdf, then store the bytes under the
 * order's fixed key (no transaction open). */
enum sd_result tickets_render_store(struct tickets_env *env, const struct order_view *v);

/* tickets_send_mail: the ticket email with the stored PDF attached, sent with
 * the provider key "tickets-<order id>".  [out] res. */
enum sd_result tickets_send_mail(struct tickets_env *env, const struct order_view *v,
				 struct mail_result *res);

/* Failpoints in the handlers: failpoint.h names them. */

#endif
