/*
 * timefmt.h: the times a person gives (an event's start) and reads (a
 * ticket, an email, the command line), in the venue's zone.  Machine
 * formats (the API, --json, the log) are milliseconds or RFC 3339 in UTC
 * and are not made here.
 *
 * The venue's zone is an IANA name from the system's tz database
 * (/usr/share/zoneinfo), set once before any thread starts
 * (timefmt_zone_set); unset, it is the system's zone.  A person reads
 * "2026-12-04 20:00 CET": ISO-like, 24 h, with the zone's abbreviation
 * (or its offset, "+0545", where the tz database has no abbreviation).
 */
#ifndef SD_TIMEFMT_H
#define SD_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

#define TIMEFMT_ZONE_MAX 64		/* bytes of a zone's name */
#define TIMEFMT_TEXT_MAX 40		/* a formatted time, with its NUL */

/* timefmt_zone_set: the venue's zone: name ("Europe/Berlin"), or NULL or ""
 * for the system's.  SD_INVALID when the tz database has no such zone.
 * Sets TZ for the whole process: call it before any thread starts. */
enum sd_result timefmt_zone_set(const char *name);

/* timefmt_zone_name: the venue zone's IANA name ("Europe/Berlin"; the
 * system's zone as /etc/timezone or /etc/localtime names it; "UTC" when
 * the system names none). */
const char *timefmt_zone_name(void);

/* timefmt_parse: "YYYY-MM-DD[T| ]HH:MM[:SS]" with a zone ("Z", "+HH:MM")
 * or without one: then it is the venue's local time.  A local time the
 * clocks skip or pass twice (a daylight-saving change) is refused with a
 * message naming both readings.  [out] *ms. */
enum sd_result timefmt_parse(const char *s, int64_t *ms);

/* timefmt_format: "2026-12-04 20:00 CET", in the venue's zone; size at
 * least TIMEFMT_TEXT_MAX. */
void timefmt_format(int64_t ms, char *buf, size_t size);

/* timefmt_offset: the venue zone's offset from UTC at ms, in seconds east;
 * [out] abbr (may be NULL; size at least 16): its abbreviation. */
long timefmt_offset(int64_t ms, char *abbr, size_t size);

/* One of the zone's offsets and its abbreviation. */
struct timefmt_name {
	long offset;			/* seconds east of UTC */
	char abbr[16];
};

#define TIMEFMT_NAMES_MAX 8

/* timefmt_names: the zone's offsets in use from a year before now to two
 * years after, each with its abbreviation, at most max.  [out] out[0..n). */
int timefmt_names(int64_t now_ms, struct timefmt_name *out, int max);

#endif
