/*
 * timefmt.c: the times a person gives and reads (timefmt.h).
 */
#define _GNU_SOURCE
#include "timefmt.h"

#include <stdio.h>
#include <time.h>

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	/* H. Hinnant's algorithm: days since 1970-01-01 in the proleptic Gregorian calendar */
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

enum sd_result timefmt_parse(const char *s, int64_t *ms)
{
	int y, mo, d, h, mi, sec = 0, n = 0, zh = 0, zm = 0, sign = 0, dim;
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	const char *p;

	if (!s || sscanf(s, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 || n != 10 ||
	    (s[10] != 'T' && s[10] != ' ') || sscanf(s + 11, "%2d:%2d%n", &h, &mi, &n) != 2 ||
	    n != 5)
		goto bad;
	p = s + 16;
	if (*p == ':') {
		if (sscanf(p + 1, "%2d%n", &sec, &n) != 1 || n != 2)
			goto bad;
		p += 3;
	}
	if (*p == 'Z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '+' ? 1 : -1;
		if (sscanf(p + 1, "%2d:%2d%n", &zh, &zm, &n) != 2 || n != 5 || zh > 14 || zm > 59)
			goto bad;
		p += 6;
	}
	if (*p)
		goto bad;
	if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || h > 23 || mi > 59 || sec > 59 || d < 1)
		goto bad;
	dim = mdays[mo - 1] + (mo == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0));
	if (d > dim)
		goto bad;
	*ms = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + (int64_t)sec * 1000 -
	      (int64_t)sign * (zh * 60 + zm) * 60000;
	return SD_OK;
bad:
	return err_set(SD_INVALID, "'%.40s' is not a date and time like 2026-12-31T20:00Z",
		       s ? s : "");
}

void timefmt_format(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M UTC", &tm);
}
