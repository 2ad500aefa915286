/*
 * scans.c: the door (scans.h).
 *
 * Invariants:
 *  - a ticket is admitted by one scan only: the conditional update that
 *    sets scanned_at where it is NULL (technique 1), so two scanners racing
 *    on one ticket agree in the database on which one let the holder in;
 *  - a cancelled ticket is never admitted, an admitted one never cancelled
 *    (the same update's WHERE, and the schema's CHECK);
 *  - a scan, its log row and its count commit together; a door's nonce
 *    names one row (a partial unique index on the door's token, never its
 *    name), whose stored answer every retry with the same code gets;
 *  - a code that names no ticket writes no row: it is counted, in the
 *    per-minute counts every scan adds to (scan_minutes), which the door's
 *    figures are read from, so a flood of forged codes grows nothing but
 *    one row a door a minute.
 */
#define _GNU_SOURCE
#include "scans.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "events.h"
#include "idem.h"
#include "text.h"

static const char *const outcome_names[] = {
	[SCAN_ADMITTED] = "admitted",	      [SCAN_ALREADY] = "already_scanned",
	[SCAN_INVALID] = "invalid",	      [SCAN_WRONG_EVENT] = "wrong_event",
	[SCAN_DOORS_CLOSED] = "doors_closed", [SCAN_CANCELLED] = "cancelled",
	[SCAN_EVENT_CANCELLED] = "event_cancelled",
};

const char *scan_outcome_name(enum scan_outcome o)
{
	return (unsigned)o < sizeof outcome_names / sizeof outcome_names[0] ? outcome_names[o]
									      : "invalid";
}

/* ======================== the answer, as the log keeps it ================ */

/* The fields of a scan_result as one JSON object (the log's answer column):
 * what a retry with the same nonce gets back. */
static char *answer_dump(const struct scan_result *r)
{
	json_t *o = json_pack("{s:i, s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "outcome",
			      (int)r->outcome, "scanned_at", (json_int_t)r->scanned_at,
			      "scanned_by", r->scanned_by, "seat", r->seat_label, "order",
			      r->order_id, "event_id", (json_int_t)r->event_id, "starts_at",
			      (json_int_t)r->event_starts_at, "opens_at", (json_int_t)r->opens_at,
			      "closes_at", (json_int_t)r->closes_at, "event", r->event_name);
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	json_decref(o);
	return s;
}

static const char *field_text(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static enum sd_result answer_load(const char *text, struct scan_result *r)
{
	json_t *o = json_loads(text, 0, NULL);

	if (!o)
		return err_set(SD_DB, "a scan's stored answer is not JSON");
	r->outcome = (enum scan_outcome)json_integer_value(json_object_get(o, "outcome"));
	r->scanned_at = json_integer_value(json_object_get(o, "scanned_at"));
	text_copy(r->scanned_by, sizeof r->scanned_by, field_text(o, "scanned_by"));
	snprintf(r->seat_label, sizeof r->seat_label, "%s", field_text(o, "seat"));
	snprintf(r->order_id, sizeof r->order_id, "%s", field_text(o, "order"));
	r->event_id = json_integer_value(json_object_get(o, "event_id"));
	r->event_starts_at = json_integer_value(json_object_get(o, "starts_at"));
	r->opens_at = json_integer_value(json_object_get(o, "opens_at"));
	r->closes_at = json_integer_value(json_object_get(o, "closes_at"));
	text_copy(r->event_name, sizeof r->event_name, field_text(o, "event"));
	json_decref(o);
	r->replayed = 1;
	return SD_OK;
}

/* ======================== a scan ========================================= */

static const char SQL_NONCE[] =
	"SELECT answer, coalesce(code_sha, '') FROM scans WHERE door_id = ?1 AND nonce = ?2";
/* A code names its ticket by code_id (code.h), never by its row id. */
static const char SQL_ADMIT[] =
	"UPDATE tickets SET scanned_at = ?3, scanned_by = ?4 WHERE code_id = ?1 AND event_id = ?2 "
	"AND scanned_at IS NULL AND cancelled_at IS NULL RETURNING id";
static const char SQL_TICKET_INFO[] =
	"SELECT t.seat_label, coalesce(t.scanned_at, 0), coalesce(t.scanned_by, ''), "
	"t.cancelled_at IS NOT NULL, o.public_id, t.id FROM tickets t JOIN orders o "
	"ON o.id = t.order_id WHERE t.code_id = ?1 AND t.event_id = ?2";
/* a nonce another request of this door stored first: nothing inserted */
static const char SQL_LOG[] =
	"INSERT INTO scans (at, event_id, ticket_id, outcome, device, nonce, answer, door_id, "
	"code_sha) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (door_id, nonce) "
	"WHERE nonce IS NOT NULL DO NOTHING RETURNING id";
static const char SQL_COUNT[] =
	"INSERT INTO scan_minutes (event_id, minute, device, admitted, refused, last_at) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (event_id, minute, device) DO UPDATE SET "
	"admitted = scan_minutes.admitted + excluded.admitted, "
	"refused = scan_minutes.refused + excluded.refused, last_at = CASE WHEN "
	"excluded.last_at > scan_minutes.last_at THEN excluded.last_at ELSE scan_minutes.last_at "
	"END";

/* the stored answer of (device, nonce) into res; [out] *found */
/* nonce_answer: the answer by's nonce got, when it was stored: [out]
 * *found.  The nonce answers for the code it came with (code_sha): another
 * code under it is SD_CONFLICT, as a reused Idempotency-Key with another
 * body. */
static enum sd_result nonce_answer(struct db *db, const struct scan_by *by,
				   const char *code_sha, struct scan_result *res, int *found)
{
	struct db_stmt *st = db_stmt(db, SQL_NONCE);
	enum sd_result r;

	*found = 0;
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, by->door_id);
	db_bind_text(st, 2, by->nonce);
	if (db_next(st, &r)) {
		*found = 1;
		if (strcmp(db_col_text(st, 1), code_sha) != 0)
			r = err_set(SD_CONFLICT, "this nonce was sent with another code: a scan's "
				    "nonce names one code");
		else
			r = answer_load(db_col_text(st, 0), res);
	}
	db_reset(st);
	return r;
}

/* door_refuses: the door's verdict on a ticket of event_id before any
 * write: [out] *refused 1 with res filled when it is the wrong event, its
 * event is cancelled (at any door, the operator's too) or the doors are
 * closed. */
static enum sd_result door_refuses(struct db *db, const struct scan_door *door, int64_t event_id,
				   int64_t now, struct scan_result *res, int *refused)
{
	struct event_view v;
	enum sd_result r;

	*refused = 0;
	if ((r = event_get(db, event_id, &v)) != SD_OK)
		return r == SD_NOT_FOUND ? SD_OK : r;	/* no event: the ticket is invalid */
	res->event_id = v.id;
	res->event_starts_at = v.starts_at;
	snprintf(res->event_name, sizeof res->event_name, "%s", v.name);
	if (door && door->event_id && event_id != door->event_id) {
		res->outcome = SCAN_WRONG_EVENT;
		*refused = 1;
		return SD_OK;
	}
	if (v.cancelled_at) {
		res->outcome = SCAN_EVENT_CANCELLED;
		*refused = 1;
		return SD_OK;
	}
	if (!door || !door->event_id)
		return SD_OK;
	res->opens_at = v.starts_at - door->open_before_ms;
	res->closes_at = v.starts_at + door->close_after_ms;
	if (now < res->opens_at || now > res->closes_at) {
		res->outcome = SCAN_DOORS_CLOSED;
		*refused = 1;
	}
	return SD_OK;
}

/* admit: the conditional update of the ticket the code names, then what
 * the ticket says now.  [out] *ticket_id: its row, 0 when there is none. */
static enum sd_result admit(struct db *db, int64_t code_id, int64_t event_id, int64_t now,
			    const char *device, struct scan_result *res, int64_t *ticket_id)
{
	struct db_stmt *st = db_stmt(db, SQL_ADMIT);
	enum sd_result r;
	int won = 0;

	*ticket_id = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, code_id);
	db_bind_int(st, 2, event_id);
	db_bind_int(st, 3, now);
	db_bind_text(st, 4, device);
	if ((r = idem_conditional(db, st, &won)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_TICKET_INFO)))
		return SD_DB;
	db_bind_int(st, 1, code_id);
	db_bind_int(st, 2, event_id);
	if (db_next(st, &r)) {
		*ticket_id = db_col_int(st, 5);
		snprintf(res->seat_label, sizeof res->seat_label, "%s", db_col_text(st, 0));
		res->scanned_at = db_col_int(st, 1);
		text_copy(res->scanned_by, sizeof res->scanned_by, db_col_text(st, 2));
		snprintf(res->order_id, sizeof res->order_id, "%s", db_col_text(st, 4));
		res->outcome = db_col_int(st, 3) ? SCAN_CANCELLED :
			       won ? SCAN_ADMITTED : SCAN_ALREADY;
	}
	db_reset(st);
	return r;
}

/* the log's row: a scan that named a ticket; [out] *stored 0 when this
 * door's nonce was stored by another request meanwhile */
static enum sd_result scan_log(struct db *db, int64_t now, int64_t event_id, int64_t ticket_id,
			       const struct scan_by *by, const char *code_sha,
			       const struct scan_result *res, int *stored)
{
	struct db_stmt *st = db_stmt(db, SQL_LOG);
	char *answer = answer_dump(res);
	enum sd_result r;
	int row = 0;

	*stored = 0;
	if (!st || !answer) {
		free(answer);
		return st ? err_set(SD_NOMEM, "out of memory") : SD_DB;
	}
	db_bind_int(st, 1, now);
	if (event_id)
		db_bind_int(st, 2, event_id);
	else
		db_bind_null(st, 2);
	if (ticket_id)
		db_bind_int(st, 3, ticket_id);
	else
		db_bind_null(st, 3);
	/* the log's words are the schema's (0010): a ticket of a cancelled event
	 * is logged as cancelled; the stored answer keeps which */
	db_bind_text(st, 4, scan_outcome_name(res->outcome == SCAN_EVENT_CANCELLED ? SCAN_CANCELLED
										   : res->outcome));
	db_bind_text(st, 5, by->device);
	db_bind_text(st, 6, by->nonce);
	db_bind_text(st, 7, answer);
	db_bind_text(st, 8, by->door_id);
	db_bind_text(st, 9, code_sha);
	if ((r = db_step(st, &row)) == SD_OK)
		*stored = row;
	db_reset(st);
	free(answer);
	return r;
}

/* scan_count: the scan in its minute's counts (event 0: it named none) */
static enum sd_result scan_count(struct db *db, int64_t now, int64_t event_id,
				 const char *device, int admitted)
{
	struct db_stmt *st = db_stmt(db, SQL_COUNT);

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, now - now % 60000);
	db_bind_text(st, 3, device);
	db_bind_int(st, 4, admitted);
	db_bind_int(st, 5, !admitted);
	db_bind_int(st, 6, now);
	return db_run(st);
}

static enum sd_result nonce_valid(const char *nonce)
{
	const char *p;

	if (!nonce)
		return SD_OK;
	if (!*nonce || strlen(nonce) > SCAN_NONCE_MAX)
		return err_set(SD_INVALID, "nonce must be 1 to %d characters", SCAN_NONCE_MAX);
	for (p = nonce; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 127)
			return err_set(SD_INVALID, "nonce may hold only printable ASCII without "
				       "spaces");
	return SD_OK;
}

/* scan_judge: what the door says of the code, the ticket admitted when it
 * may be; [out] *signed_ok (the code is one of this box's), *ticket_id (0:
 * it named none, or was refused before the ticket was read), *event_id
 * (the count's and the log's event: the door's, else the code's, else 0) */
static enum sd_result scan_judge(struct db *db, const unsigned char key[CODE_KEY_LEN],
				 const char *code, const struct scan_door *door,
				 const char *device, int64_t now, struct scan_result *res,
				 int *signed_ok, int64_t *ticket_id, int64_t *event_id)
{
	int64_t code_id = 0, code_event = 0;
	enum sd_result r = SD_OK;
	int refused = 0;
	/* forged, truncated or garbage: invalid, not an error (and counted) */
	int valid = *signed_ok = code_verify(key, code, &code_id, &code_event) == SD_OK;

	*ticket_id = 0;
	*event_id = door && door->event_id ? door->event_id : valid ? code_event : 0;
	if (valid && (r = door_refuses(db, door, code_event, now, res, &refused)) == SD_OK &&
	    !refused) {
		res->outcome = SCAN_INVALID;
		r = admit(db, code_id, code_event, now, device, res, ticket_id);
	}
	if (r == SD_OK && res->outcome == SCAN_INVALID)
		*ticket_id = 0;	/* no such ticket: the log names none */
	return r;
}

enum sd_result scan_ticket(struct db *db, const unsigned char key[CODE_KEY_LEN],
			   const char *code, const struct scan_door *door,
			   const struct scan_by *by, struct scan_result *res)
{
	int64_t ticket_id = 0, event_id = 0, now = clock_now_ms();
	char code_sha[CODE_SHA256_HEX + 1];
	enum sd_result r;
	int found = 0, stored = 1, signed_ok = 0;

	memset(res, 0, sizeof *res);
	res->outcome = SCAN_INVALID;
	if ((r = nonce_valid(by->nonce)) != SD_OK ||
	    (r = text_check("door", by->device, SCAN_DEVICE_MAX)) != SD_OK)
		return r;
	if (by->nonce && !by->door_id)
		return err_set(SD_INVALID, "a scan's nonce needs the door's token");
	code_sha256_hex(code ? code : "", code ? strlen(code) : 0, code_sha);
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (by->nonce && ((r = nonce_answer(db, by, code_sha, res, &found)) != SD_OK || found))
		goto out;
	if ((r = scan_judge(db, key, code, door, by->device, now, res, &signed_ok, &ticket_id,
			    &event_id)) != SD_OK)
		goto out;
	/* a code that is none of ours (forged, mistyped) is counted, never
	 * stored row by row; one of ours is the log's, whatever its answer */
	if (signed_ok && res->outcome != SCAN_INVALID &&
	    (r = scan_log(db, now, event_id, ticket_id, by, code_sha, res, &stored)) != SD_OK)
		goto out;
	if (stored)
		r = scan_count(db, now, event_id, by->device, res->outcome == SCAN_ADMITTED);
out:
	if (r == SD_OK && !stored) {
		/* another request of this door with this nonce won: its answer,
		 * and nothing of ours */
		db_rollback(db);
		memset(res, 0, sizeof *res);
		if ((r = nonce_answer(db, by, code_sha, res, &found)) == SD_OK && !found)
			r = err_set(SD_DB, "a scan's nonce was stored and is gone");
		return r;
	}
	return db_end(db, r);
}

/* ======================== the night ====================================== */

/* the counts every scan adds to, read by their key (event_id, minute) */
static const char SQL_MINUTES[] =
	"SELECT minute, sum(admitted), sum(refused) FROM scan_minutes WHERE event_id = ?1 "
	"AND minute >= ?2 - ?2 % 60000 GROUP BY minute ORDER BY minute DESC LIMIT ?3";
static const char SQL_DOORS[] =
	"SELECT device, sum(admitted), sum(refused), max(last_at) FROM scan_minutes "
	"WHERE event_id = ?1 GROUP BY device ORDER BY device LIMIT ?2";

enum sd_result scan_stats_get(struct db *db, int64_t event_id, int64_t since_ms,
			      struct scan_stats *s)
{
	struct db_stmt *st;
	struct scan_minute t;
	enum sd_result r;
	int i;

	memset(s, 0, sizeof *s);
	if ((r = db_begin_snapshot(db)) != SD_OK)	/* one snapshot */
		return r;
	if (!(st = db_stmt(db, SQL_MINUTES))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, since_ms);
	db_bind_int(st, 3, SCAN_MINUTES_MAX);
	while (db_next(st, &r) && s->n_minutes < SCAN_MINUTES_MAX)
		s->minutes[s->n_minutes++] = (struct scan_minute){ db_col_int(st, 0),
								   db_col_int(st, 1),
								   db_col_int(st, 2) };
	db_reset(st);
	for (i = 0; i < s->n_minutes / 2; i++) {
		t = s->minutes[i];
		s->minutes[i] = s->minutes[s->n_minutes - 1 - i];
		s->minutes[s->n_minutes - 1 - i] = t;
	}
	if (r != SD_OK || !(st = db_stmt(db, SQL_DOORS))) {
		r = r != SD_OK ? r : SD_DB;
		goto out;
	}
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, SCAN_DOORS_MAX);
	while (db_next(st, &r) && s->n_doors < SCAN_DOORS_MAX) {
		struct scan_door_count *d = &s->doors[s->n_doors++];
		text_copy(d->door, sizeof d->door, db_col_text(st, 0));
		d->admitted = db_col_int(st, 1);
		d->refused = db_col_int(st, 2);
		d->last_at = db_col_int(st, 3);
	}
	db_reset(st);
out:
	return db_end(db, r);
}

/* ======================== forgetting ===================================== */

/* the log's rows of events that started before ?1; then of no event, made
 * before ?1 (scans_event, scans_at); the per-minute counts stay */
static const char SQL_PRUNE_EVENTS[] =
	"DELETE FROM scans WHERE id IN (SELECT s.id FROM events e JOIN scans s "
	"ON s.event_id = e.id WHERE e.starts_at < ?1 LIMIT ?2)";
static const char SQL_PRUNE_NO_EVENT[] =
	"DELETE FROM scans WHERE id IN (SELECT id FROM scans WHERE event_id IS NULL "
	"AND at < ?1 LIMIT ?2)";

enum sd_result scan_log_prune(struct db *db, int64_t retention_ms, int64_t now, int64_t limit,
			      int64_t *n)
{
	const char *const sql[] = { SQL_PRUNE_EVENTS, SQL_PRUNE_NO_EVENT };
	struct db_stmt *st;
	enum sd_result r;
	size_t i;

	*n = 0;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	for (i = 0; i < sizeof sql / sizeof sql[0] && r == SD_OK && *n < limit; i++) {
		if (!(st = db_stmt(db, sql[i]))) {
			r = SD_DB;
			break;
		}
		db_bind_int(st, 1, now - retention_ms);
		db_bind_int(st, 2, limit - *n);
		if ((r = db_run(st)) == SD_OK)
			*n += db_changes(db);
	}
	return db_end(db, r);
}
