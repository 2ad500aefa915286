"""sqs_clients.py --endpoint URL --queue-url URL --messages N --clients C [--sdk DIR]

The reference rate of `stagedoor-bench sqs` (src/bench/bench_sqs.c) for
Debian's python3-boto3 (botocore 1.29: the query protocol, answers in XML):
the benchmark's batched lifecycle, the same as its native client's, against
the same listener with the same worker token.  C threads share one boto3
client (its connection pool holds C connections); each sends its share of
the N messages with SendMessageBatch of 10, then ReceiveMessage (up to 10)
and DeleteMessageBatch of what came, in turn, until its share is sent and
the queue had nothing for it.

The credentials come from BENCH_SQS_KEY_ID and BENCH_SQS_SECRET (names of
the benchmark's own, so an AWS_* setting of the caller's is not taken by
mistake).  The clock runs from the first request to the last answer; the
client is made, and one call made, before it.  Every message must be
received once and deleted once, every batch answered without a failed
entry; else the exit status is 1 with the reason.  Prints one JSON line:
{"client", "version", "protocol", "messages", "clients", "seconds",
"cpu_seconds" (this process's, over the same span), "msgs_per_s"}; without
boto3, {"skipped": why} and exit 0.  --sdk is taken
and ignored (the JavaScript client's folder).
"""
import argparse
import json
import os
import sys
import threading
import time

try:
    import boto3
    import botocore
    import botocore.config
except ImportError as e:  # the benchmark says so and goes on
    print(json.dumps({"client": "boto3", "skipped": "boto3 is not installed (%s): "
                      "apt-get install python3-boto3" % e}))
    sys.exit(0)

PAD = "0123456789abcdef" * 4


def body(i):
    return "bench-%08d-%s" % (i, PAD)


def number(b):
    return int(b.split("-")[1])


class Run:
    def __init__(self, sqs, url, n, clients):
        self.sqs, self.url, self.n, self.clients = sqs, url, n, clients
        self.got = [0] * n
        self.gone = [0] * n
        self.lock = threading.Lock()
        self.error = None

    def fail(self, why):
        with self.lock:
            if self.error is None:
                self.error = why

    def take(self):
        """one receive and the delete of what came: how many"""
        ms = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10,
                                      WaitTimeSeconds=0).get("Messages", [])
        if not ms:
            return 0
        nums = [number(m["Body"]) for m in ms]
        with self.lock:
            for i in nums:
                self.got[i] += 1
        r = self.sqs.delete_message_batch(QueueUrl=self.url, Entries=[
            {"Id": "d%d" % j, "ReceiptHandle": m["ReceiptHandle"]} for j, m in enumerate(ms)])
        if r.get("Failed") or len(r.get("Successful", [])) != len(ms):
            raise RuntimeError("DeleteMessageBatch answered %r" % r)
        with self.lock:
            for i in nums:
                self.gone[i] += 1
        return len(ms)

    def client(self, idx):
        nxt, end = self.n * idx // self.clients, self.n * (idx + 1) // self.clients
        try:
            while self.error is None:
                k = min(10, end - nxt)
                if k > 0:
                    r = self.sqs.send_message_batch(QueueUrl=self.url, Entries=[
                        {"Id": "e%d" % j, "MessageBody": body(nxt + j)} for j in range(k)])
                    if r.get("Failed") or len(r.get("Successful", [])) != k:
                        raise RuntimeError("SendMessageBatch answered %r" % r)
                    nxt += k
                if self.take() == 0 and nxt >= end:
                    return
        except Exception as e:  # noqa: BLE001 - any failure fails the run
            self.fail("client %d: %r" % (idx, e))

    def check(self):
        if self.error:
            return self.error
        for i in range(self.n):
            if self.got[i] != 1 or self.gone[i] != 1:
                return "message %d was received %d times and deleted %d times" % (
                    i, self.got[i], self.gone[i])
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--queue-url", required=True)
    ap.add_argument("--messages", type=int, required=True)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--sdk", default="")
    a = ap.parse_args()
    cfg = botocore.config.Config(retries={"max_attempts": 1},
                                 max_pool_connections=max(10, a.clients))
    sqs = boto3.client("sqs", endpoint_url=a.endpoint, region_name="eu-west-1", config=cfg,
                       aws_access_key_id=os.environ["BENCH_SQS_KEY_ID"],
                       aws_secret_access_key=os.environ["BENCH_SQS_SECRET"])
    sqs.get_queue_attributes(QueueUrl=a.queue_url, AttributeNames=["QueueArn"])
    run = Run(sqs, a.queue_url, a.messages, a.clients)
    threads = [threading.Thread(target=run.client, args=(i,)) for i in range(a.clients)]
    t0, cpu0 = time.monotonic(), time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds, cpu = time.monotonic() - t0, time.process_time() - cpu0
    why = run.check()
    if why:
        print("sqs_clients.py: boto3: %s" % why, file=sys.stderr)
        sys.exit(1)
    print(json.dumps({"client": "boto3", "version": "%s (botocore %s)" % (
        boto3.__version__, botocore.__version__), "protocol": "query",
        "messages": a.messages, "clients": a.clients, "seconds": round(seconds, 6),
        "cpu_seconds": round(cpu, 6), "msgs_per_s": round(a.messages / seconds, 1)}))


if __name__ == "__main__":
    main()
