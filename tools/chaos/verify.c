/*
 * verify.c: the soak's verdict, reached without the appliance.
 *
 * It opens the database read-only with its own SQLite or libpq (vdb.c),
 * PostgreSQL's answers come from the server itself; it reads the provider's
 * maildir and counts file, the soak's own log of what it did (actions.log,
 * when given), and runs qpdf on every stored PDF.  Nothing here calls
 * stagedoor or trusts a counter the appliance keeps about itself: the sales
 * counters are checked against the orders they should add up, and "one
 * email per intent" is counted from the messages the provider stored.
 *
 * An intent is one email an order owes: its tickets (Message-ID
 * <tickets-ORDER@...>), its nth resend (<tickets-ORDER-rN@...>, N up to
 * orders.resends) and its cancellation (<cancel-ORDER@...>).  A standing
 * order owes its tickets and every resend; a cancelled one its cancellation,
 * and whatever it was marked sent before (email_sends.sent_at): the rest
 * may have gone or not.
 *
 * The checks, in the order the first broken one is named:
 *   integrity     PRAGMA integrity_check says ok (SQLite)
 *   orders        as many orders as were placed (when known)
 *   pdfs          every ticket of a standing order has a pdf_key (a
 *                 cancelled order has all or none); one key per order; the
 *                 file is under <db dir>/blobs (PostgreSQL: in the blobs
 *                 table) and qpdf --check accepts it
 *   messages      at most one message per intent, none for an intent never
 *                 made (a resend past orders.resends, a cancellation of a
 *                 standing order) or for no order of ours; the provider's
 *                 own count per key agrees with the files, and its total
 *   counters      each event's sales_counters row = its live (not
 *                 cancelled) orders' count and seats
 *   tickets       a standing order's tickets all live, a cancelled one's all
 *                 cancelled and none admitted; live tickets = live seats per
 *                 event, their seat numbers distinct and within 1..capacity;
 *                 one count job per order, one cancel job per cancellation
 *   address       every message goes to an address its order has had; with
 *                 the log, a resend or cancellation asked after a change of
 *                 address goes to the new one (the log's order is the
 *                 soak's own: one change at a time per order)
 *   changes       (the log) every acknowledged order is there as placed;
 *                 every acknowledged resend is one of the order's (and the
 *                 order has no more than the soak asked for); an order is
 *                 cancelled exactly when the soak cancelled it; its address is
 *                 the last one set; the live tickets of each event are the
 *                 seats the soak sold minus those it cancelled, and an event
 *                 sold past its capacity sold the difference again
 *   stream        no entry left in the stream (ready, scheduled or leased)
 *                 but reminders waiting for their day and, with the shop, its
 *                 looks again later at what has ended (CHAOS_SHOP_LATER,
 *                 counted apart), no dead job, no unpublished outbox row
 *   lost          every intent owed has its message, its email_sends row
 *                 sent; every order rendered (if standing) and counted
 *                 (processed_jobs holds its update_sales_counter job), every
 *                 cancellation counted back (its cancel_order job)
 *   shop          (with paysink's record, v->record_path) shopcheck.c's
 *                 checks of the holds, payments, refunds and webhooks, and
 *                 backcheck.c's of the money after the sale
 *   codes         (with a door) every code in the emails' PDFs scanned at a
 *                 door of the verdict's own: none admits another order's
 *                 seat, or a seat of an order cancelled since
 *
 * The shop's orders (payment 'online') are not the soak's: the orders
 * placed and the log's seats are held to the box office's orders alone,
 * and a refund email (<refunded-PAYMENT@...>) or a failed payment's
 * (<payment-failed-HOLD@...>) is shopcheck.c's to judge.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "chaos.h"

/* Name the first broken check; later ones only add to the figures
 * (verify_broken: shopcheck.c names its own the same way). */
#define broken(...) verify_broken(__VA_ARGS__)

void verify_broken(struct verdict *v, const char *fmt, ...)
{
	va_list ap;

	if (v->broken[0])
		return;
	va_start(ap, fmt);
	vsnprintf(v->broken, sizeof v->broken, fmt, ap);
	va_end(ap);
}

/* One integer from sql (no parameters); -1 on error (named in v). */
static int int_row(void *arg, int ncols, const char *const *vals)
{
	*(long *)arg = ncols > 0 && vals[0] ? strtol(vals[0], NULL, 10) : -1;
	return 1;
}

static long one_int(struct verdict *v, struct vdb *db, const char *sql)
{
	char err[300];
	long n = -2;

	if (vdb_each(db, sql, NULL, int_row, &n, err, sizeof err) != 0 || n == -2) {
		broken(v, "database: %s: %s", sql, n == -2 ? "no row" : err);
		return -1;
	}
	return n;
}

/* ======================== the database ================================== */

static int text_row(void *arg, int ncols, const char *const *vals)
{
	snprintf(arg, 256, "%s", ncols > 0 && vals[0] ? vals[0] : "(null)");
	return 1;
}

static void check_integrity(struct verdict *v, struct vdb *db)
{
	char res[256] = "", err[300];

	if (vdb_pg(db))
		return;	/* the server's own business; its answers are checked below */
	if (vdb_each(db, "PRAGMA integrity_check", NULL, text_row, res, err, sizeof err) != 0)
		broken(v, "integrity: PRAGMA integrity_check: %s", err);
	else if (strcmp(res, "ok") != 0)
		broken(v, "integrity: PRAGMA integrity_check: %s", res);
}

/* The directory that holds the database file. */
static void db_dir(const char *db_path, char *buf, size_t size)
{
	const char *slash = strrchr(db_path, '/');

	if (!slash)
		snprintf(buf, size, ".");
	else if (slash == db_path)
		snprintf(buf, size, "/");
	else
		snprintf(buf, size, "%.*s", (int)(slash - db_path), db_path);
}

struct pdf_walk {
	struct verdict *v;
	struct vdb *db;
	char dir[CHAOS_PATH_MAX];
	char tmp[CHAOS_PATH_MAX + 32];	/* PostgreSQL: each PDF written here for qpdf */
};

static int pdf_row(void *arg, int ncols, const char *const *vals)
{
	struct pdf_walk *w = arg;
	struct verdict *v = w->v;
	long long order = strtoll(vals[0], NULL, 10);
	const char *key = vals[1];
	long keys = strtol(vals[2], NULL, 10), with = strtol(vals[3], NULL, 10);
	long all = strtol(vals[4], NULL, 10);
	int cancelled = vals[5][0] == '1';
	char path[CHAOS_PATH_MAX * 2], err[300];
	struct stat sb;
	int q;

	(void)ncols;
	if (cancelled && with == 0)
		return 0;	/* cancelled before its render: no PDF, none needed */
	if (with != all) {
		broken(v, "pdfs: order %lld: %ld of %ld tickets have no PDF", order, all - with, all);
		return 0;
	}
	if (keys != 1) {
		broken(v, "pdfs: order %lld: its tickets name %ld different PDFs", order, keys);
		return 0;
	}
	if (key[0] == '/' || strstr(key, "..")) {
		broken(v, "pdfs: order %lld: pdf_key '%s' leaves the store", order, key);
		return 0;
	}
	if (vdb_pg(w->db)) {
		snprintf(path, sizeof path, "%s", w->tmp);
		if (vdb_blob_to_file(w->db, key, path, err, sizeof err) != 0) {
			broken(v, "pdfs: order %lld: %s", order, err);
			return 0;
		}
	} else {
		snprintf(path, sizeof path, "%s/blobs/%s", w->dir, key);
		errno = 0;
		if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
			broken(v, "pdfs: order %lld: %s: %s", order, path,
			       errno ? strerror(errno) : "empty");
			return 0;
		}
	}
	{
		const char *argv[] = { "/usr/bin/qpdf", "--check", path, NULL };

		q = proc_run(argv, NULL, 0, 0);
	}
	if (q != 0)
		broken(v, "pdfs: order %lld: qpdf --check %s (%s): exit %d", order, path, key, q);
	else
		v->pdfs_checked++;
	return 0;
}

static void check_pdfs(struct verdict *v, struct vdb *db)
{
	static const char sql[] =
		"SELECT t.order_id, min(t.pdf_key), count(DISTINCT t.pdf_key), count(t.pdf_key), "
		"count(*), max(CASE WHEN o.cancelled_at IS NULL THEN 0 ELSE 1 END) "
		"FROM tickets t JOIN orders o ON o.id = t.order_id GROUP BY t.order_id "
		"ORDER BY t.order_id";
	struct pdf_walk w = { v, db, "", "" };
	char err[300];

	db_dir(v->db_path, w.dir, sizeof w.dir);
	snprintf(w.tmp, sizeof w.tmp, "%s/verify-pdf.tmp", soak.dir[0] ? soak.dir : "/tmp");
	if (vdb_each(db, sql, NULL, pdf_row, &w, err, sizeof err) != 0)
		broken(v, "database: %s", err);
	if (vdb_pg(db))
		unlink(w.tmp);
}

/* A lost order's trail, for whoever reads a failed soak: its outbox rows,
 * each one's job in the stream, done or dead, and its email_sends row. */
static int trace_row(void *arg, int ncols, const char *const *vals)
{
	char line[900];
	size_t n = 0;
	int i;

	n += (size_t)snprintf(line, sizeof line, "chaos: trace: %s:", (const char *)arg);
	for (i = 0; i < ncols && n < sizeof line; i++)
		n += (size_t)snprintf(line + n, sizeof line - n, " %s", vals[i] ? vals[i] : "NULL");
	fprintf(stderr, "%s\n", line);
	return 0;
}

/* The job id of an outbox row ob: its job_id (schema 11 on), or the
 * "outbox:<row id>" of the boxes made before, which have no such column. */
#define JOB_NEW "ob.job_id"
#define JOB_OLD "'outbox:' || ob.id"
static int legacy_jobs;		/* the database predates outbox.job_id */
static int has_payment;		/* orders.payment is there (schema 13 on) */
static int has_event_runs;		/* event_runs is there (schema 15 on) */

static void job_ids_detect(struct vdb *db)
{
	char err[300];

	legacy_jobs = vdb_each(db, "SELECT job_id FROM outbox WHERE 1 = 0", NULL, NULL, NULL, err,
			       sizeof err) != 0;
}

static void trace_order(struct vdb *db, long long id)
{
#define TRACE_OUTBOX(JOB, ORDER_OF_PAYLOAD, P)                                                 \
	"SELECT " JOB ", kind, published_at FROM outbox ob WHERE " ORDER_OF_PAYLOAD " = " P     \
	" ORDER BY id"
#define TRACE_JOBS(JOB, ORDER_OF_PAYLOAD, P)                                                   \
	"SELECT 'stream', j.id, j.job_id, j.kind, j.deliveries, j.visible_at, "                \
	"CAST(j.lease_token AS TEXT) "                                                         \
	"FROM stream j JOIN outbox ob ON j.job_id = " JOB " WHERE "                            \
	ORDER_OF_PAYLOAD " = " P " UNION ALL "                                                  \
	"SELECT 'done', j.id, j.job_id, j.kind, j.deliveries, j.finished_at, j.worker "         \
	"FROM done_jobs j JOIN outbox ob ON j.job_id = " JOB " WHERE "                         \
	ORDER_OF_PAYLOAD " = " P " UNION ALL "                                                  \
	"SELECT 'dead', j.id, j.job_id, j.kind, j.deliveries, CAST(j.attempts AS BIGINT), "     \
	"j.last_error "                                                                        \
	"FROM dead_jobs j JOIN outbox ob ON j.job_id = " JOB " WHERE "                         \
	ORDER_OF_PAYLOAD " = " P
#define LITE_ORDER "json_extract(ob.payload, '$.order_id')"
#define LITE_P "CAST(?1 AS INTEGER)"
#define PG_ORDER "(ob.payload::jsonb ->> 'order_id')::bigint"
#define PG_P "$1::bigint"
	static const char *const lite[2][3] = {
		{ TRACE_OUTBOX(JOB_NEW, LITE_ORDER, LITE_P), TRACE_JOBS(JOB_NEW, LITE_ORDER, LITE_P),
		  "SELECT kind, claimed_at, sent_at FROM email_sends WHERE order_id = ?1" },
		{ TRACE_OUTBOX(JOB_OLD, LITE_ORDER, LITE_P), TRACE_JOBS(JOB_OLD, LITE_ORDER, LITE_P),
		  "SELECT kind, claimed_at, sent_at FROM email_sends WHERE order_id = ?1" },
	};
	static const char *const pg[2][3] = {
		{ TRACE_OUTBOX(JOB_NEW, PG_ORDER, PG_P), TRACE_JOBS(JOB_NEW, PG_ORDER, PG_P),
		  "SELECT kind, claimed_at, sent_at FROM email_sends WHERE order_id = $1::bigint" },
		{ TRACE_OUTBOX(JOB_OLD, PG_ORDER, PG_P), TRACE_JOBS(JOB_OLD, PG_ORDER, PG_P),
		  "SELECT kind, claimed_at, sent_at FROM email_sends WHERE order_id = $1::bigint" },
	};
	static const char *const what[] = { "outbox", "job", "email_sends" };
	const char *const *sql = vdb_pg(db) ? pg[legacy_jobs] : lite[legacy_jobs];
	char param[24], err[300];
	size_t i;

	snprintf(param, sizeof param, "%lld", id);
	fprintf(stderr, "chaos: trace: order %lld\n", id);
	for (i = 0; i < 3; i++)
		if (vdb_each(db, sql[i], param, trace_row, (void *)what[i], err, sizeof err) != 0)
			fprintf(stderr, "chaos: trace: %s: %s\n", what[i], err);
}

/* ======================== what the verdict gathers ====================== */


#define V_KEY_MAX 96

/* A resend the soak was told was made: the address in force when it was
 * asked is the order's log_addrs[from]; it may go to that one or to one set
 * after it (the address is read when the email goes), never to an older one. */
struct vreq {
	long long n;
	int from;
};

/* One order: its rows, its messages, and what the log says of it. */
struct vord {
	int exists;
	char pub[24];
	long long event, seats, resends;
	int cancelled;
	int by_event;			/* cancelled with its event (an event run's
					 * child): eventcheck.c judges its email */
	int online;			/* the shop made it (payment 'online') */
	char email[V_ADDR_MAX];		/* its address now */
	long tickets, t_cancelled, t_admitted;
	/* email_sends sent, by intent; resends 1..resends */
	int sent_tickets, sent_cancel;
	unsigned char *sent_r;
	/* messages at the provider, by intent */
	long m_tickets, m_cancel, *m_r;
	/* its jobs: outbox rows, and of those done (processed_jobs) */
	long count_jobs, count_done, cancel_jobs, cancel_done;
	long changes_resend;		/* order_changes rows of kind resend */
	/* every address it has had: the database's (order_changes keeps the
	 * one before each change), or the log's */
	char (*addrs)[V_ADDR_MAX];
	int n_addrs;
	/* the log */
	int placed;
	long log_event, log_seats;
	char cur[V_ADDR_MAX];		/* in force, as the log is read */
	char (*log_addrs)[V_ADDR_MAX];
	int n_log_addrs;
	struct vreq *rq;		/* acknowledged resends */
	int n_rq;
	long unknown;			/* resend attempts with no known outcome */
	int cancel_logged;
	int cancel_from;		/* as vreq.from, for its cancellation */
};

struct vmsg {
	char key[V_KEY_MAX];
	char subject[24];		/* the key's order: a row id (keys made before
					 * schema 11) or a public id */
	char pub[24];			/* the order its text names, "" none */
	long long order;		/* that order's id; 0: not in the database */
	enum intent kind;		/* INTENT_KINDS: no intent of ours */
	long long n;			/* a resend's n */
	char to[V_ADDR_MAX];
	char *path;			/* its file */
};

/* An event: its capacity, live tickets, seats resold, and the log's seats. */
struct vevent {
	long long id, capacity, live;
	long long resold;		/* tickets on a seat a cancelled one held before */
	long long sold_logged, cancelled_logged;
};

struct vstate {
	struct vord *ord;		/* by order id, 0..max_id */
	long long max_id;
	struct vord **by_pub;		/* the orders, by public id */
	long n_by;
	struct vmsg *msg;
	long n_msg, cap_msg;
	struct vevent *ev;
	long n_ev;
	long long first_lost;
};

static struct vord *vord_of(struct vstate *s, long long id)
{
	return id >= 1 && id <= s->max_id && s->ord[id].exists ? &s->ord[id] : NULL;
}

static struct vevent *vevent_of(struct vstate *s, long long id)
{
	long i;

	for (i = 0; i < s->n_ev; i++)
		if (s->ev[i].id == id)
			return &s->ev[i];
	return NULL;
}

static int addr_add(char (**list)[V_ADDR_MAX], int *n, const char *addr)
{
	char (*l)[V_ADDR_MAX];
	int i;

	for (i = 0; i < *n; i++)
		if (strcasecmp((*list)[i], addr) == 0)
			return 0;
	if (!(l = realloc(*list, (size_t)(*n + 1) * sizeof *l)))
		return -1;
	snprintf(l[*n], V_ADDR_MAX, "%s", addr);
	*list = l;
	(*n)++;
	return 0;
}

static int addr_in(char (*list)[V_ADDR_MAX], int n, const char *addr)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcasecmp(list[i], addr) == 0)
			return 1;
	return 0;
}

static int is_true(const char *v)
{
	/* SQLite says 1 and 0, PostgreSQL t and f */
	return v && (v[0] == '1' || v[0] == 't');
}

/* ======================== the database, order by order ================== */

static int order_row(void *arg, int ncols, const char *const *vals)
{
	struct vstate *s = arg;
	long long id = strtoll(vals[0], NULL, 10);
	struct vord *o;

	if (id < 1 || id > s->max_id)
		return 0;
	o = &s->ord[id];
	o->exists = 1;
	snprintf(o->pub, sizeof o->pub, "%s", vals[1]);
	o->event = strtoll(vals[2], NULL, 10);
	o->seats = strtoll(vals[3], NULL, 10);
	o->cancelled = is_true(vals[4]);
	o->resends = strtoll(vals[5], NULL, 10);
	snprintf(o->email, sizeof o->email, "%s", vals[6] ? vals[6] : "");
	o->tickets = strtol(vals[7], NULL, 10);
	o->t_cancelled = strtol(vals[8], NULL, 10);
	o->t_admitted = strtol(vals[9], NULL, 10);
	o->online = vals[10] && vals[10][0] == '1';
	o->by_event = ncols > 11 && vals[11] && vals[11][0] == '1';
	if (o->resends < 0 || o->resends > 100000)
		o->resends = 0;
	o->sent_r = calloc((size_t)o->resends + 1, 1);
	o->m_r = calloc((size_t)o->resends + 1, sizeof *o->m_r);
	if (!o->sent_r || !o->m_r || addr_add(&o->addrs, &o->n_addrs, o->email) != 0)
		return 1;
	return 0;
}

struct row_walk {
	struct verdict *v;
	struct vstate *s;
};

static int send_row(void *arg, int ncols, const char *const *vals)
{
	struct row_walk *w = arg;
	struct vord *o = vord_of(w->s, strtoll(vals[0], NULL, 10));
	const char *kind = vals[1];
	int sent = is_true(vals[2]);
	long long n;
	char *end;

	(void)ncols;
	if (!o) {
		broken(w->v, "messages: email_sends names order %s, which does not exist", vals[0]);
		return 0;
	}
	if (strcmp(kind, "tickets") == 0) {
		o->sent_tickets = sent;
	} else if (strcmp(kind, "cancel") == 0) {
		o->sent_cancel = sent;
		if (!o->cancelled)
			broken(w->v, "messages: order %s is not cancelled and has a cancellation "
			       "email row", o->pub);
	} else if (strncmp(kind, "tickets-r", 9) == 0 &&
		   (n = strtoll(kind + 9, &end, 10)) >= 1 && !*end && n <= o->resends) {
		o->sent_r[n] = (unsigned char)sent;
	} else if (has_event_runs && (strcmp(kind, "cancel-event") == 0 ||
				      strncmp(kind, "moved-", 6) == 0 ||
				      strncmp(kind, "reminder-", 9) == 0)) {
		;	/* an event's cancel, move or reminder: eventcheck.c's */
	} else {
		broken(w->v, "messages: order %s has an email_sends row '%s' for no intent it made "
		       "(%lld resends)", o->pub, kind, o->resends);
	}
	return 0;
}

static int job_row(void *arg, int ncols, const char *const *vals)
{
	struct row_walk *w = arg;
	struct vord *o = vals[0] ? vord_of(w->s, strtoll(vals[0], NULL, 10)) : NULL;
	long rows = strtol(vals[2], NULL, 10), done = strtol(vals[3], NULL, 10);

	(void)ncols;
	if (!o)
		return 0;	/* the outbox's other jobs */
	if (strcmp(vals[1], "update_sales_counter") == 0) {
		o->count_jobs = rows;
		o->count_done = done;
	} else {
		o->cancel_jobs = rows;
		o->cancel_done = done;
	}
	return 0;
}

static int change_row(void *arg, int ncols, const char *const *vals)
{
	struct row_walk *w = arg;
	struct vord *o = vord_of(w->s, strtoll(vals[0], NULL, 10));

	(void)ncols;
	if (!o)
		return 0;
	if (strcmp(vals[1], "email") == 0 && vals[2] && vals[2][0])
		addr_add(&o->addrs, &o->n_addrs, vals[2]);	/* the address before it */
	else if (strcmp(vals[1], "resend") == 0)
		o->changes_resend++;
	return 0;
}

static int event_row(void *arg, int ncols, const char *const *vals)
{
	struct vstate *s = arg;
	struct vevent *e = &s->ev[s->n_ev];

	(void)ncols;
	if (s->n_ev >= 1024)
		return 1;
	memset(e, 0, sizeof *e);
	e->id = strtoll(vals[0], NULL, 10);
	e->capacity = strtoll(vals[1], NULL, 10);
	s->n_ev++;
	return 0;
}

static void load(struct verdict *v, struct vdb *db, struct vstate *s)
{
#define ORDERS_SQL(ONLINE, BY_EVENT)                                                           \
	"SELECT o.id, o.public_id, o.event_id, o.seats, o.cancelled_at IS NOT NULL, "           \
	"o.resends, o.buyer_email, "                                                           \
	"(SELECT count(*) FROM tickets t WHERE t.order_id = o.id), "                            \
	"(SELECT count(*) FROM tickets t WHERE t.order_id = o.id AND t.cancelled_at IS NOT NULL), " \
	"(SELECT count(*) FROM tickets t WHERE t.order_id = o.id AND t.scanned_at IS NOT NULL), " \
	ONLINE BY_EVENT " FROM orders o ORDER BY o.id"
#define ONLINE_SQL "CASE WHEN o.payment = 'online' THEN 1 ELSE 0 END"
	/* the shop's orders (payment 'online'), from schema 13 on; those an
	 * event's cancel run cancelled, from schema 15 on */
	static const char *const orders[3] = {
		ORDERS_SQL("0", ""), ORDERS_SQL(ONLINE_SQL, ""),
		ORDERS_SQL(ONLINE_SQL, ", CASE WHEN EXISTS (SELECT 1 FROM event_run_orders ro "
			   "JOIN event_runs r ON r.id = ro.run_id WHERE ro.order_id = o.id AND "
			   "r.kind = 'cancel' AND ro.step <> 'skipped') THEN 1 ELSE 0 END")
	};
	static const char sends[] =
		"SELECT order_id, kind, sent_at IS NOT NULL FROM email_sends ORDER BY order_id, kind";
	/* an order's count and cancel jobs, and which of them are done */
#define JOBS_SQL(JOB, ORDER_OF_PAYLOAD)                                                        \
	"SELECT " ORDER_OF_PAYLOAD ", ob.kind, count(*), count(p.job_id) FROM outbox ob "       \
	"LEFT JOIN processed_jobs p ON p.job_id = " JOB " "                                     \
	"WHERE ob.kind IN ('update_sales_counter', 'cancel_order') GROUP BY 1, 2"
	static const char *const jobs_lite[2] = {
		JOBS_SQL(JOB_NEW, "json_extract(ob.payload, '$.order_id')"),
		JOBS_SQL(JOB_OLD, "json_extract(ob.payload, '$.order_id')"),
	};
	static const char *const jobs_pg[2] = {
		JOBS_SQL(JOB_NEW, "(ob.payload::jsonb ->> 'order_id')::bigint"),
		JOBS_SQL(JOB_OLD, "(ob.payload::jsonb ->> 'order_id')::bigint"),
	};
	static const char changes[] =
		"SELECT order_id, kind, detail FROM order_changes ORDER BY id";
	static const char events[] = "SELECT id, capacity FROM events ORDER BY id";
	struct row_walk w = { v, s };
	char err[300];

	if (!(s->ord = calloc((size_t)s->max_id + 1, sizeof *s->ord)) ||
	    !(s->ev = calloc(1024, sizeof *s->ev))) {
		broken(v, "out of memory");
		return;
	}
	if (vdb_each(db, orders[has_payment + has_event_runs], NULL, order_row, s, err, sizeof err) != 0 ||
	    vdb_each(db, sends, NULL, send_row, &w, err, sizeof err) != 0 ||
	    vdb_each(db, (vdb_pg(db) ? jobs_pg : jobs_lite)[legacy_jobs], NULL, job_row, &w, err,
		     sizeof err) != 0 ||
	    vdb_each(db, changes, NULL, change_row, &w, err, sizeof err) != 0 ||
	    vdb_each(db, events, NULL, event_row, s, err, sizeof err) != 0)
		broken(v, "database: %s", err);
}

/* ======================== the provider ================================== */

/* A header's value (unfolded) from a message's head, "" when absent. */
static void header(const char *head, const char *name, char *buf, size_t size)
{
	size_t nlen = strlen(name), n = 0;
	const char *p = head;

	buf[0] = '\0';
	for (;;) {
		if (strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
			p += nlen + 1;
			for (;;) {	/* the value, and its continuation lines */
				size_t len = strcspn(p, "\r\n");

				if (n + len >= size)
					len = size - n - 1;
				memcpy(buf + n, p, len);
				n += len;
				buf[n] = '\0';
				p += strcspn(p, "\n");
				if (*p == '\n' && (p[1] == ' ' || p[1] == '\t'))
					p++;
				else
					return;
			}
		}
		p = strchr(p, '\n');
		if (!p || p[1] == '\r' || p[1] == '\n' || !p[1])
			return;	/* the head ended */
		p++;
	}
}

/* The address in a To value: between the last <> if any, else the value. */
static void address_of(const char *to, char *buf, size_t size)
{
	const char *lt = strrchr(to, '<'), *gt;

	while (*to == ' ' || *to == '\t')
		to++;
	if (lt && (gt = strchr(lt, '>')))
		snprintf(buf, size, "%.*s", (int)(gt - lt - 1), lt + 1);
	else
		snprintf(buf, size, "%.*s", (int)strcspn(to, " \t\r\n"), to);
}

/* The message's intent from its Message-ID <KEY@...>: "tickets-S",
 * "tickets-S-rN" or "cancel-S", S the order's public id or (a key made
 * before schema 11) its row id; INTENT_KINDS for none of these. */
static void intent_of(struct vmsg *m)
{
	const char *k = m->key, *rest;
	char *end;
	size_t n;

	m->kind = INTENT_KINDS;
	m->n = 0;
	m->subject[0] = '\0';
	if (strncmp(k, "tickets-", 8) == 0)
		rest = k + 8;
	else if (strncmp(k, "cancel-", 7) == 0)
		rest = k + 7;
	else
		return;
	n = strcspn(rest, "-");
	if (!n || n >= sizeof m->subject)
		return;
	snprintf(m->subject, sizeof m->subject, "%.*s", (int)n, rest);
	if (k[0] == 'c') {
		if (!rest[n])
			m->kind = INTENT_CANCEL;
		return;
	}
	if (!rest[n]) {
		m->kind = INTENT_TICKETS;
	} else if (strncmp(rest + n, "-r", 2) == 0 && rest[n + 2] >= '1' && rest[n + 2] <= '9') {
		m->n = strtoll(rest + n + 2, &end, 10);
		if (!*end)
			m->kind = INTENT_RESEND;
	}
}

/* slurp: a whole file, NUL-terminated (free()); NULL when unreadable. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	long size;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)size + 1)) && fread(buf, 1, (size_t)size, f) == (size_t)size) {
		buf[size] = '\0';
	} else {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static int read_message(const char *path, struct vmsg *m)
{
	char mid[256], to[512];
	char *msg = slurp(path);

	memset(m, 0, sizeof *m);
	if (!msg)
		return -1;
	header(msg, "Message-ID", mid, sizeof mid);
	header(msg, "To", to, sizeof to);
	address_of(to, m->to, sizeof m->to);
	{
		const char *lt = strchr(mid, '<'), *at = lt ? strchr(lt, '@') : NULL;

		if (lt && at && at - lt - 1 < V_KEY_MAX)
			snprintf(m->key, sizeof m->key, "%.*s", (int)(at - lt - 1), lt + 1);
	}
	intent_of(m);
	mail_order_named(msg, m->pub, sizeof m->pub);
	free(msg);
	m->path = strdup(path);
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	return strcmp(((const struct vmsg *)a)->key, ((const struct vmsg *)b)->key);
}

/* The message under key, or NULL (s->msg sorted by key). */
static const struct vmsg *msg_by_key(const struct vstate *s, const char *key)
{
	struct vmsg want;

	snprintf(want.key, sizeof want.key, "%s", key);
	return bsearch(&want, s->msg, (size_t)s->n_msg, sizeof *s->msg, key_cmp);
}

static int pub_cmp(const void *a, const void *b)
{
	return strcmp(((const struct vord *const *)a)[0]->pub, ((const struct vord *const *)b)[0]->pub);
}

/* index_pub: s->by_pub, the orders sorted by public id. */
static void index_pub(struct verdict *v, struct vstate *s)
{
	long long id;

	if (!(s->by_pub = calloc((size_t)s->max_id + 1, sizeof *s->by_pub))) {
		broken(v, "out of memory");
		return;
	}
	for (id = 1; id <= s->max_id; id++)
		if (s->ord[id].exists)
			s->by_pub[s->n_by++] = &s->ord[id];
	qsort(s->by_pub, (size_t)s->n_by, sizeof *s->by_pub, pub_cmp);
}

/* vord_by_pub: the order with this public id, or NULL. */
static struct vord *vord_by_pub(const struct vstate *s, const char *pub)
{
	struct vord key, *kp = &key, **hit;

	snprintf(key.pub, sizeof key.pub, "%s", pub);
	hit = s->by_pub ? bsearch(&kp, s->by_pub, (size_t)s->n_by, sizeof *s->by_pub, pub_cmp)
			: NULL;
	return hit ? *hit : NULL;
}

/* Every message in maildir/new and cur, with its intent and address. */
static void scan_maildir(struct verdict *v, struct vstate *s)
{
	static const char *subs[] = { "new", "cur" };
	size_t i;

	for (i = 0; i < 2; i++) {
		char dir[CHAOS_PATH_MAX + 8];
		struct dirent *d;
		DIR *dp;

		snprintf(dir, sizeof dir, "%s/%s", v->maildir, subs[i]);
		dp = opendir(dir);
		if (!dp)
			continue;
		while ((d = readdir(dp))) {
			char path[CHAOS_PATH_MAX * 2];

			if (d->d_name[0] == '.')
				continue;
			if (s->n_msg == s->cap_msg) {
				long cap = s->cap_msg ? s->cap_msg * 2 : 1024;
				struct vmsg *m = realloc(s->msg, (size_t)cap * sizeof *m);

				if (!m) {
					broken(v, "out of memory");
					break;
				}
				s->msg = m;
				s->cap_msg = cap;
			}
			snprintf(path, sizeof path, "%s/%s", dir, d->d_name);
			v->messages++;
			if (read_message(path, &s->msg[s->n_msg]) == 0)
				s->n_msg++;
			else
				v->strangers++;
		}
		closedir(dp);
	}
	qsort(s->msg, (size_t)s->n_msg, sizeof *s->msg, key_cmp);
}

/* A message of the shop about a payment that made no order (shopcheck.c):
 * a late payment's refund, a delayed payment that failed. */
static int shop_key(const char *key)
{
	return strncmp(key, "refunded-", 9) == 0 || strncmp(key, "payment-failed-", 15) == 0;
}

/* A message of a whole event's run or a reminder (eventcheck.c). */
static int event_key(const char *key)
{
	return strncmp(key, "cancel-event-", 13) == 0 || strncmp(key, "moved-", 6) == 0 ||
	       strncmp(key, "reminder-", 9) == 0;
}

/* A key names the order o (id): its public id, or its row id (a key made
 * before schema 11). */
static int key_names(const struct vmsg *m, const struct vord *o, long long id)
{
	char num[24];

	snprintf(num, sizeof num, "%lld", id);
	return strcmp(m->subject, o->pub) == 0 || strcmp(m->subject, num) == 0;
}

/* Count each message against the intent of the order its text names: a
 * stranger (no order of ours), the email of an order the database does not
 * hold (sent for a commit a power cut took), one under another order's
 * key, an intent never made, or one more for an intent made. */
static void count_messages(struct verdict *v, struct vstate *s)
{
	long i;

	for (i = 0; i < s->n_msg; i++) {
		struct vmsg *m = &s->msg[i];
		struct vord *o;

		if (v->record_path && shop_key(m->key))
			continue;	/* a refund's or a failed payment's email: shopcheck.c's */
		if (has_event_runs && event_key(m->key))
			continue;	/* an event's cancel, move or reminder: eventcheck.c's */
		if (m->kind == INTENT_KINDS || !m->pub[0]) {
			v->strangers++;
			broken(v, "messages: a message at the provider (Message-ID key '%s') names no "
			       "order of ours", m->key);
			continue;
		}
		if (!(o = vord_by_pub(s, m->pub))) {
			v->for_missing_orders++;
			broken(v, "messages: %s is the email of order %s, which the database does not "
			       "hold: it was sent for a commit that was lost", m->key, m->pub);
			continue;
		}
		m->order = o - s->ord;
		if (!key_names(m, o, m->order)) {
			v->key_of_another++;
			broken(v, "messages: order %s's email went under key %s, which names another "
			       "order", o->pub, m->key);
		}
		v->msgs[m->kind]++;
		if (m->kind == INTENT_TICKETS) {
			o->m_tickets++;
		} else if (m->kind == INTENT_CANCEL && o->cancelled) {
			o->m_cancel++;
		} else if (m->kind == INTENT_RESEND && m->n <= o->resends) {
			o->m_r[m->n]++;
		} else {
			v->unmade++;
			if (m->kind == INTENT_CANCEL)
				broken(v, "messages: order %s is not cancelled, and the provider holds its "
				       "cancellation (%s)", o->pub, m->key);
			else
				broken(v, "messages: order %s made %lld resends, and the provider holds "
				       "%s, an intent never made", o->pub, o->resends, m->key);
		}
	}
}

/* An owed email with no message: does the key it goes under hold another
 * order's email?  Its key is "<intent>-<public id>", or "<intent>-<row id>"
 * for an intent claimed before schema 11.  [out] whose: that order. */
static int owed_absorbed(const struct vstate *s, const struct vord *o, long long id,
			 const char *intent, long long n, char *whose, size_t size)
{
	char key[V_KEY_MAX], suffix[24] = "";
	const struct vmsg *m;
	int i;

	if (n > 0)
		snprintf(suffix, sizeof suffix, "-r%lld", n);
	for (i = 0; i < 2; i++) {
		if (i == 0)
			snprintf(key, sizeof key, "%s-%s%s", intent, o->pub, suffix);
		else
			snprintf(key, sizeof key, "%s-%lld%s", intent, id, suffix);
		if ((m = msg_by_key(s, key)) && m->order != id) {
			snprintf(whose, size, "%s", m->pub[0] ? m->pub : "no order");
			return 1;
		}
	}
	return 0;
}

/* One intent's messages: beyond one is a duplicate. */
static void one_intent(struct verdict *v, const struct vord *o, long long id, enum intent kind,
		       long got, const char *key)
{
	if (got <= 1)
		return;
	v->dups[kind] += got - 1;
	v->duplicates += got - 1;
	broken(v, "messages: order %lld (%s) has %ld messages for %s at the provider", id, o->pub,
	       got, key);
}

static void check_duplicates(struct verdict *v, struct vstate *s)
{
	char key[V_KEY_MAX];
	long long id, n;

	for (id = 1; id <= s->max_id; id++) {
		const struct vord *o = vord_of(s, id);

		if (!o)
			continue;
		snprintf(key, sizeof key, "its tickets");
		one_intent(v, o, id, INTENT_TICKETS, o->m_tickets, key);
		for (n = 1; n <= o->resends; n++) {
			snprintf(key, sizeof key, "resend r%lld", n);
			one_intent(v, o, id, INTENT_RESEND, o->m_r[n], key);
		}
		snprintf(key, sizeof key, "its cancellation");
		one_intent(v, o, id, INTENT_CANCEL, o->m_cancel, key);
	}
}

/* The provider's own counts (counts.json = GET /v1/stats): its total is the
 * files', and each key's count is its files'. */
static void check_provider_counts(struct verdict *v, struct vstate *s)
{
	json_error_t jerr;
	json_t *doc = json_load_file(v->counts_path, 0, &jerr), *keys, *val;
	const char *k;
	long i, j;

	if (!doc) {
		broken(v, "messages: %s: %s", v->counts_path, jerr.text);
		return;
	}
	v->provider_replays = (long)json_integer_value(json_object_get(doc, "replays"));
	v->provider_failed_500 = (long)json_integer_value(json_object_get(doc, "failed_500"));
	v->provider_dropped = (long)json_integer_value(json_object_get(doc, "dropped"));
	if (json_integer_value(json_object_get(doc, "messages")) != v->messages)
		broken(v, "messages: the provider counts %lld messages, its maildir holds %ld",
		       (long long)json_integer_value(json_object_get(doc, "messages")), v->messages);
	keys = json_object_get(doc, "keys");
	qsort(s->msg, (size_t)s->n_msg, sizeof *s->msg, key_cmp);
	for (i = 0; i < s->n_msg; i = j) {
		json_int_t n;

		for (j = i; j < s->n_msg && strcmp(s->msg[j].key, s->msg[i].key) == 0; j++)
			;
		n = json_integer_value(json_object_get(json_object_get(keys, s->msg[i].key),
						       "messages"));
		if (n != j - i)
			broken(v, "messages: the provider counts %lld messages for key %s, its "
			       "maildir holds %ld", (long long)n, s->msg[i].key, j - i);
	}
	json_object_foreach(keys, k, val) {
		json_int_t n = json_integer_value(json_object_get(val, "messages"));
		struct vmsg want;

		snprintf(want.key, sizeof want.key, "%s", k);
		if (n > 0 && !bsearch(&want, s->msg, (size_t)s->n_msg, sizeof *s->msg, key_cmp))
			broken(v, "messages: the provider counts %lld messages for key %s, its "
			       "maildir holds none", (long long)n, k);
	}
	json_decref(doc);
}

/* ======================== counters, tickets, seats ====================== */

static int counter_row(void *arg, int ncols, const char *const *vals)
{
	struct row_walk *w = arg;
	struct verdict *v = w->v;
	long long ev = strtoll(vals[0], NULL, 10);
	long long c_orders = strtoll(vals[1], NULL, 10), c_seats = strtoll(vals[2], NULL, 10);
	long long orders = strtoll(vals[3], NULL, 10), seats = strtoll(vals[4], NULL, 10);
	long long live = strtoll(vals[5], NULL, 10);
	struct vevent *e = vevent_of(w->s, ev);

	(void)ncols;
	if (c_orders != orders || c_seats != seats)
		broken(v, "counters: event %lld counts %lld orders / %lld seats, its live orders "
		       "add up to %lld / %lld", ev, c_orders, c_seats, orders, seats);
	if (live != seats)
		broken(v, "tickets: event %lld has %lld live tickets, its live orders %lld seats", ev,
		       live, seats);
	if (e)
		e->live = live;
	return 0;
}

static int seats_row(void *arg, int ncols, const char *const *vals)
{
	struct row_walk *w = arg;
	long long ev = strtoll(vals[0], NULL, 10), cap = strtoll(vals[1], NULL, 10);
	long long live = strtoll(vals[2], NULL, 10), distinct = strtoll(vals[3], NULL, 10);
	long long lo = strtoll(vals[4], NULL, 10), hi = strtoll(vals[5], NULL, 10);

	(void)ncols;
	if (live != distinct)
		broken(w->v, "tickets: event %lld: %lld live tickets hold only %lld seat numbers: a "
		       "seat sold twice", ev, live, distinct);
	if (live && (lo < 1 || hi > cap))
		broken(w->v, "tickets: event %lld: live seats %lld..%lld, its capacity %lld", ev, lo,
		       hi, cap);
	return 0;
}

static int resold_row(void *arg, int ncols, const char *const *vals)
{
	struct row_walk *w = arg;
	long long ev = strtoll(vals[0], NULL, 10), all = strtoll(vals[1], NULL, 10);
	long long seats = strtoll(vals[2], NULL, 10), again = strtoll(vals[3], NULL, 10);
	struct vevent *e = vevent_of(w->s, ev);

	(void)ncols;
	/* each seat number's first ticket is a sale, every later one a sale
	 * again, after a cancellation gave it back */
	if (all - seats != again)
		broken(w->v, "tickets: event %lld: %lld tickets on %lld seat numbers, of which only "
		       "%lld were sold again after a cancellation: a seat sold twice", ev, all,
		       seats, again);
	if (e)
		e->resold = again;
	w->v->seats_resold += (long)again;
	return 0;
}

static void check_counters(struct verdict *v, struct vdb *db, struct vstate *s)
{
	static const char counters[] =
		"SELECT e.id, coalesce(c.orders, 0), coalesce(c.seats_sold, 0), "
		"  (SELECT count(*) FROM orders o WHERE o.event_id = e.id AND o.cancelled_at IS NULL), "
		"  (SELECT coalesce(sum(seats), 0) FROM orders o WHERE o.event_id = e.id "
		"     AND o.cancelled_at IS NULL), "
		"  (SELECT count(*) FROM tickets t WHERE t.event_id = e.id AND t.cancelled_at IS NULL) "
		"FROM events e LEFT JOIN sales_counters c ON c.event_id = e.id ORDER BY e.id";
	static const char seats[] =
		"SELECT t.event_id, e.capacity, count(*), count(DISTINCT t.seat_no), "
		"min(t.seat_no), max(t.seat_no) FROM tickets t JOIN events e ON e.id = t.event_id "
		"WHERE t.cancelled_at IS NULL GROUP BY t.event_id, e.capacity ORDER BY t.event_id";
	/* every ticket, live or not: how many, on how many seat numbers, and
	 * how many on a seat a cancelled ticket held before it (sold again) */
	static const char resold[] =
		"SELECT t.event_id, count(*), count(DISTINCT t.seat_no), "
		"sum(CASE WHEN EXISTS (SELECT 1 FROM tickets c WHERE c.event_id = t.event_id "
		"AND c.seat_no = t.seat_no AND c.cancelled_at IS NOT NULL AND c.id < t.id) "
		"THEN 1 ELSE 0 END) FROM tickets t GROUP BY t.event_id ORDER BY t.event_id";
	struct row_walk w = { v, s };
	char err[300];
	long beyond;

	if (vdb_each(db, counters, NULL, counter_row, &w, err, sizeof err) != 0 ||
	    vdb_each(db, seats, NULL, seats_row, &w, err, sizeof err) != 0 ||
	    vdb_each(db, resold, NULL, resold_row, &w, err, sizeof err) != 0)
		broken(v, "database: %s", err);
	beyond = one_int(v, db, "SELECT count(*) FROM tickets t JOIN events e ON e.id = t.event_id "
			 "WHERE t.seat_no < 1 OR t.seat_no > e.capacity");
	if (beyond > 0)
		broken(v, "tickets: %ld tickets hold a seat beyond their event's capacity", beyond);
	v->live_tickets = one_int(v, db, "SELECT count(*) FROM tickets WHERE cancelled_at IS NULL");
	v->tickets_cancelled = one_int(v, db, "SELECT count(*) FROM tickets "
				       "WHERE cancelled_at IS NOT NULL");
}

/* Each order's tickets and jobs as its state says. */
static void check_orders_state(struct verdict *v, struct vstate *s)
{
	long long id;

	for (id = 1; id <= s->max_id; id++) {
		const struct vord *o = vord_of(s, id);

		if (!o)
			continue;
		if (o->tickets != o->seats)
			broken(v, "tickets: order %s has %ld tickets for %lld seats", o->pub,
			       o->tickets, o->seats);
		if (o->cancelled && (o->t_cancelled != o->tickets || o->t_admitted))
			broken(v, "tickets: order %s is cancelled; of its %ld tickets %ld are "
			       "cancelled and %ld admitted", o->pub, o->tickets, o->t_cancelled,
			       o->t_admitted);
		if (!o->cancelled && o->t_cancelled)
			broken(v, "tickets: order %s is not cancelled and has %ld cancelled tickets",
			       o->pub, o->t_cancelled);
		if (o->count_jobs != 1)
			broken(v, "tickets: order %s has %ld update_sales_counter jobs, not 1", o->pub,
			       o->count_jobs);
		if (o->cancel_jobs != (o->cancelled ? 1 : 0))
			broken(v, "tickets: order %s is %scancelled and has %ld cancel_order jobs: "
			       "its cancellation %s", o->pub, o->cancelled ? "" : "not ",
			       o->cancel_jobs, o->cancel_jobs > 1 ? "queued more than once"
			       : "counted back wrongly");
		if (o->changes_resend != o->resends)
			broken(v, "tickets: order %s counts %lld resends and has %ld resend changes",
			       o->pub, o->resends, o->changes_resend);
		v->orders_cancelled += o->cancelled;
	}
}

/* ======================== the soak's log ================================ */

/* key=VALUE of a log line into buf ("" when absent). */
static void field(const char *line, const char *key, char *buf, size_t size)
{
	char want[40];
	const char *p = line;
	size_t n = strlen(key);

	snprintf(want, sizeof want, " %s=", key);
	buf[0] = '\0';
	if ((p = strstr(line, want)))
		snprintf(buf, size, "%.*s", (int)strcspn(p + n + 2, " \n"), p + n + 2);
}

void verify_field(const char *line, const char *key, char *buf, size_t size)
{
	field(line, key, buf, size);
}

static long long field_num(const char *line, const char *key)
{
	char buf[32];

	field(line, key, buf, sizeof buf);
	return buf[0] ? strtoll(buf, NULL, 10) : -1;
}

/* Read the log in order: what the soak was told, order by order. */
static void read_log(struct verdict *v, struct vstate *s)
{
	FILE *f = fopen(v->actions_path, "r");
	char line[1024], pub[24], via[8], to[V_ADDR_MAX];
	long long lineno = 0;

	if (!f) {
		broken(v, "changes: cannot read the soak's log %s: %s", v->actions_path,
		       strerror(errno));
		return;
	}
	v->logged = 1;
	while (fgets(line, sizeof line, f)) {
		char verb[24];
		struct vord *o;
		struct vevent *e;

		lineno++;
		if (line[0] == '#' || sscanf(line, "%23s", verb) != 1)
			continue;
		if (strcmp(verb, "soldout") == 0) {
			v->sold_out_logged++;
			continue;
		}
		if (strcmp(verb, "buyer") == 0 || strcmp(verb, "bank") == 0)
			continue;	/* the shop's buyers and their bank: shopcheck.c's */
		field(line, "order", pub, sizeof pub);
		field(line, "via", via, sizeof via);
		if (!(o = vord_by_pub(s, pub))) {
			broken(v, "changes: the log's line %lld names order '%s', which is not in the "
			       "database", lineno, pub);
			continue;
		}
		if (strcmp(verb, "placed") == 0) {
			if (o->placed)
				broken(v, "changes: order %s was acknowledged twice, for two orders of "
				       "the soak (idx %lld and another)", o->pub, field_num(line, "idx"));
			o->placed = 1;
			o->log_event = (long)field_num(line, "event");
			o->log_seats = (long)field_num(line, "seats");
			field(line, "email", o->cur, sizeof o->cur);
			addr_add(&o->log_addrs, &o->n_log_addrs, o->cur);
			if (o->log_event != o->event || o->log_seats != o->seats)
				broken(v, "changes: order %s was placed for event %ld, %ld seats, and is "
				       "in the database for event %lld, %lld seats", o->pub,
				       o->log_event, o->log_seats, o->event, o->seats);
			v->placed_logged++;
			v->seats_sold_logged += o->log_seats;
			if ((e = vevent_of(s, o->log_event)))
				e->sold_logged += o->log_seats;
			continue;
		}
		if (!o->placed) {
			broken(v, "changes: the log's line %lld changes order %s before it was placed",
			       lineno, o->pub);
			continue;
		}
		if (strcmp(verb, "resend") == 0) {
			struct vreq *rq = realloc(o->rq, (size_t)(o->n_rq + 1) * sizeof *rq);

			if (!rq)
				break;
			o->rq = rq;
			rq[o->n_rq].n = field_num(line, "n");
			rq[o->n_rq].from = o->n_log_addrs - 1;
			o->n_rq++;
			*(strcmp(via, "api") == 0 ? &v->resend_api : &v->resend_cli) += 1;
			if (o->n_log_addrs > 1)
				v->resent_after_readdress++;
		} else if (strcmp(verb, "replay") == 0) {
			v->resend_same_key++;
			if (field_num(line, "n") != field_num(line, "first"))
				broken(v, "changes: order %s: one Idempotency-Key answered resend %lld, "
				       "then %lld", o->pub, field_num(line, "first"),
				       field_num(line, "n"));
		} else if (strcmp(verb, "resend-unknown") == 0) {
			o->unknown++;
			v->resend_unknown++;
		} else if (strcmp(verb, "email") == 0) {
			field(line, "to", to, sizeof to);
			snprintf(o->cur, sizeof o->cur, "%s", to);
			addr_add(&o->log_addrs, &o->n_log_addrs, to);
			*(strcmp(via, "api") == 0 ? &v->readdress_api : &v->readdress_cli) += 1;
		} else if (strcmp(verb, "cancel") == 0) {
			if (field_num(line, "again") > 0) {
				v->cancel_again++;
				continue;
			}
			if (o->cancel_logged)
				continue;
			o->cancel_logged = 1;
			o->cancel_from = o->n_log_addrs - 1;
			*(strcmp(via, "api") == 0 ? &v->cancel_api : &v->cancel_cli) += 1;
			v->seats_cancelled_logged += o->log_seats;
			if ((e = vevent_of(s, o->log_event)))
				e->cancelled_logged += o->log_seats;
		} else {
			broken(v, "changes: the log's line %lld: unknown '%s'", lineno, verb);
		}
	}
	fclose(f);
}

/* The database against the log, order by order and event by event. */
static void check_log(struct verdict *v, struct vstate *s)
{
	long long id;
	long i;
	int j, k;

	if (v->placed_logged != v->orders - v->online_orders)
		broken(v, "changes: the log holds %ld acknowledged orders, the database %ld (and %ld "
		       "the shop made)", v->placed_logged, v->orders - v->online_orders,
		       v->online_orders);
	for (id = 1; id <= s->max_id; id++) {
		struct vord *o = vord_of(s, id);

		if (!o || !o->placed)
			continue;
		if (o->cancelled != o->cancel_logged && !(o->by_event && !o->cancel_logged))
			broken(v, "changes: order %s is %scancelled, and the soak %s", o->pub,
			       o->cancelled ? "" : "not ",
			       o->cancelled ? "never cancelled it" : "was told it cancelled it");
		for (j = 0; j < o->n_rq; j++) {
			if (o->rq[j].n < 1 || o->rq[j].n > o->resends)
				broken(v, "changes: order %s: the soak was told of resend r%lld, the "
				       "order has made %lld", o->pub, o->rq[j].n, o->resends);
			for (k = 0; k < j; k++)
				if (o->rq[k].n == o->rq[j].n)
					broken(v, "changes: order %s: two resends were answered r%lld",
					       o->pub, o->rq[j].n);
		}
		if (o->resends > o->n_rq + o->unknown)
			broken(v, "changes: order %s made %lld resends; the soak asked for %d (and %ld "
			       "it had no answer for)", o->pub, o->resends, o->n_rq, o->unknown);
		if (o->resends > o->n_rq)
			v->resends_unacknowledged += o->resends - o->n_rq;
		if (strcasecmp(o->email, o->cur) != 0)
			broken(v, "changes: order %s's address is %s; the soak last set %s", o->pub,
			       o->email, o->cur);
	}
	for (i = 0; i < s->n_ev; i++) {
		const struct vevent *e = &s->ev[i];
		long long online = 0, with_event = 0;

		/* the shop's orders are not the box office's: shopcheck.c's */
		for (id = 1; id <= s->max_id; id++) {
			const struct vord *o = vord_of(s, id);

			if (o && o->online && o->event == e->id)
				online += o->tickets - o->t_cancelled;
			else if (o && o->by_event && !o->cancel_logged && o->event == e->id)
				with_event += o->log_seats;
		}
		if (e->live - online != e->sold_logged - e->cancelled_logged - with_event)
			broken(v, "changes: event %lld has %lld live tickets (and %lld the shop sold); "
			       "the soak sold %lld seats and cancelled %lld", e->id, e->live - online,
			       online, e->sold_logged, e->cancelled_logged);
		if (e->sold_logged - e->capacity > e->resold)
			broken(v, "changes: event %lld (capacity %lld) sold %lld seats and sold only "
			       "%lld of them again", e->id, e->capacity, e->sold_logged, e->resold);
	}
}

/* Every message goes to an address its order has had.  With the log, a
 * resend or a cancellation goes to the address in force when it was asked
 * or to one set after it: never to one the order had before (the soak
 * gives each new address once, so the log's list is in the order set). */
static void check_addresses(struct verdict *v, struct vstate *s)
{
	long i;
	int j, from;

	for (i = 0; i < s->n_msg; i++) {
		const struct vmsg *m = &s->msg[i];
		const struct vord *o = vord_of(s, m->order);

		if (!o)
			continue;
		if (!(v->logged && o->placed)) {
			if (!addr_in(o->addrs, o->n_addrs, m->to)) {
				v->wrong_address++;
				broken(v, "address: %s (order %s) went to %s, never its address",
				       m->key, o->pub, m->to);
			}
			continue;
		}
		from = 0;
		if (m->kind == INTENT_CANCEL && o->cancel_logged)
			from = o->cancel_from;
		for (j = 0; m->kind == INTENT_RESEND && j < o->n_rq; j++)
			if (o->rq[j].n == m->n)
				from = o->rq[j].from;
		if (addr_in(o->log_addrs + from, o->n_log_addrs - from, m->to))
			continue;
		v->wrong_address++;
		if (addr_in(o->log_addrs, from, m->to))
			broken(v, "address: %s (order %s) went to %s, an old address: it was asked "
			       "after the address became %s", m->key, o->pub, m->to,
			       o->log_addrs[from]);
		else
			broken(v, "address: %s (order %s) went to %s, never its address", m->key,
			       o->pub, m->to);
	}
}

/* ======================== every intent's work =========================== */

/* What an order still owes: each intent owed has its message and its
 * email_sends mark; it is rendered (if standing) and counted (and counted
 * back, if cancelled).  An order with anything missing is lost. */
static void check_orders_done(struct verdict *v, struct vdb *db, struct vstate *s)
{
	char why[400], whose[24];
	long long id, n;

	for (id = 1; id <= s->max_id; id++) {
		const struct vord *o = vord_of(s, id);
		size_t len = 0;
		long missing = 0;

		if (!o)
			continue;
#define WHY(...) (len += (size_t)snprintf(why + len, len < sizeof why ? sizeof why - len : 0, \
					  __VA_ARGS__))
/* an owed email the provider took for another order's: its key held that one */
#define ABSORBED(INTENT, N)                                                                    \
	do {                                                                                   \
		if (owed_absorbed(s, o, id, INTENT, N, whose, sizeof whose)) {                 \
			v->owed_absorbed++;                                                    \
			WHY(" (its key holds the email of order %s)", whose);                   \
		}                                                                              \
	} while (0)
		why[0] = '\0';
		v->intents[INTENT_TICKETS]++;
		v->intents[INTENT_RESEND] += o->resends;
		if (o->cancelled && !o->by_event)
			v->intents[INTENT_CANCEL]++;
		/* the tickets: owed by a standing order, or once marked sent */
		if (!o->cancelled || o->sent_tickets) {
			if (!o->sent_tickets)
				WHY(" no email_sends.sent_at");
			if (!o->m_tickets) {
				WHY(" no message at the provider");
				v->missing[INTENT_TICKETS]++;
				ABSORBED("tickets", 0);
			}
		} else if (!o->m_tickets) {
			v->excused++;
		}
		if (o->cancelled && o->m_tickets)
			v->cancelled_mailed++;
		for (n = 1; n <= o->resends; n++) {
			if (o->cancelled && !o->sent_r[n]) {
				v->excused += !o->m_r[n];
				continue;
			}
			if (!o->sent_r[n])
				WHY(" resend r%lld not marked sent", n);
			if (!o->m_r[n]) {
				WHY(" no message for resend r%lld at the provider", n);
				v->missing[INTENT_RESEND]++;
				ABSORBED("tickets", n);
			}
		}
		if (o->cancelled && !o->cancel_done)
			WHY(" cancellation not counted back");
		if (o->cancelled && !o->by_event) {	/* by its event: eventcheck.c's email */
			if (!o->sent_cancel)
				WHY(" cancellation email not marked sent");
			if (!o->m_cancel) {
				WHY(" no cancellation message at the provider");
				v->missing[INTENT_CANCEL]++;
				ABSORBED("cancel", 0);
			}
		}
		if (!o->count_done)
			WHY(" not counted");
#undef WHY
#undef ABSORBED
		missing = why[0] != '\0';
		if (!missing)
			continue;
		v->lost++;
		if (!s->first_lost)
			s->first_lost = id;
		broken(v, "lost: order %lld (%s%s):%s", id, o->pub, o->cancelled ? ", cancelled" : "",
		       why);
	}
	/* rendered: every ticket of a standing order has its PDF */
	{
		long unrendered = one_int(v, db, "SELECT count(*) FROM tickets t JOIN orders o ON "
					  "o.id = t.order_id WHERE o.cancelled_at IS NULL AND "
					  "t.pdf_key IS NULL");

		if (unrendered > 0)
			broken(v, "lost: %ld tickets of standing orders have no PDF", unrendered);
	}
	if (s->first_lost)
		trace_order(db, s->first_lost);
}

/* ======================== the codes, at the door ======================= */

/* Every code printed in the tickets the provider holds, scanned at a door
 * of the verdict's own (a copy of the final database): a code the door
 * admits must admit a seat of the order its email is about, and never one
 * of an order cancelled since (by the box office, or because its money
 * went back).  A code of an order the database lost must admit nobody. */
static void check_codes(struct verdict *v, struct vstate *s)
{
	char dir[CHAOS_PATH_MAX], key[CHAOS_PATH_MAX + 16], copy[CHAOS_PATH_MAX + 16];
	char tmp[CHAOS_PATH_MAX + 16], err[400], pub[32];
	char (*codes)[CHAOS_CODE_LEN + 1] = calloc(CHAOS_CODES_MAX, sizeof *codes);
	long i;
	int n, j, rc, admitted;

	db_dir(v->db_path, dir, sizeof dir);
	snprintf(key, sizeof key, "%s/ticket.key", dir);
	snprintf(tmp, sizeof tmp, "%s/door.pdf", v->work_dir);
	if (!codes || mail_door_open(v->db_path, key, v->work_dir, copy, sizeof copy, err,
				     sizeof err) != 0) {
		broken(v, "codes: %s", codes ? err : "out of memory");
		free(codes);
		return;
	}
	for (i = 0; i < s->n_msg; i++) {
		const struct vmsg *m = &s->msg[i];
		char *msg;

		if (m->kind != INTENT_TICKETS && m->kind != INTENT_RESEND)
			continue;
		if (!(msg = slurp(m->path))) {
			broken(v, "codes: cannot read %s", m->path);
			continue;
		}
		n = mail_codes(msg, tmp, codes, CHAOS_CODES_MAX);
		free(msg);
		if (n <= 0) {
			broken(v, "codes: no ticket code could be read from %s (%s)", m->key, m->path);
			continue;
		}
		for (j = 0; j < n; j++) {
			v->codes_checked++;
			if ((rc = mail_door_scan(v->door_bin, copy, codes[j], pub, sizeof pub,
						 &admitted)) < 0)
				broken(v, "codes: stagedoor scan of a code of %s failed", m->key);
			else if (rc == 1 && strcmp(pub, m->pub) != 0) {
				v->codes_other_order++;
				broken(v, "codes: a code in order %s's email (%s) admits a seat of order %s",
				       m->pub, m->key, pub);
			} else if (admitted && m->order > 0 && s->ord[m->order].cancelled) {
				v->codes_of_cancelled++;
				broken(v, "codes: a code in order %s's email (%s) admits a seat at the "
				       "door, and the order is cancelled", m->pub, m->key);
			}
		}
	}
	unlink(tmp);
	free(codes);
}

/* The shop's part (shopcheck.c), with the shop's emails the provider holds. */
static void shop_check(struct verdict *v, struct vdb *db, struct vstate *s)
{
	char **keys = calloc((size_t)s->n_msg + 1, sizeof *keys);
	long i, n = 0;

	if (!keys) {
		broken(v, "out of memory");
		return;
	}
	for (i = 0; i < s->n_msg; i++)
		if (shop_key(s->msg[i].key))
			keys[n++] = s->msg[i].key;
	shop_verify(v, db, keys, n);
	free(keys);
}

static void vstate_free(struct vstate *s)
{
	long long id;

	for (id = 0; s->ord && id <= s->max_id; id++) {
		free(s->ord[id].sent_r);
		free(s->ord[id].m_r);
		free(s->ord[id].addrs);
		free(s->ord[id].log_addrs);
		free(s->ord[id].rq);
	}
	for (long i = 0; i < s->n_msg; i++)
		free(s->msg[i].path);
	free(s->ord);
	free(s->by_pub);
	free(s->msg);
	free(s->ev);
}

static void event_check(struct verdict *v, struct vdb *db, struct vstate *s)
{
	char **keys = calloc((size_t)s->n_msg + 1, sizeof *keys);
	char **tos = calloc((size_t)s->n_msg + 1, sizeof *tos);
	long i, n = 0;

	if (keys && tos) {
		for (i = 0; i < s->n_msg; i++) {
			if (!event_key(s->msg[i].key))
				continue;
			keys[n] = s->msg[i].key;
			tos[n++] = s->msg[i].to;
		}
		event_verify(v, db, keys, tos, n);
	} else {
		broken(v, "out of memory");
	}
	free(keys);
	free(tos);
}

/* The reminders the stream holds: each waits for a later time, unleased
 * (one due and not sent is a drain that did not end). */
static void stream_reminders(struct verdict *v, struct vdb *db)
{
	struct timespec ts;
	char sql[256];
	long due;

	clock_gettime(CLOCK_REALTIME, &ts);
	v->reminders_waiting = one_int(v, db, "SELECT count(*) FROM stream "
				       "WHERE kind = 'send_reminder'");
	snprintf(sql, sizeof sql, "SELECT count(*) FROM stream WHERE kind = 'send_reminder' AND "
		 "(visible_at <= %lld OR lease_token IS NOT NULL)", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
	if ((due = one_int(v, db, sql)) > 0)
		broken(v, "stream: %ld reminders due and not sent", due);
}

/* ======================== all of it ===================================== */

int verify_run(struct verdict *v)
{
	struct vstate s;
	struct vdb *db = NULL;
	char err[600];

	memset(&s, 0, sizeof s);
	v->broken[0] = '\0';
	if (vdb_open(v->db_path, &db, err, sizeof err) != 0) {
		broken(v, "database: %s", err);
		return 1;
	}

	check_integrity(v, db);
	job_ids_detect(db);
	v->orders = one_int(v, db, "SELECT count(*) FROM orders");
	has_payment = vdb_each(db, "SELECT payment FROM orders WHERE 1 = 0", NULL, NULL, NULL,
			       err, sizeof err) == 0;
	has_event_runs = has_payment && vdb_each(db, "SELECT id FROM event_runs WHERE 1 = 0", NULL,
						 NULL, NULL, err, sizeof err) == 0;
	if (has_payment)	/* the shop's orders apart */
		v->online_orders = one_int(v, db, "SELECT count(*) FROM orders "
					   "WHERE payment = 'online'");
	v->seats = one_int(v, db, "SELECT coalesce(sum(seats), 0) FROM orders");
	v->events = one_int(v, db, "SELECT count(*) FROM events");
	v->tickets = one_int(v, db, "SELECT count(*) FROM tickets");
	if (v->expect_orders >= 0 && v->orders - v->online_orders != v->expect_orders)
		broken(v, "orders: %ld placed, %ld in the database (and %ld the shop made)",
		       v->expect_orders, v->orders - v->online_orders, v->online_orders);

	check_pdfs(v, db);

	s.max_id = one_int(v, db, "SELECT coalesce(max(id), 0) FROM orders");
	if (s.max_id < 0)
		goto out;
	load(v, db, &s);
	if (!s.ord)
		goto out;
	index_pub(v, &s);
	scan_maildir(v, &s);
	count_messages(v, &s);
	check_duplicates(v, &s);
	if (v->counts_path)
		check_provider_counts(v, &s);

	check_counters(v, db, &s);
	check_orders_state(v, &s);
	if (v->actions_path)
		read_log(v, &s);
	check_addresses(v, &s);
	if (v->logged)
		check_log(v, &s);

	/* reminders wait in the stream for their day (send_reminder) */
	/* the shop's looks again at what has ended wait for their time */
	if (v->record_path) {
		v->stream_left = one_int(v, db, "SELECT count(*) FROM stream WHERE kind <> "
					 "'send_reminder' AND NOT " CHAOS_SHOP_LATER);
		v->shop_later_looks = one_int(v, db, "SELECT count(*) FROM stream WHERE "
					      CHAOS_SHOP_LATER);
	} else {
		v->stream_left = one_int(v, db, "SELECT count(*) FROM stream WHERE kind <> "
					 "'send_reminder'");
	}
	stream_reminders(v, db);
	v->dead = one_int(v, db, "SELECT count(*) FROM dead_jobs");
	v->outbox_unpublished = one_int(v, db, "SELECT count(*) FROM outbox "
					"WHERE published_at IS NULL");
	if (v->stream_left > 0)
		broken(v, "stream: %ld entries left (ready, scheduled or leased)", v->stream_left);
	if (v->dead > 0)
		broken(v, "stream: %ld dead jobs", v->dead);
	if (v->outbox_unpublished > 0)
		broken(v, "stream: %ld outbox rows never published", v->outbox_unpublished);

	check_orders_done(v, db, &s);
	if (v->record_path)
		shop_check(v, db, &s);
	if (has_event_runs)
		event_check(v, db, &s);
	if (v->door_bin && !vdb_pg(db))
		check_codes(v, &s);
	v->duplicates += v->strangers + v->unmade + v->for_missing_orders;

	v->reclaimed_jobs = one_int(v, db, "SELECT count(*) FROM done_jobs WHERE deliveries > 1");
	v->redeliveries = one_int(v, db, "SELECT coalesce(sum(deliveries - 1), 0) FROM done_jobs "
				  "WHERE deliveries > 1");
	/* a relay that published a row twice: two entries, one job_id */
	v->relay_duplicates = one_int(v, db,
		"SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM "
		"(SELECT job_id FROM done_jobs UNION ALL SELECT job_id FROM stream) AS j "
		"GROUP BY job_id HAVING count(*) > 1) AS d");
out:
	vstate_free(&s);
	vdb_close(db);
	return v->broken[0] ? 1 : 0;
}
