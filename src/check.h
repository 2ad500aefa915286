/*
 * check.h: the invariants a drained Stagedoor database must hold, checked in
 * a fixed order, stopping at the first that is broken (`stagedoor check`).
 *
 *  1. integrity      PRAGMA integrity_check says ok
 *  2. foreign_keys   PRAGMA foreign_key_check finds nothing
 *     identities     what the outside world holds names no row id a lost
 *                    commit could hand on: tickets' code_ids, emails'
 *                    provider keys and outbox job ids as orders.h and
 *                    outbox.h say (what was made before schema 11 keeps
 *                    its old names)
 *  3. outbox         no outbox row waits for the relay
 *  4. stream         no ready, leased or dead job (scheduled ones may wait)
 *  5. pdfs           a cancelled order has every ticket cancelled, a standing
 *                    one none; every ticket of every order has its pdf_key
 *                    (a cancelled order may have none, when it was cancelled
 *                    before its render), and the file in the store is a PDF
 *                    ("%PDF-" ... "%%EOF")
 *  6. emails         every intent's email is sent, once: a standing order's
 *                    tickets (one email_sends row of kind tickets with
 *                    sent_at set) and each of its resends ("tickets-r<n>"), a
 *                    cancelled order's cancellation ("cancel")
 *  7. counters       every event's sales_counters row equals what its live
 *                    orders add up to (orders and seats), and its
 *                    event_totals row what its orders, tickets, emails,
 *                    admissions and cancellations count
 *
 * The SQL stays with the modules that own the tables (db, outbox, queue,
 * events, orders); this module only judges their answers and reads the
 * files.
 */
#ifndef SD_CHECK_H
#define SD_CHECK_H

#include <stdint.h>

#include "db.h"
#include "result.h"

enum check_id {
	CHECK_NONE,		/* every check held */
	CHECK_INTEGRITY,
	CHECK_FOREIGN_KEYS,
	CHECK_OUTBOX,
	CHECK_STREAM,
	CHECK_PDFS,
	CHECK_EMAILS,
	CHECK_COUNTERS,
	CHECK_IDENTITIES,
	CHECK_PAYMENTS,
	CHECK_EVENTS,
};

#define CHECK_PROBLEM_MAX 512

struct check_report {
	int ok;				/* 1: every invariant holds */
	enum check_id failed;		/* the first broken one, CHECK_NONE when ok */
	char problem[CHECK_PROBLEM_MAX];/* one line naming it, "" when ok */
	int64_t orders;			/* orders looked at */
	int64_t tickets;		/* their tickets */
	int64_t pdfs;			/* PDF files read and found valid */
	int64_t emails_sent;		/* emails sent: tickets, resends, cancellations */
	int64_t events;			/* events whose counters were compared */
	int64_t scheduled;		/* stream entries waiting for a later time,
					 * reminders apart */
	int64_t reminders;		/* reminders waiting for their day */
};

/* check_name: "integrity", "foreign_keys", ..., "none". */
const char *check_name(enum check_id id);

/*
 * check_db: run the checks on an open connection; the PDF files are looked
 * for under "<directory of db_path(db)>/blobs".  [out] *out.  Returns SD_OK
 * when the checks ran (out->ok says whether they held), an error when the
 * database could not be read (message set).
 */
enum sd_result check_db(struct db *db, const char *state_dir, struct check_report *out);

/* check_run: open the database at db_path (never creating it) and check_db. */
enum sd_result check_run(const char *db_path, const char *state_dir, struct check_report *out);

#endif
