/*
 * episode.c: a fault that repeats, logged once per episode (episode.h).
 *
 * Invariants:
 *  - failures is 0 exactly when no episode is going on;
 *  - an episode of any length writes at most one line per EPISODE_REMIND_MS,
 *    plus the one that ends it.
 */
#include "episode.h"

#include "clock.h"

int episode_transient(enum sd_result r)
{
	return r == SD_IO || r == SD_BUSY;
}

int64_t episode_fail(struct episode *e, enum log_level lvl, const char *msg, const char *who,
		     const char *err, int64_t base_ms, int64_t cap_ms)
{
	int64_t now = clock_mono_us(), wait = base_ms, i;
	char q[600];

	if (e->failures++ == 0)
		e->began_us = now;
	if (e->failures == 1 || now - e->said_us >= EPISODE_REMIND_MS * 1000) {
		e->said_us = now;
		log_event(lvl, msg, "%s%sfailures=%lld%s%s", who ? who : "", who ? " " : "",
			  (long long)e->failures, err ? " err=" : "",
			  err ? log_quote(q, sizeof q, err) : "");
	}
	for (i = 1; i < e->failures && wait < cap_ms; i++)
		wait *= 2;
	return wait < cap_ms ? wait : cap_ms;
}

void episode_end(struct episode *e, const char *msg, const char *who)
{
	if (e->failures == 0)
		return;
	log_event(LOG_INFO, msg, "%s%sfailures=%lld lasted_ms=%lld", who ? who : "", who ? " " : "",
		  (long long)e->failures, (long long)((clock_mono_us() - e->began_us) / 1000));
	e->failures = 0;
}

int episode_on(const struct episode *e)
{
	return e->failures > 0;
}
