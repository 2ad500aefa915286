/*
 * ratelimit.h: token buckets, one per key (a door's token), in memory.
 *
 * Each key holds up to burst tokens and earns per_s of them a second; a
 * request takes one or is refused, with how long until one is earned.  A
 * door that scans a ticket a second never meets the limit, a group at the
 * door spends the burst, and a flood is held to per_s.  The buckets are
 * this process's alone (the HTTP listener's): a box's one listener sees
 * every request.  Keys past RATE_KEYS_MAX take the place of the one used
 * longest ago, whose bucket was full again by then or nearly.
 */
#ifndef SD_RATELIMIT_H
#define SD_RATELIMIT_H

#include <stdint.h>

#include "result.h"

#define RATE_KEYS_MAX 256
#define RATE_KEY_MAX 32		/* a key's bytes, without the NUL */

struct rate;

/* rate_new: buckets of burst tokens earning per_s a second ([out] *out,
 * rate_free); per_s 0: no limit at all (rate_take always allows). */
enum sd_result rate_new(int64_t per_s, int64_t burst, struct rate **out);
void rate_free(struct rate *r);

/* rate_new_per_min: the same, earning per_min tokens a minute. */
enum sd_result rate_new_per_min(int64_t per_min, int64_t burst, struct rate **out);

/* rate_take: one token of key's bucket at now_ms: 1 when it was there,
 * else 0 with [out] *wait_ms (may be NULL) until the next one.  Thread-safe. */
int rate_take(struct rate *r, const char *key, int64_t now_ms, int64_t *wait_ms);

#endif
