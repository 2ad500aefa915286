/*
 * sqs_wire.c: the SQS listener's two protocols, query and JSON 1.0
 * (sqs_wire.h), driven by one table of the model's shapes.
 *
 * The table (struct sw_field) is botocore's SQS model, 2012-11-05, as its
 * query protocol (botocore 1.29) has it, cut to what the wire needs: each
 * member's JSON name, its query and XML name (the member's locationName;
 * for a flattened list, its element's), and its kind.  Every list and map
 * of SQS is flattened, so a list is Name.N and a map Name.N.Key and
 * Name.N.Value; the map's key is called Name but for tags (Key).  The
 * three actions SQS added after botocore moved it to JSON (the message
 * move tasks) and ReceiveMessage's MessageSystemAttributeNames follow the
 * same rules.
 *
 * Invariants:
 *  - the query side and the XML side read the same table, so what a
 *    query client sends and what it reads back use the same names;
 *  - a query request is read in two steps: each pair put where its name
 *    says (lists and maps kept by index while they fill), then every list
 *    and map checked whole (indexes 1..n, every map entry with its name and
 *    value, no name twice) and made into its JSON form;
 *  - every piece of text that goes into XML is checked for characters XML
 *    cannot carry and escaped (& < > " and CR), so a body comes back to a
 *    client byte for byte.
 */
#define _GNU_SOURCE
#include "sqs_wire.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "text.h"

/* ---- a growing string ------------------------------------------------------- */

/* open_memstream's; f NULL: a dry run, where only the checks are made (a
 * JSON result is checked as its XML would be) */
struct sw_buf {
	FILE *f;
	char *p;
	size_t len;
};

static void sb_putn(struct sw_buf *b, const char *s, size_t n)
{
	if (b->f && n)
		fwrite(s, 1, n, b->f);
}

static void sb_puts(struct sw_buf *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

static void sb_tag(struct sw_buf *b, const char *close, const char *name)
{
	sb_puts(b, close);
	sb_puts(b, name);
	sb_putn(b, ">", 1);
}

static enum sd_result sb_open(struct sw_buf *b)
{
	*b = (struct sw_buf){ .f = open_memstream(&b->p, &b->len) };
	return b->f ? SD_OK : err_set(SD_NOMEM, "out of memory writing an SQS answer");
}

/* the text written so far into b->p and b->len; SD_NOMEM when a write failed */
static enum sd_result sb_close(struct sw_buf *b)
{
	int bad = ferror(b->f);

	if (fclose(b->f) != 0 || bad || !b->p) {
		free(b->p);
		b->p = NULL;
		return err_set(SD_NOMEM, "out of memory writing an SQS answer");
	}
	return SD_OK;
}

/* ---- the model -------------------------------------------------------------- */

enum sw_kind { SW_STR, SW_INT, SW_BOOL, SW_LIST, SW_MAP, SW_STRUCT };

struct sw_field {
	const char *name;		/* the JSON 1.0 member */
	const char *wire;		/* its query and XML name */
	enum sw_kind kind;
	enum sw_kind elem;		/* a list's element or a map's value */
	const char *key;		/* a map's key: "Name" or "Key" */
	const struct sw_field *sub;	/* the members of a SW_STRUCT element or value */
};

#define F_S(n) { n, n, SW_STR, SW_STR, NULL, NULL }
#define F_I(n) { n, n, SW_INT, SW_STR, NULL, NULL }
#define F_B(n) { n, n, SW_BOOL, SW_STR, NULL, NULL }
#define F_L(n, w) { n, w, SW_LIST, SW_STR, NULL, NULL }
#define F_LS(n, w, s) { n, w, SW_LIST, SW_STRUCT, NULL, s }
#define F_M(n, w, k) { n, w, SW_MAP, SW_STR, k, NULL }
#define F_MS(n, w, s) { n, w, SW_MAP, SW_STRUCT, "Name", s }
#define F_END { NULL, NULL, SW_STR, SW_STR, NULL, NULL }

static const struct sw_field f_attr_value[] = {	/* MessageAttributeValue */
	F_S("StringValue"), F_S("BinaryValue"), F_L("StringListValues", "StringListValue"),
	F_L("BinaryListValues", "BinaryListValue"), F_S("DataType"), F_END,
};

#define F_MSG_ATTRS F_MS("MessageAttributes", "MessageAttribute", f_attr_value)
#define F_SYS_ATTRS F_MS("MessageSystemAttributes", "MessageSystemAttribute", f_attr_value)
#define F_QUEUE_ATTRS F_M("Attributes", "Attribute", "Name")
#define F_TAGS(n) F_M(n, "Tag", "Key")

static const struct sw_field f_url[] = { F_S("QueueUrl"), F_END };
static const struct sw_field f_id[] = { F_S("Id"), F_END };

static const struct sw_field in_add_permission[] = {
	F_S("QueueUrl"), F_S("Label"), F_L("AWSAccountIds", "AWSAccountId"),
	F_L("Actions", "ActionName"), F_END,
};
static const struct sw_field in_change_visibility[] = {
	F_S("QueueUrl"), F_S("ReceiptHandle"), F_I("VisibilityTimeout"), F_END,
};
static const struct sw_field in_change_visibility_entry[] = {
	F_S("Id"), F_S("ReceiptHandle"), F_I("VisibilityTimeout"), F_END,
};
static const struct sw_field in_change_visibility_batch[] = {
	F_S("QueueUrl"),
	F_LS("Entries", "ChangeMessageVisibilityBatchRequestEntry", in_change_visibility_entry),
	F_END,
};
static const struct sw_field in_create_queue[] = {
	F_S("QueueName"), F_QUEUE_ATTRS, F_TAGS("tags"), F_END,
};
static const struct sw_field in_delete_message[] = {
	F_S("QueueUrl"), F_S("ReceiptHandle"), F_END,
};
static const struct sw_field in_delete_entry[] = { F_S("Id"), F_S("ReceiptHandle"), F_END };
static const struct sw_field in_delete_batch[] = {
	F_S("QueueUrl"), F_LS("Entries", "DeleteMessageBatchRequestEntry", in_delete_entry), F_END,
};
static const struct sw_field in_get_attributes[] = {
	F_S("QueueUrl"), F_L("AttributeNames", "AttributeName"), F_END,
};
static const struct sw_field in_get_url[] = {
	F_S("QueueName"), F_S("QueueOwnerAWSAccountId"), F_END,
};
static const struct sw_field in_list_dead_letter[] = {
	F_S("QueueUrl"), F_S("NextToken"), F_I("MaxResults"), F_END,
};
static const struct sw_field in_list_queues[] = {
	F_S("QueueNamePrefix"), F_S("NextToken"), F_I("MaxResults"), F_END,
};
static const struct sw_field in_receive[] = {
	F_S("QueueUrl"), F_L("AttributeNames", "AttributeName"),
	F_L("MessageSystemAttributeNames", "MessageSystemAttributeName"),
	F_L("MessageAttributeNames", "MessageAttributeName"), F_I("MaxNumberOfMessages"),
	F_I("VisibilityTimeout"), F_I("WaitTimeSeconds"), F_S("ReceiveRequestAttemptId"), F_END,
};
static const struct sw_field in_remove_permission[] = { F_S("QueueUrl"), F_S("Label"), F_END };
static const struct sw_field in_send[] = {
	F_S("QueueUrl"), F_S("MessageBody"), F_I("DelaySeconds"), F_MSG_ATTRS, F_SYS_ATTRS,
	F_S("MessageDeduplicationId"), F_S("MessageGroupId"), F_END,
};
static const struct sw_field in_send_entry[] = {
	F_S("Id"), F_S("MessageBody"), F_I("DelaySeconds"), F_MSG_ATTRS, F_SYS_ATTRS,
	F_S("MessageDeduplicationId"), F_S("MessageGroupId"), F_END,
};
static const struct sw_field in_send_batch[] = {
	F_S("QueueUrl"), F_LS("Entries", "SendMessageBatchRequestEntry", in_send_entry), F_END,
};
static const struct sw_field in_set_attributes[] = { F_S("QueueUrl"), F_QUEUE_ATTRS, F_END };
static const struct sw_field in_tag[] = { F_S("QueueUrl"), F_TAGS("Tags"), F_END };
static const struct sw_field in_untag[] = { F_S("QueueUrl"), F_L("TagKeys", "TagKey"), F_END };
static const struct sw_field in_start_move[] = {
	F_S("SourceArn"), F_S("DestinationArn"), F_I("MaxNumberOfMessagesPerSecond"), F_END,
};
static const struct sw_field in_cancel_move[] = { F_S("TaskHandle"), F_END };
static const struct sw_field in_list_moves[] = { F_S("SourceArn"), F_I("MaxResults"), F_END };

static const struct sw_field out_batch_error[] = {	/* BatchResultErrorEntry */
	F_S("Id"), F_B("SenderFault"), F_S("Code"), F_S("Message"), F_END,
};
#define F_FAILED F_LS("Failed", "BatchResultErrorEntry", out_batch_error)

static const struct sw_field out_change_visibility_batch[] = {
	F_LS("Successful", "ChangeMessageVisibilityBatchResultEntry", f_id), F_FAILED, F_END,
};
static const struct sw_field out_delete_batch[] = {
	F_LS("Successful", "DeleteMessageBatchResultEntry", f_id), F_FAILED, F_END,
};
static const struct sw_field out_attributes[] = { F_QUEUE_ATTRS, F_END };
static const struct sw_field out_dead_letter[] = {
	F_L("queueUrls", "QueueUrl"), F_S("NextToken"), F_END,
};
static const struct sw_field out_tags[] = { F_TAGS("Tags"), F_END };
static const struct sw_field out_queues[] = {
	F_L("QueueUrls", "QueueUrl"), F_S("NextToken"), F_END,
};
static const struct sw_field out_message[] = {
	F_S("MessageId"), F_S("ReceiptHandle"), F_S("MD5OfBody"), F_S("Body"),
	F_QUEUE_ATTRS, F_S("MD5OfMessageAttributes"), F_MSG_ATTRS, F_END,
};
static const struct sw_field out_receive[] = { F_LS("Messages", "Message", out_message), F_END };
static const struct sw_field out_send[] = {
	F_S("MD5OfMessageBody"), F_S("MD5OfMessageAttributes"), F_S("MD5OfMessageSystemAttributes"),
	F_S("MessageId"), F_S("SequenceNumber"), F_END,
};
static const struct sw_field out_send_entry[] = {
	F_S("Id"), F_S("MessageId"), F_S("MD5OfMessageBody"), F_S("MD5OfMessageAttributes"),
	F_S("MD5OfMessageSystemAttributes"), F_S("SequenceNumber"), F_END,
};
static const struct sw_field out_send_batch[] = {
	F_LS("Successful", "SendMessageBatchResultEntry", out_send_entry), F_FAILED, F_END,
};
static const struct sw_field out_start_move[] = { F_S("TaskHandle"), F_END };
static const struct sw_field out_cancel_move[] = {
	F_I("ApproximateNumberOfMessagesMoved"), F_END,
};
static const struct sw_field out_move_entry[] = {
	F_S("TaskHandle"), F_S("Status"), F_S("SourceArn"), F_S("DestinationArn"),
	F_I("MaxNumberOfMessagesPerSecond"), F_I("ApproximateNumberOfMessagesMoved"),
	F_I("ApproximateNumberOfMessagesToMove"), F_S("FailureReason"), F_I("StartedTimestamp"),
	F_END,
};
static const struct sw_field out_list_moves[] = {
	F_LS("Results", "ListMessageMoveTasksResultEntry", out_move_entry), F_END,
};

struct sw_op {
	const char *name;
	const struct sw_field *in;
	const struct sw_field *out;	/* NULL: the action answers nothing */
};

static const struct sw_op sw_ops[] = {
	{ "AddPermission", in_add_permission, NULL },
	{ "CancelMessageMoveTask", in_cancel_move, out_cancel_move },
	{ "ChangeMessageVisibility", in_change_visibility, NULL },
	{ "ChangeMessageVisibilityBatch", in_change_visibility_batch, out_change_visibility_batch },
	{ "CreateQueue", in_create_queue, f_url },
	{ "DeleteMessage", in_delete_message, NULL },
	{ "DeleteMessageBatch", in_delete_batch, out_delete_batch },
	{ "DeleteQueue", f_url, NULL },
	{ "GetQueueAttributes", in_get_attributes, out_attributes },
	{ "GetQueueUrl", in_get_url, f_url },
	{ "ListDeadLetterSourceQueues", in_list_dead_letter, out_dead_letter },
	{ "ListMessageMoveTasks", in_list_moves, out_list_moves },
	{ "ListQueueTags", f_url, out_tags },
	{ "ListQueues", in_list_queues, out_queues },
	{ "PurgeQueue", f_url, NULL },
	{ "ReceiveMessage", in_receive, out_receive },
	{ "RemovePermission", in_remove_permission, NULL },
	{ "SendMessage", in_send, out_send },
	{ "SendMessageBatch", in_send_batch, out_send_batch },
	{ "SetQueueAttributes", in_set_attributes, NULL },
	{ "StartMessageMoveTask", in_start_move, out_start_move },
	{ "TagQueue", in_tag, NULL },
	{ "UntagQueue", in_untag, NULL },
};

/* the entry named name of a table of n entries of size bytes, each a
 * struct whose first member is its name; NULL when none */
static const void *by_name(const void *table, size_t n, size_t size, const char *name)
{
	const char *p = table;
	size_t i;

	for (i = 0; name && i < n; i++, p += size)
		if (strcmp(*(const char *const *)(const void *)p, name) == 0)
			return p;
	return NULL;
}

static const struct sw_op *op_find(const char *action)
{
	return by_name(sw_ops, sizeof sw_ops / sizeof sw_ops[0], sizeof sw_ops[0], action);
}

int sqs_wire_known(const char *action)
{
	return op_find(action) != NULL;
}

/* ---- the errors ------------------------------------------------------------- */

struct sw_error {
	const char *code;		/* the JSON protocol's short name */
	const char *query;		/* the query protocol's code */
	int status;
	int sender;			/* 1: the sender's fault, 0: the receiver's */
};

#define E_SQS(n) { #n, "AWS.SimpleQueueService." #n, 400, 1 }
#define E_SELF(n, status) { #n, #n, status, 1 }

/* The model's errors (their codes as botocore 1.29's query model has
 * them; those it gives no code keep their name), then AWS's common ones.
 * InternalFailure first: the one an unknown code renders as. */
static const struct sw_error sw_errors[] = {
	{ "InternalFailure", "InternalFailure", 500, 0 },
	{ "ServiceUnavailable", "ServiceUnavailable", 503, 0 },
	{ "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", 400, 1 },
	{ "QueueNameExists", "QueueAlreadyExists", 400, 1 },
	{ "PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress", 403, 1 },
	E_SQS(BatchEntryIdsNotDistinct),
	E_SQS(BatchRequestTooLong),
	E_SQS(EmptyBatchRequest),
	E_SQS(InvalidBatchEntryId),
	E_SQS(MessageNotInflight),
	E_SQS(QueueDeletedRecently),
	E_SQS(TooManyEntriesInBatchRequest),
	E_SQS(UnsupportedOperation),
	E_SELF(OverLimit, 403),
	E_SELF(InvalidAttributeName, 400),
	E_SELF(InvalidAttributeValue, 400),
	E_SELF(InvalidIdFormat, 400),
	E_SELF(InvalidMessageContents, 400),
	E_SELF(ReceiptHandleIsInvalid, 400),
	E_SELF(InvalidAddress, 404),
	E_SELF(ResourceNotFoundException, 404),
	E_SELF(RequestThrottled, 400),
	E_SELF(InvalidSecurity, 403),
	E_SELF(AccessDenied, 403),
	E_SELF(InvalidClientTokenId, 403),
	E_SELF(SignatureDoesNotMatch, 403),
	E_SELF(IncompleteSignature, 403),
	E_SELF(MissingAuthenticationToken, 403),
	E_SELF(RequestExpired, 403),
	E_SELF(MissingParameter, 400),
	E_SELF(InvalidParameterValue, 400),
	E_SELF(InvalidParameterCombination, 400),
	E_SELF(InvalidAction, 400),
	E_SELF(MissingAction, 400),
	E_SELF(NoSuchVersion, 400),
	E_SELF(MalformedQueryString, 400),
	E_SELF(SerializationException, 400),
	E_SELF(ThrottlingException, 400),
	E_SELF(RequestEntityTooLarge, 413),
};

static const struct sw_error *error_find(const char *code)
{
	return by_name(sw_errors, sizeof sw_errors / sizeof sw_errors[0], sizeof sw_errors[0],
		       code);
}

int sqs_wire_error_info(const char *code, const char **query_code, int *status, int *sender)
{
	const struct sw_error *e = error_find(code), *use = e ? e : &sw_errors[0];

	if (query_code)
		*query_code = use->query;
	if (status)
		*status = use->status;
	if (sender)
		*sender = use->sender;
	return e != NULL;
}

/* ---- form encoding ------------------------------------------------------------ */

#define NAME_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"

struct sw_pair {
	const char *key, *val;
	int from;			/* 0 the body, 1 the URL's query */
};

struct sw_form {
	struct sw_pair pairs[SQS_WIRE_PARAMS_MAX];
	size_t n;
	char *text[2];			/* the body's and the query's decoded copies */
	const char *code;		/* the error code of a refusal */
	const char *action;		/* for messages: the action */
	const char *key;		/* and the pair being put */
};

static enum sd_result refuse(struct sw_form *f, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum sd_result refuse(struct sw_form *f, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	f->code = code;
	return err_set(SD_INVALID, "%s", msg);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* s[0..n) decoded in place ('+' a space, %XX a byte), NUL-terminated */
static enum sd_result form_decode(struct sw_form *f, char *s, size_t n)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		int hi = -1, lo = -1;
		char c = s[i];

		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			if (i + 2 < n) {
				hi = hexval((unsigned char)s[i + 1]);
				lo = hexval((unsigned char)s[i + 2]);
			}
			if (hi < 0 || lo < 0)
				return refuse(f, "MalformedQueryString", "a %% that is not "
					      "followed by two hex digits");
			c = (char)(hi << 4 | lo);
			i += 2;
		}
		if (c == '\0')
			return refuse(f, "MalformedQueryString", "a NUL byte in a parameter");
		s[o++] = c;
	}
	s[o] = '\0';
	return SD_OK;
}

/* the pairs of src[0..len) (a body or a URL's query) into f */
static enum sd_result form_split(struct sw_form *f, int from, const char *src, size_t len)
{
	char *p, *end;
	enum sd_result r;

	if (!len)
		return SD_OK;
	if (memchr(src, '\0', len))
		return refuse(f, "MalformedQueryString", "a NUL byte in the form");
	if (!(p = f->text[from] = malloc(len + 1)))
		return SD_NOMEM;
	memcpy(p, src, len);
	p[len] = '\0';
	for (end = p + len; p < end; p++) {
		size_t n = strcspn(p, "&"), kn = strcspn(p, "=");
		char *val;

		if (n == 0)
			continue;	/* "a=1&&b=2", a trailing '&' */
		if (kn > n)
			kn = n;
		if (kn == 0)
			return refuse(f, "MalformedQueryString", "a parameter without a name");
		if (f->n == SQS_WIRE_PARAMS_MAX)
			return refuse(f, "MalformedQueryString", "more than %d parameters",
				      SQS_WIRE_PARAMS_MAX);
		p[n] = '\0';
		val = p + (kn < n ? kn + 1 : n);
		if ((r = form_decode(f, val, (size_t)(p + n - val))) != SD_OK ||
		    (r = form_decode(f, p, kn)) != SD_OK)
			return r;
		if (strlen(p) > SQS_WIRE_KEY_MAX)
			return refuse(f, "MalformedQueryString", "a parameter name longer than %d "
				      "bytes", SQS_WIRE_KEY_MAX);
		if (p[strspn(p, NAME_CHARS)])
			return refuse(f, "MalformedQueryString", "a parameter name may hold only "
				      "A-Z a-z 0-9 . _ -");
		if (!text_utf8_valid(p) || !text_utf8_valid(val))
			return refuse(f, "InvalidParameterValue", "a parameter that is not UTF-8");
		f->pairs[f->n++] = (struct sw_pair){ p, val, from };
		p += n;
	}
	return SD_OK;
}

/* each name once per source; the URL's pair dropped (key NULL) where the
 * body has the name too */
static enum sd_result form_dedupe(struct sw_form *f)
{
	json_t *seen = json_object(), *from;
	enum sd_result r = SD_OK;
	size_t i;

	if (!seen)
		return SD_NOMEM;
	for (i = 0; i < f->n && r == SD_OK; i++) {
		struct sw_pair *p = &f->pairs[i];

		if (!(from = json_object_get(seen, p->key)))
			r = json_object_set_new(seen, p->key, json_integer(p->from)) ? SD_NOMEM : SD_OK;
		else if (json_integer_value(from) == p->from)
			r = refuse(f, "InvalidParameterValue", "%s is given twice", p->key);
		else
			p->key = NULL;
	}
	json_decref(seen);
	return r;
}

static int action_ok(const char *a)
{
	size_t n = strlen(a), i;

	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)a[i]))
			return 0;
	return n > 0 && n <= SQS_ACTION_MAX;
}

/* Action= (required) and Version= (2012-11-05 when given) */
static enum sd_result form_action(struct sw_form *f, char action[SQS_ACTION_MAX + 1])
{
	const char *a = NULL, *v = NULL;
	size_t i;

	for (i = 0; i < f->n; i++) {
		if (!f->pairs[i].key)
			continue;
		if (strcmp(f->pairs[i].key, "Action") == 0)
			a = f->pairs[i].val;
		else if (strcmp(f->pairs[i].key, "Version") == 0)
			v = f->pairs[i].val;
	}
	if (!a || !*a)
		return refuse(f, "MissingAction", "the request has no Action");
	if (!action_ok(a))
		return refuse(f, "InvalidAction", "the Action must be a name of 1 to %d letters "
			      "and digits", SQS_ACTION_MAX);
	if (v && strcmp(v, SQS_API_VERSION) != 0)
		return refuse(f, "NoSuchVersion", "SQS's API has only the Version "
			      SQS_API_VERSION);
	strcpy(action, a);
	f->action = action;
	return SD_OK;
}

/* ---- the query protocol's names into the JSON shape -------------------------- */

static int word_is(const char *s, size_t n, const char *w)
{
	return strlen(w) == n && strncmp(s, w, n) == 0;
}

/* the field named s[0..n) on the wire; a list also by its JSON name when it
 * ends the key (the empty list botocore sends as AttributeNames=) */
static const struct sw_field *field_find(const struct sw_field *fd, const char *s, size_t n,
					 int last)
{
	for (; fd->name; fd++)
		if (word_is(s, n, fd->wire) || (last && fd->kind == SW_LIST && word_is(s, n, fd->name)))
			return fd;
	return NULL;
}

/* an integer member as a JSON integer when it reads as one */
static json_t *scalar_new(enum sw_kind kind, const char *val)
{
	size_t n = strspn(val + (*val == '-'), "0123456789");

	if (kind == SW_INT && n > 0 && n <= 18 && !val[n + (*val == '-')])
		return json_integer(strtoll(val, NULL, 10));
	return json_string(val);
}

static enum sd_result unknown(struct sw_form *f)
{
	return refuse(f, "InvalidParameterValue", "%s is not a parameter of %s", f->key,
		      f->action);
}

/* v (a new reference, NULL when memory ran out) as obj's member name */
static enum sd_result set_new(struct sw_form *f, json_t *obj, const char *name, json_t *v)
{
	if (!v)
		return SD_NOMEM;
	if (json_object_get(obj, name)) {
		json_decref(v);
		return refuse(f, "InvalidParameterValue", "%s is given twice", f->key);
	}
	return json_object_set_new(obj, name, v) ? SD_NOMEM : SD_OK;
}

/* obj's member name, an object, made when missing */
static enum sd_result child(struct sw_form *f, json_t *obj, const char *name, json_t **out)
{
	*out = json_object_get(obj, name);
	if (*out)
		return json_is_object(*out) ? SD_OK : refuse(f, "InvalidParameterValue", "%s: "
							     "the list is given empty too", f->key);
	if (!(*out = json_object()))
		return SD_NOMEM;
	return json_object_set_new(obj, name, *out) ? SD_NOMEM : SD_OK;
}

/* the index that starts *rest (1..SQS_WIRE_INDEX_MAX, no leading zero) into
 * ik, *rest moved past it (NULL at the key's end) */
static enum sd_result index_read(struct sw_form *f, const char **rest, char ik[8])
{
	const char *s = *rest;
	size_t n = strcspn(s, ".");
	long v;

	if (n == 0 || n > 3 || s[0] == '0' || strspn(s, "0123456789") < n ||
	    (v = strtol(s, NULL, 10)) < 1 || v > SQS_WIRE_INDEX_MAX)
		return refuse(f, "InvalidParameterValue", "%s: an index must be 1 to %d", f->key,
			      SQS_WIRE_INDEX_MAX);
	memcpy(ik, s, n);
	ik[n] = '\0';
	*rest = s[n] ? s + n + 1 : NULL;
	return SD_OK;
}

static enum sd_result put(struct sw_form *f, json_t *obj, const struct sw_field *fields,
			  const char *key, const char *val);

/* a map entry's part: its key (Name, Key), its Value, or a member of it */
static enum sd_result put_entry(struct sw_form *f, json_t *entry, const struct sw_field *fd,
				const char *rest, const char *val)
{
	size_t n = strcspn(rest, ".");
	json_t *v;
	enum sd_result r;

	if (!rest[n] && word_is(rest, n, fd->key))
		return set_new(f, entry, "k", json_string(val));
	if (!word_is(rest, n, "Value"))
		return unknown(f);
	if (fd->elem != SW_STRUCT)
		return rest[n] ? unknown(f) : set_new(f, entry, "v", scalar_new(fd->elem, val));
	if (!rest[n])
		return unknown(f);
	if ((r = child(f, entry, "v", &v)) != SD_OK)
		return r;
	return put(f, v, fd->sub, rest + n + 1, val);
}

/* one pair put where key says, lists and maps kept as objects by index
 * ({"1": .., "2": ..}; a map's entries as {"k": name, "v": value}) */
static enum sd_result put(struct sw_form *f, json_t *obj, const struct sw_field *fields,
			  const char *key, const char *val)
{
	size_t n = strcspn(key, ".");
	const char *rest = key[n] ? key + n + 1 : NULL;
	const struct sw_field *fd = field_find(fields, key, n, !rest);
	json_t *stage, *slot;
	enum sd_result r;
	char ik[8];

	if (!fd)
		return unknown(f);
	if (fd->kind < SW_LIST)
		return rest ? unknown(f) : set_new(f, obj, fd->name, scalar_new(fd->kind, val));
	if (!rest) {
		if (fd->kind != SW_LIST || *val)
			return refuse(f, "InvalidParameterValue", "%s needs an index (%s.1)", f->key,
				      fd->wire);
		return set_new(f, obj, fd->name, json_array());
	}
	if ((r = index_read(f, &rest, ik)) != SD_OK || (r = child(f, obj, fd->name, &stage)) != SD_OK)
		return r;
	if (fd->kind == SW_LIST && fd->elem != SW_STRUCT)
		return rest ? unknown(f) : set_new(f, stage, ik, scalar_new(fd->elem, val));
	if (!rest)
		return unknown(f);
	if ((r = child(f, stage, ik, &slot)) != SD_OK)
		return r;
	return fd->kind == SW_LIST ? put(f, slot, fd->sub, rest, val) : put_entry(f, slot, fd, rest, val);
}

static enum sd_result finish(struct sw_form *f, json_t *obj, const struct sw_field *fields,
			     const char *path);

#define SW_PATH_MAX (SQS_WIRE_KEY_MAX + 32)

/* dst = at.i.tail, a place named in messages (cut short when too long) */
static void path_at(char dst[SW_PATH_MAX], const char *at, size_t i, const char *tail)
{
	if (snprintf(dst, SW_PATH_MAX, "%s.%zu.%s", at, i, tail) >= SW_PATH_MAX)
		dst[SW_PATH_MAX - 1] = '\0';
}

/* entry i of a list or map kept by index; a gap refused */
static enum sd_result staged(struct sw_form *f, json_t *stage, size_t i, const char *at,
			     json_t **out)
{
	char ik[24];

	snprintf(ik, sizeof ik, "%zu", i);
	if (!(*out = json_object_get(stage, ik)))
		return refuse(f, "InvalidParameterValue", "%s.%zu is missing: the indexes must run "
			      "from 1 without a gap", at, i);
	return SD_OK;
}

/* a map's entry i: its name into *k and its value into *v, both present and
 * the name not one done has already */
static enum sd_result map_entry(struct sw_form *f, json_t *e, const struct sw_field *fd,
				const char *at, size_t i, json_t *done, const char **k, json_t **v)
{
	*k = json_string_value(json_object_get(e, "k"));
	*v = json_object_get(e, "v");
	if (!*k || !*v)
		return refuse(f, "MissingParameter", "%s.%zu.%s is missing", at, i,
			      *k ? "Value" : fd->key);
	if (json_object_get(done, *k))
		return refuse(f, "InvalidParameterValue", "%s.%zu.%s repeats the %s of an entry "
			      "before it", at, i, fd->key, fd->key);
	return SD_OK;
}

/* a list or map kept by index (at is its place) into done, its JSON form */
static enum sd_result finish_one(struct sw_form *f, json_t *stage, const struct sw_field *fd,
				 const char *at, json_t *done)
{
	size_t i, n = json_object_size(stage);
	const char *k = NULL;
	char sub[SW_PATH_MAX];
	enum sd_result r;
	json_t *v;

	for (i = 1; i <= n; i++) {
		if ((r = staged(f, stage, i, at, &v)) != SD_OK ||
		    (fd->kind == SW_MAP && (r = map_entry(f, v, fd, at, i, done, &k, &v)) != SD_OK))
			return r;
		path_at(sub, at, i, fd->kind == SW_MAP ? "Value." : "");
		if (fd->elem == SW_STRUCT && (r = finish(f, v, fd->sub, sub)) != SD_OK)
			return r;
		if (fd->kind == SW_MAP ? json_object_set(done, k, v) : json_array_append(done, v))
			return SD_NOMEM;
	}
	return SD_OK;
}

/* obj's lists and maps made from their objects by index into their JSON
 * form, each checked whole; path is obj's place for messages ("X.1.") */
static enum sd_result finish(struct sw_form *f, json_t *obj, const struct sw_field *fields,
			     const char *path)
{
	const struct sw_field *fd;
	char at[SW_PATH_MAX];
	enum sd_result r;

	for (fd = fields; fd->name; fd++) {
		json_t *stage = json_object_get(obj, fd->name), *done;

		if (fd->kind < SW_LIST || !json_is_object(stage))
			continue;	/* absent, a scalar, or an empty list */
		if (!(done = fd->kind == SW_LIST ? json_array() : json_object()))
			return SD_NOMEM;
		if (snprintf(at, sizeof at, "%s%s", path, fd->wire) >= (int)sizeof at)
			at[sizeof at - 1] = '\0';
		if ((r = finish_one(f, stage, fd, at, done)) != SD_OK) {
			json_decref(done);
			return r;
		}
		if (json_object_set_new(obj, fd->name, done))
			return SD_NOMEM;
	}
	return SD_OK;
}

/* ---- reading a request -------------------------------------------------------- */

/* is the Content-Type's media type type (any case, parameters after ';')? */
static int media_is(const char *ct, const char *type)
{
	size_t n = strlen(type);

	ct += strspn(ct, " \t");
	return strncasecmp(ct, type, n) == 0 && strchr("; \t", ct[n]);
}

static enum sd_result query_read(struct sw_form *f, const char *content_type, const char *query,
				 const char *body, size_t len, char action[SQS_ACTION_MAX + 1],
				 json_t *params)
{
	const struct sw_op *op;
	enum sd_result r = SD_OK;
	size_t i;

	if (len && content_type && !media_is(content_type, "application/x-www-form-urlencoded"))
		return refuse(f, "InvalidParameterValue", "the Content-Type must be "
			      "application/x-www-form-urlencoded or " SQS_TYPE_JSON);
	if ((r = form_split(f, 0, body, len)) != SD_OK ||
	    (r = form_split(f, 1, query, query ? strlen(query) : 0)) != SD_OK ||
	    (r = form_dedupe(f)) != SD_OK || (r = form_action(f, action)) != SD_OK)
		return r;
	op = op_find(action);
	for (i = 0; i < f->n && r == SD_OK; i++) {
		const char *k = f->key = f->pairs[i].key;

		if (!k || strcmp(k, "Action") == 0 || strcmp(k, "Version") == 0)
			continue;
		r = op ? put(f, params, op->in, k, f->pairs[i].val) :
		    set_new(f, params, k, json_string(f->pairs[i].val));
	}
	return r == SD_OK && op ? finish(f, params, op->in, "") : r;
}

static enum sd_result json_read(struct sw_form *f, const char *target, const char *body,
				size_t len, char action[SQS_ACTION_MAX + 1], json_t **params)
{
	static const char prefix[] = "AmazonSQS.";
	json_error_t e;

	if (!target || !target[0] || strcmp(target, prefix) == 0)
		return refuse(f, "MissingAction", "a JSON request names its action in "
			      "X-Amz-Target: AmazonSQS.<Action>");
	if (strncmp(target, prefix, sizeof prefix - 1) != 0 || !action_ok(target + sizeof prefix - 1))
		return refuse(f, "InvalidAction", "X-Amz-Target must be AmazonSQS.<Action>, the "
			      "action a name of 1 to %d letters and digits", SQS_ACTION_MAX);
	strcpy(action, target + sizeof prefix - 1);
	if (!len)
		return (*params = json_object()) ? SD_OK : SD_NOMEM;
	if (!(*params = json_loadb(body, len, JSON_REJECT_DUPLICATES, &e)))
		return refuse(f, "SerializationException", "the body is not JSON (at byte %d)",
			      e.position);
	if (!json_is_object(*params))
		return refuse(f, "SerializationException", "the body must be a JSON object");
	return SD_OK;
}

enum sd_result sqs_wire_parse(const char *content_type, const char *target, const char *query,
			      const char *body, size_t len, enum sqs_proto *proto,
			      char action[SQS_ACTION_MAX + 1], json_t **params,
			      const char **code_out)
{
	struct sw_form *f = calloc(1, sizeof *f);
	enum sd_result r = SD_NOMEM;

	*params = NULL;
	*code_out = NULL;
	action[0] = '\0';
	*proto = target || (content_type && media_is(content_type, SQS_TYPE_JSON)) ? SQS_JSON :
		 SQS_QUERY;
	if (f && *proto == SQS_JSON)
		r = json_read(f, target, body, len, action, params);
	else if (f && (*params = json_object()))
		r = query_read(f, content_type, query, body, len, action, *params);
	if (r == SD_NOMEM)
		err_set(SD_NOMEM, "out of memory reading an SQS request");
	if (r != SD_OK) {
		*code_out = r == SD_INVALID && f->code ? f->code : "InternalFailure";
		json_decref(*params);
		*params = NULL;
	}
	if (f) {
		free(f->text[0]);
		free(f->text[1]);
	}
	free(f);
	return r;
}

/* ---- XML ---------------------------------------------------------------------- */

static int xml_char_ok(uint32_t cp)
{
	return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
	       (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

/* s[0..len) escaped into b.  A character XML cannot carry (or a NUL, or a
 * byte that is not UTF-8): SD_INVALID naming what, or, when replace is
 * set, U+FFFD in its place. */
static enum sd_result xml_text(struct sw_buf *b, const char *s, size_t len, const char *what,
			       int replace)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, from = 0, n;
	uint32_t cp;

	while (i < len) {
		const char *esc = NULL;

		n = p[i] ? text_utf8_next(p + i, &cp) : 0;
		if (!n || !xml_char_ok(cp)) {
			if (!replace)
				return err_set(SD_INVALID, "the %s holds a character XML cannot carry "
					       "(at byte %zu)", what, i);
			esc = "\xEF\xBF\xBD";
			n = n ? n : 1;
		} else if (cp == '&' || cp == '<' || cp == '>' || cp == '"' || cp == '\r') {
			esc = cp == '&' ? "&amp;" : cp == '<' ? "&lt;" : cp == '>' ? "&gt;" :
			      cp == '"' ? "&quot;" : "&#xD;";
		}
		if (esc) {
			sb_putn(b, s + from, i - from);
			sb_puts(b, esc);
			from = i + n;
		}
		i += n;
	}
	sb_putn(b, s + from, len - from);
	return SD_OK;
}

static const char *const kind_names[] = { "text", "an integer", "a boolean", "a list", "a map",
					  "an object" };

/* <tag>v</tag>, v of the kind the model says */
static enum sd_result put_scalar(struct sw_buf *b, const char *tag, enum sw_kind kind, json_t *v,
				 const char *what)
{
	char num[32];
	enum sd_result r;

	if ((kind == SW_STR && !json_is_string(v)) || (kind == SW_INT && !json_is_integer(v)) ||
	    (kind == SW_BOOL && !json_is_boolean(v)))
		return err_set(SD_INVALID, "the result's %s must be %s", what, kind_names[kind]);
	sb_tag(b, "<", tag);
	if (kind == SW_STR) {
		r = xml_text(b, json_string_value(v), json_string_length(v), what, 0);
		if (r != SD_OK)
			return r;
	} else {
		snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		sb_puts(b, kind == SW_INT ? num : json_is_true(v) ? "true" : "false");
	}
	sb_tag(b, "</", tag);
	return SD_OK;
}

static enum sd_result put_struct(struct sw_buf *b, const struct sw_field *fields, json_t *obj,
				 const char *what);

/* a list's or a map value's element: a struct inside <tag>, or a scalar */
static enum sd_result put_elem(struct sw_buf *b, const char *tag, const struct sw_field *fd,
			       json_t *v)
{
	enum sd_result r;

	if (fd->elem != SW_STRUCT)
		return put_scalar(b, tag, fd->elem, v, fd->name);
	sb_tag(b, "<", tag);
	if ((r = put_struct(b, fd->sub, v, fd->name)) != SD_OK)
		return r;
	sb_tag(b, "</", tag);
	return SD_OK;
}

/* a flattened list (<wire>..</wire> each) or map (<wire><Name>k</Name>
 * <Value>v</Value></wire> each) */
static enum sd_result put_repeated(struct sw_buf *b, const struct sw_field *fd, json_t *v)
{
	const char *k;
	enum sd_result r;
	size_t i;
	json_t *e;

	if (fd->kind == SW_LIST ? !json_is_array(v) : !json_is_object(v))
		return err_set(SD_INVALID, "the result's %s must be %s", fd->name,
			       kind_names[fd->kind]);
	json_array_foreach(v, i, e)
		if ((r = put_elem(b, fd->wire, fd, e)) != SD_OK)
			return r;
	json_object_foreach(v, k, e) {
		sb_tag(b, "<", fd->wire);
		sb_tag(b, "<", fd->key);
		if ((r = xml_text(b, k, strlen(k), fd->name, 0)) != SD_OK)
			return r;
		sb_tag(b, "</", fd->key);
		if ((r = put_elem(b, "Value", fd, e)) != SD_OK)
			return r;
		sb_tag(b, "</", fd->wire);
	}
	return SD_OK;
}

/* obj's members in the model's order; a member the model lacks refused */
static enum sd_result put_struct(struct sw_buf *b, const struct sw_field *fields, json_t *obj,
				 const char *what)
{
	const struct sw_field *fd;
	size_t known = 0;
	enum sd_result r;
	const char *k;
	json_t *v;

	if (!json_is_object(obj))
		return err_set(SD_INVALID, "the result's %s must be an object", what);
	for (fd = fields; fd->name; fd++) {
		if (!(v = json_object_get(obj, fd->name)))
			continue;
		known++;
		if (json_is_null(v))
			continue;
		r = fd->kind < SW_LIST ? put_scalar(b, fd->wire, fd->kind, v, fd->name) :
		    put_repeated(b, fd, v);
		if (r != SD_OK)
			return r;
	}
	if (known == json_object_size(obj))
		return SD_OK;
	json_object_foreach(obj, k, v) {
		for (fd = fields; fd->name && strcmp(fd->name, k) != 0; fd++)
			;
		if (!fd->name)
			break;
	}
	return err_set(SD_INVALID, "the result's %s has a member the model does not: %.64s",
		       what, k ? k : "?");
}

/* ---- answers ------------------------------------------------------------------ */

/* body (malloc'd; NULL when memory ran out) as the answer */
static enum sd_result reply_set(struct sqs_reply *out, char *body, size_t len, int status,
				const char *type)
{
	out->status = status;
	out->content_type = type;
	out->body = body;
	out->len = body ? len : 0;
	return body ? SD_OK : err_set(SD_NOMEM, "out of memory writing an SQS answer");
}

static void xml_open(struct sw_buf *b, const char *root, const char *suffix)
{
	sb_puts(b, "<?xml version=\"1.0\"?><");
	sb_puts(b, root);
	sb_puts(b, suffix);
	sb_puts(b, " xmlns=\"" SQS_XMLNS "\">");
}

static enum sd_result result_json(const struct sw_op *op, json_t *result, struct sqs_reply *out)
{
	struct sw_buf dry = { 0 };
	json_t *empty = result ? NULL : json_object();
	enum sd_result r = SD_OK;
	char *s;

	/* checked as its XML would be, on a dry run */
	if (op->out && result && (r = put_struct(&dry, op->out, result, op->name)) != SD_OK)
		return r;
	s = result || empty ? json_dumps(result ? result : empty, JSON_COMPACT) : NULL;
	json_decref(empty);
	return reply_set(out, s, s ? strlen(s) : 0, 200, SQS_TYPE_JSON);
}

enum sd_result sqs_wire_result(enum sqs_proto proto, const char *action, json_t *result,
			       const char *request_id, struct sqs_reply *out)
{
	const struct sw_op *op = op_find(action);
	char wrap[SQS_ACTION_MAX + 8];
	enum sd_result r;
	struct sw_buf b;

	memset(out, 0, sizeof *out);
	if (!op)
		return err_set(SD_INVALID, "SQS has no action %.64s", action ? action : "");
	if (result && !json_is_object(result))
		return err_set(SD_INVALID, "the result of %s must be an object", action);
	if (!op->out && result && json_object_size(result))
		return err_set(SD_INVALID, "%s answers nothing, yet its result has members", action);
	if (proto == SQS_JSON)
		return result_json(op, result, out);
	if ((r = sb_open(&b)) != SD_OK)
		return r;
	xml_open(&b, action, "Response");
	snprintf(wrap, sizeof wrap, "%sResult", action);
	if (op->out)
		sb_tag(&b, "<", wrap);
	if (op->out && result && (r = put_struct(&b, op->out, result, action)) != SD_OK) {
		if (sb_close(&b) == SD_OK)
			free(b.p);
		return r;
	}
	if (op->out)
		sb_tag(&b, "</", wrap);
	sb_puts(&b, "<ResponseMetadata><RequestId>");
	xml_text(&b, request_id ? request_id : "", request_id ? strlen(request_id) : 0, "", 1);
	sb_puts(&b, "</RequestId></ResponseMetadata></");
	sb_puts(&b, action);
	sb_puts(&b, "Response>");
	if ((r = sb_close(&b)) != SD_OK)
		return r;
	return reply_set(out, b.p, b.len, 200, SQS_TYPE_XML);
}

static void error_xml(struct sw_buf *b, const char *query_code, int sender, const char *msg,
		      const char *rid)
{
	xml_open(b, "Error", "Response");
	sb_puts(b, "<Error><Type>");
	sb_puts(b, sender ? "Sender" : "Receiver");
	sb_puts(b, "</Type><Code>");
	sb_puts(b, query_code);
	sb_puts(b, "</Code><Message>");
	xml_text(b, msg, strlen(msg), "", 1);
	sb_puts(b, "</Message><Detail/></Error><RequestId>");
	xml_text(b, rid, strlen(rid), "", 1);
	sb_puts(b, "</RequestId></ErrorResponse>");
}

void sqs_wire_error(enum sqs_proto proto, const char *code, const char *message,
		    const char *request_id, struct sqs_reply *out)
{
	char *msg = text_escape(message ? message : ""), type[96],
	     *rid = text_escape(request_id ? request_id : ""), *body = NULL;
	const char *query_code;
	int status, sender;
	struct sw_buf b;
	size_t len = 0;
	json_t *o;

	memset(out, 0, sizeof *out);
	if (!sqs_wire_error_info(code, &query_code, &status, &sender))
		code = sw_errors[0].code;
	if (proto == SQS_JSON) {
		snprintf(type, sizeof type, "com.amazonaws.sqs#%s", code);
		snprintf(out->query_error, sizeof out->query_error, "%s;%s", query_code,
			 sender ? "Sender" : "Receiver");
		o = json_pack("{s:s, s:s}", "__type", type, "message", msg ? msg : "");
		body = o ? json_dumps(o, JSON_COMPACT) : NULL;
		len = body ? strlen(body) : 0;
		json_decref(o);
	} else if (sb_open(&b) == SD_OK) {
		error_xml(&b, query_code, sender, msg ? msg : "", rid ? rid : "");
		if (sb_close(&b) == SD_OK) {
			body = b.p;
			len = b.len;
		}
	}
	reply_set(out, body, len, status, proto == SQS_JSON ? SQS_TYPE_JSON : SQS_TYPE_XML);
	free(msg);
	free(rid);
}

void sqs_reply_free(struct sqs_reply *r)
{
	if (!r)
		return;
	free(r->body);
	memset(r, 0, sizeof *r);
}
