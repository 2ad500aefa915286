/*
 * sqs_queues.c: SQS queues as rows of sqs_queues, their attributes and
 * their counts (sqs_store.h; the messages are sqs_store.c's).
 *
 * Attributes are kept as SQS names them, an object of strings, and only
 * those an SQS queue has are taken; each settable one is checked against
 * SQS's range.  The ones with no meaning on one box (Policy, the
 * encryption settings, FIFO throughput) are kept and shown, and change
 * nothing (dist/doc/jobs.md says so).
 */
#define _GNU_SOURCE
#include "sqs_store.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

/* ======================== faults ========================================= */

static _Thread_local const char *fault;

enum sd_result sqs_fail(enum sd_result r, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	fault = code;
	return err_set(r, "%s", msg);
}

const char *sqs_fault(void)
{
	return fault;
}

void sqs_fault_clear(void)
{
	fault = NULL;
}

/* ======================== attributes ===================================== */

/* The numeric attributes, their defaults and SQS's ranges. */
static const struct num_attr {
	const char *name;
	int64_t def, min, max;
	size_t off;			/* its field in struct sqs_queue */
} num_attrs[] = {
	{ "VisibilityTimeout", 30, 0, SQS_VISIBILITY_MAX_S,
	  offsetof(struct sqs_queue, visibility_s) },
	{ "DelaySeconds", 0, 0, SQS_DELAY_MAX_S, offsetof(struct sqs_queue, delay_s) },
	{ "MessageRetentionPeriod", 345600, 60, 1209600,
	  offsetof(struct sqs_queue, retention_s) },
	{ "ReceiveMessageWaitTimeSeconds", 0, 0, SQS_WAIT_MAX_S,
	  offsetof(struct sqs_queue, wait_s) },
	{ "MaximumMessageSize", 262144, 1024, 262144, offsetof(struct sqs_queue, max_size) },
};

/* Kept and shown, with no effect on one box. */
static const char *const opaque_attrs[] = {
	"Policy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled",
	"RedriveAllowPolicy", "DeduplicationScope", "FifoThroughputLimit",
};

/* Read only: GetQueueAttributes answers them. */
static const char *const read_attrs[] = {
	"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
	"ApproximateNumberOfMessagesDelayed", "CreatedTimestamp", "LastModifiedTimestamp",
	"QueueArn",
};

#define N(a) ((int)(sizeof a / sizeof a[0]))

static int in_list(const char *const *list, int n, const char *name)
{
	int i;

	for (i = 0; i < n; i++)
		if (strcmp(list[i], name) == 0)
			return 1;
	return 0;
}

static const struct num_attr *num_attr(const char *name)
{
	int i;

	for (i = 0; i < N(num_attrs); i++)
		if (strcmp(num_attrs[i].name, name) == 0)
			return &num_attrs[i];
	return NULL;
}

static int parse_int(const char *s, int64_t *v)
{
	char *end;
	long long x;

	if (!s || !*s || strlen(s) > 18)
		return 0;
	x = strtoll(s, &end, 10);
	if (*end || (s[0] != '-' && (s[0] < '0' || s[0] > '9')))
		return 0;
	*v = x;
	return 1;
}

/* arn_queue: the queue name at the end of an SQS ARN, into name */
static enum sd_result arn_queue(const char *arn, char name[QUEUE_SQS_NAME_MAX + 1])
{
	const char *p = arn ? strrchr(arn, ':') : NULL;

	if (!arn || strncmp(arn, "arn:aws:sqs:", 12) != 0 || !p || strlen(p + 1) > QUEUE_SQS_NAME_MAX ||
	    queue_sqs_name_valid(p + 1) != SD_OK)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value %.200s for parameter RedrivePolicy is invalid. Reason: "
				"deadLetterTargetArn must be an SQS queue's ARN.", arn ? arn : "");
	snprintf(name, QUEUE_SQS_NAME_MAX + 1, "%s", p + 1);
	return SD_OK;
}

/* redrive_parse: a RedrivePolicy's maxReceiveCount and queue name */
static enum sd_result redrive_parse(const char *s, int64_t *max, char dlq[QUEUE_SQS_NAME_MAX + 1])
{
	json_t *j = json_loads(s, 0, NULL), *m = j ? json_object_get(j, "maxReceiveCount") : NULL;
	enum sd_result r = SD_OK;
	int64_t v = 0;

	if (!json_is_object(j) || !(json_is_integer(m) || json_is_string(m)))
		r = sqs_fail(SD_INVALID, "InvalidParameterValue",
			     "Value %.200s for parameter RedrivePolicy is invalid. Reason: "
			     "Redrive policy is not a valid JSON map with maxReceiveCount and "
			     "deadLetterTargetArn.", s);
	else if (json_is_integer(m) ? (v = json_integer_value(m), 0)
				    : !parse_int(json_string_value(m), &v))
		r = sqs_fail(SD_INVALID, "InvalidParameterValue",
			     "Value %.200s for parameter RedrivePolicy is invalid. Reason: "
			     "maxReceiveCount must be an integer.", s);
	else if (v < 1 || v > 1000)
		r = sqs_fail(SD_INVALID, "InvalidParameterValue",
			     "Value %.200s for parameter RedrivePolicy is invalid. Reason: "
			     "maxReceiveCount must be between 1 and 1000.", s);
	else
		r = arn_queue(json_string_value(json_object_get(j, "deadLetterTargetArn")), dlq);
	json_decref(j);
	*max = v;
	return r;
}

/* attr_check: one attribute name and value, as SetQueueAttributes takes it */
static enum sd_result attr_check(const char *name, json_t *val, int fifo)
{
	const struct num_attr *na = num_attr(name);
	const char *s = json_string_value(val);
	char dlq[QUEUE_SQS_NAME_MAX + 1];
	int64_t v;

	if (!s)
		return sqs_fail(SD_INVALID, "InvalidAttributeValue",
				"the value of attribute %.100s must be a string", name);
	if (na) {
		if (!parse_int(s, &v) || v < na->min || v > na->max)
			return sqs_fail(SD_INVALID, "InvalidAttributeValue",
					"Invalid value for the parameter %s: it must be an "
					"integer from %lld to %lld.", name, (long long)na->min,
					(long long)na->max);
		return SD_OK;
	}
	if (strcmp(name, "RedrivePolicy") == 0)
		return redrive_parse(s, &v, dlq);
	if (strcmp(name, "ContentBasedDeduplication") == 0 || strcmp(name, "FifoQueue") == 0) {
		if (!fifo)
			return sqs_fail(SD_INVALID, "InvalidAttributeName",
					"Unknown Attribute %s: only a FIFO queue has it.", name);
		if (strcmp(s, "true") != 0 && strcmp(s, "false") != 0)
			return sqs_fail(SD_INVALID, "InvalidAttributeValue",
					"Invalid value for the parameter %s: true or false.", name);
		if (strcmp(name, "FifoQueue") == 0 && strcmp(s, "true") != 0)
			return sqs_fail(SD_INVALID, "InvalidAttributeValue",
					"a queue whose name ends in .fifo is a FIFO queue");
		return SD_OK;
	}
	if (in_list(opaque_attrs, N(opaque_attrs), name)) {
		if (strlen(s) > 20480)
			return sqs_fail(SD_INVALID, "InvalidAttributeValue",
					"the value of %s is too long", name);
		return SD_OK;
	}
	return sqs_fail(SD_INVALID, "InvalidAttributeName", "Unknown Attribute %.100s.", name);
}

/* attrs_merge: into (a copy of) old, each of set, checked; [out] *out */
static enum sd_result attrs_merge(json_t *old, json_t *set, int fifo, int creating, json_t **out)
{
	json_t *m = old ? json_deep_copy(old) : json_object(), *v;
	const char *k;
	enum sd_result r;

	*out = NULL;
	if (!m)
		return err_set(SD_NOMEM, "out of memory");
	if (set && !json_is_object(set)) {
		json_decref(m);
		return sqs_fail(SD_INVALID, "InvalidParameterValue", "Attributes must be a map");
	}
	json_object_foreach(set, k, v) {
		if ((r = attr_check(k, v, fifo)) != SD_OK) {
			json_decref(m);
			return r;
		}
		if (strcmp(k, "FifoQueue") == 0 && !creating) {
			json_decref(m);
			return sqs_fail(SD_INVALID, "InvalidAttributeName",
					"FifoQueue is set when a queue is made, never changed");
		}
		if (strcmp(k, "FifoQueue") != 0)
			json_object_set(m, k, v);
	}
	*out = m;
	return SD_OK;
}

/* queue_fill: q's fields from its stored attributes */
static void queue_fill(struct sqs_queue *q)
{
	int i;

	for (i = 0; i < N(num_attrs); i++) {
		int64_t v = num_attrs[i].def;
		parse_int(json_string_value(json_object_get(q->attrs, num_attrs[i].name)), &v);
		*(int64_t *)((char *)q + num_attrs[i].off) = v;
	}
	q->content_dedup = q->fifo && json_string_value(json_object_get(q->attrs,
					"ContentBasedDeduplication")) &&
			   strcmp(json_string_value(json_object_get(q->attrs,
					"ContentBasedDeduplication")), "true") == 0;
	q->max_receives = 0;
	q->dlq[0] = '\0';
	if (json_string_value(json_object_get(q->attrs, "RedrivePolicy")) &&
	    redrive_parse(json_string_value(json_object_get(q->attrs, "RedrivePolicy")),
			  &q->max_receives, q->dlq) != SD_OK)
		q->max_receives = 0;	/* checked when it was set */
	sqs_fault_clear();
}

void sqs_queue_clear(struct sqs_queue *q)
{
	json_decref(q->attrs);
	memset(q, 0, sizeof *q);
}

/* ======================== finding, making, changing ===================== */

static const char SQL_FIND[] =
	"SELECT id, name, fifo, attributes, created_at, modified_at, purged_at FROM sqs_queues "
	"WHERE name = ?1";
static const char SQL_CREATE[] =
	"INSERT INTO sqs_queues (name, fifo, attributes, created_at, modified_at) "
	"VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (name) DO NOTHING";
static const char SQL_COUNT[] = "SELECT count(*) FROM sqs_queues";
static const char SQL_SET[] =
	"UPDATE sqs_queues SET attributes = ?2, modified_at = ?3 WHERE id = ?1";
static const char SQL_DROP_MESSAGES[] = "DELETE FROM stream WHERE queue = ?1";
static const char SQL_DROP_DEDUP[] = "DELETE FROM sqs_dedup WHERE queue = ?1";
static const char SQL_DROP[] = "DELETE FROM sqs_queues WHERE id = ?1";
/* its pause and limits go with it (a queue made again has a new lane) */
static const char SQL_DROP_CONTROL[] = "DELETE FROM controls WHERE lane = ?1";
static const char SQL_PURGE_MARK[] =
	"UPDATE sqs_queues SET purged_at = ?2 WHERE id = ?1 AND "
	"(purged_at IS NULL OR purged_at <= ?2 - ?3)";
static const char SQL_NAMES[] =
	"SELECT name FROM sqs_queues WHERE name > ?1 AND substr(name, 1, length(?2)) = ?2 "
	"ORDER BY name";

enum sd_result sqs_queue_find(struct db *db, const char *name, struct sqs_queue *q)
{
	struct db_stmt *st = db_stmt(db, SQL_FIND);
	enum sd_result r = SD_OK;
	int row;

	memset(q, 0, sizeof *q);
	if (!st)
		return SD_DB;
	db_bind_text(st, 1, name);
	if ((row = db_next(st, &r))) {
		q->id = db_col_int(st, 0);
		snprintf(q->name, sizeof q->name, "%s", db_col_text(st, 1));
		snprintf(q->kind, sizeof q->kind, QUEUE_SQS_PREFIX "%s", q->name);
		q->fifo = (int)db_col_int(st, 2);
		q->attrs = json_loads(db_col_text(st, 3), 0, NULL);
		q->created_at = db_col_int(st, 4);
		q->modified_at = db_col_int(st, 5);
		q->purged_at = db_col_is_null(st, 6) ? 0 : db_col_int(st, 6);
	}
	db_reset(st);
	if (r != SD_OK)
		return r;
	if (!row)
		return sqs_fail(SD_NOT_FOUND, "QueueDoesNotExist",
				"The specified queue does not exist.");
	if (!q->attrs)
		q->attrs = json_object();
	queue_fill(q);
	return SD_OK;
}

/* dlq_check: the dead-letter queue attrs name exists and is of q's kind */
static enum sd_result dlq_check(struct db *db, json_t *attrs, int fifo, const char *self)
{
	const char *s = json_string_value(json_object_get(attrs, "RedrivePolicy"));
	char dlq[QUEUE_SQS_NAME_MAX + 1];
	struct sqs_queue d;
	enum sd_result r;
	int64_t max;

	if (!s)
		return SD_OK;
	if ((r = redrive_parse(s, &max, dlq)) != SD_OK)
		return r;
	if (strcmp(dlq, self) == 0)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value %.200s for parameter RedrivePolicy is invalid. Reason: a "
				"queue is not its own dead-letter queue.", s);
	r = sqs_queue_find(db, dlq, &d);
	if (r == SD_NOT_FOUND)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value %.200s for parameter RedrivePolicy is invalid. Reason: "
				"Dead letter target does not exist.", s);
	if (r == SD_OK && d.fifo != fifo)
		r = sqs_fail(SD_INVALID, "InvalidParameterValue",
			     "Value %.200s for parameter RedrivePolicy is invalid. Reason: "
			     "Dead-letter target owner queue and the queue must both be FIFO or "
			     "both standard.", s);
	sqs_queue_clear(&d);
	return r;
}

/* room_for_one: a new queue stays within SQS_QUEUES_MAX (one that exists
 * already is no new one) */
static enum sd_result room_for_one(struct db *db, const char *name)
{
	struct db_stmt *st = db_stmt(db, SQL_COUNT);
	enum sd_result r = SD_OK;
	struct sqs_queue q;
	int64_t n = 0;

	if (!st)
		return SD_DB;
	if (db_next(st, &r))
		n = db_col_int(st, 0);
	db_reset(st);
	if (r != SD_OK || n < SQS_QUEUES_MAX)
		return r;
	if ((r = sqs_queue_find(db, name, &q)) != SD_NOT_FOUND) {
		sqs_queue_clear(&q);
		return r;
	}
	return sqs_fail(SD_LIMITED, "OverLimit", "This box holds %d queues, its most: delete "
			"one first.", SQS_QUEUES_MAX);
}

/* attrs_begin: set over old, checked, as stored ([out] *merged, *text, the
 * caller's to free either way), with a transaction begun in which the
 * dead-letter queue it names was found; on failure nothing is open */
static enum sd_result attrs_begin(struct db *db, json_t *old, json_t *set, int fifo,
				  const char *name, json_t **merged, char **text)
{
	enum sd_result r;

	*text = NULL;
	if ((r = attrs_merge(old, set, fifo, !old, merged)) != SD_OK)
		return r;
	if (!(*text = json_dumps(*merged, JSON_SORT_KEYS | JSON_COMPACT)))
		return err_set(SD_NOMEM, "out of memory");
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = dlq_check(db, *merged, fifo, name)) != SD_OK)
		db_rollback(db);
	return r;
}

enum sd_result sqs_queue_create(struct db *db, const char *name, json_t *attrs,
				struct sqs_queue *q)
{
	size_t len = name ? strlen(name) : 0;
	int fifo = len > 5 && strcmp(name + len - 5, ".fifo") == 0;
	json_t *merged = NULL;
	struct db_stmt *st;
	enum sd_result r;
	char *text = NULL;
	int64_t now = clock_now_ms();

	memset(q, 0, sizeof *q);
	if (queue_sqs_name_valid(name) != SD_OK)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Can only include alphanumeric characters, hyphens, or "
				"underscores. 1 to %d in length (%s)", QUEUE_SQS_NAME_MAX, err_msg());
	if (!fifo && json_object_get(attrs, "FifoQueue"))
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"The name of a FIFO queue can only include alphanumeric "
				"characters, hyphens, or underscores, must end with .fifo suffix.");
	if ((r = attrs_begin(db, NULL, attrs, fifo, name, &merged, &text)) != SD_OK)
		goto out;
	if ((r = room_for_one(db, name)) != SD_OK)
		goto end;
	if (!(st = db_stmt(db, SQL_CREATE))) {
		r = SD_DB;
		goto end;
	}
	db_bind_text(st, 1, name);
	db_bind_int(st, 2, fifo);
	db_bind_text(st, 3, text);
	db_bind_int(st, 4, now);
	if ((r = db_run(st)) != SD_OK || (r = sqs_queue_find(db, name, q)) != SD_OK)
		goto end;
	if (!json_equal(q->attrs, merged))
		r = sqs_fail(SD_CONFLICT, "QueueNameExists",
			     "A queue already exists with the same name and a different value "
			     "for attribute(s)");
end:
	r = db_end(db, r);
out:
	if (r != SD_OK)
		sqs_queue_clear(q);
	free(text);
	json_decref(merged);
	return r;
}

enum sd_result sqs_queue_set(struct db *db, struct sqs_queue *q, json_t *attrs)
{
	json_t *merged = NULL;
	struct db_stmt *st;
	enum sd_result r;
	char *text = NULL;
	char name[QUEUE_SQS_NAME_MAX + 1];

	if ((r = attrs_begin(db, q->attrs, attrs, q->fifo, q->name, &merged, &text)) != SD_OK)
		goto out;
	if (!(st = db_stmt(db, SQL_SET))) {
		r = SD_DB;
		goto end;
	}
	db_bind_int(st, 1, q->id);
	db_bind_text(st, 2, text);
	db_bind_int(st, 3, clock_now_ms());
	r = db_run(st);
end:
	r = db_end(db, r);
out:
	free(text);
	json_decref(merged);
	if (r == SD_OK) {
		snprintf(name, sizeof name, "%s", q->name);
		sqs_queue_clear(q);
		r = sqs_queue_find(db, name, q);
	}
	return r;
}

/* run_id: sql with ?1 bound to id */
static enum sd_result run_id(struct db *db, const char *sql, int64_t id)
{
	struct db_stmt *st = db_stmt(db, sql);

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	return db_run(st);
}

enum sd_result sqs_queue_delete(struct db *db, const struct sqs_queue *q)
{
	enum sd_result r;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = run_id(db, SQL_DROP_MESSAGES, q->id)) == SD_OK &&
	    (r = run_id(db, SQL_DROP_DEDUP, q->id)) == SD_OK &&
	    (r = run_id(db, SQL_DROP_CONTROL, q->id)) == SD_OK)
		r = run_id(db, SQL_DROP, q->id);
	return db_end(db, r);
}

enum sd_result sqs_queue_purge(struct db *db, const struct sqs_queue *q)
{
	struct db_stmt *st;
	enum sd_result r;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	if (!(st = db_stmt(db, SQL_PURGE_MARK))) {
		r = SD_DB;
		goto end;
	}
	db_bind_int(st, 1, q->id);
	db_bind_int(st, 2, clock_now_ms());
	db_bind_int(st, 3, SQS_PURGE_EVERY_MS);
	if ((r = db_run(st)) != SD_OK)
		goto end;
	if (db_changes(db) == 0)
		r = sqs_fail(SD_LIMITED, "PurgeQueueInProgress",
			     "Only one PurgeQueue operation on %s is allowed every 60 seconds.",
			     q->name);
	else
		r = run_id(db, SQL_DROP_MESSAGES, q->id);
end:
	return db_end(db, r);
}

enum sd_result sqs_queue_names(struct db *db, const char *prefix, const char *after,
			       int (*fn)(const char *name, void *arg), void *arg)
{
	struct db_stmt *st = db_stmt(db, SQL_NAMES);
	enum sd_result r = SD_OK;

	if (!st)
		return SD_DB;
	db_bind_text(st, 1, after ? after : "");
	db_bind_text(st, 2, prefix ? prefix : "");
	while (db_next(st, &r))
		if (!fn(db_col_text(st, 0), arg))
			break;
	db_reset(st);
	return r;
}

/* ======================== GetQueueAttributes ============================= */

static const char SQL_COUNTS[] =
	"SELECT coalesce(sum(CASE WHEN visible_at <= ?2 THEN 1 ELSE 0 END), 0), "
	"coalesce(sum(CASE WHEN visible_at > ?2 AND lease_token IS NOT NULL THEN 1 ELSE 0 END), 0), "
	"coalesce(sum(CASE WHEN visible_at > ?2 AND lease_token IS NULL THEN 1 ELSE 0 END), 0) "
	"FROM stream WHERE queue = ?1";

static enum sd_result counts(struct db *db, const struct sqs_queue *q, int64_t n[3])
{
	struct db_stmt *st = db_stmt(db, SQL_COUNTS);
	enum sd_result r = SD_OK;
	int i;

	n[0] = n[1] = n[2] = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, q->id);
	db_bind_int(st, 2, clock_now_ms());
	if (db_next(st, &r))
		for (i = 0; i < 3; i++)
			n[i] = db_col_int(st, i);
	db_reset(st);
	return r;
}

static void set_int(json_t *o, const char *k, int64_t v)
{
	char buf[24];

	snprintf(buf, sizeof buf, "%lld", (long long)v);
	json_object_set_new(o, k, json_string(buf));
}

/* all_attrs: every attribute of q, as strings */
static enum sd_result all_attrs(struct db *db, const struct sqs_queue *q, const char *region,
				json_t *o)
{
	char arn[160];
	int64_t n[3];
	enum sd_result r;
	int i;

	for (i = 0; i < N(num_attrs); i++)
		set_int(o, num_attrs[i].name, *(const int64_t *)((const char *)q + num_attrs[i].off));
	json_object_update(o, q->attrs);
	if (q->fifo) {
		json_object_set_new(o, "FifoQueue", json_string("true"));
		json_object_set_new(o, "ContentBasedDeduplication",
				    json_string(q->content_dedup ? "true" : "false"));
	}
	if ((r = counts(db, q, n)) != SD_OK)
		return r;
	set_int(o, "ApproximateNumberOfMessages", n[0]);
	set_int(o, "ApproximateNumberOfMessagesNotVisible", n[1]);
	set_int(o, "ApproximateNumberOfMessagesDelayed", n[2]);
	set_int(o, "CreatedTimestamp", q->created_at / 1000);
	set_int(o, "LastModifiedTimestamp", q->modified_at / 1000);
	snprintf(arn, sizeof arn, "arn:aws:sqs:%s:000000000000:%s", region, q->name);
	json_object_set_new(o, "QueueArn", json_string(arn));
	return SD_OK;
}

static int known_attr(const char *name)
{
	return num_attr(name) || in_list(opaque_attrs, N(opaque_attrs), name) ||
	       in_list(read_attrs, N(read_attrs), name) || strcmp(name, "RedrivePolicy") == 0 ||
	       strcmp(name, "FifoQueue") == 0 || strcmp(name, "ContentBasedDeduplication") == 0;
}

enum sd_result sqs_queue_attributes(struct db *db, const struct sqs_queue *q, json_t *names,
				    const char *region, json_t **out)
{
	json_t *all = json_object(), *pick = json_object(), *v;
	enum sd_result r = SD_OK;
	size_t i;

	*out = NULL;
	if (!all || !pick) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	json_array_foreach(names, i, v)
		if (!json_is_string(v) || (strcmp(json_string_value(v), "All") != 0 &&
					   !known_attr(json_string_value(v)))) {
			r = sqs_fail(SD_INVALID, "InvalidAttributeName", "Unknown Attribute %.100s.",
				     json_is_string(v) ? json_string_value(v) : "(not a string)");
			goto out;
		}
	if (json_array_size(names) && (r = all_attrs(db, q, region, all)) != SD_OK)
		goto out;
	json_array_foreach(names, i, v) {
		const char *k = json_string_value(v);
		if (strcmp(k, "All") == 0)
			json_object_update(pick, all);
		else if (json_object_get(all, k))
			json_object_set(pick, k, json_object_get(all, k));
	}
	*out = pick;
	pick = NULL;
out:
	json_decref(all);
	json_decref(pick);
	return r;
}
