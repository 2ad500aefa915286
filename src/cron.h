/*
 * cron.h: cron expressions, the times a periodic job runs (schedule.h).
 *
 * Five fields apart by spaces, as in Vixie cron and crontab(5): minute (0-59), hour
 * (0-23), day of month (1-31), month (1-12 or JAN-DEC), day of week (0-7,
 * 0 and 7 Sunday, or SUN-SAT).  Each is *, a number, a range a-b, a list
 * a,b-c, and any of * or a range with a step /n ("*" "/15"); a number
 * with a step, 5/15, runs from 5 to the field's end.  When both day
 * fields are restricted a day matches either (crontab(5)); when one is *,
 * the other decides.  @hourly, @daily (@midnight), @weekly, @monthly,
 * @yearly (@annually) stand for their five fields.
 *
 * The times are local times of a zone (tz.h), and a local time is one
 * instant: one the clocks pass twice runs at its first, one they skip runs
 * once, at the instant they jump (tz_local).
 */
#ifndef SD_CRON_H
#define SD_CRON_H

#include <stdint.h>

#include "result.h"
#include "tz.h"

#define CRON_TEXT_MAX 200		/* bytes of an expression */
#define CRON_SEARCH_DAYS (366 * 9)	/* how far ahead a next time is looked for */

struct cron {
	uint64_t minute;		/* bit i: minute i */
	uint32_t hour, dom, month;	/* bit i: hour i, day i (1-31), month i (1-12) */
	uint8_t dow;			/* bit i: weekday i, 0 Sunday */
	int dom_star, dow_star;		/* the day field began with '*' */
};

/* cron_parse: text into c.  SD_INVALID naming the field at fault. */
enum sd_result cron_parse(const char *text, struct cron *c);

/* cron_macro: the five fields that text (@daily, ...) stands for; NULL
 * when it is no macro */
const char *cron_macro(const char *text);

/* cron_next: the first instant after t (seconds since the epoch) at which
 * c's local time in z comes; -1 when none comes in CRON_SEARCH_DAYS
 * ("0 0 30 2 *"). */
int64_t cron_next(const struct cron *c, const struct tz *z, int64_t t);

#endif
