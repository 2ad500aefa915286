/*
 * token.h: the API's bearer tokens.
 *
 * init makes <state dir>/api.token (the operator's token: 32 random bytes
 * as 64 hex digits, mode 0600) and records its SHA-256 in the database; a
 * request's "Authorization: Bearer <token>" is admitted when its SHA-256 is
 * recorded there.  Several boxes sharing one PostgreSQL database admit each
 * other's tokens; no token is stored, logged or compared in the clear.
 */
#ifndef SD_TOKEN_H
#define SD_TOKEN_H

#include <stddef.h>

#include "result.h"

#define TOKEN_HEX 64			/* 32 random bytes, hex */

struct db;

/* token_path: "<state dir>/api.token" into buf. */
enum sd_result token_path(const char *db_path, const char *state_dir, char *buf, size_t size);

/*
 * token_ensure: what `init` makes: <state dir>/api.token when missing (put
 * atomically, so two racing inits keep one token; an existing file is left
 * as it is), and the file's SHA-256 recorded in the database at db_path.
 */
enum sd_result token_ensure(const char *db_path, const char *state_dir);

/* token_admits: [out] *ok 1 when hdr ("Bearer <token>") names a recorded
 * token, 0 when not (or hdr is NULL or malformed); SD_OK unless the
 * database failed. */
enum sd_result token_admits(struct db *db, const char *hdr, int *ok);

#endif
