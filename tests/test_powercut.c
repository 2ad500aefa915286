/*
 * test_powercut: the power-cut filesystem (tools/powercut) on real mounts.
 *
 * Each test makes a fresh folder under /tmp with a backing dir ("the disk")
 * and a mount point, starts the daemon in the foreground on them, works
 * through the mount, cuts the power through the control socket, and checks
 * the backing dir, or a new mount of it.  The teardown unmounts and ends the
 * daemon even when an assertion failed.  Needs root and /dev/fuse (every
 * test is skipped otherwise).  The daemon is $POWERCUT, or build/powercut.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "db.h"

#define MAXKIDS 8

struct fx {
	char root[64];
	char back[128], mnt[128], ctl[128], log[128];
	pid_t pid;
	int mounted;
	pid_t kids[MAXKIDS];
	int nkids;
};

static const char *bin;
static int can_mount;

/* ------------------------------------------------------------ helpers */

static char *P(char *buf, const char *dir, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", dir, name);
	return buf;
}

static void msleep(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int write_at(const char *path, int flags, const void *data, size_t len, int do_fsync)
{
	int fd = open(path, O_WRONLY | O_CREAT | flags | O_CLOEXEC, 0644);
	const char *p = data;

	if (fd < 0)
		return -1;
	while (len > 0) {
		ssize_t w = write(fd, p, len);

		if (w <= 0) {
			close(fd);
			return -1;
		}
		p += w;
		len -= (size_t)w;
	}
	if (do_fsync && fsync(fd) != 0) {
		close(fd);
		return -1;
	}
	return close(fd);
}

static int put(const char *path, const char *text, int do_fsync)
{
	return write_at(path, O_TRUNC, text, strlen(text), do_fsync);
}

/* whole file into buf (NUL-terminated); length, or -1 with errno */
static ssize_t get(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t r;

	if (fd < 0)
		return -1;
	while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	buf[n] = 0;
	return (ssize_t)n;
}

static int fsync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

	if (fd < 0)
		return -1;
	r = fsync(fd);
	close(fd);
	return r;
}

static int exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static void rm_rf(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return;
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(path);
		struct dirent *de;
		char sub[PATH_MAX];

		while (d && (de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				rm_rf(P(sub, path, de->d_name));
		if (d)
			closedir(d);
		rmdir(path);
	} else {
		unlink(path);
	}
}

/* a child process: the default signal actions, not cmocka's handlers (a
 * SIGBUS in a child must end the child, not resume the suite in it) */
static pid_t kid_fork(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		signal(SIGBUS, SIG_DFL);
		signal(SIGSEGV, SIG_DFL);
		signal(SIGILL, SIG_DFL);
		signal(SIGFPE, SIG_DFL);
		signal(SIGABRT, SIG_DFL);
	}
	return pid;
}

/* wait at most 10 s for a child; its status, or a failure (the teardown
 * kills what is left) */
static int kid_wait(pid_t kid)
{
	int status, i;

	for (i = 0; i < 1000; i++) {
		if (waitpid(kid, &status, WNOHANG) == kid)
			return status;
		msleep(10);
	}
	fail_msg("child %d did not end", (int)kid);
	return -1;
}

/* ---------------------------------------------------------- the daemon */

static int pc_start(struct fx *f, const char *const *extra)
{
	const char *argv[32];
	struct stat a, b;
	int n = 0, i;

	argv[n++] = bin;
	argv[n++] = f->back;
	argv[n++] = f->mnt;
	argv[n++] = "-f";
	argv[n++] = "--control";
	argv[n++] = f->ctl;
	for (i = 0; extra && extra[i] && n < 30; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	if ((f->pid = fork()) < 0)
		return -1;
	if (f->pid == 0) {
		int fd = open(f->log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	for (i = 0; i < 500; i++) {
		int status;

		if (waitpid(f->pid, &status, WNOHANG) == f->pid) {
			f->pid = 0;
			return -1;
		}
		if (stat(f->root, &a) == 0 && stat(f->mnt, &b) == 0 && a.st_dev != b.st_dev &&
		    access(f->ctl, F_OK) == 0) {
			f->mounted = 1;
			return 0;
		}
		msleep(10);
	}
	return -1;
}

/* unmount, wait for the daemon; its exit status (or -1) */
static int pc_stop(struct fx *f)
{
	int status = -1, i;

	if (f->mounted && umount2(f->mnt, MNT_DETACH) != 0 && errno != EINVAL)
		fprintf(stderr, "umount %s: %s\n", f->mnt, strerror(errno));
	f->mounted = 0;
	if (f->pid <= 0)
		return -1;
	for (i = 0; i < 500; i++) {
		if (waitpid(f->pid, &status, WNOHANG) == f->pid) {
			f->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		}
		msleep(10);
	}
	kill(f->pid, SIGKILL);
	waitpid(f->pid, &status, 0);
	f->pid = 0;
	return -1;
}

static const char *pc_ctl(struct fx *f, const char *cmd)
{
	static char buf[1024];
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t n = 0;
	ssize_t r;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memcpy(a.sun_path, f->ctl, strlen(f->ctl) < sizeof a.sun_path ? strlen(f->ctl) : sizeof a.sun_path - 1);
	buf[0] = 0;
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		snprintf(buf, sizeof buf, "connect: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return buf;
	}
	if (write(fd, cmd, strlen(cmd)) < 0 || write(fd, "\n", 1) < 0) {
		close(fd);
		return "write failed";
	}
	while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(fd);
	return buf;
}

/* a number from a "key=value" reply */
static long long field(const char *reply, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof k, " %s=", key);
	p = strstr(reply, k);
	return p ? strtoll(p + strlen(k), NULL, 10) : -1;
}

static void cut(struct fx *f, const char *how)
{
	const char *r = pc_ctl(f, how);

	if (strncmp(r, "ok cut", 6) != 0)
		fail_msg("%s: %s", how, r);
}

static void remount(struct fx *f, const char *const *extra)
{
	assert_int_equal(pc_stop(f), 0);
	assert_int_equal(pc_start(f, extra), 0);
}

static char *M(struct fx *f, char *buf, const char *name)
{
	return P(buf, f->mnt, name);
}

static char *B(struct fx *f, char *buf, const char *name)
{
	return P(buf, f->back, name);
}

static int setup(void **state)
{
	struct fx *f;

	if (!can_mount) {
		*state = NULL;
		return 0;
	}
	f = calloc(1, sizeof *f);
	snprintf(f->root, sizeof f->root, "/tmp/powercut-test.XXXXXX");
	if (!mkdtemp(f->root))
		return -1;
	P(f->back, f->root, "disk");
	P(f->mnt, f->root, "mnt");
	P(f->ctl, f->root, "ctl.sock");
	P(f->log, f->root, "daemon.log");
	if (chmod(f->root, 0755) != 0 || mkdir(f->back, 0755) != 0 || mkdir(f->mnt, 0755) != 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	int i;

	if (!f)
		return 0;
	for (i = 0; i < f->nkids; i++) {
		kill(f->kids[i], SIGKILL);
		waitpid(f->kids[i], NULL, 0);
	}
	pc_stop(f);
	if (getenv("POWERCUT_KEEP"))
		fprintf(stderr, "kept %s\n", f->root);
	else
		rm_rf(f->root);
	free(f);
	return 0;
}

/* the fixture with the daemon started, or a skip */
static struct fx *started(void **state, const char *const *extra)
{
	struct fx *f = *state;

	if (!f) {
		/* the reason, as testutil.h's TU_SKIP says it */
		print_message("# skipped: needs root, /dev/fuse and build/powercut\n");
		skip();
	}
	if (pc_start(f, extra) != 0)
		fail_msg("the daemon did not mount %s", f->mnt);
	return f;
}

static void log_has(struct fx *f, const char *text)
{
	char buf[16384];

	assert_true(get(f->log, buf, sizeof buf) >= 0);
	if (!strstr(buf, text))
		fail_msg("daemon log lacks \"%s\":\n%s", text, buf);
}

/* -------------------------------------------------------------- tests */

/* 1. data: dirty until fsync, visible (read and stat) before the cut */
static void test_data_until_fsync(void **state)
{
	struct fx *f = started(state, NULL);
	char p[PATH_MAX], q[PATH_MAX], buf[32768], old[5000], neu[8000];
	struct stat st;
	ssize_t n;
	int fd;

	memset(old, 'A', sizeof old);
	memset(neu, 'B', sizeof neu);
	assert_int_equal(write_at(M(f, p, "f"), O_TRUNC, old, sizeof old, 1), 0);
	assert_int_equal(put(M(f, p, "g"), "synced", 1), 0);
	assert_int_equal(put(M(f, p, "t"), "0123456789abcdef", 1), 0);
	assert_int_equal(fsync_dir(f->mnt), 0);

	/* rewrite f longer without fsync: the mount sees it, the disk does not */
	assert_int_equal(write_at(M(f, p, "f"), 0, neu, sizeof neu, 0), 0);
	assert_int_equal(stat(M(f, p, "f"), &st), 0);
	assert_int_equal(st.st_size, 8000);
	assert_int_equal(stat(B(f, q, "f"), &st), 0);
	assert_int_equal(st.st_size, 5000);
	assert_int_equal(get(M(f, p, "f"), buf, sizeof buf), 8000);
	assert_memory_equal(buf, neu, 8000);
	assert_int_equal(get(B(f, q, "f"), buf, sizeof buf), 5000);
	assert_memory_equal(buf, old, 5000);

	/* the daemon's own overlay, past the kernel's page cache (O_DIRECT):
	 * a partial page over backing bytes */
	assert_true((fd = open(M(f, p, "g"), O_WRONLY)) >= 0);
	assert_int_equal(pwrite(fd, "XY", 2, 2), 2);
	close(fd);
	{
		void *al;

		assert_int_equal(posix_memalign(&al, 4096, 4096), 0);
		assert_true((fd = open(M(f, p, "g"), O_RDONLY | O_DIRECT)) >= 0);
		n = pread(fd, al, 4096, 0);
		close(fd);
		assert_int_equal(n, 6);
		assert_memory_equal(al, "syXYed", 6);
		free(al);
	}

	/* truncate down then up, unsynced: bytes past the cut point read as
	 * zeros although the disk still has them */
	assert_int_equal(truncate(M(f, p, "t"), 4), 0);
	assert_int_equal(truncate(M(f, p, "t"), 16), 0);
	assert_int_equal(get(M(f, p, "t"), buf, sizeof buf), 16);
	assert_memory_equal(buf, "0123\0\0\0\0\0\0\0\0\0\0\0\0", 16);
	assert_int_equal(get(B(f, q, "t"), buf, sizeof buf), 16);
	assert_string_equal(buf, "0123456789abcdef");

	cut(f, "cut");
	log_has(f, "cut clean: dropped ");
	remount(f, NULL);
	assert_int_equal(get(M(f, p, "f"), buf, sizeof buf), 5000);
	assert_memory_equal(buf, old, 5000);
	assert_int_equal(get(M(f, p, "g"), buf, sizeof buf), 6);
	assert_string_equal(buf, "synced");
	assert_int_equal(get(M(f, p, "t"), buf, sizeof buf), 16);
	assert_string_equal(buf, "0123456789abcdef");

	/* the same truncation, synced, is on the disk */
	assert_int_equal(truncate(M(f, p, "t"), 4), 0);
	assert_int_equal(truncate(M(f, p, "t"), 6), 0);
	assert_true((fd = open(M(f, p, "t"), O_RDWR)) >= 0);
	assert_int_equal(fdatasync(fd), 0);
	close(fd);
	assert_int_equal(get(B(f, q, "t"), buf, sizeof buf), 6);
	assert_memory_equal(buf, "0123\0\0", 6);
}

/* 2. names: durable only once their folder is fsynced */
static void test_names_until_dir_fsync(void **state)
{
	struct fx *f = started(state, NULL);
	char p[PATH_MAX], q[PATH_MAX], buf[256];
	struct stat st;
	DIR *d;
	struct dirent *de;
	int saw_stash = 0;

	/* durable starting state */
	assert_int_equal(put(M(f, p, "unl-undone"), "u1", 1), 0);
	assert_int_equal(put(M(f, p, "unl-kept"), "u2", 1), 0);
	assert_int_equal(put(M(f, p, "ra"), "old-a", 1), 0);
	assert_int_equal(put(M(f, p, "rb"), "old-b", 1), 0);
	assert_int_equal(put(M(f, p, "rc"), "old-c", 1), 0);
	assert_int_equal(put(M(f, p, "rd"), "old-d", 1), 0);
	assert_int_equal(mkdir(M(f, p, "sub"), 0755), 0);
	assert_int_equal(fsync_dir(f->mnt), 0);

	/* new file, data synced, folder not */
	assert_int_equal(put(M(f, p, "lost"), "data", 1), 0);
	/* unlink and rename over, folder not synced */
	assert_int_equal(unlink(M(f, p, "unl-undone")), 0);
	assert_int_equal(rename(M(f, p, "ra"), M(f, q, "rb")), 0);
	assert_int_equal(get(M(f, p, "rb"), buf, sizeof buf), 5);
	assert_string_equal(buf, "old-a");
	/* nlink of an unlinked file still open is 0, as on a real disk */
	{
		int fd = open(M(f, p, "rd"), O_RDONLY);

		assert_true(fd >= 0);
		assert_int_equal(unlink(M(f, p, "rd")), 0);
		assert_int_equal(fstat(fd, &st), 0);
		assert_int_equal(st.st_nlink, 0);
		assert_int_equal(read(fd, buf, 5), 5);
		assert_memory_equal(buf, "old-d", 5);
		close(fd);
	}
	/* a new folder with a synced file, the new folder's own parent not
	 * synced: the folder and the file go */
	assert_int_equal(mkdir(M(f, p, "newdir"), 0755), 0);
	assert_int_equal(put(M(f, p, "newdir/inner"), "x", 1), 0);
	assert_int_equal(fsync_dir(M(f, p, "newdir")), 0);
	/* a hard link, folder not synced */
	assert_int_equal(link(M(f, p, "rc"), M(f, q, "rc-link")), 0);
	assert_int_equal(stat(M(f, p, "rc"), &st), 0);
	assert_int_equal(st.st_nlink, 2);

	/* in sub/: the same, then synced */
	assert_int_equal(put(M(f, p, "sub/kept"), "kept", 1), 0);
	assert_int_equal(put(M(f, p, "sub/gone"), "gone", 1), 0);
	assert_int_equal(fsync_dir(M(f, p, "sub")), 0);
	assert_int_equal(unlink(M(f, p, "sub/gone")), 0);
	assert_int_equal(rename(M(f, p, "rc"), M(f, q, "sub/moved")), 0);
	assert_int_equal(fsync_dir(M(f, p, "sub")), 0);
	assert_int_equal(unlink(M(f, p, "unl-kept")), 0);
	/* ... and root's own unlink of unl-kept made durable by syncing root
	 * would also make the other root changes durable: leave root alone */

	/* the stash is not visible */
	assert_true((d = opendir(f->mnt)) != NULL);
	while ((de = readdir(d)))
		if (strstr(de->d_name, "powercut"))
			saw_stash = 1;
	closedir(d);
	assert_false(saw_stash);
	assert_int_equal(stat(M(f, p, ".powercut-stash"), &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(mkdir(M(f, p, ".powercut-stash"), 0755), -1);

	cut(f, "cut");
	remount(f, NULL);

	assert_false(exists(M(f, p, "lost")));
	assert_int_equal(get(M(f, p, "unl-undone"), buf, sizeof buf), 2);
	assert_string_equal(buf, "u1");
	assert_int_equal(get(M(f, p, "unl-kept"), buf, sizeof buf), 2); /* root never synced */
	assert_int_equal(get(M(f, p, "ra"), buf, sizeof buf), 5);
	assert_string_equal(buf, "old-a");
	assert_int_equal(get(M(f, p, "rb"), buf, sizeof buf), 5);
	assert_string_equal(buf, "old-b");
	assert_int_equal(get(M(f, p, "rd"), buf, sizeof buf), 5);
	assert_string_equal(buf, "old-d");
	assert_false(exists(M(f, p, "newdir")));
	assert_false(exists(M(f, p, "rc-link")));
	/* sub/ was synced: its rename (destination sub/) is durable, the link
	 * in root is not */
	assert_false(exists(M(f, p, "rc")));
	assert_int_equal(get(M(f, p, "sub/moved"), buf, sizeof buf), 5);
	assert_string_equal(buf, "old-c");
	assert_int_equal(get(M(f, p, "sub/kept"), buf, sizeof buf), 4);
	assert_false(exists(M(f, p, "sub/gone")));

	/* the same changes with the folder synced stay */
	assert_int_equal(put(M(f, p, "new2"), "n2", 1), 0);
	assert_int_equal(unlink(M(f, p, "unl-undone")), 0);
	assert_int_equal(rename(M(f, p, "ra"), M(f, q, "rb")), 0);
	assert_int_equal(symlink("new2", M(f, p, "sym")), 0);
	assert_int_equal(fsync_dir(f->mnt), 0);
	cut(f, "cut");
	remount(f, NULL);
	assert_int_equal(get(M(f, p, "new2"), buf, sizeof buf), 2);
	assert_false(exists(M(f, p, "unl-undone")));
	assert_false(exists(M(f, p, "ra")));
	assert_int_equal(get(M(f, p, "rb"), buf, sizeof buf), 5);
	assert_string_equal(buf, "old-a");
	assert_int_equal(readlink(M(f, p, "sym"), buf, sizeof buf), 4);
	/* the stash holds nothing of durable changes */
	{
		int left = 0;

		assert_true((d = opendir(B(f, q, ".powercut-stash"))) != NULL);
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				left++;
		closedir(d);
		assert_int_equal(left, 0);
	}
}

/* a durable change pulls in the earlier changes it rests on, so no undo
 * ever fails and the stash keeps nothing */
static void test_dependencies(void **state)
{
	struct fx *f = started(state, NULL);
	char p[PATH_MAX], q[PATH_MAX], buf[64];
	const char *r;
	DIR *d;
	struct dirent *de;
	int left = 0;

	assert_int_equal(mkdir(M(f, p, "A"), 0755), 0);
	assert_int_equal(mkdir(M(f, p, "B"), 0755), 0);
	assert_int_equal(mkdir(M(f, p, "C"), 0755), 0);
	assert_int_equal(mkdir(M(f, p, "X"), 0755), 0);
	assert_int_equal(put(M(f, p, "C/z"), "z", 1), 0);
	assert_int_equal(put(M(f, p, "A/x"), "old-x", 1), 0);
	assert_int_equal(fsync_dir(M(f, p, "A")), 0);
	assert_int_equal(fsync_dir(M(f, p, "C")), 0);
	assert_int_equal(fsync_dir(f->mnt), 0);

	/* made in A (never synced), moved to B (synced): the making stays */
	assert_int_equal(put(M(f, p, "A/t"), "t", 1), 0);
	assert_int_equal(rename(M(f, p, "A/t"), M(f, q, "B/t2")), 0);
	assert_int_equal(fsync_dir(M(f, p, "B")), 0);
	/* A/x moved to B (B not synced again), then C/z moved to A/x and A
	 * synced: the first move stays as well */
	assert_int_equal(rename(M(f, p, "A/x"), M(f, q, "B/x")), 0);
	assert_int_equal(rename(M(f, p, "C/z"), M(f, q, "A/x")), 0);
	assert_int_equal(fsync_dir(M(f, p, "A")), 0);
	/* a file made and removed in X, then X removed and root synced */
	assert_int_equal(put(M(f, p, "X/f"), "f", 1), 0);
	assert_int_equal(unlink(M(f, p, "X/f")), 0);
	assert_int_equal(rmdir(M(f, p, "X")), 0);
	assert_int_equal(fsync_dir(f->mnt), 0);

	r = pc_ctl(f, "cut");
	assert_memory_equal(r, "ok cut clean", 12);
	assert_int_equal(field(r, "failed"), 0);
	assert_int_equal(field(r, "undone"), 0);
	assert_true((d = opendir(B(f, q, ".powercut-stash"))) != NULL);
	while ((de = readdir(d)))
		left += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	assert_int_equal(left, 0);
	remount(f, NULL);
	assert_false(exists(M(f, p, "A/t")));
	assert_int_equal(get(M(f, p, "B/t2"), buf, sizeof buf), 1);
	assert_int_equal(get(M(f, p, "B/x"), buf, sizeof buf), 5);
	assert_string_equal(buf, "old-x");
	assert_int_equal(get(M(f, p, "A/x"), buf, sizeof buf), 1);
	assert_string_equal(buf, "z");
	assert_false(exists(M(f, p, "C/z")));
	assert_false(exists(M(f, p, "X")));
}

/* the project's pattern: temp, fsync, rename, fsync the folder */
static int replace_file(struct fx *f, const char *name, const char *text, int sync_dir)
{
	char tmp[PATH_MAX], dst[PATH_MAX];

	if (put(M(f, tmp, ".tmp-123"), text, 1) != 0 || rename(tmp, M(f, dst, name)) != 0)
		return -1;
	return sync_dir ? fsync_dir(f->mnt) : 0;
}

/* 3. atomic replace: new content with the folder sync, old without, never
 * a torn or empty file */
static void test_atomic_replace(void **state)
{
	struct fx *f = started(state, NULL);
	char p[PATH_MAX], buf[65536], v1[20000], v2[20000];
	const char *how[] = {"cut", "cut torn 11", "cut torn 12"};
	int i;

	memset(v1, '1', sizeof v1 - 1);
	v1[sizeof v1 - 1] = 0;
	memset(v2, '2', sizeof v2 - 1);
	v2[sizeof v2 - 1] = 0;
	assert_int_equal(replace_file(f, "cfg", v1, 1), 0);
	assert_int_equal(replace_file(f, "cfg", v2, 1), 0);
	cut(f, "cut");
	remount(f, NULL);
	assert_int_equal(get(M(f, p, "cfg"), buf, sizeof buf), (ssize_t)strlen(v2));
	assert_string_equal(buf, v2);
	assert_false(exists(M(f, p, ".tmp-123")));

	for (i = 0; i < 3; i++) {
		char v3[20000];

		memset(v3, 'a' + i, sizeof v3 - 1);
		v3[sizeof v3 - 1] = 0;
		/* also unsynced noise in flight */
		assert_int_equal(put(M(f, p, "noise"), v3, 0), 0);
		assert_int_equal(replace_file(f, "cfg", v3, 0), 0);
		cut(f, how[i]);
		remount(f, NULL);
		assert_int_equal(get(M(f, p, "cfg"), buf, sizeof buf), (ssize_t)strlen(v2));
		assert_string_equal(buf, v2); /* the old content, whole */
		assert_false(exists(M(f, p, ".tmp-123")));
	}
}

#define TORN_SECTORS 512 /* 256 KiB */

static void sector_fill(char *s, int i, char tag)
{
	memset(s, tag, 512);
	memcpy(s, &i, sizeof i);
}

/* one torn run with this seed: which sectors landed, and the count the
 * daemon reported */
static int torn_run(struct fx *f, const char *cmd, unsigned char *landed, long long *applied)
{
	static char oldbuf[TORN_SECTORS * 512], newbuf[TORN_SECTORS * 512], got[TORN_SECTORS * 512 + 1];
	char p[PATH_MAX];
	const char *r;
	int i, n = 0;

	for (i = 0; i < TORN_SECTORS; i++) {
		sector_fill(oldbuf + i * 512, i, 'o');
		sector_fill(newbuf + i * 512, i, 'n');
	}
	assert_int_equal(write_at(M(f, p, "big"), O_TRUNC, oldbuf, sizeof oldbuf, 1), 0);
	assert_int_equal(fsync_dir(f->mnt), 0);
	assert_int_equal(write_at(M(f, p, "big"), 0, newbuf, sizeof newbuf, 0), 0);
	r = pc_ctl(f, cmd);
	assert_memory_equal(r, "ok cut torn", 11);
	*applied = field(r, "applied");
	assert_int_equal(field(r, "sectors"), TORN_SECTORS);
	assert_int_equal(field(r, "dropped"), (TORN_SECTORS - *applied) * 512);
	assert_int_equal(get(P(p, f->back, "big"), got, sizeof got), (ssize_t)sizeof oldbuf);
	for (i = 0; i < TORN_SECTORS; i++) {
		const char *s = got + i * 512;

		if (!memcmp(s, oldbuf + i * 512, 512)) {
			landed[i] = 0;
		} else if (!memcmp(s, newbuf + i * 512, 512)) {
			landed[i] = 1;
			n++;
		} else {
			fail_msg("sector %d is neither wholly old nor wholly new", i);
		}
	}
	return n;
}

/* 4. torn cut: a seeded random subset of dirty sectors lands, each whole */
static void test_torn_sectors(void **state)
{
	struct fx *f = started(state, NULL);
	unsigned char a[TORN_SECTORS], b[TORN_SECTORS];
	long long applied;
	int n;

	n = torn_run(f, "cut torn 42", a, &applied);
	assert_int_equal(n, applied);
	assert_true(n > 0);
	assert_true(n < TORN_SECTORS);
	/* the same seed on the same state lands the same sectors, given on
	 * the command or on the command line */
	remount(f, NULL);
	assert_int_equal(torn_run(f, "cut torn 42", b, &applied), n);
	assert_memory_equal(a, b, sizeof a);
	remount(f, (const char *const[]){"--seed", "42", NULL});
	assert_int_equal(torn_run(f, "cut torn", b, &applied), n);
	assert_memory_equal(a, b, sizeof a);
	log_has(f, "cut torn (seed 42)");
	/* another seed, another subset */
	remount(f, NULL);
	n = torn_run(f, "cut torn 43", b, &applied);
	assert_int_equal(n, applied);
	assert_memory_not_equal(a, b, sizeof a);
}

/* a listing of the disk: names, sizes, modes and a checksum of contents */
static void snapshot_into(const char *dir, const char *rel, char *out, size_t cap)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char sub[PATH_MAX], relsub[PATH_MAX];

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;
		uint64_t h = 1469598103934665603ull;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		P(sub, dir, de->d_name);
		snprintf(relsub, sizeof relsub, "%s/%s", rel, de->d_name);
		if (lstat(sub, &st) != 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			char buf[4096];
			int fd = open(sub, O_RDONLY);
			ssize_t r, i;

			while (fd >= 0 && (r = read(fd, buf, sizeof buf)) > 0)
				for (i = 0; i < r; i++)
					h = (h ^ (unsigned char)buf[i]) * 1099511628211ull;
			if (fd >= 0)
				close(fd);
		}
		snprintf(out + strlen(out), cap - strlen(out), "%s %o %lld %016" PRIx64 "\n", relsub,
			 st.st_mode, (long long)st.st_size, h);
		if (S_ISDIR(st.st_mode))
			snapshot_into(sub, relsub, out, cap);
	}
	closedir(d);
}

static char *snapshot(const char *dir)
{
	char *s = calloc(1, 65536);

	snapshot_into(dir, "", s, 65536);
	return s;
}

/* 5. after a cut: EIO for everything, nothing reaches the disk */
static void test_dead_after_cut(void **state)
{
	struct fx *f = started(state, NULL);
	char p[PATH_MAX], q[PATH_MAX], buf[64];
	char *before, *after;
	int wfd, rfd, dfd, go[2], done[2];
	struct stat st;
	struct statvfs sv;
	pid_t kid;

	assert_int_equal(put(M(f, p, "a"), "aaaa", 1), 0);
	assert_int_equal(mkdir(M(f, p, "d"), 0755), 0);
	assert_int_equal(write_at(M(f, p, "map"), O_TRUNC, "\0\0\0\0\0\0\0\0", 8, 1), 0);
	assert_int_equal(fsync_dir(f->mnt), 0);
	assert_true((wfd = open(M(f, p, "a"), O_WRONLY)) >= 0);
	assert_true((rfd = open(M(f, p, "a"), O_RDONLY)) >= 0);
	assert_true((dfd = open(f->mnt, O_RDONLY | O_DIRECTORY)) >= 0);

	/* a child with a dirty shared mapping it unmaps after the cut */
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(done), 0);
	kid = kid_fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		int fd = open(M(f, p, "map"), O_RDWR);
		char *m = fd < 0 ? MAP_FAILED : mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		char c;

		if (m == MAP_FAILED)
			_exit(1);
		memcpy(m, "mmapdirt", 8);
		if (write(done[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(2);
		signal(SIGBUS, SIG_DFL);
		munmap(m, 8);
		close(fd);
		_exit(0);
	}
	f->kids[f->nkids++] = kid;
	assert_int_equal(read(done[0], buf, 1), 1);

	cut(f, "cut");
	before = snapshot(f->back);
	assert_int_equal(write(go[1], "g", 1), 1);
	kid_wait(kid);
	f->nkids = 0;

#define EIO_CALL(call)                                                                             \
	do {                                                                                       \
		errno = 0;                                                                         \
		assert_true((call) < 0);                                                           \
		assert_int_equal(errno, EIO);                                                      \
	} while (0)
	EIO_CALL(stat(M(f, p, "a"), &st));
	EIO_CALL(stat(f->mnt, &st));
	EIO_CALL(open(M(f, p, "a"), O_RDONLY));
	EIO_CALL(open(M(f, p, "new"), O_WRONLY | O_CREAT, 0644));
	EIO_CALL(mkdir(M(f, p, "d2"), 0755));
	EIO_CALL(unlink(M(f, p, "a")));
	EIO_CALL(rmdir(M(f, p, "d")));
	EIO_CALL(rename(M(f, p, "a"), M(f, q, "b")));
	EIO_CALL(write(wfd, "zz", 2));
	EIO_CALL(pwrite(wfd, "zz", 2, 100));
	EIO_CALL(ftruncate(wfd, 0));
	EIO_CALL(read(rfd, buf, 4));
	EIO_CALL(fsync(wfd));
	EIO_CALL(fsync(dfd));
	EIO_CALL(statvfs(f->mnt, &sv));
	EIO_CALL(chmod(M(f, p, "a"), 0600));
	errno = 0;
	assert_null(opendir(M(f, p, "d")));
	assert_int_equal(errno, EIO);
	close(wfd);
	close(rfd);
	close(dfd);

	after = snapshot(f->back);
	assert_string_equal(before, after);
	free(after);
	/* the unmount flushes nothing either */
	assert_int_equal(pc_stop(f), 0);
	after = snapshot(f->back);
	assert_string_equal(before, after);
	assert_non_null(strstr(before, "/a 100644 4 "));
	log_has(f, "unmounted after the cut");
	free(after);
	free(before);
}

/* ---- SQLite through the mount */

struct sqlrun {
	const char *sync; /* FULL or NORMAL (raw SQLite), BOX (db.c at DB_SYNC_FULL) */
	const char *cut;
};

static int sql_exec(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* each commit that returned, logged outside the mount */
static void log_commit(int logfd, int seq)
{
	char line[32];
	int n = snprintf(line, sizeof line, "%d\n", seq);

	if (write(logfd, line, (size_t)n) != n)
		_exit(4);
}

static void log_failure(const char *logpath, int code, int seq, const char *msg)
{
	char e[160];
	FILE *ef;

	snprintf(e, sizeof e, "%s.err", logpath);
	if ((ef = fopen(e, "w"))) {
		fprintf(ef, "%d after %d: %s\n", code, seq - 1, msg);
		fclose(ef);
	}
}

/* a writer: one row per transaction, each commit logged outside the mount */
static void sql_writer(const char *dbpath, const char *sync, int who, const char *logpath)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char pragma[64];
	int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644), seq;

	if (logfd < 0 || sqlite3_open(dbpath, &db) != SQLITE_OK)
		_exit(2);
	sqlite3_busy_timeout(db, 20000);
	snprintf(pragma, sizeof pragma, "PRAGMA synchronous=%s", sync);
	/* frequent checkpoints: the database file is written and synced
	 * and the WAL restarted while the cut may come */
	if (sql_exec(db, pragma) != SQLITE_OK || sql_exec(db, "PRAGMA wal_autocheckpoint=50") != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "INSERT INTO t(who, seq, pad) VALUES(?, ?, randomblob(300))", -1,
			       &st, NULL) != SQLITE_OK)
		_exit(3);
	for (seq = 1;; seq++) {
		sqlite3_bind_int(st, 1, who);
		sqlite3_bind_int(st, 2, seq);
		if (sqlite3_step(st) != SQLITE_DONE) {
			log_failure(logpath, sqlite3_extended_errcode(db), seq, sqlite3_errmsg(db));
			break;
		}
		sqlite3_reset(st);
		log_commit(logfd, seq);
		msleep(1); /* the other writer gets the lock too */
	}
	_exit(0);
}

/* the box's own durable commit: a db.c connection at DB_SYNC_FULL, which
 * commits at NORMAL and fsyncs the WAL after the lock is released */
static void box_writer(const char *dbpath, int who, const char *logpath)
{
	struct db *db;
	struct db_stmt *st;
	int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644), seq;

	if (logfd < 0 || db_open(dbpath, 0, DB_SYNC_FULL, &db) != SD_OK)
		_exit(2);
	for (seq = 1;; seq++) {
		if (!(st = db_stmt(db, "INSERT INTO t(who, seq, pad) VALUES(?1, ?2, randomblob(300))")))
			_exit(3);
		db_bind_int(st, 1, who);
		db_bind_int(st, 2, seq);
		if (db_run(st) != SD_OK) {
			log_failure(logpath, 0, seq, err_msg());
			break;
		}
		log_commit(logfd, seq);
		msleep(1);
	}
	_exit(0);
}

static int last_logged(const char *logpath)
{
	char buf[64];
	int fd = open(logpath, O_RDONLY | O_CLOEXEC);
	off_t end = fd < 0 ? 0 : lseek(fd, 0, SEEK_END);
	off_t at = end > 40 ? end - 40 : 0;
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, (size_t)(end - at), at);
	char *p;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = 0;
	p = strrchr(buf, '\n');
	return atoi(p ? p + 1 : buf);
}

static const char SQL_TABLE_T[] =
	"CREATE TABLE t(id INTEGER PRIMARY KEY, who INT, seq INT, pad BLOB, UNIQUE(who, seq))";

static void sql_scenario(struct fx *f, const struct sqlrun *run)
{
	char dbp[PATH_MAX], logs[2][PATH_MAX];
	sqlite3 *db;
	sqlite3_stmt *st;
	int i, w, box = !strcmp(run->sync, "BOX");

	M(f, dbp, "app.db");
	for (w = 0; w < 2; w++)
		snprintf(logs[w], sizeof logs[w], "%s/writer%d.log", f->root, w);
	if (box) {	/* the box's schema, and the writers' table beside it */
		struct db *bdb;

		assert_int_equal(db_open(dbp, DB_OPEN_CREATE, DB_SYNC_FULL, &bdb), SD_OK);
		assert_int_equal(db_exec(bdb, SQL_TABLE_T), SD_OK);
		db_close(bdb);
	} else {
		assert_int_equal(sqlite3_open(dbp, &db), SQLITE_OK);
		assert_int_equal(sql_exec(db, "PRAGMA journal_mode=WAL"), SQLITE_OK);
		assert_int_equal(sql_exec(db, SQL_TABLE_T), SQLITE_OK);
		sqlite3_close(db);
	}
	/* SQLite syncs the folder for a new WAL, not for a new database file */
	assert_int_equal(fsync_dir(f->mnt), 0);

	for (w = 0; w < 2; w++) {
		pid_t kid = kid_fork();

		assert_true(kid >= 0);
		if (kid == 0 && box)
			box_writer(dbp, w, logs[w]);
		else if (kid == 0)
			sql_writer(dbp, run->sync, w, logs[w]);
		f->kids[f->nkids++] = kid;
	}
	/* cut while both write, once each has committed enough */
	for (i = 0; i < 3000; i++) {
		if (last_logged(logs[0]) >= 150 && last_logged(logs[1]) >= 150)
			break;
		msleep(10);
	}
	assert_true(i < 3000);
	/* both still writing: the cut, not some other error, ends them */
	for (w = 0; w < 2; w++)
		assert_int_equal(waitpid(f->kids[w], NULL, WNOHANG), 0);
	cut(f, run->cut);
	for (w = 0; w < 2; w++)
		kid_wait(f->kids[w]);
	f->nkids = 0;
	remount(f, NULL);

	assert_int_equal(sqlite3_open(dbp, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
	sqlite3_finalize(st);
	for (w = 0; w < 2; w++) {
		int logged = last_logged(logs[w]), cnt, mx;

		assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*), max(seq) FROM t WHERE who=?",
						    -1, &st, NULL),
				 SQLITE_OK);
		sqlite3_bind_int(st, 1, w);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		cnt = sqlite3_column_int(st, 0);
		mx = sqlite3_column_int(st, 1);
		sqlite3_finalize(st);
		/* commits are whole and in order: 1..max, no gaps */
		assert_int_equal(cnt, mx);
		if (!strcmp(run->sync, "FULL") || box)
			assert_true(mx >= logged); /* every commit that returned */
		fprintf(stderr, "    %s, %s: writer %d logged %d commits, %d survived\n", run->sync,
			run->cut, w, logged, mx);
	}
	sqlite3_close(db);
}

/* 6. SQLite WAL, two processes, cut while they commit */
static void test_sqlite_full(void **state)
{
	struct fx *f = started(state, NULL);

	sql_scenario(f, &(struct sqlrun){"FULL", "cut"});
}

static void test_sqlite_full_torn(void **state)
{
	struct fx *f = started(state, NULL);

	sql_scenario(f, &(struct sqlrun){"FULL", "cut torn 5"});
}

static void test_sqlite_normal_torn(void **state)
{
	struct fx *f = started(state, NULL);

	sql_scenario(f, &(struct sqlrun){"NORMAL", "cut torn 6"});
}

/* the box's FULL (db.c): the fsync after the commit, outside the lock */
static void test_box_full_torn(void **state)
{
	struct fx *f = started(state, NULL);

	sql_scenario(f, &(struct sqlrun){"BOX", "cut torn 7"});
}

static void test_box_full(void **state)
{
	struct fx *f = started(state, NULL);

	sql_scenario(f, &(struct sqlrun){"BOX", "cut"});
}

/* 7. faults: every Nth write EIO, ENOSPC past a byte budget, counted */
static void test_faults(void **state)
{
	struct fx *f = started(state, (const char *const[]){"--eio-every", "3", NULL});
	char p[PATH_MAX], chunk[4096], buf[8192];
	const char *r;
	int fd, i, e;

	memset(chunk, 'w', sizeof chunk);
	assert_true((fd = open(M(f, p, "f"), O_WRONLY | O_CREAT, 0644)) >= 0);
	for (i = 1; i <= 9; i++) {
		ssize_t w = pwrite(fd, chunk, 100, (off_t)(i - 1) * 100);

		if (i % 3 == 0) {
			assert_int_equal(w, -1);
			assert_int_equal(errno, EIO);
		} else {
			assert_int_equal(w, 100);
		}
	}
	r = pc_ctl(f, "stats");
	assert_int_equal(field(r, "eio"), 3);
	assert_int_equal(field(r, "writes"), 9);
	/* a failed write changed nothing: size is the end of the 8th */
	assert_int_equal(get(M(f, p, "f"), buf, sizeof buf), 800);
	assert_memory_equal(buf + 300, "ww", 2);
	assert_int_equal(buf[250], 0); /* the 3rd failed */
	r = pc_ctl(f, "eio off");
	assert_memory_equal(r, "ok", 2);
	for (i = 0; i < 5; i++)
		assert_int_equal(pwrite(fd, chunk, 10, 0), 10);
	r = pc_ctl(f, "eio every 2");
	assert_int_equal(pwrite(fd, chunk, 10, 0), 10);
	assert_int_equal(pwrite(fd, chunk, 10, 0), -1);
	assert_int_equal(errno, EIO);
	assert_int_equal(field(pc_ctl(f, "stats"), "eio"), 4);
	close(fd);
	assert_int_equal(pc_stop(f), 0);
	log_has(f, "faults injected: eio=4 enospc=0");

	assert_int_equal(pc_start(f, (const char *const[]){"--enospc-after", "10000", NULL}), 0);
	assert_true((fd = open(M(f, p, "g"), O_WRONLY | O_CREAT, 0644)) >= 0);
	assert_int_equal(write(fd, chunk, 4096), 4096);
	assert_int_equal(write(fd, chunk, 4096), 4096);
	assert_int_equal(write(fd, chunk, 4096), -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(write(fd, chunk, 4096), -1);
	assert_int_equal(errno, ENOSPC);
	assert_int_equal(write(fd, chunk, 1808), 1808); /* exactly the budget */
	assert_int_equal(write(fd, chunk, 1), -1);
	assert_int_equal(errno, ENOSPC);
	r = pc_ctl(f, "stats");
	assert_int_equal(field(r, "enospc"), 3);
	assert_int_equal(field(r, "accepted"), 10000);
	assert_memory_equal(pc_ctl(f, "enospc off"), "ok", 2);
	assert_int_equal(write(fd, chunk, 4096), 4096);
	assert_memory_equal(pc_ctl(f, "enospc on"), "ok", 2);
	assert_int_equal(write(fd, chunk, 1), -1);
	assert_int_equal(errno, ENOSPC);
	/* an allocation past the end takes space too */
	e = posix_fallocate(fd, 0, 1 << 20);
	assert_int_equal(e, ENOSPC);
	assert_memory_equal(pc_ctl(f, "enospc after 4096"), "ok", 2);
	assert_int_equal(write(fd, chunk, 4096), 4096);
	assert_int_equal(write(fd, chunk, 1), -1);
	close(fd);
	assert_int_equal(field(pc_ctl(f, "stats"), "enospc"), 6);
	assert_int_equal(pc_stop(f), 0);
	log_has(f, "faults injected: eio=0 enospc=6");
}

/* 8. shared writable maps from two processes see each other */
static void test_mmap_shared(void **state)
{
	struct fx *f = started(state, NULL);
	char p[PATH_MAX], q[PATH_MAX], c, buf[8193];
	int fd, a[2], b[2];
	char *m;
	pid_t kid;

	assert_true((fd = open(M(f, p, "shm"), O_RDWR | O_CREAT, 0644)) >= 0);
	assert_int_equal(posix_fallocate(fd, 0, 8192), 0);
	m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(m != MAP_FAILED);
	assert_int_equal(pipe(a), 0);
	assert_int_equal(pipe(b), 0);
	kid = kid_fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		int cfd = open(M(f, p, "shm"), O_RDWR);
		char *cm = cfd < 0 ? MAP_FAILED
				   : mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);

		if (cm == MAP_FAILED || read(a[0], &c, 1) != 1)
			_exit(1);
		if (memcmp(cm + 100, "from parent", 11) != 0)
			_exit(2);
		memcpy(cm + 5000, "from child", 10);
		if (write(b[1], "k", 1) != 1)
			_exit(3);
		_exit(0);
	}
	f->kids[f->nkids++] = kid;
	memcpy(m + 100, "from parent", 11);
	assert_int_equal(write(a[1], "p", 1), 1);
	assert_int_equal(read(b[0], &c, 1), 1);
	assert_memory_equal(m + 5000, "from child", 10);
	{
		int status;

		status = kid_wait(kid);
		f->nkids = 0;
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	/* through write(2) readers too, and onto the disk on msync + fsync */
	assert_int_equal(get(M(f, q, "shm"), buf, sizeof buf), 8192);
	assert_memory_equal(buf + 5000, "from child", 10);
	assert_int_equal(msync(m, 8192, MS_SYNC), 0);
	assert_int_equal(fsync(fd), 0);
	assert_int_equal(get(B(f, q, "shm"), buf, sizeof buf), 8192);
	assert_memory_equal(buf + 100, "from parent", 11);
	assert_memory_equal(buf + 5000, "from child", 10);
	munmap(m, 8192);
	close(fd);
}

/* what the appliance needs besides: O_EXCL, O_APPEND, locks, modes, ... */
static void test_posix_basics(void **state)
{
	struct fx *f = started(state, NULL);
	char p[PATH_MAX], q[PATH_MAX], buf[256];
	struct stat st, bst;
	struct statvfs sv, bsv;
	int fd, fd2, status;
	pid_t kid;

	/* O_EXCL */
	assert_true((fd = open(M(f, p, "x"), O_WRONLY | O_CREAT | O_EXCL, 0640)) >= 0);
	close(fd);
	assert_int_equal(open(M(f, p, "x"), O_WRONLY | O_CREAT | O_EXCL, 0640), -1);
	assert_int_equal(errno, EEXIST);
	assert_int_equal(stat(B(f, q, "x"), &bst), 0);
	assert_int_equal(bst.st_mode & 07777, 0640);
	/* O_APPEND from two descriptors */
	assert_true((fd = open(M(f, p, "log"), O_WRONLY | O_CREAT | O_APPEND, 0644)) >= 0);
	assert_true((fd2 = open(M(f, p, "log"), O_WRONLY | O_APPEND)) >= 0);
	assert_int_equal(write(fd, "one.", 4), 4);
	assert_int_equal(write(fd2, "two.", 4), 4);
	assert_int_equal(write(fd, "three", 5), 5);
	close(fd);
	close(fd2);
	assert_int_equal(get(M(f, p, "log"), buf, sizeof buf), 13);
	assert_string_equal(buf, "one.two.three");
	/* O_TRUNC */
	assert_int_equal(put(M(f, p, "log"), "t", 0), 0);
	assert_int_equal(stat(M(f, p, "log"), &st), 0);
	assert_int_equal(st.st_size, 1);
	/* rename over an existing file */
	assert_int_equal(put(M(f, p, "r1"), "r1", 0), 0);
	assert_int_equal(put(M(f, p, "r2"), "r2", 0), 0);
	assert_int_equal(rename(M(f, p, "r1"), M(f, q, "r2")), 0);
	assert_int_equal(get(M(f, p, "r2"), buf, sizeof buf), 2);
	assert_string_equal(buf, "r1");
	assert_false(exists(M(f, p, "r1")));
	/* rmdir of a non-empty folder fails, and does not move it */
	assert_int_equal(mkdir(M(f, p, "dd"), 0755), 0);
	assert_int_equal(put(M(f, p, "dd/in"), "i", 0), 0);
	assert_int_equal(rmdir(M(f, p, "dd")), -1);
	assert_int_equal(errno, ENOTEMPTY);
	assert_true(exists(M(f, p, "dd/in")));
	/* directory fsync on an O_RDONLY|O_DIRECTORY descriptor */
	assert_int_equal(fsync_dir(f->mnt), 0);
	/* chmod, utimens pass through */
	assert_int_equal(chmod(M(f, p, "x"), 0604), 0);
	assert_int_equal(stat(B(f, q, "x"), &bst), 0);
	assert_int_equal(bst.st_mode & 07777, 0604);
	{
		struct timespec ts[2] = {{1000000000, 0}, {1200000000, 5}};

		assert_int_equal(utimensat(AT_FDCWD, M(f, p, "x"), ts, 0), 0);
		assert_int_equal(stat(B(f, q, "x"), &bst), 0);
		assert_int_equal(bst.st_mtim.tv_sec, 1200000000);
		assert_int_equal(stat(M(f, p, "x"), &st), 0);
		assert_int_equal(st.st_mtim.tv_sec, 1200000000);
	}
	/* statfs passes through */
	assert_int_equal(statvfs(f->mnt, &sv), 0);
	assert_int_equal(statvfs(f->back, &bsv), 0);
	assert_int_equal(sv.f_blocks, bsv.f_blocks);
	assert_int_equal(sv.f_bsize, bsv.f_bsize);
	/* modes are enforced for other users */
	assert_int_equal(put(M(f, p, "secret"), "s", 0), 0);
	assert_int_equal(chmod(M(f, p, "secret"), 0600), 0);
	kid = kid_fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		if (setgid(65534) != 0 || setuid(65534) != 0)
			_exit(9);
		if (open(M(f, p, "secret"), O_RDONLY) >= 0)
			_exit(1);
		if (errno != EACCES)
			_exit(2);
		if (open(M(f, p, "log"), O_RDONLY) < 0) /* 0644: readable */
			_exit(3);
		_exit(0);
	}
	f->kids[f->nkids++] = kid;
	status = kid_wait(kid);
	f->nkids = 0;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* POSIX and flock locks between processes */
	assert_true((fd = open(M(f, p, "lock"), O_RDWR | O_CREAT, 0644)) >= 0);
	{
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10};

		assert_int_equal(fcntl(fd, F_SETLK, &fl), 0);
		assert_int_equal(flock(fd, LOCK_EX), 0);
	}
	kid = kid_fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		int cfd = open(M(f, p, "lock"), O_RDWR);
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 5, .l_len = 1};

		if (cfd < 0)
			_exit(1);
		if (fcntl(cfd, F_SETLK, &fl) == 0 || (errno != EAGAIN && errno != EACCES))
			_exit(2);
		if (flock(cfd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK)
			_exit(3);
		fl.l_start = 20;
		if (fcntl(cfd, F_SETLK, &fl) != 0)
			_exit(4);
		_exit(0);
	}
	f->kids[f->nkids++] = kid;
	status = kid_wait(kid);
	f->nkids = 0;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	close(fd);
	/* fallocate: the op, then glibc's fallback when it is refused */
	assert_true((fd = open(M(f, p, "fa"), O_RDWR | O_CREAT, 0644)) >= 0);
	assert_int_equal(posix_fallocate(fd, 0, 100000), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 100000);
	assert_int_equal(stat(B(f, q, "fa"), &bst), 0);
	assert_int_equal(bst.st_size, 0); /* not synced yet */
	assert_int_equal(fsync(fd), 0);
	assert_int_equal(stat(B(f, q, "fa"), &bst), 0);
	assert_int_equal(bst.st_size, 100000);
	close(fd);
	/* readdir sees the names */
	{
		DIR *d = opendir(f->mnt);
		struct dirent *de;
		int seen = 0;

		assert_non_null(d);
		while ((de = readdir(d)))
			seen += !strcmp(de->d_name, "x") || !strcmp(de->d_name, "r2") ||
				!strcmp(de->d_name, "dd");
		closedir(d);
		assert_int_equal(seen, 3);
	}

	remount(f, (const char *const[]){"--no-fallocate", NULL});
	assert_true((fd = open(M(f, p, "fb"), O_RDWR | O_CREAT, 0644)) >= 0);
	assert_int_equal(write(fd, "keep", 4), 4);
	assert_int_equal(posix_fallocate(fd, 0, 3 * 4096 + 7), 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 3 * 4096 + 7);
	assert_int_equal(pread(fd, buf, 4, 0), 4);
	assert_memory_equal(buf, "keep", 4);
	assert_int_equal(pread(fd, buf, 8, 3 * 4096 - 1), 8);
	assert_memory_equal(buf, "\0\0\0\0\0\0\0\0", 8);
	close(fd);
	assert_true(field(pc_ctl(f, "stats"), "writes") >= 3); /* the fallback wrote */
	/* a clean unmount writes everything */
	assert_int_equal(pc_stop(f), 0);
	assert_int_equal(stat(B(f, q, "fb"), &bst), 0);
	assert_int_equal(bst.st_size, 3 * 4096 + 7);
	log_has(f, "unmounted: wrote ");
	assert_false(exists(B(f, q, ".powercut-stash")));
}

/* wait until the mount answers EIO: the cut is done */
static int wait_dead(struct fx *f)
{
	struct stat st;
	int i;

	for (i = 0; i < 500; i++) {
		if (stat(f->mnt, &st) != 0 && errno == EIO)
			return 0;
		msleep(10);
	}
	return -1;
}

/* SIGUSR1 cuts clean, SIGUSR2 torn */
static void test_signals(void **state)
{
	struct fx *f = started(state, NULL);
	char p[PATH_MAX], buf[64];

	assert_int_equal(put(M(f, p, "a"), "durable", 1), 0);
	assert_int_equal(fsync_dir(f->mnt), 0);
	assert_int_equal(put(M(f, p, "a"), "volatile", 0), 0);
	assert_int_equal(kill(f->pid, SIGUSR1), 0);
	assert_int_equal(wait_dead(f), 0);
	log_has(f, "cut clean: dropped 512 dirty bytes, undid 0 namespace changes");
	remount(f, NULL);
	assert_int_equal(get(M(f, p, "a"), buf, sizeof buf), 7);
	assert_string_equal(buf, "durable");
	assert_int_equal(put(M(f, p, "a"), "volatile", 0), 0);
	assert_int_equal(put(M(f, p, "b"), "new", 0), 0);
	assert_int_equal(kill(f->pid, SIGUSR2), 0);
	assert_int_equal(wait_dead(f), 0);
	log_has(f, "of 2 dirty sectors, undid 1 namespace changes (0 failed)");
	remount(f, NULL);
	assert_false(exists(M(f, p, "b")));
	assert_true(get(M(f, p, "a"), buf, sizeof buf) > 0);
	assert_true(!strcmp(buf, "durable") || !strcmp(buf, "volatile"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_data_until_fsync, setup, teardown),
		cmocka_unit_test_setup_teardown(test_names_until_dir_fsync, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dependencies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_atomic_replace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_torn_sectors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dead_after_cut, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_full_torn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_normal_torn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_box_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_box_full_torn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_faults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mmap_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_posix_basics, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signals, setup, teardown),
	};

	if (getenv("POWERCUT_TESTS"))
		cmocka_set_test_filter(getenv("POWERCUT_TESTS"));
	bin = getenv("POWERCUT") ? getenv("POWERCUT") : "build/powercut";
	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0 || access(bin, X_OK) != 0)
		fprintf(stderr, "test_powercut: needs root, /dev/fuse and %s: skipping\n", bin);
	else
		can_mount = 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
