/*
 * token.c: the API's bearer tokens: the operator's token file and the
 * database's record of every token as its SHA-256.
 *
 * Invariants:
 *  - a token is 32 random bytes as 64 hex digits; the database holds only
 *    its SHA-256 (api_tokens), so a copy of the database admits nobody;
 *  - <state dir>/api.token is the operator's copy of one token: mode 0600
 *    from creation, put atomically so that two racing inits keep one;
 *  - a request is admitted when the SHA-256 of its token is in api_tokens:
 *    every box that shares the database admits every box's token.
 */
#define _GNU_SOURCE
#include "token.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "code.h"
#include "db.h"
#include "fsio.h"
#include "tickets.h"


enum sd_result token_path(const char *db_path, const char *state_dir, char *buf, size_t size)
{
	char dir[PATH_MAX];
	enum sd_result r;

	if ((r = tickets_state_dir(db_path, state_dir, dir, sizeof dir)) != SD_OK)
		return r;
	if ((size_t)snprintf(buf, size, "%s/api.token", dir) >= size)
		return err_set(SD_INVALID, "state_dir: the path is too long");
	return SD_OK;
}

static enum sd_result file_ensure(const char *path, const char *state_dir)
{
	static const char hexd[] = "0123456789abcdef";
	unsigned char rnd[TOKEN_HEX / 2];
	char head[PATH_MAX + 32], hex[TOKEN_HEX];
	struct stat st;
	enum sd_result r;
	size_t got = 0, i;

	if (state_dir && *state_dir && (r = fsio_mkdirs(state_dir, 0)) != SD_OK)
		return r;
	if (stat(path, &st) == 0)
		return SD_OK;
	if (errno != ENOENT)
		return err_set(SD_IO, "cannot check token file %s: %s", path, strerror(errno));
	while (got < sizeof rnd) {
		ssize_t k = getrandom(rnd + got, sizeof rnd - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return err_set(SD_IO, "cannot draw random bytes: %s", strerror(errno));
		got += (size_t)k;
	}
	for (i = 0; i < sizeof rnd; i++) {
		hex[2 * i] = hexd[rnd[i] >> 4];
		hex[2 * i + 1] = hexd[rnd[i] & 15];
	}
	snprintf(head, sizeof head, "%s.tmp-%ld-", path, (long)getpid());
	/* 0600 from creation; link, not rename: two racing inits keep the first */
	r = fsio_put(path, hex, sizeof hex, head, "", 0600, FSIO_LINK, NULL);
	explicit_bzero(rnd, sizeof rnd);
	explicit_bzero(hex, sizeof hex);
	return r;
}

static enum sd_result token_load(const char *path, char token[TOKEN_HEX + 1])
{
	char buf[TOKEN_HEX + 2];
	struct stat st;
	enum sd_result r = SD_OK;
	int fd, i;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		if (errno == ENOENT)
			return err_set(SD_NOT_FOUND, "no API token file at %s (run init)", path);
		return err_set(SD_IO, "cannot open token file %s: %s", path, strerror(errno));
	}
	if (fstat(fd, &st) != 0) {
		r = err_set(SD_IO, "cannot check token file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077)) {
		r = err_set(SD_INVALID, "token file %s must be a regular file of mode 0600", path);
		goto out;
	}
	if (st.st_size != TOKEN_HEX && st.st_size != TOKEN_HEX + 1) {
		r = err_set(SD_INVALID, "token file %s must hold %d hex digits", path,
			    TOKEN_HEX);
		goto out;
	}
	if ((r = fsio_read_all(fd, buf, (size_t)st.st_size, path)) != SD_OK)
		goto out;
	for (i = 0; i < TOKEN_HEX; i++)
		if (!strchr("0123456789abcdefABCDEF", buf[i]) || !buf[i]) {
			r = err_set(SD_INVALID, "token file %s must hold %d hex digits", path,
				    TOKEN_HEX);
			goto out;
		}
	memcpy(token, buf, TOKEN_HEX);
	token[TOKEN_HEX] = '\0';
out:
	explicit_bzero(buf, sizeof buf);
	close(fd);
	return r;
}

static const char SQL_TOKEN_ADD[] =
	"INSERT INTO api_tokens (sha256, name, role, created_at) VALUES (?1, ?2, 'operator', ?3) "
	"ON CONFLICT (sha256) DO NOTHING";

/* register: the token's SHA-256 in api_tokens, once */
static enum sd_result token_register(const char *db_path, const char *token)
{
	char sha[CODE_SHA256_HEX + 1], host[128] = "", name[200];
	struct db *db = NULL;
	struct db_stmt *st;
	enum sd_result r;

	code_sha256_hex(token, TOKEN_HEX, sha);
	if (gethostname(host, sizeof host - 1) != 0)
		snprintf(host, sizeof host, "this box");
	snprintf(name, sizeof name, "api.token on %s", host);
	if ((r = db_open(db_path, 0, DB_SYNC_FULL, &db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_TOKEN_ADD))) {
		r = SD_DB;
	} else {
		db_bind_text(st, 1, sha);
		db_bind_text(st, 2, name);
		db_bind_int(st, 3, clock_now_ms());
		r = db_run(st);
	}
	db_close(db);
	return r;
}

enum sd_result token_ensure(const char *db_path, const char *state_dir)
{
	char path[PATH_MAX], token[TOKEN_HEX + 1];
	enum sd_result r;

	if ((r = token_path(db_path, state_dir, path, sizeof path)) != SD_OK ||
	    (r = file_ensure(path, state_dir)) != SD_OK || (r = token_load(path, token)) != SD_OK)
		return r;
	r = token_register(db_path, token);
	explicit_bzero(token, sizeof token);
	return r;
}

static const char SQL_TOKEN_FIND[] = "SELECT 1 FROM api_tokens WHERE sha256 = ?1";

/* "Bearer <token>": its SHA-256 looked up, so no comparison of the token
 * itself can leak it (every token is 64 digits: its length is no secret) */
enum sd_result token_admits(struct db *db, const char *hdr, int *ok)
{
	char sha[CODE_SHA256_HEX + 1];
	struct db_stmt *st;
	const char *p;
	size_t len;
	enum sd_result r;

	*ok = 0;
	if (!hdr || strncasecmp(hdr, "Bearer ", 7) != 0)
		return SD_OK;
	for (p = hdr + 7; *p == ' '; p++)
		;
	len = strlen(p);
	while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	if (len != TOKEN_HEX)
		return SD_OK;
	code_sha256_hex(p, len, sha);
	if (!(st = db_stmt(db, SQL_TOKEN_FIND)))
		return SD_DB;
	db_bind_text(st, 1, sha);
	r = db_step(st, ok);
	db_reset(st);
	return r;
}
