/*
 * maint.c: the maintenance pass (maint.h).
 *
 * What may be forgotten, and why nothing that could still run is:
 *
 *  - done jobs: a finished entry is history (the dashboard's); queue_prune_done
 *    counts it into done_totals and drops it after done_retention_ms.
 *
 *  - processed_jobs (technique 4): the row for job_id J is what makes a
 *    second run of J harmless, so it may go only once no run of J can start
 *    again.  A run starts only from an entry that carries J: in the stream
 *    (ready, scheduled, leased: a claim or reclaim hands it out) or in the
 *    dead letters (an operator's retry puts it back).  The outbox cannot make
 *    a new one: the relay inserts a row's entries and marks the row published
 *    in one transaction, so the row that made J was published before J ever
 *    ran.  What is left is a run already under way whose lease was taken over
 *    and whose entry was acked by the other run; idem_retention_ms (days) is
 *    far longer than any handler runs.  So: processed_at older than the
 *    retention, and no entry with job_id J in the stream or dead_jobs.
 *
 *  - email_sends: never pruned.  The row (order O, "tickets") is not only
 *    technique 2's claim that stops a second send: it is the order's email
 *    state, which `stagedoor order show` reports and `stagedoor check`
 *    requires (every order has one sent row).  It is one small row per
 *    order, so it is kept as long as the order is.
 *
 *  - the scan log (scans): a row per scan of one of the box's codes, kept
 *    scan_log_retention after its event starts (the door's story of the
 *    night, and the nonces a door's retries are answered from: no door
 *    retries a scan days later); the per-minute counts (scan_minutes), one
 *    row a door a minute, stay.
 *
 *  - queue_history: a ring of 60 rows, one a minute, overwritten (the
 *    dashboard's last hour); nothing to forget.
 *
 * The liveness set is read and the rows deleted in one BEGIN IMMEDIATE
 * transaction, so no entry can be added between the look and the delete.
 *
 * The WAL: in WAL mode a checkpoint copies frames back into the database, and
 * the WAL file starts over only when a writer finds every frame copied and no
 * reader using it.  Constant short readers can keep that from ever happening,
 * and the file then grows without bound.  Each tick runs a PASSIVE checkpoint
 * (never waits); once the file passes half of wal_warn_bytes it runs a
 * TRUNCATE instead, which waits for the readers of the moment to finish, but
 * at most MAINT_CHECKPOINT_BUSY_MS, because it holds the writer lock while it
 * waits.  journal_size_limit (set at open, db.c) cuts the file back whenever
 * it starts over.
 */
#define _POSIX_C_SOURCE 200809L
#include "maint.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clientkey.h"
#include "clock.h"
#include "controls.h"
#include "fsio.h"
#include "holds.h"
#include "idem.h"
#include "line.h"
#include "money_back.h"
#include "log.h"
#include "queue.h"
#include "queue_history.h"
#include "scans.h"
#include "statedir.h"

void maint_opts_default(struct maint_opts *o)
{
	o->done_retention_ms = QUEUE_RETENTION_MS_DEFAULT;
	o->idem_retention_ms = MAINT_IDEM_RETENTION_MS_DEFAULT;
	o->scan_log_retention_ms = MAINT_SCAN_LOG_RETENTION_MS_DEFAULT;
	o->wal_warn_bytes = MAINT_WAL_WARN_BYTES_DEFAULT;
	o->batch = MAINT_BATCH_DEFAULT;
}

/* ---- the set of jobs that can still run ---------------------------------- */

/* Read on the first expired record only: a tick with nothing to forget never
 * reads the stream. */
struct live {
	struct db *db;		/* the maintenance connection, in its transaction */
	int loaded;		/* the set below was read */
	char **ids;		/* job_ids, sorted */
	size_t n, cap;
	enum sd_result r;	/* reading the set failed: every record is kept */
};

static void live_add_id(const char *job_id, int64_t value, void *arg)
{
	struct live *l = arg;

	(void)value;
	if (l->r != SD_OK)
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		char **v = realloc(l->ids, cap * sizeof *v);

		if (!v) {
			l->r = err_set(SD_NOMEM, "out of memory");
			return;
		}
		l->ids = v;
		l->cap = cap;
	}
	if (!(l->ids[l->n] = strdup(job_id))) {
		l->r = err_set(SD_NOMEM, "out of memory");
		return;
	}
	l->n++;
}

static void live_free(struct live *l)
{
	size_t i;

	if (l->ids)
		for (i = 0; i < l->n; i++)
			free(l->ids[i]);
	free(l->ids);
	memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int keep_job(const char *job_id, void *arg)
{
	struct live *l = arg;

	if (!l->loaded) {
		enum sd_result r;

		l->loaded = 1;
		if ((r = queue_each_live(l->db, NULL, NULL, live_add_id, l)) != SD_OK)
			l->r = r;
		if (l->r == SD_OK && l->n)
			qsort(l->ids, l->n, sizeof *l->ids, cmp_str);
	}
	if (l->r != SD_OK)
		return 1;
	return l->n && bsearch(&job_id, l->ids, l->n, sizeof *l->ids, cmp_str) != NULL;
}

/* ---- the steps --------------------------------------------------------------- */

static enum sd_result prune_processed(struct db *db, int64_t before, int batch,
				      struct maint_stats *st)
{
	struct live l;
	enum sd_result r;
	int64_t n = 0, kept = 0;

	memset(&l, 0, sizeof l);
	l.db = db;
	/* one transaction: the set of live jobs and the deletes it allows */
	if ((r = db_begin(db)) != SD_OK)
		return r;
	r = idem_prune_processed(db, before, batch, keep_job, &l, &n, &kept);
	if (r == SD_OK && l.r != SD_OK)
		r = l.r;
	r = db_end(db, r);
	live_free(&l);
	if (r == SD_OK) {
		st->processed_pruned += n;
		st->idem_kept += kept;
	}
	return r;
}

static enum sd_result checkpoint(struct db *db, int64_t warn, struct maint_stats *st)
{
	struct db_checkpoint_result cr;
	enum sd_result r;

	if ((r = db_wal_bytes(db, &st->wal_bytes_before)) != SD_OK)
		return r;
	st->checkpoint_truncate = st->wal_bytes_before > warn / 2;
	r = db_checkpoint(db, st->checkpoint_truncate ? DB_CHECKPOINT_TRUNCATE
						      : DB_CHECKPOINT_PASSIVE,
			  MAINT_CHECKPOINT_BUSY_MS, &cr);
	if (r != SD_OK)
		return r;
	st->checkpoint_busy = cr.busy;
	st->wal_frames = cr.wal_frames;
	st->copied_frames = cr.copied_frames;
	if ((r = db_wal_bytes(db, &st->wal_bytes_after)) != SD_OK)
		return r;
	st->wal_warn = st->wal_bytes_after > warn;
	if (st->wal_warn)
		log_event(LOG_WARN, "wal large", "wal_bytes=%lld warn_bytes=%lld busy=%d",
			  (long long)st->wal_bytes_after, (long long)warn, st->checkpoint_busy);
	return SD_OK;
}

enum sd_result maint_tick(struct db *db, const struct maint_opts *o, struct maint_stats *st)
{
	struct maint_opts d;
	struct maint_stats local;
	enum sd_result r = SD_OK, c;
	int64_t now = clock_now_ms();

	if (!st)
		st = &local;
	memset(st, 0, sizeof *st);
	maint_opts_default(&d);
	if (o) {
		if (o->done_retention_ms)
			d.done_retention_ms = o->done_retention_ms;
		if (o->idem_retention_ms)
			d.idem_retention_ms = o->idem_retention_ms;
		if (o->scan_log_retention_ms)
			d.scan_log_retention_ms = o->scan_log_retention_ms;
		if (o->wal_warn_bytes > 0)
			d.wal_warn_bytes = o->wal_warn_bytes;
		if (o->batch > 0)
			d.batch = o->batch;
	}
	if (db_in_tx(db))
		return err_set(SD_INVALID, "maint_tick needs a connection with no transaction open");
	if (d.done_retention_ms > 0)
		r = queue_prune_done(db, d.done_retention_ms, d.batch, &st->done_pruned);
	/* cancelled jobs are history as the finished ones are */
	if (r == SD_OK && d.done_retention_ms > 0)
		r = controls_prune(db, now - d.done_retention_ms, d.batch, &st->cancelled_pruned);
	if (r == SD_OK && d.idem_retention_ms > 0)
		r = prune_processed(db, now - d.idem_retention_ms, d.batch, st);
	/* client keys carry their own expiry, set when they were stored */
	if (r == SD_OK)
		r = clientkey_prune(db, now, d.batch, &st->api_keys_pruned);
	st->idem_pruned = st->processed_pruned + st->api_keys_pruned;
	if (r == SD_OK && d.scan_log_retention_ms > 0)
		r = scan_log_prune(db, d.scan_log_retention_ms, now, d.batch, &st->scans_pruned);
	/* the shop's holds that ended unpaid: a flood of checkouts is gone a
	 * day later (those that made an order or a refund stay with it) */
	if (r == SD_OK)
		r = holds_prune(db, now - MAINT_HOLD_RETENTION_MS, d.batch, &st->holds_pruned);
	/* and the places in its line that left, and the reports of money gone
	 * back for payments that never made an order here */
	if (r == SD_OK)
		r = line_prune(db, now - LINE_RETENTION_MS, d.batch, &st->places_pruned);
	if (r == SD_OK)
		r = money_back_prune(db, now - MAINT_BACKS_RETENTION_MS, d.batch, &st->backs_pruned);
	/* the minute's row of the queue's last hour (once a minute at most) */
	if (r == SD_OK)
		r = queue_history_record(db, now, NULL);
	/* the checkpoint runs whatever the prunes did: the WAL must not grow
	 * because a prune hit a busy database */
	c = checkpoint(db, d.wal_warn_bytes, st);
	return r != SD_OK ? r : c;
}

void maint_disk(const char *db_path, const char *state_dir, int64_t warn_bytes,
		struct maint_disk *d)
{
	char dir[PATH_MAX], *slash;

	d->warn_bytes = warn_bytes > 0 ? warn_bytes : MAINT_DISK_WARN_BYTES_DEFAULT;
	snprintf(dir, sizeof dir, "%s", db_path);
	if ((slash = strrchr(dir, '/')))
		*(slash == dir ? slash + 1 : slash) = '\0';
	else
		snprintf(dir, sizeof dir, ".");
	if (db_target_is_pg(db_path))
		d->db_free = -2;	/* the server's disk: PostgreSQL's to watch */
	else if (fsio_free_bytes(dir, &d->db_free) != SD_OK)
		d->db_free = -1;
	if (statedir_path(db_path, state_dir, dir, sizeof dir) != SD_OK ||
	    fsio_free_bytes(dir, &d->state_free) != SD_OK)
		d->state_free = -1;
	d->low = (d->db_free != -2 && d->db_free < d->warn_bytes) || d->state_free < d->warn_bytes;
}

enum sd_result maint_optimize(struct db *db)
{
	return db_optimize(db);
}
