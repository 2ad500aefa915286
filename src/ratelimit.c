/*
 * ratelimit.c: token buckets per key (ratelimit.h).
 *
 * Tokens are kept in thousandths, so a rate of a few a second earns whole
 * thousandths each millisecond and no rounding loses them.  Invariants:
 * every bucket holds 0..burst * 1000; a key has at most one bucket.
 */
#define _GNU_SOURCE
#include "ratelimit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bucket {
	char key[RATE_KEY_MAX + 1];	/* "": free */
	int64_t units;			/* tokens, in UNIT parts */
	int64_t at;			/* when milli was last brought up to date */
};

struct rate {
	pthread_mutex_t mu;
	int64_t per_min, burst;		/* tokens earned a minute; held at most */
	struct bucket b[RATE_KEYS_MAX];
};

/* A token is UNIT parts, so that a minute's rate earns whole parts a
 * millisecond: per_min parts each. */
#define UNIT 60000

enum sd_result rate_new(int64_t per_s, int64_t burst, struct rate **out)
{
	return rate_new_per_min(per_s * 60, burst, out);
}

enum sd_result rate_new_per_min(int64_t per_min, int64_t burst, struct rate **out)
{
	struct rate *r;

	*out = NULL;
	if (per_min < 0 || burst < 1)
		return err_set(SD_INVALID, "a rate limit needs a rate of 0 or more and a burst of 1 "
			       "or more");
	if (!(r = calloc(1, sizeof *r)))
		return err_set(SD_NOMEM, "out of memory");
	pthread_mutex_init(&r->mu, NULL);
	r->per_min = per_min;
	r->burst = burst;
	*out = r;
	return SD_OK;
}

void rate_free(struct rate *r)
{
	if (!r)
		return;
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* bucket_of: key's bucket, or a fresh (full) one in place of the one used
 * longest ago */
static struct bucket *bucket_of(struct rate *r, const char *key, int64_t now)
{
	struct bucket *b, *oldest = &r->b[0];
	int i;

	for (i = 0; i < RATE_KEYS_MAX; i++) {
		b = &r->b[i];
		if (b->key[0] && strcmp(b->key, key) == 0)
			return b;
		if (!b->key[0] || (oldest->key[0] && b->at < oldest->at))
			oldest = b;
	}
	snprintf(oldest->key, sizeof oldest->key, "%s", key);
	oldest->units = r->burst * UNIT;
	oldest->at = now;
	return oldest;
}

int rate_take(struct rate *r, const char *key, int64_t now_ms, int64_t *wait_ms)
{
	struct bucket *b;
	int ok;

	if (wait_ms)
		*wait_ms = 0;
	if (!r || r->per_min == 0)
		return 1;
	pthread_mutex_lock(&r->mu);
	b = bucket_of(r, key, now_ms);
	if (now_ms > b->at) {
		int64_t d = now_ms - b->at;

		/* a long quiet: full again (and no overflow) */
		b->units = d > r->burst * UNIT ? r->burst * UNIT : b->units + d * r->per_min;
		if (b->units > r->burst * UNIT)
			b->units = r->burst * UNIT;
	}
	b->at = now_ms > b->at ? now_ms : b->at;
	if ((ok = b->units >= UNIT))
		b->units -= UNIT;
	else if (wait_ms)
		*wait_ms = (UNIT - b->units + r->per_min - 1) / r->per_min;
	pthread_mutex_unlock(&r->mu);
	return ok;
}
