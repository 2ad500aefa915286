/*
 * controls.c: pause, rate and concurrency limits per kind or SQS queue, and
 * cancelling a job (controls.h).
 *
 * A control is a row of `controls` with a lane.  Setting the first control
 * of a kind of the box's own moves its entries (and its dead letters) from
 * lane 0 to its lane, once, in the same transaction; the trigger stream_lane
 * sends every later entry there.  Clearing the last moves them back and
 * drops the row.  An SQS queue's entries never move: its lane is its own.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "controls.h"
#include "log.h"
#include "queue_lane.h"
#include "text.h"

static char box_name[CONTROLS_BOX_MAX + 1];

void controls_box_set(const char *box)
{
	snprintf(box_name, sizeof box_name, "%s", box ? box : "");
}

const char *controls_box(void)
{
	return box_name;
}

/* ======================== rates ========================================== */

enum sd_result controls_rate_parse(const char *s, struct control_limits *l)
{
	char unit[16] = "", word[16] = "", rest[2];
	long long n = 0, per = 1, burst = 0;
	int k, used = 0;

	if (!s || sscanf(s, " %lld / %n", &n, &used) < 1 || used == 0)
		goto bad;
	s += used;
	if (sscanf(s, "%lld%n", &per, &used) == 1)
		s += used;
	else
		per = 1;
	k = sscanf(s, "%15[a-z] %15s %lld %1s", unit, word, &burst, rest);
	if (k < 1 || k == 2 || k == 4 || (k == 3 && strcmp(word, "burst") != 0))
		goto bad;
	if (strcmp(unit, "ms") == 0)
		l->rate_ms = per;
	else if (strcmp(unit, "s") == 0)
		l->rate_ms = per * 1000;
	else if (strcmp(unit, "m") == 0)
		l->rate_ms = per * 60000;
	else if (strcmp(unit, "h") == 0)
		l->rate_ms = per * 3600000;
	else if (strcmp(unit, "d") == 0)
		l->rate_ms = per * 86400000;
	else
		goto bad;
	if (n < 1 || n > CONTROLS_LIMIT_MAX || per < 1 || per > CONTROLS_RATE_MS_MAX ||
	    l->rate_ms > CONTROLS_RATE_MS_MAX || (k == 3 && burst < 1) || burst > CONTROLS_LIMIT_MAX)
		goto bad;
	l->rate_n = n;
	l->burst = burst > 0 ? burst : n;
	return SD_OK;
bad:
	return err_set(SD_INVALID, "a rate is N/s, N/m, N/h, N/d or N/<ms>ms, then optionally "
		       "\"burst B\" (N and B 1 to %d, a period of a day at most): \"10/s burst 20\"",
		       CONTROLS_LIMIT_MAX);
}

void controls_rate_text(const struct control_limits *l, char *buf, size_t size)
{
	static const struct { int64_t ms; const char *u; } units[] = {
		{ 86400000, "d" }, { 3600000, "h" }, { 60000, "m" }, { 1000, "s" },
	};
	size_t i;

	if (!l->rate_n) {
		snprintf(buf, size, "-");
		return;
	}
	for (i = 0; i < sizeof units / sizeof units[0]; i++)
		if (l->rate_ms == units[i].ms)
			break;
	if (i < sizeof units / sizeof units[0])
		snprintf(buf, size, "%" PRId64 "/%s burst %" PRId64, l->rate_n, units[i].u, l->burst);
	else
		snprintf(buf, size, "%" PRId64 "/%" PRId64 "ms burst %" PRId64, l->rate_n, l->rate_ms,
			 l->burst);
}

/* ======================== the rows ====================================== */

static const char SQL_GET[] =
	"SELECT lane, kind, paused_at, paused_by, rate_n, rate_ms, burst, concurrency, "
	"box_concurrency FROM controls WHERE kind = ?1";
static const char SQL_LIST[] =
	"SELECT lane, kind, paused_at, paused_by, rate_n, rate_ms, burst, concurrency, "
	"box_concurrency FROM controls ORDER BY kind";
static const char SQL_NEXT_LANE[] =
	"SELECT coalesce(min(lane), 0) - 1 FROM controls WHERE lane < 0";
static const char SQL_SQS_LANE[] = "SELECT id FROM sqs_queues WHERE name = ?1";
static const char SQL_COUNT[] = "SELECT count(*) FROM controls";
static const char SQL_INSERT[] = "INSERT INTO controls (lane, kind) VALUES (?1, ?2)";
static const char SQL_SET[] =
	"UPDATE controls SET paused_at = ?2, paused_by = ?3, rate_n = ?4, rate_ms = ?5, "
	"burst = ?6, concurrency = ?7, box_concurrency = ?8 WHERE lane = ?1";
static const char SQL_DROP[] = "DELETE FROM controls WHERE lane = ?1";

static void row_read(struct db_stmt *st, struct control *c)
{
	const char *by = db_col_text(st, 3);

	memset(c, 0, sizeof *c);
	c->lane = db_col_int(st, 0);
	snprintf(c->kind, sizeof c->kind, "%s", db_col_text(st, 1));
	c->paused_at = db_col_int0(st, 2);
	snprintf(c->paused_by, sizeof c->paused_by, "%s", by ? by : "");
	c->lim.rate_n = db_col_int0(st, 4);
	c->lim.rate_ms = db_col_int0(st, 5);
	c->lim.burst = db_col_int0(st, 6);
	c->lim.concurrency = db_col_int0(st, 7);
	c->lim.box_concurrency = db_col_int0(st, 8);
}

enum sd_result controls_get(struct db *db, const char *kind, struct control *out)
{
	struct db_stmt *st = db_stmt(db, SQL_GET);
	enum sd_result r;
	int row;

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, kind);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (row)
		row_read(st, out);
	db_reset(st);
	return row ? SD_OK : err_set(SD_NOT_FOUND, "%s has no control", kind);
}

/* one int64 of a one-row statement with ?1 = text or int */
static enum sd_result one(struct db *db, const char *sql, const char *text, int64_t arg,
			  int *found, int64_t *v)
{
	struct db_stmt *st = db_stmt(db, sql);

	if (st && text)
		db_bind_text(st, 1, text);
	else if (st && strstr(sql, "?1"))
		db_bind_int(st, 1, arg);
	return db_one_int(st, found, v);
}

/* run sql with ?1 = a and ?2 = text (NULL: not bound) */
static enum sd_result run2(struct db *db, const char *sql, int64_t a, const char *text)
{
	struct db_stmt *st = db_stmt(db, sql);

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, a);
	if (text)
		db_bind_text(st, 2, text);
	return db_run(st);
}

/* kind's control (made, with its lane, when there is none): [out] *c.
 * An SQS queue's kind takes its queue's lane; another kind a new one
 * below every lane in use, and its waiting entries move there. */
static enum sd_result control_make(struct db *db, const char *kind, struct control *c)
{
	enum sd_result r;
	int64_t lane = 0;
	int found;

	if ((r = controls_get(db, kind, c)) != SD_NOT_FOUND)
		return r;
	err_clear();
	if ((r = one(db, SQL_COUNT, NULL, 0, &found, &lane)) != SD_OK)
		return r;
	if (lane >= CONTROLS_MAX)
		return err_set(SD_LIMITED, "a database holds %d controls at most (kinds and queues "
			       "paused or limited): resume or clear one first", CONTROLS_MAX);
	lane = 0;
	if (strncmp(kind, QUEUE_SQS_PREFIX, strlen(QUEUE_SQS_PREFIX)) == 0) {
		if ((r = one(db, SQL_SQS_LANE, kind + strlen(QUEUE_SQS_PREFIX), 0, &found, &lane)) !=
		    SD_OK)
			return r;
		if (!found)
			return err_set(SD_NOT_FOUND, "no SQS queue named %s",
				       kind + strlen(QUEUE_SQS_PREFIX));
	} else if ((r = one(db, SQL_NEXT_LANE, NULL, 0, &found, &lane)) != SD_OK) {
		return r;
	}
	if ((r = run2(db, SQL_INSERT, lane, kind)) != SD_OK)
		return r;
	if (lane < 0 && (r = queue_lane_move(db, 0, lane, kind)) != SD_OK)
		return r;
	memset(c, 0, sizeof *c);
	c->lane = lane;
	snprintf(c->kind, sizeof c->kind, "%s", kind);
	return SD_OK;
}

static void bind_or_null(struct db_stmt *st, int idx, int64_t v)
{
	if (v)
		db_bind_int(st, idx, v);
	else
		db_bind_null(st, idx);
}

/* c written back; a control with nothing on is dropped, its entries back
 * in lane 0.  Workers wake: a resume or a wider limit may free entries. */
static enum sd_result control_store(struct db *db, const struct control *c)
{
	struct db_stmt *st;
	enum sd_result r;

	db_notify_on_commit(db);
	if (!c->paused_at && !c->lim.rate_n && !c->lim.concurrency && !c->lim.box_concurrency) {
		if (c->lane < 0 && (r = queue_lane_move(db, c->lane, 0, NULL)) != SD_OK)
			return r;
		return run2(db, SQL_DROP, c->lane, NULL);
	}
	if (!(st = db_stmt(db, SQL_SET)))
		return SD_DB;
	db_bind_int(st, 1, c->lane);
	bind_or_null(st, 2, c->paused_at);
	if (c->paused_at)
		db_bind_text(st, 3, c->paused_by);
	else
		db_bind_null(st, 3);
	bind_or_null(st, 4, c->lim.rate_n);
	bind_or_null(st, 5, c->lim.rate_n ? c->lim.rate_ms : 0);
	bind_or_null(st, 6, c->lim.rate_n ? c->lim.burst : 0);
	bind_or_null(st, 7, c->lim.concurrency);
	bind_or_null(st, 8, c->lim.box_concurrency);
	return db_run(st);
}

/* the change one control call makes */
struct change {
	int pause;			/* 1 pause, -1 resume, 0 neither */
	const char *who;
	const struct control_limits *lim;	/* NULL: limits kept */
	int changed;
};

static enum sd_result control_change(struct db *db, const char *kind, struct change *ch)
{
	struct control c;
	enum sd_result r;

	if ((r = queue_kind_valid(kind)) != SD_OK)
		return r;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	r = controls_get(db, kind, &c);
	if (r == SD_NOT_FOUND && (ch->pause > 0 || ch->lim)) {
		err_clear();
		r = control_make(db, kind, &c);
	} else if (r == SD_NOT_FOUND) {		/* a resume of what is not paused */
		err_clear();
		db_rollback(db);
		ch->changed = 0;
		return SD_OK;
	}
	if (r != SD_OK)
		goto fail;
	ch->changed = ch->pause > 0 ? !c.paused_at : ch->pause < 0 ? c.paused_at != 0 : 1;
	if (ch->pause > 0 && !c.paused_at) {
		c.paused_at = clock_now_ms();
		snprintf(c.paused_by, sizeof c.paused_by, "%s", ch->who ? ch->who : "cli");
	} else if (ch->pause < 0) {
		c.paused_at = 0;
	}
	if (ch->lim)
		c.lim = *ch->lim;
	if ((r = control_store(db, &c)) != SD_OK)
		goto fail;
	return db_commit(db);
fail:
	db_rollback(db);
	return r;
}

enum sd_result controls_pause(struct db *db, const char *kind, const char *who, int *changed)
{
	struct change ch = { .pause = 1, .who = who };
	enum sd_result r = control_change(db, kind, &ch);

	if (changed)
		*changed = ch.changed;
	return r;
}

enum sd_result controls_resume(struct db *db, const char *kind, int *changed)
{
	struct change ch = { .pause = -1 };
	enum sd_result r = control_change(db, kind, &ch);

	if (changed)
		*changed = ch.changed;
	return r;
}

enum sd_result controls_limit(struct db *db, const char *kind, const struct control_limits *l)
{
	struct control_limits lim = *l;
	struct change ch = { .lim = &lim };

	if (lim.rate_n < 0 || lim.rate_n > CONTROLS_LIMIT_MAX || lim.burst < 0 ||
	    lim.burst > CONTROLS_LIMIT_MAX || lim.concurrency < 0 ||
	    lim.concurrency > CONTROLS_LIMIT_MAX || lim.box_concurrency < 0 ||
	    lim.box_concurrency > CONTROLS_LIMIT_MAX ||
	    (lim.rate_n && (lim.rate_ms < 1 || lim.rate_ms > CONTROLS_RATE_MS_MAX)))
		return err_set(SD_INVALID, "a limit is 1 to %d (0: none), a rate's period 1 ms to a "
			       "day", CONTROLS_LIMIT_MAX);
	if (lim.rate_n && !lim.burst)
		lim.burst = lim.rate_n;
	return control_change(db, kind, &ch);
}

/* ======================== looking ======================================= */

/* what controls_list adds to a row: its entries, its live leases, and how
 * long its oldest ready entry has waited */
static enum sd_result row_counts(struct db *db, int64_t now, struct control *c)
{
	enum sd_result r;
	int64_t end, next;

	if ((r = queue_lane_waiting(db, c->lane, &c->waiting)) != SD_OK ||
	    (r = queue_lane_live(db, c->lane, now, NULL, &c->running, &end)) != SD_OK ||
	    (r = queue_lane_next_visible(db, c->lane, &next)) != SD_OK)
		return r;
	c->waited_ms = next >= 0 && next <= now ? now - next : 0;
	return SD_OK;
}

enum sd_result controls_show(struct db *db, const char *kind, struct control *c)
{
	enum sd_result r;

	if ((r = db_begin_snapshot(db)) != SD_OK)
		return r;
	if ((r = controls_get(db, kind, c)) == SD_NOT_FOUND) {
		err_clear();
		memset(c, 0, sizeof *c);
		snprintf(c->kind, sizeof c->kind, "%s", kind);
		r = SD_OK;
	} else if (r == SD_OK) {
		r = row_counts(db, clock_now_ms(), c);
	}
	db_rollback(db);
	return r;
}

enum sd_result controls_list(struct db *db, struct control **rows, int *n)
{
	struct db_stmt *st;
	struct control *v = NULL;
	enum sd_result r;
	int64_t now = clock_now_ms();
	int row, k = 0, i;

	*rows = NULL;
	*n = 0;
	if ((r = db_begin_snapshot(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_LIST))) {
		r = SD_DB;
		goto out;
	}
	if (!(v = calloc(CONTROLS_MAX, sizeof *v))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	while ((r = db_step(st, &row)) == SD_OK && row && k < CONTROLS_MAX)
		row_read(st, &v[k++]);
	db_reset(st);
	for (i = 0; r == SD_OK && i < k; i++)
		r = row_counts(db, now, &v[i]);
out:
	db_rollback(db);
	if (r != SD_OK) {
		free(v);
		return r;
	}
	*rows = v;
	*n = k;
	return SD_OK;
}

/* ======================== the claim ===================================== */

/* the lanes a claim may take from: not paused, kinds of the box's own */
static const char SQL_CLAIMABLE[] =
	"SELECT lane, rate_n, rate_ms, burst, concurrency, box_concurrency, rate_tat "
	"FROM controls WHERE lane < 0 AND paused_at IS NULL ORDER BY lane DESC";
/* the control's row, read under its row lock (PostgreSQL: until the
 * claim's commit, so the claims of every box on one lane take turns) */
static const char SQL_LOCK[] =
	"UPDATE controls SET rate_tat = rate_tat WHERE lane = ?1 AND paused_at IS NULL "
	"RETURNING lane, rate_n, rate_ms, burst, concurrency, box_concurrency, rate_tat";
static const char SQL_LOCK_ANY[] =
	"UPDATE controls SET rate_tat = rate_tat WHERE lane = ?1 "
	"RETURNING lane, rate_n, rate_ms, burst, concurrency, box_concurrency, rate_tat, "
	"paused_at";
static const char SQL_TAT[] = "UPDATE controls SET rate_tat = ?2 WHERE lane = ?1";

/* a lane's limits as a claim reads them */
struct lane_lim {
	int64_t lane;
	struct control_limits lim;
	int64_t tat;			/* rate_tat, microseconds */
};

static void lim_read(struct db_stmt *st, struct lane_lim *l)
{
	l->lane = db_col_int(st, 0);
	l->lim.rate_n = db_col_int0(st, 1);
	l->lim.rate_ms = db_col_int0(st, 2);
	l->lim.burst = db_col_int0(st, 3);
	l->lim.concurrency = db_col_int0(st, 4);
	l->lim.box_concurrency = db_col_int0(st, 5);
	l->tat = db_col_int(st, 6);
}

/* the rate's interval between two entries, in microseconds */
static int64_t interval_us(const struct control_limits *l)
{
	int64_t t = l->rate_ms * 1000 / l->rate_n;

	return t > 0 ? t : 1;
}

/*
 * rate_allow: entries the rate lets through at now (generic cell rate: an
 * entry may start once the theoretical time tat is less than burst
 * intervals ahead of now); when none, [in,out] *wake: the time the next
 * may.
 */
static int64_t rate_allow(const struct lane_lim *l, int64_t now, int64_t *wake)
{
	int64_t t = interval_us(&l->lim), now_us = now * 1000;
	int64_t base = l->tat > now_us ? l->tat : now_us;
	int64_t k = (now_us + l->lim.burst * t - base) / t, at;

	if (k > 0)
		return k;
	at = (base - (l->lim.burst - 1) * t + 999) / 1000;
	if (*wake < 0 || at < *wake)
		*wake = at;
	return 0;
}

static void wake_at(int64_t *wake, int64_t at)
{
	if (at >= 0 && (*wake < 0 || at < *wake))
		*wake = at;
}

/* allow: what l's concurrency and rate let through of n at now, counted
 * from the stream; [in,out] *wake when it is 0 */
static enum sd_result allow(struct db *db, const struct lane_lim *l, int64_t now, int n,
			    int64_t *k, int64_t *wake)
{
	enum sd_result r;
	int64_t running, end;

	*k = n;
	if (l->lim.concurrency) {
		if ((r = queue_lane_live(db, l->lane, now, NULL, &running, &end)) != SD_OK)
			return r;
		if (l->lim.concurrency - running < *k)
			*k = l->lim.concurrency - running;
		if (*k <= 0) {
			wake_at(wake, end);
			return SD_OK;
		}
	}
	if (l->lim.box_concurrency) {
		if ((r = queue_lane_live(db, l->lane, now, box_name, &running, &end)) != SD_OK)
			return r;
		if (l->lim.box_concurrency - running < *k)
			*k = l->lim.box_concurrency - running;
		if (*k <= 0) {
			wake_at(wake, end);
			return SD_OK;
		}
	}
	if (l->lim.rate_n) {
		int64_t kr = rate_allow(l, now, wake);
		if (kr < *k)
			*k = kr;
	}
	return SD_OK;
}

/* lock: the lane's row under its lock, re-read; [out] *ok 0 when it went
 * (paused or dropped since the claim's first look) */
static enum sd_result lock(struct db *db, int64_t lane, int any, struct lane_lim *l, int *ok,
			   int *paused)
{
	struct db_stmt *st = db_stmt(db, any ? SQL_LOCK_ANY : SQL_LOCK);
	enum sd_result r;
	int row;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, lane);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	*ok = row;
	if (row)
		lim_read(st, l);
	if (row && paused)
		*paused = !db_col_is_null(st, 7);
	db_reset(st);
	return SD_OK;
}

/*
 * lane_take: up to n entries of the lane l names, as its control allows
 * now, under the control's row lock.  [out] out[0..*got); [in,out] *wake
 * when it held something back (a limit) or found nothing ready.
 */
static enum sd_result lane_take(struct db *db, struct lane_lim *l, const struct lane_rules *rules,
				const char *worker, int n, int64_t lease_ms, struct job **out,
				int *got, int64_t *wake)
{
	int64_t now = clock_now_ms(), k, next;
	enum sd_result r;
	int ok = 1;

	*got = 0;
	/* a look without the lock first: a rate spent waits without one */
	if ((r = allow(db, l, now, n, &k, wake)) != SD_OK || k <= 0)
		return r;
	if ((l->lim.rate_n || l->lim.concurrency || l->lim.box_concurrency) &&
	    ((r = lock(db, l->lane, 0, l, &ok, NULL)) != SD_OK || !ok ||
	     (r = allow(db, l, now, n, &k, wake)) != SD_OK || k <= 0))
		return r;
	if ((r = queue_claim_lane(db, l->lane, rules, worker, (int)k, lease_ms, out, got)) != SD_OK)
		return r;
	if (l->lim.rate_n && *got > 0) {
		int64_t now_us = now * 1000;
		int64_t tat = (l->tat > now_us ? l->tat : now_us) + *got * interval_us(&l->lim);
		struct db_stmt *st = db_stmt(db, SQL_TAT);

		if (!st)
			return SD_DB;
		db_bind_int(st, 1, l->lane);
		db_bind_int(st, 2, tat);
		if ((r = db_run(st)) != SD_OK)
			return r;
		l->tat = tat;
	}
	if (*got < k) {		/* nothing more ready: when the next is */
		if ((r = queue_lane_next_visible(db, l->lane, &next)) != SD_OK)
			return r;
		wake_at(wake, next > now ? next : -1);
	}
	return SD_OK;
}

/* claimable: the lanes a claim may take from now, into v[0..*n) */
static enum sd_result claimable(struct db *db, struct lane_lim *v, int *n)
{
	struct db_stmt *st = db_stmt(db, SQL_CLAIMABLE);
	enum sd_result r;
	int row;

	*n = 0;
	if (!st)
		return SD_DB;
	while ((r = db_step(st, &row)) == SD_OK && row && *n < CONTROLS_MAX)
		lim_read(st, &v[(*n)++]);
	db_reset(st);
	return r;
}

/* claim_undone: a claim that failed (r): its transaction level rolled
 * back, the jobs it took freed */
static enum sd_result claim_undone(struct db *db, enum sd_result r, struct job **out, int *n_out)
{
	int i;

	if (db_in_tx(db))
		db_rollback(db);
	for (i = 0; i < *n_out; i++) {
		job_free(out[i]);
		out[i] = NULL;
	}
	*n_out = 0;
	return r;
}

enum sd_result controls_claim(struct db *db, const char *worker, int n, int64_t lease_ms,
			      struct job **out, int *n_out, int64_t *wake)
{
	struct lane_lim v[CONTROLS_MAX];
	enum sd_result r;
	int nl, i, got;


	*n_out = 0;
	*wake = -1;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = claimable(db, v, &nl)) != SD_OK)
		goto fail;
	for (i = 0; i < nl && *n_out < n; i++) {
		if ((r = lane_take(db, &v[i], NULL, worker, n - *n_out, lease_ms, out + *n_out, &got,
				   wake)) != SD_OK)
			goto fail;
		*n_out += got;
	}
	if ((r = db_commit(db)) == SD_OK)
		return SD_OK;
fail:
	return claim_undone(db, r, out, n_out);
}

enum sd_result controls_claim_lane(struct db *db, int64_t lane, const struct lane_rules *rules,
				   const char *worker, int n, int64_t lease_ms, struct job **out,
				   int *n_out)
{
	struct lane_lim l = { 0 };
	enum sd_result r;
	int64_t wake = -1;
	int ok = 0, paused = 0;

	*n_out = 0;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = lock(db, lane, 1, &l, &ok, &paused)) != SD_OK)
		goto fail;
	if (!ok)
		r = queue_claim_lane(db, lane, rules, worker, n, lease_ms, out, n_out);
	else if (!paused)
		r = lane_take(db, &l, rules, worker, n, lease_ms, out, n_out, &wake);
	if (r != SD_OK)
		goto fail;
	if ((r = db_commit(db)) == SD_OK)
		return SD_OK;
fail:
	return claim_undone(db, r, out, n_out);
}

/* ======================== cancel ======================================== */

static const char SQL_CANCEL_COUNT[] =
	"SELECT count(*), coalesce(sum(CASE WHEN lease_token IS NOT NULL AND visible_at > ?2 "
	"THEN 1 ELSE 0 END), 0) FROM stream WHERE job_id = ?1";
static const char SQL_CANCEL_COPY[] =
	"INSERT INTO cancelled_jobs (job_id, kind, payload, priority, deliveries, attempts, "
	"created_at, cancelled_at, cancelled_by, running, queue) SELECT job_id, kind, payload, "
	"priority, deliveries, attempts, created_at, ?2, ?3, CASE WHEN lease_token IS NOT NULL "
	"AND visible_at > ?2 THEN 1 ELSE 0 END, queue FROM stream WHERE job_id = ?1";
static const char SQL_CANCEL_DELETE[] = "DELETE FROM stream WHERE job_id = ?1";
/* a job the relay has not published yet: taken too, the outbox row marked
 * as passed (its job id stays taken: the intent is not made again) */
static const char SQL_CANCEL_OUTBOX_COUNT[] =
	"SELECT count(*) FROM outbox WHERE job_id = ?1 AND published_at IS NULL";
static const char SQL_CANCEL_OUTBOX_COPY[] =
	"INSERT INTO cancelled_jobs (job_id, kind, payload, priority, deliveries, attempts, "
	"created_at, cancelled_at, cancelled_by, running, queue) SELECT job_id, kind, payload, "
	"priority, 0, 0, created_at, ?2, ?3, 0, 0 FROM outbox WHERE job_id = ?1 AND "
	"published_at IS NULL";
static const char SQL_CANCEL_OUTBOX_MARK[] =
	"UPDATE outbox SET published_at = ?2 WHERE job_id = ?1 AND published_at IS NULL";

static enum sd_result run3(struct db *db, const char *sql, const char *job_id, int64_t now,
			   const char *who)
{
	struct db_stmt *st = db_stmt(db, sql);

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, job_id);
	if (strstr(sql, "?2"))
		db_bind_int(st, 2, now);
	if (strstr(sql, "?3"))
		db_bind_text(st, 3, who);
	return db_run(st);
}

/* cancel_count: [out] *n entries of job_id in the stream, *running of them
 * leased, *queued unpublished outbox rows */
static enum sd_result cancel_count(struct db *db, const char *job_id, int64_t now, int64_t *n,
				   int64_t *running, int64_t *queued)
{
	struct db_stmt *st = db_stmt(db, SQL_CANCEL_COUNT);
	enum sd_result r;
	int row, found;

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, job_id);
	db_bind_int(st, 2, now);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	*n = row ? db_col_int(st, 0) : 0;
	*running = row ? db_col_int(st, 1) : 0;
	db_reset(st);
	*queued = 0;
	return one(db, SQL_CANCEL_OUTBOX_COUNT, job_id, 0, &found, queued);
}

enum sd_result controls_cancel(struct db *db, const char *job_id, const char *who, int64_t *n,
			       int64_t *running)
{
	int64_t now = clock_now_ms(), queued = 0;
	char quoted[2 * CONTROLS_WHO_MAX + 3];
	enum sd_result r;

	*n = *running = 0;
	if ((r = queue_job_id_valid(job_id)) != SD_OK)
		return r;
	if (!who || !*who || strlen(who) > CONTROLS_WHO_MAX)
		return err_set(SD_INVALID, "a cancel names who made it (1 to %d bytes)",
			       CONTROLS_WHO_MAX);
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = cancel_count(db, job_id, now, n, running, &queued)) != SD_OK)
		goto fail;
	if (*n + queued == 0) {
		db_rollback(db);
		return err_set(SD_NOT_FOUND, "no job %s waits or runs (a finished or dead job "
			       "cannot be cancelled)", job_id);
	}
	if ((r = run3(db, SQL_CANCEL_COPY, job_id, now, who)) != SD_OK ||
	    (r = run3(db, SQL_CANCEL_DELETE, job_id, now, who)) != SD_OK ||
	    (queued && ((r = run3(db, SQL_CANCEL_OUTBOX_COPY, job_id, now, who)) != SD_OK ||
			(r = run3(db, SQL_CANCEL_OUTBOX_MARK, job_id, now, who)) != SD_OK)))
		goto fail;
	if ((r = db_commit(db)) != SD_OK)
		return r;
	*n += queued;
	log_event(LOG_INFO, "job cancelled", "job_id=%s by=%s entries=%lld running=%lld", job_id,
		  log_quote(quoted, sizeof quoted, who), (long long)*n, (long long)*running);
	return SD_OK;
fail:
	db_rollback(db);
	return r;
}

static const char SQL_PRUNE[] =
	"DELETE FROM cancelled_jobs WHERE id IN (SELECT id FROM cancelled_jobs WHERE "
	"cancelled_at < ?1 ORDER BY id LIMIT ?2)";

enum sd_result controls_prune(struct db *db, int64_t before_ms, int limit, int64_t *n)
{
	return db_prune(db, SQL_PRUNE, before_ms, limit, n);
}
