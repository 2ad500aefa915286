/*
 * timefmt.h: the times a person gives (an event's start) and reads (a
 * ticket, an email, the command line).  Machine formats (the API, --json,
 * the log) are milliseconds or RFC 3339 in UTC and are not made here.
 */
#ifndef SD_TIMEFMT_H
#define SD_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

/* timefmt_parse: ISO 8601 "YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM]" (no zone:
 * UTC) to ms.
 * timefmt_format: "YYYY-MM-DD HH:MM UTC". */
enum sd_result timefmt_parse(const char *s, int64_t *ms);
void timefmt_format(int64_t ms, char *buf, size_t size);

#endif
