/*
 * sqsrun.c: the kill soak's queue of its own (--sqs-tasks N): a developer's
 * program outside the box, run as Debian's boto3 would run it, while the
 * attack goes on.
 *
 * Each box gets sqs_listen on a port of its own; a worker token (`token add
 * --role worker --sqs`) gives the credentials.  tools/chaos/sqs_soak.py then
 * runs as a producer, which sends tasks 1..N (a send whose answer a kill
 * took is sent again, so a task may be queued twice), and as three workers,
 * which receive, do each task's effect once in their own SQLite file
 * (technique 2, a unique row per task, and technique 4, the MessageId in the
 * effect's transaction) and delete.  One worker is SIGKILLed every 300-800
 * ms until --sqs-kills (default 60), and started again; the whole-box kills
 * of the attack hit the listener under them.
 *
 * After the box's own drain, the soak waits until every task has its effect
 * and the queue is empty, then the verdict reads the workers' file
 * (sqs_soak.py verify: one effect per task, none lost) and the box's
 * database (no message left in a queue's lane, none in the dead letters).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chaos.h"

#define SQS_WORKERS 3
#define SQS_SCRIPT "tools/chaos/sqs_soak.py"
#define SQS_PY "/usr/bin/python3"

static struct {
	int port[2];
	char endpoints[128];
	char key_id[64], secret[64];
	char env_id[96], env_secret[96];
	char script[CHAOS_PATH_MAX];
	char worker_db[CHAOS_PATH_MAX + 32], log[CHAOS_PATH_MAX + 32];
	pid_t producer, workers[SQS_WORKERS];
	int produced;			/* the producer exited 0 */
	long kills, restarts;
	int64_t next_kill;
	int64_t settle_ms;
} Q;

size_t sqsrun_config(int box, char *text, size_t size)
{
	int i = box && opt.boxes > 1;

	if (!opt.sqs_tasks)
		return 0;
	if (!Q.port[i])
		Q.port[i] = proc_free_port();
	return (size_t)snprintf(text, size, "sqs_listen = 127.0.0.1:%d\n", Q.port[i]);
}

int sqsrun_port(int port)
{
	return opt.sqs_tasks && port > 0 && (port == Q.port[0] || port == Q.port[1]);
}

static const char *const *env(void)
{
	static const char *e[3];

	e[0] = Q.env_id;
	e[1] = Q.env_secret;
	e[2] = NULL;
	return e;
}

int sqsrun_init(void)
{
	char out[1024], box_a[CHAOS_PATH_MAX + 32];
	const char *argv[] = { opt.bin, "token", "add", "--db", soak.db, "--role", "worker",
			       "--name", "soak", "--sqs", opt.pg ? "--state-dir" : NULL, box_a,
			       NULL };
	const char *k, *s;
	int rc;

	if (!opt.sqs_tasks)
		return 0;
	snprintf(box_a, sizeof box_a, "%s/box-a", soak.dir);
	if ((rc = proc_run(argv, out, sizeof out, 0)) != 0 ||
	    !(k = strstr(out, "AWS_ACCESS_KEY_ID=")) || !(s = strstr(out, "AWS_SECRET_ACCESS_KEY=")) ||
	    sscanf(k, "AWS_ACCESS_KEY_ID=%63s", Q.key_id) != 1 ||
	    sscanf(s, "AWS_SECRET_ACCESS_KEY=%63s", Q.secret) != 1) {
		fail("setup: stagedoor token add --role worker --sqs: exit %d", rc);
		return -1;
	}
	snprintf(Q.env_id, sizeof Q.env_id, "AWS_ACCESS_KEY_ID=%s", Q.key_id);
	snprintf(Q.env_secret, sizeof Q.env_secret, "AWS_SECRET_ACCESS_KEY=%s", Q.secret);
	if (opt.boxes > 1)
		snprintf(Q.endpoints, sizeof Q.endpoints, "http://127.0.0.1:%d,http://127.0.0.1:%d",
			 Q.port[0], Q.port[1]);
	else
		snprintf(Q.endpoints, sizeof Q.endpoints, "http://127.0.0.1:%d", Q.port[0]);
	if (!realpath(SQS_SCRIPT, Q.script)) {
		fail("setup: %s not found (run from the repository root)", SQS_SCRIPT);
		return -1;
	}
	snprintf(Q.worker_db, sizeof Q.worker_db, "%s/sqs-worker.db", soak.dir);
	snprintf(Q.log, sizeof Q.log, "%s/sqs-workers.log", soak.dir);
	Q.next_kill = now_ms() + 1000;
	say("sqs: %ld tasks through %s, %d boto3 workers", opt.sqs_tasks, Q.endpoints, SQS_WORKERS);
	return 0;
}

static pid_t worker_start(int i)
{
	const char *argv[] = { SQS_PY, Q.script, "work", Q.endpoints, Q.worker_db, NULL };

	(void)i;
	return proc_spawn(argv, Q.log, Q.log, env());
}

/* producer: started once, its end seen */
static int producer_step(void)
{
	char n[24];
	const char *argv[] = { SQS_PY, Q.script, "produce", Q.endpoints, n, NULL };
	int rc;

	if (Q.produced)
		return 0;
	if (!Q.producer) {
		snprintf(n, sizeof n, "%ld", opt.sqs_tasks);
		Q.producer = proc_spawn(argv, Q.log, Q.log, env());
		return Q.producer > 0 ? 0 : -1;
	}
	if ((rc = proc_wait(Q.producer, 0)) == -2)
		return 0;
	Q.producer = 0;
	if (rc != 0) {
		fail("sqs: the producer exited %d (see %s)", rc, Q.log);
		return -1;
	}
	Q.produced = 1;
	say("sqs: every task sent");
	return 0;
}

int sqsrun_step(void)
{
	int64_t now = now_ms();
	int i;

	if (!opt.sqs_tasks)
		return 0;
	if (producer_step() != 0)
		return -1;
	for (i = 0; i < SQS_WORKERS; i++) {
		if (Q.workers[i] && proc_wait(Q.workers[i], 0) != -2)
			Q.workers[i] = 0;	/* died (killed): started again below */
		if (!Q.workers[i]) {
			if ((Q.workers[i] = worker_start(i)) <= 0)
				return -1;
			Q.restarts++;
		}
	}
	if (Q.kills < opt.sqs_kills && now >= Q.next_kill) {
		pid_t victim = Q.workers[rng_below(SQS_WORKERS)];

		kill(victim, SIGKILL);
		Q.kills++;
		Q.next_kill = now + 300 + (int64_t)rng_below(501);
	}
	return 0;
}

int sqsrun_done(void)
{
	return !opt.sqs_tasks || (Q.produced && Q.kills >= opt.sqs_kills);
}

/* settled: every task's effect in the workers' file, the queue's lane empty */
static int settled(const char *db_path)
{
	char n[32] = "", left[32] = "", sql[160];
	struct vdb *d = NULL;
	char err[200];
	const char *argv[] = { SQS_PY, "-c",
			       "import sqlite3,sys\n"
			       "try: print(sqlite3.connect(sys.argv[1]).execute("
			       "'SELECT count(*) FROM done_tasks').fetchone()[0])\n"
			       "except Exception: print(0)", Q.worker_db, NULL };

	if (proc_run(argv, n, sizeof n, 0) != 0 || atol(n) < opt.sqs_tasks)
		return 0;
	if (vdb_open(db_path, &d, err, sizeof err) != 0)
		return 0;
	snprintf(sql, sizeof sql, "SELECT count(*) FROM stream WHERE kind LIKE 'sqs:%%'");
	vdb_one(d, sql, left, sizeof left);
	vdb_close(d);
	return left[0] && atol(left) == 0;
}

int sqsrun_settle(void)
{
	int64_t t0 = now_ms(), until = t0 + opt.drain_timeout_s * 1000;
	int i;

	if (!opt.sqs_tasks)
		return 0;
	while (!settled(soak.db)) {
		if (chaos_interrupted || now_ms() >= until) {
			fail("sqs: the tasks' effects are not all in after %ld s",
			     opt.drain_timeout_s);
			return -1;
		}
		if (chaos_run_watch() != 0 || sqsrun_step() != 0)
			return -1;
		orphans_reap();
		sleep_ms(200);
	}
	Q.settle_ms = now_ms() - t0;
	for (i = 0; i < SQS_WORKERS; i++)
		if (Q.workers[i]) {
			kill(Q.workers[i], SIGTERM);
			proc_wait(Q.workers[i], 5000);
			Q.workers[i] = 0;
		}
	say("sqs: every task's effect in after %.1f s more", (double)Q.settle_ms / 1000.0);
	return 0;
}

/* box_left: what the box still holds of its queues: entries, dead letters */
static int box_left(const char *db_path, long *entries, long *dead)
{
	char a[32] = "", b[32] = "", err[200];
	struct vdb *d = NULL;

	if (vdb_open(db_path, &d, err, sizeof err) != 0)
		return -1;
	vdb_one(d, "SELECT count(*) FROM stream WHERE kind LIKE 'sqs:%'", a, sizeof a);
	vdb_one(d, "SELECT count(*) FROM dead_jobs WHERE kind LIKE 'sqs:%'", b, sizeof b);
	vdb_close(d);
	*entries = atol(a);
	*dead = atol(b);
	return a[0] && b[0] ? 0 : -1;
}

int sqsrun_verify(const char *db_path, char *broken, size_t size)
{
	char n[24], out[2048] = "";
	const char *argv[] = { SQS_PY, Q.script, "verify", Q.worker_db, n, NULL };
	long entries = -1, dead = -1;
	int rc;

	if (!opt.sqs_tasks)
		return 0;
	snprintf(n, sizeof n, "%ld", opt.sqs_tasks);
	rc = proc_run(argv, out, sizeof out, 1);
	fputs(out, stdout);
	printf("sqs.worker_kills %ld\n", Q.kills);
	printf("sqs.worker_starts %ld\n", Q.restarts);
	printf("sqs.settle_s %.1f\n", (double)Q.settle_ms / 1000.0);
	if (box_left(db_path, &entries, &dead) == 0) {
		printf("sqs.left_in_queue %ld\n", entries);
		printf("sqs.dead_letters %ld\n", dead);
	}
	if (rc != 0 || !strstr(out, "sqs.result ok")) {
		snprintf(broken, size, "sqs: the external worker's effects: %.200s", out);
		return -1;
	}
	if (entries != 0 || dead != 0) {
		snprintf(broken, size, "sqs: the box still holds %ld messages and %ld dead letters",
			 entries, dead);
		return -1;
	}
	return 0;
}

void sqsrun_cleanup(void)
{
	int i;

	if (Q.producer > 0)
		kill(Q.producer, SIGKILL);
	for (i = 0; i < SQS_WORKERS; i++)
		if (Q.workers[i] > 0)
			kill(Q.workers[i], SIGKILL);
}
