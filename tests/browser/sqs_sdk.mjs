// sqs_sdk.mjs ENDPOINT: tests/test_sqs.c's run of the official AWS SDK for
// JavaScript (@aws-sdk/client-sqs, pinned in package.json: the AWS JSON 1.0
// protocol) against the box's SQS listener, with the credentials in
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.  It asserts what the SDK
// returns and throws (its own exception classes) and prints "ok" last; any
// failed assertion exits non-zero.  The SDK checks the MD5 digests of every
// body it sends and receives itself.
import assert from "node:assert/strict";
import {
  SQSClient, CreateQueueCommand, GetQueueUrlCommand, SendMessageCommand,
  SendMessageBatchCommand, ReceiveMessageCommand, DeleteMessageCommand,
  DeleteMessageBatchCommand, ChangeMessageVisibilityCommand, GetQueueAttributesCommand,
  ListQueuesCommand, QueueDoesNotExist, ReceiptHandleIsInvalid, TooManyEntriesInBatchRequest,
} from "@aws-sdk/client-sqs";

const endpoint = process.argv[2];
const mk = (creds) => new SQSClient({
  endpoint, region: "eu-west-1", maxAttempts: 1,
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
console.log("ok");
