/*
 * test_diskfull.c: a full disk and a failing disk under a live box, on a
 * real mount: the box on tools/powercut (FUSE), whose ENOSPC and EIO faults
 * are switched on and off at run time through its control socket.
 *
 * What the box promises: an order it cannot store is refused with a clear
 * answer (HTTP 503 with Retry-After; `order add` exit 1 and one line), never
 * a 201 or an exit 0 for an order that is not stored; what was stored stays
 * intact (integrity_check); and once the disk takes writes again the same
 * request succeeds with no operator step (the refused key was not spent).
 *
 * Needs root and /dev/fuse, as make test has them (skipped otherwise);
 * build/powercut is built by make before the suites run.
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
#include <unistd.h>

#include "api.h"
#include "testutil.h"

#define OUT_MAX 8192

static struct {
	struct tu_env *env;
	struct tu_powercut pc;
	char db[340];
	struct api *api;
	char auth[128];
} F;

static char out[OUT_MAX], err[OUT_MAX];

/* ---- the box on the filesystem ------------------------------------------------- */

static int setup(void **state)
{
	tu_setup_real_nodb(state);
	memset(&F, 0, sizeof F);
	F.env = *state;
	return 0;
}

/* box_up: the mount (or a skip), a box on it, and its API in this process */
static void box_up(void)
{
	char path[400];
	size_t len = 0;
	unsigned char *tok;
	struct api_opts o;

	tu_powercut_mount(&F.pc, F.env->dir, NULL);
	snprintf(F.db, sizeof F.db, "%s/stagedoor.db", F.pc.mnt);
	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "init", "--db", F.db, NULL }) != 0)
		fail_msg("init on the mount: %s", err);
	memset(&o, 0, sizeof o);
	o.db_path = F.db;
	o.disk_warn_bytes = 1;
	assert_int_equal(api_open(&o, &F.api), SD_OK);
	assert_int_equal(token_path(F.db, NULL, path, sizeof path), SD_OK);
	tok = tu_slurp(path, &len);
	snprintf(F.auth, sizeof F.auth, "Bearer %.*s", (int)len, tok);
	free(tok);
}

static int teardown(void **state)
{
	api_close(F.api);
	F.api = NULL;
	tu_kill_spawned();
	tu_powercut_unmount(&F.pc);
	return tu_teardown(state);
}

/* post: POST path with body (and key), [out] status and the Retry-After */
static int post(const char *path, const char *key, const char *body, char *retry, size_t rsize)
{
	struct api_request q = { "POST", path, NULL, F.auth, key, "application/json", body,
				 strlen(body) };
	struct api_response res;
	int status;

	memset(&res, 0, sizeof res);
	api_handle(F.api, &q, &res);
	status = res.status;
	if (retry)
		snprintf(retry, rsize, "%s", res.retry_after);
	if (status >= 500 && (!res.body || !strstr(res.body, "\"error\"")))
		fail_msg("a %d without a JSON error: %.*s", status, (int)res.body_len,
			 res.body ? res.body : "");
	api_response_free(&res);
	return status;
}

static int64_t orders(void)
{
	return tu_count(F.db, "SELECT count(*) FROM orders");
}

/* One fault: with it on, an order over the API is 503 with Retry-After and
 * `order add` exits 1 with one line, and nothing is stored; with it off, the
 * same request (same key) is 201, with no restart and no operator step. */
static void fault_refuses_then_resumes(const char *on, const char *off, const char *key,
				       const char *cli_words)
{
	char body[256], retry[16], ev[32];
	int64_t before;
	int rc;

	box_up();
	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "event", "add", "--name", "Gig", "--venue", "Hall",
					  "--starts-at", "2036-12-31T20:00Z", "--capacity", "100",
					  "--db", F.db, NULL }) != 0)
		fail_msg("event add: %s", err);
	snprintf(ev, sizeof ev, "%.*s", (int)strcspn(out, "\n"), out);
	snprintf(body, sizeof body, "{\"event_id\":%s,\"name\":\"Ana Lima\","
		 "\"email\":\"ana@example.com\",\"seats\":2}", ev);
	assert_int_equal(post("/v1/orders", "before", body, NULL, 0), 201);
	before = orders();

	tu_powercut_ctl(&F.pc, on, NULL, 0);
	rc = post("/v1/orders", key, body, retry, sizeof retry);
	if (rc != 503 || !*retry)
		fail_msg("with '%s': POST /v1/orders answered %d (Retry-After '%s'), want 503",
			 on, rc, retry);
	rc = tu_run(out, sizeof out, err, sizeof err,
		    (const char *const[]){ "order", "add", "--event", ev, "--name", "Ana Lima",
					   "--email", "ana@example.com", "--seats", "1", "--db",
					   F.db, NULL });
	if (rc != 1 || strncmp(err, "stagedoor: ", 11) != 0 || strchr(err, '\n') != err +
	    strlen(err) - 1 || !strstr(err, cli_words) || out[0])
		fail_msg("with '%s': order add exit %d, stdout '%s', stderr '%s'", on, rc, out, err);
	tu_powercut_ctl(&F.pc, off, NULL, 0);

	/* nothing of the refused orders was stored, the file is whole, and the
	 * same request now goes through */
	assert_int_equal(orders(), before);
	tu_integrity_ok(F.db);
	rc = post("/v1/orders", key, body, NULL, 0);
	if (rc != 201)
		fail_msg("after '%s': the same order answered %d, want 201", off, rc);
	assert_int_equal(orders(), before + 1);
	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "order", "add", "--event", ev, "--name", "Ana Lima",
					  "--email", "ana@example.com", "--seats", "1", "--db",
					  F.db, NULL }) != 0)
		fail_msg("after '%s': order add: %s", off, err);
	assert_int_equal(orders(), before + 2);
	tu_integrity_ok(F.db);
}

static void test_full_disk_refuses_orders_and_resumes(void **state)
{
	(void)state;
	fault_refuses_then_resumes("enospc on", "enospc off", "k-full", "the disk is full");
}

static void test_failing_disk_refuses_orders_and_resumes(void **state)
{
	(void)state;
	fault_refuses_then_resumes("eio on", "eio off", "k-eio", "I/O error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_full_disk_refuses_orders_and_resumes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failing_disk_refuses_orders_and_resumes, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
