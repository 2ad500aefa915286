/*
 * outbox.c: outbox_add and the relay's batch.
 *
 * Invariant: a row's published_at is set in the same transaction that
 * inserts its stream entry, under the row's job_id.  The relay finds its batch by id order through
 * the partial index outbox_unpublished, so the cost of a batch does not grow
 * with the number of rows already published.
 */
#include "outbox.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "episode.h"
#include "failpoint.h"
#include "log.h"
#include "notify.h"
#include "queue.h"
#include "text.h"

/* The stream promises its handlers a JSON object (queue.h), and
 * queue_enqueue refuses anything else; the relay copies rows into the stream
 * without that check, so it is made here, where the caller still sees it.
 * json_valid in the table's CHECK does the rest: valid JSON that opens with
 * '{' is an object. */
static int payload_is_object(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return *p == '{';
}

static const char SQL_ADD[] =
	"INSERT INTO outbox (kind, payload, priority, delay_ms, created_at, job_id) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id";
static const char SQL_JOB_THERE[] = "SELECT 1 FROM outbox WHERE job_id = ?1";
static const char SQL_JOB_WAITING[] =
	"SELECT 1 FROM outbox WHERE job_id = ?1 AND published_at IS NULL";

/* job_id_check: a job id of the outbox's ("outbox:..."), not in it yet */
static enum sd_result job_id_check(struct db *db, const char *job_id)
{
	struct db_stmt *st;
	enum sd_result r;
	int row = 0;

	if ((r = queue_job_id_valid(job_id)) != SD_OK)
		return r;
	if (strncmp(job_id, "outbox:", 7) != 0)
		return err_set(SD_INVALID, "an outbox job id starts with 'outbox:', not '%.40s'",
			       job_id);
	if (!(st = db_stmt(db, SQL_JOB_THERE)))
		return SD_DB;
	db_bind_text(st, 1, job_id);
	r = db_step(st, &row);
	db_reset(st);
	if (r == SD_OK && row)
		r = err_set(SD_INVALID, "job %s is queued already", job_id);
	return r;
}

enum sd_result outbox_queued(struct db *db, const char *job_id, int *there)
{
	struct db_stmt *st = db_stmt(db, SQL_JOB_THERE);
	enum sd_result r;

	*there = 0;
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, job_id);
	r = db_step(st, there);
	db_reset(st);
	return r;
}

enum sd_result outbox_waiting(struct db *db, const char *job_id, int *waiting)
{
	struct db_stmt *st = db_stmt(db, SQL_JOB_WAITING);
	int64_t one = 0;

	if (st)
		db_bind_text(st, 1, job_id);
	return db_one_int(st, waiting, &one);
}

enum sd_result outbox_add(struct db *db, const char *kind, const char *job_id,
			  const char *payload, int64_t delay_ms, int64_t priority, int64_t *id)
{
	char minted[QUEUE_JOB_ID_MAX + 1];
	struct db_stmt *st;
	enum sd_result r;
	int row;

	if (!db_in_tx(db))
		return err_set(SD_INVALID, "outbox_add needs the caller's open transaction");
	if ((r = queue_kind_valid(kind)) != SD_OK)
		return r;
	if (!job_id) {	/* "outbox:" and a minted id: time, a process tag, a count */
		memcpy(minted, "outbox:", 7);
		queue_mint_job_id(minted + 7);
		job_id = minted;
	} else if ((r = job_id_check(db, job_id)) != SD_OK) {
		return r;
	}
	if (delay_ms < 0)
		return err_set(SD_INVALID, "delay must not be negative");
	if (!payload)
		payload = "{}";
	if (!payload_is_object(payload))
		return err_set(SD_INVALID,
			       "outbox payload must be a JSON object, like {\"order_id\": 1}");
	if (!(st = db_stmt(db, SQL_ADD)))
		return SD_DB;
	db_bind_text(st, 1, kind);
	db_bind_text(st, 2, payload);
	db_bind_int(st, 3, priority);
	db_bind_int(st, 4, delay_ms);
	db_bind_int(st, 5, clock_now_ms());
	db_bind_text(st, 6, job_id);
	if ((r = db_step(st, &row)) != SD_OK) {
		if (r == SD_INVALID)
			err_set(r, "outbox payload is not valid JSON: %.80s", payload);
		return r;
	}
	if (row && id)
		*id = db_col_int(st, 0);
	db_reset(st);
	db_notify_on_commit(db);
	return SD_OK;
}

static const char SQL_BATCH_HI[] =
	"SELECT max(id) FROM (SELECT id FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT ?1) "
	"AS b";
static const char SQL_PUBLISH[] =
	"INSERT INTO stream (job_id, kind, payload, priority, visible_at, created_at) "
	"SELECT job_id, kind, payload, priority, ?2 + delay_ms, ?2 FROM outbox "
	"WHERE published_at IS NULL AND id <= ?1 ORDER BY id";
/* The failpoint relay_publish_twice: the batch's first row once more, as a
 * relay that crashed between publishing and marking would on its retry. */
static const char SQL_PUBLISH_AGAIN[] =
	"INSERT INTO stream (job_id, kind, payload, priority, visible_at, created_at) "
	"SELECT job_id, kind, payload, priority, ?2 + delay_ms, ?2 FROM outbox "
	"WHERE id = (SELECT min(id) FROM outbox WHERE published_at IS NULL AND id <= ?1)";
static const char SQL_MARK[] =
	"UPDATE outbox SET published_at = ?2 WHERE published_at IS NULL AND id <= ?1";
/*
 * PostgreSQL: relays of several boxes run at once, so a batch is the rows
 * this relay locks (FOR UPDATE SKIP LOCKED: another relay's batch is
 * skipped, not waited for), marked and published in one statement.
 * ?1 limit ?2 now.  SQL_PG_PUBLISH_AGAIN is the failpoint's second copy of
 * the batch's first row.
 */
static const char SQL_PG_PUBLISH[] =
	"WITH b AS (SELECT id FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT ?1 "
	"FOR UPDATE SKIP LOCKED), "
	"m AS (UPDATE outbox SET published_at = ?2 FROM b WHERE outbox.id = b.id "
	"RETURNING outbox.id, job_id, kind, payload, priority, delay_ms) "
	"INSERT INTO stream (job_id, kind, payload, priority, visible_at, created_at) "
	"SELECT job_id, kind, payload, priority, ?2 + delay_ms, ?2 FROM m ORDER BY id "
	"RETURNING (SELECT min(id) FROM m)";
static const char SQL_PG_PUBLISH_AGAIN[] =
	"INSERT INTO stream (job_id, kind, payload, priority, visible_at, created_at) "
	"SELECT job_id, kind, payload, priority, ?2 + delay_ms, ?2 FROM outbox "
	"WHERE id = ?1";

/* relay_batch_pg: outbox_relay_batch on PostgreSQL */
static enum sd_result relay_batch_pg(struct db *db, int limit, int64_t now, int64_t *n)
{
	struct db_stmt *st;
	enum sd_result r;
	int64_t first = 0, published = 0;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_PG_PUBLISH))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, limit);
	db_bind_int(st, 2, now);
	while (db_next(st, &r)) {
		first = db_col_int(st, 0);
		published++;
	}
	db_reset(st);
	if (r == SD_OK && published && failpoint_on(FP_RELAY_TWICE)) {
		if (!(st = db_stmt(db, SQL_PG_PUBLISH_AGAIN))) {
			r = SD_DB;
			goto out;
		}
		db_bind_int(st, 1, first);
		db_bind_int(st, 2, now);
		r = db_run(st);
	}
	if (r == SD_OK && published)
		db_notify_on_commit(db);
out:
	if ((r = db_end(db, r)) == SD_OK)
		*n = published;
	return r;
}

enum sd_result outbox_relay_batch(struct db *db, int limit, int64_t *n)
{
	struct db_stmt *st;
	enum sd_result r;
	int64_t now = clock_now_ms(), hi, published;
	int row;

	*n = 0;
	if (limit < 1)
		return err_set(SD_INVALID, "relay batch must be at least 1");
	if (db_kind(db) == DB_PG)
		return relay_batch_pg(db, limit, now, n);
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_BATCH_HI))) {
		r = SD_DB;
		goto fail;
	}
	db_bind_int(st, 1, limit);
	if ((r = db_step(st, &row)) != SD_OK)
		goto fail;
	if (!row || db_col_is_null(st, 0)) {
		db_reset(st);
		return db_commit(db);
	}
	hi = db_col_int(st, 0);
	db_reset(st);
	if (!(st = db_stmt(db, SQL_PUBLISH))) {
		r = SD_DB;
		goto fail;
	}
	db_bind_int(st, 1, hi);
	db_bind_int(st, 2, now);
	if ((r = db_run(st)) != SD_OK)
		goto fail;
	published = db_changes(db);
	if (failpoint_on(FP_RELAY_TWICE)) {
		if (!(st = db_stmt(db, SQL_PUBLISH_AGAIN))) {
			r = SD_DB;
			goto fail;
		}
		db_bind_int(st, 1, hi);
		db_bind_int(st, 2, now);
		if ((r = db_run(st)) != SD_OK)
			goto fail;
	}
	if (!(st = db_stmt(db, SQL_MARK))) {
		r = SD_DB;
		goto fail;
	}
	db_bind_int(st, 1, hi);
	db_bind_int(st, 2, now);
	if ((r = db_run(st)) != SD_OK)
		goto fail;
	if (db_changes(db) != published) {
		r = err_set(SD_DB, "relay: published %lld rows but marked %lld",
			    (long long)published, (long long)db_changes(db));
		goto fail;
	}
	db_notify_on_commit(db);
	if ((r = db_commit(db)) != SD_OK)
		return r;
	*n = published;
	return SD_OK;
fail:
	db_rollback(db);
	return r;
}

static const char SQL_UNPUBLISHED[] = "SELECT count(*) FROM outbox WHERE published_at IS NULL";

enum sd_result outbox_unpublished(struct db *db, int64_t *n)
{
	struct db_stmt *st = db_stmt(db, SQL_UNPUBLISHED);
	enum sd_result r;
	int row;

	*n = 0;
	if (!st)
		return SD_DB;
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (row)
		*n = db_col_int(st, 0);
	db_reset(st);
	return SD_OK;
}

enum sd_result outbox_relay_run(const char *db_path, int batch, int drain, int64_t *published)
{
	struct outbox_relay_opts o = { 0 };

	o.batch = batch;
	o.drain = drain;
	return outbox_relay_run_opts(db_path, &o, published);
}

/* relay_total: published + the rows waiting now; known_total when they
 * cannot be counted (progress is best effort, never a reason to stop). */
static int64_t relay_total(struct db *db, int64_t published, int64_t known_total)
{
	int64_t waiting;

	if (outbox_unpublished(db, &waiting) != SD_OK) {
		err_clear();
		return known_total;
	}
	return published + waiting;
}

/* A failed batch is tried again after this long, doubling to the cap while
 * the failures last: a disk that takes writes again is seen within 2 s. */
#define RELAY_RETRY_MS 100
#define RELAY_RETRY_CAP_MS 2000

enum sd_result outbox_relay_run_opts(const char *db_path, const struct outbox_relay_opts *o,
				     int64_t *published)
{
	static const struct outbox_relay_opts defaults;
	struct db *db = NULL;
	struct notify *nt = NULL;
	enum sd_result r;
	int64_t total = 0, n, known = 0;
	struct episode ep = { 0 };
	char shown[1024], quoted[1100];
	int errors = 0, batch, counting;

	if (!o)
		o = &defaults;
	batch = o->batch < 1 ? OUTBOX_BATCH_DEFAULT : o->batch;
	counting = o->progress != NULL;
	if ((r = db_open(db_path, 0, DB_SYNC_QUEUE, &db)) != SD_OK ||
	    (r = notify_open(db_path, &nt)) != SD_OK)
		goto out;
	db_notify_watch(db, nt);
	text_redact_url(db_path, shown, sizeof shown);
	log_event(LOG_INFO, "relay started", "batch=%d db=%s", batch,
		  log_quote(quoted, sizeof quoted, shown));
	if (counting)
		known = relay_total(db, 0, 0);
	while (!notify_stop_requested()) {
		r = outbox_relay_batch(db, batch, &n);
		if (r != SD_OK) {
			/* a full or failing disk is waited out, however long, with
			 * one line per episode; anything else gives up after 50 */
			int64_t wait = episode_fail(&ep, LOG_ERROR, "relay batch failed", NULL,
						    err_msg(), RELAY_RETRY_MS, RELAY_RETRY_CAP_MS);

			if (!episode_transient(r) && ++errors > 50)
				goto out;
			notify_pause(nt, (int)wait);
			continue;
		}
		errors = 0;
		episode_end(&ep, "relay batches succeed again", NULL);
		total += n;
		if (n > 0) {
			log_event(LOG_DEBUG, "relay published", "n=%lld", (long long)n);
			if (counting && total >= known)
				known = relay_total(db, total, known);
			if (o->progress)
				o->progress(o->arg, total, known);
			continue;
		}
		if (o->drain)
			break;
		notify_wait(nt, 1000);
	}
	r = SD_OK;
	log_event(LOG_INFO, "relay stopped", "published=%lld", (long long)total);
out:
	if (published)
		*published = total;
	notify_close(nt);
	db_close(db);
	return r;
}

/* Each dialect's lookup is the expression its outbox_order index holds. */
static const char SQL_FOR_ORDER[] =
	"SELECT id, kind, created_at, coalesce(published_at, 0), job_id FROM outbox "
	"WHERE json_extract(payload, '$.order_id') = ?1 ORDER BY id";
static const char SQL_PG_FOR_ORDER[] =
	"SELECT id, kind, created_at, coalesce(published_at, 0), job_id FROM outbox "
	"WHERE (payload::jsonb ->> 'order_id') = CAST(?1 AS TEXT) ORDER BY id";

enum sd_result outbox_list_for_order(struct db *db, int64_t order_id,
				     void (*fn)(const struct outbox_row *row, void *arg), void *arg)
{
	struct db_stmt *st = db_stmt_for(db, SQL_FOR_ORDER, SQL_PG_FOR_ORDER);
	enum sd_result r;
	int row;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, order_id);
	for (;;) {
		struct outbox_row o;

		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		o.id = db_col_int(st, 0);
		o.kind = db_col_text(st, 1);
		o.created_at = db_col_int(st, 2);
		o.published_at = db_col_int(st, 3);
		o.job_id = db_col_text(st, 4);
		fn(&o, arg);
	}
	return SD_OK;
}

static const char SQL_CHECK_JOB_IDS[] =
	"SELECT o.id, coalesce(o.job_id, '') FROM outbox o, identity_marks m "
	"WHERE m.name = 'outbox' AND CASE WHEN o.id <= m.upto THEN o.job_id IS NULL OR "
	"o.job_id <> 'outbox:' || o.id ELSE o.job_id IS NULL OR substr(o.job_id, 1, 7) <> "
	"'outbox:' OR substr(o.job_id, 8, 1) BETWEEN '0' AND '9' END ORDER BY o.id LIMIT 1";

enum sd_result outbox_check_job_ids(struct db *db, char *problem, size_t size)
{
	struct db_stmt *st = db_stmt(db, SQL_CHECK_JOB_IDS);
	enum sd_result r;

	problem[0] = '\0';
	if (!st)
		return SD_DB;
	if (db_next(st, &r))
		snprintf(problem, size, "outbox row %lld's job is named '%s': a row made before "
			 "schema 11 keeps outbox:<row id>, one made since has a name of its own",
			 (long long)db_col_int(st, 0), db_col_text(st, 1));
	db_reset(st);
	return r;
}
