/*
 * queue_history.h: the queue's last hour, one row a minute, for the
 * dashboard's pictures: the depth by state and the jobs done and attempts
 * failed so far, as the maintenance pass sees them.  A ring of 60 rows
 * (schema 0010 queue_history, slot = minute of the hour): a read or a
 * write costs the same after a year as after a day.
 */
#ifndef SD_QUEUE_HISTORY_H
#define SD_QUEUE_HISTORY_H

#include <stdint.h>

#include "db.h"
#include "result.h"

#define QUEUE_HISTORY_MINUTES 60

struct queue_minute {
	int64_t minute;			/* ms: the start of the minute */
	int64_t ready, scheduled, leased, dead;
	int64_t done, failed;		/* during that minute (since the row before) */
};

/*
 * queue_history_record: the minute of now into its slot, unless that slot
 * already holds this minute (a pass more than once a minute writes once).
 * [out] *written (may be NULL).
 */
enum sd_result queue_history_record(struct db *db, int64_t now, int *written);

/*
 * queue_history_read: the last hour's minutes before now, oldest first,
 * with done and failed as what happened since the row before (the first
 * row of the hour: 0).  [out] out[0..*n), at most QUEUE_HISTORY_MINUTES.
 */
enum sd_result queue_history_read(struct db *db, int64_t now, struct queue_minute *out, int *n);

#endif
