/*
 * test_backup_sched.c: the periodic backups `stagedoor run` takes into
 * backup_dir.  First the folder's rules in this process (names, a second
 * backup in the same second, pruning that touches nothing but good backups,
 * partial folders of dead processes, the status /healthz reads); then the
 * real binary: run takes backups on its interval and keeps backup_keep, each
 * one verifies, /healthz and /metrics report the age; a backup killed
 * midway, and a backup_dir that cannot be made, are warnings and a 503
 * while the last good backup stays whole; the next good one clears them.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backup.h"
#include "backup_sched.h"
#include "clock.h"
#include "statedir.h"
#include "testutil.h"

#define OUT_MAX (16 * 1024)
#define HTTP_MAX (64 * 1024)

static char out[OUT_MAX], err[OUT_MAX];

#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })

static int setup_real(void **state)
{
	unsetenv("STAGEDOOR_FAILPOINTS");
	unsetenv("STAGEDOOR_CONFIG");
	unsetenv("STAGEDOOR_BACKUP_DIR");
	setenv("STAGEDOOR_LOG_LEVEL", "info", 1);
	return tu_setup_real(state);
}

static int teardown(void **state)
{
	unsetenv("STAGEDOOR_FAILPOINTS");
	unsetenv("STAGEDOOR_LOG_LEVEL");
	return tu_teardown(state);
}

/* ---- helpers ---------------------------------------------------------- */

/* dead_pid: a pid that was a process of ours and is no more. */
static long dead_pid(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	return (long)pid;
}

static int is_dir(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* names_in: the entries of dir holding part (NULL: any), dot files aside,
 * joined by spaces into buf; their count. */
static int names_in(const char *dir, const char *part, char *buf, size_t size)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t o = 0;
	int n = 0;

	buf[0] = '\0';
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || (part && !strstr(de->d_name, part)))
			continue;
		n++;
		if (o + strlen(de->d_name) + 2 < size)
			o += (size_t)snprintf(buf + o, size - o, "%s ", de->d_name);
	}
	closedir(d);
	return n;
}

/* good_in: the good backups in dir (finished names of ours). */
static int good_in(const char *dir, char *buf, size_t size)
{
	char all[4096], *tok, *save = NULL;
	size_t o = 0;
	int n = 0;

	names_in(dir, BACKUP_SCHED_PREFIX, all, sizeof all);
	buf[0] = '\0';
	for (tok = strtok_r(all, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		if (strstr(tok, ".partial-"))
			continue;
		n++;
		o += (size_t)snprintf(buf + o, size - o, "%s ", tok);
	}
	return n;
}

/* listed: name is one of the space-ended words of list. */
static int listed(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p;

	for (p = list; (p = strstr(p, name)); p += n)
		if ((p == list || p[-1] == ' ') && p[n] == ' ')
			return 1;
	return 0;
}

/* http_port: the port the HTTP child of the run logging to log listens on. */
static int http_port(const char *log)
{
	size_t size;
	unsigned char *text;
	const char *p;
	int port = 0;

	tu_wait_log(log, "msg=\"http listening\"", 1, 20000);
	text = tu_slurp(log, &size);
	p = strstr((char *)text, "msg=\"http listening\"");
	if (p && (p = strstr(p, " port=")))
		port = atoi(p + 6);
	free(text);
	assert_true(port > 0);
	return port;
}

/* http_get: GET path from 127.0.0.1:port into buf; the status. */
static int http_get(int port, const char *path, char *buf, size_t size)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	char req[256];
	size_t n = 0;
	ssize_t got;
	int fd, status = 0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true((fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
		 path);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	while (n + 1 < size && (got = read(fd, buf + n, size - 1 - n)) > 0)
		n += (size_t)got;
	buf[n] = '\0';
	close(fd);
	sscanf(buf, "HTTP/1.%*d %d", &status);
	return status;
}

/* start: `run` on the test's database backing up into dir every 1 s,
 * keeping keep, its HTTP child on a free port, its log in the new file
 * log; [out] *port. */
static pid_t start(const struct tu_env *e, const char *dir, const char *keep, const char *log,
		   int *port)
{
	pid_t pid;

	assert_int_equal(access(log, F_OK), -1);
	pid = tu_spawn((const char *const[]){ "run", "--db", e->db_path, "--workers", "1",
					      "--http-listen", "127.0.0.1:0", "--backup-dir", dir,
					      "--backup-interval-ms", "1000", "--backup-keep", keep,
					      NULL }, log);
	*port = http_port(log);
	return pid;
}

static void stop(pid_t pid)
{
	kill(pid, SIGTERM);
	assert_int_equal(tu_reap(pid, 30000, "run"), 0);
}

/* ---- the folder's rules, in this process ------------------------------ */

static void test_names_pruning_partials_and_status(void **state)
{
	const struct tu_env *e = *state;
	char dir[400], path[700], n1[64], n2[64], n3[64], list[4096], live[96], dead[96];
	struct backup_status st;
	struct backup_info info;
	struct stat sb;
	int pruned = -1;

	assert_int_equal(statedir_init(e->db_path, NULL), SD_OK);
	snprintf(dir, sizeof dir, "%s/backups", e->dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	/* what is not a good backup of ours: an operator's folder and file, a
	 * name of ours without a manifest, partial folders of a dead process
	 * and of a live one (the parent: a backup in progress elsewhere) */
	snprintf(path, sizeof path, "%s/mine", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/notes.txt", dir);
	fclose(fopen(path, "w"));
	snprintf(path, sizeof path, "%s/stagedoor-19700101T000001Z", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(dead, sizeof dead, "stagedoor-19700101T000002Z.partial-%ld", dead_pid());
	snprintf(path, sizeof path, "%s/%s", dir, dead);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/%s/stagedoor.db", dir, dead);
	fclose(fopen(path, "w"));
	snprintf(live, sizeof live, "stagedoor-19700101T000003Z.partial-%ld", (long)getppid());
	snprintf(path, sizeof path, "%s/%s", dir, live);
	assert_int_equal(mkdir(path, 0700), 0);

	backup_sched_status(e->db_path, dir, 1000, clock_now_ms(), &st);
	assert_int_equal(st.good, 0);
	assert_false(st.ok);
	assert_int_equal(st.age_ms, -1);

	/* the fake clock stands still: two backups in one second */
	assert_int_equal(backup_sched_take(e->db, e->db_path, NULL, dir, 2, n1, sizeof n1, &info,
					   &pruned), SD_OK);
	assert_string_equal(n1, "stagedoor-19700112T134640Z");
	assert_int_equal(pruned, 0);
	assert_int_equal(backup_sched_take(e->db, e->db_path, NULL, dir, 2, n2, sizeof n2, &info,
					   &pruned), SD_OK);
	assert_string_equal(n2, "stagedoor-19700112T134640Z-2");
	snprintf(path, sizeof path, "%s/%s", dir, dead);
	assert_false(is_dir(path));	/* its process is gone: removed */
	snprintf(path, sizeof path, "%s/%s", dir, live);
	assert_true(is_dir(path));	/* its process lives: left alone */
	clock_fake_advance(1000);
	assert_int_equal(backup_sched_take(e->db, e->db_path, NULL, dir, 2, n3, sizeof n3, &info,
					   &pruned), SD_OK);
	assert_string_equal(n3, "stagedoor-19700112T134641Z");
	assert_int_equal(pruned, 1);
	/* the oldest good one went; nothing else did */
	assert_int_equal(good_in(dir, list, sizeof list), 3);
	assert_false(listed(list, n1));
	assert_true(listed(list, n2));
	assert_true(listed(list, n3));
	assert_true(listed(list, "stagedoor-19700101T000001Z"));
	assert_int_equal(names_in(dir, NULL, list, sizeof list), 6);
	assert_true(listed(list, "mine"));
	assert_true(listed(list, "notes.txt"));
	assert_true(listed(list, live));
	snprintf(path, sizeof path, "%s/%s", dir, n2);
	assert_int_equal(backup_verify(path, NULL), SD_OK);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	snprintf(path, sizeof path, "%s/%s", dir, n3);
	assert_int_equal(backup_verify(path, NULL), SD_OK);

	/* the newest good one, by its name; stale past 2 intervals + slack */
	backup_sched_status(e->db_path, dir, 1000, clock_now_ms(), &st);
	assert_int_equal(st.good, 2);
	assert_string_equal(st.last_ok_name, n3);
	assert_int_equal(st.last_ok_ms, clock_now_ms() / 1000 * 1000);
	assert_true(st.age_ms >= 0 && st.age_ms < 1000);
	assert_true(st.ok);
	backup_sched_status(e->db_path, dir, 1000,
			    st.last_ok_ms + 2000 + BACKUP_SCHED_SLACK_MS + 1, &st);
	assert_false(st.ok);

	/* a failure is kept beside the database until the next success */
	backup_sched_record(e->db_path, 0, "cannot make /x: No space left on device\n(more)");
	backup_sched_status(e->db_path, dir, 1000, clock_now_ms(), &st);
	assert_true(st.failed);
	assert_false(st.ok);
	assert_int_equal(st.failures_total, 1);
	assert_string_equal(st.error, "cannot make /x: No space left on device (more)");
	snprintf(path, sizeof path, "%s-backup-status", e->db_path);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	backup_sched_record(e->db_path, 1, NULL);
	backup_sched_status(e->db_path, dir, 1000, clock_now_ms(), &st);
	assert_false(st.failed);
	assert_true(st.ok);
	assert_int_equal(st.failures_total, 1);
	assert_string_equal(st.error, "");
}

/* ---- the real binary ---------------------------------------------------- */

/* run takes a backup at start and one a second after, keeps 2, each one
 * verifies, and /healthz, /v1/stats and /metrics say how old the newest is. */
static void test_run_takes_keeps_and_reports(void **state)
{
	const struct tu_env *e = *state;
	char dir[400], log[400], path[800], list[4096], body[HTTP_MAX], *tok, *save = NULL;
	struct stat sb;
	pid_t run;
	int port, n;

	assert_int_equal(RUN("init", "--db", e->db_path), 0);
	snprintf(dir, sizeof dir, "%s/backups", e->dir);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	run = start(e, dir, "2", log, &port);
	tu_wait_log(log, "msg=\"backup taken\"", 4, 20000);
	assert_true(tu_count_in(log, " pruned=1") >= 2);
	assert_int_equal(http_get(port, "/healthz", body, sizeof body), 200);
	if (!strstr(body, "\"backup\": {") && !strstr(body, "\"backup\":{"))
		fail_msg("no backup object in /healthz: %s", body);
	if (!strstr(body, "\"ok\":true") || !strstr(body, "\"count\":2") ||
	    !strstr(body, "\"last_failed\":false") || !strstr(body, "\"age_ms\":"))
		fail_msg("/healthz: %s", body);
	{
		const char *a = strstr(body, "\"age_ms\":");
		long age = a ? atol(a + 9) : -1;

		if (age < 0 || age > 3000)	/* a second apart, second precision */
			fail_msg("age_ms %ld in %s", age, body);
	}
	assert_int_equal(http_get(port, "/metrics", body, sizeof body), 200);
	if (!strstr(body, "\nstagedoor_backup_ok 1\n") || !strstr(body, "\nstagedoor_backups 2\n") ||
	    !strstr(body, "\nstagedoor_backup_failures_total 0\n") ||
	    !strstr(body, "\nstagedoor_backup_age_seconds ") ||
	    !strstr(body, "\nstagedoor_backup_last_success_timestamp_seconds 1"))
		fail_msg("/metrics: %s", strstr(body, "stagedoor_backup") ? strstr(body,
			 "stagedoor_backup") : body);
	stop(run);

	/* the box's user's alone; every one kept verifies */
	assert_int_equal(stat(dir, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	n = good_in(dir, list, sizeof list);
	assert_int_equal(n, 2);
	for (tok = strtok_r(list, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		snprintf(path, sizeof path, "%s/%s", dir, tok);
		if (RUN("backup", "verify", path) != 0)
			fail_msg("backup verify %s: %s", tok, err);
		snprintf(path, sizeof path, "%s/%s/state/ticket.key", dir, tok);
		assert_int_equal(stat(path, &sb), 0);
		assert_int_equal(sb.st_mode & 0777, 0600);
	}
}

/* A backup killed midway (a crash failpoint after the database copy) and a
 * backup_dir whose parent is a file: each a warning naming the cause and a
 * 503, the partial folder never counted and removed at the next attempt,
 * the good backup taken before them whole; the next good backup clears it. */
static void test_failed_backup_warns_and_keeps_the_last_good(void **state)
{
	const struct tu_env *e = *state;
	char dir[400], bad[500], file[400], log[400], path[800], good[4096], now[4096];
	char body[HTTP_MAX];
	pid_t run;
	int port;

	assert_int_equal(RUN("init", "--db", e->db_path), 0);
	snprintf(dir, sizeof dir, "%s/backups", e->dir);
	snprintf(log, sizeof log, "%s/run1.log", e->dir);
	/* one good backup, as run's child takes it */
	if (RUN("backup", "--scheduled", "--db", e->db_path, "--backup-dir", dir) != 0)
		fail_msg("backup --scheduled: %s", err);
	assert_int_equal(good_in(dir, good, sizeof good), 1);

	setenv("STAGEDOOR_FAILPOINTS", "backup_after_db=crash", 1);
	run = start(e, dir, "2", log, &port);
	tu_wait_log(log, "level=warn msg=\"backup failed\"", 2, 20000);
	assert_true(tu_count_in(log, "err=\"the backup process exited with status 70\"") >= 2);
	/* the first crash's partial went at the second attempt: at most the
	 * last one's is left, and it does not count */
	assert_true(names_in(dir, ".partial-", now, sizeof now) <= 1);
	assert_true(tu_count_in(log, "msg=\"partial backup removed\"") >= 1);
	assert_int_equal(http_get(port, "/healthz", body, sizeof body), 503);
	if (!strstr(body, "\"count\":1") || !strstr(body, "\"last_failed\":true") ||
	    !strstr(body, "status 70"))
		fail_msg("/healthz: %s", body);
	assert_int_equal(http_get(port, "/metrics", body, sizeof body), 200);
	assert_non_null(strstr(body, "\nstagedoor_backup_ok 0\n"));
	assert_null(strstr(body, "\nstagedoor_backup_failures_total 0\n"));
	stop(run);
	unsetenv("STAGEDOOR_FAILPOINTS");
	assert_int_equal(good_in(dir, now, sizeof now), 1);
	assert_string_equal(now, good);
	snprintf(path, sizeof path, "%s/%.*s", dir, (int)strcspn(good, " "), good);
	if (RUN("backup", "verify", path) != 0)
		fail_msg("the last good backup after the failures: %s", err);

	/* a folder that cannot be made: the reason, from the backup itself */
	snprintf(file, sizeof file, "%s/afile", e->dir);
	fclose(fopen(file, "w"));
	snprintf(bad, sizeof bad, "%s/backups", file);
	snprintf(log, sizeof log, "%s/run2.log", e->dir);
	run = start(e, bad, "2", log, &port);
	tu_wait_log(log, "level=warn msg=\"backup failed\"", 1, 20000);
	assert_int_equal(tu_count_in(log, "afile exists and is not a folder\""), 1);
	assert_int_equal(http_get(port, "/healthz", body, sizeof body), 503);
	if (!strstr(body, "\"count\":0") || !strstr(body, "is not a folder"))
		fail_msg("/healthz: %s", body);
	stop(run);

	/* back on its folder with nothing failing: the partial is gone, a
	 * second good one is there, and health is back */
	snprintf(log, sizeof log, "%s/run3.log", e->dir);
	run = start(e, dir, "2", log, &port);
	tu_wait_log(log, "msg=\"backup taken\"", 1, 20000);
	assert_int_equal(names_in(dir, ".partial-", now, sizeof now), 0);
	assert_int_equal(good_in(dir, now, sizeof now), 2);
	assert_int_equal(http_get(port, "/healthz", body, sizeof body), 200);
	assert_non_null(strstr(body, "\"last_failed\":false"));
	stop(run);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_names_pruning_partials_and_status, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_run_takes_keeps_and_reports, setup_real,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_backup_warns_and_keeps_the_last_good,
						setup_real, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
