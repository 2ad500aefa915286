/*
 * bench_child.h: the benchmarks' child processes (a provider, the box's own
 * processes): started with their output in a log, stopped, and the
 * provider on this machine (tools/paysink) started on a loopback port.
 */
#ifndef SD_BENCH_CHILD_H
#define SD_BENCH_CHILD_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "result.h"

#define BENCH_CHILD_START_MS 10000	/* the longest wait for a child to start */

struct bench_child {
	pid_t pid;
	const char *what;
	char log[PATH_MAX + 64];
};

/* bench_child_env: this process's environment without STAGEDOOR_*, and
 * extra (NULL-ended); the array is malloc'd, its strings are not. */
char **bench_child_env(char *const *extra);

/* bench_child_log_tail: the last line of a child's log, for a message */
void bench_child_log_tail(const char *log, char *out, size_t size);

/* bench_child_spawn: argv[0] with its output into c->log.  ready_fd >= 0:
 * the write end of a pipe handed to the child as fd 3. */
enum sd_result bench_child_spawn(struct bench_child *c, const char *const *argv,
				 char *const *envp, int ready_fd);

/* bench_child_stop: SIGTERM, then up to 10 s, then SIGKILL; accepts a child
 * never started */
void bench_child_stop(struct bench_child *c);

/*
 * bench_stagedoor_start: a box's process, argv (argv[0] its binary: this
 * tree's or an older release's), with this process's environment less its
 * STAGEDOOR_* and with env (NULL-ended, at most BENCH_STAGEDOOR_ENV_MAX
 * "STAGEDOOR_KEY=value" settings), its output into c->log (c->log and
 * c->what set by the caller); waits until it says it started, through
 * $STAGEDOOR_READY_FD as `stagedoor run` hears its children.
 */
#define BENCH_STAGEDOOR_ENV_MAX 16
enum sd_result bench_stagedoor_start(const char *const *argv, char *const *env,
				    struct bench_child *c);

/* bench_cpu_ms: the CPU time so far of process pid (all its threads, from
 * /proc), or with pid 0 of this process (getrusage); 0 when unknown */
double bench_cpu_ms(pid_t pid);

/* bench_free_port: a loopback port free now (0: none found) */
int bench_free_port(void);

/* bench_write_secret: text into a new file of mode 0600 at path */
enum sd_result bench_write_secret(const char *path, const char *text);

/*
 * bench_paysink_start: tools/paysink at bin on a loopback port, with API
 * key key, its record at record, its webhooks to hook_port (signed with
 * secret) and more options (NULL-ended, may be NULL); its log and port file
 * in dir, named by tag.  [out] *port once it listens.
 */
enum sd_result bench_paysink_start(const char *bin, const char *dir, const char *tag,
				   const char *record, int hook_port, const char *key,
				   const char *secret, const char *const *more,
				   struct bench_child *c, int *port);

#endif
