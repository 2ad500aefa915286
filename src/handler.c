/*
 * handler.c: the handler interface (handler.h): contexts, results, payload
 * fields.  Nothing here knows the worker; the worker fills a context per
 * handler thread and reads the results.
 */
#define _GNU_SOURCE
#include "handler.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================== contexts ======================================= */

struct db *handler_db(struct handler_ctx *ctx)
{
	if (!ctx->db && db_open(ctx->db_path, 0, DB_SYNC_NORMAL, &ctx->db) != SD_OK)
		return NULL;
	return ctx->db;
}

void handler_ctx_close(struct handler_ctx *ctx)
{
	db_close(ctx->db);
	ctx->db = NULL;
}

/* A context of its own, with the copy of db_path it points to. */
struct standalone_ctx {
	struct handler_ctx ctx;		/* first: the pointer handed out */
	char db_path[];
};

struct handler_ctx *handler_ctx_new(const char *db_path, void *app)
{
	size_t n = strlen(db_path) + 1;
	struct standalone_ctx *sc = calloc(1, sizeof *sc + n);

	if (!sc) {
		err_set(SD_NOMEM, "out of memory");
		return NULL;
	}
	memcpy(sc->db_path, db_path, n);
	sc->ctx.db_path = sc->db_path;
	sc->ctx.worker = "standalone";
	sc->ctx.app = app;
	return &sc->ctx;
}

void handler_ctx_free(struct handler_ctx *ctx)
{
	if (!ctx)
		return;
	handler_ctx_close(ctx);
	free((struct standalone_ctx *)ctx);
}

const struct handler *handler_find(const struct handler *table, const char *kind)
{
	for (; table && table->kind; table++)
		if (strcmp(table->kind, kind) == 0)
			return table;
	return NULL;
}

void handler_absorbed(struct handler_ctx *ctx, enum metrics_technique t)
{
	metrics_duplicate(ctx->metrics, t);
}

/* ======================== results and payload fields ===================== */

enum job_outcome job_failf(struct job_result *res, int permanent, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(res->error, sizeof res->error, fmt, ap);
	va_end(ap);
	return permanent ? JOB_FAIL_PERMANENT : JOB_FAIL;
}

enum job_outcome job_retry_io(struct job_result *res, const struct job *job, const char *fmt,
			      ...)
{
	struct kind_policy p = *queue_policy(job->kind);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(res->error, sizeof res->error, fmt, ap);
	va_end(ap);
	if (p.backoff_cap_ms > HANDLER_IO_RETRY_CAP_MS)
		p.backoff_cap_ms = HANDLER_IO_RETRY_CAP_MS;
	if (p.backoff_base_ms > p.backoff_cap_ms)
		p.backoff_base_ms = p.backoff_cap_ms;
	/* deliveries, not attempts: every try is a claim, none a failure */
	res->delay_ms = queue_backoff_ms(&p, job->deliveries);
	res->io = 1;
	return JOB_RETRY_LATER;
}

static enum sd_result job_arg(const struct job *job, const char *key, json_t **root,
			      json_t **v)
{
	json_error_t e;

	*root = json_loads(job->payload, JSON_REJECT_DUPLICATES, &e);
	if (!*root)
		return err_set(SD_INVALID, "payload is not valid JSON: %s", e.text);
	*v = json_object_get(*root, key);
	if (!*v) {
		json_decref(*root);
		return err_set(SD_NOT_FOUND, "payload has no \"%s\"", key);
	}
	return SD_OK;
}

enum sd_result job_arg_int(const struct job *job, const char *key, int64_t *out)
{
	json_t *root, *v;
	enum sd_result r = job_arg(job, key, &root, &v);

	if (r != SD_OK)
		return r;
	if (!json_is_integer(v))
		r = err_set(SD_INVALID, "payload field \"%s\" must be an integer", key);
	else
		*out = (int64_t)json_integer_value(v);
	json_decref(root);
	return r;
}

enum sd_result job_arg_str(const struct job *job, const char *key, char *buf, size_t size)
{
	json_t *root, *v;
	enum sd_result r = job_arg(job, key, &root, &v);

	if (r != SD_OK)
		return r;
	if (!json_is_string(v) || json_string_length(v) >= size)
		r = err_set(SD_INVALID, "payload field \"%s\" must be a string of at most %zu "
			    "bytes", key, size - 1);
	else
		memcpy(buf, json_string_value(v), json_string_length(v) + 1);
	json_decref(root);
	return r;
}

const char *handler_json_lib_version(void)
{
	return jansson_version_str();
}
