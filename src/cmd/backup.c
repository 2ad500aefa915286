/*
 * backup.c: `stagedoor backup DEST`, `stagedoor backup verify DEST`, and
 * `stagedoor backup --scheduled`, the periodic backup `run` starts
 * (backup_sched.h); backup.h does the work.
 *
 * Each prints one summary line on stdout and exits 0, or one line
 * "stagedoor: ..." on stderr and exits 1 (2 for bad usage or a destination
 * that exists).  --scheduled speaks through the log instead, and exits 0
 * or BACKUP_SCHED_EXIT_FAILED once it has recorded its failure.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "backup.h"
#include "backup_sched.h"
#include "cli.h"
#include "clock.h"
#include "cmd/commands.h"
#include "db.h"
#include "log.h"

#define BACKUP_USAGE "backup DEST [--db PATH] [--state-dir DIR]"


static void print_info(const char *what, const char *dest, const struct backup_info *in,
		       int64_t t0)
{
	char line[160];

	backup_info_format(in, line, sizeof line);
	printf("%s %s: %s, %.2f s\n", what, dest, line, (double)(clock_mono_us() - t0) / 1e6);
}

/* scheduled: one periodic backup into backup_dir, with run's arguments
 * (the settings are run's own). */
static int scheduled(int argc, char **argv)
{
	struct cli_config_flags cf = { 0 };
	struct arg_opt opts[] = {
		CLI_CONFIG_OPTS(&cf),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], name[BACKUP_SCHED_NAME_MAX], why[512], qwhy[1100], qdir[1100];
	const char *dir, *dbp;
	struct backup_info info;
	struct config cfg;
	struct db *db = NULL;
	enum sd_result r;
	int npos, rc, pruned = 0;
	int64_t t0 = clock_mono_us();

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, "backup --scheduled "
			    CLI_CONFIG_USAGE)) != 0 || (rc = cli_config_load(&cf, &cfg)) != 0)
		return rc;
	dir = config_str(&cfg, CONFIG_BACKUP_DIR);
	dbp = config_str(&cfg, CONFIG_DB);
	if ((r = db_open(dbp, 0, DB_SYNC_NORMAL, &db)) == SD_OK)
		r = backup_sched_take(db, dbp, config_str(&cfg, CONFIG_STATE_DIR), dir,
				      (int)config_int(&cfg, CONFIG_BACKUP_KEEP), name, sizeof name,
				      &info, &pruned);
	db_close(db);
	snprintf(why, sizeof why, "%s", r == SD_OK ? "" : err_msg());
	backup_sched_record(dbp, r == SD_OK, why);
	if (r == SD_OK)
		log_event(LOG_INFO, "backup taken", "name=%s files=%d bytes=%lld ms=%lld pruned=%d",
			  name, info.files, (long long)info.bytes,
			  (long long)((clock_mono_us() - t0) / 1000), pruned);
	else
		log_event(LOG_WARN, "backup failed", "dir=%s err=%s",
			  log_quote(qdir, sizeof qdir, dir ? dir : ""),
			  log_quote(qwhy, sizeof qwhy, why));
	config_free(&cfg);
	return r == SD_OK ? 0 : BACKUP_SCHED_EXIT_FAILED;
}

static int backup_main(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL;
	int sched = 0;
	struct arg_opt opts[] = {
		/* taken before the rest: the scheduled backup parses run's words */
		{ "scheduled", ARG_FLAG, &sched, 0, 0, 0, NULL,
		  "one periodic backup into backup_dir, with run's settings (run starts it)", 0 },
		ARG_DB(&dbp),
		ARG_STATE_DIR(&state),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	struct backup_info info;
	struct db *db;
	enum sd_result r;
	int npos, rc;
	int64_t t0 = clock_mono_us();

	if (argc > 0 && strcmp(argv[0], "--scheduled") == 0)
		return scheduled(argc - 1, argv + 1);
	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, BACKUP_USAGE)) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	r = backup_make(db, db_path(db), cli_state_dir(state), pos[0], &info);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	print_info("backup", pos[0], &info, t0);
	return 0;
}

static int backup_verify_cmd(int argc, char **argv)
{
	struct arg_opt opts[] = { ARG_END };
	char *pos[ARGS_MAX_POS];
	struct backup_info info;
	int npos, rc;
	int64_t t0 = clock_mono_us();

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, "backup verify DEST")) != 0)
		return rc;
	if (backup_verify(pos[0], &info) != SD_OK) {
		fprintf(stderr, "stagedoor: backup verify failed: %s\n", err_msg());
		return 1;
	}
	print_info("ok: backup", pos[0], &info, t0);
	return 0;
}

static const struct cli_cmd backup_subs[] = {
	{ "verify", backup_verify_cmd, "check a backup: its manifest, every file's SHA-256, the "
				       "database's integrity", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_backup = CLI_NODE("backup", backup_main, backup_subs,
		"a consistent copy of a running box into a new folder");
