/*
 * runlock.c: the run lock (runlock.h).
 */
#define _GNU_SOURCE
#include "runlock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "db.h"
#include "fsio.h"
#include "log.h"
#include "version.h"

/* The lock this process holds, by its file's path; "" when none. */
static char held[PATH_MAX + 16];

/* lock_path: where the lock of the box at db lives; SD_OK or why not */
static enum sd_result lock_path(const char *db, const char *state_dir, char *path, size_t size)
{
	char dir[PATH_MAX], *slash;

	if (db_target_is_pg(db)) {
		if (!state_dir || !*state_dir)
			return err_set(SD_INVALID, "state_dir must be given with a PostgreSQL "
				       "database: the folder of this box's own files");
		snprintf(path, size, "%s/run.lock", state_dir);
		return fsio_mkdirs(state_dir, 0);
	}
	snprintf(path, size, "%s-run.lock", db);
	/* the folder first, so that the lock can live beside the database */
	snprintf(dir, sizeof dir, "%s", db);
	if ((slash = strrchr(dir, '/')) && slash != dir) {
		*slash = '\0';
		return fsio_mkdirs(dir, 0);
	}
	return SD_OK;
}

/* holder: the pid written in the lock file fd, as text ("" if none) */
static void holder(int fd, char *pid, size_t size)
{
	ssize_t n = pread(fd, pid, size - 1, 0);

	pid[n > 0 ? n : 0] = '\0';
	pid[strcspn(pid, "\n")] = '\0';
}

enum sd_result runlock_take(const char *db, const char *state_dir)
{
	char path[PATH_MAX + 16], pid[32];
	enum sd_result r;
	ssize_t n;
	int fd;

	if ((r = lock_path(db, state_dir, path, sizeof path)) != SD_OK)
		return r;
	/* the fd stays open (close-on-exec: children do not hold it) until the
	 * process ends */
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
		return err_set(SD_IO, "cannot open the run lock %s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		holder(fd, pid, sizeof pid);
		close(fd);
		return err_set(SD_BUSY, "stagedoor run is already running on %s%s%s%s; stop it "
			       "first (plain 'stagedoor worker's may join it)",
			       db_target_is_pg(db) ? state_dir : db, pid[0] ? " (pid " : "", pid,
			       pid[0] ? ")" : "");
	}
	n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		log_event(LOG_WARN, "could not write the pid into the run lock", NULL);
	snprintf(held, sizeof held, "%s", path);
	return SD_OK;
}

enum sd_result runlock_guard(const char *path, int from, int to)
{
	char lock[PATH_MAX + 16], pid[32];
	int fd, busy;

	snprintf(lock, sizeof lock, "%s-run.lock", path);
	if (strcmp(lock, held) == 0)
		return SD_OK;
	if ((fd = open(lock, O_RDONLY | O_CLOEXEC)) < 0)
		return SD_OK;	/* no run was ever started here */
	busy = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
	if (busy)
		holder(fd, pid, sizeof pid);
	close(fd);		/* and with it the shared lock, if it was taken */
	if (!busy)
		return SD_OK;
	return err_set(SD_BUSY, "%s is at schema version %d and this stagedoor (%s) migrates it "
		       "to %d, but a box is running on it (stagedoor run, pid %s): stop it first "
		       "(systemctl stop stagedoor), then start it with this version (run migrates "
		       "at its start); nothing was changed", path, from, STAGEDOOR_VERSION, to,
		       pid[0] ? pid : "unknown");
}
