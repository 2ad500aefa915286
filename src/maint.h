/*
 * maint.h: the maintenance pass `stagedoor run` makes every few seconds on a
 * connection of its own: checkpoint the WAL so it stays bounded under
 * constant readers, and forget what can no longer matter (finished jobs past
 * their retention, processed_jobs records no delivery can ask for again;
 * email_sends rows stay with their order).
 *
 * Every step of a pass is bounded: one checkpoint that waits for readers at
 * most MAINT_CHECKPOINT_BUSY_MS, and one batch (o->batch rows) per prune, so
 * a tick never holds the write lock for long; a backlog is worked off over
 * several ticks.
 */
#ifndef SD_MAINT_H
#define SD_MAINT_H

#include <stdint.h>

#include "db.h"
#include "result.h"

#define MAINT_BATCH_DEFAULT 1000
#define MAINT_IDEM_RETENTION_MS_DEFAULT (30LL * 24 * 3600 * 1000)
#define MAINT_SCAN_LOG_RETENTION_MS_DEFAULT (30LL * 24 * 3600 * 1000)
#define MAINT_WAL_WARN_BYTES_DEFAULT (64LL * 1024 * 1024)
#define MAINT_DISK_WARN_BYTES_DEFAULT (512LL * 1024 * 1024)
/* The longest a RESTART/TRUNCATE checkpoint holds the writer lock waiting
 * for readers before it gives up until the next tick.  It runs only past
 * half of wal_warn_bytes, so writers wait that long only when the WAL is
 * already large; at 20 ms, a writer at full speed beside two readers in
 * tight loops saw a fifth of the ticks give up, and the WAL grew past
 * 100 MB between the ones that did not (test_maint); at 100 ms, a tick in
 * fifteen gives up. */
#define MAINT_CHECKPOINT_BUSY_MS 100

struct maint_opts {
	int64_t done_retention_ms;	/* prune done jobs finished longer ago;
					 * 0: QUEUE_RETENTION_MS_DEFAULT, < 0: never */
	int64_t idem_retention_ms;	/* prune processed_jobs rows older than this
					 * (see maint.c for which; email_sends rows
					 * are never pruned); 0: the default,
					 * < 0: never.  Must exceed the longest a
					 * handler can run and the provider's own
					 * idempotency-key window. */
	int64_t scan_log_retention_ms;	/* forget the scan log's rows this long
					 * after their event starts (the counts
					 * stay); 0: the default, < 0: never */
	int64_t wal_warn_bytes;		/* WAL size worth a warning; above half of it
					 * the checkpoint restarts the WAL; 0: default */
	int batch;			/* rows per prune step; 0: MAINT_BATCH_DEFAULT */
};

struct maint_stats {
	int64_t wal_bytes_before;	/* the -wal file at the start of the tick */
	int64_t wal_bytes_after;	/* and after its checkpoint */
	int checkpoint_truncate;	/* 1: this tick's checkpoint was TRUNCATE */
	int checkpoint_busy;		/* it gave up waiting for readers */
	int64_t wal_frames;		/* frames in the WAL after the checkpoint */
	int64_t copied_frames;		/* of which copied into the database */
	int wal_warn;			/* the WAL is still above wal_warn_bytes */
	int64_t done_pruned;		/* done jobs pruned */
	int64_t cancelled_pruned;	/* cancelled jobs pruned */
	int64_t idem_pruned;		/* idempotency records forgotten:
					 * processed_pruned + api_keys_pruned
					 * (email_sends rows are kept with their
					 * order, see maint.c) */
	int64_t processed_pruned;	/* processed_jobs rows forgotten */
	int64_t api_keys_pruned;	/* expired client Idempotency-Keys (api.h) */
	int64_t idem_kept;		/* expired records kept: still deliverable */
	int64_t scans_pruned;		/* the scan log's rows forgotten */
	int64_t holds_pruned;		/* the shop's holds that ended unpaid */
	int64_t places_pruned;		/* places in its line that left a day ago */
	int64_t backs_pruned;		/* old reports of money gone back (money_back.h) */
};

#define MAINT_HOLD_RETENTION_MS (24 * 3600 * 1000LL)	/* an unpaid hold's page stays a day */
/* a report of money gone back for a payment no order carries: longer than
 * the provider retries the payment's own report (3 days) and a pending
 * payment's wait */
#define MAINT_BACKS_RETENTION_MS (45 * 24 * 3600 * 1000LL)

/* maint_opts_default: every field its default. */
void maint_opts_default(struct maint_opts *o);

/*
 * maint_tick: one pass: prune done jobs and processed_jobs (one batch each;
 * email_sends rows are never pruned, see maint.c), then checkpoint (PASSIVE,
 * or TRUNCATE with a short wait when the WAL is past half of wal_warn_bytes).
 * [in] db: the maintenance connection, no transaction open.  [out] st (may
 * be NULL).  A step that fails ends the pass with its error; the checkpoint
 * still runs.
 */
enum sd_result maint_tick(struct db *db, const struct maint_opts *o, struct maint_stats *st);

/* The free space where the box writes: the database's folder (the database,
 * its WAL) and the state folder (PDFs, maildir, keys). */
struct maint_disk {
	int64_t db_free;		/* bytes free for the database's folder; -1: unknown */
	int64_t state_free;		/* bytes free for the state folder; -1: unknown */
	int64_t warn_bytes;		/* the threshold in force */
	int low;			/* either is below warn_bytes, or unknown */
};

/*
 * maint_disk: [out] d for the box on db_path with state_dir (NULL or "": the
 * database's folder), against warn_bytes (0: the default).  Never fails: a
 * filesystem that cannot be asked reads -1 and counts as low.
 */
void maint_disk(const char *db_path, const char *state_dir, int64_t warn_bytes,
		struct maint_disk *d);

/* maint_optimize: refresh the query planner's statistics; hourly. */
enum sd_result maint_optimize(struct db *db);

#endif
