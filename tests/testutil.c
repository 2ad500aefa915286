/*
 * testutil.c: temp directories, fake clock set-up and child processes.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "testutil.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "notify.h"
#include "queue.h"

extern char **environ;

/*
 * tu_exec: run argv[0] (found on PATH) with stdout to out_path and stderr
 * to err_path (NULL: /dev/null), wait up to timeout_ms.  Returns the exit
 * status, -1 for a signal death; fails the test on a timeout.
 */
int tu_exec(const char *const *argv, const char *out_path, const char *err_path,
		      int timeout_ms)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, out_path ? out_path : "/dev/null",
					 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addopen(&fa, 2, err_path ? err_path : "/dev/null",
					 O_WRONLY | O_CREAT | O_TRUNC, 0644);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		fail_msg("cannot run %s: %s", argv[0], strerror(rc));
	rc = tu_wait(pid, timeout_ms);
	if (rc == -2) {
		kill(pid, SIGKILL);
		tu_wait(pid, 5000);
		fail_msg("%s did not finish within %d ms", argv[0], timeout_ms);
	}
	return rc;
}

void tu_fail_free(void *a, void *b, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	free(a);
	free(b);
	print_error("%s\n", msg ? msg : fmt);
	free(msg);
	fail();
}

static int make_env(void **state, int with_db)
{
	struct tu_env *e = calloc(1, sizeof *e);
	const char *tmp = getenv("TMPDIR");

	assert_non_null(e);
	snprintf(e->dir, sizeof e->dir, "%s/stagedoor-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(e->dir));
	snprintf(e->db_path, sizeof e->db_path, "%s/stagedoor.db", e->dir);
	clock_fake_set(1000000000LL);
	queue_policy_reset();
	notify_stop_reset();
	if (with_db)
		assert_int_equal(db_open(e->db_path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &e->db), SD_OK);
	*state = e;
	return 0;
}

int tu_setup(void **state)
{
	return make_env(state, 1);
}

int tu_setup_nodb(void **state)
{
	return make_env(state, 0);
}

int tu_setup_real(void **state)
{
	int r = make_env(state, 1);

	clock_real();
	return r;
}

int tu_setup_real_nodb(void **state)
{
	int r = make_env(state, 0);

	clock_real();
	return r;
}

/* ---- children: never leave one running when a test fails ---------------- */

#define TU_MAX_KIDS 32
static pid_t kids[TU_MAX_KIDS];

static void kids_add(pid_t pid)
{
	int i;

	for (i = 0; i < TU_MAX_KIDS; i++) {
		if (kids[i] == 0) {
			kids[i] = pid;
			return;
		}
	}
}

static void kids_forget(pid_t pid)
{
	int i;

	for (i = 0; i < TU_MAX_KIDS; i++)
		if (kids[i] == pid)
			kids[i] = 0;
}

static void kids_kill_all(void)
{
	int i;

	for (i = 0; i < TU_MAX_KIDS; i++) {
		if (kids[i] > 0) {
			kill(kids[i], SIGKILL);
			tu_wait(kids[i], 5000);
			kids[i] = 0;
		}
	}
}

int tu_reap(pid_t pid, int timeout_ms, const char *what)
{
	int rc = tu_wait(pid, timeout_ms);

	if (rc == -2) {
		kill(pid, SIGKILL);
		tu_wait(pid, 5000);
	}
	kids_forget(pid);
	if (rc == -2)
		fail_msg("%s did not finish within %d ms", what, timeout_ms);
	return rc;
}

unsigned char *tu_slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*size = (size_t)n;
	return buf;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

int tu_teardown(void **state)
{
	struct tu_env *e = *state;

	kids_kill_all();
	db_close(e->db);
	nftw(e->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	clock_real();
	queue_policy_reset();
	notify_stop_reset();
	free(e);
	return 0;
}

const char *tu_bin(void)
{
	const char *b = getenv("STAGEDOOR_BIN");
	return b && *b ? b : "bin/stagedoor";
}

static pid_t spawn(const char *const *argv, int out_fd, int err_fd)
{
	const char *args[64];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int i, n = 0, rc;

	args[n++] = tu_bin();
	for (i = 0; argv[i] && n < 63; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (out_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
	else
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	if (err_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
	else
		posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawn(&pid, args[0], &fa, NULL, (char *const *)args, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		fprintf(stderr, "cannot run %s: %s\n", args[0], strerror(rc));
		return -1;
	}
	return pid;
}

static void slurp(FILE *f, char *buf, size_t size)
{
	size_t n;

	if (!buf || size == 0)
		return;
	rewind(f);
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
}

int tu_run(char *out, size_t out_size, char *err, size_t err_size, const char *const *argv)
{
	FILE *fo = tmpfile(), *fe = tmpfile();
	pid_t pid;
	int status = -1;

	assert_non_null(fo);
	assert_non_null(fe);
	pid = spawn(argv, fileno(fo), fileno(fe));
	assert_true(pid > 0);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	slurp(fo, out, out_size);
	slurp(fe, err, err_size);
	fclose(fo);
	fclose(fe);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

pid_t tu_spawn(const char *const *argv, const char *log_path)
{
	int fd = -1;
	pid_t pid;

	if (log_path) {
		fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
		assert_true(fd >= 0);
	}
	pid = spawn(argv, fd, fd);
	if (fd >= 0)
		close(fd);
	assert_true(pid > 0);
	kids_add(pid);
	return pid;
}

int tu_wait(pid_t pid, int timeout_ms)
{
	int status, waited = 0;

	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (r < 0 && errno != EINTR)
			return -1;
		if (waited >= timeout_ms)
			return -2;
		tu_sleep_ms(10);
		waited += 10;
	}
}

void tu_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int64_t tu_count(const char *db_path, const char *sql)
{
	struct db *db;
	struct db_stmt *st;
	int64_t v = -1;
	int row = 0;

	if (db_open(db_path, 0, DB_SYNC_NORMAL, &db) != SD_OK)
		fail_msg("tu_count: %s", err_msg());
	st = db_stmt(db, sql);
	if (!st || db_step(st, &row) != SD_OK)
		fail_msg("tu_count: %s: %s", sql, err_msg());
	if (row)
		v = db_col_int(st, 0);
	db_reset(st);
	db_close(db);
	return v;
}

int64_t tu_countf(const char *db_path, const char *fmt, ...)
{
	char sql[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof sql, fmt, ap);
	va_end(ap);
	return tu_count(db_path, sql);
}

int tu_count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}
