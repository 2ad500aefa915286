/*
 * blob.c: the file store: immutable files under fixed keys in one folder.
 *
 * A put is: check the key, create the key's subfolders, write
 * "<target folder>/.tmp-<random>", fsync it, rename it over the key, fsync
 * the target folder (fsio_mkdirs and fsio_put do the file work).
 * Invariants:
 *  - every key passes blob_key_valid before any file operation, so no key
 *    reaches outside the store's folder;
 *  - a reader sees a whole old file or a whole new one: files appear only by
 *    rename(2) of a synced temp file in the same folder;
 *  - the ".tmp-" prefix is reserved for temp files, so a key never names one
 *    (and a crash's leftovers are recognisable);
 *  - a new subfolder is synced into its parent before a file goes into it, so
 *    a put that returned is reachable after a power cut.
 *
 * The same store can live in the database instead (blob_store = db, the
 * default on PostgreSQL, where several boxes share one database and no
 * folder): the blobs table, one row a key, written by an upsert on a
 * connection of the store's own (FULL durability: a put that returned is on
 * disk, as a file's would be), used by one thread at a time under a mutex.
 */
#define _GNU_SOURCE
#include "blob.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "db.h"
#include "fsio.h"
#include "log.h"

#define BLOB_TMP_PREFIX ".tmp-"

struct blob_store {
	char *dir;		/* the store's folder, without a trailing '/'; NULL: db */
	struct db *db;		/* blob_store = db: the connection, under mu */
	pthread_mutex_t mu;
};

/* blob_store's setting: 0 unset (by the engine), 'f' files, 'd' db */
static char where_set;

enum sd_result blob_where_set(const char *where)
{
	if (!where || !*where)
		where_set = 0;
	else if (strcmp(where, "files") == 0)
		where_set = 'f';
	else if (strcmp(where, "db") == 0)
		where_set = 'd';
	else
		return err_set(SD_INVALID, "blob_store must be files or db");
	return SD_OK;
}

int blob_where_db(const char *db_path)
{
	return where_set ? where_set == 'd' : db_target_is_pg(db_path);
}

enum sd_result blob_open_box(const char *db_path, const char *dir, struct blob_store **out)
{
	return blob_where_db(db_path) ? blob_open_db(db_path, out) : blob_open(dir, out);
}

enum sd_result blob_open_db(const char *db_path, struct blob_store **out)
{
	struct blob_store *s;
	enum sd_result r;

	*out = NULL;
	if (!(s = calloc(1, sizeof *s)))
		return err_set(SD_NOMEM, "out of memory opening the file store");
	pthread_mutex_init(&s->mu, NULL);
	if ((r = db_open(db_path, 0, DB_SYNC_FULL, &s->db)) != SD_OK) {
		blob_close(s);
		return r;
	}
	*out = s;
	return SD_OK;
}

static const char SQL_BLOB_PUT[] =
	"INSERT INTO blobs (key, data, bytes, created_at) VALUES (?1, ?2, ?3, ?4) "
	"ON CONFLICT (key) DO UPDATE SET data = excluded.data, bytes = excluded.bytes";

static enum sd_result db_put(struct blob_store *s, const char *key, const void *data, size_t len)
{
	struct db_stmt *st;
	enum sd_result r = SD_DB;

	pthread_mutex_lock(&s->mu);
	if ((st = db_stmt(s->db, SQL_BLOB_PUT))) {
		db_bind_text(st, 1, key);
		db_bind_blob(st, 2, data, len);
		db_bind_int(st, 3, (int64_t)len);
		db_bind_int(st, 4, clock_now_ms());
		r = db_run(st);
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

static const char SQL_BLOB_GET[] = "SELECT data, bytes FROM blobs WHERE key = ?1";

/* db_get: data NULL: only whether the key is there (SD_OK or SD_NOT_FOUND) */
static enum sd_result db_get(struct blob_store *s, const char *key, unsigned char **data,
			     size_t *len)
{
	struct db_stmt *st;
	enum sd_result r = SD_DB;
	const void *p;
	size_t n = 0;
	int row = 0;

	pthread_mutex_lock(&s->mu);
	if (!(st = db_stmt(s->db, SQL_BLOB_GET)))
		goto out;
	db_bind_text(st, 1, key);
	if ((r = db_step(st, &row)) != SD_OK)
		goto out;
	if (!row) {
		r = err_set(SD_NOT_FOUND, "no file under key '%.64s'", key);
		goto out;
	}
	p = db_col_blob(st, 0, &n);
	if (n != (size_t)db_col_int(st, 1)) {
		r = err_set(SD_IO, "the stored file under key '%.64s' is %zu bytes, not the %lld "
			    "it was written with", key, n, (long long)db_col_int(st, 1));
		goto out;
	}
	if (data) {
		if (!(*data = malloc(n ? n : 1))) {
			r = err_set(SD_NOMEM, "out of memory reading key '%.64s'", key);
			goto out;
		}
		if (n)
			memcpy(*data, p, n);
		*len = n;
	}
out:
	db_reset(st);
	pthread_mutex_unlock(&s->mu);
	return r;
}

/* ======================== the store ===================================== */

enum sd_result blob_open(const char *dir, struct blob_store **out)
{
	struct blob_store *s = NULL;
	size_t len;
	enum sd_result r;

	*out = NULL;
	if (!dir || !*dir)
		return err_set(SD_INVALID, "file store folder is empty");
	len = strlen(dir);
	while (len > 1 && dir[len - 1] == '/')
		len--;
	/* room for "<dir>/<longest key>" and a temp name beside it */
	if (len + 1 + BLOB_KEY_MAX + 32 >= PATH_MAX)
		return err_set(SD_INVALID, "file store folder path too long: %s", dir);
	s = calloc(1, sizeof *s);
	if (s)
		pthread_mutex_init(&s->mu, NULL);
	if (!s || !(s->dir = strndup(dir, len))) {
		r = err_set(SD_NOMEM, "out of memory opening the file store");
		goto out;
	}
	if ((r = fsio_mkdirs(s->dir, 0)) != SD_OK)
		goto out;
	*out = s;
	s = NULL;
out:
	blob_close(s);
	return r;
}

void blob_close(struct blob_store *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->mu);
	db_close(s->db);
	free(s->dir);
	free(s);
}

enum sd_result blob_key_valid(const char *key)
{
	const char *seg, *p;
	size_t len;

	if (!key || !*key)
		return err_set(SD_INVALID, "file key is empty");
	len = strlen(key);
	if (len > BLOB_KEY_MAX)
		return err_set(SD_INVALID, "file key is longer than %d characters", BLOB_KEY_MAX);
	for (p = key; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-' || c == '/'))
		{
			char q[80];

			/* quoted with controls blanked: the message stays one line */
			return err_set(SD_INVALID, "file key %s may hold only A-Z, a-z, 0-9, "
				       "'.', '_', '-' and '/'", log_quote(q, sizeof q, key));
		}
	}
	/* segment by segment: this is what keeps a key inside the store */
	for (seg = key;; seg = p + 1) {
		size_t n;

		p = strchr(seg, '/');
		n = p ? (size_t)(p - seg) : strlen(seg);
		if (n == 0)
			return err_set(SD_INVALID, "file key '%.64s' has an empty part (leading, "
				       "trailing or double '/')", key);
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return err_set(SD_INVALID, "file key '%.64s' has a '.' or '..' part", key);
		if (n >= sizeof BLOB_TMP_PREFIX - 1 &&
		    memcmp(seg, BLOB_TMP_PREFIX, sizeof BLOB_TMP_PREFIX - 1) == 0)
			return err_set(SD_INVALID, "file key '%.64s' uses the reserved prefix "
				       BLOB_TMP_PREFIX, key);
		if (!p)
			break;
	}
	return SD_OK;
}

enum sd_result blob_path(struct blob_store *s, const char *key, char *buf, size_t size)
{
	int n;

	if (blob_key_valid(key) != SD_OK)
		return SD_INVALID;
	n = s->dir ? snprintf(buf, size, "%s/%s", s->dir, key)
		   : snprintf(buf, size, "the database's blobs table, key %s", key);
	if (n < 0 || (size_t)n >= size)
		return err_set(SD_INVALID, "path for file key '%.64s' too long", key);
	return SD_OK;
}

enum sd_result blob_put(struct blob_store *s, const char *key, const void *data, size_t len)
{
	char path[PATH_MAX], head[PATH_MAX], *slash;
	enum sd_result r;

	if ((r = blob_path(s, key, path, sizeof path)) != SD_OK)
		return r;
	if (len > 0 && !data)
		return err_set(SD_INVALID, "no data for file key '%.64s'", key);
	if (!s->dir)
		return db_put(s, key, data, len);
	/* the key's folder; the store's own folder exists since blob_open */
	slash = strrchr(path, '/');
	*slash = '\0';
	r = fsio_mkdirs(path, strlen(s->dir) + 1);
	*slash = '/';
	if (r != SD_OK)
		return r;
	/* the temp file beside the key, under the prefix no key may use */
	snprintf(head, sizeof head, "%.*s/" BLOB_TMP_PREFIX, (int)(slash - path), path);
	return fsio_put(path, data, len, head, "", 0600, FSIO_RENAME, NULL);
}

enum sd_result blob_get(struct blob_store *s, const char *key, unsigned char **data,
			size_t *len)
{
	char path[PATH_MAX];
	unsigned char *buf = NULL;
	struct stat st;
	size_t size;
	enum sd_result r;
	int fd;

	*data = NULL;
	*len = 0;
	if ((r = blob_path(s, key, path, sizeof path)) != SD_OK)
		return r;
	if (!s->dir)
		return db_get(s, key, data, len);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return err_set(SD_NOT_FOUND, "no file under key '%.64s'", key);
		return err_set(SD_IO, "cannot open %s: %s", path, strerror(errno));
	}
	if (fstat(fd, &st) != 0) {
		r = err_set(SD_IO, "cannot check %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = err_set(SD_NOT_FOUND, "key '%.64s' names a folder, not a file", key);
		goto out;
	}
	/* files are never written in place (only replaced by rename), so the
	 * size of the file we opened stays what fstat said */
	size = (size_t)st.st_size;
	buf = malloc(size ? size : 1);
	if (!buf) {
		r = err_set(SD_NOMEM, "out of memory reading %s (%zu bytes)", path, size);
		goto out;
	}
	if ((r = fsio_read_all(fd, buf, size, path)) != SD_OK)
		goto out;
	*data = buf;
	*len = size;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return r;
}

int blob_exists(struct blob_store *s, const char *key)
{
	char path[PATH_MAX];
	struct stat st;

	if (blob_path(s, key, path, sizeof path) != SD_OK)
		return 0;
	if (!s->dir)
		return db_get(s, key, NULL, NULL) == SD_OK;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}
