'use strict';
// Fuzz every function of the sandbox_persist extension with hostile arguments.
// Oracle for every call: a specific SQLSTATE or a result, never XX000/00000,
// never a lost connection; a failed call leaves every table unchanged.
//
//   node fuzz.js --short|--long [--seed N] [--inputs N] [--self-test] [--strict]
//
// Needs PGHOST/PGPORT/PGUSER (a superuser) of a running cluster; creates and
// drops its own database (sp_fuzz, or $SP_FUZZ_DB).

const crypto = require('crypto');
const pg = require('pg');
const { J, render, maxDepth, hasRaw } = require('./lib/json');
const { Rng } = require('./lib/rng');
const { S, mutate, anyJson, hostileAny, hostileIdStrings } = require('./lib/shapes');
const { F, CHECKPOINT_FNS, validJson } = require('./lib/functions');

// json and jsonb results stay text: a deep or huge value must not overflow
// JSON.parse inside the driver.
pg.types.setTypeParser(114, (v) => v);
pg.types.setTypeParser(3802, (v) => v);

// ---------------------------------------------------------------- options
const argv = process.argv.slice(2);
const opt = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
const mode = argv.includes('--long') ? 'long' : 'short';
const seed = opt('--seed') !== undefined ? Number(opt('--seed')) >>> 0 : crypto.randomBytes(4).readUInt32LE(0);
const inputs = Number(opt('--inputs') || (mode === 'long' ? 100000 : 5000));
const selfTestOnly = argv.includes('--self-test');
const strict = argv.includes('--strict');
const trace = process.env.SP_FUZZ_TRACE ? new Set(process.env.SP_FUZZ_TRACE.split(',')) : null;   // print these calls
const only = opt('--only') ? new Set(opt('--only').split(',')) : null;   // restrict to these functions
const dbName = process.env.SP_FUZZ_DB || 'sp_fuzz';
// In long mode a failed call is compared with its before-hash 1 time in N.
const compareEvery = Number(opt('--compare-every') || (mode === 'long' ? 10 : 1));
const STATEMENT_TIMEOUT_MS = 20000;
const DEEP_JSON_IN = 10000;   // json_in takes 10 000 levels; 20 000 exceed the default stack

const rng = new Rng(seed);
const log = (...a) => console.log(...a);

// ---------------------------------------------------------------- connection
let client = null;
async function connect(database) {
  for (let attempt = 0; ; attempt++) {
    const c = new pg.Client({ database, options: `-c statement_timeout=${STATEMENT_TIMEOUT_MS} -c client_min_messages=warning` });
    c.on('error', () => {});          // a lost connection surfaces on the query
    try {
      await c.connect();
      return c;
    } catch (e) {
      // after a backend crash the server restarts: wait for it, bounded
      if (attempt >= 60) throw e;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

// ---------------------------------------------------------------- counters
const stats = {
  inputs: 0, xx: 0, crashes: 0, comparisons: 0, changed: 0,
  hist: new Map(),            // fn -> Map(code -> n)
  findings: new Map(),        // key -> {kind, fn, detail, repro, count}
  fns: new Set(),
};
function histAdd(fn, code) {
  if (!stats.hist.has(fn)) stats.hist.set(fn, new Map());
  const m = stats.hist.get(fn);
  m.set(code, (m.get(code) || 0) + 1);
}
function finding(kind, fn, detail, repro, fullRepro) {
  const key = `${kind}|${fn}|${detail}`;
  const f = stats.findings.get(key);
  if (f) { f.count++; return; }
  stats.findings.set(key, { kind, fn, detail, repro, fullRepro: fullRepro || repro, count: 1, input: stats.inputs });
}

// ---------------------------------------------------------------- catalog
let catalog = [];          // [{name, sig, argtypes, ndefaults, retset, volatile, rettype}]
let hashSql = '';
let jsonColumns = [];      // [[table, column]]

async function readCatalog() {
  const r = await client.query(`
    SELECT p.proname, p.oid::regprocedure::text AS sig, p.pronargdefaults AS ndefaults,
           p.proretset AS retset, p.provolatile AS volatile, p.prorettype::regtype::text AS rettype,
           (SELECT lanname FROM pg_language WHERE oid = p.prolang) AS lang,
           coalesce(array_agg(t::regtype::text ORDER BY o) FILTER (WHERE t IS NOT NULL), '{}') AS argtypes
      FROM pg_proc p
      LEFT JOIN LATERAL unnest(p.proargtypes::oid[]) WITH ORDINALITY AS a(t, o) ON true
     WHERE p.pronamespace = 'sandbox_persist'::regnamespace
     GROUP BY p.oid ORDER BY p.proname`);
  catalog = r.rows;
  const t = await client.query(`
    SELECT c.relname,
           (SELECT string_agg('x.' || quote_ident(a.attname), ', ' ORDER BY k.n)
              FROM pg_index i, unnest(i.indkey) WITH ORDINALITY AS k(att, n), pg_attribute a
             WHERE i.indrelid = c.oid AND i.indisprimary AND a.attrelid = c.oid AND a.attnum = k.att) AS pk,
           -- each row as text; a bytea column by its md5, so big chunks hash fast
           (SELECT string_agg(CASE WHEN a.atttypid = 'bytea'::regtype THEN 'md5(x.' || quote_ident(a.attname) || ')'
                                   ELSE 'x.' || quote_ident(a.attname) END, ', ' ORDER BY a.attnum)
              FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) AS cols
      FROM pg_class c
     WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'r'
     ORDER BY c.relname`);
  // one query over every table: md5 of its rows in primary-key order
  hashSql = 'SELECT json_build_object(' + t.rows.map((row) => {
    const order = row.pk || `row(${row.cols})::text`;
    return `'${row.relname}', (SELECT md5(coalesce(string_agg(row(${row.cols})::text, E'\\n' ORDER BY ${order}), '')) FROM sandbox_persist.${row.relname} x)`;
  }).join(', ') + ')::text AS h';
  const jc = await client.query(`
    SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     WHERE c.relnamespace = 'sandbox_persist'::regnamespace AND c.relkind = 'r'
       AND a.atttypid = 'json'::regtype AND a.attnum > 0 AND NOT a.attisdropped`);
  jsonColumns = jc.rows.map((x) => [x.relname, x.attname]);
}

async function tableHash() {
  const r = await client.query(hashSql);
  return JSON.parse(r.rows[0].h);
}
function diffHash(a, b) {
  return Object.keys(a).filter((k) => a[k] !== b[k]);
}

// Every stored json value must still be readable by json_in (a dump/restore
// or a ::jsonb cast parses it again).
async function storedJsonReadable() {
  const bad = [];
  for (const [t, c] of jsonColumns) {
    try {
      await client.query(`SELECT count(*) FROM sandbox_persist.${t} WHERE ${c}::text::json IS NOT NULL`);
    } catch (e) {
      if (!e.code) throw e;
      bad.push(`${t}.${c}: ${e.code} ${e.message}`);
    }
  }
  return bad;
}

// ---------------------------------------------------------------- state
const state = {
  writers: {},         // thread -> {threadId, ownerToken, fence}
  heads: {},           // thread -> head id
  cpThread: 'fz-cp-thread',
  cpSource: { thread: 'fz-src-thread', id: 'fz-src-1' },
  received: {},        // upload id -> bytes received (open uploads only)
  forkDests: [],       // [{thread, writer}] empty destinations with a current writer
  pending: [],         // interrupt ids created pending
};
const pools = {
  thread: ['fz-thread-1', 'fz-thread-2'], run: ['fz-run-1', 'fz-run-2'], checkpoint: ['fz-cp-1', 'fz-cp-2'],
  cpthread: ['fz-cp-thread'], blob: ['fz/blob-1', 'fz/blob-max'], lock: ['fz-lock-1'], instance: ['fz-inst-1'],
  interrupt: ['fz-int-1'], artifact: ['fz-art-1'], ns: ['fz-ns'], metakey: ['fz-key'], genrun: ['fz-gen-1'],
  upload: [], replica: ['fz-replica'], ltoken: [], wtoken: [],
};
let freshN = 0;
const ctx = {
  rng, state,
  now: () => 1700000000000 + rng.int(100000000),
  fresh: (p) => `fz-${p}-${seed}-${++freshN}`,
  pool(name) {
    const [base, isNew] = name.split(':');
    const list = pools[base] || (pools[base] = []);
    if (!list.length || (isNew && rng.chance(0.6)) || rng.chance(0.05)) {
      const v = base === 'ltoken' || base === 'wtoken' || base === 'upload' ? rng.uuid() : ctx.fresh(base);
      if (list.length < 200) list.push(v);
      return v;
    }
    return rng.pick(list);
  },
};

// ---------------------------------------------------------------- argument values
const BIG_HOSTILE = ['0', '-1', '1', '999', '1000', '600000', '600001', '9007199254740991', '9007199254740992',
  '9223372036854775807', '-9223372036854775808', '-9223372036854775807', '4611686018427387904', '2147483648',
  '-1700000000000', '170000000000000000', '86400000'];
const INT_HOSTILE = ['0', '-1', '1', '2147483647', '-2147483648', '1000', '100000', '5'];
const MALFORMED_JSON = ['{', '[1,]', '{"a":}', 'nul', '', ' ', 'NaN', '01', '1e', '{"a":1}{"b":2}', '"\\ud800', "'x'", '\u0000'];
const BYTE_SIZES = [0, 1, 2, 100, 4095, 4096, 4097, 8191, 8192, 8193, 12288, 20000, 65536];

function validScalar(fn, spec) {
  switch (spec.kind) {
    case 'id': case 'key': case 'uuid': {
      // mostly an upload that is still open
      const open = Object.keys(state.received);
      if (spec.pool === 'upload' && open.length && rng.chance(0.8)) return rng.pick(open);
      return ctx.pool(spec.pool);
    }
    case 'ms': return rng.chance(0.3) ? null : String(ctx.now());
    case 'big': case 'int': {
      const v = rng.pick(spec.valid);
      if (v === 'received') return '0';   // replaced by the chosen upload's count in buildCall
      return v;
    }
    case 'bytes': return rng.bytes(rng.pick(BYTE_SIZES.slice(0, 10)));
    case 'role': return rng.pick(['postgres', 'pg_monitor']);
    case 'text': return rng.pick(spec.valid);
    default: throw new Error('kind ' + spec.kind);
  }
}
function hostileScalar(spec) {
  switch (spec.t) {
    case 'text': {
      const lim = spec.kind === 'key' ? 2048 : 1024;
      const list = hostileIdStrings(rng, lim).map(([s, c]) => ({ v: s, cls: c }))
        .concat([{ v: rng.uuid().toUpperCase() }, { v: 'not-a-uuid' }, { v: '{' + rng.uuid() + '}' },
          { v: 'sandbox-files/sha256/' + rng.hex(64) }, { v: 'sandbox-files/sha256/' + rng.hex(63) + 'G' },
          { v: 'x'.repeat(rng.pick([100000, 1 << 20])) }]);
      return rng.pick(list);
    }
    case 'bigint': return { v: rng.pick(BIG_HOSTILE) };
    case 'integer': return { v: rng.pick(INT_HOSTILE) };
    case 'bytea': return { v: rng.bytes(rng.pick(BYTE_SIZES)) };
    case 'regrole': return { v: rng.pick(['postgres', 'pg_monitor', 'nonexistent_role_fz', '"quoted"', '-', '0', 'public']) };
    default: return { v: null };
  }
}

// A JSON argument: {tree} or {text} (malformed), and how to send it.
function jsonArg(tree) {
  const depth = maxDepth(tree);
  if (depth > DEEP_JSON_IN && !hasRaw(tree)) {
    // deeper than json_in takes: build it in SQL (no parse), or send it
    // as text so json_in itself refuses it
    const via = rng.pick(['build', 'raw', 'text']);
    if (via === 'build' && tree.d && tree.d <= 30000 && !tree.leaf.o && !tree.leaf.a && tree.open === '[') {
      return { sqlExpr: (i) => `fuzz.deep_array($${i}::int, $${i + 1}::json)`, values: [String(tree.d), render(tree.leaf)], deep: true, text: `fuzz.deep_array(${tree.d}, ${render(tree.leaf)})` };
    }
    if (via !== 'text') return { sqlExpr: (i) => `fuzz.raw_json($${i}::text)`, values: [render(tree)], deep: true };
  }
  return { values: [render(tree)], cast: 'json' };
}

// ---------------------------------------------------------------- one call

function specsFor(row) {
  const known = F[row.proname];
  if (known && known.length === row.argtypes.length) return known;
  // not described here: fuzz by SQL type alone
  return row.argtypes.map((t) => ({ t, kind: t === 'json' ? 'json' : t === 'text' ? 'id' : t === 'bytea' ? 'bytes' : t === 'regrole' ? 'role' : t === 'integer' ? 'int' : 'big', pool: 'thread', valid: ['1'], s: S.any() }));
}

// Build the arguments of one call. Returns {args:[{values, cast|sqlExpr}], label, expect}.
function buildCall(row) {
  const specs = specsFor(row);
  const n = specs.length;
  const strategy = rng.pick(['valid', 'valid', 'mutate', 'mutate', 'mutate', 'mutate', 'mutate', 'null', 'hostile', 'hostile', 'opaque']);
  const target = n ? rng.int(n) : -1;
  let expect = null;
  let consist = null;
  let label = strategy;
  const args = specs.map((spec, i) => {
    const valid = () => {
      if (spec.t === 'json') return jsonArg(validJson(ctx, row.proname, i, spec.s));
      return { values: [validScalar(row.proname, spec)], cast: spec.t };
    };
    if (i !== target && strategy !== 'hostile') return valid();
    if (strategy === 'valid') return valid();
    if (strategy === 'null') { label = `null arg ${i + 1}`; return { values: [null], cast: spec.t }; }
    if (spec.t === 'json') {
      if (strategy === 'opaque' || strategy === 'hostile') {
        const k = rng.int(3);
        if (k === 0) { label = `malformed json arg ${i + 1}`; return { values: [rng.pick(MALFORMED_JSON)], cast: 'json' }; }
        const [tree] = k === 1 ? rng.pick(hostileAny(ctx)) : [anyJson(ctx, 3)];
        label = `opaque json arg ${i + 1}`;
        return jsonArg(tree);
      }
      const base = validJson(ctx, row.proname, i, spec.s);
      const m = mutate(ctx, spec.s, base);
      label = `mutate arg ${i + 1} ${m.where || ''} ${m.cls || ''}`.trim();
      expect = expectFor(row.proname, m);
      // every integer field of a function must answer a many-digit fraction alike
      if (m.cls === 'bigfrac' && !m.added && !(CHECKPOINT_FNS.has(row.proname) && /(ownerToken|fence)/.test(m.where))) consist = `${row.proname} ${m.cls}`;
      return jsonArg(m.tree);
    }
    const h = hostileScalar(spec);
    label = `hostile arg ${i + 1}`;
    return { values: [h.v], cast: spec.t };
  });
  // sometimes leave out trailing defaulted arguments
  let keep = n;
  if (row.ndefaults > 0 && rng.chance(0.2)) keep = n - rng.range(1, row.ndefaults);
  if (target >= keep) keep = n;
  // a non-empty clear list may name a patched key ("both set and cleared")
  if (row.proname === 'generation_run_update' && args[2] && args[2].values[0] !== '[]') { expect = null; consist = null; }
  if (row.proname === 'blob_upload_append' && target !== 1 && strategy !== 'hostile' && args[1].values[0] !== null) {
    args[1] = { values: [String(state.received[args[0].values[0]] ?? 0)], cast: 'bigint' };
  }
  return { args: args.slice(0, keep), label, expect, consist };
}

// SQLSTATE a single-field mutation must end in, where it is unambiguous.
function expectFor(fn, m) {
  if (!m.cls || m.nested && m.where.includes('writer')) return null;
  if (m.added) return null;     // a field the valid input did not have may break a pairing rule first
  const cp = CHECKPOINT_FNS.has(fn);
  if (cp && /^(writer\.)?(ownerToken|fence)/.test(m.where)) return null;   // a malformed writer is just not current
  if (/expectedLength/.test(m.where)) return null;                        // advisory, ignored by the server
  if (m.ftype === 'int' && m.cls === 'digits33') return { codes: [cp ? 'SP008' : '22003'], why: '33-digit integer' };
  if (m.ftype === 'int' && m.cls === 'range') return { codes: [cp ? 'SP008' : '22003'], why: 'integer beyond 2^53-1' };
  if (m.ftype === 'int' && m.cls === 'frac') return { codes: [cp ? 'SP008' : '22023'], why: 'fraction for an integer' };
  if (m.ftype === 'id' && m.cls === 'toolong') return { codes: [cp ? 'SP007' : '22001'], why: 'identifier over its byte limit' };
  return null;
}

function sqlFor(row, call) {
  let i = 1;
  const values = [];
  const parts = call.args.map((a) => {
    if (a.sqlExpr) {
      const e = a.sqlExpr(i);
      i += a.values.length;
      values.push(...a.values);
      return e;
    }
    values.push(a.values[0]);
    return `$${i++}::${a.cast}`;
  });
  const fnCall = `sandbox_persist.${row.proname}(${parts.join(', ')})`;
  const text = row.retset ? `SELECT * FROM ${fnCall}` : `SELECT ${fnCall} AS r`;
  return { text, values };
}

// A psql-runnable reproducer; long strings abbreviated (repeat() where they
// repeat, cut otherwise) unless full is asked for.
function literal(v, full) {
  if (v === null || v === undefined) return 'NULL';
  if (Buffer.isBuffer(v)) {
    if (v.length > 64 && v.every((b) => b === v[0])) return `decode(repeat('${v.slice(0, 1).toString('hex')}', ${v.length}), 'hex')`;
    if (v.length > 64 && !full) return `<${v.length} random bytes>`;
    return `'\\x${v.toString('hex')}'`;
  }
  const s = String(v);
  if (s.length > 200) {
    const m = /^(.*?)(.)\2{150,}(.*)$/s.exec(s);
    if (m && (full || (m[1].length < 200 && m[3].length < 200))) {
      return `(${literal(m[1], full)} || repeat(${literal(m[2], full)}, ${s.length - m[1].length - m[3].length}) || ${literal(m[3], full)})`;
    }
    if (!full) return `'${s.slice(0, 120).replace(/'/g, "''")}...(${s.length} chars)'`;
  }
  if (s.includes('\u0000')) return `('${s.replace(/'/g, "''").replace(/\u0000/g, "' || chr(0) || '")}')`;
  return `'${s.replace(/'/g, "''")}'`;
}
function repro(row, sql, full = false) {
  let out = sql.text;
  // replace from the highest index so $1 does not clobber $10
  for (let i = sql.values.length; i >= 1; i--) out = out.split(`$${i}`).join(literal(sql.values[i - 1], full));
  return out;
}

// Classify one outcome. Returns {code, crash}.
function classify(err) {
  if (!err) return { code: 'ok' };
  if (!err.code || /terminat|ECONNRESET|Connection/i.test(err.message) && !err.code) return { code: 'CRASH', crash: true };
  if (['57P01', '57P02', '57P03'].includes(err.code)) return { code: err.code, crash: true };
  return { code: err.code };
}
const isBadCode = (code) => code === '00000' || /^XX/.test(code);

const unreadableColumns = new Set();
const consistency = new Map();   // single-field mutation class -> first SQLSTATE
let knownHash = null;        // hash of the tables as they are now, when known

async function runCall(row, call, counters = stats, forceCompare = false) {
  const sql = call.sql || sqlFor(row, call);
  // decided before the call: 1 call in compareEvery is hashed around, if it fails
  const compare = forceCompare || (counters.callsSeen = (counters.callsSeen || 0) + 1) % compareEvery === 0;
  let before = knownHash;
  if (compare && !before) before = await tableHash();
  let res = null;
  let err = null;
  try {
    res = await client.query(sql);
  } catch (e) {
    err = e;
  }
  if (call.between) await call.between();        // self-test: a change committed between the hashes
  const out = classify(err);
  if (trace && (trace.has(row.proname) || trace.has('all'))) log(`trace ${counters.inputs + 1} ${out.code} [${call.label}] ${repro(row, sql).slice(0, 300)}`);
  counters.inputs++;
  counters.fns.add(row.proname);
  histAdd(row.proname, out.code);
  if (out.crash) {
    counters.crashes++;
    finding('crash', row.proname, `${err.code || ''} ${err.message}`, repro(row, sql), repro(row, sql, true));
    try { await client.end(); } catch (_) { /* gone */ }
    client = await connect(dbName);
    knownHash = null;
    return { out, res };
  }
  if (err && isBadCode(out.code)) {
    counters.xx++;
    finding('XX000/00000', row.proname, `${out.code} ${err.message}`, repro(row, sql), repro(row, sql, true));
  }
  if (err) {
    if (out.code === '54000' && row.proname !== 'blob_get') finding('generic 54000', row.proname, err.message.slice(0, 80), repro(row, sql), repro(row, sql, true));
    // an error raised by a statement inside a C function, not by its input
    // checks: plain bad input reached the extension's own SQL. SP014 is the
    // move window's row trigger refusing a write to a thread the fuzzer
    // itself marked as moving (_thread_move_begin): state, not input.
    if (row.lang === 'c' && /SQL (function|statement)/.test(err.where || '') && !['40001', '40P01', '55P03', '57014', 'SP014'].includes(out.code)) {
      finding('error from an internal statement', row.proname, `${out.code} ${err.message} [${(err.where || '').split('\n')[0]}]`, repro(row, sql), repro(row, sql, true));
    }
    if (call.consist) {
      const first = consistency.get(call.consist);
      if (first && first.code !== out.code) finding('inconsistent SQLSTATE', row.proname, `${call.consist}: ${first.code} then ${out.code}`, `${first.repro}\n    ${repro(row, sql)}`, `${first.fullRepro}\n    ${repro(row, sql, true)}`);
      if (!first) consistency.set(call.consist, { code: out.code, repro: repro(row, sql), fullRepro: repro(row, sql, true) });
    }
    if (out.code === '57014') finding('timeout', row.proname, call.label, repro(row, sql), repro(row, sql, true));
    if (call.expect && !call.expect.codes.includes(out.code)) finding('wrong SQLSTATE', row.proname, `${call.expect.why}: want ${call.expect.codes.join('/')} got ${out.code} (${call.label})`, repro(row, sql), repro(row, sql, true));
    if (compare && before) {
      const after = await tableHash();
      counters.comparisons++;
      const changed = diffHash(before, after);
      if (changed.length) {
        counters.changed++;
        finding('table changed by a failed call', row.proname, changed.join(','), repro(row, sql), repro(row, sql, true));
      }
      knownHash = after;
    } else if (!compare) {
      // not compared: still known unless something changed it, which is what we would check
      knownHash = null;
    }
    return { out, res, err };
  }
  if (call.expect) finding('accepted invalid input', row.proname, `${call.expect.why} (${call.label})`, repro(row, sql), repro(row, sql, true));
  if (row.volatile !== 's') knownHash = null;
  if (call.args.some((a) => a.deep)) {
    for (const b of await storedJsonReadable()) {
      const col = b.split(':')[0];
      if (unreadableColumns.has(col)) continue;
      unreadableColumns.add(col);
      const [t, c] = col.split('.');
      finding('stored JSON that json_in refuses', row.proname, b.slice(0, 80), repro(row, sql),
        `${repro(row, sql, true)}\n    SELECT count(*) FROM sandbox_persist.${t} WHERE ${c}::text::json IS NOT NULL`);
    }
  }
  return { out, res };
}

// ---------------------------------------------------------------- state updates
function learn(row, call, res) {
  if (!res || !res.rows || !res.rows.length) return;
  const v = res.rows[0].r;
  try {
    switch (row.proname) {
      case 'blob_upload_begin':
        if (v) { pools.upload.push(v); state.received[v] = 0; }
        break;
      case 'blob_upload_append':
        if (v) state.received[call.args[0].values[0]] = JSON.parse(v).received;
        break;
      case 'blob_upload_commit': case 'blob_upload_abort':
        delete state.received[call.args[0].values[0]];
        break;
      case 'checkpoint_fork_from_checkpoint':
        state.forkDests.shift();
        break;
      case 'lock_acquire':
        if (v) pools.ltoken.push(JSON.parse(v).ownerToken);
        break;
      case 'checkpoint_acquire_writer':
        if (v) { const w = JSON.parse(v); state.writers[w.threadId] = { threadId: w.threadId, ownerToken: w.ownerToken, fence: w.fence }; pools.wtoken.push(w.ownerToken); }
        break;
      case 'checkpoint_append':
        if (v) state.heads[state.cpThread] = JSON.parse(v).headId;
        break;
      default:
    }
  } catch (_) { /* results are checked elsewhere */ }
  // a pending interrupt that a call settled is no longer pending
  if (row.proname === 'interrupt_commit_batch') state.pending = [];
  if (/^interrupt_(resolve|cancel)$/.test(row.proname)) state.pending = state.pending.filter((id) => id !== call.args[0].values[0]);
  if (pools.upload.length > 50) pools.upload.shift();
  if (pools.ltoken.length > 50) pools.ltoken.shift();
}

// Keep a little state available that valid calls consume: open uploads,
// pending interrupts, writers of empty fork destinations. Not counted as inputs.
async function prepare(row) {
  const sp = 'sandbox_persist';
  try {
    if (row.proname.startsWith('blob_upload_') && pools.upload.filter((u) => state.received[u] !== undefined).length < 3) {
      const r = await client.query(`SELECT ${sp}.blob_upload_begin($1) AS r`, [ctx.fresh('upload-key')]);
      pools.upload.push(r.rows[0].r); state.received[r.rows[0].r] = 0; knownHash = null;
    }
    if (row.proname === 'checkpoint_fork_from_checkpoint' && state.forkDests.length < 1) {
      const dest = ctx.fresh('fork-thread');
      const w = JSON.parse((await client.query(`SELECT ${sp}.checkpoint_acquire_writer($1, 600000) AS r`, [dest])).rows[0].r);
      state.forkDests.push({ thread: dest, writer: { threadId: w.threadId, ownerToken: w.ownerToken, fence: w.fence } });
      knownHash = null;
    }
    if (row.proname.startsWith('interrupt_') && state.pending.length < 2) {
      const id = ctx.fresh('pending');
      await client.query(`SELECT ${sp}.interrupt_create($1::json)`, [JSON.stringify({ interruptId: id, runId: 'fz-run-1', threadId: 'fz-thread-1', requestedAt: 1700000000000, payload: { q: id } })]);
      state.pending.push(id); pools.interrupt.push(id); knownHash = null;
    }
  } catch (e) {
    if (!e.code) throw e;
  }
}

async function refreshHead() {
  const r = await client.query('SELECT sandbox_persist.checkpoint_get_head($1) AS h', [state.cpThread]);
  state.heads[state.cpThread] = r.rows[0].h;
}

// ---------------------------------------------------------------- set-up
async function setup() {
  const admin = await connect(process.env.PGDATABASE || 'postgres');
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${dbName} TEMPLATE template0 ENCODING 'UTF8'`);
  for (const s of [
    'allow_client_clock = on', 'allow_test_reset = off', 'blob_chunk_size = \'4kB\'', 'blob_max_read = \'8kB\'',
  ]) await admin.query(`ALTER DATABASE ${dbName} SET sandbox_persist.${s}`);
  await admin.end();
  client = await connect(dbName);
  await client.query('CREATE EXTENSION sandbox_persist');
  await client.query(`CREATE SCHEMA fuzz;
    -- JSON as deep as asked, built without json_in (each level wraps the last)
    CREATE FUNCTION fuzz.deep_array(n int, leaf json) RETURNS json LANGUAGE plpgsql AS $$
    DECLARE j json := leaf; BEGIN FOR i IN 1..n LOOP j := json_build_array(j); END LOOP; RETURN j; END $$;
    -- a json datum from text, unparsed (btrim(text) returns its argument's bytes)
    CREATE FUNCTION fuzz.raw_json(text) RETURNS json LANGUAGE internal IMMUTABLE STRICT AS 'btrim1';
    -- self-test: an error with SQLSTATE XX000
    CREATE FUNCTION fuzz.raise_internal() RETURNS void LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'fuzz self-test internal error' USING ERRCODE = 'XX000'; END $$;`);
  await readCatalog();
}

// A little valid state, so calls get past the existence checks.
async function seedState() {
  const q = async (text, values) => (await client.query(text, values)).rows[0];
  const sp = 'sandbox_persist';
  await q(`SELECT ${sp}.run_create_or_resume('{"runId":"fz-run-1","threadId":"fz-thread-1","startedAt":1700000000000}')`);
  await q(`SELECT ${sp}.run_create_or_resume('{"runId":"fz-run-2","threadId":"fz-thread-1","startedAt":1700000000001,"status":"completed"}')`);
  await q(`SELECT ${sp}.event_log_append('fz-run-1', '[{"type":"a"},{"type":"b"}]')`);
  const lock = await q(`SELECT ${sp}.lock_acquire('fz-lock-1', 600000) AS r`);
  pools.ltoken.push(JSON.parse(lock.r).ownerToken);
  const w = JSON.parse((await q(`SELECT ${sp}.checkpoint_acquire_writer('fz-cp-thread', 600000) AS r`)).r);
  state.writers['fz-cp-thread'] = { threadId: w.threadId, ownerToken: w.ownerToken, fence: w.fence };
  pools.wtoken.push(w.ownerToken);
  const fileKey = 'sandbox-files/sha256/' + crypto.createHash('sha256').update('hello').digest('hex');
  const artKey = 'sandbox-artifacts/sha256/' + 'a'.repeat(64);
  for (const [id, parent] of [['fz-cp-1', null], ['fz-cp-2', 'fz-cp-1']]) {
    const cp = { id, threadId: 'fz-cp-thread', parentCheckpointId: parent, createdAt: id === 'fz-cp-1' ? 1 : 2, reason: 'named',
      label: 'l', sourceRunId: 'fz-run-1', files: [{ path: `src/${id}.txt`, kind: 'file', blobKey: fileKey, size: 5 }, { path: 'dir', kind: 'dir' }],
      artifacts: [{ artifactId: 'a1', name: 'n', mimeType: 'text/plain', blobKey: artKey, size: 3, createdAt: 1.5 }] };
    await q(`SELECT ${sp}.checkpoint_append($1::json, '[{"role":"user","content":"hi"}]') AS r`,
      [JSON.stringify({ checkpoint: cp, expectedHeadId: parent, writer: state.writers['fz-cp-thread'] })]);
  }
  state.heads['fz-cp-thread'] = 'fz-cp-2';
  // the fork source: a thread no valid delete_head touches
  const ws = JSON.parse((await q(`SELECT ${sp}.checkpoint_acquire_writer('fz-src-thread', 600000) AS r`)).r);
  await q(`SELECT ${sp}.checkpoint_append($1::json, '[{"role":"user","content":"src"}]') AS r`,
    [JSON.stringify({ checkpoint: { id: 'fz-src-1', threadId: 'fz-src-thread', parentCheckpointId: null, createdAt: 1, reason: 'named',
      files: [{ path: 'a.txt', kind: 'file', blobKey: fileKey, size: 5 }], artifacts: [] }, expectedHeadId: null,
    writer: { threadId: ws.threadId, ownerToken: ws.ownerToken, fence: ws.fence } })]);
  pools.checkpoint.push('fz-src-1'); pools.cpthread.push('fz-src-thread');
  await q(`SELECT ${sp}.blob_put('fz/blob-1', $1::bytea, '{"contentType":"text/plain","customMetadata":{"a":"b"}}')`, [Buffer.alloc(5000, 7)]);
  await q(`SELECT ${sp}.blob_put('fz/blob-max', $1::bytea)`, [crypto.randomBytes(8192)]);
  await q(`SELECT ${sp}.blob_put($1, 'hello'::bytea)`, [fileKey]);
  pools.blob.push(fileKey);
  const up = await q(`SELECT ${sp}.blob_upload_begin('fz/upload-1') AS r`);
  await q(`SELECT ${sp}.blob_upload_append($1, 0, $2::bytea)`, [up.r, Buffer.alloc(100, 1)]);
  pools.upload.push(up.r); state.received[up.r] = 100;
  await q(`SELECT ${sp}.interrupt_create('{"interruptId":"fz-int-1","runId":"fz-run-1","threadId":"fz-thread-1","requestedAt":1700000000000,"payload":{"q":1}}')`);
  await q(`SELECT ${sp}.metadata_set('fz-ns', 'fz-key', '{"v":1}')`);
  await q(`SELECT ${sp}.generation_run_create_or_resume('{"runId":"fz-gen-1","threadId":"fz-thread-1","activity":"chat","provider":"p","model":"m","startedAt":1700000000000}')`);
  await q(`SELECT ${sp}.artifact_save($1::json)`, [JSON.stringify({ artifactId: 'fz-art-1', runId: 'fz-run-1', threadId: 'fz-thread-1', blobKey: 'fz/blob-1', name: 'a.txt', mimeType: 'text/plain', size: 5000, createdAt: 1700000000000.5 })]);
  await q(`SELECT ${sp}.instance_upsert('{"key":"fz-inst-1","provider":"fake","providerSandboxId":"sb-1","threadId":"fz-thread-1","latestRunId":"fz-run-1","updatedAt":1}')`);
  await q(`SELECT ${sp}.message_save_thread('fz-thread-1', '[{"role":"user","content":"hi"}]')`);
  await q(`SELECT ${sp}.reaper_heartbeat('fz-replica', '{"ok":true}')`);
}

// ---------------------------------------------------------------- self-test
// The oracle must flag an XX000 error, a 00000 error, a lost connection and a
// table change around a failed call. Counted apart from the real run.
async function selfTest() {
  const c = { inputs: 0, xx: 0, crashes: 0, comparisons: 0, changed: 0, fns: new Set() };
  const savedFindings = new Set(stats.findings.keys());
  const fixed = (name, text, between) => runCall({ proname: name, retset: false, volatile: 'v', lang: 'sql' },
    { args: [], label: 'self-test', between, sql: { text, values: [] } }, c, true);
  // 1. an error with SQLSTATE XX000 from the server
  await fixed('self_test_xx000', 'SELECT fuzz.raise_internal()');
  // 2. a lost connection (this backend ends itself)
  await fixed('self_test_crash', 'SELECT pg_terminate_backend(pg_backend_pid())');
  // 3. a failed call, with a table change committed by a separate statement between the hashes
  await fixed('self_test_changed', 'SELECT 1 / 0', async () => {
    await client.query(`INSERT INTO sandbox_persist.reaper_heartbeats VALUES ('fz-self-test', 1, NULL)`);
  });
  await client.query(`DELETE FROM sandbox_persist.reaper_heartbeats WHERE replica = 'fz-self-test'`);
  knownHash = null;
  // 4. an error whose SQLSTATE is 00000: no server path raises one (PL/pgSQL
  //    turns it into P0001), so the classifier is fed one directly
  const zero = classify(Object.assign(new Error('x'), { code: '00000' }));
  const zeroFlagged = isBadCode(zero.code) && !zero.crash ? 1 : 0;
  const ok = c.xx === 1 && c.crashes === 1 && c.changed === 1 && c.comparisons >= 1 && zeroFlagged === 1;
  for (const k of [...stats.findings.keys()]) if (!savedFindings.has(k)) stats.findings.delete(k);
  for (const k of [...stats.hist.keys()]) if (k.startsWith('self_test_')) stats.hist.delete(k);
  log(`self-test: XX000 flagged ${c.xx}/1, lost connection flagged ${c.crashes}/1, table change flagged ${c.changed}/1 (${c.comparisons} comparisons), 00000 flagged ${zeroFlagged}/1: ${ok ? 'ok' : 'FAILED'}`);
  return ok;
}

// ---------------------------------------------------------------- main
async function main() {
  const t0 = Date.now();
  log(`fuzz (${mode}): seed ${seed} (reproduce with --seed ${seed}), ${selfTestOnly ? 'self-test only' : inputs + ' inputs'}, database ${dbName}`);
  await setup();
  await seedState();
  const selfOk = await selfTest();
  if (!selfOk || selfTestOnly) {
    await teardown();
    process.exit(selfOk ? 0 : 3);
  }
  // every function of the catalog; the ones without argument knowledge are named
  const unknown = catalog.filter((r) => !F[r.proname] || F[r.proname].length !== r.argtypes.length).map((r) => r.proname);
  if (unknown.length) log(`note: fuzzed by SQL types only (no field knowledge): ${unknown.join(', ')}`);
  const targets = only ? catalog.filter((r) => only.has(r.proname)) : catalog;
  if (!targets.length) throw new Error('--only names no function of the catalog');
  let lastProgress = Date.now();
  for (let k = 0; k < inputs; k++) {
    const row = targets[rng.int(targets.length)];
    await prepare(row);
    const call = buildCall(row);
    const { out, res } = await runCall(row, call);
    if (out.code === 'ok') {
      learn(row, call, res);
      if (/^checkpoint_(append|delete_head|fork)/.test(row.proname)) await refreshHead();
    }
    // occasionally keep the seeded thread writable: re-acquire its writer
    if (k % 500 === 499) {
      try {
        const r = await client.query(`SELECT sandbox_persist.checkpoint_acquire_writer($1, 600000) AS r`, [state.cpThread]);
        const w = JSON.parse(r.rows[0].r);
        state.writers[state.cpThread] = { threadId: w.threadId, ownerToken: w.ownerToken, fence: w.fence };
      } catch (_) { /* held: keep the old one */ }
      knownHash = null;
    }
    if (Date.now() - lastProgress > 30000) {
      lastProgress = Date.now();
      log(`  ... ${stats.inputs} inputs, ${Math.round((Date.now() - t0) / 1000)} s`);
    }
  }
  const bad = (await storedJsonReadable()).filter((b) => !unreadableColumns.has(b.split(':')[0]));
  if (bad.length) finding('stored JSON that json_in refuses', '(end of run)', bad.join('; ').slice(0, 200), '');
  const secs = ((Date.now() - t0) / 1000).toFixed(1);
  report(secs);
  await teardown();
  const fail = stats.xx || stats.crashes || stats.changed || (strict && stats.findings.size);
  process.exit(fail ? 1 : 0);
}

async function teardown() {
  try { await client.end(); } catch (_) { /* gone */ }
  if (process.env.SP_FUZZ_KEEP) return;
  const admin = await connect(process.env.PGDATABASE || 'postgres');
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.end();
}

function report(secs) {
  log(`SQLSTATEs per function (${secs} s):`);
  for (const name of [...stats.hist.keys()].sort()) {
    const m = stats.hist.get(name);
    const parts = [...m.entries()].sort((a, b) => b[1] - a[1]).map(([c, n]) => `${c}:${n}`);
    log(`  ${name.padEnd(38)} ${parts.join(' ')}`);
  }
  const missing = (only ? catalog.filter((r) => only.has(r.proname)) : catalog).map((r) => r.proname).filter((n) => !stats.fns.has(n));
  if (missing.length) log(`not reached: ${missing.join(', ')}`);
  if (stats.findings.size) {
    const file = require('path').join(require('os').tmpdir(), `sp_fuzz_findings_${seed}.sql`);
    require('fs').writeFileSync(file, [
      `-- sandbox_persist fuzz findings, seed ${seed}: full reproducers. Run in a database set up as the fuzzer's`,
      `-- (sandbox_persist.allow_client_clock = on, blob_chunk_size = 4kB, blob_max_read = 8kB) with these helpers:`,
      'CREATE SCHEMA IF NOT EXISTS fuzz;',
      "CREATE OR REPLACE FUNCTION fuzz.deep_array(n int, leaf json) RETURNS json LANGUAGE plpgsql AS $$ DECLARE j json := leaf; BEGIN FOR i IN 1..n LOOP j := json_build_array(j); END LOOP; RETURN j; END $$;",
      "CREATE OR REPLACE FUNCTION fuzz.raw_json(text) RETURNS json LANGUAGE internal IMMUTABLE STRICT AS 'btrim1';",
      '\\set VERBOSITY verbose',
      ...[...stats.findings.values()].map((f) => `-- [${f.kind}] ${f.fn}: ${f.detail.replace(/\n/g, ' ')}\n${(f.fullRepro || '').split('\n    ').map((x) => x + ';').join('\n')}`),
    ].join('\n') + '\n');
    log(`full reproducers: ${file}`);
    log(`findings (${stats.findings.size} distinct; reproduce one with psql in a database set up as the fuzzer's):`);
    for (const f of stats.findings.values()) {
      log(`- [${f.kind}] ${f.fn}: ${f.detail} (x${f.count}, first at input ${f.input})`);
      if (f.repro) log(`    ${f.repro.length > 600 ? f.repro.slice(0, 600) + '...' : f.repro}`);
    }
  }
  log(`findings: ${stats.findings.size} distinct (wrong SQLSTATE, generic 54000, accepted invalid input, unreadable stored JSON, timeouts, plus the counted failures)${strict ? ' [strict: they fail the run]' : ''}`);
  log(`summary: fuzz (${mode}): ${stats.inputs} inputs tried, ${stats.fns.size} functions, ${stats.xx} XX000/00000 errors, ${stats.crashes} backend crashes, ${stats.comparisons} table comparisons, ${stats.changed} tables changed by a failed call`);
}

main().catch(async (e) => {
  console.error('fuzz: aborted:', e && e.stack || e);
  log(`summary: fuzz (${mode}): ${stats.inputs} inputs tried, ${stats.fns.size} functions, ${stats.xx} XX000/00000 errors, ${stats.crashes} backend crashes, ${stats.comparisons} table comparisons, ${stats.changed} tables changed by a failed call`);
  process.exit(2);
});
