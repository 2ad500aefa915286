/*
 * idem.h: the four techniques that make a job's second run harmless, as
 * small primitives any handler can reuse (dist/doc/design.md §1.2).  They
 * are not alternatives; each closes one failure:
 *
 *  1. check state first, then a conditional write that only one run can win
 *     (idem_conditional): two runs that both passed the check agree on one
 *     winner, in the database;
 *  2. a unique row per effect, claimed in one statement with a stale-claim
 *     takeover (idem_effect_claim / idem_effect_done): two concurrent runs
 *     agree on who owns a side effect that leaves the process;
 *  3. an idempotency key for the provider, derived from the intent, never per
 *     attempt (idem_provider_key): the provider drops the send that a crash
 *     between "sent" and "marked" repeats;
 *  4. the job's identity recorded in the same transaction as its effects
 *     (idem_once): effects with no state to read, like a counter.
 */
#ifndef SD_IDEM_H
#define SD_IDEM_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "result.h"

/* Technique 1: run st, a bound "UPDATE ... WHERE col IS NULL ... RETURNING"
 * (or any write that matches nothing once the state is reached), to the end.
 * [out] *won: 1 when it changed rows, so this run reached the state. */
enum sd_result idem_conditional(struct db *db, struct db_stmt *st, int *won);

/* Technique 2. */
enum idem_claim {
	IDEM_CLAIMED,	/* this run owns the effect: do it, then idem_effect_done */
	IDEM_DONE,	/* the effect is recorded as done: nothing to do */
	IDEM_HELD,	/* another run holds a fresh claim: look again later */
};

#define IDEM_STALE_MS (2 * 60 * 1000)	/* a claim older than this is taken over */

/*
 * idem_effect_claim: claim the effect (subject_id, kind) in one statement:
 * insert the row, or take it over when it is not done and its claim is older
 * than stale_ms.  [out] *claim; *claimed_at (may be NULL): this claim's
 * time, which names it in idem_effect_done and idem_effect_release; when
 * IDEM_HELD, the holder's claim time (stale once stale_ms have passed).
 */
enum sd_result idem_effect_claim(struct db *db, int64_t subject_id, const char *kind,
				 int64_t stale_ms, enum idem_claim *claim, int64_t *claimed_at);

/*
 * idem_effect_fix: where the claimed effect (subject_id, kind) goes and the
 * key it goes under, fixed by the first run that asks: target and key are
 * stored when the row has none yet, and [out] target_out and key_out get
 * the stored ones (each at most size bytes), in one statement.  A
 * provider's key dedupes only the same request: a retry whose first
 * attempt may have reached it must go where that one went, under the key
 * it used (an effect claimed before schema 11 keeps the key its attempts
 * used then).  No two effects hold one key (a unique index): SD_INVALID.
 */
enum sd_result idem_effect_fix(struct db *db, int64_t subject_id, const char *kind,
			       const char *target, const char *key, char *target_out,
			       char *key_out, size_t size);

/*
 * idem_effect_done: record the effect as done, with the provider's id for
 * it, if this run's claim (claimed_at) still holds the row.  A run whose
 * claim was taken over changes nothing: the owner records it.
 */
enum sd_result idem_effect_done(struct db *db, int64_t subject_id, const char *kind,
				int64_t claimed_at, const char *provider_id);

/* idem_effect_release: give up this run's claim after a failed attempt, so
 * the next attempt claims at once instead of waiting for it to go stale. */
enum sd_result idem_effect_release(struct db *db, int64_t subject_id, const char *kind,
				   int64_t claimed_at);

/*
 * The same four for an effect whose subject is no order (a refund at the
 * provider, a hold's email): the row (subject, kind) of the effects table,
 * subject a name no lost commit can give to another ("refund:pi_...").
 */
enum sd_result idem_named_claim(struct db *db, const char *subject, const char *kind,
				int64_t stale_ms, enum idem_claim *claim, int64_t *claimed_at);
enum sd_result idem_named_fix(struct db *db, const char *subject, const char *kind,
			      const char *target, const char *key, char *target_out,
			      char *key_out, size_t size);
enum sd_result idem_named_done(struct db *db, const char *subject, const char *kind,
			       int64_t claimed_at, const char *provider_id);
enum sd_result idem_named_release(struct db *db, const char *subject, const char *kind,
				  int64_t claimed_at);

/*
 * idem_release_unsent: every claim not marked done is given up, so the next
 * run takes it at once instead of when it goes stale.  For a box made from
 * a backup: its claims' holders run (or ran) on another box, and the
 * provider's key, not the claim, keeps their sends from doubling.  [out] *n.
 */
enum sd_result idem_release_unsent(struct db *db, int64_t *n);

/* idem_held_delay_ms: how long a run that found the claim held waits: until
 * just past the moment the holder's claim (made at claimed_at) goes stale,
 * from 1 ms (already stale: a takeover raced it) to stale_ms + 1 (a claim
 * stamped ahead of this clock, by another box's). */
int64_t idem_held_delay_ms(int64_t claimed_at, int64_t stale_ms);

/* Technique 3: "<intent>-<subject>", the same on every attempt.  The
 * subject is an identity no lost commit can give to another (an order's
 * public id), never a row id: a power cut that took a row gives its id to
 * the next one, and the provider would take that one's email for a repeat. */
void idem_provider_key(char *buf, size_t size, const char *intent, const char *subject);

/*
 * Technique 4: record job_id as processed.  Must run inside the caller's
 * open transaction, the one that holds the job's effects.  [out] *first: 1
 * the first time (apply the effects), 0 when already recorded (commit
 * nothing new).
 */
enum sd_result idem_once(struct db *db, const char *job_id, const char *kind, int *first);

/*
 * Technique 4 on the receiving side: a provider's webhook event id
 * recorded as "<provider>:<event id>" (kind "<provider>_webhook") in the
 * caller's transaction, the one of the event's effect.  event_id NULL: no
 * event (a lookup), nothing recorded.  [out] *dup 1 when it was recorded
 * before: commit nothing new.
 */
enum sd_result idem_webhook_once(struct db *db, const char *provider, const char *event_id,
				 int *dup);

/* ---- forgetting what can no longer be redelivered (maint.c) ------------ */

/*
 * idem_prune_processed: delete up to limit processed_jobs rows recorded
 * before before_ms, skipping those for which keep(job_id, arg) returns 1
 * (the caller's "can this job still be delivered?").  Runs in the caller's
 * transaction, or its own.  [out] *n deleted; *kept (may be NULL) skipped.
 * keep is called while this module reads; it may read through db, not write.
 * processed_jobs has no index on processed_at: a step reads rows in key
 * order until it has limit to delete, so with few expired rows it reads the
 * whole table (an index in schema/ would make it a range scan).
 */
enum sd_result idem_prune_processed(struct db *db, int64_t before_ms, int limit,
				    int (*keep)(const char *job_id, void *arg), void *arg,
				    int64_t *n, int64_t *kept);

#endif
