#!/usr/bin/python3
"""sigv4_sign.py KEY_ID SECRET: requests signed by botocore's own SigV4Auth,
one JSON object a line (method, url, headers, body in base64), for
test_sigv4 to verify: the SDK's signer is the reference the box must agree
with.  Debian's botocore (python3-botocore), whichever protocol it speaks."""
import base64
import json
import sys

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

key_id, secret = sys.argv[1], sys.argv[2]
creds = Credentials(key_id, secret)
cases = [
    # the query protocol: a form POST to the endpoint (boto3 1.26)
    ("POST", "http://127.0.0.1:9324/", {"Content-Type":
     "application/x-www-form-urlencoded; charset=utf-8"},
     b"Action=SendMessage&Version=2012-11-05&QueueUrl=http%3A%2F%2F127.0.0.1%3A9324%2F"
     b"000000000000%2Fjobs&MessageBody=caf%C3%A9+%26+%22tea%22%0D%0A"),
    # the JSON protocol: a POST to the queue's URL with X-Amz-Target
    ("POST", "http://localhost:9324/000000000000/jobs.fifo",
     {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.ReceiveMessage"},
     json.dumps({"QueueUrl": "http://localhost:9324/000000000000/jobs.fifo",
                 "MaxNumberOfMessages": 10, "WaitTimeSeconds": 20}).encode()),
    # a GET with a query string in no particular order, escapes and all
    ("GET", "http://127.0.0.1:9324/?Version=2012-11-05&Action=ListQueues&"
     "QueueNamePrefix=a%20b%2Bc&Empty=", {}, b""),
    # an empty body, a path with a character to escape
    ("POST", "http://127.0.0.1/queue%20one", {"Content-Type": "text/plain"}, b""),
]
for method, url, headers, body in cases:
    req = AWSRequest(method=method, url=url, headers=headers, data=body)
    SigV4Auth(creds, "sqs", "eu-central-1").add_auth(req)
    prepared = req.prepare()
    print(json.dumps({
        "method": method,
        "url": prepared.url,
        "headers": {k: v for k, v in prepared.headers.items()},
        "body": base64.b64encode(body).decode(),
    }))
