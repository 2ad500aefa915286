// door.mjs: the door page's browser test.  Debian's chromium, headless,
// driven by playwright-core (pinned in package-lock.json; no browser
// download), with a fake camera: a Y4M file (make_camera.sh) that shows a
// ticket.  Against a running box (or fake_door.mjs) whose TOKEN is a door
// token for that ticket's event, in its doors' window, and whose ticket has
// not been scanned yet, it:
//   1. reads the event's counts (GET /v1/events/{id}), opens URL + "door"
//      (the box's Content-Security-Policy must allow no inline script or
//      style), gives a wrong token (it must ask again and keep nothing), then
//      TOKEN; the door's name, its event and counts must show;
//   2. waits for the page to read the QR code from the camera and show
//      ADMITTED (seat shown), and for the counts to move by one (admitted +1,
//      to come -1), on the page and in the API;
//   3. waits past the debounce with the ticket still in front of the camera:
//      the page must not have sent it again;
//   4. reloads (the token must be kept): the camera reads the same ticket
//      and the page shows ALREADY SCANNED, naming when and the door
//      (scanned_by); a new nonce; the counts do not move;  -> SCREENSHOT
//   5. types the code into the keyboard-wedge input (it must have the focus)
//      in lower case, then Enter: sent in upper case, ALREADY SCANNED again,
//      with yet another nonce; then a second ticket's code (SECOND_CODE;
//      against fake_door.mjs one made up) typed by hand in lower case in
//      the manual field: sent upper-cased, ADMITTED, the counts move by one;
//   6. loses the answer to the first attempt of a scan typed in the manual
//      field (the box got it; the page sees a network error): the page must
//      send the same body with the same nonce again, and show the answer
//      (INVALID for a bogus code);
//   7. checks that the page fits 360 and 390 px wide phones and a laptop with
//      no sideways scrolling, saves the idle page (SCREENSHOT-idle.png), and
//      that "Forget token" forgets it;
//   8. checks that it asked nothing of any other origin and threw no script
//      error.
// Every time shown is on the venue's clock (whoami's timezone and
// zone_names): the event's start in #door-event and the first admission's
// time in ALREADY SCANNED, as "YYYY-MM-DD HH:MM ABBR" ("HH:MM ABBR" for the
// venue's today), computed here from whoami for the comparison.
//
// usage: node door.mjs URL TOKEN CAMERA.y4m SCREENSHOT.png [SECOND_CODE]
//   SECOND_CODE: the code of another ticket of the door's event, not scanned
//   yet (without it, and not against fake_door.mjs, step 5's second ticket
//   is skipped, and said so).
// DOOR_TIMEOUT_MS (default 20000): each wait; raise it for a slow box.
// CHROMIUM (default /usr/bin/chromium): the browser.
// exit 0 on success; 1 with "door: FAIL: ..." on stderr otherwise.
import { chromium } from 'playwright-core';
import { existsSync } from 'node:fs';
import path from 'node:path';

const [url, token, y4m, shot, secondArg] = process.argv.slice(2);
if (!url || !token || !y4m || !shot) {
  console.error('usage: node door.mjs URL TOKEN CAMERA.y4m SCREENSHOT.png');
  process.exit(2);
}
const origin = new URL(url).origin;
const doorUrl = new URL('door', url).href;
const TIMEOUT = Number(process.env.DOOR_TIMEOUT_MS) > 0 ? Number(process.env.DOOR_TIMEOUT_MS) : 20000;
const DEBOUNCE_MS = 3000;      // door.js's
const idleShot = shot.replace(/(\.png)?$/i, '-idle.png');

class Fail extends Error {}
function check(cond, msg) { if (!cond) throw new Fail(msg); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const toNum = (s) => Number(String(s).replace(/[^0-9-]/g, ''));

async function api(p) {
  const r = await fetch(new URL(p, origin), { headers: { Authorization: 'Bearer ' + token } });
  check(r.ok, `GET ${p}: HTTP ${r.status}`);
  return r.json();
}

/* result: what #door-result shows. */
function result(page) {
  return page.evaluate(() => {
    const el = document.getElementById('door-result');
    return { result: el.dataset.result, seq: Number(el.dataset.seq || 0), hidden: el.hidden,
             title: document.getElementById('door-result-title').textContent,
             detail: document.getElementById('door-result-detail').textContent };
  });
}

/* nextResult: waits for an answer after answer number seq; returns it. */
async function nextResult(page, seq, what) {
  try {
    await page.waitForFunction((s) => Number(document.getElementById('door-result').dataset.seq || 0) > s,
                               seq, { timeout: TIMEOUT });
  } catch (e) {
    const cam = await page.evaluate(() => document.getElementById('door-camera-status').textContent);
    const r = await result(page);
    throw new Fail(`${what}: no answer within ${TIMEOUT} ms (camera: "${cam}"; last shown: ` +
                   `${r.result || 'nothing'} "${r.title}")`);
  }
  return result(page);
}

/* venueWhen: ms on the venue's clock as the page must show it, from whoami's
 * timezone and zone_names: "YYYY-MM-DD HH:MM ABBR", "HH:MM ABBR" on its today */
function venueWhen(ms, who) {
  const f = new Intl.DateTimeFormat('en-CA', { timeZone: who.timezone, hourCycle: 'h23', year: 'numeric',
    month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', timeZoneName: 'longOffset' });
  const parts = (t) => Object.fromEntries(f.formatToParts(t).map((x) => [x.type, x.value]));
  const p = parts(ms), today = parts(Date.now());
  const m = /([+-])(\d{2}):(\d{2})/.exec(p.timeZoneName);
  const off = m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 3600 + Number(m[3]) * 60) : 0;
  const names = who.zone_names || {};
  const abbr = names[String(off)] ||
    (off ? (off < 0 ? '-' : '+') + m[2] + ':' + m[3] : 'UTC');
  const date = `${p.year}-${p.month}-${p.day}`, hm = `${p.hour}:${p.minute} ${abbr}`;
  return date === `${today.year}-${today.month}-${today.day}` ? hm : date + ' ' + hm;
}

async function counts(page) {
  return page.evaluate(() => ({ admitted: document.getElementById('door-admitted').textContent,
                                to_come: document.getElementById('door-to-come').textContent }));
}

/* countsBecome: waits until the page shows the event's counts as want. */
async function countsBecome(page, want, what) {
  let shown;
  for (const t0 = Date.now(); Date.now() - t0 < TIMEOUT; await sleep(250)) {
    shown = await counts(page);
    if (toNum(shown.admitted) === want.admitted && toNum(shown.to_come) === want.to_come) return;
  }
  throw new Fail(`${what}: the page shows admitted ${shown.admitted}, to come ${shown.to_come}; ` +
                 `want ${want.admitted}, ${want.to_come}`);
}

async function overflow(page, width, height) {
  await page.setViewportSize({ width, height });
  await sleep(200);
  return page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
}

async function main() {
  check(existsSync(y4m), `no camera file ${y4m} (make_camera.sh makes one)`);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-dev-shm-usage',
           '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
           '--use-file-for-fake-video-capture=' + path.resolve(y4m)],
  });
  const problems = [];
  try {
    const context = await browser.newContext({
      viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, ignoreHTTPSErrors: true,
    });
    await context.grantPermissions(['camera'], { origin });
    const page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    page.on('pageerror', (e) => problems.push('script error: ' + e.message));
    // (chromium logs the 401 of the wrong token, and the attempt cut in step 6)
    page.on('console', (m) => {
      if (m.type() === 'error' && !/status of 401|ERR_CONNECTION_RESET/.test(m.text()))
        problems.push('console error: ' + m.text());
    });
    const scans = [], answers = [];
    page.on('response', async (r) => {
      if (r.request().method() === 'POST' && new URL(r.url()).pathname === '/v1/scan' && r.ok())
        answers.push(await r.json().catch(() => ({})));
    });
    page.on('request', (r) => {
      const u = r.url();
      if (!u.startsWith('blob:') && !u.startsWith('data:') && new URL(u).origin !== origin)
        problems.push('request to another origin: ' + u);
      if (r.method() === 'POST' && new URL(u).pathname === '/v1/scan') {
        try { scans.push(JSON.parse(r.postData())); } catch { scans.push({ body: r.postData() }); }
      }
    });

    // 1. the page, the token, the door and its event (the counts are read
    //    before the page has the token: its camera may scan at once)
    const who = await api('/v1/whoami');
    check(who.event_id != null, 'the token is bound to no event: a door token for the ticket\'s event is needed');
    const before = await api('/v1/events/' + who.event_id);
    check(typeof before.admitted === 'number' && typeof before.to_come === 'number',
          `GET /v1/events/${who.event_id} has no admitted / to_come`);
    const resp = await page.goto(doorUrl);
    check(resp && resp.ok(), `GET ${doorUrl}: HTTP ${resp && resp.status()}`);
    const csp = resp.headers()['content-security-policy'] || '';
    check(/script-src 'self'/.test(csp) && !/unsafe-inline|unsafe-eval/.test(csp),
          `GET /door: the Content-Security-Policy is "${csp}"`);
    await page.locator('#door-token').waitFor({ state: 'visible' });
    await page.fill('#door-token', token + '-wrong');
    await page.click('#door-token-save');
    await page.waitForFunction(() => document.getElementById('door-token-msg').textContent !== '');
    check(await page.locator('#door-token').isVisible(), 'after a refused token the token field is gone');
    check(await page.evaluate(() => localStorage.getItem('stagedoor.door.token')) === null,
          'a refused token is kept in localStorage');
    await page.fill('#door-token', token);
    await page.click('#door-token-save');
    await page.waitForSelector('body[data-ready]');
    await page.waitForSelector('#door-counts[data-refreshed]');
    check(await page.evaluate(() => localStorage.getItem('stagedoor.door.token')) === token,
          'the token is not kept in localStorage');
    check(await page.textContent('#door-name') === who.name,
          `#door-name shows "${await page.textContent('#door-name')}", whoami says "${who.name}"`);
    check((await page.textContent('#door-event')).includes(before.name),
          `#door-event shows "${await page.textContent('#door-event')}", the event is "${before.name}"`);
    check(typeof who.timezone === 'string' && who.timezone, 'GET /v1/whoami has no timezone');
    const startShown = venueWhen(before.starts_at_ms, who);
    check((await page.textContent('#door-event')).endsWith(' · ' + startShown),
          `#door-event shows "${await page.textContent('#door-event')}": not the venue's start "${startShown}"`);
    const shownFirst = await counts(page);
    check(/[0-9]/.test(shownFirst.admitted) && /[0-9]/.test(shownFirst.to_come),
          `the counts shown are "${shownFirst.admitted}", "${shownFirst.to_come}"`);

    // 2. the camera reads the ticket: admitted
    const first = await nextResult(page, 0, 'the camera\'s first read');
    const decoder = await page.getAttribute('#door-video', 'data-decoder');
    check(first.result === 'admitted' && first.title === 'ADMITTED',
          `the first scan shows ${first.result} "${first.title}: ${first.detail}" (a ticket not scanned before is needed)`);
    check(/Seat /.test(first.detail), `ADMITTED shows no seat: "${first.detail}"`);
    check(scans.length === 1 && typeof scans[0].code === 'string' && scans[0].code.length > 0,
          `the first scan sent ${JSON.stringify(scans)}`);
    const code = scans[0].code;
    check(typeof scans[0].nonce === 'string' && /^[\x21-\x7e]{1,100}$/.test(scans[0].nonce),
          `the scan's nonce is ${JSON.stringify(scans[0].nonce)}`);
    const after = { admitted: before.admitted + 1, to_come: before.to_come - 1 };
    const apiAfter = await api('/v1/events/' + who.event_id);
    check(apiAfter.admitted === after.admitted && apiAfter.to_come === after.to_come,
          `after the scan the API counts admitted ${apiAfter.admitted}, to come ${apiAfter.to_come}; ` +
          `want ${after.admitted}, ${after.to_come}`);
    await countsBecome(page, after, 'the counts after the scan');

    // 3. the ticket stays in front of the camera: not sent again
    await sleep(DEBOUNCE_MS + 1500);
    const again = scans.filter((s) => s.code === code).length;
    check(again === 1, `the camera's same ticket was sent ${again} times within the debounce`);

    // 4. reload: the token is kept, the camera reads the ticket again
    await page.reload();
    await page.waitForSelector('body[data-ready]');
    check(await page.locator('#door-token-form').isHidden(), 'after a reload the page asks for the token again');
    const second = await nextResult(page, 0, 'the camera\'s read after the reload');
    check(second.result === 'already_scanned' && second.title === 'ALREADY SCANNED',
          `the same ticket again shows ${second.result} "${second.title}: ${second.detail}"`);
    check(second.detail.includes(who.name) && /First admitted \S/.test(second.detail),
          `ALREADY SCANNED does not say when and at which door: "${second.detail}"`);
    const firstAt = answers.length && answers[0].result === 'admitted' ? answers[0].scanned_at : null;
    check(typeof firstAt === 'number', 'the first scan\'s answer has no scanned_at: ' + JSON.stringify(answers[0]));
    check(second.detail.includes('First admitted ' + venueWhen(firstAt, who)),
          `ALREADY SCANNED does not give the first admission on the venue's clock ` +
          `("${venueWhen(firstAt, who)}"): "${second.detail}"`);
    check(scans.length === 2 && scans[1].code === code && scans[1].nonce !== scans[0].nonce,
          'the second scan did not send the same code with a new nonce: ' + JSON.stringify(scans));
    await countsBecome(page, after, 'the counts after the second scan');
    await page.screenshot({ path: shot });

    // 5. a keyboard-wedge scanner types the code, then Enter
    check(await page.evaluate(() => document.activeElement && document.activeElement.id) === 'door-wedge',
          'the keyboard-wedge input does not have the focus');
    await page.keyboard.type(code.toLowerCase(), { delay: 2 });
    await page.keyboard.press('Enter');
    const third = await nextResult(page, second.seq, 'the wedge scan');
    check(third.result === 'already_scanned', `the wedge scan shows ${third.result} "${third.title}"`);
    const wedged = scans[scans.length - 1];
    check(wedged.code === code && new Set(scans.map((s) => s.nonce)).size === scans.length,
          'the wedge scan did not send the code (upper case) with a fresh nonce: ' + JSON.stringify(wedged));

    // 5b. a second ticket's code typed by hand in lower case: sent upper-cased, admitted
    const fake = await fetch(new URL('/fake/scans', origin)).then((r) => r.ok, () => false);
    const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
    const code2 = secondArg ? secondArg.toUpperCase()
      : fake ? Array.from({ length: 52 }, (_, i) => B32[(i * 7 + Date.now()) % 32]).join('') : null;
    let seqNow = third.seq;
    if (code2) {
      await page.fill('#door-manual', code2.toLowerCase());
      await page.press('#door-manual', 'Enter');
      const typedOne = await nextResult(page, seqNow, 'the second ticket typed in lower case');
      seqNow = typedOne.seq;
      const sentTyped = scans[scans.length - 1];
      check(sentTyped.code === code2, `the code typed in lower case was sent as "${sentTyped.code}", not "${code2}"`);
      check(typedOne.result === 'admitted' && typedOne.title === 'ADMITTED',
            `the second ticket typed in lower case shows ${typedOne.result} "${typedOne.title}: ${typedOne.detail}"`);
      after.admitted += 1;
      after.to_come -= 1;
      await countsBecome(page, after, 'the counts after the second ticket');
    } else {
      console.log('door: no SECOND_CODE: the lower-case code typed by hand was tried on an admitted ticket only');
    }

    // 6. flaky Wi-Fi: the first attempt reaches the box but its answer is
    //    lost; the retry must carry the same nonce (the box answers it from
    //    the nonce and scans nothing twice)
    const attempts = [];
    await page.route('**/v1/scan', async (route) => {
      attempts.push(route.request().postData());
      if (attempts.length === 1) {
        await route.fetch();
        await route.abort('connectionreset');
      } else {
        await route.continue();
      }
    });
    await page.fill('#door-manual', 'not-a-ticket');
    await page.press('#door-manual', 'Enter');
    const fourth = await nextResult(page, seqNow, 'the manual scan with a cut attempt');
    await page.unroute('**/v1/scan');
    check(attempts.length >= 2, `the cut scan was not sent again (${attempts.length} attempt)`);
    check(attempts.every((b) => b === attempts[0]), 'the retry is not the same request: ' + attempts.join(' | '));
    const sent = JSON.parse(attempts[0]);
    check(sent.code === 'NOTATICKET' && sent.nonce !== wedged.nonce, 'the manual scan sent ' + attempts[0]);
    check(fourth.result === 'invalid' && fourth.title === 'INVALID',
          `a bogus code shows ${fourth.result} "${fourth.title}: ${fourth.detail}"`);
    // fake_door.mjs also tells how it answered: the retry from the nonce
    const log = await fetch(new URL('/fake/scans', origin)).then((r) => (r.ok ? r.json() : null), () => null);
    if (Array.isArray(log)) {
      const mine = log.filter((x) => x.nonce === sent.nonce);
      check(mine.length >= 2 && !mine[0].replayed && mine.slice(1).every((x) => x.replayed),
            'fake_door did not answer the retry from its nonce: ' + JSON.stringify(mine));
    }
    await countsBecome(page, after, 'the counts after the bogus code');

    // 7. phones and a laptop, the idle page, forget the token
    for (const [w, h] of [[360, 740], [1280, 800], [390, 844]]) {
      const o = await overflow(page, w, h);
      check(o <= 1, `on a ${w} px wide screen the page is ${o} px too wide`);
    }
    await page.click('#door-result');
    await page.waitForSelector('#door-result', { state: 'hidden' });
    await page.screenshot({ path: idleShot });
    await page.click('#door-forget');
    await page.locator('#door-token').waitFor({ state: 'visible' });
    check(await page.evaluate(() => localStorage.getItem('stagedoor.door.token')) === null,
          '"Forget token" left the token in localStorage');

    // 8. nothing else
    check(!problems.length, problems.join('; '));
    console.log(`door: ok (decoder ${decoder}; admitted ${code.slice(0, 8)}…, then already scanned by ` +
                `camera and wedge; a lost answer retried with its nonce; screenshots ${shot}, ${idleShot})`);
  } finally {
    await browser.close();
  }
}

main().then(() => process.exit(0), (e) => {
  console.error('door: FAIL: ' + (e instanceof Fail ? e.message : (e && e.stack) || e));
  process.exit(1);
});
