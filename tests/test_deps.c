/*
 * test_deps.c: what the test set takes from outside Debian runs on Debian
 * 12's own packages, and the scripts that install it and report the suites
 * refuse or count what they must.
 *
 * - tests/browser's lock file pins exact versions whose "engines" accept
 *   Debian 12's Node.js 18 (a machine with a newer node cannot see a pin
 *   that needs one: this test can);
 * - tools/npm_deps.sh fails at install time, naming node, for a package
 *   whose engines the node here does not satisfy, and installs (once) one
 *   that it does: both from local file: packages, no registry;
 * - tools/run_tests.sh prints a failing program's log on its own lines and
 *   closes on "BUILD: N passed, N failed, N skipped", each skipped test named
 *   with its reason; --report counts a suite that did
 *   not build as a failure and sums the suites.
 *
 * Runs from the repository root (make does), as every suite does.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define DEBIAN12_NODE_MAJOR 18	/* nodejs 18.x in bookworm */
#define LOCK "tests/browser/package-lock.json"
#define MANIFEST "tests/browser/package.json"

/* ---- helpers ---------------------------------------------------------------- */

static void write_file(const char *dir, const char *name, const char *text, mode_t mode)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	if (!(f = fopen(path, "w")))
		fail_msg("cannot write %s", path);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

static void make_dir(const char *dir, const char *name, char *path, size_t size)
{
	snprintf(path, size, "%s/%s", dir, name);
	assert_int_equal(mkdir(path, 0755), 0);
}

/* repo_path: the absolute path of a file of this checkout. */
static void repo_path(const char *rel, char *out)
{
	if (!realpath(rel, out))
		fail_msg("%s not found (cwd must be the repository root)", rel);
}

/* sh_in: `sh -c LINE` in dir with $1..$3 = a, b, c; stdout and stderr
 * slurped into *out and *err (caller frees).  Returns the exit status. */
static int sh_in(const char *dir, const char *line, const char *a, const char *b,
		 char **out, char **err)
{
	char outp[PATH_MAX], errp[PATH_MAX], script[2048];
	size_t size;
	int rc;

	snprintf(outp, sizeof outp, "%s/sh.out", dir);
	snprintf(errp, sizeof errp, "%s/sh.err", dir);
	assert_true(snprintf(script, sizeof script, "cd \"$0\" && %s", line) < (int)sizeof script);
	rc = tu_exec((const char *const[]){ "/bin/sh", "-c", script, dir, a ? a : "", b ? b : "",
					    NULL },
		     outp, errp, 120000);
	*out = (char *)tu_slurp(outp, &size);
	*err = (char *)tu_slurp(errp, &size);
	return rc;
}

/* node_major_ok: does the "engines"."node" range accept Node 18?  Only
 * ">=N" (with optional .x.y) is judged; any other form fails the test, so a
 * pin with a range nobody checked cannot slip through. */
static int node_range_accepts(const char *range, int major)
{
	const char *p = range;
	long n;
	char *end;

	while (*p == ' ')
		p++;
	if (strncmp(p, ">=", 2) != 0)
		fail_msg("cannot judge the engines range '%s': only >=N is checked here", range);
	n = strtol(p + 2, &end, 10);
	if (end == p + 2 || (*end && *end != '.' && *end != ' '))
		fail_msg("cannot judge the engines range '%s'", range);
	return n <= major;
}

/* ---- the pins --------------------------------------------------------------- */

static void test_browser_pins_run_on_debian12_node(void **state)
{
	json_error_t je;
	json_t *lock = json_load_file(LOCK, 0, &je), *man = json_load_file(MANIFEST, 0, &je);
	json_t *pkgs, *deps, *v;
	const char *name;
	int judged = 0;

	(void)state;
	if (!lock || !man)
		fail_msg("cannot read %s or %s: %s", LOCK, MANIFEST, je.text);
	pkgs = json_object_get(lock, "packages");
	deps = json_object_get(man, "dependencies");
	assert_true(json_is_object(pkgs));
	assert_true(json_is_object(deps));
	/* every dependency pinned to one exact version, the lock's */
	json_object_foreach(deps, name, v) {
		char key[256];
		const char *want = json_string_value(v), *got;

		assert_non_null(want);
		assert_true(strspn(want, "0123456789.") == strlen(want));
		snprintf(key, sizeof key, "node_modules/%s", name);
		got = json_string_value(json_object_get(json_object_get(pkgs, key), "version"));
		if (!got || strcmp(got, want) != 0)
			fail_msg("%s pins %s %s, the lock has %s", MANIFEST, name, want,
				 got ? got : "nothing");
	}
	/* and every locked package runs on Debian 12's node */
	json_object_foreach(pkgs, name, v) {
		const char *range = json_string_value(json_object_get(json_object_get(v, "engines"),
								      "node"));
		if (!*name || !range)
			continue;
		judged++;
		if (!node_range_accepts(range, DEBIAN12_NODE_MAJOR))
			fail_msg("%s needs node %s: Debian 12 has node %d", name, range,
				 DEBIAN12_NODE_MAJOR);
	}
	assert_true(judged >= 1);	/* playwright-core states its engines */
	assert_true(node_range_accepts(">=18", 18));
	assert_false(node_range_accepts(">=20", 18));
	json_decref(lock);
	json_decref(man);
}

/* A local app whose one dependency (a file: package) states engines.node. */
static void make_app(const char *dir, const char *engines, char *app, size_t size)
{
	char dep[PATH_MAX], json[512], *out, *err;
	int rc;

	make_dir(dir, "dep", dep, sizeof dep);
	snprintf(json, sizeof json,
		 "{\"name\":\"local-dep\",\"version\":\"1.0.0\",\"engines\":{\"node\":\"%s\"}}\n",
		 engines);
	write_file(dep, "package.json", json, 0644);
	make_dir(dir, "app", app, size);
	write_file(app, "package.json",
		   "{\"name\":\"app\",\"version\":\"1.0.0\","
		   "\"dependencies\":{\"local-dep\":\"file:../dep\"}}\n", 0644);
	rc = sh_in(app, "npm install --package-lock-only --no-audit --no-fund >/dev/null", NULL,
		   NULL, &out, &err);
	if (rc != 0)
		tu_fail_free(out, err, "npm install --package-lock-only: exit %d\n%s%s", rc, out,
			     err);
	free(out);
	free(err);
}

static void test_npm_deps_refuses_a_pin_this_node_cannot_run(void **state)
{
	struct tu_env *e = *state;
	char app[PATH_MAX], script[PATH_MAX], stamp[PATH_MAX + 40], *out, *err;
	int rc;

	repo_path("tools/npm_deps.sh", script);
	make_app(e->dir, ">=999", app, sizeof app);
	rc = sh_in(e->dir, "sh \"$1\" \"$2\"", script, app, &out, &err);
	if (rc == 0 || !strstr(err, "EBADENGINE") || !strstr(err, "does not run on node v"))
		tu_fail_free(out, err, "npm_deps.sh on a >=999 pin: exit %d\n%s%s", rc, out, err);
	snprintf(stamp, sizeof stamp, "%s/node_modules/.lock-installed", app);
	assert_int_equal(access(stamp, F_OK), -1);
	free(out);
	free(err);
}

static void test_npm_deps_installs_a_runnable_pin_once(void **state)
{
	struct tu_env *e = *state;
	char app[PATH_MAX], script[PATH_MAX], stamp[PATH_MAX + 40], *out, *err;
	int rc;

	repo_path("tools/npm_deps.sh", script);
	make_app(e->dir, ">=18", app, sizeof app);
	rc = sh_in(e->dir, "sh \"$1\" \"$2\"", script, app, &out, &err);
	if (rc != 0 || !strstr(out, "deps: npm ci in "))
		tu_fail_free(out, err, "npm_deps.sh on a >=18 pin: exit %d\n%s%s", rc, out, err);
	free(out);
	free(err);
	snprintf(stamp, sizeof stamp, "%s/node_modules/.lock-installed", app);
	assert_int_equal(access(stamp, F_OK), 0);
	/* the second time: nothing to do, nothing said */
	rc = sh_in(e->dir, "sh \"$1\" \"$2\"", script, app, &out, &err);
	if (rc != 0 || *out || *err)
		tu_fail_free(out, err, "npm_deps.sh again: exit %d\n%s%s", rc, out, err);
	free(out);
	free(err);
}

/* ---- the test runner's report ---------------------------------------------- */

static void test_run_tests_shows_a_failing_log_and_counts(void **state)
{
	struct tu_env *e = *state;
	char script[PATH_MAX], good[PATH_MAX + 8], bad[PATH_MAX + 8], line[2 * PATH_MAX + 64];
	char result[PATH_MAX], *out, *err, *text;
	size_t size;
	int rc;

	repo_path("tools/run_tests.sh", script);
	snprintf(good, sizeof good, "%s/t_good", e->dir);
	snprintf(bad, sizeof bad, "%s/t_bad", e->dir);
	/* a cmocka program with one test skipped by TU_SKIP: its reason, then
	 * the skip in the run and again in the summary */
	write_file(e->dir, "t_good",
		   "#!/bin/sh\necho '[ RUN      ] t_fine'\necho '[       OK ] t_fine'\n"
		   "echo '[ RUN      ] t_needs_pg'\necho '# skipped: needs PostgreSQL'\n"
		   "echo '[  SKIPPED ] t_needs_pg'\necho '[  PASSED  ] 3 test(s).'\n"
		   "echo '[  SKIPPED ] 1 test(s), listed below:'\necho '[  SKIPPED ] t_needs_pg'\n",
		   0755);
	write_file(e->dir, "t_bad",
		   "#!/bin/sh\necho 'the reason it broke'\necho '[  PASSED  ] 1 test(s).'\n"
		   "echo '[  FAILED  ] 2 test(s), listed below:'\nexit 2\n", 0755);
	snprintf(line, sizeof line, "sh \"$1\" demo /bin/true \"$2\" %s", good);
	rc = sh_in(e->dir, line, script, bad, &out, &err);
	if (rc == 0 || !strstr(out, "FAIL  demo t_bad") || !strstr(out, "ok    demo t_good") ||
	    !strstr(out, "\n---- demo t_bad: its log") || !strstr(out, "\nthe reason it broke\n") ||
	    !strstr(out, "\n---- end of demo t_bad ----\n") ||
	    !strstr(out, "\n  skip  demo t_good t_needs_pg: needs PostgreSQL\n") ||
	    strstr(out, "t_needs_pg: needs PostgreSQL\n  skip") ||
	    !strstr(out, "\ndemo: 4 passed, 2 failed, 1 skipped\n"))
		tu_fail_free(out, err, "run_tests.sh: exit %d\n%s%s", rc, out, err);
	/* the passing program's log is kept, not printed */
	if (strstr(out, "[  PASSED  ] 3"))
		tu_fail_free(out, err, "a passing log was printed:\n%s", out);
	free(out);
	free(err);
	snprintf(result, sizeof result, "%s/build/test-output/demo.result", e->dir);
	text = (char *)tu_slurp(result, &size);
	assert_string_equal(text, "demo: 4 passed, 2 failed, 1 skipped\n");
	free(text);
	snprintf(result, sizeof result, "%s/build/test-output/demo/t_good.log", e->dir);
	text = (char *)tu_slurp(result, &size);
	assert_non_null(strstr(text, "[  PASSED  ] 3 test(s)."));
	free(text);
}

static void test_report_counts_a_suite_that_did_not_build(void **state)
{
	struct tu_env *e = *state;
	char script[PATH_MAX], dir[PATH_MAX], *out, *err;
	int rc;

	repo_path("tools/run_tests.sh", script);
	make_dir(e->dir, "build", dir, sizeof dir);
	make_dir(e->dir, "build/test-output", dir, sizeof dir);
	write_file(dir, "rel.result", "rel: 7 passed, 0 failed, 2 skipped\n", 0644);
	rc = sh_in(e->dir, "sh \"$1\" --report rel san", script, NULL, &out, &err);
	if (rc == 0 || !strstr(out, "\nrel: 7 passed, 0 failed, 2 skipped\n") ||
	    !strstr(out, "\nsan: the build failed before its tests ran\n"
			 "san: 0 passed, 1 failed, 0 skipped\n") ||
	    strcmp(out + strlen(out) - strlen("\ntest: 7 passed, 1 failed, 2 skipped\n"),
		   "\ntest: 7 passed, 1 failed, 2 skipped\n") != 0)
		tu_fail_free(out, err, "--report: exit %d\n%s%s", rc, out, err);
	free(out);
	free(err);
	/* both suites there and green: exit 0, the sum last */
	write_file(dir, "san.result", "san: 5 passed, 0 failed, 1 skipped\n", 0644);
	rc = sh_in(e->dir, "sh \"$1\" --report rel san", script, NULL, &out, &err);
	if (rc != 0 || !strstr(out, "\ntest: 12 passed, 0 failed, 3 skipped\n"))
		tu_fail_free(out, err, "--report: exit %d\n%s%s", rc, out, err);
	free(out);
	free(err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_browser_pins_run_on_debian12_node),
		cmocka_unit_test_setup_teardown(test_npm_deps_refuses_a_pin_this_node_cannot_run,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_npm_deps_installs_a_runnable_pin_once,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_run_tests_shows_a_failing_log_and_counts,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_report_counts_a_suite_that_did_not_build,
						tu_setup_real_nodb, tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
