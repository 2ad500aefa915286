/*
 * sqs_actions.h: the SQS actions, from a request's parameters (the JSON
 * protocol's shape, sqs_wire.h) to its result, on the box's queues
 * (sqs_store.h).  No HTTP and no wire format here: the listener (sqs.c)
 * authenticates the caller, reads the request and writes the answer.
 *
 * A ReceiveMessage that finds nothing and may still wait does not wait
 * here: it answers "park until" (struct sqs_call's park_until), and the
 * listener calls it again when a commit may have made a message visible
 * or when that time comes, so no thread is held by a waiting receive.
 */
#ifndef SD_SQS_ACTIONS_H
#define SD_SQS_ACTIONS_H

#include <jansson.h>
#include <stdint.h>

#include "db.h"
#include "db_group.h"
#include "result.h"
#include "token.h"

/* One call of an action. */
struct sqs_call {
	struct db *db;			/* QUEUE durability: receives, deletes, queues */
	struct db *db_full;		/* FULL: sends (a message taken is kept) */
	struct db_group *group;		/* the sends' group commit (db_group.h), or NULL */
	const struct token_grant *grant; /* the worker token's: its queues */
	const char *origin;		/* "https://box.example:9324": queue URLs */
	const char *region;		/* the signature's region: QueueArn */
	const char *key_id;		/* the caller's access key id: SenderId */
	int64_t started_at;		/* the request's first arrival (ms) */
	int64_t park_until;		/* [out] > 0: nothing yet, call again by then */
};

/*
 * sqs_action: run action with params.  [out] *result: the JSON-shaped
 * result, or NULL when c->park_until was set.  On a refusal, sqs_fault()
 * names the SQS error (InvalidAction for an action the box does not have)
 * and err_msg() says why; a failure with no name is the box's (an
 * InternalFailure, or ServiceUnavailable when the database is busy).
 */
enum sd_result sqs_action(struct sqs_call *c, const char *action, json_t *params,
			  json_t **result);

#endif
