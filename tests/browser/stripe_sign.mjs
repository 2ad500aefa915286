// stripe_sign.mjs SECRET PAYLOAD_FILE [TIMESTAMP]: the Stripe-Signature
// header the official stripe package makes for the payload (its test-header
// generator, the one Stripe's own documentation points to), on stdout.
// test_shop sends the box's webhook endpoint what this prints.
import { readFileSync } from 'node:fs';
import Stripe from 'stripe';

const [secret, file, ts] = process.argv.slice(2);
if (!secret || !file) {
  console.error('usage: node stripe_sign.mjs SECRET PAYLOAD_FILE [TIMESTAMP]');
  process.exit(2);
}
const stripe = new Stripe('sk_test_unused');
const opts = { payload: readFileSync(file, 'utf8'), secret };
if (ts) opts.timestamp = Number(ts);
process.stdout.write(stripe.webhooks.generateTestHeaderString(opts) + '\n');
