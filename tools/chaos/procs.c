/*
 * procs.c: the soak's child processes and the appliance's process tree.
 *
 * Every process the harness starts is its child; the harness is also a
 * child subreaper (chaos.c sets it), so the workers of a killed `stagedoor
 * run` become its children and are reaped here instead of lingering as
 * zombies in a container without an init.  The tree is read from /proc:
 * /proc/PID/task/TID/children for each thread (a supervisor may fork from
 * any thread) and /proc/PID/cmdline.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "chaos.h"

extern char **environ;

int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ======================== the dice ====================================== */

static uint64_t rng_state = 1;

void rng_seed(uint64_t seed)
{
	/* splitmix64: never 0, and nearby seeds differ at once */
	uint64_t z = seed + 0x9E3779B97F4A7C15ULL;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	rng_state = (z ^ (z >> 31)) | 1;
}

uint64_t rng_below(uint64_t n)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return n ? ((rng_state * 0x2545F4914F6CDD1DULL) >> 11) % n : 0;
}

/* ======================== spawn and wait ================================= */

pid_t proc_spawn(const char *const *argv, const char *out_path, const char *err_path,
		 const char *const *extra_env)
{
	posix_spawn_file_actions_t fa;
	char **envp = environ;
	size_t n_env = 0, n_extra = 0, i;
	pid_t pid = -1;
	int rc;

	if (extra_env) {
		while (environ[n_env])
			n_env++;
		while (extra_env[n_extra])
			n_extra++;
		envp = calloc(n_env + n_extra + 1, sizeof *envp);
		if (!envp) {
			fprintf(stderr, "chaos: out of memory\n");
			return -1;
		}
		for (i = 0; i < n_extra; i++)
			envp[i] = (char *)extra_env[i];
		for (i = 0; i < n_env; i++)
			envp[n_extra + i] = environ[i];	/* ours first: getenv finds them */
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, out_path ? out_path : "/dev/null",
					 O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (err_path && out_path && strcmp(err_path, out_path) == 0)
		posix_spawn_file_actions_adddup2(&fa, 1, 2);
	else
		posix_spawn_file_actions_addopen(&fa, 2, err_path ? err_path : "/dev/null",
						 O_WRONLY | O_CREAT | O_APPEND, 0644);
	rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (envp != environ)
		free(envp);
	if (rc != 0) {
		fprintf(stderr, "chaos: cannot run %s: %s\n", argv[0], strerror(rc));
		return -1;
	}
	return pid;
}

static int status_code(int status)
{
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int proc_wait(pid_t pid, long timeout_ms)
{
	int64_t until = now_ms() + timeout_ms;
	int status;

	for (;;) {
		pid_t r = waitpid(pid, &status, timeout_ms < 0 ? 0 : WNOHANG);

		if (r == pid)
			return status_code(status);
		if (r < 0 && errno != EINTR)
			return -1;
		if (timeout_ms >= 0 && now_ms() >= until)
			return -2;
		if (timeout_ms >= 0)
			sleep_ms(5);
	}
}

int proc_run(const char *const *argv, char *out, size_t size, int with_stderr)
{
	char path[CHAOS_PATH_MAX];
	const char *tmp = getenv("TMPDIR");
	int fd = -1, rc;
	pid_t pid;

	if (out) {
		/* a file, not a pipe: nothing to pump while we wait */
		snprintf(path, sizeof path, "%s/chaos-out-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		fd = mkstemp(path);
		if (fd < 0) {
			fprintf(stderr, "chaos: mkstemp %s: %s\n", path, strerror(errno));
			return -1;
		}
		pid = proc_spawn(argv, path, with_stderr ? path : NULL, NULL);
		unlink(path);
	} else {
		pid = proc_spawn(argv, NULL, NULL, NULL);
	}
	if (pid < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rc = proc_wait(pid, -1);
	if (out) {
		ssize_t n = pread(fd, out, size - 1, 0);

		out[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	return rc;
}

/* ======================== the tree ====================================== */

int proc_children(pid_t pid, pid_t *out, int max)
{
	char path[64];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return 0;
	while ((d = readdir(dir)) && n < max) {
		char cpath[600];
		FILE *f;
		long c;

		if (d->d_name[0] == '.')
			continue;
		snprintf(cpath, sizeof cpath, "%s/%s/children", path, d->d_name);
		f = fopen(cpath, "r");
		if (!f)
			continue;
		while (n < max && fscanf(f, "%ld", &c) == 1)
			out[n++] = (pid_t)c;
		fclose(f);
	}
	closedir(dir);
	return n;
}

int proc_descendants(pid_t pid, pid_t *out, int max)
{
	int n = proc_children(pid, out, max), i;

	/* breadth first: out grows behind the reader */
	for (i = 0; i < n && n < max; i++)
		n += proc_children(out[i], out + n, max - n);
	return n;
}

int proc_cmdline_has(pid_t pid, const char *word)
{
	char path[64], buf[4096];
	size_t len, i;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	len = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[len] = '\0';
	for (i = 0; i < len; i += strlen(buf + i) + 1)
		if (strstr(buf + i, word))
			return 1;
	return 0;
}

pid_t proc_parent(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t len;
	int ppid;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	len = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[len] = '\0';
	/* "pid (comm) S ppid ...": comm may hold spaces, so after the last ')' */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return -1;
	return (pid_t)ppid;
}

int proc_alive(pid_t pid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t len;

	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	len = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[len] = '\0';
	/* "pid (comm) S ...": the state follows the last ')' */
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

int proc_free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 0;

	if (fd < 0)
		return 0;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}
