/*
 * sqs_msg.c: an SQS message's body and attributes checked and digested
 * (sqs_msg.h); UTF-8 through text.h's decoder, MD5 and base64 through
 * code.h.
 *
 * Invariants:
 *  - every check reads within the lengths it is given: a body need not end
 *    in a NUL, and a NUL inside one is a character SQS refuses;
 *  - an attribute that sqs_attrs_valid passed has exactly one value, the one
 *    its DataType names (a StringValue for String and Number, a BinaryValue
 *    for Binary), so the MD5 made by type here is the one an SDK makes by
 *    which value is present;
 *  - base64 is taken only in its canonical written form (the alphabet of
 *    RFC 4648 section 4, padded to a multiple of 4, nothing else), so its
 *    decoded length is known before it is decoded;
 *  - a message names an attribute only after its name passed the
 *    alphabet, so no control byte from a client reaches a log line.
 */
#define _GNU_SOURCE
#include "sqs_msg.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>


#include "code.h"
#include "text.h"

#define SQS_CHARS "#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF"

enum sqs_kind { SQS_STRING, SQS_NUMBER, SQS_BINARY };

/* ======================== characters ====================================== */

/* One code point of s[0..left) (left > 0) into *cp: its length, or 0 when
 * the bytes there are not UTF-8.  text_utf8_next stops at a NUL, so a
 * sequence that the end of the buffer cuts short is decoded from a copy
 * that a NUL ends. */
static size_t sqs_next_cp(const unsigned char *s, size_t left, uint32_t *cp)
{
	unsigned char tail[5] = { 0 };

	if (left >= 4)
		return text_utf8_next(s, cp);
	memcpy(tail, s, left);
	return text_utf8_next(tail, cp);
}

static int sqs_char_ok(uint32_t cp)
{
	return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
	       (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

/* The offset of the first byte of s[0..len) that starts a malformed
 * sequence or a character SQS refuses, or len when there is none;
 * [out] *malformed 1 for the first kind. */
static size_t sqs_first_bad(const char *s, size_t len, int *malformed)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, n;
	uint32_t cp;

	*malformed = 0;
	while (i < len) {
		if (!(n = sqs_next_cp(p + i, len - i, &cp))) {
			*malformed = 1;
			return i;
		}
		if (!sqs_char_ok(cp))
			return i;
		i += n;
	}
	return len;
}

/* SD_INVALID for what (e.g. "the message body") at its first bad byte */
static enum sd_result sqs_text_valid(const char *what, const char *s, size_t len)
{
	int malformed;
	size_t at = sqs_first_bad(s, len, &malformed);

	if (at == len)
		return SD_OK;
	if (malformed)
		return err_set(SD_INVALID, "%s is not valid UTF-8 at byte %zu", what, at);
	return err_set(SD_INVALID, "%s has a character SQS does not allow at byte %zu "
		       "(allowed: " SQS_CHARS ")", what, at);
}

enum sd_result sqs_body_valid(const char *body, size_t len)
{
	if (!body || len == 0)
		return err_set(SD_INVALID, "the message body must not be empty");
	return sqs_text_valid("the message body", body, len);
}

/* ======================== names and types ================================= */

static int sqs_name_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '.';
}

/* the length of s's run of [A-Za-z0-9_.-] */
static size_t sqs_name_span(const char *s)
{
	size_t n = 0;

	while (s[n] && sqs_name_char((unsigned char)s[n]))
		n++;
	return n;
}

static enum sd_result sqs_name_valid(const char *name)
{
	size_t n = sqs_name_span(name);

	if (name[0] == '\0')
		return err_set(SD_INVALID, "a message attribute has an empty name");
	if (name[n] != '\0')
		return err_set(SD_INVALID, "a message attribute's name has a character other than "
			       "A-Z a-z 0-9 _ - . at position %zu", n);
	if (n > SQS_ATTR_NAME_MAX)
		return err_set(SD_INVALID, "message attribute '%.40s...' has a name of %zu "
			       "characters; at most %d", name, n, SQS_ATTR_NAME_MAX);
	if (strncasecmp(name, "AWS.", 4) == 0 || strncasecmp(name, "Amazon.", 7) == 0)
		return err_set(SD_INVALID, "message attribute '%s': names starting with AWS. or "
			       "Amazon. are reserved", name);
	if (name[0] == '.' || name[n - 1] == '.' || strstr(name, ".."))
		return err_set(SD_INVALID, "message attribute '%s': a name must not start or end "
			       "with '.' or hold \"..\"", name);
	return SD_OK;
}

/* DataType: String, Number or Binary, then ".label" or nothing */
static enum sd_result sqs_type_valid(const char *name, const char *type, enum sqs_kind *kind)
{
	static const char *const base[] = { "String", "Number", "Binary" };
	size_t i, n, label;

	for (i = 0; i < 3; i++) {
		n = strlen(base[i]);
		if (strncmp(type, base[i], n) == 0 && (type[n] == '\0' || type[n] == '.'))
			break;
	}
	if (i == 3)
		return err_set(SD_INVALID, "message attribute '%s': DataType must be String, "
			       "Number or Binary, with an optional .label", name);
	*kind = (enum sqs_kind)i;
	if (type[n] == '\0')
		return SD_OK;
	label = sqs_name_span(type + n + 1);
	if (label == 0 || type[n + 1 + label] != '\0' || label > SQS_ATTR_LABEL_MAX)
		return err_set(SD_INVALID, "message attribute '%s': a DataType's label must be "
			       "1 to %d characters of A-Z a-z 0-9 _ - .", name,
			       SQS_ATTR_LABEL_MAX);
	return SD_OK;
}

/* ======================== values ========================================== */

/* the run of digits at s[i..len): its end; [out] *n its length */
static size_t sqs_digits(const char *s, size_t i, size_t len, size_t *n)
{
	*n = 0;
	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++, (*n)++;
	return i;
}

/* The significant digits of the mantissa s[0..len) (digits and one '.'):
 * from the first digit not 0 to the last, the '.' not counted. */
static size_t sqs_significant(const char *s, size_t len)
{
	size_t first = len, last = 0, i, n = 0;

	for (i = 0; i < len; i++)
		if (s[i] >= '1' && s[i] <= '9') {
			if (first == len)
				first = i;
			last = i;
		}
	if (first == len)
		return 0;
	for (i = first; i <= last; i++)
		n += s[i] != '.';
	return n;
}

/* [+-] digits [. digits] [(e|E) [+-] digits], a digit on either side of
 * the '.' enough; at most SQS_NUMBER_DIGITS_MAX significant digits */
static enum sd_result sqs_number_valid(const char *name, const char *s, size_t len)
{
	size_t i = 0, start, end, d_int, d_frac = 0, d_exp = 1;

	if (i < len && (s[i] == '+' || s[i] == '-'))
		i++;
	start = i;
	i = sqs_digits(s, i, len, &d_int);
	if (i < len && s[i] == '.')
		i = sqs_digits(s, i + 1, len, &d_frac);
	end = i;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < len && (s[i] == '+' || s[i] == '-'))
			i++;
		i = sqs_digits(s, i, len, &d_exp);
	}
	if (d_int + d_frac == 0 || d_exp == 0 || i != len)
		return err_set(SD_INVALID, "message attribute '%s': a Number's value must be a "
			       "decimal number", name);
	if (sqs_significant(s + start, end - start) > SQS_NUMBER_DIGITS_MAX)
		return err_set(SD_INVALID, "message attribute '%s': a Number has at most %d "
			       "significant digits", name, SQS_NUMBER_DIGITS_MAX);
	return SD_OK;
}

static int sqs_b64_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

/* Canonical base64 of len bytes at s: 1 with [out] *decoded its decoded
 * length, 0 when it is not. */
static int sqs_b64_len(const char *s, size_t len, size_t *decoded)
{
	size_t pad = 0, i;

	if (len == 0 || len % 4 != 0)
		return 0;
	if (s[len - 1] == '=')
		pad = s[len - 2] == '=' ? 2 : 1;
	for (i = 0; i < len - pad; i++)
		if (!sqs_b64_char((unsigned char)s[i]))
			return 0;
	*decoded = len / 4 * 3 - pad;
	return 1;
}

/* one value as its DataType wants it; [out] *size the bytes it counts */
static enum sd_result sqs_value_valid(const char *name, json_t *v, enum sqs_kind kind,
				      size_t *size)
{
	static const char *const kind_name[] = { "String", "Number", "Binary" };
	const char *what = kind == SQS_BINARY ? "BinaryValue" : "StringValue";
	const char *not = kind == SQS_BINARY ? "StringValue" : "BinaryValue";
	json_t *want = json_object_get(v, what), *other = json_object_get(v, not);
	const char *s = json_string_value(want);
	size_t len = json_string_length(want);
	char buf[SQS_ATTR_NAME_MAX + 64];

	if (other && !json_is_null(other))
		return err_set(SD_INVALID, "message attribute '%s' must have no %s: its DataType "
			       "is %s", name, not, kind_name[kind]);
	if (!s || len == 0)
		return err_set(SD_INVALID, "message attribute '%s' must have a non-empty %s",
			       name, what);
	if (kind == SQS_BINARY) {
		if (!sqs_b64_len(s, len, size))
			return err_set(SD_INVALID, "message attribute '%s': BinaryValue must be "
				       "base64", name);
		return SD_OK;
	}
	*size = len;
	snprintf(buf, sizeof buf, "the StringValue of message attribute '%s'", name);
	if (sqs_text_valid(buf, s, len) != SD_OK)
		return SD_INVALID;
	return kind == SQS_NUMBER ? sqs_number_valid(name, s, len) : SD_OK;
}

/* StringListValues and BinaryListValues: reserved by SQS; absent or [] */
static enum sd_result sqs_lists_valid(const char *name, json_t *v)
{
	static const char *const key[] = { "StringListValues", "BinaryListValues" };
	size_t i;

	for (i = 0; i < 2; i++) {
		json_t *l = json_object_get(v, key[i]);

		if (l && !json_is_null(l) && !(json_is_array(l) && json_array_size(l) == 0))
			return err_set(SD_INVALID, "message attribute '%s': %s is not supported",
				       name, key[i]);
	}
	return SD_OK;
}

/* one attribute; [out] *size the bytes it counts toward SQS_MSG_MAX */
static enum sd_result sqs_attr_valid(const char *name, json_t *v, size_t *size)
{
	json_t *jt = json_object_get(v, "DataType");
	const char *type = json_string_value(jt);
	enum sqs_kind kind;
	size_t vsize = 0;
	enum sd_result r;

	if ((r = sqs_name_valid(name)) != SD_OK)
		return r;
	if (!json_is_object(v))
		return err_set(SD_INVALID, "message attribute '%s' must be an object", name);
	if (!type || json_string_length(jt) != strlen(type))
		return err_set(SD_INVALID, "message attribute '%s' has no DataType", name);
	if ((r = sqs_type_valid(name, type, &kind)) != SD_OK ||
	    (r = sqs_lists_valid(name, v)) != SD_OK ||
	    (r = sqs_value_valid(name, v, kind, &vsize)) != SD_OK)
		return r;
	*size = strlen(name) + strlen(type) + vsize;
	return SD_OK;
}

enum sd_result sqs_attrs_valid(json_t *attrs, size_t *size_out)
{
	size_t total = 0, one = 0, key_len;
	const char *name;
	json_t *v;

	if (size_out)
		*size_out = 0;
	if (!attrs || json_is_null(attrs))
		return SD_OK;
	if (!json_is_object(attrs))
		return err_set(SD_INVALID, "MessageAttributes must be an object");
	if (json_object_size(attrs) > SQS_MSG_ATTRS_MAX)
		return err_set(SD_INVALID, "the message has %zu attributes; at most %d",
			       json_object_size(attrs), SQS_MSG_ATTRS_MAX);
	json_object_keylen_foreach(attrs, name, key_len, v) {
		if (key_len != strlen(name))
			return err_set(SD_INVALID, "a message attribute's name has a NUL");
		if (sqs_attr_valid(name, v, &one) != SD_OK)
			return SD_INVALID;
		total += one;
	}
	if (size_out)
		*size_out = total;
	return SD_OK;
}

enum sd_result sqs_msg_valid(const char *body, size_t len, json_t *attrs, size_t *size_out)
{
	size_t asize = 0;
	enum sd_result r;

	if (size_out)
		*size_out = 0;
	if ((r = sqs_body_valid(body, len)) != SD_OK || (r = sqs_attrs_valid(attrs, &asize)) != SD_OK)
		return r;
	if (len + asize > SQS_MSG_MAX)
		return err_set(SD_INVALID, "the message is %zu bytes with its attributes; at most "
			       "%d", len + asize, SQS_MSG_MAX);
	if (size_out)
		*size_out = asize;
	return SD_OK;
}

/* ======================== digests ========================================= */

void sqs_md5_hex(const void *data, size_t len, char out[SQS_MD5_HEX + 1])
{
	code_md5_hex(data, len, out);
}

static int sqs_strcmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 4-byte big-endian n, then n bytes of s (NULL: room for them only) */
static unsigned char *sqs_put(unsigned char *p, const void *s, size_t n)
{
	p[0] = (unsigned char)(n >> 24);
	p[1] = (unsigned char)(n >> 16);
	p[2] = (unsigned char)(n >> 8);
	p[3] = (unsigned char)n;
	if (s)
		memcpy(p + 4, s, n);
	return p + 4 + n;
}

/* one attribute's encoding at p; the end of it, NULL when it is invalid */
static unsigned char *sqs_encode(unsigned char *p, const char *name, json_t *v)
{
	const char *type = json_string_value(json_object_get(v, "DataType"));
	enum sqs_kind kind;
	json_t *jv;
	size_t n;

	if (!type || sqs_type_valid(name, type, &kind) != SD_OK)
		return NULL;
	p = sqs_put(p, name, strlen(name));
	p = sqs_put(p, type, strlen(type));
	jv = json_object_get(v, kind == SQS_BINARY ? "BinaryValue" : "StringValue");
	if (!json_is_string(jv))
		return NULL;
	if (kind != SQS_BINARY) {
		*p++ = 1;
		return sqs_put(p, json_string_value(jv), json_string_length(jv));
	}
	*p++ = 2;
	if (!sqs_b64_len(json_string_value(jv), json_string_length(jv), &n) ||
	    code_base64_decode(json_string_value(jv), json_string_length(jv), p + 4, n, &n) != 0)
		return NULL;
	return sqs_put(p, NULL, n);
}

/* what every attribute's encoding can take, at most (a binary's base64
 * length bounds its decoded length) */
static size_t sqs_encoded_max(json_t *attrs)
{
	const char *name;
	size_t total = 0;
	json_t *v;

	json_object_foreach(attrs, name, v) {
		total += 4 + strlen(name) + 4 + json_string_length(json_object_get(v, "DataType"));
		total += 1 + 4 + json_string_length(json_object_get(v, "StringValue")) +
			 json_string_length(json_object_get(v, "BinaryValue"));
	}
	return total;
}

enum sd_result sqs_attrs_md5(json_t *attrs, char out[SQS_MD5_HEX + 1])
{
	const char **names = NULL, *name;
	unsigned char *buf = NULL, *p;
	enum sd_result r = SD_OK;
	size_t n = 0, i;
	json_t *v;

	out[0] = '\0';
	if (!attrs || json_is_null(attrs) || (json_is_object(attrs) && !json_object_size(attrs)))
		return SD_OK;
	if (!json_is_object(attrs))
		return err_set(SD_INVALID, "MessageAttributes must be an object");
	names = calloc(json_object_size(attrs), sizeof *names);
	p = buf = malloc(sqs_encoded_max(attrs));
	if (!names || !buf) {
		r = err_set(SD_NOMEM, "out of memory for the message attributes' MD5");
		goto out;
	}
	json_object_foreach(attrs, name, v)
		names[n++] = name;
	qsort(names, n, sizeof *names, sqs_strcmp);
	for (i = 0; i < n && p; i++)
		p = sqs_encode(p, names[i], json_object_get(attrs, names[i]));
	if (!p) {
		r = err_set(SD_INVALID, "message attribute '%.*s' is not valid",
			    (int)sqs_name_span(names[i - 1]), names[i - 1]);
		goto out;
	}
	sqs_md5_hex(buf, (size_t)(p - buf), out);
out:
	free(names);
	free(buf);
	return r;
}

/* ======================== picking ========================================= */

/* does one of names (MessageAttributeNames) ask for the attribute name? */
static int sqs_wanted(const char *name, json_t *names)
{
	size_t i, n;
	json_t *jn;

	json_array_foreach(names, i, jn) {
		const char *want = json_string_value(jn);

		if (!want)
			continue;
		n = strlen(want);
		if (strcmp(want, "All") == 0 || strcmp(want, ".*") == 0 || strcmp(want, name) == 0)
			return 1;
		if (n > 2 && strcmp(want + n - 2, ".*") == 0 && strncmp(name, want, n - 1) == 0)
			return 1;
	}
	return 0;
}

json_t *sqs_attrs_pick(json_t *attrs, json_t *names)
{
	json_t *out = json_object(), *v;
	const char *name;

	if (!out || !json_is_object(attrs) || !json_is_array(names))
		return out;
	json_object_foreach(attrs, name, v) {
		if (sqs_wanted(name, names) && json_object_set(out, name, v) != 0) {
			json_decref(out);
			return NULL;
		}
	}
	return out;
}
