/*
 * test_sdnotify.c: `stagedoor run` under a service manager, as systemd runs
 * dist/stagedoor.service (Type=notify, WatchdogSec=): the test binds the
 * datagram socket systemd would, names it in $NOTIFY_SOCKET with a 1 s
 * $WATCHDOG_USEC, starts the real binary and reads what it says:
 *   - READY=1 once the relay and the workers have all started, never a
 *     WATCHDOG=1 before it; WATCHDOG=1 every half second after it;
 *     RELOADING=1 then READY=1 around a SIGHUP; STOPPING=1 at SIGTERM;
 *   - no more WATCHDOG=1 once every worker has been down longer than the
 *     watchdog's interval (a reload gave them a mail CA file that does not
 *     exist: each try fails before it is ready), so systemd would restart it;
 *   - $WATCHDOG_PID naming another process: READY=1 and no watchdog.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

static int sock = -1;		/* the service manager's end */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct tu_env *e;
	int rc = tu_setup_real_nodb(state);

	if (rc != 0)
		return rc;
	e = *state;
	if (strlen(e->dir) + sizeof "/notify" > sizeof sa.sun_path)
		return -1;
	memcpy(sa.sun_path, e->dir, strlen(e->dir));
	strcat(sa.sun_path, "/notify");
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)&sa, sizeof sa) != 0)
		return -1;
	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	setenv("WATCHDOG_USEC", "1000000", 1);
	unsetenv("WATCHDOG_PID");
	unsetenv("STAGEDOOR_FAILPOINTS");
	unsetenv("STAGEDOOR_CONFIG");
	unsetenv("STAGEDOOR_LOG_LEVEL");
	return 0;
}

static int teardown(void **state)
{
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	if (sock >= 0)
		close(sock);
	sock = -1;
	return tu_teardown(state);
}

/* next_msg: the next datagram into buf within timeout_ms; 0: none came. */
static int next_msg(char *buf, size_t size, int timeout_ms)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, timeout_ms) <= 0)
		return 0;
	n = recv(sock, buf, size - 1, 0);
	assert_true(n >= 0);
	buf[n] = '\0';
	return 1;
}

/* wait_msg: read until a datagram holding needle (into buf); fails after
 * timeout_ms.  [out] *watchdogs (may be NULL): the WATCHDOG=1s before it. */
static void wait_msg(const char *needle, char *buf, size_t size, int timeout_ms, int *watchdogs)
{
	int64_t end = now_ms() + timeout_ms;
	int wd = 0;

	while (now_ms() < end) {
		if (!next_msg(buf, size, (int)(end - now_ms())))
			break;
		if (strstr(buf, needle)) {
			if (watchdogs)
				*watchdogs = wd;
			return;
		}
		wd += strcmp(buf, "WATCHDOG=1") == 0;
	}
	fail_msg("no \"%s\" from the box within %d ms", needle, timeout_ms);
}

/* count_watchdogs: the WATCHDOG=1s that come within ms; other messages
 * (STATUS=) are passed over. */
static int count_watchdogs(int ms)
{
	int64_t end = now_ms() + ms;
	char buf[512];
	int n = 0;

	while (now_ms() < end)
		if (next_msg(buf, sizeof buf, (int)(end - now_ms())))
			n += strcmp(buf, "WATCHDOG=1") == 0;
	return n;
}

static void write_conf(const char *path, const char *db, const char *extra)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fprintf(f, "db = %s\nworkers = 2\nhttp_listen = off\nlog_level = info\n"
		"mail_url = smtp://127.0.0.1:9\nmail_from = box@venue.example\n%s", db, extra);
	fclose(f);
}

/* start: `run --config` on a fresh database, its log at e->dir/run.log. */
static pid_t start(const struct tu_env *e, char *conf, char *log, size_t size)
{
	char db[400];

	snprintf(db, sizeof db, "%s/stagedoor.db", e->dir);
	snprintf(conf, size, "%s/stagedoor.conf", e->dir);
	snprintf(log, size, "%s/run.log", e->dir);
	write_conf(conf, db, "");
	return tu_spawn((const char *const[]){ "run", "--config", conf, NULL }, log);
}

static void stop(pid_t run)
{
	char buf[512];

	kill(run, SIGTERM);
	wait_msg("STOPPING=1", buf, sizeof buf, 5000, NULL);
	assert_int_equal(tu_reap(run, 15000, "run"), 0);
}

/* READY=1 after the children, the watchdog fed, a reload, a stop. */
static void test_ready_watchdog_reload_stop(void **state)
{
	const struct tu_env *e = *state;
	char conf[512], log[512], buf[512];
	int wd = -1;
	pid_t run;

	run = start(e, conf, log, sizeof conf);
	/* while it starts, what it waits for */
	wait_msg("STATUS=starting: ", buf, sizeof buf, 15000, NULL);
	assert_non_null(strstr(buf, "workers"));
	wait_msg("READY=1", buf, sizeof buf, 15000, &wd);
	/* the relay and both workers had started and said so: none is
	 * fed before that */
	assert_int_equal(wd, 0);
	assert_non_null(strstr(buf, "STATUS=relay, 2 workers ready"));
	assert_int_equal(tu_count_in(log, "msg=\"child started\""), 3);
	assert_int_equal(tu_count_in(log, "msg=\"child exited\""), 0);
	tu_wait_log(log, "msg=\"worker started\"", 2, 5000);
	tu_wait_log(log, "msg=\"relay started\"", 1, 5000);

	/* every half of the 1 s interval: about 5 in 2.5 s */
	assert_in_range(count_watchdogs(2500), 3, 7);

	kill(run, SIGHUP);
	wait_msg("RELOADING=1", buf, sizeof buf, 5000, NULL);
	wait_msg("READY=1", buf, sizeof buf, 5000, NULL);
	tu_wait_log(log, "msg=\"configuration reloaded\"", 1, 5000);
	assert_true(count_watchdogs(1500) >= 2);
	stop(run);
}

/* Workers that cannot come back: the watchdog is no longer fed. */
static void test_watchdog_starves_when_workers_cannot_start(void **state)
{
	const struct tu_env *e = *state;
	char conf[512], log[512], buf[512], db[400], extra[600];
	pid_t run;

	run = start(e, conf, log, sizeof conf);
	wait_msg("READY=1", buf, sizeof buf, 15000, NULL);
	assert_true(count_watchdogs(1200) >= 2);

	/* accepted by the reload (run checks the mail files at its start
	 * only), refused by every worker at its start */
	snprintf(db, sizeof db, "%s/stagedoor.db", e->dir);
	snprintf(extra, sizeof extra, "mail_ca_file = %s/no-such-ca.pem\n", e->dir);
	write_conf(conf, db, extra);
	kill(run, SIGHUP);
	wait_msg("RELOADING=1", buf, sizeof buf, 5000, NULL);
	wait_msg("READY=1", buf, sizeof buf, 5000, NULL);
	wait_msg("STATUS=relay, 0 of 2 workers ready", buf, sizeof buf, 10000, NULL);
	tu_wait_log(log, "child=w2 in_ms=", 1, 5000);
	/* the feeds of the last interval may still come; then none */
	count_watchdogs(1600);
	assert_int_equal(count_watchdogs(2500), 0);
	/* the supervisor itself still runs and still stops cleanly */
	stop(run);
}

/* The HTTP address taken by another process: run stops at once with
 * status 78, no READY=1, and says why, naming the real address, in STATUS=
 * and on its console (the journal). */
static void test_address_taken_stops_run_at_once(void **state)
{
	const struct tu_env *e = *state;
	struct sockaddr_in a = { .sin_family = AF_INET };
	char conf[512], log[512], buf[512], db[400], want[128];
	socklen_t len = sizeof a;
	int64_t t0;
	int holder, rc;
	pid_t run;

	holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(holder, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(holder, 1), 0);
	assert_int_equal(getsockname(holder, (struct sockaddr *)&a, &len), 0);
	snprintf(db, sizeof db, "%s/stagedoor.db", e->dir);
	snprintf(conf, sizeof conf, "%s/stagedoor.conf", e->dir);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	{
		FILE *f = fopen(conf, "w");

		assert_non_null(f);
		fprintf(f, "db = %s\nworkers = 1\nhttp_listen = 127.0.0.1:%d\nlog_level = info\n",
			db, ntohs(a.sin_port));
		fclose(f);
	}
	t0 = now_ms();
	run = tu_spawn((const char *const[]){ "run", "--config", conf, NULL }, log);
	snprintf(want, sizeof want, "cannot listen on 127.0.0.1:%d: Address already in use",
		 ntohs(a.sin_port));
	wait_msg("STATUS=failed: ", buf, sizeof buf, 10000, NULL);
	assert_non_null(strstr(buf, want));
	rc = tu_reap(run, 15000, "run");
	assert_int_equal(rc, 78);
	assert_true(now_ms() - t0 < 5000);
	while (next_msg(buf, sizeof buf, 0))
		assert_null(strstr(buf, "READY=1"));
	/* the console line, and the child's own one line */
	snprintf(buf, sizeof buf, "stagedoor: http cannot start as configured: http: %s", want);
	assert_int_equal(tu_count_in(log, buf), 1);
	/* started once, never again */
	assert_int_equal(tu_count_in(log, "msg=\"child restarts\" child=http"), 0);
	close(holder);
}

/* $WATCHDOG_PID names another process: the watchdog is not ours to feed. */
static void test_watchdog_of_another_pid_is_not_fed(void **state)
{
	const struct tu_env *e = *state;
	char conf[512], log[512], buf[512];
	pid_t run;

	setenv("WATCHDOG_PID", "1", 1);
	run = start(e, conf, log, sizeof conf);
	wait_msg("READY=1", buf, sizeof buf, 15000, NULL);
	assert_int_equal(count_watchdogs(1500), 0);
	stop(run);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ready_watchdog_reload_stop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_watchdog_starves_when_workers_cannot_start,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_address_taken_stops_run_at_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_watchdog_of_another_pid_is_not_fed, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
