// sqs_clients.mjs --endpoint URL --queue-url URL --messages N --clients C --sdk DIR
//
// The reference rate of `stagedoor-bench sqs` (src/bench/bench_sqs.c) for the
// AWS SDK for JavaScript (@aws-sdk/client-sqs: AWS JSON 1.0, the SDK's own MD5
// checks of every body sent and received): the benchmark's batched lifecycle,
// the same as its native client's and sqs_clients.py's, against the same
// listener with the same worker token.  C loops run at once on one SQSClient
// (its agent keeps a connection each); each sends its share of the N
// messages with SendMessageBatch of 10, then ReceiveMessage (up to 10) and
// DeleteMessageBatch of what came, in turn, until its share is sent and the
// queue had nothing for it.
//
// The SDK is the one tests/browser pins: DIR is that folder (its
// node_modules), from which the import is resolved, so this file runs from
// anywhere.  The credentials come from BENCH_SQS_KEY_ID and BENCH_SQS_SECRET.
// The clock runs from the first request to the last answer; the client is
// made, and one call made, before it.  Every message must be received once
// and deleted once, every batch answered without a failed entry; else the
// exit status is 1 with the reason.  Prints one JSON line: {"client",
// "version", "protocol", "messages", "clients", "seconds", "cpu_seconds" (this
// process's, over the same span), "msgs_per_s"}.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values: a } = parseArgs({
  options: {
    endpoint: { type: "string" }, "queue-url": { type: "string" },
    messages: { type: "string" }, clients: { type: "string", default: "4" },
    sdk: { type: "string" },
  },
});
const require = createRequire(join(a.sdk, "package.json"));
const {
  SQSClient, SendMessageBatchCommand, ReceiveMessageCommand, DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
} = require("@aws-sdk/client-sqs");
const version = JSON.parse(readFileSync(
  join(a.sdk, "node_modules/@aws-sdk/client-sqs/package.json"), "utf8")).version;

const url = a["queue-url"], n = Number(a.messages), clients = Number(a.clients);
const PAD = "0123456789abcdef".repeat(4);
const body = (i) => `bench-${String(i).padStart(8, "0")}-${PAD}`;
const number = (b) => Number(b.split("-")[1]);
const got = new Uint8Array(n), gone = new Uint8Array(n);

const sqs = new SQSClient({
  endpoint: a.endpoint, region: "eu-west-1", maxAttempts: 1,
  credentials: {
    accessKeyId: process.env.BENCH_SQS_KEY_ID,
    secretAccessKey: process.env.BENCH_SQS_SECRET,
  },
});

// take: one receive and the delete of what came: how many
async function take() {
  const ms = (await sqs.send(new ReceiveMessageCommand({
    QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0,
  }))).Messages ?? [];
  if (!ms.length) return 0;
  for (const m of ms) got[number(m.Body)]++;
  const r = await sqs.send(new DeleteMessageBatchCommand({
    QueueUrl: url, Entries: ms.map((m, j) => ({ Id: `d${j}`, ReceiptHandle: m.ReceiptHandle })),
  }));
  if (r.Failed?.length || (r.Successful ?? []).length !== ms.length)
    throw new Error(`DeleteMessageBatch answered ${JSON.stringify(r)}`);
  for (const m of ms) gone[number(m.Body)]++;
  return ms.length;
}

async function client(idx) {
  let next = Math.floor(n * idx / clients);
  const end = Math.floor(n * (idx + 1) / clients);
  for (;;) {
    const k = Math.min(10, end - next);
    if (k > 0) {
      const r = await sqs.send(new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: Array.from({ length: k }, (_, j) => ({ Id: `e${j}`, MessageBody: body(next + j) })),
      }));
      if (r.Failed?.length || (r.Successful ?? []).length !== k)
        throw new Error(`SendMessageBatch answered ${JSON.stringify(r)}`);
      next += k;
    }
    if ((await take()) === 0 && next >= end) return;
  }
}

try {
  await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["QueueArn"] }));
  const t0 = process.hrtime.bigint(), cpu0 = process.cpuUsage();
  await Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  for (let i = 0; i < n; i++)
    if (got[i] !== 1 || gone[i] !== 1)
      throw new Error(`message ${i} was received ${got[i]} times and deleted ${gone[i]} times`);
  console.log(JSON.stringify({
    client: "aws_sdk_js", version, protocol: "json1.0", messages: n, clients,
    seconds: Number(seconds.toFixed(6)), cpu_seconds: (cpu.user + cpu.system) / 1e6,
    msgs_per_s: Number((n / seconds).toFixed(1)),
  }));
} catch (e) {
  console.error(`sqs_clients.mjs: ${e.stack ?? e}`);
  process.exit(1);
}
