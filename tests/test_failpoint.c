/*
 * test_failpoint.c: the $STAGEDOOR_FAILPOINTS grammar and its actions, each
 * run in a forked child (the spec is read once per process).
 */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "failpoint.h"
#include "log.h"
#include "result.h"

/* child: arm spec, pass "fp" passes times (counting failpoint_on answers in
 * the exit status), return the wait status. */
static int run_child(const char *spec, int passes, int use_on)
{
	pid_t pid = fork();
	int st = -1;

	assert_true(pid >= 0);
	if (pid == 0) {
		int i, on = 0;
		setenv("STAGEDOOR_FAILPOINTS", spec, 1);
		log_set_level(LOG_OFF);
		for (i = 0; i < passes; i++) {
			if (use_on)
				on += failpoint_on("fp");
			else
				failpoint("fp");
		}
		_exit(on);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return st;
}

static void crash_ends_the_process_at_the_first_pass(void **s)
{
	int st = run_child("fp=crash", 1, 0);

	(void)s;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 70);
}

static void crash_n_ends_it_at_the_nth_pass_only(void **s)
{
	(void)s;
	assert_int_equal(WEXITSTATUS(run_child("fp=crash:3", 2, 0)), 0);
	assert_int_equal(WEXITSTATUS(run_child("fp=crash:3", 3, 0)), 70);
}

static void on_n_answers_every_nth_pass(void **s)
{
	(void)s;
	assert_int_equal(WEXITSTATUS(run_child("fp=on:4", 20, 1)), 5);
	assert_int_equal(WEXITSTATUS(run_child("fp=on", 7, 1)), 7);
	/* another name armed: this one stays off */
	assert_int_equal(WEXITSTATUS(run_child("other=on,x=crash", 7, 1)), 0);
	assert_int_equal(WEXITSTATUS(run_child("other=crash", 7, 0)), 0);
}

static void unset_means_off(void **s)
{
	(void)s;
	unsetenv("STAGEDOOR_FAILPOINTS");
	assert_int_equal(failpoint_on("fp"), 0);
	failpoint("fp");	/* returns */
}

static void malformed_specs_are_refused(void **s)
{
	(void)s;
	assert_int_equal(failpoint_check_spec("a=crash,b=on:2,c=crash:10"), SD_OK);
	assert_int_equal(failpoint_check_spec("a"), SD_INVALID);
	assert_int_equal(failpoint_check_spec("=crash"), SD_INVALID);
	assert_int_equal(failpoint_check_spec("a=boom"), SD_INVALID);
	assert_int_equal(failpoint_check_spec("a=crash:0"), SD_INVALID);
	assert_int_equal(failpoint_check_spec("a=crash:x"), SD_INVALID);
	assert_int_equal(failpoint_check_spec("a=crashy"), SD_INVALID);
	assert_non_null(strstr(err_msg(), "a"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crash_ends_the_process_at_the_first_pass),
		cmocka_unit_test(crash_n_ends_it_at_the_nth_pass_only),
		cmocka_unit_test(on_n_answers_every_nth_pass),
		cmocka_unit_test(unset_means_off),
		cmocka_unit_test(malformed_specs_are_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
