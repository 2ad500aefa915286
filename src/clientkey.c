/*
 * clientkey.c: the clients' Idempotency-Keys (see clientkey.h).  SQL here
 * touches only api_keys.
 */
#define _GNU_SOURCE
#include "clientkey.h"

#include <stdlib.h>
#include <string.h>

#include "db.h"

static const char SQL_KEY_GET[] =
	"SELECT request_hash, status, body FROM api_keys WHERE key = ?1 AND expires_at > ?2";
static const char SQL_KEY_DROP_EXPIRED[] =
	"DELETE FROM api_keys WHERE key = ?1 AND expires_at <= ?2";
static const char SQL_KEY_PUT[] =
	"INSERT INTO api_keys (key, request_hash, status, body, created_at, expires_at) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
static const char SQL_KEY_PRUNE[] =
	"DELETE FROM api_keys WHERE id IN (SELECT id FROM api_keys WHERE expires_at <= ?1 "
	"ORDER BY expires_at LIMIT ?2)";

enum sd_result clientkey_lookup(struct db *db, const char *key, const char *hash, int64_t now,
				struct clientkey_hit *hit)
{
	struct db_stmt *st = db_stmt(db, SQL_KEY_GET);
	enum sd_result r;
	int row = 0;

	memset(hit, 0, sizeof *hit);
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, key);
	db_bind_int(st, 2, now);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (row) {
		hit->found = 1;
		if (strcmp(db_col_text(st, 0), hash) == 0) {
			const char *body = db_col_text(st, 2);

			hit->same = 1;
			hit->status = (int)db_col_int(st, 1);
			if (!(hit->body = strdup(body ? body : ""))) {
				db_reset(st);
				return err_set(SD_NOMEM, "out of memory");
			}
		}
		db_reset(st);
		return SD_OK;
	}
	db_reset(st);
	if (!(st = db_stmt(db, SQL_KEY_DROP_EXPIRED)))
		return SD_DB;
	db_bind_text(st, 1, key);
	db_bind_int(st, 2, now);
	return db_run(st);
}

enum sd_result clientkey_put(struct db *db, const char *key, const char *hash, int status,
			     const char *body, int64_t now, int64_t ttl_ms)
{
	struct db_stmt *st = db_stmt(db, SQL_KEY_PUT);

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, key);
	db_bind_text(st, 2, hash);
	db_bind_int(st, 3, status);
	db_bind_text(st, 4, body);
	db_bind_int(st, 5, now);
	db_bind_int(st, 6, now + ttl_ms);
	return db_run(st);
}

enum sd_result clientkey_prune(struct db *db, int64_t now, int limit, int64_t *n)
{
	struct db_stmt *st;
	enum sd_result r;

	*n = 0;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_KEY_PRUNE))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, now);
	db_bind_int(st, 2, limit > 0 ? limit : 1000);
	if ((r = db_run(st)) == SD_OK)
		*n = db_changes(db);
out:
	return db_end(db, r);
}
