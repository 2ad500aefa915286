/*
 * chaos.c: the crash soak.  It runs the appliance as a user would (a config
 * file, `stagedoor init`, `event add`, `run`, `order add` from the command
 * line) against the test mail provider, attacks it while it works, lets it
 * drain, and then checks, without asking the appliance, that no buyer got
 * two emails, no sale was counted twice and no job was lost.
 *
 *   chaos [--bin PATH] [--mailsink PATH] [--dir DIR] [--orders N] [--kills K]
 *         [--workers W] [--seed S] [--keep] [--drain-timeout-s N]
 *         [--stop-max-ms N] [--certs-sh PATH] [--set KEY=VALUE ...]
 *         [--resend-pct P] [--readdress-pct P] [--cancel-pct P]
 *         [--buyers N [--paysink PATH]] [--controls]
 *         [--pg URI [--boxes 2] [--failover CMD]]
 *   chaos --verify-only --db PATH --maildir DIR [--counts FILE] [--orders N]
 *         [--actions FILE] [--door DIR] [--record FILE]
 *
 * --pg URI puts the box on PostgreSQL; --boxes 2 runs two `stagedoor run`
 * on it as two boxes (each its own state folder, both given one
 * ticket_key_file), and the attack then kills workers of both and each
 * whole box once.  --failover CMD runs CMD (sh -c) once half the orders
 * are in: a script that kills the primary and promotes its standby; the
 * boxes must find the new primary themselves (a multi-host URI with
 * target_session_attrs=read-write) and every order acknowledged before it
 * must be there after.  The verdict then reads PostgreSQL itself.
 *
 * The attack, while N orders go in a few CLI processes at a time:
 *   - SIGKILL a random worker (a child of `stagedoor run` whose command line
 *     says "worker") every 100-500 ms until K kills;
 *   - once (at K/4 kills) SIGSTOP a worker for longer than its lease:
 *     max(lease_ms, the logged send_tickets_lease_ms) + 1 s, at most
 *     --stop-max-ms (15 s), then SIGCONT;
 *   - twice (at K/2 and 3K/4 kills, never while a worker is stopped) SIGKILL
 *     the whole appliance: the run
 *     process and every descendant, and start `stagedoor run` again (retried
 *     for a while: the old lock may not be released yet);
 *   - the run process carries STAGEDOOR_FAILPOINTS (crashes between the send
 *     and its mark, the work and its ack, the render and its update; the
 *     relay publishing twice), the provider answers 5% of POSTs 500 and drops
 *     2% of its answers after storing;
 *   - meanwhile the box office changes orders (changes.c), by `stagedoor
 *     order resend|set-email|cancel` and by the API: --resend-pct (10) of
 *     the orders resent (some API resends sent twice with one
 *     Idempotency-Key), --readdress-pct (5) given a new address and then
 *     resent, --cancel-pct (5) cancelled (some twice).  With cancellations a
 *     fourth, small event (seats for 15% of the orders' number, an eighth
 *     of the orders ask for it) sells out: its orders are then refused and
 *     placed on a big event instead, until a cancellation gives seats back,
 *     which the next ones buy.  0 for all three is the soak without
 *     changes.
 *   - with --buyers N, N buyers buy through the box's public shop and pay at
 *     tools/paysink (--paysink PATH), which duplicates a quarter of its
 *     webhooks, drops one in twenty, delays and reorders them (buyers.c):
 *     some pay and come back, some pay and close the tab, some pay after
 *     their hold (a minute) ran out, some never pay, on an event that sells
 *     out while they come.  The changes stay on the box office's orders.
 *     The worker kills go on until the last buyer is done, and the second
 *     whole-box kill waits until the first hold has run out, so that it
 *     falls among the reconcile jobs, the late payments and the webhooks.
 * Every acknowledged order and change goes to <dir>/actions.log with the
 * times it was asked and answered, for the verdict to judge the box by.
 * Then it polls `stagedoor check` until it passes (with buyers, also until
 * no hold is open, no refund or the shop's email is owed and no webhook
 * event is on its way, letting the shop's looks again later at what has
 * ended wait: buyers.c's buyers_settled and buyers_later_only), stops the
 * appliance with SIGTERM (exit 0 expected), stops the providers, and runs
 * verify.c (and with buyers shopcheck.c, on paysink's record).
 *
 * The config sets max_deliveries = 20 (the default is 5).  The poison rule
 * counts a job's expired leases, and it cannot tell a job that kills its
 * worker from one that sat in the hands of a worker this harness killed: at a
 * SIGKILL every 100-500 ms, plus the stop and two appliance kills, a job or
 * two is in hand at five kills and would go dead innocent.  Twenty keeps the
 * rule (a job crashing every worker still goes dead) while the attack runs.
 *
 * --controls holds the box to the queue's controls under the attack: the
 * config limits send_tickets to 40/s, render_tickets to 8 at once and
 * update_sales_counter to 4 a box (of the 16 handler threads: a limit that
 * binds, though not so tight that the crashed workers' leases, each
 * holding its place until it expires, stretch the drain past its
 * timeout), and `stagedoor jobs pause|resume` holds render_tickets back
 * for 1-3 s at a time; the verdict is the same.
 *
 * --set KEY=VALUE adds a line to the appliance's config file, in place of
 * the soak's own for that key (max_deliveries=5 shows the rule at its
 * default).
 *
 * The power-cut soak (cuts.c) places its orders its own way and makes no
 * changes: the three percentages are the kill soak's.  --slow-fsync-ms N
 * makes the disk slow to flush for the intake: every `order add` runs
 * under strace, which holds each of its fsync and fdatasync calls N ms
 * before the kernel sees it, and so is the HTTP child of every `run` (the
 * API's orders); the other processes flush at the disk's own pace, as on a
 * disk that one writer keeps busy.
 *
 * The verdict also scans every ticket code the emails carry at a door of
 * its own (mailcheck.c: a copy of the final database, `stagedoor scan`), on
 * SQLite: none admits another order's seat, or one of a cancelled order;
 * --verify-only does with --door DIR.
 *
 * Exit 0 only when every check holds; 1 naming the first broken one; 2 for
 * a usage error.  The figures go to stdout as "name value" lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos.h"

#define CHAOS_PLACERS 3		/* order add processes at a time */
#define CHAOS_LEASE_MS 2000
#define CHAOS_MAX_DELIVERIES 20	/* see above: the poison rule under this attack */
#define CHAOS_GRACE_MS 45000	/* SIGTERM to exit: the run's grace (30 s) and some */
#define CHAOS_FAILPOINTS \
	"STAGEDOOR_FAILPOINTS=after_send_before_mark=crash:7,after_work_before_ack=crash:13," \
	"after_render_before_update=crash:5,relay_publish_twice=on:25"

/* ======================== options and state ============================= */

/* A figure counted from the run log: a failpoint or a technique. */
struct tally {
	char name[64];
	long n;
};

struct chaos_opts opt;
struct chaos_state soak;

volatile sig_atomic_t chaos_interrupted;

static void on_signal(int sig)
{
	(void)sig;
	chaos_interrupted = 1;
}

/* Remember the first thing that went wrong; later ones are printed only. */
void fail(const char *fmt, ...)
{
	char buf[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	fprintf(stderr, "chaos: %s\n", buf);
	if (!soak.first_broken[0])
		snprintf(soak.first_broken, sizeof soak.first_broken, "%s", buf);
}

void say(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "chaos: [%6.1f s] ", (double)(now_ms() - soak.t0) / 1000.0);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: chaos [--bin PATH] [--mailsink PATH] [--dir DIR] [--orders N] [--kills K]\n"
		"             [--workers W] [--seed S] [--keep] [--drain-timeout-s N]\n"
		"             [--stop-max-ms N] [--certs-sh PATH] [--set KEY=VALUE ...]\n"
		"             [--resend-pct P] [--readdress-pct P] [--cancel-pct P]\n"
		"             [--buyers N [--paysink PATH] [--event-run]] [--controls]\n"
		"             [--sqs-tasks N [--sqs-kills K]]\n"
		"             [--power-cuts N [--torn-pct P] [--up-max-ms N] [--powercut PATH]\n"
		"              [--maildir-on-box] [--backups] [--slow-fsync-ms N]]\n"
		"             [--pg URI [--boxes 2] [--failover CMD]]\n"
		"       chaos --verify-only --db PATH --maildir DIR [--counts FILE] [--orders N]\n"
		"             [--door DIR]\n"
		"             [--actions FILE] [--record FILE]\n");
	exit(2);
}

static long opt_num(const char *name, const char *v, long min)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < min) {
		fprintf(stderr, "chaos: %s wants a whole number >= %ld, not '%s'\n", name, min, v);
		exit(2);
	}
	return n;
}

/* A share of the orders for a change: 0 (none) to 50. */
static long opt_pct(const char *name, const char *v)
{
	long n = opt_num(name, v, 0);

	if (n > 50) {
		fprintf(stderr, "chaos: %s is a share of the orders, 0 to 50, not %ld\n", name, n);
		exit(2);
	}
	opt.changes_given = 1;
	return n;
}

/* An absolute path for a program we run after changing nothing: posix_spawn
 * does not search PATH here, and the appliance may chdir. */
static void abs_path(char *buf, size_t size, const char *p)
{
	char cwd[CHAOS_PATH_MAX];
	int n;

	if (p[0] == '/' || !getcwd(cwd, sizeof cwd))
		n = snprintf(buf, size, "%s", p);
	else
		n = snprintf(buf, size, "%s/%s", cwd, p);
	if (n < 0 || (size_t)n >= size) {
		fprintf(stderr, "chaos: path too long: %s\n", p);
		exit(2);
	}
}

static void opts_parse(int argc, char **argv)
{
	const char *bin = getenv("STAGEDOOR_BIN");
	int i;

	abs_path(opt.bin, sizeof opt.bin, bin && *bin ? bin : "bin/stagedoor");
	abs_path(opt.mailsink, sizeof opt.mailsink, "build/mailsink");
	abs_path(opt.certs_sh, sizeof opt.certs_sh, "tools/certs.sh");
	abs_path(opt.powercut, sizeof opt.powercut, "build/powercut");
	abs_path(opt.paysink, sizeof opt.paysink, "build/paysink");
	opt.torn_pct = 33;
	opt.up_max_ms = 2500;
	opt.orders = 2000;
	opt.kills = 100;
	opt.workers = 4;
	opt.seed = (uint64_t)getpid() ^ (uint64_t)now_ms();
	opt.drain_timeout_s = 180;
	opt.stop_max_ms = 15000;
	opt.resend_pct = 10;
	opt.readdress_pct = 5;
	opt.cancel_pct = 5;
	opt.sqs_kills = 60;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--keep") == 0) {
			opt.keep = 1;
			continue;
		}
		if (strcmp(a, "--maildir-on-box") == 0) {
			opt.box_maildir = 1;
			continue;
		}
		if (strcmp(a, "--backups") == 0) {
			opt.backups = 1;
			continue;
		}
		if (strcmp(a, "--event-run") == 0) {
			opt.event_run = 1;
			continue;
		}
		if (strcmp(a, "--controls") == 0) {
			opt.controls = 1;
			continue;
		}
		if (strcmp(a, "--verify-only") == 0) {
			opt.verify_only = 1;
			continue;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || !v)
			usage();
		i++;
		if (strcmp(a, "--bin") == 0)
			abs_path(opt.bin, sizeof opt.bin, v);
		else if (strcmp(a, "--mailsink") == 0)
			abs_path(opt.mailsink, sizeof opt.mailsink, v);
		else if (strcmp(a, "--certs-sh") == 0)
			abs_path(opt.certs_sh, sizeof opt.certs_sh, v);
		else if (strcmp(a, "--powercut") == 0)
			abs_path(opt.powercut, sizeof opt.powercut, v);
		else if (strcmp(a, "--paysink") == 0)
			abs_path(opt.paysink, sizeof opt.paysink, v);
		else if (strcmp(a, "--buyers") == 0)
			opt.buyers = opt_num(a, v, 0);
		else if (strcmp(a, "--sqs-tasks") == 0)
			opt.sqs_tasks = opt_num(a, v, 0);
		else if (strcmp(a, "--sqs-kills") == 0)
			opt.sqs_kills = opt_num(a, v, 0);
		else if (strcmp(a, "--record") == 0)
			opt.record = v;
		else if (strcmp(a, "--power-cuts") == 0)
			opt.cuts = opt_num(a, v, 1);
		else if (strcmp(a, "--torn-pct") == 0)
			opt.torn_pct = opt_num(a, v, 0);
		else if (strcmp(a, "--up-max-ms") == 0)
			opt.up_max_ms = opt_num(a, v, 100);
		else if (strcmp(a, "--slow-fsync-ms") == 0)
			opt.slow_fsync_ms = opt_num(a, v, 0);
		else if (strcmp(a, "--dir") == 0)
			opt.dir = v;
		else if (strcmp(a, "--orders") == 0) {
			opt.orders = opt_num(a, v, 1);
			opt.orders_given = 1;
		}
		else if (strcmp(a, "--kills") == 0)
			opt.kills = opt_num(a, v, 0);
		else if (strcmp(a, "--workers") == 0)
			opt.workers = opt_num(a, v, 1);
		else if (strcmp(a, "--seed") == 0)
			opt.seed = (uint64_t)opt_num(a, v, 0);
		else if (strcmp(a, "--drain-timeout-s") == 0)
			opt.drain_timeout_s = opt_num(a, v, 1);
		else if (strcmp(a, "--stop-max-ms") == 0)
			opt.stop_max_ms = opt_num(a, v, 0);
		else if (strcmp(a, "--set") == 0) {
			if (!strchr(v, '=') || opt.n_sets == 32) {
				fprintf(stderr, "chaos: --set wants KEY=VALUE (at most 32)\n");
				exit(2);
			}
			opt.sets[opt.n_sets++] = v;
		} else if (strcmp(a, "--db") == 0)
			opt.db = v;
		else if (strcmp(a, "--pg") == 0)
			opt.pg = v;
		else if (strcmp(a, "--boxes") == 0)
			opt.boxes = opt_num(a, v, 1);
		else if (strcmp(a, "--failover") == 0)
			opt.failover = v;
		else if (strcmp(a, "--maildir") == 0)
			opt.maildir = v;
		else if (strcmp(a, "--counts") == 0)
			opt.counts = v;
		else if (strcmp(a, "--door") == 0)
			opt.door = v;
		else if (strcmp(a, "--actions") == 0)
			opt.actions = v;
		else if (strcmp(a, "--resend-pct") == 0)
			opt.resend_pct = opt_pct(a, v);
		else if (strcmp(a, "--readdress-pct") == 0)
			opt.readdress_pct = opt_pct(a, v);
		else if (strcmp(a, "--cancel-pct") == 0)
			opt.cancel_pct = opt_pct(a, v);
		else {
			fprintf(stderr, "chaos: unknown option %s\n", a);
			usage();
		}
	}
	if (opt.verify_only && (!opt.db || !opt.maildir))
		usage();
	if ((opt.box_maildir || opt.backups) && !opt.cuts) {
		fprintf(stderr, "chaos: --maildir-on-box and --backups go with --power-cuts\n");
		exit(2);
	}
	if (!opt.boxes)
		opt.boxes = 1;
	if ((opt.boxes > 1 || opt.failover) && !opt.pg) {
		fprintf(stderr, "chaos: --boxes 2 and --failover need --pg URI\n");
		exit(2);
	}
	if (opt.boxes > 2 || (opt.pg && opt.cuts)) {
		fprintf(stderr, "chaos: at most 2 boxes; power cuts are SQLite's soak\n");
		exit(2);
	}
	if (opt.cuts && opt.changes_given) {
		fprintf(stderr, "chaos: --resend-pct, --readdress-pct and --cancel-pct are the kill "
			"soak's; the power-cut soak makes no changes\n");
		exit(2);
	}
	if (opt.cuts && opt.sqs_tasks) {
		fprintf(stderr, "chaos: --sqs-tasks is the kill soak's\n");
		exit(2);
	}
	if (opt.cuts && opt.buyers) {
		fprintf(stderr, "chaos: --buyers is the kill soak's; the power-cut soak has no shop\n");
		exit(2);
	}
	if (opt.event_run && (opt.cuts || !opt.buyers || opt.changes_given)) {
		fprintf(stderr, "chaos: --event-run is the kill soak's, with --buyers, and makes "
			"no changes of its own\n");
		exit(2);
	}
	if (opt.cuts || opt.event_run)	/* none of the changes */
		opt.resend_pct = opt.readdress_pct = opt.cancel_pct = 0;
	if (opt.torn_pct > 100) {
		fprintf(stderr, "chaos: --torn-pct is a share of the cuts, 0 to 100\n");
		exit(2);
	}
}

/* ======================== files and the provider ======================= */

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		fail("setup: cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int setup_dir(void)
{
	if (opt.dir) {
		if (mkdir(opt.dir, 0755) != 0 && errno != EEXIST) {
			fail("setup: mkdir %s: %s", opt.dir, strerror(errno));
			return -1;
		}
		abs_path(soak.dir, sizeof soak.dir, opt.dir);
	} else {
		const char *tmp = getenv("TMPDIR");
		char tmpl[CHAOS_PATH_MAX];

		snprintf(tmpl, sizeof tmpl, "%s/chaos-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(tmpl)) {
			fail("setup: mkdtemp %s: %s", tmpl, strerror(errno));
			return -1;
		}
		abs_path(soak.dir, sizeof soak.dir, tmpl);
		soak.made_dir = 1;
	}
	if (opt.pg)
		snprintf(soak.db, sizeof soak.db, "%s", opt.pg);
	else
		snprintf(soak.db, sizeof soak.db, "%s/stagedoor.db", soak.dir);
	snprintf(soak.conf_b, sizeof soak.conf_b, "%s/stagedoor-b.conf", soak.dir);
	snprintf(soak.run_log_b, sizeof soak.run_log_b, "%s/run-b.log", soak.dir);
	snprintf(soak.key_file, sizeof soak.key_file, "%s/ticket.key", soak.dir);
	if (opt.pg) {	/* the key for init, which makes it; the config files name
			 * it too, and each box's state folder, which the
			 * environment must not override */
		setenv("STAGEDOOR_TICKET_KEY_FILE", soak.key_file, 1);
		unsetenv("STAGEDOOR_STATE_DIR");
	}
	snprintf(soak.conf, sizeof soak.conf, "%s/stagedoor.conf", soak.dir);
	snprintf(soak.run_log, sizeof soak.run_log, "%s/run.log", soak.dir);
	snprintf(soak.maildir, sizeof soak.maildir, "%s/mail", soak.dir);
	snprintf(soak.counts, sizeof soak.counts, "%s/counts.json", soak.dir);
	snprintf(soak.certs, sizeof soak.certs, "%s/certs", soak.dir);
	snprintf(soak.orders_log, sizeof soak.orders_log, "%s/orders.log", soak.dir);
	snprintf(soak.actions_log, sizeof soak.actions_log, "%s/" CHAOS_ACTIONS_LOG, soak.dir);
	return 0;
}

static int start_sink(int *port)
{
	char cert[CHAOS_PATH_MAX + 64], key[CHAOS_PATH_MAX + 64], port_file[CHAOS_PATH_MAX + 64];
	char log[CHAOS_PATH_MAX + 64], seed[32];
	const char *sh[] = { "/bin/sh", opt.certs_sh, soak.certs, NULL };
	int64_t until;
	int rc;

	if ((rc = proc_run(sh, NULL, 0, 0)) != 0) {
		fail("setup: %s %s: exit %d", opt.certs_sh, soak.certs, rc);
		return -1;
	}
	snprintf(cert, sizeof cert, "%s/server.pem", soak.certs);
	snprintf(key, sizeof key, "%s/server.key", soak.certs);
	snprintf(port_file, sizeof port_file, "%s/mailsink.port", soak.dir);
	snprintf(log, sizeof log, "%s/mailsink.log", soak.dir);
	snprintf(seed, sizeof seed, "%" PRIu64, opt.seed);
	{
		const char *argv[] = { opt.mailsink, "--listen", "127.0.0.1:0", "--cert", cert,
				       "--key", key, "--maildir", soak.maildir, "--port-file",
				       port_file, "--fail-500-pct", "5", "--drop-pct", "2",
				       "--seed", seed, NULL };

		soak.sink = proc_spawn(argv, log, log, NULL);
	}
	if (soak.sink < 0) {
		soak.sink = 0;
		fail("setup: cannot start %s", opt.mailsink);
		return -1;
	}
	for (until = now_ms() + 10000; now_ms() < until; sleep_ms(10)) {
		FILE *f = fopen(port_file, "r");

		if (f) {
			int ok = fscanf(f, "%d", port) == 1 && *port > 0;

			fclose(f);
			if (ok)
				return 0;
		}
		if ((rc = proc_wait(soak.sink, 0)) != -2) {
			soak.sink = 0;
			fail("setup: mailsink exited %d at start (see %s)", rc, log);
			return -1;
		}
	}
	fail("setup: mailsink wrote no port file within 10 s");
	return -1;
}

/* set_by_user: is key among the --set lines (which then replace the
 * soak's own line: the config file refuses a key given twice)? */
static int set_by_user(const char *key)
{
	size_t n = strlen(key);
	int i;

	for (i = 0; i < opt.n_sets; i++)
		if (strncmp(opt.sets[i], key, n) == 0 && opt.sets[i][n] == '=')
			return 1;
	return 0;
}

static int write_config_box(int port, char box, const char *path)
{
	char text[8 * CHAOS_PATH_MAX];
	size_t len;
	int i;

	len = (size_t)snprintf(text, sizeof text,
		 "# written by tools/chaos\n"
		 "db = %s\n"
		 "mail_ca_file = %s/ca.pem\n"
		 "http_listen = 127.0.0.1:0\n"
		 "log_level = info\n", soak.db, soak.certs);
	if (opt.pg)	/* a box of its own: its state folder; the shared key */
		len += (size_t)snprintf(text + len, sizeof text - len,
					"state_dir = %s/box-%c\nticket_key_file = %s\n", soak.dir,
					box, soak.key_file);
	if (opt.box_maildir)	/* the maildir transport, in the box's folder */
		len += (size_t)snprintf(text + len, sizeof text - len,
					"mail_url = maildir:%s/" CHAOS_CUTS_MOUNT "/maildir\n",
					soak.dir);
	else
		len += (size_t)snprintf(text + len, sizeof text - len,
					"mail_url = https://127.0.0.1:%d/v1/messages\n", port);
	if (opt.backups)	/* on the cut disk: a cut mid-backup must spare the last */
		len += (size_t)snprintf(text + len, sizeof text - len,
					"backup_dir = %s/" CHAOS_CUTS_MOUNT "/" CHAOS_CUTS_BACKUPS "\n"
					"backup_interval_ms = 1000\nbackup_keep = 3\n", soak.dir);
	if (!set_by_user("mail_timeout_ms"))
		len += (size_t)snprintf(text + len, sizeof text - len, "mail_timeout_ms = 2000\n");
	if (!set_by_user("lease_ms"))
		len += (size_t)snprintf(text + len, sizeof text - len, "lease_ms = %d\n",
					CHAOS_LEASE_MS);
	if (!set_by_user("max_deliveries"))
		len += (size_t)snprintf(text + len, sizeof text - len, "max_deliveries = %d\n",
					CHAOS_MAX_DELIVERIES);
	if (opt.event_run && !set_by_user("remind_before"))	/* due in the soak */
		len += (size_t)snprintf(text + len, sizeof text - len, "remind_before = 3m\n");
	if (!set_by_user("workers"))
		len += (size_t)snprintf(text + len, sizeof text - len, "workers = %ld\n",
					opt.workers);
	if (opt.controls)	/* the queue's controls: held to them under the attack */
		len += (size_t)snprintf(text + len, sizeof text - len,
					"rate.send_tickets = 40/s burst 20\n"
					"concurrency.render_tickets = 8\n"
					"box_concurrency.update_sales_counter = 4\n");
	if (len < sizeof text)	/* --buyers: the shop and its provider */
		len += buyers_config(box == 'b', text + len, sizeof text - len);
	if (len < sizeof text)	/* --sqs-tasks: the SQS listener */
		len += sqsrun_config(box == 'b', text + len, sizeof text - len);
	for (i = 0; i < opt.n_sets && len < sizeof text; i++) {
		const char *eq = strchr(opt.sets[i], '=');

		len += (size_t)snprintf(text + len, sizeof text - len, "%.*s = %s\n",
					(int)(eq - opt.sets[i]), opt.sets[i], eq + 1);
	}
	if (len >= sizeof text) {
		fail("setup: the config file is too long");
		return -1;
	}
	return write_file(path, text);
}

static int write_config(int port)
{
	/* The soak resends orders on purpose, one of them many times (a CLI
	 * resend whose outcome a kill hid is made again); the limit per order
	 * has tests of its own (test_api, test_changes) and would refuse them
	 * here: none, for the box and the CLI's children alike, unless --set
	 * names one. */
	if (!set_by_user("resend_per_hour"))
		setenv("STAGEDOOR_RESEND_PER_HOUR", "0", 1);
	if (!set_by_user("resend_per_day"))
		setenv("STAGEDOOR_RESEND_PER_DAY", "0", 1);
	if (write_config_box(port, 'a', soak.conf) != 0)
		return -1;
	return opt.boxes > 1 ? write_config_box(port, 'b', soak.conf_b) : 0;
}

/* stagedoor event add: its id into *id; priced when price is not NULL. */
static int event_add_priced(const char *name, const char *starts, long capacity,
			    const char *price, const char *currency, long *id)
{
	char out[256], cap[32];
	const char *argv[] = { opt.bin, "event", "add", "--db", soak.db, "--name", name,
			       "--venue", "Stagedoor Hall", "--starts-at", starts,
			       "--capacity", cap, price ? "--price" : NULL, price, "--currency",
			       currency, NULL };
	int rc;

	snprintf(cap, sizeof cap, "%ld", capacity);
	if ((rc = proc_run(argv, out, sizeof out, 0)) != 0 || (*id = strtol(out, NULL, 10)) <= 0) {
		fail("setup: stagedoor event add: exit %d, printed '%s'", rc, out);
		return -1;
	}
	return 0;
}

static int event_add(const char *name, const char *starts, long capacity, long *id)
{
	return event_add_priced(name, starts, capacity, NULL, NULL, id);
}

/* stagedoor init and three events with room for every order; with
 * cancellations a fourth that sells out (about half the seats its orders
 * ask for). */
static int setup_db(void)
{
	char out[256], box_a[CHAOS_PATH_MAX + 32];
	const char *init[] = { opt.bin, "init", "--db", soak.db, opt.pg ? "--state-dir" : NULL,
			       box_a, NULL };
	int rc, i;

	snprintf(box_a, sizeof box_a, "%s/box-a", soak.dir);
	if ((rc = proc_run(init, out, sizeof out, 1)) != 0) {
		fail("setup: stagedoor init: exit %d: %.200s", rc, out);
		return -1;
	}
	if (opt.boxes > 1) {	/* box B's own state folder and token */
		char box[CHAOS_PATH_MAX + 32];
		const char *init_b[] = { opt.bin, "init", "--db", soak.db, "--state-dir", box, NULL };

		snprintf(box, sizeof box, "%s/box-b", soak.dir);
		if ((rc = proc_run(init_b, out, sizeof out, 1)) != 0) {
			fail("setup: stagedoor init of box B: exit %d: %.200s", rc, out);
			return -1;
		}
	}
	for (i = 0; i < CHAOS_EVENTS; i++) {
		char name[64], starts[64];

		snprintf(name, sizeof name, "Chaos night %d", i + 1);
		snprintf(starts, sizeof starts, "2036-06-%02dT20:00Z", i + 1);
		if (event_add(name, starts, opt.orders * 4 + 10, &soak.event_ids[i]) != 0)
			return -1;
	}
	if (opt.cancel_pct > 0 && !opt.cuts) {
		/* an eighth of the orders, 2.5 seats each on average: 15% of the
		 * orders' number is about half of what they ask */
		soak.small_capacity = opt.orders * 3 / 20 > 8 ? opt.orders * 3 / 20 : 8;
		if (event_add("Chaos small hall", "2027-06-28T20:00Z", soak.small_capacity,
			      &soak.small_event) != 0)
			return -1;
	}
	/* --event-run: the box office sells on it too */
	if (opt.buyers > 0 && event_add_priced("Chaos in the shop", "2036-07-01T20:00Z",
					       buyers_capacity() + (opt.event_run ? opt.orders * 4 : 0),
					       buyers_price(), buyers_currency(),
					       &soak.shop_event) != 0)
		return -1;
	return 0;
}

/* ======================== the appliance ================================= */

static void orphans_add(pid_t pid)
{
	if (soak.n_orphans < CHAOS_MAX_PIDS)
		soak.orphans[soak.n_orphans++] = pid;
}

/* Reap what has died of the descendants of killed runs (they are ours:
 * the harness is a subreaper). */
void orphans_reap(void)
{
	int i = 0;

	while (i < soak.n_orphans) {
		int status;
		pid_t r = waitpid(soak.orphans[i], &status, WNOHANG);

		if (r == soak.orphans[i] || (r < 0 && errno == ECHILD && !proc_alive(soak.orphans[i])))
			soak.orphans[i] = soak.orphans[--soak.n_orphans];
		else
			i++;
	}
}

static int workers_of(pid_t run, pid_t *out, int max, pid_t except)
{
	pid_t kids[CHAOS_MAX_PIDS];
	int n = proc_children(run, kids, CHAOS_MAX_PIDS), i, k = 0;

	for (i = 0; i < n && k < max; i++)
		if (kids[i] != except && proc_alive(kids[i]) && proc_cmdline_has(kids[i], "worker"))
			out[k++] = kids[i];
	return k;
}

/*
 * start_run: `stagedoor run --config FILE` with extra_env (the kill soak's
 * failpoints), its stderr appended to run.log.  A run that exits at once (the last one's lock not
 * yet released: "already running") is started again for up to 20 s.  Up
 * means: still running, with at least one worker.
 */
static int start_box(const char *conf, const char *log, pid_t *run,
		     const char *const *extra_env)
{
	const char *argv[] = { opt.bin, "run", "--config", conf, NULL };
	int64_t give_up = now_ms() + 20000;
	int rc = 0;

	while (now_ms() < give_up && !chaos_interrupted) {
		pid_t w[4];
		int64_t until = now_ms() + 15000;
		struct stat sb;

		/* its "http listening" line comes after this */
		*(run == &soak.run_b ? &soak.run_log_b_from : &soak.run_log_from) =
			stat(log, &sb) == 0 ? (long)sb.st_size : 0;
		*run = proc_spawn(argv, log, log, extra_env);
		if (*run < 0) {
			*run = 0;
			fail("appliance: cannot start %s run", opt.bin);
			return -1;
		}
		while (now_ms() < until && (rc = proc_wait(*run, 0)) == -2) {
			if (workers_of(*run, w, 4, 0) > 0)
				return 0;
			sleep_ms(20);
		}
		if (rc == -2)
			break;	/* up, yet no worker in 15 s */
		*run = 0;
		soak.restart_refusals++;
		sleep_ms(250);
	}
	if (*run) {
		fail("appliance: stagedoor run started no worker within 15 s (see %s)", log);
		return -1;
	}
	fail("appliance: stagedoor run would not start: last exit %d (see %s)", rc, log);
	return -1;
}

int start_run(const char *const *extra_env)
{
	return start_box(soak.conf, soak.run_log, &soak.run, extra_env);
}

static int start_run_b(const char *const *extra_env)
{
	return start_box(soak.conf_b, soak.run_log_b, &soak.run_b, extra_env);
}

/* SIGKILL a run process and every descendant; wait until they are gone. */
static void kill_box(pid_t *run)
{
	pid_t all[CHAOS_MAX_PIDS];
	int n, i;
	int64_t until;

	if (!*run)
		return;
	kill(*run, SIGSTOP);	/* a frozen supervisor starts no new worker */
	n = proc_descendants(*run, all, CHAOS_MAX_PIDS);
	kill(*run, SIGKILL);
	for (i = 0; i < n; i++) {
		kill(all[i], SIGKILL);
		orphans_add(all[i]);
	}
	proc_wait(*run, 10000);
	*run = 0;
	for (until = now_ms() + 10000; now_ms() < until; sleep_ms(10)) {
		orphans_reap();
		for (i = 0; i < n && !proc_alive(all[i]); i++)
			;
		if (i == n)
			break;
	}
}

void kill_appliance(void)
{
	kill_box(&soak.run);
}

/* The send_tickets lease the run logged (send_tickets_lease_ms=N), or 0. */
static long logged_send_lease(void)
{
	FILE *f = fopen(soak.run_log, "r");
	char line[4096];
	long lease = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof line, f)) {
		const char *p = strstr(line, "send_tickets_lease_ms=");

		if (p)
			lease = strtol(p + strlen("send_tickets_lease_ms="), NULL, 10);
	}
	fclose(f);
	return lease;
}

/* ======================== orders ======================================== */

struct placer {
	pid_t pid;		/* 0: free, or waiting to try again */
	long idx;		/* the order's number, 0.. */
	int tries;
	int moved;		/* the small event refused it: on a big one now */
	int64_t t0;		/* first asked */
	int64_t retry_at;	/* refused: the same order again from then on; 0: none */
	char out[CHAOS_PATH_MAX + 32];	/* what `order add` said (the public id) */
};

/* --failover: when it started (0: not yet), whether the first order after
 * it was accepted */
static int64_t failover_t0;
static int failover_seen;

static const char *const failpoints[] = { CHAOS_FAILPOINTS, NULL };
static struct placer placers[CHAOS_PLACERS];
static long next_order;

static uint64_t order_hash(long idx)
{
	uint64_t h = opt.seed * 0x9E3779B97F4A7C15ULL + (uint64_t)idx * 0xBF58476D1CE4E5B9ULL;

	return h ^ (h >> 29);
}

void order_fields_moved(long idx, int moved, struct order_fields *f)
{
	uint64_t h = order_hash(idx);
	long event = opt.event_run ? soak.shop_event : soak.event_ids[h % CHAOS_EVENTS];
	static const char *const paid[] = { "cash", "card", "" };

	/* with a small event, an eighth of the orders ask for it first */
	if (soak.small_event && !moved && (h >> 20) % 8 == 0)
		event = soak.small_event;
	snprintf(f->event, sizeof f->event, "%ld", event);
	snprintf(f->name, sizeof f->name, "Buyer %ld", idx + 1);
	snprintf(f->email, sizeof f->email, "buyer%ld@example.org", idx + 1);
	snprintf(f->seats, sizeof f->seats, "%d", (int)((h >> 8) % 4) + 1);
	snprintf(f->payment, sizeof f->payment, "%s", opt.event_run ? paid[(h >> 12) % 3] : "");
	snprintf(f->key, sizeof f->key, "chaos-%" PRIu64 "-%ld%s", opt.seed, idx,
		 moved ? "-moved" : "");
}

void order_fields(long idx, struct order_fields *f)
{
	order_fields_moved(idx, 0, f);
}

#define STRACE "/usr/bin/strace"
#define STRACE_ARGS(US)                                                                        \
	"-qq", "-o", "/dev/null", "-f", "-e", "trace=fsync,fdatasync", "-e", US

const char *const *slow_fsync_argv(const char *const *argv, const char **out, size_t max,
				   char *us, size_t us_size)
{
	const char *pre[] = { STRACE, "--seccomp-bpf", STRACE_ARGS(us) };
	size_t i, n = sizeof pre / sizeof pre[0];

	if (!opt.slow_fsync_ms)
		return argv;
	snprintf(us, us_size, "inject=fsync,fdatasync:delay_enter=%ld", opt.slow_fsync_ms * 1000);
	for (i = 0; i < n && i < max; i++)
		out[i] = pre[i];
	for (; argv[i - n] && i + 1 < max; i++)
		out[i] = argv[i - n];
	out[i] = NULL;
	return out;
}

const char *const *slow_fsync_env(void)
{
	static char asan[512];
	static const char *env[] = { asan, NULL };
	const char *was = getenv("ASAN_OPTIONS");

	if (!opt.slow_fsync_ms)
		return NULL;
	snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sdetect_leaks=0", was ? was : "",
		 was && *was ? ":" : "");
	return env;
}

pid_t slow_fsync_attach(pid_t pid)
{
	char us[64], p[24];
	const char *argv[] = { STRACE, STRACE_ARGS(us), "-p", p, NULL };

	if (!opt.slow_fsync_ms)
		return 0;
	snprintf(us, sizeof us, "inject=fsync,fdatasync:delay_enter=%ld", opt.slow_fsync_ms * 1000);
	snprintf(p, sizeof p, "%ld", (long)pid);
	return proc_spawn(argv, NULL, NULL, NULL);
}

/* `order add` for f, stdout to out_path (NULL: none), stderr to err_path */
static pid_t place_fields(const struct order_fields *f, const char *out_path,
			  const char *err_path)
{
	const char *argv[] = { opt.bin, "order", "add", "--db", soak.db, "--event", f->event,
			       "--name", f->name, "--email", f->email, "--seats", f->seats,
			       "--idempotency-key", f->key, f->payment[0] ? "--payment" : NULL,
			       f->payment, NULL };
	const char *slowed[32];
	char us[64];

	return proc_spawn(slow_fsync_argv(argv, slowed, 32, us, sizeof us), out_path, err_path,
			  slow_fsync_env());
}

pid_t place_cli(long idx)
{
	struct order_fields f;

	order_fields(idx, &f);
	return place_fields(&f, NULL, soak.orders_log);
}

/* The kill soak's order: what it says (the public id, or why not) into the
 * placer's file, kept for orders_done. */
static pid_t place(struct placer *p)
{
	struct order_fields f;

	order_fields_moved(p->idx, p->moved, &f);
	unlink(p->out);
	return place_fields(&f, p->out, p->out);
}

/* An order process ended with rc: its words go to the orders log; the
 * public id of an acknowledged order to changes.c.  1 when the small event
 * was sold out (to be placed elsewhere), else 0. */
static int orders_done(struct placer *p, int rc)
{
	char text[1024] = "", id[32] = "";
	struct order_fields f;
	FILE *in = fopen(p->out, "r"), *log;
	size_t n = 0;

	if (in) {
		n = fread(text, 1, sizeof text - 1, in);
		text[n] = '\0';
		fclose(in);
	}
	if (n && (log = fopen(soak.orders_log, "a"))) {
		fputs(text, log);
		fclose(log);
	}
	order_fields_moved(p->idx, p->moved, &f);
	if (rc == 2 && !p->moved && soak.small_event && atol(f.event) == soak.small_event &&
	    (strstr(text, "sold out") || strstr(text, "left, not"))) {
		soak.small_full = 1;
		soak.sold_out_moved++;
		actions_log("soldout idx=%ld event=%s t0=%lld t1=%lld", p->idx, f.event,
			    (long long)(p->t0 - soak.t0), (long long)(now_ms() - soak.t0));
		return 1;
	}
	if (rc == 0) {
		/* the id is stdout's line; a retry that found its first attempt
		 * committed (a failover cut the answer) is a replay, which says
		 * so on stderr first: the id is the last line */
		char *last = text + strlen(text);

		while (last > text && (last[-1] == '\n' || last[-1] == ' '))
			*--last = '\0';
		while (last > text && last[-1] != '\n')
			last--;
		if (sscanf(last, "%31s", id) != 1 || id[0] != 'T')
			fail("orders: order %ld: `order add` said '%.100s', not an order id",
			     p->idx, text);
		changes_placed(p->idx, id, &f, p->t0);
	}
	return 0;
}

/* Reap finished order processes, start new ones.  -1 on an order that will
 * not go in. */
static int orders_step(void)
{
	int i;

	for (i = 0; i < CHAOS_PLACERS; i++) {
		struct placer *p = &placers[i];
		int rc;

		if (p->retry_at) {
			if (now_ms() < p->retry_at)
				continue;
			p->retry_at = 0;
			soak.order_retries++;
			if ((p->pid = place(p)) < 0)
				return -1;
			continue;
		}
		if (p->pid > 0) {
			if ((rc = proc_wait(p->pid, 0)) == -2)
				continue;
			p->pid = 0;
			if (orders_done(p, rc)) {
				/* sold out: the same buyer on a big event, at once */
				p->moved = 1;
				p->tries = 0;
				if ((p->pid = place(p)) < 0)
					return -1;
				continue;
			}
			if (rc == 0) {
				soak.placed++;
				if (failover_t0 && !failover_seen && soak.failover_ms) {
					failover_seen = 1;
					soak.failover_downtime_ms = (long)(now_ms() - failover_t0);
				}
			} else if (++p->tries >= (opt.failover ? 4 * CHAOS_ORDER_TRIES
							       : CHAOS_ORDER_TRIES)) {
				fail("orders: order %ld refused %d times, last exit %d (see %s)",
				     p->idx, p->tries, rc, soak.orders_log);
				return -1;
			} else {
				/* the same order (its key) again in 100 ms: a busy
				 * box, or a database between two primaries */
				p->retry_at = now_ms() + 100;
				continue;
			}
		}
		if (next_order < opt.orders) {
			p->idx = next_order++;
			p->tries = 0;
			p->moved = 0;
			p->t0 = now_ms();
			snprintf(p->out, sizeof p->out, "%s/placer-%d.out", soak.dir, i);
			if ((p->pid = place(p)) < 0)
				return -1;
		}
	}
	return 0;
}

static int orders_running(void)
{
	int i, n = 0;

	for (i = 0; i < CHAOS_PLACERS; i++)
		n += placers[i].pid > 0 || placers[i].retry_at;
	return n;
}

/* ======================== the attack ==================================== */

/* The run process died without us: count it, keep the soak going. */
int chaos_run_watch(void)
{
	int rc;

	if (soak.run_b && (rc = proc_wait(soak.run_b, 0)) != -2) {
		soak.run_b = 0;
		soak.run_exits++;
		fail("appliance: box B's stagedoor run exited by itself (status %d; see %s)", rc,
		     soak.run_log_b);
		if (start_run_b(failpoints) != 0)
			return -1;
	}
	if (!soak.run || (rc = proc_wait(soak.run, 0)) == -2)
		return 0;
	soak.run = 0;
	soak.run_exits++;
	fail("appliance: stagedoor run exited by itself (status %d; see %s)", rc, soak.run_log);
	return start_run(failpoints);
}

/* --failover: the command, once; the boxes find the new primary alone */
static int failover_run(void)
{
	const char *argv[] = { "/bin/sh", "-c", opt.failover, NULL };
	char out[2048] = "";
	int rc;

	failover_t0 = now_ms();
	soak.placed_before_failover = soak.placed;
	say("failover: %s (%ld orders acknowledged so far)", opt.failover, soak.placed);
	rc = proc_run(argv, out, sizeof out, 1);
	soak.failover_ms = (long)(now_ms() - failover_t0);
	if (soak.failover_ms == 0)
		soak.failover_ms = 1;
	if (rc != 0) {
		fail("failover: the command exited %d: %.500s", rc, out);
		return -1;
	}
	say("failover: done in %ld ms", soak.failover_ms);
	return 0;
}

int chaos_kill_worker(void)
{
	pid_t w[CHAOS_MAX_PIDS];
	int n = workers_of(soak.run, w, CHAOS_MAX_PIDS, 0);
	pid_t victim;

	if (soak.run_b)
		n += workers_of(soak.run_b, w + n, CHAOS_MAX_PIDS - n, 0);
	victim = n > 0 ? w[rng_below((uint64_t)n)] : 0;
	if (victim <= 0 || (proc_parent(victim) != soak.run &&
			    !(soak.run_b && proc_parent(victim) == soak.run_b)))
		return 0;
	kill(victim, SIGKILL);
	soak.kills++;
	return 1;
}

int chaos_kill_box(int b)
{
	pid_t *which = b ? &soak.run_b : &soak.run;

	kill_box(which);
	soak.app_kills++;
	return b ? start_run_b(failpoints) : start_run(failpoints);
}

/*
 * pause_step (--controls): render_tickets paused and resumed by `stagedoor
 * jobs pause|resume`, each for 1-3 s, while the attack runs; done 1 resumes
 * it for the drain.
 */
static int pause_step(int done)
{
	static int64_t next_at;
	static int paused;
	const char *argv[] = { opt.bin, "jobs", NULL, "render_tickets", "--db", soak.db, NULL };
	char out[512];
	int rc;

	if (!opt.controls || (!done && now_ms() < next_at) || (done && !paused))
		return 0;
	argv[2] = paused ? "resume" : "pause";
	if ((rc = proc_run(argv, out, sizeof out, 1)) != 0) {
		fail("stagedoor jobs %s render_tickets: exit %d: %s", argv[2], rc, out);
		return -1;
	}
	paused = !paused;
	soak.pauses += paused;
	next_at = now_ms() + 1000 + (int64_t)rng_below(2001);
	return 0;
}

static int attack(void)
{
	int64_t next_kill = now_ms() + 100 + (int64_t)rng_below(401);
	int64_t stop_until = 0, app_kill_after = 0, app_kill_due_at = 0;
	pid_t stopped = 0;
	int stop_done = opt.kills == 0, app_kills_due;

	while (!chaos_interrupted) {
		int64_t now = now_ms();

		if (orders_step() != 0 || changes_step() != 0 || buyers_step() != 0 ||
		    sqsrun_step() != 0 || pause_step(0) != 0 || chaos_run_watch() != 0)
			return -1;
		orphans_reap();
		if (opt.failover && !failover_t0 && soak.placed >= opt.orders / 2 &&
		    failover_run() != 0)
			return -1;

		/* the SIGSTOP, once, at a quarter of the kills */
		if (!stop_done && !stopped && soak.kills >= opt.kills / 4) {
			pid_t w[CHAOS_MAX_PIDS];
			int n = workers_of(soak.run, w, CHAOS_MAX_PIDS, 0);

			if (n > 0) {
				long lease = logged_send_lease();

				if (lease < CHAOS_LEASE_MS)
					lease = CHAOS_LEASE_MS;
				soak.stop_ms = lease + 1000;
				if (soak.stop_ms > opt.stop_max_ms)
					soak.stop_ms = opt.stop_max_ms;
				pid_t cand = w[rng_below((uint64_t)n)];

				/* gone meanwhile: the next turn picks again */
				if (proc_parent(cand) == soak.run) {
					stopped = cand;
					kill(stopped, SIGSTOP);
					soak.stops++;
					stop_until = now + soak.stop_ms;
					say("SIGSTOP worker %d for %ld ms (send_tickets lease %ld ms)",
					    (int)stopped, soak.stop_ms, lease);
				}
			}
		}
		if (stopped && (now >= stop_until || !proc_alive(stopped))) {
			if (proc_parent(stopped) == soak.run)
				kill(stopped, SIGCONT);
			say("SIGCONT worker %d", (int)stopped);
			stopped = 0;
			stop_done = 1;
		}

		/* the whole appliance, at half and three quarters of the kills, and
		 * never while the stopped worker serves its time */
		/* with buyers the second waits for a hold to run out: among the
		 * reconcile jobs, the late payments and their webhooks */
		app_kills_due = opt.kills == 0 ? 0 : (soak.kills >= opt.kills / 2) +
			(soak.kills >= opt.kills * 3 / 4 && buyers_holds_ending());
		if (soak.app_kills < app_kills_due && soak.app_kills < 2 && !stopped &&
		    now >= app_kill_after && !app_kill_due_at)
			app_kill_due_at = now;
		/* with buyers, a whole-box kill meets a checkout under way (or
		 * goes ahead after 5 s without one) */
		if (soak.app_kills < app_kills_due && soak.app_kills < 2 && !stopped &&
		    now >= app_kill_after &&
		    (buyers_checkout_running(opt.boxes > 1 && soak.app_kills == 0) ||
		     now - app_kill_due_at > 5000)) {
			/* two boxes: B first, then A */
			int b = opt.boxes > 1 && soak.app_kills == 0;
			pid_t *which = b ? &soak.run_b : &soak.run;

			say("SIGKILL the whole %s (run %d and its children)",
			    b ? "box B" : opt.boxes > 1 ? "box A" : "appliance", (int)*which);
			app_kill_due_at = 0;
			kill_box(which);
			soak.app_kills++;
			if ((b ? start_run_b(failpoints) : start_run(failpoints)) != 0)
				return -1;
			say("stagedoor run started again (pid %d)", (int)*which);
			next_kill = now_ms() + 100 + (int64_t)rng_below(401);
			app_kill_after = now_ms() + 1000;	/* let it get to work first */
		}

		/* one worker, every 100-500 ms (until the last buyer is done) */
		if ((soak.kills < opt.kills || (opt.kills && !buyers_done())) && now >= next_kill) {
			pid_t w[CHAOS_MAX_PIDS];
			int n = workers_of(soak.run, w, CHAOS_MAX_PIDS, stopped);

			if (soak.run_b)
				n += workers_of(soak.run_b, w + n, CHAOS_MAX_PIDS - n, stopped);
			pid_t victim = n > 0 ? w[rng_below((uint64_t)n)] : 0;

			if (victim > 0 && (proc_parent(victim) == soak.run ||
					   (soak.run_b && proc_parent(victim) == soak.run_b))) {
				kill(victim, SIGKILL);
				soak.kills++;
				next_kill = now + 100 + (int64_t)rng_below(401);
			} else {
				next_kill = now + 20;	/* all being restarted: look again soon */
			}
		}

		if (next_order >= opt.orders && orders_running() == 0 && !changes_pending() &&
		    buyers_done() && sqsrun_done() && soak.kills >= opt.kills &&
		    stop_done && !stopped && soak.app_kills >= (opt.kills ? 2 : 0))
			return 0;
		sleep_ms(10);
	}
	fail("interrupted");
	return -1;
}

/* ======================== the appliance's own figures ==================== */

static const char *const techniques[] = { "check_state", "unique_claim", "provider_key",
					  "processed_jobs" };

/* The number after " FIELD=" on the last line of log, at or after byte
 * offset from, that holds every needle (NULL ends them); 0 when none. */
static long log_last_since(const char *log, long from, const char *field,
			   const char *const *needles)
{
	FILE *f = fopen(log, "r");
	char line[4096], want[32];
	const char *p;
	long v = 0;
	int i;

	if (!f)
		return 0;
	if (from > 0 && fseek(f, from, SEEK_SET) != 0) {
		fclose(f);
		return 0;
	}
	snprintf(want, sizeof want, " %s=", field);
	while (fgets(line, sizeof line, f)) {
		for (i = 0; needles[i] && strstr(line, needles[i]); i++)
			;
		if (!needles[i] && (p = strstr(line, want)))
			v = atol(p + strlen(want));
	}
	fclose(f);
	return v;
}

/* The port of the last "http listening" line of log at or after from: the
 * API's, never the shop's (which logs one too, on its own port). */
static int log_port_since(const char *log, long from)
{
	FILE *f = fopen(log, "r");
	char line[4096];
	const char *p;
	int port = 0, n;

	if (!f)
		return 0;
	if (from > 0 && fseek(f, from, SEEK_SET) != 0) {
		fclose(f);
		return 0;
	}
	while (fgets(line, sizeof line, f))
		if (strstr(line, "msg=\"http listening\"") && (p = strstr(line, " port=")) &&
		    (n = atoi(p + 6)) > 0 && !buyers_shop_port(n) && !sqsrun_port(n))
			port = n;
	fclose(f);
	return port;
}

int http_port_since(long from)
{
	return log_port_since(soak.run_log, from);
}

pid_t http_child_since(long from)
{
	static const char *const needles[] = { "msg=\"child started\"", " role=http ", NULL };

	return (pid_t)log_last_since(soak.run_log, from, "pid", needles);
}

int box_http_port(int b)
{
	if (b && opt.boxes > 1)
		return soak.run_b ? log_port_since(soak.run_log_b, soak.run_log_b_from) : 0;
	return soak.run ? log_port_since(soak.run_log, soak.run_log_from) : 0;
}

void box_token_path(int b, char *buf, size_t size)
{
	if (opt.pg)	/* each box's own state folder */
		snprintf(buf, size, "%s/box-%c/api.token", soak.dir, b && opt.boxes > 1 ? 'b' : 'a');
	else		/* beside the database */
		snprintf(buf, size, "%s/api.token", soak.dir);
}

/* Sum the samples of metric (any labels; with want_label, only those that
 * hold it) in a Prometheus text. */
static long prom_sum(const char *text, const char *metric, const char *want_label)
{
	size_t n = strlen(metric);
	const char *p = text;
	long sum = 0;

	for (; (p = strstr(p, metric)); p += n) {
		const char *end = strchr(p, '\n'), *sp;

		if ((p != text && p[-1] != '\n') || (p[n] != '{' && p[n] != ' '))
			continue;
		if (!end)
			end = p + strlen(p);
		if (!(sp = memchr(p, ' ', (size_t)(end - p))))
			continue;
		if (want_label) {
			const char *l = strstr(p, want_label);
			if (!l || l > sp)
				continue;
		}
		sum += atol(sp + 1);
	}
	return sum;
}

/* What the appliance itself counted, from its /metrics: the workers'
 * shared counters, to hold against the figures this harness counts in the
 * log.  A plain HTTP/1.0 GET on loopback. */
static void scrape_metrics(void)
{
	struct sockaddr_in a;
	struct timeval tv = { 5, 0 };
	static char buf[1 << 20];
	size_t len = 0;
	ssize_t got;
	const char *body;
	char label[64];
	int fd, port = http_port_since(0), i;

	if (port <= 0 || (fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    write(fd, "GET /metrics HTTP/1.0\r\n\r\n", 26) != 26) {
		close(fd);
		return;
	}
	while (len < sizeof buf - 1 && (got = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
		len += (size_t)got;
	close(fd);
	buf[len] = '\0';
	if (strncmp(buf, "HTTP/1.", 7) != 0 || strncmp(buf + 8, " 200", 4) != 0 ||
	    !(body = strstr(buf, "\r\n\r\n")))
		return;
	for (i = 0; i < 4; i++) {
		snprintf(label, sizeof label, "technique=\"%s\"", techniques[i]);
		soak.m_absorbed[i] = prom_sum(body, "stagedoor_duplicates_absorbed_total", label);
	}
	soak.m_stale = prom_sum(body, "stagedoor_stale_acks_total", NULL);
	soak.m_runs = prom_sum(body, "stagedoor_handler_runs_total", NULL);
	soak.scraped = 1;
}

/* ======================== drain and stop ================================ */

/* Poll `stagedoor check` until it passes with nothing scheduled either:
 * check lets scheduled entries wait, and one can be a relay's duplicate of
 * a job done meanwhile, snoozed behind the claim of the other (it acks once
 * it comes back); the verdict wants the stream empty. */
static int drain(void)
{
	const char *argv[] = { opt.bin, "check", "--db", soak.db, NULL };
	/* under --controls the limits pace the backlog the pauses left: twice
	 * the time (send_tickets at 40/s alone takes a minute for 2,400 emails) */
	int64_t t0 = now_ms(), until = t0 + opt.drain_timeout_s * (opt.controls ? 2 : 1) * 1000;
	char out[2048] = "", later[300];
	int rc = -1;

	while (now_ms() < until && !chaos_interrupted) {
		if (chaos_run_watch() != 0)
			return -1;
		orphans_reap();
		/* with buyers, jobs the shop scheduled hours ahead to look
		 * again at what has ended since need not be waited for */
		if ((rc = proc_run(argv, out, sizeof out, 1)) == 0 &&
		    (!strstr(out, "scheduled jobs wait") || buyers_later_only(later, sizeof later))) {
			/* with buyers: no hold open, no refund or its email owed
			 * (the reconcile jobs run a minute after the last hold) */
			if (!buyers_settled(out, sizeof out)) {
				rc = 0;
				sleep_ms(500);
				continue;
			}
			soak.drain_ms = now_ms() - t0;
			return 0;
		}
		sleep_ms(500);
	}
	soak.drain_ms = now_ms() - t0;	/* how long it tried */
	if (chaos_interrupted)
		fail("interrupted while draining");
	else
		fail("drain: stagedoor check still failing after %ld s (exit %d): %.300s",
		     opt.drain_timeout_s * (opt.controls ? 2 : 1), rc, out);
	return -1;
}

static int stop_box(pid_t *run)
{
	pid_t all[CHAOS_MAX_PIDS];
	int n, i, rc;

	if (!*run)
		return 0;
	n = proc_descendants(*run, all, CHAOS_MAX_PIDS);
	kill(*run, SIGTERM);
	rc = proc_wait(*run, CHAOS_GRACE_MS);
	if (rc == -2) {
		kill_box(run);
		fail("stop: stagedoor run did not exit within %d ms of SIGTERM", CHAOS_GRACE_MS);
		return -1;
	}
	*run = 0;
	/* a child the run left behind is ours now (we are its subreaper) */
	for (i = 0; i < n; i++) {
		if (proc_parent(all[i]) == getpid()) {
			kill(all[i], SIGKILL);
			orphans_add(all[i]);
		}
	}
	orphans_reap();
	if (rc != 0) {
		fail("stop: stagedoor run exited %d after SIGTERM, not 0", rc);
		return -1;
	}
	return 0;
}

static int stop_appliance(void)
{
	int rc = stop_box(&soak.run);

	return stop_box(&soak.run_b) != 0 ? -1 : rc;
}

static void stop_sink(void)
{
	if (!soak.sink)
		return;
	kill(soak.sink, SIGTERM);
	if (proc_wait(soak.sink, 15000) == -2) {
		kill(soak.sink, SIGKILL);
		proc_wait(soak.sink, 5000);
	}
	soak.sink = 0;
}

/* Whatever still runs, at any exit. */
static void cleanup(void)
{
	int i;

	for (i = 0; i < CHAOS_PLACERS; i++) {
		if (placers[i].pid > 0) {
			kill(placers[i].pid, SIGKILL);
			proc_wait(placers[i].pid, 5000);
			placers[i].pid = 0;
		}
	}
	changes_cleanup();
	buyers_cleanup();
	sqsrun_cleanup();
	kill_appliance();
	kill_box(&soak.run_b);
	stop_sink();
	if (opt.cuts)
		cuts_cleanup();
	for (i = 0; i < soak.n_orphans; i++)
		if (proc_parent(soak.orphans[i]) == getpid())
			kill(soak.orphans[i], SIGKILL);
	orphans_reap();
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* ======================== the figures =================================== */

/* Count the log lines with msg="<msg>" by the value of key=. */
/* tally_file: add the lines of one run log to t[0..n), returning the new n */
static int tally_file(const char *path, const char *msg, const char *key, struct tally *t,
		      int n, int max)
{
	FILE *f = fopen(path, "r");
	char line[4096], want_msg[128], want_key[64];
	int i;

	if (!f)
		return n;
	snprintf(want_msg, sizeof want_msg, "msg=\"%s\"", msg);
	snprintf(want_key, sizeof want_key, " %s=", key);
	while (fgets(line, sizeof line, f)) {
		const char *p;
		char name[64];
		size_t len;

		if (!strstr(line, want_msg) || !(p = strstr(line, want_key)))
			continue;
		p += strlen(want_key);
		len = strcspn(p, " \n\"");
		if (len == 0 || len >= sizeof name)
			continue;
		memcpy(name, p, len);
		name[len] = '\0';
		for (i = 0; i < n && strcmp(t[i].name, name) != 0; i++)
			;
		if (i == n) {
			if (n == max)
				continue;
			snprintf(t[n].name, sizeof t[n].name, "%s", name);
			t[n++].n = 0;
		}
		t[i].n++;
	}
	fclose(f);
	return n;
}

/* Both boxes' logs: box B's is there with --boxes 2. */
static int tally_log(const char *msg, const char *key, struct tally *t, int max)
{
	int n = tally_file(soak.run_log, msg, key, t, 0, max);

	return opt.boxes > 1 ? tally_file(soak.run_log_b, msg, key, t, n, max) : n;
}

/* One email per intent: made, messages, beyond one, missing, per kind;
 * then the changes the soak's log says were made, and what they did. */
static void print_intent_figures(const struct verdict *v)
{
	static const char *const kinds[INTENT_KINDS] = { "tickets", "resend", "cancel" };
	int i;

	for (i = 0; i < INTENT_KINDS; i++) {
		printf("intents.%s %ld\n", kinds[i], v->intents[i]);
		printf("messages.%s %ld\n", kinds[i], v->msgs[i]);
		printf("duplicates.%s %ld\n", kinds[i], v->dups[i]);
		printf("lost.%s %ld\n", kinds[i], v->missing[i]);
	}
	printf("messages_for_unmade_intents %ld\n", v->unmade);
	printf("emails_for_orders_not_in_the_database %ld\n", v->for_missing_orders);
	printf("emails_under_another_orders_key %ld\n", v->key_of_another);
	printf("owed_emails_absorbed_as_duplicates %ld\n", v->owed_absorbed);
	printf("codes_scanned %ld\n", v->codes_checked);
	printf("codes_admitting_another_orders_seat %ld\n", v->codes_other_order);
	printf("codes_of_cancelled_orders_admitting %ld\n", v->codes_of_cancelled);
	printf("messages_to_wrong_address %ld\n", v->wrong_address);
	printf("orders_cancelled %ld\n", v->orders_cancelled);
	printf("cancelled_after_tickets_email %ld\n", v->cancelled_mailed);
	printf("intents_not_owed_after_cancel %ld\n", v->excused);
	printf("tickets_cancelled %ld\n", v->tickets_cancelled);
	printf("tickets_live %ld\n", v->live_tickets);
	printf("seats_resold %ld\n", v->seats_resold);
	if (!v->logged)
		return;
	printf("log.orders_placed %ld\n", v->placed_logged);
	printf("log.sold_out_refusals %ld\n", v->sold_out_logged);
	printf("log.seats_sold %ld\n", v->seats_sold_logged);
	printf("log.seats_cancelled %ld\n", v->seats_cancelled_logged);
	printf("changes.resend_cli %ld\n", v->resend_cli);
	printf("changes.resend_api %ld\n", v->resend_api);
	printf("changes.resend_api_same_key_again %ld\n", v->resend_same_key);
	printf("changes.resend_outcome_unknown %ld\n", v->resend_unknown);
	printf("changes.resends_unacknowledged %ld\n", v->resends_unacknowledged);
	printf("changes.readdress_cli %ld\n", v->readdress_cli);
	printf("changes.readdress_api %ld\n", v->readdress_api);
	printf("changes.resent_after_readdress %ld\n", v->resent_after_readdress);
	printf("changes.cancel_cli %ld\n", v->cancel_cli);
	printf("changes.cancel_api %ld\n", v->cancel_api);
	printf("changes.cancel_again %ld\n", v->cancel_again);
}

static void print_figures(const struct verdict *v, int64_t elapsed_ms)
{
	struct tally fp[32], dup[32];
	int n_fp, n_dup, i, j;

	n_fp = tally_log("failpoint hit", "failpoint", fp, 32);
	n_dup = tally_log("duplicate absorbed", "technique", dup, 32);
	printf("orders %ld\n", v->orders);
	printf("seats %ld\n", v->seats);
	printf("events %ld\n", v->events);
	if (opt.cuts)
		cuts_print_figures();
	else if (!opt.verify_only) {
		printf("order_retries %ld\n", soak.order_retries);
		printf("kills %ld\n", soak.kills);
		printf("sigstops %ld\n", soak.stops);
		printf("sigstop_ms %ld\n", soak.stop_ms);
		printf("appliance_kills %ld\n", soak.app_kills);
		printf("restart_refusals %ld\n", soak.restart_refusals);
		printf("run_exits %ld\n", soak.run_exits);
		printf("drain_s %.1f\n", (double)soak.drain_ms / 1000.0);
		printf("boxes %ld\n", opt.boxes);
		if (opt.controls)
			printf("controls.pauses %ld\n", soak.pauses);
		changes_print_figures();
		buyers_print_figures();
		eventrun_print_figures();
		if (opt.failover) {
			printf("orders_acknowledged_before_failover %ld\n",
			       soak.placed_before_failover);
			printf("failover_command_ms %ld\n", soak.failover_ms);
			printf("failover_downtime_ms %ld\n", soak.failover_downtime_ms);
		}
	}
	printf("reclaimed_jobs %ld\n", v->reclaimed_jobs);
	printf("redeliveries %ld\n", v->redeliveries);
	for (i = 0; i < n_fp; i++)
		printf("failpoint.%s %ld\n", fp[i].name, fp[i].n);
	for (i = 0; i < 4; i++) {
		long n = 0;

		for (j = 0; j < n_dup; j++)
			if (strcmp(dup[j].name, techniques[i]) == 0)
				n = dup[j].n;
		printf("absorbed.%s %ld\n", techniques[i], n);
	}
	for (j = 0; j < n_dup; j++) {
		for (i = 0; i < 4 && strcmp(dup[j].name, techniques[i]) != 0; i++)
			;
		if (i == 4)
			printf("absorbed.%s %ld\n", dup[j].name, dup[j].n);
	}
	if (soak.scraped) {
		for (i = 0; i < 4; i++)
			printf("metrics.absorbed.%s %ld\n", techniques[i], soak.m_absorbed[i]);
		printf("metrics.stale_acks %ld\n", soak.m_stale);
		printf("metrics.handler_runs %ld\n", soak.m_runs);
	}
	printf("provider_replays %ld\n", v->provider_replays);
	printf("relay_duplicates %ld\n", v->relay_duplicates);
	printf("provider_failed_500 %ld\n", v->provider_failed_500);
	printf("provider_dropped %ld\n", v->provider_dropped);
	printf("pdfs_checked %ld\n", v->pdfs_checked);
	print_intent_figures(v);
	shop_print_figures(v);
	event_print_figures(v);
	printf("messages %ld\n", v->messages);
	printf("duplicates_delivered %ld\n", v->duplicates);
	printf("lost %ld\n", v->lost);
	printf("elapsed_s %.1f\n", (double)elapsed_ms / 1000.0);
}

/* ======================== main ========================================== */

/*
 * soak_run: set up, attack (kills, or power cuts with --power-cuts), drain,
 * stop, then the verdict into v.  In the power-cut mode the verdict reads
 * the disk itself after a clean unmount.
 */
static void soak_run(struct verdict *v)
{
	char disk_db[CHAOS_PATH_MAX + 64];
	int port = 0;

	if (opt.cuts)
		say("seed %" PRIu64 ", dir %s, %ld orders, %ld power cuts (%ld%% torn), %ld workers",
		    opt.seed, soak.dir, opt.orders, opt.cuts, opt.torn_pct, opt.workers);
	else
		say("seed %" PRIu64 ", dir %s, %ld orders, %ld kills, %ld workers; changes: %ld%% "
		    "resent, %ld%% re-addressed, %ld%% cancelled; %ld buyers", opt.seed, soak.dir,
		    opt.orders, opt.kills, opt.workers, opt.resend_pct, opt.readdress_pct,
		    opt.cancel_pct, opt.buyers);
	if ((opt.cuts && cuts_mount() != 0) || start_sink(&port) != 0 ||
	    buyers_start_provider() != 0 || write_config(port) != 0 ||
	    setup_db() != 0 || (!opt.cuts && changes_init() != 0) || buyers_init() != 0 ||
	    sqsrun_init() != 0 ||
	    (!opt.cuts && start_run(failpoints) != 0) ||
	    (opt.boxes > 1 && start_run_b(failpoints) != 0))
		goto end;
	if (opt.pg)
		say("on PostgreSQL, %ld box%s", opt.boxes, opt.boxes > 1 ? "es" : "");
	say("mailsink on port %d", port);
	if ((opt.cuts ? cuts_attack() : attack()) != 0 || pause_step(1) != 0)
		goto end;
	if (opt.controls)
		say("controls: send_tickets at 40/s, render_tickets 8 at once, "
		    "update_sales_counter 4 a box; render_tickets paused %ld times", soak.pauses);
	if (opt.cuts)
		say("%ld orders placed; draining", cuts_orders_placed());
	else
		say("%ld orders placed (%ld moved off the sold-out event), %ld buyers done, %ld "
		    "worker kills, %ld stops, %ld appliance kills; draining", soak.placed,
		    soak.sold_out_moved, opt.buyers, soak.kills, soak.stops, soak.app_kills);
	if (drain() != 0 || sqsrun_settle() != 0)
		goto end;
	say("stagedoor check passes after %.1f s of draining", (double)soak.drain_ms / 1000.0);
	if (opt.event_run && (eventrun_attack() != 0 || drain() != 0))
		goto end;
	if (opt.event_run)
		say("stagedoor check passes after %.1f s of draining the event's runs",
		    (double)soak.drain_ms / 1000.0);
	say("SIGTERM to the appliance");
	scrape_metrics();
	if (stop_appliance() != 0)
		goto end;
	buyers_stop_provider();
	stop_sink();
	if (opt.cuts && cuts_unmount() != 0)
		goto end;
end:
	cleanup();
	if (opt.cuts)
		cuts_disk_db(disk_db, sizeof disk_db);
	else
		snprintf(disk_db, sizeof disk_db, "%s", soak.db);
	v->db_path = disk_db;
	v->maildir = soak.maildir;
	v->counts_path = soak.counts;
	if (opt.box_maildir) {	/* the messages the box wrote, on the disk */
		snprintf(soak.maildir, sizeof soak.maildir, "%s/" CHAOS_CUTS_DISK "/maildir",
			 soak.dir);
		v->counts_path = NULL;
	}
	v->expect_orders = opt.cuts ? cuts_orders_placed() : opt.orders;
	v->door_bin = opt.bin;
	v->work_dir = soak.dir;
	v->actions_path = opt.cuts ? NULL : soak.actions_log;
	v->record_path = buyers_record_path();
	v->expect_reminders = opt.event_run;
	if (opt.pg || access(disk_db, F_OK) == 0) {
		say("verifying %s", disk_db);
		verify_run(v);
		if (!soak.first_broken[0] && !v->broken[0] && !opt.cuts)
			sqsrun_verify(disk_db, v->broken, sizeof v->broken);
	} else {
		snprintf(v->broken, sizeof v->broken, "no database");
	}
}

int main(int argc, char **argv)
{
	struct verdict v;
	struct sigaction sa;
	int ok;

	soak.t0 = now_ms();
	opts_parse(argc, argv);
	rng_seed(opt.seed);
	memset(&v, 0, sizeof v);
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (opt.verify_only) {
		v.db_path = opt.db;
		v.maildir = opt.maildir;
		v.counts_path = opt.counts;
		v.actions_path = opt.actions;
		v.record_path = opt.record;
		v.expect_orders = opt.orders_given ? opt.orders : -1;
		v.door_bin = opt.door ? opt.bin : NULL;
		v.work_dir = opt.door;
		ok = verify_run(&v) == 0;
		print_figures(&v, now_ms() - soak.t0);
		printf("result %s\n", ok ? "ok" : "broken");
		if (!ok)
			fprintf(stderr, "chaos: broken: %s\n", v.broken);
		return ok ? 0 : 1;
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* the workers of a killed run become ours to reap */
	prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);

	if (setup_dir() != 0)
		return 1;
	soak_run(&v);
	print_figures(&v, now_ms() - soak.t0);
	if (!soak.first_broken[0] && v.broken[0])
		snprintf(soak.first_broken, sizeof soak.first_broken, "%s", v.broken);
	if (!soak.first_broken[0] && v.duplicates != 0)
		snprintf(soak.first_broken, sizeof soak.first_broken, "duplicates delivered: %ld",
			 v.duplicates);
	ok = !soak.first_broken[0];
	printf("result %s\n", ok ? "ok" : "broken");
	if (!ok) {
		fprintf(stderr, "chaos: broken: %s\n", soak.first_broken);
		if (v.broken[0] && strcmp(v.broken, soak.first_broken) != 0)
			fprintf(stderr, "chaos: the verifier's first: %s\n", v.broken);
	}
	if (opt.keep || !ok)
		fprintf(stderr, "chaos: kept %s\n", soak.dir);
	else if (soak.made_dir)
		nftw(soak.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return ok ? 0 : 1;
}
