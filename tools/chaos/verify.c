/*
 * verify.c: the soak's verdict, reached without the appliance.
 *
 * It opens the database read-only with its own SQLite or libpq (vdb.c),
 * PostgreSQL's answers come from the server itself; it reads the provider's
 * maildir and counts file, and runs qpdf on every stored PDF.  Nothing here
 * calls stagedoor or trusts a counter the appliance keeps about itself: the
 * sales counters are checked against the orders they should add up, and
 * "one email per order" is counted from the messages the provider stored.
 *
 * The checks, in the order the first broken one is named:
 *   integrity     PRAGMA integrity_check says ok (SQLite)
 *   orders        as many orders as were placed (when known)
 *   pdfs          every ticket has a pdf_key; one key per order; the file is
 *                 under <db dir>/blobs (PostgreSQL: in the blobs table) and
 *                 qpdf --check accepts it
 *   messages      exactly one stored message per order (Message-ID
 *                 <tickets-ORDER@...>), none for a stranger; the provider's
 *                 own count per key agrees (1) and its total matches the files
 *   counters      each event's sales_counters row = its orders' count and seats
 *   stream        no entry left in the stream (ready, scheduled or leased),
 *                 no dead job, no unpublished outbox row
 *   lost          every order rendered, emailed (email_sends.sent_at), counted
 *                 (processed_jobs holds its update_sales_counter job)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "chaos.h"

/* Name the first broken check; later ones only add to the figures. */
static void broken(struct verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void broken(struct verdict *v, const char *fmt, ...)
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
	char path[CHAOS_PATH_MAX * 2], err[300];
	struct stat sb;
	int q;

	(void)ncols;
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
		"SELECT order_id, min(pdf_key), count(DISTINCT pdf_key), count(pdf_key), count(*) "
		"FROM tickets GROUP BY order_id ORDER BY order_id";
	struct pdf_walk w = { v, db, "", "" };
	char err[300];

	db_dir(v->db_path, w.dir, sizeof w.dir);
	snprintf(w.tmp, sizeof w.tmp, "%s/verify-pdf.tmp", soak.dir[0] ? soak.dir : "/tmp");
	if (vdb_each(db, sql, NULL, pdf_row, &w, err, sizeof err) != 0)
		broken(v, "database: %s", err);
	if (vdb_pg(db))
		unlink(w.tmp);
}

static int counter_row(void *arg, int ncols, const char *const *vals)
{
	struct verdict *v = arg;
	long long ev = strtoll(vals[0], NULL, 10);
	long long c_orders = strtoll(vals[1], NULL, 10), c_seats = strtoll(vals[2], NULL, 10);
	long long orders = strtoll(vals[3], NULL, 10), seats = strtoll(vals[4], NULL, 10);

	(void)ncols;
	if (c_orders != orders || c_seats != seats)
		broken(v, "counters: event %lld counts %lld orders / %lld seats, its orders "
		       "add up to %lld / %lld", ev, c_orders, c_seats, orders, seats);
	return 0;
}

static void check_counters(struct verdict *v, struct vdb *db)
{
	static const char sql[] =
		"SELECT e.id, coalesce(c.orders, 0), coalesce(c.seats_sold, 0), "
		"  (SELECT count(*) FROM orders o WHERE o.event_id = e.id), "
		"  (SELECT coalesce(sum(seats), 0) FROM orders o WHERE o.event_id = e.id) "
		"FROM events e LEFT JOIN sales_counters c ON c.event_id = e.id ORDER BY e.id";
	char err[300];

	if (vdb_each(db, sql, NULL, counter_row, v, err, sizeof err) != 0)
		broken(v, "database: %s", err);
}

/* ======================== the provider ================================== */

/* The order id in a stored message's Message-ID <tickets-N@...>; -1 when
 * it names none. */
static long long message_order(const char *path)
{
	char head[8192], *p;
	size_t n;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	n = fread(head, 1, sizeof head - 1, f);
	fclose(f);
	head[n] = '\0';
	p = strstr(head, "\nMessage-ID: <tickets-");
	if (!p)
		return -1;
	p += strlen("\nMessage-ID: <tickets-");
	if (*p < '0' || *p > '9')
		return -1;
	return strtoll(p, NULL, 10);
}

/* Count the messages per order in maildir/new and cur into per[0..max]. */
static void scan_maildir(struct verdict *v, long *per, long long max)
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
			long long id;

			if (d->d_name[0] == '.')
				continue;
			snprintf(path, sizeof path, "%s/%s", dir, d->d_name);
			v->messages++;
			id = message_order(path);
			if (id < 1 || id > max)
				v->strangers++;
			else
				per[id]++;
		}
		closedir(dp);
	}
}

struct key_walk {
	struct verdict *v;
	json_t *keys;
};

static int key_row(void *arg, int ncols, const char *const *vals)
{
	struct key_walk *w = arg;
	char key[64];
	json_int_t n;

	(void)ncols;
	snprintf(key, sizeof key, "tickets-%s", vals[0]);
	n = json_integer_value(json_object_get(json_object_get(w->keys, key), "messages"));
	if (n != 1)
		broken(w->v, "messages: the provider holds %lld messages for key %s", (long long)n,
		       key);
	return 0;
}

/* The provider's own counts (counts.json = GET /v1/stats). */
static void check_provider_counts(struct verdict *v, struct vdb *db)
{
	json_error_t jerr;
	json_t *doc = json_load_file(v->counts_path, 0, &jerr);
	struct key_walk w = { v, NULL };
	char err[300];

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
	w.keys = json_object_get(doc, "keys");
	if (vdb_each(db, "SELECT id FROM orders ORDER BY id", NULL, key_row, &w, err,
		     sizeof err) != 0)
		broken(v, "database: %s", err);
	json_decref(doc);
}

/* ======================== every order's work ============================ */

struct done_walk {
	struct verdict *v;
	const long *per;
	long long max;
	long long first_lost;	/* the first lost order's id, traced after the walk */
};

static int done_row(void *arg, int ncols, const char *const *vals)
{
	struct done_walk *w = arg;
	struct verdict *v = w->v;
	long long id = strtoll(vals[0], NULL, 10);
	/* SQLite says 1 and 0, PostgreSQL t and f */
	int rendered = vals[1][0] == '1' || vals[1][0] == 't';
	int emailed = vals[2][0] == '1' || vals[2][0] == 't';
	int counted = vals[3][0] == '1' || vals[3][0] == 't';
	long got = id <= w->max ? w->per[id] : 0;

	(void)ncols;
	if (got > 1) {
		v->duplicates += got - 1;
		broken(v, "messages: order %lld has %ld messages at the provider", id, got);
	}
	if (rendered && emailed && counted && got >= 1)
		return 0;
	v->lost++;
	if (!w->first_lost)
		w->first_lost = id;
	broken(v, "lost: order %lld:%s%s%s%s", id, rendered ? "" : " no PDF",
	       emailed ? "" : " no email_sends.sent_at", counted ? "" : " not counted",
	       got ? "" : " no message at the provider");
	return 0;
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

static void trace_order(struct vdb *db, long long id)
{
#define TRACE_OUTBOX(ORDER_OF_PAYLOAD, P)                                                      \
	"SELECT 'outbox:' || id, kind, published_at FROM outbox WHERE " ORDER_OF_PAYLOAD " = " P \
	" ORDER BY id"
#define TRACE_JOBS(ORDER_OF_PAYLOAD, P)                                                        \
	"SELECT 'stream', j.id, j.job_id, j.kind, j.deliveries, j.visible_at, "                \
	"CAST(j.lease_token AS TEXT) "   \
	"FROM stream j JOIN outbox ob ON j.job_id = 'outbox:' || ob.id WHERE "                 \
	ORDER_OF_PAYLOAD " = " P " UNION ALL "                                                  \
	"SELECT 'done', j.id, j.job_id, j.kind, j.deliveries, j.finished_at, j.worker "         \
	"FROM done_jobs j JOIN outbox ob ON j.job_id = 'outbox:' || ob.id WHERE "              \
	ORDER_OF_PAYLOAD " = " P " UNION ALL "                                                  \
	"SELECT 'dead', j.id, j.job_id, j.kind, j.deliveries, CAST(j.attempts AS BIGINT), "     \
	"j.last_error "        \
	"FROM dead_jobs j JOIN outbox ob ON j.job_id = 'outbox:' || ob.id WHERE "              \
	ORDER_OF_PAYLOAD " = " P
	static const char *const lite[] = {
		TRACE_OUTBOX("json_extract(payload, '$.order_id')", "CAST(?1 AS INTEGER)"),
		TRACE_JOBS("json_extract(ob.payload, '$.order_id')", "CAST(?1 AS INTEGER)"),
		"SELECT kind, claimed_at, sent_at FROM email_sends WHERE order_id = ?1",
	};
	static const char *const pg[] = {
		TRACE_OUTBOX("(payload::jsonb ->> 'order_id')::bigint", "$1::bigint"),
		TRACE_JOBS("(ob.payload::jsonb ->> 'order_id')::bigint", "$1::bigint"),
		"SELECT kind, claimed_at, sent_at FROM email_sends WHERE order_id = $1::bigint",
	};
	static const char *const what[] = { "outbox", "job", "email_sends" };
	const char *const *sql = vdb_pg(db) ? pg : lite;
	char param[24], err[300];
	size_t i;

	snprintf(param, sizeof param, "%lld", id);
	fprintf(stderr, "chaos: trace: order %lld\n", id);
	for (i = 0; i < 3; i++)
		if (vdb_each(db, sql[i], param, trace_row, (void *)what[i], err, sizeof err) != 0)
			fprintf(stderr, "chaos: trace: %s: %s\n", what[i], err);
}

static void check_orders_done(struct verdict *v, struct vdb *db, const long *per, long long max)
{
	/* rendered, emailed and counted, each read from the table its handler
	 * writes; the counter's job is found through the order's outbox row */
#define DONE_SQL(ORDER_OF_PAYLOAD)                                                             \
	"SELECT o.id, "                                                                        \
	"  NOT EXISTS (SELECT 1 FROM tickets t WHERE t.order_id = o.id AND t.pdf_key IS NULL) " \
	"    AND EXISTS (SELECT 1 FROM tickets t WHERE t.order_id = o.id), "                   \
	"  EXISTS (SELECT 1 FROM email_sends s WHERE s.order_id = o.id AND s.kind = 'tickets' " \
	"          AND s.sent_at IS NOT NULL), "                                               \
	"  EXISTS (SELECT 1 FROM outbox ob JOIN processed_jobs p ON p.job_id = 'outbox:' || ob.id " \
	"          WHERE ob.kind = 'update_sales_counter' AND " ORDER_OF_PAYLOAD " = o.id) "   \
	"FROM orders o ORDER BY o.id"
	static const char lite[] = DONE_SQL("json_extract(ob.payload, '$.order_id')");
	static const char pg[] = DONE_SQL("(ob.payload::jsonb ->> 'order_id')::bigint");
	struct done_walk w = { v, per, max, 0 };
	char err[300];

	if (vdb_each(db, vdb_pg(db) ? pg : lite, NULL, done_row, &w, err, sizeof err) != 0)
		broken(v, "database: %s", err);
	if (w.first_lost)
		trace_order(db, w.first_lost);
}

/* ======================== all of it ===================================== */

int verify_run(struct verdict *v)
{
	struct vdb *db = NULL;
	char err[600];
	long long max_id;
	long *per = NULL;

	v->broken[0] = '\0';
	if (vdb_open(v->db_path, &db, err, sizeof err) != 0) {
		broken(v, "database: %s", err);
		return 1;
	}

	check_integrity(v, db);
	v->orders = one_int(v, db, "SELECT count(*) FROM orders");
	v->seats = one_int(v, db, "SELECT coalesce(sum(seats), 0) FROM orders");
	v->events = one_int(v, db, "SELECT count(*) FROM events");
	v->tickets = one_int(v, db, "SELECT count(*) FROM tickets");
	if (v->expect_orders >= 0 && v->orders != v->expect_orders)
		broken(v, "orders: %ld placed, %ld in the database", v->expect_orders, v->orders);

	check_pdfs(v, db);

	max_id = one_int(v, db, "SELECT coalesce(max(id), 0) FROM orders");
	per = calloc((size_t)(max_id > 0 ? max_id : 0) + 1, sizeof *per);
	if (!per) {
		broken(v, "out of memory");
		goto out;
	}
	scan_maildir(v, per, max_id);
	if (v->strangers > 0)
		broken(v, "messages: %ld messages at the provider name no order", v->strangers);
	if (v->counts_path)
		check_provider_counts(v, db);

	check_counters(v, db);

	v->stream_left = one_int(v, db, "SELECT count(*) FROM stream");
	v->dead = one_int(v, db, "SELECT count(*) FROM dead_jobs");
	v->outbox_unpublished = one_int(v, db, "SELECT count(*) FROM outbox "
					"WHERE published_at IS NULL");
	if (v->stream_left > 0)
		broken(v, "stream: %ld entries left (ready, scheduled or leased)", v->stream_left);
	if (v->dead > 0)
		broken(v, "stream: %ld dead jobs", v->dead);
	if (v->outbox_unpublished > 0)
		broken(v, "stream: %ld outbox rows never published", v->outbox_unpublished);

	check_orders_done(v, db, per, max_id);
	v->duplicates += v->strangers;

	v->reclaimed_jobs = one_int(v, db, "SELECT count(*) FROM done_jobs WHERE deliveries > 1");
	v->redeliveries = one_int(v, db, "SELECT coalesce(sum(deliveries - 1), 0) FROM done_jobs "
				  "WHERE deliveries > 1");
	/* a relay that published a row twice: two entries, one job_id */
	v->relay_duplicates = one_int(v, db,
		"SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM "
		"(SELECT job_id FROM done_jobs UNION ALL SELECT job_id FROM stream) AS j "
		"GROUP BY job_id HAVING count(*) > 1) AS d");
out:
	free(per);
	vdb_close(db);
	return v->broken[0] ? 1 : 0;
}
