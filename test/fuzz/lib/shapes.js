'use strict';
// What each JSON field is, how to make a valid value of it, and how to make a
// hostile one. A hostile value carries a class (cls) that names what is wrong,
// so the oracle can check the SQLSTATE of a single-field mutation.

const { J, fromJs } = require('./json');

const MAX_SAFE = '9007199254740991';
const DIGITS33 = '123456789012345678901234567890123';

// Letters and digits at random: text that pglz cannot compress.
function randomText(rng, n) {
  const a = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
  let s = '';
  for (let i = 0; i < n; i++) s += a[rng.int(a.length)];
  return s;
}

// Strings hostile to any identifier with a byte limit of lim.
function hostileIdStrings(rng, lim) {
  return [
    ['', 'empty'],
    ['x'.repeat(lim + 1), 'toolong'],
    ['x'.repeat(lim * 2 + 7), 'toolong'],
    ['k'.repeat(2900), 'toolong'],
    [randomText(rng, 2900), 'toolong'],          // incompressible: TOAST cannot shrink it under the index limit
    [randomText(rng, lim + 1), 'toolong'],
    ['é'.repeat(lim / 2) + 'x', 'toolong'],
    ['é'.repeat(lim / 2), null],                 // exactly lim bytes: valid
    ['a\u0000b', 'nul'],
    ['\u0000', 'nul'],
    ['\ud800', 'surrogate'],
    ['a\udc00b', 'surrogate'],
    ['\ud83d', 'surrogate'],
    ['../../etc/passwd', null],
    ['/abs/path', null],
    ['a\\b', null],
    [' ', null],
    ['\t\n', null],
    ['😀', null],
    ['a'.repeat(rng.range(1, 40)), null],
  ];
}

const INT_HOSTILE = [
  ['1.5', 'frac'], ['0.5', 'frac'], ['1e-400', 'frac'], ['-0.0001', 'frac'],
  ['1e308', 'range'], ['-1e308', 'range'], ['9007199254740992', 'range'],
  ['9007199254740993', 'range'], ['-9007199254740993', 'range'],
  ['9223372036854775808', 'range'], ['18446744073709551616', 'range'],
  [DIGITS33, 'digits33'], ['-' + DIGITS33, 'digits33'], ['1' + '0'.repeat(400), 'range'],
  // non-integral numbers of many digits: the same class must give one SQLSTATE
  ['1'.repeat(31) + '.5', 'bigfrac'], ['1'.repeat(32) + '.5', 'bigfrac'], ['9'.repeat(33) + '.5', 'bigfrac'],
  ['2'.repeat(34) + '.5', 'bigfrac'], ['-' + '1'.repeat(40) + '.25', 'bigfrac'], ['1'.repeat(32) + '.0000001', 'bigfrac'],
  ['-0', null], ['0', null], ['1e3', null], ['1.0', null], [MAX_SAFE, null], ['-1', null],
];

const NUM_HOSTILE = [
  ['1e308', null], ['-1e308', null], ['1e309', 'range'], ['-0', null], ['1e-400', null],
  [DIGITS33, null], ['0.1', null], ['4.9e-324', null], ['1' + '0'.repeat(400), 'range'],
];

// Wrong-type values for a field that wants `want`.
function wrongTypes(want) {
  const all = {
    string: J.str('s'), number: J.num('1'), boolean: J.bool(true), null: J.nul(),
    object: J.obj([]), array: J.arr([]), objectNested: J.obj([['a', J.arr([J.num('1')])]]),
    numstr: J.str('5'),
  };
  return Object.entries(all).filter(([k]) => k !== want && !(want === 'string' && k === 'numstr'))
    .map(([k, v]) => [v, k === 'null' ? 'null' : 'wrongtype']);
}

// A shape: { type, valid(ctx) -> tree, hostile(ctx) -> {tree, cls} }.
function shape(type, valid, hostileList) {
  return {
    type,
    valid,
    hostile(ctx) {
      const list = hostileList(ctx);
      const [tree, cls] = ctx.rng.pick(list);
      return { tree, cls };
    },
  };
}

const S = {
  id: (pool, lim = 1024) => shape('id',
    (ctx) => J.str(ctx.pool(pool)),
    (ctx) => hostileIdStrings(ctx.rng, lim).map(([s, c]) => [J.str(s), c]).concat(wrongTypes('string'))),
  key: (pool) => S.id(pool, 2048),
  str: (gen) => shape('str',
    (ctx) => J.str(gen ? gen(ctx) : ctx.rng.pick(['a', 'text', 'é', 'x y'])),
    (ctx) => hostileIdStrings(ctx.rng, 1024).map(([s]) => [J.str(s), null]).concat(wrongTypes('string'))),
  int: (gen) => shape('int',
    (ctx) => J.num(gen ? gen(ctx) : ctx.now()),
    () => INT_HOSTILE.map(([s, c]) => [J.num(s), c]).concat(wrongTypes('number'))),
  num: (gen) => shape('num',
    (ctx) => J.num(gen ? gen(ctx) : ctx.rng.pick(['1', '2.5', '1700000000000'])),
    () => NUM_HOSTILE.map(([s, c]) => [J.num(s), c]).concat(wrongTypes('number'))),
  bool: () => shape('bool',
    (ctx) => J.bool(ctx.rng.chance(0.5)),
    () => [[J.str('true'), 'wrongtype'], [J.num('0'), 'wrongtype'], [J.nul(), 'null']]),
  enumOf: (values) => shape('enum',
    (ctx) => J.str(ctx.rng.pick(values)),
    () => [[J.str('RUNNING'), 'wrongtype'], [J.str(''), 'wrongtype'], [J.str('done'), 'wrongtype'],
      [J.str(values[0] + '\u0000'), 'wrongtype'], [J.num('1'), 'wrongtype'], [J.nul(), 'null']]),
  uuid: (pool) => shape('uuid',
    (ctx) => J.str(pool ? ctx.pool(pool) : ctx.rng.uuid()),
    (ctx) => [[J.str('not-a-uuid'), null], [J.str(ctx.rng.uuid().toUpperCase()), null],
      [J.str('{' + ctx.rng.uuid() + '}'), null], [J.str(ctx.rng.hex(32)), null],
      [J.str(ctx.rng.uuid() + 'x'), null], [J.str(''), null], [J.str('\ud800'), null],
      [J.num('1'), null], [J.nul(), null], [J.str('0'.repeat(5000)), null]]),
  any: () => shape('any',
    (ctx) => anyJson(ctx, 3),
    (ctx) => hostileAny(ctx)),
  obj: (fields, opts = {}) => objShape(fields, opts),
  anyObj: () => shape('anyobj',
    (ctx) => J.obj([['k', anyJson(ctx, 2)]]),
    (ctx) => [[J.arr([]), 'wrongtype'], [J.str('x'), 'wrongtype'], [J.num('1'), 'wrongtype'],
      [J.nul(), 'null'], [hostileAny(ctx)[0][0], null]]),
  strMap: () => shape('strmap',
    (ctx) => J.obj([['a', J.str('b')], ['c\u00e9', J.str(ctx.rng.hex(4))]]),
    () => [[J.obj([['a', J.num('1')]]), 'wrongtype'], [J.obj([['a', J.nul()]]), 'wrongtype'],
      [J.obj([['a', J.str('\u0000')]]), null], [J.obj([['\ud800', J.str('x')]]), null],
      [J.obj([['a', J.str('1')], ['a', J.str('2')]]), null], [J.arr([]), 'wrongtype'],
      [J.str('x'), 'wrongtype']]),
  arrOf: (item, min = 0, max = 3) => arrShape(item, min, max),
  path: () => shape('path',
    (ctx) => J.str(ctx.rng.pick(['a.txt', 'dir/b.bin', 'x/y/z.md']) + ctx.rng.int(1000)),
    () => ['../a', 'a/../b', '/abs', '\\x', 'a\\b', 'C:\\x', 'C:/x', 'C:', 'a//b', 'a/./b', 'a/',
      '.', '..', '', 'a\u0000b', '\ud800', 'a:b', 'é'.repeat(2000)].map((s) => [J.str(s), null])
      .concat(wrongTypes('string'))),
  blobHashKey: (prefix) => shape('hashkey',
    (ctx) => J.str(prefix + ctx.rng.hex(64)),
    (ctx) => [[J.str(prefix + ctx.rng.hex(64).toUpperCase()), null],
      [J.str(prefix + ctx.rng.hex(63)), null], [J.str(prefix + ctx.rng.hex(65)), null],
      [J.str(prefix + '../' + ctx.rng.hex(61)), null], [J.str('other/sha256/' + ctx.rng.hex(64)), null],
      [J.str(prefix + ctx.rng.hex(63) + 'g'), null], [J.str(prefix + ctx.rng.hex(63) + '\ud800'), null],
      [J.str(''), null]].concat(wrongTypes('string'))),
};

// Any JSON value, sometimes with hostile content inside.
function anyJson(ctx, depth) {
  const r = ctx.rng;
  const k = r.int(depth > 0 ? 9 : 6);
  switch (k) {
    case 0: return J.nul();
    case 1: return J.bool(r.chance(0.5));
    case 2: return J.num(r.pick(['0', '-0', '1.5', '1e308', '1e-400', DIGITS33, '42']));
    case 3: return J.str(r.pick(['', 'x', '\u0000', '\ud800', 'é😀', 'a"b\\c']));
    case 4: return J.str('s' + r.int(100));
    case 5: return J.num(String(r.int(1000)));
    case 6: return J.arr(Array.from({ length: r.int(4) }, () => anyJson(ctx, depth - 1)));
    case 7: return J.obj(Array.from({ length: r.int(4) }, (_, i) => ['k' + r.int(3) + i, anyJson(ctx, depth - 1)]));
    default: return J.obj([['role', J.str('user')], ['content', J.str('hi ' + r.int(99))]]);
  }
}

// Hostile values for opaque JSON.
function hostileAny(ctx) {
  const r = ctx.rng;
  return [
    [J.deep(r.pick([100, 5000, 9000]), J.num('1')), null],
    [J.deep(r.pick([15000, 25000, 60000]), J.num('1')), 'deep'],
    [J.deep(r.pick([15000, 40000]), J.nul(), '{'), 'deep'],
    [J.str('\u0000\ud800'), null],
    [J.obj([['a', J.num('1')], ['a', J.num('2')]]), null],
    [J.num('1e-400'), null], [J.num(DIGITS33), null],
    [J.str('x'.repeat(r.pick([1000, 100000]))), null],
  ];
}

function objShape(fields, opts) {
  // fields: { name: { s: shape, req: bool } }
  const names = Object.keys(fields);
  return {
    type: 'object',
    fields,
    valid(ctx) {
      const entries = [];
      for (const n of names) {
        const f = fields[n];
        if (!f.req && ctx.rng.chance(0.4)) continue;
        entries.push([n, f.s.valid(ctx)]);
      }
      return J.obj(entries);
    },
    hostile(ctx) {
      const r = ctx.rng;
      const pick = r.int(6);
      if (pick === 0) return { tree: J.arr([this.valid(ctx)]), cls: 'wrongtype' };
      if (pick === 1) return { tree: J.str('{}'), cls: 'wrongtype' };
      if (pick === 2) return { tree: J.obj([]), cls: null };
      if (pick === 3) return { tree: J.nul(), cls: 'null' };
      if (pick === 4) return { tree: J.deep(r.pick([50, 20000]), J.obj([]), '{'), cls: null };
      return { tree: J.num('1'), cls: 'wrongtype' };
    },
    opts,
  };
}

function arrShape(item, min, max) {
  return {
    type: 'array',
    item,
    valid(ctx) {
      const n = ctx.rng.range(min, max);
      return J.arr(Array.from({ length: n }, () => item.valid(ctx)));
    },
    hostile(ctx) {
      const r = ctx.rng;
      const pick = r.int(6);
      if (pick === 0) return { tree: J.obj([]), cls: 'wrongtype' };
      if (pick === 1) return { tree: J.str('[]'), cls: 'wrongtype' };
      if (pick === 2) return { tree: J.arr([J.nul()]), cls: null };
      if (pick === 3) return { tree: J.arr([item.hostile(ctx).tree]), cls: null };
      if (pick === 4) return { tree: J.nul(), cls: 'null' };
      return { tree: J.arr(Array.from({ length: r.pick([50, 2000]) }, () => item.valid(ctx))), cls: null };
    },
  };
}

// Mutate a tree that follows `sh` in one place. Returns {tree, cls, where}.
function mutate(ctx, sh, tree) {
  const r = ctx.rng;
  if (sh.type === 'object' && tree.o && r.chance(0.85)) {
    const names = Object.keys(sh.fields);
    const entries = tree.o.slice();
    const op = r.int(8);
    if (op === 0 && entries.length) {                        // drop a key
      const i = r.int(entries.length);
      const [k] = entries.splice(i, 1);
      return { tree: J.obj(entries), cls: sh.fields[k[0]] && sh.fields[k[0]].req ? 'missing' : null, where: k[0] };
    }
    if (op === 1 && entries.length) {                        // repeat a key
      const i = r.int(entries.length);
      const k = entries[i][0];
      const other = sh.fields[k] ? (r.chance(0.5) ? sh.fields[k].s.valid(ctx) : sh.fields[k].s.hostile(ctx).tree) : J.nul();
      if (r.chance(0.5)) entries.push([k, other]); else entries.splice(i, 0, [k, other]);
      return { tree: J.obj(entries), cls: 'repeated', where: k };
    }
    if (op === 2) {                                          // unknown key
      const k = r.pick(['unknown', 'Status', 'status ', '__proto__', '', '\u0000', '\ud800', 'x'.repeat(3000)]);
      entries.splice(r.int(entries.length + 1), 0, [k, anyJson(ctx, 1)]);
      return { tree: J.obj(entries), cls: 'unknown', where: k };
    }
    if (op === 3) {                                          // key set to null
      const k = r.pick(names);
      const i = entries.findIndex(([n]) => n === k);
      const nv = J.nul();
      if (i >= 0) entries[i] = [k, nv]; else entries.push([k, nv]);
      return { tree: J.obj(entries), cls: null, where: k };
    }
    // replace one field, by a hostile value or a mutation of its own value
    const k = r.pick(names);
    const f = sh.fields[k];
    const i = entries.findIndex(([n]) => n === k);
    let sub;
    if (i >= 0 && (f.s.type === 'object' || f.s.type === 'array') && r.chance(0.6)) {
      sub = mutate(ctx, f.s, entries[i][1]);
      sub.where = k + '.' + (sub.where || '');
      sub.nested = true;
    } else {
      const h = f.s.hostile(ctx);
      sub = { tree: h.tree, cls: h.cls, where: k, ftype: f.s.type, added: i < 0 };
    }
    if (i >= 0) entries[i] = [k, sub.tree]; else entries.push([k, sub.tree]);
    return { tree: J.obj(entries), cls: sub.cls, where: sub.where, ftype: sub.ftype, nested: sub.nested, added: sub.added };
  }
  if (sh.type === 'array' && tree.a && tree.a.length && r.chance(0.8)) {
    const items = tree.a.slice();
    const i = r.int(items.length);
    const op = r.int(3);
    if (op === 0) { items.push(items[i]); return { tree: J.arr(items), cls: 'dupitem', where: '[]' }; }
    const sub = mutate(ctx, sh.item, items[i]);
    items[i] = sub.tree;
    return { tree: J.arr(items), cls: sub.cls, where: '[' + i + '].' + (sub.where || ''), ftype: sub.ftype, nested: true };
  }
  const h = sh.hostile(ctx);
  return { tree: h.tree, cls: h.cls, where: '', ftype: sh.type };
}

module.exports = { randomText, S, mutate, anyJson, hostileAny, hostileIdStrings, INT_HOSTILE, DIGITS33, fromJs };
