/*
 * peer_beanstalk.c: the queue benchmark's lifecycle against beanstalkd,
 * in its text protocol over one plain TCP connection (peer.h).
 *
 *   setup      stats (its pid: the server peers.sh started); use noop;
 *              watch noop; ignore default
 *   enqueue    put 0 0 60 2 / {}  (priority 0, no delay, TTR 60 s), E
 *              commands in one write, then their E INSERTED replies
 *   claim+ack  each round trip: a delete for every job of the previous
 *              claim, then B x reserve-with-timeout 0, all in one write;
 *              beanstalkd answers pipelined commands in order, and a reserve
 *              with timeout 0 answers TIMED_OUT at once when nothing is
 *              ready, so up to B jobs come back per round trip.  The round
 *              trip that reserves nothing ends the run.
 *   check      every job deleted once; stats-tube noop shows none ready,
 *              reserved, delayed or buried.
 *
 * beanstalkd has no batch reserve: B reserves pipelined are its nearest
 * equivalent to a claim of up to B.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peer.h"

#define PUT "put 0 0 60 2\r\n{}\r\n"
#define RESERVE "reserve-with-timeout 0\r\n"

/* One connection: what was read and not yet parsed, and the next request. */
struct conn {
	int fd;
	char in[1 << 16];
	size_t lo, hi;			/* in[lo..hi) unparsed */
	char *out;
	size_t n_out, cap_out;
};

static void conn_send(struct conn *c)
{
	size_t off = 0;
	ssize_t w;

	while (off < c->n_out) {
		w = write(c->fd, c->out + off, c->n_out - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			peer_die("write: %s", w < 0 ? strerror(errno) : "closed");
		off += (size_t)w;
	}
	c->n_out = 0;
}

static void conn_add(struct conn *c, const char *s, size_t n)
{
	if (c->n_out + n > c->cap_out)
		peer_die("request buffer full");
	memcpy(c->out + c->n_out, s, n);
	c->n_out += n;
}

static void conn_fill(struct conn *c)
{
	ssize_t r;

	if (c->lo > 0) {
		memmove(c->in, c->in + c->lo, c->hi - c->lo);
		c->hi -= c->lo;
		c->lo = 0;
	}
	if (c->hi == sizeof c->in)
		peer_die("reply line too long");
	do
		r = read(c->fd, c->in + c->hi, sizeof c->in - c->hi);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		peer_die("read: %s", r < 0 ? strerror(errno) : "server closed the connection");
	c->hi += (size_t)r;
}

/* The next reply line, without its CRLF, NUL-terminated in place. */
static char *conn_line(struct conn *c)
{
	char *s, *e;

	for (;;) {
		s = c->in + c->lo;
		e = memmem(s, c->hi - c->lo, "\r\n", 2);
		if (e) {
			*e = '\0';
			c->lo = (size_t)(e + 2 - c->in);
			return s;
		}
		conn_fill(c);
	}
}

/* Skip n bytes of a job body and the CRLF after it. */
static void conn_skip(struct conn *c, size_t n)
{
	n += 2;
	while (c->hi - c->lo < n) {
		n -= c->hi - c->lo;
		c->lo = c->hi;
		conn_fill(c);
	}
	c->lo += n;
}

static void expect(struct conn *c, const char *prefix, const char *what)
{
	const char *l = conn_line(c);

	if (strncmp(l, prefix, strlen(prefix)) != 0)
		peer_die("%s: expected %s, got '%s'", what, prefix, l);
}

static void command(struct conn *c, const char *cmd, const char *reply)
{
	conn_add(c, cmd, strlen(cmd));
	conn_send(c);
	expect(c, reply, cmd);
}

static void enqueue_all(void *conn, const struct peer_opts *o)
{
	struct conn *c = conn;
	long long n, k;

	for (n = 0; n < o->jobs; n += o->ebatch) {
		for (k = n; k < n + o->ebatch && k < o->jobs; k++)
			conn_add(c, PUT, sizeof PUT - 1);
		conn_send(c);
		for (k = n; k < n + o->ebatch && k < o->jobs; k++)
			expect(c, "INSERTED ", "put");
	}
}

/* Until a round trip reserves nothing: delete the previous claim's jobs,
 * reserve up to B.  Returns the jobs deleted. */
static long long claim_ack(void *conn, const struct peer_opts *o)
{
	struct conn *c = conn;
	unsigned long long *ids = calloc((size_t)o->batch, sizeof *ids), id;
	unsigned long bytes;
	long long deleted = 0, i;
	int n_prev = 0, got;
	char cmd[64];

	if (!ids)
		peer_die("out of memory");
	do {
		for (i = 0; i < n_prev; i++)
			conn_add(c, cmd, (size_t)snprintf(cmd, sizeof cmd, "delete %llu\r\n", ids[i]));
		for (i = 0; i < o->batch; i++)
			conn_add(c, RESERVE, sizeof RESERVE - 1);
		conn_send(c);
		for (i = 0; i < n_prev; i++)
			expect(c, "DELETED", "delete");
		deleted += n_prev;
		for (i = 0, got = 0; i < o->batch; i++) {
			const char *l = conn_line(c);

			if (sscanf(l, "RESERVED %llu %lu", &id, &bytes) == 2) {
				conn_skip(c, bytes);
				ids[got++] = id;
			} else if (strcmp(l, "TIMED_OUT") != 0) {
				peer_die("reserve: '%s'", l);
			}
		}
		n_prev = got;
	} while (got > 0);
	free(ids);
	return deleted;
}

/* A stats command's YAML answer, NUL-terminated in the read buffer (valid
 * until the next read). */
static const char *stats(struct conn *c, const char *cmd)
{
	unsigned long bytes;
	char *yaml;

	conn_add(c, cmd, strlen(cmd));
	conn_send(c);
	if (sscanf(conn_line(c), "OK %lu", &bytes) != 1 || bytes + 3 > sizeof c->in)
		peer_die("%s: no OK", cmd);
	while (c->hi - c->lo < bytes + 2)
		conn_fill(c);
	yaml = c->in + c->lo;
	yaml[bytes] = '\0';
	c->lo += bytes + 2;
	return yaml;
}

/* The number after "\nKEY: " in a stats answer. */
static long long stat_value(const char *yaml, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof k, "\n%s: ", key);
	if (!(p = strstr(yaml, k)))
		peer_die("stats: no %s", key);
	return strtoll(p + strlen(k), NULL, 10);
}

static void check_empty(struct conn *c, const struct peer_opts *o, long long deleted)
{
	static const char *const states[] = { "urgent", "ready", "reserved", "delayed", "buried" };
	char key[64];
	const char *yaml;
	size_t i;

	if (deleted != o->jobs)
		peer_die("%lld of %lld jobs deleted", deleted, o->jobs);
	yaml = stats(c, "stats-tube noop\r\n");
	for (i = 0; i < sizeof states / sizeof *states; i++) {
		snprintf(key, sizeof key, "current-jobs-%s", states[i]);
		if (stat_value(yaml, key) != 0)
			peer_die("%lld jobs %s after the run", stat_value(yaml, key), states[i]);
	}
}

int main(int argc, char **argv)
{
	static const struct peer_phases ph = { enqueue_all, claim_ack };
	struct peer_opts o;
	struct conn *c;
	int64_t t_enq, t_ca;
	long long deleted;

	peer_args(argc, argv, "peer_beanstalk", &o);
	if (!(c = calloc(1, sizeof *c)))
		peer_die("out of memory");
	c->cap_out = (size_t)(o.ebatch > o.batch ? o.ebatch : o.batch) * 64 + 64;
	if (!(c->out = malloc(c->cap_out)))
		peer_die("out of memory");
	c->fd = peer_connect(o.port, 5000);
	if (o.pid && stat_value(stats(c, "stats\r\n"), "pid") != o.pid)
		peer_die("the server on port %d is not process %ld", o.port, o.pid);
	command(c, "use noop\r\n", "USING noop");
	command(c, "watch noop\r\n", "WATCHING 2");
	command(c, "ignore default\r\n", "WATCHING 1");

	deleted = peer_lifecycle(&ph, c, &o, &t_enq, &t_ca);
	check_empty(c, &o, deleted);
	close(c->fd);
	free(c->out);
	free(c);
	peer_report("beanstalkd", "binlog_fsync_50ms", &o, t_enq, t_ca);
	return 0;
}
