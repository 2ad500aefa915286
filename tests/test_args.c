/*
 * test_args.c: option parsing for the command line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "args.h"
#include "testutil.h"

static void test_values_flags_and_positionals(void **state)
{
	const char *db = NULL;
	int64_t n = 7;
	int drain = 0, npos = 0;
	struct arg_opt opts[] = {
		{ "db", ARG_STR, &db, 0, 0, 0 },
		{ "batch", ARG_INT, &n, 1, 100, 0 },
		{ "drain", ARG_FLAG, &drain, 0, 0, 0 },
		{ NULL, 0, NULL, 0, 0, 0 },
	};
	char *argv[] = { "noop", "--db", "x.db", "--batch=42", "--drain", "{}" };
	char *pos[ARGS_MAX_POS];

	(void)state;
	assert_int_equal(args_parse(6, argv, opts, pos, &npos), SD_OK);
	assert_string_equal(db, "x.db");
	assert_int_equal(n, 42);
	assert_int_equal(drain, 1);
	assert_int_equal(npos, 2);
	assert_string_equal(pos[0], "noop");
	assert_string_equal(pos[1], "{}");
}

static void test_bad_numbers_and_unknown_options(void **state)
{
	int64_t n = 0;
	int npos;
	struct arg_opt opts[] = {
		{ "batch", ARG_INT, &n, 1, 100, 0 },
		{ NULL, 0, NULL, 0, 0, 0 },
	};
	char *pos[ARGS_MAX_POS];
	char *a1[] = { "--batch", "12x" };
	char *a2[] = { "--batch", "0" };
	char *a3[] = { "--bogus" };
	char *a4[] = { "--batch" };

	(void)state;
	assert_int_equal(args_parse(2, a1, opts, pos, &npos), SD_INVALID);
	assert_non_null(strstr(err_msg(), "--batch"));
	assert_int_equal(args_parse(2, a2, opts, pos, &npos), SD_INVALID);
	assert_non_null(strstr(err_msg(), "between 1 and 100"));
	assert_int_equal(args_parse(1, a3, opts, pos, &npos), SD_INVALID);
	assert_non_null(strstr(err_msg(), "unknown option --bogus"));
	assert_int_equal(args_parse(1, a4, opts, pos, &npos), SD_INVALID);
	assert_non_null(strstr(err_msg(), "needs a value"));
	assert_int_equal(n, 0);
}

static void test_double_dash_ends_options(void **state)
{
	int drain = 0, npos;
	struct arg_opt opts[] = {
		{ "drain", ARG_FLAG, &drain, 0, 0, 0 },
		{ NULL, 0, NULL, 0, 0, 0 },
	};
	char *argv[] = { "--", "--drain" };
	char *pos[ARGS_MAX_POS];

	(void)state;
	assert_int_equal(args_parse(2, argv, opts, pos, &npos), SD_OK);
	assert_int_equal(drain, 0);
	assert_int_equal(npos, 1);
	assert_string_equal(pos[0], "--drain");
}

/* --help is asked for where an option may stand, not as another option's
 * value or after "--" */
static void test_help_is_asked_where_an_option_stands(void **state)
{
	const char *name = NULL;
	int json = 0;
	struct arg_opt opts[] = {
		{ "name", ARG_STR, &name, 0, 0, 0, "NAME", "a name", 0 },
		{ "json", ARG_FLAG, &json, 0, 0, 0, NULL, "JSON", 0 },
		ARG_END,
	};
	char *a1[] = { "add", "--help" }, *a2[] = { "-h" }, *a3[] = { "--name", "--help" };
	char *a4[] = { "--", "--help" }, *a5[] = { "--json", "--help" };
	char *a6[] = { "--name=--help", "x" }, *a7[] = { "--helper" };

	(void)state;
	assert_int_equal(args_wants_help(2, a1, opts), 1);
	assert_int_equal(args_wants_help(1, a2, opts), 1);
	assert_int_equal(args_wants_help(2, a3, opts), 0);	/* the name is "--help" */
	assert_int_equal(args_wants_help(2, a4, opts), 0);
	assert_int_equal(args_wants_help(2, a5, opts), 1);	/* a flag takes no value */
	assert_int_equal(args_wants_help(2, a6, opts), 0);
	assert_int_equal(args_wants_help(1, a7, opts), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_values_flags_and_positionals),
		cmocka_unit_test(test_bad_numbers_and_unknown_options),
		cmocka_unit_test(test_double_dash_ends_options),
		cmocka_unit_test(test_help_is_asked_where_an_option_stands),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
