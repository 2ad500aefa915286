/*
 * scans.h: the door.  A scan admits a ticket once (a conditional update that
 * one scanner wins), at the door's event and only while its doors are open;
 * every scan, admitted or not, is a row of the scan log with the door that
 * made it and the answer it got, so that a door that asks again with the
 * same nonce (a phone on flaky Wi-Fi) gets the first answer, and the night
 * can be drawn: admissions per minute and per door.
 */
#ifndef SD_SCANS_H
#define SD_SCANS_H

#include <stdint.h>

#include "code.h"
#include "db.h"
#include "result.h"
#include "text.h"
#include "tickets.h"

enum scan_outcome { SCAN_ADMITTED, SCAN_ALREADY, SCAN_INVALID, SCAN_WRONG_EVENT,
		    SCAN_DOORS_CLOSED, SCAN_CANCELLED, SCAN_EVENT_CANCELLED };

/* scan_outcome_name: "admitted", "already_scanned", "invalid", "wrong_event",
 * "doors_closed", "cancelled", "event_cancelled" (the API's words and the
 * log's). */
const char *scan_outcome_name(enum scan_outcome o);

/* Where a scan happens: a door bound to one event, open from open_before_ms
 * before it starts until close_after_ms after.  NULL or event_id 0: any
 * event, any time (the operator's scans). */
struct scan_door {
	int64_t event_id;
	int64_t open_before_ms, close_after_ms;
};

#define SCAN_DEVICE_MAX 220	/* a door's name: its token's, or "cli" */
#define SCAN_NONCE_MAX 100

struct scan_result {
	enum scan_outcome outcome;
	int replayed;			/* the answer of an earlier scan with this nonce */
	int64_t scanned_at;		/* when admitted (now, or the first time) */
	char scanned_by[SCAN_DEVICE_MAX + 1];	/* the door that admitted it */
	char seat_label[32];
	char order_id[ORDER_ID_MAX];
	/* SCAN_WRONG_EVENT: the ticket's event; SCAN_DOORS_CLOSED: the door's,
	 * with the window */
	int64_t event_id, event_starts_at, opens_at, closes_at;
	char event_name[TEXT_FIELD_MAX + 1];
};

/* Who scans: the door's name, as the log and the counts show it; its
 * token's identity (TOKEN_ID_LEN hex digits, token.h), which its nonces
 * belong to; and this scan's nonce (may be NULL; the command line has
 * neither). */
struct scan_by {
	const char *device;
	const char *door_id;
	const char *nonce;
};

/*
 * scan_ticket: admit the ticket a code names, once, at door (NULL:
 * anywhere), scanned by `by`.  A ticket of another event than the door's is
 * SCAN_WRONG_EVENT, a ticket of a cancelled event SCAN_EVENT_CANCELLED (at
 * any door), any ticket outside the door's window SCAN_DOORS_CLOSED, a
 * cancelled one SCAN_CANCELLED: none is marked scanned.  The scan, its
 * log row (a code of this box's) and its minute's count commit together; a
 * code that is none of the box's is counted only.  The same door and nonce
 * with the same code again returns the first answer (res->replayed) and
 * changes nothing; with another code it is SD_CONFLICT.  SD_INVALID: a
 * nonce of more than SCAN_NONCE_MAX bytes or not printable ASCII, or one
 * without a door_id.
 */
enum sd_result scan_ticket(struct db *db, const unsigned char key[CODE_KEY_LEN],
			   const char *code, const struct scan_door *door,
			   const struct scan_by *by, struct scan_result *res);

/*
 * scan_log_prune: the scan log's rows of events that started more than
 * retention_ms before now (rows of no event: made that long before), at
 * most limit of them; their per-minute counts stay.  [out] *n removed.
 */
enum sd_result scan_log_prune(struct db *db, int64_t retention_ms, int64_t now, int64_t limit,
			      int64_t *n);

/* ---- the night, as the door saw it -------------------------------------- */

#define SCAN_MINUTES_MAX 360	/* six hours of a door, minute by minute */
#define SCAN_DOORS_MAX 32

struct scan_minute {
	int64_t minute;		/* ms: the start of the minute */
	int64_t admitted, refused;
};

struct scan_door_count {
	char door[SCAN_DEVICE_MAX + 1];
	int64_t admitted, refused, last_at;
};

struct scan_stats {
	int n_minutes, n_doors;
	struct scan_minute minutes[SCAN_MINUTES_MAX];	/* oldest first, empty ones left out */
	struct scan_door_count doors[SCAN_DOORS_MAX];	/* by name */
};

/* scan_stats_get: event_id's scans by the minute since since_ms (at most
 * the newest SCAN_MINUTES_MAX minutes) and by door (all of them), read by
 * the index (event_id, at).  [out] *s. */
enum sd_result scan_stats_get(struct db *db, int64_t event_id, int64_t since_ms,
			      struct scan_stats *s);

#endif
