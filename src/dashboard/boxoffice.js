/*
 * boxoffice.js: the dashboard's box office: sell tickets at the window, find
 * an order (by its id in any case, the buyer's email or a part of the name),
 * see everything about it, and act on it: send the tickets again, change the
 * email address, cancel it.
 *
 * It sets one global, window.StagedoorBoxOffice, with attach(ctx), which
 * dashboard.js calls once with its helpers (ctx: api, el, when, num,
 * fillRows, fail, eventName, openPdf, token, refresh; see there).  attach
 * returns { open(id), tick(), events(list) }: open shows an order's detail;
 * tick (on the charts' slower refresh) reloads the detail shown, without
 * touching what the person is typing; events gives the sale form the
 * events (GET /v1/events), of which it offers those on sale.
 *
 * The sale at the window (#sell-form; operator and box_office):
 *   POST /v1/orders, header Idempotency-Key: "KEY" (an RFC 8941 sf-string),
 *     {"event_id":N, "seats":N, "name":"...", "email":"..." (left out when none),
 *      "payment":"cash"|"card"}
 *   -> 201 {"id":"TF4K9C9KNY", "event_id", "name", "email":null|"...", "seats",
 *           "payment", "created_at"}   (the same KEY and body again: the same order)
 *   | 409 {"error":"sales for this event are closed"} or {"error":"sold out..."}
 *   | 409 {"error":"...still running", "field":"Idempotency-Key"} (Retry-After: the
 *     first request with this key is not done: asked again after it)
 *   | 400 {"error", "field"}.
 *   KEY is made once for a filled form (when the page opens, and again after
 *   a sale succeeded or the form is cleared), and sent with every attempt of
 *   that sale: a double click, a retry after an answer that never came, all
 *   sell once.  The button is disabled while a sale is in flight.
 *   After a sale #sold shows the order (#sold-id) with #sold-print: GET
 *   /v1/orders/{id}/tickets.pdf answers 404 {"error":"the tickets are not
 *   rendered yet"} until a worker made them; it is asked every PDF_POLL_MS
 *   up to PDF_WAIT_MS, then the PDF opens in a new tab (a blob: URL) for the
 *   browser's viewer to print; #sold-pdf-link opens it again.  #sold-open
 *   opens the order here.  Ids: #sell-event (only events on sale with seats
 *   left), #sell-seats, #sell-name, #sell-email, #sell-cash, #sell-card,
 *   #sell-go, #sell-reset, #sell-error-<field>, #sell-message (class ok,
 *   error or pending), #sell-form[data-key] (the key of the sale being
 *   filled), #sold[data-order-id][data-pdf="waiting|opened|error"],
 *   #sold-message.
 *
 * The JSON (the HTTP contract; errors are {"error":"...", "field":"..."}):
 *   GET /v1/orders?q=TEXT -> {"orders":[{"id", "event_id", "seats", "pdf", "email", "created_at",
 *                                        "name", "email_address", "cancelled"}]}  (at most 20, newest first)
 *   GET /v1/orders/{id} -> {"id", "event_id", "event", "venue", "starts_at", "name",
 *       "email":"..."|null (null: a walk-up sale, its tickets printed at the window),
 *       "payment":"cash"|"card"|"online"|null, "amount", "currency",
 *       "refund":null|{"amount_minor","via","done_at"}, "seats",
 *       "created_at", "pdf_stored", "pdf_key", "cancelled_at":MS|null, "resends":N,
 *       "tickets":[{"id", "seat", "state":"valid|admitted|cancelled", "scanned_at", "scanned_by", "pdf_stored"}],
 *       "emails":[{"kind", "state":"sent|sending|pending", "sent_at"}],
 *       "changes":[{"at":MS, "kind":"resend|email|cancel", "by", "detail"}], "jobs":[...]}
 *   POST /v1/orders/{id}/resend -> 202 {"id", "resend":N, "email"}
 *   PATCH /v1/orders/{id} {"email"} -> 200 the order
 *   POST /v1/orders/{id}/cancel {"reason"} -> 200 {"id", "cancelled":true, "already":bool, "seats_freed":N}
 *                                          | 409 {"error":"seat A-3 was admitted at ...", "admitted":[...]}
 *
 * Every action shows its outcome in #order-message (class ok or error; on
 * failure the server's own words), then reloads the detail.  A cancelled
 * order's panel has class cancelled and data-cancelled="true", and none of
 * its actions stays enabled (the PDF link does).  Cancel asks once more before it acts
 * (#order-cancel, then #order-cancel-confirm or #order-cancel-keep); an order
 * with a ticket admitted at the door cannot be cancelled: #order-cancel is
 * disabled and #order-cancel-blocked says so, before anything is asked.  An
 * order without an email cannot be sent again (#order-resend disabled); an
 * email can be given to it.
 */
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);

  function attach(ctx) {
    const { api, el, when, num, fillRows, fail, eventName } = ctx;
    const sale = attachSale(ctx, (id) => open(id));
    let current = null;      /* the order id shown in #order-detail */
    let shown = null;        /* its JSON as last shown */
    let lastQuery = '';      /* the last search, run again after an action */
    let busy = false;        /* an action in flight */
    let confirming = false;  /* the cancel's second step is shown */
    let loadSeq = 0;         /* the newest detail load; older answers are dropped */

    const path = (id, rest) => '/v1/orders/' + encodeURIComponent(id) + (rest || '');

    /* kind: 'ok', 'error' or 'pending' (an action in flight) */
    function message(text, kind) {
      const m = $('order-message');
      m.textContent = text;
      m.className = 'order-message ' + kind;
    }

    /* the server's words for a failed call, or the error's */
    function why(e) {
      return e && e.why ? e.why : e && e.message ? e.message : String(e);
    }

    function failed(e) {
      if (e instanceof ctx.AuthError) fail(e); else message(why(e), 'error');
    }

    /* ---- search ---- */

    async function search(ev) {
      if (ev) ev.preventDefault();
      const q = $('order-search').value.trim();
      if (!q) {
        $('order-search').focus();
        return;
      }
      lastQuery = q;
      await runSearch();
    }

    async function runSearch() {
      if (!lastQuery) return;
      const q = lastQuery;
      try {
        const r = await api('GET', '/v1/orders?q=' + encodeURIComponent(q));
        if (q !== lastQuery) return;   /* a newer search went out */
        showResults(r.orders || []);
      } catch (e) {
        failed(e);
      }
    }

    function showResults(orders) {
      $('order-results-box').hidden = false;
      fillRows($('order-results'), 'order-results-empty', orders.map((o) => {
        const tr = el('tr', null, o.id === current ? 'selected' : '');
        tr.dataset.orderId = o.id;
        const b = el('button', o.id, 'link');
        b.type = 'button';
        b.setAttribute('aria-label', 'open order ' + o.id);
        const tdId = el('td', null, 'id');
        tdId.append(b);
        const state = o.cancelled ? 'cancelled' : 'email ' + (o.email || '–');
        /* the name over the email, one block (a phone's row shows it beside "buyer") */
        const who = el('div');
        who.append(el('span', o.name || '–'), el('span', o.email_address || '', 'email'));
        const buyer = el('td', null, 'buyer');
        buyer.append(who);
        tr.append(tdId, buyer, el('td', eventName(o.event_id)), el('td', num(o.seats), 'num'),
                  el('td', when(o.created_at)),
                  el('td', state, o.cancelled ? 'state-cancelled' : 'state-' + (o.email || '')));
        tr.addEventListener('click', () => open(o.id));
        return tr;
      }));
      $('order-results-empty').textContent = 'No order matches “' + lastQuery + '”.';
    }

    /* ---- the detail ---- */

    async function open(id) {
      if (id !== current) {
        current = id;
        shown = null;
        confirming = false;
        $('order-message').textContent = '';
        $('order-message').className = 'order-message';
        for (const tr of $('order-results').querySelectorAll('tbody tr'))
          tr.classList.toggle('selected', tr.dataset.orderId === id);
      }
      await load(true);
      $('order-detail').scrollIntoView({ block: 'nearest' });
    }

    /* load: GET the order shown and draw it; fresh: also reset the inputs */
    async function load(fresh) {
      if (!current) return;
      const id = current, seq = ++loadSeq;
      try {
        const o = await api('GET', path(id));
        if (seq !== loadSeq || id !== current) return;
        show(o, fresh);
      } catch (e) {
        if (seq === loadSeq) failed(e);
      }
    }

    function fact(dl, term, value, cls) {
      const dd = el('dd', value, cls);
      dl.append(el('dt', term), dd);
      return dd;
    }

    function show(o, fresh) {
      shown = o;
      const panel = $('order-detail');
      const cancelled = o.cancelled_at !== null && o.cancelled_at !== undefined;
      panel.hidden = false;
      panel.dataset.orderId = o.id;
      panel.dataset.cancelled = String(cancelled);
      panel.classList.toggle('cancelled', cancelled);
      $('order-title').textContent = 'Order ' + o.id;
      $('order-badge').hidden = !cancelled;
      $('order-badge').textContent = cancelled ? 'CANCELLED ' + when(o.cancelled_at) : '';

      const dl = $('order-facts');
      dl.replaceChildren();
      fact(dl, 'buyer', o.name || '–');
      fact(dl, 'email', o.email || 'no email: tickets printed at the window', o.email ? 'email' : 'email none');
      const paid = o.payment === 'cash' || o.payment === 'card' ? o.payment + ' at the window'
        : o.payment === 'online' ? 'online' : 'none';
      fact(dl, 'payment', o.amount ? o.amount + ' ' + o.currency + ', ' + paid : paid, 'payment');
      if (o.refund) {
        const back = o.refund.failed_at ? 'the provider could not pay it back (' +
            (o.refund.failure || 'no reason given') + '): owed, pay it out at the window'
          : o.refund.done_at ? 'refunded ' + when(o.refund.done_at)
          : o.refund.via === 'window' ? 'owed: pay it out at the window'
          : o.refund.status === 'pending' ? 'refund pending at the provider' : 'being refunded online';
        // a refund gives the whole payment back: the order's amount
        fact(dl, 'refund', o.amount + ' ' + o.currency + ', ' + back,
             o.refund.failed_at ? 'refund owed' : 'refund');
      }
      if (o.money_back) {
        // money that went back outside the box: its change row says why
        if (o.money_back.refunded !== null)
          fact(dl, 'refunded at the provider', o.money_back.refunded + ' ' + o.currency, 'money-back');
        if (o.money_back.disputed_at)
          fact(dl, 'dispute', (o.money_back.dispute || 'disputed') + ', ' + when(o.money_back.disputed_at),
               'money-back');
      }
      fact(dl, 'event', [o.event || eventName(o.event_id), o.venue].filter(Boolean).join(', ') +
                         (o.starts_at ? ' · ' + when(Date.parse(o.starts_at)) : ''));
      fact(dl, 'seats', num(o.seats));
      fact(dl, 'ordered', when(o.created_at));
      fact(dl, 'resends', num(o.resends || 0));

      const tickets = o.tickets || [];
      fillRows($('order-tickets'), null, tickets.map((t) => {
        const tr = el('tr');
        tr.dataset.ticketId = t.id;
        tr.dataset.state = t.state;
        tr.append(el('td', t.seat), el('td', t.state, 'state-' + t.state),
                  el('td', t.scanned_at ? when(t.scanned_at) : '–'), el('td', t.scanned_by || '–'));
        return tr;
      }));
      const emails = o.emails || [];
      fillRows($('order-emails'), 'order-emails-empty', emails.map((m) => {
        const tr = el('tr');
        tr.dataset.kind = m.kind;
        tr.append(el('td', m.kind), el('td', m.state, 'state-' + m.state),
                  el('td', m.sent_at ? when(m.sent_at) : '–'));
        return tr;
      }));
      /* the newest change first */
      const changes = (o.changes || []).slice().sort((a, b) => (b.at || 0) - (a.at || 0));
      fillRows($('order-changes'), 'order-changes-empty', changes.map((c) => {
        const tr = el('tr');
        tr.dataset.kind = c.kind;
        tr.append(el('td', when(c.at)), el('td', c.kind), el('td', c.by || '–'), el('td', c.detail || '', 'detail'));
        return tr;
      }));

      $('order-pdf').hidden = !o.pdf_stored;
      if (fresh) {
        $('order-email').value = o.email || '';
        $('order-cancel-reason').value = '';
        confirming = false;
      }
      $('order-cancel-seats').textContent = num(tickets.filter((t) => t.state === 'valid').length || o.seats);
      /* a ticket admitted at the door: the box refuses the cancel; say so before asking */
      const admitted = tickets.filter((t) => t.state === 'admitted').length;
      const blocked = admitted > 0 && !cancelled;
      $('order-cancel-blocked').hidden = !blocked;
      $('order-cancel-blocked').textContent = blocked
        ? admitted + ' ticket(s) of this order were admitted at the door; it cannot be cancelled' : '';
      if (blocked) confirming = false;
      enable();
    }

    /* enable: what may be pressed now (nothing twice at once; a cancelled
     * order takes no change: the box refuses to send its tickets again) */
    function enable() {
      const cancelled = !!shown && shown.cancelled_at !== null && shown.cancelled_at !== undefined;
      const admitted = !!shown && (shown.tickets || []).some((t) => t.state === 'admitted');
      for (const id of ['order-resend', 'order-email', 'order-email-save', 'order-cancel-reason',
                        'order-cancel'])
        $(id).disabled = busy || !shown || cancelled;
      /* no address: nothing to send again to (one can be given) */
      if (shown && !shown.email) $('order-resend').disabled = true;
      if (admitted) $('order-cancel').disabled = $('order-cancel-reason').disabled = true;
      $('order-cancel-confirm').disabled = busy || cancelled || admitted;
      $('order-cancel-keep').disabled = busy;
      $('order-confirm').hidden = !confirming || cancelled;
      $('order-cancel').hidden = confirming && !cancelled;
    }

    /* act: one action on the order shown; its outcome in #order-message,
     * then the detail and the search again */
    async function act(run) {
      if (!current || busy) return;
      const id = current;
      busy = true;
      enable();
      message('…', 'pending');
      try {
        message(await run(id), 'ok');
      } catch (e) {
        failed(e);
      } finally {
        busy = false;
        confirming = false;
        enable();
      }
      if (id === current) await load(false);
      await runSearch();
    }

    function resend() {
      return act(async (id) => {
        const r = await api('POST', path(id, '/resend'));
        return 'Tickets queued to be sent again to ' + (r.email || 'the buyer') +
               (typeof r.resend === 'number' ? ' (resend ' + r.resend + ').' : '.');
      });
    }

    function saveEmail(ev) {
      ev.preventDefault();
      const email = $('order-email').value.trim();
      if (!email) {
        message('Type the new email address first.', 'error');
        $('order-email').focus();
        return;
      }
      return act(async (id) => {
        const o = await api('PATCH', path(id), { email });
        $('order-email').value = o && o.email ? o.email : email;
        return 'Email changed to ' + (o && o.email ? o.email : email) + '.';
      });
    }

    function askCancel() {
      if (!shown || busy || (shown.tickets || []).some((t) => t.state === 'admitted')) return;
      confirming = true;
      enable();
      $('order-cancel-confirm').focus();
    }

    function keep() {
      confirming = false;
      enable();
      $('order-cancel').focus();
    }

    function cancel() {
      const reason = $('order-cancel-reason').value.trim();
      return act(async (id) => {
        const r = await api('POST', path(id, '/cancel'), reason ? { reason } : {});
        return r.already ? 'Order ' + id + ' was already cancelled; nothing changed.'
          : 'Order ' + id + ' cancelled: ' + num(r.seats_freed) + ' seat' + (r.seats_freed === 1 ? '' : 's') + ' freed.';
      });
    }

    $('order-search-form').addEventListener('submit', search);
    $('order-resend').addEventListener('click', resend);
    $('order-email-form').addEventListener('submit', saveEmail);
    $('order-cancel').addEventListener('click', askCancel);
    $('order-cancel-keep').addEventListener('click', keep);
    $('order-cancel-confirm').addEventListener('click', cancel);
    $('order-pdf').addEventListener('click', () => { if (current) ctx.openPdf(current); });
    $('order-close').addEventListener('click', () => {
      current = null;
      shown = null;
      confirming = false;
      $('order-detail').hidden = true;
      for (const tr of $('order-results').querySelectorAll('tbody tr.selected')) tr.classList.remove('selected');
    });
    enable();

    return {
      open,
      tick() { if (current && !busy) load(false); },
      events: sale.events,
    };
  }

  /* ---- the sale at the window ---- */

  const PDF_POLL_MS = 500;     /* the tickets' PDF asked for this often... */
  const PDF_WAIT_MS = 20000;   /* ...until it is rendered, at most this long */
  const SALE_FIELDS = ['event_id', 'seats', 'name', 'email', 'payment'];
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  /* newKey: an Idempotency-Key for one sale */
  function newKey() {
    const c = window.crypto;
    if (c && typeof c.randomUUID === 'function') return c.randomUUID();
    const b = new Uint8Array(16);
    c.getRandomValues(b);
    return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  }

  function attachSale(ctx, openOrder) {
    const { api, el, when, num } = ctx;
    let key = newKey();        /* the sale being filled in */
    let selling = false;       /* its POST in flight */
    let events = [];           /* the events on sale, as last given */
    let soldId = null;
    let pdfUrl = null;
    let printing = 0;          /* bumped by each print: an older wait gives up */

    const onSale = (e) => (e.state === undefined || e.state === 'on_sale') &&
                          typeof e.seats_remaining === 'number' && e.seats_remaining > 0;

    function message(text, kind) {
      $('sell-message').textContent = text;
      $('sell-message').className = 'order-message ' + (kind || '');
    }

    function fieldError(field, text) {
      for (const f of SALE_FIELDS) {
        const out = $('sell-error-' + f);
        out.textContent = f === field ? text : '';
        out.parentElement.classList.toggle('invalid', f === field);
      }
    }

    function setKey(k) {
      key = k;
      $('sell-form').dataset.key = k;
    }

    /* showEvents: the events on sale in #sell-event; the one chosen stays
     * chosen while it is on sale */
    function showEvents(list) {
      events = list.filter(onSale).sort((a, b) => (a.starts_at_ms || 0) - (b.starts_at_ms || 0));
      const sel = $('sell-event');
      const was = sel.value;
      const label = (e) => e.name + ' · ' + when(e.starts_at_ms) + ' · ' + num(e.seats_remaining) + ' left';
      const ids = [''].concat(events.map((e) => String(e.id)));
      if (ids.join() !== Array.from(sel.options, (o) => o.value).join()) {
        const none = el('option', events.length ? 'choose the event' : 'no event on sale');
        none.value = '';
        sel.replaceChildren(none, ...events.map((e) => { const o = el('option', label(e)); o.value = String(e.id); return o; }));
        sel.value = ids.includes(was) ? was : (events.length === 1 ? String(events[0].id) : '');
      } else {
        events.forEach((e, i) => { if (sel.options[i + 1].textContent !== label(e)) sel.options[i + 1].textContent = label(e); });
      }
      seatsMax();
    }

    /* seatsMax: 1 to min(100, the seats left) for the event chosen */
    function seatsMax() {
      const e = events.find((x) => String(x.id) === $('sell-event').value);
      $('sell-seats').max = String(e ? Math.min(100, e.seats_remaining) : 100);
      $('sell-go').disabled = selling || !events.length;
    }

    function body() {
      const payment = $('sell-cash').checked ? 'cash' : $('sell-card').checked ? 'card' : '';
      const email = $('sell-email').value.trim();
      const b = { event_id: Number($('sell-event').value), seats: Number($('sell-seats').value),
                  name: $('sell-name').value.trim() };
      if (email) b.email = email;
      b.payment = payment;
      return b;
    }

    /* check: what the form can tell before the box does; {field, text} or null */
    function check(b) {
      const e = events.find((x) => x.id === b.event_id);
      if (!$('sell-event').value || !e) return { field: 'event_id', text: 'Choose an event on sale.' };
      const max = Math.min(100, e.seats_remaining);
      if (!Number.isInteger(b.seats) || b.seats < 1 || b.seats > max)
        return { field: 'seats', text: 'From 1 to ' + max + ' seats.' };
      if (!b.name) return { field: 'name', text: 'The buyer\'s name, for the tickets.' };
      if (!b.payment) return { field: 'payment', text: 'Cash or card: how was it paid?' };
      return null;
    }

    /* post: the sale, under the form's key; a lost answer or "still
     * running" is asked again with the same key (the box sells once) */
    async function post(b) {
      for (let attempt = 0; ; attempt++) {
        try {
          /* an sf-string ("..."): a bare key must start with a letter, a UUID may not */
          return await api('POST', '/v1/orders', b, { 'Idempotency-Key': '"' + key + '"' });
        } catch (e) {
          if (e instanceof ctx.AuthError) throw e;
          const running = e.status === 409 && e.data && e.data.field === 'Idempotency-Key';
          const lost = e.status === undefined || e.status === 408 || e.status === 429 || e.status >= 500;
          if (!(running || lost) || attempt >= 4) throw e;
          message('No answer yet: asking again (the same sale, sold once)…', 'pending');
          await sleep(running && e.retryAfter ? Math.min(5, e.retryAfter) * 1000 : 400 * (attempt + 1));
        }
      }
    }

    async function sell(ev) {
      ev.preventDefault();
      if (selling) return;
      const b = body();
      const bad = check(b);
      fieldError(bad ? bad.field : null, bad ? bad.text : '');
      if (bad) {
        message('', '');
        return;
      }
      selling = true;
      $('sell-go').disabled = true;
      message('Selling…', 'pending');
      try {
        const o = await post(b);
        const e = events.find((x) => x.id === o.event_id);
        sold(o, e);
        /* a new sale: a new key, an empty form (the event stays chosen) */
        clear(false);
        message('', '');
      } catch (e) {
        if (e instanceof ctx.AuthError) { ctx.fail(e); return; }
        const field = e.data && SALE_FIELDS.includes(e.data.field) ? e.data.field : null;
        fieldError(field, field ? e.why : '');
        message(e.status === undefined
          ? 'No answer from the box: press Sell again to try the same sale (it is sold once).'
          : 'Not sold: ' + (e.why || e.message), 'error');
      } finally {
        selling = false;
        seatsMax();
      }
      ctx.refresh();
    }

    function clear(all) {
      setKey(newKey());
      $('sell-seats').value = '1';
      $('sell-name').value = '';
      $('sell-email').value = '';
      $('sell-cash').checked = $('sell-card').checked = false;
      if (all) $('sell-event').value = '';
      fieldError(null, '');
      seatsMax();
    }

    function sold(o, e) {
      soldId = o.id;
      const box = $('sold');
      box.hidden = false;
      box.dataset.orderId = o.id;
      delete box.dataset.pdf;
      $('sold-id').textContent = o.id;
      $('sold-what').textContent = '— ' + num(o.seats) + ' seat' + (o.seats === 1 ? '' : 's') +
        (e ? ' for ' + e.name : '') + ', ' + (o.name || '') + ', paid by ' + (o.payment || '?') +
        (o.email ? ', tickets mailed to ' + o.email : ', no email: print the tickets');
      $('sold-message').textContent = '';
      $('sold-message').className = 'order-message';
      $('sold-pdf-link').hidden = true;
      $('sold-print').disabled = false;
      if (pdfUrl) { URL.revokeObjectURL(pdfUrl); pdfUrl = null; }
    }

    function soldMessage(text, kind) {
      $('sold-message').textContent = text;
      $('sold-message').className = 'order-message ' + kind;
    }

    /* print: wait for the tickets' PDF (404 until rendered), then open it in
     * a new tab, which the click opened at once (a tab opened later, after
     * the wait, is a pop-up that browsers block) */
    async function print() {
      if (!soldId) return;
      const id = soldId, run = ++printing, box = $('sold');
      let tab = null;
      try { tab = window.open('', '_blank'); } catch (e) { tab = null; }
      if (tab) { try { tab.document.title = 'Tickets ' + id; tab.document.body.textContent = 'Rendering the tickets of order ' + id + '…'; } catch (e) { /* not ours to write */ } }
      box.dataset.pdf = 'waiting';
      $('sold-print').disabled = true;
      soldMessage('Waiting for the tickets to be rendered…', 'pending');
      const path = '/v1/orders/' + encodeURIComponent(id) + '/tickets.pdf';
      const t0 = Date.now();
      let why = '';
      try {
        for (;;) {
          const r = await fetch(path, { headers: { 'Authorization': 'Bearer ' + ctx.token() }, cache: 'no-store',
                                        credentials: 'omit' });
          if (run !== printing) return;
          if (r.status === 401) throw new ctx.AuthError('the token was refused');
          if (r.ok) {
            const blob = await r.blob();
            if (pdfUrl) URL.revokeObjectURL(pdfUrl);
            pdfUrl = URL.createObjectURL(blob.type === 'application/pdf' ? blob : new Blob([blob], { type: 'application/pdf' }));
            const a = $('sold-pdf-link');
            a.href = pdfUrl;
            a.hidden = false;
            if (tab && !tab.closed) tab.location.href = pdfUrl;
            else a.click();
            box.dataset.pdf = 'opened';
            soldMessage('The tickets are open in a new tab: print them from there.', 'ok');
            return;
          }
          let data = null;
          try { data = await r.json(); } catch (e) { /* no JSON */ }
          why = data && typeof data.error === 'string' ? data.error : r.status + ' ' + r.statusText;
          if (r.status !== 404 || Date.now() - t0 >= PDF_WAIT_MS) break;
          await sleep(PDF_POLL_MS);
          if (run !== printing) return;
        }
        throw new Error('the tickets did not come: ' + why);
      } catch (e) {
        if (tab && !tab.closed) tab.close();
        if (e instanceof ctx.AuthError) { ctx.fail(e); return; }
        box.dataset.pdf = 'error';
        soldMessage((e.message || String(e)) + '. Try Print tickets again in a moment.', 'error');
      } finally {
        if (run === printing) $('sold-print').disabled = false;
      }
    }

    setKey(key);
    $('sell-form').addEventListener('submit', sell);
    $('sell-event').addEventListener('change', () => { fieldError(null, ''); seatsMax(); });
    $('sell-reset').addEventListener('click', () => { clear(true); message('', ''); });
    $('sold-print').addEventListener('click', print);
    $('sold-open').addEventListener('click', () => {
      if (!soldId) return;
      if (ctx.focusBoxOffice) ctx.focusBoxOffice();
      openOrder(soldId);
    });
    seatsMax();
    return { events: showEvents };
  }

  window.StagedoorBoxOffice = Object.freeze({ attach });
})();
