// venue.mjs: the dashboard's work for the venue (issue 28), in a real
// browser: Debian's chromium, headless, driven by playwright-core.  With an
// operator's TOKEN, against a running box (or fake_box.mjs), it:
//   1. reads GET /v1/whoami (timezone, zone_names) and checks that every
//      event's start in #events-list is on the venue's clock, "YYYY-MM-DD
//      HH:MM ABBR" (computed here from whoami); with Europe/Berlin and the
//      events starting 2036-07-04T18:00:00Z and 2036-12-04T19:00:00Z (when
//      the box has them) exactly "2036-07-04 20:00 CEST" and "2026-12-04
//      20:00 CET";
//   2. checks the night (#night-list): exactly the events of the venue's
//      today and next 7 days, and those started in the last 12 hours, each
//      with its start, sold / capacity, admitted, seats left and state;
//   3. creates an event from the "New event" form: first with a start in
//      the past (refused: the server's message shown at the start field, no
//      event made), then tomorrow 20:00 venue time (the server's event
//      starts at 20:00 on the venue's clock, and shows in the night);
//   4. edits its capacity (the PATCH carries the capacity alone);
//   5. sells 3 seats at the window with a double click on Sell: every
//      attempt carries the same Idempotency-Key and the event's seats sold
//      and orders go up once (3 seats, 1 order); the order has payment card;
//   6. sells a walk-up seat (no email, cash) whose first answer is lost on
//      the way: the page asks again with the same key, and one order is
//      made; the key is not the first sale's;
//   7. prints its tickets: the page polls GET /v1/orders/{id}/tickets.pdf
//      until it answers application/pdf, and opens it in a new tab (a blob:
//      URL); then opens the order in the box office: paid cash at the window, "no
//      email", resend disabled, the email field enabled;
//   8. sets the capacity below the seats sold: refused (409), the server's
//      message shown at the capacity field;
//   9. draws the event's sales chart: one scale (data-scale-max at least the
//      capacity: the max of capacity and sold), each hour's bar at its
//      fraction of that scale, the capacity line at the top, "N of C sold";
//  10. closes the event's sales through the confirmation step (nothing
//      closed before the "yes"): it shows "sales closed", has no Close
//      button, is not offered in the sale form, and a POST /v1/orders to it
//      by this script gets 409;
//  10b. cancels the event through its reason step: without a reason the
//      page says why and posts nothing; with one, the event is cancelled
//      (the API's state "cancelled", no Cancel button left) and its row
//      shows the run's progress until both its orders are done (a free
//      event: nothing owed) and the one with an address is told (the box's
//      workers do it);
//  11. opens an order with a ticket admitted at the door: the cancel is
//      disabled and the page says so ("N ticket(s) of this order were
//      admitted at the door; it cannot be cancelled") without asking, and
//      nothing is posted;
//  12. on a 390x844 phone the night's first event row is on the first
//      screen, unscrolled; the page is no wider than the screen;
//  13. saves screenshots (SCREENSHOT, and SCREENSHOT with -phone), and
//      checks that the page asked nothing of another origin and threw no
//      script error.
//
// The box under test needs: an operator token; whoami's timezone; an event
// in the night's window (today to 7 days ahead, or started in the last 12
// hours); an order with a ticket admitted at the door.  Its events may not
// be named "Browser Night ..." (the ones this script makes).
//
// usage: node venue.mjs URL TOKEN SCREENSHOT.png
// DASHBOARD_TIMEOUT_MS (default 15000): each wait; raise it for a slow box.
// exit 0 on success; 1 with "venue: FAIL: ..." on stderr otherwise.
import { chromium } from 'playwright-core';

const [url, token, shot] = process.argv.slice(2);
if (!url || !token || !shot) {
  console.error('usage: node venue.mjs URL TOKEN SCREENSHOT.png');
  process.exit(2);
}
const origin = new URL(url).origin;
const TIMEOUT = Number(process.env.DASHBOARD_TIMEOUT_MS) > 0 ? Number(process.env.DASHBOARD_TIMEOUT_MS) : 15000;
const phoneShot = shot.replace(/(\.png)?$/i, '-phone.png');

class Fail extends Error {}
function check(cond, msg) { if (!cond) throw new Fail(msg); }

/* call: the API as this script sees it: {status, body} */
async function call(method, path, body, headers = {}) {
  const r = await fetch(new URL(path, origin), {
    method, headers: { Authorization: 'Bearer ' + token, ...(body ? { 'Content-Type': 'application/json' } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
  });
  const type = r.headers.get('Content-Type') || '';
  return { status: r.status, body: type.startsWith('application/json') ? await r.json() : null };
}
async function api(path) {
  const r = await call('GET', path);
  check(r.status === 200, `GET ${path}: HTTP ${r.status}`);
  return r.body;
}
const eventOf = (id) => api('/v1/events/' + encodeURIComponent(id));

/* the venue's clock, from whoami: parts, and "YYYY-MM-DD HH:MM ABBR" */
function venueClock(who) {
  const f = new Intl.DateTimeFormat('en-CA', { timeZone: who.timezone, hourCycle: 'h23', year: 'numeric',
    month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', timeZoneName: 'longOffset' });
  const parts = (ms) => {
    const p = Object.fromEntries(f.formatToParts(ms).map((x) => [x.type, x.value]));
    const m = /([+-])(\d{2}):(\d{2})/.exec(p.timeZoneName);
    const off = m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 3600 + Number(m[3]) * 60) : 0;
    const abbr = (who.zone_names || {})[String(off)] || (off ? (off < 0 ? '-' : '+') + m[2] + ':' + m[3] : 'UTC');
    return { date: `${p.year}-${p.month}-${p.day}`, time: `${p.hour}:${p.minute}`, abbr };
  };
  const when = (ms) => { const p = parts(ms); return `${p.date} ${p.time} ${p.abbr}`; };
  const day = (ms) => { const [y, m, d] = parts(ms).date.split('-').map(Number); return Date.UTC(y, m - 1, d) / 86400000; };
  return { parts, when, day };
}

const STATE = (e) => (e.state === 'closed' ? 'sales closed' : e.seats_remaining <= 0 ? 'sold out' : 'on sale');
const cssq = (v) => String(v).replace(/["\\]/g, '\\$&');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function login(page) {
  const resp = await page.goto(url);
  check(resp && resp.ok(), `GET ${url}: HTTP ${resp && resp.status()}`);
  await page.locator('#token').waitFor({ state: 'visible' });
  await page.fill('#token', token);
  await page.click('#token-save');
  await page.waitForSelector('#status[data-refreshed]');
}

/* refreshed: waits for the page's next refresh (or two) */
async function refreshed(page, n = 1) {
  const r0 = Number(await page.$eval('#status', (s) => s.dataset.refreshed || 0));
  await page.waitForFunction((b) => Number(document.getElementById('status').dataset.refreshed || 0) >= b, r0 + n);
}

/* until: polls fn (async, truthy when done) up to TIMEOUT; the last value */
async function until(fn, what) {
  let v;
  for (const t0 = Date.now(); Date.now() - t0 < TIMEOUT; await sleep(200)) if ((v = await fn())) return v;
  throw new Fail(what);
}

/* what the page says in its messages, for a failure's report */
let shown = async () => '';

async function main() {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const problems = [];
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    shown = () => page.evaluate(() => [...document.querySelectorAll('.field-error, .order-message')]
      .filter((x) => x.textContent.trim()).map((x) => `#${x.id}: ${x.textContent.trim()}`).join('; '));
    page.setDefaultTimeout(TIMEOUT);
    page.on('pageerror', (e) => problems.push('script error: ' + e.message));
    /* (chromium logs the 4xx the steps below ask for, and the attempt cut in step 6) */
    page.on('console', (m) => {
      if (m.type() === 'error' && !/status of 40[049]|ERR_CONNECTION_RESET/.test(m.text())) problems.push('console error: ' + m.text());
    });
    const posts = [];      /* POST /v1/orders as sent: {key, body} */
    const sent = [];       /* every other /v1 write: {method, path, body} */
    const pdfs = [];       /* the tickets.pdf answers: {status, type} */
    page.on('request', (r) => {
      const u = r.url();
      if (!u.startsWith('blob:') && !u.startsWith('data:') && !u.startsWith('about:') && new URL(u).origin !== origin)
        problems.push('request to another origin: ' + u);
      if (u.startsWith('blob:') || u.startsWith('about:')) return;
      const p = new URL(u).pathname;
      if (r.method() === 'POST' && p === '/v1/orders') {
        /* the key as the page sends it: an sf-string, "KEY" */
        const h = r.headers()['idempotency-key'] || '';
        posts.push({ key: /^"[^"\\]*"$/.test(h) ? h.slice(1, -1) : 'not an sf-string: ' + h,
                     body: JSON.parse(r.postData() || 'null') });
      } else if (r.method() !== 'GET' && p.startsWith('/v1/'))
        sent.push({ method: r.method(), path: p, body: r.postData() });
    });
    const answers = [];    /* the answers to the page's event writes: {path, status, body} */
    page.on('response', async (r) => {
      const u = new URL(r.url());
      if (u.pathname.endsWith('/tickets.pdf')) pdfs.push({ status: r.status(), type: r.headers()['content-type'] || '' });
      else if (r.request().method() !== 'GET' && u.pathname.startsWith('/v1/events'))
        answers.push({ path: u.pathname, status: r.status(), body: await r.json().catch(() => null) });
    });

    await login(page);
    const who = await api('/v1/whoami');
    check(who.role === 'operator', `the token is a ${who.role}'s: venue.mjs needs an operator's`);
    check(typeof who.timezone === 'string' && who.timezone, 'GET /v1/whoami has no timezone');
    check(who.zone_names && typeof who.zone_names === 'object', 'GET /v1/whoami has no zone_names');
    const clock = venueClock(who);

    // 1. every event's start on the venue's clock
    let events = (await api('/v1/events')).events;
    await page.waitForFunction((n) => document.querySelectorAll('#events-list tbody tr').length >= n, events.length);
    const starts = await page.$$eval('#events-list tbody tr', (l) => Object.fromEntries(
      l.map((tr) => [tr.dataset.eventId, tr.querySelector('td.when').textContent])));
    for (const e of events)
      check(starts[e.id] === clock.when(e.starts_at_ms),
            `event ${e.id} starts "${starts[e.id]}" on the page; on the venue's clock it is "${clock.when(e.starts_at_ms)}"`);
    check(Object.values(starts).every((t) => /^\d{4}-\d{2}-\d{2} \d{2}:\d{2} \S+$/.test(t)),
          'a start is not "YYYY-MM-DD HH:MM ABBR": ' + JSON.stringify(starts));
    const literal = [];
    if (who.timezone === 'Europe/Berlin') {
      for (const [at, want] of [['2036-07-04T18:00:00Z', '2036-07-04 20:00 CEST'], ['2036-12-04T19:00:00Z', '2036-12-04 20:00 CET']]) {
        const e = events.find((x) => x.starts_at_ms === Date.parse(at));
        if (!e) continue;
        check(starts[e.id] === want, `the event starting ${at} shows "${starts[e.id]}", not "${want}"`);
        literal.push(want);
      }
    }
    /* VENUE_FIXED_TIMES=1: the box was given both (tests/test_dashboard.c) */
    check(process.env.VENUE_FIXED_TIMES !== '1' || literal.length === 2,
          'VENUE_FIXED_TIMES=1 but the winter and summer events shown were ' + JSON.stringify(literal));

    // 2. the night
    const now = Date.now(), today = clock.day(now);
    const inNight = (e) => (e.starts_at_ms < now ? now - e.starts_at_ms <= 12 * 3600000
                                                 : clock.day(e.starts_at_ms) - today <= 7);
    const night = async () => page.$$eval('#night-list tbody tr[data-event-id]:not(.confirm-row)', (l) => l.map((tr) => ({
      id: tr.dataset.eventId, state: tr.dataset.state,
      cells: Array.from(tr.children, (td) => td.textContent),
      edit: !!tr.querySelector('button.edit'), close: !!tr.querySelector('button.close-sales'),
    })));
    let rows = [], want = [];
    await until(async () => {
      events = (await api('/v1/events')).events;
      want = events.filter(inNight).sort((a, b) => a.starts_at_ms - b.starts_at_ms);
      rows = await night();
      return JSON.stringify(rows.map((r) => r.id)) === JSON.stringify(want.map((e) => String(e.id)));
    }, 'the night does not list the events of today and the next 7 days').catch(() => {
      throw new Fail(`the night lists [${rows.map((r) => r.id)}]; the events of today and the next 7 days are [${want.map((e) => e.id)}]`);
    });
    check(want.length > 0, 'the box under test has no event in the night\'s window');
    const first = want[0];
    const row0 = rows[0];
    check(row0.cells[0] === first.name && row0.cells[2] === clock.when(first.starts_at_ms) &&
          row0.cells[6] === STATE(first) && row0.edit,
          `the night's first row is ${JSON.stringify(row0)} for ${JSON.stringify(first)}`);

    // 3. a new event: a start in the past is refused, at its field
    const name = 'Browser Night ' + Date.now().toString(36);
    const tomorrow = clock.parts(now + 86400000).date;
    const yesterday = clock.parts(now - 86400000).date;
    await page.click('#event-new');
    await page.locator('#event-form').waitFor({ state: 'visible' });
    check(await page.$eval('#event-form', (f) => f.dataset.mode) === 'create', 'the new event form is not in create mode');
    await page.fill('#event-name', name);
    await page.fill('#event-venue', 'Studio');
    await page.fill('#event-starts', yesterday + 'T20:00');
    await page.fill('#event-capacity', '50');
    answers.length = 0;
    await page.click('#event-save');
    await page.waitForFunction(() => document.getElementById('event-error-starts_at').textContent !== '');
    /* the answer's body is read by the listener after the page has shown it */
    const refusal = await until(() => answers.find((a) => a.path === '/v1/events'),
                                'no answer to the page\'s POST /v1/events was seen');
    check(refusal && refusal.status === 400 && refusal.body && refusal.body.field === 'starts_at',
          'a start in the past: the box answered ' + JSON.stringify(refusal));
    const shownWhy = await page.textContent('#event-error-starts_at');
    check(shownWhy === refusal.body.error, `the start's refusal shows "${shownWhy}", the box said "${refusal.body.error}"`);
    check(!(await api('/v1/events')).events.some((e) => e.name === name), 'the refused event was made');
    const postBody = JSON.parse(sent.filter((s) => s.path === '/v1/events').pop().body);
    check(postBody.starts_at === yesterday + 'T20:00' && !/Z|[+-]\d\d:\d\d$/.test(postBody.starts_at),
          'the start was not sent as the venue\'s local time without a zone: ' + JSON.stringify(postBody));

    // ... tomorrow 20:00 on the venue's clock is taken
    await page.fill('#event-starts', tomorrow + 'T20:00');
    await page.click('#event-save');
    await page.locator('#event-form').waitFor({ state: 'hidden' });
    const made = await until(async () => (await api('/v1/events')).events.find((e) => e.name === name),
                             `the event "${name}" was not made`);
    check(clock.when(made.starts_at_ms).startsWith(tomorrow + ' 20:00 '),
          `the event made starts at ${made.starts_at} = "${clock.when(made.starts_at_ms)}" on the venue's clock, not ${tomorrow} 20:00`);
    check(made.capacity === 50 && made.venue === 'Studio', 'the event made is ' + JSON.stringify(made));
    const rowSel = `#night-list tbody tr[data-event-id="${cssq(made.id)}"]:not(.confirm-row)`;
    await page.waitForSelector(rowSel);
    check(await page.textContent(`${rowSel} td.when`) === clock.when(made.starts_at_ms),
          'the new event\'s start in the night: ' + await page.textContent(`${rowSel} td.when`));

    // 4. its capacity edited: 50 -> 30, the PATCH carries the capacity alone
    await page.click(`${rowSel} button.edit`);
    await page.locator('#event-form[data-mode="edit"]').waitFor({ state: 'visible' });
    check(await page.inputValue('#event-starts') === tomorrow + 'T20:00',
          'the edit form\'s start is ' + await page.inputValue('#event-starts'));
    await page.fill('#event-capacity', '30');
    await page.click('#event-save');
    await page.locator('#event-form').waitFor({ state: 'hidden' });
    const patch = sent.filter((s) => s.method === 'PATCH').pop();
    check(patch && patch.path === '/v1/events/' + made.id && patch.body === '{"capacity":30}',
          'the edit sent ' + JSON.stringify(patch));
    check((await eventOf(made.id)).capacity === 30, 'the capacity is not 30 after the edit');

    // 5. a sale at the window, double-clicked
    const before = await eventOf(made.id);
    await page.waitForSelector(`#sell-event option[value="${cssq(made.id)}"]`, { state: 'attached' });
    await page.selectOption('#sell-event', String(made.id));
    await page.fill('#sell-seats', '3');
    await page.fill('#sell-name', 'Grace Hopper');
    await page.fill('#sell-email', 'grace@example.org');
    await page.check('#sell-card');
    const key1 = await page.$eval('#sell-form', (f) => f.dataset.key);
    posts.length = 0;
    await page.dblclick('#sell-go');
    await page.waitForFunction((k) => !document.getElementById('sold').hidden && document.getElementById('sell-form').dataset.key !== k, key1);
    const sold1 = await page.textContent('#sold-id');
    check(posts.length >= 1 && posts.every((p) => p.key === key1),
          `the double-clicked sale sent ${posts.length} POSTs with keys [${posts.map((p) => p.key)}], the form's key is ${key1}`);
    check(JSON.stringify(posts[0].body) === JSON.stringify({ event_id: made.id, seats: 3, name: 'Grace Hopper', email: 'grace@example.org', payment: 'card' }),
          'the sale sent ' + JSON.stringify(posts[0].body));
    await sleep(600);   /* a second sale would be on its way by now */
    const after1 = await eventOf(made.id);
    check(after1.seats_sold === before.seats_sold + 3 && after1.orders === before.orders + 1,
          `after the double-clicked sale of 3 seats: sold ${before.seats_sold} -> ${after1.seats_sold}, orders ${before.orders} -> ${after1.orders}`);
    const o1 = await api('/v1/orders/' + encodeURIComponent(sold1));
    check(o1.payment === 'card' && o1.seats === 3 && o1.email === 'grace@example.org', 'the order sold is ' + JSON.stringify(o1));

    // 6. a walk-up sale (no email, cash) whose first answer is lost
    await page.fill('#sell-seats', '1');
    await page.fill('#sell-name', 'Walk-up buyer');
    await page.check('#sell-cash');
    const key2 = await page.$eval('#sell-form', (f) => f.dataset.key);
    check(key2 && key2 !== key1, 'the second sale has the first one\'s key');
    let cut = 0;
    await page.route('**/v1/orders', async (route) => {
      if (route.request().method() === 'POST' && cut++ === 0) {
        await route.fetch();                 /* the box sells... */
        await route.abort('connectionreset');  /* ...and the answer is lost */
      } else {
        await route.continue();
      }
    });
    posts.length = 0;
    await page.click('#sell-go');
    await page.waitForFunction((id) => document.getElementById('sold-id').textContent !== id, sold1);
    await page.unroute('**/v1/orders');
    const sold2 = await page.textContent('#sold-id');
    check(posts.length >= 2 && posts.every((p) => p.key === key2),
          `the sale with a lost answer sent ${posts.length} POSTs with keys [${posts.map((p) => p.key)}], want >= 2 with ${key2}`);
    check(!('email' in posts[0].body) && posts[0].body.payment === 'cash', 'the walk-up sale sent ' + JSON.stringify(posts[0].body));
    const after2 = await eventOf(made.id);
    check(after2.seats_sold === after1.seats_sold + 1 && after2.orders === after1.orders + 1,
          `after the walk-up sale retried: sold ${after1.seats_sold} -> ${after2.seats_sold}, orders ${after1.orders} -> ${after2.orders}`);

    // 7. its tickets: polled until rendered, opened in a new tab
    const popup = context.waitForEvent('page', { timeout: TIMEOUT + 20000 });
    await page.click('#sold-print');
    const tab = await popup;
    await page.waitForSelector('#sold[data-pdf="opened"]', { timeout: TIMEOUT + 20000 });
    check(pdfs.some((p) => p.status === 200 && p.type.startsWith('application/pdf')),
          'no tickets.pdf of type application/pdf was fetched: ' + JSON.stringify(pdfs));
    check(pdfs.every((p) => p.status === 200 || p.status === 404), 'tickets.pdf answered ' + JSON.stringify(pdfs));
    await until(async () => tab.url().startsWith('blob:'), `the tickets' tab shows ${tab.url()}, not the PDF's blob: URL`);
    await tab.close();
    await page.click('#sold-open');
    await page.waitForFunction((id) => document.getElementById('order-detail').dataset.orderId === id, sold2);
    const facts = await page.$$eval('#order-facts dt', (l) => Object.fromEntries(l.map((dt) => [dt.textContent, dt.nextElementSibling.textContent])));
    check(facts.payment === 'cash at the window', 'the walk-up order\'s payment shows ' + facts.payment);
    check(facts.email === 'no email: tickets printed at the window', 'the walk-up order\'s email shows ' + facts.email);
    check(await page.isDisabled('#order-resend') && await page.isEnabled('#order-email'),
          'an order without email: resend must be disabled, the email field enabled');

    // 8. a capacity below the seats sold is refused, at its field
    await page.click(`${rowSel} button.edit`);
    await page.locator('#event-form[data-mode="edit"]').waitFor({ state: 'visible' });
    await page.fill('#event-capacity', '2');
    answers.length = 0;
    await page.click('#event-save');
    await page.waitForFunction(() => document.getElementById('event-error-capacity').textContent !== '');
    const capNo = await until(() => answers.find((a) => a.path === '/v1/events/' + made.id),
                              'no answer to the page\'s PATCH was seen');
    check(capNo && capNo.status === 409 && capNo.body.field === 'capacity', 'capacity 2: the box answered ' + JSON.stringify(capNo));
    check(await page.textContent('#event-error-capacity') === capNo.body.error,
          `the capacity's refusal shows "${await page.textContent('#event-error-capacity')}", the box said "${capNo.body.error}"`);
    check((await eventOf(made.id)).capacity === 30, 'the capacity changed after a refusal');
    await page.click('#event-form-close');

    // 9. the sales chart: one scale
    await page.selectOption('#chart-event', String(made.id));
    const ev9 = await eventOf(made.id);
    const chart = await until(async () => page.evaluate((id) => {
      const fig = document.getElementById('chart-sales');
      const svg = fig.querySelector('.plot svg');
      if (fig.dataset.eventId !== String(id) || !svg || svg.getAttribute('data-points') === '0') return null;
      return {
        max: Number(svg.getAttribute('data-scale-max')), top: Number(svg.getAttribute('data-plot-top')),
        bottom: Number(svg.getAttribute('data-plot-bottom')), note: fig.querySelector('.note').textContent,
        bars: Array.from(svg.querySelectorAll('rect.s-seats'), (r) => ({ v: Number(r.getAttribute('data-value')),
          y: Number(r.getAttribute('y')), h: Number(r.getAttribute('height')) })),
        cap: (() => { const l = svg.querySelector('line.s-capacity'); return l ? Number(l.getAttribute('y1')) : null; })(),
        zone: fig.querySelector('.zone').textContent,
      };
    }, made.id), 'the sales chart of the new event is not drawn');
    check(chart.max === Math.max(ev9.capacity, ev9.seats_sold),
          `the sales chart's scale goes to ${chart.max}; capacity ${ev9.capacity}, sold ${ev9.seats_sold}`);
    check(chart.note.startsWith(`${ev9.seats_sold} of ${ev9.capacity} sold`), `the sales chart says "${chart.note}"`);
    check(chart.bars.length > 0 && chart.bars.reduce((a, b) => a + b.v, 0) === ev9.seats_sold,
          'the sales chart\'s bars: ' + JSON.stringify(chart.bars));
    const span = chart.bottom - chart.top;
    for (const b of chart.bars)
      check(Math.abs(b.h - (b.v / chart.max) * span) <= 1 && Math.abs(b.y + b.h - chart.bottom) <= 1,
            `a bar of ${b.v} seats is ${b.h.toFixed(1)} of ${span} high; at ${b.v}/${chart.max} of the scale it would be ${(b.v / chart.max * span).toFixed(1)}`);
    check(chart.cap !== null && Math.abs(chart.cap - (chart.bottom - (ev9.capacity / chart.max) * span)) <= 1,
          `the capacity line is at y ${chart.cap}, not at ${ev9.capacity}/${chart.max} of the scale`);
    check(/^times \S+$/.test(chart.zone) && Object.values(who.zone_names).concat(['UTC']).some((z) => chart.zone.includes(z)) ||
          /^times [+-]\d\d:\d\d/.test(chart.zone), `the sales chart names its clock "${chart.zone}"`);

    // 10. close its sales: asked first, then closed
    await page.click(`${rowSel} button.close-sales`);
    await page.waitForSelector(`#night-list tr.confirm-row[data-event-id="${cssq(made.id)}"] button.close-confirm`);
    check((await eventOf(made.id)).state === 'on_sale', 'the sales were closed before the confirmation');
    await page.click(`#night-list tr.confirm-row[data-event-id="${cssq(made.id)}"] button.close-confirm`);
    await page.waitForSelector(`${rowSel}[data-state="closed"]`);
    check(await page.textContent(`${rowSel} td.state`) === 'sales closed', 'a closed event shows ' + await page.textContent(`${rowSel} td.state`));
    check(await page.locator(`${rowSel} button.close-sales`).count() === 0, 'a closed event still offers "Close sales"');
    const closed = await eventOf(made.id);
    check(closed.state === 'closed' && closed.closed_at, 'the event is not closed in the API: ' + JSON.stringify(closed));
    await until(async () => page.locator(`#sell-event option[value="${cssq(made.id)}"]`).count().then((n) => n === 0),
                'the closed event is still offered in the sale form');
    const late = await call('POST', '/v1/orders', { event_id: made.id, seats: 1, name: 'Too late', payment: 'cash' },
                            { 'Idempotency-Key': 'venue-late-' + Date.now() });
    check(late.status === 409, `a sale for the closed event answered ${late.status} ${JSON.stringify(late.body)}`);

    // 10b. cancel the whole event: asked why, then cancelled, its progress shown
    await page.click(`${rowSel} button.cancel-event`);
    const cancelSel = `#night-list tr.confirm-row[data-event-id="${cssq(made.id)}"]`;
    await page.waitForSelector(`${cancelSel} button.cancel-confirm`);
    const sentBefore = sent.length;
    await page.click(`${cancelSel} button.cancel-confirm`);
    await until(async () => /Say why/.test(await page.textContent('#night-message')),
                'a cancel without a reason says nothing');
    check(sent.length === sentBefore && (await eventOf(made.id)).state === 'closed',
          'a cancel without a reason was posted');
    await page.fill(`${cancelSel} input.cancel-reason`, 'The band is stuck in snow');
    await page.click(`${cancelSel} button.cancel-confirm`);
    await page.waitForSelector(`${rowSel}[data-state="cancelled"]`);
    check(await page.locator(`${rowSel} button.cancel-event`).count() === 0, 'a cancelled event still offers "Cancel event"');
    const gone = await eventOf(made.id);
    check(gone.state === 'cancelled' && gone.cancel_reason === 'The band is stuck in snow',
          'the event is not cancelled in the API: ' + JSON.stringify(gone));
    let progress = '';
    await until(async () => {
      progress = await page.textContent(`${rowSel} td.state .run-progress`).catch(() => '') || '';
      return /cancelled: 2 of 2 orders done, 0 refunded, 0 owed at the window, 1 emailed/.test(progress);
    }, 'the cancelled event\'s row does not show its run finished').catch(() => {
      throw new Fail('the cancelled event\'s row does not show its run finished: it shows "' + progress + '"');
    });
    const runs = (await api('/v1/events/' + encodeURIComponent(made.id))).runs;
    check(runs.length === 1 && runs[0].kind === 'cancel' && runs[0].orders === 2 && runs[0].done === 2,
          'the run in the API: ' + JSON.stringify(runs));

    // 11. the cancel of an order with an admitted ticket is refused before it asks
    let admittedOrder = null;
    for (const o of (await api('/v1/orders?recent=100')).orders) {
      const d = await api('/v1/orders/' + encodeURIComponent(o.id));
      const n = (d.tickets || []).filter((t) => t.state === 'admitted').length;
      if (n && d.cancelled_at == null) { admittedOrder = { id: d.id, n }; break; }
    }
    check(admittedOrder, 'the box under test has no order with a ticket admitted at the door');
    await page.fill('#order-search', admittedOrder.id.toLowerCase());
    await page.click('#order-search-go');
    const hit = `#order-results tbody tr[data-order-id="${cssq(admittedOrder.id)}"]`;
    await page.waitForSelector(hit);
    await page.click(hit);
    await page.waitForFunction((id) => document.getElementById('order-detail').dataset.orderId === id &&
                                       document.querySelector('#order-tickets tbody tr'), admittedOrder.id);
    await page.waitForSelector('#order-cancel-blocked', { state: 'visible' });
    const blocked = await page.textContent('#order-cancel-blocked');
    check(blocked === `${admittedOrder.n} ticket(s) of this order were admitted at the door; it cannot be cancelled`,
          `order ${admittedOrder.id}: the cancel says "${blocked}"`);
    check(await page.isDisabled('#order-cancel'), 'the cancel of an order with an admitted ticket is enabled');
    const writes = sent.length;
    await page.click('#order-cancel', { force: true });
    await sleep(300);
    check(await page.locator('#order-confirm').isHidden(), 'the cancel of an order with an admitted ticket asks to free its seats');
    check(!sent.slice(writes).some((s) => s.path.endsWith('/cancel')), 'a cancel was posted for an order with an admitted ticket');

    await page.screenshot({ path: shot, fullPage: true });

    // 12. a phone: the night's first row on the first screen
    const phone = await (await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true })).newPage();
    phone.setDefaultTimeout(TIMEOUT);
    phone.on('pageerror', (e) => problems.push('script error (phone): ' + e.message));
    await login(phone);
    await phone.waitForSelector('#night-list tbody tr[data-event-id]');
    const box = await phone.evaluate(() => {
      const r = document.querySelector('#night-list tbody tr[data-event-id]').getBoundingClientRect();
      return { top: r.top, bottom: r.bottom, scrollY: window.scrollY, h: window.innerHeight,
               over: document.documentElement.scrollWidth - window.innerWidth };
    });
    check(box.scrollY === 0 && box.top >= 0 && box.bottom <= box.h,
          `on a 390x844 phone the night's first event is at ${box.top.toFixed(0)}..${box.bottom.toFixed(0)} px (screen ${box.h}, scrolled ${box.scrollY})`);
    check(box.over <= 1, `on a 390 px phone the page is ${box.over} px too wide`);
    await phone.screenshot({ path: phoneShot });

    check(!problems.length, problems.join('; '));
    console.log(`venue: ok (event ${made.id} made, edited, sold ${sold1} double-clicked and ${sold2} retried, ` +
                `tickets printed, closed; ${literal.length ? literal.join(', ') : 'no fixed-time event'} shown; ` +
                `screenshots ${shot}, ${phoneShot})`);
  } catch (e) {
    const said = await shown().catch(() => '');
    if (said)
      console.error(`venue: the page says: ${said}`);
    throw e;
  } finally {
    await browser.close();
  }
}

main().then(() => process.exit(0), (e) => {
  console.error('venue: FAIL: ' + (e instanceof Fail ? e.message : (e && e.stack) || e));
  process.exit(1);
});
