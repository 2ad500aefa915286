/*
 * cli.h: the subcommands.  Each takes the words after its name and returns
 * the process exit status: 0 success, 1 failure, 2 bad usage.  Errors are
 * printed once, as one line "stagedoor: ..." on stderr.
 */
#ifndef SD_CLI_H
#define SD_CLI_H

#define CLI_DB_DEFAULT "./var/stagedoor.db"

/* cli_db_path: --db, else $STAGEDOOR_DB, else ./var/stagedoor.db. */
const char *cli_db_path(const char *flag);

/* cli_fail: print "stagedoor: <err_msg()>" and return the exit status for r. */
int cli_fail(int r);

/* cli_install_signals: SIGINT and SIGTERM ask every loop to stop. */
void cli_install_signals(void);

int cli_init(int argc, char **argv);
int cli_enqueue(int argc, char **argv);
int cli_worker(int argc, char **argv);
int cli_relay(int argc, char **argv);
int cli_jobs(int argc, char **argv);
int cli_bench(int argc, char **argv);

#endif
