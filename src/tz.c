/*
 * tz.c: a zone of the tz database read on its own (tz.h).
 */
#define _POSIX_C_SOURCE 200809L
#include "tz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TZ_TYPES_MAX 256

/* one date of a POSIX TZ rule: Jn (1-365, no Feb 29), n (0-365), Mm.w.d */
struct tz_date {
	char kind;			/* 'J', 'N' or 'M' */
	int n, m, w, d;
	long time;			/* seconds after local midnight (may be < 0 or > 24 h) */
};

/* the footer's rule, for the times after the last transition */
struct tz_rule {
	int set;			/* a footer was read */
	int has_dst;
	long std_off, dst_off;		/* seconds east */
	struct tz_date start, end;	/* when DST starts, ends */
};

struct tz {
	int64_t *at;			/* transitions, rising */
	unsigned char *type;		/* the type each starts */
	int n;
	long off[TZ_TYPES_MAX];		/* each type's offset, seconds east */
	int ntypes;
	struct tz_rule rule;
};

int64_t tz_days_from_civil(int64_t y, int64_t m, int64_t d)
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

void tz_civil(int64_t days, int64_t *y, int *m, int *d)
{
	int64_t z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;

	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*m = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a >= 0 ? a / b : -((-a + b - 1) / b);
}

int tz_path(const char *name, char *path, size_t size)
{
	const char *dir = getenv("TZDIR");
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > 64 || name[0] == '/' || name[0] == '.' || strstr(name, "..") ||
	    strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/_+-") != n)
		return -1;
	snprintf(path, size, "%s/%s", dir && *dir ? dir : "/usr/share/zoneinfo", name);
	return 0;
}

/* ======================== the POSIX TZ rule ============================== */

/* a name: <...> or three or more letters */
static const char *rule_name(const char *p)
{
	const char *q;

	if (*p == '<') {
		q = strchr(p, '>');
		return q && q - p >= 4 ? q + 1 : NULL;
	}
	for (q = p; (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z'); q++)
		;
	return q - p >= 3 ? q : NULL;
}

/* [+-]hh[:mm[:ss]], hours up to 167 (RFC 8536's extension) */
static const char *rule_hms(const char *p, long *out)
{
	long sign = 1, v[3] = { 0, 0, 0 };
	int i;
	char *e;

	if (*p == '+' || *p == '-')
		sign = *p++ == '-' ? -1 : 1;
	for (i = 0; i < 3; i++) {
		if (*p < '0' || *p > '9')
			return NULL;
		v[i] = strtol(p, &e, 10);
		p = e;
		if (v[i] > (i ? 59 : 167) || *p != ':' || i == 2)
			break;
		p++;
	}
	*out = sign * (v[0] * 3600 + v[1] * 60 + v[2]);
	return p;
}

/* ,Mm.w.d[/time] or ,Jn[/time] or ,n[/time] */
static const char *rule_date(const char *p, struct tz_date *d)
{
	char *e;

	if (*p++ != ',')
		return NULL;
	memset(d, 0, sizeof *d);
	d->time = 7200;
	if (*p == 'M') {
		d->kind = 'M';
		if (sscanf(p + 1, "%d.%d.%d", &d->m, &d->w, &d->d) != 3 || d->m < 1 || d->m > 12 ||
		    d->w < 1 || d->w > 5 || d->d < 0 || d->d > 6)
			return NULL;
		p += strspn(p + 1, "0123456789.") + 1;
	} else {
		d->kind = *p == 'J' ? 'J' : 'N';
		p += *p == 'J';
		if (*p < '0' || *p > '9')
			return NULL;
		d->n = (int)strtol(p, &e, 10);
		p = e;
		if (d->n < (d->kind == 'J') || d->n > 365)
			return NULL;
	}
	if (*p == '/')
		p = rule_hms(p + 1, &d->time);
	return p;
}

static int rule_parse_dates(const char *p, struct tz_rule *r)
{
	if (!(p = rule_date(p, &r->start)) || !(p = rule_date(p, &r->end)))
		return -1;
	return *p ? -1 : 0;
}

/* parse: "STDoff[DST[off][,start[/time],end[/time]]]"; empty: no rule */
static int rule_parse(const char *p, struct tz_rule *r)
{
	long off;

	memset(r, 0, sizeof *r);
	if (!*p)
		return 0;
	if (!(p = rule_name(p)) || !(p = rule_hms(p, &off)))
		return -1;
	r->set = 1;
	r->std_off = r->dst_off = -off;
	if (!*p)
		return 0;
	if (!(p = rule_name(p)))
		return -1;
	r->has_dst = 1;
	r->dst_off = r->std_off + 3600;
	if (*p && *p != ',') {
		if (!(p = rule_hms(p, &off)))
			return -1;
		r->dst_off = -off;
	}
	if (!*p)		/* no dates: the POSIX default, the US rule */
		return rule_parse_dates(",M3.2.0,M11.1.0", r);
	return rule_parse_dates(p, r);
}

static int is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* the local midnight (seconds, as if UTC) of d in year y */
static int64_t date_day(const struct tz_date *d, int64_t y)
{
	static const int mdays[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int64_t jan1 = tz_days_from_civil(y, 1, 1), first, day;
	int dow1, len;

	if (d->kind == 'J')
		return (jan1 + d->n - 1 + (is_leap(y) && d->n >= 60)) * 86400;
	if (d->kind == 'N')
		return (jan1 + d->n) * 86400;
	first = tz_days_from_civil(y, d->m, 1);
	dow1 = (int)(((first + 4) % 7 + 7) % 7);	/* 1970-01-01 was a Thursday */
	len = mdays[d->m - 1] + (d->m == 2 && is_leap(y));
	day = 1 + (d->d - dow1 + 7) % 7 + (d->w - 1) * 7;
	while (day > len)
		day -= 7;
	return (first + day - 1) * 86400;
}

static long rule_offset(const struct tz_rule *r, int64_t t)
{
	int64_t y, start, end;
	int m, d, dst;

	if (!r->has_dst)
		return r->std_off;
	tz_civil(floor_div(t + r->std_off, 86400), &y, &m, &d);
	start = date_day(&r->start, y) + r->start.time - r->std_off;
	end = date_day(&r->end, y) + r->end.time - r->dst_off;
	dst = start < end ? (t >= start && t < end) : !(t >= end && t < start);
	return dst ? r->dst_off : r->std_off;
}

/* ======================== the TZif file ================================== */

static int64_t be(const unsigned char *p, int bytes)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	if (bytes == 4)
		return (int32_t)(uint32_t)v;
	return (int64_t)v;
}

/* the six counts of the header at p: isut, isstd, leap, time, type, char;
 * -1 when one is out of range */
static int counts(const unsigned char *p, int64_t c[6])
{
	int i;

	for (i = 0; i < 6; i++)
		if ((c[i] = be(p + 20 + 4 * i, 4)) < 0 || c[i] > TZ_FILE_MAX)
			return -1;
	return 0;
}

static int64_t block_size(const int64_t c[6], int tb)
{
	return c[3] * tb + c[3] + c[4] * 6 + c[5] + c[2] * (tb + 4) + c[1] + c[0];
}

/* read the data block at p (times tb bytes wide) into z */
static int block_read(struct tz *z, const unsigned char *p, const int64_t c[6], int tb)
{
	const unsigned char *types = p + c[3] * tb, *info = types + c[3];
	int i;

	if (c[2] != 0 || c[4] < 1 || c[4] > TZ_TYPES_MAX || c[3] < 0 || c[3] > 10000)
		return -1;	/* leap seconds ("right/" zones) are not read */
	z->n = (int)c[3];
	z->ntypes = (int)c[4];
	z->at = malloc(sizeof *z->at * (size_t)(z->n ? z->n : 1));
	z->type = malloc((size_t)(z->n ? z->n : 1));
	if (!z->at || !z->type)
		return -1;
	for (i = 0; i < z->n; i++) {
		z->at[i] = be(p + (int64_t)i * tb, tb);
		z->type[i] = types[i];
		if (types[i] >= z->ntypes || (i && z->at[i] <= z->at[i - 1]))
			return -1;
	}
	for (i = 0; i < z->ntypes; i++)
		z->off[i] = (long)be(info + 6 * i, 4);
	return 0;
}

/* parse the TZif bytes buf[0..len) into z */
static int tzif_parse(struct tz *z, const unsigned char *buf, int64_t len)
{
	int64_t c[6], skip, size;
	const unsigned char *p = buf, *end = buf + len, *nl;
	char footer[128];

	if (len < 44 || memcmp(p, "TZif", 4) != 0 || counts(p, c) != 0)
		return -1;
	if (p[4] == '\0')	/* version 1: 32-bit times, no footer */
		return block_size(c, 4) <= len - 44 ? block_read(z, p + 44, c, 4) : -1;
	skip = 44 + block_size(c, 4);
	if (skip + 44 > len || memcmp(p + skip, "TZif", 4) != 0 || counts(p + skip, c) != 0)
		return -1;
	p += skip;
	size = block_size(c, 8);
	if (size > end - p - 44 || block_read(z, p + 44, c, 8) != 0)
		return -1;
	p += 44 + size;
	if (p >= end || *p != '\n' || !(nl = memchr(p + 1, '\n', (size_t)(end - p - 1))) ||
	    nl - p - 1 >= (int64_t)sizeof footer)
		return -1;
	memcpy(footer, p + 1, (size_t)(nl - p - 1));
	footer[nl - p - 1] = '\0';
	return rule_parse(footer, &z->rule);
}

void tz_free(struct tz *z)
{
	if (!z)
		return;
	free(z->at);
	free(z->type);
	free(z);
}

enum sd_result tz_load(const char *name, struct tz **out)
{
	char path[512];
	unsigned char *buf = NULL;
	struct tz *z = NULL;
	size_t len = 0;
	FILE *f = NULL;
	int ok = 0;

	*out = NULL;
	if (tz_path(name, path, sizeof path) == 0 && (f = fopen(path, "rb")) &&
	    (buf = malloc(TZ_FILE_MAX)) && (z = calloc(1, sizeof *z))) {
		len = fread(buf, 1, TZ_FILE_MAX, f);
		ok = len < TZ_FILE_MAX && tzif_parse(z, buf, (int64_t)len) == 0;
	}
	if (f)
		fclose(f);
	free(buf);
	if (!ok && name && strcmp(name, "UTC") == 0 && (ok = !!z || (z = calloc(1, sizeof *z))))
		z->n = 0, z->ntypes = 1, z->off[0] = 0, z->rule.set = 0;	/* no tz database */
	if (!ok) {
		tz_free(z);
		return err_set(SD_INVALID, "timezone: '%.64s' is not a zone of the tz database "
			       "(a name like Europe/Berlin, as in /usr/share/zoneinfo)",
			       name ? name : "");
	}
	*out = z;
	return SD_OK;
}

long tz_offset(const struct tz *z, int64_t t)
{
	int lo = 0, hi = z->n;

	if (z->n == 0)
		return z->rule.set ? rule_offset(&z->rule, t) : z->off[0];
	if (t < z->at[0])
		return z->off[0];
	if (t >= z->at[z->n - 1] && z->rule.set)
		return rule_offset(&z->rule, t);
	while (hi - lo > 1) {	/* the last transition at or before t */
		int mid = (lo + hi) / 2;

		if (z->at[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	return z->off[z->type[lo]];
}

int64_t tz_local(const struct tz *z, int64_t local)
{
	long o[2] = { tz_offset(z, local - 86400), tz_offset(z, local + 86400) };
	int64_t best = INT64_MAX, lo, hi, mid;
	long after;
	int i;

	for (i = 0; i < 2; i++) {
		int64_t t = local - o[i];

		if (tz_offset(z, t) == o[i] && t < best)
			best = t;
	}
	if (best != INT64_MAX)
		return best;
	/* the clocks skip it: the instant they jump lies in (local - big, local - small] */
	lo = local - (o[0] > o[1] ? o[0] : o[1]);
	hi = local - (o[0] > o[1] ? o[1] : o[0]);
	after = tz_offset(z, hi);
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (tz_offset(z, mid) == after)
			hi = mid;
		else
			lo = mid;
	}
	return hi;
}
