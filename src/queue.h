/*
 * queue.h: the job stream: one table with visibility timeouts and
 * fencing tokens.  See the top of queue.c for the state diagram.
 *
 * Every write function runs in the caller's open transaction when there is
 * one (so a worker can ack a batch and claim the next in one commit) and in a
 * transaction of its own otherwise.
 */
#ifndef SD_QUEUE_H
#define SD_QUEUE_H

#include <stdint.h>

#include "db.h"
#include "result.h"

#define QUEUE_JOB_ID_MAX 200		/* longest job_id, without the NUL */
#define QUEUE_KIND_MAX 64		/* longest kind name */
#define QUEUE_SQS_PREFIX "sqs:"		/* an SQS queue's kind: sqs:<queue name> */
#define QUEUE_SQS_NAME_MAX 60		/* longest SQS queue name, .fifo included */
#define QUEUE_ERROR_MAX 1000		/* longest stored error text */
#define QUEUE_LEASE_MS_DEFAULT 60000
#define QUEUE_MAX_ATTEMPTS_DEFAULT 10
#define QUEUE_MAX_DELIVERIES_DEFAULT 5
#define QUEUE_BACKOFF_BASE_MS_DEFAULT 1000
#define QUEUE_BACKOFF_CAP_MS_DEFAULT (10 * 60 * 1000)
#define QUEUE_RETENTION_MS_DEFAULT (7LL * 24 * 3600 * 1000)

/* What the queue does with the jobs of one kind. */
struct kind_policy {
	int64_t lease_ms;		/* visibility timeout of one claim */
	int max_attempts;		/* failed attempts (fail) before the job goes dead */
	int max_deliveries;		/* deliveries that ended by lease expiry (a worker
					 * died or hung) before the job goes dead: poison */
	int64_t backoff_base_ms;	/* first retry delay after a transient failure */
	int64_t backoff_cap_ms;		/* the delay never grows past this */
};

/* queue_policy_default: the built-in policy (60 s lease, 10 attempts, ...). */
void queue_policy_default(struct kind_policy *p);

/* queue_policy_set: the policy for one kind; kind NULL sets the default for
 * every kind without its own.  Call before workers start. */
enum sd_result queue_policy_set(const char *kind, const struct kind_policy *p);

/* queue_policy: the policy in force for kind. */
const struct kind_policy *queue_policy(const char *kind);

/* queue_policy_reset: forget every policy set; back to the built-in one. */
void queue_policy_reset(void);

/* queue_backoff_ms: the delay before retry number `attempts` (1 = after the
 * first failure): base * 2^(attempts-1) capped, with jitter in [d/2, d]. */
int64_t queue_backoff_ms(const struct kind_policy *p, int64_t attempts);

/* A leased entry, as a claim returns it.  One allocation; free with job_free. */
struct job {
	int64_t id;		/* stream entry id: where the lease lives */
	int64_t lease_token;	/* fencing token of this claim */
	int64_t lease_until;	/* the lease ends at this time (ms) */
	int64_t priority;
	int64_t deliveries;	/* claims so far, this one included */
	int64_t expiries;	/* earlier claims that ended by lease expiry */
	int64_t attempts;	/* failed attempts so far */
	int64_t created_at;	/* enqueue time (ms) */
	int64_t first_leased_at; /* the first claim's time (ms) */
	char *job_id;		/* identity: survives redelivery and retry */
	char *kind;
	char *payload;		/* a JSON object */
};

void job_free(struct job *j);

/* What to enqueue.  payload NULL means "{}"; job_id NULL mints one. */
struct enqueue {
	const char *kind;
	const char *payload;
	const char *job_id;
	int64_t delay_ms;	/* >= 0: visible after this long */
	int64_t priority;	/* lower runs first; default 0 */
	int64_t queue;		/* the lane: 0 for the box's own jobs, else an SQS
				 * queue's id (its kind is then sqs:<name>) */
	const char *group;	/* a FIFO queue's MessageGroupId, else NULL */
};

/* queue_kind_valid / queue_job_id_valid: the accepted names; on failure the
 * message says why.  A kind is a-z, 0-9, '_', '-', '.', or sqs:<queue name>. */
enum sd_result queue_kind_valid(const char *kind);

/* queue_sqs_name_valid: an SQS queue name: 1-60 of A-Z a-z 0-9 '_' '-',
 * and a FIFO queue's ends in ".fifo" (counted). */
enum sd_result queue_sqs_name_valid(const char *name);
enum sd_result queue_job_id_valid(const char *job_id);

/* queue_mint_job_id: a new unique job id, time-ordered.  buf holds
 * QUEUE_JOB_ID_MAX + 1 bytes. */
void queue_mint_job_id(char *buf);

/*
 * queue_enqueue: add one entry, ready at now + delay_ms.
 * [out] job_id_out (QUEUE_JOB_ID_MAX + 1 bytes, may be NULL) gets the id.
 * A payload that is not a JSON object is SD_INVALID and writes nothing.
 */
enum sd_result queue_enqueue(struct db *db, const struct enqueue *e, char *job_id_out);

/*
 * queue_claim: lease up to n visible entries in one transaction: the first n
 * in order of priority (lower first), visible time, id, one priority level at
 * a time, each level read up to now and no further (its cost does not grow
 * with the entries that wait).  lease_ms 0 uses each kind's policy.  Entries
 * whose leases expired max_deliveries times are moved to the dead letters
 * instead of being returned.
 * [out] out[0..*n_out) are owned by the caller (job_free), level by level in
 * ascending priority, in no promised order within a level.
 */
enum sd_result queue_claim(struct db *db, const char *worker, int n, int64_t lease_ms,
			   struct job **out, int *n_out);

/* What an SQS queue's claim does beyond the stream's own rules. */
struct lane_rules {
	int fifo;		/* heads of message groups only: one in flight per
				 * group, in order */
	int64_t retention_ms;	/* an entry older than this goes to the dead
				 * letters instead (0: kept) */
	int64_t max_receives;	/* a RedrivePolicy's maxReceiveCount (0: none):
				 * an entry claimed more often moves to dlq,
				 * counts reset, and the poison rule is off */
	int64_t dlq;		/* the dead-letter queue's lane */
	const char *dlq_kind;	/* and its kind (sqs:<name>) */
};

/*
 * queue_claim_lane: queue_claim for the entries of one lane other than 0,
 * which queue_claim never takes: an SQS queue's (lane >= 1, lease_ms > 0),
 * or a controlled kind's (lane < 0, controls.h; lease_ms 0: each kind's
 * policy), under rules (may be NULL).  An entry that a rule moves (to the
 * dead letters, to a dead-letter queue) is not returned.
 */
enum sd_result queue_claim_lane(struct db *db, int64_t lane, const struct lane_rules *rules,
				const char *worker, int n, int64_t lease_ms, struct job **out,
				int *n_out);

/* The calls below name the lease by (id, token) and return SD_STALE, having
 * changed nothing, when the entry was leased again since or is gone. */

/* queue_ack: the job is done: it leaves the stream for done_jobs. */
enum sd_result queue_ack(struct db *db, int64_t id, int64_t token);

/*
 * queue_ack_many: queue_ack for n entries of one claim (one token) in two
 * statements.  [out] acked[i] is 1 when ids[i] was acked, 0 when its token
 * was stale.  ids must be distinct.
 */
enum sd_result queue_ack_many(struct db *db, int64_t token, const int64_t *ids, int n,
			      unsigned char *acked);

/* queue_extend: the lease now ends at now + lease_ms ([out] *until). */
enum sd_result queue_extend(struct db *db, int64_t id, int64_t token, int64_t lease_ms,
			    int64_t *until);

/* queue_retry_later: a snooze: ready again at now + delay_ms; not an attempt. */
enum sd_result queue_retry_later(struct db *db, int64_t id, int64_t token, int64_t delay_ms);

/* queue_release: give the lease back: ready now; not an attempt, not an expiry. */
enum sd_result queue_release(struct db *db, int64_t id, int64_t token);

/*
 * queue_expire_leases: every lease still running ends now, as if its time
 * had passed (the next claim counts the expiry).  For a box made from a
 * backup, whose leases are held by workers of another box.  [out] *n.
 */
enum sd_result queue_expire_leases(struct db *db, int64_t *n);

/*
 * queue_fail: a failed attempt.  Transient: ready again after the kind's
 * backoff; after max_attempts, or at once when permanent, the job goes dead
 * with error as its last error.  [out] *dead (may be NULL) is 1 when it died.
 */
enum sd_result queue_fail(struct db *db, const struct job *j, const char *error, int permanent,
			  int *dead);

/* queue_fail_after: queue_fail, ready again no sooner than min_delay_ms
 * (a provider's Retry-After) even when the backoff is shorter. */
enum sd_result queue_fail_after(struct db *db, const struct job *j, const char *error,
				int permanent, int64_t min_delay_ms, int *dead);

/* ---- dead letters and finished jobs ------------------------------------ */

/* queue_dead_retry: put every dead entry with this job_id back, ready now,
 * attempts and expiries reset.  [out] *n: how many (0 is SD_NOT_FOUND). */
enum sd_result queue_dead_retry(struct db *db, const char *job_id, int64_t *n);

/* queue_dead_purge: delete every dead entry.  [out] *n: how many. */
enum sd_result queue_dead_purge(struct db *db, int64_t *n);

/* queue_prune_done: drop up to limit finished entries older than
 * older_than_ms, adding them to the per-kind totals.  [out] *n: how many. */
enum sd_result queue_prune_done(struct db *db, int64_t older_than_ms, int limit, int64_t *n);

/* ---- looking ------------------------------------------------------------- */

struct queue_counts {
	char kind[QUEUE_KIND_MAX + 1];	/* "" for the total row */
	int64_t ready;		/* visible now (new, retried, or lease expired) */
	int64_t scheduled;	/* not leased, visible later */
	int64_t leased;		/* under a live lease */
	int64_t dead;
	int64_t done;		/* finished, kept and pruned */
};

/*
 * queue_stats: counts by state, per kind and in total.
 * [out] *rows (free()) holds *n rows sorted by kind; *total the sums.
 */
enum sd_result queue_stats(struct db *db, struct queue_counts **rows, int *n,
			   struct queue_counts *total);

/*
 * queue_count_by_state: [out] *total: the box's own ready, scheduled and
 * leased entries and dead letters (lane 0: an SQS queue's messages wait
 * for workers outside the box), over every kind, in one statement (kind
 * is "" and done is 0: finished jobs are not counted here).
 */
enum sd_result queue_count_by_state(struct db *db, struct queue_counts *total);

/* queue_totals_sum: [out] jobs done so far (kept and pruned) and failed
 * attempts so far, over every kind (done_totals: one row per kind). */
enum sd_result queue_totals_sum(struct db *db, int64_t *done, int64_t *failed);

/*
 * queue_each_live: call fn for every entry that can still run: in the stream
 * (ready, scheduled or leased) or in the dead letters (an operator may retry
 * it).  kind NULL: every kind.  fn gets the job_id and, when field (a JSON
 * path such as "$.order_id", may be NULL) names an integer in the payload,
 * its value (else 0).  Strings live until fn returns; fn must not use db.
 */
enum sd_result queue_each_live(struct db *db, const char *kind, const char *field,
			       void (*fn)(const char *job_id, int64_t value, void *arg),
			       void *arg);

/* queue_pending: entries in the stream (ready, scheduled or leased) that
 * the box's workers may take: not an SQS queue's, not a paused kind's. */
enum sd_result queue_pending(struct db *db, int64_t *n);

/* queue_pending_due: those of them visible (ready, or a lease that ends)
 * at before_ms or earlier: what a drain waits for. */
enum sd_result queue_pending_due(struct db *db, int64_t before_ms, int64_t *n);

/* queue_next_visible: the earliest visible_at in lane 0, or -1 if empty;
 * queue_lane_next_visible: in one lane. */
enum sd_result queue_next_visible(struct db *db, int64_t *at);
enum sd_result queue_lane_next_visible(struct db *db, int64_t lane, int64_t *at);

/*
 * queue_reclaims: [out] *n: deliveries that followed an expired lease, over
 * the stream, the dead letters and the finished jobs still kept (a finished
 * job counts deliveries - 1 - attempts, so a snooze or release counts too;
 * pruned finished jobs no longer count).
 */
enum sd_result queue_reclaims(struct db *db, int64_t *n);

/* queue_done_since: [out] *n: finished jobs still kept whose finished_at is
 * after since_ms (the dashboard's jobs per minute: since = now - 60000). */
enum sd_result queue_done_since(struct db *db, int64_t since_ms, int64_t *n);

/* One listed entry; fields not kept for a state are 0 or NULL. */
struct job_row {
	const char *state;	/* ready, scheduled, leased, dead, done, cancelled */
	int64_t id;
	const char *job_id;
	const char *kind;
	const char *payload;
	int64_t priority, deliveries, attempts;
	int64_t visible_at;	/* ready/scheduled/leased: when visible (lease end) */
	int64_t created_at;
	int64_t finished_at;	/* done: finished; dead: died; cancelled: then */
	const char *worker;	/* leased_by or the worker that finished it */
	const char *last_error;
	int64_t leased_at;	/* leased: when it was claimed */
	const char *json;	/* the row as one JSON object */
};

typedef void (*queue_row_fn)(const struct job_row *row, void *arg);

/*
 * queue_list: call fn for each entry in state (NULL: ready, scheduled and
 * leased), of kind (NULL: all), oldest first.  limit (<= 0: none) keeps the
 * oldest rows of the stream and the dead letters (next to run, first to
 * die) and the newest rows of the finished jobs (the recent history).
 * state must be one of ready, scheduled, leased, dead, done, cancelled.
 */
enum sd_result queue_list(struct db *db, const char *state, const char *kind, int limit,
			  queue_row_fn fn, void *arg);

/* queue_job_waiting: [out] *waiting 1 when an entry of job_id is in the
 * stream (ready, scheduled or leased: it will run), 0 when none is. */
enum sd_result queue_job_waiting(struct db *db, const char *job_id, int *waiting);

/* queue_find_job: call fn for every entry with this job_id: in the stream,
 * finished, dead or cancelled (a job delivered twice by a relay has two). */
enum sd_result queue_find_job(struct db *db, const char *job_id, queue_row_fn fn, void *arg);

#endif
