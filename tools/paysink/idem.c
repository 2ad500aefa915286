/*
 * idem.c: the idempotency table, one entry per (API key, Idempotency-Key).
 *
 *   key unknown                      -> entry IN FLIGHT with the SHA-256 of
 *                                       the endpoint and the parsed
 *                                       parameters; the request runs
 *   key in flight                    -> 409 idempotency_key_in_use
 *   key done, same endpoint and hash -> the stored status and body again,
 *                                       Idempotent-Replayed: true, and
 *                                       Original-Request: the first
 *                                       request's Request-Id
 *   key done, other endpoint         -> 400 idempotency_error
 *   key done, other parameters       -> 400 idempotency_error
 *   the request answered 5xx, or its
 *   parameters failed validation     -> the entry is forgotten: a retry runs
 *                                       afresh (Stripe keeps no result for a
 *                                       request that never started executing)
 *   key done 24 hours ago or more    -> forgotten, as Stripe prunes keys "at
 *   (business clock)                    least 24 hours old": the request runs
 *                                       afresh, checked anew
 *
 * Every function runs with ps_lock held.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paysink.h"

struct ps_idem {
	struct ps_idem *next;
	char *api_key;
	char *key;
	char *endpoint;			/* "POST /v1/refunds" */
	unsigned char sha[32];		/* of the endpoint and the parameters */
	int64_t created;		/* business clock */
	int done;
	int status;			/* once done */
	char *body;
	char request_id[40];
};

static struct ps_idem *table;

static struct ps_idem *idem_find(const char *api_key, const char *key)
{
	struct ps_idem *e;

	for (e = table; e; e = e->next)
		if (strcmp(e->key, key) == 0 && strcmp(e->api_key, api_key) == 0)
			return e;
	return NULL;
}

enum idem_look idem_begin(const char *api_key, const char *key, const char *endpoint,
			  const unsigned char sha[32], struct ps_idem **out)
{
	struct ps_idem *e = idem_find(api_key, key);

	if (e && e->done && ps_now() - e->created >= PS_IDEM_TTL) {
		idem_forget(e);
		ps_counts.idem_pruned++;
		e = NULL;
	}
	*out = e;
	if (e) {
		if (!e->done)
			return IDEM_IN_USE;
		if (strcmp(e->endpoint, endpoint) != 0)
			return IDEM_OTHER_ENDPOINT;
		if (memcmp(e->sha, sha, 32) != 0)
			return IDEM_OTHER_PARAMS;
		return IDEM_REPLAY;
	}
	e = calloc(1, sizeof *e);
	if (!e || !(e->api_key = strdup(api_key)) || !(e->key = strdup(key)) ||
	    !(e->endpoint = strdup(endpoint))) {
		if (e) {
			free(e->api_key);
			free(e->key);
		}
		free(e);
		*out = NULL;
		return IDEM_NEW;	/* out of memory: run without a key */
	}
	memcpy(e->sha, sha, 32);
	e->created = ps_now();
	e->next = table;
	table = e;
	*out = e;
	return IDEM_NEW;
}

void idem_finish(struct ps_idem *e, int status, const char *body, const char *request_id)
{
	if (!e)
		return;
	e->body = strdup(body ? body : "{}");
	if (!e->body) {
		idem_forget(e);
		return;
	}
	e->status = status;
	snprintf(e->request_id, sizeof e->request_id, "%s", request_id);
	e->done = 1;
}

static void idem_free(struct ps_idem *e)
{
	free(e->api_key);
	free(e->key);
	free(e->endpoint);
	free(e->body);
	free(e);
}

void idem_forget(struct ps_idem *gone)
{
	struct ps_idem **p;

	if (!gone)
		return;
	for (p = &table; *p; p = &(*p)->next) {
		if (*p == gone) {
			*p = gone->next;
			idem_free(gone);
			return;
		}
	}
}

int idem_status(const struct ps_idem *e)
{
	return e->status;
}

const char *idem_body(const struct ps_idem *e)
{
	return e->body;
}

const char *idem_request_id(const struct ps_idem *e)
{
	return e->request_id;
}

const char *idem_endpoint(const struct ps_idem *e)
{
	return e->endpoint;
}

long idem_stored(void)
{
	const struct ps_idem *e;
	long n = 0;

	for (e = table; e; e = e->next)
		n += e->done;
	return n;
}

void idem_free_all(void)
{
	while (table) {
		struct ps_idem *e = table;

		table = e->next;
		idem_free(e);
	}
}
