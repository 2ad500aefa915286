/*
 * db_pool.h: connections a server's threads borrow, one request at a time.
 *
 * A request takes a connection, uses it on its thread and gives it back
 * outside any transaction; up to idle_max wait in the pool for the next
 * request, more are closed.  Each connection is opened with the pool's
 * durability level (db.h), so a server that needs two levels keeps two pools.
 */
#ifndef SD_DB_POOL_H
#define SD_DB_POOL_H

#include "db.h"
#include "result.h"

struct db_pool;

/* db_pool_new: a pool for the database at path (copied), opening with sync. */
enum sd_result db_pool_new(const char *path, enum db_sync sync, int idle_max,
			   struct db_pool **out);

/* db_pool_get: an idle connection, or a new one.  [out] *db. */
enum sd_result db_pool_get(struct db_pool *p, struct db **db);

/* db_pool_put: give db back (NULL is ignored); an open transaction is
 * rolled back and the connection closed, never reused. */
void db_pool_put(struct db_pool *p, struct db *db);

/* db_pool_free: close every idle connection and free p (NULL is ignored). */
void db_pool_free(struct db_pool *p);

#endif
