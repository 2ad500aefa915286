/*
 * test_bench_api.c: `stagedoor-bench api` as `make bench` and a reader of its
 * JSON use it: the real binary, a small run, the figures' shape (never their
 * size: the machine is shared), its temporary folder gone or kept, and bad
 * options refused with the usage.
 *
 * Each test points $TMPDIR at its own temp directory for the child, so the
 * benchmark's folder is the only thing that can appear there.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

#define OUT_MAX (64 * 1024)

static char out[OUT_MAX], err[OUT_MAX];

/* bench_run: `stagedoor-bench api ARGS...` with $TMPDIR = e->dir; the test
 * process's own TMPDIR is put back after (the next test's setup uses it). */
static int bench_run(const struct tu_env *e, const char *const *argv)
{
	const char *old = getenv("TMPDIR");
	char *keep = old ? strdup(old) : NULL;
	int rc;

	setenv("TMPDIR", e->dir, 1);
	rc = tu_run(out, sizeof out, err, sizeof err, argv);
	if (keep)
		setenv("TMPDIR", keep, 1);
	else
		unsetenv("TMPDIR");
	free(keep);
	return rc;
}

#define BENCH(e, ...) bench_run(e, (const char *const[]){ "bench", "api", __VA_ARGS__, NULL })

static double jnum(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_number(v))
		fail_msg("no number at %s in %s", key, out);
	return json_number_value(v);
}

/* the_folder: the one entry of e->dir (the benchmark's folder) into path. */
static void the_folder(const struct tu_env *e, char *path, size_t size)
{
	DIR *d = opendir(e->dir);
	struct dirent *de;

	assert_non_null(d);
	path[0] = '\0';
	while ((de = readdir(d)))
		if (strncmp(de->d_name, "stagedoor-bench.", 16) == 0)
			snprintf(path, size, "%s/%s", e->dir, de->d_name);
	closedir(d);
	if (!path[0])
		fail_msg("no stagedoor-bench.* folder in %s", e->dir);
}

/* 50 orders, their replays and reads over 3 connections: one JSON line whose
 * counts are exact and whose figures are ordered; the folder is gone. */
static void test_json_run(void **state)
{
	static const char *const phases[] = { "orders", "replays", "reads", "stats", "scans" };
	struct tu_env *e = *state;
	json_error_t je;
	json_t *j, *ph;
	size_t i;
	int rc;

	rc = BENCH(e, "--requests", "50", "--clients", "3", "--json");
	if (rc != 0)
		fail_msg("bench api: exit %d\nstderr:\n%s", rc, err);
	assert_non_null(strchr(out, '\n'));
	assert_int_equal(strchr(out, '\n')[1], '\0');		/* one line */
	if (!(j = json_loads(out, 0, &je)))
		fail_msg("not JSON (%s): %s", je.text, out);
	assert_string_equal(json_string_value(json_object_get(j, "bench")), "api");
	assert_true(jnum(j, "requests") == 50);
	assert_true(jnum(j, "clients") == 3);
	assert_true(jnum(j, "orders") == 50);			/* replays wrote nothing */
	assert_true(jnum(j, "replays_matched") == 50);		/* byte for byte */
	assert_true(jnum(j, "seats") == 99);			/* 1, 2, 3, 1, ... seats */
	assert_true(jnum(j, "orders_per_s") > 0);
	assert_true(jnum(j, "peak_rss_kb") > 0);
	assert_true(jnum(j, "wal_bytes") > 0);			/* the orders went through the WAL */
	assert_non_null(ph = json_object_get(j, "phases"));
	for (i = 0; i < sizeof phases / sizeof phases[0]; i++) {
		json_t *p = json_object_get(ph, phases[i]);

		if (!p)
			fail_msg("no phase %s in %s", phases[i], out);
		assert_true(jnum(p, "s") > 0);
		assert_true(jnum(p, "requests_per_s") > 0);
		assert_true(jnum(p, "p50_ms") > 0);
		assert_true(jnum(p, "p50_ms") <= jnum(p, "p90_ms"));
		assert_true(jnum(p, "p90_ms") <= jnum(p, "p99_ms"));
	}
	assert_true(jnum(j, "orders_per_s") == jnum(json_object_get(ph, "orders"),
						     "requests_per_s"));
	json_decref(j);
	/* progress on stderr, one line a phase begins */
	for (i = 0; i < sizeof phases / sizeof phases[0]; i++) {
		char line[64];

		snprintf(line, sizeof line, "bench: %s: 50 requests over 3 keep-alive", phases[i]);
		if (!strstr(err, line))
			fail_msg("no '%s' in stderr:\n%s", line, err);
	}
	assert_int_equal(tu_count_files(e->dir), 0);		/* the folder is removed */
}

/* --keep: the folder stays, made as `init` makes one, with exactly the orders
 * and client keys the run sent; the human report names every phase. */
static void test_keep_and_report(void **state)
{
	struct tu_env *e = *state;
	char dir[PATH_MAX], f[PATH_MAX + 32], line[64];
	struct stat sb;
	int rc;

	rc = BENCH(e, "--requests", "7", "--clients", "2", "--keep");
	if (rc != 0)
		fail_msg("bench api --keep: exit %d\nstderr:\n%s", rc, err);
	assert_int_equal(tu_count_files(e->dir), 1);
	the_folder(e, dir, sizeof dir);
	assert_true(snprintf(line, sizeof line, "bench: kept %s", dir) < (int)sizeof line);
	assert_non_null(strstr(err, line));
	snprintf(f, sizeof f, "%s/stagedoor.db", dir);
	assert_int_equal(stat(f, &sb), 0);
	assert_int_equal(tu_count(f, "SELECT count(*) FROM orders"), 7);
	assert_int_equal(tu_count(f, "SELECT count(*) FROM api_keys"), 7);
	assert_int_equal(tu_count(f, "SELECT count(*) FROM events"), 1);
	snprintf(f, sizeof f, "%s/api.token", dir);
	assert_int_equal(stat(f, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);

	assert_non_null(strstr(out, "stagedoor-bench api: 7 requests a phase, 2 keep-alive "
				    "clients"));
	assert_non_null(strstr(out, "\n  orders "));
	assert_non_null(strstr(out, "\n  replays "));
	assert_non_null(strstr(out, "\n  reads "));
	assert_non_null(strstr(out, "\n  stats "));
	assert_non_null(strstr(out, "\n  scans "));
	assert_non_null(strstr(out, "7 in the database (13 seats); 7 of 7 replays answered"));
}

/* Bad options: exit 2, one line naming the fault and the usage, nothing on
 * stdout, no folder made. */
static void test_bad_options(void **state)
{
	static const char *const bad[][3] = {
		{ "--requests", "0", NULL },
		{ "--requests", "lots", NULL },
		{ "--clients", "0", NULL },
		{ "--clients", "65", NULL },
		{ "--bogus", NULL, NULL },
		{ "--requests", NULL, NULL },
		{ "extra", NULL, NULL },
	};
	struct tu_env *e = *state;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int rc = bench_run(e, (const char *const[]){ "bench", "api", bad[i][0], bad[i][1],
							     NULL });

		if (rc != 2 || strncmp(err, "stagedoor-bench: ", 17) != 0 || out[0] ||
		    !strstr(err, "usage: stagedoor-bench api [--requests N] [--clients C]") ||
		    strchr(err, '\n') != err + strlen(err) - 1)
			fail_msg("bench api %s %s: want exit 2 and one line with the usage; got "
				 "rc=%d stdout='%s' stderr='%s'", bad[i][0], bad[i][1] ? bad[i][1] : "",
				 rc, out, err);
	}
	assert_int_equal(tu_count_files(e->dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_json_run, tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_keep_and_report, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_bad_options, tu_setup_real_nodb, tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
