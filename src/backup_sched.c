/*
 * backup_sched.c: the periodic backups `run` takes into backup_dir.
 *
 * The folder, as this module makes it:
 *   stagedoor-20261201T190000Z            a good backup (backup.h), named by the
 *   stagedoor-20261201T200000Z-2          UTC second it began; "-2".."-9" when
 *                                         that name was taken (a clock set back)
 *   stagedoor-...Z.partial-<pid>          one being built, or left by a process
 *                                         that died building it
 * Names sort as times.  Anything else in the folder is the operator's and is
 * never read, counted or removed.
 *
 * Beside the database, "<db>-backup-status" (0600, put atomically: fsio.h)
 * holds {"failures_total", "last_failed", "last_failure_at_ms",
 * "last_error"}: what the HTTP process cannot see in the folder (the last
 * attempt failed, and why).  It lives beside the database, not in
 * backup_dir, because a backup_dir that cannot be made is a failure too.
 *
 * Invariants:
 *  - a name without ".partial-" exists only whole: backup_make renames the
 *    finished folder to it, so a crash or a power cut mid-backup leaves a
 *    partial folder, never taken for a good backup and removed by the next
 *    attempt once its process is gone;
 *  - pruning removes good backups only, the oldest first, and only after a
 *    new one is in place: the newest good backup is never the one removed;
 *  - the supervisor runs one backup at a time, in a child process of its
 *    own (`stagedoor backup --scheduled`), so a backup never holds up the
 *    supervisor, the workers or intake;
 *  - no secret is written anywhere: a failure's reason is a path and a
 *    system error.
 */
#define _GNU_SOURCE
#include "backup_sched.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fsio.h"
#include "log.h"

#define STATUS_MAX 4096		/* bytes of the status file read */
#define PARTIAL ".partial-"

/* ======================== names ========================================== */

/* name_time: the UTC time (ms) a name of ours stands for, its length in
 * *len; 0 when s does not start with one. */
static int64_t name_time(const char *s, size_t *len)
{
	struct tm tm;
	size_t p = strlen(BACKUP_SCHED_PREFIX), i;
	int v[6], w[6] = { 4, 2, 2, 2, 2, 2 }, k;

	if (strncmp(s, BACKUP_SCHED_PREFIX, p) != 0)
		return 0;
	for (k = 0; k < 6; k++) {
		if (k == 3 && s[p++] != 'T')
			return 0;
		for (v[k] = 0, i = 0; i < (size_t)w[k]; i++, p++) {
			if (s[p] < '0' || s[p] > '9')
				return 0;
			v[k] = v[k] * 10 + (s[p] - '0');
		}
	}
	if (s[p++] != 'Z')
		return 0;
	if (s[p] == '-' && s[p + 1] >= '2' && s[p + 1] <= '9')
		p += 2;
	memset(&tm, 0, sizeof tm);
	tm.tm_year = v[0] - 1900;
	tm.tm_mon = v[1] - 1;
	tm.tm_mday = v[2];
	tm.tm_hour = v[3];
	tm.tm_min = v[4];
	tm.tm_sec = v[5];
	*len = p;
	return (int64_t)timegm(&tm) * 1000;
}

/* good_name: a finished backup's name (no partial suffix). */
static int good_name(const char *s)
{
	size_t len;

	return name_time(s, &len) > 0 && s[len] == '\0';
}

/* partial_pid: the pid of a partial folder of ours; 0 when s is not one. */
static long partial_pid(const char *s)
{
	size_t len, n = strlen(PARTIAL);
	char *end;
	long pid;

	if (name_time(s, &len) <= 0 || strncmp(s + len, PARTIAL, n) != 0)
		return 0;
	pid = strtol(s + len + n, &end, 10);
	return *end || end == s + len + n ? 0 : pid;
}

static int by_name_desc(const void *a, const void *b)
{
	return strcmp((const char *)b, (const char *)a);
}

/*
 * list_good: the good backups in dir, newest first.  [out] *names (an
 * array of BACKUP_SCHED_NAME_MAX-byte names; the caller frees) and *n.
 * A good backup is a folder of our name holding its manifest.
 */
static enum sd_result list_good(const char *dir, char (**names)[BACKUP_SCHED_NAME_MAX], int *n)
{
	char (*v)[BACKUP_SCHED_NAME_MAX] = NULL, path[PATH_MAX];
	struct dirent *de;
	struct stat sb;
	int cap = 0;
	DIR *d;

	*names = NULL;
	*n = 0;
	if (!(d = opendir(dir)))
		return err_set(SD_IO, "cannot read %s: %s", dir, strerror(errno));
	while ((de = readdir(d))) {
		if (strlen(de->d_name) >= BACKUP_SCHED_NAME_MAX || !good_name(de->d_name))
			continue;
		snprintf(path, sizeof path, "%s/%s/%s", dir, de->d_name, BACKUP_MANIFEST);
		if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
			continue;
		if (*n == cap) {
			void *nv = realloc(v, (size_t)(cap = cap ? cap * 2 : 32) * sizeof *v);
			if (!nv) {
				free(v);
				closedir(d);
				return err_set(SD_NOMEM, "out of memory");
			}
			v = nv;
		}
		memcpy(v[(*n)++], de->d_name, strlen(de->d_name) + 1); /* length checked above */
	}
	closedir(d);
	if (*n)
		qsort(v, (size_t)*n, sizeof *v, by_name_desc);
	*names = v;
	return SD_OK;
}

/* ======================== one backup ===================================== */

/* clean_partials: remove the partial folders of processes that are gone. */
static void clean_partials(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	long pid;

	if (!(d = opendir(dir)))
		return;
	while ((de = readdir(d))) {
		if ((pid = partial_pid(de->d_name)) <= 0 || pid == (long)getpid())
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;	/* its process lives, or is not ours to ask */
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		backup_remove(path);
		log_event(LOG_INFO, "partial backup removed", "name=%s pid=%ld", de->d_name, pid);
	}
	closedir(d);
}

/* prune: the good backups past the newest keep.  [out] *pruned. */
static enum sd_result prune(const char *dir, int keep, int *pruned)
{
	char (*names)[BACKUP_SCHED_NAME_MAX], path[PATH_MAX];
	enum sd_result r;
	int n, i;

	if ((r = list_good(dir, &names, &n)) != SD_OK)
		return r;
	for (i = keep; i < n; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		backup_remove(path);
		if (access(path, F_OK) == 0) {
			r = err_set(SD_IO, "cannot remove the old backup %s", path);
			break;
		}
		(*pruned)++;
	}
	free(names);
	return r == SD_OK && *pruned ? fsio_sync_dir(dir) : r;
}

enum sd_result backup_sched_take(struct db *db, const char *db_path, const char *state_dir,
				 const char *dir, int keep, char *name, size_t size,
				 struct backup_info *info, int *pruned)
{
	char dest[PATH_MAX], stamp[32];
	time_t t = (time_t)(clock_now_ms() / 1000);
	int local = 0, i;
	struct stat sb;
	struct tm tm;
	enum sd_result r;

	if (!pruned)
		pruned = &local;
	*pruned = 0;
	name[0] = '\0';
	if (!dir || !*dir)
		return err_set(SD_INVALID, "backup_dir is not set");
	if ((r = fsio_mkdirs(dir, 0)) != SD_OK)
		return r;
	clean_partials(dir);
	gmtime_r(&t, &tm);
	strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
	for (i = 1; i <= 9; i++) {
		snprintf(name, size, "%s%s", BACKUP_SCHED_PREFIX, stamp);
		if (i > 1)
			snprintf(name + strlen(name), size - strlen(name), "-%d", i);
		if ((size_t)snprintf(dest, sizeof dest, "%s/%s", dir, name) >= sizeof dest)
			return err_set(SD_INVALID, "backup_dir: the path is too long");
		if (lstat(dest, &sb) != 0)
			break;
	}
	if (i > 9)
		return err_set(SD_INVALID, "backup: every name for %s is taken in %s (the clock "
			       "was set back?)", stamp, dir);
	if ((r = backup_make(db, db_path, state_dir, dest, info)) != SD_OK)
		return r;
	return prune(dir, keep, pruned);
}

/* ======================== the status file ================================ */

static void status_path(const char *db_path, char *buf, size_t size)
{
	snprintf(buf, size, "%s-backup-status", db_path);
}

/* status_load: the status file's object, or an empty one; caller decrefs. */
static json_t *status_load(const char *db_path)
{
	char path[PATH_MAX];
	json_error_t je;
	json_t *o;

	status_path(db_path, path, sizeof path);
	o = json_load_file(path, 0, &je);
	if (o && !json_is_object(o)) {
		json_decref(o);
		o = NULL;
	}
	return o ? o : json_object();
}

/* one_line: s with control characters as spaces, at most
 * BACKUP_SCHED_ERROR_MAX bytes, never cutting a UTF-8 character in two. */
static void one_line(const char *s, char *buf, size_t size)
{
	size_t n;

	for (n = 0; s[n] && n + 1 < size && n < BACKUP_SCHED_ERROR_MAX; n++)
		buf[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? ' ' : s[n];
	if (s[n])
		while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	buf[n] = '\0';
}

void backup_sched_record(const char *db_path, int ok, const char *error)
{
	char path[PATH_MAX], head[PATH_MAX + 16], why[BACKUP_SCHED_ERROR_MAX + 1], *text;
	json_t *o = status_load(db_path);
	json_int_t failures = json_integer_value(json_object_get(o, "failures_total"));

	one_line(error ? error : "", why, sizeof why);
	if (ok)
		json_object_set_new(o, "last_failed", json_false());
	else if (json_object_set_new(o, "failures_total", json_integer(failures + 1)) != 0 ||
		 json_object_set_new(o, "last_failed", json_true()) != 0 ||
		 json_object_set_new(o, "last_failure_at_ms",
				     json_integer((json_int_t)clock_now_ms())) != 0 ||
		 json_object_set_new(o, "last_error", json_string(why)) != 0)
		log_event(LOG_WARN, "backup status not recorded", "err=\"out of memory\"");
	status_path(db_path, path, sizeof path);
	snprintf(head, sizeof head, "%s.tmp-", path);
	text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text || fsio_put(path, text, strlen(text), head, "", 0600, FSIO_RENAME, NULL) != SD_OK)
		log_event(LOG_WARN, "backup status not recorded", "err=\"%s\"",
			  text ? err_msg() : "out of memory");
	free(text);
	json_decref(o);
}

/* ======================== the state ====================================== */

void backup_sched_status(const char *db_path, const char *dir, int64_t interval_ms,
			 int64_t now, struct backup_status *st)
{
	char (*names)[BACKUP_SCHED_NAME_MAX] = NULL;
	json_t *o;
	size_t len;
	int n = 0;

	memset(st, 0, sizeof *st);
	st->age_ms = -1;
	if (dir && *dir && list_good(dir, &names, &n) == SD_OK && n > 0) {
		st->good = n;
		snprintf(st->last_ok_name, sizeof st->last_ok_name, "%s", names[0]);
		st->last_ok_ms = name_time(names[0], &len);
		st->age_ms = now > st->last_ok_ms ? now - st->last_ok_ms : 0;
	}
	free(names);
	o = status_load(db_path);
	st->failed = json_is_true(json_object_get(o, "last_failed"));
	st->failed_at_ms = json_integer_value(json_object_get(o, "last_failure_at_ms"));
	st->failures_total = json_integer_value(json_object_get(o, "failures_total"));
	if (st->failed && json_is_string(json_object_get(o, "last_error")))
		one_line(json_string_value(json_object_get(o, "last_error")), st->error,
			 sizeof st->error);
	json_decref(o);
	st->ok = !st->failed && st->good > 0 &&
		 st->age_ms <= 2 * interval_ms + BACKUP_SCHED_SLACK_MS;
}

/* ======================== the schedule =================================== */

void backup_sched_init(struct backup_sched *s, const char *db_path, const char *dir,
		       int64_t interval_ms, int64_t now)
{
	struct backup_status st;

	memset(s, 0, sizeof *s);
	backup_sched_status(db_path, dir, interval_ms, clock_now_ms(), &st);
	s->next_ms = now;
	if (st.good > 0 && st.age_ms < interval_ms)
		s->next_ms = now + (interval_ms - st.age_ms);
}

void backup_sched_started(struct backup_sched *s, int64_t now)
{
	s->started_ms = now;
}

void backup_sched_ended(struct backup_sched *s, const char *db_path, pid_t pid, int st,
			int64_t interval_ms, int stopping, int64_t now)
{
	int64_t retry;
	char why[96];

	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		s->failures = 0;
		s->next_ms = s->started_ms + interval_ms > now ? s->started_ms + interval_ms : now;
		return;
	}
	if (stopping && !(WIFEXITED(st) && WEXITSTATUS(st) == BACKUP_SCHED_EXIT_FAILED)) {
		/* stopped with the box: not a failure; its partial folder goes at
		 * the next attempt */
		log_event(LOG_INFO, "backup stopped", "pid=%ld", (long)pid);
		return;
	}
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == BACKUP_SCHED_EXIT_FAILED)) {
		/* it did not get to say why: say how it ended */
		if (WIFSIGNALED(st))
			snprintf(why, sizeof why, "the backup process ended by signal %d",
				 WTERMSIG(st));
		else
			snprintf(why, sizeof why, "the backup process exited with status %d",
				 WEXITSTATUS(st));
		backup_sched_record(db_path, 0, why);
		log_event(LOG_WARN, "backup failed", "pid=%ld err=\"%s\"", (long)pid, why);
	}
	s->failures++;
	retry = BACKUP_SCHED_RETRY_MS << (s->failures < 20 ? s->failures - 1 : 20);
	if (retry > interval_ms)
		retry = interval_ms;
	s->next_ms = now + retry;
	log_event(LOG_INFO, "backup retries", "in_ms=%lld failures=%d", (long long)retry,
		  s->failures);
}
