/*
 * test_api.c: the intake API through api_handle, on a real database in a
 * fresh temp directory (init's files made as init makes them): every
 * endpoint's answers and refusals, every Idempotency-Key case, and that no
 * refused request writes anything.
 *
 * The in-flight case holds the first request inside its order transaction
 * with a failpoint hook on two barriers (as test_idem.c does), so the second
 * request runs while the first provably holds the key; no sleeps.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "clientkey.h"
#include "clock.h"
#include "code.h"
#include "events.h"
#include "failpoint.h"
#include "log.h"
#include "maint.h"
#include "outbox.h"
#include "queue.h"
#include "statedir.h"
#include "testutil.h"
#include "ticket_jobs.h"
#include "tickets.h"
#include "worker.h"

static struct {
	struct tu_env *env;
	struct api *api;
	char auth[128];
	int alive;		/* what workers_alive answers */
} F;

static int alive_fn(void *arg)
{
	(void)arg;
	return F.alive;
}

/* open_api_opts: the API as api_open makes it from o (its db_path etc.),
 * with the token read into F.auth. */
static void open_api_opts(const struct api_opts *o)
{
	char path[400];
	size_t len = 0;
	unsigned char *tok;

	api_close(F.api);
	F.api = NULL;
	assert_int_equal(api_open(o, &F.api), SD_OK);
	assert_int_equal(token_path(o->db_path, o->state_dir, path, sizeof path), SD_OK);
	tok = tu_slurp(path, &len);
	assert_int_equal(len, API_TOKEN_HEX);
	snprintf(F.auth, sizeof F.auth, "Bearer %s", tok);
	free(tok);
}

/* The tests' API: a 1-byte disk threshold, so that a full /tmp on the test
 * machine does not turn /healthz red (test_disk_space sets its own). */
static int open_api(int64_t ttl)
{
	struct api_opts o = { F.env->db_path, tu_state(F.env), ttl, alive_fn, NULL, 1 };

	open_api_opts(&o);
	return 0;
}

static int setup(void **state)
{
	int r = tu_setup(state);

	memset(&F, 0, sizeof F);
	F.env = *state;
	F.alive = 2;
	assert_int_equal(statedir_init(F.env->db_path, tu_state(F.env)), SD_OK);
	assert_int_equal(token_ensure(F.env->db_path, tu_state(F.env)), SD_OK);
	open_api(0);
	return r;
}

static int teardown(void **state)
{
	char small[300];

	/* test_disk_space's tmpfs, when it failed before unmounting it */
	snprintf(small, sizeof small, "%s/small", F.env->dir);
	umount2(small, MNT_DETACH);
	failpoint_set_hook(NULL, NULL);
	db_busy_timeout_set(0);
	json_set_alloc_funcs(malloc, free);	/* an out-of-memory test that failed */
	api_close(F.api);
	memset(&F, 0, sizeof F);
	return tu_teardown(state);
}

/* ======================== helpers ======================================== */

struct req {
	const char *method, *path, *query, *auth, *key, *ctype, *body;
	size_t len;		/* 0: strlen(body) */
};

static void call(const struct req *q, struct api_response *res)
{
	struct api_request r = { q->method, q->path, q->query, q->auth, q->key, q->ctype, q->body,
				 q->len ? q->len : (q->body ? strlen(q->body) : 0) };

	api_handle(F.api, &r, res);
	assert_non_null(res->body);
}

static json_t *body_json(const struct api_response *res)
{
	json_error_t je;
	json_t *o = json_loadb(res->body, res->body_len, 0, &je);

	if (!o)
		fail_msg("not JSON (%s): %.*s", je.text, (int)res->body_len, res->body);
	return o;
}

/* The answer's status, and for errors its "field" (or "" when none). */
static void expect(const struct req *q, int status, const char *field)
{
	struct api_response res;
	json_t *o;
	const char *f;

	call(q, &res);
	if (res.status != status)
		fail_msg("%s %s: want %d, got %d: %.*s", q->method, q->path, status, res.status,
			 (int)res.body_len, res.body);
	if (field) {
		o = body_json(&res);
		assert_true(json_is_string(json_object_get(o, "error")));
		f = json_string_value(json_object_get(o, "field"));
		if (strcmp(f ? f : "", field) != 0)
			fail_msg("want field '%s', got '%s': %s", field, f ? f : "", res.body);
		json_decref(o);
	}
	api_response_free(&res);
}

#define JSON "application/json"

static int64_t add_event(int64_t capacity)
{
	char body[256];
	struct req q = { "POST", "/v1/events", NULL, F.auth, NULL, JSON, body };
	struct api_response res;
	json_t *o;
	int64_t id;

	snprintf(body, sizeof body, "{\"name\":\"Quartet\",\"venue\":\"Hall\","
		 "\"starts_at\":\"2026-12-31T20:00Z\",\"capacity\":%lld}", (long long)capacity);
	call(&q, &res);
	assert_int_equal(res.status, 201);
	o = body_json(&res);
	id = json_integer_value(json_object_get(o, "id"));
	assert_true(id > 0);
	json_decref(o);
	api_response_free(&res);
	return id;
}

static void order_body(char *buf, size_t size, int64_t event_id, int seats)
{
	snprintf(buf, size, "{\"event_id\":%lld,\"name\":\"Ada Lovelace\","
		 "\"email\":\"ada@example.com\",\"seats\":%d}", (long long)event_id, seats);
}

/* POST /v1/orders; [out] res (the caller frees it). */
static void post_order(const char *key, const char *body, struct api_response *res)
{
	struct req q = { "POST", "/v1/orders", NULL, F.auth, key, JSON, body };

	call(&q, res);
}

#define COUNT(sql) tu_count(F.env->db_path, sql)

/* ======================== the token and the digest ======================= */

static void test_token_file(void **state)
{
	char path[400];
	struct stat st;
	unsigned char *a, *b;
	size_t la, lb, i;

	(void)state;
	assert_int_equal(token_path(F.env->db_path, tu_state(F.env), path, sizeof path), SD_OK);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	a = tu_slurp(path, &la);
	assert_int_equal(la, API_TOKEN_HEX);
	for (i = 0; i < la; i++)
		assert_non_null(strchr("0123456789abcdef", a[i]));
	/* a second init keeps the token */
	assert_int_equal(token_ensure(F.env->db_path, tu_state(F.env)), SD_OK);
	b = tu_slurp(path, &lb);
	assert_memory_equal(a, b, la);
	/* the database holds the token's SHA-256, never the token */
	{
		char sha[CODE_SHA256_HEX + 1], tok[API_TOKEN_HEX + 1];

		memcpy(tok, a, API_TOKEN_HEX);
		tok[API_TOKEN_HEX] = '\0';
		code_sha256_hex(tok, API_TOKEN_HEX, sha);
		assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM api_tokens WHERE "
					   "sha256 = '%s' AND role = 'operator'", sha), 1);
		assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM api_tokens WHERE "
					   "sha256 = '%s' OR name LIKE '%%%s%%'", tok, tok), 0);
	}
	/* a token file others may read is refused */
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(token_ensure(F.env->db_path, tu_state(F.env)), SD_INVALID);
	free(a);
	free(b);
}

/* ======================== routing and auth =============================== */

static void test_routes(void **state)
{
	(void)state;
	expect(&(struct req){ "GET", "/nowhere" }, 404, "");
	expect(&(struct req){ "GET", "/v1/orders/T1/other" }, 404, "");
	expect(&(struct req){ "DELETE", "/v1/orders/T1", NULL, F.auth }, 405, "");
	expect(&(struct req){ "PUT", "/v1/orders" }, 405, "");
	expect(&(struct req){ "POST", "/healthz" }, 405, "");
	expect(&(struct req){ "GET", "/v1/events/123", NULL, F.auth }, 404, "");
	expect(&(struct req){ "GET", "/v1/events/abc", NULL, F.auth }, 404, "");
	expect(&(struct req){ "GET", "/v1/orders/T..%2F", NULL, F.auth }, 404, "");
}

static void test_auth(void **state)
{
	char body[256], wrong[128];
	const char *paths[][2] = {
		{ "GET", "/v1/events/1" }, { "GET", "/v1/orders/T1" },
		{ "GET", "/v1/orders/T1/tickets.pdf" }, { "GET", "/v1/jobs" },
		{ "POST", "/v1/jobs/x/retry" }, { "GET", "/v1/stats" }, { "GET", "/v1/orders" },
	};
	size_t i;

	(void)state;
	snprintf(wrong, sizeof wrong, "%s", F.auth);
	wrong[strlen(wrong) - 1] ^= 1;
	order_body(body, sizeof body, 1, 1);
	expect(&(struct req){ "POST", "/v1/events", NULL, NULL, NULL, JSON,
			      "{\"name\":\"a\",\"venue\":\"b\",\"starts_at\":\"2026-01-01T00:00Z\","
			      "\"capacity\":5}" }, 401, "Authorization");
	expect(&(struct req){ "POST", "/v1/events", NULL, wrong, NULL, JSON, "{}" }, 401, "Authorization");
	expect(&(struct req){ "POST", "/v1/orders", NULL, NULL, "k1", JSON, body }, 401, "Authorization");
	expect(&(struct req){ "POST", "/v1/orders", NULL, wrong, "k1", JSON, body }, 401, "Authorization");
	expect(&(struct req){ "POST", "/v1/orders", NULL, "Basic abc", "k1", JSON, body }, 401, "Authorization");
	expect(&(struct req){ "POST", "/v1/orders", NULL, F.auth + 7, "k1", JSON, body }, 401, "Authorization");
	expect(&(struct req){ "POST", "/v1/scan", NULL, NULL, NULL, JSON, "{\"code\":\"x\"}" },
	       401, "Authorization");
	for (i = 0; i < sizeof paths / sizeof paths[0]; i++)
		expect(&(struct req){ paths[i][0], paths[i][1] }, 401, "Authorization");
	assert_int_equal(COUNT("SELECT count(*) FROM events"), 0);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 0);
	assert_int_equal(COUNT("SELECT count(*) FROM api_keys"), 0);
	/* health and metrics need no token */
	expect(&(struct req){ "GET", "/healthz" }, 200, NULL);
	expect(&(struct req){ "GET", "/metrics" }, 200, NULL);
}

/* A token another box recorded in the shared database is admitted here
 * (no file of it on this box); one no box recorded is not. */
static void test_token_recorded_by_another_box(void **state)
{
	const char *other = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	char sha[CODE_SHA256_HEX + 1], auth[100], sql[300];

	(void)state;
	snprintf(auth, sizeof auth, "Bearer %s", other);
	expect(&(struct req){ "GET", "/v1/stats", NULL, auth }, 401, "Authorization");
	code_sha256_hex(other, strlen(other), sha);
	snprintf(sql, sizeof sql, "INSERT INTO api_tokens (sha256, name, role, created_at) VALUES "
		 "('%s', 'api.token on box-b', 'operator', 1)", sha);
	assert_int_equal(db_exec(F.env->db, sql), SD_OK);
	expect(&(struct req){ "GET", "/v1/stats", NULL, auth }, 200, NULL);
	expect(&(struct req){ "GET", "/v1/stats", NULL, F.auth }, 200, NULL);
	assert_int_equal(db_exec(F.env->db, "DELETE FROM api_tokens WHERE name = 'api.token on box-b'"),
			 SD_OK);
	expect(&(struct req){ "GET", "/v1/stats", NULL, auth }, 401, "Authorization");
}

/* ======================== events ========================================= */

static void test_events(void **state)
{
	struct api_response res;
	char path[64];
	json_t *o;
	int64_t id;
	char big[API_BODY_MAX + 16];

	(void)state;
	id = add_event(40);
	snprintf(path, sizeof path, "/v1/events/%lld", (long long)id);
	call(&(struct req){ "GET", path, NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_string_equal(json_string_value(json_object_get(o, "name")), "Quartet");
	assert_string_equal(json_string_value(json_object_get(o, "starts_at")),
			    "2026-12-31T20:00:00Z");
	assert_int_equal(json_integer_value(json_object_get(o, "seats_sold")), 0);
	assert_int_equal(json_integer_value(json_object_get(o, "seats_remaining")), 40);
	json_decref(o);
	api_response_free(&res);

	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"a\",\"venue\":\"b\",\"starts_at\":\"2026-01-01T00:00Z\","
			      "\"capacity\":\"5\"}" }, 400, "capacity");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"a\",\"venue\":\"b\",\"starts_at\":\"tomorrow\","
			      "\"capacity\":5}" }, 400, "starts_at");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"\",\"venue\":\"b\",\"starts_at\":\"2026-01-01T00:00Z\","
			      "\"capacity\":5}" }, 400, "name");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"a\",\"starts_at\":\"2026-01-01T00:00Z\","
			      "\"capacity\":5}" }, 400, "venue");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"a\",\"venue\":\"b\",\"starts_at\":\"2026-01-01T00:00Z\","
			      "\"capacity\":0}" }, 400, "capacity");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"a\",\"venue\":\"b\",\"starts_at\":\"2026-01-01T00:00Z\","
			      "\"capacity\":5,\"vip\":1}" }, 400, "vip");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON, "{\"name\":" },
	       400, "");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON, "[1]" }, 400, "");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, "text/plain", "{}" },
	       415, "");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, NULL, "{}" }, 415, "");
	memset(big, ' ', sizeof big);
	big[0] = '{';
	big[sizeof big - 1] = '}';
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON, big, sizeof big },
	       413, "");
	/* a charset parameter is fine */
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL,
			      "Application/JSON; charset=utf-8",
			      "{\"name\":\"b\",\"venue\":\"c\",\"starts_at\":\"2026-01-01T00:00Z\","
			      "\"capacity\":3}" }, 201, NULL);
	assert_int_equal(COUNT("SELECT count(*) FROM events"), 2);
}

/* an answer's JSON, its status checked */
static json_t *answer(const struct req *q, int want)
{
	struct api_response res;
	json_t *o;

	call(q, &res);
	if (res.status != want)
		fail_msg("%s %s: want %d, got %d: %.*s", q->method, q->path, want, res.status,
			 (int)res.body_len, res.body);
	o = body_json(&res);
	api_response_free(&res);
	return o;
}

static const char *jstr(json_t *o, const char *f)
{
	return json_string_value(json_object_get(o, f));
}

/* An event's price, as a person writes it and in minor units: set, shown,
 * changed and taken away; refused with its field for a bad amount or
 * currency; an order charged the price of its seats, and owed back at the
 * window when cancelled. */
static void test_prices(void **state)
{
	static const char base[] = "{\"name\":\"Gala\",\"venue\":\"Hall\","
				   "\"starts_at\":\"2036-12-31T20:00Z\",\"capacity\":10,";
	char body[512], path[128], opath[80];
	json_t *o;
	int64_t ev;

	(void)state;
	snprintf(body, sizeof body, "%s\"price\":\"25.5\",\"currency\":\"eur\"}", base);
	o = answer(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON, body }, 201);
	assert_string_equal(jstr(o, "price"), "25.50");
	assert_int_equal(json_integer_value(json_object_get(o, "price_minor")), 2550);
	assert_string_equal(jstr(o, "currency"), "EUR");
	ev = json_integer_value(json_object_get(o, "id"));
	json_decref(o);
	snprintf(body, sizeof body, "%s\"price\":\"25.505\",\"currency\":\"EUR\"}", base);
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON, body }, 400, "price");
	snprintf(body, sizeof body, "%s\"price\":25,\"currency\":\"EUR\"}", base);
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON, body }, 400, "price");
	snprintf(body, sizeof body, "%s\"price\":\"25\",\"currency\":\"EURO\"}", base);
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON, body }, 400,
	       "currency");
	snprintf(body, sizeof body, "%s\"price\":\"25\"}", base);
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON, body }, 400,
	       "currency");
	assert_int_equal(COUNT("SELECT count(*) FROM events"), 1);
	/* an order is charged the price of its seats; cancelled, owed back at
	 * the window it was paid at */
	snprintf(body, sizeof body, "{\"event_id\":%lld,\"name\":\"Ann\",\"seats\":2,"
		 "\"payment\":\"card\"}", (long long)ev);
	o = answer(&(struct req){ "POST", "/v1/orders", NULL, F.auth, "price-1", JSON, body }, 201);
	snprintf(opath, sizeof opath, "/v1/orders/%s", jstr(o, "id"));
	json_decref(o);
	snprintf(path, sizeof path, "%s/cancel", opath);
	o = answer(&(struct req){ "POST", path, NULL, F.auth, NULL, JSON, "{}" }, 200);
	assert_string_equal(jstr(o, "refund"), "window");
	json_decref(o);
	o = answer(&(struct req){ "GET", opath, NULL, F.auth }, 200);
	assert_string_equal(jstr(o, "amount"), "51.00");
	assert_int_equal(json_integer_value(json_object_get(o, "amount_minor")), 5100);
	assert_true(json_is_null(json_object_get(o, "payment_ref")));
	assert_string_equal(jstr(json_object_get(o, "refund"), "via"), "window");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(o, "refund"),
							    "amount_minor")), 5100);
	json_decref(o);
	/* a new price for the seats sold from now on; none: the shop stops */
	snprintf(path, sizeof path, "/v1/events/%lld", (long long)ev);
	o = answer(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON,
				  "{\"price\":\"2500\",\"currency\":\"JPY\"}" }, 200);
	assert_string_equal(jstr(o, "price"), "2500");
	json_decref(o);
	expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON,
			      "{\"price\":\"25.5\",\"currency\":\"JPY\"}" }, 400, "price");
	o = answer(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON, "{\"price\":null}" },
		   200);
	assert_true(json_is_null(json_object_get(o, "price")));
	assert_true(json_is_null(json_object_get(o, "currency")));
	json_decref(o);
	assert_int_equal(COUNT("SELECT amount_minor FROM orders"), 5100);
	/* a box that takes payments through Stripe refuses a price Stripe could
	 * not charge, where it is set */
	{
		struct event_rules was = *event_rules_get(), stripe = was;

		stripe.stripe_prices = 1;
		event_rules_set(&stripe);
		snprintf(body, sizeof body, "%s\"price\":\"0.20\",\"currency\":\"EUR\"}", base);
		expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON, body }, 400,
		       "price");
		expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON,
				      "{\"price\":\"100\",\"currency\":\"IQD\"}" }, 400, "currency");
		o = answer(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON,
					  "{\"price\":\"0\",\"currency\":\"EUR\"}" }, 200);
		json_decref(o);
		event_rules_set(&was);
	}
}

/* An event's life through the API: changed (never a capacity below a seat
 * sold, never a start in the past), closed (no order after, the same
 * answer twice); the window's sale: its payment, no address, one order per
 * Idempotency-Key. */
static void test_event_life_and_the_window(void **state)
{
	char path[64], cpath[80], opath[64], body[256], id[ORDER_ID_MAX];
	int64_t ev;
	json_t *o;

	(void)state;
	ev = add_event(4);
	snprintf(path, sizeof path, "/v1/events/%lld", (long long)ev);
	snprintf(cpath, sizeof cpath, "/v1/events/%lld/close", (long long)ev);
	snprintf(body, sizeof body, "{\"event_id\":%lld,\"name\":\"Walk Up\",\"seats\":3,"
		 "\"payment\":\"cash\"}", (long long)ev);
	o = answer(&(struct req){ "POST", "/v1/orders", NULL, F.auth, "window-1", JSON, body },
		   201);
	assert_true(json_is_null(json_object_get(o, "email")));
	assert_string_equal(json_string_value(json_object_get(o, "payment")), "cash");
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(o, "id")));
	json_decref(o);
	/* a double click: the same key, the same order, nothing more */
	o = answer(&(struct req){ "POST", "/v1/orders", NULL, F.auth, "window-1", JSON, body },
		   201);
	assert_string_equal(json_string_value(json_object_get(o, "id")), id);
	json_decref(o);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
	assert_int_equal(COUNT("SELECT count(*) FROM tickets"), 3);
	snprintf(opath, sizeof opath, "/v1/orders/%s", id);
	o = answer(&(struct req){ "GET", opath, NULL, F.auth }, 200);
	assert_true(json_is_null(json_object_get(o, "email")));
	assert_string_equal(json_string_value(json_object_get(o, "payment")), "cash");
	json_decref(o);
	/* no address to send to */
	snprintf(opath, sizeof opath, "/v1/orders/%s/resend", id);
	expect(&(struct req){ "POST", opath, NULL, F.auth }, 409, "id");
	snprintf(body, sizeof body, "{\"event_id\":%lld,\"name\":\"X\",\"seats\":1,"
		 "\"payment\":\"cheque\"}", (long long)ev);
	expect(&(struct req){ "POST", "/v1/orders", NULL, F.auth, "bad-1", JSON, body }, 400,
	       "payment");
	snprintf(body, sizeof body, "{\"event_id\":%lld,\"name\":\"X\",\"seats\":1,"
		 "\"email\":\"\"}", (long long)ev);
	expect(&(struct req){ "POST", "/v1/orders", NULL, F.auth, "bad-2", JSON, body }, 400, "email");

	/* changes */
	expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON, "{\"capacity\":2}" }, 409,
	       "capacity");
	expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON, "{}" }, 400, "");
	expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON, "{\"seats\":2}" }, 400,
	       "seats");
	expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON,
			      "{\"starts_at\":\"1970-01-01T00:00Z\"}" }, 400, "starts_at");
	expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON,
			      "{\"starts_at\":\"soon\"}" }, 400, "starts_at");
	expect(&(struct req){ "PATCH", "/v1/events/99999", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"x\"}" }, 404, "");
	/* sold, it moves: each move is a change its buyers are told of */
	o = answer(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON,
				  "{\"venue\":\"Garden\"}" }, 200);
	assert_int_equal(json_integer_value(json_object_get(o, "change")), 1);
	assert_string_equal(json_string_value(json_object_get(o, "venue")), "Garden");
	json_decref(o);
	expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON,
			      "{\"reminders\":\"no\"}" }, 400, "reminders");
	assert_int_equal(COUNT("SELECT count(*) FROM event_runs WHERE kind = 'move' AND "
			       "old_venue = 'Hall' AND length(actor) > 0"), 1);
	o = answer(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON,
				  "{\"capacity\":3,\"name\":\"Quartet Live\"}" }, 200);
	assert_int_equal(json_integer_value(json_object_get(o, "capacity")), 3);
	assert_int_equal(json_integer_value(json_object_get(o, "seats_remaining")), 0);
	assert_string_equal(json_string_value(json_object_get(o, "name")), "Quartet Live");
	assert_string_equal(json_string_value(json_object_get(o, "venue")), "Garden");
	assert_string_equal(json_string_value(json_object_get(o, "starts_at")),
			    "2026-12-31T20:00:00Z");
	json_decref(o);
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"a\",\"venue\":\"b\",\"starts_at\":"
			      "\"1970-01-01T00:00Z\",\"capacity\":5}" }, 400, "starts_at");

	/* closed: no order after it, written or not */
	o = answer(&(struct req){ "POST", cpath, NULL, F.auth }, 200);
	assert_string_equal(json_string_value(json_object_get(o, "state")), "closed");
	assert_true(json_is_string(json_object_get(o, "closed_at")));
	json_decref(o);
	o = answer(&(struct req){ "POST", cpath, NULL, F.auth }, 200);
	assert_string_equal(json_string_value(json_object_get(o, "state")), "closed");
	json_decref(o);
	order_body(body, sizeof body, ev, 1);
	expect(&(struct req){ "POST", "/v1/orders", NULL, F.auth, "after-close", JSON, body }, 409,
	       "event_id");
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
	assert_int_equal(COUNT("SELECT count(*) FROM api_keys"), 1);
	expect(&(struct req){ "POST", "/v1/events/99999/close", NULL, F.auth }, 404, "");
}

/* ======================== orders and their keys ========================== */

static void test_order_replay(void **state)
{
	struct api_response a, b, c;
	char body[256], other[256];
	int64_t ev;
	json_t *o;

	(void)state;
	ev = add_event(10);
	order_body(body, sizeof body, ev, 2);
	post_order("key-1", body, &a);
	assert_int_equal(a.status, 201);
	o = body_json(&a);
	assert_int_equal(strlen(json_string_value(json_object_get(o, "id"))), 10);
	assert_int_equal(json_integer_value(json_object_get(o, "seats")), 2);
	json_decref(o);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
	assert_int_equal(COUNT("SELECT count(*) FROM tickets"), 2);
	assert_int_equal(COUNT("SELECT count(*) FROM outbox"), 2);
	assert_int_equal(COUNT("SELECT count(*) FROM api_keys"), 1);
	assert_int_equal(COUNT("SELECT count(*) FROM orders WHERE idempotency_key IS NULL"), 1);

	/* the same key and body: the first answer, byte for byte, nothing new */
	clock_fake_advance(5000);
	post_order("key-1", body, &b);
	assert_int_equal(b.status, 201);
	assert_int_equal(b.body_len, a.body_len);
	assert_memory_equal(b.body, a.body, a.body_len);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
	assert_int_equal(COUNT("SELECT count(*) FROM outbox"), 2);

	/* the same key, another body: 422, nothing new */
	order_body(other, sizeof other, ev, 3);
	post_order("key-1", other, &c);
	assert_int_equal(c.status, 422);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
	api_response_free(&a);
	api_response_free(&b);
	api_response_free(&c);

	/* another key: another order */
	post_order("key-2", body, &a);
	assert_int_equal(a.status, 201);
	api_response_free(&a);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 2);
}

static void test_order_refusals(void **state)
{
	char body[256];
	int64_t ev;
	struct req q = { "POST", "/v1/orders", NULL, NULL, "k", JSON, NULL };

	(void)state;
	ev = add_event(3);
	order_body(body, sizeof body, ev, 1);
	q.auth = F.auth;
	q.body = body;
	q.key = NULL;
	expect(&q, 400, "Idempotency-Key");
	q.key = "has space";
	expect(&q, 400, "Idempotency-Key");
	q.key = "k";
	q.ctype = "text/plain";
	expect(&q, 415, "");
	q.ctype = JSON;
	q.body = "{\"event_id\":1,\"name\":\"A\",\"email\":\"a@example.com\",\"seats\":\"two\"}";
	expect(&q, 400, "seats");
	q.body = "{\"event_id\":1,\"name\":\"A\",\"email\":\"a@example.com\",\"seats\":0}";
	expect(&q, 400, "seats");
	q.body = "{\"event_id\":1,\"name\":\"A\",\"email\":\"nope\",\"seats\":1}";
	expect(&q, 400, "email");
	q.body = "{\"event_id\":1,\"name\":\"A\\u0007\",\"email\":\"a@example.com\",\"seats\":1}";
	expect(&q, 400, "name");
	q.body = "{\"event_id\":1,\"email\":\"a@example.com\",\"seats\":1}";
	expect(&q, 400, "name");
	q.body = "{\"event_id\":1,\"name\":\"A\",\"email\":\"a@example.com\",\"seats\":1,\"x\":1}";
	expect(&q, 400, "x");
	q.body = "{\"event_id\":1,\"event_id\":2,\"name\":\"A\",\"email\":\"a@example.com\"}";
	expect(&q, 400, "");
	q.body = "{\"event_id\":1,";
	expect(&q, 400, "");
	q.body = "";
	expect(&q, 400, "");
	q.body = "{\"event_id\":999,\"name\":\"A\",\"email\":\"a@example.com\",\"seats\":1}";
	expect(&q, 404, "event_id");
	/* sold out: 4 seats of 3, refused whole, no ticket written */
	order_body(body, sizeof body, ev, 4);
	q.body = body;
	expect(&q, 422, "seats");
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 0);
	assert_int_equal(COUNT("SELECT count(*) FROM tickets"), 0);
	assert_int_equal(COUNT("SELECT count(*) FROM outbox"), 0);
	assert_int_equal(COUNT("SELECT count(*) FROM api_keys"), 0);
	/* the key was not spent on a refusal: fixed, it goes through */
	order_body(body, sizeof body, ev, 3);
	expect(&q, 201, NULL);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
}

/* The first request waits inside its transaction until the main thread has
 * sent the second one. */
struct hold {
	pthread_barrier_t reached, go;
	int armed;
};

static void hold_hook(const char *name, void *arg)
{
	struct hold *h = arg;

	if (strcmp(name, FP_API_ORDER_TX) != 0 || !__atomic_exchange_n(&h->armed, 0,
								       __ATOMIC_SEQ_CST))
		return;
	pthread_barrier_wait(&h->reached);
	pthread_barrier_wait(&h->go);
}

struct first {
	const char *body;
	struct api_response res;
};

static void *first_thread(void *arg)
{
	struct first *f = arg;

	post_order("same-key", f->body, &f->res);
	return NULL;
}

static void test_order_in_flight(void **state)
{
	struct hold h;
	struct first f;
	struct api_response second, third;
	char body[256];
	pthread_t t;

	(void)state;
	order_body(body, sizeof body, add_event(10), 1);
	pthread_barrier_init(&h.reached, NULL, 2);
	pthread_barrier_init(&h.go, NULL, 2);
	h.armed = 1;
	f.body = body;
	failpoint_set_hook(hold_hook, &h);
	assert_int_equal(pthread_create(&t, NULL, first_thread, &f), 0);
	pthread_barrier_wait(&h.reached);
	/* the first holds the key inside its transaction */
	post_order("same-key", body, &second);
	pthread_barrier_wait(&h.go);
	assert_int_equal(pthread_join(t, NULL), 0);
	failpoint_set_hook(NULL, NULL);
	pthread_barrier_destroy(&h.reached);
	pthread_barrier_destroy(&h.go);

	assert_int_equal(f.res.status, 201);
	assert_int_equal(second.status, 409);
	assert_string_equal(second.retry_after, API_RETRY_AFTER_S);
	assert_string_equal(f.res.retry_after, "");
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
	/* once it is done the key answers with the stored 201 */
	post_order("same-key", body, &third);
	assert_int_equal(third.status, 201);
	assert_int_equal(third.body_len, f.res.body_len);
	assert_memory_equal(third.body, f.res.body, f.res.body_len);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
	api_response_free(&f.res);
	api_response_free(&second);
	api_response_free(&third);
}

/* Another connection holds the writer lock (BEGIN IMMEDIATE) while an order
 * comes in: once the busy timeout passes (50 ms here, db_busy_timeout_set,
 * not the program's 10 s) the answer is 503 with Retry-After and a JSON
 * error, nothing is written, and the key is not spent. */
static void test_order_busy_503(void **state)
{
	struct api_response res;
	char body[256];
	int64_t started;
	json_t *o;

	(void)state;
	order_body(body, sizeof body, add_event(10), 2);
	db_busy_timeout_set(50);
	open_api(0);		/* its pooled connection waits 50 ms */
	assert_int_equal(db_begin(F.env->db), SD_OK);
	if (tu_pg()) {
		/* PostgreSQL's BEGIN takes no lock: hold the event's row, which
		 * intake locks first (lock_timeout is the busy timeout) */
		struct db_stmt *st = db_stmt(F.env->db, "SELECT id FROM events FOR UPDATE");

		assert_non_null(st);
		assert_int_equal(db_run(st), SD_OK);
	}
	started = clock_mono_us();
	post_order("k-busy", body, &res);
	db_rollback(F.env->db);
	assert_int_equal(res.status, 503);
	/* it waited for the lock, and not the program's 10 s */
	assert_true(clock_mono_us() - started >= 50 * 1000);
	assert_true(clock_mono_us() - started < 5000 * 1000);
	assert_string_equal(res.retry_after, API_RETRY_AFTER_S);
	assert_string_equal(res.content_type, "application/json");
	o = body_json(&res);
	assert_string_equal(json_string_value(json_object_get(o, "error")),
			    "the database is busy; try again");
	json_decref(o);
	api_response_free(&res);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 0);
	assert_int_equal(COUNT("SELECT count(*) FROM tickets"), 0);
	assert_int_equal(COUNT("SELECT count(*) FROM outbox"), 0);
	assert_int_equal(COUNT("SELECT count(*) FROM api_keys"), 0);

	/* the lock is gone: the same key and body go through, once */
	post_order("k-busy", body, &res);
	assert_int_equal(res.status, 201);
	assert_string_equal(res.retry_after, "");
	api_response_free(&res);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
	assert_int_equal(COUNT("SELECT count(*) FROM tickets"), 2);
	assert_int_equal(COUNT("SELECT count(*) FROM api_keys"), 1);
}

static void test_key_expiry(void **state)
{
	struct api_response a, b;
	char body[256], other[256];
	int64_t ev, n = 0;

	(void)state;
	open_api(60000);
	ev = add_event(10);
	order_body(body, sizeof body, ev, 1);
	order_body(other, sizeof other, ev, 2);
	post_order("k-exp", body, &a);
	assert_int_equal(a.status, 201);
	api_response_free(&a);
	assert_int_equal(clientkey_prune(F.env->db, clock_now_ms(), 100, &n), SD_OK);
	assert_int_equal(n, 0);
	clock_fake_advance(60000);
	/* the maintenance pass prunes it */
	{
		struct maint_stats ms;
		assert_int_equal(maint_tick(F.env->db, NULL, &ms), SD_OK);
		assert_int_equal(ms.api_keys_pruned, 1);
	}
	assert_int_equal(COUNT("SELECT count(*) FROM api_keys"), 0);
	/* an expired key is a new key again */
	post_order("k-exp", other, &b);
	assert_int_equal(b.status, 201);
	api_response_free(&b);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 2);
	/* expired but not yet pruned: also new */
	clock_fake_advance(60000);
	post_order("k-exp", body, &b);
	assert_int_equal(b.status, 201);
	api_response_free(&b);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 3);
	assert_int_equal(COUNT("SELECT count(*) FROM api_keys"), 1);
}

/* ======================== reading an order, its PDF, the door ============ */

/* run_job: a handler on job "outbox:N" of kind for the only order, as the
 * worker would run it. */
static enum job_outcome run_job(enum job_outcome (*fn)(struct handler_ctx *, const struct job *,
							struct job_result *),
				const char *kind_name, int64_t n)
{
	struct tickets_env *tenv = NULL;
	struct handler_ctx *ctx;
	struct job job;
	struct job_result jr;
	char payload[64], job_id[32], kind[32];
	enum job_outcome out;

	assert_int_equal(tickets_env_open(F.env->db_path, tu_state(F.env), NULL, NULL, NULL, &tenv), SD_OK);
	ctx = handler_ctx_new(F.env->db_path, tenv);
	snprintf(payload, sizeof payload, "{\"order_id\":%lld}",
		 (long long)COUNT("SELECT id FROM orders"));
	snprintf(job_id, sizeof job_id, "outbox:%lld", (long long)n);
	snprintf(kind, sizeof kind, "%s", kind_name);
	memset(&job, 0, sizeof job);
	job.id = n;
	job.lease_token = 1;
	job.deliveries = 1;
	job.job_id = job_id;
	job.kind = kind;
	job.payload = payload;
	memset(&jr, 0, sizeof jr);
	out = fn(ctx, &job, &jr);
	if (out != JOB_DONE)
		fail_msg("%s: outcome %d: %s", kind_name, (int)out, jr.error);
	handler_ctx_free(ctx);
	tickets_env_close(tenv);
	return out;
}

static void test_order_show_pdf_scan(void **state)
{
	struct api_response res;
	char body[256], path[128], id[ORDER_ID_MAX], code[CODE_TEXT_MAX], scan[160], kp[400];
	unsigned char key[CODE_KEY_LEN];
	int64_t ev, tid;
	json_t *o;

	(void)state;
	ev = add_event(10);
	order_body(body, sizeof body, ev, 1);
	post_order("k-show", body, &res);
	o = body_json(&res);
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(o, "id")));
	json_decref(o);
	api_response_free(&res);

	snprintf(path, sizeof path, "/v1/orders/%s", id);
	call(&(struct req){ "GET", path, NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_string_equal(json_string_value(json_object_get(o, "id")), id);
	assert_false(json_is_true(json_object_get(o, "pdf_stored")));
	assert_false(json_is_true(json_object_get(o, "email_sent")));
	/* the code names the ticket's code_id, a random number (code.h) */
	tid = json_integer_value(json_object_get(json_array_get(json_object_get(o, "tickets"), 0),
						 "id"));
	tid = tu_countf(F.env->db_path, "SELECT code_id FROM tickets WHERE id = %lld",
			(long long)tid);
	assert_true(tid >= CODE_ID_MIN);
	json_decref(o);
	api_response_free(&res);
	expect(&(struct req){ "GET", "/v1/orders/TNOSUCH22", NULL, F.auth }, 404, "");

	snprintf(path, sizeof path, "/v1/orders/%s/tickets.pdf", id);
	expect(&(struct req){ "GET", path, NULL, F.auth }, 404, "");
	/* render it as render_tickets does */
	run_job(ticket_job_render, "render_tickets", 1);
	call(&(struct req){ "GET", path, NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);
	assert_string_equal(res.content_type, "application/pdf");
	assert_true(res.body_len > 5);
	assert_memory_equal(res.body, "%PDF-", 5);
	api_response_free(&res);

	/* the door */
	assert_int_equal(code_key_path(F.env->db_path, tu_state(F.env), kp, sizeof kp), SD_OK);
	assert_int_equal(code_key_load(kp, key), SD_OK);
	code_make(key, tid, ev, code);
	snprintf(scan, sizeof scan, "{\"code\":\"%s\"}", code);
	call(&(struct req){ "POST", "/v1/scan", NULL, F.auth, NULL, JSON, scan }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_string_equal(json_string_value(json_object_get(o, "result")), "admitted");
	json_decref(o);
	api_response_free(&res);
	clock_fake_advance(1000);
	call(&(struct req){ "POST", "/v1/scan", NULL, F.auth, NULL, JSON, scan }, &res);
	o = body_json(&res);
	assert_string_equal(json_string_value(json_object_get(o, "result")), "already_scanned");
	assert_int_equal(json_integer_value(json_object_get(o, "scanned_at")), clock_now_ms() - 1000);
	json_decref(o);
	api_response_free(&res);
	call(&(struct req){ "POST", "/v1/scan", NULL, F.auth, NULL, JSON,
			    "{\"code\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}" }, &res);
	o = body_json(&res);
	assert_string_equal(json_string_value(json_object_get(o, "result")), "invalid");
	json_decref(o);
	api_response_free(&res);
	expect(&(struct req){ "POST", "/v1/scan", NULL, F.auth, NULL, JSON, "{\"code\":5}" },
	       400, "code");
}

/* a field of the JSON answer to q, as an integer (q must answer want) */
static int64_t answer_int(const struct req *q, int want, const char *field)
{
	struct api_response res;
	json_t *o;
	int64_t v;

	call(q, &res);
	if (res.status != want)
		fail_msg("%s %s: want %d, got %d: %s", q->method, q->path, want, res.status,
			 res.body);
	o = body_json(&res);
	v = json_integer_value(json_object_get(o, field));
	json_decref(o);
	api_response_free(&res);
	return v;
}

/*
 * A resend takes no body, or an empty object: anything else is 400 and
 * sends nothing.  One order is sent again at most resend_per_hour times an
 * hour (and resend_per_day a day): the next is 429 with Retry-After, sends
 * nothing, and goes through once the hour has passed.  The command line
 * holds the same limit, in one clear line.
 */
static void test_resend_body_and_limit(void **state)
{
	struct api_opts o = { F.env->db_path, tu_state(F.env), 0, alive_fn, NULL, 1 };
	struct api_response res;
	char body[256], id[ORDER_ID_MAX], path[128];
	static const char *const bad[] = { "{", "\x01\x02binary", "{\"to\":\"attacker@evil.example\"}",
					   "[]", "\"resend\"" };
	size_t i;
	json_t *j;

	(void)state;
	o.resend_per_hour = 3;
	o.resend_per_day = 10;
	open_api_opts(&o);
	order_body(body, sizeof body, add_event(3), 1);
	post_order("k-bomb", body, &res);
	j = body_json(&res);
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(j, "id")));
	json_decref(j);
	api_response_free(&res);
	snprintf(path, sizeof path, "/v1/orders/%s/resend", id);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		expect(&(struct req){ "POST", path, NULL, F.auth, NULL, JSON, bad[i] }, 400, NULL);
	assert_int_equal(COUNT("SELECT resends FROM orders WHERE id = 1"), 0);
	/* three in an hour */
	assert_int_equal(answer_int(&(struct req){ "POST", path, NULL, F.auth }, 202, "resend"), 1);
	assert_int_equal(answer_int(&(struct req){ "POST", path, NULL, F.auth, NULL, JSON, "{}" },
				    202, "resend"), 2);
	clock_fake_advance(10 * 60 * 1000);
	assert_int_equal(answer_int(&(struct req){ "POST", path, NULL, F.auth }, 202, "resend"), 3);
	call(&(struct req){ "POST", path, NULL, F.auth }, &res);
	assert_int_equal(res.status, 429);
	assert_string_equal(res.retry_after, "3000");	/* the first one leaves the hour */
	assert_non_null(strstr(res.body, "resend_per_hour"));
	api_response_free(&res);
	assert_int_equal(COUNT("SELECT resends FROM orders WHERE id = 1"), 3);
	assert_int_equal(COUNT("SELECT count(*) FROM outbox WHERE kind = 'send_tickets'"), 3);
	/* an hour after the first, one more */
	clock_fake_advance(50 * 60 * 1000 + 1);
	assert_int_equal(answer_int(&(struct req){ "POST", path, NULL, F.auth }, 202, "resend"), 4);
	open_api_opts(&(struct api_opts){ F.env->db_path, tu_state(F.env), 0, alive_fn, NULL, 1 });
}

/* `order resend` at the counter holds the box's limit, in one clear line */
static void test_resend_limit_on_the_command_line(void **state)
{
	struct tu_env *e = *state;
	char out[256], err[512], ev[32], id[ORDER_ID_MAX];
	int i;

	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "event", "add", "--db", e->db_path, "--name",
						       "Night", "--venue", "Hall", "--starts-at",
						       "2030-01-01T20:00Z", "--capacity", "10",
						       NULL }), 0);
	snprintf(ev, sizeof ev, "%.*s", (int)strcspn(out, "\n"), out);
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "order", "add", "--db", e->db_path, "--event",
						       ev, "--name", "Ann", "--email",
						       "ann@example.org", "--seats", "1", NULL }), 0);
	snprintf(id, sizeof id, "%.*s", (int)strcspn(out, "\n"), out);
	for (i = 0; i < 3; i++)
		assert_int_equal(tu_run(out, sizeof out, err, sizeof err,
					(const char *const[]){ "order", "resend", id, "--db",
							       e->db_path, NULL }), 0);
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err,
				(const char *const[]){ "order", "resend", id, "--db", e->db_path,
						       NULL }), 1);
	assert_non_null(strstr(err, "was sent again 3 times in the last hour (resend_per_hour)"));
	assert_int_equal(strchr(err, '\n') - err + 1, (long)strlen(err));	/* one line */
	assert_int_equal(tu_count(e->db_path, "SELECT resends FROM orders"), 3);
	/* the setting decides */
	setenv("STAGEDOOR_RESEND_PER_HOUR", "5", 1);
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err,
				(const char *const[]){ "order", "resend", id, "--db", e->db_path,
						       NULL }), 0);
	unsetenv("STAGEDOOR_RESEND_PER_HOUR");
}

/*
 * The box office over HTTP: a resend (202; with an Idempotency-Key a retry
 * replays the first answer), a new address (PATCH), a cancellation (twice:
 * already; with an admitted ticket: 409 naming it), the search, the sales by
 * the hour, the door's counts and its log, the scan's nonce, the queue's
 * history; bad input a 4xx with a JSON error, and nothing written.
 */
static void test_orders_that_change(void **state)
{
	struct api_response res;
	char body[256], id[ORDER_ID_MAX], id2[ORDER_ID_MAX], path[128], evpath[64], scan[200];
	char code[CODE_TEXT_MAX], kp[400], q[64];
	unsigned char key[CODE_KEY_LEN];
	int64_t ev, tid;
	json_t *o, *a;

	(void)state;
	ev = add_event(3);
	order_body(body, sizeof body, ev, 2);
	post_order("k-change-1", body, &res);
	o = body_json(&res);
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(o, "id")));
	json_decref(o);
	api_response_free(&res);
	order_body(body, sizeof body, ev, 1);
	post_order("k-change-2", body, &res);
	o = body_json(&res);
	snprintf(id2, sizeof id2, "%s", json_string_value(json_object_get(o, "id")));
	json_decref(o);
	api_response_free(&res);

	/* resend: a new intent each time; a retry with its key is the first */
	snprintf(path, sizeof path, "/v1/orders/%s/resend", id);
	assert_int_equal(answer_int(&(struct req){ "POST", path, NULL, F.auth }, 202, "resend"), 1);
	assert_int_equal(answer_int(&(struct req){ "POST", path, NULL, F.auth, "r-1" }, 202,
				    "resend"), 2);
	assert_int_equal(answer_int(&(struct req){ "POST", path, NULL, F.auth, "r-1" }, 202,
				    "resend"), 2);
	assert_int_equal(COUNT("SELECT resends FROM orders WHERE id = 1"), 2);
	assert_int_equal(COUNT("SELECT count(*) FROM outbox WHERE kind = 'send_tickets'"), 2);
	expect(&(struct req){ "POST", "/v1/orders/TNOSUCH22/resend", NULL, F.auth }, 404, "");

	/* a new address */
	snprintf(path, sizeof path, "/v1/orders/%s", id);
	call(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON, "{\"email\":\"new@example.org\"}" },
	     &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_string_equal(json_string_value(json_object_get(o, "email")), "new@example.org");
	a = json_object_get(o, "changes");
	assert_int_equal(json_array_size(a), 3);
	assert_string_equal(json_string_value(json_object_get(json_array_get(a, 2), "kind")), "email");
	assert_string_equal(json_string_value(json_object_get(json_array_get(a, 2), "detail")),
			    "ada@example.com");
	json_decref(o);
	api_response_free(&res);
	expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON, "{\"email\":\"nope\"}" }, 400,
	       "email");
	expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, JSON, "{\"name\":\"x\"}" }, 400,
	       "name");
	expect(&(struct req){ "PATCH", path, NULL, F.auth, NULL, "text/plain", "x" }, 415, NULL);
	assert_int_equal(COUNT("SELECT count(*) FROM orders WHERE buyer_email = 'new@example.org'"), 1);

	/* the search: an id, an address in capitals, a part of a name */
	snprintf(q, sizeof q, "q=%.5s", id);
	call(&(struct req){ "GET", "/v1/orders", q, F.auth }, &res);
	o = body_json(&res);
	assert_true(json_array_size(json_object_get(o, "orders")) >= 1);
	json_decref(o);
	api_response_free(&res);
	call(&(struct req){ "GET", "/v1/orders", "q=NEW%40EXAMPLE.ORG", F.auth }, &res);
	o = body_json(&res);
	assert_int_equal(json_array_size(json_object_get(o, "orders")), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(o,
				"orders"), 0), "id")), id);
	json_decref(o);
	api_response_free(&res);
	call(&(struct req){ "GET", "/v1/orders", "q=lovel", F.auth }, &res);
	o = body_json(&res);
	assert_int_equal(json_array_size(json_object_get(o, "orders")), 2);
	json_decref(o);
	api_response_free(&res);
	expect(&(struct req){ "GET", "/v1/orders", "q=", F.auth }, 400, "q");

	/* the door admits the second order's ticket, with a nonce */
	assert_int_equal(code_key_path(F.env->db_path, tu_state(F.env), kp, sizeof kp), SD_OK);
	assert_int_equal(code_key_load(kp, key), SD_OK);
	tid = COUNT("SELECT code_id FROM tickets ORDER BY id DESC LIMIT 1");
	code_make(key, tid, ev, code);
	snprintf(scan, sizeof scan, "{\"code\":\"%s\",\"nonce\":\"n-7\"}", code);
	call(&(struct req){ "POST", "/v1/scan", NULL, F.auth, NULL, JSON, scan }, &res);
	o = body_json(&res);
	assert_string_equal(json_string_value(json_object_get(o, "result")), "admitted");
	json_decref(o);
	{
		struct api_response again;

		clock_fake_advance(1000);
		call(&(struct req){ "POST", "/v1/scan", NULL, F.auth, NULL, JSON, scan }, &again);
		assert_int_equal(again.body_len, res.body_len);	/* the first answer, byte for byte */
		assert_memory_equal(again.body, res.body, res.body_len);
		api_response_free(&again);
	}
	api_response_free(&res);
	expect(&(struct req){ "POST", "/v1/scan", NULL, F.auth, NULL, JSON,
			      "{\"code\":\"x\",\"nonce\":\"a b\"}" }, 400, "nonce");
	assert_int_equal(COUNT("SELECT count(*) FROM scans"), 1);

	/* cancel: the admitted ticket's order is refused, the other cancelled once */
	snprintf(path, sizeof path, "/v1/orders/%s/cancel", id2);
	call(&(struct req){ "POST", path, NULL, F.auth, NULL, JSON, "{\"reason\":\"late\"}" }, &res);
	assert_int_equal(res.status, 409);
	o = body_json(&res);
	assert_int_equal(json_array_size(json_object_get(o, "admitted")), 1);
	assert_non_null(strstr(json_string_value(json_object_get(o, "error")), "admitted"));
	json_decref(o);
	api_response_free(&res);
	snprintf(path, sizeof path, "/v1/orders/%s/cancel", id);
	expect(&(struct req){ "POST", path, NULL, F.auth, NULL, JSON, "{\"reason\":5}" }, 400,
	       "reason");
	assert_int_equal(answer_int(&(struct req){ "POST", path, NULL, F.auth, NULL, JSON,
						   "{\"reason\":\"double booking\"}" }, 200,
				    "seats_freed"), 2);
	call(&(struct req){ "POST", path, NULL, F.auth }, &res);	/* no body: no reason */
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_true(json_is_true(json_object_get(o, "already")));
	json_decref(o);
	api_response_free(&res);
	snprintf(path, sizeof path, "/v1/orders/%s/resend", id);
	expect(&(struct req){ "POST", path, NULL, F.auth }, 409, "id");
	assert_int_equal(COUNT("SELECT count(*) FROM outbox WHERE kind = 'cancel_order'"), 1);

	/* the event's counts, sales and scans; the queue's history */
	snprintf(evpath, sizeof evpath, "/v1/events/%lld", (long long)ev);
	assert_int_equal(answer_int(&(struct req){ "GET", evpath, NULL, F.auth }, 200, "seats_sold"),
			 1);
	assert_int_equal(answer_int(&(struct req){ "GET", evpath, NULL, F.auth }, 200, "admitted"),
			 1);
	assert_int_equal(answer_int(&(struct req){ "GET", evpath, NULL, F.auth }, 200, "cancelled"),
			 2);
	assert_int_equal(answer_int(&(struct req){ "GET", evpath, NULL, F.auth }, 200, "to_come"), 0);
	snprintf(evpath, sizeof evpath, "/v1/events/%lld/sales", (long long)ev);
	call(&(struct req){ "GET", evpath, NULL, F.auth }, &res);
	o = body_json(&res);
	a = json_object_get(o, "hours");
	assert_int_equal(json_array_size(a), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 0), "seats")), 3);
	assert_int_equal(json_integer_value(json_object_get(o, "capacity")), 3);
	json_decref(o);
	api_response_free(&res);
	snprintf(evpath, sizeof evpath, "/v1/events/%lld/scans", (long long)ev);
	call(&(struct req){ "GET", evpath, NULL, F.auth }, &res);
	o = body_json(&res);
	assert_int_equal(json_integer_value(json_object_get(o, "admitted")), 1);
	a = json_object_get(o, "per_door");
	assert_int_equal(json_array_size(a), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 0), "admitted")), 1);
	json_decref(o);
	api_response_free(&res);
	expect(&(struct req){ "GET", "/v1/events/999/scans", NULL, F.auth }, 404, "");
	call(&(struct req){ "GET", "/v1/stats/history", NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_true(json_is_array(json_object_get(o, "minutes")));
	json_decref(o);
	api_response_free(&res);
}

/*
 * A row stored before text was checked strictly (a surrogate, an overlong
 * form, a code point past U+10FFFF, a bidi override) is shown escaped by
 * every read path and still renders and sends: never a 500, never a job
 * gone dead for a stored value.  New text like it is refused at the door.
 */
static void test_stored_bad_text_is_shown_escaped(void **state)
{
	struct api_response res;
	char body[256], path[128], id[ORDER_ID_MAX];
	struct db_stmt *st;
	int64_t ev;
	json_t *o;

	TU_SQLITE_ONLY();	/* PostgreSQL refuses such bytes on the way in */

	(void)state;
	ev = add_event(10);
	order_body(body, sizeof body, ev, 1);
	post_order("k-bad-text", body, &res);
	assert_int_equal(res.status, 201);
	o = body_json(&res);
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(o, "id")));
	json_decref(o);
	api_response_free(&res);
	st = db_stmt(F.env->db, "UPDATE events SET name = ?1, venue = ?2 WHERE id = ?3");
	db_bind_text(st, 1, "Bad \xed\xa0\x80 \xe2\x80\xae");
	db_bind_text(st, 2, "H\xe0\x80\xaf");
	db_bind_int(st, 3, ev);
	assert_int_equal(db_run(st), SD_OK);
	st = db_stmt(F.env->db, "UPDATE orders SET buyer_name = ?1");
	db_bind_text(st, 1, "Ana \xf4\x90\x80\x80");
	assert_int_equal(db_run(st), SD_OK);

	snprintf(path, sizeof path, "/v1/events/%lld", (long long)ev);
	call(&(struct req){ "GET", path, NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_string_equal(json_string_value(json_object_get(o, "name")),
			    "Bad \\xED\\xA0\\x80 \\u{202E}");
	assert_string_equal(json_string_value(json_object_get(o, "venue")), "H\\xE0\\x80\\xAF");
	json_decref(o);
	api_response_free(&res);
	call(&(struct req){ "GET", "/v1/stats", NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);
	api_response_free(&res);
	snprintf(path, sizeof path, "/v1/orders/%s", id);
	call(&(struct req){ "GET", path, NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_string_equal(json_string_value(json_object_get(o, "name")),
			    "Ana \\xF4\\x90\\x80\\x80");
	json_decref(o);
	api_response_free(&res);

	/* the order still completes: its PDF renders and its email goes out */
	run_job(ticket_job_render, "render_tickets", 1);
	assert_int_equal(COUNT("SELECT count(*) FROM tickets WHERE pdf_key IS NULL"), 0);
	run_job(ticket_job_send, "send_tickets", 2);
	assert_int_equal(COUNT("SELECT count(*) FROM email_sends WHERE sent_at IS NOT NULL"), 1);

	/* and the same text is refused when it comes in now */
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"a\\u202eb\",\"venue\":\"b\","
			      "\"starts_at\":\"2026-01-01T00:00Z\",\"capacity\":5}" }, 400, "name");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"a\",\"venue\":\"\\u0085\","
			      "\"starts_at\":\"2026-01-01T00:00Z\",\"capacity\":5}" }, 400, "venue");
	snprintf(body, sizeof body, "{\"event_id\":%lld,\"name\":\"Ana \\u2066x\","
		 "\"email\":\"ana@example.com\",\"seats\":1}", (long long)ev);
	expect(&(struct req){ "POST", "/v1/orders", NULL, F.auth, "k-bidi", JSON, body }, 400,
	       "name");
	expect(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"\xed\xa0\x80\",\"venue\":\"b\","
			      "\"starts_at\":\"2026-01-01T00:00Z\",\"capacity\":5}" }, 400, NULL);
	assert_int_equal(COUNT("SELECT count(*) FROM events"), 1);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
}

/* The free space of the database's folder and of the state folder, in
 * /healthz, /v1/stats and /metrics: a state folder on a 4 MiB tmpfs is low
 * against an 8 MiB threshold (503) and fine against 1 MiB (200). */
static void test_disk_space(void **state)
{
	struct api_response res;
	char small[300], cmd[400];
	struct api_opts o = { F.env->db_path, small, 0, alive_fn, NULL, 8LL << 20 };
	json_t *h, *d;
	int64_t sfree;

	(void)state;
	snprintf(small, sizeof small, "%s/small", F.env->dir);
	assert_int_equal(mkdir(small, 0700), 0);
	snprintf(cmd, sizeof cmd, "mount -t tmpfs -o size=4m tmpfs '%s'", small);
	if (system(cmd) != 0)
		fail_msg("cannot mount a 4 MiB tmpfs on %s (the test needs root)", small);
	assert_int_equal(statedir_init(F.env->db_path, small), SD_OK);
	assert_int_equal(token_ensure(F.env->db_path, small), SD_OK);
	open_api_opts(&o);

	call(&(struct req){ "GET", "/healthz" }, &res);
	h = body_json(&res);
	d = json_object_get(h, "disk");
	sfree = json_integer_value(json_object_get(d, "state_free_bytes"));
	if (res.status != 503 || !json_is_true(json_object_get(d, "low")) ||
	    json_is_true(json_object_get(h, "ok")) || sfree <= 0 || sfree > (4LL << 20) ||
	    (tu_pg() ? !json_is_null(json_object_get(d, "db_free_bytes")) :
		       json_integer_value(json_object_get(d, "db_free_bytes")) <= (4LL << 20)) ||
	    json_integer_value(json_object_get(d, "warn_bytes")) != (8LL << 20))
		fail_msg("healthz with 4 MiB against 8: %d %.*s", res.status, (int)res.body_len,
			 res.body);
	json_decref(h);
	api_response_free(&res);
	call(&(struct req){ "GET", "/metrics" }, &res);
	assert_non_null(strstr(res.body, "\nstagedoor_disk_free_bytes{folder=\"state\"} "));
	assert_non_null(strstr(res.body, "\nstagedoor_disk_free_bytes{folder=\"db\"} "));
	assert_non_null(strstr(res.body, "\nstagedoor_disk_warn_bytes 8388608\n"));
	api_response_free(&res);
	call(&(struct req){ "GET", "/v1/stats", NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);	/* stats report it; only health fails */
	h = body_json(&res);
	assert_true(json_is_true(json_object_get(json_object_get(h, "disk"), "low")));
	json_decref(h);
	api_response_free(&res);

	o.disk_warn_bytes = 1LL << 20;
	open_api_opts(&o);
	call(&(struct req){ "GET", "/healthz" }, &res);
	h = body_json(&res);
	if (res.status != 200 || json_is_true(json_object_get(json_object_get(h, "disk"), "low")))
		fail_msg("healthz with 4 MiB against 1: %d %.*s", res.status, (int)res.body_len,
			 res.body);
	json_decref(h);
	api_response_free(&res);
	api_close(F.api);
	F.api = NULL;
	assert_int_equal(umount2(small, 0), 0);
}

/* ======================== jobs, stats, health, metrics =================== */

/* the queue's controls: pause, limits, resume, cancel, and what they refuse */
static void test_controls(void **state)
{
	struct enqueue e = { "noop", NULL, "job-later-1", 3600000, 0 };
	json_t *o;

	(void)state;
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	o = answer(&(struct req){ "POST", "/v1/kinds/noop/pause", NULL, F.auth }, 200);
	assert_true(json_is_true(json_object_get(o, "paused")));
	assert_int_equal(json_integer_value(json_object_get(o, "waiting")), 1);
	json_decref(o);
	o = answer(&(struct req){ "PUT", "/v1/kinds/noop/limits", NULL, F.auth, NULL, JSON,
				  "{\"rate\":\"10/s burst 20\",\"concurrency\":3}" }, 200);
	assert_string_equal(jstr(o, "rate"), "10/s burst 20");
	assert_int_equal(json_integer_value(json_object_get(o, "concurrency")), 3);
	assert_true(json_is_null(json_object_get(o, "box_concurrency")));
	json_decref(o);
	o = answer(&(struct req){ "GET", "/v1/controls", NULL, F.auth }, 200);
	assert_int_equal(json_array_size(json_object_get(o, "controls")), 1);
	json_decref(o);
	expect(&(struct req){ "PUT", "/v1/kinds/noop/limits", NULL, F.auth, NULL, JSON,
			      "{\"rate\":\"fast\"}" }, 400, "rate");
	expect(&(struct req){ "PUT", "/v1/kinds/noop/limits", NULL, F.auth, NULL, JSON,
			      "{\"concurrency\":-1}" }, 400, "concurrency");
	expect(&(struct req){ "PUT", "/v1/kinds/noop/limits", NULL, F.auth, NULL, JSON,
			      "{\"speed\":1}" }, 400, "speed");
	expect(&(struct req){ "POST", "/v1/kinds/no%20good/pause", NULL, F.auth }, 404, "");
	expect(&(struct req){ "POST", "/v1/kinds/sqs:none/pause", NULL, F.auth }, 404, "");
	/* the limits off and the pause lifted: no control is left */
	expect(&(struct req){ "PUT", "/v1/kinds/noop/limits", NULL, F.auth, NULL, JSON, "{}" }, 200,
	       NULL);
	o = answer(&(struct req){ "POST", "/v1/kinds/noop/resume", NULL, F.auth }, 200);
	assert_true(json_is_false(json_object_get(o, "paused")));
	json_decref(o);
	o = answer(&(struct req){ "GET", "/v1/controls", NULL, F.auth }, 200);
	assert_int_equal(json_array_size(json_object_get(o, "controls")), 0);
	json_decref(o);
	/* cancel: once, then there is nothing to cancel */
	o = answer(&(struct req){ "POST", "/v1/jobs/job-later-1/cancel", NULL, F.auth }, 200);
	assert_int_equal(json_integer_value(json_object_get(o, "cancelled")), 1);
	json_decref(o);
	expect(&(struct req){ "POST", "/v1/jobs/job-later-1/cancel", NULL, F.auth }, 404, "");
	assert_int_equal(COUNT("SELECT count(*) FROM cancelled_jobs WHERE cancelled_by LIKE "
			       "'token:%'"), 1);
	o = answer(&(struct req){ "GET", "/v1/jobs", "state=cancelled", F.auth }, 200);
	assert_int_equal(json_array_size(json_object_get(o, "jobs")), 1);
	json_decref(o);
}

/* periodic jobs: made, listed, refused, removed */
static void test_schedules(void **state)
{
	json_t *o;

	(void)state;
	o = answer(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
				  "{\"name\":\"sweep\",\"kind\":\"noop\",\"every\":\"5m\","
				  "\"payload\":{\"n\":1},\"missed\":\"skip\"}" }, 201);
	assert_int_equal(json_integer_value(json_object_get(o, "every_ms")), 300000);
	assert_string_equal(jstr(o, "missed"), "skip");
	assert_true(json_integer_value(json_object_get(o, "next_at")) % 300000 == 0);
	json_decref(o);
	expect(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"sweep\",\"kind\":\"noop\",\"every\":\"5m\"}" },
	       409, "name");
	expect(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"b\",\"kind\":\"noop\",\"every\":\"soon\"}" }, 400,
	       "every");
	expect(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"b\",\"kind\":\"noop\",\"every\":\"5m\","
			      "\"payload\":[1]}" }, 400, "payload");
	expect(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"B B\",\"kind\":\"noop\",\"every\":\"5m\"}" }, 400,
	       "name");
	o = answer(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
				  "{\"name\":\"monday\",\"kind\":\"noop\",\"cron\":\"0 9 * * MON\","
				  "\"timezone\":\"Europe/Berlin\"}" }, 201);
	assert_true(json_is_null(json_object_get(o, "every_ms")));
	assert_string_equal(jstr(o, "cron"), "0 9 * * MON");
	assert_string_equal(jstr(o, "timezone"), "Europe/Berlin");
	json_decref(o);
	expect(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"b\",\"kind\":\"noop\",\"cron\":\"0 9 * *\"}" }, 400,
	       "cron");
	expect(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"b\",\"kind\":\"noop\",\"cron\":\"0 0 31 2 *\"}" }, 400,
	       "cron");
	expect(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"b\",\"kind\":\"noop\",\"cron\":\"0 9 * * *\","
			      "\"timezone\":\"../../etc/passwd\"}" }, 400, "timezone");
	expect(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"b\",\"kind\":\"noop\",\"every\":\"5m\","
			      "\"cron\":\"0 9 * * *\"}" }, 400, "cron");
	expect(&(struct req){ "POST", "/v1/schedules", NULL, F.auth, NULL, JSON,
			      "{\"name\":\"b\",\"kind\":\"noop\"}" }, 400, "every");
	expect(&(struct req){ "DELETE", "/v1/schedules/monday", NULL, F.auth }, 200, NULL);
	o = answer(&(struct req){ "GET", "/v1/schedules", NULL, F.auth }, 200);
	assert_int_equal(json_array_size(json_object_get(o, "schedules")), 1);
	json_decref(o);
	expect(&(struct req){ "DELETE", "/v1/schedules/sweep", NULL, F.auth }, 200, NULL);
	expect(&(struct req){ "DELETE", "/v1/schedules/sweep", NULL, F.auth }, 404, "");
	assert_int_equal(COUNT("SELECT count(*) FROM schedules"), 0);
}

static void test_jobs_retry(void **state)
{
	struct api_response res;
	struct enqueue e = { "noop", NULL, "job-dead-1", 0, 0 };
	struct job *j[1];
	json_t *o;
	int n = 0, dead = 0;

	(void)state;
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	assert_int_equal(queue_claim(F.env->db, "w", 1, 0, j, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(queue_fail(F.env->db, j[0], "boom", 1, &dead), SD_OK);
	assert_int_equal(dead, 1);
	job_free(j[0]);

	call(&(struct req){ "GET", "/v1/jobs", "state=dead", F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_int_equal(json_array_size(json_object_get(o, "jobs")), 1);
	assert_string_equal(json_string_value(json_object_get(
		json_array_get(json_object_get(o, "jobs"), 0), "job_id")), "job-dead-1");
	json_decref(o);
	api_response_free(&res);
	expect(&(struct req){ "GET", "/v1/jobs", "state=bogus", F.auth }, 400, "state");
	expect(&(struct req){ "GET", "/v1/jobs", "limit=0", F.auth }, 400, "limit");
	expect(&(struct req){ "GET", "/v1/jobs", "kind=no%20good", F.auth }, 400, "kind");
	call(&(struct req){ "GET", "/v1/jobs", "kind=noop&state=ready", F.auth }, &res);
	o = body_json(&res);
	assert_int_equal(json_array_size(json_object_get(o, "jobs")), 0);
	json_decref(o);
	api_response_free(&res);

	expect(&(struct req){ "POST", "/v1/jobs/job-dead-1/retry", NULL, F.auth }, 200, NULL);
	expect(&(struct req){ "POST", "/v1/jobs/job-dead-1/retry", NULL, F.auth }, 404, "");
	expect(&(struct req){ "POST", "/v1/jobs/nope/retry", NULL, F.auth }, 404, "");
	call(&(struct req){ "GET", "/v1/jobs", "state=ready", F.auth }, &res);
	o = body_json(&res);
	assert_int_equal(json_array_size(json_object_get(o, "jobs")), 1);
	json_decref(o);
	api_response_free(&res);
}

static void test_stats_metrics_health(void **state)
{
	struct api_response res;
	char body[256];
	json_t *o;
	int64_t ev, n = 0;

	(void)state;
	ev = add_event(10);
	order_body(body, sizeof body, ev, 3);
	post_order("k-stats", body, &res);
	api_response_free(&res);
	assert_int_equal(outbox_relay_batch(F.env->db, 100, &n), SD_OK);
	assert_int_equal(n, 2);

	call(&(struct req){ "GET", "/v1/stats", NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_int_equal(json_integer_value(json_object_get(o, "orders")), 1);
	assert_int_equal(json_integer_value(json_object_get(o, "emails_sent")), 0);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
		json_object_get(o, "jobs"), "total"), "ready")), 2);
	assert_non_null(json_object_get(json_object_get(json_object_get(o, "jobs"), "by_kind"),
					"render_tickets"));
	assert_int_equal(json_integer_value(json_object_get(json_array_get(
		json_object_get(o, "events"), 0), "seats_sold")), 3);
	json_decref(o);
	api_response_free(&res);

	call(&(struct req){ "GET", "/metrics" }, &res);
	assert_int_equal(res.status, 200);
	assert_string_equal(res.content_type, "text/plain; version=0.0.4");
	assert_non_null(strstr(res.body, "stagedoor_jobs{state=\"ready\",kind=\"render_tickets\"} 1\n"));
	assert_non_null(strstr(res.body, "stagedoor_jobs_done_total{kind=\"render_tickets\"} 0\n"));
	assert_non_null(strstr(res.body, "\nstagedoor_dead_jobs 0\n"));
	assert_non_null(strstr(res.body, "\nstagedoor_emails_sent_total 0\n"));
	assert_non_null(strstr(res.body, "\nstagedoor_reclaims_total 0\n"));
	assert_non_null(strstr(res.body, "\nstagedoor_wal_bytes "));
	assert_non_null(strstr(res.body, "\nstagedoor_orders_total 1\n"));
	api_response_free(&res);

	call(&(struct req){ "GET", "/healthz" }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_true(json_is_true(json_object_get(o, "ok")));
	assert_string_equal(json_string_value(json_object_get(o, "db")), "ok");
	assert_int_equal(json_integer_value(json_object_get(o, "workers_alive")), 2);
	assert_true(json_is_integer(json_object_get(o, "wal_bytes")));
	json_decref(o);
	api_response_free(&res);
	F.alive = 0;
	expect(&(struct req){ "GET", "/healthz" }, 503, NULL);
}

/* ---- the kept totals ---------------------------------------------------- */

static int totals_equal(const struct totals_check *c, void *arg)
{
	int *events = arg;

	(*events)++;
	if (memcmp(&c->kept, &c->rows, sizeof c->kept) != 0)
		fail_msg("event %lld: kept %lld orders %lld tickets %lld with a key %lld pdfs %lld sent,"
			 " counted %lld %lld %lld %lld %lld", (long long)c->event_id,
			 (long long)c->kept.orders, (long long)c->kept.tickets,
			 (long long)c->kept.tickets_pdf, (long long)c->kept.pdfs,
			 (long long)c->kept.emails_sent, (long long)c->rows.orders,
			 (long long)c->rows.tickets, (long long)c->rows.tickets_pdf,
			 (long long)c->rows.pdfs, (long long)c->rows.emails_sent);
	return 0;
}

/* event_totals equals a full count for every event, and /v1/stats and
 * /metrics show what a full count of the rows says. */
static void assert_totals_exact(int want_events)
{
	struct api_response res;
	char line[96];
	int events = 0;
	json_t *o, *ev;
	size_t i;

	assert_int_equal(event_check_totals(F.env->db, totals_equal, &events), SD_OK);
	assert_int_equal(events, want_events);
	call(&(struct req){ "GET", "/v1/stats", NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_int_equal(json_integer_value(json_object_get(o, "orders")),
			 COUNT("SELECT count(*) FROM orders"));
	assert_int_equal(json_integer_value(json_object_get(o, "emails_sent")),
			 COUNT("SELECT count(*) FROM email_sends WHERE kind = 'tickets' AND "
			       "sent_at IS NOT NULL"));
	json_array_foreach(json_object_get(o, "events"), i, ev) {
		int64_t id = json_integer_value(json_object_get(ev, "id"));
		assert_int_equal(json_integer_value(json_object_get(ev, "orders")),
				 tu_countf(F.env->db_path, "SELECT count(*) FROM orders WHERE "
					   "event_id = %lld", (long long)id));
		assert_int_equal(json_integer_value(json_object_get(ev, "seats_sold")),
				 tu_countf(F.env->db_path, "SELECT count(*) FROM tickets WHERE "
					   "event_id = %lld", (long long)id));
	}
	assert_int_equal(json_array_size(json_object_get(o, "events")), want_events);
	json_decref(o);
	api_response_free(&res);
	call(&(struct req){ "GET", "/metrics" }, &res);
	snprintf(line, sizeof line, "\nstagedoor_orders_total %lld\n",
		 (long long)COUNT("SELECT count(*) FROM orders"));
	assert_non_null(strstr(res.body, line));
	api_response_free(&res);
}

static void test_totals_follow_api_orders_and_handlers(void **state)
{
	struct api_response res;
	char body[256];
	int64_t ev1, ev2;
	int i;

	(void)state;
	ev1 = add_event(20);
	ev2 = add_event(20);
	assert_totals_exact(2);
	order_body(body, sizeof body, ev1, 2);
	post_order("tot-1", body, &res);
	assert_int_equal(res.status, 201);
	api_response_free(&res);
	for (i = 0; i < 2; i++) {	/* replays: the stored answer, no second order */
		post_order("tot-1", body, &res);
		assert_int_equal(res.status, 201);
		api_response_free(&res);
	}
	order_body(body, sizeof body, ev1, 3);
	post_order("tot-1", body, &res);	/* the key with another order */
	assert_int_equal(res.status, 422);
	api_response_free(&res);
	order_body(body, sizeof body, ev2, 21);
	post_order("tot-big", body, &res);	/* past the capacity */
	assert_int_equal(res.status, 422);
	api_response_free(&res);
	order_body(body, sizeof body, ev2, 4);
	post_order("tot-2", body, &res);
	assert_int_equal(res.status, 201);
	api_response_free(&res);
	post_order("tot-3", body, &res);
	assert_int_equal(res.status, 201);
	api_response_free(&res);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 3);
	assert_totals_exact(2);

	/* the first order's render and send, each run twice: the second run
	 * changes nothing (the counter's job is test_orders' pipeline) */
	for (i = 0; i < 2; i++) {
		run_job(ticket_job_render, "render_tickets", 1);
		assert_totals_exact(2);
		run_job(ticket_job_send, "send_tickets", 3);
		assert_totals_exact(2);
	}
	assert_int_equal(COUNT("SELECT tickets_pdf * 100 + pdfs * 10 + emails_sent FROM "
			       "event_totals WHERE event_id = (SELECT min(id) FROM events)"), 211);
}

/* The dashboard's extras: recent orders, lease time left, done per minute. */
static void test_dashboard_extras(void **state)
{
	struct api_response res;
	struct enqueue e1 = { "noop", NULL, "job-a", 0, 0 }, e2 = { "noop", NULL, "job-b", 0, 0 };
	struct job *j[2];
	char body[256];
	json_t *o, *a, *x;
	int64_t ev, n = 0;
	int got = 0, i;

	(void)state;
	ev = add_event(10);
	for (i = 1; i <= 3; i++) {
		char key[16];
		snprintf(key, sizeof key, "k-recent-%d", i);
		order_body(body, sizeof body, ev, i);
		post_order(key, body, &res);
		assert_int_equal(res.status, 201);
		api_response_free(&res);
		clock_fake_advance(10);
	}
	call(&(struct req){ "GET", "/v1/orders", "recent=2", F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	a = json_object_get(o, "orders");
	assert_int_equal(json_array_size(a), 2);
	x = json_array_get(a, 0);	/* newest first */
	assert_int_equal(json_integer_value(json_object_get(x, "seats")), 3);
	assert_int_equal(json_integer_value(json_object_get(x, "event_id")), ev);
	assert_true(json_is_false(json_object_get(x, "pdf")));
	assert_string_equal(json_string_value(json_object_get(x, "email")), "pending");
	assert_int_equal(json_integer_value(json_object_get(x, "created_at")), clock_now_ms() - 10);
	assert_int_equal(json_string_length(json_object_get(x, "id")) > 1, 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(a, 1), "seats")), 2);
	json_decref(o);
	api_response_free(&res);
	call(&(struct req){ "GET", "/v1/orders", NULL, F.auth }, &res);
	o = body_json(&res);
	assert_int_equal(json_array_size(json_object_get(o, "orders")), 3);
	json_decref(o);
	api_response_free(&res);
	expect(&(struct req){ "GET", "/v1/orders", "recent=0", F.auth }, 400, "recent");
	expect(&(struct req){ "GET", "/v1/orders", "recent=101", F.auth }, 400, "recent");
	expect(&(struct req){ "GET", "/v1/orders", "recent=x", F.auth }, 400, "recent");
	expect(&(struct req){ "GET", "/v1/orders", "recent=1", NULL }, 401, "Authorization");

	/* a leased job says how long its lease has left, on the server's clock */
	assert_int_equal(queue_enqueue(F.env->db, &e1, NULL), SD_OK);
	assert_int_equal(queue_enqueue(F.env->db, &e2, NULL), SD_OK);
	assert_int_equal(queue_claim(F.env->db, "w7", 2, 120000, j, &got), SD_OK);
	assert_int_equal(got, 2);
	clock_fake_advance(4000);
	call(&(struct req){ "GET", "/v1/jobs", "state=leased", F.auth }, &res);
	o = body_json(&res);
	a = json_object_get(o, "jobs");
	assert_int_equal(json_array_size(a), 2);
	x = json_array_get(a, 0);
	assert_string_equal(json_string_value(json_object_get(x, "worker")), "w7");
	assert_int_equal(json_integer_value(json_object_get(x, "lease_expires_in_ms")), 116000);
	assert_int_equal(json_integer_value(json_object_get(x, "lease_age_ms")), 4000);
	json_decref(o);
	api_response_free(&res);

	/* done per minute: jobs finished in the last 60 s */
	assert_int_equal(queue_ack(F.env->db, j[0]->id, j[0]->lease_token), SD_OK);
	clock_fake_advance(61000);
	assert_int_equal(queue_ack(F.env->db, j[1]->id, j[1]->lease_token), SD_OK);
	job_free(j[0]);
	job_free(j[1]);
	call(&(struct req){ "GET", "/v1/stats", NULL, F.auth }, &res);
	o = body_json(&res);
	assert_int_equal(json_integer_value(json_object_get(o, "done_per_minute")), 1);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
		json_object_get(o, "jobs"), "total"), "done")), 2);
	json_decref(o);
	api_response_free(&res);
	assert_int_equal(queue_done_since(F.env->db, 0, &n), SD_OK);
	assert_int_equal(n, 2);
}

/* GET /v1/jobs: a leased job's lease_age_ms is the time since its claim on
 * the server's clock, kept by an extend; with lease_expires_in_ms it adds up
 * to the lease.  Other states carry neither. */
static json_t *leased_job(const char *query)
{
	struct api_response res;
	json_t *o, *x;

	call(&(struct req){ "GET", "/v1/jobs", query, F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	api_response_free(&res);
	assert_int_equal(json_array_size(json_object_get(o, "jobs")), 1);
	x = json_incref(json_array_get(json_object_get(o, "jobs"), 0));
	json_decref(o);
	return x;
}

static void test_jobs_lease_age(void **state)
{
	struct enqueue e = { "noop", NULL, "job-aged", 0, 0 };
	struct job *j[1];
	int64_t claimed;
	json_t *x;
	int got = 0;

	(void)state;
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	x = leased_job("state=ready");
	assert_null(json_object_get(x, "lease_age_ms"));
	assert_true(json_is_null(json_object_get(x, "leased_at")));
	json_decref(x);

	claimed = clock_now_ms();
	assert_int_equal(queue_claim(F.env->db, "w3", 1, 60000, j, &got), SD_OK);
	assert_int_equal(got, 1);
	x = leased_job("state=leased");
	assert_int_equal(json_integer_value(json_object_get(x, "lease_age_ms")), 0);
	assert_int_equal(json_integer_value(json_object_get(x, "leased_at")), claimed);
	json_decref(x);

	clock_fake_advance(3200);
	assert_int_equal(queue_extend(F.env->db, j[0]->id, j[0]->lease_token, 60000, NULL), SD_OK);
	clock_fake_advance(1800);
	x = leased_job("state=leased");
	assert_int_equal(json_integer_value(json_object_get(x, "lease_age_ms")), 5000);
	assert_int_equal(json_integer_value(json_object_get(x, "lease_expires_in_ms")), 58200);
	assert_int_equal(json_integer_value(json_object_get(x, "lease_age_ms")) +
			 json_integer_value(json_object_get(x, "lease_expires_in_ms")),
			 json_integer_value(json_object_get(x, "visible_at")) - claimed);
	json_decref(x);

	/* expired: ready again, no age */
	clock_fake_advance(58200);
	x = leased_job("state=ready");
	assert_null(json_object_get(x, "lease_age_ms"));
	assert_null(json_object_get(x, "lease_expires_in_ms"));
	json_decref(x);
	job_free(j[0]);
}

/* A payload SQLite keeps and jansson refuses (an integer past 64 bits) does
 * not break the list: that row goes out as its text. */
static void test_jobs_payload_jansson_refuses(void **state)
{
	struct enqueue e = { "noop", "{\"n\":123456789012345678901234567890}", "job-big", 0, 0 };
	struct api_response res;
	json_t *o, *x;

	(void)state;
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	call(&(struct req){ "GET", "/v1/jobs", NULL, F.auth }, &res);
	assert_int_equal(res.status, 200);
	o = body_json(&res);
	assert_int_equal(json_array_size(json_object_get(o, "jobs")), 1);
	x = json_array_get(json_object_get(o, "jobs"), 0);
	assert_true(json_is_string(x));
	/* the row as the database wrote it (PostgreSQL's json_build_object
	 * puts spaces around the colons) */
	assert_true(strstr(json_string_value(x), "\"job_id\":\"job-big\"") ||
		    strstr(json_string_value(x), "\"job_id\" : \"job-big\""));
	json_decref(o);
	api_response_free(&res);
}

/* ======================== out of memory ================================== */

/*
 * Jansson's allocations fail from the n-th on (json_set_alloc_funcs) during
 * one api_handle call.  Swept from n = 0 until a call needs no failing
 * allocation, that walks every allocation point of the request once: each
 * answer must be the normal one or a 500 with a JSON error, and each test
 * checks what a 500 left in the database.  ASan (make check-san) checks
 * that no path leaks or double-frees on the way out.
 */
#define OOM_SWEEP_MAX 400

static struct {
	int left;		/* allocations still allowed */
	int failed;		/* allocations refused in this call */
} oom;

static void *oom_malloc(size_t size)
{
	if (oom.left == 0) {
		oom.failed++;
		return NULL;
	}
	oom.left--;
	return malloc(size);
}

/* q with jansson's n-th allocation and every later one failing; [out] res.
 * Returns how many allocations failed (0: the call passed every point). */
static int call_oom(const struct req *q, int n, struct api_response *res)
{
	oom.left = n;
	oom.failed = 0;
	json_set_alloc_funcs(oom_malloc, free);
	call(q, res);
	json_set_alloc_funcs(malloc, free);
	return oom.failed;
}

/* after(res, n, arg): the test's check of one answer and of the database */
typedef void (*oom_check_fn)(const struct api_response *res, int n, void *arg);

/* The sweep; returns how many answers were 500 (at least one). */
static int sweep_oom(const struct req *q, int ok, oom_check_fn after, void *arg)
{
	struct api_response res;
	enum log_level level = log_get_level();
	int n, failed, n500 = 0;
	json_t *o;

	log_set_level(LOG_OFF);	/* one "api request failed" line per 500 */
	for (n = 0; n < OOM_SWEEP_MAX; n++) {
		failed = call_oom(q, n, &res);
		if (res.status == 500) {
			o = body_json(&res);
			assert_true(json_is_string(json_object_get(o, "error")));
			assert_string_equal(res.content_type, "application/json");
			json_decref(o);
			n500++;
		} else if (res.status != ok) {
			fail_msg("%s %s, allocation %d failing: want %d or 500, got %d: %.*s",
				 q->method, q->path, n, ok, res.status, (int)res.body_len, res.body);
		}
		if (!failed && res.status != ok)
			fail_msg("%s %s: %d with no allocation failing", q->method, q->path,
				 res.status);
		if (after)
			after(&res, n, arg);
		api_response_free(&res);
		if (!failed)
			break;
	}
	log_set_level(level);
	if (n == OOM_SWEEP_MAX)
		fail_msg("%s %s still allocating after %d", q->method, q->path, n);
	assert_true(n500 > 0);
	return n500;
}

static void stats_whole(const struct api_response *res, int n, void *arg)
{
	json_t *o, *k;

	(void)n;
	(void)arg;
	if (res->status != 200)
		return;
	o = body_json(res);
	k = json_object_get(json_object_get(o, "jobs"), "by_kind");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(k, "render_tickets"),
							    "ready")), 1);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(
		k, "update_sales_counter"), "ready")), 1);
	assert_int_equal(json_array_size(json_object_get(o, "events")), 1);
	json_decref(o);
}

/* GET /v1/stats reads only: the whole answer or a 500. */
static void test_oom_stats(void **state)
{
	struct api_response res;
	char body[256];
	int64_t n = 0;

	(void)state;
	order_body(body, sizeof body, add_event(10), 2);
	post_order("k-oom-stats", body, &res);
	assert_int_equal(res.status, 201);
	api_response_free(&res);
	assert_int_equal(outbox_relay_batch(F.env->db, 100, &n), SD_OK);
	sweep_oom(&(struct req){ "GET", "/v1/stats", NULL, F.auth }, 200, stats_whole, NULL);
}

/* GET /v1/jobs builds its list row by row: a 200 holds every job with its
 * lease fields, never a list that lost one to a failed allocation. */
static void jobs_whole(const struct api_response *res, int n, void *arg)
{
	json_t *o, *a, *x;
	size_t i;

	(void)n;
	(void)arg;
	if (res->status != 200)
		return;
	o = body_json(res);
	a = json_object_get(o, "jobs");
	assert_int_equal(json_array_size(a), 2);
	json_array_foreach(a, i, x) {
		assert_true(json_is_object(x));
		assert_int_equal(json_integer_value(json_object_get(x, "lease_age_ms")), 0);
		assert_int_equal(json_integer_value(json_object_get(x, "lease_expires_in_ms")),
				 60000);
	}
	json_decref(o);
}

static void test_oom_jobs(void **state)
{
	struct enqueue e1 = { "noop", "{\"a\":[1,2,3]}", "job-m1", 0, 0 };
	struct enqueue e2 = { "noop", NULL, "job-m2", 0, 0 };
	struct job *j[2];
	int got = 0;

	(void)state;
	assert_int_equal(queue_enqueue(F.env->db, &e1, NULL), SD_OK);
	assert_int_equal(queue_enqueue(F.env->db, &e2, NULL), SD_OK);
	assert_int_equal(queue_claim(F.env->db, "w1", 2, 60000, j, &got), SD_OK);
	assert_int_equal(got, 2);
	sweep_oom(&(struct req){ "GET", "/v1/jobs", "state=leased", F.auth }, 200, jobs_whole,
		  NULL);
	job_free(j[0]);
	job_free(j[1]);
}

/* POST /v1/orders builds its answer before the commit: a 500 wrote nothing
 * and did not spend the key, so every call of the sweep uses one key and
 * only the last one (nothing failing) makes the order. */
static void order_all_or_nothing(const struct api_response *res, int n, void *arg)
{
	int64_t want = res->status == 201;

	(void)n;
	(void)arg;
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), want);
	assert_int_equal(COUNT("SELECT count(*) FROM tickets"), 2 * want);
	assert_int_equal(COUNT("SELECT count(*) FROM outbox"), 2 * want);
	assert_int_equal(COUNT("SELECT count(*) FROM api_keys"), want);
}

static void test_oom_order(void **state)
{
	struct api_response res;
	char body[256];
	struct req q = { "POST", "/v1/orders", NULL, NULL, "k-oom", JSON, body };

	(void)state;
	order_body(body, sizeof body, add_event(10), 2);
	q.auth = F.auth;
	sweep_oom(&q, 201, order_all_or_nothing, NULL);
	post_order("k-oom", body, &res);	/* the replay */
	assert_int_equal(res.status, 201);
	api_response_free(&res);
	assert_int_equal(COUNT("SELECT count(*) FROM orders"), 1);
}

/*
 * POST /v1/events builds its answer inside the event's transaction: a 500
 * stored nothing, a 201 stored exactly one whole event, so a client that
 * sends it again after a 500 makes no second event.
 */
static void event_one_or_none(const struct api_response *res, int n, void *arg)
{
	int64_t *events = arg;
	int64_t now = COUNT("SELECT count(*) FROM events");

	(void)n;
	assert_int_equal(now, *events + (res->status == 201));
	assert_int_equal(COUNT("SELECT count(*) FROM events WHERE name = 'a' AND venue = 'b' "
			       "AND capacity = 5"), now);
	*events = now;
}

static void test_oom_event(void **state)
{
	int64_t events = 0;

	(void)state;
	sweep_oom(&(struct req){ "POST", "/v1/events", NULL, F.auth, NULL, JSON,
				 "{\"name\":\"a\",\"venue\":\"b\","
				 "\"starts_at\":\"2026-01-01T00:00Z\",\"capacity\":5}" },
		  201, event_one_or_none, &events);
	assert_int_equal(COUNT("SELECT count(*) FROM events"), 1);
}

/* ======================== the pure layer ================================= */

static void test_parse_and_query(void **state)
{
	struct api_order o;
	struct api_error err;
	char buf[32];
	static const char big[] = "{\"event_id\":1,\"name\":\"A\",\"email\":\"a@b.co\","
				  "\"seats\":99999999999999999999}";
	static const char ok[] = "{\"event_id\":1,\"name\":\"A\",\"email\":\"a@b.co\","
				 "\"seats\":2}";
	static const char nul[] = "{\"event_id\":1,\"name\":\"A\0B\",\"email\":\"a@b.co\",\"seats\":1}";

	(void)state;
	assert_int_equal(api_parse_order(nul, sizeof nul - 1, &o, &err), SD_INVALID);
	assert_int_equal(api_parse_order(big, strlen(big), &o, &err), SD_INVALID);
	assert_int_equal(api_parse_order(ok, strlen(ok), &o, &err), SD_OK);
	assert_string_equal(o.o.email, "a@b.co");
	api_parse_free(o.json);
	assert_int_equal(api_query_get("a=1&state=dead", "state", buf, sizeof buf), 1);
	assert_string_equal(buf, "dead");
	assert_int_equal(api_query_get("a=1", "state", buf, sizeof buf), 0);
	assert_int_equal(api_query_get(NULL, "state", buf, sizeof buf), 0);
	assert_int_equal(api_query_get("state=%zz", "state", buf, sizeof buf), -1);
	assert_int_equal(api_query_get("state=%00", "state", buf, sizeof buf), -1);
	assert_int_equal(api_query_get("state=%4", "state", buf, sizeof buf), -1);
	assert_true(api_content_type_json("application/json"));
	assert_false(api_content_type_json("application/jsonx"));
	assert_false(api_key_valid(""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_token_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_routes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token_recorded_by_another_box, setup, teardown),
		cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_prices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_event_life_and_the_window, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order_in_flight, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order_busy_503, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_order_show_pdf_scan, setup, teardown),
		cmocka_unit_test_setup_teardown(test_orders_that_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resend_body_and_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resend_limit_on_the_command_line,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_stored_bad_text_is_shown_escaped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_disk_space, setup, teardown),
		cmocka_unit_test_setup_teardown(test_jobs_retry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_controls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_schedules, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats_metrics_health, setup, teardown),
		cmocka_unit_test_setup_teardown(test_totals_follow_api_orders_and_handlers, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_dashboard_extras, setup, teardown),
		cmocka_unit_test_setup_teardown(test_jobs_lease_age, setup, teardown),
		cmocka_unit_test_setup_teardown(test_jobs_payload_jansson_refuses, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom_jobs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oom_event, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parse_and_query, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
