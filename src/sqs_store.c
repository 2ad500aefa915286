/*
 * sqs_store.c: an SQS queue's messages as entries of its stream lane
 * (sqs_store.h; the queues themselves are sqs_queues.c's).
 *
 * A message's entry holds, as its payload, {"body", "attrs", "md5b",
 * "md5a", "group", "dedup", "sender"}: what a receive answers with, its
 * digests computed once at the send.
 *
 * Invariants:
 *  - a MessageId is the entry's job_id, a UUID drawn at the send, the same
 *    on every delivery; a FIFO send whose deduplication id was used in the
 *    last five minutes enqueues nothing and answers the first MessageId;
 *  - a receipt handle "sd1-<lane>-<entry>-<token>" names one delivery: a
 *    delete or visibility change is fenced by its token, so one from a
 *    delivery that was taken over changes nothing (ReceiptHandleIsInvalid),
 *    and a handle of another queue is refused the same way;
 *  - a batch of sends commits whole or not at all.
 */
#define _GNU_SOURCE
#include "sqs_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "code.h"
#include "controls.h"
#include "sqs_msg.h"

/* ======================== sending ======================================== */

/* fifo_id_valid: a MessageGroupId or MessageDeduplicationId: 1-128 of
 * alphanumerics and punctuation, as SQS takes them */
static int fifo_id_valid(const char *s)
{
	size_t i, n = s ? strlen(s) : 0;

	if (n < 1 || n > 128)
		return 0;
	for (i = 0; i < n; i++)
		if (s[i] < '!' || s[i] > '~')
			return 0;
	return 1;
}

enum sd_result sqs_send_check(const struct sqs_queue *q, const struct sqs_send *m)
{
	size_t attr_bytes = 0;

	if (!m->body)
		return sqs_fail(SD_INVALID, "MissingParameter",
				"The request must contain the parameter MessageBody.");
	if (sqs_msg_valid(m->body, m->body_len, m->attrs, &attr_bytes) != SD_OK)
		return sqs_fail(SD_INVALID, m->body_len && sqs_body_valid(m->body, m->body_len) !=
				SD_OK ? "InvalidMessageContents" : "InvalidParameterValue", "%s",
				err_msg());
	if (m->body_len + attr_bytes > (size_t)q->max_size)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"One or more parameters are invalid. Reason: Message must be "
				"shorter than %lld bytes.", (long long)q->max_size);
	if (m->delay_s < -1 || m->delay_s > SQS_DELAY_MAX_S)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value %lld for parameter DelaySeconds is invalid. Reason: must be "
				"between 0 and 900, if provided.", (long long)m->delay_s);
	if (!q->fifo) {
		if (m->group || m->dedup)
			return sqs_fail(SD_INVALID, "InvalidParameterValue",
					"The request include parameter that is not valid for this "
					"queue type: MessageGroupId and MessageDeduplicationId are "
					"for FIFO queues.");
		return SD_OK;
	}
	if (m->delay_s > 0)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value %lld for parameter DelaySeconds is invalid. Reason: The "
				"request include parameter that is not valid for this queue type.",
				(long long)m->delay_s);
	if (!fifo_id_valid(m->group))
		return sqs_fail(SD_INVALID, m->group ? "InvalidParameterValue" : "MissingParameter",
				"The request must contain the parameter MessageGroupId: 1 to 128 "
				"printable characters.");
	if (m->dedup && !fifo_id_valid(m->dedup))
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"MessageDeduplicationId is 1 to 128 printable characters.");
	if (!m->dedup && !q->content_dedup)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"The queue should either have ContentBasedDeduplication enabled or "
				"MessageDeduplicationId provided explicitly");
	return SD_OK;
}

static const char SQL_DEDUP_TAKE[] =
	"INSERT INTO sqs_dedup (queue, dedup_id, message_id, expires_at) VALUES (?1, ?2, ?3, ?4) "
	"ON CONFLICT (queue, dedup_id) DO UPDATE SET message_id = excluded.message_id, "
	"expires_at = excluded.expires_at WHERE sqs_dedup.expires_at <= ?5";
static const char SQL_DEDUP_FIRST[] =
	"SELECT message_id FROM sqs_dedup WHERE queue = ?1 AND dedup_id = ?2";
static const char SQL_DEDUP_SWEEP[] = "DELETE FROM sqs_dedup WHERE queue = ?1 AND expires_at <= ?2";

/* dedup_take: the deduplication id is ours for five minutes ([out] *dup 0),
 * or a live one's MessageId into message_id ([out] *dup 1) */
static enum sd_result dedup_take(struct db *db, const struct sqs_queue *q, const char *dedup,
				 int64_t now, char message_id[SQS_MESSAGE_ID_LEN + 1], int *dup)
{
	struct db_stmt *st = db_stmt(db, SQL_DEDUP_TAKE);
	enum sd_result r;

	*dup = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, q->id);
	db_bind_text(st, 2, dedup);
	db_bind_text(st, 3, message_id);
	db_bind_int(st, 4, now + SQS_DEDUP_MS);
	db_bind_int(st, 5, now);
	if ((r = db_run(st)) != SD_OK || db_changes(db) == 1)
		return r;
	if (!(st = db_stmt(db, SQL_DEDUP_FIRST)))
		return SD_DB;
	db_bind_int(st, 1, q->id);
	db_bind_text(st, 2, dedup);
	if (db_next(st, &r)) {
		snprintf(message_id, SQS_MESSAGE_ID_LEN + 1, "%s", db_col_text(st, 0));
		*dup = 1;
	}
	db_reset(st);
	return r;
}

/* payload: the entry's payload for m; NULL when out of memory */
static char *payload(const struct sqs_send *m, const struct sqs_sent *s, const char *dedup)
{
	json_t *p = json_pack("{s:s%, s:s, s:s}", "body", m->body, m->body_len, "md5b",
			      s->md5_body, "sender", m->sender ? m->sender : "");
	char *text;

	if (!p)
		return NULL;
	if (json_object_size(m->attrs)) {
		json_object_set(p, "attrs", m->attrs);
		json_object_set_new(p, "md5a", json_string(s->md5_attrs));
	}
	if (m->group)
		json_object_set_new(p, "group", json_string(m->group));
	if (dedup)
		json_object_set_new(p, "dedup", json_string(dedup));
	text = json_dumps(p, JSON_COMPACT);
	json_decref(p);
	return text;
}

/* send_one: one checked message, in the caller's transaction */
static enum sd_result send_one(struct db *db, const struct sqs_queue *q, const struct sqs_send *m,
			       int64_t now, int i, struct sqs_sent *s)
{
	char dedup[CODE_SHA256_HEX + 1], *text;
	struct enqueue e = { 0 };
	enum sd_result r;

	memset(s, 0, sizeof *s);
	sqs_md5_hex(m->body, m->body_len, s->md5_body);
	if (json_object_size(m->attrs) && (r = sqs_attrs_md5(m->attrs, s->md5_attrs)) != SD_OK)
		return r;
	if ((r = code_uuid4(s->message_id)) != SD_OK)
		return r;
	if (q->fifo) {
		if (m->dedup)
			snprintf(dedup, sizeof dedup, "%s", m->dedup);
		else
			code_sha256_hex(m->body, m->body_len, dedup);
		snprintf(s->sequence, sizeof s->sequence, "%020lld", (long long)now * 1000 + i);
		if ((r = dedup_take(db, q, dedup, now, s->message_id, &s->duplicate)) != SD_OK ||
		    s->duplicate)
			return r;
	}
	if (!(text = payload(m, s, q->fifo ? dedup : NULL)))
		return err_set(SD_NOMEM, "out of memory");
	e.kind = q->kind;
	e.payload = text;
	e.job_id = s->message_id;
	e.delay_ms = (m->delay_s >= 0 ? m->delay_s : q->delay_s) * 1000;
	e.queue = q->id;
	e.group = m->group;
	r = queue_enqueue(db, &e, NULL);
	free(text);
	return r;
}

enum sd_result sqs_send_many(struct db *db, const struct sqs_queue *q, const struct sqs_send *m,
			     int n, struct sqs_sent *sent)
{
	int64_t now = clock_now_ms();
	struct db_stmt *st;
	enum sd_result r;
	int i;

	if ((r = db_begin(db)) != SD_OK)
		return r;
	for (i = 0; i < n && r == SD_OK; i++)
		r = send_one(db, q, &m[i], now, i, &sent[i]);
	/* the deduplication ids that ran out, now and then (one send in 64) */
	if (r == SD_OK && q->fifo && (now & 63) == 0 && (st = db_stmt(db, SQL_DEDUP_SWEEP))) {
		db_bind_int(st, 1, q->id);
		db_bind_int(st, 2, now);
		r = db_run(st);
	}
	return db_end(db, r);
}

/* ======================== receiving ====================================== */

/* handle_make: the receipt handle of delivery (lane, id, token) */
static void handle_make(char *buf, size_t size, int64_t lane, int64_t id, int64_t token)
{
	snprintf(buf, size, "sd1-%" PRId64 "-%" PRId64 "-%" PRId64, lane, id, token);
}

/* handle_parse: a handle of q's lane into (id, token); SD_STALE
 * (ReceiptHandleIsInvalid) for anything else */
static enum sd_result handle_parse(const struct sqs_queue *q, const char *h, int64_t *id,
				   int64_t *token)
{
	long long lane = 0, i = 0, t = 0;
	int used = 0;

	if (!h || strlen(h) > SQS_HANDLE_MAX ||
	    sscanf(h, "sd1-%lld-%lld-%lld%n", &lane, &i, &t, &used) != 3 || h[used] ||
	    lane != q->id || i < 1 || t < 1)
		return sqs_fail(SD_STALE, "ReceiptHandleIsInvalid",
				"The input receipt handle \"%.100s\" is not a valid receipt handle "
				"of this queue.", h ? h : "");
	*id = i;
	*token = t;
	return SD_OK;
}

static int wanted(json_t *names, const char *name)
{
	json_t *v;
	size_t i;

	json_array_foreach(names, i, v)
		if (json_is_string(v) && (strcmp(json_string_value(v), "All") == 0 ||
					  strcmp(json_string_value(v), name) == 0))
			return 1;
	return 0;
}

static void set_sys(json_t *o, json_t *names, const char *k, int64_t v)
{
	char buf[24];

	if (!wanted(names, k))
		return;
	snprintf(buf, sizeof buf, "%" PRId64, v);
	json_object_set_new(o, k, json_string(buf));
}

static void set_sys_s(json_t *o, json_t *names, const char *k, json_t *v)
{
	if (json_is_string(v) && wanted(names, k))
		json_object_set(o, k, v);
}

/* message_of: ReceiveMessage's shape of one delivered entry */
static json_t *message_of(const struct sqs_queue *q, const struct job *j,
			  const struct sqs_receive *rq)
{
	json_t *p = json_loads(j->payload, 0, NULL), *m = NULL, *sys, *attrs;
	char h[SQS_HANDLE_MAX + 1], md5[33];

	if (!p)
		return NULL;
	handle_make(h, sizeof h, q->id, j->id, j->lease_token);
	m = json_pack("{s:s, s:s, s:O, s:O}", "MessageId", j->job_id, "ReceiptHandle", h,
		      "MD5OfBody", json_object_get(p, "md5b"), "Body", json_object_get(p, "body"));
	sys = json_object();
	attrs = sqs_attrs_pick(json_object_get(p, "attrs"), rq->msg_attr_names);
	if (!m || !sys || !attrs)
		goto fail;
	set_sys(sys, rq->attr_names, "ApproximateReceiveCount", j->deliveries);
	set_sys(sys, rq->attr_names, "SentTimestamp", j->created_at);
	set_sys(sys, rq->attr_names, "ApproximateFirstReceiveTimestamp",
		j->first_leased_at ? j->first_leased_at : clock_now_ms());
	set_sys_s(sys, rq->attr_names, "SenderId", json_object_get(p, "sender"));
	set_sys_s(sys, rq->attr_names, "MessageGroupId", json_object_get(p, "group"));
	set_sys_s(sys, rq->attr_names, "MessageDeduplicationId", json_object_get(p, "dedup"));
	if (json_object_size(sys))
		json_object_set(m, "Attributes", sys);
	if (json_object_size(attrs)) {
		if (sqs_attrs_md5(attrs, md5) != SD_OK)
			goto fail;
		json_object_set(m, "MessageAttributes", attrs);
		json_object_set_new(m, "MD5OfMessageAttributes", json_string(md5));
	}
	json_decref(sys);
	json_decref(attrs);
	json_decref(p);
	return m;
fail:
	json_decref(sys);
	json_decref(attrs);
	json_decref(m);
	json_decref(p);
	return NULL;
}

enum sd_result sqs_receive(struct db *db, const struct sqs_queue *q, const struct sqs_receive *rq,
			   json_t **messages)
{
	struct job *jobs[SQS_BATCH_MAX];
	char dlq_kind[QUEUE_KIND_MAX + 1];
	struct lane_rules lr = { 0 };
	int64_t vis = rq->visibility_s >= 0 ? rq->visibility_s : q->visibility_s;
	struct sqs_queue d = { 0 };
	enum sd_result r;
	int n = 0, i;

	*messages = NULL;
	if (rq->max < 1 || rq->max > SQS_BATCH_MAX)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value %d for parameter MaxNumberOfMessages is invalid. Reason: "
				"Must be between 1 and 10, if provided.", rq->max);
	if (vis < 0 || vis > SQS_VISIBILITY_MAX_S)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value %lld for parameter VisibilityTimeout is invalid. Reason: "
				"Must be between 0 and 43200, if provided.", (long long)vis);
	lr.fifo = q->fifo;
	lr.retention_ms = q->retention_s * 1000;
	if (q->max_receives) {
		/* a dead-letter queue deleted since: no redrive, the poison rule */
		if (sqs_queue_find(db, q->dlq, &d) == SD_OK) {
			lr.max_receives = q->max_receives;
			lr.dlq = d.id;
			snprintf(dlq_kind, sizeof dlq_kind, "%s", d.kind);
			lr.dlq_kind = dlq_kind;
		}
		sqs_queue_clear(&d);
		sqs_fault_clear();
	}
	if ((r = db_begin(db)) != SD_OK)
		return r;
	/* a paused or limited queue (controls.h) hands out what it lets through */
	r = controls_claim_lane(db, q->id, &lr, rq->worker, rq->max, vis ? vis * 1000 : 1, jobs,
				&n);
	/* a visibility timeout of 0: visible again at once, given back
	 * rather than left to expire (an expiry would count as a failure) */
	for (i = 0; r == SD_OK && !vis && i < n; i++)
		r = queue_release(db, jobs[i]->id, jobs[i]->lease_token);
	r = db_end(db, r);
	if (r == SD_OK && !(*messages = json_array()))
		r = err_set(SD_NOMEM, "out of memory");
	for (i = 0; i < n; i++) {
		json_t *m = r == SD_OK ? message_of(q, jobs[i], rq) : NULL;
		if (r == SD_OK && (!m || json_array_append_new(*messages, m) != 0))
			r = err_set(SD_NOMEM, "out of memory reading a message");
		job_free(jobs[i]);
	}
	if (r != SD_OK) {
		json_decref(*messages);
		*messages = NULL;
	}
	return r;
}

/* ======================== on one delivery ================================ */

static const char SQL_THERE[] = "SELECT 1 FROM stream WHERE id = ?1 AND queue = ?2";

/* stale: why a fenced call on (id) changed nothing: the message is gone
 * (gone = 1) or was delivered again since */
static enum sd_result stale(struct db *db, const struct sqs_queue *q, int64_t id, int *gone)
{
	struct db_stmt *st = db_stmt(db, SQL_THERE);
	enum sd_result r = SD_OK;

	*gone = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, id);
	db_bind_int(st, 2, q->id);
	*gone = !db_next(st, &r);
	db_reset(st);
	if (r != SD_OK)
		return r;
	return sqs_fail(SD_STALE, "ReceiptHandleIsInvalid",
			*gone ? "The message of this receipt handle is no longer in the queue."
			      : "The receipt handle has expired: the message was received again "
				"since it was issued.");
}

enum sd_result sqs_delete(struct db *db, const struct sqs_queue *q, const char *handle)
{
	int64_t id, token;
	enum sd_result r;
	int gone;

	if ((r = handle_parse(q, handle, &id, &token)) != SD_OK)
		return r;
	r = queue_ack(db, id, token);
	if (r != SD_STALE)
		return r;
	r = stale(db, q, id, &gone);
	if (gone) {		/* deleted already: as SQS answers a second delete */
		sqs_fault_clear();
		return SD_OK;
	}
	return r;
}

/* outcome_of: the refusal r that sqs_fail just made, as an entry's outcome */
static void outcome_of(struct sqs_outcome *o, enum sd_result r)
{
	o->r = r;
	snprintf(o->code, sizeof o->code, "%s", r == SD_OK ? "" : sqs_fault() ? sqs_fault()
						 : "InternalFailure");
	snprintf(o->msg, sizeof o->msg, "%s", r == SD_OK ? "" : err_msg());
	sqs_fault_clear();
}

/*
 * ack_claim: the entries whose token is the first entry's with one (those
 * of one receive), acked in one commit (queue_ack_many: one finishing
 * time, so two batches on PostgreSQL never wait for each other in a
 * circle); each entry's outcome then, and its token set to 0 (done).  A
 * handle given twice is acked once and answered alike.
 */
static enum sd_result ack_claim(struct db *db, const struct sqs_queue *q, const int64_t *id,
				int64_t *token, int n, struct sqs_outcome *out)
{
	int64_t t = 0, ids[SQS_BATCH_MAX] = { 0 };
	unsigned char acked[SQS_BATCH_MAX];
	struct sqs_outcome res[SQS_BATCH_MAX];
	int at[SQS_BATCH_MAX], k = 0, i, j, gone;
	enum sd_result r;

	for (i = 0; i < n; i++) {
		if (!t && token[i] > 0)
			t = token[i];
		if (!t || token[i] != t)
			continue;
		for (j = 0; j < k && ids[j] != id[i]; j++)
			;
		if (j == k)
			ids[k++] = id[i];
		at[i] = j;
	}
	if ((r = queue_ack_many(db, t, ids, k, acked)) != SD_OK)
		return r;
	for (j = 0; j < k; j++) {
		gone = 0;
		r = acked[j] ? SD_OK : stale(db, q, ids[j], &gone);
		if (r != SD_OK && r != SD_STALE)
			return r;	/* the box's failure, not the entry's */
		outcome_of(&res[j], gone ? SD_OK : r);	/* gone: deleted already, as SQS says */
	}
	for (i = 0; i < n; i++)
		if (token[i] == t) {
			out[i] = res[at[i]];
			token[i] = 0;
		}
	return SD_OK;
}

enum sd_result sqs_delete_many(struct db *db, const struct sqs_queue *q,
			       const char *const *handles, int n, struct sqs_outcome *out)
{
	int64_t id[SQS_BATCH_MAX], token[SQS_BATCH_MAX];
	enum sd_result r = SD_OK;
	int i;

	if (n < 0 || n > SQS_BATCH_MAX)
		return err_set(SD_INVALID, "%d entries in one batch", n);
	for (i = 0; i < n; i++) {
		token[i] = 0;
		outcome_of(&out[i], handle_parse(q, handles[i], &id[i], &token[i]));
		if (out[i].r != SD_OK)
			token[i] = 0;
	}
	for (i = 0; i < n && r == SD_OK; i++)
		if (token[i] > 0)
			r = ack_claim(db, q, id, token, n, out);
	return r;
}

enum sd_result sqs_visibility(struct db *db, const struct sqs_queue *q, const char *handle,
			      int64_t seconds)
{
	int64_t id, token;
	enum sd_result r;
	int gone;

	if (seconds < 0 || seconds > SQS_VISIBILITY_MAX_S)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value %lld for parameter VisibilityTimeout is invalid. Reason: "
				"Must be between 0 and 43200.", (long long)seconds);
	if ((r = handle_parse(q, handle, &id, &token)) != SD_OK)
		return r;
	r = seconds ? queue_extend(db, id, token, seconds * 1000, NULL) : queue_release(db, id, token);
	if (r == SD_STALE)
		r = stale(db, q, id, &gone);
	return r;
}

static const char SQL_NEXT[] = "SELECT min(visible_at) FROM stream WHERE queue = ?1";

enum sd_result sqs_next_visible(struct db *db, const struct sqs_queue *q, int64_t *at)
{
	struct db_stmt *st = db_stmt(db, SQL_NEXT);
	enum sd_result r = SD_OK;

	*at = -1;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, q->id);
	if (db_next(st, &r) && !db_col_is_null(st, 0))
		*at = db_col_int(st, 0);
	db_reset(st);
	return r;
}
