/*
 * text.c: strict UTF-8 and the checks on text that enters the box (text.h).
 *
 * Invariants: text_utf8_next is the only UTF-8 decoder in src/; a string
 * that text_check accepted is also accepted by text_utf8_valid, and
 * text_escape of it is the same string.
 */
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

size_t text_utf8_next(const unsigned char *s, uint32_t *cp)
{
	uint32_t c = s[0], min, v;
	size_t n, i;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xC2 && c <= 0xDF) {
		n = 2, v = c & 0x1F, min = 0x80;
	} else if (c >= 0xE0 && c <= 0xEF) {
		n = 3, v = c & 0x0F, min = 0x800;
	} else if (c >= 0xF0 && c <= 0xF4) {
		n = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;	/* a continuation byte, C0/C1 (overlong) or F5..FF */
	}
	for (i = 1; i < n; i++) {
		/* the NUL terminator fails this test, so a sequence cut short at
		 * the end of the string is caught without reading past it */
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3F);
	}
	if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	*cp = v;
	return n;
}

int text_utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t cp;
	size_t n;

	while (*p) {
		if (!(n = text_utf8_next(p, &cp)))
			return 0;
		p += n;
	}
	return 1;
}

/* text_unsafe_cp: is cp a code point text_check refuses inside valid UTF-8
 * (a C0/C1 control, DEL, a bidi embedding/override/isolate)?  1 or 0. */
static int text_unsafe_cp(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) ||
	       (cp >= 0x2066 && cp <= 0x2069);
}

enum sd_result text_check(const char *what, const char *s, size_t max_bytes)
{
	const unsigned char *p = (const unsigned char *)s;
	uint32_t cp;
	size_t n;

	if (!s || !*s)
		return err_set(SD_INVALID, "%s is empty", what);
	if (strlen(s) > max_bytes)
		return err_set(SD_INVALID, "%s is longer than %zu bytes", what, max_bytes);
	for (; *p; p += n) {
		size_t at = (size_t)(p - (const unsigned char *)s);

		if (!(n = text_utf8_next(p, &cp)))
			return err_set(SD_INVALID, "%s is not valid UTF-8 (byte %zu)", what, at);
		if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
			return err_set(SD_INVALID, "%s holds a control character (CR, LF, tab ...) "
				       "at byte %zu", what, at);
		if (text_unsafe_cp(cp))
			return err_set(SD_INVALID, "%s holds a bidirectional override (U+%04X) at "
				       "byte %zu", what, (unsigned)cp, at);
	}
	return SD_OK;
}

/* escape_unit: the text for the unit at p (one character, or one malformed
 * byte) into out[9]; [out] *in its length in s.  Returns the output length. */
static size_t escape_unit(const unsigned char *p, char out[9], size_t *in)
{
	uint32_t cp;
	size_t n = text_utf8_next(p, &cp);

	if (!n) {
		*in = 1;
		return (size_t)snprintf(out, 9, "\\x%02X", *p);
	}
	*in = n;
	if (text_unsafe_cp(cp))
		return (size_t)(n == 1 ? snprintf(out, 9, "\\x%02X", *p)
				       : snprintf(out, 9, "\\u{%04X}", (unsigned)cp));
	memcpy(out, p, n);
	return n;
}

char *text_escape(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	/* the worst case: every byte becomes "\xNN" (4 bytes); a refused code
	 * point of n >= 2 bytes becomes at most "\u{NNNN}" (8): 4 per byte */
	char *out = malloc(strlen(s) * 4 + 1), *w = out, unit[9];
	size_t in, len;

	if (!out)
		return NULL;
	for (; *p; p += in) {
		len = escape_unit(p, unit, &in);
		memcpy(w, unit, len);
		w += len;
	}
	*w = '\0';
	return out;
}

size_t text_copy(char *dst, size_t size, const char *src)
{
	const unsigned char *p = (const unsigned char *)src;
	size_t used = 0, in, len;
	char unit[9];

	if (size == 0)
		return 0;
	for (; p && *p; p += in) {
		len = escape_unit(p, unit, &in);
		if (used + len + 1 > size)
			break;
		memcpy(dst + used, unit, len);
		used += len;
	}
	dst[used] = '\0';
	return used;
}

int text_duration_ms(const char *s, int64_t *ms)
{
	static const struct { const char *unit; int64_t ms; } units[] = {
		{ "", 1 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
		{ "d", 86400000 },
	};
	int64_t v = 0;
	size_t i, digits = 0;

	if (!s)
		return -1;
	for (; s[digits] >= '0' && s[digits] <= '9'; digits++) {
		if (v > 100000000000000LL)
			return -1;
		v = v * 10 + (s[digits] - '0');
	}
	if (!digits)
		return -1;
	for (i = 0; i < sizeof units / sizeof units[0]; i++)
		if (strcmp(s + digits, units[i].unit) == 0) {
			if (v > 3155760000000LL / units[i].ms)	/* 100 years */
				return -1;
			*ms = v * units[i].ms;
			return 0;
		}
	return -1;
}

/* ======================== URLs =========================================== */

/* A query parameter of a PostgreSQL URI that holds a secret (libpq's). */
static int pg_secret_param(const char *p, size_t n)
{
	static const char *const secrets[] = { "password", "sslpassword" };
	size_t i;

	for (i = 0; i < sizeof secrets / sizeof secrets[0]; i++)
		if (strlen(secrets[i]) == n && strncasecmp(p, secrets[i], n) == 0)
			return 1;
	return 0;
}

/* append n bytes of s to buf[size] at *o (cut, never overrun) */
static void put(char *buf, size_t size, size_t *o, const char *s, size_t n)
{
	if (*o + 1 >= size)
		return;
	if (n > size - 1 - *o)
		n = size - 1 - *o;
	memcpy(buf + *o, s, n);
	*o += n;
	buf[*o] = '\0';
}

/* the query of a PostgreSQL URI, its secret values masked */
static void pg_query(const char *q, char *buf, size_t size, size_t *o)
{
	while (*q) {
		size_t n = strcspn(q, "&#"), k = strcspn(q, "=&#");

		if (k < n && pg_secret_param(q, k)) {
			put(buf, size, o, q, k + 1);
			put(buf, size, o, "***", 3);
		} else {
			put(buf, size, o, q, n);
		}
		q += n;
		if (*q == '&')
			put(buf, size, o, q++, 1);
		else if (*q == '#')
			break;
	}
}

void text_redact_url(const char *url, char *buf, size_t size)
{
	const char *sep, *rest, *at, *colon, *q;
	size_t o = 0, auth;
	int pg;

	if (!size)
		return;
	buf[0] = '\0';
	if (!url)
		return;
	if (!(sep = strstr(url, "://"))) {
		put(buf, size, &o, url, strlen(url));
		return;
	}
	pg = (size_t)(sep - url) <= 10 && (strncmp(url, "postgresql", 10) == 0 ||
					  strncmp(url, "postgres", 8) == 0);
	rest = sep + 3;
	auth = strcspn(rest, "/?#");
	put(buf, size, &o, url, (size_t)(rest - url));
	/* the last '@' of the authority ends the user part */
	for (at = NULL, q = rest; (q = memchr(q, '@', auth - (size_t)(q - rest))); q++)
		at = q;
	if (at) {
		colon = memchr(rest, ':', (size_t)(at - rest));
		put(buf, size, &o, rest, colon ? (size_t)(colon - rest) : (size_t)(at - rest));
		if (colon)
			put(buf, size, &o, ":***", 4);
		rest = at;
	}
	q = rest + strcspn(rest, "?#");
	put(buf, size, &o, rest, (size_t)(q - rest));
	if (*q != '?')
		return;
	put(buf, size, &o, "?", 1);
	if (pg)
		pg_query(q + 1, buf, size, &o);
	else
		put(buf, size, &o, "***", 3);
}

enum sd_result text_field_valid(const char *what, const char *s)
{
	return text_check(what, s, TEXT_FIELD_MAX);
}
