/*
 * test_failpoint.c: the $STAGEDOOR_FAILPOINTS grammar and its actions, each
 * run in a forked child (the spec is read once per process).
 */
#define _GNU_SOURCE	/* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "api.h"
#include "backup.h"
#include "failpoint.h"
#include "log.h"
#include "result.h"
#include "testutil.h"

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

/* every failpoint's name, as the code passes them */
static const char *const fp_names[] = {
	FP_RENDER_CHECKED, FP_RENDER_STORED, FP_SEND_CLAIMED, FP_SEND_SENT, FP_COUNT_BEFORE,
	FAILPOINT_JOB_DONE, FP_RELAY_TWICE, FP_WORKER_START, FP_DB_SYNC_OFF, FP_API_ORDER_TX,
	FP_BACKUP_AFTER_DB,
};

/* names_in: how many of fp_names the file at path holds as C strings */
static int names_in(const char *path)
{
	size_t size, i;
	unsigned char *b = tu_slurp(path, &size);
	int n = 0;

	assert_non_null(b);
	for (i = 0; i < sizeof fp_names / sizeof *fp_names; i++)
		n += memmem(b, size, fp_names[i], strlen(fp_names[i]) + 1) != NULL; /* with its NUL */
	free(b);
	return n;
}

/* version_with: exit status of `BIN --version` with $STAGEDOOR_FAILPOINTS spec */
static int version_with(const char *bin, const char *spec)
{
	const char *argv[] = { bin, "--version", NULL };
	int rc;

	setenv("STAGEDOOR_FAILPOINTS", spec, 1);
	rc = tu_exec(argv, NULL, NULL, 10000);
	unsetenv("STAGEDOOR_FAILPOINTS");
	return rc;
}

/* The product binary (bin/stagedoor, what the package ships) holds no
 * failpoint and never reads $STAGEDOOR_FAILPOINTS; the test build (the
 * suites' $STAGEDOOR_BIN) holds every one and refuses a bad spec: the
 * search finds what is there. */
static void the_product_has_no_failpoint(void **s)
{
	const char *product = getenv("STAGEDOOR_PRODUCT_BIN");

	(void)s;
	if (!product || !*product)
		TU_SKIP("STAGEDOOR_PRODUCT_BIN is not set (make test sets it)");
	assert_int_equal(names_in(tu_bin()), (int)(sizeof fp_names / sizeof *fp_names));
	assert_int_equal(version_with(tu_bin(), "after_send_before_mark=boom"), 2);
	assert_int_equal(names_in(product), 0);
	assert_int_equal(version_with(product, "after_send_before_mark=boom"), 0);
	assert_int_equal(version_with(product, "db_synchronous_off=on"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crash_ends_the_process_at_the_first_pass),
		cmocka_unit_test(crash_n_ends_it_at_the_nth_pass_only),
		cmocka_unit_test(on_n_answers_every_nth_pass),
		cmocka_unit_test(unset_means_off),
		cmocka_unit_test(malformed_specs_are_refused),
		cmocka_unit_test(the_product_has_no_failpoint),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
