/*
 * door.js: the door page of Stagedoor Box (GET /door), for a phone or a
 * laptop at a venue's door.  Plain JS, no framework, no build step, no
 * request to anything but the box that served it (the server's
 * Content-Security-Policy enforces that).  Everything the API returns goes
 * into the page as text (textContent), never as HTML.
 *
 * What it does, and what it promises:
 *   - It asks for a door token once and keeps it in localStorage, so that a
 *     phone keeps it across reloads; a 401 drops it and asks again; "Forget
 *     token" drops it.  GET /v1/whoami names the door and its event (an
 *     operator token, bound to no event, takes ?event=ID from the page's URL;
 *     a token of a role that may not scan is refused here, before a scan).
 *   - It reads QR codes from the camera (getUserMedia, the rear camera where
 *     there is one) a few frames a second: with the browser's BarcodeDetector
 *     where it reads qr_code, else with jsQR (/jsQR.js, vendored from npm,
 *     loaded only then).  A code the camera reads again within DEBOUNCE_MS of
 *     its previous read is not sent again: a ticket held in front of the
 *     camera is scanned once, and shown again later it is scanned again.
 *   - It takes what a keyboard-wedge scanner types (a USB or Bluetooth
 *     scanner types the code, then Enter or Tab) in #door-wedge, an input
 *     that keeps the focus whenever no other field has it, and what a person
 *     types in #door-manual; Enter sends.  These are never debounced.
 *   - Each scan is one POST /v1/scan with a fresh nonce.  On a network error,
 *     a timeout, a 408, a 429 or a 5xx it sends the SAME body, with the SAME
 *     nonce, again after a backoff (RETRY_MS): the box answers a nonce it has
 *     seen with its first answer and scans nothing twice, so flaky Wi-Fi never
 *     admits one ticket twice.  Scans go one at a time, in order.
 *   - The answer fills the screen in colour (green admitted, amber already
 *     scanned, red refused, grey not checked), with a beep (Web Audio) and a
 *     vibration where the device has them, until the next scan or RESULT_MS.
 *   - The event's counts (admitted, still to come) are read after each scan
 *     and every COUNTS_MS.
 *
 * The JSON it reads (the contract of issue 16):
 *
 *   GET /v1/whoami -> {"role":"door|operator|...", "name":"North door", "event_id":3|null,
 *                      "timezone":"Europe/Berlin", "zone_names":{"3600":"CET", "7200":"CEST"}}
 *     (every time shown is on the venue's clock, never the phone's:
 *     "YYYY-MM-DD HH:MM ABBR", or "HH:MM ABBR" for the venue's today)
 *   GET /v1/events/{id} ->
 *     {"id":3, "name":"...", "venue":"...", "starts_at":"ISO", "starts_at_ms":MS,
 *      "capacity":N, "orders":N, "seats_sold":N, "seats_remaining":N,
 *      "admitted":N, "to_come":N, "cancelled":N}
 *   POST /v1/scan {"code":"...", "nonce":"..."} -> 200 with one of
 *     {"result":"admitted",        "scanned_at":MS, "seat":"A-1", "order_id":"T...", "scanned_by":"..."}
 *     {"result":"already_scanned", "scanned_at":MS, "seat":"A-1", "order_id":"T...", "scanned_by":"..."}
 *                                  (when and at which door it was first admitted)
 *     {"result":"invalid"}
 *     {"result":"cancelled", "seat":"A-1", "order_id":"T..."}
 *     {"result":"wrong_event", "event":{"id":N, "name":"...", "starts_at":"ISO", "starts_at_ms":MS}}
 *     {"result":"doors_closed", "event":{...}, "doors_open_at":"ISO", "doors_close_at":"ISO"}
 *     {"result":"event_cancelled", "event":{...}}
 *   Errors: any non-2xx status, body {"error":"...", "field":"..."} when JSON;
 *   401: the token is refused (ask again); 403: its role may not do this.
 *
 * Element ids the browser test (tests/browser/door.mjs) relies on:
 *   #door-token-form, #door-token (input), #door-token-save, #door-token-msg
 *     (why the token is asked for again);
 *   #door-name (the token's name), #door-event (the event's name and date);
 *   #door-admitted, #door-to-come (the counts; "–" until read), in
 *     #door-counts[data-refreshed] (counts the reads that succeeded);
 *   #door-video (the camera, data-decoder="BarcodeDetector|jsQR" once
 *     running), #door-camera-status[data-state="off|starting|on|error|none"],
 *     #door-camera-start (shown when the camera could not start);
 *   #door-manual (input) in #door-manual-form, #door-wedge (input);
 *   #door-pending (shown while a scan waits for its answer);
 *   #door-result[data-result="admitted|already_scanned|invalid|wrong_event|
 *     cancelled|doors_closed|event_cancelled|error"][data-seq] (the last answer; data-seq
 *     counts answers; hidden after RESULT_MS or a tap), #door-result-title
 *     (ADMITTED, ALREADY SCANNED, INVALID, WRONG EVENT, CANCELLED,
 *     DOORS CLOSED, EVENT CANCELLED, NOT CHECKED), #door-result-detail (lines of text);
 *   #door-forget, #door-main, body[data-ready] (set once the door is shown).
 */
'use strict';

(function () {
  const venueClock = window.venueClock;   /* the venue's clock: clock.js */
  const TOKEN_KEY = 'stagedoor.door.token';
  const FRAME_MS = 200;            // a camera frame to the decoder at most this often
  const DEBOUNCE_MS = 3000;        // the camera's same code again within this: not sent
  const RESULT_MS = 5000;          // an answer stays this long (or until the next)
  const COUNTS_MS = 10000;         // the counts are read again this often
  const RETRY_MS = [400, 1000, 2000, 4000];  // waits between attempts of one scan
  const ATTEMPT_MS = 8000;         // one attempt without an answer is given up
  const DECODE_MAX = 1024;         // frames for jsQR are scaled to fit this (px)
  const CODE_MAX = 256;            // longer input is no ticket code: cut

  const TITLES = {
    admitted: 'ADMITTED', already_scanned: 'ALREADY SCANNED', invalid: 'INVALID',
    wrong_event: 'WRONG EVENT', cancelled: 'CANCELLED', doors_closed: 'DOORS CLOSED',
    event_cancelled: 'EVENT CANCELLED', error: 'NOT CHECKED',
  };

  const $ = (id) => document.getElementById(id);

  const st = {
    token: '',              // when localStorage cannot keep it
    eventId: null,
    doorName: '',
    running: false,         // the door is shown (a token was accepted)
    stream: null,           // the camera's MediaStream
    camGen: 0,              // bumped by every start and stop: a late start gives up
    frameTimer: null,
    detector: null,         // BarcodeDetector, when the browser reads qr_code with it
    decoder: '',            // 'BarcodeDetector' | 'jsQR'
    canvas: null, ctx: null,
    seen: new Map(),        // code -> last time the camera read it (ms)
    queue: [],              // codes waiting for their scan, oldest first
    busy: false,            // a scan is on its way
    resultTimer: null,
    seq: 0,
    countsTimer: null,
    countsSeq: 0,
    refreshes: 0,
    audio: null,
    wakeLock: null,
    retryStart: null,
  };

  /* ---------------------------------------------------------------------
   * The token
   * ------------------------------------------------------------------- */

  function token() {
    try { return localStorage.getItem(TOKEN_KEY) || st.token; } catch (e) { return st.token; }
  }
  function setToken(t) {
    st.token = t;
    try { localStorage.setItem(TOKEN_KEY, t); } catch (e) { /* kept in memory only */ }
  }
  function clearToken() {
    st.token = '';
    try { localStorage.removeItem(TOKEN_KEY); } catch (e) { /* nothing kept */ }
  }

  /* askToken: stop the door and show the token form, with why (info: a
   * message that is no refusal). */
  function askToken(msg, info) {
    stopDoor();
    $('door-main').hidden = true;
    $('door-counts').hidden = true;
    $('door-name').textContent = 'Door';
    $('door-event').textContent = '';
    $('door-token-form').hidden = false;
    $('door-token-msg').textContent = msg || '';
    $('door-token-msg').classList.toggle('info', !!info);
    $('door-token').focus();
  }

  /* ---------------------------------------------------------------------
   * Talking to the box
   * ------------------------------------------------------------------- */

  class AuthError extends Error {}
  class HttpError extends Error {
    constructor(status, msg) { super(msg); this.status = status; }
  }

  /* call: one request within ATTEMPT_MS: {status, ok, body} (body: the
   * parsed JSON or null).  Throws on a network error or a timeout, and when
   * a 2xx body cannot be read whole (the answer was lost on the way). */
  async function call(path, init) {
    const ac = typeof AbortController === 'function' ? new AbortController() : null;
    const timer = ac ? setTimeout(() => ac.abort(), ATTEMPT_MS) : null;
    try {
      const headers = Object.assign({ Authorization: 'Bearer ' + token() }, init.headers || {});
      const r = await fetch(path, Object.assign({}, init, { headers, cache: 'no-store' },
                                                 ac ? { signal: ac.signal } : {}));
      let body = null;
      try { body = await r.json(); } catch (e) { if (r.ok) throw e; }
      return { status: r.status, ok: r.ok, body };
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  function errorText(res) {
    const b = res.body;
    if (!b || typeof b.error !== 'string') return 'HTTP ' + res.status;
    return typeof b.field === 'string' && b.field ? b.error + ' (' + b.field + ')' : b.error;
  }

  /* get: the JSON answer to a GET, or throws (AuthError on 401, HttpError otherwise). */
  async function get(path) {
    const res = await call(path, { method: 'GET' });
    if (res.status === 401) throw new AuthError(errorText(res));
    if (!res.ok) throw new HttpError(res.status, errorText(res));
    return res.body;
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  /* newNonce: a fresh nonce for one scan (printable ASCII, no spaces).
   * crypto.randomUUID needs a secure context and a 2021+ browser. */
  function newNonce() {
    const c = window.crypto;
    if (c && typeof c.randomUUID === 'function') return c.randomUUID();
    if (c && typeof c.getRandomValues === 'function') {
      const b = new Uint8Array(16);
      c.getRandomValues(b);
      return Array.from(b, (x) => (x < 16 ? '0' : '') + x.toString(16)).join('');
    }
    return Date.now().toString(36) + '-' + Math.random().toString(36).slice(2) +
           Math.random().toString(36).slice(2);
  }

  /* ---------------------------------------------------------------------
   * Start and stop
   * ------------------------------------------------------------------- */

  async function startDoor() {
    clearTimeout(st.retryStart);
    if (!token()) { askToken(''); return; }
    let who;
    try {
      who = await get('/v1/whoami');
    } catch (e) {
      if (e instanceof AuthError) {
        clearToken();
        askToken('This token was refused (' + e.message + '): enter the door token again.');
      } else if (e instanceof HttpError) {
        askToken('The box refused this token: ' + e.message);
      } else {
        // the box is out of reach: keep the token, try again
        $('door-token-form').hidden = true;
        $('door-event').textContent = 'No answer from the box: trying again…';
        st.retryStart = setTimeout(startDoor, 3000);
      }
      return;
    }
    if (who.role !== 'door' && who.role !== 'operator') {
      clearToken();
      askToken('This is a ' + String(who.role) + ' token, which may not scan tickets: enter a door token.');
      return;
    }
    st.doorName = typeof who.name === 'string' ? who.name : '';
    st.clock = venueClock(who.timezone, who.zone_names);
    const asked = new URLSearchParams(location.search).get('event');
    st.eventId = who.event_id != null ? who.event_id : (asked && /^[0-9]+$/.test(asked) ? Number(asked) : null);
    $('door-name').textContent = st.doorName || 'Door';
    $('door-event').textContent = st.eventId == null
      ? 'This token names no event: open /door?event=ID' : 'Event ' + st.eventId;
    $('door-token-form').hidden = true;
    $('door-main').hidden = false;
    $('door-counts').hidden = st.eventId == null;
    st.running = true;
    document.body.dataset.ready = '1';
    barHeight();
    refreshCounts();
    clearInterval(st.countsTimer);
    st.countsTimer = setInterval(refreshCounts, COUNTS_MS);
    cameraStart();
    focusWedge();
  }

  function stopDoor() {
    st.running = false;
    delete document.body.dataset.ready;
    clearInterval(st.countsTimer);
    clearTimeout(st.retryStart);
    st.queue.length = 0;
    cameraStop();
    hideResult();
    $('door-pending').hidden = true;
  }

  /* ---------------------------------------------------------------------
   * The event and its counts
   * ------------------------------------------------------------------- */

  const NUM = new Intl.NumberFormat('en-US');
  const num = (v) => (typeof v === 'number' && isFinite(v) ? NUM.format(v) : '–');

  st.clock = venueClock('UTC', {});

  /* when: a time (ms or RFC 3339 string) on the venue's clock, "YYYY-MM-DD
   * HH:MM ABBR"; "HH:MM ABBR" alone when it is the venue's today. */
  function when(t) {
    const ms = typeof t === 'number' ? t : Date.parse(t);
    if (!isFinite(ms)) return '';
    const p = st.clock.parts(ms);
    const hm = p.time + ' ' + st.clock.abbrOffset(p.offset);
    return p.date === st.clock.parts(Date.now()).date ? hm : p.date + ' ' + hm;
  }

  function eventLine(e) {
    if (!e) return '';
    const at = when(typeof e.starts_at_ms === 'number' ? e.starts_at_ms : e.starts_at);
    return [e.name, at].filter(Boolean).join(' · ');
  }

  async function refreshCounts() {
    if (!st.running || st.eventId == null) return;
    const seq = ++st.countsSeq;
    try {
      const e = await get('/v1/events/' + encodeURIComponent(st.eventId));
      if (seq !== st.countsSeq || !st.running) return;    // a later read is on its way
      $('door-event').textContent = eventLine(e);
      $('door-admitted').textContent = num(e.admitted);
      $('door-to-come').textContent = num(e.to_come);
      $('door-counts').classList.remove('stale');
      $('door-counts').dataset.refreshed = String(++st.refreshes);
      barHeight();
    } catch (e) {
      if (seq !== st.countsSeq) return;
      if (e instanceof AuthError) {
        clearToken();
        askToken('This token was refused (' + e.message + '): enter the door token again.');
      } else {
        $('door-counts').classList.add('stale');
        if (e instanceof HttpError) $('door-event').textContent = 'Event ' + st.eventId + ': ' + e.message;
      }
    }
  }

  /* barHeight: the answer covers the screen below the bar (name, counts). */
  function barHeight() {
    document.documentElement.style.setProperty('--bar-h', $('door-bar').offsetHeight + 'px');
  }

  /* ---------------------------------------------------------------------
   * Scans: one at a time, each with its nonce, retried with the same nonce
   * ------------------------------------------------------------------- */

  /* submit: a code to scan, upper case (ticket codes are base32: one typed
   * in lower case is the same code) */
  function submit(code) {
    code = code.slice(0, CODE_MAX).toUpperCase();
    if (!code || !st.running) return;
    st.queue.push(code);
    pump();
  }

  async function pump() {
    if (st.busy) return;
    const code = st.queue.shift();
    if (code === undefined) return;
    st.busy = true;
    try {
      await scan(code);
    } finally {
      st.busy = false;
    }
    if (st.running) pump();
  }

  const retryable = (status) => status === 408 || status === 429 || status >= 500;

  async function scan(code) {
    const body = JSON.stringify({ code, nonce: newNonce() });
    const init = { method: 'POST', headers: { 'Content-Type': 'application/json' }, body };
    let res = null, failure = '';
    hideResult();
    pending('Checking…');
    for (let attempt = 0; ; attempt++) {
      try {
        res = await call('/v1/scan', init);
        if (res.ok || !retryable(res.status)) break;
        failure = errorText(res);
      } catch (e) {
        res = null;
        failure = 'No answer from the box';
      }
      if (attempt >= RETRY_MS.length || !st.running) break;
      pending('No answer: trying again (' + (attempt + 1) + ')…');
      await sleep(RETRY_MS[attempt]);
    }
    $('door-pending').hidden = true;
    if (!st.running) return;
    if (res && res.status === 401) {
      clearToken();
      askToken('This token was refused (' + errorText(res) + '): enter the door token again.');
      return;
    }
    if (res && res.ok && res.body && typeof res.body.result === 'string') showAnswer(res.body);
    else if (res && res.status === 403) showResult('error', ['This token may not scan tickets', errorText(res)]);
    else if (res) showResult('error', [res.ok ? 'The box sent an answer this page does not know'
                                              : 'The box said: ' + errorText(res), 'Scan the ticket again']);
    else showResult('error', [failure, 'Scan the ticket again']);
    refreshCounts();
  }

  function pending(text) {
    $('door-pending').textContent = text;
    $('door-pending').hidden = false;
  }

  function seatOrder(a) {
    return [a.seat ? 'Seat ' + a.seat : '', a.order_id ? 'Order ' + a.order_id : ''].filter(Boolean).join(' · ');
  }

  function showAnswer(a) {
    switch (a.result) {
    case 'admitted':
      showResult('admitted', [a.seat ? 'Seat ' + a.seat : '', a.order_id ? 'Order ' + a.order_id : '']);
      break;
    case 'already_scanned':
      showResult('already_scanned', ['First admitted ' + when(a.scanned_at),
                                     a.scanned_by ? 'at ' + a.scanned_by : '', seatOrder(a)]);
      break;
    case 'invalid':
      showResult('invalid', ['Not a ticket of this box']);
      break;
    case 'wrong_event':
      showResult('wrong_event', ['This ticket is for', a.event ? a.event.name : '',
                                 a.event ? when(typeof a.event.starts_at_ms === 'number'
                                   ? a.event.starts_at_ms : a.event.starts_at) : '']);
      break;
    case 'cancelled':
      showResult('cancelled', ['This ticket was cancelled', seatOrder(a)]);
      break;
    case 'event_cancelled':
      showResult('event_cancelled', ['This event is cancelled', eventLine(a.event)]);
      break;
    case 'doors_closed':
      showResult('doors_closed', [eventLine(a.event),
                                  a.doors_open_at ? 'Doors open ' + when(a.doors_open_at) : '',
                                  a.doors_close_at ? 'Doors close ' + when(a.doors_close_at) : '']);
      break;
    default:
      showResult('error', ['The box answered "' + String(a.result).slice(0, 40) + '"']);
    }
  }

  /* showResult: the answer, full screen, with its sound and vibration. */
  function showResult(result, lines) {
    const el = $('door-result');
    el.dataset.result = result;
    el.dataset.seq = String(++st.seq);
    $('door-result-title').textContent = TITLES[result];
    $('door-result-detail').textContent = lines.filter(Boolean).join('\n');
    barHeight();
    el.hidden = false;
    feedback(result === 'admitted');
    clearTimeout(st.resultTimer);
    st.resultTimer = setTimeout(hideResult, RESULT_MS);
  }

  function hideResult() {
    clearTimeout(st.resultTimer);
    $('door-result').hidden = true;
    focusWedge();
  }

  /* ---------------------------------------------------------------------
   * Sound and vibration
   * ------------------------------------------------------------------- */

  /* unlockAudio: browsers let a page make sound only after a tap or a key:
   * the context is made (or resumed) on the first one. */
  function unlockAudio() {
    try {
      if (!st.audio) {
        const AC = window.AudioContext || window.webkitAudioContext;
        if (!AC) return;
        st.audio = new AC();
      }
      if (st.audio.state === 'suspended') st.audio.resume().catch(() => {});
    } catch (e) { st.audio = null; }
  }

  function beep(freq, at, dur) {
    const a = st.audio;
    const t = a.currentTime + at;
    const osc = a.createOscillator();
    const gain = a.createGain();
    osc.type = 'square';
    osc.frequency.value = freq;
    gain.gain.setValueAtTime(0.0001, t);
    gain.gain.exponentialRampToValueAtTime(0.25, t + 0.01);
    gain.gain.setValueAtTime(0.25, t + dur - 0.03);
    gain.gain.exponentialRampToValueAtTime(0.0001, t + dur);
    osc.connect(gain);
    gain.connect(a.destination);
    osc.start(t);
    osc.stop(t + dur + 0.02);
  }

  /* feedback: one high beep for admitted, two low ones for the rest. */
  function feedback(good) {
    try {
      if (st.audio && st.audio.state === 'running') {
        if (good) beep(1760, 0, 0.15);
        else { beep(220, 0, 0.18); beep(220, 0.28, 0.18); }
      }
    } catch (e) { /* no sound on this device */ }
    try {
      if (typeof navigator.vibrate === 'function') navigator.vibrate(good ? 80 : [200, 100, 200]);
    } catch (e) { /* no vibration */ }
  }

  /* ---------------------------------------------------------------------
   * The camera and the decoder
   * ------------------------------------------------------------------- */

  function cameraStatus(state, text) {
    const s = $('door-camera-status');
    s.dataset.state = state;
    s.textContent = text;
    $('door-camera-start').hidden = state !== 'error' && state !== 'off';
  }

  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = src;
      s.onload = () => resolve();
      s.onerror = () => reject(new Error(src + ' did not load'));
      document.head.appendChild(s);
    });
  }

  /* decoderReady: BarcodeDetector when it reads QR codes here, else jsQR. */
  async function decoderReady() {
    if (st.decoder) return st.decoder;
    if ('BarcodeDetector' in window) {
      try {
        const formats = await window.BarcodeDetector.getSupportedFormats();
        if (formats.indexOf('qr_code') >= 0) {
          st.detector = new window.BarcodeDetector({ formats: ['qr_code'] });
          st.decoder = 'BarcodeDetector';
          return st.decoder;
        }
      } catch (e) { /* fall back to jsQR */ }
    }
    if (typeof window.jsQR !== 'function') await loadScript('/jsQR.js');
    if (typeof window.jsQR !== 'function') throw new Error('the QR decoder did not load');
    st.canvas = document.createElement('canvas');
    st.ctx = st.canvas.getContext('2d', { willReadFrequently: true });
    st.decoder = 'jsQR';
    return st.decoder;
  }

  async function cameraStart() {
    const gen = ++st.camGen;
    stopTracks();
    const md = navigator.mediaDevices;
    if (!md || typeof md.getUserMedia !== 'function') {
      cameraStatus('none', window.isSecureContext === false
        ? 'The camera needs the box\'s HTTPS address: type or scan the code'
        : 'No camera in this browser: type or scan the code');
      return;
    }
    cameraStatus('starting', 'Starting the camera…');
    let stream, decoder;
    try {
      decoder = await decoderReady();
    } catch (e) {
      if (gen === st.camGen)
        cameraStatus('error', 'The QR decoder did not load (' + e.message + '): type or scan the code');
      return;
    }
    try {
      stream = await md.getUserMedia({
        video: { facingMode: 'environment', width: { ideal: 1280 }, height: { ideal: 720 } },
        audio: false,
      });
    } catch (e) {
      if (gen !== st.camGen) return;
      const name = e && e.name ? e.name : String(e);
      cameraStatus('error', name === 'NotAllowedError' || name === 'SecurityError'
        ? 'The camera is not allowed: allow it for this page, or type or scan the code'
        : 'No camera (' + (e && e.message ? e.message : name) + '): type or scan the code');
      return;
    }
    if (gen !== st.camGen) {            // stopped (or started again) meanwhile
      stream.getTracks().forEach((t) => t.stop());
      return;
    }
    st.stream = stream;
    const v = $('door-video');
    v.srcObject = stream;
    v.dataset.decoder = decoder;
    try { await v.play(); } catch (e) { /* autoplay (muted, inline) starts it anyway */ }
    cameraStatus('on', 'Camera on: hold the ticket\'s QR code in the frame');
    wakeLock();
    nextFrame();
  }

  function stopTracks() {
    clearTimeout(st.frameTimer);
    if (st.stream) st.stream.getTracks().forEach((t) => t.stop());
    st.stream = null;
    $('door-video').srcObject = null;
  }

  function cameraStop() {
    st.camGen++;
    stopTracks();
    cameraStatus('off', 'Camera off');
    if (st.wakeLock) { st.wakeLock.release().catch(() => {}); st.wakeLock = null; }
  }

  /* wakeLock: the screen stays on while the camera runs, where the browser can. */
  function wakeLock() {
    if (!navigator.wakeLock || st.wakeLock) return;
    navigator.wakeLock.request('screen').then((l) => {
      st.wakeLock = l;
      l.addEventListener('release', () => { if (st.wakeLock === l) st.wakeLock = null; });
    }, () => {});
  }

  function nextFrame() {
    clearTimeout(st.frameTimer);
    if (st.stream) st.frameTimer = setTimeout(frame, FRAME_MS);
  }

  async function frame() {
    const gen = st.camGen;
    const v = $('door-video');
    try {
      if (v.readyState >= 2 && v.videoWidth > 0) {
        const text = await decode(v);
        if (text && gen === st.camGen) cameraRead(text);
      }
    } catch (e) { /* a frame the decoder could not take: the next one */ }
    if (gen === st.camGen) nextFrame();
  }

  async function decode(v) {
    if (st.detector) {
      const found = await st.detector.detect(v);
      return found.length ? found[0].rawValue : '';
    }
    const scale = Math.min(1, DECODE_MAX / Math.max(v.videoWidth, v.videoHeight));
    const w = Math.round(v.videoWidth * scale), h = Math.round(v.videoHeight * scale);
    if (st.canvas.width !== w) st.canvas.width = w;
    if (st.canvas.height !== h) st.canvas.height = h;
    st.ctx.drawImage(v, 0, 0, w, h);
    const img = st.ctx.getImageData(0, 0, w, h);
    const r = window.jsQR(img.data, w, h, { inversionAttempts: 'dontInvert' });
    return r ? r.data : '';
  }

  /* cameraRead: a code the camera read.  Sent unless the camera read it
   * within DEBOUNCE_MS, or a scan is on its way (then it is not marked read:
   * the next frame tries again). */
  function cameraRead(raw) {
    const code = raw.trim();
    if (!code || !st.running) return;
    const now = Date.now();
    if (st.busy || st.queue.length) {
      if (st.seen.has(code)) st.seen.set(code, now);  // still in view: the debounce goes on
      return;
    }
    const last = st.seen.get(code);
    st.seen.set(code, now);
    if (st.seen.size > 64)
      for (const [c, t] of st.seen) if (now - t > DEBOUNCE_MS) st.seen.delete(c);
    if (last !== undefined && now - last < DEBOUNCE_MS) return;
    submit(code);
  }

  /* ---------------------------------------------------------------------
   * Typed codes: the wedge scanner and the manual field
   * ------------------------------------------------------------------- */

  /* typed: what a person or a scanner typed; spaces and dashes dropped,
   * upper case (ticket codes are base32: A-Z and 2-7). */
  const typed = (s) => s.replace(/[\s-]+/g, '').toUpperCase();

  function isTextField(el) {
    return el && (el.tagName === 'TEXTAREA' || (el.tagName === 'INPUT' && el.type !== 'button' && el.type !== 'submit'));
  }

  /* focusWedge: the wedge input takes the focus unless another field has it. */
  function focusWedge() {
    if (!st.running) return;
    const a = document.activeElement;
    const w = $('door-wedge');
    if (a === w || (isTextField(a) && a !== w)) return;
    try { w.focus({ preventScroll: true }); } catch (e) { w.focus(); }
  }

  function wedgeKey(ev) {
    if (ev.key !== 'Enter' && ev.key !== 'Tab') return;
    const w = $('door-wedge');
    const code = typed(w.value);
    if (ev.key === 'Tab' && !code) return;     // a real Tab: let it move on
    ev.preventDefault();
    w.value = '';
    if (code) submit(code);
  }

  function manualSubmit(ev) {
    ev.preventDefault();
    const m = $('door-manual');
    const code = typed(m.value);
    m.value = '';
    m.blur();                                  // the phone's keyboard goes: the answer shows
    if (code) submit(code);
    focusWedge();
  }

  /* ---------------------------------------------------------------------
   * Wiring
   * ------------------------------------------------------------------- */

  function init() {
    $('door-token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      unlockAudio();
      const t = $('door-token').value.trim();
      if (!t) return;
      $('door-token').value = '';
      $('door-token-msg').textContent = '';
      setToken(t);
      startDoor();
    });
    $('door-forget').addEventListener('click', () => {
      clearToken();
      askToken('Token forgotten: enter a door token to scan again.', true);
    });
    $('door-camera-start').addEventListener('click', () => { unlockAudio(); cameraStart(); });
    $('door-manual-form').addEventListener('submit', manualSubmit);
    $('door-wedge').addEventListener('keydown', wedgeKey);
    $('door-wedge').addEventListener('blur', () => setTimeout(focusWedge, 0));
    $('door-result').addEventListener('click', hideResult);
    // the first tap or key makes sound possible
    document.addEventListener('pointerdown', unlockAudio, true);
    document.addEventListener('keydown', unlockAudio, true);
    // a key typed with no field focused (a scanner, after a tap elsewhere) goes to the wedge
    document.addEventListener('keydown', (ev) => {
      if (ev.key.length === 1 && !ev.ctrlKey && !ev.metaKey && !ev.altKey && !isTextField(document.activeElement))
        focusWedge();
    }, true);
    document.addEventListener('click', (ev) => {
      if (!isTextField(ev.target)) setTimeout(focusWedge, 0);
    });
    // the camera rests while the page is not shown (battery), and starts again
    document.addEventListener('visibilitychange', () => {
      if (!st.running) return;
      if (document.hidden) { cameraStop(); return; }
      cameraStart();
      refreshCounts();
    });
    window.addEventListener('resize', barHeight);
    startDoor();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
