/*
 * cli.c: init, enqueue, worker, relay, jobs and mail test: the stable command
 * line that other tools script against.  Parsing and printing only; the work
 * is in queue, outbox, worker, config and mail.
 */
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "args.h"
#include "blob.h"
#include "clock.h"
#include "code.h"
#include "config.h"
#include "db.h"
#include "failpoint.h"
#include "help.h"
#include "log.h"
#include "metrics.h"
#include "mail.h"
#include "notify.h"
#include "outbox.h"
#include "progress.h"
#include "queue.h"
#include "text.h"
#include "ticket_jobs.h"
#include "tickets.h"
#include "worker.h"

/* from_file: key k of the config file ($STAGEDOOR_CONFIG, else the default
 * file when it exists), read once; NULL when not set.  A box set up with
 * /etc/stagedoor/stagedoor.conf must not have `order show` look at ./var. */
static const char *from_file(enum config_key k)
{
	static struct config c;
	static int looked;

	if (!looked) {
		looked = 1;
		config_init(&c);
		if (config_file_path(NULL) && config_load_file(&c, config_file_path(NULL)) != SD_OK)
			exit(cli_fail(SD_INVALID));
	}
	return c.value[k];
}

const char *cli_db_path(const char *flag)
{
	const char *env = getenv("STAGEDOOR_DB"), *f;

	if (flag)
		return flag;
	if (env && *env)
		return env;
	return (f = from_file(CONFIG_DB)) ? f : CLI_DB_DEFAULT;
}

const char *cli_state_dir(const char *flag)
{
	const char *env = getenv("STAGEDOOR_STATE_DIR");

	if (flag)
		return flag;
	if (env && *env)
		return env;
	return from_file(CONFIG_STATE_DIR);
}

/* setting: key k from the environment, else the config file */
static const char *setting(enum config_key k)
{
	const char *env = getenv(config_key_env(k));

	return env && *env ? env : from_file(k);
}

int cli_box_apply(const struct config *cfg)
{
	const char *key = cfg ? cfg->value[CONFIG_TICKET_KEY_FILE] : setting(CONFIG_TICKET_KEY_FILE);
	const char *blobs = cfg ? cfg->value[CONFIG_BLOB_STORE] : setting(CONFIG_BLOB_STORE);
	const char *state = cfg ? cfg->value[CONFIG_STATE_DIR] : setting(CONFIG_STATE_DIR);
	enum sd_result r;

	metrics_home_set(state);
	if ((r = code_key_file_set(key)) != SD_OK || (r = blob_where_set(blobs)) != SD_OK)
		return cli_fail(r);
	return 0;
}

int cli_fail(int r)
{
	const char *m = err_msg();
	char line[1024];
	size_t o = 0;

	if (!*m)
		m = sd_result_name((enum sd_result)r);
	/* Messages may quote the input; a CR or LF in it must not split the
	 * one line into two (or forge a second one in a log). */
	for (; *m && o + 5 < sizeof line; m++) {
		unsigned char c = (unsigned char)*m;
		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(line + o, sizeof line - o, "\\x%02x", c);
		else
			line[o++] = (char)c;
	}
	line[o] = '\0';
	fprintf(stderr, "stagedoor: %s\n", line);
	return r == SD_INVALID || r == SD_SOLD_OUT ? 2 : r == SD_CONFLICT ? 3 : 1;
}

static void on_stop_signal(int sig)
{
	(void)sig;
	notify_request_stop();
}

void cli_install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int cli_parse(int argc, char **argv, struct arg_opt *opts, char **pos, int *npos,
		 int min_pos, int max_pos, const char *usage)
{
	enum sd_result r;

	if (args_wants_help(argc, argv, opts))
		return help_leaf(usage, opts);
	if ((r = args_parse(argc, argv, opts, pos, npos)) != SD_OK)
		return cli_fail(r);
	if (*npos < min_pos || *npos > max_pos) {
		fprintf(stderr, "stagedoor: usage: stagedoor %s\n", usage);
		return 2;
	}
	return 0;
}

int cli_open_db(const char *flag, int flags, int sync, struct db **db)
{
	enum sd_result r = db_open(cli_db_path(flag), flags, sync, db);

	return r == SD_OK ? 0 : cli_fail(r == SD_NOT_FOUND || r == SD_SCHEMA ? SD_DB : r);
}

/* ---- init ------------------------------------------------------------ */

int cli_init(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_STATE_DIR(&state),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], shown[1024];
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, "init [--db PATH] [--state-dir DIR]")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, DB_OPEN_CREATE, DB_SYNC_FULL, &db)) != 0)
		return rc;
	if ((r = tickets_files_init(db_path(db), cli_state_dir(state))) != SD_OK ||
	    (r = token_ensure(db_path(db), cli_state_dir(state))) != SD_OK) {
		db_close(db);
		return cli_fail(r);
	}
	text_redact_url(db_path(db), shown, sizeof shown);
	printf("%s: schema version %d\n", shown, db_schema_version(db));
	db_close(db);
	return 0;
}

/* ---- enqueue --------------------------------------------------------- */

int cli_enqueue(int argc, char **argv)
{
	const char *dbp = NULL, *job_id = NULL;
	int64_t delay = 0, prio = 0;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "job-id", ARG_STR, &job_id, 0, 0, 0, "ID",
		  "the job's id (default: a new one); the same id twice is one job", 0 },
		{ "delay-ms", ARG_INT, &delay, 0, 366LL * 24 * 3600 * 1000, 0, NULL,
		  "run no sooner than this many ms from now", 0 },
		{ "priority", ARG_INT, &prio, -1000000, 1000000, 0, NULL,
		  "higher runs first (-1000000..1000000)", 0 },
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], out[QUEUE_JOB_ID_MAX + 1];
	struct enqueue e;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 2, 2,
			"enqueue KIND JSON [--job-id ID] [--delay-ms N] [--priority N]")) != 0)
		return rc;
	/* check what needs no database first: bad input never touches the file */
	if ((r = queue_kind_valid(pos[0])) != SD_OK ||
	    (job_id && (r = queue_job_id_valid(job_id)) != SD_OK))
		return cli_fail(r);
	/* the relay's ids name outbox rows; a hand-made one could pose as one */
	if (job_id && strncmp(job_id, "outbox:", 7) == 0)
		return cli_fail(err_set(SD_INVALID, "job ids starting with 'outbox:' belong to the "
					"relay; choose another --job-id"));
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	e.kind = pos[0];
	e.payload = pos[1];
	e.job_id = job_id;
	e.delay_ms = delay;
	e.priority = prio;
	r = queue_enqueue(db, &e, out);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("%s\n", out);
	return 0;
}

/* ---- worker and relay ------------------------------------------------ */

int cli_config_load(const struct cli_config_flags *f, struct config *cfg)
{
	enum sd_result r = config_resolve(cfg, f->file, f->value);

	if (r != SD_OK)
		return cli_fail(r);
	if (cli_box_apply(cfg) != 0) {
		config_free(cfg);
		return 2;
	}
	if (cfg->value[CONFIG_LOG_LEVEL])
		log_set_level((enum log_level)log_level_parse(cfg->value[CONFIG_LOG_LEVEL]));
	if ((r = log_open_file(cfg->value[CONFIG_LOG_FILE])) != SD_OK) {
		config_free(cfg);
		return cli_fail(r);
	}
	return 0;
}

/* ---- a child of `run` ----------------------------------------------------- */

/* ready_say: what into $STAGEDOOR_READY_FD, once; 0 when there is none */
static int ready_say(const char *what, size_t len)
{
	const char *s = getenv("STAGEDOOR_READY_FD");
	char *end;
	long fd;
	int ok;

	if (!s || !*s)
		return 0;
	fd = strtol(s, &end, 10);
	unsetenv("STAGEDOOR_READY_FD");
	if (*end || fd < 3 || fd > 65535)
		return 0;
	ok = write((int)fd, what, len) == (ssize_t)len;
	close((int)fd);
	return ok;
}

void cli_ready(void)
{
	if (getenv("STAGEDOOR_READY_FD") && !ready_say("1", 1))
		log_event(LOG_WARN, "could not tell the supervisor this process started", NULL);
}

int cli_cannot_start(int r)
{
	char why[CLI_WHY_MAX];

	snprintf(why, sizeof why, "!%s", err_msg());
	cli_fail(r);
	ready_say(why, strlen(why));
	return CLI_EXIT_CONFIG;
}

/* ---- SIGHUP in a worker or relay process -------------------------------- */

struct hup_ctx {
	struct cli_config_flags cf;
	sigset_t set;
};

/* The thread that takes SIGHUP: the log reopened (logrotate) and the live
 * settings read again; a bad file keeps the old ones with an error line. */
static void *hup_thread(void *arg)
{
	struct hup_ctx *h = arg;
	int sig;

	for (;;) {
		struct config c;

		if (sigwait(&h->set, &sig) != 0)
			continue;
		if (config_resolve(&c, h->cf.file, h->cf.value) != SD_OK) {
			log_event(LOG_ERROR, "configuration not reloaded", "err=\"%s\"", err_msg());
			continue;
		}
		if (log_open_file(c.value[CONFIG_LOG_FILE]) != SD_OK)
			log_event(LOG_ERROR, "log not reopened", NULL);
		log_set_level((enum log_level)log_level_parse(config_str(&c, CONFIG_LOG_LEVEL)));
		log_event(LOG_INFO, "configuration reloaded", "pid=%ld", (long)getpid());
		config_free(&c);
	}
	return NULL;
}

void cli_hup_start(const struct cli_config_flags *cf)
{
	static struct hup_ctx h;
	pthread_t th;

	h.cf = *cf;
	sigemptyset(&h.set);
	sigaddset(&h.set, SIGHUP);
	/* blocked here, before any other thread starts, so every thread inherits it */
	pthread_sigmask(SIG_BLOCK, &h.set, NULL);
	if (pthread_create(&th, NULL, hup_thread, &h) == 0)
		pthread_detach(th);
}

/* worker --drain and relay --drain: a bar of the jobs finished (rows
 * published) against those there were */
struct drain_progress {
	struct progress *p;
	int64_t total;
};

static void worker_progress(void *arg, const struct worker_stats *st)
{
	struct drain_progress *d = arg;
	int64_t n = st->done + st->dead;

	if (n > d->total)
		progress_set_total(d->p, d->total = n);
	progress_update(d->p, n);
}

/* relay --drain (outbox_relay_opts.progress): the relay counts the rows
 * again as it goes, so its total replaces ours */
static void relay_progress(void *arg, int64_t published, int64_t total)
{
	struct drain_progress *d = arg;

	if (total != d->total)
		progress_set_total(d->p, d->total = total);
	progress_update(d->p, published);
}

int cli_worker(int argc, char **argv)
{
	const char *name = NULL;
	int64_t batch = 0, send_lease = 0;
	int drain = 0, supervised = 0;
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		{ "name", ARG_STR, &name, 0, 0, 0, "NAME",
		  "this worker's name in logs and leases", 0 },
		{ "batch", ARG_INT, &batch, 1, 10000, 0, NULL,
		  "rows per transaction", 0 },
		{ "drain", ARG_FLAG, &drain, 0, 0, 0, NULL,
		  "stop when nothing is left to do", 0 },
		/* started by `run`: its maintenance loop prunes, not each worker */
		{ "supervised", ARG_FLAG, &supervised, 0, 0, 0, NULL,
		  "started by run (it reports ready through a pipe)", 0 },
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	const char *dbp;
	struct tickets_env *env = NULL;
	struct mail_config mc;
	struct config cfg;
	struct worker_opts o;
	struct worker_stats st;
	struct drain_progress dp = { NULL, 0 };
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0,
			"worker [--name NAME] [--batch N] [--drain] [--concurrency N] "
			"[--lease-ms N] [--grace-ms N] " CLI_CONFIG_USAGE)) != 0)
		return rc;
	if ((rc = cli_config_load(&cf, &cfg)) != 0)
		return rc;
	dbp = config_str(&cfg, CONFIG_DB);
	/* fail fast, with the usual message, on a missing or newer database */
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0) {
		config_free(&cfg);
		return rc;
	}
	if (drain && queue_pending(db, &dp.total) != SD_OK)
		dp.total = 0;
	db_close(db);
	config_mail(&cfg, &mc);
	/* a database made before tickets existed gets its key now, as init would */
	if ((r = tickets_files_init(dbp, config_str(&cfg, CONFIG_STATE_DIR))) != SD_OK ||
	    (r = tickets_env_open(dbp, config_str(&cfg, CONFIG_STATE_DIR), config_mail_url(&cfg), config_mail_from(&cfg), &mc,
				  &env)) != SD_OK ||
	    (r = config_apply_leases(&cfg, 0, &send_lease)) != SD_OK) {
		config_free(&cfg);
		tickets_env_close(env);
		return cli_fail(r);
	}
	/* a claim older than the lease can have no send of its holder left */
	env->claim_stale_ms = send_lease;
	log_event(LOG_INFO, "mail settings", "send_tickets_lease_ms=%lld mail_timeout_ms=%ld "
		  "claim_stale_ms=%lld", (long long)send_lease,
		  cfg.mail_timeout_ms > 0 ? cfg.mail_timeout_ms : MAIL_TIMEOUT_MS,
		  (long long)env->claim_stale_ms);
	memset(&o, 0, sizeof o);
	o.db_path = dbp;
	o.handlers = ticket_handlers;
	o.app = env;
	o.name = name;
	o.concurrency = (int)config_int(&cfg, CONFIG_CONCURRENCY);
	o.batch = (int)batch;
	o.lease_ms = 0;		/* each kind's policy, set above */
	o.grace_ms = config_int(&cfg, CONFIG_GRACE_MS);
	o.drain = drain;
	o.retention_ms = supervised ? 0 : config_int(&cfg, CONFIG_RETENTION_MS);
	o.sync = strcmp(config_str(&cfg, CONFIG_DURABILITY), "full") == 0 ? DB_SYNC_FULL
									    : DB_SYNC_QUEUE;
	if (drain) {
		dp.p = progress_start("drain", dp.total, "jobs");
		o.progress = worker_progress;
		o.progress_arg = &dp;
	}
	cli_install_signals();
	cli_hup_start(&cf);
	failpoint(FP_WORKER_START);
	cli_ready();
	r = worker_run(&o, &st);
	if (dp.p)
		progress_end(dp.p, st.done + st.dead);
	if (r == SD_TIMEOUT) {
		/* handlers outlived the grace period and their leases were
		 * released; they still run and still use env and the worker's
		 * memory, so end the process here, at once, as a stop must */
		fflush(stdout);
		fflush(stderr);
		_exit(0);
	}
	tickets_env_close(env);
	if (r != SD_OK)
		rc = cli_fail(r);
	config_free(&cfg);	/* o.db_path pointed into it */
	return rc;
}

int cli_relay(int argc, char **argv)
{
	int64_t batch = OUTBOX_BATCH_DEFAULT, n = 0;
	int drain = 0;
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		{ "batch", ARG_INT, &batch, 1, 100000, 0, NULL,
		  "rows per transaction", 0 },
		{ "drain", ARG_FLAG, &drain, 0, 0, 0, NULL,
		  "stop when nothing is left to do", 0 },
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	struct outbox_relay_opts ro = { 0 };
	struct drain_progress dp = { NULL, 0 };
	struct config cfg;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0,
			    "relay [--batch N] [--drain] " CLI_CONFIG_USAGE)) != 0)
		return rc;
	if ((rc = cli_config_load(&cf, &cfg)) != 0)
		return rc;
	if ((rc = cli_open_db(config_str(&cfg, CONFIG_DB), 0, DB_SYNC_NORMAL, &db)) != 0) {
		config_free(&cfg);
		return rc;
	}
	if (drain && outbox_unpublished(db, &dp.total) != SD_OK)
		dp.total = 0;
	db_close(db);
	cli_install_signals();
	cli_hup_start(&cf);
	cli_ready();
	ro.batch = (int)batch;
	ro.drain = drain;
	if (drain) {
		/* a bar or plain lines on stderr while draining */
		dp.p = progress_start("relay", dp.total, "rows");
		ro.progress = relay_progress;
		ro.arg = &dp;
	}
	r = outbox_relay_run_opts(config_str(&cfg, CONFIG_DB), &ro, &n);
	/* the bar's last line also when the relay gave up */
	if (dp.p)
		progress_end(dp.p, n);
	config_free(&cfg);
	if (r != SD_OK)
		return cli_fail(r);
	if (drain)
		printf("published %lld\n", (long long)n);
	return 0;
}

/* ---- config show ---------------------------------------------------- */

static int config_show_cmd(int argc, char **argv)
{
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	static const char usage[] = "config show " CLI_CONFIG_USAGE;
	char *pos[ARGS_MAX_POS];
	struct config cfg;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, usage)) != 0)
		return rc;
	if ((r = config_resolve(&cfg, cf.file, cf.value)) != SD_OK)
		return cli_fail(r);
	config_show(&cfg, stdout);
	config_free(&cfg);
	return 0;
}

/* ---- jobs ------------------------------------------------------------ */

struct list_out {
	int json;
	int n;
	FILE *f;	/* the listing is built here and printed only when complete */
};

static void print_row(const struct job_row *jr, void *arg)
{
	struct list_out *lo = arg;

	if (lo->json) {
		fprintf(lo->f, "%s%s", lo->n ? ",\n " : "", jr->json);
	} else {
		if (lo->n == 0)
			fprintf(lo->f, "%-9s %-32s %-16s %4s %4s  %s\n", "STATE", "JOB_ID", "KIND",
				"DLV", "ATT", "LAST_ERROR");
		fprintf(lo->f, "%-9s %-32s %-16s %4lld %4lld  %s\n", jr->state, jr->job_id,
			jr->kind, (long long)jr->deliveries, (long long)jr->attempts,
			jr->last_error ? jr->last_error : "-");
	}
	lo->n++;
}

static int jobs_list(struct db *db, const char *state, const char *kind, int64_t limit, int json)
{
	struct list_out lo = { json, 0 };
	enum sd_result r;

	if (state && strcmp(state, "ready") && strcmp(state, "scheduled") && strcmp(state, "leased") &&
	    strcmp(state, "dead") && strcmp(state, "done"))
		return cli_fail(err_set(SD_INVALID,
					"unknown state '%.40s' (ready, scheduled, leased, dead, done)",
					state));
	char *buf = NULL;
	size_t len = 0;

	if (!(lo.f = open_memstream(&buf, &len)))
		return cli_fail(err_set(SD_NOMEM, "out of memory"));
	if (json)
		fputc('[', lo.f);
	r = queue_list(db, state, kind, (int)limit, print_row, &lo);
	if (json)
		fputs("]\n", lo.f);
	fclose(lo.f);
	if (r == SD_OK)
		fwrite(buf, 1, len, stdout);
	free(buf);
	return r == SD_OK ? 0 : cli_fail(r);
}

static int jobs_stats(struct db *db, int json)
{
	struct queue_counts *rows, total;
	enum sd_result r;
	int n, i;

	if ((r = queue_stats(db, &rows, &n, &total)) != SD_OK)
		return cli_fail(r);
	if (json) {
		printf("{\"total\":{\"ready\":%lld,\"scheduled\":%lld,\"leased\":%lld,\"dead\":%lld,"
		       "\"done\":%lld},\"kinds\":{", (long long)total.ready,
		       (long long)total.scheduled, (long long)total.leased, (long long)total.dead,
		       (long long)total.done);
		/* kind names are [a-z0-9_.-]: nothing to escape */
		for (i = 0; i < n; i++)
			printf("%s\"%s\":{\"ready\":%lld,\"scheduled\":%lld,\"leased\":%lld,"
			       "\"dead\":%lld,\"done\":%lld}", i ? "," : "", rows[i].kind,
			       (long long)rows[i].ready, (long long)rows[i].scheduled,
			       (long long)rows[i].leased, (long long)rows[i].dead,
			       (long long)rows[i].done);
		printf("}}\n");
	} else {
		printf("%-20s %9s %9s %9s %9s %9s\n", "KIND", "READY", "SCHEDULED", "LEASED", "DEAD",
		       "DONE");
		for (i = 0; i < n; i++)
			printf("%-20s %9lld %9lld %9lld %9lld %9lld\n", rows[i].kind,
			       (long long)rows[i].ready, (long long)rows[i].scheduled,
			       (long long)rows[i].leased, (long long)rows[i].dead,
			       (long long)rows[i].done);
		printf("%-20s %9lld %9lld %9lld %9lld %9lld\n", "(total)", (long long)total.ready,
		       (long long)total.scheduled, (long long)total.leased, (long long)total.dead,
		       (long long)total.done);
	}
	free(rows);
	return 0;
}

/* jobs_cmd: `jobs SUB`, the words after SUB; one table for them all */
static int jobs_cmd(const char *sub, int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL, *kind = NULL;
	int64_t limit = 1000, older = QUEUE_RETENTION_MS_DEFAULT;
	int json = 0, dead = 0;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "state", ARG_STR, &state, 0, 0, 0, "STATE",
		  "ready, scheduled, leased, dead or done", 0 },
		{ "kind", ARG_STR, &kind, 0, 0, 0, "KIND",
		  "only jobs of this kind", 0 },
		{ "limit", ARG_INT, &limit, 1, 1000000, 0, NULL,
		  "at most this many rows", 0 },
		{ "older-than-ms", ARG_INT, &older, 0, 3650LL * 24 * 3600 * 1000, 0, NULL,
		  "finished jobs older than this are deleted (default 7 days)", 0 },
		ARG_JSON(&json),
		{ "dead", ARG_FLAG, &dead, 0, 0, 0, NULL,
		  "the dead letters: say it to mean it", 0 },
		ARG_END,
	};
	/* each subcommand's own options, from the one table */
	static const struct { const char *sub, *takes; } subs[] = {
		{ "stats", " db json " },	{ "ls", " db state kind limit json " },
		{ "dead", " db kind limit json " }, { "retry", " db " },
		{ "purge", " db dead " },	{ "prune", " db older-than-ms " },
	};
	struct arg_opt mine[sizeof opts / sizeof opts[0]];
	char usage[256], *pos[ARGS_MAX_POS];
	struct db *db;
	enum sd_result r;
	int64_t n = 0;
	int npos, rc, want = strcmp(sub, "retry") == 0, k = 0, o = 0;
	size_t i, j;

	for (j = 0; j < sizeof subs / sizeof subs[0] && strcmp(subs[j].sub, sub) != 0; j++)
		;
	o = snprintf(usage, sizeof usage, "jobs %s%s", sub, want ? " JOB_ID" : "");
	for (i = 0; opts[i].name; i++) {
		char word[32];

		snprintf(word, sizeof word, " %s ", opts[i].name);
		if (j == sizeof subs / sizeof subs[0] || !strstr(subs[j].takes, word))
			continue;
		mine[k++] = opts[i];
		if (strcmp(opts[i].name, "db") != 0 && o < (int)sizeof usage)
			o += snprintf(usage + o, sizeof usage - (size_t)o, " %s--%s%s%s%s",
				      strcmp(opts[i].name, "dead") ? "[" : "", opts[i].name,
				      opts[i].metavar || opts[i].type == ARG_INT ? " " : "",
				      opts[i].metavar ? opts[i].metavar
				      : opts[i].type == ARG_INT ? "N" : "",
				      strcmp(opts[i].name, "dead") ? "]" : "");
	}
	mine[k] = opts[i];	/* the end */
	if ((rc = cli_parse(argc, argv, mine, pos, &npos, want, want, usage)) != 0)
		return rc;
	if (strcmp(sub, "purge") == 0 && !dead) {
		fprintf(stderr, "stagedoor: 'jobs purge' deletes dead jobs only: say --dead\n");
		return 2;
	}
	if (kind && (r = queue_kind_valid(kind)) != SD_OK)
		return cli_fail(r);
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	if (strcmp(sub, "stats") == 0) {
		rc = jobs_stats(db, json);
	} else if (strcmp(sub, "ls") == 0) {
		rc = jobs_list(db, state, kind, limit, json);
	} else if (strcmp(sub, "dead") == 0) {
		rc = jobs_list(db, "dead", kind, limit, json);
	} else if (strcmp(sub, "retry") == 0) {
		r = queue_dead_retry(db, pos[0], &n);
		rc = r == SD_OK ? (printf("retried %lld\n", (long long)n), 0) : cli_fail(r);
	} else if (strcmp(sub, "purge") == 0) {
		r = queue_dead_purge(db, &n);
		rc = r == SD_OK ? (printf("purged %lld\n", (long long)n), 0) : cli_fail(r);
	} else {
		int64_t total = 0;
		do {
			r = queue_prune_done(db, older, 1000, &n);
			total += n;
		} while (r == SD_OK && n == 1000);
		rc = r == SD_OK ? (printf("pruned %lld\n", (long long)total), 0) : cli_fail(r);
	}
	db_close(db);
	return rc;
}

static int jobs_stats_cmd(int argc, char **argv)
{
	return jobs_cmd("stats", argc, argv);
}

static int jobs_ls_cmd(int argc, char **argv)
{
	return jobs_cmd("ls", argc, argv);
}

static int jobs_dead_cmd(int argc, char **argv)
{
	return jobs_cmd("dead", argc, argv);
}

static int jobs_retry_cmd(int argc, char **argv)
{
	return jobs_cmd("retry", argc, argv);
}

static int jobs_purge_cmd(int argc, char **argv)
{
	return jobs_cmd("purge", argc, argv);
}

static int jobs_prune_cmd(int argc, char **argv)
{
	return jobs_cmd("prune", argc, argv);
}

const struct cli_cmd cli_jobs_subs[] = {
	{ "stats", jobs_stats_cmd, "jobs per kind: ready, scheduled, leased, dead and done", NULL,
	  0 },
	{ "ls", jobs_ls_cmd, "the jobs, newest first", NULL, 0 },
	{ "dead", jobs_dead_cmd, "the dead letters and why each died", NULL, 0 },
	{ "retry", jobs_retry_cmd, "a dead job back on the stream (its attempts start again)", NULL,
	  0 },
	{ "purge", jobs_purge_cmd, "delete the dead letters", NULL, 0 },
	{ "prune", jobs_prune_cmd, "delete finished jobs older than the retention", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cli_config_subs[] = {
	{ "show", config_show_cmd, "every setting in force and where it came from (flag, "
				   "environment, file or default)", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

/* ---- mail test ------------------------------------------------------- */

/* mail_test_key: "mail-test-" and 16 random hex digits, so that no two
 * tests share a key (a provider would drop the second as a duplicate). */
static void mail_test_key(char *buf, size_t size)
{
	unsigned char b[8];
	FILE *f = fopen("/dev/urandom", "rb");
	size_t i, got = 0;

	if (f) {
		got = fread(b, 1, sizeof b, f);
		fclose(f);
	}
	if (got != sizeof b) {
		/* no urandom (a chroot): time and pid still tell tests apart */
		uint64_t x = (uint64_t)clock_mono_us() ^ ((uint64_t)getpid() << 40);
		for (i = 0; i < sizeof b; i++, x >>= 8)
			b[i] = (unsigned char)x;
	}
	i = (size_t)snprintf(buf, size, "mail-test-");
	for (got = 0; got < sizeof b && i + 2 < size; got++, i += 2)
		snprintf(buf + i, size - i, "%02x", b[got]);
}

/* mail_fail: the one line for a failed test, naming the transport; exit 1
 * (a failed send is a failure, never a usage error). */
static int mail_fail(const char *transport, enum sd_result r)
{
	char msg[900];

	snprintf(msg, sizeof msg, "%s", *err_msg() ? err_msg() : sd_result_name(r));
	err_set(r, "mail test via %s failed: %s", transport, msg);
	cli_fail(r);
	return 1;
}

static int mail_test_cmd(int argc, char **argv)
{
	const char *to = NULL, *from;
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		{ "to", ARG_STR, &to, 0, 0, 0, "ADDR",
		  "the address the test message goes to", 0 },
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	static const char usage[] = "mail test --to ADDR " CLI_CONFIG_USAGE;
	char *pos[ARGS_MAX_POS], url[PATH_MAX + 16], transport[256], key[64], text[512];
	struct mailer *m = NULL;
	struct mail_message msg;
	struct mail_result res;
	struct mail_config mc;
	struct config cfg;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, usage)) != 0)
		return rc;
	if (!to) {
		fprintf(stderr, "stagedoor: usage: stagedoor %s\n", usage);
		return 2;
	}
	if ((r = mail_address_valid(to)) != SD_OK)
		return cli_fail(err_set(SD_INVALID, "--to: not a plain address local@domain"));
	if ((rc = cli_config_load(&cf, &cfg)) != 0)
		return rc;
	if (config_mail_url(&cfg))
		snprintf(url, sizeof url, "%s", config_mail_url(&cfg));
	else
		tickets_default_mail_url(config_str(&cfg, CONFIG_DB), config_str(&cfg, CONFIG_STATE_DIR),
					 url, sizeof url);
	text_redact_url(url, transport, sizeof transport);
	from = config_mail_from(&cfg) ? config_mail_from(&cfg) : TICKETS_MAIL_FROM_DEFAULT;
	config_mail(&cfg, &mc);
	mail_test_key(key, sizeof key);
	snprintf(text, sizeof text,
		 "This is a test message from Stagedoor Box (stagedoor mail test).\n"
		 "If it reached %s, ticket emails can leave this box through\n%s.\n\n"
		 "Test key: %s\n", to, transport, key);
	memset(&msg, 0, sizeof msg);
	msg.from = from;
	msg.from_name = "Stagedoor Box";
	msg.to = to;
	msg.subject = "Stagedoor Box mail test";
	msg.text = text;
	msg.idempotency_key = key;
	memset(&res, 0, sizeof res);
	if ((r = mail_open_opts(url, &mc, &m)) != SD_OK ||
	    (r = mail_send(m, &msg, &res)) != SD_OK) {
		rc = mail_fail(transport, r);
		goto out;
	}
	printf("transport   %s\n", transport);
	printf("from        %s\n", from);
	printf("to          %s\n", to);
	printf("message id  %s\n", res.message_id);
	printf("result      sent%s\n", res.duplicate ? " (a duplicate: the provider kept the first)" : "");
	rc = 0;
out:
	mail_close(m);
	config_free(&cfg);
	return rc;
}

const struct cli_cmd cli_mail_subs[] = {
	{ "test", mail_test_cmd, "send one test message through the configured transport", NULL,
	  0 },
	{ NULL, NULL, NULL, NULL, 0 },
};
