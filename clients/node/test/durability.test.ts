/**
 * The durable event log through the StreamDurability adapter (docs/contract/
 * event-log.md §4): E15, E18, E19, E26, E27, and the reaper wake-up M15.
 */
import { createHash } from 'node:crypto'
import pg from 'pg'
import type { StreamChunk } from '@tanstack/ai'
import { beforeEach, describe, expect, it } from 'vitest'
import { postgresDurability, postgresMaintenance, postgresPersistence, runTag, type ReaperWakeup } from '../src/index.js'
import { countingPool, makePool, rejection, reset, rows, sleep, until } from './helpers.js'

const pool = makePool()
const durability = postgresDurability(pool, { pollMs: 20_000 })

beforeEach(async () => {
  await reset(pool)
})

const chunk = (n: number, type = 'TEXT_MESSAGE_CONTENT'): StreamChunk =>
  ({ type, messageId: 'm', delta: `d${n}`, timestamp: n }) as unknown as StreamChunk
const finished = (n: number): StreamChunk => ({ type: 'RUN_FINISHED', runId: 'r', threadId: 't', timestamp: n }) as unknown as StreamChunk

async function listen(channel: string): Promise<{ client: pg.Client; payloads: string[] }> {
  const client = new pg.Client()
  await client.connect()
  const payloads: string[] = []
  client.on('notification', (m) => {
    if (m.channel === channel) payloads.push(m.payload ?? '')
  })
  await client.query(`LISTEN ${channel}`)
  return { client, payloads }
}

/**
 * `n` readers of `runId` from '-1' in one factory over a counting pool (a
 * read is a counted query); `stop` aborts them and closes the factory.
 */
function parkedReaders(runId: string, n: number, onEntry: (reader: number, entry: { offset: string; chunk: StreamChunk }) => void) {
  const counted = countingPool(pool)
  const readers = postgresDurability(counted.db, { pollMs: 20_000 })
  const controller = new AbortController()
  const consuming = Array.from({ length: n }, async (_, i) => {
    for await (const e of readers(runId).read('-1', controller.signal)) onEntry(i, e)
  })
  return {
    count: counted.count,
    ended: () => Promise.all(consuming),
    // a failed expectation must not leave a reader parked past the next case's reset
    async stop() {
      controller.abort()
      await Promise.all(consuming.map((c) => c.catch(() => undefined)))
      await readers.close()
    },
  }
}

describe('event log', () => {
  it('E15 a committed append or close notifies sandbox_persist_event_log with the log id (an append also with its entries when they fit); a rolled-back one does not', async () => {
    const { client, payloads } = await listen('sandbox_persist_event_log')
    try {
      const log = durability('e15-run')
      const first = await log.append([chunk(1)])
      const [row] = await rows<{ log_id: string }>(pool, `SELECT log_id::text FROM sandbox_persist.event_logs WHERE run_id = 'e15-run'`)
      const id = row!.log_id
      // The payload: the log id, a space, the digest before the entries and the entries as a read gives them.
      const digestOf = (offset: string) => offset.split('.')[3]!
      await until(() => payloads.length > 0)
      expect(payloads).toEqual([`${id} {"prev":"0000000000000000","entries":[{"seq":1,"digest":"${digestOf(first[0]!)}","chunk":${JSON.stringify(chunk(1))}}]}`])
      // Chunk text travels byte for byte, as stored (spacing, key order); prev is the tail's digest.
      const [appended] = await rows<{ r: Array<{ seq: number; digest: string }> }>(
        pool,
        `SELECT sandbox_persist.event_log_append('e15-run', '[ {"b" : 1, "a":[ 2 ]}, {"type":"X"} ]', '{"withDigests": true}') AS r`,
      )
      const second = appended!.r
      await until(() => payloads.length > 1)
      expect(payloads[1]).toBe(
        `${id} {"prev":"${digestOf(first[0]!)}","entries":[{"seq":2,"digest":"${second[0]!.digest}","chunk":{"b" : 1, "a":[ 2 ]}},` +
          `{"seq":3,"digest":"${second[1]!.digest}","chunk":{"type":"X"}}]}`,
      )
      // Entries that would pass PostgreSQL's 8000-byte payload limit: the log id alone.
      await log.append([{ ...chunk(4), delta: 'x'.repeat(7900) } as unknown as StreamChunk])
      await until(() => payloads.length > 2)
      expect(payloads[2]).toBe(id)
      const tx = await pool.connect()
      try {
        await tx.query('BEGIN')
        await tx.query(`SELECT sandbox_persist.event_log_append('e15-run', '[{"x":1}]')`)
        await tx.query(`SELECT sandbox_persist.event_log_close('e15-run')`)
        await tx.query('ROLLBACK')
      } finally {
        tx.release()
      }
      await log.close()
      // Notifications arrive in commit order: one from the rolled-back append or
      // close would have come before the close's.
      await until(() => payloads.length > 3)
      expect(payloads.slice(2)).toEqual([id, id])
    } finally {
      await client.end()
    }
  })

  it('E26 a parked reader takes the entries a notification carries without a read; a gap, a rewritten history or an oversized append makes it read', async () => {
    const producer = durability('e26-run')
    await producer.append([chunk(1)])
    const seen: string[] = []
    const readers = parkedReaders('e26-run', 1, (_, e) => seen.push(e.offset))
    try {
      await until(() => seen.length === 1)
      const afterFirstRead = readers.count()
      const offsets = [...(await producer.append([chunk(2)])), ...(await producer.append([chunk(3), chunk(4)]))]
      await until(() => seen.length === 4)
      // Only the first read went to the server: the three entries came with their notifications.
      expect(readers.count()).toBe(afterFirstRead)
      // An append too large for a payload is announced by id alone: the reader reads it.
      offsets.push(...(await producer.append([{ ...chunk(5), delta: 'y'.repeat(7900) } as unknown as StreamChunk])))
      await until(() => seen.length === 5)
      expect(readers.count()).toBe(afterFirstRead + 1)
      // A notification that does not continue what the reader holds (here: sent
      // by hand, skipping seq 6) is not taken: the reader reads instead.
      // (the log id through the API, so the case holds through the router too)
      const [row] = await rows<{ log_id: string }>(pool, `SELECT sandbox_persist.event_log_read('e26-run', 0, 0) ->> 'logId' AS log_id`)
      await pool.query(`SELECT pg_notify('sandbox_persist_event_log', $1)`, [
        `${row!.log_id} {"prev":"0000000000000000","entries":[{"seq":7,"digest":"0000000000000001","chunk":{"type":"FORGED"}}]}`,
      ])
      await until(() => readers.count() === afterFirstRead + 2)
      offsets.push(...(await producer.append([chunk(6)])))
      await until(() => seen.length === 6)
      await producer.close()
      await readers.ended()
      expect(seen).toEqual([...(await producer.snapshot()).map((e) => e.offset)])
      expect(seen.slice(1)).toEqual(offsets)
    } finally {
      await readers.stop()
    }
  })

  it('E28 one micro-batch of two streams (event_log_append_many): each parked reader takes its own entries from the notifications, without a read', async () => {
    const batching = postgresDurability(pool, { microBatchMs: 60_000 })
    const a = batching('e28-a')
    const b = batching('e28-b')
    // both first appends go at once (the other stream's is in flight)
    await Promise.all([a.append([chunk(1)]), b.append([chunk(1)])])
    const seenA: string[] = []
    const seenB: string[] = []
    const readersA = parkedReaders('e28-a', 1, (_, e) => seenA.push(e.offset))
    const readersB = parkedReaders('e28-b', 1, (_, e) => seenB.push(e.offset))
    try {
      await until(() => seenA.length === 1 && seenB.length === 1)
      const reads = readersA.count() + readersB.count()
      // both streams waiting: one batch (with a 60 s window, nothing else would send it)
      const [ta, tb] = await Promise.all([a.append([chunk(2), chunk(3)]), b.append([chunk(2)])])
      await until(() => seenA.length === 3 && seenB.length === 2)
      expect(readersA.count() + readersB.count()).toBe(reads)
      expect(seenA.slice(1)).toEqual(ta)
      expect(seenB.slice(1)).toEqual(tb)
    } finally {
      await Promise.all([readersA.stop(), readersB.stop()])
      await batching.close()
    }
  })

  it('E27 two parked readers of one log in one factory each get chunk objects of their own from a notification', async () => {
    const producer = durability('e27-run')
    await producer.append([chunk(1)])
    const seen: Array<Array<StreamChunk>> = [[], []]
    const readers = parkedReaders('e27-run', 2, (i, e) => {
      seen[i]!.push(e.chunk)
      // The first reader's consumer changes what it was handed.
      if (i === 0) (e.chunk as unknown as { delta: string }).delta = 'changed'
    })
    try {
      await until(() => seen[0]!.length === 1 && seen[1]!.length === 1)
      const afterReads = readers.count()
      await producer.append([chunk(2)])
      await until(() => seen[0]!.length === 2 && seen[1]!.length === 2)
      // Both took entry 2 from the notification (no read), as separate objects.
      expect(readers.count()).toBe(afterReads)
      expect(seen[0]![1]).not.toBe(seen[1]![1])
      expect((seen[1]![1] as unknown as { delta: string }).delta).toBe('d2')
    } finally {
      await readers.stop()
    }
  })

  it('E18 read parks, delivers later appends (woken by NOTIFY), ignores RUN_FINISHED, ends only on close', async () => {
    const producer = durability('e18-run')
    await producer.append([chunk(1), finished(2)])
    const reader = postgresDurability(makePool({ max: 2 }), { pollMs: 20_000 })('e18-run')
    const seen: Array<{ offset: string; chunk: StreamChunk; at: number }> = []
    let ended = false
    const consuming = (async () => {
      for await (const entry of reader.read('-1')) seen.push({ ...entry, at: performance.now() })
      ended = true
    })()
    while (seen.length < 2) await sleep(10)
    await sleep(300)
    expect(ended).toBe(false)
    const sentAt = performance.now()
    await producer.append([chunk(3), finished(4)])
    while (seen.length < 4) await sleep(10)
    // Woken by the notification, not by the 20 s fallback poll (half of it is the margin).
    expect(seen[2]!.at - sentAt).toBeLessThan(10_000)
    await sleep(300)
    expect(ended).toBe(false)
    await producer.close()
    await consuming
    expect(ended).toBe(true)
    expect(seen.map((e) => (e.chunk as { type: string }).type)).toEqual(['TEXT_MESSAGE_CONTENT', 'RUN_FINISHED', 'TEXT_MESSAGE_CONTENT', 'RUN_FINISHED'])
    expect(seen.map((e) => e.offset)).toEqual((await producer.snapshot()).map((e) => e.offset))
    // A read after close from a given offset ends at the tail.
    const rest: string[] = []
    for await (const e of reader.read(seen[1]!.offset)) rest.push(e.offset)
    expect(rest).toEqual([seen[2]!.offset, seen[3]!.offset])
    // After close, 'now' ends at once.
    const none: string[] = []
    for await (const e of reader.read('now')) none.push(e.offset)
    expect(none).toEqual([])
  })

  it("E18 'now' reads only future writes; an aborted signal ends a parked read", async () => {
    const log = durability('e18-now')
    await log.append([chunk(1)])
    // The reader's queries are counted: 'now' is the tail its first read returns,
    // so the test appends only once that read is back (not after a guessed time).
    let reads = 0
    const counted = {
      query: ((...args: unknown[]) => {
        const result = (pool.query as (...a: unknown[]) => Promise<unknown>)(...args)
        if (typeof args[0] === 'string' && args[0].includes('event_log_read')) void result.then(() => (reads += 1), () => undefined)
        return result
      }) as unknown as pg.Pool['query'],
    }
    const readers = postgresDurability(counted)
    const reader = readers('e18-now')
    const controller = new AbortController()
    const seen: StreamChunk[] = []
    const consuming = (async () => {
      for await (const e of reader.read('now', controller.signal)) seen.push(e.chunk)
    })()
    await until(() => reads > 0)
    await log.append([chunk(2)])
    await until(() => seen.length > 0)
    controller.abort()
    await consuming
    expect(seen).toEqual([chunk(2)])
    await readers.close()
  })

  it('E19 offsets are v2.<tag>.<seq>.<digest>, unique, free of whitespace, CR, LF and NUL; another run\'s offset is rejected', async () => {
    const log = durability('run/é 1')
    const offsets = await log.append([chunk(1), chunk(2), chunk(3)])
    const tag = createHash('sha256').update('run/é 1', 'utf8').digest('hex').slice(0, 12)
    expect(runTag('run/é 1')).toBe(tag)
    const digests = await rows<{ d: string }>(
      pool,
      `SELECT lpad(to_hex(e.digest), 16, '0') AS d FROM sandbox_persist.event_log_entries e
         JOIN sandbox_persist.event_logs l USING (log_id) WHERE l.run_id = 'run/é 1' ORDER BY e.seq`,
    )
    expect(offsets).toEqual([1, 2, 3].map((n) => `v2.${tag}.${n}.${digests[n - 1]!.d}`))
    expect(new Set(offsets).size).toBe(3)
    for (const o of offsets) {
      expect(o).toBe(o.trim())
      expect(/[\s\r\n\u0000]/.test(o)).toBe(false)
    }
    const [fourth] = await log.append([chunk(4)])
    expect(fourth).toMatch(new RegExp(`^v2\\.${tag}\\.4\\.[0-9a-f]{16}$`))
    expect(await log.append([])).toEqual([])
    const other = durability('another-run')
    await other.append([chunk(1)])
    const foreign = await rejection(other.read(offsets[0]!)[Symbol.asyncIterator]().next())
    expect(foreign.message).toContain('belongs to another run')
    await expect(log.read('garbage')[Symbol.asyncIterator]().next()).rejects.toThrow(/Invalid/)
  })

  it('appends carry one producerId per instance and increasing producerSeq; a replayed append is idempotent', async () => {
    const log = durability('prod-run')
    await log.append([chunk(1)])
    await log.append([chunk(2), chunk(3)])
    const ledger = await rows<{ producer_id: string; producer_seq: string; first_seq: string }>(
      pool,
      `SELECT producer_id::text, producer_seq::text, first_seq::text FROM sandbox_persist.event_log_producers ORDER BY producer_seq`,
    )
    expect(ledger.map((r) => [r.producer_id, r.producer_seq, r.first_seq])).toEqual([
      [log.producerId, '1', '1'],
      [log.producerId, '2', '2'],
    ])
    // The retry the adapter would send after an unknown outcome returns the same numbers.
    const [again] = await rows<{ r: number[] }>(pool, `SELECT sandbox_persist.event_log_append($1, $2::json, $3::json) AS r`, [
      'prod-run',
      JSON.stringify([chunk(2), chunk(3)]),
      JSON.stringify({ producerId: log.producerId, producerSeq: 2 }),
    ])
    expect(again!.r).toEqual([2, 3])
    expect((await log.snapshot()).length).toBe(3)
    expect(durability('prod-run').producerId).not.toBe(log.producerId)
  })

  it('chunks round-trip byte-faithfully (U+0000, lone surrogates, key order)', async () => {
    const log = durability('faithful')
    const odd = { type: 'CUSTOM', name: 'x', value: { s: 'a\u0000b\ud800', z: 1, a: 2 }, timestamp: 1 } as unknown as StreamChunk
    await log.append([odd])
    const [entry] = await log.snapshot()
    expect(entry!.chunk).toEqual(odd)
    expect(Object.keys((entry!.chunk as unknown as { value: object }).value)).toEqual(['s', 'z', 'a'])
  })

  it('snapshot never waits and is [] for an unknown run; close is idempotent; a concrete offset of an unknown run fails loudly', async () => {
    const log = durability('snap-run')
    expect(await log.snapshot()).toEqual([])
    expect(await rows(pool, `SELECT 1 FROM sandbox_persist.event_logs`)).toEqual([])
    const error = await rejection(log.read(`v1.${runTag('snap-run')}.3`)[Symbol.asyncIterator]().next())
    expect(error.code).toBe('EVENT_LOG_NOT_FOUND')
    const firstOffsets = await log.append([chunk(1)])
    const beyond = await rejection(log.read(`v1.${runTag('snap-run')}.9`)[Symbol.asyncIterator]().next())
    expect(beyond.code).toBe('EVENT_LOG_OFFSET_OUT_OF_RANGE')
    await log.close()
    await log.close()
    const snap = await log.snapshot()
    expect(snap.map((e) => e.offset)).toEqual(firstOffsets)
    snap[0]!.chunk = chunk(99)
    expect((await log.snapshot())[0]!.chunk).toEqual(chunk(1))
  })

  it("'-1' on a missing log waits for the first chunk up to a deadline, longer for a known running run", async () => {
    const quick = postgresDurability(pool, { pollMs: 100, firstChunkDeadlineMs: 300, activeRunFirstChunkDeadlineMs: 10_000 })
    const started = performance.now()
    const error = await rejection(quick('ghost').read('-1')[Symbol.asyncIterator]().next())
    expect(error.code).toBe('EVENT_LOG_NOT_FOUND')
    expect(performance.now() - started).toBeGreaterThanOrEqual(250)
    await postgresPersistence(pool).stores.runs.createOrResume({ runId: 'slow-start', threadId: 't', startedAt: 1 })
    const reading = quick('slow-start').read('-1')[Symbol.asyncIterator]().next()
    await sleep(700)
    await quick('slow-start').append([chunk(1)])
    const first = await reading
    expect(first.done).toBe(false)
    expect(first.value?.chunk).toEqual(chunk(1))
  })

  it('built from a Request: X-Run-Id / ?runId name the run, Last-Event-ID / ?offset the resume point', async () => {
    const producer = durability(new Request('http://app.test/chat', { method: 'POST', headers: { 'X-Run-Id': 'req-run' } }))
    expect(producer.runId).toBe('req-run')
    expect(producer.resumeFrom()).toBeNull()
    const [o1] = await producer.append([chunk(1)])
    const resume = durability(new Request(`http://app.test/chat?runId=req-run`, { headers: { 'Last-Event-ID': o1! } }))
    expect(resume.runId).toBe('req-run')
    expect(resume.resumeFrom()).toBe(o1)
    const byQuery = durability(new Request(`http://app.test/chat?runId=req-run&offset=${o1}`))
    expect(byQuery.resumeFrom()).toBe(o1)
    const anonymous = durability(new Request('http://app.test/chat', { method: 'POST' }))
    expect(anonymous.runId).toMatch(/^[0-9a-f-]{36}$/)
    expect(() => durability(new Request('http://app.test/chat', { headers: { 'Last-Event-ID': o1! } }))).toThrow(/X-Run-Id/)
    expect(() => durability({ runId: 'x', offset: 'now' }).resumeFrom()).not.toThrow()
    expect(() => durability('bad\nid')).toThrow()
  })
})

describe('maintenance wake-up', () => {
  it('M15 maintain() notifies sandbox_persist_reaper with the detached and due counts; nothing without detached runs', async () => {
    const client = await pool.connect()
    try {
      await client.query(`SET sandbox_persist.reaper_ttl = '60s'`)
      const db = { query: client.query.bind(client) as pg.Pool['query'] }
      const maintenance = postgresMaintenance(pool)
      const wakeups: ReaperWakeup[] = []
      const unsubscribe = await maintenance.onReaperWake((w) => wakeups.push(w))
      const clocked = postgresMaintenance(db)
      const now = 1_000_000
      await clocked.maintain({ nowMs: now })
      const runs = postgresPersistence(pool).stores.runs
      for (const [id, since] of [['m15-old', now - 120_000], ['m15-new', now - 1_000]] as const) {
        await runs.createOrResume({ runId: id, threadId: 't', startedAt: 1 })
        await runs.update(id, { detachedSince: since, sandboxKey: 'sb' })
      }
      await runs.createOrResume({ runId: 'm15-attached', threadId: 't', startedAt: 1 })
      await clocked.maintain({ nowMs: now })
      // Notifications arrive in commit order: had the first maintain() (no
      // detached runs) notified, its wake-up would come first.
      await until(() => wakeups.length > 0)
      expect(wakeups).toEqual([{ detached: 2, due: 1 }])
      unsubscribe()
      // maintain never acts on runs
      expect((await runs.get('m15-old'))?.detachedSince).toBe(now - 120_000)
    } finally {
      await client.query('RESET sandbox_persist.reaper_ttl')
      client.release()
    }
  })
})
