/*
 * sqs.c: the SQS listener (sqs.h): authentication, the request's trip
 * through the wire layer and the actions, and the waiting receives.
 *
 * A request, in order: the signature's parts (sigv4_parse), its time, the
 * access key's token (token_lookup_id: live, a worker's), the secret made
 * from the box's key and the token's id (sqs_cred_secret), the signature
 * (sigv4_verify); then the body (sqs_wire_parse), the action (sqs_action)
 * on a connection of the pool it needs, and the answer in the protocol the
 * request came in.  Every answer carries x-amzn-RequestId.
 *
 * Waiting receives: an action that answers "park until T" has its request
 * put on s->parked and its connection suspended (http.h).  One thread, the
 * waker, sleeps on the database's wake-ups (notify.h) or until the earliest
 * T, and resumes every parked request a commit may concern (all of them,
 * on a wake-up) or whose T came; the handler runs the receive again, with
 * the time the request first arrived, and parks it again when there is
 * still nothing and time is left.  A stop resumes all and parks no more.
 *
 * No wake-up is lost between a receive's look and its parking: the waker
 * counts the wake-ups it has seen (s->gen), a request notes the count
 * before it looks, and a request whose look a wake-up may have missed (the
 * count moved) looks again instead of parking.  Parking itself wakes the
 * waker only when it must look sooner: when nothing was parked (it then
 * waits for a park, not on the database, so a busy box's commits cost it
 * nothing) or when the new time comes before its next look.
 */
#define _GNU_SOURCE
#include "sqs.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cert.h"
#include "clock.h"
#include "code.h"
#include "db_pool.h"
#include "http.h"
#include "log.h"
#include "notify.h"
#include "sigv4.h"
#include "sqs_actions.h"
#include "sqs_cred.h"
#include "sqs_store.h"
#include "sqs_wire.h"
#include "token.h"

#define WAKER_NAP_MS 1000		/* the waker looks at the clock at least this often */
#define LOOKS_MAX 4			/* a receive's looks in a row before it parks anyway */
#define SIGNED_HEADERS_MAX 24

struct parked {
	void *conn;
	int64_t until;
};

struct sqs_server {
	struct http_server *http;
	struct db_pool *pool_queue, *pool_full;
	struct db_group *group;		/* the sends' group commit (NULL on PostgreSQL) */
	unsigned char key[CODE_KEY_LEN];
	pthread_mutex_t mu;		/* guards parked, n_parked, stopping, gen, next */
	pthread_cond_t idle;		/* the waker's while nothing is parked */
	struct parked parked[SQS_PARKED_MAX];
	int n_parked;
	int stopping;
	_Atomic uint64_t gen;		/* the wake-ups the waker has seen (changed under mu) */
	int64_t next;			/* the waker's next look (ms); 0: it waits for a park */
	pthread_t waker;
	int waker_running;
	struct notify *nt;
	struct db *wdb;			/* the waker's connection (PostgreSQL's LISTEN) */
	char *hosts[CERT_NAMES_MAX * 2 + 1];	/* a TLS listener's names */
};

/* ======================== authentication ================================= */

static int listed(const struct sigv4_header *h, int n, const char *name)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(h[i].name, name) == 0)
			return 1;
	return 0;
}

/* headers: the signed headers' values from req, once each (a header named
 * twice would be signed as its values joined), for sigv4.h */
static int headers(const struct http_request *req, const struct sigv4_auth *a,
		   struct sigv4_header *h, char names[SIGNED_HEADERS_MAX][64])
{
	static const char *const always[] = { "authorization", "x-amz-date",
					      "x-amz-content-sha256" };
	const char *p = a->signed_headers;
	int n = 0;
	size_t i;

	while (*p && n < SIGNED_HEADERS_MAX) {
		size_t len = strcspn(p, ";");
		snprintf(names[n], 64, "%.*s", (int)(len < 63 ? len : 63), p);
		h[n].name = names[n];
		h[n].value = http_request_header(req, names[n]);
		if (h[n].value)
			n++;
		p += len + (p[len] == ';');
	}
	for (i = 0; i < sizeof always / sizeof always[0] && n < SIGNED_HEADERS_MAX; i++)
		if (http_request_header(req, always[i]) && !listed(h, n, always[i])) {
			h[n].name = always[i];
			h[n++].value = http_request_header(req, always[i]);
		}
	return n;
}

/* signed_by: the request's signature, checked with the credentials of
 * the worker token a names ([out] *g) */
static enum sd_result signed_by(struct sqs_server *s, struct db *db,
				const struct sigv4_request *rq, const struct sigv4_auth *a,
				struct token_grant *g)
{
	char id[TOKEN_ID_LEN + 1], secret[SQS_SECRET_LEN + 1];
	unsigned char key[32];
	enum sd_result r;
	int why = TOKEN_UNKNOWN;

	if (sqs_cred_token_id(a->key_id, id) != SD_OK)
		return sqs_fail(SD_DENIED, "InvalidClientTokenId",
				"The security token included in the request is invalid.");
	if ((r = token_lookup_id(db, id, clock_now_ms(), g, &why)) != SD_OK)
		return r;
	if (why == TOKEN_EXPIRED)
		return sqs_fail(SD_DENIED, "InvalidClientTokenId",
				"The security token included in the request is expired.");
	if (why != TOKEN_OK || g->role != TOKEN_WORKER)
		return sqs_fail(SD_DENIED, "InvalidClientTokenId",
				"The security token included in the request is invalid.");
	sqs_cred_secret(s->key, id, secret);
	sigv4_key(secret, SQS_SECRET_LEN, a->date, a->region, a->service, key);
	explicit_bzero(secret, sizeof secret);
	r = sigv4_verify(rq, a, key);
	explicit_bzero(key, sizeof key);
	if (r == SD_DENIED)
		return sqs_fail(SD_DENIED, "SignatureDoesNotMatch",
				"The request signature we calculated does not match the signature "
				"you provided. Check your AWS Secret Access Key and signing method.");
	if (r != SD_OK)
		return sqs_fail(SD_INVALID, "IncompleteSignature", "%s", err_msg());
	return SD_OK;
}

static enum sd_result authenticate(struct sqs_server *s, struct db *db,
				   const struct http_request *req, struct sigv4_auth *a,
				   struct token_grant *g)
{
	struct sigv4_header h[SIGNED_HEADERS_MAX];
	char names[SIGNED_HEADERS_MAX][64], when[32];
	struct sigv4_request rq = { req->method, req->path, req->query ? req->query : "", h, 0,
				    req->body, req->body_len };
	int64_t at, now = clock_now_ms();

	if (!req->authorization)
		return sqs_fail(SD_DENIED, "MissingAuthenticationToken",
				"Request is missing Authentication Token");
	if (sigv4_parse(req->authorization, a) != SD_OK)
		return sqs_fail(SD_INVALID, "IncompleteSignature", "%s", err_msg());
	if (strcmp(a->service, "sqs") != 0)
		return sqs_fail(SD_INVALID, "IncompleteSignature",
				"Credential should be scoped to correct service: 'sqs'.");
	rq.n_headers = (size_t)headers(req, a, h, names);
	if (sigv4_time(&rq, a, &at) != SD_OK)
		return sqs_fail(SD_INVALID, "IncompleteSignature", "%s", err_msg());
	if (at < now - SIGV4_SKEW_MS || at > now + SIGV4_SKEW_MS) {
		snprintf(when, sizeof when, "%s", http_request_header(req, "x-amz-date"));
		return sqs_fail(SD_DENIED, "SignatureDoesNotMatch",
				"Signature expired: %.20s is not within 15 minutes of the box's "
				"time.", when);
	}
	return signed_by(s, db, &rq, a, g);
}

/* ======================== answering ====================================== */

static void reply(struct http_response *res, struct sqs_reply *r, const char *rid)
{
	res->status = r->status;
	snprintf(res->content_type, sizeof res->content_type, "%s", r->content_type);
	res->body = r->body;
	res->body_len = r->len;
	r->body = NULL;
	snprintf(res->extra[0].name, sizeof res->extra[0].name, "x-amzn-RequestId");
	snprintf(res->extra[0].value, sizeof res->extra[0].value, "%s", rid);
	if (r->query_error[0]) {
		snprintf(res->extra[1].name, sizeof res->extra[1].name, "x-amzn-query-error");
		snprintf(res->extra[1].value, sizeof res->extra[1].value, "%s", r->query_error);
	}
	sqs_reply_free(r);
}

/* fail: the refusal or failure r as the protocol's error */
static void fail(enum sqs_proto proto, enum sd_result r, const char *rid,
		 struct http_response *res)
{
	const char *code = sqs_fault();
	struct sqs_reply out;

	if (!code) {
		code = r == SD_BUSY ? "ServiceUnavailable" : "InternalFailure";
		log_event(LOG_ERROR, "sqs request failed", "request_id=%s err=%s", rid, err_msg());
	}
	sqs_wire_error(proto, code, code[0] == 'I' && strcmp(code, "InternalFailure") == 0
					    ? "The request processing has failed because of an "
					      "unknown error." : err_msg(), rid, &out);
	reply(res, &out, rid);
}

enum { PARK_NO, PARK_OK, PARK_AGAIN };

/*
 * park: put the request aside until `until`: PARK_OK; PARK_AGAIN when a
 * wake-up came since its receive looked (gen0) and it should look again,
 * unless anyway (then it parks and the waker resumes it at once); PARK_NO
 * when it cannot wait.
 */
static int park(struct sqs_server *s, void *conn, int64_t until, uint64_t gen0, int anyway)
{
	int how = PARK_NO, idle = 0, sooner = 0;

	pthread_mutex_lock(&s->mu);
	if (s->stopping || s->n_parked >= SQS_PARKED_MAX) {
		how = PARK_NO;
	} else if (atomic_load(&s->gen) != gen0 && !anyway) {
		how = PARK_AGAIN;
	} else {
		s->parked[s->n_parked++] = (struct parked){ conn, until };
		how = PARK_OK;
		idle = s->next == 0;
		sooner = anyway || (!idle && until < s->next);
	}
	pthread_mutex_unlock(&s->mu);
	if (idle)
		pthread_cond_signal(&s->idle);
	if (sooner)
		notify_wake(s->nt);	/* a wake-up: every parked request looks again */
	return how;
}

/* run: the action on connections from the pools; [out] *result */
static enum sd_result run(struct sqs_server *s, struct sqs_call *c, const char *action,
			  json_t *params, json_t **result)
{
	enum sd_result r;

	if ((r = db_pool_get(s->pool_full, &c->db_full)) != SD_OK)
		return r;
	r = sqs_action(c, action, params, result);
	db_pool_put(s->pool_full, c->db_full);
	c->db_full = NULL;
	return r;
}

static void origin_of(struct sqs_server *s, const struct http_request *req, char *buf,
		      size_t size)
{
	const char *host = http_request_header(req, "Host");

	snprintf(buf, size, "%s://%s", http_tls(s->http) ? "https" : "http",
		 host && *host ? host : "localhost");
}

static void handle(void *arg, const struct http_request *req, struct http_response *res)
{
	struct sqs_server *s = arg;
	enum sqs_proto proto = http_request_header(req, "X-Amz-Target") ? SQS_JSON : SQS_QUERY;
	char rid[CODE_UUID_LEN + 1] = "00000000-0000-4000-8000-000000000000", origin[300];
	char action[SQS_ACTION_MAX + 1] = "";
	struct sqs_call c = { .started_at = req->arrived_ms };
	struct sigv4_auth a;
	struct token_grant g;
	struct sqs_reply out;
	json_t *params = NULL, *result = NULL;
	const char *code = NULL;
	enum sd_result r;
	int looks;

	code_uuid4(rid);
	sqs_fault_clear();
	if ((r = db_pool_get(s->pool_queue, &c.db)) != SD_OK ||
	    (r = authenticate(s, c.db, req, &a, &g)) != SD_OK)
		goto fail;
	if (sqs_wire_parse(req->content_type, http_request_header(req, "X-Amz-Target"), req->query,
			   req->body, req->body_len, &proto, action, &params, &code) != SD_OK) {
		r = sqs_fail(SD_INVALID, code ? code : "InvalidParameterValue", "%s", err_msg());
		goto fail;
	}
	origin_of(s, req, origin, sizeof origin);
	c.grant = &g;
	c.group = s->group;
	c.origin = origin;
	c.region = a.region;
	c.key_id = a.key_id;
	for (looks = 1;; looks++) {
		uint64_t gen0 = atomic_load(&s->gen);	/* before the receive looks */
		int how;

		if ((r = run(s, &c, action, params, &result)) != SD_OK)
			goto fail;
		if (result || !c.park_until)
			break;
		if ((how = park(s, req->conn, c.park_until, gen0, looks >= LOOKS_MAX)) == PARK_OK) {
			res->suspend = 1;
			goto out;
		}
		if (how == PARK_NO)
			break;
	}
	if (!result && !(result = json_object())) {	/* nothing, and no more waiting */
		r = err_set(SD_NOMEM, "out of memory");
		goto fail;
	}
	if ((r = sqs_wire_result(proto, action, result, rid, &out)) != SD_OK)
		goto fail;
	reply(res, &out, rid);
	goto out;
fail:
	fail(proto, r, rid, res);
out:
	db_pool_put(s->pool_queue, c.db);
	json_decref(params);
	json_decref(result);
}

/* ======================== the waker ====================================== */

/* resume: every parked request when all, else those whose time came */
static void resume(struct sqs_server *s, int all)
{
	int64_t now = clock_now_ms();
	int i;

	pthread_mutex_lock(&s->mu);
	if (all)
		atomic_fetch_add(&s->gen, 1);	/* a receive looking now may have missed it */
	for (i = s->n_parked - 1; i >= 0; i--)
		if (all || s->parked[i].until <= now) {
			http_resume(s->parked[i].conn);
			s->parked[i] = s->parked[--s->n_parked];
		}
	pthread_mutex_unlock(&s->mu);
}

static void *waker_main(void *arg)
{
	struct sqs_server *s = arg;

	for (;;) {
		int64_t now, next;
		int i, woke;

		pthread_mutex_lock(&s->mu);
		/* nothing parked: wait for a park, not on the database's commits
		 * (those that come meanwhile wake the first look after it) */
		while (!s->stopping && s->n_parked == 0) {
			s->next = 0;
			pthread_cond_wait(&s->idle, &s->mu);
		}
		if (s->stopping) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		now = clock_now_ms();
		next = now + WAKER_NAP_MS;
		for (i = 0; i < s->n_parked; i++)
			if (s->parked[i].until < next)
				next = s->parked[i].until;
		s->next = next > now ? next : now;
		pthread_mutex_unlock(&s->mu);
		woke = notify_wait(s->nt, next > now ? (int)(next - now) : 0);
		resume(s, woke);
	}
	return NULL;
}

/* ======================== start and stop ================================= */

static enum sd_result hosts_from_cert(struct sqs_server *s, const char *cert)
{
	struct cert_info ci;
	enum sd_result r;
	int i, n = 0;

	if (!cert || !*cert)
		return SD_OK;
	if ((r = cert_info_load(cert, &ci)) != SD_OK)
		return r;
	for (i = 0; i < ci.names.n_dns && n < CERT_NAMES_MAX * 2; i++)
		if (!(s->hosts[n++] = strdup(ci.names.dns[i])))
			return err_set(SD_NOMEM, "out of memory");
	for (i = 0; i < ci.names.n_ip && n < CERT_NAMES_MAX * 2; i++)
		if (!(s->hosts[n++] = strdup(ci.names.ip[i])))
			return err_set(SD_NOMEM, "out of memory");
	return SD_OK;
}

static enum sd_result key_load(struct sqs_server *s, const struct sqs_opts *o)
{
	char path[PATH_MAX];
	enum sd_result r;

	if ((r = code_key_path(o->db_path, o->state_dir, path, sizeof path)) != SD_OK ||
	    (r = code_key_load(path, s->key)) != SD_OK)
		return err_set(r, "%s (the SQS credentials are made from the box's ticket key: run "
			       "`stagedoor init` first)", err_msg());
	return SD_OK;
}

enum sd_result sqs_start(const struct sqs_opts *o, struct sqs_server **out)
{
	struct sqs_server *s = calloc(1, sizeof *s);
	struct http_opts ho = { 0 };
	enum sd_result r;

	*out = NULL;
	if (!s)
		return err_set(SD_NOMEM, "out of memory");
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->idle, NULL);
	if ((r = key_load(s, o)) != SD_OK ||
	    (r = db_pool_new(o->db_path, DB_SYNC_QUEUE, SQS_THREADS, &s->pool_queue)) != SD_OK ||
	    (r = db_pool_new(o->db_path, DB_SYNC_FULL, SQS_THREADS, &s->pool_full)) != SD_OK ||
	    (r = db_group_new(o->db_path, &s->group)) != SD_OK ||
	    (r = db_open(o->db_path, 0, DB_SYNC_QUEUE, &s->wdb)) != SD_OK ||
	    (r = notify_open(o->db_path, &s->nt)) != SD_OK ||
	    (r = hosts_from_cert(s, o->tls_cert)) != SD_OK)
		goto fail;
	db_notify_watch(s->wdb, s->nt);
	if (pthread_create(&s->waker, NULL, waker_main, s) != 0) {
		r = err_set(SD_IO, "sqs: cannot start the waker thread");
		goto fail;
	}
	s->waker_running = 1;
	ho.listen = o->listen;
	ho.tls_cert = o->tls_cert;
	ho.tls_key = o->tls_key;
	ho.hosts_extra = s->hosts[0] ? (const char *const *)s->hosts : NULL;
	ho.no_assets = 1;
	ho.threads = SQS_THREADS;
	ho.per_client_max = o->per_client_max > 0 ? (unsigned)o->per_client_max : 0;
	/* on loopback every client is this machine: one address for all of a
	 * developer's workers and their long polls */
	if (http_listen_is_loopback(o->listen) && ho.per_client_max < SQS_LOOPBACK_PER_CLIENT)
		ho.per_client_max = SQS_LOOPBACK_PER_CLIENT;
	ho.body_max = SQS_BODY_MAX;
	ho.suspend = 1;
	if ((r = http_start_opts(&ho, handle, s, &s->http)) != SD_OK)
		goto fail;
	*out = s;
	return SD_OK;
fail:
	sqs_stop(s);
	return r;
}

void sqs_stop(struct sqs_server *s)
{
	int i;

	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stopping = 1;
	pthread_cond_signal(&s->idle);
	pthread_mutex_unlock(&s->mu);
	if (s->waker_running) {
		notify_wake(s->nt);
		pthread_join(s->waker, NULL);
	}
	resume(s, 1);		/* each answers at once: no more parking */
	http_stop(s->http);
	notify_close(s->nt);
	db_close(s->wdb);
	db_pool_free(s->pool_queue);
	db_pool_free(s->pool_full);
	db_group_free(s->group);
	for (i = 0; s->hosts[i]; i++)
		free(s->hosts[i]);
	explicit_bzero(s->key, sizeof s->key);
	pthread_cond_destroy(&s->idle);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

int sqs_port(const struct sqs_server *s)
{
	return http_port(s->http);
}
