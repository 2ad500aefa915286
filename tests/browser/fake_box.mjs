// fake_box.mjs: a stand-in for `stagedoor run`'s HTTP side, for the browser
// test until the real API lands.  It serves the dashboard's files from
// src/dashboard/ (the binary embeds the same files) and the /v1 JSON shapes
// documented at the top of src/dashboard/dashboard.js, from a little state
// that moves like the box: a dead job retried leaves the dead list and shows
// up as ready.  Every /v1 call needs "Authorization: Bearer <token>".
//
// usage: node fake_box.mjs [--port N] [--token T]
// prints "listening http://127.0.0.1:PORT/" on stdout once it accepts.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const assetsDir = path.resolve(here, '../../src/dashboard');

function arg(name, def) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}
const port = Number(arg('port', '0'));
const token = arg('token', 'test-token');

const assets = {
  '/': ['index.html', 'text/html; charset=utf-8'],
  '/dashboard.js': ['dashboard.js', 'text/javascript; charset=utf-8'],
  '/dashboard.css': ['dashboard.css', 'text/css; charset=utf-8'],
};

const t0 = Date.now();
const state = {
  events: [
    { id: 1, name: 'Midnight Quartet', venue: 'Hall', starts_at: '2026-12-31T20:00:00Z', starts_at_ms: 1798747200000, capacity: 200, orders: 20, seats_sold: 37, seats_remaining: 163 },
    { id: 2, name: 'Stagedoor <Revue> & "Friends"', venue: 'Cellar', starts_at: '2027-01-02T19:30:00Z', starts_at_ms: 1798918200000, capacity: 80, orders: 30, seats_sold: 80, seats_remaining: 0 },
  ],
  orders: Array.from({ length: 12 }, (_, i) => ({
    id: 'T' + String(1000 + i),
    event_id: i % 3 === 0 ? 2 : 1,
    seats: 1 + (i % 4),
    pdf: i !== 0,
    email: i === 0 ? 'pending' : i === 1 ? 'sending' : 'sent',
    created_at: t0 - i * 61000,
  })),
  leased: [
    { state: 'leased', id: 41, job_id: 'outbox:41', kind: 'render_tickets', payload: { order_id: 41 }, priority: 0, deliveries: 1, attempts: 0, visible_at: t0 + 28800, created_at: t0 - 1500, leased_at: t0 - 200000, worker: 'w1', last_error: null },
    { state: 'leased', id: 42, job_id: 'outbox:42', kind: 'send_tickets', payload: { order_id: 40 }, priority: 0, deliveries: 2, attempts: 1, visible_at: t0 + 15000, created_at: t0 - 60000, leased_at: t0 - 45000, worker: 'w2', last_error: null },
  ],
  dead: [
    { state: 'dead', id: 7, job_id: 'outbox:7', kind: 'send_tickets', payload: { order_id: 7 }, priority: 0, deliveries: 5, attempts: 5, created_at: t0 - 900000, died_at: t0 - 300000, last_error: 'mail: 550 <script>alert(1)</script> mailbox unavailable' },
    { state: 'dead', id: 9, job_id: 'outbox:9', kind: 'render_tickets', payload: { order_id: 9 }, priority: 0, deliveries: 3, attempts: 3, created_at: t0 - 800000, died_at: t0 - 200000, last_error: 'pdf: disk full' },
  ],
  ready: 3, scheduled: 1, done: 421, emails_sent: 10,
  scanned: new Map(),
  retried: [],
};

function stats() {
  const kinds = ['render_tickets', 'send_tickets', 'update_sales_counter'];
  const by_kind = {};
  for (const k of kinds) {
    by_kind[k] = {
      ready: (k === 'update_sales_counter' ? state.ready : 0) + (k === 'render_tickets' ? state.retried.length : 0),
      scheduled: k === 'update_sales_counter' ? state.scheduled : 0,
      leased: state.leased.filter((j) => j.kind === k).length,
      dead: state.dead.filter((j) => j.kind === k).length,
      done: k === 'update_sales_counter' ? state.done : 0,
    };
  }
  return {
    jobs: {
      total: { ready: state.ready + state.retried.length, scheduled: state.scheduled, leased: state.leased.length, dead: state.dead.length, done: state.done },
      by_kind,
    },
    orders: state.orders.length,
    emails_sent: state.emails_sent,
    events: state.events,
    done_per_minute: 90,
    duplicates_absorbed: { check_state: 3, unique_claim: 5, provider_key: 1, processed_jobs: 2 },
    stale_acks: 1,
    disk: { db_free_bytes: 80 * 1024 ** 3, state_free_bytes: 300 * 1024 ** 2, warn_bytes: 512 * 1024 ** 2, low: true },
    /* the last attempt failed: the card is red, with the newest good one's age */
    backup: { dir: '/var/backups/stagedoor', interval_ms: 3600000, ok: false, count: 24, failures_total: 2,
              last_ok: 'stagedoor-20261201T180000Z', last_ok_at: '2026-12-01T18:00:00Z',
              last_ok_at_ms: Date.UTC(2026, 11, 1, 18), age_ms: 3 * 3600000 + 240000, last_failed: true,
              error: 'backup: cannot make /var/backups/stagedoor/stagedoor-20261201T210000Z.partial-812: No space left on device' },
  };
}

function send(res, status, body, type = 'application/json') {
  const data = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
  res.writeHead(status, {
    'Content-Type': type,
    'Content-Length': Buffer.byteLength(data),
    'X-Content-Type-Options': 'nosniff',
    'Cache-Control': 'no-store',
  });
  res.end(data);
}

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return Buffer.concat(chunks).toString('utf8');
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://box');
  const p = url.pathname;
  if ((req.method === 'GET' || req.method === 'HEAD') && assets[p]) {
    const [file, type] = assets[p];
    const data = readFileSync(path.join(assetsDir, file));
    res.writeHead(200, {
      'Content-Type': type, 'Content-Length': data.length, 'X-Content-Type-Options': 'nosniff',
      'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    });
    return res.end(req.method === 'HEAD' ? undefined : data);
  }
  if (!p.startsWith('/v1/')) return send(res, 404, { error: 'not found' });
  if (req.headers.authorization !== 'Bearer ' + token) return send(res, 401, { error: 'unauthorized' });

  const now = Date.now();
  if (req.method === 'GET' && p === '/v1/stats') return send(res, 200, stats());
  if (req.method === 'GET' && p === '/v1/jobs') {
    const st = url.searchParams.get('state');
    if (st === 'leased') return send(res, 200, { jobs: state.leased.map((j) => ({ ...j, lease_age_ms: now - j.leased_at, lease_expires_in_ms: j.visible_at - now })) });
    if (st === 'dead') return send(res, 200, { jobs: state.dead });
    return send(res, 400, { error: 'state must be leased or dead' });
  }
  let m = p.match(/^\/v1\/jobs\/([^/]+)\/retry$/);
  if (req.method === 'POST' && m) {
    const id = decodeURIComponent(m[1]);
    const i = state.dead.findIndex((j) => j.job_id === id);
    if (i < 0) return send(res, 404, { error: 'no dead job ' + id });
    state.retried.push(state.dead.splice(i, 1)[0]);
    return send(res, 200, { job_id: id, retried: 1 });
  }
  if (req.method === 'GET' && p === '/v1/orders') {
    const n = Number(url.searchParams.get('recent') || 20);
    if (!Number.isInteger(n) || n < 1 || n > 100) return send(res, 400, { error: 'recent must be between 1 and 100', field: 'recent' });
    return send(res, 200, { orders: state.orders.slice(0, n) });
  }
  m = p.match(/^\/v1\/orders\/([^/]+)\/tickets\.pdf$/);
  if (req.method === 'GET' && m) {
    const o = state.orders.find((x) => x.id === decodeURIComponent(m[1]));
    if (!o || !o.pdf) return send(res, 404, { error: 'no tickets yet' });
    return send(res, 200, '%PDF-1.4\n% fake\n%%EOF\n', 'application/pdf');
  }
  if (req.method === 'POST' && p === '/v1/scan') {
    let code = '';
    try { code = JSON.parse(await readBody(req)).code || ''; } catch { return send(res, 400, { error: 'bad JSON' }); }
    if (!/^SD[A-Z0-9]{6,}$/.test(code)) return send(res, 200, { result: 'invalid' });
    if (state.scanned.has(code)) return send(res, 200, { result: 'already_scanned', scanned_at: state.scanned.get(code), seat: 'A1', order_id: 'T1000' });
    state.scanned.set(code, now);
    return send(res, 200, { result: 'admitted', scanned_at: now, seat: 'A1', order_id: 'T1000' });
  }
  return send(res, 404, { error: 'not found' });
});

server.listen(port, '127.0.0.1', () => {
  console.log('listening http://127.0.0.1:' + server.address().port + '/');
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
