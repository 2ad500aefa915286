/*
 * pipeline.c: the relay and a worker in threads of this process until the
 * stream and the outbox drain; the loop thread they run in.
 *
 * Invariants:
 *  - "drained" is read from one snapshot: queue_pending and
 *    outbox_unpublished inside one db_begin_snapshot transaction.  The relay
 *    publishes a row and marks it in one transaction, so a job is always
 *    counted on one side or the other, never on neither.  (On PostgreSQL a
 *    plain transaction reads each statement at its own moment, and a row
 *    the relay moved between the two counts was on neither: a drain seen
 *    before the work was done.);
 *  - the caller's connection serves only those snapshots (and whatever the
 *    caller's own callbacks do with it); the loops open their own;
 *  - every thread started is joined before pipeline_run returns, after one
 *    stop request that every loop of this process sees (notify).
 */
#define _POSIX_C_SOURCE 200809L
#include "pipeline.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "event_edit.h"
#include "events.h"
#include "notify.h"
#include "orders.h"
#include "outbox.h"
#include "queue.h"
#include "tickets.h"
#include "worker.h"

/* ======================== one loop in a thread =========================== */

int64_t pipeline_thread_cpu_us(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void *pipeline_loop_thread(void *arg)
{
	struct pipeline_loop *l = arg;
	int64_t c0 = pipeline_thread_cpu_us();

	if (l->is_relay)
		l->r = outbox_relay_run(l->relay_db, OUTBOX_BATCH_DEFAULT, 0, &l->published);
	else
		l->r = worker_run(&l->wo, &l->st);
	l->ended_us = clock_mono_us();
	l->cpu_us = pipeline_thread_cpu_us() - c0;
	/* the message is per thread: keep it for the thread that joins */
	if (l->r != SD_OK)
		snprintf(l->err, sizeof l->err, "%s", err_msg());
	atomic_store(&l->ended, 1);
	return NULL;
}

enum sd_result pipeline_loop_start(struct pipeline_loop *l)
{
	int e;

	memset(&l->st, 0, sizeof l->st);
	l->published = 0;
	l->cpu_us = 0;
	l->ended_us = 0;
	l->r = SD_OK;
	l->err[0] = '\0';
	atomic_store(&l->ended, 0);
	if ((e = pthread_create(&l->th, NULL, pipeline_loop_thread, l)) != 0)
		return err_set(SD_IO, "cannot start the %s's thread: %s",
			       l->is_relay ? "relay" : "worker", strerror(e));
	return SD_OK;
}

void pipeline_loop_join(struct pipeline_loop *l)
{
	pthread_join(l->th, NULL);
}

/* ======================== until drained ================================== */

/* One snapshot of both counts; see the invariants above. */
static enum sd_result pipeline_snapshot(struct db *db, struct pipeline_counts *c)
{
	enum sd_result r;

	c->pending = c->unpublished = 1;
	if ((r = db_begin_snapshot(db)) != SD_OK)
		return r;
	/* a job scheduled further ahead than a drain waits for (a reminder)
	 * is the workers' of `run`, not the pipeline's */
	if ((r = queue_pending_due(db, clock_now_ms() + WORKER_DRAIN_HORIZON_MS,
				   &c->pending)) != SD_OK ||
	    (r = outbox_unpublished(db, &c->unpublished)) != SD_OK) {
		db_rollback(db);
		return r;
	}
	return db_commit(db);
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

enum sd_result pipeline_run(struct db *db, const struct pipeline_opts *o,
			    struct pipeline_stats *st)
{
	int64_t poll_ms = o->poll_ms > 0 ? o->poll_ms : PIPELINE_POLL_MS_DEFAULT;
	int64_t start_us, drained_us = 0;
	struct pipeline_loop relay, worker;
	struct pipeline_counts c;
	enum sd_result r;
	int started = 0;

	memset(&relay, 0, sizeof relay);
	memset(&worker, 0, sizeof worker);
	relay.is_relay = 1;
	relay.relay_db = o->worker.db_path;
	worker.wo = o->worker;
	notify_stop_reset();

	start_us = clock_mono_us();
	if ((r = pipeline_loop_start(&relay)) != SD_OK)
		goto out;
	started = 1;
	if ((r = pipeline_loop_start(&worker)) != SD_OK)
		goto out;
	started = 2;

	for (;;) {
		int take = 1;
		int64_t now;

		if (o->wait)
			take = o->wait(o->arg, poll_ms);
		else
			sleep_ms(poll_ms);
		/* a loop ends only on a failure or a stop asked elsewhere: either
		 * way the stream will not drain now */
		if (atomic_load(&relay.ended) || atomic_load(&worker.ended)) {
			r = err_set(SD_TIMEOUT, "the %s stopped before the stream and the outbox "
				    "drained", atomic_load(&relay.ended) ? "relay" : "worker");
			break;
		}
		if (!take)
			continue;
		if ((r = pipeline_snapshot(db, &c)) != SD_OK)
			break;
		now = clock_mono_us();
		if (o->progress && (r = o->progress(o->arg, &c)) != SD_OK)
			break;
		if (c.pending == 0 && c.unpublished == 0) {
			drained_us = now;
			break;
		}
	}
out:
	notify_request_stop();
	if (started >= 1)
		pipeline_loop_join(&relay);
	if (started >= 2)
		pipeline_loop_join(&worker);
	notify_stop_reset();
	/* a loop's own failure explains more than what the main thread saw */
	if (started >= 1 && relay.r != SD_OK)
		r = err_set(relay.r, "relay: %s", relay.err);
	else if (started >= 2 && worker.r != SD_OK)
		r = err_set(worker.r, "worker: %s", worker.err);
	if (st) {
		memset(st, 0, sizeof *st);
		st->published = relay.published;
		st->relay_cpu_us = relay.cpu_us;
		st->worker_cpu_us = worker.cpu_us;
		st->worker = worker.st;
		st->start_us = start_us;
		st->drained_us = drained_us;
	}
	return r;
}

/* ======================== sample sales =================================== */

enum sd_result pipeline_sample_event(struct db *db, const char *name, int64_t orders,
				     int64_t *event_id)
{
	struct event_new ev = { 0 };

	ev.name = name;
	ev.venue = "Théâtre du Parc";
	ev.starts_at = (clock_now_ms() / 86400000 + 30) * 86400000 + 20 * 3600000;
	ev.capacity = orders * 3;
	return event_add(db, &ev, event_id);
}

enum sd_result pipeline_sample_orders(struct db *db, int64_t event_id, int64_t n,
				      const char *prefix, int64_t *seats, char *first_id,
				      void (*progress)(int64_t done, int64_t n, void *arg),
				      void *arg)
{
	static const char *const names[] = { "José Müller", "Zoë Martin", "Ana Lima", "Björn Ek",
					      "Chloé Dubois", "Sam Okafor", "Mia Chen", "Hanna Berg" };
	char id[ORDER_ID_MAX], email[64], key[64];
	enum sd_result r;
	int64_t i;
	int replayed;

	*seats = 0;
	for (i = 0; i < n; i++) {
		struct order_new o = { 0 };

		snprintf(email, sizeof email, "buyer%lld@example.com", (long long)i + 1);
		snprintf(key, sizeof key, "%s-%lld", prefix, (long long)i + 1);
		o.event_id = event_id;
		o.name = names[i % 8];
		o.email = email;
		o.seats = 1 + i % 3;
		o.idempotency_key = key;
		if ((r = order_add(db, &o, id, &replayed)) != SD_OK)
			return r;
		*seats += o.seats;
		if (i == 0 && first_id)
			snprintf(first_id, ORDER_ID_MAX, "%s", id);
		if (progress)
			progress(i + 1, n, arg);
	}
	return SD_OK;
}
