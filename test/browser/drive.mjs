// The browser suite's driver (run by test/browser/run.sh): serveStreams from
// the built adapter (clients/node/dist) on the database named by the PG*
// environment, a second origin serving the page (test/browser/page.js bundled
// with esbuild), headless Chromium driven by playwright-core. For each live
// mode (SSE, long-poll) a writer appends N JSON messages over time with the
// official IdempotentProducer while the page reads the stream live; the page
// is reloaded twice mid-stream and resumes from the offset it saved in
// localStorage; the writer closes the stream; the page's kept messages must
// equal the written ones exactly: no gap, no duplicate.
//
// Env: CHROMIUM (default /usr/bin/chromium), BROWSER_SUITE_MESSAGES (default 100).
// Prints "ok - ..." / "not ok - ..." lines and one "summary: browser: ..." line;
// exits non-zero on any failure.
import http from 'node:http'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const NODE_DIR = path.resolve(HERE, '../../clients/node')
const require = createRequire(path.join(NODE_DIR, 'package.json'))
const pg = require('pg')
const esbuild = require('esbuild')
const { chromium } = require('playwright-core')
const { DurableStream, IdempotentProducer } = await import(pathToFileURL(require.resolve('@durable-streams/client')).href)
const { serveStreams } = await import(pathToFileURL(path.join(NODE_DIR, 'dist/index.js')).href)

const N = Number(process.env.BROWSER_SUITE_MESSAGES ?? 100)
const WRITE_EVERY_MS = 50
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
let failures = 0
const ok = (cond, what) => {
  console.log(`${cond ? 'ok' : 'not ok'} - ${what}`)
  if (!cond) failures += 1
  return cond
}
async function until(what, condition, ceilingMs = 30_000) {
  const end = Date.now() + ceilingMs
  for (;;) {
    if (await condition()) return
    if (Date.now() > end) throw new Error(`${what}: not reached within ${ceilingMs} ms`)
    await sleep(25)
  }
}

// --- the page, bundled -----------------------------------------------------------
const bundle = await esbuild.build({
  entryPoints: [path.join(HERE, 'page.js')],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  write: false,
  nodePaths: [path.join(NODE_DIR, 'node_modules')],
  logLevel: 'warning',
})
const appJs = bundle.outputFiles[0].text
const html = '<!doctype html><meta charset="utf-8"><title>browser suite</title><script type="module" src="/app.js"></script>'
const pageServer = http.createServer((req, res) => {
  const { pathname } = new URL(req.url ?? '/', 'http://x')
  if (pathname === '/') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html)
  else if (pathname === '/app.js') res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(appJs)
  else if (pathname === '/favicon.ico') res.writeHead(204).end()
  else res.writeHead(404).end()
})
await new Promise((resolve) => pageServer.listen(0, '127.0.0.1', resolve))
const pageOrigin = `http://127.0.0.1:${pageServer.address().port}`

// --- the stream server (another origin: the reads are cross-origin, CORS included)
const pool = new pg.Pool({ max: 8 })
pool.on('error', () => undefined)
const server = await serveStreams({ pool, port: 0, host: '127.0.0.1', longPollTimeoutMs: 1000, sseLifetimeMs: 2500 })

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  headless: true,
  args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
})
const chromiumVersion = browser.version()
const totals = { streams: 0, written: 0, read: 0, reloads: 0, gaps: 0, duplicates: 0, liveRequests: {} }

async function round(live) {
  const name = `browser/${live}-${Date.now()}`
  const url = `${server.url}/v1/stream/${name}`
  const handle = await DurableStream.create({ url, contentType: 'application/json' })
  const errors = []
  const producer = new IdempotentProducer(handle, `browser-writer-${live}`, { lingerMs: 2, onError: (e) => errors.push(e) })
  const written = Array.from({ length: N }, (_, i) => ({ n: i, text: `message ${i} ${'é✓'.repeat(i % 3)}` }))

  const context = await browser.newContext()
  const page = await context.newPage()
  const pageErrors = []
  page.on('pageerror', (e) => pageErrors.push(String(e)))
  page.on('console', (m) => {
    // A failed load is reported with its URL by the response listener below.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) pageErrors.push(`console: ${m.text()}`)
  })
  page.on('response', (r) => {
    if (r.status() >= 400) pageErrors.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`)
  })
  page.on('requestfailed', (r) => {
    // Reloading aborts the page's open live request: expected, not an error.
    const why = r.failure()?.errorText ?? ''
    if (!why.includes('ERR_ABORTED')) pageErrors.push(`request failed: ${r.url()}: ${why}`)
  })
  const requests = { sse: 0, 'long-poll': 0, catchUp: 0 }
  page.on('request', (r) => {
    if (!r.url().startsWith(url)) return
    const mode = new URL(r.url()).searchParams.get('live')
    if (mode === 'sse' || mode === 'long-poll') requests[mode] += 1
    else requests.catchUp += 1
  })
  const stored = () =>
    page.evaluate(() => {
      const s = window.__suite
      if (!s) return null
      return { status: s.status, ...JSON.parse(localStorage.getItem(s.key) ?? 'null') }
    }).catch(() => null) // between a reload and the new document

  await page.goto(`${pageOrigin}/?stream=${encodeURIComponent(url)}&live=${live}`)
  await until(`${live}: the page reads live`, async () => (await stored())?.status === 'live')

  // The writer keeps writing while the page reloads, but holds its last fifth
  // until both reloads are done, so they happen mid-stream on a slow machine too.
  let appended = 0
  let reloadsDone
  const reloaded = new Promise((resolve) => (reloadsDone = resolve))
  const writing = (async () => {
    for (const message of written) {
      if (message.n === Math.floor(0.8 * N)) await reloaded
      producer.append(JSON.stringify(message))
      await producer.flush()
      appended += 1
      await sleep(WRITE_EVERY_MS)
    }
  })()

  // Two reloads mid-stream, each once the page has kept part of what was written.
  let reloads = 0
  const midStream = []
  for (const fraction of [0.25, 0.55]) {
    await until(`${live}: the page receives ${fraction * N} messages`, async () => ((await stored())?.items?.length ?? 0) >= fraction * N)
    midStream.push(appended < N)
    await page.reload()
    reloads += 1
    await until(`${live}: the page reads live after reload ${reloads}`, async () => (await stored())?.status === 'live')
  }
  reloadsDone()
  await writing
  await producer.close()
  await until(`${live}: the page sees the stream closed`, async () => (await stored())?.done === true)
  const final = await stored()
  await context.close()

  const got = final.items
  const seen = new Map()
  for (const m of got) seen.set(m.n, (seen.get(m.n) ?? 0) + 1)
  const duplicates = [...seen.values()].filter((c) => c > 1).length
  const gaps = written.filter((m) => !seen.has(m.n)).length
  ok(errors.length === 0, `${live}: the producer reported no error${errors.length ? `: ${errors[0]}` : ''}`)
  ok(pageErrors.length === 0, `${live}: no page error${pageErrors.length ? `: ${pageErrors.join(' | ')}` : ''}`)
  ok(midStream.every(Boolean), `${live}: both reloads happened while the writer was still writing`)
  ok(final.loads === 3, `${live}: the page loaded 3 times (${final.loads})`)
  ok(requests[live] > 0 && requests[live === 'sse' ? 'long-poll' : 'sse'] === 0,
    `${live}: the page read over ${live} (${requests[live]} ${live} requests, ${requests.catchUp} catch-up)`)
  ok(JSON.stringify(got) === JSON.stringify(written),
    `${live}: the page kept exactly the ${N} messages written, in order (${got.length} kept, ${gaps} missing, ${duplicates} duplicated)`)
  totals.streams += 1
  totals.written += N
  totals.read += got.length
  totals.reloads += reloads
  totals.gaps += gaps
  totals.duplicates += duplicates
  totals.liveRequests[live] = requests[live]
}

try {
  for (const live of ['sse', 'long-poll']) {
    try {
      await round(live)
    } catch (error) {
      ok(false, `${live}: ${error?.message ?? error}`)
    }
  }
} finally {
  await browser.close().catch(() => undefined)
  await server.close()
  await new Promise((resolve) => pageServer.close(resolve))
  await pool.end()
}
console.log(
  `summary: browser: Chromium ${chromiumVersion}, ${totals.streams} live streams (sse, long-poll), ` +
    `${totals.written} messages written, ${totals.read} read, ${totals.reloads} reloads mid-stream, ` +
    `${totals.gaps} missing, ${totals.duplicates} duplicated, ${failures} failed checks`,
)
process.exit(failures === 0 && totals.streams === 2 ? 0 : 1)
