// bench/suites/ds_server/server.mjs: one Durable Streams server in a child
// process of its own (started by bench.mjs), so that each server has its own
// event loop and its RSS can be read on its own.
//
//   node server.mjs ours       serveStreams over PGDATABASE (clients/node, ADAPTER),
//                              pool of POOL_MAX sessions with synchronous_commit BENCH_SYNC
//   node server.mjs ref-mem    @durable-streams/server, in memory
//   node server.mjs ref-file   @durable-streams/server, file-backed (dataDir DATA_DIR)
//
// It answers over IPC: first { url } once listening; then to { op: 'rss', gc }
// with { rss } (after a full GC when asked), to { op: 'stop' } by stopping.
import { performance } from 'node:perf_hooks'

const kind = process.argv[2]
// The reference server logs every slow append at info level to stdout; the
// suite's stdout carries only its lines: drop info, keep warnings and errors (stderr).
console.info = () => {}
console.log = console.error
const LONG_POLL_MS = 30_000
let stop

if (kind === 'ours') {
  const { default: pg } = await import('pg')
  const { serveStreams } = await import(process.env.ADAPTER)
  const sync = process.env.BENCH_SYNC === 'on' ? 'on' : 'off'
  const pool = new pg.Pool({
    max: Number(process.env.POOL_MAX ?? 16),
    options: `-c synchronous_commit=${sync} -c statement_timeout=120s`,
  })
  // a first connection, so the measurement does not include the pool's start
  await pool.query('SELECT 1')
  const served = await serveStreams({
    pool,
    port: 0,
    host: '127.0.0.1',
    longPollTimeoutMs: LONG_POLL_MS,
    // one SSE connection per reader for the whole suite (the default lifetime is 60 s)
    sseLifetimeMs: 600_000,
  })
  process.send({ url: served.url })
  stop = async () => {
    await served.close()
    await pool.end()
  }
} else if (kind === 'ref-mem' || kind === 'ref-file') {
  const { DurableStreamTestServer } = await import('@durable-streams/server')
  const server = new DurableStreamTestServer({
    port: 0,
    host: '127.0.0.1',
    longPollTimeout: LONG_POLL_MS,
    ...(kind === 'ref-file' ? { dataDir: process.env.DATA_DIR } : {}),
  })
  const url = await server.start()
  process.send({ url })
  stop = () => server.stop()
} else {
  console.error(`server.mjs: unknown kind ${kind}`)
  process.exit(2)
}

process.on('message', async (m) => {
  if (m.op === 'rss') {
    if (m.gc && global.gc) {
      for (let i = 0; i < 3; i++) {
        global.gc()
        await new Promise((r) => setTimeout(r, 20))
      }
    }
    process.send({ rss: process.memoryUsage().rss, at: performance.now() })
  } else if (m.op === 'stop') {
    const timer = setTimeout(() => process.exit(0), 3000)
    try {
      await stop()
    } finally {
      clearTimeout(timer)
      process.exit(0)
    }
  }
})
process.on('disconnect', () => process.exit(0))
