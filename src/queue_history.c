/*
 * queue_history.c: the queue's last hour (queue_history.h).
 *
 * Each row is what the maintenance pass saw in one minute: the depth by
 * state (queue_count_by_state) and the running totals of done jobs and
 * failed attempts (done_totals, kept by the queue in the transactions that
 * finish or fail a job).  A row of the hour before is overwritten, never
 * deleted: the table holds 60 rows at most.
 */
#include "queue_history.h"

#include <string.h>

#include "queue.h"

static const char SQL_SLOT[] = "SELECT minute FROM queue_history WHERE slot = ?1";
static const char SQL_PUT[] =
	"INSERT INTO queue_history (slot, minute, ready, scheduled, leased, dead, done, failed) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (slot) DO UPDATE SET "
	"minute = excluded.minute, ready = excluded.ready, scheduled = excluded.scheduled, "
	"leased = excluded.leased, dead = excluded.dead, done = excluded.done, "
	"failed = excluded.failed";
static const char SQL_READ[] =
	"SELECT minute, ready, scheduled, leased, dead, done, failed FROM queue_history "
	"WHERE minute > ?1 AND minute <= ?2 ORDER BY minute";

enum sd_result queue_history_record(struct db *db, int64_t now, int *written)
{
	struct queue_counts c;
	struct db_stmt *st;
	enum sd_result r;
	int64_t minute = now - now % 60000, slot = (minute / 60000) % QUEUE_HISTORY_MINUTES;
	int64_t done = 0, failed = 0;
	int have = 0;

	if (written)
		*written = 0;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_SLOT))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, slot);
	if (db_next(st, &r))
		have = db_col_int(st, 0) == minute;
	db_reset(st);
	if (r != SD_OK || have)
		goto out;
	if ((r = queue_count_by_state(db, &c)) != SD_OK ||
	    (r = queue_totals_sum(db, &done, &failed)) != SD_OK)
		goto out;
	if (!(st = db_stmt(db, SQL_PUT))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, slot);
	db_bind_int(st, 2, minute);
	db_bind_int(st, 3, c.ready);
	db_bind_int(st, 4, c.scheduled);
	db_bind_int(st, 5, c.leased);
	db_bind_int(st, 6, c.dead);
	db_bind_int(st, 7, done);
	db_bind_int(st, 8, failed);
	if ((r = db_run(st)) == SD_OK && written)
		*written = 1;
out:
	return db_end(db, r);
}

enum sd_result queue_history_read(struct db *db, int64_t now, struct queue_minute *out, int *n)
{
	struct db_stmt *st = db_stmt(db, SQL_READ);
	enum sd_result r;
	int64_t done_before = -1, failed_before = -1, done, failed;

	*n = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, now - QUEUE_HISTORY_MINUTES * 60000LL);
	db_bind_int(st, 2, now);
	while (db_next(st, &r) && *n < QUEUE_HISTORY_MINUTES) {
		struct queue_minute *m = &out[(*n)++];

		m->minute = db_col_int(st, 0);
		m->ready = db_col_int(st, 1);
		m->scheduled = db_col_int(st, 2);
		m->leased = db_col_int(st, 3);
		m->dead = db_col_int(st, 4);
		done = db_col_int(st, 5);
		failed = db_col_int(st, 6);
		/* a total that went down (a database made again) counts from 0 */
		m->done = done_before < 0 || done < done_before ? 0 : done - done_before;
		m->failed = failed_before < 0 || failed < failed_before ? 0 : failed - failed_before;
		done_before = done;
		failed_before = failed;
	}
	db_reset(st);
	return r;
}
