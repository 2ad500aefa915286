/*
 * peer_redis.c: the queue benchmark's lifecycle against a Redis stream with
 * a consumer group, through hiredis on one connection (peer.h).
 *
 *   setup      INFO server (its process_id: the server peers.sh started);
 *              DEL noop; XGROUP CREATE noop g $ MKSTREAM
 *   enqueue    XADD noop * kind noop payload {}, E commands pipelined, then
 *              their E replies (E = 1: one call and its reply per job)
 *   claim+ack  each round trip, pipelined: XACK noop g ID... and XDEL noop
 *              ID... for the previous claim, then XREADGROUP GROUP g c COUNT
 *              B STREAMS noop >.  The round trip whose read comes back empty
 *              ends the run.  XDEL as well as XACK: an acknowledged entry
 *              leaves the stream, as an acked job leaves the box's.
 *   check      every job acknowledged once; XLEN and the group's pending
 *              count are 0.
 */
#define _GNU_SOURCE
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer.h"

#define ID_MAX 64			/* "<ms>-<seq>" and its NUL */

static redisReply *reply(redisContext *c, int type, const char *what)
{
	void *r = NULL;

	if (redisGetReply(c, &r) != REDIS_OK)
		peer_die("%s: %s", what, c->errstr);
	if (((redisReply *)r)->type == REDIS_REPLY_ERROR)
		peer_die("%s: %s", what, ((redisReply *)r)->str);
	if (type >= 0 && ((redisReply *)r)->type != type)
		peer_die("%s: reply of type %d", what, ((redisReply *)r)->type);
	return r;
}

static void enqueue_all(void *conn, const struct peer_opts *o)
{
	redisContext *c = conn;
	long long n, k;

	for (n = 0; n < o->jobs; n += o->ebatch) {
		for (k = n; k < n + o->ebatch && k < o->jobs; k++)
			if (redisAppendCommand(c, "XADD noop * kind noop payload {}") != REDIS_OK)
				peer_die("XADD: %s", c->errstr);
		for (k = n; k < n + o->ebatch && k < o->jobs; k++)
			freeReplyObject(reply(c, REDIS_REPLY_STRING, "XADD"));
	}
}

/* The ids of one XREADGROUP reply ([[stream, [[id, fields], ...]]] or nil)
 * into ids[]; returns how many. */
static int claimed_ids(redisReply *r, char (*ids)[ID_MAX], long long batch)
{
	redisReply *entries;
	size_t i;

	if (r->type == REDIS_REPLY_NIL)
		return 0;
	if (r->type != REDIS_REPLY_ARRAY || r->elements != 1 || r->element[0]->elements != 2)
		peer_die("XREADGROUP: unexpected reply");
	entries = r->element[0]->element[1];
	if ((long long)entries->elements > batch)
		peer_die("XREADGROUP: %zu entries for COUNT %lld", entries->elements, batch);
	for (i = 0; i < entries->elements; i++) {
		redisReply *id = entries->element[i]->element[0];

		if (id->type != REDIS_REPLY_STRING || id->len >= ID_MAX)
			peer_die("XREADGROUP: bad entry id");
		memcpy(ids[i], id->str, id->len + 1);
	}
	return (int)entries->elements;
}

/* Until a read comes back empty: ack and delete the previous claim, read up
 * to B more, in one round trip.  Returns the jobs acknowledged. */
static long long claim_ack(void *conn, const struct peer_opts *o)
{
	redisContext *c = conn;
	char (*ids)[ID_MAX] = calloc((size_t)o->batch, sizeof *ids), count[24];
	const char **argv = calloc((size_t)o->batch + 3, sizeof *argv);
	const char *xread[] = { "XREADGROUP", "GROUP", "g", "c", "COUNT", count, "STREAMS", "noop",
			       ">" };
	long long acked = 0;
	int n_prev = 0, i;
	redisReply *r;

	if (!ids || !argv)
		peer_die("out of memory");
	snprintf(count, sizeof count, "%lld", o->batch);
	do {
		if (n_prev > 0) {
			argv[0] = "XACK";
			argv[1] = "noop";
			argv[2] = "g";
			for (i = 0; i < n_prev; i++)
				argv[3 + i] = ids[i];
			redisAppendCommandArgv(c, 3 + n_prev, argv, NULL);
			argv[1] = "XDEL";
			argv[2] = "noop";
			redisAppendCommandArgv(c, 2 + n_prev, argv + 1, NULL);
		}
		redisAppendCommandArgv(c, 9, xread, NULL);
		if (n_prev > 0) {
			r = reply(c, REDIS_REPLY_INTEGER, "XACK");
			if (r->integer != n_prev)
				peer_die("XACK: %lld of %d acknowledged", r->integer, n_prev);
			acked += r->integer;
			freeReplyObject(r);
			r = reply(c, REDIS_REPLY_INTEGER, "XDEL");
			if (r->integer != n_prev)
				peer_die("XDEL: %lld of %d deleted", r->integer, n_prev);
			freeReplyObject(r);
		}
		r = reply(c, -1, "XREADGROUP");
		n_prev = claimed_ids(r, ids, o->batch);
		freeReplyObject(r);
	} while (n_prev > 0);
	free(argv);
	free(ids);
	return acked;
}

static long long integer(redisContext *c, const char *cmd, int element)
{
	redisReply *r = redisCommand(c, cmd);
	long long v;

	if (!r)
		peer_die("%s: %s", cmd, c->errstr);
	if (element >= 0 && r->type == REDIS_REPLY_ARRAY && (size_t)element < r->elements)
		v = r->element[element]->integer;
	else if (r->type == REDIS_REPLY_INTEGER)
		v = r->integer;
	else
		peer_die("%s: unexpected reply", cmd);
	freeReplyObject(r);
	return v;
}

int main(int argc, char **argv)
{
	static const struct peer_phases ph = { enqueue_all, claim_ack };
	struct peer_opts o;
	redisContext *c;
	redisReply *r;
	int64_t t_enq, t_ca;
	long long acked, left, pending;

	peer_args(argc, argv, "peer_redis", &o);
	if (!(c = redisConnectFd(peer_connect(o.port, 5000))) || c->err)
		peer_die("hiredis: %s", c ? c->errstr : "out of memory");
	if (o.pid) {
		const char *p;

		if (!(r = redisCommand(c, "INFO server")) || r->type != REDIS_REPLY_STRING)
			peer_die("INFO: %s", r ? "unexpected reply" : c->errstr);
		if (!(p = strstr(r->str, "\nprocess_id:")) || strtol(p + 12, NULL, 10) != o.pid)
			peer_die("the server on port %d is not process %ld", o.port, o.pid);
		freeReplyObject(r);
	}
	if (!(r = redisCommand(c, "DEL noop")))
		peer_die("DEL: %s", c->errstr);
	freeReplyObject(r);
	if (!(r = redisCommand(c, "XGROUP CREATE noop g $ MKSTREAM")) || r->type != REDIS_REPLY_STATUS)
		peer_die("XGROUP CREATE: %s", r ? r->str : c->errstr);
	freeReplyObject(r);

	acked = peer_lifecycle(&ph, c, &o, &t_enq, &t_ca);
	left = integer(c, "XLEN noop", -1);
	pending = integer(c, "XPENDING noop g", 0);
	if (acked != o.jobs || left != 0 || pending != 0)
		peer_die("%lld of %lld jobs acknowledged, %lld left in the stream, %lld pending",
			 acked, o.jobs, left, pending);
	redisFree(c);
	peer_report("redis", "aof_everysec", &o, t_enq, t_ca);
	return 0;
}
