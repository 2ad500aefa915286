/*
 * test_text.c: the one check on text that enters the box (text.h): strict
 * UTF-8 (RFC 3629), no controls, no bidi overrides; and the escaping that
 * lets a read path show any stored value instead of failing on it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "result.h"
#include "text.h"

#define OK(s) assert_int_equal(text_check("name", (s), 200), SD_OK)
#define BAD(s, why) \
	do { \
		assert_int_equal(text_check("name", (s), 200), SD_INVALID); \
		if (!strstr(err_msg(), (why))) \
			fail_msg("'%s' does not say '%s'", err_msg(), (why)); \
	} while (0)

static void test_well_formed_text_passes(void **state)
{
	(void)state;
	OK("Ana Lima");
	OK("Jos\xc3\xa9 M\xc3\xbcller");			/* é ü: two bytes */
	OK("\xe6\x9d\xb1\xe4\xba\xac");				/* 東京: three */
	OK("\xf0\x9f\x8e\xb5 Night");				/* U+1F3B5: four */
	OK("\xf4\x8f\xbf\xbf");					/* U+10FFFF, the last */
	OK("\xed\x9f\xbf");					/* U+D7FF, before the surrogates */
	OK("\xee\x80\x80");					/* U+E000, after them */
	OK("\xe2\x80\x8f");					/* U+200F RLM: a mark, allowed */
	OK("\xc2\xa0");						/* U+00A0, after the C1 block */
	assert_true(text_utf8_valid(""));
}

static void test_malformed_utf8_is_refused_with_its_offset(void **state)
{
	(void)state;
	BAD("Ana \xed\xa0\x80", "not valid UTF-8 (byte 4)");	/* surrogate U+D800 */
	BAD("\xed\xbf\xbf", "not valid UTF-8 (byte 0)");	/* surrogate U+DFFF */
	BAD("a\xe0\x80\xaf", "not valid UTF-8 (byte 1)");	/* overlong '/' */
	BAD("\xc0\xaf", "not valid UTF-8");			/* overlong, two bytes */
	BAD("\xf0\x80\x80\xaf", "not valid UTF-8");		/* overlong, four bytes */
	BAD("\xf4\x90\x80\x80", "not valid UTF-8");		/* U+110000 */
	BAD("\xf5\x80\x80\x80", "not valid UTF-8");		/* F5 never starts one */
	BAD("\x80", "not valid UTF-8");				/* a lone continuation */
	BAD("Jos\xe9", "not valid UTF-8 (byte 3)");		/* Latin-1 */
	BAD("ab\xe6\x9d", "not valid UTF-8 (byte 2)");		/* cut short at the end */
	BAD("\xe6\x9dx", "not valid UTF-8");			/* cut short by ASCII */
	assert_false(text_utf8_valid("\xed\xa0\x80"));
	assert_false(text_utf8_valid("\xe0\x80\xaf"));
	assert_false(text_utf8_valid("\xf4\x90\x80\x80"));
}

static void test_controls_and_bidi_overrides_are_refused(void **state)
{
	(void)state;
	BAD("Ana\nLima", "control character");
	BAD("Ana\tLima", "control character (CR, LF, tab ...) at byte 3");
	BAD("Ana\x7f", "control character");
	BAD("Ana \xc2\x85", "control character (CR, LF, tab ...) at byte 4");	/* C1 NEL */
	BAD("\xc2\x9f", "control character");			/* the last C1 */
	BAD("Ana \xe2\x80\xae", "bidirectional override (U+202E) at byte 4");
	BAD("\xe2\x80\xaa", "U+202A");
	BAD("\xe2\x81\xa6", "U+2066");				/* isolates too */
	BAD("\xe2\x81\xa9", "U+2069");
	BAD("", "is empty");
	assert_int_equal(text_check("name", NULL, 200), SD_INVALID);
	assert_int_equal(text_check("name", "abcd", 3), SD_INVALID);
	assert_non_null(strstr(err_msg(), "longer than 3 bytes"));
	assert_int_equal(text_check("name", "abc", 3), SD_OK);
	/* the message names the field, never the value */
	assert_int_equal(text_check("buyer name", "secret\x01", 200), SD_INVALID);
	assert_non_null(strstr(err_msg(), "buyer name"));
	assert_null(strstr(err_msg(), "secret"));
}

static void test_escape_makes_any_value_pass(void **state)
{
	static const char *const cases[][2] = {
		{ "Ana Lima", "Ana Lima" },
		{ "Jos\xc3\xa9", "Jos\xc3\xa9" },
		{ "Ana \xed\xa0\x80", "Ana \\xED\\xA0\\x80" },
		{ "\xe0\x80\xaf", "\\xE0\\x80\\xAF" },
		{ "\xf4\x90\x80\x80!", "\\xF4\\x90\\x80\\x80!" },
		{ "A\nB", "A\\x0AB" },
		{ "\xc2\x85", "\\u{0085}" },
		{ "x\xe2\x80\xaey", "x\\u{202E}y" },
		{ "ab\xe6\x9d", "ab\\xE6\\x9D" },
		{ "", "" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char *e = text_escape(cases[i][0]);

		assert_non_null(e);
		assert_string_equal(e, cases[i][1]);
		if (*e)
			assert_int_equal(text_check("x", e, 4096), SD_OK);
		free(e);
	}
}

static void test_copy_cuts_at_a_boundary(void **state)
{
	char buf[8];

	(void)state;
	/* "é" is 2 bytes: 3 of them need 7 bytes with the NUL; a 6-byte buffer
	 * takes two, never half of the third */
	assert_int_equal(text_copy(buf, 6, "\xc3\xa9\xc3\xa9\xc3\xa9"), 4);
	assert_string_equal(buf, "\xc3\xa9\xc3\xa9");
	assert_true(text_utf8_valid(buf));
	/* an escape is never cut either: "\xED" is 4 bytes */
	assert_int_equal(text_copy(buf, 7, "ab\xed\xa0\x80"), 6);
	assert_string_equal(buf, "ab\\xED");
	assert_int_equal(text_copy(buf, 6, "ab\xed\xa0\x80"), 2);
	assert_string_equal(buf, "ab");
	assert_int_equal(text_copy(buf, sizeof buf, NULL), 0);
	assert_string_equal(buf, "");
	assert_int_equal(text_copy(buf, sizeof buf, "Gig"), 3);
	assert_string_equal(buf, "Gig");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_well_formed_text_passes),
		cmocka_unit_test(test_malformed_utf8_is_refused_with_its_offset),
		cmocka_unit_test(test_controls_and_bidi_overrides_are_refused),
		cmocka_unit_test(test_escape_makes_any_value_pass),
		cmocka_unit_test(test_copy_cuts_at_a_boundary),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
