/*
 * token.h: the API's bearer tokens and their roles.
 *
 * init makes <state dir>/api.token (the operator's bootstrap token: 32
 * random bytes as 64 hex digits, mode 0600) and records its SHA-256 in the
 * database; `token add` makes more, each with a role (operator, box_office,
 * door, monitor), a unique name, an optional event (door tokens) and an
 * optional expiry, printed once and stored only as its SHA-256.  A
 * request's "Authorization: Bearer <token>" is looked up by SHA-256 on
 * every request, so a revoked or expired token is refused at once by every
 * server process and every box sharing the database; no token is stored,
 * logged or compared in the clear.
 */
#ifndef SD_TOKEN_H
#define SD_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

#define TOKEN_HEX 64			/* 32 random bytes, hex */
#define TOKEN_NAME_MAX 200		/* bytes of a token's name */
#define TOKEN_USED_EVERY_MS 60000	/* last_used_at is written at most this often */
#define TOKEN_ID_LEN 16			/* a token's identity: its SHA-256's first hex digits */

struct db;

/* The roles; TOKEN_NONE: no token (a public route). */
enum token_role { TOKEN_NONE = -1, TOKEN_OPERATOR, TOKEN_BOX_OFFICE, TOKEN_DOOR, TOKEN_MONITOR,
		  TOKEN_WORKER, TOKEN_ROLES };

#define TOKEN_QUEUES_MAX 32		/* queue patterns of one worker token */
#define TOKEN_QUEUE_PATTERN_MAX 61	/* a queue name, or a prefix and '*' */

/* Why a token was not admitted. */
enum token_refusal { TOKEN_OK, TOKEN_MISSING, TOKEN_MALFORMED, TOKEN_UNKNOWN, TOKEN_EXPIRED,
		     TOKEN_REVOKED };

/* What an admitted token grants. */
struct token_grant {
	int role;			/* enum token_role */
	int64_t event_id;		/* a door's event; 0: every event */
	char name[TOKEN_NAME_MAX + 1];
	char id[TOKEN_ID_LEN + 1];	/* this token's identity, never another's of
					 * the same name (a door's nonces, its rate) */
	int n_queues;			/* a worker's: the SQS queues it may use */
	char queues[TOKEN_QUEUES_MAX][TOKEN_QUEUE_PATTERN_MAX + 1];
};

/* A token as `token ls` shows it. */
struct token_row {
	char name[TOKEN_NAME_MAX + 1];
	int role;
	int64_t event_id;		/* 0: none */
	int64_t created_at, expires_at, last_used_at, revoked_at;	/* 0: none */
};

/* What `token add` asks for. */
struct token_new {
	const char *name;		/* 1..TOKEN_NAME_MAX bytes of text */
	int role;			/* enum token_role */
	int64_t event_id;		/* 0, or an event (door tokens only) */
	int64_t expires_at;		/* 0: never */
	int all_events;			/* a door token for every event, on purpose */
	int64_t doors_open_before_ms;	/* when a bound door token's doors open */
	const char *queues;		/* a worker token's SQS queues: names or
					 * prefixes ending in '*', comma-separated;
					 * NULL: "*", every queue */
};

/* token_role_name: "operator", "box_office", "door", "monitor", "worker"
 * (the SQS listener's alone; no route of the API admits it); "" else. */
const char *token_role_name(int role);
/* token_role_parse: the role named s, or TOKEN_NONE. */
int token_role_parse(const char *s);

/* token_path: "<state dir>/api.token" into buf. */
enum sd_result token_path(const char *db_path, const char *state_dir, char *buf, size_t size);

/*
 * token_ensure: what `init` makes: <state dir>/api.token when missing (put
 * atomically, so two racing inits keep one token; an existing file is left
 * as it is), and the file's SHA-256 recorded in the database at db_path.
 */
enum sd_result token_ensure(const char *db_path, const char *state_dir);

/*
 * token_lookup: the grant of the token hdr ("Bearer <token>") names.
 * [out] *why TOKEN_OK with *g filled, or why not (no header, not a bearer
 * token of 64 hex digits, not recorded, expired at or before now, revoked).
 * Marks the token used (at most every TOKEN_USED_EVERY_MS; a failure to
 * mark it is logged, not the request's).  SD_OK unless the database failed.
 */
enum sd_result token_lookup(struct db *db, const char *hdr, int64_t now, struct token_grant *g,
			    int *why);

/*
 * token_lookup_id: token_lookup for the token whose id (TOKEN_ID_LEN hex
 * digits: its SHA-256's first) is id, as an SQS access key names it; a
 * worker's grant carries its queue patterns.
 */
enum sd_result token_lookup_id(struct db *db, const char *id, int64_t now, struct token_grant *g,
			       int *why);

/* token_queue_allowed: 1 when the worker grant g may use the SQS queue name
 * (one of its patterns is the name, or a prefix of it and '*'). */
int token_queue_allowed(const struct token_grant *g, const char *name);

/* token_id_of: the id of token (64 hex digits) into id. */
void token_id_of(const char *token, char id[TOKEN_ID_LEN + 1]);

/*
 * token_add: a new token for t, recorded as its SHA-256.  [out] token: the
 * token, 64 hex digits (shown once, never kept).  SD_INVALID for a bad
 * name, role, event binding or expiry, and when a live token has the
 * name already; SD_NOT_FOUND when the event does not exist.
 */
enum sd_result token_add(struct db *db, const struct token_new *t, int64_t now,
			 char token[TOKEN_HEX + 1]);

/* token_each: fn for every token, by name; all = 0: only the live ones (not
 * revoked, not expired at now). */
enum sd_result token_each(struct db *db, int all, int64_t now,
			  void (*fn)(const struct token_row *row, void *arg), void *arg);

/* token_revoke: the live token named name is refused from now on.
 * SD_NOT_FOUND when no live token has that name. */
enum sd_result token_revoke(struct db *db, const char *name, int64_t now);

#endif
