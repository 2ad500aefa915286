/*
 * test_soak.c: the crash soak (tools/chaos, build/chaos or $CHAOS_BIN).
 *
 * The verifier is tested on a database the demo made (20 orders, maildir
 * transport): it passes a clean one and names what is broken when the
 * test breaks it (a second message, a miscounted sale, a bad PDF, a job
 * left in the stream).  Then on the demo after the box office changed it
 * (`order resend`, `set-email` and a resend, `cancel` twice, an order that
 * buys the seats given back; the jobs run by `relay --drain` and `worker
 * --drain`) with a log of those changes as the soak writes one: it passes,
 * and it catches a resend delivered twice, a resend never made, a resend
 * that went to the old address, a cancellation counted back twice, and a
 * resend the log says was made that the box does not hold.
 *
 * The short soak (150 orders, 100 under the sanitizers, 20 worker kills, 4
 * workers, `make soak` runs 2000 and 100) runs the real appliance through
 * build/chaos under the queue's controls (--controls: a rate, two
 * concurrency limits, render_tickets paused and resumed) and reads the
 * figures it prints: every kind of attack happened, the box office resent,
 * re-addressed and cancelled orders by both doors while it did, the small
 * event sold out and sold its given-back seats again, one email per intent
 * (tickets, each resend, each cancellation), none delivered twice, none to
 * an old address, nothing lost, and the harness's own verdict is ok.  The
 * verdict's tests on the demo's box break it on purpose: a second message,
 * a missing one, the email of an order the database lacks, an owed email
 * whose key holds another order's, a code that admits another order's seat.
 *
 * The short power-cut soak (120 orders, 80 under the sanitizers, 12 cuts,
 * half of them torn; `make powercut` runs 3000 and 200) runs the box on tools/powercut and cuts its
 * power: no acknowledged order lost, no corrupt database, every order done
 * once; again with the maildir transport writing on the cut disk and run
 * backing up every second onto it (every named backup verifies after
 * every cut); again with the intake's flushes held 500 ms each (strace), so
 * that cuts fall while commits wait for the disk: no email for an order a
 * cut took, no owed email taken for another order's, no code admitting
 * another order's seat.  And the same soak on a box whose connections commit at
 * synchronous=OFF (the db_synchronous_off failpoint) must see what such a
 * box loses, or it could not tell a durable box from one that is not.
 * These need root and /dev/fuse, as make test has them.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

/* The soaks under the sanitizers run fewer orders: the same paths are
 * taken (every failpoint, kill and technique is asserted as in rel), in
 * the time the suite has. */
#if defined(__SANITIZE_ADDRESS__)
#define SHORT_ORDERS 100
#define SHORT_SQS 150
#define CUT_ORDERS 80
#else
#define SHORT_ORDERS 150
#define SHORT_SQS 200
#define CUT_ORDERS 120
#endif
#define SLOW_ORDERS 80
#define STR_(x) #x
#define STR(x) STR_(x)


extern char **environ;

static const char *chaos_bin(void)
{
	const char *b = getenv("CHAOS_BIN");

	return b && *b ? b : "build/chaos";
}

/*
 * chaos: run build/chaos with args (NULL-terminated), in cwd (NULL: ours);
 * its stdout into out, its stderr into err.  Returns the exit status, -1
 * for a signal death.
 */
static int chaos(const struct tu_env *e, const char *const *args, char *out, size_t out_size,
		 char *err, size_t err_size)
{
	char out_path[400], err_path[400], bin[PATH_MAX];
	const char *argv[40];
	posix_spawn_file_actions_t fa;
	unsigned char *text;
	size_t size;
	pid_t pid;
	int n = 0, i, status = -1;

	assert_non_null(realpath(chaos_bin(), bin));
	argv[n++] = bin;
	for (i = 0; args[i] && n < 39; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	snprintf(out_path, sizeof out_path, "%s/chaos.out", e->dir);
	snprintf(err_path, sizeof err_path, "%s/chaos.err", e->dir);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addopen(&fa, 2, err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ) != 0)
		fail_msg("cannot run %s (make build/chaos)", argv[0]);
	posix_spawn_file_actions_destroy(&fa);
	while (waitpid(pid, &status, 0) < 0)
		;
	text = tu_slurp(out_path, &size);
	snprintf(out, out_size, "%s", (char *)text);
	free(text);
	text = tu_slurp(err_path, &size);
	snprintf(err, err_size, "%s", (char *)text);
	free(text);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The figure "name N" on a line of its own in out; fails when absent. */
static long figure(const char *out, const char *name)
{
	char want[80];
	const char *p = out;
	size_t len;

	len = (size_t)snprintf(want, sizeof want, "%s ", name);
	for (;;) {
		if (strncmp(p, want, len) == 0)
			return atol(p + len);
		p = strchr(p, '\n');
		if (!p || !*++p)
			fail_msg("no figure '%s' in:\n%s", name, out);
	}
}

/* A soak that did not end as expected: its figures, then every line of its
 * stderr that is not a progress line (what broke), then the test fails.
 * Printed here, not in the failure message, which cmocka cuts short. */
static void soak_failed(int rc, int want, const char *out, const char *err)
{
	const char *p = err;

	fprintf(stderr, "chaos exited %d, not %d; its figures:\n%s\nwhat it said:\n", rc, want,
		out);
	while (*p) {
		size_t n = strcspn(p, "\n");

		if (strncmp(p, "chaos: [", 8) != 0)
			fprintf(stderr, "%.*s\n", (int)n, p);
		p += n + (p[n] == '\n');
	}
	fail_msg("chaos exited %d, not %d (see above)", rc, want);
}

/* ---- the verifier on the demo's database -------------------------------- */

struct demo {
	struct tu_env *env;
	char db[400];
	char maildir[400];
	char actions[400];	/* demo_changes: the log of its changes */
	char ids[4][16];	/* demo_changes: orders 1 to 3, and the one that bought
				 * order 3's seats again */
	long seats3;		/* order 3's seats */
	char out[16384];
	char err[16384];
};

static int demo_setup(void **state)
{
	struct demo *d = calloc(1, sizeof *d);
	char cmd[PATH_MAX + 600], bin[PATH_MAX];

	assert_non_null(d);
	tu_setup_real_nodb((void **)&d->env);
	assert_non_null(realpath(tu_bin(), bin));
	/* the demo makes ./var/demo: run it in the test's own directory */
	snprintf(cmd, sizeof cmd, "cd '%s' && '%s' demo --orders 20 >demo.log 2>&1", d->env->dir,
		 bin);
	assert_int_equal(system(cmd), 0);
	snprintf(d->db, sizeof d->db, "%s/var/demo/stagedoor.db", d->env->dir);
	snprintf(d->maildir, sizeof d->maildir, "%s/var/demo/maildir", d->env->dir);
	*state = d;
	return 0;
}

static int demo_teardown(void **state)
{
	struct demo *d = *state;

	tu_teardown((void **)&d->env);
	free(d);
	return 0;
}

static int verify(struct demo *d)
{
	const char *args[] = { "--verify-only", "--db", d->db, "--maildir", d->maildir,
			       "--orders", "20", "--door", d->env->dir, NULL };

	return chaos(d->env, args, d->out, sizeof d->out, d->err, sizeof d->err);
}

/* the verifier with the log of the changes (demo_changes) */
static int verify_changes(struct demo *d)
{
	const char *args[] = { "--verify-only", "--db", d->db, "--maildir", d->maildir,
			       "--orders", "21", "--actions", d->actions, "--door", d->env->dir,
			       NULL };

	return chaos(d->env, args, d->out, sizeof d->out, d->err, sizeof d->err);
}

static void sql(struct demo *d, const char *text)
{
	sqlite3 *db;
	char *msg = NULL;

	assert_int_equal(sqlite3_open(d->db, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_exec(db, text, NULL, NULL, &msg) != SQLITE_OK)
		fail_msg("%s: %s", text, msg);
	sqlite3_close(db);
}

/* A file name in DIR (not . or ..). */
static void first_file(const char *dir, char *name, size_t size)
{
	DIR *dp = opendir(dir);
	struct dirent *de;

	assert_non_null(dp);
	while ((de = readdir(dp)) && de->d_name[0] == '.')
		;
	assert_non_null(de);
	snprintf(name, size, "%s", de->d_name);
	closedir(dp);
}

static void test_verify_clean_demo(void **state)
{
	struct demo *d = *state;

	if (verify(d) != 0)
		fail_msg("the demo's database did not verify:\n%s%s", d->out, d->err);
	assert_int_equal(figure(d->out, "orders"), 20);
	assert_int_equal(figure(d->out, "pdfs_checked"), 20);
	assert_int_equal(figure(d->out, "messages"), 20);
	assert_int_equal(figure(d->out, "duplicates_delivered"), 0);
	assert_int_equal(figure(d->out, "lost"), 0);
	/* every code in every email admits a seat of its own order */
	assert_int_equal(figure(d->out, "codes_scanned"),
			 tu_count(d->db, "SELECT count(*) FROM tickets"));
	assert_int_equal(figure(d->out, "codes_admitting_another_orders_seat"), 0);
	assert_int_equal(figure(d->out, "emails_for_orders_not_in_the_database"), 0);
	assert_int_equal(figure(d->out, "owed_emails_absorbed_as_duplicates"), 0);
	assert_non_null(strstr(d->out, "\nresult ok\n"));

	/* the number of orders is checked when given */
	{
		const char *args[] = { "--verify-only", "--db", d->db, "--maildir", d->maildir,
				       "--orders", "21", NULL };

		assert_int_equal(chaos(d->env, args, d->out, sizeof d->out, d->err,
				       sizeof d->err), 1);
		assert_non_null(strstr(d->err, "broken: orders: 21 placed, 20 in the database"));
	}
}

static void test_verify_second_message(void **state)
{
	struct demo *d = *state;
	char dir[450], name[300], from[800], to[800], cmd[1700];

	snprintf(dir, sizeof dir, "%s/new", d->maildir);
	first_file(dir, name, sizeof name);
	snprintf(from, sizeof from, "%s/%s", dir, name);
	snprintf(to, sizeof to, "%s/cur/again.eml", d->maildir);
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(verify(d), 1);
	assert_int_equal(figure(d->out, "duplicates_delivered"), 1);
	assert_int_equal(figure(d->out, "messages"), 21);
	assert_non_null(strstr(d->err, "broken: messages: order "));
	assert_non_null(strstr(d->out, "\nresult broken\n"));
}

static void test_verify_missing_message(void **state)
{
	struct demo *d = *state;
	char dir[450], name[300], path[800];

	snprintf(dir, sizeof dir, "%s/new", d->maildir);
	first_file(dir, name, sizeof name);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(verify(d), 1);
	assert_int_equal(figure(d->out, "lost"), 1);
	assert_non_null(strstr(d->err, "no message at the provider"));
}

/* demo_pub: the public id of demo order n (1, 2, ...) */
static void demo_pub(struct demo *d, int n, char *pub, size_t size)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	char q[96];

	snprintf(q, sizeof q, "SELECT public_id FROM orders WHERE id = %d", n);
	assert_int_equal(sqlite3_open_v2(d->db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	snprintf(pub, size, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
}

#define LOST_ORDER "T22222222A"	/* a public id the database does not hold */

/* The email of an order a power cut took: its message at the provider
 * names an order the database does not hold. */
static void test_verify_email_of_a_lost_order(void **state)
{
	struct demo *d = *state;
	char pub[16], cmd[1600];

	demo_pub(d, 1, pub, sizeof pub);
	snprintf(cmd, sizeof cmd, "sed 's/%s/%s/g' '%s/new/tickets-%s.eml' >'%s/new/tickets-%s.eml'",
		 pub, LOST_ORDER, d->maildir, pub, d->maildir, LOST_ORDER);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(verify(d), 1);
	assert_int_equal(figure(d->out, "emails_for_orders_not_in_the_database"), 1);
	assert_int_equal(figure(d->out, "owed_emails_absorbed_as_duplicates"), 0);
	assert_non_null(strstr(d->err, "broken: messages: tickets-" LOST_ORDER " is the email of "
			       "order " LOST_ORDER ", which the database does not hold"));
}

/* The order that got a lost order's row back, and its key: the provider
 * holds the lost order's email under it, and this order's buyer has none. */
static void test_verify_owed_email_absorbed(void **state)
{
	struct demo *d = *state;
	char pub[16], cmd[1600];

	demo_pub(d, 1, pub, sizeof pub);
	snprintf(cmd, sizeof cmd, "sed -i 's/Order %s/Order %s/' '%s/new/tickets-%s.eml'", pub,
		 LOST_ORDER, d->maildir, pub);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(verify(d), 1);
	assert_int_equal(figure(d->out, "emails_for_orders_not_in_the_database"), 1);
	assert_int_equal(figure(d->out, "owed_emails_absorbed_as_duplicates"), 1);
	assert_int_equal(figure(d->out, "lost"), 1);
	assert_int_equal(figure(d->out, "lost.tickets"), 1);
}

/* A code in one order's email that admits another order's seat: order 1's
 * email carries order 2's PDF. */
static void test_verify_code_of_another_order(void **state)
{
	struct demo *d = *state;
	char p1[16], p2[16], cmd[3000];

	demo_pub(d, 1, p1, sizeof p1);
	demo_pub(d, 2, p2, sizeof p2);
	/* order 1's head and text, then order 2's attachment */
	snprintf(cmd, sizeof cmd,
		 "cd '%s/new' && { sed -n '1,/^Content-Type: application.pdf/p' tickets-%s.eml | "
		 "sed '$d'; sed -n '/^Content-Type: application.pdf/,$p' tickets-%s.eml; } "
		 ">swap && mv swap tickets-%s.eml", d->maildir, p1, p2, p1);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(verify(d), 1);
	assert_true(figure(d->out, "codes_admitting_another_orders_seat") >= 1);
	snprintf(cmd, sizeof cmd, "broken: codes: a code in order %s's email (tickets-%s) admits a "
		 "seat of order %s", p1, p1, p2);
	assert_non_null(strstr(d->err, cmd));
}

static void test_verify_counter_off(void **state)
{
	struct demo *d = *state;

	sql(d, "UPDATE sales_counters SET seats_sold = seats_sold + 1");
	assert_int_equal(verify(d), 1);
	assert_non_null(strstr(d->err, "broken: counters: event 1 counts"));
}

static void test_verify_bad_pdf(void **state)
{
	struct demo *d = *state;
	char dir[450], name[300], path[800];
	FILE *f;

	snprintf(dir, sizeof dir, "%s/var/demo/blobs/tickets", d->env->dir);
	first_file(dir, name, sizeof name);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("%PDF-1.4\nnot really\n", f);
	fclose(f);
	assert_int_equal(verify(d), 1);
	assert_int_equal(figure(d->out, "pdfs_checked"), 19);
	assert_non_null(strstr(d->err, "broken: pdfs: order "));
	assert_non_null(strstr(d->err, "qpdf --check"));
}

static void test_verify_job_left(void **state)
{
	struct demo *d = *state;

	sql(d, "INSERT INTO stream (job_id, kind, payload, visible_at, created_at) "
	       "VALUES ('left-behind', 'noop', '{}', 0, 0)");
	assert_int_equal(verify(d), 1);
	assert_non_null(strstr(d->err, "broken: stream: 1 entries left"));
}

/* ---- the verifier on the demo after the box office changed it ----------- */

/* `stagedoor ARGS` in the test's directory with --db; exit 0 wanted, its
 * stdout (first line) into out when out is not NULL */
static void demo_cli(struct demo *d, char *out, size_t size, const char *args)
{
	char cmd[PATH_MAX + 2400], bin[PATH_MAX], path[600];
	unsigned char *text;
	size_t n;

	assert_non_null(realpath(tu_bin(), bin));
	snprintf(path, sizeof path, "%s/cli.out", d->env->dir);
	snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s --db '%s' >'%s' 2>>cli.err", d->env->dir,
		 bin, args, d->db, path);
	if (system(cmd) != 0)
		fail_msg("stagedoor %s failed (see %s/cli.err)", args, d->env->dir);
	if (out) {
		text = tu_slurp(path, &n);
		snprintf(out, size, "%.*s", (int)strcspn((char *)text, "\n"), (char *)text);
		free(text);
	}
}

static int log_order_row(void *arg, int ncols, char **vals, char **names)
{
	FILE *f = arg;

	(void)ncols;
	(void)names;
	fprintf(f, "placed idx=%ld order=%s event=%s seats=%s email=%s via=cli t0=0 t1=0\n",
		atol(vals[0]) - 1, vals[1], vals[2], vals[3], vals[4]);
	return 0;
}

/*
 * The box office at work on the demo, as the soak would log it: order 1
 * resent, order 2 given a new address and resent, order 3 cancelled twice,
 * a new order that buys order 3's seats again; then the relay and a worker
 * drain the jobs into the demo's maildir.
 */
static void demo_changes(struct demo *d)
{
	char line[600], sqlt[200];
	sqlite3 *db;
	FILE *f;
	int i;

	snprintf(d->actions, sizeof d->actions, "%s/actions.log", d->env->dir);
	assert_non_null(f = fopen(d->actions, "w"));
	assert_int_equal(sqlite3_open(d->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "SELECT id, public_id, event_id, seats, buyer_email FROM "
				      "orders ORDER BY id", log_order_row, f, NULL), SQLITE_OK);
	for (i = 0; i < 3; i++) {
		sqlite3_stmt *st;

		snprintf(sqlt, sizeof sqlt, "SELECT public_id, seats FROM orders WHERE id = %d", i + 1);
		assert_int_equal(sqlite3_prepare_v2(db, sqlt, -1, &st, NULL), SQLITE_OK);
		assert_int_equal(sqlite3_step(st), SQLITE_ROW);
		snprintf(d->ids[i], sizeof d->ids[i], "%s", (const char *)sqlite3_column_text(st, 0));
		if (i == 2)
			d->seats3 = sqlite3_column_int(st, 1);
		sqlite3_finalize(st);
	}
	sqlite3_close(db);

	snprintf(line, sizeof line, "order resend %s", d->ids[0]);
	demo_cli(d, NULL, 0, line);
	fprintf(f, "resend order=%s via=cli n=1 key=- t0=1 t1=2\n", d->ids[0]);
	snprintf(line, sizeof line, "order set-email %s new2@example.org", d->ids[1]);
	demo_cli(d, NULL, 0, line);
	fprintf(f, "email order=%s via=cli to=new2@example.org t0=3 t1=4\n", d->ids[1]);
	snprintf(line, sizeof line, "order resend %s", d->ids[1]);
	demo_cli(d, NULL, 0, line);
	fprintf(f, "resend order=%s via=cli n=1 key=- t0=5 t1=6\n", d->ids[1]);
	snprintf(line, sizeof line, "order cancel %s", d->ids[2]);
	demo_cli(d, NULL, 0, line);
	fprintf(f, "cancel order=%s via=cli already=0 seats=%ld again=0 t0=7 t1=8\n", d->ids[2],
		d->seats3);
	demo_cli(d, NULL, 0, line);
	fprintf(f, "cancel order=%s via=cli already=1 seats=0 again=1 t0=9 t1=10\n", d->ids[2]);
	demo_cli(d, d->ids[3], sizeof d->ids[3], "order add --event 1 --name Resale --email "
		 "resale@example.org --seats 2");
	fprintf(f, "placed idx=20 order=%s event=1 seats=2 email=resale@example.org via=cli "
		"t0=11 t1=12\n", d->ids[3]);
	assert_int_equal(fclose(f), 0);

	/* twice: the new order's render queues its send through the outbox */
	snprintf(line, sizeof line, "worker --drain --mail-url maildir:%s", d->maildir);
	for (i = 0; i < 2; i++) {
		demo_cli(d, NULL, 0, "relay --drain");
		demo_cli(d, NULL, 0, line);
	}
}

static void test_verify_changes_clean(void **state)
{
	struct demo *d = *state;

	demo_changes(d);
	if (verify_changes(d) != 0)
		fail_msg("the changed demo did not verify:\n%s%s", d->out, d->err);
	assert_int_equal(figure(d->out, "orders"), 21);
	assert_int_equal(figure(d->out, "intents.tickets"), 21);
	assert_int_equal(figure(d->out, "intents.resend"), 2);
	assert_int_equal(figure(d->out, "messages.resend"), 2);
	assert_int_equal(figure(d->out, "intents.cancel"), 1);
	assert_int_equal(figure(d->out, "messages.cancel"), 1);
	assert_int_equal(figure(d->out, "messages"), 21 + 2 + 1);
	assert_int_equal(figure(d->out, "orders_cancelled"), 1);
	assert_int_equal(figure(d->out, "tickets_cancelled"), d->seats3);
	assert_int_equal(figure(d->out, "seats_resold"), d->seats3 < 2 ? d->seats3 : 2);
	assert_int_equal(figure(d->out, "changes.resend_cli"), 2);
	assert_int_equal(figure(d->out, "changes.readdress_cli"), 1);
	assert_int_equal(figure(d->out, "changes.resent_after_readdress"), 1);
	assert_int_equal(figure(d->out, "changes.cancel_cli"), 1);
	assert_int_equal(figure(d->out, "changes.cancel_again"), 1);
	assert_int_equal(figure(d->out, "duplicates_delivered"), 0);
	assert_int_equal(figure(d->out, "messages_to_wrong_address"), 0);
	assert_int_equal(figure(d->out, "lost"), 0);
	assert_non_null(strstr(d->out, "\nresult ok\n"));
}

/* the box sent order 1's resend twice */
static void test_verify_resend_delivered_twice(void **state)
{
	struct demo *d = *state;
	char cmd[1200], want[120];

	demo_changes(d);
	snprintf(cmd, sizeof cmd, "cp '%s/new/tickets-%s-r1.eml' '%s/cur/again.eml'", d->maildir,
		 d->ids[0], d->maildir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(verify_changes(d), 1);
	assert_int_equal(figure(d->out, "duplicates.resend"), 1);
	assert_int_equal(figure(d->out, "duplicates_delivered"), 1);
	snprintf(want, sizeof want, "broken: messages: order 1 (%s) has 2 messages for resend r1",
		 d->ids[0]);
	assert_non_null(strstr(d->err, want));
}

/* a message for a resend nobody asked for: order 1's second */
static void test_verify_resend_never_made(void **state)
{
	struct demo *d = *state;
	char cmd[1200], want[200];
	const char *p = d->ids[0];

	demo_changes(d);
	snprintf(cmd, sizeof cmd, "sed 's/<tickets-%s-r1@/<tickets-%s-r2@/' "
		 "'%s/new/tickets-%s-r1.eml' >'%s/new/tickets-%s-r2.eml'", p, p, d->maildir, p,
		 d->maildir, p);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(verify_changes(d), 1);
	assert_int_equal(figure(d->out, "messages_for_unmade_intents"), 1);
	snprintf(want, sizeof want, "broken: messages: order %s made 1 resends, and the provider "
		 "holds tickets-%s-r2, an intent never made", p, p);
	assert_non_null(strstr(d->err, want));
}

/* order 2's resend, asked after its new address, went to the old one */
static void test_verify_resend_to_old_address(void **state)
{
	struct demo *d = *state;
	char cmd[1200], old[200] = "";
	sqlite3 *db;
	sqlite3_stmt *st;

	demo_changes(d);
	assert_int_equal(sqlite3_open(d->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT detail FROM order_changes WHERE order_id = 2 "
					    "AND kind = 'email'", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	snprintf(old, sizeof old, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
	snprintf(cmd, sizeof cmd, "sed -i 's/<new2@example.org>/<%s>/' '%s/new/tickets-%s-r1.eml'",
		 old, d->maildir, d->ids[1]);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(verify_changes(d), 1);
	assert_int_equal(figure(d->out, "messages_to_wrong_address"), 1);
	snprintf(cmd, sizeof cmd, "broken: address: tickets-%s-r1 (order %s)", d->ids[1],
		 d->ids[1]);
	assert_non_null(strstr(d->err, cmd));
	assert_non_null(strstr(d->err, "an old address: it was asked after the address became "
			       "new2@example.org"));
}

/* the cancellation of order 3 counted back twice */
static void test_verify_cancel_counted_twice(void **state)
{
	struct demo *d = *state;
	char text[200];

	demo_changes(d);
	snprintf(text, sizeof text, "UPDATE sales_counters SET orders = orders - 1, "
		 "seats_sold = seats_sold - %ld WHERE event_id = 1", d->seats3);
	sql(d, text);
	assert_int_equal(verify_changes(d), 1);
	assert_non_null(strstr(d->err, "broken: counters: event 1 counts"));
}

/* the soak was told of a resend of order 4 that the box does not hold */
static void test_verify_resend_acknowledged_not_made(void **state)
{
	struct demo *d = *state;
	char pub[16] = "";
	sqlite3 *db;
	sqlite3_stmt *st;
	FILE *f;

	demo_changes(d);
	assert_int_equal(sqlite3_open(d->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT public_id FROM orders WHERE id = 4", -1,
					    &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	snprintf(pub, sizeof pub, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(db);
	assert_non_null(f = fopen(d->actions, "a"));
	fprintf(f, "resend order=%s via=api n=1 key=k1 t0=13 t1=14\n", pub);
	fclose(f);
	assert_int_equal(verify_changes(d), 1);
	assert_non_null(strstr(d->err, "broken: changes: order "));
	assert_non_null(strstr(d->err, "the soak was told of resend r1, the order has made 0"));
}

/* ---- the soaks ----------------------------------------------------------- */

/* The verdict of a soak that held: n orders, each standing one with its PDF;
 * one message per intent (its tickets, each resend, each cancellation),
 * but for those a cancellation overtook; none lost, none delivered twice,
 * none for an intent never made, none to an old address. */
static void assert_verdict_clean(const char *out, long n)
{
	static const char *const kinds[] = { "tickets", "resend", "cancel", NULL };
	long cancelled = figure(out, "orders_cancelled");
	char name[64];
	int i;

	assert_int_equal(figure(out, "orders"), n);
	assert_true(figure(out, "pdfs_checked") >= n - cancelled);
	assert_true(figure(out, "pdfs_checked") <= n);
	for (i = 0; kinds[i]; i++) {
		snprintf(name, sizeof name, "duplicates.%s", kinds[i]);
		assert_int_equal(figure(out, name), 0);
		snprintf(name, sizeof name, "lost.%s", kinds[i]);
		assert_int_equal(figure(out, name), 0);
	}
	assert_int_equal(figure(out, "intents.tickets"), n);
	assert_int_equal(figure(out, "messages.tickets") + figure(out, "messages.resend") +
			 figure(out, "intents_not_owed_after_cancel"),
			 figure(out, "intents.tickets") + figure(out, "intents.resend"));
	assert_int_equal(figure(out, "messages.cancel"), cancelled);
	assert_int_equal(figure(out, "intents.cancel"), cancelled);
	assert_int_equal(figure(out, "messages"), figure(out, "messages.tickets") +
			 figure(out, "messages.resend") + figure(out, "messages.cancel"));
	assert_int_equal(figure(out, "messages_for_unmade_intents"), 0);
	assert_int_equal(figure(out, "messages_to_wrong_address"), 0);
	assert_int_equal(figure(out, "duplicates_delivered"), 0);
	assert_int_equal(figure(out, "lost"), 0);
	assert_non_null(strstr(out, "\nresult ok\n"));
}

/* A kill soak's changes (its default shares: 10% resent, 5% re-addressed,
 * 5% cancelled; the doors take turns): each made by both doors, API resends
 * sent twice with one key without a second resend, resends after a new
 * address (their messages went to it: assert_verdict_clean), cancellations
 * (every third twice) whose seats were sold again, and the small event
 * sold out. */
static void assert_changes_made(const char *out, long n)
{
	long resends = n / 10, readdresses = n / 20, cancels = n / 20;

	assert_int_equal(figure(out, "changes_planned"), resends + readdresses + cancels);
	assert_int_equal(figure(out, "changes_dropped"), 0);
	assert_true(figure(out, "changes.resend_cli") > 0);
	assert_true(figure(out, "changes.resend_api") > 0);
	assert_int_equal(figure(out, "changes.resend_cli") + figure(out, "changes.resend_api"),
			 resends + readdresses);
	assert_true(figure(out, "changes.resend_api_same_key_again") > 0);
	assert_int_equal(figure(out, "changes.readdress_cli"), (readdresses + 1) / 2);
	assert_int_equal(figure(out, "changes.readdress_api"), readdresses / 2);
	assert_true(figure(out, "changes.resent_after_readdress") >= readdresses);
	assert_int_equal(figure(out, "changes.cancel_cli"), (cancels + 1) / 2);
	assert_int_equal(figure(out, "changes.cancel_api"), cancels / 2);
	assert_int_equal(figure(out, "changes.cancel_again"), (cancels + 2) / 3);
	assert_int_equal(figure(out, "orders_cancelled"), cancels);
	assert_true(figure(out, "intents.resend") >= resends + readdresses);
	assert_true(figure(out, "messages.resend") > 0);
	assert_true(figure(out, "log.sold_out_refusals") > 0);
	assert_int_equal(figure(out, "log.orders_placed"), n);
	assert_true(figure(out, "seats_resold") > 0);
	assert_int_equal(figure(out, "tickets_live"),
			 figure(out, "log.seats_sold") - figure(out, "log.seats_cancelled"));
}

/* assert_sqs_clean: the external boto3 workers' verdict: every task's
 * effect once, none lost, the box's queues empty, the workers killed */
static void assert_sqs_clean(const char *out, long tasks)
{
	assert_non_null(strstr(out, "sqs.result ok\n"));
	assert_int_equal(figure(out, "sqs.tasks"), tasks);
	assert_int_equal(figure(out, "sqs.effects"), tasks);
	assert_int_equal(figure(out, "sqs.duplicate_effects"), 0);
	assert_int_equal(figure(out, "sqs.lost"), 0);
	assert_int_equal(figure(out, "sqs.left_in_queue"), 0);
	assert_int_equal(figure(out, "sqs.dead_letters"), 0);
	assert_true(figure(out, "sqs.worker_kills") >= 20);
	assert_true(figure(out, "sqs.messages_received") >= tasks);
}

static void test_short_soak(void **state)
{
	struct tu_env *e = *state;
	const char *args[] = { "--bin", tu_bin(), "--mailsink", "build/mailsink", "--orders",
			       STR(SHORT_ORDERS), "--kills", "20", "--workers", "4", "--seed",
			       "20261130", "--sqs-tasks", STR(SHORT_SQS), "--sqs-kills", "20",
			       "--controls", NULL };
	static const char *const techniques[] = { "check_state", "unique_claim", "provider_key",
						  "processed_jobs", NULL };
	static char out[16384], err[65536];
	char name[64], mname[80];
	int rc = chaos(e, args, out, sizeof out, err, sizeof err), i;

	if (rc != 0)
		soak_failed(rc, 0, out, err);
	assert_true(figure(out, "kills") >= 20);
	assert_int_equal(figure(out, "sigstops"), 1);
	assert_int_equal(figure(out, "appliance_kills"), 2);
	/* the queue's controls held the box: render_tickets paused and resumed */
	assert_true(figure(out, "controls.pauses") >= 1);
	/* every failpoint's window was hit and every technique absorbed runs */
	assert_true(figure(out, "failpoint.after_render_before_update") > 0);
	assert_true(figure(out, "failpoint.after_work_before_ack") > 0);
	assert_true(figure(out, "failpoint.after_send_before_mark") > 0);
	assert_true(figure(out, "relay_duplicates") > 0);
	assert_true(figure(out, "reclaimed_jobs") > 0);
	assert_true(figure(out, "absorbed.check_state") > 0);
	assert_true(figure(out, "absorbed.unique_claim") > 0);
	assert_true(figure(out, "absorbed.processed_jobs") > 0);
	assert_true(figure(out, "absorbed.provider_key") > 0);
	assert_true(figure(out, "provider_replays") >= figure(out, "absorbed.provider_key"));
	/* the appliance's own /metrics (counters its worker processes share)
	 * holds at least what its log says: a worker killed between counting
	 * and logging leaves a count without a line, never a line without one */
	for (i = 0; techniques[i]; i++) {
		snprintf(name, sizeof name, "absorbed.%s", techniques[i]);
		snprintf(mname, sizeof mname, "metrics.absorbed.%s", techniques[i]);
		if (figure(out, mname) < figure(out, name))
			fail_msg("%s %ld < %s %ld", mname, figure(out, mname), name,
				 figure(out, name));
	}
	assert_true(figure(out, "metrics.handler_runs") >= 3 * SHORT_ORDERS);	/* 3 per order */
	assert_changes_made(out, SHORT_ORDERS);
	assert_verdict_clean(out, SHORT_ORDERS);
	assert_sqs_clean(out, SHORT_SQS);
	print_message("    one email per intent: tickets %ld of %ld orders, resends %ld of %ld, "
		      "cancellations %ld of %ld; %ld seats sold again\n",
		      figure(out, "messages.tickets"), figure(out, "intents.tickets"),
		      figure(out, "messages.resend"), figure(out, "intents.resend"),
		      figure(out, "messages.cancel"), figure(out, "intents.cancel"),
		      figure(out, "seats_resold"));
}

/*
 * Two boxes on one PostgreSQL database (the suite's schema): workers of
 * both killed, each whole box killed once, orders resent, re-addressed and
 * cancelled through either box's API and the CLI meanwhile, and the verdict
 * read from PostgreSQL itself: every order, its PDF and one email per
 * intent, counters exact, given-back seats sold again once.
 */
static void test_two_box_soak_on_postgresql(void **state)
{
	struct tu_env *e = *state;
	const char *args[] = { "--bin", tu_bin(), "--mailsink", "build/mailsink", "--orders", "200",
			       "--kills", "20", "--workers", "2", "--seed", "20261202", "--pg",
			       e->db_path, "--boxes", "2", "--sqs-tasks", "200", "--sqs-kills", "20",
			       NULL };
	static char out[16384], err[65536];
	int rc = chaos(e, args, out, sizeof out, err, sizeof err);

	if (rc != 0)
		soak_failed(rc, 0, out, err);
	assert_int_equal(figure(out, "boxes"), 2);
	assert_true(figure(out, "kills") >= 20);
	assert_int_equal(figure(out, "appliance_kills"), 2);
	assert_true(figure(out, "failpoint.after_work_before_ack") > 0);
	assert_true(figure(out, "reclaimed_jobs") > 0);
	assert_true(figure(out, "metrics.handler_runs") > 0);
	assert_changes_made(out, 200);
	assert_verdict_clean(out, 200);
	assert_sqs_clean(out, 200);
}

/* ---- a standby takes over ------------------------------------------------ */

/* tools/pg.sh CMD ARGS..., its output (the URI it prints) into out */
static int pg_sh(const struct tu_env *e, const char *const *args, char *out, size_t size)
{
	const char *argv[8] = { "/bin/sh", "tools/pg.sh" };
	char path[400], *text;
	size_t n = 0;
	int i, rc;

	for (i = 0; args[i] && i < 5; i++)
		argv[2 + i] = args[i];
	argv[2 + i] = NULL;
	snprintf(path, sizeof path, "%s/pg_sh.out", e->dir);
	rc = tu_exec(argv, path, NULL, 120000);
	text = (char *)tu_slurp(path, &n);
	if (rc != 0)		/* what pg.sh said, for the log */
		print_message("    pg.sh %s: exit %d: %.2000s\n", args[0], rc, text);
	if (out)
		snprintf(out, size, "%.*s", (int)strcspn(text, "\n"), text);
	free(text);
	return rc;
}

static int pair_teardown(void **state)
{
	struct tu_env *e = *state;
	char p[400], sdir[400];

	snprintf(p, sizeof p, "%s/primary", e->dir);
	snprintf(sdir, sizeof sdir, "%s/standby", e->dir);
	pg_sh(e, (const char *const[]){ "stop", sdir, NULL }, NULL, 0);
	pg_sh(e, (const char *const[]){ "stop", p, NULL }, NULL, 0);
	return tu_teardown(state);
}

/*
 * Two boxes on a primary with a synchronous standby (its own cluster, made
 * here: pg_basebackup, synchronous_standby_names); once half the orders are
 * acknowledged the primary is killed and the standby promoted.  The boxes
 * reach the new primary by themselves (two hosts in the URI,
 * target_session_attrs=read-write) and drain: every acknowledged order and
 * change is there, none is lost, no email went twice.
 */
static void test_standby_takes_over_during_a_soak(void **state)
{
	struct tu_env *e = *state;
	char p[300], sdir[300], pport[16], sport[16], base[300], uri[400], failover[1200];
	static char out[16384], err[65536];
	int rc, try;

	assert_int_equal(chmod(e->dir, 0755), 0);	/* the cluster's user goes in */
	snprintf(p, sizeof p, "%s/primary", e->dir);
	snprintf(sdir, sizeof sdir, "%s/standby", e->dir);
	for (try = 0, rc = 1; try < 5 && rc != 0; try++) {
		snprintf(pport, sizeof pport, "%d", 20000 + (int)((getpid() * 7 + try * 131) % 20000));
		rc = pg_sh(e, (const char *const[]){ "start", p, pport, NULL }, base, sizeof base);
	}
	assert_int_equal(rc, 0);
	for (try = 0, rc = 1; try < 5 && rc != 0; try++) {
		snprintf(sport, sizeof sport, "%d", 20000 + (int)((getpid() * 11 + try * 173 + 7) % 20000));
		rc = pg_sh(e, (const char *const[]){ "standby", p, sdir, sport, NULL }, uri, sizeof uri);
	}
	assert_int_equal(rc, 0);
	assert_non_null(strstr(uri, "target_session_attrs=read-write"));
	snprintf(failover, sizeof failover, "sh tools/pg.sh failover %s %s", p, sdir);
	{
		const char *args[] = { "--bin", tu_bin(), "--mailsink", "build/mailsink", "--orders",
				       "240", "--kills", "10", "--workers", "2", "--seed", "20261203",
				       "--pg", uri, "--boxes", "2", "--failover", failover, NULL };

		rc = chaos(e, args, out, sizeof out, err, sizeof err);
	}
	if (rc != 0)
		soak_failed(rc, 0, out, err);
	print_message("    failover: %ld orders acknowledged before it, command %ld ms, first "
		      "order accepted after it %ld ms from the kill\n",
		      figure(out, "orders_acknowledged_before_failover"),
		      figure(out, "failover_command_ms"), figure(out, "failover_downtime_ms"));
	assert_true(figure(out, "orders_acknowledged_before_failover") >= 120);
	assert_true(figure(out, "failover_downtime_ms") > 0);
	assert_int_equal(figure(out, "boxes"), 2);
	assert_changes_made(out, 240);
	assert_verdict_clean(out, 240);
}

/* The power-cut soak with more args; STAGEDOOR_FAILPOINTS set for its
 * children when failpoints is not NULL. */
static int cut_soak(const struct tu_env *e, const char *failpoints, const char *const *more,
		    char *out, size_t out_size, char *err, size_t err_size)
{
	const char *args[40] = { "--bin", tu_bin(), "--mailsink", "build/mailsink", "--powercut",
				 "build/powercut", "--workers", "2", NULL };
	int n = 8, i, rc;

	for (i = 0; more[i] && n < 39; i++)
		args[n++] = more[i];
	args[n] = NULL;
	if (failpoints)
		setenv("STAGEDOOR_FAILPOINTS", failpoints, 1);
	rc = chaos(e, args, out, out_size, err, err_size);
	unsetenv("STAGEDOOR_FAILPOINTS");
	return rc;
}

static void test_short_power_cut_soak(void **state)
{
	struct tu_env *e = *state;
	const char *more[] = { "--orders", STR(CUT_ORDERS), "--power-cuts", "12", "--torn-pct", "50",
			       "--seed", "20261201", NULL };
	static char out[16384], err[65536];
	int rc = cut_soak(e, NULL, more, out, sizeof out, err, sizeof err);

	if (rc != 0)
		soak_failed(rc, 0, out, err);
	assert_int_equal(figure(out, "power_cuts"), 12);
	assert_int_equal(figure(out, "torn_cuts"), 6);
	/* the cuts took something: writes that were not yet synced */
	assert_true(figure(out, "dirty_bytes_dropped") > 0);
	assert_true(figure(out, "torn_sectors_dirty") > 0);
	/* both doors were used, and every order was acknowledged in the end */
	assert_true(figure(out, "orders_acknowledged_cli") > 0);
	assert_true(figure(out, "orders_acknowledged_api") > 0);
	assert_int_equal(figure(out, "orders_acknowledged"), CUT_ORDERS);
	assert_int_equal(figure(out, "acknowledged_lost"), 0);
	/* a cut may take a commit the box was syncing when it was killed (the
	 * WAL's cached pages showed it to the reader before the cut), but only
	 * one whose answer it took too: at most one per placer per cut */
	assert_true(figure(out, "in_flight_orders_lost_by_cuts") <= 4L * 12);
	assert_int_equal(figure(out, "orders_lost_by_cuts"), 0);
	assert_int_equal(figure(out, "corrupt_databases"), 0);
	/* the verdict on the disk after the last clean unmount */
	assert_verdict_clean(out, CUT_ORDERS);
}

/* A disk slow to flush for the intake (each fsync of an order's process
 * and of the HTTP child held 500 ms before the kernel sees it): the cuts
 * fall while commits wait for their flush, and nothing acts on one before
 * it is on disk: no email for an order a cut took, no email owed taken for
 * another order's, no code that admits another order's seat. */
static void test_power_cut_soak_with_a_slow_flush(void **state)
{
	struct tu_env *e = *state;
	const char *more[] = { "--orders", STR(SLOW_ORDERS), "--power-cuts", "10", "--torn-pct", "30",
			       "--seed", "20261204", "--slow-fsync-ms", "500", NULL };
	static char out[16384], err[65536];
	int rc = cut_soak(e, NULL, more, out, sizeof out, err, sizeof err);

	if (rc != 0)
		soak_failed(rc, 0, out, err);
	assert_int_equal(figure(out, "power_cuts"), 10);
	assert_int_equal(figure(out, "orders_acknowledged"), SLOW_ORDERS);
	assert_int_equal(figure(out, "acknowledged_lost"), 0);
	assert_int_equal(figure(out, "orders_lost_by_cuts"), 0);
	assert_int_equal(figure(out, "emails_for_orders_not_in_the_database"), 0);
	assert_int_equal(figure(out, "owed_emails_absorbed_as_duplicates"), 0);
	assert_true(figure(out, "codes_scanned") >= SLOW_ORDERS);
	assert_int_equal(figure(out, "codes_admitting_another_orders_seat"), 0);
	assert_verdict_clean(out, SLOW_ORDERS);
}

static void test_power_cut_soak_maildir_and_backups_on_the_box(void **state)
{
	struct tu_env *e = *state;
	const char *more[] = { "--orders", "100", "--power-cuts", "8", "--torn-pct", "50",
			       "--seed", "20261203", "--maildir-on-box", "--backups", NULL };
	static char out[16384], err[65536];
	int rc = cut_soak(e, NULL, more, out, sizeof out, err, sizeof err);

	/* the messages are files the box writes on the cut disk: one each */
	if (rc != 0)
		soak_failed(rc, 0, out, err);
	assert_int_equal(figure(out, "power_cuts"), 8);
	assert_int_equal(figure(out, "torn_cuts"), 4);
	/* run backs up every second on the same disk: after every cut each
	 * backup that has its name verifies */
	assert_true(figure(out, "backups_verified") > 0);
	assert_int_equal(figure(out, "orders_acknowledged"), 100);
	assert_int_equal(figure(out, "acknowledged_lost"), 0);
	assert_int_equal(figure(out, "corrupt_databases"), 0);
	assert_int_equal(figure(out, "pdfs_checked"), 100);
	assert_int_equal(figure(out, "messages"), 100);
	assert_int_equal(figure(out, "duplicates_delivered"), 0);
	assert_int_equal(figure(out, "lost"), 0);
	assert_non_null(strstr(out, "\nresult ok\n"));
}

static void test_power_cut_soak_sees_unsynced_commits(void **state)
{
	struct tu_env *e = *state;
	const char *more[] = { "--orders", "400", "--power-cuts", "6", "--torn-pct", "0",
			       "--seed", "20261202", NULL };
	static char out[16384], err[65536];
	int rc = cut_soak(e, "db_synchronous_off=on", more, out, sizeof out, err, sizeof err);

	/* at OFF nothing is synced until a checkpoint's copy, and a cut takes
	 * orders that were answered: the soak must fail and say so */
	if (rc != 1)
		soak_failed(rc, 1, out, err);
	assert_non_null(strstr(err, "acknowledged order "));
	assert_true(figure(out, "acknowledged_lost") > 0);
	assert_non_null(strstr(out, "\nresult broken\n"));
}

int main(void)
{
	const struct CMUnitTest pg_tests[] = {
		cmocka_unit_test_setup_teardown(test_two_box_soak_on_postgresql, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_standby_takes_over_during_a_soak,
						tu_setup_real_nodb, pair_teardown),
	};
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_verify_clean_demo, demo_setup, demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_second_message, demo_setup,
						demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_missing_message, demo_setup,
						demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_email_of_a_lost_order, demo_setup,
						demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_owed_email_absorbed, demo_setup,
						demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_code_of_another_order, demo_setup,
						demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_counter_off, demo_setup, demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_bad_pdf, demo_setup, demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_job_left, demo_setup, demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_changes_clean, demo_setup, demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_resend_delivered_twice, demo_setup,
						demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_resend_never_made, demo_setup,
						demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_resend_to_old_address, demo_setup,
						demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_cancel_counted_twice, demo_setup,
						demo_teardown),
		cmocka_unit_test_setup_teardown(test_verify_resend_acknowledged_not_made, demo_setup,
						demo_teardown),
		cmocka_unit_test_setup_teardown(test_short_soak, tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_short_power_cut_soak, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_power_cut_soak_with_a_slow_flush, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_power_cut_soak_maildir_and_backups_on_the_box,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_power_cut_soak_sees_unsynced_commits,
						tu_setup_real_nodb, tu_teardown),
	};

	/* on PostgreSQL (the pg suite) the soak of two boxes; the rest is
	 * SQLite's and the harness's own, run in the rel and san suites */
	if (tu_pg())
		return cmocka_run_group_tests(pg_tests, NULL, NULL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
