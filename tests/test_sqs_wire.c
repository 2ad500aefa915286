/*
 * test_sqs_wire.c: the SQS listener's wire layer (sqs_wire.h): query
 * requests read into the JSON 1.0 shape, JSON requests, the protocol told
 * apart, malformed requests refused with their codes, results and errors
 * rendered; then the SDK as the judge (tests/sqs_wire_parse.py): the
 * requests Debian's botocore 1.29 sends in the query protocol, and a
 * botocore that speaks JSON 1.0 (python3 from pip, 1.43), read into the
 * parameters they were made from, and the box's answers read back by
 * those botocores' own parsers and clients into exactly the results and
 * error codes the box meant.
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
#include <unistd.h>

#include "sqs_wire.h"
#include "testutil.h"

#define FORM "application/x-www-form-urlencoded; charset=utf-8"
#define SCRIPT "tests/sqs_wire_parse.py"
#define DEBIAN_PY "/usr/bin/python3"	/* python3-botocore 1.29: the query protocol */
#define PIP_PY "python3"		/* a botocore that speaks JSON 1.0 to SQS */

/* the whole file as a string (caller frees) */
static char *slurp(const char *path)
{
	size_t n;

	return (char *)tu_slurp(path, &n);
}

/* JSON written with ' for " (a literal apostrophe as \u0027) */
static json_t *jq(const char *s)
{
	char *t = strdup(s), *p;
	json_error_t e;
	json_t *j;

	assert_non_null(t);
	for (p = t; *p; p++)
		if (*p == '\'')
			*p = '"';
	j = json_loads(t, JSON_ALLOW_NUL, &e);
	if (!j)
		tu_fail_free(t, NULL, "bad JSON in the test (%s): %s", e.text, t);
	free(t);
	return j;
}

static void json_is(json_t *got, json_t *want, const char *what)
{
	char *g, *w;

	if (json_equal(got, want))
		return;
	g = json_dumps(got, JSON_SORT_KEYS | JSON_ENCODE_ANY);
	w = json_dumps(want, JSON_SORT_KEYS | JSON_ENCODE_ANY);
	tu_fail_free(g, w, "%s:\n got %s\nwant %s", what, g ? g : "(null)", w ? w : "(null)");
}

/* ---- reading requests ------------------------------------------------------- */

static json_t *parse_ok(const char *ct, const char *target, const char *query, const char *body,
			size_t len, enum sqs_proto proto, const char *action)
{
	char a[SQS_ACTION_MAX + 1];
	const char *code = "unset";
	json_t *params = NULL;
	enum sqs_proto p;
	enum sd_result r;

	r = sqs_wire_parse(ct, target, query, body, len, &p, a, &params, &code);
	if (r != SD_OK)
		fail_msg("refused (%s: %s): %.300s", code ? code : "?", err_msg(), body);
	assert_int_equal(p, proto);
	assert_string_equal(a, action);
	assert_null(code);
	assert_true(json_is_object(params));
	return params;
}

/* a request (a NUL-terminated body) read into want (JSON in jq's quotes) */
static void request_is(const char *ct, const char *target, const char *query, const char *body,
		       enum sqs_proto proto, const char *action, const char *want)
{
	json_t *got = parse_ok(ct, target, query, body, strlen(body), proto, action),
	       *w = jq(want);

	json_is(got, w, body);
	json_decref(got);
	json_decref(w);
}

static void query_is(const char *body, const char *action, const char *want)
{
	request_is(FORM, NULL, NULL, body, SQS_QUERY, action, want);
}

/* refused, with code, and nothing handed out */
static void refused_as(const char *ct, const char *target, const char *query, const char *body,
		       size_t len, enum sqs_proto proto, const char *code)
{
	char a[SQS_ACTION_MAX + 1];
	const char *got = NULL;
	json_t *params = (json_t *)1;
	enum sqs_proto p;
	enum sd_result r;

	err_clear();
	r = sqs_wire_parse(ct, target, query, body, len, &p, a, &params, &got);
	if (r != SD_INVALID)
		fail_msg("taken (%d): %.300s", r, body);
	assert_int_equal(p, proto);
	assert_null(params);
	assert_non_null(got);
	if (strcmp(got, code) != 0)
		fail_msg("%.300s: code %s (%s), not %s", body, got, err_msg(), code);
	assert_true(err_msg()[0] != '\0');
}

static void query_refused(const char *body, const char *code)
{
	refused_as(FORM, NULL, NULL, body, strlen(body), SQS_QUERY, code);
}

static void test_query_lists_and_maps(void **state)
{
	(void)state;
	query_is("Action=GetQueueAttributes&Version=2012-11-05&QueueUrl=http%3A%2F%2Fh%2Fq"
		 "&AttributeName.1=All&AttributeName.2=QueueArn", "GetQueueAttributes",
		 "{'QueueUrl':'http://h/q','AttributeNames':['All','QueueArn']}");
	/* botocore's empty list: the member's own name, empty */
	query_is("Action=GetQueueAttributes&QueueUrl=u&AttributeNames=", "GetQueueAttributes",
		 "{'QueueUrl':'u','AttributeNames':[]}");
	query_is("Action=CreateQueue&QueueName=jobs&Attribute.2.Name=DelaySeconds&Attribute.2.Value=5"
		 "&Attribute.1.Name=VisibilityTimeout&Attribute.1.Value=30&Tag.1.Key=team"
		 "&Tag.1.Value=box+office", "CreateQueue",
		 "{'QueueName':'jobs','Attributes':{'VisibilityTimeout':'30','DelaySeconds':'5'},"
		 "'tags':{'team':'box office'}}");
	query_is("Action=TagQueue&QueueUrl=u&Tag.1.Key=a&Tag.1.Value=", "TagQueue",
		 "{'QueueUrl':'u','Tags':{'a':''}}");
	query_is("Action=UntagQueue&QueueUrl=u&TagKey.1=a&TagKey.2=b", "UntagQueue",
		 "{'QueueUrl':'u','TagKeys':['a','b']}");
	query_is("Action=AddPermission&QueueUrl=u&Label=l&AWSAccountId.1=1&ActionName.1=SendMessage",
		 "AddPermission", "{'QueueUrl':'u','Label':'l','AWSAccountIds':['1'],"
		 "'Actions':['SendMessage']}");
	query_is("Action=ReceiveMessage&QueueUrl=u&MessageAttributeName.1=x&MessageAttributeName.2=y.*"
		 "&MessageSystemAttributeName.1=SenderId&AttributeName.1=All", "ReceiveMessage",
		 "{'QueueUrl':'u','MessageAttributeNames':['x','y.*'],"
		 "'MessageSystemAttributeNames':['SenderId'],'AttributeNames':['All']}");
	query_is("Action=SendMessage&QueueUrl=u&MessageBody=caf%C3%A9+%26+%3D&MessageAttribute.1.Name=a"
		 "&MessageAttribute.1.Value.DataType=String&MessageAttribute.1.Value.StringValue=v"
		 "&MessageAttribute.2.Name=b&MessageAttribute.2.Value.DataType=Binary"
		 "&MessageAttribute.2.Value.BinaryValue=AAH%2B%2Fw%3D%3D"
		 "&MessageSystemAttribute.1.Name=AWSTraceHeader"
		 "&MessageSystemAttribute.1.Value.DataType=String"
		 "&MessageSystemAttribute.1.Value.StringValue=Root%3D1", "SendMessage",
		 "{'QueueUrl':'u','MessageBody':'caf\\u00e9 & =','MessageAttributes':{"
		 "'a':{'DataType':'String','StringValue':'v'},"
		 "'b':{'DataType':'Binary','BinaryValue':'AAH+/w=='}},"
		 "'MessageSystemAttributes':{'AWSTraceHeader':{'DataType':'String',"
		 "'StringValue':'Root=1'}}}");
	query_is("Action=SendMessageBatch&QueueUrl=u&SendMessageBatchRequestEntry.2.Id=b"
		 "&SendMessageBatchRequestEntry.2.MessageBody=two&SendMessageBatchRequestEntry.1.Id=a"
		 "&SendMessageBatchRequestEntry.1.MessageBody=one"
		 "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Name=k"
		 "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=Number"
		 "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringValue=1"
		 "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringListValue=",
		 "SendMessageBatch", "{'QueueUrl':'u','Entries':[{'Id':'a','MessageBody':'one',"
		 "'MessageAttributes':{'k':{'DataType':'Number','StringValue':'1',"
		 "'StringListValues':[]}}},{'Id':'b','MessageBody':'two'}]}");
	query_is("Action=DeleteMessageBatch&QueueUrl=u&DeleteMessageBatchRequestEntry.1.Id=a"
		 "&DeleteMessageBatchRequestEntry.1.ReceiptHandle=r%2B1", "DeleteMessageBatch",
		 "{'QueueUrl':'u','Entries':[{'Id':'a','ReceiptHandle':'r+1'}]}");
	query_is("Action=ChangeMessageVisibilityBatch&QueueUrl=u"
		 "&ChangeMessageVisibilityBatchRequestEntry.1.Id=a"
		 "&ChangeMessageVisibilityBatchRequestEntry.1.ReceiptHandle=r"
		 "&ChangeMessageVisibilityBatchRequestEntry.1.VisibilityTimeout=60",
		 "ChangeMessageVisibilityBatch", "{'QueueUrl':'u','Entries':[{'Id':'a',"
		 "'ReceiptHandle':'r','VisibilityTimeout':60}]}");
	query_is("Action=SendMessageBatch&QueueUrl=u&Entries=", "SendMessageBatch",
		 "{'QueueUrl':'u','Entries':[]}");
	/* an empty pair, a pair without '=', a trailing '&' */
	query_is("Action=ListQueues&&QueueNamePrefix&", "ListQueues", "{'QueueNamePrefix':''}");
}

static void test_query_integers(void **state)
{
	(void)state;
	query_is("Action=ReceiveMessage&QueueUrl=u&MaxNumberOfMessages=10&WaitTimeSeconds=0"
		 "&VisibilityTimeout=-1", "ReceiveMessage", "{'QueueUrl':'u','MaxNumberOfMessages':10,"
		 "'WaitTimeSeconds':0,'VisibilityTimeout':-1}");
	/* not integers: left as text for the action to refuse */
	query_is("Action=ReceiveMessage&QueueUrl=u&MaxNumberOfMessages=ten&WaitTimeSeconds="
		 "&VisibilityTimeout=1e3", "ReceiveMessage", "{'QueueUrl':'u',"
		 "'MaxNumberOfMessages':'ten','WaitTimeSeconds':'','VisibilityTimeout':'1e3'}");
	query_is("Action=SendMessage&QueueUrl=u&DelaySeconds=1234567890123456789&MessageBody=7",
		 "SendMessage", "{'QueueUrl':'u','DelaySeconds':'1234567890123456789',"
		 "'MessageBody':'7'}");
	query_is("Action=ListQueues&MaxResults=1000", "ListQueues", "{'MaxResults':1000}");
	query_is("Action=ListDeadLetterSourceQueues&QueueUrl=u&MaxResults=-", "ListDeadLetterSourceQueues",
		 "{'QueueUrl':'u','MaxResults':'-'}");
	query_is("Action=SendMessageBatch&QueueUrl=u&SendMessageBatchRequestEntry.1.Id=a"
		 "&SendMessageBatchRequestEntry.1.DelaySeconds=900", "SendMessageBatch",
		 "{'QueueUrl':'u','Entries':[{'Id':'a','DelaySeconds':900}]}");
	/* an attribute's value stays text whatever it reads as */
	query_is("Action=SetQueueAttributes&QueueUrl=u&Attribute.1.Name=DelaySeconds"
		 "&Attribute.1.Value=5", "SetQueueAttributes",
		 "{'QueueUrl':'u','Attributes':{'DelaySeconds':'5'}}");
}

static void test_query_refused(void **state)
{
	static const struct {
		const char *body, *code;
	} bad[] = {
		{ "QueueUrl=u", "MissingAction" },
		{ "Action=&QueueUrl=u", "MissingAction" },
		{ "Action=Send%20Message", "InvalidAction" },
		{ "Action=ListQueues&Version=2011-10-01", "NoSuchVersion" },
		{ "Action=ListQueues&QueueNamePrefix=a%2", "MalformedQueryString" },
		{ "Action=ListQueues&QueueNamePrefix=a%zz", "MalformedQueryString" },
		{ "Action=ListQueues&QueueNamePrefix=a%00b", "MalformedQueryString" },
		{ "Action=ListQueues&=x", "MalformedQueryString" },
		{ "Action=ListQueues&Queue%20NamePrefix=x", "MalformedQueryString" },
		{ "Action=ListQueues&QueueNamePrefix=%FF", "InvalidParameterValue" },
		{ "Action=ListQueues&QueueNamePrefix=%C0%AF", "InvalidParameterValue" },
		{ "Action=ListQueues&QueueNamePrefix=a&QueueNamePrefix=b", "InvalidParameterValue" },
		{ "Action=ListQueues&Action=ListQueues", "InvalidParameterValue" },
		{ "Action=ListQueues&QueueUrl=u", "InvalidParameterValue" },
		{ "Action=ListQueues&QueueNamePrefix.1=u", "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeName=All", "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeNames=All", "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeName.0=All", "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeName.01=All", "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeName.101=All", "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeName.x=All", "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeName.1.Name=All", "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeName.1=All&AttributeName.3=Policy",
		  "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeName.2=All", "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeNames=&AttributeName.1=All",
		  "InvalidParameterValue" },
		{ "Action=ReceiveMessage&QueueUrl=u&AttributeName.1=All&AttributeNames=",
		  "InvalidParameterValue" },
		{ "Action=SetQueueAttributes&QueueUrl=u&Attribute.1.Value=30", "MissingParameter" },
		{ "Action=SetQueueAttributes&QueueUrl=u&Attribute.1.Name=DelaySeconds",
		  "MissingParameter" },
		{ "Action=SetQueueAttributes&QueueUrl=u&Attribute.1.Name=A&Attribute.1.Value=1"
		  "&Attribute.2.Name=A&Attribute.2.Value=2", "InvalidParameterValue" },
		{ "Action=SetQueueAttributes&QueueUrl=u&Attribute.1.Key=A&Attribute.1.Value=1",
		  "InvalidParameterValue" },
		{ "Action=SetQueueAttributes&QueueUrl=u&Attribute.1.Name=A&Attribute.1.Value.X=1",
		  "InvalidParameterValue" },
		{ "Action=SetQueueAttributes&QueueUrl=u&Attribute.1=A", "InvalidParameterValue" },
		{ "Action=SendMessage&QueueUrl=u&MessageAttribute.1.Name=a"
		  "&MessageAttribute.1.Value=v", "InvalidParameterValue" },
		{ "Action=SendMessage&QueueUrl=u&MessageAttribute.1.Value.DataType=String"
		  "&MessageAttribute.1.Value.StringValue=v", "MissingParameter" },
		{ "Action=SendMessage&QueueUrl=u&MessageAttribute.1.Name=a", "MissingParameter" },
		{ "Action=SendMessage&QueueUrl=u&MessageAttribute.1.Name=a"
		  "&MessageAttribute.1.Value.Type=String", "InvalidParameterValue" },
		{ "Action=SendMessageBatch&QueueUrl=u&SendMessageBatchRequestEntry.1.Id=a"
		  "&SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.DataType=String",
		  "MissingParameter" },
		{ "Action=SendMessageBatch&QueueUrl=u&SendMessageBatchRequestEntry.1=a",
		  "InvalidParameterValue" },
		{ "Action=SendMessageBatch&QueueUrl=u&SendMessageBatchRequestEntry.1.Id=a"
		  "&SendMessageBatchRequestEntry.1.ReceiptHandle=r", "InvalidParameterValue" },
		{ "Action=TagQueue&QueueUrl=u&Tags.1.Key=a&Tags.1.Value=b", "InvalidParameterValue" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		query_refused(bad[i].body, bad[i].code);
	/* a NUL byte sent as itself */
	refused_as(FORM, NULL, NULL, "Action=ListQueues&Q=a\0b", 23, SQS_QUERY,
		   "MalformedQueryString");
	/* neither protocol's Content-Type */
	refused_as("text/plain", NULL, NULL, "Action=ListQueues", 17, SQS_QUERY,
		   "InvalidParameterValue");
	refused_as("application/x-amz-json-1.1", NULL, NULL, "{}", 2, SQS_QUERY,
		   "InvalidParameterValue");
}

/* the limits: pairs, a name's length */
static void test_query_limits(void **state)
{
	size_t cap = 20 * SQS_WIRE_PARAMS_MAX, n, i;
	char *body = malloc(cap), key[SQS_WIRE_KEY_MAX + 2];
	json_t *p;

	(void)state;
	assert_non_null(body);
	n = (size_t)snprintf(body, cap, "Action=Foo");
	for (i = 1; i < SQS_WIRE_PARAMS_MAX; i++)
		n += (size_t)snprintf(body + n, cap - n, "&k%zu=v", i);
	p = parse_ok(FORM, NULL, NULL, body, n, SQS_QUERY, "Foo");
	assert_int_equal(json_object_size(p), SQS_WIRE_PARAMS_MAX - 1);
	json_decref(p);
	n += (size_t)snprintf(body + n, cap - n, "&one=more");
	refused_as(FORM, NULL, NULL, body, n, SQS_QUERY, "MalformedQueryString");
	memset(key, 'K', sizeof key);
	key[SQS_WIRE_KEY_MAX] = '\0';
	n = (size_t)snprintf(body, cap, "Action=Foo&%s=v", key);
	p = parse_ok(FORM, NULL, NULL, body, n, SQS_QUERY, "Foo");
	json_decref(p);
	key[SQS_WIRE_KEY_MAX] = 'K';
	key[SQS_WIRE_KEY_MAX + 1] = '\0';
	n = (size_t)snprintf(body, cap, "Action=Foo&%s=v", key);
	refused_as(FORM, NULL, NULL, body, n, SQS_QUERY, "MalformedQueryString");
	/* an action's name: SQS_ACTION_MAX letters at most */
	memset(key, 'A', SQS_ACTION_MAX + 1);
	key[SQS_ACTION_MAX + 1] = '\0';
	n = (size_t)snprintf(body, cap, "Action=%s", key);
	refused_as(FORM, NULL, NULL, body, n, SQS_QUERY, "InvalidAction");
	n = (size_t)snprintf(body, cap, "AmazonSQS.%s", key);
	refused_as(SQS_TYPE_JSON, body, NULL, "{}", 2, SQS_JSON, "InvalidAction");
	key[SQS_ACTION_MAX] = '\0';
	n = (size_t)snprintf(body, cap, "Action=%s", key);
	json_decref(parse_ok(FORM, NULL, NULL, body, n, SQS_QUERY, key));
	free(body);
}

/* an index past the limit is refused, 100 itself is a gap here */
static void test_query_index_limit(void **state)
{
	(void)state;
	query_refused("Action=ReceiveMessage&QueueUrl=u&MessageAttributeName.100=x",
		      "InvalidParameterValue");
	assert_non_null(strstr(err_msg(), "MessageAttributeName.1 is missing"));
	query_refused("Action=ReceiveMessage&QueueUrl=u&MessageAttributeName.1000=x",
		      "InvalidParameterValue");
	assert_non_null(strstr(err_msg(), "1 to 100"));
}

static void test_query_string_merged(void **state)
{
	(void)state;
	/* a GET: everything in the URL, no body, no Content-Type */
	request_is(NULL, NULL, "Action=GetQueueUrl&Version=2012-11-05&QueueName=jobs", "",
		   SQS_QUERY, "GetQueueUrl", "{'QueueName':'jobs'}");
	/* the body's pair wins over the URL's (Action too); the URL's others are taken */
	request_is(FORM, NULL, "Action=GetQueueUrl&QueueUrl=from-url&Version=2012-11-05",
		   "QueueUrl=from-body&Action=DeleteQueue", SQS_QUERY, "DeleteQueue",
		   "{'QueueUrl':'from-body'}");
	request_is(FORM, NULL, "QueueName=url&QueueOwnerAWSAccountId=1",
		   "Action=GetQueueUrl&QueueName=body", SQS_QUERY, "GetQueueUrl",
		   "{'QueueName':'body','QueueOwnerAWSAccountId':'1'}");
	/* a name twice in the URL itself */
	refused_as(FORM, NULL, "QueueName=a&QueueName=b", "Action=GetQueueUrl", 18, SQS_QUERY,
		   "InvalidParameterValue");
}

static void test_protocol_detection(void **state)
{
	json_t *p;

	(void)state;
	p = parse_ok(SQS_TYPE_JSON, "AmazonSQS.ListQueues", "Action=DeleteQueue", "", 0, SQS_JSON,
		     "ListQueues");
	assert_int_equal(json_object_size(p), 0);	/* the URL's query is not read */
	json_decref(p);
	/* a target decides, whatever the Content-Type */
	p = parse_ok(FORM, "AmazonSQS.ListQueues", NULL, "{}", 2, SQS_JSON, "ListQueues");
	json_decref(p);
	/* the JSON Content-Type (any case, with parameters) without a target */
	refused_as("Application/X-Amz-Json-1.0; charset=utf-8", NULL, NULL, "{}", 2, SQS_JSON,
		   "MissingAction");
	refused_as(" application/x-amz-json-1.0", NULL, NULL, "{}", 2, SQS_JSON, "MissingAction");
	/* a prefix of a type is not the type */
	refused_as("application/x-amz-json-1.00", NULL, NULL, "{}", 2, SQS_QUERY,
		   "InvalidParameterValue");
	p = parse_ok("APPLICATION/X-WWW-FORM-URLENCODED", NULL, NULL, "Action=ListQueues", 17,
		     SQS_QUERY, "ListQueues");
	json_decref(p);
	p = parse_ok(NULL, NULL, NULL, "Action=ListQueues", 17, SQS_QUERY, "ListQueues");
	json_decref(p);
}

static void test_json_requests(void **state)
{
	json_t *p;

	(void)state;
	request_is(SQS_TYPE_JSON, "AmazonSQS.ReceiveMessage", NULL, "{\"QueueUrl\":\"u\","
		   "\"MaxNumberOfMessages\":10,\"AttributeNames\":[\"All\"]}", SQS_JSON,
		   "ReceiveMessage", "{'QueueUrl':'u','MaxNumberOfMessages':10,"
		   "'AttributeNames':['All']}");
	p = parse_ok(SQS_TYPE_JSON, "AmazonSQS.ListQueues", NULL, NULL, 0, SQS_JSON, "ListQueues");
	assert_int_equal(json_object_size(p), 0);
	json_decref(p);
	/* an action this module does not know is the caller's to refuse */
	p = parse_ok(SQS_TYPE_JSON, "AmazonSQS.Frobnicate", NULL, "{\"a\":1}", 7, SQS_JSON,
		     "Frobnicate");
	json_decref(p);
	refused_as(SQS_TYPE_JSON, "AmazonSQS.ListQueues", NULL, "{\"a\":", 5, SQS_JSON,
		   "SerializationException");
	refused_as(SQS_TYPE_JSON, "AmazonSQS.ListQueues", NULL, "[1]", 3, SQS_JSON,
		   "SerializationException");
	refused_as(SQS_TYPE_JSON, "AmazonSQS.ListQueues", NULL, " ", 1, SQS_JSON,
		   "SerializationException");
	refused_as(SQS_TYPE_JSON, "AmazonSQS.ListQueues", NULL, "{\"a\":1,\"a\":2}", 13, SQS_JSON,
		   "SerializationException");
	refused_as(SQS_TYPE_JSON, "AmazonSQS.ListQueues", NULL, "{\"a\":\"\\u0000\"}", 14,
		   SQS_JSON, "SerializationException");
	refused_as(SQS_TYPE_JSON, "AmazonSQS.", NULL, "{}", 2, SQS_JSON, "MissingAction");
	refused_as(SQS_TYPE_JSON, "", NULL, "{}", 2, SQS_JSON, "MissingAction");
	refused_as(SQS_TYPE_JSON, "DynamoDB_20120810.ListTables", NULL, "{}", 2, SQS_JSON,
		   "InvalidAction");
	refused_as(SQS_TYPE_JSON, "AmazonSQS.List-Queues", NULL, "{}", 2, SQS_JSON,
		   "InvalidAction");
}

static void test_unknown_action(void **state)
{
	(void)state;
	assert_true(sqs_wire_known("SendMessageBatch"));
	assert_true(sqs_wire_known("ListMessageMoveTasks"));
	assert_false(sqs_wire_known("Frobnicate"));
	assert_false(sqs_wire_known("sendmessage"));
	assert_false(sqs_wire_known(NULL));
	query_is("Action=Frobnicate&X.1.Y=2&Z=", "Frobnicate", "{'X.1.Y':'2','Z':''}");
}

/* ---- answers ------------------------------------------------------------------ */

static void result_is(enum sqs_proto proto, const char *action, const char *result,
		      const char *want)
{
	struct sqs_reply r;
	json_t *j = result ? jq(result) : NULL;

	if (sqs_wire_result(proto, action, j, "req-1", &r) != SD_OK)
		fail_msg("%s refused: %s", action, err_msg());
	assert_int_equal(r.status, 200);
	assert_string_equal(r.content_type, proto == SQS_JSON ? SQS_TYPE_JSON : SQS_TYPE_XML);
	assert_string_equal(r.query_error, "");
	assert_int_equal(r.len, strlen(want));
	assert_string_equal(r.body, want);
	sqs_reply_free(&r);
	assert_null(r.body);
	json_decref(j);
}

static void result_refused(const char *action, const char *result, const char *why)
{
	struct sqs_reply r;
	json_t *j = jq(result);
	enum sqs_proto p;

	for (p = SQS_QUERY; p <= SQS_JSON; p++) {
		err_clear();
		assert_int_equal(sqs_wire_result(p, action, j, "req-1", &r), SD_INVALID);
		assert_null(r.body);
		if (!strstr(err_msg(), why))
			fail_msg("%s %s: \"%s\" does not say \"%s\"", action, result, err_msg(), why);
	}
	json_decref(j);
}

#define XML_HEAD "<?xml version=\"1.0\"?>"
#define XMLNS " xmlns=\"http://queue.amazonaws.com/doc/2012-11-05/\">"
#define META "<ResponseMetadata><RequestId>req-1</RequestId></ResponseMetadata>"

static void test_result_rendering(void **state)
{
	(void)state;
	result_is(SQS_QUERY, "SendMessage", "{'MessageId':'m-1','MD5OfMessageBody':'abc'}",
		  XML_HEAD "<SendMessageResponse" XMLNS "<SendMessageResult><MD5OfMessageBody>abc"
		  "</MD5OfMessageBody><MessageId>m-1</MessageId></SendMessageResult>" META
		  "</SendMessageResponse>");
	/* nothing to answer: no Result element */
	result_is(SQS_QUERY, "DeleteMessage", NULL, XML_HEAD "<DeleteMessageResponse" XMLNS META
		  "</DeleteMessageResponse>");
	result_is(SQS_QUERY, "PurgeQueue", "{}", XML_HEAD "<PurgeQueueResponse" XMLNS META
		  "</PurgeQueueResponse>");
	result_is(SQS_QUERY, "ListQueues", "{}", XML_HEAD "<ListQueuesResponse" XMLNS
		  "<ListQueuesResult></ListQueuesResult>" META "</ListQueuesResponse>");
	/* escapes; a flattened map, a flattened list, a boolean, an integer */
	result_is(SQS_QUERY, "GetQueueAttributes", "{'Attributes':{'A&B':'<\\\"x\\\">\\r\\n\\t'}}",
		  XML_HEAD "<GetQueueAttributesResponse" XMLNS "<GetQueueAttributesResult>"
		  "<Attribute><Name>A&amp;B</Name><Value>&lt;&quot;x&quot;&gt;&#xD;\n\t</Value>"
		  "</Attribute></GetQueueAttributesResult>" META "</GetQueueAttributesResponse>");
	result_is(SQS_QUERY, "DeleteMessageBatch", "{'Successful':[{'Id':'a'},{'Id':'b'}],"
		  "'Failed':[{'Id':'c','SenderFault':true,'Code':'X'}]}",
		  XML_HEAD "<DeleteMessageBatchResponse" XMLNS "<DeleteMessageBatchResult>"
		  "<DeleteMessageBatchResultEntry><Id>a</Id></DeleteMessageBatchResultEntry>"
		  "<DeleteMessageBatchResultEntry><Id>b</Id></DeleteMessageBatchResultEntry>"
		  "<BatchResultErrorEntry><Id>c</Id><SenderFault>true</SenderFault><Code>X</Code>"
		  "</BatchResultErrorEntry></DeleteMessageBatchResult>" META
		  "</DeleteMessageBatchResponse>");
	result_is(SQS_QUERY, "CancelMessageMoveTask", "{'ApproximateNumberOfMessagesMoved':-7}",
		  XML_HEAD "<CancelMessageMoveTaskResponse" XMLNS "<CancelMessageMoveTaskResult>"
		  "<ApproximateNumberOfMessagesMoved>-7</ApproximateNumberOfMessagesMoved>"
		  "</CancelMessageMoveTaskResult>" META "</CancelMessageMoveTaskResponse>");
	/* JSON: the object itself; nothing to answer: {} */
	result_is(SQS_JSON, "GetQueueUrl", "{'QueueUrl':'http://h/0/q'}",
		  "{\"QueueUrl\":\"http://h/0/q\"}");
	result_is(SQS_JSON, "DeleteQueue", NULL, "{}");
}

static void test_result_refused(void **state)
{
	struct sqs_reply r;
	json_t *j;

	(void)state;
	result_refused("SendMessage", "{'MessageId':'m','Body':'x'}", "Body");
	result_refused("SendMessage", "{'MessageId':7}", "MessageId must be text");
	result_refused("CancelMessageMoveTask", "{'ApproximateNumberOfMessagesMoved':'7'}",
		       "an integer");
	result_refused("DeleteMessageBatch", "{'Failed':[{'Id':'a','SenderFault':'true'}]}",
		       "a boolean");
	result_refused("ListQueues", "{'QueueUrls':'http://h/q'}", "a list");
	result_refused("ListQueues", "{'QueueUrls':[1]}", "QueueUrls must be text");
	result_refused("GetQueueAttributes", "{'Attributes':['a']}", "a map");
	result_refused("ReceiveMessage", "{'Messages':[{'Body':'a\\u0001b'}]}", "XML cannot carry");
	result_refused("ReceiveMessage", "{'Messages':[{'Body':'a\\uffffb'}]}", "XML cannot carry");
	result_refused("ReceiveMessage", "{'Messages':[{'Body':'a\\u0000b'}]}", "XML cannot carry");
	result_refused("ReceiveMessage", "{'Messages':[{'Nope':'x'}]}", "Nope");
	result_refused("ReceiveMessage", "{'Messages':['x']}", "an object");
	result_refused("DeleteMessage", "{'x':1}", "answers nothing");
	result_refused("Frobnicate", "{}", "no action");
	j = json_array();
	assert_int_equal(sqs_wire_result(SQS_JSON, "ListQueues", j, "r", &r), SD_INVALID);
	json_decref(j);
	/* a character SQS allows that XML also needs no escape for comes back as it is */
	result_is(SQS_QUERY, "GetQueueUrl", "{'QueueUrl':'\\ud83d\\ude00\\ue000\\ufffd'}",
		  XML_HEAD "<GetQueueUrlResponse" XMLNS "<GetQueueUrlResult><QueueUrl>"
		  "\xF0\x9F\x98\x80\xEE\x80\x80\xEF\xBF\xBD</QueueUrl></GetQueueUrlResult>" META
		  "</GetQueueUrlResponse>");
}

static void test_error_rendering(void **state)
{
	struct sqs_reply r;
	const char *q;
	int status, sender;

	(void)state;
	sqs_wire_error(SQS_QUERY, "QueueDoesNotExist", "no <queue> & \"such\"", "req-9", &r);
	assert_int_equal(r.status, 400);
	assert_string_equal(r.content_type, SQS_TYPE_XML);
	assert_string_equal(r.query_error, "");
	assert_string_equal(r.body, XML_HEAD "<ErrorResponse" XMLNS "<Error><Type>Sender</Type>"
			    "<Code>AWS.SimpleQueueService.NonExistentQueue</Code><Message>no "
			    "&lt;queue&gt; &amp; &quot;such&quot;</Message><Detail/></Error>"
			    "<RequestId>req-9</RequestId></ErrorResponse>");
	assert_int_equal(r.len, strlen(r.body));
	sqs_reply_free(&r);
	sqs_wire_error(SQS_JSON, "QueueDoesNotExist", "no <queue>", "req-9", &r);
	assert_string_equal(r.content_type, SQS_TYPE_JSON);
	assert_string_equal(r.body, "{\"__type\":\"com.amazonaws.sqs#QueueDoesNotExist\","
			    "\"message\":\"no <queue>\"}");
	assert_string_equal(r.query_error, "AWS.SimpleQueueService.NonExistentQueue;Sender");
	sqs_reply_free(&r);
	sqs_wire_error(SQS_JSON, "QueueNameExists", "taken", NULL, &r);
	assert_string_equal(r.query_error, "QueueAlreadyExists;Sender");
	sqs_reply_free(&r);
	sqs_wire_error(SQS_JSON, "ServiceUnavailable", "later", NULL, &r);
	assert_int_equal(r.status, 503);
	assert_string_equal(r.query_error, "ServiceUnavailable;Receiver");
	sqs_reply_free(&r);
	/* a code nobody knows: InternalFailure, the message kept */
	sqs_wire_error(SQS_JSON, "NoSuchThing", "oops", NULL, &r);
	assert_int_equal(r.status, 500);
	assert_string_equal(r.body, "{\"__type\":\"com.amazonaws.sqs#InternalFailure\","
			    "\"message\":\"oops\"}");
	assert_string_equal(r.query_error, "InternalFailure;Receiver");
	sqs_reply_free(&r);
	/* a message that is not clean text is escaped, never refused */
	sqs_wire_error(SQS_QUERY, NULL, "a\x01\xff" "b", "r\nid", &r);
	assert_int_equal(r.status, 500);
	assert_non_null(strstr(r.body, "<Type>Receiver</Type><Code>InternalFailure</Code>"));
	assert_non_null(strstr(r.body, "<Message>a\\x01\\xFFb</Message>"));
	assert_non_null(strstr(r.body, "<RequestId>r\\x0Aid</RequestId>"));
	sqs_reply_free(&r);
	sqs_reply_free(NULL);
	assert_true(sqs_wire_error_info("AccessDenied", &q, &status, &sender));
	assert_string_equal(q, "AccessDenied");
	assert_int_equal(status, 403);
	assert_true(sender);
	assert_true(sqs_wire_error_info("RequestEntityTooLarge", NULL, &status, NULL));
	assert_int_equal(status, 413);
	assert_true(sqs_wire_error_info("PurgeQueueInProgress", &q, &status, NULL));
	assert_string_equal(q, "AWS.SimpleQueueService.PurgeQueueInProgress");
	assert_int_equal(status, 403);
	assert_false(sqs_wire_error_info("Nope", &q, &status, &sender));
	assert_string_equal(q, "InternalFailure");
	assert_int_equal(status, 500);
	assert_false(sender);
}

/* ---- the SDK as the judge ------------------------------------------------------ */

struct scratch {
	char dir[64], in[96], out[96], err[96];
};

static void scratch_make(struct scratch *s)
{
	snprintf(s->dir, sizeof s->dir, "/tmp/test_sqs_wire.XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	snprintf(s->in, sizeof s->in, "%s/in.jsonl", s->dir);
	snprintf(s->out, sizeof s->out, "%s/out.jsonl", s->dir);
	snprintf(s->err, sizeof s->err, "%s/err.txt", s->dir);
}

static void scratch_drop(struct scratch *s)
{
	unlink(s->in);
	unlink(s->out);
	unlink(s->err);
	rmdir(s->dir);
}

/* python's stdout, one JSON value a line, into a new array */
static json_t *run_script(struct scratch *s, const char *python, const char *mode,
			  const char *file)
{
	const char *argv[] = { python, SCRIPT, mode, file, NULL };
	char *out, *line, *save = NULL;
	json_t *lines = json_array(), *j;

	if (tu_exec(argv, s->out, s->err, 120000) != 0) {
		char *err = slurp(s->err);

		tu_fail_free(err, NULL, "%s %s %s failed (python3-botocore installed?):\n%s",
			     python, SCRIPT, mode, err ? err : "");
	}
	out = slurp(s->out);
	assert_non_null(out);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!(j = json_loads(line, 0, NULL)))
			tu_fail_free(out, NULL, "%s printed a line that is not JSON", SCRIPT);
		json_array_append_new(lines, j);
	}
	free(out);
	return lines;
}

/* python's botocore speaks proto ("query", "json") to SQS, or the test
 * stops: Debian's 1.29 is one of the test packages (make deps-test) and must
 * be there; a botocore from pip that speaks JSON 1.0 (with the
 * x-amzn-query-error codes, awsQueryCompatible) may not be, and the test
 * is skipped */
static void need_botocore(const char *python, const char *proto)
{
	const char *argv[] = { python, SCRIPT, "protocol", NULL };
	struct scratch s;
	char *out = NULL;
	json_t *j = NULL;
	int yes;

	scratch_make(&s);
	if (tu_exec(argv, s.out, NULL, 60000) == 0 && (out = slurp(s.out)))
		j = json_loads(out, 0, NULL);
	yes = j && strcmp(json_string_value(json_object_get(j, "protocol")), proto) == 0;
	if (yes && strcmp(proto, "json") == 0)
		yes = json_is_true(json_object_get(j, "query_compatible"));
	json_decref(j);
	free(out);
	scratch_drop(&s);
	if (!yes && strcmp(proto, "query") == 0)
		fail_msg("%s's botocore does not speak the query protocol to SQS "
			 "(python3-botocore 1.29 installed?)", python);
	if (!yes)
		TU_SKIP("python3 has no botocore that speaks JSON 1.0 to SQS (a current one from pip)");
}

/* each request botocore sent read back into the parameters it was made from */
static void requests_read_back(const char *python, enum sqs_proto proto)
{
	struct scratch s;
	json_t *lines, *l, *p;
	size_t i;

	scratch_make(&s);
	lines = run_script(&s, python, "serialize", NULL);
	assert_int_equal(json_array_size(lines), 23);
	json_array_foreach(lines, i, l) {
		const char *body = json_string_value(json_object_get(l, "body")),
			   *action = json_string_value(json_object_get(l, "action"));

		p = parse_ok(json_string_value(json_object_get(l, "content_type")),
			     json_string_value(json_object_get(l, "target")), NULL, body,
			     strlen(body), proto, action);
		json_is(p, json_object_get(l, "params"), body);
		json_decref(p);
	}
	json_decref(lines);
	scratch_drop(&s);
}

static void test_botocore_query_requests(void **state)
{
	(void)state;
	need_botocore(DEBIAN_PY, "query");
	requests_read_back(DEBIAN_PY, SQS_QUERY);
}

static void test_botocore_json_requests(void **state)
{
	(void)state;
	need_botocore(PIP_PY, "json");
	requests_read_back(PIP_PY, SQS_JSON);
}

#define TRICKY "a & b <c> \\\"d\\\" \\u0027e\\u0027 ]]> \\r\\n\\t end \\u2713 \\ud83d\\ude00"

/* each action's result as the box would send it; query: what botocore 1.29
 * reads back when that is not the result itself ("-": an action 1.29 does
 * not have) */
static const struct {
	const char *action, *result, *query_reads;
} results[] = {
	{ "CreateQueue", "{'QueueUrl':'http://127.0.0.1:9324/000000000000/jobs'}", NULL },
	{ "GetQueueUrl", "{'QueueUrl':'http://h/0/a&b'}", NULL },
	{ "GetQueueAttributes", "{'Attributes':{'VisibilityTimeout':'30','QueueArn':"
	  "'arn:aws:sqs:us-east-1:000000000000:jobs','RedrivePolicy':"
	  "'{\\\"deadLetterTargetArn\\\":\\\"arn\\\",\\\"maxReceiveCount\\\":5}'}}", NULL },
	{ "GetQueueAttributes", "{'Attributes':{}}", "{}" },
	{ "ListQueues", "{'QueueUrls':['http://h/0/a','http://h/0/b'],'NextToken':'n&1'}", NULL },
	{ "ListQueues", "{'QueueUrls':['http://h/0/only']}", NULL },
	{ "ListQueues", "{'QueueUrls':[]}", "{}" },
	{ "ListDeadLetterSourceQueues", "{'queueUrls':['http://h/0/src'],'NextToken':'t'}", NULL },
	{ "ListQueueTags", "{'Tags':{'team':'box office','empty':''}}", NULL },
	{ "ReceiveMessage", "{'Messages':[{'MessageId':'m1','ReceiptHandle':'rh+1/=',"
	  "'MD5OfBody':'d41d8cd98f00b204e9800998ecf8427e','Body':'" TRICKY "',"
	  "'Attributes':{'SentTimestamp':'1700000000000','ApproximateReceiveCount':'1'},"
	  "'MD5OfMessageAttributes':'x','MessageAttributes':{'color':{'DataType':'String',"
	  "'StringValue':'red & <blue>'},'raw':{'DataType':'Binary','BinaryValue':'AAH+/w=='},"
	  "'list':{'DataType':'String','StringListValues':['a','b'],"
	  "'BinaryListValues':['AAE=']}}},"
	  "{'MessageId':'m2','ReceiptHandle':'rh2','MD5OfBody':'y','Body':''}]}", NULL },
	{ "ReceiveMessage", "{'Messages':[{'MessageId':'m1','Body':'one'}]}", NULL },
	{ "ReceiveMessage", "{'Messages':[]}", "{}" },
	{ "SendMessage", "{'MD5OfMessageBody':'a','MD5OfMessageAttributes':'b',"
	  "'MD5OfMessageSystemAttributes':'c','MessageId':'id','SequenceNumber':'10000000000000000001'}",
	  NULL },
	{ "SendMessageBatch", "{'Successful':[{'Id':'a','MessageId':'m','MD5OfMessageBody':'x'},"
	  "{'Id':'b','MessageId':'n','MD5OfMessageBody':'y','MD5OfMessageAttributes':'z',"
	  "'SequenceNumber':'2'}],'Failed':[{'Id':'c','SenderFault':true,"
	  "'Code':'InvalidMessageContents','Message':'bad <body>'}]}", NULL },
	{ "DeleteMessageBatch", "{'Successful':[{'Id':'a'}],'Failed':[{'Id':'b',"
	  "'SenderFault':false,'Code':'InternalError'}]}", NULL },
	{ "ChangeMessageVisibilityBatch", "{'Successful':[{'Id':'a'},{'Id':'b'}]}", NULL },
	{ "DeleteMessage", "{}", NULL },
	{ "TagQueue", "{}", NULL },
	{ "StartMessageMoveTask", "{'TaskHandle':'th'}", "-" },
	{ "CancelMessageMoveTask", "{'ApproximateNumberOfMessagesMoved':12}", "-" },
	{ "ListMessageMoveTasks", "{'Results':[{'TaskHandle':'th','Status':'RUNNING',"
	  "'SourceArn':'arn:s','DestinationArn':'arn:d','MaxNumberOfMessagesPerSecond':5,"
	  "'ApproximateNumberOfMessagesMoved':1,'ApproximateNumberOfMessagesToMove':9,"
	  "'StartedTimestamp':1700000000000}]}", "-" },
};

/* an answer as the script reads it: {"action", "status", "headers", "body"} */
static void answer_write(FILE *f, const char *action, const struct sqs_reply *r)
{
	json_t *h = json_pack("{s:s}", "Content-Type", r->content_type), *line;

	if (r->query_error[0])
		json_object_set_new(h, "x-amzn-query-error", json_string(r->query_error));
	line = json_pack("{s:s, s:i, s:o, s:s%}", "action", action, "status", r->status,
			 "headers", h, "body", r->body, r->len);
	assert_non_null(line);
	assert_int_equal(json_dumpf(line, f, JSON_COMPACT), 0);
	fputc('\n', f);
	json_decref(line);
}

static void results_read_back(const char *python, enum sqs_proto proto)
{
	size_t i, n = sizeof results / sizeof results[0], k = 0;
	struct scratch s;
	struct sqs_reply r;
	json_t *lines, *want[sizeof results / sizeof results[0]];
	FILE *f;

	scratch_make(&s);
	assert_non_null(f = fopen(s.in, "w"));
	for (i = 0; i < n; i++) {
		const char *reads = proto == SQS_QUERY ? results[i].query_reads : NULL;
		json_t *j = jq(results[i].result);

		if (reads && strcmp(reads, "-") == 0) {
			json_decref(j);
			continue;
		}
		if (sqs_wire_result(proto, results[i].action, j, "req-1", &r) != SD_OK)
			fail_msg("%s: %s", results[i].action, err_msg());
		answer_write(f, results[i].action, &r);
		sqs_reply_free(&r);
		want[k++] = reads ? (json_decref(j), jq(reads)) : j;
	}
	fclose(f);
	lines = run_script(&s, python, "parse", s.in);
	assert_int_equal(json_array_size(lines), k);
	for (i = 0; i < k; i++) {
		json_is(json_object_get(json_array_get(lines, i), "parsed"), want[i],
			json_string_value(json_object_get(json_array_get(lines, i), "action")));
		json_decref(want[i]);
	}
	json_decref(lines);
	scratch_drop(&s);
}

/* the errors and what each botocore makes of them: the exception's class
 * (the model's, or ClientError), Error.Code (the query code: a JSON client
 * takes it from x-amzn-query-error), the status and the fault */
static const struct {
	const char *code, *query_code, *class_query, *class_json;
	int status;
	const char *type;
} errors[] = {
	{ "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist",
	  "QueueDoesNotExist", 400, "Sender" },
	{ "QueueNameExists", "QueueAlreadyExists", "QueueNameExists", "QueueNameExists", 400,
	  "Sender" },
	{ "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid",
	  "ReceiptHandleIsInvalid", 400, "Sender" },
	{ "PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress",
	  "PurgeQueueInProgress", "PurgeQueueInProgress", 403, "Sender" },
	{ "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
	  "TooManyEntriesInBatchRequest", "TooManyEntriesInBatchRequest", 400, "Sender" },
	{ "InvalidAttributeName", "InvalidAttributeName", "InvalidAttributeName",
	  "InvalidAttributeName", 400, "Sender" },
	{ "InvalidAttributeValue", "InvalidAttributeValue", "ClientError", "InvalidAttributeValue",
	  400, "Sender" },
	{ "OverLimit", "OverLimit", "OverLimit", "OverLimit", 403, "Sender" },
	{ "MissingParameter", "MissingParameter", "ClientError", "ClientError", 400, "Sender" },
	{ "SignatureDoesNotMatch", "SignatureDoesNotMatch", "ClientError", "ClientError", 403,
	  "Sender" },
	{ "RequestEntityTooLarge", "RequestEntityTooLarge", "ClientError", "ClientError", 413,
	  "Sender" },
	{ "InternalFailure", "InternalFailure", "ClientError", "ClientError", 500, "Receiver" },
	{ "ServiceUnavailable", "ServiceUnavailable", "ClientError", "ClientError", 503,
	  "Receiver" },
	{ "NoSuchCode", "InternalFailure", "ClientError", "ClientError", 500, "Receiver" },
};

#define ERR_MESSAGE "no <queue> & \"such\" \xE2\x9C\x93"

static void errors_read_back(const char *python, enum sqs_proto proto)
{
	size_t i, n = sizeof errors / sizeof errors[0];
	struct scratch s;
	struct sqs_reply r;
	json_t *lines;
	FILE *f;

	scratch_make(&s);
	assert_non_null(f = fopen(s.in, "w"));
	for (i = 0; i < n; i++) {
		sqs_wire_error(proto, errors[i].code, ERR_MESSAGE, "req-7", &r);
		answer_write(f, "GetQueueUrl", &r);
		sqs_reply_free(&r);
	}
	fclose(f);
	lines = run_script(&s, python, "parse", s.in);
	assert_int_equal(json_array_size(lines), n);
	for (i = 0; i < n; i++) {
		json_t *l = json_array_get(lines, i), *e = json_object_get(l, "error");
		const char *cls = json_string_value(json_object_get(l, "class"));

		if (!cls || strcmp(cls, proto == SQS_QUERY ? errors[i].class_query :
				   errors[i].class_json) != 0)
			fail_msg("%s raised %s", errors[i].code, cls ? cls : "nothing");
		assert_string_equal(json_string_value(json_object_get(e, "Code")),
				    errors[i].query_code);
		assert_string_equal(json_string_value(json_object_get(e, "Message")), ERR_MESSAGE);
		assert_string_equal(json_string_value(json_object_get(e, "Type")), errors[i].type);
		assert_int_equal(json_integer_value(json_object_get(l, "status")), errors[i].status);
		/* JSON: the short name stays beside the query code */
		if (proto == SQS_JSON)
			assert_string_equal(json_string_value(json_object_get(e, "QueryErrorCode")),
					    strcmp(errors[i].code, "NoSuchCode") ? errors[i].code :
					    "InternalFailure");
	}
	json_decref(lines);
	scratch_drop(&s);
}

static void test_botocore_reads_query_answers(void **state)
{
	(void)state;
	need_botocore(DEBIAN_PY, "query");
	results_read_back(DEBIAN_PY, SQS_QUERY);
	errors_read_back(DEBIAN_PY, SQS_QUERY);
}

static void test_botocore_reads_json_answers(void **state)
{
	(void)state;
	need_botocore(PIP_PY, "json");
	results_read_back(PIP_PY, SQS_JSON);
	errors_read_back(PIP_PY, SQS_JSON);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_lists_and_maps),
		cmocka_unit_test(test_query_integers),
		cmocka_unit_test(test_query_refused),
		cmocka_unit_test(test_query_limits),
		cmocka_unit_test(test_query_index_limit),
		cmocka_unit_test(test_query_string_merged),
		cmocka_unit_test(test_protocol_detection),
		cmocka_unit_test(test_json_requests),
		cmocka_unit_test(test_unknown_action),
		cmocka_unit_test(test_result_rendering),
		cmocka_unit_test(test_result_refused),
		cmocka_unit_test(test_error_rendering),
		cmocka_unit_test(test_botocore_query_requests),
		cmocka_unit_test(test_botocore_json_requests),
		cmocka_unit_test(test_botocore_reads_query_answers),
		cmocka_unit_test(test_botocore_reads_json_answers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
