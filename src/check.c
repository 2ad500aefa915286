/*
 * check.c: the invariant checks (check.h).
 *
 * Invariants of this module:
 *  - it writes nothing: every check is a read (the open may migrate an older
 *    file, as every command's open does);
 *  - the checks run in check.h's order and stop at the first broken one, so
 *    the one line it reports names the most basic problem (a corrupt file
 *    before a missing PDF, a waiting job before the effects it would make);
 *  - no SQL here: each table's owner answers for it.
 */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blob.h"
#include "event_runs.h"
#include "jobkinds.h"
#include "events.h"
#include "orders.h"
#include "outbox.h"
#include "payments.h"
#include "queue.h"
#include "statedir.h"

static const char *const names[] = {
	[CHECK_NONE] = "none",
	[CHECK_INTEGRITY] = "integrity",
	[CHECK_FOREIGN_KEYS] = "foreign_keys",
	[CHECK_OUTBOX] = "outbox",
	[CHECK_STREAM] = "stream",
	[CHECK_PDFS] = "pdfs",
	[CHECK_EMAILS] = "emails",
	[CHECK_COUNTERS] = "counters",
	[CHECK_IDENTITIES] = "identities",
	[CHECK_PAYMENTS] = "payments",
	[CHECK_EVENTS] = "events",
};

const char *check_name(enum check_id id)
{
	if ((int)id < 0 || (size_t)id >= sizeof names / sizeof names[0])
		return "?";
	return names[id];
}

static void broken(struct check_report *rep, enum check_id id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void broken(struct check_report *rep, enum check_id id, const char *fmt, ...)
{
	va_list ap;

	rep->ok = 0;
	rep->failed = id;
	va_start(ap, fmt);
	vsnprintf(rep->problem, sizeof rep->problem, fmt, ap);
	va_end(ap);
}

static const char *plural(int64_t n)
{
	return n == 1 ? "" : "s";
}

/* ---- the stream ---------------------------------------------------------- */

/* The first entry of a state, to name it in the message. */
struct first_job {
	char kind[QUEUE_KIND_MAX + 1];
	char job_id[QUEUE_JOB_ID_MAX + 1];
};

static void first_job_row(const struct job_row *row, void *arg)
{
	struct first_job *f = arg;

	if (f->job_id[0])
		return;
	snprintf(f->kind, sizeof f->kind, "%s", row->kind ? row->kind : "?");
	snprintf(f->job_id, sizeof f->job_id, "%s", row->job_id ? row->job_id : "?");
}

static enum sd_result stream_broken(struct db *db, struct check_report *rep, const char *state,
				    int64_t n)
{
	struct first_job f = { "", "" };
	enum sd_result r;

	if ((r = queue_list(db, state, NULL, 1, first_job_row, &f)) != SD_OK)
		return r;
	broken(rep, CHECK_STREAM, "the stream holds %lld %s job%s (first: %s, job_id %s)",
	       (long long)n, state, plural(n), f.job_id[0] ? f.kind : "?",
	       f.job_id[0] ? f.job_id : "?");
	return SD_OK;
}

/* ---- orders: PDFs and emails --------------------------------------------- */

struct order_walk {
	struct check_report *rep;
	struct blob_store *blobs;	/* opened on the first order */
	const char *db_path;
	char blob_dir[PATH_MAX];	/* for messages: where the PDFs are */
	enum sd_result r;		/* a failure that is not a broken invariant */
};

/* A PDF starts with "%PDF-" and its last line is "%%EOF" (trailing
 * whitespace allowed): enough to tell a truncated or foreign file. */
static int pdf_bytes_valid(const unsigned char *p, size_t n)
{
	static const char eof[] = "%%EOF";
	size_t e = sizeof eof - 1;

	if (n < 5 || memcmp(p, "%PDF-", 5) != 0)
		return 0;
	while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == '\r' || p[n - 1] == ' ' ||
			 p[n - 1] == '\t'))
		n--;
	return n >= 5 + e && memcmp(p + n - e, eof, e) == 0;
}

static int pdf_order(const struct order_check *o, void *arg)
{
	struct order_walk *w = arg;
	struct check_report *rep = w->rep;
	unsigned char *data = NULL;
	size_t len = 0;
	enum sd_result r;

	rep->orders++;
	rep->tickets += o->tickets;
	/* a cancellation for money gone back leaves the tickets admitted before */
	if (o->tickets_cancelled != (o->cancelled ? o->tickets - (o->money_back ?
								   o->tickets_admitted : 0) : 0)) {
		broken(rep, CHECK_PDFS, "order %s is %scancelled and has %lld of %lld ticket%s "
		       "cancelled", o->public_id, o->cancelled ? "" : "not ",
		       (long long)o->tickets_cancelled, (long long)o->tickets, plural(o->tickets));
		return 1;
	}
	if (o->cancelled && !o->pdf_key)	/* cancelled before its render: no PDF needed */
		return 0;
	if (o->tickets == 0 || o->tickets_without_pdf > 0 || !o->pdf_key) {
		broken(rep, CHECK_PDFS, "order %s has no stored PDF (%lld of %lld ticket%s "
		       "without pdf_key)", o->public_id, (long long)o->tickets_without_pdf,
		       (long long)o->tickets, plural(o->tickets));
		return 1;
	}
	if (o->pdf_keys != 1) {
		broken(rep, CHECK_PDFS, "order %s has tickets with %lld different PDF keys",
		       o->public_id, (long long)o->pdf_keys);
		return 1;
	}
	if (!w->blobs && (w->r = blob_open_box(w->db_path, w->blob_dir, &w->blobs)) != SD_OK)
		return 1;
	r = blob_get(w->blobs, o->pdf_key, &data, &len);
	if (r == SD_NOT_FOUND) {
		broken(rep, CHECK_PDFS, "order %s has no stored PDF (%s is missing under %s)",
		       o->public_id, o->pdf_key, w->blob_dir);
		return 1;
	}
	if (r != SD_OK) {
		/* a key that is not a valid blob key, or a file that cannot be read */
		broken(rep, CHECK_PDFS, "order %s: its PDF %s cannot be read: %s", o->public_id,
		       o->pdf_key, err_msg());
		return 1;
	}
	if (!pdf_bytes_valid(data, len)) {
		broken(rep, CHECK_PDFS, "order %s: its PDF %s is not a valid PDF (%zu bytes)",
		       o->public_id, o->pdf_key, len);
		free(data);
		return 1;
	}
	free(data);
	rep->pdfs++;
	return 0;
}

/* Every intent's email once: a standing order's tickets and each resend; a
 * cancelled order's cancellation (its tickets' emails may or may not have
 * gone before it was cancelled). */
static int email_order(const struct order_check *o, void *arg)
{
	struct order_walk *w = arg;
	struct check_report *rep = w->rep;

	if (o->emails > 1) {	/* the primary key forbids it; say so if it happens */
		broken(rep, CHECK_EMAILS, "order %s has %lld ticket email rows", o->public_id,
		       (long long)o->emails);
		return 1;
	}
	if (o->cancelled) {
		if (o->cancel_sent != !o->no_address) {
			broken(rep, CHECK_EMAILS, "order %s is cancelled and its cancellation "
			       "email is not sent", o->public_id);
			return 1;
		}
		rep->emails_sent += o->emails_sent + o->resends_sent + o->cancel_sent;
		return 0;
	}
	if (o->emails == 0 && !o->no_address && !o->address_added) {
		broken(rep, CHECK_EMAILS, "order %s has no ticket email recorded", o->public_id);
		return 1;
	}
	if (o->emails_sent != 1 && (o->emails || !(o->no_address || o->address_added))) {
		broken(rep, CHECK_EMAILS, "order %s has its ticket email claimed but never sent",
		       o->public_id);
		return 1;
	}
	if (o->resends_sent != o->resends) {
		broken(rep, CHECK_EMAILS, "order %s has %lld resend%s queued and %lld sent",
		       o->public_id, (long long)o->resends, plural(o->resends),
		       (long long)o->resends_sent);
		return 1;
	}
	rep->emails_sent += o->emails_sent + o->resends_sent;
	return 0;
}

/* ---- counters -------------------------------------------------------------- */

static int counter_event(const struct counter_check *c, void *arg)
{
	struct check_report *rep = arg;

	rep->events++;
	if (c->counted_orders != c->orders || c->counted_seats != c->seats) {
		broken(rep, CHECK_COUNTERS, "event %lld: its sales counter says %lld order%s and "
		       "%lld seat%s, its orders come to %lld and %lld", (long long)c->event_id,
		       (long long)c->counted_orders, plural(c->counted_orders),
		       (long long)c->counted_seats, plural(c->counted_seats),
		       (long long)c->orders, (long long)c->seats);
		return 1;
	}
	return 0;
}

/* The totals the pages read (event_totals) against a full count. */
static int totals_event(const struct totals_check *c, void *arg)
{
	struct check_report *rep = arg;
	const struct event_totals *k = &c->kept, *n = &c->rows;

	if (memcmp(k, n, sizeof *k) == 0)
		return 0;
	broken(rep, CHECK_COUNTERS, "event %lld: its totals say %lld orders, %lld tickets (%lld "
	       "with a PDF key, %lld PDFs), %lld emails sent; its rows come to %lld, %lld (%lld, "
	       "%lld), %lld", (long long)c->event_id, (long long)k->orders, (long long)k->tickets,
	       (long long)k->tickets_pdf, (long long)k->pdfs, (long long)k->emails_sent,
	       (long long)n->orders, (long long)n->tickets, (long long)n->tickets_pdf,
	       (long long)n->pdfs, (long long)n->emails_sent);
	return 1;
}

/* ---- the run --------------------------------------------------------------- */

/* the stream's scheduled reminders (jobkinds.h: send_reminder) */
static enum sd_result scheduled_reminders(struct db *db, int64_t *n)
{
	struct queue_counts *rows = NULL, total;
	enum sd_result r;
	int i, k = 0;

	*n = 0;
	if ((r = queue_stats(db, &rows, &k, &total)) != SD_OK)
		return r;
	for (i = 0; i < k; i++)
		if (strcmp(rows[i].kind, JOB_KIND_REMINDER) == 0)
			*n = rows[i].scheduled;
	free(rows);
	return SD_OK;
}

enum sd_result check_db(struct db *db, const char *state_dir, struct check_report *out)
{
	struct order_walk w;
	struct queue_counts qc;
	enum sd_result r;
	int64_t n = 0;
	int ok = 0;

	memset(out, 0, sizeof *out);
	memset(&w, 0, sizeof w);
	out->ok = 1;
	w.rep = out;
	w.db_path = db_path(db);
	if (blob_where_db(w.db_path))
		snprintf(w.blob_dir, sizeof w.blob_dir, "the database's blobs table");
	else if ((r = statedir_path(w.db_path, state_dir, w.blob_dir,
					sizeof w.blob_dir - 8)) != SD_OK)
		return r;
	else
		strcat(w.blob_dir, "/blobs");

	if ((r = db_integrity_check(db, &ok, out->problem, sizeof out->problem)) != SD_OK)
		goto out;
	if (!ok) {
		out->ok = 0;
		out->failed = CHECK_INTEGRITY;
		goto out;
	}
	if ((r = db_foreign_key_check(db, &ok, out->problem, sizeof out->problem)) != SD_OK)
		goto out;
	if (!ok) {
		out->ok = 0;
		out->failed = CHECK_FOREIGN_KEYS;
		goto out;
	}
	if ((r = order_check_identities(db, out->problem, sizeof out->problem)) != SD_OK ||
	    (!out->problem[0] &&
	     (r = outbox_check_job_ids(db, out->problem, sizeof out->problem)) != SD_OK))
		goto out;
	if (out->problem[0]) {
		out->ok = 0;
		out->failed = CHECK_IDENTITIES;
		goto out;
	}
	if ((r = outbox_unpublished(db, &n)) != SD_OK)
		goto out;
	if (n > 0) {
		broken(out, CHECK_OUTBOX, "the outbox holds %lld unpublished row%s", (long long)n,
		       plural(n));
		goto out;
	}
	if ((r = queue_count_by_state(db, &qc)) != SD_OK)
		goto out;
	out->scheduled = qc.scheduled;
	if (qc.ready > 0) {
		r = stream_broken(db, out, "ready", qc.ready);
		goto out;
	}
	if (qc.leased > 0) {
		r = stream_broken(db, out, "leased", qc.leased);
		goto out;
	}
	if (qc.dead > 0) {
		r = stream_broken(db, out, "dead", qc.dead);
		goto out;
	}
	/* two walks, so every PDF is judged before any email */
	if ((r = order_check_each(db, pdf_order, &w)) != SD_OK || (r = w.r) != SD_OK ||
	    !out->ok)
		goto out;
	if ((r = order_check_each(db, email_order, &w)) != SD_OK || !out->ok)
		goto out;
	if ((r = event_check_counters(db, counter_event, out)) != SD_OK || !out->ok)
		goto out;
	if ((r = event_check_totals(db, totals_event, out)) != SD_OK || !out->ok)
		goto out;
	/* settled: nothing scheduled but reminders, which wait for their day */
	if ((r = scheduled_reminders(db, &n)) != SD_OK)
		goto out;
	out->reminders = n;
	out->scheduled = qc.scheduled - n;
	if ((r = pay_check(db, qc.scheduled == n, out->problem, sizeof out->problem)) == SD_OK &&
	    out->problem[0]) {
		out->ok = 0;
		out->failed = CHECK_PAYMENTS;
		goto out;
	}
	if (r == SD_OK && (r = event_run_check(db, out->problem, sizeof out->problem)) == SD_OK &&
	    out->problem[0]) {
		out->ok = 0;
		out->failed = CHECK_EVENTS;
	}
out:
	blob_close(w.blobs);
	return r;
}

enum sd_result check_run(const char *db_path, const char *state_dir, struct check_report *out)
{
	struct db *db;
	enum sd_result r;

	memset(out, 0, sizeof *out);
	if ((r = db_open(db_path, 0, DB_SYNC_NORMAL, &db)) != SD_OK)
		return r;
	r = check_db(db, state_dir, out);
	db_close(db);
	return r;
}
