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
 * Needs root and /dev/fuse, as make test has them; build/powercut is built by
 * make before the suites run.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "testutil.h"
#include "tickets.h"

#define OUT_MAX 8192

static struct {
	struct tu_env *env;
	char back[300], mnt[300], ctl[300], log[300], db[340];
	pid_t pid;
	struct api *api;
	char auth[128];
} F;

static char out[OUT_MAX], err[OUT_MAX];

/* ---- the filesystem ---------------------------------------------------------- */

static const char *powercut_bin(void)
{
	const char *b = getenv("POWERCUT");

	return b && *b ? b : "build/powercut";
}

static void pc_start(void)
{
	struct stat a, b;
	int i;

	if ((F.pid = fork()) < 0)
		fail_msg("fork: %s", strerror(errno));
	if (F.pid == 0) {
		int fd = open(F.log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(powercut_bin(), powercut_bin(), F.back, F.mnt, "-f", "--control", F.ctl,
		      (char *)NULL);
		_exit(127);
	}
	for (i = 0; i < 500; i++) {
		int st;

		if (waitpid(F.pid, &st, WNOHANG) == F.pid) {
			F.pid = 0;
			fail_msg("%s did not mount (root and /dev/fuse needed); see %s",
				 powercut_bin(), F.log);
		}
		if (stat(F.env->dir, &a) == 0 && stat(F.mnt, &b) == 0 && a.st_dev != b.st_dev &&
		    access(F.ctl, F_OK) == 0)
			return;
		tu_sleep_ms(10);
	}
	fail_msg("%s did not mount within 5 s", powercut_bin());
}

static void pc_stop(void)
{
	int st, i;

	umount2(F.mnt, MNT_DETACH);
	if (F.pid <= 0)
		return;
	for (i = 0; i < 300 && waitpid(F.pid, &st, WNOHANG) != F.pid; i++)
		tu_sleep_ms(10);
	if (i == 300) {
		kill(F.pid, SIGKILL);
		waitpid(F.pid, &st, 0);
	}
	F.pid = 0;
}

/* ctl: one control command ("enospc on"); fails the test unless it says ok */
static void ctl(const char *cmd)
{
	char line[400], o[300];
	int rc;

	snprintf(line, sizeof line, "'%s' --ctl '%s' %s", powercut_bin(), F.ctl, cmd);
	snprintf(o, sizeof o, "%s/ctl.out", F.env->dir);
	rc = tu_exec((const char *const[]){ "/bin/sh", "-c", line, NULL }, o, NULL, 10000);
	if (rc != 0)
		fail_msg("powercut %s: exit %d", cmd, rc);
}

/* ---- the box on it ------------------------------------------------------------ */

static int setup(void **state)
{
	char path[400];
	size_t len = 0;
	unsigned char *tok;
	struct api_opts o;

	tu_setup_real_nodb(state);
	memset(&F, 0, sizeof F);
	F.env = *state;
	snprintf(F.back, sizeof F.back, "%s/disk", F.env->dir);
	snprintf(F.mnt, sizeof F.mnt, "%s/mnt", F.env->dir);
	snprintf(F.ctl, sizeof F.ctl, "%s/pc.sock", F.env->dir);
	snprintf(F.log, sizeof F.log, "%s/powercut.log", F.env->dir);
	snprintf(F.db, sizeof F.db, "%s/stagedoor.db", F.mnt);
	assert_int_equal(mkdir(F.back, 0700), 0);
	assert_int_equal(mkdir(F.mnt, 0700), 0);
	pc_start();
	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "init", "--db", F.db, NULL }) != 0)
		fail_msg("init on the mount: %s", err);
	memset(&o, 0, sizeof o);
	o.db_path = F.db;
	o.disk_warn_bytes = 1;
	assert_int_equal(api_open(&o, &F.api), SD_OK);
	assert_int_equal(api_token_path(F.db, NULL, path, sizeof path), SD_OK);
	tok = tu_slurp(path, &len);
	snprintf(F.auth, sizeof F.auth, "Bearer %.*s", (int)len, tok);
	free(tok);
	return 0;
}

static int teardown(void **state)
{
	api_close(F.api);
	F.api = NULL;
	pc_stop();
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

static void integrity_ok(void)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;

	assert_int_equal(sqlite3_open_v2(F.db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "ok");
	sqlite3_finalize(st);
	sqlite3_close(h);
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

	if (tu_run(out, sizeof out, err, sizeof err,
		   (const char *const[]){ "event", "add", "--name", "Gig", "--venue", "Hall",
					  "--starts-at", "2026-12-31T20:00Z", "--capacity", "100",
					  "--db", F.db, NULL }) != 0)
		fail_msg("event add: %s", err);
	snprintf(ev, sizeof ev, "%.*s", (int)strcspn(out, "\n"), out);
	snprintf(body, sizeof body, "{\"event_id\":%s,\"name\":\"Ana Lima\","
		 "\"email\":\"ana@example.com\",\"seats\":2}", ev);
	assert_int_equal(post("/v1/orders", "before", body, NULL, 0), 201);
	before = orders();

	ctl(on);
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
	ctl(off);

	/* nothing of the refused orders was stored, the file is whole, and the
	 * same request now goes through */
	assert_int_equal(orders(), before);
	integrity_ok();
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
	integrity_ok();
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
