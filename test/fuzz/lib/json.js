'use strict';
// JSON values as a small tree, so the fuzzer can write what JSON.stringify
// never would: repeated keys, raw number literals (1e-400, -0, 33 digits),
// lone surrogate escapes, nesting deeper than the server's JSON parser takes.

const J = {
  obj: (entries) => ({ o: entries }),            // [[key, value], ...], keys may repeat
  arr: (items) => ({ a: items }),
  num: (raw) => ({ n: String(raw) }),              // raw literal text
  str: (s) => ({ s }),                             // JS string (lone surrogates kept)
  bool: (b) => ({ b: !!b }),
  nul: () => ({ z: 1 }),
  deep: (depth, leaf, open = '[') => ({ d: depth, leaf, open }),
  raw: (text) => ({ r: text }),                    // verbatim text (may be malformed)
};

// Plain JS value -> tree.
function fromJs(v) {
  if (v === null || v === undefined) return J.nul();
  if (typeof v === 'boolean') return J.bool(v);
  if (typeof v === 'number') return J.num(String(v));
  if (typeof v === 'string') return J.str(v);
  if (Array.isArray(v)) return J.arr(v.map(fromJs));
  if (typeof v === 'object' && (v.o || v.a || v.n !== undefined || v.s !== undefined || v.b !== undefined || v.z || v.d || v.r !== undefined)) return v;
  return J.obj(Object.entries(v).map(([k, x]) => [k, fromJs(x)]));
}

// Tree -> JSON text. JSON.stringify escapes U+0000 and lone surrogates as \uXXXX.
function render(t) {
  if (t.o) return '{' + t.o.map(([k, v]) => JSON.stringify(k) + ':' + render(v)).join(',') + '}';
  if (t.a) return '[' + t.a.map(render).join(',') + ']';
  if (t.n !== undefined) return t.n;
  if (t.s !== undefined) return JSON.stringify(t.s);
  if (t.b !== undefined) return t.b ? 'true' : 'false';
  if (t.z) return 'null';
  if (t.d) {
    const close = t.open === '[' ? ']' : '}';
    if (t.open === '[') return '['.repeat(t.d) + render(t.leaf) + close.repeat(t.d);
    return '{"k":'.repeat(t.d) + render(t.leaf) + close.repeat(t.d);
  }
  if (t.r !== undefined) return t.r;
  throw new Error('bad json tree');
}

// Deepest nesting in a tree (to decide whether json_in could parse it).
function maxDepth(t) {
  if (t.o) return 1 + Math.max(0, ...t.o.map(([, v]) => maxDepth(v)));
  if (t.a) return 1 + Math.max(0, ...t.a.map(maxDepth));
  if (t.d) return t.d + maxDepth(t.leaf);
  return 0;
}

function hasRaw(t) {
  if (t.o) return t.o.some(([, v]) => hasRaw(v));
  if (t.a) return t.a.some(hasRaw);
  if (t.d) return hasRaw(t.leaf);
  return t.r !== undefined;
}

module.exports = { J, fromJs, render, maxDepth, hasRaw };
