/*
 * test_cron.c: the zone reader (tz.h) against the C library's own reading
 * of the same zones, a local time the clocks skip or pass twice as one
 * instant, cron expressions parsed and refused, and cron_next against a
 * minute-by-minute walk and across daylight-saving nights.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cron.h"
#include "tz.h"

static const char *const ZONES[] = {
	"Europe/Berlin", "America/New_York", "Australia/Sydney", "Australia/Lord_Howe",
	"Asia/Kathmandu", "Pacific/Chatham", "America/Sao_Paulo", "Africa/Casablanca",
	"Asia/Tehran", "America/St_Johns", "UTC", NULL,
};

static struct tz *load(const char *name)
{
	struct tz *z = NULL;

	assert_int_equal(tz_load(name, &z), SD_OK);
	assert_non_null(z);
	return z;
}

/* the seconds of a UTC date and time */
static int64_t utc(int y, int mo, int d, int h, int mi)
{
	return ((tz_days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60;
}

/* every zone, from 1970 to 2100 every 20011 s (so at every hour of the
 * day over the years): the offset the C library gives for the same zone */
static void test_offsets_match_the_c_library(void **state)
{
	int64_t t, checked = 0;
	int i;

	(void)state;
	for (i = 0; ZONES[i]; i++) {
		struct tz *z = load(ZONES[i]);

		setenv("TZ", ZONES[i], 1);
		tzset();
		for (t = 0; t < utc(2100, 1, 1, 0, 0); t += 20011) {
			time_t tt = (time_t)t;
			struct tm tm;

			assert_non_null(localtime_r(&tt, &tm));
			if (tm.tm_gmtoff != tz_offset(z, t))
				fail_msg("%s at %lld: the C library says %ld, tz_offset %ld", ZONES[i],
					 (long long)t, tm.tm_gmtoff, tz_offset(z, t));
			checked++;
		}
		tz_free(z);
	}
	print_message("    %lld offsets in %d zones agree\n", (long long)checked, i);
	unsetenv("TZ");
	tzset();
}

static void test_zone_names_refused(void **state)
{
	struct tz *z = NULL;

	(void)state;
	assert_int_equal(tz_load("Mars/Olympus", &z), SD_INVALID);
	assert_int_equal(tz_load("../../etc/passwd", &z), SD_INVALID);
	assert_int_equal(tz_load("/etc/localtime", &z), SD_INVALID);
	assert_int_equal(tz_load("", &z), SD_INVALID);
	assert_int_equal(tz_load("Europe", &z), SD_INVALID);	/* a directory */
	assert_null(z);
}

/* 02:30 in Berlin: skipped on 2027-03-28 (02:00 CET becomes 03:00 CEST at
 * 01:00 UTC), passed twice on 2027-10-31 (03:00 CEST becomes 02:00 CET at
 * 01:00 UTC) */
/* Berlin's file cut short at every length and with bytes changed at
 * random, under a TZDIR of its own: each refused or read, never read out
 * of bounds (the sanitizer's suite runs this too) */
static void test_damaged_files(void **state)
{
	char dir[] = "/tmp/sd-tz-XXXXXX", path[256];
	unsigned char buf[TZ_FILE_MAX], bad[TZ_FILE_MAX];
	unsigned seed = 1206;
	size_t len, i, k;
	int taken = 0, refused = 0;
	FILE *f;

	(void)state;
	assert_non_null(f = fopen("/usr/share/zoneinfo/Europe/Berlin", "rb"));
	len = fread(buf, 1, sizeof buf, f);
	fclose(f);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/Zone", dir);
	setenv("TZDIR", dir, 1);
	for (i = 0; i < len + 600; i++) {
		size_t n = i < len ? i : len;
		struct tz *z = NULL;

		memcpy(bad, buf, len);
		for (k = 0; i >= len && k < 1 + i % 4; k++)
			bad[rand_r(&seed) % len] = (unsigned char)rand_r(&seed);
		assert_non_null(f = fopen(path, "wb"));
		assert_int_equal(fwrite(bad, 1, n, f), n);
		fclose(f);
		if (tz_load("Zone", &z) != SD_OK) {
			refused++;
			continue;
		}
		taken++;
		for (k = 0; k < 50; k++)
			(void)tz_local(z, (int64_t)k * 86400 * 400 - 86400LL * 365 * 30);
		tz_free(z);
	}
	unsetenv("TZDIR");
	unlink(path);
	rmdir(dir);
	print_message("    %d damaged files refused, %d read\n", refused, taken);
	assert_true(refused > (int)len - 10);	/* every file cut short */
}

static void test_skipped_and_repeated_local_times(void **state)
{
	struct tz *z = load("Europe/Berlin");
	int64_t spring = tz_days_from_civil(2027, 3, 28) * 86400;
	int64_t autumn = tz_days_from_civil(2027, 10, 31) * 86400;

	(void)state;
	assert_int_equal(tz_local(z, spring + 2 * 3600 + 1800), utc(2027, 3, 28, 1, 0));
	assert_int_equal(tz_local(z, spring + 2 * 3600), utc(2027, 3, 28, 1, 0));
	assert_int_equal(tz_local(z, spring + 3 * 3600), utc(2027, 3, 28, 1, 0));
	assert_int_equal(tz_local(z, spring + 3600 + 3599), utc(2027, 3, 28, 0, 59) + 59);
	assert_int_equal(tz_local(z, autumn + 2 * 3600 + 1800), utc(2027, 10, 31, 0, 30));
	assert_int_equal(tz_local(z, autumn + 3 * 3600), utc(2027, 10, 31, 2, 0));
	assert_int_equal(tz_local(z, autumn + 12 * 3600), utc(2027, 10, 31, 11, 0));
	tz_free(z);
}

static void test_expressions(void **state)
{
	static const char *const bad[] = {
		"", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *",
		"* * 32 * *", "* * * 13 *", "* * * * 8", "*/0 * * * *", "5-1 * * * *",
		"1,,2 * * * *", "1, * * * *", "a * * * *", "* * * JANUARY *", "*\t* * * *",
		"@often", "-1 * * * *", "* * * * MON-SUN", "99999999999999999999 * * * *", NULL,
	};
	struct cron c;
	int i;

	(void)state;
	for (i = 0; bad[i]; i++)
		if (cron_parse(bad[i], &c) != SD_INVALID)
			fail_msg("'%s' was taken", bad[i]);
	assert_int_equal(cron_parse("*/15 9-17 * * MON-FRI", &c), SD_OK);
	assert_true(c.minute == (1ULL | 1ULL << 15 | 1ULL << 30 | 1ULL << 45));
	assert_int_equal(c.hour, 0x3fe00);
	assert_int_equal(c.dow, 0x3e);
	assert_true(c.dom_star && !c.dow_star);
	assert_int_equal(cron_parse("5/20 0 1,15 jan,Jul 7", &c), SD_OK);
	assert_true(c.minute == (1ULL << 5 | 1ULL << 25 | 1ULL << 45));
	assert_int_equal(c.dom, 1u << 1 | 1u << 15);
	assert_int_equal(c.month, 1u << 1 | 1u << 7);
	assert_int_equal(c.dow, 1);	/* 7 is Sunday */
	assert_int_equal(cron_parse("@weekly", &c), SD_OK);
	assert_int_equal(c.dow, 1);
	assert_int_equal(cron_parse("@hourly", &c), SD_OK);
	assert_true(c.minute == 1 && c.hour == 0xffffff);
}

/* the first minute after t whose time in z (no daylight saving: each
 * local minute one instant) c names, walked minute by minute */
static int64_t walk(const struct cron *c, const struct tz *z, int64_t t)
{
	int64_t u = (t / 60 + 1) * 60, y, days, local;
	int m, d, dow, dm, wm;

	for (; u < t + 400LL * 86400; u += 60) {
		local = u + tz_offset(z, u);
		days = local / 86400;
		tz_civil(days, &y, &m, &d);
		dow = (int)((days + 4) % 7);
		dm = (int)(c->dom >> d & 1);
		wm = c->dow >> dow & 1;
		if (c->minute >> (local / 60 % 60) & 1 && c->hour >> (local / 3600 % 24) & 1 &&
		    c->month >> m & 1 && (c->dom_star || c->dow_star ? dm && wm : dm || wm))
			return u;
	}
	return -1;
}

static void test_next_against_a_walk(void **state)
{
	static const char *const exprs[] = {
		"* * * * *", "*/7 * * * *", "0 9 * * MON", "30 2 * * *", "0 0 1 * *",
		"15 10 13 * FRI", "0 12 * 2 *", "45 23 31 * *", "0 0 1,15 * 1", "59 23 * 12 SUN",
		"*/20 8-18 * * 1-5", NULL,
	};
	static const char *const zones[] = { "UTC", "Asia/Kolkata", "Asia/Kathmandu", NULL };
	unsigned seed = 20261206;
	int i, j, k, n = 0;

	(void)state;
	for (j = 0; zones[j]; j++) {
		struct tz *z = load(zones[j]);

		for (i = 0; exprs[i]; i++) {
			struct cron c;

			assert_int_equal(cron_parse(exprs[i], &c), SD_OK);
			for (k = 0; k < 6; k++, n++) {
				int64_t t = utc(2026, 1, 1, 0, 0) + rand_r(&seed) % (4 * 365 * 86400);
				int64_t a = cron_next(&c, z, t), b = walk(&c, z, t);

				if (a != b)
					fail_msg("'%s' in %s after %lld: %lld, the walk %lld", exprs[i],
						 zones[j], (long long)t, (long long)a, (long long)b);
			}
		}
		tz_free(z);
	}
	print_message("    %d next times agree with the walk\n", n);
}

/* the times of c in z from t, n of them, each strictly after the last */
static void times(const char *expr, const char *zone, int64_t t, int64_t *out, int n)
{
	struct tz *z = load(zone);
	struct cron c;
	int i;

	assert_int_equal(cron_parse(expr, &c), SD_OK);
	for (i = 0; i < n; i++)
		t = out[i] = cron_next(&c, z, t);
	tz_free(z);
}

static void test_daylight_saving_nights(void **state)
{
	int64_t v[4];

	(void)state;
	/* Berlin, spring: the skipped 02:30 runs once, at the jump */
	times("30 2 * * *", "Europe/Berlin", utc(2027, 3, 27, 0, 0), v, 3);
	assert_int_equal(v[0], utc(2027, 3, 27, 1, 30));
	assert_int_equal(v[1], utc(2027, 3, 28, 1, 0));
	assert_int_equal(v[2], utc(2027, 3, 29, 0, 30));
	/* Berlin, autumn: the repeated 02:30 runs once, at its first pass */
	times("30 2 * * *", "Europe/Berlin", utc(2027, 10, 30, 0, 0), v, 3);
	assert_int_equal(v[0], utc(2027, 10, 30, 0, 30));
	assert_int_equal(v[1], utc(2027, 10, 31, 0, 30));
	assert_int_equal(v[2], utc(2027, 11, 1, 1, 30));
	/* every minute across the spring jump: 01:59 CET, then 03:00 CEST once */
	times("* * * * *", "Europe/Berlin", utc(2027, 3, 28, 0, 58), v, 3);
	assert_int_equal(v[0], utc(2027, 3, 28, 0, 59));
	assert_int_equal(v[1], utc(2027, 3, 28, 1, 0));
	assert_int_equal(v[2], utc(2027, 3, 28, 1, 1));
	/* New York, 2027-03-14 02:00 EST becomes 03:00 EDT at 07:00 UTC */
	times("0 2 * * *", "America/New_York", utc(2027, 3, 13, 12, 0), v, 2);
	assert_int_equal(v[0], utc(2027, 3, 14, 7, 0));
	assert_int_equal(v[1], utc(2027, 3, 15, 6, 0));
	/* Sydney, southern: 2027-10-03 02:00 AEST becomes 03:00 AEDT (16:00 UTC
	 * the day before); 2027-04-04 03:00 AEDT becomes 02:00 AEST */
	times("30 2 * * *", "Australia/Sydney", utc(2027, 10, 1, 12, 0), v, 2);
	assert_int_equal(v[0], utc(2027, 10, 1, 16, 30));
	assert_int_equal(v[1], utc(2027, 10, 2, 16, 0));
	times("30 2 * * *", "Australia/Sydney", utc(2027, 4, 2, 12, 0), v, 2);
	assert_int_equal(v[0], utc(2027, 4, 2, 15, 30));
	assert_int_equal(v[1], utc(2027, 4, 3, 15, 30));
	/* Mondays at 09:00 in Berlin: 08:00 UTC in winter, 07:00 in summer */
	times("0 9 * * MON", "Europe/Berlin", utc(2027, 3, 20, 0, 0), v, 2);
	assert_int_equal(v[0], utc(2027, 3, 22, 8, 0));
	assert_int_equal(v[1], utc(2027, 3, 29, 7, 0));
	/* a February 29th is found years ahead */
	times("0 0 29 2 *", "UTC", utc(2025, 3, 1, 0, 0), v, 2);
	assert_int_equal(v[0], utc(2028, 2, 29, 0, 0));
	assert_int_equal(v[1], utc(2032, 2, 29, 0, 0));
	times("0 0 30 2 *", "UTC", utc(2025, 3, 1, 0, 0), v, 1);
	assert_int_equal(v[0], -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_offsets_match_the_c_library),
		cmocka_unit_test(test_zone_names_refused),
		cmocka_unit_test(test_damaged_files),
		cmocka_unit_test(test_skipped_and_repeated_local_times),
		cmocka_unit_test(test_expressions),
		cmocka_unit_test(test_next_against_a_walk),
		cmocka_unit_test(test_daylight_saving_nights),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
