/*
 * log.h: one logfmt line per event on stderr, journald-friendly.
 *
 *   ts=2026-11-30T07:37:34.123Z level=info msg="job done" job_id=... kind=noop
 *
 * Only ids, kinds, counts and outcomes are logged: never a payload, a secret
 * or a buyer's personal data.
 */
#ifndef SD_LOG_H
#define SD_LOG_H

#include <stddef.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* log_level_parse: "debug", "info", "warn", "error", "off"; -1 when unknown. */
int log_level_parse(const char *s);

/* log_enabled: cheap check before building an expensive line. */
int log_enabled(enum log_level level);

/*
 * log_event: write one line.  msg is quoted here; kv_fmt (may be NULL) is a
 * printf format of further key=value pairs whose values the caller quotes
 * with log_quote when they may hold spaces.
 */
void log_event(enum log_level level, const char *msg, const char *kv_fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * log_open_file: from now on, stderr (and so every log line, this process's
 * and its children's to come) appends to path, created 0640 when missing;
 * NULL or "": leave stderr as it is.  log_reopen: open the same path again
 * (after logrotate moved it: SIGHUP); async-signal-safe.  SD_IO naming the
 * path when it cannot be opened; stderr is then unchanged.
 */
int log_open_file(const char *path);

/* log_console: one line (a newline added) to the stderr this process had
 * before log_open_file (under systemd: the journal), so that a reason to
 * stop is seen where `systemctl status` looks, whatever log_file says. */
void log_console(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* log_set_line_hook: fn(arg) runs before each line is written (NULL: none);
 * a progress bar on the same terminal clears itself there, so that log
 * lines and the bar never share a line. */
void log_set_line_hook(void (*fn)(void *arg), void *arg);

/* log_quote: s as a logfmt value in buf: quoted when needed, with quotes,
 * backslashes and control characters escaped.  Returns buf. */
const char *log_quote(char *buf, size_t size, const char *s);

/* log_level_from_env: the level $STAGEDOOR_LOG_LEVEL names, when set; 0,
 * or 2 after "PROG: STAGEDOOR_LOG_LEVEL must be ..." on stderr. */
int log_level_from_env(const char *prog);

#endif
