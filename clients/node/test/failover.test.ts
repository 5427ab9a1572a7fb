/**
 * The adapter across a failover (failover.ts; docs/contract/README.md §6 rule
 * 16, cases H1-H6): what a call that lost its connection reports, and what the
 * adapter retries by itself. Scripted pools play the failover; H6 kills a real
 * session mid-call. The end-to-end proof with Patroni is test/ha.
 */
import pg from 'pg'
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  FAILOVER_RETRY_MS,
  postgresDurability,
  postgresMetadataStore,
  SandboxPersistConnectionError,
  SandboxPersistError,
} from '../src/index.js'
import { makePool, rejection, reset, rows, sleep } from './helpers.js'

const pool = makePool()

beforeAll(async () => {
  await reset(pool)
})

afterEach(() => {
  vi.useRealTimers()
})

function pgError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code })
}

type Step = 'refuse' | 'timeout' | 'starting' | 'read_only' | 'drop' | 'terminated' | 'epipe' | 'reset' | 'ok'

/**
 * A pool whose successive connections behave as `script` says (then 'ok'): the
 * failure happens at connect, or after the statement was handed over. `sent`
 * lists the statements that reached a "server".
 */
function scriptedPool(script: Step[], answer: unknown = null) {
  let i = 0
  const sent: string[] = []
  const fake = {
    totalCount: 0,
    sent,
    async connect() {
      const step = script[i++] ?? 'ok'
      if (step === 'refuse') throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' })
      if (step === 'timeout') throw new Error('timeout expired')
      if (step === 'starting') throw pgError('57P03', 'the database system is starting up')
      return {
        async query(text: string, values: unknown[] = []) {
          // The adapter's version check on its first connection: no extension row.
          if (text.includes('pg_extension')) return { rows: [] }
          if (step === 'read_only') throw pgError('25006', 'cannot execute INSERT in a read-only transaction')
          sent.push(`${text} ${JSON.stringify(values)}`)
          if (step === 'drop') throw new Error('Connection terminated unexpectedly')
          if (step === 'terminated') throw pgError('57P01', 'terminating connection due to administrator command')
          // Node's system errors: five capitals, like a SQLSTATE, but with a syscall
          if (step === 'epipe') throw Object.assign(new Error('write EPIPE'), { code: 'EPIPE', errno: -32, syscall: 'write' })
          if (step === 'reset') throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104, syscall: 'read' })
          return { rows: [{ r: answer }] }
        },
        release() {},
        on() {},
        removeListener() {},
      }
    },
    query() {
      throw new Error('the adapter must take a connection first')
    },
  }
  return fake as unknown as pg.Pool & { sent: string[] }
}

describe('failover: lost connections (H)', () => {
  it('H1 a call that never reached a primary (refused, starting up, read-only) is retried and then succeeds', async () => {
    const db = scriptedPool(['refuse', 'timeout', 'starting', 'read_only', 'refuse'])
    await postgresMetadataStore(db).set('ns', 'k', { v: 1 })
    // metadata_set is not idempotent, yet safe to retry: no attempt reached a writable primary
    expect(db.sent.filter((t) => t.includes('metadata_set'))).toHaveLength(1)
  })

  it('H2 a write whose connection dropped after it was sent rejects with CONNECTION_LOST, outcomeUnknown, not retried', async () => {
    for (const step of ['drop', 'terminated', 'epipe', 'reset'] as const) {
      const db = scriptedPool([step])
      const error = await rejection(postgresMetadataStore(db).set('ns', 'k', { v: 1 }))
      expect(error).toBeInstanceOf(SandboxPersistConnectionError)
      expect(error).toBeInstanceOf(SandboxPersistError)
      expect(error).toMatchObject({ code: 'CONNECTION_LOST', outcomeUnknown: true, reason: 'dropped', attempts: 1 })
      expect(db.sent).toHaveLength(1)
    }
  })

  it('H3 idempotent calls are retried after an unknown outcome: reads and event-log appends with producer ids', async () => {
    const reads = scriptedPool(['drop', 'terminated'], { v: 2 })
    expect(await postgresMetadataStore(reads).get('ns', 'k')).toEqual({ v: 2 })
    expect(reads.sent).toHaveLength(3)

    const appends = scriptedPool(['drop'], [1])
    const durability = postgresDurability(appends, { listenerClient: () => new pg.Client({ host: '127.0.0.1', port: 1 }) })
    try {
      const adapter = durability('h3-run')
      const offsets = await adapter.append([{ type: 'CUSTOM', name: 'h3', value: 1, timestamp: 1 } as never])
      expect(offsets).toHaveLength(1)
      // the retry repeats the producer id and sequence of the first attempt
      expect(appends.sent).toHaveLength(2)
      expect(appends.sent[1]).toBe(appends.sent[0])
    } finally {
      await durability.close()
    }
  })

  it('H4 the retries stop after FAILOVER_RETRY_MS: CONNECTION_LOST, and outcomeUnknown stays true once an attempt was sent', async () => {
    vi.useFakeTimers()
    const never = scriptedPool(Array(100_000).fill('refuse'))
    const pending = rejection(postgresMetadataStore(never).set('ns', 'k', { v: 1 }))
    await vi.advanceTimersByTimeAsync(FAILOVER_RETRY_MS + 2_000)
    const error = await pending
    expect(error).toMatchObject({ code: 'CONNECTION_LOST', outcomeUnknown: false, reason: 'connect_failed' })
    expect(error.attempts as number).toBeGreaterThan(10)

    const mixed = scriptedPool(['drop', ...Array(100_000).fill('refuse')])
    const pendingRead = rejection(postgresMetadataStore(mixed).get('ns', 'k'))
    await vi.advanceTimersByTimeAsync(FAILOVER_RETRY_MS + 2_000)
    expect(await pendingRead).toMatchObject({ code: 'CONNECTION_LOST', outcomeUnknown: true })
  })

  it('H5 over a single client (no pool) nothing is retried; the error is still typed', async () => {
    let calls = 0
    const client = {
      query: (async () => {
        calls += 1
        throw new Error('Connection terminated unexpectedly')
      }) as unknown as pg.Pool['query'],
    }
    const error = await rejection(postgresMetadataStore(client).get('ns', 'k'))
    expect(error).toMatchObject({ code: 'CONNECTION_LOST', outcomeUnknown: true })
    expect(calls).toBe(1)
    const bug = new Error('not a connection failure')
    const broken = { query: (async () => { throw bug }) as unknown as pg.Pool['query'] }
    expect(await rejection(postgresMetadataStore(broken).get('ns', 'k'))).toBe(bug)
    // an ended pool is the app's doing, not a failover: reported at once, untranslated
    const ended = makePool({ max: 1 })
    await ended.end()
    const error2 = await rejection(postgresMetadataStore(ended).get('ns', 'k'))
    expect(error2).not.toBeInstanceOf(SandboxPersistConnectionError)
    expect(error2.message).toMatch(/end on the pool/)
  })

  it('H6 a session terminated mid-call: the write reports outcomeUnknown; the pool recovers', async () => {
    const metadata = postgresMetadataStore(pool)
    // A statement that waits on a lock this test holds, so the session can be killed mid-call.
    const holder = await pool.connect()
    try {
      await holder.query('BEGIN')
      await holder.query(`SELECT sandbox_persist.metadata_set('h6', 'k', '{"v":0}')`)
      const write = rejection(metadata.set('h6', 'k', { v: 1 }))
      let pid: number | undefined
      for (let i = 0; i < 200 && pid === undefined; i++) {
        const found = await rows<{ pid: number }>(pool,
          `SELECT pid FROM pg_stat_activity WHERE query LIKE '%metadata_set%' AND wait_event_type = 'Lock'`)
        pid = found[0]?.pid
        if (pid === undefined) await sleep(25)
      }
      expect(pid).toBeDefined()
      await pool.query('SELECT pg_terminate_backend($1)', [pid])
      const error = await write
      expect(error).toBeInstanceOf(SandboxPersistConnectionError)
      expect(error).toMatchObject({ code: 'CONNECTION_LOST', outcomeUnknown: true })
      await holder.query('COMMIT')
    } finally {
      holder.release()
    }
    // the pool is usable again, and reads come back
    expect(await metadata.get('h6', 'k')).toEqual({ v: 0 })
  })
})
