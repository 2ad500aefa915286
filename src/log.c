/*
 * log.c: logfmt lines.  Each line is formatted in a local buffer and written
 * with one write(2), so lines from threads and processes never interleave.
 */
#define _POSIX_C_SOURCE 200809L
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "result.h"

static atomic_int level = LOG_INFO;

void log_set_level(enum log_level l)
{
	atomic_store(&level, (int)l);
}

enum log_level log_get_level(void)
{
	return (enum log_level)atomic_load(&level);
}

int log_level_parse(const char *s)
{
	static const char *names[] = { "debug", "info", "warn", "error", "off" };
	int i;

	for (i = 0; i < 5; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

int log_enabled(enum log_level l)
{
	return (int)l >= atomic_load(&level) && l != LOG_OFF;
}

static void (*_Atomic line_hook)(void *arg);
static void *_Atomic line_hook_arg;

void log_set_line_hook(void (*fn)(void *arg), void *arg)
{
	atomic_store(&line_hook_arg, arg);
	atomic_store(&line_hook, fn);
}

static char log_path[4096];	/* "" while logging to the inherited stderr */
static int console_fd = -1;	/* the inherited stderr, once a log file took its place */

static int log_reopen(void)
{
	int fd;

	if (!log_path[0])
		return SD_OK;
	fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		return SD_IO;
	if (fd != STDERR_FILENO) {
		dup2(fd, STDERR_FILENO);	/* atomic: no line is lost between */
		close(fd);
	}
	return SD_OK;
}

int log_open_file(const char *path)
{
	if (!path || !*path)
		return SD_OK;
	if (strlen(path) >= sizeof log_path)
		return err_set(SD_INVALID, "log_file: the path is too long");
	snprintf(log_path, sizeof log_path, "%s", path);
	if (console_fd < 0)
		console_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (log_reopen() != SD_OK) {
		int e = errno;
		log_path[0] = '\0';
		return err_set(SD_IO, "log_file %s: cannot open it: %s", path, strerror(e));
	}
	return SD_OK;
}

void log_console(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof line - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof line - 2)
		n = (int)sizeof line - 2;
	line[n++] = '\n';
	if (write(console_fd >= 0 ? console_fd : STDERR_FILENO, line, (size_t)n) < 0)
		return;	/* nowhere left to say it */
}

const char *log_quote(char *buf, size_t size, const char *s)
{
	size_t o = 0;
	int need = !s || !*s;
	const char *p;

	if (!s)
		s = "";
	for (p = s; *p && !need; p++)
		if (*p == ' ' || *p == '"' || *p == '=' || (unsigned char)*p < 32 || *p == '\\')
			need = 1;
	if (!need) {
		snprintf(buf, size, "%s", s);
		return buf;
	}
	if (size < 3) {
		if (size)
			buf[0] = '\0';
		return buf;
	}
	buf[o++] = '"';
	for (p = s; *p && o + 3 < size; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '"' || c == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)c;
		} else if (c < 32) {
			buf[o++] = ' ';
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

void log_event(enum log_level l, const char *msg, const char *kv_fmt, ...)
{
	static const char *names[] = { "debug", "info", "warn", "error" };
	char line[2048], q[512];
	int64_t ms = clock_now_ms();
	time_t secs = (time_t)(ms / 1000);
	struct tm tm;
	size_t n;
	va_list ap;

	if (!log_enabled(l))
		return;
	gmtime_r(&secs, &tm);
	n = strftime(line, sizeof line, "ts=%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof line - n, ".%03dZ level=%s msg=%s",
			      (int)(ms % 1000), names[l], log_quote(q, sizeof q, msg));
	if (kv_fmt && n + 1 < sizeof line) {
		line[n++] = ' ';
		va_start(ap, kv_fmt);
		vsnprintf(line + n, sizeof line - n, kv_fmt, ap);
		va_end(ap);
		n = strlen(line);
	}
	if (n >= sizeof line - 1)
		n = sizeof line - 2;
	line[n++] = '\n';
	{
		void (*fn)(void *) = atomic_load(&line_hook);
		if (fn)
			fn(atomic_load(&line_hook_arg));
	}
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

int log_level_from_env(const char *prog)
{
	const char *lvl = getenv("STAGEDOOR_LOG_LEVEL");
	int l;

	if (!lvl || !*lvl)
		return 0;
	if ((l = log_level_parse(lvl)) < 0) {
		fprintf(stderr, "%s: STAGEDOOR_LOG_LEVEL must be debug, info, warn, error or off, "
				"not '%s'\n", prog, lvl);
		return 2;
	}
	log_set_level((enum log_level)l);
	return 0;
}
