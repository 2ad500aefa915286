// An SQS worker for Stagedoor Box whose effects happen once, however often
// its message is delivered (queues.md, "Handlers outside the box"): the
// JavaScript twin of sqs_worker.py, with the AWS SDK for JavaScript
// (npm install @aws-sdk/client-sqs sql.js).
//
// The message {"order": "A-1001", "amount": 2500} means: charge the order's
// card and count the sale.  The worker keeps its own SQLite database
// (WORKER_DB, default ./worker.sqlite, through sql.js: in memory, the file
// written after each commit, for one worker process at a time; several
// processes want a database server) and charges through a stand-in for a
// payment provider that honours idempotency keys as Stripe does
// (PROVIDER_DB).  The four techniques:
//
//   1. check state first, then a conditional update only one run wins;
//   2. a unique row for the effect (charges.order_id), claimed in one
//      statement, a stale claim taken over;
//   3. the provider's idempotency key from the MessageId, never per attempt;
//   4. the MessageId recorded in the transaction of the effect.
//
// With --naive it does none of that, and a second delivery charges and
// counts twice.
//
//   node sqs_worker.mjs setup ORDER AMOUNT
//   node sqs_worker.mjs work [--naive] [--crash-after charge|commit] [--visibility S]
//   node sqs_worker.mjs report
//
// AWS_ENDPOINT_URL (the box's sqs_listen), AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY (from `stagedoor token add --role worker --sqs`).
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import initSqlJs from "sql.js";
import {
  SQSClient, CreateQueueCommand, GetQueueUrlCommand, SendMessageCommand,
  ReceiveMessageCommand, DeleteMessageCommand,
} from "@aws-sdk/client-sqs";

const QUEUE = "charges";
const STALE_CLAIM_S = Number(process.env.STALE_CLAIM_S ?? 60);
const SQL = await initSqlJs();
const sqs = new SQSClient({
  endpoint: process.env.AWS_ENDPOINT_URL, region: process.env.AWS_REGION ?? "eu-west-1",
});

// a database: the file's content in memory, saved (temp file, rename) on commit
function open(path, schema) {
  const db = new SQL.Database(existsSync(path) ? readFileSync(path) : undefined);
  db.exec(schema);
  db.save = () => {
    writeFileSync(`${path}.tmp`, db.export());
    renameSync(`${path}.tmp`, path);
  };
  db.one = (sql, params) => {
    const st = db.prepare(sql);
    st.bind(params);
    const row = st.step() ? st.get() : null;
    st.free();
    return row;
  };
  return db;
}

const workerDb = () => open(process.env.WORKER_DB ?? "worker.sqlite", `
  CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, amount INTEGER NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('new', 'paid')));
  CREATE TABLE IF NOT EXISTS charges (order_id TEXT PRIMARY KEY, provider_key TEXT,
    claimed_at REAL NOT NULL, done_at REAL);
  CREATE TABLE IF NOT EXISTS processed (message_id TEXT PRIMARY KEY);
  CREATE TABLE IF NOT EXISTS sales (id INTEGER PRIMARY KEY CHECK (id = 1), total INTEGER NOT NULL);
  INSERT OR IGNORE INTO sales VALUES (1, 0);`);

// the provider's stand-in: one charge per idempotency key, as Stripe keeps them
function charge(key, order, amount) {
  const p = open(process.env.PROVIDER_DB ?? "provider.sqlite", `
    CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY,
      idempotency_key TEXT NOT NULL UNIQUE, order_id TEXT, amount INTEGER);`);
  p.run("INSERT OR IGNORE INTO charges (idempotency_key, order_id, amount) VALUES (?, ?, ?)",
    [key, order, amount]);
  p.save();
}

function crashIf(point, step) {
  if (point === step) {
    console.log("crashed after", step);
    process.exit(3); // a worker killed here: no delete, no clean-up
  }
}

function handleNaive(w, msg, body, crash) {
  charge(randomUUID(), body.order, body.amount); // a key per attempt
  crashIf(crash, "charge");
  w.run("UPDATE orders SET state = 'paid' WHERE id = ?", [body.order]);
  w.run("UPDATE sales SET total = total + ?", [body.amount]);
  w.save();
  crashIf(crash, "commit");
  return true;
}

// true: done (delete the message); false: leave it to come back
function handle(w, msg, body, crash) {
  const { order, amount } = body;
  const mid = msg.MessageId;
  // 1. state first: a paid order is done, whatever this message says
  const row = w.one("SELECT state FROM orders WHERE id = ?", [order]);
  if (!row || row[0] === "paid") return true;
  // 2. the effect's row, claimed by one run; a dead run's claim is taken over once stale
  const now = Date.now() / 1000;
  const claimed = w.one(
    "INSERT INTO charges (order_id, provider_key, claimed_at) VALUES (?, ?, ?) " +
    "ON CONFLICT (order_id) DO UPDATE SET claimed_at = excluded.claimed_at " +
    "WHERE charges.done_at IS NULL AND charges.claimed_at < ? RETURNING provider_key",
    [order, `charge-${mid}`, now, now - STALE_CLAIM_S]);
  w.save();
  if (!claimed) // another run holds a fresh claim, or finished
    return w.one("SELECT done_at FROM charges WHERE order_id = ?", [order])[0] !== null;
  // 3. the provider's key comes from the intent: the same on every delivery
  charge(claimed[0], order, amount);
  crashIf(crash, "charge");
  // 4. the message's identity in the transaction of the effect
  w.exec("BEGIN IMMEDIATE");
  if (w.one("INSERT INTO processed (message_id) VALUES (?) ON CONFLICT DO NOTHING " +
            "RETURNING message_id", [mid])) {
    if (w.one("UPDATE orders SET state = 'paid' WHERE id = ? AND state = 'new' RETURNING id",
      [order]))
      w.run("UPDATE sales SET total = total + ?", [amount]);
    w.run("UPDATE charges SET done_at = ? WHERE order_id = ?", [Date.now() / 1000, order]);
  }
  w.exec("COMMIT");
  w.save();
  crashIf(crash, "commit");
  return true;
}

async function work(args) {
  const naive = args.includes("--naive");
  const crash = args.includes("--crash-after") ? args[args.indexOf("--crash-after") + 1] : null;
  const vis = args.includes("--visibility") ? Number(args[args.indexOf("--visibility") + 1]) : 30;
  const w = workerDb();
  const { QueueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: QUEUE }));
  const got = await sqs.send(new ReceiveMessageCommand({
    QueueUrl, WaitTimeSeconds: 5, VisibilityTimeout: vis,
  }));
  for (const msg of got.Messages ?? []) {
    if ((naive ? handleNaive : handle)(w, msg, JSON.parse(msg.Body), crash))
      await sqs.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: msg.ReceiptHandle }));
    console.log("handled", msg.MessageId);
  }
}

async function setup(order, amount) {
  const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: QUEUE }));
  const w = workerDb();
  w.run("INSERT INTO orders (id, amount, state) VALUES (?, ?, 'new')", [order, amount]);
  w.save();
  await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: JSON.stringify({ order, amount }) }));
}

function report() {
  const p = open(process.env.PROVIDER_DB ?? "provider.sqlite",
    "CREATE TABLE IF NOT EXISTS charges (id INTEGER PRIMARY KEY, idempotency_key TEXT NOT NULL " +
    "UNIQUE, order_id TEXT, amount INTEGER);");
  console.log(`charges ${p.one("SELECT count(*) FROM charges", [])[0]} ` +
    `sales ${workerDb().one("SELECT total FROM sales", [])[0]}`);
}

const [cmd, ...rest] = process.argv.slice(2);
if (cmd === "setup") await setup(rest[0], Number(rest[1]));
else if (cmd === "work") await work(rest);
else if (cmd === "report") report();
else {
  console.error("usage: node sqs_worker.mjs setup ORDER AMOUNT | work [--naive] " +
    "[--crash-after charge|commit] [--visibility S] | report");
  process.exit(2);
}
