/*
 * run.c: `stagedoor run`, the appliance: one supervisor process on one
 * database, and its children.
 *
 *   stagedoor run                  the supervisor: holds the run lock, has
 *    |                             migrated the database, runs maintenance
 *    +- stagedoor relay            outbox -> stream
 *    +- stagedoor worker --name w1 --supervised
 *    +- ...                        (workers = cores by default)
 *    +- stagedoor serve --supervised  the HTTP API and dashboard
 *    +- stagedoor backup --scheduled  now and then, one at a time, when
 *                                  backup_dir is set (backup_sched.h)
 *
 * Children are this same program (the file run started from, held open, so
 * that a package upgrade replacing the path does not mix versions), exec'd
 * with run's own arguments, so they
 * read the same configuration; each has its own connections.  Each says it
 * is ready (its start-up checks passed: configuration, database, key, mail
 * transport) by writing a byte into a pipe ($STAGEDOOR_READY_FD).  A child
 * that dies after that is started again in 100 ms; one that dies before it
 * (it cannot start: a bad database, an unreadable key) after a backoff,
 * 100 ms doubling to 30 s, back to 100 ms once a child has lived a minute or
 * reached ready.  The jobs a dead child held come back when
 * their leases end, and a job that keeps killing workers goes to the dead
 * letters by the queue's poison rule, not round a crash loop.  Children get
 * SIGTERM when the supervisor dies (PR_SET_PDEATHSIG), so a killed appliance
 * leaves no orphan to take the next one's jobs unsupervised.
 *
 * Signals arrive through a signalfd into one poll loop:
 *   SIGTERM, SIGINT  stop: children get SIGTERM (workers stop claiming,
 *                    finish within grace_ms, release the rest); exit 0
 *   SIGHUP           read the configuration again; live keys (log level and
 *                    file, retention, maintenance, workers) apply at once,
 *                    the others by restarting the workers one at a time;
 *                    a bad file changes nothing and says so
 *   SIGCHLD          reap, log, schedule the restart
 *
 * Maintenance runs between signals every maintenance_ms (maint.h):
 * checkpoints that keep the WAL bounded, pruning in bounded batches, and
 * hourly statistics.  Periodic backups run in a child of their own, never
 * restarted as the others are: backup_sched.h says when the next is due.
 *
 * One `run` per database: an flock on "<db>-run.lock" (never on the
 * database file itself: SQLite's POSIX locks live there).  Plain
 * `stagedoor worker`s on the same database are welcome and take their share.
 */
#define _GNU_SOURCE

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "args.h"
#include "backup_sched.h"
#include "cli.h"
#include "clock.h"
#include "cmd/commands.h"
#include "config.h"
#include "controls.h"
#include "db.h"
#include "episode.h"
#include "log.h"
#include "maint.h"
#include "runlock.h"
#include "schedule.h"
#include "sdnotify.h"
#include "statedir.h"
#include "text.h"
#include "tickets.h"

#define RUN_MAX_WORKERS 256
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 30000
#define HEALTHY_MS 60000		/* a child that lived this long restarts at once */
#define STOP_MARGIN_MS 10000		/* past grace_ms: SIGKILL what is left */
#define OPTIMIZE_EVERY_MS (3600LL * 1000)
#define DISK_WARN_EVERY_MS (300LL * 1000)	/* a low disk is said again this often */

enum role { ROLE_RELAY, ROLE_WORKER, ROLE_HTTP, ROLE_SHOP, ROLE_SQS, ROLE_BACKUP };

struct child {
	enum role role;
	char name[16];
	pid_t pid;			/* 0: not running */
	int wanted;			/* keep this slot running */
	int64_t started_ms;
	int64_t next_start_ms;		/* when a stopped slot starts again */
	int64_t backoff_ms;
	int restarts;
	int restart_pending;		/* to take a new configuration */
	int ready_fd;			/* the read end of its ready pipe; -1: none */
	int ready;			/* it said it started */
	int stopping;			/* we sent it SIGTERM */
	char why[CLI_WHY_MAX];		/* why it cannot start as configured; "": none */
	int64_t down_since;		/* not ready since then (started, or exited);
					 * 0: ready */
};

struct run {
	char exe[PATH_MAX];		/* this program's path, for the log */
	int exe_fd;			/* this program's own file, opened at start:
					 * children run this very binary even after
					 * a package upgrade replaced the path */
	int argc;			/* run's own arguments, handed to every child */
	char **argv;
	struct cli_config_flags cf;
	struct config cfg;
	const char *db_path;		/* cfg's */
	struct db *db;
	int sfd;			/* signalfd */
	sigset_t oldmask;
	struct child kids[5 + RUN_MAX_WORKERS];	/* relay, workers, http, shop, sqs, backup last
						 * (never wanted: started when due) */
	int nkids;
	struct backup_sched backups;	/* when the next periodic backup is due */
	int stopping;
	int64_t stop_deadline;
	int64_t next_maint, next_optimize;
	int64_t next_schedule;		/* when schedule_tick is due (schedule.h) */
	struct episode schedule_ep;	/* periodic jobs failing to be made */
	int disk_low;			/* the last look found free space low */
	int64_t disk_warned_at;		/* when that was last logged */
	struct episode maint_ep;	/* maintenance failing (a full or failing disk) */
	int announced;			/* READY=1 sent: every child was ready once */
	int64_t watchdog_ms;		/* WatchdogSec; 0: no watchdog to feed */
	int64_t next_feed;		/* when the watchdog is fed next */
	char status[CLI_WHY_MAX + 64];	/* the last STATUS= sent */
	int fatal;			/* a child cannot start as configured: run's
					 * exit status (CLI_EXIT_CONFIG); 0: none */
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- children ------------------------------------------------------------- */

static void child_exec(struct run *R, struct child *c, pid_t parent, int ready_w)
{
	char *av[ARGS_MAX_POS + 8 + 256], fd[16];
	sigset_t child_mask;
	int n = 0, i;

	/* SIGTERM when the supervisor dies, even by SIGKILL */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(1);
	/* SIGHUP stays blocked across the exec: a reload that reaches a child
	 * before it has set up its own taking of SIGHUP (cli_hup_start, serve)
	 * waits for it, pending, instead of killing it by default */
	child_mask = R->oldmask;
	sigaddset(&child_mask, SIGHUP);
	sigprocmask(SIG_SETMASK, &child_mask, NULL);
	/* the write end survives exec; the read end (close-on-exec) does not */
	if (ready_w >= 0 && fcntl(ready_w, F_SETFD, 0) == 0) {
		snprintf(fd, sizeof fd, "%d", ready_w);
		setenv("STAGEDOOR_READY_FD", fd, 1);
	}
	av[n++] = R->exe;
	if (c->role == ROLE_RELAY) {
		av[n++] = "relay";
	} else if (c->role == ROLE_HTTP) {
		av[n++] = "serve";
		av[n++] = "--supervised";
	} else if (c->role == ROLE_SHOP || c->role == ROLE_SQS) {
		av[n++] = c->role == ROLE_SHOP ? "shop" : "sqs";
		av[n++] = "--supervised";
	} else if (c->role == ROLE_BACKUP) {
		av[n++] = "backup";
		av[n++] = "--scheduled";
	} else {
		av[n++] = "worker";
		av[n++] = "--supervised";
		av[n++] = "--name";
		av[n++] = c->name;
	}
	for (i = 0; i < R->argc && n < (int)(sizeof av / sizeof av[0]) - 1; i++)
		av[n++] = R->argv[i];
	av[n] = NULL;
	fexecve(R->exe_fd, av, environ);
	_exit(127);
}

static const char *role_name(enum role r)
{
	static const char *const names[] = { [ROLE_RELAY] = "relay", [ROLE_WORKER] = "worker",
					     [ROLE_HTTP] = "http", [ROLE_SHOP] = "shop",
					     [ROLE_SQS] = "sqs", [ROLE_BACKUP] = "backup" };

	return names[r];
}

static void child_start(struct run *R, struct child *c)
{
	pid_t parent = getpid(), pid;
	int pfd[2] = { -1, -1 };

	fflush(NULL);
	if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) != 0)
		pfd[0] = pfd[1] = -1;
	pid = fork();
	if (pid < 0) {
		log_event(LOG_ERROR, "could not start a child", "child=%s err=\"%s\"", c->name,
			  strerror(errno));
		c->next_start_ms = mono_ms() + BACKOFF_MAX_MS;
		if (pfd[0] >= 0) {
			close(pfd[0]);
			close(pfd[1]);
		}
		return;
	}
	if (pid == 0)
		child_exec(R, c, parent, pfd[1]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	c->ready_fd = pfd[0];
	c->ready = 0;
	c->pid = pid;
	c->started_ms = mono_ms();
	if (!c->down_since)
		c->down_since = c->started_ms;
	c->stopping = 0;
	log_event(LOG_INFO, "child started", "child=%s role=%s pid=%ld restarts=%d", c->name,
		  role_name(c->role), (long)pid, c->restarts);
}

static void child_signal(struct child *c, int sig)
{
	if (c->pid > 0) {
		kill(c->pid, sig);
		if (sig == SIGTERM)
			c->stopping = 1;
	}
}

/* ready_read: what a child said on its ready pipe: "1" (it started) or
 * "!" and why it cannot start as configured (cli_cannot_start).  Closes
 * the pipe once it has, or once it closed without a word. */
static void ready_read(struct child *c)
{
	char b[CLI_WHY_MAX];
	ssize_t n;

	if (c->ready_fd < 0)
		return;
	n = read(c->ready_fd, b, sizeof b - 1);
	if (n >= 1 && b[0] == '!') {
		b[n] = '\0';
		text_copy(c->why, sizeof c->why, b + 1);
	} else if (n >= 1) {
		c->ready = 1;
		c->down_since = 0;
	}
	if (n >= 1 || n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		close(c->ready_fd);
		c->ready_fd = -1;
	}
}

static struct child *child_by_pid(struct run *R, pid_t pid)
{
	int i;

	for (i = 0; i < R->nkids; i++)
		if (R->kids[i].pid == pid)
			return &R->kids[i];
	return NULL;
}

static void begin_stop(struct run *R, int sig);

/* cannot_start: a child that cannot start as configured (no restart makes
 * it start): run stops with its status, and says why where the
 * administrator looks, the journal (even with log_file set) and STATUS= */
static void cannot_start(struct run *R, const struct child *c)
{
	char quoted[CLI_WHY_MAX + 16];
	const char *why = c->why[0] ? c->why : "see its message above";

	log_event(LOG_ERROR, "run stopping: a child cannot start as configured",
		  "child=%s status=%d err=%s", c->name, CLI_EXIT_CONFIG,
		  log_quote(quoted, sizeof quoted, why));
	log_console("stagedoor: %s cannot start as configured: %s", c->name, why);
	R->fatal = CLI_EXIT_CONFIG;
	snprintf(R->status, sizeof R->status, "failed: %s", why);
	sdnotify_status(R->status);
	begin_stop(R, 0);
}

static void reap(struct run *R)
{
	int64_t now = mono_ms();
	struct child *c;
	pid_t pid;
	int st;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		int64_t lived;

		if (!(c = child_by_pid(R, pid)))
			continue;
		lived = now - c->started_ms;
		c->pid = 0;
		ready_read(c);		/* a byte it wrote just before dying */
		if (c->ready_fd >= 0) {
			close(c->ready_fd);
			c->ready_fd = -1;
		}
		if (!c->down_since)
			c->down_since = now;
		if (c->role == ROLE_BACKUP) {
			/* it logged its own outcome; backup_sched logs a death */
			backup_sched_ended(&R->backups, R->db_path, pid, st,
					   config_int(&R->cfg, CONFIG_BACKUP_INTERVAL_MS),
					   R->stopping || c->stopping, now);
			continue;
		}
		if (WIFSIGNALED(st))
			log_event(R->stopping || c->stopping ? LOG_INFO : LOG_WARN, "child exited",
				  "child=%s pid=%ld signal=%d lived_ms=%lld", c->name, (long)pid,
				  WTERMSIG(st), (long long)lived);
		else
			log_event(R->stopping || c->stopping ? LOG_INFO : LOG_WARN, "child exited",
				  "child=%s pid=%ld status=%d lived_ms=%lld", c->name, (long)pid,
				  WEXITSTATUS(st), (long long)lived);
		if (R->stopping || !c->wanted)
			continue;
		if (WIFEXITED(st) && WEXITSTATUS(st) == CLI_EXIT_CONFIG && !c->ready) {
			cannot_start(R, c);
			continue;
		}
		if (c->stopping) {
			/* we asked it to go, to take a new configuration */
			c->backoff_ms = 0;
		} else if (lived >= HEALTHY_MS || c->ready) {
			/* it started: what killed it was later, maybe a job,
			 * whose lease keeps it from coming straight back */
			c->backoff_ms = BACKOFF_MIN_MS;
		} else {
			c->backoff_ms = c->backoff_ms < BACKOFF_MIN_MS ? BACKOFF_MIN_MS
				      : c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
				      : c->backoff_ms * 2;
		}
		c->restarts++;
		c->stopping = 0;
		c->next_start_ms = now + c->backoff_ms;
		if (c->backoff_ms)
			log_event(LOG_INFO, "child restarts", "child=%s in_ms=%lld", c->name,
				  (long long)c->backoff_ms);
	}
}

static int alive(const struct run *R)
{
	int i, n = 0;

	for (i = 0; i < R->nkids; i++)
		n += R->kids[i].pid > 0;
	return n;
}

/* set_workers: n worker slots wanted; extra ones are stopped. */
static void set_workers(struct run *R, int n)
{
	int i;

	for (i = 1; i <= RUN_MAX_WORKERS; i++) {
		struct child *c = &R->kids[i];

		if (i <= n && !c->wanted) {
			c->role = ROLE_WORKER;
			snprintf(c->name, sizeof c->name, "w%d", i);
			c->wanted = 1;
			c->next_start_ms = 0;
			c->backoff_ms = 0;
		} else if (i > n && c->wanted) {
			c->wanted = 0;
			child_signal(c, SIGTERM);
		}
	}
}

/* ---- SIGHUP ---------------------------------------------------------------- */

static void apply_log(const struct config *c)
{
	log_set_level((enum log_level)log_level_parse(config_str(c, CONFIG_LOG_LEVEL)));
}

/* limits_apply: the config file's limit lines become their kinds' limits
 * in the database (controls.h), for every box; kinds the file does not
 * name keep what `jobs limit` or the API set */
static void limits_apply(struct run *R)
{
	char rate[64];
	int i;

	for (i = 0; i < R->cfg.n_limits; i++) {
		const struct config_limit *l = &R->cfg.limits[i];

		controls_rate_text(&l->lim, rate, sizeof rate);
		if (controls_limit(R->db, l->kind, &l->lim) != SD_OK)
			log_event(LOG_ERROR, "limits not set", "kind=%s err=\"%s\"", l->kind,
				  err_msg());
		else
			log_event(LOG_INFO, "limits set from the configuration", "kind=%s "
				  "rate=\"%s\" concurrency=%lld box_concurrency=%lld", l->kind, rate,
				  (long long)l->lim.concurrency, (long long)l->lim.box_concurrency);
	}
}

static void reload(struct run *R)
{
	struct config nc;
	char changed[512] = "";
	size_t o = 0;
	int k, i, restart = 0;

	if (config_resolve(&nc, R->cf.file, R->cf.value) != SD_OK) {
		log_event(LOG_ERROR, "configuration not reloaded: nothing changed", "err=\"%s\"",
			  err_msg());
		return;
	}
	if (log_open_file(nc.value[CONFIG_LOG_FILE]) != SD_OK)
		log_event(LOG_ERROR, "log not reopened", NULL);
	apply_log(&nc);
	for (k = 0; k < CONFIG_N_KEYS; k++) {
		const char *a = config_str(&R->cfg, (enum config_key)k);
		const char *b = config_str(&nc, (enum config_key)k);

		if ((!a && !b) || (a && b && strcmp(a, b) == 0))
			continue;
		if (k == CONFIG_DB || k == CONFIG_STATE_DIR) {
			log_event(LOG_WARN, "setting cannot change while running; restart to apply",
				  "key=%s", config_key_name((enum config_key)k));
			continue;
		}
		if (o + 64 < sizeof changed)
			o += (size_t)snprintf(changed + o, sizeof changed - o, "%s%s", o ? "," : "",
					      config_key_name((enum config_key)k));
		if (!config_key_live((enum config_key)k))
			restart = 1;
	}
	/* keep the old db path: R->db_path points into R->cfg */
	{
		char *db = R->cfg.value[CONFIG_DB];
		char org[64];

		memcpy(org, R->cfg.origin[CONFIG_DB], sizeof org);
		R->cfg.value[CONFIG_DB] = NULL;
		free(nc.value[CONFIG_DB]);
		nc.value[CONFIG_DB] = db;
		memcpy(nc.origin[CONFIG_DB], org, sizeof org);
		config_free(&R->cfg);
		R->cfg = nc;
		R->db_path = config_str(&R->cfg, CONFIG_DB);
	}
	log_event(LOG_INFO, "configuration reloaded", "changed=%s restart_workers=%s",
		  o ? changed : "none", restart ? "yes" : "no");
	limits_apply(R);
	set_workers(R, (int)config_int(&R->cfg, CONFIG_WORKERS));
	for (i = 0; i < R->nkids; i++) {
		struct child *c = &R->kids[i];

		if (restart && c->wanted)
			c->restart_pending = 1;
		else if (c->pid > 0 && !c->stopping && c->role != ROLE_BACKUP)
			kill(c->pid, SIGHUP);	/* reopen its log, take the live keys */
	}
	R->next_maint = 0;
}

/* rolling: one child at a time takes the new configuration. */
static void rolling(struct run *R)
{
	int i;

	for (i = 0; i < R->nkids; i++)
		if (R->kids[i].pid > 0 && R->kids[i].stopping && R->kids[i].wanted)
			return;		/* one is on its way */
	for (i = 0; i < R->nkids; i++) {
		struct child *c = &R->kids[i];

		if (!c->restart_pending || !c->wanted)
			continue;
		c->restart_pending = 0;
		if (c->pid > 0) {
			child_signal(c, SIGTERM);
			return;
		}
	}
}

/* ---- maintenance ------------------------------------------------------------ */

/* disk_watch: a warning when free space falls below disk_warn_bytes, again
 * every DISK_WARN_EVERY_MS while it stays low, and a line when it is back. */
static void disk_watch(struct run *R, int64_t now)
{
	struct maint_disk d;

	maint_disk(R->db_path, config_str(&R->cfg, CONFIG_STATE_DIR),
		   config_int(&R->cfg, CONFIG_DISK_WARN_BYTES), &d);
	if (d.low && (!R->disk_low || now - R->disk_warned_at >= DISK_WARN_EVERY_MS)) {
		log_event(LOG_WARN, "disk space low", "db_free_bytes=%lld state_free_bytes=%lld "
			  "warn_bytes=%lld", (long long)d.db_free, (long long)d.state_free,
			  (long long)d.warn_bytes);
		R->disk_warned_at = now;
	} else if (!d.low && R->disk_low) {
		log_event(LOG_INFO, "disk space back", "db_free_bytes=%lld state_free_bytes=%lld "
			  "warn_bytes=%lld", (long long)d.db_free, (long long)d.state_free,
			  (long long)d.warn_bytes);
	}
	R->disk_low = d.low;
}

static void maintain(struct run *R, int64_t now)
{
	struct maint_opts mo;
	struct maint_stats ms;
	int held = 0;

	memset(&mo, 0, sizeof mo);
	/* 0 in the config means never; 0 here means the default */
	mo.done_retention_ms = config_int(&R->cfg, CONFIG_RETENTION_MS);
	if (mo.done_retention_ms == 0)
		mo.done_retention_ms = -1;
	mo.idem_retention_ms = config_int(&R->cfg, CONFIG_IDEM_RETENTION_MS);
	if (mo.idem_retention_ms == 0)
		mo.idem_retention_ms = -1;
	mo.scan_log_retention_ms = config_int(&R->cfg, CONFIG_SCAN_LOG_RETENTION);
	if (mo.scan_log_retention_ms == 0)
		mo.scan_log_retention_ms = -1;
	mo.wal_warn_bytes = config_int(&R->cfg, CONFIG_WAL_WARN_BYTES);
	memset(&ms, 0, sizeof ms);
	/* several boxes on one PostgreSQL database: one of them maintains it
	 * (the others check again each turn, so one takes over when it goes) */
	if (db_lock_try(R->db, DB_LOCK_MAINT, &held) != SD_OK || !held) {
		disk_watch(R, now);
		R->next_maint = now + config_int(&R->cfg, CONFIG_MAINTENANCE_MS);
		return;
	}
	/* maint_tick logs the WAL warning itself */
	if (maint_tick(R->db, &mo, &ms) != SD_OK)	/* said once per episode (a full disk) */
		episode_fail(&R->maint_ep, LOG_ERROR, "maintenance failed", NULL, err_msg(), 0, 0);
	else
		episode_end(&R->maint_ep, "maintenance succeeds again", NULL);
	if (!episode_on(&R->maint_ep) &&
	    (ms.done_pruned || ms.idem_pruned || ms.scans_pruned || ms.holds_pruned ||
	     ms.places_pruned))
		log_event(LOG_INFO, "pruned", "done_jobs=%lld idempotency_records=%lld scans=%lld "
			  "holds=%lld places=%lld", (long long)ms.done_pruned,
			  (long long)ms.idem_pruned, (long long)ms.scans_pruned,
			  (long long)ms.holds_pruned, (long long)ms.places_pruned);
	disk_watch(R, now);
	if (now >= R->next_optimize) {
		if (maint_optimize(R->db) != SD_OK)
			log_event(LOG_WARN, "statistics refresh failed", "err=\"%s\"", err_msg());
		R->next_optimize = now + OPTIMIZE_EVERY_MS;
	}
	R->next_maint = now + config_int(&R->cfg, CONFIG_MAINTENANCE_MS);
}

/* schedules: the periodic jobs due, made (each box's run ticks; the
 * schedule's conditional update lets one make each period).  Looked at
 * once a second at least, so a schedule added meanwhile is seen.
 * [in,out] *wake. */
static void schedules(struct run *R, int64_t now, int64_t *wake)
{
	int64_t made = 0, next = -1, wall;

	if (now >= R->next_schedule) {
		/* periods are the clock's (now is the loop's monotonic time) */
		wall = clock_now_ms();
		if (schedule_tick(R->db, wall, &made, &next) != SD_OK) {
			episode_fail(&R->schedule_ep, LOG_ERROR, "periodic jobs not made", NULL,
				     err_msg(), 0, 0);
			next = -1;
		} else {
			episode_end(&R->schedule_ep, "periodic jobs are made again", NULL);
		}
		R->next_schedule = now + 1000;
		if (next >= 0 && next - wall < 1000)
			R->next_schedule = now + (next > wall ? next - wall : 1);
	}
	if (R->next_schedule < *wake)
		*wake = R->next_schedule;
}

/* backup_tick: start the periodic backup when it is due and none runs.
 * [in,out] *wake: moved earlier to when the next is due. */
static void backup_tick(struct run *R, int64_t now, int64_t *wake)
{
	struct child *b = &R->kids[R->nkids - 1];

	if (!config_str(&R->cfg, CONFIG_BACKUP_DIR) || b->pid > 0)
		return;
	if (now >= R->backups.next_ms) {
		child_start(R, b);
		if (b->pid > 0)
			backup_sched_started(&R->backups, now);
		else
			R->backups.next_ms = now + BACKOFF_MAX_MS;
	} else if (R->backups.next_ms < *wake) {
		*wake = R->backups.next_ms;
	}
}

/* startup_check: what every worker checks at its start (the key, the mail
 * transport and its files, the policies), once here: a setting that would
 * stop every worker stops `run` with its message instead of a restart loop. */
static int startup_check(struct run *R)
{
	const char *sd = config_str(&R->cfg, CONFIG_STATE_DIR);
	struct tickets_env *env = NULL;
	struct mail_config mc;
	enum sd_result r;

	config_mail(&R->cfg, &mc);
	if ((r = statedir_init(R->db_path, sd)) != SD_OK ||
	    (r = token_ensure(R->db_path, sd)) != SD_OK ||
	    (r = tickets_env_open(R->db_path, sd, config_mail_url(&R->cfg),
				  config_mail_from(&R->cfg), &mc, &env)) != SD_OK ||
	    (r = cli_provider_open(&R->cfg, &env->stripe)) != SD_OK ||
	    (r = config_apply_leases(&R->cfg, 0, NULL)) != SD_OK) {
		tickets_env_close(env);
		/* a setting refused (a mail URL's scheme) is not restarted into;
		 * a disk that failed may be tried again */
		return r == SD_INVALID ? (cli_fail(r), CLI_EXIT_CONFIG) : cli_fail(r);
	}
	tickets_env_close(env);
	return 0;
}

/* ---- the service manager ---------------------------------------------------- */

/*
 * Under systemd (Type=notify, sdnotify.h): READY=1 once every wanted child
 * (relay, workers, HTTP) has said it started, a STATUS= line whenever which
 * of them are up changes, RELOADING=1 and READY=1 around a SIGHUP, and
 * STOPPING=1 at a stop.  The watchdog is fed from this loop, whose poll
 * never sleeps past a second, every half of WatchdogSec, while the children
 * are healthy: no feed once the relay, the HTTP listener or every worker has
 * been down (exited, or started and not ready) for longer than WatchdogSec.
 * Such a child cannot come back by itself (each try fails before ready, the
 * backoff grows to 30 s), so systemd restarts the whole box; one worker down
 * while others run keeps the box fed, and the status says so.  A child that
 * comes back ready within WatchdogSec, as one killed mid-job does in 100 ms,
 * never stops the feeding.
 */

/* service_status: "relay, 2 workers, http ready", or what is up and what
 * is down ("relay, 1 of 2 workers ready; down: http"). */
static void service_status(const struct run *R, char *buf, size_t size)
{
	char down[64] = "";
	int i, workers = 0, up = 0, relay = 0, http = -1, shop = -1, sqs = -1;
	size_t o;

	for (i = 0; i < R->nkids; i++) {
		const struct child *c = &R->kids[i];
		int ok = c->pid > 0 && c->ready;

		if (!c->wanted || c->role == ROLE_BACKUP)
			continue;
		if (c->role == ROLE_WORKER) {
			workers++;
			up += ok;
		} else if (c->role == ROLE_RELAY) {
			relay = ok;
		} else if (c->role == ROLE_SHOP) {
			shop = ok;
		} else if (c->role == ROLE_SQS) {
			sqs = ok;
		} else {
			http = ok;
		}
	}
	o = (size_t)snprintf(buf, size, "%s", relay ? "relay, " : "");
	if (up == workers)
		o += (size_t)snprintf(buf + o, size - o, "%d worker%s", up, up == 1 ? "" : "s");
	else
		o += (size_t)snprintf(buf + o, size - o, "%d of %d workers", up, workers);
	snprintf(down, sizeof down, "%s%s%s%s%s%s%s", !relay ? "relay" : "",
		 !relay && http == 0 ? ", " : "", http == 0 ? "http" : "",
		 (!relay || http == 0) && shop == 0 ? ", " : "", shop == 0 ? "shop" : "",
		 (!relay || http == 0 || shop == 0) && sqs == 0 ? ", " : "", sqs == 0 ? "sqs" : "");
	snprintf(buf + o, size - o, "%s%s%s ready%s%s", http == 1 ? ", http" : "",
		 shop == 1 ? ", shop" : "", sqs == 1 ? ", sqs" : "", down[0] ? "; down: " : "",
		 down);
}

/* service_healthy: may the watchdog be fed (see above)? */
static int service_healthy(const struct run *R, int64_t now)
{
	int i, workers = 0, workers_down = 0;

	for (i = 0; i < R->nkids; i++) {
		const struct child *c = &R->kids[i];
		int down;

		if (!c->wanted || c->role == ROLE_BACKUP)
			continue;
		down = c->down_since && now - c->down_since > R->watchdog_ms;
		if (c->role != ROLE_WORKER) {
			if (down)
				return 0;
			continue;
		}
		workers++;
		workers_down += down;
	}
	return workers == 0 || workers_down < workers;
}

/* service_feed: the watchdog, when due and fed is 1.  [in,out] *wake:
 * moved earlier to the next feed. */
static void service_feed(struct run *R, int64_t now, int64_t *wake, int fed)
{
	if (!R->watchdog_ms)
		return;
	if (now >= R->next_feed && fed) {
		sdnotify_watchdog();
		R->next_feed = now + (R->watchdog_ms / 2 > 0 ? R->watchdog_ms / 2 : 1);
	}
	if (R->next_feed > now && R->next_feed < *wake)
		*wake = R->next_feed;
}

/* service_tick: READY=1 when every child first is, STATUS= on a change,
 * the watchdog while the children are healthy.  [in,out] *wake: as
 * service_feed's. */
static void service_tick(struct run *R, int64_t now, int64_t *wake)
{
	char status[sizeof R->status];
	int i;

	if (!R->announced) {
		for (i = 0; i < R->nkids; i++) {
			const struct child *c = &R->kids[i];

			if (c->wanted && c->role != ROLE_BACKUP && !(c->pid > 0 && c->ready))
				break;
		}
		if (i < R->nkids) {
			/* what it waits for, as systemctl status shows it */
			memcpy(status, "starting: ", 11);
			service_status(R, status + 10, sizeof status - 10);
			if (strcmp(status, R->status) != 0) {
				memcpy(R->status, status, sizeof status);
				sdnotify_status(status);
			}
			return;
		}
		service_status(R, R->status, sizeof R->status);
		sdnotify_ready(R->status);
		R->announced = 1;
		log_event(LOG_INFO, "run ready", "status=\"%s\" watchdog_ms=%lld", R->status,
			  (long long)R->watchdog_ms);
	}
	service_status(R, status, sizeof status);
	if (strcmp(status, R->status) != 0) {
		memcpy(R->status, status, sizeof status);
		sdnotify_status(status);
	}
	service_feed(R, now, wake, service_healthy(R, now));
}

/* ---- the loop ------------------------------------------------------------------ */

static void begin_stop(struct run *R, int sig)
{
	int i;

	if (R->stopping)
		return;
	R->stopping = 1;
	R->stop_deadline = mono_ms() + config_int(&R->cfg, CONFIG_GRACE_MS) + STOP_MARGIN_MS;
	log_event(LOG_INFO, "run stopping", "signal=%d children=%d grace_ms=%lld", sig, alive(R),
		  (long long)config_int(&R->cfg, CONFIG_GRACE_MS));
	sdnotify_stopping(R->fatal ? R->status
				   : "stopping: running jobs finish, the rest is handed back");
	for (i = 0; i < R->nkids; i++)
		child_signal(&R->kids[i], SIGTERM);
}

static int loop(struct run *R)
{
	R->watchdog_ms = sdnotify_watchdog_ms();
	for (;;) {
		int64_t now = mono_ms(), wake = now + 1000;
		struct signalfd_siginfo si;
		struct pollfd pfd[6 + RUN_MAX_WORKERS];	/* the signalfd and every kid */
		struct child *who[6 + RUN_MAX_WORKERS];
		int i, np = 1;

		if (!R->stopping) {
			for (i = 0; i < R->nkids; i++) {
				struct child *c = &R->kids[i];
				if (c->wanted && c->pid == 0) {
					if (now >= c->next_start_ms)
						child_start(R, c);
					else if (c->next_start_ms < wake)
						wake = c->next_start_ms;
				}
			}
			rolling(R);
			backup_tick(R, now, &wake);
			if (now >= R->next_maint)
				maintain(R, now);
			schedules(R, now, &wake);
			if (R->next_maint < wake)
				wake = R->next_maint;
			service_tick(R, mono_ms(), &wake);
		} else {
			if (!alive(R))
				return R->fatal;
			if (now >= R->stop_deadline) {
				log_event(LOG_WARN, "children outlived the grace period: killed",
					  "children=%d", alive(R));
				for (i = 0; i < R->nkids; i++)
					if (R->kids[i].pid > 0)
						kill(R->kids[i].pid, SIGKILL);
				R->stop_deadline = now + 5000;
			}
			wake = R->stop_deadline;
			/* a stop takes up to grace_ms: the loop is alive */
			service_feed(R, now, &wake, 1);
		}
		pfd[0].fd = R->sfd;
		pfd[0].events = POLLIN;
		for (i = 0; i < R->nkids; i++)
			if (R->kids[i].ready_fd >= 0) {
				pfd[np].fd = R->kids[i].ready_fd;
				pfd[np].events = POLLIN;
				who[np++] = &R->kids[i];
			}
		if (poll(pfd, (nfds_t)np,
			 (int)(wake > now ? (wake - now > 1000 ? 1000 : wake - now) : 0)) <= 0)
			continue;
		for (i = 1; i < np; i++)
			if (pfd[i].revents)
				ready_read(who[i]);
		while (read(R->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
			switch (si.ssi_signo) {
			case SIGCHLD:
				reap(R);
				break;
			case SIGTERM:
			case SIGINT:
				begin_stop(R, (int)si.ssi_signo);
				break;
			case SIGHUP:
				if (R->stopping)
					break;
				if (R->announced)
					sdnotify_reloading();
				reload(R);
				if (R->announced)
					sdnotify_ready(NULL);
				break;
			default:
				break;
			}
		}
		reap(R);	/* SIGCHLDs coalesce: reap whatever ended */
	}
}

static int run_main(int argc, char **argv)
{
	static struct run R;
	struct arg_opt opts[] = {
		CLI_CONFIG_OPTS(&R.cf),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], shown[1024], quoted[1100];
	sigset_t set;
	enum sd_result r;
	ssize_t n;
	int npos, rc, i;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, "run " CLI_CONFIG_USAGE)) != 0)
		return rc;
	/* held from the start: a stop that comes while the box opens its
	 * database is read by the loop and ends it cleanly, not by the signal */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &R.oldmask);
	signal(SIGPIPE, SIG_IGN);
	/* a setting it cannot take (a malformed value, an unknown zone, an
	 * unreadable file) is the configuration's to fix: no restart into it */
	if ((rc = cli_config_load(&R.cf, &R.cfg)) != 0)
		return CLI_EXIT_CONFIG;
	R.argc = argc;
	R.argv = argv;
	R.db_path = config_str(&R.cfg, CONFIG_DB);
	if ((n = readlink("/proc/self/exe", R.exe, sizeof R.exe - 1)) <= 0) {
		config_free(&R.cfg);
		return cli_fail(err_set(SD_IO, "cannot find this program's own path"));
	}
	R.exe[n] = '\0';
	if ((R.exe_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)) < 0) {
		config_free(&R.cfg);
		return cli_fail(err_set(SD_IO, "cannot open this program's own file: %s",
					strerror(errno)));
	}
	/* the lock before the database: run's own migration runs while no
	 * other run writes, and under a box's lock no other version migrates */
	if ((r = runlock_take(R.db_path, config_str(&R.cfg, CONFIG_STATE_DIR))) != SD_OK) {
		config_free(&R.cfg);
		return cli_fail(r);
	}
	if ((r = db_open(R.db_path, DB_OPEN_CREATE, DB_SYNC_NORMAL, &R.db)) != SD_OK) {
		config_free(&R.cfg);
		return cli_fail(r == SD_NOT_FOUND || r == SD_SCHEMA ? SD_DB : r);
	}
	if ((r = db_box_lock_hold(R.db)) != SD_OK) {
		db_close(R.db);
		config_free(&R.cfg);
		return cli_fail(r);
	}
	if ((rc = startup_check(&R)) != 0) {
		db_close(R.db);
		config_free(&R.cfg);
		return rc;
	}
	if ((R.sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
		db_close(R.db);
		config_free(&R.cfg);
		return cli_fail(err_set(SD_IO, "signalfd: %s", strerror(errno)));
	}
	R.nkids = 5 + RUN_MAX_WORKERS;
	for (i = 0; i < R.nkids; i++)
		R.kids[i].ready_fd = -1;
	R.kids[0].role = ROLE_RELAY;
	snprintf(R.kids[0].name, sizeof R.kids[0].name, "relay");
	R.kids[0].wanted = 1;
	/* the HTTP API and dashboard, unless http_listen = off */
	if (strcmp(config_str(&R.cfg, CONFIG_HTTP_LISTEN), "off") != 0) {
		struct child *h = &R.kids[1 + RUN_MAX_WORKERS];
		h->role = ROLE_HTTP;
		snprintf(h->name, sizeof h->name, "http");
		h->wanted = 1;
	}
	/* the public shop, when shop_listen is set */
	if (strcmp(config_str(&R.cfg, CONFIG_SHOP_LISTEN), "off") != 0) {
		struct child *h = &R.kids[2 + RUN_MAX_WORKERS];
		h->role = ROLE_SHOP;
		snprintf(h->name, sizeof h->name, "shop");
		h->wanted = 1;
	}
	/* the SQS listener, when sqs_listen is set */
	if (strcmp(config_str(&R.cfg, CONFIG_SQS_LISTEN), "off") != 0) {
		struct child *h = &R.kids[3 + RUN_MAX_WORKERS];
		h->role = ROLE_SQS;
		snprintf(h->name, sizeof h->name, "sqs");
		h->wanted = 1;
	}
	R.kids[R.nkids - 1].role = ROLE_BACKUP;
	snprintf(R.kids[R.nkids - 1].name, sizeof R.kids[0].name, "backup");
	backup_sched_init(&R.backups, R.db_path, config_str(&R.cfg, CONFIG_BACKUP_DIR),
			  config_int(&R.cfg, CONFIG_BACKUP_INTERVAL_MS), mono_ms());
	set_workers(&R, (int)config_int(&R.cfg, CONFIG_WORKERS));
	text_redact_url(R.db_path, shown, sizeof shown);
	log_event(LOG_INFO, "run started", "pid=%ld db=%s schema=%d workers=%lld concurrency=%lld "
		  "config=%s", (long)getpid(), log_quote(quoted, sizeof quoted, shown),
		  db_schema_version(R.db),
		  (long long)config_int(&R.cfg, CONFIG_WORKERS),
		  (long long)config_int(&R.cfg, CONFIG_CONCURRENCY),
		  R.cfg.file[0] ? R.cfg.file : "none");
	limits_apply(&R);
	rc = loop(&R);
	log_event(LOG_INFO, "run stopped", "pid=%ld", (long)getpid());
	close(R.sfd);
	db_close(R.db);
	config_free(&R.cfg);
	return rc;
}

const struct cli_cmd cmd_run = CLI_NODE("run", run_main, NULL,
		"the whole appliance: relay, workers, HTTP API, maintenance and backups, "
		"supervised (what the systemd unit starts)");
