/*
 * eventcheck.c: the verdict on a whole event's runs (cancel, move) and the
 * reminders, from the database and the mail provider's messages alone.
 *
 * The checks, in the order the first broken one is named:
 *   runs       every run finished (its parent done), each order it took done
 *              or skipped, none failed, its counts its rows'; a cancelled
 *              event has no live order
 *   children   one child job per order of a run (its id the run's and the
 *              order's), never two outbox rows for one, none left in the
 *              stream; a child finished more than once (a relay's replay)
 *              is counted
 *   refunds    a cancelled order paid online has one refund at the provider
 *              for its amount, key refund-<order> (paysink's side is
 *              shopcheck.c's), one paid at the box office one at the window
 *              for its amount, an unpaid one none
 *   emails     an order of a cancel run with an address has exactly one
 *              message cancel-event-<event>-<order>, of a move run exactly
 *              one moved-<event>-<n>-<order>, to its address; none for an
 *              order the run did not take
 *   reminders  at most one reminder-<order>-<start> an order, for its
 *              event's start at the time (the current one: the soak lets
 *              every reminder come due before it cancels); with
 *              expect_reminders exactly one for each addressed order of a
 *              run's event
 *   pdfs       a moved order's tickets name the PDF of the event's last
 *              change (tickets/<order>-c<n>.pdf)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chaos.h"

#define broken verify_broken
#define EV_RUNS 64

struct erun {
	long long id, event, change_no, orders, done, refunded, at_window, emailed, failed;
	long long starts_at, event_change_no;
	int cancel, finished, event_cancelled;
	long rows, rows_done, rows_skipped;
};

struct eord {			/* one order of a run */
	long run;		/* index into runs */
	char pub[32], email[V_ADDR_MAX], payment[16], step[16], refund_via[16];
	char refund_reason[16], refund_key[96], pdf_key[128];
	long long event, amount, refund_amount;
	long long back;		/* refunded at the provider (the dashboard's, the box's) */
	int cancelled, has_refund, refund_done, mails;
	long long tickets, tickets_on_pdf;
};

struct echeck {
	struct verdict *v;
	struct erun runs[EV_RUNS];
	int n_runs;
	struct eord *o;
	long n_o, cap_o;
};

static long long num(const char *s)
{
	return s ? strtoll(s, NULL, 10) : 0;
}

static void copy(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

static int run_row(void *arg, int ncols, const char *const *vals)
{
	struct echeck *c = arg;
	struct erun *r;

	(void)ncols;
	if (c->n_runs == EV_RUNS)
		return 1;
	r = &c->runs[c->n_runs++];
	r->id = num(vals[0]);
	r->event = num(vals[1]);
	r->cancel = strcmp(vals[2], "cancel") == 0;
	r->change_no = num(vals[3]);
	r->finished = num(vals[4]) != 0;
	r->orders = num(vals[5]);
	r->done = num(vals[6]);
	r->refunded = num(vals[7]);
	r->at_window = num(vals[8]);
	r->emailed = num(vals[9]);
	r->failed = num(vals[10]);
	r->starts_at = num(vals[11]);
	r->event_cancelled = num(vals[12]) != 0;
	r->event_change_no = num(vals[13]);
	return 0;
}

static long run_index(const struct echeck *c, long long id)
{
	int i;

	for (i = 0; i < c->n_runs; i++)
		if (c->runs[i].id == id)
			return i;
	return -1;
}

static int order_row(void *arg, int ncols, const char *const *vals)
{
	struct echeck *c = arg;
	struct eord *o;

	(void)ncols;
	if (c->n_o == c->cap_o) {
		long cap = c->cap_o ? c->cap_o * 2 : 1024;
		struct eord *n = realloc(c->o, (size_t)cap * sizeof *n);

		if (!n)
			return 1;
		c->o = n;
		c->cap_o = cap;
	}
	o = &c->o[c->n_o];
	memset(o, 0, sizeof *o);
	if ((o->run = run_index(c, num(vals[0]))) < 0)
		return 0;
	c->n_o++;
	copy(o->step, sizeof o->step, vals[1]);
	copy(o->pub, sizeof o->pub, vals[2]);
	o->event = num(vals[3]);
	copy(o->email, sizeof o->email, vals[4]);
	o->cancelled = num(vals[5]) != 0;
	copy(o->payment, sizeof o->payment, vals[6]);
	o->amount = num(vals[7]);
	o->has_refund = vals[8] != NULL;
	copy(o->refund_via, sizeof o->refund_via, vals[8]);
	copy(o->refund_reason, sizeof o->refund_reason, vals[9]);
	o->refund_amount = num(vals[10]);
	copy(o->refund_key, sizeof o->refund_key, vals[11]);
	o->refund_done = num(vals[12]) != 0;
	o->tickets = num(vals[13]);
	o->tickets_on_pdf = num(vals[14]);
	o->back = num(vals[15]);
	return 0;
}

static const char SQL_RUNS[] =
	"SELECT r.id, r.event_id, r.kind, r.change_no, "
	"CASE WHEN r.finished_at IS NULL THEN 0 ELSE 1 END, r.orders, r.done, r.refunded, "
	"r.at_window, r.emailed, r.failed, e.starts_at, "
	"CASE WHEN e.cancelled_at IS NULL THEN 0 ELSE 1 END, e.change_no "
	"FROM event_runs r JOIN events e ON e.id = r.event_id ORDER BY r.id";

/* each order of each run, its refund, and its tickets on the PDF of the
 * event's last change */
static const char SQL_ORDERS_LITE[] =
	"SELECT ro.run_id, ro.step, o.public_id, o.event_id, coalesce(o.buyer_email, ''), "
	"CASE WHEN o.cancelled_at IS NULL THEN 0 ELSE 1 END, coalesce(o.payment, ''), "
	"coalesce(o.amount_minor, 0), rf.via, rf.reason, rf.amount_minor, "
	"coalesce(rf.provider_key, ''), CASE WHEN rf.done_at IS NULL THEN 0 ELSE 1 END, "
	"(SELECT count(*) FROM tickets t WHERE t.order_id = o.id), "
	"(SELECT count(*) FROM tickets t, events e WHERE t.order_id = o.id AND e.id = o.event_id "
	" AND t.pdf_key = 'tickets/' || o.public_id || '-c' || e.change_no || '.pdf'), "
	"coalesce(o.refunded_minor, 0) "
	"FROM event_run_orders ro JOIN orders o ON o.id = ro.order_id "
	"LEFT JOIN refunds rf ON rf.order_id = o.id ORDER BY ro.run_id, o.id";

static void load(struct echeck *c, struct vdb *db)
{
	char err[300];

	if (vdb_each(db, SQL_RUNS, NULL, run_row, c, err, sizeof err) != 0 ||
	    vdb_each(db, SQL_ORDERS_LITE, NULL, order_row, c, err, sizeof err) != 0)
		broken(c->v, "events: database: %s", err);
	if (c->n_runs == EV_RUNS)
		broken(c->v, "events: more than %d runs; the verdict reads that many", EV_RUNS);
}

static int text_row(void *arg, int ncols, const char *const *vals)
{
	snprintf(arg, 64, "%s", ncols > 0 && vals[0] ? vals[0] : "");
	return 1;
}

static void parent_id(const struct erun *r, char *buf, size_t size)
{
	if (r->cancel)
		snprintf(buf, size, "outbox:event-%lld:cancel", r->event);
	else
		snprintf(buf, size, "outbox:event-%lld:move-%lld", r->event, r->change_no);
}

/* ---- runs ------------------------------------------------------------------ */

static void check_runs(struct echeck *c, struct vdb *db)
{
	struct verdict *v = c->v;
	char err[300], live[64] = "";
	long i;
	int k;

	for (i = 0; i < c->n_o; i++) {
		struct eord *o = &c->o[i];
		struct erun *r = &c->runs[o->run];

		r->rows++;
		r->rows_done += strcmp(o->step, "done") == 0;
		r->rows_skipped += strcmp(o->step, "skipped") == 0;
		if (strcmp(o->step, "done") != 0 && strcmp(o->step, "skipped") != 0)
			broken(v, "runs: order %s of run %lld is at step %s, not done", o->pub, r->id,
			       o->step);
		if (r->cancel && strcmp(o->step, "done") == 0 && !o->cancelled)
			broken(v, "runs: order %s is done in event %lld's cancel and not cancelled",
			       o->pub, r->event);
	}
	for (k = 0; k < c->n_runs; k++) {
		struct erun *r = &c->runs[k];

		v->event_runs++;
		if (!r->finished)
			broken(v, "runs: run %lld (event %lld, %s) never finished", r->id, r->event,
			       r->cancel ? "cancel" : "move");
		if (r->failed)
			broken(v, "runs: run %lld counts %lld failed orders", r->id, r->failed);
		if (r->orders != r->rows || r->done != r->rows_done + r->rows_skipped)
			broken(v, "runs: run %lld counts %lld orders, %lld done; its rows: %ld, %ld "
			       "done, %ld skipped", r->id, r->orders, r->done, r->rows,
			       r->rows_done, r->rows_skipped);
		if (r->cancel && !r->event_cancelled)
			broken(v, "runs: event %lld has a cancel run and is not cancelled", r->event);
		if (r->cancel)
			v->event_orders_cancelled += r->rows_done;
		else
			v->event_orders_moved += r->rows_done;
	}
	/* a cancelled event whose run finished keeps no live order */
	if (vdb_each(db, "SELECT o.public_id FROM orders o JOIN events e ON e.id = o.event_id "
		     "WHERE e.cancelled_at IS NOT NULL AND o.cancelled_at IS NULL AND EXISTS "
		     "(SELECT 1 FROM event_runs r WHERE r.event_id = e.id AND r.kind = 'cancel' "
		     "AND r.finished_at IS NOT NULL) LIMIT 1", NULL, text_row, live, err,
		     sizeof err) != 0)
		broken(v, "events: database: %s", err);
	else if (live[0])
		broken(v, "runs: order %s of a cancelled event is live after its run", live);
	/* every email a run or a reminder claimed went and was marked sent */
	live[0] = '\0';
	if (vdb_each(db, "SELECT o.public_id || ' ' || s.kind FROM email_sends s JOIN orders o ON "
		     "o.id = s.order_id WHERE (s.kind = 'cancel-event' OR s.kind LIKE 'moved-%' OR "
		     "s.kind LIKE 'reminder-%') AND s.sent_at IS NULL LIMIT 1", NULL, text_row, live,
		     err, sizeof err) != 0)
		broken(v, "events: database: %s", err);
	else if (live[0])
		broken(v, "emails: %s is claimed and not marked sent", live);
}

/* ---- children -------------------------------------------------------------- */

struct jobcount {
	struct echeck *c;
	int outbox;		/* counting outbox rows (1) or finished ones (0) */
};

static int child_row(void *arg, int ncols, const char *const *vals)
{
	struct jobcount *j = arg;
	struct echeck *c = j->c;
	long long n = num(vals[1]);
	char parent[96];
	int k;

	(void)ncols;
	for (k = 0; k < c->n_runs; k++) {
		struct erun *r = &c->runs[k];
		size_t len;

		parent_id(r, parent, sizeof parent);
		len = strlen(parent);
		if (strncmp(vals[0], parent, len) != 0 || vals[0][len] != ':')
			continue;
		if (j->outbox) {
			c->v->event_children++;
			if (n > 1) {
				c->v->event_children_twice += n - 1;
				broken(c->v, "children: job %s was queued %lld times", vals[0], n);
			}
		} else if (n > 1) {
			c->v->event_children_replayed += n - 1;
		}
		return 0;
	}
	return 0;
}

static void check_children(struct echeck *c, struct vdb *db)
{
	static const char outbox[] =
		"SELECT job_id, count(*) FROM outbox WHERE kind IN ('cancel_event_order', "
		"'move_event_order') GROUP BY job_id";
	static const char finished[] =
		"SELECT job_id, count(*) FROM done_jobs WHERE kind IN ('cancel_event_order', "
		"'move_event_order') GROUP BY job_id";
	struct jobcount jo = { c, 1 }, jd = { c, 0 };
	long long want = 0;
	char err[300];
	int k;

	if (vdb_each(db, outbox, NULL, child_row, &jo, err, sizeof err) != 0 ||
	    vdb_each(db, finished, NULL, child_row, &jd, err, sizeof err) != 0) {
		broken(c->v, "events: database: %s", err);
		return;
	}
	for (k = 0; k < c->n_runs; k++)
		want += c->runs[k].rows;
	if (c->v->event_children != want)
		broken(c->v, "children: the runs took %lld orders and queued %ld child jobs", want,
		       c->v->event_children);
}

/* ---- refunds --------------------------------------------------------------- */

/* an online order's refund is of all of it, or, when a part went back in
 * the provider's dashboard first, of the rest (shopcheck.c holds its amount
 * to paysink's record) */
static int refund_all(const struct eord *o)
{
	return o->refund_amount == o->amount ||
	       (o->back > 0 && o->refund_amount > 0 && o->refund_amount < o->amount);
}

static void check_refunds(struct echeck *c)
{
	struct verdict *v = c->v;
	char key[64];
	long i;

	for (i = 0; i < c->n_o; i++) {
		struct eord *o = &c->o[i];
		int online = strcmp(o->payment, "online") == 0;
		int window = !online && o->payment[0] && o->amount > 0;

		if (!c->runs[o->run].cancel || strcmp(o->step, "done") != 0)
			continue;
		snprintf(key, sizeof key, "refund-%s", o->pub);
		if (online && (!o->has_refund || strcmp(o->refund_via, "provider") != 0 ||
			       strcmp(o->refund_key, key) != 0 || !refund_all(o) ||
			       !o->refund_done))
			broken(v, "refunds: order %s paid %lld online; its refund: %s %lld key '%s' "
			       "%s", o->pub, o->amount, o->has_refund ? o->refund_via : "none",
			       o->refund_amount, o->refund_key, o->refund_done ? "done" : "not done");
		else if (window && (!o->has_refund || strcmp(o->refund_via, "window") != 0 ||
				    o->refund_amount != o->amount))
			broken(v, "refunds: order %s paid %lld at the box office; its refund: %s %lld",
			       o->pub, o->amount, o->has_refund ? o->refund_via : "none",
			       o->refund_amount);
		else if (!online && !window && o->has_refund)
			broken(v, "refunds: order %s paid nothing and has a refund of %lld", o->pub,
			       o->refund_amount);
		else if (o->has_refund && strcmp(o->refund_reason, "cancelled") != 0)
			broken(v, "refunds: order %s's refund says '%s', not cancelled", o->pub,
			       o->refund_reason);
		v->event_refunds_provider += online;
		v->event_refunds_window += window;
	}
}

/* ---- emails ---------------------------------------------------------------- */

/* the order of a run (by kind, event, change) named pub, or NULL */
static struct eord *run_order(struct echeck *c, int cancel, long long event, long long change,
			      const char *pub)
{
	long i;

	for (i = 0; i < c->n_o; i++) {
		struct eord *o = &c->o[i];
		struct erun *r = &c->runs[o->run];

		if (r->cancel == cancel && r->event == event && (cancel || r->change_no == change) &&
		    strcmp(o->pub, pub) == 0)
			return o;
	}
	return NULL;
}

/* an order of any run, by its public id: its address and event */
static struct eord *any_order(struct echeck *c, const char *pub)
{
	long i;

	for (i = 0; i < c->n_o; i++)
		if (strcmp(c->o[i].pub, pub) == 0)
			return &c->o[i];
	return NULL;
}

static void check_one_message(struct echeck *c, const char *key, const char *to)
{
	struct verdict *v = c->v;
	struct eord *o = NULL;
	long long event = 0, change = 0;
	char pub[32] = "";
	const char *p;
	int n = 0;

	if (strncmp(key, "cancel-event-", 13) == 0 &&
	    sscanf(key + 13, "%lld-%31s%n", &event, pub, &n) == 2 && !key[13 + n]) {
		o = run_order(c, 1, event, 0, pub);
		v->event_cancel_emails++;
	} else if (strncmp(key, "moved-", 6) == 0 &&
		   sscanf(key + 6, "%lld-%lld-%31s%n", &event, &change, pub, &n) == 3 &&
		   !key[6 + n]) {
		o = run_order(c, 0, event, change, pub);
		v->event_moved_emails++;
	} else if (strncmp(key, "reminder-", 9) == 0 && (p = strrchr(key + 9, '-')) &&
		   (size_t)(p - key - 9) < sizeof pub) {
		snprintf(pub, sizeof pub, "%.*s", (int)(p - key - 9), key + 9);
		o = any_order(c, pub);
		v->event_reminders++;
		if (o && num(p + 1) != c->runs[o->run].starts_at)
			broken(v, "reminders: %s is for a start of %s the event does not have "
			       "(%lld)", key, pub, c->runs[o->run].starts_at);
		else if (!o && v->expect_reminders)
			broken(v, "reminders: %s names no order of an event's run", key);
		if (!o)
			return;
	}
	if (!o) {
		v->duplicates++;
		broken(v, "emails: %s names no order the runs took", key);
		return;
	}
	if (strcasecmp(to, o->email) != 0)
		broken(v, "emails: %s went to %s, the order's address is %s", key, to, o->email);
	if (strncmp(key, "reminder-", 9) == 0)
		o->mails += 0x10000;	/* counted apart: an order has one of each */
	else
		o->mails++;
}

static void check_emails(struct echeck *c, char *const *keys, char *const *tos, long n)
{
	struct verdict *v = c->v;
	long i;

	for (i = 0; i < n; i++)
		check_one_message(c, keys[i], tos[i]);
	for (i = 0; i < c->n_o; i++) {
		struct eord *o = &c->o[i];
		const struct erun *r = &c->runs[o->run];
		int own = o->mails & 0xffff, reminders = 0;
		int want = o->email[0] && strcmp(o->step, "done") == 0;
		long j;

		/* an order is in a move run and a cancel run: its reminders are
		 * counted on its first row */
		for (j = 0; j < c->n_o; j++) {
			if (strcmp(c->o[j].pub, o->pub) != 0)
				continue;
			if (j == i)
				reminders = c->o[j].mails >> 16;
			break;
		}
		if (own != want) {
			if (own > want)
				v->duplicates += own - want;
			else
				v->lost += want - own;
			broken(v, "emails: order %s has %d %s emails for event %lld (change %lld), "
			       "owes %d", o->pub, own, r->cancel ? "cancel-event" : "moved", r->event,
			       r->change_no, want);
		}
		if (j != i)
			continue;
		if (reminders > 1 || (v->expect_reminders && o->email[0] && reminders != 1)) {
			if (reminders > 1)
				v->duplicates += reminders - 1;
			else
				v->lost++;
			broken(v, "reminders: order %s has %d reminders", o->pub, reminders);
		}
	}
}

/* ---- PDFs ------------------------------------------------------------------ */

static void check_pdfs(struct echeck *c)
{
	long i;

	for (i = 0; i < c->n_o; i++) {
		struct eord *o = &c->o[i];
		const struct erun *r = &c->runs[o->run];

		if (r->cancel || strcmp(o->step, "done") != 0 ||
		    r->change_no != r->event_change_no)
			continue;
		c->v->event_pdfs += o->tickets_on_pdf;
		if (o->tickets_on_pdf != o->tickets)
			broken(c->v, "pdfs: order %s has %lld tickets, %lld on the PDF of change "
			       "%lld", o->pub, o->tickets, o->tickets_on_pdf, r->change_no);
	}
}

void event_verify(struct verdict *v, struct vdb *db, char *const *keys, char *const *tos,
		  long n)
{
	struct echeck c;

	memset(&c, 0, sizeof c);
	c.v = v;
	load(&c, db);
	check_runs(&c, db);
	check_children(&c, db);
	check_refunds(&c);
	check_emails(&c, keys, tos, n);
	check_pdfs(&c);
	free(c.o);
}

void event_print_figures(const struct verdict *v)
{
	if (!v->event_runs)
		return;
	printf("event_runs %ld\n", v->event_runs);
	printf("event_orders_cancelled %ld\n", v->event_orders_cancelled);
	printf("event_orders_moved %ld\n", v->event_orders_moved);
	printf("event_child_jobs %ld\n", v->event_children);
	printf("event_child_jobs_queued_twice %ld\n", v->event_children_twice);
	printf("event_child_jobs_replayed %ld\n", v->event_children_replayed);
	printf("event_refunds_provider %ld\n", v->event_refunds_provider);
	printf("event_refunds_window %ld\n", v->event_refunds_window);
	printf("event_cancel_emails %ld\n", v->event_cancel_emails);
	printf("event_moved_emails %ld\n", v->event_moved_emails);
	printf("event_reminders %ld\n", v->event_reminders);
	printf("event_pdfs_of_last_change %ld\n", v->event_pdfs);
	printf("reminders_waiting %ld\n", v->reminders_waiting);
}
