/**
 * The adapter across a failover that lost acknowledged commits
 * (docs/contract/failover.md): T14-T16. The failover is simulated as in
 * test/pgtap/failover.sql: the lost entries are deleted behind the adapter's
 * back, and a pool whose sessions set sandbox_persist.test_timeline stands for
 * the promoted standby's timeline.
 */
import type { StreamChunk } from '@tanstack/ai'
import { beforeEach, describe, expect, it } from 'vitest'
import {
  EventLogOffsetDivergedError,
  postgresCheckpoints,
  postgresDurability,
  postgresLocks,
  SandboxPersistError,
} from '../src/index.js'
import { makePool, rejection, reset, rows, sleep } from './helpers.js'

const pool = makePool()
const durability = postgresDurability(pool, { pollMs: 100 })

beforeEach(async () => {
  await reset(pool)
})

const chunk = (label: string): StreamChunk =>
  ({ type: 'TEXT_MESSAGE_CONTENT', messageId: 'm', delta: label, timestamp: 1 }) as unknown as StreamChunk

/** What the promoted standby lacks: the entries after keep, their ledger rows, the tail. */
async function loseLogAfter(runId: string, keep: number): Promise<void> {
  await pool.query(
    `WITH l AS (SELECT log_id FROM sandbox_persist.event_logs WHERE run_id = $1),
          e AS (DELETE FROM sandbox_persist.event_log_entries WHERE log_id IN (SELECT log_id FROM l) AND seq > $2),
          p AS (DELETE FROM sandbox_persist.event_log_producers WHERE log_id IN (SELECT log_id FROM l) AND first_seq > $2)
     UPDATE sandbox_persist.event_logs g SET tail_seq = $2,
            tail_digest = coalesce((SELECT digest FROM sandbox_persist.event_log_entries x
                                     WHERE x.log_id = g.log_id AND x.seq = $2), 0)
      WHERE g.run_id = $1`,
    [runId, keep],
  )
}

async function readAll(iterable: AsyncIterable<{ offset: string; chunk: StreamChunk }>, n: number) {
  const out: Array<{ offset: string; chunk: StreamChunk }> = []
  for await (const e of iterable) {
    out.push(e)
    if (out.length === n) break
  }
  return out
}

describe('event log across a lost-commit failover', () => {
  it('T14 a reader resuming with an offset the new primary cannot vouch for gets EventLogOffsetDivergedError, never the new chunks', async () => {
    const producer = durability('t14-run')
    await producer.append([chunk('1'), chunk('2')])
    await producer.append([chunk('old 3'), chunk('old 4'), chunk('old 5')])
    const seen = await readAll(durability('t14-run').read('-1'), 5)
    expect(seen.map((e) => (e.chunk as unknown as { delta: string }).delta)).toEqual(['1', '2', 'old 3', 'old 4', 'old 5'])

    await loseLogAfter('t14-run', 2)
    // Past the new tail: the lost entries are simply not there.
    const lost = await rejection(durability('t14-run').read(seen[2]!.offset)[Symbol.asyncIterator]().next())
    expect(lost).toBeInstanceOf(EventLogOffsetDivergedError)
    expect(lost).toBeInstanceOf(SandboxPersistError)
    expect(lost.code).toBe('EVENT_LOG_OFFSET_DIVERGED')
    expect(lost.sqlstate).toBe('SP405')

    // The producer's retry (a new adapter instance: new producer id) writes other chunks as 3-5.
    const retry = await durability('t14-run').append([chunk('new 3'), chunk('new 4'), chunk('old 5')])
    expect(retry.map((o) => o.split('.')[2])).toEqual(['3', '4', '5'])
    const diverged = await rejection(durability('t14-run').read(seen[2]!.offset)[Symbol.asyncIterator]().next())
    expect(diverged).toBeInstanceOf(EventLogOffsetDivergedError)
    // Its own chunk is the same as before, an earlier one is not: still refused.
    const sameChunk = await rejection(durability('t14-run').read(seen[4]!.offset)[Symbol.asyncIterator]().next())
    expect(sameChunk).toBeInstanceOf(EventLogOffsetDivergedError)

    // A browser resuming through Last-Event-ID gets the same error.
    const resumed = durability(
      new Request('http://app.test/chat', { headers: { 'X-Run-Id': 't14-run', 'Last-Event-ID': seen[3]!.offset } }),
    )
    expect(resumed.resumeFrom()).toBe(seen[3]!.offset)
    const browser = await rejection(resumed.read(resumed.resumeFrom()!)[Symbol.asyncIterator]().next())
    expect(browser).toBeInstanceOf(EventLogOffsetDivergedError)

    // An offset from before the lost window still resumes, into the new stream.
    const fromTwo = await readAll(durability('t14-run').read(seen[1]!.offset), 3)
    expect(fromTwo.map((e) => (e.chunk as unknown as { delta: string }).delta)).toEqual(['new 3', 'new 4', 'old 5'])
    expect(fromTwo.map((e) => e.offset)).toEqual(retry)
  })

  it('T15 a reader parked across the failover fails on its next page instead of continuing a rewritten stream', async () => {
    const producer = durability('t15-run')
    await producer.append([chunk('1'), chunk('2'), chunk('old 3')])
    const controller = new AbortController()
    const seen: string[] = []
    let failure: unknown
    const consuming = (async () => {
      try {
        for await (const e of durability('t15-run').read('-1', controller.signal)) {
          seen.push((e.chunk as unknown as { delta: string }).delta)
        }
      } catch (error) {
        failure = error
      }
    })()
    while (seen.length < 3) await sleep(10)
    await loseLogAfter('t15-run', 2)
    await durability('t15-run').append([chunk('new 3'), chunk('new 4')])
    const deadline = Date.now() + 5_000
    while (failure === undefined && Date.now() < deadline) await sleep(20)
    controller.abort()
    await consuming
    expect(seen).toEqual(['1', '2', 'old 3'])
    expect(failure).toBeInstanceOf(EventLogOffsetDivergedError)
  })

  it('T16 a 0.3.0 offset (v1.<tag>.<seq>) still reads, unverified for its first page', async () => {
    const producer = durability('t16-run')
    const offsets = await producer.append([chunk('1'), chunk('2'), chunk('3')])
    const v1 = offsets[0]!.split('.').slice(0, 3).join('.').replace(/^v2/, 'v1')
    const rest = await readAll(durability('t16-run').read(v1), 2)
    expect(rest.map((e) => e.offset)).toEqual(offsets.slice(1))
  })
})

describe('fences across a timeline change', () => {
  // The promoted standby's sessions: their fences carry timeline 3.
  const promoted = makePool({ options: '-c sandbox_persist.test_timeline=3' })
  const floor3 = 2 * 2 ** 40

  it('T17 a writer fence above 2^40 round-trips exactly through the adapter: renew and release accept it', async () => {
    const before = await postgresCheckpoints(pool).acquireWriter('t17-thread')
    expect(before.fence).toBe(1)
    await pool.query(`UPDATE sandbox_persist.checkpoint_threads SET lease_expires_at = 0 WHERE thread_id = 't17-thread'`)
    const store = postgresCheckpoints(promoted)
    const lease = await store.acquireWriter('t17-thread')
    expect(lease.fence).toBe(floor3 + 1)
    expect(Number.isSafeInteger(lease.fence)).toBe(true)
    const [row] = await rows<{ fence: string }>(pool, `SELECT fence::text FROM sandbox_persist.checkpoint_threads WHERE thread_id = 't17-thread'`)
    expect(row!.fence).toBe(String(floor3 + 1))
    await lease.renew()
    await lease.release()
    const [after] = await rows<{ owner_token: string | null }>(pool, `SELECT owner_token::text FROM sandbox_persist.checkpoint_threads WHERE thread_id = 't17-thread'`)
    expect(after!.owner_token).toBeNull()
  })

  it('T18 withLock on the promoted timeline runs under a fence past every earlier one', async () => {
    const locks = postgresLocks(promoted)
    try {
      const held = await locks.withLock('t18-key', async () => {
        const [row] = await rows<{ fence: string }>(pool, `SELECT fence::text FROM sandbox_persist.locks WHERE lock_key = 't18-key'`)
        return row!.fence
      })
      expect(held).toBe(String(floor3 + 1))
    } finally {
      await locks.close()
    }
  })
})
