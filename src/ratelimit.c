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
	int64_t milli;			/* tokens, in thousandths */
	int64_t at;			/* when milli was last brought up to date */
};

struct rate {
	pthread_mutex_t mu;
	int64_t per_s, burst;
	struct bucket b[RATE_KEYS_MAX];
};

enum sd_result rate_new(int64_t per_s, int64_t burst, struct rate **out)
{
	struct rate *r;

	*out = NULL;
	if (per_s < 0 || burst < 1)
		return err_set(SD_INVALID, "a rate limit needs a rate of 0 or more and a burst of 1 "
			       "or more");
	if (!(r = calloc(1, sizeof *r)))
		return err_set(SD_NOMEM, "out of memory");
	pthread_mutex_init(&r->mu, NULL);
	r->per_s = per_s;
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
	oldest->milli = r->burst * 1000;
	oldest->at = now;
	return oldest;
}

int rate_take(struct rate *r, const char *key, int64_t now_ms, int64_t *wait_ms)
{
	struct bucket *b;
	int ok;

	if (wait_ms)
		*wait_ms = 0;
	if (!r || r->per_s == 0)
		return 1;
	pthread_mutex_lock(&r->mu);
	b = bucket_of(r, key, now_ms);
	if (now_ms > b->at) {
		b->milli += (now_ms - b->at) * r->per_s;
		if (b->milli > r->burst * 1000)
			b->milli = r->burst * 1000;
	}
	b->at = now_ms > b->at ? now_ms : b->at;
	if ((ok = b->milli >= 1000))
		b->milli -= 1000;
	else if (wait_ms)
		*wait_ms = (1000 - b->milli + r->per_s - 1) / r->per_s;
	pthread_mutex_unlock(&r->mu);
	return ok;
}
