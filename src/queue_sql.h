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
 * The claim: one statement takes up to ?5 visible entries in (priority,
 * visible_at, id) order, walking the stream_claim index.  An entry that still
 * carries a token had its lease expire: that delivery counts as an expiry.
 * leased_at is the claim's time (the lease's age on the dashboard).
 * ?1 now ?2 lease_ms ?3 token ?4 worker ?5 n
 */
#define QUEUE_SQL_CLAIM \
	"UPDATE stream SET visible_at = ?1 + ?2, lease_token = ?3, leased_by = ?4, leased_at = ?1, " \
	"deliveries = deliveries + 1, expiries = expiries + (lease_token IS NOT NULL) " \
	"WHERE id IN (SELECT id FROM stream WHERE visible_at <= ?1 " \
	"ORDER BY priority, visible_at, id LIMIT ?5) " \
	"RETURNING id, job_id, kind, payload, priority, deliveries, expiries, attempts, created_at"

/* The ack: copy to done_jobs, then delete; both fenced by the token.
 * ?1 id ?2 token ?3 now */
#define QUEUE_SQL_ACK_COPY \
	"INSERT INTO done_jobs (job_id, kind, payload, deliveries, attempts, created_at, " \
	"finished_at, worker) SELECT job_id, kind, payload, deliveries, attempts, created_at, " \
	"?3, leased_by FROM stream WHERE id = ?1 AND lease_token = ?2"
#define QUEUE_SQL_ACK_DELETE \
	"DELETE FROM stream WHERE id = ?1 AND lease_token = ?2"

/* The batch ack: every entry of one claim (one token) that finished, named
 * by a JSON array of ids: two statements for the whole batch instead of two
 * per job.  The DELETE returns the ids it removed; an id it did not return
 * was leased again since (stale).  ?1 '[id,...]' ?2 token ?3 now */
#define QUEUE_SQL_ACK_MANY_COPY \
	"INSERT INTO done_jobs (job_id, kind, payload, deliveries, attempts, created_at, " \
	"finished_at, worker) SELECT job_id, kind, payload, deliveries, attempts, created_at, " \
	"?3, leased_by FROM stream WHERE lease_token = ?2 AND id IN (SELECT value FROM json_each(?1)) " \
	"ORDER BY id"
#define QUEUE_SQL_ACK_MANY_DELETE \
	"DELETE FROM stream WHERE lease_token = ?2 AND id IN (SELECT value FROM json_each(?1)) " \
	"RETURNING id"

#endif
