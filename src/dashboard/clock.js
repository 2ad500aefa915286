// clock.js: the venue's clock, shared by the dashboard and the door page.
// Every time a person reads there is shown on the venue's clock (whoami's
// timezone and zone_names, the tz database's abbreviations the box knows),
// never the browser's: "2026-12-04 20:00 CET", as on the tickets and in the
// emails.
'use strict';

(function () {
const pad2 = (n) => String(n).padStart(2, '0');

/* venueClock: the venue's clock, for whoami's timezone and zone_names.
 * parts(ms): {date:"YYYY-MM-DD", time:"HH:MM", offset: seconds east of UTC};
 * when(ms): "YYYY-MM-DD HH:MM ABBR", the abbreviation from zone_names by
 * the offset, else "+01:00" ("UTC" for 0).  An unknown zone is UTC. */
window.venueClock = function venueClock(timezone, zoneNames) {
  const names = zoneNames && typeof zoneNames === 'object' ? zoneNames : {};
  const make = (tz) => new Intl.DateTimeFormat('en-CA', {
    timeZone: tz, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', timeZoneName: 'longOffset' });
  let tz = typeof timezone === 'string' && timezone ? timezone : 'UTC', fmt;
  try { fmt = make(tz); } catch (e) { tz = 'UTC'; fmt = make(tz); }
  function parts(ms) {
    const p = {};
    for (const x of fmt.formatToParts(ms)) p[x.type] = x.value;
    const m = /([+-])(\d{1,2})(?::?(\d{2}))?/.exec(p.timeZoneName || '');   /* "GMT" alone: 0 */
    const offset = m ? (m[1] === '-' ? -1 : 1) * (Number(m[2]) * 3600 + Number(m[3] || 0) * 60) : 0;
    return { date: p.year + '-' + p.month + '-' + p.day,
             time: (p.hour === '24' ? '00' : p.hour) + ':' + p.minute, offset };
  }
  function abbr(offset) {
    const n = names[String(offset)];
    if (typeof n === 'string' && n) return n;
    if (!offset) return 'UTC';
    const a = Math.abs(offset);
    return (offset < 0 ? '-' : '+') + pad2(Math.floor(a / 3600)) + ':' + pad2(Math.floor((a % 3600) / 60));
  }
  const ok = (ms) => typeof ms === 'number' && isFinite(ms);
  return {
    timezone: tz,
    parts,
    abbr: (ms) => abbr(parts(ms).offset),
    abbrOffset: abbr,   /* the abbreviation of an offset (seconds east of UTC) */
    offsetMs: (ms) => parts(ms).offset * 1000,
    when(ms) {
      if (!ok(ms)) return '–';
      const p = parts(ms);
      return p.date + ' ' + p.time + ' ' + abbr(p.offset);
    },
    /* "HH:MM ABBR" when ms is on the venue's today, else when(ms) */
    short(ms) {
      if (!ok(ms)) return '–';
      const p = parts(ms);
      return p.date === parts(Date.now()).date ? p.time + ' ' + abbr(p.offset) : p.date + ' ' + p.time + ' ' + abbr(p.offset);
    },
    hhmm: (ms) => parts(ms).time,
    date: (ms) => parts(ms).date,
    /* "YYYY-MM-DDTHH:MM": a datetime-local input's value, in the venue's time */
    local(ms) { const p = parts(ms); return p.date + 'T' + p.time; },
    /* the venue's calendar day as a number (days since 1970-01-01) */
    day(ms) { const [y, m, d] = parts(ms).date.split('-').map(Number); return Date.UTC(y, m - 1, d) / 86400000; },
  };
};
}());
