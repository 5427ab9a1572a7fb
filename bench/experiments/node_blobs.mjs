// bench/experiments/node_blobs.mjs: the Node adapter's blob store with a large object
// (default 200 MiB), against a plain SELECT of a bytea column through `pg`,
// in the same run. Run through bench/experiments/node_blobs.sh (builds the adapter,
// makes the scratch database).
//
// Every case runs in its own child process (`node node_blobs.mjs case <name>`)
// so its peak RSS (process.resourceUsage().maxRSS, the kernel's high-water
// mark) belongs to that case alone:
//   idle   - connect and run one query: the floor of a Node + pg process
//   put    - blobs.put of a length-less stream of 1 MiB random pieces
//   get    - blobs.get, then read the body to its end (sha256 of the bytes)
//   plain  - SELECT b FROM bench_plain (one bytea row, the same bytes), sha256
// SP_BENCH_NODE_BLOBS_PIECE_KB sets the adapter's readPieceBytes (default: its own).
// Each of put/get/plain is repeated SP_BENCH_NODE_BLOBS_REPS times (default 3);
// the table shows median MB/s and the highest peak RSS.
//
// Thresholds (exit 1 when missed): get peak RSS <= 2 x put peak RSS, and get
// MB/s >= plain MB/s (median). Exit 2: could not run.
import { spawnSync } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import path from 'node:path'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const ADAPTER = path.join(HERE, '..', '..', 'clients', 'node', 'dist', 'index.js')
const MiB = 1024 * 1024
const SIZE = Number(process.env.SP_BENCH_NODE_BLOBS_MB ?? 200) * MiB
const REPS = Number(process.env.SP_BENCH_NODE_BLOBS_REPS ?? 3)
const KEY = 'bench/node-blob'

async function runCase(name) {
  const { default: pg } = await import(path.join(HERE, '..', '..', 'clients', 'node', 'node_modules', 'pg', 'lib', 'index.js'))
  const { postgresBlobStore } = await import(ADAPTER)
  const pool = new pg.Pool({ max: 4 })
  const piece = process.env.SP_BENCH_NODE_BLOBS_PIECE_KB
  const store = postgresBlobStore(pool, piece ? { readPieceBytes: Number(piece) * 1024 } : {})
  await pool.query('SELECT 1')
  const started = performance.now()
  let bytes = 0
  let sha = ''
  if (name === 'put') {
    let sent = 0
    const hash = createHash('sha256')
    const body = new ReadableStream({
      pull(controller) {
        if (sent >= SIZE) return controller.close()
        const piece = randomBytes(Math.min(MiB, SIZE - sent))
        hash.update(piece)
        sent += piece.byteLength
        controller.enqueue(new Uint8Array(piece.buffer, piece.byteOffset, piece.byteLength))
      },
    })
    const record = await store.put(KEY, body, { contentType: 'application/octet-stream' })
    bytes = record.size
    sha = hash.digest('hex')
  } else if (name === 'get') {
    const object = await store.get(KEY)
    const hash = createHash('sha256')
    for await (const piece of object.body) {
      hash.update(piece)
      bytes += piece.byteLength
    }
    sha = hash.digest('hex')
  } else if (name === 'plain') {
    const { rows } = await pool.query('SELECT b FROM bench_plain')
    bytes = rows[0].b.byteLength
    sha = createHash('sha256').update(rows[0].b).digest('hex')
  }
  const ms = performance.now() - started
  await pool.end()
  const rssMB = process.resourceUsage().maxRSS / 1024
  process.stdout.write(JSON.stringify({ name, ms, bytes, sha, rssMB }) + '\n')
}

function child(name) {
  const out = spawnSync(process.execPath, [fileURLToPath(import.meta.url), 'case', name], {
    env: process.env,
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  })
  if (out.status !== 0) {
    process.stderr.write(out.stderr)
    throw new Error(`case ${name} failed (exit ${out.status})`)
  }
  return JSON.parse(out.stdout.trim().split('\n').pop())
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

async function main() {
  const { default: pg } = await import(path.join(HERE, '..', '..', 'clients', 'node', 'node_modules', 'pg', 'lib', 'index.js'))
  const admin = new pg.Client()
  await admin.connect()
  const results = { idle: [child('idle')], put: [], get: [], plain: [] }
  let sha
  for (let rep = 0; rep < REPS; rep++) {
    const put = child('put')
    if (put.bytes !== SIZE) throw new Error(`put stored ${put.bytes} bytes, not ${SIZE}`)
    sha = put.sha
    results.put.push(put)
    // The baseline holds the same bytes, copied on the server.
    await admin.query('DROP TABLE IF EXISTS bench_plain')
    await admin.query(`CREATE TABLE bench_plain AS SELECT body AS b FROM sandbox_persist.blob_get($1)`, [KEY])
    await admin.query('VACUUM ANALYZE bench_plain')
    for (const name of rep % 2 === 0 ? ['get', 'plain'] : ['plain', 'get']) {
      const r = child(name)
      if (r.bytes !== SIZE || r.sha !== sha) throw new Error(`${name} read back ${r.bytes} bytes that differ from the put`)
      results[name].push(r)
    }
  }
  await admin.query('DROP TABLE IF EXISTS bench_plain')
  await admin.end()

  const row = (name) => {
    const rs = results[name]
    const mbps = median(rs.map((r) => r.bytes / MiB / (r.ms / 1000)))
    const rss = Math.max(...rs.map((r) => r.rssMB))
    return { name, mbps, rss, runs: rs.map((r) => `${(r.bytes / MiB / (r.ms / 1000)).toFixed(1)} MB/s, ${r.rssMB.toFixed(0)} MB`).join('; ') }
  }
  const table = ['put', 'get', 'plain'].map(row)
  console.log(`object: ${SIZE / MiB} MiB of random bytes; ${REPS} runs per case; idle Node+pg process peak RSS ${results.idle[0].rssMB.toFixed(0)} MB`)
  console.log('| case | median MB/s | peak RSS (MB) | runs |')
  console.log('| --- | --- | --- | --- |')
  const label = { put: 'blobs.put (stream, 1 MiB pieces)', get: 'blobs.get, body read to the end', plain: 'baseline: SELECT bytea through pg' }
  for (const r of table) console.log(`| ${label[r.name]} | ${r.mbps.toFixed(1)} | ${r.rss.toFixed(0)} | ${r.runs} |`)
  const [put, get, plain] = table
  const rssRatio = get.rss / put.rss
  const speedRatio = get.mbps / plain.mbps
  console.log(`get peak RSS / put peak RSS = ${rssRatio.toFixed(2)} (limit 2); get MB/s / plain select MB/s = ${speedRatio.toFixed(2)} (at least 1)`)
  process.exitCode = rssRatio <= 2 && speedRatio >= 1 ? 0 : 1
}

if (process.argv[2] === 'case') {
  runCase(process.argv[3]).catch((error) => {
    console.error(error)
    process.exit(2)
  })
} else {
  main().catch((error) => {
    console.error(error)
    process.exit(2)
  })
}
