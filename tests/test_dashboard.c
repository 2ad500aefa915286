/*
 * test_dashboard.c: the operator page against the real box.  `stagedoor run`
 * ($STAGEDOOR_BIN) with its HTTP child on a free port, three orders worked
 * through and one dead job, then tests/browser/dashboard.mjs drives the page
 * in headless chromium (playwright-core from tests/browser/node_modules):
 * token, numbers against /v1/stats, lists against /v1/jobs and /v1/orders,
 * door scan, retry, the charts against their endpoints, the box office
 * (search, detail, resend, cancel), phone width, screenshots.
 *
 * The test runs from the repository root (make runs tools/run_tests.sh
 * there).  It keeps the screenshots as build/test-output/dashboard.png and
 * dashboard-phone.png (dashboard-san*.png under the sanitizer build's
 * binary).
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "code.h"
#include "testutil.h"
#include "text.h"
#include "token.h"

#define OUT_MAX (16 * 1024)
#define NODE_MODULES "tests/browser/node_modules/playwright-core"
#define SCRIPT "tests/browser/dashboard.mjs"
#define ROLES_SCRIPT "tests/browser/roles.mjs"
#define DOOR_SCRIPT "tests/browser/door.mjs"
#define VENUE_SCRIPT "tests/browser/venue.mjs"
#define CAMERA_SCRIPT "tests/browser/make_camera.sh"
#define OUT_DIR "build/test-output"

/* Generous: the sanitizer build and a shared two-core machine are slow. */
#define START_MS 60000
#define JOBS_MS 120000
#define BROWSER_MS 300000
#define BROWSER_STEP_MS "60000"

static char out[OUT_MAX], err[OUT_MAX];

#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })

static int setup(void **state)
{
	unsetenv("STAGEDOOR_FAILPOINTS");
	unsetenv("STAGEDOOR_CONFIG");
	unsetenv("STAGEDOOR_HTTP_LISTEN");
	setenv("STAGEDOOR_LOG_LEVEL", "info", 1);
	return tu_setup_real_nodb(state);
}

static int teardown(void **state)
{
	unsetenv("STAGEDOOR_LOG_LEVEL");
	return tu_teardown(state);
}

/* the file at path, or "(none)"; the caller frees. */
static char *text_of(const char *path)
{
	size_t size;

	if (access(path, F_OK) != 0)
		return strdup("(none)");
	return (char *)tu_slurp(path, &size);
}

/* wait_log: until the log at path holds needle; [out] line (may be NULL):
 * the rest of the first line that holds it. */
static void wait_log(const char *path, const char *needle, int timeout_ms, char *line,
		     size_t size)
{
	int waited;

	for (waited = 0; waited < timeout_ms; waited += 50) {
		char *text = access(path, F_OK) == 0 ? text_of(path) : NULL, *p;
		if (text && (p = strstr(text, needle))) {
			if (line)
				snprintf(line, size, "%.*s", (int)strcspn(p, "\n"), p);
			free(text);
			return;
		}
		free(text);
		tu_sleep_ms(50);
	}
	{
		char *text = text_of(path);
		tu_fail_free(text, NULL, "waited %d ms for '%s' in the log:\n%s", timeout_ms, needle,
			     text);
	}
}

/* wait_sql: until the SQL's single integer equals want. */
static void wait_sql(const char *db, int64_t want, int timeout_ms, const char *sql)
{
	int waited;
	int64_t got = -1;

	for (waited = 0; waited < timeout_ms; waited += 50) {
		if ((got = tu_count(db, sql)) == want)
			return;
		tu_sleep_ms(50);
	}
	fail_msg("waited %d ms for %s = %lld; it is %lld", timeout_ms, sql, (long long)want,
		 (long long)got);
}

/* node: run `node argv...` with its output in log_path; its exit status,
 * or -1 when it died by a signal.  Killed (and the test failed) past
 * timeout_ms. */
static int node(const char *const *argv, const char *log_path, int timeout_ms)
{
	pid_t pid;
	int st = 0, waited;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		setenv("DASHBOARD_TIMEOUT_MS", BROWSER_STEP_MS, 1);
		execvp("node", (char *const *)argv);
		fprintf(stderr, "exec node: %s\n", strerror(errno));
		_exit(127);
	}
	for (waited = 0; waited < timeout_ms; waited += 100) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		tu_sleep_ms(100);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	{
		char *text = text_of(log_path);
		tu_fail_free(text, NULL, "node %s ran past %d ms:\n%s", argv[1], timeout_ms, text);
	}
	return -1;
}

static void copy_file(const char *from, const char *to)
{
	size_t size = 0;
	unsigned char *data = tu_slurp(from, &size);
	FILE *f = fopen(to, "wb");

	if (!f)
		tu_fail_free(data, NULL, "cannot write %s: %s", to, strerror(errno));
	assert_int_equal(fwrite(data, 1, size, f), size);
	assert_int_equal(fclose(f), 0);
	free(data);
}

/* codes_of: the ticket codes an order's PDF carries (pdftotext), in page
 * order, into codes[0..max); how many */
static int codes_of(const struct tu_env *e, const char *id, char codes[][CODE_TEXT_MAX], int max)
{
	char pdf[512], txt[512], *text, *line, *save = NULL;
	size_t size;
	int n = 0;

	snprintf(pdf, sizeof pdf, "%s/%s.pdf", e->dir, id);
	snprintf(txt, sizeof txt, "%s/%s.txt", e->dir, id);
	if (RUN("order", "pdf", id, "--out", pdf, "--db", e->db_path) != 0)
		fail_msg("order pdf: %s", err);
	assert_int_equal(tu_exec((const char *const[]){ "pdftotext", "-enc", "UTF-8", pdf, txt,
						       NULL }, NULL, NULL, 20000), 0);
	text = (char *)tu_slurp(txt, &size);
	for (line = strtok_r(text, "\n", &save); line && n < max;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t len = strspn(line, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567");

		if (len == 52 && (!line[len] || line[len] == ' ' || line[len] == '\r'))
			snprintf(codes[n++], CODE_TEXT_MAX, "%.52s", line);
	}
	free(text);
	return n;
}

/* tonight: "YYYY-MM-DDTHH:MMZ" an hour from now (the doors are open) */
static void tonight(char *buf, size_t size)
{
	time_t t = time(NULL) + 3600;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%MZ", &tm);
}

/* keep_shot: the screenshot at path as OUT_DIR/name, with -san (ASan) or
 * -pg (on PostgreSQL) before the ".png" */
static void keep_shot(const char *path, const char *name)
{
	char keep[160];
	size_t n = strlen(name) - 4;
	const char *tag = strstr(tu_bin(), "/san/") ? "-san" : tu_pg() ? "-pg" : "";

	if (mkdir("build", 0755) != 0 && errno != EEXIST)
		fail_msg("mkdir build: %s", strerror(errno));
	if (mkdir(OUT_DIR, 0755) != 0 && errno != EEXIST)
		fail_msg("mkdir %s: %s", OUT_DIR, strerror(errno));
	snprintf(keep, sizeof keep, "%s/%.*s%s.png", OUT_DIR, (int)n, name, tag);
	copy_file(path, keep);
}

/* roles_in_a_browser: the page as a box office's, a door's (bound to event
 * ev) and a monitor's token see it (tests/browser/roles.mjs). */
static void roles_in_a_browser(const struct tu_env *e, const char *url, const char *ev,
			       const char *log)
{
	static const char *const roles[] = { "box_office", "door", "monitor" };
	char nlog[512], shot[512], token[TOKEN_HEX + 1];
	size_t i;
	int rc;

	for (i = 0; i < sizeof roles / sizeof roles[0]; i++) {
		int door = strcmp(roles[i], "door") == 0;

		if (RUN("token", "add", "--role", roles[i], "--name", roles[i], "--db", e->db_path,
			door ? "--event" : NULL, ev, NULL) != 0)
			fail_msg("token add --role %s: %s", roles[i], err);
		assert_true(strlen(out) > TOKEN_HEX && out[TOKEN_HEX] == '\n');
		snprintf(token, sizeof token, "%.*s", TOKEN_HEX, out);
		snprintf(nlog, sizeof nlog, "%s/roles-%s.log", e->dir, roles[i]);
		snprintf(shot, sizeof shot, "%s/roles-%s.png", e->dir, roles[i]);
		rc = node((const char *const[]){ "node", ROLES_SCRIPT, url, token, roles[i], shot,
						 NULL }, nlog, BROWSER_MS);
		if (rc != 0) {
			char *text = text_of(nlog), *rlog = text_of(log);
			tu_fail_free(text, rlog, "node %s %s exited %d:\n%s\n--- run.log:\n%s",
				     ROLES_SCRIPT, roles[i], rc, text, rlog);
		}
	}
}

static void test_dashboard_in_a_browser(void **state)
{
	const struct tu_env *e = *state;
	char log[512], nlog[512], shot[512], phone[512], tokpath[512], url[64], line[256], ev[32];
	char starts[32], admitted[32], codes[2][CODE_TEXT_MAX];
	char token[128];
	const char *p;
	unsigned char *png, *tok;
	size_t size = 0;
	pid_t run;
	int port = 0, i, rc;

	if (access(NODE_MODULES, F_OK) != 0)
		fail_msg("%s is missing (cwd must be the repository root): run `make deps` "
			 "(npm ci in tests/browser) first", NODE_MODULES);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	snprintf(nlog, sizeof nlog, "%s/browser.log", e->dir);
	snprintf(shot, sizeof shot, "%s/dashboard.png", e->dir);
	snprintf(phone, sizeof phone, "%s/dashboard-phone.png", e->dir);
	snprintf(tokpath, sizeof tokpath, "%s/api.token", e->dir);

	/* a Berlin box with an event, three orders and a job that dies; an
	 * event tonight with an order whose first ticket was admitted; a winter
	 * and a summer show */
	setenv("STAGEDOOR_TIMEZONE", "Europe/Berlin", 1);
	assert_int_equal(RUN("init", "--db", e->db_path), 0);
	tonight(starts, sizeof starts);
	assert_int_equal(RUN("event", "add", "--name", "Tonight's Trio", "--venue", "Club",
			     "--starts-at", starts, "--capacity", "40", "--db", e->db_path), 0);
	assert_int_equal(RUN("event", "add", "--name", "Summer Night", "--venue", "Garden",
			     "--starts-at", "2036-07-04T18:00Z", "--capacity", "50", "--db",
			     e->db_path), 0);
	assert_int_equal(RUN("event", "add", "--name", "Winter Night", "--venue", "Hall",
			     "--starts-at", "2036-12-04T19:00Z", "--capacity", "50", "--db",
			     e->db_path), 0);
	if (RUN("order", "add", "--event", "1", "--name", "Ida Early", "--email",
		"ida@example.org", "--seats", "2", "--db", e->db_path) != 0)
		fail_msg("order add: %s", err);
	snprintf(admitted, sizeof admitted, "%.*s", (int)strcspn(out, "\n"), out);
	assert_int_equal(RUN("event", "add", "--name", "Midnight Quartet", "--venue", "Hall",
			     "--starts-at", "2036-12-31T20:00Z", "--capacity", "10", "--db",
			     e->db_path), 0);
	snprintf(ev, sizeof ev, "%.*s", (int)strcspn(out, "\n"), out);
	for (i = 1; i <= 3; i++) {
		char seats[8];
		snprintf(seats, sizeof seats, "%d", i);
		if (RUN("order", "add", "--event", ev, "--name", "Ada Lovelace", "--email",
			"ada@example.org", "--seats", seats, "--db", e->db_path) != 0)
			fail_msg("order add: %s", err);
	}
	assert_int_equal(RUN("enqueue", "fail", "{\"times\":100}", "--db", e->db_path), 0);

	/* the relay publishes each batch's first row twice: second runs for the
	 * handlers to absorb, and for the page to count.  A second send that
	 * meets the first one's claim looks again once the claim would be
	 * stale: the send lease, short here (the mail goes to a maildir) */
	setenv("STAGEDOOR_FAILPOINTS", "relay_publish_twice=on", 1);
	run = tu_spawn((const char *const[]){ "run", "--db", e->db_path, "--workers", "1",
					      "--http-listen", "127.0.0.1:0", "--max-attempts",
					      "1", "--lease-ms", "5000", "--mail-timeout-ms", "1000",
					      NULL }, log);
	unsetenv("STAGEDOOR_FAILPOINTS");
	wait_log(log, "msg=\"http listening\" listen=", START_MS, line, sizeof line);
	if (!(p = strstr(line, " port=")) || (port = atoi(p + 6)) <= 0)
		fail_msg("no port in: %s", line);
	/* every order's three jobs done (some twice), the failing one dead */
	wait_sql(e->db_path, 12, JOBS_MS, "SELECT count(DISTINCT job_id) FROM done_jobs");
	wait_sql(e->db_path, 1, JOBS_MS, "SELECT count(*) FROM dead_jobs");
	wait_sql(e->db_path, 0, JOBS_MS, "SELECT count(*) FROM stream");
	assert_true(tu_count(e->db_path, "SELECT count(*) FROM done_jobs") > 12);
	assert_int_equal(codes_of(e, admitted, codes, 2), 2);
	if (RUN("scan", codes[0], "--db", e->db_path) != 0)
		fail_msg("scan: %s %s", out, err);

	tok = tu_slurp(tokpath, &size);
	snprintf(token, sizeof token, "%.*s", (int)strcspn((char *)tok, "\r\n"), (char *)tok);
	free(tok);
	assert_true(strlen(token) > 0);
	snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
	rc = node((const char *const[]){ "node", SCRIPT, url, token, shot, NULL }, nlog, BROWSER_MS);
	if (rc != 0) {
		char *text = text_of(nlog), *rlog = text_of(log);
		tu_fail_free(text, rlog, "node %s exited %d:\n%s\n--- run.log:\n%s", SCRIPT, rc, text,
			     rlog);
	}

	/* the screenshot is a PNG; keep a copy as test output */
	png = tu_slurp(shot, &size);
	assert_true(size > 8);
	assert_memory_equal(png, "\x89PNG\r\n\x1a\n", 8);
	free(png);
	keep_shot(shot, "dashboard.png");
	keep_shot(phone, "dashboard-phone.png");

	roles_in_a_browser(e, url, ev, log);

	/* the venue's work: events set up and closed, sales at the window, the
	 * night on a phone (tests/browser/venue.mjs) */
	snprintf(nlog, sizeof nlog, "%s/venue.log", e->dir);
	snprintf(shot, sizeof shot, "%s/venue.png", e->dir);
	snprintf(phone, sizeof phone, "%s/venue-phone.png", e->dir);
	setenv("VENUE_FIXED_TIMES", "1", 1);	/* the winter and the summer show */
	rc = node((const char *const[]){ "node", VENUE_SCRIPT, url, token, shot, NULL }, nlog,
		  BROWSER_MS);
	unsetenv("VENUE_FIXED_TIMES");
	if (rc != 0) {
		char *text = text_of(nlog), *rlog = text_of(log);
		tu_fail_free(text, rlog, "node %s exited %d:\n%s\n--- run.log:\n%s", VENUE_SCRIPT,
			     rc, text, rlog);
	}
	keep_shot(shot, "venue.png");
	keep_shot(phone, "venue-phone.png");
	/* what the page did is the box's: one window sale per key, the closed
	 * event sold nothing after it closed, every check holds */
	assert_true(tu_count(e->db_path, "SELECT count(*) FROM orders WHERE payment = 'card'") >= 1);
	assert_true(tu_count(e->db_path, "SELECT count(*) FROM orders WHERE payment = 'cash' AND "
			     "buyer_email IS NULL") >= 1);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM orders o JOIN events v ON "
				  "v.id = o.event_id WHERE o.created_at > v.closed_at"), 0);
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 60000, "run"), 0);
	unsetenv("STAGEDOOR_TIMEZONE");
}

/*
 * The door page on the real box: a phone's camera (chromium's fake capture
 * playing a video made from the order's own PDF) reads the ticket's QR code
 * and the page shows ADMITTED, then ALREADY SCANNED with the door's name
 * (tests/browser/door.mjs, which also retries a scan whose answer was lost,
 * with its nonce).  The box's scan log holds every scan by the door token's
 * name, and the ticket was admitted once.
 */
static void test_door_with_a_fake_camera(void **state)
{
	const struct tu_env *e = *state;
	char log[512], nlog[512], shot[512], idle[512], pdf[512], cam[512], url[64], line[256];
	char ev[32], id[32], starts[32], token[TOKEN_HEX + 1];
	char codes[2][CODE_TEXT_MAX];
	const char *p;
	time_t t = time(NULL) + 3600;	/* tonight: the doors are open */
	struct tm tm;
	pid_t run;
	int port = 0, rc;

	if (access(NODE_MODULES, F_OK) != 0)
		fail_msg("%s is missing: run `make deps` first", NODE_MODULES);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	snprintf(nlog, sizeof nlog, "%s/door.log", e->dir);
	snprintf(shot, sizeof shot, "%s/door.png", e->dir);
	snprintf(idle, sizeof idle, "%s/door-idle.png", e->dir);
	snprintf(pdf, sizeof pdf, "%s/ticket.pdf", e->dir);
	snprintf(cam, sizeof cam, "%s/camera.y4m", e->dir);
	gmtime_r(&t, &tm);
	strftime(starts, sizeof starts, "%Y-%m-%dT%H:%MZ", &tm);

	assert_int_equal(RUN("init", "--db", e->db_path), 0);
	assert_int_equal(RUN("event", "add", "--name", "Door Night", "--venue", "Club",
			     "--starts-at", starts, "--capacity", "10", "--db", e->db_path), 0);
	snprintf(ev, sizeof ev, "%.*s", (int)strcspn(out, "\n"), out);
	if (RUN("order", "add", "--event", ev, "--name", "Ada Lovelace", "--email",
		"ada@example.org", "--seats", "2", "--db", e->db_path) != 0)
		fail_msg("order add: %s", err);
	snprintf(id, sizeof id, "%.*s", (int)strcspn(out, "\n"), out);
	run = tu_spawn((const char *const[]){ "run", "--db", e->db_path, "--workers", "1",
					      "--http-listen", "127.0.0.1:0", NULL }, log);
	wait_log(log, "msg=\"http listening\" listen=", START_MS, line, sizeof line);
	if (!(p = strstr(line, " port=")) || (port = atoi(p + 6)) <= 0)
		fail_msg("no port in: %s", line);
	wait_sql(e->db_path, 3, JOBS_MS, "SELECT count(DISTINCT job_id) FROM done_jobs");

	/* the video a phone's camera would see, from the order's own PDF */
	if (RUN("order", "pdf", id, "--out", pdf, "--db", e->db_path) != 0)
		fail_msg("order pdf: %s", err);
	{
		const char *argv[] = { "sh", CAMERA_SCRIPT, pdf, cam, NULL };
		char mlog[600];

		snprintf(mlog, sizeof mlog, "%s/camera.log", e->dir);
		if (tu_exec(argv, mlog, mlog, 120000) != 0) {
			char *text = text_of(mlog);
			tu_fail_free(text, NULL, "make_camera.sh failed:\n%s", text);
		}
	}
	if (RUN("token", "add", "--role", "door", "--name", "North door", "--event", ev, "--db",
		e->db_path) != 0)
		fail_msg("token add: %s", err);
	snprintf(token, sizeof token, "%.*s", TOKEN_HEX, out);

	snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
	/* the second ticket's code, typed by hand in lower case */
	assert_int_equal(codes_of(e, id, codes, 2), 2);
	rc = node((const char *const[]){ "node", DOOR_SCRIPT, url, token, cam, shot, codes[1],
					 NULL }, nlog, BROWSER_MS);
	if (rc != 0) {
		char *text = text_of(nlog), *rlog = text_of(log);
		tu_fail_free(text, rlog, "node %s exited %d:\n%s\n--- run.log:\n%s", DOOR_SCRIPT, rc,
			     text, rlog);
	}
	/* what the box recorded: one admission, by the door's name, and the
	 * refusals after it */
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM tickets WHERE scanned_at IS NOT "
				  "NULL AND scanned_by = 'North door'"), 2);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM scans WHERE outcome = "
				  "'admitted' AND device = 'North door'"), 2);
	assert_true(tu_count(e->db_path, "SELECT count(*) FROM scans WHERE outcome = "
			     "'already_scanned' AND device = 'North door'") >= 2);
	keep_shot(shot, "door.png");
	keep_shot(idle, "door-idle.png");
	kill(run, SIGTERM);
	assert_int_equal(tu_reap(run, 60000, "run"), 0);
}

/* The QR decoder the door page embeds (src/door/vendor/jsQR.js) is, byte
 * for byte, the one src/door/package-lock.json pins: tools/check_vendor.sh
 * fetches that package with npm ci and compares. */
static void test_qr_decoder_is_the_pinned_one(void **state)
{
	const struct tu_env *e = *state;
	const char *argv[] = { "sh", "tools/check_vendor.sh", NULL };
	char log[512];

	snprintf(log, sizeof log, "%s/check_vendor.log", e->dir);
	if (tu_exec(argv, log, log, 300000) != 0) {
		char *text = text_of(log);
		tu_fail_free(text, NULL, "tools/check_vendor.sh failed:\n%s", text);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_dashboard_in_a_browser, setup, teardown),
		cmocka_unit_test_setup_teardown(test_door_with_a_fake_camera, setup, teardown),
		cmocka_unit_test_setup_teardown(test_qr_decoder_is_the_pinned_one, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
