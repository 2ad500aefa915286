/*
 * progress.h: how far a long command is, on stderr.
 *
 * On a terminal: one line redrawn in place with '\r', at most every 100 ms,
 *
 *   render  [#########.........]  1234/2000  61%  512.3 orders/s  eta 1s
 *
 * as wide as the terminal (TIOCGWINSZ, else 80 columns), finished with a
 * newline by progress_end.  Anywhere else (a pipe, a file, a journal): a
 * plain logfmt line at most every 5 s, and always one at the end,
 *
 *   progress label=render done=1234 total=2000 rate=512.3/s elapsed=2.4s unit=orders
 *   progress label=render done=2000 total=2000 rate=511.9/s elapsed=3.9s unit=orders final=true
 *
 * Which of the two is decided once, in progress_start, by isatty() on the
 * descriptor; tests force either and drive a fake time source through
 * struct progress_opts.  Every line (a redraw included) is one write(2).
 * Output is best effort: a write that fails is dropped, never reported.
 *
 * Threads: progress_update may be called from any thread, the one that
 * started the progress or another (a worker's loop, a handler); a mutex
 * inside serializes calls, so several threads may even update at once.
 * progress_end frees: call it once, from any thread, after every thread
 * that updates has made its last call (joined or otherwise finished).
 */
#ifndef SD_PROGRESS_H
#define SD_PROGRESS_H

#include <stdint.h>

#define PROGRESS_TTY_INTERVAL_MS 100	/* a terminal redraws at most this often */
#define PROGRESS_PLAIN_INTERVAL_MS 5000	/* plain lines at most this often */
#define PROGRESS_WIDTH_DEFAULT 80	/* columns when the terminal will not say */

/* tty modes for struct progress_opts */
enum progress_tty {
	PROGRESS_TTY_AUTO = 0,		/* isatty(fd) at start */
	PROGRESS_TTY_YES,		/* draw the bar whatever fd is */
	PROGRESS_TTY_NO,		/* plain lines whatever fd is */
};

/* Everything progress_start decides by itself, for tests and odd callers.
 * A zeroed struct means the defaults; fd 0 means stderr (a progress on
 * stdin would make no sense). */
struct progress_opts {
	int fd;				/* where lines go; 0: STDERR_FILENO */
	enum progress_tty tty;		/* bar or plain lines */
	int width;			/* columns for the bar; 0: TIOCGWINSZ on fd, else 80 */
	int64_t tty_interval_ms;	/* 0: PROGRESS_TTY_INTERVAL_MS */
	int64_t plain_interval_ms;	/* 0: PROGRESS_PLAIN_INTERVAL_MS */
	/* now_us (may be NULL: clock_mono_us): a monotonic time in µs, called
	 * under the progress's mutex; lets tests fix the rate and the intervals */
	int64_t (*now_us)(void *arg);
	void *now_arg;
};

struct progress;

/*
 * progress_start: begin showing label's progress towards total (0: unknown)
 * counted in unit ("orders", "jobs"; NULL: "items") on stderr.  Prints
 * nothing yet.  [in] label and unit are copied (label cut at 32 bytes).
 * Returns NULL when out of memory; every progress_* function accepts NULL
 * and then does nothing, so a caller need not check.
 */
struct progress *progress_start(const char *label, int64_t total, const char *unit);

/* progress_start_opts: progress_start with o (may be NULL: the defaults). */
struct progress *progress_start_opts(const char *label, int64_t total, const char *unit,
				     const struct progress_opts *o);

/*
 * progress_update: done units so far.  Cheap (a lock and a clock read); it
 * writes only when the interval since the last line has passed (a terminal's
 * first update draws at once; the first plain line waits one interval).
 */
void progress_update(struct progress *p, int64_t done);

/* progress_set_total: the total changed (0: now unknown); shown from the
 * next line on. */
void progress_set_total(struct progress *p, int64_t total);

/*
 * progress_end: write the final line with done (< 0: the last update's,
 * for a caller that failed half way), whatever the interval, and free p.
 * A terminal's final line ends in a newline; a plain one carries final=true.
 * The rate on it is done over the whole time since progress_start.
 */
void progress_end(struct progress *p, int64_t done);

#endif
