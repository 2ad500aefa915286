/*
 * chaos.h: what the crash soak's three files share.
 *
 *   chaos.c   options, set-up, the attack loop, drain, the figures
 *   procs.c   child processes: spawn, wait, the appliance's process tree
 *   verify.c  the independent verdict, from the database and the provider
 *
 * The harness is deliberately not built from src/: it links SQLite itself
 * and reads the tables read-only, so a bug in the appliance's own counters
 * cannot hide a bug in the appliance.
 */
#ifndef CHAOS_H
#define CHAOS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CHAOS_PATH_MAX 1024

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

/* ---- verify.c ---------------------------------------------------------- */

struct verdict {
	/* inputs */
	const char *db_path;		/* the appliance's database */
	const char *maildir;		/* the provider's maildir (holds new/) */
	const char *counts_path;	/* the provider's counts.json, or NULL */
	long expect_orders;		/* -1: do not check the number */

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

	/* the first broken check, "" when every one holds */
	char broken[512];
};

/* verify_run: every check; v->broken names the first that fails.
 * Returns 0 when all hold, 1 otherwise. */
int verify_run(struct verdict *v);

#endif
