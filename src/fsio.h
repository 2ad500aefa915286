/*
 * fsio.h: durable file writes shared by the file store (blob), the ticket
 * key (code) and the maildir (mail).
 *
 * A file that must survive a power cut whole is never written in place: it
 * is written to a temp file, fsynced, given its name by rename(2) or
 * link(2), and then the folder that holds the name is fsynced, because a
 * new name is only as durable as its folder.  These are the pieces of that
 * sequence, and fsio_put, the sequence itself; fsio_read_all is the
 * reading side's loop.  Every function reports with the project's result
 * codes and names the path in its message.
 */
#ifndef SD_FSIO_H
#define SD_FSIO_H

#include <stddef.h>
#include <sys/types.h>

#include "result.h"

/* How fsio_put gives the file its name. */
enum fsio_how {
	FSIO_RENAME,	/* rename(2): the name ends up holding the new bytes, replacing
			 * any file it held (readers see the old file or the new one) */
	FSIO_LINK,	/* link(2): an existing name is never replaced; of several
			 * writers racing for one name exactly one makes it */
};

/*
 * fsio_write_all: write all len bytes of data to fd, going on after short
 * writes and EINTR.  [in] path names fd in the error message only.
 * SD_IO on failure; how much was written is then unknown.
 */
enum sd_result fsio_write_all(int fd, const void *data, size_t len, const char *path);

/*
 * fsio_read_all: read exactly len bytes from fd into buf, going on after
 * short reads and EINTR.  [in] path names fd in the error message only.
 * [out] buf.  SD_IO on a failed read or when the file ends before len bytes
 * (a file that shrank since its size was taken).
 */
enum sd_result fsio_read_all(int fd, void *buf, size_t len, const char *path);

/*
 * fsio_sync_dir: fsync the folder dir, so that names made or removed in it
 * (by creat, mkdir, rename, link, unlink) survive a power cut.  SD_IO when
 * the folder cannot be opened for reading or synced.
 */
enum sd_result fsio_sync_dir(const char *dir);

/*
 * fsio_mkdirs: mkdir -p for the folder dir: every missing folder on the way
 * is made with mode 0700, and each one made here is synced into its parent
 * before the next, so a file later put in dir is reachable after a power
 * cut.  A folder that exists is left as it is (not synced again).
 * [in] from: how many leading bytes of dir are known to name existing
 * folders (0 when none are); a folder whose name ends before that offset is
 * neither checked nor made, which spares a put the mkdir calls on the
 * store's own path: for "store/a/b" and from 6 ("store/"), only "store/a"
 * and "store/a/b" are.  SD_IO when a folder cannot be made or a part of dir
 * is not a folder; SD_INVALID when dir is longer than PATH_MAX.
 */
enum sd_result fsio_mkdirs(const char *dir, size_t from);

/*
 * fsio_free_bytes: the space an unprivileged writer may still use on the
 * filesystem that holds path (statvfs: f_bavail x f_frsize).  [out] *bytes.
 * SD_IO naming the path when it cannot be asked.
 */
enum sd_result fsio_free_bytes(const char *path, int64_t *bytes);

/*
 * fsio_put: make path name a file that holds data[0..len), atomically and
 * durably.  Writes a new temp file (O_EXCL, never following a link,
 * permission bits mode from its creation on, so a secret is never readable
 * by others even for a moment), fsyncs and closes it, gives it the name
 * path as how says, removes the temp name, and fsyncs the folder of path.
 *
 * [in] tmp_head, tmp_tail: the temp file is named tmp_head, 16 random hex
 * digits, tmp_tail; a name that is taken is drawn again (up to 8 times).  It
 * must be on path's file system (rename and link do not cross), and is
 * where a crash leaves it, so callers pick a recognisable name.
 * [in] how: FSIO_RENAME or FSIO_LINK (see enum fsio_how).
 * [out] placed (may be NULL): 1 when path now names the file written here;
 * 0 when FSIO_LINK found path taken (EEXIST), which is not a failure: path
 * is left as it was, and its folder is still synced before this returns, so
 * the file another writer put there is as durable as one put here.
 *
 * Whatever the result, no temp file is left behind.  SD_IO on a failed
 * system call (the message names the temp file or path); SD_INVALID when
 * the temp name would exceed PATH_MAX.
 */
enum sd_result fsio_put(const char *path, const void *data, size_t len, const char *tmp_head,
			const char *tmp_tail, mode_t mode, enum fsio_how how, int *placed);

#endif
