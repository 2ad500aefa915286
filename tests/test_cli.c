/*
 * test_cli.c: the command line as other tools script against it.
 *
 * Every test runs the real binary ($STAGEDOOR_BIN) as a child process on a
 * fresh database in its own temp directory, and checks exit status, stdout,
 * stderr and the rows in the file.  The test process fills the database
 * through the library when that is quicker, on the real clock (the binary
 * has no fake clock).
 *
 * What the CLI promises here: exit 0 on success, non-zero on failure with one
 * line "stagedoor: ..." on stderr, nothing on stdout, nothing written.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "db.h"
#include "outbox.h"
#include "queue.h"
#include "testutil.h"

#define OUT_MAX (256 * 1024)

static char out[OUT_MAX], err[OUT_MAX];

/* RUN("jobs", "stats", ...): run the binary, stdout in out, stderr in err. */
#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })

/* ---- small helpers -------------------------------------------------------- */


static int file_exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

static int n_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		if (*s == '\n')
			n++;
	return n;
}

/* The failure contract: non-zero, one line "stagedoor: ...", no stdout. */
static void assert_one_line_error(int rc, const char *what)
{
	if (rc == 0 || strncmp(err, "stagedoor: ", 11) != 0 || n_lines(err) != 1 || out[0])
		fail_msg("%s: want non-zero exit and one line 'stagedoor: ...' on stderr, "
			 "nothing on stdout; got rc=%d stdout='%s' stderr='%s'", what, rc, out, err);
}

static json_t *parse_json(const char *s)
{
	json_error_t je;
	json_t *j = json_loads(s, 0, &je);

	if (!j)
		fail_msg("not JSON (%s): %s", je.text, s);
	return j;
}

static int64_t jint(json_t *obj, const char *a, const char *b)
{
	json_t *v = json_object_get(obj, a);

	if (v && b)
		v = json_object_get(v, b);
	if (!json_is_integer(v))
		fail_msg("no integer at %s.%s", a, b ? b : "");
	return (int64_t)json_integer_value(v);
}

static const char *jstr(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Enqueue through the library (real clock), job_id chosen by the test. */
static void put(const struct tu_env *e, const char *kind, const char *payload, const char *job_id,
		int64_t delay_ms, int64_t priority)
{
	struct enqueue q = { kind, payload, job_id, delay_ms, priority };

	assert_int_equal(queue_enqueue(e->db, &q, NULL), SD_OK);
}

/* ========================= init and the database path ===================== */

static void test_init_creates_and_again_keeps_data(void **state)
{
	struct tu_env *e = *state;
	int rc;

	assert_false(file_exists(e->db_path));
	rc = RUN("init", "--db", e->db_path);
	assert_int_equal(rc, 0);
	assert_true(file_exists(e->db_path));
	assert_non_null(strstr(out, "schema version"));
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 0);

	assert_int_equal(RUN("enqueue", "noop", "{}", "--job-id", "keep-me", "--db", e->db_path), 0);
	rc = RUN("init", "--db", e->db_path);
	assert_int_equal(rc, 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE job_id = 'keep-me'"), 1);
	assert_int_equal(tu_countf(e->db_path, "PRAGMA user_version"), db_migration_count);
}

static void test_db_from_flag_and_env(void **state)
{
	struct tu_env *e = *state;
	char other[400];

	snprintf(other, sizeof other, "%s/other.db", e->dir);

	/* the environment variable chooses the file when --db is absent */
	assert_int_equal(setenv("STAGEDOOR_DB", e->db_path, 1), 0);
	assert_int_equal(RUN("init"), 0);
	assert_true(file_exists(e->db_path));
	assert_int_equal(RUN("enqueue", "noop", "{}", "--job-id", "via-env"), 0);
	assert_string_equal(out, "via-env\n");
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE job_id = 'via-env'"), 1);
	assert_int_equal(RUN("jobs", "ls", "--json"), 0);
	assert_non_null(strstr(out, "\"via-env\""));

	/* --db wins over the environment */
	assert_int_equal(RUN("init", "--db", other), 0);
	assert_true(file_exists(other));
	assert_int_equal(RUN("enqueue", "noop", "{}", "--job-id", "via-flag", "--db", other), 0);
	assert_int_equal(tu_count(other, "SELECT count(*) FROM stream WHERE job_id = 'via-flag'"), 1);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE job_id = 'via-flag'"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 1);

	/* the environment points at a missing file: refused, nothing created */
	snprintf(other, sizeof other, "%s/missing.db", e->dir);
	assert_int_equal(setenv("STAGEDOOR_DB", other, 1), 0);
	assert_one_line_error(RUN("enqueue", "noop", "{}"), "enqueue to a missing $STAGEDOOR_DB");
	assert_false(file_exists(other));
}

/* ========================= enqueue ======================================== */

static void test_enqueue_prints_job_id(void **state)
{
	struct tu_env *e = *state;
	char id[256];
	size_t len;

	assert_int_equal(RUN("enqueue", "noop", "{\"a\": 1}", "--db", e->db_path), 0);
	len = strlen(out);
	assert_true(len > 1 && len < sizeof id);
	assert_int_equal(out[len - 1], '\n');
	assert_int_equal(n_lines(out), 1);
	memcpy(id, out, len - 1);
	id[len - 1] = '\0';
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE job_id = '%s' AND kind = 'noop' "
			      "AND payload ->> 'a' = 1", id), 1);

	/* --job-id is kept as given */
	assert_int_equal(RUN("enqueue", "sleep", "{\"ms\":1}", "--job-id", "order-42:render",
			     "--db", e->db_path), 0);
	assert_string_equal(out, "order-42:render\n");
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE job_id = 'order-42:render' "
			      "AND kind = 'sleep'"), 1);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 2);
}

static void test_enqueue_delay_is_scheduled(void **state)
{
	struct tu_env *e = *state;
	json_t *j;

	assert_int_equal(RUN("enqueue", "noop", "{}", "--delay-ms", "60000", "--db", e->db_path), 0);
	assert_int_equal(RUN("enqueue", "noop", "{}", "--db", e->db_path), 0);
	assert_int_equal(RUN("jobs", "stats", "--json", "--db", e->db_path), 0);
	j = parse_json(out);
	assert_int_equal(jint(json_object_get(j, "total"), "scheduled", NULL), 1);
	assert_int_equal(jint(json_object_get(j, "total"), "ready", NULL), 1);
	assert_int_equal(jint(json_object_get(j, "kinds"), "noop", "scheduled"), 1);
	assert_int_equal(jint(json_object_get(j, "kinds"), "noop", "ready"), 1);
	json_decref(j);
}

static void test_enqueue_bad_input_fails_and_writes_nothing(void **state)
{
	struct tu_env *e = *state;
	char missing[400];
	const char *p = e->db_path;

	assert_one_line_error(RUN("enqueue", "noop", "{bad", "--db", p), "payload {bad");
	assert_one_line_error(RUN("enqueue", "noop", "[1]", "--db", p), "payload [1]");
	assert_one_line_error(RUN("enqueue", "noop", "", "--db", p), "empty payload");
	assert_one_line_error(RUN("enqueue", "Bad", "{}", "--db", p), "kind Bad");
	assert_one_line_error(RUN("enqueue", "has space", "{}", "--db", p), "kind with a space");
	assert_one_line_error(RUN("enqueue", "noop", "{}", "--delay-ms", "x", "--db", p),
			      "--delay-ms x");
	assert_one_line_error(RUN("enqueue", "noop", "{}", "--delay-ms", "-5", "--db", p),
			      "--delay-ms -5");
	assert_one_line_error(RUN("enqueue", "noop", "{}", "--bogus", "--db", p), "--bogus");
	assert_one_line_error(RUN("enqueue", "noop", "{}", "--job-id", "a b", "--db", p),
			      "job id with a space");
	assert_one_line_error(RUN("enqueue", "noop", "{}", "--job-id", "outbox:5", "--db", p),
			      "job id posing as an outbox row's");
	assert_one_line_error(RUN("enqueue", "noop", "--db", p), "missing payload");
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM outbox"), 0);

	/* no init: refused, and the file is not created */
	snprintf(missing, sizeof missing, "%s/nothere.db", e->dir);
	assert_one_line_error(RUN("enqueue", "noop", "{}", "--db", missing), "missing database");
	assert_non_null(strstr(err, "init"));
	assert_false(file_exists(missing));
	assert_one_line_error(RUN("jobs", "stats", "--db", missing), "jobs stats, missing database");
	assert_one_line_error(RUN("worker", "--drain", "--db", missing), "worker, missing database");
	assert_one_line_error(RUN("relay", "--drain", "--db", missing), "relay, missing database");
	assert_false(file_exists(missing));
}

/* ========================= jobs ============================================ */

/*
 * A stream with every state:
 *   a-done   alpha  done (claimed, acked)
 *   b-dead   beta   dead, last error "boom: out of ink"
 *   c-lease  beta   leased for a minute
 *   d-ready, e-ready alpha ready
 *   f-sched  gamma  scheduled a minute on
 */
static void fill_every_state(struct tu_env *e)
{
	struct job *j[1];
	int n, dead = 0;

	put(e, "alpha", "{}", "a-done", 0, -3);
	put(e, "beta", "{\"x\":1}", "b-dead", 0, -2);
	put(e, "beta", "{}", "c-lease", 0, -1);
	put(e, "alpha", "{}", "d-ready", 0, 0);
	put(e, "alpha", "{}", "e-ready", 0, 0);
	put(e, "gamma", "{}", "f-sched", 60000, 0);

	assert_int_equal(queue_claim(e->db, "t", 1, 60000, j, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_string_equal(j[0]->job_id, "a-done");
	assert_int_equal(queue_ack(e->db, j[0]->id, j[0]->lease_token), SD_OK);
	job_free(j[0]);

	assert_int_equal(queue_claim(e->db, "t", 1, 60000, j, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_string_equal(j[0]->job_id, "b-dead");
	assert_int_equal(queue_fail(e->db, j[0], "boom: out of ink", 1, &dead), SD_OK);
	assert_int_equal(dead, 1);
	job_free(j[0]);

	assert_int_equal(queue_claim(e->db, "t", 1, 60000, j, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_string_equal(j[0]->job_id, "c-lease");
	job_free(j[0]);
}

static void test_jobs_stats_by_state_and_kind(void **state)
{
	struct tu_env *e = *state;
	json_t *j, *t, *k;

	fill_every_state(e);
	assert_int_equal(RUN("jobs", "stats", "--json", "--db", e->db_path), 0);
	j = parse_json(out);
	t = json_object_get(j, "total");
	k = json_object_get(j, "kinds");
	assert_int_equal(jint(t, "ready", NULL), 2);
	assert_int_equal(jint(t, "scheduled", NULL), 1);
	assert_int_equal(jint(t, "leased", NULL), 1);
	assert_int_equal(jint(t, "dead", NULL), 1);
	assert_int_equal(jint(t, "done", NULL), 1);
	assert_int_equal(json_object_size(k), 3);
	assert_int_equal(jint(k, "alpha", "ready"), 2);
	assert_int_equal(jint(k, "alpha", "done"), 1);
	assert_int_equal(jint(k, "alpha", "leased") + jint(k, "alpha", "dead") +
			 jint(k, "alpha", "scheduled"), 0);
	assert_int_equal(jint(k, "beta", "dead"), 1);
	assert_int_equal(jint(k, "beta", "leased"), 1);
	assert_int_equal(jint(k, "beta", "ready") + jint(k, "beta", "done") +
			 jint(k, "beta", "scheduled"), 0);
	assert_int_equal(jint(k, "gamma", "scheduled"), 1);
	assert_int_equal(jint(k, "gamma", "ready") + jint(k, "gamma", "done") +
			 jint(k, "gamma", "leased") + jint(k, "gamma", "dead"), 0);
	json_decref(j);

	/* the table form has a total line too */
	assert_int_equal(RUN("jobs", "stats", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "(total)"));
}

/* `jobs ls ...` as JSON: the job_ids in order, comma-separated; each row must
 * have the state and (when given) kind asked for. */
static void ls_ids(const struct tu_env *e, const char *st, const char *kind, char *ids,
		   size_t size)
{
	const char *argv[12];
	size_t i, n = 0;
	json_t *j, *row;
	int a = 0, rc;

	argv[a++] = "jobs";
	argv[a++] = "ls";
	if (st) {
		argv[a++] = "--state";
		argv[a++] = st;
	}
	if (kind) {
		argv[a++] = "--kind";
		argv[a++] = kind;
	}
	argv[a++] = "--json";
	argv[a++] = "--db";
	argv[a++] = e->db_path;
	argv[a] = NULL;
	rc = tu_run(out, sizeof out, err, sizeof err, argv);
	if (rc != 0)
		fail_msg("jobs ls --state %s --kind %s: rc=%d %s", st, kind, rc, err);
	j = parse_json(out);
	assert_true(json_is_array(j));
	ids[0] = '\0';
	json_array_foreach(j, i, row) {
		const char *s = jstr(row, "state"), *k = jstr(row, "kind"), *id = jstr(row, "job_id");
		assert_non_null(s);
		assert_non_null(k);
		assert_non_null(id);
		if (st)
			assert_string_equal(s, st);
		if (kind)
			assert_string_equal(k, kind);
		n += (size_t)snprintf(ids + n, size - n, "%s%s", n ? "," : "", id);
		assert_true(n < size);
	}
	json_decref(j);
}

static void test_jobs_ls_filters(void **state)
{
	struct tu_env *e = *state;
	char ids[1024];

	fill_every_state(e);
	ls_ids(e, "ready", "alpha", ids, sizeof ids);
	assert_string_equal(ids, "d-ready,e-ready");
	ls_ids(e, "ready", "beta", ids, sizeof ids);
	assert_string_equal(ids, "");
	ls_ids(e, "leased", NULL, ids, sizeof ids);
	assert_string_equal(ids, "c-lease");
	ls_ids(e, "scheduled", NULL, ids, sizeof ids);
	assert_string_equal(ids, "f-sched");
	ls_ids(e, "scheduled", "alpha", ids, sizeof ids);
	assert_string_equal(ids, "");
	ls_ids(e, "dead", NULL, ids, sizeof ids);
	assert_string_equal(ids, "b-dead");
	ls_ids(e, "done", "alpha", ids, sizeof ids);
	assert_string_equal(ids, "a-done");
	ls_ids(e, "done", "beta", ids, sizeof ids);
	assert_string_equal(ids, "");
	ls_ids(e, NULL, "beta", ids, sizeof ids);	/* no state: the stream's entries */
	assert_string_equal(ids, "c-lease");
	ls_ids(e, NULL, NULL, ids, sizeof ids);
	assert_string_equal(ids, "c-lease,d-ready,e-ready,f-sched");

	assert_one_line_error(RUN("jobs", "ls", "--state", "nosuch", "--db", e->db_path),
			      "jobs ls --state nosuch");
	assert_one_line_error(RUN("jobs", "ls", "--kind", "Bad Kind", "--db", e->db_path),
			      "jobs ls --kind 'Bad Kind'");
}

/* A failing `jobs ls --json` must not print a JSON document: a script that
 * reads stdout would take "[]" for "no such jobs". */
static void test_jobs_ls_json_failure_prints_nothing(void **state)
{
	struct tu_env *e = *state;

	fill_every_state(e);
	assert_one_line_error(RUN("jobs", "ls", "--state", "nosuch", "--json", "--db", e->db_path),
			      "jobs ls --state nosuch --json");
}

static void test_jobs_dead_retry_and_purge(void **state)
{
	struct tu_env *e = *state;
	json_t *j, *row;

	fill_every_state(e);
	assert_int_equal(RUN("jobs", "dead", "--json", "--db", e->db_path), 0);
	j = parse_json(out);
	assert_int_equal(json_array_size(j), 1);
	row = json_array_get(j, 0);
	assert_string_equal(jstr(row, "job_id"), "b-dead");
	assert_string_equal(jstr(row, "kind"), "beta");
	assert_string_equal(jstr(row, "state"), "dead");
	assert_string_equal(jstr(row, "last_error"), "boom: out of ink");
	json_decref(j);

	/* retry: ready again at once, same job_id, payload kept */
	assert_int_equal(RUN("jobs", "retry", "b-dead", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "retried 1"));
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM dead_jobs"), 0);
	assert_int_equal(RUN("jobs", "ls", "--state", "ready", "--kind", "beta", "--json", "--db",
			     e->db_path), 0);
	j = parse_json(out);
	assert_int_equal(json_array_size(j), 1);
	row = json_array_get(j, 0);
	assert_string_equal(jstr(row, "job_id"), "b-dead");
	assert_string_equal(jstr(row, "state"), "ready");
	assert_int_equal(jint(json_object_get(row, "payload"), "x", NULL), 1);
	json_decref(j);

	/* retry of an id with no dead job: refused, nothing changes */
	assert_one_line_error(RUN("jobs", "retry", "no-such-job", "--db", e->db_path),
			      "retry of an unknown id");
	assert_one_line_error(RUN("jobs", "retry", "d-ready", "--db", e->db_path),
			      "retry of a job that is not dead");
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 5);

	/* purge: only with --dead */
	{
		struct job *c[1];
		int n, dead = 0;
		assert_int_equal(queue_claim(e->db, "t", 1, 60000, c, &n), SD_OK);
		assert_int_equal(n, 1);
		assert_int_equal(queue_fail(e->db, c[0], "again", 1, &dead), SD_OK);
		assert_int_equal(dead, 1);
		job_free(c[0]);
	}
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM dead_jobs"), 1);
	assert_one_line_error(RUN("jobs", "purge", "--db", e->db_path), "jobs purge without --dead");
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM dead_jobs"), 1);
	assert_int_equal(RUN("jobs", "purge", "--dead", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "purged 1"));
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM dead_jobs"), 0);
	assert_int_equal(RUN("jobs", "dead", "--json", "--db", e->db_path), 0);
	j = parse_json(out);
	assert_int_equal(json_array_size(j), 0);
	json_decref(j);
	/* the rest of the stream is untouched */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 4);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs"), 1);
}

/* ========================= worker --drain ================================== */

static void test_worker_drain_runs_builtin_kinds(void **state)
{
	struct tu_env *e = *state;
	char log[400];
	json_t *j, *row;
	const char *w;
	size_t i;
	int64_t t0 = clock_mono_us();
	int seen_fail = 0, rc;
	pid_t pid;

	snprintf(log, sizeof log, "%s/worker.log", e->dir);
	put(e, "noop", "{}", "n1", 0, 0);
	put(e, "sleep", "{\"ms\":50}", "s1", 0, 0);
	put(e, "fail", "{\"times\":2}", "f1", 0, 0);
	put(e, "nosuchkind", "{}", "u1", 0, 0);
	put(e, "noop", "{}", "late", 700, 0);	/* scheduled: drain waits for it */

	pid = tu_spawn((const char *const[]){ "worker", "--drain", "--name", "dr", "--db", e->db_path,
					   NULL }, log);
	rc = tu_reap(pid, 15000, "worker --drain");
	assert_int_equal(rc, 0);
	print_message("    worker --drain: %.0f ms\n", (double)(clock_mono_us() - t0) / 1000.0);

	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 0);
	assert_int_equal(RUN("jobs", "ls", "--state", "done", "--json", "--db", e->db_path), 0);
	j = parse_json(out);
	assert_int_equal(json_array_size(j), 4);
	json_array_foreach(j, i, row) {
		/* the worker's name, after its box's (the host's by default) */
		w = jstr(row, "worker");
		assert_true(strlen(w) > 3 && strcmp(w + strlen(w) - 3, "/dr") == 0);
		if (strcmp(jstr(row, "job_id"), "f1") == 0) {
			/* failed twice, done on the third attempt */
			assert_int_equal(jint(row, "attempts", NULL), 2);
			assert_int_equal(jint(row, "deliveries", NULL), 3);
			seen_fail = 1;
		} else {
			assert_int_equal(jint(row, "attempts", NULL), 0);
			assert_int_equal(jint(row, "deliveries", NULL), 1);
		}
	}
	assert_true(seen_fail);
	json_decref(j);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE job_id = 'late' AND "
			      "finished_at >= created_at + 700"), 1);

	/* an unknown kind is dead at once, the error names the kind */
	assert_int_equal(RUN("jobs", "dead", "--json", "--db", e->db_path), 0);
	j = parse_json(out);
	assert_int_equal(json_array_size(j), 1);
	row = json_array_get(j, 0);
	assert_string_equal(jstr(row, "job_id"), "u1");
	assert_int_equal(jint(row, "deliveries", NULL), 1);
	assert_non_null(jstr(row, "last_error"));
	assert_non_null(strstr(jstr(row, "last_error"), "nosuchkind"));
	json_decref(j);

	/* nothing ready, scheduled or leased: exits 0 at once */
	t0 = clock_mono_us();
	pid = tu_spawn((const char *const[]){ "worker", "--drain", "--db", e->db_path, NULL }, log);
	assert_int_equal(tu_reap(pid, 5000, "worker --drain on an empty stream"), 0);
	assert_true(clock_mono_us() - t0 < 3000000);
}

/* ========================= relay --drain =================================== */

static void test_relay_drain_publishes_outbox(void **state)
{
	struct tu_env *e = *state;
	int64_t id[3];
	int i;

	assert_int_equal(db_begin(e->db), SD_OK);
	assert_int_equal(outbox_add(e->db, "noop", NULL, "{}", 0, 0, &id[0]), SD_OK);
	assert_int_equal(outbox_add(e->db, "sleep", NULL, "{\"ms\":5}", 0, 0, &id[1]), SD_OK);
	assert_int_equal(outbox_add(e->db, "noop", NULL, "{\"n\":3}", 0, 0, &id[2]), SD_OK);
	assert_int_equal(db_commit(e->db), SD_OK);

	assert_int_equal(RUN("relay", "--drain", "--db", e->db_path), 0);
	assert_string_equal(out, "published 3\n");
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM outbox WHERE published_at IS NULL"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 3);
	for (i = 0; i < 3; i++)
		assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream s JOIN outbox o ON "
				      "s.job_id = o.job_id AND s.kind = o.kind AND "
				      "s.payload = o.payload WHERE o.id = %lld", (long long)id[i]), 1);

	/* again: nothing is published twice */
	assert_int_equal(RUN("relay", "--drain", "--db", e->db_path), 0);
	assert_string_equal(out, "published 0\n");
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 3);

	assert_int_equal(tu_reap(tu_spawn((const char *const[]){ "worker", "--drain", "--db", e->db_path,
							   NULL }, NULL), 15000, "worker --drain"), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM stream"), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs d JOIN outbox o "
				      "ON d.job_id = o.job_id WHERE o.id = %lld", (long long)id[i]), 1);
}

/* ========================= a newer database ================================ */


static void test_newer_database_refused_by_every_command(void **state)
{
	struct tu_env *e = *state;
	sqlite3 *h;
	unsigned char *before, *after;
	size_t n_before, n_after, i;
	char wal[400];
	static const char *const cmds[][8] = {
		{ "init" },
		{ "enqueue", "noop", "{}" },
		{ "worker", "--drain" },
		{ "relay", "--drain" },
		{ "jobs", "stats" },
		{ "jobs", "ls", "--json" },
		{ "jobs", "dead" },
		{ "jobs", "retry", "x" },
		{ "jobs", "purge", "--dead" },
		{ "jobs", "prune" },
	};

	put(e, "noop", "{}", "old-job", 0, 0);
	db_close(e->db);
	e->db = NULL;
	assert_int_equal(sqlite3_open(e->db_path, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_close(h), SQLITE_OK);
	snprintf(wal, sizeof wal, "%s-wal", e->db_path);
	assert_false(file_exists(wal));
	before = tu_slurp(e->db_path, &n_before);

	for (i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		const char *argv[12];
		int a, rc;
		for (a = 0; cmds[i][a]; a++)
			argv[a] = cmds[i][a];
		argv[a++] = "--db";
		argv[a++] = e->db_path;
		argv[a] = NULL;
		rc = tu_run(out, sizeof out, err, sizeof err, argv);
		assert_one_line_error(rc, cmds[i][0]);
		if (!strstr(err, "newer") || !strstr(err, "99"))
			fail_msg("%s %s: the message should say the file is newer (version 99): %s",
				 cmds[i][0], cmds[i][1] ? cmds[i][1] : "", err);
	}

	after = tu_slurp(e->db_path, &n_after);
	assert_int_equal(n_after, n_before);
	assert_memory_equal(after, before, n_before);
	free(before);
	free(after);
	assert_int_equal(sqlite3_open(e->db_path, &h), SQLITE_OK);
	{
		sqlite3_stmt *st;
		assert_int_equal(sqlite3_prepare_v2(h, "SELECT (SELECT user_version FROM "
						    "pragma_user_version), (SELECT count(*) FROM stream)",
						    -1, &st, NULL), SQLITE_OK);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		assert_int_equal(sqlite3_column_int(st, 0), 99);
		assert_int_equal(sqlite3_column_int(st, 1), 1);
		sqlite3_finalize(st);
	}
	sqlite3_close(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_init_creates_and_again_keeps_data, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_db_from_flag_and_env, tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_enqueue_prints_job_id, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_enqueue_delay_is_scheduled, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_enqueue_bad_input_fails_and_writes_nothing, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_jobs_stats_by_state_and_kind, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_jobs_ls_filters, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_jobs_ls_json_failure_prints_nothing, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_jobs_dead_retry_and_purge, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_worker_drain_runs_builtin_kinds, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_relay_drain_publishes_outbox, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_newer_database_refused_by_every_command, tu_setup_real,
						tu_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
