// The server under test for test/streams_fuzz/fuzz.mjs, in a process of its
// own so that a crash is seen as one: serveStreams from the built adapter
// (clients/node/dist) on the database named by the PG* environment, with a
// small body limit and a small live-reader limit. Prints "listening <url>"
// once bound; every failure the handler answers with a 500 is written to
// stderr as one "reported: ..." line.
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const NODE_DIR = path.resolve(HERE, '../../clients/node')
const require = createRequire(path.join(NODE_DIR, 'package.json'))
const pg = require('pg')
const { serveStreams } = await import(pathToFileURL(path.join(NODE_DIR, 'dist/index.js')).href)

const pool = new pg.Pool({ max: 12 })
pool.on('error', () => undefined)
const logger = {
  debug() {},
  info() {},
  warn(...args) { process.stderr.write(`reported: ${args.map((a) => (typeof a === 'string' ? a : safe(a))).join(' ')}\n`) },
  error(...args) { process.stderr.write(`reported: ${args.map((a) => (typeof a === 'string' ? a : safe(a))).join(' ')}\n`) },
}
function safe(v) {
  try { return JSON.stringify(v, (_k, x) => (x instanceof Error ? { message: x.message, code: x.code } : x)) } catch { return String(v) }
}
const server = await serveStreams({
  pool,
  port: 0,
  host: '127.0.0.1',
  maxBodyBytes: Number(process.env.FUZZ_MAX_BODY ?? 65536),
  maxLiveReaders: Number(process.env.FUZZ_MAX_LIVE ?? 8),
  longPollTimeoutMs: 1500,
  sseLifetimeMs: 2000,
  sseHeartbeatMs: 500,
  retryAfterSeconds: 1,
  logger,
})
process.stdout.write(`listening ${server.url}\n`)
const stop = async () => {
  await server.close()
  await pool.end()
  process.exit(0)
}
process.on('SIGTERM', () => void stop())
process.on('SIGINT', () => void stop())
