/*
 * db_gate.h: one writer at a time per database file in this process
 * (db_gate.c), in front of SQLite's write lock.
 *
 * Threads of one process that want to write the same file queue on a mutex
 * and are woken the moment the writer before them is done, instead of
 * napping in SQLite's busy handler and leaving the lock idle while they
 * sleep.  Other processes still meet at SQLite's lock (the busy handler);
 * the gate only orders this process's own writers.  Used by db.c.
 */
#ifndef SD_DB_GATE_H
#define SD_DB_GATE_H

#include <stdint.h>
#include <sys/types.h>

#define DB_GATES 16		/* files with a gate at once; more go without */

struct db_gate;

/* db_gate_for: the gate of the file (dev, ino), made on first use; NULL
 * when DB_GATES files have one already (that file's writers go without). */
struct db_gate *db_gate_for(dev_t dev, ino_t ino);

/*
 * db_gate_enter: wait up to limit_ms for the gate.  1: held by this thread
 * (db_gate_leave it); 0: not taken, because this thread holds it already
 * (a second connection of its own) or the wait timed out: go on without it,
 * as without a gate, and meet the other writers at SQLite's lock.
 */
int db_gate_enter(struct db_gate *g, int64_t limit_ms);

/* db_gate_leave: let the next writer of this process in. */
void db_gate_leave(struct db_gate *g);

/*
 * db_gate_sync: make this thread's commit, just written to the file's WAL,
 * durable, sharing the flush with the other committers of this process:
 * when no flush is running, this thread runs sync(arg), which covers every
 * commit written before it started; otherwise it waits for the running one
 * and, if that one started before this commit was written, for the next,
 * which one of the waiters runs for all of them.  0, or the error of the
 * sync(arg) that covered this commit.  A failed flush poisons the gate:
 * every later call returns its error without syncing, since after a failed
 * fsync the kernel may report the same lost pages as clean; the process
 * must start again to trust the disk again.
 */
int db_gate_sync(struct db_gate *g, int (*sync)(void *arg), void *arg);

/*
 * db_gate_checkpoint_begin: whether this committer, whose commit left
 * frames frames in the WAL (at least the autocheckpoint's), should run the
 * checkpoint: 1 when no other thread of the process runs one and the WAL
 * was reset since the last one or has grown by a quarter of min_frames
 * since (a passive checkpoint that readers held back is not tried again on
 * every commit).  Then db_gate_checkpoint_end.
 */
int db_gate_checkpoint_begin(struct db_gate *g, int frames, int min_frames);
void db_gate_checkpoint_end(struct db_gate *g);

#endif
