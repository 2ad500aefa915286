/*
 * log.c: logfmt lines.  Each line is formatted in a local buffer and written
 * with one write(2), so lines from threads and processes never interleave.
 */
#define _POSIX_C_SOURCE 200809L
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

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
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}
