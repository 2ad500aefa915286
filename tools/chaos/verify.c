/*
 * verify.c: the soak's verdict, reached without the appliance.
 *
 * It opens the database read-only with its own SQLite, reads the provider's
 * maildir and counts file, and runs qpdf on every stored PDF.  Nothing here
 * calls stagedoor or trusts a counter the appliance keeps about itself: the
 * sales counters are checked against the orders they should add up, and
 * "one email per order" is counted from the messages the provider stored.
 *
 * The checks, in the order the first broken one is named:
 *   integrity     PRAGMA integrity_check says ok
 *   orders        as many orders as were placed (when known)
 *   pdfs          every ticket has a pdf_key; one key per order; the file is
 *                 under <db dir>/blobs and qpdf --check accepts it
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

#include <jansson.h>
#include <sqlite3.h>

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
static long one_int(struct verdict *v, sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	long n = -1;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		broken(v, "database: %s: %s", sql, sqlite3_errmsg(db));
		return -1;
	}
	if (sqlite3_step(st) == SQLITE_ROW)
		n = (long)sqlite3_column_int64(st, 0);
	else
		broken(v, "database: %s: %s", sql, sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return n;
}

/* ======================== the database ================================== */

static void check_integrity(struct verdict *v, sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	const char *res = NULL;

	if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		res = (const char *)sqlite3_column_text(st, 0);
	if (!res || strcmp(res, "ok") != 0)
		broken(v, "integrity: PRAGMA integrity_check: %s", res ? res : sqlite3_errmsg(db));
	sqlite3_finalize(st);
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

static void check_pdfs(struct verdict *v, sqlite3 *db)
{
	static const char sql[] =
		"SELECT order_id, min(pdf_key), count(DISTINCT pdf_key), count(pdf_key), count(*) "
		"FROM tickets GROUP BY order_id ORDER BY order_id";
	char dir[CHAOS_PATH_MAX];
	sqlite3_stmt *st = NULL;
	int rc;

	db_dir(v->db_path, dir, sizeof dir);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		broken(v, "database: %s", sqlite3_errmsg(db));
		return;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		long long order = sqlite3_column_int64(st, 0);
		const char *key = (const char *)sqlite3_column_text(st, 1);
		long keys = (long)sqlite3_column_int64(st, 2);
		long with = (long)sqlite3_column_int64(st, 3), all = (long)sqlite3_column_int64(st, 4);
		char path[CHAOS_PATH_MAX * 2];
		struct stat sb;
		int q;

		if (with != all) {
			broken(v, "pdfs: order %lld: %ld of %ld tickets have no PDF", order,
			       all - with, all);
			continue;
		}
		if (keys != 1) {
			broken(v, "pdfs: order %lld: its tickets name %ld different PDFs", order, keys);
			continue;
		}
		if (key[0] == '/' || strstr(key, "..")) {
			broken(v, "pdfs: order %lld: pdf_key '%s' leaves the store", order, key);
			continue;
		}
		snprintf(path, sizeof path, "%s/blobs/%s", dir, key);
		errno = 0;
		if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size == 0) {
			broken(v, "pdfs: order %lld: %s: %s", order, path,
			       errno ? strerror(errno) : "empty");
			continue;
		}
		{
			const char *argv[] = { "/usr/bin/qpdf", "--check", path, NULL };

			q = proc_run(argv, NULL, 0, 0);
		}
		if (q != 0)
			broken(v, "pdfs: order %lld: qpdf --check %s: exit %d", order, path, q);
		else
			v->pdfs_checked++;
	}
	if (rc != SQLITE_DONE)
		broken(v, "database: %s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
}

static void check_counters(struct verdict *v, sqlite3 *db)
{
	static const char sql[] =
		"SELECT e.id, coalesce(c.orders, 0), coalesce(c.seats_sold, 0), "
		"  (SELECT count(*) FROM orders o WHERE o.event_id = e.id), "
		"  (SELECT coalesce(sum(seats), 0) FROM orders o WHERE o.event_id = e.id) "
		"FROM events e LEFT JOIN sales_counters c ON c.event_id = e.id ORDER BY e.id";
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		broken(v, "database: %s", sqlite3_errmsg(db));
		return;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		long long ev = sqlite3_column_int64(st, 0);
		long long c_orders = sqlite3_column_int64(st, 1), c_seats = sqlite3_column_int64(st, 2);
		long long orders = sqlite3_column_int64(st, 3), seats = sqlite3_column_int64(st, 4);

		if (c_orders != orders || c_seats != seats)
			broken(v, "counters: event %lld counts %lld orders / %lld seats, its orders "
			       "add up to %lld / %lld", ev, c_orders, c_seats, orders, seats);
	}
	sqlite3_finalize(st);
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

/* The provider's own counts (counts.json = GET /v1/stats). */
static void check_provider_counts(struct verdict *v, sqlite3 *db)
{
	json_error_t jerr;
	json_t *doc = json_load_file(v->counts_path, 0, &jerr), *keys;
	sqlite3_stmt *st = NULL;

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
	if (sqlite3_prepare_v2(db, "SELECT id FROM orders ORDER BY id", -1, &st, NULL) == SQLITE_OK) {
		while (sqlite3_step(st) == SQLITE_ROW) {
			char key[64];
			json_int_t n;

			snprintf(key, sizeof key, "tickets-%lld",
				 (long long)sqlite3_column_int64(st, 0));
			n = json_integer_value(json_object_get(json_object_get(keys, key),
							       "messages"));
			if (n != 1)
				broken(v, "messages: the provider holds %lld messages for key %s",
				       (long long)n, key);
		}
	}
	sqlite3_finalize(st);
	json_decref(doc);
}

/* ======================== every order's work ============================ */

static void check_orders_done(struct verdict *v, sqlite3 *db, const long *per, long long max)
{
	/* rendered, emailed and counted, each read from the table its handler
	 * writes; the counter's job is found through the order's outbox row */
	static const char sql[] =
		"SELECT o.id, "
		"  NOT EXISTS (SELECT 1 FROM tickets t WHERE t.order_id = o.id AND t.pdf_key IS NULL) "
		"    AND EXISTS (SELECT 1 FROM tickets t WHERE t.order_id = o.id), "
		"  EXISTS (SELECT 1 FROM email_sends s WHERE s.order_id = o.id AND s.kind = 'tickets' "
		"          AND s.sent_at IS NOT NULL), "
		"  EXISTS (SELECT 1 FROM outbox ob JOIN processed_jobs p ON p.job_id = 'outbox:' || ob.id "
		"          WHERE ob.kind = 'update_sales_counter' "
		"          AND json_extract(ob.payload, '$.order_id') = o.id) "
		"FROM orders o ORDER BY o.id";
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		broken(v, "database: %s", sqlite3_errmsg(db));
		return;
	}
	while (sqlite3_step(st) == SQLITE_ROW) {
		long long id = sqlite3_column_int64(st, 0);
		int rendered = sqlite3_column_int(st, 1), emailed = sqlite3_column_int(st, 2);
		int counted = sqlite3_column_int(st, 3);
		long got = id <= max ? per[id] : 0;

		if (got > 1) {
			v->duplicates += got - 1;
			broken(v, "messages: order %lld has %ld messages at the provider", id, got);
		}
		if (rendered && emailed && counted && got >= 1)
			continue;
		v->lost++;
		broken(v, "lost: order %lld:%s%s%s%s", id, rendered ? "" : " no PDF",
		       emailed ? "" : " no email_sends.sent_at", counted ? "" : " not counted",
		       got ? "" : " no message at the provider");
	}
	sqlite3_finalize(st);
}

/* ======================== all of it ===================================== */

int verify_run(struct verdict *v)
{
	sqlite3 *db = NULL;
	long long max_id;
	long *per = NULL;

	v->broken[0] = '\0';
	if (sqlite3_open_v2(v->db_path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		broken(v, "database: cannot open %s read-only: %s", v->db_path,
		       db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return 1;
	}
	sqlite3_busy_timeout(db, 10000);

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
		"(SELECT job_id FROM done_jobs UNION ALL SELECT job_id FROM stream) "
		"GROUP BY job_id HAVING n > 1)");
out:
	free(per);
	sqlite3_close(db);
	return v->broken[0] ? 1 : 0;
}
