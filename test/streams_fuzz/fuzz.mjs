// The hostile-HTTP suite's driver (run by test/streams_fuzz/run.sh): starts
// test/streams_fuzz/server.mjs (serveStreams, maxBodyBytes 64 KiB,
// maxLiveReaders 8) as a child process on the database named by the PG*
// environment, then sends seeded hostile requests in batches, through fetch
// and through raw node:net sockets: malformed offsets and headers, bodies
// over the limit (with and without Content-Length, chunked), truncated
// bodies, bad JSON, odd paths, unknown methods, slow clients and a
// slowloris, live readers past the limit. A well-behaved writer appends to
// three target streams meanwhile and keeps what was acknowledged.
//
// Fails on: the server process exiting, a health request failing after a
// batch, any 5xx but the designed 503 (live readers past the limit), a
// response without X-Content-Type-Options: nosniff, a wrong status where the
// protocol fixes one, a target stream whose bytes (GET and stream_entries)
// differ from the acknowledged appends, a stream existing for a refused PUT.
//
// Env: SEED (reproduce a run), STREAMS_FUZZ_REQUESTS (default 10000).
// Prints one "summary: streams fuzz: ..." line; exits non-zero on any failure.
import { spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import net from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const NODE_DIR = path.resolve(HERE, '../../clients/node')
const require = createRequire(path.join(NODE_DIR, 'package.json'))
const pg = require('pg')

const SEED = process.env.SEED !== undefined && process.env.SEED !== '' ? Number(process.env.SEED) >>> 0 : (Date.now() ^ (process.pid << 8)) >>> 0
const TOTAL = Number(process.env.STREAMS_FUZZ_REQUESTS ?? 10000)
const BATCH = 100
const ONLY = process.env.STREAMS_FUZZ_ONLY ? process.env.STREAMS_FUZZ_ONLY.split(',') : undefined
const MAX_BODY = 65536
const MAX_LIVE = 8
const BASE = '/v1/stream/'
const started = Date.now()
console.log(`streams fuzz: seed ${SEED} (SEED=${SEED} reproduces the requests), ${TOTAL} requests`)

// --- seeded randomness -------------------------------------------------------------
function mulberry32(a) {
  return () => {
    a |= 0
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const rnd = mulberry32(SEED)
const int = (n) => Math.floor(rnd() * n)
const pick = (a) => a[int(a.length)]
const chance = (p) => rnd() < p
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// --- bookkeeping -------------------------------------------------------------------
const statuses = {}
let requests = 0
let designed503 = 0
const failures = []
const fail = (what) => {
  failures.push(what)
  if (failures.length <= 40) console.log(`not ok - ${what}`)
}
const refusedPuts = new Set() // request tokens of PUTs answered with a refusal (or never answered)
const createdPuts = new Set() // request tokens of PUTs answered 200/201
const clip = (v) => (typeof v === 'string' && v.length > 120 ? `${v.slice(0, 60)}...<${v.length} chars>` : v)
const clipAll = (o) => (o === undefined ? undefined : Object.fromEntries(Object.entries(o).map(([k, v]) => [k, clip(v)])))
const describe = (r) => JSON.stringify({ method: r.method, path: clip(r.path), headers: clipAll(r.headers), body: r.bodyDesc ?? (typeof r.body === 'string' ? r.body.slice(0, 200) : r.body ? `<${r.body.length} bytes>` : undefined), kind: r.kind })

function record(req, status, headers) {
  requests++
  statuses[status] = (statuses[status] ?? 0) + 1
  if (req.token !== undefined && req.method === 'PUT') {
    if (status === 200 || status === 201) createdPuts.add(req.token)
    else refusedPuts.add(req.token)
  }
  if (typeof status !== 'number') return
  if (status >= 500) {
    // Designed: a live read (a burst's, or a garbage live= value the URL parser trimmed to sse) past maxLiveReaders.
    if (status === 503 && (req.live || /[?&]live=/.test(req.path)) && req.method === 'GET' && headers['retry-after'] !== undefined) designed503++
    else fail(`${status} for ${describe(req)}`)
  }
  if (headers['x-content-type-options'] !== 'nosniff') fail(`no X-Content-Type-Options: nosniff on ${status} for ${describe(req)}`)
  if (req.expect !== undefined && !req.expect.includes(status)) fail(`status ${status}, expected ${req.expect.join('|')}, for ${describe(req)}`)
}

// --- the database and the server -------------------------------------------------------
const pool = new pg.Pool({ max: 2 })
pool.on('error', () => undefined)
const serverLog = []
const child = spawn(process.execPath, [path.join(HERE, 'server.mjs')], { stdio: ['ignore', 'pipe', 'pipe'], env: process.env })
let crashed = 0
let stopping = false
child.on('exit', (code, signal) => {
  if (!stopping) {
    crashed++
    fail(`the server process exited (code ${code}, signal ${signal})`)
  }
})
child.stderr.on('data', (d) => {
  for (const line of String(d).split('\n')) if (line.trim() !== '') serverLog.push(line)
})
const ORIGIN = await new Promise((resolve, reject) => {
  let out = ''
  child.stdout.on('data', (d) => {
    out += d
    const m = /listening (\S+)/.exec(out)
    if (m) resolve(m[1])
  })
  child.on('exit', () => reject(new Error(`the server did not start: ${serverLog.join('\n')}`)))
})
const { hostname: HOST, port: PORT } = new URL(ORIGIN)

// --- sending ---------------------------------------------------------------------------
const headersOf = (response) => Object.fromEntries([...response.headers].map(([k, v]) => [k.toLowerCase(), v]))

/** One request through fetch; the body may be a string, a Buffer or { chunked: Buffer[] }. */
async function viaFetch(req) {
  // Header values past Latin-1 go as their UTF-8 bytes, as a raw client would send them.
  const sent = Object.fromEntries(Object.entries(req.headers ?? {}).map(([k, v]) => [k, /[^\x00-\xff]/.test(v) ? Buffer.from(v, 'utf8').toString('latin1') : v]))
  const init = { method: req.method, headers: sent, redirect: 'manual', signal: AbortSignal.timeout(req.timeoutMs ?? 15000) }
  if (req.body !== undefined) {
    if (req.body.chunked !== undefined) {
      const parts = req.body.chunked
      init.body = new ReadableStream({
        pull(controller) {
          const next = parts.shift()
          if (next === undefined) controller.close()
          else controller.enqueue(next)
        },
      })
      init.duplex = 'half'
    } else init.body = req.body
  }
  let response
  try {
    response = await fetch(ORIGIN + req.path, init)
  } catch (error) {
    // A body refused mid-upload may end the connection before fetch sees the answer.
    if (req.mayReset) return record(req, 'reset', {})
    record(req, 'error', {})
    return fail(`fetch failed (${error.cause?.code ?? error.message}) for ${describe(req)}`)
  }
  const headers = headersOf(response)
  let text = ''
  try {
    if (req.live === 'sse' && response.status === 200) {
      const reader = response.body.getReader()
      const until = Date.now() + (req.readMs ?? 300)
      while (Date.now() < until) {
        const r = await Promise.race([reader.read(), sleep(until - Date.now()).then(() => ({ done: true }))])
        if (r.done) break
        text += Buffer.from(r.value).toString('latin1')
      }
      await reader.cancel().catch(() => undefined)
    } else text = await response.text()
  } catch {
    // a body cut short by the server (SSE lifetime) or by our timeout
  }
  record(req, response.status, headers)
  if (req.check !== undefined) req.check(response.status, headers, text)
  return { status: response.status, headers, text }
}

/** One request through a raw socket: `chunks` are written in order, each after its `pause` (ms); `closeAfter` ends it. */
function viaSocket(req) {
  return new Promise((resolve) => {
    const socket = net.connect(Number(PORT), HOST)
    let data = Buffer.alloc(0)
    let done = false
    const finish = () => {
      if (done) return
      done = true
      clearTimeout(timer)
      socket.destroy()
      const text = data.toString('latin1')
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text)
      if (m === null) {
        record(req, text.length === 0 ? 'closed' : 'garbled', {})
        if (text.length > 0) fail(`unparsable response ${JSON.stringify(text.slice(0, 80))} for ${describe(req)}`)
        if (req.mustAnswer) fail(`no response for ${describe(req)}`)
        return resolve(undefined)
      }
      const head = text.slice(0, text.indexOf('\r\n\r\n') >>> 0)
      const headers = {}
      for (const line of head.split('\r\n').slice(1)) {
        const i = line.indexOf(':')
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
      }
      const status = Number(m[1])
      record(req, status, headers)
      resolve({ status, headers, text })
    }
    const timer = setTimeout(finish, req.timeoutMs ?? 5000)
    socket.on('data', (d) => {
      data = Buffer.concat([data, d])
      // One response is all we want: stop once its head and declared body are in.
      const text = data.toString('latin1')
      const end = text.indexOf('\r\n\r\n')
      if (end >= 0) {
        const cl = /\r\ncontent-length: *(\d+)/i.exec(text.slice(0, end))
        if (cl !== null && data.length >= end + 4 + Number(cl[1])) finish()
        else if (cl === null && !/transfer-encoding: *chunked/i.test(text.slice(0, end))) finish()
        else if (/\r\n0\r\n\r\n$/.test(text)) finish()
      }
    })
    socket.on('error', () => finish())
    socket.on('close', () => finish())
    socket.on('connect', async () => {
      try {
        for (const { bytes, pause } of req.chunks) {
          if (pause) await sleep(pause)
          if (done || socket.destroyed) return
          socket.write(bytes)
        }
        if (req.endAfter) socket.end()
        if (req.closeAfter) {
          await sleep(req.closeAfter)
          if (!done) finish()
        }
      } catch {
        finish()
      }
    })
  })
}

const slowest = {}
async function send(req) {
  const t = Date.now()
  const r = await (req.chunks !== undefined ? viaSocket(req) : viaFetch(req))
  const ms = Date.now() - t
  if (ms > (slowest[req.kind]?.ms ?? 0)) slowest[req.kind] = { ms, req: describe(req) }
  return r
}

// --- targets and the well-behaved writer --------------------------------------------------
const RUN = `fz${SEED.toString(36)}`
const TARGETS = {
  text: { path: `${RUN}/target-text`, type: 'text/plain; charset=utf-8', json: false, acked: [] },
  json: { path: `${RUN}/target-json`, type: 'application/json', json: true, acked: [] },
  prod: { path: `${RUN}/target-producer`, type: 'application/octet-stream', json: false, acked: [], seq: 0 },
}
const SCRATCH = Array.from({ length: 6 }, (_, i) => `${RUN}/scratch-${i}`)
const SCRATCH_JSON = `${RUN}/scratch-json`
const HEALTH = `${RUN}/health`
const enc = (p) => p.split('/').map(encodeURIComponent).join('/')

async function setup(p, type) {
  const r = await fetch(`${ORIGIN}${BASE}${enc(p)}`, { method: 'PUT', headers: { 'Content-Type': type } })
  if (r.status !== 201) throw new Error(`set-up: PUT ${p} answered ${r.status}: ${await r.text()}`)
}
for (const t of Object.values(TARGETS)) await setup(t.path, t.type)
for (const p of SCRATCH) await setup(p, pick(['text/plain', 'application/octet-stream', 'text/csv']))
await setup(SCRATCH_JSON, 'application/json')
await setup(HEALTH, 'text/plain')

let writerN = 0
const wrng = mulberry32(SEED ^ 0x5eed)
/** One acknowledged append to each target, one after the other. */
async function writerRound() {
  for (const t of Object.values(TARGETS)) {
    const n = writerN++
    let body
    const headers = { 'Content-Type': t.type }
    if (t.json) {
      const msgs = Array.from({ length: 1 + Math.floor(wrng() * 3) }, (_, i) => JSON.stringify({ n, i, s: 'é\u2028"\\' + n }))
      body = wrng() < 0.5 && msgs.length === 1 ? msgs[0] : `[${msgs.join(',')}]`
      t.pending = msgs
    } else if (t === TARGETS.prod) {
      body = Buffer.from(Array.from({ length: 1 + Math.floor(wrng() * 64) }, () => Math.floor(wrng() * 256)))
      Object.assign(headers, { 'Producer-Id': 'writer', 'Producer-Epoch': '0', 'Producer-Seq': String(t.seq) })
    } else body = Buffer.from(`line ${n} ${'x'.repeat(Math.floor(wrng() * 40))}\n`)
    const r = await fetch(`${ORIGIN}${BASE}${enc(t.path)}`, { method: 'POST', headers, body })
    const h = headersOf(r)
    await r.arrayBuffer()
    if (h['x-content-type-options'] !== 'nosniff') fail(`writer: no nosniff on ${r.status}`)
    if (r.status !== 200 && r.status !== 204) {
      fail(`writer: append to ${t.path} answered ${r.status}`)
      continue
    }
    if (t.json) t.acked.push(...t.pending)
    else t.acked.push(body)
    if (t === TARGETS.prod) t.seq++
  }
}

async function health(after) {
  try {
    const r = await fetch(`${ORIGIN}${BASE}${enc(HEALTH)}`, { signal: AbortSignal.timeout(10000) })
    await r.arrayBuffer()
    if (r.status !== 200) fail(`health after ${after}: ${r.status}`)
  } catch (error) {
    fail(`health after ${after}: ${error.cause?.code ?? error.message}`)
  }
}

// --- hostile material ---------------------------------------------------------------------
const BAD_OFFSETS = [
  '', '0,1', '1', '-2', '--1', '-0', '+1', 'NOW', 'Now', 'now ', ' now', 'now\t', 'nowx', 'latest', '-1-1',
  '\u00e9', '\u{1F600}', '\u0660\u0661', '9'.repeat(33), '0'.repeat(33), '-' + '9'.repeat(20), '1e308', 'Infinity', 'NaN', 'null',
  '0000000000000000-0000000000000000', '0000000000000000_000000000000000', '00000000000000000_0000000000000000',
  '0000000000000000_0000000000000000_', '000000000000000a_0000000000000000', '0000000000000000 0000000000000000',
  '0000000000000000_-000000000000001', '%', '%zz', '\u0000', '1.5', '0x10', 'now,now', '-1,now', '[]', '{}',
]
const GOOD_BUT_GONE_OFFSETS = [
  '9999999999999999_9999999999999999', '0000000000000000_9999999999999999', '0000000000000001_0000000000000000',
  '0000000000000000_0000000000001000', '0000000000000005_0000000000000001',
]
const BAD_TTL = ['+1', '01', '1e3', '1.0', '-1', '1 1', '', 'abc', '9'.repeat(33), '9007199254740992', '0x10', '١', '1,2', 'Infinity']
const HUGE_OK_TTL = ['9007199254740991', '99999999999', '4294967296', '0', '1']
const BAD_EXPIRES = [
  'garbage', '', '2025-13-01T00:00:00Z', '2025-00-10T00:00:00Z', '2025-01-32T00:00:00Z', '2025-01-01T25:00:00Z', '2025-01-01T00:61:00Z',
  '2025-01-01', '2025-01-01T00:00:00', '+275760-09-13T00:00:00Z', '1e12', '1735689600', 'Tue, 01 Jan 2030 00:00:00 GMT',
  '2025-01-01T00:00:00+25:99', '9999-99-99T99:99:99Z', '2025-02-30T00:00:00Z\u00e9',
]
const ODD_OK_EXPIRES = ['9999-12-31T23:59:59Z', '0001-01-01T00:00:00Z', '1970-01-01T00:00:00Z', '2999-01-01t00:00:00.123456789+14:00', '2100-06-30T23:59:60Z']
const BAD_INTS = ['-1', '1.5', '1e3', '', ' ', 'abc', '9007199254740992', '9'.repeat(33), '+1', '0x1', '٣', '18446744073709551616', '-0']
const ODD_SEQ = ['\u00ff\u00fe', '\u0080', 'a'.repeat(3000), ' ', '', '\t', '00', 'zzz', '\u00e9\u00e9', '"', "'", '\\', '%00', 'a,b']
const CONTENT_TYPES = [
  '', ' ', 'garbage', ';', 'application/json;', 'APPLICATION/JSON', 'application/json; charset=latin1', 'text/plain; charset="',
  'text/\u00e9', '*/*', 'multipart/form-data; boundary=x', 'a'.repeat(3000), 'application/octet-stream', 'text/plain', 'application/x-www-form-urlencoded',
  'application/json, text/plain', '\u00ff',
]
const ODD_NAMES = [
  '..', '.', '../..', '%2e%2e', '%2E%2E/%2e%2e', '%2e', 'a/../../x', 'a/%2e%2e/%2e%2e/x', '%00', 'a%00b', '%zz', '%', '%e9', '%C0%AF',
  '%ED%A0%80', '%F0%9F%98%80', '\u{1F600}', '\u00e9', 'a'.repeat(300), 'b'.repeat(4000), '__ds', '__ds/x', '', '/', '//', 'a//b',
  '%2F', 'a%2Fb', '%5C..%5C', '..%5C..', 'a\\b', '%20', '+', 'a?b', '%3F', '%23', '%0d%0a', '%7f', '%01', '~', 'CON', 'nul',
]
const UNKNOWN_FETCH_METHODS = ['PATCH', 'PROPFIND', 'FOO', 'MKCOL', 'LOCK', 'COPY', 'PURGE', 'X-Y']
const RAW_METHODS = ['TRACE', 'TRACK', 'FOO', 'BREW', 'get', 'G\u00e9T', 'PATCH', 'CONNECT', 'PRI', 'SEARCH', 'M-SEARCH', 'LINK']
const randomBytes = (n) => Buffer.from(Array.from({ length: n }, () => int(256)))
const deepJson = (n) => '['.repeat(n) + ']'.repeat(n)
const deepObj = (n) => '{"a":'.repeat(n) + '1' + '}'.repeat(n)
const BAD_JSON = ['', '{', '[1,', 'nul', '[1,]', '{"a":1,}', "{'a':1}", '\u00ff', '[1] [2]', '01', 'NaN', '"\ud800"', '\u0000', '[]', ' [ ] ', '{"a":"\u0000"}', '"\\u0000"']

// Bodies no JSON parser accepts (or `[]`), for the JSON target: never written.
const NOT_JSON = BAD_JSON.filter((b) => b !== '' && !b.startsWith('"'))

let tokenN = 0
const token = () => `rq${++tokenN}x`
const streamUrl = (name) => `${BASE}${name}`
const scratch = () => enc(pick(SCRATCH))
const anyStream = () => (chance(0.3) ? enc(pick(Object.values(TARGETS)).path) : scratch())

/** A request line + headers for a raw socket. */
function rawHead(method, p, headers) {
  let s = `${method} ${p} HTTP/1.1\r\nHost: ${HOST}:${PORT}\r\n`
  for (const [k, v] of Object.entries(headers)) s += `${k}: ${v}\r\n`
  return `${s}\r\n`
}

/** The hostile requests, one generator each; each returns a request description. */
const generators = [
  // malformed and out-of-range offsets
  [12, () => {
    const offset = pick(BAD_OFFSETS)
    const raw = chance(0.5) ? encodeURIComponent(offset) : offset.replace(/[#\s?&]/g, encodeURIComponent)
    return { method: 'GET', path: `${streamUrl(anyStream())}?offset=${raw}${chance(0.2) ? `&live=${pick(['long-poll', 'sse'])}` : ''}`, expect: [400], kind: 'bad offset' }
  }],
  [4, () => ({ method: 'GET', path: `${streamUrl(anyStream())}?offset=${pick(GOOD_BUT_GONE_OFFSETS)}`, expect: [410], kind: 'offset past the tail' })],
  [3, () => ({ method: 'GET', path: `${streamUrl(anyStream())}?offset=-1&offset=${pick(['-1', 'now', ''])}`, expect: [400], kind: 'offset twice' })],
  [3, () => ({ method: 'GET', path: `${streamUrl(anyStream())}?offset=-1&live=${pick(['', 'true', 'LONG-POLL', 'sse ', 'ws', 'long-poll,sse', '%00', 'false'])}`, kind: 'live garbage' })],
  [2, () => ({ method: 'GET', path: `${streamUrl(anyStream())}?offset=now&cursor=${pick(['-1', '9'.repeat(40), 'abc', '', '1e9', '%ff'])}`, expect: [200], kind: 'cursor garbage' })],
  // create with malformed headers
  [8, () => {
    const t = token()
    const which = int(6)
    const headers = { 'Content-Type': 'text/plain' }
    let expect = [400]
    if (which === 0) headers['Stream-TTL'] = pick(BAD_TTL)
    else if (which === 1) headers['Stream-Expires-At'] = pick(BAD_EXPIRES)
    else if (which === 2) Object.assign(headers, { 'Stream-TTL': '60', 'Stream-Expires-At': '2999-01-01T00:00:00Z' })
    else if (which === 3) headers['Stream-Fork-Offset'] = pick(['0000000000000000_0000000000000000', 'garbage'])
    else if (which === 4) { headers['Stream-TTL'] = pick(HUGE_OK_TTL); expect = undefined }
    else { headers['Stream-Expires-At'] = pick(ODD_OK_EXPIRES); expect = undefined }
    return { method: 'PUT', path: streamUrl(`${RUN}/c/${t}`), headers, token: t, expect, kind: 'create headers' }
  }],
  [4, () => {
    const t = token()
    const ct = pick(CONTENT_TYPES)
    const headers = ct === '' && chance(0.5) ? {} : { 'Content-Type': ct }
    const body = chance(0.5) ? pick(['x', '[1,2]', '{"a":1}', '[]', '']) : undefined
    return { method: 'PUT', path: streamUrl(`${RUN}/ct/${t}`), headers, body, token: t, kind: 'create content type' }
  }],
  // forks
  [5, () => {
    const t = token()
    const from = pick([
      `${BASE}${RUN}/missing-${int(1000)}`, `${RUN}/nothing`, `${BASE}${RUN}/fork/${t}`, '../../etc/passwd', '%2e%2e/%2e%2e', '%zz', '%00', ' ', '',
      '/', `${BASE}`, '..', `${BASE}..`, `${BASE}${enc(TARGETS.text.path)}/..`, 'http://evil.example/x', `${BASE}%ff`, '\u00e9\u00e9', 'a'.repeat(3000),
    ])
    const headers = { 'Stream-Forked-From': from }
    if (chance(0.5)) headers['Stream-Fork-Offset'] = pick(['garbage', '-1', 'now', '', ...BAD_OFFSETS.slice(0, 10), ...GOOD_BUT_GONE_OFFSETS])
    if (chance(0.4)) headers['Stream-Fork-Sub-Offset'] = pick(['-1', '01', '1e3', '', 'x', '9007199254740992', '1', '0', '99999'])
    if (chance(0.3)) headers['Content-Type'] = pick(CONTENT_TYPES.filter((c) => c !== ''))
    return { method: 'PUT', path: streamUrl(`${RUN}/fork/${t}`), headers, token: t, kind: 'fork garbage' }
  }],
  [3, () => {
    // Forks of a real source at offsets it never issued, sub-offsets past the entry.
    const t = token()
    const src = pick(Object.values(TARGETS))
    const headers = { 'Stream-Forked-From': `${BASE}${enc(src.path)}` }
    if (chance(0.7)) headers['Stream-Fork-Offset'] = pick(GOOD_BUT_GONE_OFFSETS)
    if (chance(0.5)) headers['Stream-Fork-Sub-Offset'] = pick(['99999999', '9007199254740991', '1'])
    if (chance(0.3)) headers['Content-Type'] = pick(['text/csv', 'application/json', 'image/png'])
    return { method: 'PUT', path: streamUrl(`${RUN}/fork/${t}`), headers, token: t, kind: 'fork of target' }
  }],
  // appends with malformed producer / seq / content type on scratch streams
  [8, () => {
    const headers = { 'Content-Type': 'text/plain' }
    const which = int(5)
    let expect = [400]
    if (which === 0) {
      const parts = { 'Producer-Id': pick(['p', '', 'x'.repeat(200)]), 'Producer-Epoch': '0', 'Producer-Seq': '0' }
      delete parts[pick(Object.keys(parts))]
      Object.assign(headers, parts)
      if (Object.keys(parts).length === 3) expect = undefined
    } else if (which === 1) Object.assign(headers, { 'Producer-Id': 'p', 'Producer-Epoch': pick(BAD_INTS), 'Producer-Seq': '0' })
    else if (which === 2) Object.assign(headers, { 'Producer-Id': 'p', 'Producer-Epoch': '0', 'Producer-Seq': pick(BAD_INTS) })
    else if (which === 3) Object.assign(headers, { 'Producer-Id': pick(['p', '\u00e9', ' ', 'a'.repeat(5000)]), 'Producer-Epoch': pick(['0', '9007199254740991', '1']), 'Producer-Seq': pick(['0', '9007199254740991', '1']) }) && (expect = undefined)
    else { headers['Stream-Seq'] = pick(ODD_SEQ); expect = undefined }
    return { method: 'POST', path: streamUrl(scratch()), headers, body: 'hostile\n', expect, kind: 'append headers' }
  }],
  [3, () => ({ method: 'POST', path: streamUrl(scratch()), headers: chance(0.5) ? { 'Content-Type': pick(CONTENT_TYPES) } : {}, body: chance(0.5) ? '' : 'x', kind: 'append content type' })],
  [2, () => ({ method: 'POST', path: streamUrl(scratch()), headers: { 'Content-Type': 'text/plain', 'Stream-Closed': pick(['TRUE', 'yes', '1', 'true ', 'false', '']) }, kind: 'close garbage' })],
  // JSON on the scratch JSON stream
  [5, () => {
    const body = pick([...BAD_JSON, deepJson(1000 + int(30000)), deepObj(1000 + int(8000)), `[${deepJson(5000)}]`])
    const ok = (() => { try { const v = JSON.parse(body); return !(Array.isArray(v) && v.length === 0) } catch { return false } })()
    return { method: 'POST', path: streamUrl(enc(SCRATCH_JSON)), headers: { 'Content-Type': 'application/json' }, body, bodyDesc: body.length > 200 ? `<${body.length} chars of ${body.slice(0, 10)}>` : body, expect: ok ? undefined : [400], kind: 'json' }
  }],
  // hostile appends to the targets: every one must be refused (or be a duplicate), never written
  [10, () => {
    const t = pick(Object.values(TARGETS))
    const p = streamUrl(enc(t.path))
    const which = int(7)
    if (which === 0) return { method: 'POST', path: p, headers: { 'Content-Type': t.type }, body: randomBytes(MAX_BODY + 1 + int(4096)), expect: [413], mayReset: true, kind: 'target: over the limit' }
    if (which === 1) return { method: 'POST', path: p, headers: { 'Content-Type': t.type }, body: { chunked: Array.from({ length: 9 }, () => randomBytes(8192)) }, bodyDesc: '<chunked 72 KiB>', expect: [413], mayReset: true, kind: 'target: chunked over the limit' }
    if (which === 2) return { method: 'POST', path: p, headers: { 'Content-Type': t.json ? 'text/plain' : 'application/json' }, body: '[1]', expect: [409], kind: 'target: content type' }
    if (which === 3) return { method: 'POST', path: p, headers: { 'Content-Type': t.type, 'Producer-Id': 'writer', 'Producer-Epoch': pick(['0', '-1', 'x', '9007199254740992']), 'Producer-Seq': pick(['1099511627776', '-1', '9007199254740992', '1.5']) }, body: '[1]', expect: [400, 409], kind: 'target: producer' }
    if (which === 4 && t.json) return { method: 'POST', path: p, headers: { 'Content-Type': 'application/json' }, body: pick(NOT_JSON), expect: [400], kind: 'target: bad json' }
    if (which === 5) return { method: 'POST', path: p, headers: { 'Content-Type': t.type }, body: '', expect: [400], kind: 'target: empty body' }
    // The same create again with a body: nothing is written (200), or another config (409).
    return { method: 'PUT', path: p, headers: { 'Content-Type': t.type }, body: t.json ? '[{"put":1}]' : 'put body', expect: [200], kind: 'target: create again with a body' }
  }],
  // odd names
  [8, () => {
    const name = pick(ODD_NAMES)
    const t = token()
    const method = pick(['GET', 'PUT', 'POST', 'HEAD', 'DELETE'])
    const p = method === 'PUT' ? `${BASE}${RUN}/odd/${name}${t}` : `${BASE}${name}`
    return { method, path: p.replace(/[?#\s]/g, encodeURIComponent), headers: { 'Content-Type': 'text/plain' }, body: method === 'PUT' || method === 'POST' ? 'x' : undefined, token: method === 'PUT' ? t : undefined, kind: 'odd name' }
  }],
  [2, () => ({ method: pick(['GET', 'PUT']), path: pick(['/', '/v1/stream', '/v1/', '/v1/streamx/a', '/V1/STREAM/a', '/v1/stream/../stream/a', '/%76%31/stream/a']), kind: 'outside the base' })],
  // unknown methods
  [3, () => ({ method: pick(UNKNOWN_FETCH_METHODS), path: streamUrl(anyStream()), body: chance(0.5) ? 'x' : undefined, expect: [400, 405], kind: 'unknown method' })],
  [1, () => ({ method: 'OPTIONS', path: streamUrl(anyStream()), expect: [204], kind: 'preflight' })],
  // huge bodies on scratch creates and appends
  [3, () => {
    const t = token()
    const method = chance(0.5) ? 'PUT' : 'POST'
    const chunked = chance(0.5)
    const size = MAX_BODY + 1 + int(200000)
    const body = chunked ? { chunked: Array.from({ length: Math.ceil(size / 16384) }, () => randomBytes(16384)) } : randomBytes(size)
    return { method, path: method === 'PUT' ? streamUrl(`${RUN}/big/${t}`) : streamUrl(scratch()), headers: { 'Content-Type': 'application/octet-stream' }, body, bodyDesc: `<${size} bytes${chunked ? ', chunked' : ''}>`, token: method === 'PUT' ? t : undefined, expect: [413], mayReset: true, kind: 'over the limit' }
  }],
  // raw sockets: truncated bodies, lying Content-Length, garbage Host, unknown methods, bad framing
  [6, () => {
    const t = pick(Object.values(TARGETS))
    const create = chance(0.4)
    const tk = create ? token() : undefined
    const p = create ? streamUrl(`${RUN}/trunc/${tk}`) : streamUrl(enc(t.path))
    const body = t.json ? '[{"truncated":true},{"x":1}]' : 'truncated body bytes'
    const cut = body.slice(0, int(body.length))
    const declared = body.length + 1 + int(MAX_BODY - body.length - 1)
    return {
      method: create ? 'PUT' : 'POST', path: p, token: tk, kind: 'truncated body',
      chunks: [{ bytes: rawHead(create ? 'PUT' : 'POST', p, { 'Content-Type': t.type, 'Content-Length': declared }) }, { bytes: cut, pause: int(20) }],
      closeAfter: 10 + int(50),
    }
  }],
  [2, () => {
    const t = pick(Object.values(TARGETS))
    const p = streamUrl(enc(t.path))
    // A chunked body that stops mid-chunk.
    return { method: 'POST', path: p, kind: 'truncated chunked body', chunks: [{ bytes: rawHead('POST', p, { 'Content-Type': t.type, 'Transfer-Encoding': 'chunked' }) }, { bytes: `100\r\n${t.json ? '[1,2' : 'partial'}` }], closeAfter: 20 }
  }],
  [5, () => {
    const variant = int(9)
    const p = streamUrl(scratch())
    let bytes
    let expect
    if (variant === 0) { bytes = `GET ${p}?offset=-1 HTTP/1.1\r\nHost: ${pick(['a b', '[', '[::1', 'exa mple', '%', ':::', 'x:99999999', '\u00e9'])}\r\n\r\n`; expect = [200, 400] }
    else if (variant === 1) { bytes = `${pick(RAW_METHODS)} ${p} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx`; expect = [400, 405] }
    else if (variant === 2) { bytes = `GET ${p} HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20000)}\r\n\r\n`; expect = [431] }
    else if (variant === 3) { bytes = `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`; expect = [400] }
    else if (variant === 4) { bytes = `POST ${p} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${pick(['-1', '1e3', 'abc', '99999999999999999999', '1, 2'])}\r\n\r\nxx`; expect = [400, 413] }
    else if (variant === 5) { bytes = `GET ${pick(['*', 'http://evil/v1/stream/x', '//x', `${p}#frag`, `${p}?offset=-1\u00e9`, '/v1/stream/%'])} HTTP/1.1\r\nHost: x\r\n\r\n`; expect = undefined }
    else if (variant === 6) { bytes = `GET ${p} HTTP/9.9\r\nHost: x\r\n\r\n`; expect = undefined }
    else if (variant === 7) { bytes = `GET ${p} HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n`; expect = [400] }
    else { bytes = randomBytes(1 + int(200)); expect = undefined }
    return { method: 'RAW', path: p, kind: 'raw', bodyDesc: JSON.stringify(String(bytes).slice(0, 120)), chunks: [{ bytes }], expect, endAfter: true, timeoutMs: 3000 }
  }],
]
const weightTotal = generators.reduce((s, [w]) => s + w, 0)
function generate() {
  for (;;) {
    let x = int(weightTotal)
    let req
    for (const [w, g] of generators) {
      if (x < w) { req = g(); break }
      x -= w
    }
    req ??= generators[0][1]()
    // STREAMS_FUZZ_ONLY=kind,kind (debugging): draw until one of those kinds.
    if (ONLY === undefined || ONLY.some((k) => req.kind.startsWith(k))) return req
  }
}

// --- slow clients, the slowloris, live readers past the limit -------------------------------
function slowAppend() {
  // A valid append sent byte by byte with pauses: it is answered, and written.
  const p = streamUrl(scratch())
  const body = 'slow\n'
  const text = rawHead('POST', p, { 'Content-Type': 'text/plain', 'Content-Length': body.length }) + body
  return send({ method: 'POST', path: p, kind: 'slow client', chunks: [...text].map((c) => ({ bytes: c, pause: 2 + int(8) })), expect: [204, 409], mustAnswer: true, timeoutMs: 20000 })
}
function slowloris(ms) {
  // Headers that never end; given up after `ms`.
  const p = streamUrl(scratch())
  const chunks = []
  let t = 0
  const text = `GET ${p}?offset=-1 HTTP/1.1\r\nHost: x\r\n`
  for (const c of text) chunks.push({ bytes: c, pause: 20 })
  for (t = text.length * 20; t < ms; t += 200) chunks.push({ bytes: `X-${int(1e6)}: ${'a'.repeat(int(20))}\r\n`, pause: 200 })
  return send({ method: 'GET', path: p, kind: 'slowloris', chunks, closeAfter: 10, timeoutMs: ms + 2000 })
}
async function liveBurst() {
  // Twice maxLiveReaders long-polls and SSE readers at once: the excess is a 503 with Retry-After.
  const n = MAX_LIVE * 2 + int(MAX_LIVE)
  const reqs = Array.from({ length: n }, () => {
    const sse = chance(0.4)
    return {
      method: 'GET', path: `${streamUrl(scratch())}?offset=now&live=${sse ? 'sse' : 'long-poll'}`, live: sse ? 'sse' : 'long-poll',
      readMs: 1200, expect: [200, 204, 503], kind: 'live burst', timeoutMs: 10000,
    }
  })
  const results = await Promise.all(reqs.map(send))
  const refused = results.filter((r) => r?.status === 503).length
  bursts.push(refused)
  if (refused > n - MAX_LIVE + 2) fail(`live burst of ${n}: ${refused} refused, fewer than maxLiveReaders served`)
}

// --- the run -------------------------------------------------------------------------------
const batches = Math.ceil(TOTAL / BATCH)
const bursts = [] // 503s of each live burst: on a busy machine the first readers of a burst may be done before the last arrive
let lorisRunning = 0
const background = []
for (let b = 0; b < batches && crashed === 0; b++) {
  const reqs = Array.from({ length: Math.min(BATCH, TOTAL - b * BATCH) }, generate)
  const extra = []
  // Slow clients run beside the batches (health is asked meanwhile); the live bursts within one.
  if (b % 25 === 3) background.push(slowAppend())
  if (b % 30 === 10 && lorisRunning < 2) {
    lorisRunning++
    background.push(slowloris(4000).finally(() => lorisRunning--))
  }
  if (b % 25 === 15) extra.push(liveBurst())
  const writing = writerRound()
  // Raw-socket requests go first-come; all of a batch run at once.
  await Promise.all([...reqs.map(send), writing, ...extra])
  await health(`batch ${b + 1}`)
  if (Date.now() - started > 150_000) {
    fail(`over the time budget after batch ${b + 1} of ${batches}`)
    break
  }
}

// --- the end: the targets hold exactly what was acknowledged ----------------------------------
await Promise.all(background)
await health('the slow clients')
let partial = 0
for (const t of Object.values(TARGETS)) {
  const expected = t.json ? Buffer.from(t.acked.join(','), 'utf8') : Buffer.concat(t.acked)
  // Through GET, page by page.
  let offset = '-1'
  const pages = []
  for (let i = 0; i < 10000; i++) {
    const r = await fetch(`${ORIGIN}${BASE}${enc(t.path)}?offset=${offset}`)
    const body = Buffer.from(await r.arrayBuffer())
    if (r.status !== 200) { fail(`read back ${t.path}: ${r.status}`); break }
    if (t.json) {
      const s = body.toString('utf8')
      const inner = s.slice(1, -1)
      if (inner !== '') pages.push(Buffer.from(inner, 'utf8'))
    } else pages.push(body)
    offset = r.headers.get('stream-next-offset')
    if (r.headers.get('stream-up-to-date') === 'true') break
  }
  const got = t.json ? Buffer.from(pages.map((p) => p.toString('utf8')).join(','), 'utf8') : Buffer.concat(pages)
  const sql = await pool.query(
    `SELECT coalesce(string_agg(e.data, $2::bytea ORDER BY e.seq), ''::bytea) AS data, count(*)::int AS n
       FROM sandbox_persist.streams s JOIN sandbox_persist.stream_entries e ON e.stream_id = s.stream_id
      WHERE s.path = $1`,
    [t.path, t.json ? Buffer.from(',') : Buffer.alloc(0)],
  )
  const stored = sql.rows[0].data
  const before = failures.length
  if (!got.equals(expected)) { partial++; fail(`${t.path}: GET returned ${got.length} bytes, the writer got ${expected.length} acknowledged (first difference at ${firstDiff(got, expected)})`) }
  if (!stored.equals(expected)) { partial++; fail(`${t.path}: stream_entries hold ${stored.length} bytes, the writer got ${expected.length} acknowledged (first difference at ${firstDiff(stored, expected)})`) }
  if (failures.length === before) console.log(`ok - ${t.path}: ${t.json ? t.acked.length + ' messages' : t.acked.length + ' appends'}, ${expected.length} bytes, GET and stream_entries equal`)
}
function firstDiff(a, b) {
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return i
  return Math.min(a.length, b.length)
}
// No stream for a refused PUT (each PUT path carries its request's token rqNx).
const rows = (await pool.query(`SELECT path FROM sandbox_persist.streams WHERE path LIKE $1`, [`${RUN}/%rq%x%`])).rows
let ghost = 0
for (const { path: p } of rows) {
  for (const m of p.matchAll(/rq(\d+)x/g)) {
    const tk = `rq${m[1]}x`
    if (refusedPuts.has(tk) && !createdPuts.has(tk)) { ghost++; fail(`a stream exists at ${JSON.stringify(p)} for a refused PUT (${tk})`) }
  }
}
if (bursts.length > 0 && bursts.every((r) => r === 0)) fail(`${bursts.length} live bursts, none refused past maxLiveReaders ${MAX_LIVE}`)
console.log(`ok - live bursts: 503s ${JSON.stringify(bursts)}`)
const orphans = (await pool.query(`SELECT count(*)::int AS n FROM sandbox_persist.stream_entries e WHERE NOT EXISTS (SELECT 1 FROM sandbox_persist.streams s WHERE s.stream_id = e.stream_id)`)).rows[0].n
if (orphans > 0) fail(`${orphans} stream_entries rows without a stream`)
console.log(`ok - refused PUTs: ${refusedPuts.size}, created: ${createdPuts.size}, streams for refused PUTs: ${ghost}`)

if (process.env.STREAMS_FUZZ_DEBUG) for (const [k, v] of Object.entries(slowest)) console.log(`slowest ${k}: ${v.ms} ms ${v.req.slice(0, 300)}`)
const reported = serverLog.filter((l) => l.startsWith('reported:'))
for (const l of reported.slice(0, 10)) console.log(`server: ${l.slice(0, 400)}`)
if (reported.length > 0) fail(`the server reported ${reported.length} failures`)
const other = serverLog.filter((l) => !l.startsWith('reported:'))
for (const l of other.slice(0, 20)) console.log(`server stderr: ${l.slice(0, 400)}`)

stopping = true
child.kill('SIGTERM')
await Promise.race([new Promise((resolve) => child.once('exit', resolve)), sleep(5000)])
await pool.end()
const fivexx = Object.entries(statuses).filter(([s]) => Number(s) >= 500).reduce((n, [, c]) => n + c, 0) - designed503
const shown = Object.fromEntries(Object.entries(statuses).sort(([a], [b]) => String(a).localeCompare(String(b))))
console.log(`elapsed: ${((Date.now() - started) / 1000).toFixed(1)} s, ${failures.length} failures`)
console.log(`summary: streams fuzz: ${requests} requests (seed ${SEED}), statuses ${JSON.stringify(shown)}, ${crashed} crashes, ${fivexx} 5xx (${designed503} designed 503s), ${partial} partial writes${failures.length ? `, ${failures.length} FAILURES` : ''}`)
process.exit(failures.length === 0 && requests >= TOTAL ? 0 : 1)
