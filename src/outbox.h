/*
 * outbox.h: the transactional outbox and its relay.
 *
 * A business change and the job that follows it commit together or not at
 * all: outbox_add() writes a row inside the caller's open transaction.  The
 * relay later copies unpublished rows into the stream under the row's
 * job_id and marks them published in the same transaction, so a crash
 * anywhere in it loses nothing and publishes nothing twice.
 *
 * A row's job_id is its job's identity for good (processed_jobs records
 * it): the intent's own name when the caller gives one ("outbox:<public
 * id>:render", tickets_job_id), else one minted for the row ("outbox:j..."),
 * never the row's id, which a commit lost to a power cut gives to the next
 * row.  Rows made before schema 11 keep "outbox:<row id>".
 */
#ifndef SD_OUTBOX_H
#define SD_OUTBOX_H

#include <stdint.h>

#include "db.h"
#include "result.h"

#define OUTBOX_BATCH_DEFAULT 500

/*
 * outbox_add: add a row for a job of kind named job_id (it must start with
 * "outbox:"; NULL: a minted one) with payload (a JSON object), visible
 * delay_ms after it is published.  The caller must have a transaction open
 * (db_begin): the row belongs to the caller's change.  A job_id already in
 * the outbox is SD_INVALID: an intent is queued once.  [out] *id (may be
 * NULL) gets the outbox row id.
 */
enum sd_result outbox_add(struct db *db, const char *kind, const char *job_id,
			  const char *payload, int64_t delay_ms, int64_t priority, int64_t *id);

/* outbox_queued: [out] *there 1 when job_id is in the outbox (queued, by
 * now or before). */
enum sd_result outbox_queued(struct db *db, const char *job_id, int *there);

/* outbox_waiting: [out] *waiting 1 when job_id's row is in the outbox and
 * the relay has not published it yet. */
enum sd_result outbox_waiting(struct db *db, const char *job_id, int *waiting);

/*
 * outbox_relay_batch: publish up to limit unpublished rows in one
 * transaction.  [out] *n: how many were published.
 */
enum sd_result outbox_relay_batch(struct db *db, int limit, int64_t *n);

/* outbox_check_job_ids: every row's job_id as above: a row made since
 * schema 11 has one of its own (not "outbox:<number>"), a row made before
 * "outbox:<row id>".  [out] problem ("" when all hold). */
enum sd_result outbox_check_job_ids(struct db *db, char *problem, size_t size);

/* outbox_unpublished: how many rows wait for the relay. */
enum sd_result outbox_unpublished(struct db *db, int64_t *n);

/*
 * outbox_relay_run: publish batches until stopped (notify_request_stop), or
 * with drain until no row waits.  Sleeps in notify_wait between batches, so
 * new rows from this or another process are published at once.
 * [out] *published (may be NULL): rows published in all.
 */
enum sd_result outbox_relay_run(const char *db_path, int batch, int drain, int64_t *published);

/* What outbox_relay_run_opts is told; a zeroed struct is a relay that runs
 * until stopped, OUTBOX_BATCH_DEFAULT rows a batch, reporting nothing.  The
 * relay shows nothing itself: a caller that shows progress (`relay --drain`
 * draws a bar) does it from the progress callback. */
struct outbox_relay_opts {
	int batch;		/* rows per transaction; < 1: OUTBOX_BATCH_DEFAULT */
	int drain;		/* stop once no row waits */
	/*
	 * progress (may be NULL): called on the relay's thread after every
	 * batch that published rows, with the rows published so far and the
	 * rows known in all: published + waiting, counted when the relay
	 * starts and again each time published reaches it (rows added while
	 * it drains raise it).  Counting happens only when progress is set.
	 */
	void (*progress)(void *arg, int64_t published, int64_t total);
	void *arg;		/* handed to progress */
};

/*
 * outbox_relay_run_opts: outbox_relay_run with o (may be NULL: the zeroed
 * defaults).  outbox_relay_run(p, b, d, n) is outbox_relay_run_opts with
 * { .batch = b, .drain = d }.  [out] *published (may be NULL).
 */
enum sd_result outbox_relay_run_opts(const char *db_path, const struct outbox_relay_opts *o,
				     int64_t *published);

/* One outbox row, as outbox_list_for_order reports it. */
struct outbox_row {
	int64_t id;
	const char *job_id;
	const char *kind;
	int64_t created_at;
	int64_t published_at;	/* 0 while unpublished */
};

/* outbox_list_for_order: the rows whose payload names this order_id, oldest
 * first (through the index on the payload's order_id). */
enum sd_result outbox_list_for_order(struct db *db, int64_t order_id,
				     void (*fn)(const struct outbox_row *row, void *arg), void *arg);

#endif
