/*
 * test_backup.c: `stagedoor backup`, `backup verify` and `restore` against
 * the real binary, and the restore drill: a box under load is backed up,
 * more orders are placed, its disk dies, and a new box made from the backup
 * finishes what the backup held, each ticket admitted once and each email
 * sent once.
 *
 * The mail provider is a maildir outside the box's folder (maildir:PATH): it
 * outlives the box's disk as a real provider does, and keeps one message per
 * idempotency key, as a provider honouring the key does.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "code.h"
#include "tickets.h"
#include "testutil.h"

#define OUT_MAX 16384

static char out[OUT_MAX], err[OUT_MAX];

#define RUN(...) tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })

struct box {
	char dir[300], db[340], mail[320], url[340];
};

static void box_at(const struct tu_env *e, const char *name, struct box *b)
{
	snprintf(b->dir, sizeof b->dir, "%s/%s", e->dir, name);
	snprintf(b->db, sizeof b->db, "%s/stagedoor.db", b->dir);
	snprintf(b->mail, sizeof b->mail, "%s/provider", e->dir);
	snprintf(b->url, sizeof b->url, "maildir:%s", b->mail);
}

static void ok(int rc, const char *what)
{
	if (rc != 0)
		fail_msg("%s: exit %d\nstdout: %s\nstderr: %s", what, rc, out, err);
}

/* a box with an event; [out] its id */
static void box_make(struct box *b, char *ev, size_t size)
{
	ok(RUN("init", "--db", b->db), "init");
	ok(RUN("event", "add", "--name", "Gig", "--venue", "Hall", "--starts-at",
	       "2036-12-31T20:00Z", "--capacity", "1000", "--db", b->db), "event add");
	snprintf(ev, size, "%.*s", (int)strcspn(out, "\n"), out);
}

static void order(const struct box *b, const char *ev, int i)
{
	char key[32];

	snprintf(key, sizeof key, "order-%d", i);
	ok(RUN("order", "add", "--event", ev, "--name", "Ana Lima", "--email", "ana@example.com",
	       "--seats", "1", "--idempotency-key", key, "--db", b->db), "order add");
}

/* start_run: `run` on the box, up to its first worker (a SIGTERM before its
 * handlers are set would end it by the signal, not by a stop) */
static pid_t start_run(const struct box *b, const char *log)
{
	pid_t pid = tu_spawn((const char *const[]){ "run", "--db", b->db, "--workers", "1",
						    "--mail-url", b->url, "--http-listen", "off",
						    NULL },
			     log);

	tu_wait_log(log, "msg=\"worker started\"", 1, 15000);
	return pid;
}

static void stop_run(pid_t pid)
{
	kill(pid, SIGTERM);
	assert_int_equal(tu_reap(pid, 30000, "run"), 0);
}

/* wait_checked: until `stagedoor check` passes on the box (drained) */
static void wait_checked(const struct box *b, int timeout_ms)
{
	int waited;

	for (waited = 0; waited < timeout_ms; waited += 200) {
		if (RUN("check", "--db", b->db) == 0)
			return;
		tu_sleep_ms(200);
	}
	fail_msg("the box did not drain and pass check within %d ms: %s", timeout_ms, err);
}

static int file_exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

/* ids_of: the database's order ids in order, comma-separated */
static void ids_of(const char *db, char *buf, size_t size)
{
	sqlite3 *h;
	sqlite3_stmt *st;

	assert_int_equal(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "SELECT group_concat(public_id) FROM "
					    "(SELECT public_id FROM orders ORDER BY id)", -1, &st,
					    NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	snprintf(buf, size, "%s", sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0)
							      : "");
	sqlite3_finalize(st);
	sqlite3_close(h);
}

/* tls_of: the box's CA fingerprint and its server certificate's, as tls show
 * --json prints them (the first is the CA's) */
static void tls_of(const struct box *b, char *buf, size_t size)
{
	const char *p;

	ok(RUN("tls", "show", "--db", b->db, "--json"), "tls show");
	p = strstr(out, "\"fingerprint_sha256\":");
	assert_non_null(p);
	snprintf(buf, size, "%.*s", 120, p);
	assert_non_null(strstr(out, "\"server_key_ok\":true"));
}

/* ---- the drill ------------------------------------------------------------------ */

static void test_restore_drill(void **state)
{
	struct tu_env *e = *state;
	struct box old, fresh;
	char ev[32], bk[340], log[340], sql[512], kp[400], before[2048], after[2048], ca[200],
		ca_back[200];
	unsigned char key[CODE_KEY_LEN];
	sqlite3 *h;
	sqlite3_stmt *st;
	pid_t run;
	int i, n_backed = 0, tickets = 0;
	char ids[64][ORDER_ID_MAX];

	box_at(e, "box", &old);
	box_at(e, "box2", &fresh);
	snprintf(bk, sizeof bk, "%s/backups/b1", e->dir);
	box_make(&old, ev, sizeof ev);
	/* the box CA its devices trust */
	ok(RUN("tls", "init", "--db", old.db, "--name", "box.local"), "tls init");
	tls_of(&old, ca, sizeof ca);
	snprintf(log, sizeof log, "%s/run1.log", e->dir);
	run = start_run(&old, log);
	/* under load: orders go in while the pipeline runs and the backup is taken */
	for (i = 0; i < 20; i++)
		order(&old, ev, i);
	ok(RUN("backup", bk, "--db", old.db), "backup of the running box");
	assert_non_null(strstr(out, "backup "));
	for (i = 20; i < 30; i++)
		order(&old, ev, i);
	ok(RUN("backup", "verify", bk), "backup verify");

	/* what the backup holds */
	snprintf(sql, sizeof sql, "%s/stagedoor.db", bk);
	assert_int_equal(sqlite3_open_v2(sql, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "SELECT public_id FROM orders ORDER BY id", -1, &st,
					    NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW && n_backed < 64)
		snprintf(ids[n_backed++], sizeof ids[0], "%s", sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(h);
	assert_int_equal(n_backed, 20);	/* every order acknowledged before it */

	/* the disk dies */
	stop_run(run);
	{
		char cmd[400];

		snprintf(cmd, sizeof cmd, "rm -rf '%s'", old.dir);
		assert_int_equal(system(cmd), 0);
	}

	/* a new box from the backup finishes what it held */
	ok(RUN("restore", bk, "--db", fresh.db), "restore");
	/* the restored box keeps the CA its devices trust, and its server
	 * certificate with its key */
	tls_of(&fresh, ca_back, sizeof ca_back);
	assert_string_equal(ca_back, ca);
	snprintf(log, sizeof log, "%s/run2.log", e->dir);
	run = start_run(&fresh, log);
	wait_checked(&fresh, 90000);
	stop_run(run);
	/* the same orders as the backup held, no more, no fewer */
	ids_of(sql, before, sizeof before);
	ids_of(fresh.db, after, sizeof after);
	assert_string_equal(after, before);
	assert_int_equal(tu_count(fresh.db, "SELECT count(*) FROM orders"), 20);
	for (i = 0; i < n_backed; i++) {
		char msg[4096];

		/* the provider holds its one message (one per idempotency key) */
		snprintf(msg, sizeof msg, "%s/new/tickets-%s.eml", fresh.mail, ids[i]);
		if (!file_exists(msg))
			fail_msg("order %s: no message at the provider", ids[i]);
	}
	/* every ticket sold before the backup is admitted once: the key came back */
	assert_int_equal(code_key_path(fresh.db, NULL, kp, sizeof kp), SD_OK);
	assert_int_equal(code_key_load(kp, key), SD_OK);
	assert_int_equal(sqlite3_open_v2(fresh.db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "SELECT code_id, event_id FROM tickets", -1, &st,
					    NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		char code[CODE_TEXT_MAX];

		code_make(key, sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), code);
		if (RUN("scan", code, "--db", fresh.db) != 0)
			fail_msg("ticket %lld not admitted: %s", (long long)sqlite3_column_int64(st, 0),
				 err);
		assert_int_equal(RUN("scan", code, "--db", fresh.db), 3);	/* already scanned */
		tickets++;
	}
	sqlite3_finalize(st);
	sqlite3_close(h);
	assert_int_equal(tickets, 20);
}

/* ---- what the backed-up box held ----------------------------------------------- */

static void sql_exec(const char *db, const char *sql)
{
	sqlite3 *h;
	char *msg = NULL;

	assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
	if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", sql, msg ? msg : "?");
	sqlite3_close(h);
}

/* A backup taken while workers held leases and a send was claimed: the
 * restored box ends those leases and releases the claim at once (its
 * workers need not wait out a lease and a stale claim, 2 minutes by
 * default), leaves scheduled entries and sent mail alone, and changes
 * neither the backup nor the old box. */
static void test_restore_takes_over_leases_and_claims(void **state)
{
	struct tu_env *e = *state;
	struct box b, fresh;
	char ev[32], bk[340], sql[1024];
	long long far = 4102444800000LL;	/* 2100: still leased, still scheduled */

	box_at(e, "box", &b);
	box_at(e, "box2", &fresh);
	snprintf(bk, sizeof bk, "%s/b1", e->dir);
	box_make(&b, ev, sizeof ev);
	order(&b, ev, 1);
	order(&b, ev, 2);
	snprintf(sql, sizeof sql,
		 "INSERT INTO stream (job_id, kind, payload, visible_at, lease_token, leased_by, "
		 "leased_at, deliveries, created_at) VALUES "
		 "('held', 'send_tickets', '{}', %lld, 42, 'old-box/1', 1, 1, 1), "
		 "('later', 'send_tickets', '{}', %lld, NULL, NULL, NULL, 0, 1); "
		 "INSERT INTO email_sends (order_id, kind, claimed_at) VALUES (1, 'tickets', %lld); "
		 "INSERT INTO email_sends (order_id, kind, claimed_at, sent_at, provider_message_id) "
		 "VALUES (2, 'tickets', 5, 6, 'm-2');", far, far, far);
	sql_exec(b.db, sql);
	ok(RUN("backup", bk, "--db", b.db), "backup");
	ok(RUN("restore", bk, "--db", fresh.db), "restore");
	assert_non_null(strstr(out, "1 lease ended, 1 mail claim released"));

	/* the lease is over, its token kept so the next claim counts the expiry */
	assert_int_equal(tu_countf(fresh.db, "SELECT count(*) FROM stream WHERE job_id = 'held' "
				   "AND lease_token = 42 AND visible_at < %lld", far), 1);
	assert_int_equal(tu_countf(fresh.db, "SELECT count(*) FROM stream WHERE job_id = 'later' "
				   "AND lease_token IS NULL AND visible_at = %lld", far), 1);
	assert_int_equal(tu_count(fresh.db, "SELECT count(*) FROM email_sends WHERE order_id = 1 "
				  "AND claimed_at = 0 AND sent_at IS NULL"), 1);
	assert_int_equal(tu_count(fresh.db, "SELECT count(*) FROM email_sends WHERE order_id = 2 "
				  "AND claimed_at = 5 AND sent_at = 6 AND provider_message_id = 'm-2'"), 1);
	/* the old box and the backup are as they were */
	assert_int_equal(tu_countf(b.db, "SELECT count(*) FROM stream WHERE job_id = 'held' AND "
				   "visible_at = %lld", far), 1);
	assert_int_equal(tu_countf(b.db, "SELECT count(*) FROM email_sends WHERE order_id = 1 AND "
				   "claimed_at = %lld", far), 1);
	ok(RUN("backup", "verify", bk), "verify after restore");
}

/* ---- refusals and damage --------------------------------------------------------- */

static void test_backup_files_are_private_and_checked(void **state)
{
	struct tu_env *e = *state;
	struct box b, other;
	char ev[32], bk[340], path[700], cmd[2048];
	mode_t old = umask(022);

	box_at(e, "box", &b);
	box_at(e, "other", &other);
	snprintf(bk, sizeof bk, "%s/b1", e->dir);
	box_make(&b, ev, sizeof ev);
	order(&b, ev, 1);
	ok(RUN("backup", bk, "--db", b.db), "backup");
	umask(old);
	{
		static const char *const files[][2] = {
			{ "", "700" }, { "/stagedoor.db", "600" }, { "/manifest.json", "600" },
			{ "/state", "700" }, { "/state/ticket.key", "600" }, { "/state/api.token", "600" },
		};
		size_t i;

		for (i = 0; i < sizeof files / sizeof files[0]; i++) {
			struct stat sb;
			char m[8];

			snprintf(path, sizeof path, "%s%s", bk, files[i][0]);
			assert_int_equal(stat(path, &sb), 0);
			snprintf(m, sizeof m, "%o", (unsigned)(sb.st_mode & 0777));
			if (strcmp(m, files[i][1]) != 0)
				fail_msg("%s has mode %s, want %s", path, m, files[i][1]);
		}
		/* one file: no -wal beside the copy */
		snprintf(path, sizeof path, "%s/stagedoor.db-wal", bk);
		assert_false(file_exists(path));
	}
	/* a second backup to the same place is refused and changes nothing */
	assert_int_equal(RUN("backup", bk, "--db", b.db), 2);
	assert_non_null(strstr(err, "never overwrites"));
	ok(RUN("backup", "verify", bk), "verify");

	/* restore refuses a box that exists, and a missing --db */
	assert_int_equal(RUN("restore", bk, "--db", b.db), 2);
	assert_non_null(strstr(err, "never overwrites a box"));
	assert_int_equal(RUN("restore", bk), 2);
	assert_int_equal(tu_count(b.db, "SELECT count(*) FROM orders"), 1);

	/* damage, each found and named by verify, and refused by restore */
	snprintf(cmd, sizeof cmd, "printf x >> '%s/state/ticket.key'", bk);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(RUN("backup", "verify", bk), 1);
	assert_non_null(strstr(err, "state/ticket.key is not the file that was backed up"));
	assert_int_equal(RUN("restore", bk, "--db", other.db), 2);
	assert_false(file_exists(other.db));
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && '%s' backup '%s' --db '%s' >/dev/null && "
		 "touch '%s/state/stray'", bk, tu_bin(), bk, b.db, bk);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(RUN("backup", "verify", bk), 1);
	assert_non_null(strstr(err, "does not list"));
	snprintf(cmd, sizeof cmd, "rm '%s/state/stray' '%s/state/api.token'", bk, bk);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(RUN("backup", "verify", bk), 1);
	assert_non_null(strstr(err, "state/api.token is missing"));
	snprintf(cmd, sizeof cmd, "echo '{}' > '%s/manifest.json'", bk);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(RUN("backup", "verify", bk), 1);
	assert_non_null(strstr(err, "not a Stagedoor backup manifest"));
	assert_int_equal(RUN("backup", "verify", e->dir), 1);
	assert_non_null(strstr(err, "no readable manifest"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_restore_drill, tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_restore_takes_over_leases_and_claims,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_backup_files_are_private_and_checked,
						tu_setup_real_nodb, tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
