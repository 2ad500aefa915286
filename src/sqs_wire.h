/*
 * sqs_wire.h: the SQS listener's wire layer: a request's body read into an
 * action and its parameters, a result or an error written back, in either
 * of the two protocols Amazon SQS speaks.
 *
 *  - The query protocol (older SDKs: Debian 12's botocore 1.29, the AWS
 *    CLI v1 of that age): a form POST (or a GET) of Action=..&Version=
 *    2012-11-05, lists and maps flattened into numbered names
 *    (Attribute.1.Name=..&Attribute.1.Value=..), answered in XML.
 *  - The JSON 1.0 protocol (the SDKs since late 2023): a POST with the
 *    header X-Amz-Target: AmazonSQS.<Action> and a JSON object, answered in
 *    JSON; an error also carries x-amzn-query-error, the query protocol's
 *    code and fault, which the SDKs (awsQueryCompatible) report as the
 *    error's code, the JSON name choosing the exception's class.
 *
 * Parameters and results are always in the JSON 1.0 shape (jansson
 * objects): an action never sees which protocol carried it.  One table in
 * sqs_wire.c, read off botocore's SQS model (2012-11-05, query protocol),
 * gives each action's input and output members with their query and XML
 * names; one more table gives each error code its query code, HTTP status
 * and fault.
 *
 * Limits on a query request: SQS_WIRE_PARAMS_MAX name=value pairs (body and
 * URL query together), names of SQS_WIRE_KEY_MAX bytes, list and map
 * indexes 1..SQS_WIRE_INDEX_MAX numbered without a gap.  The body's own
 * length is the caller's to bound (RequestEntityTooLarge).
 */
#ifndef SD_SQS_WIRE_H
#define SD_SQS_WIRE_H

#include <stddef.h>

#include <jansson.h>

#include "result.h"

enum sqs_proto { SQS_QUERY, SQS_JSON };

#define SQS_ACTION_MAX 48		/* an action's name, bytes */
#define SQS_WIRE_PARAMS_MAX 1000	/* name=value pairs in one query request */
#define SQS_WIRE_KEY_MAX 256		/* a query parameter's name, bytes */
#define SQS_WIRE_INDEX_MAX 100		/* the N of Name.N */
#define SQS_API_VERSION "2012-11-05"
#define SQS_XMLNS "http://queue.amazonaws.com/doc/2012-11-05/"
#define SQS_TYPE_XML "text/xml"
#define SQS_TYPE_JSON "application/x-amz-json-1.0"

struct sqs_reply {
	int status;			/* HTTP status */
	char *body;			/* malloc'd; free with sqs_reply_free; NULL (len 0)
					 * only when an error's body could not be made */
	size_t len;
	const char *content_type;	/* SQS_TYPE_XML or SQS_TYPE_JSON */
	char query_error[160];		/* JSON protocol errors: the x-amzn-query-error
					 * header ("AWS.SimpleQueueService.NonExistentQueue;
					 * Sender"), else "" */
};

/*
 * sqs_wire_parse: a request read.  target is the X-Amz-Target header (NULL
 * if none), content_type the Content-Type (NULL if none), query the URL's
 * query string (NULL or "" if none), body[0..len) the body.
 *
 * The protocol, into *proto even when the request is refused: JSON when
 * there is a target or the Content-Type is SQS_TYPE_JSON, else query.
 * JSON: the target is "AmazonSQS.<Action>" and the body a JSON object ({}
 * when empty); the URL's query is not read.  Query: the body is
 * application/x-www-form-urlencoded (or empty), with Action= and,
 * optionally, Version=2012-11-05; pairs in the URL's query are taken too,
 * a name the body also has dropped.  Each pair of a known action is put
 * into the JSON shape by the model's names: lists and maps by index
 * (AttributeName.1 -> "AttributeNames": [..], Attribute.1.Name/Value ->
 * "Attributes": {..}, SendMessageBatchRequestEntry.1.Id -> "Entries":
 * [{"Id": ..}]), an empty list as botocore sends it (Entries=) as [], an
 * integer member as a JSON integer when it reads as one (else the string,
 * for the action to refuse), a BinaryValue as the base64 text sent.  An
 * action this module does not know (sqs_wire_known) gets its pairs as
 * they came, names to strings: the caller answers InvalidAction.
 *
 * On success the action's name into action, a new object into *params,
 * *code_out NULL.  SD_INVALID with the message set and *code_out the error
 * code to answer with: MissingAction, InvalidAction (a target or Action
 * that is not a name), NoSuchVersion, SerializationException (a JSON body
 * that is not an object), MalformedQueryString (not form encoding: a bad
 * %-escape, a NUL, an empty name, too many pairs, a name too long),
 * InvalidParameterValue (a value not UTF-8, a name given twice, an index
 * out of range, repeated or with a gap, a map's name repeated, a member the
 * action does not have, a Content-Type that is neither protocol's),
 * MissingParameter (a map entry without its Name or Value).  SD_NOMEM with
 * InternalFailure.
 */
enum sd_result sqs_wire_parse(const char *content_type, const char *target, const char *query,
			      const char *body, size_t len, enum sqs_proto *proto,
			      char action[SQS_ACTION_MAX + 1], json_t **params,
			      const char **code_out);

/* sqs_wire_known: 1 when action is one whose shapes this module has. */
int sqs_wire_known(const char *action);

/*
 * sqs_wire_result: a success rendered into *out (status 200).  result is
 * the action's output in the JSON 1.0 shape (NULL or {} for none).
 * Query: <ActionResponse xmlns=SQS_XMLNS><ActionResult>..</ActionResult>
 * <ResponseMetadata><RequestId>request_id</RequestId></ResponseMetadata>
 * </ActionResponse> by the model's output shape (flattened lists and maps
 * under their XML names, booleans as true and false, text escaped); an
 * action without output has no ActionResult.  JSON: the object itself.
 * Either way the result is checked against the output shape first:
 * SD_INVALID for a member the output does not have, a value of the wrong
 * kind, or text with a character XML cannot carry (SQS's characters are
 * #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD #x10000-#x10FFFF); SD_NOMEM.  On
 * failure *out holds nothing to free.
 */
enum sd_result sqs_wire_result(enum sqs_proto proto, const char *action, json_t *result,
			       const char *request_id, struct sqs_reply *out);

/*
 * sqs_wire_error: an error rendered into *out.  code is the JSON protocol's
 * short name: one the model has (QueueDoesNotExist, QueueNameExists,
 * ReceiptHandleIsInvalid, ...) or a common AWS one (MissingParameter,
 * InvalidParameterValue, AccessDenied, SignatureDoesNotMatch, ...); one
 * this module does not know renders as InternalFailure.  The status and
 * the fault come from the code.  Query: <ErrorResponse><Error><Type>Sender
 * </Type><Code>(the query code)</Code><Message>..</Message><Detail/>
 * </Error><RequestId>..</RequestId></ErrorResponse>.  JSON: {"__type":
 * "com.amazonaws.sqs#<code>", "message": ..} and query_error set.  A
 * message or request id that is not clean text is escaped (text_escape)
 * first.  Never fails; when memory runs out the body is NULL.
 */
void sqs_wire_error(enum sqs_proto proto, const char *code, const char *message,
		    const char *request_id, struct sqs_reply *out);

/*
 * sqs_wire_error_info: what the error table says of code (the short name):
 * its query code, HTTP status and 1 for a sender's fault.  0 when code is
 * not in the table (then the values are InternalFailure's).  Any pointer
 * may be NULL.
 */
int sqs_wire_error_info(const char *code, const char **query_code, int *status, int *sender);

/* sqs_reply_free: the body freed, the reply emptied; NULL is a no-op. */
void sqs_reply_free(struct sqs_reply *r);

#endif
