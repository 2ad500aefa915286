/*
 * notify.c: eventfd for this process, inotify for the others.
 *
 * The registry is a fixed array of atomic fds so that notify_broadcast() can
 * run from a signal handler: it takes no lock and only calls write().
 */
#define _GNU_SOURCE
#include "notify.h"

#include "clock.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#define NOTIFY_FALLBACK_MS 25

struct notify {
	int efd;		/* eventfd: in-process wakes */
	int ifd;		/* inotify on the database directory, or -1 */
	int slot;		/* index in the registry */
	char wal[NAME_MAX + 1];	/* "<db file name>-wal" */
	int (*watch_fd)(void *);	/* a socket that brings wake-ups, or NULL */
	int (*watch_heard)(void *);
	void *watch_arg;
};

static atomic_int registry[NOTIFY_MAX];
static atomic_int registry_ready;

static void registry_init(void)
{
	int expected = 0, i;

	if (atomic_load(&registry_ready) == 2)
		return;
	if (atomic_compare_exchange_strong(&registry_ready, &expected, 1)) {
		for (i = 0; i < NOTIFY_MAX; i++)
			atomic_store(&registry[i], -1);
		atomic_store(&registry_ready, 2);
	}
	while (atomic_load(&registry_ready) != 2)
		;
}

enum sd_result notify_open(const char *db_path, struct notify **out)
{
	struct notify *n;
	char dir[PATH_MAX];
	const char *base;
	int i;

	*out = NULL;
	registry_init();
	n = calloc(1, sizeof *n);
	if (!n)
		return err_set(SD_NOMEM, "out of memory");
	n->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (n->efd < 0) {
		free(n);
		return err_set(SD_IO, "eventfd: %s", strerror(errno));
	}
	n->ifd = -1;
	base = strrchr(db_path, '/');
	if (base) {
		size_t len = (size_t)(base - db_path);
		if (len == 0)
			len = 1;
		if (len >= sizeof dir)
			len = sizeof dir - 1;
		memcpy(dir, db_path, len);
		dir[len] = '\0';
		base++;
	} else {
		strcpy(dir, ".");
		base = db_path;
	}
	snprintf(n->wal, sizeof n->wal, "%s-wal", base);
	/* a server's URI has no file to watch: its wakes come by notify_watch */
	if (!strstr(db_path, "://"))
		n->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (n->ifd >= 0 && inotify_add_watch(n->ifd, dir, IN_MODIFY | IN_CREATE) < 0) {
		close(n->ifd);
		n->ifd = -1;
	}
	n->slot = -1;
	for (i = 0; i < NOTIFY_MAX; i++) {
		int expected = -1;
		if (atomic_compare_exchange_strong(&registry[i], &expected, n->efd)) {
			n->slot = i;
			break;
		}
	}
	if (n->slot < 0) {
		notify_close(n);
		return err_set(SD_INVALID, "too many waiters in one process (max %d)", NOTIFY_MAX);
	}
	*out = n;
	return SD_OK;
}

void notify_close(struct notify *n)
{
	if (!n)
		return;
	if (n->slot >= 0)
		atomic_store(&registry[n->slot], -1);
	if (n->ifd >= 0)
		close(n->ifd);
	close(n->efd);
	free(n);
}

static void wake_fd(int fd)
{
	uint64_t one = 1;
	ssize_t w;

	w = write(fd, &one, sizeof one);
	(void)w;	/* EAGAIN: the counter is already non-zero, the waiter will wake */
}

void notify_wake(struct notify *n)
{
	wake_fd(n->efd);
}

void notify_broadcast(void)
{
	int i, fd;

	if (atomic_load(&registry_ready) != 2)
		return;
	for (i = 0; i < NOTIFY_MAX; i++)
		if ((fd = atomic_load(&registry[i])) >= 0)
			wake_fd(fd);
}

/* Drain inotify; 1 when one of the events touched our -wal file. */
static int drain_inotify(struct notify *n)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	int hit = 0;
	ssize_t len;

	while ((len = read(n->ifd, buf, sizeof buf)) > 0) {
		char *p = buf;
		while (p < buf + len) {
			struct inotify_event *ev = (struct inotify_event *)p;
			if (ev->len && strcmp(ev->name, n->wal) == 0)
				hit = 1;
			p += sizeof *ev + ev->len;
		}
	}
	return hit;
}

void notify_watch(struct notify *n, int (*fd)(void *arg), int (*heard)(void *arg), void *arg)
{
	n->watch_fd = fd;
	n->watch_heard = heard;
	n->watch_arg = arg;
}

int notify_wait(struct notify *n, int timeout_ms)
{
	struct pollfd pf[3];
	int nfds = 1, rc, woke = 0, ino = -1, sock = -1;
	uint64_t v;

	if (n->watch_heard && n->watch_heard(n->watch_arg))
		return 1;	/* a wake-up that came in with an earlier answer */
	pf[0].fd = n->efd;
	pf[0].events = POLLIN;
	if (n->ifd >= 0) {
		pf[nfds].fd = n->ifd;
		pf[nfds].events = POLLIN;
		ino = nfds++;
	}
	if (n->watch_fd && (pf[nfds].fd = n->watch_fd(n->watch_arg)) >= 0) {
		pf[nfds].events = POLLIN;
		sock = nfds++;
	}
	if (nfds == 1 && (timeout_ms < 0 || timeout_ms > NOTIFY_FALLBACK_MS))
		timeout_ms = NOTIFY_FALLBACK_MS;
	int64_t deadline = timeout_ms < 0 ? -1 : clock_mono_us() + (int64_t)timeout_ms * 1000;

	for (;;) {
		rc = poll(pf, (nfds_t)nfds, timeout_ms);
		if (rc < 0 && errno == EINTR)
			return 1;	/* a signal: let the caller look at its flags */
		if (rc <= 0)
			return 0;
		if (pf[0].revents & POLLIN) {
			if (read(n->efd, &v, sizeof v) > 0)
				woke = 1;
		}
		if (ino > 0 && (pf[ino].revents & POLLIN) && drain_inotify(n))
			woke = 1;
		if (sock > 0 && pf[sock].revents) {
			if (n->watch_heard(n->watch_arg))
				woke = 1;
			if (pf[sock].revents & (POLLHUP | POLLERR | POLLNVAL))
				return 1;	/* the connection broke: the caller reconnects */
		}
		if (woke)
			return 1;
		/* events for other files in the directory: keep waiting */
		if (deadline >= 0) {
			int64_t left = deadline - clock_mono_us();
			if (left <= 0)
				return 0;
			timeout_ms = (int)((left + 999) / 1000);
		}
	}
}

void notify_pause(struct notify *n, int timeout_ms)
{
	int64_t until = clock_mono_us() + (int64_t)timeout_ms * 1000, left;

	while (!notify_stop_requested() && (left = (until - clock_mono_us()) / 1000) > 0)
		notify_wait(n, (int)left);
}

static atomic_int stop_flag;

void notify_request_stop(void)
{
	atomic_store(&stop_flag, 1);
	notify_broadcast();
}

int notify_stop_requested(void)
{
	return atomic_load(&stop_flag);
}

void notify_stop_reset(void)
{
	atomic_store(&stop_flag, 0);
}
