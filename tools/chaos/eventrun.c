/*
 * eventrun.c: a whole event's day under the kill attack (--event-run).
 *
 * The sale (chaos.c's attack) fills the shop's event: the buyers pay at
 * paysink, the box office's orders are paid there in cash or by card (a
 * third not paid).  Then, with a worker SIGKILLed every 100-500 ms:
 *   move      `event set E --starts-at T1 --venue ...`, T1 a few minutes
 *             ahead (remind_before is 3m), one whole-box kill while its
 *             children run; until the run has finished
 *   remind    until the reminder of each addressed order for T1 is marked
 *             sent (their time comes a minute or two after the move)
 *   cancel    `event cancel E --reason ...`, paysink failing 5% of refunds
 *             with 500, two whole-box kills while the children run (at a
 *             third and two thirds of the orders done); until the run has
 *             finished
 * The drain then waits for what is owed (refunds, emails), and the verdict
 * (eventcheck.c, verify.c, shopcheck.c) judges from the database, paysink's
 * record and the maildir alone.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chaos.h"

#define EVENT_REMIND_BEFORE_S 180	/* remind_before in the soak's config */
#define EVENT_PHASE_MAX_MS (10 * 60 * 1000)

static struct {
	struct vdb *db;
	long worker_kills, box_kills;
	int64_t move_ms, remind_ms, cancel_ms;
	long long t1_ms;		/* the new start, ms since the epoch */
	long long reminders_sent, reminders_owed;
} E;

static int first_int_row(void *arg, int ncols, const char *const *vals)
{
	long long *out = arg;
	int i;

	for (i = 0; i < ncols && i < 3; i++)
		out[i] = vals[i] ? strtoll(vals[i], NULL, 10) : 0;
	return 1;
}

/* up to three numbers of the first row of sql (one parameter), -1 on error */
static int query3(const char *sql, const char *param, long long out[3])
{
	char err[300];

	out[0] = out[1] = out[2] = 0;
	if (vdb_each(E.db, sql, param, first_int_row, out, err, sizeof err) != 0) {
		fail("event run: database: %s", err);
		return -1;
	}
	return 0;
}

/* the latest run of kind on the shop's event: done, orders, finished */
static int run_progress(const char *kind, long long out[3])
{
	char sql[320], ev[24];

	snprintf(ev, sizeof ev, "%ld", soak.shop_event);
	snprintf(sql, sizeof sql,
		 "SELECT done, orders, CASE WHEN finished_at IS NULL THEN 0 ELSE 1 END "
		 "FROM event_runs WHERE event_id = %s AND kind = '%s' ORDER BY id DESC LIMIT 1",
		 vdb_pg(E.db) ? "$1::bigint" : "?1", kind);
	return query3(sql, ev, out);
}

/* the reminders for T1 marked sent, and the addressed live orders owing one */
static int reminder_progress(long long out[3])
{
	char sql[400], kind[48], ev[24];
	long long owed[3];

	snprintf(kind, sizeof kind, "reminder-%lld", E.t1_ms);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM email_sends WHERE kind = %s AND "
		 "sent_at IS NOT NULL", vdb_pg(E.db) ? "$1" : "?1");
	if (query3(sql, kind, out) != 0)
		return -1;
	snprintf(ev, sizeof ev, "%ld", soak.shop_event);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM orders WHERE event_id = %s AND "
		 "cancelled_at IS NULL AND coalesce(buyer_email, '') <> ''",
		 vdb_pg(E.db) ? "$1::bigint" : "?1");
	if (query3(sql, ev, owed) != 0)
		return -1;
	out[1] = owed[0];
	out[2] = out[0] >= owed[0];
	E.reminders_sent = out[0];
	E.reminders_owed = owed[0];
	return 0;
}

/*
 * Kill a worker every 100-500 ms and the whole box box_kills times (at equal
 * shares of the progress), until progress says finished; the time it took.
 */
static int64_t under_attack(const char *what, int (*progress)(long long out[3]),
			    int box_kills)
{
	int64_t t0 = now_ms(), next_kill = t0 + 100 + (int64_t)rng_below(401);
	int64_t next_look = 0;
	long long p[3] = { 0, 0, 0 };
	int kills_done = 0;

	while (!chaos_interrupted) {
		int64_t now = now_ms();

		if (chaos_run_watch() != 0)
			return -1;
		orphans_reap();
		if (now >= next_look) {
			if (progress(p) != 0)
				return -1;
			if (p[2] && kills_done >= box_kills)
				return now_ms() - t0;
			next_look = now + 100;
		}
		if (kills_done < box_kills && p[1] > 0 &&
		    p[0] * (box_kills + 1) >= p[1] * (kills_done + 1)) {
			say("%s: SIGKILL the whole box at %lld of %lld", what, p[0], p[1]);
			if (chaos_kill_box(kills_done % (int)opt.boxes) != 0)
				return -1;
			kills_done++;
			E.box_kills++;
			next_kill = now_ms() + 300;
		} else if (kills_done < box_kills && p[2]) {
			kills_done = box_kills;	/* finished before the kill was due */
		}
		if (now >= next_kill) {
			E.worker_kills += chaos_kill_worker();
			next_kill = now + 100 + (int64_t)rng_below(401);
		}
		if (now - t0 > EVENT_PHASE_MAX_MS) {
			fail("event run: %s not finished after %d s (%lld of %lld)", what,
			     EVENT_PHASE_MAX_MS / 1000, p[0], p[1]);
			return -1;
		}
		sleep_ms(10);
	}
	fail("interrupted");
	return -1;
}

static int move_progress(long long out[3])
{
	return run_progress("move", out);
}

static int cancel_progress(long long out[3])
{
	return run_progress("cancel", out);
}

/* the command argv, then its run (what) under attack; its time into *ms */
static int run_of(const char *const *argv, const char *what,
		  int (*progress)(long long out[3]), int box_kills, int64_t *ms)
{
	char out[1024] = "";
	int rc = proc_run(argv, out, sizeof out, 1);

	if (rc != 0) {
		fail("event run: stagedoor %s %s: exit %d: %.300s", argv[1], argv[2], rc, out);
		return -1;
	}
	if ((*ms = under_attack(what, progress, box_kills)) < 0)
		return -1;
	say("event run: the %s's run finished in %.1f s", what, (double)*ms / 1000.0);
	return 0;
}

static int event_move(void)
{
	char id[24], when[32];
	const char *argv[] = { opt.bin, "event", "set", id, "--db", soak.db, "--starts-at", when,
			       "--venue", "Stagedoor Annex", NULL };
	struct timespec ts;
	struct tm tm;
	time_t t1;

	/* a whole minute at least two minutes past the reminder's lead */
	clock_gettime(CLOCK_REALTIME, &ts);
	t1 = ts.tv_sec + EVENT_REMIND_BEFORE_S + 120;
	t1 += 60 - t1 % 60;
	E.t1_ms = (long long)t1 * 1000;
	gmtime_r(&t1, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%MZ", &tm);
	snprintf(id, sizeof id, "%ld", soak.shop_event);
	say("event run: move event %s to %s (its reminders due at %lld s from now)", id, when,
	    (long long)(t1 - EVENT_REMIND_BEFORE_S - ts.tv_sec));
	return run_of(argv, "move", move_progress, 1, &E.move_ms);
}

static int event_cancel(void)
{
	char id[24];
	const char *argv[] = { opt.bin, "event", "cancel", id, "--db", soak.db, "--reason",
			       "The hall's roof is being repaired", NULL };

	snprintf(id, sizeof id, "%ld", soak.shop_event);
	say("event run: cancel event %s", id);
	return run_of(argv, "cancel", cancel_progress, 2, &E.cancel_ms);
}

int eventrun_attack(void)
{
	char err[300];
	int rc = -1;

	if (vdb_open(soak.db, &E.db, err, sizeof err) != 0) {
		fail("event run: database: %s", err);
		return -1;
	}
	if (event_move() != 0)
		goto out;
	if ((E.remind_ms = under_attack("reminders", reminder_progress, 0)) < 0)
		goto out;
	say("event run: %lld reminders sent", E.reminders_sent);
	rc = event_cancel();
out:
	vdb_close(E.db);
	E.db = NULL;
	return rc;
}

void eventrun_print_figures(void)
{
	if (!opt.event_run)
		return;
	printf("event_worker_kills %ld\n", E.worker_kills);
	printf("event_box_kills %ld\n", E.box_kills);
	printf("event_move_run_s %.1f\n", (double)E.move_ms / 1000.0);
	printf("event_reminders_wait_s %.1f\n", (double)E.remind_ms / 1000.0);
	printf("event_cancel_run_s %.1f\n", (double)E.cancel_ms / 1000.0);
}
