#!/usr/bin/python3
"""sqs_wire_parse.py MODE [FILE]: botocore's own SQS client as the judge of
the box's wire layer (test_sqs_wire).  Whichever protocol the interpreter's
botocore speaks for SQS: Debian's botocore 1.29 (/usr/bin/python3) the
query protocol, a botocore from 1.32 on (python3 from pip) JSON 1.0 with
awsQueryCompatible.

  serialize   the requests of CASES as the client sends them, one JSON
              object a line: action, params (bytes as base64), content_type,
              target, body.
  parse FILE  each line of FILE an answer of the box: {"action", "status",
              "headers", "body"}; one line out for each: a success read by
              the protocol's ResponseParser with the action's output shape
              ({"parsed": ..}, blobs back to base64, no ResponseMetadata), an
              error raised by a real client call ({"class": the exception's
              class, "error": its Error, "status": ..}).
  protocol    the protocol of the model and whether it is awsQueryCompatible.
"""
import base64
import json
import sys

import botocore
import botocore.session
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.parsers import create_parser

URL = "http://127.0.0.1:9324/000000000000/jobs"
ATTRS = {
    "color": {"DataType": "String", "StringValue": "caf\u00e9 & <tea>"},
    "size": {"DataType": "Number.int", "StringValue": "-12.5e3"},
    "raw": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe\xff"},
}
BODY = "caf\u00e9 & <tea> \"q\" 100%+\r\nend \u2713 \U0001F600 a=b&c"


def cases(model):
    receive = {"QueueUrl": URL, "AttributeNames": ["All", "SentTimestamp"],
               "MessageAttributeNames": ["color", "size.*"], "MaxNumberOfMessages": 10,
               "VisibilityTimeout": 30, "WaitTimeSeconds": 20,
               "ReceiveRequestAttemptId": "try-1"}
    if "MessageSystemAttributeNames" in model.operation_model(
            "ReceiveMessage").input_shape.members:
        receive["MessageSystemAttributeNames"] = ["SenderId", "AWSTraceHeader"]
    return [
        ("SendMessage", {"QueueUrl": URL, "MessageBody": BODY, "DelaySeconds": 5,
                         "MessageAttributes": ATTRS,
                         "MessageSystemAttributes": {"AWSTraceHeader": {
                             "DataType": "String", "StringValue": "Root=1-5e1b4151"}},
                         "MessageDeduplicationId": "d1", "MessageGroupId": "g1"}),
        ("SendMessageBatch", {"QueueUrl": URL, "Entries": [
            {"Id": "a", "MessageBody": "one", "DelaySeconds": 0, "MessageAttributes": ATTRS},
            {"Id": "b", "MessageBody": BODY},
            {"Id": "c", "MessageBody": "three", "MessageGroupId": "g",
             "MessageAttributes": {"x": {"DataType": "String", "StringValue": "y",
                                         "StringListValues": []}}},
        ]}),
        ("SendMessageBatch", {"QueueUrl": URL, "Entries": []}),
        ("DeleteMessageBatch", {"QueueUrl": URL, "Entries": [
            {"Id": "a", "ReceiptHandle": "rh+1/="}, {"Id": "b", "ReceiptHandle": "rh2"}]}),
        ("ChangeMessageVisibilityBatch", {"QueueUrl": URL, "Entries": [
            {"Id": "a", "ReceiptHandle": "rh1", "VisibilityTimeout": 0},
            {"Id": "b", "ReceiptHandle": "rh2", "VisibilityTimeout": 43200}]}),
        ("ReceiveMessage", receive),
        ("CreateQueue", {"QueueName": "jobs.fifo",
                         "Attributes": {"FifoQueue": "true", "VisibilityTimeout": "30",
                                        "RedrivePolicy": '{"maxReceiveCount":"5"}'},
                         "tags": {"team": "box office", "env": "prod"}}),
        ("SetQueueAttributes", {"QueueUrl": URL, "Attributes": {"DelaySeconds": "10"}}),
        ("GetQueueAttributes", {"QueueUrl": URL, "AttributeNames": ["All"]}),
        ("GetQueueAttributes", {"QueueUrl": URL, "AttributeNames": []}),
        ("GetQueueUrl", {"QueueName": "jobs", "QueueOwnerAWSAccountId": "000000000000"}),
        ("ListQueues", {"QueueNamePrefix": "jo", "MaxResults": 100, "NextToken": "t=1"}),
        ("ListQueues", {}),
        ("ListDeadLetterSourceQueues", {"QueueUrl": URL, "MaxResults": 1}),
        ("TagQueue", {"QueueUrl": URL, "Tags": {"a": "1", "b": ""}}),
        ("UntagQueue", {"QueueUrl": URL, "TagKeys": ["a", "b"]}),
        ("ListQueueTags", {"QueueUrl": URL}),
        ("AddPermission", {"QueueUrl": URL, "Label": "l", "AWSAccountIds": ["1", "2"],
                           "Actions": ["SendMessage", "ReceiveMessage"]}),
        ("RemovePermission", {"QueueUrl": URL, "Label": "l"}),
        ("DeleteMessage", {"QueueUrl": URL, "ReceiptHandle": "rh"}),
        ("ChangeMessageVisibility", {"QueueUrl": URL, "ReceiptHandle": "rh",
                                     "VisibilityTimeout": 60}),
        ("PurgeQueue", {"QueueUrl": URL}),
        ("DeleteQueue", {"QueueUrl": URL}),
    ]


def plain(v):
    """v with bytes as base64 text, as the JSON 1.0 shape carries a blob"""
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def text(v):
    """a header's value (botocore keeps some as bytes), None when absent"""
    return v.decode() if isinstance(v, bytes) else v


class Raw:
    def __init__(self, body):
        self.body = body

    def stream(self, *args, **kwargs):
        yield self.body


class Captured(Exception):
    pass


def client():
    session = botocore.session.get_session()
    return session.create_client(
        "sqs", region_name="us-east-1", endpoint_url="http://127.0.0.1:9324",
        aws_access_key_id="AKID", aws_secret_access_key="secret",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}))


def serialize():
    c = client()

    def capture(request, **kwargs):
        raise Captured(request)

    c.meta.events.register("before-send.sqs", capture)
    for action, params in cases(c.meta.service_model):
        try:
            getattr(c, botocore.xform_name(action))(**params)
        except Captured as e:
            rq = e.args[0]
            body = rq.body or b""
            if isinstance(body, str):
                body = body.encode()
            print(json.dumps({"action": action, "params": plain(params),
                              "content_type": text(rq.headers.get("Content-Type")),
                              "target": text(rq.headers.get("X-Amz-Target")),
                              "body": body.decode()}))


def parse_one(c, answer):
    headers = answer["headers"]
    body = answer["body"].encode()
    if answer["status"] < 300:
        model = c.meta.service_model
        parser = create_parser(model.metadata["protocol"])
        shape = model.operation_model(answer["action"]).output_shape
        parsed = parser.parse({"status_code": answer["status"], "headers": headers,
                               "body": body}, shape)
        parsed.pop("ResponseMetadata", None)
        return {"parsed": plain(parsed)}

    def respond(request, **kwargs):
        return AWSResponse(request.url, answer["status"], headers, Raw(body))

    c.meta.events.register("before-send.sqs.GetQueueUrl", respond, unique_id="box")
    try:
        c.get_queue_url(QueueName="jobs")
    except ClientError as e:
        return {"class": type(e).__name__, "error": e.response["Error"],
                "status": e.response["ResponseMetadata"]["HTTPStatusCode"]}
    finally:
        c.meta.events.unregister("before-send.sqs.GetQueueUrl", unique_id="box")
    return {"class": None}


def main():
    mode = sys.argv[1]
    if mode == "serialize":
        serialize()
    elif mode == "parse":
        c = client()
        with open(sys.argv[2], encoding="utf-8") as f:
            for line in f:
                print(json.dumps(parse_one(c, json.loads(line))))
    elif mode == "protocol":
        m = client().meta.service_model
        print(json.dumps({"protocol": m.metadata["protocol"], "version": botocore.__version__,
                          "query_compatible": "awsQueryCompatible" in m.metadata}))
    else:
        sys.exit("usage: sqs_wire_parse.py serialize | parse FILE | protocol")


main()
