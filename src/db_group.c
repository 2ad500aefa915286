/*
 * db_group.c: group commit (db_group.h).
 *
 * Invariants:
 *  - at most one leader at a time (leading, under mu); a commit runs on its
 *    leader's own connection, which no other thread uses meanwhile (the
 *    members wait), and which then reads what it wrote with a warm cache;
 *  - a member is marked done only after the commit that held its write has
 *    returned (or failed), so no thread answers before the flush;
 *  - members join in line and are taken from its head: writes commit, and
 *    see each other, in the order they arrived.
 */
#define _GNU_SOURCE
#include "db_group.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_engine.h"

/* One thread's write, waiting in line or in a commit. */
struct member {
	db_group_fn fn;
	void *arg;
	enum sd_result r;		/* its result, once done */
	int done;
	char err[512];			/* its message, when r is not SD_OK */
	struct member *next;
};

struct db_group {
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* a commit ended */
	struct member *head, *tail;	/* the line, under mu */
	int leading;			/* a leader runs a commit, under mu */
};

enum sd_result db_group_new(const char *target, struct db_group **out)
{
	struct db_group *g;

	*out = NULL;
	if (db_target_is_pg(target))
		return SD_OK;
	if (!(g = calloc(1, sizeof *g)))
		return err_set(SD_NOMEM, "out of memory");
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	*out = g;
	return SD_OK;
}

void db_group_free(struct db_group *g)
{
	if (!g)
		return;
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
	free(g);
}

static void member_fail(struct member *m, enum sd_result r, const char *msg)
{
	m->r = r;
	snprintf(m->err, sizeof m->err, "%s", msg);
}

/* run_one: m's write in a savepoint of the open transaction (alone in
 * its commit, it needs none: its failure rolls the whole transaction
 * back, and a savepoint costs SQLite a statement journal).  0 while the
 * transaction lives on; -1 when the engine lost it (then m failed). */
static int run_one(struct db *db, struct member *m, int alone)
{
	enum sd_result r;

	err_clear();
	if (alone)
		r = m->fn(db, m->arg);
	else if ((r = db_savepoint(db)) == SD_OK)
		r = db_savepoint_end(db, m->fn(db, m->arg));
	m->r = r;
	if (r != SD_OK)
		snprintf(m->err, sizeof m->err, "%s", err_msg());
	return db->doomed ? -1 : 0;
}

/*
 * commit: the batch's writes, one savepoint each, in one transaction on the
 * leader's own connection db, then one commit.  Every member ends with its
 * result: its own refusal, or the failure that kept the commit from
 * storing it.
 */
static void commit(struct db *db, struct member *batch)
{
	struct member *m, *lost = NULL;
	enum sd_result r;

	if ((r = db_begin(db)) != SD_OK) {
		for (m = batch; m; m = m->next)
			member_fail(m, r, err_msg());
		return;
	}
	for (m = batch; m; m = m->next)
		if (run_one(db, m, !batch->next) != 0) {
			lost = m;	/* its failure took the transaction */
			break;
		}
	if (lost) {
		r = lost->r;
		db_rollback(db);
		for (m = batch; m; m = m->next)
			if (m != lost)
				member_fail(m, r, lost->err);
		return;
	}
	if ((r = db_commit(db)) == SD_OK)
		return;
	for (m = batch; m; m = m->next)
		if (m->r == SD_OK)
			member_fail(m, r, err_msg());
}

/* lead: take up to DB_GROUP_MAX members from the head of the line, commit
 * them on db, and mark them done.  Called and returns with mu held. */
static void lead(struct db_group *g, struct db *db)
{
	struct member *batch = g->head, *m = batch;
	int n = 1;

	while (m->next && n < DB_GROUP_MAX) {
		m = m->next;
		n++;
	}
	g->head = m->next;
	if (!g->head)
		g->tail = NULL;
	m->next = NULL;
	g->leading = 1;
	pthread_mutex_unlock(&g->mu);
	commit(db, batch);
	pthread_mutex_lock(&g->mu);
	for (m = batch; m; m = m->next)
		m->done = 1;
	g->leading = 0;
	pthread_cond_broadcast(&g->cv);
}

enum sd_result db_group_run(struct db_group *g, struct db *own, db_group_fn fn, void *arg)
{
	struct member m = { fn, arg, SD_OK, 0, "", NULL };
	enum sd_result r;

	if (!g) {
		if ((r = db_begin(own)) != SD_OK)
			return r;
		return db_end(own, fn(own, arg));
	}
	pthread_mutex_lock(&g->mu);
	if (g->tail)
		g->tail->next = &m;
	else
		g->head = &m;
	g->tail = &m;
	while (!m.done) {
		if (!g->leading)
			lead(g, own);
		else
			pthread_cond_wait(&g->cv, &g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	if (m.r != SD_OK)
		err_set(m.r, "%s", m.err);
	return m.r;
}
