/**
 * Streams at speed (docs/contract/event-log.md §4, "Bulk reads and producer
 * micro-batching"): BR1-BR5 bulk reads, MB1-MB5 producer micro-batching.
 */
import type { StreamChunk } from '@tanstack/ai'
import type pg from 'pg'
import { beforeEach, describe, expect, it } from 'vitest'
import { postgresDurability } from '../src/index.js'
import { makePool, rejection, reset } from './helpers.js'

const pool = makePool()

beforeEach(async () => {
  await reset(pool)
})

const chunk = (n: number, type = 'TEXT_MESSAGE_CONTENT'): StreamChunk =>
  ({ type, messageId: 'm', delta: `d${n}`, timestamp: n }) as unknown as StreamChunk
const finished = (n: number): StreamChunk => ({ type: 'RUN_FINISHED', runId: 'r', threadId: 't', timestamp: n }) as unknown as StreamChunk

/** The pool, with every statement its checked-out clients run recorded (append and read statements are counted). */
function counting(base: pg.Pool): { pool: pg.Pool; appends: () => number; reads: () => number; pieceReads: () => number } {
  const texts: string[] = []
  const wrap = <T extends object>(target: T, query: boolean): T =>
    new Proxy(target, {
      get(t, key) {
        if (query && key === 'query') {
          return (text: unknown, ...rest: unknown[]) => {
            if (typeof text === 'string') texts.push(text)
            return (t as unknown as pg.PoolClient).query(text as string, ...(rest as [unknown[]]))
          }
        }
        if (!query && key === 'connect') {
          return async () => wrap(await (t as unknown as pg.Pool).connect(), true)
        }
        const v = Reflect.get(t, key) as unknown
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(t) : v
      },
    })
  const calls = (fn: string) => texts.filter((t) => t.includes(fn)).length
  return {
    pool: wrap(base, false),
    appends: () => calls('event_log_append'),
    reads: () => calls('event_log_read'),
    pieceReads: () => calls('event_log_read_pieces('),
  } as { pool: pg.Pool; appends: () => number; reads: () => number; pieceReads: () => number }
}

async function all(iterable: AsyncIterable<{ offset: string; chunk: StreamChunk }>) {
  const out: Array<{ offset: string; chunk: StreamChunk }> = []
  for await (const e of iterable) out.push(e)
  return out
}

describe('bulk reads', () => {
  it('BR1 readPages hands on whole pages of pageSize; read yields the same entries and offsets one at a time', async () => {
    const durability = postgresDurability(pool, { pageSize: 1000, microBatchMs: 0 })
    try {
      const log = durability('br1')
      await log.append(Array.from({ length: 2500 }, (_, i) => chunk(i + 1)))
      await log.close()
      const sizes: number[] = []
      const paged: string[] = []
      for await (const page of durability('br1').readPages('-1')) {
        sizes.push(page.length)
        paged.push(...page.map((e) => e.offset))
      }
      expect(sizes).toEqual([1000, 1000, 500])
      const one = await all(durability('br1').read('-1'))
      expect(one.map((e) => e.offset)).toEqual(paged)
      expect(one.map((e) => (e.chunk as unknown as { delta: string }).delta)).toEqual(Array.from({ length: 2500 }, (_, i) => `d${i + 1}`))
      // resuming from an entry in the middle of a page continues right after it
      const rest = await all(durability('br1').read(paged[1499]!))
      expect(rest.map((e) => e.offset)).toEqual(paged.slice(1500))
    } finally {
      await durability.close()
    }
  })

  it('BR2 an abort in the middle of a page ends read before the next entry; breaking out ends the read (close() does not wait for it)', async () => {
    const durability = postgresDurability(pool, { microBatchMs: 0, drainTimeoutMs: 60_000 })
    const log = durability('br2')
    await log.append(Array.from({ length: 50 }, (_, i) => chunk(i + 1)))
    const ac = new AbortController()
    let n = 0
    for await (const _ of durability('br2').read('-1', ac.signal)) {
      n += 1
      if (n === 10) ac.abort()
    }
    expect(n).toBe(10)
    let m = 0
    for await (const _ of durability('br2').read('-1')) if (++m === 3) break
    expect(m).toBe(3)
    // a parked reader left behind would hold close() until drainTimeoutMs
    await durability.close()
  })

  it('BR4 a read of a closed log ends with the page that reaches its tail: one read for a full page, no empty read after it', async () => {
    const counted = counting(pool)
    const durability = postgresDurability(counted.pool, { pageSize: 1000, microBatchMs: 0 })
    try {
      const log = durability('br4')
      await log.append(Array.from({ length: 1000 }, (_, i) => chunk(i + 1)))
      await log.close()
      let before = counted.reads()
      expect((await all(durability('br4').read('-1'))).length).toBe(1000)
      expect(counted.reads() - before).toBe(1)
      await durability('br4').append(Array.from({ length: 1000 }, (_, i) => chunk(i + 1001)))
      before = counted.reads()
      expect((await all(durability('br4').read('-1'))).length).toBe(2000)
      expect(counted.reads() - before).toBe(2)
    } finally {
      await durability.close()
    }
  })

  it('BR5 a page is read as rows of pieces: chunks of every size come back in order, as event_log_read_verified has them', async () => {
    const counted = counting(pool)
    const durability = postgresDurability(counted.pool, { pageSize: 1000, microBatchMs: 0 })
    try {
      const log = durability('br5')
      // small chunks around large ones (40 kB each: a piece of their own), 600 in all
      const sized = (n: number): StreamChunk =>
        ({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: n % 97 === 0 ? 'x'.repeat(40_000) : `d${n}`, timestamp: n }) as unknown as StreamChunk
      await log.append(Array.from({ length: 600 }, (_, i) => sized(i + 1)))
      await log.close()
      const before = counted.pieceReads()
      const got = await all(durability('br5').read('-1'))
      expect(counted.pieceReads() - before).toBe(1)
      const direct = await pool.query(`SELECT sandbox_persist.event_log_read_verified('br5', 0, NULL) AS r`)
      const entries = (direct.rows[0].r as { entries: Array<{ chunk: StreamChunk }> }).entries
      expect(got.map((e) => e.chunk)).toEqual(entries.map((e) => e.chunk))
      expect(got.map((e) => (e.chunk as unknown as { timestamp: number }).timestamp)).toEqual(Array.from({ length: 600 }, (_, i) => i + 1))
      const pieces = await pool.query(`SELECT count(*)::int AS n FROM sandbox_persist.event_log_read_pieces('br5', 0, NULL)`)
      expect(pieces.rows[0].n).toBeGreaterThan(7)
    } finally {
      await durability.close()
    }
  })

  it('BR3 a divergent resume token still fails with SP405 through the bulk path', async () => {
    const durability = postgresDurability(pool, { microBatchMs: 0 })
    try {
      const log = durability('br3')
      const [first] = await log.append([chunk(1), chunk(2)])
      await log.close()
      const forged = first!.replace(/\.[0-9a-f]{16}$/, '.0123456789abcdef')
      const error = await rejection(all(durability('br3').read(forged)))
      expect(error.code).toBe('EVENT_LOG_OFFSET_DIVERGED')
    } finally {
      await durability.close()
    }
  })
})

/**
 * A factory with microBatchMs over a counting pool, streams `<name>-a` and
 * `<name>-b` that have each appended chunk 1 (both first appends sent
 * together, so neither waits for the other), and the append count after them.
 */
async function twoStreams(name: string, microBatchMs: number) {
  const c = counting(pool)
  const durability = postgresDurability(c.pool, { microBatchMs })
  const a = durability(`${name}-a`)
  const b = durability(`${name}-b`)
  await Promise.all([a.append([chunk(1)]), b.append([chunk(1)])])
  return { c, durability, a, b, before: c.appends() }
}

describe('producer micro-batching', () => {
  it('MB1 appends of two streams waiting together go in one call; each resolves with exactly its own offsets', async () => {
    // each first append goes at once: every other open stream's append is in flight
    const { c, durability, a, b, before } = await twoStreams('mb1', 60_000)
    try {
      // both streams waiting: the second append completes the batch, no timer needed
      const [ta, tb] = await Promise.all([a.append([chunk(2), chunk(3)]), b.append([chunk(2)])])
      expect(c.appends() - before).toBe(1)
      expect(ta!.map((o) => o.split('.')[2])).toEqual(['2', '3'])
      expect(tb!.map((o) => o.split('.')[2])).toEqual(['2'])
      await Promise.all([a.close(), b.close()])
      const ra = await all(durability('mb1-a').read('-1'))
      const rb = await all(durability('mb1-b').read('-1'))
      expect(ra.map((e) => e.offset).slice(1)).toEqual(ta)
      expect(rb.map((e) => e.offset).slice(1)).toEqual(tb)
    } finally {
      await durability.close()
    }
  })

  it('MB2 a lone append waits at most microBatchMs for company, then goes alone', async () => {
    const { c, durability, a, before } = await twoStreams('mb2', 5)
    try {
      const [t] = await a.append([chunk(2)]) // b never comes
      expect(t!.split('.')[2]).toBe('2')
      expect(c.appends() - before).toBe(1)
    } finally {
      await durability.close()
    }
  })

  it('MB3 a terminal chunk and a close flush at once (a wait of microBatchMs would time the test out)', async () => {
    const durability = postgresDurability(pool, { microBatchMs: 600_000 })
    try {
      const a = durability('mb3-a')
      const b = durability('mb3-b')
      const c = durability('mb3-c')
      await Promise.all([a.append([chunk(1)]), b.append([chunk(1)]), c.append([chunk(1)])])
      const [t] = await a.append([finished(2)])
      expect(t!.split('.')[2]).toBe('2')
      // b waits for company; c's close sends it
      const waiting = b.append([chunk(2)])
      await c.close()
      expect((await waiting)[0]!.split('.')[2]).toBe('2')
    } finally {
      await durability.close()
    }
  })

  it('MB4 one stream failing in a batch fails only its own append: the other is committed and resolves', async () => {
    const { c, durability, a, b, before } = await twoStreams('mb4', 60_000)
    try {
      // the server refuses b's part (a chunk must be a JSON object)
      const [ra, rb] = await Promise.allSettled([a.append([chunk(2)]), b.append([5 as unknown as StreamChunk])])
      expect(ra.status).toBe('fulfilled')
      expect(rb.status).toBe('rejected')
      expect((rb as PromiseRejectedResult).reason.code).toBe('INVALID_INPUT')
      // one batch, then each part on its own
      expect(c.appends() - before).toBe(3)
      await a.close()
      const entries = await all(durability('mb4-a').read('-1'))
      expect(entries.map((e) => (e.chunk as unknown as { delta: string }).delta)).toEqual(['d1', 'd2'])
      // b goes on after its failed append (alone now: a is closed)
      await b.append([chunk(3)])
      await b.close()
      expect((await all(durability('mb4-b').read('-1'))).length).toBe(2)
    } finally {
      await durability.close()
    }
  })

  it('MB5 microBatchMs 0 sends every append alone; a bad value is refused', async () => {
    const { c, durability, a, b } = await twoStreams('mb5', 0)
    try {
      await Promise.all([a.append([chunk(2)]), b.append([chunk(2)])])
      expect(c.appends()).toBe(4)
    } finally {
      await durability.close()
    }
    expect(() => postgresDurability(pool, { microBatchMs: -1 })).toThrow(/microBatchMs/)
  })
})
