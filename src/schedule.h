/*
 * schedule.h: periodic jobs (schema 0018 schedules).
 *
 * A schedule makes one job of its kind and payload for each of its periods:
 * every `every_ms` from the epoch (UTC; "--every 5m" starts at :00, :05, ...),
 * or at each time its cron expression (cron.h) names in its zone (tz.h; ""
 * for the venue's, timefmt.h).  A period is an instant: a cron time the
 * clocks skip (02:30 on the night they jump from 02:00 to 03:00) is made
 * once, at the jump; one they pass twice, once, at its first pass.
 * `run` calls schedule_tick on every box; each due schedule is taken with a
 * conditional update of its next_at (technique 1: only the run that moves
 * it from the value it read wins), and its job is queued in that same
 * transaction with the id schedule:<name>:<period start ms>, the period's
 * identity, which the job's handler may record with its effect (technique
 * 4).  So two boxes, or a box restarted within a period, make one job.
 *
 * A schedule's kind may be an SQS queue, "sqs:<name>": a period is then a
 * message on it, the payload its body, the period's id its attribute
 * "stagedoor.period" (and on a FIFO queue its deduplication id).
 *
 * After the box was down over several periods, a schedule with missed
 * "once" makes one job, for the latest of them (not one per period missed);
 * with "skip" a period reached more than SCHEDULE_LATE_MS after its start
 * is not made.
 */
#ifndef SD_SCHEDULE_H
#define SD_SCHEDULE_H

#include <stdint.h>

#include "cron.h"
#include "db.h"
#include "queue.h"
#include "result.h"

#define SCHEDULE_NAME_MAX 64
#define SCHEDULE_EVERY_MIN_MS 1000LL
#define SCHEDULE_EVERY_MAX_MS (366LL * 24 * 3600 * 1000)
#define SCHEDULE_LATE_MS 60000LL	/* a period reached later than this is missed */
#define SCHEDULE_MAX 1000		/* schedules in one database at most */
#define SCHEDULE_TICK_BATCH 100		/* due schedules one tick takes at most */

struct schedule {
	char name[SCHEDULE_NAME_MAX + 1];
	char kind[QUEUE_KIND_MAX + 1];
	char *payload;			/* owned (schedule_free_all) */
	int64_t every_ms;		/* 0: by cron */
	char cron[CRON_TEXT_MAX + 1];	/* "": by every_ms */
	char timezone[65];		/* the cron's zone; "": the venue's */
	int skip_missed;		/* 1: missed "skip", 0: "once" */
	int64_t next_at;		/* the next period's start */
	int64_t last_at;		/* the last period made (0: none yet) */
	char last_job_id[QUEUE_JOB_ID_MAX + 1];
	int64_t made;			/* jobs made */
	int64_t created_at;
};

/* schedule_name_valid: 1 to 64 of a-z 0-9 _ - . */
enum sd_result schedule_name_valid(const char *name);

/* schedule_add: a new schedule (s's name, kind (SD_NOT_FOUND: an SQS queue
 * that is not there), payload (NULL: "{}"),
 * every_ms or cron and timezone, skip_missed), its first period the next
 * start after now.
 * SD_CONFLICT when the name is taken.  [out] s->next_at. */
enum sd_result schedule_add(struct db *db, struct schedule *s);

/* schedule_rm: the schedule named; SD_NOT_FOUND when there is none.  The
 * jobs it made stay. */
enum sd_result schedule_rm(struct db *db, const char *name);

/* schedule_list: every schedule by name.  [out] *v (schedule_free_all), *n. */
enum sd_result schedule_list(struct db *db, struct schedule **v, int *n);
void schedule_free_all(struct schedule *v, int n);

/*
 * schedule_tick: make the jobs of every schedule due at now (up to
 * SCHEDULE_TICK_BATCH), each in its own transaction.  [out] *made: jobs
 * made by this call; *next_due: the earliest next_at after it (-1: no
 * schedule).
 */
enum sd_result schedule_tick(struct db *db, int64_t now, int64_t *made, int64_t *next_due);

#endif
