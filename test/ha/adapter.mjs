// The Node adapter across failovers (cases H10-H14 of docs/contract/README.md
// §8): the built adapter (clients/node/dist) talks to the cluster through
// HAProxy (PGHOST/PGPORT) while SP_HA_CTL kills the leader or switches over.
//
// Through each failover, at once:
//   - a checkpoint writer holds one lease (TTL 60 s, longer than a failover)
//     and appends; a call that reports CONNECTION_LOST with outcomeUnknown is
//     resolved the way the README tells apps to (read the head back, retry the
//     same id);
//   - a producer appends to an event log (the adapter retries by itself) and a
//     reader follows the log;
//   - a lock holder keeps its lease (TTL 20 s) while a waiter waits; the holder
//     lets go after the failover and the waiter must be granted within the
//     poll fallback (its LISTEN connection reconnects to the new leader).
// Checked after each failover: every acknowledged checkpoint and chunk is
// present (H10); the writer's lease still works in synchronous mode (H11); the
// waiter and the reader did not hang past the poll fallback, and the listener
// came back (H12); fences never repeat (H13) and no reader was given a stream
// other than the log's (H14). --replication async reports losses and fails only
// on what that mode promises (docs/contract/failover.md §3): H13, H14 (every
// chunk the reader got continues its own stream, checked against the digests
// of its offsets; a resumed read either continues it or fails with
// EVENT_LOG_OFFSET_DIVERGED, after which the reader starts over from -1), and
// H12 against what survived: the reader reaches the log's tail within the
// poll fallback. Acknowledged chunks and checkpoints lost are counted (H10).
// Prints one summary line; exits non-zero on a violation.
//
//   node adapter.mjs [--kills N] [--switchovers N] [--replication sync|async]
import { createRequire } from 'node:module'
import { execFile } from 'node:child_process'
import crypto from 'node:crypto'

const require = createRequire(new URL('../../clients/node/package.json', import.meta.url))
const pg = require('pg')
const sp = await import(new URL('../../clients/node/dist/index.js', import.meta.url))

const argv = process.argv.slice(2)
const numArg = (name, dflt) => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : dflt)
const KILLS = numArg('--kills', 1)
const SWITCHOVERS = numArg('--switchovers', 0)
const ASYNC = argv.includes('--replication') && argv[argv.indexOf('--replication') + 1] === 'async'
const DB = process.env.SP_HA_ADAPTER_DB || 'sp_ha_adapter'
const LOCK_MAX_POLL_MS = 2000
const READ_POLL_MS = 1000
// Past the poll fallback: one poll interval, the adapter's largest retry pause
// (1 s) and a second of slack for a loaded two-core machine.
const HANG_MS = (poll) => poll + 2000
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// Each finding once: a later check that finds the same offset or id again adds nothing.
class Findings extends Array {
  constructor() { super(); this.keys = new Set() }
  add(key, text) { if (!this.keys.has(key)) { this.keys.add(key); super.push(text) } }
  push(...texts) { for (const t of texts) this.add(t, t); return this.length }
  static get [Symbol.species]() { return Array }
}
const violations = new Findings()
const losses = new Findings()
const seen = {}   // what callers saw: "store.method: CODE outcomeUnknown=x" -> count
const slowest = {}   // store.method -> longest call during a failover (ms)
const events = []   // the adapter's reports (listener.lost, listener.restored, ...)
const logger = { warn: (_m, r) => events.push({ event: r.event, at: Date.now() }) }

function note(what, err) {
  const k = err instanceof sp.SandboxPersistConnectionError
    ? `${what}: ${err.code} (${err.reason}, outcomeUnknown=${err.outcomeUnknown}, ${err.attempts} attempts)`
    : `${what}: ${err.code ?? err.name} ${err.code ? '' : err.message.slice(0, 60)}`
  seen[k] = (seen[k] || 0) + 1
}
async function timed(what, f) {
  const t = Date.now()
  try {
    return await f()
  } finally {
    slowest[what] = Math.max(slowest[what] ?? 0, Date.now() - t)
  }
}

function ctl(action) {
  return new Promise((resolve, reject) => {
    execFile(process.env.SP_HA_CTL, [action], { timeout: 300000 }, (err, stdout, stderr) =>
      (err ? reject(new Error(`${action}: ${err.message} ${stderr}`)) : resolve(stdout.toString().trim())))
  })
}

async function setup() {
  const admin = new pg.Client({ database: 'postgres' })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${DB}`)
  await admin.end()
  const c = new pg.Client({ database: DB })
  await c.connect()
  await c.query('CREATE EXTENSION sandbox_persist')
  await c.end()
}

const pool = new pg.Pool({ database: DB, max: 12, connectionTimeoutMillis: 2000 })
pool.on('error', () => {})
const checkpoints = sp.postgresCheckpoints(pool, { leaseDurationMs: 60000, renewAfterMs: 20000 })
// The LISTEN connection goes where the pool goes (HAProxy's primary port, the
// suite's database): the adapter does not read the pool's settings.
const listenerClient = () => new pg.Client({ database: DB, connectionTimeoutMillis: 2000 })
const locks = sp.postgresLocks(pool, { ttlMs: 20000, renewEveryMs: 3000, maxPollMs: LOCK_MAX_POLL_MS, logger, listenerClient })
const durability = sp.postgresDurability(pool, { fallbackPollMs: READ_POLL_MS, logger, listenerClient })

// --- the checkpoint writer ------------------------------------------------
// After an asynchronous failover lost the lease's grant, the old lease row may
// be back and unexpired (WRITER_CONFLICT for a minute): the writer moves to a
// fresh thread instead of waiting for it.
let THREAD = 'ha-thread'
let restarts = 0
const acked = []   // checkpoint ids answered, every thread
let chain = []   // this thread's answered checkpoints, oldest first
let lease = null
const fencesSeen = []   // [fence, failover index when acquired]
let n = 0
let lastRenew = 0
async function acquire(cycle) {
  try {
    lease = await timed('checkpoints.acquireWriter', () => checkpoints.acquireWriter(THREAD))
  } catch (err) {
    if (!ASYNC || err.code !== 'SANDBOX_SNAPSHOT_WRITER_CONFLICT') throw err
    losses.add(`conflict ${THREAD}`, `failover ${cycle}: thread ${THREAD} is held by a lease the failover brought back (WRITER_CONFLICT)`)
    THREAD = `ha-thread-${++restarts}`
    chain = []
    lease = await timed('checkpoints.acquireWriter', () => checkpoints.acquireWriter(THREAD))
  }
  lastRenew = Date.now()
  fencesSeen.push([`${THREAD}/${lease.fence}`, cycle])
}
// Append until stop.stop; returns how many appends were answered after the failover began.
async function writer(stop, cycle, state) {
  let after = 0
  while (!stop.stop) {
    if (Date.now() - lastRenew > 10000) {
      // the app's duty: renew well inside the TTL (the adapter retries a renewal by itself)
      try {
        await timed('lease.renew', () => lease.renew())
        lastRenew = Date.now()
      } catch (err) {
        note('lease.renew', err)
        if (!ASYNC) violations.push(`H11 failover ${cycle}: renewing the writer lease failed: ${err.code ?? err.message}`)
        if (err.code === 'SANDBOX_SNAPSHOT_WRITER_LOST') await acquire(cycle)
      }
    }
    const id = `cp-${++n}`
    const input = () => ({
      checkpoint: { id, threadId: THREAD, parentCheckpointId: chain.at(-1) ?? null, createdAt: Date.now(), reason: 'automatic', files: [], artifacts: [], conversation: [{ role: 'user', content: id }] },
      expectedHeadId: chain.at(-1) ?? null,
      writer: lease,
    })
    for (let attempt = 0; ; attempt++) {
      try {
        await timed('checkpoints.append', () => checkpoints.append(input()))
        acked.push(id)
        chain.push(id)
        if (state.failing) after++
        break
      } catch (err) {
        note('checkpoints.append', err)
        if (err instanceof sp.SandboxPersistConnectionError && err.outcomeUnknown) {
          // The README's advice: read the head back; our id there means it committed.
          const head = await timed('checkpoints.getHead', () => checkpoints.getHead(THREAD)).catch((e) => (note('checkpoints.getHead', e), undefined))
          if (head === id) { acked.push(id); chain.push(id); if (state.failing) after++; break }
          if (head !== undefined) continue
        }
        if (err instanceof sp.SandboxPersistConnectionError) { await sleep(200); continue }
        if (err.code === 'SANDBOX_SNAPSHOT_WRITER_LOST' || err.code === 'SANDBOX_SNAPSHOT_STALE_HEAD') {
          if (!ASYNC) violations.push(`H11 failover ${cycle}: the writer's append failed with ${err.code} although its lease (60 s) outlives the failover`)
          else losses.push(`failover ${cycle}: the writer's append failed with ${err.code} (its lease or head was lost)`)
          // async: the lease or the head was lost with the commits; start over from the stored head
          const head = await checkpoints.getHead(THREAD)
          while (chain.length && chain.at(-1) !== head) { const id = chain.pop(); losses.add(`cp ${id}`, `H10 failover ${cycle}: acknowledged checkpoint ${id} is missing`) }
          if (ASYNC) { THREAD = `ha-thread-${++restarts}`; chain = [] }
          await acquire(cycle)
          continue
        }
        throw err
      }
    }
    await sleep(20)
  }
  return after
}

// --- the event-log producer and reader -------------------------------------
const RUN = 'ha-run'
const producer = durability(RUN)
const appended = new Map()   // offset -> chunk text, answered
async function produce(stop, state) {
  let i = 0
  while (!stop.stop) {
    const chunk = { type: 'TEXT', n: ++i, at: state.cycle }
    try {
      const [offset] = await timed('durability.append', () => producer.append([chunk]))
      appended.set(offset, JSON.stringify(chunk))
    } catch (err) {
      note('durability.append', err)
      await sleep(200)
    }
    await sleep(30)
  }
}
// An offset's parts: v2.<tag>.<seq>.<digest> (docs/contract/event-log.md §4).
const offsetParts = (offset) => {
  const [, , seq, digest] = offset.split('.')
  return { seq: Number(seq), digest: BigInt('0x' + digest) }
}
// The 64-bit hash of one entry (docs/contract/failover.md §2), computed here
// from the chunk's text (the adapter stores JSON.stringify of each chunk).
function entryHash(seq, text) {
  const be = Buffer.alloc(8)
  be.writeBigInt64BE(BigInt(seq))
  return crypto.createHash('sha256').update(be).update(Buffer.from(text, 'utf8')).digest().readBigUInt64BE(0)
}
const received = new Map()   // seq -> chunk text, as the reader got it (this stream)
let lastOffset = null   // the last offset the reader got (this stream)
let streams = 1   // 1 + the times the reader started over after EVENT_LOG_OFFSET_DIVERGED
let diverged = 0   // reads refused with EVENT_LOG_OFFSET_DIVERGED, this failover
let lastReceivedAt = 0
const readerAbort = new AbortController()
let readerDone = Promise.resolve()
const startReader = () => (readerDone = (async () => {
  // resumes after an error from the last offset it holds, like an SSE client;
  // after EVENT_LOG_OFFSET_DIVERGED (asynchronous mode) it starts over from -1
  let from = '-1'
  let chain = 0n   // the running digest of the chunks this stream received
  let at = 0
  while (!readerAbort.signal.aborted) {
    try {
      for await (const { offset, chunk } of durability(RUN).read(from, readerAbort.signal)) {
        const text = JSON.stringify(chunk)
        const { seq, digest } = offsetParts(offset)
        if (seq !== at + 1) violations.add(`H14 ${streams}/${seq} gap`, `H14 reader: PROMISE BROKEN: offset ${offset} followed seq ${at}`)
        chain ^= entryHash(seq, text)
        if (chain !== digest) {
          violations.add(`H14 ${streams}/${seq}`, `H14 reader: PROMISE BROKEN: ${text} at ${offset} does not continue the stream the reader`
            + ` received (its chunks chain to ${chain.toString(16).padStart(16, '0')}): a different stream`)
          chain = digest
        }
        if (received.has(seq) && received.get(seq) !== text) violations.add(`H14 ${streams}/${seq} changed`, `H14 reader: PROMISE BROKEN: offset ${offset} changed under the reader`)
        received.set(seq, text)
        lastOffset = offset
        lastReceivedAt = Date.now()
        at = seq
        from = offset
      }
    } catch (err) {
      note('durability.read', err)
      if (err.code === 'EVENT_LOG_OFFSET_DIVERGED') {
        diverged++
        if (!ASYNC) violations.add(`H14 diverged ${from}`, `H14 reader: EVENT_LOG_OFFSET_DIVERGED at ${from} in synchronous mode (nothing acknowledged may be lost)`)
        // the entries it read are gone: a new stream, from the start
        from = '-1'
        chain = 0n
        at = 0
        lastOffset = null
        received.clear()
        streams++
        continue
      }
      await sleep(200)
    }
  }
})())

// --- the lock holder and waiter --------------------------------------------
async function lockRound(cycle, failoverDone) {
  const key = `ha-lock-${cycle}`
  let holderAborted = null
  let releasedAt = 0
  let letGo
  const gate = new Promise((r) => { letGo = r })
  let entered
  const inside = new Promise((r) => { entered = r })
  const holder = locks.withLock(key, async (signal) => {
    entered()
    signal.addEventListener('abort', () => { holderAborted = signal.reason })
    await gate
  }).then(() => { releasedAt = Date.now() }, (err) => note('locks.withLock (holder)', err))
  await inside
  let grantedAt = 0
  const waiter = locks.withLock(key, async () => { grantedAt = Date.now() })
    .catch((err) => { note('locks.withLock (waiter)', err); violations.push(`H12 failover ${cycle}: the lock waiter failed: ${err.message}`) })
  return async () => {
    await failoverDone
    letGo()
    await holder
    await waiter
    if (holderAborted && !ASYNC) violations.push(`H11 failover ${cycle}: the lock holder lost its lease (${holderAborted.message}) during a failover shorter than its TTL`)
    if (grantedAt && releasedAt && grantedAt - releasedAt > HANG_MS(LOCK_MAX_POLL_MS))
      violations.push(`H12 failover ${cycle}: the waiter was granted ${grantedAt - releasedAt} ms after the release (poll fallback ${LOCK_MAX_POLL_MS} ms)`)
    return grantedAt && releasedAt ? grantedAt - releasedAt : null
  }
}

// --- one failover -------------------------------------------------------------
async function checkAll(cycle) {
  const c = new pg.Client({ database: DB })
  await c.connect()
  try {
    const stored = new Set((await c.query(`SELECT checkpoint_id FROM sandbox_persist.checkpoints`)).rows.map((r) => r.checkpoint_id))
    for (const id of acked) if (!stored.has(id)) (ASYNC ? losses : violations).add(`cp ${id}`, `H10 failover ${cycle}: acknowledged checkpoint ${id} is missing`)
    const snap = await producer.snapshot()
    const log = new Map(snap.map((e) => [e.offset, JSON.stringify(e.chunk)]))
    for (const [offset, text] of appended) {
      if (log.get(offset) !== text) (ASYNC ? losses : violations).add(`chunk ${offset}`, `H10 failover ${cycle}: acknowledged chunk at ${offset} ${log.has(offset) ? 'holds other content' : 'is missing'}`)
    }
    // Synchronous mode: what the reader got is what the log holds. (In
    // asynchronous mode the log may since have lost entries the reader got: its
    // next read is refused, checked by the reader's digest chain above.)
    if (!ASYNC) {
      const bySeq = new Map(snap.map((e) => [offsetParts(e.offset).seq, JSON.stringify(e.chunk)]))
      for (const [seq, text] of received) {
        if (bySeq.has(seq) && bySeq.get(seq) !== text)
          violations.add(`H14 ${seq}`, `H14 failover ${cycle}: PROMISE BROKEN: the reader got ${text} at seq ${seq}, the log now holds ${bySeq.get(seq)} (a reader must never be given a different stream)`)
      }
    }
    const fences = fencesSeen.map(([f]) => f)
    if (new Set(fences).size !== fences.length)
      violations.add(`H13 ${fences.length}`, `H13 failover ${cycle}: PROMISE BROKEN: a writer fence was handed out twice (thread/fence: ${fences.join(', ')}): fences must never repeat across a failover`)
  } finally {
    await c.end()
  }
}

const report = []
async function failover(cycle, action) {
  const stop = { stop: false }
  const state = { failing: false, cycle }
  const eventsBefore = events.length
  const lossesBefore = losses.length
  const fail = (what) => (err) => { violations.push(`${what} failover ${cycle}: ${err.stack || err}`); return 0 }
  const w = writer(stop, cycle, state).catch(fail('writer'))
  const p = produce(stop, state).catch(fail('producer'))
  let failoverDone
  const done = new Promise((r) => { failoverDone = r })
  const finishLocks = await lockRound(cycle, done)
  await sleep(1000)
  state.failing = true
  const t0 = Date.now()
  await ctl(action)
  await ctl('settle')
  failoverDone()
  const lockWait = await finishLocks()
  // keep writing a little on the new leader: the lease must still work there
  await sleep(1500)
  stop.stop = true
  const after = await w
  await p
  if (after === 0 && !ASYNC) violations.push(`H11 failover ${cycle}: no append was answered after the failover began`)
  // the reader catches up, within the poll fallback, with everything answered
  // (synchronous) or with what the log holds now (asynchronous: the tail that
  // survived, reached again from -1 after EVENT_LOG_OFFSET_DIVERGED)
  const want = ASYNC ? (await producer.snapshot()).at(-1)?.offset : [...appended.keys()].at(-1)
  const t = Date.now()
  const reached = () => lastOffset !== null
    && (ASYNC ? lastOffset === want : received.get(offsetParts(want).seq) === appended.get(want))
  while (want && !reached() && Date.now() - t < 30000) await sleep(50)
  const readLag = Date.now() - t
  if (want && !reached()) violations.push(`H12 failover ${cycle}: the reader never got ${want} (it is at ${lastOffset})`)
  else if (readLag > HANG_MS(READ_POLL_MS)) violations.push(`H12 failover ${cycle}: the reader got the last chunk ${readLag} ms late (poll fallback ${READ_POLL_MS} ms)`)
  const refused = diverged
  diverged = 0
  const ev = events.slice(eventsBefore).map((e) => e.event)
  if (!ev.includes('listener.lost') && !ev.includes('listener.connect_failed'))
    violations.push(`H12 failover ${cycle}: the LISTEN connection did not notice the failover (events: ${ev.join(', ') || 'none'})`)
  else if (ev.lastIndexOf('listener.restored') < Math.max(ev.lastIndexOf('listener.lost'), ev.lastIndexOf('listener.connect_failed')))
    violations.push(`H12 failover ${cycle}: the LISTEN connection did not come back on the new leader (events: ${ev.join(', ')})`)
  await checkAll(cycle)
  const lostNow = losses.length - lossesBefore
  report.push({ cycle, action, seconds: (Date.now() - t0) / 1000, lockWait, readLag, refused, lost: lostNow, events: [...new Set(ev)] })
  console.log(`adapter failover ${cycle} (${action}): lock waiter granted ${lockWait} ms after the release, reader caught up in ${readLag} ms`
    + ` (${refused} reads refused with EVENT_LOG_OFFSET_DIVERGED), ${lostNow} acknowledged checkpoints and chunks lost, `
    + `listener: ${ev.join(' -> ') || 'no event'}`)
}

let exitCode = 0
try {
  await setup()
  startReader()
  await acquire(0)
  const actions = [...Array(KILLS).fill('kill'), ...Array(SWITCHOVERS).fill('switchover')]
  for (let i = 0; i < actions.length; i++) await failover(i + 1, actions[i])
  // the lease taken before the first failover is the one still writing
  if (!ASYNC && fencesSeen.length !== 1) violations.push(`H11: the writer had to acquire ${fencesSeen.length - 1} new leases`)
  await lease.release()
} catch (err) {
  violations.push(`aborted: ${err.stack || err}`)
} finally {
  readerAbort.abort()
  await Promise.race([readerDone, sleep(3000)])
  await locks.close()
  await durability.close()
  await sp.closeSharedListeners()
  await pool.end().catch(() => {})
}
console.log('what the adapter\'s callers saw (errors that reached them; idempotent calls were retried inside the adapter):')
for (const [k, v] of Object.entries(seen)) console.log(`  ${k}: ${v}`)
if (Object.keys(seen).length === 0) console.log('  no error')
console.log(`longest calls across the failovers (ms): ${JSON.stringify(slowest)}`)
// The first few of each kind, and how many there were.
function show(list, label) {
  const kinds = {}
  for (const x of list) {
    const k = x.split(' ')[0]
    kinds[k] = (kinds[k] || 0) + 1
    if (kinds[k] <= 5) console.log(`  ${label} ${x}`)
  }
  for (const [k, v] of Object.entries(kinds)) if (v > 5) console.log(`  ${label} ${k}: ${v - 5} more`)
}
show(losses, 'lost (asynchronous replication):')
show(violations, 'VIOLATION')
if (violations.length) exitCode = 1
console.log(`summary: adapter across failovers (${ASYNC ? 'asynchronous' : 'synchronous'}): ${report.length} failovers, `
  + `${acked.length} checkpoints and ${appended.size} chunks acknowledged, ${losses.length} lost`
  + ` (per failover: ${report.map((r) => r.lost).join(', ') || 'none'}), `
  + `${report.reduce((a, r) => a + r.refused, 0)} resumed reads refused with EVENT_LOG_OFFSET_DIVERGED, reader streams ${streams}, `
  + `${violations.length} violations`)
process.exit(exitCode)
