// The stream server's crash suite (run by test/streams_crash/run.sh, which
// starts the private cluster named by SC_DIR / SC_PORT / SC_BIN).
//
// The stream server is the built adapter's CLI (clients/node/dist/streams/
// cli.js --insecure-local) in a child process. Four writers, one a stream
// (two application/json, two application/octet-stream; bodies of 1 B to
// 64 KiB, a fifth of them over 8 KiB), each an idempotent producer (epoch 0,
// seq 0, 1, ...), append as fast as they can. A request that fails (no
// answer, a 5xx) is sent again with the same seq and the same body until it
// is acknowledged: the producer's dedupe makes that safe, so in the end every
// append sent must be stored exactly once. Every body starts with a tag
// "SCT:<writer>:<seq>;" so that a missing or doubled one can be named.
//
// On the 400th acknowledged append, and again 400 acknowledgements after the
// first recovery, the postmaster and every process of the data directory get
// SIGKILL; the cluster is started again at once (crash recovery) while the
// writers retry. The stream server is never restarted.
//
// Checks (SC = stream crash):
//   SC1 each stream read over HTTP from -1 is byte-exact the acknowledged appends in order
//   SC2 storage holds each append exactly once and whole: one row per seq, equal to its body
//   SC3 the offsets acknowledged are strictly increasing, name the stored entry, and a read
//       from one acknowledged before a crash returns exactly the appends after it
//   SC4 right after each recovery, every append acknowledged before the kill reads back
//   SC5 during the outages the server answered 503 or the connection failed, never 500
//   SC6 the server recovered by itself: same process, every writer acknowledged again
//       within 60 s of the restart, no failed request outside the outages
//   SC7 the crashes were real: the cluster's processes were all gone, and PostgreSQL ran
//       crash recovery ("automatic recovery in progress") once per crash
//
// Then, report-only: the same workload against the reference server,
// @durable-streams/server file-backed (bench/suites/ds_server), killed with
// SIGKILL and started again on its data directory.
//
// Env: STREAMS_CRASH_APPENDS (per writer, default 400), STREAMS_CRASH_REFERENCE=0 skips
// the reference run. Prints one "summary: streams crash: ..." line; exits non-zero on
// a failed check.
import { fork, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(HERE, '../..')
const NODE_DIR = path.join(ROOT, 'clients/node')
const require = createRequire(path.join(NODE_DIR, 'package.json'))
const pg = require('pg')

const DIR = process.env.SC_DIR
const PORT = process.env.SC_PORT
const BIN = process.env.SC_BIN
const DATA = path.join(DIR, 'data')
const DATA_REAL = fs.realpathSync(DATA)
const PER_WRITER = Number(process.env.STREAMS_CRASH_APPENDS ?? 400)
const CRASHES = 2
const CRASH_EVERY = 400 // acknowledged appends (all writers) before a crash
const RECOVERY_BOUND_MS = 60_000
const STREAMS = [
  { path: 'crash-json-0', json: true },
  { path: 'crash-json-1', json: true },
  { path: 'crash-bin-0', json: false },
  { path: 'crash-bin-1', json: false },
]
const started = Date.now()
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const secs = (ms) => (ms / 1000).toFixed(1)

let passed = 0
let failed = 0
function check(name, ok, detail) {
  if (ok) passed++
  else failed++
  console.log(`${ok ? 'ok' : 'not ok'} - ${name}${detail ? ` (${detail})` : ''}`)
}

// --- bodies ----------------------------------------------------------------------
// Sizes: half small, 3 in 10 up to 8 KiB, 1 in 5 past 8 KiB (TOASTed, several WAL pages).
function size() {
  const r = Math.random()
  if (r < 0.5) return 1 + Math.floor(Math.random() * 256)
  if (r < 0.8) return 257 + Math.floor(Math.random() * 7935)
  return 8193 + Math.floor(Math.random() * 57344)
}
const tag = (w, seq) => `SCT:${w}:${seq};`
function makeBody(w, seq, json) {
  if (json) return Buffer.from(JSON.stringify({ t: tag(w, seq), pad: randomBytes(Math.ceil(size() * 0.75)).toString('base64') }))
  return Buffer.concat([Buffer.from(tag(w, seq)), randomBytes(size())])
}
// The tags in a stream's content, in order (for naming what is missing or doubled).
function tagsOf(content) {
  return [...content.toString('latin1').matchAll(/SCT:(\d+):(\d+);/g)].map((m) => Number(m[2]))
}
/** What a stream should read as: the bodies' bytes, or for JSON the messages joined by ','. */
const expected = (s, bodies) => (s.json ? Buffer.from(bodies.map((b) => b.toString()).join(',')) : Buffer.concat(bodies))

// --- HTTP ------------------------------------------------------------------------
/** A stream read from `offset` to the tail, following Stream-Next-Offset: bytes, or JSON messages joined by ','. */
async function readFrom(base, s, offset) {
  const parts = []
  for (let pages = 0; ; pages++) {
    if (pages > 10_000) throw new Error('no Stream-Up-To-Date after 10 000 pages')
    const r = await fetch(`${base}/v1/stream/${s.path}?offset=${encodeURIComponent(offset)}`, { signal: AbortSignal.timeout(20_000) })
    const body = Buffer.from(await r.arrayBuffer())
    if (r.status !== 200) throw new Error(`GET ${s.path} offset ${offset}: ${r.status} ${body.toString().slice(0, 200)}`)
    // A JSON page is an array of whole messages: keep the text between the brackets.
    const part = s.json ? body.subarray(1, body.length - 1) : body
    if (part.length > 0) parts.push(part)
    offset = r.headers.get('stream-next-offset')
    if (r.headers.get('stream-up-to-date') === 'true') break
  }
  return s.json ? Buffer.from(parts.map((p) => p.toString()).join(',')) : Buffer.concat(parts)
}
/** Where two buffers first differ ('' when equal), for the failure message. */
function firstDiff(a, b) {
  if (a.equals(b)) return ''
  let i = 0
  while (i < a.length && i < b.length && a[i] === b[i]) i++
  return `lengths ${a.length} (read) vs ${b.length} (acknowledged), first difference at byte ${i}`
}

// --- the workload, against any target ---------------------------------------------
// target: { base (its URL now), crash() -> what was killed, restart(), gone()? -> why the server
// is gone, logTail()? -> the last lines of the database's log }
async function runWorkload(target) {
  const run = {
    writers: STREAMS.map((s, id) => ({ ...s, id, bodies: [], acks: [], dupAcks: 0, stopped: undefined, lastFailure: undefined })),
    acked: 0,
    nextCrashAt: CRASH_EVERY,
    crashes: [],
    crashing: undefined,
    outage: undefined,
    outageAnswers: {},
    otherFailures: [],
    aborted: false,
  }
  for (const w of run.writers) {
    const r = await fetch(`${target.base}/v1/stream/${w.path}`, {
      method: 'PUT', headers: { 'Content-Type': w.json ? 'application/json' : 'application/octet-stream' },
    })
    await r.arrayBuffer()
    if (r.status !== 201) throw new Error(`PUT ${w.path}: ${r.status}`)
  }
  await Promise.all(run.writers.map((w) => writer(run, w, target)))
  await run.crashing // a crash started by the last acknowledgements
  return run
}

async function writer(run, w, target) {
  for (let seq = 0; seq < PER_WRITER && !run.aborted; seq++) {
    const body = makeBody(w.id, seq, w.json)
    w.bodies.push(body)
    for (let attempt = 1; !run.aborted; attempt++) {
      // A server process that died is a finding, not something to retry for minutes.
      if (target.gone?.()) {
        w.stopped = `seq ${seq}: the server ${target.gone()}`
        return
      }
      let answer
      try {
        const r = await fetch(`${target.base}/v1/stream/${w.path}`, {
          method: 'POST',
          headers: {
            'Content-Type': w.json ? 'application/json' : 'application/octet-stream',
            'Producer-Id': `writer-${w.id}`, 'Producer-Epoch': '0', 'Producer-Seq': String(seq),
          },
          body,
          signal: AbortSignal.timeout(20_000),
        })
        const text = await r.text()
        if (r.status === 200 || r.status === 204) {
          // 204: a duplicate, so an earlier attempt had been committed but never answered.
          if (r.status === 204) w.dupAcks++
          w.acks.push({ seq, offset: r.headers.get('stream-next-offset'), status: r.status, attempt })
          break
        }
        answer = String(r.status)
        w.lastFailure = `${r.status} ${text.slice(0, 200)}`
        // Anything but a 5xx is an answer about the append itself (409 gap: an acknowledged seq is gone): stop.
        if (r.status < 500) {
          w.stopped = `seq ${seq} attempt ${attempt}: ${w.lastFailure}`
          return
        }
      } catch (error) {
        answer = `no answer (${error.cause?.code ?? error.name})`
        w.lastFailure = `${answer}: ${error.cause?.message ?? error.message}`
      }
      if (run.outage) run.outageAnswers[answer] = (run.outageAnswers[answer] ?? 0) + 1
      else run.otherFailures.push(`${w.path} seq ${seq}: ${w.lastFailure}`)
      await sleep(Math.min(20 * attempt, 200)) // a client's backoff between retries
    }
    if (run.aborted) return
    run.acked++
    if (run.outage?.restartedAt !== undefined) run.outage.servedAgain.add(w.id)
    progressed(run, target)
  }
  w.done = true
  progressed(run, target)
}

/** After each acknowledgement: end an outage once every writer is served again, start a crash when due. */
function progressed(run, target) {
  const o = run.outage
  if (o?.restartedAt !== undefined && run.writers.every((x) => x.done || x.stopped || o.servedAgain.has(x.id))) o.over()
  if (run.crashing === undefined && !run.aborted && run.crashes.length < CRASHES && run.acked >= run.nextCrashAt) {
    run.crashing = crashAndRecover(run, target).finally(() => { run.crashing = undefined })
  }
}

async function crashAndRecover(run, target) {
  const c = { n: run.crashes.length + 1, ackedAtKill: run.writers.map((w) => w.acks.length), acked: run.acked }
  let over
  const recovered = new Promise((resolve) => { over = resolve })
  run.outage = { servedAgain: new Set(), over: () => over() }
  c.killedAt = Date.now()
  let result
  try {
    c.killed = await target.crash()
    await target.restart()
    run.outage.restartedAt = c.restartedAt = Date.now()
    progressed(run, target) // every writer may have finished meanwhile
    const timer = setTimeout(() => over('timeout'), RECOVERY_BOUND_MS)
    result = await recovered
    clearTimeout(timer)
  } catch (error) {
    result = `the crash or restart failed: ${error.message}${target.logTail ? `; ${target.logTail()}` : ''}`
  }
  if (result !== undefined) {
    c.stuck = result === 'timeout' ? run.writers.map((w) => `${w.path}: ${w.stopped ?? w.lastFailure}`).join('; ') : result
    run.aborted = true
  } else {
    c.recoveredAt = Date.now()
    // SC4: everything acknowledged before the kill, read back now.
    c.prefix = []
    for (const w of run.writers) {
      try {
        const read = await readFrom(target.base, w, '-1')
        const want = expected(w, w.bodies.slice(0, c.ackedAtKill[w.id]))
        // A JSON prefix ends where a message does: at the end or before a ','.
        const ok = read.subarray(0, want.length).equals(want) && (!w.json || want.length === 0 || read.length === want.length || read[want.length] === 0x2c)
        c.prefix.push(ok ? '' : `${w.path}: ${firstDiff(read.subarray(0, want.length), want)}`)
      } catch (error) {
        c.prefix.push(`${w.path}: ${error.message}`)
      }
    }
  }
  run.outage = undefined
  run.crashes.push(c)
  run.nextCrashAt = run.acked + CRASH_EVERY
  console.log(`# crash ${c.n} at ${c.acked} acknowledged appends: killed ${c.killed}; restarted after ${c.restartedAt - c.killedAt} ms;` +
    (c.stuck ? ` NOT served again within ${secs(RECOVERY_BOUND_MS)} s: ${c.stuck}` : ` every writer served again ${c.recoveredAt - c.restartedAt} ms after the restart`))
}

// --- our server and cluster --------------------------------------------------------
function clusterPids() {
  const pids = []
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue
    try {
      // Every process of this cluster runs in its data directory; no other cluster's does.
      if (fs.readlinkSync(`/proc/${e}/cwd`) === DATA_REAL && path.basename(fs.readlinkSync(`/proc/${e}/exe`)) === 'postgres') pids.push(Number(e))
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return pids
}

async function killCluster() {
  const postmaster = Number(fs.readFileSync(path.join(DATA, 'postmaster.pid'), 'utf8').split('\n')[0])
  // Stopped first, the postmaster forks no backend between the listing and the kill.
  process.kill(postmaster, 'SIGSTOP')
  const pids = clusterPids()
  if (!pids.includes(postmaster)) throw new Error(`postmaster ${postmaster} is not a process of ${DATA}`)
  for (const pid of pids) process.kill(pid, 'SIGKILL')
  // Until every one is reaped: a dead postmaster left a zombie (our pid 1 reaps
  // orphans when it gets to it) still "runs" for the next postmaster's lock file check.
  const deadline = Date.now() + 10_000
  const alive = () => [...new Set([...clusterPids(), ...pids.filter((pid) => fs.existsSync(`/proc/${pid}`))])]
  let left = alive()
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(10)
    left = alive()
  }
  sc7.kills.push({ pids: pids.length, left: left.length })
  return `postmaster ${postmaster} and ${pids.length - 1} children, ${left.length} left ${Date.now() + 10_000 - deadline} ms later`
}

function pgCtl(...args) {
  const cmd = process.env.SC_AS_POSTGRES === 'runuser' ? ['runuser', ['-u', 'postgres', '--', `${BIN}/pg_ctl`, ...args]] : [`${BIN}/pg_ctl`, args]
  return new Promise((resolve, reject) => {
    const child = spawn(cmd[0], cmd[1], { stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    child.stdout.on('data', (d) => { out += d })
    child.stderr.on('data', (d) => { out += d })
    child.on('error', reject)
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`pg_ctl ${args[0]} exited ${code}: ${out.trim().replace(/\n/g, ' | ')}`))))
  })
}

/** The CLI in a child process; resolves once it says where it serves. */
function startOurServer() {
  const dbUrl = `postgresql://postgres@/postgres?host=${encodeURIComponent(DIR)}&port=${PORT}`
  const child = spawn(process.execPath, [path.join(NODE_DIR, 'dist/streams/cli.js'), '--database-url', dbUrl, '--port', '0', '--insecure-local'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  fs.writeFileSync(path.join(DIR, 'ours.server.pid'), String(child.pid))
  const server = { child, pid: child.pid, lines: [], exited: undefined }
  child.on('exit', (code, signal) => { server.exited = `exited (code ${code}, signal ${signal})` })
  let rest = ''
  return new Promise((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      rest += chunk
      const lines = rest.split('\n')
      rest = lines.pop()
      for (const line of lines) {
        server.lines.push(line)
        const m = /serving (http:\/\/[^/]+)\//.exec(line)
        if (m) resolve({ base: m[1], server })
      }
    })
    child.on('exit', () => reject(new Error(`the stream server ${server.exited} before serving: ${server.lines.join(' | ')}`)))
  })
}

const sc7 = { kills: [] }
const crashLog = () => fs.readFileSync(path.join(DIR, 'postgres.log'), 'utf8')
const recoveriesRun = () => (crashLog().match(/automatic recovery in progress/g) ?? []).length

// --- run against our server ---------------------------------------------------------
console.log(`streams crash: ${STREAMS.length} writers x ${PER_WRITER} appends, kill -9 of PostgreSQL every ${CRASH_EVERY} acknowledged appends, ${CRASHES} times`)
const ours = await startOurServer()
const recoveriesBefore = recoveriesRun()
const run = await runWorkload({
  base: ours.base,
  crash: killCluster,
  restart: () => pgCtl('start', '-w', '-t', '60', '-D', DATA, '-l', path.join(DIR, 'postgres.log')),
  gone: () => ours.server.exited,
  logTail: () => `postgres.log ends: ${crashLog().trim().split('\n').slice(-4).join(' | ')}`,
})
const loadMs = Date.now() - started

const db = new pg.Client({ host: DIR, port: Number(PORT), user: 'postgres', database: 'postgres' })
const dbError = await db.connect().then(() => undefined, (error) => `the cluster does not answer: ${error.message}`)
const detail = { sc1: [], sc2: [], sc3: [] }
if (dbError) detail.sc2.push(dbError)
let ackTotal = 0
let dupTotal = 0
for (const w of run.writers) {
  const acked = w.bodies.slice(0, w.acks.length)
  ackTotal += w.acks.length
  dupTotal += w.dupAcks
  if (w.stopped) detail.sc2.push(`${w.path} stopped at ${w.stopped}`)
  // SC1: the whole stream over HTTP.
  try {
    const diff = firstDiff(await readFrom(ours.base, w, '-1'), expected(w, acked))
    if (diff) detail.sc1.push(`${w.path}: ${diff}`)
  } catch (error) {
    detail.sc1.push(`${w.path}: ${error.message}`)
  }
  // SC2: the rows, one per seq, each its whole body; the tags name what is missing or doubled.
  const { rows } = dbError ? { rows: [] } : await db.query(
    `SELECT e.seq, e.epoch, e.data, p.last_seq FROM sandbox_persist.streams s
       JOIN sandbox_persist.stream_entries e USING (stream_id)
       LEFT JOIN sandbox_persist.stream_producers p ON p.stream_id = s.stream_id AND p.producer_id = $2
      WHERE s.path = $1 ORDER BY e.seq`, [w.path, `writer-${w.id}`])
  const count = new Map()
  for (const t of tagsOf(Buffer.concat(rows.map((r) => r.data)))) count.set(t, (count.get(t) ?? 0) + 1)
  const missing = acked.map((_, i) => i).filter((i) => !count.has(i))
  const doubled = [...count].filter(([, n]) => n > 1).map(([i]) => i)
  const wrongRows = rows.filter((r, i) => Number(r.seq) !== i + 1 || !r.data.equals(w.bodies[i] ?? Buffer.alloc(0))).map((r) => Number(r.seq))
  if (w.acks.length !== PER_WRITER) detail.sc2.push(`${w.path}: ${w.acks.length} of ${PER_WRITER} appends acknowledged`)
  if (rows.length !== acked.length || missing.length || doubled.length || wrongRows.length) {
    detail.sc2.push(`${w.path}: ${rows.length} rows for ${acked.length} acknowledged; missing seqs [${missing.slice(0, 10)}], twice [${doubled.slice(0, 10)}], rows unlike their body [${wrongRows.slice(0, 10)}]`)
  }
  if (rows.length > 0 && Number(rows[0].last_seq) !== acked.length - 1) detail.sc2.push(`${w.path}: producer last_seq ${rows[0].last_seq}, ${acked.length - 1} expected`)
  // SC3: offsets increasing, each the stored entry's epoch_seq, and reads from them.
  const offsetOf = (r) => `${String(r.epoch).padStart(16, '0')}_${String(r.seq).padStart(16, '0')}`
  w.acks.forEach((a, i) => {
    if (i > 0 && !(a.offset > w.acks[i - 1].offset)) detail.sc3.push(`${w.path}: seq ${i} got ${a.offset}, not above ${w.acks[i - 1].offset}`)
    if (rows[i] && a.offset !== offsetOf(rows[i])) detail.sc3.push(`${w.path}: seq ${i} got ${a.offset}, its entry is at ${offsetOf(rows[i])}`)
  })
  // The last offset acknowledged before each kill, the first after it, and a few at random.
  const probes = new Set([0, w.acks.length - 1])
  for (const c of run.crashes) for (const i of [c.ackedAtKill[w.id] - 1, c.ackedAtKill[w.id]]) probes.add(i)
  for (let k = 0; k < 4; k++) probes.add(Math.floor(Math.random() * w.acks.length))
  for (const i of probes) {
    if (!(i >= 0 && i < w.acks.length)) continue
    try {
      const diff = firstDiff(await readFrom(ours.base, w, w.acks[i].offset), expected(w, acked.slice(i + 1)))
      if (diff) detail.sc3.push(`${w.path}: read from the offset of seq ${i} (${w.acks[i].offset}): ${diff}`)
    } catch (error) {
      detail.sc3.push(`${w.path}: read from the offset of seq ${i}: ${error.message}`)
    }
  }
}
if (!dbError) await db.end()

const show = (list) => list.slice(0, 6).join('; ') + (list.length > 6 ? `; ... ${list.length} in all` : '')
check('SC1 every stream read over HTTP from -1 is byte-exact its acknowledged appends, in order', detail.sc1.length === 0, show(detail.sc1))
check(`SC2 every append is stored once and whole: ${ackTotal} acknowledged, one row each, equal to its body, none missing or twice`, detail.sc2.length === 0, show(detail.sc2))
check('SC3 acknowledged offsets increase strictly across the crashes, name the stored entries, and read exactly what followed', detail.sc3.length === 0, show(detail.sc3))
const prefixFailures = run.crashes.flatMap((c) => (c.prefix ?? ['not checked: not served again']).filter(Boolean).map((p) => `crash ${c.n}: ${p}`))
check(`SC4 right after each recovery every append acknowledged before the kill read back (${run.crashes.map((c) => c.ackedAtKill.reduce((a, b) => a + b, 0)).join(', ')} appends)`,
  run.crashes.length > 0 && prefixFailures.length === 0, show(prefixFailures))
const answers = Object.entries(run.outageAnswers).map(([k, n]) => `${k} x${n}`).join(', ') || 'no failed request'
const fiveHundreds = ours.server.lines.filter((l) => l.includes('stream request failed'))
const reasons = [...new Set(fiveHundreds.map((l) => l.replace(/^.*stream request failed: /, '')))]
check(`SC5 during the outages the server answered 503 or no connection, never 500: ${answers}`,
  !Object.keys(run.outageAnswers).some((k) => /^\d+$/.test(k) && k !== '503'),
  reasons.length ? `500s the server reported: ${reasons.slice(0, 5).join(' | ')}` : '')
const stuck = run.crashes.filter((c) => c.stuck).map((c) => `crash ${c.n}: ${c.stuck}`)
check(`SC6 the server recovered by itself: same process (pid ${ours.server.pid}), every writer served again within ${secs(RECOVERY_BOUND_MS)} s (${run.crashes.map((c) => (c.stuck ? 'never' : `${c.recoveredAt - c.restartedAt} ms`)).join(', ')}), no failure outside the outages`,
  ours.server.exited === undefined && stuck.length === 0 && run.otherFailures.length === 0,
  show([...(ours.server.exited ? [`the server ${ours.server.exited}`] : []), ...stuck, ...run.otherFailures]))
const recoveries = recoveriesRun() - recoveriesBefore
check(`SC7 ${run.crashes.length} of ${CRASHES} crashes, each left no process of the cluster, and PostgreSQL ran crash recovery ${recoveries} times`,
  run.crashes.length === CRASHES && sc7.kills.every((k) => k.left === 0 && k.pids > 1) && recoveries === CRASHES)

ours.server.child.kill('SIGTERM')
await new Promise((resolve) => (ours.server.exited ? resolve() : ours.server.child.on('exit', resolve)))
fs.rmSync(path.join(DIR, 'ours.server.pid'), { force: true })

// --- report-only: the reference server, file-backed, killed with SIGKILL ---------------
let reference = 'reference server: not run'
const REF_DIR = path.join(ROOT, 'bench/suites/ds_server')
if (process.env.STREAMS_CRASH_REFERENCE === '0') reference = 'reference server: skipped (STREAMS_CRASH_REFERENCE=0)'
else if (!fs.existsSync(path.join(REF_DIR, 'node_modules/@durable-streams/server/package.json'))) reference = 'reference server: not run (bench/suites/ds_server/node_modules not installed)'
else {
  try {
    reference = await referenceRun()
  } catch (error) {
    reference = `reference server: run failed: ${error.message}`
  }
}
console.log(`# ${reference}`)

async function referenceRun() {
  const version = JSON.parse(fs.readFileSync(path.join(REF_DIR, 'node_modules/@durable-streams/server/package.json'), 'utf8')).version
  const dataDir = fs.mkdtempSync(path.join(DIR, 'ref-'))
  const start = () => new Promise((resolve, reject) => {
    const child = fork(path.join(REF_DIR, 'server.mjs'), ['ref-file'], { env: { ...process.env, DATA_DIR: dataDir }, stdio: ['ignore', 'ignore', 'ignore', 'ipc'] })
    fs.writeFileSync(path.join(DIR, 'ref.server.pid'), String(child.pid))
    child.once('message', (m) => resolve({ child, base: m.url.replace(/\/$/, '') }))
    child.once('exit', (code) => reject(new Error(`the reference server exited (${code}) before listening`)))
  })
  let server = await start()
  const target = {
    base: server.base,
    async crash() {
      const exited = new Promise((resolve) => server.child.once('exit', resolve))
      server.child.kill('SIGKILL')
      await exited
      return `node ${server.child.pid}`
    },
    async restart() {
      server = await start()
      target.base = server.base
    },
  }
  const r = await runWorkload(target)
  let lost = 0
  let doubled = 0
  let acked = 0
  const notes = []
  for (const w of r.writers) {
    acked += w.acks.length
    if (w.stopped) notes.push(`${w.path} stopped: ${w.stopped}`)
    const count = new Map()
    for (const t of tagsOf(await readFrom(target.base, w, '-1'))) count.set(t, (count.get(t) ?? 0) + 1)
    for (let i = 0; i < w.acks.length; i++) {
      const n = count.get(i) ?? 0
      if (n === 0) lost++
      if (n > 1) doubled += n - 1
      if (n !== 1) notes.push(`${w.path} seq ${i} present ${n} times (answered ${w.acks[i].status} on attempt ${w.acks[i].attempt})`)
    }
  }
  server.child.kill('SIGKILL')
  fs.rmSync(path.join(DIR, 'ref.server.pid'), { force: true })
  return `reference server @durable-streams/server ${version} (file-backed, SIGKILL x${r.crashes.filter((c) => !c.stuck).length}): ${acked} appends acknowledged, ${lost} lost, ${doubled} duplicated` +
    `${r.crashes.some((c) => c.stuck) ? ', not served again after a restart' : ''}${notes.length ? `; ${notes.join('; ')}` : ''}`
}

console.log(`summary: streams crash: ${ackTotal} appends acknowledged on ${STREAMS.length} streams (${dupTotal} as duplicates of an unanswered commit), ` +
  `${run.crashes.length} crashes under load (${secs(loadMs)} s), outage answers: ${answers}; ${passed} checks passed, ${failed} failed; ${secs(Date.now() - started)} s`)
process.exit(failed === 0 ? 0 : 1)
