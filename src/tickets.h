/*
 * tickets.h: what the box's ticket work stands on: the handlers'
 * environment (the ticket key, the PDF store, the mail transport), an order
 * as the handlers read it, and the two effects that leave the database: the
 * rendered PDF and the emails.  The state folder is statedir.h's; the
 * formats of time, timefmt.h's; the checks of text, text.h's.
 *
 * The rest of the domain sits beside it, one module each: events.h (events
 * and what they sold), orders.h (intake and the changes of an order),
 * scans.h (the door), ticket_jobs.h (the handlers).  PDFs, mail, codes and
 * files go through pdf, mail, code and blob.
 */
#ifndef SD_TICKETS_H
#define SD_TICKETS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "blob.h"
#include "code.h"
#include "db.h"
#include "mail.h"
#include "result.h"
#include "text.h"

#define ORDER_ID_MAX 16		/* public id "T" + 9 characters, with room */
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
	/* a refund's claim older than this is taken over (0: IDEM_STALE_MS):
	 * the provider's timeout and a margin (config_provider_stale_ms) */
	int64_t provider_stale_ms;
	/* the payment provider (payment_provider = stripe), opened by the
	 * worker; NULL: none, and the shop's provider jobs wait for one */
	struct stripe *stripe;
	/* a hold paid by a delayed method keeps its seats this long
	 * (shop_pending_max; 0: the default) */
	int64_t pending_max_ms;
	/* the shop as buyers reach it (shop_url, else http://<shop_listen>),
	 * no trailing '/'; "": no shop, a moved event's email sends the buyer
	 * to the box office for a refund */
	char shop_url[1024];
};

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

/* ---- an order, as the handlers read it ---------------------------------- */

struct order_view {
	int64_t id, event_id, seats, starts_at;
	int64_t cancelled_at;			/* 0 while the order stands */
	int64_t resends;			/* resends queued so far */
	char payment[33];			/* "cash", "card" (the box office),
						 * "online" (the shop); "": not recorded */
	int64_t amount_minor;			/* what it was charged, with currency */
	char currency[4];			/* "": no charge recorded */
	char payment_ref[256];			/* the provider's payment; "": none */
	char public_id[ORDER_ID_MAX];
	char buyer_name[TEXT_FIELD_MAX + 1];
	char buyer_email[256];
	char event_name[TEXT_FIELD_MAX + 1];
	char venue[TEXT_FIELD_MAX + 1];
	int64_t change_no;			/* its event's moves so far (events.change_no) */
	int event_cancelled;			/* its event is cancelled */
	int event_reminders;			/* its event sends reminders */
	char pdf_key[80];			/* the PDF its tickets name; "" none yet */
	int pdf_stored;				/* every ticket has its pdf_key */
	int n_tickets;
	struct {
		int64_t id;
		int64_t code_id;		/* what its code names (code.h) */
		char seat_label[32];
	} tickets[TICKETS_SEATS_MAX];
};

/* tickets_load_order: read an order (no transaction held after).
 * SD_NOT_FOUND when there is none. */
enum sd_result tickets_load_order(struct db *db, int64_t order_id, struct order_view *v);

/* tickets_pdf_key: the key of the order's PDF for its event as it is now:
 * "tickets/<public id>.pdf", and once the event was moved n times
 * "tickets/<public id>-c<n>.pdf" (a key names its version: the PDF of an
 * earlier start stays as it was). */
void tickets_pdf_key(const struct order_view *v, char *buf, size_t size);

/* tickets_render_pdf: the order's PDF with its signed ticket codes, rendered
 * only (no file, no database).  [out] *pdf (free()) and *len: the bytes. */
enum sd_result tickets_render_pdf(const struct tickets_env *env, const struct order_view *v,
				  unsigned char **pdf, size_t *len);

/* tickets_render_store: tickets_render_pdf, then store the bytes under
 * tickets_pdf_key (no transaction open). */
enum sd_result tickets_render_store(struct tickets_env *env, const struct order_view *v);

/* tickets_pdf_replace: technique 1 for a moved event's PDF: the order's
 * tickets name key from now on, where they named another (rendered) one;
 * tickets not rendered yet are left to render_tickets, which renders the
 * event as it is.  [out] *won: 1 when this call changed them. */
enum sd_result tickets_pdf_replace(struct db *db, int64_t order_id, const char *key, int *won);

/* ---- the emails ----------------------------------------------------------- */

/*
 * One email is one intent, and an intent names both the row that decides
 * which run sends it (email_sends.kind, technique 2) and the key the
 * provider drops repeats by (technique 3):
 *
 *   the tickets           kind "tickets"       key "tickets-<public id>"
 *   the tickets, again n  kind "tickets-r<n>"  key "tickets-<public id>-r<n>"
 *   the cancellation      kind "cancel"        key "cancel-<public id>"
 *   its event cancelled   kind "cancel-event"  key "cancel-event-<event>-<public id>"
 *   its event moved (n)   kind "moved-<n>"     key "moved-<event>-<n>-<public id>"
 *   the reminder          kind "reminder-<t>"  key "reminder-<public id>-<t>"
 *
 * (t: the start, in ms, the reminder is for: a moved event reminds once
 * for its new start; n: the event's change number, events.change_no.)
 *
 * n counts an order's resends in its own row (orders.resends), taken in the
 * transaction that queues the resend: each resend is a new intent, sent
 * once however often its job runs.  The key names the order's public id,
 * which no lost commit hands to another order (a row id would be: the next
 * order gets it again); the first attempt fixes it in email_sends, so an
 * intent claimed before schema 11 keeps its "tickets-<row id>".
 *
 * Each job that follows an order is named by its intent too (outbox.job_id,
 * tickets_job_id): "outbox:<public id>:<intent>", the intent render, count,
 * send, send-r<n> or cancel.
 */
enum tickets_mail { TICKETS_MAIL_TICKETS, TICKETS_MAIL_CANCEL, TICKETS_MAIL_EVENT_CANCEL,
		   TICKETS_MAIL_MOVED, TICKETS_MAIL_REMINDER };

struct tickets_intent {
	enum tickets_mail mail;
	int64_t resend;			/* TICKETS_MAIL_TICKETS: 0 the first, n the nth again */
	int64_t change_no;		/* TICKETS_MAIL_MOVED: the event's change */
	int64_t starts_at;		/* TICKETS_MAIL_REMINDER: the start it is for */
	const char *reason;		/* TICKETS_MAIL_EVENT_CANCEL: why (may be NULL) */
	const char *was;		/* TICKETS_MAIL_MOVED: the start and venue before */
	const char *refund_link;	/* TICKETS_MAIL_MOVED: where the buyer asks for a
					 * refund (NULL: at the box office) */
};

#define TICKETS_KIND_MAX 32		/* "tickets-r<n>" */

/* tickets_intent_kind: the intent's email_sends.kind into buf. */
void tickets_intent_kind(const struct tickets_intent *in, char *buf, size_t size);

/* tickets_intent_key: the intent's provider key for the order v into buf
 * (TICKETS_KEY_MAX + 1 bytes is enough). */
void tickets_intent_key(const struct tickets_intent *in, const struct order_view *v, char *buf,
			size_t size);

/* tickets_job_id: the job id of the order's intent ("render", "count",
 * "send", "send-r<n>", "cancel"): "outbox:<public id>:<intent>", into buf
 * (QUEUE_JOB_ID_MAX + 1 bytes is enough). */
void tickets_job_id(const char *public_id, const char *intent, char *buf, size_t size);

/* tickets_send_mail: the intent's email to v's buyer at v's address (the
 * handler passes the address the email's first attempt fixed): the tickets
 * with the stored PDF attached, or the cancellation, sent under key (NULL:
 * the intent's, tickets_intent_key).  [out] res. */
enum sd_result tickets_send_mail(struct tickets_env *env, const struct order_view *v,
				 const struct tickets_intent *in, const char *key,
				 struct mail_result *res);

/* Failpoints in the handlers: failpoint.h names them. */

#endif
