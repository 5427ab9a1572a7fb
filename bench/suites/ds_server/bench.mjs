// bench/suites/ds_server/bench.mjs: our Durable Streams server (serveStreams,
// clients/node/src/streams/, over the bench cluster's database) against the
// protocol's reference server (@durable-streams/server) in memory and
// file-backed, all through the same client code (plain fetch) in this
// process, each server in a child process of its own (server.mjs). Called by
// bench/suites/ds_server.sh, which installs the packages, builds the adapter
// and creates the database; this script prints the suite's lines.
//
// Rounds are interleaved: in each round every workload runs against ours,
// then the in-memory reference, then the file-backed one; figures are the
// medians over the rounds (latency percentiles: the median of each round's
// percentile).
//
// 1. sequential appends: one writer, N_SEQ appends of 100 bytes, each awaited (appends/s)
// 2. 16 writers on 16 streams, N_CONC appends of 100 bytes each (appends/s, total)
// 3. append-to-reader latency: a reader waiting at the tail (long-poll, and
//    separately SSE), the writer appends 100 bytes; from just before the POST to
//    the reader holding the bytes; p50 / p99. Also reported: the same minus the
//    append's own round trip (what delivery adds once the writer has its answer).
// 4. catch-up read of a JSON stream of 10^4 messages (~90 bytes each, one
//    append each) from -1, following Stream-Next-Offset until Stream-Up-To-Date
// 5. fork creation (PUT with Stream-Forked-From, at the source's tail) against
//    the source's length: 10, 10^3, 10^4 messages
// 6. RSS delta of the server process with 1 000 idle SSE readers at the tail of
//    one stream (ours against the in-memory reference; fresh server processes,
//    RSS read after a full GC before and after)
//
// Environment: PGHOST/PGPORT/PGUSER, PGDATABASE (the scratch database),
// BENCH_SYNC, QUICK, ADAPTER (clients/node/dist/index.js), DATA_DIR (a scratch
// directory on the cluster's file system for the file-backed reference),
// REF_VERSION.
import { fork as forkProcess } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { median, percentile as pct, sig4, streamChunk } from '../_common.mjs'

const QUICK = process.env.QUICK === '1'
const SYNC = process.env.BENCH_SYNC === 'on' ? 'on' : 'off'
const ROUNDS = 3
const N_SEQ = QUICK ? 200 : 1000
const WRITERS = 16
const N_CONC = QUICK ? 20 : 100
const LAT_SAMPLES = QUICK ? 25 : 60
const CATCHUP_N = 10_000
// messages per append when the sources are built (QUICK: 10, so that 10^4 messages take 10^3 appends)
const PER_APPEND = QUICK ? 10 : 1
const FORK_SIZES = [10, 1000, CATCHUP_N]
const FORKS_PER = QUICK ? 5 : 7
const IDLE_READERS = 1000

const T0 = performance.now()
const log = (...a) => console.error(`ds_server [${((performance.now() - T0) / 1000).toFixed(1)} s]:`, ...a)
const out = (...f) => console.log(f.join('\t'))
const f4 = (x) => (Number.isFinite(x) ? sig4(x).toString() : 'nan')
const ratio = (a, b) => (b > 0 && Number.isFinite(a) ? f4(a / b) : 'nan')
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const HERE = fileURLToPath(new URL('.', import.meta.url))
const KINDS = ['ours', 'ref-mem', 'ref-file']
const NAME = { ours: 'ours', 'ref-mem': 'reference, in memory', 'ref-file': 'reference, file-backed' }
const PAYLOAD = Buffer.alloc(100, 'x')
let seq = 0
const newName = (p) => `${p}-${process.pid}-${++seq}`

// ------------------------------------------------------------- servers
/** A server in a child process: { kind, url, base, rss(gc), stop() }. */
function startServer(kind, dataDir) {
  const child = forkProcess(join(HERE, 'server.mjs'), [kind], {
    env: { ...process.env, DATA_DIR: dataDir ?? '', PGOPTIONS: '' },
    execArgv: ['--expose-gc'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const replies = []
  let waiting = null
  child.on('message', (m) => (waiting ? (waiting(m), (waiting = null)) : replies.push(m)))
  const next = () => (replies.length ? Promise.resolve(replies.shift()) : new Promise((r) => (waiting = r)))
  const exited = new Promise((r) => child.once('exit', r))
  return Promise.race([next(), exited.then((c) => { throw new Error(`${kind} server exited (${c}) before listening`) })]).then(({ url }) => ({
    kind,
    url,
    base: `${url}/v1/stream/`,
    pid: child.pid,
    async rss(gc = true) {
      child.send({ op: 'rss', gc })
      return (await next()).rss
    },
    /** The end of a process nothing more is asked of (the memory rounds): no graceful close. */
    async kill() {
      child.kill('SIGKILL')
      await exited
    },
    async stop() {
      child.send({ op: 'stop' })
      const t = setTimeout(() => child.kill('SIGKILL'), 5000)
      await exited
      clearTimeout(t)
    },
  }))
}

// --------------------------------------------------------------- client
// The same for every server: plain fetch (undici's keep-alive pool), bodies
// always consumed, no compression asked for.
async function ok(res, what) {
  const body = Buffer.from(await res.arrayBuffer())
  if (res.status >= 300) throw new Error(`${what}: HTTP ${res.status} ${body.toString().slice(0, 200)}`)
  return body
}
async function create(srv, path, contentType, headers = {}) {
  const res = await fetch(srv.base + path, { method: 'PUT', headers: { 'content-type': contentType, ...headers } })
  await ok(res, `create ${path} on ${srv.kind}`)
  return res.headers.get('stream-next-offset')
}
async function append(srv, path, contentType, body) {
  const res = await fetch(srv.base + path, { method: 'POST', headers: { 'content-type': contentType }, body })
  await ok(res, `append to ${path} on ${srv.kind}`)
  return res.headers.get('stream-next-offset')
}
async function forkOf(srv, source, path) {
  const res = await fetch(srv.base + path, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', 'stream-forked-from': `/v1/stream/${source}` },
  })
  await ok(res, `fork ${source} on ${srv.kind}`)
}
/** Read a JSON stream from -1 to its tail; returns the number of messages. */
async function readAllJson(srv, path) {
  let offset = '-1'
  let messages = 0
  for (let pages = 0; pages < 10_000; pages++) {
    const res = await fetch(`${srv.base}${path}?offset=${offset}`, { headers: { 'accept-encoding': 'identity' } })
    const body = await ok(res, `read ${path} on ${srv.kind}`)
    messages += JSON.parse(body.toString('utf8')).length
    offset = res.headers.get('stream-next-offset')
    if (res.headers.get('stream-up-to-date') === 'true') return messages
  }
  throw new Error('catch-up read does not end')
}
/** n JSON messages, PER_APPEND an append (a JSON array when more than one), `conc` appends in flight. */
async function fillJson(srv, path, n, conc = 16) {
  let i = 0
  const body = (k) => {
    const batch = Array.from({ length: Math.min(PER_APPEND, n - k) }, (_, j) => streamChunk(k + j))
    return Buffer.from(JSON.stringify(batch.length === 1 ? batch[0] : batch))
  }
  await Promise.all(Array.from({ length: conc }, async () => {
    while (i < n) {
      const k = i
      i += PER_APPEND
      await append(srv, path, 'application/json', body(k))
    }
  }))
}

// ------------------------------------------------------------ workloads
async function seqAppends(srv) {
  const path = newName('seq')
  await create(srv, path, 'application/octet-stream')
  for (let i = 0; i < 10; i++) await append(srv, path, 'application/octet-stream', PAYLOAD)
  const t0 = performance.now()
  for (let i = 0; i < N_SEQ; i++) await append(srv, path, 'application/octet-stream', PAYLOAD)
  return N_SEQ / ((performance.now() - t0) / 1000)
}

async function concAppends(srv) {
  const paths = Array.from({ length: WRITERS }, () => newName('conc'))
  await Promise.all(paths.map((p) => create(srv, p, 'application/octet-stream')))
  await Promise.all(paths.map((p) => append(srv, p, 'application/octet-stream', PAYLOAD)))
  const t0 = performance.now()
  await Promise.all(paths.map(async (p) => {
    for (let i = 0; i < N_CONC; i++) await append(srv, p, 'application/octet-stream', PAYLOAD)
  }))
  return (WRITERS * N_CONC) / ((performance.now() - t0) / 1000)
}

/** SSE frames of a response body: calls onEvent(type, data) per event. */
async function readSse(res, onEvent) {
  const reader = res.body.getReader()
  const decoder = new TextDecoder()
  let buf = ''
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return
    buf += decoder.decode(value, { stream: true })
    let end
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, end)
      buf = buf.slice(end + 2)
      let type = 'message'
      const data = []
      for (const line of frame.split('\n')) {
        if (line.startsWith('event:')) type = line.slice(6).trim()
        else if (line.startsWith('data:')) data.push(line.slice(5))
      }
      if (data.length) onEvent(type, data.join('\n'))
    }
  }
}

/**
 * Latency from just before the writer's POST to the reader holding the bytes,
 * with the reader parked at the tail (mode 'long-poll' or 'sse'). Returns
 * { lat: [ms], afterAck: [ms] }.
 */
async function latency(srv, mode) {
  const path = newName(`lat-${mode}`)
  let offset = await create(srv, path, 'text/plain')
  const ac = new AbortController()
  let got = null
  const arrived = () => {
    const t = performance.now()
    if (got) got(t)
  }
  let readerDone
  if (mode === 'long-poll') {
    readerDone = (async () => {
      while (!ac.signal.aborted) {
        const res = await fetch(`${srv.base}${path}?offset=${offset}&live=long-poll`, { signal: ac.signal, headers: { 'accept-encoding': 'identity' } })
        const body = Buffer.from(await res.arrayBuffer())
        if (res.status === 200 && body.length > 0) arrived()
        else if (res.status >= 300) throw new Error(`long-poll on ${srv.kind}: HTTP ${res.status}`)
        offset = res.headers.get('stream-next-offset') ?? offset
      }
    })()
  } else {
    const res = await fetch(`${srv.base}${path}?offset=${offset}&live=sse`, { signal: ac.signal, headers: { 'accept-encoding': 'identity' } })
    if (res.status !== 200) throw new Error(`sse on ${srv.kind}: HTTP ${res.status}`)
    readerDone = readSse(res, (type) => { if (type === 'data') arrived() })
  }
  readerDone = readerDone.catch((e) => { if (!ac.signal.aborted) throw e })
  await sleep(100) // the reader is parked
  const lat = []
  const afterAck = []
  for (let i = 0; i < LAT_SAMPLES; i++) {
    const seen = new Promise((r) => (got = r))
    const t0 = performance.now()
    await append(srv, path, 'text/plain', PAYLOAD)
    const tAck = performance.now()
    const t1 = await Promise.race([seen, sleep(5000).then(() => NaN)])
    got = null
    if (Number.isNaN(t1)) throw new Error(`${mode} reader on ${srv.kind} did not see an append within 5 s`)
    lat.push(t1 - t0)
    afterAck.push(Math.max(0, t1 - tAck))
    await sleep(10 + Math.random() * 10) // the reader parks again
  }
  ac.abort()
  await readerDone
  return { lat, afterAck }
}

async function catchUp(srv, path) {
  const t0 = performance.now()
  const n = await readAllJson(srv, path)
  const ms = performance.now() - t0
  if (n !== CATCHUP_N) throw new Error(`catch-up on ${srv.kind} read ${n} messages, not ${CATCHUP_N}`)
  return ms
}

async function forkTimes(srv, source) {
  const times = []
  for (let i = 0; i < FORKS_PER; i++) {
    const path = newName('fork')
    const t0 = performance.now()
    await forkOf(srv, source, path)
    times.push(performance.now() - t0)
  }
  return median(times)
}

/** RSS delta (bytes) of a fresh server process with IDLE_READERS SSE readers at one stream's tail. */
async function idleSseMemory(kind, dataDir) {
  const srv = await startServer(kind, dataDir)
  const readers = []
  try {
    const path = newName('idle')
    const offset = await create(srv, path, 'text/plain')
    await append(srv, path, 'text/plain', PAYLOAD)
    // warm up every code path the readers take, then measure
    const open = async (signal) => {
      const res = await fetch(`${srv.base}${path}?offset=now&live=sse`, { signal, headers: { 'accept-encoding': 'identity' } })
      if (res.status !== 200) throw new Error(`sse on ${kind}: HTTP ${res.status}`)
      let first
      const control = new Promise((r) => (first = r))
      const done = readSse(res, (type) => { if (type === 'control') first() }).catch(() => undefined)
      await control
      return { done } // not `done` itself: an async function would wait for it
    }
    for (let i = 0; i < 5; i++) {
      const ac = new AbortController()
      const { done } = await open(ac.signal)
      ac.abort()
      await done
    }
    log(`${kind}: warmed up`)
    await sleep(200)
    const before = await srv.rss(true)
    const ac = new AbortController()
    for (let i = 0; i < IDLE_READERS; i += 100) {
      readers.push(...(await Promise.all(Array.from({ length: Math.min(100, IDLE_READERS - i) }, () => open(ac.signal)))))
    }
    log(`${kind}: ${IDLE_READERS} readers open`)
    await sleep(500)
    const after = await srv.rss(true)
    void offset
    ac.abort()
    await Promise.all(readers.map((r) => r.done))
    return after - before
  } finally {
    await srv.kill()
  }
}

// ------------------------------------------------------------------ run
const dataDir = (tag) => mkdtempSync(join(process.env.DATA_DIR, `${tag}-`))
const t00 = performance.now()
const MEMORY_ONLY = process.env.DS_MEMORY_ONLY === '1' // development: only workload 6
const servers = {}
if (!MEMORY_ONLY) for (const k of KINDS) servers[k] = await startServer(k, k === 'ref-file' ? dataDir('main') : undefined)
log(`servers up: ${KINDS.map((k) => `${k} ${servers[k]?.url}`).join(', ')}; synchronous_commit ${SYNC}`)

// sources of the catch-up read and the forks (JSON, one append a message)
const sources = {}
for (const k of KINDS) sources[k] = {}
if (!MEMORY_ONLY) await Promise.all(KINDS.map(async (k) => {
  const t0 = performance.now()
  await Promise.all(FORK_SIZES.map(async (n) => {
    const path = newName(`src${n}`)
    await create(servers[k], path, 'application/json')
    await fillJson(servers[k], path, n)
    sources[k][n] = path
  }))
  log(`${k}: sources of ${FORK_SIZES.join(', ')} messages built in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
}))

const res = { seq: {}, conc: {}, lp: {}, sse: {}, lpAck: {}, sseAck: {}, lpP99: {}, sseP99: {}, catchup: {}, fork: {}, lpAll: {}, sseAll: {} }
for (const r of Object.values(res)) for (const k of KINDS) r[k] = []
for (const k of KINDS) { res.fork[k] = {}; for (const n of FORK_SIZES) res.fork[k][n] = [] }

for (let round = 1; round <= (MEMORY_ONLY ? 0 : ROUNDS); round++) {
  const t0 = performance.now()
  for (const k of KINDS) res.seq[k].push(await seqAppends(servers[k]))
  for (const k of KINDS) res.conc[k].push(await concAppends(servers[k]))
  for (const mode of ['long-poll', 'sse']) {
    const key = mode === 'sse' ? 'sse' : 'lp'
    for (const k of KINDS) {
      const { lat, afterAck } = await latency(servers[k], mode)
      res[key][k].push(pct(lat, 0.5))
      res[`${key}P99`][k].push(pct(lat, 0.99))
      res[`${key}Ack`][k].push(pct(afterAck, 0.5))
      res[`${key}All`][k].push(...lat)
    }
  }
  for (const k of KINDS) res.catchup[k].push(await catchUp(servers[k], sources[k][CATCHUP_N]))
  for (const n of FORK_SIZES) for (const k of KINDS) res.fork[k][n].push(await forkTimes(servers[k], sources[k][n]))
  log(`round ${round}/${ROUNDS} in ${((performance.now() - t0) / 1000).toFixed(1)} s: ` +
    KINDS.map((k) => `${k} seq ${f4(res.seq[k].at(-1))}/s conc ${f4(res.conc[k].at(-1))}/s lp ${f4(res.lp[k].at(-1))} ms sse ${f4(res.sse[k].at(-1))} ms catch-up ${f4(res.catchup[k].at(-1))} ms`).join('; '))
}
for (const k of KINDS) await servers[k]?.stop()
log('main servers stopped')

// memory: fresh processes, interleaved
const mem = { ours: [], 'ref-mem': [] }
for (let round = 1; round <= ROUNDS; round++) {
  for (const k of ['ours', 'ref-mem']) mem[k].push(await idleSseMemory(k))
  log(`memory round ${round}: ours ${(mem.ours.at(-1) / 2 ** 20).toFixed(1)} MB, ref-mem ${(mem['ref-mem'].at(-1) / 2 ** 20).toFixed(1)} MB`)
}

// --------------------------------------------------------------- output
const M = (xs) => median(xs)
const SEC = 'Durable Streams server vs the reference server'
const rowBoth = (workload, metric, get, good) => {
  const o = get('ours')
  for (const b of ['ref-mem', 'ref-file']) out('row', SEC, workload, metric, f4(o), NAME[b], f4(get(b)), ratio(o, get(b)), good)
}
rowBoth(`sequential appends, 1 writer, ${N_SEQ} x 100 B`, 'appends/s', (k) => M(res.seq[k]), 'higher')
rowBoth(`${WRITERS} writers on ${WRITERS} streams, ${N_CONC} x 100 B each`, 'appends/s total', (k) => M(res.conc[k]), 'higher')
for (const [key, label] of [['lp', 'long-poll'], ['sse', 'SSE']]) {
  rowBoth(`append-to-reader latency, ${label} reader at the tail`, 'p50 ms', (k) => M(res[key][k]), 'lower')
  rowBoth(`append-to-reader latency, ${label} reader at the tail`, 'p99 ms', (k) => M(res[`${key}P99`][k]), 'lower')
  rowBoth(`append-to-reader latency, ${label} reader at the tail`, 'p50 ms after the append answered', (k) => M(res[`${key}Ack`][k]), 'lower')
}
rowBoth(`catch-up read from -1, ${CATCHUP_N} JSON messages, ${PER_APPEND === 1 ? 'one append each' : `${PER_APPEND} an append`}`, 'ms', (k) => M(res.catchup[k]), 'lower')
for (const n of FORK_SIZES) rowBoth(`fork creation, source of ${n} messages`, 'ms', (k) => M(res.fork[k][n]), 'lower')
const memMB = (k) => M(mem[k]) / 2 ** 20
out('row', SEC, `${IDLE_READERS} idle SSE readers at one stream's tail`, 'server RSS delta MB', f4(memMB('ours')), NAME['ref-mem'], f4(memMB('ref-mem')), ratio(memMB('ours'), memMB('ref-mem')), 'lower')

// plots
out('plot', 'ds_server_fork', 'Fork creation time against the source length (median of rounds)', 'source messages', 'ms per fork', 1)
for (const k of KINDS) for (const n of FORK_SIZES) out('series', 'ds_server_fork', NAME[k], n, f4(M(res.fork[k][n])))
out('plot', 'ds_server_latency', 'Append-to-reader latency, reader waiting at the tail (all rounds pooled)', 'percentile', 'ms from append sent to reader holding the bytes', 0)
for (const [key, label] of [['lp', 'long-poll'], ['sse', 'SSE']]) {
  for (const k of KINDS) for (const p of [10, 25, 50, 75, 90, 95, 99]) out('series', 'ds_server_latency', `${NAME[k]}, ${label}`, p, f4(pct(res[`${key}All`][k], p / 100)))
}

// facts
const fact = (name, value) => out('fact', name, value)
fact('ds_server reference server', `@durable-streams/server ${process.env.REF_VERSION}; ours: serveStreams, pool of 16, synchronous_commit ${SYNC}`)
for (const k of KINDS) fact(`ds_server fork ${CATCHUP_N}/10 ${NAME[k]}`, ratio(M(res.fork[k][CATCHUP_N]), M(res.fork[k][10])))
fact('ds_server idle SSE reader KB, ours / reference in memory', `${f4(M(mem.ours) / IDLE_READERS / 1024)} / ${f4(M(mem['ref-mem']) / IDLE_READERS / 1024)}`)
const target = (ok) => (ok ? 'met' : 'missed')
const seqMem = M(res.seq.ours) / M(res.seq['ref-mem'])
const seqFile = M(res.seq.ours) / M(res.seq['ref-file'])
fact(`ds_server target sequential appends >= 0.5x in memory (sync ${SYNC})`, `${target(seqMem >= 0.5)} (${f4(seqMem)})`)
fact(`ds_server target sequential appends >= 5x file-backed (sync ${SYNC})`, `${target(seqFile >= 5)} (${f4(seqFile)})`)
fact('ds_server target latency p50 < 10 ms, long-poll / SSE', `${target(M(res.lp.ours) < 10)} (${f4(M(res.lp.ours))} ms) / ${target(M(res.sse.ours) < 10)} (${f4(M(res.sse.ours))} ms)`)
const forkFlat = M(res.fork.ours[CATCHUP_N]) / M(res.fork.ours[10])
fact('ds_server target fork flat (ours 10^4/10 <= 2)', `${target(forkFlat <= 2)} (${f4(forkFlat)})`)
log(`done in ${((performance.now() - t00) / 1000).toFixed(0)} s`)
process.exit(0)
