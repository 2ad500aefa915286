/*
 * queue_sql.h: the stream's hot statements, kept in one place so that the
 * benchmark's minimal program (tools/bench/sqlbench.c) issues exactly the SQL
 * that queue.c issues, and "queue overhead" means what it says.
 * Only queue.c and that benchmark include this file.
 */
#ifndef SD_QUEUE_SQL_H
#define SD_QUEUE_SQL_H

/* ?1 job_id ?2 kind ?3 payload ?4 priority ?5 visible_at ?6 created_at
 * ?7 queue (the lane: 0 for the box's own jobs) ?8 grp (NULL but in FIFO).
 * A kind of the box's own under a control goes straight to its lane, so
 * the trigger stream_lane (for the other writers) need not move it after. */
#define QUEUE_SQL_ENQUEUE \
	"INSERT INTO stream (job_id, kind, payload, priority, visible_at, created_at, queue, " \
	"grp) VALUES (?1, ?2, ?3, ?4, ?5, ?6, CASE WHEN ?7 = 0 THEN coalesce((SELECT lane " \
	"FROM controls WHERE kind = ?2), 0) ELSE ?7 END, ?8)"

/*
 * The claim, one priority level at a time.  The stream_claim index is ordered
 * by (priority, visible_at, id): within one priority the entries visible by
 * now are a prefix, so a claim that names its level stops at now, whatever
 * waits behind it (scheduled entries, live leases).  A claim over every level
 * at once could not stop there: it would walk every waiting entry of the
 * lower levels to reach the next one.
 *
 * CLAIM takes up to ?5 visible entries of the lowest level in (visible_at,
 * id) order: one seek finds the level.  It fills most batches alone.  When it
 * comes back short, CLAIM_ABOVE takes from the lowest level above ?6 (NULL:
 * any) that has a visible entry, found by index seeks alone
 * (QUEUE_SQL_LEVEL_READY: the next priority above the last, then whether its
 * first entry is visible, until one is); it is the heavier statement, so it
 * runs only then.  An entry that still carries a token had its lease expire:
 * that delivery counts as an expiry.  leased_at is the claim's time (the
 * lease's age on the dashboard).  Every statement stays in one lane (?7,
 * the index's first column): the box's workers claim lane 0, an SQS queue's
 * receivers its own.
 * ?1 now ?2 lease_ms ?3 token ?4 worker ?5 n [?6 priority or NULL] ?7 lane
 */
#define QUEUE_SQL_LEASE \
	"visible_at = ?1 + ?2, lease_token = ?3, leased_by = ?4, leased_at = ?1, " \
	"first_leased_at = coalesce(first_leased_at, ?1), deliveries = deliveries + 1, " \
	"expiries = expiries + CASE WHEN lease_token IS NOT NULL THEN 1 ELSE 0 END "
#define QUEUE_SQL_CLAIM_SET \
	"UPDATE stream SET " QUEUE_SQL_LEASE "WHERE id IN (SELECT id FROM stream WHERE priority = "
#define QUEUE_SQL_CLAIM_TAIL \
	" AND queue = ?7 AND visible_at <= ?1 ORDER BY visible_at, id LIMIT ?5) " \
	"RETURNING id, job_id, kind, payload, priority, deliveries, expiries, attempts, " \
	"created_at, first_leased_at"
/*
 * PostgreSQL: the same claim with the rows picked in a CTE FOR UPDATE SKIP
 * LOCKED, so workers of several boxes claim side by side, each skipping the
 * rows another claim holds instead of waiting for it (and a row another
 * claim changed since this statement's snapshot is checked again), and the
 * planner cannot update more rows than the LIMIT.
 */
#define QUEUE_SQL_PG_CLAIM_SET \
	"WITH c AS (SELECT id FROM stream WHERE priority = "
#define QUEUE_SQL_PG_CLAIM_TAIL \
	" AND queue = ?7 AND visible_at <= ?1 ORDER BY visible_at, id LIMIT ?5 " \
	"FOR UPDATE SKIP LOCKED) " \
	"UPDATE stream SET " QUEUE_SQL_LEASE "FROM c WHERE stream.id = c.id " \
	"RETURNING stream.id, job_id, kind, payload, priority, deliveries, expiries, attempts, " \
	"created_at, first_leased_at"
#define QUEUE_SQL_LEVEL_READY \
	"(WITH RECURSIVE lv(p) AS (" \
	"SELECT (SELECT min(priority) FROM stream " \
	"WHERE queue = ?7 AND priority >= coalesce(?6 + 1, -9223372036854775808)) " \
	"UNION ALL SELECT (SELECT min(priority) FROM stream WHERE queue = ?7 AND " \
	"priority > lv.p) FROM lv WHERE lv.p IS NOT NULL AND NOT EXISTS " \
	"(SELECT 1 FROM stream WHERE queue = ?7 AND priority = lv.p AND visible_at <= ?1)) " \
	"SELECT p FROM lv WHERE EXISTS " \
	"(SELECT 1 FROM stream WHERE queue = ?7 AND priority = lv.p AND visible_at <= ?1))"
#define QUEUE_SQL_LEVEL_FIRST "(SELECT min(priority) FROM stream WHERE queue = ?7)"
#define QUEUE_SQL_CLAIM \
	QUEUE_SQL_CLAIM_SET QUEUE_SQL_LEVEL_FIRST QUEUE_SQL_CLAIM_TAIL
#define QUEUE_SQL_CLAIM_ABOVE \
	QUEUE_SQL_CLAIM_SET QUEUE_SQL_LEVEL_READY QUEUE_SQL_CLAIM_TAIL
#define QUEUE_SQL_PG_CLAIM \
	QUEUE_SQL_PG_CLAIM_SET QUEUE_SQL_LEVEL_FIRST QUEUE_SQL_PG_CLAIM_TAIL
#define QUEUE_SQL_PG_CLAIM_ABOVE \
	QUEUE_SQL_PG_CLAIM_SET QUEUE_SQL_LEVEL_READY QUEUE_SQL_PG_CLAIM_TAIL

/*
 * A FIFO queue's claim: the oldest entry of each message group alone, and
 * only when it is visible, so a group has one message in flight and the
 * next one waits for its delete (stream_group finds each entry's elders).
 * Entries without a group (none in a FIFO queue today) are taken as they
 * come.  ?1 now ?2 lease_ms ?3 token ?4 worker ?5 n ?7 lane
 */
#define QUEUE_SQL_FIFO_PICK \
	"SELECT id FROM stream s WHERE queue = ?7 AND visible_at <= ?1 AND (grp IS NULL OR " \
	"NOT EXISTS (SELECT 1 FROM stream o WHERE o.queue = ?7 AND o.grp = s.grp AND " \
	"o.id < s.id)) ORDER BY id LIMIT ?5"
#define QUEUE_SQL_CLAIM_FIFO \
	"UPDATE stream SET " QUEUE_SQL_LEASE "WHERE id IN (" QUEUE_SQL_FIFO_PICK ") " \
	"RETURNING id, job_id, kind, payload, priority, deliveries, expiries, attempts, " \
	"created_at, first_leased_at"
#define QUEUE_SQL_PG_CLAIM_FIFO \
	"WITH c AS (" QUEUE_SQL_FIFO_PICK " FOR UPDATE SKIP LOCKED) " \
	"UPDATE stream SET " QUEUE_SQL_LEASE "FROM c WHERE stream.id = c.id " \
	"RETURNING stream.id, job_id, kind, payload, priority, deliveries, expiries, attempts, " \
	"created_at, first_leased_at"

/* The ack: copy to done_jobs, then delete; both fenced by the token.
 * ?1 id ?2 token ?3 now */
#define QUEUE_SQL_ACK_COPY \
	"INSERT INTO done_jobs (job_id, kind, payload, deliveries, attempts, created_at, " \
	"finished_at, worker) SELECT job_id, kind, payload, deliveries, attempts, created_at, " \
	"?3, leased_by FROM stream WHERE id = ?1 AND lease_token = ?2"
#define QUEUE_SQL_ACK_DELETE \
	"DELETE FROM stream WHERE id = ?1 AND lease_token = ?2"

/* The reclaims a finished entry stands for: deliveries beyond the first
 * that no failed attempt explains. */
#define QUEUE_SQL_RECLAIMS \
	"CASE WHEN deliveries - 1 - attempts > 0 THEN deliveries - 1 - attempts ELSE 0 END"

/* The batch ack: every entry of one claim (one token) that finished, named
 * by a JSON array of ids (QUEUE_SQL_IDS, a set in each dialect): two
 * statements for the whole batch instead of two per job.  The DELETE returns the ids it removed, with the kind and the
 * reclaims each stands for (for done_totals); an id it did not return was
 * leased again since (stale).  ?1 '[id,...]' ?2 token ?3 now */
#define QUEUE_SQL_IDS "(SELECT value FROM json_each(?1))"
#define QUEUE_SQL_PG_IDS \
	"(SELECT CAST(v AS BIGINT) FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) AS v)"
#define QUEUE_SQL_ACK_MANY_COPY_OF(ids) \
	"INSERT INTO done_jobs (job_id, kind, payload, deliveries, attempts, created_at, " \
	"finished_at, worker) SELECT job_id, kind, payload, deliveries, attempts, created_at, " \
	"?3, leased_by FROM stream WHERE lease_token = ?2 AND id IN " ids " ORDER BY id"
#define QUEUE_SQL_ACK_MANY_DELETE_OF(ids) \
	"DELETE FROM stream WHERE lease_token = ?2 AND id IN " ids \
	" RETURNING id, kind, " QUEUE_SQL_RECLAIMS
#define QUEUE_SQL_ACK_MANY_COPY QUEUE_SQL_ACK_MANY_COPY_OF(QUEUE_SQL_IDS)
#define QUEUE_SQL_ACK_MANY_DELETE QUEUE_SQL_ACK_MANY_DELETE_OF(QUEUE_SQL_IDS)
#define QUEUE_SQL_PG_ACK_MANY_COPY QUEUE_SQL_ACK_MANY_COPY_OF(QUEUE_SQL_PG_IDS)
#define QUEUE_SQL_PG_ACK_MANY_DELETE QUEUE_SQL_ACK_MANY_DELETE_OF(QUEUE_SQL_PG_IDS)

/*
 * The counts an ack adds, in its transaction (schema/sqlite/0005_totals.sql): per
 * kind the jobs and the reclaims they stand for, per finishing time the jobs
 * the copy inserted (its changes, ?4 at ?3).  The single ack reads its kind
 * from the entry it copied, before the delete (?1 id ?2 token); the batch
 * adds up what its DELETE returned, one ACK_MANY_TOTALS per kind (?1 kind
 * ?2 jobs ?3 reclaims).  No RETURNING on the copies: SQLite pays an
 * ephemeral table per RETURNING statement, more than these cost.
 */
#define QUEUE_SQL_TOTALS_UPSERT \
	" ON CONFLICT (kind) DO UPDATE SET done = done_totals.done + excluded.done, " \
	"done_reclaims = done_totals.done_reclaims + excluded.done_reclaims"
#define QUEUE_SQL_ACK_TOTALS \
	"INSERT INTO done_totals (kind, done, done_reclaims) " \
	"SELECT kind, 1, " QUEUE_SQL_RECLAIMS " FROM stream " \
	"WHERE id = ?1 AND lease_token = ?2" QUEUE_SQL_TOTALS_UPSERT
#define QUEUE_SQL_ACK_MANY_TOTALS \
	"INSERT INTO done_totals (kind, done, done_reclaims) VALUES (?1, ?2, ?3)" \
	QUEUE_SQL_TOTALS_UPSERT
#define QUEUE_SQL_DONE_TIME \
	"INSERT INTO done_times (finished_at, n) VALUES (?3, ?4) " \
	"ON CONFLICT (finished_at) DO UPDATE SET n = done_times.n + excluded.n"

#endif
