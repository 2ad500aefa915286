/*
 * test_roles.c: the API's tokens with roles, on both engines (the pg suite
 * runs it again on PostgreSQL).
 *
 * - every route admits the roles its table names and refuses the others
 *   with 403 naming the role needed, a missing or unknown token with 401;
 * - a revoked or expired token is refused at once (401 saying which), by a
 *   second API opened on the same database as well (another process);
 * - a door token bound to an event scans that event's tickets only, and
 *   only inside its doors' window: another event's ticket is wrong_event
 *   with that event's name and date, a scan outside the window is
 *   doors_closed, and neither marks the ticket scanned;
 * - metrics_auth = on makes /metrics need a monitor token;
 * - token use is recorded (last_used_at), at most once a minute;
 * - GET /ca.pem serves the box CA when there is one, 404 when not;
 * - the Idempotency-Key header as a structured-field string: "abc" and abc
 *   are one key; a malformed one is 400.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "code.h"
#include "db.h"
#include "event_edit.h"
#include "events.h"
#include "orders.h"
#include "statedir.h"
#include "testutil.h"
#include "timefmt.h"
#include "tickets.h"
#include "token.h"

#define T0 1798000000000LL	/* 2026-12-23T... on the fake clock */
#define HOUR (3600LL * 1000)

static struct {
	struct tu_env *env;
	struct api *api, *api2;		/* api2: a second server on the same database */
	char op[128], bo[128], door[128], door2[128], mon[128], anydoor[128];
	int64_t ev1, ev2;		/* ev1 at T0 + 2 h, ev2 a day later */
	unsigned char key[CODE_KEY_LEN];
} F;

static void bearer(char *out, const char *token)
{
	snprintf(out, 128, "Bearer %s", token);
}

static void add_token(const char *name, int role, int64_t event_id, int64_t expires_at,
		      char *auth)
{
	char tok[TOKEN_HEX + 1];
	/* a door token for no one event is one for every event, on purpose */
	struct token_new t = { name, role, event_id, expires_at,
			       role == TOKEN_DOOR && !event_id, 3 * HOUR };

	assert_int_equal(token_add(F.env->db, &t, clock_now_ms(), tok), SD_OK);
	assert_int_equal(strlen(tok), TOKEN_HEX);
	bearer(auth, tok);
}

static struct api *open_one(int metrics_auth, const char *ca)
{
	struct api_opts o = { F.env->db_path, tu_state(F.env), 0, NULL, NULL, 1 };
	struct api *a = NULL;

	o.metrics_auth = metrics_auth;
	o.ca_file = ca;
	assert_int_equal(api_open(&o, &a), SD_OK);
	return a;
}

static int64_t add_event(const char *name, int64_t starts_at)
{
	struct event_new e = { name, "Hall", starts_at, 100 };
	int64_t id = 0;

	assert_int_equal(event_add(F.env->db, &e, &id), SD_OK);
	return id;
}

static int setup(void **state)
{
	char path[400], tok[TOKEN_HEX + 2];
	unsigned char *t;
	size_t len = 0;
	int r = tu_setup(state);

	memset(&F, 0, sizeof F);
	F.env = *state;
	clock_fake_set(T0);
	assert_int_equal(statedir_init(F.env->db_path, tu_state(F.env)), SD_OK);
	assert_int_equal(token_ensure(F.env->db_path, tu_state(F.env)), SD_OK);
	assert_int_equal(token_path(F.env->db_path, tu_state(F.env), path, sizeof path), SD_OK);
	t = tu_slurp(path, &len);
	snprintf(tok, sizeof tok, "%.*s", (int)len, (const char *)t);
	free(t);
	bearer(F.op, tok);
	F.ev1 = add_event("Night one", T0 + 2 * HOUR);
	F.ev2 = add_event("Night two", T0 + 26 * HOUR);
	add_token("box office 1", TOKEN_BOX_OFFICE, 0, 0, F.bo);
	add_token("north door", TOKEN_DOOR, F.ev1, 0, F.door);
	add_token("south door", TOKEN_DOOR, F.ev2, 0, F.door2);
	add_token("any door", TOKEN_DOOR, 0, 0, F.anydoor);
	add_token("grafana", TOKEN_MONITOR, 0, 0, F.mon);
	assert_int_equal(code_key_path(F.env->db_path, tu_state(F.env), path, sizeof path), SD_OK);
	assert_int_equal(code_key_load(path, F.key), SD_OK);
	F.api = open_one(0, NULL);
	return r;
}

static int teardown(void **state)
{
	api_close(F.api);
	api_close(F.api2);
	memset(&F, 0, sizeof F);
	return tu_teardown(state);
}

/* call: one request; [out] the status, the body parsed into *o (NULL: not
 * wanted or not JSON) */
static int call(struct api *a, const char *method, const char *path, const char *auth,
		const char *key, const char *body, json_t **o)
{
	struct api_request r = { method, path, NULL, auth, key, body ? "application/json" : NULL,
				 body, body ? strlen(body) : 0 };
	struct api_response res;
	int status;

	api_handle(a, &r, &res);
	status = res.status;
	if (o)
		*o = json_loadb(res.body, res.body_len, 0, NULL);
	api_response_free(&res);
	return status;
}

/* the error's text and field of a refusal */
static void refused(struct api *a, const char *method, const char *path, const char *auth,
		    int want, const char *needle)
{
	json_t *o = NULL;
	int got = call(a, method, path, auth, NULL, NULL, &o);
	const char *err = json_string_value(json_object_get(o, "error"));
	const char *field = json_string_value(json_object_get(o, "field"));

	if (got != want || !err || !strstr(err, needle) || !field ||
	    strcmp(field, "Authorization") != 0)
		fail_msg("%s %s: want %d with '%s' (field Authorization), got %d: %s %s", method,
			 path, want, needle, got, err ? err : "(none)", field ? field : "");
	json_decref(o);
}

/* ---- the tests ---------------------------------------------------------- */

/* Who may call what: each role against the routes it may and may not. */
static void test_role_table(void **state)
{
	static const struct {
		const char *method, *path;
		int op, bo, door, mon;	/* 1: admitted */
	} routes[] = {
		{ "GET", "/v1/events", 1, 1, 0, 1 },
		{ "GET", "/v1/orders", 1, 1, 0, 0 },
		{ "GET", "/v1/jobs", 1, 0, 0, 0 },
		{ "GET", "/v1/stats", 1, 0, 0, 1 },
		{ "GET", "/v1/stats/history", 1, 0, 0, 1 },
		{ "GET", "/v1/whoami", 1, 1, 1, 1 },
		{ "GET", "/v1/controls", 1, 0, 0, 1 },
		{ "GET", "/v1/schedules", 1, 0, 0, 1 },
	};
	const char *auth[4] = { F.op, F.bo, F.door, F.mon };
	char path[64];
	size_t i;
	int k;

	(void)state;
	for (i = 0; i < sizeof routes / sizeof routes[0]; i++) {
		const int ok[4] = { routes[i].op, routes[i].bo, routes[i].door, routes[i].mon };

		for (k = 0; k < 4; k++) {
			if (ok[k]) {
				int got = call(F.api, routes[i].method, routes[i].path, auth[k],
					       NULL, NULL, NULL);
				if (got != 200)
					fail_msg("%s as role %d: want 200, got %d", routes[i].path,
						 k, got);
			} else {
				refused(F.api, routes[i].method, routes[i].path, auth[k], 403,
					"token may not do this");
			}
		}
	}
	/* writes: an event is the operator's; an order the box office's too */
	refused(F.api, "POST", "/v1/events", F.bo, 403, "with role operator");
	/* the queue's controls are the operator's */
	refused(F.api, "POST", "/v1/kinds/noop/pause", F.mon, 403, "with role operator");
	refused(F.api, "POST", "/v1/kinds/noop/resume", F.bo, 403, "with role operator");
	refused(F.api, "PUT", "/v1/kinds/noop/limits", F.door, 403, "with role operator");
	refused(F.api, "POST", "/v1/jobs/x/cancel", F.bo, 403, "with role operator");
	refused(F.api, "POST", "/v1/schedules", F.mon, 403, "with role operator");
	refused(F.api, "DELETE", "/v1/schedules/x", F.bo, 403, "with role operator");
	snprintf(path, sizeof path, "/v1/events/%lld", (long long)F.ev1);
	refused(F.api, "PATCH", path, F.bo, 403, "with role operator");
	refused(F.api, "PATCH", path, F.door, 403, "with role operator");
	snprintf(path, sizeof path, "/v1/events/%lld/close", (long long)F.ev1);
	refused(F.api, "POST", path, F.bo, 403, "with role operator");
	refused(F.api, "POST", path, F.mon, 403, "with role operator");
	assert_int_equal(tu_countf(F.env->db_path, "SELECT count(*) FROM events WHERE id = %lld "
				   "AND closed_at IS NULL", (long long)F.ev1), 1);
	assert_int_equal(call(F.api, "POST", "/v1/orders", F.door, "k1", "{}", NULL), 403);
	assert_int_equal(call(F.api, "POST", "/v1/orders", F.mon, "k1", "{}", NULL), 403);
	assert_int_equal(call(F.api, "POST", "/v1/scan", F.bo, NULL, "{\"code\":\"x\"}", NULL),
			 403);
	/* a door sees its own event's counts, not another's */
	snprintf(path, sizeof path, "/v1/events/%lld", (long long)F.ev1);
	assert_int_equal(call(F.api, "GET", path, F.door, NULL, NULL, NULL), 200);
	assert_int_equal(call(F.api, "GET", path, F.anydoor, NULL, NULL, NULL), 200);
	snprintf(path, sizeof path, "/v1/events/%lld", (long long)F.ev2);
	refused(F.api, "GET", path, F.door, 403, "another event");
	/* its own event's scans, not another's, and no sales; the box office
	 * reads both */
	snprintf(path, sizeof path, "/v1/events/%lld/scans", (long long)F.ev1);
	assert_int_equal(call(F.api, "GET", path, F.door, NULL, NULL, NULL), 200);
	assert_int_equal(call(F.api, "GET", path, F.bo, NULL, NULL, NULL), 200);
	refused(F.api, "GET", path, F.mon, 403, "token may not do this");
	snprintf(path, sizeof path, "/v1/events/%lld/scans", (long long)F.ev2);
	refused(F.api, "GET", path, F.door, 403, "another event");
	snprintf(path, sizeof path, "/v1/events/%lld/sales", (long long)F.ev1);
	assert_int_equal(call(F.api, "GET", path, F.bo, NULL, NULL, NULL), 200);
	refused(F.api, "GET", path, F.door, 403, "token may not do this");
	/* an order's changes are the box office's: a door or a monitor may not
	 * (refused before the order is even looked for) */
	refused(F.api, "POST", "/v1/orders/TNOSUCH22/resend", F.door, 403, "token may not do this");
	refused(F.api, "POST", "/v1/orders/TNOSUCH22/cancel", F.mon, 403, "token may not do this");
	refused(F.api, "PATCH", "/v1/orders/TNOSUCH22", F.door, 403, "token may not do this");
	assert_int_equal(call(F.api, "POST", "/v1/orders/TNOSUCH22/resend", F.bo, NULL, NULL, NULL),
			 404);
	assert_int_equal(call(F.api, "POST", "/v1/orders/TNOSUCH22/cancel", F.bo, NULL, NULL, NULL),
			 404);
	/* no token, and a token nobody made */
	refused(F.api, "GET", "/v1/events", NULL, 401, "Bearer token is required");
	refused(F.api, "GET", "/v1/events", "Bearer 0123456789abcdef0123456789abcdef0123456789abcdef"
		"0123456789abcdef", 401, "not known");
	refused(F.api, "GET", "/v1/events", "Bearer short", 401, "64 hex digits");
}

static void test_whoami(void **state)
{
	json_t *o = NULL;

	(void)state;
	assert_int_equal(call(F.api, "GET", "/v1/whoami", F.door, NULL, NULL, &o), 200);
	assert_string_equal(json_string_value(json_object_get(o, "role")), "door");
	assert_string_equal(json_string_value(json_object_get(o, "name")), "north door");
	assert_int_equal(json_integer_value(json_object_get(o, "event_id")), F.ev1);
	json_decref(o);
	assert_int_equal(call(F.api, "GET", "/v1/whoami", F.op, NULL, NULL, &o), 200);
	assert_string_equal(json_string_value(json_object_get(o, "role")), "operator");
	assert_true(json_is_null(json_object_get(o, "event_id")));
	/* the venue's zone, for the pages to show every time in */
	assert_string_equal(json_string_value(json_object_get(o, "timezone")),
			    timefmt_zone_name());
	assert_true(json_object_size(json_object_get(o, "zone_names")) >= 1);
	json_decref(o);
	assert_int_equal(timefmt_zone_set("Europe/Berlin"), SD_OK);
	assert_int_equal(call(F.api, "GET", "/v1/whoami", F.bo, NULL, NULL, &o), 200);
	assert_string_equal(json_string_value(json_object_get(o, "timezone")), "Europe/Berlin");
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "zone_names"),
							      "3600")), "CET");
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "zone_names"),
							      "7200")), "CEST");
	json_decref(o);
	assert_int_equal(timefmt_zone_set("UTC"), SD_OK);
}

/* Revoked: refused at once, here and by another server on the database. */
static void test_revoke_and_expiry(void **state)
{
	char soon[128];

	(void)state;
	F.api2 = open_one(0, NULL);
	assert_int_equal(call(F.api, "GET", "/v1/orders", F.bo, NULL, NULL, NULL), 200);
	assert_int_equal(call(F.api2, "GET", "/v1/orders", F.bo, NULL, NULL, NULL), 200);
	assert_int_equal(token_revoke(F.env->db, "box office 1", clock_now_ms()), SD_OK);
	refused(F.api, "GET", "/v1/orders", F.bo, 401, "revoked");
	refused(F.api2, "GET", "/v1/orders", F.bo, 401, "revoked");
	assert_int_equal(token_revoke(F.env->db, "box office 1", clock_now_ms()), SD_NOT_FOUND);
	/* the name is free again once revoked */
	add_token("box office 1", TOKEN_BOX_OFFICE, 0, 0, F.bo);
	assert_int_equal(call(F.api2, "GET", "/v1/orders", F.bo, NULL, NULL, NULL), 200);
	/* an expiry: good until it passes */
	add_token("tonight only", TOKEN_BOX_OFFICE, 0, clock_now_ms() + 12 * HOUR, soon);
	assert_int_equal(call(F.api, "GET", "/v1/orders", soon, NULL, NULL, NULL), 200);
	clock_fake_advance(12 * HOUR);
	refused(F.api, "GET", "/v1/orders", soon, 401, "expired");
	refused(F.api2, "GET", "/v1/orders", soon, 401, "expired");
}

/* bad tokens are refused by token_add with nothing stored */
static void test_token_add_refusals(void **state)
{
	char tok[TOKEN_HEX + 1];
	int64_t before = tu_count(F.env->db_path, "SELECT count(*) FROM api_tokens");

	(void)state;
	assert_int_equal(token_add(F.env->db, &(struct token_new){ "north door", TOKEN_DOOR, 0, 0 },
				   clock_now_ms(), tok), SD_INVALID);
	assert_int_equal(token_add(F.env->db, &(struct token_new){ "x", TOKEN_MONITOR, F.ev1, 0 },
				   clock_now_ms(), tok), SD_INVALID);
	assert_int_equal(token_add(F.env->db, &(struct token_new){ "y", TOKEN_DOOR, 999, 0 },
				   clock_now_ms(), tok), SD_NOT_FOUND);
	assert_int_equal(token_add(F.env->db, &(struct token_new){ "", TOKEN_DOOR, 0, 0 },
				   clock_now_ms(), tok), SD_INVALID);
	assert_int_equal(token_add(F.env->db, &(struct token_new){ "z", TOKEN_DOOR, 0,
								   clock_now_ms() - 1 },
				   clock_now_ms(), tok), SD_INVALID);
	/* a door token for no event, unless it says it is for all of them */
	err_clear();
	assert_int_equal(token_add(F.env->db, &(struct token_new){ "side door", TOKEN_DOOR, 0, 0 },
				   clock_now_ms(), tok), SD_INVALID);
	assert_non_null(strstr(err_msg(), "--all-events"));
	assert_int_equal(token_add(F.env->db, &(struct token_new){ "side door", TOKEN_DOOR, F.ev1,
								   0, 1, 3 * HOUR },
				   clock_now_ms(), tok), SD_INVALID);
	assert_int_equal(token_add(F.env->db, &(struct token_new){ "watcher", TOKEN_MONITOR, 0, 0,
								   1, 3 * HOUR },
				   clock_now_ms(), tok), SD_INVALID);
	/* night two's doors open 23 h from now: a door token that expires in
	 * 12 h could never admit anyone there */
	err_clear();
	assert_int_equal(token_add(F.env->db, &(struct token_new){ "early door", TOKEN_DOOR, F.ev2,
								   clock_now_ms() + 12 * HOUR, 0,
								   3 * HOUR },
				   clock_now_ms(), tok), SD_INVALID);
	assert_non_null(strstr(err_msg(), "before the doors of event"));
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM api_tokens"), before);
	/* night one's are open already: 12 h is enough */
	assert_int_equal(token_add(F.env->db, &(struct token_new){ "early door", TOKEN_DOOR, F.ev1,
								   clock_now_ms() + 12 * HOUR, 0,
								   3 * HOUR },
				   clock_now_ms(), tok), SD_OK);
	before++;
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM api_tokens"), before);
	/* the command line says the same, and warns of a door for every event */
	{
		char out[256], err[512];

		assert_int_equal(tu_run(out, sizeof out, err, sizeof err,
					(const char *const[]){ "token", "add", "--role", "door",
							       "--name", "back door", "--db",
							       F.env->db_path, NULL }), 2);
		assert_non_null(strstr(err, "--all-events"));
		assert_int_equal(tu_run(out, sizeof out, err, sizeof err,
					(const char *const[]){ "token", "add", "--role", "door",
							       "--name", "back door", "--all-events",
							       "--db", F.env->db_path, NULL }), 0);
		assert_non_null(strstr(err, "warning: door token 'back door' admits every "
				       "event's tickets, at any time"));
		before++;
	}
	/* and the database keeps only digests: no token's text in any row */
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM api_tokens WHERE "
				  "length(sha256) <> 64"), 0);
}

/* one ticket of event_id, sold now; [out] its code */
static void ticket_of(int64_t event_id, const char *key, char code[CODE_TEXT_MAX])
{
	struct order_new o = { event_id, "Ada", "ada@example.com", 1, key };
	char id[ORDER_ID_MAX], sql[200];
	int replayed = 0;
	int64_t ticket;

	assert_int_equal(order_add(F.env->db, &o, id, &replayed), SD_OK);
	snprintf(sql, sizeof sql, "SELECT code_id FROM tickets WHERE event_id = %lld "
		 "ORDER BY id DESC LIMIT 1", (long long)event_id);
	ticket = tu_count(F.env->db_path, sql);
	code_make(F.key, ticket, event_id, code);
}

static const char *scan(const char *auth, const char *code, json_t **o)
{
	char body[200];

	snprintf(body, sizeof body, "{\"code\":\"%s\"}", code);
	assert_int_equal(call(F.api, "POST", "/v1/scan", auth, NULL, body, o), 200);
	return json_string_value(json_object_get(*o, "result"));
}

static void test_door_bound_to_its_event(void **state)
{
	char c1[CODE_TEXT_MAX], c2[CODE_TEXT_MAX];
	json_t *o = NULL, *ev;

	(void)state;
	ticket_of(F.ev1, "o1", c1);
	ticket_of(F.ev2, "o2", c2);
	/* T0 is 2 h before night one: its doors (3 h before) are open */
	assert_string_equal(scan(F.door, c2, &o), "wrong_event");
	ev = json_object_get(o, "event");
	assert_string_equal(json_string_value(json_object_get(ev, "name")), "Night two");
	assert_int_equal(json_integer_value(json_object_get(ev, "starts_at_ms")), T0 + 26 * HOUR);
	assert_non_null(json_string_value(json_object_get(ev, "starts_at")));
	json_decref(o);
	/* not marked: night two's own door admits it later */
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM tickets WHERE "
				  "scanned_at IS NOT NULL"), 0);
	/* night two's door, 26 h before its night: closed, and nothing marked */
	assert_string_equal(scan(F.door2, c2, &o), "doors_closed");
	assert_non_null(json_string_value(json_object_get(o, "doors_open_at")));
	json_decref(o);
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM tickets WHERE "
				  "scanned_at IS NOT NULL"), 0);
	assert_string_equal(scan(F.door, c1, &o), "admitted");
	json_decref(o);
	assert_string_equal(scan(F.door, c1, &o), "already_scanned");
	json_decref(o);
	/* an unbound door admits any event's ticket at any time */
	assert_string_equal(scan(F.anydoor, c2, &o), "admitted");
	json_decref(o);
	/* night one's doors close 6 h after it starts */
	ticket_of(F.ev1, "o3", c1);
	clock_fake_advance(8 * HOUR + 1);
	assert_string_equal(scan(F.door, c1, &o), "doors_closed");
	json_decref(o);
	assert_string_equal(scan(F.door, "garbage", &o), "invalid");
	json_decref(o);
}

/* scan_raw: one scan of code by auth with nonce (NULL: none) on a;
 * [out] the status, *retry the Retry-After (0: none) */
static int scan_raw(struct api *a, const char *auth, const char *code, const char *nonce,
		    int *retry)
{
	char body[300];
	struct api_request r = { "POST", "/v1/scan", NULL, auth, NULL, "application/json", body,
				 0 };
	struct api_response res;
	int status;

	if (nonce)
		snprintf(body, sizeof body, "{\"code\":\"%s\",\"nonce\":\"%s\"}", code, nonce);
	else
		snprintf(body, sizeof body, "{\"code\":\"%s\"}", code);
	r.body_len = strlen(body);
	api_handle(a, &r, &res);
	status = res.status;
	if (retry)
		*retry = atoi(res.retry_after);
	api_response_free(&res);
	return status;
}

/* A door token's scans are held to scan_rate after a burst of scan_burst:
 * 429 with Retry-After, counted in /metrics; another token is not held. */
static void test_scan_rate_per_token(void **state)
{
	struct api_opts o = { F.env->db_path, tu_state(F.env), 0, NULL, NULL, 1 };
	struct api_response res;
	struct api_request m = { "GET", "/metrics", NULL, F.op, NULL, NULL, NULL, 0 };
	int i, retry = -1, ok = 0;

	(void)state;
	o.scan_rate = 2;
	o.scan_burst = 5;
	api_close(F.api);
	assert_int_equal(api_open(&o, &F.api), SD_OK);
	for (i = 0; i < 5; i++)
		assert_int_equal(scan_raw(F.api, F.anydoor, "garbage", NULL, NULL), 200);
	assert_int_equal(scan_raw(F.api, F.anydoor, "garbage", NULL, &retry), 429);
	assert_int_equal(retry, 1);
	assert_int_equal(scan_raw(F.api, F.door, "garbage", NULL, NULL), 200);
	/* a second earns two scans */
	clock_fake_advance(1000);
	for (i = 0; i < 4; i++)
		ok += scan_raw(F.api, F.anydoor, "garbage", NULL, NULL) == 200;
	assert_int_equal(ok, 2);
	/* a flood the limit held grew no row: 7 counted, none logged */
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM scans"), 0);
	assert_int_equal(tu_count(F.env->db_path, "SELECT sum(refused) FROM scan_minutes"), 8);
	api_handle(F.api, &m, &res);
	assert_int_equal(res.status, 200);
	assert_non_null(strstr(res.body, "\nstagedoor_scans_limited_total 3\n"));
	api_response_free(&res);
}

/* A nonce answers for its code and its token: another code under it is
 * 422 and admits nothing; a token made under a revoked token's name gets
 * none of its answers. */
static void test_scan_nonce_per_code_and_token(void **state)
{
	char c1[CODE_TEXT_MAX], c2[CODE_TEXT_MAX], again[128];
	json_t *o = NULL;

	(void)state;
	ticket_of(F.ev1, "o1", c1);
	ticket_of(F.ev1, "o2", c2);
	assert_int_equal(scan_raw(F.api, F.door, c1, "n-1", NULL), 200);
	assert_int_equal(scan_raw(F.api, F.door, c1, "n-1", NULL), 200);	/* a retry */
	assert_int_equal(scan_raw(F.api, F.door, c2, "n-1", NULL), 422);
	assert_int_equal(scan_raw(F.api, F.door, "forged", "n-1", NULL), 422);
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM tickets WHERE "
				  "scanned_at IS NOT NULL"), 1);
	assert_int_equal(token_revoke(F.env->db, "north door", clock_now_ms()), SD_OK);
	add_token("north door", TOKEN_DOOR, F.ev1, 0, again);
	assert_int_equal(call(F.api, "POST", "/v1/scan", again, NULL,
			      "{\"code\":\"forged\",\"nonce\":\"n-1\"}", &o), 200);
	assert_string_equal(json_string_value(json_object_get(o, "result")), "invalid");
	json_decref(o);
}

static void test_metrics_auth(void **state)
{
	(void)state;
	assert_int_equal(call(F.api, "GET", "/metrics", NULL, NULL, NULL, NULL), 200);
	api_close(F.api);
	F.api = open_one(1, NULL);
	refused(F.api, "GET", "/metrics", NULL, 401, "Bearer token is required");
	refused(F.api, "GET", "/metrics", F.door, 403, "with role monitor or operator");
	assert_int_equal(call(F.api, "GET", "/metrics", F.mon, NULL, NULL, NULL), 200);
	assert_int_equal(call(F.api, "GET", "/metrics", F.op, NULL, NULL, NULL), 200);
	/* /healthz stays public for probes */
	assert_int_equal(call(F.api, "GET", "/healthz", NULL, NULL, NULL, NULL) / 100, 2);
}

static void test_last_used(void **state)
{
	const char *sql = "SELECT coalesce(max(last_used_at), 0) FROM api_tokens WHERE "
			  "name = 'grafana'";

	(void)state;
	assert_int_equal(tu_count(F.env->db_path, sql), 0);
	assert_int_equal(call(F.api, "GET", "/v1/stats", F.mon, NULL, NULL, NULL), 200);
	assert_int_equal(tu_count(F.env->db_path, sql), T0);
	clock_fake_advance(30000);	/* within the minute: not written again */
	assert_int_equal(call(F.api, "GET", "/v1/stats", F.mon, NULL, NULL, NULL), 200);
	assert_int_equal(tu_count(F.env->db_path, sql), T0);
	clock_fake_advance(31000);
	assert_int_equal(call(F.api, "GET", "/v1/stats", F.mon, NULL, NULL, NULL), 200);
	assert_int_equal(tu_count(F.env->db_path, sql), T0 + 61000);
}

static void test_ca_pem(void **state)
{
	static const char pem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
	struct api_request r = { "GET", "/ca.pem", NULL, NULL, NULL, NULL, NULL, 0 };
	struct api_response res;
	char path[400];
	FILE *f;

	(void)state;
	assert_int_equal(call(F.api, "GET", "/ca.pem", NULL, NULL, NULL, NULL), 404);
	snprintf(path, sizeof path, "%s/ca.pem", F.env->dir);
	assert_non_null(f = fopen(path, "w"));
	fputs(pem, f);
	fclose(f);
	api_close(F.api);
	F.api = open_one(0, path);
	api_handle(F.api, &r, &res);
	assert_int_equal(res.status, 200);
	assert_string_equal(res.content_type, "application/x-pem-file");
	assert_int_equal(res.body_len, strlen(pem));
	assert_memory_equal(res.body, pem, strlen(pem));
	api_response_free(&res);
}

/* "abc" and abc name one key: the second is the first's answer again */
static void test_idempotency_key_structured(void **state)
{
	char body[200];
	json_t *a = NULL, *b = NULL;

	(void)state;
	snprintf(body, sizeof body, "{\"event_id\":%lld,\"name\":\"Bo\",\"email\":\"bo@example.com\","
		 "\"seats\":1}", (long long)F.ev1);
	assert_int_equal(call(F.api, "POST", "/v1/orders", F.bo, "\"abc-1\"", body, &a), 201);
	assert_int_equal(call(F.api, "POST", "/v1/orders", F.bo, "abc-1", body, &b), 201);
	assert_string_equal(json_string_value(json_object_get(a, "id")),
			    json_string_value(json_object_get(b, "id")));
	json_decref(b);
	assert_int_equal(call(F.api, "POST", "/v1/orders", F.bo, "  \"abc-1\" ", body, &b), 201);
	assert_string_equal(json_string_value(json_object_get(a, "id")),
			    json_string_value(json_object_get(b, "id")));
	json_decref(a);
	json_decref(b);
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM orders"), 1);
	/* an escaped quote is part of the key; malformed ones are refused */
	assert_int_equal(call(F.api, "POST", "/v1/orders", F.bo, "\"a\\\"b\"", body, NULL), 201);
	assert_int_equal(call(F.api, "POST", "/v1/orders", F.bo, "\"abc", body, NULL), 400);
	assert_int_equal(call(F.api, "POST", "/v1/orders", F.bo, "\"abc\";x=1", body, NULL), 400);
	assert_int_equal(call(F.api, "POST", "/v1/orders", F.bo, "\"a\\nb\"", body, NULL), 400);
	assert_int_equal(call(F.api, "POST", "/v1/orders", F.bo, "\"\"", body, NULL), 400);
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM orders"), 2);
}

static void test_key_parse(void **state)
{
	char k[TICKETS_KEY_MAX + 1], big[TICKETS_KEY_MAX + 8];

	(void)state;
	assert_int_equal(api_key_parse("\"abc\"", k), 1);
	assert_string_equal(k, "abc");
	assert_int_equal(api_key_parse("abc", k), 1);
	assert_string_equal(k, "abc");
	assert_int_equal(api_key_parse("\"a\\\\b\"", k), 1);
	assert_string_equal(k, "a\\b");
	assert_int_equal(api_key_parse("a\"b", k), 0);
	/* other structured items are no string: a byte sequence, a boolean,
	 * a number, a token with parameters; a bare key is an sf-token */
	assert_int_equal(api_key_parse(":YWJj:", k), 0);
	assert_int_equal(api_key_parse("?1", k), 0);
	assert_int_equal(api_key_parse("42", k), 0);
	assert_int_equal(api_key_parse("abc;x=1", k), 0);
	assert_int_equal(api_key_parse("\"abc\";x=1", k), 0);
	assert_int_equal(api_key_parse("order-17:retry/2", k), 1);
	assert_string_equal(k, "order-17:retry/2");
	assert_int_equal(api_key_parse("\"42\"", k), 1);
	assert_string_equal(k, "42");
	assert_int_equal(api_key_parse("\"a b\"", k), 0);
	assert_int_equal(api_key_parse(NULL, k), 0);
	memset(big, 'x', sizeof big);
	big[TICKETS_KEY_MAX] = '\0';
	assert_int_equal(api_key_parse(big, k), 1);
	big[TICKETS_KEY_MAX] = 'x';
	big[TICKETS_KEY_MAX + 1] = '\0';
	assert_int_equal(api_key_parse(big, k), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_role_table, setup, teardown),
		cmocka_unit_test_setup_teardown(test_whoami, setup, teardown),
		cmocka_unit_test_setup_teardown(test_revoke_and_expiry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_token_add_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_door_bound_to_its_event, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_rate_per_token, setup, teardown),
		cmocka_unit_test_setup_teardown(test_scan_nonce_per_code_and_token, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_metrics_auth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_last_used, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ca_pem, setup, teardown),
		cmocka_unit_test_setup_teardown(test_idempotency_key_structured, setup, teardown),
		cmocka_unit_test(test_key_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
