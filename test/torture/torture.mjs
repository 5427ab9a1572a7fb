// Torture run for sandbox_persist: concurrent clients issue a random mix of
// every store's writes against a few hot threads and keys, every call is
// logged, and an invariant checker (SQL over the tables plus the call log)
// runs after the load and after every crash restart.
//
//   node torture.mjs --short        load, check, self-test (no crash cycles)
//   node torture.mjs --long         longer load with kill -9 crash cycles
//   node torture.mjs --self-test    a 3 s load, then the self-test: corrupt the database and the
//                                   call log on purpose and require each check to report it, and
//                                   require call logs that break nothing to pass
//   node torture.mjs --pitr         the point-in-time recovery run of test/pitr/run.sh (pitrMain):
//                                   load, a restore target halfway, restore, the checks there
//   node torture.mjs --failover     failovers of a replicated cluster instead of crash restarts
//                                   (test/ha drives it: see "Failover mode" below)
//
// Options: --seed N (the random mix; timing still varies), --clients N,
// --load-ms N, --cycles N. The cluster is the one named by
// PGHOST/PGPORT/PGUSER/PGDATABASE; crash mode also needs SP_CLUSTER_DIR (data
// dir $SP_CLUSTER_DIR/data; pg_ctl from $(pg_config --bindir), PG_CONFIG
// honoured). A private database (sp_torture, or $SP_TORTURE_DB) is created
// and dropped at the end. SP_TORTURE_SYNCHRONOUS_COMMIT=off runs the crash
// cycles without synchronous commit, which shows that the checker notices
// lost acknowledged commits; SP_TORTURE_DEBUG=1 prints every error.
//
// Expected contract errors (per operation, EXPECTED_BY_OP) are counted; any
// other error, or a lost connection outside a planned crash, is a failure.
// Calls in flight at a planned crash may or may not have committed, and the
// checks accept both outcomes for them.

import pg from 'pg';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync, execFile } from 'node:child_process';

// json and jsonb arrive as text, so chunks and payloads compare byte-exact.
pg.types.setTypeParser(114, (v) => v);
pg.types.setTypeParser(3802, (v) => v);

const argv = process.argv.slice(2);
const MODE = argv.includes('--pitr') ? 'pitr' : argv.includes('--failover') ? 'failover' : argv.includes('--long') ? 'long' : argv.includes('--short') ? 'short' : 'self-test';
const SELF_TEST = MODE === 'short' || argv.includes('--self-test');
const numArg = (name, dflt) => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const CLIENTS = numArg('--clients', 6);
const LOAD_MS = numArg('--load-ms', MODE === 'long' ? 60000 : MODE === 'short' ? 20000 : MODE === 'pitr' ? 12000 : MODE === 'failover' ? 5000 : 3000);
// In failover mode: --cycles kill -9 failovers, then --switchovers planned ones.
const SWITCHOVERS = MODE === 'failover' ? numArg('--switchovers', 1) : 0;
const CYCLES = numArg('--cycles', MODE === 'long' ? 6 : MODE === 'failover' ? 5 : 0) + SWITCHOVERS;
const SEED = numArg('--seed', Date.now() % 1000000);
const DB = process.env.SP_TORTURE_DB || 'sp_torture';
const ADMIN_DB = process.env.PGDATABASE || 'postgres';

// ---------------------------------------------------------------------------
// Deterministic randomness (seeded), so a failing run can be repeated.
// ---------------------------------------------------------------------------
let rngState = SEED >>> 0 || 1;
function rnd() {
  rngState ^= rngState << 13; rngState >>>= 0;
  rngState ^= rngState >>> 17;
  rngState ^= rngState << 5; rngState >>>= 0;
  return rngState / 4294967296;
}
const ri = (n) => Math.floor(rnd() * n);
const pick = (a) => a[ri(a.length)];
const chance = (p) => rnd() < p;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sha = (buf) => crypto.createHash('sha256').update(buf).digest('hex');

// ---------------------------------------------------------------------------
// Clocks. Leases, locks, blob puts, uploads and maintain() use one virtual
// clock, strictly increasing in send order and running SPEED times faster
// than real time, so leases of a few virtual seconds expire while other calls
// are in flight, and the shortest GC grace and upload expiry (60 s) pass in
// 3 s of real time; occasional jumps expire every lease at once. maintain()
// also purges expired lock rows (lock_purge_after = 0) on the same clock.
// ---------------------------------------------------------------------------
const SPEED = 20;
const WRITER_LEASE_MS = 3000;   // virtual: 150 ms real
const LOCK_TTL_MS = 1000;       // virtual: 50 ms real (the smallest allowed TTL)
const GC_GRACE_S = 60;          // the smallest blob_gc_grace and upload_expiry: 3 s real
const vbase = Date.now();
let vlast = 0;
let vskew = 0;
function vnow() {
  vlast = Math.max(vlast + 1, vpeek());
  return vlast;
}
// The virtual time now, without advancing it: every later vnow() is larger.
function vpeek() {
  return Math.max(vlast, Math.round(vbase + (Date.now() - vbase) * SPEED) + vskew);
}

// ---------------------------------------------------------------------------
// The call log. Every call gets a send tick and, when answered, an answer
// tick from one in-process counter, so "answered before sent" is real-time
// precedence. st: ok | exp (expected contract error) | fail | indet (in
// flight at a planned crash: it may or may not have committed).
// ---------------------------------------------------------------------------
const log = [];
let tick = 0;
let crashing = false;
const stats = { ops: 0, acked: 0, expected: 0, indet: 0, failures: [], codes: {} };
let logFile = null;
let logPath = null;
// Contract errors each call may meet under this load. Anything else (SP008
// from a fork would mean inconsistent reference rows, SP003 a reused id, any
// XX000) is a failure.
// SP501 LEASE_ROW_BUSY: an acquire or renew that waited lease_row_wait for a row an
// append under this load held; it changed nothing and is retryable, like 55P03.
const EXPECTED_ANY = ['55P03', '40001', '40P01', 'SP501'];
const EXPECTED_BY_OP = {
  'ckpt.acquire': ['SP005'],
  'ckpt.renew': ['SP006'],
  'ckpt.append': ['SP001', 'SP002', 'SP006'],
  // a delta append whose prefix claim is false on purpose: refused, never stored
  'ckpt.append_false_claim': ['SP001', 'SP002', 'SP006', 'SP016'],
  'ckpt.delete_head': ['SP004', 'SP006'],
  'ckpt.fork': ['SP006', 'SP009', 'SP011'],
  'event.append_conflict': ['SP403'],
  'blob.put_bad_hash': ['SP301'],
  'blob.upload_append': ['SP302', 'SP303'],
  'blob.upload_commit': ['SP302'],
};
// After a failover that lost commits (--replication async), a reader whose
// resume token the new primary cannot vouch for is refused with SP405
// EVENT_LOG_OFFSET_DIVERGED (SP401 when the whole log was lost), never given
// another stream (docs/contract/failover.md §2); it starts over from offset 0.
const isExpected = (op, code) => EXPECTED_ANY.includes(code) || (EXPECTED_BY_OP[op] || []).includes(code)
  || (ASYNC && op === 'event.read' && (code === 'SP405' || code === 'SP401'));
// (25006: a server that went read-only under the caller, a demoted primary in failover mode)
const CONNECTION_LOST = /^(57P01|57P02|57P03|25006|08\w{3}|ECONNRESET|EPIPE|ECONNREFUSED|ENOENT)$/;

class CrashStop extends Error {}

// Run one logged call on a client; returns the log entry.
async function call(cl, op, sql, params, meta = {}, extra = null) {
  const e = { i: log.length, c: cl.id, op, meta, s: ++tick, ts: Date.now(), st: 'sent' };
  log.push(e);
  stats.ops++;
  cl.inflight = e;
  cl.lastCall = e;
  try {
    const r = await cl.db.query(sql, params);
    e.a = ++tick;
    e.ta = Date.now();
    e.va = vpeek();
    e.st = 'ok';
    e.res = r.rows[0] ? r.rows[0].r : undefined;
    if (extra && r.rows[0]) e.extra = extra(r.rows[0]);
    stats.acked++;
    if (logFile) fs.writeSync(logFile, JSON.stringify({ ...e, extra: undefined, meta: summarise(e.meta) }) + '\n');
    return e;
  } catch (err) {
    e.a = ++tick;
    e.ta = Date.now();
    e.code = err.code || err.errno || 'none';
    if (err.code && isExpected(op, err.code)) {
      e.st = 'exp';
      stats.expected++;
      stats.codes[err.code] = (stats.codes[err.code] || 0) + 1;
      return e;
    }
    const lost = !err.code || CONNECTION_LOST.test(err.code);
    if (process.env.SP_TORTURE_DEBUG) console.log(`debug: ${op} crashing=${crashing} code=${err.code} ${err.message}`);
    if (crashing && lost) {
      e.st = 'indet';
      stats.indet++;
      throw new CrashStop();
    }
    e.st = 'fail';
    e.msg = err.message;
    stats.failures.push(`${op} [${e.code}] ${err.message}${err.detail ? ' / ' + err.detail : ''}`);
    if (lost) throw new CrashStop();
    return e;
  } finally {
    cl.inflight = null;
  }
}
const summarise = (m) => JSON.parse(JSON.stringify(m, (k, v) => (Buffer.isBuffer(v) ? `<${v.length} bytes>` : v)));
const parsed = (e) => (e.res === null || e.res === undefined ? e.res : JSON.parse(e.res));

// ---------------------------------------------------------------------------
// The load.
// ---------------------------------------------------------------------------
const THREADS = ['th-0', 'th-1', 'th-2'];
const LOCK_KEYS = ['lk-0', 'lk-1', 'lk-2'];
const EVENT_LOGS = ['ev-0', 'ev-1', 'ev-2'];
const RUNS = ['run-0', 'run-1', 'run-2', 'run-3'];
const POOL = Array.from({ length: 8 }, (_, i) => {
  const body = Buffer.from(`pool content ${i} `.repeat(1 + i * 300));
  return { body, key: `sandbox-files/sha256/${sha(body)}` };
});
const HOT_BLOBS = ['app/hot-0', 'app/hot-1'];
const INTERRUPTS = [];   // ids created by any client, shared for resolve/cancel
let uniq = 0;

function appBody(c, n) {
  const size = pick([0, 1, 100, 5000, 20000, 70000]);
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (c * 31 + n * 7 + (i % 251)) & 0xff;
  return b;
}

const S = 'sandbox_persist.';
const writerOf = (w) => JSON.stringify({ threadId: w.threadId, ownerToken: w.ownerToken, fence: w.fence });

async function acquireWriter(cl, thread) {
  const vt = vnow();
  const e = await call(cl, 'ckpt.acquire', `SELECT ${S}checkpoint_acquire_writer($1, $2, $3) AS r`,
    [thread, WRITER_LEASE_MS, vt], { thread, vt });
  if (e.st === 'ok') {
    const w = parsed(e);
    e.meta.fence = w.fence;
    e.meta.exp = w.expiresAt;
    cl.writers[thread] = w;
  }
  return e;
}

async function opCheckpointAppend(cl) {
  const thread = pick(THREADS);
  if (!cl.writers[thread] || chance(0.15)) await acquireWriter(cl, thread);
  const w = cl.writers[thread];
  if (!w) return;
  const h = await call(cl, 'ckpt.get_head', `SELECT ${S}checkpoint_get_head($1) AS r`, [thread]);
  if (h.st !== 'ok') return;
  let head = h.res ?? null;
  if (chance(0.05)) head = cl.lastHead[thread] ?? null;     // a stale expected head
  cl.lastHead[thread] = h.res ?? null;
  const keys = [];
  const nkeys = ri(3);
  for (let i = 0; i < nkeys; i++) keys.push(pick(POOL));
  // Capture: put the blobs right before the append that references them.
  let putSend = Infinity;
  for (const p of keys) {
    const ts = vnow();
    const e = await call(cl, 'blob.put_pool', `SELECT ${S}blob_put($1, $2, NULL, $3) AS r`, [p.key, p.body, ts], { key: p.key });
    if (e.st !== 'ok') return;
    putSend = Math.min(putSend, ts);
  }
  const id = `cp-${cl.id}-${++cl.n}`;
  const files = keys.map((p, i) => ({ path: `dir/f${i}`, kind: 'file', blobKey: p.key, size: p.body.length }));
  if (chance(0.3)) files.push({ path: 'empty', kind: 'dir' });
  let parent = head;
  if (chance(0.03)) parent = head === null ? 'nope' : null;     // PARENT_MISMATCH
  const checkpoint = { id, threadId: thread, parentCheckpointId: parent, createdAt: Date.now() + uniq++ / 1000,
    reason: 'automatic', files, artifacts: [] };
  // Most appends extend the conversation this client last appended on the
  // thread when that checkpoint is still the head; half of those are delta
  // appends (only the new message, with a claim about the parent's), and a
  // few of them carry a false claim that must be refused (SP016).
  const reply = JSON.stringify({ role: 'assistant', content: `reply ${id}` });
  const prev = cl.convOf[thread];
  let msgs = [JSON.stringify({ role: 'user', content: 'shared opening' }), reply];
  let claim = null;
  if (prev && head !== null && prev.id === head && chance(0.7)) {
    msgs = [...prev.msgs.slice(-30), reply];
    if (msgs.length === prev.msgs.length + 1 && chance(0.5)) claim = { len: prev.msgs.length, digest: chainDigest(prev.msgs) };
  }
  const conversation = `[${msgs.join(',')}]`;
  const input = JSON.stringify({ checkpoint, expectedHeadId: head, writer: JSON.parse(writerOf(w)) });
  const meta = { thread, id, fence: w.fence, vt: 0, keys: keys.map((p) => p.key), putSend, files: JSON.stringify(files), parent, conversation, delta: claim !== null };
  if (claim !== null && chance(0.1)) {
    const bad = chance(0.5) ? { len: claim.len - 1, digest: claim.digest } : { len: claim.len, digest: chainDigest([...prev.msgs.slice(1), reply]) };
    const fid = `${id}-false`;
    const fvt = vnow();
    const e = await call(cl, 'ckpt.append_false_claim', `SELECT ${S}checkpoint_append_delta($1, $2, $3, $4, $5) AS r`,
      [input.replace(JSON.stringify(id), JSON.stringify(fid)), `[${reply}]`, bad.len, bad.digest, fvt], { thread, id: fid, vt: fvt });
    if (e.st === 'ok') stats.failures.push(`delta append ${fid} with a false claim was accepted`);
  }
  const vt = vnow();
  meta.vt = vt;
  const e = claim === null
    ? await call(cl, 'ckpt.append', `SELECT ${S}checkpoint_append($1, $2, $3) AS r`, [input, conversation, vt], meta)
    : await call(cl, 'ckpt.append', `SELECT ${S}checkpoint_append_delta($1, $2, $3, $4, $5) AS r`,
      [input, `[${reply}]`, claim.len, claim.digest, vt], meta);
  if (e.st === 'ok') cl.convOf[thread] = { id, msgs };
}

// The digest of a conversation given as its messages' texts
// (docs/contract/checkpoint-store.md §6): d0 = sha256(''), di = sha256(d(i-1) || sha256(text i)).
function chainDigest(texts) {
  let d = crypto.createHash('sha256').digest();
  for (const t of texts) d = crypto.createHash('sha256').update(d).update(crypto.createHash('sha256').update(t, 'utf8').digest()).digest();
  return d;
}

async function opCheckpointDeleteHead(cl) {
  const thread = pick(THREADS);
  const w = cl.writers[thread];
  if (!w) return acquireWriter(cl, thread);
  const h = await call(cl, 'ckpt.get_head', `SELECT ${S}checkpoint_get_head($1) AS r`, [thread]);
  if (h.st !== 'ok' || h.res === null) return;
  const vt = vnow();
  await call(cl, 'ckpt.delete_head', `SELECT ${S}checkpoint_delete_head($1, $2) AS r`,
    [JSON.stringify({ threadId: thread, checkpointId: h.res, writer: JSON.parse(writerOf(w)) }), vt],
    { thread, id: h.res, fence: w.fence, vt });
}

async function opCheckpointLease(cl) {
  const thread = pick(THREADS);
  const w = cl.writers[thread];
  const r = rnd();
  if (!w || r < 0.35) return acquireWriter(cl, thread);
  if (r < 0.8) {
    const vt = vnow();
    const e = await call(cl, 'ckpt.renew', `SELECT ${S}checkpoint_renew_writer($1, $2, $3) AS r`,
      [writerOf(w), WRITER_LEASE_MS, vt], { thread, fence: w.fence, vt, exp: vt + WRITER_LEASE_MS });
    return e;
  }
  const e = await call(cl, 'ckpt.release', `SELECT ${S}checkpoint_release_writer($1) AS r`,
    [writerOf(w)], { thread, fence: w.fence });
  if (e.st === 'ok' && chance(0.5)) delete cl.writers[thread];
  return e;
}

async function opFork(cl) {
  const source = pick(THREADS);
  const h = await call(cl, 'ckpt.get_head', `SELECT ${S}checkpoint_get_head($1) AS r`, [source]);
  if (h.st !== 'ok' || h.res === null) return;
  const dest = `fk-${cl.id}-${++cl.n}`;
  const a = await acquireWriter(cl, dest);
  if (a.st !== 'ok') return;
  const w = cl.writers[dest];
  const id = `fkcp-${cl.id}-${cl.n}`;
  const vt = vnow();
  await call(cl, 'ckpt.fork', `SELECT ${S}checkpoint_fork_from_checkpoint($1, $2) AS r`,
    [JSON.stringify({ sourceThreadId: source, sourceCheckpointId: h.res, destinationThreadId: dest,
      destinationCheckpointId: id, createdAt: Date.now(), writer: JSON.parse(writerOf(w)) }), vt],
    { thread: dest, id, fence: w.fence, vt, source: h.res });
  if (chance(0.5)) {
    // a second fork into the same destination must find it not empty (SP011)
    await call(cl, 'ckpt.fork', `SELECT ${S}checkpoint_fork_from_checkpoint($1, $2) AS r`,
      [JSON.stringify({ sourceThreadId: source, sourceCheckpointId: h.res, destinationThreadId: dest,
        destinationCheckpointId: id + '-again', createdAt: Date.now(), writer: JSON.parse(writerOf(w)) }), vnow()],
      { thread: dest, id: id + '-again', fence: w.fence, vt: vlast, source: h.res });
  }
  delete cl.writers[dest];
}

async function opBlob(cl) {
  const r = rnd();
  if (r < 0.45) {
    const own = chance(0.6);
    const key = own ? `app/own-${cl.id}-${ri(2)}` : pick(HOT_BLOBS);
    const body = appBody(cl.id, ++cl.n);
    const opts = chance(0.3) ? JSON.stringify({ contentType: 'application/octet-stream', customMetadata: { n: String(cl.n) } }) : null;
    return call(cl, 'blob.put', `SELECT ${S}blob_put($1, $2, $3, $4) AS r`, [key, body, opts, vnow()],
      { key, hash: sha(body), size: body.length });
  }
  if (r < 0.7) {
    const key = chance(0.6) ? `app/own-${cl.id}-${ri(2)}` : pick(HOT_BLOBS);
    return call(cl, 'blob.delete', `SELECT ${S}blob_delete($1) AS r`, [key], { key });
  }
  if (r < 0.9) {
    // garbage: a content-addressed blob nothing references, for maintain() to collect
    const body = Buffer.from(`garbage ${cl.id} ${++cl.n} ${rnd()}`);
    const key = `sandbox-files/sha256/${sha(body)}`;
    return call(cl, 'blob.put_garbage', `SELECT ${S}blob_put($1, $2, NULL, $3) AS r`, [key, body, vnow()], { key, hash: sha(body) });
  }
  const p = pick(POOL);
  if (chance(0.2)) {
    // bytes that do not hash to the content address: SP301, the stored object intact
    return call(cl, 'blob.put_bad_hash', `SELECT ${S}blob_put($1, $2, NULL, $3) AS r`, [p.key, Buffer.from('not it'), vnow()], { key: p.key });
  }
  return call(cl, 'blob.head', `SELECT ${S}blob_head($1, $2) AS r`, [p.key, vnow()], { key: p.key });
}

// A streamed upload to an owned key: begin, append in pieces (sometimes at a
// wrong offset: SP303), then commit or abort. maintain() removes uploads idle
// for the effective expiry, so a stalled uploader may meet SP302.
async function opUpload(cl) {
  const key = `app/own-${cl.id}-${ri(2)}`;
  const body = appBody(cl.id, ++cl.n);
  const b = await call(cl, 'blob.upload_begin', `SELECT ${S}blob_upload_begin($1, NULL, $2) AS r`, [key, vnow()], { key });
  if (b.st !== 'ok') return;
  const id = b.res;
  const cuts = [0, ...Array.from({ length: ri(3) }, () => ri(body.length + 1)).sort((x, y) => x - y), body.length];
  for (let i = 0; i + 1 < cuts.length; i++) {
    if (cuts[i] === cuts[i + 1] && body.length > 0) continue;
    const at = chance(0.05) ? cuts[i] + 1 : cuts[i];
    const e = await call(cl, 'blob.upload_append', `SELECT ${S}blob_upload_append($1, $2, $3, $4) AS r`,
      [id, at, body.subarray(cuts[i], cuts[i + 1]), vnow()], { key, at });
    if (e.st !== 'ok' && e.code !== 'SP303') return;
    if (e.st !== 'ok') i--;   // retry at the right offset
    else if (chance(0.3) && Date.now() % 7 === 0) await sleep(ri(50));
  }
  if (chance(0.1)) return;   // abandoned: maintain() removes it
  if (chance(0.15)) return call(cl, 'blob.upload_abort', `SELECT ${S}blob_upload_abort($1) AS r`, [id], { key });
  return call(cl, 'blob.upload_commit', `SELECT ${S}blob_upload_commit($1, $2) AS r`, [id, vnow()],
    { key, hash: sha(body), size: body.length });
}

async function opMaintain(cl) {
  const now = vnow();
  const e = await call(cl, 'maintain', `SELECT ${S}maintain($1, $2) AS r`, [pick([5, 50, 500]), now], { now });
  if (e.st === 'ok') {
    const s = parsed(e);
    for (const [k, v] of Object.entries(s)) if (typeof v === 'number') stats.maint[k] = (stats.maint[k] || 0) + v;
  }
  return e;
}

async function opRun(cl) {
  const run = pick(RUNS);
  const r = rnd();
  if (r < 0.2) {
    return call(cl, 'run.create', `SELECT ${S}run_create_or_resume($1) AS r`,
      [JSON.stringify({ runId: run, threadId: `rth-${run}`, startedAt: Date.now() })], { run });
  }
  if (r < 0.55) {
    const patch = pick([
      { status: 'running' }, { status: 'running' }, { status: 'interrupted' },
      { status: 'completed', finishedAt: Date.now() }, { detachedSince: Date.now(), sandboxKey: `sb-${run}` },
      { cancelRequested: true }, { usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 } },
    ]);
    return call(cl, 'run.update', `SELECT ${S}run_update($1, $2) AS r`, [run, JSON.stringify(patch)], { run, patch });
  }
  const e = await call(cl, 'run.claim', `SELECT ${S}run_claim($1) AS r`, [run], { run });
  if (e.st === 'ok') {
    const o = parsed(e);
    e.meta.outcome = o.outcome;
    e.meta.epoch = o.epoch;
  }
  return e;
}

async function opLock(cl) {
  const key = pick(LOCK_KEYS);
  const held = cl.locks[key];
  const r = rnd();
  if (!held || r < 0.4) {
    const vt = vnow();
    const e = await call(cl, 'lock.acquire', `SELECT ${S}lock_acquire($1, $2, $3) AS r`, [key, LOCK_TTL_MS, vt], { key, vt });
    if (e.st === 'ok' && e.res !== null) {
      const l = parsed(e);
      e.meta.fence = l.fence;
      e.meta.exp = l.expiresAt;
      e.meta.token = l.ownerToken;
      cl.locks[key] = { ...l, key };
    }
    return e;
  }
  if (r < 0.5) {
    // renew every lease this client holds in one statement
    const held = Object.values(cl.locks);
    const vt = vnow();
    const e = await call(cl, 'lock.renew_many', `SELECT ${S}lock_renew_many($1, $2, $3) AS r`,
      [JSON.stringify(held.map((l) => ({ key: l.key, ownerToken: l.ownerToken }))), LOCK_TTL_MS, vt],
      { leases: held.map((l) => ({ key: l.key, fence: l.fence })), vt, exp: vt + LOCK_TTL_MS });
    if (e.st === 'ok') {
      const out = parsed(e);
      const asked = held.map((l) => l.key).sort();
      const answered = [...out.renewed.map((x) => x.key), ...out.lost].sort();
      if (JSON.stringify(asked) !== JSON.stringify(answered)) stats.failures.push(`lock_renew_many answered ${e.res} for ${asked}`);
    }
    return e;
  }
  if (r < 0.75) {
    const vt = vnow();
    const e = await call(cl, 'lock.renew', `SELECT ${S}lock_renew($1, $2, $3, $4) AS r`,
      [key, held.ownerToken, LOCK_TTL_MS, vt], { key, fence: held.fence, vt, exp: vt + LOCK_TTL_MS });
    if (e.st === 'ok' && e.res !== null) e.meta.renewed = true;
    return e;
  }
  const e = await call(cl, 'lock.release', `SELECT ${S}lock_release($1, $2) AS r`, [key, held.ownerToken], { key, fence: held.fence });
  delete cl.locks[key];
  return e;
}

// A short critical section on one hot key with a long TTL: acquire, then
// release at once. Every grant is then ordered by the releases alone, so any
// two grants whose fences are out of grant order show up in lock_fences.
async function opLockChurn(cl) {
  const key = 'lk-hot';
  const vt = vnow();
  const e = await call(cl, 'lock.acquire', `SELECT ${S}lock_acquire($1, $2, $3) AS r`, [key, 60000, vt], { key, vt });
  if (e.st !== 'ok' || e.res === null) return e;
  const l = parsed(e);
  e.meta.fence = l.fence;
  e.meta.exp = l.expiresAt;
  return call(cl, 'lock.release', `SELECT ${S}lock_release($1, $2) AS r`, [key, l.ownerToken], { key, fence: l.fence });
}

// The chunks of append pseq of a client: unique per client, append and index
// (the checks find them by u), with text that JSON escapes.
const eventChunks = (cl, pseq, n) =>
  JSON.stringify(Array.from({ length: n }, (_, i) => ({ type: 'TEXT', u: `${cl.producer}:${pseq}:${i}`, t: '\u00e9\\u0000' })));

async function eventAppend(cl, run, chunks, pseq, prev) {
  const opts = JSON.stringify({ producerId: cl.producer, producerSeq: pseq });
  const e = await call(cl, 'event.append', `SELECT ${S}event_log_append($1, $2, $3) AS r`,
    [run, chunks, opts], { run, chunks, producer: cl.producer, pseq, retryOf: prev ? prev.i : undefined });
  if (e.st === 'ok') e.meta.seqs = parsed(e);
  return e;
}

async function opEventLog(cl) {
  const r = rnd();
  const last = cl.lastAppend;
  if (last && r < 0.2) return eventAppend(cl, last.meta.run, last.meta.chunks, last.meta.pseq, last);   // producer retry
  if (last && last.st === 'ok' && r < 0.23) {
    // the same (producerId, producerSeq) with another chunk count: SP403
    const more = JSON.stringify([...JSON.parse(last.meta.chunks), { u: `conflict:${cl.producer}:${last.meta.pseq}` }]);
    return call(cl, 'event.append_conflict', `SELECT ${S}event_log_append($1, $2, $3) AS r`,
      [last.meta.run, more, JSON.stringify({ producerId: cl.producer, producerSeq: last.meta.pseq })], { run: last.meta.run });
  }
  if (r < 0.25) {
    const run = pick(EVENT_LOGS);
    return call(cl, 'event.close', `SELECT ${S}event_log_close($1) AS r`, [run], { run });
  }
  const run = pick(EVENT_LOGS);
  const pseq = ++cl.pseq;
  const n = 1 + ri(3);
  const e = await eventAppend(cl, run, eventChunks(cl, pseq, n), pseq, null);
  if (e.st === 'ok') cl.lastAppend = e;
  return e;
}

// Micro-batched streams, as the adapter's microBatchMs sends them: appends to
// two or three logs in one statement and one transaction (run ids sorted, so
// two batches lock logs in one order). Each part is logged as an event.append
// of its own, with the batch's ticks and outcome, so every append check
// (offsets, idempotent retries, losses) covers it; a batch cut by a crash
// leaves each part indeterminate.
const APPEND_BATCH = `SELECT json_agg(${S}event_log_append(p.run_id, p.chunks, p.options) ORDER BY p.n) AS r
  FROM unnest($1::text[], $2::json[], $3::json[]) WITH ORDINALITY AS p(run_id, chunks, options, n)`;
async function opEventBatch(cl) {
  const runs = EVENT_LOGS.filter(() => chance(0.7)).sort();
  if (runs.length < 2) runs.splice(0, runs.length, ...EVENT_LOGS.slice(0, 2));
  const parts = runs.map((run) => {
    const pseq = ++cl.pseq;
    return { run, pseq, chunks: eventChunks(cl, pseq, 1 + ri(2)), opts: JSON.stringify({ producerId: cl.producer, producerSeq: pseq }) };
  });
  let e;
  try {
    e = await call(cl, 'event.append_batch', APPEND_BATCH,
      [runs, parts.map((p) => p.chunks), parts.map((p) => p.opts)], { runs });
  } finally {
    const batch = e ?? cl.lastCall;
    const seqs = batch.st === 'ok' ? parsed(batch) : null;
    parts.forEach((p, k) => log.push({ ...batch, i: log.length, op: 'event.append',
      meta: { run: p.run, chunks: p.chunks, producer: cl.producer, pseq: p.pseq, batch: batch.i, seqs: seqs ? seqs[k] : undefined } }));
  }
  return e;
}

// A reader follows a log from its resume token (seq and the digest of the
// entry at it), as the adapter does, with event_log_read_verified: every read
// must continue exactly where the last one stopped (commit order = offset
// order, so no later offset is visible before an earlier one), an offset,
// once seen, always holds the same chunk, and every entry's digest must
// continue the chain of the chunks this reader received itself (recomputed
// here from their text): the same stream, never another one. In asynchronous
// mode a read the server cannot vouch for is SP405 (SP401: the log itself was
// lost); the reader then starts over from 0, as a new stream, and only its own
// chunks are compared (another reader may have followed the lost stream).
const ZERO_DIGEST = '0000000000000000';
const seenChunks = new Map();
const readerViolations = [];
async function opEventRead(cl) {
  const run = pick(EVENT_LOGS);
  const cur = cl.cursors[run] ?? { seq: 0, digest: ZERO_DIGEST };
  const e = await call(cl, 'event.read',
    `SELECT r, ARRAY(SELECT x->>'chunk' FROM json_array_elements(r->'entries') x) AS texts
       FROM ${S}event_log_read_verified($1, $2, $3, $4) AS r`,
    [run, cur.seq, cur.digest, 1 + ri(50)], { run, after: cur.seq, digest: cur.digest }, (row) => row.texts);
  if (e.st === 'ok') {
    const out = parsed(e);
    followRead(cl, run, cur.seq, out);
    followDigests(cl, run, cur, out, e.extra);
    e.res = undefined;   // the log keeps what the checks need, not every chunk read
    e.extra = undefined;
  } else if (e.st === 'exp' && (e.code === 'SP405' || e.code === 'SP401')) {
    e.meta.diverged = true;
    delete cl.cursors[run];
    if (cl.seen) for (const k of [...cl.seen.keys()]) if (k.startsWith(`${run}/`)) cl.seen.delete(k);
  }
  return e;
}
// Check one read result against the cursor and what earlier reads saw
// (every reader's reads in synchronous mode, this reader's own in asynchronous).
function followRead(cl, run, after, out) {
  const seen = ASYNC ? (cl.seen ||= new Map()) : seenChunks;
  let next = after + 1;
  for (const { seq, chunk } of out.entries) {
    if (seq !== next) readerViolations.push(`log ${run}: read after ${after} gave offset ${seq} where ${next} was due`);
    next = seq + 1;
    const k = `${run}/${seq}`;
    const text = JSON.stringify(chunk);
    if (seen.has(k) && seen.get(k) !== text) readerViolations.push(`log ${run}: offset ${seq} changed`);
    seen.set(k, text);
  }
  if (out.tail < next - 1) readerViolations.push(`log ${run}: tail ${out.tail} below offset ${next - 1} in the same read`);
  if (out.entries.length > 0) cl.cursors[run] = { seq: next - 1, digest: out.entries[out.entries.length - 1].digest };
}
// The 64-bit hash of one entry (docs/contract/failover.md §2), computed here.
function entryHash(seq, text) {
  const be = Buffer.alloc(8);
  be.writeBigInt64BE(BigInt(seq));
  return crypto.createHash('sha256').update(be).update(Buffer.from(text, 'utf8')).digest().readBigUInt64BE(0);
}
// The entries of one verified read must continue the reader's own chain:
// digest(seq) = digest(seq - 1) XOR hash(seq, chunk), from the token it sent.
function followDigests(cl, run, cur, out, texts) {
  let d = BigInt('0x' + cur.digest);
  for (const [i, en] of out.entries.entries()) {
    d ^= entryHash(en.seq, texts[i]);
    if (d !== BigInt('0x' + en.digest)) {
      readerViolations.push(`log ${run}: entry ${en.seq}, read after ${cur.seq}, has digest ${en.digest} where this reader's`
        + ` stream gives ${d.toString(16).padStart(16, '0')}: a different stream`);
      return;
    }
  }
}

async function opInterrupt(cl) {
  const r = rnd();
  if (r < 0.4 || INTERRUPTS.length === 0) {
    const id = `int-${cl.id}-${++cl.n}`;
    const e = await call(cl, 'interrupt.create', `SELECT ${S}interrupt_create($1) AS r`,
      [JSON.stringify({ interruptId: id, runId: pick(RUNS), threadId: 'ith', requestedAt: Date.now(), payload: { n: cl.n } })], { id });
    INTERRUPTS.push(id);
    return e;
  }
  const id = pick(INTERRUPTS.slice(-10));
  if (r < 0.75) {
    return call(cl, 'interrupt.resolve', `SELECT ${S}interrupt_resolve($1, $2, $3) AS r`,
      [id, JSON.stringify({ by: cl.id }), Date.now()], { id });
  }
  return call(cl, 'interrupt.cancel', `SELECT ${S}interrupt_cancel($1, $2) AS r`, [id, Date.now()], { id });
}

async function opMetadata(cl) {
  const own = chance(0.6);
  const ns = own ? `own-${cl.id}` : 'hot';
  const key = `k${ri(2)}`;
  if (chance(0.75)) {
    const value = JSON.stringify({ c: cl.id, n: ++cl.n });
    return call(cl, 'metadata.set', `SELECT ${S}metadata_set($1, $2, $3) AS r`, [ns, key, value], { ns, key, value });
  }
  return call(cl, 'metadata.delete', `SELECT ${S}metadata_delete($1, $2) AS r`, [ns, key], { ns, key });
}

const MIX = [
  [opCheckpointAppend, 22], [opCheckpointDeleteHead, 7], [opCheckpointLease, 12], [opFork, 3],
  [opBlob, 12], [opUpload, 3], [opRun, 10], [opLock, 12], [opLockChurn, 10], [opEventLog, 11], [opEventBatch, 3], [opEventRead, 6], [opInterrupt, 4],
  [opMetadata, 4],
];
const MIX_TOTAL = MIX.reduce((s, [, w]) => s + w, 0);
function pickOp() {
  let r = rnd() * MIX_TOTAL;
  for (const [f, w] of MIX) if ((r -= w) < 0) return f;
  return MIX[0][0];
}

// The server every connection goes to: PGHOST/PGPORT, or (--pitr) the restored cluster.
let SERVER = {};
async function connect(db) {
  const c = new pg.Client({ ...SERVER, database: db, connectionTimeoutMillis: 10000, statement_timeout: 30000 });
  c.on('error', () => {});   // a crash surfaces through the pending query
  await c.connect();
  return c;
}

// Run the load for ms milliseconds on CLIENTS clients plus one maintenance client.
async function runLoad(ms, clients, stopSignal) {
  for (const cl of clients) {
    cl.db = await connect(DB);
    // Half the clients write their blobs with lz4, the rest with zstd: every
    // client reads both, so the blob checks cover objects of either codec.
    if (cl.id % 2 === 1) await cl.db.query('SET sandbox_persist.blob_codec = lz4');
  }
  const deadline = Date.now() + ms;
  const worker = async (cl) => {
    try {
      // A producer retry of the append that was in flight at the last crash.
      if (cl.retryAfterCrash) {
        const e = cl.retryAfterCrash;
        cl.retryAfterCrash = null;
        const r = await eventAppend(cl, e.meta.run, e.meta.chunks, e.meta.pseq, e);
        if (r.st === 'ok') cl.lastAppend = r;
      }
      while (Date.now() < deadline && !stopSignal.stop) {
        if (cl.id === 0) {
          await opMaintain(cl);
          if (chance(0.4)) await opBlob(cl);
          await sleep(20 + ri(60));
        } else {
          await pickOp()(cl);
          if (chance(0.002)) vskew += WRITER_LEASE_MS;   // expire every lease at once
          if (chance(0.01)) await sleep(ri(100));        // a stalled holder
        }
      }
    } catch (err) {
      if (!(err instanceof CrashStop)) {
        stats.failures.push(`client ${cl.id}: ${err.stack}`);
      }
      if (cl.lastCall && cl.lastCall.op === 'event.append' && cl.lastCall.st === 'indet') cl.retryAfterCrash = cl.lastCall;
    }
  };
  await Promise.all(clients.map(worker));
  for (const cl of clients) {
    await cl.db.end().catch(() => {});
  }
}

function makeClients(n) {
  return Array.from({ length: n + 1 }, (_, id) => ({
    id, n: 0, writers: {}, lastHead: {}, convOf: {}, locks: {}, cursors: {}, pseq: 0, producer: crypto.randomUUID(),
    lastAppend: null, retryAfterCrash: null, inflight: null,
  }));
}

// ---------------------------------------------------------------------------
// The invariant checker. Each check returns a list of violation strings.
// ---------------------------------------------------------------------------
const T = 'sandbox_persist.';
async function rows(db, sql, params = []) {
  return (await db.query(sql, params)).rows;
}
const byKey = (arr, f) => {
  const m = new Map();
  for (const x of arr) {
    const k = f(x);
    if (!m.has(k)) m.set(k, []);
    m.get(k).push(x);
  }
  return m;
};
const acked = (op) => log.filter((e) => e.op === op && e.st === 'ok');
// Real-time precedence: a call answered before another was sent must carry
// the smaller value. One sweep in send order over the calls answered so far.
function precedence(list, valueOf, describe) {
  const v = [];
  const bySend = [...list].sort((x, y) => x.s - y.s);
  const byAnswer = [...list].sort((x, y) => x.a - y.a);
  let k = 0;
  let best = null;
  for (const e of bySend) {
    while (k < byAnswer.length && byAnswer[k].a < e.s) {
      if (best === null || valueOf(byAnswer[k]) > valueOf(best)) best = byAnswer[k];
      k++;
    }
    if (best !== null && valueOf(best) >= valueOf(e)) v.push(describe(best, e));
  }
  return v;
}
const maybe = (op) => log.filter((e) => e.op === op && (e.st === 'ok' || e.st === 'indet'));
// The failovers so far (failover mode), as ticks of the call log: kill, when the
// action began, and up, when the probe's write reached the new leader. A call
// answered before kill was answered by the old leader; a call sent after up
// goes to the new one (every load client's connection ended in between).
const boundaries = [];
// The failover promise (docs/contract/failover.md §1), for fences and claim
// epochs: a value granted after a failover repeats no value answered before it
// and exceeds every one of them. list: the answered grants of one thread, key
// or run (or of all lock keys: one sequence).
function acrossFailovers(list, valueOf, what) {
  const v = [];
  boundaries.forEach((b, n) => {
    const before = list.filter((e) => e.a < b.kill).map(valueOf);
    if (before.length === 0) return;
    const had = new Set(before);
    const max = Math.max(...before);
    for (const e of list) {
      if (!(e.s > b.up)) continue;
      if (had.has(valueOf(e))) v.push(`${what}: ${valueOf(e)} granted after failover ${n + 1} was already granted before it`);
      else if (valueOf(e) <= max) v.push(`${what}: ${valueOf(e)} granted after failover ${n + 1} is not above ${max}, granted before it`);
    }
  });
  return v;
}
// Whether a failover lies between two grants (a answered before it ended, b sent after it began).
const failoverBetween = (a, b) => boundaries.some((x) => a.a < x.up && b.s > x.kill);

// The lock-fence checks over the call log: promise (uniqueness, order, the
// failover promise over all keys, holders that overlap with no failover
// between them) and across (overlaps with a failover between the grants).
function lockFences(count = false) {
  const v = [];
  const across = [];
  const acqs = acked('lock.acquire').filter((e) => e.res !== null);
  const all = acqs.map((e) => e.meta.fence);
  if (new Set(all).size !== all.length) v.push('a lock fence was handed out twice');
  v.push(...acrossFailovers(acqs, (e) => e.meta.fence, 'lock fence (one sequence, every key)'));
  // How long each lease may have lasted: its grant, then the renews in clock
  // order. An answered renew says what it did; one in flight at a crash may
  // have committed, but a renew extends only a lease unexpired at its now_ms
  // (docs/contract/locks.md §2), so it counts only when sent before the expiry
  // known so far.
  const exps = new Map();
  const bump = (k, x) => exps.set(k, Math.max(exps.get(k) ?? -Infinity, x));
  for (const e of acqs) bump(e.meta.fence, e.meta.exp);
  const renews = [];
  for (const e of maybe('lock.renew')) {
    if (e.st === 'indet') renews.push({ fence: e.meta.fence, vt: e.meta.vt, exp: e.meta.exp, answered: false });
    else if (e.res !== null) renews.push({ fence: e.meta.fence, vt: e.meta.vt, exp: parsed(e).expiresAt, answered: true });
  }
  for (const e of maybe('lock.renew_many')) {
    const renewed = e.st === 'ok' ? new Map(parsed(e).renewed.map((x) => [x.key, x.expiresAt])) : null;
    for (const l of e.meta.leases) {
      if (!renewed) renews.push({ fence: l.fence, vt: e.meta.vt, exp: e.meta.exp, answered: false });
      else if (renewed.has(l.key)) renews.push({ fence: l.fence, vt: e.meta.vt, exp: renewed.get(l.key), answered: true });
    }
  }
  for (const r of renews.sort((x, y) => x.vt - y.vt)) if (r.answered || r.vt < (exps.get(r.fence) ?? -Infinity)) bump(r.fence, r.exp);
  const released = byKey(log.filter((e) => e.op === 'lock.release' && (e.st === 'indet' || (e.st === 'ok' && e.res === true))),
    (e) => `${e.meta.key}/${e.meta.fence}`);
  const purges = maybe('maintain');
  for (const [key, list] of byKey(acqs, (e) => e.meta.key)) {
    v.push(...precedence(list, (e) => e.meta.fence,
      (x, y) => `lock ${key}: fence ${y.meta.fence} acquired after fence ${x.meta.fence} was answered`));
    v.push(...acrossFailovers(list, (e) => e.meta.fence, `lock ${key}: fence`));
    const byFence = [...list].sort((a, b) => a.meta.fence - b.meta.fence);
    for (let i = 0; i + 1 < byFence.length; i++) {
      const a = byFence[i];
      const b = byFence[i + 1];
      const freed = (released.get(`${key}/${a.meta.fence}`) ?? []).some((r) => r.s < b.a);
      // maintain() purges rows expired on its own clock; an acquisition sent
      // earlier (with an older now_ms) that runs after such a purge finds the
      // key free. With the server clock its now would be the later one.
      const purged = !freed && exps.get(a.meta.fence) > b.meta.vt
        && purges.some((m) => m.meta.now > exps.get(a.meta.fence) && m.s < b.a);
      if (purged && count) stats.purgeTakeovers++;
      // Fence a did not end before fence b was granted, so either both were
      // held at once or b was granted (and ended) before a: a later grant
      // with a smaller fence. Both break the lock contract.
      if (!freed && !purged && exps.get(a.meta.fence) > b.meta.vt)
        (failoverBetween(a, b) ? across : v).push(`lock ${key}: fence ${a.meta.fence} (acquired at ${a.meta.vt}, held until ${exps.get(a.meta.fence)}, no release answered`
          + ` before fence ${b.meta.fence} was) and fence ${b.meta.fence} (acquired at ${b.meta.vt}): both held at once,`
          + ` or ${b.meta.fence} was granted first and the later grant got the smaller fence`);
    }
  }
  return { promise: v, across };
}

const CHECKS = {
  // Every head names a checkpoint of its own thread.
  async heads_exist_own_thread(db) {
    return (await rows(db, `SELECT t.thread_id, t.head_id, c.thread_id AS owner FROM ${T}checkpoint_threads t
        LEFT JOIN ${T}checkpoints c ON c.checkpoint_id = t.head_id
        WHERE t.head_id IS NOT NULL AND c.thread_id IS DISTINCT FROM t.thread_id`))
      .map((r) => `head ${r.head_id} of ${r.thread_id} belongs to ${r.owner ?? 'no checkpoint'}`);
  },

  // Parents exist in the same thread, chains are acyclic, and every checkpoint
  // of a thread lies on its head's chain (history is linear).
  async parent_chains(db) {
    const v = [];
    const cps = await rows(db, `SELECT checkpoint_id, thread_id, parent_id FROM ${T}checkpoints`);
    const heads = await rows(db, `SELECT thread_id, head_id FROM ${T}checkpoint_threads`);
    const byId = new Map(cps.map((c) => [c.checkpoint_id, c]));
    for (const c of cps) {
      if (c.parent_id === null) continue;
      const p = byId.get(c.parent_id);
      if (!p) v.push(`parent ${c.parent_id} of ${c.checkpoint_id} is missing`);
      else if (p.thread_id !== c.thread_id) v.push(`parent ${c.parent_id} of ${c.checkpoint_id} is in thread ${p.thread_id}`);
    }
    const count = byKey(cps, (c) => c.thread_id);
    const headOf = new Map(heads.map((h) => [h.thread_id, h.head_id]));
    for (const [thread, list] of count) {
      const seen = new Set();
      let cur = headOf.get(thread) ?? null;
      while (cur !== null && byId.has(cur)) {
        if (seen.has(cur)) { v.push(`cycle through ${cur} in ${thread}`); break; }
        seen.add(cur);
        cur = byId.get(cur).parent_id;
      }
      if (seen.size !== list.length) v.push(`thread ${thread}: ${list.length} checkpoints, ${seen.size} on the head chain`);
    }
    return v;
  },

  // Reference rows equal a recount from the checkpoints, and listBlobReferences agrees.
  async blob_reference_rows(db) {
    const diff = await rows(db, `WITH expected AS (
        SELECT DISTINCT c.checkpoint_id, k.key FROM ${T}checkpoints c,
          LATERAL (SELECT f->>'blobKey' AS key FROM json_array_elements(c.files) f WHERE f->>'kind' = 'file'
                   UNION SELECT a->>'blobKey' FROM json_array_elements(c.artifacts) a) k)
      (SELECT 'missing' AS what, * FROM expected EXCEPT SELECT 'missing', checkpoint_id, blob_key FROM ${T}checkpoint_blob_refs)
      UNION ALL
      (SELECT 'extra', checkpoint_id, blob_key FROM ${T}checkpoint_blob_refs EXCEPT SELECT 'extra', * FROM expected)`);
    const v = diff.map((r) => `${r.what} reference row (${r.checkpoint_id}, ${r.key})`);
    const listed = JSON.parse((await rows(db, `SELECT ${T}checkpoint_list_blob_references() AS r`))[0].r);
    const recount = await rows(db, `SELECT blob_key, count(*)::int AS n FROM ${T}checkpoint_blob_refs GROUP BY 1 ORDER BY blob_key COLLATE "C"`);
    if (JSON.stringify(listed) !== JSON.stringify(recount.map((r) => ({ key: r.blob_key, references: r.n }))))
      v.push('checkpoint_list_blob_references() differs from the reference rows');
    return v;
  },

  // No referenced blob was deleted, and every blob's chunks cover its size.
  // A key is excused only when the capture that put it waited longer than the
  // GC grace (virtual clock) before its append was answered: the documented race.
  async referenced_blobs_present(db) {
    const v = [];
    const missing = await rows(db, `SELECT DISTINCT r.blob_key FROM ${T}checkpoint_blob_refs r
        WHERE NOT EXISTS (SELECT 1 FROM ${T}blobs b WHERE b.blob_key = r.blob_key)`);
    for (const { blob_key: key } of missing) {
      const excuse = !selfTesting && log.some((e) => e.op === 'ckpt.append' && (e.st === 'ok' || e.st === 'indet')
        && e.meta.keys && e.meta.keys.includes(key)
        && ((e.va ?? vpeek()) - e.meta.putSend >= GC_GRACE_S * 1000));
      if (excuse) stats.excused++;
      else v.push(`referenced blob ${key} is missing`);
    }
    const bad = await rows(db, `SELECT b.blob_key, b.size, coalesce(sum(c.raw_length), 0) AS covered,
          count(c.*) AS n, coalesce(max(c.chunk_offset + c.raw_length), 0) AS top
        FROM ${T}blobs b LEFT JOIN ${T}blob_chunks c ON c.version = b.version
        WHERE b.inline_codec IS NULL
        GROUP BY b.blob_key, b.size HAVING coalesce(sum(c.raw_length), 0) <> b.size
            OR coalesce(max(c.chunk_offset + c.raw_length), 0) <> b.size`);
    for (const r of bad) v.push(`blob ${r.blob_key}: size ${r.size}, chunks cover ${r.covered}`);
    // inline objects (0.3.0) hold their bytes in the row and have no chunk rows
    const mixed = await rows(db, `SELECT b.blob_key FROM ${T}blobs b WHERE b.inline_codec IS NOT NULL
        AND (b.size = 0 OR EXISTS (SELECT 1 FROM ${T}blob_chunks c WHERE c.version = b.version))`);
    for (const r of mixed) v.push(`blob ${r.blob_key}: inline, yet empty or with chunk rows`);
    // content addresses: the stored bytes hash to the key
    const content = await rows(db, `SELECT blob_key FROM ${T}blobs WHERE blob_key ~ '^sandbox-files/sha256/'`);
    for (const { blob_key: key } of content) {
      const [g] = await rows(db, `SELECT body FROM ${T}blob_get($1)`, [key]);
      if (!g || `sandbox-files/sha256/${sha(g.body)}` !== key) v.push(`blob ${key} does not hash to its key`);
    }
    return v;
  },

  // Writer fences: unique per thread across answered acquisitions, increasing in
  // real time, and after each failover above every fence answered before it.
  async writer_fences_monotonic() {
    const v = [];
    for (const [thread, acqs] of byKey(acked('ckpt.acquire'), (e) => e.meta.thread)) {
      const fences = acqs.map((e) => e.meta.fence);
      if (new Set(fences).size !== fences.length) v.push(`thread ${thread}: a writer fence was handed out twice`);
      v.push(...precedence(acqs, (e) => e.meta.fence,
        (x, y) => `thread ${thread}: fence ${y.meta.fence} acquired after fence ${x.meta.fence} was answered`));
      v.push(...acrossFailovers(acqs, (e) => e.meta.fence, `thread ${thread}: writer fence`));
    }
    return v;
  },

  // The thread row's counter is never below an answered fence (the grant was
  // committed; a failover with asynchronous replication may lose it).
  async writer_fences_stored(db) {
    const v = [];
    const rowsF = new Map((await rows(db, `SELECT thread_id, fence FROM ${T}checkpoint_threads`)).map((r) => [r.thread_id, Number(r.fence)]));
    for (const [thread, acqs] of byKey(acked('ckpt.acquire'), (e) => e.meta.thread)) {
      const max = Math.max(...acqs.map((e) => e.meta.fence));
      if (!(rowsF.get(thread) >= max)) v.push(`thread ${thread}: stored fence ${rowsF.get(thread)} below answered fence ${max}`);
    }
    return v;
  },

  // No two writers both held a valid lease for accepted writes: a write of
  // fence f is never accepted after an acquisition of a larger fence was
  // answered, never at or past f's latest known expiry, and, when f was not
  // released, never at a lease time at or after the larger fence's acquisition.
  async writer_exclusion(db) {
    const v = [];
    const writes = log.filter((e) => ['ckpt.append', 'ckpt.delete_head', 'ckpt.fork'].includes(e.op) && e.st === 'ok');
    const acqs = byKey(acked('ckpt.acquire'), (e) => e.meta.thread);
    const exps = new Map();
    const bump = (k, x) => exps.set(k, Math.max(exps.get(k) ?? -Infinity, x));
    for (const e of acked('ckpt.acquire')) bump(`${e.meta.thread}/${e.meta.fence}`, e.meta.exp);
    for (const e of maybe('ckpt.renew')) bump(`${e.meta.thread}/${e.meta.fence}`, e.st === 'ok' ? parsed(e).expiresAt : e.meta.exp);
    const releases = byKey(log.filter((e) => e.op === 'ckpt.release' && (e.st === 'indet' || (e.st === 'ok' && e.res === true))),
      (e) => `${e.meta.thread}/${e.meta.fence}`);
    for (const w of writes) {
      const k = `${w.meta.thread}/${w.meta.fence}`;
      if (!(w.meta.vt < (exps.get(k) ?? -Infinity))) v.push(`${w.op} ${w.meta.id} accepted at ${w.meta.vt}, lease ${k} expired at ${exps.get(k)}`);
      for (const g of acqs.get(w.meta.thread) ?? []) {
        if (g.meta.fence <= w.meta.fence) continue;
        if (g.a < w.s) v.push(`${w.op} ${w.meta.id} with fence ${w.meta.fence} accepted after fence ${g.meta.fence} was acquired`);
        const released = (releases.get(k) ?? []).some((r) => r.s < g.a);
        if (!released && w.meta.vt >= g.meta.vt)
          v.push(`${w.op} ${w.meta.id} (fence ${w.meta.fence}, lease time ${w.meta.vt}) overlaps fence ${g.meta.fence} acquired at ${g.meta.vt}`);
      }
    }
    return v;
  },

  // Event logs: offsets dense from 1 to the tail; every answered append present
  // exactly once at the offsets it was given; retries answered the same offsets.
  async event_log_offsets(db) {
    const v = [];
    const logs = await rows(db, `SELECT l.log_id, l.run_id, l.tail_seq, count(e.seq) AS n, min(e.seq) AS lo, max(e.seq) AS hi
        FROM ${T}event_logs l LEFT JOIN ${T}event_log_entries e USING (log_id) GROUP BY 1, 2, 3`);
    for (const l of logs) {
      const n = Number(l.n);
      const tail = Number(l.tail_seq);
      if (n !== tail || (n > 0 && (Number(l.lo) !== 1 || Number(l.hi) !== tail)))
        v.push(`log ${l.run_id}: tail ${tail}, ${n} entries from ${l.lo} to ${l.hi}`);
    }
    const dups = await rows(db, `SELECT l.run_id, e.chunk::text AS chunk, count(*) AS n FROM ${T}event_log_entries e
        JOIN ${T}event_logs l USING (log_id) GROUP BY 1, 2 HAVING count(*) > 1`);
    for (const d of dups) v.push(`log ${d.run_id}: chunk ${d.chunk.slice(0, 80)} stored ${d.n} times`);
    const entries = new Map((await rows(db, `SELECT l.run_id, e.seq, e.chunk::text AS chunk FROM ${T}event_log_entries e
        JOIN ${T}event_logs l USING (log_id)`)).map((r) => [`${r.run_id}/${r.seq}`, r.chunk]));
    const first = new Map();
    for (const e of acked('event.append')) {
      const chunks = JSON.parse(e.meta.chunks);
      if (e.meta.seqs.length !== chunks.length) { v.push(`append ${e.i}: ${e.meta.seqs.length} offsets for ${chunks.length} chunks`); continue; }
      chunks.forEach((c, i) => {
        const got = entries.get(`${e.meta.run}/${e.meta.seqs[i]}`);
        if (got === undefined || JSON.stringify(JSON.parse(got)) !== JSON.stringify(c))
          v.push(`log ${e.meta.run}: answered offset ${e.meta.seqs[i]} holds ${got === undefined ? 'nothing' : got.slice(0, 80)}`);
      });
      const k = `${e.meta.run}/${e.meta.producer}/${e.meta.pseq}`;
      if (first.has(k) && JSON.stringify(first.get(k)) !== JSON.stringify(e.meta.seqs))
        v.push(`retry of ${k} answered ${JSON.stringify(e.meta.seqs)}, first ${JSON.stringify(first.get(k))}`);
      if (!first.has(k)) first.set(k, e.meta.seqs);
    }
    return v;
  },

  // What readers saw while following the logs during the load (opEventRead),
  // and every stored digest is the running XOR of the entry hashes up to it
  // (what the server vouches with).
  async event_log_reads(db) {
    const v = [...readerViolations];
    for (const r of await rows(db, `SELECT l.run_id, d.seq FROM (
          SELECT e.log_id, e.seq, e.digest, bit_xor(('x' || encode(substr(sha256(int8send(e.seq)
                   || convert_to(e.chunk::text, 'UTF8')), 1, 8), 'hex'))::bit(64)::bigint)
                   OVER (PARTITION BY e.log_id ORDER BY e.seq) AS chained
            FROM ${T}event_log_entries e) d JOIN ${T}event_logs l USING (log_id)
         WHERE d.digest <> d.chained ORDER BY 1, 2 LIMIT 20`)) {
      v.push(`log ${r.run_id}: the stored digest of entry ${r.seq} does not chain the entries up to it`);
    }
    return v;
  },

  // Lock fences: unique; per key increasing in real time and in grant order,
  // after each failover above every fence answered before it, and holders
  // never overlap (overlaps across a failover: lock_holders_across_failovers).
  async lock_fences() {
    return lockFences(true).promise;
  },
  // Two holders of one key at once where a failover lies between the grants:
  // the first grant was lost (asynchronous replication; the fences still order them).
  async lock_holders_across_failovers() {
    return lockFences().across;
  },
  // The fence sequence is never below an answered fence (lost with a failover
  // that lost commits).
  async lock_fences_stored(db) {
    const all = acked('lock.acquire').filter((e) => e.res !== null).map((e) => e.meta.fence);
    const [seq] = await rows(db, `SELECT last_value FROM ${T}lock_fences`);
    return all.length && Number(seq.last_value) < Math.max(...all) ? ['lock fence sequence is below an answered fence'] : [];
  },

  // Run claims: epochs unique and increasing per run, and after each failover
  // above every epoch answered before it.
  async run_claim_epochs() {
    const v = [];
    for (const [run, list] of byKey(acked('run.claim').filter((e) => e.meta.outcome === 'claimed'), (e) => e.meta.run)) {
      const eps = list.map((e) => e.meta.epoch);
      if (new Set(eps).size !== eps.length) v.push(`run ${run}: an epoch was claimed twice`);
      v.push(...precedence(list, (e) => e.meta.epoch,
        (x, y) => `run ${run}: epoch ${y.meta.epoch} claimed after ${x.meta.epoch} was answered`));
      v.push(...acrossFailovers(list, (e) => e.meta.epoch, `run ${run}: claim epoch`));
    }
    return v;
  },
  // The stored epoch is never below a claimed one (lost with a failover that lost commits).
  async run_claim_stored(db) {
    const v = [];
    const stored = new Map((await rows(db, `SELECT run_id, driver_epoch FROM ${T}runs`)).map((r) => [r.run_id, r.driver_epoch === null ? null : Number(r.driver_epoch)]));
    for (const [run, list] of byKey(acked('run.claim').filter((e) => e.meta.outcome === 'claimed'), (e) => e.meta.run)) {
      const max = Math.max(...list.map((e) => e.meta.epoch));
      if (!(stored.get(run) >= max)) v.push(`run ${run}: stored epoch ${stored.get(run)} below claimed ${max}`);
    }
    return v;
  },

  // Every answered write is present: checkpoints (read back through
  // checkpoint_get), runs, owned blobs and metadata, interrupts.
  async acknowledged_writes_present(db) {
    const v = [];
    const deletable = new Set(maybe('ckpt.delete_head').map((e) => e.meta.id));
    const cps = new Map((await rows(db, `SELECT checkpoint_id, thread_id, parent_id, files::text AS files FROM ${T}checkpoints`)).map((r) => [r.checkpoint_id, r]));
    const sent = new Set(log.filter((e) => e.op === 'ckpt.append' || e.op === 'ckpt.fork').map((e) => e.meta.id));
    for (const id of cps.keys()) if (!sent.has(id)) v.push(`checkpoint ${id} was never sent`);
    let sampled = 0;
    for (const e of [...acked('ckpt.append'), ...acked('ckpt.fork')]) {
      const row = cps.get(e.meta.id);
      if (!row) {
        if (!deletable.has(e.meta.id)) v.push(`answered ${e.op} ${e.meta.id} is missing`);
        continue;
      }
      if (row.thread_id !== e.meta.thread) v.push(`checkpoint ${e.meta.id} is in ${row.thread_id}`);
      if (e.op === 'ckpt.append') {
        if (row.parent_id !== e.meta.parent) v.push(`checkpoint ${e.meta.id} parent ${row.parent_id}, sent ${e.meta.parent}`);
        if (JSON.stringify(JSON.parse(row.files)) !== e.meta.files) v.push(`checkpoint ${e.meta.id} files differ`);
        if (sampled++ < 200) {
          const [g] = await rows(db, `SELECT ${T}checkpoint_get($1)::text AS r`, [e.meta.id]);
          const got = JSON.parse(g.r);
          if (JSON.stringify(got.conversation) !== JSON.stringify(JSON.parse(e.meta.conversation))) v.push(`checkpoint ${e.meta.id} conversation differs`);
        }
      }
    }
    const runs = new Set((await rows(db, `SELECT run_id FROM ${T}runs`)).map((r) => r.run_id));
    for (const e of acked('run.create')) if (!runs.has(e.meta.run)) v.push(`answered run ${e.meta.run} is missing`);
    // Owned blob keys and metadata keys: one sequential writer each, so the
    // final state is the last answered write, or the write in flight at a crash.
    const owned = (op) => (e) => e.c !== 0 && (e.st === 'ok' || e.st === 'indet') && e.op.startsWith(op);
    const blobs = new Map();
    const writes = ['blob.put', 'blob.delete', 'blob.upload_commit'];
    for (const e of log.filter(owned('blob.')).filter((e) => writes.includes(e.op) && e.meta.key.startsWith('app/own-'))) {
      const state = e.op === 'blob.delete' ? null : e.meta.hash;
      const prev = blobs.get(e.meta.key) ?? { ok: [undefined] };
      blobs.set(e.meta.key, e.st === 'ok' ? { ok: [state] } : { ok: [...prev.ok, state] });
    }
    for (const [key, { ok }] of blobs) {
      const [g] = await rows(db, `SELECT body FROM ${T}blob_get($1)`, [key]);
      const got = g && g.body !== null ? sha(g.body) : null;
      if (!ok.includes(got)) v.push(`blob ${key}: stored ${got}, answered ${ok.join(' or ')}`);
    }
    const meta = new Map();
    for (const e of log.filter(owned('metadata.')).filter((e) => e.meta.ns.startsWith('own-'))) {
      const k = `${e.meta.ns}/${e.meta.key}`;
      const state = e.op === 'metadata.set' ? e.meta.value : null;
      const prev = meta.get(k) ?? { ok: [undefined] };
      meta.set(k, e.st === 'ok' ? { ok: [state] } : { ok: [...prev.ok, state] });
    }
    for (const [k, { ok }] of meta) {
      const [ns, key] = k.split('/');
      const [g] = await rows(db, `SELECT ${T}metadata_get($1, $2) AS r`, [ns, key]);
      if (!ok.includes(g.r)) v.push(`metadata ${k}: stored ${g.r}, answered ${ok.join(' or ')}`);
    }
    const ints = new Map((await rows(db, `SELECT interrupt_id, status FROM ${T}interrupts`)).map((r) => [r.interrupt_id, r.status]));
    for (const e of acked('interrupt.create')) if (!ints.has(e.meta.id)) v.push(`answered interrupt ${e.meta.id} is missing`);
    // resolve and cancel re-stamp whatever the status: the final status is that
    // of a call no other answered call strictly followed.
    const marks = log.filter((e) => (e.op === 'interrupt.resolve' || e.op === 'interrupt.cancel')
      && (e.st === 'indet' || (e.st === 'ok' && e.res === true)));
    for (const [id, list] of byKey(marks, (e) => e.meta.id)) {
      const last = list.filter((o) => !list.some((p) => p !== o && p.st === 'ok' && o.a < p.s));
      const allowed = last.map((o) => (o.op === 'interrupt.resolve' ? 'resolved' : 'cancelled'));
      if (list.some((o) => o.st === 'indet')) allowed.push('pending', 'resolved', 'cancelled');
      if (!allowed.includes(ints.get(id))) v.push(`interrupt ${id}: status ${ints.get(id)}, last answered ${allowed.join(' or ')}`);
    }
    return v;
  },
};

async function runChecks(db, label) {
  const t0 = Date.now();
  stats.excused = 0;
  stats.purgeTakeovers = 0;
  const results = {};
  const took = {};
  for (const [name, f] of Object.entries(CHECKS)) {
    const t = Date.now();
    results[name] = await f(db);
    took[name] = Date.now() - t;
  }
  const total = Object.values(results).reduce((s, r) => s + r.length, 0);
  console.log(`checker (${label}): ${Object.keys(CHECKS).length} checks, ${total} violations, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  stats.lastExcused = stats.excused;
  stats.lastPurgeTakeovers = stats.purgeTakeovers;
  for (const [name, r] of Object.entries(results)) {
    console.log(`  ${name}: ${r.length}${took[name] >= 1000 ? ` (${(took[name] / 1000).toFixed(1)} s)` : ''}`);
    for (const x of r.slice(0, 5)) console.log(`    - ${x}`);
  }
  return { results, total };
}

// ---------------------------------------------------------------------------
// Self-test: corrupt the database (inside a transaction that is rolled back)
// and the call log (restored afterwards), and require each check to fail.
// ---------------------------------------------------------------------------
let selfTesting = false;
// A lease of a key the load never uses, granted far past every clock of the
// run (so no other grant or purge touches it), for the forged lock call logs.
const SELF_TEST_KEY = 'lk-self-test';
function forgedGrant(vt, fence, at) {
  log.push({ i: log.length, c: 99, op: 'lock.acquire', st: 'ok', s: at, a: at + 1, ta: Date.now(),
    res: JSON.stringify({ ownerToken: `forged-${fence}`, fence, expiresAt: vt + LOCK_TTL_MS }),
    meta: { key: SELF_TEST_KEY, vt, fence, exp: vt + LOCK_TTL_MS } });
}
function forgedLease() {
  const t = log.reduce((m, e) => Math.max(m, e.meta?.vt ?? 0), vnow()) + 100 * LOCK_TTL_MS;
  const fence = acked('lock.acquire').reduce((m, e) => Math.max(m, e.meta.fence ?? 0), 0) + 1000;
  forgedGrant(t, fence, tick + 1);
  return { t, fence };
}
async function selfTest() {
  selfTesting = true;
  const db = await connect(DB);
  const cases = [
    ['blob_reference_rows', `DELETE FROM ${T}checkpoint_blob_refs WHERE ctid = (SELECT min(ctid) FROM ${T}checkpoint_blob_refs)`],
    ['event_log_offsets', `WITH l AS (SELECT log_id, tail_seq FROM ${T}event_logs WHERE tail_seq > 0 ORDER BY log_id LIMIT 1),
        i AS (INSERT INTO ${T}event_log_entries (log_id, seq, chunk, digest) SELECT l.log_id, l.tail_seq + 1, e.chunk, e.digest FROM l
              JOIN ${T}event_log_entries e ON e.log_id = l.log_id AND e.seq = l.tail_seq)
        UPDATE ${T}event_logs x SET tail_seq = x.tail_seq + 1 FROM l WHERE x.log_id = l.log_id`],
    ['heads_exist_own_thread', `UPDATE ${T}checkpoint_threads SET head_id = (SELECT checkpoint_id FROM ${T}checkpoints WHERE thread_id = 'th-1' LIMIT 1)
        WHERE thread_id = 'th-0'`],
    ['parent_chains', `UPDATE ${T}checkpoints SET parent_id = checkpoint_id WHERE checkpoint_id = (SELECT head_id FROM ${T}checkpoint_threads WHERE head_id IS NOT NULL LIMIT 1)`],
    ['referenced_blobs_present', `DELETE FROM ${T}blobs WHERE blob_key = (SELECT min(blob_key) FROM ${T}checkpoint_blob_refs)`],
    ['writer_fences_stored', `UPDATE ${T}checkpoint_threads SET fence = 0`],
    ['lock_fences_stored', `SELECT setval('${T}lock_fences', 1)`],
    ['run_claim_stored', `UPDATE ${T}runs SET driver_epoch = NULL`],
    ['event_log_reads', `UPDATE ${T}event_log_entries SET digest = digest # 1 WHERE (log_id, seq) = (SELECT log_id, min(seq) FROM ${T}event_log_entries GROUP BY 1 ORDER BY 1 LIMIT 1)`],
    ['acknowledged_writes_present', `DELETE FROM ${T}runs`],
    ['acknowledged_writes_present', `UPDATE ${T}metadata SET value = '{"forged":true}' WHERE namespace LIKE 'own-%'`],
    ['acknowledged_writes_present', `UPDATE ${T}interrupts SET status = 'pending', resolved_at = NULL`],
    ['acknowledged_writes_present', `UPDATE ${T}checkpoints SET files = '[]' WHERE checkpoint_id LIKE 'cp-%'`],
    ['acknowledged_writes_present', `DELETE FROM ${T}blobs WHERE blob_key LIKE 'app/own-%'`],
    ['event_log_offsets', `DELETE FROM ${T}event_log_entries WHERE (log_id, seq) IN (SELECT log_id, max(seq) FROM ${T}event_log_entries GROUP BY 1)`],
  ];
  // Corruptions of the call log: a stale writer's append accepted after a takeover,
  // a lock fence handed out twice.
  const logCases = [
    ['writer_exclusion', () => {
      const g = acked('ckpt.acquire').find((e) => e.meta.fence > 1);
      log.push({ i: log.length, c: 99, op: 'ckpt.append', st: 'ok', s: g.a + 1, a: g.a + 2, ta: Date.now(),
        meta: { thread: g.meta.thread, id: 'forged', fence: g.meta.fence - 1, vt: g.meta.vt + 1, keys: [] } });
    }],
    ['event_log_reads', () => {
      // a read that skips an offset, and one that changes a seen chunk
      const k = [...seenChunks.keys()][0];
      const [run, seq] = [k.split('/')[0], Number(k.split('/')[1])];
      followRead({ cursors: {} }, run, seq - 1, { tail: seq + 1, entries: [{ seq: seq + 1, chunk: { forged: true } }] });
      followRead({ cursors: {} }, run, seq - 1, { tail: seq, entries: [{ seq, chunk: { forged: true } }] });
    }],
    ['event_log_reads', () => {
      // a read whose entry does not continue the reader's chain: another stream
      const k = [...seenChunks.keys()][0];
      const [run, seq] = [k.split('/')[0], Number(k.split('/')[1])];
      followDigests({}, run, { seq: seq - 1, digest: ZERO_DIGEST }, { entries: [{ seq, digest: 'ffffffffffffffff' }] }, ['{"forged":true}']);
    }],
    ['lock_fences', () => {
      const g = acked('lock.acquire').find((e) => e.res !== null);
      log.push({ ...g, i: log.length, s: tick + 1, a: tick + 2, meta: { ...g.meta } });
    }],
    ['lock_fences', () => {
      // a second grant while a renew in flight at a crash, sent before the
      // expiry, may still have held the first
      const { t, fence } = forgedLease();
      log.push({ i: log.length, c: 99, op: 'lock.renew', st: 'indet', s: tick + 3, a: tick + 4, meta: { key: SELF_TEST_KEY, fence, vt: t + 1, exp: t + 1 + 3 * LOCK_TTL_MS } });
      forgedGrant(t + LOCK_TTL_MS + 2, fence + 1, tick + 5);
    }],
  ];
  // Call logs that break nothing: each must add no violation.
  const cleanCases = [
    ['lock_fences', 'a renew in flight at a crash, sent after its lease expired, then another grant', () => {
      const { t, fence } = forgedLease();
      log.push({ i: log.length, c: 99, op: 'lock.renew', st: 'indet', s: tick + 3, a: tick + 4, meta: { key: SELF_TEST_KEY, fence, vt: t + LOCK_TTL_MS + 1, exp: t + 2 * LOCK_TTL_MS + 1 } });
      forgedGrant(t + LOCK_TTL_MS + 2, fence + 1, tick + 5);
    }],
  ];
  let missed = 0;
  let caught = 0;
  // Each corruption must add violations to what the check reports without it.
  const baseline = {};
  for (const name of Object.keys(CHECKS)) baseline[name] = (await CHECKS[name](db)).length;
  for (const [check, sql] of cases) {
    await db.query('BEGIN');
    await db.query(sql);
    const n = (await CHECKS[check](db)).length - baseline[check];
    await db.query('ROLLBACK');
    if (n > 0) caught++; else missed++;
    console.log(`  self-test: ${check} ${n > 0 ? `reports ${n} more` : 'DID NOT NOTICE'}: ${sql.replace(/\s+/g, ' ').slice(0, 110)}`);
  }
  for (const [check, corrupt] of logCases) {
    const len = log.length;
    const rlen = readerViolations.length;
    const seen = new Map(seenChunks);
    corrupt();
    const n = (await CHECKS[check](db)).length - baseline[check];
    log.length = len;
    readerViolations.length = rlen;
    seenChunks.clear();
    for (const [k, v] of seen) seenChunks.set(k, v);
    if (n > 0) caught++; else missed++;
    console.log(`  self-test: ${check} ${n > 0 ? `reports ${n} more` : 'DID NOT NOTICE'}: a forged call-log entry`);
  }
  for (const [check, what, forge] of cleanCases) {
    const len = log.length;
    forge();
    const n = (await CHECKS[check](db)).length - baseline[check];
    log.length = len;
    if (n === 0) caught++; else missed++;
    console.log(`  self-test: ${check} ${n === 0 ? 'reports nothing more' : `REPORTS ${n} MORE`}: ${what}`);
  }
  await db.end();
  selfTesting = false;
  console.log(`self-test: ${caught} of ${caught + missed} corruptions detected and clean logs passed`);
  return missed;
}

// ---------------------------------------------------------------------------
// Crash: kill -9 the postmaster and its children, restart, wait for connections.
// ---------------------------------------------------------------------------
function pgBin() {
  return execFileSync(process.env.PG_CONFIG || 'pg_config', ['--bindir']).toString().trim();
}
function asPostgres(cmd, args) {
  if (process.getuid && process.getuid() === 0) return execFileSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { stdio: 'pipe' });
  return execFileSync(cmd, args, { stdio: 'pipe' });
}
function crashServer() {
  const data = path.join(process.env.SP_CLUSTER_DIR, 'data');
  const pid = Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  let children = [];
  try {
    children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)]).toString().split(/\s+/).filter(Boolean).map(Number);
  } catch { /* no children */ }
  process.kill(pid, 'SIGKILL');
  // Orphaned backends would keep the shared memory attached and block the restart.
  for (const c of children) {
    try { process.kill(c, 'SIGKILL'); } catch { /* already gone */ }
  }
  return pid;
}
async function restartServer() {
  const data = path.join(process.env.SP_CLUSTER_DIR, 'data');
  const logPath = path.join(process.env.SP_CLUSTER_DIR, 'server.log');
  for (let i = 0; i < 50; i++) {
    try {
      asPostgres(path.join(pgBin(), 'pg_ctl'), ['-D', data, '-l', logPath, '-w', '-t', '120', 'start']);
      break;
    } catch (err) {
      if (i === 49) throw err;
      await sleep(200);   // the killed children may still be exiting
    }
  }
  for (let i = 0; i < 600; i++) {
    try {
      const c = await connect(DB);
      await c.query('SELECT 1');
      await c.end();
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error('the server did not accept connections after the restart');
}

// ---------------------------------------------------------------------------
// Failover mode (--failover): the cluster named by PGHOST/PGPORT is a proxy in
// front of a replicated cluster (test/ha: HAProxy, Patroni, etcd).
// SP_TORTURE_FAILOVER_CMD is called as `CMD kill` (kill -9 of the leader's
// postmaster), `CMD switchover` (a planned switchover) and `CMD settle` (wait
// until a leader is writable and every standby streams again). Each of the
// first two prints the PostgreSQL port of the old leader. A probe writes through
// the proxy every 100 ms from the moment the action starts; the write
// unavailability of a failover runs from the last write the old leader took
// (or the action, when none) to the first write the new leader took.
// --replication async says acknowledged commits may be lost by design: those
// losses are counted and reported, while the promises that must hold anyway
// (FAILOVER_PROMISES: fences and claim epochs never handed out twice, a reader
// never given a different stream) still fail the run.
// ---------------------------------------------------------------------------
const ASYNC = MODE === 'failover' && argv.includes('--replication') && argv[argv.indexOf('--replication') + 1] === 'async';
const FAILOVER_PROMISES = {
  writer_fences_monotonic: 'a checkpoint writer fence must never be handed out again after a failover',
  lock_fences: 'a lock fence must never be handed out again after a failover',
  run_claim_epochs: 'a run claim epoch must never be handed out again after a failover',
  event_log_reads: 'a reader resuming after a failover must never be given a different stream',
};
const failovers = [];

// Acknowledged calls lost, counted once each (failover mode): answered writes
// whose effect the database no longer holds: checkpoints (not deletable by a
// deleteHead that may have run), event-log appends (a chunk not at its answered
// offset), runs, interrupts. Returns how many are newly lost since the last count.
const lostCalls = new Set();
async function countLostCalls(db) {
  const before = lostCalls.size;
  const cps = new Set((await rows(db, `SELECT checkpoint_id FROM ${T}checkpoints`)).map((r) => r.checkpoint_id));
  const deletable = new Set(maybe('ckpt.delete_head').map((e) => e.meta.id));
  for (const e of [...acked('ckpt.append'), ...acked('ckpt.fork')]) if (!cps.has(e.meta.id) && !deletable.has(e.meta.id)) lostCalls.add(e.i);
  const entries = new Map((await rows(db, `SELECT l.run_id, e.seq, e.chunk::text AS chunk FROM ${T}event_log_entries e
      JOIN ${T}event_logs l USING (log_id)`)).map((r) => [`${r.run_id}/${r.seq}`, JSON.stringify(JSON.parse(r.chunk))]));
  for (const e of acked('event.append')) {
    const chunks = JSON.parse(e.meta.chunks);
    if (chunks.some((c, i) => entries.get(`${e.meta.run}/${e.meta.seqs[i]}`) !== JSON.stringify(c))) lostCalls.add(e.i);
  }
  const runs = new Set((await rows(db, `SELECT run_id FROM ${T}runs`)).map((r) => r.run_id));
  for (const e of acked('run.create')) if (!runs.has(e.meta.run)) lostCalls.add(e.i);
  const ints = new Set((await rows(db, `SELECT interrupt_id FROM ${T}interrupts`)).map((r) => r.interrupt_id));
  for (const e of acked('interrupt.create')) if (!ints.has(e.meta.id)) lostCalls.add(e.i);
  return lostCalls.size - before;
}

function failoverCmd(action) {
  return new Promise((resolve, reject) => {
    execFile(process.env.SP_TORTURE_FAILOVER_CMD, [action], { timeout: 300000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${process.env.SP_TORTURE_FAILOVER_CMD} ${action} failed: ${err.message} ${stderr}`));
      else resolve(stdout.toString().trim());
    });
  });
}

// One probe write through the proxy: the port of the server that took it.
async function probeWrite(n) {
  const c = new pg.Client({ database: DB, connectionTimeoutMillis: 2000, statement_timeout: 5000, query_timeout: 6000 });
  c.on('error', () => {});
  try {
    await c.connect();
    const r = await c.query(`SELECT inet_server_port() AS port, ${S}metadata_set('ha-probe', 'k', $1) AS r`, [JSON.stringify({ n })]);
    return String(r.rows[0].port);
  } finally {
    await c.end().catch(() => {});
  }
}

// Write through the proxy until a server other than oldPort takes the write.
async function probeFailover(t0, oldPort, signal) {
  const seen = {};
  let lastOld = null;
  let n = 0;
  const deadline = t0 + 180000;
  while (Date.now() < deadline && !signal.stop) {
    try {
      const port = await probeWrite(++n);
      if (port !== oldPort) return { seconds: (Date.now() - (lastOld ?? t0)) / 1000, seen, port };
      lastOld = Date.now();
    } catch (err) {
      const k = err.code || err.message.replace(/[0-9.:]+/g, '#').slice(0, 60);
      seen[k] = (seen[k] || 0) + 1;
    }
    await sleep(100);
  }
  throw new Error('no new leader took a write within 180 s of the failover');
}

// One failover under load: returns what the cycle report prints.
async function failover(action, load, signal) {
  const oldPort = await probeWrite(0);
  const t0 = Date.now();
  const boundary = { kill: ++tick, up: Infinity };
  boundaries.push(boundary);
  const done = failoverCmd(action);
  done.catch(() => {});
  const probe = probeFailover(t0, oldPort, signal);
  probe.catch(() => {});
  const old = await done;
  await load;
  const p = await probe;
  boundary.up = ++tick;
  await failoverCmd('settle');
  return { action, old, ...p };
}

// ---------------------------------------------------------------------------
// Main.
// ---------------------------------------------------------------------------
async function setupDatabase() {
  const admin = await connect(ADMIN_DB);
  await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB}`);
  // The throwaway cluster runs with synchronous_commit = off, which may lose
  // answered commits on kill -9; every acknowledged write must survive a crash
  // here, so this database commits synchronously (fsync = off is safe for a
  // process crash: the kernel keeps the written WAL).
  await admin.query(`ALTER DATABASE ${DB} SET synchronous_commit = ${process.env.SP_TORTURE_SYNCHRONOUS_COMMIT || 'on'}`);
  await admin.query(`ALTER DATABASE ${DB} SET sandbox_persist.allow_client_clock = on`);
  await admin.query(`ALTER DATABASE ${DB} SET sandbox_persist.blob_gc_grace = '${GC_GRACE_S}s'`);
  await admin.query(`ALTER DATABASE ${DB} SET sandbox_persist.blob_chunk_size = '8kB'`);
  await admin.query(`ALTER DATABASE ${DB} SET sandbox_persist.upload_expiry = '${GC_GRACE_S}s'`);
  await admin.query(`ALTER DATABASE ${DB} SET sandbox_persist.lock_purge_after = 0`);
  await admin.end();
  const db = await connect(DB);
  await db.query('CREATE EXTENSION sandbox_persist');
  await db.end();
}
async function dropDatabase() {
  const admin = await connect(ADMIN_DB);
  await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await admin.end();
}

let violations = 0;
let cycles = 0;

// The failover report; in asynchronous mode lost acknowledged calls and the
// errors that follow from them are reported, and only broken promises fail.
function reportFailovers(failed) {
  console.log('failovers:');
  for (const [n, f] of failovers.entries()) {
    // reads refused after this failover (SP405, SP401 when the log was lost), until the next one
    const from = boundaries[n].up;
    const to = n + 1 < boundaries.length ? boundaries[n + 1].kill : Infinity;
    const refused = log.filter((e) => e.op === 'event.read' && e.meta.diverged && e.s > from && e.s < to);
    const by = {};
    for (const e of refused) by[e.code] = (by[e.code] || 0) + 1;
    console.log(`  ${f.cycle} ${f.action}: unavailable ${f.seconds.toFixed(2)} s, ${f.inflight} in flight, `
      + `${f.lostNow} acknowledged calls lost (${f.lost} loss-check findings), ${f.broken} broken promises, ${f.errors} unexpected errors, `
      + `${refused.length} resumed reads refused ${JSON.stringify(by)}`);
    for (const [k, r] of Object.entries(f.fresh)) {
      const why = FAILOVER_PROMISES[k] ? `PROMISE BROKEN (${FAILOVER_PROMISES[k]}): ` : (ASYNC ? 'lost in the failover (asynchronous replication): ' : '');
      for (const x of r.slice(0, 5)) console.log(`    - ${why}${k}: ${x}`);
    }
  }
  if (!ASYNC) return failed;
  const broken = failovers.reduce((n, f) => n + f.broken, 0);
  if (broken > 0) {
    console.log(`asynchronous mode: ${broken} broken failover promises: fences and claim epochs must never repeat`
      + ' and a resumed reader must never get a different stream, even when the failover lost commits');
  }
  if (stats.failures.length > 0) console.log(`asynchronous mode: ${stats.failures.length} unexpected errors reported, not failed (they follow lost commits)`);
  return broken > 0;
}
async function main() {
  const started = Date.now();
  console.log(`torture (${MODE}): seed ${SEED}, ${CLIENTS} load clients + 1 maintenance client, load ${LOAD_MS} ms, ${CYCLES} crash cycles`);
  if (CYCLES > 0 && MODE !== 'failover' && !process.env.SP_CLUSTER_DIR) throw new Error('crash cycles need SP_CLUSTER_DIR');
  if (MODE === 'failover' && !process.env.SP_TORTURE_FAILOVER_CMD) throw new Error('failover mode needs SP_TORTURE_FAILOVER_CMD');
  stats.maint = {};
  stats.excused = 0;
  stats.purgeTakeovers = 0;
  if (MODE === 'long' || MODE === 'failover') {
    logPath = path.join(process.env.TMPDIR || '/tmp', `sp_torture_calls.${process.pid}.jsonl`);
    logFile = fs.openSync(logPath, 'w');
    console.log(`answered calls are logged to ${logPath} (removed when the run passes)`);
  }
  await setupDatabase();
  const clients = makeClients(CLIENTS);
  // A violation found again by a later check is counted once.
  const distinct = new Set();
  // per check, the violations first found by the latest checkNow
  let fresh = {};
  const checkNow = async (label) => {
    const db = await connect(DB);
    const { results } = await runChecks(db, label);
    await db.end();
    fresh = {};
    for (const [name, r] of Object.entries(results)) {
      for (const x of r) {
        if (!distinct.has(`${name}: ${x}`)) (fresh[name] ||= []).push(x);
        distinct.add(`${name}: ${x}`);
      }
    }
    violations = distinct.size;
  };
  if (MODE !== 'self-test' || LOAD_MS > 0) {
    await runLoad(LOAD_MS, clients, { stop: false });
    await checkNow('after the load');
  }
  for (let cycle = 1; cycle <= CYCLES; cycle++) {
    const signal = { stop: false };
    const inflightBefore = log.filter((e) => e.st === 'indet').length;
    const delay = MODE === 'failover' ? 1000 + ri(2000) : 1500 + ri(6500);
    const load = runLoad(60000, clients, signal);
    await sleep(delay);
    crashing = true;
    if (MODE === 'failover') {
      const action = cycle <= CYCLES - SWITCHOVERS ? 'kill' : 'switchover';
      const failuresBefore = stats.failures.length;
      const began = Date.now();
      const f = await failover(action, load, signal);
      crashing = false;
      cycles++;
      const cut = log.filter((e) => e.st === 'indet' && e.ta >= began);
      const codes = {};
      for (const e of cut) codes[e.code] = (codes[e.code] || 0) + 1;
      await checkNow(`after failover ${cycle} (${action})`);
      const lostDb = await connect(DB);
      const lostNow = await countLostCalls(lostDb);
      await lostDb.end();
      const lost = Object.entries(fresh).filter(([k]) => !FAILOVER_PROMISES[k]).reduce((n, [, r]) => n + r.length, 0);
      const broken = Object.entries(fresh).filter(([k]) => FAILOVER_PROMISES[k]).reduce((n, [, r]) => n + r.length, 0);
      failovers.push({ cycle, ...f, inflight: cut.length, codes, lost, lostNow, broken, fresh,
        errors: stats.failures.length - failuresBefore });
      console.log(`failover ${cycle} (${action === 'kill' ? 'kill -9 of the leader postmaster' : 'patronictl switchover'}):`
        + ` old leader port ${f.old}, new ${f.port}; writes unavailable ${f.seconds.toFixed(2)} s;`
        + ` ${cut.length} calls in flight (codes ${JSON.stringify(codes)}); the probe saw ${JSON.stringify(f.seen)};`
        + ` ${lostNow} acknowledged calls lost (${lost} findings of the loss checks), ${broken} broken failover promises`);
      continue;
    }
    const pid = crashServer();
    if (process.env.SP_TORTURE_DEBUG) console.log(`debug: killed; ops so far ${log.length}; in flight ${clients.map((c) => c.inflight && c.inflight.op).join(",")}`);
    // Every client runs on until its connection fails, so each has a call in
    // flight (or sent after the kill) that may or may not have committed.
    await load;
    if (process.env.SP_TORTURE_DEBUG) console.log(`debug: load ended; ops so far ${log.length}`);
    const inflight = log.filter((e) => e.st === 'indet').length;
    console.log(`crash cycle ${cycle}: killed postmaster ${pid} after ${delay} ms of load; ${inflight - inflightBefore} calls in flight or sent after the kill`);
    await restartServer();
    crashing = false;
    cycles++;
    await checkNow(`after crash restart ${cycle}`);
  }
  if (CYCLES > 0) {
    // Load once more on the recovered server (retries of in-flight appends included).
    await runLoad(Math.min(LOAD_MS, 20000), clients, { stop: false });
    await checkNow('after the final load');
  }
  let selfMissed = 0;
  if (SELF_TEST) selfMissed = await selfTest();
  await dropDatabase();
  let failed = violations > 0 || stats.failures.length > 0 || selfMissed > 0;
  if (MODE === 'failover') failed = reportFailovers(failed);
  if (logFile) {
    fs.closeSync(logFile);
    if (failed) console.log(`answered calls kept in ${logPath}`);
    else fs.unlinkSync(logPath);
  } else if (failed) {
    // no running log in this mode: keep the whole call log for the diagnosis
    const dump = path.join(process.env.TMPDIR || '/tmp', `sp_torture_calls.${process.pid}.jsonl`);
    fs.writeFileSync(dump, log.map((e) => JSON.stringify({ ...e, meta: summarise(e.meta) })).join('\n') + '\n');
    console.log(`every call kept in ${dump}`);
  }

  const byOp = {};
  for (const e of log) {
    const o = (byOp[e.op] ||= { ok: 0, exp: 0, other: 0 });
    if (e.st === 'ok') o.ok++; else if (e.st === 'exp') o.exp++; else o.other++;
  }
  console.log('calls per operation (answered / expected errors / failed or in flight):');
  for (const [op, o] of Object.entries(byOp).sort()) console.log(`  ${op.padEnd(22)} ${o.ok} / ${o.exp} / ${o.other}`);
  console.log(`expected error codes: ${JSON.stringify(stats.codes)}`);
  console.log(`maintain() totals: ${JSON.stringify(stats.maint)}`);
  console.log(`calls in flight at a crash: ${stats.indet}; at the last check, capture races excused by the GC grace:`
    + ` ${stats.lastExcused ?? 0}, lock takeovers excused by a purge on a later clock: ${stats.lastPurgeTakeovers ?? 0}`);
  console.log(`unexpected errors: ${stats.failures.length}`);
  for (const f of stats.failures.slice(0, 20)) console.log(`  - ${f}`);
  if (SELF_TEST) console.log(`self-test: ${selfMissed} corruptions went unnoticed`);
  console.log(`time: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (MODE === 'failover') {
    const u = failovers.map((f) => f.seconds).sort((a, b) => a - b);
    const med = u.length ? (u.length % 2 ? u[(u.length - 1) / 2] : (u[u.length / 2 - 1] + u[u.length / 2]) / 2) : 0;
    const lost = failovers.reduce((n, f) => n + f.lost, 0);
    const lostCounted = failovers.map((f) => f.lostNow);
    const broken = failovers.reduce((n, f) => n + f.broken, 0);
    console.log(`summary: torture (failover, ${ASYNC ? 'asynchronous' : 'synchronous'}): ${stats.ops} operations (${stats.acked} acknowledged), `
      + `${failovers.filter((f) => f.action === 'kill').length} kill -9 failovers + ${failovers.filter((f) => f.action === 'switchover').length} switchovers, `
      + `unavailable median ${med.toFixed(2)} s worst ${(u[u.length - 1] ?? 0).toFixed(2)} s, `
      + `${lostCounted.reduce((a, b) => a + b, 0)} acknowledged calls lost (per failover: ${lostCounted.join(', ')}; ${lost} loss-check findings), `
      + `${broken} broken failover promises, ${violations} invariant violations in all`);
  } else {
    console.log(`summary: torture (${MODE}): ${stats.ops} operations (${stats.acked} acknowledged, ${stats.expected} expected errors), ${cycles} crash cycles, ${violations} invariant violations`);
  }
  process.exit(failed ? 1 : 0);
}

// ---------------------------------------------------------------------------
// Point-in-time recovery (--pitr; test/pitr/run.sh runs it and names itself in
// SP_PITR_HOOK for the steps outside this process). The load runs on a primary
// that archives its WAL; halfway, a restore target is read from the server's
// clock between two known commits; the cluster is restored to it. A restore to
// a time cuts history the way a crash does, at a known point: the call log is
// cut there (cutAtTarget) and the same checker judges the restored cluster.
// Then the leases and locks alive at the target, the logs' readers, more load
// and the stores the load does not touch.
// ---------------------------------------------------------------------------
// Run one step of test/pitr/run.sh (its `hook` subcommand); returns what it prints.
function pitrHook(...args) {
  return execFileSync('bash', [process.env.SP_PITR_HOOK, 'hook', ...args], { stdio: ['ignore', 'pipe', 'inherit'] }).toString();
}

// Calls answered before the target was asked for committed before it: they
// stay and must be present. Calls sent after it was answered committed after
// it: they leave the log (returned), and the checker's "never sent" and
// "answered ... present" checks then require them absent. Calls in flight
// across it may have committed on either side: indeterminate, as at a crash.
function cutAtTarget(askedTick, answeredTick) {
  const kept = [];
  const dropped = [];
  for (const e of log) {
    if (e.s > answeredTick) { dropped.push(e); continue; }
    if (e.st === 'ok' && e.a > askedTick) { e.st = 'indet'; stats.indet++; }
    kept.push(e);
  }
  log.length = 0;
  log.push(...kept);
  return dropped;
}

const pitrResults = [];
// Record one PITR expectation and print it.
function pitrExpect(ok, what) {
  pitrResults.push({ ok, what });
  console.log(`  ${ok ? 'ok' : 'FAILED'}: ${what}`);
}

// Acquire a writer lease of lease_ms through the call log (acquireWriter with its own duration).
async function pitrAcquire(cl, thread, leaseMs) {
  const vt = vnow();
  const e = await call(cl, 'ckpt.acquire', `SELECT ${S}checkpoint_acquire_writer($1, $2, $3) AS r`,
    [thread, leaseMs, vt], { thread, vt });
  if (e.st === 'ok') {
    const w = parsed(e);
    e.meta.fence = w.fence;
    e.meta.exp = w.expiresAt;
    e.w = w;
  }
  return e;
}
// Renew writer w for leaseMs through the call log.
async function pitrRenew(cl, w, leaseMs) {
  const vt = vnow();
  return call(cl, 'ckpt.renew', `SELECT ${S}checkpoint_renew_writer($1, $2, $3) AS r`,
    [writerOf(w), leaseMs, vt], { thread: w.threadId, fence: w.fence, vt, exp: vt + leaseMs });
}
// Acquire lock key for ttl through the call log; e.l is the lease when granted.
async function pitrLock(cl, key, ttl) {
  const vt = vnow();
  const e = await call(cl, 'lock.acquire', `SELECT ${S}lock_acquire($1, $2, $3) AS r`, [key, ttl, vt], { key, vt });
  if (e.st === 'ok' && e.res !== null) {
    const l = parsed(e);
    e.meta.fence = l.fence;
    e.meta.exp = l.expiresAt;
    e.meta.token = l.ownerToken;
    e.l = l;
  }
  return e;
}
// Renew lock lease l of key for ttl through the call log.
async function pitrLockRenew(cl, l, key, ttl) {
  const vt = vnow();
  return call(cl, 'lock.renew', `SELECT ${S}lock_renew($1, $2, $3, $4) AS r`, [key, l.ownerToken, ttl, vt],
    { key, fence: l.fence, vt, exp: vt + ttl });
}
const KEEP_MS = 600000;   // the longest lock TTL; the virtual clock stands still during the restore

// Halfway through the load: leases and locks on keys of their own, a marker
// commit, the target from the server's clock, a second marker, then (after the
// target) a takeover of the short lease and lock, which the restore must undo.
async function markTarget() {
  const pc = { id: 99, n: 0, db: await connect(DB) };
  const m = {};
  m.keep = await pitrAcquire(pc, 'pitr-keep', KEEP_MS);
  m.take = await pitrAcquire(pc, 'pitr-take', WRITER_LEASE_MS);
  m.lockKeep = await pitrLock(pc, 'pitr-lk-keep', KEEP_MS);
  m.lockTake = await pitrLock(pc, 'pitr-lk-take', LOCK_TTL_MS);
  const before = await call(pc, 'metadata.set', `SELECT ${S}metadata_set($1, $2, $3) AS r`, ['pitr', 'before', '"committed before the target"'],
    { ns: 'pitr', key: 'before', value: '"committed before the target"' });
  m.asked = ++tick;
  m.target = (await pc.db.query('SELECT clock_timestamp()::text AS t')).rows[0].t;
  m.answered = ++tick;
  const after = await call(pc, 'metadata.set', `SELECT ${S}metadata_set($1, $2, $3) AS r`, ['pitr', 'after', '"committed after the target"'],
    { ns: 'pitr', key: 'after', value: '"committed after the target"' });
  vskew += WRITER_LEASE_MS + LOCK_TTL_MS;   // the short lease and lock expire
  m.takeover = await pitrAcquire(pc, 'pitr-take', WRITER_LEASE_MS);
  m.lockTakeover = await pitrLock(pc, 'pitr-lk-take', LOCK_TTL_MS);
  await pc.db.end();
  const all = [m.keep, m.take, m.lockKeep, m.lockTake, before, after, m.takeover, m.lockTakeover];
  if (all.some((e) => e.st !== 'ok') || !m.lockKeep.l || !m.lockTake.l || !m.lockTakeover.l || m.takeover.w.fence !== m.take.w.fence + 1)
    throw new Error(`the set-up around the target failed: ${all.map((e) => `${e.op} ${e.st} ${e.res}`).join('; ')}`);
  console.log(`restore target ${m.target}: writer pitr-take fence ${m.take.w.fence} before it, ${m.takeover.w.fence} after;`
    + ` lock pitr-lk-take fence ${m.lockTake.l.fence} before, ${m.lockTakeover.l.fence} after`);
  return m;
}

// The --pitr run: backup, load, target, restore, then every check on the restored cluster.
async function pitrMain() {
  const started = Date.now();
  const v = {};
  stats.maint = {};
  console.log(`torture (pitr): seed ${SEED}, ${CLIENTS} load clients + 1 maintenance client, load ${LOAD_MS} ms`);
  await setupDatabase();
  {
    // pg_cron lives in the admin database; the job runs maintain() in ours.
    const admin = await connect(ADMIN_DB);
    await admin.query(`SELECT cron.schedule_in_database('sandbox_persist_maintenance', '* * * * *', 'SELECT sandbox_persist.maintain(1000)', $1)`, [DB]);
    await admin.end();
  }
  let t = Date.now();
  pitrHook('backup');
  console.log(`full backup: ${((Date.now() - t) / 1000).toFixed(1)} s`);

  const clients = makeClients(CLIENTS);
  const load = runLoad(LOAD_MS, clients, { stop: false });
  await sleep(LOAD_MS / 2);   // the target lies in the middle of the load
  const m = await markTarget();
  await load;
  const checkOn = async (label) => {
    const db = await connect(DB);
    const { total } = await runChecks(db, label);
    await db.end();
    return total;
  };
  v.primary = await checkOn('on the primary, the whole call log');

  // Restore. The virtual clock stands still meanwhile, as if the restore took no time.
  t = Date.now();
  const vFrozen = vpeek();
  SERVER = JSON.parse(pitrHook('restore', m.target).trim().split('\n').pop());
  vskew -= vpeek() - vFrozen;
  const restoreSeconds = (Date.now() - t) / 1000;
  console.log(`restored to ${m.target} in ${restoreSeconds.toFixed(1)} s (check, restore, start, promote)`);
  // The checker must notice the restore: judged against the whole call log,
  // the writes answered after the target are missing.
  const opsBefore = log.length;
  const uncut = log.map((e) => ({ st: e.st }));
  v.uncut = await checkOn('on the restored cluster, the whole call log (must report the writes after the target)');
  log.forEach((e, i) => { e.st = uncut[i].st; });
  const dropped = cutAtTarget(m.asked, m.answered);
  const ackedBefore = log.filter((e) => e.st === 'ok').length;
  const inFlight = log.filter((e) => e.st === 'indet').length;
  const ackedAfter = dropped.filter((e) => e.st === 'ok');
  console.log(`call log cut at the target: ${ackedBefore} answered before it, ${inFlight} in flight across it,`
    + ` ${dropped.length} sent after it (${ackedAfter.length} answered) of ${opsBefore}`);

  const db = await connect(DB);
  const q1 = async (sql, params = []) => (await db.query(sql, params)).rows;
  pitrExpect(v.uncut > 0, `PT0 against the whole call log the checker reports ${v.uncut} violations on the restored cluster`);
  const meta = async (k) => (await q1(`SELECT ${S}metadata_get('pitr', $1) AS r`, [k]))[0].r;
  console.log('what the target splits:');
  pitrExpect(await meta('before') === '"committed before the target"', 'PT1 the marker committed just before the target is present');
  pitrExpect(await meta('after') === null, 'PT2 the marker committed just after the target is absent');
  // Writes answered after the target, one by one: none is on the restored cluster.
  const ids = ackedAfter.filter((e) => e.op === 'ckpt.append' || e.op === 'ckpt.fork').map((e) => e.meta.id);
  const ints = ackedAfter.filter((e) => e.op === 'interrupt.create').map((e) => e.meta.id);
  const keptAppends = new Set(log.filter((e) => e.op === 'event.append').map((e) => `${e.meta.producer}/${e.meta.pseq}`));
  const chunks = ackedAfter.filter((e) => e.op === 'event.append' && !keptAppends.has(`${e.meta.producer}/${e.meta.pseq}`))
    .flatMap((e) => JSON.parse(e.meta.chunks).map((c) => c.u));
  const [present] = await q1(`SELECT
      (SELECT count(*) FROM ${T}checkpoints WHERE checkpoint_id = ANY($1)) AS cps,
      (SELECT count(*) FROM ${T}interrupts WHERE interrupt_id = ANY($2)) AS ints,
      (SELECT count(*) FROM ${T}event_log_entries WHERE chunk->>'u' = ANY($3)) AS chunks`, [ids, ints, chunks]);
  pitrExpect(ids.length + ints.length + chunks.length > 0 && Number(present.cps) + Number(present.ints) + Number(present.chunks) === 0,
    `PT3 writes answered after the target are absent: ${Number(present.cps)} of ${ids.length} checkpoints,`
    + ` ${Number(present.ints)} of ${ints.length} interrupts, ${Number(present.chunks)} of ${chunks.length} event-log chunks`);

  console.log('leases and locks alive at the target (the injected clock stood still during the restore):');
  const pc = { id: 98, n: 0, db };
  const keepRenew = await pitrRenew(pc, m.keep.w, KEEP_MS);
  pitrExpect(keepRenew.st === 'ok', 'PT4 a writer lease unexpired at the target renews on the restored cluster');
  const conversation = JSON.stringify([{ role: 'user', content: 'after the restore' }]);
  const checkpoint = { id: 'pitr-keep-1', threadId: 'pitr-keep', parentCheckpointId: null, createdAt: Date.now(), reason: 'automatic', files: [], artifacts: [] };
  let vt = vnow();
  const keepAppend = await call(pc, 'ckpt.append', `SELECT ${S}checkpoint_append($1, $2, $3) AS r`,
    [JSON.stringify({ checkpoint, expectedHeadId: null, writer: JSON.parse(writerOf(m.keep.w)) }), conversation, vt],
    { thread: 'pitr-keep', id: checkpoint.id, fence: m.keep.w.fence, vt, keys: [], putSend: Infinity, files: '[]', parent: null, conversation });
  pitrExpect(keepAppend.st === 'ok', 'PT5 ... and its holder appends a checkpoint with it');
  const keepSteal = await pitrAcquire(pc, 'pitr-keep', WRITER_LEASE_MS);
  pitrExpect(keepSteal.code === 'SP005', `PT6 ... while another acquire on its thread is SP005 (got ${keepSteal.code ?? keepSteal.st})`);
  const lostRenew = await pitrRenew(pc, m.takeover.w, WRITER_LEASE_MS);
  pitrExpect(lostRenew.code === 'SP006', `PT7 the writer granted after the target (fence ${m.takeover.w.fence}) is refused: SP006 (got ${lostRenew.code ?? lostRenew.st})`);
  const oldRenew = await pitrRenew(pc, m.take.w, WRITER_LEASE_MS);
  pitrExpect(oldRenew.code === 'SP006', `PT8 the writer expired at the target (fence ${m.take.w.fence}) cannot renew: SP006 (got ${oldRenew.code ?? oldRenew.st})`);
  const retake = await pitrAcquire(pc, 'pitr-take', WRITER_LEASE_MS);
  pitrExpect(retake.st === 'ok' && retake.w.fence > m.take.w.fence,
    `PT9 its thread is taken over: fence ${retake.w?.fence} > ${m.take.w.fence}`);
  const writerReissued = retake.st === 'ok' && retake.w.fence <= m.takeover.w.fence;
  const lockSteal = await pitrLock(pc, 'pitr-lk-keep', LOCK_TTL_MS);
  pitrExpect(lockSteal.st === 'ok' && lockSteal.res === null, 'PT10 a lock unexpired at the target is still held (acquire: NULL)');
  const lockRenew = await pitrLockRenew(pc, m.lockKeep.l, 'pitr-lk-keep', KEEP_MS);
  pitrExpect(lockRenew.st === 'ok' && lockRenew.res !== null, 'PT11 ... and its holder renews it');
  const lostRelease = await call(pc, 'lock.release', `SELECT ${S}lock_release($1, $2) AS r`,
    ['pitr-lk-take', m.lockTakeover.l.ownerToken], { key: 'pitr-lk-take', fence: m.lockTakeover.l.fence });
  pitrExpect(lostRelease.st === 'ok' && lostRelease.res === false, 'PT12 the lock granted after the target is not held: its release is false');
  const oldLockRenew = await pitrLockRenew(pc, m.lockTake.l, 'pitr-lk-take', LOCK_TTL_MS);
  pitrExpect(oldLockRenew.st === 'ok' && oldLockRenew.res === null, 'PT13 the lock expired at the target cannot renew (NULL)');
  const relock = await pitrLock(pc, 'pitr-lk-take', LOCK_TTL_MS);
  pitrExpect(relock.st === 'ok' && relock.l && relock.l.fence > m.lockTake.l.fence,
    `PT14 its key is granted again: fence ${relock.l?.fence} > ${m.lockTake.l.fence}`);
  const lockReissued = relock.l ? relock.l.fence <= m.lockTakeover.l.fence : false;
  // The restore promotes onto a new timeline, and fences carry the timeline
  // (docs/contract/failover.md): nothing handed out in the cut-off window comes back.
  pitrExpect(!writerReissued,
    `PT24 the writer fence handed out after the target (${m.takeover.w.fence}) is not handed out again: ${retake.w?.fence}`);
  pitrExpect(!lockReissued,
    `PT25 the lock fence handed out after the target (${m.lockTakeover.l.fence}) is not handed out again: ${relock.l?.fence}`);

  // Event-log readers: what they saw up to the restored tail is still there;
  // a resume token past it is refused (SP405), never given other chunks quietly.
  console.log('event-log readers:');
  const tails = new Map((await q1(`SELECT run_id, tail_seq, lpad(to_hex(tail_digest), 16, '0') AS tail_digest FROM ${T}event_logs`))
    .map((r) => [r.run_id, { seq: Number(r.tail_seq), digest: r.tail_digest }]));
  for (const k of [...seenChunks.keys()]) {
    const [run, seq] = [k.slice(0, k.lastIndexOf('/')), Number(k.slice(k.lastIndexOf('/') + 1))];
    if (!(seq <= (tails.get(run)?.seq ?? 0))) seenChunks.delete(k);
  }
  let past = 0;
  let told = 0;
  for (const cl of clients) {
    for (const [run, cursor] of Object.entries(cl.cursors)) {
      if (cursor.seq <= (tails.get(run)?.seq ?? 0)) continue;
      past++;
      try {
        await q1(`SELECT ${S}event_log_read_verified($1, $2, $3, 10) AS r`, [run, cursor.seq, cursor.digest]);
      } catch (err) {
        if (err.code === 'SP405') told++;   // EVENT_LOG_OFFSET_DIVERGED: the entries it read are not here
      }
      // the reader starts again from what the server holds
      if (tails.has(run)) cl.cursors[run] = tails.get(run);
      else delete cl.cursors[run];
    }
  }
  pitrExpect(past > 0 && past === told, `PT15 readers whose resume token is past the restored tail: ${past}; each read is refused with SP405: ${told}`);
  console.log(`  offsets read before the restore and at or below the restored tails: ${seenChunks.size} (the checker compares them with what later reads get)`);

  v.restored = await checkOn('on the restored cluster, the log cut at the target');

  // More load on the restored cluster: the clients keep their leases and
  // locks (stale ones are refused and taken over), but their appends start
  // afresh and interrupts created after the target are forgotten.
  const created = new Set(log.filter((e) => e.op === 'interrupt.create').map((e) => e.meta.id));
  INTERRUPTS.splice(0, INTERRUPTS.length, ...INTERRUPTS.filter((id) => created.has(id)));
  for (const cl of clients) { cl.lastAppend = null; cl.retryAfterCrash = null; }
  const restartTick = tick;
  await runLoad(Math.max(3000, Math.round(LOAD_MS / 2)), clients, { stop: false });
  const okAfter = {};
  for (const e of log) if (e.s > restartTick && e.st === 'ok') okAfter[e.op] = (okAfter[e.op] || 0) + 1;
  // (renew is PT4's and PT11's: under this load most renews meet a takeover)
  const WRITES = ['ckpt.acquire', 'ckpt.append', 'ckpt.fork', 'blob.put', 'blob.upload_commit', 'run.create', 'run.update',
    'run.claim', 'lock.acquire', 'lock.release', 'event.append', 'event.close', 'interrupt.create', 'interrupt.resolve', 'metadata.set', 'maintain'];
  const missing = WRITES.filter((op) => !okAfter[op]);
  pitrExpect(missing.length === 0, `PT16 the load writes every store on the restored cluster: ${WRITES.map((op) => `${op} ${okAfter[op] || 0}`).join(', ')}`);
  v.after = await checkOn('on the restored cluster after more load');

  // The stores the load leaves alone: one write and a read back each.
  const [o] = await q1(`SELECT
      ${S}instance_upsert('{"key":"pitr-k","provider":"docker","providerSandboxId":"sb","threadId":"pitr-t","updatedAt":1}') IS NOT NULL AS a,
      ${S}instance_get('pitr-k')->>'providerSandboxId' AS instance`);
  await q1(`SELECT ${S}message_save_thread('pitr-t', '[{"role":"user","content":"after the restore"}]')`);
  await q1(`SELECT ${S}generation_run_create_or_resume('{"runId":"pitr-g","threadId":"pitr-t","activity":"image","provider":"p","model":"m","startedAt":1}')`);
  await q1(`SELECT ${S}artifact_save('{"artifactId":"pitr-a","runId":"pitr-g","threadId":"pitr-t","name":"a.png","mimeType":"image/png","size":4,"createdAt":1}')`);
  const [r] = await q1(`SELECT ${S}instance_get('pitr-k')->>'providerSandboxId' AS instance,
      ${S}message_load_thread('pitr-t')->0->>'content' AS message,
      ${S}generation_run_get('pitr-g')->>'model' AS gen, ${S}artifact_get('pitr-a')->>'name' AS artifact`);
  pitrExpect(o.a && r.instance === 'sb' && r.message === 'after the restore' && r.gen === 'm' && r.artifact === 'a.png',
    'PT17 instances, messages, generation runs and artifacts accept a write and read it back');
  await db.end();

  const failedExpectations = pitrResults.filter((x) => !x.ok).length;
  const violationsTotal = v.primary + v.restored + v.after;
  const failed = failedExpectations > 0 || violationsTotal > 0 || stats.failures.length > 0;
  console.log(`unexpected errors: ${stats.failures.length}`);
  for (const f of stats.failures.slice(0, 20)) console.log(`  - ${f}`);
  console.log(`time: ${((Date.now() - started) / 1000).toFixed(1)} s`);
  console.log(`torture (pitr) result: ${stats.ops} operations; target halfway: ${ackedBefore} answered before, ${inFlight} in flight,`
    + ` ${ackedAfter.length} answered after (all absent); checker violations ${v.primary} / ${v.restored} / ${v.after}`
    + ` (primary / restored / restored after more load); ${pitrResults.length - failedExpectations} of ${pitrResults.length} PITR checks;`
    + ` restore ${restoreSeconds.toFixed(1)} s; fences reissued after the restore: writer ${writerReissued ? 'yes' : 'no'}, lock ${lockReissued ? 'yes' : 'no'}`);
  process.exit(failed ? 1 : 0);
}

(MODE === 'pitr' ? pitrMain() : main()).catch(async (err) => {
  console.error(`aborted: ${err.stack || err}`);
  await dropDatabase().catch(() => {});
  console.log(`summary: torture (${MODE}): ${stats.ops} operations (${stats.acked} acknowledged, ${stats.expected} expected errors), ${cycles} crash cycles, ${violations} invariant violations`);
  process.exit(1);
});
