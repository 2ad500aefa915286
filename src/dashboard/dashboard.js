/*
 * dashboard.js: the operator page of Stagedoor Box.  Plain JS, no framework,
 * no request to anything but the box that served it (the server's
 * Content-Security-Policy enforces that).
 *
 * It asks for the API token once (kept in sessionStorage, so it dies with
 * the tab), sends "Authorization: Bearer <token>" on every /v1 call, and
 * refreshes every REFRESH_MS.  A 401 asks for the token again.  Everything
 * the API returns goes into the page as text (textContent), never as HTML.
 *
 * The JSON it reads; the API (src/api.c) answers with these shapes:
 *
 *   GET /v1/stats ->
 *     {"jobs": {"total": {"ready":N, "scheduled":N, "leased":N, "dead":N, "done":N},
 *               "by_kind": {"render_tickets": {"ready":N, "scheduled":N, "leased":N, "dead":N, "done":N}, ...}},
 *      "orders": N, "emails_sent": N,
 *      "events": [{"id":1, "name":"...", "venue":"...", "starts_at":"...", "starts_at_ms":MS,
 *                  "capacity":N, "orders":N, "seats_sold":N, "seats_remaining":N}],
 *      "done_per_minute": N,                      (jobs finished in the last 60 s)
 *      "duplicates_absorbed": {"check_state":N, "unique_claim":N, "provider_key":N,
 *                              "processed_jobs":N},
 *      "stale_acks": N,                           (counted by the worker processes)
 *      "disk": {"db_free_bytes":N|null, "state_free_bytes":N|null,  (null: unreadable)
 *               "warn_bytes":N, "low":bool},    (low: either is below warn_bytes)
 *      "backup": null |                           (null: no backup_dir, no periodic backups)
 *               {"dir":"...", "interval_ms":N, "ok":bool, "count":N, "failures_total":N,
 *                "last_ok":"stagedoor-...Z"|null, "last_ok_at":"ISO"|null,
 *                "last_ok_at_ms":MS|null, "age_ms":N|null,  (the newest good one, server clock)
 *                "last_failed":bool, "error":"..."|null}}   (why the last attempt failed)
 *   GET /v1/jobs?state=leased ->
 *     {"jobs": [{"state":"leased", "id":N, "job_id":"outbox:12", "kind":"send_tickets",
 *                "payload":{...}, "priority":N, "deliveries":N, "attempts":N,
 *                "visible_at":MS, "created_at":MS, "worker":"w1", "last_error":null,
 *                "leased_at":MS, "lease_age_ms":N,  (since the claim, server clock)
 *                "lease_expires_in_ms":N}]}      (time the lease has left, server clock)
 *   GET /v1/jobs?state=dead ->
 *     {"jobs": [{"state":"dead", "id":N, "job_id":"...", "kind":"...", "payload":{...},
 *                "priority":N, "deliveries":N, "attempts":N, "created_at":MS,
 *                "died_at":MS, "last_error":"..."}]}
 *   POST /v1/jobs/{job_id}/retry -> 200 {"job_id":"...", "retried":N}   (job_id percent-encoded)
 *   GET /v1/controls -> {"controls": [{"kind":"...", "paused":bool, "paused_at":MS|null,
 *                        "paused_by":"...", "rate":"10/s burst 20"|null, "concurrency":N|null,
 *                        "box_concurrency":N|null, "waiting":N, "running":N, "waited_ms":N}]}
 *   POST /v1/kinds/{kind}/pause, /resume -> 200 the kind's control (as above)
 *   GET /v1/schedules -> {"schedules": [{"name":"...", "kind":"...", "payload":{...},
 *                         "every_ms":N, "missed":"once|skip", "next_at":MS,
 *                         "last_at":MS|null, "last_job_id":"..."|null, "made":N}]}
 *   POST /v1/schedules {"name", "kind", "every" | "cron" [, "timezone"]} -> 201; DELETE /v1/schedules/{name} -> 200
 *   GET /v1/orders?recent=20 ->
 *     {"orders": [{"id":"T...", "event_id":1, "seats":N, "pdf":true,
 *                  "email":"sent|sending|pending", "created_at":MS}]}   (newest first)
 *   GET /v1/orders/{id}/tickets.pdf -> application/pdf
 *   POST /v1/scan {"code":"..."} ->
 *     {"result":"invalid"} or
 *     {"result":"admitted|already_scanned", "scanned_at":MS, "seat":"...", "order_id":"T..."}
 *   GET /v1/events -> {"events": [EVENT...]}   (operator, box_office, monitor)
 *   GET /v1/events/{id} -> EVENT                (a door token: its own event)
 *     EVENT: {"id":N, "name":"...", "venue":"...", "starts_at":"2026-12-04T19:00:00Z" (UTC),
 *             "starts_at_ms":MS, "capacity":N, "orders":N, "seats_sold":N, "seats_remaining":N,
 *             "admitted":N, "to_come":N, "cancelled":N, "state":"on_sale|closed|cancelled",
 *             "closed_at":"RFC 3339"|null, "cancelled_at", "cancel_reason", "change":N,
 *             "reminders":bool, "runs": [RUN] (GET /v1/events/{id} only: its whole-event
 *             runs, newest first)}
 *     RUN: {"kind":"cancel|move", "change":N, "orders":N, "done":N, "refunded":N,
 *           "at_window":N, "emailed":N, "failed":N, "finished_at":...|null, ...}
 *   The operator sets events up (box_office gets 403 for these):
 *   POST /v1/events {"name", "venue", "starts_at":"2026-12-31T20:00", "capacity"} -> 201 EVENT
 *     (a starts_at without a zone is the venue's local time; 400 {"error", "field":"starts_at"}
 *     for a past time, or one the venue's clocks skip or pass twice)
 *   PATCH /v1/events/{id} {the fields changed} -> 200 EVENT
 *     (409 {"error", "field":"capacity"} for a capacity below the seats sold)
 *   POST /v1/events/{id}/close -> 200 EVENT (state "closed": no more sales)
 *   POST /v1/events/{id}/cancel {"reason"} -> 202 EVENT (200 when it was already):
 *     the night's row asks for the reason first; a cancelled or moved event's
 *     row shows its latest run's progress, read with GET /v1/events/{id} on
 *     each refresh (the few events of the night only)
 *   Every CHARTS_MS (15 s; at once when the event chosen changes), for the
 *   pictures of the night, drawn by charts.js (its header: what it draws):
 *   GET /v1/events/{id}/sales ->
 *     {"event_id":N, "capacity":N, "sold":N,
 *      "hours": [{"hour":MS, "seats":N, "orders":N}]}   (start of the hour; oldest first,
 *                                                       hours with no sale left out)
 *   GET /v1/events/{id}/scans ->
 *     {"event_id":N, "admitted":N, "to_come":N,
 *      "per_minute": [{"minute":MS, "admitted":N, "refused":N}],  (oldest first, at most
 *                                                  6 h, minutes with no scan left out)
 *      "per_door": [{"door":"North door", "admitted":N, "refused":N, "last_at":MS}]}
 *   GET /v1/stats/history ->
 *     {"minutes": [{"minute":MS, "ready":N, "scheduled":N, "leased":N, "dead":N,
 *                   "done":N, "failed":N}]}         (the last hour, oldest first)
 *   The box office (boxoffice.js; its header has the JSON): GET /v1/orders?q=TEXT,
 *   GET /v1/orders/{id}, POST /v1/orders/{id}/resend, PATCH /v1/orders/{id}
 *   {"email"}, POST /v1/orders/{id}/cancel {"reason"}.
 *   Errors: any non-2xx status, body {"error":"..."} when JSON.
 *
 * The scripts load in order, all deferred: charts.js (draws SVG from JSON,
 * no fetch), boxoffice.js (the order search and actions, given this file's
 * helpers), then this file (token, roles, the refresh loop).
 *
 * Element ids the browser test (tests/browser/dashboard.mjs) relies on:
 * #token, #token-save, #state-<state>, #orders-total, #emails-sent,
 * #jobs-per-sec, #absorbed-<technique>, #stale-acks, #disk-db, #disk-state,
 * #backup-age[data-ms] (age_ms as given; "" when none) in #backup-card (class low: not ok),
 * #events-list tr[data-event-id] td.sold,
 * #leased-list tr[data-job-id] td.age[data-ms] (lease_age_ms as given),
 * #dead-list tr[data-job-id][data-dead-id] button.retry, #orders-list, #scan-code,
 * #controls-list tr[data-kind][data-paused="true|false"] with td.waited[data-ms]
 * and button.pause or button.resume (operator), #controls-empty,
 * #control-pause-form (#control-kind, #control-pause, #control-message),
 * #schedules-list tr[data-name] with button.remove (operator), #schedules-empty,
 * #schedule-form (#schedule-name, #schedule-kind, #schedule-every (a period or a cron
 * expression), #schedule-zone, #schedule-add,
 * #schedule-message),
 * #scan-go, #scan-result, #status (data-refreshed counts refreshes), #role (the
 * token's role and name), body[data-role], and the sections #queue, #scan,
 * #events, #controls, #leases, #dead, #orders, #charts, #box-office (hidden when the
 * role may not read them).
 * The pictures, in #charts (data-refreshed counts the chart loads):
 * #chart-sales, #chart-scans, #chart-jobs, #chart-depth (figures, hidden
 * when the role may not read them: operator all four, box_office sales and
 * scans, door the scans of its own event, monitor jobs and depth), each
 * with one <svg data-points="N"> (the entries drawn: the hours, per_minute
 * or minutes of its JSON) and a .note; #chart-sales and #chart-scans carry
 * data-event-id (the event drawn), chosen in #chart-event (a select;
 * #chart-event-pick hidden for a door token); #door-table tbody
 * tr[data-door] (the scans' per_door).
 * The box office, in #box-office: #order-search (input), #order-search-go,
 * #order-results tbody tr[data-order-id] (a click opens the order;
 * #order-results-empty when none), #order-detail[data-order-id]
 * [data-cancelled] (class cancelled) with #order-title, #order-badge,
 * #order-facts, #order-tickets tr[data-ticket-id][data-state],
 * #order-emails tr[data-kind], #order-changes tr[data-kind] (newest first),
 * #order-resend, #order-email + #order-email-save, #order-cancel-reason,
 * #order-cancel then #order-cancel-confirm / #order-cancel-keep,
 * #order-pdf, #order-close, and #order-message (class ok, error or
 * pending).  A click on a #orders-list row opens that order too.
 *   GET /v1/whoami -> {"role":"operator|box_office|door|monitor", "name":"...",
 *                      "event_id":N|null, "metrics_auth":bool,
 *                      "timezone":"Europe/Berlin",              (the venue's zone, IANA)
 *                      "zone_names":{"3600":"CET", "7200":"CEST"}}  (its UTC offsets in
 *                                                   seconds east -> the abbreviation)
 *
 * Every time shown is the venue's (whoami's timezone), never the browser's,
 * as "YYYY-MM-DD HH:MM ABBR" (venueClock below; the charts' axes HH:MM with
 * the abbreviation in their caption).
 *
 * The operator's page opens on the night (#night: the events of today and
 * the next 7 days, and those started in the last 12 hours), then the sale at
 * the window, the door scan, the charts, the box office, all events, recent
 * orders; the queue's internals (#queue, #leases, #dead) come last.
 * #night-list tbody tr[data-event-id][data-state="on_sale|closed|sold_out"]
 * with td.when, td.state, button.edit and button.close-sales (operator), then
 * tr.confirm-row with button.close-confirm / button.close-keep; #night-empty,
 * #night-message; #venue-zone.  #event-new opens #event-form[data-mode=
 * "create|edit"][data-event-id] (#event-name, #event-venue, #event-starts (a
 * datetime-local in the venue's time), #event-capacity, #event-save,
 * #event-form-close, #event-error-<field>, #event-message).  The sale at the
 * window (#sell) is boxoffice.js's.  #state-dead-card has class bad when
 * dead is not 0.
 */
'use strict';

(function () {
  const venueClock = window.venueClock;   /* the venue's clock: clock.js */
  const REFRESH_MS = 3000;
  const CHARTS_MS = 15000;   /* the charts and an open order refresh less often */
  const TOKEN_KEY = 'stagedoor.token';
  const STATES = ['ready', 'scheduled', 'leased', 'dead', 'done'];
  const TECHNIQUES = ['check_state', 'unique_claim', 'provider_key', 'processed_jobs'];

  const $ = (id) => document.getElementById(id);
  let timer = null;
  let refreshes = 0;
  let eventNames = new Map();
  let boxOffice = null;      /* boxoffice.js, attached in start() */

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

  class AuthError extends Error {}

  /* ApiError: a non-2xx answer; status, and why: the server's own words
   * (its "error"), which the box office shows as they are. */
  class ApiError extends Error {
    constructor(message, status, why, data) {
      super(message);
      this.status = status;
      this.why = why;
      this.data = data;
    }
  }

  /* api: one /v1 call; the parsed JSON, or throws (AuthError on 401,
   * ApiError on any other non-2xx; a network error as fetch throws it).
   * more: other headers (the sale's Idempotency-Key). */
  async function api(method, path, body, more) {
    const headers = Object.assign({ 'Authorization': 'Bearer ' + token() }, more || {});
    const init = { method, headers, cache: 'no-store', credentials: 'omit' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const r = await fetch(path, init);
    if (r.status === 401) throw new AuthError('the token was refused');
    let data = null;
    const type = r.headers.get('Content-Type') || '';
    if (type.startsWith('application/json')) data = await r.json();
    if (!r.ok) {
      const why = data && data.error ? (typeof data.error === 'string' ? data.error : JSON.stringify(data.error)) : r.statusText;
      const e = new ApiError(method + ' ' + path + ': ' + r.status + ' ' + why, r.status, why, data);
      e.retryAfter = Number(r.headers.get('Retry-After')) || 0;
      throw e;
    }
    return data;
  }

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  const NUM = new Intl.NumberFormat('en-US');
  function num(n) {
    return typeof n === 'number' && isFinite(n) ? NUM.format(n) : '–';
  }

  function age(ms) {
    if (typeof ms !== 'number' || !isFinite(ms)) return '–';
    if (ms < 0) return 'expired';
    if (ms < 1000) return ms + ' ms';
    const s = Math.floor(ms / 1000);
    if (s < 60) return (ms / 1000).toFixed(1) + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + (s % 60) + ' s';
    return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
  }


  let clock = venueClock('UTC', {});

  /* when: a time (ms, or an RFC 3339 string) on the venue's clock */
  function when(t) {
    const ms = typeof t === 'string' ? Date.parse(t) : t;
    return typeof ms === 'number' && isFinite(ms) ? clock.when(ms) : '–';
  }

  /* fillRows: replace a table's rows; each cell is labelled with its column's
   * heading (data-label), which a phone screen shows beside the value. */
  function fillRows(tbodyParent, emptyId, rows) {
    const tbody = tbodyParent.querySelector('tbody');
    const heads = Array.from(tbodyParent.querySelectorAll('thead th'), (th) => th.textContent);
    for (const tr of rows)
      if (!tr.classList.contains('confirm-row'))
        Array.from(tr.children).forEach((td, i) => { td.dataset.label = heads[i] || ''; });
    tbody.replaceChildren(...rows);
    if (emptyId) $(emptyId).hidden = rows.length > 0;
  }

  /* ---- the sections ---- */

  /* bytes as "512 MiB" / "3.2 GiB"; the exact figure in data-bytes */
  function bytes(n) {
    if (typeof n !== 'number') return 'unknown';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0, v = n;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i && v < 10 ? v.toFixed(1) : Math.round(v).toString()) + ' ' + units[i];
  }

  function showDisk(id, free, warn) {
    $(id).textContent = bytes(free);
    $(id).dataset.bytes = typeof free === 'number' ? String(free) : '';
    const low = typeof free !== 'number' || (typeof warn === 'number' && free < warn);
    $(id + '-card').classList.toggle('low', low);
    $(id + '-card').title = low ? 'below the warning threshold (' + bytes(warn) + ')' : '';
  }

  /* the newest good periodic backup's age, red when /healthz finds the
   * backups not ok (too old, none, or the last attempt failed) */
  function showBackup(b) {
    const card = $('backup-card'), out = $('backup-age');
    const known = b && typeof b.age_ms === 'number';
    out.textContent = !b ? 'off' : known ? age(b.age_ms) + ' ago' : 'none yet';
    out.dataset.ms = known ? String(b.age_ms) : '';
    card.classList.toggle('low', !!b && !b.ok);
    card.title = !b ? 'no backup_dir: no periodic backups'
      : (b.last_failed && b.error ? 'last attempt failed: ' + b.error + '\n' : '') +
        (b.count || 0) + ' kept in ' + b.dir;
  }

  function showStats(s) {
    const bs = (s.jobs && s.jobs.total) || {};
    for (const st of STATES) $('state-' + st).textContent = num(bs[st] || 0);
    $('state-dead-card').classList.toggle('bad', (bs.dead || 0) > 0);
    $('orders-total').textContent = num(s.orders);
    $('emails-sent').textContent = num(s.emails_sent);
    const dpm = typeof s.done_per_minute === 'number' ? s.done_per_minute : 0;
    $('jobs-per-sec').textContent = (dpm / 60).toFixed(dpm && dpm < 600 ? 2 : 1);
    const absorbed = s.duplicates_absorbed || {};
    for (const t of TECHNIQUES) $('absorbed-' + t).textContent = num(absorbed[t] || 0);
    $('stale-acks').textContent = num(s.stale_acks || 0);
    showDisk('disk-db', s.disk && s.disk.db_free_bytes, s.disk && s.disk.warn_bytes);
    showDisk('disk-state', s.disk && s.disk.state_free_bytes, s.disk && s.disk.warn_bytes);
    showBackup(s.backup);

    const byKind = (s.jobs && s.jobs.by_kind) || {};
    const kinds = Object.keys(byKind).sort().map((k) => ({ kind: k, ...byKind[k] }));
    fillRows($('kinds'), null, kinds.map((k) => {
      const tr = el('tr');
      tr.dataset.kind = k.kind;
      tr.append(el('td', k.kind), el('td', num(k.ready || 0), 'num'), el('td', num(k.leased || 0), 'num'),
                el('td', num(k.dead || 0), 'num'), el('td', num(k.done || 0), 'num'));
      return tr;
    }));
  }

  /* eventState: "on_sale", "closed" or "sold_out", and its words */
  function eventState(e) {
    if (e.state === 'cancelled') return 'cancelled';
    if (e.state === 'closed') return 'closed';
    return typeof e.seats_remaining === 'number' && e.seats_remaining <= 0 ? 'sold_out' : 'on_sale';
  }
  const STATE_WORDS = { on_sale: 'on sale', closed: 'sales closed', sold_out: 'sold out',
                        cancelled: 'cancelled' };

  function showEvents(events) {
    eventNames = new Map(events.map((e) => [e.id, e.name]));
    shownEvents = events;
    showEventChoice(events);
    if (me && (me.role === 'operator' || me.role === 'box_office')) boxOffice.events(events);
    if (!$('night').hidden) showNight(events);
    fillRows($('events-list'), null, events.map((e) => {
      const tr = el('tr');
      tr.dataset.eventId = e.id;
      const bar = el('div', null, 'bar');
      const fill = el('span');
      const pct = e.capacity > 0 ? Math.min(100, (100 * e.seats_sold) / e.capacity) : 0;
      fill.style.width = pct.toFixed(1) + '%';
      bar.append(fill);
      bar.title = pct.toFixed(0) + '%';
      const tdBar = el('td');
      tdBar.append(bar);
      const st = eventState(e);
      tr.dataset.state = st;
      tr.append(el('td', e.name), el('td', when(e.starts_at_ms), 'when'), el('td', STATE_WORDS[st], 'state-' + st),
                el('td', num(e.seats_sold), 'num sold'), el('td', num(e.capacity), 'num'), tdBar);
      return tr;
    }));
  }

  /* ---- the night: today's events and the next 7 days' (operator) ---- */

  let shownEvents = [];
  let closing = null;        /* the event whose "close sales" asks to be confirmed */
  let cancelling = null;     /* the event whose "cancel event" asks for its reason */
  const runsOf = new Map();  /* event id -> its latest whole-event run */
  let eventBusy = false;     /* an event change in flight */
  let editing = null;        /* the event as it was when its edit opened */

  /* tonight: the events of the venue's today and next 7 days, and those
   * started in the last 12 hours; by start */
  function tonight(events) {
    const now = Date.now(), today = clock.day(now);
    return events.filter((e) => {
      const t = e.starts_at_ms;
      if (typeof t !== 'number') return false;
      if (t < now) return now - t <= 12 * 3600000;
      const d = clock.day(t) - today;
      return d >= 0 && d <= 7;
    }).sort((a, b) => a.starts_at_ms - b.starts_at_ms);
  }

  function nightMessage(text, kind) {
    $('night-message').textContent = text;
    $('night-message').className = 'order-message ' + (kind || '');
  }

  function showNight(events) {
    const list = tonight(events);
    const operator = me && me.role === 'operator';
    const rows = [];
    for (const e of list) {
      const tr = el('tr');
      const st = eventState(e);
      tr.dataset.eventId = e.id;
      tr.dataset.state = st;
      const ops = el('td', null, 'ops');
      if (operator) {
        const edit = el('button', 'Edit', 'quiet edit');
        edit.type = 'button';
        edit.setAttribute('aria-label', 'edit ' + e.name);
        edit.disabled = eventBusy;
        edit.addEventListener('click', () => openEventForm(e));
        ops.append(edit);
        if (e.state !== 'closed' && e.state !== 'cancelled')
          ops.append(askButton('Close sales', 'close-sales', 'close sales of ' + e.name,
                               () => { closing = e.id; cancelling = null; }));
        if (e.state !== 'cancelled')
          ops.append(askButton('Cancel event', 'cancel-event', 'cancel ' + e.name,
                               () => { cancelling = e.id; closing = null; }));
      }
      const stateCell = el('td', STATE_WORDS[st], 'state state-' + st);
      const run = runsOf.get(e.id);
      if (run) stateCell.append(el('span', runWords(run), 'run-progress'));
      tr.append(el('td', e.name), el('td', e.venue || '–'), el('td', when(e.starts_at_ms), 'when'),
                el('td', num(e.seats_sold) + ' / ' + num(e.capacity), 'num'),
                el('td', num(e.admitted), 'num'), el('td', num(e.seats_remaining), 'num'),
                stateCell, ops);
      rows.push(tr);
      if (operator && closing === e.id && e.state !== 'closed') rows.push(closeRow(e));
      if (operator && cancelling === e.id && e.state !== 'cancelled') rows.push(cancelRow(e));
    }
    fillRows($('night-list'), 'night-empty', rows);
  }

  /* closeRow: the second step of "close sales", under the event's row */
  function closeRow(e) {
    const tr = el('tr', null, 'confirm-row');
    tr.dataset.eventId = e.id;
    const td = el('td');
    td.colSpan = 8;
    const yes = el('button', 'Yes, close sales', 'danger close-confirm');
    const keep = el('button', 'Keep selling', 'quiet close-keep');
    yes.type = keep.type = 'button';
    yes.disabled = eventBusy;
    yes.addEventListener('click', () => closeSales(e));
    keep.addEventListener('click', () => { closing = null; showNight(shownEvents); });
    td.append(el('p', 'Close sales of ' + e.name + '? No ticket can be sold for it after this; ' +
                      'the tickets sold stay valid.'), yes, keep);
    tr.append(td);
    return tr;
  }

  /* askButton: a row's button whose second step asks first (ask() marks it) */
  function askButton(text, cls, label, ask) {
    const b = el('button', text, 'danger ' + cls);
    b.type = 'button';
    b.setAttribute('aria-label', label);
    b.disabled = eventBusy;
    b.addEventListener('click', () => { ask(); showNight(shownEvents); });
    return b;
  }

  /* runWords: a run's progress in one line, from the counts its jobs keep */
  function runWords(r) {
    const what = r.kind === 'cancel' ? 'cancelling' : 'moved (change ' + num(r.change) + ')';
    const parts = [num(r.done) + ' of ' + num(r.orders) + ' orders done'];
    if (r.kind === 'cancel') parts.push(num(r.refunded) + ' refunded', num(r.at_window) + ' owed at the window');
    parts.push(num(r.emailed) + ' emailed');
    if (r.failed) parts.push(num(r.failed) + ' failed');
    return ' · ' + (r.finished_at ? (r.kind === 'cancel' ? 'cancelled' : 'moved') + ': ' : what + ': ') +
      parts.join(', ');
  }

  /* cancelRow: "cancel event" asks why (the buyers' email says it) */
  function cancelRow(e) {
    const tr = el('tr', null, 'confirm-row');
    tr.dataset.eventId = e.id;
    const td = el('td');
    td.colSpan = 8;
    const label = el('label', 'Why (the buyers read it) ');
    const reason = el('input', null, 'cancel-reason');
    reason.type = 'text';
    reason.maxLength = 200;
    reason.required = true;
    label.append(reason);
    const yes = el('button', 'Yes, cancel the event', 'danger cancel-confirm');
    const keep = el('button', 'Keep the event', 'quiet cancel-keep');
    yes.type = keep.type = 'button';
    yes.disabled = eventBusy;
    yes.addEventListener('click', () => cancelEvent(e, reason.value.trim()));
    keep.addEventListener('click', () => { cancelling = null; showNight(shownEvents); });
    td.append(el('p', 'Cancel ' + e.name + '? Its sales stop, its doors refuse its tickets, every ' +
                      'order is cancelled and paid back, and each buyer gets one email. This cannot ' +
                      'be undone.'), label, yes, keep);
    tr.append(td);
    return tr;
  }

  async function cancelEvent(e, reason) {
    if (eventBusy) return;
    if (!reason) {
      nightMessage('Say why the event is cancelled: the buyers read it in their email.', 'error');
      return;
    }
    eventBusy = true;
    showNight(shownEvents);
    try {
      const r = await api('POST', '/v1/events/' + encodeURIComponent(e.id) + '/cancel', { reason });
      cancelling = null;
      nightMessage(((r && r.name) || e.name) + ' is cancelled: its orders are being cancelled, ' +
                   'paid back and told, below.', 'ok');
    } catch (err) {
      if (err instanceof AuthError) return fail(err);
      nightMessage(err.why || err.message, 'error');
    } finally {
      eventBusy = false;
    }
    refresh();
  }

  /* loadRuns: the latest run of each of the night's cancelled or moved events */
  async function loadRuns(events) {
    const want = tonight(events).filter((e) => e.state === 'cancelled' || e.change > 0);
    const got = await Promise.all(want.map((e) =>
      api('GET', '/v1/events/' + encodeURIComponent(e.id)).catch(() => null)));
    runsOf.clear();
    got.forEach((d) => { if (d && d.runs && d.runs.length) runsOf.set(d.id, d.runs[0]); });
  }

  async function closeSales(e) {
    if (eventBusy) return;
    eventBusy = true;
    showNight(shownEvents);
    try {
      const r = await api('POST', '/v1/events/' + encodeURIComponent(e.id) + '/close');
      closing = null;
      nightMessage('Sales of ' + ((r && r.name) || e.name) + ' are closed.', 'ok');
    } catch (err) {
      if (err instanceof AuthError) return fail(err);
      nightMessage(err.why || err.message, 'error');
    } finally {
      eventBusy = false;
    }
    refresh();
  }

  /* ---- the event form: a new event, or one edited (operator) ---- */

  const EVENT_FIELDS = ['name', 'venue', 'starts_at', 'capacity'];

  function fieldErrors(prefix, fields, field, text) {
    for (const f of fields) {
      const out = $(prefix + '-error-' + f);
      out.textContent = f === field ? text : '';
      out.parentElement.classList.toggle('invalid', f === field);
    }
  }

  function eventMessage(text, kind) {
    $('event-message').textContent = text;
    $('event-message').className = 'order-message ' + (kind || '');
  }

  /* openEventForm: empty for a new event, or filled from e to edit it */
  function openEventForm(e) {
    const f = $('event-form');
    editing = e || null;
    f.dataset.mode = e ? 'edit' : 'create';
    f.dataset.eventId = e ? String(e.id) : '';
    $('event-form-h').textContent = e ? 'Edit ' + e.name : 'New event';
    $('event-save').textContent = e ? 'Save the changes' : 'Create the event';
    $('event-name').value = e ? e.name : '';
    $('event-venue').value = e ? e.venue || '' : '';
    $('event-starts').value = e && typeof e.starts_at_ms === 'number' ? clock.local(e.starts_at_ms) : '';
    $('event-capacity').value = e ? String(e.capacity) : '';
    $('event-zone').textContent = clock.timezone;
    fieldErrors('event', EVENT_FIELDS, null, '');
    eventMessage('', '');
    f.hidden = false;
    f.scrollIntoView({ block: 'nearest' });
    $('event-name').focus();
  }

  function closeEventForm() {
    $('event-form').hidden = true;
    editing = null;
  }

  /* the form's fields as the API takes them; a start without a zone is the
   * venue's local time */
  function eventBody() {
    const cap = $('event-capacity').value.trim();
    return {
      name: $('event-name').value.trim(),
      venue: $('event-venue').value.trim(),
      starts_at: $('event-starts').value.slice(0, 16),
      capacity: cap === '' ? null : Number(cap),
    };
  }

  async function saveEvent(ev) {
    ev.preventDefault();
    if (eventBusy) return;
    const body = eventBody();
    let method = 'POST', path = '/v1/events', send = body;
    if (editing) {
      const was = { name: editing.name, venue: editing.venue || '', capacity: editing.capacity,
                    starts_at: typeof editing.starts_at_ms === 'number' ? clock.local(editing.starts_at_ms) : '' };
      send = {};
      for (const k of EVENT_FIELDS) if (body[k] !== was[k]) send[k] = body[k];
      if (!Object.keys(send).length) {
        eventMessage('Nothing changed.', 'ok');
        return;
      }
      method = 'PATCH';
      path = '/v1/events/' + encodeURIComponent(editing.id);
    }
    eventBusy = true;
    $('event-save').disabled = true;
    fieldErrors('event', EVENT_FIELDS, null, '');
    eventMessage('…', 'pending');
    try {
      const r = await api(method, path, send);
      const name = (r && r.name) || body.name;
      const at = r && typeof r.starts_at_ms === 'number' ? ', ' + when(r.starts_at_ms) : '';
      closeEventForm();
      nightMessage(editing === null && method === 'POST' ? 'Event ' + name + ' created' + at + '.'
                                                          : 'Event ' + name + ' saved' + at + '.', 'ok');
    } catch (e) {
      if (e instanceof AuthError) return fail(e);
      const field = e.data && typeof e.data.field === 'string' && EVENT_FIELDS.includes(e.data.field) ? e.data.field : null;
      fieldErrors('event', EVENT_FIELDS, field, e.why || e.message);
      eventMessage(field ? 'Not saved: see the field marked.' : 'Not saved: ' + (e.why || e.message), 'error');
      if (field) $({ name: 'event-name', venue: 'event-venue', starts_at: 'event-starts', capacity: 'event-capacity' }[field]).focus();
    } finally {
      eventBusy = false;
      $('event-save').disabled = false;
    }
    refresh();
  }

  /* The lease's age is the server's lease_age_ms, never this browser's clock
   * against leased_at: the two clocks need not agree. */
  function showLeased(jobs) {
    fillRows($('leased-list'), 'leased-empty', jobs.map((j) => {
      const tr = el('tr');
      const known = typeof j.lease_age_ms === 'number' && j.lease_age_ms >= 0;
      const tdAge = el('td', known ? age(j.lease_age_ms) + ' ago' : '–', 'num age');
      if (known) tdAge.dataset.ms = String(j.lease_age_ms);
      tr.dataset.jobId = j.job_id;
      tr.append(el('td', j.job_id, 'id'), el('td', j.kind), el('td', j.worker || '–'), tdAge,
                el('td', age(j.lease_expires_in_ms), 'num'), el('td', num(j.deliveries), 'num'));
      return tr;
    }));
  }

  function showDead(jobs) {
    fillRows($('dead-list'), 'dead-empty', jobs.map((j) => {
      const tr = el('tr');
      tr.dataset.jobId = j.job_id;
      /* the dead letter (its row id is reused once the table empties, died_at is not):
       * a job that dies again after a retry is a new one */
      tr.dataset.deadId = j.id + ':' + j.died_at;
      const b = el('button', 'Retry', 'retry');
      b.type = 'button';
      b.setAttribute('aria-label', 'retry ' + j.job_id);
      b.addEventListener('click', () => retry(j.job_id, tr, b));
      const tdB = el('td');
      tdB.append(b);
      tr.append(el('td', j.job_id, 'id'), el('td', j.kind), el('td', num(j.attempts), 'num'),
                el('td', j.last_error || '', 'err'), tdB);
      return tr;
    }));
  }

  /* The kinds a control holds back: a pause (with a Resume button for the
   * operator), a rate, a cap on running jobs, and how long the oldest ready
   * job has waited, as the server counts it. */
  function showControls(controls) {
    const op = me && me.role === 'operator';
    $('control-pause-form').hidden = !op;
    fillRows($('controls-list'), 'controls-empty', controls.map((k) => {
      const tr = el('tr');
      tr.dataset.kind = k.kind;
      tr.dataset.paused = String(!!k.paused);
      const atOnce = [k.concurrency ? String(k.concurrency) : '', k.box_concurrency ? k.box_concurrency + ' per box' : '']
        .filter(Boolean).join(', ');
      const tdWait = el('td', k.waited_ms > 0 ? age(k.waited_ms) : '–', 'num waited');
      tdWait.dataset.ms = String(k.waited_ms || 0);
      const tdB = el('td');
      if (op) {
        const b = el('button', k.paused ? 'Resume' : 'Pause', k.paused ? 'resume' : 'pause');
        b.type = 'button';
        b.setAttribute('aria-label', (k.paused ? 'resume ' : 'pause ') + k.kind);
        b.addEventListener('click', () => setPaused(k.kind, !k.paused, b));
        tdB.append(b);
      }
      tr.append(el('td', k.kind, 'id'),
                el('td', k.paused ? 'paused' + (k.paused_by ? ' by ' + k.paused_by : '') : 'running', k.paused ? 'state-paused' : ''),
                el('td', k.rate || '–'), el('td', atOnce || '–'), el('td', num(k.waiting), 'num'),
                el('td', num(k.running), 'num'), tdWait, tdB);
      return tr;
    }));
  }

  async function setPaused(kind, pause, button) {
    if (button) button.disabled = true;
    try {
      await api('POST', '/v1/kinds/' + encodeURIComponent(kind) + (pause ? '/pause' : '/resume'));
      $('control-message').textContent = kind + (pause ? ' paused' : ' resumed');
      refresh();
    } catch (e) {
      if (button) button.disabled = false;
      if (e instanceof AuthError) return fail(e);
      $('control-message').textContent = 'Not done: ' + (e.why || e.message);
    }
  }

  /* an interval in ms as the schedule was given: 30s, 5m, 2h, 1d */
  function every(ms) {
    for (const [u, n] of [['d', 86400000], ['h', 3600000], ['m', 60000], ['s', 1000]])
      if (ms % n === 0) return (ms / n) + u;
    return ms + 'ms';
  }

  function showSchedules(list) {
    const op = me && me.role === 'operator';
    $('schedule-form').hidden = !op;
    fillRows($('schedules-list'), 'schedules-empty', list.map((sc) => {
      const tr = el('tr');
      tr.dataset.name = sc.name;
      const tdB = el('td');
      if (op) {
        const b = el('button', 'Remove', 'remove');
        b.type = 'button';
        b.setAttribute('aria-label', 'remove schedule ' + sc.name);
        b.addEventListener('click', () => removeSchedule(sc.name, b));
        tdB.append(b);
      }
      const at = sc.cron ? sc.cron + (sc.timezone ? ' ' + sc.timezone : '') : every(sc.every_ms);
      tr.append(el('td', sc.name, 'id'), el('td', sc.kind), el('td', at),
                el('td', when(sc.next_at)), el('td', sc.last_at ? when(sc.last_at) : '–'),
                el('td', num(sc.made), 'num'), tdB);
      return tr;
    }));
  }

  async function removeSchedule(name, button) {
    button.disabled = true;
    try {
      await api('DELETE', '/v1/schedules/' + encodeURIComponent(name));
      $('schedule-message').textContent = name + ' removed';
      refresh();
    } catch (e) {
      button.disabled = false;
      if (e instanceof AuthError) return fail(e);
      $('schedule-message').textContent = 'Not removed: ' + (e.why || e.message);
    }
  }

  async function addSchedule(ev) {
    ev.preventDefault();
    /* a period has no space; a cron expression has five fields or is @daily and the like */
    const at = $('schedule-every').value.trim(), zone = $('schedule-zone').value.trim();
    const body = { name: $('schedule-name').value.trim(), kind: $('schedule-kind').value.trim() };
    if (/\s/.test(at) || at.startsWith('@')) {
      body.cron = at;
      if (zone) body.timezone = zone;
    } else {
      body.every = at;
    }
    try {
      await api('POST', '/v1/schedules', body);
      $('schedule-message').textContent = body.name + ' added';
      $('schedule-form').reset();
      refresh();
    } catch (e) {
      if (e instanceof AuthError) return fail(e);
      $('schedule-message').textContent = 'Not added: ' + (e.why || e.message);
    }
  }

  function showOrders(orders) {
    fillRows($('orders-list'), 'orders-empty', orders.map((o) => {
      const tr = el('tr');
      tr.dataset.orderId = o.id;
      const tdPdf = el('td');
      if (o.pdf) {
        const a = el('a', 'PDF');
        a.href = '/v1/orders/' + encodeURIComponent(o.id) + '/tickets.pdf';
        a.addEventListener('click', (ev) => { ev.preventDefault(); openPdf(o.id); });
        tdPdf.append(a);
      } else {
        tdPdf.textContent = 'rendering';
      }
      tr.append(el('td', o.id, 'id'), el('td', eventNames.get(o.event_id) || ('#' + o.event_id)),
                el('td', num(o.seats), 'num'), tdPdf, el('td', o.email || '–', 'state-' + (o.email || '')),
                el('td', when(o.created_at)));
      /* a click on the row (not its PDF link) opens the order in the box office */
      tr.addEventListener('click', (ev) => {
        if (!ev.target.closest('a') && !$('box-office').hidden) boxOffice.open(o.id);
      });
      return tr;
    }));
  }

  /* ---- pictures of the night (drawn by charts.js) ---- */

  /* Which charts each role's token may read (the API's route table again);
   * a door token sees its own event's scans, and only when bound to one. */
  const CHARTS = {
    operator: ['sales', 'scans', 'jobs', 'depth'],
    box_office: ['sales', 'scans'],
    door: ['scans'],
    monitor: ['jobs', 'depth'],
  };
  const ALL_CHARTS = CHARTS.operator;
  let chartsAt = 0;          /* when the charts were last asked for (this browser's clock) */
  let chartSeq = 0;          /* the newest chart load; older answers are dropped */
  let chartEventId = null;   /* the event the sales and scans charts show */

  function chartShown(c) { return !$('charts').hidden && !$('chart-' + c).hidden; }

  /* pickEvent: tonight's event: the first to start after six hours ago,
   * else the last to have started */
  function pickEvent(events) {
    if (!events.length) return null;
    const byStart = events.slice().sort((a, b) => (a.starts_at_ms || 0) - (b.starts_at_ms || 0));
    const next = byStart.find((e) => (e.starts_at_ms || 0) >= Date.now() - 6 * 3600000);
    return (next || byStart[byStart.length - 1]).id;
  }

  /* showEventChoice: the event selector of the sales and scans charts; the
   * event chosen stays chosen while it is in the list */
  function showEventChoice(events) {
    const sel = $('chart-event');
    const ids = events.map((e) => String(e.id));
    if (ids.join() !== Array.from(sel.options, (o) => o.value).join())
      sel.replaceChildren(...events.map((e) => { const o = el('option', e.name); o.value = String(e.id); return o; }));
    else
      events.forEach((e, i) => { sel.options[i].textContent = e.name; });
    if (me && me.role === 'door') chartEventId = me.event_id;
    else if (!ids.includes(String(chartEventId))) chartEventId = pickEvent(events);
    sel.value = chartEventId === null ? '' : String(chartEventId);
  }

  /* drawChart: one chart from its answer ({data} or {error}); a failed
   * fetch leaves the last picture and says why in the chart's note */
  function drawChart(name, got, draw, ev) {
    const fig = $('chart-' + name);
    if (!chartShown(name)) return;
    if (!got) {   /* no event to show */
      fig.dataset.eventId = '';
      draw(fig, {});
      fig.querySelector('.note').textContent = 'no event yet';
      return;
    }
    fig.classList.toggle('error', !!got.error);
    if (got.error) {
      fig.querySelector('.note').textContent = got.error.why || got.error.message;
      return;
    }
    fig.dataset.eventId = ev === null || ev === undefined ? '' : String(ev);
    draw(fig, got.data || {});
  }

  /* loadCharts: the charts' JSON, every CHARTS_MS (and at once when the
   * event chosen changes); #charts[data-refreshed] counts the loads */
  async function loadCharts() {
    const C = window.StagedoorCharts;
    const seq = ++chartSeq;
    chartsAt = Date.now();
    const ev = me.role === 'door' ? me.event_id : chartEventId;
    const evPath = '/v1/events/' + encodeURIComponent(ev);
    const soft = (p) => p.then((data) => ({ data }), (e) => {
      if (e instanceof AuthError) throw e;
      return { error: e };
    });
    const [sales, scans, history] = await Promise.all([
      chartShown('sales') && ev ? soft(api('GET', evPath + '/sales')) : null,
      chartShown('scans') && ev ? soft(api('GET', evPath + '/scans')) : null,
      chartShown('jobs') || chartShown('depth') ? soft(api('GET', '/v1/stats/history')) : null,
    ]);
    if (seq !== chartSeq) return;
    drawChart('sales', sales, C.sales, ev);
    drawChart('scans', scans, C.scans, ev);
    if (history) {
      drawChart('jobs', history, C.jobs, null);
      drawChart('depth', history, C.depth, null);
    }
    $('charts').dataset.refreshed = String(Number($('charts').dataset.refreshed || 0) + 1);
  }

  /* ---- actions ---- */

  async function retry(jobId, tr, button) {
    button.disabled = true;
    try {
      await api('POST', '/v1/jobs/' + encodeURIComponent(jobId) + '/retry');
      tr.remove();
      if (!$('dead-list').querySelector('tbody tr')) $('dead-empty').hidden = false;
      setStatus('retried ' + jobId);
      refresh();
    } catch (e) {
      button.disabled = false;
      fail(e);
    }
  }

  /* openPdf: a link cannot carry the token, so fetch the PDF and open it as a blob. */
  async function openPdf(orderId) {
    try {
      const r = await fetch('/v1/orders/' + encodeURIComponent(orderId) + '/tickets.pdf',
                            { headers: { 'Authorization': 'Bearer ' + token() }, cache: 'no-store' });
      if (r.status === 401) throw new AuthError('the token was refused');
      if (!r.ok) throw new Error('tickets.pdf: ' + r.status);
      const url = URL.createObjectURL(await r.blob());
      const a = document.createElement('a');
      a.href = url;
      a.download = orderId + '.pdf';
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
    } catch (e) {
      fail(e);
    }
  }

  async function scan(ev) {
    ev.preventDefault();
    const out = $('scan-result');
    /* ticket codes are upper case (base32); one typed in lower case is the same */
    const code = $('scan-code').value.trim().toUpperCase();
    if (!code) return;
    out.className = 'scan-result';
    out.textContent = '…';
    try {
      const r = await api('POST', '/v1/scan', { code });
      const words = { admitted: 'ADMITTED', already_scanned: 'ALREADY SCANNED', invalid: 'INVALID',
                      wrong_event: 'WRONG EVENT', doors_closed: 'DOORS CLOSED',
                      cancelled: 'CANCELLED', event_cancelled: 'EVENT CANCELLED' };
      let text = words[r.result] || String(r.result);
      if (r.result === 'already_scanned' && r.scanned_at) text += ' at ' + when(r.scanned_at);
      if ((r.result === 'wrong_event' || r.result === 'doors_closed' ||
           r.result === 'event_cancelled') && r.event)
        text += ': ' + r.event.name + ', ' + when(r.event.starts_at_ms);
      out.textContent = text;
      out.className = 'scan-result ' + (words[r.result] ? r.result : 'error');
      $('scan-code').value = '';
      $('scan-code').focus();
    } catch (e) {
      out.textContent = e.message;
      out.className = 'scan-result error';
      if (e instanceof AuthError) askToken(e.message);
    }
  }

  /* ---- refresh loop and token ---- */

  function setStatus(text, isError) {
    const s = $('status');
    s.textContent = text;
    s.classList.toggle('error', !!isError);
  }

  function fail(e) {
    if (e instanceof AuthError) askToken(e.message);
    else setStatus(e.message, true);
  }

  /* What each role's token may see (the API's route table says the same):
   * a section the role cannot read is hidden, and its data never asked for. */
  const SECTIONS = {
    operator: ['night', 'sell', 'queue', 'scan', 'events', 'controls', 'schedules', 'leases', 'dead', 'orders', 'charts', 'box-office'],
    box_office: ['sell', 'events', 'orders', 'charts', 'box-office'],
    door: ['scan', 'events', 'charts'],
    monitor: ['queue', 'events', 'controls', 'schedules', 'charts'],
  };
  const ALL_SECTIONS = SECTIONS.operator;
  let me = null;   /* GET /v1/whoami for the token in use */

  function showRole() {
    const can = SECTIONS[me.role] || [];
    for (const id of ALL_SECTIONS) $(id).hidden = !can.includes(id);
    $('internals-h').hidden = !can.includes('queue');
    clock = venueClock(me.timezone, me.zone_names);
    window.StagedoorCharts.useClock(clock);
    $('venue-zone').textContent = clock.timezone;
    /* an unbound door token reads no event's counts */
    if (me.role === 'door' && !me.event_id) $('events').hidden = true;
    const charts = me.role === 'door' && !me.event_id ? [] : (CHARTS[me.role] || []);
    for (const c of ALL_CHARTS) $('chart-' + c).hidden = !charts.includes(c);
    if (!charts.length) $('charts').hidden = true;
    /* the door's event is its token's; the others choose */
    $('chart-event-pick').hidden = me.role === 'door' || !charts.some((c) => c === 'sales' || c === 'scans');
    if (me.role === 'door') chartEventId = me.event_id;
    $('role').textContent = me.role.replace('_', ' ') + ': ' + me.name;
    document.body.dataset.role = me.role;
  }

  async function load() {
    const can = SECTIONS[me.role] || [];
    const want = (id) => can.includes(id) && !$(id).hidden;
    const [stats, leased, dead, orders, events, controls, schedules] = await Promise.all([
      want('queue') ? api('GET', '/v1/stats') : null,
      want('leases') ? api('GET', '/v1/jobs?state=leased') : null,
      want('dead') ? api('GET', '/v1/jobs?state=dead') : null,
      want('orders') ? api('GET', '/v1/orders?recent=20') : null,
      want('events')
        ? (me.event_id ? api('GET', '/v1/events/' + me.event_id).then((e) => ({ events: [e] }))
                       : api('GET', '/v1/events'))
        : null,
      want('controls') ? api('GET', '/v1/controls') : null,
      want('schedules') ? api('GET', '/v1/schedules') : null,
    ]);
    if (stats) showStats(stats);
    if (controls) showControls(controls.controls || []);
    if (schedules) showSchedules(schedules.schedules || []);
    if (events && me.role === 'operator' && !$('night').hidden) await loadRuns(events.events || []);
    if (events) showEvents(events.events || []);
    if (leased) showLeased(leased.jobs || []);
    if (dead) showDead(dead.jobs || []);
    if (orders) showOrders(orders.orders || []);
  }

  async function refresh() {
    clearTimeout(timer);
    timer = null;
    if (!token()) return askToken('');
    try {
      if (!me) {
        me = await api('GET', '/v1/whoami');
        showRole();
      }
      await load();
      if (Date.now() - chartsAt >= CHARTS_MS) {
        await loadCharts();
        boxOffice.tick();
      }
      refreshes++;
      $('status').dataset.refreshed = String(refreshes);
      setStatus('updated ' + clock.short(Date.now()));
      $('main').hidden = false;
      window.StagedoorCharts.fit();   /* drawn while hidden: now the real width */
    } catch (e) {
      fail(e);
      if (e instanceof AuthError) return;
    }
    timer = setTimeout(refresh, REFRESH_MS);
  }

  function askToken(msg) {
    clearTimeout(timer);
    timer = null;
    sessionStorage.removeItem(TOKEN_KEY);
    me = null;
    chartsAt = 0;
    $('main').hidden = true;
    $('token-form').hidden = false;
    $('token-msg').textContent = msg || '';
    setStatus('token needed');
    $('token').focus();
  }

  function start() {
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('token').value.trim();
      if (!t) return;
      sessionStorage.setItem(TOKEN_KEY, t);
      $('token').value = '';
      $('token-form').hidden = true;
      setStatus('loading…');
      refresh();
    });
    $('scan-form').addEventListener('submit', scan);
    $('event-new').addEventListener('click', () => openEventForm(null));
    $('event-form').addEventListener('submit', saveEvent);
    $('schedule-form').addEventListener('submit', addSchedule);
    $('control-pause-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const kind = $('control-kind').value.trim();
      if (!kind) return;
      $('control-kind').value = '';
      setPaused(kind, true, null);
    });
    $('event-form-close').addEventListener('click', closeEventForm);
    $('chart-event').addEventListener('change', () => {
      chartEventId = Number($('chart-event').value);
      loadCharts().catch(fail);
    });
    boxOffice = window.StagedoorBoxOffice.attach({
      api, el, when, num, fillRows, fail, openPdf, AuthError, ApiError, token,
      eventName: (id) => eventNames.get(id) || ('#' + id),
      refresh: () => refresh(),
      focusBoxOffice: () => $('box-office').scrollIntoView({ block: 'start' }),
    });
    $('forget-token').addEventListener('click', () => askToken(''));
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && token()) refresh();
    });
    if (token()) refresh(); else askToken('');
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
