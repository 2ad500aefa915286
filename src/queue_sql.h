/*
 * queue_sql.h: the stream's hot statements, kept in one place so that the
 * benchmark's minimal program (tools/bench/sqlbench.c) issues exactly the SQL
 * that queue.c issues, and "queue overhead" means what it says.
 * Only queue.c and that benchmark include this file.
 */
#ifndef SD_QUEUE_SQL_H
#define SD_QUEUE_SQL_H

/* ?1 job_id ?2 kind ?3 payload ?4 priority ?5 visible_at ?6 created_at */
#define QUEUE_SQL_ENQUEUE \
	"INSERT INTO stream (job_id, kind, payload, priority, visible_at, created_at) " \
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6)"

/*
 * The claim, one priority level at a time.  The stream_claim index is ordered
 * by (priority, visible_at, id): within one priority the entries visible by
 * now are a prefix, so a claim that names its level stops at now, whatever
 * waits behind it (scheduled entries, live leases).  A claim over every level
 * at once could not stop there: it would walk every waiting entry of the
 * lower levels to reach the next one.
 *
 * CLAIM takes up to ?5 visible entries of level ?6 (NULL: the lowest level in
 * the stream, found by one index seek) in (visible_at, id) order.  An entry
 * that still carries a token had its lease expire: that delivery counts as an
 * expiry.  leased_at is the claim's time (the lease's age on the dashboard).
 * ?1 now ?2 lease_ms ?3 token ?4 worker ?5 n ?6 priority or NULL
 */
#define QUEUE_SQL_CLAIM \
	"UPDATE stream SET visible_at = ?1 + ?2, lease_token = ?3, leased_by = ?4, leased_at = ?1, " \
	"deliveries = deliveries + 1, expiries = expiries + (lease_token IS NOT NULL) " \
	"WHERE id IN (SELECT id FROM stream WHERE " \
	"priority = coalesce(?6, (SELECT min(priority) FROM stream)) AND visible_at <= ?1 " \
	"ORDER BY visible_at, id LIMIT ?5) " \
	"RETURNING id, job_id, kind, payload, priority, deliveries, expiries, attempts, created_at"

/* The next level above ?1 (NULL: above the lowest), by index seeks: what a
 * claim runs when the level it took from had fewer than it asked for. */
#define QUEUE_SQL_CLAIM_NEXT \
	"SELECT min(priority) FROM stream WHERE priority > coalesce(?1, " \
	"(SELECT min(priority) FROM stream))"

/* The ack: copy to done_jobs, then delete; both fenced by the token.  The
 * copy returns the kind and the reclaims the finished job stands for, which
 * the totals below add up.  ?1 id ?2 token ?3 now */
#define QUEUE_SQL_ACK_COPY \
	"INSERT INTO done_jobs (job_id, kind, payload, deliveries, attempts, created_at, " \
	"finished_at, worker) SELECT job_id, kind, payload, deliveries, attempts, created_at, " \
	"?3, leased_by FROM stream WHERE id = ?1 AND lease_token = ?2 " \
	"RETURNING kind, max(deliveries - 1 - attempts, 0)"
#define QUEUE_SQL_ACK_DELETE \
	"DELETE FROM stream WHERE id = ?1 AND lease_token = ?2"

/* The batch ack: every entry of one claim (one token) that finished, named
 * by a JSON array of ids: two statements for the whole batch instead of two
 * per job, and the totals once per kind.  The DELETE returns the ids it
 * removed; an id it did not return was leased again since (stale).
 * ?1 '[id,...]' ?2 token ?3 now */
#define QUEUE_SQL_ACK_MANY_COPY \
	"INSERT INTO done_jobs (job_id, kind, payload, deliveries, attempts, created_at, " \
	"finished_at, worker) SELECT job_id, kind, payload, deliveries, attempts, created_at, " \
	"?3, leased_by FROM stream WHERE lease_token = ?2 AND id IN (SELECT value FROM json_each(?1)) " \
	"ORDER BY id RETURNING kind, max(deliveries - 1 - attempts, 0)"
#define QUEUE_SQL_ACK_MANY_DELETE \
	"DELETE FROM stream WHERE lease_token = ?2 AND id IN (SELECT value FROM json_each(?1)) " \
	"RETURNING id"

/* The counts an ack adds, in the ack's transaction (schema/0005_totals.sql):
 * per kind, ?1 kind ?2 jobs ?3 their reclaims; per finishing time, ?1 now
 * ?2 jobs. */
#define QUEUE_SQL_TOTALS_DONE \
	"INSERT INTO done_totals (kind, done, done_reclaims) VALUES (?1, ?2, ?3) " \
	"ON CONFLICT (kind) DO UPDATE SET done = done + excluded.done, " \
	"done_reclaims = done_reclaims + excluded.done_reclaims"
#define QUEUE_SQL_DONE_TIME \
	"INSERT INTO done_times (finished_at, n) VALUES (?1, ?2) " \
	"ON CONFLICT (finished_at) DO UPDATE SET n = n + excluded.n"

#endif
