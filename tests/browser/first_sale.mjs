// first_sale.mjs: how long a first sale at the window takes on a fresh box,
// as its staff would make it in the dashboard (Debian's chromium, headless,
// driven by playwright-core): open the page, give it the operator's token,
// add tonight's event with "New event", sell two seats to a walk-up buyer
// paying cash, and "Print tickets" until the PDF is open.  It prints each
// step's time and the whole, and how many fields and clicks a person makes.
// A measurement, not a test: the venue's work is tested by venue.mjs.
//
// usage: node first_sale.mjs URL TOKEN
// exit 0 with the times on stdout; 1 with "first_sale: FAIL: ..." otherwise.
import { chromium } from 'playwright-core';

const [url, token] = process.argv.slice(2);
if (!url || !token) {
  console.error('usage: node first_sale.mjs URL TOKEN');
  process.exit(2);
}
const TIMEOUT = 30000;

async function main() {
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  try {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    page.setDefaultTimeout(TIMEOUT);
    const steps = [];
    let fields = 0, clicks = 0;
    const t0 = performance.now();
    let t = t0;
    const step = (name) => { const now = performance.now(); steps.push([name, now - t]); t = now; };

    await page.goto(url);
    await page.fill('#token', token); fields++;
    await page.click('#token-save'); clicks++;
    await page.waitForSelector('#status[data-refreshed]');
    step('open the dashboard with the token');

    await page.click('#event-new'); clicks++;
    const start = await page.evaluate(() => {
      const d = new Date(Date.now() + 3 * 3600 * 1000);
      return d.toISOString().slice(0, 10) + 'T20:00';
    });
    await page.fill('#event-name', 'First Night'); fields++;
    await page.fill('#event-venue', 'Main Hall'); fields++;
    await page.fill('#event-starts', start); fields++;
    await page.fill('#event-capacity', '120'); fields++;
    await page.click('#event-save'); clicks++;
    await page.waitForFunction(() => [...document.querySelectorAll('#sell-event option')]
      .some((o) => o.textContent.includes('First Night')));
    step('add the event');

    const value = await page.$$eval('#sell-event option', (l) =>
      l.find((o) => o.textContent.includes('First Night')).value);
    await page.selectOption('#sell-event', value); fields++;
    await page.fill('#sell-seats', '2'); fields++;
    await page.fill('#sell-name', 'Walk-up buyer'); fields++;
    await page.check('#sell-cash'); clicks++;
    await page.click('#sell-go'); clicks++;
    await page.waitForSelector('#sold:not([hidden])');
    step('sell two seats, cash');

    const tab = context.waitForEvent('page', { timeout: TIMEOUT });
    await page.click('#sold-print'); clicks++;
    await tab;
    await page.waitForSelector('#sold[data-pdf="opened"]', { timeout: TIMEOUT });
    step('print: the tickets PDF open');

    const total = performance.now() - t0;
    for (const [name, ms] of steps) console.log(`first_sale: ${name.padEnd(36)} ${(ms / 1000).toFixed(2)} s`);
    console.log(`first_sale: total ${(total / 1000).toFixed(2)} s of the browser's time; ` +
                `a person types ${fields} fields and makes ${clicks} clicks`);
  } finally {
    await browser.close();
  }
}

main().then(() => process.exit(0), (e) => {
  console.error('first_sale: FAIL: ' + ((e && e.message) || e));
  process.exit(1);
});
