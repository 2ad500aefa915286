// roles.mjs: the dashboard as a token of one role sees it.  Debian's
// chromium, headless, driven by playwright-core.  It fills TOKEN into the
// page, waits for the first refresh, and checks that:
//   - the page names the role (body[data-role], #role);
//   - exactly the sections that role may read are shown (the API's route
//     table: box_office reads events and orders, sells at the window and
//     works the box office, door scans and reads its event, monitor reads
//     the queue and events; the night, where events are set up, is the
//     operator's),
//   - a box office sees the sale form (offering events on sale), and
//     nothing to create, edit or close an event; a monitor or a door sees
//     neither the sale nor the event set-up;
//     and exactly the charts it may read (box_office: sales and scans; door:
//     its event's scans; monitor: jobs and queue depth), each drawn (an
//     <svg> with data-points);
//   - the page asked the API for nothing the role is refused (no 401 or 403);
//   - with a door token, a bogus code scans as INVALID;
//   - it threw no script error.
//
// usage: node roles.mjs URL TOKEN ROLE SCREENSHOT.png
// exit 0 on success; 1 with "roles: FAIL: ..." on stderr otherwise.
import { chromium } from 'playwright-core';

const [url, token, role, shot] = process.argv.slice(2);
if (!url || !token || !role || !shot) {
  console.error('usage: node roles.mjs URL TOKEN ROLE SCREENSHOT.png');
  process.exit(2);
}
const SHOWN = {
  operator: ['night', 'sell', 'queue', 'scan', 'events', 'leases', 'dead', 'orders', 'charts', 'box-office'],
  box_office: ['sell', 'events', 'orders', 'charts', 'box-office'],
  door: ['scan', 'events', 'charts'],
  monitor: ['queue', 'events', 'charts'],
};
const ALL = SHOWN.operator;
const CHARTS = {
  operator: ['sales', 'scans', 'jobs', 'depth'],
  box_office: ['sales', 'scans'],
  door: ['scans'],
  monitor: ['jobs', 'depth'],
};
const TIMEOUT = Number(process.env.DASHBOARD_TIMEOUT_MS) > 0 ? Number(process.env.DASHBOARD_TIMEOUT_MS) : 15000;

class Fail extends Error {}
function check(cond, msg) { if (!cond) throw new Fail(msg); }

async function main() {
  check(SHOWN[role], `unknown role ${role}`);
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'] });
  const problems = [];
  try {
    const page = await (await browser.newContext({ viewport: { width: 390, height: 844 } })).newPage();
    page.setDefaultTimeout(TIMEOUT);
    page.on('pageerror', (e) => problems.push('script error: ' + e.message));
    page.on('response', (r) => {
      if (r.status() === 401 || r.status() === 403) problems.push(`${r.status()} for ${r.url()}`);
    });
    const resp = await page.goto(url);
    check(resp && resp.ok(), `GET ${url}: HTTP ${resp && resp.status()}`);
    await page.locator('#token').waitFor({ state: 'visible' });
    await page.fill('#token', token);
    await page.click('#token-save');
    await page.waitForFunction(() => Number(document.getElementById('status').dataset.refreshed || 0) >= 1);
    check(await page.evaluate(() => document.body.dataset.role) === role, 'body[data-role] is not ' + role);
    const label = await page.locator('#role').textContent();
    check(label.includes(role.replace('_', ' ')), `#role says "${label}"`);
    for (const id of ALL) {
      const visible = await page.locator('#' + id).isVisible();
      check(visible === SHOWN[role].includes(id),
            `section #${id} is ${visible ? 'shown' : 'hidden'} to a ${role} token`);
    }
    await page.waitForFunction(() => Number(document.getElementById('charts').dataset.refreshed || 0) >= 1);
    for (const c of CHARTS.operator) {
      const fig = page.locator('#chart-' + c);
      const visible = await fig.isVisible();
      check(visible === CHARTS[role].includes(c), `chart #chart-${c} is ${visible ? 'shown' : 'hidden'} to a ${role} token`);
      if (visible)
        check(await page.locator(`#chart-${c} .plot svg[data-points]`).count() === 1, `chart #chart-${c} is not drawn`);
    }
    if (SHOWN[role].includes('events')) {
      await page.waitForFunction(() => document.querySelectorAll('#events-list tbody tr').length > 0);
    }
    /* the event set-up is the operator's: no form, no button to open it, edit or close */
    for (const sel of ['#event-new', '#event-form'])
      check(!(await page.locator(sel).isVisible()), `${sel} is shown to a ${role} token`);
    check(await page.locator('button.edit:visible, button.close-sales:visible, button.cancel-event:visible').count() === 0,
          `a ${role} token sees a button to edit, close or cancel an event`);
    if (role === 'box_office') {
      check(await page.locator('#sell-form').isVisible(), 'a box office token does not see the sale form');
      await page.waitForFunction(() => document.querySelectorAll('#sell-event option:not([value=""])').length > 0)
        .catch(() => { throw new Fail('the sale form offers a box office token no event'); });
    } else {
      check(!(await page.locator('#sell-form').isVisible()), `the sale form is shown to a ${role} token`);
    }
    if (role === 'door') {
      await page.fill('#scan-code', 'NOT-A-TICKET');
      await page.click('#scan-go');
      await page.waitForFunction(() => document.getElementById('scan-result').textContent === 'INVALID');
    }
    await page.screenshot({ path: shot, fullPage: true });
    check(problems.length === 0, problems.join('; '));
  } finally {
    await browser.close();
  }
}

main().then(() => process.exit(0), (e) => {
  console.error('roles: FAIL: ' + (e instanceof Fail ? e.message : e.stack || e));
  process.exit(1);
});
