/*
 * charts.js: the dashboard's pictures of the night, drawn from the box's own
 * JSON as inline SVG (document.createElementNS; every label through
 * textContent, never markup).  No script from anywhere else, no framework.
 *
 * It only draws: dashboard.js fetches the JSON and hands it over, so this
 * file knows no token, no role and no timer.  It sets one global,
 * window.StagedoorCharts, with:
 *
 *   sales(figure, {"capacity":N, "sold":N, "hours":[{"hour":MS, "seats":N, "orders":N}]})
 *       seats sold per hour of the venue's clock (bars), the running total
 *       (step line) and the capacity (dashed line), all on ONE scale of
 *       seats, 0 to the capacity (or to the total, when more were sold): 2
 *       of 40 sold stays a low line.  "N of C sold" in the figure's .note;
 *       the <svg> carries data-scale-max (the scale's top), data-plot-top and
 *       data-plot-bottom (its y in the viewBox), each bar rect.s-seats its
 *       data-value.
 *   jobs(figure, {"minutes":[{"minute":MS, "done":N, "failed":N, ...}]})
 *       jobs done and failed attempts per minute (stacked bars)
 *   depth(figure, {"minutes":[{"minute":MS, "ready":N, "scheduled":N, "leased":N, "dead":N}]})
 *       the queue's depth by state (stacked step areas)
 *   scans(figure, {"admitted":N, "to_come":N, "per_minute":[{"minute":MS, "admitted":N, "refused":N}],
 *                  "per_door":[{"door":"...", "admitted":N, "refused":N, "last_at":MS}]})
 *       admissions and refusals per minute (stacked bars), and the doors in
 *       the figure's table (tbody rows tr[data-door])
 *
 * figure: an element holding a .plot (the <svg> goes there, replacing the
 * last one) and optionally a .note; fit() draws again whatever no longer
 * fits its .plot (dashboard.js calls it once the page is shown).  Each <svg> carries data-points (how
 * many entries of the JSON it drew: hours, minutes or per_minute entries)
 * and role="img" with a one-line summary as its label.  The drawing's
 * width follows the .plot's width in CSS pixels (the viewBox is that
 * wide), so that 11 px labels stay 11 px on a phone; a window resize draws
 * again from the last JSON.  Series colours come from dashboard.css (the
 * classes s-<series>), which the HTML legends share.  Times on the x axis
 * are the server's milliseconds shown on the venue's clock (useClock: the
 * dashboard's, from whoami's timezone), as HH:MM, with the zone's
 * abbreviation once in the figure's .zone; hours are cut at the venue's
 * hours, never the browser's.
 */
'use strict';

(function () {
  const NS = 'http://www.w3.org/2000/svg';
  const MIN = 60000, HOUR = 3600000, DAY = 86400000;

  /* ---- SVG building blocks ---- */

  function svg(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  /* a <title> child: the browser shows it as a tooltip */
  function tip(node, text) {
    node.append(svg('title', null, text));
    return node;
  }

  /* the venue's clock (dashboard.js's venueClock); UTC until it is given */
  const pad2 = (n) => String(n).padStart(2, '0');
  let clock = {
    parts: (ms) => { const t = new Date(ms).toISOString(); return { date: t.slice(0, 10), time: t.slice(11, 16), offset: 0 }; },
    abbr: () => 'UTC', offsetMs: () => 0, when: (ms) => new Date(ms).toISOString().slice(0, 16).replace('T', ' ') + ' UTC',
  };
  function useClock(c) { clock = c; }
  const hhmm = (ms) => clock.parts(ms).time;
  const day = (ms) => clock.parts(ms).date;
  /* zoneOf: the abbreviation of a span's zone ("CET", or "CET/CEST" across a change) */
  const zoneOf = (t0, t1) => { const a = clock.abbr(t0), b = clock.abbr(t1); return a === b ? a : a + '/' + b; };
  /* venueHour: the start of the venue's hour that holds ms */
  const venueHour = (ms) => { const off = clock.offsetMs(ms); return Math.floor((ms + off) / HOUR) * HOUR - off; };
  const n0 = (v) => (typeof v === 'number' && isFinite(v) && v > 0 ? v : 0);
  const NUM = new Intl.NumberFormat('en-US');
  const fmt = (v) => (typeof v === 'number' && isFinite(v) ? NUM.format(v) : '–');

  /* niceStep: 1, 2 or 5 times a power of ten, at least 1, so that about
   * `count` steps cover max */
  function niceStep(max, count) {
    const raw = Math.max(1, max / count);
    const p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  /* timeTicks: ticks between t0 and t1 on round times of the venue's clock
   * (every 5 min, every hour, midnights...), at most about `count` of them;
   * each with its label: HH:MM, or the date for a midnight when the span is
   * over a day. */
  function timeTicks(t0, t1, count) {
    const steps = [1, 2, 5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080].map((m) => m * MIN);
    const span = Math.max(MIN, t1 - t0);
    let step = steps.find((s) => span / s <= count);
    if (!step) step = Math.ceil(span / count / (7 * DAY)) * 7 * DAY;
    const ticks = [];
    /* round on the venue's clock: the offset of the first tick's day */
    const off = clock.offsetMs(t0);
    for (let t = Math.ceil((t0 + off) / step) * step - off; t <= t1; t += step) {
      const midnight = hhmm(t) === '00:00';
      ticks.push({ t, label: step >= DAY || (midnight && span > DAY) ? day(t) : hhmm(t) });
    }
    return ticks;
  }

  /* ---- the frame: size, scales, axes ---- */

  /* frame: a new <svg> in the figure's .plot, with scales for the time span
   * [t0, t1] and the values [0, ymax] (rounded up to a round step; o.exact:
   * ymax itself is the top, labelled), o.unit naming them over the axis.
   * The caller draws into f.g, then calls done(f). */
  function frame(figure, o) {
    const plot = figure.querySelector('.plot');
    const w = plotWidth(plot);
    const h = w < 480 ? 170 : 210;
    const m = { l: 38, r: 12, t: o.unit ? 20 : 14, b: 22 };
    const root = svg('svg', { viewBox: `0 0 ${w} ${h}`, width: '100%', role: 'img',
                              'aria-label': o.label, 'data-points': o.points,
                              preserveAspectRatio: 'xMidYMid meet' });
    const f = {
      root, plot, w, h, m,
      x0: m.l, x1: w - m.r, y0: h - m.b, y1: m.t,
      g: svg('g', { class: 'series' }),
    };
    root.append(svg('title', null, o.label));
    if (o.empty) {
      root.append(svg('rect', { x: 0.5, y: 0.5, width: w - 1, height: h - 1, rx: 6, class: 'empty-box' }),
                  svg('text', { x: w / 2, y: h / 2, 'text-anchor': 'middle', 'dominant-baseline': 'middle',
                                class: 'empty-text' }, o.empty));
      return f;
    }
    const span = Math.max(1, o.t1 - o.t0);
    f.sx = (t) => f.x0 + ((t - o.t0) / span) * (f.x1 - f.x0);
    const yTicks = Math.max(2, Math.floor((f.y0 - f.y1) / 40));
    const ystep = niceStep(Math.max(1, o.ymax), yTicks);
    const ytop = o.exact ? Math.max(1, o.ymax) : Math.max(ystep, Math.ceil(Math.max(1, o.ymax) / ystep) * ystep);
    f.sy = (v) => f.y0 - (v / ytop) * (f.y0 - f.y1);
    root.setAttribute('data-scale-max', String(ytop));
    root.setAttribute('data-plot-top', String(f.y1));
    root.setAttribute('data-plot-bottom', String(f.y0));
    const axes = svg('g', { class: 'axes' });
    const marks = [];
    for (let v = 0; v <= ytop + 1e-9 && (!o.exact || v < ytop - ystep / 2); v += ystep) marks.push(v);
    if (o.exact) marks.push(ytop);
    for (const v of marks) {
      const y = Math.round(f.sy(v)) + 0.5;
      axes.append(svg('line', { x1: f.x0, x2: f.x1, y1: y, y2: y, class: v ? 'grid' : 'base' }),
                  svg('text', { x: f.x0 - 5, y, 'text-anchor': 'end', 'dominant-baseline': 'middle' }, fmt(v)));
    }
    if (o.unit) axes.append(svg('text', { x: f.x0 - 5, y: 8, 'text-anchor': 'end', class: 'unit' }, o.unit));
    const xt = timeTicks(o.t0, o.t1, Math.max(2, Math.floor((f.x1 - f.x0) / 70)));
    for (const t of xt) {
      const x = Math.round(f.sx(t.t)) + 0.5;
      axes.append(svg('line', { x1: x, x2: x, y1: f.y0, y2: f.y0 + 4, class: 'base' }),
                  svg('text', { x, y: f.h - 5, 'text-anchor': 'middle' }, t.label));
    }
    root.append(axes, f.g);
    return f;
  }

  function done(figure, f) {
    f.plot.replaceChildren(f.root);
  }

  function note(figure, text) {
    const n = figure.querySelector('.note');
    if (n) n.textContent = text;
  }

  /* zone: the caption's word on the clock of the x axis */
  function zone(figure, t0, t1) {
    const z = figure.querySelector('.zone');
    if (z) z.textContent = t0 === undefined ? '' : 'times ' + zoneOf(t0, t1);
  }

  /* bars: stacked bars, one per entry, each [t, t + width) with layers
   * (bottom first) [{cls, value, what}]; the tooltip lists them. */
  function bars(f, entries, width, layersOf, label) {
    const gap = (f.sx(width) - f.sx(0)) > 4 ? 1 : 0;
    for (const e of entries) {
      const xa = f.sx(e.t), xb = f.sx(e.t + width);
      const x = xa + gap / 2, bw = Math.max(1, xb - xa - gap);
      const g = svg('g');
      let base = 0;
      for (const l of layersOf(e)) {
        if (!(l.value > 0)) continue;
        const yTop = f.sy(base + l.value), yBot = f.sy(base);
        g.append(svg('rect', { x: x.toFixed(1), y: yTop.toFixed(1), width: bw.toFixed(1),
                               height: Math.max(0.5, yBot - yTop).toFixed(1), class: l.cls, 'data-value': l.value }));
        base += l.value;
      }
      /* a hit area the full height, for the tooltip of small bars */
      g.append(tip(svg('rect', { x: x.toFixed(1), y: f.y1, width: bw.toFixed(1), height: f.y0 - f.y1,
                                 class: 'hit' }), label(e)));
      f.g.append(g);
    }
  }

  /* ---- the redraw on resize ---- */

  const last = new Map();   /* figure -> () => draw again */
  let resizeTimer = null;
  window.addEventListener('resize', () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(fit, 150);
  });

  function remember(figure, draw, ...args) {
    last.set(figure, () => draw(figure, ...args));
  }

  /* plotWidth: the drawing's width for the figure's .plot now (a hidden
   * plot measures 0: then a guess, put right by fit() once shown) */
  function plotWidth(plot) {
    return Math.round(Math.min(960, Math.max(280, plot.clientWidth || 640)));
  }

  /* fit: draw again each chart whose .plot is no longer as wide as its
   * drawing (after a resize, or once the page is shown) */
  function fit() {
    for (const [figure, again] of last) {
      const s = figure.querySelector('.plot svg');
      const was = s ? Number(s.getAttribute('viewBox').split(' ')[2]) : 0;
      const plot = figure.querySelector('.plot');
      if (plot.clientWidth && plotWidth(plot) !== was) again();
    }
  }

  /* ---- the charts ---- */

  function sales(figure, data) {
    remember(figure, sales, data);
    /* the server's hours, cut again at the venue's hours (an offset of a
     * half hour moves a sale into the venue's hour it was made in) */
    const byHour = new Map();
    for (const h of data.hours || []) {
      if (typeof h.hour !== 'number') continue;
      const at = venueHour(h.hour);
      const e = byHour.get(at) || { hour: at, seats: 0, orders: 0 };
      e.seats += n0(h.seats);
      e.orders += n0(h.orders);
      byHour.set(at, e);
    }
    const hours = [...byHour.values()].sort((a, b) => a.hour - b.hour);
    const cap = n0(data.capacity), sold = n0(data.sold);
    note(figure, fmt(sold) + ' of ' + fmt(cap) + ' sold' + (cap && sold >= cap ? ' (sold out)' : ''));
    figure.classList.toggle('sold-out', cap > 0 && sold >= cap);
    if (!hours.length) {
      zone(figure);
      done(figure, frame(figure, { label: 'no sales yet', points: 0, empty: 'no sales yet' }));
      return;
    }
    const t1 = hours[hours.length - 1].hour + HOUR;
    const t0 = Math.min(hours[0].hour, t1 - 6 * HOUR);
    zone(figure, t0, t1);
    let run = 0;
    const cum = hours.map((h) => (run += n0(h.seats)));
    /* one scale for the bars, the running total and the capacity */
    const f = frame(figure, {
      label: `seats sold per hour: ${hours.length} hours with sales, ${sold} of ${cap} sold`,
      points: hours.length, t0, t1, unit: 'seats', exact: true,
      ymax: Math.max(cap, run, sold, ...hours.map((h) => n0(h.seats)), 1),
    });
    bars(f, hours.map((h) => ({ ...h, t: h.hour })), HOUR,
         (h) => [{ cls: 's-seats', value: n0(h.seats) }],
         (h) => `${day(h.hour)} ${hhmm(h.hour)}–${hhmm(h.hour + HOUR)} ${clock.abbr(h.hour)}: ${fmt(h.seats)} seats, ${fmt(h.orders)} orders`);
    /* the running total: a step up at the start of each hour with sales,
     * level across it at what was sold by its end */
    let d = `M${f.sx(t0).toFixed(1)},${f.sy(0).toFixed(1)}`;
    hours.forEach((h, i) => {
      d += `H${f.sx(h.hour).toFixed(1)}V${f.sy(cum[i]).toFixed(1)}`;
    });
    d += `H${f.sx(t1).toFixed(1)}`;
    /* a white edge under the line keeps it visible across the bars */
    f.g.append(svg('path', { d, class: 'halo', fill: 'none' }),
               tip(svg('path', { d, class: 's-total', fill: 'none' }), `sold so far: ${fmt(run)}`));
    if (cap) {
      const y = Math.round(f.sy(cap)) + 0.5;
      f.g.append(svg('line', { x1: f.x0, x2: f.x1, y1: y, y2: y, class: 's-capacity', 'data-value': cap }),
                 svg('text', { x: f.x1 - 4, y: y + 12, 'text-anchor': 'end', class: 'cap-label' },
                     'capacity ' + fmt(cap)));
    }
    done(figure, f);
  }

  /* the span of an hour of minutes ending after the newest */
  function lastHour(minutes) {
    const t1 = minutes[minutes.length - 1].minute + MIN;
    return [Math.min(minutes[0].minute, t1 - HOUR), t1];
  }

  function sortedMinutes(list) {
    return (list || []).filter((m) => typeof m.minute === 'number').sort((a, b) => a.minute - b.minute);
  }

  function jobs(figure, data) {
    remember(figure, jobs, data);
    const mins = sortedMinutes(data.minutes);
    if (!mins.length) {
      done(figure, frame(figure, { label: 'no history yet', points: 0, empty: 'no history yet' }));
      return;
    }
    const [t0, t1] = lastHour(mins);
    zone(figure, t0, t1);
    const doneN = mins.reduce((a, m) => a + n0(m.done), 0), failN = mins.reduce((a, m) => a + n0(m.failed), 0);
    note(figure, fmt(doneN) + ' done, ' + fmt(failN) + ' failed');
    const f = frame(figure, {
      label: `jobs per minute over ${mins.length} minutes: ${doneN} done, ${failN} failed`,
      points: mins.length, t0, t1, ymax: Math.max(...mins.map((m) => n0(m.done) + n0(m.failed))),
    });
    bars(f, mins.map((m) => ({ ...m, t: m.minute })), MIN,
         (m) => [{ cls: 's-done', value: n0(m.done) }, { cls: 's-failed', value: n0(m.failed) }],
         (m) => `${hhmm(m.minute)}: ${fmt(m.done)} done, ${fmt(m.failed)} failed`);
    done(figure, f);
  }

  const DEPTH = ['ready', 'scheduled', 'leased', 'dead'];

  function depth(figure, data) {
    remember(figure, depth, data);
    const mins = sortedMinutes(data.minutes);
    if (!mins.length) {
      done(figure, frame(figure, { label: 'no history yet', points: 0, empty: 'no history yet' }));
      return;
    }
    const [t0, t1] = lastHour(mins);
    zone(figure, t0, t1);
    const total = (m) => DEPTH.reduce((a, k) => a + n0(m[k]), 0);
    const now = mins[mins.length - 1];
    note(figure, 'now ' + DEPTH.map((k) => fmt(n0(now[k])) + ' ' + k).join(', '));
    const f = frame(figure, {
      label: `queue depth over ${mins.length} minutes; now ${total(now)} waiting or leased`,
      points: mins.length, t0, t1, ymax: Math.max(...mins.map(total)),
    });
    /* runs of consecutive minutes: a minute the maintenance pass missed
     * leaves a gap rather than a made-up slope */
    const runs = [];
    for (const m of mins) {
      const r = runs[runs.length - 1];
      if (r && m.minute - r[r.length - 1].minute <= MIN * 1.5) r.push(m); else runs.push([m]);
    }
    for (const r of runs) {
      const below = r.map(() => 0);
      for (const k of DEPTH) {
        const above = r.map((m, i) => below[i] + n0(m[k]));
        if (above.some((v, i) => v > below[i])) {
          let d = '';
          r.forEach((m, i) => {
            const xa = f.sx(m.minute).toFixed(1), xb = f.sx(m.minute + MIN).toFixed(1), y = f.sy(above[i]).toFixed(1);
            d += (i ? `L${xa},${y}` : `M${xa},${y}`) + `L${xb},${y}`;
          });
          for (let i = r.length - 1; i >= 0; i--) {
            const y = f.sy(below[i]).toFixed(1);
            d += `L${f.sx(r[i].minute + MIN).toFixed(1)},${y}L${f.sx(r[i].minute).toFixed(1)},${y}`;
          }
          f.g.append(tip(svg('path', { d: d + 'Z', class: 's-' + k }), k));
        }
        above.forEach((v, i) => { below[i] = v; });
      }
    }
    /* the tooltips: one hit area a minute */
    for (const m of mins)
      f.g.append(tip(svg('rect', { x: f.sx(m.minute).toFixed(1), y: f.y1,
                                   width: Math.max(1, f.sx(m.minute + MIN) - f.sx(m.minute)).toFixed(1),
                                   height: f.y0 - f.y1, class: 'hit' }),
                     hhmm(m.minute) + ': ' + DEPTH.map((k) => fmt(n0(m[k])) + ' ' + k).join(', ')));
    done(figure, f);
  }

  function scans(figure, data) {
    remember(figure, scans, data);
    const mins = sortedMinutes(data.per_minute);
    note(figure, 'admitted ' + fmt(n0(data.admitted)) + ', to come ' + fmt(n0(data.to_come)));
    doors(figure.querySelector('table'), data.per_door || []);
    if (!mins.length) {
      done(figure, frame(figure, { label: 'no scans yet', points: 0, empty: 'no scans yet' }));
      return;
    }
    const t1 = mins[mins.length - 1].minute + MIN;
    const t0 = Math.min(mins[0].minute, t1 - 30 * MIN);
    zone(figure, t0, t1);
    const a = mins.reduce((s, m) => s + n0(m.admitted), 0), r = mins.reduce((s, m) => s + n0(m.refused), 0);
    const f = frame(figure, {
      label: `door scans per minute over ${mins.length} minutes: ${a} admitted, ${r} refused`,
      points: mins.length, t0, t1, ymax: Math.max(...mins.map((m) => n0(m.admitted) + n0(m.refused))),
    });
    bars(f, mins.map((m) => ({ ...m, t: m.minute })), MIN,
         (m) => [{ cls: 's-admitted', value: n0(m.admitted) }, { cls: 's-refused', value: n0(m.refused) }],
         (m) => `${hhmm(m.minute)}: ${fmt(m.admitted)} admitted, ${fmt(m.refused)} refused`);
    done(figure, f);
  }

  /* doors: the per-door table; each cell labelled with its heading for the
   * phone layout (as dashboard.js's fillRows does) */
  function doors(table, list) {
    if (!table) return;
    const heads = Array.from(table.querySelectorAll('thead th'), (th) => th.textContent);
    const rows = list.map((d) => {
      const tr = document.createElement('tr');
      tr.dataset.door = d.door;
      const cells = [[d.door, ''], [fmt(d.admitted), 'num'], [fmt(d.refused), 'num'],
                     [typeof d.last_at === 'number' ? clock.when(d.last_at) : '–', 'num']];
      cells.forEach(([text, cls], i) => {
        const td = document.createElement('td');
        td.textContent = text;
        if (cls) td.className = cls;
        td.dataset.label = heads[i] || '';
        tr.append(td);
      });
      return tr;
    });
    table.querySelector('tbody').replaceChildren(...rows);
    table.hidden = rows.length === 0;
  }

  window.StagedoorCharts = Object.freeze({ sales, jobs, depth, scans, fit, timeTicks, useClock });
})();
