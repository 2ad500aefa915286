/*
 * episode.h: a fault that repeats, as one episode: a disk that is full or
 * failing makes the same write fail on every try until it is fixed.  The
 * episode is logged when it begins, again at most every EPISODE_REMIND_MS
 * while it lasts, and once when it ends (with the number of failures and how
 * long it lasted), instead of once per try; and it gives the wait before the
 * next try, doubling from a base to a cap.
 *
 * An episode belongs to one thread; it starts zeroed (struct episode e = {0}).
 */
#ifndef SD_EPISODE_H
#define SD_EPISODE_H

#include <stdint.h>

#include "log.h"
#include "result.h"

/* a fault that lasts is said again this often */
#define EPISODE_REMIND_MS (300LL * 1000)

struct episode {
	int64_t failures;	/* since it began; 0: no episode now */
	int64_t began_us;	/* when it began (clock_mono_us) */
	int64_t said_us;	/* when it was last logged */
};

/* episode_transient: 1 for the failures that pass by themselves (a full or
 * failing disk: SD_IO; a lock held too long: SD_BUSY), which are retried
 * for as long as they last. */
int episode_transient(enum sd_result r);

/*
 * episode_fail: one more failure.  When it begins the episode, or when it
 * was last said EPISODE_REMIND_MS ago, logs msg at lvl with who (key=value
 * pairs, may be NULL), failures=N and err (quoted here; may be NULL).
 * [return] the wait before the next try: base_ms doubled per failure up
 * to cap_ms.
 */
int64_t episode_fail(struct episode *e, enum log_level lvl, const char *msg, const char *who,
		     const char *err, int64_t base_ms, int64_t cap_ms);

/* episode_end: a success.  When an episode was going on, logs msg at info
 * with who, failures=N and lasted_ms=N, and ends it. */
void episode_end(struct episode *e, const char *msg, const char *who);

/* episode_on: 1 while an episode is going on. */
int episode_on(const struct episode *e);

#endif
