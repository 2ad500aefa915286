// paysink_stripe.mjs: tools/paysink against the official stripe npm package
// (tests/browser/package-lock.json pins it), so that paysink's answers are
// shaped as api.stripe.com shapes them, and its webhooks signed as Stripe
// signs them.
//
//   node tests/browser/paysink_stripe.mjs PAYSINK_BIN WORK_DIR [CERTS_DIR]
//
// Starts a webhook receiver on loopback, then PAYSINK_BIN pointed at it
// (HTTPS with CERTS_DIR/server.pem and the package trusting CERTS_DIR/ca.pem
// only, when CERTS_DIR is given; else plain HTTP on loopback), and checks,
// each through the package's own calls and error classes:
//   create with an idempotency key, retrieve, the replay (same object,
//   Idempotent-Replayed), the same key with other parameters
//   (StripeIdempotencyError), a wrong key (StripeAuthenticationError),
//   expire (and expiring again refused), refund, the refund replayed under
//   its key, refunds listed, the rest refunded and then
//   charge_already_refunded; a pending refund read back and later
//   succeeded; a payment intent retrieved; a dispute's event read by
//   constructEvent and the disputed charge retrieved;
//   webhooks.constructEvent accepting the payload
//   and Stripe-Signature paysink delivered and refusing it with one byte
//   changed; generateTestHeaderString's header accepted by paysink's own rule
//   (POST /_paysink/verify) and refused for another payload.
// Prints one line of what passed; exits 1 at the first check that fails.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import Stripe from 'stripe';

const [bin, dir, certs] = process.argv.slice(2);
if (!bin || !dir) {
  console.error('usage: node paysink_stripe.mjs PAYSINK_BIN WORK_DIR [CERTS_DIR]');
  process.exit(2);
}
const KEY = 'sk_test_paysinkNodeCheck42';
const SECRET = 'whsec_paysinkNodeSecret';
const passed = [];
let child = null;

function check(cond, what, detail) {
  if (!cond) {
    throw new Error(`FAILED: ${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail)}`);
  }
}

async function expectError(promise, type, what) {
  try {
    await promise;
  } catch (err) {
    check(err.type === type, `${what}: ${type}`, { type: err.type, message: err.message });
    return err;
  }
  throw new Error(`FAILED: ${what}: no error, expected ${type}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// the receiver: keeps each delivery's raw bytes and Stripe-Signature
const deliveries = [];
const receiver = http.createServer((req, res) => {
  const parts = [];
  req.on('data', (c) => parts.push(c));
  req.on('end', () => {
    deliveries.push({ body: Buffer.concat(parts), sig: req.headers['stripe-signature'],
                      ua: req.headers['user-agent'], type: req.headers['content-type'] });
    res.writeHead(200, { 'Content-Type': 'text/plain' });
    res.end('ok');
  });
});

async function waitFor(what, fn, ms = 15000) {
  for (let t = 0; t < ms; t += 50) {
    const v = fn();
    if (v) return v;
    await sleep(50);
  }
  throw new Error(`FAILED: waited ${ms} ms for ${what}`);
}

async function startPaysink(hookPort) {
  const portFile = path.join(dir, 'paysink.port');
  fs.rmSync(portFile, { force: true });
  const args = ['--listen', '127.0.0.1:0', '--api-key', KEY,
                '--record', path.join(dir, 'paysink-record.json'), '--port-file', portFile,
                '--webhook-url', `http://127.0.0.1:${hookPort}/stripe/webhook`,
                '--webhook-secret', SECRET, '--retry-base-ms', '100'];
  if (certs) {
    args.push('--cert', path.join(certs, 'server.pem'), '--key', path.join(certs, 'server.key'));
  }
  const log = fs.openSync(path.join(dir, 'paysink-node.log'), 'w');
  child = spawn(bin, args, { stdio: ['ignore', log, log] });
  const port = await waitFor('the port file', () => {
    try {
      return parseInt(fs.readFileSync(portFile, 'utf8'), 10) || 0;
    } catch {
      return 0;
    }
  }, 10000);
  return port;
}

function sessionParams(name, amount) {
  return {
    mode: 'payment',
    line_items: [{
      price_data: { currency: 'eur', unit_amount: amount, product_data: { name } },
      quantity: 2,
    }],
    success_url: 'https://shop.example/paid?session={CHECKOUT_SESSION_ID}',
    cancel_url: 'https://shop.example/cancelled',
    client_reference_id: 'order-node-1',
    customer_email: 'ada@example.org',
    expires_at: Math.floor(Date.now() / 1000) + 3600,
    metadata: { hold: 'H-node-1' },
    payment_intent_data: { metadata: { order: 'order-node-1' } },
  };
}

async function control(base, agent, method, p, headers = {}, body = undefined) {
  const mod = base.startsWith('https') ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(`${base}${p}`, { method, agent, headers }, (res) => {
      const parts = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode,
                                    json: JSON.parse(Buffer.concat(parts).toString() || '{}') }));
    });
    req.on('error', reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

async function apiChecks(stripe, bad, base, agent) {
  const params = sessionParams('Concert, stalls', 2500);
  const s1 = await stripe.checkout.sessions.create(params, { idempotencyKey: 'node-create-1' });
  check(s1.object === 'checkout.session' && s1.status === 'open' && s1.payment_status === 'unpaid' &&
        s1.amount_total === 5000 && s1.currency === 'eur' && s1.url === `${base}/pay/${s1.id}` &&
        s1.metadata.hold === 'H-node-1' && s1.payment_intent === null && s1.livemode === false,
        'create', s1);
  passed.push('create');
  const got = await stripe.checkout.sessions.retrieve(s1.id);
  check(got.id === s1.id && got.client_reference_id === 'order-node-1', 'retrieve', got);
  passed.push('retrieve');
  const again = await stripe.checkout.sessions.create(params, { idempotencyKey: 'node-create-1' });
  check(again.id === s1.id && JSON.stringify(again) === JSON.stringify(s1) &&
        again.lastResponse.headers['idempotent-replayed'] === 'true', 'replay', again.id);
  passed.push('replay');
  await expectError(stripe.checkout.sessions.create(sessionParams('Other', 100),
                                                    { idempotencyKey: 'node-create-1' }),
                    'StripeIdempotencyError', 'same key, other params');
  passed.push('idempotency_error');
  await expectError(bad.checkout.sessions.retrieve(s1.id), 'StripeAuthenticationError',
                    'wrong key');
  passed.push('auth_error');
  const s2 = await stripe.checkout.sessions.create(sessionParams('Matinee', 900));
  const gone = await stripe.checkout.sessions.expire(s2.id);
  check(gone.status === 'expired' && gone.url === null, 'expire', gone);
  await expectError(stripe.checkout.sessions.expire(s2.id), 'StripeInvalidRequestError',
                    'expire again');
  passed.push('expire');
  return { s1, s2 };
}

async function refundChecks(stripe, s1, base, agent) {
  const paid = await control(base, agent, 'POST', `/_paysink/pay/${s1.id}`);
  check(paid.status === 200 && paid.json.payment_status === 'paid', 'pay', paid);
  const pi = paid.json.payment_intent;
  const r1 = await stripe.refunds.create({ payment_intent: pi, amount: 1500, reason: 'requested_by_customer' },
                                         { idempotencyKey: 'node-refund-1' });
  check(r1.object === 'refund' && r1.status === 'succeeded' && r1.amount === 1500 &&
        r1.payment_intent === pi, 'refund', r1);
  passed.push('refund');
  const r1again = await stripe.refunds.create({ payment_intent: pi, amount: 1500, reason: 'requested_by_customer' },
                                              { idempotencyKey: 'node-refund-1' });
  check(r1again.id === r1.id, 'refund replay', r1again.id);
  passed.push('refund_replay');
  const rest = await stripe.refunds.create({ payment_intent: pi });
  check(rest.amount === 3500, 'refund the rest', rest);
  const list = await stripe.refunds.list({ payment_intent: pi });
  check(list.object === 'list' && list.data.length === 2 && list.has_more === false, 'list', list);
  passed.push('list');
  const err = await expectError(stripe.refunds.create({ payment_intent: pi }),
                                'StripeInvalidRequestError', 'refund beyond the charge');
  check(err.code === 'charge_already_refunded', 'charge_already_refunded', err.code);
  passed.push('charge_already_refunded');
}

// a payment whose refunds answer "pending" (its paysink control); the
// refund read back pending, then succeeded once paysink settles it
async function pendingRefundChecks(stripe, base, agent) {
  const s3 = await stripe.checkout.sessions.create(sessionParams('Gala', 1000));
  const paid = await control(base, agent, 'POST', `/_paysink/pay/${s3.id}`);
  const pi = paid.json.payment_intent;
  const intent = await stripe.paymentIntents.retrieve(pi);
  check(intent.status === 'succeeded' && intent.amount_received === 2000 &&
        intent.latest_charge && intent.metadata.order === 'order-node-1', 'payment intent', intent);
  passed.push('payment_intent');
  const on = await control(base, agent, 'POST', `/_paysink/refund-pending/${pi}?on=1`);
  check(on.status === 200, 'refund-pending control', on);
  const r = await stripe.refunds.create({ payment_intent: pi, amount: 500 });
  check(r.status === 'pending', 'pending refund', r);
  const again = await stripe.refunds.retrieve(r.id);
  check(again.status === 'pending', 'pending refund read back', again);
  const settled = await control(base, agent, 'POST', `/_paysink/refund-settle/${r.id}?outcome=succeeded`);
  check(settled.status === 200, 'refund-settle control', settled);
  const done = await stripe.refunds.retrieve(r.id);
  check(done.status === 'succeeded', 'pending refund succeeded', done);
  passed.push('pending_refund');
  return { pi, charge: intent.latest_charge };
}

// a dispute on that payment: its event verified and parsed by the package
async function disputeChecks(stripe, paid, base, agent) {
  const opened = await control(base, agent, 'POST', `/_paysink/dispute/${paid.pi}?reason=fraudulent`);
  check(opened.status === 200, 'dispute control', opened);
  const got = await waitFor('charge.dispute.created', () => deliveries.find((d) => {
    const ev = JSON.parse(d.body.toString());
    return ev.type === 'charge.dispute.created' && ev.data.object.id === opened.json.id;
  }));
  const ev = stripe.webhooks.constructEvent(got.body, got.sig, SECRET);
  check(ev.data.object.object === 'dispute' && ev.data.object.status === 'needs_response' &&
        ev.data.object.charge === paid.charge && ev.data.object.payment_intent === paid.pi,
        'dispute event', ev.data.object);
  const ch = await stripe.charges.retrieve(paid.charge);
  check(ch.disputed === true && ch.object === 'charge', 'disputed charge', ch);
  passed.push('dispute');
}

async function webhookChecks(stripe, s1, s2, base, agent) {
  const find = (type, id) => deliveries.find((d) => {
    const ev = JSON.parse(d.body.toString());
    return ev.type === type && ev.data.object.id === id;
  });
  const done = await waitFor('checkout.session.completed', () => find('checkout.session.completed', s1.id));
  await waitFor('checkout.session.expired', () => find('checkout.session.expired', s2.id));
  check(done.ua === 'Stripe/1.0 (+https://stripe.com/docs/webhooks)' &&
        done.type === 'application/json; charset=utf-8', 'webhook headers', done);
  const ev = stripe.webhooks.constructEvent(done.body, done.sig, SECRET);
  check(ev.object === 'event' && ev.type === 'checkout.session.completed' &&
        ev.data.object.payment_status === 'paid' && ev.api_version, 'constructEvent', ev.type);
  passed.push('constructEvent');
  const tampered = Buffer.from(done.body);
  const at = tampered.indexOf('"paid"') + 1;
  tampered[at] = 'P'.charCodeAt(0);
  try {
    stripe.webhooks.constructEvent(tampered, done.sig, SECRET);
    throw new Error('FAILED: constructEvent accepted a changed payload');
  } catch (e) {
    check(e.type === 'StripeSignatureVerificationError', 'one byte changed', e.message);
  }
  passed.push('tamper_refused');
  const payload = JSON.stringify({ id: 'evt_test_node', object: 'event', type: 'ping' });
  const header = stripe.webhooks.generateTestHeaderString({ payload, secret: SECRET });
  const ok = await control(base, agent, 'POST', '/_paysink/verify',
                           { 'Stripe-Signature': header, 'X-Paysink-Secret': SECRET }, payload);
  check(ok.status === 200 && ok.json.ok === true, 'paysink verifies the package header', ok);
  const no = await control(base, agent, 'POST', '/_paysink/verify',
                           { 'Stripe-Signature': header, 'X-Paysink-Secret': SECRET }, payload + ' ');
  check(no.status === 200 && no.json.ok === false, 'paysink refuses another payload', no);
  const own = await control(base, agent, 'POST', '/_paysink/verify',
                            { 'Stripe-Signature': done.sig, 'X-Paysink-Secret': SECRET }, done.body);
  check(own.json.ok === true, 'paysink verifies its own delivery', own);
  passed.push('generateTestHeaderString');
}

async function main() {
  await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
  const port = await startPaysink(receiver.address().port);
  const protocol = certs ? 'https' : 'http';
  const agent = certs ? new https.Agent({ ca: fs.readFileSync(path.join(certs, 'ca.pem')) })
                      : new http.Agent();
  const base = `${protocol}://127.0.0.1:${port}`;
  const conf = { host: '127.0.0.1', port, protocol, httpAgent: agent, maxNetworkRetries: 0 };
  const stripe = new Stripe(KEY, conf);
  const bad = new Stripe('sk_test_notTheKey0000', conf);
  const { s1, s2 } = await apiChecks(stripe, bad, base, agent);
  await refundChecks(stripe, s1, base, agent);
  await disputeChecks(stripe, await pendingRefundChecks(stripe, base, agent), base, agent);
  await webhookChecks(stripe, s1, s2, base, agent);
  console.log(`paysink_stripe: ${passed.length} passed (stripe ${Stripe.PACKAGE_VERSION ?? ''}` +
              ` over ${protocol}): ${passed.join(', ')}`);
}

// a watchdog well inside the C test's 120 s: never leave paysink behind
const watchdog = setTimeout(() => {
  console.error('FAILED: the checks ran past 90 s');
  if (child) child.kill('SIGKILL');
  process.exit(1);
}, 90000);

let rc = 0;
try {
  await main();
} catch (e) {
  console.error(e.stack || String(e));
  rc = 1;
}
if (child) {
  child.kill('SIGTERM');
  const code = await new Promise((r) => {
    if (child.exitCode !== null) r(child.exitCode);
    else child.on('exit', (c) => r(c));
  });
  if (code !== 0) {
    console.error(`FAILED: paysink exited ${code} on SIGTERM`);
    rc = 1;
  }
}
receiver.close();
clearTimeout(watchdog);
process.exit(rc);
