/*
 * notify.h: waking idle workers and relays when work arrives, without polling.
 *
 * In this process, a commit that added work calls notify_broadcast(), which
 * writes every registered waiter's eventfd.  Other processes are seen through
 * inotify on the database's directory: every commit appends to the -wal file,
 * and the IN_MODIFY it raises wakes the waiter, which then checks
 * PRAGMA data_version to tell another connection's commit from its own.
 * On PostgreSQL, other processes and other machines wake it through the
 * waiter's own connection (LISTEN/NOTIFY, notify_watch).  Where neither is
 * available the wait falls back to 25 ms naps, so a job enqueued by another
 * process still starts within 50 ms (dist/doc/design.md §7.8).
 */
#ifndef SD_NOTIFY_H
#define SD_NOTIFY_H

#include "result.h"

struct notify;

/* Most waiters one process can register (workers, relays, benchmarks). */
#define NOTIFY_MAX 64

/*
 * notify_open: register a waiter for the database at db_path.
 * [out] *out is freed with notify_close().
 */
enum sd_result notify_open(const char *db_path, struct notify **out);

/*
 * notify_watch: wait on a socket too (a PostgreSQL connection that LISTENs,
 * db_wake_fd): fd(arg) gives it before each wait (-1: none now), heard(arg)
 * reads what arrived and returns 1 for a wake-up.  Called from the thread
 * that owns arg; then notify_wait no longer naps in 25 ms steps.
 */
void notify_watch(struct notify *n, int (*fd)(void *arg), int (*heard)(void *arg), void *arg);

/* notify_close: unregister and free; accepts NULL. */
void notify_close(struct notify *n);

/* notify_wake: wake this waiter (from any thread or a signal handler). */
void notify_wake(struct notify *n);

/* notify_broadcast: wake every waiter in this process; async-signal-safe. */
void notify_broadcast(void);

/*
 * notify_wait: sleep until woken, until another process writes the database,
 * or until timeout_ms passes (-1: no limit).  Returns 1 when woken by an
 * event, 0 on timeout.
 */
int notify_wait(struct notify *n, int timeout_ms);

/* notify_pause: sleep timeout_ms, cut short only by a stop request, not by
 * work or writes: a loop that backs off from a failing disk keeps to its
 * wait however busy the database is. */
void notify_pause(struct notify *n, int timeout_ms);

/* notify_request_stop: ask every loop in this process (workers, relays) to
 * stop, and wake them; async-signal-safe. */
void notify_request_stop(void);

/* notify_stop_requested: non-zero once a stop was asked for. */
int notify_stop_requested(void);

/* notify_stop_reset: clear the request (tests that run loops again). */
void notify_stop_reset(void);

#endif
