/*
 * progress.c: the progress bar on a terminal, plain lines elsewhere.
 *
 * Invariants: everything in struct progress is read and written under mu;
 * one line is built in a stack buffer and leaves in one write(2) (a short
 * write is continued, never interleaved with another line of ours, because
 * mu is held); a terminal line never reaches the last column, so it never
 * wraps and '\r' always returns to its start; a redraw shorter than the line
 * before pads with spaces over the rest (no escape sequences: a dumb
 * terminal shows the same thing).
 */
#define _DEFAULT_SOURCE
#include "progress.h"

#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "clock.h"

#define PROGRESS_LABEL_MAX 32
#define PROGRESS_UNIT_MAX 16
#define PROGRESS_LINE_MAX 512		/* also the widest terminal we fill */
#define PROGRESS_BAR_MIN 5		/* below this the bar is left out */
#define PROGRESS_BAR_MAX 40		/* a wider bar says nothing more */

struct progress {
	pthread_mutex_t mu;		/* guards every field below */
	char label[PROGRESS_LABEL_MAX + 1];
	char unit[PROGRESS_UNIT_MAX + 1];
	int fd;				/* where lines go (borrowed, never closed) */
	int tty;			/* 1: redrawn bar; 0: plain lines */
	int width;			/* fixed columns; 0: ask the terminal each draw */
	int64_t total;			/* 0: unknown */
	int64_t done;			/* the latest update */
	int64_t start_us;		/* now_us() at progress_start */
	int64_t last_us;		/* the last line's time; drawn == 0: none yet */
	int drawn;			/* a line was written */
	int64_t interval_us;		/* least time between two lines */
	int last_len;			/* visible length of the last terminal line */
	int right_max;			/* the longest text right of the bar so far */
	int64_t (*now_us)(void *arg);	/* the time source */
	void *now_arg;
};

static int64_t progress_mono(void *arg)
{
	(void)arg;
	return clock_mono_us();
}

/* ---- output ------------------------------------------------------------- */

/* One line, one write(2); continued after a short write or a signal. */
static void progress_write(int fd, const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;		/* best effort: a closed pipe loses the line */
		s += w;
		n -= (size_t)w;
	}
}

/* Columns of the terminal on fd, else PROGRESS_WIDTH_DEFAULT; at most the
 * line buffer. */
static int progress_width(const struct progress *p)
{
	struct winsize ws;
	int w = p->width;

	if (w <= 0) {
		w = PROGRESS_WIDTH_DEFAULT;
		if (ioctl(p->fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
			w = ws.ws_col;
	}
	if (w > PROGRESS_LINE_MAX - 8)
		w = PROGRESS_LINE_MAX - 8;
	return w;
}

/* Decimal digits of v >= 0. */
static int progress_digits(int64_t v)
{
	int d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

/* A duration for people: 4.2s, 3m05s, 1h02m. */
static void progress_dur(char *buf, size_t size, double s, int tenths)
{
	long t = (long)s;

	if (s < 60 && tenths)
		snprintf(buf, size, "%.1fs", s);
	else if (s < 60)
		snprintf(buf, size, "%lds", t + (s > (double)t));	/* round up: never "eta 0s" early */
	else if (s < 3600)
		snprintf(buf, size, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, size, "%ldh%02ldm", t / 3600, t % 3600 / 60);
}

/* A logfmt value: bare when it can be, else quoted with \" and \\. */
static size_t progress_logfmt(char *buf, size_t size, const char *v)
{
	size_t n = 0;

	if (v[0] && !strpbrk(v, " =\"\\\t"))
		return (size_t)snprintf(buf, size, "%s", v);
	buf[n++] = '"';
	/* room for an escaped byte, the closing quote and the NUL */
	for (; *v && n + 4 < size; v++) {
		if (*v == '"' || *v == '\\')
			buf[n++] = '\\';
		buf[n++] = *v;
	}
	buf[n++] = '"';
	buf[n] = '\0';
	return n;
}

/*
 * progress_draw: write one line for p->done at now; final: the last one.
 * Called with mu held.
 */
static void progress_draw(struct progress *p, int64_t now, int final)
{
	char line[PROGRESS_LINE_MAX + 2], right[200], eta[48], el[32], lab[80];
	double secs = (double)(now - p->start_us) / 1e6;
	double rate = secs > 0 ? (double)p->done / secs : 0;
	int n, width, bar, fill, i;

	progress_dur(el, sizeof el, secs, 1);
	if (!p->tty) {
		progress_logfmt(lab, sizeof lab, p->label);
		n = snprintf(line, sizeof line, "progress label=%s done=%lld", lab,
			     (long long)p->done);
		if (p->total > 0)
			n += snprintf(line + n, sizeof line - (size_t)n, " total=%lld",
				      (long long)p->total);
		n += snprintf(line + n, sizeof line - (size_t)n, " rate=%.1f/s elapsed=%s unit=%s%s\n",
			      rate, el, p->unit, final ? " final=true" : "");
		if (n > (int)sizeof line - 1)
			n = (int)sizeof line - 1;
		progress_write(p->fd, line, (size_t)n);
		return;
	}

	width = progress_width(p);
	if (p->total > 0) {
		int64_t d = p->done < 0 ? 0 : p->done > p->total ? p->total : p->done;
		int pct = (int)(d * 100 / p->total);

		if (final)
			snprintf(eta, sizeof eta, "in %s", el);
		else if (d >= p->total)
			snprintf(eta, sizeof eta, "eta 0s");
		else if (rate > 0) {
			memcpy(eta, "eta ", 4);
			progress_dur(eta + 4, sizeof eta - 4, (double)(p->total - d) / rate, 0);
		} else {
			snprintf(eta, sizeof eta, "eta ?");
		}
		/* fixed-width counts, and a right part that never gets shorter,
		 * so the bar keeps its width from frame to frame */
		n = snprintf(right, sizeof right, "  %*lld/%lld  %3d%%  %.1f %s/s  %s",
			     progress_digits(p->total), (long long)p->done, (long long)p->total,
			     pct, rate, p->unit, eta);
		for (; n < p->right_max && n < (int)sizeof right - 1; n++)
			right[n] = ' ';
		right[n] = '\0';
		if (n > p->right_max)
			p->right_max = n;
		/* "\r" + label + "  [" + bar + "]" + right must stay under width */
		bar = width - 1 - (int)strlen(p->label) - 3 - 1 - (int)strlen(right);
		if (bar > PROGRESS_BAR_MAX)
			bar = PROGRESS_BAR_MAX;
		n = snprintf(line, sizeof line, "\r%s", p->label);
		if (bar >= PROGRESS_BAR_MIN) {
			fill = (int)(d * bar / p->total);
			n += snprintf(line + n, sizeof line - (size_t)n, "  [");
			for (i = 0; i < bar; i++)
				line[n++] = i < fill ? '#' : '.';
			line[n++] = ']';
			line[n] = '\0';
		}
		n += snprintf(line + n, sizeof line - (size_t)n, "%s", right);
	} else {
		n = snprintf(line, sizeof line, "\r%s  %lld %s  %.1f %s/s  %s%s", p->label,
			     (long long)p->done, p->unit, rate, p->unit, final ? "in " : "", el);
	}
	if (n > (int)sizeof line - 2)
		n = (int)sizeof line - 2;
	/* the visible part (after '\r') stays under the last column */
	if (n - 1 > width - 1)
		n = width;
	/* pad over what is left of a longer line before */
	for (i = n - 1; i < p->last_len && n < (int)sizeof line - 2; i++)
		line[n++] = ' ';
	p->last_len = final ? 0 : n - 1;
	if (final)
		line[n++] = '\n';
	progress_write(p->fd, line, (size_t)n);
}

/* The log's line hook while a bar is on stderr: wipe the bar so the log
 * line starts on a clean line; the next update draws it again below. */
static void progress_clear(void *arg)
{
	struct progress *p = arg;
	char blank[PROGRESS_LINE_MAX + 2];
	int n = 0;

	pthread_mutex_lock(&p->mu);
	if (p->last_len > 0) {
		blank[n++] = '\r';
		while (n <= p->last_len && n < (int)sizeof blank - 1)
			blank[n++] = ' ';
		blank[n++] = '\r';
		progress_write(p->fd, blank, (size_t)n);
		p->last_len = 0;
		p->last_us = 0;		/* draw again at the next update */
	}
	pthread_mutex_unlock(&p->mu);
}

/* ---- the API -------------------------------------------------------------- */

struct progress *progress_start_opts(const char *label, int64_t total, const char *unit,
				     const struct progress_opts *o)
{
	static const struct progress_opts defaults;
	struct progress *p = calloc(1, sizeof *p);
	size_t i;

	if (!p)
		return NULL;
	if (!o)
		o = &defaults;
	pthread_mutex_init(&p->mu, NULL);
	snprintf(p->label, sizeof p->label, "%s", label && *label ? label : "progress");
	/* a control character would break the line it sits in */
	for (i = 0; p->label[i]; i++)
		if ((unsigned char)p->label[i] < 0x20)
			p->label[i] = ' ';
	snprintf(p->unit, sizeof p->unit, "%s", unit && *unit ? unit : "items");
	for (i = 0; p->unit[i]; i++)
		if ((unsigned char)p->unit[i] <= 0x20 || p->unit[i] == '=' || p->unit[i] == '"')
			p->unit[i] = '_';
	p->fd = o->fd > 0 ? o->fd : STDERR_FILENO;
	p->tty = o->tty == PROGRESS_TTY_YES ||
		 (o->tty == PROGRESS_TTY_AUTO && isatty(p->fd));
	p->width = o->width;
	p->total = total > 0 ? total : 0;
	p->now_us = o->now_us ? o->now_us : progress_mono;
	p->now_arg = o->now_arg;
	if (p->tty)
		p->interval_us = 1000 * (o->tty_interval_ms > 0 ? o->tty_interval_ms
							     : PROGRESS_TTY_INTERVAL_MS);
	else
		p->interval_us = 1000 * (o->plain_interval_ms > 0 ? o->plain_interval_ms
							       : PROGRESS_PLAIN_INTERVAL_MS);
	p->start_us = p->now_us(p->now_arg);
	if (p->tty && p->fd == STDERR_FILENO)
		log_set_line_hook(progress_clear, p);
	return p;
}

struct progress *progress_start(const char *label, int64_t total, const char *unit)
{
	return progress_start_opts(label, total, unit, NULL);
}

void progress_update(struct progress *p, int64_t done)
{
	int64_t now, since;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->done = done;
	now = p->now_us(p->now_arg);
	/* a terminal shows something at once; a log waits one interval */
	since = p->drawn ? p->last_us : p->tty ? now - p->interval_us : p->start_us;
	if (now - since >= p->interval_us) {
		progress_draw(p, now, 0);
		p->last_us = now;
		p->drawn = 1;
	}
	pthread_mutex_unlock(&p->mu);
}

void progress_set_total(struct progress *p, int64_t total)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->total = total > 0 ? total : 0;
	pthread_mutex_unlock(&p->mu);
}

void progress_end(struct progress *p, int64_t done)
{
	if (!p)
		return;
	if (p->tty && p->fd == STDERR_FILENO)
		log_set_line_hook(NULL, NULL);
	pthread_mutex_lock(&p->mu);
	if (done >= 0)
		p->done = done;
	progress_draw(p, p->now_us(p->now_arg), 1);
	pthread_mutex_unlock(&p->mu);
	pthread_mutex_destroy(&p->mu);
	free(p);
}
