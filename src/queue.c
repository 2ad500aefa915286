/*
 * queue.c: the job stream.
 *
 * The stream is the table `stream`: one row per entry that is not finished
 * and not dead.  An entry's state is not stored; it follows from two columns
 * and the clock:
 *
 *     ready      visible_at <= now            (new, retried, released, or its
 *                                               lease expired: claimable)
 *     scheduled  visible_at >  now, no token  (delayed, backing off, snoozed)
 *     leased     visible_at >  now, token     (a worker holds it until
 *                                               visible_at)
 *     done       a row in done_jobs
 *     dead       a row in dead_jobs
 *
 * Transitions, and the function that makes each:
 *
 *     (new) --queue_enqueue--> ready | scheduled
 *     ready --queue_claim(token)--> leased      deliveries += 1; if the entry
 *                                                still had a token its lease
 *                                                expired: expiries += 1, and at
 *                                                max_deliveries expiries it goes
 *                                                dead (poison) instead
 *     leased --queue_ack(token)--> done          (moved to done_jobs)
 *     leased --queue_extend(token)--> leased     (visible_at pushed on)
 *     leased --queue_retry_later(token, d)--> scheduled at now + d  (a snooze)
 *     leased --queue_release(token)--> ready     (graceful stop)
 *     leased --queue_fail(token)--> scheduled at now + backoff(attempts)
 *                                  (queue_fail_after: never sooner than its
 *                                   floor, a provider's Retry-After)
 *                                 | dead after max_attempts or when permanent
 *     leased --time passes--> ready              (no sweeper: the claim's
 *                                                 WHERE visible_at <= now
 *                                                 simply matches it again)
 *     dead --queue_dead_retry--> ready           (same job_id)
 *     done --queue_prune_done--> counted in done_totals
 *
 * The claim takes one priority level at a time (claim_levels): the index
 * stream_claim is ordered (priority, visible_at, id), so within a level the
 * ready entries come first and the walk stops at now.
 *
 * Counts that would otherwise walk the history are kept in the same
 * transaction as the change they count (schema/sqlite/0005_totals.sql): per kind in
 * done_totals (done, done_reclaims at the ack and the prune; dead,
 * dead_expiries at the move to dead, the retry and the purge), per finishing
 * time in done_times (the ack, the prune).
 *
 * Invariants:
 *  - a call that names a lease matches `id = ? AND lease_token = ?`; once the
 *    entry is claimed again the old token matches nothing, so a slow or
 *    revived worker can change nothing (fencing).  Such calls report SD_STALE.
 *  - a token is a fresh 63-bit random number per claim, never reused.
 *  - leased_at is the time of the claim that set the token, NULL when there
 *    is none: extend keeps it, release, retry_later and fail clear it.
 *  - a transition that moves a row between tables does its two statements in
 *    one transaction.
 *  - times are bound parameters from clock_now_ms().
 *  - done_totals.done = rows of done_jobs + pruned, .dead = rows of
 *    dead_jobs, per kind; done_times.n = rows of done_jobs finished at that
 *    time, never 0 (tests/test_queue_totals.c holds them to a full count).
 */
#define _GNU_SOURCE
#include "queue.h"

#include <assert.h>
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "clock.h"
#include "log.h"
#include "queue_sql.h"

/* ======================== random numbers ================================ */

/* A per-thread xorshift generator seeded from the kernel: tokens, jitter and
 * job ids need to be unpredictable enough to never collide, not secret. */
static _Thread_local uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t x;

	if (rng_state == 0) {
		if (getrandom(&rng_state, sizeof rng_state, 0) != sizeof rng_state)
			rng_state = (uint64_t)clock_mono_us() * 0x9E3779B97F4A7C15ULL;
		rng_state |= 1;
	}
	x = rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

/* ======================== policies ====================================== */

#define POLICY_MAX 64

static struct {
	char kind[QUEUE_KIND_MAX + 1];
	struct kind_policy p;
} policies[POLICY_MAX];
static int n_policies;
static struct kind_policy policy_fallback = {
	QUEUE_LEASE_MS_DEFAULT, QUEUE_MAX_ATTEMPTS_DEFAULT, QUEUE_MAX_DELIVERIES_DEFAULT,
	QUEUE_BACKOFF_BASE_MS_DEFAULT, QUEUE_BACKOFF_CAP_MS_DEFAULT,
};

void queue_policy_default(struct kind_policy *p)
{
	p->lease_ms = QUEUE_LEASE_MS_DEFAULT;
	p->max_attempts = QUEUE_MAX_ATTEMPTS_DEFAULT;
	p->max_deliveries = QUEUE_MAX_DELIVERIES_DEFAULT;
	p->backoff_base_ms = QUEUE_BACKOFF_BASE_MS_DEFAULT;
	p->backoff_cap_ms = QUEUE_BACKOFF_CAP_MS_DEFAULT;
}

enum sd_result queue_policy_set(const char *kind, const struct kind_policy *p)
{
	int i;

	if (p->lease_ms < 1 || p->max_attempts < 1 || p->max_deliveries < 1 ||
	    p->backoff_base_ms < 0 || p->backoff_cap_ms < p->backoff_base_ms)
		return err_set(SD_INVALID, "policy for %s: lease, attempts and deliveries must be "
			       "at least 1 and the backoff cap at least its base",
			       kind ? kind : "every kind");
	if (!kind) {
		policy_fallback = *p;
		return SD_OK;
	}
	if (queue_kind_valid(kind) != SD_OK)
		return SD_INVALID;
	for (i = 0; i < n_policies; i++) {
		if (strcmp(policies[i].kind, kind) == 0) {
			policies[i].p = *p;
			return SD_OK;
		}
	}
	if (n_policies == POLICY_MAX)
		return err_set(SD_INVALID, "too many kinds with their own policy (max %d)", POLICY_MAX);
	strcpy(policies[n_policies].kind, kind);
	policies[n_policies].p = *p;
	n_policies++;
	return SD_OK;
}

const struct kind_policy *queue_policy(const char *kind)
{
	int i;

	for (i = 0; i < n_policies; i++)
		if (strcmp(policies[i].kind, kind) == 0)
			return &policies[i].p;
	return &policy_fallback;
}

void queue_policy_reset(void)
{
	n_policies = 0;
	queue_policy_default(&policy_fallback);
}

int64_t queue_backoff_ms(const struct kind_policy *p, int64_t attempts)
{
	int64_t d = p->backoff_base_ms;
	int64_t i;

	for (i = 1; i < attempts && d < p->backoff_cap_ms; i++)
		d = d > p->backoff_cap_ms / 2 ? p->backoff_cap_ms : d * 2;
	if (d > p->backoff_cap_ms)
		d = p->backoff_cap_ms;
	if (d < 2)
		return d;
	/* "equal jitter": never sooner than half the delay, spread over the rest,
	 * so that jobs failing together do not come back together */
	return d / 2 + (int64_t)(rng_next() % (uint64_t)(d - d / 2 + 1));
}

/* ======================== names and ids ================================= */

enum sd_result queue_sqs_name_valid(const char *name)
{
	size_t i, len = name ? strlen(name) : 0, fifo = 0;

	if (len > 5 && strcmp(name + len - 5, ".fifo") == 0)
		fifo = 5;
	if (len == fifo)
		return err_set(SD_INVALID, "a queue name is empty");
	if (len > QUEUE_SQS_NAME_MAX)
		return err_set(SD_INVALID, "a queue name is at most %d characters here",
			       QUEUE_SQS_NAME_MAX);
	for (i = 0; i < len - fifo; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!(isalnum(c) || c == '_' || c == '-'))
			return err_set(SD_INVALID, "a queue name may hold only A-Z, a-z, 0-9, '_' "
				       "and '-', and end in .fifo");
	}
	return SD_OK;
}

enum sd_result queue_kind_valid(const char *kind)
{
	size_t i, len;

	if (!kind || !*kind)
		return err_set(SD_INVALID, "job kind is empty");
	if (strncmp(kind, QUEUE_SQS_PREFIX, strlen(QUEUE_SQS_PREFIX)) == 0)
		return queue_sqs_name_valid(kind + strlen(QUEUE_SQS_PREFIX));
	len = strlen(kind);
	if (len > QUEUE_KIND_MAX)
		return err_set(SD_INVALID, "job kind is longer than %d characters", QUEUE_KIND_MAX);
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)kind[i];
		if (!(islower(c) || isdigit(c) || c == '_' || c == '-' || c == '.'))
			return err_set(SD_INVALID,
				       "job kind '%.64s' may hold only a-z, 0-9, '_', '-' and '.'",
				       kind);
	}
	return SD_OK;
}

enum sd_result queue_job_id_valid(const char *job_id)
{
	size_t i, len;

	if (!job_id || !*job_id)
		return err_set(SD_INVALID, "job id is empty");
	len = strlen(job_id);
	if (len > QUEUE_JOB_ID_MAX)
		return err_set(SD_INVALID, "job id is longer than %d characters", QUEUE_JOB_ID_MAX);
	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)job_id[i];
		if (c <= ' ' || c >= 127 || c == '"' || c == '\\')
			return err_set(SD_INVALID, "job id may hold only printable ASCII without "
				       "spaces, quotes or backslashes");
	}
	return SD_OK;
}

static uint32_t proc_tag;

static void proc_tag_init(void)
{
	uint32_t t;

	if (getrandom(&t, sizeof t, 0) != sizeof t)
		t = (uint32_t)rng_next();
	proc_tag = t;
}

void queue_mint_job_id(char *buf)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	static atomic_uint_fast64_t counter;
	uint64_t c = atomic_fetch_add(&counter, 1);

	pthread_once(&once, proc_tag_init);
	/* time first so ids sort by minting time; then a per-process tag and a
	 * per-process counter, so two processes minting in the same millisecond
	 * differ in the tag and one process never repeats */
	snprintf(buf, QUEUE_JOB_ID_MAX + 1, "j%011llx%08x%06llx",
		 (unsigned long long)clock_now_ms() & 0xfffffffffffULL, proc_tag,
		 (unsigned long long)(c & 0xffffff));
}

/* ======================== jobs =========================================== */

void job_free(struct job *j)
{
	free(j);
}

static struct job *job_from_row(struct db_stmt *st)
{
	const char *job_id = db_col_text(st, 1), *kind = db_col_text(st, 2),
		   *payload = db_col_text(st, 3);
	size_t a = strlen(job_id) + 1, b = strlen(kind) + 1, c = strlen(payload) + 1;
	struct job *j = malloc(sizeof *j + a + b + c);

	if (!j)
		return NULL;
	j->id = db_col_int(st, 0);
	j->priority = db_col_int(st, 4);
	j->deliveries = db_col_int(st, 5);
	j->expiries = db_col_int(st, 6);
	j->attempts = db_col_int(st, 7);
	j->created_at = db_col_int(st, 8);
	j->first_leased_at = db_col_int(st, 9);
	j->job_id = (char *)(j + 1);
	j->kind = j->job_id + a;
	j->payload = j->kind + b;
	memcpy(j->job_id, job_id, a);
	memcpy(j->kind, kind, b);
	memcpy(j->payload, payload, c);
	return j;
}

/* Run body-less transaction helpers: open our own transaction unless the
 * caller has one open; db_begin joins an open one. */
static enum sd_result tx_end(struct db *db, enum sd_result r)
{
	if (r == SD_OK || r == SD_STALE || r == SD_NOT_FOUND) {
		enum sd_result c = db_commit(db);
		return c != SD_OK ? c : r;
	}
	db_rollback(db);
	return r;
}

/* ======================== enqueue ======================================== */

enum sd_result queue_enqueue(struct db *db, const struct enqueue *e, char *job_id_out)
{
	char minted[QUEUE_JOB_ID_MAX + 1];
	const char *payload = e->payload ? e->payload : "{}";
	const char *job_id = e->job_id;
	const char *p = payload;
	struct db_stmt *st;
	enum sd_result r;
	int64_t now;

	if ((r = queue_kind_valid(e->kind)) != SD_OK)
		return r;
	if ((strncmp(e->kind, QUEUE_SQS_PREFIX, strlen(QUEUE_SQS_PREFIX)) == 0) != (e->queue > 0))
		return err_set(SD_INVALID, e->queue > 0 ? "an SQS queue holds only kind sqs:<name>"
				: "kind %.64s belongs to an SQS queue: send it through the SQS "
				"listener", e->kind);
	if (job_id && (r = queue_job_id_valid(job_id)) != SD_OK)
		return r;
	if (e->delay_ms < 0)
		return err_set(SD_INVALID, "delay must not be negative");
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	if (*p != '{')
		return err_set(SD_INVALID, "payload must be a JSON object, like {\"ms\": 10}");
	if (!job_id) {
		queue_mint_job_id(minted);
		job_id = minted;
	}
	if (!(st = db_stmt(db, QUEUE_SQL_ENQUEUE)))
		return SD_DB;
	now = clock_now_ms();
	db_bind_text(st, 1, job_id);
	db_bind_text(st, 2, e->kind);
	db_bind_text(st, 3, payload);
	db_bind_int(st, 4, e->priority);
	db_bind_int(st, 5, now + e->delay_ms);
	db_bind_int(st, 6, now);
	db_bind_int(st, 7, e->queue);
	if (e->group)
		db_bind_text(st, 8, e->group);
	else
		db_bind_null(st, 8);
	if ((r = db_begin(db)) != SD_OK)
		return r;
	r = db_run(st);
	if (r == SD_INVALID) {
		/* The CHECK (json_valid) refused the row and SQLite undid that one
		 * statement: nothing was written.  End our level as a commit, so a
		 * caller's transaction survives this refusal as it survives the
		 * ones above, instead of being doomed by a rollback. */
		enum sd_result c = db_commit(db);
		if (c != SD_OK)
			return c;
		return err_set(r, "payload is not valid JSON: %.80s", payload);
	}
	if (r == SD_OK)
		db_notify_on_commit(db);
	r = tx_end(db, r);
	if (r == SD_OK && job_id_out)
		snprintf(job_id_out, QUEUE_JOB_ID_MAX + 1, "%s", job_id);
	return r;
}

/* ======================== the claim ====================================== */

static const char SQL_TO_DEAD[] =
	"INSERT INTO dead_jobs (job_id, kind, payload, priority, deliveries, expiries, attempts, "
	"last_error, created_at, died_at, queue) SELECT job_id, kind, payload, priority, "
	"deliveries, expiries, ?3, ?4, created_at, ?5, queue FROM stream "
	"WHERE id = ?1 AND lease_token = ?2";

/* The dead letter's count and expiries, from the entry still in the stream
 * (the copy above is fenced; this runs only when it moved a row). */
static const char SQL_TOTALS_DEAD[] =
	"INSERT INTO done_totals (kind, dead, dead_expiries) SELECT kind, 1, expiries FROM stream "
	"WHERE id = ?1 ON CONFLICT (kind) DO UPDATE SET dead = done_totals.dead + excluded.dead, "
	"dead_expiries = done_totals.dead_expiries + excluded.dead_expiries";

/* Move a leased entry to the dead letters; SD_STALE when the token is old. */
static enum sd_result move_to_dead(struct db *db, int64_t id, int64_t token, int64_t attempts,
				   const char *error)
{
	struct db_stmt *st;
	enum sd_result r;
	char err[QUEUE_ERROR_MAX + 1];

	/* a move between tables: its statements in one transaction, under a
	 * lease a claim gave */
	assert(db_in_tx(db));
	assert(token > 0);
	snprintf(err, sizeof err, "%s", error && *error ? error : "failed");
	if (!(st = db_stmt(db, SQL_TO_DEAD)))
		return SD_DB;
	db_bind_int(st, 1, id);
	db_bind_int(st, 2, token);
	db_bind_int(st, 3, attempts);
	db_bind_text(st, 4, err);
	db_bind_int(st, 5, clock_now_ms());
	if ((r = db_run(st)) != SD_OK)
		return r;
	if (db_changes(db) == 0)
		return SD_STALE;
	if (!(st = db_stmt(db, SQL_TOTALS_DEAD)))
		return SD_DB;
	db_bind_int(st, 1, id);
	if ((r = db_run(st)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, QUEUE_SQL_ACK_DELETE)))
		return SD_DB;
	db_bind_int(st, 1, id);
	db_bind_int(st, 2, token);
	return db_run(st);
}

static const char SQL_SET_LEASE[] =
	"UPDATE stream SET visible_at = ?3 WHERE id = ?1 AND lease_token = ?2";

/* What one claim stamps on every entry it takes. */
struct claim_req {
	int64_t now;		/* the claim's time */
	int64_t lease_ms;	/* lease of every entry, before per-kind policies */
	int64_t token;		/* the claim's fencing token */
	const char *worker;	/* leased_by */
	int64_t lane;		/* stream.queue: 0 for the box's own jobs */
	int fifo;		/* the lane is a FIFO queue's: heads of groups only */
	const struct lane_rules *rules;	/* an SQS queue's, or NULL */
};

/* claim_level: lease up to n - *got visible entries into out[*got..], *got
 * moved on: with above 0 (QUEUE_SQL_CLAIM) of the lowest level; else
 * (QUEUE_SQL_CLAIM_ABOVE) of the lowest level above `level` (above any level
 * when has_level is 0) that has a visible entry. */
static enum sd_result claim_level(struct db *db, const struct claim_req *c, int above,
				  int has_level, int64_t level, int n, struct job **out, int *got)
{
	struct db_stmt *st = c->fifo ? db_stmt_for(db, QUEUE_SQL_CLAIM_FIFO, QUEUE_SQL_PG_CLAIM_FIFO)
			     : above ? db_stmt_for(db, QUEUE_SQL_CLAIM_ABOVE, QUEUE_SQL_PG_CLAIM_ABOVE)
				     : db_stmt_for(db, QUEUE_SQL_CLAIM, QUEUE_SQL_PG_CLAIM);
	enum sd_result r;
	int row;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, c->now);
	db_bind_int(st, 2, c->lease_ms);
	db_bind_int(st, 3, c->token);
	db_bind_text(st, 4, c->worker);
	db_bind_int(st, 5, n - *got);
	db_bind_int(st, 7, c->lane);
	if (above && has_level)
		db_bind_int(st, 6, level);
	else if (above)
		db_bind_null(st, 6);
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		if (*got == n) {	/* cannot happen: LIMIT n - got */
			db_reset(st);
			return err_set(SD_DB, "claim returned more rows than asked");
		}
		if (!(out[*got] = job_from_row(st))) {
			db_reset(st);
			return err_set(SD_NOMEM, "out of memory claiming jobs");
		}
		out[*got]->lease_token = c->token;
		out[*got]->lease_until = c->now + c->lease_ms;
		(*got)++;
	}
	db_reset(st);
	return SD_OK;
}

/*
 * claim_levels: fill out[0..n) level by level, in ascending priority.  Each
 * level is read through the index up to `now` and no further, so entries
 * that wait (scheduled, leased) cost nothing; the levels with nothing
 * visible cost two index seeks each (QUEUE_SQL_LEVEL_READY), inside the
 * claim's statement.  So a claim costs ~L log N for the L distinct
 * priorities in the stream up to the last level it takes from (all of them
 * when it comes back short).  Priorities are any int64 here; the CLI accepts
 * -1,000,000 to 1,000,000 and the ticket pipeline uses 0 alone, so L is 1 in
 * practice and a few when an operator splits urgent work off.  A batch that
 * the lowest level fills is one statement; one that comes back short takes
 * one more per further level it takes from, and one that finds nothing.
 */
static enum sd_result claim_levels(struct db *db, const struct claim_req *c, int n,
				   struct job **out, int *got)
{
	enum sd_result r;
	int before;

	if ((r = claim_level(db, c, 0, 0, 0, n, out, got)) != SD_OK)
		return r;
	while (*got < n && !c->fifo) {
		before = *got;
		r = claim_level(db, c, 1, *got > 0, *got > 0 ? out[*got - 1]->priority : 0, n, out,
				got);
		if (r != SD_OK || *got == before)
			return r;
	}
	return SD_OK;
}

static const char SQL_REDRIVE[] =
	"UPDATE stream SET queue = ?3, kind = ?4, visible_at = ?5, lease_token = NULL, "
	"leased_by = NULL, leased_at = NULL, deliveries = 0, expiries = 0, first_leased_at = NULL "
	"WHERE id = ?1 AND lease_token = ?2";

/* lane_rule: an SQS queue's rules for one claimed entry: SD_OK to hand it
 * out, SD_STALE when it moved (retention to the dead letters, a redrive to
 * the dead-letter queue, which is woken), an error else */
static enum sd_result lane_rule(struct db *db, const struct claim_req *c, const struct job *j)
{
	const struct lane_rules *lr = c->rules;
	struct db_stmt *st;
	enum sd_result r;

	if (lr->retention_ms && j->created_at <= c->now - lr->retention_ms) {
		r = move_to_dead(db, j->id, c->token, j->attempts, "retention period passed");
		return r == SD_OK ? SD_STALE : r;
	}
	if (!lr->max_receives || j->deliveries <= lr->max_receives)
		return SD_OK;
	if (!(st = db_stmt(db, SQL_REDRIVE)))
		return SD_DB;
	db_bind_int(st, 1, j->id);
	db_bind_int(st, 2, c->token);
	db_bind_int(st, 3, lr->dlq);
	db_bind_text(st, 4, lr->dlq_kind);
	db_bind_int(st, 5, c->now);
	if ((r = db_run(st)) != SD_OK)
		return r;
	db_notify_on_commit(db);
	return SD_STALE;
}

/*
 * claim_policies: per-kind leases and the poison rule, in the claim's
 * transaction.  Compacts out[0..got) in place to [out] *kept jobs; each slot
 * is cleared as its job is taken, so that on failure the caller, freeing
 * out[0..got), frees every job left exactly once.
 */
static enum sd_result claim_policies(struct db *db, const struct claim_req *c, int lease_given,
				     struct job **out, int got, int *kept)
{
	enum sd_result r;
	int i;

	for (i = *kept = 0; i < got; i++) {
		struct job *j = out[i];
		const struct kind_policy *p = queue_policy(j->kind);

		out[i] = NULL;
		if (c->rules && (r = lane_rule(db, c, j)) != SD_OK) {
			job_free(j);
			if (r != SD_STALE)	/* SD_STALE: the rule moved it */
				return r;
			continue;
		}
		if (j->expiries >= p->max_deliveries && !(c->rules && c->rules->max_receives)) {
			char msg[160];
			snprintf(msg, sizeof msg,
				 "poison: delivered %lld times, %lld leases expired without an ack",
				 (long long)j->deliveries - 1, (long long)j->expiries);
			r = move_to_dead(db, j->id, c->token, j->attempts, msg);
			if (r == SD_OK)
				log_event(LOG_WARN, "job dead", "job_id=%s kind=%s outcome=dead "
					  "reason=poison deliveries=%lld expiries=%lld", j->job_id,
					  j->kind, (long long)j->deliveries - 1,
					  (long long)j->expiries);
			job_free(j);
			if (r != SD_OK)
				return r;
			continue;
		}
		out[(*kept)++] = j;
		if (!lease_given && p->lease_ms != c->lease_ms) {
			struct db_stmt *ls = db_stmt(db, SQL_SET_LEASE);
			if (!ls)
				return SD_DB;
			db_bind_int(ls, 1, j->id);
			db_bind_int(ls, 2, c->token);
			db_bind_int(ls, 3, c->now + p->lease_ms);
			if ((r = db_run(ls)) != SD_OK)
				return r;
			j->lease_until = c->now + p->lease_ms;
		}
	}
	return SD_OK;
}

static enum sd_result claim(struct db *db, struct claim_req *c, int n, int64_t lease_ms,
			    struct job **out, int *n_out);

enum sd_result queue_claim(struct db *db, const char *worker, int n, int64_t lease_ms,
			   struct job **out, int *n_out)
{
	struct claim_req c = { .worker = worker };

	return claim(db, &c, n, lease_ms, out, n_out);
}

enum sd_result queue_claim_lane(struct db *db, int64_t lane, const struct lane_rules *rules,
				const char *worker, int n, int64_t lease_ms, struct job **out,
				int *n_out)
{
	struct claim_req c = { .worker = worker, .lane = lane, .fifo = rules && rules->fifo,
			       .rules = rules };

	if (lane == 0 || (lane > 0 && lease_ms < 1))
		return err_set(SD_INVALID, "a lane is not 0, an SQS queue's lease 1 ms or more");
	if (rules && rules->max_receives && (rules->dlq < 1 || !rules->dlq_kind))
		return err_set(SD_INVALID, "a redrive names its dead-letter queue");
	return claim(db, &c, n, lease_ms, out, n_out);
}

static enum sd_result claim(struct db *db, struct claim_req *cr, int n, int64_t lease_ms,
			    struct job **out, int *n_out)
{
	struct claim_req c = *cr;
	enum sd_result r;
	int got = 0, i, kept = 0;

	*n_out = 0;
	if (n < 1)
		return err_set(SD_INVALID, "claim needs n >= 1");
	c.now = clock_now_ms();
	c.token = (int64_t)(rng_next() >> 1);
	if (c.token == 0)
		c.token = 1;
	assert(c.token > 0);	/* 63 bits, never 0: a lease always has one */
	c.lease_ms = lease_ms > 0 ? lease_ms : policy_fallback.lease_ms;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = claim_levels(db, &c, n, out, &got)) != SD_OK ||
	    (r = claim_policies(db, &c, lease_ms > 0, out, got, &kept)) != SD_OK) {
		db_rollback(db);
		goto freeall;
	}
	if ((r = db_commit(db)) != SD_OK) {
		got = kept;
		goto freeall;
	}
	assert(kept <= got && got <= n);
	*n_out = kept;
	return SD_OK;
freeall:
	for (i = 0; i < got; i++) {
		job_free(out[i]);
		out[i] = NULL;
	}
	return r;
}

/* ======================== calls on a lease =============================== */

/* ack_time: the `copied` jobs an ack finished at now, into done_times. */
static enum sd_result ack_time(struct db *db, int64_t now, int64_t copied)
{
	struct db_stmt *st = db_stmt(db, QUEUE_SQL_DONE_TIME);

	if (!st)
		return SD_DB;
	db_bind_int(st, 3, now);
	db_bind_int(st, 4, copied);
	return db_run(st);
}

enum sd_result queue_ack(struct db *db, int64_t id, int64_t token)
{
	int64_t now, copied;
	struct db_stmt *st;
	enum sd_result r;

	assert(token > 0);	/* a lease's, from a claim */
	if ((r = db_begin(db)) != SD_OK)
		return r;
	now = clock_now_ms();	/* under the write lock: finishing order */
	if (!(st = db_stmt(db, QUEUE_SQL_ACK_COPY))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, id);
	db_bind_int(st, 2, token);
	db_bind_int(st, 3, now);
	if ((r = db_run(st)) != SD_OK)
		goto out;
	if ((copied = db_changes(db)) == 0) {
		r = err_set(SD_STALE, "entry %lld: lease token is stale", (long long)id);
		goto out;
	}
	if ((r = ack_time(db, now, copied)) != SD_OK)
		goto out;
	/* the kind and the reclaims, from the entry before it goes */
	if (!(st = db_stmt(db, QUEUE_SQL_ACK_TOTALS))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, id);
	db_bind_int(st, 2, token);
	if ((r = db_run(st)) != SD_OK)
		goto out;
	if (!(st = db_stmt(db, QUEUE_SQL_ACK_DELETE))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, id);
	db_bind_int(st, 2, token);
	r = db_run(st);
out:
	return tx_end(db, r);
}

struct id_pos {
	int64_t id;
	int pos;
};

static int id_pos_cmp(const void *a, const void *b)
{
	int64_t x = ((const struct id_pos *)a)->id, y = ((const struct id_pos *)b)->id;

	return x < y ? -1 : x > y;
}

/* Per-kind sums of the jobs one batch ack finished, for done_totals. */
struct ack_sum {
	char kind[QUEUE_KIND_MAX + 1];
	int64_t n;		/* jobs of this kind */
	int64_t reclaims;	/* the reclaims they stand for */
};

/* ack_sum_add: one finished job into sums[0..*n_sums). */
static void ack_sum_add(struct ack_sum *sums, int *n_sums, const char *kind, int64_t reclaims)
{
	int i;

	for (i = 0; i < *n_sums && strcmp(sums[i].kind, kind) != 0; i++)
		;
	if (i == *n_sums) {
		snprintf(sums[i].kind, sizeof sums[i].kind, "%s", kind);
		sums[i].n = sums[i].reclaims = 0;
		(*n_sums)++;
	}
	sums[i].n++;
	sums[i].reclaims += reclaims;
}

static int ack_sum_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ack_sum *)a)->kind, ((const struct ack_sum *)b)->kind);
}

/* ack_sums_store: sums[0..n_sums) into done_totals, one statement a kind. */
static enum sd_result ack_sums_store(struct db *db, const struct ack_sum *sums, int n_sums)
{
	enum sd_result r = SD_OK;
	int i;

	for (i = 0; i < n_sums && r == SD_OK; i++) {
		struct db_stmt *st = db_stmt(db, QUEUE_SQL_ACK_MANY_TOTALS);

		if (!st)
			return SD_DB;
		db_bind_text(st, 1, sums[i].kind);
		db_bind_int(st, 2, sums[i].n);
		db_bind_int(st, 3, sums[i].reclaims);
		r = db_run(st);
	}
	return r;
}

/* ack_mark: acked[pos] = 1 for id, found in order[0..n) (sorted by id) by
 * bisection: the DELETE returns ids in no promised order. */
static void ack_mark(const struct id_pos *order, int n, int64_t id, unsigned char *acked)
{
	int lo = 0, hi = n - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (order[mid].id == id) {
			acked[order[mid].pos] = 1;
			return;
		}
		if (order[mid].id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
}

enum sd_result queue_ack_many(struct db *db, int64_t token, const int64_t *ids, int n,
			      unsigned char *acked)
{
	int64_t now, copied;
	struct ack_sum *sums;
	struct id_pos *order;
	struct db_stmt *st;
	enum sd_result r;
	char *list, *p;
	int i, n_sums = 0;

	if (n < 1)
		return SD_OK;
	assert(token > 0);	/* the claim's that leased them */
	if (n == 1) {
		/* one job: the per-row statements beat building a JSON list */
		r = queue_ack(db, ids[0], token);
		acked[0] = r == SD_OK;
		return r == SD_STALE ? SD_OK : r;
	}
	/* "[id,id,...]": at most 20 digits and a comma per id */
	list = malloc((size_t)n * 21 + 3);
	order = malloc((size_t)n * sizeof *order);
	sums = malloc((size_t)n * sizeof *sums);
	if (!list || !order || !sums) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out_free;
	}
	for (i = 0; i < n; i++) {
		order[i].id = ids[i];
		order[i].pos = i;
	}
	qsort(order, (size_t)n, sizeof *order, id_pos_cmp);
	p = list;
	*p++ = '[';
	for (i = 0; i < n; i++) {
		p += sprintf(p, "%s%lld", i ? "," : "", (long long)ids[i]);
		acked[i] = 0;
	}
	*p++ = ']';
	*p = '\0';
	if ((r = db_begin(db)) != SD_OK)
		goto out_free;
	now = clock_now_ms();
	if (!(st = db_stmt_for(db, QUEUE_SQL_ACK_MANY_COPY, QUEUE_SQL_PG_ACK_MANY_COPY))) {
		r = SD_DB;
		goto out;
	}
	db_bind_text(st, 1, list);
	db_bind_int(st, 2, token);
	db_bind_int(st, 3, now);
	if ((r = db_run(st)) != SD_OK || (copied = db_changes(db)) == 0)
		goto out;	/* nothing copied: every token was stale */
	if ((r = ack_time(db, now, copied)) != SD_OK)
		goto out;
	if (!(st = db_stmt_for(db, QUEUE_SQL_ACK_MANY_DELETE, QUEUE_SQL_PG_ACK_MANY_DELETE))) {
		r = SD_DB;
		goto out;
	}
	db_bind_text(st, 1, list);
	db_bind_int(st, 2, token);
	while (db_next(st, &r)) {
		ack_mark(order, n, db_col_int(st, 0), acked);
		ack_sum_add(sums, &n_sums, db_col_text(st, 1), db_col_int(st, 2));
	}
	db_reset(st);
	/* The kinds' done_totals rows in one order, whatever order the jobs
	 * came in: two workers acking the same kinds at once then lock those
	 * rows in the same order, never crossed (PostgreSQL would abort one as
	 * a deadlock, and its worker would back off as from a full disk). */
	qsort(sums, (size_t)n_sums, sizeof *sums, ack_sum_cmp);
	if (r == SD_OK)
		r = ack_sums_store(db, sums, n_sums);
out:
	r = tx_end(db, r);
out_free:
	free(list);
	free(order);
	free(sums);
	return r;
}

/* One UPDATE fenced by the token; SD_STALE when it matched nothing. */
static enum sd_result lease_update(struct db *db, const char *sql, int64_t id, int64_t token,
				   int64_t visible_at, const char *what)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;

	assert(token > 0);	/* a lease's, from a claim */
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	db_bind_int(st, 2, token);
	db_bind_int(st, 3, visible_at);
	if ((r = db_run(st)) != SD_OK)
		return r;
	if (db_changes(db) == 0)
		return err_set(SD_STALE, "entry %lld: %s with a stale lease token", (long long)id, what);
	return SD_OK;
}

enum sd_result queue_extend(struct db *db, int64_t id, int64_t token, int64_t lease_ms,
			    int64_t *until)
{
	int64_t at = clock_now_ms() + lease_ms;
	enum sd_result r;

	if (lease_ms < 1)
		return err_set(SD_INVALID, "lease must be at least 1 ms");
	r = lease_update(db, SQL_SET_LEASE, id, token, at, "extend");
	if (r == SD_OK && until)
		*until = at;
	return r;
}

static const char SQL_UNLEASE[] =
	"UPDATE stream SET visible_at = ?3, lease_token = NULL, leased_by = NULL, "
	"leased_at = NULL WHERE id = ?1 AND lease_token = ?2";

enum sd_result queue_retry_later(struct db *db, int64_t id, int64_t token, int64_t delay_ms)
{
	if (delay_ms < 0)
		return err_set(SD_INVALID, "retry delay must not be negative");
	return lease_update(db, SQL_UNLEASE, id, token, clock_now_ms() + delay_ms, "retry_later");
}

enum sd_result queue_release(struct db *db, int64_t id, int64_t token)
{
	return lease_update(db, SQL_UNLEASE, id, token, clock_now_ms(), "release");
}

/* Ends now the leases still running: their entries are claimable at once,
 * and the next claim counts each as an expiry, as time would have. */
static const char SQL_EXPIRE_LEASES[] =
	"UPDATE stream SET visible_at = ?1 WHERE lease_token IS NOT NULL AND visible_at > ?1";

enum sd_result queue_expire_leases(struct db *db, int64_t *n)
{
	struct db_stmt *st = db_stmt(db, SQL_EXPIRE_LEASES);

	if (st)
		db_bind_int(st, 1, clock_now_ms());
	return db_run_changes(db, st, n);
}

static const char SQL_FAIL[] =
	"UPDATE stream SET visible_at = ?3, lease_token = NULL, leased_by = NULL, "
	"leased_at = NULL, attempts = ?4, last_error = ?5 WHERE id = ?1 AND lease_token = ?2";

enum sd_result queue_fail(struct db *db, const struct job *j, const char *error, int permanent,
			  int *dead)
{
	return queue_fail_after(db, j, error, permanent, 0, dead);
}

/* a failed attempt counted for its kind (done_totals.failed), in the
 * transaction that records it: the dashboard's failures per minute */
static const char SQL_FAILED_COUNT[] =
	"INSERT INTO done_totals (kind, failed) VALUES (?1, 1) "
	"ON CONFLICT (kind) DO UPDATE SET failed = done_totals.failed + 1";

static enum sd_result count_failure(struct db *db, const char *kind)
{
	struct db_stmt *st = db_stmt(db, SQL_FAILED_COUNT);

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, kind);
	return db_run(st);
}

enum sd_result queue_fail_after(struct db *db, const struct job *j, const char *error,
				int permanent, int64_t min_delay_ms, int *dead)
{
	const struct kind_policy *p = queue_policy(j->kind);
	int64_t attempts = j->attempts + 1, delay;
	char err[QUEUE_ERROR_MAX + 1];
	struct db_stmt *st;
	enum sd_result r;

	if (dead)
		*dead = 0;
	snprintf(err, sizeof err, "%s", error && *error ? error : "failed");
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (permanent || attempts >= p->max_attempts) {
		char msg[QUEUE_ERROR_MAX + 1];

		if (permanent)
			snprintf(msg, sizeof msg, "%s", err);
		else
			snprintf(msg, sizeof msg, "%.900s (after %lld attempts)", err,
				 (long long)attempts);
		r = move_to_dead(db, j->id, j->lease_token, attempts, msg);
		if (r == SD_STALE)
			err_set(r, "entry %lld: fail with a stale lease token", (long long)j->id);
		if (r == SD_OK && dead)
			*dead = 1;
		if (r == SD_OK)
			r = count_failure(db, j->kind);
		return tx_end(db, r);
	}
	if (!(st = db_stmt(db, SQL_FAIL))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, j->id);
	db_bind_int(st, 2, j->lease_token);
	delay = queue_backoff_ms(p, attempts);
	if (delay < min_delay_ms)
		delay = min_delay_ms;
	db_bind_int(st, 3, clock_now_ms() + delay);
	db_bind_int(st, 4, attempts);
	db_bind_text(st, 5, err);
	if ((r = db_run(st)) != SD_OK)
		goto out;
	if (db_changes(db) == 0)
		r = err_set(SD_STALE, "entry %lld: fail with a stale lease token", (long long)j->id);
	else
		r = count_failure(db, j->kind);
out:
	return tx_end(db, r);
}

/* ======================== dead letters, pruning ========================== */

static const char SQL_DEAD_RETRY[] =
	"INSERT INTO stream (job_id, kind, payload, priority, visible_at, deliveries, last_error, "
	"created_at, queue) SELECT job_id, kind, payload, priority, ?2, deliveries, last_error, "
	"created_at, queue FROM dead_jobs WHERE job_id = ?1 ORDER BY id";
static const char SQL_TOTALS_UNDEAD[] =
	"INSERT INTO done_totals (kind, dead, dead_expiries) SELECT kind, -count(*), -sum(expiries) "
	"FROM dead_jobs WHERE job_id = ?1 GROUP BY kind ON CONFLICT (kind) DO UPDATE SET "
	"dead = done_totals.dead + excluded.dead, dead_expiries = done_totals.dead_expiries + excluded.dead_expiries";
static const char SQL_DEAD_DELETE[] = "DELETE FROM dead_jobs WHERE job_id = ?1";

enum sd_result queue_dead_retry(struct db *db, const char *job_id, int64_t *n)
{
	struct db_stmt *st;
	enum sd_result r;

	*n = 0;
	if ((r = queue_job_id_valid(job_id)) != SD_OK)
		return r;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_DEAD_RETRY))) {
		r = SD_DB;
		goto out;
	}
	db_bind_text(st, 1, job_id);
	db_bind_int(st, 2, clock_now_ms());
	if ((r = db_run(st)) != SD_OK)
		goto out;
	*n = db_changes(db);
	if (*n == 0) {
		r = err_set(SD_NOT_FOUND, "no dead job with job_id %s", job_id);
		goto out;
	}
	if (!(st = db_stmt(db, SQL_TOTALS_UNDEAD))) {
		r = SD_DB;
		goto out;
	}
	db_bind_text(st, 1, job_id);
	if ((r = db_run(st)) != SD_OK)
		goto out;
	if (!(st = db_stmt(db, SQL_DEAD_DELETE))) {
		r = SD_DB;
		goto out;
	}
	db_bind_text(st, 1, job_id);
	if ((r = db_run(st)) == SD_OK)
		db_notify_on_commit(db);
out:
	return tx_end(db, r);
}

static const char SQL_DEAD_PURGE[] = "DELETE FROM dead_jobs";
static const char SQL_TOTALS_PURGE[] =
	"UPDATE done_totals SET dead = 0, dead_expiries = 0 WHERE dead != 0 OR dead_expiries != 0";

enum sd_result queue_dead_purge(struct db *db, int64_t *n)
{
	struct db_stmt *st;
	enum sd_result r;

	*n = 0;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_DEAD_PURGE))) {
		r = SD_DB;
		goto out;
	}
	if ((r = db_run(st)) != SD_OK)
		goto out;
	*n = db_changes(db);
	if (!(st = db_stmt(db, SQL_TOTALS_PURGE))) {
		r = SD_DB;
		goto out;
	}
	r = db_run(st);
out:
	return tx_end(db, r);
}

/* done_jobs ids grow in finishing order, so the oldest rows are a prefix:
 * the walk stops after `limit` rows and never scans the whole table.  The
 * statements after SQL_PRUNE_HI all name the same rows, ?1 cutoff ?2 hi;
 * they take the rows out of the counts kept for done_jobs (done_reclaims,
 * done_times) and add them to `pruned`, then delete them. */
static const char SQL_PRUNE_HI[] =
	"SELECT max(id) FROM (SELECT id FROM done_jobs WHERE finished_at < ?1 ORDER BY id LIMIT ?2) "
	"AS p";
static const char SQL_PRUNE_COUNT[] =
	"INSERT INTO done_totals (kind, pruned, done_reclaims) SELECT kind, count(*), "
	"-sum(" QUEUE_SQL_RECLAIMS ") FROM done_jobs "
	"WHERE id <= ?2 AND finished_at < ?1 GROUP BY kind "
	"ON CONFLICT (kind) DO UPDATE SET pruned = done_totals.pruned + excluded.pruned, "
	"done_reclaims = done_totals.done_reclaims + excluded.done_reclaims";
static const char SQL_PRUNE_TIMES[] =
	"UPDATE done_times SET n = n - p.c FROM (SELECT finished_at AS t, count(*) AS c "
	"FROM done_jobs WHERE id <= ?2 AND finished_at < ?1 GROUP BY finished_at) AS p "
	"WHERE done_times.finished_at = p.t";
static const char SQL_PRUNE_TIMES_GONE[] =
	"DELETE FROM done_times WHERE n <= 0 AND finished_at IN "
	"(SELECT finished_at FROM done_jobs WHERE id <= ?2 AND finished_at < ?1)";
static const char SQL_PRUNE_DELETE[] =
	"DELETE FROM done_jobs WHERE id <= ?2 AND finished_at < ?1";

enum sd_result queue_prune_done(struct db *db, int64_t older_than_ms, int limit, int64_t *n)
{
	static const char *const steps[] = { SQL_PRUNE_COUNT, SQL_PRUNE_TIMES, SQL_PRUNE_TIMES_GONE,
					     SQL_PRUNE_DELETE };
	int64_t cutoff = clock_now_ms() - older_than_ms, hi;
	struct db_stmt *st;
	enum sd_result r;
	size_t i;
	int row;

	*n = 0;
	if (older_than_ms < 0 || limit < 1)
		return err_set(SD_INVALID, "prune needs an age >= 0 and a batch >= 1");
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_PRUNE_HI))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, cutoff);
	db_bind_int(st, 2, limit);
	if ((r = db_step(st, &row)) != SD_OK)
		goto out;
	if (!row || db_col_is_null(st, 0)) {
		db_reset(st);
		goto out;
	}
	hi = db_col_int(st, 0);
	db_reset(st);
	for (i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		if (!(st = db_stmt(db, steps[i]))) {
			r = SD_DB;
			goto out;
		}
		db_bind_int(st, 1, cutoff);
		db_bind_int(st, 2, hi);
		if ((r = db_run(st)) != SD_OK)
			goto out;
	}
	*n = db_changes(db);
out:
	return tx_end(db, r);
}

/* ======================== looking ======================================== */

/* The counts of the stream are read from the stream: it is the work, and
 * it stays as small as the work is.  Dead and finished jobs are read from
 * done_totals, kept in the transactions that move them (schema/sqlite/0005), so no
 * read walks the history; a kind whose totals are all 0 is listed only while
 * it has entries in the stream, as when the totals were counts. */
static const char SQL_STATS[] =
	"SELECT kind, sum(r), sum(s), sum(l), sum(d), sum(f) FROM ("
	" SELECT kind, CASE WHEN visible_at <= ?1 THEN 1 ELSE 0 END AS r,"
	"  CASE WHEN lease_token IS NULL AND visible_at > ?1 THEN 1 ELSE 0 END AS s,"
	"  CASE WHEN lease_token IS NOT NULL AND visible_at > ?1 THEN 1 ELSE 0 END AS l,"
	"  0 AS d, 0 AS f FROM stream"
	" UNION ALL SELECT kind, 0, 0, 0, dead, done FROM done_totals WHERE dead != 0 OR done != 0"
	") AS c GROUP BY kind ORDER BY kind";

enum sd_result queue_stats(struct db *db, struct queue_counts **rows, int *n,
			   struct queue_counts *total)
{
	struct queue_counts *v = NULL;
	struct db_stmt *st;
	enum sd_result r;
	int cap = 0, row;

	*rows = NULL;
	*n = 0;
	memset(total, 0, sizeof *total);
	if (!(st = db_stmt(db, SQL_STATS)))
		return SD_DB;
	db_bind_int(st, 1, clock_now_ms());
	for (;;) {
		struct queue_counts *c;

		if ((r = db_step(st, &row)) != SD_OK) {
			free(v);
			return r;
		}
		if (!row)
			break;
		if (*n == cap) {
			struct queue_counts *nv;
			cap = cap ? cap * 2 : 8;
			if (!(nv = realloc(v, (size_t)cap * sizeof *v))) {
				free(v);
				db_reset(st);
				return err_set(SD_NOMEM, "out of memory");
			}
			v = nv;
		}
		c = &v[(*n)++];
		snprintf(c->kind, sizeof c->kind, "%s", db_col_text(st, 0));
		c->ready = db_col_int(st, 1);
		c->scheduled = db_col_int(st, 2);
		c->leased = db_col_int(st, 3);
		c->dead = db_col_int(st, 4);
		c->done = db_col_int(st, 5);
		total->ready += c->ready;
		total->scheduled += c->scheduled;
		total->leased += c->leased;
		total->dead += c->dead;
		total->done += c->done;
	}
	*rows = v;
	return SD_OK;
}

/* lanes 0 and below: the box's own (a controlled kind's lane is below 0) */
static const char SQL_COUNT_BY_STATE[] =
	"SELECT (SELECT count(*) FROM stream WHERE queue <= 0 AND visible_at <= ?1),"
	" (SELECT count(*) FROM stream WHERE queue <= 0 AND lease_token IS NULL AND "
	"visible_at > ?1),"
	" (SELECT count(*) FROM stream WHERE queue <= 0 AND lease_token IS NOT NULL AND "
	"visible_at > ?1),"
	" (SELECT coalesce(sum(dead), 0) FROM done_totals WHERE kind NOT LIKE '" QUEUE_SQS_PREFIX "%')";

enum sd_result queue_count_by_state(struct db *db, struct queue_counts *total)
{
	struct db_stmt *st;
	enum sd_result r;
	int row = 0;

	memset(total, 0, sizeof *total);
	if (!(st = db_stmt(db, SQL_COUNT_BY_STATE)))
		return SD_DB;
	db_bind_int(st, 1, clock_now_ms());
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (row) {
		total->ready = db_col_int(st, 0);
		total->scheduled = db_col_int(st, 1);
		total->leased = db_col_int(st, 2);
		total->dead = db_col_int(st, 3);
	}
	db_reset(st);
	return SD_OK;
}

static const char SQL_TOTALS_SUM[] =
	"SELECT coalesce(sum(done), 0), coalesce(sum(failed), 0) FROM done_totals";

enum sd_result queue_totals_sum(struct db *db, int64_t *done, int64_t *failed)
{
	struct db_stmt *st = db_stmt(db, SQL_TOTALS_SUM);
	enum sd_result r;

	*done = *failed = 0;
	if (!st)
		return SD_DB;
	if (db_next(st, &r)) {
		*done = db_col_int(st, 0);
		*failed = db_col_int(st, 1);
	}
	db_reset(st);
	return r;
}

/* ?2 is a JSON path ('$.order_id'): json_extract in SQLite, a jsonpath in
 * PostgreSQL */
#define EACH_LIVE_SQL(FIELD) \
	"SELECT job_id, CASE WHEN ?2 IS NULL THEN 0 ELSE " FIELD " END " \
	"FROM stream WHERE ?1 IS NULL OR kind = ?1 " \
	"UNION ALL SELECT job_id, CASE WHEN ?2 IS NULL THEN 0 ELSE " FIELD " END " \
	"FROM dead_jobs WHERE ?1 IS NULL OR kind = ?1"
static const char SQL_EACH_LIVE[] = EACH_LIVE_SQL("json_extract(payload, ?2)");
static const char SQL_PG_EACH_LIVE[] = EACH_LIVE_SQL(
	"CAST(jsonb_path_query_first(CAST(payload AS jsonb), CAST(?2 AS jsonpath)) #>> '{}' "
	"AS BIGINT)");

enum sd_result queue_each_live(struct db *db, const char *kind, const char *field,
			       void (*fn)(const char *job_id, int64_t value, void *arg),
			       void *arg)
{
	struct db_stmt *st = db_stmt_for(db, SQL_EACH_LIVE, SQL_PG_EACH_LIVE);
	enum sd_result r;
	int row = 0;

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, kind);
	db_bind_text(st, 2, field);
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		fn(db_col_text(st, 0), db_col_is_null(st, 1) ? 0 : db_col_int(st, 1), arg);
	}
	db_reset(st);
	return SD_OK;
}

/* The box's own lanes that its workers take from: 0 and each controlled
 * kind's that is not paused (what they wait for and drain).  A paused
 * kind's entries wait for a resume; an SQS queue's messages for receivers
 * outside the box. */
#define QUEUE_SQL_RUNNABLE_LANES \
	"(queue = 0 OR queue IN (SELECT lane FROM controls WHERE lane < 0 AND paused_at IS NULL))"
static const char SQL_PENDING[] =
	"SELECT count(*) FROM stream WHERE " QUEUE_SQL_RUNNABLE_LANES;
static const char SQL_PENDING_DUE[] =
	"SELECT count(*) FROM stream WHERE " QUEUE_SQL_RUNNABLE_LANES " AND visible_at <= ?1";
/* The lowest level, the next one above ?1, and the earliest entry of one
 * level: one seek each in stream_claim. */
static const char SQL_LEVEL_FIRST[] = "SELECT min(priority) FROM stream WHERE queue = ?1";
static const char SQL_LEVEL_NEXT[] =
	"SELECT min(priority) FROM stream WHERE queue = ?1 AND priority > ?2";
static const char SQL_LEVEL_NEXT_VISIBLE[] =
	"SELECT min(visible_at) FROM stream WHERE queue = ?1 AND priority = ?2";

/* lane_int: one int64 from sql with ?1 bound to a, and ?2 to b when sql
 * has a ?2: [out] *found 0 when the answer is NULL or no row, *v left as
 * it was. */
static enum sd_result lane_int(struct db *db, const char *sql, int64_t a, int has_b, int64_t b,
			       int *found, int64_t *v)
{
	struct db_stmt *st = db_stmt(db, sql);

	*found = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, a);
	if (has_b)
		db_bind_int(st, 2, b);
	return db_one_int(st, found, v);
}

/* One int64 from sql, ?1 bound to arg (a statement without ?1 ignores it):
 * [out] *found 0 when the answer is NULL or no row, *v left as it was. */
static enum sd_result one_int(struct db *db, const char *sql, int64_t arg, int *found,
			      int64_t *v)
{
	return lane_int(db, sql, arg, 0, 0, found, v);
}

enum sd_result queue_pending(struct db *db, int64_t *n)
{
	int found;

	*n = 0;
	return one_int(db, SQL_PENDING, 0, &found, n);
}

enum sd_result queue_pending_due(struct db *db, int64_t before_ms, int64_t *n)
{
	int found;

	*n = 0;
	return one_int(db, SQL_PENDING_DUE, before_ms, &found, n);
}

/* Level by level, as the claim walks (claim_levels): min(visible_at) over
 * the whole stream would read every entry of stream_claim, after every
 * empty claim of a waiting worker. */
enum sd_result queue_next_visible(struct db *db, int64_t *at)
{
	return queue_lane_next_visible(db, 0, at);
}

enum sd_result queue_lane_next_visible(struct db *db, int64_t lane, int64_t *at)
{
	enum sd_result r;
	int64_t level, v, best = 0;
	int found, any = 0;

	*at = -1;
	if ((r = lane_int(db, SQL_LEVEL_FIRST, lane, 0, 0, &found, &level)) != SD_OK)
		return r;
	while (found) {
		if ((r = lane_int(db, SQL_LEVEL_NEXT_VISIBLE, lane, 1, level, &found, &v)) != SD_OK)
			return r;
		if (found && (!any || v < best)) {
			best = v;
			any = 1;
		}
		if ((r = lane_int(db, SQL_LEVEL_NEXT, lane, 1, level, &found, &level)) != SD_OK)
			return r;
	}
	if (any)
		*at = best;
	return SD_OK;
}

/* Entries in the stream and the dead letters keep their expiries; a finished
 * entry keeps only deliveries and attempts, so its reclaims are the
 * deliveries that neither the first claim nor a failed attempt explains.
 * The stream's share is read through stream_expired (only entries that ever
 * expired), the others' from done_totals. */
static const char SQL_RECLAIMS[] =
	"SELECT (SELECT coalesce(sum(expiries), 0) FROM stream WHERE expiries > 0) + "
	"(SELECT coalesce(sum(dead_expiries + done_reclaims), 0) FROM done_totals)";

enum sd_result queue_reclaims(struct db *db, int64_t *n)
{
	int found;

	*n = 0;
	return one_int(db, SQL_RECLAIMS, 0, &found, n);
}

/* Bounded by the finishing times after since_ms, not by the history. */
static const char SQL_DONE_SINCE[] =
	"SELECT coalesce(sum(n), 0) FROM done_times WHERE finished_at > ?1";

enum sd_result queue_done_since(struct db *db, int64_t since_ms, int64_t *n)
{
	int found;

	*n = 0;
	return one_int(db, SQL_DONE_SINCE, since_ms, &found, n);
}

/* Columns: state id job_id kind payload priority deliveries attempts
 * visible_at created_at finished_at worker last_error leased_at json.
 * leased_at only for a live lease: an expired one is ready, and its age
 * would mean nothing. */
#define LIST_STREAM_COLS \
	"CASE WHEN visible_at <= ?1 THEN 'ready' WHEN lease_token IS NULL THEN 'scheduled' " \
	"ELSE 'leased' END AS state, id, job_id, kind, payload, priority, deliveries, attempts, " \
	"visible_at, created_at, NULL, leased_by, last_error, " \
	"CASE WHEN visible_at > ?1 AND lease_token IS NOT NULL THEN leased_at END AS leased_at"
/* The row as one JSON object: json_object(..., 'payload', json(payload)) in
 * SQLite, json_build_object(..., CAST(payload AS json)) in PostgreSQL. */
#define SQ_OBJ "json_object("
#define SQ_JS(x) "json(" x ")"
#define PG_OBJ "json_build_object("
#define PG_JS(x) "CAST(" x " AS json)"
#define LIST_STREAM_SQL(OBJ, JS) \
	"SELECT *, " OBJ "'state', state, 'id', id, 'job_id', job_id, 'kind', kind, " \
	"'payload', " JS("payload") ", 'priority', priority, 'deliveries', deliveries, " \
	"'attempts', attempts, 'visible_at', visible_at, 'created_at', created_at, " \
	"'worker', leased_by, 'last_error', last_error, 'leased_at', leased_at) " \
	"FROM (SELECT " LIST_STREAM_COLS \
	" FROM stream WHERE (?2 IS NULL OR kind = ?2)) AS s WHERE (?3 IS NULL OR state = ?3) " \
	"ORDER BY id LIMIT ?4"
#define LIST_DEAD_SQL(OBJ, JS) \
	"SELECT 'dead', id, job_id, kind, payload, priority, deliveries, attempts, NULL, " \
	"created_at, died_at, NULL, last_error, NULL, " OBJ "'state', 'dead', 'id', id, " \
	"'job_id', job_id, 'kind', kind, 'payload', " JS("payload") ", 'priority', priority, " \
	"'deliveries', deliveries, 'attempts', attempts, 'created_at', created_at, " \
	"'died_at', died_at, 'last_error', last_error) FROM dead_jobs " \
	"WHERE (?2 IS NULL OR kind = ?2) AND ?1 = ?1 AND ?3 = ?3 ORDER BY id LIMIT ?4"
#define LIST_DONE_SQL(OBJ, JS) \
	"SELECT 'done', id, job_id, kind, payload, NULL, deliveries, attempts, NULL, " \
	"created_at, finished_at, worker, NULL, NULL, " OBJ "'state', 'done', 'id', id, " \
	"'job_id', job_id, 'kind', kind, 'payload', " JS("payload") ", 'deliveries', deliveries, " \
	"'attempts', attempts, 'created_at', created_at, 'finished_at', finished_at, " \
	"'worker', worker) FROM (SELECT * FROM done_jobs WHERE (?2 IS NULL OR kind = ?2) " \
	"AND ?1 = ?1 AND ?3 = ?3 ORDER BY id DESC LIMIT ?4) AS d ORDER BY id"
/* a cancelled job (controls.h): its last_error says by whom */
#define LIST_CANCELLED_SQL(OBJ, JS) \
	"SELECT 'cancelled', id, job_id, kind, payload, priority, deliveries, attempts, NULL, " \
	"created_at, cancelled_at, NULL, why, NULL, " OBJ "'state', 'cancelled', 'id', id, " \
	"'job_id', job_id, 'kind', kind, 'payload', " JS("payload") ", 'priority', priority, " \
	"'deliveries', deliveries, 'attempts', attempts, 'created_at', created_at, " \
	"'cancelled_at', cancelled_at, 'cancelled_by', cancelled_by, 'running', running) " \
	"FROM (SELECT *, " CANCELLED_WHY " AS why FROM cancelled_jobs WHERE (?2 IS NULL OR " \
	"kind = ?2) AND ?1 = ?1 AND ?3 = ?3 ORDER BY id DESC LIMIT ?4) AS c ORDER BY id"
#define CANCELLED_WHY \
	"'cancelled by ' || cancelled_by || CASE WHEN running = 1 THEN ' while it ran' " \
	"ELSE '' END"
static const char SQL_LIST_STREAM[] = LIST_STREAM_SQL(SQ_OBJ, SQ_JS);
static const char SQL_LIST_CANCELLED[] = LIST_CANCELLED_SQL(SQ_OBJ, SQ_JS);
static const char SQL_PG_LIST_CANCELLED[] = LIST_CANCELLED_SQL(PG_OBJ, PG_JS);
static const char SQL_LIST_DEAD[] = LIST_DEAD_SQL(SQ_OBJ, SQ_JS);
static const char SQL_LIST_DONE[] = LIST_DONE_SQL(SQ_OBJ, SQ_JS);
static const char SQL_PG_LIST_STREAM[] = LIST_STREAM_SQL(PG_OBJ, PG_JS);
static const char SQL_PG_LIST_DEAD[] = LIST_DEAD_SQL(PG_OBJ, PG_JS);
static const char SQL_PG_LIST_DONE[] = LIST_DONE_SQL(PG_OBJ, PG_JS);

enum sd_result queue_list(struct db *db, const char *state, const char *kind, int limit,
			  queue_row_fn fn, void *arg)
{
	const char *sql = SQL_LIST_STREAM, *pg_sql = SQL_PG_LIST_STREAM;
	struct db_stmt *st;
	enum sd_result r;
	int row;

	if (state && strcmp(state, "dead") == 0) {
		sql = SQL_LIST_DEAD;
		pg_sql = SQL_PG_LIST_DEAD;
	} else if (state && strcmp(state, "done") == 0) {
		sql = SQL_LIST_DONE;
		pg_sql = SQL_PG_LIST_DONE;
	} else if (state && strcmp(state, "cancelled") == 0) {
		sql = SQL_LIST_CANCELLED;
		pg_sql = SQL_PG_LIST_CANCELLED;
	} else if (state && strcmp(state, "ready") && strcmp(state, "scheduled") &&
		   strcmp(state, "leased")) {
		return err_set(SD_INVALID, "unknown state '%.40s' (ready, scheduled, leased, dead, "
			       "done, cancelled)", state);
	}
	if (!(st = db_stmt_for(db, sql, pg_sql)))
		return SD_DB;
	db_bind_int(st, 1, clock_now_ms());
	db_bind_text(st, 2, kind);
	db_bind_text(st, 3, sql == SQL_LIST_STREAM ? state : "");
	db_bind_int(st, 4, limit > 0 ? limit : INT64_MAX);
	for (;;) {
		struct job_row jr;

		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		jr.state = db_col_text(st, 0);
		jr.id = db_col_int(st, 1);
		jr.job_id = db_col_text(st, 2);
		jr.kind = db_col_text(st, 3);
		jr.payload = db_col_text(st, 4);
		jr.priority = db_col_int(st, 5);
		jr.deliveries = db_col_int(st, 6);
		jr.attempts = db_col_int(st, 7);
		jr.visible_at = db_col_int(st, 8);
		jr.created_at = db_col_int(st, 9);
		jr.finished_at = db_col_int(st, 10);
		jr.worker = db_col_text(st, 11);
		jr.last_error = db_col_text(st, 12);
		jr.leased_at = db_col_int(st, 13);
		jr.json = db_col_text(st, 14);
		fn(&jr, arg);
	}
	return SD_OK;
}

static const char SQL_FIND_JOB[] =
	"SELECT CASE WHEN visible_at <= ?1 THEN 'ready' WHEN lease_token IS NULL THEN 'scheduled' "
	"ELSE 'leased' END, id, job_id, kind, deliveries, attempts, last_error, NULL "
	"FROM stream WHERE job_id = ?2 "
	"UNION ALL SELECT 'done', id, job_id, kind, deliveries, attempts, NULL, finished_at "
	"FROM done_jobs WHERE job_id = ?2 "
	"UNION ALL SELECT 'dead', id, job_id, kind, deliveries, attempts, last_error, died_at "
	"FROM dead_jobs WHERE job_id = ?2 "
	"UNION ALL SELECT 'cancelled', id, job_id, kind, deliveries, attempts, " CANCELLED_WHY ", "
	"cancelled_at FROM cancelled_jobs WHERE job_id = ?2";

enum sd_result queue_find_job(struct db *db, const char *job_id, queue_row_fn fn, void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_FIND_JOB);
	enum sd_result r;
	int row;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, clock_now_ms());
	db_bind_text(st, 2, job_id);
	for (;;) {
		struct job_row jr;

		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		memset(&jr, 0, sizeof jr);
		jr.state = db_col_text(st, 0);
		jr.id = db_col_int(st, 1);
		jr.job_id = db_col_text(st, 2);
		jr.kind = db_col_text(st, 3);
		jr.deliveries = db_col_int(st, 4);
		jr.attempts = db_col_int(st, 5);
		jr.last_error = db_col_text(st, 6);
		jr.finished_at = db_col_int(st, 7);
		fn(&jr, arg);
	}
	return SD_OK;
}

static const char SQL_JOB_WAITING[] = "SELECT 1 FROM stream WHERE job_id = ?1 LIMIT 1";

enum sd_result queue_job_waiting(struct db *db, const char *job_id, int *waiting)
{
	struct db_stmt *st = db_stmt(db, SQL_JOB_WAITING);
	int64_t one = 0;

	if (st)
		db_bind_text(st, 1, job_id);
	return db_one_int(st, waiting, &one);
}
