/*
 * db_pool.c: a server's idle connections (db_pool.h).
 */
#define _GNU_SOURCE
#include "db_pool.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct db_pool {
	pthread_mutex_t mu;
	char *path;
	enum db_sync sync;
	int n_idle, idle_max;
	struct db **idle;
};

enum sd_result db_pool_new(const char *path, enum db_sync sync, int idle_max,
			   struct db_pool **out)
{
	struct db_pool *p = calloc(1, sizeof *p);

	*out = NULL;
	if (!p || !(p->path = strdup(path)) ||
	    !(p->idle = calloc((size_t)(idle_max > 0 ? idle_max : 1), sizeof *p->idle))) {
		if (p)
			free(p->path);
		free(p);
		return err_set(SD_NOMEM, "out of memory");
	}
	pthread_mutex_init(&p->mu, NULL);
	p->sync = sync;
	p->idle_max = idle_max > 0 ? idle_max : 1;
	*out = p;
	return SD_OK;
}

enum sd_result db_pool_get(struct db_pool *p, struct db **db)
{
	*db = NULL;
	pthread_mutex_lock(&p->mu);
	if (p->n_idle)
		*db = p->idle[--p->n_idle];
	pthread_mutex_unlock(&p->mu);
	if (*db)
		return SD_OK;
	return db_open(p->path, 0, p->sync, db);
}

void db_pool_put(struct db_pool *p, struct db *db)
{
	if (!db)
		return;
	if (db_in_tx(db)) {	/* never on a clean path: never reuse one */
		db_rollback(db);
		db_close(db);
		return;
	}
	pthread_mutex_lock(&p->mu);
	if (p->n_idle < p->idle_max) {
		p->idle[p->n_idle++] = db;
		db = NULL;
	}
	pthread_mutex_unlock(&p->mu);
	db_close(db);
}

void db_pool_free(struct db_pool *p)
{
	int i;

	if (!p)
		return;
	for (i = 0; i < p->n_idle; i++)
		db_close(p->idle[i]);
	pthread_mutex_destroy(&p->mu);
	free(p->idle);
	free(p->path);
	free(p);
}
