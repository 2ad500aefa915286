/*
 * sdnotify.c: the service manager, through libsystemd's sd_notify (see
 * sdnotify.h).  A message that cannot be sent is not an error of the box:
 * systemd notices a missing READY=1 or watchdog feed on its own, so failures
 * are logged at debug level and otherwise ignored.
 */
#define _GNU_SOURCE
#include "sdnotify.h"

#include <stdio.h>
#include <string.h>

#include <systemd/sd-daemon.h>

#include "log.h"

/* sdnotify_send: one notification; text is a set of NAME=value lines. */
static void sdnotify_send(const char *text)
{
	int r = sd_notify(0, text);

	if (r < 0)
		log_event(LOG_DEBUG, "service manager notification not sent", "err=\"%s\"",
			  strerror(-r));
}

/* send_with_status: first (READY=1, STOPPING=1) and, when status is not
 * NULL, STATUS=status in the same datagram. */
static void send_with_status(const char *first, const char *status)
{
	char buf[512];

	if (!status) {
		sdnotify_send(first);
		return;
	}
	snprintf(buf, sizeof buf, "%s%sSTATUS=%s", first, *first ? "\n" : "", status);
	sdnotify_send(buf);
}

void sdnotify_ready(const char *status)
{
	send_with_status("READY=1", status);
}

void sdnotify_status(const char *status)
{
	send_with_status("", status);
}

void sdnotify_reloading(void)
{
	sdnotify_send("RELOADING=1");
}

void sdnotify_stopping(const char *status)
{
	send_with_status("STOPPING=1", status);
}

int64_t sdnotify_watchdog_ms(void)
{
	uint64_t usec = 0;

	/* 0: do not unset the variables; children never read them */
	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
		return 0;
	return usec < 1000 ? 1 : (int64_t)(usec / 1000);
}

void sdnotify_watchdog(void)
{
	sdnotify_send("WATCHDOG=1");
}
