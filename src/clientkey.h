/*
 * clientkey.h: the clients' Idempotency-Keys and the answers stored under
 * them (table api_keys, schema 0003_api.sql), below the HTTP face: the API
 * looks a key up and stores an answer inside the transaction of the effect
 * it answers for; maintenance prunes the expired ones.
 *
 * Invariants:
 *  - a key and its answer commit in the caller's transaction, with the
 *    effect they stand for, or not at all;
 *  - a key holds one answer and the SHA-256 of the request body it
 *    answered; an expired key is gone (deleted on sight or by pruning), so
 *    it can name a new request.
 */
#ifndef SD_CLIENTKEY_H
#define SD_CLIENTKEY_H

#include <stdint.h>

#include "result.h"

struct db;

/* What a key holds, when it holds something. */
struct clientkey_hit {
	int found;		/* 1: the key is in use and not expired */
	int same;		/* 1: with the same request hash */
	int status;		/* the stored answer's status (when same) */
	char *body;		/* the stored answer (when same; malloc'd, the caller frees) */
};

/*
 * clientkey_lookup: the answer stored for key, inside the caller's open
 * transaction.  [out] *hit (hit->body for the caller to free).  An expired
 * row is deleted so the key can be used again.
 */
enum sd_result clientkey_lookup(struct db *db, const char *key, const char *hash, int64_t now,
				struct clientkey_hit *hit);

/* clientkey_put: store status and body under key until now + ttl_ms,
 * inside the caller's transaction. */
enum sd_result clientkey_put(struct db *db, const char *key, const char *hash, int status,
			     const char *body, int64_t now, int64_t ttl_ms);

/* clientkey_prune: delete up to limit keys that expired at or before now,
 * oldest first, in a transaction of its own.  [out] *n deleted. */
enum sd_result clientkey_prune(struct db *db, int64_t now, int limit, int64_t *n);

#endif
