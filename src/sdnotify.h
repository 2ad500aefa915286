/*
 * sdnotify.h: the service manager.  `stagedoor run` tells systemd (a
 * Type=notify unit) when the box is ready, what it is doing, when it reloads
 * and stops, and feeds the watchdog (WatchdogSec=) while its children are
 * healthy.  libsystemd's sd_notify protocol is used here and nowhere else.
 *
 * Without $NOTIFY_SOCKET (a box started by hand, by a test, by another
 * supervisor) every call does nothing and sdnotify_watchdog_ms() is 0.
 * Messages go from the process that calls, which must be systemd's main
 * process (the unit says NotifyAccess=main): only `run` calls these.
 */
#ifndef SD_SDNOTIFY_H
#define SD_SDNOTIFY_H

#include <stdint.h>

/* sdnotify_ready: READY=1, with STATUS=status when status is not NULL: the
 * box has started, or has finished a reload. */
void sdnotify_ready(const char *status);

/* sdnotify_status: STATUS=status, one line shown by `systemctl status`. */
void sdnotify_status(const char *status);

/* sdnotify_reloading: RELOADING=1; sdnotify_ready() ends the reload. */
void sdnotify_reloading(void);

/* sdnotify_stopping: STOPPING=1, with STATUS=status when not NULL. */
void sdnotify_stopping(const char *status);

/* sdnotify_watchdog_ms: WatchdogSec= in milliseconds when systemd expects
 * this process to feed a watchdog ($WATCHDOG_USEC, and $WATCHDOG_PID unset
 * or this process); 0: no watchdog. */
int64_t sdnotify_watchdog_ms(void);

/* sdnotify_watchdog: WATCHDOG=1, one feed. */
void sdnotify_watchdog(void);

#endif
