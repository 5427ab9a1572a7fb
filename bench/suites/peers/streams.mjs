// bench/suites/peers/streams.mjs: our durable streams through the Node adapter
// against resumable-stream on Redis, in the same run (called by
// bench/suites/peers.sh, which installs the packages, starts the two Redis
// servers and prints nothing itself; this script prints the suite's lines).
//
// Four systems: ours with synchronous_commit on and off (postgresDurability,
// microBatchMs MICRO_BATCH_MS), and resumable-stream on a Redis with
// `appendonly yes, appendfsync always` and on one with no persistence. The
// chunks are the same objects for all (~90 bytes of JSON); resumable-stream
// carries strings, so its producer sends each chunk's JSON and a newline.
//
// Figures:
// - producer chunks/s, one stream, one chunk per append (ours: each append
//   awaited, as TanStack core does; resumable-stream: a pull source, the
//   library takes the next chunk when it has handled the last), with no
//   follower and with one follower;
// - follower latency at 100 chunks/s, p50 / p99, from the chunk's due time to
//   the follower holding it parsed;
// - late reader: a reader arriving at a live stream of 1 000 chunks, time to
//   hold all 1 000;
// - producer killed: a child process produces 100 chunks, is killed with
//   SIGKILL, and a reader then asks for the stream;
// - capacity: N streams at 50 chunks/s each, a follower each, all in this one
//   Node process; N doubles from 25 while the p99 latency (due time to seen)
//   stays within 200 ms and no chunk is missing, then 1.5x the last passing N
//   is tried. Each step reports this process's CPU and the server's (the
//   Postgres backends, or the redis-server process), which says what limits it.
//
// Environment: PGHOST/PGPORT/PGUSER, PGDATABASE, REDIS_ALWAYS_URL,
// REDIS_NONE_URL, QUICK, ADAPTER (clients/node/dist/index.js), RS_VERSION,
// REDIS_VERSION.
import { spawn } from 'node:child_process'
import { readFileSync, readdirSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import pg from 'pg'
import { createClient } from 'redis'
import { createResumableStreamContext } from 'resumable-stream/redis'
import { median, percentile as pct, sig4, streamChunk as chunk } from '../_common.mjs'

const { postgresDurability } = await import(process.env.ADAPTER)
const QUICK = process.env.QUICK === '1'
const MICRO_BATCH_MS = Number(process.env.MICRO_BATCH_MS ?? 2)
const SLO_MS = 200
const log = (...a) => console.error('peers:', ...a)
const out = (...f) => console.log(f.join('\t'))
const f3 = (x) => (Number.isFinite(x) ? sig4(x).toString() : 'nan')
const ratio = (a, b) => (b > 0 && Number.isFinite(a) ? f3(a / b) : 'nan')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const indexOf = (c) => Number(c.delta.slice(3))
let streamNo = 0
const newId = (p) => `${p}-${process.pid}-${++streamNo}`

// ------------------------------------------------------------------ ours
// A system: producer(id) -> { append(i), close() }, follow(id, onChunk(i)) ->
// { stop() }, lateRead(id, n) -> ms, serverCpu() -> ticks.
function ours(sync) {
  const pool = new pg.Pool({ max: 16, options: `-c synchronous_commit=${sync} -c statement_timeout=120s` })
  const factory = postgresDurability(pool, { microBatchMs: MICRO_BATCH_MS })
  let backends = null
  return {
    name: `ours, synchronous_commit ${sync}`,
    async producer(id) {
      const p = factory(id)
      return { append: (i) => p.append([chunk(i)]), appendMany: (is) => p.append(is.map(chunk)), close: () => p.close() }
    },
    follow(id, onChunk) {
      const ac = new AbortController()
      const done = (async () => {
        for await (const page of factory(id).readPages('-1', ac.signal)) for (const e of page) onChunk(indexOf(e.chunk))
      })().catch((e) => { if (!ac.signal.aborted) throw e })
      return { attached: Promise.resolve(), done, stop: () => ac.abort() }
    },
    async lateRead(id, n) {
      const t0 = performance.now()
      let got = 0
      for await (const _ of factory(id).read('-1')) if (++got === n) break
      return performance.now() - t0
    },
    async serverCpu() {
      if (backends === null) {
        const pid = (await pool.query('SELECT pg_backend_pid() AS p')).rows[0].p
        backends = Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1])
      }
      return childTicks(backends)
    },
    async end() { await factory.close(); await pool.end() },
  }
}

// --------------------------------------------------------- resumable-stream
function redisSystem(label, url) {
  const publisher = createClient({ url })
  const subscriber = createClient({ url })
  let ctx = null
  let serverPid = null
  // stream: a resumable stream of `source`, its own output (the producer's response) drained
  const stream = async (id, source) => ({ drained: drain(await ctx.resumableStream(id, () => source)) })
  return {
    name: `resumable-stream, Redis ${label}`,
    stream,
    async start() {
      await publisher.connect()
      await subscriber.connect()
      ctx = createResumableStreamContext({ publisher, subscriber, waitUntil: null })
      serverPid = Number(/process_id:(\d+)/.exec(await publisher.info('server'))[1])
    },
    // append enqueues; the library publishes each chunk to the followers, in order
    async producer(id) {
      let ctrl
      const { drained } = await stream(id, new ReadableStream({ start(c) { ctrl = c } }))
      return { append: (i) => ctrl.enqueue(JSON.stringify(chunk(i)) + '\n'), close: async () => { ctrl.close(); await drained } }
    },
    // n chunks from a pull source (the library takes the next when it has handled the last),
    // the first once `begin` resolves; resolves when the stream is done
    async pullRun(id, n, begin, created) {
      let i = 0
      const { drained } = await stream(id, new ReadableStream({
        async pull(c) { if (i === 0) await begin; if (i < n) c.enqueue(JSON.stringify(chunk(i++)) + '\n'); else c.close() },
      }, { highWaterMark: 0 }))
      created?.()
      await drained
    },
    follow(id, onChunk) {
      let reader = null
      let stopped = false
      let attached
      const attachedP = new Promise((r) => (attached = r))
      const done = (async () => {
        // resolves once the producer has answered this listener's request
        const s = await ctx.resumeExistingStream(id)
        if (!s) throw new Error(`resumable-stream: no live stream ${id}`)
        attached()
        reader = s.getReader()
        if (stopped) return reader.cancel()
        await readLines(reader, (line) => onChunk(indexOf(JSON.parse(line))))
      })().catch((e) => { attached(); if (!stopped) throw e })
      return { attached: attachedP, done, stop: () => { stopped = true; reader?.cancel() } }
    },
    async lateRead(id, n) {
      const t0 = performance.now()
      const s = await ctx.resumeExistingStream(id)
      const reader = s.getReader()
      let got = 0
      await readLines(reader, () => ++got === n)
      await reader.cancel()
      if (got < n) throw new Error(`resumable-stream: the late reader got ${got} of ${n}`)
      return performance.now() - t0
    },
    async serverCpu() { return procTicks(serverPid) },
    async end() { await publisher.quit(); await subscriber.quit() },
  }
}

async function drain(stream) {
  const r = stream.getReader()
  for (;;) if ((await r.read()).done) return
}

// readLines: hand each newline-terminated line to onLine until the stream ends or onLine returns true.
async function readLines(reader, onLine) {
  let buf = ''
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return
    buf += value
    let nl
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      if (onLine(line) === true) return
    }
  }
}

// CPU ticks (utime + stime) of one process; of a parent's children (the
// postmaster's backends): the live ones' and those it has reaped (its cutime + cstime).
const statFields = (pid) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
function procTicks(pid) {
  try { const f = statFields(pid); return Number(f[11]) + Number(f[12]) } catch { return 0 }
}
function childTicks(parent) {
  const p = statFields(parent)
  let sum = Number(p[13]) + Number(p[14])
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      const f = statFields(d)
      if (Number(f[1]) === parent) sum += Number(f[11]) + Number(f[12])
    } catch { /* gone */ }
  }
  return sum
}
const TICKS_PER_S = 100

// ------------------------------------------------------------ the figures
// producerRate: chunks/s of one stream of n chunks, one per append, optionally with a follower
async function producerRate(sys, n, withFollower) {
  const id = newId('rate')
  let seen = 0
  let allSeen
  const seenAll = new Promise((r) => (allSeen = r))
  const onChunk = () => { if (++seen === n) allSeen() }
  let follower = null
  let t0
  if (sys.pullRun) {
    // the follower attaches between the stream's creation and its first chunk
    let begin
    const beginP = new Promise((r) => (begin = r))
    let created
    const createdP = new Promise((r) => (created = r))
    const run = sys.pullRun(id, n, beginP, created)
    await createdP
    if (withFollower) { follower = sys.follow(id, onChunk); await follower.attached }
    t0 = performance.now()
    begin()
    await run
  } else {
    const p = await sys.producer(id)
    if (withFollower) { follower = sys.follow(id, onChunk); await follower.attached }
    t0 = performance.now()
    for (let i = 0; i < n; i++) await p.append(i)
    await p.close()
  }
  if (withFollower) await seenAll
  const ms = performance.now() - t0
  follower?.stop()
  return (n * 1000) / ms
}

const waitFor = async (cond, ms) => { while (!cond()) await sleep(ms) }

// run: N streams at `perSecond` chunks each, a follower each, for warmMs + measureMs;
// latencies (due time to seen) of the chunks due in the measuring window.
async function loadStep(sys, N, perSecond, warmMs, measureMs) {
  const period = 1000 / perSecond
  const streams = []
  for (let s = 0; s < N; s++) {
    const id = newId('cap')
    const p = await sys.producer(id)
    const st = { id, p, due: [], seen: 0, lat: [], follower: null }
    await p.append(0)
    st.due.push(performance.now())
    streams.push(st)
  }
  for (const st of streams) {
    st.follower = sys.follow(st.id, (i) => {
      st.seen = Math.max(st.seen, i + 1)
      const due = st.due[i]
      if (due !== undefined && due >= st.from && due < st.until) st.lat.push(performance.now() - due)
    })
  }
  await waitFor(() => streams.every((st) => st.seen >= 1), 5)
  const start = performance.now() + 20
  const cpu0 = process.cpuUsage()
  const server0 = await sys.serverCpu()
  const wall0 = performance.now()
  const stopAt = start + warmMs + measureMs
  await Promise.all(streams.map(async (st) => {
    st.from = start + warmMs
    st.until = stopAt
    const phase = Math.random() * period
    for (let k = 1; ; k++) {
      const due = start + phase + (k - 1) * period
      if (due >= stopAt) break
      const wait = due - performance.now()
      if (wait > 0) await sleep(wait)
      // a timer may fire a little early: the chunk then exists from now, not from its due time
      st.due[k] = Math.min(due, performance.now())
      await st.p.append(k)
    }
  }))
  // every chunk due must reach its follower; wait for the stragglers up to 10 s
  const expected = (st) => st.due.length
  const graceUntil = performance.now() + 10_000
  await waitFor(() => streams.every((st) => st.seen >= expected(st)) || performance.now() > graceUntil, 5)
  const wall = performance.now() - wall0
  const cpu = process.cpuUsage(cpu0)
  const server = (await sys.serverCpu()) - server0
  const missing = streams.reduce((m, st) => m + (expected(st) - st.seen), 0)
  const lat = streams.flatMap((st) => st.lat)
  for (const st of streams) st.follower.stop()
  await Promise.all(streams.map((st) => st.p.close()))
  await Promise.allSettled(streams.map((st) => st.follower.done))
  return {
    N, p50: median(lat), p99seen: pct(lat, 0.99), p99: missing > 0 ? Infinity : pct(lat, 0.99), n: lat.length, missing,
    nodeCpu: (cpu.user + cpu.system) / 1000 / wall, serverCpu: server / TICKS_PER_S * 1000 / wall,
  }
}

async function capacity(sys) {
  const warm = QUICK ? 500 : 1000
  const measure = QUICK ? 1500 : 3000
  const ladder = QUICK ? [25, 100] : [25, 50, 100, 200, 400, 800, 1600, 3200]
  const steps = []
  let pass = null
  let fail = null
  for (const N of ladder) {
    const r = await loadStep(sys, N, 50, warm, measure)
    log(`${sys.name}: capacity step ${JSON.stringify(r)}`)
    steps.push(r)
    if (r.p99 <= SLO_MS) pass = r
    else { fail = r; break }
  }
  if (!QUICK && pass && fail && fail.N === pass.N * 2) {
    const r = await loadStep(sys, Math.round(pass.N * 1.5), 50, warm, measure)
    log(`${sys.name}: capacity step ${JSON.stringify(r)}`)
    steps.push(r)
    if (r.p99 <= SLO_MS) pass = r
    else fail = r
  }
  steps.sort((a, b) => a.N - b.N)
  return { steps, pass, fail }
}

// the producer-killed figure: a child produces 100 chunks and is killed; what can a reader get?
async function killedProducer(sys, kind) {
  const id = newId('killed')
  const child = spawn(process.execPath, [new URL(import.meta.url).pathname, 'child', kind, id], { stdio: ['ignore', 'pipe', 'inherit'], env: process.env })
  await new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => { if (String(d).includes('ready')) resolve() })
    child.on('exit', (code) => reject(new Error(`producer child exited (${code}) before it was killed`)))
  })
  child.kill('SIGKILL')
  await new Promise((r) => child.on('exit', r))
  let got = 0
  const f = sys.follow(id, () => { got++ })
  const ended = await Promise.race([f.done.then(() => 'ended', (e) => `failed: ${e.message}`), sleep(3000).then(() => 'waiting')])
  f.stop()
  return { got, ended }
}

async function child(kind, id) {
  const n = 100
  if (kind === 'ours') {
    const p = await ours('on').producer(id)
    for (let i = 0; i < n; i++) await p.append(i)
  } else {
    const sys = redisSystem('always', process.env.REDIS_ALWAYS_URL)
    await sys.start()
    // returns when the library has taken all n chunks (then waits for the end that never comes)
    let all
    const taken = new Promise((r) => (all = r))
    let i = 0
    void sys.stream(id, new ReadableStream({
      pull(c) { if (i < n) c.enqueue(JSON.stringify(chunk(i++)) + '\n'); else all() },
    }, { highWaterMark: 0 }))
    await taken
  }
  process.stdout.write('ready\n')
  await new Promise(() => {})
}

// liveStream: a stream of n chunks, left open (a late reader's subject); returns its close
async function liveStream(sys, id, n) {
  if (sys.stream) {
    let taken
    const takenP = new Promise((r) => (taken = r))
    let ctrl
    let i = 0
    const { drained } = await sys.stream(id, new ReadableStream({
      start(c) { ctrl = c },
      pull(c) { if (i < n) c.enqueue(JSON.stringify(chunk(i++)) + '\n'); else taken() },
    }, { highWaterMark: 0 }))
    await takenP
    return async () => { ctrl.close(); await drained }
  }
  const p = await sys.producer(id)
  for (let i = 0; i < n; i += 100) await p.appendMany(Array.from({ length: Math.min(100, n - i) }, (_, j) => i + j))
  return async () => p.close()
}

async function main() {
  const S = 'peers: durable streams against resumable-stream on Redis'
  const onSync = ours('on')
  const offSync = ours('off')
  const always = redisSystem('appendfsync always', process.env.REDIS_ALWAYS_URL)
  const none = redisSystem('no persistence', process.env.REDIS_NONE_URL)
  await always.start()
  await none.start()
  const pairs = [[onSync, always], [offSync, none]]
  const REPS = QUICK ? 3 : 5

  // producer chunks/s, the two systems of a pair taking turns
  const n = QUICK ? 300 : 2000
  for (const [a, b] of pairs) {
    for (const withFollower of [false, true]) {
      const ra = [], rb = []
      for (let r = 0; r < REPS; r++) {
        ra.push(await producerRate(a, n, withFollower))
        rb.push(await producerRate(b, n, withFollower))
      }
      const w = `producer, 1 stream of ${n} chunks, one chunk per append, ${withFollower ? 'one follower' : 'no follower'}, ${a.name}`
      out('row', S, w, 'chunks/s', f3(median(ra)), b.name, f3(median(rb)), ratio(median(ra), median(rb)), 'higher')
      log(w, median(ra), median(rb))
    }
  }

  // follower latency at 100 chunks/s
  for (const [a, b] of pairs) {
    const la = await loadStep(a, 1, 100, 500, QUICK ? 1500 : 4000)
    const lb = await loadStep(b, 1, 100, 500, QUICK ? 1500 : 4000)
    for (const [k, m] of [['p50', 'p50 ms'], ['p99', 'p99 ms']]) {
      out('row', S, `follower at 100 chunks/s (due time to seen), ${a.name}`, m, f3(la[k]), b.name, f3(lb[k]), ratio(la[k], lb[k]), 'lower')
    }
    log('follower', JSON.stringify(la), JSON.stringify(lb))
  }

  // a late reader of the last 1 000 chunks of a live stream; a read takes
  // milliseconds, so it gets more repetitions than the other figures (with 3,
  // one slow read after the capacity steps moved the median by 2x)
  const LATE_REPS = QUICK ? 5 : 21
  for (const [a, b] of pairs) {
    const ms = {}
    for (const sys of [a, b]) {
      const id = newId('late')
      const close = await liveStream(sys, id, 1000)
      const t = []
      for (let r = 0; r < LATE_REPS + 2; r++) t.push(await sys.lateRead(id, 1000))
      await close()
      ms[sys.name] = median(t.slice(2))
    }
    out('row', S, `late reader of a live stream: all of its 1 000 chunks, ${a.name}`, 'ms', f3(ms[a.name]), b.name, f3(ms[b.name]), ratio(ms[a.name], ms[b.name]), 'lower')
  }

  // the producer killed after 100 chunks
  {
    const ka = await killedProducer(onSync, 'ours')
    const kb = await killedProducer(always, 'redis')
    out('row', S, `producer process killed after 100 chunks: chunks a reader then gets, ${onSync.name}`, 'chunks of 100', String(ka.got), always.name, String(kb.got), ratio(ka.got, kb.got), 'higher')
    out('fact', 'producer killed: the reader afterwards', `ours: ${ka.got} chunks, ${ka.ended}; resumable-stream: ${kb.got} chunks, ${kb.ended}`)
  }

  // capacity
  out('plot', 'peers_stream_capacity', `Streams at 50 chunks/s, a follower each: p99 due-to-seen latency (SLO ${SLO_MS} ms)`, 'concurrent streams', 'p99 ms', '1')
  const caps = {}
  for (const sys of [offSync, none, onSync, always]) {
    caps[sys.name] = await capacity(sys)
    for (const st of caps[sys.name].steps) {
      if (Number.isFinite(st.p99seen)) out('series', 'peers_stream_capacity', sys.name, String(st.N), f3(st.p99seen))
      out('fact', `capacity step, ${sys.name}, N = ${st.N}`,
        `p50 ${f3(st.p50)} ms, p99 ${f3(st.p99seen)} ms, ${st.missing} missing; CPU: this Node process ${Math.round(st.nodeCpu * 100)}%, server ${Math.round(st.serverCpu * 100)}%`)
    }
  }
  for (const [a, b] of pairs) {
    const ca = caps[a.name].pass?.N ?? 0
    const cb = caps[b.name].pass?.N ?? 0
    out('row', S, `capacity: streams at 50 chunks/s with a follower each, p99 <= ${SLO_MS} ms, ${a.name}`, 'streams', String(ca), b.name, String(cb), ratio(ca, cb), 'higher')
  }
  out('fact', 'peers stream versions', `resumable-stream ${process.env.RS_VERSION ?? '?'}, redis (client) ${process.env.REDIS_CLIENT_VERSION ?? '?'}, redis-server ${process.env.REDIS_VERSION ?? '?'}; ours with microBatchMs ${MICRO_BATCH_MS}`)
  for (const sys of [onSync, offSync, always, none]) await sys.end()
}

// ------------------------------------------------------------------- main
// `node streams.mjs step on|off|always|none N`: one capacity step, printed (for profiling)
async function oneStep(which, N) {
  const sys = which === 'on' || which === 'off' ? ours(which)
    : redisSystem(which, which === 'always' ? process.env.REDIS_ALWAYS_URL : process.env.REDIS_NONE_URL)
  await sys.start?.()
  console.log(JSON.stringify(await loadStep(sys, N, 50, 1000, Number(process.env.STEP_MS ?? 3000))))
  await sys.end()
}

if (process.argv[2] === 'child') await child(process.argv[3], process.argv[4])
else if (process.argv[2] === 'step') await oneStep(process.argv[3], Number(process.argv[4]))
else await main()
