/*
 * idem.c: the idempotency primitives.  This module owns email_sends,
 * effects and processed_jobs; the conditional write of technique 1 belongs to the module
 * that owns the state's table, which hands its statement in.
 */
#define _POSIX_C_SOURCE 200809L
#include "idem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

enum sd_result idem_conditional(struct db *db, struct db_stmt *st, int *won)
{
	enum sd_result r;
	int row, rows = 0;

	*won = 0;
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row)
			break;
		rows++;
	}
	db_reset(st);
	/* RETURNING rows, or for a plain UPDATE the changes it made */
	*won = rows > 0 || db_changes(db) > 0;
	return SD_OK;
}

/* Technique 2 (dist/doc/design.md §1.2) over one of two tables: an order's
 * emails in email_sends (order_id, kind), other effects in effects
 * (subject, kind), the same statements on each.  The claim inserts, or
 * takes over a stale undone claim; RETURNING says whether it won.  The
 * done and release writes name the claim by its time: a run whose claim
 * was taken over matches nothing. */
struct fx_sql {
	const char *claim, *sent, *fix, *done, *release;
};

#define FX_SQL(T, S, DONE, PID) { \
	"INSERT INTO " T " (" S ", kind, claimed_at) VALUES (?1, ?2, ?3) " \
	"ON CONFLICT (" S ", kind) DO UPDATE SET claimed_at = excluded.claimed_at " \
	"WHERE " T "." DONE " IS NULL AND " T ".claimed_at < ?4 RETURNING " S, \
	"SELECT " DONE " IS NOT NULL, claimed_at FROM " T " WHERE " S " = ?1 AND kind = ?2", \
	"UPDATE " T " SET target = coalesce(target, ?3), " \
	"provider_key = coalesce(provider_key, ?4) WHERE " S " = ?1 AND kind = ?2 " \
	"RETURNING target, provider_key", \
	"UPDATE " T " SET " DONE " = ?3, " PID " = ?4 " \
	"WHERE " S " = ?1 AND kind = ?2 AND claimed_at = ?5 AND " DONE " IS NULL", \
	"UPDATE " T " SET claimed_at = 0 " \
	"WHERE " S " = ?1 AND kind = ?2 AND claimed_at = ?5 AND " DONE " IS NULL " \
	"AND ?3 = ?3 AND CAST(?4 AS TEXT) IS NOT DISTINCT FROM CAST(?4 AS TEXT)" }

static const struct fx_sql EMAILS = FX_SQL("email_sends", "order_id", "sent_at",
					   "provider_message_id");
static const struct fx_sql EFFECTS = FX_SQL("effects", "subject", "done_at", "provider_id");

/* One effect's row: an order's (id) in email_sends, or a named one. */
struct fx {
	const struct fx_sql *q;
	int64_t id;
	const char *name;
};

static void bind_subject(struct db_stmt *st, const struct fx *f)
{
	if (f->name)
		db_bind_text(st, 1, f->name);
	else
		db_bind_int(st, 1, f->id);
}

static const char *subject_text(const struct fx *f, char *buf, size_t size)
{
	if (f->name)
		return f->name;
	snprintf(buf, size, "%lld", (long long)f->id);
	return buf;
}

static enum sd_result fx_claim(struct db *db, const struct fx *f, const char *kind,
			       int64_t stale_ms, enum idem_claim *claim, int64_t *claimed_at)
{
	int64_t now = clock_now_ms();
	struct db_stmt *st;
	enum sd_result r;
	int row = 0, sent = 0;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, f->q->claim))) {
		r = SD_DB;
		goto out;
	}
	bind_subject(st, f);
	db_bind_text(st, 2, kind);
	db_bind_int(st, 3, now);
	db_bind_int(st, 4, now - stale_ms);
	if ((r = db_step(st, &row)) != SD_OK)
		goto out;
	db_reset(st);
	if (row) {
		*claim = IDEM_CLAIMED;
		if (claimed_at)
			*claimed_at = now;
		goto out;
	}
	/* no row back: the effect is done, or someone holds a fresh claim */
	if (!(st = db_stmt(db, f->q->sent))) {
		r = SD_DB;
		goto out;
	}
	bind_subject(st, f);
	db_bind_text(st, 2, kind);
	if ((r = db_step(st, &row)) != SD_OK)
		goto out;
	sent = row && db_col_int(st, 0);
	if (claimed_at)	/* the holder's claim time, when held */
		*claimed_at = row && !sent ? db_col_int(st, 1) : 0;
	db_reset(st);
	*claim = sent ? IDEM_DONE : IDEM_HELD;
out:
	return db_end(db, r);
}

static enum sd_result fx_fix(struct db *db, const struct fx *f, const char *kind,
			     const char *target, const char *key, char *target_out, char *key_out,
			     size_t size)
{
	struct db_stmt *st;
	enum sd_result r;
	char subj[24];
	int row = 0;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, f->q->fix))) {
		r = SD_DB;
		goto out;
	}
	bind_subject(st, f);
	db_bind_text(st, 2, kind);
	db_bind_text(st, 3, target);
	db_bind_text(st, 4, key);
	if ((r = db_step(st, &row)) == SD_OK) {
		if (row && ((size_t)snprintf(target_out, size, "%s", db_col_text(st, 0)) >= size ||
			    (size_t)snprintf(key_out, size, "%s", db_col_text(st, 1)) >= size))
			r = err_set(SD_DB, "an effect's target or key is longer than %zu bytes",
				    size - 1);
		else if (!row)
			r = err_set(SD_NOT_FOUND, "no effect row %s %s to fix",
				    subject_text(f, subj, sizeof subj), kind);
	} else if (r == SD_INVALID) {
		r = err_set(SD_INVALID, "the key %s of effect %s %s is another effect's", key,
			    subject_text(f, subj, sizeof subj), kind);
	}
	db_reset(st);
out:
	return db_end(db, r);
}

static enum sd_result claim_update(struct db *db, const char *sql, const struct fx *f,
				   const char *kind, int64_t claimed_at, const char *provider_id)
{
	struct db_stmt *st;
	enum sd_result r;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, sql))) {
		db_rollback(db);
		return SD_DB;
	}
	bind_subject(st, f);
	db_bind_text(st, 2, kind);
	db_bind_int(st, 3, clock_now_ms());
	db_bind_text(st, 4, provider_id);
	db_bind_int(st, 5, claimed_at);
	if ((r = db_run(st)) != SD_OK) {
		db_rollback(db);
		return r;
	}
	return db_commit(db);
}

enum sd_result idem_effect_claim(struct db *db, int64_t subject_id, const char *kind,
				 int64_t stale_ms, enum idem_claim *claim, int64_t *claimed_at)
{
	const struct fx f = { &EMAILS, subject_id, NULL };

	return fx_claim(db, &f, kind, stale_ms, claim, claimed_at);
}

enum sd_result idem_effect_fix(struct db *db, int64_t subject_id, const char *kind,
			       const char *target, const char *key, char *target_out,
			       char *key_out, size_t size)
{
	const struct fx f = { &EMAILS, subject_id, NULL };

	return fx_fix(db, &f, kind, target, key, target_out, key_out, size);
}

enum sd_result idem_effect_done(struct db *db, int64_t subject_id, const char *kind,
				int64_t claimed_at, const char *provider_id)
{
	const struct fx f = { &EMAILS, subject_id, NULL };

	return claim_update(db, EMAILS.done, &f, kind, claimed_at, provider_id);
}

enum sd_result idem_effect_release(struct db *db, int64_t subject_id, const char *kind,
				   int64_t claimed_at)
{
	const struct fx f = { &EMAILS, subject_id, NULL };

	return claim_update(db, EMAILS.release, &f, kind, claimed_at, NULL);
}

enum sd_result idem_named_claim(struct db *db, const char *subject, const char *kind,
				int64_t stale_ms, enum idem_claim *claim, int64_t *claimed_at)
{
	const struct fx f = { &EFFECTS, 0, subject };

	return fx_claim(db, &f, kind, stale_ms, claim, claimed_at);
}

enum sd_result idem_named_fix(struct db *db, const char *subject, const char *kind,
			      const char *target, const char *key, char *target_out,
			      char *key_out, size_t size)
{
	const struct fx f = { &EFFECTS, 0, subject };

	return fx_fix(db, &f, kind, target, key, target_out, key_out, size);
}

enum sd_result idem_named_done(struct db *db, const char *subject, const char *kind,
			       int64_t claimed_at, const char *provider_id)
{
	const struct fx f = { &EFFECTS, 0, subject };

	return claim_update(db, EFFECTS.done, &f, kind, claimed_at, provider_id);
}

enum sd_result idem_named_release(struct db *db, const char *subject, const char *kind,
				  int64_t claimed_at)
{
	const struct fx f = { &EFFECTS, 0, subject };

	return claim_update(db, EFFECTS.release, &f, kind, claimed_at, NULL);
}

static const char SQL_RELEASE_ALL[] =
	"UPDATE email_sends SET claimed_at = 0 WHERE sent_at IS NULL AND claimed_at > 0";
static const char SQL_RELEASE_ALL_NAMED[] =
	"UPDATE effects SET claimed_at = 0 WHERE done_at IS NULL AND claimed_at > 0";

enum sd_result idem_release_unsent(struct db *db, int64_t *n)
{
	enum sd_result r;
	int64_t k = 0;

	if ((r = db_run_changes(db, db_stmt(db, SQL_RELEASE_ALL), n)) != SD_OK ||
	    (r = db_run_changes(db, db_stmt(db, SQL_RELEASE_ALL_NAMED), &k)) != SD_OK)
		return r;
	*n += k;
	return SD_OK;
}

int64_t idem_held_delay_ms(int64_t claimed_at, int64_t stale_ms)
{
	int64_t d = claimed_at + stale_ms + 1 - clock_now_ms();

	return d < 1 ? 1 : d > stale_ms + 1 ? stale_ms + 1 : d;
}

void idem_provider_key(char *buf, size_t size, const char *intent, const char *subject)
{
	snprintf(buf, size, "%s-%s", intent, subject);
}

static const char SQL_ONCE[] =
	"INSERT INTO processed_jobs (job_id, kind, processed_at) VALUES (?1, ?2, ?3) "
	"ON CONFLICT (job_id) DO NOTHING RETURNING job_id";

enum sd_result idem_once(struct db *db, const char *job_id, const char *kind, int *first)
{
	struct db_stmt *st;
	enum sd_result r;
	int row = 0;

	*first = 0;
	if (!db_in_tx(db))
		return err_set(SD_INVALID, "idem_once needs the transaction that holds the effects");
	if (!(st = db_stmt(db, SQL_ONCE)))
		return SD_DB;
	db_bind_text(st, 1, job_id);
	db_bind_text(st, 2, kind);
	db_bind_int(st, 3, clock_now_ms());
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	db_reset(st);
	*first = row;
	return SD_OK;
}

enum sd_result idem_webhook_once(struct db *db, const char *provider, const char *event_id,
				 int *dup)
{
	char job_id[300], kind[64];
	enum sd_result r;
	int first = 0;

	*dup = 0;
	if (!event_id)
		return SD_OK;
	snprintf(job_id, sizeof job_id, "%s:%s", provider, event_id);
	snprintf(kind, sizeof kind, "%s_webhook", provider);
	if ((r = idem_once(db, job_id, kind, &first)) == SD_OK)
		*dup = !first;
	return r;
}

/* ---- pruning --------------------------------------------------------------- */

/* processed_jobs has no index on processed_at: the walk reads rows in key
 * order and stops once it has `limit` to delete, so the cost of a batch is
 * bounded by the rows it deletes plus the young and kept rows before them. */
static const char SQL_OLD_PROCESSED[] =
	"SELECT job_id FROM processed_jobs WHERE processed_at < ?1";
static const char SQL_FORGET_PROCESSED[] =
	"DELETE FROM processed_jobs WHERE job_id = ?1 AND processed_at < ?2";

enum sd_result idem_prune_processed(struct db *db, int64_t before_ms, int limit,
				    int (*keep)(const char *job_id, void *arg), void *arg,
				    int64_t *n, int64_t *kept)
{
	struct db_stmt *st;
	enum sd_result r;
	char **ids = NULL;
	int n_ids = 0, row = 0, i;

	*n = 0;
	if (kept)
		*kept = 0;
	if (limit < 1)
		return err_set(SD_INVALID, "prune needs a batch >= 1");
	if (!(ids = calloc((size_t)limit, sizeof *ids)))
		return err_set(SD_NOMEM, "out of memory");
	if ((r = db_begin(db)) != SD_OK)
		goto out_free;
	if (!(st = db_stmt(db, SQL_OLD_PROCESSED))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, before_ms);
	/* collect first, delete after: no delete under a running scan */
	while (n_ids < limit) {
		const char *id;

		if ((r = db_step(st, &row)) != SD_OK)
			goto out;
		if (!row)
			break;
		id = db_col_text(st, 0);
		if (keep && keep(id, arg)) {
			if (kept)
				(*kept)++;
			continue;
		}
		if (!(ids[n_ids] = strdup(id))) {
			db_reset(st);
			r = err_set(SD_NOMEM, "out of memory");
			goto out;
		}
		n_ids++;
	}
	db_reset(st);
	for (i = 0; i < n_ids; i++) {
		if (!(st = db_stmt(db, SQL_FORGET_PROCESSED))) {
			r = SD_DB;
			goto out;
		}
		db_bind_text(st, 1, ids[i]);
		db_bind_int(st, 2, before_ms);
		if ((r = db_run(st)) != SD_OK)
			goto out;
		*n += db_changes(db);
	}
out:
	r = db_end(db, r);
	if (r != SD_OK)
		*n = 0;
out_free:
	for (i = 0; i < n_ids; i++)
		free(ids[i]);
	free(ids);
	return r;
}
