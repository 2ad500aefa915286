/*
 * boxoffice.js: the dashboard's box office: find an order (by its id, the
 * buyer's email or a part of the name), see everything about it, and act on
 * it: send the tickets again, change the email address, cancel it.
 *
 * It sets one global, window.StagedoorBoxOffice, with attach(ctx), which
 * dashboard.js calls once with its helpers (ctx: api, el, when, num,
 * fillRows, fail, eventName, openPdf; see there).  attach returns
 * { open(id), tick() }: open shows an order's detail; tick (on the charts'
 * slower refresh) reloads the detail shown, without touching what the
 * person is typing.
 *
 * The JSON (the HTTP contract; errors are {"error":"...", "field":"..."}):
 *   GET /v1/orders?q=TEXT -> {"orders":[{"id", "event_id", "seats", "pdf", "email", "created_at",
 *                                        "name", "email_address", "cancelled"}]}  (at most 20, newest first)
 *   GET /v1/orders/{id} -> {"id", "event_id", "event", "venue", "starts_at", "name", "email", "seats",
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
 * (#order-cancel, then #order-cancel-confirm or #order-cancel-keep).
 */
'use strict';

(function () {
  const $ = (id) => document.getElementById(id);

  function attach(ctx) {
    const { api, el, when, num, fillRows, fail, eventName } = ctx;
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
      fact(dl, 'email', o.email || '–', 'email');
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
      enable();
    }

    /* enable: what may be pressed now (nothing twice at once; a cancelled
     * order takes no change: the box refuses to send its tickets again) */
    function enable() {
      const cancelled = !!shown && shown.cancelled_at !== null && shown.cancelled_at !== undefined;
      for (const id of ['order-resend', 'order-email', 'order-email-save', 'order-cancel-reason',
                        'order-cancel'])
        $(id).disabled = busy || !shown || cancelled;
      $('order-cancel-confirm').disabled = busy || cancelled;
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
      if (!shown || busy) return;
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
    };
  }

  window.StagedoorBoxOffice = Object.freeze({ attach });
})();
