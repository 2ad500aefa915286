/*
 * demo.c: `stagedoor demo`: the whole pipeline on a fresh ./var/demo with
 * sample sales, mail into a maildir: no network.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "clock.h"
#include "cmd/commands.h"
#include "cmd/demo_shop.h"
#include "config.h"
#include "db.h"
#include "events.h"
#include "jobkinds.h"
#include "log.h"
#include "orders.h"
#include "pipeline.h"
#include "progress.h"
#include "queue.h"
#include "statedir.h"
#include "ticket_jobs.h"
#include "tickets.h"

/* ---- demo ------------------------------------------------------------ */

#define DEMO_DIR "./var/demo"
#define DEMO_DB DEMO_DIR "/stagedoor.db"

static int64_t demo_count(struct db *db, const char *kind, const char *state)
{
	struct queue_counts *rows, total;
	int64_t v = 0;
	int n, i;

	if (queue_stats(db, &rows, &n, &total) != SD_OK)
		return -1;
	for (i = 0; i < n; i++) {
		if (strcmp(rows[i].kind, kind) != 0)
			continue;
		v = strcmp(state, "done") == 0 ? rows[i].done : rows[i].dead;
	}
	free(rows);
	return v;
}

/* The three jobs every order makes: render_tickets, send_tickets (added by
 * the render), update_sales_counter. */
static const char *const demo_kinds[] = { JOB_KIND_RENDER, JOB_KIND_SEND,
					  JOB_KIND_COUNT };
#define DEMO_JOBS_PER_ORDER 3

/* demo_jobs_done: the finished jobs of the three kinds, in one queue_stats
 * read; -1 when it cannot be read. */
static int64_t demo_jobs_done(struct db *db)
{
	struct queue_counts *rows, total;
	int64_t v = 0;
	size_t k;
	int n, i;

	if (queue_stats(db, &rows, &n, &total) != SD_OK)
		return -1;
	for (i = 0; i < n; i++)
		for (k = 0; k < sizeof demo_kinds / sizeof demo_kinds[0]; k++)
			if (strcmp(rows[i].kind, demo_kinds[k]) == 0)
				v += rows[i].done;
	free(rows);
	return v;
}

/* What demo_progress needs between snapshots. */
struct demo_progress {
	struct db *db;			/* the demo's connection (the snapshots') */
	struct progress *bar;		/* "drain": jobs done of 3 per order */
};

/* Every snapshot of pipeline_run (on this thread): jobs done so far. */
static enum sd_result demo_progress(void *arg, const struct pipeline_counts *c)
{
	struct demo_progress *p = arg;
	int64_t done = demo_jobs_done(p->db);

	(void)c;
	if (done >= 0)
		progress_update(p->bar, done);
	return SD_OK;
}

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void rm_rf(const char *path)
{
	char cmd[PATH_MAX + 16];

	/* our own demo folder only: a fixed relative path */
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
	if (system(cmd) != 0)
		fprintf(stderr, "stagedoor: could not clear %s\n", path);
}

/* The program as it was run (argv[0]: bin/stagedoor from `make demo`, or a
 * bare name found on PATH), so that the demo's hints work as printed. */
static const char *demo_self(void)
{
	return program_invocation_name && *program_invocation_name ? program_invocation_name
								   : "stagedoor";
}

/* After each order (pipeline_sample_orders, on this thread). */
static void demo_placed(int64_t done, int64_t n, void *arg)
{
	(void)n;
	progress_update(arg, done);
}

/* demo_serve: on a terminal, the demo's box running (`run`: the dashboard,
 * and the workers that render and send what is sold in it; with a shop,
 * its script: paysink beside it) until Ctrl-C; otherwise (a script, a
 * test) the command that would run it. */
static int demo_serve(const struct config *cfg, const char *script)
{
	const char *listen = config_str(cfg, CONFIG_HTTP_LISTEN);
	char *const av[] = { (char *)demo_self(), "run", "--db", DEMO_DB, "--http-listen",
			     (char *)listen, NULL };
	char *const sh[] = { "/bin/sh", (char *)script, NULL };

	if (strcmp(listen, "off") == 0)
		return 0;
	if (script && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))) {
		printf("box and shop: sh %s   (then the shop at http://" DEMO_SHOP_LISTEN "/, the "
		       "dashboard at http://%s/, token in %s/api.token)\n", script, listen,
		       DEMO_DIR);
		return 0;
	}
	if (script) {
		printf("shop: http://" DEMO_SHOP_LISTEN "/   dashboard: http://%s/   (API token: "
		       "%s/api.token; payments at paysink, on this machine; Ctrl-C to stop)\n",
		       listen, DEMO_DIR);
		fflush(stdout);
		execv(sh[0], sh);
		return cli_fail(err_set(SD_IO, "cannot start the box: %s", strerror(errno)));
	}
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		printf("dashboard: %s run --db %s --http-listen %s   (then http://%s/, token in "
		       "%s/api.token)\n", demo_self(), DEMO_DB, listen, listen, DEMO_DIR);
		return 0;
	}
	printf("dashboard: http://%s/   (API token: %s/api.token; Ctrl-C to stop)\n", listen,
	       DEMO_DIR);
	fflush(stdout);
	execv("/proc/self/exe", av);
	return cli_fail(err_set(SD_IO, "cannot start the box: %s", strerror(errno)));
}

static int demo_main(int argc, char **argv)
{
	int64_t orders = 200, event_id = 0, t0, sold = 0;
	const char *paysink = NULL;
	char script[PATH_MAX + 16];
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		{ "orders", ARG_INT, &orders, 1, 10000, 0, NULL,
		  "orders the demo sells (200)", 0 },
		{ "shop", ARG_STR, &paysink, 0, 0, 0, "PAYSINK",
		  "the public shop too, selling the demo's event against tools/paysink (the "
		  "program at PAYSINK: build/paysink), a payment provider on this machine", 0 },
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], first[ORDER_ID_MAX] = "";
	struct demo_progress prog;
	struct pipeline_opts po;
	struct tickets_env *env = NULL;
	struct mail_config mc;
	struct config cfg;
	struct db *db = NULL;
	enum sd_result r;
	int npos, rc, maildir;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0,
			    "demo [--orders N] [--shop PAYSINK] " CLI_CONFIG_USAGE)) != 0)
		return rc;
	if ((rc = cli_config_load(&cf, &cfg)) != 0)
		return rc;
	/* the default transport is the demo's own maildir; any other is the
	 * operator's (an SMTP relay, an HTTPS mail API) */
	maildir = !config_mail_url(&cfg);
	config_mail(&cfg, &mc);
	log_set_level(LOG_WARN);
	rm_rf(DEMO_DIR);
	if ((r = db_open(DEMO_DB, DB_OPEN_CREATE, DB_SYNC_FULL, &db)) != SD_OK ||
	    (r = statedir_init(DEMO_DB, NULL)) != SD_OK ||
	    (r = tickets_env_open(DEMO_DB, NULL, config_mail_url(&cfg), config_mail_from(&cfg), &mc,
				  &env)) != SD_OK ||
	    (r = config_apply_leases(&cfg, 0, NULL)) != SD_OK)
		goto fail;
	fprintf(stderr, "demo: database %s\n", DEMO_DB);
	if ((r = pipeline_sample_event(db, "Stagedoor Demo Night", orders, &event_id)) != SD_OK)
		goto fail;
	/* the box office: one FULL-durability transaction per order */
	t0 = clock_mono_us();
	prog.bar = progress_start("place", orders, "orders");
	r = pipeline_sample_orders(db, event_id, orders, "demo", &sold, first, demo_placed,
				   prog.bar);
	progress_end(prog.bar, r == SD_OK ? orders : -1);
	if (r != SD_OK)
		goto fail;
	fprintf(stderr, "demo: placed %lld orders (%lld seats) in %.2f s\n",
		(long long)orders, (long long)sold, (double)(clock_mono_us() - t0) / 1e6);

	/* the relay and a worker, in this process, until the stream drains */
	memset(&po, 0, sizeof po);
	po.worker.db_path = DEMO_DB;
	po.worker.name = "demo-worker";
	po.worker.concurrency = 4;
	po.worker.handlers = ticket_handlers;
	po.worker.app = env;
	po.poll_ms = 200;
	po.progress = demo_progress;
	prog.db = db;
	po.arg = &prog;
	t0 = clock_mono_us();
	prog.bar = progress_start("drain", DEMO_JOBS_PER_ORDER * orders, "jobs");
	r = pipeline_run(db, &po, NULL);
	/* the drained count, read after the loops stopped */
	progress_end(prog.bar, r == SD_OK ? demo_jobs_done(db) : -1);
	if (r != SD_OK) {
		r = err_set(SD_IO, "demo loop failed: %s", err_msg());
		goto fail;
	}
	fprintf(stderr, "demo: the stream drained in %.2f s\n",
		(double)(clock_mono_us() - t0) / 1e6);

	/* the summary, from the database and the files */
	{
		struct event_summary es;

		if ((r = event_summary(db, env->blobs, event_id, &es)) != SD_OK)
			goto fail;
		printf("orders           %lld\n", (long long)es.orders);
		printf("tickets          %lld\n", (long long)es.tickets);
		printf("PDFs stored      %lld   (%s/blobs/tickets/)\n",
		       (long long)(es.orders - es.pdfs_missing), DEMO_DIR);
		printf("emails sent      %lld\n", (long long)es.emails_sent);
		if (maildir)
			printf("maildir messages %d   (%s/maildir/new/)\n",
			       count_files(DEMO_DIR "/maildir/new"), DEMO_DIR);
		else
			printf("mail transport   %.*s\n",
			       (int)strcspn(config_mail_url(&cfg), "?#"), config_mail_url(&cfg));
		printf("sales counter    %lld orders, %lld seats (sold %lld seats)\n",
		       (long long)es.counted_orders, (long long)es.counted_seats, (long long)sold);
		printf("dead jobs        %lld\n", (long long)(demo_count(db, JOB_KIND_RENDER, "dead") +
							  demo_count(db, JOB_KIND_SEND, "dead") +
							  demo_count(db, JOB_KIND_COUNT, "dead")));
	}
	printf("\ntry: %s order show %s --db %s\n", demo_self(), first, DEMO_DB);
	if (paysink && (r = demo_shop_prepare(db, event_id, DEMO_DIR, paysink,
					      config_str(&cfg, CONFIG_HTTP_LISTEN), script,
					      sizeof script)) != SD_OK)
		goto fail;
	tickets_env_close(env);
	env = NULL;
	db_close(db);
	db = NULL;
	rc = demo_serve(&cfg, paysink ? script : NULL);
	config_free(&cfg);
	return rc;
fail:
	tickets_env_close(env);
	db_close(db);
	config_free(&cfg);
	return cli_fail(r);
}

const struct cli_cmd cmd_demo = CLI_NODE("demo", demo_main, NULL,
		"the whole pipeline on a fresh ./var/demo, mail into a maildir: no network");
