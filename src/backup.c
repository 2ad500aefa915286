/*
 * backup.c: a running box's backup, the check of one, and a box made from one.
 *
 * A backup is a folder:
 *   stagedoor.db                  the database: SQLite's online backup API (a
 *                                 consistent snapshot while others write),
 *                                 made one file (journal_mode DELETE)
 *   state/ticket.key              the key that signs ticket codes (0600)
 *   state/api.token               the API token (0600)
 *   state/blobs/...               the ticket PDFs
 *   state/tls/...                 the box CA and the server certificate, with
 *                                 their keys (those on the box): a restored box
 *                                 keeps the CA its devices trust
 *   manifest.json                 {"format", "created_at_ms", "source",
 *                                  "schema_version", "files": [{"path",
 *                                  "size", "sha256"}]}: every file above
 *
 * Invariants:
 *  - a backup folder is only ever seen whole: it is built under
 *    "<dest>.partial-<pid>", each file and folder fsynced, then renamed into
 *    place and its parent fsynced;
 *  - the database is copied before the PDFs, so every PDF the copy names as
 *    stored is in the backup (a PDF is written before its row says so);
 *  - nothing is ever overwritten: backup files and restored files are made
 *    with O_EXCL, mode 0600, folders 0700;
 *  - the maildir is not in a backup: a sent message lives at the provider,
 *    and the copy's email_sends rows say which were sent.
 */
#define _GNU_SOURCE
#include "backup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "code.h"
#include "failpoint.h"
#include "fsio.h"
#include "idem.h"
#include "queue.h"
#include "statedir.h"

#define BACKUP_DB "stagedoor.db"

/* ======================== files ========================================== */

/* copy_file: src to a new file dst (O_EXCL, 0600), fsynced. */
static enum sd_result copy_file(const char *src, const char *dst)
{
	unsigned char buf[65536];
	enum sd_result r = SD_OK;
	int in, out;
	ssize_t n;

	if ((in = open(src, O_RDONLY | O_CLOEXEC)) < 0)
		return err_set(SD_IO, "cannot read %s: %s", src, strerror(errno));
	if ((out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
		r = err_set(errno == EEXIST ? SD_INVALID : SD_IO, "cannot create %s: %s", dst,
			    strerror(errno));
		close(in);
		return r;
	}
	while (r == SD_OK && (n = read(in, buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = err_set(SD_IO, "cannot read %s: %s", src, strerror(errno));
		else
			r = fsio_write_all(out, buf, (size_t)n, dst);
	}
	if (r == SD_OK && fsync(out) != 0)
		r = err_set(SD_IO, "cannot fsync %s: %s", dst, strerror(errno));
	close(in);
	if (close(out) != 0 && r == SD_OK)
		r = err_set(SD_IO, "cannot write %s: %s", dst, strerror(errno));
	if (r != SD_OK)
		unlink(dst);
	return r;
}

/* A relative path from a manifest: no "..", no leading '/', no empty part. */
static int rel_path_ok(const char *p)
{
	const char *s;

	if (!*p || *p == '/' || strlen(p) >= PATH_MAX / 2)
		return 0;
	for (s = p; *s; s = strchr(s, '/') ? strchr(s, '/') + 1 : s + strlen(s))
		if (s[0] == '/' || (s[0] == '.' && (s[1] == '/' || !s[1])) ||
		    (s[0] == '.' && s[1] == '.' && (s[2] == '/' || !s[2])))
			return 0;
	return 1;
}

/* ======================== the manifest ==================================== */

/* add_file: the file dir/rel into the manifest's list. */
static enum sd_result add_file(json_t *files, const char *dir, const char *rel,
			       struct backup_info *info)
{
	char path[PATH_MAX], sha[CODE_SHA256_HEX + 1];
	int64_t size;
	enum sd_result r;

	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, rel) >= sizeof path)
		return err_set(SD_INVALID, "path too long: %s/%s", dir, rel);
	if ((r = code_sha256_file(path, sha, &size)) != SD_OK)
		return r;
	if (json_array_append_new(files, json_pack("{s:s, s:I, s:s}", "path", rel, "size",
						   (json_int_t)size, "sha256", sha)) != 0)
		return err_set(SD_NOMEM, "out of memory");
	info->files++;
	info->bytes += size;
	return SD_OK;
}

/* copy_tree: every regular file below src/rel into root/prefix/rel
 * (folders made 0700 and fsynced), each listed as prefix/rel/... */
static enum sd_result copy_tree(const char *src, const char *root, const char *prefix,
				const char *rel, json_t *files, struct backup_info *info)
{
	char from[PATH_MAX * 3], to[PATH_MAX * 3], sub[PATH_MAX], listed[PATH_MAX * 2];
	enum sd_result r = SD_OK;
	struct dirent *de;
	DIR *d;

	snprintf(from, sizeof from, "%s/%s", src, rel);
	snprintf(to, sizeof to, "%s/%s%s", root, prefix, rel);
	if (!(d = opendir(from)))
		return errno == ENOENT ? SD_OK : err_set(SD_IO, "cannot read %s: %s", from,
							 strerror(errno));
	if ((r = fsio_mkdirs(to, strlen(root) + 1)) != SD_OK)
		goto out;
	while (r == SD_OK && (de = readdir(d))) {
		struct stat sb;

		if (de->d_name[0] == '.')	/* ., .., and temp files being put */
			continue;
		snprintf(sub, sizeof sub, "%s/%s", rel, de->d_name);
		snprintf(from, sizeof from, "%s/%s", src, sub);
		if (lstat(from, &sb) != 0)
			continue;	/* gone meanwhile */
		if (S_ISDIR(sb.st_mode))
			r = copy_tree(src, root, prefix, sub, files, info);
		else if (S_ISREG(sb.st_mode)) {
			snprintf(listed, sizeof listed, "%s%s", prefix, sub);
			snprintf(to, sizeof to, "%s/%s", root, listed);
			if ((r = copy_file(from, to)) == SD_OK)
				r = add_file(files, root, listed, info);
		}
	}
	if (r == SD_OK) {
		snprintf(to, sizeof to, "%s/%s%s", root, prefix, rel);
		r = fsio_sync_dir(to);
	}
out:
	closedir(d);
	return r;
}

static enum sd_result write_manifest(const char *dir, json_t *m)
{
	char path[PATH_MAX + 64], *text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	enum sd_result r;
	int fd;

	if (!text)
		return err_set(SD_NOMEM, "out of memory");
	snprintf(path, sizeof path, "%s/%s", dir, BACKUP_MANIFEST);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		free(text);
		return err_set(SD_IO, "cannot create %s: %s", path, strerror(errno));
	}
	r = fsio_write_all(fd, text, strlen(text), path);
	if (r == SD_OK && (fsync(fd) != 0 || close(fd) != 0))
		r = err_set(SD_IO, "cannot write %s: %s", path, strerror(errno));
	else if (r != SD_OK)
		close(fd);
	free(text);
	return r;
}

/* ======================== backup ========================================== */

static void parent_of(const char *path, char *buf, size_t size)
{
	char *slash;

	snprintf(buf, size, "%s", path);
	if (!(slash = strrchr(buf, '/')))
		snprintf(buf, size, ".");
	else
		*(slash == buf ? slash + 1 : slash) = '\0';
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void backup_remove(const char *dir)
{
	/* depth first, links not followed */
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

enum sd_result backup_make(struct db *db, const char *db_path, const char *state_dir,
			   const char *dest, struct backup_info *info)
{
	char tmp[PATH_MAX], state[PATH_MAX], path[PATH_MAX + 64], up[PATH_MAX];
	static const char *const secrets[] = { "ticket.key", "api.token" };
	struct backup_info local = { 0 };
	json_t *m = NULL, *files;
	struct stat sb;
	enum sd_result r;
	size_t i;

	if (!info)
		info = &local;
	memset(info, 0, sizeof *info);
	if (!dest || !*dest)
		return err_set(SD_INVALID, "backup: no destination folder given");
	if (lstat(dest, &sb) == 0)
		return err_set(SD_INVALID, "backup: %s exists; a backup never overwrites", dest);
	if ((size_t)snprintf(tmp, sizeof tmp, "%s.partial-%ld", dest, (long)getpid()) >= sizeof tmp ||
	    (r = statedir_path(db_path, state_dir, state, sizeof state)) != SD_OK)
		return err_set(SD_INVALID, "backup: the path is too long");
	parent_of(dest, up, sizeof up);
	if ((r = fsio_mkdirs(up, 0)) != SD_OK)
		return r;
	if (mkdir(tmp, 0700) != 0)
		return err_set(SD_IO, "backup: cannot make %s: %s", tmp, strerror(errno));
	info->created_at_ms = clock_now_ms();
	info->schema_version = db_schema_version(db);
	m = json_pack("{s:i, s:I, s:s, s:i, s:[]}", "format", BACKUP_FORMAT, "created_at_ms",
		      (json_int_t)info->created_at_ms, "source", db_path, "schema_version",
		      info->schema_version, "files");
	if (!m || !(files = json_object_get(m, "files"))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto fail;
	}
	/* the database first: the PDFs it names as stored exist before it does */
	snprintf(path, sizeof path, "%s/%s", tmp, BACKUP_DB);
	if ((r = db_backup(db, path)) != SD_OK || (r = add_file(files, tmp, BACKUP_DB, info)) != SD_OK)
		goto fail;
	failpoint(FP_BACKUP_AFTER_DB);
	snprintf(path, sizeof path, "%s/state", tmp);
	if (mkdir(path, 0700) != 0) {
		r = err_set(SD_IO, "backup: cannot make %s: %s", path, strerror(errno));
		goto fail;
	}
	for (i = 0; i < sizeof secrets / sizeof secrets[0]; i++) {
		char from[PATH_MAX + 16], to[PATH_MAX + 16], rel[64];

		snprintf(from, sizeof from, "%s/%s", state, secrets[i]);
		if (access(from, F_OK) != 0)
			continue;	/* a box without an API token yet */
		snprintf(to, sizeof to, "%s/state/%s", tmp, secrets[i]);
		snprintf(rel, sizeof rel, "state/%s", secrets[i]);
		if ((r = copy_file(from, to)) != SD_OK || (r = add_file(files, tmp, rel, info)) != SD_OK)
			goto fail;
	}
	if ((r = copy_tree(state, tmp, "state/", "tls", files, info)) != SD_OK ||
	    (r = copy_tree(state, tmp, "state/", "blobs", files, info)) != SD_OK ||
	    (r = fsio_sync_dir(path)) != SD_OK || (r = write_manifest(tmp, m)) != SD_OK ||
	    (r = fsio_sync_dir(tmp)) != SD_OK)
		goto fail;
	info->files++;	/* the manifest itself */
	if (rename(tmp, dest) != 0) {
		r = err_set(SD_IO, "backup: cannot rename %s to %s: %s", tmp, dest, strerror(errno));
		goto fail;
	}
	json_decref(m);
	return fsio_sync_dir(up);
fail:
	json_decref(m);
	backup_remove(tmp);
	return r;
}

/* ======================== verify ========================================== */

/* count_files: regular files below dir (recursively). */
static int count_files(const char *dir)
{
	char sub[PATH_MAX];
	struct dirent *de;
	struct stat sb;
	int n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name);
		if (lstat(sub, &sb) != 0)
			continue;
		n += S_ISDIR(sb.st_mode) ? count_files(sub) : 1;
	}
	closedir(d);
	return n;
}

/* load_manifest: dest's manifest, its format checked.  Caller decrefs. */
static enum sd_result load_manifest(const char *dest, json_t **out)
{
	char path[PATH_MAX];
	json_error_t je;
	json_t *m;

	*out = NULL;
	snprintf(path, sizeof path, "%s/%s", dest, BACKUP_MANIFEST);
	if (!(m = json_load_file(path, 0, &je)))
		return err_set(SD_INVALID, "%s: no readable manifest (%s)", dest, je.text);
	if (json_integer_value(json_object_get(m, "format")) != BACKUP_FORMAT ||
	    !json_is_array(json_object_get(m, "files"))) {
		json_decref(m);
		return err_set(SD_INVALID, "%s: not a Stagedoor backup manifest (format %d)", path,
			       BACKUP_FORMAT);
	}
	*out = m;
	return SD_OK;
}

enum sd_result backup_verify(const char *dest, struct backup_info *info)
{
	struct backup_info local = { 0 };
	json_t *m = NULL, *f;
	enum sd_result r;
	size_t i;
	int version = -1, has_db = 0;

	if (!info)
		info = &local;
	memset(info, 0, sizeof *info);
	if ((r = load_manifest(dest, &m)) != SD_OK)
		return r;
	json_array_foreach(json_object_get(m, "files"), i, f) {
		const char *rel = json_string_value(json_object_get(f, "path"));
		const char *want = json_string_value(json_object_get(f, "sha256"));
		char path[PATH_MAX * 2], sha[CODE_SHA256_HEX + 1];
		int64_t size;

		if (!rel || !want || !rel_path_ok(rel)) {
			r = err_set(SD_INVALID, "%s: manifest entry %zu is malformed", dest, i);
			goto out;
		}
		snprintf(path, sizeof path, "%s/%s", dest, rel);
		if (code_sha256_file(path, sha, &size) != SD_OK) {
			r = err_set(SD_INVALID, "%s: %s is missing or unreadable", dest, rel);
			goto out;
		}
		if (size != json_integer_value(json_object_get(f, "size")) || strcmp(sha, want)) {
			r = err_set(SD_INVALID, "%s: %s is not the file that was backed up (size "
				    "or SHA-256 differs)", dest, rel);
			goto out;
		}
		has_db |= !strcmp(rel, BACKUP_DB);
		info->files++;
		info->bytes += size;
	}
	info->files++;	/* the manifest */
	if (!has_db) {
		r = err_set(SD_INVALID, "%s: the manifest lists no %s", dest, BACKUP_DB);
		goto out;
	}
	if (count_files(dest) != info->files) {
		r = err_set(SD_INVALID, "%s holds files its manifest does not list", dest);
		goto out;
	}
	{
		char path[PATH_MAX];

		snprintf(path, sizeof path, "%s/%s", dest, BACKUP_DB);
		if ((r = db_file_check(path, &version)) != SD_OK) {
			r = err_set(SD_INVALID, "%s: %s", dest, err_msg());
			goto out;
		}
	}
	info->schema_version = version;
	info->created_at_ms = json_integer_value(json_object_get(m, "created_at_ms"));
	if (version != json_integer_value(json_object_get(m, "schema_version")))
		r = err_set(SD_INVALID, "%s: the database has schema %d, the manifest says %lld",
			    dest, version,
			    (long long)json_integer_value(json_object_get(m, "schema_version")));
out:
	json_decref(m);
	return r;
}

/* ======================== restore ========================================= */

enum sd_result backup_restore(const char *dest, const char *db_path, const char *state_dir,
			      struct backup_info *info)
{
	char state[PATH_MAX], up[PATH_MAX], last[PATH_MAX * 2] = "";
	json_t *m = NULL, *f;
	struct stat sb;
	enum sd_result r;
	size_t i;

	if (!db_path || !*db_path)
		return err_set(SD_INVALID, "restore: no --db given");
	if (lstat(db_path, &sb) == 0)
		return err_set(SD_INVALID, "restore: %s exists; a restore never overwrites a box",
			       db_path);
	if ((r = backup_verify(dest, info)) != SD_OK || (r = load_manifest(dest, &m)) != SD_OK)
		return r;
	if ((r = statedir_path(db_path, state_dir, state, sizeof state)) != SD_OK)
		goto out;
	parent_of(db_path, up, sizeof up);
	if ((r = fsio_mkdirs(up, 0)) != SD_OK || (r = fsio_mkdirs(state, 0)) != SD_OK)
		goto out;
	/* each folder synced once, when the files in it are done */
	json_array_foreach(json_object_get(m, "files"), i, f) {
		const char *rel = json_string_value(json_object_get(f, "path"));
		char from[PATH_MAX * 2], to[PATH_MAX * 2], dir[PATH_MAX * 2];

		snprintf(from, sizeof from, "%s/%s", dest, rel);
		if (!strcmp(rel, BACKUP_DB))
			snprintf(to, sizeof to, "%s", db_path);
		else if (!strncmp(rel, "state/", 6))
			snprintf(to, sizeof to, "%s/%s", state, rel + 6);
		else
			continue;
		parent_of(to, dir, sizeof dir);
		if (strcmp(dir, last) != 0) {
			if ((*last && (r = fsio_sync_dir(last)) != SD_OK) ||
			    (r = fsio_mkdirs(dir, 0)) != SD_OK)
				goto out;
			snprintf(last, sizeof last, "%s", dir);
		}
		if ((r = copy_file(from, to)) != SD_OK)
			goto out;
	}
	if (*last)
		r = fsio_sync_dir(last);
out:
	json_decref(m);
	return r;
}

enum sd_result backup_take_over(struct db *db, int64_t *leases, int64_t *claims)
{
	enum sd_result r;

	*leases = *claims = 0;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = queue_expire_leases(db, leases)) == SD_OK)
		r = idem_release_unsent(db, claims);
	return db_end(db, r);
}

void backup_info_format(const struct backup_info *in, char *buf, size_t size)
{
	char when[32];
	time_t t = (time_t)(in->created_at_ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(buf, size, "%d files, %.1f MiB, schema %d, taken %s", in->files,
		 (double)in->bytes / (1024.0 * 1024.0), in->schema_version, when);
}
