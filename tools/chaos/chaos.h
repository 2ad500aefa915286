/*
 * chaos.h: what the crash soak's files share.
 *
 *   chaos.c   options, set-up, the kill attack, drain, the figures
 *   changes.c the kill attack's changes to orders: resend, new address, cancel
 *   buyers.c  the kill attack's buyers in the shop (--buyers), paying at paysink
 *   buyermoney.c  their money after the checkout: delayed payments settled,
 *             refunds in paysink's dashboard, disputes, the bank of pending
 *             refunds (buyers.h: what the two share)
 *   sqsrun.c  the kill attack's queue of its own (--sqs-tasks): boto3 workers
 *             outside the box, killed too
 *   cuts.c    the power-cut attack (--power-cuts): the box on tools/powercut
 *   eventrun.c  a whole event's day (--event-run): moved, reminded, cancelled
 *   procs.c   child processes: spawn, wait, the appliance's process tree
 *   verify.c  the independent verdict, from the database and the provider
 *   shopcheck.c  its part on the shop: holds, payments, refunds, paysink's record
 *   backcheck.c  ... on the money after the sale: delayed payments, money
 *             given back outside the box, the box's refunds as paysink ended
 *             them, the door (shopcheck.h: what the two share)
 *   eventcheck.c its part on an event's runs and the reminders
 *   vdb.c     the database it reads: the SQLite file, or PostgreSQL itself
 *
 * The harness is deliberately not built from src/: it links SQLite and libpq
 * itself and reads the tables read-only, so a bug in the appliance's own counters
 * cannot hide a bug in the appliance.
 */
#ifndef CHAOS_H
#define CHAOS_H

#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>

#define CHAOS_PATH_MAX 1024
#define V_ADDR_MAX 128		/* an email address, as the verdict keeps it */
#define CHAOS_EVENTS 3
#define CHAOS_MAX_PIDS 256
#define CHAOS_CUTS_DISK "disk"	/* --power-cuts: <dir>/disk, the disk */
#define CHAOS_CUTS_MOUNT "box"	/* ... and <dir>/box, its mount, the box's folder */
#define CHAOS_CUTS_BACKUPS "backups"	/* --backups: <dir>/box/backups */
#define CHAOS_ORDER_TRIES 30	/* one order, refused (busy) this often: give up */
#define CHAOS_ACTIONS_LOG "actions.log"	/* the kill soak's own record, in its folder */
#define CHAOS_PAYSINK_RECORD "paysink.json"	/* --buyers: paysink's record, in its folder */

/* ---- chaos.c: the options and the run's state ------------------------------ */

struct chaos_opts {
	char bin[CHAOS_PATH_MAX];	/* stagedoor, absolute */
	char mailsink[CHAOS_PATH_MAX];	/* build/mailsink, absolute */
	char certs_sh[CHAOS_PATH_MAX];	/* tools/certs.sh */
	char powercut[CHAOS_PATH_MAX];	/* build/powercut, absolute */
	char paysink[CHAOS_PATH_MAX];	/* build/paysink, absolute */
	long buyers;			/* --buyers N: buyers in the shop, 0: none */
	long sqs_tasks;			/* --sqs-tasks N: tasks through the SQS listener */
	long sqs_kills;			/* --sqs-kills K: external workers killed */
	const char *dir;		/* NULL: a fresh mkdtemp */
	long orders;
	long kills;
	long workers;
	long cuts;			/* --power-cuts: the power-cut attack, 0: the kills */
	long torn_pct;			/* of the cuts, this share torn */
	long up_max_ms;			/* a box lives up to this long between cuts */
	long slow_fsync_ms;		/* --slow-fsync-ms: the intake's flushes take
					 * this long (strace), 0: the disk's own */
	int box_maildir;		/* --maildir-on-box: mail_url = maildir: on the mount */
	int backups;			/* --backups: run backs up every second on the mount */
	uint64_t seed;
	int keep;
	long drain_timeout_s;
	long stop_max_ms;
	const char *pg;			/* --pg URI: the boxes' PostgreSQL database */
	long boxes;			/* --boxes N: `run`s sharing it (1 or 2) */
	const char *failover;		/* --failover CMD: run at half the orders */
	long resend_pct;		/* --resend-pct: orders resent (kill soak) */
	long readdress_pct;		/* --readdress-pct: given a new address, then resent */
	long cancel_pct;		/* --cancel-pct: cancelled; a small event sells out */
	int event_run;			/* --event-run: the shop's event moved, reminded,
					 * cancelled under the kills (eventrun.c) */
	int controls;			/* --controls: limits set, a kind paused and
					 * resumed under the kills */
	int changes_given;		/* one of the three was given */
	const char *sets[32];		/* --set KEY=VALUE: more config lines */
	int n_sets;
	/* --verify-only */
	int verify_only;
	int orders_given;		/* --verify-only checks the number only then */
	const char *db, *maildir, *counts;
	const char *actions;		/* --actions FILE: the soak's log to judge by */
	const char *door;		/* --door DIR: scan the emails' codes, a copy
					 * of the database in DIR/door */
	const char *record;		/* --record FILE: paysink's record, for the
					 * shop's part of the verdict */
};

struct chaos_state {
	char dir[CHAOS_PATH_MAX];
	char db[CHAOS_PATH_MAX + 32], conf[CHAOS_PATH_MAX + 32], run_log[CHAOS_PATH_MAX + 32];
	char maildir[CHAOS_PATH_MAX + 32], counts[CHAOS_PATH_MAX + 32];
	char certs[CHAOS_PATH_MAX + 32], orders_log[CHAOS_PATH_MAX + 32];
	char actions_log[CHAOS_PATH_MAX + 32];	/* what the kill soak did, and when */
	long run_log_from, run_log_b_from;	/* each log's size at its box's last start */
	int made_dir;			/* ours to remove */
	pid_t run;			/* `stagedoor run`, 0 when not running */
	pid_t run_b;			/* --boxes 2: the second box's run */
	char conf_b[CHAOS_PATH_MAX + 32], run_log_b[CHAOS_PATH_MAX + 32];
	char key_file[CHAOS_PATH_MAX + 32];	/* --pg: the ticket key both are given */
	pid_t sink;			/* mailsink */
	pid_t orphans[CHAOS_MAX_PIDS];	/* descendants of a killed run, to reap */
	int n_orphans;
	long event_ids[CHAOS_EVENTS];
	long small_event;		/* --cancel-pct: the event that sells out, 0: none */
	long small_capacity;
	int small_full;			/* an order found it sold out */
	long shop_event;		/* --buyers: the priced event they buy */
	int64_t t0;

	/* figures */
	long placed, order_retries;
	long sold_out_moved;		/* orders the small event refused, placed elsewhere */
	long kills, stops, app_kills, run_exits, restart_refusals;
	long pauses;			/* --controls: render_tickets paused so often */
	long failover_ms;		/* --failover: the command's own time */
	long failover_downtime_ms;	/* from its start to the next order accepted */
	long placed_before_failover;
	long stop_ms;
	int64_t drain_ms;		/* attack over to the first passing check */
	int scraped;			/* /metrics was read after the drain */
	long m_absorbed[4];		/* its duplicates absorbed, by technique */
	long m_stale, m_runs;		/* its stale acks and handler runs */
	char first_broken[600];
};

extern struct chaos_opts opt;
extern struct chaos_state soak;
extern volatile sig_atomic_t chaos_interrupted;

/* fail: remember the first thing that went wrong (later ones are printed
 * only); say: a progress line on stderr with the time since the start. */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* start_run: `stagedoor run` up with a worker (retried while the last one's
 * lock is held); extra_env (may be NULL) for its environment.  kill_appliance:
 * SIGKILL the run and every descendant, wait until they are gone.
 * orphans_reap: reap what has died of the killed runs' descendants. */
int start_run(const char *const *extra_env);
void kill_appliance(void);

/* chaos_run_watch: a run that exited by itself counted (a failure) and
 * started again; -1 when it cannot be.  chaos_kill_worker: SIGKILL one
 * worker of any box, 1 when one was killed.  chaos_kill_box: SIGKILL box b
 * (0: A, 1: B) whole and start it again. */
int chaos_run_watch(void);
int chaos_kill_worker(void);
int chaos_kill_box(int b);

/* ---- eventrun.c: --event-run -------------------------------------------- */

/* eventrun_attack: after the sale's drain, the shop's event moved (one
 * whole-box kill), its reminders sent, then cancelled (two), workers killed
 * throughout.  eventrun_print_figures: its own figures. */
int eventrun_attack(void);
void eventrun_print_figures(void);
void orphans_reap(void);

/* http_port_since: the port of the last "http listening" line of the run
 * log at or after byte offset from, 0 when there is none yet. */
int http_port_since(long from);

/* http_child_since: the pid of the HTTP child the run log names last at or
 * after byte offset from, 0 when none. */
pid_t http_child_since(long from);

/* box_http_port: the API's port of box b (0: A, 1: B) since its last start,
 * 0 while it has none yet.  box_token_path: its api.token. */
int box_http_port(int b);
void box_token_path(int b, char *buf, size_t size);

/* order_fields: order idx's event, buyer and seats, a function of the seed and
 * idx, so that a retry (same idempotency key) sends the very same order.
 * order_fields_moved: the same order placed elsewhere after the small event
 * refused it (sold out): a big event and a key of its own. */
struct order_fields {
	char event[32], name[64], email[96], seats[8], key[96];
	char payment[8];		/* --event-run: cash, card or "" (not paid) */
};
void order_fields(long idx, struct order_fields *f);
void order_fields_moved(long idx, int moved, struct order_fields *f);

/* place_cli: `stagedoor order add` for order idx, its stderr to the orders
 * log; the pid, or -1.  With --slow-fsync-ms the process runs under strace,
 * which holds each of its fsync and fdatasync calls that long before the
 * kernel sees it (a disk slow to flush, for this process alone); the pid is
 * strace's, which ends with the order's exit status, and a SIGKILL of it
 * kills the order too. */
pid_t place_cli(long idx);

/* slow_fsync_argv: argv run under such a strace when --slow-fsync-ms is
 * set (into out, at most max entries with the NULL; us: a buffer for the
 * delay), else argv itself.  slow_fsync_attach: such a strace attached to
 * the running process pid and all its threads; its pid, 0 when not slowed,
 * -1 on failure. */
const char *const *slow_fsync_argv(const char *const *argv, const char **out, size_t max,
				   char *us, size_t us_size);
pid_t slow_fsync_attach(pid_t pid);

/* slow_fsync_env: with --slow-fsync-ms, the environment a process that
 * strace will trace needs more: a sanitizer build's leak check off (it
 * cannot run under ptrace), the rest of ASAN_OPTIONS kept; else NULL. */
const char *const *slow_fsync_env(void);

/* ---- changes.c: orders that change while the kill soak runs ------------ */

/* The log (soak.actions_log): one line per thing done and acknowledged,
 * "VERB key=value ... t0=MS t1=MS" (ms since the soak started: asked,
 * answered).  VERBs: placed (idx order event seats email via), soldout
 * (idx event), resend (order via n key), replay (order via n first key),
 * resend-unknown (order via rc: an attempt whose outcome is not known),
 * email (order via to), cancel (order via already seats again).  One order
 * has one action at a time, so its lines are in the order of its changes. */
void actions_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* changes_init: the plan (opt.*_pct of the orders, spread over the orders'
 * progress).  changes_placed: order idx acknowledged (logged; a target from
 * then on).  changes_step: reap finished changes and start due ones; -1 when
 * the box refused one it must not have.  changes_pending: changes planned or
 * running.  changes_cleanup: stop what runs.  changes_print_figures: the
 * attack's own figures. */
int changes_init(void);
void changes_placed(long idx, const char *public_id, const struct order_fields *f,
		    int64_t t0);
int changes_step(void);
int changes_pending(void);
void changes_cleanup(void);
void changes_print_figures(void);

/* ---- buyers.c: buyers in the shop while the kill soak runs ------------- */

/* buyers_start_provider: a shop port for each box, paysink's key and
 * webhook secret files, paysink started (its webhooks to box A's shop).
 * buyers_config: box b's shop and provider settings, config lines into
 * text (how many bytes; 0 without --buyers).  buyers_capacity, _price,
 * _currency: the buyers' event.  buyers_init: the plan (each buyer's
 * choice, seats, address).  buyers_step: reap finished steps, start due
 * ones; -1 when a buyer met what the box owes no one.  buyers_done: every
 * buyer has finished.  buyers_holds_ending: a hold has run out (or all are
 * done): the second whole-box kill waits for it; buyers_checkout_running: a
 * buyer's checkout is being asked of box b's shop, for a whole-box kill to
 * meet (or all are done).  buyers_settled: the box
 * owes no hold's end, refund or refund email (why not into why).
 * buyers_later_only: the jobs the stream holds for later are all the
 * shop's looks again at what has ended (CHAOS_SHOP_LATER), or reminders
 * (1), or some other (0, what into why).
 * buyers_stop_provider: paysink stopped (its record written last).
 * buyers_record_path: that record, NULL without --buyers. */
int buyers_start_provider(void);
int buyers_shop_port(int port);		/* a shop's port (not the API's) */
size_t buyers_config(int box, char *text, size_t size);
long buyers_capacity(void);
const char *buyers_price(void);
const char *buyers_currency(void);
int buyers_init(void);
int buyers_step(void);
int buyers_done(void);
int buyers_holds_ending(void);
int buyers_checkout_running(int box);
long buyers_pending(void);
int buyers_settled(char *why, size_t size);
int buyers_later_only(char *why, size_t size);
void buyers_stop_provider(void);
const char *buyers_record_path(void);
void buyers_cleanup(void);
void buyers_print_figures(void);

/* The stream's entries that are the shop's looks again at something that
 * has ended meanwhile (an SQL condition on stream's columns): a hold's
 * reconcile job that asked the provider again later (a delayed payment's
 * 6 hours) and is no longer needed because the hold is no longer open, a
 * refund's look at the provider (30 minutes) after the refund was done or
 * failed.  They wait for their time and then find nothing to do: the
 * drain does not wait for them, and the verdict counts them apart. */
#define CHAOS_SHOP_LATER \
	"(lease_token IS NULL AND ((kind = 'reconcile_hold' AND EXISTS (SELECT 1 FROM holds h " \
	"WHERE 'outbox:' || h.public_id || ':reconcile' = stream.job_id AND h.state <> 'open')) " \
	"OR (kind = 'refund_payment' AND EXISTS (SELECT 1 FROM refunds r WHERE 'outbox:' || " \
	"r.payment_ref || ':refund' = stream.job_id AND (r.done_at IS NOT NULL OR " \
	"r.failed_at IS NOT NULL)))))"

/* ---- sqsrun.c: --sqs-tasks, an external worker's queue ------------------- */

/* sqsrun_config: box b's sqs_listen line into text (how many bytes; 0
 * without --sqs-tasks).  sqsrun_init: the worker token and its
 * credentials, after init.  sqsrun_step: the producer and the boto3 workers
 * kept running, one worker killed every 300-800 ms until --sqs-kills; -1
 * when the producer failed.  sqsrun_done: every task sent and every kill
 * made.  sqsrun_settle: after the box's drain, wait until every task's
 * effect is in the workers' database and the queue is empty, then stop
 * the workers.  sqsrun_verify: the verdict (the workers' own database and
 * the box's), its figures printed; -1 and why into broken when it fails.
 * sqsrun_cleanup: whatever still runs. */
size_t sqsrun_config(int box, char *text, size_t size);
int sqsrun_port(int port);		/* an SQS listener's port (not the API's) */
int sqsrun_init(void);
int sqsrun_step(void);
int sqsrun_done(void);
int sqsrun_settle(void);
int sqsrun_verify(const char *db_path, char *broken, size_t size);
void sqsrun_cleanup(void);

/* ---- cuts.c ------------------------------------------------------------------ */

/* cuts_mount: the powercut daemon on <dir>/disk at <dir>/box, where the box's
 * database and state go (soak.db names it).  cuts_attack: orders through the
 * CLI and the API while the pipeline runs, and opt.cuts power cuts, each
 * followed by a remount, checks and a new start.  cuts_unmount: stop the
 * daemon cleanly (every write synced), for the final verdict on the disk
 * itself; cuts_disk_db: that database's path on the disk.  cuts_cleanup:
 * whatever still runs.  cuts_print_figures: its figures as "name value"
 * lines.  cuts_orders_placed: how many orders it placed (each acknowledged). */
int cuts_mount(void);
int cuts_attack(void);
int cuts_unmount(void);
void cuts_disk_db(char *buf, size_t size);
void cuts_cleanup(void);
void cuts_print_figures(void);
long cuts_orders_placed(void);

/* ---- procs.c ----------------------------------------------------------- */

/* now_ms: the monotonic clock in ms. */
int64_t now_ms(void);
void sleep_ms(long ms);

/* rng_seed, rng_below: one xorshift64* stream for every random choice, so a
 * seed replays the same attack plan (the machine's timing still varies). */
void rng_seed(uint64_t seed);
uint64_t rng_below(uint64_t n);

/*
 * proc_spawn: start argv[0] with argv (NULL-terminated); stdin /dev/null,
 * stdout to out_path and stderr to err_path (NULL: /dev/null; the same path:
 * one file), both appended.  extra_env (may be NULL): "NAME=value" strings
 * added to this process's environment.  Returns the pid, or -1 (and says
 * why on stderr).
 */
pid_t proc_spawn(const char *const *argv, const char *out_path, const char *err_path,
		 const char *const *extra_env);

/* proc_run: proc_spawn and wait; stdout (and stderr too when with_stderr)
 * captured into out (may be NULL, NUL-terminated, truncated to size).
 * Returns the exit status, 128+signal for a signal death, -1 when it could
 * not start. */
int proc_run(const char *const *argv, char *out, size_t size, int with_stderr);

/* proc_wait: wait up to timeout_ms (-1: forever) for pid.  Returns the exit
 * status, 128+signal for a signal death, -2 on timeout, -1 when pid is not
 * our child. */
int proc_wait(pid_t pid, long timeout_ms);

/* proc_children: the direct children of pid, from
 * /proc/PID/task/TID/children of every thread.  Returns how many (at most
 * max) were put in out. */
int proc_children(pid_t pid, pid_t *out, int max);

/* proc_descendants: children, their children, ... of pid. */
int proc_descendants(pid_t pid, pid_t *out, int max);

/* proc_cmdline_has: 1 when an argument of pid's command line contains word. */
int proc_cmdline_has(pid_t pid, const char *word);

/* proc_parent: pid's parent, -1 when pid is gone.  A pid is signalled only
 * while its parent is known (the run, or the harness itself), so a pid the
 * system has handed to someone else since is never hit. */
pid_t proc_parent(pid_t pid);

/* proc_alive: 1 while pid exists and is not a zombie. */
int proc_alive(pid_t pid);

/* proc_free_port: a loopback port free now, for a listener that must keep
 * it across restarts (0 when none could be found). */
int proc_free_port(void);

/* ---- vdb.c: the database the verdict reads ------------------------------ */

#define VDB_COLS_MAX 16
struct vdb;
/* vdb_row_fn: one row, its columns as text (NULL: SQL NULL); non-zero stops */
typedef int (*vdb_row_fn)(void *arg, int ncols, const char *const *vals);

/* vdb_is_pg: target is a postgresql:// (or postgres://) URI. */
int vdb_is_pg(const char *target);
/* vdb_open: the SQLite file read-only, or a read-only PostgreSQL session;
 * 0, or -1 with the reason in err. */
int vdb_open(const char *target, struct vdb **out, char *err, size_t size);
void vdb_close(struct vdb *d);
int vdb_pg(const struct vdb *d);
/* vdb_each: every row of sql (at most one parameter: ?1 in SQLite, $1 in
 * PostgreSQL; param NULL for none) to fn.  0, or -1 with the reason. */
int vdb_each(struct vdb *d, const char *sql, const char *param, vdb_row_fn fn, void *arg,
	     char *err, size_t size);
/* vdb_one: the first column of sql's first row as text into out ("" for
 * none or NULL); 0, or -1 on an error. */
int vdb_one(struct vdb *d, const char *sql, char *out, size_t size);
/* vdb_blob_to_file: PostgreSQL's blobs row key written to path. */
int vdb_blob_to_file(struct vdb *d, const char *key, const char *path, char *err, size_t size);

/* ---- mailcheck.c: what a stored email says, read as its buyer would ----- */

#define CHAOS_CODE_LEN 52	/* a ticket code's characters (code.c) */
#define CHAOS_CODES_MAX 128	/* codes read from one message at most */

/* mail_order_named: the public id of the order a message's text names
 * ("Order T..." in tickets, "your order T..." in a cancellation) into pub,
 * "" when it names none. */
void mail_order_named(const char *msg, char *pub, size_t size);

/* mail_codes: the ticket codes printed in the message's PDF attachment, as
 * pdftotext reads them (the PDF is written to tmp on the way): how many, 0
 * when it has no PDF, -1 when it could not be read. */
int mail_codes(const char *msg, const char *tmp, char (*codes)[CHAOS_CODE_LEN + 1], int max);

/* mail_door_open: a door of its own for the verdict: a copy of the SQLite
 * database at db_path and of the ticket key at key_path in dir/door ([out]
 * copy, the copy's path); 0, or -1 with the reason in err.  mail_door_scan:
 * `bin scan CODE` on it: 1 when the door names an order for the code (its
 * public id into pub: a seat admitted, already admitted or cancelled), 0
 * when it turns the code away as invalid or of a cancelled event, -1 when
 * the scan failed; *admitted: 1 when it admitted a seat this time. */
int mail_door_open(const char *db_path, const char *key_path, const char *dir, char *copy,
		   size_t size, char *err, size_t esize);
int mail_door_scan(const char *bin, const char *copy, const char *code, char *pub, size_t size,
		   int *admitted);

/* ---- verify.c ---------------------------------------------------------- */

/* The intents a message can carry (its Message-ID's left part). */
enum intent { INTENT_TICKETS, INTENT_RESEND, INTENT_CANCEL, INTENT_KINDS };

struct verdict {
	/* inputs */
	const char *db_path;		/* the appliance's database */
	const char *maildir;		/* the provider's maildir (holds new/) */
	const char *counts_path;	/* the provider's counts.json, or NULL */
	const char *actions_path;	/* the soak's log (actions.log), or NULL */
	long expect_orders;		/* -1: do not check the number */
	const char *door_bin;		/* stagedoor, to scan the emails' codes at a
					 * door of the verdict's own; NULL: not */
	const char *work_dir;		/* where that door's copies go */

	/* figures */
	long orders, seats, events, tickets;
	long pdfs_checked;
	long messages;			/* files in maildir/new and cur/ */
	long duplicates;		/* messages beyond the first per order */
	long strangers;			/* messages for no order of ours */
	long lost;			/* orders whose work is not all done */
	long reclaimed_jobs;		/* done_jobs with deliveries > 1 */
	long redeliveries;		/* sum(deliveries - 1) over done_jobs */
	long relay_duplicates;		/* job_ids finished more than once, beyond one */
	long provider_replays;		/* the provider's absorbed replays */
	long provider_failed_500;
	long provider_dropped;
	long stream_left, dead, outbox_unpublished;

	/* per intent: made (in the database), messages, beyond one, missing */
	long intents[INTENT_KINDS], msgs[INTENT_KINDS], dups[INTENT_KINDS];
	long missing[INTENT_KINDS];
	long unmade;			/* messages for an intent never made */
	long for_missing_orders;	/* messages about an order the database lacks */
	long key_of_another;		/* messages under another order's key */
	long owed_absorbed;		/* owed emails whose key holds another's email */
	long codes_checked;		/* codes from the emails, scanned */
	long codes_other_order;		/* of which admit a seat of another order */
	long codes_of_cancelled;	/* ... or of their own order, cancelled */
	long wrong_address;		/* messages to an address the intent forbids */
	long orders_cancelled, tickets_cancelled, live_tickets, seats_resold;
	long cancelled_mailed;		/* cancelled orders whose tickets email went */
	/* a whole event's runs (eventcheck.c) */
	int expect_reminders;		/* input: every reminder came due */
	long event_runs, event_orders_cancelled, event_orders_moved;
	long event_children;		/* child jobs queued (outbox rows) */
	long event_children_twice;	/* outbox rows beyond one for a child's id */
	long event_children_replayed;	/* finished more than once (a relay's replay) */
	long event_refunds_provider, event_refunds_window;
	long event_cancel_emails, event_moved_emails, event_reminders, event_pdfs;
	long reminders_waiting;		/* reminders the stream holds for later */
	long excused;			/* intents made, then cancelled before they went */
	/* from the soak's log */
	int logged;			/* the log was read */
	long placed_logged, sold_out_logged;
	long resend_cli, resend_api, resend_same_key, resend_unknown;
	long resends_unacknowledged;	/* resends in the database beyond the acknowledged */
	long readdress_cli, readdress_api, resent_after_readdress;
	long cancel_cli, cancel_api, cancel_again;
	long seats_sold_logged, seats_cancelled_logged;
	long online_orders;		/* orders the shop made (payment 'online') */

	/* the shop (shopcheck.c), with paysink's record */
	const char *record_path;	/* NULL: no shop part */
	int shop_checked;
	long refund_msgs;		/* messages under a refunded-<payment> key */
	long buyers_logged, buyers_soldout, holds, holds_orphan, sessions, sessions_left_open;
	long paid, paid_late, late_refused, abandoned, returned;
	long refunds_late, refunds_cancelled, refunds_of_payments_in_time;
	long wh_events, wh_duplicated, wh_dropped, wh_gave_up, wh_delivered, wh_applied;
	long long paid_minor, refunded_minor, online_minor, online_live_minor;
	long shop_seats_live, shop_capacity;
	long buyers_left;		/* gave up waiting in line */
	long delayed_ok, delayed_failed;	/* delayed payments that succeeded, failed */
	long delayed_unheard;		/* ... whose end the box never heard (pending) */
	long failed_msgs;		/* messages under a payment-failed-<hold> key */
	long back_full, back_part, back_disputes;	/* money back outside the box */
	long back_cancelled;		/* orders it cancelled */
	long back_unheard;		/* money back whose event the box never heard */
	long back_skipped;		/* buyers who found no order to give back */
	long long back_part_minor;	/* partial refunds recorded */
	long box_refunds_failed, box_refunds_pending_seen;
	long shop_later_looks;		/* CHAOS_SHOP_LATER entries left for later */

	/* the first broken check, "" when every one holds */
	char broken[512];
};

/* verify_run: every check; v->broken names the first that fails.
 * Returns 0 when all hold, 1 otherwise. */
int verify_run(struct verdict *v);

/* verify_broken: name the first broken check (later ones are dropped).
 * verify_field: key=VALUE of a line of the soak's log into buf ("" none). */
void verify_broken(struct verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void verify_field(const char *line, const char *key, char *buf, size_t size);

/* ---- eventcheck.c: a whole event's runs and the reminders ----------------- */

/* event_verify: the runs, their child jobs, refunds, emails (keys[i] and
 * tos[i]: the messages under cancel-event-, moved- and reminder- keys) and
 * PDFs in db.  Figures into v. */
void event_verify(struct verdict *v, struct vdb *db, char *const *keys, char *const *tos,
		  long n);
void event_print_figures(const struct verdict *v);

/* ---- shopcheck.c: the shop's part of the verdict -------------------------- */

/* shop_verify: the holds, online orders, refunds and webhooks in db against
 * paysink's record (v->record_path) and the soak's log (v->actions_path,
 * its "buyer" lines); keys: the keys of the shop's own emails the mail
 * provider holds, refunded-<payment> and payment-failed-<hold> (one entry
 * per message, sorted).  Figures into v. */
void shop_verify(struct verdict *v, struct vdb *db, char *const *keys, long n_keys);
void shop_print_figures(const struct verdict *v);

#endif
