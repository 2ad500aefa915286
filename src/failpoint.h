/*
 * failpoint.h: named places in the handlers where a test or the crash
 * harness can step in: the windows of the seed where a second run is born
 * ("after the send, before sent_at").
 *
 * Unarmed, a failpoint is one load and a branch.  Tests arm a hook that
 * blocks on a barrier to force a bad interleaving; the crash harness names
 * failpoints in $STAGEDOOR_FAILPOINTS ("name=crash,other=crash") to kill
 * the process there, as a power cut or SIGKILL would.
 */
#ifndef SD_FAILPOINT_H
#define SD_FAILPOINT_H

typedef void (*failpoint_fn)(const char *name, void *arg);

/* failpoint_set_hook: call fn at every failpoint (NULL: none). */
void failpoint_set_hook(failpoint_fn fn, void *arg);

/* The worker's own: a handler returned, its result is not committed yet. */
#define FAILPOINT_JOB_DONE "job.after_work"

/* failpoint: pass the named place. */
void failpoint(const char *name);

#endif
