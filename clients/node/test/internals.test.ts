/**
 * Error translation, retries and the shared listener, checked directly.
 */
import pg from 'pg'
import type { MetadataStore, RunStore, StreamDurability } from '@tanstack/ai'
import type { LockStore } from '@tanstack/ai/locks'
import { beforeAll, describe, expect, it } from 'vitest'
import {
  postgresDurability,
  postgresPersistence,
  postgresLocks,
  postgresRunStore,
  SandboxCheckpointConflictError,
  SandboxCheckpointError,
  SandboxCheckpointWriterLostError,
  SandboxPersistError,
  translateError,
} from '../src/index.js'
import { makePool, rejection, reset, rows, sleep, until } from './helpers.js'

const pool = makePool()

beforeAll(async () => {
  await reset(pool)
})

function pgError(code: string, message: string, detail?: string): Error {
  const error = new Error(message) as Error & { code: string; detail?: string }
  error.code = code
  if (detail !== undefined) error.detail = detail
  return error
}

describe('error translation (docs/contract/README.md §4)', () => {
  it('class SP errors carry the code name from errdetail', () => {
    const stale = translateError(pgError('SP001', 'stale head', 'SANDBOX_SNAPSHOT_STALE_HEAD: Expected head "1" but thread "a" is at "2".'))
    expect(stale).toBeInstanceOf(SandboxCheckpointConflictError)
    expect(stale).toMatchObject({ code: 'SANDBOX_SNAPSHOT_STALE_HEAD', message: 'Expected head "1" but thread "a" is at "2".' })
    const lost = translateError(pgError('SP006', 'lost'))
    expect(lost).toBeInstanceOf(SandboxCheckpointWriterLostError)
    const fork = translateError(pgError('SP011', 'x', 'SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY: Destination has state.'))
    expect(fork).toBeInstanceOf(SandboxCheckpointError)
    expect(fork).toMatchObject({ code: 'SANDBOX_SNAPSHOT_FORK_DESTINATION_NOT_EMPTY' })
    const epoch = translateError(pgError('SP201', 'epoch', 'RUN_EPOCH_NOT_INCREASING: 2 is not above 2.'))
    expect(epoch).toBeInstanceOf(SandboxPersistError)
    expect(epoch).toMatchObject({ code: 'RUN_EPOCH_NOT_INCREASING', sqlstate: 'SP201' })
    const batch = translateError(pgError('SP103', 'x', 'INTERRUPT_BATCH_NON_PENDING_ID: Interrupt batch references non-pending id: a.'))
    expect(Object.getPrototypeOf(batch)).toBe(Error.prototype)
    expect((batch as Error).message).toBe('Interrupt batch references non-pending id: a.')
  })

  it('plain bad input: 22xxx is TypeError, 22003 and 54000 RangeError; others pass through', () => {
    for (const code of ['22P02', '22023', '22004', '22001', '22021']) {
      expect(translateError(pgError(code, 'bad'))).toBeInstanceOf(TypeError)
    }
    expect(translateError(pgError('22003', 'range'))).toBeInstanceOf(RangeError)
    expect(translateError(pgError('54000', 'too large'))).toBeInstanceOf(RangeError)
    const denied = pgError('42501', 'permission denied')
    expect(translateError(denied)).toBe(denied)
    const other = new Error('socket hang up')
    expect(translateError(other)).toBe(other)
  })

  it('40001 and 40P01 are retried; the call then succeeds', async () => {
    let calls = 0
    const flaky = {
      query: (async (text: string, values: unknown[]) => {
        calls += 1
        if (calls === 1) throw pgError('40001', 'could not serialize access')
        if (calls === 2) throw pgError('40P01', 'deadlock detected')
        return pool.query(text, values)
      }) as unknown as pg.Pool['query'],
    }
    const runs = postgresRunStore(flaky)
    const created = await runs.createOrResume({ runId: 'retry-1', threadId: 't', startedAt: 1 })
    expect(created.runId).toBe('retry-1')
    expect(calls).toBe(3)
  })

  it('an SP901 without the setting reports CLIENT_CLOCK_NOT_ALLOWED', async () => {
    const client = await pool.connect()
    try {
      await client.query('SET sandbox_persist.allow_client_clock = off')
      const error = await rejection(client.query(`SELECT sandbox_persist.lock_acquire('k', 15000, 1)`).catch((e) => {
        throw translateError(e)
      }))
      expect(error).toBeInstanceOf(SandboxPersistError)
      expect(error.code).toBe('CLIENT_CLOCK_NOT_ALLOWED')
    } finally {
      await client.query('RESET sandbox_persist.allow_client_clock')
      client.release()
    }
  })
})

describe('types', () => {
  it("the stores satisfy @tanstack/ai's own RunStore, MetadataStore, LockStore and StreamDurability", () => {
    const stores = postgresPersistence(pool).stores
    const runs: RunStore = stores.runs
    const metadata: MetadataStore = stores.metadata
    const locks: LockStore = postgresLocks(pool)
    const durability: StreamDurability = postgresDurability(pool)('typed-run')
    expect([runs.listByThread, runs.listReclaimable, metadata.get, locks.withLock, durability.read].every((f) => typeof f === 'function')).toBe(true)
  })
})

describe('shared listener', () => {
  it('one listener connection per process; waiters survive its loss (polling, then reconnect)', async () => {
    const a = postgresLocks(pool, { pollMs: 100, maxPollMs: 300 })
    const b = postgresLocks(makePool({ max: 2 }), { pollMs: 100, maxPollMs: 300 })
    await a.withLock('listener-k', async () => undefined)
    await b.withLock('listener-k', async () => undefined)
    const listeners = async () =>
      rows<{ pid: number }>(pool, `SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN sandbox_persist_lock%' AND datname = current_database()`)
    const before = await listeners()
    expect(before).toHaveLength(1)
    await pool.query('SELECT pg_terminate_backend($1)', [before[0]!.pid])
    await sleep(100)
    let release!: () => void
    const holding = a.withLock('listener-k2', () => new Promise<void>((r) => (release = r)))
    await until(() => (release as unknown) !== undefined) // a has the lock
    const waiting = b.withLock('listener-k2', async () => 'got it')
    await sleep(300)
    release()
    await holding
    expect(await waiting).toBe('got it')
    expect(await listeners()).toHaveLength(1)
  })
})
