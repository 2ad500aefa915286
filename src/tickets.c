/*
 * tickets.c: events, orders, tickets, door scans and the three handlers.
 *
 * Invariants:
 *  - an order, its tickets and its first outbox rows commit together
 *    (order_add), in the intake's FULL-durability transaction;
 *  - a ticket's seat number is unique per event and never above the
 *    event's capacity (schema: UNIQUE and a trigger);
 *  - handlers never hold a transaction across rendering, file or mail I/O;
 *  - render_tickets queues send_tickets only from the run whose conditional
 *    update set pdf_key; send_tickets sends only from the run that owns the
 *    email_sends claim, with the key "tickets-<order id>"; update_sales_counter
 *    moves the counter only with a first-time processed_jobs row;
 *  - a write that the box's own disk refuses (the PDF, the maildir, the
 *    database: SD_IO) is waited out with job_retry_io, never a failed
 *    attempt; a mail provider's failure over the network stays one.
 */
#define _GNU_SOURCE
#include "tickets.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "clock.h"
#include "failpoint.h"
#include "fsio.h"
#include "idem.h"
#include "log.h"
#include "metrics.h"
#include "outbox.h"
#include "pdf.h"
#include "queue.h"
#include "text.h"

/* ======================== the environment ================================ */

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

enum sd_result tickets_state_dir(const char *db_path, const char *state_dir, char *buf,
				 size_t size)
{
	if ((!state_dir || !*state_dir) && db_target_is_pg(db_path)) {
		snprintf(buf, size, ".");
		return err_set(SD_INVALID, "state_dir must be given with a PostgreSQL database: "
			       "the folder for this box's own files (ticket key, maildir, "
			       "logs)");
	}
	if (!state_dir || !*state_dir) {
		db_dir(db_path, buf, size);
		return SD_OK;
	}
	if ((size_t)snprintf(buf, size, "%s", state_dir) >= size)
		return err_set(SD_INVALID, "state_dir: the path is too long");
	return SD_OK;
}

enum sd_result tickets_files_init(const char *db_path, const char *state_dir)
{
	char path[PATH_MAX];
	enum sd_result r;

	if (state_dir && *state_dir && (r = fsio_mkdirs(state_dir, 0)) != SD_OK)
		return r;
	if ((r = code_key_path(db_path, state_dir, path, sizeof path)) != SD_OK)
		return r;
	return code_key_ensure(path, NULL);
}

enum sd_result tickets_blobs_open(const char *db_path, const char *state_dir,
				  struct blob_store **out)
{
	char dir[PATH_MAX], path[PATH_MAX + 8];
	enum sd_result r;

	*out = NULL;
	if (blob_where_db(db_path))
		return blob_open_db(db_path, out);
	if ((r = tickets_state_dir(db_path, state_dir, dir, sizeof dir)) != SD_OK)
		return r;
	snprintf(path, sizeof path, "%s/blobs", dir);
	return blob_open(path, out);
}

void tickets_default_mail_url(const char *db_path, const char *state_dir, char *buf, size_t size)
{
	char dir[PATH_MAX];

	if (tickets_state_dir(db_path, state_dir, dir, sizeof dir) != SD_OK)
		db_dir(db_path, dir, sizeof dir);
	snprintf(buf, size, "maildir:%s/maildir", dir);
}

enum sd_result tickets_env_open(const char *db_path, const char *state_dir, const char *mail_url,
				const char *mail_from,
				const struct mail_config *mail_cfg, struct tickets_env **out)
{
	struct tickets_env *env;
	char path[PATH_MAX + 16], url[PATH_MAX + 16];
	enum sd_result r;

	*out = NULL;
	if (!(env = calloc(1, sizeof *env)))
		return err_set(SD_NOMEM, "out of memory");
	snprintf(env->db_path, sizeof env->db_path, "%s", db_path);
	snprintf(env->mail_from, sizeof env->mail_from, "%s",
		 mail_from ? mail_from : TICKETS_MAIL_FROM_DEFAULT);
	if ((r = mail_address_valid(env->mail_from)) != SD_OK)
		goto fail;
	if ((r = tickets_blobs_open(db_path, state_dir, &env->blobs)) != SD_OK)
		goto fail;
	if ((r = code_key_path(db_path, state_dir, path, sizeof path)) != SD_OK ||
	    (r = code_key_load(path, env->key)) != SD_OK)
		goto fail;
	if (!mail_url) {
		tickets_default_mail_url(db_path, state_dir, url, sizeof url);
		mail_url = url;
	}
	if ((r = mail_open_opts(mail_url, mail_cfg, &env->mail)) != SD_OK)
		goto fail;
	*out = env;
	return SD_OK;
fail:
	tickets_env_close(env);
	return r;
}

void tickets_env_close(struct tickets_env *env)
{
	if (!env)
		return;
	blob_close(env->blobs);
	mail_close(env->mail);
	/* the key does not outlive its use in memory */
	memset(env->key, 0, sizeof env->key);
	free(env);
}

/* ======================== text and time ================================== */

enum sd_result tickets_text_valid(const char *what, const char *s)
{
	return text_check(what, s, TICKETS_TEXT_MAX);
}

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	/* H. Hinnant's algorithm: days since 1970-01-01 in the proleptic Gregorian calendar */
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

enum sd_result tickets_time_parse(const char *s, int64_t *ms)
{
	int y, mo, d, h, mi, sec = 0, n = 0, zh = 0, zm = 0, sign = 0, dim;
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	const char *p;

	if (!s || sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 || n != 10 ||
	    (s[10] != 'T' && s[10] != ' ') || sscanf(s + 11, "%2d:%2d%n", &h, &mi, &n) != 2 ||
	    n != 5)
		goto bad;
	p = s + 16;
	if (*p == ':') {
		if (sscanf(p + 1, "%2d%n", &sec, &n) != 1 || n != 2)
			goto bad;
		p += 3;
	}
	if (*p == 'Z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '+' ? 1 : -1;
		if (sscanf(p + 1, "%2d:%2d%n", &zh, &zm, &n) != 2 || n != 5 || zh > 14 || zm > 59)
			goto bad;
		p += 6;
	}
	if (*p)
		goto bad;
	if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || h > 23 || mi > 59 || sec > 59 || d < 1)
		goto bad;
	dim = mdays[mo - 1] + (mo == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0));
	if (d > dim)
		goto bad;
	*ms = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + (int64_t)sec * 1000 -
	      (int64_t)sign * (zh * 60 + zm) * 60000;
	return SD_OK;
bad:
	return err_set(SD_INVALID, "'%.40s' is not a date and time like 2026-12-31T20:00Z",
		       s ? s : "");
}

void tickets_time_format(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M UTC", &tm);
}

/* ======================== events and orders ============================== */

static const char SQL_EVENT_ADD[] =
	"INSERT INTO events (name, venue, starts_at, capacity, created_at) "
	"VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id";

enum sd_result event_add(struct db *db, const struct event_new *e, int64_t *id)
{
	struct db_stmt *st;
	enum sd_result r;
	int row = 0;

	if ((r = tickets_text_valid("event name", e->name)) != SD_OK ||
	    (r = tickets_text_valid("venue", e->venue)) != SD_OK)
		return r;
	if (e->capacity < 1 || e->capacity > 1000000)
		return err_set(SD_INVALID, "capacity must be between 1 and 1000000");
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_EVENT_ADD))) {
		r = SD_DB;
		goto out;
	}
	db_bind_text(st, 1, e->name);
	db_bind_text(st, 2, e->venue);
	db_bind_int(st, 3, e->starts_at);
	db_bind_int(st, 4, e->capacity);
	db_bind_int(st, 5, clock_now_ms());
	if ((r = db_step(st, &row)) == SD_OK && row)
		*id = db_col_int(st, 0);
	db_reset(st);
out:
	return db_end(db, r);
}

/* Public ids: "T" and 9 characters without the look-alikes 0 O 1 I L. */
static void order_public_id(char *buf)
{
	static const char alphabet[] = "23456789ABCDEFGHJKMNPQRSTUVWXYZ";
	unsigned char rnd[9];
	int i;

	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		for (i = 0; i < 9; i++)
			rnd[i] = (unsigned char)(clock_mono_us() >> (i * 3));
	buf[0] = 'T';
	for (i = 0; i < 9; i++)
		buf[i + 1] = alphabet[rnd[i] % (sizeof alphabet - 1)];
	buf[10] = '\0';
}

/* Seat 1 is A-1, seat 21 is B-1: rows of 20 named A..Z, AA, AB ... */
static void seat_label(int64_t seat_no, char *buf, size_t size)
{
	int64_t row = (seat_no - 1) / 20, num = (seat_no - 1) % 20 + 1;
	char letters[16];
	int n = 0, i;

	do {
		letters[n++] = (char)('A' + row % 26);
		row = row / 26 - 1;
	} while (row >= 0 && n < 15);
	for (i = 0; i < n / 2; i++) {
		char t = letters[i];
		letters[i] = letters[n - 1 - i];
		letters[n - 1 - i] = t;
	}
	letters[n] = '\0';
	snprintf(buf, size, "%s-%lld", letters, (long long)num);
}

static const char SQL_ORDER_BY_KEY[] =
	"SELECT public_id, event_id, buyer_name, buyer_email, seats FROM orders "
	"WHERE idempotency_key = ?1";
static const char SQL_EVENT_SEATS[] =
	"SELECT e.capacity, (SELECT coalesce(max(seat_no), 0) FROM tickets WHERE event_id = e.id) "
	"FROM events e WHERE e.id = ?1";
/* A public id that is taken returns no row (draw again); any other
 * refusal (the idempotency key's UNIQUE) is an error, as it must be on
 * PostgreSQL, where a failed statement ends the transaction. */
static const char SQL_ORDER_INSERT[] =
	"INSERT INTO orders (public_id, event_id, buyer_name, buyer_email, seats, idempotency_key, "
	"created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (public_id) DO NOTHING "
	"RETURNING id";
/* PostgreSQL, where writers do not queue for one lock as in SQLite: the
 * order's event row is locked first, so that intake for one event runs one
 * transaction at a time (its replay check and its highest seat are then
 * read by statements that start after the lock, and see every order
 * committed before it).  NO KEY UPDATE, not UPDATE: it still queues
 * intake behind intake, but lets the foreign-key checks of other
 * transactions (FOR KEY SHARE of the event row) through.  A render's
 * second update of an event_totals row in one transaction checks its key
 * again; with FOR UPDATE here, that check waited for this intake while this
 * intake's own totals update waited for the render: a deadlock, one in a
 * few hundred orders on a busy event. */
static const char SQL_PG_EVENT_LOCK[] =
	"SELECT id FROM events WHERE id = ?1 FOR NO KEY UPDATE";
static const char SQL_TICKET_INSERT[] =
	"INSERT INTO tickets (order_id, event_id, seat_no, seat_label) VALUES (?1, ?2, ?3, ?4)";

static enum sd_result order_validate(const struct order_new *o)
{
	enum sd_result r;
	const char *k;

	if ((r = tickets_text_valid("buyer name", o->name)) != SD_OK)
		return r;
	if (!o->email || mail_address_valid(o->email) != SD_OK)
		return err_set(SD_INVALID, "'%.80s' is not an email address like name@example.com",
			       o->email ? o->email : "");
	if (o->seats < 1 || o->seats > TICKETS_SEATS_MAX)
		return err_set(SD_INVALID, "seats must be between 1 and %d", TICKETS_SEATS_MAX);
	if (o->event_id < 1)
		return err_set(SD_INVALID, "event id must be a positive number");
	if ((k = o->idempotency_key)) {
		if (!*k || strlen(k) > TICKETS_KEY_MAX)
			return err_set(SD_INVALID, "idempotency key must be 1 to %d characters",
				       TICKETS_KEY_MAX);
		for (; *k; k++)
			if ((unsigned char)*k <= ' ' || (unsigned char)*k >= 127)
				return err_set(SD_INVALID, "idempotency key may hold only printable "
					       "ASCII without spaces");
	}
	return SD_OK;
}

/* A key seen before: the same order again is a replay, another is an error. */
static enum sd_result order_replay(struct db *db, const struct order_new *o, char *public_id,
				   int *found)
{
	struct db_stmt *st = db_stmt(db, SQL_ORDER_BY_KEY);
	enum sd_result r;
	int row = 0;

	*found = 0;
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, o->idempotency_key);
	if ((r = db_step(st, &row)) != SD_OK || !row)
		goto out;
	*found = 1;
	snprintf(public_id, ORDER_ID_MAX, "%s", db_col_text(st, 0));
	if (db_col_int(st, 1) != o->event_id || strcmp(db_col_text(st, 2), o->name) != 0 ||
	    strcmp(db_col_text(st, 3), o->email) != 0 || db_col_int(st, 4) != o->seats)
		r = err_set(SD_INVALID, "idempotency key '%s' was used for a different order (%s)",
			    o->idempotency_key, public_id);
out:
	db_reset(st);
	return r;
}

enum sd_result order_add(struct db *db, const struct order_new *o, char *public_id,
			 int *replayed)
{
	struct db_stmt *st;
	enum sd_result r;
	int64_t order_id = 0, capacity = 0, last_seat = 0, i, now = clock_now_ms();
	char payload[160], label[32];
	int row = 0, found = 0, tries;

	*replayed = 0;
	if ((r = order_validate(o)) != SD_OK)
		return r;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (db_kind(db) == DB_PG) {
		if (!(st = db_stmt(db, SQL_PG_EVENT_LOCK))) {
			r = SD_DB;
			goto out;
		}
		db_bind_int(st, 1, o->event_id);
		if ((r = db_run(st)) != SD_OK)
			goto out;
	}
	if (o->idempotency_key) {
		if ((r = order_replay(db, o, public_id, &found)) != SD_OK)
			goto out;
		if (found) {
			*replayed = 1;
			goto out;
		}
	}
	if (!(st = db_stmt(db, SQL_EVENT_SEATS))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, o->event_id);
	if ((r = db_step(st, &row)) != SD_OK)
		goto out;
	if (row) {
		capacity = db_col_int(st, 0);
		last_seat = db_col_int(st, 1);
	}
	db_reset(st);
	if (!row) {
		r = err_set(SD_NOT_FOUND, "no event %lld", (long long)o->event_id);
		goto out;
	}
	for (tries = 0; tries < 5; tries++) {
		order_public_id(public_id);
		if (!(st = db_stmt(db, SQL_ORDER_INSERT))) {
			r = SD_DB;
			goto out;
		}
		db_bind_text(st, 1, public_id);
		db_bind_int(st, 2, o->event_id);
		db_bind_text(st, 3, o->name);
		db_bind_text(st, 4, o->email);
		db_bind_int(st, 5, o->seats);
		db_bind_text(st, 6, o->idempotency_key);
		db_bind_int(st, 7, now);
		r = db_step(st, &row);
		if (r == SD_OK && row)
			order_id = db_col_int(st, 0);
		db_reset(st);
		if (r != SD_OK || order_id)	/* no row: the public id is taken, draw again */
			break;
	}
	if (r == SD_OK && !order_id)
		r = err_set(SD_DB, "no free order id in 5 draws");
	if (r != SD_OK)
		goto out;
	/* Seats follow the highest one sold, read inside this write transaction;
	 * the schema refuses any seat past the capacity. */
	for (i = 1; i <= o->seats; i++) {
		if (!(st = db_stmt(db, SQL_TICKET_INSERT))) {
			r = SD_DB;
			goto out;
		}
		seat_label(last_seat + i, label, sizeof label);
		db_bind_int(st, 1, order_id);
		db_bind_int(st, 2, o->event_id);
		db_bind_int(st, 3, last_seat + i);
		db_bind_text(st, 4, label);
		if ((r = db_run(st)) != SD_OK) {
			if (strstr(err_msg(), "sold out")) {
				int64_t left = capacity - last_seat;
				if (left <= 0)
					r = err_set(SD_INVALID, "event %lld is sold out",
						    (long long)o->event_id);
				else
					r = err_set(SD_INVALID, "event %lld has only %lld seat%s left, "
						    "not %lld", (long long)o->event_id,
						    (long long)left, left == 1 ? "" : "s",
						    (long long)o->seats);
			}
			goto out;
		}
	}
	snprintf(payload, sizeof payload, "{\"order_id\":%lld}", (long long)order_id);
	if ((r = outbox_add(db, "render_tickets", payload, 0, 0, NULL)) != SD_OK)
		goto out;
	snprintf(payload, sizeof payload, "{\"order_id\":%lld,\"event_id\":%lld,\"seats\":%lld}",
		 (long long)order_id, (long long)o->event_id, (long long)o->seats);
	r = outbox_add(db, "update_sales_counter", payload, 0, 0, NULL);
out:
	return db_end(db, r);
}

/* ======================== loading an order =============================== */

static const char SQL_ORDER_LOAD[] =
	"SELECT o.id, o.event_id, o.seats, o.public_id, o.buyer_name, o.buyer_email, e.name, "
	"e.venue, e.starts_at FROM orders o JOIN events e ON e.id = o.event_id WHERE o.id = ?1";
static const char SQL_ORDER_TICKETS[] =
	"SELECT id, seat_label, pdf_key IS NOT NULL FROM tickets WHERE order_id = ?1 ORDER BY seat_no";

enum sd_result tickets_load_order(struct db *db, int64_t order_id, struct order_view *v)
{
	struct db_stmt *st = db_stmt(db, SQL_ORDER_LOAD);
	enum sd_result r;
	int row = 0, stored = 0;

	memset(v, 0, sizeof *v);
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, order_id);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (!row) {
		db_reset(st);
		return err_set(SD_NOT_FOUND, "no order %lld", (long long)order_id);
	}
	v->id = db_col_int(st, 0);
	v->event_id = db_col_int(st, 1);
	v->seats = db_col_int(st, 2);
	snprintf(v->public_id, sizeof v->public_id, "%s", db_col_text(st, 3));
	text_copy(v->buyer_name, sizeof v->buyer_name, db_col_text(st, 4));
	text_copy(v->buyer_email, sizeof v->buyer_email, db_col_text(st, 5));
	text_copy(v->event_name, sizeof v->event_name, db_col_text(st, 6));
	text_copy(v->venue, sizeof v->venue, db_col_text(st, 7));
	v->starts_at = db_col_int(st, 8);
	db_reset(st);
	if (!(st = db_stmt(db, SQL_ORDER_TICKETS)))
		return SD_DB;
	db_bind_int(st, 1, order_id);
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row || v->n_tickets == TICKETS_SEATS_MAX)
			break;
		v->tickets[v->n_tickets].id = db_col_int(st, 0);
		snprintf(v->tickets[v->n_tickets].seat_label,
			 sizeof v->tickets[v->n_tickets].seat_label, "%s", db_col_text(st, 1));
		stored += (int)db_col_int(st, 2);
		v->n_tickets++;
	}
	db_reset(st);
	v->pdf_stored = v->n_tickets > 0 && stored == v->n_tickets;
	return SD_OK;
}

void tickets_pdf_key(const struct order_view *v, char *buf, size_t size)
{
	snprintf(buf, size, "tickets/%s.pdf", v->public_id);
}

enum sd_result tickets_render_pdf(const struct tickets_env *env, const struct order_view *v,
				  unsigned char **pdf, size_t *len)
{
	struct pdf_ticket t[TICKETS_SEATS_MAX];
	char codes[TICKETS_SEATS_MAX][CODE_TEXT_MAX], when[64];
	struct pdf_order po;
	int i;

	for (i = 0; i < v->n_tickets; i++) {
		code_make(env->key, v->tickets[i].id, v->event_id, codes[i]);
		t[i].seat_label = v->tickets[i].seat_label;
		t[i].code = codes[i];
	}
	tickets_time_format(v->starts_at, when, sizeof when);
	po.event_name = v->event_name;
	po.venue = v->venue;
	po.starts_at = when;
	po.buyer_name = v->buyer_name;
	po.order_id = v->public_id;
	po.tickets = t;
	po.n_tickets = v->n_tickets;
	return pdf_render(&po, pdf, len);
}

enum sd_result tickets_render_store(struct tickets_env *env, const struct order_view *v)
{
	char key[BLOB_KEY_MAX + 1];
	unsigned char *pdf = NULL;
	size_t len = 0;
	enum sd_result r;

	if ((r = tickets_render_pdf(env, v, &pdf, &len)) != SD_OK)
		return r;
	tickets_pdf_key(v, key, sizeof key);
	r = blob_put(env->blobs, key, pdf, len);
	free(pdf);
	return r;
}

enum sd_result tickets_send_mail(struct tickets_env *env, const struct order_view *v,
				 struct mail_result *res)
{
	char key[BLOB_KEY_MAX + 1], idem[64], subject[TICKETS_TEXT_MAX + 32], when[64], fname[64];
	char *text = NULL;
	unsigned char *pdf = NULL;
	size_t len = 0;
	struct mail_attachment att;
	struct mail_message m;
	enum sd_result r;

	tickets_pdf_key(v, key, sizeof key);
	if ((r = blob_get(env->blobs, key, &pdf, &len)) != SD_OK)
		return r;
	tickets_time_format(v->starts_at, when, sizeof when);
	snprintf(subject, sizeof subject, "Your tickets for %s", v->event_name);
	if (asprintf(&text,
		     "Hello %s,\n\nyour %d ticket%s for %s at %s on %s %s attached.\n"
		     "Show the code on each page at the door.\n\nOrder %s\n",
		     v->buyer_name, v->n_tickets, v->n_tickets == 1 ? "" : "s", v->event_name,
		     v->venue, when, v->n_tickets == 1 ? "is" : "are", v->public_id) < 0) {
		free(pdf);
		return err_set(SD_NOMEM, "out of memory");
	}
	snprintf(fname, sizeof fname, "tickets-%s.pdf", v->public_id);
	att.filename = fname;
	att.content_type = "application/pdf";
	att.data = pdf;
	att.len = len;
	memset(&m, 0, sizeof m);
	m.from = env->mail_from;
	m.from_name = "Box office";
	m.to = v->buyer_email;
	m.to_name = v->buyer_name;
	m.subject = subject;
	m.text = text;
	m.attachments = &att;
	m.n_attachments = 1;
	/* the intent, not the attempt: every retry of this order's email
	 * carries the same key, so the provider drops the repeats */
	idem_provider_key(idem, sizeof idem, "tickets", v->id);
	m.idempotency_key = idem;
	r = mail_send(env->mail, &m, res);
	free(text);
	free(pdf);
	return r;
}

/* ======================== the handlers =================================== */

static enum job_outcome job_order(const struct job *job, struct job_result *res, int64_t *id)
{
	if (job_arg_int(job, "order_id", id) != SD_OK || *id < 1)
		return job_failf(res, 1, "payload needs {\"order_id\": N}: %s", err_msg());
	return JOB_DONE;
}

/* A failure of the box's own disk (full, or an I/O error), whichever file
 * it hit: the job waits it out, no attempt counted; anything else is a
 * failed attempt, permanent when permanent. */
static enum job_outcome disk_or_fail(struct job_result *res, const struct job *job,
				     enum sd_result r, int permanent, const char *what)
{
	if (r == SD_IO)
		return job_retry_io(res, job, "%s: %s", what, err_msg());
	return job_failf(res, permanent, "%s: %s", what, err_msg());
}

static enum job_outcome db_failure(struct job_result *res, const struct job *job,
				   enum sd_result r, const char *what)
{
	/* a database error may pass (busy, disk full): retry with backoff */
	return disk_or_fail(res, job, r, 0, what);
}

/* One info line per duplicate run a handler absorbed, for the crash harness
 * to count: the technique that absorbed it, the job and the order, by ids
 * only (never a name or an address). */
static void dup_absorbed(struct handler_ctx *ctx, enum metrics_technique t,
			 const struct job *job, const char *order)
{
	char q[QUEUE_JOB_ID_MAX * 2 + 8];

	metrics_duplicate(handler_metrics(ctx), t);
	log_event(LOG_INFO, "duplicate absorbed", "technique=%s job_id=%s order=%s",
		  metrics_technique_names[t], log_quote(q, sizeof q, job->job_id), order);
}

static const char SQL_SET_PDF[] =
	"UPDATE tickets SET pdf_key = ?1 WHERE order_id = ?2 AND pdf_key IS NULL RETURNING id";

/* Technique 1: "make sure the order's tickets are rendered and queued to send". */
enum job_outcome tickets_render(struct handler_ctx *ctx, const struct job *job,
				struct job_result *res)
{
	struct tickets_env *env = handler_app(ctx);
	struct db *db = handler_db(ctx);
	struct order_view v;
	struct db_stmt *st;
	enum sd_result r;
	char key[BLOB_KEY_MAX + 1], payload[64];
	int64_t order_id;
	int won = 0;

	if (job_order(job, res, &order_id) != JOB_DONE)
		return JOB_FAIL_PERMANENT;
	if (!db)
		return db_failure(res, job, SD_DB, "open");
	if ((r = tickets_load_order(db, order_id, &v)) != SD_OK)
		return job_failf(res, r == SD_NOT_FOUND, "load order: %s", err_msg());
	if (v.pdf_stored) {
		dup_absorbed(ctx, METRICS_CHECK_STATE, job, v.public_id);
		return JOB_DONE;	/* the state is reached: nothing to do */
	}
	failpoint(FP_RENDER_CHECKED);
	/* render and store with no transaction open; the key is fixed, so a
	 * second run overwrites the file with the same bytes */
	if ((r = tickets_render_store(env, &v)) != SD_OK)
		return disk_or_fail(res, job, r, r == SD_INVALID, "render");
	failpoint(FP_RENDER_STORED);
	tickets_pdf_key(&v, key, sizeof key);
	if ((r = db_begin(db)) != SD_OK)
		return db_failure(res, job, r, "begin");
	if (!(st = db_stmt(db, SQL_SET_PDF))) {
		r = SD_DB;
		goto fail;
	}
	db_bind_text(st, 1, key);
	db_bind_int(st, 2, order_id);
	if ((r = idem_conditional(db, st, &won)) != SD_OK)
		goto fail;
	if (won) {	/* this run reached the state: it alone queues the email */
		snprintf(payload, sizeof payload, "{\"order_id\":%lld}", (long long)order_id);
		if ((r = outbox_add(db, "send_tickets", payload, 0, 0, NULL)) != SD_OK)
			goto fail;
	}
	if ((r = db_commit(db)) != SD_OK)
		return db_failure(res, job, r, "commit");
	if (!won)	/* another run set pdf_key first: its send is queued */
		dup_absorbed(ctx, METRICS_CHECK_STATE, job, v.public_id);
	return JOB_DONE;
fail:
	db_rollback(db);
	return db_failure(res, job, r, "mark rendered");
}

/* A provider's 409 without Retry-After: ask again after this long. */
#define TICKETS_IN_FLIGHT_RETRY_MS 3000

/* Techniques 2 and 3: "order N's ticket email has been sent". */
enum job_outcome tickets_send(struct handler_ctx *ctx, const struct job *job,
			      struct job_result *res)
{
	struct tickets_env *env = handler_app(ctx);
	struct db *db = handler_db(ctx);
	struct mail_result mr;
	struct order_view v;
	enum idem_claim claim;
	enum sd_result r;
	int64_t order_id, claimed_at = 0;
	int64_t stale_ms = env->claim_stale_ms > 0 ? env->claim_stale_ms : IDEM_STALE_MS;

	if (job_order(job, res, &order_id) != JOB_DONE)
		return JOB_FAIL_PERMANENT;
	if (!db)
		return db_failure(res, job, SD_DB, "open");
	if ((r = tickets_load_order(db, order_id, &v)) != SD_OK)
		return job_failf(res, r == SD_NOT_FOUND, "load order: %s", err_msg());
	if (!v.pdf_stored)
		return job_failf(res, 0, "order %s has no stored PDF yet", v.public_id);
	if ((r = idem_effect_claim(db, order_id, "tickets", stale_ms, &claim, &claimed_at)) !=
	    SD_OK)
		return db_failure(res, job, r, "claim");
	if (claim == IDEM_DONE) {
		dup_absorbed(ctx, METRICS_UNIQUE_CLAIM, job, v.public_id);
		return JOB_DONE;
	}
	if (claim == IDEM_HELD) {
		dup_absorbed(ctx, METRICS_UNIQUE_CLAIM, job, v.public_id);
		/* another run sends right now; just past the stale limit it is
		 * sent, or its claim is stale and ours to take */
		res->delay_ms = stale_ms + 1;
		return JOB_RETRY_LATER;
	}
	failpoint(FP_SEND_CLAIMED);
	memset(&mr, 0, sizeof mr);
	if ((r = tickets_send_mail(env, &v, &mr)) != SD_OK) {
		/* the send may or may not have left; the retry follows the
		 * backoff, not the 2-minute claim, and carries the same key */
		enum sd_result rr = idem_effect_release(db, order_id, "tickets", claimed_at);
		(void)rr;
		if (mr.retry_later) {
			/* the provider holds our key in flight (an earlier attempt
			 * that timed out, or a run that took over a stale claim):
			 * it ends as one message either way; ask again soon.  The
			 * claim is given back too, or the next run would wait for
			 * it to go stale: the key, not the claim, guards the
			 * provider. */
			res->delay_ms = mr.retry_after_ms > 0 ? mr.retry_after_ms
							      : TICKETS_IN_FLIGHT_RETRY_MS;
			return JOB_RETRY_LATER;
		}
		/* the maildir is this box's own disk: a full or failing one is
		 * waited out; a provider's failure is a failed attempt */
		if (mail_is_local(env->mail))
			return disk_or_fail(res, job, r, r == SD_INVALID, "send");
		/* never back sooner than the provider asked (429, 503) */
		res->delay_ms = mr.retry_after_ms;
		return job_failf(res, r == SD_INVALID, "send: %s", err_msg());
	}
	failpoint(FP_SEND_SENT);
	if (mr.duplicate)	/* an earlier run's send: the provider's key held */
		dup_absorbed(ctx, METRICS_PROVIDER_KEY, job, v.public_id);
	/* send, then mark: a crash between them makes a second send, which
	 * the provider's key turns into the first one's answer */
	if ((r = idem_effect_done(db, order_id, "tickets", claimed_at, mr.message_id)) != SD_OK)
		return db_failure(res, job, r, "mark sent");
	return JOB_DONE;
}

static const char SQL_COUNT[] =
	"INSERT INTO sales_counters (event_id, orders, seats_sold) VALUES (?1, 1, ?2) "
	"ON CONFLICT (event_id) DO UPDATE SET orders = sales_counters.orders + 1, "
	"seats_sold = sales_counters.seats_sold + excluded.seats_sold";

/* Technique 4: the counter has no state to read; the job id is the key. */
enum job_outcome tickets_count(struct handler_ctx *ctx, const struct job *job,
			       struct job_result *res)
{
	struct db *db = handler_db(ctx);
	struct db_stmt *st;
	enum sd_result r;
	int64_t event_id = 0, seats = 0, order_id = 0;
	int first = 0;

	if (job_arg_int(job, "event_id", &event_id) != SD_OK ||
	    job_arg_int(job, "seats", &seats) != SD_OK || event_id < 1 || seats < 1)
		return job_failf(res, 1, "payload needs {\"event_id\": N, \"seats\": N}");
	if (!db)
		return db_failure(res, job, SD_DB, "open");
	failpoint(FP_COUNT_BEFORE);
	if ((r = db_begin(db)) != SD_OK)
		return db_failure(res, job, r, "begin");
	/* the job's identity and its effect commit together or not at all */
	if ((r = idem_once(db, job->job_id, job->kind, &first)) != SD_OK)
		goto fail;
	if (first) {
		if (!(st = db_stmt(db, SQL_COUNT))) {
			r = SD_DB;
			goto fail;
		}
		db_bind_int(st, 1, event_id);
		db_bind_int(st, 2, seats);
		if ((r = db_run(st)) != SD_OK)
			goto fail;
	}
	if ((r = db_commit(db)) != SD_OK)
		return db_failure(res, job, r, "commit");
	if (!first) {
		char order[24];

		/* the payload's order_id when it has one (the outbox's rows do) */
		if (job_arg_int(job, "order_id", &order_id) == SD_OK)
			snprintf(order, sizeof order, "%lld", (long long)order_id);
		else
			snprintf(order, sizeof order, "-");
		dup_absorbed(ctx, METRICS_PROCESSED_JOBS, job, order);
	}
	return JOB_DONE;
fail:
	db_rollback(db);
	return db_failure(res, job, r, "count");
}

const struct handler tickets_handlers[] = {
	{ "render_tickets", tickets_render },
	{ "send_tickets", tickets_send },
	{ "update_sales_counter", tickets_count },
	{ NULL, NULL },
};

/* ======================== showing an order =============================== */

static const char SQL_ORDER_BY_PUBLIC[] =
	"SELECT o.id, o.created_at, (SELECT count(*) FROM tickets t WHERE t.order_id = o.id "
	"AND t.pdf_key IS NOT NULL), s.claimed_at, s.sent_at, s.provider_message_id "
	"FROM orders o LEFT JOIN email_sends s ON s.order_id = o.id AND s.kind = 'tickets' "
	"WHERE o.public_id = ?1";
static const char SQL_TICKETS_SHOW[] =
	"SELECT id, seat_label, pdf_key, scanned_at FROM tickets WHERE order_id = ?1 ORDER BY seat_no";

struct show {
	struct db *db;
	json_t *jobs;		/* array of the order's jobs */
	enum sd_result r;
};

static void show_entry(const struct job_row *jr, void *arg)
{
	json_t *entries = arg;

	json_array_append_new(entries, json_pack("{s:s, s:I, s:I, s:s?}", "state", jr->state,
						 "deliveries", (json_int_t)jr->deliveries,
						 "attempts", (json_int_t)jr->attempts,
						 "last_error", jr->last_error));
}

static void show_outbox(const struct outbox_row *o, void *arg)
{
	struct show *sh = arg;
	char job_id[48];
	json_t *entries = json_array();

	snprintf(job_id, sizeof job_id, "outbox:%lld", (long long)o->id);
	if (sh->r == SD_OK)
		sh->r = queue_find_job(sh->db, job_id, show_entry, entries);
	json_array_append_new(sh->jobs, json_pack("{s:s, s:s, s:b, s:o}", "job_id", job_id,
						  "kind", o->kind, "published",
						  o->published_at != 0, "entries", entries));
}

static char *show_text(json_t *o)
{
	char *buf = NULL, when[64];
	size_t len = 0, i, k;
	FILE *f = open_memstream(&buf, &len);
	json_t *t, *j, *e;

	if (!f)
		return NULL;
	fprintf(f, "order    %s\n", json_string_value(json_object_get(o, "id")));
	fprintf(f, "event    %s, %s, %s\n", json_string_value(json_object_get(o, "event")),
		json_string_value(json_object_get(o, "venue")),
		json_string_value(json_object_get(o, "starts_at")));
	fprintf(f, "buyer    %s <%s>\n", json_string_value(json_object_get(o, "name")),
		json_string_value(json_object_get(o, "email")));
	fprintf(f, "seats    %lld\n", (long long)json_integer_value(json_object_get(o, "seats")));
	fprintf(f, "pdf      %s\n", json_is_true(json_object_get(o, "pdf_stored")) ?
		json_string_value(json_object_get(o, "pdf_key")) : "not stored yet");
	if (json_is_true(json_object_get(o, "email_sent"))) {
		tickets_time_format(json_integer_value(json_object_get(o, "email_sent_at")), when,
				    sizeof when);
		fprintf(f, "email    sent %s (%s)\n", when,
			json_string_value(json_object_get(o, "email_message_id")));
	} else {
		fprintf(f, "email    %s\n", json_is_null(json_object_get(o, "email_claimed_at")) ?
			"not sent yet" : "being sent (claimed, not yet confirmed)");
	}
	fprintf(f, "tickets\n");
	json_array_foreach(json_object_get(o, "tickets"), i, t) {
		json_t *sc = json_object_get(t, "scanned_at");
		if (json_is_integer(sc))
			tickets_time_format(json_integer_value(sc), when, sizeof when);
		fprintf(f, "  %-8s %s\n", json_string_value(json_object_get(t, "seat")),
			json_is_integer(sc) ? when : "not scanned");
	}
	fprintf(f, "jobs\n");
	json_array_foreach(json_object_get(o, "jobs"), i, j) {
		json_t *entries = json_object_get(j, "entries");
		fprintf(f, "  %-22s %-14s", json_string_value(json_object_get(j, "kind")),
			json_string_value(json_object_get(j, "job_id")));
		if (!json_is_true(json_object_get(j, "published")))
			fprintf(f, " waiting for the relay");
		json_array_foreach(entries, k, e)
			fprintf(f, " %s%s (deliveries %lld, attempts %lld)", k ? "; " : "",
				json_string_value(json_object_get(e, "state")),
				(long long)json_integer_value(json_object_get(e, "deliveries")),
				(long long)json_integer_value(json_object_get(e, "attempts")));
		fputc('\n', f);
	}
	fclose(f);
	return buf;
}

enum sd_result order_show(struct db *db, const char *public_id, int json, char **out)
{
	struct db_stmt *st;
	struct order_view v;
	struct show sh = { db, NULL, SD_OK };
	json_t *o = NULL, *tickets;
	enum sd_result r;
	char when[64], key[BLOB_KEY_MAX + 1];
	int64_t order_id, created_at, stored;
	int row = 0;

	*out = NULL;
	if (!(st = db_stmt(db, SQL_ORDER_BY_PUBLIC)))
		return SD_DB;
	db_bind_text(st, 1, public_id);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (!row) {
		db_reset(st);
		return err_set(SD_NOT_FOUND, "no order '%.40s'", public_id);
	}
	order_id = db_col_int(st, 0);
	created_at = db_col_int(st, 1);
	stored = db_col_int(st, 2);
	o = json_object();
	json_object_set_new(o, "email_claimed_at", db_col_is_null(st, 3) ? json_null() :
			    json_integer(db_col_int(st, 3)));
	json_object_set_new(o, "email_sent", json_boolean(!db_col_is_null(st, 4)));
	json_object_set_new(o, "email_sent_at", db_col_is_null(st, 4) ? json_null() :
			    json_integer(db_col_int(st, 4)));
	json_object_set_new(o, "email_message_id", db_col_is_null(st, 5) ? json_null() :
			    json_string(db_col_text(st, 5)));
	db_reset(st);
	if ((r = tickets_load_order(db, order_id, &v)) != SD_OK)
		goto out;
	tickets_time_format(v.starts_at, when, sizeof when);
	tickets_pdf_key(&v, key, sizeof key);
	json_object_set_new(o, "id", json_string(v.public_id));
	json_object_set_new(o, "event_id", json_integer(v.event_id));
	json_object_set_new(o, "event", json_string(v.event_name));
	json_object_set_new(o, "venue", json_string(v.venue));
	json_object_set_new(o, "starts_at", json_string(when));
	json_object_set_new(o, "name", json_string(v.buyer_name));
	json_object_set_new(o, "email", json_string(v.buyer_email));
	json_object_set_new(o, "seats", json_integer(v.seats));
	json_object_set_new(o, "created_at", json_integer(created_at));
	json_object_set_new(o, "pdf_stored", json_boolean(stored == v.n_tickets && stored > 0));
	json_object_set_new(o, "pdf_key", stored ? json_string(key) : json_null());
	tickets = json_array();
	json_object_set_new(o, "tickets", tickets);
	if (!(st = db_stmt(db, SQL_TICKETS_SHOW))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, order_id);
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			goto out;
		if (!row)
			break;
		json_array_append_new(tickets, json_pack("{s:I, s:s, s:b, s:o}", "id",
				(json_int_t)db_col_int(st, 0), "seat", db_col_text(st, 1),
				"pdf_stored", !db_col_is_null(st, 2), "scanned_at",
				db_col_is_null(st, 3) ? json_null() : json_integer(db_col_int(st, 3))));
	}
	db_reset(st);
	sh.jobs = json_array();
	json_object_set_new(o, "jobs", sh.jobs);
	if ((r = outbox_list_for_order(db, order_id, show_outbox, &sh)) != SD_OK ||
	    (r = sh.r) != SD_OK)
		goto out;
	*out = json ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : show_text(o);
	if (!*out)
		r = err_set(SD_NOMEM, "out of memory");
out:
	json_decref(o);
	return r;
}

/* ======================== door scans ===================================== */

static const char SQL_SCAN[] =
	"UPDATE tickets SET scanned_at = ?3 WHERE id = ?1 AND event_id = ?2 AND scanned_at IS NULL "
	"RETURNING id";
static const char SQL_SCAN_INFO[] =
	"SELECT t.seat_label, t.scanned_at, o.public_id FROM tickets t JOIN orders o "
	"ON o.id = t.order_id WHERE t.id = ?1 AND t.event_id = ?2";

/* door_refuses: the door's verdict on a ticket of event_id before any
 * write: [out] *refused 1 with res filled when it is the wrong event or the
 * doors are closed. */
static enum sd_result door_refuses(struct db *db, const struct scan_door *door, int64_t event_id,
				   int64_t now, struct scan_result *res, int *refused)
{
	struct event_view v;
	enum sd_result r;

	*refused = 0;
	if (!door || !door->event_id)
		return SD_OK;
	if ((r = event_get(db, event_id != door->event_id ? event_id : door->event_id, &v)) !=
	    SD_OK)
		return r == SD_NOT_FOUND ? SD_OK : r;	/* no event: the ticket is invalid */
	res->event_id = v.id;
	res->event_starts_at = v.starts_at;
	snprintf(res->event_name, sizeof res->event_name, "%s", v.name);
	if (event_id != door->event_id) {
		res->outcome = SCAN_WRONG_EVENT;
		*refused = 1;
		return SD_OK;
	}
	res->opens_at = v.starts_at - door->open_before_ms;
	res->closes_at = v.starts_at + door->close_after_ms;
	if (now < res->opens_at || now > res->closes_at) {
		res->outcome = SCAN_DOORS_CLOSED;
		*refused = 1;
	}
	return SD_OK;
}

enum sd_result ticket_scan(struct db *db, const unsigned char key[CODE_KEY_LEN],
			   const char *code, const struct scan_door *door,
			   struct scan_result *res)
{
	int64_t ticket_id, event_id, now = clock_now_ms();
	struct db_stmt *st;
	enum sd_result r;
	int won = 0, row = 0, refused = 0;

	memset(res, 0, sizeof *res);
	res->outcome = SCAN_INVALID;
	if (code_verify(key, code, &ticket_id, &event_id) != SD_OK)
		return SD_OK;	/* forged, truncated or garbage: invalid, not an error */
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = door_refuses(db, door, event_id, now, res, &refused)) != SD_OK || refused)
		goto out;
	res->outcome = SCAN_INVALID;
	if (!(st = db_stmt(db, SQL_SCAN))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, ticket_id);
	db_bind_int(st, 2, event_id);
	db_bind_int(st, 3, now);
	/* the conditional update admits once: two scanners racing on one
	 * ticket agree in the database on which one let the holder in */
	if ((r = idem_conditional(db, st, &won)) != SD_OK)
		goto out;
	if (!(st = db_stmt(db, SQL_SCAN_INFO))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, ticket_id);
	db_bind_int(st, 2, event_id);
	if ((r = db_step(st, &row)) != SD_OK)
		goto out;
	if (row) {
		snprintf(res->seat_label, sizeof res->seat_label, "%s", db_col_text(st, 0));
		res->scanned_at = db_col_int(st, 1);
		snprintf(res->order_id, sizeof res->order_id, "%s", db_col_text(st, 2));
		res->outcome = won ? SCAN_ADMITTED : SCAN_ALREADY;
	}
	db_reset(st);
out:
	return db_end(db, r);
}

/* ======================== an event's summary ============================= */

/* The counts come from event_totals (schema 0006), kept by triggers in the
 * transactions that change the rows: no count of orders or tickets here. */
static const char SQL_SUMMARY[] =
	"SELECT coalesce(t.orders, 0), coalesce(t.tickets, 0), "
	"coalesce(t.tickets - t.tickets_pdf, 0), coalesce(t.pdfs, 0), coalesce(t.emails_sent, 0), "
	"coalesce(c.orders, 0), coalesce(c.seats_sold, 0) FROM (SELECT ?1 AS id) e "
	"LEFT JOIN event_totals t ON t.event_id = e.id "
	"LEFT JOIN sales_counters c ON c.event_id = e.id";
static const char SQL_EVENT_ORDERS[] = "SELECT public_id FROM orders WHERE event_id = ?1";

enum sd_result tickets_event_summary(struct db *db, struct blob_store *blobs, int64_t event_id,
				     struct event_summary *s)
{
	struct db_stmt *st;
	enum sd_result r;
	char key[BLOB_KEY_MAX + 1];
	int row = 0;

	memset(s, 0, sizeof *s);
	if ((r = db_begin(db)) != SD_OK)	/* one snapshot for every count */
		return r;
	if (!(st = db_stmt(db, SQL_SUMMARY))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, event_id);
	if ((r = db_step(st, &row)) != SD_OK)
		goto out;
	if (row) {
		s->orders = db_col_int(st, 0);
		s->tickets = db_col_int(st, 1);
		s->tickets_without_pdf = db_col_int(st, 2);
		s->pdfs = db_col_int(st, 3);
		s->emails_sent = db_col_int(st, 4);
		s->counted_orders = db_col_int(st, 5);
		s->counted_seats = db_col_int(st, 6);
	}
	db_reset(st);
	if (!blobs)
		goto out;
	if (!(st = db_stmt(db, SQL_EVENT_ORDERS))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, event_id);
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK || !row)
			break;
		snprintf(key, sizeof key, "tickets/%s.pdf", db_col_text(st, 0));
		s->pdfs_missing += !blob_exists(blobs, key);
	}
	db_reset(st);
out:
	return db_end(db, r);
}

/* ======================== events as the API shows them ================== */

/* Orders and seats sold from event_totals, and the box's totals as their
 * sum: one row per event, whatever the number of orders. */
#define EVENT_VIEW_SQL \
	"SELECT e.id, e.name, e.venue, e.starts_at, e.capacity, e.created_at, " \
	"coalesce(t.orders, 0), coalesce(t.tickets, 0) FROM events e " \
	"LEFT JOIN event_totals t ON t.event_id = e.id "
static const char SQL_EVENT_GET[] = EVENT_VIEW_SQL "WHERE e.id = ?1";
static const char SQL_EVENT_EACH[] = EVENT_VIEW_SQL "ORDER BY e.id";
static const char SQL_TOTALS[] =
	"SELECT coalesce(sum(orders), 0), coalesce(sum(emails_sent), 0) FROM event_totals";

static void event_view_read(struct db_stmt *st, struct event_view *v)
{
	memset(v, 0, sizeof *v);
	v->id = db_col_int(st, 0);
	text_copy(v->name, sizeof v->name, db_col_text(st, 1));
	text_copy(v->venue, sizeof v->venue, db_col_text(st, 2));
	v->starts_at = db_col_int(st, 3);
	v->capacity = db_col_int(st, 4);
	v->created_at = db_col_int(st, 5);
	v->orders = db_col_int(st, 6);
	v->seats_sold = db_col_int(st, 7);
}

enum sd_result event_get(struct db *db, int64_t id, struct event_view *v)
{
	struct db_stmt *st = db_stmt(db, SQL_EVENT_GET);
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (row)
		event_view_read(st, v);
	db_reset(st);
	return row ? SD_OK : err_set(SD_NOT_FOUND, "no event %lld", (long long)id);
}

enum sd_result tickets_each_event(struct db *db, void (*fn)(const struct event_view *v,
							     void *arg), void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_EVENT_EACH);
	struct event_view v;
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		event_view_read(st, &v);
		fn(&v, arg);
	}
	db_reset(st);
	return SD_OK;
}

static const char SQL_ORDERS_RECENT[] =
	"SELECT o.public_id, o.event_id, o.seats, o.created_at, "
	"(SELECT count(*) > 0 AND count(*) = count(t.pdf_key) FROM tickets t "
	" WHERE t.order_id = o.id), "
	"CASE WHEN s.sent_at IS NOT NULL THEN 'sent' WHEN s.claimed_at IS NOT NULL "
	"THEN 'sending' ELSE 'pending' END "
	"FROM orders o LEFT JOIN email_sends s ON s.order_id = o.id AND s.kind = ?2 "
	"ORDER BY o.id DESC LIMIT ?1";

enum sd_result tickets_recent_orders(struct db *db, int limit,
				     void (*fn)(const struct order_recent *o, void *arg),
				     void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_ORDERS_RECENT);
	struct order_recent o;
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, limit > 0 ? limit : 1);
	db_bind_text(st, 2, "tickets");
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		memset(&o, 0, sizeof o);
		snprintf(o.id, sizeof o.id, "%s", db_col_text(st, 0));
		o.event_id = db_col_int(st, 1);
		o.seats = db_col_int(st, 2);
		o.created_at = db_col_int(st, 3);
		o.pdf_stored = db_col_int(st, 4) != 0;
		o.email = db_col_text(st, 5);
		fn(&o, arg);
	}
	db_reset(st);
	return SD_OK;
}

enum sd_result tickets_totals(struct db *db, int64_t *orders, int64_t *emails_sent)
{
	struct db_stmt *st = db_stmt(db, SQL_TOTALS);
	enum sd_result r;
	int row = 0;

	*orders = *emails_sent = 0;
	if (!st)
		return SD_DB;
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (row) {
		*orders = db_col_int(st, 0);
		*emails_sent = db_col_int(st, 1);
	}
	db_reset(st);
	return SD_OK;
}

/* ======================== invariant checks =============================== */

static const char SQL_CHECK_ORDERS[] =
	"SELECT o.id, o.public_id, o.event_id, o.seats, count(t.id), "
	"coalesce(sum(CASE WHEN t.pdf_key IS NULL THEN 1 ELSE 0 END), 0), count(DISTINCT t.pdf_key), min(t.pdf_key), "
	"(SELECT count(*) FROM email_sends s WHERE s.order_id = o.id AND s.kind = ?1), "
	"(SELECT count(*) FROM email_sends s WHERE s.order_id = o.id AND s.kind = ?1 "
	" AND s.sent_at IS NOT NULL) "
	"FROM orders o LEFT JOIN tickets t ON t.order_id = o.id GROUP BY o.id ORDER BY o.id";

enum sd_result tickets_check_orders(struct db *db, tickets_order_fn fn, void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_CHECK_ORDERS);
	struct order_check o;
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, "tickets");
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		o.id = db_col_int(st, 0);
		o.public_id = db_col_text(st, 1);
		o.event_id = db_col_int(st, 2);
		o.seats = db_col_int(st, 3);
		o.tickets = db_col_int(st, 4);
		o.tickets_without_pdf = db_col_int(st, 5);
		o.pdf_keys = db_col_int(st, 6);
		o.pdf_key = db_col_text(st, 7);
		o.emails = db_col_int(st, 8);
		o.emails_sent = db_col_int(st, 9);
		if (fn(&o, arg))
			break;
	}
	db_reset(st);
	return SD_OK;
}

/* orders.event_id has no index: one grouped pass over orders, not a
 * subquery per event. */
static const char SQL_CHECK_COUNTERS[] =
	"SELECT e.id, coalesce(c.orders, 0), coalesce(c.seats_sold, 0), "
	"coalesce(a.n, 0), coalesce(a.s, 0) FROM events e "
	"LEFT JOIN sales_counters c ON c.event_id = e.id "
	"LEFT JOIN (SELECT event_id, count(*) AS n, sum(seats) AS s FROM orders "
	" GROUP BY event_id) a ON a.event_id = e.id ORDER BY e.id";

enum sd_result tickets_check_counters(struct db *db, tickets_counter_fn fn, void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_CHECK_COUNTERS);
	struct counter_check c;
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		c.event_id = db_col_int(st, 0);
		c.counted_orders = db_col_int(st, 1);
		c.counted_seats = db_col_int(st, 2);
		c.orders = db_col_int(st, 3);
		c.seats = db_col_int(st, 4);
		if (fn(&c, arg))
			break;
	}
	db_reset(st);
	return SD_OK;
}

/* The full count that event_totals stands for: one grouped pass over each
 * table, as the migration that seeded it. */
static const char SQL_CHECK_TOTALS[] =
	"SELECT e.id, coalesce(k.orders, 0), coalesce(k.tickets, 0), coalesce(k.tickets_pdf, 0), "
	"coalesce(k.pdfs, 0), coalesce(k.emails_sent, 0), coalesce(o.n, 0), coalesce(t.n, 0), "
	"coalesce(t.pdf, 0), coalesce(p.n, 0), coalesce(s.n, 0) FROM events e "
	"LEFT JOIN event_totals k ON k.event_id = e.id "
	"LEFT JOIN (SELECT event_id, count(*) AS n FROM orders GROUP BY event_id) o "
	" ON o.event_id = e.id "
	"LEFT JOIN (SELECT event_id, count(*) AS n, count(pdf_key) AS pdf FROM tickets "
	" GROUP BY event_id) t ON t.event_id = e.id "
	"LEFT JOIN (SELECT event_id, count(*) AS n FROM (SELECT DISTINCT event_id, order_id, "
	" pdf_key FROM tickets WHERE pdf_key IS NOT NULL) AS d GROUP BY event_id) p "
	" ON p.event_id = e.id "
	"LEFT JOIN (SELECT o.event_id, count(*) AS n FROM email_sends es JOIN orders o "
	" ON o.id = es.order_id WHERE es.kind = ?1 AND es.sent_at IS NOT NULL "
	" GROUP BY o.event_id) s ON s.event_id = e.id ORDER BY e.id";

static void totals_read(struct db_stmt *st, int col, struct event_totals *t)
{
	t->orders = db_col_int(st, col);
	t->tickets = db_col_int(st, col + 1);
	t->tickets_pdf = db_col_int(st, col + 2);
	t->pdfs = db_col_int(st, col + 3);
	t->emails_sent = db_col_int(st, col + 4);
}

enum sd_result tickets_check_totals(struct db *db, tickets_totals_fn fn, void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_CHECK_TOTALS);
	struct totals_check c;
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, "tickets");
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		c.event_id = db_col_int(st, 0);
		totals_read(st, 1, &c.kept);
		totals_read(st, 6, &c.rows);
		if (fn(&c, arg))
			break;
	}
	db_reset(st);
	return SD_OK;
}
