// sqs_sdk.mjs ENDPOINT: tests/test_sqs.c's run of the official AWS SDK for
// JavaScript (@aws-sdk/client-sqs, pinned in package.json: the AWS JSON 1.0
// protocol) against the box's SQS listener, with the credentials in
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.  It asserts what the SDK
// returns and throws (its own exception classes: redrive, FIFO order and
// deduplication, stale handles, SigV4 refusals) and prints "ok" last; any
// failed assertion exits non-zero.  The SDK checks the MD5 digests of every
// body it sends and receives itself.
import assert from "node:assert/strict";
import {
  SQSClient, CreateQueueCommand, GetQueueUrlCommand, SendMessageCommand,
  SendMessageBatchCommand, ReceiveMessageCommand, DeleteMessageCommand,
  DeleteMessageBatchCommand, ChangeMessageVisibilityCommand, GetQueueAttributesCommand,
  ListQueuesCommand, SetQueueAttributesCommand, QueueDoesNotExist, ReceiptHandleIsInvalid,
  TooManyEntriesInBatchRequest,
} from "@aws-sdk/client-sqs";

const endpoint = process.argv[2];
const mk = (creds, more) => new SQSClient({
  endpoint, region: "eu-west-1", maxAttempts: 1, ...more,
  credentials: creds ?? {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID,
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY,
  },
});
const sqs = mk();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function rejects(p, check) {
  try {
    await p;
  } catch (e) {
    check(e);
    return;
  }
  assert.fail("the call succeeded");
}

const { QueueUrl: url } = await sqs.send(new CreateQueueCommand({
  QueueName: "js-jobs", Attributes: { VisibilityTimeout: "30" },
}));
assert.match(url, /\/000000000000\/js-jobs$/);
assert.equal((await sqs.send(new GetQueueUrlCommand({ QueueName: "js-jobs" }))).QueueUrl, url);
assert.ok((await sqs.send(new ListQueuesCommand({}))).QueueUrls.includes(url));

// a message with attributes: the SDK checks MD5OfMessageBody on the send
// and MD5OfBody on the receive
const attrs = {
  attribName1: { DataType: "String", StringValue: "attribValue 1" },
  n: { DataType: "Number", StringValue: "42" },
  b: { DataType: "Binary", BinaryValue: new Uint8Array([0, 1, 2, 255]) },
};
const sent = await sqs.send(new SendMessageCommand({
  QueueUrl: url, MessageBody: "héllo ✓", MessageAttributes: attrs,
}));
const got = await sqs.send(new ReceiveMessageCommand({
  QueueUrl: url, MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["All"],
}));
const m = got.Messages[0];
assert.equal(m.MessageId, sent.MessageId);
assert.equal(m.Body, "héllo ✓");
assert.equal(m.MD5OfMessageAttributes, sent.MD5OfMessageAttributes);
assert.deepEqual([...m.MessageAttributes.b.BinaryValue], [0, 1, 2, 255]);
assert.equal(m.MessageAttributes.n.StringValue, "42");
assert.equal(m.Attributes.ApproximateReceiveCount, "1");
await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle }));

// batches
const b = await sqs.send(new SendMessageBatchCommand({
  QueueUrl: url, Entries: [...Array(10).keys()].map((i) => ({ Id: `e${i}`, MessageBody: `m${i}` })),
}));
assert.equal(b.Successful.length, 10);
await rejects(sqs.send(new SendMessageBatchCommand({
  QueueUrl: url, Entries: [...Array(11).keys()].map((i) => ({ Id: `e${i}`, MessageBody: "x" })),
})), (e) => assert.ok(e instanceof TooManyEntriesInBatchRequest, e.name));
let bodies = [];
while (bodies.length < 10) {
  const r = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10 }));
  assert.ok(r.Messages?.length, "fewer than 10 came back");
  bodies = bodies.concat(r.Messages.map((x) => x.Body));
  const d = await sqs.send(new DeleteMessageBatchCommand({
    QueueUrl: url, Entries: r.Messages.map((x, i) => ({ Id: `d${i}`, ReceiptHandle: x.ReceiptHandle })),
  }));
  assert.equal(d.Successful.length, r.Messages.length);
}
assert.deepEqual(bodies.sort(), [...Array(10).keys()].map((i) => `m${i}`).sort());

// a long poll, woken by a send
const t0 = Date.now();
const waiting = mk().send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 10 }));
await sleep(300);
const tSend = Date.now();
await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: "wake" }));
const woke = await waiting;
assert.equal(woke.Messages[0].Body, "wake");
assert.ok(Date.now() - tSend < 2000, `woken ${Date.now() - tSend} ms after the send`);
assert.ok(Date.now() - t0 < 5000);

// a stale receipt handle: the second delivery's is the only one that deletes
await sqs.send(new ChangeMessageVisibilityCommand({
  QueueUrl: url, ReceiptHandle: woke.Messages[0].ReceiptHandle, VisibilityTimeout: 1,
}));
await sleep(1300);
const again = await sqs.send(new ReceiveMessageCommand({
  QueueUrl: url, MessageSystemAttributeNames: ["ApproximateReceiveCount"],
}));
assert.equal(again.Messages[0].MessageId, woke.Messages[0].MessageId);
assert.equal(again.Messages[0].Attributes.ApproximateReceiveCount, "2");
await rejects(sqs.send(new DeleteMessageCommand({
  QueueUrl: url, ReceiptHandle: woke.Messages[0].ReceiptHandle,
})), (e) => assert.ok(e instanceof ReceiptHandleIsInvalid, e.name));
await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: again.Messages[0].ReceiptHandle }));
const a = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["All"] }));
assert.equal(a.Attributes.ApproximateNumberOfMessages, "0");
assert.equal(a.Attributes.ApproximateNumberOfMessagesNotVisible, "0");

// redrive: past maxReceiveCount the message is in the dead-letter queue
const { QueueUrl: dlq } = await sqs.send(new CreateQueueCommand({ QueueName: "js-dead" }));
const arn = (await sqs.send(new GetQueueAttributesCommand({
  QueueUrl: dlq, AttributeNames: ["QueueArn"],
}))).Attributes.QueueArn;
await sqs.send(new SetQueueAttributesCommand({
  QueueUrl: url,
  Attributes: { RedrivePolicy: JSON.stringify({ maxReceiveCount: 1, deadLetterTargetArn: arn }) },
}));
await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: "poison" }));
assert.equal((await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, VisibilityTimeout: 1 })))
  .Messages[0].Body, "poison");
await sleep(1200);
assert.equal((await sqs.send(new ReceiveMessageCommand({ QueueUrl: url }))).Messages, undefined);
const dead = await sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq }));
assert.equal(dead.Messages[0].Body, "poison");
await sqs.send(new DeleteMessageCommand({ QueueUrl: dlq, ReceiptHandle: dead.Messages[0].ReceiptHandle }));

// FIFO: a deduplication id sends once; one message in flight per group, in order
const { QueueUrl: fifo } = await sqs.send(new CreateQueueCommand({
  QueueName: "js-order.fifo", Attributes: { FifoQueue: "true" },
}));
const send = (body, group, dedup) => sqs.send(new SendMessageCommand({
  QueueUrl: fifo, MessageBody: body, MessageGroupId: group, MessageDeduplicationId: dedup,
}));
const first = await send("a1", "A", "d1");
assert.equal((await send("a1", "A", "d1")).MessageId, first.MessageId);
await send("a2", "A", "d2");
await send("b1", "B", "d3");
const heads = (await sqs.send(new ReceiveMessageCommand({ QueueUrl: fifo, MaxNumberOfMessages: 10 })))
  .Messages;
assert.deepEqual(heads.map((x) => x.Body).sort(), ["a1", "b1"]);
await sqs.send(new DeleteMessageCommand({
  QueueUrl: fifo, ReceiptHandle: heads.find((x) => x.Body === "a1").ReceiptHandle,
}));
assert.deepEqual((await sqs.send(new ReceiveMessageCommand({ QueueUrl: fifo, MaxNumberOfMessages: 10 })))
  .Messages.map((x) => x.Body), ["a2"]);

// refusals, as the SDK's classes and names
await rejects(sqs.send(new GetQueueUrlCommand({ QueueName: "js-none" })),
  (e) => assert.ok(e instanceof QueueDoesNotExist, e.name));
await rejects(mk({ accessKeyId: process.env.AWS_ACCESS_KEY_ID, secretAccessKey: "x".repeat(40) })
  .send(new ListQueuesCommand({})), (e) => {
  assert.equal(e.name, "SignatureDoesNotMatch");
  assert.equal(e.$metadata.httpStatusCode, 403);
});
await rejects(mk({ accessKeyId: "SDBX0000000000000000", secretAccessKey: "x".repeat(40) })
  .send(new ListQueuesCommand({})), (e) => assert.equal(e.name, "InvalidClientTokenId"));
// a request signed 20 minutes in the past
await rejects(mk(undefined, { systemClockOffset: -20 * 60 * 1000 }).send(new ListQueuesCommand({})),
  (e) => assert.equal(e.name, "SignatureDoesNotMatch"));
// a revoked token's credentials (the test revoked it before this run)
await rejects(mk({
  accessKeyId: process.env.REVOKED_KEY_ID, secretAccessKey: process.env.REVOKED_SECRET,
}).send(new ListQueuesCommand({})), (e) => assert.equal(e.name, "InvalidClientTokenId"));
console.log("ok");
