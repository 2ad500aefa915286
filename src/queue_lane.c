/*
 * queue_lane.c: the stream's lanes taken whole (queue_lane.h).
 */
#include "queue_lane.h"

#include <stdio.h>

/* the kind's entries and dead letters into another lane, or all of them */
static const char SQL_MOVE_KIND[] = "UPDATE stream SET queue = ?2 WHERE queue = ?1 AND kind = ?3";
static const char SQL_DEAD_KIND[] =
	"UPDATE dead_jobs SET queue = ?2 WHERE queue = ?1 AND kind = ?3";
static const char SQL_MOVE_ALL[] = "UPDATE stream SET queue = ?2 WHERE queue = ?1";
static const char SQL_DEAD_ALL[] = "UPDATE dead_jobs SET queue = ?2 WHERE queue = ?1";
static const char SQL_WAITING[] = "SELECT count(*) FROM stream WHERE queue = ?1";
/* the live leases of a lane (every box, or one box's: leased_by in
 * [box "/", box "0")), and the earliest end among them (the partial index
 * stream_leases) */
static const char SQL_LIVE[] =
	"SELECT count(*), min(visible_at) FROM stream WHERE queue = ?1 AND queue <> 0 AND "
	"lease_token IS NOT NULL AND visible_at > ?2";
static const char SQL_LIVE_BOX[] =
	"SELECT count(*), min(visible_at) FROM stream WHERE queue = ?1 AND queue <> 0 AND "
	"lease_token IS NOT NULL AND visible_at > ?2 AND leased_by >= ?3 AND leased_by < ?4";

static enum sd_result move(struct db *db, const char *sql, int64_t from, int64_t to,
			   const char *kind)
{
	struct db_stmt *st = db_stmt(db, sql);

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, from);
	db_bind_int(st, 2, to);
	if (kind)
		db_bind_text(st, 3, kind);
	return db_run(st);
}

enum sd_result queue_lane_move(struct db *db, int64_t from, int64_t to, const char *kind)
{
	enum sd_result r;

	if ((r = move(db, kind ? SQL_MOVE_KIND : SQL_MOVE_ALL, from, to, kind)) != SD_OK)
		return r;
	return move(db, kind ? SQL_DEAD_KIND : SQL_DEAD_ALL, from, to, kind);
}

enum sd_result queue_lane_waiting(struct db *db, int64_t lane, int64_t *n)
{
	struct db_stmt *st = db_stmt(db, SQL_WAITING);
	int found;

	*n = 0;
	if (st)
		db_bind_int(st, 1, lane);
	return db_one_int(st, &found, n);
}

enum sd_result queue_lane_live(struct db *db, int64_t lane, int64_t now, const char *box,
			       int64_t *n, int64_t *end)
{
	struct db_stmt *st = db_stmt(db, box ? SQL_LIVE_BOX : SQL_LIVE);
	char lo[160], hi[160];
	enum sd_result r;
	int row;

	*n = 0;
	*end = -1;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, lane);
	db_bind_int(st, 2, now);
	if (box) {
		snprintf(lo, sizeof lo, "%s/", box);
		snprintf(hi, sizeof hi, "%s0", box);	/* '0' follows '/' */
		db_bind_text(st, 3, lo);
		db_bind_text(st, 4, hi);
	}
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	*n = row ? db_col_int(st, 0) : 0;
	*end = row && !db_col_is_null(st, 1) ? db_col_int(st, 1) : -1;
	db_reset(st);
	return SD_OK;
}
