/*
 * peer.c: the peer benchmarks' command line, connection, clock and report
 * (peer.h).
 */
#define _GNU_SOURCE
#include "peer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *me = "peer";

_Noreturn void peer_die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", me);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

int64_t peer_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void usage(void)
{
	fprintf(stderr, "usage: %s --port P [--pid PID] --jobs N --batch B [--enqueue-batch E] "
			"[--json]\n"
			"       %s --free-port\n", me, me);
	exit(2);
}

static long long num(const char *s, long long min, long long max, const char *what)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || end == s || v < min || v > max) {
		fprintf(stderr, "%s: %s must be a whole number in [%lld, %lld]\n", me, what, min, max);
		exit(2);
	}
	return v;
}

static struct sockaddr_in loopback(int port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* Bind port 0 on loopback and print the port the kernel chose; the server
 * started next on it may lose a race for it, which peers.sh sees and retries. */
static void free_port(void)
{
	struct sockaddr_in a = loopback(0);
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0)
		peer_die("cannot find a free port: %s", strerror(errno));
	printf("%d\n", ntohs(a.sin_port));
	close(fd);
	exit(0);
}

void peer_args(int argc, char **argv, const char *name, struct peer_opts *o)
{
	int i;

	me = name;
	memset(o, 0, sizeof *o);
	o->jobs = o->batch = o->ebatch = -1;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--free-port") == 0)
			free_port();
		else if (strcmp(a, "--json") == 0)
			o->json = 1;
		else if (i + 1 < argc && strcmp(a, "--port") == 0)
			o->port = (int)num(argv[++i], 1, 65535, "--port");
		else if (i + 1 < argc && strcmp(a, "--pid") == 0)
			o->pid = (long)num(argv[++i], 1, 1L << 30, "--pid");
		else if (i + 1 < argc && strcmp(a, "--jobs") == 0)
			o->jobs = num(argv[++i], 1, 100000000, "--jobs");
		else if (i + 1 < argc && strcmp(a, "--batch") == 0)
			o->batch = num(argv[++i], 1, 10000, "--batch");
		else if (i + 1 < argc && strcmp(a, "--enqueue-batch") == 0)
			o->ebatch = num(argv[++i], 1, 10000, "--enqueue-batch");
		else
			usage();
	}
	if (o->port == 0 || o->jobs < 0 || o->batch < 0)
		usage();
	if (o->ebatch < 0)
		o->ebatch = o->batch;
}

int peer_connect(int port, int wait_ms)
{
	struct sockaddr_in a = loopback(port);
	int64_t until = peer_now_us() + (int64_t)wait_ms * 1000;
	int fd, one = 1;

	for (;;) {
		if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
			peer_die("socket: %s", strerror(errno));
		if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
			break;
		close(fd);
		if (errno != ECONNREFUSED || peer_now_us() > until)
			peer_die("cannot connect to 127.0.0.1:%d: %s", port, strerror(errno));
		usleep(20000);
	}
	/* requests are whole writes: no Nagle delay on them */
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
		peer_die("TCP_NODELAY: %s", strerror(errno));
	return fd;
}

long long peer_lifecycle(const struct peer_phases *ph, void *conn, const struct peer_opts *o,
			 int64_t *enqueue_us, int64_t *claim_ack_us)
{
	int64_t t0 = peer_now_us();
	long long n;

	ph->enqueue(conn, o);
	*enqueue_us = peer_now_us() - t0;
	t0 = peer_now_us();
	n = ph->claim_ack(conn, o);
	*claim_ack_us = peer_now_us() - t0;
	return n;
}

void peer_report(const char *program, const char *sync, const struct peer_opts *o,
		 int64_t enqueue_us, int64_t claim_ack_us)
{
	double te = (double)enqueue_us / 1e6, tc = (double)claim_ack_us / 1e6;
	double n = (double)o->jobs;

	if (o->json)
		printf("{\"program\":\"%s\",\"jobs\":%lld,\"workers\":1,\"batch\":%lld,"
		       "\"enqueue_batch\":%lld,\"sync\":\"%s\",\"enqueue_s\":%.6f,"
		       "\"claim_ack_s\":%.6f,\"enqueue_jobs_per_s\":%.0f,"
		       "\"claim_ack_jobs_per_s\":%.0f,\"lifecycle_jobs_per_s\":%.0f}\n",
		       program, o->jobs, o->batch, o->ebatch, sync, te, tc, n / te, n / tc,
		       n / (te + tc));
	else
		printf("%s: %lld noop jobs, 1 consumer, batch %lld, enqueue batch %lld, %s\n"
		       "  enqueue     %10.0f jobs/s  (%.3f s)\n"
		       "  claim+ack   %10.0f jobs/s  (%.3f s)\n"
		       "  lifecycle   %10.0f jobs/s\n",
		       program, o->jobs, o->batch, o->ebatch, sync, n / te, te, n / tc, tc,
		       n / (te + tc));
}
