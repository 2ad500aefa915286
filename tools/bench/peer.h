/*
 * peer.h: what the peer benchmarks (peer_redis.c, peer_beanstalk.c) share:
 * their command line, a loopback TCP connection, the clock and the report.
 *
 * Each peer runs the lifecycle of `stagedoor-bench queue` against a server
 * that tools/bench/peers.sh started on 127.0.0.1: N noop jobs enqueued, E
 * per round trip, then claimed (up to B at a time) and acknowledged by one
 * consumer until none is left.  The report is bench queue's --json line,
 * field for field where the field means the same thing.
 *
 *   PEER --port P [--pid PID] --jobs N --batch B [--enqueue-batch E] [--json]
 *   PEER --free-port        a loopback port free right now, for the server
 *
 * With --pid the peer first asks the server for its process id and stops
 * unless it is PID: the figures are from the server peers.sh started.
 */
#ifndef SD_PEER_H
#define SD_PEER_H

#include <stdint.h>

struct peer_opts {
	long long jobs;			/* N */
	long long batch;		/* B: most jobs one claim takes */
	long long ebatch;		/* E: jobs per enqueue round trip (default B) */
	int port;
	long pid;			/* the server's, or 0: not checked */
	int json;
};

/* peer_args: parse the command line into o, or exit 2 with the usage.
 * --free-port prints a port and exits 0. */
void peer_args(int argc, char **argv, const char *me, struct peer_opts *o);

/* peer_die: print "ME: message" on stderr and exit 1. */
_Noreturn void peer_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* peer_now_us: CLOCK_MONOTONIC in microseconds. */
int64_t peer_now_us(void);

/* peer_connect: a TCP connection to 127.0.0.1:port with TCP_NODELAY,
 * retried for up to wait_ms while the server is starting; dies on failure. */
int peer_connect(int port, int wait_ms);

/* The two timed phases of a peer on its connection conn: enqueue every
 * job; claim and acknowledge until none is left, returning how many were
 * acknowledged. */
struct peer_phases {
	void (*enqueue)(void *conn, const struct peer_opts *o);
	long long (*claim_ack)(void *conn, const struct peer_opts *o);
};

/* peer_lifecycle: run both phases, timing each ([out] microseconds);
 * returns what claim_ack returned. */
long long peer_lifecycle(const struct peer_phases *ph, void *conn, const struct peer_opts *o,
			 int64_t *enqueue_us, int64_t *claim_ack_us);

/* peer_report: the figures of one run (microseconds in), as text or as one
 * JSON line.  program and sync name the peer and its durability setting. */
void peer_report(const char *program, const char *sync, const struct peer_opts *o,
		 int64_t enqueue_us, int64_t claim_ack_us);

#endif
