/*
 * test_progress.c: the progress bar on a pseudo-terminal, plain lines on a
 * pipe, the rate limit, an unknown total, the final line; then `stagedoor
 * demo` with stderr on a pipe and on a pseudo-terminal, and the two
 * benchmarks' progress beside their unchanged stdout.
 *
 * The unit tests drive a fake time source (progress_opts.now_us), so a rate
 * or an interval is a number the test chose, never a guess about the speed
 * of this machine.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "clock.h"
#include "progress.h"
#include "testutil.h"

extern char **environ;

/* ======================== helpers ======================================== */

/* The fake time: tests set it in µs. */
static int64_t fake_us;

static int64_t fake_now(void *arg)
{
	(void)arg;
	return fake_us;
}

/* A pseudo-terminal in raw mode (bytes arrive as written, no "\n" -> "\r\n")
 * of cols columns.  [out] *master, *slave. */
static void pty_open(int *master, int *slave, int cols)
{
	struct winsize ws = { 24, (unsigned short)cols, 0, 0 };
	struct termios t;

	if (openpty(master, slave, NULL, NULL, &ws) != 0)
		fail_msg("openpty: %s", strerror(errno));
	assert_int_equal(tcgetattr(*slave, &t), 0);
	cfmakeraw(&t);
	assert_int_equal(tcsetattr(*slave, TCSANOW, &t), 0);
}

/*
 * fd_read_until: append what fd has to buf (size bytes, kept NUL-terminated)
 * until buf holds needle, fd reports EOF or EIO (a pty whose other side is
 * all closed), or timeout_ms pass.  The pty hands written bytes to its master
 * side asynchronously, hence the wait; the timeout only bounds a failure.
 * Returns the length of buf.
 */
static size_t fd_read_until(int fd, char *buf, size_t size, const char *needle, int timeout_ms)
{
	size_t n = strlen(buf);
	int64_t deadline = clock_mono_us() + (int64_t)timeout_ms * 1000;

	while (!(needle && strstr(buf, needle)) && n + 1 < size) {
		struct pollfd pf = { fd, POLLIN, 0 };
		int64_t left = (deadline - clock_mono_us()) / 1000;
		ssize_t r;

		if (left <= 0 || poll(&pf, 1, (int)left) <= 0)
			break;
		r = read(fd, buf + n, size - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		buf[n] = '\0';
	}
	return n;
}

/* Everything a pipe's write end has written so far (the write end must be
 * open: the read is non-blocking). */
static size_t pipe_drain(int fd, char *buf, size_t size)
{
	size_t n = 0;
	ssize_t r;

	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (n + 1 < size && (r = read(fd, buf + n, size - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	return n;
}

static int count_char(const char *s, char c)
{
	int n = 0;

	for (; *s; s++)
		n += *s == c;
	return n;
}

static int count_str(const char *s, const char *needle)
{
	int n = 0;

	while ((s = strstr(s, needle))) {
		n++;
		s += strlen(needle);
	}
	return n;
}

/* The last '\r'-started frame of a terminal's output, up to the next '\r' or
 * '\n' (copied into out). */
static void last_frame(const char *buf, char *out, size_t size)
{
	const char *s = strrchr(buf, '\r');
	size_t n;

	assert_non_null(s);
	s++;
	n = strcspn(s, "\r\n");
	assert_true(n < size);
	memcpy(out, s, n);
	out[n] = '\0';
}

/* The bar's inside "[###...]" of a frame: [out] *len its width, *fill its '#'. */
static void bar_of(const char *frame, int *len, int *fill)
{
	const char *a = strchr(frame, '['), *b = strchr(frame, ']');
	const char *s;

	assert_non_null(a);
	assert_non_null(b);
	*len = (int)(b - a - 1);
	*fill = 0;
	for (s = a + 1; s < b; s++) {
		assert_true(*s == '#' || *s == '.');
		*fill += *s == '#';
	}
}

/* ======================== on a terminal ================================== */

/* isatty() on a pty's slave picks the bar: counts, percentage, rate, eta,
 * a bar filled in proportion, all on a line that starts with '\r'. */
static void test_bar_on_a_pty(void **state)
{
	struct progress_opts o = { 0 };
	struct progress *p;
	char buf[4096] = "", frame[512];
	int master, slave, len, fill;

	(void)state;
	pty_open(&master, &slave, 100);
	o.fd = slave;		/* tty left at PROGRESS_TTY_AUTO: isatty decides */
	o.now_us = fake_now;
	fake_us = 0;
	p = progress_start_opts("render", 2000, "orders", &o);
	assert_non_null(p);
	fake_us = 1000000;		/* 500 in 1 s: 500.0/s, 1500 left: eta 3s */
	progress_update(p, 500);
	fd_read_until(master, buf, sizeof buf, "eta", 5000);
	assert_int_equal(buf[0], '\r');
	last_frame(buf, frame, sizeof frame);
	assert_non_null(strstr(frame, "render  ["));
	assert_non_null(strstr(frame, "]   500/2000   25%  500.0 orders/s  eta 3s"));
	bar_of(frame, &len, &fill);
	assert_int_equal(fill, len / 4);
	assert_null(strchr(buf, '\n'));	/* a redraw, not a new line */

	progress_end(p, 2000);		/* final: 2000 in 1 s */
	fd_read_until(master, buf, sizeof buf, "\n", 5000);
	last_frame(buf, frame, sizeof frame);
	assert_non_null(strstr(frame, "2000/2000  100%  2000.0 orders/s  in 1.0s"));
	bar_of(frame, &len, &fill);
	assert_int_equal(fill, len);
	assert_int_equal(buf[strlen(buf) - 1], '\n');
	close(slave);
	close(master);
}

/* The line fits the terminal's columns (TIOCGWINSZ): never the last column,
 * so it cannot wrap; a narrow terminal drops the bar, a wide one caps it. */
static void test_bar_fits_the_terminal_width(void **state)
{
	static const int cols[] = { 40, 60, 200 };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof cols / sizeof cols[0]; i++) {
		struct progress_opts o = { 0 };
		struct progress *p;
		char buf[4096] = "", frame[512];
		int master, slave, len, fill;

		pty_open(&master, &slave, cols[i]);
		o.fd = slave;
		o.now_us = fake_now;
		fake_us = 0;
		p = progress_start_opts("render", 2000, "orders", &o);
		fake_us = 1000000;
		progress_update(p, 1000);
		fd_read_until(master, buf, sizeof buf, "eta", 5000);
		last_frame(buf, frame, sizeof frame);
		assert_true((int)strlen(frame) <= cols[i] - 1);
		assert_non_null(strstr(frame, "1000/2000"));
		if (cols[i] == 40) {
			assert_null(strchr(frame, '['));
		} else {
			bar_of(frame, &len, &fill);
			assert_true(len >= 5 && len <= 40);
			assert_int_equal(fill, len / 2);
			if (cols[i] == 200)
				assert_int_equal(len, 40);
		}
		progress_end(p, 2000);
		close(slave);
		close(master);
	}
}

/* A rate that gets shorter does not widen the bar back: frames do not
 * jitter. */
static void test_bar_keeps_its_width(void **state)
{
	struct progress_opts o = { 0 };
	struct progress *p;
	char buf[4096], frame[512];
	int fds[2], len1, len2, fill;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	o.fd = fds[1];
	o.tty = PROGRESS_TTY_YES;
	o.width = 80;
	o.now_us = fake_now;
	fake_us = 0;
	p = progress_start_opts("render", 2000, "orders", &o);
	fake_us = 1500000;
	progress_update(p, 1950);		/* 1300.0 orders/s */
	pipe_drain(fds[0], buf, sizeof buf);
	last_frame(buf, frame, sizeof frame);
	assert_non_null(strstr(frame, "1300.0 orders/s"));
	bar_of(frame, &len1, &fill);
	fake_us = 4000000;
	progress_update(p, 1960);		/* 490.0 orders/s: one character less */
	pipe_drain(fds[0], buf, sizeof buf);
	last_frame(buf, frame, sizeof frame);
	assert_non_null(strstr(frame, "490.0 orders/s"));
	bar_of(frame, &len2, &fill);
	assert_int_equal(len2, len1);
	progress_end(p, 2000);
	close(fds[0]);
	close(fds[1]);
}

/* A shorter redraw covers the rest of the longer line before it. */
static void test_shorter_redraw_pads_the_old_line(void **state)
{
	struct progress_opts o = { 0 };
	struct progress *p;
	char buf[4096] = "";
	int fds[2];
	char *second;

	(void)state;
	assert_int_equal(pipe(fds), 0);
	o.fd = fds[1];
	o.tty = PROGRESS_TTY_YES;
	o.width = 100;
	o.now_us = fake_now;
	fake_us = 0;
	p = progress_start_opts("scan", 0, "rows", &o);
	fake_us = 1000000;
	progress_update(p, 123456789);		/* a long count and a long rate */
	fake_us = 2000000;
	progress_update(p, 5);			/* a count going down happens: a recount */
	pipe_drain(fds[0], buf, sizeof buf);
	second = strrchr(buf, '\r');
	assert_non_null(second);
	assert_int_equal(strlen(second), (size_t)(second - buf));	/* both as long */
	progress_end(p, 5);
	close(fds[0]);
	close(fds[1]);
}

/* ======================== not a terminal ================================= */

/* isatty() on a pipe picks plain lines: no '\r', no bar, logfmt fields, and
 * the first one only once an interval has passed. */
static void test_plain_lines_on_a_pipe(void **state)
{
	struct progress_opts o = { 0 };
	struct progress *p;
	char buf[4096];
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	o.fd = fds[1];			/* tty left at PROGRESS_TTY_AUTO */
	o.plain_interval_ms = 1000;
	o.now_us = fake_now;
	fake_us = 0;
	p = progress_start_opts("demo", 2000, "orders", &o);
	fake_us = 500000;
	progress_update(p, 100);		/* half an interval: nothing yet */
	pipe_drain(fds[0], buf, sizeof buf);
	assert_string_equal(buf, "");
	fake_us = 2000000;
	progress_update(p, 1234);
	pipe_drain(fds[0], buf, sizeof buf);
	assert_string_equal(buf, "progress label=demo done=1234 total=2000 rate=617.0/s "
				 "elapsed=2.0s unit=orders\n");
	assert_null(strchr(buf, '\r'));
	progress_end(p, 2000);
	close(fds[0]);
	close(fds[1]);
}

/* A label that is not one logfmt word is quoted. */
static void test_plain_label_is_quoted(void **state)
{
	struct progress_opts o = { 0 };
	struct progress *p;
	char buf[4096];
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	o.fd = fds[1];
	o.tty = PROGRESS_TTY_NO;
	o.now_us = fake_now;
	fake_us = 0;
	p = progress_start_opts("claim+ack \"x\"", 10, "jobs", &o);
	fake_us = 1000000;
	progress_end(p, 10);
	pipe_drain(fds[0], buf, sizeof buf);
	assert_non_null(strstr(buf, "progress label=\"claim+ack \\\"x\\\"\" done=10 "));
	close(fds[0]);
	close(fds[1]);
}

/* ======================== rate limit ===================================== */

/* 10,000 updates over 10 s of fake time, one every millisecond: a terminal
 * redraws every 100 ms (100 frames), a log writes every 5 s (2 lines); the
 * end adds one line to each. */
static void test_many_updates_few_lines(void **state)
{
	struct progress_opts o = { 0 };
	struct progress *p;
	static char buf[1 << 16];
	int fds[2], i, k;

	(void)state;
	for (k = 0; k < 2; k++) {
		assert_int_equal(pipe(fds), 0);
		fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
		memset(&o, 0, sizeof o);
		o.fd = fds[1];
		o.tty = k == 0 ? PROGRESS_TTY_YES : PROGRESS_TTY_NO;
		o.width = 80;
		o.now_us = fake_now;
		fake_us = 0;
		p = progress_start_opts("many", 10000, "jobs", &o);
		for (i = 1; i <= 10000; i++) {
			fake_us = (int64_t)i * 1000;
			progress_update(p, i);
		}
		if (k == 0) {
			/* frames at 1 ms, 101 ms, ..., 9901 ms */
			pipe_drain(fds[0], buf, sizeof buf);
			assert_int_equal(count_char(buf, '\r'), 100);
			assert_int_equal(count_char(buf, '\n'), 0);
		} else {
			/* lines at 5 s and 10 s */
			pipe_drain(fds[0], buf, sizeof buf);
			assert_int_equal(count_str(buf, "progress label=many "), 2);
			assert_non_null(strstr(buf, "done=5000 total=10000 rate=1000.0/s elapsed=5.0s"));
		}
		progress_end(p, 10000);
		pipe_drain(fds[0], buf, sizeof buf);
		if (k == 0)
			assert_int_equal(count_char(buf, '\r'), 1);
		else
			assert_int_equal(count_str(buf, "progress label=many "), 1);
		close(fds[0]);
		close(fds[1]);
	}
}

/* ======================== unknown total, final line ===================== */

static void test_unknown_total(void **state)
{
	struct progress_opts o = { 0 };
	struct progress *p;
	char buf[4096], frame[512];
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	o.fd = fds[1];
	o.tty = PROGRESS_TTY_YES;
	o.width = 80;
	o.now_us = fake_now;
	fake_us = 0;
	p = progress_start_opts("relay", 0, "rows", &o);
	fake_us = 2000000;
	progress_update(p, 1500);
	pipe_drain(fds[0], buf, sizeof buf);
	last_frame(buf, frame, sizeof frame);
	assert_string_equal(frame, "relay  1500 rows  750.0 rows/s  2.0s");
	progress_end(p, 1500);
	close(fds[0]);
	close(fds[1]);

	/* plain: no total= field at all */
	assert_int_equal(pipe(fds), 0);
	o.fd = fds[1];
	o.tty = PROGRESS_TTY_NO;
	fake_us = 0;
	p = progress_start_opts("relay", 0, "rows", &o);
	fake_us = 2000000;
	progress_end(p, 1500);
	pipe_drain(fds[0], buf, sizeof buf);
	assert_string_equal(buf, "progress label=relay done=1500 rate=750.0/s elapsed=2.0s "
				 "unit=rows final=true\n");
	close(fds[0]);
	close(fds[1]);
}

/* The final line is written whatever the interval (here right after the
 * start), names itself final, and a terminal's ends the line. */
static void test_final_line(void **state)
{
	struct progress_opts o = { 0 };
	struct progress *p;
	char buf[4096];
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	o.fd = fds[1];
	o.tty = PROGRESS_TTY_NO;
	o.now_us = fake_now;
	fake_us = 0;
	p = progress_start_opts("drain", 60, "jobs", &o);
	fake_us = 1;			/* far inside the interval */
	progress_update(p, 30);
	fake_us = 3000000;
	progress_end(p, 60);
	pipe_drain(fds[0], buf, sizeof buf);
	assert_string_equal(buf, "progress label=drain done=60 total=60 rate=20.0/s elapsed=3.0s "
				 "unit=jobs final=true\n");

	o.tty = PROGRESS_TTY_YES;
	o.width = 80;
	fake_us = 0;
	p = progress_start_opts("drain", 60, "jobs", &o);
	fake_us = 3000000;
	progress_end(p, 45);		/* ended short of the total: says so */
	pipe_drain(fds[0], buf, sizeof buf);
	assert_int_equal(buf[0], '\r');
	assert_non_null(strstr(buf, "45/60   75%  15.0 jobs/s  in 3.0s"));
	assert_int_equal(buf[strlen(buf) - 1], '\n');
	assert_int_equal(count_char(buf, '\n'), 1);
	close(fds[0]);
	close(fds[1]);

	/* NULL (an allocation that failed) is accepted everywhere */
	progress_update(NULL, 1);
	progress_set_total(NULL, 1);
	progress_end(NULL, 1);
}

/* A total learnt later shows from the next line on. */
static void test_set_total(void **state)
{
	struct progress_opts o = { 0 };
	struct progress *p;
	char buf[4096];
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	o.fd = fds[1];
	o.tty = PROGRESS_TTY_NO;
	o.now_us = fake_now;
	fake_us = 0;
	p = progress_start_opts("relay", 100, "rows", &o);
	progress_set_total(p, 250);
	fake_us = 1000000;
	progress_end(p, 250);
	pipe_drain(fds[0], buf, sizeof buf);
	assert_non_null(strstr(buf, "done=250 total=250 "));
	close(fds[0]);
	close(fds[1]);
}

/* ======================== another thread ================================= */

struct updater {
	struct progress *p;
	int n;
};

static void *updater_run(void *arg)
{
	struct updater *u = arg;
	int i;

	for (i = 1; i <= u->n; i++)
		progress_update(u->p, i);
	return NULL;
}

/* Started here, updated from another thread (on the real clock, so lines
 * are drawn while it runs), ended here after the join. */
static void test_update_from_another_thread(void **state)
{
	struct progress_opts o = { 0 };
	struct updater u;
	pthread_t th;
	static char buf[1 << 16];
	int fds[2];

	(void)state;
	assert_int_equal(pipe(fds), 0);
	fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
	o.fd = fds[1];
	o.tty = PROGRESS_TTY_YES;
	o.width = 80;
	o.tty_interval_ms = 1;
	u.p = progress_start_opts("thread", 200000, "items", &o);
	u.n = 200000;
	assert_int_equal(pthread_create(&th, NULL, updater_run, &u), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	progress_end(u.p, u.n);
	pipe_drain(fds[0], buf, sizeof buf);
	assert_true(count_char(buf, '\r') >= 2);	/* the first update's and the end's */
	assert_non_null(strstr(buf, "200000/200000  100%"));
	close(fds[0]);
	close(fds[1]);
}

/* ======================== the commands ================================== */

/* Run `stagedoor <args>` in e->dir with stderr on err_fd (closed here once
 * the child has it) and stdout to dir/cmd.out; while it runs, read_fd (the
 * other end of err_fd) is read into buf.  Returns the exit status. */
static int cmd_run(struct tu_env *e, const char *args, int err_fd, int read_fd, char *buf,
		   size_t size)
{
	char bin[PATH_MAX], outp[400], script[200];
	const char *const argv[] = { "/bin/sh", "-c", script, "sh", e->dir, bin, NULL };
	posix_spawn_file_actions_t fa;
	int64_t deadline = clock_mono_us() + 60 * 1000000LL;
	const char *prog = strncmp(args, "bench ", 6) == 0 ? tu_bench_bin() : tu_bin();
	pid_t pid;
	int rc, status;

	if (strncmp(args, "bench ", 6) == 0)
		args += 6;	/* the benchmark program's own words */
	if (!realpath(prog, bin))
		fail_msg("cannot resolve %s", prog);
	snprintf(script, sizeof script, "cd \"$1\" && exec \"$2\" %s", args);
	snprintf(outp, sizeof outp, "%s/cmd.out", e->dir);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
	posix_spawn_file_actions_addclose(&fa, read_fd);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(err_fd);
	if (rc != 0)
		fail_msg("cannot run %s: %s", argv[0], strerror(rc));
	buf[0] = '\0';
	/* read until the other side is closed (EOF on a pipe, EIO on a pty):
	 * the child's stderr is the last holder */
	for (;;) {
		size_t before = strlen(buf);

		fd_read_until(read_fd, buf, size, NULL, 1000);
		if (strlen(buf) == before && waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (clock_mono_us() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fail_msg("%s did not finish in 60 s; stderr so far:\n%s", args, buf);
		}
	}
	fd_read_until(read_fd, buf, size, NULL, 200);	/* anything left in a pty */
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* stderr on a pipe: plain progress lines for placing the orders and for the
 * drain, each ending with its final line; not one '\r'. */
static void test_demo_plain_progress_on_a_pipe(void **state)
{
	struct tu_env *e = *state;
	static char buf[1 << 16];
	int fds[2], rc;

	assert_int_equal(pipe(fds), 0);
	rc = cmd_run(e, "demo --orders 20", fds[1], fds[0], buf, sizeof buf);
	close(fds[0]);
	if (rc != 0)
		fail_msg("demo --orders 20: exit %d\nstderr:\n%s", rc, buf);
	assert_null(strchr(buf, '\r'));
	assert_non_null(strstr(buf, "progress label=place done=20 total=20 "));
	assert_non_null(strstr(buf, "progress label=drain done=60 total=60 "));
	assert_int_equal(count_str(buf, " final=true\n"), 2);
	assert_non_null(strstr(buf, "unit=orders final=true\n"));
	assert_non_null(strstr(buf, "unit=jobs final=true\n"));
}

/* stderr on a pty: the bar, redrawn with '\r', ending at 100% for both. */
static void test_demo_bar_on_a_pty(void **state)
{
	struct tu_env *e = *state;
	static char buf[1 << 16];
	int master, slave, rc;

	pty_open(&master, &slave, 100);
	rc = cmd_run(e, "demo --orders 20", slave, master, buf, sizeof buf);
	close(master);
	if (rc != 0)
		fail_msg("demo --orders 20: exit %d\nstderr:\n%s", rc, buf);
	assert_non_null(strstr(buf, "\rplace  ["));
	assert_non_null(strstr(buf, "20/20  100%"));
	assert_non_null(strstr(buf, "\rdrain  ["));
	assert_non_null(strstr(buf, "60/60  100%"));
	assert_null(strstr(buf, "progress label="));
}

static int starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The command's stdout (dir/cmd.out); caller frees. */
static char *cmd_out(struct tu_env *e)
{
	char outp[400];
	size_t size;

	snprintf(outp, sizeof outp, "%s/cmd.out", e->dir);
	return (char *)tu_slurp(outp, &size);
}

/* `stagedoor ARGS` with stderr on a pipe into buf; fails the test unless it
 * exits 0.  Returns its stdout; caller frees. */
static char *bench_ok(struct tu_env *e, const char *args, char *buf, size_t size)
{
	char *out;
	int fds[2], rc;

	assert_int_equal(pipe(fds), 0);
	rc = cmd_run(e, args, fds[1], fds[0], buf, size);
	close(fds[0]);
	out = cmd_out(e);
	if (rc != 0)
		fail_msg("%s: exit %d\nstderr:\n%s", args, rc, buf);
	return out;
}

/* bench queue, stderr on a pipe: a plain final line for each of its three
 * phases; stdout is the report alone, as before. */
static void test_bench_queue_progress(void **state)
{
	static char buf[1 << 16];
	char *out = bench_ok(*state, "bench queue --jobs 500 --latency-jobs 100 --json", buf,
			     sizeof buf);

	assert_non_null(strstr(buf, "bench: enqueue 500 noop jobs"));
	assert_non_null(strstr(buf, "progress label=enqueue done=500 total=500 "));
	assert_non_null(strstr(buf, "progress label=claim+ack done=500 total=500 "));
	assert_non_null(strstr(buf, "progress label=latency done=100 total=100 "));
	assert_int_equal(count_str(buf, " final=true\n"), 3);
	/* one JSON object, one line, nothing else */
	assert_true(starts_with(out, "{\"program\":\"stagedoor\",\"engine\":\"sqlite\",\"boxes\":1,\"jobs\":500,"));
	assert_int_equal(count_char(out, '\n'), 1);
	assert_int_equal(out[strlen(out) - 1], '\n');
	free(out);
}

/* bench queue --enqueue-batch: phase 1 commits that many jobs a transaction
 * while claims keep --batch; both are in the report.  Without it phase 1
 * follows --batch. */
static void test_bench_queue_enqueue_batch(void **state)
{
	static char buf[1 << 16];
	char *out = bench_ok(*state, "bench queue --jobs 300 --batch 100 --enqueue-batch 1 "
			     "--latency-jobs 0 --json", buf, sizeof buf);

	assert_non_null(strstr(buf, "bench: enqueue 300 noop jobs, 1 per transaction\n"));
	assert_non_null(strstr(buf, "bench: claim+ack with 1 worker, batch 100\n"));
	assert_non_null(strstr(out, "\"batch\":100,\"enqueue_batch\":1,"));
	free(out);

	out = bench_ok(*state, "bench queue --jobs 300 --batch 30 --latency-jobs 0 --json", buf,
		       sizeof buf);
	assert_non_null(strstr(buf, "bench: enqueue 300 noop jobs, 30 per transaction\n"));
	assert_non_null(strstr(out, "\"batch\":30,\"enqueue_batch\":30,"));
	free(out);
}

/* bench pipeline, stderr on a pty: a bar for intake, pipeline and alone;
 * stdout is the report. */
static void test_bench_pipeline_progress(void **state)
{
	struct tu_env *e = *state;
	static char buf[1 << 16];
	char *out;
	int master, slave, rc;

	pty_open(&master, &slave, 100);
	rc = cmd_run(e, "bench pipeline --orders 5 --alone 2", slave, master, buf, sizeof buf);
	close(master);
	out = cmd_out(e);
	if (rc != 0)
		fail_msg("bench pipeline: exit %d\nstderr:\n%s\nstdout:\n%s", rc, buf, out);
	assert_non_null(strstr(buf, "\rintake  ["));
	assert_non_null(strstr(buf, "5/5  100%"));
	assert_non_null(strstr(buf, "\rpipeline  ["));
	assert_non_null(strstr(buf, "15/15  100%"));
	assert_non_null(strstr(buf, "\ralone  ["));
	assert_non_null(strstr(buf, "2/2  100%"));
	assert_true(starts_with(out, "stagedoor-bench pipeline: 5 orders ("));
	assert_null(strchr(out, '\r'));
	free(out);
}

/* relay --drain and worker --drain, stderr on a pipe: a final plain line
 * each with the rows published and the jobs finished; on a pty, the bar. */
static void test_relay_and_worker_drain_progress(void **state)
{
	struct tu_env *e = *state;
	static char buf[1 << 16];
	char args[600];
	int fds[2], rc, i, master, slave;

	snprintf(args, sizeof args, "event add --name Gig --venue Hall --starts-at "
		 "2036-12-31T20:00Z --capacity 100 --db %s", e->db_path);
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(cmd_run(e, args, fds[1], fds[0], buf, sizeof buf), 0);
	close(fds[0]);
	for (i = 0; i < 10; i++) {
		snprintf(args, sizeof args, "order add --event 1 --name Buyer --email b%d@example.org "
			 "--seats 1 --db %s", i, e->db_path);
		assert_int_equal(pipe(fds), 0);
		assert_int_equal(cmd_run(e, args, fds[1], fds[0], buf, sizeof buf), 0);
		close(fds[0]);
	}
	/* 10 orders: 20 outbox rows (render and count each) */
	snprintf(args, sizeof args, "relay --drain --db %s", e->db_path);
	assert_int_equal(pipe(fds), 0);
	rc = cmd_run(e, args, fds[1], fds[0], buf, sizeof buf);
	close(fds[0]);
	if (rc != 0)
		fail_msg("relay --drain: %d\n%s", rc, buf);
	assert_non_null(strstr(buf, "progress label=relay done=20 total=20 "));
	assert_int_equal(count_str(buf, " final=true\n"), 1);

	/* 20 jobs ready (the send jobs the renders add wait in the outbox) */
	snprintf(args, sizeof args, "worker --drain --db %s", e->db_path);
	pty_open(&master, &slave, 100);
	rc = cmd_run(e, args, slave, master, buf, sizeof buf);
	close(master);
	if (rc != 0)
		fail_msg("worker --drain: %d\n%s", rc, buf);
	assert_non_null(strstr(buf, "\rdrain  ["));
	if (!strstr(buf, "20/20  100%"))
		fail_msg("worker --drain bar:\n%s", buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bar_on_a_pty),
		cmocka_unit_test(test_bar_fits_the_terminal_width),
		cmocka_unit_test(test_bar_keeps_its_width),
		cmocka_unit_test(test_shorter_redraw_pads_the_old_line),
		cmocka_unit_test(test_plain_lines_on_a_pipe),
		cmocka_unit_test(test_plain_label_is_quoted),
		cmocka_unit_test(test_many_updates_few_lines),
		cmocka_unit_test(test_unknown_total),
		cmocka_unit_test(test_final_line),
		cmocka_unit_test(test_set_total),
		cmocka_unit_test(test_update_from_another_thread),
		cmocka_unit_test_setup_teardown(test_demo_plain_progress_on_a_pipe,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_demo_bar_on_a_pty, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_relay_and_worker_drain_progress, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_bench_queue_progress, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_bench_queue_enqueue_batch, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_bench_pipeline_progress, tu_setup_real_nodb,
						tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
