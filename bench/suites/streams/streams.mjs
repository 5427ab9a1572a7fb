// bench/suites/streams/streams.mjs: the streams figures of issue 22 through the
// Node adapter (see bench/suites/streams.sh). Prints suite-format rows.
import pg from '../../../clients/node/node_modules/pg/lib/index.js'
import { postgresDurability } from '../../../clients/node/dist/index.js'
import { performance } from 'node:perf_hooks'
import { median, percentile as pct, sig4 as fmt, streamChunk as chunk } from '../_common.mjs'

const QUICK = process.env.QUICK === '1'
const SYNC = process.env.BENCH_SYNC ?? 'off'
const REPS = QUICK ? 3 : 7
const pool = new pg.Pool({ max: 12, options: `-c synchronous_commit=${SYNC}` })
const say = (s) => process.stderr.write(s + '\n')
const row = (section, workload, metric, ours, bname, base, good) =>
  console.log(['row', section, workload, metric, fmt(ours), bname, fmt(base), fmt(ours / base), good].join('\t'))
let runNo = 0
const rid = (p) => `${p}-${process.pid}-${++runNo}`

async function resume() {
  const factory = postgresDurability(pool, { microBatchMs: 0 })
  const runId = rid('resume')
  const producer = factory(runId)
  for (let b = 0; b < 10; b++) await producer.append(Array.from({ length: 100 }, (_, i) => chunk(b * 100 + i)))
  await producer.close()
  const server = [], adapter = []
  for (let r = 0; r < REPS + 2; r++) {
    let t = performance.now()
    // the server's read, as text: the round trip and the function, no client-side parse
    await pool.query({ text: 'SELECT sandbox_persist.event_log_read_verified($1, 0, NULL, 1000)::text AS r', values: [runId] })
    const s = performance.now() - t
    t = performance.now()
    let n = 0
    for await (const _ of factory(runId).read('-1')) n++
    const a = performance.now() - t
    if (n !== 1000) throw new Error(`read ${n} of 1000`)
    if (r >= 2) { server.push(s); adapter.push(a) }
  }
  row('streams', 'resume 1000 chunks', 'ms', median(adapter), 'event_log_read_verified', median(server), 'lower')
  await factory.close()
}

async function follower() {
  // one producer at ~100 chunks/s, one follower: append-commit to follower-seen
  const factory = postgresDurability(pool, { microBatchMs: 0 })
  const runId = rid('follow')
  const producer = factory(runId)
  await producer.append([chunk(0)])
  const n = QUICK ? 100 : 300
  const seen = new Map()
  const ac = new AbortController()
  const reading = (async () => {
    for await (const e of factory(runId).read('-1', ac.signal)) {
      seen.set(e.chunk.delta, performance.now())
      if (seen.size === n + 1) break
    }
  })()
  await new Promise((r) => setTimeout(r, 100))
  const commit = [], lat = []
  for (let i = 1; i <= n; i++) {
    const t0 = performance.now()
    await producer.append([chunk(i)])
    const t1 = performance.now()
    commit.push(t1 - t0)
    await new Promise((r) => setTimeout(r, 10))
    const s = seen.get('tok' + i)
    if (s !== undefined) lat.push(s - t0)
  }
  await producer.close()
  await reading
  // the follower sees a chunk after the append's call returned at the earliest
  // in the producer's clock only if notification beats the reply: measure from the call's start
  row('streams', 'follower 100 chunks/s', 'p50 ms (append start to seen)', median(lat), 'append call', median(commit), 'lower')
  row('streams', 'follower 100 chunks/s', 'p99 ms (append start to seen)', pct(lat, 0.99), 'append call p99', pct(commit, 0.99), 'lower')
  await factory.close()
}

async function producers(microBatchMs, streams) {
  const factory = postgresDurability(pool, { microBatchMs })
  const per = QUICK ? 100 : 300
  const t = performance.now()
  await Promise.all(Array.from({ length: streams }, async () => {
    const p = factory(rid('prod'))
    for (let i = 0; i < per; i++) await p.append([chunk(i)])
    await p.close()
  }))
  const s = (performance.now() - t) / 1000
  await factory.close()
  return (streams * per) / s
}

const which = process.argv[2] ?? 'all'
try {
  if (which === 'all' || which === 'resume') await resume()
  if (which === 'all' || which === 'follow') await follower()
  if (which === 'all' || which === 'produce') {
    for (const n of QUICK ? [8] : [1, 8, 32]) {
      const on = [], off = []
      for (let r = 0; r < 3; r++) { off.push(await producers(0, n)); on.push(await producers(2, n)) }
      row('streams', `producer ${n} streams sync ${SYNC}`, 'chunks/s', median(on), 'microBatchMs 0', median(off), 'higher')
    }
  }
} finally {
  await pool.end()
}
