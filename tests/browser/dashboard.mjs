// dashboard.mjs: the dashboard's browser test.  Debian's chromium, headless,
// driven by playwright-core (pinned in package-lock.json; no browser
// download).  Against a running box (or fake_box.mjs) it:
//   1. opens the page, gives it a wrong token (it must ask again), then fills
//      the API token into the page's token field;
//   2. checks the numbers shown against GET /v1/stats, fetched by this script
//      with the same token (the page refreshes itself: it waits for a match);
//   3. checks the in-flight and dead lists against GET /v1/jobs, and each
//      lease's age shown against its lease_age_ms;
//   4. scans a bogus code typed in lower case in the door-scan box: it is
//      sent upper-cased, and the answer is "invalid";
//   5. clicks Retry on a dead job and waits for it to leave the dead list
//      (and checks the API no longer holds that dead letter: on a real box a
//      job that fails every time may die again, as a new dead letter), then
//      that the page's dead list settles on the API's;
//   5b. checks the kinds held back (#controls-list) against GET /v1/controls,
//      pauses render_tickets through the page's form and resumes it with its
//      row's button, each seen in the API;
//   5c. adds a periodic job through #schedule-form, finds it in GET
//      /v1/schedules, removes it with its row's button; the same with a
//      cron expression and a zone;
//   6. checks the pictures of the night: each chart's <svg> drew as many
//      points (data-points) as its endpoint returned (GET /v1/events/{id}/sales
//      and /scans for the event the page shows, /v1/stats/history), the
//      sales' "N of C sold", and the doors' table against per_door;
//   7. the box office: finds the newest order by its id typed in lower case,
//      opens it and checks
//      its tickets against GET /v1/orders/{id}, sends its tickets again (a
//      success message, and the resend in the page's history and the API's);
//      finds the next order by its buyer's email in capitals, cancels it
//      (with a reason, through the confirmation step) and checks that it
//      shows as cancelled with none of its actions left enabled;
//   8. checks that the page fits a phone screen (no sideways scrolling), that
//      it asked nothing of any other origin, and threw no script error;
//   9. saves full-page screenshots: SCREENSHOT at 1280 px, and at 390x844
//      the same name with "-phone" before ".png".
//
// The box under test needs a dead job, two orders, and an event (it may
// have no sale, scan or history yet: an empty chart draws 0 points).
//
// usage: node dashboard.mjs URL TOKEN SCREENSHOT.png
// DASHBOARD_TIMEOUT_MS (default 15000): each wait; raise it for a slow box.
// exit 0 on success; 1 with "dashboard: FAIL: ..." on stderr otherwise.
import { chromium } from 'playwright-core';

const [url, token, shot] = process.argv.slice(2);
if (!url || !token || !shot) {
  console.error('usage: node dashboard.mjs URL TOKEN SCREENSHOT.png');
  process.exit(2);
}
const origin = new URL(url).origin;
const TIMEOUT = Number(process.env.DASHBOARD_TIMEOUT_MS) > 0 ? Number(process.env.DASHBOARD_TIMEOUT_MS) : 15000;

class Fail extends Error {}
function check(cond, msg) { if (!cond) throw new Fail(msg); }

async function api(path, init = {}) {
  const r = await fetch(new URL(path, origin), {
    ...init, headers: { Authorization: 'Bearer ' + token, ...(init.headers || {}) },
  });
  check(r.ok, `${init.method || 'GET'} ${path}: HTTP ${r.status}`);
  return r.json();
}

const toNum = (s) => Number(String(s).replace(/[,\s]/g, ''));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/* shown: the numbers on the page, in the shape of /v1/stats. */
async function shown(page) {
  return page.evaluate(() => {
    const t = (id) => document.getElementById(id).textContent;
    const states = {};
    for (const s of ['ready', 'scheduled', 'leased', 'dead', 'done']) states[s] = t('state-' + s);
    const events = {};
    for (const tr of document.querySelectorAll('#events-list tbody tr'))
      events[tr.dataset.eventId] = tr.querySelector('td.sold').textContent;
    const absorbed = {};
    for (const k of ['check_state', 'unique_claim', 'provider_key', 'processed_jobs'])
      absorbed[k] = t('absorbed-' + k);
    const disk = (id) => ({ bytes: document.getElementById(id).dataset.bytes,
                            low: document.getElementById(id + '-card').classList.contains('low') });
    const backup = { text: t('backup-age'), ms: document.getElementById('backup-age').dataset.ms,
                     low: document.getElementById('backup-card').classList.contains('low') };
    const deadRed = document.getElementById('state-dead-card').classList.contains('bad');
    return { states, deadRed, orders: t('orders-total'), emails: t('emails-sent'), jps: t('jobs-per-sec'), events,
             absorbed, stale: t('stale-acks'), diskDb: disk('disk-db'), diskState: disk('disk-state'), backup };
  });
}

function compare(s, p) {
  const diffs = [];
  for (const [k, v] of Object.entries(s.jobs.total))
    if (toNum(p.states[k]) !== v) diffs.push(`${k}: page ${p.states[k]}, api ${v}`);
  /* the dead card is red for a dead job, never for 0 */
  if (p.deadRed !== (s.jobs.total.dead > 0)) diffs.push(`dead card red: ${p.deadRed}, api dead ${s.jobs.total.dead}`);
  if (toNum(p.orders) !== s.orders) diffs.push(`orders: page ${p.orders}, api ${s.orders}`);
  if (toNum(p.emails) !== s.emails_sent) diffs.push(`emails_sent: page ${p.emails}, api ${s.emails_sent}`);
  if (Math.abs(toNum(p.jps) - s.done_per_minute / 60) > 0.051)
    diffs.push(`jobs/s: page ${p.jps}, api ${s.done_per_minute}/min`);
  for (const e of s.events)
    if (toNum(p.events[e.id]) !== e.seats_sold) diffs.push(`event ${e.id}: page ${p.events[e.id]}, api ${e.seats_sold}`);
  if (Object.keys(p.events).length !== s.events.length) diffs.push('events: not the same count');
  for (const [k, v] of Object.entries(s.duplicates_absorbed))
    if (toNum(p.absorbed[k]) !== v) diffs.push(`absorbed ${k}: page ${p.absorbed[k]}, api ${v}`);
  if (Object.keys(s.duplicates_absorbed).length !== 4) diffs.push('duplicates_absorbed: not 4 techniques');
  if (toNum(p.stale) !== s.stale_acks) diffs.push(`stale acks: page ${p.stale}, api ${s.stale_acks}`);
  for (const [name, shownDisk, free] of [['db', p.diskDb, s.disk.db_free_bytes],
                                          ['state', p.diskState, s.disk.state_free_bytes]]) {
    /* the machine's other writers move free space between the two reads */
    if (Math.abs(Number(shownDisk.bytes) - free) > 64 * 1024 ** 2)
      diffs.push(`disk ${name}: page ${shownDisk.bytes}, api ${free}`);
    if (shownDisk.low !== (free < s.disk.warn_bytes)) diffs.push(`disk ${name}: low shown ${shownDisk.low}`);
  }
  /* the backup card: off without backup_dir; else the newest good one's age, red when not ok */
  const b = s.backup;
  if (!b) {
    if (p.backup.text !== 'off' || p.backup.low) diffs.push(`backup: page '${p.backup.text}' for none configured`);
  } else {
    if (p.backup.ms !== (typeof b.age_ms === 'number' ? String(b.age_ms) : ''))
      diffs.push(`backup age: page ${p.backup.ms}, api ${b.age_ms}`);
    if (p.backup.low !== !b.ok) diffs.push(`backup: red shown ${p.backup.low}, api ok ${b.ok}`);
  }
  return diffs;
}

async function rowIds(page, table) {
  return page.$$eval(`#${table} tbody tr`, (rows) => rows.map((r) => r.dataset.jobId));
}

const cssq = (v) => String(v).replace(/["\\]/g, '\\$&');

/* pictures: each chart's data-points against its endpoint's count; the
 * charts refresh every 15 s, so a difference waits for their next load */
async function pictures(page) {
  await page.waitForFunction(() => Number(document.getElementById('charts').dataset.refreshed || 0) >= 1);
  let diffs = ['never compared'];
  for (const t0 = Date.now(); Date.now() - t0 < TIMEOUT + 20000;) {
    const before = await page.$eval('#charts', (c) => c.dataset.refreshed);
    const p = await page.evaluate(() => {
      const one = (id) => {
        const fig = document.getElementById(id);
        const svg = fig.querySelector('.plot svg');
        return { shown: !fig.hidden, svg: !!svg, points: svg ? svg.getAttribute('data-points') : null,
                 ev: fig.dataset.eventId || '', note: fig.querySelector('.note').textContent };
      };
      return { sales: one('chart-sales'), scans: one('chart-scans'), jobs: one('chart-jobs'),
               depth: one('chart-depth'),
               doors: Array.from(document.querySelectorAll('#door-table tbody tr'), (tr) => tr.dataset.door) };
    });
    diffs = [];
    for (const c of ['sales', 'scans', 'jobs', 'depth']) {
      if (!p[c].shown) diffs.push(`#chart-${c} is hidden from an operator`);
      else if (!p[c].svg) diffs.push(`#chart-${c} has no svg`);
    }
    const history = await api('/v1/stats/history');
    for (const c of ['jobs', 'depth'])
      if (Number(p[c].points) !== history.minutes.length)
        diffs.push(`#chart-${c}: ${p[c].points} points drawn, /v1/stats/history has ${history.minutes.length} minutes`);
    const ev = p.sales.ev;
    if (!ev) {
      if (p.sales.points !== '0') diffs.push(`#chart-sales: ${p.sales.points} points and no event`);
    } else {
      const sales = await api(`/v1/events/${encodeURIComponent(ev)}/sales`);
      if (Number(p.sales.points) !== sales.hours.length)
        diffs.push(`#chart-sales: ${p.sales.points} points drawn, event ${ev}'s sales have ${sales.hours.length} hours`);
      const want = `${sales.sold.toLocaleString('en-US')} of ${sales.capacity.toLocaleString('en-US')} sold`;
      if (!p.sales.note.startsWith(want)) diffs.push(`#chart-sales says "${p.sales.note}", not "${want}"`);
      if (p.scans.ev !== ev) diffs.push(`#chart-scans shows event ${p.scans.ev}, the sales ${ev}`);
      const scans = await api(`/v1/events/${encodeURIComponent(ev)}/scans`);
      if (Number(p.scans.points) !== scans.per_minute.length)
        diffs.push(`#chart-scans: ${p.scans.points} points drawn, event ${ev}'s scans have ${scans.per_minute.length} minutes`);
      const doors = scans.per_door.map((d) => d.door).sort();
      if (JSON.stringify(doors) !== JSON.stringify(p.doors.slice().sort()))
        diffs.push(`#door-table: [${p.doors}], per_door [${doors}]`);
    }
    if (!diffs.length) return;
    await page.waitForFunction((b) => document.getElementById('charts').dataset.refreshed !== b, before,
                               { timeout: TIMEOUT + 20000 }).catch(() => {});
  }
  check(!diffs.length, 'the charts disagree with the API: ' + diffs.join('; '));
}

/* message: #order-message once the action in flight has its outcome */
async function message(page) {
  await page.waitForFunction(() => /\b(ok|error)\b/.test(document.getElementById('order-message').className));
  return page.$eval('#order-message', (m) => ({ ok: m.classList.contains('ok'), text: m.textContent }));
}

/* openOrder: search for q, expect the order id among the results, open it */
async function openOrder(page, q, id) {
  await page.fill('#order-search', q);
  await page.click('#order-search-go');
  const row = `#order-results tbody tr[data-order-id="${cssq(id)}"]`;
  await page.waitForSelector(row).catch(async () => {
    const got = await page.$$eval('#order-results tbody tr', (l) => l.map((tr) => tr.dataset.orderId));
    throw new Fail(`searching "${q}" does not list order ${id} (it lists [${got}])`);
  });
  await page.click(row);
  await page.waitForFunction((oid) => {
    const d = document.getElementById('order-detail');
    return !d.hidden && d.dataset.orderId === oid && document.querySelector('#order-tickets tbody tr');
  }, id);
}

async function boxOffice(page) {
  const recent = (await api('/v1/orders?recent=20')).orders;
  check(recent.length >= 2, 'the box under test needs two orders for the box office');

  // the newest order, by its id: its tickets, then a resend
  const first = recent[0];
  await openOrder(page, first.id.toLowerCase(), first.id);
  const detail = await api('/v1/orders/' + encodeURIComponent(first.id));
  check(detail.tickets.length > 0, `order ${first.id} has no tickets in the API`);
  const seats = await page.$$eval('#order-tickets tbody tr', (l) => l.map((tr) => tr.firstElementChild.textContent));
  check(JSON.stringify(seats.sort()) === JSON.stringify(detail.tickets.map((t) => t.seat).sort()),
        `order ${first.id}'s tickets: page [${seats}], api [${detail.tickets.map((t) => t.seat)}]`);
  const resends = (o) => (o.changes || []).filter((c) => c.kind === 'resend').length;
  const before = resends(detail);
  await page.click('#order-resend');
  const sent = await message(page);
  check(sent.ok && sent.text, `resend of ${first.id}: "${sent.text}"`);
  await page.waitForFunction((n) => document.querySelectorAll('#order-changes tbody tr[data-kind="resend"]').length === n,
                             before + 1).catch(() => { throw new Fail(`the resend of ${first.id} is not in the page's history`); });
  check(resends(await api('/v1/orders/' + encodeURIComponent(first.id))) === before + 1,
        `the resend of ${first.id} is not in the API's changes`);

  // the next one, by its buyer's email in capitals: cancel it
  const second = recent[1];
  const email = (await api('/v1/orders/' + encodeURIComponent(second.id))).email;
  await openOrder(page, email.toUpperCase(), second.id);
  await page.fill('#order-cancel-reason', 'browser test: the buyer cannot come');
  await page.click('#order-cancel');
  await page.locator('#order-cancel-confirm').waitFor({ state: 'visible' });
  check(await page.evaluate(() => document.getElementById('order-detail').dataset.cancelled) === 'false',
        `order ${second.id} is cancelled before the confirmation`);
  await page.click('#order-cancel-confirm');
  const cancelled = await message(page);
  check(cancelled.ok, `cancel of ${second.id}: "${cancelled.text}"`);
  await page.waitForSelector('#order-detail.cancelled[data-cancelled="true"]');
  const after = await api('/v1/orders/' + encodeURIComponent(second.id));
  check(after.cancelled_at !== null && after.cancelled_at !== undefined, `order ${second.id} is not cancelled in the API`);
  const states = await page.$$eval('#order-tickets tbody tr', (l) => l.map((tr) => tr.dataset.state));
  check(JSON.stringify(states.sort()) === JSON.stringify(after.tickets.map((t) => t.state).sort()),
        `order ${second.id}'s tickets: page [${states}], api [${after.tickets.map((t) => t.state)}]`);
  const enabled = await page.evaluate(() => Object.fromEntries(
    ['order-resend', 'order-email', 'order-email-save', 'order-cancel', 'order-cancel-reason']
      .map((id) => [id, !document.getElementById(id).disabled])));
  check(!enabled['order-resend'] && !enabled['order-email'] && !enabled['order-email-save'] &&
        !enabled['order-cancel'] && !enabled['order-cancel-reason'],
        `a cancelled order's actions: ${JSON.stringify(enabled)}`);
  await page.waitForSelector('#order-changes tbody tr[data-kind="cancel"]');
}

async function main() {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const problems = [];
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    page.on('pageerror', (e) => problems.push('script error: ' + e.message));
    // (chromium logs the 401s of the wrong-token step below as console errors)
    page.on('console', (m) => {
      if (m.type() === 'error' && !/status of 401/.test(m.text())) problems.push('console error: ' + m.text());
    });
    page.on('request', (r) => {
      const u = r.url();
      if (!u.startsWith('blob:') && !u.startsWith('data:') && new URL(u).origin !== origin)
        problems.push('request to another origin: ' + u);
    });

    // 1. the token, once
    const resp = await page.goto(url);
    check(resp && resp.ok(), `GET ${url}: HTTP ${resp && resp.status()}`);
    await page.locator('#token').waitFor({ state: 'visible' });
    // a wrong token is refused (401) and the page asks again
    await page.fill('#token', token + '-wrong');
    await page.click('#token-save');
    await page.waitForFunction(() => document.getElementById('token-msg').textContent !== '');
    check(await page.locator('#token').isVisible(), 'after a refused token the token field is gone');
    check(await page.evaluate(() => sessionStorage.getItem('stagedoor.token')) === null,
          'a refused token is kept in sessionStorage');
    await page.fill('#token', token);
    await page.click('#token-save');
    await page.waitForSelector('#status[data-refreshed]');
    check(await page.evaluate(() => sessionStorage.getItem('stagedoor.token')) === token,
          'the token is not kept in sessionStorage');
    check(await page.locator('#token-form').isHidden(), 'the token form is still shown');

    // 2. the numbers, against /v1/stats
    let diffs = ['never compared'];
    for (const t0 = Date.now(); Date.now() - t0 < TIMEOUT;) {
      const before = await page.$eval('#status', (s) => s.dataset.refreshed);
      const stats = await api('/v1/stats');
      const p = await shown(page);
      diffs = compare(stats, p);
      if (!diffs.length) break;
      // wait for the page's next refresh, then look again
      await page.waitForFunction((b) => document.getElementById('status').dataset.refreshed !== b, before);
    }
    check(!diffs.length, 'the page disagrees with /v1/stats: ' + diffs.join('; '));
    // the box under test has had second runs, so the counts compared are not all zero
    check(Object.values((await api('/v1/stats')).duplicates_absorbed).some((v) => v > 0),
          'no second run absorbed on this box: the absorbed counts were compared as zeros');

    // 3. the lists, against /v1/jobs
    const deadJobs = (await api('/v1/jobs?state=dead')).jobs;
    const dead = deadJobs.map((j) => j.job_id).sort();
    const deadShown = (await rowIds(page, 'dead-list')).sort();
    check(JSON.stringify(dead) === JSON.stringify(deadShown),
          `dead letters: page [${deadShown}], api [${dead}]`);
    check(await page.locator('#dead-list script').count() === 0, 'an error message was inserted as HTML');
    const leasedJobs = (await api('/v1/jobs?state=leased')).jobs;
    const leased = leasedJobs.map((j) => j.job_id).sort();
    const leasedShown = (await rowIds(page, 'leased-list')).sort();
    check(leased.every((id) => leasedShown.includes(id)) || leasedShown.length === leased.length,
          `in flight: page [${leasedShown}], api [${leased}]`);
    // each lease's age is the API's lease_age_ms of the page's last refresh:
    // at most a refresh (and a slow box) behind ours, never its time left
    const ages = await page.$$eval('#leased-list tbody tr', (trs) => trs.map((tr) => {
      const td = tr.querySelector('td.age');
      return { id: tr.dataset.jobId, ms: td && td.dataset.ms, text: td ? td.textContent : '',
               deliveries: tr.lastElementChild.textContent };
    }));
    for (const j of leasedJobs) {
      // the same lease: a reclaim since would be younger
      const a = ages.find((x) => x.id === j.job_id && toNum(x.deliveries) === j.deliveries);
      if (!a || typeof j.lease_age_ms !== 'number') continue;
      const lag = j.lease_age_ms - Number(a.ms);
      check(a.ms !== undefined && / ago$/.test(a.text) && lag >= 0 && lag <= 10000,
            `lease age of ${j.job_id}: page ${a.ms} ms ("${a.text}"), api lease_age_ms ${j.lease_age_ms}`);
    }
    const orders = (await api('/v1/orders?recent=20')).orders;
    check(await page.locator('#orders-list tbody tr').count() === orders.length,
          'recent orders: the page shows another count than /v1/orders?recent=20');

    // 4. the door-scan box: a code typed in lower case goes out in upper case
    const scanSent = page.waitForRequest((r) => r.method() === 'POST' && new URL(r.url()).pathname === '/v1/scan');
    await page.fill('#scan-code', 'not-a-ticket');
    await page.click('#scan-go');
    const scanBody = JSON.parse((await scanSent).postData());
    check(scanBody.code === 'NOT-A-TICKET', 'the scan box sent ' + JSON.stringify(scanBody));
    await page.waitForFunction(() => /invalid|error/.test(document.getElementById('scan-result').className));
    check(await page.locator('#scan-result.invalid').count() === 1,
          'scan of a bogus code: ' + await page.textContent('#scan-result'));

    // 5. retry a dead job
    check(dead.length > 0, 'no dead job to retry (the box under test needs one)');
    const victim = deadShown[0];
    const letter = deadJobs.find((j) => j.job_id === victim);
    const sel = `#dead-list tbody tr[data-job-id="${victim.replace(/["\\]/g, '\\$&')}"]` +
                `[data-dead-id="${letter.id}:${letter.died_at}"]`;
    await page.click(`${sel} button.retry`);
    await page.waitForSelector(sel, { state: 'detached' });
    // the dead letter retried is gone (the same job dying again is a new one)
    const same = (j) => j.job_id === victim && j.id === letter.id && j.died_at === letter.died_at;
    check(!(await api('/v1/jobs?state=dead')).jobs.some(same),
          `${victim} is still the same dead letter in the API after the retry`);
    // and after the page's next refreshes its dead list is the API's
    let settled = false, last = '';
    for (const t0 = Date.now(); !settled && Date.now() - t0 < TIMEOUT;) {
      const r0 = await page.$eval('#status', (s) => s.dataset.refreshed);
      await page.waitForFunction((b) => document.getElementById('status').dataset.refreshed !== b, r0);
      const a = (await api('/v1/jobs?state=dead')).jobs.map((j) => j.job_id).sort();
      const p = (await rowIds(page, 'dead-list')).sort();
      last = `page [${p}], api [${a}]`;
      settled = JSON.stringify(a) === JSON.stringify(p);
    }
    check(settled, 'after the retry the dead list does not settle: ' + last);

    // 5b. the kinds held back: the page's table is the API's; pause a kind
    //     through the form, see it paused, resume it with its row's button
    const held = async () => (await api('/v1/controls')).controls.map((k) => `${k.kind}:${k.paused}`).sort();
    const heldShown = async () => (await page.$$eval('#controls-list tbody tr',
      (rs) => rs.map((r) => `${r.dataset.kind}:${r.dataset.paused}`))).sort();
    await page.waitForFunction(() => document.querySelectorAll('#controls-list tbody tr').length > 0 ||
                                     !document.getElementById('controls-empty').hidden);
    check(JSON.stringify(await heldShown()) === JSON.stringify(await held()),
          `held back: page ${await heldShown()}, api ${await held()}`);
    await page.fill('#control-kind', 'render_tickets');
    await page.click('#control-pause');
    const pausedRow = '#controls-list tbody tr[data-kind="render_tickets"][data-paused="true"]';
    await page.waitForSelector(pausedRow);
    check((await api('/v1/controls')).controls.some((k) => k.kind === 'render_tickets' && k.paused),
          'the pause of render_tickets is not in the API');
    await page.click(`${pausedRow} button.resume`);
    await page.waitForSelector('#controls-list tbody tr[data-kind="render_tickets"]', { state: 'detached' });
    check(!(await api('/v1/controls')).controls.some((k) => k.kind === 'render_tickets'),
          'render_tickets is still held back after its resume');

    // 5c. periodic jobs: add one through the page's form, see it listed as
    //     the API lists it, remove it with its row's button
    await page.fill('#schedule-name', 'page-sweep');
    await page.fill('#schedule-kind', 'noop');
    await page.fill('#schedule-every', '5m');
    await page.click('#schedule-add');
    const schedRow = '#schedules-list tbody tr[data-name="page-sweep"]';
    await page.waitForSelector(schedRow);
    const sc = (await api('/v1/schedules')).schedules.find((x) => x.name === 'page-sweep');
    check(sc && sc.every_ms === 300000 && sc.kind === 'noop', 'the schedule added is not in the API: ' + JSON.stringify(sc));
    await page.click(`${schedRow} button.remove`);
    await page.waitForSelector(schedRow, { state: 'detached' });
    check(!(await api('/v1/schedules')).schedules.some((x) => x.name === 'page-sweep'),
          'page-sweep is still a schedule after its removal');
    //     and one by a cron expression in a zone of its own
    await page.fill('#schedule-name', 'page-monday');
    await page.fill('#schedule-kind', 'noop');
    await page.fill('#schedule-every', '0 9 * * MON');
    await page.fill('#schedule-zone', 'Europe/Berlin');
    await page.click('#schedule-add');
    const cronRow = '#schedules-list tbody tr[data-name="page-monday"]';
    await page.waitForSelector(cronRow);
    const sc2 = (await api('/v1/schedules')).schedules.find((x) => x.name === 'page-monday');
    check(sc2 && sc2.cron === '0 9 * * MON' && sc2.timezone === 'Europe/Berlin' && sc2.every_ms === null,
          'the cron schedule added is not in the API: ' + JSON.stringify(sc2));
    check((await page.textContent(cronRow)).includes('0 9 * * MON Europe/Berlin'),
          'the cron schedule\'s row does not show its expression and zone');
    await page.click(`${cronRow} button.remove`);
    await page.waitForSelector(cronRow, { state: 'detached' });

    // 6. the pictures of the night, against their endpoints
    await pictures(page);

    // 7. the box office
    await boxOffice(page);

    // 8. a phone screen: no sideways scrolling
    await page.setViewportSize({ width: 390, height: 844 });
    /* the charts draw again for the new width (their labels stay 11 px) */
    const drawnFor = () => Array.from(document.querySelectorAll('#charts svg'),
                                      (svg) => Number(svg.getAttribute('viewBox').split(' ')[2]));
    await page.waitForFunction(() => Array.from(document.querySelectorAll('#charts svg'))
      .every((svg) => Number(svg.getAttribute('viewBox').split(' ')[2]) <= window.innerWidth)).catch(async () => {
      throw new Fail(`on a 390 px screen the charts are drawn ${await page.evaluate(drawnFor)} wide`);
    });
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check(overflow <= 1, `on a 390 px screen the page is ${overflow} px too wide`);
    await page.screenshot({ path: shot.replace(/(\.png)?$/i, '-phone.png'), fullPage: true });
    await page.setViewportSize({ width: 1280, height: 900 });
    /* (the picture only: the charts drawn for the desktop again) */
    await page.waitForFunction(() => Array.from(document.querySelectorAll('#charts svg'))
      .every((svg) => Number(svg.getAttribute('viewBox').split(' ')[2]) > 390), null, { timeout: 5000 }).catch(() => {});

    // 9. the picture
    await page.screenshot({ path: shot, fullPage: true });
    check(!problems.length, problems.join('; '));
    console.log(`dashboard: ok (${deadShown.length} dead before, retried ${victim}; screenshot ${shot})`);
  } finally {
    await browser.close();
  }
}

main().then(() => process.exit(0), (e) => {
  console.error('dashboard: FAIL: ' + (e instanceof Fail ? e.message : (e && e.stack) || e));
  process.exit(1);
});
