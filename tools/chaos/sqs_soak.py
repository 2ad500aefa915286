"""sqs_soak.py ROLE ...: the crash soak's external workers (tools/chaos/sqsrun.c),
with Debian's python3-boto3 against the box's SQS listener.

  sqs_soak.py produce ENDPOINTS N      send tasks 1..N to the queue "soak", each
                                       until one send of it was answered (a send
                                       whose answer a kill took is sent again:
                                       the queue may hold a task twice)
  sqs_soak.py work ENDPOINTS DB        receive, do each task's effect once, delete;
                                       forever (the harness kills and restarts it)
  sqs_soak.py verify DB N              the verdict on the workers' own database

ENDPOINTS is a comma-separated list of listeners (one per box); a worker
moves to the next one when a call fails, as a box it talks to may be dead.
The credentials are in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.

The effect of task T is a row appended to effect_log, a table with no key
that takes a second row as readily as the first: what a side effect does.
It is guarded, in the same transaction, by technique 2 (a unique row per
task in done_tasks: a second message of the same task, or a second
delivery, finds it) and technique 4 (the MessageId recorded in the effect's
transaction: processed(message_id)).  The verdict counts effect_log's rows:
one per task, or the guard failed.  Every delivery is also logged
(deliveries), so the verdict can tell how often the kills made a message
come back.
"""
import json
import os
import random
import sqlite3
import sys
import time

import boto3
import botocore.config
from botocore.exceptions import BotoCoreError, ClientError

QUEUE = "soak"
VISIBILITY = 2


def clients(endpoints):
    cfg = botocore.config.Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=30)
    return [boto3.client("sqs", endpoint_url=e, region_name="eu-west-1", config=cfg)
            for e in endpoints.split(",")]


class Box:
    """the listeners; a call that fails moves on to the next, after a pause"""

    def __init__(self, endpoints):
        self.cs, self.i, self.url = clients(endpoints), 0, None

    def call(self, name, **kw):
        while True:
            c = self.cs[self.i % len(self.cs)]
            try:
                if self.url is None:
                    self.url = c.create_queue(QueueName=QUEUE,
                                              Attributes={"VisibilityTimeout": str(VISIBILITY)}
                                              )["QueueUrl"]
                return getattr(c, name)(QueueUrl=self.url, **kw)
            except (BotoCoreError, ClientError) as e:
                # a connection the box's death closed carries no response
                code = (getattr(e, "response", None) or {}).get("Error", {}).get("Code", "")
                if code == "ReceiptHandleIsInvalid":
                    raise
                self.i += 1
                time.sleep(0.2)


def produce(endpoints, n):
    box = Box(endpoints)
    for task in range(1, n + 1):
        box.call("send_message", MessageBody=json.dumps({"task": task}))
    print("sent", n)


def open_db(path):
    db = sqlite3.connect(path, isolation_level=None, timeout=60)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript("""
        CREATE TABLE IF NOT EXISTS done_tasks (task INTEGER PRIMARY KEY);
        CREATE TABLE IF NOT EXISTS effect_log (task INTEGER NOT NULL, message_id TEXT NOT NULL,
            at REAL NOT NULL);
        CREATE TABLE IF NOT EXISTS processed (message_id TEXT PRIMARY KEY);
        CREATE TABLE IF NOT EXISTS deliveries (message_id TEXT NOT NULL, receive_count INTEGER,
            pid INTEGER, at REAL);""")
    return db


def effect(db, msg):
    """the task's effect, once: the task's row and the MessageId in one commit"""
    task = json.loads(msg["Body"])["task"]
    mid = msg["MessageId"]
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO deliveries VALUES (?, ?, ?, ?)",
               (mid, int(msg["Attributes"]["ApproximateReceiveCount"]), os.getpid(), time.time()))
    if db.execute("INSERT INTO processed (message_id) VALUES (?) ON CONFLICT DO NOTHING "
                  "RETURNING message_id", (mid,)).fetchone() and \
            db.execute("INSERT INTO done_tasks (task) VALUES (?) ON CONFLICT DO NOTHING "
                       "RETURNING task", (task,)).fetchone():
        db.execute("INSERT INTO effect_log (task, message_id, at) VALUES (?, ?, ?)",
                   (task, mid, time.time()))
    db.execute("COMMIT")


def work(endpoints, path):
    box, db = Box(endpoints), open_db(path)
    while True:
        got = box.call("receive_message", MaxNumberOfMessages=5, WaitTimeSeconds=2,
                       AttributeNames=["ApproximateReceiveCount"])
        for m in got.get("Messages", []):
            time.sleep(random.uniform(0.02, 0.1))     # the work before the effect
            effect(db, m)
            time.sleep(random.uniform(0, 0.05))       # a kill here: done, not deleted
            try:
                box.call("delete_message", ReceiptHandle=m["ReceiptHandle"])
            except ClientError:
                pass    # taken over since: its new holder deletes it


def verify(path, n):
    db = open_db(path)
    tasks = db.execute("SELECT count(*), count(DISTINCT task), min(task), max(task) "
                       "FROM effect_log").fetchone()
    deliveries, messages = db.execute("SELECT count(*), count(DISTINCT message_id) "
                                      "FROM deliveries").fetchone()
    redelivered = db.execute("SELECT count(*) FROM (SELECT message_id FROM deliveries "
                             "GROUP BY message_id HAVING count(*) > 1)").fetchone()[0]
    received_again = db.execute("SELECT count(*) FROM deliveries WHERE receive_count > 1"
                                ).fetchone()[0]
    lost = n - tasks[1]
    print("sqs.tasks", n)
    print("sqs.effects", tasks[0])
    print("sqs.messages_received", messages)
    print("sqs.deliveries", deliveries)
    print("sqs.messages_redelivered", redelivered)
    print("sqs.handled_after_a_reclaim", received_again)
    print("sqs.duplicate_effects", tasks[0] - tasks[1])
    print("sqs.lost", lost)
    ok = lost == 0 and tasks[0] == tasks[1] == n and tasks[2] == 1 and tasks[3] == n
    print("sqs.result", "ok" if ok else "broken")
    return 0 if ok else 1


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "produce":
        produce(sys.argv[2], int(sys.argv[3]))
    elif role == "work":
        work(sys.argv[2], sys.argv[3])
    elif role == "verify":
        sys.exit(verify(sys.argv[2], int(sys.argv[3])))
    else:
        sys.exit(__doc__)
