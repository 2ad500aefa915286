/*
 * test_sqs.c: the SQS listener as an SQS client sees it: `stagedoor sqs`
 * ($STAGEDOOR_BIN) on loopback, a worker token's credentials from `token
 * add --role worker --sqs`, and Debian's python3-boto3 (the query
 * protocol) running the cases of tests/sqs_boto3.py, each of which asserts
 * what the client gets back (messages, MD5s, counts, the SDK's exception
 * classes and error codes).  Around them, what the box recorded: a
 * message's MessageId is its stream entry's job_id from the send to the
 * delete, a stale receipt handle deletes nothing, a revoked or expired
 * token and a queue outside a token's grant are refused, and no secret is
 * in the database or the log.
 *
 * The same box driven by the official AWS SDK for JavaScript
 * (tests/browser/sqs_sdk.mjs: the JSON protocol, the SDK's own MD5 checks
 * and exception classes).
 *
 * The manual's example workers (dist/doc/examples/sqs_worker.py and .mjs)
 * each killed once after their effect and run again on the same message
 * (tests/sqs_examples.sh): with the four techniques one charge and one
 * sale; without (--naive), two.
 *
 * Runs from the repository root (make runs tools/run_tests.sh there), on
 * both engines.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"


#define SCRIPT "tests/sqs_boto3.py"
#define PY "/usr/bin/python3"
#define JS "tests/browser/sqs_sdk.mjs"
#define SDK "tests/browser/node_modules/@aws-sdk/client-sqs"

struct box {
	pid_t pid;
	int port;
	char log[512];
	char key_id[64], secret[64];	/* the app token's */
};

/* worker: a worker token's credentials; queues may be NULL */
static void worker(struct tu_env *e, const char *name, const char *queues, const char *extra,
		   char key_id[64], char secret[64])
{
	char out[512], err[512];
	const char *argv[16] = { "token", "add", "--db", e->db_path, "--role", "worker", "--name",
				 name, "--sqs" };
	int n = 9;
	char *k, *s;

	if (tu_state(e)) {
		argv[n++] = "--state-dir";
		argv[n++] = tu_state(e);
	}
	if (queues) {
		argv[n++] = "--queues";
		argv[n++] = queues;
	}
	if (extra)
		argv[n++] = extra;
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, argv), 0);
	k = strstr(out, "AWS_ACCESS_KEY_ID=");
	s = strstr(out, "AWS_SECRET_ACCESS_KEY=");
	assert_non_null(k);
	assert_non_null(s);
	assert_int_equal(sscanf(k, "AWS_ACCESS_KEY_ID=%63s", key_id), 1);
	assert_int_equal(sscanf(s, "AWS_SECRET_ACCESS_KEY=%63s", secret), 1);
	assert_int_equal((int)strlen(key_id), 20);
	assert_int_equal((int)strlen(secret), 40);
}

static void box_up(struct tu_env *e, struct box *b)
{
	char *p;
	unsigned char *log;
	size_t n;
	const char *init[] = { "init", "--db", e->db_path, tu_state(e) ? "--state-dir" : NULL,
			       tu_state(e), NULL };

	memset(b, 0, sizeof b[0]);
	assert_int_equal(tu_run(NULL, 0, NULL, 0, init), 0);
	worker(e, "app", NULL, NULL, b->key_id, b->secret);
	snprintf(b->log, sizeof b->log, "%s/sqs.log", e->dir);
	b->pid = tu_spawn((const char *const[]){ "sqs", "--db", e->db_path, "--sqs-listen",
						 "127.0.0.1:0", "--state-dir",
						 tu_state(e) ? tu_state(e) : e->dir, NULL },
			  b->log);
	tu_wait_log(b->log, "msg=\"sqs listening\"", 1, 15000);
	log = tu_slurp(b->log, &n);
	p = strstr((char *)log, "msg=\"sqs listening\"");
	assert_non_null(p = strstr(p, "port="));
	b->port = atoi(p + 5);
	free(log);
	assert_true(b->port > 0);
}

/* py: the case with the credentials given; [out] out (its output); the
 * exit status */
static int py_as(const struct box *b, const char *key_id, const char *secret, const char *c,
		 const char *arg, char *out, size_t size)
{
	char cmd[1024];
	size_t n = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof cmd,
		 "AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s %s %s %s http://127.0.0.1:%d %s 2>&1",
		 key_id, secret, PY, SCRIPT, c, b->port, arg ? arg : "");
	assert_non_null(p = popen(cmd, "r"));
	while (n + 1 < size && fgets(out + n, (int)(size - n), p))
		n += strlen(out + n);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* py_ok: the case passes ("ok CASE" last), or the test fails with its output */
static void py_ok(const struct box *b, const char *c, const char *arg, char *out, size_t size)
{
	char want[64];
	int rc = py_as(b, b->key_id, b->secret, c, arg, out, size);

	snprintf(want, sizeof want, "ok %s\n", c);
	if (rc != 0 || !strstr(out, want))
		fail_msg("sqs_boto3.py %s (exit %d):\n%s", c, rc, out);
}

/* one_case: a box, and the case run on it */
static struct tu_env *one_case(void **state, const char *c, struct box *b, char *out,
			       size_t size)
{
	struct tu_env *e = *state;

	box_up(e, b);
	py_ok(b, c, NULL, out, size);
	return e;
}

static void not_in_file(const char *path, const char *needle)
{
	size_t n = 0;
	unsigned char *d = tu_slurp(path, &n);

	if (d && memmem(d, n, needle, strlen(needle)))
		fail_msg("%s holds the secret", path);
	free(d);
}

/* the secret is in no file of the box: derived on each request, never kept */
static void no_secret_kept(struct tu_env *e, const struct box *b)
{
	char wal[400];

	not_in_file(b->log, b->secret);
	if (!tu_pg()) {
		snprintf(wal, sizeof wal, "%s-wal", e->db_path);
		not_in_file(e->db_path, b->secret);
		not_in_file(wal, b->secret);
	}
}

static void test_lifecycle_keeps_the_message_id(void **state)
{
	struct tu_env *e;
	struct box b;
	char out[8192], id[64] = "";

	e = one_case(state, "lifecycle", &b, out, sizeof out);
	assert_int_equal(sscanf(out, "%63s", id), 1);
	/* the MessageId the client saw is the entry's job_id, finished once */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE job_id = '%s' "
				   "AND kind = 'sqs:app-life' AND deliveries = 1", id), 1);
	/* the deleted queue took its waiting messages with it */
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM stream WHERE "
				  "kind = 'sqs:app-life'"), 0);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM sqs_queues"), 0);
	no_secret_kept(e, &b);
}

static void test_batches(void **state)
{
	struct tu_env *e;
	struct box b;
	char out[8192];

	e = one_case(state, "batch", &b, out, sizeof out);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM done_jobs WHERE "
				  "kind = 'sqs:app-batch'"), 9);
}

static void test_long_poll_is_woken_by_the_send(void **state)
{
	struct box b;
	char out[8192];

	one_case(state, "longpoll", &b, out, sizeof out);
}

static void test_hundreds_of_long_polls_hold_no_thread(void **state)
{
	struct box b;
	char out[8192];

	one_case(state, "waiters", &b, out, sizeof out);
}

static void test_visibility_changes(void **state)
{
	struct box b;
	char out[8192];

	one_case(state, "visibility", &b, out, sizeof out);
}

static void test_stale_receipt_handle_is_refused(void **state)
{
	struct tu_env *e;
	struct box b;
	char out[8192], id[64] = "";

	e = one_case(state, "stale", &b, out, sizeof out);
	assert_int_equal(sscanf(out, "%63s", id), 1);
	/* deleted once, by the second delivery: two deliveries, one finish */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM done_jobs WHERE job_id = '%s' "
				   "AND deliveries = 2", id), 1);
}

static void test_redrive_to_the_dead_letter_queue(void **state)
{
	struct tu_env *e;
	struct box b;
	char out[8192];

	e = one_case(state, "redrive", &b, out, sizeof out);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM stream s JOIN sqs_queues q ON "
				  "q.id = s.queue WHERE q.name = 'app-dead' AND "
				  "s.kind = 'sqs:app-dead'"), 1);
}

static void test_fifo_dedup_and_group_order(void **state)
{
	struct tu_env *e;
	struct box b;
	char out[8192];

	e = one_case(state, "fifo", &b, out, sizeof out);
	/* messages left waiting and in flight are the workers' business: the
	 * box's own invariants still hold */
	assert_true(tu_count(e->db_path, "SELECT count(*) FROM stream WHERE queue > 0") > 0);
	assert_int_equal(tu_run(out, sizeof out, NULL, 0, (const char *const[]){
		"check", "--db", e->db_path, NULL }), 0);
}

/* a schedule on a queue: `run` sends its payload once a second, boto3
 * receives each period's message once, with its period attribute */
static void test_periodic_messages_reach_boto3(void **state)
{
	struct tu_env *e = *state;
	char out[8192], conf[512], log[512];
	struct box b;
	FILE *f;
	pid_t pid;

	box_up(e, &b);
	py_ok(&b, "scheduled", "create", out, sizeof out);
	assert_int_equal(tu_run(out, sizeof out, NULL, 0, (const char *const[]){
		"schedule", "add", "ping", "--every", "1s", "sqs:app-sched", "{\"n\":1}", "--db",
		e->db_path, NULL }), 0);
	snprintf(conf, sizeof conf, "%s/run.conf", e->dir);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	assert_non_null(f = fopen(conf, "w"));
	fprintf(f, "db = %s\nhttp_listen = off\nworkers = 1\nstate_dir = %s\n", e->db_path,
		tu_state(e) ? tu_state(e) : e->dir);
	fclose(f);
	pid = tu_spawn((const char *const[]){ "run", "--config", conf, NULL }, log);
	py_ok(&b, "scheduled", NULL, out, sizeof out);
	kill(pid, SIGTERM);
	assert_int_equal(tu_reap(pid, 15000, "run"), 0);
	assert_true(tu_count(e->db_path, "SELECT made FROM schedules WHERE name = 'ping'") >= 2);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM done_jobs WHERE kind = "
				  "'sqs:app-sched' AND deliveries > 1"), 0);
}

static void test_refusals_in_sqs_words(void **state)
{
	struct tu_env *e = *state;
	struct box b;
	char out[8192];

	box_up(e, &b);
	py_ok(&b, "errors", NULL, out, sizeof out);
	py_ok(&b, "auth", NULL, out, sizeof out);
}

static void test_queues_are_counted(void **state)
{
	struct tu_env *e = *state;
	struct box b;
	char out[8192];

	box_up(e, &b);
	assert_int_equal(db_exec(e->db, "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 "
				 "FROM n WHERE i < 999) INSERT INTO sqs_queues (name, fifo, "
				 "attributes, created_at, modified_at) SELECT 'app-full-' || i, 0, "
				 "'{}', 1, 1 FROM n"), SD_OK);
	py_ok(&b, "overlimit", NULL, out, sizeof out);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM sqs_queues"), 1000);
}

static void test_tokens_reach_only_their_queues(void **state)
{
	struct tu_env *e = *state;
	struct box b;
	char out[8192], k[64], s[64], want[64];
	const char *revoke[] = { "token", "revoke", "--db", e->db_path, "narrow", NULL };

	box_up(e, &b);
	worker(e, "narrow", "app-*,reports", NULL, k, s);
	assert_int_equal(py_as(&b, k, s, "denied", "other", out, sizeof out), 0);
	snprintf(want, sizeof want, "ok denied\n");
	assert_non_null(strstr(out, want));
	/* its own queues work */
	assert_int_equal(py_as(&b, k, s, "visibility", NULL, out, sizeof out), 0);
	/* revoked: every call refused at once */
	assert_int_equal(tu_run(NULL, 0, NULL, 0, revoke), 0);
	if (py_as(&b, k, s, "denied", "any", out, sizeof out) != 0 || !strstr(out, want))
		fail_msg("a revoked token: %s", out);
	/* an operator token is no worker */
	assert_int_not_equal(tu_run(NULL, 0, NULL, 0, (const char *const[]){
		"token", "add", "--db", e->db_path, "--role", "operator", "--name", "op", "--sqs",
		NULL }), 0);
}

static void test_expired_token_is_refused(void **state)
{
	struct tu_env *e = *state;
	struct box b;
	char out[8192], k[64], s[64];

	box_up(e, &b);
	worker(e, "brief", NULL, "--expires-in=1h", k, s);
	if (py_as(&b, k, s, "hello", NULL, out, sizeof out) != 0)
		fail_msg("a live token: %s", out);
	/* its hour is over (set in the database, as time would) */
	assert_int_equal(db_exec(e->db, "UPDATE api_tokens SET expires_at = 1 WHERE name = 'brief'"),
			 SD_OK);
	if (py_as(&b, k, s, "denied", "any", out, sizeof out) != 0 || !strstr(out, "ok denied"))
		fail_msg("an expired token: %s", out);
}

static void test_aws_sdk_for_javascript(void **state)
{
	struct tu_env *e = *state;
	struct box b;
	char cmd[1024], out[8192], k[64], sec[64], err_path[400];
	unsigned char *err;
	size_t n = 0;
	FILE *p;
	int st;

	if (access(SDK, F_OK) != 0)
		fail_msg("%s is missing (cwd must be the repository root): run `make deps` (npm ci "
			 "in tests/browser) first", SDK);
	/* stderr apart: the SDK warns there of the node it runs on (18) */
	snprintf(err_path, sizeof err_path, "%s/sdk.err", e->dir);
	box_up(e, &b);
	worker(e, "gone", NULL, NULL, k, sec);
	assert_int_equal(tu_run(NULL, 0, NULL, 0, (const char *const[]){
		"token", "revoke", "--db", e->db_path, "gone", NULL }), 0);
	snprintf(cmd, sizeof cmd, "AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s REVOKED_KEY_ID=%s "
		 "REVOKED_SECRET=%s node %s http://127.0.0.1:%d 2>%s", b.key_id, b.secret, k, sec,
		 JS, b.port, err_path);
	assert_non_null(p = popen(cmd, "r"));
	while (n + 1 < sizeof out && fgets(out + n, (int)(sizeof out - n), p))
		n += strlen(out + n);
	out[n] = '\0';
	st = pclose(p);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || strcmp(out, "ok\n") != 0) {
		err = tu_slurp(err_path, &n);
		fail_msg("sqs_sdk.mjs:\n%s%s", out, err ? (char *)err : "");
	}
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM done_jobs WHERE "
				  "kind = 'sqs:js-jobs'"), 12);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM done_jobs WHERE "
				  "kind = 'sqs:js-dead'"), 1);
}

/*
 * Two boxes on one PostgreSQL database (each its own state folder, the one
 * ticket key): one queue, a receive waiting on box B woken by a send
 * through box A, the message deleted through A.
 */
static void test_two_boxes_serve_one_queue(void **state)
{
	struct tu_env *e = *state;
	struct box b;
	char out[8192], dir_b[400], key[400], log_b[400], arg[64];
	unsigned char *log;
	const char *p;
	size_t n;
	int port_b;

	TU_PG_ONLY();
	box_up(e, &b);
	snprintf(dir_b, sizeof dir_b, "%s/box-b", e->dir);
	snprintf(key, sizeof key, "%s/ticket.key", e->dir);
	snprintf(log_b, sizeof log_b, "%s/sqs-b.log", e->dir);
	assert_int_equal(mkdir(dir_b, 0700), 0);
	tu_spawn((const char *const[]){ "sqs", "--db", e->db_path, "--sqs-listen", "127.0.0.1:0",
					"--state-dir", dir_b, "--ticket-key-file", key, NULL },
		 log_b);
	tu_wait_log(log_b, "msg=\"sqs listening\"", 1, 15000);
	log = tu_slurp(log_b, &n);
	assert_non_null(p = strstr(strstr((char *)log, "msg=\"sqs listening\""), "port="));
	port_b = atoi(p + 5);
	free(log);
	snprintf(arg, sizeof arg, "http://127.0.0.1:%d", port_b);
	py_ok(&b, "two_boxes", arg, out, sizeof out);
}

/* example: the report of one tests/sqs_examples.sh run, into out */
static void example(struct tu_env *e, const struct box *b, const char *lang, const char *mode,
		    const char *crash, char *out, size_t size)
{
	char cmd[1024], dir[400];
	size_t n = 0;
	FILE *p;
	int st;

	snprintf(dir, sizeof dir, "%s/%s-%s-%s", e->dir, lang, mode, crash);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(cmd, sizeof cmd, "AWS_ENDPOINT_URL=http://127.0.0.1:%d AWS_ACCESS_KEY_ID=%s "
		 "AWS_SECRET_ACCESS_KEY=%s sh tests/sqs_examples.sh %s %s %s %s 2>&1", b->port,
		 b->key_id, b->secret, lang, mode, crash, dir);
	assert_non_null(p = popen(cmd, "r"));
	while (n + 1 < size && fgets(out + n, (int)(size - n), p))
		n += strlen(out + n);
	out[n] = '\0';
	st = pclose(p);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("sqs_examples.sh %s %s %s:\n%s", lang, mode, crash, out);
}

static void test_manual_examples_have_one_effect(void **state)
{
	static const char *const langs[] = { "py", "js" };
	struct tu_env *e = *state;
	struct box b;
	char out[8192];
	size_t i;

	if (access(SDK, F_OK) != 0)
		fail_msg("%s is missing: run `make deps` (npm ci in tests/browser) first", SDK);
	box_up(e, &b);
	for (i = 0; i < 2; i++) {
		example(e, &b, langs[i], "safe", "charge", out, sizeof out);
		assert_non_null(strstr(out, "charges 1 sales 2500\n"));
		example(e, &b, langs[i], "safe", "commit", out, sizeof out);
		assert_non_null(strstr(out, "charges 1 sales 2500\n"));
		/* what the techniques prevent: a second charge, a sale counted twice */
		example(e, &b, langs[i], "naive", "commit", out, sizeof out);
		assert_non_null(strstr(out, "charges 2 sales 5000\n"));
	}
}

/* the benchmark (make bench) runs, and checks its own run: a short one */
static void test_benchmark_runs(void **state)
{
	static char out[8192];
	char err[4096];

	(void)state;
	if (tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"bench", "sqs", "--messages", "200", "--singles", "20", "--latency", "20",
		"--rounds", "1", "--no-refs", "--json", NULL }) != 0)
		fail_msg("stagedoor-bench sqs: %s", err);
	assert_non_null(strstr(out, "\"bench\":\"sqs\""));
	assert_non_null(strstr(out, "\"batched\":{\"messages\":200,"));
	assert_non_null(strstr(out, "\"latency\":{\"messages\":20,"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lifecycle_keeps_the_message_id, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_batches, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_long_poll_is_woken_by_the_send, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_hundreds_of_long_polls_hold_no_thread,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_visibility_changes, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_stale_receipt_handle_is_refused, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_redrive_to_the_dead_letter_queue, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_fifo_dedup_and_group_order, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_periodic_messages_reach_boto3, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_refusals_in_sqs_words, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_queues_are_counted, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_tokens_reach_only_their_queues, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_expired_token_is_refused, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_aws_sdk_for_javascript, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_two_boxes_serve_one_queue, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_benchmark_runs, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_manual_examples_have_one_effect,
						tu_setup_real, tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
