// shop.mjs: the public shop's browser test on a phone.  Debian's chromium,
// headless, driven by playwright-core (as dashboard.mjs), against a running
// box whose shop sells through tools/paysink (tests/test_shopbuy.c sets both
// up).  The box is a Berlin venue with locale de-DE and one priced event,
// EVENT below: "Late Show" at "Main Hall", 2036-05-01 20:00 Berlin time
// (summer: CEST), 25.00 EUR a seat.  In a 390x844 phone context it:
//   1. opens the list: the event with its German date and its price
//      ("Do., 1. Mai 2036, 20:00 CEST", "25,00 €"), each marked lang="de-DE"
//      on an English page, the date with its machine reading (datetime);
//   2. opens the event: the same, "25,00 € a seat", and the form; the page
//      does not scroll sideways and the form's inputs, select and button
//      are at least 44 px tall (a finger's target);
//   3. buys 2 seats (JavaScript on): the form, paysink's page (its total
//      "50.00 EUR" and the line "Late Show ... × 2"), Pay, and back at the
//      shop "Thank you" (after "Confirming your payment…" if the page has to
//      look again), with the order id and the buyer's email;
//   4. starts a checkout of 1 seat and leaves the payment page by its Cancel
//      link: the checkout's page counts down, [data-left] reads "m:ss left"
//      and changes within 2 s, and says until when on the venue's clock;
//   5. buys 2 seats again with JavaScript off (another buyer, another
//      email): the same end to end on server-rendered forms and the page's
//      own refresh; the unpaid checkout's page reads "N min" there;
//   6. submits the form after deleting the sd_csrf cookie: 403, the event's
//      page again with a clear message (role=alert), what the buyer typed
//      kept, a fresh token, and no payment page.
// Throughout: no sideways scrolling, no request to any origin but the
// shop's and paysink's, no script error or console error (but the 403's).
//
// usage: node shop.mjs SHOP_URL SCREENSHOT_PREFIX
//   screenshots: PREFIX-event.png, -pay.png, -done.png, -hold.png,
//   -nojs-done.png, -refused.png (full page, at 390 px, scale 2)
// On stdout, one line per order bought:  order ORDER_ID EMAIL SEATS
// and one for the unpaid checkout:       held HOLD_LINK EMAIL SEATS
// SHOP_TIMEOUT_MS (default 15000): each wait; raise it for a slow box.
// exit 0 on success; 1 with "shop: FAIL: ..." on stderr otherwise.
import { chromium } from 'playwright-core';

const [url, prefix] = process.argv.slice(2);
if (!url || !prefix) {
  console.error('usage: node shop.mjs SHOP_URL SCREENSHOT_PREFIX');
  process.exit(2);
}
const shopOrigin = new URL(url).origin;
const TIMEOUT = Number(process.env.SHOP_TIMEOUT_MS) > 0 ? Number(process.env.SHOP_TIMEOUT_MS) : 15000;

// What the box was set up with (tests/test_shopbuy.c), as the page must
// print it for de-DE in Europe/Berlin (src/lang.c: "%a, %d. %m %y, %t" and
// the zone's abbreviation; the price's sign after it, with a space).
const EVENT = {
  name: 'Late Show',
  venue: 'Main Hall',
  when: 'Do., 1. Mai 2036, 20:00 CEST',
  price: '25,00 €',
};
const BUYERS = {
  phone: { name: 'Ada Lovelace', email: 'ada.phone@example.org', seats: 2 },
  held: { name: 'Cy Waiting', email: 'cy.held@example.org', seats: 1 },
  nojs: { name: 'Bea Noscript', email: 'bea.nojs@example.org', seats: 2 },
  refused: { name: 'Eve Stale', email: 'eve.stale@example.org', seats: 3 },
};
const PHONE = { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true };
const MIN_TARGET_PX = 44;

class Fail extends Error {}
function check(cond, msg) { if (!cond) throw new Fail(msg); }
const squash = (s) => String(s).replace(/\s+/g, ' ').trim();

let paysinkOrigin = null;	// learnt from the first redirect to the payment page
const problems = [];
const requested = [];		// [label, url]: judged at the end, once paysink's origin is known

function watch(page, label, { allow403 = false } = {}) {
  page.setDefaultTimeout(TIMEOUT);
  page.on('pageerror', (e) => problems.push(`${label}: script error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (allow403 && /status of 403/.test(m.text())) return;	// the refusal's own line
    // the shop and paysink serve no icon: chromium's own request for one
    if (/status of 404/.test(m.text()) && /\/favicon\.ico$/.test(m.location().url || '')) return;
    problems.push(`${label}: console error: ${m.text()}`);
  });
  page.on('request', (r) => requested.push([label, r.url()]));
}

/* foreign: the requests to any origin but the shop's and paysink's */
function foreign() {
  return requested.filter(([, u]) => {
    const o = new URL(u);
    return o.protocol !== 'data:' && o.protocol !== 'about:' && o.origin !== shopOrigin && o.origin !== paysinkOrigin;
  }).map(([label, u]) => `${label}: request to another origin: ${u}`);
}

async function text(page, sel) {
  return squash(await page.locator(sel).first().textContent());
}

/* fits: the page does not scroll sideways on the phone */
async function fits(page, what) {
  const w = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, inner: window.innerWidth }));
  check(w.scroll <= w.inner, `${what}: the page scrolls sideways on a ${PHONE.viewport.width} px phone ` +
        `(scrollWidth ${w.scroll} > innerWidth ${w.inner})`);
}

/* small: the visible fields and buttons in sel under 44 px tall, described */
async function small(page, sel) {
  return page.evaluate(([sel, min]) => {
    const out = [];
    for (const el of document.querySelectorAll(sel)) {
      if (el.type === 'hidden') continue;
      const r = el.getBoundingClientRect();
      if (r.height < min) out.push(`${el.tagName.toLowerCase()}${el.name ? '[name=' + el.name + ']' : ''} ` +
                                    `"${(el.textContent || '').trim()}" is ${r.height.toFixed(1)} px`);
    }
    return out;
  }, [sel, MIN_TARGET_PX]);
}

/* targets: every visible field and button in sel is at least 44 px tall */
async function targets(page, sel, what) {
  const under = await small(page, sel);
  check(under.length === 0, `${what}: targets under ${MIN_TARGET_PX} px tall: ${under.join('; ')}`);
}

async function shot(page, name) {
  await page.screenshot({ path: `${prefix}-${name}.png`, fullPage: true });
}

/* the list, then the event's page, as a buyer comes to it */
async function openEvent(page, label, { checkList = false } = {}) {
  const resp = await page.goto(url);
  check(resp.status() === 200, `${label}: GET / answered ${resp.status()}`);
  const card = page.locator('article.event', { has: page.getByRole('link', { name: EVENT.name }) });
  check(await card.count() === 1, `${label}: the list shows ${await card.count()} events named "${EVENT.name}"`);
  if (checkList) {
    // the page's words are English; its dates and amounts carry the venue's locale
    check(await page.locator('html').getAttribute('lang') === 'en', 'the list is not marked lang="en"');
    check(await card.locator('.when time').getAttribute('lang') === 'de-DE', 'the date is not marked lang="de-DE"');
    check(/^2036-05-01T20:00\+02:00$/.test(await card.locator('.when time').getAttribute('datetime')),
          'the date\'s datetime is ' + await card.locator('.when time').getAttribute('datetime'));
    check(await card.locator('.price span[lang="de-DE"]').count() === 1, 'the price is not marked lang="de-DE"');
    const when = squash(await card.locator('.when').textContent());
    check(when === `${EVENT.when} · ${EVENT.venue}`,
          `the list says when and where "${when}", not "${EVENT.when} · ${EVENT.venue}"`);
    const price = squash(await card.locator('.price').textContent());
    check(new RegExp(`^${EVENT.price} · \\d+ seats? left$`).test(price),
          `the list's price reads "${price}", not "${EVENT.price} · N seats left"`);
    await fits(page, 'the list');
  }
  await Promise.all([page.waitForURL(/\/e\/\d+$/), card.getByRole('link', { name: EVENT.name }).tap()]);
  check(await text(page, 'h1') === EVENT.name, `${label}: the event's page is headed "${await text(page, 'h1')}"`);
}

/* fill the form and send it; the response to the POST */
async function submit(page, buyer) {
  await page.getByLabel('Seats').selectOption(String(buyer.seats));
  await page.getByLabel('Name').fill(buyer.name);
  await page.getByLabel('Email').fill(buyer.email);
  const posted = page.waitForResponse((r) => r.request().method() === 'POST' && /\/checkout$/.test(r.url()));
  await page.getByRole('button', { name: 'Continue to payment' }).tap();
  return posted;
}

/* the form sent: paysink's page, its amount and its line */
async function atPaymentPage(page, buyer, label) {
  const posted = await submit(page, buyer);
  if (posted.status() !== 303) {
    // say why: a browser's form POST carries the Origin that the page's
    // Referrer-Policy allows ("null" under no-referrer), and the box's
    // guard (src/http_guard.c) refuses a foreign or "null" Origin
    const sent = await posted.request().allHeaders();
    const form = posted.url().replace(/\/checkout$/, '');
    const policy = (await fetch(form)).headers.get('referrer-policy');
    const body = squash(await posted.text().catch(() => '(no body)')).slice(0, 300);
    throw new Fail(`${label}: the checkout answered ${posted.status()}, not 303 to the payment page; ` +
                   `the browser sent Origin: ${sent.origin ?? '(none)'} from ${form}, served with ` +
                   `Referrer-Policy: ${policy}; the answer: ${body}`);
  }
  await page.waitForURL(/\/pay\/cs_/);
  const here = new URL(page.url());
  check(here.origin !== shopOrigin, `${label}: the payment page is on the shop's own origin`);
  if (!paysinkOrigin) paysinkOrigin = here.origin;
  check(here.origin === paysinkOrigin, `${label}: the payment page is at ${here.origin}, not ${paysinkOrigin}`);
  const total = await text(page, '.total');
  const want = `${(25 * buyer.seats).toFixed(2)} EUR`;
  check(total === want, `${label}: the payment page's total reads "${total}", not "${want}"`);
  const line = await text(page, 'li');
  check(line.includes(EVENT.name) && line.includes(`× ${buyer.seats}`) && line.includes(EVENT.when),
        `${label}: the payment page's line reads "${line}"`);
  await fits(page, `${label}: the payment page`);
}

/* Pay, then back at the shop: "Thank you", the order id and the email */
async function payAndConfirm(page, buyer, label) {
  await Promise.all([page.waitForURL((u) => u.origin === shopOrigin && /^\/h\/[^/]+$/.test(u.pathname)),
                     page.getByRole('button', { name: 'Pay' }).tap()]);
  check(new URL(page.url()).searchParams.get('paid') === '1', `${label}: back at the shop without ?paid=1: ${page.url()}`);
  // "Confirming your payment…" reloads itself every few seconds until the
  // payment is known; the order's page is the end
  await page.locator('h1', { hasText: 'Thank you' }).waitFor({ timeout: TIMEOUT * 2 }).catch(async () => {
    throw new Fail(`${label}: no "Thank you" at ${page.url()}; the page says: ${squash(await page.locator('main').textContent())}`);
  });
  const main = squash(await page.locator('main').textContent());
  const summary = `${buyer.seats} seats for ${EVENT.name}: ${(25 * buyer.seats).toFixed(2).replace('.', ',')} €`;
  check(main.includes(summary), `${label}: the confirmation has no "${summary}": ${main}`);
  check(main.includes(`on their way to ${buyer.email}`), `${label}: the confirmation names no "${buyer.email}": ${main}`);
  const m = /Order (\S+)$/.exec(main);
  check(m && /^[A-Za-z0-9-]{4,}$/.test(m[1]), `${label}: the confirmation shows no order id: ${main}`);
  const bold = squash(await page.locator('main p', { hasText: 'Order' }).locator('b').textContent());
  check(bold === m[1], `${label}: the order id "${bold}" is not the one read "${m[1]}"`);
  await fits(page, `${label}: the confirmation`);
  return m[1];
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-dev-shm-usage'],
  });
  try {
    // 1-3: a buyer on a phone, JavaScript on
    const ctx = await browser.newContext({ ...PHONE });
    const page = await ctx.newPage();
    watch(page, 'phone');
    await openEvent(page, 'phone', { checkList: true });
    const when = await text(page, 'main > .when');
    check(when === `${EVENT.when} · ${EVENT.venue}`, `the event's page says when and where "${when}"`);
    const price = await text(page, 'main > .price');
    check(new RegExp(`^${EVENT.price} a seat · \\d+ seats? left$`).test(price), `the event's price reads "${price}"`);
    check(await page.locator('time').first().textContent() === EVENT.when, 'the date is not in its <time>');
    await fits(page, "the event's page");
    await targets(page, 'form input, form select, form button', "the event's form");
    await shot(page, 'event');
    await atPaymentPage(page, BUYERS.phone, 'phone');
    await shot(page, 'pay');
    const order1 = await payAndConfirm(page, BUYERS.phone, 'phone');
    await shot(page, 'done');
    console.log(`order ${order1} ${BUYERS.phone.email} ${BUYERS.phone.seats}`);

    // 4: a checkout left unpaid (Cancel on the payment page): its countdown
    await openEvent(page, 'held');
    await atPaymentPage(page, BUYERS.held, 'held');
    await Promise.all([page.waitForURL((u) => u.origin === shopOrigin && /^\/h\/[^/]+$/.test(u.pathname)),
                       page.getByRole('link', { name: 'Cancel' }).tap()]);
    const holdUrl = page.url();
    check(await text(page, 'h1') === 'Your checkout', `the unpaid checkout's page is headed "${await text(page, 'h1')}"`);
    const left = page.locator('[data-left]');
    await page.waitForFunction(() => /^\d+:\d{2} left$/.test(document.querySelector('[data-left]').textContent));
    const first = await left.textContent();
    const [mm, ss] = first.split(' ')[0].split(':').map(Number);
    check(mm * 60 + ss <= 600 && mm * 60 + ss >= 540, `the countdown starts at "${first}", not within the hold's 10 minutes`);
    const t0 = Date.now();
    await page.waitForFunction((was) => document.querySelector('[data-left]').textContent !== was, first,
                               { timeout: 2000 }).catch(() => { throw new Fail(`the countdown stays at "${first}" for 2 s`); });
    const second = await left.textContent();
    check(/^\d+:\d{2} left$/.test(second), `the countdown reads "${second}" after ${Date.now() - t0} ms`);
    // "held until" the venue's clock: now + 10 min in Berlin, give or take a minute
    const held = await text(page, '.held');
    const hm = /held until ()(\d{2}):(\d{2}) \(/.exec(held);
    check(hm, `the checkout says "${held}", not until a time of Berlin's clock`);
    const berlin = (ms) => new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', hour12: false })
      .format(new Date(ms));
    const near = [-1, 0, 1].map((d) => berlin(Date.now() + (10 + d) * 60000 - (600 - (mm * 60 + ss)) * 1000));
    check(near.includes(`${hm[2]}:${hm[3]}`), `the hold ends at ${hm[2]}:${hm[3]}, not about ${near[1]} (Berlin)`);
    const pay = page.getByRole('link', { name: /^Pay 25,00 €$/ });
    check(await pay.count() === 1, 'the unpaid checkout has no "Pay 25,00 €" link');
    await fits(page, "the checkout's page");
    await targets(page, 'main a.button, main button', "the checkout's page");
    await shot(page, 'hold');
    console.log(`held ${new URL(holdUrl).pathname.slice(3)} ${BUYERS.held.email} ${BUYERS.held.seats}`);

    // 5: the same purchase with JavaScript off
    const nojs = await browser.newContext({ ...PHONE, javaScriptEnabled: false });
    const np = await nojs.newPage();
    watch(np, 'no-js');
    await openEvent(np, 'no-js');
    await atPaymentPage(np, BUYERS.nojs, 'no-js');
    const order2 = await payAndConfirm(np, BUYERS.nojs, 'no-js');
    check(order2 !== order1, `both buyers were shown order ${order1}`);
    await shot(np, 'nojs-done');
    console.log(`order ${order2} ${BUYERS.nojs.email} ${BUYERS.nojs.seats}`);
    await np.goto(holdUrl);
    const minutes = squash(await np.locator('[data-left]').textContent());
    check(/^\d+ min$/.test(minutes), `without JavaScript the checkout's time left reads "${minutes}", not "N min"`);

    // 6: the form sent without its cookie: refused, and said so
    const stale = await browser.newContext({ ...PHONE });
    const sp = await stale.newPage();
    watch(sp, 'refused', { allow403: true });
    await openEvent(sp, 'refused');
    check((await stale.cookies()).some((c) => c.name === 'sd_csrf'), 'the event page set no sd_csrf cookie');
    await stale.clearCookies({ name: 'sd_csrf' });
    check(!(await stale.cookies()).some((c) => c.name === 'sd_csrf'), 'the sd_csrf cookie is still there');
    const refused = await submit(sp, BUYERS.refused);
    await sp.waitForLoadState();
    check(refused.status() === 403, `the form without its cookie answered ${refused.status()}, not 403`);
    check(new URL(sp.url()).origin === shopOrigin, `the refused form went on to ${sp.url()}`);
    check(await text(sp, 'h1') === EVENT.name, `the refusal is headed "${await text(sp, 'h1')}", not the event's page`);
    const alert = sp.getByRole('alert');
    check(await alert.count() === 1, 'the refusal shows no message with role=alert');
    const said = squash(await alert.textContent());
    check(/out of date/.test(said) && /send it again/.test(said), `the refusal says "${said}"`);
    const fresh = (await stale.cookies()).find((c) => c.name === 'sd_csrf');
    check(fresh && fresh.httpOnly, 'the refusal set no fresh (HttpOnly) sd_csrf cookie to try again with');
    check(await sp.locator('input[name=csrf]').getAttribute('value') === fresh.value,
          "the refused page's form does not carry the fresh cookie's token");
    // what the buyer typed is kept, to send again as it is
    check(await sp.locator('input[name=name]').inputValue() === BUYERS.refused.name &&
          await sp.locator('input[name=email]').inputValue() === BUYERS.refused.email &&
          await sp.locator('select[name=seats]').inputValue() === String(BUYERS.refused.seats),
          'the refused form lost what the buyer typed');
    await fits(sp, 'the refusal');
    await shot(sp, 'refused');

    const all = [...problems.splice(0), ...foreign()];
    check(all.length === 0, all.join('\n'));
  } finally {
    await browser.close();
  }
}

main().then(() => process.exit(0), (e) => {
  console.error('shop: FAIL: ' + (e instanceof Fail ? e.message : (e && e.stack) || e));
  if (problems.length) console.error('shop: also: ' + problems.join('\n'));
  process.exit(1);
});
