/*
 * db_gate.c: the per-file writer gate of this process (db_gate.h).
 *
 * Invariants:
 *  - a gate, once made, lives as long as the process: db.c keeps pointers
 *    to it in its connections;
 *  - busy is set from a writer's enter to the last writer's leave: a leave
 *    with waiters in line hands the gate to the first of them (FIFO), so a
 *    thread that commits and begins again at once cannot shut the others
 *    out; a waiter whose wait times out leaves the line and goes on without
 *    the gate;
 *  - owner is the thread holding the gate (under mu), compared by a thread
 *    with itself so that it never waits for itself.
 */
#define _GNU_SOURCE
#include "db_gate.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* A thread waiting for the gate, in line. */
struct gate_waiter {
	pthread_cond_t cv;
	int granted;		/* the gate was handed to it */
	struct gate_waiter *next;
};

struct db_gate {
	dev_t dev;
	ino_t ino;
	/* the writer gate, under mu: held by owner while busy; the waiters in
	 * line, each handed the gate in turn by the one leaving (no barging: a
	 * writer that commits and begins again queues behind the others) */
	pthread_mutex_t mu;
	int busy;
	pthread_t owner;
	struct gate_waiter *head, *tail;
	/* under sync_mu */
	pthread_mutex_t sync_mu;
	int poisoned;		/* a flush failed: none is trusted since */
	/* the checkpoint on the commit path, under sync_mu */
	int ckpt_running;
	int ckpt_frames;	/* the WAL's frames when the last one started */
};

static struct db_gate gates[DB_GATES];
static int n_gates;
static pthread_mutex_t gates_mu = PTHREAD_MUTEX_INITIALIZER;

struct db_gate *db_gate_for(dev_t dev, ino_t ino)
{
	struct db_gate *g = NULL;
	int i;

	pthread_mutex_lock(&gates_mu);
	for (i = 0; i < n_gates && !g; i++)
		if (gates[i].dev == dev && gates[i].ino == ino)
			g = &gates[i];
	if (!g && n_gates < DB_GATES) {
		g = &gates[n_gates++];
		g->dev = dev;
		g->ino = ino;
		pthread_mutex_init(&g->mu, NULL);
		pthread_mutex_init(&g->sync_mu, NULL);
	}
	pthread_mutex_unlock(&gates_mu);
	return g;
}

/* unlink w from g's line (it gave up waiting) */
static void line_remove(struct db_gate *g, struct gate_waiter *w)
{
	struct gate_waiter **p = &g->head, *prev = NULL;

	while (*p && *p != w) {
		prev = *p;
		p = &(*p)->next;
	}
	if (!*p)
		return;
	*p = w->next;
	if (g->tail == w)
		g->tail = prev;
}

int db_gate_enter(struct db_gate *g, int64_t limit_ms)
{
	struct gate_waiter w;
	struct timespec until;
	int got = 1;

	pthread_mutex_lock(&g->mu);
	if (g->busy && pthread_equal(g->owner, pthread_self())) {
		pthread_mutex_unlock(&g->mu);
		return 0;
	}
	if (!g->busy && !g->head) {
		g->busy = 1;
		g->owner = pthread_self();
		pthread_mutex_unlock(&g->mu);
		return 1;
	}
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(limit_ms / 1000);
	until.tv_nsec += (long)(limit_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_cond_init(&w.cv, NULL);
	w.granted = 0;
	w.next = NULL;
	if (g->tail)
		g->tail->next = &w;
	else
		g->head = &w;
	g->tail = &w;
	while (!w.granted)
		if (pthread_cond_timedwait(&w.cv, &g->mu, &until) == ETIMEDOUT && !w.granted) {
			line_remove(g, &w);
			got = 0;
			break;
		}
	if (got)
		g->owner = pthread_self();
	pthread_mutex_unlock(&g->mu);
	pthread_cond_destroy(&w.cv);
	return got;
}

void db_gate_leave(struct db_gate *g)
{
	struct gate_waiter *w;

	pthread_mutex_lock(&g->mu);
	if ((w = g->head)) {	/* handed on: busy stays set */
		g->head = w->next;
		if (!g->head)
			g->tail = NULL;
		w->granted = 1;
		pthread_cond_signal(&w->cv);
	} else {
		g->busy = 0;
	}
	pthread_mutex_unlock(&g->mu);
}

void db_gate_poison(struct db_gate *g)
{
	pthread_mutex_lock(&g->sync_mu);
	g->poisoned = 1;
	pthread_mutex_unlock(&g->sync_mu);
}

int db_gate_poisoned(struct db_gate *g)
{
	int p;

	pthread_mutex_lock(&g->sync_mu);
	p = g->poisoned;
	pthread_mutex_unlock(&g->sync_mu);
	return p;
}

int db_gate_checkpoint_begin(struct db_gate *g, int frames, int min_frames)
{
	int go;

	pthread_mutex_lock(&g->sync_mu);
	go = !g->ckpt_running &&
	     (frames < g->ckpt_frames || frames >= g->ckpt_frames + min_frames / 4);
	if (go) {
		g->ckpt_running = 1;
		g->ckpt_frames = frames;
	}
	pthread_mutex_unlock(&g->sync_mu);
	return go;
}

void db_gate_checkpoint_end(struct db_gate *g)
{
	pthread_mutex_lock(&g->sync_mu);
	g->ckpt_running = 0;
	pthread_mutex_unlock(&g->sync_mu);
}
