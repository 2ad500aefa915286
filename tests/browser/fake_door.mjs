// fake_door.mjs: a stand-in for the box's HTTP side as the door page sees
// it (the contract of issue 16), for the door's browser test before the
// server has it all.  Like the binary it serves the files of the Makefile's
// ASSETS list at the paths tools/embed_assets gives them (index.html -> /,
// NAME.html -> /NAME, other files -> /BASENAME), with the Content-Security-
// Policy that src/http.c sends (read from src/http.c, so the page is tried
// under the box's own policy), and these /v1 routes, each needing
// "Authorization: Bearer <token>":
//
//   GET  /v1/whoami        {"role":"door", "name":NAME, "event_id":1,
//                          "timezone":"Europe/Berlin", "zone_names":{"3600":"CET", "7200":"CEST"}}
//   GET  /v1/events/1      the event, with admitted and to_come that move
//                          with the scans (another id: 403, as for a door
//                          token bound to event 1)
//   POST /v1/scan          {"code", "nonce"}: it verifies nothing but
//                          remembers codes: a code that looks like a ticket
//                          code (52 characters of base32) is admitted the
//                          first time, already_scanned after; anything else
//                          is invalid.  The same nonce again returns the first
//                          answer byte for byte and scans nothing.  For a
//                          look at the other answers by hand, type
//                          FAKECANCELLED, FAKEWRONGEVENT, FAKEDOORSCLOSED, or
//                          FAKE500 (a 500 every time: the page retries).
//   GET  /fake/scans       (no token) what it received: [{code, nonce,
//                          replayed}], for a test that wants to look
//
// usage: node fake_door.mjs [--port N] [--token T] [--name NAME]
// prints "listening http://127.0.0.1:PORT/" on stdout once it accepts.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');

function arg(name, def) {
  const i = process.argv.indexOf('--' + name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : def;
}
const port = Number(arg('port', '0'));
const token = arg('token', 'door-token');
const doorName = arg('name', 'North door');

/* The Makefile's ASSETS, with the paths tools/embed_assets serves them at. */
function assetsOfMakefile() {
  const mk = readFileSync(path.join(root, 'Makefile'), 'utf8').replace(/\\\n/g, ' ');
  const line = mk.split('\n').find((l) => /^ASSETS\s*:?=/.test(l));
  if (!line) throw new Error('fake_door: no ASSETS line in the Makefile');
  const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8',
                  '.css': 'text/css; charset=utf-8' };
  const out = {};
  for (const file of line.replace(/^ASSETS\s*:?=/, '').trim().split(/\s+/)) {
    const base = path.basename(file), ext = path.extname(base);
    const url = base === 'index.html' ? '/' : ext === '.html' ? '/' + base.slice(0, -5) : '/' + base;
    out[url] = [path.join(root, file), types[ext]];
  }
  return out;
}
const assets = assetsOfMakefile();

/* The policy src/http.c sends with every asset. */
function cspOfHttpC() {
  const src = readFileSync(path.join(root, 'src/http.c'), 'utf8');
  const m = src.match(/"Content-Security-Policy",\s*((?:"(?:[^"\\]|\\.)*"\s*)+)\)/);
  if (!m) throw new Error('fake_door: no Content-Security-Policy in src/http.c');
  return [...m[1].matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((x) => x[1]).join('');
}
const csp = cspOfHttpC();

const t0 = Date.now();
const event = {
  id: 1, name: 'Midnight Quartet', venue: 'Hall', starts_at: new Date(t0 + 3600000).toISOString(),
  starts_at_ms: t0 + 3600000, capacity: 200, orders: 60, seats_sold: 120, seats_remaining: 80,
  cancelled: 2,
};
const other = { id: 2, name: 'Stagedoor <Revue> & "Friends"', starts_at: '2027-01-02T19:30:00Z', starts_at_ms: 1798918200000 };
const state = {
  admittedBefore: 40,
  scanned: new Map(),     // code -> {at, seat, order_id, by}
  nonces: new Map(),      // token + nonce -> the answer's bytes
  log: [],
};

function eventJson() {
  const admitted = state.admittedBefore + state.scanned.size;
  return { ...event, admitted, to_come: event.seats_sold - event.cancelled - admitted };
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

/* answer: the result for a code, and what it changes. */
function answer(code, now) {
  if (code === 'FAKECANCELLED') return { result: 'cancelled', seat: 'B-7', order_id: 'T2CANCEL01' };
  if (code === 'FAKEWRONGEVENT') return { result: 'wrong_event', event: other };
  if (code === 'FAKEDOORSCLOSED')
    return { result: 'doors_closed', event: { id: event.id, name: event.name, starts_at: event.starts_at, starts_at_ms: event.starts_at_ms },
             doors_open_at: new Date(event.starts_at_ms - 3 * 3600000).toISOString(),
             doors_close_at: new Date(event.starts_at_ms + 6 * 3600000).toISOString() };
  if (!/^[A-Z2-7]{52}$/.test(code)) return { result: 'invalid' };
  const seen = state.scanned.get(code);
  if (seen) return { result: 'already_scanned', scanned_at: seen.at, seat: seen.seat, order_id: seen.order_id, scanned_by: seen.by };
  const n = state.scanned.size + 1;
  const first = { at: now, seat: 'A-' + n, order_id: 'T' + code.slice(-9), by: doorName };
  state.scanned.set(code, first);
  return { result: 'admitted', scanned_at: now, seat: first.seat, order_id: first.order_id, scanned_by: doorName };
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://box');
  const p = url.pathname;
  if ((req.method === 'GET' || req.method === 'HEAD') && assets[p]) {
    const [file, type] = assets[p];
    const data = readFileSync(file);
    res.writeHead(200, {
      'Content-Type': type, 'Content-Length': data.length, 'X-Content-Type-Options': 'nosniff',
      'Cache-Control': 'no-cache', 'Content-Security-Policy': csp, 'X-Frame-Options': 'DENY',
      'Referrer-Policy': 'no-referrer',
    });
    return res.end(req.method === 'HEAD' ? undefined : data);
  }
  if (req.method === 'GET' && p === '/fake/scans') return send(res, 200, state.log);
  if (!p.startsWith('/v1/')) return send(res, 404, { error: 'not found' });
  if (req.headers.authorization !== 'Bearer ' + token)
    return send(res, 401, { error: 'unknown token', field: 'Authorization' });

  if (req.method === 'GET' && p === '/v1/whoami')
    return send(res, 200, { role: 'door', name: doorName, event_id: event.id, metrics_auth: false,
                            timezone: 'Europe/Berlin', zone_names: { 3600: 'CET', 7200: 'CEST' } });
  const m = p.match(/^\/v1\/events\/([0-9]+)$/);
  if (req.method === 'GET' && m) {
    if (Number(m[1]) !== event.id) return send(res, 403, { error: 'this door token is for event 1', field: 'id' });
    return send(res, 200, eventJson());
  }
  if (req.method === 'POST' && p === '/v1/scan') {
    let body;
    try { body = JSON.parse(await readBody(req)); } catch { return send(res, 400, { error: 'the body is not JSON' }); }
    const { code, nonce } = body || {};
    if (typeof code !== 'string') return send(res, 400, { error: 'code must be a string', field: 'code' });
    if (nonce !== undefined && (typeof nonce !== 'string' || !/^[\x21-\x7e]{1,100}$/.test(nonce)))
      return send(res, 400, { error: 'nonce must be 1 to 100 printable ASCII characters, no spaces', field: 'nonce' });
    const key = nonce === undefined ? null : token + '\n' + nonce;
    if (key && state.nonces.has(key)) {
      state.log.push({ code, nonce, replayed: true });
      return send(res, 200, state.nonces.get(key));
    }
    state.log.push({ code, nonce: nonce === undefined ? null : nonce, replayed: false });
    if (code === 'FAKE500') return send(res, 500, { error: 'internal error' });
    const bytes = JSON.stringify(answer(code.toUpperCase(), Date.now()));   /* any case, as the box */
    if (key) state.nonces.set(key, bytes);
    return send(res, 200, bytes);
  }
  return send(res, 404, { error: 'not found' });
});

server.listen(port, '127.0.0.1', () => {
  console.log('listening http://127.0.0.1:' + server.address().port + '/');
});
for (const sig of ['SIGTERM', 'SIGINT'])
  process.on(sig, () => { server.close(() => process.exit(0)); server.closeAllConnections(); });
