/*
 * api.c: the intake API without HTTP (see api.h for the endpoints and the
 * invariants).
 *
 * Sections: responses; the connection pool and the
 * keys in flight; parsing (pure, fuzzed); the endpoints; the router.
 *
 * A request runs on the calling server thread with a connection borrowed
 * from the pool (FULL durability: orders are accepted on it) and returned
 * outside any transaction.  SQL here touches only api_keys, the table this
 * module owns; everything else goes through tickets and queue.
 */
#define _GNU_SOURCE
#include "api.h"

#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "backup_sched.h"
#include "clock.h"
#include "code.h"
#include "failpoint.h"
#include "log.h"
#include "mail.h"
#include "metrics.h"
#include "maint.h"
#include "queue.h"
#include "text.h"

struct api {
	char db_path[PATH_MAX];
	unsigned char key[CODE_KEY_LEN];	/* ticket.key, for scans */
	struct blob_store *blobs;		/* <state dir>/blobs: the PDFs */
	int64_t idem_ttl_ms;
	int (*workers_alive)(void *arg);
	void *arg;
	struct metrics *metrics;		/* the workers' counters; NULL: none */
	char state_dir[PATH_MAX];		/* as given; "": the database's folder */
	int64_t disk_warn_bytes;		/* 0: MAINT_DISK_WARN_BYTES_DEFAULT */
	char backup_dir[PATH_MAX];		/* "": no periodic backups */
	int64_t backup_interval_ms;

	pthread_mutex_t mu;			/* guards idle[] and inflight[] */
	struct db *idle[API_POOL_IDLE_MAX];	/* connections not in use */
	int n_idle;
	char **inflight;			/* client keys whose request runs now */
	int n_inflight, cap_inflight;
};

/* ======================== responses ====================================== */

static void res_set(struct api_response *res, int status, const char *type, char *body,
		    size_t len)
{
	free(res->body);
	res->status = status;
	snprintf(res->content_type, sizeof res->content_type, "%s", type);
	res->body = body;
	res->body_len = len;
}

/* A JSON string from text that may hold broken UTF-8 (a message that cut a
 * name short, a row stored before text was checked): what text_check would
 * refuse is shown escaped (text_escape), never a 500. */
static json_t *json_text(const char *s)
{
	json_t *j;
	char *e;

	if (text_utf8_valid(s) && (j = json_string(s)))
		return j;
	if (!(e = text_escape(s)))
		return NULL;
	j = json_string(e);
	free(e);
	return j;
}

static void res_fail(struct api_response *res, int status, const char *msg, const char *field);

/* json_take_text: o as compact JSON text (free()), NULL when o is NULL or
 * memory ran out; takes o. */
static char *json_take_text(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	return s;
}

/* res_json: status with o as the body; takes o. */
static void res_json(struct api_response *res, int status, json_t *o)
{
	char *s = json_take_text(o);

	if (!s) {
		if (status == 500) {	/* the fallback itself failed: a fixed body */
			static const char fixed[] = "{\"error\":\"internal error\"}";
			char *b = strdup(fixed);
			res_set(res, 500, "application/json", b, b ? strlen(b) : 0);
		}
		else
			res_fail(res, 500, "out of memory", NULL);
		return;
	}
	res_set(res, status, "application/json", s, strlen(s));
}

static void res_fail(struct api_response *res, int status, const char *msg, const char *field)
{
	json_t *o = json_object();

	json_object_set_new(o, "error", json_text(msg));
	if (field && *field)
		json_object_set_new(o, "field", json_text(field));
	res_json(res, status, o);
}

/* A failure of the database or the system: logged here once, with no buyer
 * data (the path only), answered without the detail. */
static void res_internal(struct api_response *res, const struct api_request *req,
			 enum sd_result r)
{
	char q[128];

	log_event(LOG_ERROR, "api request failed", "path=%s result=%s",
		  log_quote(q, sizeof q, req->path ? req->path : ""), sd_result_name(r));
	if (r == SD_BUSY || r == SD_IO) {
		res_fail(res, 503, r == SD_BUSY ? "the database is busy; try again"
						 : "the box cannot store this now (disk full or an I/O "
						   "error); nothing was stored; try again", NULL);
		snprintf(res->retry_after, sizeof res->retry_after, "%s", API_RETRY_AFTER_S);
		return;
	}
	res_fail(res, 500, "internal error", NULL);
}

void api_response_free(struct api_response *res)
{
	if (!res)
		return;
	free(res->body);
	res->body = NULL;
	res->body_len = 0;
}

/* ======================== the pool and the keys in flight ================ */

static enum sd_result pool_get(struct api *a, struct db **db)
{
	*db = NULL;
	pthread_mutex_lock(&a->mu);
	if (a->n_idle)
		*db = a->idle[--a->n_idle];
	pthread_mutex_unlock(&a->mu);
	if (*db)
		return SD_OK;
	return db_open(a->db_path, 0, DB_SYNC_FULL, db);
}

static void pool_put(struct api *a, struct db *db)
{
	if (!db)
		return;
	if (db_in_tx(db))	/* never happens on a clean path; never reuse one */
		db_rollback(db);
	pthread_mutex_lock(&a->mu);
	if (a->n_idle < API_POOL_IDLE_MAX) {
		a->idle[a->n_idle++] = db;
		db = NULL;
	}
	pthread_mutex_unlock(&a->mu);
	db_close(db);
}

/* inflight_add: 1 when key was free and is now this request's; 0 when
 * another request holds it; -1 when out of memory. */
static int inflight_add(struct api *a, const char *key)
{
	int i, r = 1;
	char *k;

	pthread_mutex_lock(&a->mu);
	for (i = 0; i < a->n_inflight; i++)
		if (strcmp(a->inflight[i], key) == 0) {
			r = 0;
			goto out;
		}
	if (a->n_inflight == a->cap_inflight) {
		int cap = a->cap_inflight ? a->cap_inflight * 2 : 16;
		char **v = realloc(a->inflight, (size_t)cap * sizeof *v);
		if (!v) {
			r = -1;
			goto out;
		}
		a->inflight = v;
		a->cap_inflight = cap;
	}
	if (!(k = strdup(key))) {
		r = -1;
		goto out;
	}
	a->inflight[a->n_inflight++] = k;
out:
	pthread_mutex_unlock(&a->mu);
	return r;
}

static void inflight_remove(struct api *a, const char *key)
{
	int i;

	pthread_mutex_lock(&a->mu);
	for (i = 0; i < a->n_inflight; i++)
		if (strcmp(a->inflight[i], key) == 0) {
			free(a->inflight[i]);
			a->inflight[i] = a->inflight[--a->n_inflight];
			break;
		}
	pthread_mutex_unlock(&a->mu);
}

/* ======================== open and close ================================= */

enum sd_result api_open(const struct api_opts *o, struct api **out)
{
	struct api *a;
	struct db *db = NULL;
	char path[PATH_MAX + 16];
	enum sd_result r;

	*out = NULL;
	if (!o || !o->db_path)
		return err_set(SD_INVALID, "api_open: no database path");
	if (!(a = calloc(1, sizeof *a)))
		return err_set(SD_NOMEM, "out of memory");
	pthread_mutex_init(&a->mu, NULL);
	if ((size_t)snprintf(a->db_path, sizeof a->db_path, "%s", o->db_path) >=
	    sizeof a->db_path) {
		r = err_set(SD_INVALID, "database path too long");
		goto fail;
	}
	a->idem_ttl_ms = o->idem_ttl_ms > 0 ? o->idem_ttl_ms : API_IDEM_TTL_MS_DEFAULT;
	a->workers_alive = o->workers_alive;
	a->arg = o->arg;
	a->disk_warn_bytes = o->disk_warn_bytes;
	snprintf(a->backup_dir, sizeof a->backup_dir, "%s", o->backup_dir ? o->backup_dir : "");
	a->backup_interval_ms = o->backup_interval_ms > 0 ? o->backup_interval_ms
				: BACKUP_SCHED_INTERVAL_MS_DEFAULT;
	snprintf(a->state_dir, sizeof a->state_dir, "%s", o->state_dir ? o->state_dir : "");
	if ((r = code_key_path(o->db_path, o->state_dir, path, sizeof path)) != SD_OK ||
	    (r = code_key_load(path, a->key)) != SD_OK)
		goto fail;
	if ((r = tickets_blobs_open(o->db_path, o->state_dir, &a->blobs)) != SD_OK)
		goto fail;
	/* the first connection: the database exists and its schema is ours */
	if ((r = pool_get(a, &db)) != SD_OK)
		goto fail;
	pool_put(a, db);
	/* without the workers' counters /metrics still answers the rest */
	if (metrics_open(o->db_path, &a->metrics) != SD_OK)
		log_event(LOG_WARN, "metrics not read", "err=%s", err_msg());
	*out = a;
	return SD_OK;
fail:
	api_close(a);
	return r;
}

void api_close(struct api *a)
{
	int i;

	if (!a)
		return;
	for (i = 0; i < a->n_idle; i++)
		db_close(a->idle[i]);
	for (i = 0; i < a->n_inflight; i++)
		free(a->inflight[i]);
	free(a->inflight);
	blob_close(a->blobs);
	metrics_close(a->metrics);
	pthread_mutex_destroy(&a->mu);
	explicit_bzero(a->key, sizeof a->key);
	free(a);
}

/* ======================== parsing (pure) ================================= */

static enum sd_result perr(struct api_error *err, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum sd_result perr(struct api_error *err, const char *field, const char *fmt, ...)
{
	va_list ap;
	size_t i;

	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	/* a field name from the request (an unknown key) is shown as ASCII */
	snprintf(err->field, sizeof err->field, "%s", field ? field : "");
	for (i = 0; err->field[i]; i++)
		if ((unsigned char)err->field[i] < 0x20 || (unsigned char)err->field[i] >= 0x7f)
			err->field[i] = '?';
	return SD_INVALID;
}

/* The body as a JSON object holding only the allowed keys. */
static enum sd_result parse_object(const char *body, size_t len, const char *const *allowed,
				   json_t **out, struct api_error *err)
{
	json_error_t je;
	json_t *o;
	const char *k;
	json_t *v;
	int i, ok;

	*out = NULL;
	if (!body || !len)
		return perr(err, NULL, "the body is empty; a JSON object is expected");
	if (!(o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je))) {
		if (json_error_code(&je) == json_error_out_of_memory) {
			perr(err, NULL, "out of memory");
			return err_set(SD_NOMEM, "out of memory reading the request");
		}
		return perr(err, NULL, "malformed JSON at line %d column %d: %.120s", je.line,
			    je.column, je.text);
	}
	if (!json_is_object(o)) {
		json_decref(o);
		return perr(err, NULL, "the body must be a JSON object");
	}
	json_object_foreach(o, k, v) {
		for (i = 0, ok = 0; allowed[i]; i++)
			ok |= strcmp(k, allowed[i]) == 0;
		if (!ok) {
			perr(err, k, "unknown field");
			json_decref(o);
			return SD_INVALID;
		}
	}
	*out = o;
	return SD_OK;
}

static enum sd_result get_string(json_t *o, const char *f, const char **s, struct api_error *err)
{
	json_t *v = json_object_get(o, f);

	if (!v)
		return perr(err, f, "%s is missing", f);
	if (!json_is_string(v))
		return perr(err, f, "%s must be a string", f);
	*s = json_string_value(v);
	return SD_OK;
}

static enum sd_result get_int(json_t *o, const char *f, int64_t *n, struct api_error *err)
{
	json_t *v = json_object_get(o, f);

	if (!v)
		return perr(err, f, "%s is missing", f);
	if (!json_is_integer(v))
		return perr(err, f, "%s must be an integer", f);
	*n = (int64_t)json_integer_value(v);
	return SD_OK;
}

/* tickets_text_valid, its message moved into err. */
static enum sd_result text_field(const char *f, const char *s, struct api_error *err)
{
	if (tickets_text_valid(f, s) != SD_OK)
		return perr(err, f, "%s", err_msg());
	return SD_OK;
}

void api_parse_free(void *json)
{
	json_decref(json);
}

enum sd_result api_parse_order(const char *body, size_t len, struct api_order *out,
			       struct api_error *err)
{
	static const char *const allowed[] = { "event_id", "name", "email", "seats", NULL };
	json_t *o;
	enum sd_result r;

	memset(out, 0, sizeof *out);
	memset(err, 0, sizeof *err);
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if ((r = get_int(o, "event_id", &out->o.event_id, err)) != SD_OK ||
	    (r = get_string(o, "name", &out->o.name, err)) != SD_OK ||
	    (r = get_string(o, "email", &out->o.email, err)) != SD_OK ||
	    (r = get_int(o, "seats", &out->o.seats, err)) != SD_OK)
		goto fail;
	if (out->o.event_id < 1) {
		r = perr(err, "event_id", "event_id must be a positive number");
		goto fail;
	}
	if ((r = text_field("name", out->o.name, err)) != SD_OK)
		goto fail;
	if (strlen(out->o.email) > 254 || mail_address_valid(out->o.email) != SD_OK) {
		r = perr(err, "email", "email must be an address like name@example.com");
		goto fail;
	}
	if (out->o.seats < 1 || out->o.seats > TICKETS_SEATS_MAX) {
		r = perr(err, "seats", "seats must be between 1 and %d", TICKETS_SEATS_MAX);
		goto fail;
	}
	out->json = o;
	return SD_OK;
fail:
	json_decref(o);
	memset(&out->o, 0, sizeof out->o);
	return r;
}

enum sd_result api_parse_event(const char *body, size_t len, struct api_event *out,
			       struct api_error *err)
{
	static const char *const allowed[] = { "name", "venue", "starts_at", "capacity", NULL };
	json_t *o, *v;
	enum sd_result r;

	memset(out, 0, sizeof *out);
	memset(err, 0, sizeof *err);
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if ((r = get_string(o, "name", &out->e.name, err)) != SD_OK ||
	    (r = text_field("name", out->e.name, err)) != SD_OK ||
	    (r = get_string(o, "venue", &out->e.venue, err)) != SD_OK ||
	    (r = text_field("venue", out->e.venue, err)) != SD_OK)
		goto fail;
	v = json_object_get(o, "starts_at");
	if (!v) {
		r = perr(err, "starts_at", "starts_at is missing");
		goto fail;
	}
	if (!json_is_string(v) || tickets_time_parse(json_string_value(v), &out->e.starts_at)) {
		r = perr(err, "starts_at", "starts_at must be a date and time like "
			 "\"2026-12-31T20:00Z\"");
		goto fail;
	}
	if ((r = get_int(o, "capacity", &out->e.capacity, err)) != SD_OK)
		goto fail;
	if (out->e.capacity < 1 || out->e.capacity > 1000000) {
		r = perr(err, "capacity", "capacity must be between 1 and 1000000");
		goto fail;
	}
	out->json = o;
	return SD_OK;
fail:
	json_decref(o);
	memset(&out->e, 0, sizeof out->e);
	return r;
}

enum sd_result api_parse_scan(const char *body, size_t len, char code[CODE_TEXT_MAX],
			      struct api_error *err)
{
	static const char *const allowed[] = { "code", NULL };
	const char *s;
	json_t *o;
	enum sd_result r;

	code[0] = '\0';
	memset(err, 0, sizeof *err);
	if ((r = parse_object(body, len, allowed, &o, err)) != SD_OK)
		return r;
	if ((r = get_string(o, "code", &s, err)) == SD_OK && strlen(s) < CODE_TEXT_MAX)
		memcpy(code, s, strlen(s) + 1);	/* a longer one stays "": invalid */
	json_decref(o);
	return r;
}

int api_key_valid(const char *key)
{
	size_t n = 0;

	if (!key)
		return 0;
	for (; key[n]; n++)
		if ((unsigned char)key[n] <= ' ' || (unsigned char)key[n] >= 127)
			return 0;
	return n >= 1 && n <= TICKETS_KEY_MAX;
}

int api_content_type_json(const char *ct)
{
	size_t n = strlen("application/json");

	if (!ct)
		return 0;
	while (*ct == ' ')
		ct++;
	if (strncasecmp(ct, "application/json", n) != 0)
		return 0;
	ct += n;
	while (*ct == ' ')
		ct++;
	return *ct == '\0' || *ct == ';';
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode s[0..n) into buf; -1 when malformed, too long or it holds a NUL. */
static int pct_decode(const char *s, size_t n, int plus_space, char *buf, size_t size)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		int c = (unsigned char)s[i];
		if (c == '%') {
			int hi, lo;
			if (i + 2 >= n)
				return -1;
			hi = hexval(s[i + 1]);
			lo = hexval(s[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			c = hi * 16 + lo;
			i += 2;
		} else if (c == '+' && plus_space) {
			c = ' ';
		}
		if (c == 0 || o + 1 >= size)
			return -1;
		buf[o++] = (char)c;
	}
	buf[o] = '\0';
	return 0;
}

int api_query_get(const char *query, const char *name, char *buf, size_t size)
{
	const char *p = query;
	size_t nlen = strlen(name);

	while (p && *p) {
		const char *end = strchr(p, '&'), *eq;
		size_t len = end ? (size_t)(end - p) : strlen(p);

		eq = memchr(p, '=', len);
		if (eq && (size_t)(eq - p) == nlen && strncmp(p, name, nlen) == 0)
			return pct_decode(eq + 1, len - nlen - 1, 1, buf, size) ? -1 : 1;
		if (!eq && len == nlen && strncmp(p, name, nlen) == 0) {
			buf[0] = '\0';
			return 1;
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}

/* ======================== the endpoints ================================== */

/* What a handler gets: the request, the path's {id} segment, a connection. */
struct call {
	struct api *a;
	const struct api_request *req;
	struct api_response *res;
	const char *id;		/* the decoded {id} of the route, or NULL */
	struct db *db;
};

/* utc_text: ms since the epoch as "2026-12-31T20:00:00Z" into buf. */
static void utc_text(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static json_t *event_json(const struct event_view *v)
{
	char when[32];

	utc_text(v->starts_at, when, sizeof when);
	return json_pack("{s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "id", (json_int_t)v->id,
			 "name", v->name, "venue", v->venue, "starts_at", when, "starts_at_ms",
			 (json_int_t)v->starts_at, "capacity", (json_int_t)v->capacity,
			 "orders", (json_int_t)v->orders, "seats_sold",
			 (json_int_t)v->seats_sold, "seats_remaining",
			 (json_int_t)(v->capacity - v->seats_sold));
}

/* A body the parser refused: 400 naming the field, or a 500 when it was
 * memory, not the request, that failed. */
static void bad_body(struct call *c, enum sd_result r, const struct api_error *err)
{
	if (r == SD_NOMEM)
		res_internal(c->res, c->req, r);
	else
		res_fail(c->res, 400, err->msg, err->field);
}

/* The event, and the answer built before the commit: a 500 never follows a
 * stored event, so a client that retries after one makes no second event. */
static void post_event(struct call *c)
{
	struct api_event ev;
	struct api_error err;
	struct event_view v;
	enum sd_result r;
	char *body = NULL;
	int64_t id = 0;

	if ((r = api_parse_event(c->req->body, c->req->body_len, &ev, &err)) != SD_OK) {
		bad_body(c, r, &err);
		return;
	}
	if ((r = db_begin(c->db)) != SD_OK) {
		api_parse_free(ev.json);
		res_internal(c->res, c->req, r);
		return;
	}
	if ((r = event_add(c->db, &ev.e, &id)) == SD_OK &&
	    (r = event_get(c->db, id, &v)) == SD_OK) {
		if (!(body = json_take_text(event_json(&v))))
			r = err_set(SD_NOMEM, "out of memory");
	}
	r = db_end(c->db, r);
	api_parse_free(ev.json);
	if (r == SD_OK) {
		res_set(c->res, 201, "application/json", body, strlen(body));
		return;
	}
	free(body);
	if (r == SD_INVALID)
		res_fail(c->res, 400, err_msg(), NULL);
	else
		res_internal(c->res, c->req, r);
}

static int parse_id(const char *s, int64_t *id)
{
	int64_t v = 0;

	if (!s || !*s || strlen(s) > 18)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		v = v * 10 + (*s - '0');
	}
	*id = v;
	return v > 0;
}

static void get_event(struct call *c)
{
	struct event_view v;
	enum sd_result r;
	int64_t id;

	if (!parse_id(c->id, &id)) {
		res_fail(c->res, 404, "no such event", NULL);
		return;
	}
	if ((r = event_get(c->db, id, &v)) == SD_NOT_FOUND)
		res_fail(c->res, 404, "no such event", NULL);
	else if (r != SD_OK)
		res_internal(c->res, c->req, r);
	else
		res_json(c->res, 200, event_json(&v));
}

static const char SQL_KEY_GET[] =
	"SELECT request_hash, status, body FROM api_keys WHERE key = ?1 AND expires_at > ?2";
static const char SQL_KEY_DROP_EXPIRED[] =
	"DELETE FROM api_keys WHERE key = ?1 AND expires_at <= ?2";
static const char SQL_KEY_PUT[] =
	"INSERT INTO api_keys (key, request_hash, status, body, created_at, expires_at) "
	"VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/*
 * The stored answer for key, inside the open transaction: [out] *found, and
 * when found and the hash matches, the answer in res; a different hash is
 * 422.  An expired row is deleted so the key can be used again.
 */
static enum sd_result key_lookup(struct call *c, const char *key, const char *hash, int64_t now,
				 int *found)
{
	struct db_stmt *st = db_stmt(c->db, SQL_KEY_GET);
	enum sd_result r;
	int row = 0;

	*found = 0;
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, key);
	db_bind_int(st, 2, now);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (row) {
		*found = 1;
		if (strcmp(db_col_text(st, 0), hash) == 0) {
			const char *body = db_col_text(st, 2);
			char *copy = strdup(body ? body : "");
			if (!copy) {
				db_reset(st);
				return err_set(SD_NOMEM, "out of memory");
			}
			res_set(c->res, (int)db_col_int(st, 1), "application/json", copy,
				strlen(copy));
		} else {
			res_fail(c->res, 422, "this Idempotency-Key was used with a different "
				 "request body", "Idempotency-Key");
		}
		db_reset(st);
		return SD_OK;
	}
	db_reset(st);
	if (!(st = db_stmt(c->db, SQL_KEY_DROP_EXPIRED)))
		return SD_DB;
	db_bind_text(st, 1, key);
	db_bind_int(st, 2, now);
	return db_run(st);
}

static enum sd_result key_put(struct call *c, const char *key, const char *hash, int status,
			      const char *body, int64_t now)
{
	struct db_stmt *st = db_stmt(c->db, SQL_KEY_PUT);

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, key);
	db_bind_text(st, 2, hash);
	db_bind_int(st, 3, status);
	db_bind_text(st, 4, body);
	db_bind_int(st, 5, now);
	db_bind_int(st, 6, now + c->a->idem_ttl_ms);
	return db_run(st);
}

/* order_add's refusal as an answer: no event 404, no seats left 422, other
 * input 400; a failure of the database is not the client's. */
static void order_refused(struct call *c, enum sd_result r)
{
	if (r == SD_NOT_FOUND)
		res_fail(c->res, 404, err_msg(), "event_id");
	else if (r == SD_INVALID && (strstr(err_msg(), "sold out") || strstr(err_msg(), "left")))
		res_fail(c->res, 422, err_msg(), "seats");
	else if (r == SD_INVALID)
		res_fail(c->res, 400, err_msg(), NULL);
	else
		res_internal(c->res, c->req, r);
}

static void post_order(struct call *c)
{
	const char *key = c->req->idempotency_key;
	struct api_order po;
	struct api_error err;
	char hash[CODE_SHA256_HEX + 1], public_id[ORDER_ID_MAX];
	char *body = NULL;
	enum sd_result r;
	int64_t now;
	int found = 0, replayed = 0, held;

	if (!key || !*key) {
		res_fail(c->res, 400, "the Idempotency-Key header is required", "Idempotency-Key");
		return;
	}
	if (!api_key_valid(key)) {
		res_fail(c->res, 400, "the Idempotency-Key must be 1 to 200 printable ASCII "
			 "characters without spaces", "Idempotency-Key");
		return;
	}
	if ((r = api_parse_order(c->req->body, c->req->body_len, &po, &err)) != SD_OK) {
		bad_body(c, r, &err);
		return;
	}
	code_sha256_hex(c->req->body, c->req->body_len, hash);
	if ((held = inflight_add(c->a, key)) <= 0) {
		api_parse_free(po.json);
		if (held < 0) {
			res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
			return;
		}
		res_fail(c->res, 409, "a request with this Idempotency-Key is still running",
			 "Idempotency-Key");
		snprintf(c->res->retry_after, sizeof c->res->retry_after, "%s",
			 API_RETRY_AFTER_S);
		return;
	}
	now = clock_now_ms();
	if ((r = db_begin(c->db)) != SD_OK)
		goto out;
	if ((r = key_lookup(c, key, hash, now, &found)) != SD_OK || found)
		goto end;	/* a replay or a 422: nothing to write */
	/* the client key lives in api_keys (it expires); orders.idempotency_key
	 * stays the CLI's */
	if ((r = order_add(c->db, &po.o, public_id, &replayed)) != SD_OK)
		goto end;
	failpoint(FP_API_ORDER_TX);
	body = json_take_text(json_pack("{s:s, s:I, s:s, s:s, s:I, s:I}", "id", public_id,
					"event_id", (json_int_t)po.o.event_id, "name", po.o.name,
					"email", po.o.email, "seats", (json_int_t)po.o.seats,
					"created_at", (json_int_t)now));
	if (!body) {
		r = err_set(SD_NOMEM, "out of memory");
		goto end;
	}
	r = key_put(c, key, hash, 201, body, now);
end:
	r = db_end(c->db, r);
out:
	inflight_remove(c->a, key);
	api_parse_free(po.json);
	if (r != SD_OK) {
		free(body);
		order_refused(c, r);
		return;
	}
	if (body)		/* committed: the answer just stored */
		res_set(c->res, 201, "application/json", body, strlen(body));
}

static void order_recent_row(const struct order_recent *o, void *arg)
{
	json_array_append_new(arg, json_pack("{s:s, s:I, s:I, s:b, s:s, s:I}", "id", o->id,
					     "event_id", (json_int_t)o->event_id, "seats",
					     (json_int_t)o->seats, "pdf", o->pdf_stored, "email",
					     o->email, "created_at", (json_int_t)o->created_at));
}

/* GET /v1/orders?recent=N (1..100, default 20): the newest orders. */
static void get_orders(struct call *c)
{
	char buf[16];
	long n = 20;
	int has;
	json_t *orders;
	enum sd_result r;

	if ((has = api_query_get(c->req->query, "recent", buf, sizeof buf)) != 0) {
		char *end = NULL;
		n = has > 0 ? strtol(buf, &end, 10) : 0;
		if (has < 0 || !end || *end || end == buf || n < 1 || n > 100) {
			res_fail(c->res, 400, "recent must be between 1 and 100", "recent");
			return;
		}
	}
	orders = json_array();
	if ((r = tickets_recent_orders(c->db, (int)n, order_recent_row, orders)) != SD_OK) {
		json_decref(orders);
		res_internal(c->res, c->req, r);
		return;
	}
	res_json(c->res, 200, json_pack("{s:o}", "orders", orders));
}

static int order_id_valid(const char *s)
{
	size_t n = 0;

	if (!s)
		return 0;
	for (; s[n]; n++)
		if (!((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= '0' && s[n] <= '9') ||
		      (s[n] >= 'a' && s[n] <= 'z')))
			return 0;
	return n >= 1 && n < ORDER_ID_MAX;
}

static void get_order(struct call *c)
{
	char *out = NULL;
	enum sd_result r;

	if (!order_id_valid(c->id)) {
		res_fail(c->res, 404, "no such order", NULL);
		return;
	}
	if ((r = order_show(c->db, c->id, 1, &out)) == SD_NOT_FOUND)
		res_fail(c->res, 404, "no such order", NULL);
	else if (r != SD_OK)
		res_internal(c->res, c->req, r);
	else
		res_set(c->res, 200, "application/json", out, strlen(out));
}

static void get_order_pdf(struct call *c)
{
	char *out = NULL;
	unsigned char *pdf = NULL, *p;
	size_t len = 0;
	json_t *o;
	const char *key;
	enum sd_result r;

	if (!order_id_valid(c->id)) {
		res_fail(c->res, 404, "no such order", NULL);
		return;
	}
	if ((r = order_show(c->db, c->id, 1, &out)) == SD_NOT_FOUND) {
		res_fail(c->res, 404, "no such order", NULL);
		return;
	}
	if (r != SD_OK) {
		res_internal(c->res, c->req, r);
		return;
	}
	o = json_loads(out, 0, NULL);
	free(out);
	key = json_string_value(json_object_get(o, "pdf_key"));
	if (!json_is_true(json_object_get(o, "pdf_stored")) || !key) {
		json_decref(o);
		res_fail(c->res, 404, "the tickets are not rendered yet", NULL);
		return;
	}
	r = blob_get(c->a->blobs, key, &pdf, &len);
	json_decref(o);
	if (r == SD_NOT_FOUND) {
		res_fail(c->res, 404, "the tickets are not rendered yet", NULL);
		return;
	}
	if (r != SD_OK) {
		res_internal(c->res, c->req, r);
		return;
	}
	if (!(p = realloc(pdf, len + 1))) {
		free(pdf);
		res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	p[len] = '\0';
	res_set(c->res, 200, "application/pdf", (char *)p, len);
}

static void post_scan(struct call *c)
{
	char code[CODE_TEXT_MAX];
	struct api_error err;
	struct scan_result sr;
	enum sd_result r;

	if ((r = api_parse_scan(c->req->body, c->req->body_len, code, &err)) != SD_OK) {
		bad_body(c, r, &err);
		return;
	}
	if ((r = ticket_scan(c->db, c->a->key, code, &sr)) != SD_OK) {
		res_internal(c->res, c->req, r);
		return;
	}
	if (sr.outcome == SCAN_INVALID)
		res_json(c->res, 200, json_pack("{s:s}", "result", "invalid"));
	else
		res_json(c->res, 200, json_pack("{s:s, s:I, s:s, s:s}", "result",
			 sr.outcome == SCAN_ADMITTED ? "admitted" : "already_scanned",
			 "scanned_at", (json_int_t)sr.scanned_at, "seat", sr.seat_label,
			 "order_id", sr.order_id));
}

struct job_list {
	json_t *jobs;
	int64_t now;
	int nomem;		/* a row could not be added: no partial list */
};

/* Would jansson refuse this valid JSON (SQLite made it) again?  SQLite keeps
 * what jansson refuses: integers past 64 bits, bad UTF-8, \u0000.  Any other
 * failure is out of memory, which jansson may report as a syntax error. */
static int json_refused(const json_error_t *je)
{
	enum json_error_code e = json_error_code(je);

	return e == json_error_numeric_overflow || e == json_error_invalid_utf8 ||
	       e == json_error_null_character;
}

/* A leased entry also says how long its lease has left (visible_at is the
 * lease's end) and how long ago it was claimed (leased_at), both on the
 * server's clock, so a browser's clock does not matter.  A row jansson
 * refuses goes out as its text. */
static void job_row(const struct job_row *row, void *arg)
{
	struct job_list *l = arg;
	json_error_t je;
	json_t *j = json_loads(row->json, 0, &je);
	int bad = 0;

	if (!j && json_refused(&je))
		j = json_text(row->json);
	if (json_is_object(j) && strcmp(row->state, "leased") == 0) {
		bad |= json_object_set_new(j, "lease_expires_in_ms",
					   json_integer((json_int_t)(row->visible_at - l->now)));
		if (row->leased_at > 0)	/* a lease taken before 0004 has no time */
			bad |= json_object_set_new(j, "lease_age_ms",
						   json_integer((json_int_t)(l->now - row->leased_at)));
	}
	if (!j || bad) {
		json_decref(j);
		l->nomem = 1;
		return;
	}
	if (json_array_append_new(l->jobs, j))	/* takes j, even when it fails */
		l->nomem = 1;
}

static void get_jobs(struct call *c)
{
	static const char *const states[] = { "ready", "scheduled", "leased", "dead", "done",
					      NULL };
	char state[16], kind[QUEUE_KIND_MAX + 1], lim[16];
	int has_state, has_kind, has_lim, i, ok = 0;
	long limit = API_JOBS_LIMIT_DEFAULT;
	struct job_list list;
	json_t *jobs;
	enum sd_result r;

	has_state = api_query_get(c->req->query, "state", state, sizeof state);
	has_kind = api_query_get(c->req->query, "kind", kind, sizeof kind);
	has_lim = api_query_get(c->req->query, "limit", lim, sizeof lim);
	for (i = 0; has_state == 1 && states[i]; i++)
		ok |= strcmp(state, states[i]) == 0;
	if (has_state < 0 || (has_state == 1 && !ok)) {
		res_fail(c->res, 400, "state must be ready, scheduled, leased, dead or done",
			 "state");
		return;
	}
	if (has_kind < 0 || (has_kind == 1 && queue_kind_valid(kind) != SD_OK)) {
		res_fail(c->res, 400, "kind is not a job kind", "kind");
		return;
	}
	if (has_lim) {
		char *end = NULL;
		limit = has_lim > 0 ? strtol(lim, &end, 10) : 0;
		if (has_lim < 0 || !end || *end || end == lim || limit < 1 ||
		    limit > API_JOBS_LIMIT_MAX) {
			res_fail(c->res, 400, "limit must be between 1 and 10000", "limit");
			return;
		}
	}
	jobs = json_array();
	list.jobs = jobs;
	list.now = clock_now_ms();
	list.nomem = 0;
	r = queue_list(c->db, has_state == 1 ? state : NULL, has_kind == 1 ? kind : NULL,
		       (int)limit, job_row, &list);
	if (r == SD_OK && (list.nomem || !jobs))
		r = err_set(SD_NOMEM, "out of memory listing jobs");
	if (r != SD_OK) {
		json_decref(jobs);
		res_internal(c->res, c->req, r);
		return;
	}
	res_json(c->res, 200, json_pack("{s:o}", "jobs", jobs));
}

static void post_retry(struct call *c)
{
	enum sd_result r;
	int64_t n = 0;

	if (!c->id || queue_job_id_valid(c->id) != SD_OK) {
		res_fail(c->res, 404, "no dead job with this id", NULL);
		return;
	}
	if ((r = queue_dead_retry(c->db, c->id, &n)) == SD_NOT_FOUND)
		res_fail(c->res, 404, "no dead job with this id", NULL);
	else if (r != SD_OK)
		res_internal(c->res, c->req, r);
	else
		res_json(c->res, 200, json_pack("{s:s, s:I}", "job_id", c->id, "retried",
						(json_int_t)n));
}

static json_t *counts_json(const struct queue_counts *q)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I}", "ready", (json_int_t)q->ready,
			 "scheduled", (json_int_t)q->scheduled, "leased", (json_int_t)q->leased,
			 "dead", (json_int_t)q->dead, "done", (json_int_t)q->done);
}

struct event_list {
	json_t *events;
	int short_of;		/* events that could not be added (memory) */
};

static void event_stat(const struct event_view *v, void *arg)
{
	struct event_list *l = arg;

	if (json_array_append_new(l->events, event_json(v)) != 0)
		l->short_of++;
}

/* The workers' shared counters: duplicate runs absorbed by technique, and
 * [out] *stale, the stale acks of every kind. */
static json_t *absorbed_json(const struct metrics *m, int64_t *stale)
{
	struct metrics_snapshot *s = malloc(sizeof *s);
	json_t *o = json_object();
	int i;

	*stale = 0;
	if (!s || !o) {
		free(s);
		json_decref(o);
		return NULL;
	}
	metrics_read(m, s);
	for (i = 0; i < METRICS_TECHNIQUES && o; i++)
		if (json_object_set_new(o, metrics_technique_names[i],
					json_integer((json_int_t)s->duplicates[i])) != 0) {
			json_decref(o);
			o = NULL;
		}
	for (i = 0; i < s->n_kinds; i++)
		*stale += (int64_t)s->kinds[i].stale;
	free(s);
	return o;
}

/* disk_json: the free space where the box writes, for /healthz and /v1/stats. */
static json_t *disk_json(const struct maint_disk *d)
{
	return json_pack("{s:o, s:o, s:I, s:b}", "db_free_bytes",
			 d->db_free < 0 ? json_null() : json_integer(d->db_free), "state_free_bytes",
			 d->state_free < 0 ? json_null() : json_integer(d->state_free), "warn_bytes",
			 (json_int_t)d->warn_bytes, "low", d->low);
}

/* backup_json: run's periodic backups, for /healthz and /v1/stats (null
 * when backup_dir is not set).  [out] *ok: they are fine (1 when not set). */
static json_t *backup_json(const struct api *a, int *ok)
{
	struct backup_status st;
	char when[32];
	json_t *o;

	*ok = 1;
	if (!a->backup_dir[0])
		return json_null();
	backup_sched_status(a->db_path, a->backup_dir, a->backup_interval_ms, clock_now_ms(), &st);
	*ok = st.ok;
	o = json_pack("{s:s, s:I, s:b, s:i, s:I}", "dir", a->backup_dir, "interval_ms",
		      (json_int_t)a->backup_interval_ms, "ok", st.ok, "count", st.good,
		      "failures_total", (json_int_t)st.failures_total);
	if (!o)
		return NULL;
	utc_text(st.last_ok_ms, when, sizeof when);
	json_object_set_new(o, "last_ok", st.good ? json_string(st.last_ok_name) : json_null());
	json_object_set_new(o, "last_ok_at", st.good ? json_string(when) : json_null());
	json_object_set_new(o, "last_ok_at_ms", st.good ? json_integer(st.last_ok_ms) : json_null());
	json_object_set_new(o, "age_ms", st.good ? json_integer(st.age_ms) : json_null());
	json_object_set_new(o, "last_failed", json_boolean(st.failed));
	json_object_set_new(o, "error", st.failed ? json_string(st.error) : json_null());
	return o;
}

static void get_stats(struct call *c)
{
	struct maint_disk disk;
	struct queue_counts *rows = NULL, total;
	struct event_list ev = { NULL, 0 };
	json_t *kinds, *absorbed, *o;
	int64_t orders = 0, emails = 0, per_min = 0, stale = 0;
	enum sd_result r;
	int n = 0, i, short_of = 0, backup_ok;

	if ((r = queue_stats(c->db, &rows, &n, &total)) != SD_OK ||
	    (r = tickets_totals(c->db, &orders, &emails)) != SD_OK ||
	    (r = queue_done_since(c->db, clock_now_ms() - 60000, &per_min)) != SD_OK) {
		free(rows);
		res_internal(c->res, c->req, r);
		return;
	}
	/* the whole answer or a 500: never one with a kind or an event missing */
	kinds = json_object();
	for (i = 0; i < n; i++)
		short_of += !kinds || json_object_set_new(kinds, rows[i].kind,
							  counts_json(&rows[i])) != 0;
	free(rows);
	ev.events = json_array();
	if ((r = tickets_each_event(c->db, event_stat, &ev)) != SD_OK) {
		json_decref(kinds);
		json_decref(ev.events);
		res_internal(c->res, c->req, r);
		return;
	}
	absorbed = absorbed_json(c->a->metrics, &stale);
	if (short_of || ev.short_of || !kinds || !ev.events || !absorbed) {
		json_decref(kinds);
		json_decref(ev.events);
		json_decref(absorbed);
		res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	maint_disk(c->a->db_path, c->a->state_dir, c->a->disk_warn_bytes, &disk);
	o = json_pack("{s:{s:o, s:o}, s:I, s:I, s:o, s:I, s:o, s:I, s:o, s:o}", "jobs", "total",
		      counts_json(&total), "by_kind", kinds, "orders", (json_int_t)orders,
		      "emails_sent", (json_int_t)emails, "events", ev.events, "done_per_minute",
		      (json_int_t)per_min, "duplicates_absorbed", absorbed,
		      "stale_acks", (json_int_t)stale, "disk", disk_json(&disk), "backup",
		      backup_json(c->a, &backup_ok));
	res_json(c->res, 200, o);
}

static void get_healthz(struct call *c)
{
	int64_t pending = 0, wal = 0;
	int alive = -1, db_ok, ok, backup_ok;
	struct maint_disk disk;
	json_t *o, *backup;

	db_ok = c->db && queue_pending(c->db, &pending) == SD_OK &&
		db_wal_bytes(c->db, &wal) == SD_OK;
	if (c->a->workers_alive)
		alive = c->a->workers_alive(c->a->arg);
	maint_disk(c->a->db_path, c->a->state_dir, c->a->disk_warn_bytes, &disk);
	backup = backup_json(c->a, &backup_ok);
	ok = db_ok && alive != 0 && !disk.low && backup_ok;
	o = json_pack("{s:b, s:s, s:o, s:I, s:o, s:o}", "ok", ok, "db", db_ok ? "ok" : "error",
		      "workers_alive", alive < 0 ? json_null() : json_integer(alive), "wal_bytes",
		      (json_int_t)wal, "disk", disk_json(&disk), "backup", backup);
	res_json(c->res, ok ? 200 : 503, o);
}

/* backup_prom: the periodic backups' series (none when backup_dir is not
 * set), as /healthz judges them. */
static void backup_prom(FILE *f, const struct api *a)
{
	struct backup_status st;

	if (!a->backup_dir[0])
		return;
	backup_sched_status(a->db_path, a->backup_dir, a->backup_interval_ms, clock_now_ms(), &st);
	fprintf(f, "# HELP stagedoor_backup_ok 1 while the newest good periodic backup is younger "
		"than two intervals and the last attempt did not fail (as /healthz).\n"
		"# TYPE stagedoor_backup_ok gauge\nstagedoor_backup_ok %d\n"
		"# HELP stagedoor_backup_last_success_timestamp_seconds When the newest good "
		"periodic backup was taken (Unix time); 0: none.\n"
		"# TYPE stagedoor_backup_last_success_timestamp_seconds gauge\n"
		"stagedoor_backup_last_success_timestamp_seconds %lld\n"
		"# HELP stagedoor_backup_age_seconds Age of the newest good periodic backup; "
		"-1: none.\n"
		"# TYPE stagedoor_backup_age_seconds gauge\nstagedoor_backup_age_seconds %.3f\n"
		"# HELP stagedoor_backups Good periodic backups in backup_dir.\n"
		"# TYPE stagedoor_backups gauge\nstagedoor_backups %d\n"
		"# HELP stagedoor_backup_failures_total Periodic backups that failed.\n"
		"# TYPE stagedoor_backup_failures_total counter\n"
		"stagedoor_backup_failures_total %lld\n",
		st.ok, (long long)(st.last_ok_ms / 1000),
		st.age_ms < 0 ? -1.0 : (double)st.age_ms / 1000.0, st.good,
		(long long)st.failures_total);
}

static void get_metrics(struct call *c)
{
	static const char *const names[] = { "ready", "scheduled", "leased", "dead" };
	struct queue_counts *rows = NULL, total;
	int64_t orders = 0, emails = 0, reclaims = 0, wal = 0;
	enum sd_result r;
	char *buf = NULL;
	size_t len = 0;
	int n = 0, i, s;
	struct metrics_snapshot *ms;
	FILE *f;

	if ((r = queue_stats(c->db, &rows, &n, &total)) != SD_OK ||
	    (r = tickets_totals(c->db, &orders, &emails)) != SD_OK ||
	    (r = queue_reclaims(c->db, &reclaims)) != SD_OK ||
	    (r = db_wal_bytes(c->db, &wal)) != SD_OK) {
		free(rows);
		res_internal(c->res, c->req, r);
		return;
	}
	if (!(f = open_memstream(&buf, &len))) {
		free(rows);
		res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	fputs("# HELP stagedoor_jobs Jobs in the stream and the dead letters by state and kind.\n"
	      "# TYPE stagedoor_jobs gauge\n", f);
	for (i = 0; i < n; i++)
		for (s = 0; s < 4; s++) {
			int64_t v = s == 0 ? rows[i].ready : s == 1 ? rows[i].scheduled :
				    s == 2 ? rows[i].leased : rows[i].dead;
			fprintf(f, "stagedoor_jobs{state=\"%s\",kind=\"", names[s]);
			metrics_prom_label(f, rows[i].kind);
			fprintf(f, "\"} %lld\n", (long long)v);
		}
	fputs("# HELP stagedoor_jobs_done_total Jobs finished, by kind.\n"
	      "# TYPE stagedoor_jobs_done_total counter\n", f);
	for (i = 0; i < n; i++) {
		fputs("stagedoor_jobs_done_total{kind=\"", f);
		metrics_prom_label(f, rows[i].kind);
		fprintf(f, "\"} %lld\n", (long long)rows[i].done);
	}
	fprintf(f, "# HELP stagedoor_dead_jobs Jobs in the dead letters.\n"
		"# TYPE stagedoor_dead_jobs gauge\nstagedoor_dead_jobs %lld\n"
		"# HELP stagedoor_emails_sent_total Orders whose ticket email is sent.\n"
		"# TYPE stagedoor_emails_sent_total counter\nstagedoor_emails_sent_total %lld\n"
		"# HELP stagedoor_reclaims_total Deliveries after an expired lease (finished "
		"jobs still kept).\n"
		"# TYPE stagedoor_reclaims_total counter\nstagedoor_reclaims_total %lld\n"
		"# HELP stagedoor_wal_bytes Size of the WAL file.\n"
		"# TYPE stagedoor_wal_bytes gauge\nstagedoor_wal_bytes %lld\n"
		"# HELP stagedoor_orders_total Orders accepted.\n"
		"# TYPE stagedoor_orders_total counter\nstagedoor_orders_total %lld\n",
		(long long)total.dead, (long long)emails, (long long)reclaims, (long long)wal,
		(long long)orders);
	{
		struct maint_disk d;

		maint_disk(c->a->db_path, c->a->state_dir, c->a->disk_warn_bytes, &d);
		fprintf(f, "# HELP stagedoor_disk_free_bytes Free space for the database's folder "
			"(db) and the state folder (state); -1: cannot be read.\n"
			"# TYPE stagedoor_disk_free_bytes gauge\n"
			"stagedoor_disk_free_bytes{folder=\"db\"} %lld\n"
			"stagedoor_disk_free_bytes{folder=\"state\"} %lld\n"
			"# HELP stagedoor_disk_warn_bytes Below this free space /healthz fails.\n"
			"# TYPE stagedoor_disk_warn_bytes gauge\nstagedoor_disk_warn_bytes %lld\n",
			(long long)d.db_free, (long long)d.state_free, (long long)d.warn_bytes);
	}
	backup_prom(f, c->a);
	free(rows);
	if ((ms = malloc(sizeof *ms))) {
		metrics_read(c->a->metrics, ms);
		metrics_write_prom(f, ms);
		free(ms);
	}
	if (fclose(f) != 0 || !buf || !ms) {
		free(buf);
		res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	res_set(c->res, 200, "text/plain; version=0.0.4", buf, len);
}

/* ======================== the router ===================================== */

enum route_flags {
	R_AUTH = 1,	/* needs the token */
	R_BODY = 2,	/* takes a JSON body */
	R_NODB = 4,	/* a failing database is this handler's answer, not a 500 */
};

struct route {
	const char *method;
	const char *pattern;	/* segments; "*" matches one {id} */
	int flags;
	void (*fn)(struct call *c);
};

static const struct route routes[] = {
	{ "GET", "/healthz", R_NODB, get_healthz },
	{ "GET", "/metrics", 0, get_metrics },
	{ "POST", "/v1/events", R_AUTH | R_BODY, post_event },
	{ "GET", "/v1/events/*", R_AUTH, get_event },
	{ "POST", "/v1/orders", R_AUTH | R_BODY, post_order },
	{ "GET", "/v1/orders", R_AUTH, get_orders },
	{ "GET", "/v1/orders/*", R_AUTH, get_order },
	{ "GET", "/v1/orders/*/tickets.pdf", R_AUTH, get_order_pdf },
	{ "POST", "/v1/scan", R_AUTH | R_BODY, post_scan },
	{ "GET", "/v1/jobs", R_AUTH, get_jobs },
	{ "POST", "/v1/jobs/*/retry", R_AUTH, post_retry },
	{ "GET", "/v1/stats", R_AUTH, get_stats },
	{ NULL, NULL, 0, NULL },
};

#define SEG_MAX 512	/* a decoded {id}: job ids are 200 bytes at most */

/* Does path match pattern?  [out] id: the decoded "*" segment. */
static int route_match(const char *pattern, const char *path, char id[SEG_MAX])
{
	const char *p = pattern, *q = path;

	id[0] = '\0';
	while (*p && *q) {
		if (*p == '*') {
			size_t n = strcspn(q, "/");
			if (n == 0 || pct_decode(q, n, 0, id, SEG_MAX) != 0)
				return 0;
			p++;
			q += n;
			continue;
		}
		if (*p != *q)
			return 0;
		p++;
		q++;
	}
	return *p == '\0' && *q == '\0';
}

/* the token (a recorded one, token.h), then the body's size and type;
 * 0 with the refusal in c->res */
static int request_admitted(struct call *c, int flags)
{
	const struct api_request *req = c->req;
	enum sd_result r;
	int ok = 0;

	if (flags & R_AUTH) {
		if ((r = token_admits(c->db, req->authorization, &ok)) != SD_OK) {
			res_internal(c->res, req, r);
			return 0;
		}
		if (!ok) {
			res_fail(c->res, 401, "a valid Authorization: Bearer token is required", NULL);
			return 0;
		}
	}
	if (req->body_len > API_BODY_MAX) {
		res_fail(c->res, 413, "the body is larger than 64 KiB", NULL);
		return 0;
	}
	if ((flags & R_BODY) && !api_content_type_json(req->content_type)) {
		res_fail(c->res, 415, "the body must be application/json", NULL);
		return 0;
	}
	return 1;
}

void api_handle(struct api *a, const struct api_request *req, struct api_response *res)
{
	const struct route *rt, *hit = NULL;
	char id[SEG_MAX];
	struct call c = { a, req, res, NULL, NULL };
	enum sd_result r;
	int path_known = 0;

	memset(res, 0, sizeof *res);
	if (!req->method || !req->path) {
		res_fail(res, 400, "no method or path", NULL);
		return;
	}
	for (rt = routes; rt->pattern && !hit; rt++) {
		if (!route_match(rt->pattern, req->path, id))
			continue;
		path_known = 1;
		if (strcmp(rt->method, req->method) == 0)
			hit = rt;
	}
	if (!hit) {
		if (path_known)
			res_fail(res, 405, "method not allowed", NULL);
		else
			res_fail(res, 404, "not found", NULL);
		return;
	}
	/* routes are tried in order; the one that matched last filled id */
	route_match(hit->pattern, req->path, id);
	c.id = strchr(hit->pattern, '*') ? id : NULL;
	err_clear();
	if ((r = pool_get(a, &c.db)) != SD_OK && !(hit->flags & R_NODB)) {
		res_internal(res, req, r);
		return;
	}
	if (request_admitted(&c, hit->flags))
		hit->fn(&c);
	pool_put(a, c.db);
}

/* ======================== pruning ======================================== */

static const char SQL_KEY_PRUNE[] =
	"DELETE FROM api_keys WHERE id IN (SELECT id FROM api_keys WHERE expires_at <= ?1 "
	"ORDER BY expires_at LIMIT ?2)";

enum sd_result api_prune_keys(struct db *db, int64_t now, int limit, int64_t *n)
{
	struct db_stmt *st;
	enum sd_result r;

	*n = 0;
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_KEY_PRUNE))) {
		r = SD_DB;
		goto out;
	}
	db_bind_int(st, 1, now);
	db_bind_int(st, 2, limit > 0 ? limit : 1000);
	if ((r = db_run(st)) == SD_OK)
		*n = db_changes(db);
out:
	return db_end(db, r);
}
