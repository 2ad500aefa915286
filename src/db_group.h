/*
 * db_group.h: group commit: the concurrent writes of one process's threads
 * committed as one transaction, so that they share one flush.
 *
 * A FULL commit on SQLite is durable before any other connection sees it
 * (db.h): the WAL is fsynced while the commit holds the file's write lock,
 * so commits of one file take their flushes one after another.  Threads
 * that each have a short write to make (the API's POST /v1/orders and
 * resends) hand
 * it to a group instead.  One of them, the leader, runs every write waiting
 * at that moment in one transaction on its own FULL connection, each in a
 * savepoint of its own (a write that fails takes back only its own rows,
 * and its result is its own), and commits them with one flush.
 * Each thread returns when the commit that holds its write has returned.
 * Writes that arrive while a commit runs go into the next one, whose leader
 * is one of them.  A failed commit is the failure of every write in it:
 * none is answered as stored.
 *
 * Writes see each other in the order they joined: the second of two orders
 * with one idempotency key finds the first.  On PostgreSQL the server
 * shares flushes between sessions by itself (commits that wait for the WAL
 * at once are flushed together), so a group there runs each write in a
 * transaction of its own on the caller's connection (db_group_new gives
 * NULL and db_group_run runs fn directly).
 */
#ifndef SD_DB_GROUP_H
#define SD_DB_GROUP_H

#include "db.h"
#include "result.h"

#define DB_GROUP_MAX 64		/* writes in one commit at most */

struct db_group;

/* A write: its statements on db, which it may wrap in db_begin/db_end as
 * anywhere else.  It runs on the leader's thread with the leader's
 * connection: it keeps no pointer to db and never waits for another
 * thread's write. */
typedef enum sd_result (*db_group_fn)(struct db *db, void *arg);

/*
 * db_group_new: a group for the database at target: [out] *out, freed with
 * db_group_free, or NULL on PostgreSQL (run the writes directly).
 */
enum sd_result db_group_new(const char *target, struct db_group **out);
void db_group_free(struct db_group *g);

/*
 * db_group_run: fn(db, arg) inside the next group commit; returns when that
 * commit has returned.  own is the caller's connection (FULL, no
 * transaction open), on which the commit runs when this thread leads it.
 * fn's result when the commit stored its write (or fn failed: then nothing
 * of it is stored), else the commit's failure, with the message of
 * whichever it is on the calling thread.  g NULL: fn(own, arg) in a
 * transaction of its own on own.
 */
enum sd_result db_group_run(struct db_group *g, struct db *own, db_group_fn fn, void *arg);

#endif
