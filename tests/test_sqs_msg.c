/*
 * test_sqs_msg.c: an SQS message checked and digested as SQS does it
 * (sqs_msg.h): the body's characters, each rule of the attributes, what
 * they count toward the size limit, MD5OfMessageAttributes against
 * published vectors and against tests/sqs_md5.py (an implementation of
 * its own in Python's standard library) for random attribute sets, and
 * ReceiveMessage's MessageAttributeNames patterns.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mbedtls/base64.h>

#include "sqs_msg.h"

/* ---- helpers ------------------------------------------------------------------ */

/* {name: {"DataType": type, key: value}}; value NULL: no key */
static json_t *one(const char *name, const char *type, const char *key, const char *value)
{
	json_t *a = json_object(), *o = json_object();

	assert_non_null(a);
	assert_non_null(o);
	if (type)
		json_object_set_new(a, "DataType", json_string(type));
	/* the bytes as they are, UTF-8 or not: what the module must judge */
	if (key && value)
		json_object_set_new(a, key, json_string_nocheck(value));
	json_object_set_new(o, name, a);
	return o;
}

static enum sd_result valid1(const char *name, const char *type, const char *key,
			     const char *value)
{
	json_t *o = one(name, type, key, value);
	size_t size = 12345;
	enum sd_result r = sqs_attrs_valid(o, &size);

	json_decref(o);
	if (r != SD_OK)
		assert_int_equal(size, 0);
	return r;
}

static json_t *parse(const char *text)
{
	json_error_t e;
	json_t *o = json_loads(text, JSON_ALLOW_NUL, &e);

	if (!o)
		fail_msg("bad JSON in the test: %s: %s", e.text, text);
	return o;
}

/* a refusal whose message says what (e.g. "byte 3", the attribute's name) */
static void refused_saying(enum sd_result r, const char *what)
{
	assert_int_equal(r, SD_INVALID);
	if (!strstr(err_msg(), what))
		fail_msg("the message \"%s\" does not say \"%s\"", err_msg(), what);
}

/* ---- the body ----------------------------------------------------------------- */

static void test_body_refused(void **state)
{
	static const struct {
		const char *bytes;
		size_t len;
		const char *at;
	} bad[] = {
		{ "a\0b", 3, "byte 1" },			/* NUL */
		{ "xy\xED\xA0\x80", 5, "byte 2" },		/* lone surrogate U+D800 */
		{ "\xED\xBF\xBF", 3, "byte 0" },		/* lone surrogate U+DFFF */
		{ "\xC0\xAF", 2, "byte 0" },			/* overlong '/' */
		{ "ok\xE0\x80\xAF", 5, "byte 2" },		/* overlong, 3 bytes */
		{ "\xF0\x80\x80\xAF", 4, "byte 0" },		/* overlong, 4 bytes */
		{ "a\xEF\xBF\xBE", 4, "byte 1" },		/* U+FFFE */
		{ "ab\xEF\xBF\xBF" "c", 6, "byte 2" },		/* U+FFFF */
		{ "\xF4\x90\x80\x80", 4, "byte 0" },		/* past U+10FFFF */
		{ "\x80", 1, "byte 0" },			/* lone continuation */
		{ "\x01", 1, "byte 0" },			/* C0 control */
		{ "abc\x1F", 4, "byte 3" },
		{ "\x0B", 1, "byte 0" },			/* vertical tab */
		{ "\xFF", 1, "byte 0" },
		/* cut short by the length given, though the bytes after it
		 * would complete the character: nothing past len is read */
		{ "ab\xE2\x82\xAC", 4, "byte 2" },
		{ "\xF0\x9F\x8E\xAB", 3, "byte 0" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (sqs_body_valid(bad[i].bytes, bad[i].len) != SD_INVALID)
			fail_msg("body %zu taken", i);
		if (!strstr(err_msg(), bad[i].at))
			fail_msg("body %zu: \"%s\" does not say %s", i, err_msg(), bad[i].at);
	}
	refused_saying(sqs_body_valid("", 0), "empty");
	refused_saying(sqs_body_valid(NULL, 0), "empty");
	refused_saying(sqs_body_valid("\xEF\xBF\xBE", 3), "does not allow");
	refused_saying(sqs_body_valid("\xC0\xAF", 2), "not valid UTF-8");
}

static void test_body_accepted(void **state)
{
	static const char *const good[] = {
		"a",
		"tab\there",
		"line\nbreak\r\n",
		"\xF0\x9F\x8E\xAB ticket",	/* U+1F3AB, an emoji */
		"caf\xC3\xA9 \xE4\xB8\xAD",	/* é, 中 */
		"\x7F",				/* DEL is in #x20-#xD7FF */
		"\xED\x9F\xBF",			/* U+D7FF */
		"\xEE\x80\x80",			/* U+E000 */
		"\xEF\xBF\xBD",			/* U+FFFD */
		"\xF0\x90\x80\x80",		/* U+10000 */
		"\xF4\x8F\xBF\xBF",		/* U+10FFFF */
		"{\"json\": [1, 2]} <xml/>",
	};
	char buf[8] = { 'a', 'b', 'c', '\xC3', '\xA9', '\xFF', '\xFF', '\xFF' };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof good / sizeof good[0]; i++)
		if (sqs_body_valid(good[i], strlen(good[i])) != SD_OK)
			fail_msg("body %zu refused: %s", i, err_msg());
	/* the length bounds the body: no NUL needed, bad bytes after it unread */
	assert_int_equal(sqs_body_valid(buf, 5), SD_OK);
	assert_int_equal(sqs_body_valid(buf, 6), SD_INVALID);
}

/* ---- attributes: names --------------------------------------------------------- */

static void test_attr_names(void **state)
{
	static const char *const good[] = {
		"a", "Z9", "order_id", "order-id", "a.b.c", "x.AWS.y", "AWS", "AWSx", "Amazon",
		"amazonian.x", "_AWS.x", "-", "0",
	};
	static const char *const reserved[] = { "AWS.x", "aws.x", "Aws.TraceHeader", "Amazon.x",
						"AMAZON.x", "amazon.sqs" };
	static const char *const dots[] = { ".a", "a.", "a..b", ".", ".." };
	static const char *const chars[] = { "a b", "a/b", "a:b", "caf\xC3\xA9", "a*", "a\tb" };
	char name[SQS_ATTR_NAME_MAX + 2];
	json_t *o;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof good / sizeof good[0]; i++)
		if (valid1(good[i], "String", "StringValue", "v") != SD_OK)
			fail_msg("name %s refused: %s", good[i], err_msg());
	for (i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
		refused_saying(valid1(reserved[i], "String", "StringValue", "v"), reserved[i]);
	for (i = 0; i < sizeof dots / sizeof dots[0]; i++)
		refused_saying(valid1(dots[i], "String", "StringValue", "v"), "'.'");
	for (i = 0; i < sizeof chars / sizeof chars[0]; i++)
		refused_saying(valid1(chars[i], "String", "StringValue", "v"), "A-Z a-z 0-9");
	refused_saying(valid1("", "String", "StringValue", "v"), "empty name");
	o = json_object();
	json_object_setn_new(o, "a\0b", 3, json_pack("{s:s, s:s}", "DataType", "String",
						     "StringValue", "v"));
	refused_saying(sqs_attrs_valid(o, NULL), "has a NUL");
	json_decref(o);
	memset(name, 'n', sizeof name);
	name[SQS_ATTR_NAME_MAX] = '\0';
	assert_int_equal(valid1(name, "String", "StringValue", "v"), SD_OK);
	name[SQS_ATTR_NAME_MAX] = 'n';
	name[SQS_ATTR_NAME_MAX + 1] = '\0';
	refused_saying(valid1(name, "String", "StringValue", "v"), "at most 256");
}

static void test_attr_count(void **state)
{
	json_t *o = json_object();
	char name[16];
	size_t size = 0;
	int i;

	(void)state;
	assert_int_equal(sqs_attrs_valid(NULL, &size), SD_OK);
	assert_int_equal(size, 0);
	assert_int_equal(sqs_attrs_valid(json_null(), &size), SD_OK);
	assert_int_equal(sqs_attrs_valid(o, &size), SD_OK);
	assert_int_equal(size, 0);
	for (i = 0; i < SQS_MSG_ATTRS_MAX; i++) {
		snprintf(name, sizeof name, "a%d", i);
		json_object_set_new(o, name, json_pack("{s:s, s:s}", "DataType", "Number",
						       "StringValue", "1"));
	}
	assert_int_equal(sqs_attrs_valid(o, &size), SD_OK);
	/* names a0..a9 (2 bytes), "Number" (6), "1" (1) */
	assert_int_equal(size, SQS_MSG_ATTRS_MAX * 9);
	json_object_set_new(o, "a10", json_pack("{s:s, s:s}", "DataType", "String",
						"StringValue", "x"));
	refused_saying(sqs_attrs_valid(o, &size), "11 attributes; at most 10");
	assert_int_equal(size, 0);
	json_decref(o);
	o = json_array();
	refused_saying(sqs_attrs_valid(o, NULL), "must be an object");
	json_decref(o);
}

/* ---- attributes: types and values ---------------------------------------------------- */

static void test_attr_types(void **state)
{
	static const char *const good[] = {
		"String", "Number", "Binary", "String.custom", "Number.float", "Binary.gif",
		"String.a-b_c.d", "Number.0",
	};
	static const char *const bad[] = {
		"string", "STRING", "Str", "StringX", "String.", "String.a b",
		"Binary .x", "", "Integer", "String.caf\xC3\xA9", "Stringy", "Numbers.x",
		"Binaryx1",
	};
	char type[8 + SQS_ATTR_LABEL_MAX + 2];
	json_t *o;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof good / sizeof good[0]; i++) {
		int bin = strncmp(good[i], "Binary", 6) == 0;

		if (valid1("attr", good[i], bin ? "BinaryValue" : "StringValue",
			   bin ? "AAE=" : "42") != SD_OK)
			fail_msg("DataType %s refused: %s", good[i], err_msg());
	}
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (valid1("attr", bad[i], "StringValue", "42") != SD_INVALID ||
		    !strstr(err_msg(), "'attr'"))
			fail_msg("DataType %s taken, or not named: %s", bad[i], err_msg());
	/* a label of 256 characters, not 257 */
	snprintf(type, sizeof type, "String.%0*d", SQS_ATTR_LABEL_MAX, 7);
	assert_int_equal(valid1("attr", type, "StringValue", "v"), SD_OK);
	snprintf(type, sizeof type, "String.%0*d", SQS_ATTR_LABEL_MAX + 1, 7);
	refused_saying(valid1("attr", type, "StringValue", "v"), "'attr'");
	refused_saying(valid1("nodt", NULL, "StringValue", "v"), "'nodt' has no DataType");
	o = parse("{\"n\": {\"DataType\": 5, \"StringValue\": \"v\"}}");
	refused_saying(sqs_attrs_valid(o, NULL), "'n' has no DataType");
	json_decref(o);
	o = parse("{\"n\": {\"DataType\": \"String\\u0000x\", \"StringValue\": \"v\"}}");
	refused_saying(sqs_attrs_valid(o, NULL), "'n' has no DataType");
	json_decref(o);
	o = parse("{\"n\": \"String\"}");
	refused_saying(sqs_attrs_valid(o, NULL), "'n' must be an object");
	json_decref(o);
}

static void test_attr_values(void **state)
{
	static const char *const b64_bad[] = {
		"", "A", "AA", "AAA", "AA=", "A===", "=AAA", "AA=A", "AB*D", "AB D", "AB\nCD",
		"YQ", "YQ=", "YWJj\n", "YW-j", "YW_j", "====",
	};
	static const char *const b64_good[] = { "YQ==", "YWI=", "YWJj", "+/+/", "AAAAAA==" };
	json_t *o;
	size_t i;

	(void)state;
	/* each type needs its value, non-empty */
	refused_saying(valid1("s", "String", NULL, NULL), "'s' must have a non-empty StringValue");
	refused_saying(valid1("s", "String", "StringValue", ""), "'s' must have a non-empty");
	refused_saying(valid1("s", "String", "BinaryValue", "YQ=="), "'s' must have no BinaryValue");
	refused_saying(valid1("n", "Number", NULL, NULL), "'n' must have a non-empty StringValue");
	refused_saying(valid1("b", "Binary", NULL, NULL), "'b' must have a non-empty BinaryValue");
	refused_saying(valid1("b", "Binary", "StringValue", "x"), "'b' must have no StringValue");
	o = parse("{\"both\": {\"DataType\": \"String\", \"StringValue\": \"x\", "
		  "\"BinaryValue\": \"YQ==\"}}");
	refused_saying(sqs_attrs_valid(o, NULL), "'both'");
	json_decref(o);
	o = parse("{\"n\": {\"DataType\": \"String\", \"StringValue\": 5}}");
	refused_saying(sqs_attrs_valid(o, NULL), "'n' must have a non-empty StringValue");
	json_decref(o);
	/* a StringValue's characters are the body's */
	assert_int_equal(valid1("s", "String", "StringValue", "tab\t \xF0\x9F\x8E\xAB"), SD_OK);
	refused_saying(valid1("s", "String", "StringValue", "ok\xEF\xBF\xBE"), "byte 2");
	refused_saying(valid1("s", "String", "StringValue", "\xED\xA0\x80"), "not valid UTF-8");
	refused_saying(valid1("s", "String", "StringValue", "\xC0\xAF"), "'s'");
	refused_saying(valid1("s", "String", "StringValue", "a\x02"), "'s'");
	o = parse("{\"nul\": {\"DataType\": \"String\", \"StringValue\": \"a\\u0000b\"}}");
	refused_saying(sqs_attrs_valid(o, NULL), "byte 1");
	json_decref(o);
	/* a BinaryValue is canonical base64 of at least one byte */
	for (i = 0; i < sizeof b64_bad / sizeof b64_bad[0]; i++)
		if (valid1("b", "Binary", "BinaryValue", b64_bad[i]) != SD_INVALID ||
		    !strstr(err_msg(), "'b'"))
			fail_msg("BinaryValue \"%s\" taken", b64_bad[i]);
	for (i = 0; i < sizeof b64_good / sizeof b64_good[0]; i++)
		if (valid1("b", "Binary.x", "BinaryValue", b64_good[i]) != SD_OK)
			fail_msg("BinaryValue \"%s\" refused: %s", b64_good[i], err_msg());
	/* the reserved list values: absent, null or empty only */
	o = parse("{\"l\": {\"DataType\": \"String\", \"StringValue\": \"x\", "
		  "\"StringListValues\": [], \"BinaryListValues\": null}}");
	assert_int_equal(sqs_attrs_valid(o, NULL), SD_OK);
	json_decref(o);
	o = parse("{\"l\": {\"DataType\": \"String\", \"StringValue\": \"x\", "
		  "\"StringListValues\": [\"y\"]}}");
	refused_saying(sqs_attrs_valid(o, NULL), "StringListValues is not supported");
	json_decref(o);
}

#define TOO_PRECISE "1.00000000000000000000000000000000000001"	/* 39 significant */

static void test_numbers(void **state)
{
	static const char *const good[] = {
		"0", "-0", "7", "-1", "+1", "1.5", "-0.25", "5.", ".5", "1e10", "1E-5", "2e+3",
		"-0.000123e+7", "00012", "1e999",
		"99999999999999999999999999999999999999",	/* 38 digits */
		"100000000000000000000000000000000000000000",	/* 1 significant digit */
		"0.00000000000000000000000000000000000000000001",
		"1234567890123456789.0123456789012345678",	/* 38 */
		"000123456789012345678901234567890123456780000e5",	/* 38 */
		"4563442423554324324264524243.32543234",
	};
	static const char *const bad[] = {
		"abc", "1.2.3", "1e", "1e+", "e5", ".", "+", "-", "--1", "+-1", " 1", "1 ",
		"0x10", "NaN", "Infinity", "1,5", "1e5.5", "1_000", "\xEF\xBC\x91",
		"999999999999999999999999999999999999999",	/* 39 digits */
		TOO_PRECISE,
		"-12345678901234567890.1234567890123456789e-3",	/* 39 significant */
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof good / sizeof good[0]; i++)
		if (valid1("num", "Number.x", "StringValue", good[i]) != SD_OK)
			fail_msg("Number %s refused: %s", good[i], err_msg());
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (valid1("num", "Number", "StringValue", bad[i]) != SD_INVALID ||
		    !strstr(err_msg(), "'num'"))
			fail_msg("Number %s taken, or not named: %s", bad[i], err_msg());
	refused_saying(valid1("num", "Number", "StringValue", TOO_PRECISE), "significant digits");
	/* the same text is a fine String */
	assert_int_equal(valid1("num", "String", "StringValue", "abc"), SD_OK);
}

/* ---- the size ------------------------------------------------------------------------- */

static void test_size(void **state)
{
	json_t *o = parse("{\"a\": {\"DataType\": \"String\", \"StringValue\": \"xyz\"}, "
			  "\"bin\": {\"DataType\": \"Binary.x\", \"BinaryValue\": \"YWJjZA==\"}, "
			  "\"n\": {\"DataType\": \"Number\", \"StringValue\": \"-1.5\"}, "
			  "\"u\": {\"DataType\": \"String\", \"StringValue\": \"\xC3\xA9\xF0\x9F\x8E\xAB\"}}");
	/* a+String+xyz 10, bin+Binary.x+4 decoded 15, n+Number+-1.5 11, u+String+6 bytes 13 */
	size_t size = 0, total = 1, want = 10 + 15 + 11 + 13;
	char *body = malloc(SQS_MSG_MAX + 2);

	(void)state;
	assert_non_null(body);
	assert_int_equal(sqs_attrs_valid(o, &size), SD_OK);
	assert_int_equal(size, want);
	/* the body and the attributes together up to SQS_MSG_MAX */
	memset(body, 'x', SQS_MSG_MAX + 1);
	assert_int_equal(sqs_msg_valid(body, SQS_MSG_MAX - want, o, &total), SD_OK);
	assert_int_equal(total, want);	/* the attributes' part */
	refused_saying(sqs_msg_valid(body, SQS_MSG_MAX - want + 1, o, &total),
		       "262145 bytes with its attributes; at most 262144");
	assert_int_equal(total, 0);
	total = 5;
	assert_int_equal(sqs_msg_valid(body, SQS_MSG_MAX, NULL, &total), SD_OK);
	assert_int_equal(total, 0);
	assert_int_equal(sqs_msg_valid(body, SQS_MSG_MAX + 1, NULL, NULL), SD_INVALID);
	/* each part's own check comes first */
	body[3] = '\0';
	refused_saying(sqs_msg_valid(body, 10, o, NULL), "byte 3");
	refused_saying(sqs_msg_valid("", 0, o, NULL), "empty");
	free(body);
	json_decref(o);
}

/* ---- the digests ---------------------------------------------------------------------- */

static void md5_of(const char *attrs_json, const char *want)
{
	json_t *o = parse(attrs_json);
	char out[SQS_MD5_HEX + 1];

	assert_int_equal(sqs_attrs_valid(o, NULL), SD_OK);
	assert_int_equal(sqs_attrs_md5(o, out), SD_OK);
	if (strcmp(out, want) != 0)
		fail_msg("MD5 of %s: %s, not %s", attrs_json, out, want);
	json_decref(o);
}

#define VEC_STR "\"attribName1\": {\"DataType\": \"String\", \"StringValue\": \"attribValue 1\"}"
#define VEC_NUM "\"customNumberTypeAttrib\": {\"DataType\": \"Number.float\", "               \
		"\"StringValue\": \"4563442423554324324264524243.32543234\"}"
/* base64 of "Hello binary world!" */
#define VEC_BIN "\"binaryAttribute\": {\"DataType\": \"Binary\", "                          \
		"\"BinaryValue\": \"SGVsbG8gYmluYXJ5IHdvcmxkIQ==\"}"

static void test_md5_vectors(void **state)
{
	char out[SQS_MD5_HEX + 1] = "x";
	json_t *o;

	(void)state;
	/* MD5OfMessageBody: the bytes' MD5 (RFC 1321's vectors) */
	sqs_md5_hex("", 0, out);
	assert_string_equal(out, "d41d8cd98f00b204e9800998ecf8427e");
	sqs_md5_hex("message digest", 14, out);
	assert_string_equal(out, "f96b697d7cb7938d525a2f31aaf161d0");
	/* the vectors the npm package aws-md5-of-message-attributes publishes,
	 * which tests/sqs_md5.py gives too */
	md5_of("{" VEC_STR "}", "19e27d4e946b072f3f58da80d94fd778");
	md5_of("{" VEC_NUM "}", "9fe1b90bbd9965bdf77bac517c7d2495");
	md5_of("{" VEC_BIN "}", "31a92b15d92f8db860eda32aceb656c3");
	/* sorted by name, whatever the order they came in */
	md5_of("{" VEC_STR ", " VEC_NUM ", " VEC_BIN "}", "c932db14a896c663f83c260297d594ff");
	md5_of("{" VEC_BIN ", " VEC_NUM ", " VEC_STR "}", "c932db14a896c663f83c260297d594ff");
	/* no attributes: no MD5 */
	assert_int_equal(sqs_attrs_md5(NULL, out), SD_OK);
	assert_string_equal(out, "");
	o = json_object();
	strcpy(out, "x");
	assert_int_equal(sqs_attrs_md5(o, out), SD_OK);
	assert_string_equal(out, "");
	json_decref(o);
	/* attributes that are not valid get no MD5 */
	o = one("b", "Binary", "BinaryValue", "YQ");
	assert_int_equal(sqs_attrs_md5(o, out), SD_INVALID);
	assert_string_equal(out, "");
	json_decref(o);
	o = one("s", "Text", "StringValue", "x");
	refused_saying(sqs_attrs_md5(o, out), "'s'");
	json_decref(o);
	o = one("nv", "String", NULL, NULL);
	refused_saying(sqs_attrs_md5(o, out), "'nv'");
	json_decref(o);
}

/* ---- against tests/sqs_md5.py ------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

static void rnd_name(char *out, size_t size)
{
	static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
	size_t n = 1 + rnd((unsigned)size - 1 < 24 ? (unsigned)size - 1 : 24), i;

	for (i = 0; i < n; i++) {
		out[i] = alpha[rnd(sizeof alpha - 1)];
		/* a '.' inside, never first, last or doubled */
		if (i > 0 && i + 1 < n && out[i - 1] != '.' && rnd(6) == 0)
			out[i] = '.';
	}
	out[n] = '\0';
}

static void rnd_string(char *out, size_t size)
{
	static const char *const piece[] = {
		"a", "Z", "0", " ", "\t", "\n", "\r", "\"", "\\", "caf\xC3\xA9", "\xE4\xB8\xAD",
		"\xF0\x9F\x8E\xAB", "\xEF\xBF\xBD", "\xEE\x80\x80", "\x7F", "order-42", "{}",
	};
	size_t n = 1 + rnd(12), i;

	out[0] = '\0';
	for (i = 0; i < n && strlen(out) + 8 < size; i++)
		strcat(out, piece[rnd(sizeof piece / sizeof piece[0])]);
}

static void rnd_number(char *out, size_t size)
{
	int len = 0, i, n = 1 + (int)rnd(18);

	if (rnd(3) == 0)
		out[len++] = rnd(2) ? '-' : '+';
	for (i = 0; i < n; i++)
		out[len++] = (char)('0' + rnd(10));
	if (rnd(2)) {
		out[len++] = '.';
		for (i = 0, n = 1 + (int)rnd(15); i < n; i++)
			out[len++] = (char)('0' + rnd(10));
	}
	out[len] = '\0';
	if (rnd(3) == 0)
		snprintf(out + len, size - (size_t)len, "e%s%u", rnd(2) ? "-" : "", rnd(300));
}

static json_t *rnd_attr(void)
{
	static const char *const base[] = { "String", "Number", "Binary" };
	unsigned kind = rnd(3), i;
	char type[32], label[16], value[256], b64[512];
	unsigned char bytes[96];
	size_t n, olen;

	snprintf(type, sizeof type, "%s", base[kind]);
	if (rnd(2)) {
		rnd_name(label, sizeof label);
		strcat(type, ".");
		strcat(type, label);
	}
	if (kind == 2) {
		n = 1 + rnd(sizeof bytes);
		for (i = 0; i < n; i++)
			bytes[i] = (unsigned char)rnd(256);
		assert_int_equal(mbedtls_base64_encode((unsigned char *)b64, sizeof b64, &olen,
						       bytes, n), 0);
		return json_pack("{s:s, s:s}", "DataType", type, "BinaryValue", b64);
	}
	if (kind == 1)
		rnd_number(value, sizeof value);
	else
		rnd_string(value, sizeof value);
	return json_pack("{s:s, s:s}", "DataType", type, "StringValue", value);
}

static json_t *rnd_attrs(void)
{
	json_t *o = json_object();
	unsigned n = 1 + rnd(SQS_MSG_ATTRS_MAX), i;
	char name[32];

	for (i = 0; i < n; i++) {
		rnd_name(name, sizeof name);
		json_object_set_new(o, name, rnd_attr());
	}
	return o;
}

#define RANDOM_SETS 60

/* tests/sqs_md5.py's MD5 and size of each set into md5[] and size[]: the
 * number of lines it gave, -1 when it did not run to a clean exit.  The
 * sets go through a file of their own, removed before anything is checked. */
static int python_md5s(json_t *const *sets, char md5[][64], size_t *size)
{
	char path[] = "/tmp/test_sqs_msg.XXXXXX", cmd[256], line[256];
	int fd = mkstemp(path), i, ok = 1;
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w"), *p;

	if (!f)
		return -1;
	for (i = 0; i < RANDOM_SETS; i++)
		ok &= json_dumpf(sets[i], f, JSON_COMPACT) == 0 && fputc('\n', f) != EOF;
	ok &= fclose(f) == 0;
	snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/sqs_md5.py %s", path);
	p = ok ? popen(cmd, "r") : NULL;
	for (i = 0; p && i < RANDOM_SETS && fgets(line, sizeof line, p); i++)
		if (sscanf(line, "%63s %zu", md5[i], &size[i]) != 2)
			break;
	ok &= p && pclose(p) == 0;
	unlink(path);
	return ok ? i : -1;
}

static void test_md5_matches_python(void **state)
{
	char md5[RANDOM_SETS][SQS_MD5_HEX + 1], py_md5[RANDOM_SETS][64];
	size_t size[RANDOM_SETS], py_size[RANDOM_SETS];
	json_t *sets[RANDOM_SETS];
	int i;

	(void)state;
	for (i = 0; i < RANDOM_SETS; i++) {
		sets[i] = rnd_attrs();
		if (sqs_attrs_valid(sets[i], &size[i]) != SD_OK ||
		    sqs_attrs_md5(sets[i], md5[i]) != SD_OK)
			fail_msg("random set %d refused: %s", i, err_msg());
	}
	if (python_md5s(sets, py_md5, py_size) != RANDOM_SETS)
		fail_msg("/usr/bin/python3 tests/sqs_md5.py failed or gave too few lines");
	for (i = 0; i < RANDOM_SETS; i++)
		if (strcmp(py_md5[i], md5[i]) != 0 || py_size[i] != size[i])
			fail_msg("set %d: C %s %zu, Python %s %zu: %s", i, md5[i], size[i],
				 py_md5[i], py_size[i], json_dumps(sets[i], JSON_COMPACT));
	for (i = 0; i < RANDOM_SETS; i++)
		json_decref(sets[i]);
}

/* ---- MessageAttributeNames ---------------------------------------------------------- */

/* the names picked by the patterns, sorted, joined by ',' */
static void picked(json_t *attrs, const char *names_json, const char *want)
{
	json_t *names = names_json ? parse(names_json) : NULL;
	json_t *out = sqs_attrs_pick(attrs, names), *v;
	const char *keys[16];
	char got[256] = "";
	const char *k;
	size_t n = 0, i;

	assert_non_null(out);
	assert_true(json_is_object(out));
	json_object_foreach(out, k, v) {
		/* the very same value, not a copy of it */
		assert_ptr_equal(v, json_object_get(attrs, k));
		keys[n++] = k;
	}
	for (i = 0; i + 1 < n; i++)	/* few: a bubble sort */
		for (size_t j = 0; j + 1 < n - i; j++)
			if (strcmp(keys[j], keys[j + 1]) > 0) {
				const char *t = keys[j];

				keys[j] = keys[j + 1];
				keys[j + 1] = t;
			}
	for (i = 0; i < n; i++) {
		strcat(got, i ? "," : "");
		strcat(got, keys[i]);
	}
	if (strcmp(got, want) != 0)
		fail_msg("%s picked \"%s\", not \"%s\"", names_json ? names_json : "NULL", got,
			 want);
	json_decref(out);
	json_decref(names);
}

static void test_pick(void **state)
{
	static const char *const names[] = { "a", "a.b", "a.c", "ab", "a.b.c", "b", "B", "x.y" };
	static const char *const all = "B,a,a.b,a.b.c,a.c,ab,b,x.y";
	/* MessageAttributeNames, and the names they pick */
	static const struct {
		const char *names, *want;
	} cases[] = {
		{ "[\"All\"]", all },
		{ "[\".*\"]", all },
		{ "[\"b\", \"All\"]", all },
		{ "[\"a.*\"]", "a.b,a.b.c,a.c" },	/* not "a", not "ab" */
		{ "[\"a.b.*\"]", "a.b.c" },
		{ "[\"x.*\", \"b\"]", "b,x.y" },
		{ "[\"b\"]", "b" },
		{ "[\"B\"]", "B" },			/* case counts */
		{ "[\"a\", \"a\"]", "a" },
		{ "[\"a*\", \"a.\", \"*\", \"c\", \"b.*\"]", "" },
		{ "[5, null, \"ab\", {}]", "ab" },	/* only strings name */
		{ "[]", "" },
		{ NULL, "" },
		{ "{\"All\": 1}", "" },		/* not an array */
	};
	json_t *a = json_object();
	size_t i;

	(void)state;
	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		json_object_set_new(a, names[i], json_pack("{s:s, s:s}", "DataType", "String",
							   "StringValue", names[i]));
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
		picked(a, cases[i].names, cases[i].want);
	picked(NULL, "[\"All\"]", "");
	json_decref(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_body_refused),
		cmocka_unit_test(test_body_accepted),
		cmocka_unit_test(test_attr_names),
		cmocka_unit_test(test_attr_count),
		cmocka_unit_test(test_attr_types),
		cmocka_unit_test(test_attr_values),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_size),
		cmocka_unit_test(test_md5_vectors),
		cmocka_unit_test(test_md5_matches_python),
		cmocka_unit_test(test_pick),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
