/*
 * sqs_store.h: SQS queues and their messages in the database.
 *
 * A queue is a row of sqs_queues and a lane of the stream (its id): its
 * messages are stream entries of kind sqs:<name>, claimed only by its
 * receivers (queue_claim_lane), with the stream's leases as visibility
 * timeouts and its fencing tokens in the receipt handles.  A message's
 * MessageId is its entry's job_id: the same on every delivery.  A receipt
 * handle names the lane, the entry and the token of one delivery, so a
 * delete or a visibility change by a worker whose delivery was taken over
 * (its visibility ran out and another receive got the message) is refused
 * instead of touching the other worker's delivery.
 *
 * Every call runs in a transaction of its own.  A refusal an SQS client
 * should see returns SD_INVALID (or SD_NOT_FOUND, SD_CONFLICT, SD_LIMITED)
 * with the SQS error's name in sqs_fault() and the words in err_msg().
 */
#ifndef SD_SQS_STORE_H
#define SD_SQS_STORE_H

#include <jansson.h>
#include <stdint.h>

#include "db.h"
#include "queue.h"
#include "result.h"

#define SQS_MESSAGE_ID_LEN 36		/* a UUID */
#define SQS_HANDLE_MAX 96		/* a receipt handle's length, at most */
#define SQS_BATCH_MAX 10
#define SQS_VISIBILITY_MAX_S 43200	/* 12 hours */
#define SQS_WAIT_MAX_S 20
#define SQS_DELAY_MAX_S 900
#define SQS_DEDUP_MS (5 * 60 * 1000LL)	/* a FIFO deduplication id's life */
#define SQS_PURGE_EVERY_MS 60000	/* one purge a minute per queue */
#define SQS_QUEUES_MAX 1000		/* queues on one box (or one database) */

/*
 * sqs_fail: err_set(r, ...) and the SQS error's name (QueueDoesNotExist,
 * InvalidParameterValue, ...), kept per thread for the answer.
 */
enum sd_result sqs_fail(enum sd_result r, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* sqs_fault: the name the last sqs_fail on this thread set, or NULL. */
const char *sqs_fault(void);

/* sqs_fault_clear: forget it (before each request). */
void sqs_fault_clear(void);

/* A queue and the attributes in force. */
struct sqs_queue {
	int64_t id;			/* its lane */
	char name[QUEUE_SQS_NAME_MAX + 1];
	char kind[QUEUE_KIND_MAX + 1];	/* sqs:<name> */
	int fifo;
	int64_t created_at, modified_at, purged_at;
	int64_t visibility_s, delay_s, retention_s, wait_s, max_size;
	int content_dedup;		/* a FIFO queue's ContentBasedDeduplication */
	int64_t max_receives;		/* RedrivePolicy's maxReceiveCount; 0: none */
	char dlq[QUEUE_SQS_NAME_MAX + 1];	/* and its dead-letter queue */
	json_t *attrs;			/* the set attributes, as stored (strings) */
};

/* sqs_queue_clear: free what q holds. */
void sqs_queue_clear(struct sqs_queue *q);

/* sqs_queue_find: the queue named name.  SD_NOT_FOUND (QueueDoesNotExist). */
enum sd_result sqs_queue_find(struct db *db, const char *name, struct sqs_queue *q);

/*
 * sqs_queue_create: a queue named name with attrs (an object of strings,
 * may be NULL).  A queue of that name with the same attributes is taken as
 * it is (CreateQueue is idempotent); with others SD_CONFLICT
 * (QueueNameExists).  [out] *q.
 */
enum sd_result sqs_queue_create(struct db *db, const char *name, json_t *attrs,
				struct sqs_queue *q);

/* sqs_queue_set: set attrs on q (SetQueueAttributes); q is read again. */
enum sd_result sqs_queue_set(struct db *db, struct sqs_queue *q, json_t *attrs);

/* sqs_queue_delete: the queue and every message in it are gone. */
enum sd_result sqs_queue_delete(struct db *db, const struct sqs_queue *q);

/* sqs_queue_purge: every message in q is gone; SD_LIMITED
 * (PurgeQueueInProgress) within a minute of the last purge. */
enum sd_result sqs_queue_purge(struct db *db, const struct sqs_queue *q);

/* sqs_queue_names: fn for each queue whose name starts with prefix (may
 * be NULL), in name order, after `after` (may be NULL), until fn returns 0. */
enum sd_result sqs_queue_names(struct db *db, const char *prefix, const char *after,
			       int (*fn)(const char *name, void *arg), void *arg);

/*
 * sqs_queue_attributes: the attributes names asks for (a JSON array of
 * strings, "All" for every one) as an object of strings: the set ones, the
 * defaults, the Approximate* counts, the timestamps and QueueArn (in
 * region).  SD_INVALID (InvalidAttributeName) for a name SQS does not have.
 */
enum sd_result sqs_queue_attributes(struct db *db, const struct sqs_queue *q, json_t *names,
				    const char *region, json_t **out);

/* One message to send. */
struct sqs_send {
	const char *body;
	size_t body_len;
	json_t *attrs;			/* MessageAttributes, may be NULL */
	int64_t delay_s;		/* -1: the queue's DelaySeconds */
	const char *group;		/* MessageGroupId: FIFO queues only */
	const char *dedup;		/* MessageDeduplicationId: FIFO, may be NULL */
	const char *sender;		/* the access key id */
};

/* What a send answers. */
struct sqs_sent {
	char message_id[SQS_MESSAGE_ID_LEN + 1];
	char md5_body[33], md5_attrs[33];	/* md5_attrs "" without attributes */
	char sequence[24];		/* FIFO: the entry's number, else "" */
	int duplicate;			/* a FIFO send deduplicated: nothing new */
};

/* sqs_send_check: m as SendMessage checks it (body, attributes, size, delay,
 * group and deduplication for q's kind), without the database. */
enum sd_result sqs_send_check(const struct sqs_queue *q, const struct sqs_send *m);

/*
 * sqs_send_many: n checked messages in one transaction: all are taken or
 * none.  [out] sent[0..n).
 */
enum sd_result sqs_send_many(struct db *db, const struct sqs_queue *q, const struct sqs_send *m,
			     int n, struct sqs_sent *sent);

/* What a receive asks for. */
struct sqs_receive {
	int max;			/* 1..10 */
	int64_t visibility_s;		/* -1: the queue's VisibilityTimeout */
	json_t *attr_names;		/* system attributes wanted, may be NULL */
	json_t *msg_attr_names;		/* message attributes wanted, may be NULL */
	const char *worker;		/* leased_by: the access key id */
};

/*
 * sqs_receive: up to r->max messages of q, leased for the visibility
 * timeout.  [out] *messages: a new array of the messages as ReceiveMessage
 * answers them (MessageId, ReceiptHandle, MD5OfBody, Body, Attributes,
 * MessageAttributes, MD5OfMessageAttributes); empty when none is visible.
 */
enum sd_result sqs_receive(struct db *db, const struct sqs_queue *q, const struct sqs_receive *r,
			   json_t **messages);

/* sqs_delete: delete the delivery handle names: SD_OK, or when it is
 * stale SD_STALE (ReceiptHandleIsInvalid) unless the message is gone
 * already (deleted: SD_OK, as SQS answers). */
enum sd_result sqs_delete(struct db *db, const struct sqs_queue *q, const char *handle);

/* One entry's outcome in a batch. */
struct sqs_outcome {
	enum sd_result r;		/* SD_OK, or the entry's refusal */
	char code[48];			/* its SQS error's name; "" when r is SD_OK */
	char msg[240];
};

/*
 * sqs_delete_many: sqs_delete of each of handles[0..n) (n at most
 * SQS_BATCH_MAX): the deliveries of one receive (one fencing token) in one
 * commit.  [out] out[i], each entry's outcome, as sqs_delete answers it.
 * SD_OK unless the box failed (then out[] says nothing).
 */
enum sd_result sqs_delete_many(struct db *db, const struct sqs_queue *q,
			       const char *const *handles, int n, struct sqs_outcome *out);

/* sqs_visibility: the delivery handle names is visible again after
 * seconds (0: now, given back).  SD_STALE (ReceiptHandleIsInvalid). */
enum sd_result sqs_visibility(struct db *db, const struct sqs_queue *q, const char *handle,
			      int64_t seconds);

/* sqs_next_visible: [out] *at, the earliest time a message of q becomes
 * visible (ms), or -1 when q is empty: how long a long poll may sleep. */
enum sd_result sqs_next_visible(struct db *db, const struct sqs_queue *q, int64_t *at);

#endif
