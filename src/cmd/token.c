/*
 * token.c: `stagedoor token add|ls|revoke`: the API's tokens with roles
 * (token.h).
 *
 *   token add --role ROLE --name NAME [--event ID] [--expires-in DUR] [--qr]
 *             [--sqs] [--queues NAME,PREFIX*]
 *   token ls [--all] [--json]
 *   token revoke NAME
 *
 * A new token is printed once, on stdout (and as a QR code when stdout is a
 * terminal, or with --qr, for a phone's camera); only its SHA-256 is kept.
 * A worker token is the SQS listener's: its AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY (sqs_cred.h) are printed once instead, as lines a
 * shell can export.
 * Nothing here logs a token.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "clock.h"
#include "cmd/commands.h"
#include "config.h"
#include "db.h"
#include "qr.h"
#include "sqs_cred.h"
#include "text.h"
#include "timefmt.h"
#include "token.h"

#define TOKEN_ADD_USAGE "token add --role operator|box_office|door|monitor|worker --name NAME " \
			"[--event ID | --all-events] [--expires-in DURATION] [--qr] " \
			"[--sqs] [--queues NAME,PREFIX*]"
#define TOKEN_LS_USAGE "token ls [--all] [--json]"

/* qr_print: the code as text, two modules per character cell (upper and
 * lower half blocks), with the quiet zone of 4 modules a reader wants.  A
 * terminal draws its text light on dark, so the light modules are the
 * blocks and the dark ones the spaces. */
static void qr_print(FILE *f, const struct qr *q)
{
	static const char *const cell[4] = { "\u2588", "\u2580", "\u2584", " " };
	int x, y, w = q->width, quiet = 4;

	for (y = -quiet; y < w + quiet; y += 2) {
		for (x = -quiet; x < w + quiet; x++) {
			int top = y >= 0 && y < w && x >= 0 && x < w && q->dark[y * w + x];
			int bot = y + 1 >= 0 && y + 1 < w && x >= 0 && x < w &&
				  q->dark[(y + 1) * w + x];
			/* light top and bottom: full block; dark both: space */
			fputs(cell[(top ? 2 : 0) + (bot ? 1 : 0)], f);
		}
		fputc('\n', f);
	}
}

/* worker_key: the box's ticket key, which a worker's credentials are made
 * from; loaded before the token is made, so a box without one (never run
 * or initialised) makes no token */
static enum sd_result worker_key(struct db *db, const char *state,
				 unsigned char key[CODE_KEY_LEN])
{
	char keypath[PATH_MAX];
	enum sd_result r;

	if ((r = code_key_path(db_path(db), cli_state_dir(state), keypath, sizeof keypath)) !=
		    SD_OK ||
	    (r = code_key_load(keypath, key)) != SD_OK)
		return err_set(r, "%s (a worker's credentials are made from the box's ticket "
			       "key: run `stagedoor init` first)", err_msg());
	return SD_OK;
}

/* print_sqs: a worker token as the credentials an AWS SDK reads */
static void print_sqs(const unsigned char key[CODE_KEY_LEN], const char *token,
		      const char *name)
{
	char id[TOKEN_ID_LEN + 1], key_id[SQS_KEY_ID_LEN + 1], secret[SQS_SECRET_LEN + 1];

	token_id_of(token, id);
	sqs_cred_key_id(id, key_id);
	sqs_cred_secret(key, id, secret);
	printf("AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n", key_id, secret);
	fflush(stdout);
	explicit_bzero(secret, sizeof secret);
	fprintf(stderr, "token '%s' (worker) made; its credentials are shown this once. Any "
			"region will do; `stagedoor token revoke '%s'` ends them\n", name, name);
}

static int token_add_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL, *role_s = NULL, *name = NULL, *expires = NULL;
	int64_t event_id = 0, ttl = 0, now = clock_now_ms();
	int qr_flag = 0, all_events = 0, sqs = 0, npos, rc;
	const char *queues = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_STATE_DIR(&state),
		{ "role", ARG_STR, &role_s, 0, 0, 0, "ROLE",
		  "operator, box_office, door, monitor, or worker (the SQS listener's)", 0 },
		{ "name", ARG_STR, &name, 0, 0, 0, "NAME",
		  "the token's name, unique (e.g. \"North door\")", 0 },
		{ "event", ARG_INT, &event_id, 1, INT64_MAX, 0, "ID",
		  "a door token: the one event it admits (a door token needs it)", 0 },
		{ "all-events", ARG_FLAG, &all_events, 0, 0, 0, NULL,
		  "a door token for every event's tickets, at any time (said with a warning)",
		  0 },
		{ "expires-in", ARG_STR, &expires, 0, 0, 0, "DURATION",
		  "it stops working after this long (12h, 3d)", 0 },
		{ "qr", ARG_FLAG, &qr_flag, 0, 0, 0, NULL,
		  "also print the token as a QR code, for a phone to read", 0 },
		{ "sqs", ARG_FLAG, &sqs, 0, 0, 0, NULL,
		  "a worker token: print it as AWS credentials (what a worker token always "
		  "prints)", 0 },
		{ "queues", ARG_STR, &queues, 0, 0, 0, "LIST",
		  "a worker token: the SQS queues it may use, names or prefixes ending in '*', "
		  "comma-separated (default '*': every queue)", 0 },
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], token[TOKEN_HEX + 1];
	unsigned char key[CODE_KEY_LEN];
	const char *none[CONFIG_N_KEYS] = { 0 };
	struct token_new t = { 0 };
	struct config cfg;
	struct db *db;
	struct qr *q = NULL;
	enum sd_result r;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, TOKEN_ADD_USAGE)) != 0)
		return rc;
	if (!role_s || (t.role = token_role_parse(role_s)) == TOKEN_NONE) {
		fprintf(stderr, "stagedoor: token add: --role must be operator, box_office, door, "
				"monitor or worker\n");
		return 2;
	}
	if ((sqs || queues) && t.role != TOKEN_WORKER) {
		fprintf(stderr, "stagedoor: token add: --sqs and --queues are for --role worker\n");
		return 2;
	}
	if (!name) {
		fprintf(stderr, "stagedoor: token add: --name is required (token revoke takes it)\n");
		return 2;
	}
	if (expires && (text_duration_ms(expires, &ttl) != 0 || ttl <= 0)) {
		fprintf(stderr, "stagedoor: token add: --expires-in must be a duration like 30m, "
				"12h or 7d\n");
		return 2;
	}
	/* when a bound door's doors open (the servers' setting) */
	if ((r = config_resolve(&cfg, NULL, none)) != SD_OK)
		return cli_fail(r);
	t.doors_open_before_ms = config_int(&cfg, CONFIG_DOORS_OPEN_BEFORE);
	config_free(&cfg);
	t.name = name;
	t.event_id = event_id;
	t.all_events = all_events;
	t.expires_at = ttl ? now + ttl : 0;
	t.queues = queues;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = t.role == TOKEN_WORKER ? worker_key(db, state, key) : SD_OK;
	if (r == SD_OK)
		r = token_add(db, &t, now, token);
	db_close(db);
	if (r == SD_OK && t.role == TOKEN_WORKER) {
		print_sqs(key, token, name);
		explicit_bzero(key, sizeof key);
		explicit_bzero(token, sizeof token);
		return 0;
	}
	explicit_bzero(key, sizeof key);
	if (r != SD_OK)
		return cli_fail(r);
	printf("%s\n", token);
	if (all_events)
		fprintf(stderr, "stagedoor: warning: door token '%s' admits every event's tickets, "
				"at any time, and reads every event's counts\n", name);
	if (event_id)
		fprintf(stderr, "token '%s' (%s, event %lld) made; it is shown this once: give "
				"it to the device now\n", name, role_s, (long long)event_id);
	else
		fprintf(stderr, "token '%s' (%s) made; it is shown this once: give it to the "
				"device now\n", name, role_s);
	if ((qr_flag || isatty(STDOUT_FILENO)) && qr_encode(token, &q) == SD_OK)
		qr_print(stdout, q);
	qr_free(q);
	explicit_bzero(token, sizeof token);
	return 0;
}

static void when_text(int64_t ms, char *buf, size_t size)
{
	if (ms)
		timefmt_format(ms, buf, size);
	else
		snprintf(buf, size, "-");
}

struct ls {
	int json, n;
	json_t *rows;
	int64_t now;
};

static void ls_row(const struct token_row *t, void *arg)
{
	struct ls *l = arg;
	char created[40], used[40], exp[40], ev[24];
	const char *state = t->revoked_at ? "revoked" : t->expires_at && t->expires_at <= l->now
							  ? "expired" : "live";

	l->n++;
	if (l->json) {
		json_array_append_new(l->rows, json_pack(
			"{s:s, s:s, s:o, s:I, s:o, s:o, s:o, s:s}", "name", t->name, "role",
			token_role_name(t->role), "event_id",
			t->event_id ? json_integer(t->event_id) : json_null(), "created_at",
			(json_int_t)t->created_at, "last_used_at",
			t->last_used_at ? json_integer(t->last_used_at) : json_null(), "expires_at",
			t->expires_at ? json_integer(t->expires_at) : json_null(), "revoked_at",
			t->revoked_at ? json_integer(t->revoked_at) : json_null(), "state", state));
		return;
	}
	when_text(t->created_at, created, sizeof created);
	when_text(t->last_used_at, used, sizeof used);
	when_text(t->expires_at, exp, sizeof exp);
	snprintf(ev, sizeof ev, "%s", "-");
	if (t->event_id)
		snprintf(ev, sizeof ev, "%lld", (long long)t->event_id);
	printf("%-32s %-10s %-6s %-20s %-20s %-20s %s\n", t->name, token_role_name(t->role), ev,
	       created, used, exp, state);
}

static int token_ls_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL;
	int all = 0, json = 0, npos, rc;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_STATE_DIR(&state),
		{ "all", ARG_FLAG, &all, 0, 0, 0, NULL,
		  "also revoked and expired tokens", 0 },
		ARG_JSON(&json),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	struct ls l = { 0 };
	struct db *db;
	enum sd_result r;

	(void)state;
	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, TOKEN_LS_USAGE)) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	l.json = json;
	l.now = clock_now_ms();
	l.rows = json_array();
	if (!json)
		printf("%-32s %-10s %-6s %-20s %-20s %-20s %s\n", "NAME", "ROLE", "EVENT", "CREATED",
		       "LAST USED", "EXPIRES", "STATE");
	r = token_each(db, all, l.now, ls_row, &l);
	db_close(db);
	if (r != SD_OK) {
		json_decref(l.rows);
		return cli_fail(r);
	}
	if (json) {
		char *s = json_dumps(json_pack("{s:o}", "tokens", l.rows), JSON_INDENT(2));

		printf("%s\n", s ? s : "{}");
		free(s);
	} else {
		json_decref(l.rows);
	}
	return 0;
}

static int token_revoke_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_STATE_DIR(&state),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	struct db *db;
	enum sd_result r;
	int npos, rc;

	(void)state;
	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, "token revoke NAME")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = token_revoke(db, pos[0], clock_now_ms());
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("revoked '%s': refused from now on by every server on this database\n", pos[0]);
	return 0;
}

static const struct cli_cmd token_subs[] = {
	{ "add", token_add_cmd, "a token for a device or a person, with a role; printed once "
				"(only its SHA-256 is kept)", NULL, 0 },
	{ "ls", token_ls_cmd, "the tokens: name, role, event, created, last used, expiry", NULL,
	  0 },
	{ "revoke", token_revoke_cmd, "refuse a token from now on, in every server on this "
				      "database", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_token = CLI_NODE("token", NULL, token_subs,
		"the API's tokens with roles");
