/*
 * test_timefmt.c: the venue's clock (timefmt.h): times read and given in
 * the venue's zone, across daylight-saving changes both ways, in a zone
 * with a half-hour offset and one whose change is half an hour off UTC's
 * hours; a local time the clocks skip or pass twice is refused naming both
 * readings; a zone the tz database lacks is refused.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "result.h"
#include "timefmt.h"

#define H 3600000LL
#define MIN 60000LL

/* ms of a UTC time written with its zone, as the API gives it */
static int64_t utc(const char *s)
{
	int64_t ms = 0;

	if (timefmt_parse(s, &ms) != SD_OK)
		fail_msg("%s: %s", s, err_msg());
	return ms;
}

/* parse s as the venue's time: SD_OK and the instant */
static int64_t local(const char *s)
{
	return utc(s);
}

static void assert_shows(int64_t ms, const char *want)
{
	char buf[TIMEFMT_TEXT_MAX];

	timefmt_format(ms, buf, sizeof buf);
	if (strcmp(buf, want) != 0)
		fail_msg("want '%s', got '%s'", want, buf);
}

/* s is refused, and the message holds each of the words */
static void assert_refused(const char *s, const char *const *words)
{
	int64_t ms = 0;
	const char *m;

	if (timefmt_parse(s, &ms) == SD_OK)
		fail_msg("%s: accepted", s);
	m = err_msg();
	for (; *words; words++)
		if (!strstr(m, *words))
			fail_msg("%s: '%s' not in: %s", s, *words, m);
}

static void zone(const char *name)
{
	if (timefmt_zone_set(name) != SD_OK)
		fail_msg("%s: %s", name, err_msg());
	assert_string_equal(timefmt_zone_name(), name);
}

static void test_berlin_winter_and_summer(void **state)
{
	(void)state;
	zone("Europe/Berlin");
	assert_int_equal(local("2026-12-31 20:00"), utc("2026-12-31T19:00Z"));
	assert_int_equal(local("2026-12-31T20:00"), utc("2026-12-31T19:00Z"));
	assert_int_equal(local("2027-07-04 20:00"), utc("2027-07-04T18:00Z"));
	assert_shows(utc("2026-12-31T19:00Z"), "2026-12-31 20:00 CET");
	assert_shows(utc("2027-07-04T18:00Z"), "2027-07-04 20:00 CEST");
	/* a time with its zone is that instant, whatever the venue's */
	assert_int_equal(local("2026-12-31T20:00+01:00"), utc("2026-12-31T19:00Z"));
	assert_int_equal(local("2026-12-31T20:00Z"), utc("2026-12-31T20:00:00Z"));
}

static void test_berlin_spring_forward(void **state)
{
	static const char *const both[] = { "2026-03-29 02:30", "Europe/Berlin", "skip",
					    "2026-03-29 03:30 CEST", "2026-03-29T02:30+01:00",
					    "2026-03-29 01:30 CET", "2026-03-29T02:30+02:00", NULL };

	(void)state;
	zone("Europe/Berlin");
	/* 02:00 CET becomes 03:00 CEST at 01:00 UTC */
	assert_int_equal(local("2026-03-29 01:59"), utc("2026-03-29T00:59Z"));
	assert_int_equal(local("2026-03-29 03:00"), utc("2026-03-29T01:00Z"));
	assert_shows(utc("2026-03-29T00:59Z"), "2026-03-29 01:59 CET");
	assert_shows(utc("2026-03-29T01:00Z"), "2026-03-29 03:00 CEST");
	assert_refused("2026-03-29 02:30", both);
	assert_refused("2026-03-29 02:00", (const char *const[]){ "skip", NULL });
	/* either reading given with its offset is taken */
	assert_int_equal(local("2026-03-29T02:30+01:00"), utc("2026-03-29T01:30Z"));
}

static void test_berlin_fall_back(void **state)
{
	static const char *const both[] = { "2026-10-25 02:30", "twice", "2026-10-25 02:30 CEST",
					    "2026-10-25T02:30+02:00", "2026-10-25 02:30 CET",
					    "2026-10-25T02:30+01:00", NULL };

	(void)state;
	zone("Europe/Berlin");
	/* 03:00 CEST becomes 02:00 CET at 01:00 UTC: 02:00 to 02:59 happen twice */
	assert_int_equal(local("2026-10-25 01:59"), utc("2026-10-24T23:59Z"));
	assert_int_equal(local("2026-10-25 03:00"), utc("2026-10-25T02:00Z"));
	assert_refused("2026-10-25 02:30", both);
	assert_refused("2026-10-25 02:00", (const char *const[]){ "twice", NULL });
	assert_shows(utc("2026-10-25T00:30Z"), "2026-10-25 02:30 CEST");
	assert_shows(utc("2026-10-25T01:30Z"), "2026-10-25 02:30 CET");
}

static void test_half_hour_zones(void **state)
{
	(void)state;
	/* India: +05:30 all year */
	zone("Asia/Kolkata");
	assert_int_equal(local("2026-12-31 20:00"), utc("2026-12-31T14:30Z"));
	assert_shows(utc("2026-12-31T14:30Z"), "2026-12-31 20:00 IST");
	/* Adelaide: +09:30, and +10:30 in the southern summer; its clocks
	 * skip 02:00 to 03:00 on 2026-10-04 and pass 02:00 to 03:00 twice on
	 * 2027-04-04 */
	zone("Australia/Adelaide");
	assert_int_equal(local("2026-07-01 20:00"), utc("2026-07-01T10:30Z"));
	assert_int_equal(local("2026-12-31 20:00"), utc("2026-12-31T09:30Z"));
	assert_shows(utc("2026-07-01T10:30Z"), "2026-07-01 20:00 ACST");
	assert_shows(utc("2026-12-31T09:30Z"), "2026-12-31 20:00 ACDT");
	assert_refused("2026-10-04 02:30", (const char *const[]){ "skip",
		       "2026-10-04T02:30+09:30", "2026-10-04T02:30+10:30", NULL });
	assert_refused("2027-04-04 02:30", (const char *const[]){ "twice",
		       "2027-04-04 02:30 ACDT", "2027-04-04 02:30 ACST", NULL });
	assert_int_equal(local("2026-10-04 03:00"), utc("2026-10-03T16:30Z"));
	/* Kathmandu: +05:45, which the tz database names by its offset */
	zone("Asia/Kathmandu");
	assert_shows(utc("2026-12-31T14:15Z"), "2026-12-31 20:00 +0545");
}

static void test_zone_names(void **state)
{
	struct timefmt_name n[TIMEFMT_NAMES_MAX];
	int k, i, cet = 0, cest = 0;

	(void)state;
	zone("Europe/Berlin");
	k = timefmt_names(utc("2026-12-03T12:00Z"), n, TIMEFMT_NAMES_MAX);
	assert_int_equal(k, 2);
	for (i = 0; i < k; i++) {
		cet += n[i].offset == 3600 && strcmp(n[i].abbr, "CET") == 0;
		cest += n[i].offset == 7200 && strcmp(n[i].abbr, "CEST") == 0;
	}
	assert_int_equal(cet + cest, 2);
	zone("UTC");
	assert_int_equal(timefmt_names(utc("2026-12-03T12:00Z"), n, TIMEFMT_NAMES_MAX), 1);
	assert_int_equal(n[0].offset, 0);
	assert_shows(utc("2026-12-31T20:00Z"), "2026-12-31 20:00 UTC");
}

static void test_bad_zones_and_times(void **state)
{
	static const char *const bad_zones[] = { "Mars/Olympus", "../../etc/passwd", "/etc/localtime",
						 "Europe/Berlin ", "Europe\\Berlin", NULL };
	static const char *const bad_times[] = { "tomorrow", "2026-02-30 10:00", "2026-12-31",
						 "2026-12-31 24:00", "2026-12-31 20:00 CET",
						 "2026-12-31T20:00+15:00", "", NULL };
	int64_t ms;
	int i;

	(void)state;
	zone("Europe/Berlin");
	for (i = 0; bad_zones[i]; i++) {
		assert_int_equal(timefmt_zone_set(bad_zones[i]), SD_INVALID);
		assert_non_null(strstr(err_msg(), "tz database"));
		/* a refused name leaves the zone as it was */
		assert_string_equal(timefmt_zone_name(), "Europe/Berlin");
	}
	for (i = 0; bad_times[i]; i++)
		if (timefmt_parse(bad_times[i], &ms) == SD_OK)
			fail_msg("'%s' accepted", bad_times[i]);
	assert_int_equal(timefmt_parse(NULL, &ms), SD_INVALID);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_berlin_winter_and_summer),
		cmocka_unit_test(test_berlin_spring_forward),
		cmocka_unit_test(test_berlin_fall_back),
		cmocka_unit_test(test_half_hour_zones),
		cmocka_unit_test(test_zone_names),
		cmocka_unit_test(test_bad_zones_and_times),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
