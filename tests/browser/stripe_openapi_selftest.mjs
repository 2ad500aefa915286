// stripe_openapi_selftest.mjs: proof that stripe_openapi.mjs tells the
// requests Stripe's OpenAPI description takes from those it does not.
//
//   node tests/browser/stripe_openapi_selftest.mjs
//
// Good requests (the four src/stripe.c sends, form-encoded as its form_add
// encodes them, and a payment intent and a refund retrieved) must pass with
// no violation; each bad one (one thing wrong) must be reported with exactly
// the violations it expects; the command line (stripe_openapi.mjs LOG) must
// exit 0 on a good log, 1 on a bad one and 2 on an empty, missing or broken
// one.  Also states what the pinned spec says about a few facts the box
// relies on (mode and line_items optional; payment_method_types[0]=card and
// payment_method_types[]=card), so that a new pin that says otherwise fails
// here.  Ends with "stripe_openapi_selftest: N passed, M failed"; exit 1 when
// any failed, 2 when the spec is not installed.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkRequest, loadSpec } from './stripe_openapi.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
let spec;
try {
  spec = loadSpec();
} catch (e) {
  console.error(`stripe_openapi_selftest: the spec is not installed (sh tools/npm_deps.sh tests/browser): ${e.message}`);
  process.exit(2);
}

// form: pairs encoded byte for byte as src/stripe.c's form_add does (keys
// too: everything but A-Z a-z 0-9 - _ . ~ as %XX, upper case)
function form(pairs) {
  const enc = (s) => [...Buffer.from(String(s), 'utf8')].map((c) =>
    /[A-Za-z0-9\-_.~]/.test(String.fromCharCode(c)) ? String.fromCharCode(c)
      : '%' + c.toString(16).toUpperCase().padStart(2, '0')).join('');
  return pairs.map(([k, v]) => `${enc(k)}=${enc(v)}`).join('&');
}

const SESSION = 'cs_test_a1B2c3D4e5F6g7H8i9J0kLmNoPqRsTuVwXyZ0123456789abcdefGHIJkl'; // 66, the most the spec allows on GET
const HOLD = 'hd_7Qm2Zx';
// stripe_checkout_create's pairs, in its order
const CHECKOUT = [
  ['mode', 'payment'],
  ['line_items[0][price_data][currency]', 'eur'],
  ['line_items[0][price_data][unit_amount]', '2500'],
  ['line_items[0][price_data][product_data][name]', 'Gig, Fri 4 Dec 2026, 20:00 CET'],
  ['line_items[0][quantity]', '2'],
  ['success_url', 'https://box.example/h/k3Jd9x?paid=1'],
  ['cancel_url', 'https://box.example/h/k3Jd9x'],
  ['client_reference_id', HOLD],
  ['customer_email', 'ana@example.org'],
  ['expires_at', '1796416200'],
  ['metadata[hold]', HOLD],
  ['payment_intent_data[metadata][hold]', HOLD],
];
const without = (pairs, ...keys) => pairs.filter(([k]) => !keys.includes(k));
const replace = (pairs, key, value) => pairs.map(([k, v]) => [k, k === key ? value : v]);
const post = (path, pairs, raw) => ({ method: 'POST', path, query: '', body: raw ?? form(pairs) });
const get = (path, query = '') => ({ method: 'GET', path, query, body: '' });

const GOOD = [
  ['stripe_checkout_create (src/stripe.c)', post('/v1/checkout/sessions', CHECKOUT), 'PostCheckoutSessions'],
  ['stripe_session_get (src/stripe.c)', get(`/v1/checkout/sessions/${SESSION}`), 'GetCheckoutSessionsSession'],
  ['stripe_session_expire (src/stripe.c): an empty form', post(`/v1/checkout/sessions/${SESSION}/expire`, []), 'PostCheckoutSessionsSessionExpire'],
  ['stripe_refund (src/stripe.c)', post('/v1/refunds', [['payment_intent', 'pi_3PqRsTuVwXyZ0123abcd'], ['amount', '2500']]), 'PostRefunds'],
  ['a payment intent retrieved', get('/v1/payment_intents/pi_3PqRsTuVwXyZ0123abcd'), 'GetPaymentIntentsIntent'],
  ['a payment intent retrieved, latest_charge expanded', get('/v1/payment_intents/pi_3PqRsTuVwXyZ0123abcd', 'expand[]=latest_charge'), 'GetPaymentIntentsIntent'],
  ['a refund retrieved', get('/v1/refunds/re_3PqRsTuVwXyZ0123abcd'), 'GetRefundsRefund'],
  ['brackets sent unencoded', post('/v1/checkout/sessions', null, 'mode=payment&line_items[0][price]=price_1&line_items[0][quantity]=1&metadata[a]=b'), 'PostCheckoutSessions'],
  ['metadata emptied (metadata=)', post('/v1/refunds', [['payment_intent', 'pi_1'], ['metadata', '']]), 'PostRefunds'],
  ['a session with a boolean and a second line item', post('/v1/checkout/sessions', [...CHECKOUT, ['allow_promotion_codes', 'true'],
    ['line_items[1][price]', 'price_1'], ['line_items[1][quantity]', '1']]), 'PostCheckoutSessions'],
  // facts of the pinned spec, stated so that a new pin that says otherwise fails here
  ['spec: mode and line_items are not required', post('/v1/checkout/sessions', without(CHECKOUT, 'mode',
    'line_items[0][price_data][currency]', 'line_items[0][price_data][unit_amount]',
    'line_items[0][price_data][product_data][name]', 'line_items[0][quantity]')), 'PostCheckoutSessions'],
  ['spec: payment_method_types[0]=card', post('/v1/checkout/sessions', [...CHECKOUT, ['payment_method_types[0]', 'card']]), 'PostCheckoutSessions'],
  ['spec: payment_method_types[]=card', post('/v1/checkout/sessions', [...CHECKOUT, ['payment_method_types[]', 'card']]), 'PostCheckoutSessions'],
];

// each: [what, request, [[param, rule pattern], ...] exactly as reported]
const BAD = [
  ['an unknown parameter: unit_price for unit_amount',
    post('/v1/checkout/sessions', CHECKOUT.map(([k, v]) => [k.replace('unit_amount', 'unit_price'), v])),
    [['line_items[0][price_data][unit_price]', /^unknown parameter/]]],
  ['an unknown top-level parameter', post('/v1/checkout/sessions', [...CHECKOUT, ['hold', HOLD]]), [['hold', /^unknown parameter/]]],
  ['a string for expires_at', post('/v1/checkout/sessions', replace(CHECKOUT, 'expires_at', '2026-12-04T20:00:00Z')),
    [['expires_at', /^an integer \(unix-time\)/]]],
  ['a decimal for quantity', post('/v1/checkout/sessions', replace(CHECKOUT, 'line_items[0][quantity]', '2.0')),
    [['line_items[0][quantity]', /^an integer/]]],
  ['a bad enum for mode', post('/v1/checkout/sessions', replace(CHECKOUT, 'mode', 'purchase')),
    [['mode', /^one of "payment", "setup", "subscription"/]]],
  ['a required currency missing (price_data)', post('/v1/checkout/sessions', without(CHECKOUT, 'line_items[0][price_data][currency]')),
    [['line_items[0][price_data][currency]', /^required/]]],
  ['a required name missing (product_data)', post('/v1/checkout/sessions',
    [...without(CHECKOUT, 'line_items[0][price_data][product_data][name]'), ['line_items[0][price_data][product_data][description]', 'x']]),
    [['line_items[0][price_data][product_data][name]', /^required/]]],
  ['a boolean as yes', post('/v1/checkout/sessions', [...CHECKOUT, ['allow_promotion_codes', 'yes']]),
    [['allow_promotion_codes', /^a boolean/]]],
  ['client_reference_id over its 200 characters', post('/v1/checkout/sessions', replace(CHECKOUT, 'client_reference_id', 'h'.repeat(201))),
    [['client_reference_id', /^at most 200 characters/]]],
  ['metadata as a value', post('/v1/checkout/sessions', [...without(CHECKOUT, 'metadata[hold]'), ['metadata', HOLD]]),
    [['metadata', /^an object/]]],
  ['a list as a value', post('/v1/checkout/sessions', [...CHECKOUT, ['payment_method_types', 'card']]),
    [['payment_method_types', /^a list/]]],
  ['a list given keys', post('/v1/checkout/sessions', [...CHECKOUT, ['payment_method_types[first]', 'card']]),
    [['payment_method_types[first]', /^a list takes indexes/]]],
  ['a value given keys', post('/v1/checkout/sessions', replace(CHECKOUT, 'customer_email', 'x').map(([k, v]) =>
    [k === 'customer_email' ? 'customer_email[address]' : k, v])), [['customer_email', /^a single string/]]],
  ['a parameter given twice', post('/v1/refunds', [['payment_intent', 'pi_1'], ['amount', '100'], ['amount', '200']]),
    [['amount', /^given more than once/]]],
  ['a refund with an unknown parameter', post('/v1/refunds', [['payment_intent', 'pi_1'], ['amount_minor', '100']]),
    [['amount_minor', /^unknown parameter/]]],
  ['a refund with a bad reason', post('/v1/refunds', [['payment_intent', 'pi_1'], ['reason', 'changed_mind']]),
    [['reason', /^one of "duplicate"/]]],
  ['an unknown path', post('/v1/checkout/session', CHECKOUT), [['/v1/checkout/session', /^no such path/]]],
  ['an unknown path (GET)', get('/v1/checkout/sessions/cs_1/expired'), [['/v1/checkout/sessions/cs_1/expired', /^no such path/]]],
  ['a method the path does not take', { method: 'DELETE', path: `/v1/checkout/sessions/${SESSION}`, query: '', body: '' },
    [[`/v1/checkout/sessions/${SESSION}`, /^no DELETE on \/v1\/checkout\/sessions\/\{session\}/]]],
  ['a session id over its 66 characters', get(`/v1/checkout/sessions/${SESSION}x`), [['{session}', /^at most 66 characters/]]],
  ['an unknown query parameter', get('/v1/payment_intents/pi_1', 'expand[]=latest_charge&limit=3'), [['limit', /^unknown query parameter/]]],
  ['expand as a value', get('/v1/refunds/re_1', 'expand=charge'), [['expand', /^a list/]]],
  ['a GET with a body', { method: 'GET', path: '/v1/refunds/re_1', query: '', body: 'expand[]=charge' }, [['(body)', /^GET sends no body/]]],
  ['a form body on expire', post(`/v1/checkout/sessions/${SESSION}/expire`, [['reason', 'timeout']]), [['reason', /^unknown parameter/]]],
];

let passed = 0;
let failed = 0;
function result(ok, what, detail) {
  if (ok) passed++;
  else failed++;
  console.log(`${ok ? 'ok' : 'FAIL'}: ${what}${ok || !detail ? '' : `\n  ${detail}`}`);
}
const shown = (vs) => JSON.stringify(vs.map((v) => `${v.param}: ${v.rule}`));

console.log(`# spec: Stripe API ${spec.version} (${spec.package}; ${Object.keys(spec.doc.paths).length} paths)`);
for (const [what, req, opId] of GOOD) {
  const r = checkRequest(spec, req);
  result(r.violations.length === 0 && r.operation === opId, `good: ${what}`, `operation ${r.operation}, violations ${shown(r.violations)}`);
}
for (const [what, req, want] of BAD) {
  const r = checkRequest(spec, req);
  const ok = r.violations.length === want.length &&
    want.every(([param, rule], i) => r.violations[i].param === param && rule.test(r.violations[i].rule));
  result(ok, `bad: ${what}`, `want ${JSON.stringify(want.map(([p, re]) => `${p}: ${re}`))}, got ${shown(r.violations)}`);
}

// the command line
const dir = mkdtempSync(join(tmpdir(), 'stripe_openapi.'));
function cli(name, lines) {
  const file = join(dir, name);
  if (lines !== null) writeFileSync(file, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l)) + '\n').join(''));
  const p = spawnSync(process.execPath, [join(HERE, 'stripe_openapi.mjs'), file], { encoding: 'utf8' });
  return { file, rc: p.status, out: p.stdout, err: p.stderr };
}
try {
  const good = GOOD.slice(0, 7).map((g) => g[1]);
  let c = cli('good.jsonl', good);
  result(c.rc === 0 && c.out.endsWith('\n7 requests, 6 operations, 0 violations\n'), 'cli: a good log exits 0',
    `exit ${c.rc}: ${c.out}${c.err}`);
  c = cli('bad.jsonl', [good[0], BAD[0][1], good[3]]);
  result(c.rc === 1 && c.out.includes(`${c.file}:2: POST /v1/checkout/sessions: line_items[0][price_data][unit_price]: unknown parameter`) &&
    c.out.endsWith('\n3 requests, 2 operations, 1 violations\n'), 'cli: a bad log exits 1, naming the line and the parameter',
  `exit ${c.rc}: ${c.out}${c.err}`);
  c = cli('empty.jsonl', []);
  result(c.rc === 2 && /holds no request/.test(c.err), 'cli: an empty log exits 2', `exit ${c.rc}: ${c.out}${c.err}`);
  c = cli('missing.jsonl', null);
  result(c.rc === 2 && /cannot read/.test(c.err), 'cli: a missing log exits 2', `exit ${c.rc}: ${c.out}${c.err}`);
  c = cli('broken.jsonl', [good[0], 'POST /v1/refunds amount=1']);
  result(c.rc === 2 && /:2: not JSON/.test(c.err), 'cli: a line that is not JSON exits 2', `exit ${c.rc}: ${c.out}${c.err}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

console.log(`stripe_openapi_selftest: ${passed} passed, ${failed} failed`);
process.exitCode = failed ? 1 : 0;
