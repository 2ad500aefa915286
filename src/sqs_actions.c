/*
 * sqs_actions.c: the fourteen SQS actions (sqs_actions.h).
 *
 * Each action reads its parameters as the JSON protocol names them, checks
 * them as SQS does (the names and limits of its API reference), checks the
 * caller's token may use the queue it names, and calls the store.  A queue
 * is named by its URL, whose last segment is the name: any host and
 * account in front are taken, so a URL a client built for another host
 * name of the same box still works.
 */
#define _GNU_SOURCE
#include "sqs_actions.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "sqs_store.h"

#define URL_MAX 512
#define LIST_MAX 1000			/* ListQueues' most */
#define BATCH_BYTES_MAX (256 * 1024)	/* a SendMessageBatch's bodies and attributes */
#define ENTRY_ID_MAX 80

/* ======================== parameters ===================================== */

static enum sd_result need_str(json_t *params, const char *name, const char **out)
{
	json_t *v = json_object_get(params, name);

	*out = json_string_value(v);
	if (!v)
		return sqs_fail(SD_INVALID, "MissingParameter",
				"The request must contain the parameter %s.", name);
	if (!*out)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value for parameter %s must be a string.", name);
	return SD_OK;
}

/* opt_int: an integer parameter in [lo, hi], def when absent */
static enum sd_result opt_int(json_t *params, const char *name, int64_t lo, int64_t hi,
			      int64_t def, int64_t *out)
{
	json_t *v = json_object_get(params, name);

	*out = def;
	if (!v || json_is_null(v))
		return SD_OK;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value for parameter %s is invalid. Reason: Must be between %lld "
				"and %lld, if provided.", name, (long long)lo, (long long)hi);
	*out = json_integer_value(v);
	return SD_OK;
}

static enum sd_result opt_str(json_t *params, const char *name, const char **out)
{
	json_t *v = json_object_get(params, name);

	*out = json_string_value(v);
	if (v && !json_is_null(v) && !*out)
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"Value for parameter %s must be a string.", name);
	return SD_OK;
}

/* ======================== queues by URL ================================== */

static void url_of(const struct sqs_call *c, const char *name, char buf[URL_MAX])
{
	snprintf(buf, URL_MAX, "%s/000000000000/%s", c->origin, name);
}

static enum sd_result allowed(const struct sqs_call *c, const char *name)
{
	if (token_queue_allowed(c->grant, name))
		return SD_OK;
	return sqs_fail(SD_DENIED, "AccessDenied",
			"Access to the resource %.80s is denied: token '%s' may not use this "
			"queue.", name, c->grant->name);
}

/* queue_of: the queue params' QueueUrl names, if the caller may use it */
static enum sd_result queue_of(const struct sqs_call *c, json_t *params, struct sqs_queue *q)
{
	const char *url, *name;
	enum sd_result r;

	memset(q, 0, sizeof *q);
	if ((r = need_str(params, "QueueUrl", &url)) != SD_OK)
		return r;
	name = strrchr(url, '/') ? strrchr(url, '/') + 1 : url;
	if (queue_sqs_name_valid(name) != SD_OK)
		return sqs_fail(SD_NOT_FOUND, "QueueDoesNotExist",
				"The specified queue does not exist.");
	if ((r = allowed(c, name)) != SD_OK)
		return r;
	return sqs_queue_find(c->db, name, q);
}

static enum sd_result url_result(const struct sqs_call *c, const char *name, json_t **result)
{
	char url[URL_MAX];

	url_of(c, name, url);
	*result = json_pack("{s:s}", "QueueUrl", url);
	return *result ? SD_OK : err_set(SD_NOMEM, "out of memory");
}

static enum sd_result create_queue(struct sqs_call *c, json_t *params, json_t **result)
{
	const char *name;
	struct sqs_queue q;
	enum sd_result r;

	if ((r = need_str(params, "QueueName", &name)) != SD_OK ||
	    (r = allowed(c, name)) != SD_OK ||
	    (r = sqs_queue_create(c->db_full, name, json_object_get(params, "Attributes"), &q)) !=
		    SD_OK)
		return r;
	sqs_queue_clear(&q);
	return url_result(c, name, result);
}

static enum sd_result get_queue_url(struct sqs_call *c, json_t *params, json_t **result)
{
	const char *name;
	struct sqs_queue q;
	enum sd_result r;

	if ((r = need_str(params, "QueueName", &name)) != SD_OK || (r = allowed(c, name)) != SD_OK ||
	    (r = sqs_queue_find(c->db, name, &q)) != SD_OK)
		return r;
	sqs_queue_clear(&q);
	return url_result(c, name, result);
}

struct listing {
	const struct sqs_call *c;
	json_t *urls;
	int64_t max;
	char last[QUEUE_SQS_NAME_MAX + 1];
	int more;
};

static int list_one(const char *name, void *arg)
{
	struct listing *l = arg;
	char url[URL_MAX];

	if (!token_queue_allowed(l->c->grant, name))
		return 1;
	if ((int64_t)json_array_size(l->urls) == l->max) {
		l->more = 1;
		return 0;
	}
	url_of(l->c, name, url);
	json_array_append_new(l->urls, json_string(url));
	snprintf(l->last, sizeof l->last, "%s", name);
	return 1;
}

static enum sd_result list_queues(struct sqs_call *c, json_t *params, json_t **result)
{
	const char *prefix, *next;
	struct listing l = { .c = c };
	enum sd_result r;
	int paged = json_object_get(params, "MaxResults") != NULL;

	if ((r = opt_str(params, "QueueNamePrefix", &prefix)) != SD_OK ||
	    (r = opt_str(params, "NextToken", &next)) != SD_OK ||
	    (r = opt_int(params, "MaxResults", 1, LIST_MAX, LIST_MAX, &l.max)) != SD_OK)
		return r;
	if (next && (strlen(next) > QUEUE_SQS_NAME_MAX || queue_sqs_name_valid(next) != SD_OK))
		return sqs_fail(SD_INVALID, "InvalidParameterValue", "Invalid NextToken value.");
	if (!(l.urls = json_array()))
		return err_set(SD_NOMEM, "out of memory");
	if ((r = sqs_queue_names(c->db, prefix, next, list_one, &l)) != SD_OK) {
		json_decref(l.urls);
		return r;
	}
	*result = json_object();
	if (json_array_size(l.urls))
		json_object_set(*result, "QueueUrls", l.urls);
	if (paged && l.more)
		json_object_set_new(*result, "NextToken", json_string(l.last));
	json_decref(l.urls);
	return SD_OK;
}

static enum sd_result delete_queue(struct sqs_call *c, json_t *params, json_t **result)
{
	struct sqs_queue q;
	enum sd_result r;

	if ((r = queue_of(c, params, &q)) == SD_OK)
		r = sqs_queue_delete(c->db_full, &q);
	sqs_queue_clear(&q);
	*result = r == SD_OK ? json_object() : NULL;
	return r;
}

static enum sd_result purge_queue(struct sqs_call *c, json_t *params, json_t **result)
{
	struct sqs_queue q;
	enum sd_result r;

	if ((r = queue_of(c, params, &q)) == SD_OK)
		r = sqs_queue_purge(c->db_full, &q);
	sqs_queue_clear(&q);
	*result = r == SD_OK ? json_object() : NULL;
	return r;
}

static enum sd_result get_attributes(struct sqs_call *c, json_t *params, json_t **result)
{
	json_t *names = json_object_get(params, "AttributeNames"), *attrs = NULL;
	struct sqs_queue q;
	enum sd_result r;

	if (names && !json_is_array(names))
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"AttributeNames must be a list of names.");
	if ((r = queue_of(c, params, &q)) == SD_OK)
		r = sqs_queue_attributes(c->db, &q, names, c->region, &attrs);
	sqs_queue_clear(&q);
	if (r != SD_OK)
		return r;
	*result = json_object();
	if (json_object_size(attrs))
		json_object_set(*result, "Attributes", attrs);
	json_decref(attrs);
	return SD_OK;
}

static enum sd_result set_attributes(struct sqs_call *c, json_t *params, json_t **result)
{
	json_t *attrs = json_object_get(params, "Attributes");
	struct sqs_queue q;
	enum sd_result r;

	if (!attrs)
		return sqs_fail(SD_INVALID, "MissingParameter",
				"The request must contain the parameter Attributes.");
	if ((r = queue_of(c, params, &q)) == SD_OK)
		r = sqs_queue_set(c->db_full, &q, attrs);
	sqs_queue_clear(&q);
	*result = r == SD_OK ? json_object() : NULL;
	return r;
}

/* ======================== sending ======================================== */

/* send_read: one message's parameters (SendMessage's, or a batch entry's) */
static enum sd_result send_read(const struct sqs_call *c, json_t *p, struct sqs_send *m)
{
	const char *body;
	json_t *attrs = json_object_get(p, "MessageAttributes");
	enum sd_result r;

	memset(m, 0, sizeof *m);
	if ((r = need_str(p, "MessageBody", &body)) != SD_OK ||
	    (r = opt_int(p, "DelaySeconds", 0, 900, -1, &m->delay_s)) != SD_OK ||
	    (r = opt_str(p, "MessageGroupId", &m->group)) != SD_OK ||
	    (r = opt_str(p, "MessageDeduplicationId", &m->dedup)) != SD_OK)
		return r;
	if (attrs && !json_is_object(attrs))
		return sqs_fail(SD_INVALID, "InvalidParameterValue",
				"MessageAttributes must be a map.");
	m->body = body;
	m->body_len = json_string_length(json_object_get(p, "MessageBody"));
	m->attrs = attrs;
	m->sender = c->key_id;
	return SD_OK;
}

/* sent_json: a send's answer; id: a batch entry's Id, or NULL */
static json_t *sent_json(const struct sqs_sent *s, const char *id)
{
	json_t *o = json_pack("{s:s, s:s}", "MessageId", s->message_id, "MD5OfMessageBody",
			      s->md5_body);

	if (!o)
		return NULL;
	if (id)
		json_object_set_new(o, "Id", json_string(id));
	if (s->md5_attrs[0])
		json_object_set_new(o, "MD5OfMessageAttributes", json_string(s->md5_attrs));
	if (s->sequence[0])
		json_object_set_new(o, "SequenceNumber", json_string(s->sequence));
	return o;
}

/* One send as the group commits it (db_group.h): its messages in the
 * group's transaction, on the group's connection, with the others' sends
 * of the moment, all flushed once. */
struct send_tx {
	const struct sqs_queue *q;
	const struct sqs_send *m;
	int n;
	struct sqs_sent *sent;
};

static enum sd_result send_tx(struct db *db, void *arg)
{
	struct send_tx *t = arg;

	return sqs_send_many(db, t->q, t->m, t->n, t->sent);
}

/* send_durable: n checked messages of q stored, durable before the answer */
static enum sd_result send_durable(struct sqs_call *c, const struct sqs_queue *q,
				   const struct sqs_send *m, int n, struct sqs_sent *sent)
{
	struct send_tx t = { q, m, n, sent };

	return db_group_run(c->group, c->db_full, send_tx, &t);
}

static enum sd_result send_message(struct sqs_call *c, json_t *params, json_t **result)
{
	struct sqs_queue q;
	struct sqs_send m;
	struct sqs_sent s;
	enum sd_result r;

	if ((r = queue_of(c, params, &q)) == SD_OK && (r = send_read(c, params, &m)) == SD_OK &&
	    (r = sqs_send_check(&q, &m)) == SD_OK)
		r = send_durable(c, &q, &m, 1, &s);
	sqs_queue_clear(&q);
	if (r != SD_OK)
		return r;
	*result = sent_json(&s, NULL);
	return *result ? SD_OK : err_set(SD_NOMEM, "out of memory");
}

/* ======================== batches ======================================== */

static int entry_id_valid(const char *id)
{
	size_t i, n = id ? strlen(id) : 0;

	if (n < 1 || n > ENTRY_ID_MAX)
		return 0;
	for (i = 0; i < n; i++)
		if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
		      (id[i] >= '0' && id[i] <= '9') || id[i] == '-' || id[i] == '_'))
			return 0;
	return 1;
}

/* entries: a batch's Entries, checked as a whole: [out] *n */
static enum sd_result entries(json_t *params, json_t **out, size_t *n)
{
	json_t *e = json_object_get(params, "Entries");
	size_t i, k;

	*out = e;
	*n = json_array_size(e);
	if (!json_is_array(e) || *n == 0)
		return sqs_fail(SD_INVALID, "EmptyBatchRequest",
				"There should be at least one SendMessageBatchRequestEntry in the "
				"request.");
	if (*n > SQS_BATCH_MAX)
		return sqs_fail(SD_INVALID, "TooManyEntriesInBatchRequest",
				"Maximum number of entries per request are 10. You have sent %zu.",
				*n);
	for (i = 0; i < *n; i++) {
		const char *id = json_string_value(json_object_get(json_array_get(e, i), "Id"));
		if (!entry_id_valid(id))
			return sqs_fail(SD_INVALID, "InvalidBatchEntryId",
					"A batch entry id can only contain alphanumeric characters, "
					"hyphens and underscores. It can be at most 80 letters long.");
		for (k = 0; k < i; k++)
			if (strcmp(id, json_string_value(json_object_get(json_array_get(e, k),
									  "Id"))) == 0)
				return sqs_fail(SD_INVALID, "BatchEntryIdsNotDistinct",
						"Id %s repeated.", id);
	}
	return SD_OK;
}

/* batch_failed_as: entry id refused with the SQS error code and msg */
static void batch_failed_as(json_t *failed, const char *id, const char *code, const char *msg)
{
	json_array_append_new(failed, json_pack("{s:s, s:b, s:s, s:s}", "Id", id, "SenderFault",
						strcmp(code, "InternalFailure") != 0, "Code", code,
						"Message", msg));
}

/* batch_failed: entry id refused as the last sqs_fail said */
static void batch_failed(json_t *failed, const char *id)
{
	batch_failed_as(failed, id, sqs_fault() ? sqs_fault() : "InternalFailure", err_msg());
	sqs_fault_clear();
}

static json_t *batch_result(json_t *ok, json_t *failed)
{
	json_t *o = json_object();

	if (o) {
		json_object_set(o, "Successful", ok);
		json_object_set(o, "Failed", failed);
	}
	json_decref(ok);
	json_decref(failed);
	return o;
}

/* batch_end: the batch's answer made of ok and failed (both taken), or the
 * failure r */
static enum sd_result batch_end(enum sd_result r, json_t *ok, json_t *failed, json_t **result)
{
	if (r != SD_OK) {
		json_decref(ok);
		json_decref(failed);
		return r;
	}
	*result = batch_result(ok, failed);
	return *result ? SD_OK : err_set(SD_NOMEM, "out of memory");
}

static enum sd_result send_batch(struct sqs_call *c, json_t *params, json_t **result)
{
	json_t *e, *ok = json_array(), *failed = json_array();
	struct sqs_send m[SQS_BATCH_MAX];
	struct sqs_sent s[SQS_BATCH_MAX];
	const char *ids[SQS_BATCH_MAX];
	size_t n, i, bytes = 0;
	struct sqs_queue q;
	enum sd_result r = SD_OK;
	int k = 0;

	if (!ok || !failed || (r = entries(params, &e, &n)) != SD_OK ||
	    (r = queue_of(c, params, &q)) != SD_OK)
		goto fail;
	for (i = 0; i < n; i++) {
		json_t *en = json_array_get(e, i);
		const char *id = json_string_value(json_object_get(en, "Id"));
		if (send_read(c, en, &m[k]) != SD_OK || sqs_send_check(&q, &m[k]) != SD_OK) {
			batch_failed(failed, id);
			continue;
		}
		bytes += m[k].body_len;
		ids[k++] = id;
	}
	if (bytes > BATCH_BYTES_MAX) {
		r = sqs_fail(SD_INVALID, "BatchRequestTooLong",
			     "Batch requests cannot be longer than 262144 bytes. You have sent "
			     "%zu bytes.", bytes);
	} else if (k && (r = send_durable(c, &q, m, k, s)) == SD_OK) {
		for (i = 0; i < (size_t)k; i++)
			json_array_append_new(ok, sent_json(&s[i], ids[i]));
	}
	sqs_queue_clear(&q);
	if (r != SD_OK)
		goto fail;
	*result = batch_result(ok, failed);
	return *result ? SD_OK : err_set(SD_NOMEM, "out of memory");
fail:
	json_decref(ok);
	json_decref(failed);
	return r != SD_OK ? r : err_set(SD_NOMEM, "out of memory");
}

/* one: a delete or a visibility change of one entry (vis < 0: a delete) */
static enum sd_result one(struct sqs_call *c, const struct sqs_queue *q, json_t *p, int vis)
{
	const char *handle;
	int64_t secs;
	enum sd_result r;

	if ((r = need_str(p, "ReceiptHandle", &handle)) != SD_OK)
		return r;
	if (vis < 0)
		return sqs_delete(c->db, q, handle);
	if (!json_object_get(p, "VisibilityTimeout"))
		return sqs_fail(SD_INVALID, "MissingParameter",
				"The request must contain the parameter VisibilityTimeout.");
	if ((r = opt_int(p, "VisibilityTimeout", 0, SQS_VISIBILITY_MAX_S, 0, &secs)) != SD_OK)
		return r;
	return sqs_visibility(c->db, q, handle, secs);
}

static enum sd_result on_handles(struct sqs_call *c, json_t *params, json_t **result, int vis,
				 int batch)
{
	json_t *e = NULL, *ok = NULL, *failed = NULL;
	struct sqs_queue q;
	enum sd_result r;
	size_t n = 1, i;

	*result = NULL;
	if (batch && (r = entries(params, &e, &n)) != SD_OK)
		return r;
	if ((r = queue_of(c, params, &q)) != SD_OK) {
		sqs_queue_clear(&q);
		return r;
	}
	if (!batch) {
		r = one(c, &q, params, vis);
		sqs_queue_clear(&q);
		*result = r == SD_OK ? json_object() : NULL;
		return r;
	}
	ok = json_array();
	failed = json_array();
	r = ok && failed ? SD_OK : err_set(SD_NOMEM, "out of memory");
	for (i = 0; r == SD_OK && i < n; i++) {
		json_t *en = json_array_get(e, i);
		const char *id = json_string_value(json_object_get(en, "Id"));
		if ((r = one(c, &q, en, vis)) == SD_OK)
			json_array_append_new(ok, json_pack("{s:s}", "Id", id));
		else if (sqs_fault()) {	/* the entry's refusal, not the box's failure */
			batch_failed(failed, id);
			r = SD_OK;
		}
	}
	sqs_queue_clear(&q);
	return batch_end(r, ok, failed, result);
}

static enum sd_result delete_message(struct sqs_call *c, json_t *p, json_t **result)
{
	return on_handles(c, p, result, -1, 0);
}

/* delete_batch: DeleteMessageBatch; the entries of one receive are
 * deleted in one commit (sqs_delete_many) */
static enum sd_result delete_batch(struct sqs_call *c, json_t *params, json_t **result)
{
	json_t *e = NULL, *ok = json_array(), *failed = json_array();
	const char *handles[SQS_BATCH_MAX], *ids[SQS_BATCH_MAX];
	struct sqs_outcome out[SQS_BATCH_MAX];
	struct sqs_queue q;
	enum sd_result r;
	size_t n = 0, i;
	int k = 0;

	memset(&q, 0, sizeof q);
	if (!ok || !failed)
		r = err_set(SD_NOMEM, "out of memory");
	else if ((r = entries(params, &e, &n)) == SD_OK)
		r = queue_of(c, params, &q);
	for (i = 0; r == SD_OK && i < n; i++) {
		json_t *en = json_array_get(e, i);
		const char *id = json_string_value(json_object_get(en, "Id"));

		if (need_str(en, "ReceiptHandle", &handles[k]) != SD_OK)
			batch_failed(failed, id);
		else
			ids[k++] = id;
	}
	if (r == SD_OK)
		r = sqs_delete_many(c->db, &q, handles, k, out);
	for (i = 0; r == SD_OK && i < (size_t)k; i++)
		if (out[i].r == SD_OK)
			json_array_append_new(ok, json_pack("{s:s}", "Id", ids[i]));
		else
			batch_failed_as(failed, ids[i], out[i].code, out[i].msg);
	sqs_queue_clear(&q);
	return batch_end(r, ok, failed, result);
}

static enum sd_result change_visibility(struct sqs_call *c, json_t *p, json_t **result)
{
	return on_handles(c, p, result, 1, 0);
}

static enum sd_result change_visibility_batch(struct sqs_call *c, json_t *p, json_t **result)
{
	return on_handles(c, p, result, 1, 1);
}

/* ======================== receiving ====================================== */

/* names: AttributeNames and MessageSystemAttributeNames together */
static json_t *sys_names(json_t *params)
{
	json_t *a = json_object_get(params, "AttributeNames"),
	       *b = json_object_get(params, "MessageSystemAttributeNames"), *all = json_array();

	if (all && json_is_array(a))
		json_array_extend(all, a);
	if (all && json_is_array(b))
		json_array_extend(all, b);
	return all;
}

static enum sd_result receive_message(struct sqs_call *c, json_t *params, json_t **result)
{
	struct sqs_receive rq = { .worker = c->key_id };
	json_t *msgs = NULL;
	struct sqs_queue q;
	int64_t max, wait, until, next, now;
	enum sd_result r;

	*result = NULL;
	c->park_until = 0;
	if ((r = queue_of(c, params, &q)) != SD_OK ||
	    (r = opt_int(params, "MaxNumberOfMessages", 1, SQS_BATCH_MAX, 1, &max)) != SD_OK ||
	    (r = opt_int(params, "VisibilityTimeout", 0, SQS_VISIBILITY_MAX_S, -1,
			 &rq.visibility_s)) != SD_OK ||
	    (r = opt_int(params, "WaitTimeSeconds", 0, SQS_WAIT_MAX_S, q.wait_s, &wait)) != SD_OK)
		goto out;
	rq.max = (int)max;
	rq.attr_names = sys_names(params);
	rq.msg_attr_names = json_object_get(params, "MessageAttributeNames");
	r = sqs_receive(c->db, &q, &rq, &msgs);
	now = clock_now_ms();
	until = c->started_at + wait * 1000;
	if (r == SD_OK && !json_array_size(msgs) && now < until) {
		/* nothing yet: park until a commit wakes the listener, the next
		 * delayed or leased message comes due, or the wait is over */
		if ((r = sqs_next_visible(c->db, &q, &next)) == SD_OK)
			c->park_until = next > now && next < until ? next : until;
	} else if (r == SD_OK && (*result = json_object())) {
		if (json_array_size(msgs))
			json_object_set(*result, "Messages", msgs);
	} else if (r == SD_OK) {
		r = err_set(SD_NOMEM, "out of memory");
	}
	json_decref(rq.attr_names);
	json_decref(msgs);
out:
	sqs_queue_clear(&q);
	return r;
}

/* ======================== dispatch ======================================= */

static const struct action {
	const char *name;
	enum sd_result (*fn)(struct sqs_call *c, json_t *params, json_t **result);
} actions[] = {
	{ "ChangeMessageVisibility", change_visibility },
	{ "ChangeMessageVisibilityBatch", change_visibility_batch },
	{ "CreateQueue", create_queue },
	{ "DeleteMessage", delete_message },
	{ "DeleteMessageBatch", delete_batch },
	{ "DeleteQueue", delete_queue },
	{ "GetQueueAttributes", get_attributes },
	{ "GetQueueUrl", get_queue_url },
	{ "ListQueues", list_queues },
	{ "PurgeQueue", purge_queue },
	{ "ReceiveMessage", receive_message },
	{ "SendMessage", send_message },
	{ "SendMessageBatch", send_batch },
	{ "SetQueueAttributes", set_attributes },
};

enum sd_result sqs_action(struct sqs_call *c, const char *action, json_t *params,
			  json_t **result)
{
	size_t i;

	*result = NULL;
	c->park_until = 0;
	sqs_fault_clear();
	for (i = 0; i < sizeof actions / sizeof actions[0]; i++)
		if (strcmp(actions[i].name, action) == 0)
			return actions[i].fn(c, params, result);
	return sqs_fail(SD_INVALID, "InvalidAction",
			"The action %.48s is not valid for this endpoint.", action);
}
