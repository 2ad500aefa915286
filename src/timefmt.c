/*
 * timefmt.c: the times a person gives and reads (timefmt.h).
 */
#define _GNU_SOURCE
#include "timefmt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tz.h"

static char zone_name[TIMEFMT_ZONE_MAX + 1];

/* zone_file_ok: name is a zone of the tz database: a relative path of
 * plain characters to a TZif file */
static int zone_file_ok(const char *name)
{
	char path[512], magic[4];
	FILE *f;
	int ok;

	if (tz_path(name, path, sizeof path) != 0 || !(f = fopen(path, "rb")))
		return 0;
	ok = fread(magic, 1, 4, f) == 4 && memcmp(magic, "TZif", 4) == 0;
	fclose(f);
	return ok;
}

/* system_zone: the name the system gives its zone: $TZ when it names one,
 * /etc/timezone, the link /etc/localtime; "UTC" when none does */
static void system_zone(char *out, size_t size)
{
	const char *tz = getenv("TZ"), *p;
	char buf[512];
	ssize_t n;
	FILE *f;

	if (tz && *tz == ':')
		tz++;
	if (tz && zone_file_ok(tz)) {
		snprintf(out, size, "%s", tz);
		return;
	}
	if ((f = fopen("/etc/timezone", "r"))) {
		if (fgets(buf, sizeof buf, f)) {
			buf[strcspn(buf, "\n")] = '\0';
			if (zone_file_ok(buf)) {
				fclose(f);
				snprintf(out, size, "%.*s", TIMEFMT_ZONE_MAX, buf);
				return;
			}
		}
		fclose(f);
	}
	if ((n = readlink("/etc/localtime", buf, sizeof buf - 1)) > 0) {
		buf[n] = '\0';
		if ((p = strstr(buf, "zoneinfo/")) && zone_file_ok(p + 9)) {
			snprintf(out, size, "%.*s", TIMEFMT_ZONE_MAX, p + 9);
			return;
		}
	}
	snprintf(out, size, "UTC");
}

enum sd_result timefmt_zone_set(const char *name)
{
	if (!name || !*name) {
		system_zone(zone_name, sizeof zone_name);
		tzset();
		return SD_OK;
	}
	if (!zone_file_ok(name))
		return err_set(SD_INVALID, "timezone: '%.64s' is not a zone of the tz database "
			       "(a name like Europe/Berlin, as in /usr/share/zoneinfo)", name);
	snprintf(zone_name, sizeof zone_name, "%s", name);
	if (setenv("TZ", name, 1) != 0)
		return err_set(SD_NOMEM, "out of memory");
	tzset();
	return SD_OK;
}

const char *timefmt_zone_name(void)
{
	if (!zone_name[0])
		system_zone(zone_name, sizeof zone_name);
	return zone_name;
}

long timefmt_offset(int64_t ms, char *abbr, size_t size)
{
	time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
	struct tm tm;

	if (!localtime_r(&t, &tm)) {
		if (abbr)
			snprintf(abbr, size, "UTC");
		return 0;
	}
	if (abbr)
		snprintf(abbr, size, "%s", tm.tm_zone ? tm.tm_zone : "");
	return tm.tm_gmtoff;
}

void timefmt_format(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
	struct tm tm;

	if (!localtime_r(&t, &tm))
		gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%d %H:%M %Z", &tm);
}

/* iso_offset: "+01:00" */
static void iso_offset(long off, char *buf, size_t size)
{
	int a = (int)((off < 0 ? -off : off) % 86400);

	snprintf(buf, size, "%c%02d:%02d", off < 0 ? '-' : '+', a / 3600, a / 60 % 60);
}

/* local_ms: the instants whose local time in the venue's zone is local (ms
 * as if it were UTC): the offsets a day either side are the ones that can
 * apply.  [out] at[0..n), offs[0..n); n is 0 (the clocks skip it), 1, or 2
 * (the clocks pass it twice), and offs[] the two offsets around it. */
static int local_ms(int64_t local, int64_t at[2], long offs[2])
{
	long o[2] = { timefmt_offset(local - 86400000LL, NULL, 0),
		      timefmt_offset(local + 86400000LL, NULL, 0) };
	int i, n = 0;

	for (i = 0; i < 2; i++) {
		int64_t t = local - (int64_t)o[i] * 1000;

		if (i == 1 && o[1] == o[0])
			break;
		if (timefmt_offset(t, NULL, 0) == o[i])
			at[n++] = t;
	}
	offs[0] = o[0];
	offs[1] = o[1];
	return n;
}

/* both readings of a local time the clocks skip (n == 0) or pass twice */
static enum sd_result local_refused(const char *s, int64_t local, int n, const int64_t at[2],
				    const long offs[2])
{
	char when[TIMEFMT_TEXT_MAX], a[TIMEFMT_TEXT_MAX], b[TIMEFMT_TEXT_MAX], oa[12], ob[12];

	timefmt_format(n ? at[0] : local - (int64_t)offs[0] * 1000, a, sizeof a);
	timefmt_format(n ? at[1] : local - (int64_t)offs[1] * 1000, b, sizeof b);
	iso_offset(offs[0], oa, sizeof oa);
	iso_offset(offs[1], ob, sizeof ob);
	snprintf(when, sizeof when, "%.10s %.5s", s, s + 11);
	if (n == 0)
		return err_set(SD_INVALID, "%s does not happen in %s (the clocks skip it): it "
			       "could mean %s (%.10sT%.5s%s) or %s (%.10sT%.5s%s); give the time "
			       "with its offset", when, timefmt_zone_name(), a, s, s + 11, oa, b, s,
			       s + 11, ob);
	return err_set(SD_INVALID, "%s happens twice in %s (the clocks go back): it could mean "
		       "%s (%.10sT%.5s%s) or %s (%.10sT%.5s%s); give the time with its offset",
		       when, timefmt_zone_name(), a, s, s + 11, oa, b, s, s + 11, ob);
}

enum sd_result timefmt_parse(const char *s, int64_t *ms)
{
	int y, mo, d, h, mi, sec = 0, n = 0, zh = 0, zm = 0, sign = 0, dim, zoned = 0, k;
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int64_t local, at[2];
	long offs[2];
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
		zoned = 1;
	} else if (*p == '+' || *p == '-') {
		sign = *p == '+' ? 1 : -1;
		if (sscanf(p + 1, "%2d:%2d%n", &zh, &zm, &n) != 2 || n != 5 || zh > 14 || zm > 59)
			goto bad;
		p += 6;
		zoned = 1;
	}
	if (*p)
		goto bad;
	if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || h > 23 || mi > 59 || sec > 59 || d < 1)
		goto bad;
	dim = mdays[mo - 1] + (mo == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0));
	if (d > dim)
		goto bad;
	local = ((tz_days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + (int64_t)sec * 1000;
	if (zoned) {
		*ms = local - (int64_t)sign * (zh * 60 + zm) * 60000;
		return SD_OK;
	}
	if ((k = local_ms(local, at, offs)) != 1)
		return local_refused(s, local, k, at, offs);
	*ms = at[0];
	return SD_OK;
bad:
	return err_set(SD_INVALID, "'%.40s' is not a date and time like 2026-12-31 20:00 "
		       "(the venue's time) or 2026-12-31T20:00+01:00", s ? s : "");
}

int timefmt_names(int64_t now_ms, struct timefmt_name *out, int max)
{
	const int64_t step = 3 * 3600000LL;
	int64_t t;
	char abbr[16];
	long off;
	int i, n = 0;

	for (t = now_ms - 365 * 86400000LL; t <= now_ms + 730 * 86400000LL; t += step) {
		off = timefmt_offset(t, abbr, sizeof abbr);
		for (i = 0; i < n && out[i].offset != off; i++)
			;
		if (i < n || n >= max)
			continue;
		out[n].offset = off;
		snprintf(out[n].abbr, sizeof out[n].abbr, "%s", abbr);
		n++;
	}
	return n;
}
