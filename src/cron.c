/*
 * cron.c: cron expressions (cron.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "cron.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct field {
	const char *name;
	int lo, hi;
	const char *const *names;	/* names for lo, lo+1, ... (NULL: none) */
};

static const char *const MONTHS[] = { "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug",
				      "sep", "oct", "nov", "dec", NULL };
static const char *const DAYS[] = { "sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL };

static const struct field FIELDS[5] = {
	{ "minute", 0, 59, NULL }, { "hour", 0, 23, NULL }, { "day of month", 1, 31, NULL },
	{ "month", 1, 12, MONTHS }, { "day of week", 0, 7, DAYS },
};

static const struct {
	const char *at, *fields;
} MACROS[] = {
	{ "@yearly", "0 0 1 1 *" }, { "@annually", "0 0 1 1 *" }, { "@monthly", "0 0 1 * *" },
	{ "@weekly", "0 0 * * 0" }, { "@daily", "0 0 * * *" }, { "@midnight", "0 0 * * *" },
	{ "@hourly", "0 * * * *" },
};

/* a number or a name of f at *p; -1 when none */
static int value(const struct field *f, const char **p)
{
	char *e;
	long v;
	int i;

	if (**p >= '0' && **p <= '9') {
		v = strtol(*p, &e, 10);
		*p = e;
		return v >= f->lo && v <= f->hi ? (int)v : -1;
	}
	for (i = 0; f->names && f->names[i]; i++)
		if (strncasecmp(*p, f->names[i], 3) == 0) {
			*p += 3;
			return f->lo + i;
		}
	return -1;
}

/* one item of a list: *, a, a-b, each with /step */
static int item(const struct field *f, const char *p, uint64_t *bits)
{
	int a = f->lo, b = f->hi, step = 1, v;
	char *e;

	if (*p == '*') {
		p++;
	} else {
		if ((a = value(f, &p)) < 0)
			return -1;
		b = a;
		if (*p == '-') {
			p++;
			if ((b = value(f, &p)) < 0 || b < a)
				return -1;
		} else if (*p == '/') {
			b = f->hi;
		}
	}
	if (*p == '/') {
		if (p[1] < '0' || p[1] > '9')
			return -1;
		step = (int)strtol(p + 1, &e, 10);
		p = e;
		if (step < 1 || step > f->hi)
			return -1;
	}
	if (*p)
		return -1;
	for (v = a; v <= b; v += step)
		*bits |= 1ULL << v;
	return 0;
}

/* one field: items separated by commas */
static int field(const struct field *f, char *text, uint64_t *bits)
{
	char *save = NULL, *it;

	*bits = 0;
	if (!*text || text[0] == ',' || text[strlen(text) - 1] == ',' || strstr(text, ",,"))
		return -1;
	for (it = strtok_r(text, ",", &save); it; it = strtok_r(NULL, ",", &save))
		if (item(f, it, bits) != 0)
			return -1;
	return 0;
}

const char *cron_macro(const char *text)
{
	size_t i;

	for (i = 0; text && i < sizeof MACROS / sizeof MACROS[0]; i++)
		if (strcasecmp(text, MACROS[i].at) == 0)
			return MACROS[i].fields;
	return NULL;
}

enum sd_result cron_parse(const char *text, struct cron *c)
{
	char buf[CRON_TEXT_MAX + 1], *f[7], *save = NULL;
	uint64_t bits[5];
	size_t i, n = 0;

	memset(c, 0, sizeof *c);
	if (!text || strlen(text) > CRON_TEXT_MAX)
		return err_set(SD_INVALID, "a cron expression is at most %d bytes", CRON_TEXT_MAX);
	snprintf(buf, sizeof buf, "%s", cron_macro(text) ? cron_macro(text) : text);
	for (f[n] = strtok_r(buf, " ", &save); f[n] && n < 6; f[n] = strtok_r(NULL, " ", &save))
		n++;	/* a sixth field is read (n 6) only to refuse it */
	if (n != 5)
		return err_set(SD_INVALID, "'%.64s' is not a cron expression: it takes five fields, "
			       "minute hour day-of-month month day-of-week, like \"0 9 * * MON\"",
			       text);
	c->dom_star = f[2][0] == '*';
	c->dow_star = f[4][0] == '*';
	for (i = 0; i < 5; i++)
		if (field(&FIELDS[i], f[i], &bits[i]) != 0)
			return err_set(SD_INVALID, "cron expression '%.64s': its %s field is not "
				       "*, a number from %d to %d%s, a range a-b, a list a,b or a "
				       "step */n", text, FIELDS[i].name, FIELDS[i].lo, FIELDS[i].hi,
				       FIELDS[i].names ? " or a name" : "");
	c->minute = bits[0];
	c->hour = (uint32_t)bits[1];
	c->dom = (uint32_t)bits[2];
	c->month = (uint32_t)bits[3];
	c->dow = (uint8_t)((bits[4] | bits[4] >> 7) & 0x7f);	/* 7 is Sunday too */
	return SD_OK;
}

static int day_matches(const struct cron *c, int64_t days)
{
	int64_t y;
	int m, d, dow = (int)(((days + 4) % 7 + 7) % 7);	/* 1970-01-01 was a Thursday */
	int by_dom, by_dow;

	tz_civil(days, &y, &m, &d);
	if (!(c->month >> m & 1))
		return 0;
	by_dom = (int)(c->dom >> d & 1);
	by_dow = c->dow >> dow & 1;
	if (c->dom_star || c->dow_star)
		return by_dom && by_dow;
	return by_dom || by_dow;
}

int64_t cron_next(const struct cron *c, const struct tz *z, int64_t t)
{
	int64_t day = (t + tz_offset(z, t)) / 86400 - 1, last = day + CRON_SEARCH_DAYS, at;
	int h, m;

	if (t < 0)
		return -1;
	for (; day <= last; day++) {
		if (!day_matches(c, day))
			continue;
		for (h = 0; h < 24; h++) {
			if (!(c->hour >> h & 1))
				continue;
			for (m = 0; m < 60; m++)
				if (c->minute >> m & 1 &&
				    (at = tz_local(z, day * 86400 + h * 3600 + m * 60)) > t)
					return at;
		}
	}
	return -1;
}
