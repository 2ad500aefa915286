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
 * db_gate_poison: a flush of the file's WAL failed in this process (a FULL
 * commit came back SQLITE_IOERR_FSYNC).  After a failed fsync the kernel
 * may report the pages it lost as clean, so a later flush that succeeds
 * proves nothing: db_gate_poisoned is 1 from now on, and FULL commits of
 * this process are refused until it starts again.
 */
void db_gate_poison(struct db_gate *g);
int db_gate_poisoned(struct db_gate *g);

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
