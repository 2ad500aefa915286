"""sqs_boto3.py CASE ENDPOINT [ARG]: one case of tests/test_sqs.c, driven by
Debian's python3-boto3 (botocore 1.29: the query protocol) against the box's
SQS listener at ENDPOINT, with the credentials in AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY.  Each case asserts what a client sees and prints
"ok CASE" last; a failed assertion exits non-zero with its traceback.
"""
import datetime
import sys
import threading
import time

import boto3
import botocore.auth
import botocore.config
from botocore.exceptions import ClientError

CASE, ENDPOINT = sys.argv[1], sys.argv[2]
ARG = sys.argv[3] if len(sys.argv) > 3 else ""


def client(config=None, **kw):
    base = botocore.config.Config(retries={"max_attempts": 1})
    return boto3.client("sqs", endpoint_url=ENDPOINT, region_name="eu-west-1",
                        config=base.merge(config) if config else base, **kw)


C = client()


def client_at(endpoint):
    return boto3.client("sqs", endpoint_url=endpoint, region_name="eu-west-1",
                        config=botocore.config.Config(retries={"max_attempts": 1}))


def code_of(fn, *a, **kw):
    """the error code a call raises (None when it succeeds)"""
    try:
        fn(*a, **kw)
    except ClientError as e:
        return e.response["Error"]["Code"]
    return None


def queue(name, **attrs):
    return C.create_queue(QueueName=name, Attributes={k: str(v) for k, v in attrs.items()})["QueueUrl"]


def counts(url):
    a = C.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return (int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"]),
            int(a["ApproximateNumberOfMessagesDelayed"]))


def lifecycle():
    url = queue("app-life", VisibilityTimeout=30)
    assert url.endswith("/000000000000/app-life"), url
    # CreateQueue again with the same attributes: the same queue
    assert queue("app-life", VisibilityTimeout=30) == url
    assert C.get_queue_url(QueueName="app-life")["QueueUrl"] == url
    assert url in C.list_queues(QueueNamePrefix="app-")["QueueUrls"]
    attrs = {"attribName1": {"DataType": "String", "StringValue": "attribValue 1"}}
    sent = C.send_message(QueueUrl=url, MessageBody="hello", MessageAttributes=attrs)
    assert sent["MD5OfMessageBody"] == "5d41402abc4b2a76b9719d911017c592", sent
    assert sent["MD5OfMessageAttributes"] == "19e27d4e946b072f3f58da80d94fd778", sent
    assert counts(url) == (1, 0, 0)
    got = C.receive_message(QueueUrl=url, AttributeNames=["All"], MessageAttributeNames=["All"])
    m = got["Messages"][0]
    assert m["MessageId"] == sent["MessageId"] and m["Body"] == "hello", m
    assert m["MessageAttributes"] == attrs, m
    assert m["Attributes"]["ApproximateReceiveCount"] == "1", m
    assert m["Attributes"]["SenderId"].startswith("SDBX"), m
    assert counts(url) == (0, 1, 0)
    C.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert counts(url) == (0, 0, 0)
    # a delayed message waits
    C.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=60)
    assert counts(url) == (0, 0, 1)
    assert "Messages" not in C.receive_message(QueueUrl=url)
    C.purge_queue(QueueUrl=url)
    assert counts(url) == (0, 0, 0)
    assert code_of(C.purge_queue, QueueUrl=url) == "AWS.SimpleQueueService.PurgeQueueInProgress"
    C.delete_queue(QueueUrl=url)
    try:
        C.get_queue_url(QueueName="app-life")
        raise AssertionError("a deleted queue is still there")
    except C.exceptions.QueueDoesNotExist:
        pass
    print(sent["MessageId"])


def batch():
    url = queue("app-batch")
    r = C.send_message_batch(QueueUrl=url, Entries=[
        {"Id": "m%d" % i, "MessageBody": "body %d" % i} for i in range(9)] + [
        {"Id": "bad", "MessageBody": "a\x01b"}])
    assert len(r["Successful"]) == 9, r
    assert [f["Id"] for f in r["Failed"]] == ["bad"] and r["Failed"][0]["SenderFault"], r
    assert r["Failed"][0]["Code"] == "InvalidMessageContents", r
    bodies, handles = [], []
    while len(bodies) < 9:
        got = C.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        assert got, "fewer than 9 messages came back"
        bodies += [m["Body"] for m in got]
        handles += [{"Id": "d%d" % len(handles + [0] * i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(got)]
    assert sorted(bodies) == ["body %d" % i for i in range(9)], bodies
    d = C.delete_message_batch(QueueUrl=url, Entries=handles + [
        {"Id": "junk", "ReceiptHandle": "not-a-handle"}])
    assert len(d["Successful"]) == 9 and d["Failed"][0]["Id"] == "junk", d
    assert d["Failed"][0]["Code"] == "ReceiptHandleIsInvalid", d
    assert counts(url) == (0, 0, 0)
    too_many = [{"Id": "e%d" % i, "MessageBody": "x"} for i in range(11)]
    try:
        C.send_message_batch(QueueUrl=url, Entries=too_many)
        raise AssertionError("11 entries taken")
    except C.exceptions.TooManyEntriesInBatchRequest:
        pass
    assert code_of(C.send_message_batch, QueueUrl=url, Entries=[
        {"Id": "same", "MessageBody": "x"}, {"Id": "same", "MessageBody": "y"}]) == \
        "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"
    assert counts(url) == (0, 0, 0), "a refused batch wrote something"


def longpoll():
    url = queue("app-poll")
    t0 = time.time()
    assert "Messages" not in C.receive_message(QueueUrl=url, WaitTimeSeconds=1)
    waited = time.time() - t0
    assert 0.9 < waited < 3, waited
    got = {}

    def receiver():
        got["r"] = client().receive_message(QueueUrl=url, WaitTimeSeconds=10)
        got["t"] = time.time()
    th = threading.Thread(target=receiver)
    th.start()
    time.sleep(0.5)
    t_send = time.time()
    C.send_message(QueueUrl=url, MessageBody="wake")
    th.join(15)
    assert got["r"]["Messages"][0]["Body"] == "wake", got
    # woken by the commit, not by the end of the wait
    assert got["t"] - t_send < 2, got["t"] - t_send
    print("latency_ms %.1f" % ((got["t"] - t_send) * 1000))


def visibility():
    url = queue("app-vis", VisibilityTimeout=30)
    C.send_message(QueueUrl=url, MessageBody="v")
    m = C.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])["Messages"][0]
    assert "Messages" not in C.receive_message(QueueUrl=url)
    C.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"],
                                VisibilityTimeout=0)
    m2 = C.receive_message(QueueUrl=url, AttributeNames=["All"])["Messages"][0]
    assert m2["MessageId"] == m["MessageId"], (m, m2)
    assert m2["Attributes"]["ApproximateReceiveCount"] == "2", m2
    r = C.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "a", "ReceiptHandle": m2["ReceiptHandle"], "VisibilityTimeout": 1}])
    assert [s["Id"] for s in r["Successful"]] == ["a"], r
    time.sleep(1.3)
    m3 = C.receive_message(QueueUrl=url)["Messages"][0]
    assert m3["MessageId"] == m["MessageId"]
    assert code_of(C.change_message_visibility, QueueUrl=url, ReceiptHandle=m3["ReceiptHandle"],
                   VisibilityTimeout=43201) == "InvalidParameterValue"


def stale():
    url = queue("app-stale")
    C.send_message(QueueUrl=url, MessageBody="s")
    old = C.receive_message(QueueUrl=url, VisibilityTimeout=1)["Messages"][0]
    time.sleep(1.3)
    new = C.receive_message(QueueUrl=url, VisibilityTimeout=30)["Messages"][0]
    assert new["MessageId"] == old["MessageId"]
    assert new["ReceiptHandle"] != old["ReceiptHandle"]
    # the first worker's handle no longer deletes the second's delivery
    try:
        C.delete_message(QueueUrl=url, ReceiptHandle=old["ReceiptHandle"])
        raise AssertionError("a stale receipt handle deleted the message")
    except C.exceptions.ReceiptHandleIsInvalid:
        pass
    assert counts(url) == (0, 1, 0)
    C.delete_message(QueueUrl=url, ReceiptHandle=new["ReceiptHandle"])
    C.delete_message(QueueUrl=url, ReceiptHandle=new["ReceiptHandle"])   # again: fine, as SQS
    assert counts(url) == (0, 0, 0)
    print(new["MessageId"])


def redrive():
    dlq = queue("app-dead")
    arn = C.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = queue("app-work", RedrivePolicy='{"maxReceiveCount":"2","deadLetterTargetArn":"%s"}' % arn)
    C.send_message(QueueUrl=url, MessageBody="poison")
    for _ in range(2):
        assert C.receive_message(QueueUrl=url, VisibilityTimeout=1)["Messages"][0]["Body"] == "poison"
        time.sleep(1.2)
    assert "Messages" not in C.receive_message(QueueUrl=url), "delivered past maxReceiveCount"
    m = C.receive_message(QueueUrl=dlq, AttributeNames=["All"])["Messages"][0]
    assert m["Body"] == "poison" and m["Attributes"]["ApproximateReceiveCount"] == "1", m
    assert code_of(C.set_queue_attributes, QueueUrl=url, Attributes={
        "RedrivePolicy": '{"maxReceiveCount":"2","deadLetterTargetArn":"arn:aws:sqs:x:1:nope"}'}) \
        == "InvalidParameterValue"


def fifo():
    url = queue("app-order.fifo", FifoQueue="true")
    a = C.send_message(QueueUrl=url, MessageBody="a1", MessageGroupId="A", MessageDeduplicationId="d1")
    again = C.send_message(QueueUrl=url, MessageBody="a1", MessageGroupId="A",
                           MessageDeduplicationId="d1")
    assert again["MessageId"] == a["MessageId"], (a, again)
    C.send_message(QueueUrl=url, MessageBody="a2", MessageGroupId="A", MessageDeduplicationId="d2")
    C.send_message(QueueUrl=url, MessageBody="b1", MessageGroupId="B", MessageDeduplicationId="d3")
    assert counts(url)[0] == 3, counts(url)
    got = C.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert sorted(m["Body"] for m in got) == ["a1", "b1"], got   # one in flight per group
    assert {m["Attributes"]["MessageGroupId"] for m in got} == {"A", "B"}
    assert "Messages" not in C.receive_message(QueueUrl=url)
    for m in got:
        if m["Body"] == "a1":
            C.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    nxt = C.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["Body"] for m in nxt] == ["a2"], nxt
    assert code_of(C.send_message, QueueUrl=url, MessageBody="x") == "MissingParameter"
    assert code_of(C.send_message, QueueUrl=url, MessageBody="x", MessageGroupId="A") == \
        "InvalidParameterValue"   # no dedup id, no content-based deduplication
    cb = queue("app-cb.fifo", FifoQueue="true", ContentBasedDeduplication="true")
    x = C.send_message(QueueUrl=cb, MessageBody="same", MessageGroupId="g")
    y = C.send_message(QueueUrl=cb, MessageBody="same", MessageGroupId="g")
    assert x["MessageId"] == y["MessageId"] and counts(cb)[0] == 1


def scheduled():
    """ARG "create": the queue; else the messages a schedule sent it, one
    per period, the payload as body and the period in stagedoor.period"""
    if ARG == "create":
        queue("app-sched")
        return
    url = C.get_queue_url(QueueName="app-sched")["QueueUrl"]
    periods = set()
    for _ in range(20):
        got = C.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=2,
                                MessageAttributeNames=["All"]).get("Messages", [])
        for m in got:   # boto3 checks MD5OfBody and MD5OfMessageAttributes
            assert m["Body"] == '{"n":1}', m
            p = m["MessageAttributes"]["stagedoor.period"]
            assert p["DataType"] == "String" and p["StringValue"].startswith("schedule:ping:"), m
            assert p["StringValue"] not in periods, (p, periods)
            periods.add(p["StringValue"])
            C.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        if len(periods) >= 2:
            break
    assert len(periods) >= 2, periods
    starts = sorted(int(p.rsplit(":", 1)[1]) for p in periods)
    assert all(s % 1000 == 0 for s in starts) and starts[1] - starts[0] >= 1000, starts
    print(len(periods))


def errors():
    url = queue("app-err")
    assert code_of(C.create_queue, QueueName="app-err", Attributes={"VisibilityTimeout": "7"}) == \
        "QueueAlreadyExists"
    assert code_of(C.create_queue, QueueName="bad name") == "InvalidParameterValue"
    assert code_of(C.create_queue, QueueName="app-x", Attributes={"Nope": "1"}) == \
        "InvalidAttributeName"
    assert code_of(C.set_queue_attributes, QueueUrl=url,
                   Attributes={"VisibilityTimeout": "43201"}) == "InvalidAttributeValue"
    assert code_of(C.send_message, QueueUrl=url, MessageBody="x" * (256 * 1024 + 1)) == \
        "InvalidParameterValue"
    assert code_of(C.receive_message, QueueUrl=url, MaxNumberOfMessages=11) == \
        "InvalidParameterValue"
    assert code_of(C.receive_message, QueueUrl=url, WaitTimeSeconds=21) == "InvalidParameterValue"
    assert code_of(C.delete_message, QueueUrl=url, ReceiptHandle="sd1-999-1-1") == \
        "ReceiptHandleIsInvalid"
    assert code_of(C.get_queue_attributes, QueueUrl=url, AttributeNames=["Bogus"]) == \
        "InvalidAttributeName"


def denied():
    """ARG: what this token must be refused: a queue name (AccessDenied) or
    'any' (every call: InvalidClientTokenId)"""
    if ARG == "any":
        assert code_of(C.list_queues) == "InvalidClientTokenId"
        return
    assert code_of(C.get_queue_url, QueueName=ARG) == "AccessDenied"
    assert code_of(C.create_queue, QueueName=ARG) == "AccessDenied"
    assert ENDPOINT + "/000000000000/" + ARG not in C.list_queues().get("QueueUrls", [])


def waiters():
    """200 receives wait at once on 8 server threads: another call is still
    answered at once, and 200 sends wake 200 receivers"""
    url = queue("app-many")
    n, got, ready = 200, [], threading.Barrier(201)

    def receiver():
        c = client(config=botocore.config.Config(max_pool_connections=1))
        ready.wait()
        r = c.receive_message(QueueUrl=url, WaitTimeSeconds=15)
        got.append(len(r.get("Messages", [])))
    ths = [threading.Thread(target=receiver) for _ in range(n)]
    for t in ths:
        t.start()
    ready.wait()
    time.sleep(1.5)     # all parked by now
    t0 = time.time()
    C.list_queues()
    assert time.time() - t0 < 1, "a call waited behind the parked receives"
    assert counts(url) == (0, 0, 0)
    for i in range(0, n, 10):
        C.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "m%d" % j, "MessageBody": "w"} for j in range(i, i + 10)])
    t1 = time.time()
    for t in ths:
        t.join(20)
    assert sum(got) == n and len(got) == n, got
    print("woke_all_s %.2f" % (time.time() - t1))


def two_boxes():
    """ENDPOINT is box A's listener, ARG box B's, on one PostgreSQL database:
    a receive waiting on B is woken by a send through A (LISTEN/NOTIFY), and
    a message received on B is deleted through A"""
    b = client_at(ARG)
    url = queue("app-shared")
    url_b = b.get_queue_url(QueueName="app-shared")["QueueUrl"]
    got = {}

    def receiver():
        got["r"] = b.receive_message(QueueUrl=url_b, WaitTimeSeconds=10)
        got["t"] = time.time()
    th = threading.Thread(target=receiver)
    th.start()
    time.sleep(1)
    t_send = time.time()
    sent = C.send_message(QueueUrl=url, MessageBody="across")
    th.join(15)
    m = got["r"]["Messages"][0]
    assert m["MessageId"] == sent["MessageId"], (m, sent)
    assert got["t"] - t_send < 2, got["t"] - t_send
    C.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert counts(url) == (0, 0, 0)
    print("latency_ms %.1f" % ((got["t"] - t_send) * 1000))


def overlimit():
    """the box holds its most queues (the test made them): a new one is
    refused, one that exists is still answered"""
    assert code_of(C.create_queue, QueueName="app-one-more") == "OverLimit"
    assert C.create_queue(QueueName="app-full-7")["QueueUrl"].endswith("/app-full-7")


def hello():
    """one call this token may make"""
    assert "ResponseMetadata" in C.list_queues()


def auth():
    """wrong secret, a date 20 minutes off, no signature at all"""
    import os
    bad = client(aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
                 aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"][:-1] + "x")
    assert code_of(bad.list_queues) == "SignatureDoesNotMatch"
    unknown = client(aws_access_key_id="SDBX0000000000000000", aws_secret_access_key="x" * 40)
    assert code_of(unknown.list_queues) == "InvalidClientTokenId"
    real = datetime.datetime

    class Late(real):
        @classmethod
        def utcnow(cls):
            return real.utcnow() - datetime.timedelta(minutes=20)
    botocore.auth.datetime.datetime = Late
    try:
        assert code_of(C.list_queues) == "SignatureDoesNotMatch"
    finally:
        botocore.auth.datetime.datetime = real
    anon = client(config=botocore.config.Config(signature_version=botocore.UNSIGNED))
    assert code_of(anon.list_queues) == "MissingAuthenticationToken"
    assert C.list_queues() is not None


CASES = {f.__name__: f for f in (lifecycle, batch, longpoll, visibility, stale, redrive, fifo, scheduled,
                                  errors, denied, waiters, two_boxes, overlimit, hello, auth)}
CASES[CASE]()
print("ok", CASE)
