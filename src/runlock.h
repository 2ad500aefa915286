/*
 * runlock.h: one `stagedoor run` per box, and no migration under a running
 * one.
 *
 * The run lock is an flock on "<db>-run.lock" beside a SQLite database (on
 * PostgreSQL, where several boxes share the database, "<state_dir>/run.lock":
 * one run per box), with the holder's pid written in it.  A running box's
 * processes (run and the children it exec'd) are one program version; a
 * newer binary that finds the database older than its schema must not
 * migrate it under them.  runlock_guard is the store's migration guard
 * (db_migrate_guard_set): on SQLite it refuses while another process holds
 * the run lock; on PostgreSQL the store itself refuses while any box holds
 * its shared box lock (db_box_lock_hold).  `run` takes the lock before it
 * opens the database, so its own migration runs while nothing else writes.
 */
#ifndef SD_RUNLOCK_H
#define SD_RUNLOCK_H

#include "result.h"

/* runlock_take: take the run lock of the box whose database is db (and,
 * on PostgreSQL, whose state folder is state_dir), for the life of the
 * process.  SD_OK, SD_BUSY naming the running pid, or another error. */
enum sd_result runlock_take(const char *db, const char *state_dir);

/* runlock_guard: a db_migrate_guard: SD_OK when nothing else runs the box
 * at path (or this process holds its lock), else SD_BUSY saying what to do. */
enum sd_result runlock_guard(const char *path, int from, int to);

#endif
