/*
 * token.c: the API's bearer tokens: the operator's token file and the
 * database's record of every token as its SHA-256.
 *
 * Invariants:
 *  - a token is 32 random bytes as 64 hex digits; the database holds only
 *    its SHA-256 (api_tokens), so a copy of the database admits nobody;
 *  - <state dir>/api.token is the operator's copy of one token: mode 0600
 *    from creation, put atomically so that two racing inits keep one;
 *  - a request is admitted when the SHA-256 of its token is in api_tokens,
 *    not revoked and not expired, looked up on every request: every box
 *    that shares the database admits every box's token, and a revocation
 *    holds from its commit on, in every process;
 *  - the names of live tokens are unique (an index), so `token revoke NAME`
 *    names one.
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
#include "log.h"
#include "queue.h"
#include "statedir.h"
#include "text.h"
#include "timefmt.h"


enum sd_result token_path(const char *db_path, const char *state_dir, char *buf, size_t size)
{
	char dir[PATH_MAX];
	enum sd_result r;

	if ((r = statedir_path(db_path, state_dir, dir, sizeof dir)) != SD_OK)
		return r;
	if ((size_t)snprintf(buf, size, "%s/api.token", dir) >= size)
		return err_set(SD_INVALID, "state_dir: the path is too long");
	return SD_OK;
}

/* random_hex: a new token, 32 random bytes as 64 hex digits */
static enum sd_result random_hex(char token[TOKEN_HEX + 1])
{
	static const char hexd[] = "0123456789abcdef";
	unsigned char rnd[TOKEN_HEX / 2];
	size_t got = 0, i;

	while (got < sizeof rnd) {
		ssize_t k = getrandom(rnd + got, sizeof rnd - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return err_set(SD_IO, "cannot draw random bytes: %s", strerror(errno));
		got += (size_t)k;
	}
	for (i = 0; i < sizeof rnd; i++) {
		token[2 * i] = hexd[rnd[i] >> 4];
		token[2 * i + 1] = hexd[rnd[i] & 15];
	}
	token[TOKEN_HEX] = '\0';
	explicit_bzero(rnd, sizeof rnd);
	return SD_OK;
}

static enum sd_result file_ensure(const char *path, const char *state_dir)
{
	char head[PATH_MAX + 32], hex[TOKEN_HEX + 1];
	struct stat st;
	enum sd_result r;

	if (state_dir && *state_dir && (r = fsio_mkdirs(state_dir, 0)) != SD_OK)
		return r;
	if (stat(path, &st) == 0)
		return SD_OK;
	if (errno != ENOENT)
		return err_set(SD_IO, "cannot check token file %s: %s", path, strerror(errno));
	if ((r = random_hex(hex)) != SD_OK)
		return r;
	snprintf(head, sizeof head, "%s.tmp-%ld-", path, (long)getpid());
	/* 0600 from creation; link, not rename: two racing inits keep the first */
	r = fsio_put(path, hex, TOKEN_HEX, head, "", 0600, FSIO_LINK, NULL);
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
	"ON CONFLICT DO NOTHING";

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
	/* the digest's first digits keep two boxes on one host apart */
	snprintf(name, sizeof name, "api.token on %.100s %.8s", host, sha);
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

/* ======================== roles ========================================== */

static const char *const role_names[TOKEN_ROLES] = { "operator", "box_office", "door",
						     "monitor", "worker" };

const char *token_role_name(int role)
{
	return role >= 0 && role < TOKEN_ROLES ? role_names[role] : "";
}

int token_role_parse(const char *s)
{
	int i;

	for (i = 0; s && i < TOKEN_ROLES; i++)
		if (strcmp(s, role_names[i]) == 0)
			return i;
	return TOKEN_NONE;
}

/* ======================== admitting a request ============================ */

#define TOKEN_FIND_SQL(where) \
	"SELECT name, role, event_id, expires_at, revoked_at, coalesce(last_used_at, 0), sha256 " \
	"FROM api_tokens WHERE " where
static const char SQL_TOKEN_FIND[] = TOKEN_FIND_SQL("sha256 = ?1");
/* by id: the SHA-256s that begin with it, in order ("id" < each < "id" "g") */
static const char SQL_TOKEN_FIND_ID[] =
	TOKEN_FIND_SQL("sha256 > ?1 AND sha256 < ?1 || 'g' ORDER BY sha256 LIMIT 2");
static const char SQL_TOKEN_QUEUES[] =
	"SELECT pattern FROM token_queues WHERE sha256 = ?1 ORDER BY pattern";
static const char SQL_TOKEN_USED[] =
	"UPDATE api_tokens SET last_used_at = ?2 WHERE sha256 = ?1 AND "
	"(last_used_at IS NULL OR last_used_at <= ?2 - ?3)";

/* bearer_sha: the SHA-256 of the token in "Bearer <token>", so no
 * comparison of the token itself can leak it (every token is 64 digits:
 * its length is no secret).  TOKEN_OK, or why the header names none. */
static int bearer_sha(const char *hdr, char sha[CODE_SHA256_HEX + 1])
{
	const char *p;
	size_t len, i;

	if (!hdr || !*hdr)
		return TOKEN_MISSING;
	if (strncasecmp(hdr, "Bearer ", 7) != 0)
		return TOKEN_MALFORMED;
	for (p = hdr + 7; *p == ' '; p++)
		;
	len = strlen(p);
	while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	if (len != TOKEN_HEX)
		return TOKEN_MALFORMED;
	for (i = 0; i < len; i++)
		if (!strchr("0123456789abcdef", p[i]) || !p[i])
			return TOKEN_MALFORMED;
	code_sha256_hex(p, len, sha);
	return TOKEN_OK;
}

/* mark_used: last_used_at, at most every TOKEN_USED_EVERY_MS (the caller
 * read it: a request in between writes nothing, and so never waits for the
 * write lock behind other writers' flushes); a failure (a busy or full
 * database) costs the record, never the request */
static void mark_used(struct db *db, const char *sha, int64_t now)
{
	struct db_stmt *st = db_stmt(db, SQL_TOKEN_USED);

	if (!st)
		return;
	db_bind_text(st, 1, sha);
	db_bind_int(st, 2, now);
	db_bind_int(st, 3, TOKEN_USED_EVERY_MS);
	if (db_run(st) != SD_OK)
		log_event(LOG_DEBUG, "token use not recorded", "err=%s", err_msg());
}

/* worker_queues: a worker grant's queue patterns */
static enum sd_result worker_queues(struct db *db, const char *sha, struct token_grant *g)
{
	struct db_stmt *st = db_stmt(db, SQL_TOKEN_QUEUES);
	enum sd_result r = SD_OK;

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, sha);
	while (g->n_queues < TOKEN_QUEUES_MAX && db_next(st, &r))
		snprintf(g->queues[g->n_queues++], sizeof g->queues[0], "%s", db_col_text(st, 0));
	db_reset(st);
	return r;
}

/* admit: the grant of the one row st finds (bound, not stepped), or why
 * not; two rows (two tokens whose ids collide) admit neither */
static enum sd_result admit(struct db *db, struct db_stmt *st, int64_t now, struct token_grant *g,
			    int *why)
{
	char sha[CODE_SHA256_HEX + 1] = "";
	enum sd_result r;
	int64_t used = 0;
	int row = 0;

	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (!row)
		*why = TOKEN_UNKNOWN;
	else if (!db_col_is_null(st, 4))
		*why = TOKEN_REVOKED;
	else if (!db_col_is_null(st, 3) && db_col_int(st, 3) <= now)
		*why = TOKEN_EXPIRED;
	else if ((g->role = token_role_parse(db_col_text(st, 1))) == TOKEN_NONE)
		*why = TOKEN_UNKNOWN;	/* a role this binary does not know */
	else {
		snprintf(g->name, sizeof g->name, "%s", db_col_text(st, 0));
		snprintf(sha, sizeof sha, "%s", db_col_text(st, 6));
		snprintf(g->id, sizeof g->id, "%.*s", TOKEN_ID_LEN, sha);
		g->event_id = db_col_is_null(st, 2) ? 0 : db_col_int(st, 2);
		used = db_col_int(st, 5);
		if (db_step(st, &row) != SD_OK || row)
			*why = TOKEN_UNKNOWN;
	}
	db_reset(st);
	if (*why == TOKEN_OK && g->role == TOKEN_WORKER && (r = worker_queues(db, sha, g)) != SD_OK)
		return r;
	if (*why != TOKEN_OK) {
		g->role = TOKEN_NONE;
		return SD_OK;
	}
	if (used <= now - TOKEN_USED_EVERY_MS)
		mark_used(db, sha, now);
	return SD_OK;
}

enum sd_result token_lookup(struct db *db, const char *hdr, int64_t now, struct token_grant *g,
			    int *why)
{
	char sha[CODE_SHA256_HEX + 1];
	struct db_stmt *st;

	memset(g, 0, sizeof *g);
	g->role = TOKEN_NONE;
	if ((*why = bearer_sha(hdr, sha)) != TOKEN_OK)
		return SD_OK;
	if (!(st = db_stmt(db, SQL_TOKEN_FIND)))
		return SD_DB;
	db_bind_text(st, 1, sha);
	return admit(db, st, now, g, why);
}

enum sd_result token_lookup_id(struct db *db, const char *id, int64_t now, struct token_grant *g,
			       int *why)
{
	struct db_stmt *st;
	size_t i;

	memset(g, 0, sizeof *g);
	g->role = TOKEN_NONE;
	*why = TOKEN_MALFORMED;
	for (i = 0; i < TOKEN_ID_LEN; i++)
		if (!id[i] || !strchr("0123456789abcdef", id[i]))
			return SD_OK;
	if (id[i])
		return SD_OK;
	*why = TOKEN_OK;
	if (!(st = db_stmt(db, SQL_TOKEN_FIND_ID)))
		return SD_DB;
	db_bind_text(st, 1, id);
	return admit(db, st, now, g, why);
}

int token_queue_allowed(const struct token_grant *g, const char *name)
{
	int i;

	if (g->role != TOKEN_WORKER)
		return 0;
	for (i = 0; i < g->n_queues; i++) {
		const char *p = g->queues[i];
		size_t n = strlen(p);

		if (n && p[n - 1] == '*' ? strncmp(p, name, n - 1) == 0 : strcmp(p, name) == 0)
			return 1;
	}
	return 0;
}

void token_id_of(const char *token, char id[TOKEN_ID_LEN + 1])
{
	char sha[CODE_SHA256_HEX + 1];

	code_sha256_hex(token, strlen(token), sha);
	snprintf(id, TOKEN_ID_LEN + 1, "%.*s", TOKEN_ID_LEN, sha);
}

/* ======================== token add, ls, revoke ========================== */

static const char SQL_TOKEN_NEW[] =
	"INSERT INTO api_tokens (sha256, name, role, event_id, created_at, expires_at) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING";
static const char SQL_EVENT_THERE[] = "SELECT starts_at FROM events WHERE id = ?1";
static const char SQL_TOKEN_LIST[] =
	"SELECT name, role, event_id, created_at, expires_at, last_used_at, revoked_at "
	"FROM api_tokens WHERE ?1 = 1 OR (revoked_at IS NULL AND "
	"(expires_at IS NULL OR expires_at > ?2)) ORDER BY name, created_at";
static const char SQL_TOKEN_REVOKE[] =
	"UPDATE api_tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at IS NULL";

static enum sd_result token_new_valid(const struct token_new *t, int64_t now)
{
	if (!t->name || !*t->name || strlen(t->name) > TOKEN_NAME_MAX)
		return err_set(SD_INVALID, "a token's name must be 1 to %d bytes", TOKEN_NAME_MAX);
	if (text_field_valid("name", t->name) != SD_OK)
		return SD_INVALID;
	if (t->role < 0 || t->role >= TOKEN_ROLES)
		return err_set(SD_INVALID, "the role must be operator, box_office, door, monitor "
			       "or worker");
	if (t->event_id < 0 || ((t->event_id || t->all_events) && t->role != TOKEN_DOOR))
		return err_set(SD_INVALID, "only a door token is bound to an event");
	if (t->role == TOKEN_DOOR && !t->event_id && !t->all_events)
		return err_set(SD_INVALID, "a door token needs the event it admits (--event ID), "
			       "or --all-events for a door that admits every event's tickets at "
			       "any time and reads every event's counts");
	if (t->event_id && t->all_events)
		return err_set(SD_INVALID, "a door token is for one event or for all, not both");
	if (t->expires_at && t->expires_at <= now)
		return err_set(SD_INVALID, "the expiry must be in the future");
	if (t->queues && t->role != TOKEN_WORKER)
		return err_set(SD_INVALID, "only a worker token is given queues");
	return SD_OK;
}

static const char SQL_TOKEN_QUEUE_ADD[] =
	"INSERT INTO token_queues (sha256, pattern) VALUES (?1, ?2) ON CONFLICT DO NOTHING";

/* queue_pattern_valid: a queue name, or the start of one and '*' */
static enum sd_result queue_pattern_valid(const char *p, size_t n)
{
	char name[TOKEN_QUEUE_PATTERN_MAX + 1];

	if (n == 1 && p[0] == '*')
		return SD_OK;
	if (n < 1 || n > TOKEN_QUEUE_PATTERN_MAX)
		return err_set(SD_INVALID, "--queues: a queue name or prefix is 1 to %d "
			       "characters", TOKEN_QUEUE_PATTERN_MAX - 1);
	snprintf(name, sizeof name, "%.*s", (int)(p[n - 1] == '*' ? n - 1 : n), p);
	if (queue_sqs_name_valid(name) != SD_OK)
		return err_set(SD_INVALID, "--queues: '%s': %s", name, err_msg());
	return SD_OK;
}

/* queues_add: a worker token's queue patterns, in token_add's transaction */
static enum sd_result queues_add(struct db *db, const char *sha, const char *list)
{
	const char *p = list ? list : "*";
	enum sd_result r;
	int n = 0;

	while (*p) {
		size_t len = strcspn(p, ",");
		struct db_stmt *st;
		char pat[TOKEN_QUEUE_PATTERN_MAX + 1];

		if ((r = queue_pattern_valid(p, len)) != SD_OK)
			return r;
		if (++n > TOKEN_QUEUES_MAX)
			return err_set(SD_INVALID, "--queues: at most %d names", TOKEN_QUEUES_MAX);
		snprintf(pat, sizeof pat, "%.*s", (int)len, p);
		if (!(st = db_stmt(db, SQL_TOKEN_QUEUE_ADD)))
			return SD_DB;
		db_bind_text(st, 1, sha);
		db_bind_text(st, 2, pat);
		if ((r = db_run(st)) != SD_OK)
			return r;
		p += len;
		if (*p == ',' && !*++p)
			return err_set(SD_INVALID, "--queues: a name is empty");
	}
	return n ? SD_OK : err_set(SD_INVALID, "--queues: no queue named");
}

/* door_event: the token's event is there, and the token lives until its
 * doors open: one that expires before could never admit anyone */
static enum sd_result door_event(struct db *db, const struct token_new *t)
{
	struct db_stmt *st = db_stmt(db, SQL_EVENT_THERE);
	enum sd_result r;
	int64_t opens = 0;
	char when[64];
	int row = 0;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, t->event_id);
	if ((row = db_next(st, &r)))
		opens = db_col_int(st, 0) - t->doors_open_before_ms;
	db_reset(st);
	if (r == SD_OK && !row)
		return err_set(SD_NOT_FOUND, "no event %lld", (long long)t->event_id);
	if (r == SD_OK && t->expires_at && t->expires_at <= opens) {
		timefmt_format(opens, when, sizeof when);
		r = err_set(SD_INVALID, "the token would expire before the doors of event %lld "
			    "open (%s), so it could never admit anyone: give it a longer "
			    "--expires-in", (long long)t->event_id, when);
	}
	return r;
}

enum sd_result token_add(struct db *db, const struct token_new *t, int64_t now,
			 char token[TOKEN_HEX + 1])
{
	char sha[CODE_SHA256_HEX + 1];
	struct db_stmt *st;
	enum sd_result r;

	token[0] = '\0';
	if ((r = token_new_valid(t, now)) != SD_OK || (r = random_hex(token)) != SD_OK)
		return r;
	code_sha256_hex(token, TOKEN_HEX, sha);
	if ((r = db_begin(db)) != SD_OK)
		goto out;
	if (t->event_id && (r = door_event(db, t)) != SD_OK)
		goto end;
	if (!(st = db_stmt(db, SQL_TOKEN_NEW))) {
		r = SD_DB;
		goto end;
	}
	db_bind_text(st, 1, sha);
	db_bind_text(st, 2, t->name);
	db_bind_text(st, 3, token_role_name(t->role));
	if (t->event_id)
		db_bind_int(st, 4, t->event_id);
	else
		db_bind_null(st, 4);
	db_bind_int(st, 5, now);
	if (t->expires_at)
		db_bind_int(st, 6, t->expires_at);
	else
		db_bind_null(st, 6);
	if ((r = db_run(st)) == SD_OK && db_changes(db) != 1)
		r = err_set(SD_INVALID, "a token named '%s' exists already (token revoke it, or "
			    "choose another name)", t->name);
	if (r == SD_OK && t->role == TOKEN_WORKER)
		r = queues_add(db, sha, t->queues);
end:
	r = db_end(db, r);
out:
	if (r != SD_OK)
		explicit_bzero(token, TOKEN_HEX + 1);
	return r;
}

static int64_t col_or_0(struct db_stmt *st, int i)
{
	return db_col_is_null(st, i) ? 0 : db_col_int(st, i);
}

enum sd_result token_each(struct db *db, int all, int64_t now,
			  void (*fn)(const struct token_row *row, void *arg), void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_TOKEN_LIST);
	struct token_row t;
	enum sd_result r;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, all ? 1 : 0);
	db_bind_int(st, 2, now);
	while (db_next(st, &r)) {
		memset(&t, 0, sizeof t);
		snprintf(t.name, sizeof t.name, "%s", db_col_text(st, 0));
		t.role = token_role_parse(db_col_text(st, 1));
		t.event_id = col_or_0(st, 2);
		t.created_at = col_or_0(st, 3);
		t.expires_at = col_or_0(st, 4);
		t.last_used_at = col_or_0(st, 5);
		t.revoked_at = col_or_0(st, 6);
		fn(&t, arg);
	}
	db_reset(st);
	return r;
}

enum sd_result token_revoke(struct db *db, const char *name, int64_t now)
{
	struct db_stmt *st = db_stmt(db, SQL_TOKEN_REVOKE);
	enum sd_result r;

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, name);
	db_bind_int(st, 2, now);
	if ((r = db_run(st)) == SD_OK && db_changes(db) == 0)
		r = err_set(SD_NOT_FOUND, "no live token is named '%s' (token ls lists them)", name);
	return r;
}
