/*
 * schedule.c: periodic jobs (schedule.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "schedule.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "sqs_store.h"
#include "timefmt.h"
#include "tz.h"

enum sd_result schedule_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n < 1 || n > SCHEDULE_NAME_MAX ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-.") != n)
		return err_set(SD_INVALID, "a schedule's name is 1 to %d of a-z 0-9 _ - .",
			       SCHEDULE_NAME_MAX);
	return SD_OK;
}

/* when: how a schedule's periods come: every every_ms, or c's times in z */
struct when {
	int64_t every_ms;
	struct cron c;
	struct tz *z;
};

/* when_open: s's periods.  A cron's zone that no longer loads (the tz
 * database lost it) falls back to UTC with a warning; [out] w (when_close). */
static enum sd_result when_open(const struct schedule *s, struct when *w)
{
	const char *zone = s->timezone[0] ? s->timezone : timefmt_zone_name();
	enum sd_result r;

	memset(w, 0, sizeof *w);
	if ((w->every_ms = s->every_ms) > 0)
		return SD_OK;
	if ((r = cron_parse(s->cron, &w->c)) != SD_OK)
		return r;
	if (tz_load(zone, &w->z) == SD_OK)
		return SD_OK;
	log_event(LOG_WARN, "schedule zone unreadable", "schedule=%s timezone=%s using=UTC",
		  s->name, zone);
	return tz_load("UTC", &w->z);
}

static void when_close(struct when *w)
{
	tz_free(w->z);
	w->z = NULL;
}

/* the first period's start after t (ms); -1 when none comes */
static int64_t period_after(const struct when *w, int64_t t)
{
	int64_t s;

	if (w->every_ms)
		return (t / w->every_ms + 1) * w->every_ms;
	s = cron_next(&w->c, w->z, t / 1000);
	return s < 0 ? -1 : s * 1000;
}

/* the latest period's start at or before now, given one at from <= now:
 * looked for in a window before now that doubles until it holds one, so
 * a cron due every minute and down a month is not walked minute by minute */
static int64_t period_latest(const struct when *w, int64_t from, int64_t now)
{
	int64_t win = 60000, lo, p, q;

	if (w->every_ms)
		return now / w->every_ms * w->every_ms;
	for (;;) {
		lo = now - win < from - 1 ? from - 1 : now - win;
		if ((p = period_after(w, lo)) >= 0 && p <= now)
			break;
		if (lo == from - 1)
			return from;
		win *= 2;
	}
	while ((q = period_after(w, p)) >= 0 && q <= now)
		p = q;
	return p;
}

static const char SQL_COUNT[] = "SELECT count(*) FROM schedules";
static const char SQL_INSERT[] =
	"INSERT INTO schedules (name, kind, payload, every_ms, cron, timezone, missed, next_at, "
	"created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT (name) DO NOTHING";

static enum sd_result add_checked(struct db *db, struct schedule *s, const char *payload)
{
	struct db_stmt *st;
	enum sd_result r;
	int64_t n = 0, changed = 0;
	int found;

	if ((r = db_one_int(db_stmt(db, SQL_COUNT), &found, &n)) != SD_OK)
		return r;
	if (n >= SCHEDULE_MAX)
		return err_set(SD_LIMITED, "a database holds %d schedules at most", SCHEDULE_MAX);
	if (!(st = db_stmt(db, SQL_INSERT)))
		return SD_DB;
	db_bind_text(st, 1, s->name);
	db_bind_text(st, 2, s->kind);
	db_bind_text(st, 3, payload);
	if (s->every_ms)
		db_bind_int(st, 4, s->every_ms);
	else
		db_bind_null(st, 4);
	if (s->cron[0])
		db_bind_text(st, 5, s->cron);
	else
		db_bind_null(st, 5);
	if (s->timezone[0])
		db_bind_text(st, 6, s->timezone);
	else
		db_bind_null(st, 6);
	db_bind_text(st, 7, s->skip_missed ? "skip" : "once");
	db_bind_int(st, 8, s->next_at);
	db_bind_int(st, 9, s->created_at);
	if ((r = db_run_changes(db, st, &changed)) != SD_OK)
		return r;
	return changed ? SD_OK : err_set(SD_CONFLICT, "a schedule named %s exists already", s->name);
}

static int is_sqs(const char *kind)
{
	return strncmp(kind, QUEUE_SQS_PREFIX, strlen(QUEUE_SQS_PREFIX)) == 0;
}

/*
 * sqs_message: the message of a schedule on SQS queue kind ("sqs:<queue>"):
 * the payload as its body, the period's id as its attribute
 * "stagedoor.period" (for a consumer to record with its effect); on a FIFO
 * queue, in group "schedule.<name>", deduplicated by the period's id.
 * [out] *q (sqs_queue_clear), *m (m->attrs: json_decref); neither when
 * it fails.
 */
static enum sd_result sqs_message(struct db *db, const char *kind, const char *name,
				  const char *payload, const char *period_id,
				  struct sqs_queue *q, struct sqs_send *m, char *group, size_t size)
{
	enum sd_result r;

	memset(m, 0, sizeof *m);
	if ((r = sqs_queue_find(db, kind + strlen(QUEUE_SQS_PREFIX), q)) != SD_OK)
		return r == SD_NOT_FOUND ? err_set(SD_NOT_FOUND, "no SQS queue named %s",
						   kind + strlen(QUEUE_SQS_PREFIX)) : r;
	snprintf(group, size, "schedule.%s", name);
	m->body = payload;
	m->body_len = strlen(payload);
	m->delay_s = -1;
	m->group = q->fifo ? group : NULL;
	m->dedup = q->fifo ? period_id : NULL;
	m->sender = "schedule";
	if (!(m->attrs = json_pack("{s:{s:s, s:s}}", "stagedoor.period", "DataType", "String",
				   "StringValue", period_id)))
		r = err_set(SD_NOMEM, "out of memory");
	else
		r = sqs_send_check(q, m);
	if (r != SD_OK) {
		json_decref(m->attrs);
		m->attrs = NULL;
		sqs_queue_clear(q);
	}
	return r;
}

/* sqs_probe: schedule name's payload can go to SQS queue kind as a message */
static enum sd_result sqs_probe(struct db *db, const char *kind, const char *name,
				const char *payload)
{
	char group[SCHEDULE_NAME_MAX + 16];
	struct sqs_queue q;
	struct sqs_send m;
	enum sd_result r;

	if ((r = sqs_message(db, kind, name, payload, "schedule:x:0", &q, &m, group,
			     sizeof group)) == SD_OK) {
		json_decref(m.attrs);
		sqs_queue_clear(&q);
	}
	return r;
}

/* make_job: s's job for the period period_id, in the caller's transaction:
 * an entry of its kind, or a message on its SQS queue */
static enum sd_result make_job(struct db *db, const struct schedule *s, const char *period_id)
{
	char group[SCHEDULE_NAME_MAX + 16];
	struct enqueue e = { 0 };
	struct sqs_queue q;
	struct sqs_send m;
	struct sqs_sent sent;
	enum sd_result r;

	if (!is_sqs(s->kind)) {
		e.kind = s->kind;
		e.payload = s->payload;
		e.job_id = period_id;
		return queue_enqueue(db, &e, NULL);
	}
	if ((r = sqs_message(db, s->kind, s->name, s->payload, period_id, &q, &m, group,
			     sizeof group)) != SD_OK)
		return r;
	r = sqs_send_many(db, &q, &m, 1, &sent);
	json_decref(m.attrs);
	sqs_queue_clear(&q);
	return r;
}

/* sendable: 1 when s's job can be made: always for a kind; for an SQS
 * queue, while the queue is there and takes the message (a queue deleted
 * or changed since makes nothing, logged: its periods pass) */
static int sendable(struct db *db, const struct schedule *s)
{
	if (!is_sqs(s->kind) || sqs_probe(db, s->kind, s->name, s->payload) == SD_OK)
		return 1;
	log_event(LOG_WARN, "periodic message not sent", "schedule=%s queue=%s why=\"%s\"",
		  s->name, s->kind + strlen(QUEUE_SQS_PREFIX), err_msg());
	return 0;
}

/* when_check: s's every_ms, or its cron and zone, valid; a cron macro
 * (@daily) made its five fields */
static enum sd_result when_check(struct schedule *s)
{
	struct tz *z = NULL;
	struct cron c;
	enum sd_result r;

	if (!s->cron[0]) {
		if (s->timezone[0])
			return err_set(SD_INVALID, "a timezone goes with a cron expression; an "
				       "--every period runs on the epoch's multiples, UTC");
		if (s->every_ms < SCHEDULE_EVERY_MIN_MS || s->every_ms > SCHEDULE_EVERY_MAX_MS)
			return err_set(SD_INVALID, "a schedule runs every 1s to 366d, or at the "
				       "times of a cron expression");
		return SD_OK;
	}
	if (s->every_ms)
		return err_set(SD_INVALID, "a schedule runs every period or at the times of a "
			       "cron expression, not both");
	if ((r = cron_parse(s->cron, &c)) != SD_OK)
		return r;
	if (cron_macro(s->cron))	/* stored as its five fields */
		snprintf(s->cron, sizeof s->cron, "%s", cron_macro(s->cron));
	if (s->timezone[0] && (r = tz_load(s->timezone, &z)) != SD_OK)
		return r;
	tz_free(z);
	return SD_OK;
}

enum sd_result schedule_add(struct db *db, struct schedule *s)
{
	const char *payload = s->payload ? s->payload : "{}";
	struct when w;
	enum sd_result r;

	if ((r = schedule_name_valid(s->name)) != SD_OK || (r = queue_kind_valid(s->kind)) != SD_OK)
		return r;
	if ((r = when_check(s)) != SD_OK)
		return r;
	if (payload[strspn(payload, " \t\r\n")] != '{')
		return err_set(SD_INVALID, "payload must be a JSON object, like {\"ms\": 10}");
	if (is_sqs(s->kind) && (r = sqs_probe(db, s->kind, s->name, payload)) != SD_OK)
		return r;
	if ((r = when_open(s, &w)) != SD_OK)
		return r;
	s->created_at = clock_now_ms();
	s->next_at = period_after(&w, s->created_at);
	when_close(&w);
	if (s->next_at < 0)
		return err_set(SD_INVALID, "cron expression '%s' names no time in the next %d "
			       "years", s->cron, CRON_SEARCH_DAYS / 366);
	if ((r = db_begin(db)) != SD_OK)
		return r;
	return db_end(db, add_checked(db, s, payload));
}

static const char SQL_RM[] = "DELETE FROM schedules WHERE name = ?1";

enum sd_result schedule_rm(struct db *db, const char *name)
{
	struct db_stmt *st;
	enum sd_result r;
	int64_t n = 0;

	if ((r = schedule_name_valid(name)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_RM)))
		return SD_DB;
	db_bind_text(st, 1, name);
	if ((r = db_run_changes(db, st, &n)) != SD_OK)
		return r;
	return n ? SD_OK : err_set(SD_NOT_FOUND, "no schedule named %s", name);
}

static const char SQL_LIST[] =
	"SELECT name, kind, payload, every_ms, missed, next_at, cron, timezone, last_at, "
	"last_job_id, made, created_at FROM schedules ORDER BY name";

/* row_read: one row of SQL_LIST's columns (or SQL_DUE's first eight) */
static enum sd_result row_read(struct db_stmt *st, struct schedule *s, int full)
{
	const char *last = full ? db_col_text(st, 9) : NULL;

	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", db_col_text(st, 0));
	snprintf(s->kind, sizeof s->kind, "%s", db_col_text(st, 1));
	if (!(s->payload = strdup(db_col_text(st, 2))))
		return err_set(SD_NOMEM, "out of memory");
	s->every_ms = db_col_int0(st, 3);
	s->skip_missed = strcmp(db_col_text(st, 4), "skip") == 0;
	s->next_at = db_col_int(st, 5);
	if (!db_col_is_null(st, 6))
		snprintf(s->cron, sizeof s->cron, "%s", db_col_text(st, 6));
	if (!db_col_is_null(st, 7))
		snprintf(s->timezone, sizeof s->timezone, "%s", db_col_text(st, 7));
	if (!full)
		return SD_OK;
	s->last_at = db_col_int0(st, 8);
	snprintf(s->last_job_id, sizeof s->last_job_id, "%s", last ? last : "");
	s->made = db_col_int(st, 10);
	s->created_at = db_col_int(st, 11);
	return SD_OK;
}

void schedule_free_all(struct schedule *v, int n)
{
	int i;

	for (i = 0; v && i < n; i++)
		free(v[i].payload);
	free(v);
}

enum sd_result schedule_list(struct db *db, struct schedule **out, int *n)
{
	struct db_stmt *st = db_stmt(db, SQL_LIST);
	struct schedule *v = calloc(SCHEDULE_MAX, sizeof *v);
	enum sd_result r = v ? SD_OK : err_set(SD_NOMEM, "out of memory");
	int row = 0, k = 0;

	*out = NULL;
	*n = 0;
	if (!st && r == SD_OK)
		r = SD_DB;
	while (r == SD_OK && (r = db_step(st, &row)) == SD_OK && row && k < SCHEDULE_MAX)
		r = row_read(st, &v[k++], 1);
	if (st)
		db_reset(st);
	if (r != SD_OK) {
		schedule_free_all(v, k);
		return r;
	}
	*out = v;
	*n = k;
	return SD_OK;
}

/* ======================== the tick ======================================= */

static const char SQL_DUE[] =
	"SELECT name, kind, payload, every_ms, missed, next_at, cron, timezone FROM schedules "
	"WHERE next_at <= ?1 ORDER BY next_at LIMIT ?2";
/* technique 1: the period is this run's only if next_at is still what it read */
static const char SQL_TAKE[] =
	"UPDATE schedules SET next_at = ?3, last_at = ?4, last_job_id = ?5, made = made + ?6 "
	"WHERE name = ?1 AND next_at = ?2";
static const char SQL_NEXT[] = "SELECT min(next_at) FROM schedules";

/*
 * take: schedule s, read due at now, its latest period started by now
 * period and the one after it next: period is made (once; with
 * skip_missed, not when reached more than SCHEDULE_LATE_MS late), next_at
 * moves to next, in one transaction.  [out] *made 1 when a job was
 * queued; 0 too when another run took it.
 */
static enum sd_result take(struct db *db, const struct schedule *s, int64_t now, int64_t period,
			   int64_t next, int *made)
{
	int64_t changed = 0;
	int make = !s->skip_missed || now - period <= SCHEDULE_LATE_MS;
	char job_id[QUEUE_JOB_ID_MAX + 1];
	struct db_stmt *st;
	enum sd_result r;

	*made = 0;
	snprintf(job_id, sizeof job_id, "schedule:%.64s:%" PRId64, s->name, period);
	if ((r = db_begin(db)) != SD_OK)
		return r;
	make = make && sendable(db, s);
	if (!(st = db_stmt(db, SQL_TAKE))) {
		db_rollback(db);
		return SD_DB;
	}
	db_bind_text(st, 1, s->name);
	db_bind_int(st, 2, s->next_at);
	db_bind_int(st, 3, next);
	if (make) {
		db_bind_int(st, 4, period);
		db_bind_text(st, 5, job_id);
	} else {
		db_bind_null(st, 4);
		db_bind_null(st, 5);
	}
	db_bind_int(st, 6, make);
	if ((r = db_run_changes(db, st, &changed)) != SD_OK || !changed || !make) {
		/* another run took it, or it is skipped: next_at moved alone */
		return db_end(db, r);
	}
	if ((r = make_job(db, s, job_id)) != SD_OK) {
		db_rollback(db);
		return r;
	}
	if ((r = db_commit(db)) == SD_OK)
		*made = 1;
	return r;
}

/* log what take did with s's period at now */
static void taken(const struct schedule *s, int64_t now, int64_t period, int made)
{
	if (made)
		log_event(LOG_INFO, "periodic job made", "schedule=%s kind=%s period=%" PRId64
			  " first_missed=%" PRId64, s->name, s->kind, period,
			  period == s->next_at ? (int64_t)0 : s->next_at);
	else if (s->skip_missed && now - period > SCHEDULE_LATE_MS)
		log_event(LOG_INFO, "periodic job skipped", "schedule=%s period=%" PRId64
			  " late_ms=%" PRId64, s->name, period, now - period);
}

/* tick_one: take due schedule s at now.  [in,out] *made */
static enum sd_result tick_one(struct db *db, const struct schedule *s, int64_t now, int64_t *made)
{
	int64_t period, next;
	struct when w;
	enum sd_result r;
	int m = 0;

	if (when_open(s, &w) != SD_OK) {	/* a stored cron this build cannot read */
		log_event(LOG_ERROR, "schedule unreadable", "schedule=%s cron=%s", s->name, s->cron);
		return SD_OK;
	}
	period = period_latest(&w, s->next_at, now);
	if ((next = period_after(&w, period)) < 0)
		next = INT64_MAX;	/* a cron that names no time ahead: never due again */
	when_close(&w);
	if ((r = take(db, s, now, period, next, &m)) == SD_OK) {
		taken(s, now, period, m);
		*made += m;
	}
	return r;
}

enum sd_result schedule_tick(struct db *db, int64_t now, int64_t *made, int64_t *next_due)
{
	struct schedule due[SCHEDULE_TICK_BATCH];
	struct db_stmt *st = db_stmt(db, SQL_DUE);
	enum sd_result r = st ? SD_OK : SD_DB;
	int n = 0, i, row = 0;

	*made = 0;
	*next_due = -1;
	if (st) {
		db_bind_int(st, 1, now);
		db_bind_int(st, 2, SCHEDULE_TICK_BATCH);
		while ((r = db_step(st, &row)) == SD_OK && row && n < SCHEDULE_TICK_BATCH &&
		       (r = row_read(st, &due[n], 0)) == SD_OK)
			n++;
		db_reset(st);
	}
	for (i = 0; i < n; i++) {
		if (r == SD_OK)
			r = tick_one(db, &due[i], now, made);
		free(due[i].payload);
	}
	if (r == SD_OK && (st = db_stmt(db, SQL_NEXT))) {
		if ((r = db_step(st, &row)) == SD_OK && row && !db_col_is_null(st, 0))
			*next_due = db_col_int(st, 0);
		db_reset(st);
	}
	return r;
}
