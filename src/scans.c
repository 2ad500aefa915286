/*
 * scans.c: the door (scans.h).
 *
 * Invariants:
 *  - a ticket is admitted by one scan only: the conditional update that
 *    sets scanned_at where it is NULL (technique 1), so two scanners racing
 *    on one ticket agree in the database on which one let the holder in;
 *  - a cancelled ticket is never admitted, an admitted one never cancelled
 *    (the same update's WHERE, and the schema's CHECK);
 *  - a scan and its log row commit together; a device's nonce names one
 *    row (a partial unique index), whose stored answer every retry gets.
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

static const char SQL_NONCE[] = "SELECT answer FROM scans WHERE device = ?1 AND nonce = ?2";
/* A code names its ticket by code_id (code.h), never by its row id. */
static const char SQL_ADMIT[] =
	"UPDATE tickets SET scanned_at = ?3, scanned_by = ?4 WHERE code_id = ?1 AND event_id = ?2 "
	"AND scanned_at IS NULL AND cancelled_at IS NULL RETURNING id";
static const char SQL_TICKET_INFO[] =
	"SELECT t.seat_label, coalesce(t.scanned_at, 0), coalesce(t.scanned_by, ''), "
	"t.cancelled_at IS NOT NULL, o.public_id, t.id FROM tickets t JOIN orders o "
	"ON o.id = t.order_id WHERE t.code_id = ?1 AND t.event_id = ?2";
/* a nonce another request of this device stored first: nothing inserted */
static const char SQL_LOG[] =
	"INSERT INTO scans (at, event_id, ticket_id, outcome, device, nonce, answer) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (device, nonce) WHERE nonce IS NOT NULL "
	"DO NOTHING RETURNING id";

/* the stored answer of (device, nonce) into res; [out] *found */
static enum sd_result nonce_answer(struct db *db, const char *device, const char *nonce,
				   struct scan_result *res, int *found)
{
	struct db_stmt *st = db_stmt(db, SQL_NONCE);
	enum sd_result r;
	int row = 0;

	*found = 0;
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, device);
	db_bind_text(st, 2, nonce);
	if ((r = db_step(st, &row)) == SD_OK && row) {
		*found = 1;
		r = answer_load(db_col_text(st, 0), res);
	}
	db_reset(st);
	return r;
}

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
	if ((r = event_get(db, event_id, &v)) != SD_OK)
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

/* admit: the conditional update of the ticket the code names, then what
 * the ticket says now.  [out] *ticket_id: its row, 0 when there is none. */
static enum sd_result admit(struct db *db, int64_t code_id, int64_t event_id, int64_t now,
			    const char *device, struct scan_result *res, int64_t *ticket_id)
{
	struct db_stmt *st = db_stmt(db, SQL_ADMIT);
	enum sd_result r;
	int won = 0, row = 0;

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
	if ((r = db_step(st, &row)) == SD_OK && row) {
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

/* the log's row; [out] *stored 0 when this device's nonce was stored by
 * another request meanwhile */
static enum sd_result scan_log(struct db *db, int64_t now, int64_t event_id, int64_t ticket_id,
			       const char *device, const char *nonce,
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
	db_bind_text(st, 4, scan_outcome_name(res->outcome));
	db_bind_text(st, 5, device);
	db_bind_text(st, 6, nonce);
	db_bind_text(st, 7, answer);
	if ((r = db_step(st, &row)) == SD_OK)
		*stored = row;
	db_reset(st);
	free(answer);
	return r;
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

enum sd_result scan_ticket(struct db *db, const unsigned char key[CODE_KEY_LEN],
			   const char *code, const struct scan_door *door, const char *device,
			   const char *nonce, struct scan_result *res)
{
	int64_t code_id = 0, ticket_id = 0, event_id = 0, now = clock_now_ms();
	enum sd_result r;
	int refused = 0, found = 0, stored = 1, valid;

	memset(res, 0, sizeof *res);
	res->outcome = SCAN_INVALID;
	if ((r = nonce_valid(nonce)) != SD_OK ||
	    (r = text_check("door", device, SCAN_DEVICE_MAX)) != SD_OK)
		return r;
	/* forged, truncated or garbage: invalid, not an error (and logged) */
	valid = code_verify(key, code, &code_id, &event_id) == SD_OK;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (nonce && ((r = nonce_answer(db, device, nonce, res, &found)) != SD_OK || found))
		goto out;
	if (valid && (r = door_refuses(db, door, event_id, now, res, &refused)) == SD_OK &&
	    !refused) {
		res->outcome = SCAN_INVALID;
		r = admit(db, code_id, event_id, now, device, res, &ticket_id);
	}
	if (r != SD_OK)
		goto out;
	if (res->outcome == SCAN_INVALID)
		ticket_id = 0;	/* no such ticket: the log names none */
	r = scan_log(db, now, door && door->event_id ? door->event_id : valid ? event_id : 0,
		     ticket_id, device, nonce, res, &stored);
out:
	if (r == SD_OK && !stored) {
		/* another request of this device with this nonce won: its answer,
		 * and nothing of ours */
		db_rollback(db);
		memset(res, 0, sizeof *res);
		if ((r = nonce_answer(db, device, nonce, res, &found)) == SD_OK && !found)
			r = err_set(SD_DB, "a scan's nonce was stored and is gone");
		return r;
	}
	return db_end(db, r);
}

/* ======================== the night ====================================== */

static const char SQL_MINUTES[] =
	"SELECT at - at % 60000 AS m, "
	"coalesce(sum(CASE WHEN outcome = 'admitted' THEN 1 ELSE 0 END), 0), "
	"coalesce(sum(CASE WHEN outcome = 'admitted' THEN 0 ELSE 1 END), 0) "
	"FROM scans WHERE event_id = ?1 AND at >= ?2 GROUP BY m ORDER BY m DESC LIMIT ?3";
static const char SQL_DOORS[] =
	"SELECT device, coalesce(sum(CASE WHEN outcome = 'admitted' THEN 1 ELSE 0 END), 0), "
	"coalesce(sum(CASE WHEN outcome = 'admitted' THEN 0 ELSE 1 END), 0), max(at) "
	"FROM scans WHERE event_id = ?1 GROUP BY device ORDER BY device LIMIT ?2";

enum sd_result scan_stats_get(struct db *db, int64_t event_id, int64_t since_ms,
			      struct scan_stats *s)
{
	struct db_stmt *st;
	struct scan_minute t;
	enum sd_result r;
	int row = 0, i;

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
	while ((r = db_step(st, &row)) == SD_OK && row && s->n_minutes < SCAN_MINUTES_MAX)
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
	while ((r = db_step(st, &row)) == SD_OK && row && s->n_doors < SCAN_DOORS_MAX) {
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
