/*
 * backup_sched.h: the periodic backups `run` takes into backup_dir
 * (backup_sched.c): the folder's names, one backup taken and the old ones
 * pruned, the record of failures beside the database, the state /healthz
 * reads, and the schedule the supervisor keeps.
 */
#ifndef SD_BACKUP_SCHED_H
#define SD_BACKUP_SCHED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "backup.h"
#include "db.h"
#include "result.h"

#define BACKUP_SCHED_PREFIX "stagedoor-"	/* stagedoor-20261201T190000Z[-N] */
#define BACKUP_SCHED_NAME_MAX 48
#define BACKUP_SCHED_INTERVAL_MS_DEFAULT (3600LL * 1000)	/* backup_interval_ms */
#define BACKUP_SCHED_RETRY_MS (60LL * 1000)	/* the first retry after a failure;
						 * doubles, never past the interval */
#define BACKUP_SCHED_SLACK_MS (60LL * 1000)	/* stale: older than 2 intervals + this */
#define BACKUP_SCHED_ERROR_MAX 200		/* bytes of a failure's reason kept */
#define BACKUP_SCHED_EXIT_FAILED 3		/* the child's exit status for a failure
						 * it recorded itself */

/* ---- the child's side: one backup ------------------------------------- */

/*
 * backup_sched_take: one periodic backup of the box on db (db_path,
 * state_dir) into the folder dir (made 0700 when missing): partial folders
 * of dead processes removed first, then backup_make into a new name for
 * this UTC second ("-2" .. "-9" appended when the name is taken), then the
 * good backups past the newest keep removed.  Only names this module makes
 * are ever removed.  [out] name (the new backup's, size bytes), info,
 * *pruned (may be NULL).  On failure no new backup exists and the earlier
 * ones are as they were.
 */
enum sd_result backup_sched_take(struct db *db, const char *db_path, const char *state_dir,
				 const char *dir, int keep, char *name, size_t size,
				 struct backup_info *info, int *pruned);

/*
 * backup_sched_record: the outcome of an attempt into "<db>-backup-status"
 * (mode 0600, put atomically): ok clears the failure, otherwise error (one
 * line, no secret: a path and a system error) is kept with its time and the
 * failure count goes up.  Best effort: a status that cannot be written is
 * logged.
 */
void backup_sched_record(const char *db_path, int ok, const char *error);

/* ---- what /healthz and /metrics read ---------------------------------- */

struct backup_status {
	int64_t last_ok_ms;		/* the newest good backup's time (UTC, from its
					 * name, second precision); 0: none */
	char last_ok_name[BACKUP_SCHED_NAME_MAX];
	int64_t age_ms;			/* now - last_ok_ms; -1: none */
	int good;			/* good backups in the folder */
	int failed;			/* the last attempt failed */
	int64_t failed_at_ms;		/* when; 0: never recorded */
	int64_t failures_total;		/* failed attempts recorded for this database */
	char error[BACKUP_SCHED_ERROR_MAX + 1];	/* the last failure's reason; "" */
	int ok;				/* a good backup younger than 2 intervals +
					 * slack, and the last attempt did not fail */
};

/*
 * backup_sched_status: [out] st for the box on db_path backing up into dir
 * every interval_ms, at now (ms since the epoch).  Reads names in dir (no
 * file contents) and the small status file: cheap enough per request.
 * Never fails: an unreadable dir counts as no backup.
 */
void backup_sched_status(const char *db_path, const char *dir, int64_t interval_ms,
			 int64_t now, struct backup_status *st);

/* ---- the supervisor's side: when ------------------------------------- */

struct backup_sched {
	int64_t next_ms;		/* monotonic ms when the next one is due */
	int64_t started_ms;		/* monotonic ms the running one began */
	int failures;			/* failed attempts in a row */
};

/*
 * backup_sched_init: the first one is due at once when dir holds no good
 * backup younger than interval_ms, else when the newest turns that old.
 * [in] now: monotonic ms.
 */
void backup_sched_init(struct backup_sched *s, const char *db_path, const char *dir,
		       int64_t interval_ms, int64_t now);

/* backup_sched_started: one began at now (monotonic ms). */
void backup_sched_started(struct backup_sched *s, int64_t now);

/*
 * backup_sched_ended: the backup child pid ended with wait status st at now
 * (monotonic ms).  A success makes the next due an interval after this one
 * began; a failure retries after BACKUP_SCHED_RETRY_MS, doubling, never
 * later than an interval.  A child that died by a signal or did not run
 * (it could not record its own outcome) is recorded failed here and
 * logged.  stopping: the supervisor asked it to stop; unless it recorded a
 * failure first, that is no failure and nothing is recorded.
 */
void backup_sched_ended(struct backup_sched *s, const char *db_path, pid_t pid, int st,
			int64_t interval_ms, int stopping, int64_t now);

#endif
