/*
 * bench_child.c: the benchmarks' child processes (bench_child.h).
 */
#define _GNU_SOURCE
#include "bench_child.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* the environment of a child: this one's without STAGEDOOR_*, and extra */
char **bench_child_env(char *const *extra)
{
	size_t n = 0, k = 0, i;
	char **env;

	while (environ[n])
		n++;
	for (i = 0; extra && extra[i]; i++)
		n++;
	if (!(env = calloc(n + 1, sizeof *env)))
		return NULL;
	for (i = 0; environ[i]; i++)
		if (strncmp(environ[i], "STAGEDOOR_", 10) != 0)
			env[k++] = environ[i];
	for (i = 0; extra && extra[i]; i++)
		env[k++] = extra[i];
	env[k] = NULL;
	return env;
}

/* the last line of a child's log, for a message */
void bench_child_log_tail(const char *log, char *out, size_t size)
{
	char line[512];
	FILE *f = fopen(log, "r");

	out[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof line, f))
		if (line[0] && line[0] != '\n')
			snprintf(out, size, "%.*s", (int)strcspn(line, "\n"), line);
	fclose(f);
}

/*
 * bs_spawn: argv[0] with its output into c->log.  ready_fd >= 0: the write
 * end of a pipe handed to the child as fd 3 (STAGEDOOR_READY_FD=3 is in
 * envp then).
 */
enum sd_result bench_child_spawn(struct bench_child *c, const char *const *argv, char *const *envp,
			       int ready_fd)
{
	posix_spawn_file_actions_t fa;
	int rc;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, c->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (ready_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, ready_fd, 3);
	rc = posix_spawn(&c->pid, argv[0], &fa, NULL, (char *const *)argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		c->pid = 0;
		return err_set(SD_IO, "cannot start %s (%s): %s", c->what, argv[0], strerror(rc));
	}
	return SD_OK;
}

/* bs_stop: SIGTERM, then up to 10 s, then SIGKILL; accepts a child never
 * started */
void bench_child_stop(struct bench_child *c)
{
	int st, i;

	if (c->pid <= 0)
		return;
	kill(c->pid, SIGTERM);
	for (i = 0; i < 1000; i++) {
		if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
			c->pid = 0;
			return;
		}
		usleep(10000);
	}
	kill(c->pid, SIGKILL);
	waitpid(c->pid, &st, 0);
	c->pid = 0;
}

enum sd_result bench_stagedoor_start(const char *const *argv, char *const *env,
				    struct bench_child *c)
{
	char *extra[BENCH_STAGEDOOR_ENV_MAX + 2], why[300] = "";
	struct pollfd pfd;
	char **all;
	enum sd_result r;
	int fds[2], w, n = 0;
	ssize_t got = 0;

	while (env && env[n] && n < BENCH_STAGEDOOR_ENV_MAX) {
		extra[n] = env[n];
		n++;
	}
	extra[n++] = "STAGEDOOR_READY_FD=3";
	extra[n] = NULL;
	if (pipe2(fds, O_CLOEXEC) != 0)
		return err_set(SD_IO, "pipe: %s", strerror(errno));
	/* the child's fd 3 comes from a dup2, which never lands on itself */
	if ((w = fcntl(fds[1], F_DUPFD_CLOEXEC, 10)) < 0) {
		close(fds[0]);
		close(fds[1]);
		return err_set(SD_IO, "fcntl: %s", strerror(errno));
	}
	close(fds[1]);
	if (!(all = bench_child_env(extra))) {
		close(fds[0]);
		close(w);
		return err_set(SD_NOMEM, "out of memory");
	}
	r = bench_child_spawn(c, argv, all, w);
	free(all);
	close(w);
	if (r != SD_OK) {
		close(fds[0]);
		return r;
	}
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	if (poll(&pfd, 1, BENCH_CHILD_START_MS) == 1)
		got = read(fds[0], why, sizeof why - 1);
	close(fds[0]);
	if (got == 1 && why[0] == '1')
		return SD_OK;
	if (got > 1 && why[0] == '!') {
		why[got] = '\0';
		return err_set(SD_IO, "stagedoor %s cannot start: %s", c->what, why + 1);
	}
	bench_child_log_tail(c->log, why, sizeof why);
	return err_set(SD_IO, "stagedoor %s (%s) did not say it started (make bin/stagedoor): %s",
		       c->what, argv[0], why);
}

double bench_cpu_ms(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	struct rusage ru;
	FILE *f;
	size_t n;

	if (pid == 0) {
		if (getrusage(RUSAGE_SELF, &ru) != 0)
			return 0;
		return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
	}
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (pid < 0 || !(f = fopen(path, "r")))
		return 0;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')))
		return 0;
	/* after the name: state (3), then fields 4..13, utime (14), stime (15) */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

/* a loopback port free now (the shop takes it a moment later; paysink
 * must know the shop's address before the shop knows paysink's) */
int bench_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t n = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 0;

	if (fd < 0)
		return 0;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &n) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

enum sd_result bench_write_secret(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t n = strlen(text);

	if (fd < 0 || write(fd, text, n) != (ssize_t)n) {
		if (fd >= 0)
			close(fd);
		return err_set(SD_IO, "cannot write %s: %s", path, strerror(errno));
	}
	close(fd);
	return SD_OK;
}


enum sd_result bench_paysink_start(const char *bin, const char *dir, const char *tag,
				   const char *record, int hook_port, const char *key,
				   const char *secret, const char *const *more,
				   struct bench_child *c, int *port)
{
	char port_file[PATH_MAX + 64], hook[96], why[300];
	const char *argv[32] = { bin, "--listen", "127.0.0.1:0", "--api-key", key, "--record",
				 record, "--port-file", port_file, "--webhook-url", hook,
				 "--webhook-secret", secret };
	char **env;
	enum sd_result r;
	int n = 13, waited;
	FILE *f;

	snprintf(port_file, sizeof port_file, "%s/paysink-%s.port", dir, tag);
	snprintf(hook, sizeof hook, "http://127.0.0.1:%d/stripe/webhook", hook_port);
	snprintf(c->log, sizeof c->log, "%s/paysink-%s.log", dir, tag);
	c->what = "paysink";
	for (; more && *more && n < 30; more++)
		argv[n++] = *more;
	argv[n] = NULL;
	*port = 0;
	if (!(env = bench_child_env(NULL)))
		return err_set(SD_NOMEM, "out of memory");
	r = bench_child_spawn(c, argv, env, -1);
	free(env);
	if (r != SD_OK)
		return r;
	for (waited = 0; waited < BENCH_CHILD_START_MS && !*port; waited += 5) {
		if ((f = fopen(port_file, "r"))) {
			if (fscanf(f, "%d", port) != 1)
				*port = 0;
			fclose(f);
		}
		if (!*port) {
			if (waitpid(c->pid, NULL, WNOHANG) == c->pid) {
				c->pid = 0;
				break;
			}
			usleep(5000);
		}
	}
	if (*port)
		return SD_OK;
	bench_child_log_tail(c->log, why, sizeof why);
	return err_set(SD_IO, "paysink did not start (%s; make build/paysink): %s", bin, why);
}
