/*
 * fsio.c: durable file writes: write and read loops, folder fsync, mkdir -p,
 * and the whole "temp file, fsync, rename or link, fsync the folder"
 * sequence.
 *
 * Invariants:
 *  - a name that fsio_put or fsio_mkdirs made is synced into its folder
 *    before the function returns SD_OK: a caller that goes on to record
 *    "done" (in the database, in a maildir record) never records a file
 *    that a power cut can take back;
 *  - fsio_put's file appears under its name only whole and synced: the
 *    bytes reach the disk (fsync of the temp file) before the name does;
 *  - fsio_put creates its temp file with O_EXCL and O_NOFOLLOW and its final
 *    mode, never chmods, and removes the temp name on every path out;
 *  - FSIO_LINK never replaces a name: link(2) fails with EEXIST instead,
 *    which is how the key file and the maildir let one racer win;
 *  - no function here logs: each sets its message once with err_set and
 *    returns the code.
 */
#define _GNU_SOURCE
#include "fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define FSIO_DIR_MODE 0700
#define FSIO_TMP_TRIES 8

enum sd_result fsio_write_all(int fd, const void *data, size_t len, const char *path)
{
	const unsigned char *p = data;

	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return err_set(SD_IO, "cannot write %s: %s", path, strerror(errno));
		p += w;
		len -= (size_t)w;
	}
	return SD_OK;
}

enum sd_result fsio_read_all(int fd, void *buf, size_t len, const char *path)
{
	unsigned char *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return err_set(SD_IO, "cannot read %s: %s", path,
				       n < 0 ? strerror(errno) : "file is shorter than its size");
		p += n;
		len -= (size_t)n;
	}
	return SD_OK;
}

enum sd_result fsio_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return err_set(SD_IO, "cannot open folder %s: %s", dir, strerror(errno));
	if (fsync(fd) != 0) {
		int e = errno;

		close(fd);
		return err_set(SD_IO, "cannot sync folder %s: %s", dir, strerror(e));
	}
	close(fd);
	return SD_OK;
}

/*
 * fsync the folder that holds path ("." for a bare name, "/" for a name at
 * the root), so that path's own name in it is durable.
 */
static enum sd_result fsio_sync_parent(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');

	if (!slash)
		return fsio_sync_dir(".");
	if (slash == path)
		return fsio_sync_dir("/");
	if ((size_t)(slash - path) >= sizeof dir)
		return err_set(SD_INVALID, "path too long: %s", path);
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	return fsio_sync_dir(dir);
}

/* mkdir path (mode 0700); [out] *made is 1 when it was created here. */
static enum sd_result fsio_mkdir(const char *path, int *made)
{
	struct stat st;

	*made = 0;
	if (mkdir(path, FSIO_DIR_MODE) == 0) {
		*made = 1;
		return SD_OK;
	}
	if (errno != EEXIST)
		return err_set(SD_IO, "cannot create folder %s: %s", path, strerror(errno));
	if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
		return err_set(SD_IO, "%s exists and is not a folder", path);
	return SD_OK;
}

enum sd_result fsio_mkdirs(const char *dir, size_t from)
{
	char buf[PATH_MAX];
	enum sd_result r;
	size_t len = strlen(dir);
	char *p;
	int made;

	/* the '/' appended makes the loop below treat dir's last part like
	 * every other: each '/' ends one folder to make */
	if (len + 2 > sizeof buf)
		return err_set(SD_INVALID, "folder path too long: %s", dir);
	memcpy(buf, dir, len);
	buf[len] = '/';
	buf[len + 1] = '\0';
	if (from > len + 1)
		from = len + 1;
	for (p = buf + from; *p; p++) {
		if (*p != '/' || p == buf)
			continue;
		*p = '\0';
		r = fsio_mkdir(buf, &made);
		if (r == SD_OK && made)
			r = fsio_sync_parent(buf);
		*p = '/';
		if (r != SD_OK)
			return r;
	}
	return SD_OK;
}

/* 64 bits for a temp name: getrandom, or, where it fails, bits that at
 * least differ between processes, threads and tries (O_EXCL catches the
 * rest). */
static uint64_t fsio_tmp_bits(int tries)
{
	static _Atomic uint64_t seq;
	uint64_t rnd;

	if (getrandom(&rnd, sizeof rnd, 0) == (ssize_t)sizeof rnd)
		return rnd;
	return ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&rnd ^
	       (++seq * 0x9e3779b97f4a7c15ull) ^ (uint64_t)tries;
}

enum sd_result fsio_put(const char *path, const void *data, size_t len, const char *tmp_head,
			const char *tmp_tail, mode_t mode, enum fsio_how how, int *placed)
{
	char tmp[PATH_MAX];
	enum sd_result r;
	int fd = -1, tmp_made = 0, tries, n;

	if (placed)
		*placed = 0;
	for (tries = 0; tries < FSIO_TMP_TRIES; tries++) {
		n = snprintf(tmp, sizeof tmp, "%s%016llx%s", tmp_head,
			     (unsigned long long)fsio_tmp_bits(tries), tmp_tail);
		if (n < 0 || (size_t)n >= sizeof tmp)
			return err_set(SD_INVALID, "temp file path too long for %s", path);
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		r = err_set(SD_IO, "cannot create temp file %s: %s", tmp, strerror(errno));
		goto out;
	}
	tmp_made = 1;
	if ((r = fsio_write_all(fd, data, len, tmp)) != SD_OK)
		goto out;
	if (fsync(fd) != 0) {
		r = err_set(SD_IO, "cannot sync %s: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		r = err_set(SD_IO, "cannot close %s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (how == FSIO_RENAME) {
		if (rename(tmp, path) != 0) {
			r = err_set(SD_IO, "cannot put %s in place: %s", path, strerror(errno));
			goto out;
		}
		tmp_made = 0;
		if (placed)
			*placed = 1;
	} else {
		if (link(tmp, path) == 0) {
			if (placed)
				*placed = 1;
		} else if (errno != EEXIST) {
			r = err_set(SD_IO, "cannot put %s in place: %s", path, strerror(errno));
			goto out;
		}
		/* made or taken, the name is there: the temp name has done
		 * its work */
		unlink(tmp);
		tmp_made = 0;
	}
	/* also after EEXIST: the winner may not have synced its name yet,
	 * and our caller is about to rely on the file that name holds */
	r = fsio_sync_parent(path);
out:
	if (fd >= 0)
		close(fd);
	if (tmp_made)
		unlink(tmp);
	return r;
}

enum sd_result fsio_free_bytes(const char *path, int64_t *bytes)
{
	struct statvfs sv;

	*bytes = 0;
	if (statvfs(path, &sv) != 0)
		return err_set(SD_IO, "cannot read the free space of %s: %s", path,
			       strerror(errno));
	*bytes = (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
	return SD_OK;
}
