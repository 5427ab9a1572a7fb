/**
 * A run's event log served by the stream server as the read-only JSON stream
 * `run-logs/<run_id>` (docs/contract/streams.md §1.1), read with the official
 * Durable Streams client (@durable-streams/client): the log is written the
 * way an application writes it, through postgresDurability
 * (event_log_append), and read from -1, live (long-poll and SSE, woken by the
 * event log's notifications) and from a saved offset. Cases DS32-DS35.
 */
import { stream, type JsonBatch, type LiveMode, type StreamResponse } from '@durable-streams/client'
import type { StreamChunk } from '@tanstack/ai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { postgresDurability, serveStreams, type StreamServer } from '../src/index.js'
import { makePool, reset, sleep, until } from './helpers.js'

interface Chunk {
  type: string
  n: number
  delta: string
}

const pool = makePool({ max: 16 })
const durability = postgresDurability(pool, { pollMs: 20_000 })
let server: StreamServer

/** Every request the client made (method, URL, status): proves which live mode carried the data. */
const requests: Array<{ method: string; url: string; status: number }> = []
const recordingFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init)
  const url = input instanceof Request ? input.url : String(input)
  requests.push({ method: init?.method ?? (input instanceof Request ? input.method : 'GET'), url, status: response.status })
  return response
}

beforeAll(async () => {
  await reset(pool)
  server = await serveStreams({ pool, port: 0, host: '127.0.0.1', longPollTimeoutMs: 700, sseLifetimeMs: 1500, sseHeartbeatMs: 300 })
})

afterAll(async () => {
  await server?.close()
  await durability.close()
})

const urlOf = (runId: string) => `${server.url}/v1/stream/run-logs/${encodeURIComponent(runId)}`
const chunks = (count: number, from = 0): Chunk[] =>
  Array.from({ length: count }, (_, i) => ({ type: 'TEXT_MESSAGE_CONTENT', n: from + i, delta: `d${from + i} ${'é✓"\\'.repeat((from + i) % 3)}` }))

/** Append chunks through the adapter's durability (event_log_append), in `groups` appends with a pause between them. */
async function writeOverTime(runId: string, items: Chunk[], groups: number, pauseMs: number): Promise<void> {
  const log = durability(runId)
  const size = Math.ceil(items.length / groups)
  for (let i = 0; i < items.length; i += size) {
    await log.append(items.slice(i, i + size) as unknown as StreamChunk[])
    await sleep(pauseMs)
  }
}

/** A live reader collecting every JSON batch it is handed. */
function collect(res: StreamResponse<Chunk>) {
  const items: Chunk[] = []
  const batches: Array<JsonBatch<Chunk>> = []
  res.subscribeJson(async (batch) => {
    batches.push(batch)
    items.push(...batch.items)
  })
  return { items, batches }
}

const liveRequests = (runId: string, mode: string) =>
  requests.filter((r) => r.method === 'GET' && r.url.includes(`/run-logs/${encodeURIComponent(runId)}?`) && r.url.includes(`live=${mode}`))

/** The tail offset of a run log (HEAD). */
async function tailOf(runId: string): Promise<string> {
  const head = await fetch(urlOf(runId), { method: 'HEAD' })
  expect(head.status).toBe(200)
  return head.headers.get('Stream-Next-Offset')!
}

describe('a run event log served as the stream run-logs/<run_id>', () => {
  it('DS32: a log written through postgresDurability reads back from -1 with exactly its chunks; HEAD gives its tail', async () => {
    const written = chunks(50)
    await writeOverTime('ds32', written, 5, 0)
    const res = await stream<Chunk>({ url: urlOf('ds32'), live: false, fetch: recordingFetch })
    expect(res.contentType).toBe('application/json')
    expect(await res.json()).toEqual(written)
    expect(res.upToDate).toBe(true)
    expect(res.streamClosed).toBe(false)
    expect(res.offset).toBe(await tailOf('ds32'))
    expect(res.offset).toBe(`${'0'.repeat(16)}_${String(50).padStart(16, '0')}`)

    // The body is the stored chunks' exact text (event_log_snapshot gives it), joined as an array.
    const raw = await fetch(`${urlOf('ds32')}?offset=-1`)
    const { rows } = await pool.query<{ body: string }>(
      `SELECT '[' || string_agg(e.chunk::text, ',' ORDER BY e.seq) || ']' AS body
         FROM sandbox_persist.event_log_entries e JOIN sandbox_persist.event_logs l USING (log_id) WHERE l.run_id = 'ds32'`,
    )
    expect(await raw.text()).toBe(rows[0]!.body)

    // Closing the log makes a read that reaches its tail closed.
    await durability('ds32').close()
    const closed = await stream<Chunk>({ url: urlOf('ds32'), live: false })
    expect(await closed.json()).toEqual(written)
    expect(closed.streamClosed).toBe(true)
  })

  it('DS33: a run without a log is 404; writes at run-logs/<run_id> are 409 and change nothing', async () => {
    expect((await fetch(urlOf('ds33-nobody'))).status).toBe(404)
    expect((await fetch(urlOf('ds33-nobody'), { method: 'HEAD' })).status).toBe(404)
    await writeOverTime('ds33', chunks(2), 1, 0)
    const put = await fetch(urlOf('ds33'), { method: 'PUT', headers: { 'Content-Type': 'application/json' } })
    const post = await fetch(urlOf('ds33'), { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '[{"x":1}]' })
    const del = await fetch(urlOf('ds33'), { method: 'DELETE' })
    const putNew = await fetch(urlOf('ds33-new'), { method: 'PUT', headers: { 'Content-Type': 'application/json' } })
    expect([put.status, post.status, del.status, putNew.status]).toEqual([409, 409, 409, 409])
    expect(await post.text()).toContain("stream path is a run's event log")
    expect(await (await stream<Chunk>({ url: urlOf('ds33'), live: false })).json()).toEqual(chunks(2))
    expect((await fetch(urlOf('ds33-new'))).status).toBe(404)
  })

  for (const [id, mode] of [
    ['DS34.1', 'long-poll'],
    ['DS34.2', 'sse'],
  ] as const) {
    it(`${id}: a ${mode} reader of run-logs/<run_id> started before the appends receives every chunk once, in order, and ends at close`, async () => {
      const runId = `ds34-${mode}`
      const before = chunks(5)
      await writeOverTime(runId, before, 1, 0)

      const res = await stream<Chunk>({ url: urlOf(runId), live: mode, fetch: recordingFetch })
      const got = collect(res)
      // The reader has caught up and waits on the server before anything else is written.
      await until(() => got.items.length === before.length && server.handler.liveReaders >= 1)

      const after = chunks(60, before.length)
      await writeOverTime(runId, after, 12, 120)
      await until(() => got.items.length >= before.length + after.length)
      await sleep(300) // anything extra (a duplicate) would arrive now
      expect(got.items).toEqual([...before, ...after])

      // The log's close ends the live read.
      await durability(runId).close()
      await until(() => res.streamClosed)
      await res.closed.catch(() => undefined)
      expect(got.items).toEqual([...before, ...after])

      const offsets = got.batches.map((b) => b.offset)
      expect([...offsets].sort()).toEqual(offsets)
      expect(offsets.at(-1)).toBe(await tailOf(runId))
      const live = liveRequests(runId, mode)
      expect(live.length).toBeGreaterThan(0)
      expect(live.every((r) => r.status === 200 || r.status === 204)).toBe(true)
      expect(liveRequests(runId, mode === 'sse' ? 'long-poll' : 'sse')).toEqual([])
    })
  }

  for (const [id, mode] of [
    ['DS34.3', 'long-poll'],
    ['DS34.4', 'sse'],
  ] as const) {
    it(`${id}: a parked ${mode} reader is woken by the event log's notification, not by a timeout`, async () => {
      // A server whose long-poll and SSE connections outlast the test: data can only come by a wake-up.
      const slow = await serveStreams({ pool, port: 0, host: '127.0.0.1', longPollTimeoutMs: 60_000, sseLifetimeMs: 60_000, sseHeartbeatMs: 30_000 })
      try {
        const runId = `ds34-wake-${mode}`
        await writeOverTime(runId, chunks(1), 1, 0)
        const res = await stream<Chunk>({ url: `${slow.url}/v1/stream/run-logs/${runId}`, live: mode })
        const got = collect(res)
        await until(() => got.items.length === 1 && slow.handler.liveReaders >= 1, 5000)
        for (let n = 1; n <= 3; n++) {
          await sleep(200) // parked again
          const started = performance.now()
          await writeOverTime(runId, chunks(1, n), 1, 0)
          await until(() => got.items.length === n + 1, 5000)
          expect(performance.now() - started).toBeLessThan(5000)
        }
        res.cancel()
        expect(got.items).toEqual(chunks(4))
      } finally {
        await slow.close()
      }
    })
  }

  for (const [id, mode] of [
    ['DS35.1', 'long-poll'],
    ['DS35.2', 'sse'],
    ['DS35.3', false],
  ] as const) {
    it(`${id}: a reader (${mode || 'catch-up'}) resumed from a saved mid offset gets exactly the chunks after it`, async () => {
      const runId = `ds35-${mode || 'catch-up'}`
      const written = chunks(40)
      await writeOverTime(runId, written.slice(0, 20), 4, 0)
      const first = await stream<Chunk>({ url: urlOf(runId), live: false })
      const firstItems = await first.json()
      expect(firstItems).toEqual(written.slice(0, 20))
      const saved = first.offset

      const writing = writeOverTime(runId, written.slice(20), 5, 60)
      const second = await stream<Chunk>({ url: urlOf(runId), offset: saved, live: mode as LiveMode, fetch: recordingFetch })
      if (mode === false) {
        await writing
        const rest = await (await stream<Chunk>({ url: urlOf(runId), offset: saved, live: false })).json()
        expect(rest).toEqual(written.slice(20))
        second.cancel()
        return
      }
      const got = collect(second)
      await writing
      await until(() => got.items.length >= 20)
      await sleep(300)
      second.cancel()
      expect([...firstItems, ...got.items]).toEqual(written)
      expect(got.batches.at(-1)?.offset).toBe(await tailOf(runId))
    })
  }
})
