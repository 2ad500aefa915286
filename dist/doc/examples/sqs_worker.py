"""An SQS worker for Stagedoor Box whose effects happen once, however often
its message is delivered (queues.md, "Handlers outside the box").

The message {"order": "A-1001", "amount": 2500} means: charge the order's
card and count the sale.  The worker keeps its own SQLite database
(WORKER_DB, default ./worker.db) and charges through a stand-in for a
payment provider that honours idempotency keys as Stripe does
(PROVIDER_DB, default ./provider.db).  It applies the four techniques:

  1. check state first: an order already paid is not charged again, and
     the order is marked paid by a conditional update only one run wins;
  2. a unique row for the effect: charges(order_id) is claimed in one
     statement, and a claim left by a dead worker is taken over once stale;
  3. an idempotency key for the provider, from the message's intent: the
     MessageId, the same on every delivery, never one per attempt;
  4. the MessageId recorded in the transaction of the effect: the sale is
     counted in the same commit that records the message as processed.

With --naive it does none of that, and a second delivery charges and
counts twice.

    sqs_worker.py setup ORDER AMOUNT     make the queue "charges", the order, send its message
    sqs_worker.py work [--naive] [--crash-after charge|commit] [--visibility S]
                                         receive one message and handle it
    sqs_worker.py report                 charges at the provider, sales counted

AWS_ENDPOINT_URL (the box's sqs_listen), AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (from `stagedoor token add --role worker --sqs`) say
where and who.
"""
import json
import os
import sqlite3
import sys
import time
import uuid

import boto3

QUEUE = "charges"
STALE_CLAIM_S = float(os.environ.get("STALE_CLAIM_S", "60"))   # a claim this old was left by a dead run


def sqs():
    return boto3.client("sqs", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                        region_name=os.environ.get("AWS_REGION", "eu-west-1"))


def db(path, schema):
    c = sqlite3.connect(path, isolation_level=None, timeout=30)
    c.execute("PRAGMA journal_mode=WAL")
    c.executescript(schema)
    return c


def worker_db():
    return db(os.environ.get("WORKER_DB", "worker.db"), """
        CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL,
            state TEXT NOT NULL CHECK (state IN ('new', 'paid')));
        CREATE TABLE IF NOT EXISTS charges (order_id TEXT PRIMARY KEY, provider_key TEXT,
            claimed_at REAL NOT NULL, done_at REAL);
        CREATE TABLE IF NOT EXISTS processed (message_id TEXT PRIMARY KEY);
        CREATE TABLE IF NOT EXISTS sales (id INTEGER PRIMARY KEY CHECK (id = 1),
            total INTEGER NOT NULL);
        INSERT OR IGNORE INTO sales VALUES (1, 0);""")


class Provider:
    """A payment provider's stand-in: a charge per idempotency key, as Stripe
    keeps them (a key seen before answers the first charge, charging nothing)."""

    def __init__(self):
        self.c = db(os.environ.get("PROVIDER_DB", "provider.db"), """
            CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY,
                idempotency_key TEXT NOT NULL UNIQUE, order_id TEXT, amount INTEGER);""")

    def charge(self, key, order, amount):
        self.c.execute("INSERT OR IGNORE INTO charges (idempotency_key, order_id, amount) "
                       "VALUES (?, ?, ?)", (key, order, amount))
        return self.c.execute("SELECT id FROM charges WHERE idempotency_key = ?",
                              (key,)).fetchone()[0]


def crash_if(point, step):
    if point == step:
        print("crashed after", step, flush=True)
        os._exit(3)     # a worker killed here: no delete, no clean-up


def handle_naive(w, msg, body, crash):
    Provider().charge(str(uuid.uuid4()), body["order"], body["amount"])  # a key per attempt
    crash_if(crash, "charge")
    w.execute("UPDATE orders SET state = 'paid' WHERE id = ?", (body["order"],))
    w.execute("UPDATE sales SET total = total + ?", (body["amount"],))
    crash_if(crash, "commit")
    return True


def handle(w, msg, body, crash):
    """True: done (delete the message); False: leave it to come back"""
    order, mid = body["order"], msg["MessageId"]
    # 1. state first: a paid order is done, whatever this message says
    row = w.execute("SELECT state FROM orders WHERE id = ?", (order,)).fetchone()
    if row is None or row[0] == "paid":
        return True
    # 2. the effect's row, claimed by one run; a dead run's claim is taken
    #    over once stale (its provider key goes on: the provider answers it)
    now = time.time()
    claimed = w.execute(
        "INSERT INTO charges (order_id, provider_key, claimed_at) VALUES (?, ?, ?) "
        "ON CONFLICT (order_id) DO UPDATE SET claimed_at = excluded.claimed_at "
        "WHERE charges.done_at IS NULL AND charges.claimed_at < ? RETURNING provider_key",
        (order, "charge-" + mid, now, now - STALE_CLAIM_S)).fetchone()
    if claimed is None:
        # another run holds a fresh claim, or finished: the message comes back later
        return w.execute("SELECT done_at FROM charges WHERE order_id = ?",
                         (order,)).fetchone()[0] is not None
    # 3. the provider's key comes from the intent: the same on every delivery
    Provider().charge(claimed[0], order, body["amount"])
    crash_if(crash, "charge")
    # 4. the message's identity in the transaction of the effect
    w.execute("BEGIN IMMEDIATE")
    if w.execute("INSERT INTO processed (message_id) VALUES (?) ON CONFLICT DO NOTHING "
                 "RETURNING message_id", (mid,)).fetchone():
        if w.execute("UPDATE orders SET state = 'paid' WHERE id = ? AND state = 'new' "
                     "RETURNING id", (order,)).fetchone():
            w.execute("UPDATE sales SET total = total + ?", (body["amount"],))
        w.execute("UPDATE charges SET done_at = ? WHERE order_id = ?", (time.time(), order))
    w.execute("COMMIT")
    crash_if(crash, "commit")
    return True


def work(args):
    naive = "--naive" in args
    crash = args[args.index("--crash-after") + 1] if "--crash-after" in args else None
    vis = int(args[args.index("--visibility") + 1]) if "--visibility" in args else 30
    c, w = sqs(), worker_db()
    url = c.get_queue_url(QueueName=QUEUE)["QueueUrl"]
    got = c.receive_message(QueueUrl=url, WaitTimeSeconds=5, VisibilityTimeout=vis)
    for msg in got.get("Messages", []):
        body = json.loads(msg["Body"])
        if (handle_naive if naive else handle)(w, msg, body, crash):
            c.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
        print("handled", msg["MessageId"])


def setup(order, amount):
    c, w = sqs(), worker_db()
    url = c.create_queue(QueueName=QUEUE)["QueueUrl"]
    w.execute("INSERT INTO orders (id, amount, state) VALUES (?, ?, 'new')", (order, amount))
    c.send_message(QueueUrl=url, MessageBody=json.dumps({"order": order, "amount": amount}))


def report():
    n = Provider().c.execute("SELECT count(*) FROM charges").fetchone()[0]
    total = worker_db().execute("SELECT total FROM sales").fetchone()[0]
    print("charges %d sales %d" % (n, total))


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "setup":
        setup(sys.argv[2], int(sys.argv[3]))
    elif cmd == "work":
        work(sys.argv[2:])
    elif cmd == "report":
        report()
    else:
        sys.exit(__doc__)
