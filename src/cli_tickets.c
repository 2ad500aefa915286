/*
 * cli_tickets.c: event, order, scan and demo: the ticket pipeline's command
 * line.  Parsing and printing only; the work is in tickets.
 */
#define _GNU_SOURCE
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "clock.h"
#include "config.h"
#include "blob.h"
#include "db.h"
#include "fsio.h"
#include "log.h"
#include "pipeline.h"
#include "progress.h"
#include "queue.h"
#include "serve.h"
#include "tickets.h"
#include "worker.h"

/* ---- event add ------------------------------------------------------- */

int cli_event(int argc, char **argv)
{
	const char *dbp = NULL, *name = NULL, *venue = NULL, *starts = NULL;
	int64_t capacity = 0, id = 0;
	struct arg_opt opts[] = {
		{ "db", ARG_STR, &dbp, 0, 0, 0 },
		{ "name", ARG_STR, &name, 0, 0, 0 },
		{ "venue", ARG_STR, &venue, 0, 0, 0 },
		{ "starts-at", ARG_STR, &starts, 0, 0, 0 },
		{ "capacity", ARG_INT, &capacity, 1, 1000000, 0 },
		{ NULL, 0, NULL, 0, 0, 0 },
	};
	static const char usage[] =
		"event add --name NAME --venue VENUE --starts-at ISO8601 --capacity N";
	char *pos[ARGS_MAX_POS];
	struct event_new e;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, usage)) != 0)
		return rc;
	if (strcmp(pos[0], "add") != 0 || !name || !venue || !starts || !opts[4].seen) {
		fprintf(stderr, "stagedoor: usage: stagedoor %s\n", usage);
		return 2;
	}
	e.name = name;
	e.venue = venue;
	e.capacity = capacity;
	if ((r = tickets_time_parse(starts, &e.starts_at)) != SD_OK ||
	    (r = tickets_text_valid("event name", name)) != SD_OK ||
	    (r = tickets_text_valid("venue", venue)) != SD_OK)
		return cli_fail(r);
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = event_add(db, &e, &id);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("%lld\n", (long long)id);
	return 0;
}

/* ---- order add / show ------------------------------------------------ */

static int order_add_cmd(const char *dbp, int argc, char **argv)
{
	const char *name = NULL, *email = NULL, *key = NULL, *dbflag = NULL;
	int64_t event = 0, seats = 0;
	struct arg_opt opts[] = {
		{ "db", ARG_STR, &dbflag, 0, 0, 0 },
		{ "event", ARG_INT, &event, 1, INT64_MAX, 0 },
		{ "name", ARG_STR, &name, 0, 0, 0 },
		{ "email", ARG_STR, &email, 0, 0, 0 },
		{ "seats", ARG_INT, &seats, 1, TICKETS_SEATS_MAX, 0 },
		{ "idempotency-key", ARG_STR, &key, 0, 0, 0 },
		{ NULL, 0, NULL, 0, 0, 0 },
	};
	static const char usage[] = "order add --event ID --name NAME --email ADDR --seats N "
				    "[--idempotency-key KEY]";
	char *pos[ARGS_MAX_POS], public_id[ORDER_ID_MAX];
	struct order_new o;
	struct db *db;
	enum sd_result r;
	int npos, rc, replayed = 0;

	(void)dbp;
	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, usage)) != 0)
		return rc;
	if (!opts[1].seen || !name || !email || !opts[4].seen) {
		fprintf(stderr, "stagedoor: usage: stagedoor %s\n", usage);
		return 2;
	}
	o.event_id = event;
	o.name = name;
	o.email = email;
	o.seats = seats;
	o.idempotency_key = key;
	/* the order is money taken: FULL durability for its transaction */
	if ((rc = cli_open_db(dbflag, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = order_add(db, &o, public_id, &replayed);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("%s\n", public_id);
	if (replayed)
		fprintf(stderr, "stagedoor: idempotency key seen before: this is the first order, "
				"nothing new was written\n");
	return 0;
}

static int order_show_cmd(int argc, char **argv)
{
	const char *dbp = NULL;
	int json = 0;
	struct arg_opt opts[] = {
		{ "db", ARG_STR, &dbp, 0, 0, 0 },
		{ "json", ARG_FLAG, &json, 0, 0, 0 },
		{ NULL, 0, NULL, 0, 0, 0 },
	};
	char *pos[ARGS_MAX_POS], *out = NULL;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, "order show ID [--json]")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	r = order_show(db, pos[0], json, &out);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	fputs(out, stdout);
	if (json)
		fputc('\n', stdout);
	free(out);
	return 0;
}

/* the order's public id: "T" and capitals or digits, so that it is a safe key */
static enum sd_result order_id_valid(const char *id)
{
	size_t i, n = strlen(id);

	if (n < 2 || n >= ORDER_ID_MAX || id[0] != 'T')
		goto bad;
	for (i = 1; i < n; i++)
		if (!((id[i] >= 'A' && id[i] <= 'Z') || (id[i] >= '0' && id[i] <= '9')))
			goto bad;
	return SD_OK;
bad:
	return err_set(SD_INVALID, "'%.40s' is not an order id (T and 9 letters or digits, as "
		       "order add prints)", id);
}

/* order pdf ID --out FILE: the stored PDF, from files or the database */
static int order_pdf_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL, *outp = NULL;
	struct arg_opt opts[] = {
		{ "db", ARG_STR, &dbp, 0, 0, 0 },
		{ "state-dir", ARG_STR, &state, 0, 0, 0 },
		{ "out", ARG_STR, &outp, 0, 0, 0 },
		{ NULL, 0, NULL, 0, 0, 0 },
	};
	char *pos[ARGS_MAX_POS], key[64], head[PATH_MAX + 16];
	struct blob_store *bs = NULL;
	unsigned char *pdf = NULL;
	size_t len = 0;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1,
			    "order pdf ID --out FILE [--state-dir DIR]")) != 0)
		return rc;
	if ((r = order_id_valid(pos[0])) != SD_OK)
		return cli_fail(r);
	if (!outp || !*outp)
		return cli_fail(err_set(SD_INVALID, "order pdf: give --out FILE (the PDF holds the "
					"buyer's tickets; it is written mode 0600)"));
	snprintf(key, sizeof key, "tickets/%s.pdf", pos[0]);
	if ((r = tickets_blobs_open(cli_db_path(dbp), cli_state_dir(state), &bs)) != SD_OK ||
	    (r = blob_get(bs, key, &pdf, &len)) != SD_OK) {
		blob_close(bs);
		if (r == SD_NOT_FOUND)
			err_set(SD_NOT_FOUND, "order %s has no stored PDF (no such order, or its "
				"tickets are not rendered yet: see order show %s)", pos[0], pos[0]);
		return cli_fail(r);
	}
	blob_close(bs);
	snprintf(head, sizeof head, "%s.tmp-", outp);
	r = fsio_put(outp, pdf, len, head, "", 0600, FSIO_RENAME, NULL);
	free(pdf);
	if (r != SD_OK)
		return cli_fail(r);
	printf("%s: %zu bytes\n", outp, len);
	return 0;
}

int cli_order(int argc, char **argv)
{
	if (argc >= 1 && strcmp(argv[0], "add") == 0)
		return order_add_cmd(NULL, argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "show") == 0)
		return order_show_cmd(argc - 1, argv + 1);
	if (argc >= 1 && strcmp(argv[0], "pdf") == 0)
		return order_pdf_cmd(argc - 1, argv + 1);
	fprintf(stderr, "stagedoor: usage: stagedoor order add ... | order show ID [--json] | "
			"order pdf ID --out FILE\n");
	return 2;
}

/* ---- scan ------------------------------------------------------------ */

int cli_scan(int argc, char **argv)
{
	const char *dbp = NULL;
	const char *state = NULL;
	struct arg_opt opts[] = {
		{ "db", ARG_STR, &dbp, 0, 0, 0 },
		{ "state-dir", ARG_STR, &state, 0, 0, 0 },
		{ NULL, 0, NULL, 0, 0, 0 },
	};
	char *pos[ARGS_MAX_POS], keypath[PATH_MAX], when[64];
	unsigned char key[CODE_KEY_LEN];
	struct scan_result res;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, "scan CODE")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	if ((r = code_key_path(db_path(db), cli_state_dir(state), keypath, sizeof keypath)) != SD_OK ||
	    (r = code_key_load(keypath, key)) != SD_OK ||
	    (r = ticket_scan(db, key, pos[0], NULL, &res)) != SD_OK) {
		db_close(db);
		memset(key, 0, sizeof key);
		return cli_fail(r);
	}
	db_close(db);
	memset(key, 0, sizeof key);
	switch (res.outcome) {
	case SCAN_ADMITTED:
		printf("admitted: seat %s, order %s\n", res.seat_label, res.order_id);
		return 0;
	case SCAN_ALREADY:
		tickets_time_format(res.scanned_at, when, sizeof when);
		printf("already scanned at %s: seat %s, order %s\n", when, res.seat_label,
		       res.order_id);
		return 3;
	case SCAN_INVALID:
	default:
		printf("invalid\n");
		return 4;
	}
}

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
static const char *const demo_kinds[] = { "render_tickets", "send_tickets",
					  "update_sales_counter" };
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

/* demo_serve: on a terminal, the dashboard over the demo's box until
 * Ctrl-C; otherwise (a script, a test) the command that would serve it. */
static int demo_serve(const struct config *cfg)
{
	const char *listen = config_str(cfg, CONFIG_HTTP_LISTEN);
	struct serve *sv = NULL;
	sigset_t set;
	enum sd_result r;
	int sig;

	if (strcmp(listen, "off") == 0)
		return 0;
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		printf("dashboard: %s serve --db %s   (then http://%s/, token in %s/api.token)\n",
		       demo_self(), DEMO_DB, listen, DEMO_DIR);
		return 0;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if ((r = serve_start(&(struct serve_opts){ DEMO_DB, NULL, listen,
						   config_int(cfg, CONFIG_API_KEY_TTL_MS),
						   config_int(cfg, CONFIG_DISK_WARN_BYTES), 0 },
			     &sv)) != SD_OK)
		return cli_fail(r);
	printf("dashboard: http://%s/   (API token: %s/api.token; Ctrl-C to stop)\n", listen,
	       DEMO_DIR);
	fflush(stdout);
	while (sigwait(&set, &sig) != 0)
		;
	serve_stop(sv);
	printf("\n");
	return 0;
}

int cli_demo(int argc, char **argv)
{
	int64_t orders = 200, event_id = 0, t0, sold = 0;
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		{ "orders", ARG_INT, &orders, 1, 10000, 0 },
		CLI_CONFIG_OPTS(&cf),
		{ NULL, 0, NULL, 0, 0, 0 },
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
			    "demo [--orders N] " CLI_CONFIG_USAGE)) != 0)
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
	    (r = tickets_files_init(DEMO_DB, NULL)) != SD_OK ||
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
	po.worker.handlers = tickets_handlers;
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

		if ((r = tickets_event_summary(db, env->blobs, event_id, &es)) != SD_OK)
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
		printf("dead jobs        %lld\n", (long long)(demo_count(db, "render_tickets", "dead") +
							  demo_count(db, "send_tickets", "dead") +
							  demo_count(db, "update_sales_counter", "dead")));
	}
	printf("\ntry: %s order show %s --db %s\n", demo_self(), first, DEMO_DB);
	tickets_env_close(env);
	env = NULL;
	db_close(db);
	db = NULL;
	rc = demo_serve(&cfg);
	config_free(&cfg);
	return rc;
fail:
	tickets_env_close(env);
	db_close(db);
	config_free(&cfg);
	return cli_fail(r);
}
