// fake_box.mjs: a stand-in for `stagedoor run`'s HTTP side, for the browser
// test without a box.  It serves the dashboard's files from src/dashboard/
// (the binary embeds the same files) and the /v1 JSON shapes documented at
// the top of src/dashboard/dashboard.js (and of charts.js, boxoffice.js),
// from a little state that moves like the box: a dead job retried leaves the
// dead list and shows up as ready; tonight's event keeps selling, its doors
// keep scanning, the queue's history rolls by the minute; orders can be
// found, sent again, given a new email address and cancelled (refused, 409,
// when a seat was admitted).  The venue is in Europe/Berlin (whoami's
// timezone and zone_names).  Events are set up (POST /v1/events, a start
// without a zone in the venue's time; PATCH; close); a sale at the window
// (POST /v1/orders) is taken under its Idempotency-Key: the same key and
// body again answers the first order, never a second one; its tickets' PDF
// answers 404 until it is "rendered" (RENDER_MS later), then a small PDF.
//
// Every /v1 call needs "Authorization: Bearer <token>": --token T is an
// operator's; T-box_office, T-door (bound to event 1) and T-monitor are the
// other roles', and each route answers 403 to a role the real box refuses
// (the route table of src/api.c, and the contract's new routes).
//
// usage: node fake_box.mjs [--port N] [--token T]
// prints "listening http://127.0.0.1:PORT/" on stdout once it accepts.
import http from 'node:http';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { randomInt } from 'node:crypto';

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
  '/clock.js': ['clock.js', 'text/javascript; charset=utf-8'],
  '/charts.js': ['charts.js', 'text/javascript; charset=utf-8'],
  '/boxoffice.js': ['boxoffice.js', 'text/javascript; charset=utf-8'],
  '/dashboard.css': ['dashboard.css', 'text/css; charset=utf-8'],
};

/* the tokens: the operator's, and one per other role */
const OP = 1, BO = 2, DOOR = 4, MON = 8;
const tokens = new Map([
  [token, { role: 'operator', bit: OP, name: 'Operator laptop', event_id: null }],
  [token + '-box_office', { role: 'box_office', bit: BO, name: 'Box office laptop', event_id: null }],
  [token + '-door', { role: 'door', bit: DOOR, name: 'North door', event_id: 1 }],
  [token + '-monitor', { role: 'monitor', bit: MON, name: 'Wall screen', event_id: null }],
]);

const MIN = 60000, HOUR = 3600000;
const t0 = Date.now();
const hourOf = (ms) => Math.floor(ms / HOUR) * HOUR;
const minuteOf = (ms) => Math.floor(ms / MIN) * MIN;
/* noise: a repeatable number in [0, 1) for an integer (a minute, an hour) */
function noise(n, salt = 0) {
  let x = (Math.floor(n / 1000) ^ (salt * 0x9e3779b1)) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x45d9f3b) >>> 0;
  x = Math.imul(x ^ (x >>> 16), 0x45d9f3b) >>> 0;
  return ((x ^ (x >>> 16)) >>> 0) / 4294967296;
}

/* tonight's event started an hour ago (its doors scanning since); the
 * other one, sold out, is next month */
const tonight = hourOf(t0) - HOUR;
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const state = {
  events: [
    { id: 1, name: 'Midnight Quartet', venue: 'Hall', starts_at: iso(tonight), starts_at_ms: tonight, capacity: 200, orders: 20, seats_sold: 0, seats_remaining: 200, state: 'on_sale', closed_at: null },
    { id: 2, name: 'Stagedoor <Revue> & "Friends"', venue: 'Cellar', starts_at: '2027-01-02T19:30:00Z', starts_at_ms: 1798918200000, capacity: 80, orders: 30, seats_sold: 0, seats_remaining: 80, state: 'on_sale', closed_at: null },
    /* a summer night (CEST) gone by, sales closed; and one in winter (CET) */
    { id: 3, name: 'Summer Serenade', venue: 'Garden', starts_at: '2026-07-04T18:00:00Z', starts_at_ms: Date.UTC(2026, 6, 4, 18), capacity: 40, orders: 0, seats_sold: 0, seats_remaining: 40, state: 'closed', closed_at: '2026-07-04T18:00:00Z' },
    { id: 4, name: 'Advent Gala', venue: 'Hall', starts_at: '2026-12-04T19:00:00Z', starts_at_ms: Date.UTC(2026, 11, 4, 19), capacity: 40, orders: 0, seats_sold: 0, seats_remaining: 40, state: 'on_sale', closed_at: null },
  ],
  sales: new Map(),   /* event id -> [{hour, seats, orders}], oldest first */
  freed: new Map(),   /* event id -> seats freed by cancellations */
  orders: [],
  schedules: [],
  /* the queue's controls: one kind held to a rate from the start */
  controls: [
    { kind: 'send_tickets', paused: false, paused_at: null, paused_by: null, rate: '10/s burst 20',
      concurrency: null, box_concurrency: null, waiting: 3, running: 0, waited_ms: 1500 },
  ],
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
  scans: [],          /* live scans: {at, event_id, door, admitted} */
  retried: [],
};

/* ---- sales: hours with sales, the running total as seats_sold ---- */

function addSale(eventId, at, seats) {
  const list = state.sales.get(eventId) || [];
  const h = hourOf(at);
  let e = list.find((x) => x.hour === h);
  if (!e) list.push(e = { hour: h, seats: 0, orders: 0 });
  e.seats += seats;
  e.orders += 1;
  list.sort((a, b) => a.hour - b.hour);
  state.sales.set(eventId, list);
  syncEvent(eventId);
}

function syncEvent(eventId) {
  const ev = state.events.find((e) => e.id === eventId);
  const sold = (state.sales.get(eventId) || []).reduce((a, h) => a + h.seats, 0) - (state.freed.get(eventId) || 0);
  ev.seats_sold = sold;
  ev.seats_remaining = Math.max(0, ev.capacity - sold);
}

/* event 1: 150 seats over the two days before tonight; event 2: 80, sold
 * out over a week, in bursts */
for (const [id, seats, hours, salt, quiet] of [[1, 150, 48, 1, 0.5], [2, 80, 24 * 7, 2, 0.85]]) {
  const at = [], weight = [];
  for (let i = hours; i >= 1; i--) {
    const h = hourOf(t0) - i * HOUR;
    if (noise(h, salt) < quiet) continue;
    at.push(h + MIN);
    weight.push(0.2 + noise(h, salt + 7));
  }
  const sum = weight.reduce((a, w) => a + w, 0);
  let left = seats;
  at.forEach((t, i) => {
    const n = i === at.length - 1 ? left : Math.min(left, Math.round((seats * weight[i]) / sum));
    if (n > 0) addSale(id, t, n);
    left -= n;
  });
}

/* the gala: 2 of 40 sold, an hour ago (its chart must not look full) */
addSale(4, hourOf(t0) - HOUR + MIN, 2);

/* ---- orders: buyers, tickets, emails, changes ---- */

const buyers = ['Ada Lovelace', 'Grace Hopper', 'Alan Turing', 'Edsger Dijkstra', 'Barbara Liskov', 'Ken Thompson',
                'Margaret Hamilton', 'Dennis Ritchie', 'Frances Allen', 'Donald Knuth', 'Radia Perlman',
                'Zoë <b>O\'Brien</b> & "Co"'];
const nextSeat = new Map();
for (let i = 0; i < 12; i++) {
  const event_id = i % 3 === 0 ? 2 : 1, seats = 1 + (i % 4);
  const name = buyers[i];
  const email = name.toLowerCase().normalize('NFD').replace(/[^a-z ]/g, '').trim().replace(/ +/g, '.') + '@example.org';
  const created_at = t0 - i * 61000;
  const tickets = Array.from({ length: seats }, (_, k) => {
    const n = (nextSeat.get(event_id) || 0) + 1;
    nextSeat.set(event_id, n);
    return { id: 100 * (i + 1) + k, seat: (event_id === 1 ? 'A-' : 'C-') + n, state: 'valid',
             scanned_at: null, scanned_by: null, pdf_stored: i !== 0 };
  });
  state.orders.push({
    id: 'T' + String(1000 + i), event_id, seats, pdf: i !== 0,
    email: i === 0 ? 'pending' : i === 1 ? 'sending' : 'sent',
    created_at, name, email_address: email, payment: null, cancelled_at: null, resends: 0, tickets,
    emails: [{ kind: 'tickets', state: i === 0 ? 'pending' : i === 1 ? 'sending' : 'sent',
               sent_at: i > 1 ? created_at + 4000 : null }],
    changes: [],
  });
}
/* T1004: one of its seats is in (a cancel is refused); T1007: cancelled */
{
  const o = state.orders[4];
  Object.assign(o.tickets[0], { state: 'admitted', scanned_at: t0 - 20 * MIN, scanned_by: 'North door' });
  const c = state.orders[7];
  c.cancelled_at = t0 - 5 * MIN;
  for (const t of c.tickets) t.state = 'cancelled';
  c.emails.push({ kind: 'cancel', state: 'sent', sent_at: t0 - 5 * MIN + 3000 });
  c.changes.push({ at: t0 - 5 * MIN, kind: 'cancel', by: 'Box office laptop', detail: 'buyer is ill; 4 seats freed' });
  state.freed.set(1, c.seats);
  syncEvent(1);
}

function orderJson(o) {
  const ev = state.events.find((e) => e.id === o.event_id);
  return {
    id: o.id, event_id: o.event_id, event: ev.name, venue: ev.venue, starts_at: ev.starts_at,
    name: o.name, email: o.email_address, payment: o.payment, seats: o.seats, created_at: o.created_at,
    pdf_stored: o.pdf, pdf_key: o.pdf ? 'tickets/' + o.id + '.pdf' : null,
    cancelled_at: o.cancelled_at, resends: o.resends,
    tickets: o.tickets, emails: o.emails, changes: o.changes, jobs: [],
  };
}

function orderRow(o) {
  return { id: o.id, event_id: o.event_id, seats: o.seats, pdf: o.pdf, email: o.email, created_at: o.created_at,
           name: o.name, email_address: o.email_address, cancelled: o.cancelled_at !== null };
}

/* ---- the venue's clock: Europe/Berlin ---- */

const TZ = 'Europe/Berlin';
const ZONE_NAMES = { 3600: 'CET', 7200: 'CEST' };
const berlin = new Intl.DateTimeFormat('en-CA', { timeZone: TZ, hourCycle: 'h23', year: 'numeric', month: '2-digit',
                                                  day: '2-digit', hour: '2-digit', minute: '2-digit' });
function localOf(ms) {
  const p = Object.fromEntries(berlin.formatToParts(ms).map((x) => [x.type, x.value]));
  return `${p.year}-${p.month}-${p.day}T${p.hour}:${p.minute}`;
}

/* startsAt: a starts_at of a request as UTC ms, or {error}: RFC 3339 with a
 * zone, or "YYYY-MM-DDTHH:MM[:SS]" without one: the venue's local time,
 * refused when the clocks skip it or pass it twice */
function startsAt(v) {
  if (typeof v !== 'string') return { error: 'starts_at must be a date and time, e.g. 2026-12-31T20:00' };
  const m = v.match(/^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?(Z|[+-]\d{2}:\d{2})?$/);
  if (!m) return { error: 'starts_at must be a date and time, e.g. 2026-12-31T20:00' };
  const wall = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0));
  if (isNaN(wall) || new Date(wall).getUTCDate() !== +m[3]) return { error: 'starts_at is no date: ' + v };
  if (m[7]) {
    const off = m[7] === 'Z' ? 0 : (m[7][0] === '-' ? -1 : 1) * (+m[7].slice(1, 3) * 60 + +m[7].slice(4)) * MIN;
    return { ms: wall - off };
  }
  const local = `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}`;
  const fits = Object.keys(ZONE_NAMES).map((off) => wall - off * 1000).filter((ms) => localOf(ms) === local);
  if (!fits.length) return { error: `${local} does not happen in ${TZ}: the clocks skip that hour` };
  if (fits.length > 1) return { error: `${local} happens twice in ${TZ} (the clocks go back): give the offset, e.g. ${local}+01:00` };
  return { ms: fits[0] };
}

function eventJson(ev) {
  const s = scans(ev.id, Date.now());
  const cancelled = state.orders.filter((o) => o.event_id === ev.id && o.cancelled_at !== null)
    .reduce((a, o) => a + o.seats, 0);
  return { ...ev, admitted: s.admitted, to_come: s.to_come, cancelled, runs: ev.runs || [] };
}

/* cancelEvent: POST /v1/events/{id}/cancel {"reason"}, as the box answers
 * it: a reason of 1 to 200 characters, the event cancelled with its live
 * orders, and its run (finished at once here; the fake sells no priced
 * seats, so nothing is refunded or owed at the window); 202, or 200 with
 * the run as it is when it was cancelled before */
async function cancelEvent(req, res, ev, now) {
  const body = await readJson(req);
  if (body === null) return send(res, 400, { error: 'the body is not a JSON object' });
  const reason = body.reason;
  if (reason !== undefined && (typeof reason !== 'string' || reason.length > 200))
    return send(res, 400, { error: 'reason must be a string of at most 200 characters', field: 'reason' });
  if (!reason) return send(res, 400, { error: 'reason is missing: buyers are told why', field: 'reason' });
  if (ev.state === 'cancelled') return send(res, 200, eventJson(ev));
  const live = state.orders.filter((o) => o.event_id === ev.id && o.cancelled_at === null);
  live.forEach((o) => { o.cancelled_at = now; });
  Object.assign(ev, { state: 'cancelled', cancel_reason: reason, cancelled_at: iso(now) });
  ev.runs = [{ kind: 'cancel', orders: live.length, done: live.length, refunded: 0, at_window: 0,
               emailed: live.filter((o) => o.email_address).length, failed: 0,
               enqueued_at: iso(now), finished_at: iso(now) }];
  return send(res, 202, eventJson(ev));
}

/* eventFields: the fields of a POST or PATCH body checked; {error, field} or the changes */
function eventFields(body, creating) {
  const out = {};
  for (const k of ['name', 'venue']) {
    if (body[k] === undefined) { if (creating) return { error: k + ' is required', field: k }; continue; }
    if (typeof body[k] !== 'string' || !body[k].trim() || body[k].length > 200)
      return { error: k + ' must be 1 to 200 characters', field: k };
    out[k] = body[k].trim();
  }
  if (body.capacity !== undefined || creating) {
    if (!Number.isInteger(body.capacity) || body.capacity < 1 || body.capacity > 100000)
      return { error: 'capacity must be a whole number from 1 to 100000', field: 'capacity' };
    out.capacity = body.capacity;
  }
  if (body.starts_at !== undefined || creating) {
    const t = startsAt(body.starts_at);
    if (t.error) return { error: t.error, field: 'starts_at' };
    if (t.ms <= Date.now()) return { error: 'starts_at is in the past: ' + localOf(t.ms) + ' in ' + TZ, field: 'starts_at' };
    out.starts_at_ms = t.ms;
    out.starts_at = iso(t.ms);
  }
  return out;
}

/* ---- sales at the window: orders under an Idempotency-Key ---- */

const RENDER_MS = 1500;
const keys = new Map();       /* token + key -> {body, status, answer} (a 201 only) */
const inflight = new Set();
const B32 = 'ABCDEFGHJKLMNPQRSTUVWXYZ23456789';
const newOrderId = () => 'T' + Array.from({ length: 9 }, () => B32[randomInt(B32.length)]).join('');

/* a small PDF that a PDF viewer opens: one empty A4 page */
function tinyPdf(title) {
  const objs = ['<< /Type /Catalog /Pages 2 0 R >>', '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
                '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>',
                `<< /Title (${title.replace(/[()\\]/g, '')}) >>`];
  let out = '%PDF-1.4\n';
  const offs = objs.map((o, i) => { const at = out.length; out += `${i + 1} 0 obj\n${o}\nendobj\n`; return at; });
  const xref = out.length;
  out += `xref\n0 ${objs.length + 1}\n0000000000 65535 f \n` + offs.map((o) => String(o).padStart(10, '0') + ' 00000 n \n').join('');
  out += `trailer\n<< /Size ${objs.length + 1} /Root 1 0 R /Info 4 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return out;
}

/* orderFields: a sale's body checked: {error, field} or the order's fields */
function orderFields(body) {
  const ev = state.events.find((e) => e.id === body.event_id);
  if (!Number.isInteger(body.event_id)) return { status: 400, error: 'event_id must be an event\'s id', field: 'event_id' };
  if (!ev) return { status: 404, error: 'no event ' + body.event_id, field: 'event_id' };
  if (!Number.isInteger(body.seats) || body.seats < 1 || body.seats > 100)
    return { status: 400, error: 'seats must be a whole number from 1 to 100', field: 'seats' };
  if (typeof body.name !== 'string' || !body.name.trim() || body.name.length > 200)
    return { status: 400, error: 'name must be 1 to 200 characters', field: 'name' };
  if (body.email !== undefined && body.email !== null &&
      (typeof body.email !== 'string' || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(body.email)))
    return { status: 400, error: 'email must be an email address (or left out)', field: 'email' };
  if (body.payment !== 'cash' && body.payment !== 'card')
    return { status: 400, error: 'payment must be "cash" or "card"', field: 'payment' };
  if (ev.state === 'closed') return { status: 409, error: 'sales for this event are closed', field: 'event_id' };
  if (body.seats > ev.seats_remaining)
    return { status: 409, error: 'sold out: ' + ev.seats_remaining + ' seats left', field: 'seats' };
  return { ev, seats: body.seats, name: body.name.trim(), email: body.email || null, payment: body.payment };
}

function sell(f, who, now) {
  const n = nextSeat.get(f.ev.id) || 0;
  nextSeat.set(f.ev.id, n + f.seats);
  const o = {
    id: newOrderId(), event_id: f.ev.id, seats: f.seats, pdf: false, email: f.email ? 'pending' : null,
    created_at: now, name: f.name, email_address: f.email, payment: f.payment, cancelled_at: null, resends: 0,
    tickets: Array.from({ length: f.seats }, (_, k) => ({ id: 100000 + state.orders.length * 100 + k, seat: 'W-' + (n + k + 1),
                                                            state: 'valid', scanned_at: null, scanned_by: null, pdf_stored: false })),
    emails: f.email ? [{ kind: 'tickets', state: 'pending', sent_at: null }] : [],
    changes: [],
  };
  state.orders.unshift(o);
  f.ev.orders++;
  addSale(f.ev.id, now, f.seats);
  setTimeout(() => {
    o.pdf = true;
    for (const t of o.tickets) t.pdf_stored = true;
    if (o.emails[0]) { o.email = 'sent'; sendLater(o, o.emails[0]); }
  }, RENDER_MS);
  return { id: o.id, event_id: o.event_id, name: o.name, email: o.email_address, seats: o.seats,
           payment: o.payment, created_at: now };
}

/* an email goes out a moment later */
function sendLater(o, mail) {
  setTimeout(() => {
    mail.state = 'sent';
    mail.sent_at = Date.now();
    state.emails_sent++;
  }, 1500);
}

/* ---- the queue's last hour, a minute at a time ---- */

function history(now) {
  const minutes = [];
  const last = minuteOf(now) - MIN;
  for (let m = last - 59 * MIN; m <= last; m += MIN) {
    if (noise(m, 5) < 0.04) continue;    /* a minute the maintenance pass missed */
    const wave = Math.sin(m / (9 * MIN)), r = noise(m, 3);
    minutes.push({
      minute: m,
      ready: Math.max(0, Math.round(6 + 5 * wave + 4 * r)),
      scheduled: Math.round(2 + 2 * noise(m, 4)),
      leased: Math.round(1 + 3 * noise(m, 6)),
      dead: state.dead.length,
      done: Math.max(0, Math.round(70 + 35 * wave + 20 * r)),
      failed: noise(m, 8) < 0.2 ? 1 + Math.floor(noise(m, 9) * 4) : 0,
    });
  }
  return { minutes };
}

/* ---- the doors: scans per minute since the doors opened ---- */

const DOORS = ['North door', 'South door'];
function scans(eventId, now) {
  const ev = state.events.find((e) => e.id === eventId);
  const per = new Map(), doors = new Map(DOORS.map((d) => [d, { door: d, admitted: 0, refused: 0, last_at: null }]));
  const add = (m, at, door, admitted) => {
    const e = per.get(m) || { minute: m, admitted: 0, refused: 0 };
    e[admitted ? 'admitted' : 'refused']++;
    per.set(m, e);
    const d = doors.get(door) || { door, admitted: 0, refused: 0, last_at: null };
    d[admitted ? 'admitted' : 'refused']++;
    d.last_at = Math.max(d.last_at || 0, at);
    doors.set(door, d);
  };
  if (eventId === 1) {
    /* the doors opened 90 minutes ago: a rush before the start, then a trickle */
    const open = minuteOf(now) - 90 * MIN;
    for (let m = open; m < minuteOf(now); m += MIN) {
      const toStart = (tonight - m) / MIN;
      const rush = Math.max(0, 1 - Math.abs(toStart - 10) / 40);
      const n = Math.round(rush * 6 * noise(m, 11) + (noise(m, 12) < 0.3 ? 1 : 0));
      for (let k = 0; k < n; k++) add(m, m + k * 7000, DOORS[(m / MIN + k) % 2], noise(m + k * 1000, 13) > 0.07);
    }
  }
  for (const s of state.scans) if (s.event_id === eventId) add(minuteOf(s.at), s.at, s.door, s.admitted);
  const minutes = [...per.values()].sort((a, b) => a.minute - b.minute).slice(-360);
  const admitted = minutes.reduce((a, m) => a + m.admitted, 0);
  return { event_id: eventId, admitted, to_come: Math.max(0, ev.seats_sold - admitted), per_minute: minutes,
           per_door: [...doors.values()].filter((d) => d.last_at !== null) };
}

/* tonight keeps selling: a seat or two every 20 s, up to the capacity */
setInterval(() => {
  const ev = state.events[0];
  if (ev.state === 'on_sale' && ev.seats_sold < ev.capacity) addSale(1, Date.now(), 1 + (Date.now() % 2));
  state.done += 3;
}, 20000).unref();

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
    events: state.events.map(eventJson),
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

async function readJson(req) {
  const text = await readBody(req);
  if (!text) return {};
  try {
    const v = JSON.parse(text);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

/* the route table: method, path pattern, the roles that may call it */
const ROUTES = [
  ['GET', /^\/v1\/whoami$/, OP | BO | DOOR | MON],
  ['GET', /^\/v1\/stats$/, OP | MON],
  ['GET', /^\/v1\/stats\/history$/, OP | MON],
  ['GET', /^\/v1\/events$/, OP | BO | MON],
  ['POST', /^\/v1\/events$/, OP],
  ['PATCH', /^\/v1\/events\/[^/]+$/, OP],
  ['POST', /^\/v1\/events\/[^/]+\/close$/, OP],
  ['POST', /^\/v1\/events\/[^/]+\/cancel$/, OP],
  ['GET', /^\/v1\/events\/[^/]+$/, OP | BO | DOOR | MON],
  ['GET', /^\/v1\/events\/[^/]+\/sales$/, OP | BO],
  ['GET', /^\/v1\/events\/[^/]+\/scans$/, OP | BO | DOOR],
  ['GET', /^\/v1\/jobs$/, OP],
  ['POST', /^\/v1\/jobs\/[^/]+\/retry$/, OP],
  ['GET', /^\/v1\/controls$/, OP | MON],
  ['POST', /^\/v1\/kinds\/[^/]+\/(pause|resume)$/, OP],
  ['GET', /^\/v1\/schedules$/, OP | MON],
  ['POST', /^\/v1\/schedules$/, OP],
  ['DELETE', /^\/v1\/schedules\/[^/]+$/, OP],
  ['GET', /^\/v1\/orders$/, OP | BO],
  ['POST', /^\/v1\/orders$/, OP | BO],
  ['GET', /^\/v1\/orders\/[^/]+$/, OP | BO],
  ['PATCH', /^\/v1\/orders\/[^/]+$/, OP | BO],
  ['POST', /^\/v1\/orders\/[^/]+\/(resend|cancel)$/, OP | BO],
  ['GET', /^\/v1\/orders\/[^/]+\/tickets\.pdf$/, OP | BO],
  ['POST', /^\/v1\/scan$/, OP | DOOR],
];

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
  const auth = req.headers.authorization || '';
  const who = auth.startsWith('Bearer ') ? tokens.get(auth.slice(7)) : undefined;
  if (!who) return send(res, 401, { error: 'unauthorized' });
  const route = ROUTES.find(([m, re]) => m === req.method && re.test(p));
  if (!route) return send(res, 404, { error: 'not found' });
  if (!(route[2] & who.bit)) return send(res, 403, { error: 'the ' + who.role + ' role may not call this' });

  const now = Date.now();
  const eventOf = (id) => state.events.find((e) => String(e.id) === id);
  if (p === '/v1/whoami')
    return send(res, 200, { role: who.role, name: who.name, event_id: who.event_id, metrics_auth: false,
                            timezone: TZ, zone_names: ZONE_NAMES });
  if (p === '/v1/stats') return send(res, 200, stats());
  if (p === '/v1/stats/history') return send(res, 200, history(now));
  if (req.method === 'GET' && p === '/v1/events') return send(res, 200, { events: state.events.map(eventJson) });
  if (req.method === 'POST' && p === '/v1/events') {
    const body = await readJson(req);
    if (body === null) return send(res, 400, { error: 'the body is not a JSON object' });
    const f = eventFields(body, true);
    if (f.error) return send(res, 400, f);
    const ev = { id: Math.max(...state.events.map((e) => e.id)) + 1, name: f.name, venue: f.venue,
                 starts_at: f.starts_at, starts_at_ms: f.starts_at_ms, capacity: f.capacity, orders: 0,
                 seats_sold: 0, seats_remaining: f.capacity, state: 'on_sale', closed_at: null };
    state.events.push(ev);
    return send(res, 201, eventJson(ev));
  }
  let m = p.match(/^\/v1\/events\/([^/]+)(?:\/(sales|scans|close|cancel))?$/);
  if (m) {
    const ev = eventOf(decodeURIComponent(m[1]));
    if (!ev) return send(res, 404, { error: 'no event ' + m[1], field: 'id' });
    if (req.method === 'PATCH') {
      const body = await readJson(req);
      if (body === null) return send(res, 400, { error: 'the body is not a JSON object' });
      const f = eventFields(body, false);
      if (f.error) return send(res, 400, f);
      if (f.capacity !== undefined && f.capacity < ev.seats_sold)
        return send(res, 409, { error: `capacity ${f.capacity} is below the ${ev.seats_sold} seats sold`, field: 'capacity' });
      Object.assign(ev, f);
      syncEvent(ev.id);
      return send(res, 200, eventJson(ev));
    }
    if (m[2] === 'cancel') return cancelEvent(req, res, ev, now);
    if (m[2] === 'close') {
      if (ev.state !== 'closed') Object.assign(ev, { state: 'closed', closed_at: iso(now) });
      return send(res, 200, eventJson(ev));
    }
    if (who.event_id !== null && ev.id !== who.event_id) return send(res, 403, { error: 'this door reads its own event only' });
    if (m[2] === 'sales')
      return send(res, 200, { event_id: ev.id, capacity: ev.capacity, sold: ev.seats_sold, hours: state.sales.get(ev.id) || [] });
    if (m[2] === 'scans') return send(res, 200, scans(ev.id, now));
    return send(res, 200, eventJson(ev));
  }
  if (req.method === 'GET' && p === '/v1/jobs') {
    const st = url.searchParams.get('state');
    if (st === 'leased') return send(res, 200, { jobs: state.leased.map((j) => ({ ...j, lease_age_ms: now - j.leased_at, lease_expires_in_ms: j.visible_at - now })) });
    if (st === 'dead') return send(res, 200, { jobs: state.dead });
    return send(res, 400, { error: 'state must be leased or dead' });
  }
  if (req.method === 'GET' && p === '/v1/controls') return send(res, 200, { controls: state.controls });
  if (req.method === 'GET' && p === '/v1/schedules') return send(res, 200, { schedules: state.schedules });
  if (req.method === 'POST' && p === '/v1/schedules') {
    const b = await readJson(req);
    const units = { s: 1000, m: 60000, h: 3600000, d: 86400000 };
    const m2 = b && typeof b.every === 'string' ? b.every.match(/^(\d+)([smhd])$/) : null;
    if (!b || typeof b.name !== 'string' || !/^[a-z0-9_.-]{1,64}$/.test(b.name)) return send(res, 400, { error: 'name', field: 'name' });
    if (typeof b.kind !== 'string' || !/^[a-z0-9_.-]{1,64}$/.test(b.kind)) return send(res, 400, { error: 'kind', field: 'kind' });
    const cron = typeof b.cron === 'string' && /^(\S+ ){4}\S+$/.test(b.cron) ? b.cron : null;
    if (!m2 === !cron) return send(res, 400, { error: 'give every (a period) or cron', field: 'every' });
    if (state.schedules.some((x) => x.name === b.name)) return send(res, 409, { error: 'exists', field: 'name' });
    const ms = m2 ? Number(m2[1]) * units[m2[2]] : null;
    /* a cron's next time is not worked out here: an hour ahead stands for it */
    const sc = { name: b.name, kind: b.kind, payload: b.payload || {}, every_ms: ms, cron,
                 timezone: cron && b.timezone ? b.timezone : null, missed: b.missed || 'once',
                 next_at: ms ? (Math.floor(now / ms) + 1) * ms : now + 3600000, last_at: null,
                 last_job_id: null, made: 0, created_at: now };
    state.schedules.push(sc);
    state.schedules.sort((x, y) => (x.name < y.name ? -1 : 1));
    return send(res, 201, sc);
  }
  m = p.match(/^\/v1\/schedules\/([^/]+)$/);
  if (req.method === 'DELETE' && m) {
    const name = decodeURIComponent(m[1]);
    if (!state.schedules.some((x) => x.name === name)) return send(res, 404, { error: 'no such schedule' });
    state.schedules = state.schedules.filter((x) => x.name !== name);
    return send(res, 200, { name, removed: true });
  }
  m = p.match(/^\/v1\/kinds\/([^/]+)\/(pause|resume)$/);
  if (req.method === 'POST' && m) {
    const kind = decodeURIComponent(m[1]);
    if (!/^([a-z0-9_.-]{1,64}|sqs:[A-Za-z0-9_-]{1,55}(\.fifo)?)$/.test(kind)) return send(res, 404, { error: 'no such kind' });
    let c = state.controls.find((k) => k.kind === kind);
    if (!c) {
      c = { kind, paused: false, paused_at: null, paused_by: null, rate: null, concurrency: null,
            box_concurrency: null, waiting: 0, running: 0, waited_ms: 0 };
      state.controls.push(c);
    }
    c.paused = m[2] === 'pause';
    c.paused_at = c.paused ? now : null;
    c.paused_by = c.paused ? 'token:' + who.name : null;
    /* a control with nothing on is gone */
    if (!c.paused && !c.rate && !c.concurrency && !c.box_concurrency) state.controls = state.controls.filter((k) => k !== c);
    state.controls.sort((a, b) => (a.kind < b.kind ? -1 : 1));
    return send(res, 200, c);
  }
  m = p.match(/^\/v1\/jobs\/([^/]+)\/retry$/);
  if (req.method === 'POST' && m) {
    const id = decodeURIComponent(m[1]);
    const i = state.dead.findIndex((j) => j.job_id === id);
    if (i < 0) return send(res, 404, { error: 'no dead job ' + id });
    state.retried.push(state.dead.splice(i, 1)[0]);
    return send(res, 200, { job_id: id, retried: 1 });
  }
  if (req.method === 'GET' && p === '/v1/orders') {
    const q = url.searchParams.get('q');
    if (q !== null) {
      /* an id's prefix or an email, any case; a part of the name */
      const t = q.trim().toLowerCase();
      if (!t) return send(res, 400, { error: 'q is empty', field: 'q' });
      const found = state.orders.filter((o) => o.id.toLowerCase().startsWith(t) ||
        (o.email_address || '').toLowerCase() === t || o.name.toLowerCase().includes(t));
      return send(res, 200, { orders: found.sort((a, b) => b.created_at - a.created_at).slice(0, 20).map(orderRow) });
    }
    const n = Number(url.searchParams.get('recent') || 20);
    if (!Number.isInteger(n) || n < 1 || n > 100) return send(res, 400, { error: 'recent must be between 1 and 100', field: 'recent' });
    return send(res, 200, { orders: state.orders.slice(0, n).map(orderRow) });
  }
  if (req.method === 'POST' && p === '/v1/orders') {
    const hdr = (req.headers['idempotency-key'] || '').trim();
    if (!hdr) return send(res, 400, { error: 'the Idempotency-Key header is required', field: 'Idempotency-Key' });
    /* as the box reads it: an sf-string "abc", or a bare sf-token abc (a letter first) */
    const m = /^"((?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"$/.exec(hdr) ||
              /^([A-Za-z*][A-Za-z0-9!#$%&'*+\-.^_`|~:/]*)$/.exec(hdr);
    const key = m ? m[1].replace(/\\(["\\])/g, '$1') : '';
    if (!key || key.length > 200 || /[^\x21-\x7e]/.test(key))
      return send(res, 400, { error: 'the Idempotency-Key must be a string of 1 to 200 printable ASCII characters, quoted ("abc") or bare (abc) without spaces', field: 'Idempotency-Key' });
    const text = await readBody(req);
    let body = null;
    try { body = JSON.parse(text); } catch { /* below */ }
    if (!body || typeof body !== 'object' || Array.isArray(body)) return send(res, 400, { error: 'the body is not a JSON object' });
    const k = auth + '\n' + key, same = JSON.stringify(body);
    const seen = keys.get(k);
    if (seen) {
      if (seen.body !== same)
        return send(res, 422, { error: 'this Idempotency-Key was used with a different request body', field: 'Idempotency-Key' });
      return send(res, seen.status, seen.answer);
    }
    if (inflight.has(k)) {
      res.setHeader('Retry-After', '1');
      return send(res, 409, { error: 'a request with this Idempotency-Key is still running', field: 'Idempotency-Key' });
    }
    inflight.add(k);
    try {
      await new Promise((r) => setTimeout(r, 250));   /* the commit takes a moment: a double click meets it */
      const f = orderFields(body);
      if (f.error) return send(res, f.status, { error: f.error, field: f.field });
      const answer = JSON.stringify(sell(f, who, Date.now()));
      keys.set(k, { body: same, status: 201, answer });
      return send(res, 201, answer);
    } finally {
      inflight.delete(k);
    }
  }
  m = p.match(/^\/v1\/orders\/([^/]+)\/tickets\.pdf$/);
  if (req.method === 'GET' && m) {
    const id = decodeURIComponent(m[1]).toUpperCase();
    const o = state.orders.find((x) => x.id === id);
    if (!o) return send(res, 404, { error: 'no order ' + id, field: 'id' });
    if (!o.pdf) return send(res, 404, { error: 'the tickets are not rendered yet' });
    return send(res, 200, tinyPdf('Tickets ' + o.id), 'application/pdf');
  }
  m = p.match(/^\/v1\/orders\/([^/]+)(?:\/(resend|cancel))?$/);
  if (m) {
    const o = state.orders.find((x) => x.id === decodeURIComponent(m[1]).toUpperCase());
    if (!o) return send(res, 404, { error: 'no order ' + decodeURIComponent(m[1]), field: 'id' });
    if (req.method === 'GET') return send(res, 200, orderJson(o));
    const body = await readJson(req);
    if (body === null) return send(res, 400, { error: 'the body is not a JSON object' });
    if (m[2] === 'resend') {
      if (o.cancelled_at !== null)
        return send(res, 409, { error: `order ${o.id} is cancelled: its tickets are not sent again`, field: 'id' });
      if (!o.email_address)
        return send(res, 409, { error: `order ${o.id} has no email address: give it one first`, field: 'email' });
      o.resends++;
      const mail = { kind: 'tickets-r' + o.resends, state: 'pending', sent_at: null };
      o.emails.push(mail);
      o.changes.push({ at: now, kind: 'resend', by: who.name, detail: 'tickets to ' + o.email_address });
      sendLater(o, mail);
      return send(res, 202, { id: o.id, resend: o.resends });
    }
    if (m[2] === 'cancel') {
      const reason = body.reason === undefined ? '' : body.reason;
      if (typeof reason !== 'string' || reason.length > 200)
        return send(res, 400, { error: 'reason must be a string of at most 200 characters', field: 'reason' });
      if (o.cancelled_at !== null) return send(res, 200, { id: o.id, cancelled: true, already: true, seats_freed: 0 });
      const admitted = o.tickets.filter((t) => t.state === 'admitted')
        .map((t) => ({ seat: t.seat, scanned_at: t.scanned_at, scanned_by: t.scanned_by }));
      if (admitted.length) {
        const a = admitted[0];
        return send(res, 409, { error: `seat ${a.seat} was admitted at ${new Date(a.scanned_at).toISOString()} by ${a.scanned_by}: the order is not cancelled`,
                                field: 'id', admitted });
      }
      o.cancelled_at = now;
      for (const t of o.tickets) t.state = 'cancelled';
      state.freed.set(o.event_id, (state.freed.get(o.event_id) || 0) + o.seats);
      syncEvent(o.event_id);
      const mail = { kind: 'cancel', state: 'pending', sent_at: null };
      o.emails.push(mail);
      sendLater(o, mail);
      o.changes.push({ at: now, kind: 'cancel', by: who.name, detail: (reason ? reason + '; ' : '') + o.seats + ' seats freed' });
      return send(res, 200, { id: o.id, cancelled: true, already: false, seats_freed: o.seats });
    }
    /* PATCH {"email"} */
    if (typeof body.email !== 'string' || !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(body.email) || body.email.length > 254)
      return send(res, 400, { error: 'email must be an email address', field: 'email' });
    if (o.cancelled_at !== null) return send(res, 409, { error: 'the order is cancelled', field: 'id' });
    if (body.email !== o.email_address) {
      o.changes.push({ at: now, kind: 'email', by: who.name, detail: o.email_address + ' -> ' + body.email });
      o.email_address = body.email;
    }
    return send(res, 200, orderJson(o));
  }
  if (req.method === 'POST' && p === '/v1/scan') {
    let code = '';
    try { code = JSON.parse(await readBody(req)).code || ''; } catch { return send(res, 400, { error: 'bad JSON' }); }
    code = String(code).toUpperCase();
    const door = who.role === 'door' ? who.name : 'South door';
    if (!/^SD[A-Z0-9]{6,}$/.test(code)) {
      state.scans.push({ at: now, event_id: 1, door, admitted: false });
      return send(res, 200, { result: 'invalid' });
    }
    if (state.scanned.has(code)) {
      state.scans.push({ at: now, event_id: 1, door, admitted: false });
      return send(res, 200, { result: 'already_scanned', scanned_at: state.scanned.get(code), seat: 'A1', order_id: 'T1000', scanned_by: door });
    }
    state.scanned.set(code, now);
    state.scans.push({ at: now, event_id: 1, door, admitted: true });
    return send(res, 200, { result: 'admitted', scanned_at: now, seat: 'A1', order_id: 'T1000', scanned_by: door });
  }
  return send(res, 404, { error: 'not found' });
});

server.listen(port, '127.0.0.1', () => {
  console.log('listening http://127.0.0.1:' + server.address().port + '/');
});
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
