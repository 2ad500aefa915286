/*
 * testutil.h: what every test shares: a fresh temp directory and database per
 * test, the fake clock, and running bin/stagedoor as a child process.
 *
 * Include after <stdarg.h>, <stddef.h>, <setjmp.h>, <stdint.h> and <cmocka.h>.
 */
#ifndef SD_TESTUTIL_H
#define SD_TESTUTIL_H

#include <stdint.h>
#include <sys/types.h>

#include "db.h"

struct tu_env {
	char dir[256];		/* a fresh directory, removed after the test */
	char db_path[300];	/* dir/stagedoor.db, or on PostgreSQL the URI of
				 * the test's own schema */
	char pg_schema[64];	/* PostgreSQL: that schema's name; "" on SQLite */
	struct db *db;		/* open on db_path (NORMAL), or NULL */
};

/*
 * The engine under test: SQLite, or PostgreSQL when STAGEDOOR_TEST_PG holds
 * a server's URI (tools/run_tests.sh sets it for the engine-dependent suites'
 * second run).  tu_pg: 1 on PostgreSQL.  tu_pg_base: that URI, or NULL.
 * tu_pg_admin: run SQL on the base URI (fails the test on an error).
 * TU_SQLITE_ONLY: skip the rest of a test that is about SQLite's file.
 */
int tu_pg(void);
const char *tu_pg_base(void);
void tu_pg_admin(const char *sql);
int64_t tu_pg_int(const char *sql);
/* tu_state: the state_dir a test gives: NULL on SQLite (beside the
 * database), e->dir on PostgreSQL (which has no folder of its own) */
const char *tu_state(const struct tu_env *e);	/* one value read on the base URI; -1: none */
/* TU_SKIP: skip the rest of the test, saying why on a line of its own
 * ("# skipped: why"), which tools/run_tests.sh reports beside its name. */
#define TU_SKIP(why)                                                                       \
	do {                                                                               \
		print_message("# skipped: %s\n", (why));                                  \
		skip();                                                                    \
	} while (0)
#define TU_SQLITE_ONLY()                                                                   \
	do {                                                                               \
		if (tu_pg())                                                               \
			TU_SKIP("about SQLite's file, not run on PostgreSQL");             \
	} while (0)
/* TU_PG_ONLY: skip the rest of a test that is about PostgreSQL's server. */
#define TU_PG_ONLY()                                                                       \
	do {                                                                               \
		if (!tu_pg())                                                              \
			TU_SKIP("needs PostgreSQL: the pg suite runs it");                 \
	} while (0)

/* cmocka setup/teardown: a fresh tu_env in *state with the database made,
 * the fake clock at 1,000,000,000 ms, policies and the stop flag reset. */
int tu_setup(void **state);

/* tu_reminders: reminders before_ms ahead of an event (0: none, every
 * setup's default) for the commands a test runs ($STAGEDOOR_REMIND_BEFORE)
 * and in this process (event_rules_set). */
void tu_reminders(int64_t before_ms);
int tu_teardown(void **state);

/* tu_setup_nodb: as tu_setup, with the directory only (no database). */
int tu_setup_nodb(void **state);

/* tu_setup_real, tu_setup_real_nodb: as above, on the real clock, for tests
 * that run the binary (which has no fake clock). */
int tu_setup_real(void **state);
int tu_setup_real_nodb(void **state);

/* tu_bin: the stagedoor binary under test ($STAGEDOOR_BIN, else bin/stagedoor). */
const char *tu_bin(void);

/* tu_bench_bin: the benchmark program ($STAGEDOOR_BENCH_BIN, else
 * build/stagedoor-bench). */
const char *tu_bench_bin(void);

/*
 * tu_run: run stagedoor with argv (NULL-terminated, without the program
 * name), stdout captured into out (may be NULL), stderr into err (may be
 * NULL).  Returns the exit status, or -1 when it died by a signal.  An argv
 * that starts with "bench" runs the benchmark program (tu_bench_bin) with
 * the words after it, one that starts with "paysink" the local payment
 * provider ($PAYSINK_BIN, else build/paysink); so does tu_spawn's.
 */
int tu_run(char *out, size_t out_size, char *err, size_t err_size, const char *const *argv);

/* tu_spawn: start stagedoor with argv in the background, its stdout and
 * stderr to log_path (may be NULL for /dev/null).  Returns the pid.  The
 * child is tracked: tu_teardown SIGKILLs it if it still runs, so a failed
 * assertion never leaves a worker behind. */
pid_t tu_spawn(const char *const *argv, const char *log_path);

/* tu_reap: wait up to timeout_ms for a spawned child and return its exit
 * status (-1: killed by a signal); on timeout SIGKILL it and fail the test,
 * naming what. */
int tu_reap(pid_t pid, int timeout_ms, const char *what);

/* tu_slurp: the whole file, NUL-terminated; [out] *size.  Caller frees. */
unsigned char *tu_slurp(const char *path, size_t *size);

/* tu_exec: run argv[0] (found on PATH) with stdin from /dev/null, stdout to
 * out_path and stderr to err_path (NULL: /dev/null); wait up to timeout_ms.
 * Returns the exit status, -1 for a signal death; on a timeout the child is
 * killed and the test fails. */
int tu_exec(const char *const *argv, const char *out_path, const char *err_path, int timeout_ms);

/* tu_fail_free: fail the test with the printf-style message, after freeing
 * a and b (either may be NULL), which the message may print: a failure that
 * shows a log it read leaks nothing under LeakSanitizer. */
void tu_fail_free(void *a, void *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* tu_wait: wait up to timeout_ms for pid; returns the exit status, -1 for a
 * signal death, -2 on timeout (the child is left running). */
int tu_wait(pid_t pid, int timeout_ms);

/* tu_count_files: the entries of dir, dot files aside; -1 when it cannot be
 * opened. */
int tu_count_files(const char *dir);

/* tu_sleep_ms: sleep on the real clock. */
void tu_sleep_ms(int ms);

/* tu_count: a single integer from SQL run on a fresh connection. */
int64_t tu_count(const char *db_path, const char *sql);

/* tu_countf: tu_count with the SQL built printf-style. */
int64_t tu_countf(const char *db_path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* tu_integrity_ok: PRAGMA integrity_check on a fresh read-only connection
 * says "ok", or the test fails. */
void tu_integrity_ok(const char *db_path);

/* tu_kill_spawned: SIGKILL and reap every child tu_spawn started that still
 * runs (tu_teardown does it too; call it first to free a mount). */
void tu_kill_spawned(void);

/* tu_count_in: how many times needle occurs in the file at path (0: none,
 * or no file). */
int tu_count_in(const char *path, const char *needle);

/* tu_wait_log: until the log at path holds needle at least n times; fails
 * the test after timeout_ms, showing the log. */
void tu_wait_log(const char *path, const char *needle, int n, int timeout_ms);

/* ---- tools/powercut: a disk whose writes fail on command -------------------- */

/* One powercut mount: BACK ("the disk") shown at MNT, commands on CTL. */
struct tu_powercut {
	char back[300];		/* dir/disk */
	char mnt[300];		/* dir/mnt */
	char ctl[300];		/* dir/pc.sock */
	char log[300];		/* dir/powercut.log: the daemon's lines */
	pid_t pid;		/* the daemon in the foreground; 0: none */
};

/* tu_powercut_bin: the daemon ($POWERCUT, else build/powercut). */
const char *tu_powercut_bin(void);

/*
 * tu_powercut_mount: make dir/disk and dir/mnt and mount the one on the
 * other (extra: more daemon options, NULL-terminated, may be NULL).  Skips
 * the test (cmocka skip) without root, /dev/fuse or the daemon; fails it
 * when the daemon does not mount.  [out] *pc.
 */
void tu_powercut_mount(struct tu_powercut *pc, const char *dir, const char *const *extra);

/* tu_powercut_ctl: one control command ("eio on", "stats"); fails the test
 * unless the daemon answers "ok".  [out] reply (may be NULL) the answer. */
void tu_powercut_ctl(const struct tu_powercut *pc, const char *cmd, char *reply, size_t size);

/* tu_powercut_unmount: unmount and wait for the daemon (SIGKILL after 5 s);
 * prints its "faults injected" line to stderr.  No-op when not mounted. */
void tu_powercut_unmount(struct tu_powercut *pc);

#endif
