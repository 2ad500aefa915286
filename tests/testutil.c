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
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "event_edit.h"
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

/* ---- the engine under test ------------------------------------------------ */

const char *tu_pg_base(void)
{
	const char *u = getenv("STAGEDOOR_TEST_PG");
	return u && *u ? u : NULL;
}

int tu_pg(void)
{
	return tu_pg_base() != NULL;
}

static void pg_quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

void tu_pg_admin(const char *sql)
{
	PGconn *c = PQconnectdb(tu_pg_base());
	PGresult *res;

	if (PQstatus(c) != CONNECTION_OK) {
		print_error("cannot connect to %s: %s", tu_pg_base(), PQerrorMessage(c));
		PQfinish(c);
		fail();
	}
	PQsetNoticeProcessor(c, pg_quiet, NULL);
	res = PQexec(c, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
		print_error("%s: %s", sql, PQerrorMessage(c));
		PQclear(res);
		PQfinish(c);
		fail();
	}
	PQclear(res);
	PQfinish(c);
}

const char *tu_state(const struct tu_env *e)
{
	return e->pg_schema[0] ? e->dir : NULL;
}

int64_t tu_pg_int(const char *sql)
{
	PGconn *c = PQconnectdb(tu_pg_base());
	PGresult *res = PQexec(c, sql);
	int64_t v = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0)
		v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	else
		print_error("%s: %s", sql, PQerrorMessage(c));
	PQclear(res);
	PQfinish(c);
	return v;
}

/* On PostgreSQL each test has a schema of its own (sdt_<pid>_<n>), named in
 * the URI's search_path, made here and dropped by tu_teardown. */
static void pg_fresh(struct tu_env *e)
{
	static int n;
	const char *base = tu_pg_base();
	char sql[200];

	snprintf(e->pg_schema, sizeof e->pg_schema, "sdt_%d_%d", (int)getpid(), ++n);
	snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE; CREATE SCHEMA %s",
		 e->pg_schema, e->pg_schema);
	tu_pg_admin(sql);
	snprintf(e->db_path, sizeof e->db_path, "%s%coptions=-csearch_path%%3D%s", base,
		 strchr(base, '?') ? '&' : '?', e->pg_schema);
	/* the commands a test runs keep their files in the test's folder */
	setenv("STAGEDOOR_STATE_DIR", e->dir, 1);
}

static int make_env(void **state, int with_db)
{
	struct tu_env *e = calloc(1, sizeof *e);
	const char *tmp = getenv("TMPDIR");

	assert_non_null(e);
	snprintf(e->dir, sizeof e->dir, "%s/stagedoor-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(e->dir));
	snprintf(e->db_path, sizeof e->db_path, "%s/stagedoor.db", e->dir);
	if (tu_pg())
		pg_fresh(e);
	clock_fake_set(1000000000LL);
	/* reminders (jobs scheduled a day ahead of an event) are off unless a
	 * test turns them on (tu_reminders): the commands it runs and this
	 * process alike */
	tu_reminders(0);
	queue_policy_reset();
	notify_stop_reset();
	if (with_db && db_open(e->db_path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &e->db) != SD_OK)
		fail_msg("the test's database: %s", err_msg());
	*state = e;
	return 0;
}

void tu_reminders(int64_t before_ms)
{
	struct event_rules rules = *event_rules_get();
	char v[32];

	snprintf(v, sizeof v, "%lldms", (long long)before_ms);
	setenv("STAGEDOOR_REMIND_BEFORE", v, 1);
	rules.remind_before_ms = before_ms;
	event_rules_set(&rules);
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

void tu_kill_spawned(void)
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

	tu_kill_spawned();
	db_close(e->db);
	if (e->pg_schema[0]) {
		char sql[120];

		snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS %s CASCADE", e->pg_schema);
		tu_pg_admin(sql);
		unsetenv("STAGEDOOR_STATE_DIR");
	}
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

const char *tu_bench_bin(void)
{
	const char *b = getenv("STAGEDOOR_BENCH_BIN");
	return b && *b ? b : "build/stagedoor-bench";
}

static pid_t spawn(const char *const *argv, int out_fd, int err_fd)
{
	const char *args[64];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int i, n = 0, rc;

	if (argv[0] && strcmp(argv[0], "bench") == 0) {
		args[n++] = tu_bench_bin();
		argv++;
	} else if (argv[0] && strcmp(argv[0], "paysink") == 0) {
		const char *ps = getenv("PAYSINK_BIN");

		args[n++] = ps && *ps ? ps : "build/paysink";
		argv++;
	} else {
		args[n++] = tu_bin();
	}
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

void tu_integrity_ok(const char *db_path)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;

	assert_int_equal(sqlite3_open_v2(db_path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
	sqlite3_finalize(st);
	sqlite3_close(h);
}

int tu_count_in(const char *path, const char *needle)
{
	size_t size;
	unsigned char *text;
	const char *p;
	int n = 0;

	if (access(path, F_OK) != 0)
		return 0;
	text = tu_slurp(path, &size);
	for (p = (const char *)text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	free(text);
	return n;
}

void tu_wait_log(const char *path, const char *needle, int n, int timeout_ms)
{
	size_t size;
	unsigned char *text;
	int waited;

	for (waited = 0; waited < timeout_ms; waited += 20) {
		if (tu_count_in(path, needle) >= n)
			return;
		tu_sleep_ms(20);
	}
	text = access(path, F_OK) == 0 ? tu_slurp(path, &size) : NULL;
	tu_fail_free(text, NULL, "waited %d ms for %d x '%s' in the log:\n%s", timeout_ms, n,
		     needle, text ? (char *)text : "(no log)");
}

/* ---- tools/powercut ---------------------------------------------------------- */

const char *tu_powercut_bin(void)
{
	const char *b = getenv("POWERCUT");

	return b && *b ? b : "build/powercut";
}

static void powercut_exec(const struct tu_powercut *pc, const char *const *extra)
{
	const char *argv[32];
	int n = 0, i, fd;

	argv[n++] = tu_powercut_bin();
	argv[n++] = pc->back;
	argv[n++] = pc->mnt;
	argv[n++] = "-f";
	argv[n++] = "--control";
	argv[n++] = pc->ctl;
	for (i = 0; extra && extra[i] && n < 31; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	if ((fd = open(pc->log, O_WRONLY | O_CREAT | O_APPEND, 0600)) >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
	}
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

void tu_powercut_mount(struct tu_powercut *pc, const char *dir, const char *const *extra)
{
	struct stat a, b;
	int i, st;

	memset(pc, 0, sizeof *pc);
	if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0 ||
	    access(tu_powercut_bin(), X_OK) != 0) {
		fprintf(stderr, "needs root, /dev/fuse and %s: skipping\n", tu_powercut_bin());
		TU_SKIP("needs root, /dev/fuse and build/powercut");
	}
	snprintf(pc->back, sizeof pc->back, "%s/disk", dir);
	snprintf(pc->mnt, sizeof pc->mnt, "%s/mnt", dir);
	snprintf(pc->ctl, sizeof pc->ctl, "%s/pc.sock", dir);
	snprintf(pc->log, sizeof pc->log, "%s/powercut.log", dir);
	if ((mkdir(pc->back, 0700) != 0 && errno != EEXIST) ||
	    (mkdir(pc->mnt, 0700) != 0 && errno != EEXIST))
		fail_msg("cannot make %s or %s: %s", pc->back, pc->mnt, strerror(errno));
	if ((pc->pid = fork()) < 0)
		fail_msg("fork: %s", strerror(errno));
	if (pc->pid == 0)
		powercut_exec(pc, extra);
	for (i = 0; i < 500; i++) {
		if (waitpid(pc->pid, &st, WNOHANG) == pc->pid) {
			pc->pid = 0;
			fail_msg("%s did not mount; see %s", tu_powercut_bin(), pc->log);
		}
		if (stat(dir, &a) == 0 && stat(pc->mnt, &b) == 0 && a.st_dev != b.st_dev &&
		    access(pc->ctl, F_OK) == 0)
			return;
		tu_sleep_ms(10);
	}
	fail_msg("%s did not mount within 5 s", tu_powercut_bin());
}

void tu_powercut_ctl(const struct tu_powercut *pc, const char *cmd, char *reply, size_t size)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char buf[1024];
	size_t n = 0;
	ssize_t got;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (strlen(pc->ctl) >= sizeof a.sun_path)
		fail_msg("control socket path too long: %s", pc->ctl);
	memcpy(a.sun_path, pc->ctl, strlen(pc->ctl));
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		if (fd >= 0)
			close(fd);
		fail_msg("powercut %s: cannot connect to %s: %s", cmd, pc->ctl, strerror(errno));
	}
	if (write(fd, cmd, strlen(cmd)) < 0 || write(fd, "\n", 1) < 0) {
		close(fd);
		fail_msg("powercut %s: cannot send: %s", cmd, strerror(errno));
	}
	while (n < sizeof buf - 1 && (got = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
		n += (size_t)got;
	buf[n] = '\0';
	close(fd);
	buf[strcspn(buf, "\n")] = '\0';
	if (strncmp(buf, "ok", 2) != 0)
		fail_msg("powercut %s: %s", cmd, buf);
	if (reply)
		snprintf(reply, size, "%s", buf);
}

void tu_powercut_unmount(struct tu_powercut *pc)
{
	char *text, *line;
	size_t size;
	int st, i;

	if (pc->pid <= 0)
		return;
	umount2(pc->mnt, MNT_DETACH);
	for (i = 0; i < 500 && waitpid(pc->pid, &st, WNOHANG) != pc->pid; i++)
		tu_sleep_ms(10);
	if (i == 500) {
		kill(pc->pid, SIGKILL);
		waitpid(pc->pid, &st, 0);
	}
	pc->pid = 0;
	if (access(pc->log, R_OK) != 0)
		return;
	text = (char *)tu_slurp(pc->log, &size);
	if ((line = strstr(text, "faults injected"))) {
		line[strcspn(line, "\n")] = '\0';
		fprintf(stderr, "powercut: %s\n", line);
	}
	free(text);
}
