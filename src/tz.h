/*
 * tz.h: a zone of the tz database read on its own, for any zone at any
 * time, without the process-wide TZ that timefmt.h sets for the venue.
 *
 * A periodic job's cron expression names local times in its own zone
 * (schedule.h); the C library knows one zone per process, so the zone's
 * TZif file (RFC 8536, /usr/share/zoneinfo) is read here: its transitions,
 * and past the last of them the POSIX TZ rule in its footer
 * ("CET-1CEST,M3.5.0,M10.5.0/3"), which is all Debian's slim files hold
 * for the years ahead.
 */
#ifndef SD_TZ_H
#define SD_TZ_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

#define TZ_FILE_MAX 65536		/* bytes of a TZif file read at most */

struct tz;

/* tz_path: the file of the zone named: a relative path of plain characters
 * (A-Z a-z 0-9 / _ + -, no "..") under $TZDIR or /usr/share/zoneinfo.
 * [out] path.  0, or -1 for a name that cannot be a zone's. */
int tz_path(const char *name, char *path, size_t size);

/* tz_load: the zone named (an IANA name, "Europe/Berlin", under $TZDIR or
 * /usr/share/zoneinfo).  SD_INVALID for a name that is no zone, or a file
 * that is no TZif the reader takes.  [out] *out (tz_free). */
enum sd_result tz_load(const char *name, struct tz **out);
void tz_free(struct tz *z);

/* tz_offset: the zone's offset from UTC at t (seconds since the epoch),
 * in seconds east. */
long tz_offset(const struct tz *z, int64_t t);

/*
 * tz_local: the instant of local time local (seconds, as if it were UTC).
 * A local time the clocks pass twice is its first instant; one they skip
 * is the instant they jump (02:30 on a spring-forward night at 02:00 is
 * the instant it becomes 03:00).  So the instants of rising local times
 * never fall, and each is one instant.
 */
int64_t tz_local(const struct tz *z, int64_t local);

/* tz_days_from_civil: days since 1970-01-01 of y-m-d (proleptic
 * Gregorian); tz_civil: the reverse.  [out] *y, *m (1-12), *d (1-31). */
int64_t tz_days_from_civil(int64_t y, int64_t m, int64_t d);
void tz_civil(int64_t days, int64_t *y, int *m, int *d);

#endif
